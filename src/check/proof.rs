//! Static mode: proves race freedom per barrier interval, for every schedule, every loop trip
//! count and every scalar parameter value, at the kernel's block size.
//!
//! What it computes: `Ok(reason)` when no two threads can touch one shared element in one
//! barrier interval with at least one write (same-kind atomics excepted); `Err(why)` when
//! the argument does not apply (the caller then interprets with concrete bounds and says so).
//! An `Err` is *not* a race: the argument is incomplete by design.
//!
//! The argument (in the spirit of GPUVerify's two-thread reduction and Faial's barrier
//! intervals, done by enumeration over the concrete block):
//! 1. Preconditions: async accesses only per-thread `cp_async`/`gather_to_lds` (followed
//!    to their completing waits by `check/proof_async.rs`), pinned buffers do not overlap, and no barrier sits
//!    under thread-dependent control (so every thread executes the same sequence of barriers,
//!    and consecutive barrier executions delimit *intervals*). With a target, `warp_sync`
//!    orders the threads of one warp (`check/proof_warp.rs`: pairs in no common warp interval
//!    are tested for threads of different warps only). Other sync ops are ignored
//!    for ordering (dropping ordering only adds pairs), but each must be one whose deadlock
//!    freedom and protocol `proof_syncs` establishes, else the proof declines. Collective accesses conflict with everything on
//!    their buffer in an interval, except collectives sharing layout and shape on slot views.
//! 2. Interval starts: a forward dataflow over the region tree computes, for each access, the
//!    set of static starts (kernel entry or a barrier) from which it is reachable without
//!    crossing a barrier that executes on every path. Loops iterate to a fixpoint, so a
//!    loop's tail (after its last barrier) reaches the head of the next iteration, which
//!    covers loop-carried pairs (iterations i and i+1; i+d for d >= 2 is separated by the
//!    body's barrier). Two accesses can be in one interval only if their start sets meet.
//! 3. Addresses: each access's linear element index in its buffer is put in the form
//!    `T(tid) + c + sum(a_j * u_j)`, where `T` is any function of thread ids and constants
//!    (evaluated for every thread of the block), and the `u_j` are uniform values (loop
//!    induction variables, parameters, block ids, anything computed from them) treated as
//!    *unknown integers*, each independently per access. The i32 linear structure (`+`, `-`,
//!    negation, multiplication or `shl` by constants) is followed to its leaves and equal
//!    leaves are summed, so thread parts that cancel vanish; an op whose operands all have
//!    thread-free forms (`rem((t + i) - t, 2)`) is one unknown. Values that mix thread ids and
//!    uniform unknowns otherwise are outside the form.
//! 4. For each pair of accesses in one interval (one writing, not same-kind atomics), with
//!    `g = gcd(all a_j)`: the pair may collide only if `T_A(t1) + c_A = T_B(t2) + c_B (mod g)`
//!    for some threads `t1 != t2` (equality when `g = 0`). This is decided exactly by bucketing
//!    the `T` values of all threads by residue: O(threads) per pair, O(1) for a pair whose
//!    instance vectors, up to one constant, were tested before (`check/proof_pairs.rs`, which
//!    also pairs only accesses that share an interval start). Threads excluded by an
//!    enclosing `if` on a thread-evaluable condition do not take part.
//! 5. A pair that fails 4 inside a `for` with barriers in its body, not nested or entered
//!    only from intervals that start outside it, is retried at its iteration distance (0 in
//!    one segment, 1 from the last segment to the first), with induction-variable-periodic
//!    unknowns evaluated over one period, and values fixed during one execution of the loop
//!    common to both sides (`check/proof_nest.rs`: nested loops' `rem(i1 + i2, 2)` at the
//!    inner loop's distance).
//!
//! Soundness: the unknowns over-approximate every iteration and parameter value, the thread
//! sets over-approximate who executes an access (conditions are ignored), and start sets
//! over-approximate which accesses share an interval. That no execution error (an
//! out-of-range index, a zero divisor, an uninitialized read) stops the execution first is
//! `check/proof_exec.rs`'s part, run after this one; it covers the block size it was run
//! for only.
//! Small constant loops without barriers are enumerated like thread ids (an access has one
//! instance per thread and iteration), and accesses are paired per buffer.
//!
//! Complexity: O(ops) for the dataflow (times loop nesting for the fixpoints), plus
//! O(sum over interval starts of (accesses of one buffer reaching it)^2) candidate pairs, each
//! O(1) after its two instance shapes met at its shift once and O(instances) that once
//! (`check/proof_pairs.rs`), plus the walks of `check/proof_async.rs`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use super::interp::{Val, binary};
use super::proof_async::Enumerated;
pub(super) use super::proof_pairs::collide;
use super::proof_pairs::{PairMemo, ShiftedProbe, collides, form_key, interval_candidates};
use super::proof_tiles::ANY;
use super::uniform::{self, Loads};
use crate::ir::arith::{gcd, lcm};
use crate::ir::induction::Inductions;
use crate::ir::text::op_label;
use crate::ir::ranges::Ranges;
use crate::ir::*;
use crate::target::Target;

/// Tries to prove the kernel race-free at its block size.
pub fn prove(k: &Kernel, target: Option<Target>) -> Result<String, String> {
    prove_with(k, target, true)
}

/// [`prove`] testing every pair of accesses of a buffer from scratch, without the memos of
/// `check/proof_pairs.rs`: O(accesses^2 x instances) per buffer. The oracle
/// tests/check_proof_pairs.rs compares [`prove`] with; its answers are equal.
pub fn prove_pairwise(k: &Kernel, target: Option<Target>) -> Result<String, String> {
    prove_with(k, target, false)
}

/// [`prove`], with the pair memos of `check/proof_pairs.rs` (`memos`), or testing every
/// pair from scratch.
fn prove_with(k: &Kernel, target: Option<Target>, memos: bool) -> Result<String, String> {
    let warp = target.map_or(32, |t| t.warp as i64);
    preconditions(k)?;
    let td = uniform::thread_dependent(k, Loads::ThreadDependent);
    let ranges = Ranges::new(k);
    barriers_uniform(k, &td)?;
    let roles = super::elected_pipeline::plan(k, &td);
    let wu = &mut |c, group| warp_uniform(k, warp, group, c);
    super::proof_syncs::syncs_reasoned(k, &td, &roles, warp as u32, wu)?;
    let roles = roles.ok().flatten();
    let starts = interval_starts(k);
    let parents = k.parents();
    let en = super::proof_async::enumerated(k, parents);
    let slots = roles.as_ref().map(|r| &r.slots);
    let mut accs = accesses(k, &td, &ranges, &en, warp as u32, slots)?;
    alias_classes_apart_from_slots(k, &mut accs, slots)?;
    let memo = PairMemo::new(&accs, memos);
    let values = access_instances(k, warp, &en, &accs, &memo)?;
    // Pairs per alias class: accesses to buffers that share no byte never meet.
    let mut by_buf: HashMap<Buffer, Vec<usize>> = HashMap::new();
    for (i, a) in accs.iter().enumerate() {
        by_buf.entry(a.class).or_default().push(i);
    }
    let cx = PairCx {
        k,
        warp,
        parents,
        accs: &accs,
        values: &values,
        en: &en,
        ranges: &ranges,
        loop_entry: &starts.1,
        memo: &memo,
        td: &td,
    };
    let (pairs, in_warp) = interval_pairs(&cx, target, &by_buf, &starts.0, memos)?;
    let mut walked = super::proof_async::async_pairs(&cx, target, &by_buf, roles.as_ref())?;
    if let Some(r) = &roles {
        walked += &r.summary();
    }
    let in_warp = if in_warp > 0 {
        format!(" ({in_warp} of them in no common warp interval: ordered within each warp by warp_sync)")
    } else {
        String::new()
    };
    Ok(format!(
        "{} shared accesses, {pairs} pairs sharing a barrier interval{in_warp} (loop-carried pairs at their iteration distance){walked}, all thread-disjoint for every iteration and parameter value (block of {} threads)",
        accs.len(),
        k.threads()
    ))
}

