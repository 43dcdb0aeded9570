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
    let nothing = LoopCompletion {
        level,
        in_loop: None,
        exit: None,
        exit_on_entry: false,
        exit_drained: false,
    };
    let Some((r0, i0)) = paths.pos(op) else {
        return nothing;
    };
    let mut walk = Walk::new(fp, k, paths, target, (op, class));
    let mut count = 0u32;
    let mut passed = false;
    let mut r = r0;
    let mut start = i0 + 1;
    loop {
        if let Some(w) = walk.scan(r, start, &mut count, &mut passed) {
            return LoopCompletion {
                in_loop: Some((w, 0)),
                ..nothing
            };
        }
        let Some(&parent) = paths.region_op.get(&r) else {
            return nothing;
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
    let exit = walk.exit_path(paths, loop_region, count, passed);
    // Next iterations of the loop.
    let mut in_loop = None;
    for d in 1..=3u32 {
        walk.delay = d;
        if let Some(w) = walk.scan(loop_region, 0, &mut count, &mut passed) {
            in_loop = Some((w, d));
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

/// The walk from one copy (`op`, of class `class`): what it reads of the kernel and the copy,
/// and `delay`, the iterations of the copy's innermost loop between the issue and the code
/// being scanned.
struct Walk<'a> {
    fp: &'a Footprints<'a>,
    k: &'a Kernel,
    target: &'a Target,
    op: Op,
    class: AsyncClass,
    /// The copy's token (waited for by `wait_tokens`).
    token: Option<Value>,
    /// A TMA load's mbarrier and its slot index.
    mbar: Option<(MemRef, Vec<Operand>)>,
    /// The innermost loop of the copy: its variable advances by `step` per iteration of delay.
    inner: Option<(Value, i64)>,
    /// The counter the copy's completion is tracked by.
    counter: Option<Counter>,
    /// The `if` conditions under which the copy was issued, with the arm: an `if` on the same
    /// condition runs the same arm in the issuing threads, so its copies count too.
    guards: Vec<(Operand, usize)>,
    delay: u32,
}

impl<'a> Walk<'a> {
    fn new(
        fp: &'a Footprints<'a>,
        k: &'a Kernel,
        paths: &Paths,
        target: &'a Target,
        (op, class): (Op, AsyncClass),
    ) -> Walk<'a> {
        let mbar = match &k.ops[op].kind {
            OpKind::TmaLoad {
                mbar, mbar_index, ..
            } => Some((*mbar, mbar_index.clone())),
            _ => None,
        };
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
        Walk {
            fp,
            k,
            target,
            op,
            class,
            token: k.ops[op].results.first().copied(),
            mbar,
            inner,
            counter: target.async_counter(class),
            guards: issue_guards(k, paths, op),
            delay: 0,
        }
    }

    /// Loops the wait `w` is in and the copy is not, with their lower bounds: the wait runs
    /// in their first iteration (loops whose bound is unknown are left out).
    fn entered(&self, w: Op) -> Vec<(Value, i64)> {
        let (fp, k) = (self.fp, self.k);
        let c_loops = fp.loops_of(self.op);
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
        entered
    }

    /// Whether an mbarrier slot (`m2[idx2]`) of a wait `w` `delay` iterations later provably
    /// equals the copy's (evaluated over a window of iterations; unknown values prove
    /// nothing).
    fn same_slot(&self, w: Op, m2: MemRef, idx2: &[Operand]) -> bool {
        let entered = self.entered(w);
        let Some((m1, idx1)) = &self.mbar else {
            return false;
        };
        if self.k.root_buffer(*m1) != self.k.root_buffer(m2) || idx1.len() != idx2.len() {
            return false;
        }
        if *m1 != m2 {
            return false;
        }
        let d = self.delay as i64;
        if d == 0 && idx1.as_slice() == idx2 {
            return true;
        }
        let window = if self.inner.is_some() { 12 } else { 1 };
        let value = |o: &Operand, env: &Env| match o {
            Operand::Imm(s) => Some(s.as_i64()),
            Operand::Value(x) => self.fp.eval(*x, env, 0, &mut Default::default()),
        };
        (0..window).all(|v| {
            let mut e1 = Env::default();
            let mut e2: Env = entered.iter().copied().collect();
            if let Some((iv, step)) = self.inner {
                e1.insert(iv, v * step);
                e2.insert(iv, (v + d) * step);
            }
            idx1.iter().zip(idx2).all(|(a, b)| {
                let x = value(a, &e1);
                x.is_some() && x == value(b, &e2)
            })
        })
    }

    /// Increments of the tracking counter by one op (lower bound; nested regions count 0
    /// except stages, which run once, and the arm of an `if` on an issue guard).
    fn incr(&self, o: Op) -> u32 {
        let k = self.k;
        let arm = match &k.ops[o].kind {
            OpKind::Stage { .. } => Some(0),
            OpKind::If { cond } => self.guards.iter().find(|(c, _)| c == cond).map(|&(_, a)| a),
            _ => None,
        };
        if let Some(a) = arm {
            return k
                .region_ops(k.ops[o].regions[a])
                .iter()
                .map(|&c| self.incr(c))
                .sum();
        }
        let e = effects(k, o);
        match self.class {
            AsyncClass::CpAsync | AsyncClass::TmaStore | AsyncClass::Wgmma => {
                u32::from(matches!(e.sync, Some(SyncEffect::Commit(c)) if c == self.class))
            }
            _ => {
                let counter = self.counter;
                let own = e.shared.iter().any(|a| match a.kind {
                    AccessKind::AsyncWrite(c2) | AccessKind::AsyncRead(c2) => {
                        counter.is_some() && self.target.async_counter(c2) == counter
                    }
                    _ => false,
                });
                let gl = !e.global.is_empty()
                    && e.global.iter().all(|g| !g.write)
                    && counter.is_some()
                    && self.target.global_load_counter() == counter
                    && e.shared.is_empty();
                u32::from(own || gl)
            }
        }
    }

    /// Whether op `o` completes the copy, `count` ops of its counter after it (`passed_self`:
    /// the walk went past the copy again, a later iteration's issue).
    fn completes(&self, o: Op, count: u32, passed_self: bool) -> bool {
        let e = effects(self.k, o);
        match (e.sync, self.class) {
            (Some(SyncEffect::Wait(WaitKind::CpAsyncGroups(n))), AsyncClass::CpAsync)
            | (Some(SyncEffect::Wait(WaitKind::BulkGroups(n))), AsyncClass::TmaStore)
            | (Some(SyncEffect::Wait(WaitKind::WgmmaGroups(n))), AsyncClass::Wgmma) => count > n,
            (Some(SyncEffect::Wait(WaitKind::Counters(cs))), _) => cs
                .iter()
                .any(|&(c, n)| Some(c) == self.counter && count >= n),
            (Some(SyncEffect::Wait(WaitKind::Tokens(ts))), _) => {
                !passed_self && self.token.is_some_and(|t| ts.contains(&t))
            }
            (Some(SyncEffect::MbarWait), AsyncClass::Tma) => match &self.k.ops[o].kind {
                OpKind::MbarWait { mbar: m, index, .. } => self.same_slot(o, *m, index),
                _ => false,
            },
            _ => false,
        }
    }

    /// Walks region `r` from index `start`, returning the completing wait (searching inside
    /// stages too, and in the first iteration of later loops).
    fn scan(&self, r: Region, start: usize, count: &mut u32, passed: &mut bool) -> Option<Op> {
        let k = self.k;
        for &o in k.region_ops(r).iter().skip(start) {
            if o == self.op {
                *passed = true;
            }
            match k.ops[o].kind {
                OpKind::Stage { .. } => {
                    if let Some(w) = self.scan(k.ops[o].regions[0], 0, count, passed) {
                        return Some(w);
                    }
                    continue;
                }
                // The first iteration of a later loop: accesses inside it run only if it
                // does, and then after its waits.
                OpKind::For { .. } if o != self.op => {
                    let (mut c, mut p) = (*count, *passed);
                    if let Some(w) = self.scan(k.ops[o].regions[0], 0, &mut c, &mut p) {
                        return Some(w);
                    }
                    continue;
                }
                _ => {}
            }
            if self.completes(o, *count, *passed) {
                return Some(o);
            }
            *count += self.incr(o);
        }
        None
    }

    /// The completing wait on the path that leaves the loop whose body is `loop_region`,
    /// walked with the count so far.
    fn exit_path(
        &self,
        paths: &Paths,
        loop_region: Region,
        count: u32,
        passed: bool,
    ) -> Option<Op> {
        let (mut c, mut p) = (count, passed);
        let mut rr = loop_region;
        while let Some(&parent) = paths.region_op.get(&rr) {
            let (pr, pi) = paths.pos(parent).expect("placed");
            if let Some(w) = self.scan(pr, pi + 1, &mut c, &mut p) {
                return Some(w);
            }
            rr = pr;
        }
        None
    }
}

/// The `if` conditions (and arms) under which `op` is issued, innermost first.
fn issue_guards(k: &Kernel, paths: &Paths, op: Op) -> Vec<(Operand, usize)> {
    let mut guards = Vec::new();
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
    guards
}
