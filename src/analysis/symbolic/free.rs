//! The self race of a per-thread write whose index the enumerator cannot evaluate (a
//! parameter, a loaded value, `bid`, the variable of a loop without a domain): does one
//! instance of the write touch one unit from two threads, for some or for every value of
//! those unknowns? The formulation and its proofs are in docs/symbolic.md, "Self races
//! through unknown indices".
//!
//! Each unknown *leaf* of an index becomes a free integer variable over its type's range
//! (`form::FreeLeaves`): one variable for both threads when it is uniform within an
//! instance (`FreeLeaves::is_uniform`), one per thread otherwise. Every root index is bounded
//! by its dimension (an index out of range is an execution error, which `check` reports).
//! The question is the self race of `pairs` over these variables:
//!
//! - infeasible: no two threads of one instance write one unit, whatever the values
//!   ([`Verdict::Never`], exact: the variables range over every value the leaves can take);
//! - feasible, and every leaf uniform, no guard unknown or on a leaf, and every index on a
//!   leaf the same form on both sides made of shared leaf variables only: the race holds for
//!   every value of the leaves ([`Verdict::Always`], E0301);
//! - feasible otherwise: [`Verdict::May`] (W0317, a conservative answer);
//! - anything without a form, a collective access, the search budget: [`Verdict::Undecided`]
//!   (W0317 "not decided" where the enumerated touches may overlap).
//!
//! Invariants: the leaves' variables are created by the sides' builders only; the shared
//! ones are the same variable on both sides. Complexity: one problem of O(|DAG| + bits)
//! variables per side, two solves (`t_a < t_b`, `t_a > t_b`) within `pairs::BUDGET` search nodes.

use super::form::{Affine, Builder, FreeLeaves};
use super::pairs;
use super::solve::Problem;
use crate::analysis::footprint::Footprints;
use crate::diag::{DiagKind, Diagnostic};
use crate::emit::text::op_label;
use crate::ir::*;

/// The answer to the self-race question through unknown indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No two threads of one instance write one unit, for any value of the unknowns.
    Never,
    /// Two threads of one instance write one unit for every value of these (uniform) leaves
    /// that keeps the indices in range.
    Always(Vec<Value>),
    /// Two threads may write one unit, for some values of these leaves.
    May(Vec<Value>),
    /// Not decided: an operation without a form, a collective access, the search budget.
    Undecided,
}

/// One side: the root index forms, the unit, whether a guard depends on a leaf, and the
/// leaves so far (both sides' after the second).
struct FreeSide {
    idx: Vec<Affine>,
    unit: Affine,
    units: i64,
    guard_on_leaf: bool,
    free: FreeLeaves,
}

/// The self-race verdict of access `ai` (a plain write) with its unknown leaves free.
pub fn self_race(fp: &Footprints, ai: usize) -> Verdict {
    let v = self_race_untraced(fp, ai);
    if pairs::tracing() {
        eprintln!(
            "symbolic free self race {}: {v:?}, {} nodes left",
            op_label(fp.k, fp.accesses[ai].id.op),
            pairs::budget_left()
        );
    }
    v
}

fn self_race_untraced(fp: &Footprints, ai: usize) -> Verdict {
    if !matches!(fp.accesses[ai].access.footprint, Footprint::PerThread(_)) {
        return Verdict::Undecided;
    }
    // The full budget: the question is asked only of writes with unknown touches, which
    // the enumerator cannot answer at all.
    pairs::set_budget_left(pairs::BUDGET);
    let threads = fp.k.threads().max(1) as i64;
    let mut p = Problem::default();
    let (ta, tb) = (p.var(0, threads - 1), p.var(0, threads - 1));
    let Some(ks) = pairs::keys(fp, &mut Builder::new(fp, &mut p, ta), ai, &[]) else {
        return Verdict::Never;
    };
    let sa = match side(fp, &mut p, (ai, ta), &ks, FreeLeaves::default()) {
        Ok(s) => s,
        Err(why) => {
            if pairs::tracing() {
                eprintln!("symbolic free self race: no form ({why})");
            }
            return Verdict::Undecided;
        }
    };
    let Ok(sb) = side(fp, &mut p, (ai, tb), &ks, sa.free.clone()) else {
        return Verdict::Undecided;
    };
    // Both units equal (a per-thread element covers `units` units from its first).
    let Some(d) = sa.unit.scale(-1).and_then(|n| sb.unit.plus(&n)) else {
        return Verdict::Undecided;
    };
    let n = sa.units.max(sb.units);
    d.constrain(&mut p, -(n - 1), n - 1);
    match pairs::any_sat(&pairs::distinct(&p, ta, tb, None)) {
        None => Verdict::Undecided,
        Some(false) => Verdict::Never,
        Some(true) => classify(&sa, &sb),
    }
}

