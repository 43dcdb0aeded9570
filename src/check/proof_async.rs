//! The static proof's model of async accesses (docs/checker.md, "Async accesses in the static
//! proof"): which loops the proof enumerates, and, for every async access it models, the
//! accesses that may meet it while it is in flight.
//!
//! Modelled: cp.async and gather-to-LDS copies, per thread (`cp_async`, `gather_to_lds`) or
//! per tile (`cp_async_tile`, `gather_to_lds_tile`, each thread copying the elements its
//! layout gives it, `check/proof_tiles.rs`), and wgmma's shared-operand reads (completed by
//! `wgmma_wait`, read by any thread of the block), TMA loads of a single-role pipeline
//! (performed by the copy engine, completed for every thread by the `mbar_wait` of their use,
//! `check/mbar_pipeline.rs`) and TMA stores (read by the copy engine until the issuer's
//! `bulk_wait`). Generic-proxy writes on a buffer that an async-proxy access (wgmma, TMA)
//! touches are followed the same way to the `fence_proxy_async` of their thread.
//!
//! What it computes: for each access `c`, a forward walk over the region tree from `c`'s issue
//! (including loop back edges) that tracks, per *tag* (the iteration relation to `c`), the
//! access's *status*: its age in its completion queue (`-1` while its cp.async or wgmma group
//! is open, else the number of younger committed groups, or younger operations on its AMD
//! counter), or *waited* once a wait that completes it by the counter arithmetic (`age >= N`)
//! has run (for a generic write: once its thread's `fence_proxy_async` has run). A barrier
//! ends a waited copy (every later access of any thread is ordered after it) and leaves a
//! pending one in flight. Each access reached is recorded with the tag and whether `c` was
//! still pending (then even the issuing thread's own access collides) or only waited (then
//! only other threads' accesses do); [`async_pairs`] tests each record with the instances and
//! index forms of `super::proof`. For a generic write only records of async-proxy accesses
//! count: pending (no fence yet) with any thread, waited (fenced, but no barrier since the
//! fence) with other threads.
//!
//! Invariants (why it is sound): paths are joined by the minimum age per tag (a younger copy
//! is completed by fewer waits), both arms of every `if` are walked, a loop's body is iterated
//! to a fixpoint (entries are only added and ages only decrease, so it terminates), constant
//! loops with sync ops and at most [`UNROLL`] trips are walked iteration by iteration, loops
//! without sync ops change no status (their copies could only age others, which is ignored),
//! and tags saturate at [`DIST_CAP`] (no relation: independent unknowns). A copy or wgmma read
//! that may still be pending at kernel exit declines the proof.
//!
//! Complexity: per access and per assignment of the unrolled loops around it, O(ops x passes)
//! for the walk (passes bounded by the tags and ages, a few in practice), plus the pair tests
//! per record: O(instances) per iteration residue.

mod chain;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use super::elected_pipeline::RolePlan;
use super::mbar_pipeline::{LoadUse, Plan};
use super::proof::{
    Access, Inst, IvFn, LoopRelation, Meet, PairCx, Sides, affine_exact, alias_met, bound_range,
    collide, collide_related, conflicting, op_at, wrap_modulus,
};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::ir::arith::gcd;
use crate::ir::effects::is_sync;
use crate::ir::*;
use crate::target::Target;

/// Most iterations of a constant loop with sync ops that the walk unrolls.
const UNROLL: i64 = 16;
/// Most iterations of a barrier-free constant loop whose induction variable is enumerated.
const ENUM_TRIP: i64 = 1024;
/// Most instances (threads x enumerated iterations) of one access.
const ENUM_BUDGET: i64 = 1 << 16;
/// Iteration distances tracked exactly; farther ones are `Far`.
const DIST_CAP: u8 = 6;

/// The loops whose induction variables the proof enumerates (constant bounds, at most
/// [`ENUM_TRIP`] trips, no barrier inside, within [`ENUM_BUDGET`] instances per access), and
/// the values computed from them (`dep`, which includes `ivs`).
pub(super) struct Enumerated {
    pub ivs: HashSet<Value>,
    pub dep: HashSet<Value>,
    loops: HashMap<Op, (Value, Vec<i64>)>,
}

impl Enumerated {
    /// Every assignment of the enumerated loops around `op` (one empty assignment if none).
    pub fn combos(&self, parents: &Parents, op: Op) -> Vec<Vec<(Value, i64)>> {
        let loops = parents.ancestors(op);
        assignments(loops.iter().filter_map(|l| self.loops.get(l)))
    }
}

/// Every assignment of values to induction variables, one value per loop (the cartesian
/// product; one empty assignment for no loop), in the order the loops are given.
fn assignments<'a>(loops: impl Iterator<Item = &'a (Value, Vec<i64>)>) -> Vec<Vec<(Value, i64)>> {
    let mut out: Vec<Vec<(Value, i64)>> = vec![Vec::new()];
    for (iv, vals) in loops {
        out = out
            .iter()
            .flat_map(|c| {
                vals.iter().map(move |x| {
                    let mut c = c.clone();
                    c.push((*iv, *x));
                    c
                })
            })
            .collect();
    }
    out
}

/// A constant operand's value.
fn constant(k: &Kernel, o: &Operand) -> Option<i64> {
    let (lo, hi) = bound_range(k, o);
    (lo == hi).then_some(lo as i64)
}

/// The values of a `for` loop's induction variable when its bounds are constants.
fn const_trips(k: &Kernel, op: Op) -> Option<Vec<i64>> {
    let OpKind::For { lo, hi, step, .. } = &k.ops[op].kind else {
        return None;
    };
    let (lo, hi, step) = (constant(k, lo)?, constant(k, hi)?, constant(k, step)?);
    if step <= 0 || hi <= lo || (hi - lo) / step > ENUM_TRIP {
        return None;
    }
    Some((lo..hi).step_by(step as usize).collect())
}

