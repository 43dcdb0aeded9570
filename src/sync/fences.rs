//! Proxy-fence placement (NVIDIA sm_90): where `fence_proxy_async` must go so that shared
//! memory written through the generic proxy (ordinary stores, atomics, `local_store`) is
//! visible to a later access through the async proxy (wgmma operands, TMA store sources, TMA
//! load destinations), docs/ir.md section 5.
//!
//! What it computes: a [`SyncPlan`] of fences on a kernel whose barriers are already placed
//! (the driver runs it after barrier placement): for every pair *generic write `w` → async
//! access `a`* of one shared buffer (or of pinned buffers whose bytes overlap) such that some
//! path from `w` to `a` has no fence, a fence that the writing thread executes after `w` and
//! before the sync op that publishes `w` to `a`'s issuer.
//!
//! Model: a forward dataflow over the region tree. The lattice is the set of *pending*
//! writes (generic writes to async-read buffers with a fence-free path to the current point),
//! each with its state on the path — unfenced, *published* (past a sync op with no fence
//! first) or *late* (fenced only after it was published: the writer's fence then precedes no
//! release, so another thread's async access is not ordered after it) — ordered by
//! inclusion, joined by union; a fence (written, or planned) ends the unfenced writes and
//! makes the published ones late, a block barrier ends the late ones; a loop
//! body is walked until the set at its head is stable, both arms of an `if` start from one
//! input and are joined. At an async access whose buffers meet the pending set, a fence is
//! planned at the latest point that still serves every pending write it needs:
//! - just before the most recent *block barrier* (`barrier`, or `named_sync` over the whole
//!   block) of an enclosing region sequence that every such write reached before it (none
//!   re-written since on a path that skips it) — this adds no barrier, the fence rides on one
//!   that placement already needed, every thread executes it (hence the writers), and the
//!   barrier orders it before the issue; the outermost such barrier is chosen (fewest
//!   executions);
//! - otherwise just before the access: then no block barrier lies between, so (the barriers
//!   being placed) the writer is the issuing thread itself, or the pair is ordered by a finer
//!   sync (warp sync, named barrier, mbarrier), which this placer does not ride on.
//!
//! A planned fence changes the dataflow before the point where it was decided, so the walk
//! restarts until no fence is added (at most one restart per fence).
//!
//! Optimality: in straight-line code the fences are the right end points of the pairs'
//! intervals (write, publishing release), which is the greedy optimum of interval stabbing:
//! one fence serves every pair whose interval contains it. Across loops and both arms of an
//! `if` the choice is a heuristic (latest point, outermost release), never unsound: the
//! checker re-proves the result (`check::race`, C0013). Pairs across the arms of a divergent
//! role branch (producer warps write, consumer warps issue wgmma after a named barrier) are on
//! no single thread's path; a second pass (`role_branch_fences`) puts the fence in the
//! writer's arm, before the first later op there that holds a sync op (its arrive), one fence
//! per such point. Complexity: O(restarts x ops x pending), plus O(ifs x ops) for role
//! branches.
//!
//! Independence: uses the IR and the effects table only, like every placer.
//!
//! Source: the PTX ISA memory consistency model (generic and async proxies,
//! `fence.proxy.async`), and the CUTLASS convention of a `fence_view_async_shared()` in every
//! writing thread before the barrier that precedes a TMA store or wgmma of shared memory
//! written by ordinary stores.

use std::collections::{BTreeSet, HashSet};

use crate::ir::edit::{Edit, EditReason, ProgramPoint, SyncPlan};
use crate::ir::*;

/// The fences `k` needs (empty when none), sorted in program order.
pub fn place_fences(k: &Kernel) -> SyncPlan {
    let async_bufs = async_buffers(k);
    let mut plan = SyncPlan::default();
    if async_bufs.is_empty() {
        return plan;
    }
    let mut before: HashSet<ProgramPoint> = HashSet::new();
    loop {
        let mut w = Walk {
            k,
            async_bufs: &async_bufs,
            fence_at: &before,
            frames: Vec::new(),
            log: Vec::new(),
            new: None,
        };
        let mut pending = BTreeSet::new();
        w.region(k.body(), &mut pending);
        let decided = w.new;
        match decided {
            Some((at, why)) if before.insert(at) => plan.edits.push(Edit {
                at,
                op: OpKind::FenceProxyAsync,
                reason: EditReason::Other(why),
            }),
            _ => break,
        }
    }
    role_branch_fences(k, &async_bufs, &mut plan);
    plan.sort(k);
    plan
}

