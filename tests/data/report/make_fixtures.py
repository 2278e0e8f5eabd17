"""Regenerate the recorded-run fixtures of the report tests: `python tests/data/report/make_fixtures.py`.

Two runs shaped exactly like the runner's output, built with the runner's own builders (records from
`harness.core.record.new_record`, set attribute by attribute, with `latency_from_samples`, `Memory` and `Energy`
sections, parity from
`harness.measure.parity.compare` on generated outputs, null reasons from `fill_null_reasons`; env.json like
`harness.core.envinfo.collect`): a 2-core CPU machine and an H100 machine. The numbers are invented, after the
project's reference timings and the seed documents' figures; nothing here was measured, and the data says so:
`synthetic: true` in env.json and in every record, which the report shows as a banner.
"""

from __future__ import annotations

import random
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from harness import SCHEMA_VERSION
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.null_reasons import fill_null_reasons
from harness.core.record import CellRecord, Energy, Memory, new_record, set_null
from harness.core.results_dir import RecordWriter, write_env
from harness.diagnosis.failure import parity_failure
from harness.measure.parity import Layout, Parity, compare
from harness.measure.stats import latency_from_samples

HERE = Path(__file__).parent
RANDOM_WEIGHTS = "random-init:0"
FILE_WEIGHTS = "weights/yolo26n.pt sha256:5f2c0d6e8b1a4c3f9e7d2b6a1c0e9f8d7b6a5c4e3d2f1a0b9c8d7e6f5a4b3c2d"


def _cell(
    size="n",
    task="detect",
    head="e2e",
    backend="torch-eager",
    device="cpu",
    shape="640",
    batch=1,
    prec="fp32",
):
    return Cell(size, task, head, backend, device, Shape.parse(shape), batch, prec)


def _dyn(backend: str, size: int, device: str = "cpu") -> Cell:
    """One shape of the sweep run on a dynamic artifact (cell id `...-dyn480x480-...`)."""
    return Cell("n", "detect", "e2e", backend, device, Shape(size, size, dynamic=True))


# How each backend reads precision_executed (shortened from the backends' own precision_source texts); backends not
# listed report no precision in these fixtures (null with the reason).
_PARAMS = "dtypes of the model's parameters as loaded"
PRECISION_SOURCES = {
    "torch-eager": _PARAMS,
    "torch-compile": _PARAMS,
    "onnxruntime": "element types of the ONNX graph the session runs",
    "openvino": "OpenVINO's execution graph: the runtimePrecision of each compute layer",
    "executorch-xnnpack": "export-time dtypes of the lowered graph",
    "tensorrt": "TensorRT's engine inspector: the output type of each compute layer",
}


def _parity(seed: int, precision: str, corrupt: str | None = None) -> Parity:
    """The record's `parity` as the runner computes it: generated end-to-end detections [1, 300, 6] against the
    same detections with float noise (or with every class shifted by one: a backend the check must fail)."""
    g = np.random.default_rng(seed)
    xy = g.uniform(0, 560, (300, 2))
    wh = g.uniform(20, 80, (300, 2))
    scores = np.sort(g.uniform(0.001, 0.06, 300))[::-1]
    classes = g.integers(0, 80, 300)
    ref = np.concatenate([xy, xy + wh, scores[:, None], classes[:, None]], axis=1)[None]
    out = ref.copy()
    out[..., :4] += g.normal(0, 0.01, out[..., :4].shape)
    out[..., 4] *= 1 + g.normal(0, 1e-5, 300)
    if corrupt == "shift-classes":
        out[..., 5] = (out[..., 5] + 1) % 80
    return compare([out], [ref], Layout("detect", "e2e", nc=80), precision)


