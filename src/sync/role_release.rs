//! The role barrier before an elected signal: in a role (an arm of a thread-dependent `if`),
//! an `mbar_wait` that every thread of the role runs must be ordered, by a barrier of the
//! role, before a later op that one elected thread of the role runs and that can complete an
//! mbarrier phase another role waits for (`mbar_arrive`, with or without `tx`,
//! `mbar_expect_tx`, `tma_load`). docs/placement.md, "Mbarrier objects", rule 2.
//!
//! Why (a liveness hazard on the waited mbarrier's parity): the elected thread's signal lets
//! the other role run on and complete the *next* phase of the mbarrier the role waited on
//! (its arrivals follow its own wait for the signal). A thread of the role that has not yet
//! tested the parity then sees two completed phases, the parity of the current one equal to
//! the one it waits for, and waits for a phase that its own role's progress never brings:
//! a deadlock (`check` reports it, C0002). The signal releases only the elected thread's own
//! past; a barrier of the role before it releases every thread's wait.
//!
//! Model: each such (wait, signal) pair is an ordering hazard between the wait's and the
//! signal's mbarrier-object accesses (`analysis::mbar_object`), with the coverage of an
//! ordinary hazard (forward in one iteration, and carried by every common loop), so the
//! optimal placer serves it and the data hazards with the fewest barriers, written as the
//! role's named barrier. A role is recognized structurally: a wait's role is the region
//! below its innermost thread-dependent `if`; an elected signal of that role is one with at
//! least one thread-dependent `if` inside the role between the role and the signal (the
//! election, possibly nested: `if %warp0 { if %elect { tma_load } }` is one thread of the
//! role as much as `if %elect { tma_load }` is).
//! Nor is it where every thread that runs the wait arrives, later in the wait's region, on the
//! object the signal names (`arrives_after`): that phase needs the waiter's arrival too.
//! Outside roles (the whole block waits) the rule is not needed: the signal that rearms a
//! slot follows the block barrier that orders the slot's data reads before its refill.
//!
//! Complexity: O(accesses · depth) to classify, O(W_r · S_r) hazards per role r (waits times
//! signals of the role; a signal counts in every role that encloses its election).
//!
//! [`publish_inits_early`] moves a placed barrier that orders an `mbar_init` before other
//! threads' use to the earliest gap of its region that still removes every hazard it
//! removes: the same barrier count and cost, at the place CUDA's TMA example and Triton's
//! lowering put it (right after the inits, before the initialising thread's own first use),
//! which is also the form `check`'s static pipeline proof reads. O(points · gaps · hazards
//! of the point).

use crate::analysis::footprint::Footprints;
use crate::analysis::hazards::{Hazard, ordering_hazards};
use crate::sync::{Point, SyncModel};
use crate::ir::*;

/// Whether every thread that reaches the definition of `o` computes the same value: block
/// uniform, or computed only from such values by arithmetic inside a divergent region (a
/// role arm's loop bound computed in the arm from parameters). An expression deeper than 64
/// ops counts as thread-dependent. O(size of the expression): each value is decided once.
pub(crate) fn same_for_reaching_threads(
    k: &Kernel,
    u: &crate::analysis::uniformity::Uniformity,
    o: &Operand,
) -> bool {
    struct Walk<'a> {
        k: &'a Kernel,
        u: &'a crate::analysis::uniformity::Uniformity,
        memo: rustc_hash::FxHashMap<Value, bool>,
    }
    impl Walk<'_> {
        fn go(&mut self, o: &Operand, depth: u32) -> bool {
            if self.u.operand_uniform(o) {
                return true;
            }
            let Some(v) = o.value() else {
                return true;
            };
            if let Some(&r) = self.memo.get(&v) {
                return r;
            }
            let k = self.k;
            let r = match k.values[v].def {
                ValueDef::Result(d, _) if depth > 0 => match &k.ops[d].kind {
                    OpKind::Const(_) => true,
                    // `bid`, `nctaid`, `ntid` read in the arm (a persistent kernel's tile
                    // loop starts at `bid.x`): the same in every thread of the block.
                    OpKind::Special(s) => !s.is_thread_dependent(),
                    OpKind::Binary(_, x, y) | OpKind::Cmp(_, x, y) => {
                        self.go(x, depth - 1) && self.go(y, depth - 1)
                    }
                    OpKind::Unary(_, x) | OpKind::Cast(_, x) => self.go(x, depth - 1),
                    OpKind::Select(c, x, y) => {
                        self.go(c, depth - 1) && self.go(x, depth - 1) && self.go(y, depth - 1)
                    }
                    _ => false,
                },
                _ => false,
            };
            self.memo.insert(v, r);
            r
        }
    }
    let mut w = Walk {
        k,
        u,
        memo: Default::default(),
    };
    w.go(o, 64)
}

/// The regions an op enters through thread-dependent `if`s, outermost first.
fn divergent_regions(fp: &Footprints, op: Op) -> Vec<Region> {
    let k = fp.k;
    let paths = fp.paths();
    let Some(path) = paths.path.get(&op) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for w in path.windows(2) {
        let (r, i) = w[0];
        let anc = k.region_ops(r)[i];
        if let OpKind::If { cond } = &k.ops[anc].kind
            && !same_for_reaching_threads(k, fp.uniformity(), cond)
        {
            out.push(w[1].0);
        }
    }
    out
}

/// Whether `op` can complete a phase of an mbarrier by itself or through the copy it issues.
fn signals(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::MbarArrive { .. } | OpKind::MbarExpectTx { .. } | OpKind::TmaLoad { .. }
    )
}

