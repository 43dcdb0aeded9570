//! Quasi-affine forms: an IR integer value as an affine combination of solver variables
//! (thread ids, loop keys, and existential variables introduced for `div`/`rem` by
//! constants and for the bits of `and`/`or`/`xor` operands), with the defining constraints
//! added to a [`Problem`].
//!
//! Recognized: constants, thread specials (`tid.x = t mod bx`, `lane`, `warp`, …), block and
//! grid dimensions, bound loop variables, `add`/`sub`/`neg`/`not`, `mul` and `shl` by
//! constants, `div`/`rem`/`shr` by positive constants (floor semantics: `e = m·q + r`,
//! `0 ≤ r < m`), `and` by `2^k − 1` (a `rem`), and `and`/`or`/`xor` of non-negative values
//! below `2^31` through their bits (`x ⊕ y = x + y − 2·(x ∧ y)` per bit, `x ∧ y` linearized
//! over 0/1 variables: the GF(2) forms of swizzles), and, where the caller allows it, an
//! operation of a constant and a value with few possible values as a table of 0/1 indicators
//! (`shr 128, %i`; `Builder::table`). Every intermediate value must provably
//! stay inside `i32` (interval bounds), so wrap-around never differs from the enumerator.
//! Guards (`if` conditions) become constraints with the enumerator's three-valued logic.
//!
//! A value is [`Form::Unknown`] exactly where the enumerator's evaluation is `None` for every
//! thread and iteration (a parameter, a load, an unbound loop variable, an opaque guard),
//! and [`Form::Unsupported`] where the enumerator knows a value this module cannot express
//! (`min`, `select`, products of variables, …): the caller then falls back to enumeration.
//! Complexity: O(|DAG| + bits) variables and constraints per side.

use rustc_hash::FxHashMap as HashMap;

use super::solve::Problem;
use crate::analysis::footprint::Footprints;
use crate::ir::*;

/// `Σ coef·var + c`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Affine {
    pub terms: Vec<(usize, i64)>,
    pub c: i64,
}

impl Affine {
    pub fn konst(c: i64) -> Affine {
        Affine {
            terms: Vec::new(),
            c,
        }
    }
    pub fn var(v: usize) -> Affine {
        Affine {
            terms: vec![(v, 1)],
            c: 0,
        }
    }
    pub fn scale(&self, s: i64) -> Option<Affine> {
        Some(Affine {
            terms: self
                .terms
                .iter()
                .map(|&(v, a)| a.checked_mul(s).map(|x| (v, x)))
                .collect::<Option<_>>()?,
            c: self.c.checked_mul(s)?,
        })
    }
    pub fn plus(&self, o: &Affine) -> Option<Affine> {
        let mut t = self.terms.clone();
        for &(v, a) in &o.terms {
            match t.iter_mut().find(|(w, _)| *w == v) {
                Some(e) => e.1 = e.1.checked_add(a)?,
                None => t.push((v, a)),
            }
        }
        t.retain(|&(_, a)| a != 0);
        Some(Affine {
            terms: t,
            c: self.c.checked_add(o.c)?,
        })
    }
    pub fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.c)
    }
    /// Bounds over the problem's boxes.
    pub fn range(&self, p: &Problem) -> (i64, i64) {
        let (mut lo, mut hi) = (self.c as i128, self.c as i128);
        for &(v, a) in &self.terms {
            let (x, y) = (a as i128 * p.lo[v] as i128, a as i128 * p.hi[v] as i128);
            lo += x.min(y);
            hi += x.max(y);
        }
        let clamp = |x: i128| x.clamp(i64::MIN as i128 / 4, i64::MAX as i128 / 4) as i64;
        (clamp(lo), clamp(hi))
    }
    /// The value at a solution `x` (one value per variable), saturating.
    pub fn value_at(&self, x: &[i64]) -> i64 {
        let sum = (self.terms.iter()).fold(self.c as i128, |s, &(v, a)| s + a as i128 * x[v] as i128);
        sum.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
    /// Adds `lo ≤ self ≤ hi` to the problem.
    pub fn constrain(&self, p: &mut Problem, lo: i64, hi: i64) {
        p.add(
            &self.terms,
            lo.saturating_sub(self.c),
            hi.saturating_sub(self.c),
        );
    }
}

/// What the enumerator would compute for a value, in solver terms.
#[derive(Clone, Debug, PartialEq)]
pub enum Form {
    Known(Affine),
    /// The enumerator's evaluation is `None` everywhere.
    Unknown,
    /// Not expressible here: fall back to enumeration.
    Unsupported,
}

/// The constraint set under which a thread executes past a guard.
#[derive(Clone, Debug, PartialEq)]
pub enum Guard {
    /// Always executes (or the condition is unknown: "may execute").
    Always,
    /// Executes iff all these hold: `lo ≤ form ≤ hi`.
    When(Vec<(Affine, i64, i64)>),
    Unsupported,
}

/// What a [`Builder`] needs of the enumerating engine whose evaluation it mirrors: the
/// kernel, the warp width, which guard comparisons it treats as unknown, which iteration
/// values it evaluates from their loop's variable, and which operations it evaluates at all.
pub trait Evaluator {
    fn kernel(&self) -> &Kernel;
    fn warp(&self) -> u32;
    /// A guard comparison the engine evaluates as unknown ("may execute").
    fn is_opaque(&self, v: Value) -> bool;
    /// The loop variable of a recognized periodic iteration value.
    fn induction_iv(&self, v: Value) -> Option<Value>;
    /// An affine counter (`ir::induction`, drift): `v = a·iv + b` in the loop variable `iv`.
    fn affine_counter(&self, _v: Value) -> Option<(Value, i64, i64)> {
        None
    }
    /// Whether the engine evaluates `neg`, `not` and grid dimensions (the in-flight overlap
    /// engine does not: they are unknown there, so they must be here too).
    fn evaluates_unary(&self) -> bool {
        true
    }
}

