//! The self race of one op's instance run by several threads, decided over the true
//! iteration domain of its loops (docs/symbolic.md, "Tile loads issued by several threads, at
//! any trip count" and "Plain stores at any trip count"): do two threads that run one
//! instance of a collective tile load (`tma_load`, `tdm_load`) copy into one view from
//! different origins, or do two threads that run one instance of a plain store write one
//! element?
//!
//! `footprint::copy_issues` and the enumerated touches of `footprint` answer this by
//! enumerating instances, which they can do only for loops of at most `footprint::MAX_TRIP`
//! constant iterations: beyond, or with a symbolic bound, the loop variable is unknown to
//! them and the answer was "may" (W0317), whatever the index (`store @s[%i + 1]` by every
//! thread, session 39's P8). Here each enclosing `for` whose bounds are uniform and have forms
//! is one iteration index `i ≥ 0` shared by both threads, its variable `lo + step·i` and
//! `lo + step·i < hi`, whatever the trip count; every other unknown value is a free leaf
//! (`form::FreeLeaves`, as in `symbolic::free`: one variable for both threads when uniform).
//! The question, for `t_a < t_b` (the race is symmetric): both execute the instance (guards),
//! and, for a load, their views are equal (the root index of the view's first element; views
//! of one op are equal or disjoint), in range, and `origin_a[d] ≠ origin_b[d]` for some `d`
//! (two solves per dimension); for a store, their root indices are equal and in range (one
//! element: the elements of one buffer are disjoint).
//!
//! - infeasible: [`Verdict::Never`], exact: every variable ranges over a superset of the
//!   values it stands for, and a view out of range is an execution error `check` reports;
//! - feasible, every leaf uniform, no guard left unknown or on a leaf, every view (store:
//!   element) index on a leaf the same form on both sides, and a solution whose differing
//!   origin dimension is not on a leaf (a store has none), with iteration index 0 in every
//!   loop whose bounds are on a leaf: [`Verdict::Always`]. *Proof*: nothing that solution
//!   fixes (threads, iteration indices, untainted variables) depends on the leaves, and a
//!   loop at index 0 only needs to run; so for every value of the leaves with which those
//!   loops run, the same two threads copy into one view from origins that differ in that
//!   dimension (store: write one element);
//! - feasible otherwise: [`Verdict::May`];
//! - an operation, index or guard without a form, the search budget: [`Verdict::Undecided`]
//!   with the reason, for the message.
//!
//! Invariants: the loop keys and the leaves are shared by both sides (one instance); the
//! footprint engine's opaque guard comparisons (`Footprints::is_opaque`, made for its periodic
//! domains) are not read, as every loop variable here is exact. Complexity: one problem of
//! O(|DAG| + bits) variables per side plus one per loop; at most 2·|origin| solves for the
//! question (one for a store) and as many per witness attempt (two), within `pairs::BUDGET`
//! nodes in all.

use super::form::{Affine, Builder, Evaluator, Form, FreeLeaves};
use super::pairs;
use super::solve::Problem;
use crate::analysis::footprint::{CopyIssues, Footprints};
use crate::analysis::symbolic::free;
use crate::diag::{DiagKind, Diagnostic};
use crate::emit::text::op_label;
use crate::ir::*;

/// Two threads of one instance that copy into one view from different origins (a store:
/// that write one element, the view's, with no origins).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Witness {
    pub threads: (i64, i64),
    /// The enclosing loops' variables at that instance (outermost first).
    pub iterations: Vec<(Value, i64)>,
    /// The root buffer and index of the view's first element (a store: of its element).
    pub view: (Buffer, Vec<i64>),
    pub origins: (Vec<i64>, Vec<i64>),
    /// The uniform leaves' values in this solution.
    pub leaves: Vec<(Value, i64)>,
}

/// The answer to the self-race question of an issued tile load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No two threads of one instance copy into one view from different origins.
    Never,
    /// The witness's threads race for every value of its leaves (with which the loops
    /// whose bounds read one run, `runs`).
    Always { witness: Witness, runs: bool },
    /// A race for some values of these leaves: the witness where it is one run's, else why
    /// a solution may be no run's.
    May {
        leaves: Vec<Value>,
        witness: Result<Witness, &'static str>,
    },
    /// Not decided, and why.
    Undecided(&'static str),
}

