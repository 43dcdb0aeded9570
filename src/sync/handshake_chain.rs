//! Release/acquire chains of hand-written mbarrier handshakes (warp specialization): before
//! `sync` leaves a role branch's own handshakes as written (W1301), it checks that they order
//! every cross-role conflict on the roles' shared buffers, and refuses with **E0307** where
//! one is not (docs/pipeline.md, "Hand-written handshakes: what `sync` checks").
//!
//! Roles are the arms of role branches (`if %c` with `%c = in_group @g`, or a thread-id
//! compare with the same threads: `analysis::role_split`), nested ones
//! included; two accesses are *cross-role* when they lie in different arms of one role branch
//! (disjoint threads). For each cross-role pair `x` (role X), `y` (role Y) on one shared
//! buffer, at least one a write, both directions need a chain through one mbarrier element
//! `E[j]`:
//! - **release** of `x` on `E[j]`: `x` is a `tma_load` completing on `E[j]`; or an
//!   `mbar_arrive E[j]` of X follows `x` in the same iteration of the same innermost loop
//!   (outside a loop of the branch: with no loop between them, so both take one key position),
//!   executed whenever `x` is (its `if`s below the loop enclose `x`), or executed by an elected
//!   thread (extra `if`s whose conditions are thread-dependent) after a barrier of the role
//!   (`named_sync`/`barrier`, executed whenever `x` is) that follows `x`, or, for a `wgmma`,
//!   executed by one thread of every warpgroup that runs it, after its completing wait
//!   (`sync::wgmma_release`: the MMA's reads are the warpgroup's). An asynchronous
//!   access must first be completed by its own threads (before the barrier, or before the
//!   arrival): a `wgmma` read by a `wgmma_wait N`, a `tma_store` read by a `bulk_wait N` and
//!   a `cp_async` write by a `cp_async_wait N`, each after `N + 1` commits of its queue
//!   (`wgmma_commit`, `bulk_commit`, `cp_async_commit`) on every path since the access
//!   ([`completed_by`]; docs/async.md, "wgmma completion"). An arrival in a later iteration
//!   (a *delayed release*, CUTLASS's `wait 1; if i > 0 { arrive @empty[(i-1) mod D] }`)
//!   releases `x` only as `mbar_protocol`'s trace shows it (`Verdict::delayed`: every
//!   execution of `x` complete before the next arrival of its thread on its slot, and `y`'s
//!   acquire never keyed between the two: [`Cx::released_late`]); where it does not, E0307
//!   notes the arrival ([`Cx::delayed_arrival`]);
//! - **acquire** of `y` on `E[j]`: an `mbar_wait E[j]` of Y precedes `y` in the same
//!   iteration of the same innermost loop, executed whenever `y` is, and verified or taken as
//!   written by `analysis::mbar_protocol` (not among its unverified waits: the parity names the
//!   phase that holds the arrivals keyed before the wait, and the count holds every arriving
//!   thread — checked there, not here);
//! - **same element**: the index of the mbarrier op is the access's own slot operand (the
//!   buffer's first index, `view @X[%s]`), so both roles name element `j` exactly for slot
//!   `j`, or the same constant in both roles (one mbarrier for every slot). "Is the slot"
//!   compares values (`same_value`: the same pure op on operands that are the same value),
//!   so `sync`'s own `%hs_slot = rem %i, 2` next to the kernel's `%s = rem %i, 2` matches
//!   when its output is synchronized again (session 36's L5).
//!
//! **Whole orders** (`Cx::keyed_whole`): the direction `x -> y` holds when `x`'s release op
//! and a verified wait that dominates `y` (before it in a region enclosing it, possibly
//! outside its loops: `Cx::dominating_waits`) are in `mbar_protocol`'s `keyed_before`: every
//! `x` then precedes every `y` (a tile filled once before the loop). A release or acquire in
//! an enclosing loop also serves an access in inner loops below it that hold no mbarrier op
//! (`Cx::runs_around`, L11).
//!
//! **First fills**: the direction `x -> y` also holds when `y`'s release op and a wait
//! dominating `x` are in `mbar_protocol`'s `keyed_before` (every execution of the release
//! keyed before every execution of the wait on each element both touch): the verified wait
//! then returns after the release, so no execution of `x` on a slot precedes one of `y` on it
//! (a prologue loop's loads, J1b; docs/pipeline.md, "First fills").
//!
//! Pinned buffers whose bytes overlap are one buffer for the pairs (`ir::layout::share_bytes`,
//! docs/ir.md); the slot-relative element applies across two of them only when they hold
//! every element at the same bytes (`ir::layout::same_bytes`), else only a constant one.
//!
//! A branch without a loop in its arms, and none around it, runs each access once, and
//! `mbar_protocol` keys the earlier arm first: only the direction from the earlier arm to the
//! later one is required. With a loop around the branch (a persistent kernel's tile loop) the
//! later arm of one trip precedes the earlier arm of the next: both directions are.
//! With both chains for every pair, each execution of `y` follows the executions of `x` keyed
//! before it and precedes those keyed after it (the trace keys of `mbar_protocol`, whichever
//! alignment of the arms it chose: an access and its release share their arm's key
//! position, so `x` keyed before `y` puts the release before the acquire). An arrival before the
//! access (an "early arrive"), a wait after the refill, a wait on another role's mbarrier, a
//! guarded wait or arrival: no chain.
//!
//! **Named handshakes** (a named barrier id used in two roles) are not modelled here; they are
//! `smemsync check`'s (docs/pipeline.md, limits). A pair without an mbarrier chain is left to
//! them only where such a barrier *could* order it, in either direction: an op of one shared
//! id in `x`'s role runs after `x` (later in program order, or in a loop of the branch enclosing
//! both) and one in `y`'s role runs before `y` (likewise). Any other pair is E0307 as without
//! named barriers: a rendezvous after both roles' loops (N1) orders nothing inside them.
//!
//! Complexity: O(A² · S) per role branch with hand-written handshakes, A its shared accesses
//! and S its ops (each cross-role pair scans the branch's ops for its release and acquire;
//! A is a handful in real kernels, and other branches cost nothing).

