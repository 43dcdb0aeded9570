//! Transformations whose correctness rests on synchronization: shared-memory planning with
//! reuse (lifetimes, allocators, the planner that trades bytes against barriers) and
//! circular buffering.

pub mod pipeline;
pub mod pipeline_cp_async;
pub mod pipeline_tma;
pub mod pipeline_ws;
pub mod smem_alloc;
pub mod smem_live;
pub mod smem_plan;
