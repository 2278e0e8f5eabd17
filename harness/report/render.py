"""Rendering: records in, reports/<report_id>/{index.html, summary.json, summary.md} out, and reports/latest/.

Rendering is a pure function of the records (and the optional history dict): it reads files and never measures.
Every string from a record or log reaches the page through Jinja's autoescape, and every value the page prints
through `clip_text` (Jinja's `finalize`): cut to TEXT_LIMIT characters, and its control and bidirectional
characters escaped (harness.core.safe_text.page_text). The page's files are built in memory and written only when
all of them are: a report that cannot be rendered leaves no directory behind.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from harness.core.record import CellRecord
from harness.core.results_dir import write_bytes_atomic
from harness.core.safe_text import UNSAFE_ON_PAGE, page_text, terminal_text
from harness.decide.decision import decide
from harness.decide.index import RunIndex, index_runs
from harness.decide.load import load_runs
from harness.decide.picks import Constraints
from harness.report.claims import evaluate
from harness.report.coverage import night_coverage
from harness.report.decision import absent_devices, anchor, decision_rows, machine_columns
from harness.report.fmt import Notes
from harness.report.front import fronts
from harness.report.header import report_id, run_header
from harness.report.host_bound import host_bound_section
from harness.report.matrix import build_folded, build_matrices
from harness.report.parity_table import parity_rows
from harness.report.plots import all_plots, palette
from harness.report.plots_e2e import e2e_plots
from harness.report.relations import relations_section
from harness.report.roofline import roofline_section
from harness.report.scenarios import e2e_rows, post_notes, scenario_rows
from harness.report.summary import summary_json, summary_md
from harness.report.tables import failures, has_compile_times, measured_rows, memory_sources, verdicts
from harness.report.trends import regressions, trend_svgs

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).with_name("templates")
OUTPUT_FILES = ("index.html", "summary.json", "summary.md", "decision.json")


#: the most characters of one value the page shows (a reason, a failure message, a title); the rest is in the log
TEXT_LIMIT = 4000


def clip_text(value: Any) -> Any:
    """Jinja's `finalize`: every string a template prints is cut to TEXT_LIMIT characters with a note, so a
    record's 200 MB `reason` cannot become a 200 MB page, and its control and bidirectional characters are escaped
    (safe_text.page_text). Markup the harness made itself (the plots' SVG, marked safe) is left whole but for those
    characters (an escape is plain text in markup too)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if hasattr(value, "__html__"):
        html = str(value.__html__())
        return Markup(page_text(html)) if UNSAFE_ON_PAGE.search(html) else value
    text = value if isinstance(value, str) else str(value)
    if len(text) > TEXT_LIMIT:
        text = (
            text[:TEXT_LIMIT]
            + f" … [{len(text) - TEXT_LIMIT} more characters: the full text is in the cell log "
            "and its record in cells.jsonl]"
        )
    return page_text(text)


def _environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=clip_text,
    )


@dataclass(frozen=True)
class Unlinked:
    """A path a record holds that the page does not link, and why (listed under the page's notes)."""

    run: str
    cell_id: str
    path: str
    why: str


#: the most characters of an unlinked path the page and the warning show
_PATH_SHOWN = 200


class LogLinks:
    """Relative links from the report directory to each record's log (reports/latest/ has the same depth).

    Only a regular file inside the run directory it was recorded in (or, for a merged run, the machine's source run
    directory where harness.core.results_dir.source_root trusts it) is linked: a record's `log` is text from a
    file, and `../../../../etc/passwd` must stay text. A path that points outside, holds a NUL or another control
    or bidirectional character, or cannot be resolved is not linked, and is listed with why in `unlinked` (the
    page's notes) and as a warning; a path to a file that is simply not there is not linked, silently."""

    def __init__(self, report_dir: Path) -> None:
        self.report_dir = report_dir.resolve()
        self.unlinked: list[Unlinked] = []
        self._seen: set[tuple[str, str, str]] = set()

    def __call__(self, idx: RunIndex, rec: CellRecord) -> str | None:
        return self.file(idx, rec.log, rec.cell_id)

    def file(self, idx: RunIndex, rel: object, cell_id: str | None = None) -> str | None:
        """The link to `rel`, a path a record holds relative to its run directory (a log, LoadGen's summary)."""
        if not rel or not isinstance(rel, str):
            return None
        if "\0" in rel or UNSAFE_ON_PAGE.search(rel):
            self._refuse(idx, cell_id, rel, "the path holds a NUL, a control or a bidirectional character")
            return None
        inside = False
        # A merged results dir keeps each record's log path relative to the machine's source run dir.
        for root in idx.run.log_roots or (idx.run.path,):
            try:
                root = Path(root).resolve()
                target = (
                    root / rel
                ).resolve()  # `..` and symbolic links resolved before the containment check
                if not target.is_relative_to(root) or target == root:
                    continue
                inside = True
                if target.is_file():
                    return Path(os.path.relpath(target, self.report_dir)).as_posix()
            except (OSError, ValueError, RuntimeError) as e:  # a name too long, a loop of links
                self._refuse(idx, cell_id, rel, f"it cannot be resolved ({e})")
                return None
        if not inside:
            self._refuse(idx, cell_id, rel, "it points outside the run directory")
        return None

    def _refuse(self, idx: RunIndex, cell_id: str | None, rel: str, why: str) -> None:
        """Note `rel` as not linked (once per run, cell and path): in the page's list and as a warning."""
        key = (idx.run.run_id, str(cell_id), rel)
        if key in self._seen:
            return
        self._seen.add(key)
        shown = rel if len(rel) <= _PATH_SHOWN else rel[:_PATH_SHOWN] + "..."
        self.unlinked.append(Unlinked(idx.run.run_id, str(cell_id or "-"), shown, why))
        log.warning("%s", terminal_text(f"{idx.run.run_id}: {cell_id or '-'}: {shown!r} not linked: {why}"))


