//! The polynomial counter dataflow agrees with seed 002's path-enumerating walk on small
//! generated loops (copies and global loads in `if` arms, prologue copies, consumers at
//! several depths), and the benchmark comparing their running times (run with
//! `cargo test --release --test wait_counters_oracle -- --ignored --nocapture`).

use std::time::Instant;

use smemsync::analysis::inflight::{Queue, completions};
use smemsync::ir::{Counter, Kernel, Op, OpKind};
use smemsync::sync::waits::plan_waits;
use smemsync::sync::waits_paths::walk_counter;
use smemsync::target::Target;

mod common;
use common::copy_paths_kernel_text as generate;
use common::ops_where as ops;
use common::parse_verified as kernel;

/// The dataflow's count for a consumer: the minimum age of the copies it may observe.
fn dataflow_count(k: &Kernel, t: &Target, consumer: Op) -> Option<u32> {
    let c = completions(k, t);
    c.hazards
        .iter()
        .filter(|h| h.consumer == consumer)
        .map(|h| h.age as u32)
        .min()
}

#[test]
fn dataflow_counts_equal_the_path_walk_on_small_loops() {
    let t = Target::from_name("gfx942").unwrap();
    let mut compared = 0;
    for seed in 0..60 {
        let src = generate(seed, false);
        let k = kernel(&src);
        let load = ops(&k, |o| matches!(o, OpKind::Load { .. }))[0];
        let copies = ops(&k, |o| matches!(o, OpKind::GatherToLds { .. }));
        let max = 24;
        let walk = walk_counter(&k, &t, load, &copies, Queue::Counter(Counter::VmCnt), max);
        let flow = dataflow_count(&k, &t, load);
        assert_eq!(flow, walk.count.filter(|c| *c < max), "seed {seed}\n{src}");
        if flow.is_some() {
            compared += 1;
        }
    }
    // Most generated kernels have a copy to wait for.
    assert!(compared > 20, "{compared}");
}

/// `m` sequential two-way branches with one and two global loads, after one copy.
fn branchy(m: usize) -> String {
    let mut s = String::from(
        "kernel @b(%X: global f32[64], %Y: global f32[64], %Out: global f32[64], %n: i32) block(64) {\n  shared @a : f32[64]\n  %t = tid.x\n  %c = cmp lt %t, 32\n  for %k = 0 to %n step 1 {\n    gather_to_lds @a[%t] <- %X[%t]\n",
    );
    for i in 0..m {
        s += &format!(
            "    if %c {{\n      %p{i} = gload %Y[%t]\n      %q{i} = gload %Y[%t]\n    }} else {{\n      %r{i} = gload %Y[%t]\n    }}\n"
        );
    }
    s += "    %v = load @a[%t]\n    gstore %Out[%t], %v\n  }\n}\n";
    s
}

#[test]
fn tracked_conditions_make_the_dataflow_at_least_as_large_as_the_walk() {
    // The walk also follows infeasible paths (one `if %c` then, the next else): its count is
    // a lower bound of the dataflow's, which skips them.
    let t = Target::from_name("gfx942").unwrap();
    let mut larger = 0;
    for seed in 0..40 {
        let src = generate(seed, true);
        let k = kernel(&src);
        let load = ops(&k, |o| matches!(o, OpKind::Load { .. }))[0];
        let copies = ops(&k, |o| matches!(o, OpKind::GatherToLds { .. }));
        let walk = walk_counter(&k, &t, load, &copies, Queue::Counter(Counter::VmCnt), 24)
            .count
            .filter(|c| *c < 24);
        let flow = dataflow_count(&k, &t, load);
        match (flow, walk) {
            (Some(f), Some(w)) => {
                assert!(f >= w, "seed {seed}\n{src}");
                larger += (f > w) as u32;
            }
            // The walk's paths include the dataflow's: a copy the dataflow sees, it sees too.
            (Some(_), None) => panic!("seed {seed}\n{src}"),
            _ => {}
        }
    }
    assert!(larger > 0);
}