/// The mbarrier object `op` names: its array and index (a TMA load's completion object).
fn object(kind: &OpKind) -> Option<(MemRef, &[Operand])> {
    match kind {
        OpKind::MbarArrive { mbar, index, .. }
        | OpKind::MbarExpectTx { mbar, index, .. }
        | OpKind::MbarWait { mbar, index, .. } => Some((*mbar, index)),
        OpKind::TmaLoad {
            mbar, mbar_index, ..
        } => Some((*mbar, mbar_index)),
        _ => None,
    }
}

/// Whether every thread that runs wait `w` arrives, later in the same region (so in the same
/// iteration and under the same control), on the mbarrier object signal `s` names: then the
/// phase `s` contributes to also needs that thread's arrival after its wait, so the other
/// role cannot run on past it (nor complete the next phase of the waited object) before the
/// thread has passed `w`, and no role barrier is needed. This holds in every iteration, so
/// it covers the pairs carried by a loop too. It reads a balanced protocol (a phase needs
/// every arrival of its iteration), which `sync`'s handshakes have by construction and the
/// checker's handshake proof verifies (balance, C0021). Session 40's F2: a producer whose
/// store threads wait on `empty` and arrive on `full` beside one elected TMA issuer was given
/// a role barrier per iteration, and under a 16-thread guard, where none is legal, E0303.
/// Objects are compared by value (`handshake_chain::same_value`: `sync`'s `%hs_slot0 = rem
/// %i, 2` is the TMA load's `%s = rem %i, 2`). O(ops of the region after `w`).
fn arrives_after(k: &Kernel, parents: &Parents, w: Op, s: Op) -> bool {
    let Some((sm, si)) = object(&k.ops[s].kind) else {
        return false;
    };
    let Some(r) = parents.op_region[w] else {
        return false;
    };
    let ops = k.region_ops(r);
    let Some(at) = ops.iter().position(|&o| o == w) else {
        return false;
    };
    let same = |a: &[Operand], b: &[Operand]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                crate::sync::handshake_chain::same_value(k, *x, *y, crate::sync::handshake_chain::SAME_VALUE_DEPTH)
            })
    };
    ops[at + 1..].iter().any(|&o| match &k.ops[o].kind {
        OpKind::MbarArrive { mbar, index, .. } => {
            k.root_buffer(*mbar) == k.root_buffer(sm) && same(index, si)
        }
        _ => false,
    })
}

/// The ordering hazards of every (role-wide wait, elected signal) pair of one role, but for
/// the pairs whose waiting threads arrive on the signalled object themselves
/// (`arrives_after`).
pub fn hazards(fp: &Footprints) -> Vec<Hazard> {
    let k = fp.k;
    let mut waits: Vec<(Region, usize)> = Vec::new();
    let mut sigs: Vec<(Region, usize)> = Vec::new();
    for (i, a) in fp.accesses.iter().enumerate() {
        if k.buffers[k.root_buffer(a.access.mem)].elem != ElemType::MBarrier {
            continue;
        }
        let kind = &k.ops[a.id.op].kind;
        let d = divergent_regions(fp, a.id.op);
        if matches!(kind, OpKind::MbarWait { .. }) {
            if let Some(&role) = d.last() {
                waits.push((role, i));
            }
        } else if signals(kind) && d.len() >= 2 {
            // Elected at any depth: `if %warp0 { if %elect { tma_load } }` signals from a
            // subset of every role that encloses its innermost election.
            sigs.extend(d[..d.len() - 1].iter().map(|&r| (r, i)));
        }
    }
    let mut out = Vec::new();
    let parents = k.parents();
    for &(role, w) in &waits {
        for &(_, s) in sigs.iter().filter(|(r, _)| *r == role) {
            let (wo, so) = (fp.accesses[w].id.op, fp.accesses[s].id.op);
            if !arrives_after(k, parents, wo, so) {
                out.extend(ordering_hazards(fp, w, s));
            }
        }
    }
    out
}

/// Moves each chosen point that removes a hazard from an `mbar_init` to the earliest gap of
/// its region where it still removes every pending hazard it removed (see the module doc).
pub fn publish_inits_early(
    model: &SyncModel,
    hazards: &[Hazard],
    pending: &[usize],
    points: &mut [Point],
) {
    let k = model.k;
    let from_init = |h: &Hazard| matches!(k.ops[h.src.op].kind, OpKind::MbarInit { .. });
    // Only points that remove an init's hazard move: find those first, so a kernel
    // without `mbar_init` costs one pass over its pending hazards, not points x hazards.
    let inits: Vec<&Hazard> = pending
        .iter()
        .map(|&h| &hazards[h])
        .filter(|h| from_init(h))
        .collect();
    if inits.is_empty() {
        return;
    }
    for i in 0..points.len() {
        let p = points[i];
        if !inits.iter().any(|h| model.covers(&p, h)) {
            continue;
        }
        let served: Vec<&Hazard> = pending
            .iter()
            .map(|&h| &hazards[h])
            .filter(|h| model.covers(&p, h))
            .collect();
        let earliest = (0..p.coord / 2)
            .map(|g| Point { coord: 2 * g, ..p })
            .find(|q| {
                !points.contains(q)
                    && !model.in_split_window(q.region, q.coord / 2)
                    && served.iter().all(|h| model.covers(q, h))
            });
        if let Some(q) = earliest {
            points[i] = q;
        }
    }
}
