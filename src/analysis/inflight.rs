//! The in-flight state of asynchronous copies: which async operations may still be
//! outstanding at each program point, how many younger operations (or commit groups) each has
//! on every path, which waits complete them, and which shared-memory accesses may observe one
//! before it completes.
//!
//! This is seed 003's long-term model (`asyncWriteSlices` promoted by waits, ordered for
//! count-based waits) computed as a forward dataflow over the structured kernel, replacing
//! seed 002's backward walk (see `docs/async.md`).
//!
//! # Queues
//! Every async op joins one [`Queue`] of its issuing thread: an AMD hardware counter
//! (`vmcnt`, `loadcnt`, `asynccnt`, `tensorcnt`: the target decides; on AMD every `gload`
//! also ticks the target's vector-memory counter), the cp.async, bulk (TMA store) or wgmma
//! commit-group list, the TMA mbarriers, or tokens only. A counter wait `c(N)` completes the
//! operations with at least `N` younger operations on `c`; a group wait `N` completes the
//! copies with at least `N` younger *committed* groups (uncommitted copies never); an
//! `mbar_wait` completes the TMA loads whose mbarrier slot provably equals its own;
//! `wait_tokens` completes the most recent execution of each named copy. Barriers complete
//! nothing (seed 003: a barrier cannot make an in-flight copy visible).
//!
//! # Lattice
//! A [`Pending`] is an async op plus one [`IterTag`] per enclosing loop of the current
//! program point: `Dist(d)` for a loop enclosing the op (issued `d` iterations ago), `Pre(j)`
//! when the loop was entered after the issue (now in its `j`-th iteration), `Unknown` once
//! `d` or `j` reaches [`TAG_CAP`]. The state ([`InFlight`]) maps, per queue, each pending
//! entry to its *minimum age* over all paths: the number of younger operations on that queue
//! (counters) or younger committed groups (group queues; `-1` = possibly uncommitted).
//! Order: `a ⊑ b` iff every entry of `a` is in `b` with an age `>=` its age in `b`. Join:
//! union of entries, minimum of ages (a copy absent on one path — seed 002's `NullAsyncDep`
//! — constrains nothing). Transfer functions are monotone: issue (tick the queue, add an
//! entry of age 0 or -1), commit (tick committed, uncommitted become 0), wait (drop entries
//! old enough), `gload` (tick). Ages saturate at [`AGE_CAP`].
//!
//! # Path classes
//! One state per valuation of up to [`MAX_ASSUMED`] branch conditions computed once per
//! thread (outside every loop): an elected thread's `if %lead` around the prologue copies and
//! around the loop copies takes the same arm, so its counts stay exact. Other conditions join.
//!
//! # Solver
//! Sequence = fold; `if` = both arms from the same input, then join; a loop = iterate
//! `head := head ⊔ back_edge(body(head))` from `head := entry` (entries tagged `Pre(0)`; the
//! back edge increments the loop's tags) until it is stable; the exit state is the head with
//! the loop's tags removed. Height: every entry's age only decreases and entries are only
//! added, and there are at most `A · (2·TAG_CAP + 1)^D` distinct entries for `A` async ops
//! and loop depth `D`, so a loop needs at most `O(TAG_CAP + Q)` passes in practice (`Q` the
//! largest age that matters) and the whole analysis is `O(ops · passes · entries)`
//! transfer steps, plus the footprint queries of [`crate::analysis::overlap`] (cached per
//! consumer, copy and tags). No path is ever enumerated.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::overlap::{IterTag, Overlap};
use crate::ir::effects::{SharedAccess, WaitKind};
use crate::ir::*;
use crate::target::Target;

/// Iteration tags saturate here (beyond it the iteration relation is unknown).
pub const TAG_CAP: u32 = 10;
/// Ages saturate here.
pub const AGE_CAP: i32 = 1 << 20;

/// An in-order completion queue of the issuing thread.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Queue {
    /// An AMD hardware counter.
    Counter(Counter),
    /// cp.async commit groups.
    CpAsync,
    /// TMA-store (bulk) commit groups.
    Bulk,
    /// wgmma commit groups.
    Wgmma,
    /// TMA loads completing on mbarriers.
    Mbarrier,
    /// Copies only `wait_tokens` can complete.
    Token,
}

impl Queue {
    fn rank(self) -> usize {
        match self {
            Queue::Counter(c) => Counter::ALL.iter().position(|x| *x == c).unwrap_or(0),
            Queue::CpAsync => 100,
            Queue::Bulk => 101,
            Queue::Wgmma => 102,
            Queue::Mbarrier => 103,
            Queue::Token => 104,
        }
    }
    /// Whether every issue ticks the queue (counters) rather than commits (groups).
    pub fn ticks_on_issue(self) -> bool {
        matches!(self, Queue::Counter(_))
    }
    /// Whether the queue completes in issue order and a count wait exists for it.
    pub fn counted(self) -> bool {
        matches!(
            self,
            Queue::Counter(_) | Queue::CpAsync | Queue::Bulk | Queue::Wgmma
        )
    }
    pub fn name(self) -> String {
        match self {
            Queue::Counter(c) => c.name().to_string(),
            Queue::CpAsync => "cp.async groups".into(),
            Queue::Bulk => "bulk groups".into(),
            Queue::Wgmma => "wgmma groups".into(),
            Queue::Mbarrier => "mbarrier".into(),
            Queue::Token => "tokens".into(),
        }
    }
}

impl PartialOrd for Queue {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queue {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&o.rank())
    }
}

/// One possibly outstanding execution of an async op.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pending {
    pub op: Op,
    /// One tag per loop enclosing the current program point (outermost first).
    pub tags: Vec<(Op, IterTag)>,
}

/// The dataflow state: per queue, each pending entry and its minimum age over all paths
/// that agree with `assume`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InFlight {
    pub queues: BTreeMap<Queue, BTreeMap<Pending, i32>>,
    /// The values of the tracked branch conditions on these paths (see [`MAX_ASSUMED`]).
    pub assume: BTreeMap<Value, bool>,
}

