"""The HTML report rendered from recorded runs, parsed and checked against the records it came from."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.core.record import FAILED_STATUSES, CellRecord
from harness.core.record_codec import record_to_json
from harness.core.results_dir import read_records
from harness.report import render_report

DATA = Path(__file__).parent / "data" / "report"
CPU_RUN, GPU_RUN = DATA / "cpu_run", DATA / "gpu_run"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


# -- a small DOM over the standard library's HTML parser -------------------------------------------------------
@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)
    _flat: list[Node] | None = field(default=None, repr=False, compare=False)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> list[Node]:
        """This node and every node under it, in document order; listed once (a parsed document is not changed
        after, and the tests query the same report thousands of times)."""
        if self._flat is None:
            flat, stack = [], [self]
            while stack:
                n = stack.pop()
                flat.append(n)
                stack.extend(c for c in reversed(n.children) if isinstance(c, Node))
            self._flat = flat
        return self._flat

    def all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        out = []
        for n in self.iter():
            if tag and n.tag != tag:
                continue
            if cls and cls not in n.attrs.get("class", "").split():
                continue
            if any(n.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(n)
        return out

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, cls, **attrs)
        assert len(found) == 1, f"expected one <{tag} class={cls} {attrs}>, found {len(found)}"
        return found[0]


class TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return
        raise AssertionError(f"stray </{tag}>")

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(path: Path) -> Node:
    b = TreeBuilder()
    b.feed(path.read_text(encoding="utf-8"))
    b.close()
    assert len(b.stack) == 1, f"unclosed elements: {[n.tag for n in b.stack[1:]]}"
    return b.root


def shape_of(rec: CellRecord) -> str:
    return "dynamic" if rec.dynamic else f"{rec.height}x{rec.width}"


def is_attempt(rec: CellRecord, by_id: dict[str, CellRecord]) -> bool:
    """A remedy attempt of another cell of the run, except a sweep shape run on a remedied dynamic artifact
    (its remedy_of is the dynamic probe, which has no shape): that is a cell of the dynamic matrix."""
    target = by_id.get(rec.remedy_of or "")
    if target is None:
        return False
    return not (rec.dynamic and rec.height and target.dynamic and not target.height)


def cells_of(run_dir: Path) -> list[CellRecord]:
    """The run's records that are matrix cells (not remedy attempts)."""
    recs = read_records(run_dir)
    by_id = {r.cell_id: r for r in recs}
    return [r for r in recs if not is_attempt(r, by_id)]


def write_records(run_dir: Path, recs: list[CellRecord]) -> None:
    """Replace the run's cells.jsonl with these records."""
    (run_dir / "cells.jsonl").write_text("\n".join(record_to_json(r) for r in recs) + "\n")


# -- fixtures ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[Path, Node]:
    out = tmp_path_factory.mktemp("reports")
    index = render_report([CPU_RUN, GPU_RUN], out)
    return index, parse(index)


@pytest.fixture(scope="module")
def cpu_only(tmp_path_factory) -> tuple[Path, Node]:
    out = tmp_path_factory.mktemp("reports-cpu")
    index = render_report([CPU_RUN], out)
    return index, parse(index)


# -- files ---------------------------------------------------------------------------------------------------
def test_writes_report_dir_summaries_and_latest(both):
    index, _ = both
    assert index.name == "index.html"
    assert index.parent.name == "20261120T101500Z-cpu+20261120T113000Z-h100"
    latest = index.parent.parent / "latest"
    for name in ("index.html", "summary.json", "summary.md"):
        assert (index.parent / name).read_bytes() == (latest / name).read_bytes()


def test_single_run_report_is_named_by_its_run_id(cpu_only):
    index, doc = cpu_only
    assert index.parent.name == "20261120T101500Z-cpu"
    assert doc.one(id="report-id").text() == "20261120T101500Z-cpu"


