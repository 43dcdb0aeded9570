//! Whether two shared-memory accesses, executed at related loop iterations, may touch a
//! common byte (and whether two mbarrier indices are always equal).
//!
//! The async model needs this to decide whether a consumer in iteration `k` may observe a
//! copy issued `d` iterations earlier (seed 003: the copy into slot `(k+2) mod 3` never
//! aliases the read of slot `k mod 3` in the same iteration, but aliases the read two
//! iterations later).
//!
//! **Relation.** The earlier access `X` and the later access `Y` are related loop by loop
//! through [`IterTag`]s: for a `for` loop enclosing both, `Dist(d)` says `X` ran `d`
//! iterations before `Y`'s iteration; `Pre(j)` says `Y` runs in the `j`-th iteration (0-based)
//! of an instance of the loop entered after `X` ran (`X`'s iteration, when the loop encloses
//! it too, is one of an earlier instance: free); `Unknown` on a loop enclosing both, when every loop
//! enclosing that one is tagged `Dist(0)` (the same instance of it), says `X` ran in an
//! earlier iteration than `Y` (some distance `d >= 1`: the in-flight dataflow saturates
//! `Dist` into `Unknown`), so pairs of iterations `x < y` are enumerated; no tag, or any other
//! `Unknown`, leaves the iterations free.
//!
//! **Method (exact enumeration over bounded domains).** Each free iteration variable ranges
//! over the loop's actual iterations when its bounds are constants and its trip count is at
//! most [`MAX_TRIPS`]; otherwise over one period of the index expressions, which is sound only
//! when every index depends on that induction variable periodically (through `rem` by
//! constants, polynomially inside). A constant loop of up to [`MAX_SYMBOLIC_TRIPS`]
//! iterations that is not periodic in the indices (a thread's copy loop over a tile) is
//! listed for the symbolic engine only: its answer is exact, and without one the query is
//! conservative as before. Threads range over the whole block. Anything else (an
//! index read from memory, an iteration value, a scalar parameter, an induction variable
//! used outside `rem` in a loop of unknown length) makes the answer conservative: *may
//! overlap*, *not always equal*. Pinned buffers are compared by byte ranges; distinct
//! unpinned buffers never alias.
//!
//! Complexity: O(A · T · E) per query, where A ≤ [`MAX_ASSIGNMENTS`] is the number of
//! iteration assignments enumerated, T the block's threads (per-thread footprints only) and E
//! the index expression size; collective footprints cost O(A · R) with R the view's rows.

use rustc_hash::FxHashMap as HashMap;

use crate::ir::*;
use crate::ir::arith::{floor_div, gcd, lcm};

/// Why a query was answered conservatively (W0314).
const NOT_ENUMERABLE: &str = "a loop variable its indices depend on is neither enumerable (constant bounds, at most 64 iterations) nor periodic in them";
const OVER_BUDGET: &str = "enumerating the related iterations and threads exceeds the analysis budget";
const UNKNOWN_INDEX: &str = "an index is not known statically (read from memory, an iteration value, a scalar parameter) or is outside its buffer";

/// Loops with constant bounds and at most this many iterations are enumerated exactly.
pub const MAX_TRIPS: i64 = 64;
/// Loops with constant bounds and at most this many iterations whose indices are not
/// periodic in them are listed for the symbolic engine (a progression: its search does not
/// grow with the trip count; the listed pairs of an `Unknown` tag do, quadratically, hence
/// the bound); a query it does not decide is conservative for them, as for a longer loop
/// (NOT_ENUMERABLE).
pub const MAX_SYMBOLIC_TRIPS: i64 = 512;
/// Upper bound on the number of iteration assignments one query enumerates.
pub const MAX_ASSIGNMENTS: usize = 4096;
/// Upper bound on assignments times enumerated threads in one query (beyond: conservative).
pub const MAX_WORK: usize = 1 << 18;
/// Periods above this make a query conservative.
pub const MAX_PERIOD: i64 = 64;

/// How the iteration of a loop relates between the earlier access and the later one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IterTag {
    /// The earlier access ran `d` iterations before the later one's (same loop instance).
    Dist(u32),
    /// The later access runs in the `j`-th iteration of a loop entered after the earlier
    /// access (the earlier access is outside this instance of the loop).
    Pre(u32),
    /// The earlier access ran in a loop that has since finished, `d` iterations before that
    /// loop instance's last iteration (a `for` with constant bounds: a prologue filling
    /// several slots). Only on loops that enclose the earlier access and not the later one.
    Last(u32),
    /// `PreLast(j, d)`: on a `for` with constant bounds enclosing both accesses, in
    /// different instances of it: the later access runs in its `j`-th iteration, the earlier
    /// one ran `d` iterations before the last iteration of the previous instance (copies
    /// issued by an inner loop of a pipelined outer loop, consumed in the next outer
    /// iteration). The enclosing loops' tags say which outer iteration that was.
    PreLast(u32, u32),
    /// Nothing is known beyond what the enclosing loops' tags imply: for a loop enclosing
    /// both accesses, in the same instance of it (every loop enclosing it tagged `Dist(0)`),
    /// the earlier access ran in an earlier iteration (`Dist(d)` for some unknown `d >= 1`);
    /// otherwise the two iterations are unrelated.
    Unknown,
}

/// Context for overlap queries: the kernel, its parent links and the warp width.
pub struct Overlap<'k> {
    pub k: &'k Kernel,
    pub parents: &'k Parents,
    pub warp: u32,
    /// Enclosing `for` loops of each op, outermost first (cached).
    loops: HashMap<Op, Vec<Op>>,
    /// Value ranges: which polynomials provably never wrap around i32.
    ranges: crate::ir::ranges::Ranges,
    /// The values among `Env` keys (induction variables) each value depends on.
    deps: std::cell::RefCell<HashMap<Value, Vec<Value>>>,
    /// Byte sets of an access under the values of the variables it depends on (see
    /// [`Overlap::bytes_memo`]); shared by all queries.
    memo: HashMap<BytesKey, Option<ByteSet>>,
    /// Queries answered conservatively: (earlier op, later op, reason). Reported as W0314
    /// by [`Overlap::conservative_warnings`].
    pub conservative: std::cell::RefCell<Vec<(Op, Op, &'static str)>>,
    /// Whether queries are first decided symbolically (`symbolic::overlap`); off, every
    /// query enumerates (the oracle of `tests/symbolic.rs`).
    pub symbolic: bool,
    /// Queries the symbolic engine answered.
    pub answered: std::cell::Cell<usize>,
    /// Whether the query in progress listed a constant loop of more than [`MAX_TRIPS`]
    /// iterations (only the symbolic engine may decide it: [`MAX_SYMBOLIC_TRIPS`]).
    wide: std::cell::Cell<bool>,
    /// The symbolic engine's sides and answers, shared by every query of this dataflow
    /// (`symbolic::overlap::Store`).
    sym: std::cell::RefCell<crate::analysis::symbolic::overlap::Store>,
    /// Periods of values in induction variables (`Overlap::period`), by variable.
    periods: std::cell::RefCell<HashMap<Value, HashMap<Value, Period>>>,
    /// Whether the per-dimension test (`Overlap::dims_apart`) may answer "apart" before
    /// the symbolic engine is asked (default on; off under `SMEMSYNC_OVERLAP_NO_DIMS`, and in
    /// the tests' oracle).
    pub dims: bool,
    /// Queries the per-dimension test answered.
    pub dims_answered: std::cell::Cell<usize>,
    /// Footprint boxes, built on the per-dimension test's first use: they say that no
    /// index of an access leaves its dimension (`analysis::boxes`).
    boxes: Option<crate::analysis::boxes::Boxes<'k>>,
    /// [`Overlap::dim_plan`]'s memo, by memref and per-thread index operands.
    dim_plans: HashMap<(MemRef, Option<Vec<u64>>), Option<DimPlan>>,
    /// [`Overlap::access_prep`]'s memo, by memref and per-thread index operands.
    access_preps: HashMap<(MemRef, Option<Vec<u64>>), std::rc::Rc<AccessPrep>>,
    /// [`Overlap::side_leaves`]' memo, by the side's index operands ([`operand_key`]).
    leaves: std::cell::RefCell<HashMap<Vec<u64>, std::rc::Rc<[Value]>>>,
    /// Whether the in-flight question's block leaves are read through that memo (default
    /// on; off under `SMEMSYNC_OVERLAP_NO_LEAF_MEMO`, and in the test that compares both).
    pub leaf_memo: bool,
    /// [`Overlap::prepared`]'s memo, by [`PrepKey`].
    preps: HashMap<PrepKey, std::rc::Rc<Prepared>>,
    /// Whether queries are prepared through the memo (default on; off under
    /// `SMEMSYNC_OVERLAP_NO_PREP`, and in the tests that compare both ways).
    pub prep_memo: bool,
}