/// Puts each access in its alias class, and checks that the TMA slot buffers (whose
/// accesses [`accesses`] left out, the roles' handshakes ordering them) share their bytes
/// with no other buffer and with each other.
fn alias_classes_apart_from_slots(
    k: &Kernel,
    accs: &mut [Access],
    slots: Option<&HashSet<Buffer>>,
) -> Result<(), String> {
    let class = alias_classes(k);
    for a in accs.iter_mut() {
        a.class = class.get(&a.buf).copied().unwrap_or(a.buf);
    }
    let slot_classes: HashSet<Buffer> = (slots.into_iter().flatten())
        .map(|b| class.get(b).copied().unwrap_or(*b))
        .collect();
    if slot_classes.len() < slots.map_or(0, |s| s.len()) {
        return Err("two TMA slot buffers share bytes".into());
    }
    if let Some(a) = accs.iter().find(|a| slot_classes.contains(&a.class)) {
        return Err(format!(
            "{} touches bytes a TMA slot buffer shares with another buffer",
            op_at(k, a.op)
        ));
    }
    Ok(())
}

/// The instances of each access, shared through `memo` between accesses of one form.
fn access_instances(
    k: &Kernel,
    warp: i64,
    en: &Enumerated,
    accs: &[Access],
    memo: &PairMemo,
) -> Result<Vec<Rc<Vec<Inst>>>, String> {
    let parents = k.parents();
    let mut eval = Evaluator {
        k,
        warp,
        memo: rustc_hash::FxHashMap::default(),
        dep: &en.dep,
    };
    let mut values: Vec<Rc<Vec<Inst>>> = Vec::with_capacity(accs.len());
    for a in accs {
        let key = form_key(a, guards(k, parents, a.op), en.combos(parents, a.op));
        let make = |c| instances(k, parents, en, &mut eval, (a, c));
        values.push(memo.instances(key, a.form.c, make)?);
    }
    Ok(values)
}

/// Tests every pair of accesses of one alias class that may share a barrier interval
/// (`starts`: the interval starts reaching each op), except those a TMA issue orders;
/// returns the pairs tested and how many of them only across warps.
fn interval_pairs(
    cx: &PairCx,
    target: Option<Target>,
    by_buf: &HashMap<Buffer, Vec<usize>>,
    starts: &HashMap<Op, Starts>,
    memos: bool,
) -> Result<(usize, usize), String> {
    let accs = cx.accs;
    // Warp intervals (`check/proof_warp.rs`): a pair that no warp_sync-free stretch holds
    // needs only its threads of different warps checked, on warp-mapped instances. Those
    // vectors are not the accesses' own, so their tests run without the pair memos (which
    // key instance vectors by identity and access index).
    let warps = super::proof_warp::WarpOrder::new(cx.k, target, cx.values);
    let memo_w = PairMemo::new(accs, false);
    let cxw = warps.as_ref().map(|w| PairCx {
        values: &w.values,
        memo: &memo_w,
        ..cx.clone()
    });
    let (mut pairs, mut in_warp) = (0usize, 0usize);
    let mut bufs: Vec<&Vec<usize>> = by_buf.values().collect();
    bufs.sort();
    for group in bufs {
        let candidates = if memos {
            interval_candidates(group, accs, starts)
        } else {
            pairwise_candidates(group, accs, starts)
        };
        for (i, j) in candidates {
            if super::proof_async::after_tma_issue(cx, i, j) {
                continue;
            }
            pairs += 1;
            match (&warps, &cxw) {
                (Some(w), Some(cw)) if w.ordered_in_warp(&accs[i], &accs[j]) => {
                    in_warp += 1;
                    cw.interval_pair(i, j).map_err(|e| w.explain(e))?;
                }
                _ => cx.interval_pair(i, j)?,
            }
        }
    }
    Ok((pairs, in_warp))
}

/// [`interval_candidates`] by testing every pair of `group`: O(group^2).
fn pairwise_candidates(
    group: &[usize],
    accs: &[Access],
    starts: &HashMap<Op, Starts>,
) -> Vec<(usize, usize)> {
    let empty = BTreeSet::new();
    let mut out = Vec::new();
    for (gi, &i) in group.iter().enumerate() {
        for &j in &group[gi..] {
            let (a, b) = (&accs[i], &accs[j]);
            let sa = starts.get(&a.op).unwrap_or(&empty);
            let sb = starts.get(&b.op).unwrap_or(&empty);
            if conflicting(a, b) && !sa.is_disjoint(sb) {
                out.push((i, j));
            }
        }
    }
    out
}

/// Whether two accesses conflict when they meet: one writes, and they are not atomics of
/// one kind.
pub(super) fn conflicting(a: &Access, b: &Access) -> bool {
    if !(a.kind.writes() || b.kind.writes()) {
        return false;
    }
    !matches!((a.kind, b.kind), (AccessKind::Atomic(x), AccessKind::Atomic(y)) if x == y)
}

/// Every shared access of the kernel with its index form.
fn accesses(
    k: &Kernel,
    td: &HashSet<Value>,
    ranges: &Ranges,
    en: &Enumerated,
    warp: u32,
    ordered: Option<&HashSet<Buffer>>,
) -> Result<Vec<Access>, String> {
    let mut accs: Vec<Access> = Vec::new();
    for op in k.ops_in_order() {
        for sa in effects(k, op).shared {
            let buf = k.root_buffer(sa.mem);
            // The slot buffers of a two-role pipeline: their handshakes order every pair.
            if ordered.is_some_and(|o| o.contains(&buf)) {
                continue;
            }
            let mut ix = Indexing {
                k,
                td,
                en,
                ranges,
                exact: true,
            };
            let index = match &sa.footprint {
                Footprint::PerThread(index) => index,
                Footprint::Collective { layout } => {
                    let tile = match memref_form(&mut ix, sa.mem) {
                        Some((f, shape, st)) if f.tpart.is_empty() => {
                            super::proof_tiles::tile_footprint(k, op, &sa, (&shape, &st), warp)?
                                .map(|t| (f, t))
                        }
                        _ if sa.kind.is_async() => {
                            return Err(format!(
                                "the view of {} is not of the form c + sum(a * uniform)",
                                op_at(k, op)
                            ));
                        }
                        _ => None,
                    };
                    let (form, tile, collective) = match tile {
                        Some((f, t)) => (f, Some(t), None),
                        None => (
                            Form::default(),
                            None,
                            Some((layout.clone(), k.shape(sa.mem), slot_view(k, sa.mem))),
                        ),
                    };
                    accs.push(Access {
                        op,
                        buf,
                        class: buf,
                        kind: sa.kind,
                        form,
                        exact: ix.exact,
                        collective,
                        tile,
                    });
                    continue;
                }
            };
            let f = address(&mut ix, sa.mem, index).ok_or_else(|| {
                format!(
                    "the index of {} is not of the form T(tid) + sum(a * uniform)",
                    op_at(k, op)
                )
            })?;
            accs.push(Access {
                op,
                buf,
                class: buf,
                kind: sa.kind,
                form: f,
                exact: ix.exact,
                collective: None,
                tile: None,
            });
        }
    }
    Ok(accs)
}

/// Buffers whose pinned byte ranges overlap, transitively, mapped to one representative
/// (buffers in no overlap are absent: their own class).
fn alias_classes(k: &Kernel) -> HashMap<Buffer, Buffer> {
    let pinned: Vec<(Buffer, u64, u64)> = k
        .buffers
        .iter()
        .filter_map(|(b, d)| d.offset.map(|o| (b, o, o + d.bytes())))
        .collect();
    let mut rep: HashMap<Buffer, Buffer> = HashMap::new();
    fn find(rep: &HashMap<Buffer, Buffer>, mut b: Buffer) -> Buffer {
        while let Some(&r) = rep.get(&b) {
            if r == b {
                break;
            }
            b = r;
        }
        b
    }
    for (i, a) in pinned.iter().enumerate() {
        for b in &pinned[i + 1..] {
            if a.1 < b.2 && b.1 < a.2 {
                let (ra, rb) = (find(&rep, a.0), find(&rep, b.0));
                if ra != rb {
                    rep.insert(rb, ra);
                    rep.entry(ra).or_insert(ra);
                }
            }
        }
    }
    let keys: Vec<Buffer> = rep.keys().copied().collect();
    keys.into_iter().map(|b| (b, find(&rep, b))).collect()
}

/// One executing instance of a per-thread access: its thread, the index of the assignment
/// of the enumerated loops around it (`Enumerated::combos`), and its `T + c` value.
#[derive(Copy, Clone, Debug)]
pub(super) struct Inst {
    pub t: u32,
    pub combo: u32,
    pub x: i64,
}

