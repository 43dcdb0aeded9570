//! smemsync: automatic, minimal and provably correct GPU shared-memory synchronization.
//!
//! Data flow (see DESIGN in `docs/`): text ──[`reader`]──▶ [`ir::Kernel`] ──[`verify`]──▶
//! analyses ──▶ placement (a sorted plan of edits) ──▶ apply ──▶ independent checker ──▶
//! [`emit`]. Every stage is a function with a documented contract; the CLI is a thin shell.

pub mod analysis;
pub mod bench_kernels;
pub mod check;
pub mod diag;
pub mod emit;
pub mod r#gen;
pub mod ir;
pub mod oracles;
pub mod reader;
pub mod sync;
pub mod target;
pub mod transform;
pub mod verify;

pub use diag::{Diagnostic, Span};
pub use ir::Kernel;
