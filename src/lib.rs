//! smemsync: automatic, minimal and provably correct GPU shared-memory synchronization.
//!
//! smemsync reads a GPU kernel, finds every shared-memory hazard, inserts the fewest and
//! cheapest synchronization operations that remove them on the chosen target, proves the result
//! race-free with an independent checker, and writes the kernel back out as text, MLIR or CUDA
//! C++. This page is the public API, a small facade over the pipeline:
//!
//! | step | function | result |
//! |---|---|---|
//! | read a kernel file (`.kir` text or smemsync's MLIR subset) | [`read`], [`read_mlir`] | [`Program`] |
//! | check it against a target's limits and ops | [`verify`] | `()` |
//! | insert the syncs | [`synchronize`] with [`SyncOptions`] | [`Synchronized`] |
//! | prove or refute race freedom | [`check`] with [`CheckOptions`] | [`Verdict`] per kernel, with a [`Witness`] for a race |
//! | execute on the interpreter | [`run`] with [`RunOptions`] | [`Outputs`] per kernel |
//! | write text, MLIR or CUDA C++ | [`emit`] with [`Format`] | `String` |
//!
//! Every failure is an [`Error`]: the [`Diagnostic`]s (code, message, labelled spans, notes,
//! help) with the source they point into, so [`Error::render`] prints them as the CLI does and
//! [`Error::kind`] says whose fault it is (bad input, a finding, or a bug in smemsync).
//! Findings that are the product's answer — a race, a deadlock — are results, not errors:
//! [`check`] returns them in its [`Verdict`]s.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Each thread stores its element, then reads the mirrored one: a read-after-write hazard
//! // between different threads.
//! let program = smemsync::read(
//!     "kernel @reverse(%in: global f32[128], %out: global f32[128]) block(128) {
//!        shared @s : f32[128]
//!        %t = tid.x
//!        %x = gload %in[%t]
//!        store @s[%t], %x
//!        %r = sub 127, %t
//!        %y = load @s[%r]
//!        gstore %out[%t], %y
//!      }",
//! )?;
//! let target = smemsync::Target::new("gfx942")?;
//! let before = smemsync::check(&program, &smemsync::CheckOptions::new(Some(target.clone())))?;
//! assert!(before[0].witness().is_some());
//!
//! let synced = smemsync::synchronize(&program, &smemsync::SyncOptions::new(target.clone()))?;
//! let report = &synced.kernels[0];
//! assert_eq!(report.inserted.len(), 1); // one barrier between the store and the load
//! assert_eq!(report.inserted[0].kind, smemsync::SyncKind::Barrier);
//!
//! let after = smemsync::check(&synced.program, &smemsync::CheckOptions::new(Some(target.clone())))?;
//! assert!(after.iter().all(|v| v.is_race_free()));
//! let mlir = smemsync::emit(&synced.program, smemsync::Format::Mlir, &target)?;
//! assert!(mlir.contains("amdgpu.lds_barrier"));
//! println!("{}", synced.text()); // the kernel with its barrier, in the text form
//! # Ok(())
//! # }
//! ```
//!
//! Cargo features: `cli` (default) builds the `smemsync` command-line tool; a library user
//! writes `default-features = false` and compiles neither it nor `clap`. `internals` exposes
//! the modules behind the facade, `#[doc(hidden)]` and without stability promise, to the CLI,
//! the tests and the fuzz targets. `docs/library.md` is the guide to this API (and to the
//! Python package built on it); README.md and `docs/` describe the pipeline behind it.
#![warn(missing_docs)]
#![cfg_attr(
    not(feature = "internals"),
    allow(
        dead_code,
        unused_imports,
        reason = "without `internals` only the facade is public: code and re-exports that only the CLI and the tests reach are unused"
    )
)]

mod api;

pub use api::*;

/// Declares the modules behind the facade: public but hidden with the `internals` feature,
/// private to the crate without it.
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

internal_modules!(
    analysis, check, diag, emit, ir, reader, sync, target, transform, verify
);

// Why every sync exists: the report of `smemsync explain` (text, JSON, SVG, HTML).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod explain;
// Real-size kernels for benchmarks (the CLI's `bench`, tests).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod bench_kernels;
// Random kernel generators (tests, fuzz targets).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod r#gen;
// Oracles shared by the tests and the fuzz targets.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod oracles;

/// The kernel IR (for the CLI and the tests, which build kernels by hand).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use ir::Kernel;
