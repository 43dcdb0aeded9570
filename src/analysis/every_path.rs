//! Completion points on every path: where an async copy is complete for one destination.
//!
//! An async source becomes visible at the wait that completes it (`analysis::hazards`, module
//! doc), and the hazard's coverage starts there: a barrier after that point orders the copy
//! before the destination. That is sound only if the point runs on **every** path from the
//! copy to the destination. The in-flight dataflow's answer ([`LoopCompletion`]) is one wait
//! per copy, the first completing one, and may lie in an `if` arm or a loop body that the
//! destination's path need not enter (docs/async.md, "A completion on every path"); this
//! module replaces it, per (copy, destination) pair, by the first point that is on every path.
//!
//! Rule. A wait `w` completes the copy on every path reaching `w` (the dataflow only drops an
//! entry whose minimum age over all paths allows it). `w` runs on every path from the copy to
//! the destination when each region of its region path lies on the copy's region path or on
//! the destination's (the rest of the copy's regions, the common region between the two,
//! and the destination's regions up to it are all passed). Otherwise let `X` be the outermost
//! op holding `w` in a region off both paths: `X` runs on every path, and it completes the
//! copy whenever it runs when each of its regions that may run is sure to hold a completing
//! wait at its top level (or such an op, recursively): both arms of an `if`, the body of a
//! `stage` or of a `for` with constant bounds and at least one trip. Then `X` is the
//! completion point; else `w` gives none, and a later wait must (a barrier after a later wait
//! on every path also follows the earlier one on the paths through it).
//!
//! Complexity: O(depth) per pair whose dataflow wait is on every path (the common case, which
//! keeps the dataflow's answer untouched); otherwise O(W · (depth + R)) for the copy's `W`
//! completing waits and the ops `R` of the regions a lifted op holds.

use std::collections::BTreeSet;

use crate::analysis::hazards::{Paths, runs_body};
use crate::analysis::inflight::{Completions, LoopCompletion};
use crate::analysis::nearest::OpPositions;
use crate::analysis::overlap::IterTag;
use crate::ir::*;

/// What the choice reads: the kernel, its region paths and program order, the copy's
/// completing waits and the region paths of the copy (`pc`) and of the destination (`pb`).
pub(crate) struct PairPaths<'a> {
    pub k: &'a Kernel,
    pub paths: &'a Paths,
    pub order: &'a OpPositions,
    pub waits: &'a BTreeSet<Op>,
    pub pc: &'a [(Region, usize)],
    pub pb: &'a [(Region, usize)],
}

impl PairPaths<'_> {
    /// The point through which wait `w` completes the copy on every path from the copy to the
    /// destination: `w`, the op `X` of the module doc, or none.
    pub(crate) fn lift(&self, w: Op) -> Option<Op> {
        let pw = self.paths.path.get(&w)?;
        let on = |c: &[(Region, usize)], j: usize, r: Region| c.get(j).is_some_and(|e| e.0 == r);
        for j in 1..pw.len() {
            let r = pw[j].0;
            if !on(self.pc, j, r) && !on(self.pb, j, r) {
                let x = self.k.region_ops(pw[j - 1].0)[pw[j - 1].1];
                return self.completes_whole(x).then_some(x);
            }
        }
        Some(w)
    }

    /// Whether compound op `x` completes the copy whenever it runs (module doc).
    fn completes_whole(&self, x: Op) -> bool {
        let k = self.k;
        let regions: Vec<Region> = match &k.ops[x].kind {
            OpKind::If { .. } if k.ops[x].regions.len() == 2 => k.ops[x].regions.clone(),
            OpKind::If { .. } => return false,
            _ => match runs_body(k, x) {
                Some(body) => vec![body],
                None => return false,
            },
        };
        regions.iter().all(|&r| {
            k.region_ops(r).iter().any(|&o| {
                self.waits.contains(&o) || (!k.ops[o].regions.is_empty() && self.completes_whole(o))
            })
        })
    }

    /// The first point in program order, among the lifts of `candidates`, that completes the
    /// copy on every path to the destination.
    fn first(&self, candidates: impl Iterator<Item = Op>) -> Option<Op> {
        candidates
            .filter_map(|w| self.lift(w))
            .min_by_key(|x| self.order.get(x).copied().unwrap_or(usize::MAX))
    }
}

/// The completion of `copy` for one destination: `None` when the dataflow's answer `lc`
/// already runs on every path to it (keep `lc`), else `lc` with its wait replaced by the
/// first point on every path (none: the copy may be in flight there, which the hazard
/// builders report where the footprints meet). The in-loop answer is replaced only by a
/// wait of the same loop level (`copy_loops[level]`'s body, outside deeper copy loops); where
/// none is on every path the dataflow's answer stays (docs/async.md: a known limit).
pub(crate) fn for_pair(
    pp: &PairPaths,
    c: &Completions,
    copy: Op,
    copy_loops: &[Op],
    lc: &LoopCompletion,
) -> Option<LoopCompletion> {
    let k = pp.k;
    let mut out = lc.clone();
    let mut changed = false;
    if let Some((w, _)) = lc.in_loop
        && pp.lift(w) != Some(w)
    {
        match lc.level {
            None => {
                out.in_loop = pp.first(pp.waits.iter().copied()).map(|x| (x, 0));
                changed = true;
            }
            Some(level) => {
                if let Some(best) = in_loop_candidate(pp, c, copy, copy_loops, level) {
                    out.in_loop = Some(best);
                    changed = true;
                }
            }
        }
    }
    if let (Some(x), Some(level)) = (lc.exit, lc.level)
        && pp.lift(x) != Some(x)
    {
        let l = copy_loops[level];
        let after = |w: &Op| {
            !k.parents().ancestors(*w).contains(&l) && pp.order.get(w) > pp.order.get(&l)
        };
        out.exit = pp.first(pp.waits.iter().copied().filter(after));
        out.exit_on_entry = out
            .exit
            .is_some_and(|e| pp.waits.contains(&e) && c.completes_on_entry(e, copy, copy_loops));
        changed = true;
    }
    changed.then_some(out)
}

/// The first (iteration distance, program order) wait of loop `copy_loops[level]`'s body
/// (outside deeper copy loops) completing `copy`, lifted to a point on every path.
fn in_loop_candidate(
    pp: &PairPaths,
    c: &Completions,
    copy: Op,
    copy_loops: &[Op],
    level: usize,
) -> Option<(Op, u32)> {
    let (l, deeper) = (copy_loops[level], copy_loops.get(level + 1).copied());
    let mut best: Option<(u32, usize, Op)> = None;
    for &w in pp.waits {
        let anc = pp.k.parents().ancestors(w);
        if !anc.contains(&l) || deeper.is_some_and(|d| anc.contains(&d)) {
            continue;
        }
        let Some(x) = pp.lift(w) else { continue };
        let pos = pp.order.get(&x).copied().unwrap_or(usize::MAX);
        for cc in c.by_wait.get(&w).into_iter().flatten().filter(|cc| cc.copy == copy) {
            if let Some((_, IterTag::Dist(d))) = cc.tags.iter().find(|(tl, _)| *tl == l)
                && best.is_none_or(|b| (*d, pos) < (b.0, b.1))
            {
                best = Some((*d, pos, x));
            }
        }
    }
    best.map(|(d, _, x)| (x, d))
}
