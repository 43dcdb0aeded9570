//! Induction recognition: iteration values of `for` loops that are periodic functions of the
//! iteration number (modular slot counters, phase bits), proved by evaluation.
//!
//! Compilers carry a pipeline's slot as an iteration value: `%slot` starts at a constant and
//! is advanced by `select(%slot == S-1, 0, %slot + 1)`, by `rem (add %slot, 1), S`, or in
//! both arms of an `if` alike; a phase bit flips when the slot wraps. Such a value equals
//! `seq[i mod P]` in iteration `i` (0-based) for a finite sequence `seq`: this module finds
//! `seq`, so that footprints, overlap queries and the checker evaluate the value like any
//! other periodic index (`rem %k, S`).
//!
//! **Method (a proof, not a pattern).** For iteration value `v` of loop `L`, the *state* is
//! the smallest set of `L`'s iteration values containing `v` that is closed under "the yielded
//! next value depends on": the yields of the state must be pure functions (constants,
//! arithmetic, comparisons, `select`, results of `if`s) of the state alone. An `if` result is
//! evaluated in the arm its condition selects; when the condition is not a function of the
//! state (a guard on the loop variable, a thread id), both arms are evaluated and must agree
//! for that state (the counter "advanced in both arms identically"). With constant initial
//! values the state sequence is then fully determined: it is computed exactly (i32
//! semantics, so wrap-around is part of the proof) until it returns to the initial state,
//! which proves `state(i + P) = state(i)` for every `i` by induction. More than
//! [`MAX_ORBIT`] states, a non-constant initial value or a next value depending on anything
//! outside the state (the loop variable, a parameter, a load) is *not recognized*, with the
//! reason kept for the W0315 warning: the value stays unknown (conservative).
//!
//! **Pre-periods (observably periodic values).** Triton starts its read slot at `-1` and
//! advances it (and toggles the phase bit) *before* use, in the same iteration: the state
//! `(slot, phase)` runs `(-1, 0), (0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 0), ...`,
//! periodic only from iteration `m = 1` on (period `P = 6`), while the slot and phase the body
//! *uses* are the advanced ones, `i mod S` and `(i div S) mod 2`, periodic from iteration 0.
//! When the state recurs after a pre-period of `m` iterations, the value is still recognized
//! if the body cannot tell iteration `i < m` from iteration `i + P`: every *escaping* value
//! (a function of the state used by anything but the integer ops computing the next state:
//! an access, a view, a wait, a guard, a yield of another iteration value, an `if`) must
//! evaluate equal in `state(i)` and `state(i + P)` for every `i < m`, and the loop's results
//! for the state must be unused after the loop. The recognized sequence is then the one of
//! iterations `m, m+1, ...` (`seq[i mod P] = state(i)`, `i >= m`); in iterations `i < m` the
//! iteration value itself differs from `seq` (kept in [`Induction::pre`] for ranges), but
//! every value the body observes equals the one computed from `seq`. An escaping value that
//! needs another iteration value of the loop adds it to the state (at most [`MAX_STATE`]).
//!
//! Translating to the loop variable needs a constant lower bound and step: iteration `i` runs
//! with `%k = lo + i·step`, so the value is periodic in `%k` with period `P·step` over the
//! values the loop actually takes ([`Induction::at`]).
//!
//! **Affine counters (drift).** A value advanced by a constant, `yield (add %s, c)` from a
//! constant start (Triton's loop counters that feed `div`/`rem` by the stage count), never
//! repeats: it is recognized as `init + c·i` ([`Induction::drift`] `= c`, `seq = [init]`),
//! proved by the linear form of its next value (`s + c`, a sum of `s` and constants, through
//! `add`/`sub`/`mul` by constants). Its `i32` value wraps only past `2^31 / |c|` iterations;
//! [`crate::ir::ranges`] gives its exact range from the loop's bounds, so consumers that
//! reason over the integers (`rem`, `div` of it) check exactness as for the loop variable.
//! A non-constant (loop-invariant) start is not recognized (W0315 says so).
//!
//! Complexity: per iteration value, O(MAX_ORBIT · |yield DAG|) evaluations of a state of at
//! most [`MAX_STATE`] values.

use std::collections::HashMap;

use crate::ir::*;

