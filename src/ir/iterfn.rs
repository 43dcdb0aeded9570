//! Iteration functions: a value of a `for` loop's body as an exact function of the iteration
//! number `i`, in the form `seq[i mod P] + drift·(i div P)` (a periodic table plus a constant
//! change per period), computed by composing the forms of the operands.
//!
//! What it is for: Triton spells the slot and the phase parity of a pipeline in many ways
//! (`rem %c, D` or `%c - (%c / D)·D`; `(c / D) mod 2` as `and _, 1`, repeated masks,
//! `cmp ne _, 0`, `xor _, true`, `select _, 1, 0` or `-1, 0`), over the loop variable or an
//! affine counter (`ir::induction`). Instead of matching spellings, a consumer computes the
//! form of the value and compares its table with the expected function over a common period:
//! two periodic functions equal over one common period are equal everywhere.
//!
//! **Rules (each exact over the integers).** `f(i + P) = f(i) + drift` for every `i >= 0`:
//! - the loop's iteration number: `seq = [lo]`, `drift = step` (the loop variable); a
//!   recognized iteration value (`ir::induction`): its table and drift; a constant: `[c]`, 0;
//! - `add`, `sub`: the forms over the least common period, drifts added;
//! - `mul` by a constant `c`, `shl` by a constant: table and drift times `c` (`2^s`);
//! - `div` by `c > 0` (floor): once the period is extended until `c` divides the drift,
//!   `f(i + P)/c = f(i)/c + drift/c`; `rem` by `c > 0`: then periodic (drift 0);
//! - `and` with a mask `m >= 0`, `or`/`xor` with `m >= 0`: once `2^b > m` divides the drift
//!   (`b` bits), adding a multiple of `2^b` changes no bit the mask touches: `and` is periodic,
//!   `or`/`xor` keep the drift;
//! - `select c, x, y`: `c` periodic, `x` and `y` with one drift; comparisons, `min`/`max`,
//!   other bit ops and `not`/`abs` of periodic operands: evaluated entry by entry.
//!
//! **`i32` semantics.** The rules compute integer values (a sum of two `i32` values may leave
//! `i32`, where the IR wraps); every form is therefore checked to stay in `i32` in every
//! iteration up to the loop's largest iteration number (`max_iter`), and one that may leave
//! it is refused, so each table entry and drift is the `i32` value the kernel computes. Anything else (a parameter, a load, a thread id, a value of another loop)
//! is refused: a consumer that gets `None` must not conclude anything.
//!
//! Complexity: O(|DAG| · P) with periods capped at [`MAX_PERIOD`].

use std::collections::HashMap;

use crate::ir::induction::Inductions;
use crate::ir::ranges::Ranges;
use crate::ir::*;

/// The period, in values of the loop variable `iv`, of `v` when `v` is an exactly periodic
/// function of the iteration number of `iv`'s loop (`x - (x / 3)·3` of a counter `x`, which
/// the polynomial algebra of the footprint engines cannot see cancel); `None` otherwise.
pub fn period_in_iv(k: &Kernel, ranges: &Ranges, v: Value, iv: Value) -> Option<i64> {
    let ValueDef::RegionArg(r, 0) = k.values[iv].def else {
        return None;
    };
    let l = k.parents().region_op[r]?;
    let mut fns = IterFns::for_loop(k, ranges, l)?;
    let f = fns.of(Operand::Value(v)).filter(IterFn::periodic)?;
    Some(f.seq.len() as i64 * fns.step)
}

/// Longest period (iterations) a form may have.
pub const MAX_PERIOD: usize = 4096;

/// `f(i) = seq[i mod P] + drift·(i div P)`, `P = seq.len()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IterFn {
    pub seq: Vec<i64>,
    pub drift: i64,
}

impl IterFn {
    fn konst(c: i64) -> IterFn {
        IterFn {
            seq: vec![c],
            drift: 0,
        }
    }

    /// The value in iteration `i >= 0`.
    pub fn at(&self, i: i64) -> i64 {
        let p = self.seq.len() as i64;
        self.seq[i.rem_euclid(p) as usize] + self.drift * i.div_euclid(p)
    }

    pub fn periodic(&self) -> bool {
        self.drift == 0
    }

    /// The same function over a period `p` (a multiple of the current one).
    fn extend(&self, p: usize) -> IterFn {
        IterFn {
            seq: (0..p as i64).map(|i| self.at(i)).collect(),
            drift: self.drift * (p / self.seq.len()) as i64,
        }
    }

