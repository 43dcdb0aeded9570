//! Whether a per-thread `gather_to_lds`'s shared destination is *lane-contiguous* in every
//! wave: what `amdgpu.gather_to_lds` (gfx9's `global_load_lds`) needs in order to write the
//! elements the IR says it writes.
//!
//! The instruction takes one LDS address per wave (the first active lane's, through M0) and
//! writes lane `l`'s element at that address plus `l` elements of the transfer size, whereas
//! the IR gives every thread its own destination index (docs/ir.md, section 4). The two agree
//! when, in every wave, the destination's row-major element offset within its root buffer
//! is the first lane's offset plus the lane, and lane 0 runs the copy whenever another lane
//! of its wave does (docs/mlir.md; the form the examples use, `@as[%ty, %tx]`).
//!
//! Decided without enumerating loop iterations: each index, and each dynamic index of the
//! views the destination goes through, is split into a part that is the same in every thread
//! of a wave (a uniform or warp-uniform value, `analysis::uniformity`), which the offset
//! difference between two lanes does not see, and a part computed from thread ids and
//! constants only, through `add`, `sub` and `mul` by a constant; the thread parts are
//! evaluated for every thread of the block (`Footprints::eval`). Anything else (a parameter
//! times a thread id, a loaded value, `rem` of a sum) is not provable, and the emitter says so
//! (E0800). Wrap-around hides no difference: every thread part is bounded by 2^30, so two
//! in-range indices of one wave differ by exactly their thread parts' difference.
//! Control: the op must not run under control that may differ between the lanes of a wave
//! (`Uniformity::is_warp_divergent`): a wave whose lane 0 skips the copy would take another
//! lane's address as its base.
//! Complexity: O(index size) to split, O(threads · thread-part size) to evaluate.

use crate::analysis::footprint::Footprints;
use crate::analysis::uniformity::{Level, Uniformity, analyze_warp};
use crate::ir::*;

/// The part of an integer that differs between the threads of a wave: `Σ coef · value`, each
/// value computed from thread ids and constants only (the wave-uniform rest is dropped).
type ThreadPart = Vec<(i64, Value)>;

/// Bound on an index's thread part (see the module doc: wrap-around).
const BOUND: i64 = 1 << 30;

/// The facts the decision needs about one kernel, computed once per emitted kernel.
pub struct LaneContiguity<'k> {
    k: &'k Kernel,
    fp: Footprints<'k>,
    uni: Uniformity,
}

impl<'k> LaneContiguity<'k> {
    /// The facts for `k` on a target with waves of `warp` lanes.
    pub fn new(k: &'k Kernel, warp: u32) -> Self {
        let fp = Footprints::new(k, warp);
        let uni = analyze_warp(k, warp, &|v, t| {
            fp.eval(v, &Default::default(), t, &mut Default::default())
        });
        LaneContiguity { k, fp, uni }
    }

