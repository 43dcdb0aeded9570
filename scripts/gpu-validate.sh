#!/usr/bin/env bash
# GPU validation of smemsync on an NVIDIA machine (run from the repository root):
#
#   bash scripts/gpu-validate.sh            # every kernel of examples/, benches/gpu/, tests/gpu/
#   bash scripts/gpu-validate.sh FILE...    # only these kernel files
#
# For each kernel: place syncs (`smemsync sync --target sm_90`), emit CUDA, build with
# `nvcc -arch=sm_90`, run, compare with the interpreter (`smemsync run --seed S --out DIR`):
# bit-exact for integer buffers, relative tolerance 1e-5 for floats. Then
# `compute-sanitizer --tool racecheck` (0 hazards wanted) and `--tool synccheck` on one block,
# the mutation test (each inserted sync removed in turn must be caught by racecheck, a result
# mismatch or a deadlock, else it is reported "not caught"), and, for kernels with a
# `// BENCH:` line, timing of three builds: smemsync's syncs, the naive placer's, no syncs.
# Steps whose smemsync subcommand is missing are skipped and say so.
#
# Per-kernel lines: `// PARAMS: a=1 b=2` (scalar parameters for the validation run and the
# interpreter) and `// BENCH: --param ... --grid ...` (harness arguments for the timed runs).
#
# Environment: OUT (results folder; default ./gpu-results), SMEMSYNC (the binary),
# SEED (default 1), TIME_RUNS (default 50), SKIP_MUTATIONS=1, SKIP_TIMING=1, RUN_TIMEOUT
# (seconds before a run counts as a deadlock, default 15), SAN_TIMEOUT (default 60).
# The tables are rewritten after every kernel, so a run stopped early still reports.
# Writes $OUT/gpu-validation.md (the tables), $OUT/details.log and $OUT/nvcc-errors.log.
set -u
ROOT=$(pwd)
OUT=${OUT:-$ROOT/gpu-results}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/smemsync-gpu.XXXXXX)
SEED=${SEED:-1}
TIME_RUNS=${TIME_RUNS:-50}
ARCH=${ARCH:-sm_90}
NVCC_FLAGS=${NVCC_FLAGS:--O3 -lineinfo}
REPORT=$OUT/gpu-validation.md
LOG=$OUT/details.log
NVLOG=$OUT/nvcc-errors.log
: >"$LOG"; : >"$NVLOG"

log() { echo "$*" | tee -a "$LOG"; }

# ------------------------------------------------------------------ the smemsync binary
BIN=${SMEMSYNC:-}
if [ -z "$BIN" ]; then
  for c in "$ROOT/.gpu-bin/smemsync" "$ROOT/target/release/smemsync" "$ROOT/target/debug/smemsync"; do
    if [ -x "$c" ]; then BIN=$c; break; fi
  done
fi
if [ -z "$BIN" ] && command -v cargo >/dev/null; then
  cargo build --release --quiet && BIN=$ROOT/target/release/smemsync
fi
if [ -z "$BIN" ] || ! "$BIN" --version >/dev/null 2>&1; then
  echo "error: no runnable smemsync binary (set SMEMSYNC, or carry .gpu-bin/smemsync)" >&2
  exit 2
fi
has() { "$BIN" "$1" --help >/dev/null 2>&1; }
HAS_SYNC=0; has sync && HAS_SYNC=1
HAS_RUN=0; has run && HAS_RUN=1
HAS_NAIVE=0
if [ $HAS_SYNC = 1 ] && "$BIN" sync --help 2>&1 | grep -q -- '--strategy'; then HAS_NAIVE=1; fi
HAS_WITHOUT=0
if [ $HAS_SYNC = 1 ] && "$BIN" sync --help 2>&1 | grep -q -- '--without'; then HAS_WITHOUT=1; fi

CARD=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
NVCCV=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)
SANV=$(compute-sanitizer --version 2>/dev/null | grep -o 'Version [0-9.]*' | head -1)
log "card: ${CARD:-unknown}; nvcc ${NVCCV:-missing}; compute-sanitizer ${SANV:-missing}; smemsync $BIN"
log "subcommands: sync=$HAS_SYNC (naive=$HAS_NAIVE, without=$HAS_WITHOUT) run=$HAS_RUN"

