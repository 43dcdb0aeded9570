//! Branch splitting: the repair of hazards under thread-dependent control that placement
//! left unplaceable (E0303 inside one arm, E0305 across the two arms of an `if`).
//!
//! A thread-dependent `if` `I` standing where every thread of the block arrives is cut into
//! consecutive `if`s on the same condition value: `%r = if %c { A; B } else { C; D }` becomes
//! `%v.. = if %c { A; yield .. } else { C; yield .. }` then `%r = if %c { B } else { D }`, and
//! ordinary placement then puts block barriers between the pieces (docs/placement.md,
//! section 10). Each thread runs the same ops in the same order as before, so the split
//! kernel's executions are a subset of the original's; the checker re-proves the result.
//!
//! Formulation: every top-level op of the two arms gets a phase (its piece); phases never
//! decrease along an arm, an intra-arm hazard from op `a` to op `b` needs
//! `phase(b) ≥ phase(a) + 1`, an E0305 pair needs its first access (lockstep order: smaller
//! top-level index, then the write, then the then-arm) in an earlier phase than the second.
//! The least phases are the longest paths of these difference constraints, found by
//! relaxation; for one arm this is interval stabbing by right end (the fewest cuts). A value
//! defined in one piece and used in a later one is carried as a result of the pieces between
//! (the other arm yields a typed placeholder); tokens, wgmma results and views cannot be
//! carried, and refuse the split of their branch.
//!
//! Invariants: the input kernel is never changed (the split is built on a copy); a branch is
//! split only when every constraint of it is met. Complexity: one hazard analysis, then
//! O((n + e) · e) per branch for `n` arm ops and `e` constraints, and O(ops under `I`) to
//! move and rename its ops.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::analysis::footprint::Footprints;
use crate::analysis::hazards::{Carry, Hazard, find_hazards_memo};
use crate::analysis::inflight::FlowMemo;
use crate::analysis::uniformity::Uniformity;
use crate::diag::{DiagKind, Diagnostic, Severity};
use crate::ir::*;
use crate::sync::{PlaceOptions, PointIndex, Scope, SyncModel};
use crate::target::Target;

/// A top-level op of an arm of the branch being split: (arm 0 or 1, index in the arm).
type Node = (usize, usize);

/// "`to` runs in a later piece than `from`".
type Edge = (Node, Node);

/// Whether `errors` hold a finding a split may repair (E0303 or E0305 errors).
pub fn may_repair(errors: &[Diagnostic]) -> bool {
    errors
        .iter()
        .any(|d| d.severity == Severity::Error && (d.code == "E0303" || d.code == "E0305"))
}

/// The kernel with its thread-dependent branches split where that cuts the hazards placement
/// could not place, and one W0340 warning per split branch; `None` when no branch can be
/// split (or none needs it). `k`'s target is the one synchronized for.
pub fn split_branches(
    k: &Kernel,
    target: &Target,
    opts: &PlaceOptions,
) -> Option<(Kernel, Vec<Diagnostic>)> {
    let cuts = cut_constraints(k, target, opts);
    let mut out = k.clone();
    let mut notes = Vec::new();
    for (i, edges) in cuts {
        let lens = [0, 1].map(|a| k.region_ops(k.ops[i].regions[a]).len());
        let Some(mut phases) = least_phases(lens, &edges) else {
            continue;
        };
        pin_terminators(k, i, &mut phases);
        let Some(plan) = carried_values(k, i, &phases) else {
            continue;
        };
        let parts = split_if(&mut out, i, &phases, &plan);
        notes.push(split_note(k, i, parts));
    }
    (!notes.is_empty()).then_some((out, notes))
}

/// The W0340 warning for branch `i` split into `parts` pieces.
fn split_note(k: &Kernel, i: Op, parts: usize) -> Diagnostic {
    Diagnostic::warning(
        DiagKind::Finding,
        "W0340",
        format!("thread-dependent `if` split into {parts} parts so that syncs sit between them"),
    )
    .with_label(k.span(i), "this branch is now written as consecutive `if`s on the same condition")
    .with_note("every thread runs the same ops in the same order; a part's shared accesses now finish in every thread before the next part starts (the two arms' accesses ordered as if they ran in lockstep)")
}

