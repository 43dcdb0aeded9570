#!/usr/bin/env bash
# Runs every smemsync test. Installs what the tests need when it is missing: the LLVM/MLIR 22
# tools (mlir-opt-22, llc-22, FileCheck-22) that the MLIR emission tests and the file tests
# call, chromium for the headless-browser test of `smemsync explain --html` (tests/explain.rs),
# and python3-venv for the Python package's tests (pytest and maturin come from PyPI into a
# venv under target/).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for tool in mlir-opt-22 mlir-translate-22 llc-22 FileCheck-22; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
packages=()
[ ${#need[@]} -gt 0 ] && packages+=(mlir-22-tools llvm-22 llvm-22-tools)
command -v chromium >/dev/null 2>&1 || { need+=(chromium); packages+=(chromium); }
python3 -c 'import ensurepip' >/dev/null 2>&1 || packages+=(python3-venv)
if [ ${#packages[@]} -gt 0 ]; then
  echo "installing ${packages[*]} (missing tools: ${need[*]:-none})"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${packages[@]}" >/dev/null
fi
cargo fmt --all -- --check
# Clippy also holds the code to `rust-version` in Cargo.toml (the MSRV): its incompatible_msrv
# lint rejects standard-library items stabilized after it.
cargo clippy --all-targets --quiet -- -D warnings
cargo clippy --all-targets --no-default-features --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
cargo test --quiet

# The library as a dependency: tests/downstream uses only the public API with
# default-features = false; clap must not be in its tree. It and the Python binding share one
# target directory, so the facade-only build of smemsync is compiled once for both.
export CARGO_TARGET_DIR="$PWD/target/facade"
for crate in tests/downstream python; do
  cargo fmt --manifest-path "$crate/Cargo.toml" -- --check
  cargo clippy --manifest-path "$crate/Cargo.toml" --all-targets --quiet -- -D warnings
done
if cargo tree --manifest-path tests/downstream/Cargo.toml -e normal | grep -q clap; then
  echo "error: a library user compiles clap" >&2
  exit 1
fi
cargo run --quiet --manifest-path tests/downstream/Cargo.toml -- gfx942 \
  examples/transpose.kir examples/reduction-tree.kir

# The Python package: `pip install .` (maturin, debug profile: faster to build than release,
# same code) into a venv, then its pytest suite.
venv=target/python-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.9.4,<2" pytest
PATH="$PWD/$venv/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev" \
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps .
"$venv/bin/python" -m pytest -q python/tests
