//! Hand-written gfx12 split barriers as existing syncs: which `barrier_wait id` of a kernel
//! acts as a block barrier at its own position, and which `barrier_signal id` may open the
//! window it closes.
//!
//! A split pair orders what precedes its signal (the signal follows the wave's accesses;
//! with `waitcnt dscnt(0)` right before it, their completion too) against what follows its
//! wait. Between the halves is the *window*: an access there is ordered by neither half. A
//! wait W therefore acts exactly like a `barrier` at W's position, for the shared-memory
//! hazards placement reasons about, when on every path that reaches W
//!
//! 1. the last split op of W's id is a signal (the protocol holds: W cannot hang), and
//! 2. between that signal and W there is no shared access and no sync op (at any depth of
//!    the structured control flow): the window holds only register and global work, which a
//!    barrier never ordered for those hazards either (the lowering's own slack,
//!    `sync::split`, is the same set of ops).
//!
//! Then every shared access before W on a path is before its signal, and the hardware lets a
//! wave past W only after every wave has signalled. An adjacent `barrier_signal;
//! barrier_wait` is the window with nothing in it; a rotated loop (signal before the loop and
//! at the end of the body, wait at the top of the body and after the loop) has windows that
//! span the loop head and the back edge, and every one of its waits qualifies.
//!
//! Formulation: a forward dataflow over the structured kernel. The state per split id is the
//! set of signals that may be open (a signal not yet waited for), whether the barrier may be
//! idle (no signal open), and whether an open window may already hold a shared access or a
//! sync op (dirty). Join: union and or. `if` joins its arms; a loop joins its entry with its
//! back edge until the state is stable (the lattice is finite: at most the kernel's signals,
//! two bits); a `while` runs its condition first. A wait is credited when its state is not
//! idle, not dirty and has an open signal. The head state only grows, so loops settle in a
//! few rounds; one that has not after `MAX_ROUNDS` (16) makes the analysis decline: no wait of
//! the kernel is credited (placement then adds its own barriers). Complexity: O(ops · ids · rounds^depth), and nothing for a kernel without
//! split waits.
//!
//! Reference: the semantics of `s_barrier_signal` / `s_barrier_wait` in AMD's RDNA4 ISA
//! manual (the signal does not wait for the wave's outstanding LDS operations), as the
//! interpreter models them (docs/split-barriers.md).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::ir::effects::effects;
use crate::ir::*;

/// Rounds of a loop's fixpoint before the analysis declines inside it.
const MAX_ROUNDS: usize = 16;

/// What may hold of one split id at a program point, joined over paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Window {
    /// Some path reaches here with no signal open.
    idle: bool,
    /// Some path's open window holds a shared access or a sync op.
    dirty: bool,
    /// The signals that may be open here.
    signals: BTreeSet<Op>,
}

impl Window {
    fn idle() -> Self {
        Window {
            idle: true,
            ..Default::default()
        }
    }

    fn join(&mut self, o: &Window) {
        self.idle |= o.idle;
        self.dirty |= o.dirty;
        self.signals.extend(o.signals.iter().copied());
    }

    fn credited(&self) -> bool {
        !self.idle && !self.dirty && !self.signals.is_empty()
    }
}

/// Per split id (absent: idle).
type State = BTreeMap<i32, Window>;

fn join(a: &State, b: &State) -> State {
    let mut out = a.clone();
    for (id, w) in b {
        out.entry(*id).or_insert_with(Window::idle).join(w);
    }
    for (id, w) in out.iter_mut() {
        if !b.contains_key(id) {
            w.idle = true;
        }
    }
    out
}

/// The kernel's credited split waits, each with the signals that may open its window
/// (module doc). Empty for a kernel without split waits.
pub fn credited_waits(k: &Kernel) -> HashMap<Op, Vec<Op>> {
    if !k
        .ops
        .iter()
        .any(|(_, o)| matches!(o.kind, OpKind::SplitWait(_)))
    {
        return HashMap::new();
    }
    let mut w = Walk {
        k,
        at_wait: HashMap::new(),
        declined: false,
    };
    w.region(k.body(), State::new());
    if w.declined {
        return HashMap::new();
    }
    w.at_wait
        .into_iter()
        .filter(|(_, win)| win.credited())
        .map(|(op, win)| (op, win.signals.into_iter().collect()))
        .collect()
}

struct Walk<'a> {
    k: &'a Kernel,
    /// The state each wait was last reached with (the last visit is under the fixpoint).
    at_wait: HashMap<Op, Window>,
    /// A loop's fixpoint did not settle: nothing is credited.
    declined: bool,
}

impl Walk<'_> {
    fn region(&mut self, r: Region, mut s: State) -> State {
        for &op in self.k.region_ops(r) {
            s = self.op(op, s);
        }
        s
    }

    fn op(&mut self, op: Op, mut s: State) -> State {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::SplitSignal(id) => {
                dirty_all(&mut s);
                s.insert(
                    *id,
                    Window {
                        signals: [op].into_iter().collect(),
                        ..Default::default()
                    },
                );
                s
            }
            OpKind::SplitWait(id) => {
                let w = s.get(id).cloned().unwrap_or_else(Window::idle);
                self.at_wait.insert(op, w);
                dirty_all(&mut s);
                s.insert(*id, Window::idle());
                s
            }
            OpKind::If { .. } => {
                let a = self.region(od.regions[0], s.clone());
                let b = self.region(od.regions[1], s);
                join(&a, &b)
            }
            OpKind::For { .. } => self.fixpoint(od.regions[0], None, s),
            OpKind::While { .. } => self.fixpoint(od.regions[1], Some(od.regions[0]), s),
            _ if !od.regions.is_empty() => {
                for &r in &od.regions {
                    s = self.region(r, s);
                }
                s
            }
            _ => {
                let e = effects(k, op);
                if !e.shared.is_empty() || e.sync.is_some() {
                    dirty_all(&mut s);
                }
                s
            }
        }
    }

    /// A loop: the head state is the entry joined with the back edge, to a fixpoint; the
    /// exit state is the head's (after the condition for `while`).
    fn fixpoint(&mut self, body: Region, cond: Option<Region>, entry: State) -> State {
        let mut head = entry.clone();
        let mut settled = false;
        for _ in 0..MAX_ROUNDS {
            let after_cond = match cond {
                Some(c) => self.region(c, head.clone()),
                None => head.clone(),
            };
            let back = self.region(body, after_cond);
            let next = join(&entry, &back);
            if next == head {
                settled = true;
                break;
            }
            head = next;
        }
        self.declined |= !settled;
        match cond {
            Some(c) => self.region(c, head),
            None => head,
        }
    }
}

/// A shared access or sync op: every open window becomes dirty.
fn dirty_all(s: &mut State) {
    for w in s.values_mut() {
        if !w.signals.is_empty() {
            w.dirty = true;
        }
    }
}
