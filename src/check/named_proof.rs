//! Static proof of named-barrier handshakes between the roles of a warp-specialized kernel,
//! for every trip count — the named-barrier half of `check::handshake_proof`; reads the IR
//! only (docs/pipeline.md, "What the checker proves").
//!
//! Recognized form: a top-level role branch whose arms run one loop each with the same
//! bounds; every named op of an arm sits in that loop's body, at its top level or alone under
//! `if %g` with `%g = cmp gt %i, lo` (*not first*) or `%g = cmp lt (add %i, step), hi` (*not
//! last*); each id is used by one op per arm. An id both roles use pairs the ops
//! (unguarded, unguarded) — phase `n` is iteration `n` of both — or (not first, not last) —
//! phase `p` is iteration `p + 1` of the first and `p` of the second — and its count is the
//! two roles' threads. Folding the iterations, every dependency is an edge with an iteration
//! delta: program order (0, and +1 from the body's last op to its first), and from each op of
//! a phase to the other role's `named_sync` of that phase. Then:
//! - a cycle of total delta <= 0 is a deadlock (C0020; Bellman-Ford on weights
//!   `delta * (N + 1) - 1`, negative exactly for those cycles);
//! - a `named_arrive` may arrive again only after its phase completed: the other role's sync
//!   of the phase must reach the arrival of the next phase by a path of delta at most the
//!   iterations between them, else a thread could arrive twice in one phase.
//!
//! Complexity: O(N · E) for N named ops.

use crate::diag::{DiagKind, Diagnostic};
use crate::ir::*;

use super::handshake_proof::HandshakeVerdict;

/// Guard of a named op in its loop body.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Guard {
    Always,
    NotFirst,
    NotLast,
}

#[derive(Clone, Debug)]
struct NOp {
    op: Op,
    arm: usize,
    id: u32,
    count: u32,
    sync: bool,
    guard: Guard,
}

/// The verdict for a role branch whose arms use named barriers (None when they do not).
pub(crate) fn prove_named(k: &Kernel, br: Op, threads: [u32; 2]) -> Option<HandshakeVerdict> {
    let per_arm: Vec<Vec<Op>> = k.ops[br]
        .regions
        .iter()
        .map(|&r| {
            let mut all = Vec::new();
            walk(k, r, &mut all);
            all.retain(|&o| {
                matches!(k.ops[o].kind, OpKind::NamedArrive { .. } | OpKind::NamedSync { .. })
            });
            all
        })
        .collect();
    let id_of = |o: &Op| match k.ops[*o].kind {
        OpKind::NamedArrive { id, .. } | OpKind::NamedSync { id, .. } => id,
        _ => 0,
    };
    // Only ids both roles use are handshakes; a role's own barriers are not.
    let ids0: Vec<u32> = per_arm.first()?.iter().map(id_of).collect();
    if !per_arm.get(1)?.iter().any(|o| ids0.contains(&id_of(o))) {
        return None;
    }
    let mut ops = Vec::new();
    let mut loops = Vec::new();
    for (arm, (&r, named)) in k.ops[br].regions.iter().zip(&per_arm).enumerate() {
        if named.is_empty() {
            loops.push(None);
            continue;
        }
        match read_arm(k, r, arm, named) {
            Ok((l, v)) => {
                loops.push(Some(l));
                ops.extend(v);
            }
            Err(why) => return Some(HandshakeVerdict::NotProved(why)),
        }
    }
    if ops.is_empty() {
        return None;
    }
    Some(prove(k, br, threads, &ops, &loops).unwrap_or_else(HandshakeVerdict::NotProved))
}

fn walk(k: &Kernel, r: Region, out: &mut Vec<Op>) {
    for &o in k.region_ops(r) {
        out.push(o);
        for &c in &k.ops[o].regions {
            walk(k, c, out);
        }
    }
}

fn def(k: &Kernel, o: Operand) -> Option<&OpKind> {
    match k.values[o.value()?].def {
        ValueDef::Result(d, _) => Some(&k.ops[d].kind),
        _ => None,
    }
}

