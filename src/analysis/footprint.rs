//! Footprints: which shared-memory elements each thread touches, per loop iteration.
//!
//! For every shared access (from `ir::effects`, never from opcodes) and every assignment of
//! its enclosing loops' induction variables, the footprint is a [`Touch`]: for each address
//! unit of shared memory, who touches it ([`Who`]: one thread, a layout position of a
//! collective access, or several threads). It is computed by *evaluating* the pure index
//! expression DAG concretely, thread by thread, over the bounded thread domain of the block
//! and the iterations of the loops — exact at GPU block sizes. Guards (`if` conditions of
//! ancestors) are evaluated the same way; an unknown guard means "may execute".
//!
//! Loop domains: a `for` with constant bounds and at most [`MAX_TRIP`] iterations is
//! enumerated exactly. A loop with symbolic bounds is enumerated over residues `0..P` of its
//! induction variable when every expression of the accesses inside it depends on the
//! variable only through `rem`/`and` by constants (period `P`, the lcm; this makes
//! `rem %k, 3` and `rem (k+2), 3` exact); otherwise its variable is unknown. Unknown values
//! (loads, parameters, iteration values) make an index unknown: the access may touch any
//! unit of its buffer (conservative).
//!
//! Address spaces: every unpinned buffer is its own space; pinned buffers (`at N`) share
//! space 0 and are compared by byte range, so aliasing is exact. Addresses are counted in
//! units of the gcd of the element sizes of the space.
//!
//! Lattice per unit: `One(t)` ⊑ `Many(warp)` ⊑ `Many(None)` (join = [`Who::merge`]).
//! Complexity: O(instances · threads · |index DAG|) per access; instances are capped at
//! [`MAX_INSTANCES`] (beyond, inner variables become unknown). Evaluation allocates nothing
//! per thread: values are memoized in a table by value id, where the values that do not read
//! the thread id stay valid for every thread of an instance; a collective access's element
//! keys follow its view's strides. A touch keeps the span of its keys, so two touches of
//! disjoint spans compare in O(1).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::analysis::layout_owners::{CollectiveOwners, collective_owners};
use crate::analysis::touch::TouchBuilder;
use crate::analysis::uniformity::Uniformity;
use crate::ir::*;
use crate::ir::arith::{ceil_div, gcd, lcm};

mod copy_issues;
pub use copy_issues::CopyIssues;

/// Constant loops with more iterations than this are treated like symbolic loops.
pub const MAX_TRIP: i64 = 256;
/// Largest period enumerated for a symbolic loop.
pub const MAX_PERIOD: i64 = 256;
/// Cap on the enumerated iteration assignments of one access.
pub const MAX_INSTANCES: usize = 4096;

/// Names one shared access: an op and the index of the access in its effects.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessRef {
    pub op: Op,
    pub index: usize,
}

/// Who touches an address unit.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Who {
    /// Exactly this thread (linear id).
    One(u32),
    /// The owner of position `pos` under collective layout `layout` (same layout and shape ⇒
    /// same thread; otherwise unknown).
    Lane { layout: u32, pos: u32 },
    /// Two or more threads, or an unknown thread; `Some(w)` when all lie in warp `w`.
    Many(Option<u32>),
}

impl Who {
    /// The join: who touches a unit touched by `self` or by `other`.
    pub fn merge(self, other: Who, warp: u32) -> Who {
        use Who::*;
        match (self, other) {
            (a, b) if a == b => a,
            (One(x), One(y)) => Many((x / warp == y / warp).then_some(x / warp)),
            (Many(w), One(x)) | (One(x), Many(w)) => Many(w.filter(|&w| w == x / warp)),
            (Many(a), Many(b)) => Many(if a == b { a } else { None }),
            _ => Many(None),
        }
    }

    /// Whether two different threads may be involved: `None` when not (same thread), else
    /// `Some(intra_warp)`, true when every such pair of threads lies in one warp.
    pub fn conflict(self, other: Who, warp: u32) -> Option<bool> {
        use Who::*;
        match (self, other) {
            (One(x), One(y)) => (x != y).then_some(x / warp == y / warp),
            (Lane { layout: a, pos: p }, Lane { layout: b, pos: q }) => {
                (a != b || p != q).then_some(false)
            }
            (Many(w), One(x)) | (One(x), Many(w)) => Some(w == Some(x / warp)),
            (Many(a), Many(b)) => Some(a.is_some() && a == b),
            _ => Some(false),
        }
    }

    /// A representative thread, for witnesses.
    pub fn thread(self) -> Option<u32> {
        match self {
            Who::One(t) => Some(t),
            _ => None,
        }
    }
}

pub use super::touch::{Touch, Units};

/// A unit that two touches share with different threads (a conflict's witness): the unit
/// key, who on each side, and whether every conflicting pair is intra-warp.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct UnitConflict {
    pub unit: u64,
    pub a: Who,
    pub b: Who,
    pub intra_warp: bool,
}

/// How a loop's induction variable is enumerated.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum LoopDomain {
    /// Constant bounds: the values `lo, lo+step, ...` (`trip` of them, at most [`MAX_TRIP`]).
    Exact { step: i64, trip: i64 },
    /// Symbolic bounds, accesses periodic in the variable: residues `0..period`.
    Periodic { step: i64, period: i64 },
    /// Unknown variable (or a `while` loop): every iteration distance is possible.
    Unknown { trip: Option<i64> },
}

/// A shared access with its static context.
#[derive(Clone, Debug)]
pub struct AccessInfo {
    pub id: AccessRef,
    pub access: SharedAccess,
    /// Enclosing loops (`for` and `while`), outermost first.
    pub loops: Vec<Op>,
    /// Address space (0 = pinned buffers).
    pub space: u64,
}

/// Footprint answers carried from one [`Footprints`] to another of a kernel that differs
/// only by inserted sync ops (the joint placement's second run, `sync::driver`): every
/// access's instances (with the cap warning their enumeration gives, replayed where the
/// enumeration would have pushed it), its grouped instances, and the pair conflicts.
///
/// **Validity.** Keys are [`AccessRef`]s (op ids): a sync op has no shared access, does not
/// change the loops, guards or values an access depends on, and inserting one
/// (`ir::edit::apply`) keeps every existing id. The owner must not carry a memo elsewhere.
/// Memory: it keeps every address space's footprints (which [`Footprints::clear_caches`]
/// drops between spaces), so callers fill one only when a second placement will read it.
#[derive(Default)]
pub struct FootprintMemo {
    inst: HashMap<AccessRef, (Instances, Option<crate::diag::Diagnostic>)>,
    grouped: HashMap<(AccessRef, usize), Instances>,
    pub(crate) pairs: HashMap<PairKey, crate::analysis::conflicts::PairBits>,
    /// The footprints that carry this memo decide no pair apart by boxes
    /// ([`Footprints::use_boxes`] off: the oracle of the tests, through `sync::PlaceMemo`).
    pub no_boxes: bool,
}

/// A pair-conflict query: the two accesses (by [`AccessRef`]), the common loop prefix, the
/// distance variable, packed by `conflicts::question_key`.
pub(crate) type PairKey = u128;

/// Footprints of every shared access of a kernel, computed lazily and cached.
pub struct Footprints<'k> {
    pub k: &'k Kernel,
    pub warp: u32,
    pub accesses: Vec<AccessInfo>,
    index_of: HashMap<AccessRef, usize>,
    units: HashMap<u64, u64>,
    pub domains: HashMap<Op, LoopDomain>,
    /// The kernel's parent links (maintained by the kernel: tables by op and region id).
    parents: &'k Parents,
    uniform: Uniformity,
    ranges: crate::ir::ranges::Ranges,
    inst_cache: HashMap<usize, Instances>,
    group_cache: HashMap<(usize, usize), Instances>,
    layouts: HashMap<(String, Option<Op>, Vec<u64>), u32>,
    /// The accesses inside each loop.
    inside: HashMap<Op, Vec<usize>>,
    /// Guard conditions that depend on a symbolic loop's variable other than periodically
    /// (e.g. `k + 1 < n`): they evaluate to unknown ("may execute"), so that the loop's
    /// indices can still be evaluated per residue class.
    opaque: HashSet<Value>,
    /// Warnings for answers that are conservative (an index the engine cannot express, a
    /// cap reached): never silent.
    pub conservative: Vec<crate::diag::Diagnostic>,
    /// Accesses whose enumeration hit [`MAX_INSTANCES`] (warned once each).
    capped: HashSet<Op>,
    /// The first cap warning of the enumeration in progress (pushed once it ends).
    cap_note: Option<crate::diag::Diagnostic>,
    /// Answers shared with another kernel's footprints ([`FootprintMemo`]), when carried.
    pub(crate) memo: Option<Box<FootprintMemo>>,
    /// Answer thread questions with the symbolic engine (`analysis::symbolic`) where it
    /// can; false: enumerate always (the oracle).
    pub symbolic: bool,
    /// Pinned buffers that alias without an exact element pairing
    /// ([`crate::ir::layout::inexact_aliases`], both orders): an access to one and an access
    /// to the other are never "same thread" (W1004).
    blind: HashSet<(Buffer, Buffer)>,
    /// The kernel's region paths, built on first use and shared by hazard finding and the
    /// sync model ([`Footprints::paths`]).
    paths: std::cell::OnceCell<std::rc::Rc<crate::analysis::hazards::Paths>>,
    /// Question ids of accesses ([`Footprints::question_id`]; `u32::MAX`: not computed).
    question_ids: Vec<u32>,
    /// Interned question keys.
    question_keys: HashMap<QuestionKey, u32>,
    /// Symbolic pair answers by question ids, common prefix and distance level.
    /// (Keys packed by `conflicts::question_key`; `None`: the engine has no answer.)
    pub(crate) sym_questions: HashMap<u128, Option<crate::analysis::conflicts::PairBits>>,
    /// Symbolic self-race answers by question id.
    pub(crate) sym_self_questions: HashMap<u32, Option<bool>>,
    /// The enumeration's memo of evaluated values, kept between instances.
    eval_memo: Option<DenseMemo>,
    /// The enumeration's index lists, kept between instances.
    scratch: IndexScratch,
    /// Pair-conflict answers of this kernel by accesses, common prefix and distance level
    /// (`conflicts::pair_conflict`: hazard finding asks some pairs several times).
    /// (Keys packed by `conflicts::question_key` from the access indices.)
    pub(crate) pair_answers: HashMap<u128, crate::analysis::conflicts::PairBits>,
    /// Facts of the arms of thread-dependent branches for async sources
    /// (`hazards::async_divergent_arms`), per branch and per copy.
    pub(crate) arm_facts: crate::analysis::hazards::ArmFacts,
    /// Decide pairs of accesses apart by their footprint boxes before any conflict question
    /// ([`Footprints::boxes_apart`]); off under `SMEMSYNC_HAZARD_NO_BOXES` (the oracle).
    pub use_boxes: bool,
    /// Pair questions answered by neither a map of answers nor the boxes (for measuring
    /// them: `conflicts::pair_conflict`).
    pub pair_questions: u64,
    /// Value intervals and boxes of the accesses, built on first use.
    boxes: Option<crate::analysis::boxes::Boxes<'k>>,
    /// Per access: `None` not computed yet, `Some(None)` no box.
    /// Per access, its root buffer with its box (`None`: not computed yet; `Some(None)`: no
    /// box), so that a pair costs two slot reads and one interval test per dimension.
    access_boxes: Vec<Option<Option<(Buffer, crate::analysis::boxes::FootBox)>>>,
    /// The symbolic engine's side templates and pair answers by translation-normalized key
    /// (`symbolic::pairs`).
    pub(crate) sym_sides: crate::analysis::symbolic::pairs::Templates,
}

