//! Emitters: the canonical text form (and, as they land, MLIR and CUDA C++). Each writes
//! through `fmt::Write` with stable, collision-free names.

pub mod cuda;
pub mod mlir;
pub mod text;