def test_self_contained_no_script_no_remote_resources(both):
    index, doc = both
    html = index.read_text()
    assert not doc.all("script") and not doc.all("link") and not doc.all("img")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(http" not in html
    # the four plots and one roofline per machine are inline SVG
    assert len(doc.all("svg", cls="plot")) == 4 + 2
    rooflines = [f.attrs["data-plot"] for f in doc.all("figure") if "roofline" in f.attrs["data-plot"]]
    assert rooflines == ["roofline-0", "roofline-1"]


# -- header --------------------------------------------------------------------------------------------------
def test_header_names_runs_machines_and_weights(both):
    _, doc = both
    for run_dir in (CPU_RUN, GPU_RUN):
        env = json.loads((run_dir / "env.json").read_text())
        table = doc.one("table", cls="run", data_run_id=env["run_id"])
        text = table.text()
        assert env["git_commit"] in text and env["started_at"] in text
        assert env["host"]["cpu_model"] in text
        for g in env["gpu"]:
            assert g["name"] in text and g["driver"] in text
        weights = {r.weights for r in read_records(run_dir) if r.weights != "unknown"}
        assert {
            w.strip() for w in table.one("td", cls="weights").children if isinstance(w, str) and w.strip()
        } >= weights
    warning = doc.one(id="random-init-warning").text()
    assert "20261120T101500Z-cpu" in warning and "20261120T113000Z-h100" not in warning


def test_no_random_init_warning_for_pretrained_weights(tmp_path):
    doc = parse(render_report([GPU_RUN], tmp_path))
    assert not doc.all(id="random-init-warning")


def test_synthetic_runs_carry_the_banner_and_real_ones_do_not(both, tmp_path):
    """The fixtures are generated (invented GPU figures included) and say so in their data: env.json and every
    record; the report shows it. A real run's report has no banner."""
    index, doc = both
    for run_dir in (CPU_RUN, GPU_RUN):
        assert json.loads((run_dir / "env.json").read_text())["synthetic"] is True
        assert all(r.synthetic is True for r in read_records(run_dir))
    banner = doc.one(id="synthetic-warning").text()
    assert (
        "20261120T101500Z-cpu" in banner and "20261120T113000Z-h100" in banner and "Synthetic data" in banner
    )
    summary = json.loads((index.parent / "summary.json").read_text())
    assert [r["synthetic"] for r in summary["runs"]] == [True, True]
    assert "synthetic data" in (index.parent / "summary.md").read_text()
    # one record saying so is enough; none, and there is no banner
    run = tmp_path / "results" / "real"
    shutil.copytree(CPU_RUN, run)
    env = json.loads((run / "env.json").read_text())
    env.pop("synthetic")
    (run / "env.json").write_text(json.dumps(env))
    recs = read_records(run)
    for r in recs:
        r.synthetic = None  # an optional field: not written when None
    write_records(run, recs)
    assert not parse(render_report([run], tmp_path / "r1")).all(id="synthetic-warning")
    recs[3].synthetic = True
    write_records(run, recs)
    assert parse(render_report([run], tmp_path / "r2")).one(id="synthetic-warning")


# -- verdicts ------------------------------------------------------------------------------------------------
def test_verdict_counts_match_the_records(both):
    _, doc = both
    for run_dir, label in ((CPU_RUN, "Intel"), (GPU_RUN, "NVIDIA H100")):
        recs = read_records(run_dir)
        cells = cells_of(run_dir)
        row = next(
            r
            for r in doc.one("table", cls="verdicts").all("tr")
            if r.attrs.get("data-label", "").startswith(label)
        )
        count = {td.attrs["data-k"]: td.text() for td in row.all("td") if "data-k" in td.attrs}
        assert int(count["total"]) == len(cells)
        assert int(count["ok"]) == sum(r.status == "ok" for r in cells)
        assert int(count["skipped"]) == sum(r.status == "skipped" for r in cells)
        assert int(count["exported"]) == sum(r.status == "exported" for r in cells)
        failed = [r for r in cells if r.status in FAILED_STATUSES]
        assert int(count["failed"]) == len(failed)
        remedied = {r.remedy_of for r in recs if r.remedy_of and r.status == "ok"}
        assert int(count["remedied"]) == len(remedied) > 0
        classes = {
            s.attrs["data-class"]: int(s.text().split()[-1])
            for s in row.all("span")
            if "data-class" in s.attrs
        }
        expected: dict[str, int] = {}
        for r in failed:
            expected[r.failure["class"]] = expected.get(r.failure["class"], 0) + 1
        assert classes == expected


# -- matrix --------------------------------------------------------------------------------------------------
def entry_of(doc: Node, run_pos: int, rec: CellRecord) -> tuple[Node, Node]:
    """The matrix cell (td) and entry of a record: in its shape's matrix, in its run's column group; or, for a
    cell of a device or backend that ran no cell on its machine, its entry on that folded line (which carries the
    run, device and backend itself)."""
    folded = doc.all("table", cls="folded")
    found = [
        (e, e)
        for table in folded
        for e in table.all("div", cls="entry", data_cell_id=rec.cell_id, data_run=str(run_pos))
    ]
    if found:
        assert len(found) == 1, f"{rec.cell_id}: {len(found)} folded entries in run {run_pos}"
        return found[0]
    table = doc.one("table", cls="matrix", data_shape=shape_of(rec))
    found = [
        (td, e)
        for td in table.all("td", cls="cell", data_run=str(run_pos))
        for e in td.all("div", cls="entry", data_cell_id=rec.cell_id)
    ]
    assert len(found) == 1, f"{rec.cell_id}: {len(found)} entries in run {run_pos}'s columns"
    return found[0]


def test_every_cell_appears_once_in_its_shape_matrix_and_column(both):
    index, doc = both
    for run_pos, run_dir in enumerate((CPU_RUN, GPU_RUN)):
        for rec in cells_of(run_dir):
            td, entry = entry_of(doc, run_pos, rec)
            assert entry.attrs["data-status"] == rec.status
            assert (td.attrs["data-device"], td.attrs["data-backend"]) == (rec.device, rec.backend)
            if rec.log:
                link = entry.one("a", cls="log")
                assert (index.parent / link.attrs["href"]).resolve() == (run_dir / rec.log).resolve()
                assert (index.parent / link.attrs["href"]).is_file()


def test_remedy_attempts_are_attached_to_the_cell_they_remedy(both):
    _, doc = both
    checked = 0
    for run_pos, run_dir in enumerate((CPU_RUN, GPU_RUN)):
        recs = read_records(run_dir)
        by_id = {r.cell_id: r for r in recs}
        for rem in (r for r in recs if is_attempt(r, by_id)):
            assert not doc.all("div", cls="entry", data_cell_id=rem.cell_id)
            failing = by_id[rem.remedy_of]
            _, entry = entry_of(doc, run_pos, failing)
            text = entry.text()
            assert failing.failure["class"] in text
            if rem.status != "ok":
                assert f"remedy tried, did not work: {rem.remedy}" in text
                assert "remedied" not in entry.attrs["class"].split()
                continue
            assert "remedied" in entry.attrs["class"].split()
            assert f"works via {rem.remedy}" in text
            if rem.latency_ms:
                shown = float(re.search(r"works via \S+ \(p50 ([\d.]+) ms", text).group(1))
                assert shown == pytest.approx(rem.latency_ms.p50, rel=0.01)
            checked += 1
    assert checked >= 4  # backbone-only x2, 32*Dim on XNNPACK, letterbox padding at 650


def test_sweep_on_a_remedied_dynamic_artifact_is_in_the_dynamic_matrix(both):
    _, doc = both
    recs = read_records(CPU_RUN)
    sweeps = [r for r in recs if r.dynamic and r.height and r.remedy == "dim-multiple-of-32"]
    assert sweeps
    for rec in sweeps:
        _, entry = entry_of(doc, 0, rec)
        assert entry.one("span", cls="shape").text() == f"{rec.height}x{rec.width}"
        assert "remedy: dim-multiple-of-32" in entry.text()


def test_failed_cells_show_class_ops_guards_and_link_to_details(both):
    _, doc = both
    failed_attempts = 0
    for run_dir in (CPU_RUN, GPU_RUN):
        cell_ids = {r.cell_id for r in cells_of(run_dir)}
        for rec in read_records(run_dir):
            if rec.status in FAILED_STATUSES and rec.cell_id not in cell_ids:
                # a failed remedy attempt: no matrix entry of its own, but it has its failure details
                detail = doc.one("div", cls="failure", data_cell_id=rec.cell_id)
                assert rec.failure["message"].splitlines()[0] in detail.text()
                assert f"remedy attempt of {rec.remedy_of}" in detail.text()
                failed_attempts += 1
    assert failed_attempts
    for run_pos, rec in [(0, r) for r in cells_of(CPU_RUN)] + [(1, r) for r in cells_of(GPU_RUN)]:
        if rec.status not in FAILED_STATUSES:
            continue
        _, entry = entry_of(doc, run_pos, rec)
        text = entry.text()
        assert rec.failure["class"] in text
        for op in rec.failure["ops"][:3]:
            assert op in text
        if rec.failure["guards"]:
            assert "guard: " + rec.failure["guards"][0] in text
        target = entry.one("a", cls="badge").attrs["href"].lstrip("#")
        detail = doc.one("div", cls="failure", id=target)
        assert detail.attrs["data-cell-id"] == rec.cell_id
        assert rec.failure["message"].splitlines()[0] in detail.text()


def test_columns_are_grouped_by_machine_then_device(both):
    _, doc = both
    table = doc.one("table", cls="matrix", data_shape="dynamic")
    header_rows = table.one("thead").all("tr")
    machines = [th.text() for th in header_rows[0].all("th")[1:]]
    assert len(machines) == 2 and "Xeon" in machines[0] and "H100" in machines[1]
    cols = [(c.attrs["data-run"], c.attrs["data-device"]) for c in header_rows[2].all("th", cls="col")]
    assert cols == sorted(cols, key=lambda c: (c[0], c[1] != "cpu", c[1]))


def test_dynamic_matrix_shows_each_shape_run(both):
    _, doc = both
    for rec in read_records(GPU_RUN):
        if rec.dynamic and rec.height and not rec.remedy_of:
            _, entry = entry_of(doc, 1, rec)
            assert entry.one("span", cls="shape").text() == f"{rec.height}x{rec.width}"


# -- tables --------------------------------------------------------------------------------------------------
def _row(doc: Node, table: str, cell_id: str, run_pos: int | None = None) -> dict[str, Node]:
    where = {"data_cell_id": cell_id} | ({"data_run": str(run_pos)} if run_pos is not None else {})
    tr = doc.one("table", cls=table).one("tr", **where)
    return {td.attrs["data-col"]: td for td in tr.all("td") if "data-col" in td.attrs}


def _num(td: Node) -> float:
    return float(td.text().split()[0].replace(",", "").rstrip("×"))


def test_latency_table_shows_the_recorded_numbers(both):
    _, doc = both
    notes = {li.attrs["id"]: li.text() for li in doc.one("ol", cls="notes").all("li")}
    for run_pos, rec in [(0, r) for r in read_records(CPU_RUN)] + [(1, r) for r in read_records(GPU_RUN)]:
        if rec.status != "ok":
            continue
        row = _row(doc, "latency", rec.cell_id, run_pos)
        if rec.latency_ms is None:  # the dynamic probe: its latency is in the sweep records
            note = row["p50"].one("a").attrs["href"].lstrip("#")
            assert notes[note] == rec.null_reasons["latency_ms"]
            continue
        for col, value in (
            ("p50", rec.latency_ms.p50),
            ("p90", rec.latency_ms.p90),
            ("p99", rec.latency_ms.p99),
            ("throughput", rec.throughput_ips),
            ("first_run", rec.first_run_ms),
        ):
            assert _num(row[col]) == pytest.approx(value, rel=0.006), (rec.cell_id, col)
        if rec.export_s is None:
            assert row["export_s"].text().startswith("n/a")
        else:
            assert _num(row["export_s"]) == pytest.approx(rec.export_s, rel=0.006)


def test_speedup_is_over_torch_eager_on_the_same_device_and_workload(both):
    _, doc = both
    recs = read_records(GPU_RUN)
    eager = next(r for r in recs if r.cell_id == "yolo26n-detect-e2e-torch-eager-cuda-640x640-b1-fp32")
    trt = next(r for r in recs if r.cell_id == "yolo26n-detect-e2e-tensorrt-cuda-640x640-b1-fp32")
    row = _row(doc, "latency", trt.cell_id, 1)
    assert _num(row["speedup"]) == pytest.approx(eager.latency_ms.p50 / trt.latency_ms.p50, rel=0.006)
    assert _row(doc, "latency", eager.cell_id, 1)["speedup"].text() == "ref"
    gflops = _num(row["gflops_s"])
    assert gflops == pytest.approx(trt.gflops / (trt.latency_ms.p50 / 1000), rel=0.006)


def test_unmeasured_values_are_na_with_the_records_reason_never_zero(both):
    _, doc = both
    notes = {li.attrs["id"]: li.text() for li in doc.one("ol", cls="notes").all("li")}
    rec = next(
        r for r in read_records(CPU_RUN) if r.cell_id == "yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32"
    )
    row = _row(doc, "memory", rec.cell_id, 0)
    # (column, the field's value, the null_reasons key that explains it: the field's own, or its whole section's)
    for col, value, why in (
        ("device_process", rec.memory.device_peak_process_mib, "memory.device_peak_process_mib"),
        ("energy", rec.energy.per_inference_j if rec.energy else None, "energy"),
    ):
        assert value is None
        td = row[col]
        assert td.text().startswith("n/a")
        note = td.one("a").attrs["href"].lstrip("#")
        assert notes[note] == rec.null_reasons[why]
    assert _num(row["host_peak"]) == pytest.approx(rec.memory.host_peak_rss_mib, rel=0.006)
    # no table cell shows a bare 0 where the record has no value
    for tr in doc.one("table", cls="memory").all("tr")[1:]:
        assert all(td.text().strip() != "0" for td in tr.all("td"))


def test_precision_executed_is_shown_when_it_differs(both):
    _, doc = both
    tr = doc.one("table", cls="latency").one(
        "tr", data_cell_id="yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp16"
    )
    assert "mismatch" in tr.attrs.get("class", "")
    assert "fp16 → fp32" in tr.one("td", cls="prec").text()


# -- recommendations -----------------------------------------------------------------------------------------
def _best(recs: list[CellRecord], pred, key) -> list[CellRecord]:
    return sorted((r for r in recs if pred(r)), key=key)


def test_recommendations_follow_the_records(both):
    _, doc = both
    cpu, gpu = read_records(CPU_RUN), read_records(GPU_RUN)

    def n640_b1(r: CellRecord) -> bool:
        return (
            r.status == "ok"
            and r.size == "n"
            and r.task == "detect"
            and r.batch == 1
            and (r.height == 640 and not r.dynamic and r.precision_requested == "fp32" and not r.remedy)
        )

    cpu_ranked = _best(cpu + gpu, lambda r: n640_b1(r) and r.device == "cpu", lambda r: r.latency_ms.p50)
    rec = doc.one("div", cls="rec", data_key="cpu-edge", data_task="detect")
    assert rec.one("div", cls="winner").attrs["data-cell-id"] == cpu_ranked[0].cell_id
    assert rec.one("div", cls="runner-up").attrs["data-cell-id"] == cpu_ranked[1].cell_id
    assert f"{cpu_ranked[0].latency_ms.p50:.3g}" in rec.one("div", cls="winner").text()

    gpu_ranked = _best(gpu, lambda r: n640_b1(r) and r.device == "cuda", lambda r: r.latency_ms.p50)
    rec = doc.one("div", cls="rec", data_key="gpu-latency", data_task="detect")
    assert rec.one("div", cls="winner").attrs["data-cell-id"] == gpu_ranked[0].cell_id
    assert rec.one("div", cls="runner-up").attrs["data-cell-id"] == gpu_ranked[1].cell_id

    thr = max(
        (r for r in gpu if r.status == "ok" and not r.remedy and r.throughput_ips),
        key=lambda r: r.throughput_ips,
    )
    assert (
        doc.one("div", cls="rec", data_key="gpu-throughput", data_task="detect")
        .one("div", cls="winner")
        .attrs["data-cell-id"]
        == thr.cell_id
    )

    exported = sorted(
        (r for r in cpu if r.status == "exported"),
        key=lambda r: -r.ops["delegated"] / (r.ops["delegated"] + r.ops["fallback"]),
    )
    rec = doc.one("div", cls="rec", data_key="mobile-embedded", data_task="detect")
    assert rec.one("div", cls="winner").attrs["data-cell-id"] == exported[0].cell_id
    assert rec.one("div", cls="runner-up").attrs["data-cell-id"] == exported[1].cell_id


def test_overlapping_p50_intervals_render_as_a_tie(tmp_path):
    """openvino's rounds made equal to onnxruntime's at 640: the page says tied, names no winner."""
    run = tmp_path / "results" / "tie"
    shutil.copytree(CPU_RUN, run)
    recs = read_records(run)
    ort = next(r for r in recs if r.cell_id == "yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32")
    ov = next(r for r in recs if r.cell_id == "yolo26n-detect-e2e-openvino-cpu-640x640-b1-fp32")
    ov.samples_ms = [v * 0.999 for v in ort.samples_ms]
    ov.latency_ms = dataclasses.replace(ort.latency_ms, p50=ort.latency_ms.p50 * 0.999)
    write_records(run, recs)
    rec = parse(render_report([run], tmp_path / "reports")).one(
        "div", cls="rec", data_key="cpu-edge", data_task="detect"
    )
    assert not rec.all("div", cls="winner") and not rec.all("div", cls="runner-up")
    tied = rec.one("div", cls="tied")
    assert "Tied, no winner" in tied.text() and "overlap" in tied.text()
    assert [d.attrs["data-cell-id"] for d in tied.all("div", cls="tie")] == [ov.cell_id, ort.cell_id]


def test_gpu_recommendations_say_none_qualifies_on_a_cpu_only_run(cpu_only):
    _, doc = cpu_only
    for key in ("gpu-latency", "gpu-throughput"):
        rec = doc.one("div", cls="rec", data_key=key, data_task="detect")
        assert not rec.all("div", cls="winner")
        assert "GPU" in rec.one("div", cls="none").text()
    assert doc.one("div", cls="rec", data_key="cpu-edge", data_task="detect").all("div", cls="winner")


# -- claims --------------------------------------------------------------------------------------------------
def test_claims_are_judged_against_this_runs_measurements(both, cpu_only):
    _, doc = both
    verdict = {
        tr.attrs["data-claim"]: tr
        for tr in doc.one("table", cls="claims").all("tr")
        if "data-claim" in tr.attrs
    }
    assert verdict["aoti-full-model"].attrs["data-verdict"] == "confirmed"
    assert verdict["aoti-dynamic-blocked"].attrs["data-verdict"] == "confirmed"
    assert verdict["aoti-backbone-only"].attrs["data-verdict"] == "confirmed"
    xnn = next(
        r
        for r in read_records(CPU_RUN)
        if r.cell_id == "yolo26n-detect-e2e-executorch-xnnpack-cpu-640x640-b1-fp32"
    )
    # a Core i7 figure is set against a Xeon only as context; an A100 figure against an H100 likewise
    assert verdict["xnnpack-latency-n"].attrs["data-verdict"] == "not comparable here"
    assert f"{xnn.latency_ms.p50:.3g}" in verdict["xnnpack-latency-n"].text()
    trt = verdict["tensorrt-latency-n"]
    assert (
        trt.attrs["data-verdict"] == "not comparable here" and "A100" in trt.text() and "H100" in trt.text()
    )
    assert verdict["compile-first-call"].attrs["data-verdict"] == "confirmed"  # compile_s, not first_run_ms
    assert verdict["onnx-portable"].attrs["data-verdict"] == "untestable"
    assert (
        verdict["vulkan-full-model"].attrs["data-verdict"] == "refuted"
    )  # 1 fallback node is not the full model
    _, cpu_doc = cpu_only
    cpu_verdict = {tr.attrs["data-claim"]: tr for tr in cpu_doc.all("tr") if "data-claim" in tr.attrs}
    assert cpu_verdict["aoti-full-model"].attrs["data-verdict"] == "not measurable"
    assert cpu_verdict["openvino-faster-than-torch"].attrs["data-verdict"] == "confirmed"


def test_every_claim_verdict_links_to_the_matrix_entries_that_decided_it(both):
    _, doc = both
    ids = {n.attrs["id"] for n in doc.iter() if "id" in n.attrs}
    rows = [tr for tr in doc.one("table", cls="claims").all("tr") if "data-claim" in tr.attrs]
    linked = 0
    for tr in rows:
        links = tr.all("a", cls="cell-link")
        if tr.attrs["data-verdict"] in ("confirmed", "partly", "refuted"):
            assert links, tr.attrs["data-claim"]
        for a in links:
            target = a.attrs["href"].removeprefix("#")
            assert target in ids, (tr.attrs["data-claim"], target)
            entry = doc.one(id=target)
            assert entry.tag == "div" and "entry" in entry.attrs["class"].split()
            linked += 1
    assert linked > 10
    # the backbone-only remedy is shown in the entry of the cell it remedies
    backbone = next(tr for tr in rows if tr.attrs["data-claim"] == "aoti-backbone-only")
    (first, *_) = backbone.all("a", cls="cell-link")
    assert first.attrs["data-cell-id"].endswith("+backbone-only")
    assert first.attrs["href"] == "#cell-1-" + first.attrs["data-cell-id"].removesuffix("+backbone-only")


# -- escaping ------------------------------------------------------------------------------------------------
def test_markup_in_records_is_escaped(both, tmp_path):
    index, doc = both
    rec = next(r for r in read_records(CPU_RUN) if "<script>" in (r.failure or {}).get("message", ""))
    detail = doc.one("div", cls="failure", data_cell_id=rec.cell_id)
    assert "<script>alert('x')</script>" in detail.one("pre").text()
    assert not doc.all("script")
    md = (index.parent / "summary.md").read_text()
    assert "<script>" not in md


def test_hostile_strings_everywhere_stay_text(tmp_path):
    run = tmp_path / "results" / "evil"
    shutil.copytree(CPU_RUN, run)
    evil = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
    recs = read_records(run)
    for rec in recs:
        rec.reason = (rec.reason or "") + evil
        if rec.backend == "openvino":  # reaches matrix headers, tables, recommendations and plot labels
            rec.backend = "openvino" + evil
        if rec.failure:
            rec.failure["ops"] = [evil]
            rec.failure["guards"] = [evil]
        rec.null_reasons = {k: v + evil for k, v in rec.null_reasons.items()}
    write_records(run, recs)
    env = json.loads((run / "env.json").read_text())
    env["host"]["hostname"] = evil
    (run / "env.json").write_text(json.dumps(env))
    doc = parse(render_report([run], tmp_path / "reports"))
    assert not doc.all("script") and not doc.all("img")
    assert (
        doc.one("div", cls="rec", data_key="cpu-edge", data_task="detect")
        .one("div", cls="winner")
        .one("b")
        .text()
        == "openvino" + evil
    )
    assert any(evil in t.text() for t in doc.one("figure", data_plot="latency-gflops").all("text"))
    assert not [n for n in doc.iter() if any(k.startswith("on") for k in n.attrs)]
    assert evil in doc.one("table", cls="run").text()


# -- tolerance -----------------------------------------------------------------------------------------------
def _sparse_record() -> dict:
    """A schema-v1 record with every figure null: only what identifies the cell is set."""
    base = json.loads((CPU_RUN / "cells.jsonl").read_text().splitlines()[0])
    rec = {k: None for k in base}
    rec.update(
        schema_version=1,
        run_id="sparse",
        cell_id="c1",
        status="ok",
        model="yolo26n",
        weights="random-init:0",
        backend="onnxruntime",
        device="cpu",
        size="n",
        task="detect",
        head="e2e",
        batch=1,
        height=640,
        width=640,
        dynamic=False,
        precision_requested="fp32",
        null_reasons={"latency_ms": "benchmarking disabled"},
    )
    return rec


def test_sparse_records_and_missing_env_render(tmp_path):
    run = tmp_path / "sparse"
    run.mkdir()
    (run / "cells.jsonl").write_text(json.dumps(_sparse_record()) + "\n")
    index = render_report([run], tmp_path / "reports")
    doc = parse(index)
    td = _row(doc, "latency", "c1")["p50"]
    assert td.text().startswith("n/a")
    notes = {li.attrs["id"]: li.text() for li in doc.one("ol", cls="notes").all("li")}
    assert notes[td.one("a").attrs["href"].lstrip("#")] == "benchmarking disabled"
    assert "unknown" in doc.one("table", cls="run").text()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"future_field": {"x": 1}}, r"unknown fields \['future_field'\]"),  # not a field of this schema
        ({"model": None}, r"field model = None is not str"),  # a null where the cell's identity belongs
    ],
)
def test_a_record_that_does_not_fit_the_schema_is_skipped_naming_its_line(tmp_path, change, match, caplog):
    run = tmp_path / "sparse"
    run.mkdir()
    lines = [json.dumps(_sparse_record()), json.dumps({**_sparse_record(), "cell_id": "c2", **change})]
    (run / "cells.jsonl").write_text("\n".join(lines) + "\n")
    doc = parse(render_report([run], tmp_path / "reports"))  # written from the rest
    assert any(re.search(r"cells\.jsonl:2: record c2: " + match, m) for m in caplog.messages), caplog.messages
    warning = doc.one("div", id="integrity-warning-1").text()
    assert "1 record line skipped (cells.jsonl:2: record c2: " in warning, warning
    # every line of the file bad: refused in one line, nothing written
    (run / "cells.jsonl").write_text(lines[1] + "\n")
    with pytest.raises(ValueError, match=r"cells\.jsonl: no records \(1 line, 1 of them skipped"):
        render_report([run], tmp_path / "none")
    assert not (tmp_path / "none").exists()


