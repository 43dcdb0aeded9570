//! Cross-role handshakes (warp specialization): where a kernel's roles — the two arms of a
//! role branch `if %c` with `%c = in_group @g` — communicate through a shared buffer, this
//! pass infers the hazards across the arms and places the handshake the target offers.
//!
//! The recognized shape (docs/pipeline.md gives the formulation and a worked example): one
//! arm (the *producer*) only writes the communicated buffers, the other (the *consumer*) only
//! reads them; each arm runs one pipeline loop around all its accesses, with the same bounds
//! in both arms; every access names its slot by the buffer's first index, either a constant
//! (an unrolled loop: every slot is refilled each iteration) or `rem %i, D` of the loop's
//! induction variable with step 1 (`D` the buffer's first extent). The hazards are then
//! exactly: the producer's write of slot `s` at iteration `n` before the consumer's read of it
//! at `n` (full), and the consumer's read at `n` before the producer's refill at `n + D`
//! (empty; `n + 1` for constant slots).
//!
//! - **Named barriers** (constant slots; sm_80, sm_90, gfx1250): per slot a `full` id (the
//!   producer arrives after its last write, consumers sync before their first read) and an
//!   `empty` id (consumers arrive after their last read except on the last iteration, the
//!   producer syncs before its first write except on the first), each counting both roles.
//!   A tensor-DMA producer (gfx1250 `tdm_load`) waits `tensorcnt(0)` before each `full`
//!   arrival, so the slot's data has landed when the consumers pass their sync. `rem` slots
//!   on a target without mbarriers (gfx1250) are refused (W1341): the ids are immediates.
//! - **Mbarriers** (sm_90; `rem` slots or TMA producers): per slot a `full` mbarrier (TMA:
//!   one `mbar_arrive tx B` before each load; stores: one arrival per producer thread) and an
//!   `empty` mbarrier (one arrival per consumer thread). Consumers wait on `full[s]` with
//!   parity `(n / D) mod 2`, the producer waits on `empty[s]` with the opposite parity: a fresh
//!   mbarrier counts its preceding phase as complete, which stands for the initial arrivals, so
//!   the first `D` refills do not wait. One thread initialises the mbarriers before the role
//!   branch, followed by a block barrier.
//!
//! More than two roles: a consumer arm whose accesses lie in the arms of a nested role branch
//! (one producer, several consumer groups) gets mbarrier handshakes, every group waiting on
//! `full` and arriving on `empty`, whose count is all their threads.
//!
//! A role branch below the top level and inside no other role branch — in a loop (a
//! persistent kernel's tile loop), a `stage` (TTGIR's `scf.execute_region`) or an `if` — gets
//! no placed handshake; where its arms hold hand-written ones they are checked as a top-level
//! branch's are (`sync::handshake_chain`, across the loop's trips too), and the pairs across
//! its arms are then left to them (`Handshakes::chained`; docs/pipeline.md, "Role branches
//! inside an outer loop").
//!
//! Ids and mbarrier names never clash with the kernel's own. Arms that already hold a
//! handshake are left as written (the race checker verifies them). Anything outside the shape
//! is reported (W1300) and left to `smemsync check`, never guessed.
//! Complexity: O(ops) per role branch.

use std::collections::{HashMap, HashSet};

use crate::diag::{DiagKind, Diagnostic};
use crate::analysis::hazards::imm_for_trips;
use crate::ir::*;
use crate::target::Target;

/// What the pass did to a kernel.
#[derive(Clone, Debug)]
pub struct Handshakes {
    /// The kernel with the handshakes (the input when none were placed).
    pub kernel: Kernel,
    /// Role branches whose handshakes were placed, each with its mode and syncs.
    pub placed: Vec<Placed>,
    /// Shape mismatches (W1300) and hand-written handshakes left as written (W1301).
    pub warnings: Vec<Diagnostic>,
    /// Shared accesses whose cross-role order the placed handshakes establish.
    pub covered: HashSet<Op>,
    /// Producer TMA loads whose slot reuse the `empty` handshake orders (the refill waits for
    /// consumers that waited for the previous load).
    pub ordered_tma: HashSet<Op>,
    /// Hand-written `mbar_wait`s `sync` did not verify (`analysis::mbar_protocol`): they order
    /// no refill.
    pub unverified_waits: HashSet<Op>,
    /// `analysis::mbar_protocol`'s keyed-before pairs (`Verdict::keyed_before`): first fills
    /// for `sync::handshake_chain`.
    pub keyed_before: HashSet<(Op, Op)>,
    /// `analysis::mbar_protocol`'s accesses released late (`Verdict::delayed`): (access,
    /// buffer, mbarrier array) for `sync::handshake_chain`.
    pub delayed: crate::analysis::mbar_protocol::LateReleases,
    /// Role branches inside a loop whose hand-written handshakes were checked for every
    /// cross-role conflict (E0307 otherwise): each arm's accesses to the buffers both arms
    /// use. The hazard finder leaves pairs across the two arms to these handshakes.
    pub chained: Vec<[HashSet<Op>; 2]>,
    /// E0307: cross-role conflicts that a hand-written mbarrier handshake does not order
    /// (`sync::handshake_chain`); `sync` refuses the kernel.
    pub errors: Vec<Diagnostic>,
}

/// One placed handshake.
#[derive(Clone, Debug)]
pub struct Placed {
    pub branch: Op,
    pub mode: Mode,
    /// Slots (distance D).
    pub slots: u64,
    /// Sync ops written (arrivals, waits, inits, the init barrier).
    pub written: usize,
    /// Sync ops executed per thread role summed over the loop (constant trips), or None.
    pub executed: Option<u64>,
}

/// The handshake kind placed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Named,
    Mbarrier,
    /// The mbarriers of a single-role TMA pipeline (`sync::handshake_tma`; `branch` is its
    /// first load).
    SingleRoleTma,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Named => "named",
            Mode::Mbarrier => "mbarrier",
            Mode::SingleRoleTma => "tma-single-role",
        }
    }
}

