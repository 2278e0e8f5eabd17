"""The README's use-case example ("A use case", under Extending), run as written: a drone at 15 FPS with at most
400 MiB of host memory, registered from this test module, decides on the committed default run both ways: a pick
where a configuration keeps its e2e p99 within 66.7 ms and its host peak RSS within 400 MiB, and none (each
rejection naming its figure) where none does; its answer reaches decision.json and the page."""

from __future__ import annotations

import json
import re
import textwrap
import types
from pathlib import Path

import pytest

from harness.core.record_codec import record_to_json
from harness.core.results_dir import load_run, read_records
from harness.decide import registry
from harness.decide.index import index_runs
from harness.decide.picks import Constraints
from harness.report import render_report

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "results" / "samples" / "2026-11-28-cpu-2core-default"


def readme_block() -> str:
    """The python block of the README's "A use case" item, dedented as a module's source."""
    text = (ROOT / "README.md").read_text()
    start = text.index("- **A use case**")
    m = re.search(r"```python\n(.*?)\n\s*```", text[start:], re.S)
    assert m, "the README's use-case item has no python block"
    return textwrap.dedent(m.group(1))


@pytest.fixture
def drone():
    """The README's block run as a module of its own (it registers the use case "drone"); unregistered after."""
    source = readme_block()
    assert source.startswith("# harness/decide/usecases/drone.py")
    module = types.ModuleType("drone_from_readme")
    exec(compile(source, "README.md", "exec"), module.__dict__)
    yield registry.get("drone")
    registry.unregister_use_case("drone")


def _decide(case, run_dir: Path):
    return case.decide(index_runs(load_run(run_dir)), Constraints())[0]


def test_the_readme_drone_gets_a_pick_within_its_frame_time_and_memory_and_reaches_the_page(drone, tmp_path):
    out = _decide(drone, SAMPLE)
    winner = out.answer.winner or out.answer.tied[0]
    rec = next(r for r in read_records(SAMPLE) if r.cell_id == winner.cell_id)
    assert rec.memory.host_peak_rss_mib <= 400
    assert out.entry["pick"] is not None and out.answer.title == "Drone, 15 FPS"
    # every rejection of the memory check names the figure that failed
    memory = [r for r in out.answer.rejections if r.constraint == "memory"]
    assert memory and all("over 400 MiB" in r.why for r in memory)
    index = render_report([SAMPLE], tmp_path / "report")
    entries = json.loads((index.parent / "decision.json").read_text())["decisions"]
    assert [e["use_case"] for e in entries].count("drone") == 1
    assert "Drone, 15 FPS" in index.read_text()


def test_the_readme_drone_gets_none_where_no_configuration_fits_400_mib(drone, tmp_path):
    run = tmp_path / "heavy"
    run.mkdir()
    (run / "env.json").write_text((SAMPLE / "env.json").read_text())
    recs = read_records(SAMPLE)
    for r in recs:
        if r.memory is not None and r.memory.host_peak_rss_mib is not None:
            r.memory.host_peak_rss_mib = 512.0
    (run / "cells.jsonl").write_text("\n".join(record_to_json(r) for r in recs) + "\n")
    out = _decide(drone, run)
    assert out.answer.winner is None and not out.answer.tied and out.entry["pick"] is None
    assert any(r.why == "host peak RSS 512 MiB over 400 MiB" for r in out.answer.rejections)
    # the frame time is the drone's own (66.7 ms at 15 FPS), not --camera-fps's 33.3 ms
    assert not any("33.3 ms frame time" in r.why for r in out.answer.rejections)