impl Evaluator for Footprints<'_> {
    fn kernel(&self) -> &Kernel {
        self.k
    }
    fn warp(&self) -> u32 {
        self.warp
    }
    fn is_opaque(&self, v: Value) -> bool {
        Footprints::is_opaque(self, v)
    }
    fn induction_iv(&self, v: Value) -> Option<Value> {
        Footprints::induction_iv(self, v)
    }
    fn affine_counter(&self, v: Value) -> Option<(Value, i64, i64)> {
        Footprints::affine_counter(self, v)
    }
}

/// Translates one side's values (one thread variable, its loop keys) into forms.
pub struct Builder<'a> {
    pub fp: &'a dyn Evaluator,
    pub k: &'a Kernel,
    pub p: &'a mut Problem,
    /// The linear thread id's variable.
    pub tid: usize,
    /// Bound loop variables.
    pub ivs: Vec<(Value, Affine)>,
    /// Whether operations of a constant and a small-range value may become tables
    /// (`Builder::table`); off by default (see [`force_tables`]).
    pub tables: bool,
    /// The variables of every operand that needed a table while tables were off: splitting
    /// the question on them (fixing each to each of its values, `symbolic::split`) makes
    /// those operations constant.
    pub wanted: Vec<usize>,
    /// Tables relaxed to a free variable over the table's values (with `tables`): an
    /// over-approximation, sound only for concluding that a problem is infeasible
    /// (`symbolic::split`'s pre-checks).
    pub relax: bool,
    /// Unknown leaves as free variables (`None`: they stay [`Form::Unknown`], the
    /// enumerator's meaning); the self race through unknown indices (`symbolic::free`).
    pub free: Option<FreeLeaves>,
    memo: HashMap<Value, Form>,
    /// The existentials `(q, r)` of each `e = m·q + r` made so far: `div` and `rem` of one
    /// value share them, so `m·(e div m) + e rem m` is `e` after elimination (two separate
    /// pairs are related only through bounds propagation, which cannot see it). Another
    /// builder on the same problem may take them over (`symbolic::copies`: both threads'
    /// `k rem 2` is then one variable, which a search over a long loop cannot otherwise see).
    pub(super) divs: Vec<(Affine, i64, usize, usize)>,
    /// The wraps made (`Builder::wrapped`): `r = a − 2³²·w` as `(r, a)`.
    wraps: Vec<(usize, Affine)>,
    /// Uniform leaves fixed to one value each (`symbolic::cases`, [`with_fixed`]): their
    /// form is that constant.
    fixed: Vec<(Value, i64)>,
}