/// Longest period recognized (iterations).
pub const MAX_ORBIT: usize = 64;
/// Most iteration values one recurrence may involve (a slot and its phase, say).
pub const MAX_STATE: usize = 4;

/// A recognized iteration value: in iteration `i` of loop `l` it equals
/// `seq[i mod P] + drift·(i div P)` (as `i32`): periodic when `drift` is 0, an affine counter
/// (`P = 1`) otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Induction {
    /// The `for` loop carrying the value.
    pub l: Op,
    /// The loop's induction variable.
    pub iv: Value,
    /// Constant lower bound and (positive) step of the loop.
    pub lo: i64,
    pub step: i64,
    /// The value over one period, from iteration 0 (`P = seq.len()`, minimal).
    pub seq: std::rc::Rc<[i64]>,
    /// The value in the first iterations when they precede the period (a pre-period, see the
    /// module doc): the body observes them as `seq`'s, but the value's range includes them.
    pub pre: std::rc::Rc<[i64]>,
    /// The change of the value over one period: 0 for periodic values, `c` for a counter
    /// advanced by `c` per iteration.
    pub drift: i64,
}

impl Induction {
    /// The value in the iteration where the induction variable is `k`; `None` when no
    /// iteration has that `k`.
    pub fn at(&self, k: i64) -> Option<i64> {
        let d = k - self.lo;
        if d.rem_euclid(self.step) != 0 {
            return None;
        }
        let p = self.seq.len() as i64;
        let i = d.div_euclid(self.step);
        let base = self.seq[i.rem_euclid(p) as usize];
        if self.drift == 0 {
            return Some(base);
        }
        Some(base.wrapping_add(self.drift.wrapping_mul(i.div_euclid(p))) as i32 as i64)
    }

    /// Whether the value repeats (`drift` 0): a function of `i mod P`.
    pub fn periodic(&self) -> bool {
        self.drift == 0
    }

    /// The period in values of the induction variable (for a drifting value: the shift of
    /// the loop variable over which it changes by `drift`).
    pub fn iv_period(&self) -> i64 {
        self.seq.len() as i64 * self.step
    }

    /// The value as `a·k + b` of the loop variable `k`, when it is one with integer
    /// coefficients (a counter whose per-iteration change is a multiple of the step).
    pub fn affine_in_iv(&self) -> Option<(i64, i64)> {
        if self.seq.len() != 1 || self.drift % self.step != 0 {
            return None;
        }
        let a = self.drift / self.step;
        Some((a, self.seq[0].checked_sub(a.checked_mul(self.lo)?)?))
    }
}

/// Recognized iteration values and, for the others, why not.
#[derive(Clone, Debug, Default)]
pub struct Inductions {
    pub found: HashMap<Value, Induction>,
    /// Unrecognized iteration values of `for` loops: the loop and the reason.
    pub failed: HashMap<Value, (Op, String)>,
}

impl Inductions {
    /// Recognizes the iteration values of every `for` loop of `k`.
    pub fn new(k: &Kernel) -> Inductions {
        let mut out = Inductions::default();
        for (l, od) in k.ops.iter() {
            let OpKind::For { init, .. } = &od.kind else {
                continue;
            };
            let Some(&body) = od.regions.first() else {
                continue;
            };
            for j in 0..init.len() {
                let Some(&v) = k.region_args(body).get(j + 1) else {
                    continue;
                };
                if k.values[v].ty == ScalarType::F32 {
                    continue;
                }
                match recognize(k, l, j) {
                    Ok(ind) => {
                        out.found.insert(v, ind);
                    }
                    Err(why) => {
                        out.failed.insert(v, (l, why));
                    }
                }
            }
        }
        out
    }

    pub fn get(&self, v: Value) -> Option<&Induction> {
        self.found.get(&v)
    }
}

/// Why evaluation under a state failed: the first value outside the state it needed
/// (`None`: a non-integer operand).
type Eval = Result<i64, Option<Value>>;

struct Recurrence<'k> {
    k: &'k Kernel,
    body: Region,
    /// The loop's `yield` operands.
    yields: Vec<Operand>,
    /// Iteration-value positions (0-based, after the induction variable) in the state.
    state: Vec<usize>,
}

