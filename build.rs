//! Link settings of the `smemsync` binary (the library is unaffected).
//!
//! On Linux with glibc the tool links as a position-dependent executable (`-no-pie`): a
//! position-independent one makes the dynamic loader apply about 6 000 relative relocations
//! (vtables, tables of string slices) at every start, a fixed cost of every run that is
//! about a tenth of a small example's `sync` (docs/performance.md, section "process").

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