fn contains(k: &Kernel, r: Region, pred: &dyn Fn(Op) -> bool) -> bool {
    k.region_ops(r)
        .iter()
        .any(|&o| pred(o) || k.ops[o].regions.iter().any(|&c| contains(k, c, pred)))
}

/// Selects the enumerated loops, outermost first.
pub(super) fn enumerated(k: &Kernel, parents: &Parents) -> Enumerated {
    let mut en = Enumerated {
        ivs: HashSet::new(),
        dep: HashSet::new(),
        loops: HashMap::new(),
    };
    let threads = k.threads() as i64;
    for op in k.ops_in_order() {
        let Some(vals) = const_trips(k, op) else {
            continue;
        };
        let body = k.ops[op].regions[0];
        if contains(k, body, &|o| matches!(k.ops[o].kind, OpKind::Barrier)) {
            continue;
        }
        let outer: i64 = parents
            .ancestors(op)
            .iter()
            .filter_map(|l| en.loops.get(l).map(|x| x.1.len() as i64))
            .product();
        if threads * outer * vals.len() as i64 > ENUM_BUDGET {
            continue;
        }
        let iv = k.region_args(body)[0];
        en.ivs.insert(iv);
        en.loops.insert(op, (iv, vals));
    }
    en.dep.extend(en.ivs.iter().copied());
    for op in k.ops_in_order() {
        let mut d = false;
        k.ops[op].kind.for_each_operand(|o| {
            d |= o
                .value()
                .is_some_and(|w| en.ivs.contains(&w) || en.dep.contains(&w));
        });
        if d {
            en.dep.extend(k.ops[op].results.iter().copied());
        }
    }
    en
}

/// Whether the static proof models this async access: cp.async and gather-to-LDS copies
/// (per thread or per tile) and wgmma operand reads.
pub(super) fn modelled(a: &SharedAccess) -> bool {
    matches!(
        a.kind,
        AccessKind::AsyncWrite(AsyncClass::CpAsync | AsyncClass::GatherToLds | AsyncClass::Tma)
            | AccessKind::AsyncRead(AsyncClass::Wgmma | AsyncClass::TmaStore)
    )
}

/// Whether an access goes through the async proxy (docs/ir.md, "Proxies").
fn async_proxy(a: &Access) -> bool {
    matches!(
        a.kind,
        AccessKind::AsyncRead(AsyncClass::Wgmma | AsyncClass::TmaStore)
            | AccessKind::AsyncWrite(AsyncClass::Tma)
    )
}

pub(super) fn has_async(k: &Kernel) -> bool {
    k.ops_in_order()
        .into_iter()
        .any(|o| effects(k, o).shared.iter().any(|a| a.kind.is_async()))
}

/// What completes the access a walk follows.
#[derive(Copy, Clone, PartialEq, Debug)]
enum Queue {
    /// cp.async groups: `cp_async_commit` closes one, `cp_async_wait N`.
    CpAsyncGroups,
    /// An AMD counter: every copy (and plain global load) counted by it ages older ones,
    /// `waitcnt c(N)`.
    Counter(Counter),
    /// wgmma groups: `wgmma_commit` closes one, `wgmma_wait N`.
    WgmmaGroups,
    /// A generic-proxy write waiting for its thread's `fence_proxy_async`.
    Fence,
    /// A TMA store's read: `bulk_commit` closes a group, `bulk_wait N`.
    BulkGroups,
    /// A TMA load: completed for every thread by the pipeline wait of its use
    /// (`check/mbar_pipeline.rs`).
    Mbar,
}

fn queue_of(k: &Kernel, op: Op, target: Option<Target>) -> Option<Queue> {
    let e = effects(k, op);
    let a = e.shared.iter().find(|a| a.kind.is_async())?;
    match a.kind {
        AccessKind::AsyncWrite(AsyncClass::CpAsync) => Some(Queue::CpAsyncGroups),
        AccessKind::AsyncWrite(AsyncClass::GatherToLds) => Some(Queue::Counter(
            target
                .and_then(|t| t.async_counter(AsyncClass::GatherToLds))
                .unwrap_or(Counter::VmCnt),
        )),
        AccessKind::AsyncRead(AsyncClass::Wgmma) => Some(Queue::WgmmaGroups),
        AccessKind::AsyncRead(AsyncClass::TmaStore) => Some(Queue::BulkGroups),
        AccessKind::AsyncWrite(AsyncClass::Tma) => Some(Queue::Mbar),
        _ => None,
    }
}

/// How a reached access relates to the copy's iteration of the relation loop `L` (the
/// innermost iterated loop around the copy).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Rel {
    /// The copy is in no loop the walk iterates.
    Free,
    /// `d` iterations of `L` after the copy's.
    Dist(u8),
    /// No relation.
    Far,
}

/// A record's tag: its relation to the copy's iteration of `L`, and, while the walk is in
/// the *pinned loop* `P` (the first iterated loop it enters that is not `L`, so outside the
/// copy's loops), the iteration of `P` it is in (`None`: unknown, or not in `P`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Tag {
    rel: Rel,
    pin: Option<u8>,
}

/// Status of a copy: its age, or [`WAITED`].
const WAITED: i32 = i32::MAX;

type State = BTreeMap<Tag, i32>;

fn join(mut a: State, b: &State) -> State {
    for (t, s) in b {
        let e = a.entry(*t).or_insert(*s);
        *e = (*e).min(*s);
    }
    a
}

/// An access the walk reached: the op, the unrolled loops' values there, the tag, and
/// whether the copy may still be pending (not yet completed by a wait of its thread).
type Record = (Op, Vec<(Value, i64)>, Tag, bool);

/// What the walks read of each op and loop, computed once per proof (every walk passes
/// over the same ops): whether an op accesses shared memory, its sync effect and the queue
/// it issues on; per constant `for`, whether a walk unrolls it and whether it is plain.
pub(super) struct WalkFacts {
    ops: FxHashMap<Op, OpFacts>,
    loops: FxHashMap<Op, (Option<Vec<i64>>, bool)>,
}