impl Recurrence<'_> {
    fn arg(&self, j: usize) -> Value {
        self.k.region_args(self.body)[j + 1]
    }

    fn operand(&self, o: Operand, s: &[i64], depth: u32) -> Eval {
        match o {
            Operand::Imm(Scalar::I32(c)) => Ok(c as i64),
            Operand::Imm(Scalar::I1(b)) => Ok(b as i64),
            Operand::Imm(Scalar::F32(_)) => Err(None),
            Operand::Value(v) => self.value(v, s, depth),
        }
    }

    /// Evaluates `v` with the state's values bound to `s`.
    fn value(&self, v: Value, s: &[i64], depth: u32) -> Eval {
        let k = self.k;
        if depth > 64 {
            return Err(Some(v));
        }
        if let Some(p) = self.state.iter().position(|&j| self.arg(j) == v) {
            return Ok(s[p]);
        }
        let ValueDef::Result(op, n) = k.values[v].def else {
            return Err(Some(v));
        };
        let ev = |o: &Operand| self.operand(*o, s, depth + 1);
        let i1 = k.values[v].ty == ScalarType::I1;
        match &k.ops[op].kind {
            OpKind::Const(c) => Ok(c.as_i64()),
            OpKind::Binary(b, x, y) => {
                let r = b.eval_i32(ev(x)?, ev(y)?).ok_or(Some(v))?;
                Ok(if i1 { r & 1 } else { r })
            }
            OpKind::Unary(UnOp::Neg, x) => Ok((-ev(x)?) as i32 as i64),
            OpKind::Unary(UnOp::Not, x) if i1 => Ok(1 - ev(x)?),
            OpKind::Unary(UnOp::Not, x) => Ok(!ev(x)? as i32 as i64),
            OpKind::Unary(UnOp::Abs, x) => Ok((ev(x)? as i32).wrapping_abs() as i64),
            OpKind::Cmp(p, x, y) => {
                let (x, y) = (ev(x)?, ev(y)?);
                Ok(p.holds(x, y) as i64)
            }
            OpKind::Select(c, x, y) => match ev(c) {
                Ok(c) => ev(if c != 0 { x } else { y }),
                Err(e) => same(ev(x), ev(y), e),
            },
            OpKind::If { cond } => {
                let arm = |r: usize| -> Eval {
                    let region = *k.ops[op].regions.get(r).ok_or(Some(v))?;
                    match k.region_ops(region).last().map(|&t| &k.ops[t].kind) {
                        Some(OpKind::Yield(ys)) => ev(ys.get(n).ok_or(Some(v))?),
                        _ => Err(Some(v)),
                    }
                };
                match ev(cond) {
                    Ok(c) => arm(if c != 0 { 0 } else { 1 }),
                    Err(e) => same(arm(0), arm(1), e),
                }
            }
            _ => Err(Some(v)),
        }
    }
}

/// Both arms of an unknown condition: the common value when both are known and equal.
fn same(a: Eval, b: Eval, cond: Option<Value>) -> Eval {
    match (a, b) {
        (Ok(x), Ok(y)) if x == y => Ok(x),
        (Err(e), _) | (_, Err(e)) => Err(e),
        _ => Err(cond),
    }
}

/// A constant operand (an immediate or a `const`, possibly through arithmetic).
fn constant(k: &Kernel, o: Operand) -> Option<i64> {
    let r = Recurrence {
        k,
        body: k.body(),
        yields: Vec::new(),
        state: Vec::new(),
    };
    r.operand(o, &[], 0).ok()
}

fn name(k: &Kernel, v: Value) -> String {
    let n = k.value_name(v);
    if n.starts_with('%') { n } else { format!("%{n}") }
}

