#!/usr/bin/env bash
# Flakiness check of the tests that can race with a loaded machine: those that assert on measured time (marker
# `timing`), start a suite run, a worker process or send a signal (marker `process`), or run real exports (marker
# `slow`, whose exports start workers). PASSES runs of them in random order (pytest-randomly, a new seed each pass)
# while a busy loop spins on every core and a second heavy process runs beside them (HEAVY=export, the default: a
# real yolo26n ONNX export and a one-cell suite run, again and again; HEAVY=none: the busy loops only), then the list
# of every test that failed at least once. Exit 0 only when none did.
#
#   scripts/flaky_check.sh [PASSES] [-- extra pytest arguments]      (default: 3 passes)
#   MARKS='process' scripts/flaky_check.sh 20 -- -k p05              (the signal tests only, 20 times)
#
# PY names the Python (default .venv/bin/python, else python3).
#
# MARKS is the -m expression (default 'timing or process or slow'). The load is bounded in time (LOAD_MAX_S, default
# 3600 s) and stopped when the script ends, however it ends. A pass still running when the load stops says so, and the
# summary counts only the passes that ended under load.
set -euo pipefail
cd "$(dirname "$0")/.."

passes=3
if [[ $# -gt 0 && $1 != "--" ]]; then passes=$1; shift; fi
[[ ${1:-} == "--" ]] && shift
[[ $passes =~ ^[1-9][0-9]*$ ]] || { echo "ERROR: PASSES must be a positive integer, not '$passes'" >&2; exit 2; }
py=${PY:-.venv/bin/python}
[[ -x $py ]] || py=python3
"$py" -c "import pytest_randomly" 2>/dev/null \
  || { echo "ERROR: pytest-randomly is not installed (pip install -e '.[test]')" >&2; exit 2; }

out=$(mktemp -d "${TMPDIR:-/tmp}/flaky-check.XXXXXX")
# one export cache for every pass: the exports are not what this checks, and each pass would repeat them
export YOLO26_BENCH_TEST_CACHE="$out/cache"
marks=${MARKS:-timing or process or slow}
heavy=${HEAVY:-export}
[[ $heavy == export || $heavy == none ]] || { echo "ERROR: HEAVY must be export or none, not '$heavy'" >&2; exit 2; }
cores=$(nproc)
load_max_s=${LOAD_MAX_S:-3600}
pids=()
# each load process leads its own process group (setsid), so stopping it stops what it started (the export's
# workers) and nothing else
stop_load() {
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_load EXIT INT TERM
load_end=$(( $(date +%s) + load_max_s ))  # the load stops here (LOAD_MAX_S): a pass still running then is not loaded
for _ in $(seq "$cores"); do
  setsid timeout "$load_max_s" sh -c 'while :; do :; done' &
  pids+=($!)
done
if [[ $heavy == export ]]; then
  # a real export beside the tests: a one-cell suite run (yolo26n, ONNX Runtime, CPU) re-exporting each time
  setsid timeout "$load_max_s" bash -c '
    i=0
    while :; do
      i=$((i + 1))
      "$1" -m pytest suites/ --benchmark-only -q -p no:randomly --sizes n --tasks detect --heads e2e \
        --backends onnxruntime --devices cpu --shapes 320 --precisions fp32 --refresh-cache --no-report \
        --no-history --no-accuracy --scenarios none --results-dir "$2/load" --cache-dir "$2/load-cache" \
        --run-id "load-$i" >>"$2/load.log" 2>&1 || true
    done' heavy "$py" "$out" &
  pids+=($!)
fi
echo "load: $cores busy loops and heavy=$heavy (at most ${load_max_s} s); $passes passes of -m '$marks'; logs in $out"

start=$(date +%s)
loaded=0  # passes that ended before the load did
for i in $(seq "$passes"); do
  seed=$((RANDOM * 32768 + RANDOM))
  echo "pass $i/$passes (randomly seed $seed)"
  "$py" -m pytest tests/ -m "$marks" -p randomly -q --randomly-seed="$seed" --junitxml="$out/pass$i.xml" "$@" >"$out/pass$i.log" 2>&1 || true
  tail -n 1 "$out/pass$i.log"
  ended=$(date +%s)
  if (( ended <= load_end )); then
    loaded=$((loaded + 1))
  else
    echo "pass $i: the load had stopped $((ended - load_end)) s before it ended (LOAD_MAX_S=$load_max_s): not a pass under load"
  fi
done
stop_load
trap - EXIT INT TERM

loads=$(grep -c "passed\|skipped" "$out/load.log" 2>/dev/null || true)
[[ $heavy == export ]] && echo "heavy process: ${loads:-0} one-cell suite runs (real exports) finished beside the tests"
"$py" - "$out" "$passes" "$(( $(date +%s) - start ))" "$marks" "$loaded" <<'PY'
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

out, passes, wall, marks, loaded = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
failed, ran = Counter(), Counter()
for i in range(1, passes + 1):
    xml = out / f"pass{i}.xml"
    if not xml.is_file():
        failed[f"pass {i}: no junit report (see {out}/pass{i}.log)"] += 1
        continue
    for case in ET.parse(xml).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("skipped") is not None:
            continue
        ran[name] += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed[name] += 1
print(f"{len(ran)} tests (-m '{marks}'), {passes} passes ({loaded} of them wholly under load), {wall} s: "
      f"{sum(failed.values())} failures in {len(failed)} tests")
for name, n in sorted(failed.items()):
    print(f"FLAKY {n}/{passes}: {name}")
sys.exit(1 if failed else 0)
PY