/// Slot of an access: a constant, or `rem %i, D` of the arm loop's induction variable.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Slot {
    Const(i64),
    Rem,
}

/// A shared access inside an arm.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    pub op: Op,
    pub buffer: Buffer,
    pub write: bool,
    pub slot: Option<Operand>,
}

/// One arm's pipeline: its loop and the accesses to the communicated buffers.
pub(crate) struct Arm {
    /// The pipeline loop, its body and induction variable.
    pub lp: Op,
    pub body: Region,
    pub iv: Value,
    /// (top-level body index, slot, access op)
    pub acc: Vec<(usize, Slot, Op)>,
}

/// Places the cross-role handshakes of every role branch at the kernel's top level, in a
/// copy of `k` ([`place_handshakes_owned`] edits the kernel it is given instead).
pub fn place_handshakes(k: &Kernel, target: &Target) -> Handshakes {
    place_handshakes_owned(k.clone(), target)
}

/// [`place_handshakes`] on a kernel the caller gives up: the handshakes are written into it
/// and it comes back as [`Handshakes::kernel`], with no copy (`sync` of a 10^6-op kernel
/// held three kernels at once before).
pub fn place_handshakes_owned(k: Kernel, target: &Target) -> Handshakes {
    place_handshakes_verified(k, target, HashSet::new(), Default::default())
}

/// [`place_handshakes_owned`] where the hand-written waits `unverified` (not verified by
/// `analysis::mbar_protocol`) order no producer refill, with the protocol's keyed-before
/// pairs and late releases (`Verdict::keyed_before`, `Verdict::delayed`).
pub fn place_handshakes_verified(
    k: Kernel,
    target: &Target,
    unverified: HashSet<Op>,
    (keyed_before, delayed): (HashSet<(Op, Op)>, crate::analysis::mbar_protocol::LateReleases),
) -> Handshakes {
    let mut out = Handshakes {
        kernel: k,
        placed: Vec::new(),
        warnings: Vec::new(),
        covered: HashSet::new(),
        ordered_tma: HashSet::new(),
        unverified_waits: unverified,
        keyed_before,
        delayed,
        chained: Vec::new(),
        errors: Vec::new(),
    };
    let k = &out.kernel;
    let branches: Vec<(Op, Group)> = k.region_ops(k.body())
        .iter()
        .filter_map(|&o| role_group(k, o).map(|g| (o, g)))
        .collect();
    for (br, g) in branches {
        if let Err(d) = place_branch(&mut out, br, g, target) {
            out.warnings.push(*d);
        }
    }
    // Role branches below the top level (persistent kernels' tile loops, stages, `if`s):
    // hand-written handshakes are checked like those of a top-level branch; none are placed.
    for br in nested_role_branches(&out.kernel) {
        nested_branch(&mut out, br);
    }
    // Single-role TMA pipelines (`pipeline --mode tma`): `sync::handshake_tma`.
    let (single, warnings) = crate::sync::handshake_tma::place_single_role(&mut out.kernel, target);
    out.warnings.extend(warnings);
    for p in single {
        out.placed.push(Placed {
            branch: p.loads[0],
            mode: Mode::SingleRoleTma,
            slots: p.slots,
            written: p.written,
            executed: None,
        });
    }
    out
}

/// Role branches below the kernel's top level and in no other role branch, in program order:
/// the persistent-kernel shape `for tile { if in_group @producer { ... } else { ... } }`, and
/// a branch inside a `stage` or under an `if` (s37's M5, M14: those were checked nowhere, and
/// the hazard finder took their hand-written handshakes as covering the cross-role pairs).
fn nested_role_branches(k: &Kernel) -> Vec<Op> {
    let parents = k.parents();
    let mut out = Vec::new();
    k.walk(|o| {
        if role_group(k, o).is_none() {
            return;
        }
        let anc = parents.ancestors(o);
        if !anc.is_empty() && !anc.iter().any(|&a| role_group(k, a).is_some()) {
            out.push(o);
        }
    });
    out
}

/// A role branch below the top level whose arms share a buffer and hold hand-written handshakes:
/// the same checks as a top-level branch's (E0307 where a cross-role conflict has no
/// release/acquire chain, across the loop's iterations too: `sync::handshake_chain`) and the
/// TMA refills the `empty` waits order. Without hand-written handshakes nothing is done
/// (`sync` places none inside a loop; the accesses are left to the barrier placer as before).
/// The pairs across the arms are left to the chains only where the arms hold no named
/// barrier (the chains do not check those).
fn nested_branch(out: &mut Handshakes, br: Op) {
    let k = &out.kernel;
    let (rt, re) = (k.ops[br].regions[0], k.ops[br].regions[1]);
    let (mut at, mut ae) = (Vec::new(), Vec::new());
    accesses(k, rt, &mut at);
    accesses(k, re, &mut ae);
    // By bytes, as a top-level branch's (`shared_buffers`): a pinned buffer aliasing the
    // other role's is shared with it though its name differs.
    let shared = shared_buffers(k, &at, &ae);
    if shared.is_empty() || !(has_handshake(k, rt) || has_handshake(k, re)) {
        return;
    }
    check_handwritten(out, br, &shared);
    let k = &out.kernel;
    // Named barriers are not checked by the chains (`handshake_chain` leaves a branch whose
    // roles share an id to `check`): its pairs across the arms stay with the hazard finder.
    if has_named(k, rt) || has_named(k, re) {
        return;
    }
    let arm = |acc: &[Access]| (acc.iter()).filter(|a| shared.contains(&a.buffer)).map(|a| a.op).collect();
    out.chained.push([arm(&at), arm(&ae)]);
}

