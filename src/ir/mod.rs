//! The kernel IR: typed entity ids, ops, types, the kernel container and the memory-effects
//! table. See `docs/ir.md` for the text format and the semantics of every op.

pub mod arith;
pub mod effects;
pub mod entities;
pub mod kernel;
pub mod layout;
pub mod ops;
pub mod induction;
pub mod random;
pub mod ranges;
pub mod types;
pub mod wgmma;

pub use effects::{
    AccessKind, AsyncClass, Effects, Footprint, SharedAccess, SyncEffect, WaitKind, effects,
};
pub use entities::*;
pub use kernel::*;
pub use ops::*;
pub use types::*;
pub mod edit;
