#!/usr/bin/env bash
# Assemble the GitHub Pages site from rendered reports, check it, and leave it for the upload; the nightly
# workflow's publish job runs exactly this, then uploads SITE_DIR (actions/upload-pages-artifact).
#
#   scripts/publish_report.sh [--dry-run] REPORTS SITE_DIR
#
# REPORTS: the root `yolo26-bench report -o ROOT` wrote (ROOT/<report_id>/index.html and ROOT/latest/), or one
# report folder holding index.html (published as latest/). The site gets every report folder, a root index.html
# that redirects to latest/index.html, and .nojekyll (Pages serves the files as they are).
# --dry-run: build the site in a temporary folder, check it and list what would be uploaded; SITE_DIR untouched.
# Exit status: 0 ready, 2 bad input (one `publish:` line on stderr).
set -euo pipefail

dry_run=0
if [ "${1:-}" = "--dry-run" ]; then
  dry_run=1
  shift
fi
if [ $# -ne 2 ]; then
  echo "usage: $0 [--dry-run] REPORTS SITE_DIR" >&2
  exit 2
fi
src=$1
site=$2
fail() {
  echo "publish: $*" >&2
  exit 2
}

[ -d "$src" ] || fail "$src: not a folder"
if [ "$dry_run" = 1 ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
else
  [ -e "$site" ] && [ -n "$(ls -A "$site" 2>/dev/null)" ] && fail "$site: exists and is not empty"
  out=$site
  mkdir -p "$out"
fi

if [ -f "$src/index.html" ]; then # one report folder
  mkdir -p "$out/latest"
  cp -R "$src/." "$out/latest/"
elif [ -f "$src/latest/index.html" ]; then # a reports root
  cp -R "$src/." "$out/"
else
  fail "$src: neither a report (index.html) nor a reports root (latest/index.html)"
fi

# Every report folder holds its page; a page that links into the local file system would be broken on Pages.
n_reports=0
for page in "$out"/*/index.html; do
  n_reports=$((n_reports + 1))
  if grep -q -E '(src|href)="(file:|/(home|root|tmp|work|Users)/)' "$page"; then
    fail "${page#"$out"/}: links into the local file system"
  fi
done
[ "$n_reports" -gt 0 ] || fail "$src: no report folder with an index.html"

printf '<!doctype html>\n<meta charset="utf-8">\n<meta http-equiv="refresh" content="0; url=latest/index.html">\n<a href="latest/index.html">latest report</a>\n' \
  > "$out/index.html"
touch "$out/.nojekyll"

files=$(find "$out" -type f | wc -l | tr -d ' ')
kib=$(du -sk "$out" | cut -f1)
if [ "$dry_run" = 1 ]; then
  echo "dry run: would publish $n_reports report(s), $files files, $kib KiB to $site:"
  (cd "$out" && find . -type f | sed 's|^\./||' | sort)
else
  echo "site: $n_reports report(s), $files files, $kib KiB in $site"
fi