use std::collections::{HashMap, HashSet};

use crate::analysis::mbar_protocol::LateReleases;
use crate::analysis::uniformity::Uniformity;
use crate::diag::{DiagKind, Diagnostic};
use super::handshake::Access;
use super::wgmma_release::warpgroup_release;
use crate::ir::*;

/// The arms enclosing an op, outermost first: (role branch, arm index).
type RolePath = Vec<(Op, usize)>;

/// An mbarrier element as both roles name it: the array and either "the access's own slot"
/// (`None`) or a constant element.
type Elem = (Buffer, Option<i64>);

/// What the chain check needs of one role branch.
struct Cx<'a> {
    k: &'a Kernel,
    /// The role branch checked.
    br: Op,
    unverified: &'a HashSet<Op>,
    /// `mbar_protocol`'s (release, wait) pairs keyed one before the other on every element.
    keyed_before: &'a HashSet<(Op, Op)>,
    /// `mbar_protocol`'s accesses released late: (access, buffer, mbarrier array) to the
    /// waits keyed between an execution and its release.
    delayed: &'a LateReleases,
    uni: Uniformity,
    /// Program order over the branch.
    pos: HashMap<Op, usize>,
    /// The branch's ops in program order.
    ops: Vec<Op>,
}

/// E0307 for every cross-role conflict of role branch `br` that no release/acquire chain
/// orders and no named barrier shared by its roles could order (those are `check`'s).
pub(crate) fn missing_chains(
    k: &Kernel,
    br: Op,
    unverified: &HashSet<Op>,
    (keyed_before, delayed): (&HashSet<(Op, Op)>, &LateReleases),
) -> Vec<Diagnostic> {
    let cx = Cx::new(k, br, unverified, (keyed_before, delayed));
    let named = cx.named_across_roles();
    let mut acc = Vec::new();
    for &r in &k.ops[br].regions {
        super::handshake::accesses(k, r, &mut acc);
    }
    let paths: Vec<RolePath> = acc.iter().map(|a| role_path(k, a.op)).collect();
    let looped = cx.looped();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    // The same checks trusting every wait: where they find the chain, the waits not
    // verified are the reason E0307 gives (hostile P3), not a missing release.
    let trust_all = HashSet::new();
    let trusting = std::cell::OnceCell::new();
    for i in 0..acc.len() {
        for j in 0..acc.len() {
            let (x, y, pp) = (&acc[i], &acc[j], (&paths[i], &paths[j]));
            if !cx.conflicts(x, y, pp, looped) {
                continue;
            }
            let ok = cx.chained(x, y);
            // A named barrier that could order the pair, either way, leaves it to `check`
            // (one that puts every `x` before every `y` also rules the direction y -> x out).
            let named_pair = cx.named_could_order(&named, x.op, y.op) || cx.named_could_order(&named, y.op, x.op);
            if !ok && !named_pair && seen.insert((x.op, y.op)) {
                let t = (!unverified.is_empty()).then(|| trusting.get_or_init(|| Cx::new(k, br, &trust_all, (keyed_before, delayed))));
                let untrusted = t.filter(|t| t.chained(x, y)).map(|t| t.unverified_waits(y, unverified)).filter(|m| !m.is_empty());
                out.push(cx.report(x, y, pp, untrusted));
            }
        }
    }
    out
}

impl<'a> Cx<'a> {
    /// The context of role branch `br` (its ops in program order, the kernel's uniformity).
    fn new(
        k: &'a Kernel,
        br: Op,
        unverified: &'a HashSet<Op>,
        (keyed_before, delayed): (&'a HashSet<(Op, Op)>, &'a LateReleases),
    ) -> Self {
        let mut ops = Vec::new();
        for &r in &k.ops[br].regions {
            super::handshake::walk_region(k, r, &mut ops);
        }
        let pos = ops.iter().enumerate().map(|(i, &o)| (o, i)).collect();
        let uni = crate::analysis::uniformity::analyze(k);
        Cx { k, br, unverified, keyed_before, delayed, uni, pos, ops }
    }

    /// Whether an access can run more than once: a loop in the branch, or around it (a
    /// persistent kernel's tile loop runs the later arm of one trip before the earlier arm
    /// of the next: both directions then hold conflicts).
    fn looped(&self) -> bool {
        let k = self.k;
        let around = k.parents().ancestors(self.br).into_iter().any(|o| is_loop(&k.ops[o].kind));
        around || (self.ops.iter()).any(|&o| is_loop(&k.ops[o].kind))
    }

    /// Whether `x -> y` is a cross-role conflict the chains must order: buffers sharing
    /// bytes, one a write, different roles, and (without a loop in or around the branch,
    /// where each access runs once and `y` is keyed after `x` only in a later arm:
    /// `mbar_protocol`'s keys) `y` in a later arm; the loop of `missing_chains` visits
    /// `(y, x)` for the other direction.
    fn conflicts(&self, x: &Access, y: &Access, (px, py): (&RolePath, &RolePath), looped: bool) -> bool {
        let aliases = crate::ir::layout::share_bytes(self.k, x.buffer, y.buffer);
        aliases && (x.write || y.write) && cross_role(px, py) && (looped || arm_before(px, py))
    }

    /// Whether a release/acquire chain, or a whole order, puts `x` before `y`. "The
    /// access's own slot" names the same bytes in both roles only on one buffer (or two
    /// pinned alike); across other aliasing buffers only a constant element (one mbarrier
    /// for every slot) orders them.
    fn chained(&self, x: &Access, y: &Access) -> bool {
        let by_slot = crate::ir::layout::same_bytes(self.k, x.buffer, y.buffer);
        let rel = self.release(x.op, x.slot);
        let acq = self.acquire(y.op, y.slot);
        rel.iter().any(|e| (by_slot || e.1.is_some()) && acq.contains(e))
            || (by_slot && self.released_late(x, y))
            || self.keyed_whole(x, y, by_slot)
            || (by_slot && self.keyed_whole(y, x, true))
    }
}