/// Producer/consumer role branches: a generic write in one arm of a divergent `if` whose
/// other arm holds an async-proxy access of the same bytes. No thread runs both arms, so the
/// walk above (one thread's paths) never pairs them; the writer must fence its own writes
/// before the release that publishes them to the other arm (a named barrier or mbarrier
/// arrive, usually). The fence goes just before the first op after the write, within its arm,
/// that is or contains a sync op, else at the end of the arm; none when a fence already
/// follows the write there. One fence serves every write that reaches the same point.
fn role_branch_fences(k: &Kernel, async_bufs: &HashSet<Buffer>, plan: &mut SyncPlan) {
    let parents = k.parents();
    let uni = crate::analysis::uniformity::analyze(k);
    let mut placed: HashSet<ProgramPoint> = HashSet::new();
    for l in k.ops_in_order() {
        let od = &k.ops[l];
        if !matches!(od.kind, OpKind::If { .. }) || od.regions.len() != 2 {
            continue;
        }
        if !od.regions.iter().any(|&r| uni.is_divergent(r)) {
            continue;
        }
        for (wa, ra) in [(od.regions[0], od.regions[1]), (od.regions[1], od.regions[0])] {
            let read: Vec<Buffer> = ops_under(k, ra)
                .into_iter()
                .filter(|&o| is_async_proxy(&k.ops[o].kind))
                .flat_map(|o| effects(k, o).shared.into_iter().map(|a| k.root_buffer(a.mem)))
                .collect();
            if read.is_empty() {
                continue;
            }
            for w in ops_under(k, wa) {
                let writes = effects(k, w).shared.iter().any(|a| {
                    let b = k.root_buffer(a.mem);
                    !a.kind.is_async()
                        && a.kind.writes()
                        && async_bufs.contains(&b)
                        && read.iter().any(|&x| overlap(k, x, b))
                });
                if !writes {
                    continue;
                }
                let Some(at) = publish_point(k, parents, w, wa) else {
                    continue;
                };
                if placed.insert(at) {
                    let what = |o: Op| crate::ir::text::op_label(k, o);
                    plan.edits.push(Edit {
                        at,
                        op: OpKind::FenceProxyAsync,
                        reason: EditReason::Other(format!(
                            "generic write {} in one arm of a role branch, read by the async proxy in the other",
                            what(w)
                        )),
                    });
                }
            }
        }
    }
}

/// Every op inside region `r`, nested ones included.
fn ops_under(k: &Kernel, r: Region) -> Vec<Op> {
    let mut out = Vec::new();
    for &o in k.region_ops(r) {
        out.push(o);
        for &c in &k.ops[o].regions {
            out.extend(ops_under(k, c));
        }
    }
    out
}

/// Where the writer of `w` (inside arm `arm`) fences before publishing: just before the first
/// later op of its arm that is or holds a sync op, else the arm's end; `None` when a fence
/// comes first.
fn publish_point(k: &Kernel, parents: &Parents, w: Op, arm: Region) -> Option<ProgramPoint> {
    let mut cur = w;
    loop {
        let r = parents.op_region[cur]?;
        let ops = k.region_ops(r);
        let idx = ops.iter().position(|&o| o == cur)?;
        for &o in &ops[idx + 1..] {
            if matches!(k.ops[o].kind, OpKind::FenceProxyAsync) {
                return None;
            }
            let mut inner =
                std::iter::once(o).chain(k.ops[o].regions.iter().flat_map(|&c| ops_under(k, c)));
            if inner.any(|x| effects(k, x).sync.is_some()) {
                return Some(ProgramPoint::before(o));
            }
        }
        if r == arm {
            return Some(ProgramPoint::end(arm));
        }
        cur = parents.region_op[r]?;
    }
}

/// Whether an op's shared accesses go through the async proxy.
fn is_async_proxy(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Wgmma { .. } | OpKind::TmaLoad { .. } | OpKind::TmaStore { .. }
    )
}

/// Buffers some async-proxy access touches, closed under byte overlap of pinned buffers.
fn async_buffers(k: &Kernel) -> HashSet<Buffer> {
    let mut out = HashSet::new();
    for op in k.ops_in_order() {
        if is_async_proxy(&k.ops[op].kind) {
            for a in effects(k, op).shared {
                out.insert(k.root_buffer(a.mem));
            }
        }
    }
    let aliases: Vec<Buffer> = k
        .buffers
        .keys()
        .filter(|&b| !out.contains(&b) && out.iter().any(|&a| overlap(k, a, b)))
        .collect();
    out.extend(aliases);
    out
}

