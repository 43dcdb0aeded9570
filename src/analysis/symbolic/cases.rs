//! Questions through uniform unknowns decided case by case: when an access's index (or a
//! guard or loop bound around it) reads parameters with a declared range (`%m: i32 in
//! [0, 3]`) or block ids (`bid.x` over the grid), and nothing else the enumerator cannot
//! evaluate, the pair-conflict and self-race questions are asked once per combination of
//! those values, each leaf read as its constant (`form::with_fixed`), and the answers are
//! joined. The formulation and its proof are in docs/symbolic.md, "Uniform unknowns, case by
//! case".
//!
//! Exactness: a leaf is uniform and defined outside every loop's influence (a parameter, a
//! block id): one run of the block holds one value of it everywhere, in both accesses of a
//! pair and in every thread, and that value lies in its domain (a declared range is the
//! callers' promise, `Kernel::param_ranges`; `bid.d < grid.d`, below 2^31 - 1 when the grid is unknown: too many cases). So the run's conflicts are
//! those of one case, and the union of the cases' answers (each the engine's own answer on
//! the kernel with those constants, itself exact or conservative) over-approximates them.
//! A case the engine declines makes the whole question decline (`None`: the caller keeps its
//! conservative answer). Self race: `Some(false)` only when no case races.
//!
//! Invariants: [`MAX_CASES`] bounds the combinations; every leaf fixed ranges over its whole
//! domain. Complexity: at most `MAX_CASES` engine questions per question asked, each within
//! the engine's budget; asked only of accesses with an unknown index (`pairs::unknown_index`).

use super::form::with_fixed;
use super::pairs;
use crate::analysis::conflicts::PairConflict;
use crate::analysis::footprint::Footprints;
use crate::ir::*;

/// Uniform leaves with their domains: `(value, lo, hi)`, inclusive.
pub type Leaves = Vec<(Value, i64, i64)>;

/// Most combinations of leaf values one question is split into.
pub const MAX_CASES: i64 = 64;

/// The uniform leaves access `ai` reads in its indices, view indices, enclosing guards and
/// loop bounds, with their domains `(value, lo, hi)`; `None` when there is none, one has no
/// finite domain (a parameter without a declared range), or the cases would exceed
/// [`MAX_CASES`]. Values the walk does not enter (loads, iteration values) are left as they
/// are: the engine reads them as unknown, which only makes a case conservative.
pub fn leaves(fp: &Footprints, ai: usize) -> Option<Leaves> {
    if let Some(l) = fp.sym_sides.leaves.borrow().get(&ai) {
        return l.clone();
    }
    let l = leaves_uncached(fp, ai);
    fp.sym_sides.leaves.borrow_mut().insert(ai, l.clone());
    l
}

