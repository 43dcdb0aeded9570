//! Automatic waits: seed 003's kernel and variations on AMD and NVIDIA targets.
//!
//! Every planned output is checked three ways: (1) no shared access of the output may observe
//! an in-flight copy and nothing is outstanding at exit; (2) every inserted count is maximal:
//! raising it by one, or removing the wait, leaves some access observing a copy in flight;
//! (3) where a hand-derived count exists (nvFuser's `CP.WAIT(P-1)` pattern, the TDM triple
//! buffer) the plan matches it. (2) uses `mutations`, which also feeds the independent race
//! checker once it is wired in (`check_mutants`).

use smemsync::analysis::inflight::completions;
use smemsync::ir::edit::{Anchor, Edit, EditReason, ProgramPoint, SyncPlan, apply, apply_tracked};
use smemsync::ir::{Counter, Kernel, Op, OpKind};
use smemsync::sync::waits::{explain_waits, plan_waits};
use smemsync::target::Target;

mod common;
use common::parse_verified as kernel;

fn t(name: &str) -> Target {
    Target::from_name(name).unwrap()
}

/// The counts a wait kind carries.
fn counts(kind: &OpKind) -> Vec<u32> {
    match kind {
        OpKind::WaitCnt(c) => c.iter().map(|(_, n)| *n).collect(),
        OpKind::CpAsyncWait(n) | OpKind::BulkWait(n) | OpKind::WgmmaWait(n) => vec![*n],
        _ => vec![],
    }
}

fn bump(kind: &OpKind) -> OpKind {
    match kind {
        OpKind::WaitCnt(c) => OpKind::WaitCnt(c.iter().map(|(x, n)| (*x, n + 1)).collect()),
        OpKind::CpAsyncWait(n) => OpKind::CpAsyncWait(n + 1),
        OpKind::BulkWait(n) => OpKind::BulkWait(n + 1),
        OpKind::WgmmaWait(n) => OpKind::WgmmaWait(n + 1),
        k => k.clone(),
    }
}

/// Every mutant of a plan: each inserted wait weakened by one (count waits) or removed.
fn mutations(plan: &SyncPlan) -> Vec<(String, SyncPlan)> {
    let mut out = Vec::new();
    for (i, e) in plan.edits.iter().enumerate() {
        if counts(&e.op).is_empty() && !matches!(e.op, OpKind::WaitTokens(_)) {
            continue;
        }
        let mut removed = plan.clone();
        removed.edits.remove(i);
        out.push((format!("remove edit {i} ({:?})", e.op), removed));
        if !counts(&e.op).is_empty() {
            let mut weak = plan.clone();
            weak.edits[i].op = bump(&e.op);
            out.push((format!("weaken edit {i} ({:?})", e.op), weak));
        }
    }
    out
}

/// Whether a kernel leaves some shared access able to observe an in-flight copy, or a copy
/// outstanding at exit.
fn unsafe_async(k: &Kernel, target: &Target) -> bool {
    let c = completions(k, target);
    !c.hazards.is_empty() || !c.outstanding_at_exit.is_empty()
}

/// Plans, applies and checks sufficiency and maximality; returns the plan and output.
fn plan_and_check(k: &Kernel, target: &str) -> (SyncPlan, Kernel) {
    let tg = t(target);
    let plan = plan_waits(k, &tg).unwrap_or_else(|d| panic!("{d:?}")).plan;
    let out = apply(k, &plan).expect("the plan applies");
    assert!(smemsync::verify::verify(&out).is_empty());
    let c = completions(&out, &tg);
    assert!(
        c.hazards.is_empty(),
        "output still observes in-flight copies: {:?}\n{}",
        c.hazards,
        print(&out)
    );
    assert!(c.outstanding_at_exit.is_empty(), "{}", print(&out));
    for (what, m) in mutations(&plan) {
        let mk = apply(k, &m).expect("the plan applies");
        assert!(
            unsafe_async(&mk, &tg),
            "{what} is still safe: the count was not maximal\n{}",
            print(&mk)
        );
    }
    // Planning the output again adds nothing (waits are respected, none is redundant).
    let again = plan_waits(&out, &tg).unwrap().plan;
    assert!(again.edits.is_empty(), "replanning added {:?}", again.edits);
    (plan, out)
}

/// A hand-placed barrier at `at`.
fn barrier(at: ProgramPoint) -> Edit {
    Edit {
        at,
        op: OpKind::Barrier,
        reason: EditReason::Other(String::new()),
    }
}

fn print(k: &Kernel) -> String {
    smemsync::emit::text::print_kernel(k)
}

fn first(k: &Kernel, f: impl Fn(&OpKind) -> bool) -> Op {
    k.ops_in_order()
        .into_iter()
        .find(|o| f(&k.ops[*o].kind))
        .unwrap()
}

/// The first op of this kind is where a case reads the waits planned before it.
#[derive(Clone, Copy, Debug)]
enum At {
    Load,
    LocalLoad,
    Store,
}

impl At {
    fn matches(self, o: &OpKind) -> bool {
        match self {
            At::Load => matches!(o, OpKind::Load { .. }),
            At::LocalLoad => matches!(o, OpKind::LocalLoad { .. }),
            At::Store => matches!(o, OpKind::Store { .. }),
        }
    }
}

/// The kinds of the edits a plan inserts right before `op`, in order.
fn inserted_before(plan: &SyncPlan, op: Op) -> Vec<OpKind> {
    plan.edits
        .iter()
        .filter(|e| e.at == ProgramPoint::before(op))
        .map(|e| e.op.clone())
        .collect()
}

/// Plans and checks waits for `k` ([`plan_and_check`]) and returns the plan with the waits
/// it inserts before the first op `at` names.
fn waits_before(k: &Kernel, target: &str, at: At) -> (SyncPlan, Vec<OpKind>) {
    let (plan, _) = plan_and_check(k, target);
    let w = inserted_before(&plan, first(k, |o| at.matches(o)));
    (plan, w)
}

