//! The static proof's model of async copies (docs/checker.md, "Async copies in the static
//! proof"): which loops the proof enumerates, and, for every per-thread `cp_async` and
//! `gather_to_lds`, the accesses that may meet its write while it is in flight.
//!
//! What it computes: for each copy `c`, a forward walk over the region tree from `c`'s issue
//! (including loop back edges) that tracks, per *tag* (the iteration relation to `c`), the
//! copy's *status*: its age in its completion queue (`-1` while its cp.async group is open,
//! else the number of younger committed groups, or younger operations on its AMD counter),
//! or *waited* once a wait that completes it by the counter arithmetic (`age >= N`) has run.
//! A barrier ends a waited copy (every later access of any thread is ordered after it) and
//! leaves a pending one in flight. Each access reached is recorded with the tag and whether
//! the copy was still pending (then even the issuing thread's own access collides) or only
//! waited (then only other threads' accesses do); [`async_pairs`] tests each record with the
//! instances and index forms of `super::proof`.
//!
//! Invariants (why it is sound): paths are joined by the minimum age per tag (a younger copy
//! is completed by fewer waits), both arms of every `if` are walked, a loop's body is iterated
//! to a fixpoint (entries are only added and ages only decrease, so it terminates), constant
//! loops with sync ops and at most [`UNROLL`] trips are walked iteration by iteration, loops
//! without sync ops change no status (their copies could only age others, which is ignored),
//! and tags saturate at [`DIST_CAP`] to `Far` (no relation: independent unknowns). A copy
//! that may still be pending at kernel exit declines the proof.
//!
//! Complexity: per copy and per assignment of the unrolled loops around it, O(ops x passes)
//! for the walk (passes bounded by the tags and ages, a few in practice), plus the pair tests
//! per record: O(instances) per iteration residue.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::proof::{
    Access, Inst, IvFn, LoopRelation, Meet, PairCx, affine_exact, bound_range, collide,
    collide_related, conflicting, eval_iv, iv_fn, op_at, value_range, wrap_modulus,
};
use crate::ir::arith::gcd;
use crate::ir::effects::is_sync;
use crate::ir::*;
use crate::target::Target;

/// Most iterations of a constant loop with sync ops that the walk unrolls.
const UNROLL: i64 = 16;
/// Most iterations of a barrier-free constant loop whose induction variable is enumerated.
const ENUM_TRIP: i64 = 64;
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
        let mut out: Vec<Vec<(Value, i64)>> = vec![Vec::new()];
        for l in parents.ancestors(op) {
            if let Some((iv, vals)) = self.loops.get(&l) {
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
        }
        out
    }
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
    k.regions[r]
        .ops
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
        let iv = k.regions[body].args[0];
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

/// Whether the static proof models this async access (per-thread `cp_async` and
/// `gather_to_lds`).
pub(super) fn modelled(a: &SharedAccess) -> bool {
    matches!(a.footprint, Footprint::PerThread(_))
        && matches!(
            a.kind,
            AccessKind::AsyncWrite(AsyncClass::CpAsync | AsyncClass::GatherToLds)
        )
}

pub(super) fn has_async(k: &Kernel) -> bool {
    k.ops_in_order()
        .into_iter()
        .any(|o| effects(k, o).shared.iter().any(|a| a.kind.is_async()))
}

/// The completion queue of a copy.
#[derive(Copy, Clone, PartialEq, Debug)]
enum Queue {
    /// cp.async groups: `cp_async_commit` closes one, `cp_async_wait N`.
    CpAsyncGroups,
    /// An AMD counter: every copy (and plain global load) counted by it ages older ones,
    /// `waitcnt c(N)`.
    Counter(Counter),
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
        _ => None,
    }
}

/// How a reached access relates to the copy's iteration of the relation loop `L`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Tag {
    /// The copy is in no loop the walk iterates, and `L` has not been entered.
    Free,
    /// `d` iterations of `L` after the copy's (the copy is in `L`).
    Dist(u8),
    /// In iteration `j` of `L`, entered after the copy (outside `L`) was issued.
    At(u8),
    /// No relation.
    Far,
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

struct Walk<'a> {
    k: &'a Kernel,
    parents: &'a Parents,
    target: Option<Target>,
    queue: Queue,
    /// The relation loop.
    l: Option<Op>,
    env: Vec<(Value, i64)>,
    records: HashSet<Record>,
}

