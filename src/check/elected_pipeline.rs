//! The two-role TMA pipeline of a warp-specialized kernel in the static race proof
//! (docs/checker.md, "Elected arrivals"): which accesses of the TMA-filled slot buffers the
//! roles' mbarrier handshakes order, so that the barrier intervals need not pair them.
//!
//! Recognized form (anything else declines the proof with the reason; the interpreter then
//! checks): one top-level role branch `if in_group @g` with two arms (no nested roles) whose
//! handshakes `check::handshake_proof` proves (balance, parity, no aliasing, no cycle), every
//! other mbarrier op an `mbar_init` before it. Each buffer `B` a `tma_load` writes is a *slot
//! buffer*: every load writes `view @B[s]` with `s = i mod D` in its role's loop (the producer
//! `P`), completes on `F[s]` (the `full` array, `D` slots) and is issued by one elected thread
//! `e`, after (in `e`'s program order within the iteration) a wait on `E[s]` (the `empty`
//! array, `D` slots) that `e` executes. Every arrival and `expect_tx` on `F` is `e`'s, none
//! after its last arrival. Every other access of `B` is a read through `view @B[s]` in the
//! other role's loop (the consumer group `G`), and:
//! 1. **acquire**: a `mbar_wait F[s]` with this use's parity, run by every thread of `G`
//!    (directly in the loop's body), precedes it;
//! 2. **release**: an arrival on `E[s]` follows it, either run by every thread of `G`
//!    (per-thread release), or run by one elected thread of `G` after a *group barrier* `b`
//!    that follows the read: a `named_sync id, |G|` directly in the body (every thread of `G`
//!    runs it each iteration, and no other op uses `id`). This is the elected-arrival rule:
//!    every read of any thread of `G` happens before `b`'s completion, hence before the
//!    arrival, hence before the completion of `E[s]`'s phase;
//! 3. every arrival on `E` is `G`'s and follows a `full` wait, so the phase of use `u`
//!    completes only after all of `G`'s reads of use `u` (the handshake proof's balance: a
//!    phase needs every arrival op of its iteration; a count above the arrivals is C0021).
//!
//! Then, for a load of use `u` and a read of use `v` on one slot (`u = v mod D`): `v = u`:
//! the read follows the `full` wait of `u`, whose phase needs the load's bytes; `v < u`: the
//! read precedes the release of use `u - D >= v`, which the producer's `empty` wait of
//! iteration `u` (parity of use `u - D` or later) observes before `e` issues the load; `v >
//! u`: the reader waited on `full` for use `u` earlier in its program order. Two loads of one
//! slot (`u < u + D`): the load of `u` lands before `G`'s `full` wait of `u`, which precedes
//! the release of `u`, which the issuer observes before the load of `u + D`. Reads never
//! conflict with reads. So every pair of accesses of a slot buffer is ordered, for every trip
//! count.
//!
//! Complexity: O(ops · depth) plus the handshake proof and the iteration functions of the
//! indices: the ops are indexed once by array and by buffer (`OpIndex`), each slot buffer's
//! rules (its first deciding `full` wait, its arrivals with a suffix index of the ones run by
//! every thread, the loop's named barriers) are computed once, and each read then costs
//! O(empty arrays · log ops) binary searches; finding a load's `empty` arrays is O(waits)
//! per load.

use std::collections::{HashMap, HashSet};

use super::handshake_proof::{
    HandshakeVerdict, Parity, has_mbar, is_slot, parity_form, prove_handshakes, role_group,
};
use super::mbar_pipeline::{conjuncts, elected, is_mbar_op as is_mbar};
use super::proof::op_at;
use crate::ir::iterfn::IterFns;
use crate::ir::ranges::Ranges;
use crate::ir::*;

/// What the handshakes of a recognized two-role pipeline order.
pub(super) struct RolePlan {
    /// The slot buffers: every pair of their accesses is ordered.
    pub slots: HashSet<Buffer>,
    /// The TMA loads into them (not followed by the in-flight walk).
    pub loads: HashSet<Op>,
    /// Named barriers of one role's threads that the proof stands behind.
    pub named: HashSet<Op>,
    /// Reads of slot buffers ordered, and how many of them through the elected rule.
    pub reads: usize,
    pub elected: usize,
}