/// What the symbolic engine's answers about one access depend on, with the identity of its
/// buffer and loops replaced by what the engine reads of them ([`Footprints::question_id`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct QuestionKey {
    /// The buffer's element type, shape and pin offset; or the memref itself (a view, or a
    /// buffer with a shared layout).
    mem: Result<(ElemType, Vec<u64>, Option<u64>), MemRef>,
    /// Index operands, then per enclosing loop its signature, then per guard its condition
    /// and arm.
    words: Vec<u64>,
}

/// Values of loop variables for [`Footprints::eval`].
pub type Env = HashMap<Value, i64>;

/// A memo of the values [`Footprints::eval`] computed for one thread under one [`Env`].
pub trait EvalMemo {
    /// The value memoized for `v` (`Some(None)`: known to be unknown).
    fn get(&self, v: Value) -> Option<Option<i64>>;
    fn put(&mut self, v: Value, r: Option<i64>);
}

impl EvalMemo for HashMap<Value, Option<i64>> {
    fn get(&self, v: Value) -> Option<Option<i64>> {
        HashMap::get(self, &v).copied()
    }
    fn put(&mut self, v: Value, r: Option<i64>) {
        self.insert(v, r);
    }
}

/// The enumeration's memo: a slot per value id, stamped with the loop assignment (values that
/// do not depend on the thread) or the thread it was computed for, so that moving on to the
/// next thread forgets the thread's values in O(1) and keeps the others
/// ([`DenseMemo::new_thread`]): no hashing and no allocation per thread evaluated, and each
/// thread-independent value (a loop-variable expression, a view's slot) evaluated once per
/// instance rather than once per thread.
struct DenseMemo {
    slots: Vec<(u32, Option<i64>)>,
    /// By value id: whether the value's evaluation may read the thread id
    /// ([`thread_dependent`]).
    per_thread: Vec<bool>,
    env_stamp: u32,
    thread_stamp: u32,
    last: u32,
}

impl DenseMemo {
    fn new(k: &Kernel) -> Self {
        DenseMemo {
            slots: vec![(0, None); k.values.len()],
            per_thread: thread_dependent(k),
            env_stamp: 1,
            thread_stamp: 2,
            last: 2,
        }
    }

    /// Forgets every value: the loop variables changed.
    fn new_env(&mut self) {
        if self.last >= u32::MAX - 2 {
            self.slots.fill((0, None));
            self.last = 0;
        }
        self.env_stamp = self.last + 1;
        self.thread_stamp = self.last + 2;
        self.last += 2;
    }

    /// Forgets the values that depend on the thread.
    fn new_thread(&mut self) {
        if self.last >= u32::MAX - 2 {
            self.new_env();
        } else {
            self.last += 1;
            self.thread_stamp = self.last;
        }
    }
}

impl EvalMemo for DenseMemo {
    fn get(&self, v: Value) -> Option<Option<i64>> {
        let &(s, r) = self.slots.get(v.index())?;
        (s == self.thread_stamp || s == self.env_stamp).then_some(r)
    }
    fn put(&mut self, v: Value, r: Option<i64>) {
        let stamp = if self.per_thread.get(v.index()).copied().unwrap_or(true) {
            self.thread_stamp
        } else {
            self.env_stamp
        };
        if let Some(slot) = self.slots.get_mut(v.index()) {
            *slot = (stamp, r);
        }
    }
}

/// By value id: whether [`Footprints::eval`] of the value may read the thread id (a thread
/// special, a group test, or an operand that does). Values `eval` does not compute (loads,
/// parameters, loop arguments) do not. A value met again while its operands are visited (no
/// such cycle exists in valid IR) counts as dependent, the answer that keeps it per thread.
/// O(values), with an explicit stack.
fn thread_dependent(k: &Kernel) -> Vec<bool> {
    const OPEN: u8 = 1;
    const NO: u8 = 2;
    const YES: u8 = 3;
    let inputs = |v: Value, out: &mut Vec<Value>| -> bool {
        out.clear();
        let ValueDef::Result(op, n) = k.values[v].def else {
            return false;
        };
        let mut push = |o: &Operand| {
            if let Some(x) = o.value() {
                out.push(x);
            }
        };
        if let Some((c, x, y)) = if_result_parts(k, op, n) {
            push(&c);
            push(&x);
            push(&y);
            return false;
        }
        match &k.ops[op].kind {
            OpKind::Special(s) => matches!(
                s,
                Special::Tid(_) | Special::Lane | Special::Warp | Special::LinearTid
            ),
            OpKind::InGroup(_) => true,
            OpKind::Binary(_, x, y) | OpKind::Cmp(_, x, y) => {
                push(x);
                push(y);
                false
            }
            OpKind::Unary(_, x) => {
                push(x);
                false
            }
            OpKind::Select(c, x, y) => {
                push(c);
                push(x);
                push(y);
                false
            }
            _ => false,
        }
    };
    let mut state = vec![0u8; k.values.len()];
    let mut stack: Vec<(Value, bool)> = Vec::new();
    let mut ins = Vec::new();
    for start in k.values.keys() {
        if state[start.index()] != 0 {
            continue;
        }
        stack.push((start, false));
        while let Some((v, done)) = stack.pop() {
            if done {
                let own = inputs(v, &mut ins);
                let dep = own || ins.iter().any(|x| matches!(state[x.index()], OPEN | YES));
                state[v.index()] = if dep { YES } else { NO };
            } else if state[v.index()] == 0 {
                state[v.index()] = OPEN;
                stack.push((v, true));
                inputs(v, &mut ins);
                stack.extend(ins.iter().filter(|x| state[x.index()] == 0).map(|&x| (x, false)));
            }
        }
    }
    state.into_iter().map(|x| x != NO).collect()
}

/// Index lists reused by [`Footprints::touch`] across threads and elements.
#[derive(Default)]
struct IndexScratch {
    /// Indices into the memref being resolved (`None`: unknown).
    cur: Vec<Option<i64>>,
    /// The next level's indices while a view is resolved.
    next: Vec<Option<i64>>,
    /// The root buffer's indices, once all are known.
    root: Vec<i64>,
}

/// Instances of an access: loop keys (outermost first; `None` = unknown) and touches.
pub type Instances = std::rc::Rc<Vec<(Vec<Option<i64>>, Touch)>>;


/// How a value depends on one loop's induction variable.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Dep {
    Indep,
    /// `Poly(p, q)`: a polynomial in the variable, plus periodic functions of period `p`,
    /// possibly floor-divided by constants whose product is `q`. What holds: for every
    /// `c >= 1`, `x(k + lcm(p, q·c)) ≡ x(k) (mod c)` — ring ops keep it (lcm of both
    /// parameters), `rem x, c` is periodic with period `lcm(p, q·c)`, and `div x, c` (no
    /// wrap-around) is `Poly(p, q·c)`: `rem (div %k, 64), 3` repeats every 192 values of `%k`.
    Poly(i64, i64),
    /// A periodic function with this period (in values of the variable).
    Periodic(i64),
    Bad,
}

impl<'k> Footprints<'k> {
    /// The value ranges of the kernel ([`crate::ir::ranges::Ranges`]).
    pub fn ranges(&self) -> &crate::ir::ranges::Ranges {
        &self.ranges
    }

