"""Write the plan's table of prices (harness/plan/prices.yaml) from cold runs: never typed by hand.

    .venv/bin/python scripts/plan_prices.py RUN_DIR [RUN_DIR ...] [--extra RUN_DIR] [-o harness/plan/prices.yaml]
        [--max-time 3] [--thread-scaling FILE]

Each RUN_DIR is a run's results directory (timeline.json, cells.jsonl, env.json; its env.json's or timeline's
`machine_speed` is the reference speed its prices scale from, null where the run measured none: factor 1). Where
several runs price the same cell, the newest (env.json's started_at) wins. Per cell that ran (not a skip, not a
dynamic probe), its parts in seconds (harness.plan.price.PARTS):

- export: the record's fresh export_s; probe: the cell's export-phase seconds (timeline prep_s) less its export;
- load: load_s (with any compile) plus the first run; timing: its workload's share of the timing phase
  (timeline timing_s) less the workload's loads, split evenly over its cells; timing_floor: the timing at the
  run's fewest trials (timing x fewest / its trials: equal to the timing where that floor held it up);
- stages and scenarios: its workload's own seconds (timeline workload_s) split over its cells: a workload none of
  whose cells ran the scenarios splits evenly into stages; otherwise each cell's stages are priced from the run's
  scenario-free workloads of its backend (nearest work, scaled by work) and the rest goes evenly to the cells that
  ran the scenarios (their records hold `scenarios`). Runs that wrote each cell's parts (timeline `cell_s`) give
  them as they are.

Then: the exponents of work (a part scales as work ratio ** exponent; fitted by least squares on log-log within
each backend, device and precision, clamped to [0, 1]; export and probe against the model's GFLOPs, the other parts
against GFLOPs x pixels; the timing's against the entries the time cap ended, the floor's against all; scenarios 0,
LoadGen's durations being wall-clock); each family's default (executorch, compile, tensorrt, eager, other: the
median of its fp32 entries brought to yolo26n at 640x640 by those exponents; PRIORS for a family no run measured);
the cache hit's cost (the median export-phase seconds of cells whose export came from the cache, PRIORS where no
run had one), the cells run alone, the end, the scenarios' median, and the newest run's scenario phase: its seconds
and the answers it measured for (env.json scenario_phase: the use cases its configurations were measured for).

Each dynamic-shape probe any run (RUN_DIR or --extra) ran alone is priced on its own too (`alone_cells`: its
seconds run alone, remedies included, newest first), beside the median of every kind (`alone`).

`--thread-scaling FILE` (benchmarks/thread_scaling.py's JSON, measured on an idle machine): the speed probe's and
yolo26n's speedups over 1 thread, for a run at another thread count than its price's (harness.plan.thread_scaling).

`--extra RUN_DIR` (a run of another profile, such as `--profile claims --fake-cuda`): of it only what the cold runs
cannot price: its dynamic probes (above) and its cells whose export was traced on a fake CUDA device (status traced
or trace_failed, not a remedy), which go to the table's `traced` section, each priced at its export-phase seconds
as its export, every other part 0 (the estimator prices such a cell's export alone, and only a traced cell from that
section: harness.plan.price.export_only). Nothing else of that run enters the table (cells, families, exponents,
cache hits, the end, the medians run alone stay the cold runs'), and it is listed before them in `runs`, so the
newest cold run stays the reference speed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.axes import Shape  # noqa: E402
from harness.core.cell import Cell  # noqa: E402
from harness.core.record import TRACED_STATUSES  # noqa: E402
from harness.execute.workload import workload_label  # noqa: E402
from harness.plan import durations  # noqa: E402
from harness.plan.price import BODY, FAMILIES, PREP, PRICES_FILE, family, split_own, work  # noqa: E402
from harness.plan.price_table import cell_key  # noqa: E402

FITTED = ("export", "probe", "load", "timing", "timing_floor", "stages")
#: figures no cold run has measured yet: the earlier hand calibrations (2-core CPU, yolo26n at 640), used only
#: where the runs given have no entry of their own; each is marked `run: null` in the table
PRIORS = {
    "families": {
        "executorch": {"export": 24.0, "probe": 6.0, "load": 0.1, "timing": 3.0, "stages": 3.6},
        "compile": {"export": 0.0, "probe": 3.0, "load": 100.0, "timing": 3.0, "stages": 3.6},
        "tensorrt": {"export": 120.0, "probe": 5.0, "load": 2.0, "timing": 3.0, "stages": 3.6},
        "eager": {"export": 0.0, "probe": 2.0, "load": 0.2, "timing": 3.0, "stages": 3.6},
        "other": {"export": 4.0, "probe": 3.0, "load": 0.2, "timing": 3.0, "stages": 3.6},
    },
    "work_exponent": {
        "export": 0.35,
        "probe": 0.35,
        "load": 0.5,
        "timing": 0.0,
        "timing_floor": 0.7,
        "stages": 0.35,
    },
    "cache_hit_s": 2.0,
    "alone": {"dynamic": 30.0, "other": 0.0},
}
MIN_S = 0.05  # figures below this are noise for a fit


def cell_of(rec: dict) -> Cell:
    shape = Shape(rec.get("height") or 0, rec.get("width") or 0, bool(rec.get("dynamic")))
    return Cell(rec["size"], rec["task"], rec["head"], rec["backend"], rec["device"], shape,
                int(rec.get("batch") or 1), rec.get("precision_requested") or "fp32")  # fmt: skip


def read_run(run_dir: Path) -> dict:
    timeline = json.loads((run_dir / durations.TIMELINE).read_text(encoding="utf-8"))
    env = json.loads((run_dir / "env.json").read_text(encoding="utf-8"))
    records = [
        json.loads(line) for line in (run_dir / "cells.jsonl").read_text().splitlines() if line.strip()
    ]
    speed = env.get("machine_speed") or timeline.get("machine_speed")
    host = env.get("host") or {}
    phase = env.get("scenario_phase") or {}
    return {
        "dir": run_dir,
        "timeline": timeline,
        "records": records,
        # the use cases its scenario phase measured for ("camera pick", "server fastest": camera, server)
        "phase_answers": sorted(
            {str(f).split()[0] for m in phase.get("measured") or [] for f in m.get("for") or []}
        ),
        "info": {
            "run_id": env.get("run_id") or timeline.get("run_id"),
            "started_at": env.get("started_at"),
            "commit": env.get("git_commit"),
            "cpu_model": host.get("cpu_model"),
            "cpu_cores_physical": host.get("cpu_cores_physical"),
            "machine_speed": {k: speed[k] for k in ("python_s", "compute_s", "threads") if k in speed}
            if speed
            else None,
            "wall_s": timeline.get("wall_s"),
            "estimate_at_start_s": timeline.get("estimate_at_start_s"),
            "export_parallelism": timeline.get("parallelism"),
        },
    }


def fit(points: dict[tuple, list[tuple[float, float]]], prior: float) -> float:
    """The pooled within-group slope of log(value) on log(work), clamped to [0, 1]; `prior` without 2 points."""
    sxy = sxx = 0.0
    for pts in points.values():
        pts = [(math.log(w), math.log(v)) for w, v in pts if w and v > MIN_S]
        if len(pts) < 2:
            continue
        mx, my = statistics.fmean(p[0] for p in pts), statistics.fmean(p[1] for p in pts)
        sxy += sum((x - mx) * (y - my) for x, y in pts)
        sxx += sum((x - mx) ** 2 for x, _ in pts)
    return round(min(1.0, max(0.0, sxy / sxx)), 3) if sxx > 0 else prior


def exponents(entries: list[tuple[Cell, dict]]) -> dict[str, float]:
    """Each part's exponent of work, fitted within each run, backend, device and precision (PRIORS without data)."""
    out = {}
    for part in FITTED:
        points: dict[tuple, list] = {}
        for c, p in entries:
            if part == "timing" and p.get("timing_floor", 0) >= 0.95 * p.get("timing", 0):
                continue  # the cap's share: only the timings the cap ended
            if part == "stages" and p.get("_scenario_workload"):
                continue
            w = work(
                c.size, c.shape.height, c.shape.width, c.batch, "timing" if part == "timing_floor" else part
            )
            points.setdefault((p["_run"], c.backend, c.device, c.precision), []).append((w, p.get(part, 0.0)))
        out[part] = fit(points, PRIORS["work_exponent"][part])
    out["scenarios"] = 0.0
    return out


