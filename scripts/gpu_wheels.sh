#!/usr/bin/env bash
# Download the pinned wheels the GPU machine lacks (scripts/gpu_wheels.txt: cp312 manylinux x86_64, each with its
# sha256), then check that the repository's tracked files plus the wheels stay under the limit the device tool
# carries (60 MB by default). Run here, where a package registry is reachable; the GPU machine has none.
#
#   scripts/gpu_wheels.sh [--dest DIR] [--limit-mb N] [--check-only] [--dry-run] [--parts]
#
#   --dest DIR     where the wheels go (default: gpu-wheels beside the repository, outside it)
#   --limit-mb N   the size limit for repository + wheels (default 60)
#   --check-only   no download: only the size check of DIR
#   --dry-run      print the download command instead of running it (then the size check)
#   --parts        also download scripts/gpu_parts_wheels.txt (onnxruntime-gpu, 256 MB: over what one command
#                  carries) into .parts/src (ignored, never carried: not into DIR, which a command carries whole)
#                  and split each into .parts/ (scripts/wheel_parts.py split, parts sized to fit one command beside
#                  the working tree); they travel one per command (docs/gpu.md)
# Exit status: 0 ok; 1 over the limit; 2 bad arguments; else pip's own status.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$(dirname "$repo")/gpu-wheels"
limit_mb=60
check_only=0
dry_run=0
parts=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dest) dest=${2:?--dest needs a folder}; shift 2 ;;
        --limit-mb) limit_mb=${2:?--limit-mb needs a number}; shift 2 ;;
        --check-only) check_only=1; shift ;;
        --dry-run) dry_run=1; shift ;;
        --parts) parts=1; shift ;;
        *) echo "gpu_wheels.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
[[ "$limit_mb" =~ ^[0-9]+$ ]] || { echo "gpu_wheels.sh: --limit-mb must be a whole number of MB, not $limit_mb" >&2; exit 2; }

pip_cmd=(python3 -m pip download --no-deps --only-binary=:all: --require-hashes
    --python-version 3.12 --implementation cp --abi cp312
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
    -d "$dest" -r "$repo/scripts/gpu_wheels.txt")
if [[ $check_only -eq 0 ]]; then
    if [[ $dry_run -eq 1 ]]; then
        echo "${pip_cmd[*]}"
    else
        mkdir -p "$dest"
        "${pip_cmd[@]}"
    fi
fi

if [[ $parts -eq 1 ]]; then
    parts_cmd=(python3 -m pip download --no-deps --only-binary=:all: --require-hashes
        --python-version 3.12 --implementation cp --abi cp312
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
        -d "$repo/.parts/src" -r "$repo/scripts/gpu_parts_wheels.txt")
    if [[ $dry_run -eq 1 ]]; then
        echo "${parts_cmd[*]}"
    elif [[ $check_only -eq 0 ]]; then
        mkdir -p "$repo/.parts/src"
        "${parts_cmd[@]}"
        for whl in "$repo"/.parts/src/*.whl; do
            (cd "$repo" && python3 scripts/wheel_parts.py split "$whl" --dest .parts --part-mb auto)
        done
    fi
fi

# the repository as it travels (tracked and untracked-not-ignored files, as wheel_parts.tree_bytes counts them: a
# tracked file deleted in the work tree does not travel) plus the wheels
repo_bytes=$(cd "$repo" && python3 -c 'import pathlib, sys; sys.path.insert(0, "scripts"); import wheel_parts; print(wheel_parts.tree_bytes(pathlib.Path(".")) or 0)')
wheel_bytes=0
if [[ -d "$dest" ]]; then
    wheel_bytes=$(find "$dest" -maxdepth 1 -name '*.whl' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
fi
total=$((repo_bytes + wheel_bytes))
limit=$((limit_mb * 1000 * 1000))
printf 'repository %.1f MB + wheels %.1f MB = %.1f MB (limit %d MB)\n' \
    "$(awk "BEGIN {print $repo_bytes / 1e6}")" "$(awk "BEGIN {print $wheel_bytes / 1e6}")" \
    "$(awk "BEGIN {print $total / 1e6}")" "$limit_mb"
if [[ $total -gt $limit ]]; then
    echo "gpu_wheels.sh: over the limit by $(( (total - limit) / 1000 )) kB" >&2
    exit 1
fi
