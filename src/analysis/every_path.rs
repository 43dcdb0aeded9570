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
//! `stage` or of a `for` with constant bounds and at least one trip, the then-arm of an `if`
//! that always runs it (`analysis::guards::always_then`). Then `X` is the
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
use crate::analysis::youngest::completes_youngest;
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

    /// The point through which wait `w` of loop `l`'s body, `d` iterations of `l` after the
    /// copy, completes it for the destination in every iteration that issued it (module doc,
    /// *Loops*). A region of `w`'s path inside `l`'s body is passed when: `d = 0` and the copy
    /// lies in it (entered in the copy's iteration), or in the then-arm (else-arm) of an `if`
    /// on the same condition value; `d = 0`, `dst_iter` (no conflict of the pair across
    /// iterations) and the destination lies in it; or it is the then-arm of a guard affine in
    /// `l`'s induction variable that holds from iteration `lo + d·step` on. Otherwise the op
    /// holding it must complete the copy whenever it runs ([`Self::completes_whole`]).
    pub(crate) fn lift_in_loop(&self, w: Op, l: Op, d: u32, dst_iter: bool) -> Option<Op> {
        let k = self.k;
        let pw = self.paths.path.get(&w)?;
        let op_at = |p: &[(Region, usize)], j: usize| k.region_ops(p[j - 1].0)[p[j - 1].1];
        let j0 = (1..pw.len()).find(|&j| op_at(pw, j) == l)?;
        let on = |c: &[(Region, usize)], j: usize, r: Region| c.get(j).is_some_and(|e| e.0 == r);
        for j in j0 + 1..pw.len() {
            let (r, x) = (pw[j].0, op_at(pw, j));
            let same_iteration = d == 0
                && (on(self.pc, j, r)
                    || (dst_iter && on(self.pb, j, r))
                    || (j0 + 1..self.pc.len()).any(|jc| same_arm(k, (x, r), (op_at(self.pc, jc), self.pc[jc].0))));
            let always = runs_body(k, x) == Some(r) || self.always_then(x);
            if same_iteration || always || guard_holds(k, (x, r), l, d) {
                continue;
            }
            // `x` as the completion point orders only what follows it: not a destination
            // inside it.
            let holds_dst = self.pb.get(j - 1) == Some(&pw[j - 1]);
            return (!holds_dst && self.completes_whole(x)).then_some(x);
        }
        Some(w)
    }

    /// Whether `x` is an `if` that runs its then-arm whenever it runs, with no else-arm ops
    /// (`analysis::guards`): its then-arm is passed like an always-run body.
    fn always_then(&self, x: Op) -> bool {
        self.paths.always_then.contains(&x)
    }

    /// Whether compound op `x` completes the copy whenever it runs (module doc).
    fn completes_whole(&self, x: Op) -> bool {
        let k = self.k;
        let regions: Vec<Region> = match &k.ops[x].kind {
            OpKind::If { .. } if self.always_then(x) => vec![k.ops[x].regions[0]],
            OpKind::If { .. } if k.ops[x].regions.len() == 2 => k.ops[x].regions.to_vec(),
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

/// Whether region `r` of `if` op `x` and region `rc` of `if` op `y` are the same arm of two
/// `if`s on one condition value: in one iteration both run, or neither.
fn same_arm(k: &Kernel, (x, r): (Op, Region), (y, rc): (Op, Region)) -> bool {
    match (&k.ops[x].kind, &k.ops[y].kind) {
        (OpKind::If { cond: a }, OpKind::If { cond: b }) if a == b => {
            let arm = |o: Op, r: Region| k.ops[o].regions.iter().position(|&q| q == r);
            arm(x, r).is_some() && arm(x, r) == arm(y, rc)
        }
        _ => false,
    }
}

/// Whether `r` is the then-arm of an `if` (`x`) whose condition is `cmp gt|ge %iv, C` (or
/// `cmp lt|le C, %iv`) on the induction variable of `for` loop `l` with constant `lo` and
/// positive constant `step`, true in every iteration from `lo + d·step` on.
fn guard_holds(k: &Kernel, (x, r): (Op, Region), l: Op, d: u32) -> bool {
    let (OpKind::If { cond: Operand::Value(c) }, OpKind::For { lo, step, .. }) = (&k.ops[x].kind, &k.ops[l].kind)
    else {
        return false;
    };
    let cst = |o: &Operand| match o {
        Operand::Imm(s) => Some(s.as_i64()),
        Operand::Value(v) => match k.values[*v].def {
            ValueDef::Result(o, _) => match k.ops[o].kind {
                OpKind::Const(s) => Some(s.as_i64()),
                _ => None,
            },
            _ => None,
        },
    };
    let ValueDef::Result(cmp, _) = k.values[*c].def else {
        return false;
    };
    let (Some(lo), Some(step)) = (cst(lo), cst(step)) else {
        return false;
    };
    let iv = k.region_args(k.ops[l].regions[0]).first().copied().map(Operand::Value);
    let first = (d as i64).checked_mul(step).and_then(|x| x.checked_add(lo));
    match (&k.ops[cmp].kind, first) {
        (OpKind::Cmp(p, a, b), Some(f)) if step > 0 && k.ops[x].regions.first() == Some(&r) => {
            match (Some(*a) == iv, Some(*b) == iv) {
                (true, false) => cst(b).is_some_and(|c| match p {
                    CmpPred::Gt => f > c,
                    CmpPred::Ge => f >= c,
                    _ => false,
                }),
                (false, true) => cst(a).is_some_and(|c| match p {
                    CmpPred::Lt => c < f,
                    CmpPred::Le => c <= f,
                    _ => false,
                }),
                _ => false,
            }
        }
        _ => false,
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
    carried: &mut dyn FnMut() -> bool,
) -> Choice {
    let k = pp.k;
    let straight = |ws: Vec<Op>, keep: Op| first_on_every_path(pp, dst, &ws, keep);
    let mut memo = None;
    let mut carried = || *memo.get_or_insert_with(&mut *carried);
    let mut out = lc.clone();
    // Whether the in-loop wait was dropped for the exit wait (which then stays where it is
    // the only completing wait after the loop: rule 4).
    let mut exit_only = false;
    match (lc.in_loop, lc.level) {
        (Some((w, _)), None) if pp.lift(w) != Some(w) => {
            match straight(pp.waits.iter().copied().collect(), w) {
                Ok(x) => out.in_loop = x.map(|x| (x, 0)),
                Err(choice) => return choice,
            }
        }
        (Some((w, d)), Some(level)) => {
            match in_loop_wait(pp, c, (copy, dst), copy_loops, (w, d, level), &mut carried) {
                Ok(InLoopWait::Keep) => {}
                Ok(InLoopWait::Use(best)) => out.in_loop = Some(best),
                Ok(InLoopWait::ExitOnly) if lc.exit.is_some() => {
                    out.in_loop = None;
                    exit_only = true;
                }
                Ok(InLoopWait::ExitOnly) => return Choice::AtDestination,
                Err(choice) => return choice,
            }
        }
        _ => {}
    }
    // The exit wait serves only destinations outside the copy's loop at `level`.
    if let (Some(x), Some(level)) = (lc.exit, lc.level)
        && !k.parents().ancestors(dst).contains(&copy_loops[level])
        && let Some(choice) = exit_wait(pp, c, (copy, dst), copy_loops, (x, level, exit_only), &mut out, &mut carried)
    {
        return choice;
    }
    if &out == lc { Choice::Keep } else { Choice::Use(out) }
}

/// [`for_pair`]'s exit wait `x` of the copy's loop at `level`, for a destination outside
/// that loop: moves `out.exit` (and its `exit_on_entry`) to the first point on every path to
/// `dst` that completes the copy after the loop, or answers the [`Choice`] the pair ends with
/// (`None`: `out` against the dataflow's choice decides). `exit_only`: the in-loop wait was
/// dropped for the exit wait, which then stays where it is the only completing wait after the
/// loop (rule 4).
fn exit_wait(
    pp: &PairPaths,
    c: &Completions,
    (copy, dst): (Op, Op),
    copy_loops: &[Op],
    (x, level, exit_only): (Op, usize, bool),
    out: &mut LoopCompletion,
    carried: &mut dyn FnMut() -> bool,
) -> Option<Choice> {
    let k = pp.k;
    let l = copy_loops[level];
    // For a pair carried across a common loop, the exit must run in the copy's iteration
    // of it: regions on the destination's path alone do not count, and no fallback keeps
    // a wait that some path skips (docs/async.md, "The youngest execution").
    let own = PairPaths { pb: pp.pc, ..*pp };
    let carried = carried();
    let pp = if carried { &own } else { pp };
    let after =
        |w: &Op| !k.parents().ancestors(*w).contains(&l) && pp.order.get(w) > pp.order.get(&l);
    let pos = |o: &Op| pp.order.get(o).copied().unwrap_or(usize::MAX);
    let before_dst = |o: &Op| pos(o) < pos(&dst);
    let fits = |w: &Op| exit_fits(pp, c, (copy, dst), copy_loops, level, *w);
    let on_entry = |e: Op| pp.waits.contains(&e) && c.completes_on_entry(e, copy, copy_loops);
    let ws: Vec<Op> = pp.waits.iter().copied().filter(|w| after(w) && fits(w)).collect();
    if !fits(&x) {
        // The dataflow's exit completes an older execution only, or runs outside a loop
        // that holds the destination: the first exit that fits, before the destination
        // on every path, else the destination itself.
        let Some(e) = pp.first(ws.into_iter()).filter(before_dst) else {
            return Some(Choice::AtDestination);
        };
        out.exit = Some(e);
        out.exit_on_entry = on_entry(e);
        return None;
    }
    if pp.lift(x) == Some(x) {
        return None;
    }
    if carried {
        let Some(e) = pp.first(ws.into_iter()).filter(before_dst) else {
            return Some(Choice::AtDestination);
        };
        out.exit = Some(e);
        out.exit_on_entry = on_entry(e);
        return None;
    }
    match first_on_every_path(pp, dst, &ws, x) {
        Ok(e) => {
            out.exit = e;
            out.exit_on_entry = e.is_some_and(on_entry);
            None
        }
        Err(Choice::Keep) if exit_only => None,
        Err(choice) => Some(choice),
    }
}

/// The first point on every path to `dst` among the waits `ws`, or how [`for_pair`] falls
/// back. (A destination before `keep`, the first completing wait, is before every other too:
/// the builders' own in-flight test applies.)
fn first_on_every_path(
    pp: &PairPaths,
    dst: Op,
    ws: &[Op],
    keep: Op,
) -> Result<Option<Op>, Choice> {
    let pos = |o: &Op| pp.order.get(o).copied().unwrap_or(usize::MAX);
    let before_dst = |o: &Op| pos(o) < pos(&dst);
    if !before_dst(&keep) {
        return Err(Choice::Keep);
    }
    match pp.first(ws.iter().copied()).filter(before_dst) {
        Some(x) => Ok(Some(x)),
        None if ws.iter().filter(|w| before_dst(w)).count() <= 1 => Err(Choice::Keep),
        None => Err(Choice::AtDestination),
    }
}

/// What [`in_loop_wait`] makes of the dataflow's in-loop wait.
enum InLoopWait {
    /// It runs on every path to the destination (or is lifted to itself): it stays.
    Keep,
    /// The first point on every path that completes the copy, with its distance.
    Use((Op, u32)),
    /// No wait of the loop's level completes the copy in every iteration that issued it, and
    /// the destination is after the loop: the exit wait serves if there is one (rule 4).
    ExitOnly,
}

/// [`for_pair`]'s answer for the in-loop wait `w`, which completes `copy` (in the loop at
/// `level` of `copy_loops`) `d` iterations after its issue: [`InLoopWait`], or the
/// [`Choice`] the pair ends with. `carried` is asked at most once, and only when the
/// destination is in the loop.
fn in_loop_wait(
    pp: &PairPaths,
    c: &Completions,
    (copy, dst): (Op, Op),
    copy_loops: &[Op],
    (w, d, level): (Op, u32, usize),
    carried: &mut dyn FnMut() -> bool,
) -> Result<InLoopWait, Choice> {
    let pos = |o: &Op| pp.order.get(o).copied().unwrap_or(usize::MAX);
    let l = copy_loops[level];
    let dst_in = pp.k.parents().ancestors(dst).contains(&l);
    // A destination after the loop takes a later iteration's wait only through the exit wait
    // (`hazards::completed_later`): only `d = 0` is asked here.
    if !dst_in && d != 0 {
        return Ok(InLoopWait::Keep);
    }
    let mut memo = None;
    let mut dst_iter = || dst_in && *memo.get_or_insert_with(|| !carried());
    // A wait that completes an older execution only is no completion of the instance
    // (`analysis::youngest`).
    let young = completes_youngest(pp.k, c, w, copy, copy_loops, (level, Some(d)));
    if young
        && (pp.lift_in_loop(w, l, d, false) == Some(w)
            || (dst_in && pp.lift_in_loop(w, l, d, dst_iter()) == Some(w)))
    {
        return Ok(InLoopWait::Keep);
    }
    match in_loop_candidate(pp, c, copy, copy_loops, (level, d, !young), &mut dst_iter) {
        // A wait of the copy's own iteration after a destination that follows the copy
        // completes it for the later iterations' instances alone: the forward pair would see
        // it in flight where the dataflow's wait (on the destination's path in its iteration)
        // completed it. The destination itself serves both.
        Some((x, 0)) if dst_in && pos(&copy) < pos(&dst) && pos(&x) >= pos(&dst) => {
            Err(Choice::AtDestination)
        }
        Some(best) => Ok(InLoopWait::Use(best)),
        // Inside the loop no wait of its level completes the copy in every iteration that
        // issued it: the destination itself (the dataflow).
        None if dst_in => Err(Choice::AtDestination),
        // After the loop: the exit wait, if any ([`for_pair`] decides).
        None => Ok(InLoopWait::ExitOnly),
    }
}

/// Whether wait `w` after loop `copy_loops[level]` may serve as the copy's exit wait for
/// destination `dst`: it completes the youngest execution of the loop's instance
/// (`analysis::youngest`), and it lies in every loop around both the copy and the destination
/// (an exit after such a loop orders none of its later iterations).
fn exit_fits(pp: &PairPaths, c: &Completions, (copy, dst): (Op, Op), copy_loops: &[Op], level: usize, w: Op) -> bool {
    let parents = pp.k.parents();
    let (around_dst, around_w) = (parents.ancestors(dst), parents.ancestors(w));
    copy_loops.iter().filter(|l| around_dst.contains(l)).all(|l| around_w.contains(l))
        && completes_youngest(pp.k, c, w, copy, copy_loops, (level, None))
}

/// The first wait in program order of loop `copy_loops[level]`'s body (outside deeper copy
/// loops) completing `copy` at iteration distance `want` (the dataflow's: a later distance
/// would make the builders see the copy in flight where the dataflow's wait completed it),
/// lifted to a point that completes it in every iteration that issued it. With `later` (the
/// dataflow's wait completes an older execution only: `analysis::youngest`), the smallest
/// distance from `want` on at which a wait completes the youngest execution.
fn in_loop_candidate(
    pp: &PairPaths,
    c: &Completions,
    copy: Op,
    copy_loops: &[Op],
    (level, want, later): (usize, u32, bool),
    dst_iter: &mut dyn FnMut() -> bool,
) -> Option<(Op, u32)> {
    let (l, deeper) = (copy_loops[level], copy_loops.get(level + 1).copied());
    let mut best: Option<(u32, usize, Op)> = None;
    for &w in pp.waits {
        let anc = pp.k.parents().ancestors(w);
        if !anc.contains(&l) || deeper.is_some_and(|d| anc.contains(&d)) {
            continue;
        }
        for cc in c.completed_by(w, copy) {
            let Some((_, IterTag::Dist(d))) = cc.tags.iter().find(|(tl, _)| *tl == l) else {
                continue;
            };
            let distance_ok = *d == want || (later && *d > want);
            if !distance_ok || !completes_youngest(pp.k, c, w, copy, copy_loops, (level, Some(*d))) {
                continue;
            }
            let x = match pp.lift_in_loop(w, l, *d, false) {
                Some(x) => Some(x),
                None if dst_iter() => pp.lift_in_loop(w, l, *d, true),
                None => None,
            };
            let Some(x) = x else { continue };
            let pos = pp.order.get(&x).copied().unwrap_or(usize::MAX);
            if best.is_none_or(|b| (*d, pos) < (b.0, b.1)) {
                best = Some((*d, pos, x));
            }
        }
    }
    best.map(|(d, _, x)| (x, d))
}