/// The role-branch arms enclosing `o`, outermost first.
fn role_path(k: &Kernel, o: Op) -> RolePath {
    let parents = k.parents();
    let mut path = Vec::new();
    let mut cur = o;
    while let Some(r) = parents.op_region[cur] {
        let Some(p) = parents.region_op[r] else {
            break;
        };
        if super::handshake::role_group(k, p).is_some() {
            let arm = k.ops[p].regions.iter().position(|&x| x == r).unwrap_or(0);
            path.push((p, arm));
        }
        cur = p;
    }
    path.reverse();
    path
}

/// Whether two role paths name disjoint thread sets: different arms of one role branch.
fn cross_role(a: &RolePath, b: &RolePath) -> bool {
    a.iter()
        .zip(b)
        .find(|(x, y)| x != y)
        .is_some_and(|(x, y)| x.0 == y.0)
}

/// Whether an op is a loop (its body runs once per iteration).
fn is_loop(kind: &OpKind) -> bool {
    matches!(kind, OpKind::For { .. } | OpKind::While { .. })
}

/// Whether op `o` is or holds an mbarrier op (one `mbar_protocol` traces).
fn holds_mbar(k: &Kernel, o: Op) -> bool {
    matches!(
        k.ops[o].kind,
        OpKind::MbarInit { .. } | OpKind::MbarArrive { .. } | OpKind::MbarExpectTx { .. } | OpKind::MbarWait { .. } | OpKind::TmaLoad { .. }
    ) || k.ops[o].regions.iter().any(|&r| k.region_ops(r).iter().any(|&c| holds_mbar(k, c)))
}

/// Whether role path `a` lies in an earlier arm than `b` of the branch where they part.
fn arm_before(a: &RolePath, b: &RolePath) -> bool {
    a.iter()
        .zip(b)
        .find(|(x, y)| x != y)
        .is_some_and(|(x, y)| x.0 == y.0 && x.1 < y.1)
}

