"""Each cell's expected seconds and its source (harness.plan.price over harness.plan.durations' history), from fake
(synthetic) records; and the `durations` command."""

from __future__ import annotations

import json
import os

import pytest

from harness.core.axes import GFLOPS_640, Shape
from harness.core.cell import Cell
from harness.history import synthetic
from harness.plan import price
from harness.plan.durations import history_from_runs
from harness.pytest_plugin import durations_file

N640 = synthetic.cell("onnxruntime", size="n", device="cpu", height=640)
S640 = synthetic.cell("onnxruntime", size="s", device="cpu", height=640)
OV = synthetic.cell("openvino", size="s", device="cpu", height=640)
EXPONENTS = {"export": 0.3, "load": 0.5, "timing": 0.0, "stages": 0.5}


def table() -> price.Table:
    default = price.Entry("family default other", Cell("n", "detect", "e2e", "(other)", "", Shape(640, 640)),
                          {"export": 4.0, "probe": 2.0, "load": 1.0, "timing": 3.0, "stages": 4.0}, None)  # fmt: skip
    return price.Table(families={"other": default}, exponents=EXPONENTS, cache_hit_s=2.0)


def costs_of(cells, hist, **kw) -> dict[str, price.CellCost]:
    prices = price.price_cells(cells, price.Known(table(), history=hist, cached=frozenset(kw.pop("cached", ()))),
                               **kw)  # fmt: skip
    return price.cell_costs(prices, 0.5)


def rec(c, *, status="ok", export_s=10.0, p50=5.0, at="2026-12-01T01:00:00+00:00", duration_s=40.0) -> dict:
    """A record's fields the plan reads (synthetic)."""
    return {
        "synthetic": True, "cell_id": c.id, "status": status, "backend": c.backend, "device": c.device,
        "size": c.size, "height": c.shape.height, "width": c.shape.width, "batch": c.batch, "cache_hit": False,
        "export_s": export_s, "load_s": 0.0, "started_at": at, "duration_s": duration_s,
        "latency_ms": {"p50": p50},
    }  # fmt: skip


def night(run_id: str, at: str, records: list[dict], selected: list[str] | None = None):
    env = {"plan": {"selected_ids": selected}} if selected else {}
    return (run_id, at, records, env)


def test_history_cost_is_the_records_parts_scaled_to_the_runs_wall():
    # two cells of 10 s of export each (5 s each at the export share 0.5), a run of 40 s: each costs 20 s
    hist = history_from_runs([night("n1", "2026-12-01", [rec(N640), rec(OV)])])
    assert hist.measured[N640.id].seconds == pytest.approx(20.0)
    costs = costs_of([N640, OV], hist, cached=[OV.id])
    assert costs[N640.id].source == "history" and costs[N640.id].seconds == pytest.approx(20.0)
    # a cached export now: the table's cache-hit cost (2 s at the share), not the 20 s export share
    assert costs[OV.id].source == "history" and costs[OV.id].seconds == pytest.approx(1.0)


def test_nearest_cell_of_the_same_backend_and_device_scaled_by_work():
    hist = history_from_runs([night("n1", "2026-12-01", [rec(N640)], None)])
    costs = costs_of([S640, OV], hist)
    assert costs[S640.id].source == "nearest"
    # N640: 10 s of export in a 40 s run: its export part 80 s (40 s at the share); S640's by the model's work
    model = GFLOPS_640["s"] / GFLOPS_640["n"]
    assert costs[S640.id].seconds == pytest.approx(40.0 * model ** EXPONENTS["export"])
    # the other way: no measured cell of openvino on cpu, so the plan's table
    assert costs[OV.id].source == "plan" and costs[OV.id].seconds > 0
    # and a skip here costs nothing, whatever is known
    assert costs_of([N640], hist, skips=[N640.id])[N640.id].seconds == 0.0


