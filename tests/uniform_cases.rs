//! Questions through parameters with declared ranges, asked case by case (docs/symbolic.md,
//! "Uniform unknowns, case by case"), against the interpreter: generated kernels of 64 threads
//! store into `@a : f32[4, 64]` and load from it at indices built from `%m: i32 in [0, 3]`,
//! `%p: i32 in [0, 5]` and thread ids (rows, lane offsets within a warp, wrapped columns,
//! double-buffer slots over a loop), are synchronized for sm_80, and the output is
//! interpreted for every `%m` and several `%p`:
//!
//! - no finding ⇒ the synchronized kernel is race-free for every tried value (every barrier
//!   the cases removed was not needed);
//! - E0301 ⇒ the interpreter finds a race for every tried value;
//! - W0317: a conservative answer, either may happen.
//!
//! The engine must answer some of these kernels with fewer syncs than the whole buffer
//! would need (the oracle is not vacuous). Debug build: a few seconds.

use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;
use common::XorShift;
use common::param_cases::{COLS, RANGED, ROWS, Said, kernel, races, said};
use common::parse_verified as parse;

#[test]
fn placements_through_ranged_parameters_are_race_free_for_every_value() {
    let target = Target::from_name("sm_80").expect("known");
    let mut rng = XorShift(0xf4ee_0a4a);
    let (mut without, mut with) = (0, 0);
    for case in 0..48 {
        let pick = |rng: &mut XorShift| (ROWS[rng.below(ROWS.len())], COLS[rng.below(COLS.len())]);
        let (st, ld) = (pick(&mut rng), pick(&mut rng));
        let src = kernel(st, ld, rng.below(2) == 0, RANGED);
        let k = parse(&src);
        let verdict = said(&k, &target);
        // A race of one op (E0301) is an error of `sync`: the input itself is interpreted.
        let out = match synchronize(&k, &target, &PlaceOptions::default()) {
            Ok(s) => s.kernel,
            Err(e) => {
                assert_eq!(verdict, Said::Race, "case {case}: {e:?}\n{src}");
                k.clone()
            }
        };
        let syncs = out
            .ops
            .keys()
            .filter(|&o| smemsync::ir::effects::is_sync(&out, o))
            .count();
        if syncs == 0 {
            without += 1;
        } else {
            with += 1;
        }
        for m in 0..4 {
            for p in [0, 3, 5] {
                let r = races(&out, &target, m, p);
                match verdict {
                    Said::Nothing => assert!(
                        !r,
                        "case {case}: synchronized without a finding, but a race for m={m}, p={p}\n{}",
                        smemsync::emit::text::print_kernel(&out)
                    ),
                    Said::Race => {
                        assert!(r, "case {case}: E0301 but no race for m={m}, p={p}\n{src}")
                    }
                    Said::May => {}
                }
            }
        }
    }
    assert!(
        without >= 5 && with >= 5,
        "outputs without / with syncs: {without} / {with}"
    );
}

/// Session 32's findings: one thread's own element through a parameter row needs nothing;
/// a lane offset by a parameter within one's own warp needs warp syncs only.
#[test]
fn parameter_rows_and_lane_offsets_need_no_block_barrier() {
    let target = Target::from_name("sm_80").expect("known");
    for (st, ld, want) in [
        (("%m", "%t"), ("%m", "%t"), 0),
        (("%m", "%t"), ("%m", "%tw"), 0),
    ] {
        let k = parse(&kernel(st, ld, false, RANGED));
        let out = synchronize(&k, &target, &PlaceOptions::default()).expect("synchronizes");
        assert_eq!(
            out.placement.stats.barriers_written, want,
            "{st:?} -> {ld:?}"
        );
        assert_eq!(out.placement.stats.conservative, 0, "{st:?} -> {ld:?}");
    }
}
