//! The in-flight analysis on seed 003's kernel and small variations.

use smemsync::analysis::inflight::{Queue, completions};
use smemsync::analysis::overlap::IterTag;
use smemsync::ir::{Counter, OpKind};
use smemsync::target::Target;

mod common;
use common::ops_where;
use common::parse_verified as kernel;

#[test]
fn seed_003_reads_never_observe_an_inflight_copy() {
    let k = kernel(include_str!("../examples/gemm-tdm-triple-buffer.kir"));
    let c = completions(&k, &Target::from_name("gfx1250").unwrap());
    assert!(c.hazards.is_empty(), "{:?}", c.hazards);
    // Each loop wait completes the copies of two iterations ago, and the prologue's.
    let waits = ops_where(&k, |o| matches!(o, OpKind::WaitCnt(_)));
    let tdm = ops_where(&k, |o| matches!(o, OpKind::TdmLoad { .. }));
    let loop_wait = waits[1];
    for copy in &tdm[4..] {
        assert!(
            c.by_copy[copy].contains(&loop_wait),
            "loop copy {copy} completed by the loop wait"
        );
    }
    for copy in &tdm[..4] {
        assert!(!c.by_copy.get(copy).map(|s| s.is_empty()).unwrap_or(true));
    }
    // The ages the loop wait sees are at least its count.
    for comp in &c.by_wait[&loop_wait] {
        assert_eq!(comp.queue, Queue::Counter(Counter::TensorCnt));
        assert!(comp.age >= 2);
    }
    // The final drain completes the last two iterations' copies.
    assert!(c.outstanding_at_exit.is_empty());
    let drain = waits[2];
    for copy in &tdm[4..] {
        assert!(c.by_copy[copy].contains(&drain));
    }
    // Without it they are outstanding when the kernel ends.
    let k2 = kernel(
        &include_str!("../examples/gemm-tdm-triple-buffer.kir").replace("waitcnt tensorcnt(0)", ""),
    );
    let c2 = completions(&k2, &Target::from_name("gfx1250").unwrap());
    assert_eq!(
        c2.outstanding_at_exit.len(),
        4,
        "{:?}",
        c2.outstanding_at_exit
    );
}

#[test]
fn seed_003_without_waits_reads_observe_the_copy_two_iterations_back() {
    let src =
        include_str!("../examples/gemm-tdm-triple-buffer.kir").replace("waitcnt tensorcnt(2)", "");
    let k = kernel(&src);
    let c = completions(&k, &Target::from_name("gfx1250").unwrap());
    let tdm = ops_where(&k, |o| matches!(o, OpKind::TdmLoad { .. }));
    let loads = ops_where(&k, |o| matches!(o, OpKind::LocalLoad { .. }));
    // Reads of slot k mod 3 may see the copy into slot (k+2) mod 3 of iteration k-2 only.
    let h: Vec<_> = c
        .hazards
        .iter()
        .filter(|h| h.consumer == loads[0] && h.copy == tdm[4])
        .collect();
    assert!(
        h.iter()
            .any(|h| format!("{:?}", h.tags.last().unwrap().1) == "Dist(2)")
    );
    for h in &h {
        // Slot (k-d+2) mod 3 equals k mod 3 exactly when d = 2 (mod 3); beyond the tag cap
        // the iteration (and so the slot) is unknown.
        match h.tags.last().unwrap().1 {
            IterTag::Dist(d) => assert_eq!(d % 3, 2, "{h:?}"),
            IterTag::Unknown => {}
            IterTag::Pre(_) | IterTag::Last(_) | IterTag::PreLast(..) => panic!("{h:?}"),
        }
    }
    // The prologue copy of slot 1 may be seen (in iteration 1), the b copies never by loads[0].
    assert!(
        c.hazards
            .iter()
            .any(|h| h.consumer == loads[0] && h.copy == tdm[2])
    );
    assert!(
        !c.hazards
            .iter()
            .any(|h| h.consumer == loads[0] && (h.copy == tdm[1] || h.copy == tdm[5]))
    );
}

#[test]
fn loop_completion_gives_the_wait_and_the_iteration_distance() {
    let src = include_str!("../examples/gemm-tdm-triple-buffer.kir");
    let k = kernel(src);
    let t = Target::from_name("gfx1250").unwrap();
    let c = completions(&k, &t);
    let tdm = ops_where(&k, |o| matches!(o, OpKind::TdmLoad { .. }));
    let waits = ops_where(&k, |o| matches!(o, OpKind::WaitCnt(_)));
    // The loop's copies: completed by the loop wait of the next iteration (tensorcnt(2) keeps
    // this iteration's two in flight), and by the final drain on the exit path.
    for copy in &tdm[4..] {
        let lc = c.loop_completion(&k, *copy);
        assert_eq!(lc.in_loop, Some((waits[1], 1)));
        assert_eq!(lc.exit, Some(waits[2]));
    }
    // The first prologue copies: the wait right after the prologue.
    assert_eq!(c.loop_completion(&k, tdm[0]).in_loop, Some((waits[0], 0)));
    // Without the loop wait, smemsync's inserted wait completes them two iterations later.
    let k2 = kernel(&src.replace("    waitcnt tensorcnt(2)\n    yield", "    yield"));
    let plan = smemsync::sync::waits::plan_waits(&k2, &t).unwrap().plan;
    let out = smemsync::ir::edit::apply_tracked(&k2, &plan).unwrap();
    let c2 = completions(&out.kernel, &t);
    let tdm2 = ops_where(&k2, |o| matches!(o, OpKind::TdmLoad { .. }));
    let lc = c2.loop_completion(&out.kernel, tdm2[4]);
    assert_eq!(lc.in_loop, Some((out.created[0], 2)));
}