/// What a query reads of one of its accesses before any answer: the operands its footprint
/// depends on, the induction variables those depend on, and their periods in each loop
/// variable asked so far (`Overlap::periodic_in`, a function of the operands).
struct AccessPrep {
    operands: Vec<Operand>,
    deps: Vec<Value>,
    periods: std::cell::RefCell<HashMap<Value, Option<i64>>>,
}

/// The memo key of a query's preparation: the innermost `for` loop of each side (which
/// fixes its whole nest), the tags, the common period of both sides' operands in each loop
/// variable of the two nests (the only thing `Overlap::vars` reads of the operands, through
/// `Overlap::domain`), and whether the symbolic engine is on (the trip cap `domain` uses).
type PrepKey = (Option<Op>, Option<Op>, Vec<(Op, IterTag)>, Vec<Option<i64>>, bool);

/// A query's preparation (`Overlap::vars`, partitioned), shared by every query with one
/// [`PrepKey`]: `None` where some loop has no enumerable domain.
struct Prepared {
    vars: Option<PreparedVars>,
    /// Whether a constant loop longer than [`MAX_TRIPS`] was listed (`Overlap::wide`).
    wide: bool,
}

/// The variables of a prepared query: binding both sides, X only, Y only (each in the order
/// `Overlap::vars` builds them), the fixed values, whether some domain is empty, and per
/// variable (in that order) the distinct values it gives each side (`Overlap::side_evals`).
struct PreparedVars {
    both: Vec<Var>,
    only_x: Vec<Var>,
    only_y: Vec<Var>,
    ex: Env,
    ey: Env,
    empty: bool,
    counts: Vec<(usize, usize)>,
    /// The variables as the symbolic engine takes them (`Overlap::iters`), on first use.
    iters: std::cell::OnceCell<Option<Vec<crate::analysis::symbolic::overlap::Iter>>>,
}

impl PreparedVars {
    /// An upper bound on the distinct environments one side of a query evaluates: the
    /// product, over the variables (`all`, in the order of `counts`) binding an induction
    /// variable that side's indices depend on (`deps`), of that side's distinct values.
    fn side_evals(&self, all: &[&Var], deps: &[Value], x_side: bool) -> usize {
        all.iter()
            .zip(&self.counts)
            .filter(|(v, _)| (if x_side { v.x } else { v.y }).is_some_and(|iv| deps.contains(&iv)))
            .map(|(_, c)| if x_side { c.0 } else { c.1 })
            .fold(1, usize::saturating_mul)
    }
}

/// The distinct values variable `v` gives one side: the pairs of distinct domain values with
/// `i < j` (all but the last value on the earlier side, all but the first on the later one),
/// or every pair, counted without listing them; a listed domain's distinct side values.
fn side_count(v: &Var, x_side: bool) -> usize {
    match &v.shape {
        Shape::Pairs(dom, true) => dom.len().saturating_sub(1).max(1),
        Shape::Pairs(dom, false) => dom.len().max(1),
        Shape::Listed => {
            let mut vals: Vec<i64> = v.domain.iter().map(|(a, b)| if x_side { *a } else { *b }).collect();
            vals.sort_unstable();
            vals.dedup();
            vals.len().max(1)
        }
    }
}

/// How one root dimension of an access is selected: the constant window `[off, off + len)`
/// of the root dimension it spans, and the index that picks one position of the window (a
/// view's `At` index or a per-thread index; `None`: the whole window), with whether that
/// index may differ between threads (syntactically).
#[derive(Clone, Debug)]
struct DimSel {
    off: i64,
    len: i64,
    kept: bool,
    index: Option<Operand>,
    thread: bool,
}

/// The [`DimSel`] of each root dimension of one access.
type DimPlan = std::rc::Rc<[DimSel]>;

/// Joint assignments above this are not tried by [`Overlap::dims_apart`].
const MAX_DIM_ASSIGNMENTS: usize = 64;

/// Whether `SMEMSYNC_OVERLAP_NO_DIMS` is set: the per-dimension test answers nothing (for
/// measuring it and as its oracle).
fn no_dims_env() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_OVERLAP_NO_DIMS").is_some())
}

/// Whether `SMEMSYNC_OVERLAP_NO_PREP` is set: each query prepares its variables itself
/// instead of through [`Overlap::prepared`]'s memo (for measuring it and as its oracle).
fn no_prep_env() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_OVERLAP_NO_PREP").is_some())
}

/// Sorted, merged byte intervals of a footprint, shared between cached queries.
type ByteSet = std::rc::Rc<Vec<(u64, u64)>>;

/// An access (its op, memref and per-thread indices) and the values of the induction
/// variables its footprint depends on.
type BytesKey = (Op, MemRef, Option<Vec<u64>>, Vec<(Value, i64)>);

/// A hashable encoding of an index operand (values by id, immediates by bits).
fn operand_key(o: &Operand) -> u64 {
    match o {
        Operand::Value(v) => v.index() as u64,
        Operand::Imm(Scalar::I32(c)) => (1 << 62) | (*c as u32 as u64),
        Operand::Imm(Scalar::I1(b)) => (2 << 62) | *b as u64,
        Operand::Imm(Scalar::F32(f)) => (3 << 62) | f.to_bits() as u64,
    }
}

/// The sorted union of two sorted lists of values, each value once.
fn union_sorted(a: &[Value], b: &[Value]) -> Vec<Value> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                i += 1;
                j += 1;
                x
            }
            (Some(&x), Some(&y)) if x < y => {
                i += 1;
                x
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (_, Some(&y)) => {
                j += 1;
                y
            }
            (None, None) => unreachable!(),
        };
        out.push(next);
    }
    out
}

/// Whether `SMEMSYNC_OVERLAP_NO_LEAF_MEMO` is set: the in-flight question's block leaves
/// are then walked for both sides' operands together on every question
/// ([`Overlap::side_leaves`] off; read once per process).
fn no_leaf_memo_env() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_OVERLAP_NO_LEAF_MEMO").is_some())
}

/// Values of induction variables: a handful per query, so a small vector beats hashing.
#[derive(Clone, Debug, Default)]
struct Env(Vec<(Value, i64)>);

impl Env {
    fn new() -> Env {
        Env(Vec::new())
    }
    fn get(&self, v: &Value) -> Option<&i64> {
        self.0.iter().find(|(k, _)| k == v).map(|(_, x)| x)
    }
    fn insert(&mut self, v: Value, x: i64) {
        match self.0.iter_mut().find(|(k, _)| *k == v) {
            Some(e) => e.1 = x,
            None => self.0.push((v, x)),
        }
    }
}

/// A free iteration variable: the induction variable it binds on each side and its domain,
/// a list of (value for the earlier access, value for the later access) pairs.
struct Var {
    /// The induction variable bound for the earlier access.
    x: Option<Value>,
    /// The induction variable bound for the later access.
    y: Option<Value>,
    domain: Vec<(i64, i64)>,
    /// How `domain` was formed (for the symbolic engine).
    shape: Shape,
}

impl Var {
    /// A variable with no value: the pair of executions it relates does not exist.
    const NONE: Var = Var {
        x: None,
        y: None,
        domain: Vec::new(),
        shape: Shape::Listed,
    };

    /// One loop variable on both sides, X's iteration earlier than Y's where the domain is
    /// exact (every pair `(a, b)` of domain values, `a` before `b`), any pair otherwise.
    fn earlier_pairs(iv: Value, dom: Vec<i64>, exact: bool) -> Var {
        let mut pairs = Vec::new();
        for (i, a) in dom.iter().enumerate() {
            for (j, b) in dom.iter().enumerate() {
                if !exact || i < j {
                    pairs.push((*a, *b));
                }
            }
        }
        Var {
            x: Some(iv),
            y: Some(iv),
            domain: pairs,
            shape: Shape::Pairs(dom, exact),
        }
    }
}

/// How a [`Var`]'s domain relates the two sides.
#[derive(Clone, Debug)]
enum Shape {
    /// One side only, or the listed pairs (`(x_i, y_i)`: a fixed distance).
    Listed,
    /// Every pair `(v_i, v_j)` of these values with `i < j` (`lt`) or any `i, j`.
    Pairs(Vec<i64>, bool),
}

#[derive(Copy, Clone, PartialEq, Debug)]
enum Period {
    /// Does not depend on the variable.
    Indep,
    /// `Poly(p, q)`: a polynomial in the variable plus periodic functions of period `p`,
    /// floor-divided by constants of product `q` (unbounded, not periodic): for every
    /// `c >= 1`, `x(k + lcm(p, q·c)) ≡ x(k) (mod c)`, so `rem x, c` has period `lcm(p, q·c)`
    /// (the same algebra as `footprint::Dep`).
    Poly(i64, i64),
    /// Periodic with this period.
    Periodic(i64),
    /// Neither: the query must be conservative.
    Bad,
}


impl<'k> Overlap<'k> {
    /// The value ranges of the kernel (one [`crate::ir::ranges::Ranges`] pass, shared).
    pub fn ranges(&self) -> &crate::ir::ranges::Ranges {
        &self.ranges
    }

