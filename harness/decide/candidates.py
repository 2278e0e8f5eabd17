"""The candidates of a machine: every configuration it measured (model size, shape, precision, backend, head,
batch), with its accuracy as known and its memory, and the figure each deployment use case ranks it on.

A use-case figure comes from the cell's scenario result where the run measured that scenario for it; otherwise the
cell is screened with the end-to-end distribution its record already has (`latency_e2e_ms`), and the figure says
so. Every figure carries an interval, and says how it was obtained: the scenario's own (the single-stream p99's,
the server's last passing to first failing rate, the offline per-slice images/s), else derived from the end-to-end
p50's 95% interval (its relative width applied to a rate), else the range the p99 must lie in (the e2e p90 to the
slowest round).
"""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass

from harness.core.record import CellRecord
from harness.decide.accuracy import Accuracy, accuracy_of
from harness.decide.index import RunIndex, export_only_backends
from harness.decide.load import finite, number, stat
from harness.decide.scenario_results import measured, not_measured_why, percentile_label, result, span
from harness.measure.stats import Interval

log = logging.getLogger(__name__)

SCENARIO, SCREEN = "scenario", "screen"


@dataclass(frozen=True)
class Figure:
    """A candidate's figure for one use case: `value` (ms or per second), its `interval`, how the interval was
    obtained, and whether it is the scenario's measurement or a screen from the end-to-end distribution."""

    value: float
    interval: Interval | None
    text: str  # `e2e p99 17.8 ms`
    interval_how: str
    source: str  # SCENARIO or SCREEN
    note: str = ""  # what the screen stands on, or the scenario's rule
    #: "" when `interval` is the figure's own; else the figure whose interval stands in for it (`p90`), said
    #: beside the interval wherever it is shown (records decided before the figure became the statistic itself)
    interval_of: str = ""
    #: which statistic decided and why, said beside the figure where it is not the use case's own ("the p90
    #: decided: the p99, 15.6 ms, has no upper bound at 190 queries"); "" when it is
    said: str = ""
    #: the value the use case's limit is judged on where the figure shown is another statistic (the e2e p99 a
    #: camera must keep within the frame time, beside the p90 that ranks it); None: `value` itself
    judged: float | None = None
    #: a screened figure: why its scenario did not measure it, in words ("not measured by single-stream: ...");
    #: said beside the figure wherever it is shown
    why: str = ""
    #: whether the first screen shows `interval` beside the figure: not for a screened rate, whose interval is an
    #: estimate's (its text gives the e2e p50's own interval instead)
    interval_shown: bool = True
    #: a screened latency figure: the least the statistic its limit is judged on can be, from what was measured
    #: (the e2e p90, or p50, under a screened p99): a screen whose floor is over the limit rejects for certain
    floor: float | None = None

    @property
    def limit_value(self) -> float:
        """The value the use case's own limit (the frame time) is judged on."""
        return self.judged if self.judged is not None else self.value


@dataclass(frozen=True)
class Candidate:
    """One measured configuration on one machine."""

    idx: RunIndex
    rec: CellRecord
    accuracy: Accuracy

    @property
    def shape(self) -> str:
        h, w = self.rec.height, self.rec.width
        return str(h) if h == w else f"{h}x{w}"

    @property
    def min_side(self) -> int:
        return min(int(self.rec.height or 0), int(self.rec.width or 0))

    @property
    def model(self) -> str:
        """The ultralytics model name (`yolo26n`, `yolo26n-seg`, `yolo11n`), with its head where the machine ran both heads of
        the task (they compete: the pick says which)."""
        r = self.rec
        name = f"{r.family}{r.size}" + ("" if r.task == "detect" else f"-{r.task}")
        return f"{name} {r.head}" if len(self.idx.heads(str(r.task))) > 1 else name

    def config(self) -> dict:
        """The configuration, as decision.json names it."""
        r = self.rec
        return {
            "model": f"{r.family}{r.size}" + ("" if r.task == "detect" else f"-{r.task}"),
            "size": r.size,
            "task": r.task,
            "head": r.head,
            "shape": self.shape,
            "precision": r.precision_requested,
            "backend": r.backend,
            "device": r.device,
            "batch": r.batch,
            "cell_id": r.cell_id,
        }

    def label(self) -> str:
        r = self.rec
        return f"{self.model} {self.shape} {r.precision_requested} · {r.backend}/{r.device}" + (
            f" · batch {r.batch}" if r.batch != 1 else ""
        )

    def short(self) -> str:
        """The configuration less its backend and device (said beside it)."""
        r = self.rec
        batch = f" batch {r.batch}" if r.batch != 1 else ""
        return f"{self.model} {self.shape} {r.precision_requested}{batch}"

    def memory_mib(self) -> float | None:
        return finite(self.rec.memory.host_peak_rss_mib) if self.rec.memory else None


