//! Which `mbar_wait` completes each TMA load of a single-role TMA pipeline, and why every
//! mbarrier op of such a kernel finishes (docs/checker.md, "TMA loads in the static proof").
//!
//! Recognized form (anything else declines the proof with the reason; the interpreter then
//! checks): one *pipeline loop* `L = for i = 0 to T step 1` at the kernel's top level with
//! uniform bounds; in its body, outside any `if`, at most one `mbar_wait A[i mod D], (i / D)
//! mod 2` per mbarrier array `A` of `D` slots (slot and parity are exact functions of `i`,
//! `ir::iterfn`, whatever their spelling), executed by every thread: the wait of *use* `i`.
//! Every `mbar_arrive`, `mbar_expect_tx` and `tma_load` on `A` is issued by one elected
//! thread (`cmp eq tid, C`), either in `L`'s body on slot `(i + δ) mod D`, `0 <= δ < D`, under
//! the trip guard `i + δ < T` (none when `δ = 0`): *use* `i + δ`; or before `L` at the top level
//! on a constant slot `σ < δ` under the guard `σ < T` (none when `T` is a constant above `σ`):
//! use `σ`. Each use then has its *group* of ops, and:
//! 1. the groups of `A` are one in-loop group and the prologue groups `σ = 0..δ`, so every use
//!    `u < T` has exactly one group, issued iff `u < T`;
//! 2. balance: a group arrives exactly `A`'s init count times, all from one elected thread,
//!    its expected bytes (arrive `tx` and `expect_tx`) equal its TMA loads' bytes, and every
//!    `expect_tx` precedes the group's last arrival in that thread's program order, so the
//!    phase cannot complete before all of its bytes land;
//! 3. every array is initialised at the top level before the first other use, one count for
//!    all slots, a `barrier` in between (`handshake_proof::inits`); `mbar_inval` only after `L`.
//!
//! Then by induction on the use `u` of slot `s = u mod D`: the group of `u` is issued after
//! the wait of use `u - D` (an earlier iteration, since `δ < D`) in the issuer's program
//! order, so its arrival and bytes count in phase `u / D` of `s` and nothing of another use
//! does; every thread waits on every use in order, so none is two phases behind when it
//! waits with parity `(u / D) mod 2`: the wait of use `u` returns exactly when phase `u / D`
//! has completed, that is after every TMA load of the group landed. No wait blocks forever:
//! the group of use `u` precedes its wait in the issuer's program order (an earlier iteration,
//! the prologue, or earlier in the body when `δ = 0`) and every thread runs the same sequence
//! of barriers and waits.
//!
//! Complexity: O(ops) plus the iteration functions of the indices (one period each).

use std::collections::{HashMap, HashSet};

use super::handshake_proof::{Parity, inits, is_slot, parity_form, same};
use crate::ir::iterfn::IterFns;
use crate::ir::ranges::Ranges;
use crate::ir::*;

/// What completes one TMA load: the wait of use `i + delta` of `mbar` in the pipeline loop
/// (`in_loop`, the load of iteration `i`), or of use `delta` (a load before the loop).
#[derive(Copy, Clone, Debug)]
pub(super) struct LoadUse {
    pub mbar: Buffer,
    pub in_loop: bool,
    pub delta: i64,
}

/// The recognized pipeline: its loop, the use of every TMA load and the array of every wait.
pub(super) struct Plan {
    pub l: Op,
    pub loads: HashMap<Op, LoadUse>,
    pub waits: HashMap<Op, Buffer>,
}

pub(super) fn is_mbar_op(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::MbarInit { .. }
            | OpKind::MbarArrive { .. }
            | OpKind::MbarExpectTx { .. }
            | OpKind::MbarWait { .. }
            | OpKind::MbarInval { .. }
            | OpKind::TmaLoad { .. }
    )
}

fn name(k: &Kernel, o: Op) -> String {
    super::proof::op_at(k, o)
}

fn def(k: &Kernel, o: Operand) -> Option<&OpKind> {
    match k.values[o.value()?].def {
        ValueDef::Result(d, _) => Some(&k.ops[d].kind),
        _ => None,
    }
}

/// The conjuncts of an `and` chain.
pub(super) fn conjuncts(k: &Kernel, c: Operand, out: &mut Vec<Operand>) {
    match def(k, c) {
        Some(OpKind::Binary(BinOp::And, x, y)) => {
            conjuncts(k, *x, out);
            conjuncts(k, *y, out);
        }
        _ => out.push(c),
    }
}

/// `C` when `c` is `cmp eq tid, C` (the linear thread id, or `tid.x` in a 1-D block).
pub(super) fn elected(k: &Kernel, c: Operand) -> Option<i64> {
    let Some(OpKind::Cmp(CmpPred::Eq, x, y)) = def(k, c) else {
        return None;
    };
    let id = k.const_int(*y)?;
    match def(k, *x)? {
        OpKind::Special(Special::LinearTid) => Some(id),
        OpKind::Special(Special::Tid(0)) if k.block[1] == 1 && k.block[2] == 1 => Some(id),
        _ => None,
    }
}

