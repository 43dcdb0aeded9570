//! The kernel IR: typed entity ids, ops, types, the kernel container, the memory-effects
//! table and the canonical text form (`text`: the printer and `op_label`, how messages name
//! an op). See `docs/ir.md` for the text format and the semantics of every op.

pub mod arith;
pub mod effects;
pub mod entities;
pub mod kernel;
pub mod layout;
pub mod ops;
pub mod induction;
pub mod iterfn;
pub mod random;
pub mod ranges;
pub mod names;
pub mod signature;
pub mod text;
pub mod types;
pub mod wgmma;

pub use effects::{
    AccessKind, AsyncClass, Effects, Footprint, SharedAccess, SyncEffect, WaitKind, effects,
};
pub use entities::*;
pub use kernel::*;
pub use ops::*;
pub use signature::{Family, OpCode, Signature};
pub use types::*;
pub mod edit;
