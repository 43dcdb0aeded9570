//! The static proof's execution-error obligations: which accesses and ops the proof cannot
//! show free of the execution errors the interpreter stops at — an out-of-range shared or
//! mbarrier index or view (C0004), an integer division by zero or a loop step that is not
//! positive (C0005), a read of a shared element no write initialized before (C0006).
//!
//! What it computes: [`obligations`] returns every op where one of these is *not shown*
//! (empty: none can happen, for every thread, trip count and parameter value in its declared
//! range). It runs after the race proof succeeded and relies on it (docs/checker.md, "Static
//! mode"): two accesses of one element by different threads, the earlier one a write in
//! program order, are in different barrier intervals, so the write happens before the read;
//! an async copy (cp.async, gather-to-LDS, TMA, TDM) whose destination a later access
//! touches has completed by then, else the proof had found the copy engine's write racing
//! with it. So "initialized" is a property of program order: some write of the element's
//! buffer executes, in some thread, before the read in the sequence every thread follows.
//!
//! The evaluation (`check/exec_values.rs` for the values): one walk over the region tree
//! with per-thread intervals. Each thread is *must* (executes the op), *may* or *not* at each
//! op; bounds, divisors and reads are checked for every thread that may execute, and the set
//! of initialized elements per buffer (a bitset) grows only by writes of must threads whose
//! element is one number. Initialization is monotone (an element once written stays
//! written), so a `for` loop runs its first iterations concretely (iteration values exact,
//! iteration arguments carried from their `yield`: rotating slots, Triton's slot counters),
//! then once more for every later iteration at once, with the induction variable's remaining
//! interval and each iteration argument's invariant interval (the hull of its values,
//! checked to be preserved by one iteration, else the recognized periodic value's range from
//! `ir::ranges`, else every `i32`), against the elements initialized by then. After the loop
//! only the iterations that execute on every path count (the trip count's lower bound). An
//! `if` on a condition one number for all threads but unknown keeps what both arms
//! initialize; one on a per-thread condition splits the threads. A `while` runs its regions
//! once for every iteration at once. A collective write counts when every thread executes
//! it, a TMA/TDM load when its issuer does.
//!
//! The walk runs first block-wide (`wide.rs`: one abstract thread for every thread, thread
//! ids as their interval over the block, refined thread by thread only where that interval
//! does not show an obligation or a write's element differs per thread); only when it leaves
//! something not shown does the per-thread walk run, and an op either walk shows is shown.
//!
//! Global indices are not looked at (docs/checker.md). Complexity: O(threads x ops x
//! concrete iterations) plus O(elements) per whole-view access, bounded by a work budget
//! (`DEFAULT_BUDGET`, or the caller's): past half of it loops get only their all-iterations
//! pass (less precise, still sound), at all of it the walk stops; either way, when the
//! budget shaped the answer the list holds an [`Obligation::Budget`] entry, so the verdict
//! is never plain "proved".

use std::cell::Cell;
use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

use super::exec_values::{self as ev, Abs, BOOL, Iv, TOP};
use crate::diag::Span;
use crate::ir::ranges::Ranges;
use crate::ir::*;
use crate::target::Target;

/// What the proof could not show at an op.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Obligation {
    /// Shared, mbarrier or view indices within their dimensions (C0004).
    InBounds,
    /// Integer divisors non-zero and loop steps positive (C0005).
    Divisor,
    /// Shared reads of initialized elements (C0006).
    Initialized,
    /// None of the above looked for from this op on: the walk's work budget was reached
    /// (the entries before it still hold; past it nothing is shown).
    Budget,
}

impl Obligation {
    /// How a verdict names it: "in-bounds indices", ...
    pub fn describe(self) -> &'static str {
        match self {
            Obligation::InBounds => "in-bounds indices",
            Obligation::Divisor => "non-zero divisors and positive steps",
            Obligation::Initialized => "initialized reads",
            Obligation::Budget => "execution errors",
        }
    }

    /// The execution error it stands for.
    pub fn code(self) -> &'static str {
        match self {
            Obligation::InBounds => "C0004",
            Obligation::Divisor => "C0005",
            Obligation::Initialized => "C0006",
            Obligation::Budget => "C0004, C0005, C0006",
        }
    }
}

/// One op where an obligation is not shown.
#[derive(Clone, Debug, PartialEq)]
pub struct NotShown {
    pub what: Obligation,
    pub op: Op,
    pub span: Span,
    /// Why, in words (the access and the interval found).
    pub detail: String,
}