/// The footprint engine's evaluation without its loop-domain opacities.
struct TrueDomains<'a, 'k>(&'a Footprints<'k>);

impl Evaluator for TrueDomains<'_, '_> {
    fn kernel(&self) -> &Kernel {
        self.0.k
    }
    fn warp(&self) -> u32 {
        self.0.warp
    }
    fn is_opaque(&self, _: Value) -> bool {
        false
    }
    fn induction_iv(&self, v: Value) -> Option<Value> {
        self.0.induction_iv(v)
    }
    fn affine_counter(&self, v: Value) -> Option<(Value, i64, i64)> {
        self.0.affine_counter(v)
    }
}

/// One enclosing `for` bound to its iteration index: `iv = key = lo + step·index`.
struct LoopKey {
    iv: Value,
    index: usize,
    key: Affine,
    /// Its bounds read a leaf: its "iteration exists" constraint depends on the leaves.
    on_leaf: bool,
}

/// One thread's side: view (root index of its first element), origin, and its leaves.
struct Side {
    view: Vec<Affine>,
    origin: Vec<Affine>,
    guard_on_leaf: bool,
    free: FreeLeaves,
}

/// What two threads of one instance do when they race.
enum Kind {
    /// A tile load: copy into one view from different origins (these operands).
    Copy(Vec<Operand>),
    /// A plain store: write the one element at these indices of its memref.
    Write(Vec<Operand>),
}

/// The question's problem before the origin disequality, with both sides.
struct Question {
    p: Problem,
    threads: (usize, usize),
    keys: Vec<LoopKey>,
    buffer: Buffer,
    a: Side,
    b: Side,
    /// `origin_a[d] − origin_b[d]` per dimension.
    diffs: Vec<Affine>,
    /// A store's question: equal views are the race (no origin disequality).
    write: bool,
}

/// The verdict for access `ai`, a collective `tma_load`/`tdm_load` or a plain store
/// (`Undecided` for any other access).
pub fn self_race(fp: &Footprints, ai: usize) -> Verdict {
    pairs::set_budget_left(pairs::BUDGET);
    let v = match question(fp, ai) {
        Ok(q) => decide(fp.k, &q),
        Err(why) => Verdict::Undecided(why),
    };
    if pairs::tracing() {
        eprintln!(
            "symbolic instance self race {}: {v:?}, {} nodes left",
            op_label(fp.k, fp.accesses[ai].id.op),
            pairs::budget_left()
        );
    }
    v
}

/// Builds both sides of the question on one problem.
fn question(fp: &Footprints, ai: usize) -> Result<Question, &'static str> {
    let k = fp.k;
    let a = &fp.accesses[ai];
    let kind = match (&k.ops[a.id.op].kind, &a.access.footprint, a.access.kind) {
        (OpKind::TmaLoad { origin, .. } | OpKind::TdmLoad { origin, .. }, ..) => Kind::Copy(origin.clone()),
        (_, Footprint::PerThread(ix), AccessKind::Write) => Kind::Write(ix.clone()),
        _ => return Err("not a tile load or a plain store"),
    };
    let ev = TrueDomains(fp);
    let mut p = Problem::default();
    let threads = k.threads().max(1) as i64;
    let (ta, tb) = (p.var(0, threads - 1), p.var(0, threads - 1));
    p.add(&[(ta, 1), (tb, -1)], i64::MIN / 4, -1);
    let mut b = Builder::new(&ev, &mut p, ta);
    b.free = Some(FreeLeaves::default());
    let keys = loop_keys(&mut b, &a.loops);
    let free = b.free.take().unwrap_or_default();
    let mut divs = std::mem::take(&mut b.divs);
    let (buffer, sa) = side(fp, &ev, &mut p, (ai, ta), (&keys, &kind), (free, &mut divs))?;
    let (_, sb) = side(fp, &ev, &mut p, (ai, tb), (&keys, &kind), (sa.free.clone(), &mut divs))?;
    for (x, y) in sa.view.iter().zip(&sb.view) {
        let d = y.scale(-1).and_then(|n| x.plus(&n)).ok_or("overflow")?;
        d.constrain(&mut p, 0, 0);
    }
    let diffs = (sa.origin.iter().zip(&sb.origin))
        .map(|(x, y)| y.scale(-1).and_then(|n| x.plus(&n)))
        .collect::<Option<Vec<_>>>()
        .ok_or("overflow")?;
    Ok(Question {
        p,
        threads: (ta, tb),
        keys,
        buffer,
        a: sa,
        b: sb,
        diffs,
        write: matches!(kind, Kind::Write(_)),
    })
}