def test_regressed_failed_and_missing_from_the_history():
    runs = [
        night("n1", "2026-12-01", [rec(N640, p50=5.0), rec(S640, p50=5.0)]),
        night("n2", "2026-12-02", [rec(N640, p50=6.0), rec(S640, p50=5.2), rec(OV, status="run_failed")],
              selected=[N640.id, S640.id, OV.id, "yolo26x-never-recorded"]),
    ]  # fmt: skip
    hist = history_from_runs(runs)
    assert hist.regressed == {N640.id}  # 20% slower; S640 4% slower is not
    assert hist.failed == {OV.id}
    assert hist.missing == {"yolo26x-never-recorded"}
    assert hist.measured[N640.id].started_at == "2026-12-02"


# ---- issue 40: `durations` as every command: one-line errors, -o checked before any work -----------------------


@pytest.fixture
def no_work(monkeypatch):
    """`durations` whose estimate is never to be reached (it takes 16 s of planning on the nightly profile)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the estimate ran: the output path was not checked first")

    monkeypatch.setattr(durations_file, "durations", refuse)


def _one_line(capsys, *needles: str) -> str:
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(n in err for n in needles), err
    return err


def test_durations_into_a_directory_a_link_or_a_missing_directory_is_one_line_before_any_work(
    tmp_path, capsys, no_work
):
    (tmp_path / "dir").mkdir()
    target = tmp_path / "target.json"
    target.write_text("keep\n")
    os.symlink(target, tmp_path / "link")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    cases = {
        "dir": "exists and is not a regular file",  # was: 16 s of work, then an IsADirectoryError traceback
        "link": "is a symbolic link",  # was: the link followed and its target overwritten
        "dangling": "is a symbolic link",
        "missing/dir/f.json": "its directory",  # was: the directories created (export refuses the same path)
    }
    for name, why in cases.items():
        assert durations_file.main(["-o", str(tmp_path / name)]) == 2, name
        err = _one_line(capsys, "argument -o/--output: ", why)
        assert " durations: error: " in err
    assert target.read_text() == "keep\n" and not (tmp_path / "missing").exists()
    assert not (tmp_path / "nowhere").exists()


def test_durations_usage_errors_are_one_line(capsys, no_work):
    assert durations_file.main([]) == 2  # was: argparse's usage block and the error, 4 lines
    _one_line(capsys, " durations: error: the following arguments are required: -o/--output")
    assert durations_file.main(["-o", "x.json", "--bogus"]) == 2
    _one_line(capsys, "unrecognized arguments: --bogus")
    assert durations_file.main(["-o", "x.json", "--profile", "no-such"]) == 2
    _one_line(capsys, " durations: error: --profile: unknown 'no-such'")
    assert durations_file.main(["-o", "x.json", "--scenarios", "some\nmore"]) == 2
    _one_line(capsys, " durations: error: --scenarios: unknown 'some\\nmore'")


def test_durations_replaces_an_existing_file_whole(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        durations_file,
        "durations",
        lambda *a: ({"suites/test_matrix.py::test_cell[c]": 12.5}, {"plan": 1}),
    )
    out = tmp_path / "durations.json"
    out.write_text("old\n")
    assert durations_file.main(["--profile", "quick", "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == {"suites/test_matrix.py::test_cell[c]": 12.5}
    assert "1 cells" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["durations.json"]  # no temp file left


@pytest.mark.process
def test_durations_prints_no_library_noise_and_keeps_its_own_warnings(tmp_path):
    """Issue 66: `durations` printed 13 lines of the libraries' import-time chatter on stderr (coremltools' and
    torchao's versions, torch's pytree deprecation) as each backend's probe imported them; only the harness's own
    warnings show now (the other way: a history that cannot be read is still said)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo)}

    def durations(*extra: str) -> subprocess.CompletedProcess:
        argv = ["--profile", "quick", "-o", str(tmp_path / "d.json"), "--results-dir", str(tmp_path)]
        return subprocess.run(
            [sys.executable, "-m", "harness", "durations", *argv, "--cache-dir", str(tmp_path / "c"), *extra],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    quiet = durations()
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert json.loads((tmp_path / "d.json").read_text())
    (tmp_path / "bad.sqlite").write_text("not a database")
    warned = durations("--db", str(tmp_path / "bad.sqlite"))
    assert warned.returncode == 0 and warned.stderr.splitlines() == [
        f"plan: history {tmp_path / 'bad.sqlite'} not read (file is not a database): estimates from the cache "
        "and the plan"
    ], warned.stderr