    /// `Ok` when the destination `dst[index]` of copy `op` is the first lane's plus the lane
    /// in every wave that runs it; otherwise why that is not shown.
    pub fn check(&self, op: Op, dst: MemRef, index: &[Operand]) -> Result<(), String> {
        let k = self.k;
        if k.parents().op_region[op].is_some_and(|r| self.uni.is_warp_divergent(r)) {
            return Err("it runs under control that may differ between the lanes of a wave (lane 0 may skip it)".into());
        }
        let not_split = "is not a wave-uniform value plus one computed from thread ids";
        let parts = index
            .iter()
            .map(|o| self.split(o))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("an index {not_split}"))?;
        let strided = self
            .flatten(dst, parts)
            .ok_or_else(|| format!("an index of its view {not_split}"))?;
        let warp = self.fp.warp.max(1);
        let mut base = 0i64;
        for t in 0..k.threads() {
            let off = self.offset(&strided, t).ok_or_else(|| {
                format!("an index is not evaluated exactly in thread {t}")
            })?;
            let lane = i64::from(t % warp);
            if lane == 0 {
                base = off;
            } else if off != base + lane {
                return Err(format!(
                    "thread {t} (lane {lane}) writes {} elements past its wave's lane 0, not {lane}",
                    off - base
                ));
            }
        }
        Ok(())
    }

    /// The thread part of `o`, or `None` when `o` is not a wave-uniform value plus one.
    fn split(&self, o: &Operand) -> Option<ThreadPart> {
        let Some(v) = o.value() else {
            return Some(Vec::new());
        };
        if self.uni.operand_level(o) != Level::ThreadDependent {
            return Some(Vec::new());
        }
        if self.value(v, 0).is_some() {
            return Some(vec![(1, v)]);
        }
        let ValueDef::Result(def, _) = self.k.values[v].def else {
            return None;
        };
        let scale = |part: ThreadPart, c: i64| -> ThreadPart {
            part.into_iter().map(|(a, v)| (a.saturating_mul(c), v)).collect()
        };
        match &self.k.ops[def].kind {
            OpKind::Binary(BinOp::Add, a, b) => Some([self.split(a)?, self.split(b)?].concat()),
            OpKind::Binary(BinOp::Sub, a, b) => {
                Some([self.split(a)?, scale(self.split(b)?, -1)].concat())
            }
            OpKind::Binary(BinOp::Mul, a, b) => match (self.constant(a), self.constant(b)) {
                (_, Some(c)) => Some(scale(self.split(a)?, c)),
                (Some(c), _) => Some(scale(self.split(b)?, c)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The value of `o` when it is a constant.
    fn constant(&self, o: &Operand) -> Option<i64> {
        match *o {
            Operand::Imm(c) => Some(c.as_i64()),
            Operand::Value(v) => match self.k.values[v].def {
                ValueDef::Result(def, _) => match &self.k.ops[def].kind {
                    OpKind::Const(c) => Some(c.as_i64()),
                    _ => None,
                },
                _ => None,
            },
        }
    }

    /// The root-buffer indices of `m[index]` as (row-major stride, thread part) pairs, given
    /// the thread parts of `index`.
    fn flatten(&self, m: MemRef, index: Vec<ThreadPart>) -> Option<Vec<(i64, ThreadPart)>> {
        match m {
            MemRef::Buffer(b) => {
                let shape = &self.k.buffers[b].shape;
                let mut stride = 1i64;
                let mut out = Vec::new();
                for (d, part) in shape.iter().zip(index).rev() {
                    out.push((stride, part));
                    stride = stride.checked_mul(i64::try_from(*d).ok()?)?;
                }
                Some(out)
            }
            MemRef::View(v) => {
                let vd = &self.k.views[v];
                let mut kept = index.into_iter();
                let mut base = Vec::new();
                for ix in &vd.indices {
                    base.push(match ix {
                        ViewIndex::At(o) => self.split(o)?,
                        // A static range start is the same in every thread.
                        ViewIndex::Range(..) => kept.next()?,
                    });
                }
                base.extend(kept);
                self.flatten(vd.base, base)
            }
        }
    }

    /// The thread part of the element offset in linear thread `t`: `None` when a value cannot
    /// be evaluated or an index's thread part leaves `[-BOUND, BOUND]`.
    fn offset(&self, strided: &[(i64, ThreadPart)], t: u32) -> Option<i64> {
        let mut off = 0i64;
        for (stride, part) in strided {
            let mut x = 0i64;
            for &(c, v) in part {
                x = x.checked_add(c.checked_mul(self.value(v, t)?)?)?;
            }
            if x.abs() > BOUND {
                return None;
            }
            off = off.checked_add(stride.checked_mul(x)?)?;
        }
        Some(off)
    }

    /// `v` in linear thread `t`, when computed from thread ids and constants only.
    fn value(&self, v: Value, t: u32) -> Option<i64> {
        self.fp.eval(v, &Default::default(), t, &mut Default::default())
    }
}
