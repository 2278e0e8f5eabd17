"""Regression detection: one run against its baseline within its series.

Rules (docs/regression-tracking.md explains the reasoning):
- status: ok in the baseline run, a failure status now. Always a regression.
- latency: judged on canary-normalised figures (each p50 and round divided by the drift canary read around that
  cell's timing, harness.measure.canary) when both sides carry the canary, else on raw p50s (said in the detail):
  the new p50 exceeds the baseline p50 by more than both `latency_pct` percent and `spread_k` times the
  cell's spread, and a two-sided Mann-Whitney U test on the raw rounds (`samples_ms`; exact or permutation for few
  rounds, harness.history.stats.rank_test) rejects "same distribution" at `alpha`. The spread is the robust spread
  (1.4826 x MAD) of the p50s of the last `window` ok runs of the cell; with fewer than `MIN_SPREAD_RUNS` of them
  the baseline rounds' own spread stands in when larger, so a one-run baseline never has zero spread.
- too few rounds to judge: fewer than stats.MIN_ROUNDS rounds on a side, or sizes whose smallest possible p-value
  is not below `alpha`: the cell is listed as unjudged, never passed silently.
- insufficient history: until the series holds `min_runs` runs (this one included), latency changes are listed as
  unjudged, not failed; status and memory rules apply from the second run.
- memory: the peak grows by more than both `mem_pct` percent and `mem_mb` MiB.
- a run whose drift canary left its usual band says so in its notes and next to each latency finding.
Mirror-image changes are improvements. New and vanished cells are listed, not failed.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import cast

from harness.core.record import FAILED_STATUSES
from harness.core.results_dir import HistoryError
from harness.history import query
from harness.history.query import CellRow, RunRef
from harness.history.stats import median, rank_test, robust_spread

log = logging.getLogger(__name__)

KINDS = ("status", "latency", "memory")
# A series spread from fewer runs than this is backed by the rounds' own spread (the larger of the two is used).
MIN_SPREAD_RUNS = 3
# The states of a comparison.
FIRST_RUN, INSUFFICIENT, JUDGED = "first run", "insufficient history", "judged"


@dataclass(frozen=True)
class Thresholds:
    """The knobs of the regression rules; the defaults are the project's policy."""

    latency_pct: float = 10.0
    spread_k: float = 3.0
    alpha: float = 0.01
    mem_pct: float = 5.0
    mem_mb: float = 64.0
    window: int = 5  # runs behind the series' spread (and the window baseline's default size)
    min_runs: int = 3  # runs the series must hold (this one included) before latency changes are judged


@dataclass(frozen=True)
class BaselineSpec:
    """What a run is compared with: `window:N` (median of the last N ok runs of each cell), `last` (the
    previous run of the series) or a run id."""

    mode: str = "window"
    n: int = 5
    run_id: str | None = None

    @classmethod
    def parse(cls, text: str) -> BaselineSpec:
        """Parse the `--baseline` argument: 'window:N', 'last', or a run id."""
        if text == "last":
            return cls(mode="last")
        if text.startswith("window:"):
            try:
                n = int(text.split(":", 1)[1])
            except ValueError:
                n = 0
            if n < 1:
                raise ValueError(f"--baseline {text}: N must be a positive integer")
            return cls(mode="window", n=n)
        return cls(mode="run", run_id=text)

    def describe(self) -> str:
        """One line for reports: what the baseline is."""
        if self.mode == "window":
            return f"window:{self.n} (median of the last {self.n} ok runs of each cell in the series)"
        if self.mode == "last":
            return "last (the previous run of the series)"
        return f"run {self.run_id}"


@dataclass(frozen=True)
class Finding:
    """One cell's change. `baseline`/`current` are ms (latency), MiB (memory) or a status."""

    cell_id: str
    kind: str
    baseline: float | str | None
    current: float | str | None
    change_pct: float | None
    detail: str
    machine: str | None = None

    def to_dict(self) -> dict:
        """Plain data (the shape report_data's regressions use)."""
        return asdict(self)