/// The instances of a per-thread access with its form's constant taken as `c`: every thread
/// that may execute it (threads that an enclosing `if` on a thread-evaluable condition
/// excludes are left out) times every assignment of the enumerated loops around it.
fn instances(
    k: &Kernel,
    parents: &Parents,
    en: &Enumerated,
    eval: &mut Evaluator,
    (a, c): (&Access, i64),
) -> Result<Vec<Inst>, String> {
    if a.collective.is_some() {
        return Ok(Vec::new());
    }
    let n = k.threads() as i64;
    let (bx, by) = (k.block[0] as i64, k.block[1] as i64);
    let guards = guards(k, parents, a.op);
    let combos = en.combos(parents, a.op);
    if let Some(tile) = &a.tile {
        // A collective access: its footprint per thread, at the view's offset form.
        let runs: Vec<bool> = (0..n)
            .map(|t| {
                let xyz = [t % bx, (t / bx) % by, t / (bx * by)];
                guards
                    .iter()
                    .all(|(c, arm)| eval.eval(*c, t, xyz, &[]).is_none_or(|x| (x != 0) == *arm))
            })
            .collect();
        let mut v = Vec::with_capacity(tile.len() * combos.len());
        for ci in 0..combos.len() {
            v.extend(
                tile.iter()
                    .filter(|(t, _)| {
                        *t >= super::proof_tiles::ENGINE
                            || runs.get(*t as usize).copied().unwrap_or(false)
                    })
                    .map(|&(t, off)| Inst {
                        t,
                        combo: ci as u32,
                        x: c.wrapping_add(off),
                    }),
            );
        }
        return Ok(v);
    }
    let mut v = Vec::with_capacity(n as usize * combos.len());
    for t in 0..n {
        let xyz = [t % bx, (t / bx) % by, t / (bx * by)];
        let runs = guards
            .iter()
            .all(|(c, arm)| eval.eval(*c, t, xyz, &[]).is_none_or(|x| (x != 0) == *arm));
        if !runs {
            continue;
        }
        for (ci, env) in combos.iter().enumerate() {
            let mut s = c;
            for (coef, val) in &a.form.tpart {
                let x = eval
                    .eval(*val, t, xyz, env)
                    .ok_or_else(|| format!("cannot evaluate the index of {}", op_at(k, a.op)))?;
                s = s.wrapping_add(coef.wrapping_mul(x));
            }
            v.push(Inst {
                t: t as u32,
                combo: ci as u32,
                x: s,
            });
        }
    }
    Ok(v)
}

/// What the pair tests read: the kernel, its accesses and their instances.
#[derive(Clone)]
pub(super) struct PairCx<'a> {
    pub k: &'a Kernel,
    pub warp: i64,
    pub parents: &'a Parents,
    pub accs: &'a [Access],
    pub values: &'a [Rc<Vec<Inst>>],
    pub en: &'a Enumerated,
    pub ranges: &'a Ranges,
    /// The interval starts reaching each `for` loop's entry from outside it.
    pub loop_entry: &'a HashMap<Op, Starts>,
    /// The pair tests' memos (`check/proof_pairs.rs`).
    pub memo: &'a PairMemo,
    /// The thread-dependent values (`check/uniform.rs`), which index forms keep apart.
    pub td: &'a HashSet<Value>,
}

impl PairCx<'_> {
    /// Two accesses that may share a barrier interval: `Err` when two different threads may
    /// touch one element in it.
    fn interval_pair(&self, i: usize, j: usize) -> Result<(), String> {
        let (k, a, b) = (self.k, &self.accs[i], &self.accs[j]);
        if a.buf != b.buf {
            return Err(alias_met(k, a, b, "in one barrier interval"));
        }
        if a.collective.is_some() || b.collective.is_some() {
            return self.collective_pair(a, b);
        }
        let g = a
            .form
            .free
            .iter()
            .chain(&b.form.free)
            .fold(0i64, |g, (_, c)| gcd(g, c.wrapping_abs()));
        let g = wrap_modulus(g, a, b);
        let rule = Meet::OTHER_THREAD;
        let (va, vb) = (&self.values[i], &self.values[j]);
        if !collides(self.memo, va, vb, g, rule) {
            return Ok(());
        }
        // Retry with the iteration distance the barriers of the common loop allow; the
        // witness is named only for a pair that fails.
        let hit = match loop_relation(self, a, b) {
            Some(rel) => {
                let sides = Sides { a, b, va, vb };
                collide_related(k, self.ranges, &rel, sides, rule, self.memo)
            }
            None => collide(self.memo, va, vb, g, rule),
        };
        match hit {
            Some((t1, t2)) => Err(format!(
                "{} (thread {t1}) and {} (thread {t2}) may touch one element of @{} in one barrier interval",
                op_at(k, a.op),
                op_at(k, b.op),
                k.buffers[a.buf].name
            )),
            None => Ok(()),
        }
    }

    fn collective_pair(&self, a: &Access, b: &Access) -> Result<(), String> {
        let k = self.k;
        // Any executing thread may touch any element of a collective access, except
        // that two with one layout and one shape map each element to one thread.
        let same_op = a.op == b.op && a.collective.as_ref().is_some_and(|c| c.2);
        let same_mapping = same_op
            || match (&a.collective, &b.collective) {
                (Some((Some(la), sha, pa)), Some((Some(lb), shb, pb))) => {
                    sha == shb && *pa && *pb && same_owner(k, la, lb, sha, self.warp as u32)
                }
                _ => false,
            };
        if same_mapping {
            return Ok(());
        }
        Err(format!(
            "{} and {} may touch one element of @{} in one barrier interval (a collective access)",
            op_at(k, a.op),
            op_at(k, b.op),
            k.buffers[a.buf].name
        ))
    }
}

pub(super) struct Access {
    pub op: Op,
    pub buf: Buffer,
    /// The alias class of `buf` (pinned buffers sharing bytes); accesses of different
    /// classes never meet.
    pub class: Buffer,
    pub kind: AccessKind,
    pub form: Form,
    /// Whether every index provably equals its form (no i32 wrap-around); otherwise the
    /// address is known only modulo 2^32.
    pub exact: bool,
    /// A collective access with an opaque footprint: its layout, view shape, and whether
    /// the view only selects leading dimensions (no ranges), so that one memory element has
    /// one view index.
    pub collective: Option<(Option<String>, Vec<u64>, bool)>,
    /// A collective access with a known footprint (`check/proof_tiles.rs`): `(thread,
    /// offset)` pairs added to `form`.
    pub tile: Option<Vec<(u32, i64)>>,
}

/// Why two accesses to different buffers of one alias class decline the proof: their
/// elements share bytes under address maps the proof does not relate, so any two threads
/// may touch one byte (docs/ir.md, "Aliasing and W1004").
pub(super) fn alias_met(k: &Kernel, a: &Access, b: &Access, when: &str) -> String {
    format!(
        "{} and {} access @{} and @{}, which share bytes, {when}",
        op_at(k, a.op),
        op_at(k, b.op),
        k.buffers[a.buf].name,
        k.buffers[b.buf].name
    )
}

/// Whether a memref is a buffer or a chain of views that only index leading dimensions.
fn slot_view(k: &Kernel, m: MemRef) -> bool {
    match m {
        MemRef::Buffer(_) => true,
        MemRef::View(v) => {
            let vd = &k.views[v];
            vd.indices.iter().all(|i| matches!(i, ViewIndex::At(_))) && slot_view(k, vd.base)
        }
    }
}

/// `c + sum(coef * T(value)) + sum(coef * unknown)`.
#[derive(Clone, Debug, Default)]
pub(super) struct Form {
    pub c: i64,
    pub tpart: Vec<(i64, Value)>,
    pub free: Vec<(Value, i64)>,
}