/// `a` when `o` is `iv + a` (`iv` itself, `add iv, a`), `None` otherwise; `iv = None` reads a
/// constant.
fn plus_iv(k: &Kernel, o: Operand, iv: Option<Value>) -> Option<i64> {
    if let Some(iv) = iv {
        if o == Operand::Value(iv) {
            return Some(0);
        }
        let Some(OpKind::Binary(BinOp::Add, x, y)) = def(k, o) else {
            return None;
        };
        return match (*x, *y) {
            (v, c) | (c, v) if v == Operand::Value(iv) => k.const_int(c),
            _ => None,
        };
    }
    k.const_int(o)
}

/// `b` when `o` is `T - b` (`T` itself, `sub T, b`).
fn minus_trip(k: &Kernel, o: Operand, trip: Operand) -> Option<i64> {
    if same(k, o, trip, 0) {
        return Some(0);
    }
    match def(k, o)? {
        OpKind::Binary(BinOp::Sub, x, y) if same(k, *x, trip, 0) => k.const_int(*y),
        _ => None,
    }
}

/// The use `u` when `c` is the trip guard `u < T` (`cmp lt iv + a, T - b` or `cmp gt T - b,
/// iv + a`, `u = iv + a + b`; a constant for `iv = None`).
fn trip_guard(k: &Kernel, c: Operand, iv: Option<Value>, trip: Operand) -> Option<i64> {
    let (x, y) = match def(k, c)? {
        OpKind::Cmp(CmpPred::Lt, x, y) => (*x, *y),
        OpKind::Cmp(CmpPred::Gt, y, x) => (*x, *y),
        _ => return None,
    };
    Some(plus_iv(k, x, iv)? + minus_trip(k, y, trip)?)
}

/// One handshake op's reading: its array, use (`delta`), elected thread and position.
struct Issued {
    op: Op,
    at: usize,
    mbar: Buffer,
    in_loop: bool,
    delta: i64,
}