impl Walk<'_> {
    /// Whether the walk unrolls loop `op`: constant bounds, at most [`UNROLL`] trips, and
    /// a sync op inside.
    fn unrolled(&self, op: Op) -> Option<Vec<i64>> {
        let vals = const_trips(self.k, op)?;
        let k = self.k;
        let body = k.ops[op].regions[0];
        (vals.len() as i64 <= UNROLL && contains(k, body, &|o| is_sync(k, o))).then_some(vals)
    }

    /// A constant loop without sync ops: it changes no status.
    fn plain(&self, op: Op) -> bool {
        let k = self.k;
        const_trips(k, op).is_some() && !contains(k, k.ops[op].regions[0], &|o| is_sync(k, o))
    }

    fn back(&self, l: Op, s: &State) -> State {
        if Some(l) != self.l {
            return s.clone();
        }
        let mut out = State::new();
        for (t, a) in s {
            let t2 = match *t {
                Tag::Dist(d) if d < DIST_CAP => Tag::Dist(d + 1),
                Tag::At(j) if j < DIST_CAP => Tag::At(j + 1),
                Tag::Free => Tag::Free,
                _ => Tag::Far,
            };
            out = join(out, &State::from([(t2, *a)]));
        }
        out
    }

    fn far(s: &State) -> State {
        s.values()
            .fold(State::new(), |o, a| join(o, &State::from([(Tag::Far, *a)])))
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
        if Some(l) == self.l {
            Self::far(&head)
        } else {
            head
        }
    }

    fn transfer(&mut self, op: Op, mut s: State) -> State {
        let k = self.k;
        let e = effects(k, op);
        if !e.shared.is_empty() {
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
            let issues = queue_of(k, op, self.target) == Some(self.queue);
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
            (Some(SyncEffect::Commit(AsyncClass::CpAsync)), Queue::CpAsyncGroups) => {
                for a in s.values_mut() {
                    if *a != WAITED {
                        *a = if *a < 0 { 0 } else { a.saturating_add(1) };
                    }
                }
            }
            (Some(SyncEffect::Wait(WaitKind::CpAsyncGroups(n))), Queue::CpAsyncGroups) => {
                complete(&mut s, *n)
            }
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

    /// Walks the ops of region `r` from position `from`.
    fn seq(&mut self, r: Region, from: usize, mut s: State) -> State {
        let k = self.k;
        let ops = k.regions[r].ops.clone();
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
        let body = self.k.ops[op].regions[0];
        if let Some(vals) = self.unrolled(op) {
            let iv = self.k.regions[body].args[0];
            let mut s = s;
            for x in vals {
                self.env.push((iv, x));
                s = self.seq(body, 0, s);
                self.env.pop();
            }
            return s;
        }
        if self.plain(op) {
            let out = self.seq(body, 0, s.clone());
            return join(s, &out);
        }
        let mut head = s;
        if self.l.is_none() {
            self.l = Some(op);
            head = head
                .into_iter()
                .map(|(t, a)| (if t == Tag::Free { Tag::At(0) } else { t }, a))
                .collect();
        }
        self.fixpoint(op, head)
    }

    /// Walks from the copy `c` to the end of the kernel; returns the state at exit.
    fn walk_copy(&mut self, c: Op, start: i32) -> State {
        let k = self.k;
        let mut s = State::from([(
            if self.l.is_some() {
                Tag::Dist(0)
            } else {
                Tag::Free
            },
            start,
        )]);
        let mut cur = c;
        // The copy's own record (its instances against each other).
        s = self.transfer_issue(c, s);
        while let Some(r) = self.parents.op_region[cur] {
            let pos = k.regions[r].ops.iter().position(|o| *o == cur).unwrap_or(0);
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
            let iv = self.k.regions[body].args[0];
            let Some(i) = self.env.iter().rposition(|(v, _)| *v == iv) else {
                return s;
            };
            let cur = self.env[i].1;
            self.env.remove(i);
            let mut s = s;
            for x in vals.into_iter().filter(|x| *x > cur) {
                self.env.push((iv, x));
                s = self.seq(body, 0, s);
                self.env.pop();
            }
            return s;
        }
        if self.plain(p) {
            let out = self.seq(body, 0, s.clone());
            return join(s, &out);
        }
        let head = self.back(p, &s);
        let exit = self.fixpoint(p, head);
        if Some(p) == self.l {
            join(exit, &Self::far(&s))
        } else {
            join(exit, &s)
        }
    }
}

fn complete(s: &mut State, n: u32) {
    for a in s.values_mut() {
        if *a != WAITED && *a >= n as i32 {
            *a = WAITED;
        }
    }
}

/// Follows every modelled copy to the waits and barriers that order it and tests each
/// access it meets in flight. `Ok` carries a phrase for the proof's summary.
pub(super) fn async_pairs(
    cx: &PairCx,
    target: Option<Target>,
    by_buf: &HashMap<Buffer, Vec<usize>>,
) -> Result<String, String> {
    let k = cx.k;
    let mut copies = 0usize;
    let mut met = 0usize;
    for (ci, c) in cx.accs.iter().enumerate() {
        if !c.kind.is_async() {
            continue;
        }
        let Some(queue) = queue_of(k, c.op, target) else {
            return Err(format!("{} is not modelled", op_at(k, c.op)));
        };
        copies += 1;
        let ancestors = cx.parents.ancestors(c.op);
        let probe = Walk {
            k,
            parents: cx.parents,
            target,
            queue,
            l: None,
            env: Vec::new(),
            records: HashSet::new(),
        };
        // The relation loop: the innermost loop around the copy the walk iterates.
        let l = ancestors.iter().copied().find(|o| match k.ops[*o].kind {
            OpKind::For { .. } => probe.unrolled(*o).is_none() && !probe.plain(*o),
            OpKind::While { .. } => true,
            _ => false,
        });
        // One walk per assignment of the unrolled loops around the copy.
        let mut envs: Vec<Vec<(Value, i64)>> = vec![Vec::new()];
        for a in ancestors.iter().rev() {
            if let Some(vals) = probe.unrolled(*a) {
                let iv = k.regions[k.ops[*a].regions[0]].args[0];
                envs = envs
                    .iter()
                    .flat_map(|e| {
                        vals.iter().map(move |x| {
                            let mut e = e.clone();
                            e.push((iv, *x));
                            e
                        })
                    })
                    .collect();
            }
        }
        let start = if queue == Queue::CpAsyncGroups { -1 } else { 0 };
        // An instance (thread, enumerated iterations) names one execution of the copy within
        // one iteration of its relation loop only when every loop between them is
        // enumerated or unrolled.
        let exact = ancestors.iter().take_while(|o| Some(**o) != l).all(|o| {
            !matches!(k.ops[*o].kind, OpKind::For { .. })
                || cx.en.ivs.contains(&k.regions[k.ops[*o].regions[0]].args[0])
                || probe.unrolled(*o).is_some()
        });
        for env in envs {
            let mut w = Walk {
                l,
                env: env.clone(),
                records: HashSet::new(),
                ..probe_clone(&probe)
            };
            let exit = w.walk_copy(c.op, start);
            if exit.values().any(|a| *a != WAITED) {
                return Err(format!(
                    "{} may still be in flight at kernel exit (no wait completes it on every path)",
                    op_at(k, c.op)
                ));
            }
            // The relation loop may have been entered by the walk (a copy outside it).
            let l = w.l;
            let mut recs: Vec<Record> = w.records.into_iter().collect();
            recs.sort();
            for rec in &recs {
                met += check_record(cx, &Pair { ci, env: &env, l, exact }, rec, by_buf)?;
            }
        }
    }
    if copies == 0 {
        return Ok(String::new());
    }
    Ok(format!(
        "; {copies} async copies followed to the waits and barriers that complete them ({met} accesses met in flight)"
    ))
}

fn probe_clone<'a>(w: &Walk<'a>) -> Walk<'a> {
    Walk {
        k: w.k,
        parents: w.parents,
        target: w.target,
        queue: w.queue,
        l: w.l,
        env: Vec::new(),
        records: HashSet::new(),
    }
}