/// Recognizes iteration value `j` (0-based, after the induction variable) of loop `l`.
pub fn recognize(k: &Kernel, l: Op, j: usize) -> Result<Induction, String> {
    let OpKind::For {
        lo,
        step,
        init,
        ..
    } = &k.ops[l].kind
    else {
        return Err("it is not carried by a `for` loop".into());
    };
    let body = k.ops[l].regions[0];
    let yields = match k.region_ops(body).last().map(|&t| &k.ops[t].kind) {
        Some(OpKind::Yield(ys)) => ys.clone(),
        _ => return Err("the loop body has no `yield`".into()),
    };
    if yields.len() != init.len() || k.region_args(body).len() != init.len() + 1 || j >= init.len() {
        return Err("the loop's `yield` does not match its iteration values".into());
    }
    let iv = k.region_args(body)[0];
    let mut r = Recurrence {
        k,
        body,
        yields,
        state: vec![j],
    };
    if let Some(ind) = counter(&r, l, init[j])? {
        return Ok(ind);
    }
    let (states, m) = loop {
        let start = grow_state(&mut r, init, iv)?;
        let (states, m) = orbit(&r, start)?;
        if m == 0 {
            break (states, m);
        }
        match observably_periodic(&r, l, &states, m) {
            Ok(()) => break (states, m),
            Err(Obs::Grow(n)) if r.state.len() < MAX_STATE && !r.state.contains(&n) => {
                r.state.push(n)
            }
            Err(Obs::Grow(n)) => {
                return Err(format!(
                    "it becomes periodic only after its first iterations, and the body \
                     observes `{}` there",
                    name(k, r.arg(n))
                ));
            }
            Err(Obs::Fail(why)) => {
                return Err(format!(
                    "it becomes periodic only after its first iterations, and {why}"
                ));
            }
        }
    };
    let (Some(lo), Some(step)) = (constant(k, *lo), constant(k, *step)) else {
        return Err("the loop's lower bound or step is not a constant".into());
    };
    if step <= 0 {
        return Err("the loop's step is not positive".into());
    }
    let p = states.len() - m;
    let mut seq = vec![0; p];
    for (x, s) in states.iter().enumerate().skip(m) {
        seq[x % p] = s[0];
    }
    Ok(Induction {
        l,
        iv,
        lo,
        step,
        seq: minimal_period(&seq).into(),
        pre: states[..m].iter().map(|s| s[0]).collect(),
        drift: 0,
    })
}

/// The constant lower bound and positive step of loop `l`.
fn lo_step(k: &Kernel, l: Op) -> Result<(i64, i64), String> {
    let OpKind::For { lo, step, .. } = &k.ops[l].kind else {
        return Err("it is not carried by a `for` loop".into());
    };
    let (Some(lo), Some(step)) = (constant(k, *lo), constant(k, *step)) else {
        return Err("the loop's lower bound or step is not a constant".into());
    };
    if step <= 0 {
        return Err("the loop's step is not positive".into());
    }
    Ok((lo, step))
}

/// An affine counter (module doc, "Affine counters"): the yield of `r`'s state value is
/// `s + c` with `c` a nonzero constant small enough that the value cannot return to its start
/// within [`MAX_ORBIT`] iterations through `i32` wrap-around. `Ok(None)`: not of that form.
fn counter(r: &Recurrence, l: Op, init: Operand) -> Result<Option<Induction>, String> {
    let s = r.arg(r.state[0]);
    let Some((1, c)) = linear(r.k, r.yields[r.state[0]], s, 0) else {
        return Ok(None);
    };
    if c == 0 || c.unsigned_abs() >= (1u64 << 31) / MAX_ORBIT as u64 {
        return Ok(None);
    }
    let Some(start) = constant(r.k, init) else {
        let who = init.value().map_or(String::new(), |v| format!(" `{}`", name(r.k, v)));
        return Err(format!(
            "it is a counter advanced by {c} per iteration, but its initial value{who} is not a constant"
        ));
    };
    let (lo, step) = lo_step(r.k, l)?;
    Ok(Some(Induction {
        l,
        iv: r.k.region_args(r.body)[0],
        lo,
        step,
        seq: vec![start].into(),
        pre: Vec::new().into(),
        drift: c,
    }))
}

/// `o` as `a·s + b` over the integers (constants, `s`, `add`, `sub`, `neg`, `mul` by a
/// constant); `None` otherwise.
fn linear(k: &Kernel, o: Operand, s: Value, depth: u32) -> Option<(i64, i64)> {
    if o.value() == Some(s) {
        return Some((1, 0));
    }
    if let Some(c) = constant(k, o) {
        return Some((0, c));
    }
    let v = o.value()?;
    if depth > 16 || k.values[v].ty != ScalarType::I32 {
        return None;
    }
    let ValueDef::Result(op, _) = k.values[v].def else {
        return None;
    };
    let sub = |o: &Operand| linear(k, *o, s, depth + 1);
    match &k.ops[op].kind {
        OpKind::Binary(BinOp::Add, x, y) => {
            let ((a, b), (c, d)) = (sub(x)?, sub(y)?);
            Some((a.checked_add(c)?, b.checked_add(d)?))
        }
        OpKind::Binary(BinOp::Sub, x, y) => {
            let ((a, b), (c, d)) = (sub(x)?, sub(y)?);
            Some((a.checked_sub(c)?, b.checked_sub(d)?))
        }
        OpKind::Binary(BinOp::Mul, x, y) => match (sub(x)?, sub(y)?) {
            ((0, c), (a, b)) | ((a, b), (0, c)) => Some((a.checked_mul(c)?, b.checked_mul(c)?)),
            _ => None,
        },
        OpKind::Unary(UnOp::Neg, x) => {
            let (a, b) = sub(x)?;
            Some((a.checked_neg()?, b.checked_neg()?))
        }
        _ => None,
    }
}

