//! Synchronization placement and lowering: barrier placement, waits, split barriers.

pub mod split;
pub mod waits;
pub mod waits_paths;
