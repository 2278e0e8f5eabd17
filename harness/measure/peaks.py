"""The machine's measured peaks, once per run (env.json `peaks`): how fast it multiplies matrices at each precision
and how fast it moves memory, through the math libraries the runtimes call themselves, in a few seconds.

Not the speed probe (harness.measure.machine_speed, which scales the run-time estimate): a peak is the most this
machine was measured to do, the roof a cell's achieved rate is read against (harness.core.roofline).

CPU, at the run's thread budget (`cpu`); each precision's figure is the best of its libraries, every library's
figure kept under `candidates`:

- `fp32`: torch.matmul (torch's CPU BLAS, MKL on x86), oneDNN through torch (a 1x1 convolution is a matrix product:
  torch runs CPU convolutions on oneDNN, as OpenVINO does), numpy's matmul (OpenBLAS, held to the budget with
  threadpoolctl) and ONNX Runtime's MatMul (MLAS, ONNX Runtime's own kernels), where each is installed. They differ
  by 2x on one machine (an AMD EPYC: MKL's 220 GFLOP/s against oneDNN's and MLAS's 470-500): the peak is the best.
- `bf16`: torch.matmul on bfloat16 (oneDNN: AVX512-BF16 or AMX where the CPU has them; slow elsewhere, and then the
  fp32 figure bounds a 16-bit cell).
- `int8`: torch._int_mm (int8 x int8 -> int32) and ONNX Runtime's MatMulInteger (uint8 x int8 -> int32: MLAS, with
  VNNI where the CPU has it), in operations per second.
- `bandwidth`: a STREAM triad a = b + s x c (torch.add(b, c, alpha=s, out=a): one multi-threaded pass) over three
  float32 arrays of TRIAD_MIB MiB, far beyond any cache; bytes/s counting the three arrays once per pass, as STREAM
  does, and as STREAM reports, the best pass.

CUDA (device 0), where torch sees one (`cuda`): cuBLAS through torch.matmul at fp32 (TF32 off), TF32 (on), fp16 and
bf16, torch._int_mm (cuBLASLt) at int8, each product synchronised; device-to-device copy bandwidth (dst.copy_(src)
of COPY_MIB MiB, read plus write bytes). On a machine without one, `cuda` is null with "no CUDA device".

Each figure is the best rate of REPS timed products after a warm-up (a shared machine's noise only ever slows a
product down: the best is the one least disturbed), at the largest side (CPU_SIZES, GPU_SIZES) whose one product
is estimated to take at most MAX_REP_S (from the fastest of three products at the smallest side: the cost is
cubic); `how` says what was timed. A figure that cannot be measured is null with its reason under `null_reasons`.
Never raises: a run must not stop for its peaks.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)

#: timed repetitions per figure (after one warm-up); the best is the figure
REPS = 5
#: square matrix sides tried, smallest first: the largest whose one product fits MAX_REP_S is timed
CPU_SIZES = (256, 512, 1024, 2048)
GPU_SIZES = (2048, 4096, 8192)
#: the longest one timed product may take (seconds): the peaks must cost seconds per run, not minutes
MAX_REP_S = {"cpu": 0.1, "cuda": 0.05}
#: the triad's arrays (MiB each, float32) and the GPU copy's size (MiB)
TRIAD_MIB = 64
COPY_MIB = 512
#: the precisions measured per device kind
CPU_PRECISIONS = ("fp32", "bf16", "int8")
GPU_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8")

#: a product of side n: what to call, timed
Make = Callable[[int], Callable[[], Any]]
Sync = Callable[[], None] | None


def _best_rate(fn: Callable[[], Any], work: float, reps: int, sync: Sync = None) -> float:
    """`work` per second of the fastest of `reps` timed calls of `fn` (after the caller's warm-up)."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        best = min(best, time.perf_counter() - t0)
    return work / max(best, 1e-9)


def _pick_size(make: Make, sizes: tuple[int, ...], limit_s: float, sync: Sync) -> int:
    """The largest of `sizes` whose one product is estimated to take at most `limit_s`, from the fastest of three
    products at the smallest side (after a warm-up at that side)."""
    n0 = sizes[0]
    fn = make(n0)
    fn()
    t = 2.0 * n0**3 / _best_rate(fn, 2.0 * n0**3, 3, sync)
    return max((n for n in sizes if t * (n / n0) ** 3 <= limit_s), default=n0)


def _product_rate(
    make: Make, sizes: tuple[int, ...], limit_s: float, sync: Sync = None, reps: int = REPS
) -> tuple[float, int]:
    """(operations per second, the side timed) of the square products `make(n)` returns: the best of `reps`."""
    n = _pick_size(make, sizes, limit_s, sync)
    fn = make(n)
    fn()  # warm-up at the timed side
    if sync is not None:
        sync()
    return _best_rate(fn, 2.0 * n**3, reps, sync), n


def _failed(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:200]


# -- CPU products ---------------------------------------------------------------------------------------------------
def _torch_matmul(dtype_name: str) -> Make:
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]

    def make(n: int) -> Callable[[], Any]:
        gen = torch.Generator().manual_seed(n)
        a = torch.randn(n, n, generator=gen).to(dtype)
        b = torch.randn(n, n, generator=gen).to(dtype)
        return lambda: torch.matmul(a, b)

    return make