/// The checks of a role branch's hand-written handshakes: E0307 for every cross-role conflict
/// without a release/acquire chain (`sync::handshake_chain`), and the producer's TMA loads
/// into `shared` buffers whose refills the verified `empty` waits order.
fn check_handwritten(out: &mut Handshakes, br: Op, shared: &HashSet<Buffer>) {
    let k = &out.kernel;
    let (rt, re) = (k.ops[br].regions[0], k.ops[br].regions[1]);
    let missing = crate::sync::handshake_chain::missing_chains(k, br, &out.unverified_waits, (&out.keyed_before, &out.delayed));
    let ordered = handwritten_ordered(k, rt, re, &out.unverified_waits);
    let ordered: Vec<Op> = (ordered.into_iter())
        .filter(|&t| matches!(&k.ops[t].kind, OpKind::TmaLoad { dst, .. } if shared.contains(&k.root_buffer(*dst))))
        .collect();
    out.errors.extend(missing);
    out.ordered_tma.extend(ordered);
}

/// Whether a region holds a named barrier op (`named_sync`, `named_arrive`).
fn has_named(k: &Kernel, r: Region) -> bool {
    k.region_ops(r).iter().any(|&o| {
        matches!(k.ops[o].kind, OpKind::NamedArrive { .. } | OpKind::NamedSync { .. })
            || k.ops[o].regions.iter().any(|&c| has_named(k, c))
    })
}

/// The group of a role branch `if %c` with `%c = in_group @g` (or a warp-uniform thread-id
/// compare true in exactly `@g`'s threads: `analysis::role_split`).
pub(crate) fn role_group(k: &Kernel, o: Op) -> Option<Group> {
    crate::analysis::role_split::branch_group(k, o)
}

pub(crate) fn unsupported(k: &Kernel, at: Op, why: impl Into<String>) -> Box<Diagnostic> {
    Box::new(
        Diagnostic::warning(
            DiagKind::Finding,
            "W1300",
            format!("cross-role handshakes not placed: {}", why.into()),
        )
        .with_label(k.span(at), "role branch")
        .with_note("the accesses across the roles are left to `smemsync check` (docs/pipeline.md lists the shapes smemsync places)"),
    )
}

/// W1341: `rem` slots on a target whose only cross-role handshake is the named barrier
/// (gfx1250). Named-barrier ids are immediates, so a slot chosen by `i mod D` would need its
/// id chosen at run time (a dispatch over the `D` slots), which smemsync neither places nor
/// proves; unrolling the loop by `D` gives constant slots, which get named barriers.
fn named_only_rem(k: &Kernel, br: Op, target: &Target) -> Box<Diagnostic> {
    Box::new(
        Diagnostic::warning(
            DiagKind::Finding,
            "W1341",
            format!(
                "cross-role handshakes not placed: {} has no mbarriers, and its named barriers take an immediate id, so `rem` slots (slot `i mod D`) would need a per-iteration choice of id that smemsync does not place",
                target.name
            ),
        )
        .with_label(k.span(br), "role branch")
        .with_note("unroll the pipeline loop by the slot count so every access names a constant slot: those get named-barrier handshakes (docs/pipeline.md)")
        .with_note("the accesses across the roles are left to `smemsync check`"),
    )
}

/// Shared accesses (not mbarrier ops) in a region, recursively.
pub(crate) fn accesses(k: &Kernel, r: Region, out: &mut Vec<Access>) {
    for &o in k.region_ops(r) {
        let mut push = |m: MemRef, write: bool, idx: Option<&Vec<Operand>>| {
            let (buffer, slot) = match m {
                MemRef::Buffer(b) => (b, idx.and_then(|i| i.first().copied())),
                MemRef::View(v) => match (k.views[v].base, k.views[v].indices.first()) {
                    (MemRef::Buffer(b), Some(ViewIndex::At(s))) => (b, Some(*s)),
                    _ => (k.root_buffer(m), None),
                },
            };
            if k.buffers[buffer].elem != ElemType::MBarrier {
                out.push(Access {
                    op: o,
                    buffer,
                    write,
                    slot,
                });
            }
        };
        match &k.ops[o].kind {
            OpKind::Load { mem, index } => push(*mem, false, Some(index)),
            OpKind::Store { mem, index, .. } | OpKind::Atomic { mem, index, .. } => {
                push(*mem, true, Some(index))
            }
            OpKind::LocalLoad { mem, .. } => push(*mem, false, None),
            OpKind::LocalStore { mem, .. } => push(*mem, true, None),
            OpKind::TmaLoad { dst, .. } | OpKind::TdmLoad { dst, .. } => push(*dst, true, None),
            OpKind::CpAsyncTile(t) | OpKind::GatherToLdsTile(t) => push(t.dst, true, None),
            OpKind::CpAsync { dst, dst_index, .. }
            | OpKind::GatherToLds { dst, dst_index, .. } => push(*dst, true, Some(dst_index)),
            OpKind::TmaStore { src, .. } => push(*src, false, None),
            OpKind::Wgmma { a, b, .. } => {
                if let Some(a) = a.shared() {
                    push(a, false, None);
                }
                push(*b, false, None);
            }
            _ => {}
        }
        for &c in &k.ops[o].regions {
            accesses(k, c, out);
        }
    }
}

/// Whether a region holds a handshake op (named barrier or mbarrier arrive/wait/expect).
fn has_handshake(k: &Kernel, r: Region) -> bool {
    k.region_ops(r).iter().any(|&o| {
        matches!(
            k.ops[o].kind,
            OpKind::NamedArrive { .. }
                | OpKind::NamedSync { .. }
                | OpKind::MbarArrive { .. }
                | OpKind::MbarExpectTx { .. }
                | OpKind::MbarWait { .. }
        ) || k.ops[o].regions.iter().any(|&c| has_handshake(k, c))
    })
}