    /// Extends the period until `m` divides the drift; `None` past [`MAX_PERIOD`].
    fn drift_multiple_of(&self, m: i64) -> Option<IterFn> {
        if m <= 0 {
            return None;
        }
        let g = gcd(self.drift.unsigned_abs(), m as u64) as i64;
        let times = (m / g) as usize;
        let p = self.seq.len().checked_mul(times)?;
        (p <= MAX_PERIOD).then(|| self.extend(p))
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: usize, b: usize) -> Option<usize> {
    let l = (a / gcd(a as u64, b as u64) as usize).checked_mul(b)?;
    (l <= MAX_PERIOD).then_some(l)
}

/// Computes iteration functions of the values of one loop's body.
pub struct IterFns<'k> {
    k: &'k Kernel,
    ind: &'k Inductions,
    l: Op,
    iv: Value,
    lo: i64,
    step: i64,
    /// The largest iteration number the loop can reach.
    max_iter: i64,
    memo: HashMap<Value, Option<IterFn>>,
}

impl<'k> IterFns<'k> {
    /// For loop `l` (constant lower bound and positive step, else `None`), whose iteration
    /// numbers are at most `max_iter`.
    pub fn new(k: &'k Kernel, ind: &'k Inductions, l: Op, max_iter: i64) -> Option<IterFns<'k>> {
        let OpKind::For { lo, step, .. } = &k.ops[l].kind else {
            return None;
        };
        let c = |o: &Operand| match o {
            Operand::Imm(Scalar::I32(c)) => Some(*c as i64),
            Operand::Value(v) => match k.values[*v].def {
                ValueDef::Result(d, _) => match k.ops[d].kind {
                    OpKind::Const(Scalar::I32(c)) => Some(c as i64),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        };
        let (lo, step) = (c(lo)?, c(step)?);
        let iv = *k.region_args(*k.ops[l].regions.first()?).first()?;
        (step > 0).then(|| IterFns {
            k,
            ind,
            l,
            iv,
            lo,
            step,
            max_iter: max_iter.max(0),
            memo: HashMap::new(),
        })
    }

    /// For loop `l`, with its largest iteration number from `ranges` (the loop variable's
    /// range).
    pub fn for_loop(k: &'k Kernel, ranges: &'k Ranges, l: Op) -> Option<IterFns<'k>> {
        let iv = *k.region_args(*k.ops[l].regions.first()?).first()?;
        let mut f = IterFns::new(k, &ranges.inductions, l, 0)?;
        let span = ranges.range(iv).hi - f.lo as i128;
        f.max_iter = i64::try_from(span.max(0) / f.step as i128).unwrap_or(i64::MAX);
        Some(f)
    }

    /// The loop's constant lower bound and step.
    pub fn lo_step(&self) -> (i64, i64) {
        (self.lo, self.step)
    }

    /// Sets the largest iteration number the loop can reach (drifting forms are checked
    /// against it).
    pub fn set_max_iter(&mut self, max_iter: i64) {
        self.max_iter = max_iter.max(0);
        self.memo.clear();
    }

    /// The form of operand `o`; `None` when it is not an exact iteration function.
    pub fn of(&mut self, o: Operand) -> Option<IterFn> {
        match o {
            Operand::Imm(Scalar::F32(_)) => None,
            Operand::Imm(s) => Some(IterFn::konst(s.as_i64())),
            Operand::Value(v) => {
                if let Some(f) = self.memo.get(&v) {
                    return f.clone();
                }
                let f = self.value(v, 0).filter(|f| self.fits(f));
                self.memo.insert(v, f.clone());
                f
            }
        }
    }

    /// Whether the form stays within `i32` up to the last iteration: the integer values the
    /// rules compute (sums, products) then equal the `i32` results, which would wrap.
    fn fits(&self, f: &IterFn) -> bool {
        let periods = (self.max_iter / f.seq.len() as i64 + 1) as i128;
        let moved = f.drift as i128 * periods;
        f.seq.iter().all(|&x| {
            let ends = [x as i128, x as i128 + moved];
            ends.iter().all(|e| (i32::MIN as i128..=i32::MAX as i128).contains(e))
        })
    }