/// At most this many branch conditions are tracked per path class (so at most `2^4` states
/// at a program point).
pub const MAX_ASSUMED: usize = 4;

/// Joins the states of `b` into `a`, matching them by their assumptions; returns whether `a`
/// changed.
pub fn join_parts(a: &mut Vec<InFlight>, b: Vec<InFlight>) -> bool {
    let mut changed = false;
    for s in b {
        match a.iter_mut().find(|x| x.assume == s.assume) {
            Some(x) => changed |= x.join(&s),
            None => {
                a.push(s);
                changed = true;
            }
        }
    }
    changed
}

/// The join of all states, forgetting assumptions.
pub fn join_all(parts: &[InFlight]) -> InFlight {
    let mut out = InFlight::default();
    for p in parts {
        out.join(p);
    }
    out
}

impl InFlight {
    /// Joins `o` into `self` (union, minimum age); returns whether `self` changed.
    pub fn join(&mut self, o: &InFlight) -> bool {
        let mut changed = false;
        for (q, m) in &o.queues {
            let mine = self.queues.entry(*q).or_default();
            for (p, a) in m {
                match mine.get_mut(p) {
                    Some(b) if *b <= *a => {}
                    Some(b) => {
                        *b = *a;
                        changed = true;
                    }
                    None => {
                        mine.insert(p.clone(), *a);
                        changed = true;
                    }
                }
            }
        }
        changed
    }

    /// Whether nothing may be outstanding.
    pub fn is_empty(&self) -> bool {
        self.queues.values().all(|m| m.is_empty())
    }

    /// Entries of a queue.
    pub fn entries(&self, q: Queue) -> impl Iterator<Item = (&Pending, i32)> {
        self.queues
            .get(&q)
            .into_iter()
            .flat_map(|m| m.iter().map(|(p, a)| (p, *a)))
    }

    fn tick(&mut self, q: Queue) {
        if let Some(m) = self.queues.get_mut(&q) {
            for a in m.values_mut() {
                *a = (*a + 1).min(AGE_CAP);
            }
        }
    }

    fn insert(&mut self, q: Queue, p: Pending, age: i32) {
        let m = self.queues.entry(q).or_default();
        let e = m.entry(p).or_insert(age);
        *e = (*e).min(age);
    }

    fn map_tags(&mut self, f: impl Fn(&mut Vec<(Op, IterTag)>)) {
        for m in self.queues.values_mut() {
            let old = std::mem::take(m);
            for (mut p, a) in old {
                f(&mut p.tags);
                let e = m.entry(p).or_insert(a);
                *e = (*e).min(a);
            }
        }
    }

    /// Drops the entries of `q` whose age is at least `n`, returning them.
    pub fn complete_older(&mut self, q: Queue, n: u32) -> Vec<(Pending, i32)> {
        let mut done = Vec::new();
        if let Some(m) = self.queues.get_mut(&q) {
            m.retain(|p, a| {
                if *a >= n as i32 {
                    done.push((p.clone(), *a));
                    false
                } else {
                    true
                }
            });
        }
        done
    }
}

/// A shared access that may observe an in-flight async access (a finding only a wait fixes).
#[derive(Clone, Debug, PartialEq)]
pub struct InflightHazard {
    /// The op whose access may observe the copy.
    pub consumer: Op,
    /// The async op still outstanding.
    pub copy: Op,
    pub queue: Queue,
    pub tags: Vec<(Op, IterTag)>,
    /// Its minimum number of younger operations/groups at the consumer.
    pub age: i32,
}

/// One execution of a copy that a wait completes.
#[derive(Clone, Debug, PartialEq)]
pub struct Completed {
    pub copy: Op,
    pub queue: Queue,
    pub tags: Vec<(Op, IterTag)>,
    /// Minimum number of younger operations/groups at the wait, over all paths.
    pub age: i32,
}

/// What [`completions`] computes.
#[derive(Clone, Debug, Default)]
pub struct Completions {
    /// For each wait op, the copy executions it completes.
    pub by_wait: BTreeMap<Op, Vec<Completed>>,
    /// For each async op, the waits that complete some execution of it.
    pub by_copy: BTreeMap<Op, BTreeSet<Op>>,
    /// Shared accesses that may observe an in-flight async access.
    pub hazards: Vec<InflightHazard>,
    /// Async ops that may still be outstanding when the kernel ends.
    pub outstanding_at_exit: Vec<Op>,
    /// (loop, copy in it): every execution of the copy is completed inside the loop, those
    /// of the last iterations being ruled out by the copy's guard (`iv < hi - c`, a
    /// prefetch that stops before the loop ends).
    pub drained: BTreeSet<(Op, Op)>,
    /// Footprint queries answered conservatively (W0314).
    pub warnings: Vec<crate::diag::Diagnostic>,
}

/// Where an async op inside a loop is completed, in the shape barrier placement asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopCompletion {
    /// The loop level (index into the copy's enclosing loops, outermost first) that the
    /// completion is relative to: the innermost loop whose body, outside the deeper loops
    /// around the copy, holds a completing wait (copies issued by an inner `for` inside a
    /// pipelined loop are completed by a wait of the pipelined loop). `None` for a copy
    /// outside every loop.
    pub level: Option<usize>,
    /// The wait inside the loop at `level` (outside deeper copy loops) that completes the
    /// copy soonest, and how many iterations of that loop after the issue (`0`: the same
    /// iteration).
    pub in_loop: Option<(Op, u32)>,
    /// The first wait after the loop at `level` (in program order) that completes the copy
    /// on the exit path.
    pub exit: Option<Op>,
    /// Whether `exit` completes the copy already in the first iteration of every loop around
    /// it that does not enclose the copy (a prologue's copy waited for in the main loop's
    /// first iteration): later iterations run after the wait.
    pub exit_on_entry: bool,
    /// Whether no execution of the copy leaves the loop at `level` in flight (its guard rules
    /// out the executions `in_loop`'s wait would complete after the loop, see
    /// [`Completions::drained`]).
    pub exit_drained: bool,
}