fn leaves_uncached(fp: &Footprints, ai: usize) -> Option<Leaves> {
    let k = fp.k;
    let a = &fp.accesses[ai];
    let mut roots: Vec<Operand> = Vec::new();
    if let Footprint::PerThread(ix) = &a.access.footprint {
        roots.extend(ix.iter().copied());
    }
    let mut m = a.access.mem;
    while let MemRef::View(v) = m {
        for ix in &k.views[v].indices {
            if let ViewIndex::At(o) = ix {
                roots.push(*o);
            }
        }
        m = k.views[v].base;
    }
    for anc in fp.ancestors(a.id.op) {
        match &k.ops[anc].kind {
            OpKind::If { cond } => roots.push(*cond),
            OpKind::For { lo, hi, step, .. } => roots.extend([*lo, *hi, *step]),
            _ => {}
        }
    }
    let mut seen: Vec<Value> = Vec::new();
    let mut out = Vec::new();
    let mut stack: Vec<Value> = roots.iter().filter_map(|o| o.value()).collect();
    while let Some(v) = stack.pop() {
        if seen.contains(&v) {
            continue;
        }
        seen.push(v);
        match &k.values[v].def {
            ValueDef::Param(_) if k.values[v].ty == ScalarType::I32 => {
                let (lo, hi) = (*k.param_ranges.get(v))?;
                out.push((v, lo as i64, hi as i64));
            }
            ValueDef::Param(_) => return None,
            ValueDef::RegionArg(r, 0) => {
                if let Some(op) = k.parents().region_op[*r]
                    && let OpKind::For { lo, hi, step, .. } = &k.ops[op].kind
                {
                    stack.extend([lo, hi, step].iter().filter_map(|o| o.value()));
                }
            }
            ValueDef::RegionArg(..) => {}
            ValueDef::Result(op, _) => match &k.ops[*op].kind {
                OpKind::Special(Special::Bid(d)) => {
                    out.push((v, 0, k.bid_max(*d)));
                }
                OpKind::Binary(..) | OpKind::Unary(..) | OpKind::Cmp(..) | OpKind::Select(..) => {
                    k.ops[*op].kind.for_each_operand(|o| stack.extend(o.value()));
                }
                _ => {}
            },
        }
    }
    let mut n: i64 = 1;
    for &(_, lo, hi) in &out {
        n = n.checked_mul(hi - lo + 1).filter(|&n| n <= MAX_CASES)?;
    }
    (!out.is_empty()).then_some(out)
}

/// Every combination of the leaves' values (at most [`MAX_CASES`], see [`leaves`]).
fn combinations(leaves: &[(Value, i64, i64)]) -> Vec<Vec<(Value, i64)>> {
    let mut out = vec![Vec::new()];
    for &(v, lo, hi) in leaves {
        out = out
            .into_iter()
            .flat_map(|c: Vec<(Value, i64)>| {
                (lo..=hi).map(move |x| {
                    let mut c = c.clone();
                    c.push((v, x));
                    c
                })
            })
            .collect();
    }
    out
}

/// The uniform leaves of both accesses (one list, each value once), as [`leaves`].
fn joint_leaves(fp: &Footprints, ai: usize, bi: usize) -> Option<Leaves> {
    let mut ls = leaves(fp, ai).unwrap_or_default();
    if bi != ai {
        for l in leaves(fp, bi).unwrap_or_default() {
            if !ls.iter().any(|x| x.0 == l.0) {
                ls.push(l);
            }
        }
    }
    let n = ls.iter().try_fold(1i64, |n, &(_, lo, hi)| {
        n.checked_mul(hi - lo + 1).filter(|&n| n <= MAX_CASES)
    })?;
    (n > 0 && !ls.is_empty()).then_some(ls)
}

/// The pair question of `ai` and `bi` (as `pairs::pair_conflict`) joined over every case of
/// their uniform leaves: the union of the masks, `intra_warp` only if every case's is;
/// where there is no case to split on or a case declines, the question with the block
/// leaves shared free variables (`symbolic::params`). `None`: no access has an unknown
/// index, or both ways decline (the caller keeps the whole buffer; W0319).
pub fn pair_conflict(fp: &Footprints, ai: usize, bi: usize, plen: usize, var: Option<usize>) -> Option<PairConflict> {
    by_cases(fp, ai, bi, plen, var).or_else(|| super::params::pair_conflict(fp, ai, bi, plen, var))
}

/// [`pairs::intersects_at`] (the in-flight question of `analysis::hazards`) through uniform
/// leaves: joined over every case (some case meets), else with the leaves shared free
/// variables (`symbolic::params`). `None`: no access has an unknown index, or both decline.
pub fn intersects_at(fp: &Footprints, ai: usize, bi: usize, plen: usize, fix: Option<(usize, i64)>) -> Option<bool> {
    if !(pairs::unknown_index(fp, ai) || pairs::unknown_index(fp, bi)) {
        return None;
    }
    let by_cases = || -> Option<bool> {
        let ls = joint_leaves(fp, ai, bi)?;
        let mut any = false;
        for case in combinations(&ls) {
            any |= with_fixed(case, || pairs::intersects_at(fp, ai, bi, plen, fix))?;
        }
        Some(any)
    };
    by_cases().or_else(|| super::params::intersects_at(fp, ai, bi, plen, fix))
}