impl Cx<'_> {
    /// Innermost enclosing loop (`for`, `while`) of `o`, if any.
    fn loop_of(&self, o: Op) -> Option<Op> {
        (self.k.parents().ancestors(o).into_iter()).find(|&x| is_loop(&self.k.ops[x].kind))
    }

    /// The `if` arms (regions) enclosing `o` below its innermost loop and its innermost role
    /// branch: an op runs whenever `o` does (in one iteration) if its arms are among these.
    fn guards(&self, o: Op) -> Vec<Region> {
        let (k, parents) = (self.k, self.k.parents());
        let mut out = Vec::new();
        let mut cur = o;
        while let Some(r) = parents.op_region[cur] {
            let Some(p) = parents.region_op[r] else { break };
            if is_loop(&k.ops[p].kind) || super::handshake::role_group(k, p).is_some() {
                break;
            }
            if matches!(k.ops[p].kind, OpKind::If { .. }) {
                out.push(r);
            }
            cur = p;
        }
        out
    }

    /// Whether `s` runs in the same iteration as `o`, in every execution of `o`; or, `o`
    /// lying in inner loops below `s`'s ([`Cx::runs_around`]), in the iteration of `s`'s loop
    /// that holds every execution of those inner loops.
    fn runs_with(&self, s: Op, o: Op) -> bool {
        if self.loop_of(s) != self.loop_of(o) {
            return self.runs_around(s, o);
        }
        let go = self.guards(o);
        self.guards(s).iter().all(|g| go.contains(g)) && self.same_arm_iteration(s, o)
    }

    /// Whether `s` runs, in every iteration of its innermost loop `L` (or once, without one)
    /// in which `o` runs, with `o` inside loops nested in `L` below `s`'s level (hostile L11:
    /// a slot filled by `for %j { store }` between the wait and the arrival). Then every
    /// execution of `o` in that iteration of `L` lies between `s` and the ops on the other
    /// side of the inner loops, so a wait before them acquires, and an arrival after them
    /// releases, all of them. Required: the loops between `o` and `L` lie in the branch and
    /// hold no mbarrier op (`mbar_protocol` then keys `o`'s executions at the position of
    /// `L`'s iteration, which `s` shares), no loop holding mbarrier ops lies between `s` and
    /// `o` in program order, and `s`'s `if` arms below `L` enclose `o`.
    fn runs_around(&self, s: Op, o: Op) -> bool {
        let (k, parents) = (self.k, self.k.parents());
        let l = self.loop_of(s);
        let anc = parents.ancestors(o);
        let below: &[Op] = match l {
            Some(l) => match anc.iter().position(|&a| a == l) {
                Some(n) => &anc[..n],
                None => return false,
            },
            None => &anc[..],
        };
        let mut arms = Vec::new();
        let mut cur = o;
        for &a in below {
            if is_loop(&k.ops[a].kind) && (!self.pos.contains_key(&a) || holds_mbar(k, a)) {
                return false;
            }
            if let Some(r) = parents.op_region[cur].filter(|_| matches!(k.ops[a].kind, OpKind::If { .. })) {
                arms.push(r);
            }
            cur = a;
        }
        // The role branch bounds the arms that select `o` (as `guards` does).
        let selects = |g: &Region| arms.contains(g);
        let (a, b) = (self.pos[&s].min(self.pos[&o]), self.pos[&s].max(self.pos[&o]));
        let between = self.ops[a + 1..b].iter().any(|&x| is_loop(&k.ops[x].kind) && !anc.contains(&x) && holds_mbar(k, x));
        below.iter().any(|&a| is_loop(&k.ops[a].kind)) && !between && self.guards(s).iter().all(selects)
    }

    /// Whether `s` and `o` (same innermost loop) share `mbar_protocol`'s position of an arm's
    /// iteration: they lie in one iteration of a loop inside the role branch, or no loop lies
    /// between them. Outside such a loop, an arm-level loop between them would key the later
    /// one after iterations of the other role that the earlier one precedes: a chain through
    /// it would not order the pairs keyed between (docs/pipeline.md, *Keys*).
    fn same_arm_iteration(&self, s: Op, o: Op) -> bool {
        let inside = self.loop_of(o).is_some_and(|l| self.k.parents().ancestors(l).contains(&self.br));
        let (a, b) = (self.pos[&s].min(self.pos[&o]), self.pos[&s].max(self.pos[&o]));
        inside || !self.ops[a + 1..b].iter().any(|&x| is_loop(&self.k.ops[x].kind))
    }

    /// Whether every `if` arm of `s` that does not enclose `o` is selected by a
    /// thread-dependent condition (an election, not an iteration guard).
    fn elected_from(&self, s: Op, o: Op) -> bool {
        let (k, go) = (self.k, self.guards(o));
        self.loop_of(s) == self.loop_of(o)
            && self.same_arm_iteration(s, o)
            && self.guards(s).iter().filter(|g| !go.contains(g)).all(|&g| {
                let owner = k.parents().region_op[g];
                matches!(owner.map(|p| &k.ops[p].kind), Some(OpKind::If { cond }) if !self.uni.operand_uniform(cond))
            })
    }

    /// The element of an mbarrier op index relative to an access's slot.
    fn elem(&self, mbar: MemRef, index: &[Operand], slot: Option<Operand>) -> Option<Elem> {
        let [i] = index else { return None };
        let b = self.k.root_buffer(mbar);
        if slot.is_some_and(|s| same_value(self.k, *i, s, SAME_VALUE_DEPTH)) {
            return Some((b, None));
        }
        match i {
            Operand::Imm(c) => Some((b, Some(c.as_i64()))),
            _ => None,
        }
    }

    /// The mbarrier elements on which `x` (slot `slot`) is released to another role.
    fn release(&self, x: Op, slot: Option<Operand>) -> Vec<Elem> {
        self.release_ops(x, slot).into_iter().map(|(_, e)| e).collect()
    }

    /// [`Cx::release`] with the op that releases on each element (`x` itself for a TMA load).
    fn release_ops(&self, x: Op, slot: Option<Operand>) -> Vec<(Op, Elem)> {
        let k = self.k;
        if let OpKind::TmaLoad { mbar, mbar_index, .. } = &k.ops[x].kind {
            return self.elem(*mbar, mbar_index, slot).into_iter().map(|e| (x, e)).collect();
        }
        let Some(after) = self.completed_at(x) else {
            return Vec::new();
        };
        let barrier = self.ops[after..].iter().find(|&&s| {
            matches!(k.ops[s].kind, OpKind::NamedSync { .. } | OpKind::Barrier) && self.runs_with(s, x)
        });
        let barrier = barrier.map(|b| self.pos[b]);
        let mut out = Vec::new();
        for &a in &self.ops[after + 1..] {
            let OpKind::MbarArrive { mbar, index, .. } = &k.ops[a].kind else {
                continue;
            };
            let every = self.runs_with(a, x);
            let elected = barrier.is_some_and(|b| b < self.pos[&a]) && self.elected_from(a, x);
            // One thread per warpgroup after its completing wait: the wgmma's reads are the
            // warpgroup's (`sync::wgmma_release`).
            let per_warpgroup = || self.elected_from(a, x) && warpgroup_release(k, x, a).is_ok();
            if every || elected || per_warpgroup() {
                out.extend(self.elem(*mbar, index, slot).map(|e| (a, e)));
            }
        }
        out
    }

    /// The position from which the access `x` is complete for the threads that issued it
    /// ([`completed_by`] over the ops that run with it, in its iteration). `None` when no
    /// completing wait follows (an arrival before it releases a copy still in flight: K1, K2).
    fn completed_at(&self, x: Op) -> Option<usize> {
        let after = self.ops[self.pos[&x] + 1..].iter().copied();
        completed_by(self.k, x, after.filter(|&o| self.runs_with(o, x))).map(|o| self.pos[&o])
    }

    /// Whether `mbar_protocol`'s trace shows `x` released late to `y` (`Verdict::delayed`):
    /// every execution of `x` on slot `e` is released by an arrival of its thread on `E[e]`
    /// after its completion, and `y` acquires its own slot of `E` by a wait never keyed
    /// between such an execution and its release (docs/async.md, "wgmma completion").
    fn released_late(&self, x: &super::handshake::Access, y: &super::handshake::Access) -> bool {
        let acq = self.acquire_ops(y.op, y.slot);
        (self.delayed.iter())
            .filter(|((o, b, _), _)| *o == x.op && *b == x.buffer)
            .any(|((_, _, e), between)| acq.iter().any(|(w, f)| *f == (*e, None) && !between.contains(w)))
    }

    /// The mbarrier elements `y` (slot `slot`) acquires: waits before it, in its iteration.
    fn acquire(&self, y: Op, slot: Option<Operand>) -> Vec<Elem> {
        self.acquire_ops(y, slot).into_iter().map(|(_, e)| e).collect()
    }

    /// [`Cx::acquire`] with the wait that acquires each element.
    fn acquire_ops(&self, y: Op, slot: Option<Operand>) -> Vec<(Op, Elem)> {
        let k = self.k;
        let py = self.pos[&y];
        (self.ops[..py].iter())
            .filter(|&&w| !self.unverified.contains(&w) && self.runs_with(w, y))
            .filter_map(|&w| match &k.ops[w].kind {
                OpKind::MbarWait { mbar, index, .. } => self.elem(*mbar, index, slot).map(|e| (w, e)),
                _ => None,
            })
            .collect()
    }

    /// Whether every execution of `a` comes before every execution of `b`: `a` is released on
    /// an element that a verified wait dominating `b` acquires, and `mbar_protocol` keyed
    /// every execution of that release before every execution of the wait; the
    /// slot-relative element counts only on one buffer (`by_slot`), as in the chain itself.
    /// Two uses (docs/pipeline.md): the direction `x -> y` is ordered whole with `(a, b) =
    /// (x, y)` (a tile filled once before the loop, read in every iteration after one wait:
    /// Triton's warp-specialized attention's Q), and holds no conflict with `(a, b) = (y, x)`
    /// (a first fill, J1b's prologue loop: every `y` precedes every `x` of its slot).
    fn keyed_whole(&self, a: &super::handshake::Access, b: &super::handshake::Access, by_slot: bool) -> bool {
        let rel = self.release_ops(a.op, a.slot);
        let acq = self.dominating_waits(b.op, b.slot);
        (rel.iter()).any(|(l, e)| {
            (by_slot || e.1.is_some())
                && acq.iter().any(|(w, f)| e == f && self.keyed_before.contains(&(*l, *w)))
        })
    }

    /// The verified waits that every execution of `y` follows in its thread: those before
    /// `y` in a region enclosing it within its role arm (unguarded there: the region's ops
    /// run in order up to `y`'s ancestor), with the element each acquires relative to
    /// `y`'s slot. Unlike [`Cx::acquire_ops`] the wait may lie outside `y`'s loops: it then
    /// orders `y` only after what was keyed before its one execution per entry, which is
    /// what [`Cx::keyed_whole`] asks (every execution of a release keyed before every
    /// execution of the wait).
    fn dominating_waits(&self, y: Op, slot: Option<Operand>) -> Vec<(Op, Elem)> {
        let (k, parents) = (self.k, self.k.parents());
        let mut regions = Vec::new();
        let mut cur = y;
        while let Some(r) = parents.op_region[cur] {
            regions.push(r);
            let Some(p) = parents.region_op[r] else { break };
            if p == self.br || super::handshake::role_group(k, p).is_some() {
                break;
            }
            cur = p;
        }
        let py = self.pos[&y];
        (self.ops[..py].iter())
            .filter(|&&w| !self.unverified.contains(&w))
            .filter(|&&w| parents.op_region[w].is_some_and(|r| regions.contains(&r)))
            .filter_map(|&w| match &k.ops[w].kind {
                OpKind::MbarWait { mbar, index, .. } => self.elem(*mbar, index, slot).map(|e| (w, e)),
                _ => None,
            })
            .collect()
    }

    /// The named barrier ops of the branch whose id is used in two roles (named handshakes:
    /// not modelled here), grouped by id.
    fn named_across_roles(&self) -> Vec<Vec<Op>> {
        let mut by_id: HashMap<u32, Vec<Op>> = HashMap::new();
        for &o in &self.ops {
            if let OpKind::NamedSync { id, .. } | OpKind::NamedArrive { id, .. } = self.k.ops[o].kind {
                by_id.entry(id).or_default().push(o);
            }
        }
        let paths = |ops: &[Op]| ops.iter().map(|&o| role_path(self.k, o)).collect::<Vec<_>>();
        (by_id.into_values())
            .filter(|ops| {
                let ps = paths(ops);
                ps.iter().any(|a| ps.iter().any(|b| cross_role(a, b)))
            })
            .collect()
    }

    /// Whether a named barrier of one id shared across roles could order `x` before `y`: one
    /// of its ops in `x`'s role runs after `x` and one in `y`'s role runs before `y` (later or
    /// earlier in program order, or inside a loop that also holds the access: another
    /// iteration). A loop around the branch counts only where neither access is in a loop
    /// of the branch: otherwise two iterations of one trip conflict with no named barrier
    /// between them (N1 in a tile loop). Generous on purpose: such pairs are left to `check`,
    /// the others are checked as without named barriers. O(named ops · depth).
    fn named_could_order(&self, named: &[Vec<Op>], x: Op, y: Op) -> bool {
        let (px, py) = (role_path(self.k, x), role_path(self.k, y));
        let same_role = |p: &RolePath, n: Op| {
            let pn = role_path(self.k, n);
            !cross_role(p, &pn) && !cross_role(&pn, p)
        };
        let inner = |a: Op| -> Vec<Op> {
            let anc = self.k.parents().ancestors(a);
            let below = anc.iter().position(|&o| o == self.br).unwrap_or(anc.len());
            anc[..below].iter().copied().filter(|&l| is_loop(&self.k.ops[l].kind)).collect()
        };
        let flat = inner(x).is_empty() && inner(y).is_empty();
        let shares_loop = |a: Op, n: Op| {
            let an = self.k.parents().ancestors(n);
            let loops = if flat { self.k.parents().ancestors(a) } else { inner(a) };
            (loops.into_iter()).any(|l| is_loop(&self.k.ops[l].kind) && an.contains(&l))
        };
        let after = |a: Op, n: Op| self.pos[&n] > self.pos[&a] || shares_loop(a, n);
        let before = |a: Op, n: Op| self.pos[&n] < self.pos[&a] || shares_loop(a, n);
        named.iter().any(|ops| {
            ops.iter().any(|&n| same_role(&px, n) && after(x, n)) && ops.iter().any(|&n| same_role(&py, n) && before(y, n))
        })
    }
}

