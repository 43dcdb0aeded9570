#!/usr/bin/env bash
# GPU validation of smemsync on an NVIDIA machine (run from the repository root):
#
#   bash scripts/gpu-validate.sh [OPTIONS]            # every kernel of examples/, benches/gpu/, tests/gpu/
#   bash scripts/gpu-validate.sh [OPTIONS] FILE...    # only these kernel files
#
# Options: --no-mutations (= SKIP_MUTATIONS=1), --no-timing (= SKIP_TIMING=1), --jobs N (= JOBS=N).
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
# Kernels are validated in parallel (JOBS at a time, each in its own session of this script);
# within a kernel the mutants are built in parallel (MUT_JOBS at a time), then run one by one.
# At most NVCC_JOBS nvcc processes run at once over the whole run (default: the CPU count).
# Timing runs last, one kernel at a time, once no other GPU work is left.
#
# Per-kernel lines: `// PARAMS: a=1 b=2` (scalar parameters for the validation run and the
# interpreter), `// BENCH: --param ... --grid ...` (harness arguments for the timed runs) and
# `// COMPARE: --rtol=R --atol=A` (float tolerance, for kernels whose GPU summation order
# differs from the interpreter's). Kernels with wgmma build for sm_90a.
#
# Environment: OUT (results folder; default ./gpu-results), SMEMSYNC (the binary), ARCH
# (default sm_90), SEED (default 1), TIME_RUNS (default 50), SKIP_MUTATIONS=1, SKIP_TIMING=1,
# RUN_TIMEOUT (seconds before a run counts as a deadlock, default 15), SAN_TIMEOUT (default
# 60), JOBS (kernels at once, default 12), MUT_JOBS (mutant builds at once per kernel, default
# 8), NVCC_JOBS, DEADLINE_S (default 540: seconds after the start past which no kernel,
# mutant or timing starts; those left are reported "skipped (time)"), KILL_GRACE_S (default
# 30: kernels still running DEADLINE_S + KILL_GRACE_S after the start are stopped and
# reported "stopped (time)").
# The tables are rewritten whenever a kernel finishes, so a run stopped early still reports.
# Writes $OUT/gpu-validation.md (the tables), $OUT/details.log and $OUT/nvcc-errors.log.
#
# Word splitting of $P, $BOUNDS, $B and $NVCC_FLAGS (argument lists) is intended throughout,
# and so is setting BUILD_NVLOG in the subshells that build in the background.
# shellcheck disable=SC2086,SC2030,SC2031
set -u

# ------------------------------------------------------------------ helpers (both modes)
now() { date +%s; }
elapsed() { echo $(( $(now) - GV_START )); }
past_deadline() { [ "$(elapsed)" -ge "$DEADLINE_S" ]; }

field() { grep -m1 "^// $2:" "$1" | sed "s|^// $2:||"; }
params_of() { local p kv; p=$(field "$1" PARAMS); for kv in $p; do printf -- '--param %s ' "$kv"; done; }
# The same values as smemsync's `--bounds a=1,b=2` (sync counts executed barriers with them;
# run needs them for symbolic dimensions).
bounds_of() { local p; p=$(field "$1" PARAMS | xargs | tr ' ' ','); [ -n "$p" ] && printf -- '--bounds %s' "$p"; }
name_of() { local n=${1%.kir}; echo "${n#./}"; }

# nvcc, holding one of NVCC_JOBS slots (lock files under $WORK) so that parallel kernels and
# mutant builds do not crowd the CPUs out; plain nvcc when flock is missing.
nvcc_slot() {
  if [ "${NVCC_JOBS:-0}" -lt 1 ] || ! command -v flock >/dev/null 2>&1; then
    nvcc "$@"; return
  fi
  local i rc start=$(( RANDOM % NVCC_JOBS ))
  while :; do
    for (( i = 0; i < NVCC_JOBS; i++ )); do
      flock -n -E 75 "$WORK/nvcc.slot.$(( (start + i) % NVCC_JOBS ))" nvcc "$@"; rc=$?
      [ $rc != 75 ] && return $rc
    done
    sleep 0.2
  done
}