def traced_entries(run: dict) -> list[tuple[Cell, dict]]:
    """The run's cells traced on a fake CUDA device: (cell, parts) with its export-phase seconds as the export."""
    prep = run["timeline"].get("prep_s") or {}
    out = []
    for rec in run["records"]:
        if rec.get("remedy_of") or rec.get("status") not in TRACED_STATUSES:
            continue
        c = cell_of(rec)
        s, hit = prep.get(c.id, (None, False))
        if s is None or hit or c.shape.dynamic:
            continue  # not in the export phase, a cache hit, or a dynamic probe (run alone): no export to price
        out.append((c, {**dict.fromkeys((*PREP, *BODY, "timing_floor"), 0.0), "export": float(s)}))
    return out


def dynamic_probes(run: dict) -> list[tuple[Cell, float]]:
    """The run's dynamic-shape probes (not remedies) with their seconds run alone (timeline alone_s)."""
    alone = run["timeline"].get("alone_s") or {}
    out = []
    for rec in run["records"]:
        if rec.get("remedy_of") or rec.get("status") == "skipped" or rec["cell_id"] not in alone:
            continue
        c = cell_of(rec)
        if c.shape.dynamic:
            out.append((c, float(alone[rec["cell_id"]])))
    return out


def run_entries(run: dict) -> tuple[list[tuple[Cell, dict]], list[float], dict[str, list[float]]]:
    """The run's priced cells (cell, parts), its cache hits' export-phase seconds, and its lone cells' seconds."""
    t, records = run["timeline"], run["records"]
    floor = durations.floor_trials(records)
    prep = t.get("prep_s") or {}
    hits = [float(s) for s, hit in prep.values() if hit]
    alone: dict[str, list[float]] = {"dynamic": [], "other": []}
    by_label: dict[str, list[tuple[Cell, dict, dict]]] = {}
    for rec in records:
        if rec.get("remedy_of") or rec.get("status") == "skipped":
            continue
        c = cell_of(rec)
        if c.shape.dynamic:
            if rec["cell_id"] in (t.get("alone_s") or {}):
                alone["dynamic"].append(float(t["alone_s"][rec["cell_id"]]))
            continue
        s, hit = prep.get(c.id, (None, False))
        if s is None or hit:
            continue  # not in the export phase, or a cache hit: no fresh export to price
        parts = durations.record_parts(rec, floor)
        parts["probe"] = max(0.0, float(s) - parts["export"])
        # in the cell's workload: the scenario phase's (after every workload, `measured_for`) costs it nothing
        parts["_scenarios"] = any(
            isinstance(v, dict) and "measured_for" not in v for v in (rec.get("scenarios") or {}).values()
        )
        parts["_run"] = rec.get("run_id")
        parts["_p50_ms"] = (rec.get("latency_ms") or {}).get("p50")  # the budget's speed order of backends
        by_label.setdefault(workload_label(c), []).append((c, parts, rec))
    for cid, s in (t.get("alone_s") or {}).items():
        if "-dynamic-" not in cid:
            alone["other"].append(float(s))
    entries: list[tuple[Cell, dict]] = []
    for label, group in by_label.items():
        loads = sum(p["load"] for _, p, _ in group)
        share = max(0.0, float((t.get("timing_s") or {}).get(label, 0.0)) - loads) / len(group)
        for c, p, _ in group:
            if label in (t.get("timing_s") or {}):
                ratio = p["timing_floor"] / p["timing"] if p["timing"] > 0 else 1.0
                p["timing"], p["timing_floor"] = share, share * ratio
            own = (t.get("cell_s") or {}).get(c.id)
            if isinstance(own, dict):  # the run wrote the cell's own parts
                p.update({k: float(v) for k, v in own.items() if k in (*BODY, "timing_floor")})
            entries.append((c, p))
        if not any(isinstance((t.get("cell_s") or {}).get(c.id), dict) for c, _, _ in group):
            for _c, p, _ in group:
                p["_workload_s"] = float((t.get("workload_s") or {}).get(label, 0.0))
                p["_scenario_workload"] = any(q["_scenarios"] for _, q, _ in group)
                p["_n"] = len(group)
    return entries, hits, alone