/// One case of the table below: a kernel, its target, where to look and the waits expected
/// there (derived by hand; the row says how).
struct Case {
    what: String,
    src: String,
    target: &'static str,
    at: At,
    want: Vec<OpKind>,
}

fn case(what: impl Into<String>, src: &str, target: &'static str, at: At, want: OpKind) -> Case {
    Case {
        what: what.into(),
        src: src.to_string(),
        target,
        at,
        want: vec![want],
    }
}

const SEED_003: &str = include_str!("../examples/gemm-tdm-triple-buffer.kir");

#[test]
fn seed_003_keeps_the_user_waits_and_adds_nothing() {
    let k = kernel(SEED_003);
    let (plan, _) = plan_and_check(&k, "gfx1250");
    assert!(plan.edits.is_empty(), "{:?}", plan.edits);
    // Without the user's drain, smemsync drains at the end of the kernel.
    let k = kernel(&SEED_003.replace("  waitcnt tensorcnt(0)\n", ""));
    let (plan, _) = plan_and_check(&k, "gfx1250");
    assert_eq!(plan.edits.len(), 1, "{:?}", plan.edits);
    assert_eq!(plan.edits[0].at, ProgramPoint::end(k.body()));
    assert_eq!(
        plan.edits[0].op,
        OpKind::WaitCnt(vec![(Counter::TensorCnt, 0)])
    );
}

#[test]
fn seed_003_explained() {
    let k = kernel(SEED_003);
    let s = explain_waits(&k, &t("gfx1250")).unwrap();
    assert!(s.contains("from the input"));
    assert!(s.contains("completes `tdm_load %ap <- %A[0, %col]` from the previous iteration (at least 3 younger tensorcnt"));
    assert!(s.contains("completes `tdm_load %bp <- %B[%col, 0]` from its last execution"));
    // The explanation is still a kernel.
    kernel(&s);
}

/// A multi-buffered cp.async pipeline (nvFuser's CircularBufferingTest.CpAsync2 shape):
/// `stages` slots, prefetch distance `p`, prologue unrolled, copies committed or not.
fn cp_async_pipeline(stages: u32, p: u32, commit: bool) -> String {
    let mut s = String::from(
        "kernel @cb(%X: global f32[64, 48], %Out: global f32[64, 48], %n: i32 in [0, 56]) block(48) {\n",
    );
    s += &format!("  shared @a : f32[{stages}, 48]\n  %t = tid.x\n");
    for r in 0..p {
        s += &format!("  cp_async @a[{r}, %t] <- %X[{r}, %t]\n");
        if commit {
            s += "  cp_async_commit\n";
        }
    }
    s += "  for %r = 0 to %n step 1 {\n";
    s += &format!(
        "    %rp = add %r, {p}\n    %ws = rem %rp, {stages}\n    %rs = rem %r, {stages}\n"
    );
    s += "    cp_async @a[%ws, %t] <- %X[%rp, %t]\n";
    if commit {
        s += "    cp_async_commit\n";
    }
    s += "    %v = load @a[%rs, %t]\n    %o = add %v, 1.0\n    gstore %Out[%r, %t], %o\n  }\n}\n";
    s
}

#[test]
fn cp_async_pipelines_wait_for_exactly_the_prefetched_group() {
    for p in 1..=3 {
        for stages in [p + 1, p + 2] {
            for commit in [true, false] {
                let k = kernel(&cp_async_pipeline(stages, p, commit));
                let (plan, mut w) = waits_before(&k, "sm_80", At::Load);
                w.retain(|kind| *kind != OpKind::CpAsyncCommit);
                // The copy read in iteration r was issued p iterations back: the p younger
                // groups (p-1 later iterations and this one) stay in flight.
                assert_eq!(
                    w,
                    vec![OpKind::CpAsyncWait(p)],
                    "stages {stages}, p {p}, commit {commit}"
                );
                if !commit {
                    assert!(plan.edits.iter().any(|e| e.op == OpKind::CpAsyncCommit));
                }
            }
        }
    }
}

/// F6's family: a cp.async loop with `stages` slots and prefetch distance `p` whose prologue
/// commits but whose loop commits nothing, with the user's `cp_async_wait {w}` before the read
/// and `cp_async_wait 0` after the loop.
fn uncommitted_loop(stages: u32, p: u32, w: u32) -> String {
    let mut s = String::from(
        "kernel @cb(%X: global f32[64, 48], %Out: global f32[64, 48], %n: i32 in [0, 56]) block(48) {\n",
    );
    s += &format!("  shared @a : f32[{stages}, 48]\n  %t = tid.x\n");
    for r in 0..p {
        s += &format!("  cp_async @a[{r}, %t] <- %X[{r}, %t]\n  cp_async_commit\n");
    }
    s += "  for %r = 0 to %n step 1 {\n";
    s += &format!(
        "    %rp = add %r, {p}\n    %ws = rem %rp, {stages}\n    %rs = rem %r, {stages}\n"
    );
    s += "    cp_async @a[%ws, %t] <- %X[%rp, %t]\n";
    s += &format!("    cp_async_wait {w}\n");
    s += "    %v = load @a[%rs, %t]\n    gstore %Out[%r, %t], %v\n  }\n  cp_async_wait 0\n}\n";
    s
}

