//! The symbolic answers to the footprint engine's two thread questions, with the meaning
//! enumeration gives them (`analysis::conflicts::pair_conflict`, `Touch::self_overlap`):
//!
//! - **pair conflict**: for which iteration distances `d` do some instance of the source and
//!   some instance of the destination (leading loop keys related as the query says) touch a
//!   common address unit from two different threads (`conflict`), or at all (`intersect`),
//!   and does some such pair of threads lie in two warps (`intra_warp` false);
//! - **self race**: does one instance of a write touch a unit from two threads.
//!
//! Each side is its own copy of the access's constraints (thread variable, loop-key
//! variables over the enumerator's domains, guards, index forms in bounds, the unit range),
//! sharing a unit variable `u`. Key relations and the distance are linear constraints;
//! `t_a ≠ t_b` and `warp(t_a) ≠ warp(t_b)` are each two solver calls (`<` and `>`). The
//! feasible distances are found by splitting their range (each solve either excludes an
//! interval or yields one feasible value). Anything the forms cannot express, an enumeration
//! cap that would be reached, or a solver budget reached: `None`, and the caller enumerates.
//! Witness units are not computed (they only serve `--explain`, which enumerates lazily).
//!
//! Each access's side is built once (`Template`) and a pair question is keyed by the two
//! templates' content ids and the difference of their unit constants (`PairKey`): accesses
//! that differ by a constant (unrolled copies) share answers (docs/symbolic.md, "Translated
//! accesses share one answer").

use std::cell::RefCell;

use rustc_hash::FxHashMap as HashMap;

use super::bits::{self, Distinct, Ident};
use super::form::{Affine, Builder, Form, Guard};
use super::solve::{Answer, Presolved, Problem};
use crate::analysis::conflicts::PairConflict;
use crate::analysis::footprint::{Footprints, LoopDomain};
use crate::ir::arith::gcd;
use crate::ir::*;

/// Most search nodes one question may visit before falling back to enumeration.
pub const BUDGET: u64 = 20_000;
/// Fewest search nodes a question gets.
pub const MIN_BUDGET: u64 = 256;

thread_local! {
    /// Search nodes left to the question in progress (all its solves share them).
    static LEFT: std::cell::Cell<u64> = const { std::cell::Cell::new(BUDGET) };
}

/// Search nodes left to the question in progress.
pub(super) fn budget_left() -> u64 {
    LEFT.with(|l| l.get())
}

/// Sets the search nodes left to the question in progress.
pub(super) fn set_budget_left(n: u64) {
    LEFT.with(|l| l.set(n));
}

thread_local! {
    /// The solutions found while recording ([`recording`]): [`decide_within`] reads the
    /// threads they name instead of asking again.
    static SEEN: RefCell<Option<Vec<Vec<i64>>>> = const { RefCell::new(None) };
}

/// Starts (`true`) or stops recording the solutions the solves of this thread find; returns
/// those recorded since the start.
fn recording(on: bool) -> Vec<Vec<i64>> {
    SEEN.with(|s| std::mem::replace(&mut *s.borrow_mut(), on.then(Vec::new)).unwrap_or_default())
}

/// Keeps a solution when recording.
fn seen(r: &Answer) {
    if let Answer::Sat(x) = r {
        SEEN.with(|s| {
            if let Some(v) = s.borrow_mut().as_mut() {
                v.push(x.clone());
            }
        });
    }
}

/// Solves within the question's remaining budget.
fn solve(q: &Problem) -> Answer {
    let mut b = LEFT.with(|l| l.get());
    let r = q.solve(&mut b);
    LEFT.with(|l| l.set(b));
    seen(&r);
    r
}

/// [`solve`] of a presolved problem with its variable's box set to `bx`.
fn solve_box(q: &Presolved, bx: (i64, i64)) -> Answer {
    let mut b = LEFT.with(|l| l.get());
    let r = q.solve(bx, &mut b);
    LEFT.with(|l| l.set(b));
    seen(&r);
    r
}

/// Sets the question's budget: a fraction of what enumerating it would cost (threads times
/// the instances of both sides), within [`MIN_BUDGET`, `BUDGET`], so that a question the
/// enumerator answers cheaply is never made expensive by a long search.
///
/// With block leaves free (`symbolic::params`), the full [`BUDGET`]: such a question is asked
/// only where the enumerator's answer is the whole buffer.
pub(super) fn set_budget(fp: &Footprints, ai: usize, bi: usize) -> u64 {
    let est = match super::form::free_params() {
        true => BUDGET,
        false => (instances(fp, ai).saturating_add(instances(fp, bi)) / 32).clamp(MIN_BUDGET, BUDGET),
    };
    LEFT.with(|l| l.set(est));
    est
}

/// What enumerating access `i` visits: threads times the iterations of its loops (the
/// enumerator's domains).
pub fn instances(fp: &Footprints, i: usize) -> u64 {
    fp.accesses[i]
        .loops
        .iter()
        .map(|l| match fp.domains.get(l) {
            Some(LoopDomain::Exact { trip, .. }) => (*trip).max(1) as u64,
            Some(LoopDomain::Periodic { period, .. }) => (*period).max(1) as u64,
            _ => 1,
        })
        .fold(fp.k.threads().max(1) as u64, u64::saturating_mul)
        .min(u64::MAX / 4)
}

/// One side of a question: its loop keys (`None`: not enumerated) and its unit range.
struct Side {
    keys: Vec<Option<Affine>>,
    unit: Affine,
    units: i64,
    /// Who touches the unit.
    who: Ident,
    /// The whole root buffer (`whole_buffer`): the enumerator's unknown touch, which its
    /// self-race test does not read as one unit touched by two threads.
    whole: bool,
    /// The block leaves read as variables (`form::with_free_params`): one value in the
    /// whole run, so the same variable on both sides of a question (`compose`).
    shared: Vec<(Value, usize)>,
}

/// Loop keys of access `ai` as the enumerator forms them: a variable over the enumerated
/// values (exact iterations, or residues of a period), `None` where a loop is not enumerated
/// (the access does not depend on it, or its domain is unknown). `None` overall: some
/// enumerated loop has no value (no instance at all). Unlike the enumerator, no cap on the
/// number of iteration instances applies: a key is one variable whatever its range, so the
/// answer stays exact where enumeration would make inner loop variables unknown (W0313).
///
/// `pins`: the iteration index fixed at some levels (`symbolic::split`): such a key is the
/// constant `first + step·v` instead of a variable (only for an exact domain).
pub(super) type Keys = Vec<(Option<Affine>, Option<Value>)>;

pub(super) fn keys(fp: &Footprints, b: &mut Builder, ai: usize, pins: &[Option<i64>]) -> Option<Keys> {
    let k = fp.k;
    let mut out = Vec::new();
    for (j, &l) in fp.accesses[ai].loops.iter().enumerate() {
        let exact = matches!(fp.domains.get(&l), Some(LoopDomain::Exact { .. }));
        let iv = match &k.ops[l].kind {
            OpKind::For { .. } => Some(k.region_args(k.ops[l].regions[0])[0]),
            _ => None,
        };
        match (key_values(fp, b, l), iv) {
            (Some((_, _, n)), Some(iv)) if n > 0 && !fp.depends_on(ai, l, iv) => {
                out.push((None, None))
            }
            (Some((_, _, 0)), Some(_)) => return None,
            (Some((first, step, n)), Some(iv)) => {
                let key = match pins.get(j).copied().flatten() {
                    Some(v) if exact && (0..n).contains(&v) => Affine::konst(first + step * v),
                    _ => Affine {
                        terms: vec![(b.p.var(0, n - 1), step)],
                        c: first,
                    },
                };
                b.ivs.push((iv, key.clone()));
                out.push((Some(key), Some(iv)));
            }
            _ => out.push((None, None)),
        }
    }
    Some(out)
}