impl Cx<'_> {
    /// The name of the role of path `p`: its group, or for an `else` arm the one declared
    /// group no enclosing branch tests, else "the threads outside @g".
    fn role_name(&self, p: &RolePath) -> String {
        let k = self.k;
        let Some(&(br, arm)) = p.last() else {
            return "the block".to_string();
        };
        let g = super::handshake::role_group(k, br).expect("a role branch");
        if arm == 0 {
            return format!("@{}", k.groups[g].name);
        }
        let tested: HashSet<Group> = (p.iter())
            .filter_map(|&(b, _)| super::handshake::role_group(k, b))
            .collect();
        let rest: Vec<Group> = k.groups.keys().filter(|g| !tested.contains(g)).collect();
        match rest[..] {
            [r] => format!("@{}", k.groups[r].name),
            _ => format!("the threads outside @{}", k.groups[g].name),
        }
    }

    /// The mbarrier arrays named by waits (`waits`) or arrivals in the iteration of `o`,
    /// before or after it, as a list for the message.
    fn sync_list(&self, o: Op, waits: bool) -> String {
        let k = self.k;
        let p = self.pos[&o];
        let range = if waits { &self.ops[..p] } else { &self.ops[p + 1..] };
        let mut names: Vec<String> = Vec::new();
        for &s in range {
            let m = match &k.ops[s].kind {
                OpKind::MbarWait { mbar, .. } if waits => *mbar,
                OpKind::MbarArrive { mbar, .. } if !waits => *mbar,
                _ => continue,
            };
            if self.loop_of(s) != self.loop_of(o) || role_path(k, s) != role_path(k, o) {
                continue;
            }
            let n = format!("@{}", k.buffers[k.root_buffer(m)].name);
            if !names.contains(&n) {
                names.push(n);
            }
        }
        if names.is_empty() {
            "no mbarrier".to_string()
        } else {
            names.join(", ")
        }
    }

    /// The waits of `unverified` that would acquire `y` if trusted (in its iteration, or
    /// dominating it), as the mbarrier arrays they wait on, for E0307's message.
    fn unverified_waits(&self, y: &super::handshake::Access, unverified: &HashSet<Op>) -> String {
        let k = self.k;
        let waits = self.acquire_ops(y.op, y.slot).into_iter().chain(self.dominating_waits(y.op, y.slot));
        let mut names: Vec<String> = Vec::new();
        for (w, _) in waits.filter(|(w, _)| unverified.contains(w)) {
            let OpKind::MbarWait { mbar, .. } = &k.ops[w].kind else { continue };
            let n = format!("@{}", k.buffers[k.root_buffer(*mbar)].name);
            if !names.contains(&n) {
                names.push(n);
            }
        }
        names.join(", ")
    }

    /// E0307 for the missing chain from `x` (released) to `y` (acquired); `untrusted`: the
    /// mbarriers of the waits not verified (W0318) without which the chain would hold.
    fn report(&self, x: &super::handshake::Access, y: &super::handshake::Access, (px, py): (&RolePath, &RolePath), untrusted: Option<String>) -> Diagnostic {
        let k = self.k;
        let (rx, ry) = (self.role_name(px), self.role_name(py));
        let buf = format!("@{}", k.buffers[x.buffer].name);
        let ybuf = match x.buffer == y.buffer {
            true => buf.clone(),
            false => format!("@{}", k.buffers[y.buffer].name),
        };
        let through = match x.buffer == y.buffer {
            true => String::new(),
            false => format!(" (through {ybuf}, pinned at bytes of {buf})"),
        };
        let verb = |w: bool| if w { "writes" } else { "reads" };
        let slot = match x.slot {
            Some(Operand::Value(v)) => match k.value_names.get(v) {
                "" => " at its slot".to_string(),
                n => format!(" slot %{n}"),
            },
            Some(Operand::Imm(c)) => format!(" slot {}", c.as_i64()),
            None => String::new(),
        };
        let arrives = self.sync_list(x.op, false);
        let signals = match (&untrusted, async_completion(&k.ops[x.op].kind)) {
            (Some(m), _) => format!("{ry}'s wait on {m} is not verified (W0318), so it orders nothing"),
            (None, Some((copy, wait))) => format!(
                "{rx}'s access is an asynchronous `{copy}`, released only by an arrival after a `{wait}` of its threads completes it, and none on those follows one (it arrives on {arrives})"
            ),
            (None, None) => format!("{rx} signals none of them after its access (it arrives on {arrives})"),
        };
        let msg = format!(
            "{rx} {} {buf}{slot}; {ry} {} it{through} after waiting only on {} in that iteration; {signals}: no mbarrier handshake orders {ry}'s access after {rx}'s",
            verb(x.write),
            verb(y.write),
            self.sync_list(y.op, true),
        );
        let d = Diagnostic::error(DiagKind::Finding, "E0307", msg)
            .with_label(k.span(y.op), format!("{ry} {} {ybuf} here", verb(y.write)))
            .with_label(k.span(x.op), format!("{rx} {} it here: no chain to the access above", verb(x.write)))
            .with_note("a hand-written handshake orders the roles only where the earlier access is followed by an arrival (after the access, in its iteration) on an mbarrier slot the later role waits on before its access (docs/pipeline.md)");
        let d = match (self.elected_arrival(x.op), self.delayed_arrival(x.op)) {
            (Some(a), _) => d.with_label(k.span(a), "this arrival runs in some threads only").with_note(self.elected_note(x.op, a)),
            (None, Some(a)) => d.with_label(k.span(a), "this arrival runs only in some iterations").with_note(
                "an arrival in a later iteration (a delayed release of the previous stage, as in CUTLASS's sm90 consumer mainloop after `wgmma_wait 1`) releases the access only where the mbarrier protocol's trace shows every execution of it complete before its thread's next arrival on its slot, and the other role's wait for the refill keyed after that arrival; here it does not (docs/async.md, \"wgmma completion\"); `smemsync check` decides such a kernel",
            ),
            (None, None) => d,
        };
        d.with_help(match untrusted {
            Some(m) => format!("the handshake orders the access if the wait on {m} is what it is taken for: see that wait's W0318 (`smemsync check` decides the protocol)"),
            None => format!("make {ry} wait before its access on an mbarrier {rx} arrives on after its access (the `empty`/`full` pair of the slot), or let `sync` place the handshakes: remove them from both roles"),
        })
    }

    /// E0307's note for an arrival `a` after the asynchronous access `x`, in its iteration, run
    /// by some of its threads only (an elected one): why it does not release `x`.
    fn elected_note(&self, x: Op, a: Op) -> String {
        let completed = self.completed_at(x).is_some_and(|p| p < self.pos[&a]);
        let why = match warpgroup_release(self.k, x, a) {
            _ if !completed => "it does not follow a wait of its thread that completes the access's group, so the access may still be in flight when it arrives".to_string(),
            Err(why) => why,
            Ok(()) => "it does release the wgmma's reads, but not on an mbarrier slot that the other role waits on before its access".to_string(),
        };
        format!("an arrival by some threads only releases a wgmma's reads for the whole warpgroup when it follows a `wgmma_wait` of its thread that completes the wgmma's group, one thread of every warpgroup that runs the wgmma arrives, and only those (docs/async.md, \"wgmma completion: the warpgroup\"); any other access needs an arrival of every thread that made it, or one elected thread's after a barrier of the role; here {why}")
    }

    /// For an access `x` in a loop: an arrival after it in its iteration run by some of its
    /// threads only (an elected one: [`Cx::elected_from`]), for E0307's note.
    fn elected_arrival(&self, x: Op) -> Option<Op> {
        let k = self.k;
        self.loop_of(x)?;
        (self.ops[self.pos[&x] + 1..].iter().copied()).find(|&a| {
            matches!(k.ops[a].kind, OpKind::MbarArrive { .. })
                && !self.runs_with(a, x)
                && self.elected_from(a, x)
                && super::wgmma_release::is_election(k, x, a)
        })
    }

    /// For an asynchronous access `x` in a loop: an arrival after it in its loop's body that
    /// does not run with it (under an `if` such as `i > 0`: the shape of a release delayed
    /// to a later iteration), for E0307's note.
    fn delayed_arrival(&self, x: Op) -> Option<Op> {
        let k = self.k;
        async_completion(&k.ops[x].kind)?;
        let l = self.loop_of(x)?;
        (self.ops[self.pos[&x] + 1..].iter().copied()).find(|&a| {
            matches!(k.ops[a].kind, OpKind::MbarArrive { .. }) && self.loop_of(a) == Some(l) && !self.runs_with(a, x)
        })
    }
}

