//! Tile loops flattened away, for `analysis::mbar_protocol` (docs/async.md, "Tile loops
//! flattened"): a persistent warp-specialized kernel runs, in each role arm, a tile loop
//! `for %tile = bid.x to %tiles step G` (bounds reading `bid`: `mbar_loop_trips`) around
//! its pipeline loop `for %k = 0 to T`, the pipeline counter carried from tile to tile.
//! Where nothing the trace evaluates reads the tile loop's own values but that carried
//! state, the mbarrier events of each thread at `t` tiles of `N` k-steps are the events of
//! *one* run of the pipeline loop over `t·N` k-steps, and the counted keys (which count the
//! arm's leaf-loop iterations) order both alike. So the kernel with each tile loop replaced by
//! its pipeline loop (fed the tile loop's initial values, its results standing for the tile
//! loop's) has, at trip count `t·N`, the verdict of the original at `(t, N)`, and the search
//! over tile counts is replaced by the one-parameter search and every-trip-count argument on
//! this flattened kernel.
//!
//! Premises (checked on the *relevant* values: the cone of the operands the trace evaluates,
//! through pure ops and through the initial and yielded values of the iteration values it
//! reaches — an iteration value no evaluated operand reads, such as an accumulator tile, is
//! not relevant):
//!
//! 1. every traced loop whose bounds read `bid` has the same representative trip count
//!    (`mbar_loop_trips`: the same bound expressions or trip-count forms, so the same `t` in
//!    every thread; an inexact class, equal only without `i32` wrap-around, declines) and
//!    lies in no other loop;
//! 2. its body holds exactly one op with mbarrier ops, a `for` loop `L` with none nested, whose
//!    counter is not relevant (no per-tile guard); neither is the tile loop's counter;
//! 3. every relevant iteration value of the tile loop or of `L`, and every relevant result of
//!    the tile loop, is *carried*: `L` starts it from the tile loop's iteration value and the
//!    tile loop yields `L`'s result for it;
//! 4. no other relevant value is defined in the tile loop's body outside `L` (constants
//!    excepted): `L`'s bounds and every value its body reads are the same in every tile;
//! 5. the pipeline loops of all tile loops (one per role arm) are in one exact trip-count
//!    class (`mbar_loop_trips`: the same bound expressions or trip-count forms without wrap,
//!    block-uniform, so one trip count `N` per tile in every thread). Without it a role at `0 to %kt` and one at `1 to %kt` run `t·N` and `t·(N−1)`
//!    k-steps, a deficit of `t`, where the flattened run compares `T` with `T − 1` (s38's N3:
//!    a wrong "verified" and a deadlock);
//! 6. (checked by the caller on the flattened kernel's every-trip-count argument) the loops
//!    that argument pumps are exactly these pipeline loops: no loop outside the tile loops
//!    runs up to the same trip count (it would run `t·N` trips flattened but `N` here).
//!
//! Then, tile by tile, `L` resumes from the state it left, with the same bounds, and nothing
//! else in the tile loop has an event: the sequence of a thread's events is the flattened
//! run's at `T = t·N`, in every role alike (premises 5 and 6: every loop whose trip count
//! the flattened parameter gives is a pipeline loop of `N` trips per tile), and the keys
//! compare alike (the counted position is the flattened iteration; the rest of a key
//! compares tile and k-step lexicographically, which for a block-uniform `N` is the
//! flattened order). `t = 0` is the flattened run of 0 trips.
//!
//! Complexity: one walk of the relevant cone (each value once) and one kernel clone.

use std::collections::HashSet;

use super::loop_trips;
use crate::ir::*;

/// The kernel `k` with every tile loop of representative `rep` replaced by its pipeline loop
/// (module doc), with those pipeline loops, or the premise that fails. `traced`: the ops
/// holding mbarrier ops.
pub(super) fn flatten(k: &Kernel, rep: Value, traced: &HashSet<Op>) -> Result<(Kernel, HashSet<Op>), String> {
    let loops: HashSet<Op> = traced.iter().copied().filter(|&o| matches!(k.ops[o].kind, OpKind::For { .. })).collect();
    let cls = loop_trips::classes(k, &loops);
    // Loops matched only where their bounds do not wrap may run different trip counts.
    if !cls.exact.contains(&rep) {
        return Err("the tile loops' trip counts are equal only where their bounds' `i32` arithmetic does not wrap".into());
    }
    let reps = cls.rep;
    let mut tiles: Vec<Op> = loops.iter().copied().filter(|&o| bounds(k, o).iter().any(|b| loop_trips::reads_bid(k, b))).collect();
    tiles.sort_unstable();
    if tiles.is_empty() {
        return Err("no tile loop".into());
    }
    let rel = relevant(k, traced);
    let mut plan = Vec::new();
    for &o in &tiles {
        if reps.get(&o) != Some(&rep) {
            return Err("two tile loops may run different trip counts".into());
        }
        plan.push((o, pipeline(k, o, traced, &rel)?));
    }
    // Premise 5: one trip count per tile for every role's pipeline loop.
    let ls: HashSet<Op> = plan.iter().map(|(_, (l, _))| *l).collect();
    let trips = loop_trips::classes(k, &ls);
    let first = trips.rep.get(&plan[0].1.0);
    let exact = first.is_some_and(|r| trips.exact.contains(r));
    if !exact || ls.iter().any(|l| trips.rep.get(l) != first) {
        return Err("the pipeline loops of the tile loops may run different trip counts per tile".into());
    }
    let mut k2 = k.clone();
    for (o, (l, pairs)) in plan {
        let hoist = hoisted(k, o, l);
        rewire(&mut k2, o, l, &pairs, &hoist);
    }
    Ok((k2, ls))
}