/// TMA loads of a hand-written handshake whose refills wait for the other role: in the same
/// loop iteration and under the same conditions, the issuing thread first waits on an
/// mbarrier other than the load's own that the other arm arrives on (an `empty` array), with
/// a wait whose protocol `analysis::mbar_protocol` verified (not in `unverified`).
fn handwritten_ordered(k: &Kernel, rt: Region, re: Region, unverified: &HashSet<Op>) -> Vec<Op> {
    let parents = k.parents();
    let in_region = |r: Region| {
        let mut v = Vec::new();
        walk_region(k, r, &mut v);
        v
    };
    let mut out = Vec::new();
    for (a, b) in [(rt, re), (re, rt)] {
        let ops = in_region(a);
        let arrived: HashSet<Buffer> = in_region(b)
            .iter()
            .filter_map(|&o| match &k.ops[o].kind {
                OpKind::MbarArrive { mbar, .. } => Some(k.root_buffer(*mbar)),
                _ => None,
            })
            .collect();
        let loop_of = |o: Op| {
            parents
                .ancestors(o)
                .into_iter()
                .find(|&x| matches!(k.ops[x].kind, OpKind::For { .. }))
        };
        for (i, &t) in ops.iter().enumerate() {
            let OpKind::TmaLoad { mbar, .. } = &k.ops[t].kind else {
                continue;
            };
            let full = k.root_buffer(*mbar);
            let t_anc = parents.ancestors(t);
            let waited = ops[..i].iter().any(|&w| {
                let OpKind::MbarWait { mbar: e, .. } = &k.ops[w].kind else {
                    return false;
                };
                let e = k.root_buffer(*e);
                !unverified.contains(&w)
                    && e != full
                    && arrived.contains(&e)
                    && loop_of(w) == loop_of(t)
                    && parents
                        .ancestors(w)
                        .iter()
                        .filter(|&&x| matches!(k.ops[x].kind, OpKind::If { .. }))
                        .all(|x| t_anc.contains(x))
            });
            if waited {
                out.push(t);
            }
        }
    }
    out
}

/// W1340: in a role branch whose arms share no shared buffer and no global one that either
/// writes, the hand-written cross-role handshakes (named barriers; mbarrier arrivals and
/// waits on arrays no TMA load completes on) order nothing across the roles: each is
/// reported, naming the op, and left as written.
fn redundant_handshakes(out: &mut Handshakes, br: Op) {
    let k = &out.kernel;
    let arms: Vec<Vec<Op>> = (k.ops[br].regions.iter())
        .map(|&r| {
            let mut v = Vec::new();
            walk_region(k, r, &mut v);
            v
        })
        .collect();
    let globals = |ops: &[Op]| -> Vec<(Global, bool)> {
        (ops.iter())
            .flat_map(|&o| effects(k, o).global.into_iter().map(|g| (g.global, g.write)))
            .collect()
    };
    let (ga, gb) = (globals(&arms[0]), globals(&arms[1]));
    let talks = ga.iter().any(|&(g, w)| gb.iter().any(|&(h, v)| g == h && (w || v)));
    if talks {
        return;
    }
    let mut tma_arrays = HashSet::new();
    k.walk(|o| {
        if let OpKind::TmaLoad { mbar, .. } = &k.ops[o].kind {
            tma_arrays.insert(k.root_buffer(*mbar));
        }
    });
    let mut found = Vec::new();
    for &o in arms.iter().flatten() {
        let handshake = match &k.ops[o].kind {
            OpKind::NamedArrive { .. } | OpKind::NamedSync { .. } => true,
            OpKind::MbarArrive { mbar, .. } | OpKind::MbarWait { mbar, .. } => {
                !tma_arrays.contains(&k.root_buffer(*mbar))
            }
            _ => false,
        };
        if handshake {
            found.push(
                Diagnostic::warning(
                    DiagKind::Finding,
                    "W1340",
                    format!(
                        "redundant handshake {}: the roles share no buffer, so it orders nothing between them",
                        crate::ir::text::op_label(k, o)
                    ),
                )
                .with_label(k.span(o), "hand-written handshake")
                .with_label(k.span(br), "role branch")
                .with_help("remove it (both arms must still drop it together: a named barrier or mbarrier counts both roles' arrivals)"),
            );
        }
    }
    out.warnings.extend(found);
}

/// The ops of a region and its nested regions, in program order.
pub(crate) fn walk_region(k: &Kernel, r: Region, out: &mut Vec<Op>) {
    k.walk_region(r, &mut |o| out.push(o));
}

/// The accesses of each arm to the buffers both arms use (None: the roles share none); an
/// error when the arms already hold handshakes (W1301).
type ArmAccesses = (Vec<Access>, Vec<Access>);

fn communicated(out: &mut Handshakes, br: Op) -> Result<Option<ArmAccesses>, Box<Diagnostic>> {
    let k = &out.kernel;
    let (rt, re) = (k.ops[br].regions[0], k.ops[br].regions[1]);
    let (mut at, mut ae) = (Vec::new(), Vec::new());
    accesses(k, rt, &mut at);
    accesses(k, re, &mut ae);
    let shared = shared_buffers(k, &at, &ae);
    if shared.is_empty() {
        redundant_handshakes(out, br);
        return Ok(None);
    }
    if has_handshake(k, rt) || has_handshake(k, re) {
        // Every cross-role conflict must be ordered by a release/acquire chain of the
        // hand-written handshakes (docs/pipeline.md); where one is not, `sync` refuses. Where
        // every one is, a refill of a slot the other role accesses follows that role's
        // acquire of the previous copy: the copies of the slot are ordered among themselves.
        check_handwritten(out, br, &shared);
        let k = &out.kernel;
        return Err(Box::new(
            Diagnostic::warning(
                DiagKind::Finding,
                "W1301",
                "the roles' handshakes are written by hand: smemsync leaves them as written",
            )
            .with_label(k.span(br), "role branch")
            .with_note("`smemsync check` verifies them (races, deadlocks, parities)"),
        ));
    }
    if let Some(d) = aliased_conflict(k, br, &at, &ae) {
        out.errors.push(d);
        return Ok(None);
    }
    let at: Vec<Access> = at.into_iter().filter(|a| shared.contains(&a.buffer)).collect();
    let ae: Vec<Access> = ae.into_iter().filter(|a| shared.contains(&a.buffer)).collect();
    Ok(Some((at, ae)))
}

