//! Uniformity: which values every thread of the block holds identically, which ones every
//! thread of each warp holds identically, and which regions run under divergent control.
//! Follows docs/ir.md, "Uniformity".
//!
//! Lattice per value ([`Level`]): `Uniform` ⊑ `WarpUniform` ⊑ `ThreadDependent` (join = max);
//! per region the same levels read as: converged, run by whole warps only (block-divergent but
//! warp-converged), divergent within a warp. Transfer: constants, block ids/dims, scalar
//! parameters are uniform; `warp` is warp-uniform; `tid.*`, `lane`, `in_group`, atomics,
//! `local_load`, `wgmma` and async tokens are thread-dependent; arithmetic, `compute`, loads
//! take the join of their operands (and a load's view indices), except that a `gload` of a
//! global the kernel writes ([`written_globals`]) is thread-dependent: the write is not
//! ordered with the load, so threads may read the element before or after it (a barrier
//! placed under `if gload(..) == 1` would deadlock); a loop's induction variable
//! the join of its bounds; iteration values the join of init and yielded values (a fixpoint
//! over the body); a value defined in a region is at least the region's level. A region's
//! level is the join of its enclosing `if` conditions, `for` bounds and `while` conditions.
//! With a warp width and a per-thread evaluator ([`analyze_warp`]), a thread-dependent `if`
//! condition or loop bound computed from thread ids and constants only (`tid.x < 32`,
//! `tid.x / 32 == 0` on `block(64)`) is evaluated for every thread of the block and counts as
//! warp-uniform when it is constant within each warp.
//! Complexity: O(ops · loop depth) — each loop is re-walked until its iteration values stop
//! changing, and a value only moves up the lattice twice; plus, per evaluated condition, its
//! expression's size times the block's threads.

use std::collections::HashSet;

use crate::ir::effects::written_globals;
use crate::ir::*;

/// How much a value (or a region's control) may differ between threads.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The same in every thread of the block (a region every thread runs).
    #[default]
    Uniform,
    /// The same in every thread of each warp (a region run by whole warps only).
    WarpUniform,
    /// May differ between threads of one warp.
    ThreadDependent,
}

/// Evaluates an integer value computed from thread ids and constants for one linear thread
/// id (`None`: not such a value).
pub type ThreadEval<'a> = &'a dyn Fn(Value, u32) -> Option<i64>;

/// The result of the analysis.
#[derive(Clone, Debug)]
pub struct Uniformity {
    level: SecondaryMap<Value, Level>,
    divergent: SecondaryMap<Region, Level>,
    /// Each value's level among the threads that run one instance of its definition
    /// ([`Uniformity::executor_uniform`]); empty while it is being computed.
    among: SecondaryMap<Value, Level>,
    /// Computing `among`: an `if`'s arms inherit the enclosing level, not the condition's.
    arms_free: bool,
    /// The globals some op of the kernel writes ([`written_globals`]).
    written: HashSet<Global>,
}

impl Uniformity {
    /// Whether every thread of the block holds the same value.
    pub fn is_uniform(&self, v: Value) -> bool {
        *self.level.get(v) == Level::Uniform
    }
    pub fn operand_uniform(&self, o: &Operand) -> bool {
        o.value().is_none_or(|v| self.is_uniform(v))
    }
    /// Whether every two threads that run the same instance of the op computing `o` (same
    /// iterations of its enclosing loops, both inside every enclosing `if` arm) hold the same
    /// value: `o` is uniform, or thread-dependent only because an enclosing `if` condition
    /// is (`%i` of a `for 0..8` under `if %lead`). Computed as the block analysis with each
    /// `if`'s arms at the enclosing level: two threads both in an arm agree on its condition,
    /// so within the arm the condition contributes nothing; loop bounds, `while` conditions
    /// and `if` results keep their rules (threads of one instance may still differ there).
    pub fn executor_uniform(&self, o: &Operand) -> bool {
        o.value().is_none_or(|v| *self.among.get(v) == Level::Uniform)
    }
    /// The level of an operand (immediates are uniform).
    pub fn operand_level(&self, o: &Operand) -> Level {
        o.value().map_or(Level::Uniform, |v| *self.level.get(v))
    }
    /// Whether ops of the region may run in some threads of the block only.
    pub fn is_divergent(&self, r: Region) -> bool {
        *self.divergent.get(r) != Level::Uniform
    }
    /// Whether ops of the region may run in some threads of a warp only (a warp-level sync
    /// there may miss threads of its warp).
    pub fn is_warp_divergent(&self, r: Region) -> bool {
        *self.divergent.get(r) == Level::ThreadDependent
    }
}