/// The values the enumerator gives loop `l`'s key: `(first value, step between values,
/// count)` of an exact domain with constant bounds, or of the residues of a periodic one;
/// `None` where the loop is not enumerated (no domain, bounds without a constant form).
fn key_values(fp: &Footprints, b: &mut Builder, l: Op) -> Option<(i64, i64, i64)> {
    let konst = |b: &mut Builder, o: &Operand| match b.operand(o) {
        Form::Known(a) => a.as_const(),
        _ => None,
    };
    match (fp.domains.get(&l).copied(), &fp.k.ops[l].kind) {
        (Some(LoopDomain::Exact { step, .. }), OpKind::For { lo, hi, .. }) => {
            match (konst(b, lo), konst(b, hi)) {
                (Some(lo), Some(hi)) => Some((lo, step, ((hi - lo).max(0) + step - 1) / step)),
                _ => None,
            }
        }
        (Some(LoopDomain::Periodic { step, period }), OpKind::For { lo, .. }) => {
            let g = gcd(step, period).max(1);
            match konst(b, lo) {
                Some(lo) => Some((lo.rem_euclid(g), g, period / g)),
                None => Some((0, 1, period)),
            }
        }
        _ => None,
    }
}

/// How a side's operations of a constant and a small-range value (`Builder::table`) are
/// built: not at all (`Plain`), as exact tables, or relaxed to a free variable over the
/// table's values (`symbolic::split`'s pre-checks: infeasibility only).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Mode {
    Plain,
    Tables,
    Relaxed,
}

/// Builds one side on `p`; `shared`: reuse these keys (the other side of a self race);
/// `pins`: fixed iteration indices (see [`keys`]). Where an operation needed a table that
/// `tables` does not allow, `split` becomes the loop levels to split the question on
/// (`split::levels`).
fn side(
    fp: &Footprints,
    p: &mut Problem,
    (ai, tid): (usize, usize),
    shared: Option<&[(Option<Affine>, Option<Value>)]>,
    (mode, pins): (Mode, &[Option<i64>]),
    split: &mut super::split::Levels,
) -> Result<Option<Side>, ()> {
    let mut b = Builder::new(fp, p, tid);
    // Tables cost more search than a small enumeration (docs/symbolic.md, "Tables").
    b.tables = mode != Mode::Plain;
    b.relax = mode == Mode::Relaxed;
    let keys = match shared {
        Some(s) => {
            for (key, iv) in s {
                if let (Some(key), Some(iv)) = (key, iv) {
                    b.ivs.push((*iv, key.clone()));
                }
            }
            s.to_vec()
        }
        None => match keys(fp, &mut b, ai, pins) {
            Some(ks) => ks,
            None => return Ok(None),
        },
    };
    let mut r = side_in(fp, &mut b, (ai, tid), &keys);
    if !b.wanted.is_empty() {
        *split = super::split::levels(fp, ai, b.p, &keys, &b.wanted);
    }
    if let (Ok(Some(s)), Some(free)) = (&mut r, &b.free) {
        s.shared = free.shared.clone();
    }
    r
}

/// [`side`] after its keys: guards, indices, unit range, who touches it.
fn side_in(fp: &Footprints, b: &mut Builder, (ai, tid): (usize, usize), keys: &Keys) -> Result<Option<Side>, ()> {
    let k = fp.k;
    let a = &fp.accesses[ai];
    let guarded = guards(fp, b, a.id.op)?;
    let (idx, who) = match &a.access.footprint {
        Footprint::PerThread(ix) => (ix.iter().map(|o| b.operand(o)).collect(), Ident::Thread(tid)),
        Footprint::Collective { layout } => {
            bits::collective(fp, b, ai, layout.as_deref(), guarded).ok_or(())?
        }
    };
    let (root, idx) = root_index(b, a.access.mem, idx)?;
    let bd = &k.buffers[root];
    let space = if bd.offset.is_some() {
        0
    } else {
        root.index() as u64 + 1
    };
    let u = fp.unit(space) as i64;
    let e = bd.elem.bytes() as i64;
    let base = bd.offset.unwrap_or(0) as i64;
    let keys = keys.iter().map(|(key, _)| key.clone()).collect();
    let Some(idx) = idx else {
        return Ok(Some(whole_buffer(b.p, keys, who, base, bd.bytes() as i64, u)));
    };
    if idx.len() != bd.shape.len() {
        return Err(());
    }
    let mut lin = Affine::konst(0);
    for (f, &d) in idx.iter().zip(&bd.shape) {
        in_bounds(b, f, d as i64)?;
        lin = lin.scale(d as i64).and_then(|l| l.plus(f)).ok_or(())?;
    }
    let unit = lin
        .scale(e / u)
        .and_then(|l| l.plus(&Affine::konst(base / u)))
        .ok_or(())?;
    Ok(Some(Side {
        keys,
        unit,
        units: e / u,
        who,
        whole: false,
        shared: Vec::new(),
    }))
}

/// Constrains `b`'s problem by the conditions of every `if` enclosing `op` (on a collective
/// access: on the thread that executes it, `bits::collective`); whether there was one.
/// `Err`: a guard without an encoding.
pub(super) fn guards(fp: &Footprints, b: &mut Builder, op: Op) -> Result<bool, ()> {
    let k = fp.k;
    let mut child = op;
    let mut guarded = false;
    for anc in fp.ancestors(op).into_iter().rev() {
        if let OpKind::If { cond } = &k.ops[anc].kind {
            let in_then = fp.region_of(child) == Some(k.ops[anc].regions[0]);
            match b.guard(cond, in_then) {
                Guard::Always => {}
                Guard::When(cs) => {
                    guarded = true;
                    for (f, lo, hi) in cs {
                        f.constrain(b.p, lo, hi);
                    }
                }
                Guard::Unsupported => return Err(()),
            }
        }
        child = anc;
    }
    Ok(guarded)
}

/// The side of an access some index of which the enumerator cannot evaluate (a loaded bin,
/// a parameter, a collective copy whose view is not uniform): as in
/// `Footprints::touch`, every instance touches its whole root buffer (`bytes` from `base`,
/// in units of `u`), by its thread for a per-thread access and by unknown threads
/// (`Owner::Any`) for a collective one: one unit variable over that range.
fn whole_buffer(p: &mut Problem, keys: Vec<Option<Affine>>, who: Ident, base: i64, bytes: i64, u: i64) -> Side {
    let unit = p.var(base / u, (base + bytes + u - 1) / u - 1);
    let who = match who {
        Ident::Thread(t) => Ident::Thread(t),
        Ident::Collective { .. } => Ident::Collective {
            shape: Vec::new(),
            pos: Vec::new(),
            owner: bits::Owner::Any,
        },
    };
    Side {
        keys,
        unit: Affine::var(unit),
        units: 1,
        who,
        whole: true,
        shared: Vec::new(),
    }
}

/// The root buffer and per-dimension index forms of a memref chain (`Footprints`'s
/// `root_index`): `None` when some index is [`Form::Unknown`] (the enumerator's evaluation
/// fails, so the access touches its whole buffer, whatever the other indices are); an
/// unsupported index otherwise: fall back.
pub(super) fn root_index(b: &mut Builder, m: MemRef, idx: Vec<Form>) -> Result<(Buffer, Option<Vec<Affine>>), ()> {
    match m {
        MemRef::Buffer(buf) if idx.contains(&Form::Unknown) => Ok((buf, None)),
        MemRef::Buffer(buf) => {
            let known = idx
                .into_iter()
                .map(|f| match f {
                    Form::Known(a) => Ok(a),
                    _ => Err(()),
                })
                .collect::<Result<Vec<_>, ()>>()?;
            Ok((buf, Some(known)))
        }
        MemRef::View(v) => {
            let vd = &b.k.views[v];
            let mut out = Vec::new();
            let mut j = 0;
            for ix in &vd.indices {
                match ix {
                    ViewIndex::At(o) => out.push(b.operand(o)),
                    ViewIndex::Range(lo, _) => {
                        out.push(match idx.get(j) {
                            Some(Form::Known(a)) => Form::Known(
                                a.plus(&Affine::konst(*lo as i64)).ok_or(())?,
                            ),
                            Some(Form::Unknown) => Form::Unknown,
                            _ => Form::Unsupported,
                        });
                        j += 1;
                    }
                }
            }
            out.extend(idx.into_iter().skip(j));
            root_index(b, vd.base, out)
        }
    }
}

