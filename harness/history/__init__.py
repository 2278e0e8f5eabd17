"""Run history and regression tracking (issue 6).

Runs are imported into an embedded SQLite database keyed by run, machine and cell, each run tagged with the series
(machine fingerprint) it belongs to; `compare` checks a run against its baseline in its series; `merge` combines the
runs of several machines. See docs/regression-tracking.md.

Entry points: `harness.history.cli.main_import/main_compare/main_merge(argv) -> int`; for the report stage,
`report_data` (read-only) and `import_run_dir` (to import a finished run first).
"""

from harness.history.report import report_data
from harness.history.store import default_db_path, import_run_dir

__all__ = ["default_db_path", "import_run_dir", "report_data"]
