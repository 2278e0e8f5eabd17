#!/usr/bin/env bash
# The GPU kit: every GPU backend the machine can run, in calls of at most 9 minutes each (docs/gpu.md "The GPU
# kit"; which calls a 15-minute session runs: `python3 benchmarks/gpu_kit.py plan`). A GPU machine without a
# registry takes commands of at most 10 minutes, so each call is one command, bounded by --budget-s (default
# 530 s), and writes at most 8 files of at most 16 MiB each into OUT:
#
#   gpu_once.log        everything printed: versions, the wheels' imports, idle power, NVML, each step, the table
#   self_check.json     benchmarks/gpu_check.py --self-check-only (call 1; absent where it could not run: no GPU)
#   cells.jsonl         the suite's records of this call (copied when the suite ends, also on interruption)
#   env.json            that run's environment
#   executorch_cuda.json  the ExecuTorch CUDA exports, full and backbone-only (calls 2 and 4; their records are
#                       in cells.jsonl too, for the claims check)
#   table.txt           one line per cell: status, p50, e2e p99, GPU memory, energy, why not ok
#   logs.tar.gz         the runs' logs: failed cells' whole, the others' head and tail, under 15 MiB
#
#   call 1: self-check; yolo26n and yolo26s at 640, fp32 and fp16, batch 1 and 16: torch-eager,
#           torch-eager-cudagraph, torch-compile, torch-compile-max-autotune; scenarios on yolo26n (640, batch 1)
#   call 2: yolo26n at 640 and the dynamic-shape probe, fp32: aoti (and its loader remedies), aoti-cudagraph (the
#           same artifact); then the ExecuTorch CUDA exports of yolo26n, full and backbone-only, in what is left
#           (at most --et-budget-s), with one Inductor cache so the second reuses what the first autotuned
#           (--no-executorch: aoti alone)
#   call 3: onnxruntime on cuda (the CUDA execution provider): yolo26n and yolo26s at 640, fp32 and fp16, batch 1
#           and 16, scenarios on yolo26n (640, batch 1); onnxruntime-gpu joined from its parts (--ort-parts, sent
#           one per command before: scripts/wheel_parts.py) and installed into --ort-site, first on PYTHONPATH
#   call 4: the ExecuTorch CUDA exports of yolo26n alone, full and backbone-only, with the whole budget
#
#   benchmarks/gpu_once.sh OUT [--call 1|2|3|4] [--wheels DIR] [--budget-s N] [--et-budget-s N] [--probe-timeout N]
#                              [--device-cpu] [--cache-dir DIR] [--inductor-cache DIR] [--ort-parts DIR] [--ort-site DIR]
#                              [--sizes L] [--shapes L] [--precisions L] [--batches L] [--backends L]
#                              [--scenarios screen|n640|all|none] [--no-executorch] [--collect-only]
#
#   --call N        which call (default 1); the lists below override the call's own
#   --wheels DIR    the wheel folder (default: gpu-wheels beside the repository); absent: the installed packages
#   --device-cpu    rehearsal on a CPU: device cpu for cuda, yolo26n only, no CUDA-only backend, batch 1
#   --cache-dir DIR the suite's export cache (default: a fresh one in the call's work folder); a folder shared by
#                   calls or sessions exports each artifact once
#   --inductor-cache DIR  $TORCHINDUCTOR_CACHE_DIR for the call (default: a fresh one in its work folder); an
#                   ignored folder of the repository (.kit/inductor-cache) outlives the call while the machine is warm
#   --ort-parts DIR the parts folder of onnxruntime-gpu (default .parts/onnxruntime_gpu-1.31.1); call 3, or any call
#                   given it: checked, joined and installed before the suite (a part missing stops the call)
#   --ort-site DIR  where onnxruntime-gpu is installed (default .kit/ort-site: a second call finds it there)
#   --collect-only  only the suite command with --collect-only: each cell's skip reason or "runs here"
#   --probe-timeout N  seconds for a fresh artifact's load and first runs (default 120: the H200's AOTInductor
#                   probes were still loading after a minute; a timeout prints the stack and climbs the loader rungs)
# TensorRT and onnxruntime-gpu do not travel (their wheels are over 1 GB, a call carries 64 MiB): the kit says so;
# README.md "On a GPU" says how to run those cells on a GPU runner with a registry.
# $PYTHON is the interpreter (default python3). Exit status: 0 the call's records were written; 1 they were not, or
# a kit wheel did not import; 2 bad arguments.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${PYTHON:-python3}
out=""
call=1
wheels="$(dirname "$repo")/gpu-wheels"
budget=530
et_budget=300
probe_timeout=120
device=cuda
sizes="" shapes="" precisions="" batches="" backends="" scenarios=""
executorch=""
collect_only=0
cache_dir=""
inductor_cache=""
ort_parts=""
ort_site="$repo/.kit/ort-site"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --call) call=${2:?--call needs 1, 2, 3 or 4}; shift 2 ;;
        --wheels) wheels=${2:?--wheels needs a folder}; shift 2 ;;
        --budget-s) budget=${2:?--budget-s needs seconds}; shift 2 ;;
        --et-budget-s) et_budget=${2:?--et-budget-s needs seconds}; shift 2 ;;
        --probe-timeout) probe_timeout=${2:?--probe-timeout needs seconds}; shift 2 ;;
        --device-cpu) device=cpu; shift ;;
        --cache-dir) cache_dir=${2:?--cache-dir needs a folder}; shift 2 ;;
        --inductor-cache) inductor_cache=${2:?--inductor-cache needs a folder}; shift 2 ;;
        --ort-parts) ort_parts=${2:?--ort-parts needs a folder}; shift 2 ;;
        --ort-site) ort_site=${2:?--ort-site needs a folder}; shift 2 ;;
        --sizes) sizes=${2:?--sizes needs a list}; shift 2 ;;
        --shape|--shapes) shapes=${2:?--shapes needs a list}; shift 2 ;;
        --precisions) precisions=${2:?--precisions needs a list}; shift 2 ;;
        --batches) batches=${2:?--batches needs a list}; shift 2 ;;
        --backends) backends=${2:?--backends needs a list}; shift 2 ;;
        --scenarios) scenarios=${2:?--scenarios needs screen, n640, all or none}; shift 2 ;;
        --no-executorch) executorch=0; shift ;;
        --collect-only) collect_only=1; shift ;;
        -*) echo "gpu_once.sh: unknown option: $1" >&2; exit 2 ;;
        *) [[ -z "$out" ]] || { echo "gpu_once.sh: one output folder only (got $out and $1)" >&2; exit 2; }
           out=$1; shift ;;
    esac