/// Whether two buffers may share bytes (only pinned buffers alias).
fn overlap(k: &Kernel, a: Buffer, b: Buffer) -> bool {
    let (x, y) = (&k.buffers[a], &k.buffers[b]);
    match (x.offset, y.offset) {
        (Some(ox), Some(oy)) => ox < oy + y.bytes() && oy < ox + x.bytes(),
        _ => a == b,
    }
}

/// Where a pending generic write stands on one path to the current point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum St {
    /// No fence and no sync op since the write.
    Unfenced,
    /// Past a sync op (which may publish the write to other threads) with no fence before it.
    Published,
    /// Fenced only after a sync op published it: the fence serves the writer's own later
    /// async accesses, other threads' only once a later block barrier orders them after it
    /// (session 35's K5: `store; barrier; fence_proxy_async; tma_store` from another thread).
    Late,
}

/// The pending writes: each with its state on some path (a powerset lattice, joined by
/// union: one write may stand differently on two paths).
type Pending = BTreeSet<(Op, St)>;

/// A fence: unfenced writes are done with; published ones become late.
fn fence(pending: &mut Pending) {
    *pending = (pending.iter())
        .filter_map(|&(w, st)| match st {
            St::Unfenced => None,
            St::Published | St::Late => Some((w, St::Late)),
        })
        .collect();
}

/// A sync op: unfenced writes may now be seen by other threads; a block barrier also orders
/// every late fence before what follows it.
fn publish(pending: &mut Pending, block: bool) {
    *pending = (pending.iter())
        .filter_map(|&(w, st)| match st {
            St::Late if block => None,
            St::Unfenced => Some((w, St::Published)),
            other => Some((w, other)),
        })
        .collect();
}

/// Every write of `pending`, once (whatever its state).
fn all_writes(pending: &Pending) -> BTreeSet<Op> {
    pending.iter().map(|&(w, _)| w).collect()
}

/// The writes of `pending` that are unfenced (on some path).
fn unfenced(pending: &Pending) -> BTreeSet<Op> {
    (pending.iter()).filter(|(_, st)| *st != St::Late).map(|&(w, _)| w).collect()
}

/// A block barrier passed on the way to the current point: the barrier op, the writes
/// unfenced just before it, and the log length there.
type Release = (Op, BTreeSet<Op>, usize);

/// The most recent block barrier of one region sequence being walked.
struct Frame {
    release: Option<Release>,
}

struct Walk<'a> {
    k: &'a Kernel,
    async_bufs: &'a HashSet<Buffer>,
    /// The fences planned so far (a restart's walk treats them as written).
    fence_at: &'a HashSet<ProgramPoint>,
    frames: Vec<Frame>,
    /// Every pending write added, in walk order (a frame remembers its length).
    log: Vec<Op>,
    /// The first fence this walk decides: where and why.
    new: Option<(ProgramPoint, String)>,
}