/// Recognizes the pipeline (module doc). `Ok(None)`: the kernel has no mbarrier op.
pub(super) fn plan(k: &Kernel, td: &HashSet<Value>) -> Result<Option<Plan>, String> {
    let order = k.ops_in_order();
    let hs: Vec<(usize, Op)> = order
        .iter()
        .enumerate()
        .filter(|(_, o)| is_mbar_op(&k.ops[**o].kind))
        .map(|(i, o)| (i, *o))
        .collect();
    if hs.is_empty() {
        return Ok(None);
    }
    let parents = k.parents();
    let waits: Vec<Op> = hs
        .iter()
        .map(|x| x.1)
        .filter(|o| matches!(k.ops[*o].kind, OpKind::MbarWait { .. }))
        .collect();
    let Some(&w0) = waits.first() else {
        return Err("no `mbar_wait` in a pipeline loop".into());
    };
    let l = parents
        .parent_op(w0)
        .filter(|l| matches!(k.ops[*l].kind, OpKind::For { .. }))
        .ok_or_else(|| format!("{} is not directly in a loop", name(k, w0)))?;
    let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else {
        return Err("no loop".into());
    };
    let trip = *hi;
    if k.const_int(*lo) != Some(0) || k.const_int(*step) != Some(1) {
        return Err("the pipeline loop is not `0 to T step 1`".into());
    }
    if parents.parent_op(l).is_some() || trip.value().is_some_and(|v| td.contains(&v)) {
        return Err("the pipeline loop is nested or its trip count is thread-dependent".into());
    }
    let iv = k.region_args(k.ops[l].regions[0])[0];
    let ranges = Ranges::new(k);
    let max_iter = i64::try_from(ranges.range(iv).hi).unwrap_or(i64::MAX);
    let mut fns = IterFns::new(k, &ranges.inductions, l, max_iter)
        .ok_or("the pipeline loop has no constant lower bound and step")?;
    let top = k.region_ops(k.body());
    let l_top = top.iter().position(|o| *o == l).unwrap_or(0);
    let top_of = |o: Op| {
        let mut cur = o;
        while let Some(p) = parents.parent_op(cur) {
            cur = p;
        }
        top.iter().position(|x| *x == cur).unwrap_or(0)
    };
    let mut plan = Plan {
        l,
        loads: HashMap::new(),
        waits: HashMap::new(),
    };
    for &w in &waits {
        let OpKind::MbarWait { mbar, index, parity } = &k.ops[w].kind else {
            continue;
        };
        let b = k.root_buffer(*mbar);
        if parents.parent_op(w) != Some(l) {
            return Err(format!(
                "{} is not directly in the pipeline loop's body",
                name(k, w)
            ));
        }
        if index.len() != 1 || !is_slot(k, &mut fns, index[0], b) {
            return Err(format!("the slot of {} is not `i mod D`", name(k, w)));
        }
        if parity_form(k, &mut fns, *parity, b) != Some(Parity::This) {
            return Err(format!(
                "the parity of {} is not `(i / D) mod 2`",
                name(k, w)
            ));
        }
        if plan.waits.insert(w, b).is_some() || plan.waits.values().filter(|x| **x == b).count() > 1 {
            return Err(format!("@{} is waited on twice per iteration", k.buffers[b].name));
        }
    }
    let first_use = hs
        .iter()
        .find(|(_, o)| !matches!(k.ops[*o].kind, OpKind::MbarInit { .. }))
        .map(|x| top_of(x.1))
        .unwrap_or(0);
    let counts = inits(k, first_use)?;
    let mut issued: Vec<Issued> = Vec::new();
    let mut issuer: HashMap<Buffer, i64> = HashMap::new();
    for &(at, o) in &hs {
        let (mbar, index) = match &k.ops[o].kind {
            OpKind::MbarWait { .. } => continue,
            OpKind::MbarInit { .. } if top_of(o) < first_use => continue,
            OpKind::MbarInval { .. } if top_of(o) > l_top => continue,
            OpKind::MbarArrive { mbar, index, .. } | OpKind::MbarExpectTx { mbar, index, .. } => {
                (*mbar, index)
            }
            OpKind::TmaLoad {
                mbar, mbar_index, ..
            } => (*mbar, mbar_index),
            _ => {
                return Err(format!(
                    "{} is an mbarrier init or inval outside the prologue and epilogue",
                    name(k, o)
                ));
            }
        };
        let b = k.root_buffer(mbar);
        let d = k.buffers[b].shape.first().copied().unwrap_or(0) as i64;
        if !plan.waits.values().any(|x| *x == b) || index.len() != 1 || d <= 0 {
            return Err(format!(
                "{} signals @{}, which no pipeline wait reads",
                name(k, o),
                k.buffers[b].name
            ));
        }
        let in_loop = parents.ancestors(o).contains(&l);
        let (conds, ok) = guards(k, parents, o, if in_loop { Some(l) } else { None });
        if !ok || (!in_loop && top_of(o) > l_top) {
            return Err(format!(
                "{} is under a loop or condition the pipeline form does not read",
                name(k, o)
            ));
        }
        let mut elect = None;
        let mut guard = None;
        for c in conds {
            if let Some(t) = elected(k, c) {
                // Two elections of different threads (nested `if`s, an `and`): no thread
                // passes both.
                if elect.is_some_and(|e| e != t) {
                    return Err(format!("{} is under elections of two different threads ({} and {t}): no thread issues it", name(k, o), elect.unwrap_or(t)));
                }
                elect = Some(t);
            } else if let Some(u) = trip_guard(k, c, in_loop.then_some(iv), trip) {
                if guard.is_some_and(|g| g != u) {
                    return Err(format!("{} has two trip guards", name(k, o)));
                }
                guard = Some(u);
            } else {
                return Err(format!(
                    "{} is under a condition that is neither one elected thread nor a trip guard",
                    name(k, o)
                ));
            }
        }
        let Some(elect) = elect else {
            return Err(format!("{} is not issued by one elected thread", name(k, o)));
        };
        // An election no thread of the block passes issues nothing (session 37's M10):
        // its arrivals and bytes must not be counted.
        if !(0..i64::from(k.threads())).contains(&elect) {
            return Err(format!("no thread of the block passes the election (thread {elect}) around {}", name(k, o)));
        }
        if *issuer.entry(b).or_insert(elect) != elect {
            return Err(format!("@{} is signalled from two threads", k.buffers[b].name));
        }
        let delta = if in_loop {
            let f = fns
                .of(index[0])
                .filter(|f| f.periodic())
                .ok_or_else(|| format!("the slot of {} is not periodic", name(k, o)))?;
            let p = f.seq.len() as i64 * d;
            let delta = (0..d)
                .find(|dl| (0..p).all(|i| f.at(i) == (i + dl) % d))
                .ok_or_else(|| format!("the slot of {} is not `(i + δ) mod D`", name(k, o)))?;
            if guard.unwrap_or(0) != delta {
                return Err(format!(
                    "{} fills use i + {delta} but is not guarded by `i + {delta} < T`",
                    name(k, o)
                ));
            }
            delta
        } else {
            let s = k.const_int(index[0])
                .filter(|s| (0..d).contains(s))
                .ok_or_else(|| format!("the slot of {} is not a constant", name(k, o)))?;
            let always = k.const_int(trip).is_some_and(|t| t > s);
            if guard != Some(s) && !(guard.is_none() && always) {
                return Err(format!(
                    "{} fills use {s} but is not guarded by `{s} < T`",
                    name(k, o)
                ));
            }
            s
        };
        issued.push(Issued {
            op: o,
            at,
            mbar: b,
            in_loop,
            delta,
        });
    }
    groups(k, &plan, &issued, &counts)?;
    for x in &issued {
        if matches!(k.ops[x.op].kind, OpKind::TmaLoad { .. }) {
            plan.loads.insert(
                x.op,
                LoadUse {
                    mbar: x.mbar,
                    in_loop: x.in_loop,
                    delta: x.delta,
                },
            );
        }
    }
    Ok(Some(plan))
}