# -- history -------------------------------------------------------------------------------------------------
def test_history_adds_sparklines_and_regressions(tmp_path):
    cell = "yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32"
    history = {
        "trends": {
            cell: [
                {"run_id": "r1", "started_at": "2026-11-18T10:00:00+00:00", "p50": 23.0},
                {"run_id": "r2", "started_at": "2026-11-19T10:00:00+00:00", "p50": None},
                {"run_id": "<b>r3</b>", "started_at": "2026-11-20T10:00:00+00:00", "p50": 24.1},
            ]
        },
        "regressions": [
            {
                "cell_id": cell,
                "kind": "latency",
                "baseline": 20.0,
                "current": 24.1,
                "change_pct": 20.5,
                "detail": "p50 above the baseline's <i>p90</i>",
            },
            {
                "cell_id": "yolo26n-detect-e2e-openvino-cpu-600x600-b1-fp32",
                "kind": "status",
                "baseline": "ok",
                "current": "run_failed",
                "change_pct": None,
                "detail": "was ok in r2",
            },
        ],
    }
    doc = parse(render_report([CPU_RUN], tmp_path, history=history))
    spark = doc.one("table", cls="latency").one("tr", data_cell_id=cell).one("td", cls="trend").one("svg")
    assert len(spark.one("polyline").attrs["points"].split()) == 2  # the run without a p50 is a gap
    assert "<b>r3</b>" in spark.one("title").text()
    rows = doc.one("table", cls="regressions").all("tr")[1:]
    assert [r.attrs["data-kind"] for r in rows] == ["latency", "status"]
    assert "+20.5%" in rows[0].text() and "<i>p90</i>" in rows[0].text()
    assert "n/a" in rows[1].text()