/// On [`uncommitted_loop`] with `w <= p - 1` one commit at the end of the loop body suffices
/// (the copy read in iteration r has then p - 1 younger committed groups): the plan is that
/// commit alone, and its output passes [`plan_and_check`] (no read of a copy in flight,
/// nothing outstanding at exit, replanning adds nothing). The input itself is unsafe.
#[test]
fn a_prefetch_no_commit_in_its_loop_closes_gets_one_commit_at_the_loop_end() {
    for p in 1..=3 {
        for stages in [p + 1, p + 2] {
            for w in 0..p {
                let k = kernel(&uncommitted_loop(stages, p, w));
                assert!(unsafe_async(&k, &t("sm_80")));
                let body = k.ops[first(&k, |o| matches!(o, OpKind::For { .. }))].regions[0];
                for target in ["sm_80", "sm_90"] {
                    let (plan, _) = plan_and_check(&k, target);
                    let got: Vec<_> = plan.edits.iter().map(|e| (e.at, e.op.clone())).collect();
                    assert_eq!(
                        got,
                        vec![(ProgramPoint::end(body), OpKind::CpAsyncCommit)],
                        "stages {stages}, p {p}, w {w} on {target}"
                    );
                }
            }
        }
    }
}

#[test]
fn cp_async_same_thread_no_barrier_needed_waits_still_needed_on_sm_90() {
    let k = kernel(&cp_async_pipeline(2, 1, true));
    plan_and_check(&k, "sm_90");
}

/// gfx950 gather-to-LDS double buffer with plain global loads in between: vmcnt counts them.
fn gather_pipeline(gloads_after: u32) -> String {
    let mut s = String::from(
        "kernel @g(%X: global f32[64, 64], %Y: global f32[64, 64], %Out: global f32[64, 64], %n: i32) block(64) {\n",
    );
    s += "  shared @a : f32[2, 64]\n  %t = tid.x\n";
    s += "  gather_to_lds @a[0, %t] <- %X[0, %t]\n";
    s += "  %acc = for %r = 0 to %n step 1 iter(%c = 0.0) {\n";
    s += "    %r1 = add %r, 1\n    %ws = rem %r1, 2\n    %rs = rem %r, 2\n";
    s += "    gather_to_lds @a[%ws, %t] <- %X[%r1, %t]\n";
    for i in 0..gloads_after {
        s += &format!("    %y{i} = gload %Y[%r, %t]\n");
    }
    s += "    %v = load @a[%rs, %t]\n    %d = add %v, %c\n    yield %d\n  }\n";
    s += "  gstore %Out[0, %t], %acc\n}\n";
    s
}

/// Wave's test_gather_to_shared: loop { BAR ; acp SA ; acp SB ; =>vmcnt ; =>BAR ; sld x2 }.
const WAVE_GATHER_TO_SHARED: &str =
    "kernel @g2s(%A: global f16[64, 64], %B: global f16[64, 64], %n: i32) block(64) {
  shared @sa : f16[64]
  shared @sb : f16[64]
  %t = tid.x
  %acc = for %k = 0 to %n step 1 iter(%c = 0.0) {
    barrier
    gather_to_lds @sa[%t] <- %A[%k, %t]
    gather_to_lds @sb[%t] <- %B[%k, %t]
    barrier
    %x = load @sa[%t]
    %y = load @sb[%t]
    %d = compute \"mfma\"(%x, %y, %c) : f32
    yield %d
  }
}
";

/// Wave's test_wmma_with_tensor_load: tdm {V0,V1} ; tensorcnt 0 ; ... ; sld V0 ; sld V1.
const WAVE_TENSOR_LOAD: &str =
    "kernel @tl(%A: global f16[64, 64], %B: global f16[64, 64]) block(64) {
  shared @v0 : f16[16, 64]
  shared @v1 : f16[16, 64]
  %t = tid.x
  tdm_load @v0 <- %A[0, 0]
  tdm_load @v1 <- %B[0, 0]
  barrier
  %x = local_load @v0
  %y = local_load @v1
  %d = compute \"wmma\"(%x, %y) : f32
}
";

/// The wait planned before the first read, against the count derived by hand for each kernel
/// (every plan is also checked sufficient and maximal by `plan_and_check`).
#[test]
fn waits_before_the_first_read_match_the_hand_derived_counts() {
    use Counter::{AsyncCnt, LoadCnt, TensorCnt, VmCnt};
    let mut cases = vec![
        // a[k mod 3] was copied two iterations back: the 4 copies of the two later iterations
        // may stay in flight for the b read (and 5 for the a read: merged into one wait of 4).
        case(
            "seed 003 without its waits",
            &SEED_003.replace("waitcnt tensorcnt(2)", ""),
            "gfx1250",
            At::LocalLoad,
            OpKind::WaitCnt(vec![(TensorCnt, 4)]),
        ),
        // gfx1250 counts the gathers on asynccnt, apart from the global loads.
        case(
            "gathers with 2 global loads, gfx1250",
            &gather_pipeline(2),
            "gfx1250",
            At::Load,
            OpKind::WaitCnt(vec![(AsyncCnt, 1)]),
        ),
        // gfx1200 counts both on loadcnt, in order: the two global loads count.
        case(
            "gathers with 2 global loads, gfx1200",
            &gather_pipeline(2),
            "gfx1200",
            At::Load,
            OpKind::WaitCnt(vec![(LoadCnt, 3)]),
        ),
        // vmcnt(0) for both (the b copy is the newest): one wait, before the first read. Note
        // the wait lands after the user's barrier: the barrier placer must add one after it.
        case(
            "Wave's gather to shared",
            WAVE_GATHER_TO_SHARED,
            "gfx950",
            At::Load,
            OpKind::WaitCnt(vec![(VmCnt, 0)]),
        ),
        // V0 may stay 1 behind V1, but the second read needs V1: merged to tensorcnt(0).
        case(
            "Wave's tensor load without a loop",
            WAVE_TENSOR_LOAD,
            "gfx1250",
            At::LocalLoad,
            OpKind::WaitCnt(vec![(TensorCnt, 0)]),
        ),
    ];
    // gfx950's vmcnt counts plain global loads too: younger than the needed copy are this
    // iteration's copy and its g global loads.
    for g in 0..3 {
        cases.push(case(
            format!("gathers with {g} global loads, gfx950"),
            &gather_pipeline(g),
            "gfx950",
            At::Load,
            OpKind::WaitCnt(vec![(VmCnt, 1 + g)]),
        ));
    }
    // nvFuser FusionCpAsyncCommitWait: S = 8, P = 7 (nvFuser waits CP.WAIT(6) at the end of the
    // previous iteration; before the read, after this iteration's commit, that is 7), and
    // CircularBufferingTest's largest S = 9 with P = 8.
    for (stages, p) in [(8, 7), (9, 8), (5, 4)] {
        cases.push(case(
            format!("cp.async pipeline S {stages} P {p}"),
            &cp_async_pipeline(stages, p, true),
            "sm_80",
            At::Load,
            OpKind::CpAsyncWait(p),
        ));
    }
    for c in cases {
        let (_, w) = waits_before(&kernel(&c.src), c.target, c.at);
        assert_eq!(w, c.want, "{} on {}", c.what, c.target);
    }
}

