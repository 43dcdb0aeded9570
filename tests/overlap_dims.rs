//! The overlap engine's per-dimension test (`Overlap::dims_apart`, docs/async.md "Slots
//! apart under the distance") against the paths it short-cuts:
//!
//! 1. on small random kernels whose async copies, loads and stores index a `[3, 4, 16]` buffer
//!    through a slot (a function of the loop variable, or a constant), a row (the thread, the
//!    loop variable, a constant or a parameter) and a column, directly or through a view of
//!    the slot, every ordered pair of accesses under random iteration tags gets the same
//!    answer and the same W0314 notes from the default engine (test on, symbolic) as from the
//!    enumerating engine with the test off;
//! 2. on the examples, the async and placement file tests and real-size GEMM and flash
//!    kernels on sm_80, the waits, completions and barriers are the same with the test and
//!    without it (`FlowMemo::no_dims`); a copy into the next slot against a load of this one
//!    is decided by the test at the distances where the slots differ.

use proptest::prelude::*;
use smemsync::analysis::inflight::FlowMemo;
use smemsync::analysis::overlap::{IterTag, Overlap};
use smemsync::ir::*;
use smemsync::sync::PlaceMemo;
use smemsync::target::Target;

mod common;
use common::switch::{self, Named};
use common::{OverlapOracle, parse_verified};

/// One access: kind (0 copy, 1 load, 2 store), slot form, row form, column offset, and
/// whether it goes through a view of its slot.
type AccessSpec = (u8, u8, u8, i64, bool);

fn slot(f: u8) -> &'static str {
    ["%s0", "%s1", "%s2", "1", "%s3"][f as usize % 5]
}

fn row(f: u8) -> &'static str {
    ["%r", "%ri", "2", "%rn", "%rt"][f as usize % 5]
}

/// The kernel: a loop of `trip` iterations (or `%n`, when `param`) over the accesses.
fn text(block: u32, trip: u32, param: bool, accs: &[AccessSpec]) -> String {
    let hi = if param {
        "%n".to_string()
    } else {
        trip.to_string()
    };
    let mut body = vec![
        "%t = tid.x".to_string(),
        "%f = itof %t".to_string(),
        format!("for %i = 0 to {hi} step 1 {{"),
        "%s0 = rem %i, 3".into(),
        "%i1 = add %i, 1".into(),
        "%s1 = rem %i1, 3".into(),
        "%i2 = add %i, 2".into(),
        "%s2 = rem %i2, 3".into(),
        "%i3 = div %i, 2".into(),
        "%s3 = rem %i3, 3".into(),
        "%r = rem %t, 4".into(),
        "%ri = rem %i, 4".into(),
        "%rn = rem %n, 4".into(),
        "%rt = div %t, 16".into(),
        "%c = rem %t, 16".into(),
    ];
    for (j, &(kind, s, r, c, view)) in accs.iter().enumerate() {
        let (sl, rw) = (slot(s), row(r));
        body.push(format!("%c{j} = rem %c, {}", 16 - c.rem_euclid(8)));
        let mem = if view {
            body.push(format!("%w{j} = view @a[{sl}]"));
            format!("%w{j}[{rw}, %c{j}]")
        } else {
            format!("@a[{sl}, {rw}, %c{j}]")
        };
        body.push(match kind {
            0 => format!("cp_async {mem} <- %A[%t]"),
            1 => format!("%v{j} = load {mem}"),
            _ => format!("store {mem}, %f"),
        });
    }
    body.push("}".into());
    let mut out = format!(
        "kernel @k(%n: i32 in [1, 12], %A: global f32[4096]) block({block}) {{\n  shared @a : f32[3, 4, 16]\n"
    );
    for l in body {
        out.push_str(&format!("  {l}\n"));
    }
    out.push_str("}\n");
    out
}