/// Grows `r`'s state until the yields of the state are functions of it alone; returns the
/// initial state.
fn grow_state(r: &mut Recurrence, init: &[Operand], iv: Value) -> Result<Vec<i64>, String> {
    let k = r.k;
    loop {
        let start: Option<Vec<i64>> = r.state.iter().map(|&j| constant(k, init[j])).collect();
        let Some(start) = start else {
            let bad = r.state.iter().find(|&&j| constant(k, init[j]).is_none());
            let who = bad
                .and_then(|&j| init[j].value())
                .map_or(String::new(), |v| format!(" `{}`", name(k, v)));
            return Err(format!("its initial value{who} is not a constant"));
        };
        let missing = r
            .state
            .iter()
            .find_map(|&j| r.operand(r.yields[j], &start, 0).err());
        match missing {
            None => return Ok(start),
            Some(None) => return Err("its next value is not an integer expression".into()),
            Some(Some(e)) => match k.values[e].def {
                ValueDef::RegionArg(b, n) if b == r.body && n >= 1 && r.state.len() < MAX_STATE => {
                    r.state.push(n - 1)
                }
                _ if e == iv => {
                    return Err("its next value depends on the loop variable".into());
                }
                _ => {
                    return Err(format!(
                        "its next value depends on `{}`, which is not a constant or a counter \
                         of the loop",
                        name(k, e)
                    ));
                }
            },
        }
    }
}

/// Why a state with a pre-period is not observably periodic: the body observes another
/// iteration value of the loop (grow the state with it), or a reason.
enum Obs {
    Grow(usize),
    Fail(String),
}

/// Checks that loop `l`'s body cannot tell the first `m` iterations (the pre-period of
/// `states`) from the same iterations one period later (module doc). O(|body| + m · escapes).
fn observably_periodic(r: &Recurrence, l: Op, states: &[Vec<i64>], m: usize) -> Result<(), Obs> {
    let k = r.k;
    for &j in &r.state {
        if let Some(&res) = k.ops[l].results.get(j)
            && used(k, res)
        {
            return Err(Obs::Fail(format!(
                "the loop's result `{}` is used after it",
                name(k, res)
            )));
        }
    }
    let mut d = Derived {
        state: r.state.iter().map(|&j| r.arg(j)).collect(),
        iter: k.region_args(r.body)[1..].iter().copied().collect(),
    };
    let mut escapes = Vec::new();
    let the_yield = k.region_ops(r.body).last().copied();
    escaping(r, r.body, the_yield, &mut d, &mut escapes);
    let p = states.len() - m;
    for &v in &escapes {
        for i in 0..m {
            let at = |s: &[i64]| match r.value(v, s, 0) {
                Ok(x) => Ok(x),
                Err(Some(e)) => match k.values[e].def {
                    ValueDef::RegionArg(b, n) if b == r.body && n >= 1 => Err(Obs::Grow(n - 1)),
                    _ => Err(Obs::Fail(format!(
                        "`{}` depends on `{}` there",
                        name(k, v),
                        name(k, e)
                    ))),
                },
                Err(None) => Err(Obs::Fail(format!("`{}` is not an integer", name(k, v)))),
            };
            if at(&states[i])? != at(&states[i + p])? {
                return Err(Obs::Fail(format!(
                    "`{}` differs in iteration {i} from iteration {}",
                    name(k, v),
                    i + p
                )));
            }
        }
    }
    Ok(())
}

