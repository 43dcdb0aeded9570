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

/// How the hazard builders take one (copy, destination) pair's completion.
pub(crate) enum Choice {
    /// The dataflow's answer runs on every path to the destination, or is the only
    /// completing wait before it (the paths that skip it issue no copy: module doc).
    Keep,
    /// The dataflow's answer with its wait replaced by the first point on every path.
    Use(LoopCompletion),
    /// Several completing waits, none on every path: the copy is complete (the dataflow
    /// says it is not in flight there) only at the destination itself.
    AtDestination,
}

/// The completion of `copy` for the destination `dst` (module doc): where the dataflow's
/// answer `lc` is not on every path to it, the first point before the destination that is;
/// else, where `lc`'s wait is the only completing wait before the destination, `lc` (every
/// path that issues the copy and reaches the destination with the copy complete passes it);
/// else the destination itself. The in-loop answer is replaced only by a wait of the same
/// loop level (`copy_loops[level]`'s body, outside deeper copy loops), and kept where none is
/// on every path (docs/async.md: a known limit).
pub(crate) fn for_pair(
    pp: &PairPaths,
    c: &Completions,
    (copy, dst): (Op, Op),
    copy_loops: &[Op],
    lc: &LoopCompletion,
) -> Choice {
    let k = pp.k;
    let pos = |o: &Op| pp.order.get(o).copied().unwrap_or(usize::MAX);
    let before_dst = |o: &Op| pos(o) < pos(&dst);
    // The first point on every path among `ws`, or how to fall back.
    // (A destination before `keep`, the first completing wait, is before every other too:
    // the builders' own in-flight test applies.)
    let straight = |ws: Vec<Op>, keep: Op| -> Result<Option<Op>, Choice> {
        if !before_dst(&keep) {
            return Err(Choice::Keep);
        }
        match pp.first(ws.iter().copied()).filter(before_dst) {
            Some(x) => Ok(Some(x)),
            None if ws.iter().filter(|w| before_dst(w)).count() <= 1 => Err(Choice::Keep),
            None => Err(Choice::AtDestination),
        }
    };
    let mut out = lc.clone();
    if let Some((w, _)) = lc.in_loop
        && pp.lift(w) != Some(w)
    {
        match lc.level {
            None => match straight(pp.waits.iter().copied().collect(), w) {
                Ok(x) => out.in_loop = x.map(|x| (x, 0)),
                Err(choice) => return choice,
            },
            Some(level) => match in_loop_candidate(pp, c, copy, copy_loops, level) {
                Some(best) => out.in_loop = Some(best),
                None => return Choice::Keep,
            },
        }
    }
    // The exit wait serves only destinations outside the copy's loop at `level`.
    if let (Some(x), Some(level)) = (lc.exit, lc.level)
        && !k.parents().ancestors(dst).contains(&copy_loops[level])
        && pp.lift(x) != Some(x)
    {
        let l = copy_loops[level];
        let after =
            |w: &Op| !k.parents().ancestors(*w).contains(&l) && pp.order.get(w) > pp.order.get(&l);
        match straight(pp.waits.iter().copied().filter(after).collect(), x) {
            Ok(e) => {
                out.exit = e;
                out.exit_on_entry =
                    e.is_some_and(|e| pp.waits.contains(&e) && c.completes_on_entry(e, copy, copy_loops));
            }
            Err(choice) => return choice,
        }
    }
    if &out == lc { Choice::Keep } else { Choice::Use(out) }
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
