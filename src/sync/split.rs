//! Lowering block barriers to gfx12 split barriers (`s_barrier_signal -1` / `s_barrier_wait
//! -1`) with as much slack between the halves as the kernel allows.
//!
//! Input: a kernel whose block barriers already remove every hazard (the output of barrier
//! placement). Each `barrier` B becomes `waitcnt dscnt(0); barrier_signal -1` and
//! `barrier_wait -1` such that every op before B stays before the signal and every op after B
//! stays after the wait, except ops that touch no shared memory and are not sync ops, which may
//! sit between the halves: those are the slack a wave spends working instead of waiting.
//!
//! Algorithm, per barrier B at index i of region R:
//! 1. If B is the first op of the body of a loop with uniform bounds, it is *rotated* across
//!    the back edge: a pair is opened before the loop and at the end of each iteration (a
//!    signal), and closed at the top of each iteration and after the loop (a wait). The
//!    sequence on every path is then S (W S)* W, and the window of each pair spans the back
//!    edge, so the end of one iteration overlaps the start of the next.
//! 2. Otherwise the signal and the wait replace B in place.
//! 3. Each signal moves up past the ops before it in its region that neither touch shared
//!    memory (directly or in nested regions, per the effects table) nor synchronize; each wait
//!    moves down likewise. A signal is always immediately preceded by `waitcnt dscnt(0)`:
//!    the hardware signal does not wait for the wave's outstanding LDS operations.
//!
//! Why this is correct: a shared access before B is before the `dscnt(0)` and the signal, in
//! program order, on every path; one after B is after the wait. Between the halves there are
//! only accesses to registers and global memory, which the barrier never ordered for the
//! hazards it was placed for. Rotation keeps the order on every path: the first iteration's
//! wait matches the signal before the loop, the last iteration's signal the wait after it, a
//! zero-trip loop meets S then W. Pairs never cross: halves never move past another sync op,
//! and signals and waits on id -1 therefore alternate along every path (the protocol verifier,
//! `check::protocol`, re-proves it on the output).
//!
//! Complexity: O(ops) per barrier for the shared-access summary (memoized per op), O(ops)
//! moves in total.

use std::collections::HashMap;

use crate::ir::*;

/// The split id used for the workgroup barrier.
pub const WORKGROUP: i32 = -1;

/// Statistics of one lowering.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SplitStats {
    /// Signal/wait pairs written in the kernel text.
    pub pairs: usize,
    /// For each written signal, the number of ops between it and the next wait in program
    /// order (the slack a wave may overlap with the barrier).
    pub slack: Vec<usize>,
}

impl SplitStats {
    pub fn mean_slack(&self) -> f64 {
        if self.slack.is_empty() {
            0.0
        } else {
            self.slack.iter().sum::<usize>() as f64 / self.slack.len() as f64
        }
    }
}

/// Whether an op (with its regions) touches shared memory or synchronizes.
fn pinned(k: &Kernel, op: Op, memo: &mut HashMap<Op, bool>) -> bool {
    if let Some(&b) = memo.get(&op) {
        return b;
    }
    let e = effects(k, op);
    let mut b = !e.shared.is_empty() || e.sync.is_some();
    if !b {
        for &r in &k.ops[op].regions {
            for &c in &k.regions[r].ops {
                if pinned(k, c, memo) {
                    b = true;
                    break;
                }
            }
            if b {
                break;
            }
        }
    }
    memo.insert(op, b);
    b
}