# ------------------------------------------------------------------ helpers
field() { grep -m1 "^// $2:" "$1" | sed "s|^// $2:||"; }
params_of() { local p; p=$(field "$1" PARAMS); for kv in $p; do printf -- '--param %s ' "$kv"; done; }
# The same values as smemsync's `--bounds a=1,b=2` (sync counts executed barriers with them;
# run needs them for symbolic dimensions).
bounds_of() { local p; p=$(field "$1" PARAMS | xargs | tr ' ' ','); [ -n "$p" ] && printf -- '--bounds %s' "$p"; }

# build SRC.kir DEST_BASE [emit flags...] -> DEST_BASE.cu and DEST_BASE (binary); 0 on success
build() {
  local src=$1 dst=$2; shift 2
  if ! "$BIN" emit --format cuda --target "$ARCH" "$@" "$src" -o "$dst.cu" 2>"$dst.emit.err"; then
    return 10
  fi
  if ! nvcc -arch="$ARCH" $NVCC_FLAGS -o "$dst" "$dst.cu" 2>"$dst.nvcc.err"; then
    { echo "== nvcc: $dst.cu"; cat "$dst.nvcc.err"; } >>"$NVLOG"
    return 11
  fi
  return 0
}

# racecheck/synccheck: prints the hazard/error count, or "fail(rc)"
sanitize() {
  local tool=$1 exe=$2; shift 2
  local out=$WORK/san.$$.txt dir=$WORK/san.out
  rm -rf "$dir"; mkdir -p "$dir"
  timeout "${SAN_TIMEOUT:-60}" compute-sanitizer --tool "$tool" --print-limit 20 "$exe" "$dir" "$@" >"$out" 2>&1
  local rc=$?
  cat "$out" >>"$LOG"
  local n
  n=$(grep -o 'RACECHECK SUMMARY: [0-9]* hazard' "$out" | grep -o '[0-9]*' | head -1)
  [ -z "$n" ] && n=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$out" | grep -o '[0-9]*' | head -1)
  if [ $rc = 124 ]; then echo "timeout"; elif [ -z "$n" ]; then echo "fail(rc=$rc)"; else echo "$n"; fi
}

run_kernel() { # exe outdir args... ; returns rc (124 on timeout: a deadlock)
  local exe=$1 dir=$2; shift 2
  rm -rf "$dir"; mkdir -p "$dir"
  timeout "${RUN_TIMEOUT:-15}" "$exe" "$dir" --seed "$SEED" "$@" >>"$LOG" 2>&1
}

time_of() { # exe args... -> median ms
  local exe=$1; shift
  local line
  line=$(timeout 300 "$exe" "$WORK/tdir" --time "$TIME_RUNS" "$@" 2>>"$LOG" | grep '^TIME')
  echo "$line" >>"$LOG"
  echo "$line" | sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p'
}

# ------------------------------------------------------------------ the report
write_report() {
{
  echo "# smemsync GPU validation"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- card: ${CARD:-unknown}; nvcc ${NVCCV:-?}; compute-sanitizer ${SANV:-?}; target $ARCH; seed $SEED"
  echo "- smemsync subcommands found: sync=$HAS_SYNC (naive=$HAS_NAIVE, without=$HAS_WITHOUT), run=$HAS_RUN"
  echo
  echo "## Results"
  echo
  echo "Racecheck and synccheck run on one block (\`--grid 1,1,1\`); counts are hazards / errors."
  echo
  echo "| kernel | placement | result vs interpreter | racecheck | synccheck | sync ops |"
  echo "|---|---|---|---|---|---|"
  for r in "${ROWS[@]}"; do echo "$r"; done
  echo
  echo "## Mutation test"
  echo
  echo "Each sync removed in turn (\`placer\`: \`sync --without N\`; \`emitter\`: \`emit --drop-sync N\` over every sync op of the kernel). Caught by: result mismatch, racecheck hazards, deadlock (RUN_TIMEOUT) or a launch error."
  echo
  echo "| kernel | mode | caught | per sync |"
  echo "|---|---|---|---|"
  for r in "${MUTROWS[@]}"; do echo "$r"; done
  echo
  echo "## Timing"
  echo
  echo "Median of $TIME_RUNS launches after 5 warm-ups, device events, milliseconds. The smemsync build is timed twice (before and after the others) to show the spread. Ratios are over the first smemsync time."
  echo
  echo "| kernel | harness args | smemsync (ms, twice) | naive (ms) | no syncs (ms) | naive / smemsync | no syncs / smemsync |"
  echo "|---|---|---|---|---|---|---|"
  for r in "${TIMEROWS[@]}"; do echo "$r"; done
  if [ -s "$NVLOG" ]; then
    echo
    echo "## nvcc errors"
    echo
    echo '```'
    head -c 20000 "$NVLOG"
    echo '```'
  fi
} >"$REPORT"
}