/// The arm's loop and its named ops with their guards.
fn read_arm(k: &Kernel, r: Region, arm: usize, named: &[Op]) -> Result<(Op, Vec<NOp>), String> {
    let parents = k.parents();
    let mut lp = None;
    let mut out = Vec::new();
    for &o in named {
        let (id, count, sync) = match k.ops[o].kind {
            OpKind::NamedArrive { id, count } => (id, count, false),
            OpKind::NamedSync { id, count } => (id, count, true),
            _ => continue,
        };
        let anc = parents.ancestors(o);
        let l = anc
            .iter()
            .position(|&a| matches!(k.ops[a].kind, OpKind::For { .. }))
            .ok_or("a named barrier of a role is outside its loop")?;
        let l_op = anc[l];
        if parents.op_region[l_op] != Some(r) {
            return Err("a role's named barriers are not in a loop at the top of its arm".into());
        }
        if lp.is_some_and(|x| x != l_op) {
            return Err("a role's named barriers lie in two loops".into());
        }
        lp = Some(l_op);
        let guard = match l {
            0 => Guard::Always,
            1 => guard_of(k, anc[0], l_op).ok_or("a named barrier is under a condition the proof does not read")?,
            _ => return Err("a named barrier is nested too deep in its loop".into()),
        };
        out.push(NOp { op: o, arm, id, count, sync, guard });
    }
    Ok((lp.ok_or("no loop")?, out))
}

/// `if %g` with `%g = cmp gt %i, lo` or `cmp lt (add %i, step), hi` of the loop `l`.
fn guard_of(k: &Kernel, g: Op, l: Op) -> Option<Guard> {
    let OpKind::If { cond } = k.ops[g].kind else { return None };
    let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else { return None };
    let iv = k.region_args(k.ops[l].regions[0])[0];
    if let Some(g) = guard_by_iterations(k, cond, iv, (*lo, *hi, *step)) {
        return Some(g);
    }
    match def(k, cond)? {
        OpKind::Cmp(CmpPred::Gt, Operand::Value(x), b) if *x == iv && b == lo => Some(Guard::NotFirst),
        OpKind::Cmp(CmpPred::Lt, n, b) if b == hi => match def(k, *n)? {
            OpKind::Binary(BinOp::Add, Operand::Value(x), s) if *x == iv && s == step => Some(Guard::NotLast),
            _ => None,
        },
        _ => None,
    }
}

/// With constant bounds, a guard `cmp P X, C` (X the induction variable or `add %i, C'`)
/// evaluated on every iteration: true on all but the first, or all but the last.
fn guard_by_iterations(
    k: &Kernel,
    cond: Operand,
    iv: Value,
    (lo, hi, step): (Operand, Operand, Operand),
) -> Option<Guard> {
    let (Operand::Imm(lo), Operand::Imm(hi), Operand::Imm(st)) = (lo, hi, step) else {
        return None;
    };
    let (lo, hi, st) = (lo.as_i64(), hi.as_i64(), st.as_i64());
    let OpKind::Cmp(p, x, Operand::Imm(c)) = def(k, cond)? else {
        return None;
    };
    let off = match x {
        Operand::Value(v) if *v == iv => 0,
        _ => match def(k, *x)? {
            OpKind::Binary(BinOp::Add, Operand::Value(v), Operand::Imm(a)) if *v == iv => a.as_i64(),
            _ => return None,
        },
    };
    if st <= 0 || hi <= lo || (hi - lo) / st > 1 << 16 {
        return None;
    }
    let its: Vec<i64> = (0..).map(|n| lo + n * st).take_while(|&i| i < hi).collect();
    let truth: Vec<bool> = its.iter().map(|&i| p.holds(i + off, c.as_i64())).collect();
    let last = truth.len() - 1;
    if truth.iter().enumerate().all(|(n, &t)| t == (n != 0)) {
        Some(Guard::NotFirst)
    } else if truth.iter().enumerate().all(|(n, &t)| t == (n != last)) {
        Some(Guard::NotLast)
    } else {
        None
    }
}

