//! Hand-written gfx12 split barriers as existing syncs: which `barrier_wait id` of a kernel
//! is credited as a sync, which `barrier_signal id` may open the window it closes, which ops
//! may execute inside a window, and at which gaps a window may be open.
//!
//! A split pair orders what precedes its signal (the signal follows the wave's accesses;
//! with `waitcnt dscnt(0)` right before it, their completion too) against what follows its
//! wait. Between the halves is the *window*: an access there is ordered by neither half. The
//! pair is a sync at two points: it removes a hazard (src, dst) iff on every path
//! `src ≤ signal` and `wait ≤ dst` (docs/placement.md, section 8). A wait W is *credited*
//! when on every path that reaches W
//!
//! 1. the last split op of W's id is a signal (the protocol holds: W cannot hang), and
//! 2. between that signal and W there is no sync op (at any depth of the structured control
//!    flow).
//!
//! When moreover no window W closes holds a shared access (a *clean* window: only register
//! and global work, the lowering's own slack, `sync::split`), every shared access before W
//! on a path is before its signal, and W acts exactly like a `barrier` at W's position. An
//! adjacent `barrier_signal; barrier_wait` is the window with nothing in it; a rotated loop
//! (signal before the loop and at the end of the body, wait at the top of the body and after
//! the loop) has windows that span the loop head and the back edge, and every one of its
//! waits is clean. A *dirty* W (a shared access may be in its window) removes a hazard only
//! when its point does and the source may not lie in a window W closes
//! ([`SplitPairs::in_window_of`], used by `SyncModel::split_covers`).
//!
//! Formulation: a forward dataflow over the structured kernel. The state per split id is the
//! set of signals that may be open (a signal not yet waited for), whether the barrier may be
//! idle (no signal open), whether an open window may already hold a shared access (dirty) and
//! whether it may hold a sync op. Join: union and or. `if` joins its arms; a loop joins its
//! entry with its back edge until the state is stable (the lattice is finite: at most the
//! kernel's signals, three bits); a `while` runs its condition first. A wait is credited when
//! its state is not idle, holds no sync op and has an open signal. The same walk records, per
//! leaf op, the signals that may be open at it, and the gaps where some window may be open
//! (placement puts no block barrier there: its pair would nest, P0001). The head state only
//! grows, so loops settle in a few rounds; one that has not after `MAX_ROUNDS` (16) makes the
//! analysis decline: no wait of the kernel is credited and no gap closed (placement then adds
//! its own barriers; the protocol check of the output still refuses a nested pair).
//! Complexity: O(ops · ids · rounds^depth), and nothing for a kernel without split waits.
//!
//! Reference: the semantics of `s_barrier_signal` / `s_barrier_wait` in AMD's RDNA4 ISA
//! manual (the signal does not wait for the wave's outstanding LDS operations), as the
//! interpreter models them (docs/split-barriers.md).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::ir::effects::effects;
use crate::ir::*;

/// Rounds of a loop's fixpoint before the analysis declines inside it.
const MAX_ROUNDS: usize = 16;