#[derive(Default)]
struct OpFacts {
    shared: bool,
    sync: Option<SyncEffect>,
    queue: Option<Queue>,
}

impl WalkFacts {
    fn new(k: &Kernel, target: Option<Target>) -> WalkFacts {
        let (mut ops, mut loops) = (FxHashMap::default(), FxHashMap::default());
        for op in k.ops_in_order() {
            let e = effects(k, op);
            let queue = queue_of(k, op, target);
            ops.insert(
                op,
                OpFacts {
                    shared: !e.shared.is_empty(),
                    sync: e.sync,
                    queue,
                },
            );
            if let Some(vals) = const_trips(k, op) {
                let body = k.ops[op].regions[0];
                let sync = contains(k, body, &|o| is_sync(k, o));
                let unrolled = (vals.len() as i64 <= UNROLL && sync).then_some(vals);
                loops.insert(op, (unrolled, !sync));
            }
        }
        WalkFacts { ops, loops }
    }
}

struct Walk<'a> {
    k: &'a Kernel,
    facts: &'a WalkFacts,
    parents: &'a Parents,
    target: Option<Target>,
    queue: Queue,
    /// The relation loop `L`.
    l: Option<Op>,
    /// The pinned loop `P`.
    p: Option<Op>,
    env: Vec<(Value, i64)>,
    records: FxHashSet<Record>,
    /// Ops recorded although they access no shared memory (the uses of a wgmma's result).
    watch: HashSet<Op>,
    /// For a TMA load: the pipeline and the load's use.
    mbar: Option<MbarWalk<'a>>,
}

/// What completes a followed TMA load: the wait of its use in the pipeline loop.
#[derive(Copy, Clone)]
struct MbarWalk<'a> {
    plan: &'a Plan,
    load: LoadUse,
    /// The pipeline loop's iteration at the load, when the walk unrolls that loop.
    copy_iter: Option<i64>,
}

