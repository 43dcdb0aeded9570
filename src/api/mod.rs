//! The public API: a small facade over the pipeline (read → verify → synchronize → check →
//! run → emit) with typed results and one error type. The crate documentation (src/lib.rs)
//! is its overview; docs/library.md its guide.
//!
//! Invariants: the facade owns its result types (no IR ids or internal types leak, except
//! [`Diagnostic`] and its parts, which are the product's messages), never panics on input,
//! and reports every failure as an [`Error`]. Complexity: that of the stages it calls.

mod error;
mod program;
mod synchronized;
mod verdict;

pub use crate::diag::{DiagKind, Diagnostic, Label, Severity, Span};
pub use error::{Error, ErrorKind, Location};
pub use program::{Format, Program, Target, emit, read, read_mlir, read_ttgir, verify};
pub use synchronized::{
    HazardReport, InsertedSync, KernelReport, Strategy, SyncKind, SyncOptions, SyncStats,
    Synchronized, synchronize,
};
pub use verdict::{
    Access, AccessKind, Buffer, CheckOptions, Outcome, Outputs, RunOptions, Verdict, Witness,
    check, run,
};