class RunBuilder:
    def __init__(self, run_dir: Path, run_id: str, weights: str, started: str, threads: int) -> None:
        if run_dir.exists():
            shutil.rmtree(run_dir)
        (run_dir / "logs").mkdir(parents=True)
        self.run_dir, self.run_id, self.weights, self.started = run_dir, run_id, weights, started
        self.threads = threads  # the run's CPU thread budget (physical cores: the default)
        self.writer = RecordWriter(run_dir)
        self.rng = random.Random(run_id)
        self.n = 0

    def _base(self, cell: Cell, cell_id: str | None = None, height: int | None = None) -> CellRecord:
        rec = new_record(self.run_id, cell, self.weights)
        if cell_id:
            rec.cell_id = cell_id
        if height:
            rec.height = rec.width = height
        self.n += 1
        t = datetime.fromisoformat(self.started) + timedelta(seconds=17 * self.n)
        rec.started_at = t.isoformat(timespec="seconds")
        rec.duration_s = round(2 + self.rng.random() * 20, 3)
        rec.threads_requested = self.threads
        rec.synthetic = True  # invented figures: the report shows the synthetic-data banner
        return rec

    def _ran(self, rec: CellRecord, cell: Cell, executed: str | None) -> None:
        """What a cell that ran records about its runtime: threads and the precision it executed."""
        rec.threads = self.threads if cell.device == "cpu" else None
        if cell.device != "cpu":
            set_null(rec, "threads", "CUDA cell: the runtime's CPU threads are not what it runs on")
        source = PRECISION_SOURCES.get(cell.backend)
        if source:
            executed = executed or cell.precision
            rec.precision_executed = executed
            rec.precision_source = source
            rec.precision_detail = {executed: 240}
        else:
            why = f"{cell.backend} does not report the precision it executes"
            rec.precision_executed = None
            rec.precision_source = why
            set_null(rec, "precision_executed", why)

    def _log(self, rec: CellRecord, text: str) -> None:
        path = self.run_dir / "logs" / f"{rec.cell_id}.log"
        path.write_text(text)
        rec.log = f"logs/{rec.cell_id}.log"

    @staticmethod
    def _nulls(rec: CellRecord) -> None:
        fill_null_reasons(rec)  # the runner's own rule, so fixtures say what real records say

    def ok(
        self,
        cell: Cell,
        p50: float,
        *,
        export_s=None,
        rss=900.0,
        gpu_mem=None,
        energy=None,
        executed=None,
        scope="model",
        first_ms=None,
        ops=None,
        remedy=None,
        remedy_of=None,
        cell_id=None,
        height=None,
        status="ok",
        parity_fail=False,
        compile_s=None,
    ) -> CellRecord:
        rec = self._base(cell, cell_id, height)
        samples = [round(p50 * (1 + abs(self.rng.gauss(0, 0.03))) - p50 * 0.02, 4) for _ in range(25)]
        lat = latency_from_samples(samples, scope)
        self._ran(rec, cell, executed)
        rec.status = status
        rec.reason = None
        rec.artifact = (
            f".cache/exports/{rec.cell_id}/model"
            if export_s is not None
            else f".cache/models/{cell.model}.pt"
        )
        rec.artifact_bytes = int(5.4e6 * {"n": 1, "s": 3.9, "m": 8.4}[cell.size])
        rec.cache_hit = False if export_s is not None else None
        rec.export_s = export_s
        rec.export_origin = "exported in this attempt" if export_s is not None else None
        rec.load_s = round(0.2 + self.rng.random(), 3)
        rec.first_run_ms = first_ms if first_ms is not None else round(p50 * 2.7, 3)
        rec.latency_ms = lat
        rec.samples_ms = samples
        rec.throughput_ips = cell.batch * 1000.0 / lat.p50
        rec.ops = ops
        rec.remedy = remedy
        rec.remedy_of = remedy_of
        rec.compile_s = compile_s
        if compile_s is None:
            set_null(rec, "compile_s", "no compile step (the backend does not compile at load)")
        torch_gpu = bool(gpu_mem) and "torch" in cell.backend
        rec.memory = Memory(
            host_peak_rss_mib=rss,
            host_peak_delta_mib=round(rss * 0.31, 1),
            host_baseline_mib=round(rss * 0.69, 1),
            device_peak_used_mib=gpu_mem + 520.0 if gpu_mem else None,
            device_peak_process_mib=gpu_mem,
            torch_max_allocated_mib=round(gpu_mem * 0.6, 1) if torch_gpu else None,
            torch_max_reserved_mib=round(gpu_mem * 0.8, 1) if torch_gpu else None,
            source="psutil RSS sampled at 100 Hz over load and timed rounds (212 samples)"
            + ("; NVML device memory at 100 Hz" if gpu_mem else ""),
        )
        if energy is not None:
            rec.energy = Energy(
                per_inference_j=energy,
                window_s=2.4,
                inferences=25 * cell.batch,
                source="NVML total energy counter over the timed rounds",
            )
        parity = _parity(self.n, cell.precision, "shift-classes" if parity_fail else None)
        rec.parity = parity.to_dict()
        for m, why in parity.null_reasons.items():
            set_null(rec, f"parity.metrics.{m}", why)
        if parity_fail:
            assert not parity.ok, "the shifted classes must fail parity"
            rec.reason = parity.reason()
            rec.failure = parity_failure(rec.reason)
        self._log(rec, f"=== {rec.cell_id}\nexport ok\nload ok\n25 timed rounds, p50 {lat.p50:.3f} ms\n")
        self._nulls(rec)
        self.writer.write(rec)
        return rec

    def failed(
        self,
        cell: Cell,
        status: str,
        cls: str | None,
        message: str,
        *,
        stage="export",
        ops=(),
        guards=(),
        fix=None,
        exc="torch._dynamo.exc.Unsupported",
        export_s=None,
        cell_id=None,
        height=None,
        remedy=None,
        remedy_of=None,
    ) -> CellRecord:
        rec = self._base(cell, cell_id, height)
        rec.status = status
        rec.reason = message.splitlines()[0][:500]
        rec.export_s = export_s
        rec.cache_hit = False
        rec.export_origin = "exported in this attempt" if export_s is not None else None
        rec.remedy = remedy
        rec.remedy_of = remedy_of
        self._log(
            rec,
            f"=== {rec.cell_id}\n=== {stage} failed\nTraceback (most recent call last):\n"
            f'  File "<frozen runpy>", line 198, in _run_module_as_main\n{exc}: {message}\n',
        )
        rec.failure = {
            "class": cls,
            "stage": stage,
            "message": message,
            "ops": list(ops),
            "guards": list(guards),
            "suggested_fix": fix,
            "exception_type": exc,
            "signal": None,
            "log": rec.log,
        }
        self._nulls(rec)
        self.writer.write(rec)
        return rec

    def exported(self, cell: Cell, delegated: int, fallback: int, export_s: float, size_b: int) -> CellRecord:
        rec = self._base(cell)
        rec.status = "exported"
        rec.reason = "export-only target: no runtime for it on this machine"
        rec.artifact = f".cache/exports/{rec.cell_id}/model.pte"
        rec.artifact_bytes = size_b
        rec.cache_hit = False
        rec.export_s = export_s
        rec.export_origin = "exported in this attempt"
        rec.ops = {
            "delegated": delegated,
            "fallback": fallback,
            "fallback_ops": ["aten.topk.default"] if fallback else [],
        }
        self._log(rec, f"=== {rec.cell_id}\ndelegated {delegated} of {delegated + fallback} nodes\n")
        self._nulls(rec)
        self.writer.write(rec)
        return rec

    def probe(
        self, cell: Cell, status: str, reason: str, export_s: float, failure=None, **extra
    ) -> CellRecord:
        """The dynamic probe record: the artifact's export, its status summing up the shape sweep."""
        rec = self._base(cell, extra.pop("cell_id", None))
        rec.status = status
        rec.reason = reason
        rec.export_s = export_s
        rec.cache_hit = False
        rec.export_origin = "exported in this attempt"
        for k, v in extra.items():  # remedy, remedy_of
            setattr(rec, k, v)
        rec.artifact = f".cache/exports/{rec.cell_id}/model"
        rec.artifact_bytes = 10_120_448
        set_null(rec, "latency_ms", "dynamic probe: latency is in the per-shape sweep records")
        if failure:
            rec.failure = {
                "class": failure[0],
                "stage": "run",
                "message": failure[1],
                "ops": [],
                "guards": [],
                "suggested_fix": None,
                "exception_type": None,
                "log": None,
            }
        self._log(rec, f"=== {rec.cell_id}\n{reason}\n")
        self._nulls(rec)
        self.writer.write(rec)
        return rec

    def skipped(self, cell: Cell, reason: str) -> CellRecord:
        rec = self._base(cell)
        rec.weights = "unknown"
        rec.status = "skipped"
        rec.reason = reason
        rec.duration_s = 0.0
        self._nulls(rec)
        self.writer.write(rec)
        return rec

    def env(self, **extra) -> None:
        env = {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "synthetic": True,
            "started_at": self.started,
            "harness_version": "0.1.0",
            "git_commit": "3f9c2ab71d0e5b8c4a6f2e1d9b7c5a3e1f0d8b6a",
            "gpu": [],
            "gpu_reason": "NVML unavailable",
            "cuda": None,
            "libraries": {
                "torch": "2.13.0+cpu",
                "ultralytics": "8.4.190",
                "onnxruntime": "1.23.2",
                "openvino": "2025.4.0",
                "executorch": "1.5.1",
                "tensorrt": None,
            },
            "weights_note": "",
            "threads": {
                "budget": self.threads,
                "physical_cores": self.threads,
                "source": "physical cores (default)",
            },
        }
        env.update(extra)
        write_env(self.run_dir, env)