/// The default work budget of [`obligations`]: work units (one per thread per op evaluated,
/// one per element of a whole-view access), over all passes and trip-count cases. Past it
/// the walk stops and reports [`Obligation::Budget`]; chosen so that `check` of the bench
/// kernels stays near 100 ms on a loaded 2-core VM (docs/performance.md, branch `execerr`).
pub const DEFAULT_BUDGET: u64 = 1 << 23;
/// Concrete iterations of a loop whose trip count is not one known number.
const SYMBOLIC_ITERS: u64 = 8;
/// Concrete iterations of a loop with a known trip count.
const KNOWN_ITERS: u64 = 1024;
/// The block-wide walk stops (and shows nothing) once its per-thread recomputation passes
/// this share of the budget: a kernel whose values are mostly refined thread by thread (a
/// write's element different per thread and per iteration of a deep nest) is cheaper to walk
/// per thread.
const REFINE_SHARE: u64 = 8;

/// [`obligations_within`] with [`DEFAULT_BUDGET`].
pub fn obligations(k: &Kernel, target: Option<Target>) -> Vec<NotShown> {
    obligations_within(k, target, DEFAULT_BUDGET)
}

/// Every op where the kernel (verifier-clean, race freedom proved) may stop with C0004,
/// C0005 or C0006 as far as this analysis can tell, sorted by obligation and position.
/// When the walk spends `budget` work units before it ends, it stops there and the list
/// also holds one [`Obligation::Budget`] entry at the op it stopped at: the list is then
/// not complete, and never empty.
pub fn obligations_within(k: &Kernel, target: Option<Target>, budget: u64) -> Vec<NotShown> {
    let ranges = Rc::new(Ranges::new(k));
    // The block-wide walk first (`wide.rs`): when it shows everything, that is the answer.
    let wide = walk(k, target, &ranges, budget, true);
    if wide.stopped.is_none() && wide.found.is_empty() {
        return Vec::new();
    }
    // Else the per-thread walk, under its own budget; an op either walk shows is shown (each
    // is sound on its own). A block-wide walk cut short by the budget shows nothing.
    let mut found = walk(k, target, &ranges, budget, false);
    if wide.stopped.is_none() {
        found
            .found
            .retain(|key, _| wide.found.contains_key(key));
    }
    let Walk {
        mut found,
        stopped,
        cut,
    } = found;
    if let Some(op) = stopped {
        found.insert(
            (Obligation::Budget, op),
            format!("budget of {budget} steps reached here"),
        );
    } else if let (Some(op), false) = (cut, found.is_empty()) {
        // The walk ended, less precise past the cut (still sound): what it could not show
        // may be the cut's doing, so the budget is named too.
        found.insert(
            (Obligation::Budget, op),
            format!("budget of {budget} steps reached here: later iterations taken together"),
        );
    }
    let mut out: Vec<NotShown> = found
        .into_iter()
        .map(|((what, op), detail)| NotShown {
            what,
            op,
            span: k.span(op),
            detail,
        })
        .collect();
    out.sort_by_key(|n| (n.what, n.span.lo, n.op));
    out
}

/// What one walk found, where the budget stopped it, and the first loop it cut short.
struct Walk {
    found: BTreeMap<(Obligation, Op), String>,
    stopped: Option<Op>,
    cut: Option<Op>,
}

/// One walk of the kernel (block-wide or per thread) within `budget` work units: first
/// without trip-count cases (one pass); only when something is not shown, again with them
/// (up to 9 kernel cases times 9 per loop), which costs more.
fn walk(k: &Kernel, target: Option<Target>, ranges: &Rc<Ranges>, budget: u64, wide: bool) -> Walk {
    let mut e = Eval::new(k, target, ranges.clone(), None, (false, wide));
    e.limit = budget;
    e.region(k.body(), &Rc::new(vec![MUST; e.n]));
    let (mut work, mut stopped, mut cut, mut refined) = (e.work, e.exhausted, e.cut, e.refined);
    // The refined writes depend on the slice's intervals only: shared by every case.
    let mut memo = std::mem::take(&mut e.memo);
    let mut found = e.found;
    if !found.is_empty() && stopped.is_none() {
        found = BTreeMap::new();
        let cases = kernel_cases(k);
        for case in cases.iter().map(Some).chain(cases.is_empty().then_some(None)) {
            let mut e = Eval::new(k, target, ranges.clone(), case.copied(), (true, wide));
            (e.work, e.limit, e.memo, e.refined) = (work, budget, memo, refined);
            e.region(k.body(), &Rc::new(vec![MUST; e.n]));
            (work, memo, refined) = (e.work, std::mem::take(&mut e.memo), e.refined);
            cut = cut.or(e.cut);
            if let Some(op) = e.exhausted {
                // A case cut short: its findings are kept, its silence proves nothing.
                stopped = Some(op);
            } else if e.impossible {
                continue;
            }
            for (key, d) in e.found {
                found.entry(key).or_insert(d);
            }
            if stopped.is_some() {
                break;
            }
        }
    }
    Walk {
        found,
        stopped,
        cut,
    }
}

