//! The memos shared by the runs of one `sync` (`analysis::inflight::FlowMemo`,
//! `analysis::footprint::FootprintMemo`) are keyed by op ids: inserting waits must keep every
//! existing id, and answers read from a memo must equal answers computed afresh.

use smemsync::analysis::inflight::{FlowMemo, TAG_CAP, completions, completions_memo};
use smemsync::bench_kernels::{GemmShape, gemm};
use smemsync::ir::edit::apply;
use smemsync::ir::{Op, OpKind, Operand, Scalar, SyncEffect, ValueDef, effects};
use smemsync::sync::joint::hoist_waits;
use smemsync::sync::waits::{plan_waits, plan_waits_memo};
use smemsync::sync::{PlaceMemo, PlaceOptions, place_barriers, place_barriers_memo};
use smemsync::target::Target;

mod common;
use common::parse_verified as kernel;

fn small_gemm() -> smemsync::Kernel {
    let sh = GemmShape {
        bm: 32,
        bn: 32,
        bk: 16,
        threads: 64,
        stages: 3,
        unrolled: false,
    };
    kernel(&gemm(&sh).expect("shape divides"))
}

/// The kernels of the examples and of the async and placement file tests that parse and
/// verify (files with several kernels or expected errors are left out), named by path.
fn file_kernels() -> Vec<(String, smemsync::Kernel)> {
    common::verified_file_kernels(
        &[
            "examples",
            "tests/filetests/async",
            "tests/filetests/placement",
        ],
        50,
    )
}

/// [`file_kernels`] and the small GEMM.
fn file_and_small_kernels() -> Vec<(String, smemsync::Kernel)> {
    let mut kernels = file_kernels();
    kernels.push(("small gemm".into(), small_gemm()));
    kernels
}

/// The real-size kernels: the GEMM at 64 and 256 threads, both flash loops.
fn real_size_kernels() -> Vec<(String, smemsync::Kernel)> {
    let mut kernels = Vec::new();
    for threads in [64, 256] {
        let sh = GemmShape {
            threads,
            ..GemmShape::realistic(false)
        };
        kernels.push((format!("gemm t{threads}"), kernel(&gemm(&sh).unwrap())));
    }
    for name in ["flash", "flash-k-first"] {
        let src = smemsync::bench_kernels::named(name).unwrap();
        kernels.push((name.into(), kernel(&src)));
    }
    kernels
}

/// The targets the memo tests cover.
const TARGETS: [&str; 4] = ["sm_80", "sm_90", "gfx950", "gfx1250"];

/// Runs `check` on every kernel on the `per_kernel` (1, 2 or 4) of [`TARGETS`] that
/// `switch::targets_in_turn` gives it, so that each target meets an even share of the
/// kernels. CI's debug build runs the oracles on such a share; the ignored tests run every
/// kernel on every target (`per_kernel` 4).
fn on_targets_in_turn(
    kernels: &[(String, smemsync::Kernel)],
    per_kernel: usize,
    check: impl Fn(&str, &smemsync::Kernel, &Target),
) {
    for (i, (name, k)) in kernels.iter().enumerate() {
        for t in common::switch::targets_in_turn(i, &TARGETS, per_kernel) {
            check(name, k, &Target::from_name(t).unwrap());
        }
    }
}

#[test]
fn memo_ids_survive_applying_waits() {
    let k = small_gemm();
    let t = Target::from_name("sm_80").unwrap();
    let plan = plan_waits(&k, &t).unwrap().plan;
    assert!(!plan.edits.is_empty());
    let out = apply(&k, &plan).unwrap();
    assert!(out.ops.len() > k.ops.len());
    for (op, d) in k.ops.iter() {
        assert_eq!(out.ops[op].kind, d.kind, "op {op:?} changed");
        assert_eq!(
            out.ops[op].regions, d.regions,
            "op {op:?} moved its regions"
        );
    }
}