/// The buffers of the two arms' accesses (`at`, `ae`) that the other arm also accesses, or
/// that share bytes with a buffer the other arm accesses where one of the two writes (a
/// pinned buffer overlapping it, `ir::layout::share_bytes`). O(|at| · |ae|).
fn shared_buffers(k: &Kernel, at: &[Access], ae: &[Access]) -> HashSet<Buffer> {
    let mut shared = HashSet::new();
    for x in at {
        for y in ae {
            let conflict = (x.write || y.write) && crate::ir::layout::share_bytes(k, x.buffer, y.buffer);
            if x.buffer == y.buffer || conflict {
                shared.insert(x.buffer);
                shared.insert(y.buffer);
            }
        }
    }
    shared
}

/// E0307 for a cross-role conflict (one access a write) between two different buffers that
/// share bytes: the handshake placement pairs a producer's slot with a consumer's slot of
/// one buffer, so it cannot order them (docs/pipeline.md); `sync` refuses rather than leave
/// the conflict unordered.
fn aliased_conflict(k: &Kernel, br: Op, at: &[Access], ae: &[Access]) -> Option<Diagnostic> {
    let (x, y) = at.iter().flat_map(|x| ae.iter().map(move |y| (x, y))).find(|(x, y)| {
        x.buffer != y.buffer
            && (x.write || y.write)
            && crate::ir::layout::share_bytes(k, x.buffer, y.buffer)
    })?;
    let name = |b: Buffer| format!("@{}", k.buffers[b].name);
    let (bx, by) = (name(x.buffer), name(y.buffer));
    Some(
        Diagnostic::error(
            DiagKind::Finding,
            "E0307",
            format!(
                "the roles access {bx} and {by}, pinned at overlapping bytes: smemsync places handshakes per buffer slot and cannot order accesses through two aliasing buffers"
            ),
        )
        .with_label(k.span(x.op), format!("accesses {bx} here"))
        .with_label(k.span(y.op), format!("accesses {by} here, the same bytes"))
        .with_label(k.span(br), "role branch")
        .with_help(format!("access the slots through one buffer in both roles ({bx} or {by}), or write the handshakes by hand")),
    )
}

/// Places the handshakes of one role branch.
fn place_branch(
    out: &mut Handshakes,
    br: Op,
    g: Group,
    target: &Target,
) -> Result<(), Box<Diagnostic>> {
    let Some((at, ae)) = communicated(out, br)? else {
        return Ok(());
    };
    let k = &out.kernel;
    let (rt, re) = (k.ops[br].regions[0], k.ops[br].regions[1]);
    let shared: HashSet<Buffer> = at.iter().map(|a| a.buffer).collect();
    let t_writes = at.iter().all(|a| a.write);
    let e_reads = ae.iter().all(|a| !a.write);
    let t_reads = at.iter().all(|a| !a.write);
    let e_writes = ae.iter().all(|a| a.write);
    let grp = &k.groups[g];
    let n_in = grp.hi.saturating_sub(grp.lo);
    let n_out = k.threads().saturating_sub(n_in);
    let (pr, pacc, np, cr, cacc, nc) = if t_writes && e_reads {
        (rt, at, n_in, re, ae, n_out)
    } else if e_writes && t_reads {
        (re, ae, n_out, rt, at, n_in)
    } else {
        return Err(unsupported(
            k,
            br,
            "one role must only write the shared buffers both roles use and the other only read them",
        ));
    };
    let d = buffers_slots(k, br, &shared)?;
    let prod = arm(k, br, pr, &pacc)?;
    let cons = consumer_arms(k, br, cr, &cacc)?;
    for c in &cons {
        same_bounds(k, br, prod.lp, c.lp)?;
    }
    // The arrival counts: the threads that run each role's loop (P10: not the whole role
    // under `if %t < 100`), under the same uniform conditions in every role.
    let (np_role, nc_role) = (np, nc);
    let reaches = (std::iter::once(&prod).chain(&cons))
        .map(|a| crate::sync::handshake_guards::reach(k, a.lp, None))
        .collect::<Result<Vec<_>, _>>()?;
    crate::sync::handshake_guards::matching(k, br, &reaches)?;
    let np = reaches[0].count();
    let nc: u32 = reaches[1..].iter().map(|r| r.count()).sum();
    let whole_warps = (np == np_role && nc == nc_role) || reaches.iter().all(|r| r.whole_warps(target.warp));
    let slots: HashSet<Slot> = (prod.acc.iter())
        .chain(cons.iter().flat_map(|c| &c.acc))
        .map(|a| a.1)
        .collect();
    let tma = pacc
        .iter()
        .any(|a| matches!(k.ops[a.op].kind, OpKind::TmaLoad { .. }));
    let rem = slots.contains(&Slot::Rem);
    if rem && slots.len() > 1 {
        return Err(unsupported(k, br, "constant and `rem` slots are mixed"));
    }
    if let Some(Slot::Const(c)) = slots.iter().find(|s| matches!(s, Slot::Const(c) if *c < 0 || *c as u64 >= d)) {
        return Err(unsupported(k, br, format!("slot {c} is outside the buffer")));
    }
    let covered: Vec<Op> = pacc.iter().chain(&cacc).map(|a| a.op).collect();
    let ctx = Ctx {
        br,
        d,
        np,
        nc,
        whole_warps,
        prod: &prod,
        cons: &cons,
    };
    let placed = if rem || tma {
        mbarrier_handshake(out, target, &ctx, rem, &pacc)?
    } else {
        named_handshake(out, target, &ctx, &slots, &pacc)?
    };
    out.covered.extend(covered);
    out.placed.push(placed);
    Ok(())
}