def operators_html(indexes: list[RunIndex]) -> Markup | None:
    """The operator view (harness.report.operators, written apart from this module), or None while that module
    does not exist. It returns HTML it escaped itself."""
    try:
        from harness.report.operators import render_operators
    except ModuleNotFoundError as e:
        if e.name != "harness.report.operators":
            raise  # the module is there and broken: that is a bug to see, not a section to leave out
        return None
    # The cells and remedy attempts that ran: a skipped cell has no operators to show, only its skip reason.
    records = [r for idx in indexes for r in idx.all_records() if r.status != "skipped"]
    # Markup: the fragment is HTML the operator module built and escaped, as the plots' SVG is ours.
    return Markup(render_operators(records))


def build_content(
    indexes: list[RunIndex],
    report_dir: Path,
    history: dict | None = None,
    floors: dict[str, float] | None = None,
    memory_cap_mib: float | None = None,
    cons: Constraints | None = None,
) -> dict[str, Any]:
    """Everything the templates show, computed from the records. `cons` (all the constraints) wins over `floors`
    and `memory_cap_mib`."""
    notes = Notes()
    href = LogLinks(report_dir)
    trends = trend_svgs(history)
    with_compile = has_compile_times(indexes)
    color = palette(indexes)
    cons = cons or Constraints(floors, memory_cap_mib)
    memory_cap_mib = cons.memory_cap_mib
    decided = decide(indexes, cons)
    recs = list(decided.answers)
    rows = measured_rows(indexes, notes, href, trends, with_compile)
    decision = decision_rows(recs, indexes)
    e2e = e2e_rows(indexes, notes)
    return {
        "report_id": report_id(indexes),
        "headers": [run_header(idx, indexes) for idx in indexes],
        "decision": decision,
        "decision_columns": machine_columns(decision, indexes),
        "constraints": cons.text(),
        "decision_json": decided.to_json(),
        "fronts": fronts(indexes, cons),
        "absent": absent_devices(indexes),
        "memory_cap_mib": memory_cap_mib,
        "rec_anchor": anchor,
        "verdicts": verdicts(indexes),
        "relations": relations_section(indexes),
        "host_bound": host_bound_section(indexes),
        "roofline": roofline_section(indexes, notes),
        "matrices": build_matrices(indexes, href),
        "folded": build_folded(indexes, href),
        "rows": rows,
        "memory_sources": memory_sources(rows),
        "e2e_rows": e2e,
        "e2e_post": post_notes(e2e),
        "scenario_rows": scenario_rows(indexes, notes, href, href.file),
        "e2e_plots": e2e_plots(indexes, color),
        "operators": operators_html(indexes),
        "has_compile": with_compile,
        "has_trends": bool(trends),
        "plots": all_plots(indexes, color),
        "use_cases": recs,
        "claims": evaluate(indexes),
        "regressions": regressions(history),
        "coverage": night_coverage(indexes, history),
        "failures": failures(indexes, href),
        "parity": parity_rows(indexes, href),
        "notes": notes,
        "unlinked": href.unlinked,  # filled while the rows above were built
    }


def render_html(content: dict[str, Any]) -> str:
    """The HTML page for the content built by `build_content`."""
    return _environment().get_template("report.html.j2").render(**content)


def render_report(
    result_dirs: list[Path],
    out_root: Path = Path("reports"),
    history: dict | None = None,
    floors: dict[str, float] | None = None,
    memory_cap_mib: float | None = None,
    cons: Constraints | None = None,
) -> Path:
    """Render the runs in `result_dirs` side by side; returns the written index.html.

    Writes <out_root>/<report_id>/ (index.html, summary.json, summary.md) and refreshes <out_root>/latest/.
    `floors` and `memory_cap_mib` are the constraints every recommendation applies; `cons` all of them (the
    camera's frame rate, the server's bound, --min-shape too), winning over the two.
    """
    runs = load_runs([Path(d) for d in result_dirs])
    if not runs:
        raise ValueError("no runs to report on")
    indexes = index_runs(runs)
    out_root = Path(out_root)
    report_dir = out_root / report_id(indexes)
    content = build_content(indexes, report_dir, history, floors, memory_cap_mib, cons)
    texts = {  # every file built before any is written: a failure here leaves nothing behind
        "index.html": render_html(content),
        "summary.json": summary_json(content, indexes),
        "summary.md": summary_md(content),
        "decision.json": content["decision_json"],
    }
    files = {name: text.encode("utf-8") for name, text in texts.items()}
    created = not report_dir.exists()
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        for name in OUTPUT_FILES:
            write_bytes_atomic(report_dir / name, files[name])
    except OSError:
        if created:
            shutil.rmtree(report_dir, ignore_errors=True)
        raise
    _refresh_latest(report_dir, out_root / "latest")
    return report_dir / "index.html"


def _refresh_latest(report_dir: Path, latest: Path) -> None:
    """Copy (not link: CI artifact uploads drop symlinks) the newest report's files into latest/."""
    if latest.is_symlink() or latest.is_file():
        latest.unlink()
    latest.mkdir(parents=True, exist_ok=True)
    for name in OUTPUT_FILES:
        tmp = latest / f".{name}.tmp"
        shutil.copyfile(report_dir / name, tmp)
        os.replace(tmp, latest / name)
    (latest / "REPORT_ID").write_text(report_dir.name + "\n", encoding="utf-8")