def split_plain(entries: list[tuple[Cell, dict]]) -> None:
    """Stages of the cells of workloads none of whose cells ran the scenarios: the workload's seconds evenly."""
    for _, p in entries:
        if "_workload_s" in p and not p["_scenario_workload"]:
            p["stages"], p["scenarios"] = p["_workload_s"] / p["_n"], 0.0


def split_scenarios(entries: list[tuple[Cell, dict]], stage_exp: float) -> None:
    """Stages and scenarios of the cells of workloads where some cells ran the scenarios (the module's rule)."""
    plain = [(c, p) for c, p in entries if "_workload_s" in p and not p["_scenario_workload"]]
    groups: dict[str, list[tuple[Cell, dict]]] = {}
    for c, p in entries:
        if p.get("_scenario_workload"):
            groups.setdefault(workload_label(c), []).append((c, p))
    for group in groups.values():
        guesses = {}
        for c, _ in group:
            same = [e for e in plain if e[0].backend == c.backend] or plain
            if same:
                c2, p2 = min(same, key=lambda e: abs(math.log(_work(c) / _work(e[0]))))
                guesses[c.id] = p2["stages"] * (_work(c) / _work(c2)) ** stage_exp
            else:
                guesses[c.id] = 0.0
        ran = [c.id for c, p in group if p["_scenarios"]]
        split = split_own(group[0][1]["_workload_s"], guesses, ran)
        for c, p in group:
            p.update(split[c.id])