/// The dependency graph of the roles' named ops, folded over the iterations: edges
/// `(from, to, iteration delta)`, and the arrivals to check (arrive op, the other role's sync
/// of its phase, the delta a path may take between them).
struct Folded<'a> {
    k: &'a Kernel,
    threads: [u32; 2],
    ops: &'a [NOp],
    loops: &'a [Option<Op>],
    edges: Vec<(usize, usize, i64)>,
    arrivals: Vec<(usize, usize, i64)>,
}

fn prove(
    k: &Kernel,
    br: Op,
    threads: [u32; 2],
    ops: &[NOp],
    loops: &[Option<Op>],
) -> Result<HandshakeVerdict, String> {
    let _ = br;
    let n = ops.len();
    let mut f = Folded {
        k,
        threads,
        ops,
        loops,
        edges: program_order(ops),
        arrivals: Vec::new(),
    };
    let mut ids: Vec<u32> = ops.iter().map(|o| o.id).collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        if let Some(d) = f.pair(id)? {
            return Ok(HandshakeVerdict::Refuted(Box::new(d)));
        }
    }
    if let Some(d) = f.waiting_cycle() {
        return Ok(HandshakeVerdict::Refuted(Box::new(d)));
    }
    for &(arr, other, limit) in &f.arrivals {
        let dist = shortest(n, &f.edges, other);
        if dist[arr].is_none_or(|d| d > limit) {
            return Err(format!("named barrier {}: a thread of {} may arrive again before the phase it arrived in completes", ops[arr].id, role(ops[arr].arm)));
        }
    }
    Ok(HandshakeVerdict::Proved(format!(
        "named-barrier handshakes ({n} ops) proved for every trip count: each phase pairs one iteration of each role with the full count, no cycle of waiting roles, no thread arrives twice in a phase"
    )))
}

/// Program order within each role: delta 0 along the body, +1 from its last op to its first.
fn program_order(ops: &[NOp]) -> Vec<(usize, usize, i64)> {
    let mut edges = Vec::new();
    for arm in 0..2 {
        let idx: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].arm == arm).collect();
        for w in idx.windows(2) {
            edges.push((w[0], w[1], 0));
        }
        if let (Some(&f), Some(&l)) = (idx.first(), idx.last()) {
            edges.push((l, f, 1));
        }
    }
    edges
}