def test_without_history_there_is_no_regressions_section(cpu_only):
    _, doc = cpu_only
    assert not doc.all(id="regressions")


# -- summaries -----------------------------------------------------------------------------------------------
def test_summary_json_matches_the_records(both):
    index, _ = both
    summary = json.loads((index.parent / "summary.json").read_text())
    assert [r["run_id"] for r in summary["runs"]] == ["20261120T101500Z-cpu", "20261120T113000Z-h100"]
    by_id = {(c["run_id"], c["cell_id"]): c for c in summary["cells"]}
    for run_dir in (CPU_RUN, GPU_RUN):
        for rec in read_records(run_dir):
            c = by_id[(rec.run_id, rec.cell_id)]
            assert c["status"] == rec.status
            assert c["p50_ms"] == (rec.latency_ms.p50 if rec.latency_ms else None)
    total = summary["verdicts"]["all machines"]
    assert total["total"] == len(cells_of(CPU_RUN)) + len(cells_of(GPU_RUN))
    assert {c["id"] for c in summary["claims"]} >= {"aoti-full-model", "xnnpack-latency-n"}
    md = (index.parent / "summary.md").read_text()
    assert "## Verdicts" in md and "## Claims check" in md and "random-init" in md


# -- a real recorded run -------------------------------------------------------------------------------------
SAMPLES = Path(__file__).resolve().parent.parent / "results" / "samples"