impl Form {
    fn konst(c: i64) -> Form {
        Form {
            c,
            ..Form::default()
        }
    }
    fn is_const(&self) -> bool {
        self.tpart.is_empty() && self.free.is_empty()
    }
    fn add(mut self, o: Form, sign: i64) -> Form {
        self.c = self.c.wrapping_add(sign.wrapping_mul(o.c));
        self.tpart
            .extend(o.tpart.into_iter().map(|(c, v)| (c.wrapping_mul(sign), v)));
        self.free
            .extend(o.free.into_iter().map(|(v, c)| (v, c.wrapping_mul(sign))));
        self
    }
    /// The same form with each thread value and each unknown once (coefficients summed,
    /// zero terms dropped), so that `(t + u) - t` is seen to be `u`. Sound: one value is one
    /// number within one instance of an access.
    pub(super) fn normalized(mut self) -> Form {
        let mut t: Vec<(i64, Value)> = Vec::with_capacity(self.tpart.len());
        self.tpart.sort_by_key(|x| x.1);
        for (c, v) in self.tpart {
            match t.last_mut() {
                Some(last) if last.1 == v => last.0 = last.0.wrapping_add(c),
                _ => t.push((c, v)),
            }
        }
        t.retain(|x| x.0 != 0);
        let mut f: Vec<(Value, i64)> = Vec::with_capacity(self.free.len());
        self.free.sort_by_key(|x| x.0);
        for (v, c) in self.free {
            match f.last_mut() {
                Some(last) if last.0 == v => last.1 = last.1.wrapping_add(c),
                _ => f.push((v, c)),
            }
        }
        f.retain(|x| x.1 != 0);
        self.tpart = t;
        self.free = f;
        self
    }
    fn scale(mut self, s: i64) -> Form {
        self.c = self.c.wrapping_mul(s);
        for x in &mut self.tpart {
            x.0 = x.0.wrapping_mul(s);
        }
        for x in &mut self.free {
            x.1 = x.1.wrapping_mul(s);
        }
        self
    }
}

/// Two distinct threads whose values agree modulo `g` (exactly when `g == 0`).
/// The modulus addresses are compared in: `g`, or its gcd with 2^32 when an index may wrap
/// (then only its value mod 2^32 is known).
pub(super) fn wrap_modulus(g: i64, a: &Access, b: &Access) -> i64 {
    if a.exact && b.exact {
        g
    } else {
        gcd(g, 1 << 32)
    }
}

/// The two accesses of a pair test with their instances.
#[derive(Copy, Clone)]
pub(super) struct Sides<'a> {
    pub a: &'a Access,
    pub b: &'a Access,
    pub va: &'a [Inst],
    pub vb: &'a [Inst],
}

/// Which instances of a pair count as a collision.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Meet {
    /// Instances of one thread collide too (an async copy still in flight in its own
    /// issuing thread); otherwise only two different threads do.
    pub same_thread: bool,
    /// The pair is an op with itself in one iteration of every loop not enumerated: an
    /// instance does not collide with itself.
    pub self_pair: bool,
}

impl Meet {
    pub const OTHER_THREAD: Meet = Meet {
        same_thread: false,
        self_pair: false,
    };
    /// The three rules the proof uses, for tests that try each.
    #[cfg(test)]
    pub(super) const ALL: [Meet; 3] = [
        Meet::OTHER_THREAD,
        Meet {
            same_thread: true,
            self_pair: true,
        },
        Meet {
            same_thread: true,
            self_pair: false,
        },
    ];
    pub(super) fn distinct(&self, x: (u32, u32), y: (u32, u32)) -> bool {
        if !self.same_thread {
            x.0 != y.0 || x.0 == ANY
        } else if self.self_pair {
            x != y
        } else {
            true
        }
    }
}

/// The conditions of the `if`s enclosing `op` that each thread can evaluate on its own
/// (thread ids and constants), with the arm `op` sits in (true: then).
pub(super) fn guards(k: &Kernel, parents: &Parents, op: Op) -> Vec<(Value, bool)> {
    let mut out = Vec::new();
    let mut cur = op;
    while let Some(p) = parents.parent_op(cur) {
        if let OpKind::If {
            cond: Operand::Value(c),
        } = &k.ops[p].kind
            && thread_evaluable(k, *c, 0)
            && let Some(r) = parents.op_region[cur]
        {
            out.push((*c, k.ops[p].regions.first() == Some(&r)));
        }
        cur = p;
    }
    out
}

/// Whether two collective accesses of a tile of `shape` under layouts `a` and `b` give each
/// element to one and the same thread: one opaque name without a definition (docs/ir.md), or
/// two concrete layouts with equal writer maps and no broadcast (a broadcast element is read
/// by threads that did not write it; `ir::layout`).
fn same_owner(k: &Kernel, a: &str, b: &str, shape: &[u64], warp: u32) -> bool {
    use crate::ir::layout::{Ownership, ownership};
    match (
        ownership(k, Some(a), shape, warp),
        ownership(k, Some(b), shape, warp),
    ) {
        (Ownership::Concrete(x), Ownership::Concrete(y)) => {
            x.first == y.first
                && x.owners.rows == y.owners.rows
                && x.owners.shifts.is_empty()
                && y.owners.shifts.is_empty()
        }
        // A name without a definition; not an opaque fall-back of a defined encoding, which
        // may hold an element in several threads (`Ownership::one_owner_by_name`).
        (Ownership::Opaque(None), Ownership::Opaque(None)) => a == b,
        _ => false,
    }
}

/// Whether `v` is the same in every thread of each aligned group of `group` threads (a warp,
/// a warpgroup); `warp` is the warp width the evaluator's `lane`/`warp` use.
fn warp_uniform(k: &Kernel, warp: i64, group: i64, v: Value) -> bool {
    if !thread_evaluable(k, v, 0) {
        return false;
    }
    let none = HashSet::new();
    let mut eval = Evaluator {
        k,
        warp,
        memo: rustc_hash::FxHashMap::default(),
        dep: &none,
    };
    let (bx, by) = (k.block[0] as i64, k.block[1] as i64);
    let mut first: Option<i64> = None;
    for t in 0..k.threads() as i64 {
        let Some(x) = eval.eval(v, t, [t % bx, (t / bx) % by, t / (bx * by)], &[]) else {
            return false;
        };
        if t % group.max(1) == 0 {
            first = Some(x);
        } else if first != Some(x) {
            return false;
        }
    }
    true
}

fn preconditions(k: &Kernel) -> Result<(), String> {
    for op in k.ops_in_order() {
        let e = effects(k, op);
        // Sync ops other than `barrier` and the waits of modelled copies are ignored:
        // dropping ordering only adds pairs.
        for a in &e.shared {
            if a.kind.is_async() && !super::proof_async::modelled(a) {
                return Err(format!(
                    "{} is an async access the static proof does not model (cp.async and gather-to-LDS copies, per thread or per tile, wgmma operand reads, TMA loads and stores only)",
                    op_at(k, op)
                ));
            }
        }
        if matches!(k.ops[op].kind, OpKind::While { .. }) && super::proof_async::has_async(k) {
            return Err(format!(
                "{} is a while loop in a kernel with async copies",
                op_at(k, op)
            ));
        }
    }
    Ok(())
}

fn barriers_uniform(k: &Kernel, td: &HashSet<Value>) -> Result<(), String> {
    fn go(k: &Kernel, r: Region, div: bool, td: &HashSet<Value>) -> Result<(), String> {
        for &op in k.region_ops(r) {
            let od = &k.ops[op];
            if matches!(od.kind, OpKind::Barrier) && div {
                return Err(format!(
                    "{} is under thread-dependent control",
                    op_at(k, op)
                ));
            }
            let d = div || uniform::divergent_control(k, td, op);
            for &c in &od.regions {
                go(k, c, d, td)?;
            }
        }
        Ok(())
    }
    go(k, k.body(), false, td)
}

pub(super) type Starts = BTreeSet<u32>;

/// For each access op, the static interval starts (0 = entry, 1 + op index = after that
/// barrier) that reach it without crossing a barrier; and for each `for` loop, the starts
/// that reach its entry from the code around it.
fn interval_starts(k: &Kernel) -> (HashMap<Op, Starts>, HashMap<Op, Starts>) {
    starts_cut_by(k, Cut::Barrier)
}

/// Which sync ops end an interval in [`flow`]: block barriers only (barrier intervals), or
/// also `warp_sync` (warp intervals, `check/proof_warp.rs`).
#[derive(Copy, Clone, PartialEq)]
pub(super) enum Cut {
    Barrier,
    BarrierOrWarpSync,
}

impl Cut {
    fn cuts(self, kind: &OpKind) -> bool {
        match kind {
            OpKind::Barrier => true,
            OpKind::WarpSync => self == Cut::BarrierOrWarpSync,
            _ => false,
        }
    }
}

/// [`interval_starts`] with intervals ended by the sync ops `cut` names.
pub(super) fn starts_cut_by(k: &Kernel, cut: Cut) -> (HashMap<Op, Starts>, HashMap<Op, Starts>) {
    let mut out = (HashMap::new(), HashMap::new());
    let mut s = Starts::new();
    s.insert(0);
    flow(k, k.body(), s, cut, &mut out);
    out
}

type Flow = (HashMap<Op, Starts>, HashMap<Op, Starts>);

