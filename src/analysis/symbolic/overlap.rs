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
use rustc_hash::FxHashMap as HashMap;

/// An arithmetic progression of loop-variable values: `first + step·i`, `0 ≤ i < n`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

/// What a side's template depends on: the access (memref, per-thread operands encoded,
/// whether every thread is evaluated), the fixed loop values, the query's iteration
/// variables (they make the prefix and the side's loop-variable forms) and which side.
#[derive(Clone, PartialEq, Eq, Hash)]
struct SideKey {
    mem: MemRef,
    per_thread: Option<Vec<u64>>,
    all_threads: bool,
    fixed: Vec<(Value, i64)>,
    iters: Vec<Iter>,
    /// The block leaves of the question, shared variables of the prefix.
    leaves: Vec<Value>,
    x_side: bool,
}

impl SideKey {
    /// Whether this key is the one of `a` on side `x_side` of `iters` (no allocation).
    fn is(&self, a: &Access, (iters, leaves): (&[Iter], &[Value]), x_side: bool) -> bool {
        self.mem == a.mem
            && self.all_threads == a.all_threads
            && self.x_side == x_side
            && self.fixed == a.fixed
            && self.iters == iters
            && self.leaves == leaves
            && match (&self.per_thread, a.per_thread) {
                (None, None) => true,
                (Some(w), Some(ix)) => {
                    w.len() == ix.len() && w.iter().zip(ix).all(|(w, o)| *w == operand_word(o))
                }
                _ => false,
            }
    }

    /// The hash of `a`'s key on side `x_side` of `iters`, computed from the borrowed parts.
    fn hash_of(a: &Access, (iters, leaves): (&[Iter], &[Value]), x_side: bool) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        a.mem.hash(&mut h);
        a.all_threads.hash(&mut h);
        x_side.hash(&mut h);
        a.fixed.hash(&mut h);
        iters.hash(&mut h);
        leaves.hash(&mut h);
        if let Some(ix) = a.per_thread {
            for o in ix {
                operand_word(o).hash(&mut h);
            }
        }
        h.finish()
    }
}

/// A side built once on the prefix's boxes (docs/symbolic.md, "Translated in-flight
/// questions share one answer"): the problem (prefix boxes, then the side's own variables
/// and constraints), its bytes, the index obligations its boxes do not prove, and the id of
/// its content without the constant byte `base + esz·lin.c`.
struct Side {
    p: Problem,
    bytes: Bytes,
    pending: Vec<(Affine, i64)>,
    id: u32,
}

/// A side as built: `None` where it has no encoding.
type Built = Option<std::rc::Rc<Side>>;

/// What two sides with one id share: everything but the constant byte.
#[derive(PartialEq, Eq, Hash)]
struct Content {
    p: Problem,
    lin: Vec<(usize, i64)>,
    esz: i64,
    pending: Vec<(Affine, i64)>,
}

/// What a question's answer depends on: the two sides' contents, the difference of their
/// constant bytes, the prefix's constraints and the budget.
#[derive(PartialEq, Eq, Hash)]
struct AnswerKey {
    x: u32,
    y: u32,
    delta: i64,
    prefix: Vec<super::solve::Lin>,
    budget: u64,
}

/// Most answers (and sides) a [`Store`] keeps before it is emptied (a memo of a pure
/// function: emptying it changes no answer, only bounds its memory).
const STORE_LIMIT: usize = 1 << 16;

/// The memo of one in-flight dataflow's overlap questions: sides by what they read, their
/// interned contents, and answers by `AnswerKey`. Counters for `SMEMSYNC_OVERLAP_STATS`.
#[derive(Default)]
pub struct Store {
    /// By [`SideKey::hash_of`]: the keys with that hash and their sides.
    sides: HashMap<u64, Vec<(SideKey, Built)>>,
    ids: HashMap<Content, u32>,
    answers: HashMap<AnswerKey, Option<bool>>,
    /// The last solution found per pair of side contents and prefix constraints: a question
    /// of the same two contents at another `delta` has the same variables and boxes, and
    /// [`decide`] tries it mended first (docs/symbolic.md, "A solution of one translate
    /// mended for another").
    witnesses: HashMap<(u32, u32, Vec<super::solve::Lin>), Vec<i64>>,
    /// Questions asked, sides built, questions built (not found), solved (not apart by
    /// ranges), and of those answered by a mended solution.
    pub counts: [u64; 5],
}

