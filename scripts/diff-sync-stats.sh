#!/usr/bin/env bash
# Diffs `sync --stats` of two smemsync builds on every example and file test, for sm_80,
# sm_90, gfx942 and gfx1201: a change meant to keep results identical (a speed-up) must print
# nothing. Usage: scripts/diff-sync-stats.sh OLD_BINARY NEW_BINARY
set -uo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 out=$(mktemp -d)
for f in examples/*.kir $(find tests/filetests -name '*.kir' | sort); do
  for t in sm_80 sm_90 gfx942 gfx1201; do
    n=$(echo "$f" | tr '/' '_').$t
    for side in old new; do
      mkdir -p "$out/$side"
      bin=$old; [ $side = new ] && bin=$new
      timeout 60 "$bin" sync --target $t --stats "$f" > "$out/$side/$n" 2>&1
      echo "rc=$?" >> "$out/$side/$n"
    done
  done
done
diff -r "$out/old" "$out/new"
status=$?
rm -rf "$out"
exit $status
