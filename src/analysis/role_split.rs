//! Role branches not written with `in_group`: which `if` conditions split the block into
//! roles exactly as `in_group @g` would (docs/async.md, "Role branches").
//!
//! A role branch is an `if %c` whose condition is true in exactly the threads of a declared
//! group. `sync` and the analyses it runs (mbarrier protocol, hand-written handshakes, named
//! barriers, the role-bound access check) recognised only `%c = in_group @g`; kernels from
//! compilers and hand-written CUDA split roles by a warp-id compare instead
//! (`%p = cmp lt %t, 32`, `tid / 32 == 0`, `warp >= 4`). [`cond_group`] answers `Some(g)` for
//! such a condition when it is *the same predicate* as `in_group @g`:
//!
//! - the condition is computed from constants and thread specials only (`tid.*`, the
//!   linear thread id, `lane`, `warp`, `ntid.*`, `in_group`) through integer arithmetic,
//!   compares, `select` and boolean `not`; a parameter, a block id, a loop variable, a loaded
//!   value or any other op declines (`None`);
//! - evaluated in every thread of the block, under the warp width of the kernel's target
//!   (`Kernel::target`: `sync` sets it to the target it places for before its analyses, so
//!   `%w = warp; cmp eq %w, 0` is warp 0 of sm_90's 32 threads or gfx942's 64), or, with no
//!   target fixed, under a width of 32 and of 64 (a condition whose threads differ between
//!   the two declines), it is true in exactly the threads `[lo, hi)` of a declared group `g`;
//! - `lo` and `hi` are multiples of 32 or the block's end, so the condition is uniform
//!   within every warp: a compare that splits a warp (`cmp lt %t, 40`) is not a role branch.
//!
//! Invariant: where `cond_group` says `Some(g)`, the condition's value equals `in_group @g`'s
//! in every thread, so every argument that holds of the `in_group` branch holds of this one:
//! treating it as a role branch is exact, not an approximation. Where it says `None`, the
//! callers keep their earlier treatment of an ordinary thread-dependent `if`.
//!
//! Complexity: O(threads × cone) per query, the cone (the condition's defining ops) capped at
//! [`MAX_CONE`] ops; callers that ask per executed op cache the answer per value.

use crate::ir::*;

/// The most ops in a condition's defining cone that are evaluated (beyond: not a role branch).
pub const MAX_CONE: usize = 64;

/// The warp widths a condition is evaluated under (NVIDIA warps, AMD wavefronts).
const WIDTHS: [u32; 2] = [32, 64];

/// The group of an `if` op whose condition is a role split ([`cond_group`]).
pub fn branch_group(k: &Kernel, op: Op) -> Option<Group> {
    match &k.ops[op].kind {
        OpKind::If { cond } => cond_group(k, cond),
        _ => None,
    }
}

/// The declared group `g` whose membership `cond` computes in every thread of the block
/// (`in_group @g` itself, or a warp-uniform thread-id compare with the same threads).
pub fn cond_group(k: &Kernel, cond: &Operand) -> Option<Group> {
    let Operand::Value(c) = cond else {
        return None;
    };
    let ValueDef::Result(d, _) = k.values[*c].def else {
        return None;
    };
    if let OpKind::InGroup(g) = k.ops[d].kind {
        return Some(g);
    }
    if k.values[*c].ty != ScalarType::I1 {
        return None;
    }
    let (lo, hi) = true_interval(&true_threads(k, cond)?)?;
    let threads = k.threads();
    let aligned = |x: u32| x.is_multiple_of(WIDTHS[0]) || x == threads;
    if !(aligned(lo) && aligned(hi)) {
        return None;
    }
    (k.groups.iter()).find(|(_, gd)| gd.lo == lo && gd.hi == hi).map(|(g, _)| g)
}

/// In which threads of the block a condition computed from constants and thread specials
/// only (the [`cond_group`] rules) is true, one flag per linear thread id; `None` when it
/// reads anything else (a parameter, a loop variable, a load) or its threads differ between
/// the warp widths it is evaluated under. `sync::handshake_guards` counts a role's arrivals
/// with it. O(threads × cone).
pub fn true_threads(k: &Kernel, cond: &Operand) -> Option<Vec<bool>> {
    let c = match cond {
        Operand::Imm(s) => return Some(vec![s.as_i64() != 0; k.threads() as usize]),
        Operand::Value(c) => *c,
    };
    let cone = cone(k, c)?;
    let mut out: Option<Vec<bool>> = None;
    for w in widths(k) {
        let mut vals = vec![0i64; cone.len()];
        let mut these = Vec::with_capacity(k.threads() as usize);
        for tid in 0..k.threads() {
            for i in 0..cone.len() {
                vals[i] = eval(k, &cone, &vals[..i], cone[i], tid, w)?;
            }
            these.push(*vals.last()? != 0);
        }
        if out.as_ref().is_some_and(|p| *p != these) {
            return None;
        }
        out = Some(these);
    }
    out
}