thread_local! {
    /// Whether [`decide`] tries a mended solution before solving (off:
    /// `SMEMSYNC_OVERLAP_NO_REPAIR=1`, or [`mended_witnesses`]), and how many questions of
    /// this thread it answered.
    static MEND: std::cell::Cell<(bool, u64)> =
        std::cell::Cell::new((std::env::var_os("SMEMSYNC_OVERLAP_NO_REPAIR").is_none(), 0));
}

/// Turns the mended solutions of `decide` on (the default) or off on this thread, and
/// resets their count: tests compare every answer with them and without them.
pub fn mended_witnesses(on: bool) {
    MEND.with(|c| c.set((on, 0)));
}

/// The questions of this thread answered by a mended solution since the last
/// [`mended_witnesses`].
pub fn mended_count() -> u64 {
    MEND.with(|c| c.get().1)
}

/// A hashable encoding of an operand (values by id, immediates by kind and bits).
fn operand_word(o: &Operand) -> u64 {
    match o {
        Operand::Value(v) => v.index() as u64,
        Operand::Imm(Scalar::I32(c)) => (1 << 62) | (*c as u32 as u64),
        Operand::Imm(Scalar::I1(b)) => (2 << 62) | *b as u64,
        Operand::Imm(Scalar::F32(f)) => (3 << 62) | f.to_bits() as u64,
    }
}

/// The prefix problem of a query's iteration variables (boxes, and `i < j` for
/// `Pairs { lt }`) and each side's loop-variable forms over it, then one variable per block
/// leaf over its domain (`form::leaf_domain`), which both sides read. `None`: no encoding.
fn prefix(k: &Kernel, iters: &[Iter], leaves: &[Value]) -> Option<(Problem, Keys, Keys, LeafVars)> {
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
    let mut vars = Vec::with_capacity(leaves.len());
    for &v in leaves {
        let (lo, hi) = super::form::leaf_domain(k, v)?;
        vars.push((v, p.var(lo, hi)));
    }
    Some((p, kx, ky, vars))
}

/// The block leaves of a question and their prefix variables.
type LeafVars = Vec<(Value, usize)>;

impl Store {
    /// The side of `a` on side `x_side` of `iters` (loop-variable forms `keys` over the
    /// prefix `pre`), built on first use (`None`: no encoding).
    fn side(
        &mut self,
        ev: &dyn Evaluator,
        (pre, iters, leaves): (&Problem, &[Iter], &LeafVars),
        a: &Access,
        (keys, x_side): (Keys, bool),
    ) -> Option<std::rc::Rc<Side>> {
        let names: Vec<Value> = leaves.iter().map(|&(v, _)| v).collect();
        let h = SideKey::hash_of(a, (iters, &names), x_side);
        if let Some(b) = self.sides.get(&h)
            && let Some((_, s)) = b.iter().find(|(k, _)| k.is(a, (iters, &names), x_side))
        {
            return s.clone();
        }
        self.counts[1] += 1;
        let mut p = Problem {
            lo: pre.lo.clone(),
            hi: pre.hi.clone(),
            cons: Vec::new(),
        };
        let mut obligations = Vec::new();
        let made = side(ev, &mut p, a, (keys, leaves), &mut obligations)
            .ok()
            .map(|bytes| {
                // Boxes prove an obligation here iff they do on the composed problem (the
                // same boxes): only the others are proved there, and are content.
                let pending: Vec<(Affine, i64)> = obligations
                    .into_iter()
                    .filter(|(f, len)| {
                        let (lo, hi) = f.range(&p);
                        !(lo >= 0 && hi < *len)
                    })
                    .collect();
                let content = Content {
                    p: p.clone(),
                    lin: bytes.lin.terms.clone(),
                    esz: bytes.esz,
                    pending: pending.clone(),
                };
                let next = self.ids.len() as u32;
                let id = *self.ids.entry(content).or_insert(next);
                std::rc::Rc::new(Side {
                    p,
                    bytes,
                    pending,
                    id,
                })
            });
        if self.sides.len() >= STORE_LIMIT {
            self.sides.clear();
        }
        let key = SideKey {
            mem: a.mem,
            per_thread: a.per_thread.map(|ix| ix.iter().map(operand_word).collect()),
            all_threads: a.all_threads,
            fixed: a.fixed.to_vec(),
            iters: iters.to_vec(),
            leaves: names,
            x_side,
        };
        self.sides.entry(h).or_default().push((key, made.clone()));
        made
    }
}

