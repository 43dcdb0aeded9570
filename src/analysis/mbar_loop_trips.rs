//! Loops around mbarrier ops whose bounds the trace cannot evaluate but which every role
//! runs alike: the persistent kernel's tile loop, `for %tile = bid.x to %tiles step G`, in
//! each role arm of a warp-specialized kernel (Triton's persistent warp-specialized matmul).
//!
//! The trace of `analysis::mbar_protocol` needs each loop's trip count, not its bounds, as
//! long as nothing it evaluates reads the loop's counter. Two loops whose bounds are the
//! *same expression* of block-uniform leaves (scalar parameters, constants, `bid`, `nctaid`,
//! `ntid`) run the same number of trips in every thread of a block, so one unknown — the trip
//! count — stands for them all. This module gives each such loop the representative of its
//! class: the counter of the first loop (in walk order) with the same bound expressions.
//! The trace then searches the representative's trip count like a parameter without a
//! declared range (`mbar_protocol`'s module doc, *Parameters without a range*; docs/async.md,
//! "Tile loops of persistent kernels").
//!
//! Invariant: a loop gets a representative only when its three bounds are expressions of
//! block-uniform leaves through integer arithmetic, comparisons and selects (no thread id,
//! no loaded value, no iteration value), so equal expressions are equal values in a block.
//! Complexity: O(loops × size of their bound expressions).

use std::collections::{HashMap, HashSet};

use crate::ir::*;

/// The representative counter of each loop among `loops` whose bounds are block-uniform
/// expressions: equal expressions share one.
pub(super) fn representatives(k: &Kernel, loops: &HashSet<Op>) -> HashMap<Op, Value> {
    let mut ordered: Vec<Op> = Vec::new();
    k.walk(|o| {
        if loops.contains(&o) {
            ordered.push(o);
        }
    });
    let mut by_form: HashMap<String, Value> = HashMap::new();
    let mut out = HashMap::new();
    for o in ordered {
        let OpKind::For { lo, hi, step, .. } = &k.ops[o].kind else { continue };
        let form = [lo, hi, step].iter().map(|b| expr(k, b, 0)).collect::<Option<Vec<_>>>();
        let (Some(form), Some(&iv)) = (form, k.region_args(k.ops[o].regions[0]).first()) else {
            continue;
        };
        let rep = *by_form.entry(form.join(" ; ")).or_insert(iv);
        out.insert(o, rep);
    }
    out
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