/// The warp widths a condition is evaluated under: the width of the target the kernel is
/// synchronized or checked for (`Kernel::target`, which `sync` sets before its analyses:
/// `warp` and `lane` are `tid div width` and `tid mod width` there, one value per thread),
/// else both [`WIDTHS`] (a split that differs between them declines).
fn widths(k: &Kernel) -> Vec<u32> {
    let fixed = k.target.as_deref().and_then(|t| crate::target::Target::from_name(t).ok());
    match fixed {
        Some(t) => vec![t.warp],
        None => WIDTHS.to_vec(),
    }
}

/// The values defining `v`, definitions first; `None` when one of them is not a
/// thread-only scalar computation or the cone exceeds [`MAX_CONE`].
fn cone(k: &Kernel, v: Value) -> Option<Vec<Value>> {
    let mut out: Vec<Value> = Vec::new();
    let mut stack = vec![(v, false)];
    while let Some((x, done)) = stack.pop() {
        if out.contains(&x) {
            continue;
        }
        if done {
            out.push(x);
            if out.len() > MAX_CONE {
                return None;
            }
            continue;
        }
        let ValueDef::Result(d, _) = k.values[x].def else {
            return None;
        };
        if !matches!(k.values[x].ty, ScalarType::I1 | ScalarType::I32) {
            return None;
        }
        stack.push((x, true));
        let operands: Vec<Operand> = match &k.ops[d].kind {
            OpKind::Const(_) | OpKind::InGroup(_) => vec![],
            OpKind::Special(Special::Bid(_) | Special::GridDim(_)) => return None,
            OpKind::Special(_) => vec![],
            OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => vec![*a, *b],
            OpKind::Unary(UnOp::Neg, a) => vec![*a],
            OpKind::Unary(UnOp::Not, a) if k.values[x].ty == ScalarType::I1 => vec![*a],
            OpKind::Select(c, a, b) => vec![*c, *a, *b],
            _ => return None,
        };
        for o in operands {
            if let Operand::Imm(Scalar::F32(_)) = o {
                return None;
            }
            if let Operand::Value(y) = o {
                if stack.len() > 4 * MAX_CONE {
                    return None;
                }
                stack.push((y, false));
            }
        }
    }
    Some(out)
}

/// The threads `[lo, hi)` whose flag is set; `None` when they are not one interval.
fn true_interval(flags: &[bool]) -> Option<(u32, u32)> {
    let lo = flags.iter().position(|&f| f).unwrap_or(0);
    let hi = flags.iter().rposition(|&f| f).map_or(0, |h| h + 1);
    if flags[lo..hi].iter().all(|&f| f) {
        Some((lo as u32, hi as u32))
    } else {
        None
    }
}

/// The value of `v` in thread `tid`, its operands read from `done` (the cone's earlier values).
fn eval(k: &Kernel, cone: &[Value], done: &[i64], v: Value, tid: u32, warp: u32) -> Option<i64> {
    let read = |o: &Operand| -> Option<i64> {
        match o {
            Operand::Imm(Scalar::F32(_)) => None,
            Operand::Imm(s) => Some(s.as_i64()),
            Operand::Value(y) => cone.iter().position(|c| c == y).and_then(|i| done.get(i).copied()),
        }
    };
    let ValueDef::Result(d, _) = k.values[v].def else {
        return None;
    };
    match &k.ops[d].kind {
        OpKind::Const(s) => Some(s.as_i64()),
        OpKind::Special(s) => crate::analysis::footprint::special_value(k, *s, tid, warp),
        OpKind::InGroup(g) => Some((tid >= k.groups[*g].lo && tid < k.groups[*g].hi) as i64),
        OpKind::Binary(b, x, y) => b.eval_i32(read(x)?, read(y)?),
        OpKind::Cmp(p, x, y) => Some(p.holds(read(x)?, read(y)?) as i64),
        OpKind::Unary(UnOp::Neg, x) => BinOp::Sub.eval_i32(0, read(x)?),
        OpKind::Unary(UnOp::Not, x) => Some(1 - read(x)?),
        OpKind::Select(c, x, y) => {
            if read(c)? != 0 {
                read(x)
            } else {
                read(y)
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `%w = warp; cmp eq %w, 0` is warp 0: threads [0, 32) on sm_90, [0, 64) on gfx942;
    /// with no target fixed the two widths disagree and the split declines.
    #[test]
    fn warp_split_follows_the_target_width() {
        let src = "kernel @w(%X: global f32[64]) block(128) {
  group @p : threads [0, 32)
  group @c : threads [32, 128)
  %w = warp
  %isp = cmp eq %w, 0
  if %isp {
    %z = add %w, 1
  }
}";
        let mut k = crate::reader::parse_kernel(src).expect("parses");
        let br = (k.ops.keys()).find(|&o| matches!(k.ops[o].kind, OpKind::If { .. })).expect("an if");
        assert_eq!(branch_group(&k, br), None, "no target: the split depends on the width");
        k.target = Some("sm_90".to_string());
        assert!(branch_group(&k, br).is_some(), "sm_90: warp 0 is @p");
        k.target = Some("gfx942".to_string());
        assert_eq!(branch_group(&k, br), None, "gfx942: warp 0 is [0, 64), no declared group");
    }
}