def candidates(idx: RunIndex) -> list[Candidate]:
    """Every configuration the machine ran ok (export-only targets have no runtime here; dynamic artifacts are
    candidates at the shape they ran)."""
    cells = idx.cells
    return [
        Candidate(idx, r, accuracy_of(r, cells))
        for r in cells
        if r.status == "ok" and r.backend not in export_only_backends() and r.height and r.width
    ]


def fmt(v: float, digits: int = 3) -> str:
    if math.isinf(v):
        return "∞"
    return f"{v:.{digits}g}" if abs(v) < 10**digits else f"{v:.0f}"


def interval_text(iv: Interval | None) -> str:
    return "no interval" if iv is None else f"{fmt(iv.lo)}–{fmt(iv.hi)}"


def _scaled(iv: Interval | None, p50: float, value: float) -> Interval | None:
    """A rate's interval from its latency p50's: the rate is inversely proportional to the latency."""
    if iv is None or iv.lo <= 0:
        return None
    return Interval(value * p50 / iv.hi, value * p50 / iv.lo)


def e2e(rec: CellRecord, name: str) -> float | None:
    """One figure of the record's end-to-end latency (`e2e(rec, "p99")`), or None."""
    return stat(rec.latency_e2e_ms, name)


def e2e_p50_interval(rec: CellRecord) -> Interval | None:
    ci = rec.latency_e2e_ms.p50_ci if rec.latency_e2e_ms else None
    if isinstance(ci, list) and len(ci) == 2 and all(isinstance(v, int | float) for v in ci):
        return Interval(float(ci[0]), float(ci[1]))
    return None


def screened_words(fig: Figure) -> str:
    """What follows a figure wherever it is shown: nothing for a scenario's measurement, else why it is not one."""
    if fig.source != SCREEN:
        return ""
    return f" ({fig.why})" if fig.why else " (screened)"


def unmeasured(rec: CellRecord, scenario: str) -> str:
    """A screened figure's words: `not measured by single-stream: <why>` (the first clause of the record's reason;
    the whole of it is in the figure's note)."""
    return f"not measured by {scenario}: {not_measured_why(rec, scenario).split(';')[0]}"