def _work(c: Cell) -> float:
    return work(c.size, c.shape.height, c.shape.width, c.batch) or 1.0


def median_parts(entries: list[tuple[Cell, dict]], exps: dict[str, float]) -> dict[str, float]:
    """The median of each part over `entries`, each brought to yolo26n at 640x640, batch 1, by the exponents."""
    out = {}
    for part in (*PREP, "load", "timing", "timing_floor", "stages"):
        vals = []
        for c, p in entries:
            kind = "timing" if part == "timing_floor" else part
            ratio = work("n", 640, 640, 1, kind) / work(c.size, c.shape.height, c.shape.width, c.batch, kind)
            vals.append(p.get(part, 0.0) * ratio ** exps.get(part, 0.0))
        out[part] = round(statistics.median(vals), 3)
    return out


def build(run_dirs: list[Path], max_time_s: float, extra_dirs: list[Path] = ()) -> dict:
    """The table (a dict, as prices.yaml holds it) from the runs, and what `extra_dirs` add (the module's rule)."""
    runs = sorted((read_run(Path(d)) for d in run_dirs), key=lambda r: r["info"]["started_at"] or "")
    extras = sorted((read_run(Path(d)) for d in extra_dirs), key=lambda r: r["info"]["started_at"] or "")
    cells: dict[str, tuple[Cell, dict, str]] = {}
    every: list[tuple[Cell, dict]] = []
    hits: list[float] = []
    alone: dict[str, list[float]] = {"dynamic": [], "other": []}
    per_run = []
    for run in runs:  # oldest first: a newer run's entry replaces an older one's
        entries, h, lone = run_entries(run)
        split_plain(entries)
        per_run.append((run, entries))
        every += entries
        hits += h
        for k, v in lone.items():
            alone[k] += v
    exps = exponents(every)
    for run, entries in per_run:
        split_scenarios(entries, exps["stages"])
        for c, p in entries:
            cells[cell_key(c)] = (c, p, run["info"]["run_id"])
    families = {}
    for fam in FAMILIES:
        head = {"backend": f"({fam})", "size": "n", "shape": "640x640", "batch": 1}
        mine = [(c, p, r) for c, p, r in cells.values() if family(c.backend) == fam and c.precision == "fp32"]
        if mine:  # the run most of its entries came from: the one whose speed it scales from
            run_id = Counter(r for _, _, r in mine).most_common(1)[0][0]
            parts = median_parts([(c, p) for c, p, _ in mine], exps)
            families[fam] = {**head, **parts, "scenarios": 0.0, "run": run_id}
        else:
            families[fam] = {**head, **PRIORS["families"][fam], "scenarios": 0.0, "run": None}
    scen = [p["scenarios"] for _, p, _ in cells.values() if p.get("scenarios", 0) > 0]
    traced: dict[str, tuple[Cell, dict, str]] = {}
    # apart from the cells: a trace prices only traced cells; the newest run wins
    for run in reversed(extras):
        for c, p in traced_entries(run):
            traced.setdefault(cell_key(c), (c, p, run["info"]["run_id"]))
    probes: dict[str, dict] = {}
    for run in reversed(extras + runs):  # each dynamic probe's seconds alone, the newest run's first
        for c, seconds in dynamic_probes(run):
            probes.setdefault(cell_key(c), {"seconds": round(seconds, 3), "run": run["info"]["run_id"]})
    newest = runs[-1]["timeline"] if runs else {}
    return {
        "version": 1,
        "runs": [r["info"] for r in extras] + [r["info"] for r in runs],
        "max_time_s": max_time_s,
        "work_exponent": exps,
        "cache_hit_s": round(statistics.median(hits), 3) if hits else PRIORS["cache_hit_s"],
        "scenarios_s": round(statistics.median(scen), 3) if scen else 0.0,
        "alone": {k: round(statistics.median(v), 3) if v else PRIORS["alone"][k] for k, v in alone.items()},
        "finish_s": round(float(newest.get("finish_s") or 0.0), 3),
        "scenario_phase_s": round(float(newest.get("scenario_phase_s") or 0.0), 1),
        "scenario_phase_answers": runs[-1]["phase_answers"] if runs else [],
        "families": families,
        "cells": {key: entry_of(c, p, run_id) for key, (c, p, run_id) in sorted(cells.items())},
        "traced": {key: entry_of(c, p, run_id) for key, (c, p, run_id) in sorted(traced.items())},
        "alone_cells": dict(sorted(probes.items())),
    }


