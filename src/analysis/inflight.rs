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
//! Entries are interned once ([`crate::analysis::pending`]): a state is, per queue, a vector
//! of (entry id, age) sorted by id, and the footprint answers are tables of two bits an
//! entry, indexed by entry id, per consumer ([`FlowMemo`]).
//! Order: `a ⊑ b` iff every entry of `a` is in `b` with an age `>=` its age in `b`. Join:
//! union of entries, minimum of ages (a copy absent on one path — seed 002's `NullAsyncDep`
//! — constrains nothing). Transfer functions are monotone: issue (tick the queue, add an
//! entry of age 0 or -1), commit (tick committed, uncommitted become 0), wait (drop entries
//! old enough), `gload` (tick). Ages saturate at [`AGE_CAP`].
//!
//! # Path classes
//! One state per valuation of up to [`MAX_ASSUMED`] branch conditions computed once per
//! thread (outside every loop, or inside one as a pure function of such values): an elected
//! thread's `if %lead` around the prologue copies and around the loop copies takes the same
//! arm, so its counts stay exact. Other conditions join.
//!
//! # Solver
//! Sequence = fold; `if` = both arms from the same input, then join; a loop = iterate
//! `head := head ⊔ back_edge(body(head))` from `head := entry` (entries tagged `Pre(0)`; the
//! back edge increments the loop's tags) until it is stable; the exit state is the head with
//! the loop's tags removed; a `for` of at most [`TAG_CAP`] constant trips cuts, at its head,
//! the entries tagged beyond its trip count (they stand for no execution; docs/async.md,
//! "Short loops stop at their trip count"); an entry that no op of a loop in closed form can
//! meet enters it tagged `Unknown` instead of `Pre(0)` (its `Pre(j)` copies would answer and
//! age alike and merge at the exit; "Entries a copy loop cannot meet"). Height: every entry's age only decreases and entries are only
//! added, and there are at most `A · (2·TAG_CAP + 1)^D` distinct entries for `A` async ops
//! and loop depth `D`, so a loop needs at most `O(TAG_CAP + Q)` passes in practice (`Q` the
//! largest age that matters) and the whole analysis is `O(ops · passes · entries)`
//! transfer steps, plus the footprint queries of [`crate::analysis::overlap`] (cached per
//! consumer, copy and tags). No path is ever enumerated.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::hazards::const_for_trips;
use crate::analysis::overlap::{IterTag, Overlap};
pub use crate::analysis::pending::{EntryId, Entries, InFlight, Pending, Rewrite};
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

/// [`join_parts`] reading `b` in place (the parts of `b` new to `a` are cloned).
pub fn join_parts_ref(a: &mut Vec<InFlight>, b: &[InFlight]) -> bool {
    let mut changed = false;
    for s in b {
        match a.iter_mut().find(|x| x.assume == s.assume) {
            Some(x) => changed |= x.join(s),
            None => {
                a.push(s.clone());
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
    /// Program positions of the kernel's ops, for [`Completions::loop_completion`].
    positions: Positions,
    /// The executions of each copy in each wait's list, for [`Completions::completed_by`].
    pairs: PairIndex,
}

/// The positions in `by_wait[w]` of the executions of each copy, per (wait, copy), built on
/// the first [`Completions::completed_by`] (a filter of the wait's whole list per question
/// was 7% of `sync` on the unrolled 64-thread GEMM: a wait there completes thousands of
/// executions of 512 copies), with the number of executions listed when it was built. A
/// lookup whose count no longer matches (the lists changed) filters the list instead.
/// Printed as nothing: a cache, not a result.
#[derive(Clone, Default)]
struct PairIndex(std::cell::OnceCell<(usize, PairPositions)>);

/// Per (wait, copy), the positions of the copy's executions in the wait's list.
type PairPositions = HashMap<(Op, Op), Vec<u32>>;

impl std::fmt::Debug for PairIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("_")
    }
}

impl PairIndex {
    /// The positions of `copy`'s executions in `w`'s list of `by_wait` (increasing), or
    /// `None` when the index is off or was built for other lists.
    fn of<'a>(&'a self, by_wait: &BTreeMap<Op, Vec<Completed>>, (w, copy): (Op, Op)) -> Option<&'a [u32]> {
        if no_pairs_env() {
            return None;
        }
        let count = by_wait.values().map(Vec::len).sum::<usize>();
        let (n, ix) = self.0.get_or_init(|| {
            let mut ix = PairPositions::default();
            for (&w, list) in by_wait {
                for (i, c) in list.iter().enumerate() {
                    ix.entry((w, c.copy)).or_default().push(i as u32);
                }
            }
            (count, ix)
        });
        (*n == count).then(|| ix.get(&(w, copy)).map_or(&[][..], Vec::as_slice))
    }
}

fn no_pairs_env() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_COMPLETIONS_NO_INDEX").is_some())
}

/// Program positions by op index (`usize::MAX`: not placed), computed on the first
/// [`Completions::loop_completion`] (a map of every op built per call was 8% of `sync` on
/// the unrolled GEMM: one call per copy), with the arena length of the kernel they are for.
/// Printed as nothing: a cache, not a result.
#[derive(Clone, Default)]
struct Positions(std::cell::OnceCell<(usize, Arc<[usize]>)>);

impl std::fmt::Debug for Positions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("_")
    }
}