/// [`pair_conflict`] case by case only.
fn by_cases(fp: &Footprints, ai: usize, bi: usize, plen: usize, var: Option<usize>) -> Option<PairConflict> {
    let ls = joint_leaves(fp, ai, bi)?;
    if !(pairs::unknown_index(fp, ai) || pairs::unknown_index(fp, bi)) {
        return None;
    }
    let mut out = PairConflict {
        intra_warp: true,
        ..Default::default()
    };
    for case in combinations(&ls) {
        let r = with_fixed(case, || pairs::pair_conflict(fp, ai, bi, plen, var))?;
        out.conflict |= r.conflict;
        out.intersect |= r.intersect;
        if r.conflict != 0 && !r.intra_warp {
            out.intra_warp = false;
        }
    }
    if pairs::tracing() {
        eprintln!("symbolic cases pair {ai} {bi} ({plen}, {var:?}) over {} leaves: {out:?}", ls.len());
    }
    Some(out)
}

/// The self race of write `ai` (as `pairs::self_race`) over every case of its uniform
/// leaves: `Some(false)` when no case races, `Some(true)` when some case does, `None` when
/// there is no case to split on or some case is not decided.
pub fn self_race(fp: &Footprints, ai: usize) -> Option<bool> {
    let ls = leaves(fp, ai)?;
    let cases = combinations(&ls);
    // The enumeration of a specialized kernel, where the engine declines a case: bounded
    // work (a copy and a footprint analysis of the kernel per case).
    let small = fp.k.ops.len().saturating_mul(cases.len()) <= MAX_SPECIALIZED_OPS;
    let mut any = false;
    for case in cases {
        let r = match with_fixed(case.clone(), || pairs::self_race(fp, ai)) {
            Some(r) => r,
            None if small => specialized_self_race(fp, ai, &case)?,
            None => return None,
        };
        any |= r;
    }
    Some(any)
}

/// Most ops times cases [`self_race`] enumerates on specialized kernels.
pub const MAX_SPECIALIZED_OPS: usize = 20_000;

/// The self race of write `ai` on a copy of the kernel with each leaf of `case` replaced by
/// its constant at every use: the engine, then the enumerator, as hazard finding asks it
/// (`Some(true)`: an exact overlap; `None`: the touches still may overlap, not decided). The
/// copy runs the block as the kernel does when the leaves hold those values.
fn specialized_self_race(fp: &Footprints, ai: usize, case: &[(Value, i64)]) -> Option<bool> {
    let mut k = fp.k.clone();
    let sub = &mut |o: &mut Operand| {
        if let Operand::Value(v) = *o
            && let Some(&(_, c)) = case.iter().find(|(w, _)| *w == v)
        {
            *o = Operand::Imm(Scalar::I32(i32::try_from(c).unwrap_or(0)));
        }
    };
    let ops: Vec<Op> = k.ops.keys().collect();
    for op in ops {
        k.ops[op].kind.for_each_operand_mut(sub);
    }
    let views: Vec<View> = k.views.keys().collect();
    for v in views {
        for ix in &mut k.views[v].indices {
            if let ViewIndex::At(o) = ix {
                sub(o);
            }
        }
    }
    let mut sp = Footprints::new(&k, fp.warp);
    sp.symbolic = fp.symbolic;
    let bi = sp.index(fp.accesses[ai].id)?;
    if sp.symbolic && pairs::self_race(&sp, bi) == Some(false) {
        return Some(false);
    }
    let inst = sp.instances(bi);
    if inst.iter().any(|(_, t)| t.has_self_overlap()) {
        return Some(true);
    }
    (!inst.iter().any(|(_, t)| t.may_self_overlap(sp.warp))).then_some(false)
}