#[test]
fn copies_in_if_take_the_minimum_over_both_arms() {
    let src = "kernel @c(%X: global f32[64], %Y: global f32[64], %Out: global f32[64], %f: i32) block(64) {
  shared @a : f32[64]
  %t = tid.x
  gather_to_lds @a[%t] <- %X[%t]
  %c = cmp lt %f, 3
  if %c {
    %y0 = gload %Y[%t]
    %y1 = gload %Y[%t]
  } else {
    %y2 = gload %Y[%t]
  }
  %v = load @a[%t]
  gstore %Out[%t], %v
}
";
    let k = kernel(src);
    let (plan, _) = plan_and_check(&k, "gfx942");
    assert_eq!(plan.edits[0].op, OpKind::WaitCnt(vec![(Counter::VmCnt, 1)]));
    // A copy issued in one arm only: the other arm has nothing in flight (a null dependency).
    let src2 = src.replace(
        "    %y2 = gload %Y[%t]\n",
        "    %y2 = gload %Y[%t]\n    gather_to_lds @a[%t] <- %X[%t]\n    %y3 = gload %Y[%t]\n",
    );
    let k2 = kernel(&src2);
    let (plan2, _) = plan_and_check(&k2, "gfx942");
    // Then-arm: first copy has 2 younger; else-arm: second copy has 1 younger.
    assert_eq!(
        plan2.edits[0].op,
        OpKind::WaitCnt(vec![(Counter::VmCnt, 1)])
    );
    // The independent checker agrees (concrete trip counts, hand-placed barriers).
    let concrete = src
        .replace("to %n step", "to 4 step")
        .replace("to %m step", "to 3 step");
    waits_checked_with_hand_barriers(&kernel(&concrete), "gfx942");
}

#[test]
fn user_waits_are_respected_never_weakened_and_not_duplicated() {
    let loop_wait = "    waitcnt tensorcnt(2)\n    yield";
    assert!(SEED_003.contains(loop_wait));
    // A user wait that is stronger than needed stays as is; nothing is added.
    let strong = kernel(&SEED_003.replace(loop_wait, "    waitcnt tensorcnt(0)\n    yield"));
    let (plan, out) = plan_and_check(&strong, "gfx1250");
    assert!(plan.edits.is_empty(), "{:?}", plan.edits);
    assert!(print(&out).contains("    waitcnt tensorcnt(0)\n    yield"));
    // A user wait that is too weak (tensorcnt(6) leaves the needed copies in flight) is kept,
    // and a sufficient one is added where the reads need it.
    let weak = kernel(&SEED_003.replace(loop_wait, "    waitcnt tensorcnt(6)\n    yield"));
    let (plan, out) = plan_and_check(&weak, "gfx1250");
    assert!(print(&out).contains("waitcnt tensorcnt(6)"));
    let ll = first(&weak, |o| At::LocalLoad.matches(o));
    assert_eq!(
        inserted_before(&plan, ll),
        vec![OpKind::WaitCnt(vec![(Counter::TensorCnt, 4)])]
    );
}

#[test]
fn waits_inside_nested_loops() {
    let src =
        "kernel @n(%X: global f32[64, 64], %Out: global f32[64], %n: i32, %m: i32) block(64) {
  shared @a : f32[2, 64]
  %t = tid.x
  for %i = 0 to %n step 1 {
    cp_async @a[0, %t] <- %X[%i, %t]
    cp_async_commit
    for %j = 0 to %m step 1 {
      %j1 = add %j, 1
      %s = rem %j1, 2
      cp_async @a[1, %t] <- %X[%j, %t]
      cp_async_commit
      %v = load @a[0, %t]
      gstore %Out[%t], %v
    }
  }
}
";
    let k = kernel(src);
    let (plan, w) = waits_before(&k, "sm_80", At::Load);
    // The inner copy rewrites slot 1 while the previous inner iteration's copy into it (the
    // newest group) may be in flight: wait 0 there, which also completes the slot-0 copy the
    // load needs, so the load needs no wait of its own.
    assert_eq!(w, vec![]);
    let cp = k
        .ops_in_order()
        .into_iter()
        .filter(|o| matches!(k.ops[*o].kind, OpKind::CpAsync { .. }))
        .nth(1)
        .unwrap();
    assert_eq!(inserted_before(&plan, cp), vec![OpKind::CpAsyncWait(0)]);
    // The independent checker agrees (concrete trip counts, hand-placed barriers).
    let concrete = src
        .replace("to %n step", "to 4 step")
        .replace("to %m step", "to 3 step");
    waits_checked_with_hand_barriers(&kernel(&concrete), "sm_80");
}