impl Folded<'_> {
    /// Adds the edges and arrival checks of barrier `id`: Ok(Some) refutes the handshake
    /// (C0021, counts that do not add up), Err declines the proof.
    fn pair(&mut self, id: u32) -> Result<Option<Diagnostic>, String> {
        let (k, ops) = (self.k, self.ops);
        let on: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].id == id).collect();
        let (a, b): (Vec<usize>, Vec<usize>) = on.iter().partition(|&&i| ops[i].arm == 0);
        let (x, y) = match (a.as_slice(), b.as_slice()) {
            ([x], []) | ([], [x]) => {
                // A barrier of one role: every thread of the arm syncs each iteration.
                let o = &ops[*x];
                if !o.sync || o.count != self.threads[o.arm] || o.guard != Guard::Always {
                    return Err(format!("named barrier {id} is used by one role but is not a sync of all its threads"));
                }
                return Ok(None);
            }
            ([x], [y]) => (*x, *y),
            _ => return Err(format!("named barrier {id} is used more than once in a role's iteration")),
        };
        if self.loops[0].map(|l| bounds(k, l)) != self.loops[1].map(|l| bounds(k, l)) {
            return Err("the roles' loops have different bounds".into());
        }
        let c = self.threads[0] + self.threads[1];
        if ops[x].count != c || ops[y].count != c {
            let d = Diagnostic::error(DiagKind::Finding, "C0021", format!("named barrier {id} counts {} threads, but the two roles bring {c} to each phase", ops[x].count))
                .with_label(k.span(ops[x].op), "one role's op")
                .with_label(k.span(ops[y].op), "the other role's op");
            return Ok(Some(d));
        }
        // it(x) - it(y) at one phase.
        let shift = match (ops[x].guard, ops[y].guard) {
            (Guard::Always, Guard::Always) => 0,
            (Guard::NotFirst, Guard::NotLast) => 1,
            (Guard::NotLast, Guard::NotFirst) => -1,
            _ => return Err(format!("the guards of named barrier {id} do not pair the roles' iterations one to one")),
        };
        if ops[y].sync {
            self.edges.push((x, y, -shift));
        }
        if ops[x].sync {
            self.edges.push((y, x, shift));
        }
        for (arr, other, s) in [(x, y, shift), (y, x, -shift)] {
            if !ops[arr].sync {
                if !ops[other].sync {
                    return Err(format!("named barrier {id}: neither role waits on it"));
                }
                // From the other role's sync at phase p to this arrival at phase p + 1:
                // it(arr, p + 1) - it(other, p) = s + 1.
                self.arrivals.push((arr, other, s + 1));
            }
        }
        Ok(None)
    }

    /// C0020 when the roles wait on each other in a cycle of total delta <= 0.
    fn waiting_cycle(&self) -> Option<Diagnostic> {
        let ops = self.ops;
        let big = ops.len() as i64 + 1;
        let weighted: Vec<(usize, usize, i64)> =
            self.edges.iter().map(|&(a, b, d)| (a, b, d * big - 1)).collect();
        let cyc = negative_cycle(ops.len(), &weighted)?;
        let steps: Vec<String> = cyc
            .iter()
            .filter(|&&i| ops[i].sync)
            .map(|&i| format!("{} syncs on {}", role(ops[i].arm), ops[i].id))
            .collect();
        let mut d = Diagnostic::error(DiagKind::Finding, "C0020", format!("deadlock once the loop runs long enough: {} (a cycle)", steps.join(" -> ")));
        for &i in &cyc {
            if ops[i].sync {
                d = d.with_label(self.k.span(ops[i].op), format!("{} waits here", role(ops[i].arm)));
            }
        }
        Some(d)
    }
}

fn role(arm: usize) -> &'static str {
    if arm == 0 { "the group's role" } else { "the other role" }
}

fn bounds(k: &Kernel, l: Op) -> Option<(Operand, Operand, Operand)> {
    match &k.ops[l].kind {
        OpKind::For { lo, hi, step, .. } => Some((*lo, *hi, *step)),
        _ => None,
    }
}

/// A cycle of negative total weight (Bellman-Ford from a virtual source), if any.
fn negative_cycle(n: usize, edges: &[(usize, usize, i64)]) -> Option<Vec<usize>> {
    let mut dist = vec![0i64; n];
    let mut pred = vec![usize::MAX; n];
    let mut last = None;
    for _ in 0..=n {
        last = None;
        for &(a, b, w) in edges {
            if dist[a] + w < dist[b] {
                dist[b] = dist[a] + w;
                pred[b] = a;
                last = Some(b);
            }
        }
    }
    let mut v = last?;
    for _ in 0..n {
        v = pred[v];
    }
    let mut cyc = vec![v];
    let mut x = pred[v];
    while x != v && x != usize::MAX {
        cyc.push(x);
        x = pred[x];
    }
    cyc.reverse();
    Some(cyc)
}

/// Shortest path weights from `s` (no negative cycle: checked before).
fn shortest(n: usize, edges: &[(usize, usize, i64)], s: usize) -> Vec<Option<i64>> {
    let mut dist: Vec<Option<i64>> = vec![None; n];
    dist[s] = Some(0);
    for _ in 0..n {
        for &(a, b, w) in edges {
            if let Some(da) = dist[a]
                && dist[b].is_none_or(|db| da + w < db)
            {
                dist[b] = Some(da + w);
            }
        }
    }
    dist
}