impl Positions {
    /// The positions of `k`'s ops (computed afresh when the cache is for another kernel).
    fn of(&self, k: &Kernel) -> Arc<[usize]> {
        let compute = || {
            let mut t = vec![usize::MAX; k.ops.len()];
            for (i, o) in k.ops_in_order().into_iter().enumerate() {
                t[o.index()] = i;
            }
            Arc::<[usize]>::from(t)
        };
        let (n, p) = self.0.get_or_init(|| (k.ops.len(), compute()));
        if *n == k.ops.len() { p.clone() } else { compute() }
    }
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
        let positions = self.positions.of(k);
        let order = |o: &Op| positions.get(o.index()).copied().filter(|&p| p != usize::MAX);
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
                    if best.is_none_or(|(w0, d0)| (*d, order(&w)) < (d0, order(&w0))) {
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
            (None, true) => (None, self.first_straight_wait(&waits, copy, order)),
        };
        let mut exit: Option<Op> = None;
        let mut exit_on_entry = false;
        if let Some(l) = level.map(|lv| copy_loops[lv]) {
            for &w in &waits {
                let outside = !parents.ancestors(w).contains(&l);
                if outside
                    && order(&w) > order(&l)
                    && exit.is_none_or(|e| order(&w) < order(&e))
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

    /// The executions of `copy` that wait `w` completes, in the order of `by_wait[w]`
    /// (through the index of [`PairIndex`]; without it, `SMEMSYNC_COMPLETIONS_NO_INDEX`, a
    /// filter of the wait's list: the oracle).
    pub fn completed_by(&self, w: Op, copy: Op) -> Box<dyn Iterator<Item = &Completed> + '_> {
        let list = self.by_wait.get(&w).map_or(&[][..], Vec::as_slice);
        match self.pairs.of(&self.by_wait, (w, copy)) {
            Some(ix) => Box::new(ix.iter().map(move |&i| &list[i as usize])),
            None => Box::new(list.iter().filter(move |c| c.copy == copy)),
        }
    }

    /// For a copy outside every loop: its first completing wait in program order.
    fn first_straight_wait(
        &self,
        waits: &BTreeSet<Op>,
        copy: Op,
        order: impl Fn(&Op) -> Option<usize>,
    ) -> Option<(Op, u32)> {
        waits
            .iter()
            .filter(|w| self.completed_by(**w, copy).next().is_some())
            .min_by_key(|w| order(w))
            .map(|w| (*w, 0))
    }

    /// Whether wait `w` completes some execution of `copy` whose tags place `w` in the first
    /// iteration (`Pre(0)`) of every loop around `w` that does not enclose the copy
    /// (`copy_loops`: the copy's ancestors).
    pub(crate) fn completes_on_entry(&self, w: Op, copy: Op, copy_loops: &[Op]) -> bool {
        self.completed_by(w, copy).any(|c| {
            c.tags
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
    /// Whether [`Visitor::before`] may change the states it is given (a wait planner does,
    /// where an op conflicts with an entry; a recorder does not). The closed form of a
    /// re-tagging loop (`Flow::closed_form`, docs/async.md) then first checks that no op of the body
    /// conflicts with anything in flight.
    fn modifies_states(&self) -> bool {
        false
    }
}

/// A conservative-answer note of an overlap query (`Overlap::conservative`).
type Note = (Op, Op, &'static str);

/// A memoized answer to "may this consumer conflict with this pending entry": not asked
/// yet, no, yes, or an index into [`FlowMemo::noted`] (an answer whose query raised
/// conservative-answer notes, replayed on every hit).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Answer {
    Unasked,
    No,
    Yes,
    Noted(u32),
}

/// What the memo keeps per consumer op: its shared accesses (mbarriers excluded), the async
/// ops it may meet, and the answers indexed by entry id.
#[derive(Clone, Debug, Default)]
struct Consumer {
    mine: Arc<[SharedAccess]>,
    /// Whether some async op of the kernel is not apart from these accesses
    /// ([`Flow::apart`]): without one, no entry can conflict and none is looked at.
    near: bool,
    /// The async ops not apart from these accesses, as a bitset over their positions in
    /// [`FlowMemo::asyncs`]: an entry of any other copy conflicts with nothing here and is
    /// skipped without a question (nor an answer slot).
    near_set: Vec<u64>,
    answers: Answers,
}

/// The answers of one consumer indexed by entry id, two bits per entry (`0` unasked, `1` no,
/// `2` yes, `3` noted) with the index of each noted answer in a side map (noted answers are
/// rare). A consumer is asked about few of the entries of a large kernel, but its slots run
/// up to the largest id asked: at two bits a slot the table of every consumer of a
/// 16 640-entry kernel fits in 4 KiB, where one [`Answer`] (8 bytes) a slot took 130 KiB
/// and fresh pages on every growth. Lookup: one shift and mask; an unset slot past the end
/// reads as unasked.
#[derive(Clone, Debug, Default)]
struct Answers {
    bits: Vec<u64>,
    noted: HashMap<u32, u32>,
}

impl Answers {
    /// The answer held for entry `e`.
    #[inline]
    fn get(&self, e: EntryId) -> Answer {
        let i = e.index();
        let Some(w) = self.bits.get(i / 32) else {
            return Answer::Unasked;
        };
        match (w >> (2 * (i % 32))) & 3 {
            0 => Answer::Unasked,
            1 => Answer::No,
            2 => Answer::Yes,
            _ => self
                .noted
                .get(&(i as u32))
                .map_or(Answer::Unasked, |&n| Answer::Noted(n)),
        }
    }

    /// Whether the answer held for entry `e` is a plain "no" (the common case of a
    /// conflict query's scan, tested before [`Answers::get`]).
    #[inline]
    fn is_no(&self, e: EntryId) -> bool {
        let i = e.index();
        self.bits
            .get(i / 32)
            .is_some_and(|w| (w >> (2 * (i % 32))) & 3 == 1)
    }

    /// Records the answer for entry `e`.
    fn set(&mut self, e: EntryId, a: Answer) {
        let i = e.index();
        if self.bits.len() <= i / 32 {
            self.bits.resize(i / 32 + 1, 0);
        }
        let code = match a {
            Answer::Unasked => 0,
            Answer::No => 1,
            Answer::Yes => 2,
            Answer::Noted(n) => {
                self.noted.insert(i as u32, n);
                3
            }
        };
        let sh = 2 * (i % 32);
        let w = &mut self.bits[i / 32];
        *w = (*w & !(3 << sh)) | (code << sh);
    }
}

/// The hits and the entries still to answer of one conflict query ([`Flow::conflict_ids`]).
type Found<'a> = (
    &'a mut Vec<(Queue, EntryId, i32)>,
    &'a mut Vec<(Queue, EntryId, i32)>,
);

impl Consumer {
    /// One entry of a conflict query: a known "yes" goes to the hits, a noted or unasked
    /// entry of a copy this consumer may meet to the entries still to answer. An unasked
    /// entry of a copy the consumer cannot meet is `No` (without a note: what
    /// `Flow::decide` answers, `Flow::apart`): not asked, and recorded so that the next
    /// visit reads one slot instead of the copy's position (not counted as an answer).
    fn visit(&mut self, table: &Entries, pos: &[u32], found: &mut Found<'_>, x: (Queue, EntryId, i32)) {
        let e = x.1;
        match self.answers.get(e) {
            Answer::No => {}
            Answer::Yes => found.0.push(x),
            Answer::Noted(_) => found.1.push(x),
            Answer::Unasked => {
                let p = pos.get(table.op(e).index()).copied().unwrap_or(u32::MAX);
                if self.may_meet(p) {
                    found.1.push(x);
                } else {
                    self.answers.set(e, Answer::No);
                }
            }
        }
    }

    /// Whether the async op at position `p` of [`FlowMemo::asyncs`] may meet this consumer
    /// (`u32::MAX`, an op not listed: it may).
    fn may_meet(&self, p: u32) -> bool {
        p == u32::MAX
            || self
                .near_set
                .get(p as usize / 64)
                .is_some_and(|w| w >> (p % 64) & 1 == 1)
    }
}

/// Footprint answers of the dataflow ("may this consumer conflict with this execution of
/// this copy"), shared by every run of the solver on one kernel and on the kernels derived
/// from it by inserting sync ops (waits, commits, barriers), with the interning table of
/// pending entries ([`Entries`]) that indexes them.
///
/// **Validity.** Keys are op ids: the copy, the consumer and the loops of the copy's tags.
/// An answer depends only on those ops' shared accesses, their enclosing loops and the
/// values their indices read, none of which an inserted sync op changes; `ir::edit::apply`
/// clones the kernel and appends the new ops to the arena, so every existing id keeps its op (tests: `memo_ids_survive_applying_waits`). A memo must therefore never be
/// carried to an unrelated kernel, nor to one whose existing ops were edited: the owner
/// records the arena length of the kernel it was made for ([`FlowMemo::for_kernel`]) and
/// every solver checks, in debug builds, that the ops before it are unchanged in kind.
///
/// Lookups allocate nothing: one hash lookup per consumer, then an array index per entry.
/// Memory: two bits per (consumer, entry) pair up to the largest entry id asked of the consumer
/// (`Answers`), plus the noted answers.
#[derive(Clone, Debug, Default)]
pub struct FlowMemo {
    entries: Entries,
    consumers: HashMap<Op, Consumer>,
    noted: Vec<(bool, Vec<Note>)>,
    answered: usize,
    /// The entry an async op issues (its tags `Dist(0)` on every enclosing loop).
    issued: HashMap<Op, EntryId>,
    /// The async accesses of each copy asked about.
    copies: HashMap<Op, Arc<[SharedAccess]>>,
    /// The async ops of the kernel (inserting sync ops adds none), listed on first need.
    asyncs: Option<Arc<[Op]>>,
    /// Position of each op in `asyncs`, by op index (`u32::MAX`: not an async op).
    async_pos: Vec<u32>,
    /// Positions in `asyncs` of the async ops with an async access in each root buffer:
    /// the only copies a consumer of an unpinned buffer can meet ([`Flow::near_copies`]).
    by_root: HashMap<Buffer, Vec<u32>>,
    /// [`Flow::generalized`] per (innermost loop around the consumer, entry, widening): the
    /// widened entry depends on the consumer only through the loops around it, which
    /// inserting sync ops does not change.
    widened: HashMap<(Option<Op>, EntryId, Widening), Option<EntryId>>,
    /// The interned entries by the position of their copy in `asyncs` (ids increasing),
    /// the entries of unlisted ops last; the first `indexed` entries of `entries` are in it
    /// ([`Flow::index_entries`]).
    by_copy: Vec<Vec<EntryId>>,
    indexed: usize,
    /// Solve every loop by iteration, never in closed form (`Flow::closed_form`): the
    /// oracle the tests compare the closed form with.
    pub iterate: bool,
    /// Iterate a short constant-trip loop until its tags saturate, as for any loop, instead
    /// of stopping at its trip count (`Flow::trip_cut`): the oracle the tests compare the
    /// cut with.
    pub full_trips: bool,
    /// Keep the `Pre` tags of every entry a loop in closed form cannot meet, instead of
    /// tagging it `Unknown` on entry (`Flow::split_quiet`): the oracle the tests compare the
    /// collapse with.
    pub keep_tags: bool,
    /// Ask the overlap engine for every pair of accesses of one buffer, never deciding
    /// "apart" from their footprint boxes ([`crate::analysis::boxes`], `Flow::apart`): the
    /// oracle the tests compare the boxes with.
    pub no_boxes: bool,
    /// Ask the overlap engine's symbolic path or enumeration for every pair, never deciding
    /// "apart" by the per-dimension test (`Overlap::dims`): the oracle the tests compare that
    /// test with.
    pub no_dims: bool,
    /// Scan every entry of the state in [`Flow::conflict_ids`], never visiting only the
    /// entries of the consumer's near copies through `FlowMemo::by_copy`: the oracle the
    /// tests compare the index with (also `SMEMSYNC_INFLIGHT_NO_INDEX`).
    pub no_index: bool,
    /// Prepare every overlap question on its own, never through the memo of preparations by
    /// loop relation (`Overlap::prep_memo`): the oracle the tests compare that memo with.
    pub no_prep: bool,
    /// TMA loads whose slot reuse a placed cross-role handshake orders (`sync::handshake`):
    /// the hazard finder reports no hazard between two of them.
    pub ordered_tma: std::collections::HashSet<Op>,
    /// `analysis::mbar_protocol`'s serial TMA loads (`Verdict::serial_loads`): two with the
    /// same (buffer, mbarrier array) never have one slot's copies in flight at once.
    pub serial_loads: std::collections::HashMap<Op, (crate::ir::Buffer, crate::ir::Buffer)>,
    /// `mbar_wait`s of the kernel that `sync` did not verify (`analysis::mbar_protocol`):
    /// they complete no TMA load.
    pub unverified_waits: std::collections::HashSet<Op>,
    /// The shared accesses of each arm of every role branch inside a loop whose hand-written
    /// handshakes `sync::handshake_chain` checked (`sync::handshake::Handshakes::chained`): a
    /// pair with one access in each arm is ordered by a release/acquire chain, in one trip of
    /// the loop and across trips, and the hazard finder reports nothing for it.
    pub chained_roles: Vec<[std::collections::HashSet<Op>; 2]>,
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
        self.answered
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

/// The loops (`for` and `while`) enclosing each op, outermost first: one walk of the region
/// tree; ops share the stack of their region (4 bytes per op plus one vector per loop).
struct LoopNest {
    stack_of: Vec<u32>,
    stacks: Vec<Vec<Op>>,
}

impl LoopNest {
    fn new(k: &Kernel) -> Self {
        let mut n = LoopNest {
            stack_of: vec![0; k.ops.len()],
            stacks: vec![Vec::new()],
        };
        let mut work = vec![(k.body(), 0u32)];
        while let Some((r, s)) = work.pop() {
            for &op in k.region_ops(r) {
                n.stack_of[op.index()] = s;
                let regions = &k.ops[op].regions;
                if regions.is_empty() {
                    continue;
                }
                let inner = if matches!(k.ops[op].kind, OpKind::For { .. } | OpKind::While { .. })
                {
                    let mut v = n.stacks[s as usize].clone();
                    v.push(op);
                    n.stacks.push(v);
                    (n.stacks.len() - 1) as u32
                } else {
                    s
                };
                work.extend(regions.iter().map(|r| (*r, inner)));
            }
        }
        n
    }

    fn of(&self, op: Op) -> &[Op] {
        let s = self.stack_of.get(op.index()).copied().unwrap_or(0);
        &self.stacks[s as usize]
    }
}

/// The solver: the kernel, the target, and cached footprint queries.
pub struct Flow<'k> {
    pub k: &'k Kernel,
    pub target: Target,
    pub overlap: Overlap<'k>,
    /// Enclosing loops (`for` and `while`) of each op, outermost first.
    loops: LoopNest,
    memo: FlowMemo,
    /// [`Flow::guard_excludes_exit`] per (loop, entry).
    guards: HashMap<(Op, EntryId), bool>,
    /// [`Flow::class`] per op index, filled on first sight.
    classes: Vec<Option<OpClass>>,
    /// Which wgmma results reach each value (register hazards).
    regs: crate::analysis::regdeps::RegSources<'k>,
    /// Per (loop, copy in it): `true` when a guard ruled out some of the copy's executions at
    /// the loop's exit and none was left in flight there (on every exit visited), `false`
    /// once one was ([`Flow::guard_excludes_exit`]).
    drained: HashMap<(Op, Op), bool>,
    /// [`Flow::inserts_only`] per loop.
    inserting: HashMap<Op, Option<Issues>>,
    /// [`Flow::quiet_variant`] per (loop, entry).
    quiet: HashMap<(Op, EntryId), Option<EntryId>>,
    /// The ops of a loop body in closed form that some async op may meet
    /// ([`Flow::near_body_ops`]).
    near_body: HashMap<Op, Arc<[Op]>>,
    /// Footprint boxes of the accesses ([`Flow::apart`]).
    boxes: crate::analysis::boxes::Boxes<'k>,
    /// [`Flow::copy_sides`] per position in [`FlowMemo::asyncs`].
    copy_sides: Vec<Option<CopySides>>,
    /// What this solver did (`SMEMSYNC_INFLIGHT_STATS`).
    pub stats: FlowStats,
    /// Scratch of [`Flow::conflict_ids`]: the entries whose answer is still to be read or
    /// asked (kept between calls so that its buffer is reused).
    scratch: Vec<(Queue, EntryId, i32)>,
    /// Scratch of [`Flow::near_entries`] (its buffer reused likewise).
    near_scratch: Vec<(Queue, EntryId, i32)>,
    /// Whether loop exits keep only the executions that can reach them ([`Flow::exact_exit`]):
    /// on for [`completions`] (what the waits really complete), off for the wait planner
    /// (whose counts are chosen from the merged ages: docs/async.md, "Nested commit loops").
    exact_exits: bool,
    /// [`Flow::always_then`] per `if`.
    always_then: HashMap<Op, bool>,
}

/// A copy's async accesses and their footprint boxes ([`Flow::copy_sides`]).
type CopySides = (Arc<[SharedAccess]>, Arc<[Option<crate::analysis::boxes::FootBox>]>);

/// One side of [`Flow::sides_apart`]: accesses and their boxes.
type Sides<'a> = (
    &'a [SharedAccess],
    &'a [Option<crate::analysis::boxes::FootBox>],
);

/// The async issues of a loop body, with their queues ([`Flow::inserts_only`]).
type Issues = Arc<[(Queue, Op)]>;

/// A loop solved in closed form (its stable head and last back-edge state), or the state to
/// iterate it from instead (`None`: the entry state as it is; [`Flow::closed_form`]).
type ClosedForm = Result<(Vec<InFlight>, Vec<InFlight>), Option<Vec<InFlight>>>;

/// Counts of one solver's work, printed to stderr after each [`Flow::run`] when
/// `SMEMSYNC_INFLIGHT_STATS` is set (docs/async.md, "What one `sync` costs").
#[derive(Clone, Debug, Default)]
pub struct FlowStats {
    /// Loop fixpoints solved (a nested loop once per pass of its parent).
    pub loops: u64,
    /// Walks of a loop body.
    pub passes: u64,
    /// Loops solved by `Flow::closed_form` (one walk each).
    pub closed: u64,
    /// Re-tagging loops iterated after all, because an op of the body conflicts.
    pub fallbacks: u64,
    /// Non-structural ops visited (once per walk that reaches them).
    pub ops: u64,
    /// Entries looked at by the conflict queries of consumers near some async op.
    pub entry_checks: u64,
    /// Entries that entered a loop in closed form tagged `Unknown` on it at once, because
    /// no op of its body may meet them (`Flow::split_quiet`).
    pub quiet: u64,
    /// Conflict queries answered through the index of entries by copy
    /// (`Flow::near_entries`) instead of a scan of the state.
    pub indexed: u64,
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
            loops: LoopNest::new(k),
            memo: FlowMemo::default(),
            guards: HashMap::default(),
            classes: Vec::new(),
            regs: crate::analysis::regdeps::RegSources::new(k),
            drained: HashMap::default(),
            inserting: HashMap::default(),
            quiet: HashMap::default(),
            near_body: HashMap::default(),
            boxes: crate::analysis::boxes::Boxes::new(k, target.warp),
            copy_sides: Vec::new(),
            stats: FlowStats::default(),
            scratch: Vec::new(),
            near_scratch: Vec::new(),
            exact_exits: false,
            always_then: HashMap::default(),
        }
    }