#[test]
fn tma_read_before_its_mbarrier_wait_is_reported() {
    let src = "kernel @tma(%X: global f32[4, 256], %Out: global f32[256]) block(256) {
  shared @a : f32[2, 256]
  shared @full : mbarrier[2]
  %t = tid.x
  %e = cmp eq %t, 0
  if %e {
    mbar_init @full[0], 1
  }
  barrier
  %v0 = view @a[0]
  if %e {
    mbar_expect_tx @full[0], 1024
    tma_load %v0 <- %X[0, 0], @full[0]
  }
  %x = load @a[0, %t]
  gstore %Out[%t], %x
}
";
    let k = kernel(src);
    let d = plan_waits(&k, &t("sm_90")).unwrap_err();
    assert_eq!(d[0].code, "E0602");
    // With the wait in place, nothing is reported or inserted.
    let ok = kernel(&src.replace(
        "  %x = load",
        "  %p = const 0 : i32\n  mbar_wait @full[0], %p\n  %x = load",
    ));
    let plan = plan_waits(&ok, &t("sm_90")).unwrap().plan;
    assert!(plan.edits.is_empty(), "{:?}", plan.edits);
}

#[test]
fn tma_circular_buffer_waits_complete_the_slot_copy() {
    // nvFuser C1 shape: TMA into slot (i+1) mod 2, wait on slot i mod 2, read slot i mod 2.
    let src = "kernel @c1(%X: global f32[64, 256], %Out: global f32[64, 256], %n: i32) block(256) {
  shared @a : f32[2, 256]
  shared @full : mbarrier[2]
  %t = tid.x
  %e = cmp eq %t, 0
  if %e {
    mbar_init @full[0], 1
    mbar_init @full[1], 1
  }
  barrier
  %v0 = view @a[0]
  if %e {
    mbar_expect_tx @full[0], 1024
    tma_load %v0 <- %X[0, 0], @full[0]
  }
  for %i = 0 to %n step 1 {
    %i1 = add %i, 1
    %ws = rem %i1, 2
    %rs = rem %i, 2
    %vw = view @a[%ws]
    if %e {
      mbar_expect_tx @full[%ws], 1024
      tma_load %vw <- %X[%i1, 0], @full[%ws]
    }
    %ph = div %i, 2
    %par = rem %ph, 2
    mbar_wait @full[%rs], %par
    %x = load @a[%rs, %t]
    gstore %Out[%i, %t], %x
    barrier
  }
}
";
    let k = kernel(src);
    let tg = t("sm_90");
    let c = completions(&k, &tg);
    assert!(c.hazards.is_empty(), "{:?}", c.hazards);
    let w = first(&k, |o| matches!(o, OpKind::MbarWait { .. }));
    let loop_tma = k
        .ops_in_order()
        .into_iter()
        .filter(|o| matches!(k.ops[*o].kind, OpKind::TmaLoad { .. }))
        .nth(1)
        .unwrap();
    assert!(c.by_copy[&loop_tma].contains(&w));
    // Removing the wait exposes the read.
    let k2 = kernel(&src.replace("    mbar_wait @full[%rs], %par\n", ""));
    assert!(!completions(&k2, &tg).hazards.is_empty());
}

#[test]
fn tma_store_then_overwrite_needs_bulk_wait() {
    // nvFuser C6(b): TMA store reads S1, the next iteration rewrites it: bulk_wait 0 before.
    let src = "kernel @st(%X: global f32[8, 128], %G: global f32[8, 128], %n: i32) block(128) {
  shared @s : f32[1, 128]
  %t = tid.x
  %e = cmp eq %t, 0
  for %o = 0 to %n step 1 {
    %x = gload %X[%o, %t]
    store @s[0, %t], %x
    fence_proxy_async
    barrier
    if %e {
      tma_store %G[%o, 0] <- @s
    }
  }
}
";
    let k = kernel(src);
    let (_, w) = waits_before(&k, "sm_90", At::Store);
    assert_eq!(
        w,
        vec![OpKind::BulkCommit, OpKind::BulkWait(0)]
            .into_iter()
            .filter(|k| *k != OpKind::BulkCommit || w.contains(k))
            .collect::<Vec<_>>()
    );
    assert!(w.contains(&OpKind::BulkWait(0)));
    // The independent checker agrees (concrete trip counts, hand-placed barriers).
    let concrete = src
        .replace("to %n step", "to 4 step")
        .replace("to %m step", "to 3 step");
    waits_checked_with_hand_barriers(&kernel(&concrete), "sm_90");
}

#[test]
fn wgmma_operand_overwrite_waits_for_the_group() {
    // nvFuser C7: wgmma reads A_s[k mod 3]; the TMA/stores refill slots; wgmma_wait before reuse.
    let src = "kernel @w(%X: global f32[64, 128], %n: i32) block(128) {
  shared @a : f32[3, 128]
  shared @b : f32[3, 128]
  %t = tid.x
  %acc = for %k = 0 to %n step 1 iter(%c = 0.0) {
    %s = rem %k, 3
    %x = gload %X[%k, %t]
    store @a[%s, %t], %x
    store @b[%s, %t], %x
    fence_proxy_async
    barrier
    %va = view @a[%s]
    %vb = view @b[%s]
    %d = wgmma %va, %vb, %c
    wgmma_commit
    yield %d
  }
}
";
    let k = kernel(src);
    let (_, w) = waits_before(&k, "sm_90", At::Store);
    // Slot k mod 3 was read by the wgmma of iteration k-3: two younger groups may stay.
    assert_eq!(w, vec![OpKind::WgmmaWait(2)]);
    // The independent checker agrees (concrete trip counts, hand-placed barriers).
    let concrete = src
        .replace("to %n step", "to 4 step")
        .replace("to %m step", "to 3 step");
    waits_checked_with_hand_barriers(&kernel(&concrete), "sm_90");
}