/// What the warp-uniform refinement needs: the warp width, the block's thread count and a
/// per-thread evaluator.
struct WarpEval<'a> {
    warp: u32,
    threads: u32,
    eval: ThreadEval<'a>,
}

/// Runs the analysis (warp-uniform only through `warp` and values computed from it).
pub fn analyze(k: &Kernel) -> Uniformity {
    run(k, None)
}

/// Runs the analysis, also evaluating thread-dependent conditions and loop bounds for every
/// thread to find those that are constant within each warp of width `warp`.
pub fn analyze_warp(k: &Kernel, warp: u32, eval: ThreadEval<'_>) -> Uniformity {
    let we = WarpEval {
        warp: warp.max(1),
        threads: k.threads(),
        eval,
    };
    run(k, Some(&we))
}

fn run(k: &Kernel, we: Option<&WarpEval<'_>>) -> Uniformity {
    let written = written_globals(k);
    let fresh = |arms_free| Uniformity {
        level: SecondaryMap::with_default(Level::Uniform),
        divergent: SecondaryMap::with_default(Level::Uniform),
        among: SecondaryMap::with_default(Level::Uniform),
        arms_free,
        written: written.clone(),
    };
    let mut among = fresh(true);
    region(k, &mut among, None, k.body(), Level::Uniform);
    let mut u = fresh(false);
    region(k, &mut u, we, k.body(), Level::Uniform);
    u.among = among.level;
    u
}

/// The level of a control operand (an `if` condition, a loop bound): a thread-dependent one
/// that the evaluator finds constant within each warp is warp-uniform.
fn control_level(u: &Uniformity, we: Option<&WarpEval<'_>>, o: &Operand) -> Level {
    let l = u.operand_level(o);
    if l != Level::ThreadDependent {
        return l;
    }
    let (Some(we), Some(v)) = (we, o.value()) else {
        return l;
    };
    let mut prev: Option<i64> = None;
    for t in 0..we.threads {
        let Some(x) = (we.eval)(v, t) else {
            return l;
        };
        if t % we.warp != 0 && prev != Some(x) {
            return l;
        }
        prev = Some(x);
    }
    Level::WarpUniform
}

fn mem_level(k: &Kernel, u: &Uniformity, m: MemRef) -> Level {
    match m {
        MemRef::Buffer(_) => Level::Uniform,
        MemRef::View(v) => {
            let vd = &k.views[v];
            vd.indices
                .iter()
                .map(|ix| match ix {
                    ViewIndex::At(o) => u.operand_level(o),
                    ViewIndex::Range(..) => Level::Uniform,
                })
                .fold(mem_level(k, u, vd.base), Level::max)
        }
    }
}

/// Raises `v` to at least `l`; whether it changed.
fn set(u: &mut Uniformity, v: Value, l: Level) -> bool {
    let old = *u.level.get(v);
    if l > old {
        u.level.set(v, l);
        true
    } else {
        false
    }
}

fn region(k: &Kernel, u: &mut Uniformity, we: Option<&WarpEval<'_>>, r: Region, div: Level) {
    if div > *u.divergent.get(r) {
        u.divergent.set(r, div);
    }
    for &a in k.region_args(r) {
        set(u, a, div);
    }
    for &op in k.region_ops(r) {
        self::op(k, u, we, op, div);
    }
}

fn yields(k: &Kernel, r: Region) -> Vec<Operand> {
    match k.region_ops(r).last().map(|&o| &k.ops[o].kind) {
        Some(OpKind::Yield(v)) => v.clone(),
        _ => Vec::new(),
    }
}