/// Fails unless the index is in `[0, d)` for every executing instance (the enumerator treats
/// an out-of-bounds index as touching the whole buffer). An index on a free block leaf
/// (`form::with_free_params`) is constrained to `[0, d)` instead: an index out of range is
/// an execution error (`check` reports it), as in `symbolic::free`.
fn in_bounds(b: &mut Builder, f: &Affine, d: i64) -> Result<(), ()> {
    let (lo, hi) = f.range(b.p);
    if lo >= 0 && hi < d {
        return Ok(());
    }
    if let Some(free) = &b.free
        && f.terms.iter().any(|(x, _)| free.tainted.contains(x))
    {
        f.constrain(b.p, 0, d - 1);
        return Ok(());
    }
    for (l, h) in [(i64::MIN / 4, -1), (d, i64::MAX / 4)] {
        let mut q = b.p.clone();
        f.constrain(&mut q, l, h);
        if solve(&q) != Answer::Unsat {
            return Err(());
        }
    }
    Ok(())
}

/// Shifts every side's unit form by the first side's constant: the question is then built in
/// the unit coordinates `u' = u − c_a`, in which the constants appear only as differences, so
/// translated pairs build equal problems and share one memo entry (docs/symbolic.md,
/// "Translated accesses share one answer").
fn relative_units(sides: &mut [&mut Side]) {
    let shift = sides.first().map_or(0, |s| s.unit.c);
    // (A difference that would overflow leaves the absolute coordinates: still exact.)
    if sides.iter().all(|s| s.unit.c.checked_sub(shift).is_some()) {
        for s in sides.iter_mut() {
            s.unit.c -= shift;
        }
    }
}

/// `u` lies in the side's unit range.
fn covers(p: &mut Problem, u: usize, s: &Side) {
    let mut t = vec![(u, 1)];
    t.extend(s.unit.terms.iter().map(|&(v, a)| (v, -a)));
    p.add(&t, s.unit.c, s.unit.c + s.units - 1);
}

/// `x − y` in `[lo, hi]`.
fn diff(p: &mut Problem, x: usize, y: usize, lo: i64, hi: i64) {
    p.add(&[(x, 1), (y, -1)], lo, hi);
}

/// Whether one of the problems is satisfiable; `None` when a search ran out of budget
/// before any was found satisfiable.
pub(super) fn any_sat(ps: &[Problem]) -> Option<bool> {
    let mut out = Some(false);
    for q in ps {
        match solve(q) {
            Answer::Sat(_) => return Some(true),
            Answer::Budget => out = None,
            Answer::Unsat => {}
        }
    }
    out
}

/// [`any_sat`] of the problems with their variable's box clipped to `[lo, hi]`, those whose
/// clipped box is empty left out.
fn any_sat_within(ps: &[Presolved], lo: i64, hi: i64) -> Option<bool> {
    let mut out = Some(false);
    for q in ps {
        match clip(q, lo, hi).map(|bx| solve_box(q, bx)) {
            Some(Answer::Sat(_)) => return Some(true),
            Some(Answer::Budget) => out = None,
            _ => {}
        }
    }
    out
}

/// A solution of one of the problems (`Some(None)`: none has one); `None` when a search
/// ran out of budget before any was found satisfiable.
pub(super) fn witness(ps: &[Problem]) -> Option<Option<Vec<i64>>> {
    let mut out = Some(None);
    for q in ps {
        match solve(q) {
            Answer::Sat(x) => return Some(Some(x)),
            Answer::Budget => out = None,
            Answer::Unsat => {}
        }
    }
    out
}

/// The box of a presolved problem's variable intersected with `[lo, hi]` (`None`: empty).
fn clip(q: &Presolved, lo: i64, hi: i64) -> Option<(i64, i64)> {
    let (p, v) = (q.problem(), q.var());
    let (l, h) = (p.lo[v].max(lo), p.hi[v].min(hi));
    (l <= h).then_some((l, h))
}

/// The problem split by `t_a ≠ t_b` (or, with `warps`, `warp(t_a) ≠ warp(t_b)`).
pub(super) fn distinct(p: &Problem, ta: usize, tb: usize, warps: Option<(usize, usize)>) -> Vec<Problem> {
    let (x, y) = warps.unwrap_or((ta, tb));
    [(i64::MIN / 4, -1), (1, i64::MAX / 4)]
        .into_iter()
        .map(|(lo, hi)| {
            let mut q = p.clone();
            diff(&mut q, x, y, lo, hi);
            q
        })
        .collect()
}

/// Values of the presolved variable in `[lo, hi]` for which one of `ps` is satisfiable
/// (splitting the range: each solve excludes an interval or yields a value). `None` on
/// budget.
fn feasible_values(ps: &[Presolved], lo: i64, hi: i64, out: &mut Vec<i64>) -> Option<()> {
    if lo > hi {
        return Some(());
    }
    let mut found = None;
    let mut budget_hit = false;
    for q in ps {
        let Some(bx) = clip(q, lo, hi) else {
            continue;
        };
        match solve_box(q, bx) {
            Answer::Sat(x) => {
                found = Some(x[q.var()]);
                break;
            }
            Answer::Budget => budget_hit = true,
            Answer::Unsat => {}
        }
    }
    match found {
        None if budget_hit => None,
        None => Some(()),
        Some(x) => {
            out.push(x);
            feasible_values(ps, lo, x - 1, out)?;
            feasible_values(ps, x + 1, hi, out)
        }
    }
}

/// The distance bit pattern of the variable level, as `conflicts::bits_for` gives it.
#[derive(PartialEq, Eq, Hash)]
pub(super) enum Distance {
    /// The mask does not depend on the keys (a key not enumerated, or an unknown domain).
    Fixed(u64),
    /// Exact domain: variable `dist` (destination index − source index) ≥ 0.
    Exact(usize),
    /// Periodic domain: variable `r = (kb − ka) mod period`; bit d iff `d·step ≡ r`.
    Periodic { r: usize, step: i64, period: i64 },
}

/// [`pair_conflict`] with `SMEMSYNC_SYMBOLIC_TRACE=1` printing each question's nodes and
/// answer. Callers decide each question once per `Footprints::question_id` pair
/// (`conflicts::pair_conflict`).
pub fn pair_conflict_traced(
    fp: &Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
    var: Option<usize>,
) -> Option<PairConflict> {
    let n0 = super::solve::NODES.with(|n| n.get());
    let r = pair_conflict(fp, ai, bi, plen, var);
    if tracing() {
        let n = super::solve::NODES.with(|n| n.get()) - n0;
        eprintln!(
            "symbolic pair {} -> {} plen={plen} var={var:?}: {n} nodes, {:?}",
            crate::emit::text::op_label(fp.k, fp.accesses[ai].id.op),
            crate::emit::text::op_label(fp.k, fp.accesses[bi].id.op),
            r.as_ref().map(|p| (p.conflict, p.intersect, p.intra_warp))
        );
    }
    r
}