    /// A solver whose footprint answers start from (and grow) `memo` (see [`FlowMemo`] for
    /// which kernels may share one); [`Flow::into_memo`] gives it back.
    pub fn with_memo(k: &'k Kernel, target: &Target, memo: FlowMemo) -> Self {
        memo.check(k);
        let mut flow = Flow::new(k, target);
        flow.overlap.dims &= !memo.no_dims;
        flow.overlap.prep_memo &= !memo.no_prep;
        Flow { memo, ..flow }
    }

    /// The footprint answers gathered so far.
    pub fn into_memo(self) -> FlowMemo {
        self.memo
    }

    /// Enclosing loops (`for`, `while`) of an op, outermost first.
    pub fn loops_of(&self, op: Op) -> Vec<Op> {
        self.loops.of(op).to_vec()
    }

    /// The interning table of the pending entries in this solver's states.
    pub fn entries(&self) -> &Entries {
        &self.memo.entries
    }

    /// A pending entry spelled out.
    pub fn pending(&self, e: EntryId) -> Pending {
        self.memo.entries.pending(e)
    }

    /// Runs the solver over the kernel body from the empty state; returns the exit states
    /// (one per class of paths).
    pub fn run(&mut self, v: &mut dyn Visitor) -> Vec<InFlight> {
        let mut st = vec![InFlight::default()];
        self.region(self.k.body(), &mut st, v);
        if stats_on() {
            let s = &self.stats;
            eprintln!(
                "in-flight run: loops={} passes={} closed={} fallbacks={} ops={} entry_checks={} indexed={} quiet={} entries={} tag_vectors={}",
                s.loops,
                s.passes,
                s.closed,
                s.fallbacks,
                s.ops,
                s.entry_checks,
                s.indexed,
                s.quiet,
                self.memo.entries.len(),
                self.memo.entries.tag_vectors()
            );
        }
        st
    }

    fn region(&mut self, r: Region, st: &mut Vec<InFlight>, v: &mut dyn Visitor) {
        if st.is_empty() {
            return;
        }
        let k = self.k;
        for &op in k.region_ops(r) {
            self.op(op, st, v);
        }
    }

    /// Whether `if` op `op` runs its then-arm on every execution, with no else-arm ops
    /// ([`crate::analysis::guards::always_then`]; a dead arm's copies are never weighed).
    fn always_then(&mut self, op: Op) -> bool {
        if let Some(&b) = self.always_then.get(&op) {
            return b;
        }
        let b = crate::analysis::guards::always_then(self.k, self.overlap.ranges(), op);
        self.always_then.insert(op, b);
        b
    }

    /// A branch condition worth tracking: an `i1` computed once per thread (outside every
    /// loop), so that two `if`s on it take the same arm (an elected thread issues the copies
    /// in one `if` and the next `if %lead` again); or one computed inside a loop from such
    /// values only (a persistent kernel's `in_group` test in its tile loop): every iteration
    /// computes the same value, so an assumption made in one holds in the next.
    fn tracked(&mut self, c: Operand) -> Option<Value> {
        let Operand::Value(v) = c else { return None };
        self.invariant(v, 0).then_some(v)
    }

    /// Whether `v` has one value per thread for the whole run: a parameter, a value defined
    /// outside every loop, or the result of a pure scalar op (`const`, thread and block ids,
    /// `in_group`, arithmetic, `cmp`, `select`, casts) of such values (depth at most 8).
    fn invariant(&self, v: Value, depth: u32) -> bool {
        let k = self.k;
        let op = match k.values[v].def {
            ValueDef::Param(_) => return true,
            ValueDef::Result(op, _) if self.loops.of(op).is_empty() => return true,
            ValueDef::Result(op, _) if depth < 8 => op,
            _ => return false,
        };
        let ok = |o: &Operand| match o {
            Operand::Value(x) => self.invariant(*x, depth + 1),
            _ => true,
        };
        match &k.ops[op].kind {
            OpKind::Const(_) | OpKind::Special(_) | OpKind::InGroup(_) => true,
            OpKind::Unary(_, a) | OpKind::Cast(_, a) => ok(a),
            OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => ok(a) && ok(b),
            OpKind::Select(c, a, b) => ok(c) && ok(a) && ok(b),
            _ => false,
        }
    }