/// The trip-count cases of the kernel's first top-level `for` whose upper bound is a value
/// defined at the top level (a parameter or computed from them) and whose lower bound and
/// step are constants: that value's interval for each trip count below
/// [`SYMBOLIC_ITERS`] and for every larger one. The whole kernel is evaluated once per case
/// with the value pinned, so guards on it anywhere (Triton's prologue `if %kt > 1`) are
/// decided; the cases cover every value, so the union of their findings is sound.
fn kernel_cases(k: &Kernel) -> Vec<(Value, Iv)> {
    let top = k.region_ops(k.body());
    let defined_at_top = |v: Value| match k.values[v].def {
        ValueDef::Param(_) => true,
        ValueDef::Result(op, _) => top.contains(&op),
        ValueDef::RegionArg(..) => false,
    };
    let konst = |o: &Operand| match o {
        Operand::Imm(Scalar::I32(c)) => Some(*c as i64),
        _ => None,
    };
    for &op in top {
        let OpKind::For { lo, hi, step, .. } = &k.ops[op].kind else {
            continue;
        };
        let (Some(l), Some(s), Some(v)) = (konst(lo), konst(step), hi.value()) else {
            continue;
        };
        if s <= 0 || !defined_at_top(v) || k.values[v].ty != ScalarType::I32 {
            continue;
        }
        let at = |t: u64| l as i128 + t as i128 * s as i128;
        // The cases cover every i32: each is clipped to the i32 range and only an empty one
        // is dropped (a case past i32::MAX must not vanish with the values below it).
        let case = |a: i128, b: i128| {
            let (a, b) = (a.max(TOP.lo as i128), b.min(TOP.hi as i128));
            (a <= b).then(|| (v, Iv::fit(a, b)))
        };
        let mut out: Vec<_> = case(TOP.lo as i128, l as i128).into_iter().collect();
        for t in 1..SYMBOLIC_ITERS {
            out.extend(case(at(t - 1) + 1, at(t)));
        }
        out.extend(case(at(SYMBOLIC_ITERS - 1) + 1, TOP.hi as i128));
        return out;
    }
    Vec::new()
}

/// A thread does not execute the op, may execute it, or does.
pub(super) const NOT: u8 = 0;
pub(super) const MAY: u8 = 1;
pub(super) const MUST: u8 = 2;
/// Block-wide walk only (`wide.rs`): at least one thread executes the op, the others may.
pub(super) const SOME: u8 = 3;
type Mask = Rc<Vec<u8>>;

/// A view as each thread sees it: its buffer, element offset, shape and strides.
#[derive(Clone, Debug)]
struct ViewAbs {
    buf: Buffer,
    off: Abs,
    shape: Vec<u64>,
    strides: Vec<u64>,
}

