#!/usr/bin/env bash
# The first GPU run as one command (issue 24; docs/gpu.md "The one-command GPU run"). Bounded by a time budget
# (default 540 s, under the device tool's 10 minutes), it writes at most 8 files into OUT:
#
#   gpu_once.log        everything printed: versions, idle power, whether NVML sees this process, each step
#   self_check.json     benchmarks/gpu_check.py --self-check-only (absent where it could not run: no GPU)
#   cells-n.jsonl       the suite's records of yolo26n (copied as soon as its run ends, before yolo26s starts)
#   env.json            that run's environment
#   cells-s.jsonl       the suite's records of yolo26s
#   executorch_cuda.json  the ExecuTorch CUDA exports of yolo26n, full and backbone-only (the seeds' claims)
#   logs.tar.gz         the runs' logs (per cell, probes, exports)
#
# Steps: install the wheels (scripts/gpu_wheels.sh) with --no-deps into a target folder; print versions, idle
# power and whether NVML sees this process; gpu_check.py --self-check-only; the suite for yolo26n, then yolo26s
# (e2e, 640, fp32, torch-eager, torch-compile, aoti and torch-eager-cudagraph on cuda, one timing episode,
# scenarios on yolo26n only, no accuracy); the ExecuTorch CUDA exports of yolo26n. A step that would start with
# less than 20 s left is skipped; when the budget runs out, what finished is kept (records are copied as each run
# ends, the log archive is written on exit).
#
#   benchmarks/gpu_once.sh OUT [--wheels DIR] [--budget-s N] [--device-cpu] [--shape N] [--backends LIST]
#                              [--scenarios n640|all|none] [--collect-only]
#
#   --wheels DIR    the wheel folder (default: gpu-wheels beside the repository); absent: the installed packages
#   --device-cpu    rehearsal on a CPU: device cpu for cuda, yolo26n only, no graph variant
#   --shape N       square input size (default 640)
#   --backends L    comma-separated backends (default torch-eager,torch-compile,aoti,torch-eager-cudagraph)
#   --scenarios M   yolo26n's scenarios (default all: every yolo26n cell of the run; yolo26s never runs them)
#   --collect-only  only the suite commands with --collect-only: each cell's skip reason or "runs here"
# $PYTHON is the interpreter (default python3). Exit status: 0 every size's records were written; 1 one was not;
# 2 bad arguments.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${PYTHON:-python3}
out=""
wheels="$(dirname "$repo")/gpu-wheels"
budget=540
device=cuda
sizes="n s"
shape=640
backends="torch-eager,torch-compile,aoti,torch-eager-cudagraph"
scenarios_n=all
collect_only=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --wheels) wheels=${2:?--wheels needs a folder}; shift 2 ;;
        --budget-s) budget=${2:?--budget-s needs seconds}; shift 2 ;;
        --device-cpu) device=cpu; sizes="n"; shift ;;
        --shape) shape=${2:?--shape needs a size}; shift 2 ;;
        --backends) backends=${2:?--backends needs a list}; shift 2 ;;
        --scenarios) scenarios_n=${2:?--scenarios needs n640, all or none}; shift 2 ;;
        --collect-only) collect_only=1; shift ;;
        -*) echo "gpu_once.sh: unknown option: $1" >&2; exit 2 ;;
        *) [[ -z "$out" ]] || { echo "gpu_once.sh: one output folder only (got $out and $1)" >&2; exit 2; }
           out=$1; shift ;;
    esac
done
[[ -n "$out" ]] || { echo "usage: benchmarks/gpu_once.sh OUT [options] (see the header of this script)" >&2; exit 2; }
[[ "$budget" =~ ^[0-9]+$ && "$shape" =~ ^[0-9]+$ ]] || { echo "gpu_once.sh: --budget-s and --shape take whole numbers" >&2; exit 2; }
if [[ $device == cpu ]]; then
    # the graph variant is cuda only: a rehearsal on a CPU runs the rest
    backends=$(echo "$backends" | tr ',' '\n' | grep -v -- '-cudagraph$' | paste -sd, -)