    pub fn new(k: &'k Kernel, warp: u32) -> Self {
        Overlap {
            k,
            parents: k.parents(),
            warp,
            loops: HashMap::default(),
            ranges: crate::ir::ranges::Ranges::new(k),
            deps: Default::default(),
            memo: HashMap::default(),
            conservative: Default::default(),
            symbolic: true,
            answered: Default::default(),
            wide: Default::default(),
            sym: Default::default(),
            periods: Default::default(),
            dims: !no_dims_env(),
            dims_answered: Default::default(),
            boxes: None,
            dim_plans: HashMap::default(),
            access_preps: HashMap::default(),
            leaves: Default::default(),
            leaf_memo: !no_leaf_memo_env(),
            preps: HashMap::default(),
            prep_memo: !no_prep_env(),
        }
    }

    /// The induction variables (block arguments of `for` bodies) an operand depends on,
    /// sorted.
    fn iv_deps(&self, o: Operand) -> Vec<Value> {
        let Operand::Value(v) = o else {
            return Vec::new();
        };
        if let Some(d) = self.deps.borrow().get(&v) {
            return d.clone();
        }
        let d = match self.k.values[v].def {
            ValueDef::Result(op, _) => {
                let mut acc: Vec<Value> = Vec::new();
                self.k.ops[op]
                    .kind
                    .for_each_operand(|x| acc.extend(self.iv_deps(x)));
                acc.sort();
                acc.dedup();
                acc
            }
            // A recognized iteration value is a function of its loop's variable.
            _ => match self.ranges.inductions.get(v) {
                Some(ind) => vec![ind.iv],
                None => vec![v],
            },
        };
        self.deps.borrow_mut().insert(v, d.clone());
        d
    }

    /// [`Overlap::bytes`], memoized on the values of the induction variables the access's
    /// indices depend on: a query enumerating `x` and `y` iterations together evaluates each
    /// side once per distinct value of its own variables.
    fn bytes_memo(
        &mut self,
        op: Op,
        mem: MemRef,
        fp: &Footprint,
        env: &Env,
    ) -> Option<ByteSet> {
        let ix = match fp {
            Footprint::PerThread(ix) => Some(ix.clone()),
            Footprint::Collective { .. } => None,
        };
        let mut dv: Vec<Value> = Vec::new();
        for o in self.index_operands(mem, ix.as_deref().unwrap_or(&[])) {
            dv.extend(self.iv_deps(o));
        }
        dv.sort();
        dv.dedup();
        let vals: Vec<(Value, i64)> = dv
            .into_iter()
            .filter_map(|v| env.get(&v).map(|x| (v, *x)))
            .collect();
        let key = (
            op,
            mem,
            ix.map(|v| v.iter().map(operand_key).collect()),
            vals,
        );
        if let Some(r) = self.memo.get(&key) {
            return r.clone();
        }
        let r = self.bytes(mem, fp, env).map(std::rc::Rc::new);
        self.memo.insert(key, r.clone());
        r
    }

    /// Enclosing `for` loops of an op, outermost first.
    pub fn for_loops(&mut self, op: Op) -> Vec<Op> {
        if let Some(v) = self.loops.get(&op) {
            return v.clone();
        }
        let mut v: Vec<Op> = self
            .parents
            .ancestors(op)
            .into_iter()
            .filter(|a| matches!(self.k.ops[*a].kind, OpKind::For { .. }))
            .collect();
        v.reverse();
        self.loops.insert(op, v.clone());
        v
    }

