//! The in-flight engine's question (`analysis::overlap::Overlap::may_overlap`) as one integer
//! feasibility problem: may an access `X` (an async copy) and a later access `Y`, at
//! iterations related loop by loop, touch a common byte, from *any* threads?
//!
//! Unlike the footprint engine's pair question there is no thread distinction: `X`'s thread
//! and `Y`'s thread are two independent variables, so the question is one problem, not two.
//! Variables: one thread per side (only thread 0 for a collective footprint whose view does
//! not depend on the thread, as the enumerator evaluates it), one index per iteration variable
//! (a relation of the two sides' values, [`Iter`]), one element offset per dimension a side
//! covers more than one element of, the forms' existentials (`symbolic::form`) and the common
//! byte `b`. Each side constrains `b` to one of its elements' bytes:
//! `base + esz·lin ≤ b ≤ base + esz·lin + esz − 1` with `lin` the row-major element index.
//!
//! Exactness: every index must provably lie inside its dimension over the whole related
//! domain (the enumerator reads an out-of-bounds index as unknown and answers
//! conservatively with a W0314 note), every value must have a form, and every intermediate
//! value must stay inside `i32`; otherwise, and when the node budget runs out, the answer is
//! `None` and the caller enumerates. Complexity: O(|DAG| + dims) variables per side, then the
//! solver's nodes (bounded by the budget).

use super::form::{Affine, Builder, Evaluator, Form};
use super::solve::{Answer, Problem};
use crate::ir::*;

/// An arithmetic progression of loop-variable values: `first + step·i`, `0 ≤ i < n`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Prog {
    pub first: i64,
    pub step: i64,
    pub n: i64,
}

impl Prog {
    /// The progression a list of values is, if it is one (non-empty).
    pub fn of(vals: &[i64]) -> Option<Prog> {
        let (&first, rest) = vals.split_first()?;
        let step = rest.first().map_or(1, |s| s - first);
        let ok = vals
            .windows(2)
            .all(|w| w[1].checked_sub(w[0]) == Some(step));
        (ok && step != 0 || vals.len() == 1).then_some(Prog {
            first,
            step,
            n: vals.len() as i64,
        })
    }

    fn at(&self, i: usize) -> Affine {
        Affine {
            terms: vec![(i, self.step)],
            c: self.first,
        }
    }
}

/// A free iteration variable of a query and how it binds the two sides' loop variables.
#[derive(Clone, Debug)]
pub enum Iter {
    /// Binds one side's loop variable (`x_side`) to every value of the progression.
    One { iv: Value, x_side: bool, vals: Prog },
    /// The `i`-th value of `xs` for `X` with the `i`-th of `ys` for `Y` (a fixed distance).
    Diag {
        x: Value,
        y: Value,
        xs: Prog,
        ys: Prog,
    },
    /// The `i`-th value for `X` with the `j`-th for `Y`: `i < j` when `lt`, else any pair.
    Pairs {
        x: Value,
        y: Value,
        vals: Prog,
        lt: bool,
    },
}

/// One side of a query.
pub struct Access<'s> {
    pub mem: MemRef,
    /// The per-thread indices (`None`: a collective footprint, the whole view).
    pub per_thread: Option<&'s [Operand]>,
    /// Whether the enumerator evaluates every thread (else thread 0 only).
    pub all_threads: bool,
    /// Loop variables fixed by the query (`Pre`, `Last`, `PreLast` tags).
    pub fixed: &'s [(Value, i64)],
}

/// Loop variables bound on one side, with their forms.
type Keys = Vec<(Value, Affine)>;

/// A side's bytes: `base + esz·lin + [0, esz)`.
struct Bytes {
    lin: Affine,
    esz: i64,
    base: i64,
}

/// Whether `X` and `Y` may touch a common byte (`Some`, exact) or `None` (enumerate):
/// see the module doc. `budget`: search nodes, shared by every solve of the question.
pub fn may_overlap(
    ev: &dyn Evaluator,
    x: &Access,
    y: &Access,
    iters: &[Iter],
    budget: u64,
) -> Option<bool> {
    let mut p = Problem::default();
    let (mut kx, mut ky): (Keys, Keys) = (Vec::new(), Vec::new());
    for it in iters {
        match *it {
            Iter::One { iv, x_side, vals } => {
                let i = p.var(0, vals.n - 1);
                let side = if x_side { &mut kx } else { &mut ky };
                side.push((iv, vals.at(i)));
            }
            Iter::Diag { x, y, xs, ys } => {
                if xs.n != ys.n {
                    return None;
                }
                let i = p.var(0, xs.n - 1);
                kx.push((x, xs.at(i)));
                ky.push((y, ys.at(i)));
            }
            Iter::Pairs { x, y, vals, lt } => {
                let (i, j) = (p.var(0, vals.n - 1), p.var(0, vals.n - 1));
                if lt {
                    p.add(&[(i, 1), (j, -1)], i64::MIN / 4, -1);
                }
                kx.push((x, vals.at(i)));
                ky.push((y, vals.at(j)));
            }
        }
    }
    let mut obligations = Vec::new();
    let bx = side(ev, &mut p, x, kx, &mut obligations).ok()?;
    let by = side(ev, &mut p, y, ky, &mut obligations).ok()?;
    let mut left = budget;
    for (f, len) in obligations {
        in_bounds(&p, &f, len, &mut left)?;
    }
    let ends = |s: &Bytes, p: &Problem| -> Option<(i64, i64)> {
        let (lo, hi) = s.lin.range(p);
        Some((
            s.base.checked_add(lo.checked_mul(s.esz)?)?,
            s.base.checked_add(hi.checked_add(1)?.checked_mul(s.esz)?)?,
        ))
    };
    let ((xlo, xhi), (ylo, yhi)) = (ends(&bx, &p)?, ends(&by, &p)?);
    if xhi <= ylo || yhi <= xlo {
        return Some(false);
    }
    let b = p.var(xlo.max(ylo), xhi.min(yhi) - 1);
    for s in [&bx, &by] {
        // base + esz·lin ≤ b ≤ base + esz·lin + esz − 1
        let mut t = vec![(b, 1)];
        for &(v, a) in &s.lin.terms {
            t.push((v, a.checked_mul(s.esz)?.checked_neg()?));
        }
        let c = s.base.checked_add(s.lin.c.checked_mul(s.esz)?)?;
        p.add(&t, c, c.checked_add(s.esz - 1)?);
    }
    match p.solve(&mut left) {
        Answer::Sat(_) => Some(true),
        Answer::Unsat => Some(false),
        Answer::Budget => None,
    }
}

