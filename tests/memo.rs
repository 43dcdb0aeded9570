//! The memos shared by the runs of one `sync` (`analysis::inflight::FlowMemo`,
//! `analysis::footprint::FootprintMemo`) are keyed by op ids: inserting waits must keep every
//! existing id, and answers read from a memo must equal answers computed afresh.

use smemsync::analysis::inflight::{FlowMemo, completions, completions_memo};
use smemsync::bench_kernels::{GemmShape, gemm};
use smemsync::ir::edit::apply;
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