    fn const_of(&self, o: Operand) -> Option<i64> {
        match o {
            Operand::Imm(Scalar::I32(v)) => Some(v as i64),
            Operand::Value(v) => match self.k.values[v].def {
                ValueDef::Result(op, 0) => match &self.k.ops[op].kind {
                    OpKind::Const(Scalar::I32(c)) => Some(*c as i64),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }

    /// (lo, step, hi) of a `for` loop, each when constant.
    fn bounds(&self, l: Op) -> (Option<i64>, Option<i64>, Option<i64>) {
        match &self.k.ops[l].kind {
            OpKind::For { lo, hi, step, .. } => {
                (self.const_of(*lo), self.const_of(*step), self.const_of(*hi))
            }
            _ => (None, None, None),
        }
    }

    fn iv(&self, l: Op) -> Option<Value> {
        let body = *self.k.ops[l].regions.first()?;
        self.k.region_args(body).first().copied()
    }

    fn period(&self, o: Operand, iv: Value, memo: &mut HashMap<Value, Period>) -> Period {
        let v = match o {
            Operand::Imm(_) => return Period::Indep,
            Operand::Value(v) => v,
        };
        if v == iv {
            return Period::Poly(1, 1);
        }
        if let Some(p) = memo.get(&v) {
            return *p;
        }
        let p = match self.k.values[v].def {
            ValueDef::Result(op, _) => match &self.k.ops[op].kind {
                OpKind::Binary(b, x, y) => {
                    let (px, py) = (self.period(*x, iv, memo), self.period(*y, iv, memo));
                    let m = self.const_of(*y);
                    // A polynomial mod m is periodic over the integers; i32 wraps, which keeps
                    // that only when m divides 2^32 or the polynomial never wraps.
                    let wraps = |m: i64| {
                        !(m as u64).is_power_of_two()
                            && x.value().is_some_and(|v| !self.ranges.exact(v))
                    };
                    match (b, px, m) {
                        (BinOp::Rem, Period::Poly(..), Some(m)) if m > 0 && wraps(m) => Period::Bad,
                        (BinOp::Div | BinOp::Shr, Period::Poly(..), Some(_))
                            if x.value().is_some_and(|v| !self.ranges.exact(v)) =>
                        {
                            Period::Bad
                        }
                        _ => combine(*b, px, py, m),
                    }
                }
                OpKind::Unary(_, x) | OpKind::Cast(_, x) => match self.period(*x, iv, memo) {
                    Period::Poly(..) => Period::Bad,
                    p => p,
                },
                OpKind::Select(..) | OpKind::Cmp(..) => {
                    let ops: Vec<Operand> = match &self.k.ops[op].kind {
                        OpKind::Select(c, x, y) => vec![*c, *x, *y],
                        OpKind::Cmp(_, x, y) => vec![*x, *y],
                        _ => vec![],
                    };
                    let mut acc = Period::Indep;
                    for o in ops {
                        acc = match (acc, self.period(o, iv, memo)) {
                            (Period::Bad | Period::Poly(..), _) | (_, Period::Bad | Period::Poly(..)) => {
                                Period::Bad
                            }
                            (Period::Indep, p) | (p, Period::Indep) => p,
                            (Period::Periodic(a), Period::Periodic(b)) => {
                                Period::Periodic(lcm(a, b))
                            }
                        };
                    }
                    acc
                }
                _ => Period::Indep,
            },
            // A recognized periodic iteration value of this loop (`ir::induction`).
            ValueDef::RegionArg(..) => match self.ranges.inductions.get(v) {
                Some(ind) if ind.iv == iv && ind.periodic() => Period::Periodic(ind.iv_period()),
                // An affine counter (`footprint::Dep`'s rule).
                Some(ind) if ind.iv == iv => Period::Poly(ind.iv_period(), ind.iv_period()),
                _ => Period::Indep,
            },
            _ => Period::Indep,
        };
        // Exactly periodic although the algebra above does not see it (`x - (x / 3)·3`).
        let p = match p {
            Period::Poly(..) | Period::Bad => crate::ir::iterfn::period_in_iv(self.k, &self.ranges, v, iv)
                .map_or(p, Period::Periodic),
            p => p,
        };
        memo.insert(v, p);
        p
    }

    /// Evaluates an i32 operand for one thread (linear id `tid`) with the given values of
    /// induction variables; `None` when unknown.
    pub fn eval_at(&self, o: Operand, env: &std::collections::HashMap<Value, i64>, tid: u32) -> Option<i64> {
        self.eval(o, &Env(env.iter().map(|(k, v)| (*k, *v)).collect()), tid)
    }

    /// Evaluates an i32 operand for one thread under the environment; `None` when unknown.
    fn eval(&self, o: Operand, env: &Env, tid: u32) -> Option<i64> {
        let v = match o {
            Operand::Imm(Scalar::I32(c)) => return Some(c as i64),
            Operand::Imm(Scalar::I1(b)) => return Some(b as i64),
            Operand::Imm(_) => return None,
            Operand::Value(v) => v,
        };
        if let Some(x) = env.get(&v) {
            return Some(*x);
        }
        let ValueDef::Result(op, _) = self.k.values[v].def else {
            // A recognized periodic iteration value, from its loop's variable.
            let ind = self.ranges.inductions.get(v)?;
            return ind.at(*env.get(&ind.iv)?);
        };
        let [bx, by, _] = self.k.block;
        let t = tid as i64;
        let (bx, by) = (bx as i64, by as i64);
        Some(match &self.k.ops[op].kind {
            OpKind::Const(Scalar::I32(c)) => *c as i64,
            OpKind::Const(Scalar::I1(b)) => *b as i64,
            OpKind::Special(s) => match s {
                Special::Tid(0) => t % bx,
                Special::Tid(1) => (t / bx) % by,
                Special::Tid(_) => t / (bx * by),
                Special::LinearTid => t,
                Special::Lane => t % self.warp as i64,
                Special::Warp => t / self.warp as i64,
                Special::BlockDim(d) => self.k.block[*d as usize] as i64,
                _ => return None,
            },
            OpKind::Binary(b, x, y) => {
                let (x, y) = (self.eval(*x, env, tid)?, self.eval(*y, env, tid)?);
                let (x32, y32) = (x as i32, y as i32);
                (match b {
                    BinOp::Add => x32.wrapping_add(y32),
                    BinOp::Sub => x32.wrapping_sub(y32),
                    BinOp::Mul => x32.wrapping_mul(y32),
                    BinOp::Div => floor_div(x, y)? as i32,
                    BinOp::Rem => (x - floor_div(x, y)? * y) as i32,
                    BinOp::Min => x32.min(y32),
                    BinOp::Max => x32.max(y32),
                    BinOp::And => x32 & y32,
                    BinOp::Or => x32 | y32,
                    BinOp::Xor => x32 ^ y32,
                    BinOp::Shl => x32.wrapping_shl(y32 as u32 % 32),
                    BinOp::Shr => x32.wrapping_shr(y32 as u32 % 32),
                }) as i64
            }
            OpKind::Cmp(p, x, y) => {
                let (x, y) = (self.eval(*x, env, tid)?, self.eval(*y, env, tid)?);
                p.holds(x, y) as i64
            }
            OpKind::Select(c, x, y) => {
                if self.eval(*c, env, tid)? != 0 {
                    self.eval(*x, env, tid)?
                } else {
                    self.eval(*y, env, tid)?
                }
            }
            OpKind::InGroup(g) => {
                let gd = &self.k.groups[*g];
                (t >= gd.lo as i64 && t < gd.hi as i64) as i64
            }
            _ => return None,
        })
    }

    /// Whether an operand's value may differ between threads (syntactically).
    fn thread_dependent(&self, o: Operand) -> bool {
        let Operand::Value(v) = o else { return false };
        match self.k.values[v].def {
            ValueDef::Result(op, _) => match &self.k.ops[op].kind {
                OpKind::Special(s) => s.is_thread_dependent(),
                OpKind::InGroup(_) => true,
                OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => {
                    self.thread_dependent(*a) || self.thread_dependent(*b)
                }
                OpKind::Unary(_, a) | OpKind::Cast(_, a) => self.thread_dependent(*a),
                OpKind::Select(c, a, b) => {
                    self.thread_dependent(*c)
                        || self.thread_dependent(*a)
                        || self.thread_dependent(*b)
                }
                _ => true,
            },
            _ => false,
        }
    }

    /// The operands an access's elements depend on: view indices along the memref chain plus
    /// the per-thread indices.
    fn index_operands(&self, mem: MemRef, extra: &[Operand]) -> Vec<Operand> {
        let mut out = extra.to_vec();
        let mut m = mem;
        while let MemRef::View(v) = m {
            for ix in &self.k.views[v].indices {
                if let ViewIndex::At(o) = ix {
                    out.push(*o);
                }
            }
            m = self.k.views[v].base;
        }
        out
    }

    /// The values a loop's induction variable takes, skipping the first `skip` iterations,
    /// and whether they are exactly its iterations (`true`: constant bounds, at most
    /// [`MAX_TRIPS`] of them) or one period of the index `operands` (`false`). `None`:
    /// neither (conservative).
    fn domain(&self, l: Op, skip: i64, operands: &[Operand]) -> Option<(Vec<i64>, bool)> {
        let (lo, step, hi) = self.bounds(l);
        let iv = self.iv(l)?;
        let cap = if self.symbolic {
            MAX_SYMBOLIC_TRIPS
        } else {
            MAX_TRIPS
        };
        if let (Some(lo), Some(step), Some(hi)) = (lo, step, hi)
            && step > 0
            && (hi - lo) / step <= cap
            && ((hi - lo) / step <= MAX_TRIPS || self.periodic_in(iv, operands).is_none())
        {
            if (hi - lo) / step > MAX_TRIPS {
                self.wide.set(true);
            }
            let start = lo + skip * step;
            let its = (0..).map(|i| start + i * step).take_while(|v| *v < hi);
            return Some((its.collect(), true));
        }
        // One period, anchored at a multiple of the period so the same residues appear.
        let per = self.periodic_in(iv, operands)?;
        // Iterations are lo + step*i: f is periodic in i with period per / gcd(per, step)
        // (`rem (div %k, 64), 3` in a `step 64` loop: 192 in k, 3 in i). With an unknown
        // lo, every residue of k modulo `per` is sampled instead.
        Some(match (lo, step) {
            (Some(lo), Some(step)) if step > 0 => {
                let iper = per / gcd(per, step);
                if iper > MAX_PERIOD {
                    return None;
                }
                ((0..iper).map(|i| lo + (skip + i) * step).collect(), false)
            }
            _ if per > MAX_PERIOD => return None,
            _ => ((0..per).collect(), false),
        })
    }

    /// Whether X and Y run in the same instance of loop `l` (which encloses both): every
    /// loop enclosing `l` is tagged `Dist(0)` (an untagged loop is unknown).
    fn same_instance(&self, l: Op, tags: &[(Op, IterTag)]) -> bool {
        self.parents.ancestors(l).into_iter().all(|a| {
            !matches!(
                self.k.ops[a].kind,
                OpKind::For { .. } | OpKind::While { .. }
            ) || tags.iter().any(|(t, g)| *t == a && *g == IterTag::Dist(0))
        })
    }

    /// Builds the free variables relating X (earlier) and Y (later). `None`: conservative.
    ///
    /// Per loop enclosing Y: `Dist(d)` (enclosing X too) binds X's iteration to Y's minus
    /// `d`; `Pre(j)` fixes Y's iteration (X's, when the loop encloses it, is one of an
    /// earlier instance: free); `Unknown` on a loop enclosing both, in the same instance of
    /// it (every enclosing loop tagged `Dist(0)`), still says X ran in an *earlier* iteration
    /// (the in-flight dataflow only produces it by saturating `Dist`), so over exact domains
    /// only pairs of iterations `x < y` are enumerated; otherwise both are free.
    fn vars(
        &mut self,
        x: Op,
        y: Op,
        tags: &[(Op, IterTag)],
        operands: &[Operand],
    ) -> Option<(Vec<Var>, Env, Env)> {
        let lx = self.for_loops(x);
        let ly = self.for_loops(y);
        let mut vars = Vec::new();
        let (mut ex, mut ey) = (Env::new(), Env::new());
        let tag = |l: Op| {
            tags.iter()
                .find(|(t, _)| *t == l)
                .map(|(_, g)| *g)
                .unwrap_or(IterTag::Unknown)
        };
        let free_x = |me: &Self, iv: Value, l: Op| me.free_var(l, operands, Some(iv), None);
        let free_y = |me: &Self, iv: Value, l: Op| me.free_var(l, operands, None, Some(iv));
        for &l in &ly {
            let iv = self.iv(l)?;
            let (lo, step, _) = self.bounds(l);
            let in_x = lx.contains(&l);
            match tag(l) {
                IterTag::Dist(d) if in_x => {
                    let s = step?;
                    let (dom, _) = self.domain(l, d as i64, operands)?;
                    vars.push(Var {
                        x: Some(iv),
                        y: Some(iv),
                        domain: dom.into_iter().map(|b| (b - d as i64 * s, b)).collect(),
                        shape: Shape::Listed,
                    });
                }
                IterTag::Pre(j) if lo.is_some() && step.is_some() => {
                    let at = lo? + j as i64 * step?;
                    if matches!((step, self.bounds(l).2), (Some(s), Some(hi)) if s > 0 && at >= hi)
                    {
                        // The loop has no `j`-th iteration: no pair of executions is related so.
                        vars.push(Var::NONE);
                    }
                    ey.insert(iv, at);
                    if in_x {
                        vars.push(free_x(self, iv, l)?);
                    }
                }
                IterTag::PreLast(j, d) if in_x => {
                    let (Some(lo), Some(step), Some(hi)) = self.bounds(l) else {
                        return None;
                    };
                    let at = lo + j as i64 * step;
                    let last = lo + (hi - lo - 1) / step * step;
                    let x_at = last - d as i64 * step;
                    if step <= 0 || at >= hi || x_at < lo {
                        // No such pair of iterations.
                        vars.push(Var::NONE);
                    }
                    ey.insert(iv, at);
                    ex.insert(iv, x_at);
                }
                IterTag::Unknown if in_x && self.same_instance(l, tags) => {
                    let (dom, exact) = self.domain(l, 0, operands)?;
                    vars.push(Var::earlier_pairs(iv, dom, exact));
                }
                _ => {
                    vars.push(free_y(self, iv, l)?);
                    if in_x {
                        vars.push(free_x(self, iv, l)?);
                    }
                }
            }
        }
        for &l in &lx {
            if !ly.contains(&l) {
                let iv = self.iv(l)?;
                match (tag(l), self.bounds(l)) {
                    (IterTag::Last(d), (Some(lo), Some(step), Some(hi))) if step > 0 && hi > lo => {
                        let last = lo + (hi - lo - 1) / step * step;
                        ex.insert(iv, last - d as i64 * step);
                    }
                    _ => vars.push(free_x(self, iv, l)?),
                }
            }
        }
        Some((vars, ex, ey))
    }

    /// A loop variable of one side only (`x` or `y` set), free over the loop's domain.
    fn free_var(&self, l: Op, operands: &[Operand], x: Option<Value>, y: Option<Value>) -> Option<Var> {
        let (dom, _) = self.domain(l, 0, operands)?;
        Some(Var {
            x,
            y,
            domain: dom.into_iter().map(|v| (v, v)).collect(),
            shape: Shape::Listed,
        })
    }

    fn for_each_assignment(
        vars: &[Var],
        ex: &Env,
        ey: &Env,
        f: &mut dyn FnMut(&Env, &Env) -> bool,
    ) -> bool {
        fn go(
            vars: &[Var],
            i: usize,
            ex: &mut Env,
            ey: &mut Env,
            f: &mut dyn FnMut(&Env, &Env) -> bool,
        ) -> bool {
            if i == vars.len() {
                return f(ex, ey);
            }
            for &(a, b) in &vars[i].domain {
                if let Some(iv) = vars[i].x {
                    ex.insert(iv, a);
                }
                if let Some(iv) = vars[i].y {
                    ey.insert(iv, b);
                }
                if !go(vars, i + 1, ex, ey, f) {
                    return false;
                }
            }
            true
        }
        go(vars, 0, &mut ex.clone(), &mut ey.clone(), f)
    }

    /// Byte intervals an access touches under an environment (all threads). `None`: unknown.
    fn bytes(&self, mem: MemRef, fp: &Footprint, env: &Env) -> Option<Vec<(u64, u64)>> {
        let root = self.k.root_buffer(mem);
        let bd = &self.k.buffers[root];
        let esz = bd.elem.bytes();
        let base = match bd.offset {
            Some(o) => o,
            None => (1u64 << 40) * (root.index() as u64 + 1),
        };
        let uniform_view = !self
            .index_operands(mem, &[])
            .iter()
            .any(|o| self.thread_dependent(*o));
        let threads: Vec<u32> = match fp {
            Footprint::Collective { .. } if uniform_view => vec![0],
            _ => (0..self.k.threads()).collect(),
        };
        let mut out = Vec::new();
        for t in threads {
            // Per root dim: (lo, len, kept).
            let mut dims = self.resolve(mem, env, t)?;
            if let Footprint::PerThread(ix) = fp {
                let mut kept = dims.iter_mut().filter(|d| d.2);
                for o in ix {
                    let d = kept.next()?;
                    let i = self.eval(*o, env, t)?;
                    if i < 0 || i >= d.1 {
                        return None;
                    }
                    d.0 += i;
                    d.1 = 1;
                }
            }
            let shape = &bd.shape;
            // Enumerate all but the last dimension; the last is one contiguous run.
            let n = dims.len();
            let mut idx: Vec<i64> = dims.iter().map(|d| d.0).collect();
            'rows: loop {
                let mut lin = 0i64;
                for (i, s) in shape.iter().enumerate() {
                    lin = lin * *s as i64 + idx[i];
                }
                let lo = base + lin as u64 * esz;
                out.push((lo, lo + dims[n - 1].1 as u64 * esz));
                let mut i = n - 1;
                loop {
                    if i == 0 {
                        break 'rows;
                    }
                    i -= 1;
                    idx[i] += 1;
                    if idx[i] < dims[i].0 + dims[i].1 {
                        break;
                    }
                    idx[i] = dims[i].0;
                }
            }
        }
        out.sort_unstable();
        Some(merge(out))
    }

    /// Resolves a memref chain to per-root-dimension selections `(lo, len, kept)`.
    fn resolve(&self, m: MemRef, env: &Env, t: u32) -> Option<Vec<(i64, i64, bool)>> {
        match m {
            MemRef::Buffer(b) => Some(
                self.k.buffers[b]
                    .shape
                    .iter()
                    .map(|s| (0, *s as i64, true))
                    .collect(),
            ),
            MemRef::View(v) => {
                let vd = &self.k.views[v];
                let mut dims = self.resolve(vd.base, env, t)?;
                let mut kept: Vec<usize> = (0..dims.len()).filter(|i| dims[*i].2).collect();
                kept.reverse();
                for ix in &vd.indices {
                    let d = kept.pop()?;
                    match ix {
                        ViewIndex::At(o) => {
                            let i = self.eval(*o, env, t)?;
                            if i < 0 || i >= dims[d].1 {
                                return None;
                            }
                            dims[d] = (dims[d].0 + i, 1, false);
                        }
                        ViewIndex::Range(a, b) => {
                            let (a, b) = (*a as i64, *b as i64);
                            if b > dims[d].1 || a > b {
                                return None;
                            }
                            dims[d] = (dims[d].0 + a, b - a, true);
                        }
                    }
                }
                Some(dims)
            }
        }
    }

    fn footprint_operands(&self, a: &SharedAccess) -> Vec<Operand> {
        match &a.footprint {
            Footprint::PerThread(ix) => self.index_operands(a.mem, ix),
            Footprint::Collective { .. } => self.index_operands(a.mem, &[]),
        }
    }

    /// Whether two accesses are in different buffers that cannot share a byte (different
    /// root buffers, not both placed at explicit offsets with overlapping ranges), whatever
    /// their indices and iterations: [`Overlap::may_overlap`] answers `false` for them.
    pub fn buffers_apart(&self, xa: &SharedAccess, ya: &SharedAccess) -> bool {
        let (rx, ry) = (self.k.root_buffer(xa.mem), self.k.root_buffer(ya.mem));
        if rx == ry {
            return false;
        }
        let (bx, by) = (&self.k.buffers[rx], &self.k.buffers[ry]);
        match (bx.offset, by.offset) {
            (Some(ox), Some(oy)) => ox + bx.bytes() <= oy || oy + by.bytes() <= ox,
            _ => true,
        }
    }

    /// The common period of `operands` in the induction variable `iv` (1: independent of
    /// it); `None` when some operand is not periodic in it.
    fn periodic_in(&self, iv: Value, operands: &[Operand]) -> Option<i64> {
        // `period` is a function of the kernel: its answers are kept for every query.
        let mut memo = self
            .periods
            .borrow_mut()
            .remove(&iv)
            .unwrap_or_default();
        let mut per = Some(1i64);
        for o in operands {
            match self.period(*o, iv, &mut memo) {
                Period::Indep => {}
                Period::Periodic(p) => per = per.map(|q| lcm(q, p)),
                Period::Poly(..) | Period::Bad => {
                    per = None;
                    break;
                }
            }
        }
        self.periods.borrow_mut().insert(iv, memo);
        per
    }

    /// Whether access `xa` of op `x` (earlier) and access `ya` of op `y` (later) may touch a
    /// common byte, with their iterations related by `tags`.
    pub fn may_overlap(
        &mut self,
        x: Op,
        xa: &SharedAccess,
        y: Op,
        ya: &SharedAccess,
        tags: &[(Op, IterTag)],
    ) -> bool {
        if self.buffers_apart(xa, ya) {
            return false;
        }
        let (prep, dx, dy) = self.prepared(x, xa, y, ya, tags);
        self.wide.set(prep.wide);
        let Some(pv) = prep.vars.as_ref() else {
            self.note_conservative(x, y, NOT_ENUMERABLE);
            return true;
        };
        if pv.empty {
            return false;
        }
        // Variables binding one side only are unions: some X iteration meets some Y
        // iteration iff the union of X's byte sets over its own variables meets Y's union.
        // Only the variables binding both sides are enumerated jointly.
        let (both, only_x, only_y, ex, ey) = (&pv.both[..], &pv.only_x[..], &pv.only_y[..], &pv.ex, &pv.ey);
        let count = |vs: &[Var]| {
            vs.iter()
                .map(|v| v.domain.len().max(1))
                .fold(1usize, usize::saturating_mul)
        };
        let per_thread = matches!(xa.footprint, Footprint::PerThread(_))
            || matches!(ya.footprint, Footprint::PerThread(_));
        let threads = if per_thread {
            self.k.threads() as usize
        } else {
            1
        };
        // Bound the work of one query: each side's byte set is computed once per distinct
        // value of the variables it depends on, times the threads enumerated.
        let all: Vec<&Var> = both.iter().chain(only_x).chain(only_y).collect();
        let evals = pv.side_evals(&all, &dx.deps, true).saturating_add(pv.side_evals(&all, &dy.deps, false));
        let joint = count(both);
        let unions = count(only_x).saturating_add(count(only_y));
        // A listed loop longer than MAX_TRIPS is for the symbolic engine only: without its
        // answer the query is conservative for the reason a longer loop gives.
        let wide = self.wide.get();
        if !wide
            && (joint.saturating_mul(unions) > MAX_WORK || evals.saturating_mul(threads) > MAX_WORK)
        {
            self.note_conservative(x, y, OVER_BUDGET);
            return true;
        }
        let work = evals
            .saturating_mul(threads)
            .max(joint.saturating_mul(unions));
        if self.dims && !wide && joint <= MAX_DIM_ASSIGNMENTS && self.dims_apart(xa, ya, both, (ex, ey)) {
            self.dims_answered.set(self.dims_answered.get() + 1);
            return false;
        }
        if self.symbolic
            && let Some(iters) = pv.iters.get_or_init(|| Self::iters(&all))
            && let Some(h) = self.symbolic(xa, ya, iters, (ex, ey), work)
        {
            self.answered.set(self.answered.get() + 1);
            return h;
        }
        if wide {
            self.note_conservative(x, y, NOT_ENUMERABLE);
            return true;
        }
        let mut hit = false;
        Self::for_each_assignment(both, ex, ey, &mut |ex, ey| {
            let sx = self.side_union(x, xa, only_x, ex, true);
            let sy = self.side_union(y, ya, only_y, ey, false);
            hit = match (sx, sy) {
                (Some(a), Some(b)) => intersects(&a, &b),
                _ => {
                    self.note_conservative(x, y, UNKNOWN_INDEX);
                    true
                }
            };
            !hit
        });
        hit
    }

    /// The iteration variables of a query as the symbolic engine takes them: the variables'
    /// domains become progressions (`None`: some domain is not one).
    fn iters(vars: &[&Var]) -> Option<Vec<crate::analysis::symbolic::overlap::Iter>> {
        use crate::analysis::symbolic::overlap::{Iter, Prog};
        let mut iters = Vec::with_capacity(vars.len());
        for v in vars {
            let side = |x: bool| -> Option<Prog> {
                let vals: Vec<i64> = v
                    .domain
                    .iter()
                    .map(|(a, b)| if x { *a } else { *b })
                    .collect();
                Prog::of(&vals)
            };
            iters.push(match (&v.shape, v.x, v.y) {
                (Shape::Listed, Some(iv), None) => Iter::One {
                    iv,
                    x_side: true,
                    vals: side(true)?,
                },
                (Shape::Listed, None, Some(iv)) => Iter::One {
                    iv,
                    x_side: false,
                    vals: side(false)?,
                },
                (Shape::Listed, Some(x), Some(y)) => Iter::Diag {
                    x,
                    y,
                    xs: side(true)?,
                    ys: side(false)?,
                },
                (Shape::Pairs(vals, lt), Some(x), Some(y)) => Iter::Pairs {
                    x,
                    y,
                    vals: Prog::of(vals)?,
                    lt: *lt,
                },
                _ => return None,
            });
        }
        Some(iters)
    }

    /// The symbolic answer of [`Overlap::may_overlap`]'s enumeration (`symbolic::overlap`),
    /// or `None` to enumerate: the variables as [`Overlap::iters`] gives them, the fixed
    /// iteration values constants; the search gets 1/16 of the enumeration's `work`.
    fn symbolic(
        &self,
        xa: &SharedAccess,
        ya: &SharedAccess,
        iters: &[crate::analysis::symbolic::overlap::Iter],
        (ex, ey): (&Env, &Env),
        work: usize,
    ) -> Option<bool> {
        use crate::analysis::symbolic::overlap as sym;
        let per_thread = |a: &SharedAccess| match &a.footprint {
            Footprint::PerThread(ix) => Some(ix.clone()),
            Footprint::Collective { .. } => None,
        };
        let (px, py) = (per_thread(xa), per_thread(ya));
        // The enumerator evaluates a collective footprint whose view does not depend on the
        // thread for thread 0 only (`Overlap::bytes`).
        let all_threads = |a: &SharedAccess, ix: &Option<Vec<Operand>>| {
            ix.is_some()
                || self
                    .index_operands(a.mem, &[])
                    .iter()
                    .any(|o| self.thread_dependent(*o))
        };
        let ax = sym::Access {
            mem: xa.mem,
            per_thread: px.as_deref(),
            all_threads: all_threads(xa, &px),
            fixed: &ex.0,
        };
        let ay = sym::Access {
            mem: ya.mem,
            per_thread: py.as_deref(),
            all_threads: all_threads(ya, &py),
            fixed: &ey.0,
        };
        let budget = (work as u64 / 16).clamp(256, 20_000);
        let leaves = if !self.leaf_memo {
            let mut ops = self.index_operands(xa.mem, px.as_deref().unwrap_or(&[]));
            ops.extend(self.index_operands(ya.mem, py.as_deref().unwrap_or(&[])));
            crate::analysis::symbolic::params::operand_leaves(self.k, &ops)
        } else {
            let (lx, ly) = (self.side_leaves(xa.mem, &px), self.side_leaves(ya.mem, &py));
            union_sorted(&lx, &ly)
        };
        sym::may_overlap(&mut self.sym.borrow_mut(), self, (&ax, &ay), (iters, &leaves), budget)
    }

    /// The block leaves one side of an in-flight question reads
    /// (`symbolic::params::operand_leaves` of its index operands), memoized by those operands.
    /// The leaves of both sides' operands together are the sorted union of each side's
    /// (the walk collects every leaf reachable from any operand, once): [`union_sorted`].
    fn side_leaves(&self, mem: MemRef, per_thread: &Option<Vec<Operand>>) -> std::rc::Rc<[Value]> {
        let ops = self.index_operands(mem, per_thread.as_deref().unwrap_or(&[]));
        let key: Vec<u64> = ops.iter().map(operand_key).collect();
        if let Some(l) = self.leaves.borrow().get(&key) {
            return l.clone();
        }
        let l: std::rc::Rc<[Value]> =
            crate::analysis::symbolic::params::operand_leaves(self.k, &ops).into();
        self.leaves.borrow_mut().insert(key, l.clone());
        l
    }

    /// Whether, under every joint assignment of the variables binding both sides (`both`,
    /// with the fixed values `ex`, `ey`), some root dimension's indices of `xa` and `ya` are
    /// known and disjoint: then the two accesses share no element, hence no byte, under the
    /// relation (docs/async.md, "Slots apart under the distance"). A dimension is known on a
    /// side when the index selecting it (a view's `At` index or a per-thread index, if any)
    /// does not depend on the thread and evaluates under the assignment (no variable of one
    /// side only, no parameter); it is then one index, or the constant window of a kept
    /// dimension. Asked only for accesses of one root buffer whose footprint boxes exist (no
    /// index of either ever leaves its dimension, so the enumeration would raise no note the
    /// test could hide) and after the query's budget check, so that a `false` here is the
    /// answer the enumeration gives, without its cost. O(assignments · dimensions · index
    /// size), the plans of the two accesses memoized.
    fn dims_apart(&mut self, xa: &SharedAccess, ya: &SharedAccess, both: &[Var], (ex, ey): (&Env, &Env)) -> bool {
        if self.k.root_buffer(xa.mem) != self.k.root_buffer(ya.mem) {
            return false;
        }
        let (Some(px), Some(py)) = (self.dim_plan(xa), self.dim_plan(ya)) else {
            return false;
        };
        // The dimensions that may be known on both sides and are not constant on both
        // (constant windows on both sides are the boxes' case, already asked).
        let useful = |d: usize| {
            let (x, y) = (&px[d], &py[d]);
            !x.thread && !y.thread && (x.index.is_some() || y.index.is_some())
        };
        if !(0..px.len().min(py.len())).any(useful) {
            return false;
        }
        let mut apart = true;
        Self::for_each_assignment(both, ex, ey, &mut |ex, ey| {
            apart = (0..px.len().min(py.len())).filter(|&d| useful(d)).any(|d| {
                match (self.dim_span(&px[d], ex), self.dim_span(&py[d], ey)) {
                    (Some((al, ah)), Some((bl, bh))) => ah <= bl || bh <= al,
                    _ => false,
                }
            });
            apart
        });
        apart
    }

    /// The half-open interval of root indices a dimension selection touches under `env`
    /// (every thread alike), or `None` where its index does not evaluate or leaves the
    /// window (not after a box exists: defensive).
    fn dim_span(&self, d: &DimSel, env: &Env) -> Option<(i64, i64)> {
        match d.index {
            None => Some((d.off, d.off + d.len)),
            Some(o) => {
                let i = self.eval(o, env, 0)?;
                (0..d.len).contains(&i).then_some((d.off + i, d.off + i + 1))
            }
        }
    }

    /// Per root dimension of an access, how it is selected ([`DimSel`]); `None` when the
    /// access has no footprint box (`analysis::boxes`). Memoized per access.
    fn dim_plan(&mut self, a: &SharedAccess) -> Option<DimPlan> {
        let key = (
            a.mem,
            match &a.footprint {
                Footprint::PerThread(ix) => Some(ix.iter().map(operand_key).collect()),
                Footprint::Collective { .. } => None,
            },
        );
        if let Some(p) = self.dim_plans.get(&key) {
            return p.clone();
        }
        let (k, warp) = (self.k, self.warp);
        let boxes = self
            .boxes
            .get_or_insert_with(|| crate::analysis::boxes::Boxes::new(k, warp));
        let plan = boxes.of(a).and_then(|_| {
            let mut dims = self.dim_chain(a.mem)?;
            if let Footprint::PerThread(ix) = &a.footprint {
                let mut kept = dims.iter_mut().filter(|d| d.kept);
                for o in ix {
                    let d = kept.next()?;
                    d.index = Some(*o);
                    d.thread = self.thread_dependent(*o);
                }
            }
            Some(dims.into())
        });
        self.dim_plans.insert(key, plan.clone());
        plan
    }

    /// [`Overlap::resolve`] without values: per root dimension its constant window, and the
    /// view's `At` index that selects in it (if any).
    fn dim_chain(&self, m: MemRef) -> Option<Vec<DimSel>> {
        match m {
            MemRef::Buffer(b) => Some(
                self.k.buffers[b]
                    .shape
                    .iter()
                    .map(|s| DimSel {
                        off: 0,
                        len: *s as i64,
                        kept: true,
                        index: None,
                        thread: false,
                    })
                    .collect(),
            ),
            MemRef::View(v) => {
                let vd = &self.k.views[v];
                let mut dims = self.dim_chain(vd.base)?;
                let mut kept: Vec<usize> = (0..dims.len()).filter(|i| dims[*i].kept).collect();
                kept.reverse();
                for ix in &vd.indices {
                    let d = &mut dims[kept.pop()?];
                    match ix {
                        ViewIndex::At(o) => {
                            d.kept = false;
                            d.index = Some(*o);
                            d.thread = self.thread_dependent(*o);
                        }
                        ViewIndex::Range(a, b) => {
                            let (a, b) = (*a as i64, *b as i64);
                            if b > d.len || a > b {
                                return None;
                            }
                            d.off += a;
                            d.len = b - a;
                        }
                    }
                }
                Some(dims)
            }
        }
    }

    fn note_conservative(&self, x: Op, y: Op, why: &'static str) {
        let mut c = self.conservative.borrow_mut();
        if !c.contains(&(x, y, why)) {
            c.push((x, y, why));
        }
    }

    /// W0314 for every query answered conservatively so far: the later access, the earlier
    /// (async) one and the reason, once per pair.
    pub fn conservative_warnings(&self) -> Vec<crate::diag::Diagnostic> {
        use crate::emit::text::op_label;
        self.conservative
            .borrow()
            .iter()
            .map(|&(x, y, why)| {
                crate::diag::Diagnostic::warning(
                    crate::diag::DiagKind::Finding,
                    "W0314",
                    format!(
                        "whether {} may touch what {} is still writing or reading in flight is answered conservatively: {why}",
                        op_label(self.k, y),
                        op_label(self.k, x)
                    ),
                )
                .with_label(self.k.span(y), "analysed conservatively")
                .with_label(self.k.span(x), "against this async op")
                .with_note("smemsync may wait for more copies here than the minimum (a smaller wait count, or a wait inside a loop)")
            })
            .collect()
    }

    /// The union of an access's byte sets over the assignments of `vars` (variables binding
    /// this side only), on top of `env`. `None`: unknown.
    fn side_union(
        &mut self,
        op: Op,
        a: &SharedAccess,
        vars: &[Var],
        env: &Env,
        x_side: bool,
    ) -> Option<ByteSet> {
        if vars.is_empty() {
            return self.bytes_memo(op, a.mem, &a.footprint, env);
        }
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut known = true;
        let empty = Env::new();
        let (ex, ey) = if x_side { (env, &empty) } else { (&empty, env) };
        Self::for_each_assignment(vars, ex, ey, &mut |ex, ey| {
            let e = if x_side { ex } else { ey };
            match self.bytes_memo(op, a.mem, &a.footprint, e) {
                Some(b) => out.extend(b.iter().copied()),
                None => known = false,
            }
            known
        });
        if !known {
            return None;
        }
        out.sort_unstable();
        Some(std::rc::Rc::new(merge(out)))
    }

    /// A query's preparation: its iteration variables (`Overlap::vars`, on both accesses'
    /// footprint operands), partitioned, with their per-side value counts. Memoized by
    /// [`PrepKey`] (docs/async.md, "Each query prepared once per loop relation"): `vars`
    /// reads the two loop nests, the tags, and of the operands only their common period in
    /// each loop variable (`domain`), which is the `lcm` of each side's (`periodic_in` takes
    /// the `lcm` over the operands, `None` absorbing), so equal keys prepare equal variables.
    fn prepared(
        &mut self,
        x: Op,
        xa: &SharedAccess,
        y: Op,
        ya: &SharedAccess,
        tags: &[(Op, IterTag)],
    ) -> (std::rc::Rc<Prepared>, std::rc::Rc<AccessPrep>, std::rc::Rc<AccessPrep>) {
        let (px, py) = (self.access_prep(xa), self.access_prep(ya));
        if !self.prep_memo {
            return (std::rc::Rc::new(self.prepare(x, y, tags, &px, &py)), px, py);
        }
        let (lx, ly) = (self.for_loops(x), self.for_loops(y));
        let mut sig = Vec::with_capacity(lx.len() + ly.len());
        for &l in ly.iter().chain(lx.iter().filter(|l| !ly.contains(l))) {
            let per = |me: &Self, iv| Some(lcm(me.period_of(&px, iv)?, me.period_of(&py, iv)?));
            sig.push(self.iv(l).and_then(|iv| per(self, iv)));
        }
        let key = (lx.last().copied(), ly.last().copied(), tags.to_vec(), sig, self.symbolic);
        if let Some(p) = self.preps.get(&key) {
            return (p.clone(), px, py);
        }
        let p = std::rc::Rc::new(self.prepare(x, y, tags, &px, &py));
        self.preps.insert(key, p.clone());
        (p, px, py)
    }

    /// [`Overlap::prepared`] without its memo.
    fn prepare(&mut self, x: Op, y: Op, tags: &[(Op, IterTag)], px: &AccessPrep, py: &AccessPrep) -> Prepared {
        let mut ops = px.operands.clone();
        ops.extend_from_slice(&py.operands);
        self.wide.set(false);
        let vars = self.vars(x, y, tags, &ops).map(|(vars, ex, ey)| {
            let empty = vars.iter().any(|v| v.domain.is_empty());
            let (both, rest): (Vec<Var>, Vec<Var>) = vars.into_iter().partition(|v| v.x.is_some() && v.y.is_some());
            let (only_x, only_y): (Vec<Var>, Vec<Var>) = rest.into_iter().partition(|v| v.x.is_some());
            let counts = both
                .iter()
                .chain(&only_x)
                .chain(&only_y)
                .map(|v| (side_count(v, true), side_count(v, false)))
                .collect();
            PreparedVars {
                both,
                only_x,
                only_y,
                ex,
                ey,
                empty,
                counts,
                iters: Default::default(),
            }
        });
        Prepared {
            vars,
            wide: self.wide.get(),
        }
    }

    /// The footprint operands of an access and the induction variables they depend on,
    /// once per memref and per-thread index operands.
    fn access_prep(&mut self, a: &SharedAccess) -> std::rc::Rc<AccessPrep> {
        let ix = match &a.footprint {
            Footprint::PerThread(ix) => Some(ix.iter().map(operand_key).collect()),
            Footprint::Collective { .. } => None,
        };
        let key = (a.mem, ix);
        if let Some(p) = self.access_preps.get(&key) {
            return p.clone();
        }
        let operands = self.footprint_operands(a);
        let mut deps: Vec<Value> = operands.iter().flat_map(|o| self.iv_deps(*o)).collect();
        deps.sort_unstable();
        deps.dedup();
        let p = std::rc::Rc::new(AccessPrep {
            operands,
            deps,
            periods: Default::default(),
        });
        self.access_preps.insert(key, p.clone());
        p
    }

    /// `periodic_in(iv, a.operands)`, once per access and loop variable.
    fn period_of(&self, a: &AccessPrep, iv: Value) -> Option<i64> {
        if let Some(p) = a.periods.borrow().get(&iv) {
            return *p;
        }
        let p = self.periodic_in(iv, &a.operands);
        a.periods.borrow_mut().insert(iv, p);
        p
    }

    /// Whether two uniform index lists (an mbarrier slot of a copy `x`, earlier, and of a
    /// wait `y`, later) are equal in every related pair of iterations.
    pub fn must_equal(
        &mut self,
        x: Op,
        xi: &[Operand],
        y: Op,
        yi: &[Operand],
        tags: &[(Op, IterTag)],
    ) -> bool {
        if xi.len() != yi.len() || xi.iter().chain(yi).any(|o| self.thread_dependent(*o)) {
            return false;
        }
        let ops: Vec<Operand> = xi.iter().chain(yi).copied().collect();
        let Some((vars, ex, ey)) = self.vars(x, y, tags, &ops) else {
            return false;
        };
        let total = vars
            .iter()
            .map(|v| v.domain.len().max(1))
            .fold(1usize, usize::saturating_mul);
        if total > MAX_ASSIGNMENTS {
            return false;
        }
        let mut all = true;
        let mut any = false;
        Self::for_each_assignment(&vars, &ex, &ey, &mut |ex, ey| {
            any = true;
            for (a, b) in xi.iter().zip(yi) {
                match (self.eval(*a, ex, 0), self.eval(*b, ey, 0)) {
                    (Some(p), Some(q)) if p == q => {}
                    _ => all = false,
                }
            }
            all
        });
        all && any
    }
}

/// `SMEMSYNC_OVERLAP_STATS=1`: when a dataflow ends, prints how many overlap questions the
/// symbolic engine was asked, how many sides it built, how many questions it built (not in
/// its memo) and how many of those needed a solve (docs/symbolic.md).
impl Drop for Overlap<'_> {
    fn drop(&mut self) {
        if std::env::var_os("SMEMSYNC_OVERLAP_STATS").is_some() {
            let [asked, sides, built, solved, mended] = self.sym.borrow().counts;
            eprintln!(
                "overlap questions: asked={asked} sides={sides} built={built} solved={solved} mended={mended} answered={} dims={}",
                self.answered.get(),
                self.dims_answered.get()
            );
        }
    }
}

/// The overlap engine's evaluation, for the symbolic forms: no guard is opaque (queries
/// ignore guards), `neg`, `not` and grid dimensions are unknown (`Overlap::eval`).
impl crate::analysis::symbolic::form::Evaluator for Overlap<'_> {
    fn kernel(&self) -> &Kernel {
        self.k
    }
    fn warp(&self) -> u32 {
        self.warp
    }
    fn is_opaque(&self, _: Value) -> bool {
        false
    }
    fn induction_iv(&self, v: Value) -> Option<Value> {
        self.ranges.inductions.get(v).map(|i| i.iv)
    }
    fn affine_counter(&self, v: Value) -> Option<(Value, i64, i64)> {
        let i = self.ranges.inductions.get(v).filter(|i| !i.periodic())?;
        let (a, b) = i.affine_in_iv()?;
        Some((i.iv, a, b))
    }
    fn evaluates_unary(&self) -> bool {
        false
    }
}