def _torch_int_mm(n: int) -> Callable[[], Any]:
    import torch

    gen = torch.Generator().manual_seed(n)
    a = torch.randint(-64, 64, (n, n), dtype=torch.int8, generator=gen)
    b = torch.randint(-64, 64, (n, n), dtype=torch.int8, generator=gen)
    return lambda: torch._int_mm(a, b)


def _onednn_conv(n: int) -> Callable[[], Any]:
    """An n x n by n x n product as a 1x1 convolution (n input channels over n pixels, n filters): torch runs it on
    oneDNN."""
    import torch

    gen = torch.Generator().manual_seed(n)
    x = torch.randn(1, n, 32, n // 32, generator=gen)
    w = torch.randn(n, n, 1, 1, generator=gen)
    return lambda: torch.nn.functional.conv2d(x, w)


def _numpy_matmul(n: int) -> Callable[[], Any]:
    import numpy as np

    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    return lambda: a @ b


def _ort_matmul(threads: int, op: str) -> Make:
    """ONNX Runtime's `op` (MatMul on float32, MatMulInteger on uint8 x int8) as a one-node graph, one session per
    side at the thread budget."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    def make(n: int) -> Callable[[], Any]:
        a_type, b_type, out_type = (
            (TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.FLOAT)
            if op == "MatMul"
            else (TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32)
        )
        graph = helper.make_graph(
            [helper.make_node(op, ["A", "B"], ["C"])],
            "peak",
            [
                helper.make_tensor_value_info("A", a_type, [n, n]),
                helper.make_tensor_value_info("B", b_type, [n, n]),
            ],
            [helper.make_tensor_value_info("C", out_type, [n, n])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = int(threads), 1
        opts.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(n)
        if op == "MatMul":
            feeds = {
                "A": rng.standard_normal((n, n), dtype=np.float32),
                "B": rng.standard_normal((n, n), dtype=np.float32),
            }
        else:
            feeds = {
                "A": rng.integers(0, 128, (n, n), dtype=np.uint8),
                "B": rng.integers(-64, 64, (n, n), dtype=np.int8),
            }
        return lambda: session.run(None, feeds)

    return make


@contextlib.contextmanager
def _blas_threads(threads: int) -> Iterator[str]:
    """numpy's BLAS held to `threads` (threadpoolctl); yields what it is and at how many threads."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        yield "its own thread setting (threadpoolctl is not installed)"
        return
    libs = sorted({str(i.get("internal_api")) for i in threadpool_info() if i.get("user_api") == "blas"})
    with threadpool_limits(limits=threads, user_api="blas"):
        yield f"{'/'.join(libs) or 'BLAS'} at {threads} thread(s)"


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[str]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield f"{torch.get_num_threads()} thread(s)"
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def _noop(threads: int) -> Iterator[str]:
    yield f"{threads} thread(s)"


#: per precision, each library's product: (name, what it is, (threads -> (the make, its thread context)))
CPU_LIBRARIES: dict[str, tuple[tuple[str, str, Callable[[int], tuple[Make, Any]]], ...]] = {
    "fp32": (
        ("torch", "torch.matmul {n}x{n} float32", lambda t: (_torch_matmul("fp32"), _torch_threads(t))),
        (
            "onednn",
            "oneDNN (torch conv2d 1x1, an {n}x{n} product) float32",
            lambda t: (_onednn_conv, _torch_threads(t)),
        ),
        ("numpy", "numpy matmul {n}x{n} float32", lambda t: (_numpy_matmul, _blas_threads(t))),
        (
            "onnxruntime",
            "ONNX Runtime MatMul (MLAS) {n}x{n} float32",
            lambda t: (_ort_matmul(t, "MatMul"), _noop(t)),
        ),
    ),
    "bf16": (
        ("torch", "torch.matmul {n}x{n} bfloat16", lambda t: (_torch_matmul("bf16"), _torch_threads(t))),
    ),
    "int8": (
        ("torch", "torch._int_mm {n}x{n} int8 -> int32", lambda t: (_torch_int_mm, _torch_threads(t))),
        (
            "onnxruntime",
            "ONNX Runtime MatMulInteger (MLAS) {n}x{n} uint8 x int8 -> int32",
            lambda t: (_ort_matmul(t, "MatMulInteger"), _noop(t)),
        ),
    ),
}


def _triad_cpu(threads: int, reps: int = REPS * 2) -> tuple[float, str]:
    import torch

    n = TRIAD_MIB * 2**20 // 4
    with _torch_threads(threads) as at:
        a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)

        def triad() -> None:
            torch.add(b, c, alpha=3.0, out=a)

        triad()
        rate = _best_rate(triad, 3.0 * n * 4, reps)
    how = (
        f"STREAM triad a = b + 3c (torch.add(out=a)) at {at}, 3 float32 arrays of {TRIAD_MIB} MiB, bytes = the 3 "
        f"arrays per pass, the best of {reps}"
    )
    return rate, how