impl Walk<'_> {
    /// Whether the walk unrolls loop `op`: constant bounds, at most [`UNROLL`] trips, and
    /// a sync op inside.
    fn unrolled(&self, op: Op) -> Option<Vec<i64>> {
        self.facts.loops.get(&op)?.0.clone()
    }

    /// A constant loop without sync ops: it changes no status.
    fn plain(&self, op: Op) -> bool {
        self.facts.loops.get(&op).is_some_and(|l| l.1)
    }

    /// The state along the back edge of loop `l`: one more iteration of `L` or `P`.
    fn back(&self, l: Op, s: &State) -> State {
        let (is_l, is_p) = (Some(l) == self.l, Some(l) == self.p);
        if !is_l && !is_p {
            return s.clone();
        }
        let mut out = State::new();
        for (t, a) in s {
            let mut t2 = *t;
            if is_l {
                t2.rel = match t.rel {
                    Rel::Dist(d) if d < DIST_CAP => Rel::Dist(d + 1),
                    Rel::Free => Rel::Free,
                    _ => Rel::Far,
                };
            }
            if is_p {
                t2.pin = t.pin.filter(|j| *j < DIST_CAP).map(|j| j + 1);
            }
            out = join(out, &State::from([(t2, *a)]));
        }
        out
    }

    /// Every tag mapped by `f` (joining the ones it merges).
    fn retag(s: &State, f: impl Fn(Tag) -> Tag) -> State {
        s.iter().fold(State::new(), |o, (t, a)| {
            join(o, &State::from([(f(*t), *a)]))
        })
    }

    /// The state after leaving loop `l` (at its head, after any number of iterations).
    fn exit(&self, l: Op, s: &State) -> State {
        let (is_l, is_p) = (Some(l) == self.l, Some(l) == self.p);
        let mut s = s.clone();
        if let Some(m) = self.mbar.filter(|m| m.plan.l == l) {
            // The load of use `u` exists only when `u < T`: leaving the loop after `e`
            // iterations counted from the load's (`T = i + e`, or `T = e` from its entry for
            // a load before the loop) is infeasible while `u >= T`.
            let d = m.load.delta;
            s.retain(|t, _| match (m.load.in_loop, t.rel, t.pin) {
                (true, Rel::Dist(e), _) if is_l => e as i64 > d,
                (false, _, Some(j)) if is_p => j as i64 > d,
                _ => true,
            });
        }
        Self::retag(&s, |t| Tag {
            rel: if is_l { Rel::Far } else { t.rel },
            pin: if is_p { None } else { t.pin },
        })
    }

    fn fixpoint(&mut self, l: Op, mut head: State) -> State {
        let body = self.k.ops[l].regions[0];
        loop {
            let out = self.seq(body, 0, head.clone());
            let next = join(head.clone(), &self.back(l, &out));
            if next == head {
                break;
            }
            head = next;
        }
        self.exit(l, &head)
    }

    /// Walks the body of constant loop `l` once per value in `vals` (its induction
    /// variable known in each).
    fn unroll(&mut self, l: Op, vals: impl Iterator<Item = i64>, mut s: State) -> State {
        let body = self.k.ops[l].regions[0];
        let iv = self.k.region_args(body)[0];
        for x in vals {
            self.env.push((iv, x));
            s = self.seq(body, 0, s);
            self.env.pop();
        }
        s
    }

    fn transfer(&mut self, op: Op, mut s: State) -> State {
        let k = self.k;
        let none = OpFacts::default();
        let facts = self.facts;
        let e = facts.ops.get(&op).unwrap_or(&none);
        if e.shared || self.watch.contains(&op) {
            for (t, a) in &s {
                self.records
                    .insert((op, self.env.clone(), *t, *a != WAITED));
            }
        }
        let age = |s: &mut State| {
            for a in s.values_mut() {
                if *a != WAITED {
                    *a = a.saturating_add(1);
                }
            }
        };
        if let Queue::Counter(c) = self.queue {
            let issues = e.queue == Some(self.queue);
            let gload = matches!(k.ops[op].kind, OpKind::GLoad { .. })
                && self
                    .target
                    .map_or(Some(Counter::VmCnt), |t| t.global_load_counter())
                    == Some(c);
            if issues || gload {
                age(&mut s);
            }
        }
        match (&e.sync, self.queue) {
            (Some(SyncEffect::Commit(AsyncClass::CpAsync)), Queue::CpAsyncGroups)
            | (Some(SyncEffect::Commit(AsyncClass::Wgmma)), Queue::WgmmaGroups) => {
                for a in s.values_mut() {
                    if *a != WAITED {
                        *a = if *a < 0 { 0 } else { a.saturating_add(1) };
                    }
                }
            }
            (Some(SyncEffect::Commit(AsyncClass::TmaStore)), Queue::BulkGroups) => {
                for a in s.values_mut() {
                    if *a != WAITED {
                        *a = if *a < 0 { 0 } else { a.saturating_add(1) };
                    }
                }
            }
            (Some(SyncEffect::Wait(WaitKind::CpAsyncGroups(n))), Queue::CpAsyncGroups)
            | (Some(SyncEffect::Wait(WaitKind::WgmmaGroups(n))), Queue::WgmmaGroups)
            | (Some(SyncEffect::Wait(WaitKind::BulkGroups(n))), Queue::BulkGroups) => {
                complete(&mut s, *n)
            }
            (Some(SyncEffect::MbarWait), Queue::Mbar) => self.mbar_wait(op, &mut s),
            // The writer's fence makes its earlier generic writes visible to the async
            // accesses a later barrier orders after it.
            (Some(SyncEffect::ProxyFence), Queue::Fence) => complete(&mut s, 0),
            (Some(SyncEffect::Wait(WaitKind::Counters(list))), Queue::Counter(c)) => {
                if let Some((_, n)) = list.iter().find(|(x, _)| *x == c) {
                    complete(&mut s, *n)
                }
            }
            (Some(SyncEffect::Barrier), _) => s.retain(|_, a| *a != WAITED),
            _ => {}
        }
        s
    }

    /// A pipeline wait: every thread runs it, so when it is the wait of the load's use, every
    /// access after it is ordered after the load (the entries it completes end).
    fn mbar_wait(&self, op: Op, s: &mut State) {
        let Some(m) = self.mbar else { return };
        if m.plan.waits.get(&op) != Some(&m.load.mbar) {
            return;
        }
        let k = self.k;
        let iv = k.region_args(k.ops[m.plan.l].regions[0])[0];
        let d = m.load.delta;
        if let Some(&(_, y)) = self.env.iter().rev().find(|(v, _)| *v == iv) {
            // The pipeline loop is unrolled: this wait's use is its iteration.
            let u = if m.load.in_loop {
                m.copy_iter.map(|x| x + d)
            } else {
                Some(d)
            };
            if u == Some(y) {
                s.clear();
            }
            return;
        }
        let (in_l, in_p) = (self.l == Some(m.plan.l), self.p == Some(m.plan.l));
        s.retain(|t, _| match (m.load.in_loop, t.rel, t.pin) {
            (true, Rel::Dist(e), _) if in_l => e as i64 != d,
            (false, _, Some(j)) if in_p => j as i64 != d,
            _ => true,
        });
    }

    /// Walks the ops of region `r` from position `from`.
    fn seq(&mut self, r: Region, from: usize, mut s: State) -> State {
        let k = self.k;
        let ops = k.region_ops(r).to_vec();
        for &op in &ops[from.min(ops.len())..] {
            if s.is_empty() {
                return s;
            }
            let od = &k.ops[op];
            s = match &od.kind {
                OpKind::If { .. } => {
                    let a = self.seq(od.regions[0], 0, s.clone());
                    let b = self.seq(od.regions[1], 0, s);
                    join(a, &b)
                }
                OpKind::Stage { .. } => self.seq(od.regions[0], 0, s),
                OpKind::For { .. } => self.enter_loop(op, s),
                _ => self.transfer(op, s),
            };
        }
        s
    }

    fn enter_loop(&mut self, op: Op, s: State) -> State {
        if let Some(vals) = self.unrolled(op) {
            return self.unroll(op, vals.into_iter(), s);
        }
        if self.plain(op) {
            let out = self.seq(self.k.ops[op].regions[0], 0, s.clone());
            return join(s, &out);
        }
        if self.p.is_none() && Some(op) != self.l {
            self.p = Some(op);
        }
        let mut head = s;
        if Some(op) == self.p {
            head = Self::retag(&head, |t| Tag { pin: Some(0), ..t });
        }
        self.fixpoint(op, head)
    }

    /// Walks from the copy `c` to the end of the kernel; returns the state at exit.
    fn walk_copy(&mut self, c: Op, start: i32) -> State {
        let k = self.k;
        let rel = if self.l.is_some() {
            Rel::Dist(0)
        } else {
            Rel::Free
        };
        let mut s = State::from([(Tag { rel, pin: None }, start)]);
        let mut cur = c;
        // The copy's own record (its instances against each other).
        s = self.transfer_issue(c, s);
        while let Some(r) = self.parents.op_region[cur] {
            let pos = k.region_ops(r).iter().position(|o| *o == cur).unwrap_or(0);
            s = self.seq(r, pos + 1, s);
            let Some(p) = self.parents.region_op[r] else {
                break;
            };
            if let OpKind::For { .. } = k.ops[p].kind {
                s = self.leave_loop(p, s);
            }
            cur = p;
        }
        s
    }

    /// The copy's own issue: recorded against itself (other instances of one iteration).
    fn transfer_issue(&mut self, c: Op, s: State) -> State {
        for (t, a) in &s {
            self.records.insert((c, self.env.clone(), *t, *a != WAITED));
        }
        s
    }

    /// Finishes the remaining iterations of loop `p`, which encloses the copy.
    fn leave_loop(&mut self, p: Op, s: State) -> State {
        let body = self.k.ops[p].regions[0];
        if let Some(vals) = self.unrolled(p) {
            let iv = self.k.region_args(body)[0];
            let Some(i) = self.env.iter().rposition(|(v, _)| *v == iv) else {
                return s;
            };
            let cur = self.env.remove(i).1;
            return self.unroll(p, vals.into_iter().filter(|x| *x > cur), s);
        }
        if self.plain(p) {
            let out = self.seq(body, 0, s.clone());
            return join(s, &out);
        }
        let head = self.back(p, &s);
        let exit = self.fixpoint(p, head);
        if self.mbar.is_some_and(|m| m.plan.l == p) {
            // Leaving after the load's iteration is the head's exit at distance 1.
            return exit;
        }
        join(exit, &self.exit(p, &s))
    }
}