# build SRC.kir DEST_BASE [emit flags...] -> DEST_BASE.cu and DEST_BASE (binary); 0 on success.
# nvcc errors go to $BUILD_NVLOG (the kernel's nvcc log, or a mutant's own).
build() {
  local src=$1 dst=$2; shift 2
  if ! "$BIN" emit --format cuda --target "$ARCH" "$@" "$src" -o "$dst.cu" 2>"$dst.emit.err"; then
    return 10
  fi
  # wgmma exists only on the architecture-specific sm_90a (HOPPER.md: the -gencode form).
  local arch=(-arch="$ARCH")
  if [ "$ARCH" = sm_90 ] && grep -q 'wgmma\.' "$dst.cu"; then arch=(-gencode=arch=compute_90a,code=sm_90a); fi
  if ! nvcc_slot "${arch[@]}" $NVCC_FLAGS -o "$dst" "$dst.cu" 2>"$dst.nvcc.err"; then
    { echo "== nvcc: $dst.cu"; cat "$dst.nvcc.err"; } >>"$BUILD_NVLOG"
    return 11
  fi
  return 0
}

# ================================================================== one kernel
# `gpu-validate.sh --kernel-job DIR FILE`, started by the main mode below with the settings in
# the environment; stdout and stderr are the kernel's details log. Writes into DIR:
#   row.md (results row), mut.md (mutation row; mut.partial while it runs), nvcc.log,
#   nosync / naive (the timing builds, for the sequential timing phase), naive.status.
kernel_job() {
  local d=$1 f=$2
  cd "$ROOT" || exit 2
  echo $$ >"$d/pid"
  BUILD_NVLOG=$d/nvcc.log; : >"$BUILD_NVLOG"
  local name P BOUNDS CMP placed src stats rc msg rrc result ref rc_h sc_h nsync B
  name=$(name_of "$f")
  P=$(params_of "$f")
  BOUNDS=$(bounds_of "$f")
  # `// COMPARE: --rtol=R --atol=A`: the kernel's float tolerance, where the GPU's summation
  # order cannot match the interpreter's bit for bit (the file says why).
  CMP=$(field "$f" COMPARE)
  echo ""
  echo "=== $f (params: ${P:-none})"

  # racecheck/synccheck: prints the hazard/error count, or "fail(rc)"
  sanitize() {
    local tool=$1 exe=$2; shift 2
    local out=$d/san.txt dir=$d/san.out n rc
    rm -rf "$dir"; mkdir -p "$dir"
    timeout "${SAN_TIMEOUT:-60}" compute-sanitizer --tool "$tool" --print-limit 20 "$exe" "$dir" "$@" >"$out" 2>&1
    rc=$?
    cat "$out" >&2
    n=$(grep -o 'RACECHECK SUMMARY: [0-9]* hazard' "$out" | grep -o '[0-9]*' | head -1)
    [ -z "$n" ] && n=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$out" | grep -o '[0-9]*' | head -1)
    if [ $rc = 124 ]; then echo "timeout"; elif [ -z "$n" ]; then echo "fail(rc=$rc)"; else echo "$n"; fi
  }
  run_kernel() { # exe outdir args... ; returns rc (124 on timeout: a deadlock)
    local exe=$1 dir=$2; shift 2
    rm -rf "$dir"; mkdir -p "$dir"
    timeout "${RUN_TIMEOUT:-15}" "$exe" "$dir" --seed "$SEED" "$@" 2>&1
  }

  placed="no syncs inserted (placer missing)"
  src=$f
  if [ "$HAS_SYNC" = 1 ]; then
    if "$BIN" sync --target "$ARCH" $BOUNDS "$f" >"$d/synced.kir" 2>"$d/sync.err"; then
      src=$d/synced.kir; placed="placed"
      # `--stats` appends `// stats: ...` comment lines after each kernel.
      stats=$("$BIN" sync --target "$ARCH" $BOUNDS --stats "$f" 2>&1 | grep '^// stats:' | sed 's|^// stats: ||' | head -2 | tr '\n' ' ' | tr '|' '/')
      [ -n "$stats" ] && placed="placed: $stats"
    else
      placed="sync FAILED, running the file as written: $(grep -m1 '^error' "$d/sync.err" | tr '|' '/')"
      cat "$d/sync.err"
    fi
  fi
  echo "$src" >"$d/src"
  build "$src" "$d/k"; rc=$?
  if [ $rc = 10 ]; then
    msg="$(grep -o 'error\[E[0-9]*\]' "$d/k.emit.err" | sort | uniq -c | awk '{printf "%s x %s, ", $1, $2}')first: $(grep -m1 '^error' "$d/k.emit.err" | sed 's/^error\[E[0-9]*\]: //' | tr '|' '/')"
    cat "$d/k.emit.err"
    echo "| $name | $placed | not emitted: $msg | | | |" >"$d/row.md"
    return 0
  elif [ $rc = 11 ]; then
    echo "| $name | $placed | nvcc FAILED (see nvcc-errors.log) | | | |" >"$d/row.md"
    return 0
  fi

  # The timing builds (no syncs; the naive placer's), in the background: they are timed after
  # every kernel is done.
  B=$(field "$f" BENCH)
  local bench_pid="" bench_jobs=0
  if [ -n "$B" ] && [ "${SKIP_TIMING:-0}" != 1 ]; then
    (
      BUILD_NVLOG=$d/bench.nvlog; : >"$BUILD_NVLOG"
      build "$src" "$d/nosync" --strip-syncs
      if [ "$HAS_NAIVE" = 1 ]; then
        if ! "$BIN" sync --target "$ARCH" $BOUNDS --strategy naive "$f" >"$d/naive.kir" 2>"$d/naive.err"; then
          echo "naive placement failed" >"$d/naive.status"
        elif ! build "$d/naive.kir" "$d/naive"; then
          echo "naive build failed" >"$d/naive.status"
        fi
      fi
    ) &
    bench_pid=$!; bench_jobs=1
  fi

  # Run and compare.
  run_kernel "$d/k" "$d/gpu" $P; rrc=$?
  result="ran"
  [ $rrc != 0 ] && result="run FAILED rc=$rrc"
  ref=""
  if [ $rrc = 0 ] && [ "$HAS_RUN" = 1 ]; then
    if "$BIN" run "$src" --target "$ARCH" --seed "$SEED" --out "$d/interp" $BOUNDS 2>&1; then
      result=$(python3 scripts/compare-outputs.py "$d/gpu" "$d/interp" $CMP 2>&1 | tail -1)
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
  echo "| $name | $placed | $result | $rc_h | $sc_h | ${nsync:-?} |" >"$d/row.md"

  # Mutation test: make the mutants, build them in parallel, then run them one by one.
  if [ "${SKIP_MUTATIONS:-0}" != 1 ] && [ $rrc = 0 ]; then
    local mode caught=0 total=0 details="" n m mrc verdict h i
    local -a muts=() pids=()
    if [ "$HAS_WITHOUT" = 1 ]; then mode=placer; else mode=emitter; fi
    if past_deadline; then
      echo "| $name | $mode | skipped (time) | |" >"$d/mut.md"
    else
      for n in $(seq 0 63); do
        m=$d/mut$n
        if [ $mode = placer ]; then
          if ! "$BIN" sync --target "$ARCH" $BOUNDS --without "$n" "$f" >"$m.kir" 2>/dev/null; then
            if [ "$n" = 0 ]; then continue; else break; fi
          fi
          cmp -s "$m.kir" "$src" && break
        else
          [ "$n" -ge "${nsync:-0}" ] && break
        fi
        muts+=("$n")
      done
      echo "mutation $name ($mode): building ${#muts[@]} mutants"
      for (( i = 0; i < ${#muts[@]}; i++ )); do
        n=${muts[$i]}; m=$d/mut$n
        while [ "$(jobs -rp | wc -l)" -ge "$(( MUT_JOBS + bench_jobs ))" ]; do sleep 0.2; done
        (
          BUILD_NVLOG=$m.nvlog; : >"$BUILD_NVLOG"
          if [ $mode = placer ]; then build "$m.kir" "$m"; else build "$src" "$m" --drop-sync "$n"; fi
          echo $? >"$m.build.rc"
        ) &
        pids+=($!)
      done
      for i in "${pids[@]}"; do wait "$i"; done
      for n in "${muts[@]}"; do cat "$d/mut$n.nvlog" >>"$BUILD_NVLOG" 2>/dev/null; done
      for (( i = 0; i < ${#muts[@]}; i++ )); do
        n=${muts[$i]}; m=$d/mut$n
        if past_deadline; then
          details+=" #$n and later: skipped (time)"
          echo "mutation $name: deadline reached, #$n and later skipped"
          break
        fi
        if [ "$(cat "$m.build.rc" 2>/dev/null)" != 0 ]; then
          details+=" #$n:build-failed"; total=$((total+1))
          echo "| $name | $mode | $caught / $total |$details |" >"$d/mut.partial"
          continue
        fi
        total=$((total+1))
        run_kernel "$m" "$m.out" $P; mrc=$?
        if [ $mrc = 124 ]; then verdict="deadlock"; caught=$((caught+1))
        elif [ $mrc != 0 ]; then verdict="error(rc=$mrc)"; caught=$((caught+1))
        elif ! python3 scripts/compare-outputs.py "$m.out" "$ref" $CMP >/dev/null 2>&1; then verdict="result"; caught=$((caught+1))
        else
          h=$(sanitize racecheck "$m" $P --grid 1,1,1)
          # Racecheck counts only when the mutant has more hazards than the unmutated build.
          if [ "$h" = timeout ]; then verdict="hang under racecheck"; caught=$((caught+1))
          elif [[ "$h" =~ ^[0-9]+$ ]] && [[ "$rc_h" =~ ^[0-9]+$ ]] && [ "$h" -gt "$rc_h" ]; then verdict="racecheck($h)"; caught=$((caught+1))
          else verdict="NOT CAUGHT(racecheck $h)"; fi
        fi
        details+=" #$n:$verdict"
        echo "mutation $name #$n ($mode): $verdict"
        echo "| $name | $mode | $caught / $total |$details |" >"$d/mut.partial"
      done
      echo "| $name | $mode | $caught / $total |$details |" >"$d/mut.md"
    fi
  fi
  if [ -n "$bench_pid" ]; then
    wait "$bench_pid"
    cat "$d/naive.err" 2>/dev/null
    cat "$d/bench.nvlog" >>"$BUILD_NVLOG" 2>/dev/null
  fi
  return 0
}

if [ "${1:-}" = --kernel-job ]; then
  kernel_job "$2" "$3"
  exit 0
fi

# ================================================================== main mode
usage() { sed -n '2,/^set -u/p' "$0" | grep '^#' | grep -v 'shellcheck disable' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --no-mutations) SKIP_MUTATIONS=1; shift ;;
    --no-timing) SKIP_TIMING=1; shift ;;
    --jobs|-j) JOBS=${2:?--jobs needs a number}; shift 2 ;;
    --jobs=*) JOBS=${1#--jobs=}; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done

GV_START=$(now)
ROOT=$(pwd)
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
OUT=${OUT:-$ROOT/gpu-results}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/smemsync-gpu.XXXXXX)
SEED=${SEED:-1}
TIME_RUNS=${TIME_RUNS:-50}
ARCH=${ARCH:-sm_90}
NVCC_FLAGS=${NVCC_FLAGS:--O3 -lineinfo}
JOBS=${JOBS:-12}
MUT_JOBS=${MUT_JOBS:-8}
NVCC_JOBS=${NVCC_JOBS:-$(nproc 2>/dev/null || echo 8)}
DEADLINE_S=${DEADLINE_S:-540}
KILL_GRACE_S=${KILL_GRACE_S:-30}
SKIP_MUTATIONS=${SKIP_MUTATIONS:-0}
SKIP_TIMING=${SKIP_TIMING:-0}
REPORT=$OUT/gpu-validation.md
LOG=$OUT/details.log
NVLOG=$OUT/nvcc-errors.log
HEADLOG=$WORK/header.log
BUILD_NVLOG=/dev/null   # the kernel jobs set their own
: >"$LOG"; : >"$NVLOG"; : >"$HEADLOG"
for v in JOBS MUT_JOBS NVCC_JOBS DEADLINE_S KILL_GRACE_S TIME_RUNS; do
  if ! [[ "${!v}" =~ ^[0-9]+$ ]]; then echo "error: $v must be a whole number" >&2; exit 2; fi
done
[ "$JOBS" -lt 1 ] && JOBS=1
[ "$MUT_JOBS" -lt 1 ] && MUT_JOBS=1

log() { echo "$*" | tee -a "$HEADLOG"; }

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
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
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

# nvcc slots need flock with -E; without it nvcc runs unlimited.
if ! flock -n -E 75 "$WORK/nvcc.probe" true >/dev/null 2>&1; then NVCC_JOBS=0; fi

log "jobs: $JOBS kernels, $MUT_JOBS mutant builds per kernel, $NVCC_JOBS nvcc; deadline ${DEADLINE_S}s (+${KILL_GRACE_S}s grace)"

export ROOT WORK BIN ARCH SEED NVCC_FLAGS HAS_SYNC HAS_RUN HAS_NAIVE HAS_WITHOUT \
  SKIP_MUTATIONS SKIP_TIMING MUT_JOBS NVCC_JOBS DEADLINE_S GV_START
export RUN_TIMEOUT=${RUN_TIMEOUT:-15} SAN_TIMEOUT=${SAN_TIMEOUT:-60}

# ------------------------------------------------------------------ the kernels
if [ $# -gt 0 ]; then FILES=("$@"); else FILES=(examples/*.kir benches/gpu/*.kir tests/gpu/*.kir); fi
NK=${#FILES[@]}
declare -a DIRS STATE PIDS T0 T1 WHY
# STATE: todo, running, done, skipped (deadline before it started), stopped (killed at the deadline)
for (( i = 0; i < NK; i++ )); do
  DIRS[i]=$WORK/$(printf '%03d' "$i")-$(name_of "${FILES[i]}" | tr '/' '-')
  mkdir -p "${DIRS[i]}"
  STATE[i]=todo; PIDS[i]=""; T0[i]=0; T1[i]=0; WHY[i]=""
done

# ------------------------------------------------------------------ the report
assemble_logs() {
  local i
  {
    cat "$HEADLOG"
    for (( i = 0; i < NK; i++ )); do
      case ${STATE[i]} in todo|skipped) continue ;; esac
      cat "${DIRS[i]}/details.log" 2>/dev/null
      [ "${STATE[i]}" = stopped ] && echo "=== ${FILES[i]}: stopped (${WHY[i]}) after $(( T1[i] - T0[i] ))s"
      cat "${DIRS[i]}/time.log" 2>/dev/null
    done
  } >"$LOG"
  for (( i = 0; i < NK; i++ )); do cat "${DIRS[i]}/nvcc.log" 2>/dev/null; done >"$NVLOG"
}

results_row() {
  local i=$1 d=${DIRS[$1]} name
  name=$(name_of "${FILES[i]}")
  if [ -s "$d/row.md" ]; then cat "$d/row.md"; return; fi
  case ${STATE[i]} in
    todo) echo "| $name | not reached | | | | |" ;;
    running) echo "| $name | running | | | | |" ;;
    skipped) echo "| $name | skipped (time) | | | | |" ;;
    stopped) echo "| $name | stopped (${WHY[i]}) | | | | |" ;;
    done) echo "| $name | no result (the kernel's job ended early; see details.log) | | | | |" ;;
  esac
}