    fn op(&mut self, op: Op, st: &mut Vec<InFlight>, v: &mut dyn Visitor) {
        let k = self.k;
        let regions = &k.ops[op].regions;
        match &k.ops[op].kind {
            OpKind::For { .. } => self.looped(op, None, regions[0], st, v),
            OpKind::While { .. } => self.looped(op, Some(regions[0]), regions[1], st, v),
            OpKind::If { cond } => {
                let c = self.tracked(*cond);
                let (mut then_in, mut else_in) = (Vec::new(), Vec::new());
                if self.always_then(op) {
                    // The else path never runs (docs/async.md, "Guards that always hold").
                    then_in.append(st);
                }
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
                self.stats.ops += 1;
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
            s.rewrite(&mut self.memo.entries, Rewrite::Enter(l));
        }
        self.stats.loops += 1;
        let before = self.stats.passes;
        let (head, last_back) = match self.closed_form(l, cond, body, st, v) {
            Ok(solved) => solved,
            Err(Some(collapsed)) => self.iterate(l, cond, body, collapsed, v),
            Err(None) => self.iterate(l, cond, body, st.clone(), v),
        };
        if stats_on() {
            let n: usize = st.iter().map(|x| x.iter().count()).sum();
            let h: usize = head.iter().map(|x| x.iter().count()).sum();
            eprintln!(
                "in-flight loop {}: {} passes, {} entries in, {} at the head",
                crate::emit::text::op_label(self.k, l),
                self.stats.passes - before,
                n,
                h
            );
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
        let trip = const_for_trips(self.k, l).unwrap_or(0);
        self.drop_guarded_at_exit(l, &mut exit);
        if self.exact_exits {
            self.exact_exit(l, &mut exit);
        }
        for x in exit.iter_mut() {
            // The fixpoint does not count iterations: entries further back than the loop's
            // trip count stand for no execution (nor does a saturated tag when the trip count
            // is below the cap: every real execution keeps its exact distance).
            if exact {
                let table = &self.memo.entries;
                x.retain(|_, e, _| {
                    !table.tags(e).iter().any(|(lp, t)| {
                        *lp == l
                            && match t {
                                IterTag::Dist(d) => *d as i64 > trip,
                                IterTag::Unknown => trip < TAG_CAP as i64,
                                _ => false,
                            }
                    })
                });
            }
            x.rewrite(&mut self.memo.entries, Rewrite::Exit(l, exact));
        }
        *st = exit;
    }

    /// The loop's stable head and its last back-edge state by Kleene iteration from the
    /// entry state `head`: `head := head ⊔ cut(back(body(head)))` until stable, `cut` the
    /// trip-count cut of a short constant-trip loop ([`Flow::trip_cut`]), else the identity.
    fn iterate(
        &mut self,
        l: Op,
        cond: Option<Region>,
        body: Region,
        mut head: Vec<InFlight>,
        v: &mut dyn Visitor,
    ) -> (Vec<InFlight>, Vec<InFlight>) {
        let cut = self.trip_cut(l);
        loop {
            let s = self.pass(l, cond, body, &head, v);
            // The back-edge state is kept for the exit (uncut: the exit reads the distance
            // `T` of the first iteration's copies), not cloned where nothing is cut.
            let changed = match cut {
                Some(t) => {
                    let mut c = s.clone();
                    for x in c.iter_mut() {
                        cut_beyond(&self.memo.entries, l, t, x);
                    }
                    join_parts(&mut head, c)
                }
                None => join_parts_ref(&mut head, &s),
            };
            if !changed {
                return (head, s);
            }
        }
    }

    /// The trip count `T` of loop `l` when the solver stops it there (docs/async.md, "Short
    /// loops stop at their trip count"): a `for` with constant bounds and `1 ≤ T ≤ TAG_CAP`
    /// (a longer loop's tags saturate before they reach `T`, and cutting nothing is the
    /// identity). `None` under [`FlowMemo::full_trips`] or `SMEMSYNC_INFLIGHT_FULL_TRIPS`.
    fn trip_cut(&self, l: Op) -> Option<u32> {
        if self.memo.full_trips || full_trips_env() {
            return None;
        }
        let t = const_for_trips(self.k, l)?;
        (1..=TAG_CAP as i64)
            .contains(&t)
            .then_some(t as u32)
    }

    /// One pass over the loop body from `head`: the back-edge state.
    fn pass(
        &mut self,
        l: Op,
        cond: Option<Region>,
        body: Region,
        head: &[InFlight],
        v: &mut dyn Visitor,
    ) -> Vec<InFlight> {
        self.stats.passes += 1;
        v.loop_pass(self, l);
        let mut s = head.to_vec();
        if let Some(c) = cond {
            self.region(c, &mut s, v);
        }
        self.region(body, &mut s, v);
        for x in s.iter_mut() {
            x.rewrite(&mut self.memo.entries, Rewrite::Back(l, TAG_CAP));
        }
        s
    }

    /// The fixpoint of a loop whose body only re-tags what is in flight and adds fixed
    /// entries, without iterating (docs/async.md, "Loops in closed form"). When the body
    /// ([`Flow::inserts_only`]) waits, commits and ticks nothing, holds no loop and no `if` on
    /// a tracked condition, and the visitor changes no state in it, the body maps a state `h`
    /// to `h ⊔ C`, `C` the entries its own issues add (`Dist(0)` on every enclosing loop, age
    /// `-1` on a group queue, `0` otherwise). The head after `n` passes is then
    /// `⊔_{i≤n} backⁱ(entry) ⊔ ⊔_{1≤i≤n} backⁱ(C)`, and its limit the closure of
    /// `entry ⊔ back(C)` under `back`, which is stable after at most `TAG_CAP` rewrites (every
    /// tag on the loop is then `Unknown`). A short constant-trip loop's `back` is followed
    /// by its trip-count cut ([`Flow::trip_cut`]), a filter, which distributes over the join
    /// too. The body is walked once, from that head, for the
    /// visitor: the walk the last pass of the iteration makes. Entries of the entry state
    /// that no op of the body may meet enter tagged `Unknown` on `l` ([`Flow::split_quiet`]).
    /// `Err` (nothing walked) when the body is not of that kind (`Err(None)`), or when the
    /// visitor may change states and some op of the body conflicts with an entry of the head
    /// (the visitor would insert a wait): `Err(Some(entry))`, the entry state with the quiet
    /// entries collapsed, to iterate from (exact: docs/async.md, "Entries a copy loop cannot
    /// meet").
    fn closed_form(
        &mut self,
        l: Op,
        cond: Option<Region>,
        body: Region,
        entry: &[InFlight],
        v: &mut dyn Visitor,
    ) -> ClosedForm {
        if self.memo.iterate || closed_form_off() {
            return Err(None);
        }
        let issues = self.inserts_only(l).ok_or(None)?;
        let cut = self.trip_cut(l);
        let parts: Vec<(InFlight, InFlight)> = if self.may_collapse(l, cut) {
            let ops = self.near_body_ops(l);
            entry.iter().map(|x| self.split_quiet(l, &ops, x)).collect()
        } else {
            entry
                .iter()
                .map(|x| (x.clone(), InFlight::default()))
                .collect()
        };
        // The entry state with the quiet entries collapsed, for the iteration when the
        // closed form does not apply (`None`: nothing collapsed, the entry state as it is).
        let collapsed: Option<Vec<InFlight>> =
            parts.iter().any(|(_, q)| !q.is_empty()).then(|| {
                parts
                    .iter()
                    .map(|(loud, quiet)| {
                        let mut x = loud.clone();
                        x.join(quiet);
                        x
                    })
                    .collect()
            });
        let mut added = InFlight::default();
        for &(q, op) in issues.iter() {
            let e = self.issued(op);
            added.insert(q, e, if q.counted() { -1 } else { 0 });
        }
        let table = &mut self.memo.entries;
        // `back` followed by the trip-count cut (the identity without one).
        let step = |table: &mut Entries, x: &mut InFlight| {
            let moved = x.rewrite(table, Rewrite::Back(l, TAG_CAP));
            if let Some(t) = cut {
                cut_beyond(table, l, t, x);
            }
            moved
        };
        let mut back_added = added.clone();
        step(table, &mut back_added);
        let head: Vec<InFlight> = parts
            .into_iter()
            .map(|(mut cur, quiet)| {
                cur.join(&back_added);
                let mut powers = vec![cur.clone()];
                // `back` distributes over the join and saturates (and the cut is a filter):
                // once a power is stable, or empty, every later one equals it.
                while step(table, &mut cur) && !cur.is_empty() {
                    powers.push(cur.clone());
                }
                let mut h = InFlight::join_sorted(table, &powers);
                // Tagged `Unknown` on `l`: `back` leaves them as they are.
                h.join(&quiet);
                h
            })
            .collect();
        if v.modifies_states() && self.body_conflicts(l, &head) {
            self.stats.fallbacks += 1;
            return Err(collapsed);
        }
        self.stats.closed += 1;
        let back = self.pass(l, cond, body, &head, v);
        debug_assert!(
            {
                let mut h = head.clone();
                let mut b = back.clone();
                if let Some(t) = cut {
                    for x in b.iter_mut() {
                        cut_beyond(&self.memo.entries, l, t, x);
                    }
                }
                !join_parts(&mut h, b)
            },
            "the closed form of a loop is not its fixpoint"
        );
        Ok((head, back))
    }

    /// Whether the entries entering loop `l` (in closed form, trip-count cut `cut`) may be
    /// collapsed by [`Flow::split_quiet`]: not under [`FlowMemo::keep_tags`] or
    /// `SMEMSYNC_INFLIGHT_KEEP_TAGS`, and only where the iteration's head holds the saturated
    /// `Unknown` copy of each entry and keeps it at the exit: no trip-count cut, and not a
    /// constant loop of fewer than `TAG_CAP` iterations (whose exit drops `Unknown` tags).
    fn may_collapse(&self, l: Op, cut: Option<u32>) -> bool {
        let short = self.runs_at_least_once(l)
            && const_for_trips(self.k, l).is_some_and(|t| t < TAG_CAP as i64);
        !(self.memo.keep_tags || keep_tags_env()) && cut.is_none() && !short
    }

    /// The non-structural ops of loop `l`'s condition and body, where a visitor is called
    /// (a [`Flow::inserts_only`] body: no loop, so `if` and `stage` arms only), that some
    /// async op of the kernel may meet ([`Flow::consumer_near`]; the others conflict with
    /// no entry). Listed once per solver.
    fn near_body_ops(&mut self, l: Op) -> Arc<[Op]> {
        if let Some(o) = self.near_body.get(&l) {
            return o.clone();
        }
        let near: Arc<[Op]> = self
            .body_ops(l)
            .into_iter()
            .filter(|&op| self.consumer_near(op))
            .collect();
        self.near_body.insert(l, near.clone());
        near
    }

    fn body_ops(&self, l: Op) -> Vec<Op> {
        let k = self.k;
        let mut out = Vec::new();
        let mut work: Vec<Region> = k.ops[l].regions.iter().rev().copied().collect();
        while let Some(r) = work.pop() {
            for &op in k.region_ops(r) {
                let inner = &k.ops[op].regions;
                if inner.is_empty() {
                    out.push(op);
                } else {
                    work.extend(inner.iter().rev().copied());
                }
            }
        }
        out
    }

    /// Splits the state `x` entering loop `l` (every entry just tagged `Pre(0)` on `l`) into
    /// the entries that some op of the body (`ops`) may meet, kept as they are, and the
    /// *quiet* ones, retagged `Unknown` on `l` (docs/async.md, "Entries a copy loop cannot
    /// meet"). Iterated, a quiet entry would become `Pre(0)`, ..., `Pre(TAG_CAP - 1)`,
    /// `Unknown` on `l`, all of the same age (the body only adds entries), each answering
    /// "no conflict, no note" to every op of the body ([`Flow::quiet_variant`]), and all
    /// merged into one entry again when `l` exits: only the `Unknown` copy is kept.
    fn split_quiet(&mut self, l: Op, ops: &[Op], x: &InFlight) -> (InFlight, InFlight) {
        let mut quiet = InFlight::default();
        quiet.assume = x.assume.clone();
        let mut moved: rustc_hash::FxHashSet<EntryId> = Default::default();
        for (q, e, a) in x.iter() {
            if let Some(u) = self.quiet_variant(l, ops, q, e) {
                moved.insert(e);
                quiet.insert(q, u, a);
            }
        }
        let mut loud = x.clone();
        if !moved.is_empty() {
            self.stats.quiet += moved.len() as u64;
            loud.retain(|_, e, _| !moved.contains(&e));
        }
        (loud, quiet)
    }

    /// Entry `e` (queue `q`) tagged `Unknown` on loop `l` when it is quiet there (`ops`: the
    /// body's ops near some async op, [`Flow::near_body_ops`]): not a
    /// wgmma (register conflicts do not look at tags), issued inside some loop but not in
    /// `l` (a copy outside every loop may be dropped at `l`'s exit by its guard for some
    /// `Pre(j)`; one in `l` carries `PreLast`), tagged `Pre(0)` on `l`, and for every op of
    /// the body the answer for each `Pre(j)` copy is "no, without a note". That answer is
    /// [`Flow::decide`]'s first two generalizations: widening `Pre(j)` on `l` (a loop around
    /// the consumer, not the copy) gives `Unknown` for every `j`, so the `Earlier` and
    /// `Widest` generalizations of each copy are those of the `Unknown` one (or that entry
    /// itself when it has nothing more to widen); one of them answering (no, no note) is
    /// what `decide` returns for each copy, and for the `Unknown` one. Memoized per run.
    fn quiet_variant(&mut self, l: Op, ops: &[Op], q: Queue, e: EntryId) -> Option<EntryId> {
        if let Some(&r) = self.quiet.get(&(l, e)) {
            return r;
        }
        let r = self.quiet_variant_uncached(l, ops, q, e);
        self.quiet.insert((l, e), r);
        r
    }

    fn quiet_variant_uncached(
        &mut self,
        l: Op,
        ops: &[Op],
        q: Queue,
        e: EntryId,
    ) -> Option<EntryId> {
        if q == Queue::Wgmma {
            return None;
        }
        let copy = self.memo.entries.op(e);
        let lx = self.loops.of(copy);
        if lx.is_empty() || lx.contains(&l) {
            return None;
        }
        let tags = self.memo.entries.tags(e);
        if !tags.iter().any(|&(t, g)| t == l && g == IterTag::Pre(0)) {
            return None;
        }
        let u: Vec<(Op, IterTag)> = tags
            .iter()
            .map(|&(t, g)| if t == l { (t, IterTag::Unknown) } else { (t, g) })
            .collect();
        let u = self.memo.entries.intern(copy, &u);
        for &op in ops {
            if self.apart(op, copy) {
                continue;
            }
            let no = [Widening::Earlier, Widening::Widest].into_iter().any(|w| {
                let g = self.generalized(op, u, w).unwrap_or(u);
                self.probe(op, g) == (false, false)
            });
            if !no {
                return None;
            }
        }
        Some(u)
    }

    /// The issues of loop `l`'s body (with their queues) when the body only adds entries: no
    /// op of it (or of its condition) waits, commits, ticks a counter (an issue on a counter
    /// or a global load counted with the copies) or holds a loop, and no `if` on a tracked
    /// condition (which would split the state into classes). Memoized per loop.
    fn inserts_only(&mut self, l: Op) -> Option<Issues> {
        if let Some(r) = self.inserting.get(&l) {
            return r.clone();
        }
        let k = self.k;
        let mut issues = Vec::new();
        let mut ok = true;
        let mut work: Vec<Region> = k.ops[l].regions.to_vec();
        while let Some(r) = work.pop() {
            for &op in k.region_ops(r) {
                let od = &k.ops[op];
                ok &= match &od.kind {
                    OpKind::For { .. } | OpKind::While { .. } => false,
                    OpKind::If { cond } => self.tracked(*cond).is_none(),
                    OpKind::Stage { .. } => true,
                    _ => match self.class(op) {
                        OpClass::Other => true,
                        OpClass::GLoad => self.target.global_load_counter().is_none(),
                        OpClass::Issue(q) if !q.ticks_on_issue() => {
                            issues.push((q, op));
                            true
                        }
                        _ => false,
                    },
                };
                if !ok {
                    break;
                }
                work.extend(od.regions.iter().copied());
            }
            if !ok {
                break;
            }
        }
        let r: Option<Issues> = ok.then(|| issues.into());
        self.inserting.insert(l, r.clone());
        r
    }

    /// Whether some op of loop `l`'s body (a [`Flow::inserts_only`] body) may conflict with
    /// an entry in flight before it: one of `head` (in any class) or one the body issued
    /// earlier in program order (an issue in one arm of an `if` counts for the other arm
    /// too: a superset). Register and footprint conflicts, answered and memoized without
    /// raising conservative notes (they are raised when the walk asks).
    fn body_conflicts(&mut self, l: Op, head: &[InFlight]) -> bool {
        let mut seen = head.to_vec();
        let regions = self.k.ops[l].regions.clone();
        regions.iter().any(|&r| self.region_conflicts(r, &mut seen))
    }

    /// [`Flow::body_conflicts`] for the ops of one region, in program order; `seen` gains
    /// the entries the region's issues add.
    fn region_conflicts(&mut self, r: Region, seen: &mut [InFlight]) -> bool {
        let k = self.k;
        for &op in k.region_ops(r) {
            if !k.ops[op].regions.is_empty() {
                let inner = k.ops[op].regions.clone();
                if inner.iter().any(|&x| self.region_conflicts(x, seen)) {
                    return true;
                }
                continue;
            }
            for st in seen.iter() {
                if !self.register_conflicts(op, st).is_empty() {
                    return true;
                }
                if st.is_empty() || !self.consumer_near(op) {
                    continue;
                }
                // Known answers are read in place (`consumer_near` made the record); the
                // others are asked afterwards, but for copies the consumer cannot meet (no,
                // without a note). Only the memo's contents depend on the order.
                let mut unasked = Vec::new();
                if let Some(c) = self.memo.consumers.get(&op) {
                    let (table, pos) = (&self.memo.entries, &self.memo.async_pos);
                    for (_, e, _) in st.iter() {
                        match c.answers.get(e) {
                            Answer::No => {}
                            Answer::Yes => return true,
                            Answer::Noted(i) if self.memo.noted[i as usize].0 => return true,
                            Answer::Noted(_) => {}
                            Answer::Unasked => {
                                let p = pos.get(table.op(e).index()).copied();
                                if c.may_meet(p.unwrap_or(u32::MAX)) {
                                    unasked.push(e);
                                }
                            }
                        }
                    }
                }
                for e in unasked {
                    if self.probe(op, e).0 {
                        return true;
                    }
                }
            }
            if let OpClass::Issue(q) = self.class(op) {
                let e = self.issued(op);
                for st in seen.iter_mut() {
                    st.insert(q, e, if q.counted() { -1 } else { 0 });
                }
            }
        }
        false
    }

    /// Keeps in `l`'s exit states only the copies of an entry issued before the loop that an
    /// exit can see (docs/async.md, "Group ages across inner loops"). An entry tagged `Pre(j)`
    /// or `PreLast(j, _)` on `l` has aged through `j` iterations; the fixpoint's exit state
    /// holds one copy per `j` and the exit merges them at the minimum age, that of the fewest
    /// iterations. For a `for` of `T ≥ 1` constant trips only `j = T` reaches the exit (`T <
    /// TAG_CAP`; else only the saturated `Unknown` copy, `j ≥ TAG_CAP`). For a `for` of
    /// unknown trips whose bounds and step are the same in every instance, a copy issued in
    /// `l` itself (an earlier instance) shows that the trip count is at least 1: its `j = 0`
    /// copy is no execution. Each drop removes copies that stand for no path, so what is
    /// left is still a superset of every path's state (sound), with the age of the fewest
    /// iterations that can happen.
    fn exact_exit(&mut self, l: Op, exit: &mut [InFlight]) {
        let pre = |t: &IterTag| match *t {
            IterTag::Pre(j) | IterTag::PreLast(j, _) => Some(j as i64),
            _ => None,
        };
        let table = &self.memo.entries;
        if let Some(trip) = const_for_trips(self.k, l).filter(|&t| t >= 1) {
            let keep = |j: i64| trip < TAG_CAP as i64 && j == trip;
            for x in exit.iter_mut() {
                x.retain(|_, e, _| {
                    table.tags(e).iter().all(|(lp, t)| *lp != l || pre(t).is_none_or(keep))
                });
            }
        } else if matches!(self.k.ops[l].kind, OpKind::For { .. }) && self.bounds_invariant(l) {
            let loops = &self.loops;
            for x in exit.iter_mut() {
                x.retain(|_, e, _| {
                    !loops.of(table.op(e)).contains(&l)
                        || table.tags(e).iter().all(|(lp, t)| *lp != l || pre(t) != Some(0))
                });
            }
        }
    }

    /// Whether the bounds and step of `for` `l` are the same in every instance of it: each an
    /// immediate, a kernel parameter or the result of an op outside every loop around `l`.
    fn bounds_invariant(&self, l: Op) -> bool {
        let OpKind::For { lo, hi, step, .. } = &self.k.ops[l].kind else {
            return false;
        };
        let around = self.loops.of(l);
        let fixed = |o: &Operand| match o {
            Operand::Imm(_) => true,
            Operand::Value(v) => match self.k.values[*v].def {
                ValueDef::Param(_) => true,
                ValueDef::Result(d, _) => {
                    !self.k.parents().ancestors(d).iter().any(|a| around.contains(a))
                }
                ValueDef::RegionArg(..) => false,
            },
        };
        [lo, hi, step].into_iter().all(fixed)
    }

    /// Drops from `l`'s exit states the entries whose issue guard rules them out there
    /// ([`Flow::guard_excludes_exit`]).
    fn drop_guarded_at_exit(&mut self, l: Op, exit: &mut [InFlight]) {
        for x in exit.iter_mut() {
            let mut gone = Vec::new();
            for (q, e, _) in x.iter() {
                if self.guard_excludes_exit(l, e) {
                    gone.push((q, e));
                }
            }
            for (q, e) in gone {
                let op = self.memo.entries.op(e);
                self.drained.entry((l, op)).or_insert(true);
                x.remove(q, e);
            }
            for (_, e, _) in x.iter() {
                let c = self.memo.entries.op(e);
                if self.loops.of(c).contains(&l) {
                    self.drained.insert((l, c), false);
                }
            }
        }
    }

    /// Whether the guard of a copy (the conditions of the `if`s around it, split at `and`)
    /// shows that it is not in flight when loop `l` exits with the copy's tag on `l`:
    /// - tag `Pre(j)` (`l` ran `j` iterations since the copy, and exits: `hi <= lo + j·step`):
    ///   the copy, outside every loop, is guarded by `hi > lo + c` (or `hi >= lo + c + 1`)
    ///   with `c >= j·step` (bounds
    ///   computed outside every loop, positive constant step; Triton's prologue predicate
    ///   `n > s` for the load of stage `s`);
    /// - tag `Dist(d)` (issued in `l`'s `d`-th iteration before the exit): the copy, in `l`,
    ///   is guarded by `iv + a < hi - c` with `d · step <= c + a` (`a` = 0, or `iv + a` an
    ///   `add` that never wraps; `c` = 0 for `hi` itself; `<=` is `<` with `c - 1`, the
    ///   operands may be swapped): with `T` iterations the last
    ///   `lo + (T-1)·step >= hi - step`, so the copy's iteration `lo + (T-d)·step >= hi -
    ///   d·step >= hi - c - a` fails its guard (Triton's prefetch predicate `i < n - (S-1)`,
    ///   the examples' `i + 1 < n`).
    fn guard_excludes_exit(&mut self, l: Op, e: EntryId) -> bool {
        if let Some(&g) = self.guards.get(&(l, e)) {
            return g;
        }
        // Only two tags can be ruled out (below): decided from the tag alone otherwise,
        // without building the entry nor the guard.
        let copy = self.memo.entries.op(e);
        let tag = self.memo.entries.tags(e).iter().find(|(lp, _)| *lp == l);
        let possible = match tag.map(|(_, t)| *t) {
            Some(IterTag::Pre(_) | IterTag::PreLast(..)) => self.loops.of(copy).is_empty(),
            Some(IterTag::Dist(d)) => d >= 1 && self.loops.of(copy).contains(&l),
            _ => false,
        };
        if !possible {
            self.guards.insert((l, e), false);
            return false;
        }
        let p = self.memo.entries.pending(e);
        let g = self.guard_excludes_exit_uncached(l, &p);
        self.guards.insert((l, e), g);
        g
    }

    fn guard_excludes_exit_uncached(&mut self, l: Op, p: &Pending) -> bool {
        let k = self.k;
        let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else {
            return false;
        };
        let Some(step) = self.k.const_i32(*step).filter(|&s| s > 0) else {
            return false;
        };
        let tag = p.tags.iter().find(|(lp, _)| *lp == l).map(|(_, t)| *t);
        let conj = self.guard_conjuncts(p.op, l);
        let same = |f: &Self, a: &Operand, b: &Operand| match (a.value(), b.value()) {
            (Some(x), Some(y)) if x == y => true,
            _ => matches!((f.k.const_i32(*a), f.k.const_i32(*b)), (Some(x), Some(y)) if x == y),
        };
        match tag {
            Some(IterTag::Pre(j) | IterTag::PreLast(j, _)) => {
                let outside = |f: &mut Self, o: &Operand| match o.value().map(|v| k.values[v].def) {
                    None | Some(ValueDef::Param(_)) => true,
                    Some(ValueDef::Result(d, _)) => f.loops.of(d).is_empty(),
                    Some(_) => false,
                };
                if !self.loops.of(p.op).is_empty() || !outside(self, lo) || !outside(self, hi) {
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
                    Some(f.k.const_i32(*y)? - f.k.const_i32(*lo)?)
                };
                conj.iter().any(|c| {
                    // `hi >= lo + c` is `hi > lo + c - 1`.
                    let c = match c {
                        OpKind::Cmp(CmpPred::Gt, x, y) | OpKind::Cmp(CmpPred::Lt, y, x) => {
                            above(self, x, y)
                        }
                        OpKind::Cmp(CmpPred::Ge, x, y) | OpKind::Cmp(CmpPred::Le, y, x) => {
                            above(self, x, y).map(|c| c - 1)
                        }
                        _ => None,
                    };
                    c.is_some_and(|c| c >= j as i64 * step)
                })
            }
            Some(IterTag::Dist(d)) if d >= 1 && self.loops.of(p.op).contains(&l) => {
                let Some(&iv) = k.ops[l].regions.first().and_then(|&b| k.region_args(b).first())
                else {
                    return false;
                };
                let margin = |f: &Self, x: &Operand| -> Option<i64> {
                    if same(f, x, hi) {
                        return Some(0);
                    }
                    let ValueDef::Result(o, _) = k.values[x.value()?].def else {
                        return None;
                    };
                    match &k.ops[o].kind {
                        OpKind::Binary(BinOp::Sub, h, c) if same(f, h, hi) => f.k.const_i32(*c),
                        OpKind::Binary(BinOp::Add, h, c) if same(f, h, hi) => Some(-f.k.const_i32(*c)?),
                        _ => None,
                    }
                };
                conj.iter().any(|c| {
                    // `iv + a <= hi - c` is `iv + a < hi - (c - 1)`.
                    let (a, x, strict) = match c {
                        OpKind::Cmp(CmpPred::Lt, a, x) | OpKind::Cmp(CmpPred::Gt, x, a) => (a, x, 0),
                        OpKind::Cmp(CmpPred::Le, a, x) | OpKind::Cmp(CmpPred::Ge, x, a) => (a, x, 1),
                        _ => return false,
                    };
                    let bound = margin(self, x).zip(self.ahead_of(iv, a)).map(|(c, a)| c + a - strict);
                    bound.is_some_and(|c| (d as i64) * step <= c)
                })
            }
            _ => false,
        }
    }

    /// How far operand `a` runs ahead of the induction variable `iv`: 0 for `iv` itself, `c`
    /// for `add iv, c` (either operand order) whose `i32` sum never wraps (`ir::ranges`:
    /// Triton's and nvFuser's `i + 1 < n` refill guard), else `None`.
    fn ahead_of(&self, iv: Value, a: &Operand) -> Option<i64> {
        let v = a.value()?;
        if v == iv {
            return Some(0);
        }
        let ValueDef::Result(o, _) = self.k.values[v].def else {
            return None;
        };
        let OpKind::Binary(BinOp::Add, x, y) = &self.k.ops[o].kind else {
            return None;
        };
        let c = match (x.value() == Some(iv), y.value() == Some(iv)) {
            (true, _) => self.k.const_i32(*y)?,
            (_, true) => self.k.const_i32(*x)?,
            _ => return None,
        };
        self.overlap.ranges().exact(v).then_some(c)
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

    fn runs_at_least_once(&self, l: Op) -> bool {
        const_for_trips(self.k, l).is_some_and(|t| t >= 1)
    }

    /// The entry a copy issued at `op` gets: tags `Dist(0)` on each loop enclosing it.
    fn issued(&mut self, op: Op) -> EntryId {
        if let Some(&e) = self.memo.issued.get(&op) {
            return e;
        }
        let tags: Vec<(Op, IterTag)> = self
            .loops
            .of(op)
            .iter()
            .map(|l| (*l, IterTag::Dist(0)))
            .collect();
        let e = self.memo.entries.intern(op, &tags);
        self.memo.issued.insert(op, e);
        e
    }

    /// What the transfer function does with `op` (computed once per op).
    fn class(&mut self, op: Op) -> OpClass {
        if let Some(Some(c)) = self.classes.get(op.index()) {
            return c.clone();
        }
        let c = if let Some((q, _)) = queue_of(self.k, &self.target, op) {
            OpClass::Issue(q)
        } else {
            match &self.k.ops[op].kind {
                OpKind::GLoad { .. } => OpClass::GLoad,
                OpKind::CpAsyncCommit => OpClass::Commit(Queue::CpAsync),
                OpKind::BulkCommit => OpClass::Commit(Queue::Bulk),
                OpKind::WgmmaCommit => OpClass::Commit(Queue::Wgmma),
                OpKind::MbarWait { .. } => OpClass::MbarWait,
                _ => match effects(self.k, op).sync {
                    Some(SyncEffect::Wait(w)) => OpClass::Wait(w),
                    _ => OpClass::Other,
                },
            }
        };
        if self.classes.len() <= op.index() {
            self.classes.resize(op.index() + 1, None);
        }
        self.classes[op.index()] = Some(c.clone());
        c
    }

    fn transfer(&mut self, op: Op, st: &mut InFlight, v: &mut dyn Visitor) {
        match self.class(op) {
            OpClass::Issue(q) => {
                let e = self.issued(op);
                if q.ticks_on_issue() {
                    st.tick(q, AGE_CAP);
                    st.insert(q, e, 0);
                } else if q.counted() {
                    st.insert(q, e, -1);
                } else {
                    st.insert(q, e, 0);
                }
            }
            OpClass::GLoad => {
                if let Some(c) = self.target.global_load_counter() {
                    st.tick(Queue::Counter(c), AGE_CAP);
                }
            }
            OpClass::Commit(q) => st.tick(q, AGE_CAP),
            OpClass::MbarWait => self.mbar_wait(op, st, v),
            OpClass::Wait(w) => self.wait(op, &w, st, v),
            OpClass::Other => {}
        }
    }

    /// Whether TMA loads `a` and `b` never have one slot's copies in flight at once
    /// (`FlowMemo::serial_loads`, both tied to one buffer and mbarrier array).
    pub fn serial_loads(&self, a: Op, b: Op) -> bool {
        let s = &self.memo.serial_loads;
        s.get(&a).is_some_and(|t| s.get(&b) == Some(t))
    }

    /// `mbar_wait`: completes the pending TMA loads on the same mbarrier whose slot provably
    /// equals the wait's, unless `sync` did not verify the wait's phase
    /// (`FlowMemo::unverified_waits`).
    fn mbar_wait(&mut self, op: Op, st: &mut InFlight, v: &mut dyn Visitor) {
        let k = self.k;
        let OpKind::MbarWait { mbar, index, .. } = &k.ops[op].kind else {
            return;
        };
        if self.memo.unverified_waits.contains(&op) {
            return;
        }
        let mut cands: Vec<(EntryId, i32)> = st.entries(Queue::Mbarrier).collect();
        let table = &self.memo.entries;
        cands.sort_by(|a, b| table.cmp(a.0, b.0));
        for (e, a) in cands {
            let copy = self.memo.entries.op(e);
            let OpKind::TmaLoad {
                mbar: cm,
                mbar_index: ci,
                ..
            } = &k.ops[copy].kind
            else {
                continue;
            };
            if cm == mbar
                && self
                    .overlap
                    .must_equal(copy, ci, op, index, self.memo.entries.tags(e))
            {
                st.remove(Queue::Mbarrier, e);
                v.completed(op, Queue::Mbarrier, &self.memo.entries.pending(e), a);
            }
        }
    }

    /// Applies a wait (of the kernel, or one a planner inserts before `at`).
    pub fn wait(&mut self, at: Op, w: &WaitKind, st: &mut InFlight, v: &mut dyn Visitor) {
        let mut done: Vec<(Queue, EntryId, i32)> = Vec::new();
        let mut older = |q: Queue, n: u32, st: &mut InFlight| {
            let mut d = st.complete_older(q, n);
            d.sort_by(|a, b| self.memo.entries.cmp(a.0, b.0));
            done.extend(d.into_iter().map(|(e, a)| (q, e, a)));
        };
        match w {
            WaitKind::Counters(cs) => {
                for (c, n) in cs {
                    older(Queue::Counter(*c), *n, st);
                }
            }
            WaitKind::CpAsyncGroups(n) => older(Queue::CpAsync, *n, st),
            WaitKind::BulkGroups(n) => older(Queue::Bulk, *n, st),
            WaitKind::WgmmaGroups(n) => older(Queue::Wgmma, *n, st),
            WaitKind::Tokens(ts) => {
                for t in ts {
                    let ValueDef::Result(x, _) = self.k.values[*t].def else {
                        continue;
                    };
                    let xl = self.loops.of(x);
                    let table = &self.memo.entries;
                    let mut got = Vec::new();
                    st.retain(|q, e, a| {
                        let recent = table.op(e) == x
                            && xl.iter().all(|l| {
                                table
                                    .tags(e)
                                    .iter()
                                    .any(|(tl, tg)| tl == l && *tg == IterTag::Dist(0))
                            });
                        if recent {
                            got.push((q, e, a));
                        }
                        !recent
                    });
                    got.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| table.cmp(a.1, b.1)));
                    done.extend(got);
                }
            }
        }
        for (q, e, a) in done {
            v.completed(at, q, &self.memo.entries.pending(e), a);
        }
    }

    /// The pending entries an op's shared accesses may conflict with (at least one side
    /// writes and the footprints may overlap), with their queues and ages: register
    /// conflicts first, then by queue and in [`Pending`] order.
    pub fn conflicts(&mut self, op: Op, st: &InFlight) -> Vec<(Queue, Pending, i32)> {
        self.conflict_ids(op, st)
            .into_iter()
            .map(|(q, e, a)| (q, self.memo.entries.pending(e), a))
            .collect()
    }

    /// [`Flow::conflicts`] with interned entries.
    pub fn conflict_ids(&mut self, op: Op, st: &InFlight) -> Vec<(Queue, EntryId, i32)> {
        let mut out = self.register_conflicts(op, st);
        if st.is_empty() {
            // Nothing in flight: no answer to look up (and no consumer entry to build: most
            // ops of a kernel without async copies come here).
            return out;
        }
        if !self.consumer_near(op) {
            return out;
        }
        let start = out.len();
        let mut rest = std::mem::take(&mut self.scratch);
        rest.clear();
        let cands = self.near_entries(op, st);
        let memo = &mut self.memo;
        let Some(c) = memo.consumers.get_mut(&op) else {
            self.scratch = rest;
            return out;
        };
        // Known answers without notes are read in place ([`Consumer::visit`]; a plain "no",
        // most of them, by a two-bit test first); the others (unasked, or noted) are handled
        // afterwards in `Pending` order, so that the conservative notes are raised and
        // replayed in the order of the entries, whatever their ids. The hits go straight
        // after the register conflicts; the others wait in a scratch vector the solver keeps
        // (no allocation per consumer once it has grown). The entries visited are those of
        // the near copies ([`Flow::near_entries`]) or, where that list would cost more, all.
        let (table, pos) = (&memo.entries, &memo.async_pos);
        let mut lists = (&mut out, &mut rest);
        match cands {
            Some(v) => {
                self.stats.entry_checks += v.len() as u64;
                self.stats.indexed += 1;
                for &(q, e, a) in &v {
                    if !c.answers.is_no(e) {
                        c.visit(table, pos, &mut lists, (q, e, a));
                    }
                }
                self.near_scratch = v;
            }
            None => {
                for (q, list) in st.queues() {
                    self.stats.entry_checks += list.len() as u64;
                    for &(e, a) in list {
                        if !c.answers.is_no(e) {
                            c.visit(table, pos, &mut lists, (q, e, a));
                        }
                    }
                }
            }
        }
        if !rest.is_empty() {
            let table = &self.memo.entries;
            rest.sort_by(|x, y| x.0.cmp(&y.0).then_with(|| table.cmp(x.1, y.1)));
            for &(q, e, a) in &rest {
                if self.answer(op, e) {
                    out.push((q, e, a));
                }
            }
            let table = &self.memo.entries;
            out[start..].sort_by(|x, y| x.0.cmp(&y.0).then_with(|| table.cmp(x.1, y.1)));
        }
        self.scratch = rest;
        out
    }

    /// The entries of `st` whose copy consumer `op` may meet ([`Consumer::may_meet`]), in
    /// queue order then id order — the order of `st.iter()` — found through the index of
    /// entries by copy ([`FlowMemo::by_copy`]): for each near copy, each of its interned
    /// entries is searched in each queue of `st` (a binary search from the last match).
    /// `None` (scan `st` instead) when the index is off, or when the near copies have so
    /// many entries that the searches would cost more than the scan. Every entry left out is
    /// of a copy the consumer cannot meet, whose answer is "no" without a note
    /// ([`Flow::decide`]), so the scan and this list give the same conflicts.
    ///
    /// Cost: `O(words of the near set + n log |st|)` for `n` entries of near copies,
    /// against `O(|st|)` for the scan.
    fn near_entries(&mut self, op: Op, st: &InFlight) -> Option<Vec<(Queue, EntryId, i32)>> {
        if self.memo.no_index || no_index_env() {
            return None;
        }
        self.index_entries();
        let memo = &self.memo;
        let c = memo.consumers.get(&op)?;
        let total = st.iter().count();
        let unlisted = memo.by_copy.last().map_or(0, Vec::len);
        let mut n = unlisted;
        let near = near_positions(&c.near_set);
        for &p in &near {
            n += memo.by_copy.get(p).map_or(0, Vec::len);
        }
        let steps = usize::BITS - total.leading_zeros();
        if n * steps as usize >= 4 * total {
            return None;
        }
        let mut v = std::mem::take(&mut self.near_scratch);
        v.clear();
        let lists: Vec<&[EntryId]> = (near.iter().copied())
            .chain([memo.by_copy.len() - 1])
            .filter_map(|p| memo.by_copy.get(p).map(Vec::as_slice))
            .collect();
        for (q, list) in st.queues() {
            let from = v.len();
            for ids in &lists {
                let mut lo = 0;
                for &e in ids.iter() {
                    lo += list[lo..].partition_point(|x| x.0 < e);
                    match list.get(lo) {
                        Some(&(f, a)) if f == e => v.push((q, e, a)),
                        Some(_) => {}
                        None => break,
                    }
                }
            }
            v[from..].sort_unstable_by_key(|x| x.1);
        }
        Some(v)
    }

    /// Brings [`FlowMemo::by_copy`] up to date with the interned entries (each entry is
    /// placed once, in id order, so every list stays sorted).
    fn index_entries(&mut self) {
        let asyncs = self.async_ops().len();
        let m = &mut self.memo;
        if m.by_copy.len() != asyncs + 1 {
            m.by_copy = vec![Vec::new(); asyncs + 1];
            m.indexed = 0;
        }
        while m.indexed < m.entries.len() {
            let e = EntryId::from_index(m.indexed);
            let p = m.async_pos.get(m.entries.op(e).index()).copied().unwrap_or(u32::MAX);
            let slot = if (p as usize) < asyncs { p as usize } else { asyncs };
            m.by_copy[slot].push(e);
            m.indexed += 1;
        }
    }

    /// Creates the memo's record of consumer `op` on first sight; returns whether some async
    /// op of the kernel may conflict with it ([`Consumer::near`]).
    fn consumer_near(&mut self, op: Op) -> bool {
        if let Some(c) = self.memo.consumers.get(&op) {
            return c.near;
        }
        let k = self.k;
        let mine: Arc<[SharedAccess]> = effects(k, op)
            .shared
            .into_iter()
            .filter(|a| k.elem(a.mem) != ElemType::MBarrier)
            .collect();
        let near_set = if mine.is_empty() {
            Vec::new()
        } else {
            self.near_copies(op, &mine)
        };
        let near = near_set.iter().any(|w| *w != 0);
        self.memo.consumers.insert(
            op,
            Consumer {
                mine,
                near,
                near_set,
                answers: Answers::default(),
            },
        );
        near
    }

    /// The async ops that some access of `mine` (consumer `op`'s) may meet, as a bitset over
    /// their positions in [`FlowMemo::asyncs`]. Only the copies with an access in the root
    /// buffer of one of `mine` are candidates (in another root buffer, an access of an
    /// unpinned buffer is apart from it: [`Overlap::buffers_apart`]); every copy is one when
    /// some of `mine` is in a pinned buffer (pinned buffers may share bytes).
    fn near_copies(&mut self, op: Op, mine: &[SharedAccess]) -> Vec<u64> {
        let k = self.k;
        let asyncs = self.async_ops();
        let pinned = mine
            .iter()
            .any(|m| k.buffers[k.root_buffer(m.mem)].offset.is_some());
        let mut cands: Vec<u32> = if pinned {
            (0..asyncs.len() as u32).collect()
        } else {
            mine.iter()
                .filter_map(|m| self.memo.by_root.get(&k.root_buffer(m.mem)))
                .flatten()
                .copied()
                .collect()
        };
        cands.sort_unstable();
        cands.dedup();
        let mut set = vec![0u64; asyncs.len().div_ceil(64)];
        // The consumer's boxes once, each copy's accesses and boxes from the per-position
        // table ([`Flow::copy_sides`]): the test per pair is `Flow::sides_apart`, the one
        // `Flow::pair_apart` makes, without a hash lookup per pair.
        let use_boxes = !(self.memo.no_boxes || no_boxes_env());
        let mb = if use_boxes {
            self.boxes.of_op(op, false, mine)
        } else {
            Arc::from([])
        };
        for p in cands {
            let (theirs, tb) = self.copy_sides(p, asyncs[p as usize], use_boxes);
            if !self.sides_apart((&theirs, &tb), (mine, &mb), use_boxes) {
                set[p as usize / 64] |= 1 << (p % 64);
            }
        }
        set
    }

    /// The async accesses of the copy at position `p` of [`FlowMemo::asyncs`] and their
    /// footprint boxes (empty when `use_boxes` is off), kept per position for this solver.
    fn copy_sides(&mut self, p: u32, copy: Op, use_boxes: bool) -> CopySides {
        let i = p as usize;
        if let Some(Some(s)) = self.copy_sides.get(i) {
            return s.clone();
        }
        let theirs = self.copy_accesses(copy);
        let tb = if use_boxes {
            self.boxes.of_op(copy, true, &theirs)
        } else {
            Arc::from([])
        };
        if self.copy_sides.len() <= i {
            self.copy_sides.resize(i + 1, None);
        }
        self.copy_sides[i] = Some((theirs.clone(), tb.clone()));
        (theirs, tb)
    }

    /// The async ops of the kernel (ops without regions that join a queue), listed once per
    /// memo, with their positions and the root buffers of their async accesses.
    fn async_ops(&mut self) -> Arc<[Op]> {
        if let Some(a) = &self.memo.asyncs {
            return a.clone();
        }
        let (k, t) = (self.k, self.target);
        let a: Arc<[Op]> = k
            .ops
            .iter()
            .filter(|(o, d)| d.regions.is_empty() && queue_of(k, &t, *o).is_some())
            .map(|(o, _)| o)
            .collect();
        self.memo.async_pos = vec![u32::MAX; k.ops.len()];
        self.memo.by_root.clear();
        for (i, &o) in a.iter().enumerate() {
            self.memo.async_pos[o.index()] = i as u32;
            let mut roots: Vec<Buffer> = self
                .copy_accesses(o)
                .iter()
                .map(|x| k.root_buffer(x.mem))
                .collect();
            roots.dedup();
            for r in roots {
                let list = self.memo.by_root.entry(r).or_default();
                if list.last() != Some(&(i as u32)) {
                    list.push(i as u32);
                }
            }
        }
        self.memo.asyncs = Some(a.clone());
        a
    }

    /// The position of async op `copy` in [`FlowMemo::asyncs`] (`u32::MAX`: not listed).
    fn async_pos(&self, copy: Op) -> u32 {
        self.memo
            .async_pos
            .get(copy.index())
            .copied()
            .unwrap_or(u32::MAX)
    }

    /// The memoized answer for (`op`, `e`), asking the overlap engine on a miss; replays or
    /// records the query's conservative notes.
    fn answer(&mut self, op: Op, e: EntryId) -> bool {
        match self.known(op, e) {
            Answer::No => false,
            Answer::Yes => true,
            Answer::Noted(i) => {
                let (h, notes) = &self.memo.noted[i as usize];
                note_all(&self.overlap, notes);
                *h
            }
            Answer::Unasked => {
                let (h, notes) = self.decide(op, e);
                note_all(&self.overlap, &notes);
                self.store(op, e, h, notes);
                h
            }
        }
    }

    fn known(&self, op: Op, e: EntryId) -> Answer {
        self.memo
            .consumers
            .get(&op)
            .map_or(Answer::Unasked, |c| c.answers.get(e))
    }

    fn store(&mut self, op: Op, e: EntryId, h: bool, notes: Vec<Note>) {
        let ans = if !notes.is_empty() {
            self.memo.noted.push((h, notes));
            Answer::Noted((self.memo.noted.len() - 1) as u32)
        } else if h {
            Answer::Yes
        } else {
            Answer::No
        };
        if let Some(c) = self.memo.consumers.get_mut(&op) {
            c.answers.set(e, ans);
        }
        self.memo.answered += 1;
    }

    /// Decides whether consumer `op` may conflict with entry `e`, with the conservative
    /// notes the query raised (not added to the overlap's list: the caller replays them).
    ///
    /// Two shortcuts, both exact: a copy whose accesses are all in buffers apart from the
    /// consumer's (or neither side writes) conflicts with no execution; and when one of the
    /// entry's *generalizations* ([`Flow::generalized`]: some of its tags widened to
    /// `Unknown`, i.e. more iteration pairs) is exactly `false` (answered without notes), so
    /// is every specialization of it, since its iteration pairs are a subset. Asked in turn
    /// ([`Widening`]): any earlier iteration of the loops enclosing both (one question for
    /// every distance), the distances on those loops (one question per consumer, copy and
    /// distances, shared by every entry), then the latter keeping the outermost loop of each
    /// side. A generalization answering `true` or conservatively says nothing: the entry is
    /// then asked itself.
    fn decide(&mut self, op: Op, e: EntryId) -> (bool, Vec<Note>) {
        let copy = self.memo.entries.op(e);
        if self.apart(op, copy) {
            return (false, Vec::new());
        }
        for w in [Widening::Earlier, Widening::Widest, Widening::KeepOuter] {
            if let Some(g) = self.generalized(op, e, w)
                && self.probe(op, g) == (false, false)
            {
                return (false, Vec::new());
            }
        }
        let saved = self.overlap.conservative.take();
        let h = self.may_conflict(e, op);
        let notes = self.overlap.conservative.replace(saved);
        (h, notes)
    }

    /// The answer for (`op`, `g`) and whether it is noted, computed and memoized if needed,
    /// without raising its notes (they are replayed when `g` itself is asked).
    fn probe(&mut self, op: Op, g: EntryId) -> (bool, bool) {
        match self.known(op, g) {
            Answer::No => (false, false),
            Answer::Yes => (true, false),
            Answer::Noted(i) => (self.memo.noted[i as usize].0, true),
            Answer::Unasked => {
                let (h, notes) = self.decide(op, g);
                let noted = !notes.is_empty();
                self.store(op, g, h, notes);
                (h, noted)
            }
        }
    }

    /// The entry `e` with tags widened to `Unknown` (the overlap query then leaves those
    /// loops' iterations free); `None` when that changes nothing. Widened: `Pre` and `Last`
    /// tags on loops that do not enclose both the copy and the consumer `op` (with
    /// [`Widening::KeepOuter`], except on the outermost such loop of each side), and
    /// `Pre`/`PreLast` tags on loops that enclose both when some loop around them is not
    /// tagged `Dist(0)` (the copy ran in an earlier instance of the loop: `Unknown` there
    /// leaves both iterations free, a superset). `Dist` tags, the distances on the loops
    /// enclosing both, are kept, except with [`Widening::Earlier`]: from the first of those
    /// loops tagged `Dist(d)` with `d ≥ 1` inwards, every tag becomes `Unknown` (on that loop,
    /// any earlier iteration, a superset of `d` iterations earlier; inside it, loops of
    /// another instance: free).
    fn generalized(&mut self, op: Op, e: EntryId, w: Widening) -> Option<EntryId> {
        let key = (self.loops.of(op).last().copied(), e, w);
        if let Some(&g) = self.memo.widened.get(&key) {
            return g;
        }
        let g = self.generalized_uncached(op, e, w);
        self.memo.widened.insert(key, g);
        g
    }

    fn generalized_uncached(&mut self, op: Op, e: EntryId, w: Widening) -> Option<EntryId> {
        let copy = self.memo.entries.op(e);
        let (lx, ly) = (self.loops.of(copy), self.loops.of(op));
        let m = lx.iter().zip(ly).take_while(|(a, b)| a == b).count();
        let kept =
            |l: Op| w == Widening::KeepOuter && (lx.get(m) == Some(&l) || ly.get(m) == Some(&l));
        let tags = self.memo.entries.tags(e);
        let tag_of = |l: &Op| tags.iter().find(|(t, _)| t == l).map(|(_, g)| *g);
        let earlier = match w {
            Widening::Earlier => lx[..m]
                .iter()
                .position(|l| matches!(tag_of(l), Some(IterTag::Dist(d)) if d >= 1))
                .unwrap_or(m),
            _ => m,
        };
        // A common loop at position `i` of the nest runs in one instance for both sides
        // when every loop around it is tagged `Dist(0)`.
        let same_instance = |i: usize| {
            lx[..i]
                .iter()
                .all(|a| tags.iter().any(|(t, g)| t == a && *g == IterTag::Dist(0)))
        };
        let widen = |(l, t): &(Op, IterTag)| match lx[..m].iter().position(|c| c == l) {
            Some(i) if i >= earlier => *t != IterTag::Unknown,
            Some(i) => matches!(t, IterTag::Pre(_) | IterTag::PreLast(..)) && !same_instance(i),
            None => matches!(t, IterTag::Pre(_) | IterTag::Last(_)) && !kept(*l),
        };
        if !tags.iter().any(widen) {
            return None;
        }
        let g: Vec<(Op, IterTag)> = tags
            .iter()
            .map(|x| if widen(x) { (x.0, IterTag::Unknown) } else { *x })
            .collect();
        let g = self.memo.entries.intern(copy, &g);
        (g != e).then_some(g)
    }

    /// Whether no access of `copy` and of the consumer `op` can conflict under any tags
    /// ([`Flow::pair_apart`]), read from the consumer's record ([`Consumer::near_set`]).
    fn apart(&mut self, op: Op, copy: Op) -> bool {
        if !self.memo.consumers.contains_key(&op) {
            self.consumer_near(op);
        }
        let p = self.async_pos(copy);
        let c = &self.memo.consumers[&op];
        if p != u32::MAX {
            return !c.may_meet(p);
        }
        let mine = c.mine.clone();
        self.pair_apart(op, &mine, copy)
    }

    /// Whether no access of `copy` and none of `mine` (consumer `op`'s) can conflict under
    /// any tags: neither writes, their buffers are apart, or their footprint boxes are
    /// disjoint ([`crate::analysis::boxes`]; not under [`FlowMemo::no_boxes`] or
    /// `SMEMSYNC_INFLIGHT_NO_BOXES`).
    fn pair_apart(&mut self, op: Op, mine: &[SharedAccess], copy: Op) -> bool {
        let theirs = self.copy_accesses(copy);
        let use_boxes = !(self.memo.no_boxes || no_boxes_env());
        let boxes = &mut self.boxes;
        let (tb, mb) = if use_boxes {
            (boxes.of_op(copy, true, &theirs), boxes.of_op(op, false, mine))
        } else {
            (Arc::from([]), Arc::from([]))
        };
        self.sides_apart((&theirs, &tb), (mine, &mb), use_boxes)
    }

    /// [`Flow::pair_apart`]'s test on the two sides' accesses and boxes (`use_boxes` off:
    /// the boxes are empty and not read).
    fn sides_apart(&self, copy: Sides<'_>, consumer: Sides<'_>, use_boxes: bool) -> bool {
        let ((theirs, tb), (mine, mb)) = (copy, consumer);
        theirs.iter().enumerate().all(|(i, ta)| {
            mine.iter().enumerate().all(|(j, ma)| {
                !(ta.kind.writes() || ma.kind.writes())
                    || self.overlap.buffers_apart(ta, ma)
                    || (use_boxes
                        && self.k.root_buffer(ta.mem) == self.k.root_buffer(ma.mem)
                        && crate::analysis::boxes::disjoint(&tb[i], &mb[j]))
            })
        })
    }

    /// The async accesses of a copy (memoized).
    fn copy_accesses(&mut self, copy: Op) -> Arc<[SharedAccess]> {
        let k = self.k;
        self.memo
            .copies
            .entry(copy)
            .or_insert_with(|| async_accesses(k, copy).into())
            .clone()
    }

    /// Whether an access of the consumer `op` and one of the copy's may overlap under the
    /// copy's tags, one of them writing.
    fn may_conflict(&mut self, e: EntryId, op: Op) -> bool {
        let copy = self.memo.entries.op(e);
        let theirs = self.copy_accesses(copy);
        let mine = self
            .memo
            .consumers
            .get(&op)
            .map(|c| c.mine.clone())
            .unwrap_or_else(|| Arc::from([]));
        let tags = self.memo.entries.tags(e);
        let mut h = false;
        for ta in theirs.iter() {
            for ma in mine.iter() {
                if (ta.kind.writes() || ma.kind.writes())
                    && self.overlap.may_overlap(copy, ta, op, ma, tags)
                {
                    h = true;
                }
            }
        }
        if trace_questions() {
            eprintln!(
                "in-flight question {} vs {} {:?}: {h}",
                crate::emit::text::op_label(self.k, op),
                crate::emit::text::op_label(self.k, copy),
                self.memo.entries.tags(e)
            );
        }
        h
    }
}

/// Which generalization of an in-flight entry [`Flow::generalized`] builds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum Widening {
    /// Also any earlier iteration of the loops enclosing both the copy and the consumer.
    Earlier,
    /// Every tag but the distances on the loops enclosing both.
    Widest,
    /// As [`Widening::Widest`], keeping the outermost loop of each side below the common
    /// ones.
    KeepOuter,
}