def entry_of(c: Cell, p: dict, run_id: str) -> dict:
    """A table entry: the cell's axes, its parts in seconds, its timed p50 where it ran, the run it came from."""
    return {
        "backend": c.backend,
        "device": c.device,
        "precision": c.precision,
        "size": c.size,
        "shape": f"{c.shape.height}x{c.shape.width}",
        "batch": c.batch,
        **{k: round(float(p.get(k, 0.0)), 3) for k in (*PREP, *BODY, "timing_floor")},
        **({"p50_ms": round(float(p["_p50_ms"]), 3)} if p.get("_p50_ms") else {}),
        "run": run_id,
    }


def thread_scaling_doc(measured: dict) -> dict:
    """prices.yaml's `thread_scaling` from benchmarks/thread_scaling.py's JSON: the speedups and where they came
    from (raises KeyError or ValueError on another file)."""
    probe, workload = measured["probe_speedup"], measured["workload_speedup"]
    if not probe or set(probe) != set(workload):
        raise ValueError("probe_speedup and workload_speedup must name the same thread counts")
    return {
        "probe_speedup": {str(k): float(v) for k, v in probe.items()},
        "workload_speedup": {str(k): float(v) for k, v in workload.items()},
        "spread": {n: measured["speedup"][n] for n in measured["speedup"]},
        "cpu_model": measured.get("cpu_model"),
        "rounds": measured.get("rounds"),
        "measured_by": measured.get("measured_by", "benchmarks/thread_scaling.py"),
    }