/// The walk's state.
pub(super) struct Eval<'k> {
    k: &'k Kernel,
    /// Threads the walk tracks one by one: the block's, or 1 in the block-wide walk.
    pub n: usize,
    /// The block's threads.
    threads: usize,
    /// The block-wide walk (`wide.rs`): one abstract thread for all of them.
    wide: bool,
    /// Refined writes of the block-wide walk: per index values, view dimensions and slice
    /// intervals, the elements.
    memo: WriteMemo,
    /// Slice nodes the block-wide walk recomputed per thread (work units, added per op).
    thread_work: Cell<u64>,
    /// Slice nodes recomputed per thread so far, over all passes and cases.
    refined: u64,
    warp: usize,
    vals: Vec<Abs>,
    views: Vec<Option<Rc<ViewAbs>>>,
    /// Per buffer, the elements initialized on every path so far.
    init: Vec<Vec<u64>>,
    found: BTreeMap<(Obligation, Op), String>,
    /// Only values: no obligations, no writes (the invariant check of iteration arguments).
    dry: bool,
    /// Work units spent (see [`DEFAULT_BUDGET`]), from the first pass on.
    work: u64,
    /// The work budget; past it the walk stops at the next op.
    limit: u64,
    /// The op the walk stopped at when the budget was reached.
    exhausted: Option<Op>,
    /// The first loop that ran fewer concrete iterations than it would have (half the
    /// budget spent).
    cut: Option<Op>,
    ranges: Rc<Ranges>,
    /// The kernel-level trip-count case: this value lies in this interval.
    pin: Option<(Value, Iv)>,
    /// The case's interval misses the value's: nothing found in it counts.
    impossible: bool,
    /// Loops split by trip count (`control.rs`, `trip_cases`).
    split: bool,
    /// Per `for` already evaluated (its region and bounds), what is initialized after it
    /// on every path where it runs at least one iteration.
    siblings: Vec<SiblingLoop>,
}

/// Per write op and the intervals of its index slices, the elements its threads write.
type WriteMemo = HashMap<WriteKey, Rc<Vec<i128>>>;

/// A refined write's memo key: its index values (`None`: an immediate), the view's shape
/// and strides, and the block-wide interval of every slice node (`wide.rs`). The elements
/// are a function of these alone, so writes of different ops with one key (the n stores
/// `store @a[%t]` of the one-buffer family) share one entry.
type WriteKey = (Vec<Option<Value>>, Vec<u64>, Vec<u64>, Vec<(Iv, bool)>);

/// A `for` loop's region and bound operands, and what is initialized after it when it runs.
type SiblingLoop = ((Option<Region>, [Operand; 3]), Vec<Vec<u64>>);