# -- camera --------------------------------------------------------------------------------------------------------
def camera_figure(rec: CellRecord) -> Figure | None:
    """The e2e p99 at batch 1: the single-stream scenario's, else screened from `latency_e2e_ms` (its p99 where
    recorded, else its slowest round, which a p99 of that many rounds cannot exceed)."""
    # LoadGen's single-stream run only: the end-to-end timing's own summary is screened below, and says so
    res = result(rec, "single-stream") if measured(rec, "single-stream") else None
    lat = rec.latency_e2e_ms
    low = stat(lat, "p90") or stat(lat, "p50")
    worst = stat(lat, "max")
    ranged = "the range the p99 lies in: the e2e p90 (p50 when p90 is not recorded) to the slowest round"
    p99 = number(res or {}, "p99")
    if p99 is not None:
        iv, how = span(res, "p99_interval"), "95% interval of the single-stream p99"
        p90_iv = span(res, "p90_interval")
        p90 = number(res or {}, "p90")
        if (
            iv is not None
            and math.isinf(iv.hi)
            and p90 is not None
            and p90_iv is not None
            and math.isfinite(p90_iv.hi)
        ):
            # a p99 of ~100 queries has no upper bound (no query beyond it): an open interval would tie every
            # candidate. The single-stream p90 (MLPerf's single-stream metric, bounded by LoadGen's early stopping)
            # decides instead, and the figure is that p90 beside its own interval, saying so; the frame time is
            # still judged on the p99
            queries = int(number(res, "queries") or 0)
            how = (
                "the single-stream p90's interval: the 1% order statistic of LoadGen's query latencies to LoadGen's "
                f"early-stopping bound (the p99's has no upper end at {queries} queries)"
            )
            said = f"the p90 decided: the p99, {fmt(p99)} ms, has no upper bound at {queries} queries"
            return Figure(p90, p90_iv, f"e2e p90 {fmt(p90)} ms", how, SCENARIO, "single-stream result",
                          said=said, judged=p99)  # fmt: skip
        if iv is None and low is not None and worst is not None and low <= p99 <= worst:
            iv, how = Interval(low, worst), ranged + " (no p99 interval recorded with the result)"
        return Figure(p99, iv, f"e2e p99 {fmt(p99)} ms", how if iv else "no interval recorded", SCENARIO,
                      "single-stream result")  # fmt: skip
    if lat is None:
        return None
    rounds = int(stat(lat, "rounds") or 0)
    p99 = stat(lat, "p99")
    if p99 is not None:  # enough rounds for a p99 of the end-to-end timing itself
        iv = Interval(low, worst) if low is not None and worst is not None and low <= p99 <= worst else None
        note = (
            f"screened: no single-stream result ({not_measured_why(rec, 'single-stream')}); the e2e p99 of the "
            "record's end-to-end timing"
        )
        return Figure(p99, iv, f"e2e p99 {fmt(p99)} ms", ranged if iv else "no interval", SCREEN, note,
                      why=unmeasured(rec, "single-stream"), floor=low)  # fmt: skip
    if worst is None:
        return None
    iv = Interval(low, worst) if low is not None and low <= worst else None
    note = (
        f"screened: no single-stream p99 ({not_measured_why(rec, 'single-stream')}); the slowest of {rounds} "
        "end-to-end rounds stands in for it"
    )
    return Figure(worst, iv, f"slowest of {rounds} e2e rounds {fmt(worst)} ms", ranged, SCREEN, note,
                  why=unmeasured(rec, "single-stream"), floor=low)  # fmt: skip


# -- rates (server, offline): screened from the e2e p50, scaled by what the machine measured ---------------------
def _back_to_back(rec: CellRecord) -> float | None:
    p50, batch = e2e(rec, "p50"), rec.batch
    if not p50 or not isinstance(batch, int):
        return None
    return batch * 1000.0 / p50


def screen_factor(cells: list[CellRecord], scenario: str) -> tuple[float, str]:
    """The median, over the machine's cells measured under `scenario`, of its rate over the back-to-back rate of
    the cell's e2e p50: how a screen turns an e2e p50 into the scenario's rate on this machine (1.0, said so,
    when no cell has both)."""
    ratios = []
    for r in cells:
        value, b2b = number(result(r, scenario) or {}, "value"), _back_to_back(r)
        if value and b2b and (result(r, scenario) or {}).get("valid") is not False:
            ratios.append(value / b2b)
    if not ratios:
        return 1.0, "batch × 1000 / e2e p50 (no cell of this machine has both to scale by)"
    k = statistics.median(ratios)
    return (
        k,
        f"batch × 1000 / e2e p50 × {k:.2f}, the median {scenario}/e2e ratio of {len(ratios)} measured cells",
    )


def _rate_screen(rec: CellRecord, factor: tuple[float, str], what: str) -> Figure | None:
    """A rate the scenario did not measure: ranked by an estimate from the e2e p50 (`value`, the order it takes
    among the candidates), shown as not measured with why, never as a rate (the estimate's rule is in the note)."""
    b2b = _back_to_back(rec)
    if b2b is None:
        return None
    value = b2b * factor[0]
    p50 = e2e(rec, "p50") or 0.0
    iv = _scaled(e2e_p50_interval(rec), p50, value)
    how = "derived from the e2e p50's 95% interval (a rate is inversely proportional to it)"
    note = f"screened: no {what} result ({not_measured_why(rec, what)}); ranked by an estimate, {factor[1]}"
    text = f"no {what} rate: e2e p50 {fmt(p50)} ms [{interval_text(e2e_p50_interval(rec))}]"
    return Figure(value, iv, text, how, SCREEN, note, why=unmeasured(rec, what), interval_shown=False)