fn combine(b: BinOp, px: Period, py: Period, ycst: Option<i64>) -> Period {
    use Period::*;
    match b {
        BinOp::Add | BinOp::Sub | BinOp::Mul => match (px, py) {
            (Bad, _) | (_, Bad) => Bad,
            (Indep, Indep) => Indep,
            (Poly(p, q), Indep) | (Indep, Poly(p, q)) => Poly(p, q),
            (Poly(p, q), Poly(r, s)) => Poly(lcm(p, r), lcm(q, s)),
            (Poly(p, q), Periodic(r)) | (Periodic(r), Poly(p, q)) => Poly(lcm(p, r), q),
            (Periodic(a), Indep) | (Indep, Periodic(a)) => Periodic(a),
            (Periodic(a), Periodic(c)) => Periodic(lcm(a, c)),
        },
        // Floor division by a positive constant (the caller checked that no wrap occurs).
        BinOp::Div | BinOp::Shr => match (px, py, ycst) {
            (Poly(p, q), Indep, Some(c)) if b == BinOp::Div && c > 0 => Poly(p, q.saturating_mul(c)),
            (Poly(p, q), Indep, Some(s)) if (0..31).contains(&s) => Poly(p, q.saturating_mul(1 << s)),
            (Periodic(a), Indep, _) => Periodic(a),
            (Indep, Indep, _) => Indep,
            _ => Bad,
        },
        BinOp::Rem => match (px, py, ycst) {
            (_, Indep, Some(m)) if m > 0 => match px {
                Indep => Indep,
                Poly(p, q) => Periodic(lcm(p, q.saturating_mul(m))),
                Periodic(p) => Periodic(p),
                Bad => Bad,
            },
            (Indep, Indep, _) => Indep,
            _ => Bad,
        },
        _ => match (px, py) {
            (Indep, Indep) => Indep,
            (Periodic(a), Indep) | (Indep, Periodic(a)) => Periodic(a),
            (Periodic(a), Periodic(c)) => Periodic(lcm(a, c)),
            _ => Bad,
        },
    }
}