/// One copy (index in `cx.accs`), the unrolled loops' values at its issue, and its
/// relation loop.
struct Pair<'a> {
    ci: usize,
    env: &'a [(Value, i64)],
    l: Option<Op>,
    /// Instances identify executions within one iteration of `l` (see `async_pairs`).
    exact: bool,
}

/// The instances of access `i` at the values `env` of the unrolled loops.
fn restricted(cx: &PairCx, i: usize, env: &[(Value, i64)]) -> Vec<Inst> {
    let combos = cx_combos(cx, i);
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
}

fn cx_combos(cx: &PairCx, i: usize) -> Vec<Vec<(Value, i64)>> {
    cx.en.combos(cx.parents, cx.accs[i].op)
}

/// Tests one record against every access of its op on the copy's buffer; returns how many
/// were tested.
fn check_record(
    cx: &PairCx,
    p: &Pair,
    rec: &Record,
    by_buf: &HashMap<Buffer, Vec<usize>>,
) -> Result<usize, String> {
    let k = cx.k;
    let c = &cx.accs[p.ci];
    let (x_op, env, tag, pending) = (rec.0, &rec.1, rec.2, rec.3);
    let mut n = 0;
    for &xi in by_buf.get(&c.buf).into_iter().flatten() {
        let x = &cx.accs[xi];
        if x.op != x_op || !conflicting(c, x) {
            continue;
        }
        n += 1;
        if x.collective.is_some() {
            return Err(format!(
                "{} may meet the in-flight copy {} (a collective access)",
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
                && matches!(tag, Tag::Free | Tag::Dist(0)),
        };
        if let Some((t1, t2)) = related_collide(cx, p.l, tag, c, x, &vc, &vx, rule) {
            let state = if pending {
                "before a wait completes it"
            } else {
                "after the wait that completes it but before a barrier"
            };
            return Err(format!(
                "{} (thread {t1}) may write an element that {} (thread {t2}) accesses {state}",
                op_at(k, c.op),
                op_at(k, x.op)
            ));
        }
    }
    Ok(n)
}

/// The collision test under a tag's iteration relation.
#[allow(clippy::too_many_arguments)]
fn related_collide(
    cx: &PairCx,
    l: Option<Op>,
    tag: Tag,
    c: &Access,
    x: &Access,
    vc: &[Inst],
    vx: &[Inst],
    rule: Meet,
) -> Option<(u32, u32)> {
    let k = cx.k;
    let lp = l.and_then(|l| match &k.ops[l].kind {
        OpKind::For { lo, hi, step, .. } => Some((l, lo, hi, step)),
        _ => None,
    });
    if let Some((l, lo, hi, step)) = lp
        && let Some(step) = constant(k, step)
    {
        let iv = k.regions[k.ops[l].regions[0]].args[0];
        let (lo_r, hi_r) = (
            value_range(k, cx.ranges, lo).0,
            value_range(k, cx.ranges, hi).1,
        );
        let iv_range = (lo_r, (hi_r - 1).max(lo_r));
        match tag {
            Tag::Dist(d) => {
                let rel = LoopRelation {
                    iv,
                    iv_range,
                    step,
                    distances: vec![d as i64],
                };
                return collide_related(k, &rel, c, x, vc, vx, rule);
            }
            Tag::At(j) => {
                if let Some(lo) = constant(k, lo) {
                    let at = lo + j as i64 * step;
                    return collide_at(k, (iv, iv_range, at), c, x, vc, vx, rule);
                }
            }
            _ => {}
        }
    }
    let g = c
        .form
        .free
        .iter()
        .chain(&x.form.free)
        .fold(0i64, |g, (_, v)| gcd(g, v.wrapping_abs()));
    collide(vc, vx, wrap_modulus(g, c, x), rule)
}

/// The collision test when `x` runs in the iteration of loop `iv` where it equals `at` and
/// `c` is outside that loop: `x`'s free terms that are functions of `iv` become constants.
fn collide_at(
    k: &Kernel,
    (iv, range, at): (Value, (i128, i128), i64),
    c: &Access,
    x: &Access,
    vc: &[Inst],
    vx: &[Inst],
    rule: Meet,
) -> Option<(u32, u32)> {
    let mut g = c
        .form
        .free
        .iter()
        .fold(0i64, |g, (_, v)| gcd(g, v.wrapping_abs()));
    let mut cx_off = 0i64;
    for (v, coef) in &x.form.free {
        let known = match iv_fn(k, *v, iv, range, 0) {
            Some(IvFn::Const(y)) => Some(y),
            Some(IvFn::Affine(m, q)) if affine_exact(m, q, range) => Some(m * at + q),
            Some(IvFn::Periodic(_)) => eval_iv(k, *v, iv, at),
            _ => None,
        };
        match known {
            Some(y) => cx_off = cx_off.wrapping_add(coef.wrapping_mul(y)),
            None => g = gcd(g, coef.wrapping_abs()),
        }
    }
    let g = wrap_modulus(g, c, x);
    let shifted: Vec<Inst> = vx
        .iter()
        .map(|i| Inst {
            x: i.x.wrapping_add(cx_off),
            ..*i
        })
        .collect();
    collide(vc, &shifted, g, rule)
}