/// Binds every enclosing `for` whose bounds are uniform with forms and whose step is a
/// positive constant to an iteration index (the others' variables stay leaves).
fn loop_keys(b: &mut Builder, loops: &[Op]) -> Vec<LoopKey> {
    let k = b.k;
    let mut out = Vec::new();
    for &l in loops {
        let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else {
            continue;
        };
        let free = b.free.as_mut().expect("free leaves");
        if ![lo, hi, step].iter().all(|o| o.value().is_none_or(|v| free.is_uniform(k, v))) {
            continue;
        }
        let (Form::Known(lo), Form::Known(hi), Form::Known(st)) = (b.operand(lo), b.operand(hi), b.operand(step)) else {
            continue;
        };
        let Some(st) = st.as_const().filter(|&s| s > 0) else {
            continue;
        };
        let ((lo_min, _), (_, hi_max)) = (lo.range(b.p), hi.range(b.p));
        let index = b.p.var(0, (hi_max - lo_min - 1).max(-1).div_euclid(st));
        let Some(key) = lo.plus(&Affine { terms: vec![(index, st)], c: 0 }) else {
            continue;
        };
        let Some(gap) = hi.scale(-1).and_then(|n| key.plus(&n)) else {
            continue;
        };
        gap.constrain(b.p, i64::MIN / 4, -1);
        let tainted = b.free.as_ref().expect("free leaves").tainted.clone();
        let on_leaf = [&lo, &hi].iter().any(|f| f.terms.iter().any(|(x, _)| tainted.contains(x)));
        let iv = k.region_args(k.ops[l].regions[0])[0];
        b.ivs.push((iv, key.clone()));
        out.push(LoopKey {
            iv,
            index,
            key,
            on_leaf,
        });
    }
    out
}

/// The `div`/`rem` existentials of [`Builder`], handed from one builder of the question to
/// the next: a division of one value is one pair of variables on both sides.
type Divs = Vec<(Affine, i64, usize, usize)>;

/// One thread's side on `p`: its guards, its view's first element (a store's element) in
/// range, its origin.
fn side(
    fp: &Footprints,
    ev: &TrueDomains,
    p: &mut Problem,
    (ai, tid): (usize, usize),
    (keys, kind): (&[LoopKey], &Kind),
    (free, divs): (FreeLeaves, &mut Divs),
) -> Result<(Buffer, Side), &'static str> {
    let mut b = Builder::new(ev, p, tid);
    b.free = Some(free);
    b.divs = std::mem::take(divs);
    b.tables = true;
    b.ivs = keys.iter().map(|lk| (lk.iv, lk.key.clone())).collect();
    let r = side_in(fp, &mut b, ai, kind);
    *divs = std::mem::take(&mut b.divs);
    r
}