def server_figure(rec: CellRecord, bound_ms: float | None, factor: tuple[float, str]) -> Figure | None:
    """The highest rate served with its latency percentile (p90 under LoadGen's short durations, p99 under MLPerf's)
    within `bound_ms`: the server scenario's (re-decided from the rates it
    tried when the bound differs from the one it ran under), else screened from the e2e p50."""
    res = result(rec, "server")
    if res is not None:
        recorded = number(res, "bound_ms")
        if bound_ms is None or recorded == bound_ms:
            value = number(res, "value") or 0.0
            iv = span(res, "rate_interval")
            how = "last passing to first failing rate tried" if iv else "no rate interval recorded"
            bound = fmt(recorded or 0)
            text = f"{fmt(value)} q/s at {percentile_label(res)} ≤ {bound} ms"
            return Figure(value, iv, text, how, SCENARIO, "server scenario")
        return _redecided(res, bound_ms)
    worst = e2e(rec, "p99") or e2e(rec, "max")
    if worst is not None and bound_ms is not None and worst > bound_ms:  # over the bound even with no queue
        said = "e2e p99" if e2e(rec, "p99") is not None else "slowest e2e round"
        text = f"{said} {fmt(worst)} ms over the {fmt(bound_ms)} ms bound with no queueing"
        note = f"screened: no server result ({not_measured_why(rec, 'server')}); its end-to-end timing alone exceeds the bound"
        return Figure(0.0, None, text, "no rate: the bound fails before any load", SCREEN, note,
                      why=unmeasured(rec, "server"), floor=e2e(rec, "p50"))  # fmt: skip
    return _rate_screen(rec, factor, "server")


def _redecided(res: dict, bound_ms: float) -> Figure:
    # each rate's latency at the percentile the scenario judged it at (`target_ms`: LoadGen's p90 under the short
    # durations); records from before LoadGen have only the p99
    tried: list[tuple[float, float]] = []
    for t in res.get("tried") or []:
        if not isinstance(t, dict):
            continue
        rate, target = number(t, "rate"), number(t, "target_ms")
        at = target if target is not None else number(t, "p99_ms")
        if rate is not None and at is not None:
            tried.append((rate, at))
    passing = [r for r, p in tried if p <= bound_ms]
    value = max(passing) if passing else 0.0
    failing = [r for r, p in tried if p > bound_ms and r > value]
    iv = Interval(value, min(failing) if failing else math.inf) if passing else None
    how = f"re-decided from the {len(tried)} rates the server scenario tried: last passing to first failing"
    label = percentile_label(res)
    note = f"server scenario ran under {label} ≤ {fmt(number(res, 'bound_ms') or 0)} ms; re-decided for {fmt(bound_ms)} ms"
    return Figure(value, iv, f"{fmt(value)} q/s at {label} ≤ {fmt(bound_ms)} ms", how, SCENARIO, note)


def offline_figure(rec: CellRecord, factor: tuple[float, str]) -> Figure | None:
    """Images/s offline: the offline scenario's, with its per-slice interval where recorded (else the e2e p50's
    interval applied to it), else screened from the e2e p50."""
    res = result(rec, "offline")
    value = number(res or {}, "value")
    if value:
        iv = span(res, "ips_interval")
        how = "95% interval of the per-slice images/s"
        if iv is None:
            p50 = e2e(rec, "p50") or 0.0
            iv = _scaled(e2e_p50_interval(rec), p50, value)
            how = "derived from the e2e p50's 95% interval (no per-slice rates recorded; relative width applied)"
        b, c = number(res or {}, "batch"), number(res or {}, "concurrency")
        at = f" at batch {int(b)} × {int(c)} concurrent" if b and c else ""
        return Figure(value, iv, f"{fmt(value)} img/s{at}", how, SCENARIO, "offline scenario")
    return _rate_screen(rec, factor, "offline")