/// Per thread-dependent `if` to split (program order of its id), the ordering constraints
/// between top-level ops of its arms that placement could not enforce.
fn cut_constraints(k: &Kernel, target: &Target, opts: &PlaceOptions) -> BTreeMap<Op, Vec<Edge>> {
    let mut fp = Footprints::new(k, target.warp);
    let hz = find_hazards_memo(&mut fp, target, &mut FlowMemo::default());
    let model = SyncModel::new(k, &fp, &opts.bounds);
    let u = fp.uniformity();
    let mut existing = PointIndex::default();
    for p in &model.existing {
        existing.insert(*p);
    }
    let mut out: BTreeMap<Op, Vec<Edge>> = BTreeMap::new();
    for h in &hz.hazards {
        if existing.covers(h) || model.split_covers(h) {
            continue;
        }
        let scope = if h.intra_warp && !opts.no_warp_sync {
            Scope::Warp
        } else {
            Scope::Block
        };
        if model.is_legal_for(h.home, scope) {
            continue;
        }
        if let Some((i, e)) = intra_arm_edge(k, &model, u, h) {
            out.entry(i).or_default().push(e);
        }
    }
    for &(a, b) in &hz.divergent {
        let (Some((i, x)), Some((j, y))) = (branch_of(k, &model, u, a), branch_of(k, &model, u, b))
        else {
            continue;
        };
        if i == j && x.0 != y.0 {
            out.entry(i).or_default().push(lockstep_edge(k, (a, x), (b, y)));
        }
    }
    out
}

/// The constraint of a forward hazard homed directly in an arm of a branch that may be split:
/// its coverage there is gaps `[lo, hi]` of the arm, so the op before gap `lo` must run in
/// an earlier piece than op `hi`. `None` when the hazard cannot be cut so.
fn intra_arm_edge(
    k: &Kernel,
    model: &SyncModel,
    u: &Uniformity,
    h: &Hazard,
) -> Option<(Op, Edge)> {
    if !matches!(h.carry, Carry::Forward) {
        return None;
    }
    let &[(lo, hi)] = h.home_ranges.as_slice() else {
        return None;
    };
    let i = k.parents().region_op[h.home]?;
    let arm = splittable(k, model, u, i)?.iter().position(|&r| r == h.home)?;
    let (lo, hi) = (lo.div_ceil(2), hi / 2);
    let len = k.region_ops(h.home).len();
    (1 <= lo && lo <= hi && hi < len).then_some((i, ((arm, lo - 1), (arm, hi))))
}

/// The arms of `i` if it is a thread-dependent `if` standing where a block barrier is legal.
/// A role branch (`if in_group @g`) is not one: its arms are meant to run concurrently and
/// to order their accesses by handshakes (docs/pipeline.md), which a split would serialize.
fn splittable<'k>(k: &'k Kernel, model: &SyncModel, u: &Uniformity, i: Op) -> Option<&'k [Region]> {
    let OpKind::If { cond } = &k.ops[i].kind else {
        return None;
    };
    let parent = k.op_region(i)?;
    let legal = model.legal.get(&parent).copied().unwrap_or(false);
    let role = crate::analysis::role_split::branch_group(k, i).is_some();
    (legal && !role && !u.operand_uniform(cond)).then_some(&k.ops[i].regions[..])
}

/// The splittable branch holding `op` in one of its arms, and `op`'s node there (the index
/// of the top-level op of the arm that holds it).
fn branch_of(k: &Kernel, model: &SyncModel, u: &Uniformity, op: Op) -> Option<(Op, Node)> {
    let mut o = op;
    loop {
        let r = k.op_region(o)?;
        let owner = k.parents().region_op[r]?;
        if let Some(arms) = splittable(k, model, u, owner) {
            let arm = arms.iter().position(|&a| a == r)?;
            return Some((owner, (arm, k.position(o)?.1)));
        }
        o = owner;
    }
}

/// The order of an E0305 pair after the split: the access at the smaller top-level index
/// first; at equal indices the write, then the then-arm's.
fn lockstep_edge(k: &Kernel, (a, x): (Op, Node), (b, y): (Op, Node)) -> Edge {
    let writes = |o: Op| {
        crate::ir::effects::effects(k, o)
            .shared
            .iter()
            .any(|s| s.kind.writes())
    };
    let key = |o: Op, n: Node| (n.1, !writes(o), n.0);
    if key(a, x) <= key(b, y) { (x, y) } else { (y, x) }
}