impl Completions {
    /// Where `copy` is completed: the innermost enclosing loop level with a completing wait
    /// in its body (outside the deeper loops around the copy), that wait and its iteration
    /// distance, and the first completing wait after that loop. Without any such level, the
    /// outermost loop's exit wait. For a copy outside every loop, `in_loop` is the first
    /// completing wait in program order with distance 0. Every wait this reports completes
    /// the copy on every path reaching it (a count wait drops an entry only when its minimum
    /// age over all paths is large enough).
    pub fn loop_completion(&self, k: &Kernel, copy: Op) -> LoopCompletion {
        let parents = k.parents();
        let mut copy_loops: Vec<Op> = parents
            .ancestors(copy)
            .into_iter()
            .filter(|a| matches!(k.ops[*a].kind, OpKind::For { .. } | OpKind::While { .. }))
            .collect();
        copy_loops.reverse();
        let order = k.program_order();
        let waits = self.by_copy.get(&copy).cloned().unwrap_or_default();
        let mut found = None;
        for level in (0..copy_loops.len()).rev() {
            let (l, deeper) = (copy_loops[level], copy_loops.get(level + 1).copied());
            let mut best: Option<(Op, u32)> = None;
            for &w in &waits {
                let anc = parents.ancestors(w);
                if !anc.contains(&l) || deeper.is_some_and(|d| anc.contains(&d)) {
                    continue;
                }
                for c in self.completed_by(w, copy) {
                    let Some((_, IterTag::Dist(d))) = c.tags.iter().find(|(tl, _)| *tl == l) else {
                        continue;
                    };
                    if best.is_none_or(|(w0, d0)| (*d, order.get(&w)) < (d0, order.get(&w0))) {
                        best = Some((w, *d));
                    }
                }
            }
            if best.is_some() {
                found = Some((level, best));
                break;
            }
        }
        let (level, in_loop) = match (found, copy_loops.is_empty()) {
            (Some((lv, b)), _) => (Some(lv), b),
            (None, false) => (Some(0), None),
            (None, true) => (None, self.first_straight_wait(&waits, copy, &order)),
        };
        let mut exit: Option<Op> = None;
        let mut exit_on_entry = false;
        if let Some(l) = level.map(|lv| copy_loops[lv]) {
            for &w in &waits {
                let outside = !parents.ancestors(w).contains(&l);
                if outside
                    && order.get(&w) > order.get(&l)
                    && exit.is_none_or(|e| order.get(&w) < order.get(&e))
                    && self.completed_by(w, copy).next().is_some()
                {
                    exit = Some(w);
                    exit_on_entry = self.completes_on_entry(w, copy, &copy_loops);
                }
            }
        }
        let exit_drained = level.is_some_and(|lv| self.drained.contains(&(copy_loops[lv], copy)));
        LoopCompletion {
            level,
            in_loop,
            exit,
            exit_on_entry,
            exit_drained,
        }
    }

    /// The executions of `copy` that wait `w` completes.
    fn completed_by(&self, w: Op, copy: Op) -> impl Iterator<Item = &Completed> {
        self.by_wait
            .get(&w)
            .into_iter()
            .flatten()
            .filter(move |c| c.copy == copy)
    }

    /// For a copy outside every loop: its first completing wait in program order.
    fn first_straight_wait(
        &self,
        waits: &BTreeSet<Op>,
        copy: Op,
        order: &std::collections::HashMap<Op, usize>,
    ) -> Option<(Op, u32)> {
        waits
            .iter()
            .filter(|w| self.completed_by(**w, copy).next().is_some())
            .min_by_key(|w| order.get(w))
            .map(|w| (*w, 0))
    }

    /// Whether wait `w` completes some execution of `copy` whose tags place `w` in the first
    /// iteration (`Pre(0)`) of every loop around `w` that does not enclose the copy
    /// (`copy_loops`: the copy's ancestors).
    fn completes_on_entry(&self, w: Op, copy: Op, copy_loops: &[Op]) -> bool {
        self.by_wait.get(&w).into_iter().flatten().any(|c| {
            c.copy == copy
                && c.tags
                    .iter()
                    .filter(|(l, _)| !copy_loops.contains(l))
                    .all(|(_, t)| *t == IterTag::Pre(0))
        })
    }
}