mutation_row() {
  local d=${DIRS[$1]}
  if [ -s "$d/mut.md" ]; then cat "$d/mut.md"
  elif [ -s "$d/mut.partial" ]; then
    case ${STATE[$1]} in
      stopped) sed "s/ |\$/ stopped (${WHY[$1]%%:*}) |/" "$d/mut.partial" ;;
      *) sed 's/ |$/ (running) |/' "$d/mut.partial" ;;
    esac
  fi
}

write_report() {
  assemble_logs
  local i
  {
  echo "# smemsync GPU validation"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- card: ${CARD:-unknown}; nvcc ${NVCCV:-?}; compute-sanitizer ${SANV:-?}; target $ARCH; seed $SEED"
  echo "- smemsync subcommands found: sync=$HAS_SYNC (naive=$HAS_NAIVE, without=$HAS_WITHOUT), run=$HAS_RUN"
  echo "- $(elapsed) s after the start; $JOBS kernels at a time; deadline ${DEADLINE_S} s"
  echo
  echo "## Results"
  echo
  echo "Racecheck and synccheck run on one block (\`--grid 1,1,1\`); counts are hazards / errors."
  echo
  echo "| kernel | placement | result vs interpreter | racecheck | synccheck | sync ops |"
  echo "|---|---|---|---|---|---|"
  for (( i = 0; i < NK; i++ )); do results_row "$i"; done
  echo
  echo "## Mutation test"
  echo
  echo "Each sync removed in turn (\`placer\`: \`sync --without N\`; \`emitter\`: \`emit --drop-sync N\` over every sync op of the kernel). Caught by: result mismatch, racecheck hazards, deadlock (RUN_TIMEOUT) or a launch error."
  echo
  echo "| kernel | mode | caught | per sync |"
  echo "|---|---|---|---|"
  for (( i = 0; i < NK; i++ )); do mutation_row "$i"; done
  echo
  echo "## Timing"
  echo
  echo "Median of $TIME_RUNS launches after 5 warm-ups, device events, milliseconds. The smemsync build is timed twice (before and after the others) to show the spread. Ratios are over the first smemsync time."
  echo
  echo "| kernel | harness args | smemsync (ms, twice) | naive (ms) | no syncs (ms) | naive / smemsync | no syncs / smemsync |"
  echo "|---|---|---|---|---|---|---|"
  for (( i = 0; i < NK; i++ )); do cat "${DIRS[i]}/time.md" 2>/dev/null; done
  if [ -s "$NVLOG" ]; then
    echo
    echo "## nvcc errors"
    echo
    echo '```'
    head -c 20000 "$NVLOG"
    echo '```'
  fi
  } >"$REPORT.tmp"
  mv -f "$REPORT.tmp" "$REPORT"
}