/// What may hold of one split id at a program point, joined over paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Window {
    /// Some path reaches here with no signal open.
    idle: bool,
    /// Some path's open window holds a shared access.
    dirty: bool,
    /// Some path's open window holds a sync op (another split op, a wait, a barrier).
    synced: bool,
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
        self.synced |= o.synced;
        self.signals.extend(o.signals.iter().copied());
    }

    /// Reached with a signal open on every path and no sync op in any window: a pair at two
    /// points (module doc), a `barrier` at the wait when no window holds a shared access.
    fn credited(&self) -> bool {
        !self.idle && !self.synced && !self.signals.is_empty()
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

/// The hand-written split pairs of a kernel as placement sees them (module doc).
#[derive(Clone, Debug, Default)]
pub struct SplitPairs {
    /// Every credited wait, with the signals that may open its window.
    pub waits: HashMap<Op, Vec<Op>>,
    /// The credited waits whose window may hold a shared access: a pair at two points, not a
    /// `barrier` at the wait.
    pub dirty: HashSet<Op>,
    /// Per leaf op reached while a window may be open: the signals that may be open there.
    open_at: HashMap<Op, BTreeSet<Op>>,
    /// Gaps `(region, g)` (before the region's `g`-th op, or its end) where a window may be
    /// open on some path: a new split pair there would nest (P0001).
    pub open_gaps: HashSet<(Region, usize)>,
}

impl SplitPairs {
    /// The kernel's hand-written split pairs (module doc). Empty for a kernel without split
    /// waits, and when a loop's fixpoint does not settle (nothing credited, no gap closed).
    pub fn of(k: &Kernel) -> SplitPairs {
        if !k
            .ops
            .iter()
            .any(|(_, o)| matches!(o.kind, OpKind::SplitWait(_)))
        {
            return SplitPairs::default();
        }
        let mut w = Walk {
            k,
            at_wait: HashMap::new(),
            open_at: HashMap::new(),
            open_gaps: HashSet::new(),
            declined: false,
        };
        w.region(k.body(), State::new());
        if w.declined {
            return SplitPairs::default();
        }
        let mut out = SplitPairs {
            open_at: w.open_at,
            open_gaps: w.open_gaps,
            ..Default::default()
        };
        for (op, win) in w.at_wait {
            if win.credited() {
                if win.dirty {
                    out.dirty.insert(op);
                }
                out.waits.insert(op, win.signals.into_iter().collect());
            }
        }
        out
    }

    /// Whether `op` may execute inside a window that credited wait `w` closes: some signal
    /// that may be open at `op` may open `w`'s window. An over-approximation of "on some
    /// path, a signal, then `op`, then `w`, with no split op of the id between", so a pair
    /// is credited for no hazard whose source may lie between its halves.
    pub fn in_window_of(&self, op: Op, w: Op) -> bool {
        let (Some(open), Some(sigs)) = (self.open_at.get(&op), self.waits.get(&w)) else {
            return false;
        };
        sigs.iter().any(|s| open.contains(s))
    }
}

/// The kernel's credited split waits, each with the signals that may open its window
/// (module doc), dirty windows included. Empty for a kernel without split waits.
pub fn credited_waits(k: &Kernel) -> HashMap<Op, Vec<Op>> {
    SplitPairs::of(k).waits
}

struct Walk<'a> {
    k: &'a Kernel,
    /// The state each wait was last reached with (the last visit is under the fixpoint).
    at_wait: HashMap<Op, Window>,
    /// [`SplitPairs::open_at`], joined over every visit.
    open_at: HashMap<Op, BTreeSet<Op>>,
    /// [`SplitPairs::open_gaps`], joined over every visit.
    open_gaps: HashSet<(Region, usize)>,
    /// A loop's fixpoint did not settle: nothing is credited.
    declined: bool,
}

impl Walk<'_> {
    fn region(&mut self, r: Region, mut s: State) -> State {
        let ops = self.k.region_ops(r);
        for (g, &op) in ops.iter().enumerate() {
            self.note_gap(r, g, &s);
            s = self.op(op, s);
        }
        self.note_gap(r, ops.len(), &s);
        s
    }

    fn note_gap(&mut self, r: Region, g: usize, s: &State) {
        if s.values().any(|w| !w.signals.is_empty()) {
            self.open_gaps.insert((r, g));
        }
    }

    fn op(&mut self, op: Op, mut s: State) -> State {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::SplitSignal(id) => {
                mark_all(&mut s, Mark::Sync);
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
                mark_all(&mut s, Mark::Sync);
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
                let open: BTreeSet<Op> = s.values().flat_map(|w| w.signals.iter().copied()).collect();
                if !open.is_empty() {
                    self.open_at.entry(op).or_default().extend(open);
                }
                let e = effects(k, op);
                if e.sync.is_some() {
                    mark_all(&mut s, Mark::Sync);
                } else if !e.shared.is_empty() {
                    mark_all(&mut s, Mark::Shared);
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

/// What an op inside a window makes of it.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Mark {
    /// A shared access: the pair is credited at two points only (module doc).
    Shared,
    /// A sync op: the pair is not credited.
    Sync,
}

/// Marks every open window.
fn mark_all(s: &mut State, m: Mark) {
    for w in s.values_mut() {
        if !w.signals.is_empty() {
            match m {
                Mark::Shared => w.dirty = true,
                Mark::Sync => w.synced = true,
            }
        }
    }
}
