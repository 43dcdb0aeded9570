//! Loops around mbarrier ops whose bounds the trace cannot evaluate but which every role
//! runs alike: the persistent kernel's tile loop, `for %tile = bid.x to %tiles step G`, in
//! each role arm of a warp-specialized kernel (Triton's persistent warp-specialized matmul).
//!
//! The trace of `analysis::mbar_protocol` needs each loop's trip count, not its bounds, as
//! long as nothing it evaluates reads the loop's counter. Loops whose trip counts are the
//! same function of block-uniform leaves (scalar parameters, constants, `bid`, `nctaid`,
//! `ntid`) run the same number of trips in every thread of a block, so one unknown — the trip
//! count — stands for them all. This module gives each such loop the representative of its
//! class: the counter of the first loop (in walk order) of the class. The trace then searches
//! the representative's trip count like a parameter without a declared range, or enumerates
//! it where the leaves' ranges bound it (`mbar_protocol`'s module doc; docs/async.md, "Tile
//! loops of persistent kernels", "Tile-loop trip counts").
//!
//! **Classes.** A `for lo to hi step s` runs `max(0, ⌈(hi − lo)/s⌉)` trips (the trace and the
//! interpreter count in `i64`). Where `lo` and `hi` are *affine* in the leaves (`add`, `sub`,
//! `neg`, `mul` by a constant) and `s` is a positive constant, the key is the normal form of
//! `(hi − lo, s)`: coefficients by leaf, divided with `s` by their common gcd `g`
//! (`⌈g·a / g·s⌉ = ⌈a / s⌉`). Equal keys are equal trip counts for every value of the leaves
//! *if the bounds' `i32` arithmetic does not wrap* (hostile M7: `0 to %tiles − bid.x` against
//! `bid.x to %tiles`, or `add bid.x, 0`). Any other loop keys by its bound expressions' text,
//! as before: textually equal bounds are equal values in a block, wrap or not.
//!
//! **Exact classes and bounds.** An interval of every sub-expression of a bound is computed
//! from the leaves' ranges (a declared parameter range, else all of `i32`; `bid` in
//! `[0, grid − 1]`, or `[0, 2^31 − 2]` without a declared grid; `nctaid` and `ntid` their
//! declared values). A class is *exact* when its loops share one bound text or no bound of
//! them may wrap; only an exact class is trusted where a verdict claims every trip count
//! (`mbar_flatten`, [`Classes::most`]). Where every loop of an exact class has a bounded
//! `hi − lo`, the class's trip counts lie in `0 ..= most`, and enumerating them is exact.
//!
//! Invariant: a loop gets a representative only when its three bounds are expressions of
//! block-uniform leaves through integer arithmetic, comparisons and selects (no thread id,
//! no loaded value, no iteration value), so equal keys are equal trip counts in a block
//! (modulo the wrap above, which inexact classes leave to "taken as written").
//! Complexity: O(loops × size of their bound expressions).

use std::collections::{HashMap, HashSet};

use crate::analysis::symbolic::form::Affine;
use crate::ir::arith::gcd;
use crate::ir::*;

/// The loops' trip-count classes (module doc).
#[derive(Default)]
pub(super) struct Classes {
    /// The representative counter of each loop with block-uniform bounds.
    pub rep: HashMap<Op, Value>,
    /// Representatives whose loops run equal trip counts for every value of the leaves
    /// (one bound text, or affine bounds that never wrap).
    pub exact: HashSet<Value>,
    /// The most trips of an exact class whose leaves' ranges bound every `hi − lo`.
    pub most: HashMap<Value, i64>,
}