/// Whether `SMEMSYNC_INFLIGHT_TRACE` is set: every overlap question the planner asks is then
/// printed with its tags and answer (read once per process).
fn trace_questions() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_INFLIGHT_TRACE").is_some())
}

/// Whether `SMEMSYNC_INFLIGHT_STATS` is set: each solver run prints its [`FlowStats`].
fn stats_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_INFLIGHT_STATS").is_some())
}

/// Whether `SMEMSYNC_INFLIGHT_ITERATE` is set: every loop is iterated (for measuring the
/// closed form against the iteration).
fn closed_form_off() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_INFLIGHT_ITERATE").is_some())
}

/// Whether `SMEMSYNC_INFLIGHT_FULL_TRIPS` is set: short constant-trip loops are iterated
/// until their tags saturate, not stopped at their trip count (for measuring the cut).
fn full_trips_env() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_INFLIGHT_FULL_TRIPS").is_some())
}

/// Whether `SMEMSYNC_INFLIGHT_KEEP_TAGS` is set: entries a loop in closed form cannot meet
/// keep their `Pre` tags on it (for measuring the collapse, `Flow::split_quiet`).
fn keep_tags_env() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_INFLIGHT_KEEP_TAGS").is_some())
}

/// Whether `SMEMSYNC_INFLIGHT_NO_BOXES` is set: footprint boxes decide no pair apart (for
/// measuring them, `Flow::apart`).
/// The positions set in a near set (a bitset over [`FlowMemo::asyncs`]), increasing.
fn near_positions(set: &[u64]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, &w) in set.iter().enumerate() {
        let mut w = w;
        while w != 0 {
            out.push(i * 64 + w.trailing_zeros() as usize);
            w &= w - 1;
        }
    }
    out
}