done
[[ -n "$out" ]] || { echo "usage: benchmarks/gpu_once.sh OUT [options] (see the header of this script)" >&2; exit 2; }
[[ "$budget" =~ ^[0-9]+$ && "$et_budget" =~ ^[0-9]+$ && "$probe_timeout" =~ ^[0-9]+$ ]] || { echo "gpu_once.sh: --budget-s, --et-budget-s and --probe-timeout take whole numbers" >&2; exit 2; }
[[ "$call" =~ ^[1-4]$ ]] || { echo "gpu_once.sh: --call takes 1, 2, 3 or 4, not $call" >&2; exit 2; }

# each call's own selection, unless the command line chose
if [[ $call == 1 ]]; then
    : "${sizes:=n,s}" "${shapes:=640}" "${precisions:=fp32,fp16}" "${batches:=1,16}" "${scenarios:=n640}"
    : "${backends:=torch-eager,torch-eager-cudagraph,torch-compile,torch-compile-max-autotune}" "${executorch:=0}"
elif [[ $call == 2 ]]; then
    : "${sizes:=n}" "${shapes:=640,dynamic}" "${precisions:=fp32}" "${batches:=1}" "${scenarios:=none}"
    : "${backends:=aoti,aoti-cudagraph}" "${executorch:=1}"