/// Whether `SMEMSYNC_SYMBOLIC_TRACE` is set (read once: the environment was read on every
/// question, 1% of the rolled flash kernel's `sync`).
pub(super) fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SMEMSYNC_SYMBOLIC_TRACE").is_some())
}

/// The symbolic [`PairConflict`] of `conflicts::pair_conflict` (without a witness), or
/// `None` to enumerate.
pub fn pair_conflict(
    fp: &Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
    var: Option<usize>,
) -> Option<PairConflict> {
    if let Some(plan) = super::split::plan(fp, ai, bi, plen) {
        return super::split::pair_conflict(fp, &plan, (ai, bi), (plen, var));
    }
    match question(fp, ai, bi, (plen, var), None)? {
        Built::Nothing => Some(PairConflict::default()),
        Built::Known(Known::Pair(r)) => r,
        Built::Known(Known::Meets(_)) => None,
        Built::New(key, q) => {
            let r = decide_pair(&q);
            fp.sym_sides.answers.borrow_mut().insert(key, Known::Pair(r.clone()));
            r
        }
    }
}

/// Whether some instance of the source `ai` and some instance of the destination `bi` touch
/// a common unit, whoever touches it (an async copy still in flight), with their first
/// `plen` loop keys equal and, with `fix`, the destination's key at level `fix.0` equal to
/// `fix.1` (an unenumerated key matches every value, as in the enumerator): the distance-0
/// bit of [`pair_conflict`]'s `intersect` mask, in one solve instead of the whole conflict
/// question. This is `hazards::intersects_at`'s question (`fix`: a wait found in the first
/// iteration of a later loop); `None` to enumerate.
pub fn intersects_at(
    fp: &Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
    fix: Option<(usize, i64)>,
) -> Option<bool> {
    if let Some(plan) = super::split::plan(fp, ai, bi, plen) {
        return super::split::intersects_at(fp, &plan, (ai, bi), plen, fix);
    }
    match question(fp, ai, bi, (plen, None), Some(fix))? {
        Built::Nothing => Some(false),
        Built::Known(Known::Meets(r)) => r,
        Built::Known(Known::Pair(_)) => None,
        Built::New(key, q) => {
            LEFT.with(|l| l.set(q.left));
            let r = any_sat(std::slice::from_ref(&q.p));
            fp.sym_sides.answers.borrow_mut().insert(key, Known::Meets(r));
            r
        }
    }
}

/// A pair question looked up or built: no instance pair at all, an answer decided before
/// for the same key, or a new question with its key.
pub(super) enum Built {
    Nothing,
    Known(Known),
    New(PairKey, PairQuestion),
}

/// A remembered answer: of [`pair_conflict`] or of [`intersects_at`].
#[derive(Clone)]
pub(super) enum Known {
    Pair(Option<PairConflict>),
    Meets(Option<bool>),
}

/// What a pair question's answer depends on (docs/symbolic.md, "Translated accesses share
/// one answer"): the two sides' templates up to their unit constants, the difference of
/// those constants, the relation of the loop keys, the pinned key of an [`intersects_at`]
/// question (`meets`), and the search budget.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PairKey {
    a: u32,
    b: u32,
    delta: i64,
    plen: usize,
    var: Option<usize>,
    /// The distance level's domain, encoded (`domain_word`).
    dom: (u8, i64, i64),
    meets: Option<Option<(usize, i64)>>,
    left: u64,
}

/// One side of a pair question built once per access on its own problem (its thread is
/// variable 0): the problem, keys, unit form (with its constant), units per element and who
/// touches it, and the id of its content without the unit constant.
pub(crate) struct Template {
    p: Problem,
    pub(super) keys: Vec<Option<Affine>>,
    unit: Affine,
    units: i64,
    who: Ident,
    id: u32,
    /// The whole root buffer: some index is unknown (`whole_buffer`).
    pub(super) whole: bool,
    /// Block leaves and their variables (`Side::shared`).
    shared: Vec<(Value, usize)>,
}

/// What two templates with one id share: everything but the unit constant.
#[derive(PartialEq, Eq, Hash)]
struct TemplateKey {
    p: Problem,
    keys: Vec<Option<Affine>>,
    unit: Vec<(usize, i64)>,
    units: i64,
    who: Ident,
    shared: Vec<(Value, usize)>,
}

/// Which template: the access, how its tables are built, its fixed iteration indices, the
/// leaf values fixed by the case in progress (`symbolic::cases`), and whether block leaves
/// are free variables (`symbolic::params`).
type TemplateId = (usize, Mode, Vec<Option<i64>>, Vec<(Value, i64)>, bool);

/// A template: `Err` where the side has no encoding, `Ok(None)` where it has no instance.
pub(super) type Made = Result<Option<std::rc::Rc<Template>>, ()>;

/// The per-[`Footprints`] store of side templates (by access and whether tables are
/// allowed), their interned ids, and the pair answers by `PairKey`.
#[derive(Default)]
pub struct Templates {
    made: RefCell<HashMap<TemplateId, Made>>,
    /// The loop levels each access's questions split on (`split::levels`), recorded by its
    /// template without tables.
    pub(super) split: RefCell<HashMap<usize, super::split::Levels>>,
    ids: RefCell<HashMap<TemplateKey, u32>>,
    pub(super) answers: RefCell<HashMap<PairKey, Known>>,
    /// Each access's uniform leaves (`cases::leaves`), found once.
    pub(super) leaves: RefCell<HashMap<usize, Option<super::cases::Leaves>>>,
}

/// The template of access `ai` (with its iteration indices fixed at `pins`' levels), built
/// on first use: the side alone on a fresh problem, its in-bounds proofs within the budget
/// of a question of the access with itself.
pub(super) fn template(fp: &Footprints, ai: usize, mode: Mode, pins: &[Option<i64>]) -> Made {
    let fixed = super::form::fixed();
    let free = super::form::free_params();
    let record_split = mode == Mode::Plain && pins.is_empty() && fixed.is_empty() && !free;
    let id = (ai, mode, pins.to_vec(), fixed, free);
    if let Some(t) = fp.sym_sides.made.borrow().get(&id) {
        return t.clone();
    }
    let saved = LEFT.with(|l| l.get());
    set_budget(fp, ai, ai);
    let threads = fp.k.threads().max(1) as i64;
    let mut p = Problem::default();
    let t = p.var(0, threads - 1);
    let mut split = Some(Vec::new());
    let made = side(fp, &mut p, (ai, t), None, (mode, pins), &mut split).map(|s| {
        s.map(|s| {
            let key = TemplateKey {
                p: p.clone(),
                keys: s.keys.clone(),
                unit: s.unit.terms.clone(),
                units: s.units,
                who: s.who.clone(),
                shared: s.shared.clone(),
            };
            let mut ids = fp.sym_sides.ids.borrow_mut();
            let next = ids.len() as u32;
            let id = *ids.entry(key).or_insert(next);
            std::rc::Rc::new(Template {
                p,
                keys: s.keys,
                unit: s.unit,
                units: s.units,
                who: s.who,
                id,
                whole: s.whole,
                shared: s.shared,
            })
        })
    });
    LEFT.with(|l| l.set(saved));
    if record_split {
        fp.sym_sides.split.borrow_mut().insert(ai, split);
    }
    fp.sym_sides.made.borrow_mut().insert(id, made.clone());
    made
}

/// Whether some index of access `ai` is unknown to the enumerator (a parameter, `bid`, a
/// loaded value): its side is the whole root buffer (`whole_buffer`), and `symbolic::cases`
/// may decide its questions per value of its uniform leaves.
pub(super) fn unknown_index(fp: &Footprints, ai: usize) -> bool {
    matches!(template(fp, ai, Mode::Plain, &[]), Ok(Some(t)) if t.whole)
}