fn no_index_env() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_INFLIGHT_NO_INDEX").is_some())
}

fn no_boxes_env() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_INFLIGHT_NO_BOXES").is_some())
}

/// Drops from `x` the entries that stand for no execution at the head of loop `l`, a `for`
/// of `t ≤ TAG_CAP` iterations: a tag on `l` of `Dist(d ≥ t)`, `Pre(j ≥ t)`,
/// `PreLast(j ≥ t, _)` or `Unknown` (only ever a saturated distance or iteration, `≥ TAG_CAP`).
/// Every iteration `i < t` sees distances and iteration numbers at most `i`.
fn cut_beyond(table: &Entries, l: Op, t: u32, x: &mut InFlight) {
    x.retain(|_, e, _| {
        table.tags(e).iter().rev().all(|(lp, g)| {
            *lp != l
                || match *g {
                    IterTag::Dist(d) | IterTag::Pre(d) | IterTag::PreLast(d, _) => d < t,
                    IterTag::Unknown => false,
                    IterTag::Last(_) => true,
                }
        })
    });
}

/// What the transfer function does with an op.
#[derive(Clone, Debug)]
enum OpClass {
    /// Issues an async op on a queue.
    Issue(Queue),
    /// A global load (ticks the target's vector-memory counter).
    GLoad,
    /// Commits a group on a queue.
    Commit(Queue),
    MbarWait,
    Wait(WaitKind),
    Other,
}

