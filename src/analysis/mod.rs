//! Analyses over the IR: uniformity, footprints, conflicts, hazards. One file per analysis;
//! each states its lattice and complexity.

pub mod boxes;
pub mod completion_blockers;
pub mod conflicts;
pub mod deep_blockers;
pub(crate) mod every_path;
pub mod footprint;
pub mod guards;
pub mod hazards;
pub mod inflight;
pub mod layout_owners;
pub mod mbar_classes;
pub mod mbar_object;
pub mod mbar_protocol;
pub mod nearest;
pub mod overlap;
pub(crate) mod role_split;
pub mod pending;
pub mod regdeps;
pub mod symbolic;
pub mod touch;
pub mod uniformity;
pub(crate) mod youngest;