impl RolePlan {
    /// A summary for the proof's verdict.
    pub fn summary(&self) -> String {
        format!(
            "; {} TMA loads and {} slot reads of {} buffer(s) ordered by the roles' mbarrier handshakes ({} released by one elected arrival after the group's named barrier)",
            self.loads.len(),
            self.reads,
            self.slots.len(),
            self.elected
        )
    }
}

/// One arm of the role branch: its region, threads, loop and the program order of its ops.
struct Role<'k> {
    region: Region,
    threads: Vec<u32>,
    l: Op,
    fns: IterFns<'k>,
}

/// Recognizes the form (module doc). `Ok(None)`: no top-level role branch uses mbarriers.
pub(super) fn plan(k: &Kernel, td: &HashSet<Value>) -> Result<Option<RolePlan>, String> {
    let top = k.region_ops(k.body());
    let branches: Vec<(usize, Op)> = (top.iter().copied().enumerate())
        .filter(|(_, o)| {
            role_group(k, *o).is_some() && k.ops[*o].regions.iter().any(|&r| has_mbar(k, r))
        })
        .collect();
    let &[(_, br)] = branches.as_slice() else {
        return if branches.is_empty() {
            Ok(None)
        } else {
            Err("more than one role branch uses mbarriers".into())
        };
    };
    for v in prove_handshakes(k) {
        match v {
            HandshakeVerdict::Proved(_) => {}
            HandshakeVerdict::NotProved(why) => {
                return Err(format!("the roles' handshakes are not proved ({why})"));
            }
            HandshakeVerdict::Refuted(d) => {
                return Err(format!("the roles' handshakes fail ({})", d.message));
            }
        }
    }
    let parents = k.parents();
    let order: HashMap<Op, usize> = (k.ops_in_order().into_iter().enumerate())
        .map(|(i, o)| (o, i))
        .collect();
    for o in k.ops_in_order() {
        let inside = parents.ancestors(o).contains(&br);
        let init_before = matches!(k.ops[o].kind, OpKind::MbarInit { .. })
            && order[&o] < order[&br];
        if is_mbar(&k.ops[o].kind) && !inside && !init_before {
            return Err(format!("{} is an mbarrier op outside the role branch", op_at(k, o)));
        }
    }
    let ranges = Ranges::new(k);
    let g = role_group(k, br).ok_or("not a role branch")?;
    let (lo, hi) = (k.groups[g].lo, k.groups[g].hi);
    let (inside, outside): (Vec<u32>, Vec<u32>) =
        (0..k.threads()).partition(|t| (lo..hi).contains(t));
    let mut roles = Vec::new();
    for (&r, threads) in k.ops[br].regions.iter().zip([inside, outside]) {
        if (k.region_ops(r).iter()).any(|&o| role_group(k, o).is_some()) {
            return Err("a role branch nested in a role (more than two roles)".into());
        }
        let l = role_loop(k, parents, r)?;
        let hi = match &k.ops[l].kind {
            OpKind::For { hi, .. } => *hi,
            _ => return Err("no loop".into()),
        };
        if hi.value().is_some_and(|v| td.contains(&v)) {
            return Err(format!("{} has a thread-dependent trip count", op_at(k, l)));
        }
        let iv = k.region_args(k.ops[l].regions[0])[0];
        let max_iter = i64::try_from(ranges.range(iv).hi).unwrap_or(i64::MAX);
        let fns = IterFns::new(k, &ranges.inductions, l, max_iter)
            .ok_or("a role's loop has no constant lower bound and step")?;
        roles.push(Role {
            region: r,
            threads,
            l,
            fns,
        });
    }
    let mut cx = Cx {
        k,
        parents,
        order,
        roles,
        plan: RolePlan {
            slots: HashSet::new(),
            loads: HashSet::new(),
            named: HashSet::new(),
            reads: 0,
            elected: 0,
        },
        ix: OpIndex::new(k),
    };
    cx.named(br)?;
    cx.slots()?;
    Ok(Some(cx.plan))
}