elif [[ $call == 3 ]]; then
    : "${sizes:=n,s}" "${shapes:=640}" "${precisions:=fp32,fp16}" "${batches:=1,16}" "${scenarios:=n640}"
    : "${backends:=onnxruntime}" "${executorch:=0}" "${ort_parts:=$repo/.parts/onnxruntime_gpu-1.31.1}"
else  # call 4: the ExecuTorch CUDA exports alone (no suite)
    : "${sizes:=n}" "${shapes:=640}" "${precisions:=fp32}" "${batches:=1}" "${scenarios:=none}"
    : "${executorch:=1}"
fi
if [[ $device == cpu ]]; then
    # CUDA-only backends have nothing to rehearse on a CPU; yolo26n, batch 1, fp32 keep the rehearsal short
    backends=$(echo "$backends" | tr ',' '\n' | grep -v -e '-cudagraph$' -e 'max-autotune$' | paste -sd, -)
    sizes=n batches=1 precisions=fp32
fi
[[ -n "$backends" || $call == 4 ]] || { echo "gpu_once.sh: no backend left to run on $device" >&2; exit 2; }

suite_cmd() {  # the suite command of this call
    echo "$py" -m pytest "$repo/suites/" --benchmark-only -p no:randomly -q --rootdir "$repo" \
        --sizes "$sizes" --shapes "$shapes" --heads e2e --precisions "$precisions" --batches "$batches" \
        --devices "$device" --backends "$backends" --timing-episodes 1 --max-time 1 --no-accuracy \
        --scenarios "$scenarios" --probe-timeout "$probe_timeout" --no-report --no-history
}

if [[ $collect_only -eq 1 ]]; then
    # shellcheck disable=SC2046
    PYTHONPATH="$repo" $(suite_cmd) --results-dir "${TMPDIR:-/tmp}/gpu_once-collect" --collect-only || exit 1
    exit 0
fi

mkdir -p "$out" || exit 2
if [[ -n "$(ls -A "$out" 2>/dev/null)" ]]; then
    echo "gpu_once.sh: $out is not empty (it gets at most 8 files of this call only)" >&2
    exit 2
fi
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_once.XXXXXX")
run_id="gpu-once-call$call"
exec > >(tee "$out/gpu_once.log") 2>&1
t_end=$((SECONDS + budget))
status=0

left() { echo $((t_end - SECONDS)); }

step() {  # step NAME CMD...: run CMD within the time left; its exit status
    local name=$1 l rc
    shift
    l=$(left)
    if ((l < 20)); then
        echo "== $name: not started, $l s of the budget left"
        return 124
    fi
    echo "== $name (at most $l s): $*"
    timeout -k 10 --signal=INT "$l" "$@"
    rc=$?
    echo "== $name: exit $rc"
    return $rc
}

collect() {  # what finished, into OUT (also on interruption): records, table, trimmed logs, and every file's size
    local recs="$work/results/$run_id/cells.jsonl"
    if [[ -f "$recs" ]]; then
        cp "$recs" "$out/cells.jsonl"
        cp "$work/results/$run_id/env.json" "$out/env.json" 2>/dev/null
        echo "== table (call $call)"
        "$py" "$repo/benchmarks/gpu_kit.py" table "$out/cells.jsonl" | tee "$out/table.txt"
    else
        echo "== suite: no records"
    fi
    "$py" "$repo/benchmarks/gpu_kit.py" pack-logs "$work" "$out/logs.tar.gz" --records "$out/cells.jsonl"
    echo "== files in $out (each must be under 16 MiB, at most 8):"
    "$py" "$repo/benchmarks/gpu_kit.py" sizes "$out" || echo "== a returned file is over the limits"
    echo "== gpu_once call $call: done in $SECONDS s, exit $status"
}
trap collect EXIT