@dataclass
class Comparison:
    """The outcome of comparing one machine's run with its baseline."""

    run_id: str
    machine: str
    series_id: str
    series_label: str
    baseline: str
    baseline_runs: list[str] = field(default_factory=list)
    has_history: bool = False
    state: str = FIRST_RUN  # first run | insufficient history | judged
    series_runs: int = 1  # runs of the series up to and including this one
    compared: int = 0
    regressions: list[Finding] = field(default_factory=list)
    improvements: list[Finding] = field(default_factory=list)
    status_changes: list[Finding] = field(default_factory=list)
    unjudged: list[Finding] = field(default_factory=list)  # latency not judged: too few rounds, or history
    new_cells: list[str] = field(default_factory=list)
    vanished_cells: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain data, as written by `compare --json`."""
        return asdict(self)


def _pct(base: float, cur: float) -> float | None:
    return (cur - base) / base * 100 if base else None


def _spread(p50s: list[float], base_samples: list[float]) -> tuple[float | None, str]:
    """The cell's run-to-run spread (of the window's p50s, in the unit compared) and how it was obtained; None
    when nothing gives one.

    From MIN_SPREAD_RUNS ok runs on, the robust spread of their p50s; below that the series cannot tell its own
    spread, and the baseline rounds' robust spread stands in when it is larger (never zero by default).
    """
    runs = robust_spread(p50s)
    if runs is not None and len(p50s) >= MIN_SPREAD_RUNS:
        return runs, f"spread {runs:.3g} over {len(p50s)} runs"
    rounds = robust_spread(base_samples)
    known = [v for v in (runs, rounds) if v is not None]
    if not known:
        return None, f"spread unknown ({len(p50s)} run(s) of history, no stored rounds)"
    value = max(known)
    source = "the baseline rounds' spread" if value == rounds else f"the p50s of {len(p50s)} runs"
    return value, f"spread {value:.3g} from {source} (only {len(p50s)} run(s) of history)"


def _scale(cur: CellRow, rows: list[CellRow]) -> Callable[[CellRow], float] | None:
    """Latency is judged on p50s divided by the drift canary read around each cell (how fast the machine ran
    then), when the current cell and every baseline cell have canary readings; None: raw p50s."""
    if cur.canary_ms and all(r.canary_ms for r in rows):
        return lambda r: 1.0 / float(r.canary_ms)
    return None


def _p50(r: CellRow) -> float:
    """The p50 of a row judged on latency (compare_run passes only rows that have one)."""
    return cast(float, r.p50)


def _latency(
    conn: sqlite3.Connection,
    cur: CellRow,
    base_rows: list[CellRow],
    window: list[CellRow],
    th: Thresholds,
    judged: bool,
) -> tuple[str, Finding] | None:
    """('change' | 'unjudged', finding) for a cell's latency, or None when it did not change.

    Judged on canary-normalised figures (p50 / canary, and each round likewise) when the records carry the
    canary, so a machine that ran slower as a whole is not read as a slower backend; on raw p50s otherwise (said
    in the detail). 'unjudged': the rounds are too few for the rank test to ever reject (listed whatever the p50
    did, so such a cell never passes silently), no spread is known, or the series is too short (`judged` False)
    for a change to fail the run.
    """
    raw_base = median([_p50(r) for r in base_rows])
    if raw_base <= 0:
        return None
    scale = _scale(cur, base_rows)
    k = scale or (lambda r: 1.0)
    base = median([_p50(r) * k(r) for r in base_rows])
    now = _p50(cur) * k(cur)
    base_samples = [v * k(r) for r in base_rows for v in query.samples(conn, r)]
    win = [r for r in window if scale is None or r.canary_ms]
    spread, spread_text = _spread([_p50(r) * k(r) for r in win], base_samples)
    test = rank_test([v * k(cur) for v in query.samples(conn, cur)], base_samples, th.alpha)
    change = _pct(base, now)
    moved = f"p50 {raw_base:.3f} -> {_p50(cur):.3f} ms ({_pct(raw_base, _p50(cur)):+.1f}%)"
    if scale is not None:
        moved += f"; canary-normalised (p50 / the canary read around the cell) {change:+.1f}%"
    else:
        moved += "; raw p50s (no canary readings on both sides)"
    tail = f"baseline of {len(base_rows)} run(s)"
    if not test.judged or spread is None:
        why = test.describe() if not test.judged else spread_text
        detail = f"{moved}; {why}; {tail}"
        return "unjudged", Finding(cur.cell_id, "latency", raw_base, _p50(cur), change, detail, cur.machine)
    margin = max(base * th.latency_pct / 100, th.spread_k * spread)
    if abs(now - base) <= margin or (test.p or 0.0) >= th.alpha:
        return None
    unit = "" if scale is not None else " ms"
    detail = (
        f"{moved}; margin {margin:.3g}{unit} = max({th.latency_pct:g}%, {th.spread_k:g} x {spread_text}); "
        f"{test.describe()}; {tail}"
    )
    finding = Finding(cur.cell_id, "latency", raw_base, _p50(cur), change, detail, cur.machine)
    if not judged:
        finding = Finding(
            cur.cell_id,
            "latency",
            raw_base,
            _p50(cur),
            change,
            f"insufficient history (the series holds fewer than {th.min_runs} runs): would be flagged: {detail}",
            cur.machine,
        )
        return "unjudged", finding
    return "change", finding


def heap_policy_note(conn: sqlite3.Connection, run: RunRef, ref: RunRef) -> str | None:
    """A note when the run and its baseline ran under different heap policies (harness.core.allocator): PyTorch
    eager's latency on a CPU moves with that setting, so its latency findings say as much about it as about the code."""
    now, before = query.run_heap_policy(conn, run), query.run_heap_policy(conn, ref)
    if now == before:
        return None
    return (
        f"the heap policy changed from the baseline run {ref.run_id} ({before}) to this run ({now}): "
        "torch-eager's latency moves with it (--malloc), so read its latency findings as that change"
    )