/// The loop of a role: the one `for` of the arm (possibly under `if`s) holding its
/// mbarrier ops.
fn role_loop(k: &Kernel, parents: &Parents, r: Region) -> Result<Op, String> {
    let mut found = None;
    let mut stack = vec![r];
    while let Some(r) = stack.pop() {
        for &o in k.region_ops(r) {
            if is_mbar(&k.ops[o].kind) {
                let l = parents
                    .ancestors(o)
                    .into_iter()
                    .find(|p| matches!(k.ops[*p].kind, OpKind::For { .. }))
                    .ok_or_else(|| format!("{} is outside its role's loop", op_at(k, o)))?;
                if found.is_some_and(|f| f != l) {
                    return Err("a role runs its mbarrier ops in two loops".into());
                }
                found = Some(l);
            }
            stack.extend(k.ops[o].regions.iter().copied());
        }
    }
    found.ok_or_else(|| "a role without mbarrier ops".into())
}

struct Cx<'k> {
    k: &'k Kernel,
    parents: &'k Parents,
    order: HashMap<Op, usize>,
    roles: Vec<Role<'k>>,
    plan: RolePlan,
    ix: OpIndex,
}

/// The ops the slot checks visit, indexed once so that each read costs a few lookups and
/// binary searches instead of a walk over the kernel: every list is in program order.
#[derive(Default)]
struct OpIndex {
    /// `mbar_wait`s, all and per waited array.
    waits: Vec<Op>,
    waits_on: HashMap<Buffer, Vec<Op>>,
    /// `mbar_arrive`s (with or without `tx`) and `mbar_expect_tx`s per array.
    signals_on: HashMap<Buffer, Vec<Op>>,
    /// Shared accesses per root buffer: the op and the index of the access in its effects.
    accesses_of: HashMap<Buffer, Vec<(Op, usize)>>,
}

impl OpIndex {
    fn new(k: &Kernel) -> OpIndex {
        let mut ix = OpIndex::default();
        for o in k.ops_in_order() {
            match &k.ops[o].kind {
                OpKind::MbarWait { mbar, .. } => {
                    ix.waits.push(o);
                    ix.waits_on.entry(k.root_buffer(*mbar)).or_default().push(o);
                }
                OpKind::MbarArrive { mbar, .. } | OpKind::MbarExpectTx { mbar, .. } => {
                    ix.signals_on.entry(k.root_buffer(*mbar)).or_default().push(o);
                }
                _ => {}
            }
            for (i, a) in effects(k, o).shared.iter().enumerate() {
                ix.accesses_of.entry(k.root_buffer(a.mem)).or_default().push((o, i));
            }
        }
        ix
    }
}

/// What the reads of one slot buffer are checked against (conditions 1 to 3), computed once
/// per buffer: the first `full` wait that decides condition 1, the arrivals on each `empty`
/// array with who runs them (or the first arrival that breaks condition 3), and the named
/// barriers directly in the consumer's loop body.
struct ReadRules {
    /// The first `full` wait of the consumer that is either a full acquire or an error,
    /// with its position: a read after it is acquired (or fails with it).
    acquire: Option<(usize, Result<(), String>)>,
    /// Per `empty` array (in the caller's order): its arrivals' positions and runs, and for
    /// each index the first index at or after it run by every thread.
    arrivals: Result<Vec<Arrivals>, String>,
    /// Positions of the consumer loop's named barriers, ascending.
    barriers: Vec<usize>,
}

struct Arrivals {
    at: Vec<usize>,
    runs: Vec<Runs>,
    next_all: Vec<usize>,
}

/// Who runs an op in each iteration of its role's loop.
#[derive(Copy, Clone, PartialEq, Debug)]
enum Runs {
    /// Every thread of the role (under no condition between it and the arm).
    All,
    /// One elected thread (under `cmp eq tid, C` guards only).
    One(i64),
}