#[test]
fn memoized_answers_equal_fresh_ones() {
    let k = small_gemm();
    let t = Target::from_name("sm_80").unwrap();
    let mut flow = FlowMemo::for_kernel(&k);
    let plan = plan_waits_memo(&k, &t, &mut flow).unwrap();
    assert_eq!(plan, plan_waits(&k, &t).unwrap());
    let plan = plan.plan;
    assert!(!flow.is_empty());
    let with_waits = apply(&k, &plan).unwrap();
    let fresh = completions(&with_waits, &t);
    let memo = completions_memo(&with_waits, &t, &mut flow);
    assert_eq!(
        format!("{:?}", fresh.by_wait),
        format!("{:?}", memo.by_wait)
    );
    assert_eq!(fresh.hazards, memo.hazards);
    // Two placements sharing footprints (the joint placement's pair of runs).
    let early = hoist_waits(&k, &t, &plan).expect("the wait moves above the refill");
    let with_early = apply(&k, &early).unwrap();
    let opts = PlaceOptions::default();
    let mut pm = PlaceMemo {
        flow,
        footprints: Some(Box::default()),
    };
    for kk in [&with_waits, &with_early] {
        let a = place_barriers(kk, &t, &opts).unwrap();
        let b = place_barriers_memo(kk, &t, &opts, &mut pm).unwrap();
        assert_eq!(a.stats, b.stats);
        assert_eq!(format!("{:?}", a.plan), format!("{:?}", b.plan));
        assert_eq!(a.warnings, b.warnings);
    }
}

/// The in-flight dataflow with its shortcuts — loops in closed form (`Flow::closed_form`),
/// short constant-trip loops stopped at their trip count (`Flow::trip_cut`) — and with every
/// loop iterated until its tags saturate (`FlowMemo::iterate`, `FlowMemo::full_trips`: the
/// oracle) on one kernel and target: the same wait plan and warnings, and on the kernel with
/// the waits the same completions, drained copies, outstanding copies, in-flight hazards (as
/// a set) and warnings.
fn closed_form_equals_iteration(name: &str, k: &smemsync::Kernel, t: &Target) {
    let solve = |iterate: bool, uncut: bool| {
        plans_and_completions(k, t, true, |memo| {
            memo.iterate = iterate;
            memo.full_trips = iterate && uncut;
        })
    };
    let (got, want) = (solve(false, false), solve(true, true));
    if got == want {
        return;
    }
    // A wait that runs in no iteration of a short constant-trip loop (`if %i > 0` in a loop of
    // one trip) "completes", in the uncut iteration, copies of iterations the loop never
    // runs: the completions differ by exactly those entries (docs/async.md, "Short loops stop
    // at their trip count"). Where a kernel has such a wait (under an `if` in a loop the cut
    // applies to), the cut is kept on both sides: the closed form is still compared with the
    // iteration, the cut is not.
    if has_guarded_wait_in_a_cut_loop(k) {
        same_plans_and_completions(name, t, got, solve(true, false));
    } else {
        same_plans_and_completions(name, t, got, want);
    }
}