/// The least phase of every op of the two arms (`lens` ops each) meeting `edges` and never
/// decreasing along an arm; `None` when the constraints have a cycle.
fn least_phases(lens: [usize; 2], edges: &[Edge]) -> Option<[Vec<usize>; 2]> {
    let mut ph = lens.map(|n| vec![0usize; n]);
    loop {
        let mut changed = false;
        for &((a, i), (b, j)) in edges {
            if ph[b][j] <= ph[a][i] {
                ph[b][j] = ph[a][i] + 1;
                changed = true;
            }
        }
        for arm in &mut ph {
            for i in 1..arm.len() {
                if arm[i] < arm[i - 1] {
                    arm[i] = arm[i - 1];
                    changed = true;
                }
            }
        }
        // An acyclic system's longest path has at most one step per edge.
        if ph.iter().flatten().any(|&p| p > edges.len()) {
            return None;
        }
        if !changed {
            return Some(ph);
        }
    }
}

/// Puts each arm's `yield` in the last piece: it stays in `i`, whose results it gives.
fn pin_terminators(k: &Kernel, i: Op, phases: &mut [Vec<usize>; 2]) {
    let last = phases.iter().flatten().copied().max().unwrap_or(0);
    for (arm, &r) in k.ops[i].regions.iter().enumerate() {
        let ops = k.region_ops(r);
        if ops.last().is_some_and(|&o| matches!(k.ops[o].kind, OpKind::Yield(_))) {
            phases[arm][ops.len() - 1] = last;
        }
    }
}

/// What the split of one branch carries: for each boundary `b` (between pieces `b` and
/// `b + 1`), the values live across it, each with its arm.
struct Carried {
    pieces: usize,
    across: Vec<Vec<(usize, Value)>>,
}

/// The values of `i`'s arms defined in one piece and used in a later one, per boundary;
/// `None` when one of them cannot be carried (a token, a wgmma result, a view).
fn carried_values(k: &Kernel, i: Op, phases: &[Vec<usize>; 2]) -> Option<Carried> {
    let pieces = phases.iter().flatten().max().map_or(1, |m| m + 1);
    let mut across = vec![Vec::new(); pieces - 1];
    for (arm, &r) in k.ops[i].regions.iter().enumerate() {
        let ops = k.region_ops(r);
        let mut def: HashMap<Value, usize> = HashMap::new();
        let mut views: HashMap<View, usize> = HashMap::new();
        let mut last: BTreeMap<Value, usize> = BTreeMap::new();
        for (n, &o) in ops.iter().enumerate() {
            let p = phases[arm][n];
            let mut late_view = false;
            for_each_use(k, o, &mut |v| {
                if def.get(&v).is_some_and(|&d| d < p) {
                    last.insert(v, p);
                }
            }, &mut |w| late_view |= views.get(&w).is_some_and(|&d| d < p));
            if late_view {
                return None;
            }
            def.extend(k.ops[o].results.iter().map(|&v| (v, p)));
            if let OpKind::ViewDef(w) = k.ops[o].kind {
                views.insert(w, p);
            }
        }
        for (v, to) in last {
            if !carriable(k, v) {
                return None;
            }
            for live in across.iter_mut().take(to).skip(def[&v]) {
                live.push((arm, v));
            }
        }
    }
    Some(Carried { pieces, across })
}

/// Whether a placeholder constant can stand for `v` in the arm that does not define it.
fn carriable(k: &Kernel, v: Value) -> bool {
    let wgmma = matches!(k.values[v].def, ValueDef::Result(d, _) if matches!(k.ops[d].kind, OpKind::Wgmma { .. }));
    k.values[v].ty != ScalarType::Token && !wgmma
}

