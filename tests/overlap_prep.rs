//! The overlap engine's memo of query preparations (`Overlap::prep_memo`, docs/async.md
//! "Each query prepared once per loop relation") against preparing every query on its own:
//!
//! 1. on random kernels of two nested loops (constant or parameter trips) whose copies,
//!    loads and stores index a `[3, 4, 16]` buffer through slots of either loop variable, a
//!    row from the thread, a loop variable or a constant, and a column from the thread (so
//!    accesses of one loop relation differ in their operands' periods), every ordered pair
//!    asked twice under random tags of both loops gets the same answer and the same W0314
//!    notes with the memo as without it;
//! 2. on the examples, the async and placement file tests, the 64×64×32 unrolled GEMM and the
//!    flash loop on sm_80, the waits, completions and barriers are the same with the memo and
//!    without it (`FlowMemo::no_prep`).

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
/// whether it sits in the inner loop.
type AccessSpec = (u8, u8, u8, i64, bool);

fn slot(f: u8) -> &'static str {
    ["%s0", "%s1", "%sj", "1", "%s3"][f as usize % 5]
}

fn row(f: u8) -> &'static str {
    ["%r", "%ri", "2", "%rj", "%rt"][f as usize % 5]
}

/// The kernel: an outer loop of `trip` iterations (or `%n`) around some accesses and an
/// inner loop of 3 iterations (or `%m`) around the others.
fn text(block: u32, trip: u32, params: (bool, bool), accs: &[AccessSpec]) -> String {
    let hi = if params.0 {
        "%n".to_string()
    } else {
        trip.to_string()
    };
    let hj = if params.1 { "%m" } else { "3" };
    let mut outer = Vec::new();
    let mut inner = Vec::new();
    for (j, &(kind, s, r, c, deep)) in accs.iter().enumerate() {
        let (mut sl, mut rw) = (slot(s), row(r));
        if !deep {
            // The inner loop's values are not defined outside it.
            sl = sl.replace("%sj", "%s1").leak();
            rw = rw.replace("%rj", "%ri").leak();
        }
        let at = if deep { &mut inner } else { &mut outer };
        at.push(format!("%c{j} = rem %c, {}", 16 - c.rem_euclid(8)));
        let mem = format!("@a[{sl}, {rw}, %c{j}]");
        at.push(match kind {
            0 => format!("cp_async {mem} <- %A[%t]"),
            1 => format!("%v{j} = load {mem}"),
            _ => format!("store {mem}, %f"),
        });
    }
    let mut body: Vec<String> = [
        "%t = tid.x",
        "%f = itof %t",
        "%r = rem %t, 4",
        "%rt = div %t, 16",
        "%c = rem %t, 16",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    body.push(format!("for %i = 0 to {hi} step 1 {{"));
    for l in [
        "%s0 = rem %i, 3",
        "%i1 = add %i, 1",
        "%s1 = rem %i1, 3",
        "%i3 = div %i, 2",
        "%s3 = rem %i3, 3",
        "%ri = rem %i, 4",
    ] {
        body.push(l.into());
    }
    body.extend(outer);
    body.push(format!("for %j = 0 to {hj} step 1 {{"));
    body.push("%sj = rem %j, 3".into());
    body.push("%rj = rem %j, 4".into());
    body.extend(inner);
    body.push("}".into());
    body.push("}".into());
    let mut out = format!(
        "kernel @k(%n: i32 in [1, 12], %m: i32 in [1, 5], %A: global f32[4096]) block({block}) {{\n  shared @a : f32[3, 4, 16]\n"
    );
    for l in body {
        out.push_str(&format!("  {l}\n"));
    }
    out.push_str("}\n");
    out
}

/// The tag of one loop for one query, from a drawn byte.
fn tag(b: u8) -> Option<IterTag> {
    match b % 10 {
        0..=2 => Some(IterTag::Dist(u32::from(b % 10))),
        3 | 4 => Some(IterTag::Unknown),
        5 | 6 => Some(IterTag::Pre(u32::from(b % 3))),
        7 => Some(IterTag::PreLast(u32::from(b % 2), 1)),
        8 => Some(IterTag::Last(u32::from(b % 2))),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn prepared_queries_answer_as_queries_prepared_alone(
        block in prop::sample::select(vec![16u32, 32, 64]),
        trip in 1u32..8,
        params in any::<(bool, bool)>(),
        accs in prop::collection::vec((0u8..3, 0u8..5, 0u8..5, 0i64..8, any::<bool>()), 2..7),
        tags in prop::collection::vec(any::<u8>(), 16),
    ) {
        let src = text(block, trip, params, &accs);
        let k = parse_verified(&src);
        // The engine as the analysis runs it, memo on, against one that prepares each query
        // on its own (symbolic too: only the memo differs).
        let mut o = OverlapOracle::new(&k);
        o.sym.prep_memo = true;
        o.en = Overlap::new(&k, 32);
        o.en.prep_memo = false;
        let mut n = 0usize;
        // Twice over: the second round finds every preparation in the memo.
        for _ in 0..2 {
            for x in o.ops.clone() {
                for y in o.ops.clone() {
                    let loops = o.sym.for_loops(y);
                    let mut tg = Vec::new();
                    for (i, &l) in loops.iter().enumerate() {
                        if let Some(g) = tag(tags[(n + 5 * i) % tags.len()]) {
                            tg.push((l, g));
                        }
                    }
                    n += 1;
                    let r = o.compare(&k, (x, y), &tg);
                    prop_assert!(r.is_ok(), "{} in\n{}", r.unwrap_err(), src);
                }
            }
        }
    }
}

/// Verified kernels of the examples and the async and placement file tests, the unrolled
/// 64×64×32 GEMM and the flash loop.
fn kernels() -> Vec<Named> {
    let mut out = switch::async_and_placement_kernels();
    out.extend(switch::gemm_kernels((64, 64, 32), &[(64, true)]));
    out.extend(switch::bench_kernels(&["flash"]));
    out
}

/// The wait plan, the completions on the kernel with its waits and the barrier placement of
/// that kernel, as debug text, with the memo of preparations on or off.
fn waits_completions_barriers(k: &Kernel, t: &Target, prep: bool) -> Vec<String> {
    let mut pm = PlaceMemo {
        flow: FlowMemo::for_kernel(k),
        footprints: Some(Box::default()),
    };
    pm.flow.no_prep = !prep;
    switch::waits_completions_barriers(k, t, &mut pm, switch::COMPLETIONS)
}

#[test]
fn the_prep_memo_changes_no_wait_completion_or_barrier() {
    switch::assert_switch_changes_nothing(
        "waits, completions and barriers",
        &kernels(),
        &["sm_80"],
        waits_completions_barriers,
    );
}
