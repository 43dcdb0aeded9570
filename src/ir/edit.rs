//! Edits at program points: how placement hands its result to `apply` and to the checker.
//!
//! A pass that inserts sync ops never mutates the kernel it analyses. It returns a
//! [`SyncPlan`]: a list of [`Edit`]s, each inserting one sync op at a [`ProgramPoint`], sorted
//! in program order. [`apply`] materializes a plan on a copy of the kernel ([`apply_in_place`] on
//! the kernel itself, for a caller done with the kernel without it); the race checker
//! takes the original kernel plus the plan and re-proves safety (the regalloc2 pattern).
//!
//! Invariants: every anchor names an op placed in the kernel or a region of it; a plan is
//! sorted by [`SyncPlan::sort`] (program order of the points, then insertion order), so two
//! edits at one point keep their relative order. New ops get `Span::UNDEF` and are created in
//! plan order (the i-th edit inserts op `k.ops.len() + i`: [`apply_tracked`]).
//! Complexity: `apply` is O(ops + edits·log edits).

use std::collections::HashMap;

use super::entities::{EntityRef, Op, Region, SecondaryMap};
use super::kernel::Kernel;
use super::ops::OpKind;
use crate::diag::{DiagKind, Diagnostic, Span};

/// Where in a region an edit goes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Anchor {
    /// Immediately before the op.
    Before(Op),
    /// Immediately after the op.
    After(Op),
    /// At the start of the region (before its first op).
    Start(Region),
    /// At the end of the region (before its terminator, if it has one).
    End(Region),
}

/// A point between two ops of one region.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProgramPoint {
    pub anchor: Anchor,
}

impl ProgramPoint {
    pub fn before(op: Op) -> Self {
        ProgramPoint {
            anchor: Anchor::Before(op),
        }
    }
    pub fn after(op: Op) -> Self {
        ProgramPoint {
            anchor: Anchor::After(op),
        }
    }
    pub fn start(r: Region) -> Self {
        ProgramPoint {
            anchor: Anchor::Start(r),
        }
    }
    pub fn end(r: Region) -> Self {
        ProgramPoint {
            anchor: Anchor::End(r),
        }
    }

    /// The region of the point and its gap index (0 = before the first op, `n` = after the
    /// last non-terminator op). `None` when the anchor is not placed in `k`.
    pub fn resolve(
        &self,
        k: &Kernel,
        op_region: &OpPositions,
    ) -> Option<(Region, usize)> {
        match self.anchor {
            Anchor::Before(op) => op_region.get(op),
            Anchor::After(op) => op_region.get(op).map(|(r, i)| (r, i + 1)),
            Anchor::Start(r) => k.regions().get(r).map(|_| (r, 0)),
            Anchor::End(r) => k.regions().get(r).map(|_| (r, body_len(k, r))),
        }
    }
}

/// Number of ops of a region before its terminator (`yield`/`condition`), i.e. the index of
/// the last gap where an op may be inserted.
pub fn body_len(k: &Kernel, r: Region) -> usize {
    let ops = k.region_ops(r);
    match ops.last() {
        Some(&last) if matches!(k.ops[last].kind, OpKind::Yield(_) | OpKind::Condition(_)) => {
            ops.len() - 1
        }
        _ => ops.len(),
    }
}

/// Why an edit exists (for `--explain` and for the checker's reports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EditReason {
    /// Removes the listed hazards (indices into the placement's hazard list).
    Hazards(Vec<usize>),
    /// Added by a pass for another reason, described in words.
    Other(String),
}

impl EditReason {
    /// The reason in words (empty for [`EditReason::Hazards`], whose words are the hazards').
    pub fn text(&self) -> &str {
        match self {
            EditReason::Hazards(_) => "",
            EditReason::Other(s) => s,
        }
    }
}

/// One insertion of a sync op.
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    pub at: ProgramPoint,
    /// The sync op to insert (`Barrier`, `WarpSync`, a wait, ...). It must have no results and
    /// no regions.
    pub op: OpKind,
    pub reason: EditReason,
}

/// A sorted list of edits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyncPlan {
    pub edits: Vec<Edit>,
}