/// Lowers every `barrier` of `k` to split signal/wait pairs.
pub fn lower_to_split(
    k: &Kernel,
    thread_dependent: &dyn Fn(&Operand) -> bool,
) -> (Kernel, SplitStats) {
    let mut out = k.clone();
    let parents = k.parents();
    let barriers: Vec<Op> = k
        .ops_in_order()
        .into_iter()
        .filter(|&o| k.ops[o].kind == OpKind::Barrier)
        .collect();
    for b in barriers {
        let Some(r) = parents.op_region[b] else {
            continue;
        };
        let idx = out.regions[r]
            .ops
            .iter()
            .position(|&o| o == b)
            .expect("barrier is placed");
        let owner = parents.region_op[r];
        let rotate = idx == 0
            && owner.is_some_and(|l| match &k.ops[l].kind {
                OpKind::For { lo, hi, step, .. } => {
                    k.ops[l].regions[0] == r && ![lo, hi, step].iter().any(|o| thread_dependent(o))
                }
                _ => false,
            });
        out.regions[r].ops.remove(idx);
        if rotate {
            let l = owner.expect("loop");
            let outer = parents.op_region[l].expect("loop is placed");
            let li = out.regions[outer]
                .ops
                .iter()
                .position(|&o| o == l)
                .expect("loop placed");
            // Wait at the top of the body, signal at its end (before a yield).
            let w = new_wait(&mut out);
            out.regions[r].ops.insert(0, w);
            let end = out.regions[r].ops.len()
                - usize::from(
                    out.regions[r]
                        .ops
                        .last()
                        .is_some_and(|&o| matches!(out.ops[o].kind, OpKind::Yield(_))),
                );
            insert_signal(&mut out, r, end);
            // Wait after the loop, signal before it.
            let w2 = new_wait(&mut out);
            out.regions[outer].ops.insert(li + 1, w2);
            insert_signal(&mut out, outer, li);
        } else {
            let w = new_wait(&mut out);
            out.regions[r].ops.insert(idx, w);
            insert_signal(&mut out, r, idx);
        }
    }
    // Slide every signal up and every wait down within its region.
    let mut memo = HashMap::new();
    let regions: Vec<Region> = out.regions.keys().collect();
    for r in regions {
        slide(&mut out, r, &mut memo);
    }
    let stats = stats(&out);
    (out, stats)
}

fn new_wait(k: &mut Kernel) -> Op {
    k.new_op(OpKind::SplitWait(WORKGROUP), &[], vec![])
}

/// Inserts `waitcnt dscnt(0); barrier_signal -1` at position `at` of region `r`.
fn insert_signal(k: &mut Kernel, r: Region, at: usize) {
    let d = k.new_op(OpKind::WaitCnt(vec![(Counter::DsCnt, 0)]), &[], vec![]);
    let s = k.new_op(OpKind::SplitSignal(WORKGROUP), &[], vec![]);
    k.regions[r].ops.insert(at, s);
    k.regions[r].ops.insert(at, d);
}

fn is_dscnt0(k: &Kernel, op: Op) -> bool {
    k.ops[op].kind == OpKind::WaitCnt(vec![(Counter::DsCnt, 0)])
}

fn slide(k: &mut Kernel, r: Region, memo: &mut HashMap<Op, bool>) {
    let mut ops = k.regions[r].ops.clone();
    // Signals (with their dscnt wait) move up.
    let mut i = 0;
    while i < ops.len() {
        if k.ops[ops[i]].kind == OpKind::SplitSignal(WORKGROUP) && i > 0 && is_dscnt0(k, ops[i - 1])
        {
            let mut j = i - 1;
            while j > 0 && !pinned(k, ops[j - 1], memo) {
                j -= 1;
            }
            if j < i - 1 {
                let d = ops.remove(i - 1);
                let s = ops.remove(i - 1);
                ops.insert(j, s);
                ops.insert(j, d);
            }
        }
        i += 1;
    }
    // Waits move down (not past a yield: it ends the region).
    let mut i = ops.len();
    while i > 0 {
        i -= 1;
        if k.ops[ops[i]].kind == OpKind::SplitWait(WORKGROUP) {
            let mut j = i;
            while j + 1 < ops.len()
                && !pinned(k, ops[j + 1], memo)
                && !matches!(k.ops[ops[j + 1]].kind, OpKind::Yield(_))
            {
                j += 1;
            }
            if j > i {
                let w = ops.remove(i);
                ops.insert(j, w);
            }
        }
    }
    k.regions[r].ops = ops;
}

