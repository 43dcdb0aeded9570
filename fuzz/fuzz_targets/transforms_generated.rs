//! Fuzz target: `plan-smem` (by lifetimes, and choosing by objective) and `pipeline --stages
//! 2|3` on generated kernels with a pipeline loop and phases of fresh buffers (options from
//! the input bytes). Oracle (`smemsync::oracles`): after `sync`, the transformed kernel is
//! race-free and computes what the race-free original computes; `sync` refuses it only if it
//! refuses the original; buffers live together never share bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smemsync::oracles::{
    Case, Tally, pipeline_oracle, plan_objectives_oracle, plan_smem_oracle,
};

fuzz_target!(|data: &[u8]| {
    let mut case = Case::from_bytes(data);
    case.cfg.pipeline = true;
    case.cfg.phases = case.cfg.phases.max(2);
    let mut tally = Tally::default();
    if let Err(e) = plan_smem_oracle(&case, &mut tally) {
        panic!("{case:?}: {e}");
    }
    if let Err(e) = plan_objectives_oracle(&case, &mut tally) {
        panic!("{case:?}: {e}");
    }
    if let Err(e) = pipeline_oracle(&case, &mut tally) {
        panic!("{case:?}: {e}");
    }
});
