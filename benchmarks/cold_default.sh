#!/usr/bin/env bash
# A newcomer's main job, cold: clone the repository into a temporary directory, install it as the README says,
# run the README's main command there, and print its wall time, its first remaining-time estimate and their ratio,
# and the time budget's plan against what ran (planned cells against recorded ones, the wall against the budget,
# any re-plan), the CPU quota and its throttling, and each use case's pick or why it has none.
#   bash benchmarks/cold_default.sh [--rev REV] [--keep DIR] [--pip-args '...'] [--cpus Q] [extra suite options]
# --rev: the commit to clone (default HEAD of this checkout); --keep: copy the run's results directory, its log,
# timeline.json and report/decision.json there; --pip-args: added to the pip install (a CPU-only index, say);
# --cpus: run the main command in a cgroup CPU quota of Q CPUs, as `docker run --cpus=Q` would
# (scripts/in_cpu_quota.py: root with a writable cpu controller). Extra suite options such as --results-dir and
# --cache-dir are passed on (the run is found under that --results-dir).
# Target: the main job within 15 minutes (+5%) on a 2-core machine, its first estimate within 1.3x of its wall time
# either way. Nothing is reused: a fresh clone, a fresh virtual environment, no export cache, no history.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rev=HEAD
keep=""
pip_args=""
cpus=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rev) rev=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --pip-args) pip_args=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    *) break ;;
  esac
done
results_root=results
prev=""
for a in "$@"; do
  [ "$prev" = "--results-dir" ] && results_root=$a
  case "$a" in --results-dir=*) results_root=${a#--results-dir=} ;; esac
  prev=$a
done
quota=()
[ -n "$cpus" ] && quota=(.venv/bin/python scripts/in_cpu_quota.py --cpus "$cpus" --)
commit=$(git -C "$here" rev-parse "$rev")
work=$(mktemp -d /tmp/yolo26-cold-XXXX)
trap 'rm -rf "$work"' EXIT
git clone -q "$here" "$work/repo"
git -C "$work/repo" checkout -q "$commit"
cd "$work/repo"
now() { date +%s.%N; }
t0=$(now)
# shellcheck disable=SC2086
python3 -m venv .venv && .venv/bin/pip install -q $pip_args -e '.[cpu,test]' > "$work/install.log" 2>&1
t1=$(now)
set +e
/usr/bin/time -f "%e s wall, %U s user, %S s sys" "${quota[@]}" .venv/bin/pytest suites/ --benchmark-only "$@" > "$work/run.log" 2>&1
rc=$?
set -e
t2=$(now)
run_dir=$(ls -dt "$results_root"/*/ 2>/dev/null | grep -v "samples\|/reports/" | head -1)
decision=reports/latest/decision.json
[ "$results_root" != results ] && decision="$results_root/reports/latest/decision.json"
.venv/bin/python - "$commit" "$t0" "$t1" "$t2" "$rc" "$run_dir" "$work/run.log" "$decision" <<'PYEOF'
import json
import re
import sys
from pathlib import Path

commit, t0, t1, t2, rc, run_dir, log, decision = sys.argv[1:9]
install, wall = float(t1) - float(t0), float(t2) - float(t1)
text = Path(log).read_text(errors="replace")
first = re.search(r"estimate: about (.+?) left \(", text)
timeline = Path(run_dir) / "timeline.json" if run_dir else None
est = None
if timeline and timeline.is_file():
    est = json.loads(timeline.read_text()).get("estimate_at_start_s")
cpu = next((l for l in text.splitlines()[::-1] if l.endswith(" s sys")), "")
env = json.loads((Path(run_dir) / "env.json").read_text()) if run_dir else {}
host = (env.get("host") or {}).get("cpu_model")
print(f"commit {commit[:12]} on {host!r}: exit {rc}")
print(f"install: {install:.1f} s")
print(f"main job: {wall:.1f} s wall ({wall / 60:.1f} min; {cpu})")
if est:
    ratio = est / wall
    print(f"first estimate: {est:.1f} s ({first.group(1) if first else '?'}); estimate / wall = {ratio:.2f}")
else:
    print("first estimate: not found (no timeline.json)")
plan = env.get("plan") if isinstance(env.get("plan"), dict) else None
recorded = set()
if run_dir and (Path(run_dir) / "cells.jsonl").is_file():
    for line in (Path(run_dir) / "cells.jsonl").read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not rec.get("remedy_of"):
            recorded.add(rec.get("cell_id"))
said = re.search(r"plan: (every one of the .+|\d+ of \d+ cells in .+)", text)
print(f"budget's plan: {said.group(1) if said else 'none printed (--time-budget none, or not the default profile)'}")
if plan:
    chosen = set(plan.get("selected_ids") or [])
    left = sum(len(v) for v in (plan.get("left_out") or {}).values() if isinstance(v, list))
    budget_s = float(plan.get("budget_s") or 0)
    print(f"planned {len(chosen)} of {plan.get('profile_cells')} cells ({left} left for later), recorded "
          f"{len(recorded & chosen)} of them ({len(chosen - recorded)} planned but not recorded, "
          f"{len(recorded - chosen)} recorded but not planned)")
    print(f"wall {wall:.1f} s against the budget {budget_s:.0f} s ({plan.get('budget')}): "
          f"{wall / budget_s:.2f}x" if budget_s else "no budget in the plan")
else:
    print(f"every planned cell in the run: {len(recorded)} recorded (no plan in env.json: nothing left out)")
for line in text.splitlines():
    if "re-plan after" in line and "] re-plan" in line:
        print(line.split("] ", 1)[-1])
quota = (env.get("host") or {}).get("cpu_quota") or {}
threads = env.get("threads") or {}
print(f"CPU quota: {quota.get('cpus')} CPU ({quota.get('source') or quota.get('reason')}); threads: "
      f"{threads.get('budget')} ({threads.get('source')})")
during = (env.get("cpu_throttle") or {}).get("during_run")
if during:
    print(f"throttled in {during['throttled']} of {during['periods']} quota periods during the run "
          f"({during['throttled_s']} s held back)")
if timeline and timeline.is_file():
    tl = json.loads(timeline.read_text())
    f = tl.get("speed_factors") or {}
    print(f"speed probe: python x{f.get('python_s', 0):.2f}, compute x{f.get('compute_s', 0):.2f} of the table's "
          f"reference; parts at the start {tl.get('estimate_at_start_parts')}")
    print("parts actual: export phase {} s, timing phase {} s, scenario phase {} s, end {} s, wall {} s".format(
        tl.get("export_phase_s"), tl.get("timing_phase_s"), tl.get("scenario_phase_s"), tl.get("finish_s"),
        tl.get("wall_s")))
if Path(decision).is_file():
    for d in json.loads(Path(decision).read_text()).get("decisions") or []:
        pick = d.get("pick") or {}
        conf = pick.get("configuration") or {}
        what = (f"{conf.get('model')} {conf.get('shape')} {conf.get('precision')} {conf.get('backend')}: "
                f"{pick.get('figure')}" if pick else f"no pick: {d.get('reason')}")
        print(f"use case {d.get('use_case')}: {what}")
else:
    print(f"no decision.json at {decision}")
PYEOF
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  cp "$work/run.log" "$work/install.log" "$keep/"
  [ -n "$run_dir" ] && cp -r "$run_dir" "$keep/run"
  [ -f "$decision" ] && cp "$decision" "$keep/"
  echo "kept: $keep"
fi
exit "$rc"