fn flow(k: &Kernel, r: Region, mut s: Starts, cut: Cut, out: &mut Flow) -> Starts {
    for &op in k.region_ops(r) {
        let od = &k.ops[op];
        match &od.kind {
            kind if cut.cuts(kind) => {
                s = Starts::new();
                s.insert(1 + op.index() as u32);
            }
            OpKind::If { .. } => {
                let a = flow(k, od.regions[0], s.clone(), cut, out);
                let b = flow(k, od.regions[1], s, cut, out);
                s = a.union(&b).copied().collect();
            }
            OpKind::For { .. } => {
                out.1.entry(op).or_default().extend(s.iter().copied());
                let body = od.regions[0];
                let mut head = s.clone();
                loop {
                    let end = flow(k, body, head.clone(), cut, out);
                    let next: Starts = head.union(&end).copied().collect();
                    if next == head {
                        break;
                    }
                    head = next;
                }
                s = head;
            }
            OpKind::While { .. } => {
                let (cr, br) = (od.regions[0], od.regions[1]);
                let mut head = s.clone();
                loop {
                    let after_cond = flow(k, cr, head.clone(), cut, out);
                    let end = flow(k, br, after_cond.clone(), cut, out);
                    let next: Starts = head.union(&end).copied().collect();
                    if next == head {
                        s = after_cond;
                        break;
                    }
                    head = next;
                }
            }
            OpKind::Stage { .. } => s = flow(k, od.regions[0], s, cut, out),
            _ => {
                if !effects(k, op).shared.is_empty() {
                    out.0.entry(op).or_default().extend(s.iter().copied());
                }
            }
        }
    }
    s
}

/// How the proof reads indices: the kernel, its thread-dependent values, its value ranges,
/// and whether every index form read so far provably equals its i32 value.
struct Indexing<'a> {
    k: &'a Kernel,
    td: &'a HashSet<Value>,
    /// Induction variables of enumerated loops.
    en: &'a Enumerated,
    ranges: &'a Ranges,
    exact: bool,
}

impl Indexing<'_> {
    /// The form of one index; clears `exact` when the form may leave the i32 range, where
    /// the i32 index is only congruent to it mod 2^32.
    fn index(&mut self, o: &Operand) -> Option<Form> {
        let f = form(self.k, self.td, self.en, o)?.normalized();
        let r = self.ranges;
        let terms = f.tpart.iter().map(|(c, v)| (*c, r.range(*v)));
        let terms = terms.chain(f.free.iter().map(|(v, c)| (*c, r.range(*v))));
        let (mut lo, mut hi) = (f.c as i128, f.c as i128);
        for (c, i) in terms {
            let (a, b) = (c as i128 * i.lo, c as i128 * i.hi);
            lo += a.min(b);
            hi += a.max(b);
        }
        self.exact &= lo >= i32::MIN as i128 && hi <= i32::MAX as i128;
        Some(f)
    }
}

/// The access's linear element index in its root buffer, as a [`Form`].
fn address(ix: &mut Indexing, m: MemRef, index: &[Operand]) -> Option<Form> {
    let (mut f, shape, strides) = memref_form(ix, m)?;
    if index.len() != shape.len() {
        return None;
    }
    for (i, o) in index.iter().enumerate() {
        f = f.add(ix.index(o)?.scale(strides[i] as i64), 1);
    }
    Some(f)
}

/// Offset form, shape and strides of a memref.
fn memref_form(ix: &mut Indexing, m: MemRef) -> Option<(Form, Vec<u64>, Vec<u64>)> {
    let k = ix.k;
    match m {
        MemRef::Buffer(b) => {
            let shape = k.buffers[b].shape.clone();
            let mut st = vec![1u64; shape.len()];
            for d in (0..shape.len().saturating_sub(1)).rev() {
                st[d] = st[d + 1] * shape[d + 1];
            }
            Some((Form::konst(0), shape, st))
        }
        MemRef::View(v) => {
            let vd = &k.views[v];
            let (mut f, shape, st) = memref_form(ix, vd.base)?;
            let mut nshape = Vec::new();
            let mut nst = Vec::new();
            for (d, vi) in vd.indices.iter().enumerate() {
                let s = *st.get(d)? as i64;
                match vi {
                    ViewIndex::At(o) => f = f.add(ix.index(o)?.scale(s), 1),
                    ViewIndex::Range(lo, hi) => {
                        f.c += *lo as i64 * s;
                        nshape.push(hi - lo);
                        nst.push(s as u64);
                    }
                }
            }
            let used = vd.indices.len().min(shape.len());
            nshape.extend_from_slice(&shape[used..]);
            nst.extend_from_slice(&st[used..]);
            Some((f, nshape, nst))
        }
    }
}

pub(super) fn form(
    k: &Kernel,
    td: &HashSet<Value>,
    en: &Enumerated,
    o: &Operand,
) -> Option<Form> {
    form_d(k, td, en, o, 0)
}

fn form_d(
    k: &Kernel,
    td: &HashSet<Value>,
    en: &Enumerated,
    o: &Operand,
    depth: u32,
) -> Option<Form> {
    if depth > 256 {
        return None;
    }
    let v = match o {
        Operand::Imm(s) => return Some(Form::konst(s.as_i64())),
        Operand::Value(v) => *v,
    };
    let def = k.values[v].def;
    if let ValueDef::Result(op, _) = def
        && let OpKind::Const(c) = &k.ops[op].kind
    {
        return Some(Form::konst(c.as_i64()));
    }
    // A uniform value is an unknown, unless it is computed from the induction variables of
    // enumerated loops (then its value per instance is part of `T`).
    let evaluable = evaluable(k, &en.ivs, v, 0);
    if !(td.contains(&v) || evaluable && en.dep.contains(&v)) {
        return Some(Form {
            free: vec![(v, 1)],
            ..Form::default()
        });
    }
    // The linear rules below are integer ring identities: a thread-dependent float (which
    // only reaches an index through a cast) is never taken apart.
    if k.values[v].ty != ScalarType::I32 {
        return match k.values[v].ty {
            _ if evaluable => Some(Form {
                tpart: vec![(1, v)],
                ..Form::default()
            }),
            ScalarType::I1 => uniform_result(k, td, en, v, depth),
            _ => None,
        };
    }
    let ValueDef::Result(op, _) = def else {
        // An enumerated induction variable is part of `T`.
        return evaluable.then(|| Form {
            tpart: vec![(1, v)],
            ..Form::default()
        });
    };
    let sub = |x: &Operand| form_d(k, td, en, x, depth + 1);
    // Linear structure first (keeps uniform parts out of T and lets thread parts cancel),
    // else the whole value: in T when each thread can evaluate it, else an unknown when its
    // operands' thread parts cancel.
    let linear = match &k.ops[op].kind {
        OpKind::Binary(BinOp::Add, a, b) => Some(sub(a)?.add(sub(b)?, 1)),
        OpKind::Binary(BinOp::Sub, a, b) => Some(sub(a)?.add(sub(b)?, -1)),
        OpKind::Binary(BinOp::Mul, a, b) => {
            let (fa, fb) = (sub(a)?.normalized(), sub(b)?.normalized());
            if fa.is_const() {
                Some(fb.scale(fa.c))
            } else if fb.is_const() {
                Some(fa.scale(fb.c))
            } else {
                None
            }
        }
        OpKind::Binary(BinOp::Shl, a, b) => match sub(b)?.normalized() {
            fb if fb.is_const() => Some(sub(a)?.scale(1i64 << (fb.c & 31))),
            _ => None,
        },
        OpKind::Unary(UnOp::Neg, a) => Some(sub(a)?.scale(-1)),
        _ => None,
    };
    if linear.is_some() {
        return linear;
    }
    if evaluable {
        return Some(Form {
            tpart: vec![(1, v)],
            ..Form::default()
        });
    }
    uniform_result(k, td, en, v, depth)
}

/// `v` as one unknown when every operand of its op is uniform in the forms' sense (its
/// form, normalized, has no thread part: `rem((t + i) - t, 2)`): an op of uniform operands
/// computes one value in every thread (within one instance), whatever the op.
fn uniform_result(
    k: &Kernel,
    td: &HashSet<Value>,
    en: &Enumerated,
    v: Value,
    depth: u32,
) -> Option<Form> {
    let ValueDef::Result(op, _) = k.values[v].def else {
        return None;
    };
    let operands: Vec<&Operand> = match &k.ops[op].kind {
        OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => vec![a, b],
        OpKind::Unary(_, a) => vec![a],
        OpKind::Select(c, a, b) => vec![c, a, b],
        _ => return None,
    };
    for o in operands {
        if let Operand::Value(w) = o
            && !matches!(k.values[*w].ty, ScalarType::I32 | ScalarType::I1)
        {
            return None;
        }
        if !form_d(k, td, en, o, depth + 1)?.normalized().tpart.is_empty() {
            return None;
        }
    }
    Some(Form {
        free: vec![(v, 1)],
        ..Form::default()
    })
}

