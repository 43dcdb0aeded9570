//! The phases of hand-written named barriers (`named_sync id, n` / `named_arrive id, n`), for
//! the ids whose arriving threads the guards determine: `sync` refuses a kernel whose phase
//! can never complete (E0310) instead of crediting its named barriers (hostile H1, H1b).
//!
//! A phase of barrier `id` completes when `n` threads have arrived at it (sync and arrive ops
//! together). Where every op on `id` sits outside loops under `if`s whose conditions are
//! computed from thread ids and constants, or are uniform and shared by all of them
//! (`handshake_guards::reach`), each thread runs a known sequence of those ops in program
//! order, and its j-th op joins the j-th phase the thread takes part in. So, per j:
//!
//! - the ops of the j-th phase must agree on `n` (else the hardware's count is whichever
//!   arrives first: check's C0008);
//! - the number of threads whose sequence has a j-th op must be a multiple of `n` (a
//!   multiple: whole warps form consecutive phases of `n`); otherwise the last phase waits
//!   for arrivals that never come. Only where a `named_sync` waits in that phase or a later
//!   one: a last phase of `named_arrive`s alone blocks no thread.
//!
//! Any other id (an op in a loop, a guard on a parameter or a load) is left to `check`'s
//! interpreter, as before; whether each warp reaches an op together is E0309's business
//! (`stuck_syncs`). Complexity: O(named ops × (depth × threads × cone)) for the guards,
//! O(named ops × threads) for the phases.

use std::collections::BTreeMap;

use crate::diag::{DiagKind, Diagnostic};
use crate::ir::*;
use crate::sync::handshake_guards::reach;

/// One op's share of a phase: the op, its count, the threads that run it as their j-th op.
type Share = (Op, u32, u32);

/// E0310 for every phase of a hand-written named barrier that cannot complete (module doc),
/// in id order.
pub(crate) fn errors(k: &Kernel) -> Vec<Diagnostic> {
    let mut by_id: BTreeMap<u32, Vec<(Op, u32)>> = BTreeMap::new();
    for op in k.ops_in_order() {
        if let OpKind::NamedSync { id, count } | OpKind::NamedArrive { id, count } = k.ops[op].kind
        {
            by_id.entry(id).or_default().push((op, count));
        }
    }
    by_id
        .into_iter()
        .filter_map(|(id, ops)| phases(k, &ops).and_then(|ph| bad_phase(k, id, &ph)))
        .collect()
}

/// The phases of one id's ops (program order), each a list of shares; `None` when the guards
/// do not say which threads run some op, or the ops run under different uniform conditions.
fn phases(k: &Kernel, ops: &[(Op, u32)]) -> Option<Vec<Vec<Share>>> {
    let mut pos = vec![0usize; k.threads() as usize];
    let mut out: Vec<Vec<Share>> = Vec::new();
    let mut uniform = None;
    for &(op, count) in ops {
        let r = reach(k, op, None).ok()?;
        if *uniform.get_or_insert_with(|| r.uniform.clone()) != r.uniform {
            return None;
        }
        for (t, _) in r.threads.iter().enumerate().filter(|x| *x.1) {
            let j = pos[t];
            pos[t] += 1;
            if out.len() <= j {
                out.resize_with(j + 1, Vec::new);
            }
            match out[j].iter_mut().find(|s| s.0 == op) {
                Some(s) => s.2 += 1,
                None => out[j].push((op, count, 1)),
            }
        }
    }
    Some(out)
}

/// The first phase whose ops disagree on the count, or whose threads are not a multiple of it
/// while a `named_sync` waits in it or a later phase (arrivals nobody waits for block no one).
fn bad_phase(k: &Kernel, id: u32, phases: &[Vec<Share>]) -> Option<Diagnostic> {
    let sync = |s: &Share| matches!(k.ops[s.0].kind, OpKind::NamedSync { .. });
    for (j, ph) in phases.iter().enumerate() {
        let &(op, n, _) = ph.first()?;
        if let Some(&(o2, n2, _)) = ph.iter().find(|s| s.1 != n) {
            let d = Diagnostic::error(DiagKind::Finding, "E0310", format!("named barrier {id}: ops of one phase disagree on the thread count ({n} vs {n2})"))
                .with_label(k.span(o2), format!("expects {n2} threads"))
                .with_label(k.span(op), format!("in the same phase as this one, which expects {n}"))
                .with_note("a phase completes when its count of threads has arrived; ops that disagree leave the count to whichever arrives first");
            return Some(d);
        }
        let total: u32 = ph.iter().map(|s| s.2).sum();
        if !total.is_multiple_of(n) && phases[j..].iter().flatten().any(sync) {
            let mut d = Diagnostic::error(DiagKind::Finding, "E0310", format!("named barrier {id}: {total} threads reach a phase whose count is {n}, so a phase gets {} of {n} arrivals and never completes", total % n))
                .with_label(k.span(op), format!("reached by {} threads (expects {n})", ph[0].2));
            for &(o, _, c) in &ph[1..] {
                d = d.with_label(k.span(o), format!("and by {c} threads here, in the same phase"));
            }
            let d = d
                .with_note("the threads are those that pass the `if` conditions around each op; a phase completes when its count of threads (arrivals and syncs together) has arrived")
                .with_help(format!("make the count the number of threads that arrive ({total}), or guard the ops so that {n} threads (a multiple) arrive"));
            return Some(d);
        }
    }
    None
}