/// [`place_branch`] with mbarriers (`rem` slots or a TMA producer): `sync::handshake_mbar`.
fn mbarrier_handshake(
    out: &mut Handshakes,
    target: &Target,
    ctx: &Ctx<'_>,
    rem: bool,
    pacc: &[Access],
) -> Result<Placed, Box<Diagnostic>> {
    let (k, br) = (&out.kernel, ctx.br);
    if !target.mbarrier && rem && target.named_barriers > 0 {
        return Err(named_only_rem(k, br, target));
    }
    if !target.mbarrier {
        return Err(unsupported(
            k,
            br,
            format!("{} has no mbarriers (needed for `rem` slots and TMA producers)", target.name),
        ));
    }
    let tmas: Vec<Op> = pacc
        .iter()
        .filter(|a| matches!(k.ops[a.op].kind, OpKind::TmaLoad { .. }))
        .map(|a| a.op)
        .collect();
    let (p, ordered) = crate::sync::handshake_mbar::place(&mut out.kernel, ctx, &tmas)?;
    out.ordered_tma.extend(ordered);
    Ok(p)
}

/// [`place_branch`] with named barriers (two roles of whole warps, constant slots).
fn named_handshake(
    out: &mut Handshakes,
    target: &Target,
    ctx: &Ctx<'_>,
    slots: &HashSet<Slot>,
    pacc: &[Access],
) -> Result<Placed, Box<Diagnostic>> {
    let (k, br) = (&out.kernel, ctx.br);
    if target.named_barriers == 0 {
        return Err(unsupported(k, br, format!("{} has no named barriers", target.name)));
    }
    if ctx.cons.len() > 1 {
        return Err(unsupported(k, br, "more than two roles get mbarrier handshakes only (`rem` slots on sm_90)"));
    }
    if !ctx.np.is_multiple_of(target.warp) || !ctx.nc.is_multiple_of(target.warp) || !ctx.whole_warps {
        return Err(unsupported(
            k,
            br,
            "a role, or the threads of it that run its pipeline loop, is not made of whole warps (a named barrier counts whole warps)",
        ));
    }
    let mut s: Vec<i64> = slots
        .iter()
        .filter_map(|s| match s {
            Slot::Const(c) => Some(*c),
            Slot::Rem => None,
        })
        .collect();
    s.sort_unstable();
    // A tensor-DMA producer waits for its counter before each `full` signal, so a refill
    // of a slot follows the completion of its previous fill in every issuing thread.
    out.ordered_tma.extend(
        pacc.iter()
            .filter(|a| matches!(k.ops[a.op].kind, OpKind::TdmLoad { .. }))
            .map(|a| a.op),
    );
    place_named(&mut out.kernel, ctx, &s, target)
}

/// Context of a mbarrier placement (read by `sync::handshake_mbar`).
pub(crate) struct Ctx<'a> {
    pub br: Op,
    pub d: u64,
    /// The producer's and the consumers' threads that run their pipeline loops
    /// (`sync::handshake_guards`): the arrivals per phase of `full` (stores) and `empty`.
    pub np: u32,
    pub nc: u32,
    /// Whether those threads are whole warps where a guard leaves part of a role out.
    pub whole_warps: bool,
    pub prod: &'a Arm,
    /// The consumer roles (one, or the arms of a nested role branch), whose threads together
    /// are the `nc` consumers.
    pub cons: &'a [Arm],
}

/// The slot count `D`: the first extent of every communicated buffer (they must agree).
fn buffers_slots(k: &Kernel, br: Op, shared: &HashSet<Buffer>) -> Result<u64, Box<Diagnostic>> {
    let ds: HashSet<u64> = shared
        .iter()
        .map(|&b| k.buffers[b].shape.first().copied().unwrap_or(1))
        .collect();
    match ds.iter().next() {
        Some(&d) if ds.len() == 1 && d >= 1 => Ok(d),
        _ => Err(unsupported(k, br, "the shared buffers have different slot counts")),
    }
}

/// The arm's pipeline loop (the outermost loop of the arm around every access; one for all)
/// and each access's top-level body op and slot.
fn arm(k: &Kernel, br: Op, region: Region, acc: &[Access]) -> Result<Arm, Box<Diagnostic>> {
    let parents = k.parents();
    let mut lp: Option<Op> = None;
    let mut top = Vec::new();
    for a in acc {
        // Chain of ancestors from the access up to the arm region.
        let mut chain = vec![a.op];
        let mut cur = a.op;
        while parents.op_region[cur] != Some(region) {
            match parents.parent_op(cur) {
                Some(p) => {
                    chain.push(p);
                    cur = p;
                }
                None => return Err(unsupported(k, br, "an access is not inside the arm")),
            }
        }
        let Some(pos) = chain
            .iter()
            .rposition(|&o| matches!(k.ops[o].kind, OpKind::For { .. }))
        else {
            return Err(unsupported(k, br, "an access of a role is outside its pipeline loop"));
        };
        let l = chain[pos];
        if lp.is_some_and(|x| x != l) {
            return Err(unsupported(k, br, "a role's accesses lie in more than one loop"));
        }
        lp = Some(l);
        if pos == 0 {
            return Err(unsupported(k, br, "an access is itself a loop"));
        }
        top.push((chain[pos - 1], a));
    }
    let lp = lp.ok_or_else(|| unsupported(k, br, "a role has no accesses"))?;
    let body = k.ops[lp].regions[0];
    let iv = k.region_args(body)[0];
    let step_one = matches!(k.ops[lp].kind, OpKind::For { step: Operand::Imm(s), .. } if s.as_i64() == 1);
    let mut out = Vec::new();
    for (t, a) in top {
        let idx = k.region_ops(body).iter().position(|&o| o == t).unwrap_or(0);
        let slot = match a.slot {
            Some(Operand::Imm(c)) => Slot::Const(c.as_i64()),
            Some(Operand::Value(v)) if step_one && is_rem_of(k, v, iv, a.buffer) => Slot::Rem,
            _ => {
                return Err(unsupported(
                    k,
                    a.op,
                    "an access's slot is neither a constant nor `rem %i, D` of a step-1 loop's induction variable",
                ));
            }
        };
        out.push((idx, slot, a.op));
    }
    Ok(Arm {
        lp,
        body,
        iv,
        acc: out,
    })
}