/// The trip-count classes of `loops` (module doc).
pub(super) fn classes(k: &Kernel, loops: &HashSet<Op>) -> Classes {
    let mut ordered: Vec<Op> = Vec::new();
    k.walk(|o| {
        if loops.contains(&o) {
            ordered.push(o);
        }
    });
    let mut by_key: HashMap<String, Value> = HashMap::new();
    let mut leaves = Leaves::new();
    // Per representative: the bound texts seen, whether a bound may wrap, the most trips.
    let mut seen: HashMap<Value, (HashSet<String>, bool, Option<i64>)> = HashMap::new();
    let mut out = Classes::default();
    for o in ordered {
        let OpKind::For { lo, hi, step, .. } = &k.ops[o].kind else { continue };
        let text = [lo, hi, step].iter().map(|b| expr(k, b, 0)).collect::<Option<Vec<_>>>();
        let (Some(text), Some(&iv)) = (text, k.region_args(k.ops[o].regions[0]).first()) else {
            continue;
        };
        let text = text.join(" ; ");
        let key = trip_key(k, lo, hi, step, &mut leaves).unwrap_or_else(|| format!("text {text}"));
        let rep = *by_key.entry(key).or_insert(iv);
        out.rep.insert(o, rep);
        let (lo_s, hi_s) = (span(k, lo, 0), span(k, hi, 0));
        let most = match (lo_s, hi_s, k.const_i32(*step)) {
            (Some(l), Some(h), Some(s)) if s > 0 => Some(((h.1 - l.0).max(0) + s - 1) / s),
            _ => None,
        };
        let e = seen.entry(rep).or_insert_with(|| (HashSet::new(), false, Some(0)));
        e.0.insert(text);
        e.1 |= lo_s.is_none() || hi_s.is_none();
        e.2 = e.2.zip(most).map(|(a, b)| a.max(b));
    }
    for (rep, (texts, wraps, most)) in seen {
        if texts.len() == 1 || !wraps {
            out.exact.insert(rep);
            if let (false, Some(m)) = (wraps, most) {
                out.most.insert(rep, m);
            }
        }
    }
    out
}

/// The key of a loop's trip count `⌈(hi − lo) / s⌉` with affine bounds and a positive
/// constant step, normalised by the gcd of the step and the coefficients (module doc).
fn trip_key(k: &Kernel, lo: &Operand, hi: &Operand, step: &Operand, leaves: &mut Leaves) -> Option<String> {
    let s = k.const_i32(*step).filter(|&s| s > 0)?;
    let d = lin(k, hi, 0, leaves)?.plus(&lin(k, lo, 0, leaves)?.scale(-1)?).and_then(bounded)?;
    let g = d.terms.iter().map(|t| t.1).chain([d.c]).fold(s, gcd);
    let mut terms = d.terms;
    terms.sort_unstable();
    let terms: Vec<String> = terms.iter().map(|(l, c)| format!("{}·leaf{l}", c / g)).collect();
    Some(format!("trip {} + {} over {}", terms.join(" + "), d.c / g, s / g))
}

/// The leaves of the affine forms (a parameter `p<name>`, a special's name), numbered in the
/// order met: the variables of their [`Affine`] forms, the same number for the same leaf in
/// every loop of one [`classes`] call.
type Leaves = HashMap<String, usize>;

/// Coefficients and constants beyond this decline (no `i64` overflow in the forms).
const LIN_MAX: i64 = 1 << 40;

/// `a` where its coefficients and constant stay within [`LIN_MAX`].
fn bounded(a: Affine) -> Option<Affine> {
    let within = |x: i64| x.unsigned_abs() <= LIN_MAX as u64;
    (within(a.c) && a.terms.iter().all(|t| within(t.1))).then_some(a)
}

