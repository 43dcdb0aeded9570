#!/usr/bin/env bash
# Occupancy gain of `smemsync sync --plan-smem` on an NVIDIA GPU (run from the repository root):
#
#   bash scripts/gpu-occupancy.sh FILE.kir
#
# Builds the kernel twice for sm_90 — synchronized as written (`sync`) and with its shared
# memory planned first (`sync --plan-smem`) — and for each reports the blocks per
# multiprocessor the driver allows (cudaOccupancyMaxActiveBlocksPerMultiprocessor with the
# build's shared memory), the median time of TIME_RUNS launches with the file's `// BENCH:`
# arguments, racecheck on one block, and whether the results equal the interpreter's (the
# file's `// PARAMS:` values). Both builds run in the same invocation, so the time ratio is
# within one run. A build whose shared memory the driver refuses (over the card's per-block
# limit, e.g. 232448 bytes on sm_90) gets 0 blocks per multiprocessor, the driver's error and
# the harness's own launch error in its row, and is neither compared, checked nor timed.
# Environment: SMEMSYNC (the binary), OUT (default ./gpu-results), SEED
# (default 1), TIME_RUNS (default 50). Writes $OUT/occupancy.md.
# Word splitting of $P and $B (argument lists) is intended.
# shellcheck disable=SC2086
set -u
f=${1:?usage: gpu-occupancy.sh FILE.kir}
BIN=${SMEMSYNC:-target/release/smemsync}
case $BIN in /*) ;; *) BIN=$(pwd)/$BIN ;; esac
OUT=${OUT:-$(pwd)/gpu-results}; mkdir -p "$OUT"
SEED=${SEED:-1}; TIME_RUNS=${TIME_RUNS:-50}
W=$(mktemp -d /tmp/smemsync-occ.XXXXXX)
field() { grep -m1 "^// $2:" "$1" | sed "s|^// $2:||"; }
P=""; for kv in $(field "$f" PARAMS); do P="$P --param $kv"; done
BOUNDS=$(field "$f" PARAMS | xargs | tr ' ' ',')
B=$(field "$f" BENCH)
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)

# build NAME [sync flags...]: W/NAME (harness + occupancy probe)
build() {
  local n=$1; shift
  "$BIN" sync --target sm_90 ${BOUNDS:+--bounds $BOUNDS} "$@" "$f" >"$W/$n.kir" 2>"$W/$n.sync.err" || { cat "$W/$n.sync.err"; return 1; }
  if ! "$BIN" emit --format cuda --target sm_90 "$W/$n.kir" -o "$W/$n.cu" 2>"$W/$n.emit.err"; then
    cat "$W/$n.emit.err" >&2
    # E0701: more shared memory than a block may have. The row says so; the planned build's
    # probe asks the driver for the same bytes (ASK_BYTES), so the driver's answer shows too.
    grep -q 'E0701' "$W/$n.emit.err" && return 2
    return 1
  fi
  local kn threads dyn
  kn=$(grep -o '__global__ void __launch_bounds__([0-9]*) [A-Za-z0-9_]*' "$W/$n.cu" | awk '{print $4}')
  threads=$(grep -o '__launch_bounds__([0-9]*)' "$W/$n.cu" | grep -o '[0-9]*')
  dyn=$(grep -o 'cudaFuncAttributeMaxDynamicSharedMemorySize, [0-9]*' "$W/$n.cu" | grep -o '[0-9]*$')
  dyn=${dyn:-0}
  sed 's/^int main(int argc, char\*\* argv) {/static int ss_harness_main(int argc, char** argv) {/' "$W/$n.cu" >"$W/$n.occ.cu"
  cat >>"$W/$n.occ.cu" <<CU
int main(int argc, char** argv) {
  cudaFuncAttributes fa;
  if (cudaFuncGetAttributes(&fa, (const void*)$kn) != cudaSuccess) return 3;
  if (${ASK_BYTES:-0} > 0) {
    // What the driver says to a block of the unplanned build's shared memory.
    int optin = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    cudaError_t e = cudaFuncSetAttribute($kn, cudaFuncAttributeMaxDynamicSharedMemorySize, ${ASK_BYTES:-0});
    std::printf("DRIVER cudaFuncSetAttribute(MaxDynamicSharedMemorySize, ${ASK_BYTES:-0}): %s (%s); the device allows %d bytes per block\n",
                cudaGetErrorName(e), cudaGetErrorString(e), optin);
    (void)cudaGetLastError();
  }
  if ($dyn > 0) {
    cudaError_t e = cudaFuncSetAttribute($kn, cudaFuncAttributeMaxDynamicSharedMemorySize, $dyn);
    if (e != cudaSuccess) {
      // The driver refuses the build's shared memory: report it, then let the harness try
      // to launch anyway, so its own error (and exit status) shows too.
      int optin = 0;
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
      std::printf("OCCUPANCY blocks_per_sm=0 smem_bytes=%zu REFUSED cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): %s (%s); the device allows %d bytes per block\n",
                  fa.sharedSizeBytes + (size_t)$dyn, $dyn, cudaGetErrorName(e), cudaGetErrorString(e), optin);
      std::fflush(stdout);
      (void)cudaGetLastError();
      return ss_harness_main(argc, argv);
    }
  }
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, $kn, $threads, $dyn) != cudaSuccess) return 3;
  std::printf("OCCUPANCY blocks_per_sm=%d smem_bytes=%zu\n", blocks, fa.sharedSizeBytes + (size_t)$dyn);
  return ss_harness_main(argc, argv);
}
CU
  nvcc -arch=sm_90 -O3 -lineinfo -o "$W/$n" "$W/$n.occ.cu" 2>"$W/$n.nvcc.err" || { cat "$W/$n.nvcc.err"; return 1; }
}
row() {
  local n=$1 occ res rc t
  mkdir -p "$W/$n.out" "$W/$n.san" "$W/$n.t"
  "$W/$n" "$W/$n.out" --seed "$SEED" $P >"$W/$n.run.log" 2>"$W/$n.run.err"
  occ=$(sed -n 's/^OCCUPANCY //p' "$W/$n.run.log")
  case $occ in *REFUSED*)
    # Cannot launch: show the harness's own error; nothing to compare, check or time.
    echo "$n (harness): $(grep -m1 'CUDA error' "$W/$n.run.err")" >&2
    echo "$n|$occ|not run: $(grep -m1 'CUDA error' "$W/$n.run.err" | sed 's/|/\//g')|-|-"
    return ;;
  esac
  res=$(python3 scripts/compare-outputs.py "$W/$n.out" "$W/interp" 2>&1 | tail -1)
  rc=$(compute-sanitizer --tool racecheck "$W/$n" "$W/$n.san" --seed "$SEED" $P --grid 1,1,1 2>&1 | grep -o 'RACECHECK SUMMARY: [0-9]* hazard' | grep -o '[0-9]*')
  t=$("$W/$n" "$W/$n.t" --time "$TIME_RUNS" $B | sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p')
  echo "$n|$occ|$res|${rc:-?}|$t"
}
ASK_BYTES=0
build plain; rc_plain=$?
if [ $rc_plain = 2 ]; then
  ASK_BYTES=$(sed -n 's/.*needs \([0-9]*\) bytes of shared memory.*/\1/p' "$W/plain.emit.err" | head -1)
