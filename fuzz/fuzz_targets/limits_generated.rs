//! Fuzz target: kernels at, just below and just above the limits of docs/ir.md (threads per
//! block, block dimensions, shared bytes per target, nesting depth), seeded by the input.
//! Oracle (`smemsync::oracles::limits_oracle`): accepted exactly when within the limits,
//! otherwise refused with a located user diagnostic; accepted kernels go through sync, check,
//! plan-smem and emit without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smemsync::oracles::{Tally, limits_oracle};

fuzz_target!(|data: &[u8]| {
    let mut b = [0u8; 8];
    for (i, x) in data.iter().take(8).enumerate() {
        b[i] = *x;
    }
    let seed = u64::from_le_bytes(b);
    if let Err(e) = limits_oracle(seed, &mut Tally::default()) {
        panic!("seed {seed}: {e}");
    }
});