thread_local! {
    /// The leaf values of the case in progress (`symbolic::cases`).
    static FIXED: std::cell::RefCell<Vec<(Value, i64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with every [`Builder`] made meanwhile on this thread reading each value of
/// `vals` as its constant (one case of `symbolic::cases`); restores the previous case after.
pub fn with_fixed<R>(vals: Vec<(Value, i64)>, f: impl FnOnce() -> R) -> R {
    let saved = FIXED.with(|x| std::mem::replace(&mut *x.borrow_mut(), vals));
    let r = f();
    FIXED.with(|x| *x.borrow_mut() = saved);
    r
}

thread_local! {
    /// Whether [`Builder`]s read parameters and block ids as shared free variables
    /// (`symbolic::params`, [`with_free_params`]).
    static FREE_PARAMS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every [`Builder`] made meanwhile on this thread reading each `i32`
/// parameter and block id as a free variable over its domain (its declared range, `i32`,
/// or the grid), one per value, recorded in [`FreeLeaves::shared`] so that the two sides of
/// a pair question can be given the same variable (`symbolic::params`). Other values the
/// enumerator cannot evaluate (loads, unbound iteration values) stay [`Form::Unknown`].
pub fn with_free_params<R>(f: impl FnOnce() -> R) -> R {
    let saved = FREE_PARAMS.with(|x| x.replace(true));
    let r = f();
    FREE_PARAMS.with(|x| x.set(saved));
    r
}

/// Whether [`with_free_params`] is in effect on this thread: part of the identity of a side
/// built under it (`pairs::template`).
pub fn free_params() -> bool {
    FREE_PARAMS.with(|x| x.get())
}

/// Whether `v` is a uniform leaf of the whole block run: an `i32` parameter or a block id.
pub fn is_block_leaf(k: &Kernel, v: Value) -> bool {
    match &k.values[v].def {
        ValueDef::Param(_) => k.values[v].ty == ScalarType::I32,
        ValueDef::Result(op, _) => matches!(k.ops[*op].kind, OpKind::Special(Special::Bid(_))),
        ValueDef::RegionArg(..) => false,
    }
}

/// The values a leaf may take: an `i32` parameter its declared range (what every caller
/// promises, `Kernel::param_ranges`) or all of `i32`, a block id `[0, grid)`, another `i32`
/// value all of `i32`, an `i1` `[0, 1]`; `None` for other types.
pub fn leaf_domain(k: &Kernel, v: Value) -> Option<(i64, i64)> {
    Some(match (k.values[v].ty, &k.values[v].def) {
        (ScalarType::I32, ValueDef::Param(_)) => (*k.param_ranges.get(v)).map_or(I32, |(a, b)| (a as i64, b as i64)),
        (ScalarType::I32, ValueDef::Result(op, _)) => match k.ops[*op].kind {
            OpKind::Special(Special::Bid(d)) => (0, k.bid_max(d)),
            _ => I32,
        },
        (ScalarType::I32, _) => I32,
        (ScalarType::I1, _) => (0, 1),
        _ => return None,
    })
}

/// The free leaves of a question whose block leaves are already variables of its problem
/// (`symbolic::overlap`: one per leaf, in the prefix both sides share): each is read as its
/// variable, and what is built from one is tainted.
pub fn preset_leaves(vars: &[(Value, usize)]) -> FreeLeaves {
    FreeLeaves {
        shared: vars.to_vec(),
        tainted: vars.iter().map(|&(_, x)| x).collect(),
        params_only: true,
        ..FreeLeaves::default()
    }
}

/// The leaf values fixed on this thread ([`with_fixed`]), empty outside a case: part of
/// the identity of a side built under them (`pairs::template`).
pub fn fixed() -> Vec<(Value, i64)> {
    FIXED.with(|x| x.borrow().clone())
}

const I32: (i64, i64) = (i32::MIN as i64, i32::MAX as i64);

/// The free leaves of one self-race question through unknown indices (docs/symbolic.md,
/// "Self races through unknown indices"): which values became variables, which variables
/// depend on them, and whether a guard stayed unknown.
#[derive(Clone, Debug, Default)]
pub struct FreeLeaves {
    /// Uniform leaves and their variable: one variable for both sides.
    pub shared: Vec<(Value, usize)>,
    /// Every leaf this side used: value, variable, uniform.
    pub leaves: Vec<(Value, usize, bool)>,
    /// The leaf variables and every variable defined from one (`div`/`rem` existentials,
    /// bits, table steps).
    pub tainted: std::collections::BTreeSet<usize>,
    /// A guard was left "may execute" (opaque, or on a value without a form).
    pub unknown_guard: bool,
    /// Only parameters and block ids become variables ([`with_free_params`]); every other
    /// unknown value stays [`Form::Unknown`] (the enumerator's meaning).
    pub params_only: bool,
    uniform: HashMap<Value, bool>,
}

impl FreeLeaves {
    /// Whether `v` holds one value in every thread at one instance of an op: constants,
    /// parameters, block and grid ids and dimensions, the variable of a `for` whose bounds and
    /// step are uniform, and arithmetic of uniform values. Loads, atomics, thread ids,
    /// iteration values and anything else are not (a load's value may differ per thread).
    pub fn is_uniform(&mut self, k: &Kernel, v: Value) -> bool {
        if let Some(&u) = self.uniform.get(&v) {
            return u;
        }
        // Cycles (none in SSA, but cheap to rule out): not uniform while in progress.
        self.uniform.insert(v, false);
        let ops_uniform = |s: &mut Self, ops: &[&Operand]| {
            ops.iter().all(|o| o.value().is_none_or(|w| s.is_uniform(k, w)))
        };
        let u = match &k.values[v].def {
            ValueDef::Param(_) => true,
            ValueDef::RegionArg(r, 0) => match k.parents().region_op[*r].map(|op| &k.ops[op].kind) {
                Some(OpKind::For { lo, hi, step, .. }) => ops_uniform(self, &[lo, hi, step]),
                _ => false,
            },
            ValueDef::RegionArg(..) => false,
            ValueDef::Result(op, _) => match &k.ops[*op].kind {
                OpKind::Const(_) => true,
                OpKind::Special(s) => matches!(
                    s,
                    Special::Bid(_) | Special::BlockDim(_) | Special::GridDim(_)
                ),
                OpKind::Binary(_, x, y) | OpKind::Cmp(_, x, y) => ops_uniform(self, &[x, y]),
                OpKind::Unary(_, x) => ops_uniform(self, &[x]),
                OpKind::Select(c, x, y) => ops_uniform(self, &[c, x, y]),
                _ => false,
            },
        };
        self.uniform.insert(v, u);
        u
    }
}

/// Most values an operand of a tabulated operation (`Builder::table`) may take.
pub const TABLE: i64 = 64;

thread_local! {
    static FORCE_TABLES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Allows tables in every [`Builder`] of this thread (on) or only where the caller enables
/// them (off, the default): tests of the encoding turn it on on small kernels, where the
/// engine itself leaves such questions to enumeration (docs/symbolic.md, "Tables").
pub fn force_tables(on: bool) {
    FORCE_TABLES.with(|f| f.set(on));
}

impl<'a> Builder<'a> {
    pub fn new(fp: &'a dyn Evaluator, p: &'a mut Problem, tid: usize) -> Self {
        Builder {
            fp,
            k: fp.kernel(),
            p,
            tid,
            ivs: Vec::new(),
            tables: false,
            wanted: Vec::new(),
            relax: false,
            free: free_params().then(|| FreeLeaves {
                params_only: true,
                ..FreeLeaves::default()
            }),
            memo: HashMap::default(),
            divs: Vec::new(),
            wraps: Vec::new(),
            fixed: fixed(),
        }
    }

    fn known(&mut self, a: Affine) -> Form {
        let (lo, hi) = a.range(self.p);
        if lo < I32.0 || hi > I32.1 {
            return match self.free {
                Some(_) => self.wrapped(a, (lo, hi)),
                None => Form::Unsupported,
            };
        }
        Form::Known(a)
    }

    /// With free leaves, a form whose interval leaves `i32`: its i32 value, the IR's
    /// wrap-around, as `r = a − 2³²·w` with `r` in `i32` (exact for every operation whose
    /// i32 result is its integer result modulo 2³², the operations `known` is called on).
    fn wrapped(&mut self, a: Affine, (lo, hi): (i64, i64)) -> Form {
        const M: i64 = 1 << 32;
        if lo <= i64::MIN / 8 || hi >= i64::MAX / 8 {
            return Form::Unsupported;
        }
        let (wlo, whi) = ((lo + M / 2).div_euclid(M), (hi + M / 2).div_euclid(M));
        let w = self.derived(wlo, whi, &[&a]);
        let r = self.derived(I32.0, I32.1, &[&a]);
        let mut t = a.terms.clone();
        t.push((w, -M));
        t.push((r, -1));
        self.p.add(&t, -a.c, -a.c);
        self.wraps.push((r, a));
        Form::Known(Affine::var(r))
    }

    /// `e` with each wrapped variable replaced by its unwrapped form: the same residue modulo
    /// any `m` dividing 2³² (`r ≡ a`), so `rem` by such an `m` may take it instead (bounds
    /// propagation cannot see the residue through `w`'s 2³²). `None`: no wrap in `e`.
    fn unwrapped(&self, e: &Affine) -> Option<Affine> {
        let mut out = Affine::konst(e.c);
        let mut any = false;
        for &(v, c) in &e.terms {
            let term = match self.wraps.iter().find(|(r, _)| *r == v) {
                Some((_, a)) => {
                    any = true;
                    a.scale(c)?
                }
                None => Affine { terms: vec![(v, c)], c: 0 },
            };
            out = out.plus(&term)?;
        }
        any.then_some(out)
    }

    pub fn operand(&mut self, o: &Operand) -> Form {
        match o {
            Operand::Imm(Scalar::I32(c)) => Form::Known(Affine::konst(*c as i64)),
            Operand::Imm(Scalar::I1(b)) => Form::Known(Affine::konst(*b as i64)),
            Operand::Imm(Scalar::F32(_)) => Form::Unknown,
            Operand::Value(v) => self.value(*v),
        }
    }

    /// The form of an integer value.
    pub fn value(&mut self, v: Value) -> Form {
        if let Some(f) = self.memo.get(&v) {
            return f.clone();
        }
        if let Some(&(_, c)) = self.fixed.iter().find(|(w, _)| *w == v) {
            return Form::Known(Affine::konst(c));
        }
        let mut f = self.value_uncached(v);
        if matches!(f, Form::Unknown | Form::Unsupported)
            && self.k.values[v].ty == ScalarType::I32
            && let Some(free) = self.free.as_mut()
            && free.is_uniform(self.k, v)
            && (!free.params_only || is_block_leaf(self.k, v))
        {
            // A uniform value without a form is one value for both sides: a shared leaf.
            f = self.leaf(v);
        }
        self.memo.insert(v, f.clone());
        f
    }

    fn value_uncached(&mut self, v: Value) -> Form {
        let fp = self.fp;
        let k = self.k;
        if fp.is_opaque(v) {
            return Form::Unknown;
        }
        match k.values[v].def {
            ValueDef::Param(_) => self.leaf(v),
            ValueDef::RegionArg(..) => {
                if let Some((_, a)) = self.ivs.iter().find(|(x, _)| *x == v) {
                    return Form::Known(a.clone());
                }
                // An affine counter of a bound loop: its form in the loop variable (checked
                // to stay in `i32` like any other form).
                if let Some((iv, a, b)) = fp.affine_counter(v)
                    && let Some((_, f)) = self.ivs.iter().find(|(x, _)| *x == iv)
                {
                    return match f.scale(a).and_then(|s| s.plus(&Affine::konst(b))) {
                        Some(x) => self.known(x),
                        None => Form::Unsupported,
                    };
                }
                match fp.induction_iv(v) {
                    // A periodic iteration value of a bound loop: the enumerator evaluates
                    // it; not expressed here.
                    Some(iv) if self.ivs.iter().any(|(x, _)| *x == iv) => Form::Unsupported,
                    _ => self.leaf(v),
                }
            }
            ValueDef::Result(op, _) => self.result(v, &k.ops[op].kind),
        }
    }

    fn result(&mut self, v: Value, kind: &OpKind) -> Form {
        let k = self.k;
        match kind {
            OpKind::Const(Scalar::I32(c)) => Form::Known(Affine::konst(*c as i64)),
            OpKind::Const(Scalar::I1(b)) => Form::Known(Affine::konst(*b as i64)),
            OpKind::Const(_) => Form::Unknown,
            OpKind::Special(s) => self.special(*s),
            OpKind::Binary(b, x, y) => {
                let (fx, fy) = (self.operand(x), self.operand(y));
                let (ax, ay) = match (fx, fy) {
                    (Form::Unknown, _) | (_, Form::Unknown) => return Form::Unknown,
                    (Form::Known(a), Form::Known(b)) => (a, b),
                    _ => return Form::Unsupported,
                };
                if k.values[v].ty != ScalarType::I32 {
                    return Form::Unsupported;
                }
                self.binary(*b, ax, ay)
            }
            OpKind::Unary(..) if !self.fp.evaluates_unary() => Form::Unknown,
            OpKind::Unary(u, x) => match (u, self.operand(x)) {
                (_, Form::Unknown) => Form::Unknown,
                (UnOp::Neg, Form::Known(a)) => self.opt(a.scale(-1)),
                (UnOp::Not, Form::Known(a)) if k.values[v].ty == ScalarType::I32 => {
                    self.opt(a.scale(-1).map(|n| Affine { c: n.c - 1, ..n }))
                }
                (UnOp::Exp | UnOp::Sqrt, _) => Form::Unknown,
                _ => Form::Unsupported,
            },
            OpKind::Select(c, x, y) if self.free.is_some() && k.values[v].ty == ScalarType::I32 => {
                self.select(c, x, y)
            }
            OpKind::Cmp(..) | OpKind::Select(..) | OpKind::InGroup(_) => Form::Unsupported,
            _ => self.leaf(v),
        }
    }

    /// A value the enumerator cannot evaluate (a parameter, a load, `bid`, an unbound loop
    /// variable): [`Form::Unknown`], or with [`Builder::free`] a variable over its type's
    /// range (`bid` over the grid), shared by both sides when the value is uniform.
    fn leaf(&mut self, v: Value) -> Form {
        let k = self.k;
        let Some(free) = self.free.as_mut() else {
            return Form::Unknown;
        };
        if free.params_only && !is_block_leaf(k, v) {
            return Form::Unknown;
        }
        let Some((lo, hi)) = leaf_domain(k, v) else {
            return Form::Unknown;
        };
        let uniform = free.is_uniform(k, v);
        if uniform && let Some(&(_, x)) = free.shared.iter().find(|(w, _)| *w == v) {
            free.leaves.push((v, x, true));
            return Form::Known(Affine::var(x));
        }
        let x = self.p.var(lo, hi);
        let free = self.free.as_mut().expect("free leaves");
        if uniform {
            free.shared.push((v, x));
        }
        free.leaves.push((v, x, uniform));
        free.tainted.insert(x);
        Form::Known(Affine::var(x))
    }

    /// A new variable over `[lo, hi]` defined from `from`: depends on a free leaf when
    /// `from` does ([`FreeLeaves::tainted`]).
    fn derived(&mut self, lo: i64, hi: i64, from: &[&Affine]) -> usize {
        let x = self.p.var(lo, hi);
        if let Some(f) = self.free.as_mut()
            && from.iter().any(|a| a.terms.iter().any(|(v, _)| f.tainted.contains(v)))
        {
            f.tainted.insert(x);
        }
        x
    }

    fn opt(&mut self, a: Option<Affine>) -> Form {
        match a {
            Some(a) => self.known(a),
            None => Form::Unsupported,
        }
    }

    fn special(&mut self, s: Special) -> Form {
        let k = self.k;
        let [bx, by, bz] = k.block;
        let (bx, by) = (bx.max(1) as i64, by.max(1) as i64);
        let t = Affine::var(self.tid);
        let w = self.fp.warp() as i64;
        match s {
            Special::Tid(0) => self.divmod(&t, bx, false),
            Special::Tid(1) => match self.divmod(&t, bx, true) {
                Form::Known(q) => self.divmod(&q, by, false),
                f => f,
            },
            Special::Tid(_) => self.divmod(&t, bx * by, true),
            Special::LinearTid => Form::Known(t),
            Special::Lane => self.divmod(&t, w, false),
            Special::Warp => self.divmod(&t, w, true),
            Special::BlockDim(d) => {
                Form::Known(Affine::konst([bx, by, bz.max(1) as i64][d.min(2) as usize]))
            }
            Special::GridDim(_) if !self.fp.evaluates_unary() => Form::Unknown,
            Special::GridDim(d) => match k.grid_dim(d) {
                Some(g) => Form::Known(Affine::konst(g)),
                None => Form::Unknown,
            },
            Special::Bid(_) => Form::Unknown,
        }
    }

    /// Floor quotient (`quot`) or remainder of `e` by `m > 0`: `e = m·q + r`, `0 ≤ r < m`.
    pub fn divmod(&mut self, e: &Affine, m: i64, quot: bool) -> Form {
        if m <= 0 {
            return Form::Unsupported;
        }
        if !quot
            && m & (m - 1) == 0
            && m <= 1 << 32
            && let Some(u) = self.unwrapped(e)
        {
            return self.divmod(&u, m, false);
        }
        if let Some(c) = e.as_const() {
            return Form::Known(Affine::konst(if quot {
                c.div_euclid(m)
            } else {
                c.rem_euclid(m)
            }));
        }
        // ⌊(e + c)/m⌋ = ⌊(e + c')/m⌋ + k and (e + c) mod m = (e + c') mod m with
        // c = m·k + c', 0 ≤ c' < m: translated indices share their existentials
        // (docs/symbolic.md, "Translated accesses share one answer").
        let k = e.c.div_euclid(m);
        if k != 0 {
            let reduced = Affine {
                terms: e.terms.clone(),
                c: e.c.rem_euclid(m),
            };
            return match self.divmod(&reduced, m, quot) {
                Form::Known(f) if quot => self.opt(f.plus(&Affine::konst(k))),
                f => f,
            };
        }
        let (lo, hi) = e.range(self.p);
        let (qlo, qhi) = (lo.div_euclid(m), hi.div_euclid(m));
        if qlo == qhi {
            // One quotient: no existential needed.
            return Form::Known(if quot {
                Affine::konst(qlo)
            } else {
                Affine {
                    terms: e.terms.clone(),
                    c: e.c - m * qlo,
                }
            });
        }
        let mut key = e.clone();
        key.terms.sort_unstable();
        let (q, r) = match self.divs.iter().find(|d| d.0 == key && d.1 == m) {
            Some(&(_, _, q, r)) => (q, r),
            None => {
                let q = self.derived(qlo, qhi, &[e]);
                let r = self.derived(0, m - 1, &[e]);
                let mut t = e.terms.clone();
                t.push((q, -m));
                t.push((r, -1));
                self.p.add(&t, -e.c, -e.c);
                self.divs.push((key, m, q, r));
                (q, r)
            }
        };
        Form::Known(Affine::var(if quot { q } else { r }))
    }

    fn binary(&mut self, b: BinOp, x: Affine, y: Affine) -> Form {
        let (cx, cy) = (x.as_const(), y.as_const());
        if let (Some(a), Some(c)) = (cx, cy) {
            return match b.eval_i32(a, c) {
                Some(r) => Form::Known(Affine::konst(r)),
                None => Form::Unknown,
            };
        }
        let f = self.direct(b, &x, &y);
        if f != Form::Unsupported {
            return f;
        }
        self.table(b, &x, &y)
    }

    /// The affine and bit forms of [`Builder::binary`] (`Unsupported` where none applies).
    fn direct(&mut self, b: BinOp, x: &Affine, y: &Affine) -> Form {
        let (x, y) = (x.clone(), y.clone());
        let (cx, cy) = (x.as_const(), y.as_const());
        match b {
            BinOp::Add => self.opt(x.plus(&y)),
            BinOp::Sub => self.opt(y.scale(-1).and_then(|ny| x.plus(&ny))),
            BinOp::Mul => match (cx, cy) {
                (Some(c), _) => self.opt(y.scale(c)),
                (_, Some(c)) => self.opt(x.scale(c)),
                _ => Form::Unsupported,
            },
            BinOp::Div | BinOp::Rem => match cy {
                Some(0) => Form::Unknown,
                Some(m) if m > 0 => self.divmod(&x, m, b == BinOp::Div),
                _ => Form::Unsupported,
            },
            BinOp::Shl => match cy {
                Some(s) if (0..31).contains(&s) => self.opt(x.scale(1 << s)),
                _ => Form::Unsupported,
            },
            BinOp::Shr => match cy {
                Some(s) if (0..31).contains(&s) => self.divmod(&x, 1 << s, true),
                _ => Form::Unsupported,
            },
            BinOp::And if cy.is_some_and(|c| c >= 0 && (c + 1) & c == 0) => {
                self.divmod(&x, cy.unwrap_or(0) + 1, false)
            }
            // `x & −2^k` clears the low k bits: 2^k·⌊x / 2^k⌋ in two's complement, any x.
            BinOp::And if cy.is_some_and(|c| c < 0 && c > I32.0 && (-c) & (-c - 1) == 0) => {
                let m = -cy.unwrap_or(-1);
                match self.divmod(&x, m, true) {
                    Form::Known(q) => self.opt(q.scale(m)),
                    f => f,
                }
            }
            BinOp::And | BinOp::Or | BinOp::Xor => self.bitwise(b, &x, &y),
            BinOp::Min | BinOp::Max if self.free.is_some() => self.min_max(b == BinOp::Min, &x, &y),
            BinOp::Min | BinOp::Max => Form::Unsupported,
        }
    }

    /// `min`/`max` of two forms (with free leaves only, so that no other question changes):
    /// `z ≤ x, z ≤ y, z ≥ x − M·s, z ≥ y − M·(1 − s)` for `min` over a 0/1 selector `s`, with
    /// `M` the width of both intervals together (the mirror for `max`); exact over the
    /// integers.
    fn min_max(&mut self, min: bool, x: &Affine, y: &Affine) -> Form {
        let ((xl, xh), (yl, yh)) = (x.range(self.p), y.range(self.p));
        if (min && xh <= yl) || (!min && xl >= yh) {
            return Form::Known(x.clone());
        }
        if (min && yh <= xl) || (!min && yl >= xh) {
            return Form::Known(y.clone());
        }
        let (lo, hi) = if min { (xl.min(yl), xh.min(yh)) } else { (xl.max(yl), xh.max(yh)) };
        let m = xh.max(yh) - xl.min(yl);
        let z = self.derived(lo, hi, &[x, y]);
        let s = self.derived(0, 1, &[x, y]);
        let sign = if min { 1 } else { -1 };
        let big = i64::MAX / 4;
        for (side, sel, off) in [(x, m, 0), (y, -m, -m)] {
            // sign·(z − side) ≤ 0 and sign·(z − side) + sel·s ≥ off.
            let Some(d) = side.scale(-1).and_then(|n| Affine::var(z).plus(&n)).and_then(|d| d.scale(sign)) else {
                return Form::Unsupported;
            };
            d.constrain(self.p, -big, 0);
            let Some(e) = d.plus(&Affine { terms: vec![(s, sel)], c: 0 }) else {
                return Form::Unsupported;
            };
            e.constrain(self.p, off, big);
        }
        self.known(Affine::var(z))
    }

    /// `select c, x, y` (with free leaves only, as `min`/`max`): `z` over a 0/1 selector
    /// `s` that stands for `c`, each constraint `lo ≤ d ≤ hi` of `c` ([`Builder::guard`])
    /// relaxed by `M·(1 − s)` and each of its negation's by `M·s`, and `|z − x| ≤ M·(1 − s)`,
    /// `|z − y| ≤ M·s`, every `M` just wide enough that a relaxed constraint always holds.
    /// Exact over the integers: `s = 1` iff `c` holds, then `z = x`, else `z = y`. A
    /// condition or negation without constraints (`ne`, `or`, a value without a form):
    /// unsupported.
    fn select(&mut self, c: &Operand, x: &Operand, y: &Operand) -> Form {
        let (Form::Known(x), Form::Known(y)) = (self.operand(x), self.operand(y)) else {
            return Form::Unsupported;
        };
        // "May execute" is no condition here: whether the guard encoding said it, with the
        // note it makes for guards undone.
        let before = std::mem::take(&mut self.free.as_mut().expect("free leaves").unknown_guard);
        let (when, unless) = (self.guard(c, true), self.guard(c, false));
        let free = self.free.as_mut().expect("free leaves");
        if std::mem::replace(&mut free.unknown_guard, before) {
            return Form::Unsupported;
        }
        let (when, unless) = match (when, unless) {
            (Guard::Always, _) => return Form::Known(x),
            (_, Guard::Always) => return Form::Known(y),
            (Guard::When(a), Guard::When(b)) => (a, b),
            _ => return Form::Unsupported,
        };
        let mut from: Vec<&Affine> = vec![&x, &y];
        from.extend(when.iter().chain(&unless).map(|(d, _, _)| d));
        let s = self.derived(0, 1, &from);
        let ((xl, xh), (yl, yh)) = (x.range(self.p), y.range(self.p));
        let z = self.derived(xl.min(yl), xh.max(yh), &from);
        let zx = x.scale(-1).and_then(|n| Affine::var(z).plus(&n));
        let zy = y.scale(-1).and_then(|n| Affine::var(z).plus(&n));
        let (Some(zx), Some(zy)) = (zx, zy) else {
            return Form::Unsupported;
        };
        let mut cons: Vec<(Affine, i64, i64, bool)> = vec![(zx, 0, 0, true), (zy, 0, 0, false)];
        cons.extend(when.into_iter().map(|(d, lo, hi)| (d, lo, hi, true)));
        cons.extend(unless.into_iter().map(|(d, lo, hi)| (d, lo, hi, false)));
        for (d, lo, hi, holds) in cons {
            if self.relaxed(&d, (lo, hi), s, holds).is_none() {
                return Form::Unsupported;
            }
        }
        self.known(Affine::var(z))
    }

    /// `lo ≤ d ≤ hi` where the selector `s` is 1 (`holds`) or 0 (`!holds`), always true
    /// otherwise: each side `d` may pass relaxed by `M·(1 − s)` (`holds`) or `M·s`, `M` the
    /// most `d` may pass it by. `None`: an overflow.
    fn relaxed(&mut self, d: &Affine, (lo, hi): (i64, i64), s: usize, holds: bool) -> Option<()> {
        let (dl, dh) = d.range(self.p);
        let big = i64::MAX / 4;
        let with = |m: i64| d.plus(&Affine { terms: vec![(s, m)], c: 0 });
        let (over, under) = (dh.checked_sub(hi)?, lo.checked_sub(dl)?);
        if over > 0 {
            // holds: d + M·s ≤ hi + M; else d − M·s ≤ hi.
            let (e, top) = if holds { (with(over)?, hi.checked_add(over)?) } else { (with(-over)?, hi) };
            e.constrain(self.p, -big, top);
        }
        if under > 0 {
            // holds: d − M·s ≥ lo − M; else d + M·s ≥ lo.
            let (e, bottom) = if holds { (with(-under)?, lo.checked_sub(under)?) } else { (with(under)?, lo) };
            e.constrain(self.p, bottom, big);
        }
        Some(())
    }

    /// An operation of a constant and a value with at most [`TABLE`] possible values (`shl
    /// 1, %i`, `shr 128, %i`, `min %i, 3` for a loop variable `%i`), as a table over the
    /// value `e ∈ [lo, hi]` (its interval over the boxes): one 0/1 *step* variable
    /// `y_v = [e ≥ v]` per `v ∈ (lo, hi]` where the result changes, tied to `e` by
    /// `e ≥ lo + (v − lo)·y_v` and `e ≤ v − 1 + (hi − v + 1)·y_v`, and the result
    /// `f(lo) + Σ (f(v) − f(v − 1))·y_v` (a telescoping sum: `f(e)` exactly), with `f` the
    /// IR's own evaluation (`BinOp::eval_i32`), wrap-around included. Bounds propagation
    /// alone fixes every step variable once `e` is fixed and narrows `e` once a step
    /// variable is fixed, so branching on them splits the loop key (docs/symbolic.md,
    /// "Tables"). A value `f` has none for (division by zero) makes the form unsupported.
    fn table(&mut self, b: BinOp, x: &Affine, y: &Affine) -> Form {
        let (e, konst, e_first) = match (x.as_const(), y.as_const()) {
            (None, Some(c)) => (x, c, true),
            (Some(c), None) => (y, c, false),
            _ => return Form::Unsupported,
        };
        if !self.tables && !FORCE_TABLES.with(|f| f.get()) {
            for &(v, _) in &e.terms {
                if !self.wanted.contains(&v) {
                    self.wanted.push(v);
                }
            }
            return Form::Unsupported;
        }
        let (lo, hi) = e.range(self.p);
        if hi < lo || hi - lo >= TABLE {
            return Form::Unsupported;
        }
        let f = |v: i64| if e_first { b.eval_i32(v, konst) } else { b.eval_i32(konst, v) };
        let Some(vals) = (lo..=hi).map(f).collect::<Option<Vec<i64>>>() else {
            return Form::Unsupported;
        };
        if self.relax {
            let (min, max) = vals.iter().fold((i64::MAX, i64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            return Form::Known(Affine::var(self.derived(min, max, &[e])));
        }
        let mut out = Affine::konst(vals[0]);
        for (i, w) in vals.windows(2).enumerate() {
            if w[1] == w[0] {
                continue;
            }
            let v = lo + i as i64 + 1;
            let step = self.derived(0, 1, &[e]);
            // y_v = 1 ⇒ e ≥ v; y_v = 0 ⇒ e ≤ v − 1 (the other bounds are e's own).
            let mut t = e.terms.clone();
            t.push((step, -(v - lo)));
            self.p.add(&t, lo - e.c, i64::MAX / 4);
            let mut t = e.terms.clone();
            t.push((step, -(hi - v + 1)));
            self.p.add(&t, i64::MIN / 4, v - 1 - e.c);
            out.terms.push((step, w[1] - w[0]));
        }
        self.known(out)
    }

    /// The bits of a non-negative value below 2^31: `n` 0/1 variables (or constants).
    fn bits(&mut self, e: &Affine) -> Option<Vec<Affine>> {
        if let Some(c) = e.as_const() {
            return (c >= 0).then(|| (0..31).map(|i| Affine::konst((c >> i) & 1)).collect());
        }
        let (lo, hi) = e.range(self.p);
        if lo < 0 || hi > i32::MAX as i64 {
            return None;
        }
        let n = 64 - (hi as u64).leading_zeros() as usize;
        let mut t = e.terms.clone();
        let mut out = Vec::with_capacity(31);
        for i in 0..n {
            let b = self.derived(0, 1, &[e]);
            t.push((b, -(1i64 << i)));
            out.push(Affine::var(b));
        }
        self.p.add(&t, -e.c, -e.c);
        out.resize(31, Affine::konst(0));
        Some(out)
    }

    /// `and`/`or`/`xor` through bits: per bit, `z = x ∧ y` with `z ≤ x`, `z ≤ y`,
    /// `z ≥ x + y − 1` (constants fold).
    fn bitwise(&mut self, b: BinOp, x: &Affine, y: &Affine) -> Form {
        let (Some(bx), Some(by)) = (self.bits(x), self.bits(y)) else {
            return Form::Unsupported;
        };
        let mut out = Affine::konst(0);
        for (i, (a, c)) in bx.iter().zip(&by).enumerate() {
            let z = match (a.as_const(), c.as_const()) {
                (Some(p), Some(q)) => Affine::konst(p & q),
                (Some(0), _) | (_, Some(0)) => Affine::konst(0),
                (Some(_), _) => c.clone(),
                (_, Some(_)) => a.clone(),
                _ => {
                    let z = self.derived(0, 1, &[a, c]);
                    let zf = Affine::var(z);
                    let neg = |f: &Affine| f.scale(-1).unwrap_or_else(|| Affine::konst(0));
                    for side in [a, c] {
                        if let Some(d) = zf.plus(&neg(side)) {
                            d.constrain(self.p, i64::MIN / 4, 0);
                        }
                    }
                    if let Some(d) = zf.plus(&neg(a)).and_then(|d| d.plus(&neg(c))) {
                        d.constrain(self.p, -1, i64::MAX / 4);
                    }
                    zf
                }
            };
            let bit = match b {
                BinOp::And => Some(z),
                BinOp::Or => a.plus(c).and_then(|s| z.scale(-1).and_then(|n| s.plus(&n))),
                _ => a.plus(c).and_then(|s| z.scale(-2).and_then(|n| s.plus(&n))),
            };
            match bit.and_then(|bit| bit.scale(1 << i)).and_then(|s| out.plus(&s)) {
                Some(o) => out = o,
                None => return Form::Unsupported,
            }
        }
        self.known(out)
    }

    /// The condition under which a thread executes in the `then` arm (`want`) or the `else`
    /// arm (`!want`) of an `if` on `c`, with the enumerator's three-valued logic: a guard
    /// excludes a thread only where it evaluates to the other arm's value.
    pub fn guard(&mut self, c: &Operand, want: bool) -> Guard {
        let v = match c {
            Operand::Imm(Scalar::I1(b)) => {
                return if *b == want {
                    Guard::Always
                } else {
                    Guard::When(vec![(Affine::konst(0), 1, 1)])
                };
            }
            Operand::Imm(_) => return self.may_execute(),
            Operand::Value(v) => *v,
        };
        let fp = self.fp;
        let k = self.k;
        if fp.is_opaque(v) {
            return self.may_execute();
        }
        let ValueDef::Result(op, _) = k.values[v].def else {
            return match self.value(v) {
                Form::Unknown => self.may_execute(),
                _ => Guard::Unsupported,
            };
        };
        let both = |g: Guard, h: Guard| match (g, h) {
            (Guard::Unsupported, _) | (_, Guard::Unsupported) => Guard::Unsupported,
            (Guard::Always, x) | (x, Guard::Always) => x,
            (Guard::When(mut a), Guard::When(b)) => {
                a.extend(b);
                Guard::When(a)
            }
        };
        let either = |g: Guard, h: Guard| match (g, h) {
            (Guard::Always, _) | (_, Guard::Always) => Guard::Always,
            _ => Guard::Unsupported,
        };
        let bool_ty = k.values[v].ty == ScalarType::I1;
        match &k.ops[op].kind {
            OpKind::Const(Scalar::I1(b)) => self.guard(&Operand::Imm(Scalar::I1(*b)), want),
            OpKind::Binary(BinOp::And, a, b) if bool_ty => {
                let (ga, gb) = (self.guard(a, want), self.guard(b, want));
                if want { both(ga, gb) } else { either(ga, gb) }
            }
            OpKind::Binary(BinOp::Or, a, b) if bool_ty => {
                let (ga, gb) = (self.guard(a, want), self.guard(b, want));
                if want { either(ga, gb) } else { both(ga, gb) }
            }
            OpKind::Unary(UnOp::Not, a) if bool_ty => self.guard(a, !want),
            OpKind::InGroup(g) => {
                let gd = &k.groups[*g];
                let (lo, hi) = (gd.lo as i64, gd.hi as i64 - 1);
                let t = Affine::var(self.tid);
                let threads = k.threads().max(1) as i64;
                if want {
                    Guard::When(vec![(t, lo, hi)])
                } else if lo > hi {
                    Guard::Always
                } else if lo <= 0 {
                    // Outside a group that starts at thread 0: the threads after it (the
                    // consumers of a producer group), one constraint.
                    Guard::When(vec![(t, hi + 1, threads - 1)])
                } else if hi >= threads - 1 {
                    Guard::When(vec![(t, 0, lo - 1)])
                } else {
                    // Both sides of a group in the middle: a disjunction.
                    Guard::Unsupported
                }
            }
            OpKind::Cmp(p, x, y) => {
                let (fx, fy) = (self.operand(x), self.operand(y));
                let (ax, ay) = match (fx, fy) {
                    (Form::Unknown, _) | (_, Form::Unknown) => return self.may_execute(),
                    (Form::Known(a), Form::Known(b)) => (a, b),
                    _ => return Guard::Unsupported,
                };
                let Some(d) = ay.scale(-1).and_then(|n| ax.plus(&n)) else {
                    return Guard::Unsupported;
                };
                // The predicate on d = x − y, or its negation.
                let (big, small) = (i64::MAX / 4, i64::MIN / 4);
                let p = if want { *p } else { negate(*p) };
                match p {
                    CmpPred::Eq => Guard::When(vec![(d, 0, 0)]),
                    CmpPred::Lt => Guard::When(vec![(d, small, -1)]),
                    CmpPred::Le => Guard::When(vec![(d, small, 0)]),
                    CmpPred::Gt => Guard::When(vec![(d, 1, big)]),
                    CmpPred::Ge => Guard::When(vec![(d, 0, big)]),
                    CmpPred::Ne => Guard::Unsupported,
                }
            }
            _ => match self.value(v) {
                Form::Unknown => self.may_execute(),
                _ => Guard::Unsupported,
            },
        }
    }

    /// A guard on a value without a form: "may execute", as the enumerator evaluates it
    /// (noted in [`Builder::free`]).
    fn may_execute(&mut self) -> Guard {
        if let Some(f) = self.free.as_mut() {
            f.unknown_guard = true;
        }
        Guard::Always
    }
}

fn negate(p: CmpPred) -> CmpPred {
    match p {
        CmpPred::Eq => CmpPred::Ne,
        CmpPred::Ne => CmpPred::Eq,
        CmpPred::Lt => CmpPred::Ge,
        CmpPred::Le => CmpPred::Gt,
        CmpPred::Gt => CmpPred::Le,
        CmpPred::Ge => CmpPred::Lt,
    }
}