#[test]
fn walk_is_exponential_and_dataflow_is_not_on_small_sizes() {
    let t = Target::from_name("gfx950").unwrap();
    let mut paths = Vec::new();
    for m in [2, 4, 6] {
        let k = kernel(&branchy(m));
        let load = ops(&k, |o| matches!(o, OpKind::Load { .. }))[0];
        let copies = ops(&k, |o| matches!(o, OpKind::GatherToLds { .. }));
        let w = walk_counter(&k, &t, load, &copies, Queue::Counter(Counter::VmCnt), 1000);
        assert_eq!(w.count, Some(m as u32));
        assert_eq!(dataflow_count(&k, &t, load), Some(m as u32));
        paths.push(w.paths);
    }
    assert_eq!(paths, vec![4, 16, 64]);
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn bench_wait_counters() {
    let t = Target::from_name("gfx950").unwrap();
    println!(
        "| branches m | ops | paths walked | path walk (ms) | dataflow plan_waits (ms) | N walk | N dataflow |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for m in [2, 4, 8, 12, 16, 18, 20, 22, 64, 256] {
        let k = kernel(&branchy(m));
        let load = ops(&k, |o| matches!(o, OpKind::Load { .. }))[0];
        let copies = ops(&k, |o| matches!(o, OpKind::GatherToLds { .. }));
        // Best of three runs (one for the largest walk): the machine is shared.
        let reps = if m >= 22 { 1 } else { 3 };
        let (walk_ms, w) = if m <= 22 {
            let mut best = f64::MAX;
            let mut w = None;
            for _ in 0..reps {
                let t0 = Instant::now();
                w = Some(walk_counter(
                    &k,
                    &t,
                    load,
                    &copies,
                    Queue::Counter(Counter::VmCnt),
                    100_000,
                ));
                best = best.min(t0.elapsed().as_secs_f64() * 1e3);
            }
            (format!("{best:.2}"), w)
        } else {
            ("(skipped)".into(), None)
        };
        let mut flow_ms = f64::MAX;
        let mut plan = None;
        for _ in 0..3 {
            let t0 = Instant::now();
            plan = Some(plan_waits(&k, &t).unwrap());
            flow_ms = flow_ms.min(t0.elapsed().as_secs_f64() * 1e3);
        }
        let plan = plan.unwrap().plan;
        let n = plan
            .edits
            .iter()
            .find(|e| e.at == smemsync::ir::edit::ProgramPoint::before(load))
            .map(|e| match &e.op {
                OpKind::WaitCnt(c) => c
                    .iter()
                    .map(|(x, n)| format!("{}({n})", x.name()))
                    .collect::<Vec<_>>()
                    .join(" "),
                k => format!("{k:?}"),
            })
            .unwrap_or_default();
        println!(
            "| {m} | {} | {} | {walk_ms} | {flow_ms:.2} | {} | {n} |",
            k.ops_in_order().len(),
            w.map(|w| w.paths.to_string()).unwrap_or("-".into()),
            w.and_then(|w| w.count)
                .map(|c| c.to_string())
                .unwrap_or("-".into()),
        );
    }
}

/// Generated loops (copies and global loads in `if` arms on a per-thread condition, prologue
/// copies, consumers in and out of branches), three iterations: the independent race checker
/// finds every planned output race free, and a race (or a copy outstanding at exit) once any
/// inserted wait is weakened by one or removed.
#[test]
fn planned_waits_on_generated_loops_are_sufficient_and_maximal_for_the_checker() {
    use smemsync::check::{CheckOptions, check_race_free};
    use smemsync::ir::edit::apply_tracked;
    use smemsync::sync::waits::plan_waits;
    let t = Target::from_name("gfx942").unwrap();
    let opts = CheckOptions {
        target: Some(t),
        ..Default::default()
    };
    let mut mutants = 0;
    for seed in 0..25 {
        let src = generate(seed, true).replace("to %n step", "to 3 step");
        let k = kernel(&src);
        let plan = plan_waits(&k, &t).unwrap().plan;
        let out = apply_tracked(&k, &plan).unwrap();
        let fin = &out.kernel;
        assert!(
            check_race_free(fin, &opts).is_race_free(),
            "seed {seed}\n{}",
            smemsync::emit::text::print_kernel(fin)
        );
        let parents = fin.parents();
        for &w in &out.created {
            let OpKind::WaitCnt(cs) = fin.ops[w].kind.clone() else {
                continue;
            };
            let mut weak = fin.clone();
            weak.ops[w].kind = OpKind::WaitCnt(cs.iter().map(|(c, n)| (*c, n + 1)).collect());
            let mut gone = fin.clone();
            if let Some(r) = parents.op_region[w] {
                gone.retain_ops(r, |o| *o != w);
            }
            for (what, m) in [("weakened", weak), ("removed", gone)] {
                mutants += 1;
                assert!(
                    !check_race_free(&m, &opts).is_race_free(),
                    "seed {seed}: {what} wait still safe\n{}",
                    smemsync::emit::text::print_kernel(&m)
                );
            }
        }
    }
    assert!(mutants > 20, "{mutants}");
}