/// [`side`] with its builder made.
fn side_in(fp: &Footprints, b: &mut Builder, ai: usize, kind: &Kind) -> Result<(Buffer, Side), &'static str> {
    let a = &fp.accesses[ai];
    let before = b.p.cons.len();
    pairs::guards(fp, b, a.id.op).map_err(|_| "a guard without a form here")?;
    let guard_cons = b.p.cons.len();
    let (first, origin) = match kind {
        Kind::Copy(origin) => (vec![Form::Known(Affine::konst(0)); fp.k.shape(a.access.mem).len()], &origin[..]),
        Kind::Write(ix) => (ix.iter().map(|o| b.operand(o)).collect(), &[][..]),
    };
    let (root, Some(view)) = pairs::root_index(b, a.access.mem, first).map_err(|_| "an index without a form here")? else {
        return Err("an index without a value");
    };
    let shape = &fp.k.buffers[root].shape;
    if view.len() != shape.len() {
        return Err("a view of another rank");
    }
    for (f, &d) in view.iter().zip(shape) {
        // A view out of range is an execution error (`check` reports it): in range here.
        f.constrain(b.p, 0, d as i64 - 1);
    }
    let origin = origin
        .iter()
        .map(|o| match b.operand(o) {
            Form::Known(f) => Ok(f),
            _ => Err("an origin without a form here"),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let free = b.free.take().unwrap_or_default();
    let guard_on_leaf = b.p.cons[before..guard_cons]
        .iter()
        .any(|c| c.terms.iter().any(|(x, _)| free.tainted.contains(x)));
    Ok((
        root,
        Side {
            view,
            origin,
            guard_on_leaf,
            free,
        },
    ))
}

/// Solves the question; then, for a feasible one, searches a solution that holds for every
/// value of the leaves (module doc).
fn decide(k: &Kernel, q: &Question) -> Verdict {
    let x = match pairs::witness(&differ(q, |_| true, &[])) {
        None => return Verdict::Undecided("the search ran out of its budget"),
        Some(None) => return Verdict::Never,
        Some(Some(x)) => x,
    };
    let free = &q.b.free;
    let mut leaves: Vec<Value> = Vec::new();
    for &(v, _, _) in &free.leaves {
        if !leaves.contains(&v) {
            leaves.push(v);
        }
    }
    let tainted = |f: &Affine| f.terms.iter().any(|(v, _)| free.tainted.contains(v));
    // A view index on a leaf is equal on both sides for every value when it is one form of
    // one set of variables (the leaves and what is defined from them, shared: `Divs`).
    let views_cancel = (q.a.view.iter().zip(&q.b.view)).all(|(x, y)| !(tainted(x) || tainted(y)) || x == y);
    let exact = free.leaves.iter().all(|l| l.2) && !free.unknown_guard;
    if exact && !q.a.guard_on_leaf && !q.b.guard_on_leaf && views_cancel {
        let fixed = |d: usize| !tainted(&q.diffs[d]);
        let runs: Vec<usize> = q.keys.iter().filter(|lk| lk.on_leaf).map(|lk| lk.index).collect();
        let first: Vec<usize> = q.keys.iter().map(|lk| lk.index).collect();
        for pins in [first, runs.clone()] {
            match pairs::witness(&differ(q, fixed, &pins)) {
                Some(Some(y)) => {
                    let witness = witness(q, &y);
                    return Verdict::Always { witness, runs: !runs.is_empty() };
                }
                None => break,
                Some(None) => {}
            }
        }
    }
    // The solution is one run's where nothing was relaxed and every leaf is a block leaf
    // (a parameter or block id: any value in its domain is some run's).
    let witness = if free.leaves.iter().any(|l| !l.2) {
        Err("they may hold a different value in each thread")
    } else if free.unknown_guard {
        Err("a guard on a value without a form is taken as \"may execute\"")
    } else if free.leaves.iter().any(|l| !super::form::is_block_leaf(k, l.0)) {
        Err("they have no form here and are taken as any value")
    } else {
        Ok(witness(q, &x))
    };
    Verdict::May { leaves, witness }
}

/// The question split by `origin_a[d] ≠ origin_b[d]` (`<` and `>`) over the dimensions
/// `dims` selects, with the iteration indices `pins` at 0 (a store's: the question itself).
fn differ(q: &Question, dims: impl Fn(usize) -> bool, pins: &[usize]) -> Vec<Problem> {
    let mut base = q.p.clone();
    for &i in pins {
        base.add(&[(i, 1)], 0, 0);
    }
    if q.write {
        return vec![base];
    }
    let mut out = Vec::new();
    for (_, diff) in q.diffs.iter().enumerate().filter(|(d, _)| dims(*d)) {
        for (lo, hi) in [(i64::MIN / 4, -1), (1, i64::MAX / 4)] {
            let mut p = base.clone();
            diff.constrain(&mut p, lo, hi);
            out.push(p);
        }
    }
    out
}

/// The witness a solution `x` describes.
fn witness(q: &Question, x: &[i64]) -> Witness {
    let at = |f: &Affine| f.value_at(x);
    Witness {
        threads: (x[q.threads.0], x[q.threads.1]),
        iterations: q.keys.iter().map(|lk| (lk.iv, at(&lk.key))).collect(),
        view: (q.buffer, q.a.view.iter().map(at).collect()),
        origins: (q.a.origin.iter().map(at).collect(), q.b.origin.iter().map(at).collect()),
        leaves: q.b.free.shared.iter().map(|&(v, y)| (v, x[y])).collect(),
    }
}

/// What a collective load issued by several threads with different origins is told: a
/// load performed once per issuer writes its view twice when two issuers' origins differ.
const NOTE: &str = "a collective load is performed once per executing thread; copies into one view are one write only when their origins are equal: issue it from one elected thread, or give every issuer the same origin";

/// The finding of access `ai`, a collective load whose origin may differ between its issuers
/// (`Footprints::issued_copy`): this module's verdict, then the enumeration of
/// `footprint::copy_issues` where it is neither `Never` nor `Always`. E0301 with two threads
/// that race, W0317 with why it is not decided, nothing when no two issuers' copies differ.
pub fn finding(fp: &mut Footprints, ai: usize) -> Option<Diagnostic> {
    let verdict = match fp.symbolic {
        true => self_race(fp, ai),
        false => Verdict::Undecided("the symbolic engine is off"),
    };
    let race = match verdict {
        Verdict::Never => return None,
        Verdict::Always { witness, runs } => Race::found(fp.k, &witness, runs),
        v => match fp.copy_issues(ai)? {
            CopyIssues::Same => return None,
            CopyIssues::Differ {
                threads,
                origins,
                unit,
            } => Race {
                threads: (threads.0 as i64, threads.1 as i64),
                unit: fp.describe_unit(unit),
                origins,
                when: String::new(),
            },
            CopyIssues::Unknown => return Some(not_decided(fp, ai, &v)),
        },
    };
    let k = fp.k;
    let op = fp.accesses[ai].id.op;
    let ((t0, t1), show) = (race.threads, |o: &[i64]| join(o.iter()));
    let msg = format!(
        "{} writes {} (and the rest of its view) from several threads at once: threads {t0} and {t1} copy into it from different origins [{}] and [{}]{}",
        op_label(k, op),
        race.unit,
        show(&race.origins.0),
        show(&race.origins.1),
        race.when,
    );
    let d = Diagnostic::error(DiagKind::Finding, "E0301", msg);
    Some(d.with_label(k.span(op), "every executing thread issues this copy; copies with different sources are different writes, and no barrier can order one op's threads").with_note(NOTE))
}

/// A race for the message: threads, the view's first element, origins, and where (the
/// iteration and the leaves' values, empty for an enumerated race).
struct Race {
    threads: (i64, i64),
    unit: String,
    origins: (Vec<i64>, Vec<i64>),
    when: String,
}

impl Race {
    fn found(k: &Kernel, w: &Witness, runs: bool) -> Race {
        let mut when = iterations(k, w);
        if !w.leaves.is_empty() {
            let names = join(w.leaves.iter().map(|&(v, _)| format!("`%{}`", k.value_name(v))));
            let run = if runs { " with which its loops run" } else { "" };
            when += &format!(", for every value of {names}{run} (shown for {})", values(k, &w.leaves));
        }
        Race {
            threads: w.threads,
            unit: element(k, w),
            origins: w.origins.clone(),
            when,
        }
    }
}

/// `, items, …` joined by commas.
fn join<T: std::fmt::Display>(items: impl Iterator<Item = T>) -> String {
    items.map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

/// "`%a = 1`, `%b = 2`".
fn values(k: &Kernel, vs: &[(Value, i64)]) -> String {
    join(vs.iter().map(|&(v, x)| format!("`%{} = {x}`", k.value_name(v))))
}

/// " in the iteration `%k = 0`" (empty outside loops).
fn iterations(k: &Kernel, w: &Witness) -> String {
    match w.iterations.is_empty() {
        true => String::new(),
        false => format!(" in the iteration {}", values(k, &w.iterations)),
    }
}

/// W0317 for a load whose issuers' origins may differ, with why it is not decided.
fn not_decided(fp: &Footprints, ai: usize, v: &Verdict) -> Diagnostic {
    let k = fp.k;
    let op = fp.accesses[ai].id.op;
    let buf = &k.buffers[k.root_buffer(fp.accesses[ai].access.mem)].name;
    let why = why(k, v, |w| {
        format!(
            "threads {} and {} copy into {} from [{}] and [{}]",
            w.threads.0,
            w.threads.1,
            element(k, w),
            join(w.origins.0.iter()),
            join(w.origins.1.iter()),
        )
    });
    Diagnostic::warning(
        DiagKind::Finding,
        "W0317",
        format!(
            "{} may copy into one view of `@{buf}` from several threads with different origins: {why}",
            op_label(k, op)
        ),
    )
    .with_label(k.span(op), "origin not known to be the same in every issuing thread")
    .with_note(NOTE)
}

/// Why verdict `v` (neither `Never` nor `Always`) is no race for every value: the leaves it
/// depends on with a run's witness (`what` says what its threads do), or why it is not
/// decided.
fn why(k: &Kernel, v: &Verdict, what: impl Fn(&Witness) -> String) -> String {
    let names = |vs: &[Value]| join(vs.iter().map(|&v| format!("`%{}`", k.value_name(v))));
    match v {
        Verdict::May {
            leaves,
            witness: Ok(w),
        } => format!(
            "depends on {}: with {}, {}{}; a race for every value was not shown",
            names(leaves),
            values(k, &w.leaves),
            what(w),
            iterations(k, w),
        ),
        Verdict::May {
            leaves,
            witness: Err(why),
        } if !leaves.is_empty() => format!("for some value of {}: not decided, as {why}", names(leaves)),
        Verdict::May { witness: Err(why), .. } => format!("not decided, as {why}"),
        Verdict::Undecided(why) => format!("not decided ({why})"),
        Verdict::Never | Verdict::Always { .. } => "not decided".into(),
    }
}

/// "@buf[0, 1]": a witness's element (a load: its view's first).
fn element(k: &Kernel, w: &Witness) -> String {
    format!("@{}[{}]", k.buffers[w.view.0].name, join(w.view.1.iter()))
}

/// What a store written by several threads of one instance is told.
const WRITE_LABEL: &str = "every executing thread writes here; no barrier can order one op's threads";

/// The finding of a plain store `ai` whose enumerated instances may touch one unit from two
/// threads (`Touch::may_self_overlap`: the enumerator does not know every index, e.g. a loop
/// variable past its domains): E0301 with two threads and the iteration when this module's
/// verdict is `Always`, nothing when it is `Never`. Otherwise the finding of
/// `symbolic::free` (ranged parameters case by case; leaves over their whole type, loop
/// variables included), whose W0317 this module's "may" with a run's witness replaces (it
/// names the leaves without the loops' variables) or, in a loop, completes with why it is
/// not decided. Other per-thread writes (`cp_async`, `gather_to_lds`): `symbolic::free`'s.
pub fn write_finding(fp: &Footprints, ai: usize) -> Option<Diagnostic> {
    if fp.accesses[ai].access.kind != AccessKind::Write {
        return free::finding(fp, ai);
    }
    let verdict = match fp.symbolic {
        true => self_race(fp, ai),
        false => Verdict::Undecided("the symbolic engine is off"),
    };
    let (k, op) = (fp.k, fp.accesses[ai].id.op);
    let d = match verdict {
        Verdict::Never => return None,
        Verdict::Always { witness, runs } => {
            let race = Race::found(k, &witness, runs);
            let msg = format!(
                "{} writes {} from several threads at once: threads {} and {} write it{}",
                op_label(k, op),
                race.unit,
                race.threads.0,
                race.threads.1,
                race.when,
            );
            return Some(Diagnostic::error(DiagKind::Finding, "E0301", msg).with_label(k.span(op), WRITE_LABEL));
        }
        _ => free::finding(fp, ai)?,
    };
    if d.code != "W0317" {
        return Some(d);
    }
    let why = why(k, &verdict, |w| format!("threads {} and {} write {}", w.threads.0, w.threads.1, element(k, w)));
    Some(match verdict {
        Verdict::May { witness: Ok(_), .. } => {
            let buf = &k.buffers[k.root_buffer(fp.accesses[ai].access.mem)].name;
            let msg = format!("{} may write one element of `@{buf}` from several threads: {why}", op_label(k, op));
            Diagnostic { message: msg, ..d }
        }
        _ if fp.accesses[ai].loops.is_empty() => d,
        _ => d.with_note(format!("over the iteration domains of its loops: {why}")),
    })
}
