//! The interpreter's scalar ops: constants, thread and block ids, arithmetic, comparisons,
//! `select`, casts, `in_group` and `compute`, following docs/ir.md section 2 (integers are
//! 32-bit and wrap; `div`/`rem` round toward negative infinity; `i1` arithmetic is boolean).
//!
//! Every function here is total: the only failure, an integer division by zero, is `None`
//! from [`binary`] and a C0005 execution error at the op. Complexity: O(1) per op, O(args)
//! for `compute`.

use super::*;
use crate::ir::arith::floor_div;

impl BlockExec<'_> {
    /// The value of a special register for thread `th`.
    pub(super) fn special(&self, th: &Thread, s: Special) -> Val {
        let k = self.k;
        let t = th.lin as usize;
        let v = match s {
            Special::Tid(d) => th.xyz[d as usize] as i64,
            Special::Bid(d) => self.bid[d as usize] as i64,
            Special::BlockDim(d) => k.block[d as usize] as i64,
            Special::GridDim(d) => k.grid[d as usize] as i64,
            Special::Lane => (t % self.warp) as i64,
            Special::Warp => (t / self.warp) as i64,
            Special::LinearTid => t as i64,
        };
        Val::I32(v as i32)
    }

    /// The scalar type of `op`'s first result (`default` when it has none).
    fn result_ty(&self, op: Op, default: ScalarType) -> ScalarType {
        self.k.ops[op]
            .results
            .first()
            .map_or(default, |r| self.k.values[*r].ty)
    }

    /// `%r = <b> %x, %y`: C0005 on an integer division by zero.
    pub(super) fn binary_op(
        &self,
        th: &mut Thread,
        op: Op,
        (b, x, y): (BinOp, &Operand, &Operand),
    ) -> Result<(), Stop> {
        let ty = self.result_ty(op, ScalarType::I32);
        let (x, y) = (self.val(th, x), self.val(th, y));
        let v = match binary(b, ty, x, y) {
            Some(v) => v,
            None => {
                return Err(self.exec_err(op, "C0005", "integer division by zero".into()));
            }
        };
        self.set(th, op, 0, v);
        Ok(())
    }

    pub(super) fn unary_op(&self, th: &mut Thread, op: Op, u: UnOp, x: &Operand) {
        let ty = self.result_ty(op, ScalarType::I32);
        let x = self.val(th, x);
        self.set(th, op, 0, unary(u, ty, x));
    }

    pub(super) fn select_op(&self, th: &mut Thread, op: Op, [c, a, b]: [&Operand; 3]) {
        let v = if self.val(th, c).truthy() {
            self.val(th, a)
        } else {
            self.val(th, b)
        };
        self.set(th, op, 0, v);
    }

    /// `%r = in_group @g`: whether the thread's linear id lies in the group's range.
    pub(super) fn in_group(&self, th: &mut Thread, op: Op, g: Group) {
        let gd = &self.k.groups[g];
        let t = th.lin as usize;
        self.set(
            th,
            op,
            0,
            Val::I1((gd.lo as usize..gd.hi as usize).contains(&t)),
        );
    }

    /// `compute`: every result is [`compute`] of the arguments.
    pub(super) fn compute_op(&self, th: &mut Thread, op: Op, args: &[Operand]) {
        let k = self.k;
        let args: Vec<Val> = args.iter().map(|a| self.val(th, a)).collect();
        for (j, r) in k.ops[op].results.iter().enumerate() {
            let ty = k.values[*r].ty;
            let v = compute(ty, &args, j);
            th.vals[r.index()] = v;
        }
    }
}

/// `cmp`: floats compare ordered (any NaN operand gives false), everything else as integers.
pub(super) fn compare(p: CmpPred, x: Val, y: Val) -> bool {
    match (x, y) {
        (Val::F32(_), _) | (_, Val::F32(_)) => {
            let (a, b) = (x.as_f32(), y.as_f32());
            let ord = !a.is_nan() && !b.is_nan();
            ord && p.holds(a, b)
        }
        _ => {
            let (a, b) = (x.as_i64(), y.as_i64());
            p.holds(a, b)
        }
    }
}

/// `itof` / `ftoi`.
pub(super) fn cast(c: CastOp, x: Val) -> Val {
    match c {
        CastOp::IToF => Val::F32(x.as_i64() as i32 as f32),
        CastOp::FToI => Val::I32(x.as_f32() as i32),
    }
}