impl Cx<'_> {
    fn role_of(&self, o: Op) -> Option<usize> {
        let anc = self.parents.ancestors(o);
        self.roles.iter().position(|r| anc.contains(&r.l))
    }

    /// Who runs `o` of role `ri` each iteration: `Err` when it sits under a loop other than
    /// the role's or a condition other than an elected thread between it and the role's arm,
    /// or when the elected thread is not in the role.
    fn runs(&self, ri: usize, o: Op) -> Result<Runs, String> {
        let (k, role) = (self.k, &self.roles[ri]);
        let mut out = Runs::All;
        let mut cur = o;
        while self.parents.op_region[cur] != Some(role.region) {
            let Some(p) = self.parents.parent_op(cur) else {
                break;
            };
            if p == role.l {
                cur = p;
                continue;
            }
            let then_arm = self.parents.op_region[cur] == k.ops[p].regions.first().copied();
            let OpKind::If { cond } = &k.ops[p].kind else {
                return Err(format!("{} is under a loop inside its role's loop", op_at(k, o)));
            };
            let mut cs = Vec::new();
            conjuncts(k, *cond, &mut cs);
            for c in cs {
                if c == Operand::Imm(Scalar::I1(true)) {
                    continue;
                }
                let e = elected(k, c).filter(|_| then_arm).ok_or_else(|| {
                    format!(
                        "{} is under a condition that is not one elected thread",
                        op_at(k, o)
                    )
                })?;
                if out.ne(&Runs::All) && out != Runs::One(e) {
                    return Err(format!("{} is under two elected threads", op_at(k, o)));
                }
                out = Runs::One(e);
            }
            cur = p;
        }
        if let Runs::One(e) = out
            && !u32::try_from(e).is_ok_and(|e| role.threads.contains(&e))
        {
            return Err(format!(
                "{} is elected to thread {e}, which is not in its role",
                op_at(k, o)
            ));
        }
        Ok(out)
    }

    /// Every named barrier in the role branch is a `named_sync id, n` of one role with `n`
    /// its thread count, run by all of them each iteration (directly in the role's loop or
    /// at the arm's top level), and no op of another role or outside the branch uses `id`.
    fn named(&mut self, br: Op) -> Result<(), String> {
        let k = self.k;
        let mut ids: HashMap<u32, usize> = HashMap::new();
        for o in k.ops_in_order() {
            let id = match effects(k, o).sync {
                Some(SyncEffect::NamedSync { id, .. } | SyncEffect::NamedArrive { id, .. }) => id,
                _ => continue,
            };
            let inside = self.parents.ancestors(o).contains(&br);
            let ri = self
                .roles
                .iter()
                .position(|r| self.in_region(o, r.region))
                .filter(|_| inside);
            let ri = ri.ok_or_else(|| {
                format!("{} uses a named barrier outside the role branch", op_at(k, o))
            })?;
            if *ids.entry(id).or_insert(ri) != ri {
                return Err(format!("named barrier {id} is used by both roles"));
            }
            let role = &self.roles[ri];
            let OpKind::NamedSync { count, .. } = k.ops[o].kind else {
                return Err(format!(
                    "{} makes named-barrier phases depend on which threads arrive",
                    op_at(k, o)
                ));
            };
            let direct = self.parents.parent_op(o) == Some(role.l)
                || self.parents.op_region[o] == Some(role.region);
            let l_direct = self.parents.op_region[role.l] == Some(role.region);
            if count as usize != role.threads.len() || !direct || !l_direct {
                return Err(format!(
                    "{} is not a barrier of every thread of its role ({count} of {}, run each iteration by all)",
                    op_at(k, o),
                    role.threads.len()
                ));
            }
            self.plan.named.insert(o);
        }
        Ok(())
    }

    fn in_region(&self, o: Op, r: Region) -> bool {
        let mut cur = o;
        loop {
            if self.parents.op_region[cur] == Some(r) {
                return true;
            }
            match self.parents.parent_op(cur) {
                Some(p) => cur = p,
                None => return false,
            }
        }
    }

    /// The slot buffers and the orders of their accesses (module doc).
    fn slots(&mut self) -> Result<(), String> {
        let k = self.k;
        // Ordered: the first slot buffer that fails names the reason, the same in every run
        // (a HashMap's order made `prove` and `prove_pairwise` disagree on hostile P3).
        let mut full: std::collections::BTreeMap<Buffer, (Buffer, usize, i64)> = Default::default();
        for o in k.ops_in_order() {
            let OpKind::TmaLoad { dst, mbar, .. } = &k.ops[o].kind else {
                continue;
            };
            let b = k.root_buffer(*dst);
            let f = k.root_buffer(*mbar);
            let ri = self.role_of(o).ok_or("a TMA load outside the roles' loops")?;
            let Runs::One(e) = self.runs(ri, o)? else {
                return Err(format!("{} is not issued by one elected thread", op_at(k, o)));
            };
            self.slot_view(ri, *dst, b, f, o)?;
            // One load per slot buffer: two loads of one use could write the same bytes,
            // and the pairing argument orders only loads of different uses.
            if full.insert(b, (f, ri, e)).is_some() {
                return Err(format!(
                    "@{} is filled by more than one TMA load",
                    k.buffers[b].name
                ));
            }
            self.plan.loads.insert(o);
        }
        for (&b, &(f, pi, e)) in &full {
            self.full_signals(f, pi, e)?;
            let empties = self.empties(b, f, pi, e)?;
            let reads_before = self.plan.reads;
            self.slot_reads(b, f, 1 - pi, &empties)?;
            // The arrivals on `empty` are checked per read: a slot nobody reads has
            // unchecked releases, so it is left to the interpreter.
            if self.plan.reads == reads_before {
                return Err(format!("the TMA slot buffer @{} is never read", k.buffers[b].name));
            }
            self.plan.slots.insert(b);
        }
        Ok(())
    }

    /// Checks every access of slot buffer `b` (loaded through `f`) other than its load: a
    /// read in the consumer role `ci`, through a slot view, acquired and released.
    fn slot_reads(&mut self, b: Buffer, f: Buffer, ci: usize, empties: &[Buffer]) -> Result<(), String> {
        let k = self.k;
        let rules = self.read_rules(ci, f, empties);
        let accesses = self.ix.accesses_of.get(&b).cloned().unwrap_or_default();
        for (o, i) in accesses {
            if self.plan.loads.contains(&o) {
                continue;
            }
            let e = effects(k, o);
            let a = &e.shared[i];
            if a.kind != AccessKind::Read || self.role_of(o) != Some(ci) {
                return Err(format!(
                    "{} accesses the TMA slot buffer @{} other than by a read in the consumer role's loop",
                    op_at(k, o),
                    k.buffers[b].name
                ));
            }
            self.slot_view(ci, a.mem, b, f, o)?;
            self.acquire(&rules, f, o)?;
            self.release(&rules, o)?;
            self.plan.reads += 1;
        }
        Ok(())
    }

    /// `m` is `view @b[s]` with `s = i mod D` in role `ri`'s loop and `b`'s slots those of
    /// `f`.
    fn slot_view(&mut self, ri: usize, m: MemRef, b: Buffer, f: Buffer, o: Op) -> Result<(), String> {
        let k = self.k;
        let d = |x: Buffer| k.buffers[x].shape.first().copied();
        let ok = match m {
            MemRef::View(v) => {
                let vd = &k.views[v];
                match (vd.base, vd.indices.first()) {
                    (MemRef::Buffer(base), Some(ViewIndex::At(s))) if base == b && d(b) == d(f) => {
                        is_slot(k, &mut self.roles[ri].fns, *s, b)
                    }
                    _ => false,
                }
            }
            MemRef::Buffer(_) => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{} does not access @{} through `view @{}[i mod D]` with the slots of @{}",
                op_at(k, o),
                k.buffers[b].name,
                k.buffers[b].name,
                k.buffers[f].name
            ))
        }
    }

    /// Every arrival and `expect_tx` on `f` is the issuer `e`'s in role `pi`, and no
    /// `expect_tx` follows its last arrival there: a phase of `f` cannot complete before
    /// its loads' bytes are expected.
    fn full_signals(&self, f: Buffer, pi: usize, e: i64) -> Result<(), String> {
        let k = self.k;
        let (mut last_arrive, mut last_expect) = (None, None);
        for &o in self.ix.signals_on.get(&f).into_iter().flatten() {
            let expects = match &k.ops[o].kind {
                OpKind::MbarArrive { tx, .. } => tx.is_some(),
                _ => true,
            };
            if self.role_of(o) != Some(pi) || self.runs(pi, o)? != Runs::One(e) {
                return Err(format!(
                    "{} signals @{}, whose loads thread {e} issues, from another thread",
                    op_at(k, o),
                    k.buffers[f].name
                ));
            }
            let at = self.order[&o];
            if matches!(k.ops[o].kind, OpKind::MbarArrive { .. }) {
                last_arrive = Some(at);
            }
            if expects {
                last_expect = Some(at);
            }
        }
        if last_expect > last_arrive {
            return Err(format!(
                "@{} expects bytes after its last arrival: its phase may complete before the loads land",
                k.buffers[f].name
            ));
        }
        Ok(())
    }

    /// The `empty` arrays of slot buffer `b`: per load, the arrays of `D` slots that the
    /// issuer `e` waits on (slot `i mod D`) before the load in its iteration; every load must
    /// have one, and the same ones.
    fn empties(&self, b: Buffer, f: Buffer, pi: usize, e: i64) -> Result<Vec<Buffer>, String> {
        let k = self.k;
        let d = k.buffers[f].shape.first().copied();
        let mut common: Option<Vec<Buffer>> = None;
        for &ld in &self.plan.loads {
            let OpKind::TmaLoad { dst, .. } = &k.ops[ld].kind else {
                continue;
            };
            if k.root_buffer(*dst) != b {
                continue;
            }
            let mut es = Vec::new();
            for &o in &self.ix.waits {
                let OpKind::MbarWait { mbar, .. } = &k.ops[o].kind else {
                    continue;
                };
                let m = k.root_buffer(*mbar);
                if m == f
                    || k.buffers[m].shape.first().copied() != d
                    || self.role_of(o) != Some(pi)
                    || self.order[&o] > self.order[&ld]
                {
                    continue;
                }
                if matches!(self.runs(pi, o), Ok(r) if r == Runs::All || r == Runs::One(e)) {
                    es.push(m);
                }
            }
            es.sort();
            es.dedup();
            if es.is_empty() {
                return Err(format!(
                    "{} is issued without a wait of its thread on an `empty` mbarrier of the slot before it",
                    op_at(k, ld)
                ));
            }
            if common.as_ref().is_some_and(|c| *c != es) {
                return Err(format!("the loads of @{} wait on different arrays", k.buffers[b].name));
            }
            common = Some(es);
        }
        Ok(common.unwrap_or_default())
    }

    /// The rules the reads of one slot buffer are checked against ([`ReadRules`]): the
    /// consumer role `ci`, its `full` array `f`, the `empty` arrays.
    fn read_rules(&mut self, ci: usize, f: Buffer, empties: &[Buffer]) -> ReadRules {
        let fulls = self.waits(ci, f);
        let mut acquire = None;
        for &w in &fulls {
            match self.runs(ci, w) {
                Err(e) => acquire = Some((self.order[&w], Err(e))),
                Ok(Runs::All) if self.this_parity(ci, w, f) => acquire = Some((self.order[&w], Ok(()))),
                Ok(_) => continue,
            }
            break;
        }
        let first_full = fulls.first().map(|w| self.order[w]);
        let arrivals = (empties.iter())
            .map(|&em| self.arrivals(ci, em, first_full))
            .collect();
        let l = self.roles[ci].l;
        let mut barriers: Vec<usize> = (self.plan.named.iter())
            .filter(|b| self.parents.parent_op(**b) == Some(l))
            .map(|b| self.order[b])
            .collect();
        barriers.sort_unstable();
        ReadRules {
            acquire,
            arrivals,
            barriers,
        }
    }

    /// Condition 3 on the arrivals on `em`: each is the consumer role `ci`'s, after its
    /// first `full` wait (at `first_full`), run by all of the role or one elected thread.
    fn arrivals(&self, ci: usize, em: Buffer, first_full: Option<usize>) -> Result<Arrivals, String> {
        let k = self.k;
        let (mut at, mut runs) = (Vec::new(), Vec::new());
        for &a in self.ix.signals_on.get(&em).into_iter().flatten() {
            if !matches!(k.ops[a].kind, OpKind::MbarArrive { .. }) {
                continue;
            }
            let after_full = first_full.is_some_and(|w| w < self.order[&a]);
            if self.role_of(a) != Some(ci) || !after_full {
                return Err(format!(
                    "{} releases @{} outside the consumer role or before its `full` wait",
                    op_at(k, a),
                    k.buffers[em].name
                ));
            }
            // Every arrival's threads are read (an `else` arm of an elect guard runs in all
            // the other threads), whether or not it releases a read.
            runs.push(self.runs(ci, a)?);
            at.push(self.order[&a]);
        }
        let mut next_all = vec![at.len(); at.len() + 1];
        for i in (0..at.len()).rev() {
            next_all[i] = if runs[i] == Runs::All { i } else { next_all[i + 1] };
        }
        Ok(Arrivals { at, runs, next_all })
    }

    /// Condition 1: a `full` wait with this use's parity, run by every thread of the role,
    /// precedes the read `o` (the first wait that decides it, `rules.acquire`, does).
    fn acquire(&self, rules: &ReadRules, f: Buffer, o: Op) -> Result<(), String> {
        match &rules.acquire {
            Some((w, r)) if *w < self.order[&o] => r.clone(),
            _ => Err(format!(
                "{} reads a slot without a preceding `mbar_wait @{}` of every thread of its role with this use's parity",
                op_at(self.k, o),
                self.k.buffers[f].name
            )),
        }
    }

    fn waits(&self, ri: usize, f: Buffer) -> Vec<Op> {
        (self.ix.waits_on.get(&f).into_iter().flatten().copied())
            .filter(|&w| self.role_of(w) == Some(ri))
            .collect()
    }

    fn this_parity(&mut self, ri: usize, w: Op, f: Buffer) -> bool {
        let OpKind::MbarWait { parity, .. } = &self.k.ops[w].kind else {
            return false;
        };
        parity_form(self.k, &mut self.roles[ri].fns, *parity, f) == Some(Parity::This)
    }

    /// Conditions 2 and 3 for the read `o`: every arrival on each `empty` array is the
    /// consumer role's and follows a `full` wait, and one of them releases `o` (module doc):
    /// the first arrival after `o`, in the first array that has one, run by every thread, or
    /// by one elected thread after the first named barrier of the loop body after `o`.
    fn release(&mut self, rules: &ReadRules, o: Op) -> Result<(), String> {
        let at = self.order[&o];
        let arrays = rules.arrivals.as_ref().map_err(Clone::clone)?;
        let nb = rules.barriers.get(rules.barriers.partition_point(|&b| b < at));
        for a in arrays {
            let p = a.at.partition_point(|&x| x < at);
            let q = nb.map_or(a.at.len(), |&b| a.at.partition_point(|&x| x <= b));
            let first = a.next_all[p].min(p.max(q));
            if first < a.at.len() {
                if a.runs[first] != Runs::All {
                    self.plan.elected += 1;
                }
                return Ok(());
            }
        }
        Err(format!(
            "{} reads a slot that no release orders before its refill (an arrival on an `empty` mbarrier by every reader after the read, or by one elected thread after a named barrier of the whole role that follows the read)",
            op_at(self.k, o)
        ))
    }
}
