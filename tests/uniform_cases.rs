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

use smemsync::analysis::hazards::find_hazards;
use smemsync::check::{CheckOptions, check_race_free};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;
use common::XorShift;
use common::parse_verified as parse;

/// Row indices (dimension of 4): uniform through the parameters, or thread-dependent.
const ROWS: &[&str] = &["%m", "%m", "%mq", "%mp", "%tq", "0", "%s"];
/// Column indices (dimension of 64).
const COLS: &[&str] = &["%t", "%t", "%tp", "%tr", "%tw", "%tm", "%th"];

/// A kernel that stores at `@a[r1, c1]` and loads `@a[r2, c2]`, in a loop of three
/// iterations when `looped` (`%s` is then the slot `rem(%k + %m, 2)`).
fn kernel(store: (&str, &str), load: (&str, &str), looped: bool) -> String {
    let body = format!(
        "store @a[{}, {}], %f\n  %x = load @a[{}, {}]\n  gstore %out[%t], %x\n",
        store.0, store.1, load.0, load.1
    );
    let (open, close, s) = if looped {
        (
            "for %k = 0 to 3 step 1 {\n  %ks = add %k, %m\n  %s = rem %ks, 2\n  ",
            "}\n",
            "",
        )
    } else {
        ("", "", "%s = rem %m, 2\n  ")
    };
    format!(
        r#"kernel @k(%m: i32 in [0, 3] = 1, %p: i32 in [0, 5] = 2, %out: global f32[64]) block(64) {{
  shared @a : f32[4, 64]
  %t = tid.x
  %f = itof %t
  %m1 = add %m, 1
  %mq = rem %m1, 4
  %mp0 = add %m, %p
  %mp = rem %mp0, 4
  %tq = div %t, 16
  %tp0 = add %t, %p
  %tp = and %tp0, 63
  %tr = sub 63, %t
  %hi = and %t, -32
  %lo = and %tp0, 31
  %tw = add %hi, %lo
  %tm0 = add %t, %m
  %tm = rem %tm0, 64
  %th = div %t, 2
  {s}{open}{body}{close}}}
"#
    )
}

#[derive(Debug, PartialEq, Clone, Copy)]
enum Said {
    Race,
    May,
    Nothing,
}

fn said(k: &smemsync::ir::Kernel, target: &Target) -> Said {
    let h = find_hazards(k, target);
    let codes: Vec<&str> = h.findings.iter().map(|d| d.code).collect();
    if codes.contains(&"E0301") {
        Said::Race
    } else if codes.iter().any(|c| c.starts_with("W031")) {
        Said::May
    } else {
        Said::Nothing
    }
}

/// Whether interpretation of `k` finds a race with `%m = m`, `%p = p`.
fn races(k: &smemsync::ir::Kernel, target: &Target, m: i64, p: i64) -> bool {
    let o = CheckOptions {
        target: Some(*target),
        bounds: vec![("m".into(), m), ("p".into(), p)],
        try_proof: false,
        schedules: 2,
        ..CheckOptions::default()
    };
    let r = check_race_free(k, &o);
    assert!(
        !matches!(r.verdict, smemsync::check::Verdict::Deadlock(_)),
        "deadlock: {}",
        r.summary()
    );
    r.is_race()
}

#[test]
fn placements_through_ranged_parameters_are_race_free_for_every_value() {
    let target = Target::from_name("sm_80").expect("known");
    let mut rng = XorShift(0xf4ee_0a4a);
    let (mut without, mut with) = (0, 0);
    for case in 0..48 {
        let pick = |rng: &mut XorShift| (ROWS[rng.below(ROWS.len())], COLS[rng.below(COLS.len())]);
        let (st, ld) = (pick(&mut rng), pick(&mut rng));
        let src = kernel(st, ld, rng.below(2) == 0);
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
        let k = parse(&kernel(st, ld, false));
        let out = synchronize(&k, &target, &PlaceOptions::default()).expect("synchronizes");
        assert_eq!(
            out.placement.stats.barriers_written, want,
            "{st:?} -> {ld:?}"
        );
        assert_eq!(out.placement.stats.conservative, 0, "{st:?} -> {ld:?}");
    }
}