/// A loop's three bounds.
fn bounds(k: &Kernel, o: Op) -> Vec<Operand> {
    match &k.ops[o].kind {
        OpKind::For { lo, hi, step, .. } => vec![*lo, *hi, *step],
        _ => Vec::new(),
    }
}

/// The pipeline loop `L` of tile loop `o` and the carried pairs `(i, j)` (tile loop's
/// iteration value `i`, `L`'s `j`, both from 0), after premises 1–4 for `o`.
fn pipeline(k: &Kernel, o: Op, traced: &HashSet<Op>, rel: &HashSet<Value>) -> Result<(Op, Vec<(usize, usize)>), String> {
    let p = k.parents();
    if p.ancestors(o).iter().any(|&a| matches!(k.ops[a].kind, OpKind::For { .. } | OpKind::While { .. })) {
        return Err("a tile loop lies in another loop".into());
    }
    let body = k.ops[o].regions[0];
    let inner: Vec<Op> = k.region_ops(body).iter().copied().filter(|x| traced.contains(x)).collect();
    let [l] = inner[..] else {
        return Err("a tile loop's body holds mbarrier ops outside one pipeline loop".into());
    };
    let OpKind::For { init: jinit, .. } = &k.ops[l].kind else {
        return Err("a tile loop's mbarrier ops are not in a `for` loop".into());
    };
    let mut nested = false;
    k.walk_region(k.ops[l].regions[0], &mut |x| nested |= traced.contains(&x) && matches!(k.ops[x].kind, OpKind::For { .. } | OpKind::While { .. }));
    if nested {
        return Err("the pipeline loop of a tile loop nests another loop with mbarrier ops".into());
    }
    let (oargs, largs) = (k.region_args(body), k.region_args(k.ops[l].regions[0]));
    if rel.contains(&oargs[0]) || rel.contains(&largs[0]) {
        return Err("a tile loop's or its pipeline loop's counter is read by the trace".into());
    }
    let oy = yields(k, body);
    let pairs: Vec<(usize, usize)> = (0..oargs.len() - 1)
        .filter_map(|i| {
            let j = (0..largs.len() - 1).find(|&j| jinit.get(j) == Some(&Operand::Value(oargs[i + 1])))?;
            (oy.get(i) == Some(&Operand::Value(k.ops[l].results[j]))).then_some((i, j))
        })
        .collect();
    let carried_o = |i: usize| pairs.iter().any(|&(a, _)| a == i);
    let carried_l = |j: usize| pairs.iter().any(|&(_, b)| b == j);
    for i in 0..oargs.len() - 1 {
        let used = rel.contains(&oargs[i + 1]) || k.ops[o].results.get(i).is_some_and(|r| rel.contains(r));
        if used && !carried_o(i) {
            return Err(format!("the tile loop's iteration value %{} is not carried through its pipeline loop", k.value_names.get(oargs[i + 1])));
        }
    }
    for j in 0..largs.len() - 1 {
        if rel.contains(&largs[j + 1]) && !carried_l(j) {
            return Err(format!("the pipeline loop's iteration value %{} restarts every tile", k.value_names.get(largs[j + 1])));
        }
    }
    // Premise 4: relevant values defined in the tile loop's body outside `L`.
    let mut outside = HashSet::new();
    k.walk_region(body, &mut |x| {
        if x != l && !p.ancestors(x).contains(&l) {
            outside.insert(x);
        }
    });
    for &v in rel {
        let bad = match k.values[v].def {
            ValueDef::Result(d, _) => outside.contains(&d) && !invariant(k, &Operand::Value(v), &outside, l, 0),
            ValueDef::RegionArg(r, i) => r == body && !(i >= 1 && carried_o(i - 1)),
            ValueDef::Param(_) => false,
        };
        if bad {
            return Err(format!("%{}, which the trace evaluates, is computed per tile", k.value_names.get(v)));
        }
    }
    Ok((l, pairs))
}

/// Replaces tile loop `o` by its pipeline loop `l` in `k`: `l` starts each carried pair from
/// the tile loop's initial value, and its result stands for the tile loop's.
fn rewire(k: &mut Kernel, o: Op, l: Op, pairs: &[(usize, usize)], hoist: &[Op]) {
    let OpKind::For { init: oinit, .. } = k.ops[o].kind.clone() else { return };
    k.remove_op(l);
    let Some((r, at)) = k.remove_op(o) else { return };
    k.insert_op(r, at, l);
    for (n, &x) in hoist.iter().enumerate() {
        k.remove_op(x);
        k.insert_op(r, at + n, x);
    }
    if let OpKind::For { init, .. } = &mut k.ops[l].kind {
        for &(i, j) in pairs {
            init[j] = oinit[i];
        }
    }
    for &(i, j) in pairs {
        let res = k.ops[o].results[i];
        k.ops[l].results[j] = res;
        k.values[res].def = ValueDef::Result(l, j);
    }
}

