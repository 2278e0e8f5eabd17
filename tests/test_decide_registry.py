"""A use case registered from a test module appears in decision.json and on the page with no other edit; the
registry refuses a key twice; report/ renders what decide/ answered."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.decide import registry
from harness.decide.index import RunIndex, machine_label
from harness.decide.picks import Constraints, Pick, UseCaseAnswer
from harness.decide.registry import ALWAYS, Outcome
from harness.report import render_report

SAMPLE = Path(__file__).resolve().parent.parent / "results" / "samples" / "2026-11-25-cpu-2core-default"


@dataclass(frozen=True)
class Drone:
    """A drone at 15 FPS under a memory budget: the fastest batch-1 cell whose host peak RSS is under 300 MiB."""

    key: str = "drone-test"
    order: int = 15
    first_screen: str = ALWAYS
    scenario: str | None = None
    budget_mib: float = 300.0

    def decide(self, indexes: list[RunIndex], cons: Constraints) -> list[Outcome]:
        out = []
        for idx in indexes:
            fits = [
                r
                for r in idx.cells
                if r.status == "ok"
                and r.memory is not None
                and r.memory.host_peak_rss_mib is not None
                and r.memory.host_peak_rss_mib <= self.budget_mib
            ]
            best = min(fits, key=lambda r: (r.memory.host_peak_rss_mib, r.cell_id), default=None)
            machine = machine_label(idx, indexes)
            pick = None
            if best is not None:
                fig = f"host peak RSS {best.memory.host_peak_rss_mib:.0f} MiB"
                pick = Pick(str(best.backend), str(best.device), machine, str(best.cell_id), fig, fig)
            answer = UseCaseAnswer(
                self.key, "Drone, 15 FPS", f"least memory under {self.budget_mib:g} MiB", winner=pick,
                none_reason=None if pick else f"no cell fits {self.budget_mib:g} MiB", machine=machine,
                machine_pos=idx.position,
            )  # fmt: skip
            entry = {"use_case": self.key, "machine": machine, "pick": pick.cell_id if pick else None}
            out.append(Outcome(answer, entry))
        return out


@pytest.fixture
def drone():
    def add(case: Drone) -> Drone:
        registry.register_use_case(case)
        return case

    yield add
    registry.unregister_use_case("drone-test")


@pytest.mark.parametrize("budget, picked", [(10_000.0, True), (1.0, False)])
def test_a_use_case_registered_in_a_test_module_reaches_decision_json_and_the_page(
    tmp_path, drone, budget, picked
):
    drone(Drone(budget_mib=budget))
    index = render_report([SAMPLE], tmp_path)
    entries = json.loads((index.parent / "decision.json").read_text())["decisions"]
    mine = [e for e in entries if e["use_case"] == "drone-test"]
    assert len(mine) == 1 and (mine[0]["pick"] is not None) is picked
    page = index.read_text()
    assert "Drone, 15 FPS" in page
    assert ("no cell fits 1 MiB" in page) is not picked
    # page order: its `order` (15) puts it after the camera (10) and before the camera capacity (25)
    assert page.index("Drone, 15 FPS") < page.index("Cameras at 30 FPS")


def test_a_use_case_key_registers_once(drone):
    drone(Drone())
    with pytest.raises(ValueError, match="registered twice"):
        registry.register_use_case(Drone())


def test_every_use_case_module_registers_and_the_page_order_is_the_registry_s():
    keys = [c.key for c in registry.use_cases()]
    # the migration answers first (shown only where a run holds their family), then the deployment use cases
    assert keys[:7] == [
        "from-yolo11", "from-yolov8", "camera", "camera-capacity", "server", "offline", "lowest-memory"
    ]  # fmt: skip
    assert {"mobile-embedded", "cpu-edge", "gpu-latency", "gpu-throughput", "dynamic", "simplest"} <= set(
        keys
    )


def test_decide_never_imports_report():
    root = Path(__file__).resolve().parent.parent / "harness" / "decide"
    for path in root.rglob("*.py"):
        assert "harness.report" not in path.read_text(), path