/// The pipeline: waits first, then barriers. After the waits, the barrier placer finds no
/// access observing an in-flight copy (its only unfixable async finding) and places barriers.
fn waits_then_barriers(cases: Vec<(String, &str)>) {
    use smemsync::sync::{PlaceOptions, place_barriers};
    for (src, tg) in cases {
        let k = kernel(&src);
        let tg = t(tg);
        // Without waits the placer reports the in-flight reads (a barrier cannot fix them).
        if completions(&k, &tg)
            .hazards
            .iter()
            .any(|h| effects_read(&k, h.consumer))
        {
            assert!(
                place_barriers(&k, &tg, &PlaceOptions::default()).is_err(),
                "{src}"
            );
        }
        let out = apply(&k, &plan_waits(&k, &tg).unwrap().plan).expect("the plan applies");
        let placed = place_barriers(&out, &tg, &PlaceOptions::default());
        assert!(placed.is_ok(), "{:?}\n{}", placed.err(), print(&out));
    }
}

#[test]
fn waits_then_barriers_on_copies_completed_within_one_iteration() {
    waits_then_barriers(vec![
        (cp_async_pipeline(2, 1, true), "sm_80"),
        (cp_async_pipeline(3, 1, false), "sm_80"),
        (gather_pipeline(1), "gfx950"),
        (
            include_str!("../examples/gemm-cp-async-double-buffer.kir")
                .replace("    cp_async_wait 1\n", ""),
            "sm_80",
        ),
        (
            include_str!("../examples/gemm-gather-to-lds.kir")
                .replace("    waitcnt vmcnt(0)\n", ""),
            "gfx950",
        ),
    ]);
}

/// Copies completed two or more iterations after their issue (prefetch distance >= 2): the
/// placer takes the completing waits from the in-flight dataflow
/// (`analysis::inflight::completions`), which follows a copy across any number of iterations.
#[test]
fn waits_then_barriers_on_copies_completed_iterations_later() {
    waits_then_barriers(vec![
        (SEED_003.replace("waitcnt tensorcnt(2)", ""), "gfx1250"),
        (cp_async_pipeline(4, 3, false), "sm_90"),
    ]);
}

fn effects_read(k: &Kernel, op: Op) -> bool {
    smemsync::ir::effects(k, op)
        .shared
        .iter()
        .any(|a| a.kind.reads() && !a.kind.is_async())
}

#[test]
fn a_wait_for_copies_issued_before_a_loop_is_hoisted_out_of_it() {
    // The weights are copied once, before the loop; every iteration reads them. The wait goes
    // before the loop (executed once), with the count of the loop entry: the global load
    // issued after the copy may stay outstanding.
    let src = "kernel @h(%W: global f32[64], %X: global f32[64, 64], %Out: global f32[64, 64], %n: i32) block(64) {
  shared @w : f32[64]
  %t = tid.x
  gather_to_lds @w[%t] <- %W[%t]
  %x0 = gload %X[0, %t]
  for %i = 0 to %n step 1 {
    %x = gload %X[%i, %t]
    %v = load @w[%t]
    %y = mul %v, %x
    %z = add %y, %x0
    gstore %Out[%i, %t], %z
  }
}
";
    let k = kernel(src);
    let (plan, _) = plan_and_check(&k, "gfx942");
    let l = first(&k, |o| matches!(o, OpKind::For { .. }));
    assert_eq!(plan.edits.len(), 1, "{:?}", plan.edits);
    assert_eq!(plan.edits[0].at, ProgramPoint::before(l));
    assert_eq!(plan.edits[0].op, OpKind::WaitCnt(vec![(Counter::VmCnt, 1)]));
    assert!(
        plan.edits[0]
            .reason
            .text()
            .contains("hoisted out of the loop")
    );
    // The independent checker agrees (concrete trip counts, hand-placed barriers).
    let concrete = src
        .replace("to %n step", "to 4 step")
        .replace("to %m step", "to 3 step");
    waits_checked_with_hand_barriers(&kernel(&concrete), "gfx942");
}

/// The independent race checker's verdict on a kernel (`Some(true)`: no race, no execution
/// error such as a copy outstanding at exit), from `check::check_race_free` with the target.
fn independent_race_free(k: &Kernel, t: &Target) -> Option<bool> {
    let opts = smemsync::check::CheckOptions {
        target: Some(*t),
        ..Default::default()
    };
    Some(smemsync::check::check_race_free(k, &opts).is_race_free())
}

/// Mutants of a final kernel (waits, then barriers): each wait the wait planner created,
/// weakened by one (count waits) or removed, in place.
fn final_mutants(fin: &Kernel, created: &[Op]) -> Vec<(String, Kernel)> {
    let mut out = Vec::new();
    let parents = fin.parents();
    for &w in created {
        let kind = fin.ops[w].kind.clone();
        if counts(&kind).is_empty() && !matches!(kind, OpKind::WaitTokens(_)) {
            continue;
        }
        if !counts(&kind).is_empty() {
            let mut m = fin.clone();
            m.ops[w].kind = bump(&kind);
            out.push((format!("weaken {kind:?}"), m));
        }
        let mut m = fin.clone();
        if let Some(r) = parents.op_region[w] {
            m.retain_ops(r, |o| *o != w);
        }
        out.push((format!("remove {kind:?}"), m));
    }
    out
}