/// A variable-renumbered copy of `f` (every variable `v` becomes `v + off`).
fn shifted(f: &Affine, off: usize) -> Affine {
    Affine {
        terms: f.terms.iter().map(|&(v, a)| (v + off, a)).collect(),
        c: f.c,
    }
}

/// The pair question's two sides on one problem: `a`'s variables first, `b`'s after them,
/// both unit forms relative to `a`'s constant (docs/symbolic.md, "Translated accesses share
/// one answer").
fn compose(a: &Template, b: &Template) -> Option<(Problem, Side, Side)> {
    let mut p = a.p.clone();
    let off = p.lo.len();
    p.lo.extend_from_slice(&b.p.lo);
    p.hi.extend_from_slice(&b.p.hi);
    p.cons.extend(b.p.cons.iter().map(|c| super::solve::Lin {
        terms: c.terms.iter().map(|&(v, x)| (v + off, x)).collect(),
        lo: c.lo,
        hi: c.hi,
    }));
    // A block leaf holds one value in the whole run: one variable for both sides.
    for (v, x) in &a.shared {
        if let Some((_, y)) = b.shared.iter().find(|(w, _)| w == v) {
            p.add(&[(*x, 1), (y + off, -1)], 0, 0);
        }
    }
    let who = match &b.who {
        Ident::Thread(t) => Ident::Thread(t + off),
        Ident::Collective { shape, pos, owner } => Ident::Collective {
            shape: shape.clone(),
            pos: pos.iter().map(|v| v + off).collect(),
            owner: owner.clone(),
        },
    };
    let shift = a.unit.c;
    let sa = Side {
        keys: a.keys.clone(),
        unit: Affine { terms: a.unit.terms.clone(), c: 0 },
        units: a.units,
        who: a.who.clone(),
        whole: false,
        shared: Vec::new(),
    };
    let mut unit = shifted(&b.unit, off);
    unit.c = unit.c.checked_sub(shift)?;
    let sb = Side {
        keys: b.keys.iter().map(|k| k.as_ref().map(|k| shifted(k, off))).collect(),
        unit,
        units: b.units,
        who,
        whole: false,
        shared: Vec::new(),
    };
    Some((p, sa, sb))
}

/// One word triple for a loop domain in a [`PairKey`] (`0`: no distance level, `1`: no such
/// loop, `2`: no domain).
fn domain_word(var: Option<usize>, dom: Option<Option<LoopDomain>>) -> (u8, i64, i64) {
    match (var, dom) {
        (None, _) => (0, 0, 0),
        (_, None) => (1, 0, 0),
        (_, Some(None)) => (2, 0, 0),
        (_, Some(Some(LoopDomain::Exact { step, trip }))) => (3, step, trip),
        (_, Some(Some(LoopDomain::Periodic { step, period }))) => (4, step, period),
        (_, Some(Some(LoopDomain::Unknown { trip }))) => (5, trip.is_some() as i64, trip.unwrap_or(0)),
    }
}

/// Looks the pair question of `ai` (source) and `bi` (destination) related by `(plen, var)`
/// up, or builds it; `meets`: an [`intersects_at`] question, with the destination's key at
/// level `fix.0` pinned to `fix.1` when given. `None`: no encoding (enumerate).
fn question(
    fp: &Footprints,
    ai: usize,
    bi: usize,
    rel: (usize, Option<usize>),
    meets: Option<Option<(usize, i64)>>,
) -> Option<Built> {
    let left = set_budget(fp, ai, bi);
    let mode = if left > MIN_BUDGET { Mode::Tables } else { Mode::Plain };
    let sides = (template(fp, ai, mode, &[]), template(fp, bi, mode, &[]));
    question_at(fp, (ai, bi), rel, meets, (&sides.0, &sides.1), left)
}

/// [`question`] on the given templates of `ai` and `bi` (built in some [`Mode`], their
/// iteration indices maybe fixed: a piece of a split question, `symbolic::split`), within
/// the budget `left` (the search budget left is not reset).
pub(super) fn question_at(
    fp: &Footprints,
    (ai, bi): (usize, usize),
    (plen, var): (usize, Option<usize>),
    meets: Option<Option<(usize, i64)>>,
    (ta, tb): (&Made, &Made),
    left: u64,
) -> Option<Built> {
    let (Ok(ta), Ok(tb)) = (ta, tb) else {
        return None;
    };
    let (Some(ta), Some(tb)) = (ta, tb) else {
        return Some(Built::Nothing);
    };
    let loops = longer_nest(fp, ai, bi);
    if !keys_may_meet(&ta.keys, &tb.keys, (plen, var), loops, fp) {
        return Some(Built::Nothing);
    }
    let dom = var.map(|j| loops.get(j).map(|l| fp.domains.get(l).copied()));
    let key = PairKey {
        a: ta.id,
        b: tb.id,
        delta: tb.unit.c.checked_sub(ta.unit.c)?,
        plen,
        var,
        dom: domain_word(var, dom.flatten()),
        meets,
        left,
    };
    if let Some(r) = fp.sym_sides.answers.borrow().get(&key) {
        return Some(Built::Known(r.clone()));
    }
    if LATTICE.with(|l| l.get()) && !units_may_meet(ta, tb, key.delta) {
        return Some(Built::Nothing);
    }
    let (p, dist) = compose_related(fp, (ta, tb), (plen, var), meets, loops)?;
    match p {
        None => Some(Built::Nothing),
        Some((p, rel)) => Some(Built::New(
            key,
            PairQuestion {
                p,
                rel,
                dist,
                threads: fp.k.threads().max(1) as i64,
                warp: fp.warp as i64,
                left,
            },
        )),
    }
}

/// The loop nest of `ai` or `bi`, whichever is longer (the levels a key relation reads).
fn longer_nest<'f>(fp: &'f Footprints, ai: usize, bi: usize) -> &'f [Op] {
    let (la, lb) = (&fp.accesses[ai].loops, &fp.accesses[bi].loops);
    if la.len() >= lb.len() { la } else { lb }
}

/// The composed problem of two templates with the common unit, the key relations of the
/// first `plen` levels (the distance at `var`), the pinned key of an in-flight question
/// and the thread relation; `Some((None, _))`: no instance pair (a fixed empty distance).
fn compose_related(
    fp: &Footprints,
    (ta, tb): (&Template, &Template),
    (plen, var): (usize, Option<usize>),
    meets: Option<Option<(usize, i64)>>,
    loops: &[Op],
) -> Option<(Option<(Problem, Distinct)>, Distance)> {
    let (mut p, sa, sb) = compose(ta, tb)?;
    let (ra, rb) = (sa.unit.range(&p), sb.unit.range(&p));
    let u = p.var(ra.0.min(rb.0), ra.1.max(rb.1) + sa.units.max(sb.units));
    covers(&mut p, u, &sa);
    covers(&mut p, u, &sb);
    let mut dist = Distance::Fixed(1);
    for j in 0..plen.min(sa.keys.len().max(sb.keys.len())) {
        let (ka, kb) = (
            sa.keys.get(j).cloned().flatten(),
            sb.keys.get(j).cloned().flatten(),
        );
        if Some(j) == var {
            dist = distance(&mut p, fp.domains.get(loops.get(j)?).copied(), ka, kb)?;
        } else if let (Some(x), Some(y)) = (ka, kb) {
            x.plus(&y.scale(-1)?)?.constrain(&mut p, 0, 0);
        }
    }
    if let Some(Some((l, key))) = meets
        && let Some(Some(kb)) = sb.keys.get(l)
    {
        kb.constrain(&mut p, key, key);
    }
    if let Distance::Fixed(0) = dist {
        return Some((None, dist));
    }
    let rel = bits::relate(&mut p, (&sa.who, &sa.unit, sa.units), (&sb.who, &sb.unit, sb.units), fp.warp)?;
    Some((Some((p, rel)), dist))
}