    fn value(&mut self, v: Value, depth: u32) -> Option<IterFn> {
        let k = self.k;
        if v == self.iv {
            return Some(IterFn {
                seq: vec![self.lo],
                drift: self.step,
            });
        }
        if depth > 64 {
            return None;
        }
        let op = match k.values[v].def {
            ValueDef::Result(op, _) => op,
            ValueDef::RegionArg(..) => {
                let ind = self.ind.get(v).filter(|i| i.l == self.l)?;
                return Some(IterFn {
                    seq: ind.seq.to_vec(),
                    drift: ind.drift,
                });
            }
            _ => return None,
        };
        let i1 = k.values[v].ty == ScalarType::I1;
        let kind = k.ops[op].kind.clone();
        let mut sub = |o: Operand| -> Option<IterFn> {
            match o {
                Operand::Value(w) => {
                    if let Some(f) = self.memo.get(&w) {
                        return f.clone();
                    }
                    let f = self.value(w, depth + 1).filter(|f| self.fits(f));
                    self.memo.insert(w, f.clone());
                    f
                }
                o => self.of(o),
            }
        };
        let f = match kind {
            OpKind::Const(c) if c.ty() != ScalarType::F32 => IterFn::konst(c.as_i64()),
            OpKind::Binary(b, x, y) => binary(b, sub(x)?, sub(y)?)?,
            OpKind::Unary(u, x) => unary(u, sub(x)?, i1)?,
            OpKind::Cmp(p, x, y) => {
                let (x, y) = common(sub(x)?, sub(y)?)?;
                if !x.periodic() || !y.periodic() {
                    return None;
                }
                let seq = x.seq.iter().zip(&y.seq).map(|(a, b)| p.holds(*a, *b) as i64);
                IterFn {
                    seq: seq.collect(),
                    drift: 0,
                }
            }
            OpKind::Select(c, x, y) => {
                let c = sub(c)?;
                let (x, y) = common(sub(x)?, sub(y)?)?;
                if !c.periodic() || x.drift != y.drift {
                    return None;
                }
                let (c, x) = common(c, x)?;
                let (c, y) = common(c, y)?;
                let seq = (0..c.seq.len()).map(|i| if c.seq[i] != 0 { x.seq[i] } else { y.seq[i] });
                IterFn {
                    seq: seq.collect(),
                    drift: x.drift,
                }
            }
            _ => return None,
        };
        Some(if i1 {
            // Booleans are their low bit (periodic by construction: every op above that
            // yields an `i1` from drifting operands refuses them).
            if !f.periodic() {
                return None;
            }
            IterFn {
                seq: f.seq.iter().map(|x| x & 1).collect(),
                drift: 0,
            }
        } else {
            f
        })
    }
}

/// Both forms over their least common period.
fn common(a: IterFn, b: IterFn) -> Option<(IterFn, IterFn)> {
    let p = lcm(a.seq.len(), b.seq.len())?;
    Some((a.extend(p), b.extend(p)))
}

/// A constant form's value.
fn constant_of(f: &IterFn) -> Option<i64> {
    (f.seq.len() == 1 && f.drift == 0).then_some(f.seq[0])
}

fn binary(b: BinOp, x: IterFn, y: IterFn) -> Option<IterFn> {
    let c = constant_of(&y);
    let scale = |f: &IterFn, c: i64| IterFn {
        seq: f.seq.iter().map(|x| x * c).collect(),
        drift: f.drift * c,
    };
    let bits = |m: i64| 1i64 << (64 - (m as u64).leading_zeros()).min(31);
    match (b, c) {
        (BinOp::Add | BinOp::Sub, _) => {
            let (x, y) = common(x, y)?;
            let sign = if b == BinOp::Add { 1 } else { -1 };
            let seq = x.seq.iter().zip(&y.seq).map(|(a, c)| a + sign * c);
            Some(IterFn {
                seq: seq.collect(),
                drift: x.drift + sign * y.drift,
            })
        }
        (BinOp::Mul, Some(c)) => Some(scale(&x, c)),
        (BinOp::Mul, None) if constant_of(&x).is_some() => binary(b, y, x),
        (BinOp::Shl, Some(s)) if (0..31).contains(&s) => Some(scale(&x, 1 << s)),
        (BinOp::Div, Some(c)) if c > 0 && !x.periodic() => {
            let x = x.drift_multiple_of(c)?;
            Some(IterFn {
                seq: x.seq.iter().map(|a| a.div_euclid(c)).collect(),
                drift: x.drift / c,
            })
        }
        (BinOp::Rem, Some(c)) if c > 0 && !x.periodic() => {
            let x = x.drift_multiple_of(c)?;
            Some(IterFn {
                seq: x.seq.iter().map(|a| a.rem_euclid(c)).collect(),
                drift: 0,
            })
        }
        (BinOp::And | BinOp::Or | BinOp::Xor, Some(m)) if m >= 0 && !x.periodic() => {
            let x = x.drift_multiple_of(bits(m))?;
            let seq = x.seq.iter().map(|a| b.eval_i32(*a, m).unwrap_or(0));
            Some(IterFn {
                seq: seq.collect(),
                drift: if b == BinOp::And { 0 } else { x.drift },
            })
        }
        _ => {
            // Entry by entry, with the IR's `i32` semantics, on periodic operands only.
            let (x, y) = common(x, y)?;
            if !x.periodic() || !y.periodic() {
                return None;
            }
            let seq: Option<Vec<i64>> = x.seq.iter().zip(&y.seq).map(|(a, c)| b.eval_i32(*a, *c)).collect();
            Some(IterFn {
                seq: seq?,
                drift: 0,
            })
        }
    }
}