/// How deep [`same_value`] follows two operands' definitions (sync's own slot values are
/// one `rem` of the loop counter deep; a kernel's own a few ops).
pub(crate) const SAME_VALUE_DEPTH: u32 = 8;

/// Whether operands `a` and `b` hold the same value wherever both are evaluated in one
/// iteration of one innermost loop by one thread (`Cx::runs_with`): the same SSA value or
/// constant, or results of the same pure op kind (constant, thread/block id, integer
/// arithmetic, compare, select, cast) on operands that are the same value in turn, up to
/// `depth` definitions deep. Exact, not a guess: a pure op is a function of its operands and
/// the thread, and an SSA leaf both trees share has one instance in that iteration (a value
/// defined in the loop body is visible only after its definition in the same iteration, one
/// defined outside is fixed across it). Loads and other memory ops are never the same value.
/// This is how sync's re-read output matches: the placer indexes its mbarriers by its own
/// `%hs_slot = rem %i, 2` where the access's view reads the kernel's `%s = rem %i, 2`.
pub(crate) fn same_value(k: &Kernel, a: Operand, b: Operand, depth: u32) -> bool {
    if a == b {
        return true;
    }
    let (Operand::Value(va), Operand::Value(vb)) = (a, b) else {
        return k.const_int(a).is_some() && k.const_int(a) == k.const_int(b);
    };
    let (ValueDef::Result(da, 0), ValueDef::Result(db, 0)) = (k.values[va].def, k.values[vb].def) else {
        return false;
    };
    if depth == 0 || k.values[va].ty != k.values[vb].ty {
        return false;
    }
    let same = |x: &Operand, y: &Operand| same_value(k, *x, *y, depth - 1);
    match (&k.ops[da].kind, &k.ops[db].kind) {
        (OpKind::Const(x), OpKind::Const(y)) => x == y,
        (OpKind::Special(x), OpKind::Special(y)) => x == y,
        (OpKind::Binary(f, x1, y1), OpKind::Binary(g, x2, y2)) => f == g && same(x1, x2) && same(y1, y2),
        (OpKind::Unary(f, x1), OpKind::Unary(g, x2)) => f == g && same(x1, x2),
        (OpKind::Cmp(f, x1, y1), OpKind::Cmp(g, x2, y2)) => f == g && same(x1, x2) && same(y1, y2),
        (OpKind::Cast(f, x1), OpKind::Cast(g, x2)) => f == g && same(x1, x2),
        (OpKind::Select(c1, x1, y1), OpKind::Select(c2, x2, y2)) => same(c1, c2) && same(x1, x2) && same(y1, y2),
        _ => false,
    }
}