    /// Collects the accesses of `k` and their loop domains.
    pub fn new(k: &'k Kernel, warp: u32) -> Self {
        let uniform = crate::analysis::uniformity::analyze(k);
        let mut units: HashMap<u64, u64> = HashMap::default();
        for (b, bd) in k.buffers.iter() {
            let space = if bd.offset.is_some() {
                0
            } else {
                b.index() as u64 + 1
            };
            let e = bd.elem.bytes() as i64;
            units
                .entry(space)
                .and_modify(|u| *u = gcd(*u as i64, e) as u64)
                .or_insert(e as u64);
        }
        let mut fp = Footprints {
            k,
            warp: warp.max(1),
            accesses: Vec::new(),
            index_of: HashMap::default(),
            units,
            domains: HashMap::default(),
            opaque: HashSet::default(),
            parents: k.parents(),
            uniform,
            ranges: crate::ir::ranges::Ranges::new(k),
            inst_cache: HashMap::default(),
            group_cache: HashMap::default(),
            layouts: HashMap::default(),
            inside: HashMap::default(),
            conservative: Vec::new(),
            capped: HashSet::default(),
            cap_note: None,
            memo: None,
            symbolic: true,
            blind: crate::ir::layout::inexact_aliases(k)
                .into_iter()
                .flat_map(|(b, c)| [(b, c), (c, b)])
                .collect(),
            paths: std::cell::OnceCell::new(),
            question_ids: Vec::new(),
            question_keys: HashMap::default(),
            sym_questions: HashMap::default(),
            sym_self_questions: HashMap::default(),
            eval_memo: None,
            scratch: IndexScratch::default(),
            pair_answers: HashMap::default(),
            arm_facts: Default::default(),
            use_boxes: !no_boxes_env(),
            pair_questions: 0,
            boxes: None,
            access_boxes: Vec::new(),
            sym_sides: Default::default(),
        };
        for op in k.ops_in_order() {
            let eff = effects(k, op);
            // Data accesses first, then the mbarrier-object accesses (`analysis::mbar_object`:
            // init and inval write the object, its other uses read it), numbered after them.
            let data = eff
                .shared
                .into_iter()
                .filter(|a| k.buffers[k.root_buffer(a.mem)].elem != ElemType::MBarrier);
            let object = crate::analysis::mbar_object::object_accesses(k, op);
            for (i, a) in data.chain(object).enumerate() {
                let b = k.root_buffer(a.mem);
                let space = if k.buffers[b].offset.is_some() {
                    0
                } else {
                    b.index() as u64 + 1
                };
                let loops = fp.loops_of(op);
                let id = AccessRef { op, index: i };
                fp.index_of.insert(id, fp.accesses.len());
                fp.accesses.push(AccessInfo {
                    id,
                    access: a,
                    loops,
                    space,
                });
            }
        }
        let mut inside: HashMap<Op, Vec<usize>> = HashMap::default();
        for (i, a) in fp.accesses.iter().enumerate() {
            for &l in &a.loops {
                inside.entry(l).or_default().push(i);
            }
        }
        fp.inside = inside;
        let loop_ops: Vec<Op> = k
            .ops
            .keys()
            .filter(|&o| matches!(k.ops[o].kind, OpKind::For { .. } | OpKind::While { .. }))
            .collect();
        for l in loop_ops {
            let (d, opaque, dropped) = fp.domain(l);
            if let LoopDomain::Unknown { .. } = d
                && let Some(w) = fp.wrap_warning(l).or_else(|| fp.imprecision_warning(l))
            {
                fp.conservative.push(w);
            }
            if let Some(&v) = dropped.first() {
                fp.conservative.push(fp.period_warning(l, v));
            }
            if let Some(w) = fp.symbolic_step_warning(l, &d) {
                fp.conservative.push(w);
            }
            fp.domains.insert(l, d);
            fp.opaque.extend(opaque);
        }
        let w = fp.iteration_value_warnings();
        fp.conservative.extend(w);
        fp
    }

    /// W0316: a `for` loop whose step is not a constant, with an access inside whose
    /// footprint depends on its variable: the variable is unknown and the accesses relate at
    /// every iteration distance.
    fn symbolic_step_warning(&self, l: Op, d: &LoopDomain) -> Option<crate::diag::Diagnostic> {
        let k = self.k;
        let OpKind::For { step, .. } = &k.ops[l].kind else {
            return None;
        };
        let mut memo = HashMap::default();
        let symbolic = self.eval_operand(step, &Env::default(), 0, &mut memo).is_none();
        if !symbolic || !matches!(d, LoopDomain::Unknown { .. }) {
            return None;
        }
        let iv = *k.region_args(*k.ops[l].regions.first()?).first()?;
        let &ai = self
            .inside
            .get(&l)?
            .iter()
            .find(|&&ai| self.depends_on(ai, l, iv))?;
        let op = self.accesses[ai].id.op;
        let msg = format!(
            "{} is analysed for every iteration distance of the loop over `{}`: the loop's \
             step is not a constant",
            crate::emit::text::op_label(k, op),
            local_name(k, iv)
        );
        Some(imprecise(k, "W0316", msg, op))
    }