def canary_band(conn: sqlite3.Connection, run: RunRef, earlier: list[RunRef], window: int) -> str | None:
    """A note when the run's drift canary left its usual band (the min..max of the last `window` earlier runs'
    canary medians, widened by 10%): the machine ran at another speed than usual, so read its raw p50s with
    care. None when it stayed inside, or there is too little history to tell."""
    now = query.run_canary(conn, run)
    past = [v for v in (query.run_canary(conn, r) for r in earlier[:window]) if v is not None]
    if now is None or len(past) < 2:
        return None
    lo, hi = min(past), max(past)
    if lo / 1.1 <= now <= hi * 1.1:
        return None
    way = "slower" if now > hi else "faster"
    return (
        f"the drift canary moved beyond its usual band: median {now:.3f} ms in this run, {lo:.3f}-{hi:.3f} ms over "
        f"the last {len(past)} runs (the machine ran {way} than usual; latency is judged canary-normalised)"
    )


def _memory(cur: CellRow, base_rows: list[CellRow], th: Thresholds) -> Finding | None:
    mems = [r.mem_mb for r in base_rows if r.mem_mb is not None and r.mem_source == cur.mem_source]
    if cur.mem_mb is None or not mems:
        return None
    base = median(mems)
    delta = cur.mem_mb - base
    margin = max(base * th.mem_pct / 100, th.mem_mb)
    if abs(delta) <= margin:
        return None
    change = _pct(base, cur.mem_mb)
    pct = f" ({change:+.1f}%)" if change is not None else ""
    detail = (
        f"{cur.mem_source} {base:.0f} -> {cur.mem_mb:.0f} MiB{pct}; margin {margin:.0f} MiB ="
        f" max({th.mem_pct:g}%, {th.mem_mb:g} MiB)"
    )
    return Finding(cur.cell_id, "memory", base, cur.mem_mb, change, detail, cur.machine)


def _status(cur: CellRow, ref: CellRow | None) -> tuple[str, Finding] | None:
    """('regression' | 'improvement' | 'change', finding) when the status differs from the reference run's."""
    if ref is None or ref.status == cur.status:
        return None
    detail = f"{ref.status} in run {ref.run_id} -> {cur.status}"
    finding = Finding(cur.cell_id, "status", ref.status, cur.status, None, detail, cur.machine)
    if ref.status == "ok" and cur.status in FAILED_STATUSES:
        return "regression", finding
    if ref.status in FAILED_STATUSES and cur.status == "ok":
        return "improvement", finding
    return "change", finding


def _baseline_rows(
    spec: BaselineSpec, history: list[CellRow], ref: CellRow | None, n: int, scope: str | None
) -> list[CellRow]:
    """The ok records of a cell that its baseline is made of."""
    if spec.mode == "window":
        ok = [r for r in history if r.status == "ok" and r.p50 is not None and r.timing_scope == scope]
        return ok[:n]
    if ref is not None and ref.status == "ok" and ref.p50 is not None and ref.timing_scope == scope:
        return [ref]
    return []