/// For an asynchronous shared access: its mnemonic and the wait that completes it for its
/// own threads (what `Cx::completed_at` looks for), for E0307's message.
fn async_completion(kind: &OpKind) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        OpKind::Wgmma { .. } => ("wgmma", "wgmma_commit; wgmma_wait 0"),
        OpKind::TmaStore { .. } => ("tma_store", "bulk_commit; bulk_wait 0"),
        OpKind::CpAsync { .. } => ("cp_async", "cp_async_commit; cp_async_wait 0"),
        OpKind::CpAsyncTile(_) => ("cp_async_tile", "cp_async_commit; cp_async_wait 0"),
        OpKind::GatherToLds { .. } | OpKind::GatherToLdsTile(_) => ("gather_to_lds", "waitcnt"),
        OpKind::TdmLoad { .. } => ("tdm_load", "waitcnt"),
        _ => return None,
    })
}

/// A test on an op's kind (a commit, a wait).
pub(crate) type OpTest = fn(&OpKind) -> bool;

/// The op from which the shared access `x` is complete for the threads that issued it — the
/// one definition of "completed for its own threads" that the chain check (E0307), `sync`'s
/// own handshakes (`sync::handshake::release_point`) and `check`'s handshake proof share.
/// `after` are the ops that follow `x` in program order and run whenever it does, in its
/// iteration. `x` itself for a synchronous access; for an asynchronous one the first wait
/// among `after` that completes its group: `wgmma_wait N` (`bulk_wait N` for a `tma_store`
/// read, K1; `cp_async_wait N` for a `cp_async` write, K2) after at least `N + 1` commits of
/// its queue (`wgmma_commit`, `bulk_commit`, `cp_async_commit`): the first closes the
/// access's group, and a wait leaves pending only the `N` groups committed last, so with `N`
/// more committed after it the access's group is complete (PTX `wait_group N`; a wait before
/// any commit completes nothing of it, L1). Commits are counted on every path
/// ([`path_commits`]): an `if` among `after` whose every arm commits counts (M2b), one with
/// an arm that may skip it, and a loop, count what they commit at least (0 for a loop). `None`
/// when no such wait follows, and for copies whose counters are not modelled here
/// (`gather_to_lds`, TDM: [`completion_ops`] writes their `waitcnt`). O(|after| · depth).
pub(crate) fn completed_by(k: &Kernel, x: Op, after: impl IntoIterator<Item = Op>) -> Option<Op> {
    let (commit, wait) = match completion(&k.ops[x].kind) {
        Completion::Itself => return Some(x),
        Completion::Groups(commit, wait) => (commit, wait),
        Completion::Unmodelled => return None,
    };
    let parents = k.parents();
    // Commits on every path since `x`; `if`s and loops counted whole (their inner ops,
    // should a caller pass them too, are skipped: counted once).
    let mut commits: u64 = 0;
    let mut counted: Vec<Op> = Vec::new();
    for o in after {
        if !counted.is_empty() && parents.ancestors(o).iter().any(|a| counted.contains(a)) {
            continue;
        }
        // `if`s and loops: what every execution commits; other regions (`stage`) run their
        // ops in line, which come next in `after` when they run with `x`.
        if matches!(k.ops[o].kind, OpKind::If { .. }) || is_loop(&k.ops[o].kind) {
            commits += path_commits(k, o, commit);
            counted.push(o);
            continue;
        }
        if commit(&k.ops[o].kind) {
            commits += 1;
        } else if wait(&k.ops[o].kind).is_some_and(|n| commits > n as u64) {
            return Some(o);
        }
    }
    None
}