/// Whether `v` is computed from thread ids, block dimensions and constants only.
fn thread_evaluable(k: &Kernel, v: Value, depth: u32) -> bool {
    evaluable(k, &HashSet::new(), v, depth)
}

/// Whether `v` is computed from thread ids, block dimensions, constants and the induction
/// variables in `en` only.
fn evaluable(k: &Kernel, en: &HashSet<Value>, v: Value, depth: u32) -> bool {
    if depth > 64 {
        return false;
    }
    if en.contains(&v) {
        return true;
    }
    let ValueDef::Result(op, _) = k.values[v].def else {
        return false;
    };
    let ok = |o: &Operand| match o {
        Operand::Imm(_) => true,
        Operand::Value(w) => evaluable(k, en, *w, depth + 1),
    };
    match &k.ops[op].kind {
        OpKind::Const(_) => true,
        OpKind::Special(s) => s.is_thread_dependent() || matches!(s, Special::BlockDim(_)),
        OpKind::InGroup(_) => true,
        OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => ok(a) && ok(b),
        OpKind::Unary(_, a) | OpKind::Cast(_, a) => ok(a),
        OpKind::Select(c, a, b) => ok(c) && ok(a) && ok(b),
        _ => false,
    }
}

/// Evaluates thread-evaluable values for one thread.
struct Evaluator<'k> {
    k: &'k Kernel,
    warp: i64,
    /// Values of thread-only functions per (value, thread); values in `dep` (functions of
    /// enumerated induction variables) are not memoized.
    memo: rustc_hash::FxHashMap<(Value, i64), Option<Val>>,
    dep: &'k HashSet<Value>,
}

/// Values of enumerated induction variables.
type Env = [(Value, i64)];

impl Evaluator<'_> {
    fn eval(&mut self, v: Value, t: i64, xyz: [i64; 3], env: &Env) -> Option<i64> {
        self.val(v, t, xyz, env).map(|x| x.as_i64())
    }

    fn opnd(&mut self, o: &Operand, t: i64, xyz: [i64; 3], env: &Env) -> Option<Val> {
        match o {
            Operand::Imm(s) => Some(match s {
                Scalar::I1(b) => Val::I1(*b),
                Scalar::I32(i) => Val::I32(*i),
                Scalar::F32(f) => Val::F32(*f),
            }),
            Operand::Value(w) => self.val(*w, t, xyz, env),
        }
    }

    fn val(&mut self, v: Value, t: i64, xyz: [i64; 3], env: &Env) -> Option<Val> {
        let memo = !self.dep.contains(&v);
        if memo && let Some(x) = self.memo.get(&(v, t)) {
            return *x;
        }
        let k = self.k;
        let ValueDef::Result(op, _) = k.values[v].def else {
            return env
                .iter()
                .find(|(w, _)| *w == v)
                .map(|(_, x)| Val::I32(*x as i32));
        };
        let ty = k.values[v].ty;
        let r = match &k.ops[op].kind {
            OpKind::Const(c) => Some(match c {
                Scalar::I1(b) => Val::I1(*b),
                Scalar::I32(i) => Val::I32(*i),
                Scalar::F32(f) => Val::F32(*f),
            }),
            OpKind::Special(s) => Some(Val::I32(match s {
                Special::Tid(d) => xyz[*d as usize],
                Special::LinearTid => t,
                Special::Lane => t % self.warp,
                Special::Warp => t / self.warp,
                Special::BlockDim(d) => k.block[*d as usize] as i64,
                _ => return None,
            } as i32)),
            OpKind::InGroup(g) => Some(Val::I1(
                (k.groups[*g].lo as i64..k.groups[*g].hi as i64).contains(&t),
            )),
            OpKind::Binary(b, x, y) => {
                let (x, y) = (self.opnd(x, t, xyz, env)?, self.opnd(y, t, xyz, env)?);
                binary(*b, ty, x, y)
            }
            OpKind::Cmp(p, x, y) => {
                let (x, y) = (
                    self.opnd(x, t, xyz, env)?.as_i64(),
                    self.opnd(y, t, xyz, env)?.as_i64(),
                );
                Some(Val::I1(p.holds(x, y)))
            }
            OpKind::Select(c, a, b) => {
                let c = self.opnd(c, t, xyz, env)?.truthy();
                if c {
                    self.opnd(a, t, xyz, env)
                } else {
                    self.opnd(b, t, xyz, env)
                }
            }
            OpKind::Unary(UnOp::Neg, a) => Some(Val::I32(
                (self.opnd(a, t, xyz, env)?.as_i64() as i32).wrapping_neg(),
            )),
            OpKind::Unary(UnOp::Abs, a) => Some(Val::I32(
                (self.opnd(a, t, xyz, env)?.as_i64() as i32).wrapping_abs(),
            )),
            OpKind::Unary(UnOp::Not, a) => Some(match self.opnd(a, t, xyz, env)? {
                Val::I1(b) => Val::I1(!b),
                x => Val::I32(!(x.as_i64() as i32)),
            }),
            _ => None,
        };
        if memo {
            self.memo.insert((v, t), r);
        }
        r
    }
}

/// How two accesses in one outermost loop can share a barrier interval: the loop, its
/// induction variable and step, and the iteration distances `d` (B runs in iteration
/// `i + d*step` when A runs in iteration `i`).
pub(super) struct LoopRelation {
    pub iv: Value,
    /// The loop's lower bound when it is a constant (the induction variable then only takes
    /// the values `lo + m*step`).
    pub lo: Option<i64>,
    /// The values the induction variable can take: `[lo, hi - 1]` of its bounds' ranges.
    pub iv_range: (i128, i128),
    pub step: i64,
    pub distances: Vec<i64>,
    /// The free values that depend on values fixed during one execution of the loop
    /// (`check/proof_nest.rs`); only where the test pairs accesses of one execution.
    pub nest: Option<super::proof_nest::Nest>,
}

impl LoopRelation {
    /// The relation of `for` loop `l` at `distances`, when its step is a constant.
    pub(super) fn of(
        k: &Kernel,
        ranges: &Ranges,
        l: Op,
        distances: Vec<i64>,
    ) -> Option<LoopRelation> {
        let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else {
            return None;
        };
        let lo_c = match bound_range(k, lo) {
            (x, y) if x == y => Some(x as i64),
            _ => None,
        };
        let (lo_r, hi_r) = (value_range(k, ranges, lo).0, value_range(k, ranges, hi).1);
        let step = match bound_range(k, step) {
            (x, y) if x == y && x > 0 => x as i64,
            _ => return None,
        };
        Some(LoopRelation {
            iv: k.region_args(k.ops[l].regions[0])[0],
            lo: lo_c,
            iv_range: (lo_r, (hi_r - 1).max(lo_r)),
            step,
            distances,
            nest: None,
        })
    }
}

/// The range of a loop bound: [`bound_range`], narrowed by the value ranges of `ir::ranges`.
pub(super) fn value_range(k: &Kernel, ranges: &Ranges, o: &Operand) -> (i128, i128) {
    let (lo, hi) = bound_range(k, o);
    match o {
        Operand::Value(v) => {
            let r = ranges.range(*v);
            (lo.max(r.lo), hi.min(r.hi))
        }
        Operand::Imm(_) => (lo, hi),
    }
}

/// The range of a loop bound: a constant, a scalar parameter's declared range, else all of
/// i32.
pub(super) fn bound_range(k: &Kernel, o: &Operand) -> (i128, i128) {
    let full = (i32::MIN as i128, i32::MAX as i128);
    match o {
        Operand::Imm(s) => (s.as_i64() as i128, s.as_i64() as i128),
        Operand::Value(v) => match k.values[*v].def {
            ValueDef::Result(op, _) => match &k.ops[op].kind {
                OpKind::Const(c) => (c.as_i64() as i128, c.as_i64() as i128),
                _ => full,
            },
            ValueDef::Param(_) => k
                .param_ranges
                .get(*v)
                .map_or(full, |(lo, hi)| (lo as i128, hi as i128)),
            ValueDef::RegionArg(..) => full,
        },
    }
}

