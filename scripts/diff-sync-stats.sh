#!/usr/bin/env bash
# Diffs `sync --stats` of two smemsync builds on every example and file test, for sm_80,
# sm_90, gfx942 and gfx1201: a change meant to keep results identical (a speed-up) must print
# nothing. Usage: scripts/diff-sync-stats.sh OLD_BINARY NEW_BINARY
#
# Compared: the synchronized kernels (every barrier, wait, fence and warp sync and where it
# is), the diagnostics, the exit code and the --stats counts of what was placed and executed.
# Not compared: `hazards=`, `covered_by_existing=` and `lower_bound=`, which count the hazards
# the analysis kept; nearest-source pruning (docs/placement.md section 4) keeps fewer or more of
# them without changing the placement. FULL_STATS=1 compares those too.
set -uo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 out=$(mktemp -d)
mkdir -p "$out/old" "$out/new"
. scripts/diff-lib.sh
filter() {
  if [ "${FULL_STATS:-0}" = 1 ]; then
    cat
  else
    sed -E '/^\/\/ stats:/ s/ (hazards|covered_by_existing|lower_bound)=[0-9]+//g'
  fi
}
for f in examples/*.kir $(find tests/filetests -name '*.kir' | sort); do
  for t in sm_80 sm_90 gfx942 gfx1201; do
    n=$(echo "$f" | tr '/' '_').$t
    both "$n" 60 filter sync --target $t --stats "$f"
  done
done
finish