def _sample_runs() -> list[Path]:
    return sorted(p.parent for p in SAMPLES.glob("**/cells.jsonl")) if SAMPLES.is_dir() else []


@pytest.mark.skipif(not _sample_runs(), reason="no recorded run under results/samples/ in this checkout")
@pytest.mark.slow
def test_real_recorded_run_matrix_matches_its_records(tmp_path):
    for run_dir in _sample_runs():
        index = render_report([run_dir], tmp_path / run_dir.name)
        doc = parse(index)
        cells = cells_of(run_dir)
        assert cells, f"{run_dir} has no records"
        entries = doc.all("div", cls="entry")
        assert sorted(e.attrs["data-cell-id"] for e in entries) == sorted({r.cell_id for r in cells})
        latest = {r.cell_id: r for r in read_records(run_dir)}
        for e in entries:
            rec = latest[e.attrs["data-cell-id"]]
            assert e.attrs["data-status"] == rec.status
            td, _ = entry_of(doc, 0, rec)
            assert (td.attrs["data-device"], td.attrs["data-backend"]) == (rec.device, rec.backend)
            if rec.status == "ok" and rec.latency_ms:
                assert _num(_row(doc, "latency", rec.cell_id)["p50"]) == pytest.approx(
                    rec.latency_ms.p50, rel=0.006
                )