/// Whether `x` has the same value in every tile: defined outside the tile loop's body
/// (`inside`: the ops there, but the pipeline loop `l`), or a pure op there over such values.
fn invariant(k: &Kernel, x: &Operand, inside: &HashSet<Op>, l: Op, depth: usize) -> bool {
    let Operand::Value(v) = x else { return true };
    let d = match k.values[*v].def {
        ValueDef::Result(d, _) if d == l => return false,
        ValueDef::Result(d, _) if inside.contains(&d) => d,
        ValueDef::Result(..) | ValueDef::Param(_) => return true,
        ValueDef::RegionArg(r, _) => return !k.parents().region_op[r].is_some_and(|o| inside.contains(&o)) && !inside_region(k, r, inside),
    };
    let go = |y: &Operand| depth < 64 && invariant(k, y, inside, l, depth + 1);
    match &k.ops[d].kind {
        OpKind::Const(_) => true,
        OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => go(a) && go(b),
        OpKind::Unary(_, a) => go(a),
        OpKind::Select(c, a, b) => go(c) && go(a) && go(b),
        _ => false,
    }
}

/// Whether region `r` is the tile loop's body (its arguments vary per tile): owned by no op
/// of `inside` but holding them.
fn inside_region(k: &Kernel, r: Region, inside: &HashSet<Op>) -> bool {
    k.region_ops(r).iter().any(|o| inside.contains(o))
}

/// The pure ops of tile loop `o`'s body before its pipeline loop `l` that are the same in
/// every tile (the trip count `(K + c) div B` computed there, say): placed before `l` in the
/// flattened kernel, in their order.
fn hoisted(k: &Kernel, o: Op, l: Op) -> Vec<Op> {
    let body = k.ops[o].regions[0];
    let ops = k.region_ops(body);
    let before: Vec<Op> = ops.iter().copied().take_while(|&x| x != l).collect();
    let inside: HashSet<Op> = ops.iter().copied().filter(|&x| x != l).collect();
    let pure = |x: Op| matches!(k.ops[x].kind, OpKind::Const(_) | OpKind::Binary(..) | OpKind::Unary(..) | OpKind::Cmp(..) | OpKind::Select(..));
    before.into_iter().filter(|&x| pure(x) && k.ops[x].results.iter().all(|&v| invariant(k, &Operand::Value(v), &inside, l, 0))).collect()
}

/// The values a region yields.
fn yields(k: &Kernel, r: Region) -> Vec<Operand> {
    match k.region_ops(r).last().map(|&y| &k.ops[y].kind) {
        Some(OpKind::Yield(ys)) => ys.clone(),
        _ => Vec::new(),
    }
}

/// The relevant values (module doc): the cone of the evaluated operands of the traced ops
/// (a loop's bounds, not its initial values), through pure ops, `if` results and the
/// initial and yielded values of reached iteration values.
fn relevant(k: &Kernel, traced: &HashSet<Op>) -> HashSet<Value> {
    let mut work: Vec<Operand> = Vec::new();
    for &o in traced {
        match &k.ops[o].kind {
            OpKind::For { .. } => work.extend(bounds(k, o)),
            _ => work.extend(super::traced_operands(k, o)),
        }
    }
    let mut seen = HashSet::new();
    while let Some(x) = work.pop() {
        let Operand::Value(v) = x else { continue };
        if !seen.insert(v) {
            continue;
        }
        match k.values[v].def {
            ValueDef::Param(_) => {}
            ValueDef::RegionArg(r, i) => {
                if let Some(l) = k.parents().region_op[r]
                    && let OpKind::For { init, .. } = &k.ops[l].kind
                    && i >= 1
                {
                    work.extend(init.get(i - 1).copied());
                    work.extend(yields(k, r).get(i - 1).copied());
                }
            }
            ValueDef::Result(d, i) => match &k.ops[d].kind {
                OpKind::For { init, .. } => {
                    work.extend(init.get(i).copied());
                    let body = k.ops[d].regions[0];
                    work.extend(yields(k, body).get(i).copied());
                    work.extend(k.region_args(body).get(i + 1).map(|&a| Operand::Value(a)));
                }
                OpKind::If { cond } => {
                    work.push(*cond);
                    for &r in &k.ops[d].regions {
                        work.extend(yields(k, r).get(i).copied());
                    }
                }
                OpKind::Binary(_, x, y) | OpKind::Cmp(_, x, y) => work.extend([*x, *y]),
                OpKind::Unary(_, x) => work.push(*x),
                OpKind::Select(c, x, y) => work.extend([*c, *x, *y]),
                _ => {}
            },
        }
    }
    seen
}