/// Values of a loop body classified for [`observably_periodic`].
struct Derived {
    /// Functions of the state alone (integer ops over the state, other iteration values of
    /// the loop and constants, with at least one state operand).
    state: std::collections::HashSet<Value>,
    /// Functions of the loop's iteration values and constants.
    iter: std::collections::HashSet<Value>,
}

/// Collects, in program order over `region` (nested regions included), the values derived
/// from the state that something other than the integer ops computing the state (or the
/// loop's own `yield` of a state position) uses: operands of accesses, views, waits, `if`s,
/// and of integer ops that mix them with the loop variable, a thread id or a parameter.
fn escaping(
    r: &Recurrence,
    region: Region,
    the_yield: Option<Op>,
    d: &mut Derived,
    escapes: &mut Vec<Value>,
) {
    let k = r.k;
    for &op in k.region_ops(region) {
        let mut uses = Vec::new();
        let mut closed = true;
        k.ops[op].kind.for_each_operand(|o| match o.value() {
            Some(v) if d.state.contains(&v) => uses.push(v),
            Some(v) if d.iter.contains(&v) || constant(k, o).is_some() => {}
            Some(_) => closed = false,
            None => {}
        });
        let pure = matches!(
            k.ops[op].kind,
            OpKind::Binary(..) | OpKind::Unary(..) | OpKind::Cmp(..) | OpKind::Select(..)
        ) && k.ops[op].results.len() == 1;
        if pure && closed {
            let v = k.ops[op].results[0];
            d.iter.insert(v);
            if !uses.is_empty() {
                d.state.insert(v);
            }
        } else if let OpKind::Yield(ys) = &k.ops[op].kind
            && Some(op) == the_yield
        {
            for (pos, y) in ys.iter().enumerate() {
                if let Some(v) = y.value().filter(|v| d.state.contains(v))
                    && !r.state.contains(&pos)
                {
                    escapes.push(v);
                }
            }
        } else {
            escapes.extend(uses);
        }
        for &c in &k.ops[op].regions {
            escaping(r, c, the_yield, d, escapes);
        }
    }
}

/// Whether any op of `k` uses `v`.
fn used(k: &Kernel, v: Value) -> bool {
    let mut found = false;
    k.walk(|op| {
        k.ops[op].kind.for_each_operand(|o| found |= o.value() == Some(v));
    });
    found
}

/// The states from the initial one until one recurs, and the pre-period `m`: `states[m..]`
/// is one period (`state(i + P) = state(i)` for `i >= m`, `P = states.len() - m`). Errors: a
/// period above [`MAX_ORBIT`] states, or a state the yields cannot evaluate.
fn orbit(r: &Recurrence, start: Vec<i64>) -> Result<(Vec<Vec<i64>>, usize), String> {
    let mut seen = vec![start.clone()];
    let mut s = start;
    loop {
        let next: Result<Vec<i64>, Option<Value>> = r
            .state
            .iter()
            .map(|&j| r.operand(r.yields[j], &s, 0))
            .collect();
        let next = next.map_err(|e| {
            let what = e.map_or("a non-integer operand".into(), |e| format!("`{}`", name(r.k, e)));
            format!("its next value depends on {what} in iteration {}", seen.len() - 1)
        })?;
        if let Some(m) = seen.iter().position(|x| *x == next) {
            return Ok((seen, m));
        }
        if seen.len() >= MAX_ORBIT {
            return Err(format!("its values do not repeat within {MAX_ORBIT} iterations"));
        }
        seen.push(next.clone());
        s = next;
    }
}