/// The affine form of a block-uniform operand over its leaves (module doc), or `None`.
/// (`symbolic::form` builds its forms over thread and loop variables for the solver; these
/// are over block-uniform leaves only, so its builder does not apply.)
fn lin(k: &Kernel, o: &Operand, depth: usize, leaves: &mut Leaves) -> Option<Affine> {
    if depth > 64 {
        return None;
    }
    if let Some(c) = k.const_i32(*o) {
        return Some(Affine::konst(c));
    }
    let Operand::Value(v) = o else { return None };
    let mut leaf = |name: String| {
        let n = leaves.len();
        Some(Affine::var(*leaves.entry(name).or_insert(n)))
    };
    let d = match k.values[*v].def {
        ValueDef::Param(_) if k.values[*v].ty == ScalarType::I32 => return leaf(format!("p{}", k.value_names.get(*v))),
        ValueDef::Result(d, _) => d,
        _ => return None,
    };
    if let OpKind::Special(s @ (Special::Bid(_) | Special::GridDim(_) | Special::BlockDim(_))) = &k.ops[d].kind {
        return leaf(s.name().to_string());
    }
    let mut e = |x: &Operand| lin(k, x, depth + 1, leaves);
    let f = match &k.ops[d].kind {
        OpKind::Binary(BinOp::Add, x, y) => e(x)?.plus(&e(y)?),
        OpKind::Binary(BinOp::Sub, x, y) => e(x)?.plus(&e(y)?.scale(-1)?),
        OpKind::Binary(BinOp::Mul, x, y) => match (k.const_i32(*x), k.const_i32(*y)) {
            (Some(c), _) => e(y)?.scale(c),
            (_, Some(c)) => e(x)?.scale(c),
            _ => None,
        },
        OpKind::Unary(UnOp::Neg, x) => e(x)?.scale(-1),
        _ => None,
    };
    f.and_then(bounded)
}

/// An interval of a block-uniform operand's value over every value of the leaves (module
/// doc), `None` where some sub-expression may leave `i32` (wrap around) or is not affine.
fn span(k: &Kernel, o: &Operand, depth: usize) -> Option<(i64, i64)> {
    const I32: (i64, i64) = (i32::MIN as i64, i32::MAX as i64);
    if depth > 64 {
        return None;
    }
    if let Some(c) = k.const_i32(*o) {
        return Some((c, c));
    }
    let Operand::Value(v) = o else { return None };
    let d = match k.values[*v].def {
        ValueDef::Param(_) if k.values[*v].ty == ScalarType::I32 => {
            return Some(k.param_ranges.get(*v).map_or(I32, |(l, h)| (l as i64, h as i64)));
        }
        ValueDef::Result(d, _) => d,
        _ => return None,
    };
    let e = |x: &Operand| span(k, x, depth + 1);
    let r = match &k.ops[d].kind {
        OpKind::Special(Special::Bid(d)) => (0, k.bid_max(*d)),
        OpKind::Special(Special::GridDim(d)) => k.grid_dim(*d).map_or((1, I32.1), |g| (g, g)),
        OpKind::Special(s @ Special::BlockDim(_)) => {
            let b = crate::analysis::footprint::special_value(k, *s, 0, 32)?;
            (b, b)
        }
        OpKind::Binary(BinOp::Add, x, y) => add(e(x)?, e(y)?, 1),
        OpKind::Binary(BinOp::Sub, x, y) => add(e(x)?, e(y)?, -1),
        OpKind::Binary(BinOp::Mul, x, y) => {
            let (a, b) = (e(x)?, e(y)?);
            let p = [a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1];
            (*p.iter().min()?, *p.iter().max()?)
        }
        OpKind::Unary(UnOp::Neg, x) => add((0, 0), e(x)?, -1),
        _ => return None,
    };
    (r.0 >= I32.0 && r.1 <= I32.1).then_some(r)
}

/// `a + f·b` of intervals, `f` = ±1.
fn add(a: (i64, i64), b: (i64, i64), f: i64) -> (i64, i64) {
    match f {
        1 => (a.0 + b.0, a.1 + b.1),
        _ => (a.0 - b.1, a.1 - b.0),
    }
}