/// The conditions of the `if`s between `o` and `stop`'s body (the kernel body when `None`);
/// `false` when a loop other than `stop` lies between.
fn guards(k: &Kernel, parents: &Parents, o: Op, stop: Option<Op>) -> (Vec<Operand>, bool) {
    let mut out = Vec::new();
    let mut cur = o;
    while let Some(p) = parents.parent_op(cur) {
        if Some(p) == stop {
            return (out, true);
        }
        match &k.ops[p].kind {
            OpKind::If { cond } if parents.op_region[cur] == k.ops[p].regions.first().copied() => {
                conjuncts(k, *cond, &mut out)
            }
            _ => return (out, false),
        }
        cur = p;
    }
    (out, stop.is_none())
}

/// Points 1 and 2 of the module doc: per array, one in-loop group and the prologue groups
/// below its `δ`, each balanced.
fn groups(
    k: &Kernel,
    plan: &Plan,
    issued: &[Issued],
    counts: &HashMap<Buffer, u32>,
) -> Result<(), String> {
    for (&w, &b) in &plan.waits {
        let bname = &k.buffers[b].name;
        let d = k.buffers[b].shape.first().copied().unwrap_or(0) as i64;
        let of_b: Vec<&Issued> = issued.iter().filter(|x| x.mbar == b).collect();
        let deltas: HashSet<i64> = of_b.iter().filter(|x| x.in_loop).map(|x| x.delta).collect();
        let delta = match deltas.iter().collect::<Vec<_>>().as_slice() {
            [d] => **d,
            _ => return Err(format!("@{bname} is not refilled by one group per iteration")),
        };
        let prologue: HashSet<i64> = of_b.iter().filter(|x| !x.in_loop).map(|x| x.delta).collect();
        if prologue != (0..delta).collect::<HashSet<_>>() || delta >= d {
            return Err(format!(
                "the uses of @{bname} before the loop are not exactly 0..{delta} (of {d} slots)"
            ));
        }
        let count = *counts
            .get(&b)
            .ok_or_else(|| format!("@{bname} is not initialised"))?;
        let wait_at = k.ops_in_order().iter().position(|o| *o == w).unwrap_or(0);
        for (in_loop, u) in std::iter::once((true, delta)).chain((0..delta).map(|s| (false, s))) {
            let g: Vec<&&Issued> = of_b
                .iter()
                .filter(|x| x.in_loop == in_loop && x.delta == u)
                .collect();
            balanced(k, b, count, &g)?;
            if in_loop && delta == 0 && g.iter().any(|x| x.at > wait_at) {
                return Err(format!(
                    "a use of @{bname} is signalled after its wait in the same iteration"
                ));
            }
        }
    }
    Ok(())
}

/// One group: `count` arrivals, its expected bytes equal to its TMA bytes, every
/// `expect_tx` before the last arrival.
fn balanced(k: &Kernel, b: Buffer, count: u32, g: &[&&Issued]) -> Result<(), String> {
    let (mut arrivals, mut tx, mut bytes, mut last_arrive, mut last_expect) = (0u64, 0u64, 0u64, 0, 0);
    for x in g {
        match &k.ops[x.op].kind {
            OpKind::MbarArrive { tx: t, .. } => {
                arrivals += 1;
                tx += t.unwrap_or(0) as u64;
                last_arrive = last_arrive.max(x.at);
                if t.is_some() {
                    last_expect = last_expect.max(x.at);
                }
            }
            OpKind::MbarExpectTx { bytes: t, .. } => {
                tx += *t as u64;
                last_expect = last_expect.max(x.at);
            }
            OpKind::TmaLoad { dst, .. } => {
                bytes += k.shape(*dst).iter().product::<u64>() * k.elem(*dst).bytes();
            }
            _ => {}
        }
    }
    if arrivals != count as u64 || tx != bytes || last_expect > last_arrive {
        return Err(format!(
            "a use of @{} arrives {arrivals} times (count {count}) and expects {tx} bytes for {bytes} bytes of TMA loads, or expects them after its last arrival: its phase may complete before its loads land",
            k.buffers[b].name
        ));
    }
    Ok(())
}
