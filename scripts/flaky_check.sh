#!/usr/bin/env bash
# Flakiness check of the timing-sensitive tests (marker `timing`), where they run: PASSES runs of them in random
# order (pytest-randomly, a new seed each pass) while a busy loop spins on every core, then the list of every test
# that failed at least once. Exit 0 only when none did.
#
#   scripts/flaky_check.sh [PASSES] [-- extra pytest arguments]      (default: 3 passes, `-m timing`)
#
# The load is bounded in time (LOAD_MAX_S, default 3600 s) and stopped when the script ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

passes=3
if [[ $# -gt 0 && $1 != "--" ]]; then passes=$1; shift; fi
[[ ${1:-} == "--" ]] && shift
[[ $passes =~ ^[1-9][0-9]*$ ]] || { echo "ERROR: PASSES must be a positive integer, not '$passes'" >&2; exit 2; }
py=.venv/bin/python
[[ -x $py ]] || py=python3
"$py" -c "import pytest_randomly" 2>/dev/null \
  || { echo "ERROR: pytest-randomly is not installed (pip install -e '.[test]')" >&2; exit 2; }

out=$(mktemp -d "${TMPDIR:-/tmp}/flaky-check.XXXXXX")
# one export cache for every pass: the exports are not what this checks, and each pass would repeat them
export YOLO26_BENCH_TEST_CACHE="$out/cache"
cores=$(nproc)
load_max_s=${LOAD_MAX_S:-3600}
pids=()
stop_load() { [[ ${#pids[@]} -gt 0 ]] && kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null || true; }
trap stop_load EXIT INT TERM
for _ in $(seq "$cores"); do
  timeout "$load_max_s" sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "load: $cores busy loops (at most ${load_max_s} s); $passes passes of the timing tests; logs in $out"

start=$(date +%s)
for i in $(seq "$passes"); do
  seed=$((RANDOM * 32768 + RANDOM))
  echo "pass $i/$passes (randomly seed $seed)"
  "$py" -m pytest tests/ -m timing -p randomly -q --randomly-seed="$seed" --junitxml="$out/pass$i.xml" "$@" >"$out/pass$i.log" 2>&1 || true
  tail -n 1 "$out/pass$i.log"
done
stop_load
trap - EXIT INT TERM

"$py" - "$out" "$passes" "$(( $(date +%s) - start ))" <<'PY'
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

out, passes, wall = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
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
print(f"{len(ran)} timing tests, {passes} passes under load, {wall} s: "
      f"{sum(failed.values())} failures in {len(failed)} tests")
for name, n in sorted(failed.items()):
    print(f"FLAKY {n}/{passes}: {name}")
sys.exit(1 if failed else 0)
PY