/// The trip counts to search for representative `rep` without a bound (`classes`): 0 to
/// `base`, and further where an iteration value of one of its loops is compared with a
/// constant `c` (a protocol that changes at a carried tile count, hostile M8): to `|c| + 2`,
/// at most `cap`. A counterexample search only; a clean one stays "taken as written".
pub(super) fn search_to(k: &Kernel, rep: Value, reps: &HashMap<Op, Value>, base: i64, cap: i64) -> i64 {
    let mut to = base;
    for (&o, _) in reps.iter().filter(|(_, r)| **r == rep) {
        let carried: HashSet<Value> = k.region_args(k.ops[o].regions[0]).iter().skip(1).copied().collect();
        k.walk_region(k.ops[o].regions[0], &mut |c| {
            let OpKind::Cmp(_, x, y) = &k.ops[c].kind else { return };
            for (a, b) in [(x, y), (y, x)] {
                if let Some(t) = k.const_i32(*b).filter(|_| reads_any(k, a, &carried, 0)) {
                    to = to.max((t.abs() + 2).min(cap));
                }
            }
        });
    }
    to
}

/// Whether operand `o` reads a value of `vals` through pure integer ops.
fn reads_any(k: &Kernel, o: &Operand, vals: &HashSet<Value>, depth: usize) -> bool {
    let Operand::Value(v) = o else { return false };
    if vals.contains(v) {
        return true;
    }
    let ValueDef::Result(d, _) = k.values[*v].def else { return false };
    let e = |x: &Operand| depth < 16 && reads_any(k, x, vals, depth + 1);
    match &k.ops[d].kind {
        OpKind::Binary(_, x, y) | OpKind::Cmp(_, x, y) => e(x) || e(y),
        OpKind::Unary(_, x) => e(x),
        OpKind::Select(c, x, y) => e(c) || e(x) || e(y),
        _ => false,
    }
}

/// The expression of a block-uniform operand as text (leaves by identity), or `None`.
fn expr(k: &Kernel, o: &Operand, depth: usize) -> Option<String> {
    if depth > 64 {
        return None;
    }
    let v = match o {
        Operand::Imm(Scalar::I32(x)) => return Some(x.to_string()),
        Operand::Imm(Scalar::I1(b)) => return Some((*b as i32).to_string()),
        Operand::Imm(_) => return None,
        Operand::Value(v) => *v,
    };
    let d = match k.values[v].def {
        ValueDef::Param(_) => return Some(format!("p{}", k.value_names.get(v))),
        ValueDef::Result(d, _) => d,
        _ => return None,
    };
    let e = |x: &Operand| expr(k, x, depth + 1);
    Some(match &k.ops[d].kind {
        OpKind::Const(s) => return e(&Operand::Imm(*s)),
        OpKind::Special(s @ (Special::Bid(_) | Special::GridDim(_) | Special::BlockDim(_))) => {
            s.name().to_string()
        }
        OpKind::Binary(b, x, y) => format!("({b:?} {} {})", e(x)?, e(y)?),
        OpKind::Unary(u, x) => format!("({u:?} {})", e(x)?),
        OpKind::Cmp(p, x, y) => format!("({p:?} {} {})", e(x)?, e(y)?),
        OpKind::Select(c, x, y) => format!("(sel {} {} {})", e(c)?, e(x)?, e(y)?),
        _ => return None,
    })
}

/// Whether a block-uniform operand reads `bid` (through the ops [`expr`] follows).
pub(super) fn reads_bid(k: &Kernel, o: &Operand) -> bool {
    expr(k, o, 0).is_some_and(|e| e.contains("bid."))
}

/// Whether `v` is a loop's representative counter rather than a kernel parameter.
pub(super) fn is_trip(k: &Kernel, v: Value) -> bool {
    !matches!(k.values[v].def, ValueDef::Param(_))
}

/// How a searched unknown is named in diagnostics: `%K`, or "the trip count of the loop
/// over %tile".
pub(super) fn name(k: &Kernel, v: Value) -> String {
    match is_trip(k, v) {
        true => format!("the trip count of the loop over %{}", k.value_names.get(v)),
        false => format!("%{}", k.value_names.get(v)),
    }
}