fn complete(s: &mut State, n: u32) {
    for a in s.values_mut() {
        if *a != WAITED && *a >= n as i32 {
            *a = WAITED;
        }
    }
}

/// Follows every modelled async access (and every generic write a wgmma may read) to the
/// waits, fences and barriers that order it and tests each access it meets in flight. `Ok`
/// carries a phrase for the proof's summary.
pub(super) fn async_pairs(
    cx: &PairCx,
    target: Option<Target>,
    by_buf: &HashMap<Buffer, Vec<usize>>,
    roles: Option<&RolePlan>,
) -> Result<String, String> {
    let k = cx.k;
    let (mut copies, mut reads, mut fenced, mut met) = (0usize, 0usize, 0usize, 0usize);
    let tma = cx
        .accs
        .iter()
        .any(|a| a.kind == AccessKind::AsyncWrite(AsyncClass::Tma));
    let plan = if tma && roles.is_none() {
        let td = super::uniform::thread_dependent(k, super::uniform::Loads::ThreadDependent);
        super::mbar_pipeline::plan(k, &td)?
    } else {
        None
    };
    let facts = WalkFacts::new(k, target);
    // The alias classes an async-proxy access touches, found once: asking per generic
    // write scanned its whole class (quadratic in the accesses of one buffer).
    let proxied: FxHashSet<Buffer> = by_buf
        .iter()
        .filter(|(_, xs)| xs.iter().any(|&x| async_proxy(&cx.accs[x])))
        .map(|(&b, _)| b)
        .collect();
    let mut chains = chain::ChainMemo::default();
    for (ci, c) in cx.accs.iter().enumerate() {
        // A load of a two-role pipeline: `elected_pipeline` orders it against every access
        // of its slot buffer.
        if roles.is_some_and(|r| r.loads.contains(&c.op)) {
            continue;
        }
        let queue = if c.kind.is_async() {
            let Some(q) = queue_of(k, c.op, target) else {
                return Err(format!("{} is not modelled", op_at(k, c.op)));
            };
            if q == Queue::WgmmaGroups {
                reads += 1;
            } else {
                copies += 1;
            }
            q
        } else if matches!(c.kind, AccessKind::Write | AccessKind::Atomic(_))
            && proxied.contains(&c.class)
        {
            fenced += 1;
            Queue::Fence
        } else {
            continue;
        };
        if matches!(queue, Queue::Mbar | Queue::BulkGroups) && in_else_arm(k, cx.parents, c.op) {
            return Err(format!(
                "{} is a TMA access in the `else` arm of an `if`",
                op_at(k, c.op)
            ));
        }
        let mbar = match (queue, &plan) {
            (Queue::Mbar, Some(p)) => Some((p, *p.loads.get(&c.op).ok_or_else(|| {
                format!("{} is not a load of the TMA pipeline", op_at(k, c.op))
            })?)),
            (Queue::Mbar, None) => {
                return Err(format!(
                    "{} is a TMA load outside a TMA pipeline",
                    op_at(k, c.op)
                ));
            }
            _ => None,
        };
        met += follow(cx, (target, &facts, &mut chains), (ci, queue), mbar)?;
    }
    if copies + reads + fenced == 0 {
        return Ok(String::new());
    }
    let mut also = String::new();
    if reads > 0 {
        also += &format!(", {reads} wgmma operand reads likewise");
    }
    if fenced > 0 {
        also += &format!(", {fenced} generic writes followed to their proxy fences");
    }
    Ok(format!(
        "; {copies} async copies followed to the waits and barriers that complete them{also} ({met} accesses met in flight)"
    ))
}

/// Whether the barrier-interval pair of accesses `i` and `j` is left to the in-flight walk:
/// one is a TMA load and the other cannot reach the load's issue without crossing a barrier,
/// so in one interval it only ever follows the issue. The load's walk tests every access
/// after the issue until the wait of its use, which orders them and which the intervals do
/// not see.
pub(super) fn after_tma_issue(cx: &PairCx, i: usize, j: usize) -> bool {
    let (a, b) = (&cx.accs[i], &cx.accs[j]);
    let tma = |x: &Access| x.kind == AccessKind::AsyncWrite(AsyncClass::Tma);
    let (k, parents) = (cx.k, cx.parents);
    // `x` never before the load `c` in one interval, and on the load's walk.
    let after = |c: Op, x: Op| !reaches(k, parents, (x, c), true) && reaches(k, parents, (c, x), false);
    match (tma(a), tma(b)) {
        (true, false) => after(a.op, b.op),
        (false, true) => after(b.op, a.op),
        _ => false,
    }
}

