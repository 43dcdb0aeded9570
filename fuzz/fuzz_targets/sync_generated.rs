//! Fuzz target: `sync` for gfx942, gfx1201 and sm_90 on generated kernels (seed and options
//! from the input bytes, `oracles::Case::from_bytes`). Oracles (`smemsync::oracles`): the
//! output verifies, is race-free per the interpreter and computes what the race-free original
//! computes; "proved" agrees with interpretation on the input, the output and the output
//! minus one inserted sync; text, MLIR and CUDA emission never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smemsync::oracles::{Case, Tally, sync_oracle};

fuzz_target!(|data: &[u8]| {
    let case = Case::from_bytes(data);
    if let Err(e) = sync_oracle(&case, &mut Tally::default()) {
        panic!("{case:?}: {e}");
    }
});
