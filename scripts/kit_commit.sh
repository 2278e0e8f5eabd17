#!/usr/bin/env bash
# Write KIT_COMMIT at the repository's root: the commit the GPU kit's copy of the code is (with "-dirty" when the
# tracked files differ from it). Run it here before sending the code to a machine where the copy has no .git of its
# own; benchmarks/gpu_once.sh exports it as $YOLO26_BENCH_GIT_COMMIT, which env.json's git_commit reads first
# (harness.core.envinfo.git_commit_info). KIT_COMMIT is git-ignored.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
commit=$(git -C "$repo" rev-parse HEAD)
[[ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]] && commit="$commit-dirty"
echo "$commit" > "$repo/KIT_COMMIT"
echo "KIT_COMMIT: $commit"
