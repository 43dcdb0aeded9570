//! Emitters: the canonical text form (and, as they land, MLIR and CUDA C++). Each writes
//! through `fmt::Write` with stable, collision-free names (made by the one name table,
//! [`names::NameTable`]); `explain` names ops, points and hazards as a reader of the source
//! sees them.

pub mod cuda;
pub mod explain;
pub mod mlir;
pub mod names;
pub mod text;