/// The consumer role's arms: the arm itself, or, when its accesses all lie in the arms of a
/// role branch at its top level, each of those arms (recursively): one producer and several
/// consumer groups. Every consumer group must read the buffers (each releases the slots).
fn consumer_arms(k: &Kernel, br: Op, region: Region, acc: &[Access]) -> Result<Vec<Arm>, Box<Diagnostic>> {
    let nested = (k.region_ops(region).iter().copied()).find(|&o| role_group(k, o).is_some());
    let Some(nb) = nested else {
        return Ok(vec![arm(k, br, region, acc)?]);
    };
    let parents = k.parents();
    let within = |o: Op, r: Region| {
        let mut cur = o;
        loop {
            if parents.op_region[cur] == Some(r) {
                return true;
            }
            match parents.parent_op(cur) {
                Some(p) => cur = p,
                None => return false,
            }
        }
    };
    if acc.iter().any(|a| !k.ops[nb].regions.iter().any(|&r| within(a.op, r))) {
        return Err(unsupported(k, br, "a consumer role reads the buffers outside its nested role branch"));
    }
    let mut out = Vec::new();
    for &r in &k.ops[nb].regions {
        let sub: Vec<Access> = acc.iter().filter(|a| within(a.op, r)).cloned().collect();
        if sub.is_empty() {
            return Err(unsupported(k, br, "a consumer group of the nested role branch does not read the buffers, so it would never release a slot"));
        }
        out.extend(consumer_arms(k, br, r, &sub)?);
    }
    Ok(out)
}

/// Where a role's release of the accesses `accs` (ops of `arm`'s loop body) goes: after the
/// returned top-level body op, preceded by the returned ops to write there. The release must
/// follow each access's completion for its own threads (`handshake_chain::completed_by`, the
/// rule hand-written handshakes are checked by: E0307): the user's completing wait where one
/// follows in the iteration, run whenever the access is; else `sync` writes the completion
/// (`handshake_chain::completion_ops`: a commit and the wait for every group, or a
/// `waitcnt`) right before the release, after the access's top-level op. A synchronous
/// access completes at itself: the release follows its top-level op (the earlier rule).
pub(crate) fn release_point(k: &Kernel, arm: &Arm, accs: &[Op]) -> (Op, Vec<OpKind>) {
    let body = arm.body;
    let mut ops = Vec::new();
    walk_region(k, body, &mut ops);
    let parents = k.parents();
    // The regions between an op and the loop body: an op runs whenever `x` does, in its
    // iteration, when its regions are among `x`'s.
    let within = |o: Op| {
        let mut out = Vec::new();
        let mut cur = o;
        while let Some(r) = parents.op_region[cur] {
            if r == body {
                break;
            }
            out.push(r);
            match parents.region_op[r] {
                Some(p) => cur = p,
                None => break,
            }
        }
        out
    };
    let top = |o: Op| {
        let mut cur = o;
        while parents.op_region[cur].is_some_and(|r| r != body) {
            match parents.parent_op(cur) {
                Some(p) => cur = p,
                None => break,
            }
        }
        k.region_ops(body).iter().position(|&x| x == cur).unwrap_or(0)
    };
    let mut at = 0;
    let mut extra: Vec<OpKind> = Vec::new();
    for &x in accs {
        let wx = within(x);
        let i = ops.iter().position(|&o| o == x).unwrap_or(0);
        let after = ops[i + 1..].iter().copied().filter(|&o| within(o).iter().all(|r| wx.contains(r)));
        match crate::sync::handshake_chain::completed_by(k, x, after) {
            Some(c) => at = at.max(top(c)),
            None => {
                at = at.max(top(x));
                for op in crate::sync::handshake_chain::completion_ops(&k.ops[x].kind) {
                    if !extra.contains(&op) {
                        extra.push(op);
                    }
                }
            }
        }
    }
    (k.region_ops(body)[at], extra)
}

/// Whether `v = rem %iv, D` with `D` the buffer's first extent.
fn is_rem_of(k: &Kernel, v: Value, iv: Value, b: Buffer) -> bool {
    let ValueDef::Result(d, _) = k.values[v].def else {
        return false;
    };
    let OpKind::Binary(BinOp::Rem, Operand::Value(x), Operand::Imm(m)) = k.ops[d].kind else {
        return false;
    };
    x == iv && k.buffers[b].shape.first().is_some_and(|&e| e as i64 == m.as_i64())
}

/// Both arms' loops have the same bounds (equal immediates or the same values).
fn same_bounds(k: &Kernel, br: Op, a: Op, b: Op) -> Result<(), Box<Diagnostic>> {
    let bounds = |o: Op| match &k.ops[o].kind {
        OpKind::For { lo, hi, step, .. } => Some((*lo, *hi, *step)),
        _ => None,
    };
    if bounds(a).is_some() && bounds(a) == bounds(b) {
        Ok(())
    } else {
        Err(unsupported(k, br, "the roles' pipeline loops have different bounds"))
    }
}

/// Inserts ops into a kernel before/after existing ops and at region starts, then splices.
pub(crate) struct Splice {
    pub before: HashMap<Op, Vec<Op>>,
    pub after: HashMap<Op, Vec<Op>>,
    pub start: HashMap<Region, Vec<Op>>,
    used: HashSet<String>,
    pub written: usize,
}

impl Splice {
    pub fn new(k: &Kernel) -> Splice {
        let used = k
            .values
            .keys()
            .map(|v| k.value_names.get(v).to_string())
            .chain(k.views.keys().map(|v| k.view_names.get(v).to_string()))
            .collect();
        Splice {
            before: HashMap::new(),
            after: HashMap::new(),
            start: HashMap::new(),
            used,
            written: 0,
        }
    }

    /// A fresh value name with this prefix.
    fn fresh(&mut self, prefix: &str) -> String {
        (0..)
            .map(|i| format!("{prefix}{i}"))
            .find(|n| !self.used.contains(n))
            .inspect(|n| {
                self.used.insert(n.clone());
            })
            .unwrap_or_default()
    }