/// The tag of the loop for one query, from a drawn byte.
fn tag(b: u8) -> Option<IterTag> {
    match b % 9 {
        0..=3 => Some(IterTag::Dist(u32::from(b % 9))),
        4 => Some(IterTag::Unknown),
        5 | 6 => Some(IterTag::Pre(u32::from(b % 3))),
        7 => Some(IterTag::PreLast(u32::from(b % 2), 1)),
        _ => None,
    }
}

/// The accesses of an op that shared memory sees.
fn accesses(k: &Kernel, op: Op) -> Vec<SharedAccess> {
    effects::effects(k, op).shared
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn dims_answers_equal_the_enumeration_without_them(
        block in prop::sample::select(vec![16u32, 32, 64]),
        trip in 1u32..8,
        param in any::<bool>(),
        accs in prop::collection::vec((0u8..3, 0u8..5, 0u8..5, 0i64..8, any::<bool>()), 2..6),
        tags in prop::collection::vec(any::<u8>(), 32),
    ) {
        let src = text(block, trip, param, &accs);
        let k = parse_verified(&src);
        // The default engine, test on, against the enumerating one with the test off.
        let mut o = OverlapOracle::new(&k);
        o.sym.dims = true;
        o.en.dims = false;
        let r = o.compare_every_pair(&k, |n, loops| {
            tag(tags[n % tags.len()]).map(|g| (loops[0], g)).into_iter().collect()
        });
        prop_assert!(r.is_ok(), "{} in\n{}", r.unwrap_err(), src);
    }
}

/// The test is not vacuous: a copy into the next slot and a load of this one, one
/// iteration apart, are decided by it.
#[test]
fn next_slot_copy_and_this_slot_load_are_decided_by_the_dims() {
    let k = parse_verified(&text(
        32,
        6,
        true,
        &[(0, 1, 0, 0, false), (1, 0, 0, 0, true)],
    ));
    let ops: Vec<Op> = k
        .ops
        .iter()
        .map(|(op, _)| op)
        .filter(|&op| !accesses(&k, op).is_empty())
        .collect();
    let mut o = Overlap::new(&k, 32);
    o.dims = true;
    let l = o.for_loops(ops[1])[0];
    let (xa, ya) = (&accesses(&k, ops[0])[0], &accesses(&k, ops[1])[0]);
    // Copy into slot (i+1) mod 3, load of slot i mod 3: apart at distance 0 and 2, met at 1.
    for (d, want) in [(0, false), (1, true), (2, false), (4, true)] {
        let got = o.may_overlap(ops[0], xa, ops[1], ya, &[(l, IterTag::Dist(d))]);
        assert_eq!(got, want, "distance {d}");
    }
    assert_eq!(o.dims_answered.get(), 2);
}

/// Verified kernels of the examples and the async and placement file tests, and real-size
/// GEMMs and flash loops.
fn kernels() -> Vec<Named> {
    let mut out = switch::async_and_placement_kernels();
    // Real sizes, kept few for CI's debug build: the unrolled copies at 64×64×32 (the
    // unrolled 128×128×64 GEMMs ask the same kinds of questions, ten times more of them).
    out.extend(switch::gemm_kernels((64, 64, 32), &[(64, true)]));
    out.extend(switch::gemm_kernels((128, 128, 64), &[(64, false)]));
    out.extend(switch::bench_kernels(&["flash", "flash-k-first"]));
    out
}

/// The wait plan, the completions on the kernel with its waits and the barrier placement of
/// that kernel, as debug text, with the per-dimension test on or off.
fn waits_completions_barriers(k: &Kernel, t: &Target, dims: bool) -> Vec<String> {
    let mut pm = PlaceMemo {
        flow: FlowMemo::for_kernel(k),
        footprints: Some(Box::default()),
    };
    pm.flow.no_dims = !dims;
    switch::waits_completions_barriers(k, t, &mut pm, switch::COMPLETIONS)
}

#[test]
fn dims_change_no_wait_completion_or_barrier() {
    switch::assert_switch_changes_nothing(
        "waits, completions and barriers",
        &kernels(),
        &["sm_80"],
        waits_completions_barriers,
    );
}