/// The innermost common loop of `a` and `b`, when it is a `for` with a constant step and
/// at least one barrier directly in its body, and either not nested in another loop or
/// entered only from intervals that start outside it (a barrier between its exit and its
/// next entry). Its body is then cut into segments by those barriers: two accesses share an
/// interval only in one segment of one iteration, or in the last segment of iteration i
/// and the first of i+1, of one execution of the loop.
fn loop_relation(cx: &PairCx, acc_a: &Access, acc_b: &Access) -> Option<LoopRelation> {
    let (k, parents) = (cx.k, cx.parents);
    let (a, b) = (acc_a.op, acc_b.op);
    let anc_a = parents.ancestors(a);
    let anc_b = parents.ancestors(b);
    let l = anc_a.iter().copied().find(|o| {
        anc_b.contains(o) && matches!(k.ops[*o].kind, OpKind::For { .. } | OpKind::While { .. })
    })?;
    let base = LoopRelation::of(k, cx.ranges, l, Vec::new())?;
    let nested = parents
        .ancestors(l)
        .iter()
        .any(|o| matches!(k.ops[*o].kind, OpKind::For { .. } | OpKind::While { .. }));
    if nested && !entered_from_outside(cx, l) {
        return None;
    }
    let body = k.ops[l].regions[0];
    let ops = k.region_ops(body);
    let nbar = ops
        .iter()
        .filter(|o| matches!(k.ops[**o].kind, OpKind::Barrier))
        .count();
    if nbar == 0 {
        return None;
    }
    let seg = |x: Op| -> Option<usize> {
        let top = if parents.op_region[x] == Some(body) {
            x
        } else {
            *parents
                .ancestors(x)
                .iter()
                .find(|o| parents.op_region[**o] == Some(body))?
        };
        let pos = ops.iter().position(|o| *o == top)?;
        Some(
            ops[..pos]
                .iter()
                .filter(|o| matches!(k.ops[**o].kind, OpKind::Barrier))
                .count(),
        )
    };
    let (sa, sb) = (seg(a)?, seg(b)?);
    let mut distances = Vec::new();
    if sa == sb {
        distances.push(0);
    }
    if sa == nbar && sb == 0 {
        distances.push(1);
    }
    if sb == nbar && sa == 0 {
        distances.push(-1);
    }
    // One execution of `l` holds both accesses: values defined before it are common.
    let ncx = super::proof_nest::NestCx {
        k,
        td: cx.td,
        en: cx.en,
        ranges: cx.ranges,
        parents,
    };
    let nest = super::proof_nest::Nest::new(
        &ncx,
        (l, base.iv, base.iv_range),
        &[&acc_a.form, &acc_b.form],
    );
    Some(LoopRelation {
        distances,
        nest: Some(nest),
        ..base
    })
}

/// Whether no interval that starts inside loop `l` (at one of its barriers) reaches `l`'s
/// entry: then an interval never spans two executions of `l`.
fn entered_from_outside(cx: &PairCx, l: Op) -> bool {
    let Some(starts) = cx.loop_entry.get(&l) else {
        return false;
    };
    starts.iter().all(|&s| {
        s == 0 || {
            let b = Op::new(s as usize - 1);
            !cx.parents.ancestors(b).contains(&l)
        }
    })
}

/// A value as a function of one induction variable: `Affine(a, b)` is `a*iv + b`,
/// `Periodic(p)` is any function with period `p` in `iv` (built with `rem` by constants).
#[derive(Copy, Clone, Debug, PartialEq)]
pub(super) enum IvFn {
    Const(i64),
    Affine(i64, i64),
    Periodic(i64),
}

/// `v` as a function of the induction variable `iv` of a loop whose `iv` takes values in
/// `range`: through arithmetic, comparisons and selects of constants and `iv`, and through
/// the loop's iteration values that `ir::induction` recognizes as periodic.
pub(super) fn iv_fn(
    k: &Kernel,
    ind: &Inductions,
    v: Value,
    (iv, range): (Value, (i128, i128)),
    depth: u32,
) -> Option<IvFn> {
    if v == iv {
        return Some(IvFn::Affine(1, 0));
    }
    if depth > 32 {
        return None;
    }
    let ValueDef::Result(op, _) = k.values[v].def else {
        // Periodic iteration values; an affine counter is its form in the loop variable.
        let i = ind.get(v).filter(|i| i.iv == iv)?;
        return match i.affine_in_iv() {
            _ if i.periodic() => Some(IvFn::Periodic(i.iv_period())),
            Some((a, b)) => Some(IvFn::Affine(a, b)),
            None => None,
        };
    };
    let sub = |o: &Operand| -> Option<IvFn> {
        match o {
            Operand::Imm(s) => Some(IvFn::Const(s.as_i64())),
            Operand::Value(w) => iv_fn(k, ind, *w, (iv, range), depth + 1),
        }
    };
    let i32c = |x: i64| Some(IvFn::Const(x as i32 as i64));
    let f = iv_fn_op(k, op, sub, i32c, range);
    if f.is_some() || depth > 0 {
        return f;
    }
    // Exactly periodic although the rules above do not see it (`x - (x / 3)·3` of an affine
    // counter): `ir::iterfn` evaluates it as a function of the iteration.
    let ValueDef::RegionArg(r, 0) = k.values[iv].def else {
        return None;
    };
    let l = k.parents().region_op[r]?;
    let mut fns = crate::ir::iterfn::IterFns::new(k, ind, l, 0)?;
    let (lo, step) = fns.lo_step();
    fns.set_max_iter(i64::try_from((range.1 - lo as i128).max(0) / step as i128).ok()?);
    let g = fns.of(Operand::Value(v)).filter(crate::ir::iterfn::IterFn::periodic)?;
    Some(IvFn::Periodic((g.seq.len() as i64 * step).min(1 << 20)))
}

/// [`iv_fn`]'s rules for the op defining the value.
fn iv_fn_op(
    k: &Kernel,
    op: Op,
    sub: impl Fn(&Operand) -> Option<IvFn>,
    i32c: impl Fn(i64) -> Option<IvFn>,
    range: (i128, i128),
) -> Option<IvFn> {
    use IvFn::*;
    let period = |f: IvFn| match f {
        Const(_) => Some(1),
        Periodic(p) => Some(p),
        Affine(..) => None,
    };
    match &k.ops[op].kind {
        OpKind::Const(c) => Some(Const(c.as_i64())),
        OpKind::Binary(bop, x, y) => {
            let (fx, fy) = (sub(x)?, sub(y)?);
            // Affine coefficients are exact integers (checked); the i32 value equals the
            // affine form only where `affine_exact` says so.
            match (bop, fx, fy) {
                (BinOp::Add, Const(a), Const(b)) => i32c(a.wrapping_add(b)),
                (BinOp::Sub, Const(a), Const(b)) => i32c(a.wrapping_sub(b)),
                (BinOp::Mul, Const(a), Const(b)) => i32c(a.wrapping_mul(b)),
                (BinOp::Add, Affine(a, b), Const(c)) | (BinOp::Add, Const(c), Affine(a, b)) => {
                    Some(Affine(a, b.checked_add(c)?))
                }
                (BinOp::Add, Affine(a, b), Affine(c, d)) => {
                    Some(Affine(a.checked_add(c)?, b.checked_add(d)?))
                }
                (BinOp::Sub, Affine(a, b), Const(c)) => Some(Affine(a, b.checked_sub(c)?)),
                (BinOp::Sub, Const(c), Affine(a, b)) => {
                    Some(Affine(a.checked_neg()?, c.checked_sub(b)?))
                }
                (BinOp::Mul, Affine(a, b), Const(c)) | (BinOp::Mul, Const(c), Affine(a, b)) => {
                    Some(Affine(a.checked_mul(c)?, b.checked_mul(c)?))
                }
                // Over the integers `(a*iv + b) mod m` has period m; i32 wraps, which keeps
                // that when m divides 2^32 or the affine value never leaves i32.
                (BinOp::Rem, Affine(a, b), Const(m)) if m != 0 => {
                    let pow2 = (m.unsigned_abs()).is_power_of_two();
                    (pow2 || affine_exact(a, b, range)).then_some(Periodic(m.abs()))
                }
                _ => {
                    let (px, py) = (period(fx)?, period(fy)?);
                    Some(Periodic(lcm(px, py).min(1 << 20)))
                }
            }
        }
        // Comparisons and selects of periodic values are periodic (their value depends only
        // on their operands' values).
        OpKind::Cmp(_, x, y) => {
            let (px, py) = (period(sub(x)?)?, period(sub(y)?)?);
            Some(Periodic(lcm(px, py).min(1 << 20)))
        }
        OpKind::Select(c, x, y) => {
            let (pc, px, py) = (period(sub(c)?)?, period(sub(x)?)?, period(sub(y)?)?);
            Some(Periodic(lcm(lcm(pc, px), py).min(1 << 20)))
        }
        _ => None,
    }
}