fi

suite_cmd() {  # the suite command for one size
    local size=$1 scen=none
    [[ $size == n ]] && scen=$scenarios_n
    echo "$py" -m pytest "$repo/suites/" --benchmark-only -p no:randomly -q --rootdir "$repo" \
        --sizes "$size" --shapes "$shape" --heads e2e --precisions fp32 --devices "$device" --backends "$backends" \
        --timing-episodes 1 --max-time 1 --no-accuracy --scenarios "$scen" --no-report --no-history
}

if [[ $collect_only -eq 1 ]]; then
    for size in $sizes; do
        # shellcheck disable=SC2046
        PYTHONPATH="$repo" $(suite_cmd "$size") --results-dir "${TMPDIR:-/tmp}/gpu_once-collect" --collect-only || exit 1
    done
    exit 0
fi

mkdir -p "$out" || exit 2
if [[ -n "$(ls -A "$out" 2>/dev/null)" ]]; then
    echo "gpu_once.sh: $out is not empty (it gets at most 8 files of this run only)" >&2
    exit 2
fi
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_once.XXXXXX")
exec > >(tee "$out/gpu_once.log") 2>&1
t_end=$((SECONDS + budget))

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

collect() {  # what finished, into OUT (also on interruption)
    tar -czf "$out/logs.tar.gz" -C "$work" --exclude='cache' --exclude='*.pt' --exclude='*.pt2' \
        --exclude='*.pte' --exclude='*.ptd' --exclude='*.onnx' --exclude='*.engine' . 2>/dev/null
    echo "== files in $out: $(ls "$out" | tr '\n' ' ')"
}
trap collect EXIT

echo "== gpu_once: repo $repo, device $device, sizes $sizes, shape $shape, backends $backends, budget ${budget} s"
export PYTHONPATH="$repo"
if compgen -G "$wheels/*.whl" >/dev/null; then
    step install "$py" -m pip install --no-deps --no-index --quiet --target "$work/site" "$wheels"/*.whl \
        && export PYTHONPATH="$work/site:$repo"
else
    echo "== install: no wheels in $wheels: using the installed packages"
fi

step versions "$py" - <<'EOF'
import importlib.metadata as md
import os
import platform

for dist in ("torch", "triton", "nvidia-ml-py", "ultralytics", "ultralytics-thop", "executorch", "torchao",
             "onnxruntime", "onnxruntime-gpu", "tensorrt", "numpy", "opencv-python", "opencv-python-headless"):
    try:
        print(f"{dist} {md.version(dist)}")
    except md.PackageNotFoundError:
        print(f"{dist} (not installed)")
print("python", platform.python_version())
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

step self-check "$py" "$repo/benchmarks/gpu_check.py" --self-check-only --out "$work/self-check"
[[ -f "$work/self-check/gpu_check.json" ]] && cp "$work/self-check/gpu_check.json" "$out/self_check.json"

status=0
for size in $sizes; do
    run_id="gpu-once-$size"
    # shellcheck disable=SC2046
    step "suite yolo26$size" $(suite_cmd "$size") --results-dir "$work/results" --cache-dir "$work/cache" \
        --run-id "$run_id"
    if [[ -f "$work/results/$run_id/cells.jsonl" ]]; then
        cp "$work/results/$run_id/cells.jsonl" "$out/cells-$size.jsonl"
        [[ -f "$out/env.json" ]] || cp "$work/results/$run_id/env.json" "$out/env.json" 2>/dev/null
    else
        echo "== suite yolo26$size: no records"
        status=1
    fi
done

step "executorch-cuda exports" "$py" "$repo/benchmarks/gpu_check.py" --executorch-only --sizes n \
    --shape "$shape" --out "$work/executorch"
[[ -f "$work/executorch/gpu_check.json" ]] && cp "$work/executorch/gpu_check.json" "$out/executorch_cuda.json"
echo "== gpu_once: done in $SECONDS s, exit $status"
exit $status