/// Calls `val` on every value `op` and the ops nested in it read (view indices included) and
/// `view` on every view they name.
fn for_each_use(k: &Kernel, op: Op, val: &mut dyn FnMut(Value), view: &mut dyn FnMut(View)) {
    let mut stack = vec![op];
    while let Some(o) = stack.pop() {
        let kind = &k.ops[o].kind;
        kind.for_each_operand(|x| {
            if let Operand::Value(v) = x {
                val(v)
            }
        });
        let mut mem = |m: MemRef| {
            if let MemRef::View(w) = m {
                view(w)
            }
        };
        kind.for_each_memref(&mut mem);
        if let OpKind::ViewDef(w) = kind {
            let vd = &k.views[*w];
            mem(vd.base);
            for ix in &vd.indices {
                if let ViewIndex::At(Operand::Value(v)) = ix {
                    val(*v)
                }
            }
        }
        for &r in k.ops[o].regions.iter() {
            stack.extend(k.region_ops(r).iter().copied());
        }
    }
}

/// A placeholder of type `ty` (never read: only the arm that defines a value uses it).
fn placeholder(ty: ScalarType) -> Operand {
    Operand::Imm(match ty {
        ScalarType::I1 => Scalar::I1(false),
        ScalarType::F32 => Scalar::F32(0.0),
        _ => Scalar::I32(0),
    })
}

/// Splits `i` in `k` by `phases`: pieces before the last become new `if`s inserted before
/// `i` (same condition, `i`'s span), the last stays in `i`. Returns the number of pieces.
fn split_if(k: &mut Kernel, i: Op, phases: &[Vec<usize>; 2], c: &Carried) -> usize {
    let OpKind::If { cond } = k.ops[i].kind.clone() else {
        return 1;
    };
    let arms: Vec<Region> = k.ops[i].regions.to_vec();
    let ops: Vec<Vec<Op>> = arms.iter().map(|&r| k.take_region_ops(r)).collect();
    let piece = |arm: usize, p: usize| -> Vec<Op> {
        (ops[arm].iter().zip(&phases[arm]))
            .filter(|&(_, &q)| q == p)
            .map(|(&o, _)| o)
            .collect()
    };
    let span = k.span(i);
    let mut current: HashMap<Value, Value> = HashMap::new();
    for (b, live) in c.across.iter().enumerate() {
        let tys: Vec<ScalarType> = live.iter().map(|&(_, v)| k.values[v].ty).collect();
        let regions = vec![k.new_region(), k.new_region()];
        let new = k.new_op(OpKind::If { cond }, &tys, regions.clone());
        k.op_spans.set(new, span);
        for (arm, &r) in regions.iter().enumerate() {
            let moved = piece(arm, b);
            rename(k, &moved, &current);
            for o in moved {
                k.append(r, o);
            }
            if !live.is_empty() {
                let vals = live
                    .iter()
                    .map(|&(a, v)| match a == arm {
                        true => Operand::Value(current.get(&v).copied().unwrap_or(v)),
                        false => placeholder(k.values[v].ty),
                    })
                    .collect();
                let y = k.new_op(OpKind::Yield(vals), &[], vec![]);
                k.op_spans.set(y, span);
                k.append(r, y);
            }
        }
        let results = k.ops[new].results.to_vec();
        current.extend(live.iter().zip(results).map(|(&(_, v), res)| (v, res)));
        k.insert_before(i, new);
    }
    for (arm, &r) in arms.iter().enumerate() {
        let last = piece(arm, c.pieces - 1);
        rename(k, &last, &current);
        k.set_region_ops(r, last);
    }
    c.pieces
}

/// Replaces, in `ops` and the ops nested in them (view indices included), every use of a
/// value that `map` renames.
fn rename(k: &mut Kernel, ops: &[Op], map: &HashMap<Value, Value>) {
    if map.is_empty() {
        return;
    }
    let mut f = |x: &mut Operand| {
        if let Operand::Value(v) = x
            && let Some(&w) = map.get(v)
        {
            *v = w;
        }
    };
    let mut stack = ops.to_vec();
    let mut seen = HashSet::new();
    while let Some(o) = stack.pop() {
        if !seen.insert(o) {
            continue;
        }
        k.ops[o].kind.for_each_operand_mut(&mut f);
        if let OpKind::ViewDef(w) = k.ops[o].kind {
            for ix in &mut k.views[w].indices {
                if let ViewIndex::At(x) = ix {
                    f(x);
                }
            }
        }
        for &r in k.ops[o].regions.iter() {
            stack.extend(k.region_ops(r).iter().copied());
        }
    }
}