/// Whether `a*iv + b` stays within i32 for every `iv` in `range`, so that its i32 value (which
/// is congruent to it mod 2^32) equals it.
pub(super) fn affine_exact(a: i64, b: i64, range: (i128, i128)) -> bool {
    let ends = [range.0, range.1].map(|x| a as i128 * x + b as i128);
    ends.iter()
        .all(|e| (i32::MIN as i128..=i32::MAX as i128).contains(e))
}

/// The value of `v` in the iteration where the induction variable `iv` is `x` (`iv_fn`'s
/// values); `None` when it cannot be evaluated.
pub(super) fn eval_iv(k: &Kernel, ind: &Inductions, v: Value, iv: Value, x: i64) -> Option<i64> {
    if v == iv {
        return Some(x);
    }
    let ValueDef::Result(op, _) = k.values[v].def else {
        return ind.get(v).filter(|i| i.iv == iv)?.at(x);
    };
    let opnd = |o: &Operand| -> Option<Val> {
        match o {
            Operand::Imm(s) => Some(match s {
                Scalar::I1(b) => Val::I1(*b),
                _ => Val::I32(s.as_i64() as i32),
            }),
            Operand::Value(w) => {
                let r = eval_iv(k, ind, *w, iv, x)?;
                Some(if k.values[*w].ty == ScalarType::I1 {
                    Val::I1(r != 0)
                } else {
                    Val::I32(r as i32)
                })
            }
        }
    };
    match &k.ops[op].kind {
        OpKind::Const(c) => Some(c.as_i64()),
        OpKind::Binary(b, p, q) => {
            binary(*b, k.values[v].ty, opnd(p)?, opnd(q)?).map(|r| r.as_i64())
        }
        OpKind::Cmp(p, a, b) => {
            let (a, b) = (opnd(a)?.as_i64(), opnd(b)?.as_i64());
            Some(i64::from(p.holds(a, b)))
        }
        OpKind::Select(c, a, b) => {
            if opnd(c)?.truthy() {
                Some(opnd(a)?.as_i64())
            } else {
                Some(opnd(b)?.as_i64())
            }
        }
        _ => None,
    }
}

/// The collision test with the free variables that are functions of the loop's induction
/// variable evaluated at related iterations: periodic ones over one period, affine ones
/// cancelled when both sides carry the same slope; the others stay unknown.
pub(super) fn collide_related(
    k: &Kernel,
    ranges: &Ranges,
    rel: &LoopRelation,
    Sides { a, b, va, vb }: Sides,
    rule: Meet,
    memo: &PairMemo,
) -> Option<(u32, u32)> {
    let ind = &ranges.inductions;
    let fallback = Some((0, 1));
    if rel.distances.is_empty() {
        return None;
    }
    // Classify each side's free terms.
    struct Side {
        periodic: Vec<(Value, i64)>,
        /// Free values that are `rel.nest` nodes (`check/proof_nest.rs`).
        nested: Vec<(Value, i64)>,
        /// Free values fixed during one execution of the loop (`rel.nest`).
        invariant: Vec<(Value, i64)>,
        slope: i64,
        offset: i64,
        unknown_gcd: i64,
        period: i64,
    }
    let nest = rel.nest.as_ref();
    let classify = |f: &Form| -> Option<Side> {
        let mut s = Side {
            periodic: Vec::new(),
            nested: Vec::new(),
            invariant: Vec::new(),
            slope: 0,
            offset: 0,
            unknown_gcd: 0,
            period: 1,
        };
        for (v, c) in &f.free {
            match memo.iv_fn(k, ind, *v, (rel.iv, rel.iv_range)) {
                Some(IvFn::Const(x)) => s.offset = s.offset.wrapping_add(c.wrapping_mul(x)),
                Some(IvFn::Affine(m, q)) if affine_exact(m, q, rel.iv_range) => {
                    s.slope = s.slope.wrapping_add(c.wrapping_mul(m));
                    s.offset = s.offset.wrapping_add(c.wrapping_mul(q));
                }
                Some(IvFn::Periodic(p)) if p <= 4096 => {
                    s.periodic.push((*v, *c));
                    s.period = lcm(s.period, p).min(1 << 20);
                }
                _ => match nest.map(|n| (n.invariant(*v), n.node(*v))) {
                    Some((true, _)) => s.invariant.push((*v, *c)),
                    Some((false, Some((_, p)))) => {
                        s.nested.push((*v, *c));
                        s.period = lcm(s.period, p).min(1 << 20);
                    }
                    _ => s.unknown_gcd = gcd(s.unknown_gcd, c.wrapping_abs()),
                },
            }
        }
        Some(s)
    };
    let (sa, sb) = (classify(&a.form)?, classify(&b.form)?);
    let mut g = gcd(sa.unknown_gcd, sb.unknown_gcd);
    // Values fixed during the execution are one number on both sides: only the difference
    // of their coefficients is unknown.
    g = gcd(g, super::proof_nest::invariant_gcd(&sa.invariant, &sb.invariant));
    let residues = match nest {
        Some(n) if !(sa.nested.is_empty() && sb.nested.is_empty()) => {
            match n.assignments(super::proof_nest::NEST_BUDGET) {
                Some(r) => r,
                None => return fallback,
            }
        }
        _ => vec![Vec::new()],
    };
    let wraps = !(a.exact && b.exact);
    if sa.slope != sb.slope {
        // The affine parts do not cancel: keep them unknown.
        g = gcd(g, gcd(sa.slope.wrapping_abs(), sb.slope.wrapping_abs()));
        if g == 0 {
            return fallback;
        }
    }
    if wraps {
        g = gcd(g, 1 << 32);
    }
    let same_slope = sa.slope == sb.slope;
    let mut period = lcm(sa.period, sb.period).max(1);
    if rel.lo.is_some() {
        // Whole periods of aligned values: `lo + m*step` for m over a multiple of `step`.
        period = lcm(period, rel.step.max(1));
    }
    if period > 4096 || period.saturating_mul(residues.len() as i64) > 1 << 16 {
        return fallback;
    }
    // One period of induction-variable values; with a constant lower bound only those
    // `lo + m*step` that the loop takes.
    let base = rel.lo.unwrap_or(0);
    let mut probe = ShiftedProbe::new(memo, va, vb, g, rule);
    for &d in &rel.distances {
        for (m, res) in (0..period).flat_map(|m| residues.iter().map(move |r| (m, r))) {
            if rel.lo.is_some() && m % rel.step.max(1) != 0 {
                continue;
            }
            let i = base.wrapping_add(m);
            let j = i.wrapping_add(d.wrapping_mul(rel.step));
            let (Some(na), Some(nb)) = (
                super::proof_nest::nested_sum(k, ind, nest, &sa.nested, (i, res)),
                super::proof_nest::nested_sum(k, ind, nest, &sb.nested, (j, res)),
            ) else {
                return fallback;
            };
            let mut ca = sa.offset.wrapping_add(na);
            for (v, c) in &sa.periodic {
                let Some(x) = memo.eval_iv(k, ind, *v, rel.iv, i) else {
                    return fallback;
                };
                ca = ca.wrapping_add(c.wrapping_mul(x));
            }
            let mut cb = sb.offset.wrapping_add(nb);
            for (v, c) in &sb.periodic {
                let Some(x) = memo.eval_iv(k, ind, *v, rel.iv, j) else {
                    return fallback;
                };
                cb = cb.wrapping_add(c.wrapping_mul(x));
            }
            if same_slope {
                // slope*i on both sides, B one distance further.
                cb = cb.wrapping_add(sb.slope.wrapping_mul(d).wrapping_mul(rel.step));
            }
            if let Some(hit) = probe.test(ca, cb) {
                return Some(hit);
            }
        }
    }
    None
}

/// An op as proof messages name it: its text (`ir::text::op_label`) and, where it has a
/// source span, `at byte N`, which the CLI turns into a line number.
pub(super) fn op_at(k: &Kernel, op: Op) -> String {
    let s = k.span(op);
    if s.is_undef() {
        op_label(k, op)
    } else {
        format!("{} at byte {}", op_label(k, op), s.lo)
    }
}
