"""The machine's speed figures (harness.measure.machine_speed): their structure and positivity, never their value
(a speed is not asserted on a shared machine); a figure that cannot be measured is null with its reason."""

from __future__ import annotations

import torch

from harness.measure import machine_speed


def test_both_figures_are_measured_positive_and_said_what_they_timed():
    before = torch.get_num_threads()
    speed = machine_speed.measure(threads=1)
    assert isinstance(speed["python_s"], float) and speed["python_s"] > 0
    assert isinstance(speed["compute_s"], float) and speed["compute_s"] > 0
    assert "conv2d" in speed["compute"] and "1 thread" in speed["compute"] and speed["threads"] == 1
    assert "null_reasons" not in speed and speed["measured_in_s"] > 0
    assert torch.get_num_threads() == before  # the run's thread budget is left as it was


def test_a_figure_that_cannot_be_measured_is_null_with_its_reason(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no Python today")

    monkeypatch.setattr(machine_speed, "python_work", broken)
    speed = machine_speed.measure()
    assert speed["python_s"] is None and "no Python today" in speed["null_reasons"]["python_s"]
    assert speed["compute_s"] > 0  # the other is measured still


def test_env_json_records_the_speed_at_the_runs_start():
    from harness.core import envinfo
    from harness.measure import machine

    env = envinfo.collect("r1", facts=machine.facts(threads=1))
    assert env["machine_speed"]["python_s"] > 0 and env["machine_speed"]["threads"] == 1
    # the other way: facts gathered without it leave the key out
    assert "machine_speed" not in envinfo.collect("r1", facts=machine.facts(threads=1, speed=False))
