#!/usr/bin/env bash
# Runs every smemsync test. Installs what the tests need when it is missing: the LLVM/MLIR 22
# tools (mlir-opt-22, llc-22, FileCheck-22) that the MLIR emission tests and the file tests call.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for tool in mlir-opt-22 mlir-translate-22 llc-22 FileCheck-22; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing LLVM/MLIR 22 tools (missing: ${need[*]})"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    mlir-22-tools llvm-22 llvm-22-tools >/dev/null
fi
cargo fmt --all -- --check
# Clippy also holds the code to `rust-version` in Cargo.toml (the MSRV): its incompatible_msrv
# lint rejects standard-library items stabilized after it.
cargo clippy --all-targets --quiet -- -D warnings
cargo test --quiet