    /// A value-defining op, appended to the start list of `r`.
    pub fn value(&mut self, k: &mut Kernel, r: Region, kind: OpKind, ty: ScalarType, name: &str) -> Value {
        let o = k.new_op(kind, &[ty], vec![]);
        let v = k.ops[o].results[0];
        let n = self.fresh(name);
        k.value_names.set(v, n);
        self.start.entry(r).or_default().push(o);
        v
    }

    /// A sync op (counted as written), wrapped in `if %guard` when given.
    pub fn sync(&mut self, k: &mut Kernel, kind: OpKind, guard: Option<Value>) -> Op {
        self.written += 1;
        let o = k.new_op(kind, &[], vec![]);
        match guard {
            None => o,
            Some(g) => {
                let (t, e) = (k.new_region(), k.new_region());
                k.append(t, o);
                k.new_op(
                    OpKind::If {
                        cond: Operand::Value(g),
                    },
                    &[],
                    vec![t, e],
                )
            }
        }
    }

    /// Writes the insertions into the kernel's regions.
    pub fn apply(self, k: &mut Kernel) {
        let regions: Vec<Region> = k.regions().keys().collect();
        for r in regions {
            let old = k.region_ops(r).to_vec();
            let mut new = self.start.get(&r).cloned().unwrap_or_default();
            for o in old {
                new.extend(self.before.get(&o).into_iter().flatten());
                new.push(o);
                new.extend(self.after.get(&o).into_iter().flatten());
            }
            k.set_region_ops(r, new);
        }
    }
}

/// Named-barrier handshakes for constant slots, between the producer and the one consumer
/// role of `ctx`.
fn place_named(
    k: &mut Kernel,
    ctx: &Ctx<'_>,
    slots: &[i64],
    target: &Target,
) -> Result<Placed, Box<Diagnostic>> {
    let (br, prod, cons, count) = (ctx.br, ctx.prod, &ctx.cons[0], ctx.np + ctx.nc);
    let mut used: HashSet<u32> = HashSet::from([0]);
    k.walk(|o| {
        if let OpKind::NamedArrive { id, .. } | OpKind::NamedSync { id, .. } = k.ops[o].kind {
            used.insert(id);
        }
    });
    let mut ids = (1..target.named_barriers).filter(|i| !used.contains(i));
    let mut full = Vec::new();
    let mut empty = Vec::new();
    for _ in slots {
        full.push(ids.next());
        empty.push(ids.next());
    }
    let (Some(full), Some(empty)) = (
        full.into_iter().collect::<Option<Vec<u32>>>(),
        empty.into_iter().collect::<Option<Vec<u32>>>(),
    ) else {
        return Err(unsupported(k, br, format!("{} slots need more named-barrier ids than {} has free", slots.len(), target.name)));
    };
    let OpKind::For { lo, hi, step, .. } = k.ops[prod.lp].kind.clone() else {
        return Err(unsupported(k, br, "no loop"));
    };
    let mut sp = Splice::new(k);
    let notfirst = sp.value(k, prod.body, OpKind::Cmp(CmpPred::Gt, Operand::Value(prod.iv), lo), ScalarType::I1, "hs_notfirst");
    let next = sp.value(k, cons.body, OpKind::Binary(BinOp::Add, Operand::Value(cons.iv), step), ScalarType::I32, "hs_next");
    let notlast = sp.value(k, cons.body, OpKind::Cmp(CmpPred::Lt, Operand::Value(next), hi), ScalarType::I1, "hs_notlast");
    // Completion ops written once per (top-level op, kind): a later slot's release after the
    // same op is behind the ones already there.
    let mut completed: HashSet<(Op, String)> = HashSet::new();
    let mut per_iter = 0u64;
    for (i, &s) in slots.iter().enumerate() {
        let of_slot = |a: &Arm| -> Vec<Op> { a.acc.iter().filter(|x| x.1 == Slot::Const(s)).map(|x| x.2).collect() };
        let first = |a: &Arm| a.acc.iter().filter(|x| x.1 == Slot::Const(s)).map(|x| x.0).min();
        let (Some(pf), Some(cf)) = (first(prod), first(cons)) else {
            continue;
        };
        let (pfo, cfo) = (k.region_ops(prod.body)[pf], k.region_ops(cons.body)[cf]);
        // Each release follows its role's accesses' completion (`release_point`): a TDM or
        // `cp_async` producer's wait for its copies, a `wgmma` consumer's (M15).
        let (plo, pdone) = release_point(k, prod, &of_slot(prod));
        let (clo, cdone) = release_point(k, cons, &of_slot(cons));
        let w = sp.sync(k, OpKind::NamedSync { id: empty[i], count }, Some(notfirst));
        sp.before.entry(pfo).or_default().push(w);
        for (at, done) in [(plo, pdone), (clo, cdone)] {
            for c in done {
                if completed.insert((at, format!("{c:?}"))) {
                    let c = sp.sync(k, c, None);
                    sp.after.entry(at).or_default().push(c);
                    per_iter += 1;
                }
            }
        }
        let a = sp.sync(k, OpKind::NamedArrive { id: full[i], count }, None);
        sp.after.entry(plo).or_default().push(a);
        let w = sp.sync(k, OpKind::NamedSync { id: full[i], count }, None);
        sp.before.entry(cfo).or_default().push(w);
        let a = sp.sync(k, OpKind::NamedArrive { id: empty[i], count }, Some(notlast));
        sp.after.entry(clo).or_default().push(a);
    }
    let written = sp.written;
    sp.apply(k);
    // Executed per iteration: 4 per slot, the two guarded ones skipped once each, and the
    // completion waits written per iteration.
    let executed = imm_for_trips(k, prod.lp).map(|t| {
        let (t, n) = (t as u64, slots.len() as u64);
        2 * n * t + 2 * n * t.saturating_sub(1) + per_iter * t
    });
    Ok(Placed {
        branch: br,
        mode: Mode::Named,
        slots: slots.len() as u64,
        written,
        executed,
    })
}
