//! Pair questions through parameters WITHOUT a declared range (docs/symbolic.md, "Block
//! leaves as shared free variables"), against the interpreter: the kernels of
//! `tests/uniform_cases.rs` with `%m: i32` and `%p: i32` unranged are synchronized for sm_80
//! and the output is interpreted at parameter values inside and outside the ranged variant's
//! range (an index out of its dimension is an execution error, not a race):
//!
//! - no finding ⇒ the synchronized kernel is race-free at every tried value;
//! - W0317/W0319 ⇒ a conservative answer (never silent).
//!
//! Exactness: the unranged placement writes no more syncs than the ranged variant's where
//! the indices do not need the range, and the same for most kernels. Debug build: a few
//! seconds.

use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;
use common::XorShift;
use common::param_cases::{COLS, RANGED, ROWS, Said, UNRANGED, kernel, races, said};
use common::parse_verified as parse;

/// Syncs written by `synchronize` (`None`: an E0301 error).
fn synced(k: &smemsync::ir::Kernel, target: &Target) -> Option<(smemsync::ir::Kernel, usize)> {
    let s = synchronize(k, target, &PlaceOptions::default()).ok()?;
    let n = s.placement.stats.barriers_written + s.placement.stats.warp_syncs_written;
    Some((s.kernel, n))
}

#[test]
fn placements_through_unranged_parameters_are_race_free_at_every_value() {
    let target = Target::from_name("sm_80").expect("known");
    let mut rng = XorShift(0x0e4a_11ce);
    let (mut equal, mut total) = (0, 0);
    for case in 0..40 {
        let pick = |rng: &mut XorShift| (ROWS[rng.below(ROWS.len())], COLS[rng.below(COLS.len())]);
        let (st, ld) = (pick(&mut rng), pick(&mut rng));
        let looped = rng.below(2) == 0;
        let src = kernel(st, ld, looped, UNRANGED);
        let k = parse(&src);
        let verdict = said(&k, &target);
        let Some((out, n)) = synced(&k, &target) else {
            assert_eq!(verdict, Said::Race, "case {case}: sync failed\n{src}");
            continue;
        };
        if let Some((_, ranged)) = synced(&parse(&kernel(st, ld, looped, RANGED)), &target) {
            total += 1;
            // Unranged values include the ranged ones: never fewer syncs.
            assert!(
                n >= ranged,
                "case {case}: {n} syncs unranged, {ranged} ranged\n{src}"
            );
            equal += (n == ranged) as usize;
        }
        if verdict == Said::May {
            continue;
        }
        for m in [0, 1, 3, 7, -5, 1 << 30] {
            for p in [0, 5, 13, -9, i32::MAX as i64] {
                assert!(
                    !races(&out, &target, m, p),
                    "case {case}: synchronized without a finding, but a race for m={m}, p={p}\n{}",
                    smemsync::emit::text::print_kernel(&out)
                );
            }
        }
    }
    assert!(
        equal * 4 >= total * 3,
        "as exact as the ranged variant in {equal} of {total}"
    );
}

/// Session 32's F1, F1b and F1c with the range removed: exact (the ranged placement).
#[test]
fn unranged_parameter_rows_slots_and_lane_offsets_are_exact() {
    let target = Target::from_name("sm_80").expect("known");
    for (st, ld, looped, barriers, warp_syncs) in [
        (("%m", "%t"), ("%m", "%t"), false, 0, 0),
        (("%s", "%t"), ("%s", "%tr"), true, 1, 0),
        (("%m", "%t"), ("%m", "%tw"), false, 0, 1),
    ] {
        let k = parse(&kernel(st, ld, looped, UNRANGED));
        let out = synchronize(&k, &target, &PlaceOptions::default()).expect("synchronizes");
        let s = &out.placement.stats;
        assert_eq!(
            (s.barriers_written, s.warp_syncs_written),
            (barriers, warp_syncs),
            "{st:?} -> {ld:?}"
        );
        assert_eq!(s.conservative, 0, "{st:?} -> {ld:?}");
    }
}

/// A product of a parameter and a thread id has no form with the parameter free: W0319,
/// counted as conservative, and the barrier stays.
#[test]
fn an_undecided_parameter_index_says_w0319() {
    let target = Target::from_name("sm_80").expect("known");
    let k = parse(
        "kernel @k(%m: i32, %out: global f32[64]) block(64) {\n  shared @a : f32[4096]\n  %t = tid.x\n  %f = itof %t\n  %i = mul %t, %m\n  store @a[%i], %f\n  %v = load @a[%i]\n  gstore %out[%t], %v\n}\n",
    );
    let out = synchronize(&k, &target, &PlaceOptions::default()).expect("synchronizes");
    assert!(out.placement.warnings.iter().any(|w| w.code == "W0319"));
    assert!(out.placement.stats.conservative >= 1);
    assert_eq!(out.placement.stats.barriers_written, 1);
}