fi
[ $rc_plain = 1 ] && { echo "build failed"; exit 1; }
build planned --plan-smem || { echo "build failed"; exit 1; }
# The interpreter's reference: the kernel as synchronized without planning.
"$BIN" run --seed "$SEED" ${BOUNDS:+--bounds $BOUNDS} --out "$W/interp" "$W/plain.kir" >"$W/interp.log" 2>&1 \
  || { echo "interpreter failed:"; cat "$W/interp.log"; }
if [ $rc_plain = 2 ]; then
  a="plain|blocks_per_sm=0 smem_bytes=$ASK_BYTES refused: $(grep -m1 -o 'error\[E0701\].*' "$W/plain.emit.err")|not built|-|-"
else
  a=$(row plain)
fi
b=$(row planned)
ta=${a##*|}; tb=${b##*|}
ratio=$(python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.3f}')" "$ta" "$tb" 2>/dev/null || echo "n/a (a build did not run)")
{
  echo "# smemsync plan-smem occupancy: $f"
  echo
  echo "- card: ${CARD:-unknown}; $(date -u '+%Y-%m-%d %H:%M UTC'); bench args \`$B\`; $TIME_RUNS timed launches"
  echo
  echo "| build | occupancy | result vs interpreter | racecheck (1 block) | median ms |"
  echo "|---|---|---|---|---|"
  for r in "$a" "$b"; do echo "| ${r//|/ | } |"; done
  echo
  echo "unplanned / planned time: $ratio"
  grep -h '^DRIVER' "$W"/*.run.log 2>/dev/null | sed 's/^DRIVER /\nthe driver, asked for the unplanned build'"'"'s bytes: /'
} | tee "$OUT/occupancy.md"
# The planner's report and each build's run errors, for the record.
cp "$W/planned.sync.err" "$OUT/plan-smem-report.txt" 2>/dev/null
cat "$W"/*.run.err >"$OUT/run-errors.txt" 2>/dev/null
