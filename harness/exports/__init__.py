"""Exports of a run for tools outside the harness: Bencher Metric Format JSON (dashboards) and a CSV table."""
