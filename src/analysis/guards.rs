//! Branch conditions with one outcome on every execution: an `if` whose condition is always
//! true (or always false) in every thread of the block, in every iteration and for every
//! value of the kernel's ranged parameters (docs/async.md, "Guards that always hold").
//!
//! The in-flight dataflow (`analysis::inflight`) sends no state into the arm of such an `if`
//! that never runs: a wait under `if %i >= 0` in a loop `0..8` completes its copies like the
//! unguarded wait. Only the condition's value is read, never the arm's contents, so the answer
//! is exact for every kind of op in the arms.
//!
//! The decision is interval reasoning over the condition's expression tree:
//! - `cmp` of two `i32` operands decides where their intervals do not overlap in the way the
//!   predicate asks (`lt`: `x.hi < y.lo` true, `x.lo >= y.hi` false, ...);
//! - `and`, `or`, `xor` and `not` of `i1` values compose the operands' outcomes;
//! - an `i1` constant is its value; anything else is undecided.
//!
//! Intervals: a thread id read directly (`tid.x`, `tid`) lies in `0 .. block dimension`
//! (the launch `sync` places for; the rest of `sync` traces exactly those threads too); every
//! other value takes its interval from [`Ranges`] (loop variables their bounds, parameters
//! their declared range, arithmetic composed without wrap-around). Each interval holds the
//! value on every execution, so a decided outcome is the outcome of every execution.
//!
//! Complexity: O(size of the condition's expression tree), capped at [`DEPTH`] levels
//! (deeper: undecided), after one [`Ranges`] pass over the kernel.

use crate::ir::ranges::{Interval, Ranges};
use crate::ir::*;

/// Levels of `i1` operators followed before the condition is left undecided.
pub const DEPTH: u32 = 16;

/// Whether `if` op `op` runs its then-arm on every execution and its else-arm holds no op
/// (besides a `yield`): every op of the `if` then runs whenever the `if` does.
pub fn always_then(k: &Kernel, r: &Ranges, op: Op) -> bool {
    let OpKind::If { cond } = &k.ops[op].kind else {
        return false;
    };
    let bare_else = k.ops[op].regions.get(1).is_none_or(|&e| {
        (k.region_ops(e).iter()).all(|&o| matches!(k.ops[o].kind, OpKind::Yield(_)))
    });
    bare_else && outcome(k, r, cond) == Some(true)
}

/// The outcome of condition `c` on every execution, where one is shown: `Some(true)` when it
/// always holds, `Some(false)` when it never does.
pub fn outcome(k: &Kernel, r: &Ranges, c: &Operand) -> Option<bool> {
    decide(k, r, c, DEPTH)
}

fn decide(k: &Kernel, r: &Ranges, c: &Operand, depth: u32) -> Option<bool> {
    let v = match c {
        Operand::Imm(Scalar::I1(b)) => return Some(*b),
        Operand::Value(v) if depth > 0 => *v,
        _ => return None,
    };
    let ValueDef::Result(d, _) = k.values[v].def else {
        return None;
    };
    let sub = |x: &Operand| decide(k, r, x, depth - 1);
    match &k.ops[d].kind {
        OpKind::Const(Scalar::I1(b)) => Some(*b),
        OpKind::Cmp(p, x, y) => compare(*p, interval(k, r, x)?, interval(k, r, y)?),
        OpKind::Unary(UnOp::Not, x) => sub(x).map(|b| !b),
        OpKind::Binary(BinOp::And, x, y) if is_i1(k, v) => match (sub(x), sub(y)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        OpKind::Binary(BinOp::Or, x, y) if is_i1(k, v) => match (sub(x), sub(y)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        OpKind::Binary(BinOp::Xor, x, y) if is_i1(k, v) => Some(sub(x)? != sub(y)?),
        _ => None,
    }
}

fn is_i1(k: &Kernel, v: Value) -> bool {
    k.values[v].ty == ScalarType::I1
}

/// The interval of an `i32` operand on every execution (module doc), `None` for any other type.
fn interval(k: &Kernel, r: &Ranges, o: &Operand) -> Option<Interval> {
    match o {
        Operand::Imm(Scalar::I32(x)) => Some(Interval::point(*x as i64)),
        Operand::Value(v) if k.values[*v].ty == ScalarType::I32 => {
            if let ValueDef::Result(d, _) = k.values[*v].def
                && let OpKind::Special(s) = k.ops[d].kind
                && let Some(n) = thread_ids(k, s)
            {
                return Some(Interval { lo: 0, hi: n as i128 - 1 });
            }
            Some(r.range(*v))
        }
        _ => None,
    }
}

/// How many values a thread id takes in the kernel's block (`None` for other specials).
fn thread_ids(k: &Kernel, s: Special) -> Option<u32> {
    let n = match s {
        Special::Tid(d) => *k.block.get(d as usize)?,
        Special::LinearTid => k.threads(),
        _ => return None,
    };
    (n >= 1).then_some(n)
}

/// The predicate's outcome for every pair of values of the intervals, where one is shown.
fn compare(p: CmpPred, x: Interval, y: Interval) -> Option<bool> {
    let lt = |a: Interval, b: Interval| {
        if a.hi < b.lo {
            Some(true)
        } else if a.lo >= b.hi {
            Some(false)
        } else {
            None
        }
    };
    let point = |a: Interval| a.lo == a.hi;
    match p {
        CmpPred::Lt => lt(x, y),
        CmpPred::Gt => lt(y, x),
        CmpPred::Le => lt(y, x).map(|b| !b),
        CmpPred::Ge => lt(x, y).map(|b| !b),
        CmpPred::Eq | CmpPred::Ne => {
            let eq = if x.hi < y.lo || y.hi < x.lo {
                Some(false)
            } else if point(x) && point(y) {
                Some(true)
            } else {
                None
            };
            eq.map(|b| b == (p == CmpPred::Eq))
        }
    }
}
