#!/usr/bin/env bash
# Diffs `check -v` of two smemsync builds on every example, file test and Triton corpus file,
# as given and after OLD's `sync`, for sm_80, sm_90 and gfx942: a change to the static proof
# meant to keep its answers (a speed-up) must print nothing. Usage:
#   scripts/diff-check.sh OLD_BINARY NEW_BINARY
#
# Compared: the verdict line, the proof's summary or the reason it declined (`-v`), any
# finding, and the exit code (not the interpreter's time per schedule). Interpretation runs one schedule and at most 2*10^6 steps (the
# interpreter is the same code in both builds; the bound only keeps the run short).
set -uo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 out=$(mktemp -d)
mkdir -p "$out/old" "$out/new" "$out/in"
. scripts/diff-lib.sh
per_schedule() { sed -E 's/[0-9.]+ (ms|s) per schedule/T per schedule/g'; }
files=$(ls examples/*.kir; find tests/filetests -name '*.kir' | sort; ls corpus/triton/*.ttgir)
for f in $files; do
  case $f in
    *gfx9*.ttgir) targets=gfx942 ;;
    *.ttgir) targets="sm_80 sm_90" ;;
    *) targets="sm_80 sm_90 gfx942" ;;
  esac
  for t in $targets; do
    n=$(echo "$f" | tr '/' '_').$t
    synced="$out/in/$n.kir"
    timeout 60 "$old" sync --target "$t" "$f" > "$synced" 2>/dev/null || rm -f "$synced"
    for input in "$f" "$synced"; do
      [ -s "$input" ] || continue
      tag=raw; [ "$input" = "$synced" ] && tag=synced
      both "$n.$tag" 120 per_schedule \
        check -v --schedules 1 --max-steps 2000000 --target "$t" "$input"
    done
  done
done
finish