#[test]
fn full_pipeline_outputs_and_their_mutants() {
    use smemsync::sync::{PlaceOptions, place_barriers};
    let cases: Vec<(String, &str)> = vec![
        (cp_async_pipeline(2, 1, true), "sm_80"),
        (cp_async_pipeline(3, 1, false), "sm_80"),
        (gather_pipeline(2), "gfx950"),
        (
            include_str!("../examples/gemm-gather-to-lds.kir")
                .replace("    waitcnt vmcnt(0)\n", ""),
            "gfx950",
        ),
    ];
    for (src, tg) in cases {
        // The checker interprets concrete trip counts: give the loops the count it runs, so
        // that the planner's counts (maximal for every trip count) are maximal for it too (a
        // zero-trip loop would otherwise justify a stronger drain the checker never sees).
        let k = kernel(&src.replace("to %n step", "to 4 step"));
        let tg = t(tg);
        let plan = plan_waits(&k, &tg).unwrap().plan;
        let waited = apply_tracked(&k, &plan).expect("the plan applies");
        let barriers = place_barriers(&waited.kernel, &tg, &PlaceOptions::default()).unwrap();
        let fin = smemsync::ir::edit::apply(&waited.kernel, &barriers.plan)
            .expect("plan anchored in its kernel");
        assert!(smemsync::verify::verify(&fin).is_empty());
        assert!(!unsafe_async(&fin, &tg));
        if let Some(ok) = independent_race_free(&fin, &tg) {
            assert!(ok, "race in\n{}", print(&fin));
        }
        let mutants = final_mutants(&fin, &waited.created);
        assert!(!mutants.is_empty());
        for (what, m) in mutants {
            assert!(unsafe_async(&m, &tg), "{what}: still safe\n{}", print(&m));
            if let Some(ok) = independent_race_free(&m, &tg) {
                assert!(!ok, "{what}: the checker finds no race\n{}", print(&m));
            }
        }
    }
}

#[test]
fn a_missing_tma_wait_is_reported_with_the_wait_to_write() {
    // The TMA pipeline example without its mbar_wait: the report spells out the slot and
    // the phase parity of the load read in each iteration; writing that wait makes the
    // kernel free of in-flight reads.
    let src = include_str!("../examples/tma-mbarrier-pipeline.kir");
    let wait = "    mbar_wait @full[%cs], %par\n";
    assert!(src.contains(wait));
    let k = kernel(&src.replace(wait, ""));
    let tg = t("sm_90");
    let d = plan_waits(&k, &tg).unwrap_err();
    let help = d
        .iter()
        .find_map(|d| d.help.clone().filter(|h| h.contains("issued 1 iteration")))
        .expect("a suggestion");
    assert!(help.contains("%mb_x = sub %i1, 1"), "{help}");
    assert!(
        help.contains("mbar_wait @full[%mb_slot], %mb_par"),
        "{help}"
    );
    let ops: String = help
        .lines()
        .skip(1)
        .map(|l| format!("  {}\n", l.trim_start()).replacen("  ", "    ", 1))
        .collect();
    let fixed = kernel(&src.replace(wait, &ops));
    let c = completions(&fixed, &tg);
    assert!(
        c.hazards
            .iter()
            .all(|h| !matches!(fixed.ops[h.consumer].kind, OpKind::Load { .. })),
        "{:?}",
        c.hazards
    );
}

/// smemsync's waits, plus the barriers the kernel needs placed by hand (one after each
/// inserted wait, so that other threads see the copies, and one at the end of each loop body,
/// for the slot the next iteration's copies overwrite), are race free for the independent
/// checker; weakening or removing any inserted wait makes it find a race.
fn waits_checked_with_hand_barriers(k: &Kernel, target: &str) {
    let tg = t(target);
    let plan = plan_waits(k, &tg).unwrap().plan;
    let mut edits = Vec::new();
    for e in &plan.edits {
        edits.push(e.clone());
        if let Anchor::Before(c) = e.at.anchor {
            edits.push(barrier(ProgramPoint::before(c)));
        }
    }
    for l in k
        .ops_in_order()
        .into_iter()
        .filter(|o| matches!(k.ops[*o].kind, OpKind::For { .. }))
    {
        edits.push(barrier(ProgramPoint::end(k.ops[l].regions[0])));
    }
    let applied = apply_tracked(
        k,
        &SyncPlan {
            edits: edits.clone(),
        },
    )
    .expect("the plan applies");
    let fin = &applied.kernel;
    assert_eq!(
        independent_race_free(fin, &tg),
        Some(true),
        "{}",
        print(fin)
    );
    let waits: Vec<Op> = edits
        .iter()
        .zip(&applied.created)
        .filter(|(e, _)| e.op != OpKind::Barrier)
        .map(|(_, o)| *o)
        .collect();
    assert!(!waits.is_empty());
    for (what, m) in final_mutants(fin, &waits) {
        assert_eq!(
            independent_race_free(&m, &tg),
            Some(false),
            "{what}: the checker finds no race\n{}",
            print(&m)
        );
    }
}

#[test]
fn seed_003_waits_are_proved_sufficient_and_maximal_by_the_checker() {
    waits_checked_with_hand_barriers(
        &kernel(&SEED_003.replace("waitcnt tensorcnt(2)", "")),
        "gfx1250",
    );
    // And with the elected thread's copies and the user's drain, but no loop wait.
    waits_checked_with_hand_barriers(
        &kernel(&SEED_003.replace("    waitcnt tensorcnt(2)\n    yield", "    yield")),
        "gfx1250",
    );
}

#[test]
fn deep_prefetch_waits_are_proved_sufficient_and_maximal_by_the_checker() {
    for (stages, p, commit) in [(4, 3, false), (3, 2, true), (2, 1, false)] {
        let src = cp_async_pipeline(stages, p, commit).replace("to %n step", "to 6 step");
        waits_checked_with_hand_barriers(&kernel(&src), "sm_80");
    }
    for g in 0..3 {
        waits_checked_with_hand_barriers(
            &kernel(&gather_pipeline(g).replace("to %n step", "to 5 step")),
            "gfx950",
        );
    }
}