fn unary(u: UnOp, x: IterFn, i1: bool) -> Option<IterFn> {
    match u {
        UnOp::Neg => Some(IterFn {
            seq: x.seq.iter().map(|a| -a).collect(),
            drift: -x.drift,
        }),
        UnOp::Not if i1 && x.periodic() => Some(IterFn {
            seq: x.seq.iter().map(|a| 1 - (a & 1)).collect(),
            drift: 0,
        }),
        UnOp::Not if !i1 => Some(IterFn {
            seq: x.seq.iter().map(|a| !a).collect(),
            drift: -x.drift,
        }),
        UnOp::Abs if x.periodic() => Some(IterFn {
            seq: x.seq.iter().map(|a| (*a as i32).wrapping_abs() as i64).collect(),
            drift: 0,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The form of the operand of the last `yield` but one (`%out`) in a loop `0 to %n`.
    fn form_of(body: &str, iters: &str) -> Option<IterFn> {
        let src = format!(
            "kernel @k(%n: i32 in [0, 4096]) block(4) {{\n  %t = tid.x\n  \
             %r = for %i = 0 to %n step 1 iter({iters}) {{\n{body}\n  }}\n}}\n"
        );
        let k = crate::reader::parse(&src)
            .unwrap_or_else(|e| panic!("{e:?}\n{src}"))
            .kernels
            .remove(0);
        let ind = Inductions::new(&k);
        let l = k.ops.iter().find(|(_, o)| matches!(o.kind, OpKind::For { .. }))?.0;
        let v = k
            .ops
            .iter()
            .flat_map(|(_, o)| o.results.iter().copied())
            .find(|&v| k.value_name(v).trim_start_matches('%') == "out")?;
        IterFns::new(&k, &ind, l, 4096)?.of(Operand::Value(v))
    }

    fn table(f: &IterFn, n: i64) -> Vec<i64> {
        (0..n).map(|i| f.at(i)).collect()
    }

    #[test]
    fn tritons_phase_of_an_affine_counter_is_div_mod_2() {
        let f = form_of(
            "    %q = div %s, 3\n    %a = and %q, 1\n    %b = and %a, 1\n    \
             %c = cmp ne %b, 0\n    %x = xor %c, true\n    %out = select %x, 1, 0\n    \
             %s1 = add %s, 1\n    yield %s1",
            "%s = 0",
        )
        .unwrap();
        assert!(f.periodic());
        let want: Vec<i64> = (0..12).map(|i| 1 - (i / 3) % 2).collect();
        assert_eq!(table(&f, 12), want);
    }

    #[test]
    fn slot_spelled_as_subtraction_is_i_mod_d() {
        let f = form_of(
            "    %q = div %i, 3\n    %m = mul %q, 3\n    %d = sub %i, %m\n    \
             %out = add %d, 0\n    yield %s",
            "%s = 0",
        )
        .unwrap();
        assert_eq!(table(&f, 7), vec![0, 1, 2, 0, 1, 2, 0]);
        assert!(f.periodic());
    }

    #[test]
    fn drifting_values_keep_their_drift_and_refuse_unknowns() {
        let f = form_of("    %a = mul %i, 2\n    %out = add %a, 5\n    yield %s", "%s = 0").unwrap();
        assert_eq!((table(&f, 3), f.periodic()), (vec![5, 7, 9], false));
        // A comparison of a drifting value is not periodic: refused.
        assert!(form_of("    %out = cmp lt %i, 5\n    yield %s", "%s = 0").is_none());
        // A parameter or thread id is not a function of the iteration.
        assert!(form_of("    %out = add %i, %n\n    yield %s", "%s = 0").is_none());
        assert!(form_of("    %out = add %i, %t\n    yield %s", "%s = 0").is_none());
        // `i * 2^20` may leave i32 within 4096 iterations: refused.
        assert!(form_of("    %out = mul %i, 1048576\n    yield %s", "%s = 0").is_none());
        // A periodic sum that wraps in `i32` (`1 + (2^31 - 1)`) is refused, not computed over
        // the integers.
        let wraps = "    %a = rem %i, 2\n    %out = add %a, 2147483647\n    yield %s";
        assert!(form_of(wraps, "%s = 0").is_none());
    }
}