echo "== gpu_once call $call: repo $repo, device $device, sizes $sizes, shapes $shapes, precisions $precisions," \
    "batches $batches, backends $backends, scenarios $scenarios, budget ${budget} s"
if [[ -f "$repo/KIT_COMMIT" ]]; then  # env.json's git_commit: the copy's own .git may be older, or absent
    YOLO26_BENCH_GIT_COMMIT=$(head -1 "$repo/KIT_COMMIT")
    export YOLO26_BENCH_GIT_COMMIT
    echo "== code: $YOLO26_BENCH_GIT_COMMIT (KIT_COMMIT, written when it was packed)"
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"  # packages installed beforehand stay importable
# one Inductor cache for the whole call (AOTInductor, torch.compile, ExecuTorch CUDA): autotuning results found by
# one export are reused by the next (the compile times in the records say cold or not: their caches are off)
export TORCHINDUCTOR_CACHE_DIR="${inductor_cache:-$work/inductor-cache}"
mkdir -p "$TORCHINDUCTOR_CACHE_DIR"
# Inductor's compile workers: every core this machine gives the call (ExecuTorch CUDA's exports record it)
TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-$(nproc)}
export TORCHINDUCTOR_COMPILE_THREADS
echo "== Inductor: cache $TORCHINDUCTOR_CACHE_DIR, $TORCHINDUCTOR_COMPILE_THREADS compile threads"
if compgen -G "$wheels/*.whl" >/dev/null; then
    step install "$py" -m pip install --no-deps --no-index --quiet --target "$work/site" "$wheels"/*.whl \
        && export PYTHONPATH="$work/site:$repo"
else
    echo "== install: no wheels in $wheels: using the installed packages"
fi
if ! step imports "$py" "$repo/benchmarks/gpu_kit.py" imports "$repo/scripts/gpu_wheels.txt"; then
    echo "== a kit wheel does not import: the cells would fail for that reason, not the backend's; stopping"
    status=1
    exit 1
fi

if [[ -n "$ort_parts" ]]; then
    # onnxruntime-gpu, sent in parts (one per command while the machine stayed warm): every part there, joined,
    # its sha256 checked, installed alone into $ort_site (never beside the CPU onnxruntime in one site), first on
    # PYTHONPATH so `import onnxruntime` finds it
    if step onnxruntime-gpu "$py" "$repo/scripts/wheel_parts.py" receive "$ort_parts" --target "$ort_site" \
        --require-all --python "$py"; then
        export PYTHONPATH="$ort_site:$PYTHONPATH"
        # onnxruntime.preload_dlls() looks for the CUDA and cuDNN libraries in nvidia/ beside the onnxruntime
        # package (nvidia/cu13/lib, nvidia/cudnn/lib), then on the linker's default path: installed into a folder
        # of its own it would find neither, so that folder gets a link to the image's nvidia packages
        nv=$("$py" -c 'import importlib.util as u; s = u.find_spec("nvidia"); print(next(iter(s.submodule_search_locations), "") if s else "")' 2>/dev/null)
        if [[ -n "$nv" && -d "$nv" ]]; then
            ln -sfn "$nv" "$ort_site/nvidia" && echo "== onnxruntime-gpu: $ort_site/nvidia -> $nv (for preload_dlls)"
        else
            echo "== onnxruntime-gpu: no nvidia packages importable here: preload_dlls will find no CUDA libraries"
        fi
    else
        echo "== onnxruntime-gpu is not complete here: the onnxruntime cells would run on the CPU build; stopping"
        status=1
        exit 1
    fi
fi

step versions "$py" - <<'EOF'
import importlib.metadata as md
import os
import platform

for dist in ("torch", "triton", "nvidia-ml-py", "ultralytics", "ultralytics-thop", "executorch", "torchao",
             "mlcommons-loadgen", "onnxruntime", "onnxruntime-gpu", "tensorrt", "numpy", "opencv-python",
             "opencv-python-headless"):
    try:
        print(f"{dist} {md.version(dist)}")
    except md.PackageNotFoundError:
        print(f"{dist} (not installed)")
print("python", platform.python_version())
try:  # which onnxruntime imports (onnxruntime-gpu first on PYTHONPATH shadows the CPU build) and its providers
    import onnxruntime

    print("onnxruntime imports from", onnxruntime.__file__, onnxruntime.__version__, onnxruntime.get_available_providers())
except ImportError as e:
    print("onnxruntime: not importable:", e)
for dist, size in (("tensorrt", "TensorRT"), ("onnxruntime-gpu", "onnxruntime-gpu")):
    try:
        md.version(dist)
    except md.PackageNotFoundError:
        print(f"{size}: not run here: its wheels are over 1 GB and a call carries 64 MiB; run its cells on a GPU "
              "runner with a registry (README.md, 'On a GPU')")
import torch

print("torch.version.cuda", torch.version.cuda, "| cuda available:", torch.cuda.is_available())
from harness.measure.nvml import NvmlUnavailable, current_device_handle, idle_power_w, nvml_reason, process_used_bytes

why = nvml_reason()
if why or not torch.cuda.is_available():
    print("idle power: not read:", why or "no CUDA device visible to torch")
    print("NVML sees this process: not checked:", why or "no CUDA device visible to torch")
else:
    try:
        handle = current_device_handle()
        print(f"idle power: {idle_power_w(handle, seconds=2.0):.1f} W (median over 2 s, before any CUDA work)")
    except NvmlUnavailable as e:
        print("idle power: not read:", e)
    torch.empty(1, device="cuda")  # a CUDA context for this process
    torch.cuda.synchronize()
    used = process_used_bytes(handle, os.getpid())
    if used:
        print(f"NVML sees this process: yes ({used / 2**20:.0f} MiB)")
    else:
        print(f"NVML sees this process: no ({used}; a container with its own PID namespace? docs/gpu.md)")
EOF

if [[ $call == 1 ]]; then
    step self-check "$py" "$repo/benchmarks/gpu_check.py" --self-check-only --out "$work/self-check"
    [[ -f "$work/self-check/gpu_check.json" ]] && cp "$work/self-check/gpu_check.json" "$out/self_check.json"
fi

# the suite leaves the ExecuTorch exports --et-budget-s; they get whatever is left when the suite ends
saved_end=$t_end
[[ $executorch == 1 ]] && t_end=$((t_end - et_budget))
recs="$work/results/$run_id/cells.jsonl"
if [[ -n "$backends" ]]; then
    # shellcheck disable=SC2046
    step "suite (call $call)" $(suite_cmd) --results-dir "$work/results" --cache-dir "${cache_dir:-$work/cache}" \
        --run-id "$run_id"
    [[ -f "$recs" ]] || status=1
fi
t_end=$saved_end

if [[ $executorch == 1 ]]; then
    # each export's record joins the call's records (the claims check reads them): appended to the suite's run,
    # or (call 4, no suite) written as the call's run with its env.json
    et_records=()
    [[ -f "$recs" ]] && et_records=(--records "$recs")
    step "executorch-cuda exports" "$py" "$repo/benchmarks/gpu_check.py" --executorch-only --sizes n \
        --shape "${shapes%%,*}" --out "$work/executorch" --budget-s $(($(left) - 15)) --run-id "$run_id" \
        "${et_records[@]}"
    [[ -f "$work/executorch/gpu_check.json" ]] && cp "$work/executorch/gpu_check.json" "$out/executorch_cuda.json"
    if [[ ! -f "$recs" && -f "$work/executorch/$run_id/cells.jsonl" ]]; then
        mkdir -p "$work/results/$run_id"
        cp "$work/executorch/$run_id/cells.jsonl" "$work/executorch/$run_id/env.json" "$work/results/$run_id/" 2>/dev/null
    fi
    [[ -f "$recs" ]] || status=1
fi
exit $status