/// The constant byte of a side: `base + esz·lin.c`.
fn constant_byte(s: &Bytes) -> Option<i64> {
    s.base.checked_add(s.lin.c.checked_mul(s.esz)?)
}

/// Whether `X` and `Y` may touch a common byte (`Some`, exact) or `None` (enumerate):
/// see the module doc. `budget`: search nodes, shared by every solve of the question.
/// Sides and answers are kept in `store` (docs/symbolic.md, "Translated in-flight questions
/// share one answer"). `leaves`: the block leaves (parameters, block ids) the two accesses'
/// indices read, each one variable both sides share (docs/async.md, "Parameters in flight").
pub fn may_overlap(
    store: &mut Store,
    ev: &dyn Evaluator,
    (x, y): (&Access, &Access),
    (iters, leaves): (&[Iter], &[Value]),
    budget: u64,
) -> Option<bool> {
    store.counts[0] += 1;
    let (pre, kx, ky, lv) = prefix(ev.kernel(), iters, leaves)?;
    let sx = store.side(ev, (&pre, iters, &lv), x, (kx, true))?;
    let sy = store.side(ev, (&pre, iters, &lv), y, (ky, false))?;
    let key = AnswerKey {
        x: sx.id,
        y: sy.id,
        delta: constant_byte(&sy.bytes)?.checked_sub(constant_byte(&sx.bytes)?)?,
        prefix: pre.cons.clone(),
        budget,
    };
    if let Some(a) = store.answers.get(&key) {
        return *a;
    }
    store.counts[2] += 1;
    let a = decide(store, pre, (&sx, &sy), key.delta, budget);
    if store.answers.len() >= STORE_LIMIT {
        store.answers.clear();
    }
    store.answers.insert(key, a);
    a
}

/// The problem of `X` and `Y` on one prefix: `X`'s variables after the prefix's, `Y`'s
/// after `X`'s, constraints in that order (as one problem built side after side).
fn compose(pre: Problem, x: &Side, y: &Side) -> (Problem, usize) {
    let n = pre.lo.len();
    let mut p = pre;
    p.lo.extend_from_slice(&x.p.lo[n..]);
    p.hi.extend_from_slice(&x.p.hi[n..]);
    p.cons.extend(x.p.cons.iter().cloned());
    let off = x.p.lo.len() - n;
    p.lo.extend_from_slice(&y.p.lo[n..]);
    p.hi.extend_from_slice(&y.p.hi[n..]);
    let mv = |v: usize| if v < n { v } else { v + off };
    p.cons.extend(y.p.cons.iter().map(|c| super::solve::Lin {
        terms: c.terms.iter().map(|&(v, a)| (mv(v), a)).collect(),
        lo: c.lo,
        hi: c.hi,
    }));
    (p, off)
}