/// The shortest prefix of `seq` whose repetition is `seq`.
fn minimal_period(seq: &[i64]) -> Vec<i64> {
    let n = seq.len();
    (1..=n)
        .find(|&p| n.is_multiple_of(p) && (p..n).all(|i| seq[i] == seq[i - p]))
        .map_or_else(|| seq.to_vec(), |p| seq[..p].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(body: &str, iters: &str) -> Kernel {
        let results: Vec<String> = (0..iters.matches('=').count())
            .map(|i| format!("%r{i}"))
            .collect();
        let src = format!(
            "kernel @k(%n: i32 in [0, 64]) block(4) {{\n  %t = tid.x\n  \
             {} = for %k = 0 to %n step 2 iter({iters}) {{\n{body}\n  }}\n}}\n",
            results.join(", ")
        );
        crate::reader::parse(&src)
            .unwrap_or_else(|e| panic!("{e:?}\n{src}"))
            .kernels
            .remove(0)
    }

    fn first(k: &Kernel) -> Result<Induction, String> {
        let l = k
            .ops
            .iter()
            .find(|(_, o)| matches!(o.kind, OpKind::For { .. }))
            .unwrap()
            .0;
        recognize(k, l, 0)
    }

    #[test]
    fn select_wrap_counter_is_init_plus_iteration_mod_s() {
        let k = kernel(
            "    %w = cmp eq %s, 2\n    %i = add %s, 1\n    %x = select %w, 0, %i\n    yield %x",
            "%s = 1",
        );
        let ind = first(&k).unwrap();
        assert_eq!(&*ind.seq, &[1, 2, 0]);
        assert_eq!((ind.lo, ind.step, ind.iv_period()), (0, 2, 6));
        assert_eq!(ind.at(4), Some(0));
        assert_eq!(ind.at(6), Some(1));
        assert_eq!(ind.at(3), None);
    }

    #[test]
    fn add_rem_counter_and_phase_bit_are_one_recurrence() {
        let k = kernel(
            "    %i = add %s, 1\n    %x = rem %i, 3\n    %w = cmp eq %x, 0\n    \
             %q = xor %p, 1\n    %y = select %w, %q, %p\n    yield %y, %x",
            "%p = 0, %s = 0",
        );
        // The phase flips each time the slot wraps: period 6.
        assert_eq!(&*first(&k).unwrap().seq, &[0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn counter_advanced_alike_in_both_arms_of_an_unknown_if() {
        let k = kernel(
            "    %c = cmp lt %t, 2\n    %x = if %c {\n      %i = add %s, 1\n      \
             %a = rem %i, 4\n      yield %a\n    } else {\n      %j = add 1, %s\n      \
             %w = cmp eq %j, 4\n      %b = select %w, 0, %j\n      yield %b\n    }\n    yield %x",
            "%s = 0",
        );
        assert_eq!(&*first(&k).unwrap().seq, &[0, 1, 2, 3]);
    }

    #[test]
    fn arms_that_disagree_are_not_recognized() {
        let k = kernel(
            "    %c = cmp lt %t, 2\n    %x = if %c {\n      %i = add %s, 1\n      \
             %a = rem %i, 4\n      yield %a\n    } else {\n      yield %s\n    }\n    yield %x",
            "%s = 0",
        );
        // The condition depends on the thread id, and the arms differ.
        let e = first(&k).unwrap_err();
        assert!(e.contains("`%t`"), "{e}");
    }

    #[test]
    fn fallbacks_say_why() {
        let k = kernel("    %i = mul %s, 3\n    yield %i", "%s = 1");
        assert!(first(&k).unwrap_err().contains("do not repeat"));
        let k = kernel("    %i = add %s, %k\n    %x = rem %i, 3\n    yield %x", "%s = 0");
        assert!(first(&k).unwrap_err().contains("loop variable"));
        let k = kernel("    %i = add %s, 1\n    %x = rem %i, 3\n    yield %x", "%s = %n");
        assert!(first(&k).unwrap_err().contains("initial value"));
        // 5 -> 0 -> 1 -> 2 -> 0: periodic only after the first iteration, and the body
        // observes the 5 (it yields `%s` to another iteration value).
        let k = kernel(
            "    %i = add %s, 1\n    %x = rem %i, 3\n    yield %x, %s",
            "%s = 5, %u = 0",
        );
        let e = first(&k).unwrap_err();
        assert!(e.contains("only after") && e.contains("differs in iteration 0"), "{e}");
        let k = kernel("    %i = add %s, %n\n    %x = rem %i, 3\n    yield %x", "%s = 0");
        assert!(first(&k).unwrap_err().contains("`%n`"));
    }

    /// Triton's TMA pipeline: the read slot starts at `-1` and is advanced, and the phase
    /// toggled on its wrap, before the body uses them.
    fn triton_tma_loop(phase_next: &str, uses: &str) -> Kernel {
        kernel(
            &format!(
                "    %a = add %s, 1\n    %w = cmp ge %a, 3\n    %x = select %w, 0, %a\n    \
                 %q = xor %p, 1\n{phase_next}{uses}"
            ),
            "%s = -1, %p = 0",
        )
    }

    #[test]
    fn slot_advanced_before_use_is_observably_periodic() {
        let k = triton_tma_loop(
            "    %y = select %w, %q, %p\n",
            "    %o = add %x, %y\n    %e = cmp eq %o, %t\n    %f = if %e {\n      \
             yield %t\n    } else {\n      yield 0\n    }\n    yield %x, %y",
        );
        let ind = first(&k).unwrap();
        // In iteration i (k = 2i) the slot the body uses is i mod 3; the value itself is
        // -1 in iteration 0 (pre) and then 0, 1, 2, ...
        assert_eq!(&*ind.seq, &[2, 0, 1]);
        assert_eq!(&*ind.pre, &[-1]);
        let l = ind.l;
        // The phase: (i div 3) mod 2 for the body, from state (0, 0) in iteration 1.
        let ph = recognize(&k, l, 1).unwrap();
        assert_eq!(&*ph.seq, &[1, 0, 0, 0, 1, 1]);
        assert_eq!(&*ph.pre, &[0]);
    }

    #[test]
    fn phase_xor_on_the_wrap_comparison() {
        // `phase ^ (slot == S-1)` form (TTGIR `arith.extui` of the comparison, `select %c, 1,
        // 0` here): the comparison itself is xor-ed into the phase.
        let k = triton_tma_loop(
            "    %c = cmp eq %s, 2\n    %z = select %c, 1, 0\n    %y = xor %p, %z\n",
            "    %o = add %x, %y\n    %e = cmp eq %o, %t\n    %f = if %e {\n      \
             yield %t\n    } else {\n      yield 0\n    }\n    yield %x, %y",
        );
        assert!(first(&k).is_ok(), "{:?}", first(&k));
    }

    #[test]
    fn pre_period_observed_by_the_body_is_not_recognized() {
        // The body uses the un-advanced slot `%s` (-1 in iteration 0, 2 one period later).
        let k = triton_tma_loop(
            "    %y = select %w, %q, %p\n",
            "    %e = cmp eq %s, %t\n    %f = if %e {\n      yield %t\n    } else {\n      \
             yield 0\n    }\n    yield %x, %y",
        );
        let e = first(&k).unwrap_err();
        assert!(e.contains("`%s` differs in iteration 0"), "{e}");
    }

    #[test]
    fn affine_counters_are_recognized_with_their_drift() {
        // Triton's `%c = 0; ...; yield %c + 1` in a loop `0 to %n step 2`.
        let k = kernel("    %i = add %s, 1\n    yield %i", "%s = 0");
        let ind = first(&k).unwrap();
        assert_eq!((&*ind.seq, ind.drift, ind.periodic()), (&[0][..], 1, false));
        assert_eq!((ind.at(0), ind.at(6), ind.at(5)), (Some(0), Some(3), None));
        // Drift 1 per step 2 is not an integer slope in `%k`.
        assert_eq!(ind.affine_in_iv(), None);
        // A counter spelled `sub %s, -2` starting at 5: slope 1 in `%k`.
        let k = kernel("    %i = sub %s, -2\n    yield %i", "%s = 5");
        let ind = first(&k).unwrap();
        assert_eq!((ind.at(4), ind.affine_in_iv()), (Some(9), Some((1, 5))));
        // A loop-invariant but non-constant start is reported, not guessed.
        let k = kernel("    %i = add %s, 1\n    yield %i", "%s = %n");
        let e = first(&k).unwrap_err();
        assert!(e.contains("advanced by 1") && e.contains("`%n`"), "{e}");
        // The counter's range follows the loop's bounds (`%n <= 64`, step 2: i <= 31).
        let k2 = kernel("    %i = add %s, 1\n    yield %i", "%s = 0");
        let r2 = crate::ir::ranges::Ranges::new(&k2);
        let v = k2.region_args(k2.ops[first(&k2).unwrap().l].regions[0])[1];
        assert_eq!((r2.range(v).lo, r2.range(v).hi), (0, 31));
        assert!(r2.exact(v));
    }

    #[test]
    fn minimal_period_of_a_sequence() {
        assert_eq!(minimal_period(&[1, 0, 1, 0]), vec![1, 0]);
        assert_eq!(minimal_period(&[1, 2, 3]), vec![1, 2, 3]);
    }
}