impl<'k> Eval<'k> {
    fn new(
        k: &'k Kernel,
        target: Option<Target>,
        ranges: Rc<Ranges>,
        pin: Option<(Value, Iv)>,
        (split, wide): (bool, bool),
    ) -> Eval<'k> {
        let threads = k.threads() as usize;
        let n = if wide { 1 } else { threads };
        let mut vals = vec![Abs::TOP; k.values.len()];
        for p in &k.params {
            if let Param::Scalar(v) = p {
                let iv = match (*k.param_ranges.get(*v), k.values[*v].ty) {
                    (Some((lo, hi)), _) => Iv::fit(lo as i128, hi as i128),
                    (None, ScalarType::I1) => BOOL,
                    _ => TOP,
                };
                vals[v.index()] = Abs::Uni(iv);
            }
        }
        let init = k
            .buffers
            .values()
            .map(|b| vec![0u64; (b.elements() as usize).div_ceil(64)])
            .collect();
        let mut e = Eval {
            k,
            n,
            threads,
            wide,
            memo: HashMap::default(),
            thread_work: Cell::new(0),
            refined: 0,
            warp: target.map_or(32, |t| t.warp as usize).max(1),
            vals,
            views: vec![None; k.views.len()],
            init,
            found: BTreeMap::new(),
            dry: false,
            work: 0,
            limit: DEFAULT_BUDGET,
            exhausted: None,
            cut: None,
            ranges,
            siblings: Vec::new(),
            pin,
            impossible: false,
            split,
        };
        if let Some((v, _)) = pin {
            let a = e.vals[v.index()].clone();
            e.set(v, a);
        }
        e
    }

    fn not_shown(&mut self, what: Obligation, op: Op, detail: impl FnOnce() -> String) {
        if !self.dry {
            self.found.entry((what, op)).or_insert_with(detail);
        }
    }

    /// Whether checking `what` at `op` again thread by thread adds nothing: it is already
    /// not shown there, or the walk is dry (records nothing).
    fn already(&self, what: Obligation, op: Op) -> bool {
        self.dry || self.found.contains_key(&(what, op))
    }

    pub(super) fn operand(&self, o: &Operand) -> Abs {
        match o {
            Operand::Value(v) => self.vals[v.index()].clone(),
            Operand::Imm(Scalar::I32(c)) => Abs::Uni(Iv::point(*c as i64)),
            Operand::Imm(Scalar::I1(b)) => Abs::Uni(Iv::point(*b as i64)),
            _ => Abs::TOP,
        }
    }

    fn set(&mut self, v: Value, a: Abs) {
        let a = match self.pin {
            Some((p, c)) if p == v && a.uniform() => {
                let x = a.at(0);
                if x.hi < c.lo || x.lo > c.hi {
                    // The value never lies in this case's interval: the case does not happen.
                    self.impossible = true;
                    a
                } else {
                    Abs::Uni(Iv {
                        lo: x.lo.max(c.lo),
                        hi: x.hi.min(c.hi),
                    })
                }
            }
            _ => a,
        };
        self.vals[v.index()] = a;
    }

    /// Evaluates a region's ops under `mask`; returns its `yield` operands.
    fn region(&mut self, r: Region, mask: &Mask) -> Vec<Abs> {
        // Records of loops of an earlier walk of this region do not hold in this one.
        self.siblings.retain(|((reg, _), _)| *reg != Some(r));
        let mut out = Vec::new();
        for &op in self.k.region_ops(r) {
            if self.exhausted.is_some() {
                break;
            }
            if self.work >= self.limit {
                self.exhausted = Some(op);
                break;
            }
            let tw = self.thread_work.replace(0);
            self.work += self.n as u64 + tw;
            self.refined += tw;
            if self.wide && self.refined > self.limit / REFINE_SHARE {
                // Mostly thread by thread: the per-thread walk is the cheaper one.
                self.exhausted = Some(op);
                break;
            }
            if let OpKind::Yield(vs) = &self.k.ops[op].kind {
                out = vs.iter().map(|o| self.operand(o)).collect();
            } else {
                self.op(op, mask);
            }
        }
        out
    }

    fn op(&mut self, op: Op, mask: &Mask) {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::For { .. } => self.for_loop(op, mask),
            OpKind::If { cond } => self.if_op(op, cond, mask),
            OpKind::While { init } => self.while_loop(op, init, mask),
            OpKind::Stage { .. } => {
                for &r in &od.regions {
                    self.region(r, mask);
                }
            }
            OpKind::ViewDef(v) => self.view_def(op, *v, mask),
            _ if self.memory(op, mask) => {}
            _ => self.scalar(op, mask),
        }
    }

    /// A value op: its results' intervals, and C0005 for an integer divisor that may be 0.
    fn scalar(&mut self, op: Op, mask: &Mask) {
        let k = self.k;
        let od = &k.ops[op];
        let Some(&res) = od.results.first() else {
            return;
        };
        let ty = k.values[res].ty;
        let int = matches!(ty, ScalarType::I32 | ScalarType::I1);
        let n = self.n;
        let a = match &od.kind {
            _ if !int => Abs::TOP,
            OpKind::Const(c) => Abs::Uni(Iv::point(c.as_i64())),
            OpKind::Special(s) if self.wide => self.special_wide(*s),
            OpKind::Special(s) => self.special(*s),
            OpKind::InGroup(g) if self.wide => self.in_group_wide(*g),
            OpKind::InGroup(g) => {
                let gd = &k.groups[*g];
                let v = (0..n)
                    .map(|t| Iv::point((gd.lo as usize..gd.hi as usize).contains(&t) as i64))
                    .collect();
                Abs::Per(Rc::new(v))
            }
            OpKind::Binary(b, x, y) => {
                if *b == BinOp::Div || *b == BinOp::Rem {
                    self.divisor(op, y, mask);
                }
                let (x, y) = (self.operand(x), self.operand(y));
                if ty == ScalarType::I1 {
                    Abs::map(&[&x, &y], n, |v| ev::binary_i1(*b, v[0], v[1]))
                } else {
                    Abs::map(&[&x, &y], n, |v| ev::binary(*b, v[0], v[1]))
                }
            }
            OpKind::Unary(u, x) => {
                let x = self.operand(x);
                let i1 = ty == ScalarType::I1;
                Abs::map(&[&x], n, |v| ev::unary(*u, v[0], i1))
            }
            OpKind::Cmp(p, x, y) if self.is_int(x) && self.is_int(y) => {
                let (x, y) = (self.operand(x), self.operand(y));
                Abs::map(&[&x, &y], n, |v| ev::compare(*p, v[0], v[1]))
            }
            OpKind::Select(c, x, y) => self.select(c, x, y),
            _ if ty == ScalarType::I1 => Abs::Var(BOOL),
            _ => Abs::TOP,
        };
        self.set(res, a);
        for &r in &od.results[1..] {
            self.set(r, Abs::TOP);
        }
    }

    /// `select %c, %x, %y`; when `%c` is a comparison of an arm, that arm is narrowed by
    /// the comparison's outcome on its side (`select (%s1 >= 3), 0, %s1` is in `[0, 2]`).
    fn select(&self, c: &Operand, x: &Operand, y: &Operand) -> Abs {
        let n = self.n;
        let (cv, xv, yv) = (self.operand(c), self.operand(x), self.operand(y));
        let cmp = c.value().and_then(|v| match self.k.values[v].def {
            ValueDef::Result(op, 0) => match &self.k.ops[op].kind {
                OpKind::Cmp(p, l, r) if self.is_int(l) && self.is_int(r) => Some((*p, *l, *r)),
                _ => None,
            },
            _ => None,
        });
        let Some((p, l, r)) = cmp else {
            return Abs::map(&[&cv, &xv, &yv], n, |v| pick(v[0], v[1], v[2]));
        };
        let (lv, rv) = (self.operand(&l), self.operand(&r));
        let side = |arm: &Operand| (*arm == l) as u8 + 2 * (*arm == r && l != r) as u8;
        let (sx, sy) = (side(x), side(y));
        Abs::map(&[&cv, &xv, &yv, &lv, &rv], n, |v| {
            if v[0].is_point() {
                return pick(v[0], v[1], v[2]);
            }
            let tx = ev::narrow(p, true, sx, v[1], v[3], v[4]);
            let ty = ev::narrow(p, false, sy, v[2], v[3], v[4]);
            match (tx, ty) {
                (Some(a), Some(b)) => a.hull(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => v[1].hull(v[2]),
            }
        })
    }

    fn is_int(&self, o: &Operand) -> bool {
        match o {
            Operand::Value(v) => {
                matches!(self.k.values[*v].ty, ScalarType::I32 | ScalarType::I1)
            }
            Operand::Imm(Scalar::I32(_) | Scalar::I1(_)) => true,
            _ => false,
        }
    }

    fn divisor(&mut self, op: Op, yo: &Operand, mask: &Mask) {
        let y = self.operand(yo);
        let mut bad = (0..self.n)
            .find(|&t| mask[t] != NOT && y.at(t).contains(0))
            .map(|t| (t, y.at(t)));
        if self.wide && bad.is_some() && !self.already(Obligation::Divisor, op) {
            // The hull holds 0: thread by thread (`%x rem (%t + 1)`).
            bad = self.thread_fails(yo, |i| !i.contains(0));
        }
        if let Some((t, i)) = bad {
            self.not_shown(Obligation::Divisor, op, || {
                format!("divisor in [{}, {}] (thread {t})", i.lo, i.hi)
            });
        }
    }

    fn special(&self, s: Special) -> Abs {
        let k = self.k;
        let n = self.n;
        let per = |f: &dyn Fn(usize) -> i64| {
            Abs::Per(Rc::new((0..n).map(|t| Iv::point(f(t))).collect()))
        };
        let (bx, by) = (k.block[0].max(1) as usize, k.block[1].max(1) as usize);
        match s {
            Special::Tid(0) => per(&|t| (t % bx) as i64),
            Special::Tid(1) => per(&|t| ((t / bx) % by) as i64),
            Special::Tid(_) => per(&|t| (t / (bx * by)) as i64),
            Special::LinearTid => per(&|t| t as i64),
            Special::Lane => per(&|t| (t % self.warp) as i64),
            Special::Warp => per(&|t| (t / self.warp) as i64),
            Special::BlockDim(d) => Abs::Uni(Iv::point(k.block[d.min(2) as usize] as i64)),
            Special::GridDim(d) => Abs::Uni(match k.grid_dim(d) {
                Some(g) => Iv::point(g),
                None => Iv { lo: 1, hi: i32::MAX as i64 },
            }),
            Special::Bid(d) => Abs::Uni(Iv { lo: 0, hi: k.bid_max(d) }),
        }
    }
}

/// `select c, x, y` on intervals.
fn pick(c: Iv, x: Iv, y: Iv) -> Iv {
    match (c.lo, c.hi) {
        (1, 1) => x,
        (0, 0) => y,
        _ => x.hull(y),
    }
}

mod control;
mod memory;
mod wide;
