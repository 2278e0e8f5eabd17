#!/usr/bin/env bash
# Warm-cache speed-up: run the default profile twice with a fresh export cache and print both wall times, then
# compare the two runs' paired ratios (benchmarks/paired_stability.py).
# Targets: the second run (every export a cache hit) takes under 0.3 of the wall time of the first; every paired
# ratio of the two runs agrees within 5%.
#   bash benchmarks/cache_speedup.sh [extra pytest options, e.g. --sizes n,s]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
cache=$(mktemp -d /tmp/yolo26-cache-XXXX)
results=${RESULTS:-results}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$results"
now() { "$PY" -c 'import time; print(time.time())'; }
run() {
  local id=$1; shift
  local t0; t0=$(now)
  "$PY" -m pytest suites/ --benchmark-only --cache-dir "$cache" --results-dir "$results" --run-id "$id" \
    --no-history -q "$@" > "$results/$id.log" 2>&1 || true
  "$PY" -c "import time; print(time.time() - $t0)"
}
cold=$(run "$stamp-cold" "$@")
warm=$(run "$stamp-warm" "$@")
rc=0
"$PY" - "$cold" "$warm" "$results" "$stamp" <<'PYEOF' || rc=1
import sys
cold, warm = float(sys.argv[1]), float(sys.argv[2])
print(f"cold (fresh cache): {cold:.1f} s\nwarm (cache hits):  {warm:.1f} s\nwarm/cold: {warm / cold:.3f} (target < 0.3)")
print(f"records: {sys.argv[3]}/{sys.argv[4]}-cold/ and -warm/ (cells.jsonl); logs: {sys.argv[3]}/{sys.argv[4]}-*.log")
sys.exit(0 if warm / cold < 0.3 else 1)
PYEOF
"$PY" benchmarks/paired_stability.py "$results/$stamp-cold" "$results/$stamp-warm" || rc=1
exit $rc