# -- a merged multi-machine results dir (python -m harness merge) --------------------------------------------
def test_merged_results_dir_renders_one_column_group_per_machine(tmp_path):
    merged = tmp_path / "results" / "merged-ci"
    merged.mkdir(parents=True)
    lines, machines = [], []
    for run_dir, machine in ((CPU_RUN, "ci-cpu-2"), (GPU_RUN, "gpu-runner-7")):
        env = json.loads((run_dir / "env.json").read_text())
        machines.append(
            {
                "machine": machine,
                "run_id": env["run_id"],
                "series_id": "s",
                "series_label": machine,
                "source": str(run_dir),
                "env": env,
            }
        )
        for rec in read_records(run_dir):
            merged_rec = dataclasses.replace(
                rec, run_id="merged-ci", machine=machine, source_run_id=env["run_id"]
            )
            lines.append(record_to_json(merged_rec))
    (merged / "cells.jsonl").write_text("\n".join(lines) + "\n")
    env = {
        "run_id": "merged-ci",
        "started_at": "2026-11-20T10:15:00+00:00",
        "host": {"hostname": "ci-cpu-2, gpu-runner-7"},
        "gpu": [],
        "libraries": {},
        "machines": machines,
    }
    (merged / "env.json").write_text(json.dumps(env))
    cell = "yolo26n-detect-e2e-torch-eager-cpu-640x640-b1-fp32"  # present on both machines
    history = {
        "trends": {f"{cell}@gpu-runner-7": [{"run_id": "a", "p50": 30.0}, {"run_id": "b", "p50": 34.0}]},
        "regressions": [],
    }
    index = render_report([merged], tmp_path / "reports", history=history)
    assert index.parent.name == "merged-ci"
    doc = parse(index)
    assert [t.attrs["data-run-id"] for t in doc.all("table", cls="run")] == [
        "20261120T101500Z-cpu",
        "20261120T113000Z-h100",
    ]
    for run_pos, run_dir in enumerate((CPU_RUN, GPU_RUN)):
        for rec in cells_of(run_dir):
            _, entry = entry_of(doc, run_pos, rec)
            assert entry.attrs["data-status"] == rec.status
            if rec.log:  # logs stay in the source run dirs
                assert (index.parent / entry.one("a", cls="log").attrs["href"]).resolve() == (
                    run_dir / rec.log
                ).resolve()
    latency = doc.one("table", cls="latency")
    assert latency.one("tr", data_cell_id=cell, data_run="1").one("td", cls="trend").all("svg")
    assert not latency.one("tr", data_cell_id=cell, data_run="0").one("td", cls="trend").all("svg")


