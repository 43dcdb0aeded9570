//! The in-flight dataflow's indexes (docs/async.md, "What one `sync` costs"): the conflict
//! queries that visit only the entries of a consumer's near copies (`Flow::near_entries`)
//! answer what a scan of every entry answers (`FlowMemo::no_index`: the oracle), query by
//! query and in the waits, completions and barriers planned from them; and the completions'
//! index of each wait's executions by copy (`Completions::completed_by`) lists what a filter
//! of the wait's list lists, also once the lists changed after the index was built.
//!
//! CI (the debug build) runs the examples, the file tests and the 32×32×32 GEMMs on sm_80;
//! the other targets and the 64×64×32 GEMMs are the ignored tests (`--release -- --ignored`).

use smemsync::analysis::inflight::{
    Completions, Flow, FlowMemo, InFlight, Pending, Queue, Visitor, completions_memo,
};
use smemsync::ir::edit::apply;
use smemsync::ir::{Kernel, Op};
use smemsync::sync::PlaceMemo;
use smemsync::sync::waits::plan_waits_memo;
use smemsync::target::Target;

mod common;
use common::switch::{self, Named};

/// The examples and the async and placement file tests, with GEMMs at `shape` (64 and 256
/// threads, copies unrolled; 64 threads rolled), whose unrolled copies make near sets of a
/// few copies among hundreds.
fn kernels(shape: (u32, u32, u32)) -> Vec<Named> {
    let mut out = switch::async_and_placement_kernels();
    out.extend(switch::gemm_kernels(
        shape,
        &[(64, true), (256, true), (64, false)],
    ));
    out
}

/// CI's list (the debug build): the small GEMMs. The 64×64×32 ones are the ignored tests.
const SMALL: (u32, u32, u32) = (32, 32, 32);
const LARGER: (u32, u32, u32) = (64, 64, 32);

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

/// The conflict queries of one solver run with the index on or off, and how many queries
/// the index answered.
fn queries(k: &Kernel, t: &Target, index: bool) -> (Vec<Query>, u64) {
    let mut memo = FlowMemo::for_kernel(k);
    memo.no_index = !index;
    let mut flow = Flow::with_memo(k, t, memo);
    let mut v = Queries::default();
    flow.run(&mut v);
    (v.0, flow.stats.indexed)
}

#[test]
fn the_index_answers_every_conflict_query_as_the_scan() {
    let mut ks = common::verified_file_kernels(&["examples", "tests/filetests/async"], 40);
    ks.extend(switch::gemm_kernels(SMALL, &[(64, true)]));
    assert_queries_equal(&ks, &["sm_80"]);
}

#[test]
#[ignore = "a minute in a debug build: run with --release -- --ignored"]
fn the_index_answers_every_conflict_query_of_the_larger_gemms_as_the_scan() {
    assert_queries_equal(&kernels(SMALL), &["sm_90", "gfx950"]);
    assert_queries_equal(&kernels(LARGER), &["sm_80", "sm_90", "gfx950"]);
}

fn assert_queries_equal(ks: &[Named], targets: &[&str]) {
    let mut indexed = 0;
    for t in targets {
        let t = Target::from_name(t).unwrap();
        for (name, k) in ks {
            let (on, n) = queries(k, &t, true);
            let (off, m) = queries(k, &t, false);
            assert_eq!(m, 0, "{name}: the switch turns the index off");
            assert_eq!(
                on, off,
                "conflict queries of {name} on {}: index on, off",
                t.name
            );
            if name.contains("unrolled=true") {
                indexed += n;
            }
        }
    }
    assert!(
        indexed > 100,
        "the index is not vacuous: {indexed} queries on the unrolled GEMMs"
    );
}

#[test]
fn the_index_changes_no_wait_completion_or_barrier() {
    assert_pipeline_equal(
        &switch::gemm_kernels(SMALL, &[(64, true), (256, true)]),
        &["sm_80"],
    );
}

#[test]
#[ignore = "minutes in a debug build: run with --release -- --ignored"]
fn the_index_changes_no_wait_completion_or_barrier_of_the_larger_gemms() {
    assert_pipeline_equal(&kernels(LARGER), &["sm_80", "sm_90", "gfx950"]);
}

fn assert_pipeline_equal(ks: &[Named], targets: &[&str]) {
    switch::assert_switch_changes_nothing(
        "waits, completions and barriers",
        ks,
        targets,
        |k, t, index| {
            let mut pm = PlaceMemo {
                flow: FlowMemo::for_kernel(k),
                footprints: Some(Box::default()),
            };
            pm.flow.no_index = !index;
            switch::waits_completions_barriers(k, t, &mut pm, switch::COMPLETIONS)
        },
    );
}

/// The completions of `k` with its planned waits (`None` where planning fails).
fn completions_with_waits(k: &Kernel, t: &Target) -> Option<Completions> {
    let mut memo = FlowMemo::for_kernel(k);
    let plan = plan_waits_memo(k, t, &mut memo).ok()?;
    let w = apply(k, &plan.plan).unwrap();
    Some(completions_memo(&w, t, &mut memo))
}

/// `completed_by(w, copy)` against the filter of `by_wait[w]`, for every wait and copy.
fn assert_index_lists_the_filter(c: &Completions, what: &str) -> usize {
    let copies: Vec<Op> = c.by_copy.keys().copied().collect();
    let mut listed = 0;
    for (w, list) in &c.by_wait {
        for &copy in &copies {
            let got: Vec<_> = c.completed_by(*w, copy).collect();
            let want: Vec<_> = list.iter().filter(|x| x.copy == copy).collect();
            assert_eq!(got, want, "{what}: wait {w:?}, copy {copy:?}");
            listed += got.len();
        }
    }
    listed
}

#[test]
fn completed_by_lists_each_waits_executions_of_a_copy() {
    assert_completed_by(&kernels(SMALL), 100);
}

#[test]
#[ignore = "a minute in a debug build: run with --release -- --ignored"]
fn completed_by_lists_each_waits_executions_of_a_copy_of_the_larger_gemms() {
    assert_completed_by(&kernels(LARGER), 1000);
}

fn assert_completed_by(ks: &[Named], at_least: usize) {
    let t = Target::from_name("sm_80").unwrap();
    let mut listed = 0;
    for (name, k) in ks {
        let Some(mut c) = completions_with_waits(k, &t) else {
            continue;
        };
        listed += assert_index_lists_the_filter(&c, name);
        // The lists change after the index was built: the lookup must see it.
        let Some((&w, list)) = c.by_wait.iter_mut().next() else {
            continue;
        };
        let Some(x) = list.first().cloned() else {
            continue;
        };
        list.push(x);
        assert_index_lists_the_filter(&c, &format!("{name} with an execution added at {w:?}"));
    }
    assert!(listed > at_least, "{listed} executions listed");
}
