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
    for side in old new; do
      mkdir -p "$out/$side"
      bin=$old; [ $side = new ] && bin=$new
      timeout 60 "$bin" sync --target $t --stats "$f" 2>&1 | filter > "$out/$side/$n"
      echo "rc=${PIPESTATUS[0]}" >> "$out/$side/$n"
    done
  done
done
diff -r "$out/old" "$out/new"
status=$?
rm -rf "$out"
exit $status