fn op(k: &Kernel, u: &mut Uniformity, we: Option<&WarpEval<'_>>, op: Op, div: Level) {
    let od = &k.ops[op];
    let join = |u: &Uniformity, os: &[&Operand]| {
        os.iter()
            .map(|o| u.operand_level(o))
            .fold(Level::Uniform, Level::max)
    };
    let dep = match &od.kind {
        OpKind::Const(_) => Level::Uniform,
        OpKind::Special(Special::Warp) => Level::WarpUniform,
        OpKind::Special(s) if s.is_thread_dependent() => Level::ThreadDependent,
        OpKind::Special(_) => Level::Uniform,
        OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => join(u, &[a, b]),
        OpKind::Unary(_, a) | OpKind::Cast(_, a) => join(u, &[a]),
        OpKind::Select(c, a, b) => join(u, &[c, a, b]),
        OpKind::InGroup(_) => Level::ThreadDependent,
        OpKind::Compute { args, .. } => args
            .iter()
            .map(|o| u.operand_level(o))
            .fold(Level::Uniform, Level::max),
        OpKind::Load { mem, index } => index
            .iter()
            .map(|o| u.operand_level(o))
            .fold(mem_level(k, u, *mem), Level::max),
        OpKind::GLoad { global, .. } if u.written.contains(global) => Level::ThreadDependent,
        OpKind::GLoad { index, .. } => index
            .iter()
            .map(|o| u.operand_level(o))
            .fold(Level::Uniform, Level::max),
        OpKind::For { .. } => return for_op(k, u, we, op, div),
        OpKind::If { .. } => return if_op(k, u, we, op, div),
        OpKind::While { .. } => return while_op(k, u, we, op, div),
        OpKind::Stage { .. } => {
            for &r in &od.regions {
                region(k, u, we, r, div);
            }
            return;
        }
        // Atomics, collective loads, async tokens, wgmma results and anything else with a
        // result are thread-dependent.
        _ => Level::ThreadDependent,
    };
    for &res in &od.results {
        set(u, res, dep.max(div));
    }
}

fn for_op(k: &Kernel, u: &mut Uniformity, we: Option<&WarpEval<'_>>, op: Op, div: Level) {
    let od = &k.ops[op];
    let OpKind::For { lo, hi, step, init } = &od.kind else {
        return;
    };
    let body = od.regions[0];
    let bounds = [lo, hi, step]
        .iter()
        .map(|o| control_level(u, we, o))
        .fold(div, Level::max);
    let args = k.region_args(body).to_vec();
    set(u, args[0], bounds);
    for (a, i) in args[1..].iter().zip(init) {
        set(u, *a, u.operand_level(i).max(div));
    }
    loop {
        region(k, u, we, body, bounds);
        let ys = yields(k, body);
        let mut changed = false;
        for (a, y) in args[1..].iter().zip(&ys) {
            changed |= set(u, *a, u.operand_level(y));
        }
        if !changed {
            break;
        }
    }
    let ys = yields(k, body);
    for (i, &res) in od.results.iter().enumerate() {
        let l = args
            .get(i + 1)
            .map_or(Level::ThreadDependent, |a| *u.level.get(*a))
            .max(ys.get(i).map_or(Level::Uniform, |y| u.operand_level(y)));
        set(u, res, l.max(bounds));
    }
}

fn if_op(k: &Kernel, u: &mut Uniformity, we: Option<&WarpEval<'_>>, op: Op, div: Level) {
    let od = &k.ops[op];
    let OpKind::If { cond } = &od.kind else {
        return;
    };
    let c = control_level(u, we, cond).max(div);
    let arms = if u.arms_free { div } else { c };
    for &r in &od.regions {
        region(k, u, we, r, arms);
    }
    let (t, e) = (yields(k, od.regions[0]), yields(k, od.regions[1]));
    for (i, &res) in od.results.iter().enumerate() {
        let l = [t.get(i), e.get(i)]
            .into_iter()
            .flatten()
            .map(|y| u.operand_level(y))
            .fold(c, Level::max);
        set(u, res, l);
    }
}