impl Flow<'_> {
    /// The pending wgmma executions whose asynchronous result `op` consumes (through moves:
    /// `analysis::regdeps`): every execution of a source wgmma still in flight, since the
    /// newest one decides the count and older ones of a chain complete with it. Also every
    /// pending execution of a wgmma that holds, as register A, a value `op` reads or
    /// redefines (docs/async.md, "Register A").
    fn register_conflicts(&mut self, op: Op, st: &InFlight) -> Vec<(Queue, EntryId, i32)> {
        let mut pending: Vec<(EntryId, i32)> = st.entries(Queue::Wgmma).collect();
        if pending.is_empty() {
            return Vec::new();
        }
        let mut srcs = std::collections::BTreeSet::new();
        for v in crate::analysis::regdeps::consumed(self.k, op) {
            srcs.extend(self.regs.wgmma_sources(v));
        }
        let table = &self.memo.entries;
        pending.sort_by(|a, b| table.cmp(a.0, b.0));
        pending
            .into_iter()
            .filter(|(e, _)| {
                let copy = table.op(*e);
                srcs.contains(&copy) || self.regs.touches_register_a(op, copy)
            })
            .map(|(e, a)| (Queue::Wgmma, e, a))
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

struct Recorder {
    c: Completions,
    /// Index in `c.hazards` of each (consumer, entry) recorded.
    seen: HashMap<(Op, EntryId), usize>,
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
        for (q, e, age) in flow.conflict_ids(op, st) {
            match self.seen.get(&(op, e)) {
                Some(&i) => {
                    let old = &mut self.c.hazards[i];
                    old.age = old.age.min(age);
                }
                None => {
                    self.seen.insert((op, e), self.c.hazards.len());
                    let p = flow.pending(e);
                    self.c.hazards.push(InflightHazard {
                        consumer: op,
                        copy: p.op,
                        queue: q,
                        tags: p.tags,
                        age,
                    });
                }
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
    flow.exact_exits = true;
    let mut rec = Recorder {
        c: Completions::default(),
        seen: HashMap::default(),
    };
    let exit = join_all(&flow.run(&mut rec));
    let out: BTreeSet<Op> = exit.iter().map(|(_, e, _)| flow.entries().op(e)).collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn answer(code: u8, n: u32) -> Answer {
        match code % 4 {
            0 => Answer::Unasked,
            1 => Answer::No,
            2 => Answer::Yes,
            _ => Answer::Noted(n),
        }
    }

    proptest! {
        /// The packed table reads back what a plain vector of answers holds, after any
        /// sequence of writes (overwrites included), at every id up to past its end.
        #[test]
        fn packed_answers_equal_a_plain_vector(
            writes in proptest::collection::vec((0u32..300, 0u8..4, 0u32..1000), 0..200)
        ) {
            let mut packed = Answers::default();
            let mut plain: Vec<Answer> = Vec::new();
            for (e, code, n) in writes {
                let a = answer(code, n);
                packed.set(EntryId::from_index(e as usize), a);
                if plain.len() <= e as usize {
                    plain.resize(e as usize + 1, Answer::Unasked);
                }
                plain[e as usize] = a;
            }
            for e in 0..400usize {
                let want = plain.get(e).copied().unwrap_or(Answer::Unasked);
                prop_assert_eq!(packed.get(EntryId::from_index(e)), want);
            }
        }
    }
}