/// A tile copied row block by row block (`%rr = 4*r + ty`, `ty` in `[0, 4)`): the copies of
/// iterations `r` and `r + d` (`d >= 1`) write rows that never coincide, so no copy waits for
/// an earlier one, in the prologue's copy loop or in the main loop's. Shaped like
/// `benches/gpu/gemm.kir`, with a concrete trip count for the checker (and `%has` true in
/// every iteration the checker runs: it does not count an empty group as pending).
const ROW_BLOCK_PIPELINE: &str = r#"
kernel @rows(%A: global f32[8, 64]) block(8, 4) grid(1, 1) {
  shared @a : f32[3, 8, 8]
  %tx = tid.x
  %ty = tid.y
  for %s = 0 to 2 step 1 {
    %kc = mul %s, 8
    for %r = 0 to 2 step 1 {
      %r4 = mul %r, 4
      %rr = add %r4, %ty
      %ka = add %kc, %tx
      cp_async @a[%s, %rr, %tx] <- %A[%rr, %ka]
    }
    cp_async_commit
  }
  %c = for %k = 0 to 4 step 1 iter(%acc = 0.0) {
    %slot = rem %k, 3
    cp_async_wait 1
    %nk = add %k, 2
    %ns = rem %nk, 3
    %has = cmp lt %nk, 6
    if %has {
      %kc2 = mul %nk, 8
      for %r2 = 0 to 2 step 1 {
        %r42 = mul %r2, 4
        %rr2 = add %r42, %ty
        %ka2 = add %kc2, %tx
        cp_async @a[%ns, %rr2, %tx] <- %A[%rr2, %ka2]
      }
    }
    cp_async_commit
    %at = view @a[%slot]
    %y1 = add %ty, 4
    %v0 = load %at[%ty, %tx]
    %v1 = load %at[%y1, %tx]
    %m = add %v0, %v1
    %f = add %acc, %m
    yield %f
  }
  cp_async_wait 0
}
"#;

/// Asserts that no edit of `plan` (the waits of `k`, giving `out`) lands inside a loop of
/// `k` that issues copies (there are two).
fn assert_no_edit_in_a_copy_loop(k: &Kernel, plan: &SyncPlan, out: &Kernel) {
    let parents = k.parents();
    let copy_loops: Vec<Op> = k
        .ops_in_order()
        .into_iter()
        .filter(|o| matches!(k.ops[*o].kind, OpKind::For { .. }))
        .filter(|l| {
            k.region_ops(k.ops[*l].regions[0])
                .iter()
                .any(|o| matches!(k.ops[*o].kind, OpKind::CpAsync { .. }))
        })
        .collect();
    assert_eq!(copy_loops.len(), 2);
    for e in &plan.edits {
        let inside = match e.at.anchor {
            Anchor::Before(o) => parents.ancestors(o).iter().any(|a| copy_loops.contains(a)),
            Anchor::End(r) => copy_loops.iter().any(|l| {
                k.ops[*l].regions[0] == r
                    || parents.region_op[r].is_some_and(|o| parents.ancestors(o).contains(l))
            }),
            other => panic!("the wait planner anchored an edit at {other:?}"),
        };
        assert!(!inside, "edit inside a copy loop: {e:?}\n{}", print(out));
    }
}

/// `k` with the waits of `plan`, a barrier after each wait (other threads read the rows), one
/// after the main loop's wait and one at the end of each loop body (the slot the next
/// iteration overwrites).
fn with_row_block_barriers(k: &Kernel, plan: &SyncPlan) -> Kernel {
    let mut edits = Vec::new();
    for e in &plan.edits {
        edits.push(e.clone());
        if let Anchor::Before(c) = e.at.anchor {
            edits.push(barrier(ProgramPoint::before(c)));
        }
    }
    let order = k.ops_in_order();
    let main_wait = first(k, |o| matches!(o, OpKind::CpAsyncWait(1)));
    let after_wait = order.iter().position(|o| *o == main_wait).unwrap() + 1;
    edits.push(barrier(ProgramPoint::before(order[after_wait])));
    for l in order
        .iter()
        .filter(|o| matches!(k.ops[**o].kind, OpKind::For { .. }))
    {
        edits.push(barrier(ProgramPoint::end(k.ops[*l].regions[0])));
    }
    apply(k, &SyncPlan { edits }).expect("the plan applies")
}

#[test]
fn row_block_copies_never_wait_for_each_other_inside_the_copy_loop() {
    let k = kernel(ROW_BLOCK_PIPELINE);
    let tg = t("sm_90");
    // Without any wait before the reads, only the reads need one: no copy is a consumer of an
    // earlier copy (their rows differ), so no edit lands inside a copy loop.
    let (plan, out) = plan_and_check(&k, "sm_90");
    assert_no_edit_in_a_copy_loop(&k, &plan, &out);
    let printed = print(&out);
    for body in printed.split("for %r").skip(1) {
        let body = &body[..body.find('}').unwrap()];
        assert!(!body.contains("cp_async_wait"), "{printed}");
        assert!(!body.contains("cp_async_commit"), "{printed}");
    }
    // No copy observes another in flight, in the output or in the input.
    let c = completions(&k, &tg);
    assert!(
        !c.hazards
            .iter()
            .any(|h| matches!(k.ops[h.consumer].kind, OpKind::CpAsync { .. })),
        "{:?}",
        c.hazards
    );
    // The independent checker agrees: the output, with barriers after its waits (other
    // threads read the rows) and at the end of each loop body (the slot the next iteration
    // overwrites), is race free.
    let fin = with_row_block_barriers(&k, &plan);
    assert_eq!(
        independent_race_free(&fin, &tg),
        Some(true),
        "{}",
        print(&fin)
    );
    // ... and it does see the race once the main loop's own wait is gone.
    let mut racy = fin.clone();
    let p = fin.parents();
    let w = first(&fin, |o| matches!(o, OpKind::CpAsyncWait(1)));
    racy.retain_ops(p.op_region[w].unwrap(), |o| *o != w);
    assert_eq!(
        independent_race_free(&racy, &tg),
        Some(false),
        "{}",
        print(&racy)
    );
}