GUARD = "(1 + ((h - 1) // 16)) == (2 + 2*((h - 1) // 32))"
CONSTRAINT = (
    'Constraints violated (height, width)! For more information, run with TORCH_LOGS="+dynamic".\n'
    "  - Not all values of height = L['x'].size()[2] in the specified range 320 <= height <= 1280 satisfy "
    f"the generated guard {GUARD}.\nSuggested fixes:\n  height = 32*_height"
)


def cpu_run(root: Path) -> None:
    b = RunBuilder(root / "cpu_run", "20261120T101500Z-cpu", RANDOM_WEIGHTS, "2026-11-20T10:15:00+00:00", 1)
    b.env(
        host={
            "hostname": "ci-cpu-2",
            "os": "Linux-6.1.0-x86_64-with-glibc2.36",
            "python": "3.11.2",
            "cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
            "cpu_cores_logical": 2,
            "cpu_cores_physical": 1,
            "ram_gb": 7.7,
        },
        weights_note="no local weights: seeded random initialisation (seed 0)",
    )
    for shape, scale in (("320", 0.25), ("640", 1.0)):
        b.ok(_cell(shape=shape), 80.0 * scale, rss=1210.0)
        b.ok(_cell(backend="onnxruntime", shape=shape), 24.0 * scale, export_s=2.1, rss=640.0)
        b.ok(_cell(backend="openvino", shape=shape), 17.0 * scale, export_s=2.5, rss=710.0)
        b.ok(
            _cell(backend="executorch-xnnpack", shape=shape),
            41.0 * scale,
            export_s=25.3,
            rss=560.0,
            ops={"delegated": 380, "fallback": 3, "fallback_ops": ["aten.topk.default"]},
        )
        b.skipped(
            _cell(backend="torch-compile", shape=shape),
            "excluded: torch.compile takes over 90 s per shape on a 2-core CPU (matrix.yaml)",
        )
        b.skipped(_cell(backend="tensorrt", device="cuda", shape=shape), "no CUDA device: NVML unavailable")
    b.ok(_cell(size="s"), 210.0, rss=1650.0)
    b.ok(_cell(size="s", backend="onnxruntime"), 61.0, export_s=4.2, rss=820.0)
    b.ok(_cell(task="seg", backend="onnxruntime"), 33.0, export_s=2.6, rss=700.0)
    b.ok(_cell(backend="onnxruntime", prec="fp16"), 25.1, export_s=2.3, rss=650.0, executed="fp32")
    b.ok(
        _cell(backend="openvino", prec="fp16"),
        16.2,
        export_s=2.8,
        rss=720.0,
        status="parity_failed",
        parity_fail=True,
    )
    b.failed(
        _cell(backend="openvino", shape="600"),
        "run_failed",
        "runtime_error",
        "Exception from src/inference/src/cpp/infer_request.cpp:223: Check '<lambda>' failed: "
        "shape [1,3,600,600] is not divisible by the stride 32 <script>alert('x')</script>",
        stage="run",
        exc="RuntimeError",
        export_s=2.4,
    )
    # The dynamic probe as the runner writes it: the probe record (no shape; its status sums up the sweep), then one
    # record per sweep shape run on that artifact (id `dyn<H>x<W>`); 650 is not a multiple of 32 and gets the
    # letterbox-pad-32 remedy. ExecuTorch's free-H/W export hits the guard and is swept with the 32*Dim remedy.
    dyn = _cell(backend="onnxruntime", shape="dynamic")
    b.probe(
        dyn,
        "run_failed",
        "dynamic artifact swept over 320: ok, 640: ok, 650: run_failed",
        2.2,
        failure=("runtime_error", "failed at 650x650: Concat: dimensions 41 and 40 do not match"),
    )
    b.ok(_dyn("onnxruntime", 320), 6.1, export_s=2.2, rss=620.0)
    b.ok(_dyn("onnxruntime", 640), 24.4, export_s=2.2, rss=640.0)
    odd = b.failed(
        _dyn("onnxruntime", 650),
        "run_failed",
        "runtime_error",
        "Concat: dimensions 41 and 40 do not match",
        stage="run",
        exc="onnxruntime.capi.Fail",
    )
    b.ok(
        _dyn("onnxruntime", 672),
        26.9,
        export_s=2.2,
        rss=650.0,
        remedy="letterbox-pad-32",
        remedy_of=odd.cell_id,
        cell_id=odd.cell_id + "+letterbox-pad-32",
    )
    xdyn = _cell(backend="executorch-xnnpack", shape="dynamic")
    b.failed(
        xdyn,
        "export_failed",
        "guard_violation",
        CONSTRAINT,
        guards=[GUARD],
        fix="height = 32*_height",
        exc="torch._dynamo.exc.UserError",
        export_s=11.2,
    )
    b.probe(
        xdyn,
        "ok",
        "dynamic artifact swept over 320: ok, 640: ok",
        11.4,
        remedy="dim-multiple-of-32",
        remedy_of=xdyn.id,
        cell_id=xdyn.id + "+dim-multiple-of-32",
    )
    for h, p50 in ((320, 10.6), (640, 42.0)):
        sweep = _dyn("executorch-xnnpack", h)
        b.ok(
            sweep,
            p50,
            export_s=11.4,
            rss=580.0,
            remedy="dim-multiple-of-32",
            remedy_of=xdyn.id,
            cell_id=sweep.id + "+dim-multiple-of-32",
        )
    b.exported(_cell(backend="executorch-vulkan", device="vulkan"), 661, 1, 58.2, 10_741_212)
    b.exported(_cell(backend="executorch-coreml", device="coreml"), 542, 1, 96.5, 10_402_776)
    b.failed(
        _cell(backend="executorch-qnn", device="qnn"),
        "export_failed",
        "dependency_missing",
        "QNN export needs the Qualcomm QNN SDK: QNN_SDK_ROOT is not set",
        exc="RuntimeError",
    )
    b.skipped(_cell(backend="executorch-arm", device="ethos-u"), "excluded: Arm Ethos-U needs an int8 model")