/// Callbacks of the solver.
pub trait Visitor {
    /// Called with the state just before each non-structural op; may change the state (a
    /// wait planner applies the wait it inserts before `op`).
    /// There is one state per class of paths (tracked branch conditions); all run the op.
    fn before(&mut self, _flow: &mut Flow<'_>, _op: Op, _states: &mut [InFlight]) {}
    /// Called at the start of each pass over the body of loop `l` (the last pass is the one
    /// whose result equals the loop head's stable state).
    fn loop_pass(&mut self, _flow: &mut Flow<'_>, _l: Op) {}
    /// Called with the states just before loop `l` is entered (before its entries are
    /// tagged); may change them (a wait hoisted out of the loop goes here).
    fn enter_loop(&mut self, _flow: &mut Flow<'_>, _l: Op, _states: &mut [InFlight]) {}
    /// Called for each entry a wait op of the kernel completes.
    fn completed(&mut self, _wait: Op, _queue: Queue, _p: &Pending, _age: i32) {}
}

/// The answers for one (copy, consumer), by the copy's iteration tags: whether they may
/// conflict, and the conservative-answer notes (W0314) the query raised, replayed on a hit.
type ByTags = HashMap<Vec<(Op, IterTag)>, (bool, Vec<Note>)>;

/// A conservative-answer note of an overlap query (`Overlap::conservative`).
type Note = (Op, Op, &'static str);

/// Footprint answers of the dataflow ("may this consumer conflict with this execution of
/// this copy"), shared by every run of the solver on one kernel and on the kernels derived
/// from it by inserting sync ops (waits, commits, barriers).
///
/// **Validity.** Keys are op ids: the copy, the consumer and the loops of the copy's tags.
/// An answer depends only on those ops' shared accesses, their enclosing loops and the
/// values their indices read, none of which an inserted sync op changes; `ir::edit::apply`
/// clones the kernel and appends the new ops to the arena, so every existing id keeps its op (tests: `memo_ids_survive_applying_waits`). A memo must therefore never be
/// carried to an unrelated kernel, nor to one whose existing ops were edited: the owner
/// records the arena length of the kernel it was made for ([`FlowMemo::for_kernel`]) and
/// every solver checks, in debug builds, that the ops before it are unchanged in kind.
///
/// Lookups allocate nothing: answers are grouped by (copy, consumer) and found by the tag
/// slice. Memory: one entry per distinct (copy, consumer, tags) queried.
#[derive(Clone, Debug, Default)]
pub struct FlowMemo {
    conflicts: HashMap<(Op, Op), ByTags>,
    /// TMA loads whose slot reuse a placed cross-role handshake orders (`sync::handshake`):
    /// the hazard finder reports no hazard between two of them.
    pub ordered_tma: std::collections::HashSet<Op>,
    /// The kernel the memo was made for (debug builds), to check the ids are stable.
    #[cfg(debug_assertions)]
    origin: Option<Vec<OpKind>>,
}

impl FlowMemo {
    /// An empty memo for `k` and the kernels derived from it by inserting sync ops.
    pub fn for_kernel(k: &Kernel) -> Self {
        let _ = k;
        FlowMemo {
            #[cfg(debug_assertions)]
            origin: Some(k.ops.iter().map(|(_, d)| d.kind.clone()).collect()),
            ..Default::default()
        }
    }

    /// Number of answers held.
    pub fn len(&self) -> usize {
        self.conflicts.values().map(|m| m.len()).sum()
    }

    /// Whether no answer is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Debug builds: the ops of the kernel the memo was made for are still there, unchanged.
    fn check(&self, k: &Kernel) {
        #[cfg(debug_assertions)]
        if let Some(o) = &self.origin {
            debug_assert!(
                o.len() <= k.ops.len()
                    && o.iter().zip(k.ops.iter()).all(|(a, (_, b))| *a == b.kind),
                "a flow memo was carried to a kernel whose existing ops changed"
            );
        }
        let _ = k;
    }
}

/// The solver: the kernel, the target, and cached footprint queries.
pub struct Flow<'k> {
    pub k: &'k Kernel,
    pub target: Target,
    pub overlap: Overlap<'k>,
    /// Enclosing loops (`for` and `while`) of each op, outermost first.
    loops: HashMap<Op, Vec<Op>>,
    memo: FlowMemo,
    /// Which wgmma results reach each value (register hazards).
    regs: crate::analysis::regdeps::RegSources<'k>,
    /// Per (loop, copy in it): `true` when a guard ruled out some of the copy's executions at
    /// the loop's exit and none was left in flight there (on every exit visited), `false`
    /// once one was ([`Flow::guard_excludes_exit`]).
    drained: HashMap<(Op, Op), bool>,
}

/// The queue an async op joins on a target, with its shared access.
pub fn queue_of(k: &Kernel, target: &Target, op: Op) -> Option<(Queue, SharedAccess)> {
    let e = effects(k, op);
    let acc = e.shared.into_iter().find(|a| a.kind.is_async())?;
    let class = match acc.kind {
        AccessKind::AsyncWrite(c) | AccessKind::AsyncRead(c) => c,
        _ => return None,
    };
    let q = match class {
        AsyncClass::GatherToLds | AsyncClass::Tdm => match target.async_counter(class) {
            Some(c) => Queue::Counter(c),
            None => Queue::Token,
        },
        AsyncClass::CpAsync => Queue::CpAsync,
        AsyncClass::Tma => Queue::Mbarrier,
        AsyncClass::TmaStore => Queue::Bulk,
        AsyncClass::Wgmma => Queue::Wgmma,
    };
    Some((q, acc))
}

/// The shared accesses of an async op (a wgmma reads two views).
fn async_accesses(k: &Kernel, op: Op) -> Vec<SharedAccess> {
    effects(k, op)
        .shared
        .into_iter()
        .filter(|a| a.kind.is_async())
        .collect()
}

impl<'k> Flow<'k> {
    pub fn new(k: &'k Kernel, target: &Target) -> Self {
        Flow {
            k,
            target: *target,
            overlap: Overlap::new(k, target.warp),
            loops: HashMap::default(),
            memo: FlowMemo::default(),
            regs: crate::analysis::regdeps::RegSources::new(k),
            drained: HashMap::default(),
        }
    }

    /// A solver whose footprint answers start from (and grow) `memo` (see [`FlowMemo`] for
    /// which kernels may share one); [`Flow::into_memo`] gives it back.
    pub fn with_memo(k: &'k Kernel, target: &Target, memo: FlowMemo) -> Self {
        memo.check(k);
        Flow {
            memo,
            ..Flow::new(k, target)
        }
    }

    /// The footprint answers gathered so far.
    pub fn into_memo(self) -> FlowMemo {
        self.memo
    }

    /// Enclosing loops (`for`, `while`) of an op, outermost first.
    pub fn loops_of(&mut self, op: Op) -> Vec<Op> {
        if let Some(v) = self.loops.get(&op) {
            return v.clone();
        }
        let mut v: Vec<Op> = self
            .overlap
            .parents
            .ancestors(op)
            .into_iter()
            .filter(|a| {
                matches!(
                    self.k.ops[*a].kind,
                    OpKind::For { .. } | OpKind::While { .. }
                )
            })
            .collect();
        v.reverse();
        self.loops.insert(op, v.clone());
        v
    }

    /// Runs the solver over the kernel body from the empty state; returns the exit states
    /// (one per class of paths).
    pub fn run(&mut self, v: &mut dyn Visitor) -> Vec<InFlight> {
        let mut st = vec![InFlight::default()];
        self.region(self.k.body, &mut st, v);
        st
    }

    fn region(&mut self, r: Region, st: &mut Vec<InFlight>, v: &mut dyn Visitor) {
        if st.is_empty() {
            return;
        }
        let ops = self.k.regions[r].ops.clone();
        for op in ops {
            self.op(op, st, v);
        }
    }

    /// A branch condition worth tracking: an `i1` computed once per thread (outside every
    /// loop), so that two `if`s on it take the same arm (an elected thread issues the copies
    /// in one `if` and the next `if %lead` again).
    fn tracked(&mut self, c: Operand) -> Option<Value> {
        let Operand::Value(v) = c else { return None };
        match self.k.values[v].def {
            ValueDef::Result(op, _) if self.loops_of(op).is_empty() => Some(v),
            ValueDef::Param(_) => Some(v),
            _ => None,
        }
    }

    fn op(&mut self, op: Op, st: &mut Vec<InFlight>, v: &mut dyn Visitor) {
        let regions = self.k.ops[op].regions.clone();
        match &self.k.ops[op].kind {
            OpKind::For { .. } => self.looped(op, None, regions[0], st, v),
            OpKind::While { .. } => self.looped(op, Some(regions[0]), regions[1], st, v),
            OpKind::If { cond } => {
                let c = self.tracked(*cond);
                let (mut then_in, mut else_in) = (Vec::new(), Vec::new());
                for p in st.drain(..) {
                    let known = c.and_then(|c| p.assume.get(&c).copied());
                    match (c, known) {
                        (Some(_), Some(true)) => then_in.push(p),
                        (Some(_), Some(false)) => else_in.push(p),
                        (Some(c), None) if p.assume.len() < MAX_ASSUMED => {
                            let mut a = p.clone();
                            a.assume.insert(c, true);
                            then_in.push(a);
                            let mut b = p;
                            b.assume.insert(c, false);
                            else_in.push(b);
                        }
                        _ => {
                            then_in.push(p.clone());
                            else_in.push(p);
                        }
                    }
                }
                self.region(regions[0], &mut then_in, v);
                if let Some(r) = regions.get(1) {
                    self.region(*r, &mut else_in, v);
                }
                *st = then_in;
                join_parts(st, else_in);
            }
            OpKind::Stage { .. } => self.region(regions[0], st, v),
            _ => {
                v.before(self, op, st);
                for s in st.iter_mut() {
                    self.transfer(op, s, v);
                }
            }
        }
    }

    fn looped(
        &mut self,
        l: Op,
        cond: Option<Region>,
        body: Region,
        st: &mut Vec<InFlight>,
        v: &mut dyn Visitor,
    ) {
        v.enter_loop(self, l, st);
        for s in st.iter_mut() {
            // A `Last(d)` tag left by the previous instance of this loop (nested in another
            // loop) becomes `PreLast(0, d)`: the issue iteration stays known (induction
            // recognition of combined counters, `ko*4 + ki`); other tags say nothing.
            s.map_tags(|t| {
                let last = t.iter().find_map(|(lp, g)| match g {
                    IterTag::Last(d) if *lp == l => Some(*d),
                    _ => None,
                });
                t.retain(|(lp, _)| *lp != l);
                t.push((l, last.map_or(IterTag::Pre(0), |d| IterTag::PreLast(0, d))));
            });
        }
        let mut head = st.clone();
        let mut last_back;
        loop {
            v.loop_pass(self, l);
            let mut s = head.clone();
            if let Some(c) = cond {
                self.region(c, &mut s, v);
            }
            self.region(body, &mut s, v);
            for x in s.iter_mut() {
                x.map_tags(|t| {
                    for (lp, tag) in t.iter_mut() {
                        if *lp == l {
                            *tag = match *tag {
                                IterTag::Dist(d) if d + 1 < TAG_CAP => IterTag::Dist(d + 1),
                                IterTag::Pre(j) if j + 1 < TAG_CAP => IterTag::Pre(j + 1),
                                IterTag::PreLast(j, d) if j + 1 < TAG_CAP => {
                                    IterTag::PreLast(j + 1, d)
                                }
                                _ => IterTag::Unknown,
                            };
                        }
                    }
                });
            }
            last_back = s.clone();
            if !join_parts(&mut head, s) {
                break;
            }
        }
        // A `for` with constant bounds `lo < hi` runs at least once: it exits only after an
        // iteration (the last pass's back-edge state covers every such exit).
        let mut exit = if self.runs_at_least_once(l) {
            last_back
        } else {
            head
        };
        if let Some(c) = cond {
            self.region(c, &mut exit, v);
        }
        // Leaving the loop: an entry's tag on it says nothing more about the consumers after
        // it, except for a `for` with constant bounds, whose last pass is exactly the final
        // iteration: an entry issued `d` iterations before the back edge ran in the iteration
        // `d - 1` before the last (a prologue loop filling slot `s` in iteration `s`).
        let exact = self.runs_at_least_once(l);
        let trip = self.const_trip(l).unwrap_or(0);
        self.drop_guarded_at_exit(l, &mut exit);
        for x in exit.iter_mut() {
            // The fixpoint does not count iterations: entries further back than the loop's
            // trip count stand for no execution (nor does a saturated tag when the trip count
            // is below the cap: every real execution keeps its exact distance).
            for m in x.queues.values_mut() {
                m.retain(|p, _| {
                    !exact
                        || !p.tags.iter().any(|(lp, t)| {
                            *lp == l
                                && match t {
                                    IterTag::Dist(d) => *d as i64 > trip,
                                    IterTag::Unknown => trip < TAG_CAP as i64,
                                    _ => false,
                                }
                        })
                });
            }
            x.map_tags(|t| {
                t.retain_mut(|(lp, tag)| {
                    if *lp != l {
                        return true;
                    }
                    match *tag {
                        IterTag::Dist(d) if exact && d >= 1 => {
                            *tag = IterTag::Last(d - 1);
                            true
                        }
                        _ => false,
                    }
                })
            });
        }
        *st = exit;
    }

    /// Drops from `l`'s exit states the entries whose issue guard rules them out there
    /// ([`Flow::guard_excludes_exit`]).
    fn drop_guarded_at_exit(&mut self, l: Op, exit: &mut [InFlight]) {
        for x in exit.iter_mut() {
            let mut gone = Vec::new();
            for (q, m) in &x.queues {
                for p in m.keys() {
                    if self.guard_excludes_exit(l, p) {
                        gone.push((*q, p.clone()));
                    }
                }
            }
            for (q, p) in gone {
                self.drained.entry((l, p.op)).or_insert(true);
                if let Some(m) = x.queues.get_mut(&q) {
                    m.remove(&p);
                }
            }
            let left: Vec<Op> = x.queues.values().flat_map(|m| m.keys().map(|p| p.op)).collect();
            for c in left {
                if self.loops_of(c).contains(&l) {
                    self.drained.insert((l, c), false);
                }
            }
        }
    }

    /// Whether the guard of a copy (the conditions of the `if`s around it, split at `and`)
    /// shows that it is not in flight when loop `l` exits with the copy's tag on `l`:
    /// - tag `Pre(j)` (`l` ran `j` iterations since the copy, and exits: `hi <= lo + j·step`):
    ///   the copy, outside every loop, is guarded by `hi > lo + c` with `c >= j·step` (bounds
    ///   computed outside every loop, positive constant step; Triton's prologue predicate
    ///   `n > s` for the load of stage `s`);
    /// - tag `Dist(d)` (issued in `l`'s `d`-th iteration before the exit): the copy, in `l`,
    ///   is guarded by `iv < hi - c` with `d · step <= c`: with `T` iterations the last
    ///   `lo + (T-1)·step >= hi - step`, so the copy's iteration `lo + (T-d)·step >= hi -
    ///   d·step >= hi - c` fails its guard (Triton's prefetch predicate `i < n - (S-1)`).
    fn guard_excludes_exit(&mut self, l: Op, p: &Pending) -> bool {
        let k = self.k;
        let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else {
            return false;
        };
        let Some(step) = self.konst(step).filter(|&s| s > 0) else {
            return false;
        };
        let tag = p.tags.iter().find(|(lp, _)| *lp == l).map(|(_, t)| *t);
        let conj = self.guard_conjuncts(p.op, l);
        let same = |f: &Self, a: &Operand, b: &Operand| match (a.value(), b.value()) {
            (Some(x), Some(y)) if x == y => true,
            _ => matches!((f.konst(a), f.konst(b)), (Some(x), Some(y)) if x == y),
        };
        match tag {
            Some(IterTag::Pre(j) | IterTag::PreLast(j, _)) => {
                let outside = |f: &mut Self, o: &Operand| match o.value().map(|v| k.values[v].def) {
                    None | Some(ValueDef::Param(_)) => true,
                    Some(ValueDef::Result(d, _)) => f.loops_of(d).is_empty(),
                    Some(_) => false,
                };
                if !self.loops_of(p.op).is_empty() || !outside(self, lo) || !outside(self, hi) {
                    return false;
                }
                // `hi > lo + c` with `c >= j·step` rules out a loop of `j` iterations
                // (`hi <= lo + j·step`).
                let above = |f: &Self, x: &Operand, y: &Operand| -> Option<i64> {
                    if !same(f, x, hi) {
                        return None;
                    }
                    if same(f, y, lo) {
                        return Some(0);
                    }
                    Some(f.konst(y)? - f.konst(lo)?)
                };
                conj.iter().any(|c| {
                    let c = match c {
                        OpKind::Cmp(CmpPred::Gt, x, y) | OpKind::Cmp(CmpPred::Lt, y, x) => {
                            above(self, x, y)
                        }
                        _ => None,
                    };
                    c.is_some_and(|c| c >= j as i64 * step)
                })
            }
            Some(IterTag::Dist(d)) if d >= 1 && self.loops_of(p.op).contains(&l) => {
                let Some(&iv) = k.ops[l].regions.first().and_then(|&b| k.regions[b].args.first())
                else {
                    return false;
                };
                let margin = |f: &Self, x: &Operand| -> Option<i64> {
                    let ValueDef::Result(o, _) = k.values[x.value()?].def else {
                        return None;
                    };
                    match &k.ops[o].kind {
                        OpKind::Binary(BinOp::Sub, h, c) if same(f, h, hi) => f.konst(c),
                        OpKind::Binary(BinOp::Add, h, c) if same(f, h, hi) => Some(-f.konst(c)?),
                        _ => None,
                    }
                };
                conj.iter().any(|c| {
                    let bound = match c {
                        OpKind::Cmp(CmpPred::Lt, a, x) if a.value() == Some(iv) => margin(self, x),
                        OpKind::Cmp(CmpPred::Gt, x, a) if a.value() == Some(iv) => margin(self, x),
                        _ => None,
                    };
                    bound.is_some_and(|c| (d as i64) * step <= c)
                })
            }
            _ => false,
        }
    }

    /// The conditions an op runs under up to loop `l` (or the kernel body): the conditions
    /// of the `if`s whose then-arm holds it, split at `and`.
    fn guard_conjuncts(&self, op: Op, l: Op) -> Vec<OpKind> {
        let k = self.k;
        let par = &self.overlap.parents;
        let mut conds = Vec::new();
        let mut cur = op;
        while let Some(r) = par.op_region[cur] {
            let Some(up) = par.region_op[r] else { break };
            if up == l {
                break;
            }
            if let OpKind::If { cond } = &k.ops[up].kind
                && k.ops[up].regions.first() == Some(&r)
            {
                conds.push(*cond);
            }
            cur = up;
        }
        let mut out = Vec::new();
        while let Some(c) = conds.pop() {
            let Some(ValueDef::Result(d, _)) = c.value().map(|v| k.values[v].def) else {
                continue;
            };
            match &k.ops[d].kind {
                OpKind::Binary(BinOp::And, x, y) => conds.extend([*x, *y]),
                kind => out.push(kind.clone()),
            }
        }
        out
    }

    /// A constant operand: an immediate or a `const` op's value.
    fn konst(&self, o: &Operand) -> Option<i64> {
        match o {
            Operand::Imm(Scalar::I32(v)) => Some(*v as i64),
            Operand::Value(v) => match self.k.values[*v].def {
                ValueDef::Result(d, _) => match self.k.ops[d].kind {
                    OpKind::Const(Scalar::I32(x)) => Some(x as i64),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }

    fn runs_at_least_once(&self, l: Op) -> bool {
        self.const_trip(l).is_some_and(|t| t >= 1)
    }

    /// The trip count of a `for` with constant bounds and a positive constant step.
    fn const_trip(&self, l: Op) -> Option<i64> {
        let c = |o: &Operand| self.konst(o);
        match &self.k.ops[l].kind {
            OpKind::For { lo, hi, step, .. } => {
                let (lo, hi, step) = (c(lo)?, c(hi)?, c(step)?);
                (step > 0).then(|| {
                    if hi > lo {
                        (hi - lo + step - 1) / step
                    } else {
                        0
                    }
                })
            }
            _ => None,
        }
    }

    /// The tags a copy issued at `op` gets: `Dist(0)` for each loop enclosing it.
    fn issue_tags(&mut self, op: Op) -> Vec<(Op, IterTag)> {
        self.loops_of(op)
            .into_iter()
            .map(|l| (l, IterTag::Dist(0)))
            .collect()
    }

    fn transfer(&mut self, op: Op, st: &mut InFlight, v: &mut dyn Visitor) {
        if let Some((q, _)) = queue_of(self.k, &self.target, op) {
            let p = Pending {
                op,
                tags: self.issue_tags(op),
            };
            if q.ticks_on_issue() {
                st.tick(q);
                st.insert(q, p, 0);
            } else if q.counted() {
                st.insert(q, p, -1);
            } else {
                st.insert(q, p, 0);
            }
            return;
        }
        match &self.k.ops[op].kind {
            OpKind::GLoad { .. } => {
                if let Some(c) = self.target.global_load_counter() {
                    st.tick(Queue::Counter(c));
                }
            }
            OpKind::CpAsyncCommit => commit(st, Queue::CpAsync),
            OpKind::BulkCommit => commit(st, Queue::Bulk),
            OpKind::WgmmaCommit => commit(st, Queue::Wgmma),
            OpKind::MbarWait { mbar, index, .. } => {
                let (mbar, index) = (*mbar, index.clone());
                let cands: Vec<(Pending, i32)> = st
                    .entries(Queue::Mbarrier)
                    .map(|(p, a)| (p.clone(), a))
                    .collect();
                for (p, a) in cands {
                    let OpKind::TmaLoad {
                        mbar: cm,
                        mbar_index: ci,
                        ..
                    } = &self.k.ops[p.op].kind
                    else {
                        continue;
                    };
                    if *cm == mbar
                        && self
                            .overlap
                            .must_equal(p.op, &ci.clone(), op, &index, &p.tags)
                    {
                        if let Some(m) = st.queues.get_mut(&Queue::Mbarrier) {
                            m.remove(&p);
                        }
                        v.completed(op, Queue::Mbarrier, &p, a);
                    }
                }
            }
            _ => {
                if let Some(SyncEffect::Wait(w)) = effects(self.k, op).sync {
                    self.wait(op, &w, st, v);
                }
            }
        }
    }

    /// Applies a wait (of the kernel, or one a planner inserts before `at`).
    pub fn wait(&mut self, at: Op, w: &WaitKind, st: &mut InFlight, v: &mut dyn Visitor) {
        let mut done: Vec<(Queue, Pending, i32)> = Vec::new();
        match w {
            WaitKind::Counters(cs) => {
                for (c, n) in cs {
                    let q = Queue::Counter(*c);
                    done.extend(st.complete_older(q, *n).into_iter().map(|(p, a)| (q, p, a)));
                }
            }
            WaitKind::CpAsyncGroups(n) => done.extend(
                st.complete_older(Queue::CpAsync, *n)
                    .into_iter()
                    .map(|(p, a)| (Queue::CpAsync, p, a)),
            ),
            WaitKind::BulkGroups(n) => done.extend(
                st.complete_older(Queue::Bulk, *n)
                    .into_iter()
                    .map(|(p, a)| (Queue::Bulk, p, a)),
            ),
            WaitKind::WgmmaGroups(n) => done.extend(
                st.complete_older(Queue::Wgmma, *n)
                    .into_iter()
                    .map(|(p, a)| (Queue::Wgmma, p, a)),
            ),
            WaitKind::Tokens(ts) => {
                for t in ts {
                    let ValueDef::Result(x, _) = self.k.values[*t].def else {
                        continue;
                    };
                    let xl = self.loops_of(x);
                    for (q, m) in st.queues.iter_mut() {
                        m.retain(|p, a| {
                            let recent = p.op == x
                                && xl.iter().all(|l| {
                                    p.tags
                                        .iter()
                                        .any(|(tl, tg)| tl == l && *tg == IterTag::Dist(0))
                                });
                            if recent {
                                done.push((*q, p.clone(), *a));
                            }
                            !recent
                        });
                    }
                }
            }
        }
        for (q, p, a) in done {
            v.completed(at, q, &p, a);
        }
    }

    /// The pending entries an op's shared accesses may conflict with (at least one side
    /// writes and the footprints may overlap), with their queues and ages.
    pub fn conflicts(&mut self, op: Op, st: &InFlight) -> Vec<(Queue, Pending, i32)> {
        let mut out = self.register_conflicts(op, st);
        let mine: Vec<SharedAccess> = effects(self.k, op)
            .shared
            .into_iter()
            .filter(|a| self.k.elem(a.mem) != ElemType::MBarrier)
            .collect();
        if mine.is_empty() {
            return out;
        }
        for (q, m) in &st.queues {
            for (p, a) in m {
                let known = self
                    .memo
                    .conflicts
                    .get(&(p.op, op))
                    .and_then(|byt| byt.get(p.tags.as_slice()));
                let hit = match known {
                    Some((h, notes)) => {
                        let h = *h;
                        note_all(&self.overlap, notes);
                        h
                    }
                    None => {
                        // The query's own notes, whatever earlier queries noted: a later run
                        // that reads this answer replays them (same list, same order).
                        let saved = self.overlap.conservative.take();
                        let h = self.may_conflict(p, op, &mine);
                        let notes = self.overlap.conservative.replace(saved);
                        note_all(&self.overlap, &notes);
                        self.memo
                            .conflicts
                            .entry((p.op, op))
                            .or_default()
                            .insert(p.tags.clone(), (h, notes));
                        h
                    }
                };
                if hit {
                    out.push((*q, p.clone(), *a));
                }
            }
        }
        out
    }

    /// Whether an access of `mine` (the consumer `op`'s) and one of the copy's may overlap
    /// under the copy's tags, one of them writing.
    fn may_conflict(&mut self, p: &Pending, op: Op, mine: &[SharedAccess]) -> bool {
        let theirs = async_accesses(self.k, p.op);
        let mut h = false;
        for ta in &theirs {
            for ma in mine {
                if (ta.kind.writes() || ma.kind.writes())
                    && self.overlap.may_overlap(p.op, ta, op, ma, &p.tags)
                {
                    h = true;
                }
            }
        }
        h
    }
}

impl Flow<'_> {
    /// The pending wgmma executions whose asynchronous result `op` consumes (through moves:
    /// `analysis::regdeps`): every execution of a source wgmma still in flight, since the
    /// newest one decides the count and older ones of a chain complete with it. Also every
    /// pending execution of a wgmma that holds, as register A, a value `op` reads or
    /// redefines (docs/async.md, "Register A").
    fn register_conflicts(&mut self, op: Op, st: &InFlight) -> Vec<(Queue, Pending, i32)> {
        let mut srcs = std::collections::BTreeSet::new();
        for v in crate::analysis::regdeps::consumed(self.k, op) {
            srcs.extend(self.regs.wgmma_sources(v));
        }
        let pending: Vec<(Pending, i32)> = st
            .entries(Queue::Wgmma)
            .map(|(p, a)| (p.clone(), a))
            .collect();
        pending
            .into_iter()
            .filter(|(p, _)| srcs.contains(&p.op) || self.regs.touches_register_a(op, p.op))
            .map(|(p, a)| (Queue::Wgmma, p, a))
            .collect()
    }
}

/// Adds notes to an overlap's conservative list, skipping those it holds (as
/// `Overlap::note_conservative` does, one by one).
fn note_all(overlap: &Overlap<'_>, notes: &[Note]) {
    let mut c = overlap.conservative.borrow_mut();
    for n in notes {
        if !c.contains(n) {
            c.push(*n);
        }
    }
}

fn commit(st: &mut InFlight, q: Queue) {
    if let Some(m) = st.queues.get_mut(&q) {
        for a in m.values_mut() {
            *a = (*a + 1).min(AGE_CAP);
        }
    }
}

struct Recorder {
    c: Completions,
}

impl Visitor for Recorder {
    fn before(&mut self, flow: &mut Flow<'_>, op: Op, states: &mut [InFlight]) {
        // One class of paths (the common case) is read in place, not joined into a copy.
        let joined;
        let st = match states {
            [one] => &*one,
            _ => {
                joined = join_all(states);
                &joined
            }
        };
        for (q, p, age) in flow.conflicts(op, st) {
            let h = InflightHazard {
                consumer: op,
                copy: p.op,
                queue: q,
                tags: p.tags,
                age,
            };
            if let Some(old) = self
                .c
                .hazards
                .iter_mut()
                .find(|o| o.consumer == h.consumer && o.copy == h.copy && o.tags == h.tags)
            {
                old.age = old.age.min(h.age);
            } else {
                self.c.hazards.push(h);
            }
        }
    }
    fn completed(&mut self, wait: Op, queue: Queue, p: &Pending, age: i32) {
        self.c.by_copy.entry(p.op).or_default().insert(wait);
        let list = self.c.by_wait.entry(wait).or_default();
        if let Some(o) = list.iter_mut().find(|c| c.copy == p.op && c.tags == p.tags) {
            o.age = o.age.min(age);
        } else {
            list.push(Completed {
                copy: p.op,
                queue,
                tags: p.tags.clone(),
                age,
            });
        }
    }
}

/// Computes, for every async op of the kernel, the waits that complete it (on every path,
/// including across loop back edges), the shared accesses that may observe it in flight, and
/// the copies still outstanding when the kernel ends. Polynomial: see the module doc.
pub fn completions(k: &Kernel, target: &Target) -> Completions {
    completions_memo(k, target, &mut FlowMemo::default())
}

/// [`completions`] with footprint answers taken from and added to `memo` (a memo of `k` or
/// of a kernel `k` was derived from by inserting sync ops: see [`FlowMemo`]).
pub fn completions_memo(k: &Kernel, target: &Target, memo: &mut FlowMemo) -> Completions {
    let mut flow = Flow::with_memo(k, target, std::mem::take(memo));
    let mut rec = Recorder {
        c: Completions::default(),
    };
    let exit = join_all(&flow.run(&mut rec));
    let mut out: BTreeSet<Op> = BTreeSet::new();
    for m in exit.queues.values() {
        out.extend(m.keys().map(|p| p.op));
    }
    rec.c.outstanding_at_exit = out.into_iter().collect();
    rec.c.drained = flow
        .drained
        .iter()
        .filter(|(_, d)| **d)
        .map(|(lc, _)| *lc)
        .collect();
    rec.c.warnings = flow.overlap.conservative_warnings();
    rec.c.hazards.sort_by_key(|h| (h.consumer, h.copy));
    *memo = flow.into_memo();
    rec.c
}