    /// W0315: an iteration value (of a `for` or `while` loop) that an access's indices,
    /// views or guards use, and that `ir::induction` did not recognize as a periodic function
    /// of the iteration number: it is unknown there (the access may touch its whole buffer).
    /// One warning per value, naming it, the access and the reason.
    fn iteration_value_warnings(&self) -> Vec<crate::diag::Diagnostic> {
        let k = self.k;
        let mut out = Vec::new();
        let mut warned = std::collections::HashSet::new();
        for a in &self.accesses {
            let mut stack = self.relevant_values(a, a.id.op);
            let mut seen = std::collections::HashSet::new();
            while let Some(v) = stack.pop() {
                if !seen.insert(v) {
                    continue;
                }
                match k.values[v].def {
                    ValueDef::Result(op, _) if !matches!(k.ops[op].kind, OpKind::If { .. }) => {
                        k.ops[op].kind.for_each_operand(|o| stack.extend(o.value()));
                    }
                    ValueDef::RegionArg(r, n) if warned.insert(v) => {
                        let why = match self.ranges.inductions.failed.get(&v) {
                            Some((_, why)) => why.clone(),
                            None if n == 0 || self.ranges.inductions.get(v).is_some() => {
                                warned.remove(&v);
                                continue;
                            }
                            None => match self.parent_of_region(r) {
                                Some(l) if matches!(k.ops[l].kind, OpKind::For { .. }) => {
                                    warned.remove(&v);
                                    continue;
                                }
                                _ => "it is carried by a `while` loop".to_string(),
                            },
                        };
                        let msg = format!(
                            "{} is analysed with `{}` unknown: smemsync cannot express this \
                             iteration value as a function of the iteration number ({why})",
                            crate::emit::text::op_label(k, a.id.op),
                            local_name(k, v),
                        );
                        out.push(imprecise(k, "W0315", msg, a.id.op).with_help(
                            "start it at a constant and advance it by a function of the loop's \
                             counters alone (`select`-wrap, `rem (add %s, 1), S`), or index \
                             with `rem %k, S`",
                        ));
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// The op owning a region.
    fn parent_of_region(&self, r: Region) -> Option<Op> {
        self.k
            .ops
            .iter()
            .find(|(_, od)| od.regions.contains(&r))
            .map(|(op, _)| op)
    }

    /// A warning when a `for` loop with uniform bounds and a constant step lost its domain:
    /// an access's index depends on its variable other than periodically (W0311), or the
    /// period exceeds [`MAX_PERIOD`] (W0312). Its accesses then relate at every distance.
    fn imprecision_warning(&self, l: Op) -> Option<crate::diag::Diagnostic> {
        let k = self.k;
        let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else {
            return None;
        };
        let uniform = [lo, hi, step]
            .iter()
            .all(|o| self.uniform.operand_uniform(o));
        if !uniform || !matches!(step, Operand::Imm(_)) && step.value().is_none() {
            return None;
        }
        let iv = *k.region_args(*k.ops[l].regions.first()?).first()?;
        let mut memo = HashMap::default();
        for &ai in self.inside.get(&l)? {
            let a = &self.accesses[ai];
            let guards = self.guard_values(a, l);
            for v in self.relevant_values(a, l) {
                if matches!(self.dep(v, iv, &mut memo), Dep::Poly(..) | Dep::Bad)
                    && !guards.contains(&v)
                {
                    let why = if v == iv {
                        "its index uses the variable directly".to_string()
                    } else {
                        format!(
                            "`{}` depends on it other than through `rem`/`and` by a constant",
                            local_name(k, v)
                        )
                    };
                    let msg = format!(
                        "{} is analysed for every iteration distance of the loop over `{}`: {why}",
                        crate::emit::text::op_label(k, a.id.op),
                        local_name(k, iv),
                    );
                    return Some(imprecise(k, "W0311", msg, a.id.op));
                }
            }
        }
        None
    }

    /// W0312: value `v` repeats with a period that does not fit [`MAX_PERIOD`] together with
    /// the loop's others; it is unknown inside loop `l` (the other indices stay exact).
    fn period_warning(&self, l: Op, v: Value) -> crate::diag::Diagnostic {
        let k = self.k;
        let iv = k.region_args(k.ops[l].regions[0])[0];
        let msg = format!(
            "`{}` repeats too rarely in the loop over `{}` (with the loop's other indices, \
             the period exceeds {MAX_PERIOD}): it is analysed as unknown",
            local_name(k, v),
            local_name(k, iv)
        );
        let at = match k.values[v].def {
            ValueDef::Result(op, _) => op,
            _ => l,
        };
        imprecise(k, "W0312", msg, at)
    }

    /// A warning when a symbolic loop lost its periodic domain only because a slot index
    /// (`rem x, c`, c not a power of two) may wrap around i32: the answer is conservative, and
    /// a declared parameter range would make it exact.
    fn wrap_warning(&self, l: Op) -> Option<crate::diag::Diagnostic> {
        let k = self.k;
        let iv = *k.region_args(*k.ops[l].regions.first()?).first()?;
        let mut memo = HashMap::default();
        let mut seen = HashSet::default();
        let mut stack: Vec<Value> = Vec::new();
        for &ai in self.inside.get(&l)? {
            stack.extend(self.relevant_values(&self.accesses[ai], l));
        }
        while let Some(v) = stack.pop() {
            let ValueDef::Result(op, _) = k.values[v].def else {
                continue;
            };
            if !seen.insert(v) {
                continue;
            }
            if let OpKind::Binary(BinOp::Rem, x, Operand::Imm(Scalar::I32(c))) = &k.ops[op].kind
                && let Some(xv) = x.value()
                && matches!(self.dep(xv, iv, &mut memo), Dep::Poly(..))
                && !self.wrap_safe(x, *c as i64)
            {
                let span = k.span(op);
                return Some(
                    crate::diag::Diagnostic::warning(
                        crate::diag::DiagKind::Finding,
                        "W0310",
                        format!(
                            "`{}` is periodic in the loop only if `{}` never wraps around i32; \
                             the loop's accesses are analysed conservatively",
                            local_name(k, v),
                            local_name(k, xv)
                        ),
                    )
                    .with_label(span, "may wrap for large trip counts")
                    .with_help(
                        "declare the range of the trip-count parameter (`%n: i32 in [0, 65536]`) \
                         so that smemsync can prove the index does not wrap",
                    ),
                );
            }
            let mut kind = k.ops[op].kind.clone();
            kind.for_each_operand_mut(&mut |o| stack.extend(o.value()));
        }
        None
    }

    /// Whether `v` is a guard comparison evaluated as unknown ("may execute"), see `opaque`.
    pub(crate) fn is_opaque(&self, v: Value) -> bool {
        self.opaque.contains(&v)
    }

    /// The loop variable of a recognized periodic iteration value (`ir::induction`).
    pub(crate) fn induction_iv(&self, v: Value) -> Option<Value> {
        self.ranges.inductions.get(v).map(|i| i.iv)
    }

    /// An affine counter (`ir::induction`, drift) as `(iv, a, b)`: `v = a·iv + b`.
    pub(crate) fn affine_counter(&self, v: Value) -> Option<(Value, i64, i64)> {
        let i = self.ranges.inductions.get(v).filter(|i| !i.periodic())?;
        let (a, b) = i.affine_in_iv()?;
        Some((i.iv, a, b))
    }

    pub fn uniformity(&self) -> &Uniformity {
        &self.uniform
    }

    pub fn index(&self, a: AccessRef) -> Option<usize> {
        self.index_of.get(&a).copied()
    }

    /// Ancestor ops of `op`, outermost first.
    pub fn ancestors(&self, op: Op) -> Vec<Op> {
        let mut v = Vec::new();
        let mut cur = self.parents.parent_op(op);
        while let Some(p) = cur {
            v.push(p);
            cur = self.parents.parent_op(p);
        }
        v.reverse();
        v
    }

    pub fn region_of(&self, op: Op) -> Option<Region> {
        self.parents.op_region[op]
    }

    pub fn loops_of(&self, op: Op) -> Vec<Op> {
        self.ancestors(op)
            .into_iter()
            .filter(|&o| {
                matches!(
                    self.k.ops[o].kind,
                    OpKind::For { .. } | OpKind::While { .. }
                )
            })
            .collect()
    }

    /// The unit size (bytes) of an address space.
    pub fn unit(&self, space: u64) -> u64 {
        self.units.get(&space).copied().unwrap_or(1).max(1)
    }

    /// Describes a unit key as `@buffer[element]` for explanations.
    pub fn describe_unit(&self, key: u64) -> String {
        let space = key >> 40;
        let byte = (key & ((1 << 40) - 1)) * self.unit(space);
        for (b, bd) in self.k.buffers.iter() {
            let (bs, base) = match bd.offset {
                Some(o) => (0, o),
                None => (b.index() as u64 + 1, 0),
            };
            if bs == space && byte >= base && byte < base + bd.bytes() {
                let mut lin = (byte - base) / bd.elem.bytes();
                let mut idx = vec![0; bd.shape.len()];
                for (i, &d) in bd.shape.iter().enumerate().rev() {
                    idx[i] = lin % d.max(1);
                    lin /= d.max(1);
                }
                let s: Vec<String> = idx.iter().map(|x| x.to_string()).collect();
                return format!("@{}[{}]", bd.name, s.join(", "));
            }
        }
        format!("byte {byte}")
    }

    // ---- evaluation ----

    fn eval_operand<M: EvalMemo>(
        &self,
        o: &Operand,
        env: &Env,
        tid: u32,
        memo: &mut M,
    ) -> Option<i64> {
        match o {
            Operand::Imm(s) => match s {
                Scalar::I1(b) => Some(*b as i64),
                Scalar::I32(v) => Some(*v as i64),
                Scalar::F32(_) => None,
            },
            Operand::Value(v) => self.eval_in(*v, env, tid, memo),
        }
    }

    /// Evaluates an integer value for thread `tid` with the loop variables of `env`.
    pub fn eval(
        &self,
        v: Value,
        env: &Env,
        tid: u32,
        memo: &mut HashMap<Value, Option<i64>>,
    ) -> Option<i64> {
        self.eval_in(v, env, tid, memo)
    }

    /// [`Footprints::eval`] with any memo of evaluated values.
    fn eval_in<M: EvalMemo>(&self, v: Value, env: &Env, tid: u32, memo: &mut M) -> Option<i64> {
        if let Some(r) = memo.get(v) {
            return r;
        }
        if !self.opaque.is_empty() && self.opaque.contains(&v) {
            return None;
        }
        let k = self.k;
        let r = match k.values[v].def {
            ValueDef::Param(_) => None,
            ValueDef::RegionArg(..) => env.get(&v).copied().or_else(|| {
                let ind = self.ranges.inductions.get(v)?;
                ind.at(*env.get(&ind.iv)?)
            }),
            ValueDef::Result(op, n) => {
                let ev = |o: &Operand, memo: &mut M| self.eval_operand(o, env, tid, memo);
                if let Some((c, x, y)) = if_result_parts(k, op, n) {
                    // An `if` result is the yield of the arm its condition takes, as `select`.
                    let r = match ev(&c, memo) {
                        Some(c) if c != 0 => ev(&x, memo),
                        Some(_) => ev(&y, memo),
                        None => None,
                    };
                    memo.put(v, r);
                    return r;
                }
                match &k.ops[op].kind {
                    OpKind::Const(s) => self.eval_operand(&Operand::Imm(*s), env, tid, memo),
                    OpKind::Special(s) => special_value(k, *s, tid, self.warp),
                    OpKind::Binary(b, x, y) => {
                        let (x, y) = (ev(x, memo), ev(y, memo));
                        let bool_ty = k.values[v].ty == ScalarType::I1;
                        match (x, y) {
                            (Some(x), Some(y)) => binop(*b, x, y),
                            // Three-valued logic on guards: `false and ?` is false, `true or ?`
                            // is true, so a thread-dependent guard combined with an unknown
                            // uniform one still decides which threads cannot execute.
                            (Some(0), None) | (None, Some(0)) if bool_ty && *b == BinOp::And => {
                                Some(0)
                            }
                            (Some(c), None) | (None, Some(c))
                                if bool_ty && *b == BinOp::Or && c != 0 =>
                            {
                                Some(1)
                            }
                            _ => None,
                        }
                    }
                    OpKind::Unary(u, x) => ev(x, memo).and_then(|x| match u {
                        UnOp::Neg => Some(wrap(-x)),
                        UnOp::Not => Some(if k.values[v].ty == ScalarType::I1 {
                            1 - x
                        } else {
                            wrap(!x)
                        }),
                        UnOp::Abs => Some(wrap(x.abs())),
                        _ => None,
                    }),
                    OpKind::Cmp(p, x, y) => match (ev(x, memo), ev(y, memo)) {
                        (Some(x), Some(y)) => Some(p.holds(x, y) as i64),
                        _ => None,
                    },
                    OpKind::Select(c, x, y) => match ev(c, memo) {
                        Some(c) => {
                            if c != 0 {
                                ev(x, memo)
                            } else {
                                ev(y, memo)
                            }
                        }
                        None => None,
                    },
                    OpKind::InGroup(g) => {
                        let gd = &k.groups[*g];
                        Some((tid >= gd.lo && tid < gd.hi) as i64)
                    }
                    _ => None,
                }
            }
        };
        memo.put(v, r);
        r
    }

    // ---- loop domains ----

    /// Whether `rem x, c` of a polynomial `x` keeps the integer periodicity under i32
    /// wrap-around: `c` divides 2^32, or `x` provably never wraps (`analysis::ranges`).
    fn wrap_safe(&self, x: &Operand, c: i64) -> bool {
        (c as u64).is_power_of_two() || self.wrap_free(x)
    }

    /// Whether an operand's `i32` value is its exact integer value (`ir::ranges`).
    fn wrap_free(&self, x: &Operand) -> bool {
        x.value().is_none_or(|v| self.ranges.exact(v))
    }

    fn dep(&self, v: Value, iv: Value, memo: &mut HashMap<Value, Dep>) -> Dep {
        if v == iv {
            return Dep::Poly(1, 1);
        }
        if let Some(d) = memo.get(&v) {
            return *d;
        }
        let k = self.k;
        let d = match k.values[v].def {
            // A recognized periodic iteration value of this loop (`ir::induction`): periodic
            // in the loop variable over the values the loop takes (see `enumerate`).
            ValueDef::RegionArg(..) => match self.ranges.inductions.get(v) {
                Some(ind) if ind.iv == iv && ind.periodic() => Dep::Periodic(ind.iv_period()),
                // An affine counter: it changes by `drift` every `iv_period` values of the
                // variable, so it has the algebra of a polynomial with that period.
                Some(ind) if ind.iv == iv => Dep::Poly(ind.iv_period(), ind.iv_period()),
                _ => Dep::Indep,
            },
            ValueDef::Param(_) => Dep::Indep,
            ValueDef::Result(op, n) if if_result_parts(k, op, n).is_some() => {
                let od = |o: &Operand, memo: &mut HashMap<Value, Dep>| {
                    o.value().map_or(Dep::Indep, |x| self.dep(x, iv, memo))
                };
                let (c, x, y) = if_result_parts(k, op, n).unwrap_or_else(|| unreachable!());
                let (dc, dx, dy) = (od(&c, memo), od(&x, memo), od(&y, memo));
                generic(&[dc, dx, dy])
            }
            ValueDef::Result(op, _) => {
                let od = |o: &Operand, memo: &mut HashMap<Value, Dep>| {
                    o.value().map_or(Dep::Indep, |x| self.dep(x, iv, memo))
                };
                let konst = |o: &Operand| match o {
                    Operand::Imm(Scalar::I32(c)) => Some(*c as i64),
                    Operand::Value(x) => match k.values[*x].def {
                        ValueDef::Result(op, _) => match k.ops[op].kind {
                            OpKind::Const(Scalar::I32(c)) => Some(c as i64),
                            _ => None,
                        },
                        _ => None,
                    },
                    _ => None,
                };
                match &k.ops[op].kind {
                    OpKind::Binary(b, x, y) => {
                        let (dx, dy) = (od(x, memo), od(y, memo));
                        match b {
                            BinOp::Add | BinOp::Sub | BinOp::Mul => ring(dx, dy),
                            BinOp::Shl if dy == Dep::Indep => dx,
                            // Over the integers a polynomial mod c is periodic; i32 wraps,
                            // which keeps that only when c divides 2^32 or no wrap occurs.
                            BinOp::Rem => match konst(y) {
                                Some(c)
                                    if c > 0
                                        && matches!(dx, Dep::Poly(..))
                                        && !self.wrap_safe(x, c) =>
                                {
                                    Dep::Bad
                                }
                                Some(c) if c > 0 => reduce(dx, c),
                                _ => generic(&[dx, dy]),
                            },
                            // Floor division of an exact (non-wrapping) value by a constant.
                            BinOp::Div => match (konst(y), dx) {
                                (Some(c), Dep::Poly(p, q)) if c > 0 && self.wrap_free(x) => {
                                    Dep::Poly(p, q.saturating_mul(c))
                                }
                                (Some(c), Dep::Indep | Dep::Periodic(_)) if c != 0 => dx,
                                _ => generic(&[dx, dy]),
                            },
                            BinOp::Shr => match (konst(y), dx) {
                                (Some(s), Dep::Poly(p, q)) if (0..31).contains(&s) && self.wrap_free(x) => {
                                    Dep::Poly(p, q.saturating_mul(1 << s))
                                }
                                _ => generic(&[dx, dy]),
                            },
                            BinOp::And => match konst(y) {
                                Some(c) if c >= 0 && (c + 1) & c == 0 => reduce(dx, c + 1),
                                _ => generic(&[dx, dy]),
                            },
                            _ => generic(&[dx, dy]),
                        }
                    }
                    OpKind::Unary(UnOp::Neg, x) => od(x, memo),
                    OpKind::Unary(_, x) | OpKind::Cast(_, x) => generic(&[od(x, memo)]),
                    OpKind::Cmp(_, x, y) => {
                        let (dx, dy) = (od(x, memo), od(y, memo));
                        generic(&[dx, dy])
                    }
                    OpKind::Select(c, x, y) => {
                        let (a, b, cc) = (od(x, memo), od(y, memo), od(c, memo));
                        generic(&[a, b, cc])
                    }
                    _ => Dep::Indep,
                }
            }
        };
        // Exactly periodic although the algebra above does not see it (`x - (x / 3)·3`).
        let d = match d {
            Dep::Poly(..) | Dep::Bad => {
                crate::ir::iterfn::period_in_iv(k, &self.ranges, v, iv).map_or(d, Dep::Periodic)
            }
            d => d,
        };
        memo.insert(v, d);
        d
    }

    /// The integer values an access depends on: indices, view indices, guard conditions and
    /// bounds of loops between `l` and the access.
    /// Collects the comparisons of a boolean guard (through `and`/`or`/`xor`/`not`/`select`)
    /// that do not depend periodically on `iv`; anything else non-periodic is collected whole.
    fn opaque_comparisons(
        &self,
        v: Value,
        iv: Value,
        memo: &mut HashMap<Value, Dep>,
        out: &mut Vec<Value>,
    ) {
        if matches!(self.dep(v, iv, memo), Dep::Indep | Dep::Periodic(_)) {
            return;
        }
        let k = self.k;
        let ValueDef::Result(op, _) = k.values[v].def else {
            out.push(v);
            return;
        };
        let mut recurse = |o: &Operand, out: &mut Vec<Value>| {
            if let Some(x) = o.value() {
                self.opaque_comparisons(x, iv, memo, out);
            }
        };
        match &k.ops[op].kind {
            OpKind::Binary(BinOp::And | BinOp::Or | BinOp::Xor, a, b)
                if k.values[v].ty == ScalarType::I1 =>
            {
                recurse(a, out);
                recurse(b, out);
            }
            OpKind::Unary(UnOp::Not, a) if k.values[v].ty == ScalarType::I1 => recurse(a, out),
            _ => out.push(v),
        }
    }

    /// The conditions of the `if`s between loop `l` and the access.
    fn guard_values(&self, a: &AccessInfo, l: Op) -> Vec<Value> {
        let anc = self.ancestors(a.id.op);
        let start = anc.iter().position(|&o| o == l).map_or(0, |p| p + 1);
        anc[start..]
            .iter()
            .filter_map(|&o| match &self.k.ops[o].kind {
                OpKind::If { cond } => cond.value(),
                _ => None,
            })
            .collect()
    }

    fn relevant_values(&self, a: &AccessInfo, l: Op) -> Vec<Value> {
        let mut out = Vec::new();
        if let Footprint::PerThread(ix) = &a.access.footprint {
            out.extend(ix.iter().filter_map(|o| o.value()));
        }
        let mut m = a.access.mem;
        while let MemRef::View(v) = m {
            for ix in &self.k.views[v].indices {
                if let ViewIndex::At(Operand::Value(x)) = ix {
                    out.push(*x);
                }
            }
            m = self.k.views[v].base;
        }
        let anc = self.ancestors(a.id.op);
        let start = anc.iter().position(|&o| o == l).map_or(0, |p| p + 1);
        for &o in &anc[start..] {
            match &self.k.ops[o].kind {
                OpKind::If { cond } => out.extend(cond.value()),
                OpKind::For { lo, hi, step, .. } => {
                    out.extend([lo, hi, step].iter().filter_map(|x| x.value()))
                }
                _ => {}
            }
        }
        out
    }

    /// The loop's domain, the values that must be treated as unknown for it (non-periodic
    /// guard comparisons, and values whose period does not fit), and those of the latter.
    fn domain(&self, l: Op) -> (LoopDomain, Vec<Value>, Vec<Value>) {
        let k = self.k;
        let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else {
            return (LoopDomain::Unknown { trip: None }, Vec::new(), Vec::new());
        };
        let bounds_uniform = [lo, hi, step]
            .iter()
            .all(|o| self.uniform.operand_uniform(o));
        let env = Env::default();
        let mut memo = HashMap::default();
        let c = |o: &Operand, memo: &mut HashMap<Value, Option<i64>>| {
            self.eval_operand(o, &env, 0, memo)
        };
        let (lo_c, hi_c, st) = (c(lo, &mut memo), c(hi, &mut memo), c(step, &mut memo));
        let Some(st) = st.filter(|&s| s > 0) else {
            return (LoopDomain::Unknown { trip: None }, Vec::new(), Vec::new());
        };
        if !bounds_uniform {
            return (LoopDomain::Unknown { trip: None }, Vec::new(), Vec::new());
        }
        let trip = match (lo_c, hi_c) {
            (Some(a), Some(b)) => ceil_div((b - a).max(0), st),
            _ => None,
        };
        if let Some(t) = trip
            && t <= MAX_TRIP
        {
            return (
                LoopDomain::Exact { step: st, trip: t },
                Vec::new(),
                Vec::new(),
            );
        }
        // Symbolic (or long): periodic in the variable?
        let iv = k.region_args(k.ops[l].regions[0])[0];
        let mut periodic: Vec<(i64, Value)> = Vec::new();
        let mut memo = HashMap::default();
        let mut opaque = Vec::new();
        for &ai in self.inside.get(&l).map_or(&[][..], |v| v.as_slice()) {
            let a = &self.accesses[ai];
            let guards = self.guard_values(a, l);
            for v in self.relevant_values(a, l) {
                match self.dep(v, iv, &mut memo) {
                    Dep::Indep => {}
                    Dep::Periodic(p) => periodic.push((p, v)),
                    // A guard that is not periodic becomes unknown ("may execute"): its
                    // comparisons that depend on the variable are made opaque, so that the
                    // rest of the guard (a thread's role, say) still decides per thread.
                    Dep::Poly(..) | Dep::Bad if guards.contains(&v) => {
                        self.opaque_comparisons(v, iv, &mut memo, &mut opaque)
                    }
                    Dep::Poly(..) | Dep::Bad => {
                        return (LoopDomain::Unknown { trip }, Vec::new(), Vec::new());
                    }
                }
            }
        }
        // Values of short periods first; one whose period would take the loop's over
        // MAX_PERIOD becomes unknown on its own (say a rotating index mod 129), so the others
        // (the slot mod 2) stay exact.
        periodic.sort_by_key(|&(p, v)| (p, v));
        let (mut period, mut dropped) = (1i64, Vec::new());
        for (p, v) in periodic {
            let with = lcm(period, p);
            if with <= MAX_PERIOD {
                period = with;
            } else if !dropped.contains(&v) {
                dropped.push(v);
            }
        }
        opaque.extend(dropped.iter().copied());
        (LoopDomain::Periodic { step: st, period }, opaque, dropped)
    }

    // ---- footprints ----

    /// The number of the owner mapping of layout `name` on views of `shape`: one per name,
    /// or, with `own`, that access's own (an opaque fall-back of a defined encoding).
    fn layout_id(&mut self, name: &str, own: Option<Op>, shape: &[u64]) -> u32 {
        let n = self.layouts.len() as u32;
        *self
            .layouts
            .entry((name.to_string(), own, shape.to_vec()))
            .or_insert(n)
    }

    /// Resolves the root-buffer indices of a memref access whose indices are `s.cur` (left in
    /// `s.root`); `None`: unknown.
    fn root_index<M: EvalMemo>(
        &self,
        mut m: MemRef,
        s: &mut IndexScratch,
        env: &Env,
        tid: u32,
        memo: &mut M,
    ) -> Option<Buffer> {
        loop {
            match m {
                MemRef::Buffer(b) => {
                    s.root.clear();
                    for x in &s.cur {
                        s.root.push((*x)?);
                    }
                    return Some(b);
                }
                MemRef::View(v) => {
                    let vd = &self.k.views[v];
                    s.next.clear();
                    let mut j = 0;
                    for ix in &vd.indices {
                        match ix {
                            ViewIndex::At(o) => {
                                s.next.push(self.eval_operand(o, env, tid, memo))
                            }
                            ViewIndex::Range(lo, _) => {
                                s.next
                                    .push(s.cur.get(j).copied().flatten().map(|x| x + *lo as i64));
                                j += 1;
                            }
                        }
                    }
                    s.next.extend(s.cur.iter().skip(j).copied());
                    std::mem::swap(&mut s.cur, &mut s.next);
                    m = vd.base;
                }
            }
        }
    }

    /// (key of the first unit, number of units) of a root element.
    fn unit_key(&self, b: Buffer, idx: &[i64]) -> Option<(u64, u64)> {
        let bd = &self.k.buffers[b];
        if idx.len() != bd.shape.len() {
            return None;
        }
        let mut lin: u64 = 0;
        for (&i, &d) in idx.iter().zip(&bd.shape) {
            if i < 0 || i as u64 >= d {
                return None;
            }
            lin = lin * d + i as u64;
        }
        let (space, base) = match bd.offset {
            Some(o) => (0, o),
            None => (b.index() as u64 + 1, 0),
        };
        let u = self.unit(space);
        let byte = base + lin * bd.elem.bytes();
        Some(((space << 40) | (byte / u), bd.elem.bytes() / u))
    }

    /// The key range of a whole root buffer.
    fn buffer_range(&self, b: Buffer) -> (u64, u64) {
        let bd = &self.k.buffers[b];
        let (space, base) = match bd.offset {
            Some(o) => (0, o),
            None => (b.index() as u64 + 1, 0),
        };
        let u = self.unit(space);
        (
            (space << 40) | (base / u),
            (space << 40) | ((base + bd.bytes()).div_ceil(u)),
        )
    }

    /// The kernel's region paths (built once, then shared).
    pub fn paths(&self) -> std::rc::Rc<crate::analysis::hazards::Paths> {
        self.paths
            .get_or_init(|| std::rc::Rc::new(crate::analysis::hazards::Paths::with_guards(self.k, &self.ranges)))
            .clone()
    }

    /// A small id of access `ai`'s symbolic question key: accesses with equal ids get equal
    /// symbolic answers (pair conflicts given the common prefix and distance level, self
    /// races), so each question is built once, not once per tile (issue 12).
    ///
    /// The key is what `analysis::symbolic::pairs` reads of an access (its `side`): the
    /// index operands (value ids: a value fixes its definition), per enclosing loop its kind,
    /// bound operands, [`LoopDomain`] and whether the access depends on its variable, the
    /// guards' conditions and arms, and of the root buffer only its element type, shape and
    /// pin offset. Two accesses of one pair question are in one address space: two
    /// unpinned buffers of one space are one buffer, and pinned ones carry their offsets, so
    /// dropping the buffer's identity loses nothing. Views and buffers with a shared layout
    /// keep their identity. O(loops + guards + index) once per access.
    pub(crate) fn question_id(&mut self, ai: usize) -> u32 {
        if self.question_ids.len() != self.accesses.len() {
            self.question_ids = vec![u32::MAX; self.accesses.len()];
        }
        if self.question_ids[ai] != u32::MAX {
            return self.question_ids[ai];
        }
        let key = self.question_key(ai);
        let next = self.question_keys.len() as u32;
        let id = *self.question_keys.entry(key).or_insert(next);
        self.question_ids[ai] = id;
        id
    }

    /// The words of a memo key that say what access `ai` touches: its per-thread index
    /// operands, or, collective, its layout name and whether it reads or is async (who owns a
    /// position depends on all three, `symbolic::bits`). Part of [`Self::question_id`]'s key. Markers are at or above `u64::MAX - 6`; operand words and layout bytes below.
    pub(crate) fn footprint_words(&self, ai: usize, words: &mut Vec<u64>) {
        let a = &self.accesses[ai];
        match &a.access.footprint {
            Footprint::PerThread(ix) => words.extend(ix.iter().map(operand_word)),
            Footprint::Collective { layout } => {
                let kind = a.access.kind;
                words.push(u64::MAX - 3 - (kind.reads() as u64) - 2 * (kind.is_async() as u64));
                words.extend(layout.iter().flat_map(|l| l.bytes()).map(u64::from));
            }
        }
    }

    /// The words of a memo key for the guards around access `ai`: each enclosing `if`'s
    /// condition and whether the access is in its then-arm, outermost first.
    pub(crate) fn guard_words(&self, ai: usize, words: &mut Vec<u64>) {
        let k = self.k;
        let op = self.accesses[ai].id.op;
        let mut child = op;
        for anc in self.ancestors(op).into_iter().rev() {
            if let OpKind::If { cond } = &k.ops[anc].kind {
                words.push(operand_word(cond));
                words.push((self.region_of(child) == Some(k.ops[anc].regions[0])) as u64);
            }
            child = anc;
        }
    }

    fn question_key(&self, ai: usize) -> QuestionKey {
        let k = self.k;
        let a = &self.accesses[ai];
        let enc = operand_word;
        let mem = match a.access.mem {
            MemRef::Buffer(b) if k.buffers[b].layout.is_none() => {
                let bd = &k.buffers[b];
                Ok((bd.elem, bd.shape.clone(), bd.offset))
            }
            m => Err(m),
        };
        let mut words = Vec::new();
        self.footprint_words(ai, &mut words);
        words.push(u64::MAX - 1);
        for &l in &a.loops {
            match &k.ops[l].kind {
                OpKind::For { lo, hi, step, .. } => {
                    let iv = k.region_args(k.ops[l].regions[0])[0];
                    words.extend([1, enc(lo), enc(hi), enc(step)]);
                    words.push(self.depends_on(ai, l, iv) as u64);
                }
                OpKind::While { .. } => words.push(2),
                _ => words.extend([3, l.index() as u64]),
            }
            let i = |x: i64| x as u64;
            match self.domains.get(&l) {
                None => words.push(10),
                Some(LoopDomain::Exact { step, trip }) => words.extend([11, i(*step), i(*trip)]),
                Some(LoopDomain::Periodic { step, period }) => {
                    words.extend([12, i(*step), i(*period)])
                }
                Some(LoopDomain::Unknown { trip }) => {
                    words.extend([13, trip.is_some() as u64, i(trip.unwrap_or(0))])
                }
            }
        }
        words.push(u64::MAX - 2);
        self.guard_words(ai, &mut words);
        QuestionKey { mem, words }
    }

    /// Whether accesses `ai` and `bi` are on two pinned buffers that alias without an exact
    /// element pairing: who touches which byte is unknown between them (W1004).
    pub fn blind_pair(&self, ai: usize, bi: usize) -> bool {
        let (a, b) = (&self.accesses[ai].access, &self.accesses[bi].access);
        !self.blind.is_empty()
            && self
                .blind
                .contains(&(self.k.root_buffer(a.mem), self.k.root_buffer(b.mem)))
    }

    /// Whether accesses `ai` and `bi` touch no common byte in any execution, by their
    /// footprint boxes ([`crate::analysis::boxes`]: one root buffer, boxes disjoint in some
    /// dimension). Then every conflict and intersection question about the pair answers
    /// nothing, under any loop relation: `conflicts::pair_conflict` and hazard finding skip
    /// it. `false` says nothing (and is the answer when [`Footprints::use_boxes`] is off).
    /// A box is built once per access (O(dimensions + view depth), value intervals memoized).
    pub fn boxes_apart(&mut self, ai: usize, bi: usize) -> bool {
        if !self.use_boxes {
            return false;
        }
        // Built once per access; the check inline (this runs for every pair of a group).
        for i in [ai, bi] {
            if self.access_boxes.get(i).is_none_or(Option::is_none) {
                self.access_box(i);
            }
        }
        let slot = |i: usize| self.access_boxes[i].as_ref().and_then(|b| b.as_ref());
        match (slot(ai), slot(bi)) {
            (Some((ra, ba)), Some((rb, bb))) => {
                ra == rb && ba.iter().zip(bb).any(|(p, q)| p.disjoint(*q))
            }
            _ => false,
        }
    }

    /// Computes the root buffer and box of access `ai` into [`Footprints::access_boxes`] on
    /// first use.
    fn access_box(&mut self, ai: usize) {
        if self.access_boxes.len() < self.accesses.len() {
            self.access_boxes.resize(self.accesses.len(), None);
        }
        if self.access_boxes[ai].is_some() {
            return;
        }
        let (k, warp) = (self.k, self.warp);
        let boxes = self
            .boxes
            .get_or_insert_with(|| crate::analysis::boxes::Boxes::new(k, warp));
        let a = &self.accesses[ai].access;
        self.access_boxes[ai] = Some(boxes.of(a).map(|b| (k.root_buffer(a.mem), b)));
    }

    /// The guards of `op`: the condition of each enclosing `if`, innermost first, and whether
    /// `op` lies in its `then` arm.
    fn guards(&self, op: Op) -> Vec<(&'k Operand, bool)> {
        let k = self.k;
        let mut out = Vec::new();
        let mut child = op;
        let mut cur = self.parents.parent_op(op);
        while let Some(anc) = cur {
            if let OpKind::If { cond } = &k.ops[anc].kind {
                let then_r = k.ops[anc].regions[0];
                out.push((cond, self.parents.op_region[child] == Some(then_r)));
            }
            child = anc;
            cur = self.parents.parent_op(anc);
        }
        out
    }

    /// Whether thread `tid` may execute an op with `guards` under `env`: no guard is known
    /// to send it to the other arm.
    fn executes<M: EvalMemo>(
        &self,
        guards: &[(&Operand, bool)],
        env: &Env,
        tid: u32,
        memo: &mut M,
    ) -> bool {
        guards.iter().all(|&(cond, in_then)| {
            self.eval_operand(cond, env, tid, memo)
                .is_none_or(|c| (c != 0) == in_then)
        })
    }

    /// Whether exactly the threads `[lt.first, lt.first + lt.count)` of the block execute the
    /// op with `guards` under `env` (every thread, for a layout that is not role-relative).
    fn exactly_execute(
        &self,
        guards: &[(&Operand, bool)],
        env: &Env,
        lt: crate::ir::layout::LayoutThreads,
        memo: &mut DenseMemo,
    ) -> bool {
        let inside = lt.first..lt.first.saturating_add(lt.count);
        (0..self.k.threads()).all(|tid| {
            memo.new_thread();
            self.executes(guards, env, tid, memo) == inside.contains(&tid)
        })
    }

    /// The footprint of one instance of access `ai` (its loops' variables in `env`).
    fn touch(&mut self, ai: usize, env: &Env) -> Touch {
        let mut memo = self
            .eval_memo
            .take()
            .unwrap_or_else(|| DenseMemo::new(self.k));
        memo.new_env();
        let mut scratch = std::mem::take(&mut self.scratch);
        let t = match &self.accesses[ai].access.footprint {
            Footprint::PerThread(_) => self.touch_per_thread(ai, env, &mut memo, &mut scratch),
            Footprint::Collective { .. } => {
                self.touch_collective(ai, env, &mut memo, &mut scratch)
            }
        };
        self.eval_memo = Some(memo);
        self.scratch = scratch;
        t
    }

    /// [`Footprints::touch`] of a per-thread access: every executing thread's element.
    fn touch_per_thread(
        &self,
        ai: usize,
        env: &Env,
        memo: &mut DenseMemo,
        s: &mut IndexScratch,
    ) -> Touch {
        let a = &self.accesses[ai];
        let Footprint::PerThread(ix) = &a.access.footprint else {
            return Touch::default();
        };
        let k = self.k;
        let warp = self.warp;
        let mut t = TouchBuilder::new(warp);
        let root = k.root_buffer(a.access.mem);
        let guards = self.guards(a.id.op);
        for tid in 0..k.threads().max(1) {
            memo.new_thread();
            if !self.executes(&guards, env, tid, memo) {
                continue;
            }
            s.cur.clear();
            for o in ix {
                let x = self.eval_operand(o, env, tid, memo);
                s.cur.push(x);
            }
            match self
                .root_index(a.access.mem, s, env, tid, memo)
                .and_then(|b| self.unit_key(b, &s.root))
            {
                Some((key, n)) => {
                    for u in 0..n {
                        t.add(key + u, Who::One(tid));
                    }
                }
                None => {
                    let (lo, hi) = self.buffer_range(root);
                    t.add_unknown(lo, hi, Who::One(tid));
                }
            }
        }
        t.finish()
    }

    /// [`Footprints::touch`] of a collective access: every element of its view, owned by a
    /// layout position (or by unknown threads).
    fn touch_collective(
        &mut self,
        ai: usize,
        env: &Env,
        memo: &mut DenseMemo,
        s: &mut IndexScratch,
    ) -> Touch {
        let a = self.accesses[ai].clone();
        let Footprint::Collective { layout } = &a.access.footprint else {
            return Touch::default();
        };
        let k = self.k;
        let warp = self.warp;
        let mut t = TouchBuilder::new(warp);
        let root = k.root_buffer(a.access.mem);
        let guards = self.guards(a.id.op);
        let first = (0..k.threads().max(1)).find(|&tid| {
            memo.new_thread();
            self.executes(&guards, env, tid, memo)
        });
        let Some(tid) = first else {
            return t.finish();
        };
        let shape = k.shape(a.access.mem);
        let uniform_view = view_uniform(k, &self.uniform, a.access.mem);
        // Concrete layouts (issue 14): exact owners when exactly the layout's threads
        // execute (the block's, or a role-relative layout's group); else, like an opaque
        // name without a definition, one owner per (name, shape, position) when that holds.
        let lt = crate::ir::layout::layout_threads(k, layout.as_deref());
        let owners = match collective_owners(k, layout.as_deref(), &shape, warp, a.access.kind) {
            o @ CollectiveOwners::Concrete(_) if !self.exactly_execute(&guards, env, lt, memo) => {
                o.without_concrete()
            }
            o => o,
        };
        let lay = match (layout, &owners) {
            (_, CollectiveOwners::ByName | CollectiveOwners::Own) if a.access.kind.is_async() => {
                None
            }
            (Some(l), CollectiveOwners::ByName) => Some(self.layout_id(l, None, &shape)),
            (Some(l), CollectiveOwners::Own) => Some(self.layout_id(l, Some(a.id.op), &shape)),
            _ => None,
        };
        let total: u64 = shape.iter().product();
        if !uniform_view || total > 1 << 20 {
            let (lo, hi) = self.buffer_range(root);
            t.add_unknown(lo, hi, Who::Many(None));
            return t.finish();
        }
        // One thread's view: its index operands are evaluated once for every element.
        memo.new_thread();
        let strides = self.collective_strides(a.access.mem, &shape, env, tid, memo, s);
        for p in 0..total {
            let who = match (&owners, lay) {
                (CollectiveOwners::Concrete(c), _) => c.who(p),
                (_, Some(l)) => Who::Lane {
                    layout: l,
                    pos: p as u32,
                },
                _ => Who::Many(None),
            };
            let unit = match &strides {
                Some((k0, st, n)) => {
                    let mut key = *k0;
                    let mut rem = p;
                    for (&d, &step) in shape.iter().zip(st).rev() {
                        key += (rem % d.max(1)) * step;
                        rem /= d.max(1);
                    }
                    Some((key, *n))
                }
                None => {
                    s.cur.clear();
                    s.cur.resize(shape.len(), Some(0));
                    let mut rem = p;
                    for (i, &d) in shape.iter().enumerate().rev() {
                        s.cur[i] = Some((rem % d.max(1)) as i64);
                        rem /= d.max(1);
                    }
                    self.root_index(a.access.mem, s, env, tid, memo)
                        .and_then(|b| self.unit_key(b, &s.root))
                }
            };
            match unit {
                Some((key, n)) => {
                    for u in 0..n {
                        t.add(key + u, who);
                    }
                }
                None => {
                    let (lo, hi) = self.buffer_range(root);
                    t.add_unknown(lo, hi, Who::Many(None));
                    return t.finish();
                }
            }
        }
        t.finish()
    }

    /// The unit key of every element of a collective access to `m` (view `shape`) as
    /// `k0 + Σ pos_i · stride_i`, and the units per element, when every element is inside its
    /// buffer. Exact: each root index is a view position plus a constant, or a constant (the
    /// view's slots, the same for every element), so the key is affine in the position and
    /// every element is in bounds when the first and the last are. `None`: resolve element by
    /// element (an unknown index, or elements out of bounds).
    fn collective_strides(
        &self,
        m: MemRef,
        shape: &[u64],
        env: &Env,
        tid: u32,
        memo: &mut DenseMemo,
        s: &mut IndexScratch,
    ) -> Option<(u64, Vec<u64>, u64)> {
        let mut key_at = |pos: &dyn Fn(usize) -> i64, s: &mut IndexScratch| {
            s.cur.clear();
            s.cur.extend((0..shape.len()).map(|i| Some(pos(i))));
            let b = self.root_index(m, s, env, tid, memo)?;
            self.unit_key(b, &s.root)
        };
        let (k0, n) = key_at(&|_| 0, s)?;
        let mut strides = Vec::with_capacity(shape.len());
        for (i, &d) in shape.iter().enumerate() {
            let step = if d > 1 {
                key_at(&|j| (j == i) as i64, s)?.0.checked_sub(k0)?
            } else {
                0
            };
            strides.push(step);
        }
        let (last, _) = key_at(&|j| shape[j].saturating_sub(1) as i64, s)?;
        let predicted = shape
            .iter()
            .zip(&strides)
            .map(|(&d, &st)| d.saturating_sub(1) * st)
            .sum::<u64>()
            + k0;
        (last == predicted).then_some((k0, strides, n))
    }

    /// Every enumerated instance of access `ai`: loop keys (outermost first; `None` =
    /// unknown variable) and its touch.
    pub fn instances(&mut self, ai: usize) -> Instances {
        if let Some(c) = self.inst_cache.get(&ai) {
            return c.clone();
        }
        let id = self.accesses[ai].id;
        let (rc, note) = match self.memo.as_ref().and_then(|m| m.inst.get(&id)) {
            Some((rc, note)) => (rc.clone(), note.clone()),
            None => {
                let loops = self.accesses[ai].loops.clone();
                let mut out = Vec::new();
                let mut env = Env::default();
                let mut keys = Vec::new();
                self.cap_note = None;
                self.enumerate(ai, &loops, 0, &mut env, &mut keys, &mut out, 1);
                let rc = std::rc::Rc::new(out);
                let note = self.cap_note.take();
                if let Some(m) = self.memo.as_mut() {
                    m.inst.insert(id, (rc.clone(), note.clone()));
                }
                (rc, note)
            }
        };
        // Warned once per op: the first enumeration that reaches the cap says so.
        if let Some(w) = note
            && self.capped.insert(id.op)
        {
            self.conservative.push(w);
        }
        self.inst_cache.insert(ai, rc.clone());
        rc
    }

    /// The memo's answer to a pair-conflict query, with the side effects computing it has
    /// (the instances of both accesses, warnings included), or None.
    /// `key` is the question's [`PairKey`], `ai` and `bi` its accesses.
    pub(crate) fn memo_pair(
        &mut self,
        key: PairKey,
        ai: usize,
        bi: usize,
    ) -> Option<crate::analysis::conflicts::PairBits> {
        let bits = *self.memo.as_ref()?.pairs.get(&key)?;
        for i in [ai, bi] {
            // Replays the enumeration's warnings; a symbolic answer enumerated nothing.
            let r = self.accesses[i].id;
            if self.memo.as_ref().is_some_and(|m| m.inst.contains_key(&r)) {
                self.instances(i);
            }
        }
        Some(bits)
    }

    #[expect(clippy::too_many_arguments, reason = "recursive enumeration state")]
    fn enumerate(
        &mut self,
        ai: usize,
        loops: &[Op],
        level: usize,
        env: &mut Env,
        keys: &mut Vec<Option<i64>>,
        out: &mut Vec<(Vec<Option<i64>>, Touch)>,
        count: usize,
    ) {
        if level == loops.len() {
            let t = self.touch(ai, env);
            out.push((keys.clone(), t));
            return;
        }
        let l = loops[level];
        let k = self.k;
        let values: Option<Vec<i64>> = match (self.domains.get(&l).copied(), &k.ops[l].kind) {
            (Some(LoopDomain::Exact { step, .. }), OpKind::For { lo, hi, .. }) => {
                let mut memo = HashMap::default();
                let lo = self.eval_operand(lo, env, 0, &mut memo);
                let hi = self.eval_operand(hi, env, 0, &mut memo);
                match (lo, hi) {
                    (Some(lo), Some(hi)) => Some(
                        (0..)
                            .map(|i| lo + i * step)
                            .take_while(|&x| x < hi)
                            .collect(),
                    ),
                    _ => None,
                }
            }
            // Residues of the values the loop takes: with a constant lower bound, those
            // congruent to it modulo gcd(step, period) (the others never occur, and a
            // periodic iteration value is undefined there).
            (Some(LoopDomain::Periodic { step, period }), OpKind::For { lo, .. }) => {
                let mut memo = HashMap::default();
                let g = gcd(step, period).max(1);
                match self.eval_operand(lo, &Env::default(), 0, &mut memo) {
                    Some(lo) => Some((0..period).filter(|x| (x - lo).rem_euclid(g) == 0).collect()),
                    None => Some((0..period).collect()),
                }
            }
            _ => None,
        };
        let iv = match &k.ops[l].kind {
            OpKind::For { .. } => Some(k.region_args(k.ops[l].regions[0])[0]),
            _ => None,
        };
        match (values, iv) {
            // The access touches the same units in every iteration: one instance whose key
            // `None` relates it to every iteration (exact, and no enumeration).
            (Some(vals), Some(iv)) if !vals.is_empty() && !self.depends_on(ai, l, iv) => {
                keys.push(None);
                self.enumerate(ai, loops, level + 1, env, keys, out, count);
                keys.pop();
            }
            (Some(vals), Some(iv)) if count.saturating_mul(vals.len().max(1)) > MAX_INSTANCES => {
                // The first level past the cap names the warning; `instances` pushes it
                // once per op.
                if self.cap_note.is_none() {
                    let op = self.accesses[ai].id.op;
                    let msg = format!(
                        "{} is analysed without the iterations of its inner loops from `{}` on: \
                         it has more than {MAX_INSTANCES} iteration instances",
                        crate::emit::text::op_label(k, op),
                        local_name(k, iv)
                    );
                    self.cap_note = Some(imprecise(k, "W0313", msg, op));
                }
                keys.push(None);
                self.enumerate(ai, loops, level + 1, env, keys, out, count);
                keys.pop();
            }
            (Some(vals), Some(iv)) => {
                let n = vals.len();
                for x in vals {
                    env.insert(iv, x);
                    keys.push(Some(x));
                    self.enumerate(ai, loops, level + 1, env, keys, out, count * n.max(1));
                    keys.pop();
                }
                env.remove(&iv);
            }
            _ => {
                keys.push(None);
                self.enumerate(ai, loops, level + 1, env, keys, out, count);
                keys.pop();
            }
        }
    }

    /// Whether access `ai`'s indices, views, guards or inner loop bounds depend on the
    /// induction variable `iv` of its enclosing loop `l`.
    pub(crate) fn depends_on(&self, ai: usize, l: Op, iv: Value) -> bool {
        let mut memo = HashMap::default();
        self.relevant_values(&self.accesses[ai], l)
            .into_iter()
            .any(|v| self.dep(v, iv, &mut memo) != Dep::Indep)
    }

    /// Drops cached footprints (to bound memory on large kernels).
    pub fn clear_caches(&mut self) {
        self.inst_cache.clear();
        self.group_cache.clear();
        self.pair_answers.clear();
        self.arm_facts = Default::default();
    }

    /// Instances of access `ai` grouped by their first `plen` loop keys, each the union over
    /// the deeper loops.
    pub fn grouped(&mut self, ai: usize, plen: usize) -> Instances {
        if let Some(c) = self.group_cache.get(&(ai, plen)) {
            return c.clone();
        }
        let inst = self.instances(ai);
        let id = self.accesses[ai].id;
        if let Some(rc) = self.memo.as_ref().and_then(|m| m.grouped.get(&(id, plen))) {
            let rc = rc.clone();
            self.group_cache.insert((ai, plen), rc.clone());
            return rc;
        }
        // Every key list within the prefix: each instance is its own group (the enumeration
        // gives distinct key lists), in the same order.
        if inst.iter().all(|(keys, _)| keys.len() <= plen) {
            self.group_cache.insert((ai, plen), inst.clone());
            return inst;
        }
        let mut members: Vec<(Vec<Option<i64>>, Vec<u32>)> = Vec::new();
        let mut at: HashMap<Vec<Option<i64>>, usize> = HashMap::default();
        for (x, (keys, _)) in inst.iter().enumerate() {
            let p: Vec<Option<i64>> = keys[..plen.min(keys.len())].to_vec();
            match at.get(&p) {
                Some(&i) => members[i].1.push(x as u32),
                None => {
                    at.insert(p.clone(), members.len());
                    members.push((p, vec![x as u32]));
                }
            }
        }
        let groups: Vec<(Vec<Option<i64>>, Touch)> = members
            .into_iter()
            .map(|(p, m)| (p, Touch::group(&inst, m, self.warp)))
            .collect();
        let rc = std::rc::Rc::new(groups);
        if let Some(m) = self.memo.as_mut() {
            m.grouped.insert((id, plen), rc.clone());
        }
        self.group_cache.insert((ai, plen), rc.clone());
        rc
    }
}

/// Whether `SMEMSYNC_HAZARD_NO_BOXES` is set: footprint boxes decide no pair apart in
/// hazard finding ([`Footprints::boxes_apart`]; for measuring them, and the oracle of the
/// tests). Read once per [`Footprints`].
fn no_boxes_env() -> bool {
    std::env::var_os("SMEMSYNC_HAZARD_NO_BOXES").is_some()
}

/// A conservative-answer warning at `op`.
fn imprecise(k: &Kernel, code: &'static str, msg: String, op: Op) -> crate::diag::Diagnostic {
    crate::diag::Diagnostic::warning(crate::diag::DiagKind::Finding, code, msg)
        .with_label(k.span(op), "analysed conservatively")
        .with_note("smemsync may place more syncs here than the minimum")
}

/// A value as the user wrote it: `%name`.
fn local_name(k: &Kernel, v: Value) -> String {
    let n = k.value_name(v);
    if n.starts_with('%') {
        n
    } else {
        format!("%{n}")
    }
}

fn view_uniform(k: &Kernel, u: &Uniformity, m: MemRef) -> bool {
    match m {
        MemRef::Buffer(_) => true,
        MemRef::View(v) => {
            k.views[v].indices.iter().all(|ix| match ix {
                ViewIndex::At(o) => u.executor_uniform(o),
                ViewIndex::Range(..) => true,
            }) && view_uniform(k, u, k.views[v].base)
        }
    }
}

/// The value of `s` in thread `tid` (linear id) of kernel `k` with warp width `warp`: thread
/// ids, lane, warp, block and grid dimensions; `None` for a block id (not known in one
/// block). The one evaluation of `Special` that `analysis::footprint` and
/// `analysis::mbar_protocol` share.
pub fn special_value(k: &Kernel, s: Special, tid: u32, warp: u32) -> Option<i64> {
    let [bx, by, bz] = k.block;
    let t = tid as i64;
    let (bx, by) = (bx.max(1) as i64, by.max(1) as i64);
    Some(match s {
        Special::Tid(0) => t % bx,
        Special::Tid(1) => (t / bx) % by,
        Special::Tid(_) => t / (bx * by),
        Special::LinearTid => t,
        Special::Lane => t % warp as i64,
        Special::Warp => t / warp as i64,
        Special::BlockDim(d) => [bx, by, bz.max(1) as i64][d.min(2) as usize],
        Special::GridDim(d) => k.grid_dim(d)?,
        Special::Bid(_) => return None,
    })
}

fn wrap(x: i64) -> i64 {
    x as i32 as i64
}

fn binop(b: BinOp, x: i64, y: i64) -> Option<i64> {
    b.eval_i32(x, y)
}

fn ring(a: Dep, b: Dep) -> Dep {
    use Dep::*;
    match (a, b) {
        (Bad, _) | (_, Bad) => Bad,
        (Indep, x) | (x, Indep) => x,
        (Periodic(p), Periodic(q)) => Periodic(lcm(p, q)),
        (Poly(p, q), Poly(r, s)) => Poly(lcm(p, r), lcm(q, s)),
        (Poly(p, q), Periodic(r)) | (Periodic(r), Poly(p, q)) => Poly(lcm(p, r), q),
    }
}

fn reduce(a: Dep, c: i64) -> Dep {
    match a {
        Dep::Indep => Dep::Indep,
        Dep::Poly(p, q) => Dep::Periodic(lcm(p, q.saturating_mul(c))),
        Dep::Periodic(p) => Dep::Periodic(lcm(p, c)),
        Dep::Bad => Dep::Bad,
    }
}

/// Result `n` of an `if` with both arms ending in a yield: the condition and the two
/// yielded operands (then, else). The result is the operand of the arm the condition takes,
/// which [`Footprints::eval`] reads as a `select` of the two.
fn if_result_parts(k: &Kernel, op: Op, n: usize) -> Option<(Operand, Operand, Operand)> {
    let od = &k.ops[op];
    let OpKind::If { cond } = &od.kind else {
        return None;
    };
    let arm = |i: usize| -> Option<Operand> {
        let r = *od.regions.get(i)?;
        match &k.ops[*k.region_ops(r).last()?].kind {
            OpKind::Yield(ys) => ys.get(n).copied(),
            _ => None,
        }
    };
    Some((*cond, arm(0)?, arm(1)?))
}

fn generic(ds: &[Dep]) -> Dep {
    let mut p = 1;
    let mut any = false;
    for d in ds {
        match d {
            Dep::Indep => {}
            Dep::Periodic(q) => {
                p = lcm(p, *q);
                any = true;
            }
            _ => return Dep::Bad,
        }
    }
    if any { Dep::Periodic(p) } else { Dep::Indep }
}

/// One word per operand for memo keys: a value's index, or an immediate tagged by its type
/// in the two high bits.
pub(crate) fn operand_word(o: &Operand) -> u64 {
    match o {
        Operand::Value(v) => v.index() as u64,
        Operand::Imm(Scalar::I32(c)) => (1 << 62) | (*c as u32 as u64),
        Operand::Imm(Scalar::I1(b)) => (2 << 62) | *b as u64,
        Operand::Imm(Scalar::F32(f)) => (3 << 62) | f.to_bits() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_semantics_match_the_ir() {
        assert_eq!(binop(BinOp::Rem, -1, 3), Some(2));
        assert_eq!(binop(BinOp::Div, -1, 3), Some(-1));
        assert_eq!(binop(BinOp::Div, 7, 2), Some(3));
        assert_eq!(binop(BinOp::Rem, 5, 0), None);
    }

    #[test]
    fn who_join_and_conflict() {
        let w = 32;
        assert_eq!(Who::One(1).merge(Who::One(1), w), Who::One(1));
        assert_eq!(Who::One(1).merge(Who::One(2), w), Who::Many(Some(0)));
        assert_eq!(Who::One(1).merge(Who::One(40), w), Who::Many(None));
        assert_eq!(Who::One(3).conflict(Who::One(3), w), None);
        assert_eq!(Who::One(3).conflict(Who::One(4), w), Some(true));
        assert_eq!(Who::One(3).conflict(Who::One(40), w), Some(false));
        let l = Who::Lane { layout: 0, pos: 5 };
        assert_eq!(l.conflict(l, w), None);
        assert_eq!(l.conflict(Who::Lane { layout: 1, pos: 5 }, w), Some(false));
    }
}