/// A test reading the group count of a wait (`wgmma_wait N`: `Some(N)`).
pub(crate) type WaitTest = fn(&OpKind) -> Option<u32>;

/// How a shared access is completed for the threads that issued it ([`completed_by`]).
pub(crate) enum Completion {
    /// A synchronous access: complete when it has run.
    Itself,
    /// An asynchronous access completed by a wait of its group queue: the queue's commit and
    /// wait (`wgmma_commit` / `wgmma_wait N`, `bulk_commit` / `bulk_wait N`,
    /// `cp_async_commit` / `cp_async_wait N`).
    Groups(OpTest, WaitTest),
    /// A copy whose counter is not modelled here (`gather_to_lds`, TDM: [`completion_ops`]).
    Unmodelled,
}

/// How an access of kind `kind` is completed for its own threads: the one table that
/// [`completed_by`] and `analysis::mbar_protocol`'s delayed releases read.
pub(crate) fn completion(kind: &OpKind) -> Completion {
    match kind {
        OpKind::Wgmma { .. } => Completion::Groups(
            |o| matches!(o, OpKind::WgmmaCommit),
            |o| if let OpKind::WgmmaWait(n) = o { Some(*n) } else { None },
        ),
        OpKind::TmaStore { .. } => Completion::Groups(
            |o| matches!(o, OpKind::BulkCommit),
            |o| if let OpKind::BulkWait(n) = o { Some(*n) } else { None },
        ),
        OpKind::CpAsync { .. } | OpKind::CpAsyncTile(_) => Completion::Groups(
            |o| matches!(o, OpKind::CpAsyncCommit),
            |o| if let OpKind::CpAsyncWait(n) = o { Some(*n) } else { None },
        ),
        OpKind::GatherToLds { .. } | OpKind::GatherToLdsTile(_) | OpKind::TdmLoad { .. } => Completion::Unmodelled,
        _ => Completion::Itself,
    }
}

/// The commits (ops passing `commit`) that every execution of op `o` runs: 1 for a commit,
/// for an `if` the fewest over its arms (an arm that may be skipped, `if` without `else`,
/// counts its empty arm), for a loop 0 (it may run no iteration), else 0. A lower bound of
/// the groups `o` closes, which is what completion needs ([`completed_by`]). O(ops under `o`).
fn path_commits(k: &Kernel, o: Op, commit: OpTest) -> u64 {
    match &k.ops[o].kind {
        kind if commit(kind) => 1,
        OpKind::If { .. } => {
            let arm = |r: Region| k.region_ops(r).iter().map(|&c| path_commits(k, c, commit)).sum::<u64>();
            let arms = &k.ops[o].regions;
            if arms.len() < 2 {
                return 0;
            }
            arms.iter().map(|&r| arm(r)).min().unwrap_or(0)
        }
        // A `stage` region runs its ops once, in line.
        OpKind::Stage { .. } => k.ops[o].regions.iter().flat_map(|&r| k.region_ops(r)).map(|&c| path_commits(k, c, commit)).sum(),
        _ => 0,
    }
}

/// The ops that complete the asynchronous access kind `kind` for its own threads when none
/// follows it ([`completed_by`] is `None`): a commit closing its group and the wait for every
/// group, or the `waitcnt` of its counter. Empty for a synchronous access.
pub(crate) fn completion_ops(kind: &OpKind) -> Vec<OpKind> {
    match kind {
        OpKind::Wgmma { .. } => vec![OpKind::WgmmaCommit, OpKind::WgmmaWait(0)],
        OpKind::TmaStore { .. } => vec![OpKind::BulkCommit, OpKind::BulkWait(0)],
        OpKind::CpAsync { .. } | OpKind::CpAsyncTile(_) => vec![OpKind::CpAsyncCommit, OpKind::CpAsyncWait(0)],
        OpKind::GatherToLds { .. } | OpKind::GatherToLdsTile(_) => vec![OpKind::WaitCnt(vec![(Counter::AsyncCnt, 0)])],
        OpKind::TdmLoad { .. } => vec![OpKind::WaitCnt(vec![(Counter::TensorCnt, 0)])],
        _ => Vec::new(),
    }
}