thread_local! {
    static LATTICE: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Turns the unit-lattice test of pair questions (`units_may_meet`) on (the default) or
/// off on this thread: tests compare every answer with it and without it.
pub fn lattice_test(on: bool) {
    LATTICE.with(|l| l.set(on));
}

/// False when no unit of template `a` can be a unit of template `b` shifted by `delta`
/// (`c_b − c_a`), judged by the two unit forms alone: the composed problem requires
/// `U_a − U_b ∈ [delta − (n_a − 1), delta + n_b − 1]` (the two unit ranges meet, in the
/// coordinates relative to `c_a`), where `U` is a side's unit form without its constant,
/// ranging over its variables' boxes, and every value of `U_a − U_b` is a multiple of the
/// gcd of all their coefficients. No such multiple in that interval: the problem is
/// infeasible (a relaxation of it is), so the question has no instance pair, exactly
/// (docs/symbolic.md, "Unit lattices"). O(terms).
fn units_may_meet(a: &Template, b: &Template, delta: i64) -> bool {
    let span = |t: &Template| {
        let (mut lo, mut hi, mut g) = (0i128, 0i128, 0i64);
        for &(v, c) in &t.unit.terms {
            let (x, y) = (c as i128 * t.p.lo[v] as i128, c as i128 * t.p.hi[v] as i128);
            lo += x.min(y);
            hi += x.max(y);
            g = gcd(g, c);
        }
        (lo, hi, g)
    };
    let ((la, ha, ga), (lb, hb, gb)) = (span(a), span(b));
    let d = delta as i128;
    let lo = (d - (a.units as i128 - 1)).max(la - hb);
    let hi = (d + b.units as i128 - 1).min(ha - lb);
    let g = gcd(ga, gb) as i128;
    if lo > hi {
        return false;
    }
    // The least multiple of `g` at or above `lo` (`g = 0`: both forms constant, and the
    // one difference, 0, lies in `[la − hb, ha − lb] = [0, 0]`).
    g == 0 || lo.div_euclid(g) * g + if lo.rem_euclid(g) == 0 { 0 } else { g } <= hi
}

/// False when two constant keys (fixed iteration indices of split pieces) violate the key
/// relation: unequal at a level before `plen` other than `var`, or at `var` no distance of
/// the domain (see [`distance`]). Skips building such pieces; any other case is left to
/// the problem.
fn keys_may_meet(
    ka: &[Option<Affine>],
    kb: &[Option<Affine>],
    (plen, var): (usize, Option<usize>),
    loops: &[Op],
    fp: &Footprints,
) -> bool {
    for j in 0..plen.min(ka.len().max(kb.len())) {
        let c = |k: &[Option<Affine>]| k.get(j).cloned().flatten().and_then(|a| a.as_const());
        let (Some(x), Some(y)) = (c(ka), c(kb)) else { continue };
        let dom = loops.get(j).and_then(|l| fp.domains.get(l).copied());
        let ok = match (Some(j) == var, dom) {
            (true, Some(LoopDomain::Exact { step, .. })) => exact_bit(x, y, step) != 0,
            (true, _) => true,
            (false, _) => x == y,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The distance bit of two constant keys of an exact domain: `d = (y − x) / step` when
/// that is a non-negative integer (bit `d`, or 63 for 63 and more), else none.
pub(super) fn exact_bit(x: i64, y: i64, step: i64) -> u64 {
    let step = step.max(1);
    match y.checked_sub(x) {
        Some(e) if e >= 0 && e % step == 0 => 1u64 << (e / step).min(63),
        _ => 0,
    }
}

/// A built pair question: everything [`decide_pair`]'s answer depends on (the problem with
/// both sides, the thread variables, the distance relation, the block and warp sizes, and the
/// search budget).
pub(super) struct PairQuestion {
    pub(super) p: Problem,
    /// Which variables must differ for two different threads.
    pub(super) rel: Distinct,
    pub(super) dist: Distance,
    threads: i64,
    pub(super) warp: i64,
    left: u64,
}

/// A built self-race question (see [`PairQuestion`]).
#[derive(PartialEq, Eq, Hash)]
struct SelfQuestion {
    p: Problem,
    rel: Distinct,
    left: u64,
}

/// Most questions each memo keeps before it is emptied (a memo of a pure function: emptying
/// it never changes an answer, only bounds its memory).
const MEMO_LIMIT: usize = 1 << 14;

thread_local! {
    /// Answers of built self-race questions. The answer is a function of the question
    /// alone, so questions that different accesses build identically (each tile of a kernel
    /// with its own buffer, loops of one shape) are decided once.
    static SELVES: RefCell<HashMap<SelfQuestion, Option<bool>>> = RefCell::new(HashMap::default());
}

/// Empties the question memos: an analysis of a kernel starts with none, so that its cost and
/// memory do not depend on the kernels analysed before it on this thread.
pub fn forget_questions() {
    SELVES.with(|m| m.borrow_mut().clear());
}

/// Records an answer, emptying a full memo first.
fn remember<K: Eq + std::hash::Hash, V>(m: &mut HashMap<K, V>, k: K, v: V) {
    if m.len() >= MEMO_LIMIT {
        m.clear();
    }
    m.insert(k, v);
}

/// Decides a built pair question (the masks of the module doc), within its budget.
fn decide_pair(q: &PairQuestion) -> Option<PairConflict> {
    LEFT.with(|l| l.set(q.left));
    decide_within(q)
}

/// [`decide_pair`] within the search budget left (the pieces of a split question share
/// one).
///
/// The solutions the solves find are read before more is asked (docs/symbolic.md,
/// "Solutions name threads"): a solution of the question's problem whose two identity
/// variables differ proves the conflict bit of its distance, and one whose two threads lie
/// in two warps proves `intra_warp` false; only the bits and the warp question no solution
/// settled are solved for. Each solution is checked against the problem first.
pub(super) fn decide_within(q: &PairQuestion) -> Option<PairConflict> {
    let dist = &q.dist;
    recording(true);
    let intersect = mask(std::slice::from_ref(&q.p), dist, u64::MAX);
    let mut found = recording(false);
    let intersect = intersect?;
    let conflict = match q.rel {
        _ if intersect == 0 => 0,
        Distinct::Fixed { conflict, .. } => intersect * conflict as u64,
        Distinct::Threads(x, y) | Distinct::Positions(x, y) if PERIODIC_READ.with(|c| c.get()) => {
            if let Distance::Periodic { r, step, period } = *dist {
                periodic_conflict(q, &mut found, (x, y), intersect, (r, step, period))?
            } else {
                plain_conflict(q, &mut found, (x, y), intersect)?
            }
        }
        Distinct::Threads(x, y) | Distinct::Positions(x, y) => plain_conflict(q, &mut found, (x, y), intersect)?,
    };
    let mut intra_warp = matches!(q.rel, Distinct::Fixed { intra: true, .. }) && conflict != 0;
    if let (Distinct::Threads(ta, tb), true) = (q.rel, conflict != 0) {
        intra_warp = !(shows_two_warps(q, &found, (ta, tb))
            || shifted_to_two_warps(q, &found, (ta, tb))
            || any_sat(&cross_warp(q, ta, tb)?)?);
    }
    Some(PairConflict {
        conflict,
        intersect,
        intra_warp,
        witness: None,
        query: None,
    })
}

/// The conflict mask of [`decide_within`] for an exact or fixed distance: the bits the
/// recorded solutions prove, and the thread split solved for the rest.
fn plain_conflict(q: &PairQuestion, found: &mut Vec<Vec<i64>>, (x, y): (usize, usize), intersect: u64) -> Option<u64> {
    // (Every distance meets: the mask of the rest would be solved bit by bit instead of by
    // splitting the range, which costs more than it saves.)
    let proven = match intersect {
        u64::MAX => 0,
        _ => intersect & differing_bits(q, found, (x, y)),
    };
    let rest = intersect & !proven;
    recording(true);
    let m = if rest == 0 {
        Some(0)
    } else {
        mask(&distinct(&q.p, x, y, None), &q.dist, rest)
    };
    found.extend(recording(false));
    Some(proven | m?)
}

thread_local! {
    static PERIODIC_READ: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Turns the reading of solutions at periodic distances (`periodic_conflict`, the
/// periodic case of `shows_two_warps`) on (the default) or off on this thread: tests
/// compare every answer with it and without it.
pub fn periodic_solutions(on: bool) {
    PERIODIC_READ.with(|c| c.set(on));
}

/// The conflict mask of [`decide_within`] at a periodic distance (variable `r`, the residue
/// `(k_b − k_a) mod period`; bit `d < 63` iff `d·step mod period` is a residue where the two
/// sides meet from two threads, bit 63 iff any bit is set), decided per residue
/// (docs/symbolic.md, "Solutions name threads"): only the residues some distance below 63
/// reaches *and* where the sides meet (`intersect`) can be conflict residues; a recorded
/// solution of the problem naming two different identities proves its residue, and the
/// residues left are solved one by one on the thread split. The set of conflict residues
/// among those candidates is the thread split's feasible set restricted to them, so the
/// mask equals the one [`mask`] computes over every residue.
fn periodic_conflict(
    q: &PairQuestion,
    found: &mut Vec<Vec<i64>>,
    (x, y): (usize, usize),
    intersect: u64,
    (r, step, period): (usize, i64, i64),
) -> Option<u64> {
    let residue = |d: i64| (d * step).rem_euclid(period);
    let mut candidates: Vec<i64> = (0..63i64).filter(|&d| intersect & (1 << d) != 0).map(residue).collect();
    candidates.sort_unstable();
    candidates.dedup();
    let mut hits: Vec<i64> = Vec::new();
    let mut rest: Vec<i64> = Vec::new();
    for &c in &candidates {
        let proven = found.iter().any(|s| {
            s.get(r) == Some(&c) && s.get(x) != s.get(y) && q.p.satisfied_by(s)
        });
        if proven { hits.push(c) } else { rest.push(c) }
    }
    if !rest.is_empty() {
        let split = distinct(&q.p, x, y, None);
        let pre: Vec<Presolved> = split.iter().map(|p| p.presolved(r)).collect();
        recording(true);
        let mut out = Some(());
        for &c in &rest {
            match any_sat_within(&pre, c, c) {
                Some(true) => hits.push(c),
                Some(false) => {}
                None => {
                    out = None;
                    break;
                }
            }
        }
        found.extend(recording(false));
        out?;
    }
    let mut m = 0u64;
    for d in 0..63i64 {
        if hits.contains(&residue(d)) {
            m |= 1 << d;
        }
    }
    if m != 0 {
        m |= 1 << 63;
    }
    Some(m)
}

/// The distance bits of the solutions in `found` of the question's problem whose
/// variables `x` and `y` differ (each such solution is a conflict at its distance). Only
/// for a fixed or an exact distance (a periodic one's residue names no single bit).
fn differing_bits(q: &PairQuestion, found: &[Vec<i64>], (x, y): (usize, usize)) -> u64 {
    let mut m = 0u64;
    for s in found {
        if s.get(x) == s.get(y) || !q.p.satisfied_by(s) {
            continue;
        }
        m |= match q.dist {
            Distance::Fixed(m) => m,
            Distance::Exact(d) if s[d] >= 0 => 1u64 << s[d].min(63),
            _ => 0,
        };
    }
    m
}

/// Whether some solution in `found` of the question's problem names two threads `ta`,
/// `tb` in two warps: the cross-warp problem ([`cross_warp`]) is then satisfiable. At a
/// periodic distance only a solution whose residue that problem keeps counts (it relates
/// only the residues distances below 63 reach), and only with the reading on
/// ([`periodic_solutions`]).
fn shows_two_warps(q: &PairQuestion, found: &[Vec<i64>], (ta, tb): (usize, usize)) -> bool {
    let w = q.warp.max(1);
    // At a periodic distance the cross-warp problem also holds `r = g·m`, `0 ≤ m ≤ period/g`
    // (`g = gcd(step, period)`, built only while `period/g ≤ 63`): a solution whose residue
    // is a multiple of `g` is one of it (`m = r/g`, the warps and lanes of its threads).
    let related = |s: &Vec<i64>| match q.dist {
        Distance::Periodic { r, step, period } => {
            let g = gcd(step, period).max(1);
            PERIODIC_READ.with(|c| c.get()) && period / g <= 63 && s.get(r).is_some_and(|v| v.rem_euclid(g) == 0)
        }
        _ => true,
    };
    found.iter().any(|s| {
        s.get(ta).map(|t| t.div_euclid(w)) != s.get(tb).map(|t| t.div_euclid(w)) && related(s) && q.p.satisfied_by(s)
    })
}

thread_local! {
    /// Whether [`shifted_to_two_warps`] is tried (off: `SMEMSYNC_PAIRS_NO_SHIFTS=1`, or
    /// [`warp_shifts`]); and the cross-warp questions it was tried on and answered.
    static SHIFTS: std::cell::Cell<(bool, u64, u64)> =
        std::cell::Cell::new((std::env::var_os("SMEMSYNC_PAIRS_NO_SHIFTS").is_none(), 0, 0));
}

/// Turns the warp shifts of recorded solutions (`shifted_to_two_warps`, docs/symbolic.md
/// "Solutions moved by whole warps") on (the default) or off on this thread, and resets
/// their counts: tests compare every answer with them and without them.
pub fn warp_shifts(on: bool) {
    SHIFTS.with(|c| c.set((on, 0, 0)));
}

/// The cross-warp questions of this thread the warp shifts were tried on, and those they
/// answered, since the last [`warp_shifts`].
pub fn warp_shift_counts() -> (u64, u64) {
    SHIFTS.with(|c| (c.get().1, c.get().2))
}

/// Whether a recorded solution of the question's problem, one thread moved by whole warps
/// (`symbolic::shift`), is a solution that [`shows_two_warps`] accepts: the cross-warp
/// problem is then satisfiable without its solves. Any point proposed is checked as a
/// recorded solution is, so a `true` is exact; `false` says nothing.
fn shifted_to_two_warps(q: &PairQuestion, found: &[Vec<i64>], (ta, tb): (usize, usize)) -> bool {
    let (on, tried, hit) = SHIFTS.with(|c| c.get());
    if !on || found.is_empty() {
        return false;
    }
    let w = q.warp.max(1);
    let accept = |x: &Vec<i64>| shows_two_warps(q, std::slice::from_ref(x), (ta, tb));
    let ok = super::shift::warp_shifts(&q.p, found, (ta, tb), w, accept).is_some();
    SHIFTS.with(|c| c.set((on, tried + 1, hit + ok as u64)));
    ok
}

/// The question's problem split by `warp(t_a) ≠ warp(t_b)`, for the thread variables `ta`,
/// `tb` (`None`: a periodic distance whose residues are not all reached below 63).
pub(super) fn cross_warp(q: &PairQuestion, ta: usize, tb: usize) -> Option<Vec<Problem>> {
    let mut q2 = q.p.clone();
    let (w, threads) = (q.warp, q.threads);
    let warp_of = |t: usize, q: &mut Problem| {
        let wv = q.var(0, (threads - 1) / w);
        let r = q.var(0, w - 1);
        q.add(&[(t, 1), (wv, -w), (r, -1)], 0, 0);
        wv
    };
    let (wa, wb) = (warp_of(ta, &mut q2), warp_of(tb, &mut q2));
    // Only pairs of instances the mask relates: every distance of an exact domain is one
    // (bit 63 stands for the larger ones); a periodic one relates the residues some
    // distance below 63 reaches.
    if let Distance::Periodic { r, step, period } = q.dist {
        // The residues distances 0..63 reach are the multiples of g = gcd(step, period)
        // when there are at most 63 of them.
        let g = gcd(step, period).max(1);
        if period / g > 63 {
            return None;
        }
        let m = q2.var(0, period / g);
        q2.add(&[(r, 1), (m, -g)], 0, 0);
    }
    Some(distinct(&q2, ta, tb, Some((wa, wb))))
}

/// The distance relation of the variable level.
fn distance(
    p: &mut Problem,
    dom: Option<LoopDomain>,
    ka: Option<Affine>,
    kb: Option<Affine>,
) -> Option<Distance> {
    let upto = |trip: Option<i64>| match trip {
        Some(t) if t < 63 => (1u64 << t.max(0)) - 1,
        _ => u64::MAX,
    };
    Some(match (dom, ka, kb) {
        // The keys may come from two different loops (the enumerator compares key values
        // level by level): the distance's range follows from both keys' ranges.
        // Two fixed iteration indices (a split piece): the one distance they are at.
        (Some(LoopDomain::Exact { step, .. }), Some(a), Some(b))
            if a.as_const().is_some() && b.as_const().is_some() =>
        {
            Distance::Fixed(exact_bit(a.c, b.c, step))
        }
        (Some(LoopDomain::Exact { step, .. }), Some(a), Some(b)) => {
            let (alo, _) = a.range(p);
            let (_, bhi) = b.range(p);
            let d = p.var(0, ((bhi - alo) / step.max(1)).max(0));
            let mut e = b.plus(&a.scale(-1)?)?;
            e = e.plus(&Affine::var(d).scale(-step)?)?;
            e.constrain(p, 0, 0);
            Distance::Exact(d)
        }
        (Some(LoopDomain::Exact { trip, .. }), _, _) => Distance::Fixed(upto(Some(trip))),
        (Some(LoopDomain::Periodic { step, period }), Some(a), Some(b)) => {
            let ((alo, ahi), (blo, bhi)) = (a.range(p), b.range(p));
            let r = p.var(0, period - 1);
            let z = p.var(
                (blo - ahi - period + 1).div_euclid(period),
                (bhi - alo).div_euclid(period) + 1,
            );
            let e = b
                .plus(&a.scale(-1)?)?
                .plus(&Affine::var(r).scale(-1)?)?
                .plus(&Affine::var(z).scale(-period)?)?;
            e.constrain(p, 0, 0);
            Distance::Periodic { r, step, period }
        }
        (Some(LoopDomain::Unknown { trip }), _, _) => Distance::Fixed(upto(trip)),
        _ => Distance::Fixed(u64::MAX),
    })
}

/// The distance bits for which one of `ps` is satisfiable, among those of `within`. The
/// problems are presolved once for their distance variable: the solves of one mask differ
/// only in its box (`solve::Presolved`, docs/symbolic.md, "One presolve per question").
fn mask(ps: &[Problem], dist: &Distance, within: u64) -> Option<u64> {
    match *dist {
        Distance::Fixed(m) => Some(if any_sat(ps)? { m } else { 0 }),
        Distance::Exact(d) if within != u64::MAX => {
            let pre: Vec<Presolved> = ps.iter().map(|q| q.presolved(d)).collect();
            // Only the candidate distances: one solve each.
            let mut m = 0u64;
            for x in (0..63).filter(|x| within & (1 << x) != 0) {
                if any_sat_within(&pre, x, x)? {
                    m |= 1 << x;
                }
            }
            m |= within & (if any_sat_within(&pre, 63, i64::MAX)? { 1 << 63 } else { 0 });
            Some(m)
        }
        Distance::Exact(d) => {
            let pre: Vec<Presolved> = ps.iter().map(|q| q.presolved(d)).collect();
            let mut vals = Vec::new();
            feasible_values(&pre, 0, 62, &mut vals)?;
            let mut m = vals.iter().fold(0u64, |m, &x| m | 1 << x);
            let hi = ps.iter().map(|q| q.hi[d]).max().unwrap_or(0);
            if hi >= 63 && ps.iter().all(|q| q.hi[d] >= 63) {
                if any_sat_within(&pre, 63, i64::MAX)? {
                    m |= 1 << 63;
                }
            } else if hi >= 63 {
                // (Not built by `question`: its problems share the distance's box.)
                let mut qs: Vec<Problem> = ps.to_vec();
                for q in &mut qs {
                    q.lo[d] = q.lo[d].max(63);
                }
                if any_sat(&qs)? {
                    m |= 1 << 63;
                }
            }
            Some(m)
        }
        Distance::Periodic { r, step, period } => {
            let _ = within;
            let pre: Vec<Presolved> = ps.iter().map(|q| q.presolved(r)).collect();
            let mut vals = Vec::new();
            feasible_values(&pre, 0, period - 1, &mut vals)?;
            let mut m = 0u64;
            for d in 0..63i64 {
                if vals.contains(&(d * step).rem_euclid(period)) {
                    m |= 1 << d;
                }
            }
            if m != 0 {
                m |= 1 << 63;
            }
            Some(m)
        }
    }
}

/// Whether one instance of access `ai` touches a unit from two different threads (the
/// enumerator's `self_overlap` over its instances); `None` to enumerate.
pub fn self_race(fp: &Footprints, ai: usize) -> Option<bool> {
    let left = set_budget(fp, ai, ai);
    if let Some(levels) = super::split::self_levels(fp, ai) {
        return super::split::self_race(fp, ai, &levels);
    }
    self_race_at(fp, ai, &[], if left > MIN_BUDGET { Mode::Tables } else { Mode::Plain })
}

/// [`self_race`] with the iteration indices fixed at `pins`' levels (a piece of a split
/// question), within the search budget left.
pub(super) fn self_race_at(fp: &Footprints, ai: usize, pins: &[Option<i64>], mode: Mode) -> Option<bool> {
    let threads = fp.k.threads().max(1) as i64;
    let mut p = Problem::default();
    let (ta, tb) = (p.var(0, threads - 1), p.var(0, threads - 1));
    let Some(ks) = keys(fp, &mut Builder::new(fp, &mut p, ta), ai, pins) else {
        return Some(false);
    };
    let mut split = Some(Vec::new());
    let sa = side(fp, &mut p, (ai, ta), Some(&ks), (mode, pins), &mut split).ok()??;
    let mut sb = side(fp, &mut p, (ai, tb), Some(&ks), (mode, pins), &mut split).ok()??;
    if sa.whole {
        return None;
    }
    let mut sa = sa;
    relative_units(&mut [&mut sa, &mut sb]);
    let (lo, hi) = sa.unit.range(&p);
    let u = p.var(lo, hi + sa.units);
    covers(&mut p, u, &sa);
    covers(&mut p, u, &sb);
    let rel = bits::relate(&mut p, (&sa.who, &sa.unit, sa.units), (&sb.who, &sb.unit, sb.units), fp.warp)?;
    let q = SelfQuestion {
        p,
        rel,
        left: LEFT.with(|l| l.get()),
    };
    if let Some(r) = SELVES.with(|m| m.borrow().get(&q).copied()) {
        return r;
    }
    let r = match q.rel {
        Distinct::Threads(x, y) | Distinct::Positions(x, y) => any_sat(&distinct(&q.p, x, y, None)),
        Distinct::Fixed { conflict, .. } => Some(conflict && any_sat(std::slice::from_ref(&q.p))?),
    };
    SELVES.with(|m| remember(&mut m.borrow_mut(), q, r));
    r
}