/// Whether a path from `from` reaches `to` (both arms of every `if`, any number of loop
/// iterations; the paths of the in-flight walk), without crossing a `barrier` when
/// `barriers` (over-approximated: a loop may always be left alive). An op in the other arm
/// of an `if` around `from` is not reached (unless through a loop's back edge).
fn reaches(k: &Kernel, parents: &Parents, (from, to): (Op, Op), barriers: bool) -> bool {
    struct Reach<'a> {
        k: &'a Kernel,
        to: Op,
        found: bool,
        barriers: bool,
    }
    impl Reach<'_> {
        fn seq(&mut self, r: Region, from: usize, mut alive: bool) -> bool {
            let ops = self.k.region_ops(r);
            for &op in &ops[from.min(ops.len())..] {
                if !alive {
                    return false;
                }
                self.found |= op == self.to;
                let od = &self.k.ops[op];
                alive = match &od.kind {
                    OpKind::Barrier => !self.barriers,
                    OpKind::For { .. } | OpKind::While { .. } => {
                        for &c in &od.regions {
                            self.seq(c, 0, true);
                        }
                        true
                    }
                    _ if od.regions.is_empty() => true,
                    OpKind::If { .. } => {
                        let mut out = od.regions.len() < 2;
                        for &c in &od.regions {
                            out |= self.seq(c, 0, true);
                        }
                        out
                    }
                    _ => od.regions.iter().fold(true, |x, &c| self.seq(c, 0, x)),
                };
            }
            alive
        }
    }
    let mut rr = Reach {
        k,
        to,
        found: false,
        barriers,
    };
    let mut cur = from;
    let mut alive = true;
    while let Some(r) = parents.op_region[cur] {
        let pos = k.region_ops(r).iter().position(|o| *o == cur).unwrap_or(0);
        alive = rr.seq(r, pos + 1, alive);
        let Some(p) = parents.region_op[r] else { break };
        if alive && matches!(k.ops[p].kind, OpKind::For { .. } | OpKind::While { .. }) {
            for &c in &k.ops[p].regions {
                rr.seq(c, 0, true);
            }
        }
        cur = p;
    }
    rr.found
}

/// Whether `op` sits in the `else` arm of some `if`.
fn in_else_arm(k: &Kernel, parents: &Parents, op: Op) -> bool {
    let mut cur = op;
    while let Some(p) = parents.parent_op(cur) {
        if matches!(k.ops[p].kind, OpKind::If { .. })
            && parents.op_region[cur] == k.ops[p].regions.get(1).copied()
        {
            return true;
        }
        cur = p;
    }
    false
}

/// The walks of one access `ci` on `queue`, one per assignment of the unrolled loops around
/// it; returns how many records were tested.
fn follow(
    cx: &PairCx,
    (target, facts, chains): (Option<Target>, &WalkFacts, &mut chain::ChainMemo),
    (ci, queue): (usize, Queue),
    mbar: Option<(&Plan, LoadUse)>,
) -> Result<usize, String> {
    let (k, c) = (cx.k, &cx.accs[ci]);
    let ancestors = cx.parents.ancestors(c.op);
    let probe = Walk {
        k,
        facts,
        parents: cx.parents,
        target,
        queue,
        l: None,
        p: None,
        env: Vec::new(),
        records: FxHashSet::default(),
        watch: if queue == Queue::WgmmaGroups {
            result_uses(k, c.op)?
        } else {
            HashSet::new()
        },
        mbar: None,
    };
    // The relation loop: the innermost loop around the access that the walk iterates.
    let l = ancestors.iter().copied().find(|o| match k.ops[*o].kind {
        OpKind::For { .. } => probe.unrolled(*o).is_none() && !probe.plain(*o),
        OpKind::While { .. } => true,
        _ => false,
    });
    let unrolled: Vec<(Value, Vec<i64>)> = ancestors
        .iter()
        .rev()
        .filter_map(|a| {
            let vals = probe.unrolled(*a)?;
            Some((k.region_args(k.ops[*a].regions[0])[0], vals))
        })
        .collect();
    let start = match queue {
        Queue::CpAsyncGroups | Queue::WgmmaGroups | Queue::BulkGroups => -1,
        Queue::Counter(_) | Queue::Fence | Queue::Mbar => 0,
    };
    let pipeline_iv = mbar.map(|(p, _)| k.region_args(k.ops[p.l].regions[0])[0]);
    // With the pipeline loop unrolled (constant trip count `T`), the load of iteration `x`
    // runs only when its use `x + δ` is below `T` (its trip guard).
    let trips = mbar.and_then(|(p, _)| match &k.ops[p.l].kind {
        OpKind::For { hi, .. } => constant(k, hi),
        _ => None,
    });
    // An instance (thread, enumerated iterations) names one execution of the access within
    // one iteration of its relation loop only when every loop between them is enumerated or
    // unrolled.
    let exact = ancestors.iter().take_while(|o| Some(**o) != l).all(|o| {
        !matches!(k.ops[*o].kind, OpKind::For { .. })
            || cx.en.ivs.contains(&k.region_args(k.ops[*o].regions[0])[0])
            || probe.unrolled(*o).is_some()
    });
    let mut met = 0;
    for env in assignments(unrolled.iter()) {
        let copy_iter = env
            .iter()
            .find(|(v, _)| Some(*v) == pipeline_iv)
            .map(|x| x.1);
        if let (Some((_, load)), Some(x), Some(t)) = (mbar, copy_iter, trips)
            && load.in_loop
            && x + load.delta >= t
        {
            continue;
        }
        // A cp.async copy's walk is shared with the next copies of its region (`chain.rs`).
        let walked = if queue == Queue::CpAsyncGroups && mbar.is_none() {
            chain::walk(&probe, chains, (c.op, l, &env))
        } else {
            let mut w = Walk {
                l,
                env: env.clone(),
                mbar: mbar.map(|(plan, load)| MbarWalk {
                    plan,
                    load,
                    copy_iter,
                }),
                ..probe_clone(&probe)
            };
            let exit = w.walk_copy(c.op, start);
            let mut recs: Vec<Record> = w.records.into_iter().collect();
            recs.sort();
            let pinned = w.p;
            Rc::new(chain::Chained::Walked(chain::Walked { recs, exit, pinned }))
        };
        let base = walked.base();
        if queue != Queue::Fence && base.exit.values().any(|a| *a != WAITED) {
            return Err(format!(
                "{} may still be in flight at kernel exit (no wait completes it on every path)",
                op_at(k, c.op)
            ));
        }
        if let Some(r) = base.recs.iter().find(|r| r.3 && probe.watch.contains(&r.0)) {
            return Err(format!(
                "{} may read the result of {} before a `wgmma_wait` completes it",
                op_at(k, r.0),
                op_at(k, c.op)
            ));
        }
        let pair = Pair {
            ci,
            env: &env,
            l,
            pinned: base.pinned,
            exact,
            fence: queue == Queue::Fence,
        };
        let rel = if l.is_some() { Rel::Dist(0) } else { Rel::Free };
        met += chain::check_all(cx, &pair, &walked, Tag { rel, pin: None })?;
    }
    Ok(met)
}

