//! The in-flight question's block leaves read per side through a memo
//! (`Overlap::side_leaves`, docs/async.md, "What one `sync` costs") against the walk of both
//! sides' operands on every question (`Overlap::leaf_memo` off: the oracle): every conflict
//! query of a solver run, and the conservative warnings it raised, are the same.
//!
//! CI (the debug build): the examples, the async file tests and the 32×32×32 t64 unrolled
//! GEMM on sm_80.

use smemsync::analysis::inflight::{Flow, FlowMemo, InFlight, Pending, Queue, Visitor};
use smemsync::ir::{Kernel, Op};
use smemsync::target::Target;

mod common;
use common::switch;

/// One conflict query's answer: the op and the conflicts found in one of its states.
type Query = (Op, Vec<(Queue, Pending, i32)>);

/// Every conflict query of one run of the solver.
#[derive(Default)]
struct Queries(Vec<Query>);

impl Visitor for Queries {
    fn before(&mut self, flow: &mut Flow<'_>, op: Op, states: &mut [InFlight]) {
        for s in states.iter() {
            let c = flow.conflicts(op, s);
            self.0.push((op, c));
        }
    }
}

/// The conflict queries of one solver run with the leaf memo on or off, and the
/// conservative warnings (as debug text) they raised.
fn queries(k: &Kernel, t: &Target, memo: bool) -> (Vec<Query>, String) {
    let mut flow = Flow::with_memo(k, t, FlowMemo::for_kernel(k));
    flow.overlap.leaf_memo = memo;
    let mut v = Queries::default();
    flow.run(&mut v);
    let w = format!("{:?}", flow.overlap.conservative_warnings());
    (v.0, w)
}

#[test]
fn the_leaf_memo_answers_every_conflict_query_as_the_walk() {
    let mut ks = common::verified_file_kernels(&["examples", "tests/filetests/async"], 40);
    ks.extend(switch::gemm_kernels((32, 32, 32), &[(64, true)]));
    let t = Target::from_name("sm_80").unwrap();
    let mut asked = 0;
    for (name, k) in &ks {
        let on = queries(k, &t, true);
        let off = queries(k, &t, false);
        assert_eq!(
            on, off,
            "conflict queries and warnings of {name}: memo on, off"
        );
        asked += on.0.iter().filter(|q| !q.1.is_empty()).count();
    }
    assert!(
        asked > 50,
        "the comparison is not vacuous: {asked} queries found conflicts"
    );
}
