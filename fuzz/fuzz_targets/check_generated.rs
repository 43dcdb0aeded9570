//! Fuzz target: generated kernels through the checker and the interpreter.
//!
//! From the input bytes: a generator seed and configuration. Oracles: a generated kernel with
//! a barrier after every shared access is race-free (never a race, deadlock or execution
//! error); the same kernel without barriers may race but never deadlocks or errors otherwise;
//! whenever the static mode proves a kernel, interpretation finds no race in it; a race-free
//! kernel gives the same outputs under two schedules.

#![no_main]

use libfuzzer_sys::fuzz_target;
use smemsync::check::{CheckOptions, Verdict, check_race_free, proof, run_with_schedule};
use smemsync::r#gen::{GenConfig, random_kernel};

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let seed = u64::from_le_bytes(data[..8].try_into().unwrap_or([0; 8]));
    let flags = data[8];
    let cfg = GenConfig {
        barriers: true,
        atomics: flags & 1 != 0,
        slots: flags & 2 != 0,
        async_copies: flags & 4 != 0,
        max_depth: 1 + (flags >> 4) as u32 % 3,
        ..GenConfig::default()
    };
    let opts = CheckOptions { schedules: 2, ..CheckOptions::default() };
    let k = random_kernel(seed, &cfg);
    let r = check_race_free(&k, &opts);
    assert!(r.is_race_free(), "seed {seed} flags {flags}: {:?}", r.verdict);
    let a = run_with_schedule(&k, seed, 0, &opts).expect("runs");
    let b = run_with_schedule(&k, seed, 1, &opts).expect("runs");
    assert_eq!(a, b, "seed {seed}: schedule-dependent outputs");

    let bare = random_kernel(seed, &GenConfig { barriers: false, ..cfg });
    let r = check_race_free(&bare, &CheckOptions { try_proof: false, ..opts.clone() });
    assert!(
        matches!(r.verdict, Verdict::Race(_) | Verdict::Checked { .. }),
        "seed {seed} flags {flags} without barriers: {:?}",
        r.verdict
    );
    if proof::prove(&bare, None).is_ok() {
        assert!(r.is_race_free(), "seed {seed}: proved but interpretation races: {:?}", r.verdict);
    }
});