impl Walk<'_> {
    fn region(&mut self, r: Region, pending: &mut Pending) {
        self.region_from(r, pending, None);
    }

    /// Walks region `r` whose entry every path reaches through `release` (a block barrier
    /// before it in the same sequence of control, or `None`); returns the region's most
    /// recent block barrier at its end (`release` when it holds none at its top level).
    fn region_from(
        &mut self,
        r: Region,
        pending: &mut Pending,
        release: Option<Release>,
    ) -> Option<Release> {
        self.frames.push(Frame { release });
        for &op in self.k.region_ops(r) {
            if self.fence_at.contains(&ProgramPoint::before(op)) {
                fence(pending);
            }
            self.op(op, pending);
        }
        if self.fence_at.contains(&ProgramPoint::end(r)) {
            fence(pending);
        }
        self.frames.pop().and_then(|f| f.release)
    }

    /// A loop: the head's set grows to a fixpoint (0 trips keeps the entry set). A write
    /// that reaches an async access of a later trip crosses the back edge, so it passed the
    /// last top-level block barrier of the previous trip (when every path does: the walk of
    /// one trip chains the regions' barriers, a condition's into the body): from the second
    /// pass on, the first region starts with that barrier as its release, for the writes
    /// that pass it — not those pending at the loop's entry, which reach the first trip
    /// without it. A fence before it is executed by every thread, the writers included
    /// (docs/placement.md, "Proxy fences").
    fn walk_loop(&mut self, regions: &[Region], pending: &mut Pending) {
        let entry = unfenced(pending);
        let mut carried: Option<Release> = None;
        loop {
            let mut cur = pending.clone();
            let mut release = carried.take();
            for &c in regions {
                release = self.region_from(c, &mut cur, release);
            }
            carried = release.map(|(b, seen, len)| (b, &seen - &entry, len));
            let before = pending.len();
            pending.extend(cur);
            if pending.len() == before {
                break;
            }
        }
    }

    fn op(&mut self, op: Op, pending: &mut Pending) {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::If { .. } => {
                let mut other = pending.clone();
                self.region(od.regions[0], pending);
                self.region(od.regions[1], &mut other);
                pending.extend(other);
            }
            OpKind::For { .. } | OpKind::While { .. } => self.walk_loop(&od.regions, pending),
            OpKind::Stage { .. } => self.region(od.regions[0], pending),
            OpKind::FenceProxyAsync => fence(pending),
            kind if is_async_proxy(kind) => self.async_access(op, pending),
            _ => {
                let e = effects(k, op);
                if let Some(s) = &e.sync {
                    let block = is_block_release(s, k.threads());
                    if block && let Some(f) = self.frames.last_mut() {
                        f.release = Some((op, unfenced(pending), self.log.len()));
                    }
                    publish(pending, block);
                }
                for a in &e.shared {
                    let generic_write = !a.kind.is_async() && a.kind.writes();
                    if generic_write && self.async_bufs.contains(&k.root_buffer(a.mem)) {
                        pending.insert((op, St::Unfenced));
                        self.log.push(op);
                    }
                }
            }
        }
    }

    /// An async-proxy access: plans a fence for the pending writes to its buffers.
    fn async_access(&mut self, op: Op, pending: &mut Pending) {
        let k = self.k;
        let bufs: Vec<Buffer> = effects(k, op)
            .shared
            .iter()
            .map(|a| k.root_buffer(a.mem))
            .collect();
        let needs: Vec<Op> = all_writes(pending)
            .into_iter()
            .filter(|&w| {
                effects(k, w)
                    .shared
                    .iter()
                    .any(|a| bufs.iter().any(|&b| overlap(k, k.root_buffer(a.mem), b)))
            })
            .collect();
        if needs.is_empty() {
            return;
        }
        // The outermost release every needed write reached, unfenced and not re-written since.
        let at = self
            .frames
            .iter()
            .filter_map(|f| f.release.as_ref())
            .find(|(_, seen, len)| {
                needs
                    .iter()
                    .all(|w| seen.contains(w) && !self.log[*len..].contains(w))
            })
            .map(|(rel, _, _)| ProgramPoint::before(*rel));
        let at = at.unwrap_or_else(|| self.writer_point(&needs, op));
        if self.new.is_none() {
            let what = |o: Op| crate::ir::text::op_label(k, o);
            self.new = Some((
                at,
                format!(
                    "generic writes ({}) read by the async proxy at {}",
                    needs.iter().map(|&w| what(w)).collect::<Vec<_>>().join(", "),
                    what(op)
                ),
            ));
        }
        pending.clear();
    }

    /// Where a fence goes for writes `needs` that reach async access `op` with no block
    /// barrier they all passed: in the first write's thread, right after it — before the
    /// first later op of its region that is or holds a sync op or an async-proxy access,
    /// else at the region's end. The writer executes it after the write and before any
    /// release that follows, so it serves `op` whoever issues it (the writer itself, or a
    /// thread that a finer sync or a later trip's barrier orders after the writer); a fence
    /// just before `op` would serve only the issuer's own writes. The restart walk fences
    /// the remaining writes one point at a time.
    fn writer_point(&self, needs: &[Op], op: Op) -> ProgramPoint {
        let k = self.k;
        let Some(&w) = needs.first() else {
            return ProgramPoint::before(op);
        };
        let Some(r) = k.parents().op_region[w] else {
            return ProgramPoint::before(op);
        };
        let ops = k.region_ops(r);
        let idx = ops.iter().position(|&o| o == w).map_or(ops.len(), |i| i + 1);
        let publishes = |x: Op| effects(k, x).sync.is_some() || is_async_proxy(&k.ops[x].kind);
        ops[idx..]
            .iter()
            .find(|&&o| publishes(o) || k.ops[o].regions.iter().any(|&c| ops_under(k, c).into_iter().any(publishes)))
            .map_or(ProgramPoint::end(r), |&o| ProgramPoint::before(o))
    }
}

/// Block-wide barriers: a fence before one happens before every later op of every thread.
/// (Warp syncs, partial named barriers and mbarrier arrives order only some threads after
/// the fence, so a fence riding on them could miss the issuer.)
fn is_block_release(s: &SyncEffect, threads: u32) -> bool {
    match s {
        SyncEffect::Barrier => true,
        SyncEffect::NamedSync { count, .. } => *count >= threads,
        _ => false,
    }
}