def render(table: dict, command: str) -> str:
    """prices.yaml: a header comment, then one line a run, family and cell (YAML flow mappings)."""
    dump = json.dumps
    lines = [
        "# The plan's prices: seconds per cell and part on the reference machine of each run below, scaled to the",
        "# machine that reads them by harness.measure.machine_speed (harness/plan/price.py; docs/options.md,",
        '# "Remaining time"). GENERATED, never edited by hand: rerun after a cold run of the current code',
        "# (benchmarks/cold_default.sh --keep DIR keeps its run directory as DIR/run):",
        f"#   {command}",
        "# Families without a measured entry carry the generator's PRIORS (run: null).",
        f"version: {table['version']}",
        "runs:",
        *[f"  - {dump(r)}" for r in table["runs"]],
        f"max_time_s: {table['max_time_s']}",
        f"work_exponent: {dump(table['work_exponent'])}",
        f"cache_hit_s: {table['cache_hit_s']}",
        f"scenarios_s: {table['scenarios_s']}",
        f"alone: {dump(table['alone'])}",
        f"finish_s: {table['finish_s']}",
        f"scenario_phase_s: {table['scenario_phase_s']}",
        f"scenario_phase_answers: {dump(table['scenario_phase_answers'])}",
        *([f"thread_scaling: {dump(table['thread_scaling'])}"] if table.get("thread_scaling") else []),
        "families:",
        *[f"  {k}: {dump(v)}" for k, v in table["families"].items()],
        "cells:",
        *[f"  {dump(k)}: {dump(v)}" for k, v in table["cells"].items()],
        *(
            ["traced:", *[f"  {dump(k)}: {dump(v)}" for k, v in table["traced"].items()]]
            if table["traced"]
            else []
        ),
        *(
            ["alone_cells:", *[f"  {dump(k)}: {dump(v)}" for k, v in table["alone_cells"].items()]]
            if table["alone_cells"]
            else []
        ),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    p.add_argument("-o", "--output", type=Path, default=PRICES_FILE)
    p.add_argument(
        "--max-time", type=float, default=3.0, help="the runs' --max-time (default 3, the default)"
    )
    p.add_argument(
        "--extra", type=Path, action="append", default=[], metavar="RUN_DIR",
        help="a run of another profile (claims, --fake-cuda): only its traced cells and dynamic probes enter the table",
    )  # fmt: skip
    p.add_argument(
        "--thread-scaling", type=Path, metavar="FILE",
        help="benchmarks/thread_scaling.py's JSON: the probe's and the workloads' speedups over 1 thread",
    )  # fmt: skip
    a = p.parse_args(argv)
    for d in [*a.runs, *a.extra]:
        missing = [f for f in (durations.TIMELINE, "cells.jsonl", "env.json") if not (d / f).is_file()]
        if missing:
            p.error(f"{d}: no {', '.join(missing)}")
    table = build(a.runs, a.max_time, a.extra)
    if a.thread_scaling is not None:
        try:
            table["thread_scaling"] = thread_scaling_doc(
                json.loads(a.thread_scaling.read_text(encoding="utf-8"))
            )
        except (OSError, ValueError, KeyError) as e:
            p.error(f"--thread-scaling {a.thread_scaling}: {e}")
    shown = [str(d) for d in a.runs] + [f"--extra {d}" for d in a.extra]
    shown += [f"--thread-scaling {a.thread_scaling}"] if a.thread_scaling is not None else []
    command = (
        "python scripts/plan_prices.py "
        + " ".join(shown)
        + (f" --max-time {a.max_time:g}" if a.max_time != 3 else "")
    )
    a.output.write_text(render(table, command), encoding="utf-8")
    print(
        f"{a.output}: {len(table['cells'])} cells from {len(table['runs'])} run(s); exponents {table['work_exponent']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
