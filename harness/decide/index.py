"""Indexing the records of several runs: which records are cells, which are remedy attempts, and lookups.

A remedy record (`remedy_of` names a failing cell of the same run) is attached to that cell rather than shown as
a cell of its own, except the sweep shapes run on a remedied dynamic artifact, which are cells of the dynamic
matrix. When a cell id appears twice in one run (a re-run appended to the file), the last record wins.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from harness import backends
from harness.core.axes import DEFAULT_FAMILY, FAMILIES, SIZES, TASKS
from harness.core.cli_args import printable
from harness.core.record import CellRecord
from harness.core.results_dir import Run
from harness.decide.load import p50

log = logging.getLogger(__name__)


def backend_order() -> tuple[str, ...]:
    """Backend names in the order the report lists them: the registry's (each backend's `display_order`)."""
    return backends.display_order()


def export_only_backends() -> tuple[str, ...]:
    """Targets with no runtime on a Linux benchmark machine: their cells end at `exported`."""
    return backends.export_only_names()


DEVICE_ORDER = ("cpu", "cuda", "gpu")
REFERENCE_BACKEND = "torch-eager"


def order_key(value: object, known: tuple[str, ...]) -> tuple[int, str]:
    """Known names in their listed order, then unknown ones alphabetically (None last)."""
    text = "" if value is None else str(value)
    return (known.index(text), "") if text in known else (len(known), text or "~")


def row_key(rec: CellRecord) -> tuple:
    """The matrix row of a record: size and task, then head, batch and requested precision, then the model family
    (a YOLO11 cell is never in a YOLO26 row)."""
    return (rec.size, rec.task, rec.head, rec.batch, rec.precision_requested, rec.family)


def row_of(key: tuple) -> tuple:
    """The row part of a workload key (harness.decide.index.workload_key): its first six fields."""
    return key[:6]


def row_sort(key: tuple) -> tuple:
    """Sort key of a row: sizes n..x, tasks in their axis order, then the family (YOLO26 first, each other family
    beside it), head, batch and precision."""
    size, task, head, batch, prec, family = _row(key)
    return (
        order_key(size, SIZES),
        order_key(task, TASKS),
        order_key(family, FAMILIES),
        str(head),
        batch if isinstance(batch, int) else 0,
        str(prec),
    )


def _row(key: tuple) -> tuple:
    """A row key's six fields (a five-field key, from before families, is YOLO26's)."""
    return (*key, DEFAULT_FAMILY) if len(key) == 5 else tuple(key)


def is_sweep_of(rec: CellRecord, target: CellRecord) -> bool:
    """A shape of the sweep run on a remedied dynamic artifact (its `remedy_of` is the dynamic probe): it is a
    cell of the dynamic matrix in its own right, not an attempt at the probe."""
    return bool(rec.dynamic and rec.height and target.dynamic and not target.height)


def workload_key(rec: CellRecord) -> tuple:
    """Everything but backend and device: records with equal keys ran the same computation."""
    return (*row_key(rec), bool(rec.dynamic), rec.height, rec.width)


@dataclass
class RunIndex:
    """The cells of one run (remedy records attached to the cell they remedy)."""

    run: Run
    position: int  # among the rendered runs, 0-based
    cells: list[CellRecord] = field(default_factory=list)
    remedies: dict[str, list[CellRecord]] = field(default_factory=dict)
    by_id: dict[str, CellRecord] = field(default_factory=dict)
    _eager: dict[tuple, CellRecord] = field(default_factory=dict)
    _heads: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, run: Run, position: int) -> RunIndex:
        idx = cls(run=run, position=position)
        latest: dict[str, CellRecord] = {}
        for rec in run.records:
            cid = rec.cell_id
            if cid in latest:
                log.info(  # escaped: a cell id from the file must not forge a second line
                    "%s: cell %s recorded more than once; the last record is shown",
                    printable(str(run.run_id)),
                    printable(str(cid)),
                )
            latest[cid] = rec
        for cid, rec in latest.items():
            target = rec.remedy_of
            if target and target in latest and target != cid and not is_sweep_of(rec, latest[target]):
                idx.remedies.setdefault(target, []).append(rec)
            else:
                idx.cells.append(rec)
                idx.by_id[cid] = rec
        for rec in idx.cells:
            if rec.backend == REFERENCE_BACKEND and rec.status == "ok":
                idx._eager[(rec.device, *workload_key(rec))] = rec
        return idx

    def eager_for(self, rec: CellRecord) -> CellRecord | None:
        """The torch-eager record of the same workload on the same device, when it ran ok."""
        return self._eager.get((rec.device, *workload_key(rec)))

    def working_remedy(self, rec: CellRecord) -> CellRecord | None:
        """The fastest remedy attempt of this cell that worked, if any: ran ok, or for an export-only target
        (whose success is `exported`), exported."""
        ok = [r for r in self.remedies.get(rec.cell_id, []) if r.status in ("ok", "exported")]
        return min(ok, key=lambda r: p50(r) or float("inf")) if ok else None

    def all_records(self) -> list[CellRecord]:
        """Cells and remedy attempts together."""
        return self.cells + [r for rs in self.remedies.values() for r in rs]

    def tasks(self) -> tuple[str, ...]:
        """The tasks of the machine's cells, in the axis' order (detect first)."""
        return tuple(sorted({str(r.task) for r in self.cells}, key=lambda t: order_key(t, TASKS)))

    def heads(self, task: str) -> frozenset[str]:
        """The heads of the machine's cells of `task` that ran ok (both: a pick says which it is)."""
        if task not in self._heads:
            self._heads[task] = frozenset(
                str(r.head) for r in self.cells if r.task == task and r.status == "ok"
            )
        return self._heads[task]

    def families(self) -> tuple[str, ...]:
        """The model families of the machine's cells, in the axis' order (YOLO26 first)."""
        return tuple(sorted({str(r.family) for r in self.cells}, key=lambda f: order_key(f, FAMILIES)))

    def of_family(self, family: str) -> RunIndex:
        """The machine's cells of one model family, as an index of their own: the use cases that say what to ship
        decide on YOLO26's (harness.decide.tasks), the migration answer pairs the families."""
        return self._subset(lambda r: r.family == family)

    def _subset(self, keep) -> RunIndex:
        cells = [r for r in self.cells if keep(r)]
        ids = {str(r.cell_id) for r in cells}
        return RunIndex(
            run=self.run,
            position=self.position,
            cells=cells,
            remedies={k: v for k, v in self.remedies.items() if k in ids},
            by_id={k: v for k, v in self.by_id.items() if k in ids},
            _eager={k: v for k, v in self._eager.items() if keep(v)},
        )

    def of_task(self, task: str) -> RunIndex:
        """The machine's cells of one task, as an index of their own (the same run and position): a use case never
        compares a classifier with a detector."""
        cells = [r for r in self.cells if r.task == task]
        ids = {str(r.cell_id) for r in cells}
        return RunIndex(
            run=self.run,
            position=self.position,
            cells=cells,
            remedies={k: v for k, v in self.remedies.items() if k in ids},
            by_id={k: v for k, v in self.by_id.items() if k in ids},
            _eager={k: v for k, v in self._eager.items() if v.task == task},
        )


def index_runs(runs: list[Run]) -> list[RunIndex]:
    """Index each run; a run's position is its column group's number."""
    return [RunIndex.build(run, n) for n, run in enumerate(runs)]


def row_label(key: tuple) -> str:
    """`yolo26n detect · e2e · b1 · fp32` (`yolo11n detect · raw · ...`) for a row key."""
    size, task, head, batch, prec, family = _row(key)
    return f"{family}{size} {task} · {head} · b{batch} · {prec}"


def machine_label(idx: RunIndex, all_idx: list[RunIndex]) -> str:
    """The machine name, with the run id when two rendered runs share a machine."""
    label = idx.run.machine
    if sum(1 for o in all_idx if o.run.machine == label) > 1:
        label = f"{label} · {idx.run.run_id}"
    return label
