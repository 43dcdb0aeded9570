# Shared by scripts/diff-check.sh and scripts/diff-sync-stats.sh (sourced, not run): each
# runs one command with two smemsync builds and diffs what they print.
# The caller sets `old`, `new` and `out` (a scratch folder with `old/` and `new/`).

# both NAME LIMIT FILTER ARGS...: runs `BIN ARGS` for BIN = $old and $new (at most LIMIT
# seconds each), stdout and stderr through the command FILTER into $out/{old,new}/NAME,
# followed by the exit code.
both() {
  local name=$1 limit=$2 filter=$3 side bin
  shift 3
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    timeout "$limit" "$bin" "$@" 2>&1 | $filter > "$out/$side/$name"
    echo "rc=${PIPESTATUS[0]}" >> "$out/$side/$name"
  done
}

# finish: prints the differences, removes the scratch folder, exits 0 when there are none.
finish() {
  diff -r "$out/old" "$out/new"
  local status=$?
  rm -rf "$out"
  exit $status
}