/// Whether some wait of `k` lies under an `if` inside a `for` of constant bounds with 1 to
/// `TAG_CAP` trips (the loops `Flow::trip_cut` cuts), the only place where the uncut
/// iteration may credit a wait with copies of iterations that do not exist.
fn has_guarded_wait_in_a_cut_loop(k: &smemsync::Kernel) -> bool {
    let konst = |o: &Operand| match o {
        Operand::Imm(Scalar::I32(v)) => Some(i64::from(*v)),
        Operand::Value(v) => match k.values[*v].def {
            ValueDef::Result(d, _) => match k.ops[d].kind {
                OpKind::Const(Scalar::I32(x)) => Some(i64::from(x)),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    let cut_loop = |l: Op| match &k.ops[l].kind {
        OpKind::For { lo, hi, step, .. } => match (konst(lo), konst(hi), konst(step)) {
            (Some(lo), Some(hi), Some(step)) if step > 0 && hi > lo => {
                (hi - lo + step - 1) / step <= i64::from(TAG_CAP)
            }
            _ => false,
        },
        _ => false,
    };
    k.ops_in_order().into_iter().any(|w| {
        let waits = matches!(effects(k, w).sync, Some(SyncEffect::Wait(_)));
        let up = k.parents().ancestors(w);
        waits
            && up.iter().enumerate().any(|(i, &f)| {
                cut_loop(f)
                    && up[..i]
                        .iter()
                        .any(|&g| matches!(k.ops[g].kind, OpKind::If { .. }))
            })
    })
}

/// A wait plan and the completions on the kernel with its waits, as debug text.
type PlansAndCompletions = (String, Option<(String, Vec<String>)>);

/// The wait plan of `k` on `t` with the memo set up by `setup`, and the completions of the
/// kernel with those waits (`hazards_as_set`: the in-flight hazards sorted apart, compared
/// as a set), both as debug text.
fn plans_and_completions(
    k: &smemsync::Kernel,
    t: &Target,
    hazards_as_set: bool,
    setup: impl Fn(&mut FlowMemo),
) -> PlansAndCompletions {
    let mut memo = FlowMemo::for_kernel(k);
    setup(&mut memo);
    let plan = plan_waits_memo(k, t, &mut memo);
    let comp = plan.as_ref().ok().map(|p| {
        let out = apply(k, &p.plan).unwrap();
        let mut c = completions_memo(&out, t, &mut memo);
        let mut hz = Vec::new();
        if hazards_as_set {
            hz = c.hazards.iter().map(|h| format!("{h:?}")).collect();
            hz.sort();
            c.hazards.clear();
        }
        (format!("{c:?}"), hz)
    });
    (format!("{plan:?}"), comp)
}

/// Asserts that a shortcut's wait plan and completions (`got`) equal the oracle's (`want`).
fn same_plans_and_completions(
    name: &str,
    t: &Target,
    got: PlansAndCompletions,
    want: PlansAndCompletions,
) {
    assert_eq!(got.0, want.0, "{name} on {}: wait plans differ", t.name);
    assert_eq!(got.1, want.1, "{name} on {}: completions differ", t.name);
}

/// The kernels of the closed-form test: [`file_and_small_kernels`] and a small flash loop.
fn closed_form_kernels() -> Vec<(String, smemsync::Kernel)> {
    let mut kernels = file_and_small_kernels();
    let flash = smemsync::bench_kernels::flash::FlashShape {
        bm: 32,
        bn: 16,
        d: 16,
        threads: 32,
        cols: 4,
        stages: 3,
        unrolled: false,
        k_first: false,
    };
    if let Some(src) = smemsync::bench_kernels::flash::flash(&flash) {
        kernels.push(("small flash".into(), kernel(&src)));
    }
    kernels
}

/// Each kernel on two of the four targets in CI (the uncut iteration is the oracle, and
/// the slowest part of this file in a debug build); every target in the ignored test below.
#[test]
fn loops_in_closed_form_equal_the_iteration() {
    on_targets_in_turn(&closed_form_kernels(), 2, closed_form_equals_iteration);
}

#[test]
#[ignore = "a minute in a debug build: cargo test --release --test memo -- --ignored"]
fn loops_in_closed_form_equal_the_iteration_on_every_target() {
    on_targets_in_turn(&closed_form_kernels(), 4, closed_form_equals_iteration);
}

/// The in-flight dataflow with the entries a loop in closed form cannot meet tagged
/// `Unknown` on entry (`Flow::split_quiet`, docs/async.md "Entries a copy loop cannot
/// meet") and with their `Pre` tags kept (`FlowMemo::keep_tags`: the oracle): the same wait
/// plan and warnings, and on the kernel with the waits the same completions (with the tags
/// of every completed entry), drained and outstanding copies, in-flight hazards and
/// warnings.
fn collapse_equals_kept_tags(name: &str, k: &smemsync::Kernel, t: &Target) {
    let solve = |keep: bool| plans_and_completions(k, t, false, |memo| memo.keep_tags = keep);
    same_plans_and_completions(name, t, solve(false), solve(true));
}

/// In CI each file kernel on two targets and each real-size kernel (where the copy loops of
/// 32 and 128 trips collapse) on one, all four targets met; every kernel on every target in
/// the ignored test below.
#[test]
fn quiet_entries_collapse_exactly() {
    on_targets_in_turn(&file_and_small_kernels(), 2, collapse_equals_kept_tags);
    let real = real_size_kernels();
    on_targets_in_turn(&real, 1, collapse_equals_kept_tags);
    // The collapse is not vacuous there: each real-size kernel has quiet entries.
    struct Watch;
    impl smemsync::analysis::inflight::Visitor for Watch {}
    let t = Target::from_name("sm_80").unwrap();
    for (name, k) in &real {
        let mut flow = smemsync::analysis::inflight::Flow::new(k, &t);
        flow.run(&mut Watch);
        assert!(flow.stats.quiet > 0, "{name}: no quiet entry");
    }
}

#[test]
#[ignore = "minutes in a debug build: cargo test --release --test memo -- --ignored"]
fn quiet_entries_collapse_exactly_on_every_target() {
    on_targets_in_turn(&file_and_small_kernels(), 4, collapse_equals_kept_tags);
    on_targets_in_turn(&real_size_kernels(), 4, collapse_equals_kept_tags);
}

/// The wait plan and the completions of `k` on `t` computed afresh, then read back from a
/// memo warmed by a first run (every answer a hit of the memo's packed answer table:
/// `analysis::inflight`'s two bits per entry, noted answers replayed from their side map):
/// the same plan, warnings, completions and in-flight hazards (in order).
fn warm_memo_equals_fresh(name: &str, k: &smemsync::Kernel, t: &Target) {
    let fresh = plans_and_completions(k, t, false, |_| {});
    let mut memo = FlowMemo::for_kernel(k);
    let first = plan_waits_memo(k, t, &mut memo);
    let warm = plan_waits_memo(k, t, &mut memo);
    assert_eq!(
        format!("{first:?}"),
        format!("{warm:?}"),
        "{name} on {}: a warm memo changed the plan",
        t.name
    );
    assert_eq!(fresh.0, format!("{warm:?}"), "{name} on {}", t.name);
    let comp = warm.as_ref().ok().map(|p| {
        let out = apply(k, &p.plan).unwrap();
        let once = completions_memo(&out, t, &mut memo);
        let again = completions_memo(&out, t, &mut memo);
        assert_eq!(
            format!("{once:?}"),
            format!("{again:?}"),
            "{name} on {}",
            t.name
        );
        (format!("{again:?}"), Vec::new())
    });
    assert_eq!(fresh.1, comp, "{name} on {}: completions differ", t.name);
}

/// Each file kernel on two targets and each real-size kernel on one in CI; every kernel on
/// every target in the ignored test below.
#[test]
fn answers_read_back_from_a_warm_memo_equal_fresh_ones() {
    on_targets_in_turn(&file_and_small_kernels(), 2, warm_memo_equals_fresh);
    on_targets_in_turn(&real_size_kernels(), 1, warm_memo_equals_fresh);
}

#[test]
#[ignore = "minutes in a debug build: cargo test --release --test memo -- --ignored"]
fn answers_read_back_from_a_warm_memo_equal_fresh_ones_on_every_target() {
    on_targets_in_turn(&file_and_small_kernels(), 4, warm_memo_equals_fresh);
    on_targets_in_turn(&real_size_kernels(), 4, warm_memo_equals_fresh);
}

/// The rule that keeps the trip-count cut on both sides holds on the one-trip file tests with
/// a wait under `if %i > 0` (their uncut completions differ) and not on a pipelined GEMM.
#[test]
fn guarded_waits_in_cut_loops_are_recognised() {
    let dir = "tests/filetests/async";
    for f in [
        "a-bulk-wait-under-an-iteration-guard-does-not-order-a-write-after-the-loop.kir",
        "a-wait-and-barrier-under-an-iteration-guard-do-not-order-a-read-after-the-loop.kir",
    ] {
        let k = common::parse_file(format!("{}/{dir}/{f}", env!("CARGO_MANIFEST_DIR")));
        assert!(has_guarded_wait_in_a_cut_loop(&k), "{f}");
    }
    assert!(!has_guarded_wait_in_a_cut_loop(&small_gemm()));
}