def gpu_run(root: Path) -> None:
    b = RunBuilder(root / "gpu_run", "20261120T113000Z-h100", FILE_WEIGHTS, "2026-11-20T11:30:00+00:00", 8)
    b.env(
        host={
            "hostname": "gpu-runner-7",
            "os": "Linux-5.15.0-x86_64-with-glibc2.35",
            "python": "3.11.9",
            "cpu_model": "AMD EPYC 7R13 Processor",
            "cpu_cores_logical": 16,
            "cpu_cores_physical": 8,
            "ram_gb": 125.8,
        },
        gpu=[
            {
                "index": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "compute_capability": "9.0",
                "driver": "570.86.15",
                "memory_total_mb": 81559.0,
                "pci_bus_id": "00000000:18:00.0",
            }
        ],
        cuda={"version": "12.8", "cudnn": 91002, "device_count": 1},
        libraries={
            "torch": "2.13.0+cu128",
            "ultralytics": "8.4.190",
            "onnxruntime": "1.23.2",
            "openvino": "2025.4.0",
            "executorch": "1.5.1",
            "tensorrt": "10.13.3.9",
        },
        weights_note="weights/yolo26n.pt and weights/yolo26s.pt given with --weights",
    )
    for size, k in (("n", 1.0), ("s", 1.6)):
        b.ok(
            _cell(size=size, device="cuda"),
            9.8 * k,
            rss=2900.0,
            gpu_mem=310.0 * k,
            energy=1.9 * k,
            scope="model",
        )
        b.ok(
            _cell(size=size, backend="torch-compile", device="cuda"),
            3.4 * k,
            rss=3400.0,
            gpu_mem=290.0 * k,
            energy=0.61 * k,
            scope="model",
            compile_s=44.1 * k,
        )
        b.ok(
            _cell(size=size, backend="tensorrt", device="cuda"),
            0.95 * k,
            export_s=212.0,
            rss=2100.0,
            gpu_mem=180.0 * k,
            energy=0.18 * k,
            scope="model",
        )
        b.ok(
            _cell(size=size, backend="onnxruntime", device="cuda"),
            2.2 * k,
            export_s=2.0,
            rss=1900.0,
            gpu_mem=260.0 * k,
            energy=0.41 * k,
            scope="model",
        )
        b.ok(_cell(size=size), 34.0 * k, rss=1300.0)
        ecell = _cell(size=size, backend="executorch-cuda", device="cuda")
        b.failed(
            ecell,
            "export_failed",
            "unsupported_op",
            "torch._inductor.exc.LoweringException: Lowering not implemented for backend: CudaDevice for "
            "target: aten.index_put.default",
            ops=["aten.index_put.default", "aten.topk.default"],
            exc="torch._inductor.exc.InductorError",
            export_s=48.0,
        )
        b.ok(
            ecell,
            1.9 * k,
            export_s=51.0,
            rss=2300.0,
            gpu_mem=200.0 * k,
            energy=0.35 * k,
            remedy="backbone-only",
            remedy_of=ecell.id,
            cell_id=ecell.id + "+backbone-only",
            scope="model+h2d+d2h+host_topk",
        )
    b.ok(_cell(device="cuda", batch=8), 21.0, rss=3100.0, gpu_mem=1500.0, energy=9.0)
    b.ok(
        _cell(backend="tensorrt", device="cuda", batch=8),
        3.1,
        export_s=240.0,
        rss=2300.0,
        gpu_mem=620.0,
        energy=0.9,
    )
    b.ok(
        _cell(backend="tensorrt", device="cuda", prec="fp16"),
        0.61,
        export_s=260.0,
        rss=2100.0,
        gpu_mem=120.0,
        energy=0.11,
        executed="fp16",
    )
    tdyn = _cell(backend="tensorrt", device="cuda", shape="dynamic")
    b.probe(tdyn, "ok", "dynamic artifact swept over 480: ok, 640: ok, 800: ok", 301.0)
    for h, p in ((480, 0.71), (640, 1.02), (800, 1.49)):
        b.ok(_dyn("tensorrt", h, "cuda"), p, export_s=301.0, rss=2150.0, gpu_mem=240.0, energy=0.2)
    edyn = _cell(backend="executorch-cuda", device="cuda", shape="dynamic")
    b.failed(
        edyn,
        "export_failed",
        "guard_violation",
        CONSTRAINT,
        guards=[GUARD],
        fix="height = 32*_height",
        exc="torch._dynamo.exc.UserError",
        export_s=14.0,
    )
    b.failed(
        edyn,
        "export_failed",
        "unsupported_op",
        "torch._inductor.exc.LoweringException: Lowering not implemented for backend: CudaDevice for "
        "target: aten.index_put.default",
        ops=["aten.index_put.default"],
        exc="torch._inductor.exc.InductorError",
        export_s=44.0,
        remedy="dim-multiple-of-32",
        remedy_of=edyn.id,
        cell_id=edyn.id + "+dim-multiple-of-32",
    )


if __name__ == "__main__":
    cpu_run(HERE)
    gpu_run(HERE)
    for lock in HERE.glob("*/.*.lock"):  # RecordWriter's append locks: not part of a results directory's data
        lock.unlink()
    print("fixtures written under", HERE)