fn while_op(k: &Kernel, u: &mut Uniformity, we: Option<&WarpEval<'_>>, op: Op, div: Level) {
    let od = &k.ops[op];
    let OpKind::While { init } = &od.kind else {
        return;
    };
    let (before, after) = (od.regions[0], od.regions[1]);
    let bargs = k.region_args(before).to_vec();
    let aargs = k.region_args(after).to_vec();
    for (a, i) in bargs.iter().zip(init) {
        set(u, *a, u.operand_level(i).max(div));
    }
    let mut cond = div;
    loop {
        region(k, u, we, before, cond);
        let c = match k.region_ops(before).last().map(|&o| &k.ops[o].kind) {
            Some(OpKind::Condition(c)) => control_level(u, we, c),
            _ => Level::Uniform,
        };
        let mut changed = c > cond;
        cond = cond.max(c);
        for (a, b) in aargs.iter().zip(&bargs) {
            changed |= set(u, *a, (*u.level.get(*b)).max(cond));
        }
        region(k, u, we, after, cond);
        let ys = yields(k, after);
        for (a, y) in bargs.iter().zip(&ys) {
            changed |= set(u, *a, u.operand_level(y));
        }
        if !changed {
            break;
        }
    }
    for (i, &res) in od.results.iter().enumerate() {
        let l = bargs
            .get(i)
            .map_or(Level::ThreadDependent, |a| *u.level.get(*a));
        set(u, res, l.max(cond));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::footprint::Footprints;
    use crate::reader::parse_kernel;

    /// The level of the then-arm of each `if`, in program order.
    fn arms(src: &str, warp: u32) -> Vec<Level> {
        let k = parse_kernel(src).expect("parses");
        let fp = Footprints::new(&k, warp);
        let u = analyze_warp(&k, warp, &|v, t| {
            fp.eval(v, &Default::default(), t, &mut Default::default())
        });
        k.ops_in_order()
            .into_iter()
            .filter(|&o| matches!(k.ops[o].kind, OpKind::If { .. }))
            .map(|o| *u.divergent.get(k.ops[o].regions[0]))
            .collect()
    }

    fn kernel(cond: &str) -> String {
        format!(
            "kernel @k() block(64) {{\n %t = tid.x\n %w = warp\n %q = div %t, 32\n %c = {cond}\n if %c {{\n %z = add %t, 1\n }}\n}}"
        )
    }

    #[test]
    fn conditions_constant_within_each_warp_are_warp_uniform() {
        for c in [
            "cmp eq %w, 0",
            "cmp lt %q, 1",
            "cmp lt %t, 32",
            "cmp ge %t, 32",
        ] {
            assert_eq!(arms(&kernel(c), 32), vec![Level::WarpUniform], "{c}");
        }
        for c in ["cmp lt %t, 16", "cmp eq %t, 0"] {
            assert_eq!(arms(&kernel(c), 32), vec![Level::ThreadDependent], "{c}");
        }
        // 64-wide wavefronts: `tid.x < 32` splits one.
        assert_eq!(
            arms(&kernel("cmp lt %t, 32"), 64),
            vec![Level::ThreadDependent]
        );
        assert_eq!(arms(&kernel("cmp lt %t, 64"), 64), vec![Level::WarpUniform]);
    }

    #[test]
    fn nesting_takes_the_join_and_the_block_view_is_unchanged() {
        let src = "kernel @k(%n: i32) block(64) {\n %t = tid.x\n %w = warp\n %c = cmp eq %w, 0\n if %c {\n %u = cmp lt %n, 4\n if %u {\n %z = add %t, 1\n }\n %l = cmp lt %t, 3\n if %l {\n %y = add %t, 2\n }\n }\n}";
        assert_eq!(
            arms(src, 32),
            vec![
                Level::WarpUniform,
                Level::WarpUniform,
                Level::ThreadDependent
            ]
        );
        let k = parse_kernel(src).expect("parses");
        let u = analyze(&k);
        let c = k.ops_in_order()[2];
        assert!(
            !u.is_uniform(k.ops[c].results[0]),
            "warp is not block-uniform"
        );
    }
}