fn probe_clone<'a>(w: &Walk<'a>) -> Walk<'a> {
    Walk {
        k: w.k,
        facts: w.facts,
        parents: w.parents,
        target: w.target,
        queue: w.queue,
        l: w.l,
        p: None,
        env: Vec::new(),
        records: FxHashSet::default(),
        watch: w.watch.clone(),
        mbar: None,
    }
}

/// The ops that read the registers a wgmma `w` writes asynchronously: uses of its results,
/// followed through `yield` into loop iteration values and `for`/`if` results, except as
/// the accumulator of another wgmma (which the hardware chains in order). A wgmma with
/// register A operands declines (the registers it holds until its wait are not followed).
fn result_uses(k: &Kernel, w: Op) -> Result<HashSet<Op>, String> {
    let OpKind::Wgmma { a, .. } = &k.ops[w].kind else {
        return Ok(HashSet::new());
    };
    if !a.regs().is_empty() {
        return Err(format!(
            "{} holds register A operands until its wait, which the proof does not follow",
            op_at(k, w)
        ));
    }
    let parents = k.parents();
    let mut vals: HashSet<Value> = k.ops[w].results.iter().copied().collect();
    let mut uses = HashSet::new();
    loop {
        let before = vals.len();
        for op in k.ops_in_order() {
            let od = &k.ops[op];
            let mut hit = Vec::new();
            let mut i = 0;
            od.kind.for_each_operand(|o| {
                if o.value().is_some_and(|v| vals.contains(&v)) {
                    hit.push(i);
                }
                i += 1;
            });
            if hit.is_empty() {
                continue;
            }
            match &od.kind {
                OpKind::Wgmma { a, .. } if hit.iter().all(|&j| j >= a.regs().len()) => {}
                OpKind::Yield(_) => {
                    let Some(p) = parents.parent_op(op) else {
                        continue;
                    };
                    let pk = &k.ops[p];
                    for j in hit {
                        if let OpKind::For { .. } = pk.kind
                            && let Some(&arg) = k.region_args(pk.regions[0]).get(j + 1)
                        {
                            vals.insert(arg);
                        }
                        if let Some(&r) = pk.results.get(j) {
                            vals.insert(r);
                        }
                    }
                }
                _ => {
                    uses.insert(op);
                }
            }
        }
        if vals.len() == before {
            return Ok(uses);
        }
    }
}

/// One followed access (index in `cx.accs`), the unrolled loops' values at its issue, its
/// relation loop and the loop its walk pinned.
struct Pair<'a> {
    ci: usize,
    env: &'a [(Value, i64)],
    l: Option<Op>,
    pinned: Option<Op>,
    /// Instances identify executions within one iteration of `l` (see `follow`).
    exact: bool,
    /// A generic write followed to its fence: only async-proxy accesses count (pending: no
    /// fence yet; waited: fenced, but no barrier since orders the fence before them).
    fence: bool,
}

/// The instances of access `i` at the values `env` of the unrolled loops.
fn restricted(cx: &PairCx, i: usize, env: &[(Value, i64)]) -> std::rc::Rc<Vec<Inst>> {
    cx.memo.restricted(i, env, || {
        let combos = cx.en.combos(cx.parents, cx.accs[i].op);
        cx.values[i]
            .iter()
            .filter(|x| {
                combos.get(x.combo as usize).is_none_or(|c| {
                    c.iter()
                        .all(|(v, val)| env.iter().all(|(w, y)| w != v || y == val))
                })
            })
            .copied()
            .collect()
    })
}

/// Tests one record against every access of its op in the followed access's alias class;
/// returns how many were tested.
fn check_record(cx: &PairCx, p: &Pair, rec: &Record) -> Result<usize, String> {
    let k = cx.k;
    let c = &cx.accs[p.ci];
    let (x_op, env, tag, pending) = (rec.0, &rec.1, rec.2, rec.3);
    let mut n = 0;
    for &xi in cx.memo.of_op(x_op) {
        let x = &cx.accs[xi];
        if x.class != c.class || !conflicting(c, x) || p.fence && !async_proxy(x) {
            continue;
        }
        n += 1;
        if x.buf != c.buf {
            return Err(alias_met(k, c, x, "while the first is in flight"));
        }
        if x.collective.is_some() {
            return Err(format!(
                "{} may meet the in-flight access {} (a collective access with an opaque layout)",
                op_at(k, x.op),
                op_at(k, c.op)
            ));
        }
        let vc = restricted(cx, p.ci, p.env);
        let vx = restricted(cx, xi, env);
        let rule = Meet {
            same_thread: pending,
            self_pair: p.exact
                && xi == p.ci
                && env.as_slice() == p.env
                && tag.pin.is_none()
                && matches!(tag.rel, Rel::Free | Rel::Dist(0)),
        };
        if let Some((t1, t2)) = related_collide(
            cx,
            p,
            (tag, env),
            Sides {
                a: c,
                b: x,
                va: &vc,
                vb: &vx,
            },
            rule,
        ) {
            return Err(met_in_flight(k, p, (c, x), (t1, t2), pending));
        }
    }
    Ok(n)
}