/// Pairs written and, for each signal, the ops up to the next wait in program order.
pub fn stats(k: &Kernel) -> SplitStats {
    let order = k.ops_in_order();
    let mut s = SplitStats::default();
    for (i, &op) in order.iter().enumerate() {
        if k.ops[op].kind == OpKind::SplitSignal(WORKGROUP) {
            s.pairs += 1;
            let gap = order[i + 1..]
                .iter()
                .position(|&o| k.ops[o].kind == OpKind::SplitWait(WORKGROUP))
                .unwrap_or(order.len() - i - 1);
            s.slack.push(gap);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::protocol::{check_protocol, thread_dependent_values};
    use crate::emit::text::print_kernel;
    use crate::reader::parse_kernel;

    fn lower(src: &str) -> (Kernel, SplitStats) {
        let k = parse_kernel(src).expect("parses");
        let dep = thread_dependent_values(&k);
        let (out, st) = lower_to_split(&k, &|o: &Operand| {
            o.value().is_some_and(|v| dep.contains(&v))
        });
        assert!(
            crate::verify::verify(&out).is_empty(),
            "{}",
            print_kernel(&out)
        );
        let p = check_protocol(&out, 32);
        assert!(p.is_empty(), "{p:?}\n{}", print_kernel(&out));
        // Round-trips through the printer.
        let again = parse_kernel(&print_kernel(&out)).expect("reparses");
        assert_eq!(print_kernel(&again), print_kernel(&out));
        (out, st)
    }

    #[test]
    fn straight_line_barrier_gains_the_register_work_between_store_and_load() {
        let (k, st) = lower(
            "kernel @k(%A: global f32[64]) block(64) {\n shared @s : f32[64]\n %t = tid.x\n %x = gload %A[%t]\n store @s[%t], %x\n barrier\n %u = add %t, 1\n %v = rem %u, 64\n %y = load @s[%v]\n}",
        );
        let text = print_kernel(&k);
        let sig = text.find("barrier_signal -1").expect("signal");
        let dscnt = text.find("waitcnt dscnt(0)").expect("dscnt");
        let wait = text.find("barrier_wait -1").expect("wait");
        let store = text.find("store @s").expect("store");
        let load = text.find("load @s[%v]").expect("load");
        assert!(
            store < dscnt && dscnt < sig && sig < wait && wait < load,
            "{text}"
        );
        assert_eq!(st.pairs, 1);
        assert_eq!(
            st.slack,
            vec![2],
            "the add and rem run between signal and wait\n{text}"
        );
    }

    #[test]
    fn barrier_at_loop_top_is_rotated_across_the_back_edge() {
        let (k, st) = lower(
            "kernel @k() block(64) {\n shared @s : f32[64]\n %t = tid.x\n for %i = 0 to 4 step 1 {\n barrier\n %u = add %t, %i\n %v = rem %u, 64\n %y = load @s[%v]\n store @s[%t], %y\n %z = add %t, 3\n }\n}",
        );
        let text = print_kernel(&k);
        assert_eq!(st.pairs, 2, "{text}");
        assert_eq!(text.matches("barrier_wait -1").count(), 2, "{text}");
        // The end-of-body signal moves above the trailing add; the top wait moves below the index math.
        let body = &text[text.find("for %i").expect("loop")..];
        let w = body.find("barrier_wait -1").expect("wait");
        let l = body.find("load @s").expect("load");
        let rem = body.find("rem %u").expect("rem");
        assert!(rem < w && w < l, "{text}");
        let s = body.find("barrier_signal -1").expect("signal");
        let z = body.find("%z = add").expect("z");
        let st_ = body.find("store @s").expect("store");
        assert!(st_ < s && s < z, "{text}");
    }

    #[test]
    fn halves_never_pass_a_wait_for_async_copies() {
        let (k, _) = lower(
            "kernel @k(%A: global f32[64]) block(64) {\n shared @s : f32[64]\n %t = tid.x\n gather_to_lds @s[%t] <- %A[%t]\n waitcnt vmcnt(0)\n %q = add %t, 1\n barrier\n %u = rem %q, 64\n %y = load @s[%u]\n}",
        );
        let text = print_kernel(&k);
        let vm = text.find("waitcnt vmcnt(0)").expect("vmcnt");
        let sig = text.find("barrier_signal").expect("signal");
        assert!(vm < sig, "{text}");
    }

    #[test]
    fn every_example_lowers_to_a_verified_protocol() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
        for e in std::fs::read_dir(dir).expect("examples").flatten() {
            let src = std::fs::read_to_string(e.path()).expect("read");
            lower(&src);
        }
    }
}