/// A feasible question's verdict: [`Verdict::Always`] under the sufficient condition of the
/// module doc, [`Verdict::May`] otherwise.
fn classify(sa: &FreeSide, sb: &FreeSide) -> Verdict {
    let free = &sb.free;
    let mut names: Vec<Value> = Vec::new();
    for &(v, _, _) in &free.leaves {
        if !names.contains(&v) {
            names.push(v);
        }
    }
    let tainted = |a: &Affine| a.terms.iter().any(|(x, _)| free.tainted.contains(x));
    let shared_only =
        |a: &Affine| a.terms.iter().all(|(x, _)| free.shared.iter().any(|&(_, y)| y == *x));
    let indices_cancel = sa.idx.len() == sb.idx.len()
        && sa.idx.iter().zip(&sb.idx).all(|(x, y)| {
            !(tainted(x) || tainted(y)) || (x == y && shared_only(x))
        });
    let always = free.leaves.iter().all(|l| l.2)
        && !free.unknown_guard
        && !sa.guard_on_leaf
        && !sb.guard_on_leaf
        && indices_cancel;
    if always { Verdict::Always(names) } else { Verdict::May(names) }
}

/// Builds one side on `p` with the loop keys `ks` and the leaves `free` so far.
fn side(fp: &Footprints, p: &mut Problem, (ai, tid): (usize, usize), ks: &pairs::Keys, free: FreeLeaves) -> Result<FreeSide, &'static str> {
    let k = fp.k;
    let a = &fp.accesses[ai];
    let Footprint::PerThread(ix) = &a.access.footprint else {
        return Err("collective");
    };
    let mut b = Builder::new(fp, p, tid);
    b.free = Some(free);
    for (key, iv) in ks {
        if let (Some(key), Some(iv)) = (key, iv) {
            b.ivs.push((*iv, key.clone()));
        }
    }
    let before = b.p.cons.len();
    pairs::guards(fp, &mut b, a.id.op).map_err(|_| "guard")?;
    let guard_cons = b.p.cons.len();
    let idx = ix.iter().map(|o| b.operand(o)).collect();
    let (root, Some(idx)) = pairs::root_index(&mut b, a.access.mem, idx).map_err(|_| "index")? else {
        return Err("unknown index");
    };
    let free = b.free.take().unwrap_or_default();
    let guard_on_leaf = b.p.cons[before..guard_cons]
        .iter()
        .any(|c| c.terms.iter().any(|(x, _)| free.tainted.contains(x)));
    let bd = &k.buffers[root];
    if idx.len() != bd.shape.len() {
        return Err("rank");
    }
    let space = if bd.offset.is_some() { 0 } else { root.index() as u64 + 1 };
    let u = fp.unit(space) as i64;
    let e = bd.elem.bytes() as i64;
    let mut lin = Affine::konst(0);
    for (f, &d) in idx.iter().zip(&bd.shape) {
        // An index out of range is an execution error (`check` reports it): in range here.
        f.constrain(b.p, 0, d as i64 - 1);
        lin = lin.scale(d as i64).and_then(|l| l.plus(f)).ok_or("overflow")?;
    }
    let unit = lin.scale(e / u).ok_or("overflow")?;
    Ok(FreeSide {
        idx,
        unit,
        units: (e / u).max(1),
        guard_on_leaf,
        free,
    })
}

/// The finding for a plain write `ai` whose enumerated instances touch unknown units from
/// two threads: E0301 when the race holds for every value of the unknowns, W0317 when it
/// may, or when the question is not decided; nothing when no race is possible.
pub fn finding(fp: &Footprints, ai: usize) -> Option<Diagnostic> {
    let k = fp.k;
    let op = fp.accesses[ai].id.op;
    let buf = &k.buffers[k.root_buffer(fp.accesses[ai].access.mem)].name;
    let names = |vs: &[Value]| {
        vs.iter()
            .map(|&v| format!("`%{}`", k.value_name(v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Parameters with declared ranges and block ids: no race in any case of their values.
    if super::cases::self_race(fp, ai) == Some(false) {
        return None;
    }
    let d = match self_race(fp, ai) {
        Verdict::Never => return None,
        Verdict::Always(vs) => Diagnostic::error(
            DiagKind::Finding,
            "E0301",
            format!(
                "{} writes one element of `@{buf}` from several threads at once, for every value of {}",
                op_label(k, op),
                names(&vs)
            ),
        )
        .with_label(
            k.span(op),
            "every executing thread writes here; no barrier can order one op's threads",
        ),
        Verdict::May(vs) => Diagnostic::warning(
            DiagKind::Finding,
            "W0317",
            format!(
                "{} may write one element of `@{buf}` from several threads for some value of {}",
                op_label(k, op),
                names(&vs)
            ),
        )
        .with_label(k.span(op), "index not known statically")
        .with_note("if two threads write one element, no barrier can order one op's threads; `smemsync check` runs the kernel on given values"),
        Verdict::Undecided => Diagnostic::warning(
            DiagKind::Finding,
            "W0317",
            format!(
                "{} may write one element of `@{buf}` from several threads: not decided",
                op_label(k, op)
            ),
        )
        .with_label(k.span(op), "index not known statically")
        .with_note("its index has an operation smemsync does not reason on here (or the search ran out); if two threads write one element, no barrier can order one op's threads; `smemsync check` runs the kernel on given values"),
    };
    Some(d)
}