/// Maps each placed op to its region and index.
pub fn op_positions(k: &Kernel) -> OpPositions {
    let mut pos = vec![None; k.ops.len()];
    for (r, rd) in k.regions().iter() {
        for (i, &op) in rd.ops().iter().enumerate() {
            if let Some(p) = pos.get_mut(op.index()) {
                *p = Some((r, i));
            }
        }
    }
    OpPositions(pos)
}

/// Each placed op's region and index in it, a table by op id ([`op_positions`]; hashing
/// every op of a 10^5-op kernel was 4% of `sync`).
#[derive(Clone, Debug)]
pub struct OpPositions(Vec<Option<(Region, usize)>>);

impl OpPositions {
    /// The region and index of `op`; `None` when it is not placed.
    pub fn get(&self, op: Op) -> Option<(Region, usize)> {
        self.0.get(op.index()).copied().flatten()
    }
}

/// The pre-order rank of every gap of the regions reached from the kernel body (a total
/// order of program points used to sort plans), and the position of every op there. Tables
/// by entity id: one flat vector of ranks, each region's gaps a slice of it; O(ops). Ranks are
/// `u32` (there are ops + regions of them, and op ids are `u32`): 4 bytes a gap, where `usize`
/// made the table 8 (it is live at `sync`'s peak, docs/performance.md `bytes39`).
struct GapRanks {
    ranks: Vec<u32>,
    /// Per region: where its gaps' ranks start in `ranks`, and how many there are.
    gaps: SecondaryMap<Region, Option<(u32, u32)>>,
    /// Per op: its region and index.
    pos: SecondaryMap<Op, Option<(Region, u32)>>,
    /// The next rank to give.
    next: u32,
}

impl GapRanks {
    fn new(k: &Kernel) -> GapRanks {
        fn go(k: &Kernel, r: Region, t: &mut GapRanks) {
            let ops = k.region_ops(r);
            let start = t.ranks.len();
            // This region's gaps are reserved first (its nested regions' come after).
            t.ranks.resize(start + ops.len() + 1, 0);
            t.gaps.set(r, Some((start as u32, ops.len() as u32 + 1)));
            let rank = |t: &mut GapRanks, i: usize| {
                t.ranks[start + i] = t.next;
                t.next += 1;
            };
            for (i, &op) in ops.iter().enumerate() {
                t.pos.set(op, Some((r, i as u32)));
                rank(t, i);
                for &c in &k.ops[op].regions {
                    go(k, c, t);
                }
            }
            rank(t, ops.len());
        }
        let mut t = GapRanks {
            ranks: Vec::with_capacity(k.ops.len() * 2),
            gaps: SecondaryMap::with_default(None),
            pos: SecondaryMap::with_default(None),
            next: 0,
        };
        go(k, k.body(), &mut t);
        t
    }

    /// The rank of a point (`u32::MAX` where it is not placed in the kernel).
    fn rank(&self, k: &Kernel, p: &ProgramPoint) -> u32 {
        let at = || -> Option<u32> {
            let (r, i) = match p.anchor {
                Anchor::Before(op) => (*self.pos.get(op))?,
                Anchor::After(op) => self.pos.get(op).map(|(r, i)| (r, i + 1))?,
                Anchor::Start(r) => (r, 0),
                Anchor::End(r) => {
                    self.gaps.get(r).as_ref()?;
                    (r, body_len(k, r) as u32)
                }
            };
            let (start, n) = (*self.gaps.get(r))?;
            (i < n).then(|| self.ranks[(start + i) as usize])
        };
        at().unwrap_or(u32::MAX)
    }
}

impl SyncPlan {
    /// Sorts the edits in program order (stable for edits at the same point).
    pub fn sort(&mut self, k: &Kernel) {
        let t = GapRanks::new(k);
        self.edits.sort_by_cached_key(|e| t.rank(k, &e.at));
    }

    pub fn len(&self) -> usize {
        self.edits.len()
    }

    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// The plan without its `n`-th edit (used for mutation testing: every edit must matter).
    pub fn without(&self, n: usize) -> SyncPlan {
        let mut p = self.clone();
        if n < p.edits.len() {
            p.edits.remove(n);
        }
        p
    }
}