def compare_run(
    conn: sqlite3.Connection, run: RunRef, spec: BaselineSpec | None = None, th: Thresholds | None = None
) -> Comparison:
    """Compare one machine's run with its baseline in its series."""
    spec = spec or BaselineSpec()
    th = th or Thresholds()
    result = Comparison(run.run_id, run.machine, run.series_id, run.series_label, spec.describe())
    incomplete = query.run_incomplete(conn, run)
    if incomplete:  # an interrupted run: its missing cells are not vanished cells, and it is not whole
        result.notes.append(f"this run is {incomplete}: it did not finish; read it as partial")
    earlier = query.earlier_runs(conn, run)
    if spec.mode == "run":
        ref_run = query.find_baseline_run(conn, run, spec.run_id or "")
        if (ref_run.run_id, ref_run.machine) == (run.run_id, run.machine):
            raise HistoryError(f"run {run.run_id!r} cannot be its own baseline")
    else:
        # The previous run of the series, from the same machine when it has one (a series can span machines).
        ref_run = next((r for r in earlier if r.machine == run.machine), earlier[0] if earlier else None)
    if ref_run is None:
        result.notes.append(f"first run of series {run.series_id}: nothing to compare with")
        return result
    result.has_history = True
    result.series_runs = len({r.run_id for r in earlier}) + 1
    result.state = JUDGED if result.series_runs >= th.min_runs else INSUFFICIENT
    if result.state == INSUFFICIENT:
        result.notes.append(
            f"insufficient history: series {run.series_id} holds {result.series_runs} run(s); latency changes "
            f"are judged once it holds {th.min_runs} (until then they are listed as unjudged)"
        )
    band = canary_band(conn, run, earlier, th.window)
    if band:
        result.notes.append(band)
    heap = heap_policy_note(conn, run, ref_run)
    if heap:
        result.notes.append(heap)
    current = query.run_cells(conn, run)
    history = query.series_cells(conn, run)
    ref_cells = query.run_cells(conn, ref_run)
    window_n = spec.n if spec.mode == "window" else th.window
    used_runs: set[str] = set()

    for cell_id, cur in sorted(current.items()):
        past = history.get(cell_id, [])
        if spec.mode == "window":
            if not past:
                result.new_cells.append(cell_id)
                continue
            ref = past[0]
        else:
            ref = ref_cells.get(cell_id)
            if ref is None:
                result.new_cells.append(cell_id)
                continue
        result.compared += 1
        status = _status(cur, ref)
        if status is not None:
            bucket = {"regression": result.regressions, "improvement": result.improvements}
            bucket.get(status[0], result.status_changes).append(status[1])
        if cur.status != "ok" or cur.p50 is None:
            continue
        base_rows = _baseline_rows(spec, past, ref, window_n, cur.timing_scope)
        if not base_rows:
            if any(r.status == "ok" and r.timing_scope != cur.timing_scope for r in past):
                result.notes.append(f"{cell_id}: timing scope changed to {cur.timing_scope!r}; not compared")
            continue
        used_runs.update(r.run_id for r in base_rows)
        window = [
            r for r in past if r.status == "ok" and r.p50 is not None and r.timing_scope == cur.timing_scope
        ]
        latency = _latency(conn, cur, base_rows, window[:window_n], th, result.state == JUDGED)
        if latency is not None and latency[0] == "unjudged":
            result.unjudged.append(latency[1])
            latency = None
        for finding in (latency[1] if latency else None, _memory(cur, base_rows, th)):
            if finding is None:
                continue
            if finding.kind == "latency" and band:
                finding = replace(finding, detail=f"{finding.detail}; note: {band}")
            grew = (
                (finding.change_pct or 0.0) > 0
                if finding.kind == "latency"
                else cast(float, finding.current) > cast(float, finding.baseline)  # MiB, both measured
            )
            (result.regressions if grew else result.improvements).append(finding)

    result.vanished_cells = sorted(set(ref_cells) - set(current))
    result.baseline_runs = sorted(used_runs)
    result.regressions.sort(key=lambda f: (KINDS.index(f.kind), f.cell_id))
    result.improvements.sort(key=lambda f: (KINDS.index(f.kind), f.cell_id))
    result.unjudged.sort(key=lambda f: f.cell_id)
    return result