/// Binary arithmetic per docs/ir.md; None for an integer division by zero.
pub fn binary(b: BinOp, ty: ScalarType, x: Val, y: Val) -> Option<Val> {
    Some(match ty {
        ScalarType::F32 => {
            let (a, c) = (x.as_f32(), y.as_f32());
            Val::F32(match b {
                BinOp::Add => a + c,
                BinOp::Sub => a - c,
                BinOp::Mul => a * c,
                BinOp::Div => a / c,
                BinOp::Rem => a - c * (a / c).floor(),
                BinOp::Min => a.min(c),
                BinOp::Max => a.max(c),
                BinOp::And => f32::from_bits(a.to_bits() & c.to_bits()),
                BinOp::Or => f32::from_bits(a.to_bits() | c.to_bits()),
                BinOp::Xor => f32::from_bits(a.to_bits() ^ c.to_bits()),
                BinOp::Shl | BinOp::Shr => a,
            })
        }
        ScalarType::I1 => {
            let (a, c) = (x.truthy(), y.truthy());
            Val::I1(match b {
                BinOp::And | BinOp::Mul | BinOp::Min => a && c,
                BinOp::Or | BinOp::Max => a || c,
                BinOp::Xor | BinOp::Add | BinOp::Sub => a ^ c,
                _ => a,
            })
        }
        _ => {
            let (a, c) = (x.as_i64() as i32, y.as_i64() as i32);
            Val::I32(match b {
                BinOp::Add => a.wrapping_add(c),
                BinOp::Sub => a.wrapping_sub(c),
                BinOp::Mul => a.wrapping_mul(c),
                BinOp::Div => floor_div(a as i64, c as i64)? as i32,
                BinOp::Rem => {
                    let (a, c) = (a as i64, c as i64);
                    (a - c * floor_div(a, c)?) as i32
                }
                BinOp::Min => a.min(c),
                BinOp::Max => a.max(c),
                BinOp::And => a & c,
                BinOp::Or => a | c,
                BinOp::Xor => a ^ c,
                BinOp::Shl => a.wrapping_shl(c as u32 & 31),
                BinOp::Shr => a.wrapping_shr(c as u32 & 31),
            })
        }
    })
}

pub(super) fn unary(u: UnOp, ty: ScalarType, x: Val) -> Val {
    match ty {
        ScalarType::F32 => {
            let a = x.as_f32();
            Val::F32(match u {
                UnOp::Neg => -a,
                UnOp::Not => f32::from_bits(!a.to_bits()),
                UnOp::Exp => a.exp(),
                UnOp::Sqrt => a.sqrt(),
                UnOp::Abs => a.abs(),
            })
        }
        ScalarType::I1 => Val::I1(match u {
            UnOp::Not => !x.truthy(),
            _ => x.truthy(),
        }),
        _ => {
            let a = x.as_i64() as i32;
            Val::I32(match u {
                UnOp::Neg => a.wrapping_neg(),
                UnOp::Not => !a,
                UnOp::Exp => (a as f32).exp() as i32,
                UnOp::Sqrt => (a as f32).sqrt() as i32,
                UnOp::Abs => a.wrapping_abs(),
            })
        }
    }
}

/// The new value of an element after atomic `a` with operand `x` on its `old` value.
pub(super) fn atomic(a: AtomicOp, old: Val, x: Val) -> Val {
    match old {
        Val::F32(o) => {
            let x = x.as_f32();
            Val::F32(match a {
                AtomicOp::Add => o + x,
                AtomicOp::Min => o.min(x),
                AtomicOp::Max => o.max(x),
                AtomicOp::Exch => x,
                AtomicOp::And => f32::from_bits(o.to_bits() & x.to_bits()),
                AtomicOp::Or => f32::from_bits(o.to_bits() | x.to_bits()),
            })
        }
        _ => {
            let (o, x) = (old.as_i64() as i32, x.as_i64() as i32);
            Val::I32(match a {
                AtomicOp::Add => o.wrapping_add(x),
                AtomicOp::Min => o.min(x),
                AtomicOp::Max => o.max(x),
                AtomicOp::Exch => x,
                AtomicOp::And => o & x,
                AtomicOp::Or => o | x,
            })
        }
    }
}

/// `compute`'s result `j`: the sum of its arguments converted to the result type, plus `j`.
pub(super) fn compute(ty: ScalarType, args: &[Val], j: usize) -> Val {
    match ty {
        ScalarType::F32 => {
            let mut s = 0f32;
            for a in args {
                s += a.to_ty(ScalarType::F32).as_f32();
            }
            Val::F32(s + j as f32)
        }
        _ => {
            let mut s = 0i32;
            for a in args {
                s = s.wrapping_add(a.to_ty(ScalarType::I32).as_i64() as i32);
            }
            let s = s.wrapping_add(j as i32);
            if ty == ScalarType::I1 {
                Val::I1(s & 1 != 0)
            } else {
                Val::I32(s)
            }
        }
    }
}