# ------------------------------------------------------------------ the kernels
if [ $# -gt 0 ]; then FILES=("$@"); else FILES=(examples/*.kir benches/gpu/*.kir tests/gpu/*.kir); fi

declare -a ROWS MUTROWS TIMEROWS NOTES
for f in "${FILES[@]}"; do
  name=${f%.kir}; name=${name#./}
  d=$WORK/$(echo "$name" | tr '/' '-'); mkdir -p "$d"
  P=$(params_of "$f")
  BOUNDS=$(bounds_of "$f")
  log ""
  log "=== $f (params: ${P:-none})"
  placed="no syncs inserted (placer missing)"
  src=$f
  if [ $HAS_SYNC = 1 ]; then
    if "$BIN" sync --target "$ARCH" $BOUNDS "$f" >"$d/synced.kir" 2>"$d/sync.err"; then
      src=$d/synced.kir; placed="placed"
      # `--stats` appends `// stats: ...` comment lines after each kernel.
      stats=$("$BIN" sync --target "$ARCH" $BOUNDS --stats "$f" 2>&1 | grep '^// stats:' | sed 's|^// stats: ||' | head -2 | tr '\n' ' ' | tr '|' '/')
      [ -n "$stats" ] && placed="placed: $stats"
    else
      placed="sync FAILED, running the file as written: $(grep -m1 '^error' "$d/sync.err" | tr '|' '/')"
      cat "$d/sync.err" >>"$LOG"
    fi
  fi
  build "$src" "$d/k"; rc=$?
  if [ $rc = 10 ]; then
    msg="$(grep -o 'error\[E[0-9]*\]' "$d/k.emit.err" | sort | uniq -c | awk '{printf "%s x %s, ", $1, $2}')first: $(grep -m1 '^error' "$d/k.emit.err" | sed 's/^error\[E[0-9]*\]: //' | tr '|' '/')"
    cat "$d/k.emit.err" >>"$LOG"
    ROWS+=("| $name | $placed | not emitted: $msg | | | |")
    continue
  elif [ $rc = 11 ]; then
    ROWS+=("| $name | $placed | nvcc FAILED (see nvcc-errors.log) | | | |")
    continue
  fi
  # Run and compare.
  run_kernel "$d/k" "$d/gpu" $P; rrc=$?
  result="ran"
  [ $rrc != 0 ] && result="run FAILED rc=$rrc"
  ref=""
  if [ $rrc = 0 ] && [ $HAS_RUN = 1 ]; then
    if "$BIN" run "$src" --target "$ARCH" --seed "$SEED" --out "$d/interp" $BOUNDS >>"$LOG" 2>&1; then
      result=$(python3 scripts/compare-outputs.py "$d/gpu" "$d/interp" 2>&1 | tail -1)
      ref=$d/interp
    else
      result="interpreter failed (see details.log)"
    fi
  elif [ $rrc = 0 ]; then
    result="ran (interpreter missing: not compared)"
  fi
  if [ $rrc = 0 ] && [ "$(basename "$f")" = semantics.kir ]; then
    result="$result; $(python3 scripts/check-semantics.py "$d/gpu" "$SEED" 2>&1 | tail -1)"
  fi
  [ -z "$ref" ] && [ $rrc = 0 ] && ref=$d/gpu   # mutants compare against the synced GPU run
  rc_h=$(sanitize racecheck "$d/k" $P --grid 1,1,1)
  sc_h=$(sanitize synccheck "$d/k" $P --grid 1,1,1)
  nsync=$("$BIN" emit --format cuda --target "$ARCH" --count-syncs "$src" 2>/dev/null)
  ROWS+=("| $name | $placed | $result | $rc_h | $sc_h | ${nsync:-?} |")

  # Mutation test.
  if [ "${SKIP_MUTATIONS:-0}" != 1 ] && [ $rrc = 0 ]; then
    if [ $HAS_WITHOUT = 1 ]; then mode=placer; else mode=emitter; fi
    caught=0; total=0; details=""
    for n in $(seq 0 63); do
      m=$d/mut$n
      if [ $mode = placer ]; then
        "$BIN" sync --target "$ARCH" $BOUNDS --without "$n" "$f" >"$m.kir" 2>/dev/null || { [ $n = 0 ] && continue || break; }
        cmp -s "$m.kir" "$src" && break
        build "$m.kir" "$m" || { details+=" #$n:build-failed"; total=$((total+1)); continue; }
      else
        [ "$n" -ge "${nsync:-0}" ] && break
        build "$src" "$m" --drop-sync "$n" || { details+=" #$n:build-failed"; total=$((total+1)); continue; }
      fi
      total=$((total+1))
      run_kernel "$m" "$m.out" $P; mrc=$?
      if [ $mrc = 124 ]; then verdict="deadlock"; caught=$((caught+1))
      elif [ $mrc != 0 ]; then verdict="error(rc=$mrc)"; caught=$((caught+1))
      elif ! python3 scripts/compare-outputs.py "$m.out" "$ref" >/dev/null 2>&1; then verdict="result"; caught=$((caught+1))
      else
        h=$(sanitize racecheck "$m" $P --grid 1,1,1)
        # Racecheck counts only when the mutant has more hazards than the unmutated build.
        if [ "$h" = timeout ]; then verdict="hang under racecheck"; caught=$((caught+1))
        elif [[ "$h" =~ ^[0-9]+$ ]] && [[ "$rc_h" =~ ^[0-9]+$ ]] && [ "$h" -gt "$rc_h" ]; then verdict="racecheck($h)"; caught=$((caught+1))
        else verdict="NOT CAUGHT(racecheck $h)"; fi
      fi
      details+=" #$n:$verdict"
      log "mutation $name #$n ($mode): $verdict"
    done
    MUTROWS+=("| $name | $mode | $caught / $total |$details |")
  fi

  # Timing.
  B=$(field "$f" BENCH)
  if [ -n "$B" ] && [ "${SKIP_TIMING:-0}" != 1 ]; then
    build "$src" "$d/nosync" --strip-syncs || true
    naive_t="n/a (no --strategy naive)"
    if [ $HAS_NAIVE = 1 ] && "$BIN" sync --target "$ARCH" $BOUNDS --strategy naive "$f" >"$d/naive.kir" 2>>"$LOG" && build "$d/naive.kir" "$d/naive"; then
      naive_t=$(time_of "$d/naive" $B)
    fi
    t1=$(time_of "$d/k" $B)
    nos=$(time_of "$d/nosync" $B)
    t2=$(time_of "$d/k" $B)
    ratio() { python3 -c "import sys; a,b=sys.argv[1],sys.argv[2]; print(f'{float(a)/float(b):.3f}')" "$1" "$2" 2>/dev/null || echo "n/a"; }
    r_naive=$(ratio "$naive_t" "$t1"); r_nos=$(ratio "$nos" "$t1")
    TIMEROWS+=("| $name | \`$B\` | $t1 / $t2 | $naive_t | $nos | $r_naive | $r_nos |")
  fi
  write_report
done

write_report
cat "$REPORT"
