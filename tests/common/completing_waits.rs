//! The forward walk that answered "which waits complete this async copy" before the in-flight
//! dataflow (`analysis::inflight`) replaced it in `analysis::hazards`: kept as an independent
//! oracle that the dataflow is compared with (`tests/placement.rs`).
//!
//! It walks forward in program order from the copy, counting as a lower bound the operations
//! the wait's counter tracks (count-based waits complete all but the newest N), through the
//! rest of the copy's innermost loop body, the loop's exit path, and up to three further
//! iterations. Its answer is in the dataflow's shape ([`LoopCompletion`]), with the level
//! always the innermost loop. Complexity: O(ops) per copy and iteration looked ahead.

use smemsync::analysis::footprint::{Env, Footprints};
use smemsync::analysis::hazards::Paths;
use smemsync::analysis::inflight::LoopCompletion;
use smemsync::ir::*;
use smemsync::target::Target;

/// The waits that complete an async access issued by `op`: the one in the copy's innermost
/// loop with the number of iterations between issue and wait (`0`: same iteration), and
/// `exit`, the one on the path that leaves that loop. `None` where no wait is found.
pub fn completing_waits(
    fp: &Footprints,
    k: &Kernel,
    paths: &Paths,
    target: &Target,
    op: Op,
    class: AsyncClass,
) -> LoopCompletion {
    let level = fp.loops_of(op).len().checked_sub(1);
    let Some((r0, i0)) = paths.pos(op) else {
        return LoopCompletion {
            level,
            in_loop: None,
            exit: None,
            exit_on_entry: false,
            exit_drained: false,
        };
    };
    let token = k.ops[op].results.first().copied();
    let mbar = match &k.ops[op].kind {
        OpKind::TmaLoad {
            mbar, mbar_index, ..
        } => Some((*mbar, mbar_index.clone())),
        _ => None,
    };
    // The innermost loop of the copy: its variable advances by `step` per iteration of delay.
    let inner = fp
        .loops_of(op)
        .last()
        .copied()
        .and_then(|l| match &k.ops[l].kind {
            OpKind::For { step, .. } => Some((
                k.region_args(k.ops[l].regions[0])[0],
                match step {
                    Operand::Imm(s) => s.as_i64(),
                    _ => 1,
                },
            )),
            _ => None,
        });
    let delay = std::cell::Cell::new(0u32);
    // Whether an mbarrier slot of a wait `delay` iterations later provably equals the copy's
    // (evaluated over a window of iterations; unknown values prove nothing).
    let c_loops = fp.loops_of(op);
    let same_slot = |w: Op, m2: MemRef, idx2: &[Operand]| -> bool {
        // Loops the wait is in and the copy is not: the wait runs in their first iteration.
        let mut entered: Vec<(Value, i64)> = Vec::new();
        for l in fp.loops_of(w) {
            if c_loops.contains(&l) {
                continue;
            }
            if let OpKind::For { lo, .. } = &k.ops[l].kind {
                let lo = match lo {
                    Operand::Imm(s) => Some(s.as_i64()),
                    Operand::Value(v) => {
                        fp.eval(*v, &Default::default(), 0, &mut Default::default())
                    }
                };
                if let Some(lo) = lo {
                    entered.push((k.region_args(k.ops[l].regions[0])[0], lo));
                }
            }
        }
        let Some((m1, idx1)) = &mbar else {
            return false;
        };
        if k.root_buffer(*m1) != k.root_buffer(m2) || idx1.len() != idx2.len() {
            return false;
        }
        if *m1 != m2 {
            return false;
        }
        let d = delay.get() as i64;
        if d == 0 && idx1.as_slice() == idx2 {
            return true;
        }
        let window = if inner.is_some() { 12 } else { 1 };
        (0..window).all(|v| {
            let mut e1 = Env::default();
            let mut e2: Env = entered.iter().copied().collect();
            if let Some((iv, step)) = inner {
                e1.insert(iv, v * step);
                e2.insert(iv, (v + d) * step);
            }
            idx1.iter().zip(idx2).all(|(a, b)| {
                let x = match a {
                    Operand::Imm(s) => Some(s.as_i64()),
                    Operand::Value(x) => fp.eval(*x, &e1, 0, &mut Default::default()),
                };
                let y = match b {
                    Operand::Imm(s) => Some(s.as_i64()),
                    Operand::Value(y) => fp.eval(*y, &e2, 0, &mut Default::default()),
                };
                x.is_some() && x == y
            })
        })
    };
    let counter = target.async_counter(class);
    // Increments of the tracking counter by one op (lower bound; nested regions count 0
    // except stages, which run once).
    // The `if` conditions under which the copy was issued: an `if` on the same condition
    // runs the same arm in the issuing threads, so its copies count too.
    let mut guards: Vec<(Operand, usize)> = Vec::new();
    {
        let mut child = op;
        while let Some((r, _)) = paths.pos(child) {
            let Some(&p) = paths.region_op.get(&r) else {
                break;
            };
            if let OpKind::If { cond } = &k.ops[p].kind {
                let arm = k.ops[p].regions.iter().position(|&x| x == r).unwrap_or(0);
                guards.push((*cond, arm));
            }
            child = p;
        }
    }
    let incr = |o: Op| -> u32 {
        fn go(
            k: &Kernel,
            target: &Target,
            class: AsyncClass,
            counter: Option<Counter>,
            guards: &[(Operand, usize)],
            o: Op,
        ) -> u32 {
            let arm = match &k.ops[o].kind {
                OpKind::Stage { .. } => Some(0),
                OpKind::If { cond } => guards.iter().find(|(c, _)| c == cond).map(|&(_, a)| a),
                _ => None,
            };
            if let Some(a) = arm {
                return k
                    .region_ops(k.ops[o].regions[a])
                    .iter()
                    .map(|&c| go(k, target, class, counter, guards, c))
                    .sum();
            }
            let e = effects(k, o);
            match class {
                AsyncClass::CpAsync | AsyncClass::TmaStore | AsyncClass::Wgmma => {
                    u32::from(matches!(e.sync, Some(SyncEffect::Commit(c)) if c == class))
                }
                _ => {
                    let own = e.shared.iter().any(|a| match a.kind {
                        AccessKind::AsyncWrite(c2) | AccessKind::AsyncRead(c2) => {
                            counter.is_some() && target.async_counter(c2) == counter
                        }
                        _ => false,
                    });
                    let gl = !e.global.is_empty()
                        && e.global.iter().all(|g| !g.write)
                        && counter.is_some()
                        && target.global_load_counter() == counter
                        && e.shared.is_empty();
                    u32::from(own || gl)
                }
            }
        }
        go(k, target, class, counter, &guards, o)
    };
    let completes = |o: Op, count: u32, passed_self: bool| -> bool {
        let e = effects(k, o);
        match (e.sync, class) {
            (Some(SyncEffect::Wait(WaitKind::CpAsyncGroups(n))), AsyncClass::CpAsync)
            | (Some(SyncEffect::Wait(WaitKind::BulkGroups(n))), AsyncClass::TmaStore)
            | (Some(SyncEffect::Wait(WaitKind::WgmmaGroups(n))), AsyncClass::Wgmma) => count > n,
            (Some(SyncEffect::Wait(WaitKind::Counters(cs))), _) => {
                cs.iter().any(|&(c, n)| Some(c) == counter && count >= n)
            }
            (Some(SyncEffect::Wait(WaitKind::Tokens(ts))), _) => {
                !passed_self && token.is_some_and(|t| ts.contains(&t))
            }
            (Some(SyncEffect::MbarWait), AsyncClass::Tma) => match &k.ops[o].kind {
                OpKind::MbarWait { mbar: m, index, .. } => same_slot(o, *m, index),
                _ => false,
            },
            _ => false,
        }
    };
    // Walk a region from index `start`, returning the completing wait (searching inside
    // stages too).
    #[expect(clippy::too_many_arguments, reason = "walk state")]
    fn scan(
        k: &Kernel,
        r: Region,
        start: usize,
        count: &mut u32,
        passed: &mut bool,
        me: Op,
        incr: &dyn Fn(Op) -> u32,
        completes: &dyn Fn(Op, u32, bool) -> bool,
    ) -> Option<Op> {
        for &o in k.region_ops(r).iter().skip(start) {
            if o == me {
                *passed = true;
            }
            match k.ops[o].kind {
                OpKind::Stage { .. } => {
                    if let Some(w) = scan(
                        k,
                        k.ops[o].regions[0],
                        0,
                        count,
                        passed,
                        me,
                        incr,
                        completes,
                    ) {
                        return Some(w);
                    }
                    continue;
                }
                // The first iteration of a later loop: accesses inside it run only if it
                // does, and then after its waits.
                OpKind::For { .. } if o != me => {
                    let mut c = *count;
                    let mut p = *passed;
                    if let Some(w) = scan(
                        k,
                        k.ops[o].regions[0],
                        0,
                        &mut c,
                        &mut p,
                        me,
                        incr,
                        completes,
                    ) {
                        return Some(w);
                    }
                    continue;
                }
                _ => {}
            }
            if completes(o, *count, *passed) {
                return Some(o);
            }
            *count += incr(o);
        }
        None
    }
    let mut count = 0u32;
    let mut passed = false;
    let mut r = r0;
    let mut start = i0 + 1;
    let mut delta = 0u32;
    loop {
        if let Some(w) = scan(k, r, start, &mut count, &mut passed, op, &incr, &completes) {
            return LoopCompletion {
                level,
                in_loop: Some((w, delta)),
                exit: None,
                exit_on_entry: false,
                exit_drained: false,
            };
        }
        let Some(&parent) = paths.region_op.get(&r) else {
            return LoopCompletion {
                level,
                in_loop: None,
                exit: None,
                exit_on_entry: false,
                exit_drained: false,
            };
        };
        match k.ops[parent].kind {
            OpKind::For { .. } | OpKind::While { .. } => break,
            _ => {
                let (pr, pi) = paths.pos(parent).expect("placed");
                r = pr;
                start = pi + 1;
            }
        }
    }
    // Loop exit path: continue after the loop with the count so far.
    let loop_region = r;
    let exit = {
        let mut c = count;
        let mut p = passed;
        let mut rr = loop_region;
        let mut found = None;
        while let Some(&parent) = paths.region_op.get(&rr) {
            let (pr, pi) = paths.pos(parent).expect("placed");
            if let Some(w) = scan(k, pr, pi + 1, &mut c, &mut p, op, &incr, &completes) {
                found = Some(w);
                break;
            }
            rr = pr;
        }
        found
    };
    // Next iterations of the loop.
    let mut in_loop = None;
    for d in 1..=3u32 {
        delta = d;
        delay.set(d);
        if let Some(w) = scan(
            k,
            loop_region,
            0,
            &mut count,
            &mut passed,
            op,
            &incr,
            &completes,
        ) {
            in_loop = Some((w, delta));
            break;
        }
    }
    // The exit scan enters later loops in their first iteration only.
    LoopCompletion {
        level,
        in_loop,
        exit,
        exit_on_entry: true,
        // The oracle does not reason about issue guards (the generated kernels have none).
        exit_drained: false,
    }
}