def test_compile_time_column_when_a_record_has_one(both, cpu_only):
    _, doc = both
    rec = next(r for r in read_records(GPU_RUN) if r.compile_s is not None)
    assert _num(_row(doc, "latency", rec.cell_id, 1)["compile_s"]) == pytest.approx(rec.compile_s, rel=0.006)
    other = next(r for r in read_records(GPU_RUN) if r.status == "ok" and r.compile_s is None)
    assert _row(doc, "latency", other.cell_id, 1)["compile_s"].text().startswith("n/a")
    _, cpu_doc = cpu_only  # no record of the CPU run compiles: no column
    assert not cpu_doc.all("td", data_col="compile_s")


# -- how close to the machine ----------------------------------------------------------------------------------------
def test_share_of_peak_column_roofline_section_and_pick_lines_read_the_runs_peaks(tmp_path, cpu_only):
    """With the run's measured peaks in env.json, every ok CPU cell's share of peak is its counted work over its p50
    over the fp32 peak, in the latency table, the section's table, the pick's line and decision.json; without them
    (the fixture as committed) the same places say n/a with the reason."""
    from harness.core import model_work
    from harness.core.roofline import NO_PEAKS, share_text

    run = tmp_path / CPU_RUN.name
    shutil.copytree(CPU_RUN, run)
    env = json.loads((run / "env.json").read_text())
    peak = 400e9  # a test figure, not a measurement: what matters is that the page divides by it
    env["peaks"] = {
        "cpu": {"threads": 2, "compute": {"fp32": peak}, "bandwidth": 20e9, "how": {"fp32": "a test figure"}},
        "cuda": None,
        "null_reasons": {"cuda": "no CUDA device"},
        "measured_in_s": 3.0,
    }
    (run / "env.json").write_text(json.dumps(env))
    index = render_report([run], tmp_path / "reports")
    doc = parse(index)
    rooflines = [f.attrs["data-plot"] for f in doc.all("figure") if "roofline" in f.attrs["data-plot"]]
    assert rooflines == ["roofline-0"]
    assert "cpu at 2 thread(s): fp32 400 GFLOP/s (a test figure)" in doc.one(id="roofline").text()
    shown = 0
    for rec in read_records(run):
        if rec.status != "ok" or rec.device != "cpu" or rec.precision_executed != "fp32" or rec.remedy:
            continue
        work, _ = model_work.lookup(rec.size, rec.task, rec.head, rec.height, rec.width, rec.batch)
        if work is None:
            continue
        want = share_text(work["flops"] / (rec.latency_ms.p50 / 1000) / peak)
        assert _row(doc, "latency", rec.cell_id)["peak_share"].text() == want, rec.cell_id
        assert _row(doc, "roofline", rec.cell_id)["share_of_peak"].text() == want, rec.cell_id
        assert _row(cpu_only[1], "latency", rec.cell_id)["peak_share"].text().startswith("n/a")
        shown += 1
    assert shown >= 3
    winner = doc.one("div", cls="rec", data_key="cpu-edge", data_task="detect").one("div", cls="winner")
    assert "of this machine's roofline bound" in winner.one("div", cls="roofline").text()
    before = (
        cpu_only[1].one("div", cls="rec", data_key="cpu-edge", data_task="detect").one("div", cls="winner")
    )
    no_peaks = "the machine's limit is not known: " + NO_PEAKS.split(" (")[0]
    assert no_peaks in before.one("div", cls="roofline").text()
    for page, has_peak in ((index, True), (cpu_only[0], False)):
        decision = json.loads((page.parent / "decision.json").read_text())
        pick = next(e["pick"] for e in decision["decisions"] if e.get("pick") and e["pick"].get("roofline"))
        assert pick["roofline"]["achieved_flops_s"] > 0
        assert (pick["roofline"]["share_of_peak"] is not None) is has_peak
        assert has_peak or pick["roofline"]["null_reasons"]["share_of_peak"] == NO_PEAKS
