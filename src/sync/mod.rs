//! Synchronization placement and lowering: barrier placement, waits, split barriers.

pub mod split;