/// A kernel with a plan applied, and the op each edit created.
#[derive(Clone, Debug)]
pub struct Applied {
    pub kernel: Kernel,
    /// `created[i]` is the op edit `i` inserted: op `k.ops.len() + i` of the kernel the plan
    /// was applied to (ops are created in plan order).
    pub created: Vec<Op>,
}

/// Materializes a plan on a copy of `k`. Every edit must be anchored in `k` (plans are built
/// from the kernel they are applied to): an edit whose op or region is not placed in `k` is a
/// bug in the pass that made the plan, reported as a verifier error (V0002) naming the first
/// such edit, and nothing is applied.
pub fn apply(k: &Kernel, plan: &SyncPlan) -> Result<Kernel, Diagnostic> {
    apply_tracked(k, plan).map(|a| a.kernel)
}

/// [`apply`], also returning the op each edit created (in plan order, so the ids of the new
/// ops follow the plan: the i-th edit's op is op `k.ops.len() + i`).
pub fn apply_tracked(k: &Kernel, plan: &SyncPlan) -> Result<Applied, Diagnostic> {
    let mut out = k.clone();
    let created = apply_in_place(&mut out, plan)?;
    Ok(Applied {
        kernel: out,
        created,
    })
}

/// [`apply_tracked`] on the kernel itself instead of a copy, for a caller that does not read
/// the kernel without the plan afterwards: the same ops with the same ids in the same places
/// (a copy of a 10^6-op kernel, and the growth of its full op table by the first new op, were
/// 13% of `sync`). Every anchor is resolved before anything is written, so on an error (V0002)
/// the kernel is unchanged. Returns the op each edit created, in plan order.
pub fn apply_in_place(k: &mut Kernel, plan: &SyncPlan) -> Result<Vec<Op>, Diagnostic> {
    let pos = op_positions(k);
    let mut gaps = Vec::with_capacity(plan.edits.len());
    for (n, e) in plan.edits.iter().enumerate() {
        let Some(at) = e.at.resolve(k, &pos) else {
            return Err(Diagnostic::error(
                DiagKind::Verifier,
                "V0002",
                format!(
                    "edit #{n} of a sync plan is anchored at {:?}, which is not in @{}",
                    e.at.anchor, k.name
                ),
            )
            .with_note("a plan must be applied to the kernel it was computed for"));
        };
        gaps.push(at);
    }
    drop(pos);
    // Group insertions per region and gap, keeping plan order within a gap.
    let mut per_region: HashMap<Region, Vec<(usize, usize, Op)>> = HashMap::new();
    let mut created = Vec::with_capacity(plan.edits.len());
    for (n, (e, (r, g))) in plan.edits.iter().zip(gaps).enumerate() {
        let new = k.new_op(e.op.clone(), &[], vec![]);
        k.op_spans.set(new, Span::UNDEF);
        created.push(new);
        per_region.entry(r).or_default().push((g, n, new));
    }
    for (r, mut ins) in per_region {
        ins.sort_by_key(|&(g, n, _)| (g, n));
        let old = k.take_region_ops(r);
        let mut new_ops = Vec::with_capacity(old.len() + ins.len());
        let mut it = ins.into_iter().peekable();
        for (i, &op) in old.iter().enumerate() {
            while let Some((g, _, _)) = it.peek() {
                if *g > i {
                    break;
                }
                let (_, _, new) = it.next().expect("peeked");
                new_ops.push(new);
            }
            new_ops.push(op);
        }
        new_ops.extend(it.map(|(_, _, new)| new));
        k.set_region_ops(r, new_ops);
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "kernel @k(%o: global f32[64]) block(64) {
  shared @s : f32[64]
  %t = tid.x
  %r = sub 63, %t
  %x = load @s[%r]
  gstore %o[%t], %x
}
";

    fn edit(at: ProgramPoint) -> Edit {
        Edit {
            at,
            op: OpKind::Barrier,
            reason: EditReason::Other("test".into()),
        }
    }

    #[test]
    fn an_edit_anchored_at_an_op_the_kernel_does_not_place_is_an_error() {
        let mut k = crate::reader::parse_kernel(SRC).unwrap();
        // In the arena but in no region: a plan made for another kernel names such ops.
        let stray = k.new_op(OpKind::Barrier, &[], vec![]);
        let placed = k.region_ops(k.body())[2];
        let plan = SyncPlan {
            edits: vec![edit(ProgramPoint::before(placed)), edit(ProgramPoint::after(stray))],
        };
        let err = apply(&k, &plan).unwrap_err();
        assert_eq!((err.code, err.kind), ("V0002", DiagKind::Verifier));
        assert!(err.message.starts_with("edit #1 "), "{}", err.message);
        // The valid edit alone applies: one more op in the body.
        let ok = apply(&k, &SyncPlan { edits: plan.edits[..1].to_vec() }).unwrap();
        assert_eq!(ok.region_ops(ok.body()).len(), k.region_ops(k.body()).len() + 1);
    }

    #[test]
    fn applying_in_place_gives_the_copy_and_a_bad_plan_changes_nothing() {
        let k = crate::reader::parse_kernel(SRC).unwrap();
        let body = k.region_ops(k.body()).to_vec();
        let plan = SyncPlan {
            edits: vec![
                edit(ProgramPoint::end(k.body())),
                edit(ProgramPoint::before(body[2])),
                edit(ProgramPoint::start(k.body())),
                edit(ProgramPoint::after(body[2])),
            ],
        };
        let copy = apply_tracked(&k, &plan).unwrap();
        let mut inplace = k.clone();
        let created = apply_in_place(&mut inplace, &plan).unwrap();
        assert_eq!(created, copy.created);
        assert_eq!(inplace.ops_in_order(), copy.kernel.ops_in_order());
        assert_eq!(format!("{:?}", inplace.ops), format!("{:?}", copy.kernel.ops));
        assert_eq!(
            crate::emit::text::print_kernel(&inplace),
            crate::emit::text::print_kernel(&copy.kernel)
        );
        // The second edit is anchored nowhere: an error, and the kernel is as it was.
        let mut stray_k = k.clone();
        let stray = stray_k.new_op(OpKind::Barrier, &[], vec![]);
        let before = (stray_k.ops.len(), stray_k.ops_in_order());
        let bad = SyncPlan {
            edits: vec![edit(ProgramPoint::before(body[1])), edit(ProgramPoint::after(stray))],
        };
        let err = apply_in_place(&mut stray_k, &bad).unwrap_err();
        assert_eq!(err.code, "V0002");
        assert_eq!((stray_k.ops.len(), stray_k.ops_in_order()), before);
    }

    #[test]
    fn applied_edits_create_their_ops_in_plan_order_where_they_say() {
        use crate::ir::entities::EntityRef;
        let k = crate::reader::parse_kernel(SRC).unwrap();
        let body = k.region_ops(k.body());
        // Out of program order, two at one point: the ids follow the plan, the positions
        // follow the points (plan order within a point).
        let kinds = [OpKind::Barrier, OpKind::WarpSync, OpKind::CpAsyncCommit];
        let points = [
            ProgramPoint::end(k.body()),
            ProgramPoint::before(body[2]),
            ProgramPoint::before(body[2]),
        ];
        let plan = SyncPlan {
            edits: points
                .iter()
                .zip(&kinds)
                .map(|(&at, op)| Edit {
                    op: op.clone(),
                    ..edit(at)
                })
                .collect(),
        };
        let a = apply_tracked(&k, &plan).unwrap();
        let n = k.ops.len();
        assert_eq!(a.created, (n..n + 3).map(Op::new).collect::<Vec<_>>());
        for (op, kind) in a.created.iter().zip(&kinds) {
            assert_eq!(&a.kernel.ops[*op].kind, kind);
        }
        let out = a.kernel.region_ops(a.kernel.body());
        assert_eq!(out[2..4], [a.created[1], a.created[2]]);
        assert_eq!(out.last(), Some(&a.created[0]));
        assert_eq!(out.len(), body.len() + 3);
    }
}