/// Fails (`None`) unless `0 ≤ f < len` wherever the problem is feasible.
fn in_bounds(p: &Problem, f: &Affine, len: i64, left: &mut u64) -> Option<()> {
    let (lo, hi) = f.range(p);
    if lo >= 0 && hi < len {
        return Some(());
    }
    for (l, h) in [(i64::MIN / 4, -1), (len, i64::MAX / 4)] {
        let mut q = p.clone();
        f.constrain(&mut q, l, h);
        if q.solve(left) != Answer::Unsat {
            return None;
        }
    }
    Some(())
}

/// Builds one side: its thread, its loop variables' forms, its memref chain and indices.
/// Every index to prove in bounds is pushed on `obligations`.
fn side(
    ev: &dyn Evaluator,
    p: &mut Problem,
    a: &Access,
    keys: Keys,
    obligations: &mut Vec<(Affine, i64)>,
) -> Result<Bytes, ()> {
    let k = ev.kernel();
    let threads = if a.all_threads {
        k.threads().max(1) as i64
    } else {
        1
    };
    let t = p.var(0, threads - 1);
    let mut b = Builder::new(ev, p, t);
    b.ivs = keys;
    for &(v, c) in a.fixed {
        b.ivs.push((v, Affine::konst(c)));
    }
    let mut dims = resolve(&mut b, a.mem, obligations)?;
    if let Some(ix) = a.per_thread {
        let mut kept = dims.iter_mut().filter(|d| d.2);
        for o in ix {
            let d = kept.next().ok_or(())?;
            let f = known(b.operand(o))?;
            obligations.push((f.clone(), d.1));
            d.0 = d.0.plus(&f).ok_or(())?;
            d.1 = 1;
        }
    }
    let root = k.root_buffer(a.mem);
    let bd = &k.buffers[root];
    let mut lin = Affine::konst(0);
    for ((lo, len, _), &s) in dims.into_iter().zip(&bd.shape) {
        let e = match len {
            1 => lo,
            n if n > 1 => lo.plus(&Affine::var(b.p.var(0, n - 1))).ok_or(())?,
            _ => return Err(()),
        };
        lin = lin.scale(s as i64).and_then(|l| l.plus(&e)).ok_or(())?;
    }
    let base = match bd.offset {
        Some(o) => i64::try_from(o).map_err(|_| ())?,
        None => (1i64 << 40) * (root.index() as i64 + 1),
    };
    Ok(Bytes {
        lin,
        esz: bd.elem.bytes() as i64,
        base,
    })
}

fn known(f: Form) -> Result<Affine, ()> {
    match f {
        Form::Known(a) => Ok(a),
        _ => Err(()),
    }
}

/// Per root dimension: (first index form, length, kept), as the enumerator's `resolve`.
type Dims = Vec<(Affine, i64, bool)>;

fn resolve(b: &mut Builder, m: MemRef, obligations: &mut Vec<(Affine, i64)>) -> Result<Dims, ()> {
    let k = b.k;
    match m {
        MemRef::Buffer(buf) => Ok(k.buffers[buf]
            .shape
            .iter()
            .map(|s| (Affine::konst(0), *s as i64, true))
            .collect()),
        MemRef::View(v) => {
            let vd = &k.views[v];
            let mut dims = resolve(b, vd.base, obligations)?;
            let mut kept: Vec<usize> = (0..dims.len()).filter(|i| dims[*i].2).collect();
            kept.reverse();
            for ix in &vd.indices {
                let d = kept.pop().ok_or(())?;
                match ix {
                    ViewIndex::At(o) => {
                        let f = known(b.operand(o))?;
                        obligations.push((f.clone(), dims[d].1));
                        dims[d] = (dims[d].0.plus(&f).ok_or(())?, 1, false);
                    }
                    ViewIndex::Range(lo, hi) => {
                        let (lo, hi) = (*lo as i64, *hi as i64);
                        if hi > dims[d].1 || lo > hi {
                            return Err(());
                        }
                        let first = dims[d].0.plus(&Affine::konst(lo)).ok_or(())?;
                        dims[d] = (first, hi - lo, true);
                    }
                }
            }
            Ok(dims)
        }
    }
}
