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

use smemsync::analysis::hazards::find_hazards;
use smemsync::check::{CheckOptions, check_race_free};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;
use common::parse_verified as parse;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Row indices (dimension of 4): uniform through the parameters, or thread-dependent.
const ROWS: &[&str] = &["%m", "%m", "%mq", "%mp", "%tq", "0", "%s"];
/// Column indices (dimension of 64).
const COLS: &[&str] = &["%t", "%t", "%tp", "%tr", "%tw", "%tm", "%th"];

/// A kernel that stores at `@a[r1, c1]` and loads `@a[r2, c2]`, in a loop of three
/// iterations when `looped` (`%s` is then the slot `rem(%k + %m, 2)`).
fn kernel(store: (&str, &str), load: (&str, &str), looped: bool, ranged: bool) -> String {
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
    let (rm, rp) = if ranged {
        (" in [0, 3]", " in [0, 5]")
    } else {
        ("", "")
    };
    format!(
        r#"kernel @k(%m: i32{rm} = 1, %p: i32{rp} = 2, %out: global f32[64]) block(64) {{
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

/// Syncs written by `synchronize` (`None`: an E0301 error).
fn synced(k: &smemsync::ir::Kernel, target: &Target) -> Option<(smemsync::ir::Kernel, usize)> {
    let s = synchronize(k, target, &PlaceOptions::default()).ok()?;
    let n = s.placement.stats.barriers_written + s.placement.stats.warp_syncs_written;
    Some((s.kernel, n))
}

#[test]
fn placements_through_unranged_parameters_are_race_free_at_every_value() {
    let target = Target::from_name("sm_80").expect("known");
    let mut rng = Rng(0x0e4a_11ce);
    let (mut equal, mut total) = (0, 0);
    for case in 0..40 {
        let pick = |rng: &mut Rng| (ROWS[rng.below(ROWS.len())], COLS[rng.below(COLS.len())]);
        let (st, ld) = (pick(&mut rng), pick(&mut rng));
        let looped = rng.below(2) == 0;
        let src = kernel(st, ld, looped, false);
        let k = parse(&src);
        let verdict = said(&k, &target);
        let Some((out, n)) = synced(&k, &target) else {
            assert_eq!(verdict, Said::Race, "case {case}: sync failed\n{src}");
            continue;
        };
        if let Some((_, ranged)) = synced(&parse(&kernel(st, ld, looped, true)), &target) {
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
        let k = parse(&kernel(st, ld, looped, false));
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
