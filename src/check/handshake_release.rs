//! Premise of the handshake proof (`check::handshake_proof`) that its handshakes hand over
//! what the roles share: every access of a role, in its loop, to a buffer another role also
//! accesses (one of the two writing, bytes shared: `ir::layout::share_bytes`) is followed in
//! the same iteration by an arrival of the threads that made it, on an array another role
//! waits on, and preceded in it by a wait of those threads on an array another role arrives
//! on or completes with TMA loads (docs/checker.md, "Every shared access is released").
//!
//! Balance, parity, aliasing and the cycle check say the protocol runs; they read mbarrier ops
//! only. Without this rule "proved" was printed for a producer whose stores into a second
//! buffer no arrival followed (session 39's P12: an elected thread arrived with `tx` before its
//! TMA load, the other 31 threads stored into `@aux` and arrived nowhere; P12b: the elected
//! thread stored after its `tx` arrival). Released means, for an access `x`: an arrival on any
//! array by the same role, later in `x`'s iteration, in a region around `x` (run whenever `x`
//! is), or an elected arrival after a group barrier of the role's threads that follows `x`'s
//! top-level op in the body (the elected-arrival rule of the aliasing argument). A TMA load is
//! exempt: it completes on its own mbarrier with its bytes (the balance rule). Acquired is the
//! mirror image, for a wait before `x` (the read-back of session 39 found "proved" on a
//! producer whose 31 storing threads arrived on `@full` but never waited on `@empty`, and on
//! one arriving on an array no role waits on). Which slot the arrival or wait names is not
//! matched against the access: the interpreter decides that.
//!
//! Anything not released declines the proof ("not proved", naming the access); the
//! interpreter then checks the bounds it is given. Complexity: O(accesses · (roles' accesses
//! + arrivals · depth)).

use super::handshake_proof::{HsOp, Kind, OpIndex, op_name};
use crate::ir::*;

/// Every shared access of every role (regions `roles`, thread counts their lengths) in its
/// loop is followed by an arrival of its threads, or the reason it is not.
pub(super) fn accesses_released(
    k: &Kernel,
    roles: &[(Region, Vec<u32>)],
    ops: &[HsOp],
    index: &OpIndex,
) -> Result<(), String> {
    let acc: Vec<Vec<crate::sync::handshake::Access>> = (roles.iter())
        .map(|(r, _)| {
            let mut v = Vec::new();
            crate::sync::handshake::accesses(k, *r, &mut v);
            v
        })
        .collect();
    let parents = k.parents();
    for (arm, (_, members)) in roles.iter().enumerate() {
        // The role's arrivals on arrays another role waits on, and its waits on arrays another
        // role completes: the only ones that hand anything over.
        let arrivals: Vec<&HsOp> = (ops.iter())
            .filter(|o| o.arm == arm && matches!(o.kind, Kind::Arrive { .. }) && waited_by_other(ops, arm, o.mbar))
            .collect();
        let waits: Vec<&HsOp> = (ops.iter())
            .filter(|o| o.arm == arm && matches!(o.kind, Kind::Wait(_)) && completed_by_other(ops, arm, o.mbar))
            .collect();
        // The proof's premises put every op of a role in its one loop.
        let Some(l) = (ops.iter()).find(|o| o.arm == arm).and_then(|a| loop_of(k, a.op)) else {
            continue;
        };
        let body = k.ops[l].regions[0];
        for x in &acc[arm] {
            let shared = (acc.iter().enumerate()).filter(|&(b, _)| b != arm).flat_map(|(_, v)| v).any(|y| {
                (x.write || y.write) && crate::ir::layout::share_bytes(k, x.buffer, y.buffer)
            });
            let inside = parents.ancestors(x.op).contains(&l);
            if !shared || !inside || matches!(k.ops[x.op].kind, OpKind::TmaLoad { .. }) {
                continue;
            }
            let within = parents.enclosing_regions(x.op, Some(body));
            let top = top_in(k, x.op, l);
            let n = members.len() as u32;
            let (ox, otop) = (index.order[&x.op], index.order[&top]);
            let runs_with_x = |o: Op| parents.op_region[o].is_some_and(|r| within.contains(&r));
            // Released: an arrival after `x` on an array another role waits on.
            let released = arrivals.iter().any(|a| {
                let elected = a.elect && index.group_barrier_between(l, n, otop, index.order[&a.op]);
                index.order[&a.op] > ox && (runs_with_x(a.op) || elected)
            });
            // Acquired: a wait before `x` on an array another role arrives on (or its TMA
            // loads complete), so the other role's use of the previous round is over.
            let acquired = waits.iter().any(|w| {
                let elected = w.elect && index.group_barrier_between(l, n, index.order[&w.op], otop);
                index.order[&w.op] < ox && (runs_with_x(w.op) || elected)
            });
            let missing = match (released, acquired) {
                (true, true) => continue,
                (false, _) => "no arrival of its threads on an array the other role waits on follows it in the iteration",
                (true, false) => "no wait of its threads on an array the other role completes precedes it in the iteration",
            };
            return Err(format!(
                "{} accesses @{}, which another role also accesses, and {missing}: the handshakes do not hand it over",
                op_name(k, x.op),
                k.buffers[x.buffer].name
            ));
        }
    }
    Ok(())
}

/// Whether a role other than `arm` waits on mbarrier array `m`.
fn waited_by_other(ops: &[HsOp], arm: usize, m: Buffer) -> bool {
    (ops.iter()).any(|o| o.arm != arm && o.mbar == m && matches!(o.kind, Kind::Wait(_)))
}

/// Whether a role other than `arm` arrives on mbarrier array `m`, or completes a phase of it
/// with its TMA loads.
fn completed_by_other(ops: &[HsOp], arm: usize, m: Buffer) -> bool {
    (ops.iter()).any(|o| o.arm != arm && o.mbar == m && matches!(o.kind, Kind::Arrive { .. } | Kind::Tma(_)))
}

/// The nearest loop around `o`.
fn loop_of(k: &Kernel, o: Op) -> Option<Op> {
    (k.parents().ancestors(o).into_iter()).find(|&p| matches!(k.ops[p].kind, OpKind::For { .. }))
}

/// The op of `l`'s body that holds `o` (`o` itself when it is directly in the body).
fn top_in(k: &Kernel, o: Op, l: Op) -> Op {
    let parents = k.parents();
    let mut cur = o;
    while let Some(p) = parents.parent_op(cur) {
        if p == l {
            break;
        }
        cur = p;
    }
    cur
}
