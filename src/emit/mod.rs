//! Emitters: MLIR and CUDA C++, and the canonical text form (`text`, the IR's own printer,
//! re-exported here). Each writes through `fmt::Write` with stable, collision-free names
//! (made by the one name table, `ir::names::NameTable`);
//! `explain` names ops, points and hazards as a reader of the source sees them.

pub mod cuda;
pub mod explain;
mod lane_contiguous;
pub mod mlir;
/// The canonical text form lives with the IR it spells (`ir::text`): placement, the checker
/// and the analyses name ops in their messages without depending on the emitters.
pub use crate::ir::text;
/// The one name table of every emitter (the text printer's too, hence its home in `ir`).
pub use crate::ir::names;