fn met_in_flight(
    k: &Kernel,
    p: &Pair,
    (c, x): (&Access, &Access),
    (t1, t2): (u32, u32),
    pending: bool,
) -> String {
    let who = |t: u32| {
        if t == super::proof_tiles::ANY {
            "any thread".to_string()
        } else if t == super::proof_tiles::ENGINE {
            "the copy engine".to_string()
        } else {
            format!("thread {t}")
        }
    };
    let (t1, t2) = (who(t1), who(t2));
    if p.fence {
        let how = if pending {
            "with no `fence_proxy_async` of the writer in between"
        } else {
            "with no barrier between the writer's `fence_proxy_async` and the read"
        };
        return format!(
            "{} ({t1}) writes an element that {} ({t2}) reads through the async proxy {how}",
            op_at(k, c.op),
            op_at(k, x.op)
        );
    }
    let state = if pending {
        "before a wait completes it"
    } else {
        "after the wait that completes it but before a barrier"
    };
    let verb = if c.kind.writes() { "write" } else { "read" };
    format!(
        "{} ({t1}) may {verb} an element that {} ({t2}) accesses {state}",
        op_at(k, c.op),
        op_at(k, x.op)
    )
}

/// The collision test under a tag: `x`'s free terms that are functions of the pinned loop's
/// induction variable are evaluated at the pinned iteration, then the terms of the relation
/// loop at the tag's distance; every other term is an independent unknown.
fn related_collide(
    cx: &PairCx,
    p: &Pair,
    (tag, rec_env): (Tag, &[(Value, i64)]),
    Sides {
        a: c,
        b: x,
        va: vc,
        vb: vx,
    }: Sides,
    rule: Meet,
) -> Option<(u32, u32)> {
    let k = cx.k;
    // The loops the walk unrolled have known iterations on both sides.
    let c_known = at_unrolled(cx, p.env, c, vc);
    let x_known = at_unrolled(cx, rec_env, x, vx);
    let (c, vc) = c_known.as_ref().map_or((c, vc), |(a, v)| (a, v.as_slice()));
    let (x, vx) = x_known.as_ref().map_or((x, vx), |(a, v)| (a, v.as_slice()));
    let pinned = tag
        .pin
        .zip(p.pinned)
        .and_then(|(j, l)| Some((LoopRelation::of(k, cx.ranges, l, Vec::new())?, j)));
    let (x_pinned, vx_pinned);
    let (x, vx) = match pinned {
        Some((rel, j)) if rel.lo.is_some() => {
            let at = rel.lo.unwrap_or(0) + j as i64 * rel.step;
            (x_pinned, vx_pinned) = pin(cx, (&rel, at), x, vx);
            (&x_pinned, vx_pinned.as_slice())
        }
        _ => (x, vx),
    };
    if let Rel::Dist(d) = tag.rel
        && let Some(rel) =
            p.l.and_then(|l| LoopRelation::of(k, cx.ranges, l, vec![d as i64]))
    {
        let sides = Sides {
            a: c,
            b: x,
            va: vc,
            vb: vx,
        };
        return collide_related(k, cx.ranges, &rel, sides, rule, cx.memo);
    }
    let g = c
        .form
        .free
        .iter()
        .chain(&x.form.free)
        .fold(0i64, |g, (_, v)| gcd(g, v.wrapping_abs()));
    collide(cx.memo, vc, vx, wrap_modulus(g, c, x), rule)
}

/// `x` with the free terms that are functions of the induction variables in `env` (the
/// loops the walk unrolled, not enumerated) evaluated at their values there; `None` when no
/// such term changes it (then `x` and its instances stand as they are, keeping their memo
/// identity).
fn at_unrolled(
    cx: &PairCx,
    env: &[(Value, i64)],
    x: &Access,
    vx: &[Inst],
) -> Option<(Access, Rc<Vec<Inst>>)> {
    let k = cx.k;
    let mut cur: Option<(Access, Rc<Vec<Inst>>)> = None;
    for &(iv, at) in env {
        if cx.en.ivs.contains(&iv) {
            continue;
        }
        let ValueDef::RegionArg(r, 0) = k.values[iv].def else {
            continue;
        };
        let Some(rel) = cx.parents.region_op[r]
            .and_then(|l| LoopRelation::of(k, cx.ranges, l, Vec::new()))
        else {
            continue;
        };
        let next = {
            let (a, v) = cur.as_ref().map_or((x, vx), |(a, v)| (a, v.as_slice()));
            pin(cx, (&rel, at), a, v)
        };
        cur = Some(next);
    }
    cur
}

/// `x` in the iteration of loop `rel` where its induction variable equals `at`: the free
/// terms that are functions of it become constants added to every instance.
fn pin(
    cx: &PairCx,
    (rel, at): (&LoopRelation, i64),
    x: &Access,
    vx: &[Inst],
) -> (Access, std::rc::Rc<Vec<Inst>>) {
    let (k, ind) = (cx.k, &cx.ranges.inductions);
    let mut off = 0i64;
    let mut free = Vec::new();
    for &(v, coef) in &x.form.free {
        let known = match cx.memo.iv_fn(k, ind, v, (rel.iv, rel.iv_range)) {
            Some(IvFn::Const(y)) => Some(y),
            Some(IvFn::Affine(m, q)) if affine_exact(m, q, rel.iv_range) => Some(m * at + q),
            Some(IvFn::Periodic(_)) => cx.memo.eval_iv(k, ind, v, rel.iv, at),
            _ => None,
        };
        match known {
            Some(y) => off = off.wrapping_add(coef.wrapping_mul(y)),
            None => free.push((v, coef)),
        }
    }
    let form = super::proof::Form {
        c: x.form.c,
        tpart: x.form.tpart.clone(),
        free,
    };
    let shifted = cx.memo.shifted_copy(vx, off);
    let a = Access {
        op: x.op,
        buf: x.buf,
        class: x.class,
        kind: x.kind,
        form,
        exact: x.exact,
        collective: None,
        tile: None,
    };
    (a, shifted)
}