/// Renumbers `Y`'s own variables after `X`'s (see [`compose`]).
fn moved(f: &Affine, n: usize, off: usize) -> Affine {
    Affine {
        terms: f
            .terms
            .iter()
            .map(|&(v, a)| (if v < n { v } else { v + off }, a))
            .collect(),
        c: f.c,
    }
}

/// Decides one built question, with the common byte relative to `X`'s constant byte.
fn decide(store: &mut Store, pre: Problem, (x, y): (&Side, &Side), delta: i64, budget: u64) -> Option<bool> {
    let (n, pre_cons) = (pre.lo.len(), pre.cons.len());
    let (mut p, off) = compose(pre, x, y);
    let mut left = budget;
    for (f, len) in &x.pending {
        in_bounds(&p, f, *len, &mut left)?;
    }
    for (f, len) in &y.pending {
        in_bounds(&p, &moved(f, n, off), *len, &mut left)?;
    }
    // Each side's byte form relative to its own constant byte, then placed at 0 and `delta`.
    let rel = |s: &Bytes, shift: usize| Affine {
        terms: moved(&s.lin, n, shift).terms,
        c: 0,
    };
    let (lx, ly) = (rel(&x.bytes, 0), rel(&y.bytes, off));
    let ends = |lin: &Affine, esz: i64, at: i64| -> Option<(i64, i64)> {
        let (lo, hi) = lin.range(&p);
        Some((
            at.checked_add(lo.checked_mul(esz)?)?,
            at.checked_add(hi.checked_add(1)?.checked_mul(esz)?)?,
        ))
    };
    let (xlo, xhi) = ends(&lx, x.bytes.esz, 0)?;
    let (ylo, yhi) = ends(&ly, y.bytes.esz, delta)?;
    if xhi <= ylo || yhi <= xlo {
        return Some(false);
    }
    store.counts[3] += 1;
    let b = p.var(xlo.max(ylo), xhi.min(yhi) - 1);
    let wkey = (x.id, y.id, p.cons[..pre_cons].to_vec());
    for (lin, esz, at) in [(&lx, x.bytes.esz, 0), (&ly, y.bytes.esz, delta)] {
        // at + esz·lin ≤ b ≤ at + esz·lin + esz − 1
        let mut t = vec![(b, 1)];
        for &(v, a) in &lin.terms {
            t.push((v, a.checked_mul(esz)?.checked_neg()?));
        }
        p.add(&t, at, at.checked_add(esz - 1)?);
    }
    // A solution of a translate, mended, that satisfies this problem is a solution of it: the
    // answer the solve would give (or, past its budget, enumeration).
    if MEND.with(|c| c.get().0)
        && let Some(s) = store.witnesses.get(&wkey)
        && let Some(m) = super::shift::repair(&p, s)
        && p.satisfied_by(&m)
    {
        store.counts[4] += 1;
        MEND.with(|c| c.set((true, c.get().1 + 1)));
        store.witnesses.insert(wkey, m);
        return Some(true);
    }
    match p.solve(&mut left) {
        Answer::Sat(s) => {
            if store.witnesses.len() >= STORE_LIMIT {
                store.witnesses.clear();
            }
            store.witnesses.insert(wkey, s);
            Some(true)
        }
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
/// Every index to prove in bounds is pushed on `obligations`, except one that depends on a
/// block leaf (`leaves`, prefix variables): that one constrains the problem instead (an index
/// out of its dimension is an execution error, so the run's values keep it in range).
fn side(
    ev: &dyn Evaluator,
    p: &mut Problem,
    a: &Access,
    (keys, leaves): (Keys, &LeafVars),
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
    b.free = (!leaves.is_empty()).then(|| super::form::preset_leaves(leaves));
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
    if let Some(free) = &b.free {
        obligations.retain(|(f, len)| {
            let on_leaf = f.terms.iter().any(|(v, _)| free.tainted.contains(v));
            if on_leaf {
                f.constrain(b.p, 0, len - 1);
            }
            !on_leaf
        });
    }
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