def measure_cpu(threads: int) -> dict:
    """The `cpu` section: the compute peak per precision (the best library), every library's figure, the memory
    bandwidth, how each was measured, and the reason for each that could not be."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"threads": threads, "compute": {}, "bandwidth": None, "how": {}, "candidates": {}}
    reasons: dict[str, str] = {}
    for prec, libraries in CPU_LIBRARIES.items():
        rates: dict[str, float] = {}
        hows: dict[str, str] = {}
        for name, what, build in libraries:
            try:
                make, threads_ctx = build(threads)
                with threads_ctx as at:
                    rate, n = _product_rate(make, CPU_SIZES, MAX_REP_S["cpu"])
                rates[name], hows[name] = rate, f"{what.format(n=n)} at {at}"
            except Exception as e:  # a library that is not installed, or fails: the others still count
                reasons[f"{prec}.{name}"] = _failed(e)
        out["candidates"][prec] = {k: round(v) for k, v in rates.items()}
        if rates:
            best = max(rates, key=lambda k: rates[k])
            out["compute"][prec] = round(rates[best])
            out["how"][prec] = f"{hows[best]}, the best of {REPS} after a warm-up; the best of: " + ", ".join(
                f"{k} {v / 1e9:.4g} G/s" for k, v in sorted(rates.items(), key=lambda kv: -kv[1])
            )
        else:
            reasons[prec] = "; ".join(f"{k}: {v}" for k, v in reasons.items() if k.startswith(f"{prec}."))
    try:
        bw, out["how"]["bandwidth"] = _triad_cpu(threads)
        out["bandwidth"] = round(bw)
    except Exception as e:
        reasons["bandwidth"] = _failed(e)
    if reasons:
        out["null_reasons"] = reasons
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


# -- CUDA -----------------------------------------------------------------------------------------------------------
def _copy_rate(dev: Any, sync: Callable[[], None], reps: int = REPS * 2) -> float:
    """Device-to-device copy bandwidth (bytes read plus written per second) of COPY_MIB MiB."""
    import torch

    nbytes = COPY_MIB * 2**20
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)

    def copy() -> None:
        dst.copy_(src)

    copy()
    sync()
    return _best_rate(copy, 2.0 * nbytes, reps, sync)


def _cuda_product(prec: str, dev: Any) -> Make:
    """cuBLAS's square product at `prec` on `dev` (torch._int_mm, cuBLASLt, at int8); TF32 is the caller's switch."""
    import torch

    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

    def make(n: int) -> Callable[[], Any]:
        if prec == "int8":
            a = torch.randint(-64, 64, (n, n), dtype=torch.int8, device=dev)
            b = torch.randint(-64, 64, (n, n), dtype=torch.int8, device=dev)
            return lambda: torch._int_mm(a, b)
        a = torch.randn(n, n, device=dev, dtype=dtypes[prec])
        b = torch.randn(n, n, device=dev, dtype=dtypes[prec])
        return lambda: torch.matmul(a, b)

    return make


def cuda_rates(dev: Any, precisions: tuple[str, ...], reps: int) -> tuple[dict, dict, dict]:
    """(rate per precision and `bandwidth`, how each was measured, why each that failed did) on CUDA device `dev`:
    cuBLAS's products at `precisions`, each the best of `reps` synchronised after a warm-up, and the
    device-to-device copy bandwidth, the best of 2 x `reps`."""
    import torch

    rates: dict[str, float] = {}
    hows: dict[str, str] = {}
    reasons: dict[str, str] = {}

    def sync() -> None:
        torch.cuda.synchronize(dev)

    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for prec in precisions:
            try:
                torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
                rate, n = _product_rate(_cuda_product(prec, dev), GPU_SIZES, MAX_REP_S["cuda"], sync, reps)
                lib = (
                    "torch._int_mm (cuBLASLt) int8 -> int32"
                    if prec == "int8"
                    else f"torch.matmul (cuBLAS) {prec}"
                )
                rates[prec], hows[prec] = (
                    rate,
                    f"{lib} {n}x{n}, the best of {reps} after a warm-up, synchronised",
                )
            except Exception as e:
                reasons[prec] = _failed(e)
            finally:
                torch.cuda.empty_cache()
        try:
            rates["bandwidth"] = _copy_rate(dev, sync, reps * 2)
            hows["bandwidth"] = (
                f"device-to-device copy of {COPY_MIB} MiB (dst.copy_(src)), bytes = read + write, "
                f"the best of {reps * 2}"
            )
        except Exception as e:
            reasons["bandwidth"] = _failed(e)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.cuda.empty_cache()
    return rates, hows, reasons


def measure_cuda() -> tuple[dict | None, str | None]:
    """The `cuda` section (device 0), or (None, why not): "no CUDA device" where torch sees none."""
    try:
        import torch
    except ImportError as e:
        return None, f"torch is not importable ({e})"
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    t0 = time.perf_counter()
    dev = torch.device("cuda", 0)
    out: dict[str, Any] = {
        "device": torch.cuda.get_device_name(dev),
        "compute": {},
        "bandwidth": None,
        "how": {},
    }
    rates, out["how"], reasons = cuda_rates(dev, GPU_PRECISIONS, REPS)
    out["compute"] = {p: round(v) for p, v in rates.items() if p != "bandwidth"}
    out["bandwidth"] = round(rates["bandwidth"]) if "bandwidth" in rates else None
    if reasons:
        out["null_reasons"] = reasons
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out, None


def measure(threads: int) -> dict:
    """env.json's `peaks`: `cpu` at the thread budget, `cuda` (or null with its reason under `null_reasons`), the
    units and the seconds it took. Never raises."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "units": {"compute": "operations/s (FLOP/s; int8: OP/s)", "bandwidth": "bytes/s"},
        "statistic": f"the best rate of {REPS} timed products after a warm-up (harness.measure.peaks)",
        "cpu": None,
        "cuda": None,
    }
    reasons: dict[str, str] = {}
    try:
        out["cpu"] = measure_cpu(threads)
    except Exception as e:  # never stop a run for its peaks
        log.exception("measuring the CPU peaks failed")
        reasons["cpu"] = _failed(e)
    try:
        out["cuda"], why = measure_cuda()
        if why:
            reasons["cuda"] = why
    except Exception as e:
        log.exception("measuring the CUDA peaks failed")
        reasons["cuda"] = _failed(e)
    if reasons:
        out["null_reasons"] = reasons
    out["measured_in_s"] = round(time.perf_counter() - t0, 3)
    return out
