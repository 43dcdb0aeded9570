//! Transformations whose correctness rests on synchronization: shared-memory planning with
//! reuse (and circular buffering).

pub mod pipeline;
pub mod smem_plan;