# ------------------------------------------------------------------ the kernel jobs
# Each kernel runs as `SELF --kernel-job DIR FILE` in its own session (setsid), so that the
# deadline can stop it with everything it started, `timeout`'s process groups included.
HAVE_SETSID=0; command -v setsid >/dev/null 2>&1 && HAVE_SETSID=1

start_kernel() {
  local i=$1 d=${DIRS[$1]}
  T0[i]=$(now)
  (
    if [ $HAVE_SETSID = 1 ]; then
      setsid bash "$SELF" --kernel-job "$d" "${FILES[i]}" >>"$d/details.log" 2>&1 </dev/null
    else
      bash "$SELF" --kernel-job "$d" "${FILES[i]}" >>"$d/details.log" 2>&1 </dev/null
    fi
    echo $? >"$d/exit"
  ) 2>>"$d/details.log" &
  PIDS[i]=$!
  STATE[i]=running
}

# Signal every process of the session SID (a kernel job is its leader).
signal_session() {
  local sig=$1 sid=$2 p s rest
  kill "-$sig" -- "-$sid" 2>/dev/null
  for p in /proc/[0-9]*/stat; do
    { read -r s <"$p"; } 2>/dev/null || continue
    rest=${s##*) }
    set -- $rest   # state ppid pgrp session ...
    [ "${4:-}" = "$sid" ] && kill "-$sig" "${p//[!0-9]/}" 2>/dev/null
  done
}

# Stop the kernel jobs still running (TERM, then KILL a second later) and mark them "stopped".
stop_running() { # WHY
  local why=$1 i sig sid
  for sig in TERM KILL; do
    for (( i = 0; i < NK; i++ )); do
      [ "${STATE[i]}" = running ] || continue
      sid=$(cat "${DIRS[i]}/pid" 2>/dev/null)
      if [ -n "$sid" ] && [ $HAVE_SETSID = 1 ]; then signal_session "$sig" "$sid"
      elif [ -n "$sid" ]; then kill "-$sig" "$sid" 2>/dev/null; fi
      kill "-$sig" "${PIDS[i]}" 2>/dev/null
    done
    [ $sig = TERM ] && sleep 1
  done
  for (( i = 0; i < NK; i++ )); do
    if [ "${STATE[i]}" = running ]; then
      STATE[i]=stopped; T1[i]=$(now); WHY[i]=$why
      echo "stopped $(name_of "${FILES[i]}") after $(( T1[i] - T0[i] ))s (at $(elapsed)s)"
    fi
  done
}
trap 'stop_running "interrupted"; write_report; exit 143' TERM INT HUP

write_report
echo "validating $NK kernels, $JOBS at a time (work folder $WORK)"
next=0; running=0; finished=0
while [ $next -lt $NK ] || [ $running -gt 0 ]; do
  if [ $next -lt $NK ] && past_deadline; then
    echo "deadline (${DEADLINE_S}s): $(( NK - next )) kernels not started, reported \"skipped (time)\""
    while [ $next -lt $NK ]; do STATE[next]=skipped; next=$((next+1)); done
    write_report
  fi
  while [ $running -lt "$JOBS" ] && [ $next -lt $NK ]; do
    start_kernel $next; next=$((next+1)); running=$((running+1))
  done
  sleep 0.5
  for (( i = 0; i < NK; i++ )); do
    if [ "${STATE[i]}" = running ] && [ -e "${DIRS[i]}/exit" ]; then
      wait "${PIDS[i]}" 2>/dev/null
      STATE[i]="done"; T1[i]=$(now); running=$((running-1)); finished=$((finished+1))
      echo "[$finished/$NK] $(name_of "${FILES[i]}") ($(( T1[i] - T0[i] ))s, at $(elapsed)s): $(cut -d'|' -f4 "${DIRS[i]}/row.md" 2>/dev/null | head -c 100)"
      write_report
    fi
  done
  if [ $running -gt 0 ] && [ "$(elapsed)" -ge $(( DEADLINE_S + KILL_GRACE_S )) ]; then
    stop_running "time: still running ${KILL_GRACE_S}s after the deadline"; running=0
    write_report
  fi
done

# ------------------------------------------------------------------ timing, one kernel at a time
time_of() { # exe logfile args... -> median ms; the timeout keeps within the deadline's grace
  local exe=$1 tlog=$2; shift 2
  local line lim
  lim=$(( DEADLINE_S + KILL_GRACE_S - $(elapsed) ))
  [ $lim -gt 300 ] && lim=300
  [ $lim -lt 1 ] && lim=1
  line=$(timeout "$lim" "$exe" "$WORK/tdir" --time "$TIME_RUNS" "$@" 2>>"$tlog" | grep '^TIME')
  echo "$line" >>"$tlog"
  echo "$line" | sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p'
}
ratio() { python3 -c "import sys; a,b=sys.argv[1],sys.argv[2]; print(f'{float(a)/float(b):.3f}')" "$1" "$2" 2>/dev/null || echo "n/a"; }

if [ "$SKIP_TIMING" != 1 ]; then
  for (( i = 0; i < NK; i++ )); do
    f=${FILES[i]}; d=${DIRS[i]}
    B=$(field "$f" BENCH)
    [ -z "$B" ] && continue
    name=$(name_of "$f")
    # Not emitted or not built: the results table says why.
    [ "${STATE[i]}" = "done" ] && [ ! -x "$d/k" ] && continue
    if [ "${STATE[i]}" != "done" ] || past_deadline; then
      echo "| $name | \`$B\` | skipped (time) | | | | |" >"$d/time.md"
      continue
    fi
    echo "timing $name"
    tlog=$d/time.log
    echo "=== timing $f" >"$tlog"
    naive_t="n/a (no --strategy naive)"
    if [ $HAS_NAIVE = 1 ]; then
      if [ -x "$d/naive" ]; then naive_t=$(time_of "$d/naive" "$tlog" $B)
      else naive_t="n/a ($(cat "$d/naive.status" 2>/dev/null || echo "naive build missing"))"; fi
    fi
    t1=$(time_of "$d/k" "$tlog" $B)
    if [ -x "$d/nosync" ]; then nos=$(time_of "$d/nosync" "$tlog" $B); else nos="n/a (build failed)"; fi
    t2=$(time_of "$d/k" "$tlog" $B)
    r_naive=$(ratio "$naive_t" "$t1"); r_nos=$(ratio "$nos" "$t1")
    echo "| $name | \`$B\` | $t1 / $t2 | $naive_t | $nos | $r_naive | $r_nos |" >"$d/time.md"
    write_report
  done
fi

write_report
echo "done in $(elapsed)s"
cat "$REPORT"