fn merge(v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (lo, hi) in v {
        if let Some(last) = out.last_mut()
            && lo <= last.1
        {
            last.1 = last.1.max(hi);
            continue;
        }
        out.push((lo, hi));
    }
    out
}

fn intersects(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].1 <= b[j].0 {
            i += 1;
        } else if b[j].1 <= a[i].0 {
            j += 1;
        } else {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_sorted_is_the_sorted_set_union() {
        let v = |i: usize| <Value as crate::ir::entities::EntityRef>::new(i);
        let mut seed = 12345u64;
        for _ in 0..200 {
            let mut list = |n: usize| {
                let mut out: Vec<Value> = (0..n)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        v((seed >> 59) as usize)
                    })
                    .collect();
                out.sort();
                out.dedup();
                out
            };
            let (a, b) = (list(6), list(6));
            let mut want: Vec<Value> = a.iter().chain(&b).copied().collect();
            want.sort();
            want.dedup();
            assert_eq!(union_sorted(&a, &b), want, "{a:?} ∪ {b:?}");
        }
    }

    fn setup(src: &str) -> (Kernel, Op, Value) {
        let k = crate::reader::parse(src).unwrap().kernels.remove(0);
        let l = k
            .ops
            .iter()
            .find(|(_, o)| matches!(o.kind, OpKind::For { .. }))
            .unwrap()
            .0;
        let iv = k.region_args(k.ops[l].regions[0])[0];
        (k, l, iv)
    }

    fn value(k: &Kernel, name: &str) -> Operand {
        Operand::Value(
            k.values
                .iter()
                .find(|(v, _)| k.value_name(*v).trim_start_matches('%') == name)
                .unwrap()
                .0,
        )
    }

    #[test]
    fn floor_division_by_the_step_is_periodic_in_the_iteration_number() {
        let src = "kernel @k(%n: i32 in [0, 4096]) block(4) {\n  shared @a : f32[3, 4]\n  \
                   for %k = 0 to %n step 64 {\n    %i = div %k, 64\n    %s = rem %i, 3\n    \
                   %t = tid.x\n    store @a[%s, %t], 1.0\n  }\n}\n";
        let (k, l, iv) = setup(src);
        let o = Overlap::new(&k, 32);
        let s = value(&k, "s");
        assert_eq!(o.period(s, iv, &mut HashMap::default()), Period::Periodic(192));
        assert_eq!(
            o.period(value(&k, "i"), iv, &mut HashMap::default()),
            Period::Poly(1, 64)
        );
        // Three iterations, one per slot, instead of 192 values of %k.
        let (dom, exact) = o.domain(l, 0, &[s]).unwrap();
        assert_eq!((dom, exact), (vec![0, 64, 128], false));
    }

    #[test]
    fn a_select_wrap_counter_is_evaluated_from_the_loop_variable() {
        let src = "kernel @k(%n: i32 in [0, 4096]) block(4) {\n  shared @a : f32[3, 4]\n  \
                   %r = for %k = 0 to %n step 2 iter(%s = 1) {\n    %t = tid.x\n    \
                   store @a[%s, %t], 1.0\n    %w = cmp eq %s, 2\n    %i = add %s, 1\n    \
                   %x = select %w, 0, %i\n    yield %x\n  }\n}\n";
        let (k, l, iv) = setup(src);
        let o = Overlap::new(&k, 32);
        let s = value(&k, "s");
        assert_eq!(o.period(s, iv, &mut HashMap::default()), Period::Periodic(6));
        let at = |kv: i64| {
            let mut env = Env::new();
            env.insert(iv, kv);
            o.eval(s, &env, 0)
        };
        assert_eq!((at(0), at(2), at(4), at(6), at(3)), (Some(1), Some(2), Some(0), Some(1), None));
        assert_eq!(o.domain(l, 0, &[s]).unwrap().0, vec![0, 2, 4]);
    }
}
