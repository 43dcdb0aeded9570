//! What `sync` verifies of a kernel's own mbarrier protocol before it takes an `mbar_wait` as
//! ordering anything (docs/async.md, "What `sync` verifies of an mbarrier protocol").
//!
//! `sync` relies on a written `mbar_wait` in two places: the in-flight dataflow completes a
//! TMA load at a wait on its mbarrier slot (`analysis::inflight`), and a hand-written
//! cross-role handshake orders a producer's refills (`sync::handshake`). This module decides,
//! per wait op, whether that trust is justified:
//!
//! - **Trace.** Every thread's sequence of mbarrier events (init, arrive, expect_tx, TMA load,
//!   wait) is computed exactly: loop bounds, conditions, slots and parities must evaluate to
//!   constants per thread (thread ids, loop counters, iteration values, integer arithmetic).
//!   A scalar parameter with a declared range is enumerated over one value of each class the
//!   trace tells apart (the child module `mbar_quotients`: its trip counts; at most
//!   [`MAX_VALUES`] combinations); past that it is searched like one without a range (below),
//!   never worse than no range; anything else (a loaded value, a `while` around an mbarrier
//!   op) leaves the kernel's waits *not decided*. Each event gets a key: program order, except that the two
//!   arms of a role branch (`if in_group @g`) are aligned by the iteration of their first loop
//!   (the producer's iteration `i` before the consumers' iteration `i`), which is how `sync`
//!   pairs the roles' pipeline loops.
//! - **Alignment.** Where some wait fails the parity check under those keys, the arms'
//!   iterations are re-keyed: counted over the arm's leaf loops (those holding mbarrier ops
//!   with no such loop inside: a persistent kernel's k-steps over all its tiles), the first arm's shifted by
//!   a skew `d` in 0, −1, 1 … ±[`MAX_SKEW`]; the first key order under which every wait
//!   passes is used for the whole verdict (a skewed producer, J1; a prologue loop, J1b). Any
//!   one order monotone in program order in which an iteration's events keep one position
//!   makes `sync::handshake_chain`'s argument hold, so this is a search, not an assumption;
//!   with none, the first-loop verdict (its E0306) stands.
//!   If no shift passes, *strided* keys are tried (ping-pong consumers, K10): one arm's
//!   counted iteration `c` of thread class `t` keyed as `m·c + r(t)`, `m` in 2..=[`MAX_STRIDE`],
//!   offsets `r(t) < m` per class of that arm (at most [`MAX_OFFSETS`] assignments).
//!   Role branches are those of `analysis::role_split` (`in_group`, or a thread-id compare
//!   with the same threads: K3).
//! - **Rounds.** A slot initialised once with count `n`, on which `A` threads arrive, each
//!   the same number of times: each thread's `j`-th arrival belongs to round `j / (n / A)`.
//!   `n` not a multiple of `A` with `n < A` is *wrong* (a phase completes before every thread
//!   has arrived); other shapes are not decided. A TMA load belongs to the round of its
//!   thread's latest `tx` event on the slot; per round the expected bytes must equal the
//!   loads' bytes. Every event of round `r >= 1` must happen after phase `r - 1` completed
//!   (no overtaking): the thread waited for it, or waited for a phase one of whose events
//!   happened after a wait of its own thread for it (two steps of happens-before).
//!   Where the first round `r` whose bytes differ *expects more* than its loads write, no
//!   event overtakes and only arrivals expect bytes (`mbar_arrive ... tx`, no `expect_tx`),
//!   phase `r` never completes: its arrivals bring exactly its expected bytes, its loads land
//!   in it (issued after phase `r − 1` completed, and it cannot complete without them), and a
//!   later round's loads are issued only after it completed. A wait that guarantees phase
//!   `r` or later can then never return: E0306 (s38's N4, a `tx` arrival whose copy was
//!   deleted); any other byte mismatch leaves the slot's waits not decided (W0318).
//! - **Waits.** With phases completing in round order, a thread's waits on one slot guarantee
//!   `g`: starting from `g = -1` (a fresh mbarrier counts its preceding phase as complete), a
//!   wait whose parity differs from `g`'s advances `g` by one, one whose parity equals it
//!   guarantees nothing new (it may return at once). A wait is *verified* when every
//!   execution guarantees at least the latest round of the slot's arrivals and loads keyed
//!   before it; *wrong* (E0306) when some execution guarantees less on a slot whose rounds
//!   are established; *not decided* (W0318) otherwise.
//! - **Orders for the handshake checks.** With the verdict come the (release, wait) pairs
//!   keyed one before the other on every element ([`Verdict::keyed_before`]: first fills for
//!   `sync::handshake_chain`) and the TMA loads whose copies of one slot lie in distinct
//!   established rounds ([`Verdict::serial_loads`]: never two in flight at once), and the
//!   accesses released late, by an arrival in a later iteration ([`Verdict::delayed`], the
//!   child module `mbar_delayed`: the trace then also records the executions of the role
//!   arms' slotted accesses and of their queues' commits and waits).
//! - **Thread classes.** One thread per class of `analysis::mbar_classes` is traced (threads
//!   whose thread-dependent terms agree trace alike); its events count for the class's size
//!   where threads are counted (arriving threads, a round's bytes).
//! - **Tile loops** whose bounds read `bid` (a persistent kernel's) run a trip count with
//!   their counter unknown (the child module `mbar_loop_trips`: one unknown per class of equal
//!   trip-count forms): every trip count where the leaves' declared ranges and grid bound it
//!   (exact), else searched (0 to [`LOOP_TRIPS`], further past a constant that a carried value
//!   is compared with, at most [`LOOP_TRIPS_MAX`]), unless the kernel with
//!   each tile loop flattened into its pipeline loop (the child module `mbar_flatten`) is
//!   verified for every trip count: then that verdict is every tile count's (W0334 where the
//!   carried counter's `i32` range bounds it).
//! - **Parameters without a range** (or with one of more classes than the cap, or whose
//!   enumeration's trace failed: only the values within it, and its ends) are searched (0 to
//!   [`SEARCHED`], the values giving trip counts 0 to [`TRIPS`] where the parameter is
//!   divided into one, and the default) for a counterexample (E0306); without one, the waits
//!   are verified for every value where the every-trip-count argument's premises hold (the
//!   child modules `mbar_trips`, and `mbar_counters` for iteration values that are counters
//!   read through residues; its base cases are traced also below a declared range), and
//!   otherwise *taken as written* with W0318 naming the premise that fails, not in
//!   [`Verdict::unverified`] (docs/async.md says why).
//!
//! - **Long constant loops** (the child module `mbar_period`): where the loops holding
//!   mbarrier ops run a constant `C` of more than [`LONG_LOOP`] trips and read their counters
//!   only through residues, a clean verdict at a short trip bound of `C`'s residue modulo the
//!   iteration state's period is `C`'s verdict; otherwise the full trace answers.
//!
//! Exact: no sampling; the trace enumerates every thread class, iteration and parameter value.
//! Complexity: O(parameter values × (threads × thread-dependent terms + classes × executed ops
//! of the regions holding mbarrier ops)), the trace capped at [`MAX_STEPS`]
//! (beyond: not decided; a loop of more trips than the steps left is cut on entry). Independent of `src/check` (the checker keeps its own mbarrier
//! semantics and proof).

use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use crate::diag::{DiagKind, Diagnostic};
use crate::ir::text::op_label;
use crate::ir::*;

#[path = "mbar_period.rs"]
mod period;
#[path = "mbar_rounds.rs"]
mod rounds;
#[path = "mbar_counters.rs"]
mod counters;
#[path = "mbar_trips.rs"]
mod trips;
#[path = "mbar_loop_trips.rs"]
mod loop_trips;
#[path = "mbar_flatten.rs"]
mod flatten;
#[path = "mbar_delayed.rs"]
mod delayed;
#[path = "mbar_quotients.rs"]
mod quotients;

/// Ops executed over all threads (and parameter values) before the trace gives up (not
/// decided).
pub const MAX_STEPS: usize = 1 << 24;

/// The verdict on a kernel's mbarrier waits.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// Waits `sync` must not take as completing a copy or ordering a handshake.
    pub unverified: HashSet<Op>,
    /// E0306: waits shown not to wait for the phase they are taken to complete.
    pub errors: Vec<Diagnostic>,
    /// W0318: waits whose protocol was not decided, with the reason.
    pub warnings: Vec<Diagnostic>,
    /// Pairs (release, wait) of a load or arrival and a wait in another role arm such that,
    /// on every mbarrier element both touch (at least one), every execution of the release is
    /// keyed before every execution of the wait under the alignment used for the verdict
    /// (`Protocol::keyed_before`); for every parameter value enumerated; where a parameter
    /// was only searched, kept only when the every-trip-count argument holds, for ops outside
    /// the loops it pumps (`outside_loops`), else empty. `sync::handshake_chain` reads it
    /// (whole orders and first fills).
    pub keyed_before: HashSet<(Op, Op)>,
    /// TMA loads whose copies of one buffer slot are ordered among themselves
    /// (`Protocol::serial_loads`), with the (buffer, mbarrier array) that ties them: two
    /// loads with the same pair never have two copies of one slot in flight at once. For
    /// every parameter value enumerated; empty when a parameter was only searched.
    pub serial_loads: HashMap<Op, (Buffer, Buffer)>,
    /// Accesses released late (the child module `mbar_delayed`): (access op, its buffer,
    /// mbarrier array `E`) such that every execution of the access, on slot `e`, is followed in
    /// its thread, after its completion, by an arrival on `E[e]` (CUTLASS's release of the
    /// previous stage), with the wait ops keyed between such an execution and its arrival on
    /// `E[e]` (none of them may acquire what the release orders). For every parameter value
    /// enumerated (the waits joined); empty when a parameter was only searched, for a
    /// flattened or periodic verdict, and where the trace did not record the access.
    /// `sync::handshake_chain` reads it.
    pub delayed: LateReleases,
}

/// Accesses released late ([`Verdict::delayed`]): (access, its buffer, mbarrier array) to the
/// waits keyed between an execution and its release.
pub type LateReleases = HashMap<(Op, Buffer, Buffer), HashSet<Op>>;

/// The protocol's per-slot tables: hashed often (a third of `sync` on Triton's persistent
/// warp-specialized matmul went to SipHash), keyed by small ids.
type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// An mbarrier element: its buffer and flat index.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Slot(Buffer, i64);

#[derive(Copy, Clone, Debug)]
enum Ev {
    Init(u32),
    Arrive(Option<u32>),
    ExpectTx(u32),
    Load(u32),
    Wait(i64),
}

#[derive(Clone, Debug)]
struct Event {
    thread: u32,
    seq: usize,
    key: Vec<i64>,
    /// Where the event lies in a role branch's arm, for the counted keys ([`ArmPos`]).
    arm: Option<ArmPos>,
    op: Op,
    slot: Slot,
    ev: Ev,
}

/// An event's place in an arm of a role branch, counted over the arm's leaf loops: the key
/// position of the arm's iteration, the number `c` of leaf-loop iterations before the event
/// (every loop of the arm holding mbarrier ops and no such loop, in program order), and
/// whether the event lies in iteration `c` itself (else between them: after `c`).
#[derive(Copy, Clone, Debug)]
struct ArmPos {
    at: usize,
    count: i64,
    in_loop: bool,
}

/// The alignment state of the role branch being traced.
#[derive(Copy, Clone, Debug)]
struct Align {
    /// Key position of the arm's iteration (the arm index follows it).
    at: usize,
    /// An arm-level loop is running.
    running: bool,
    /// A counted loop (a leaf loop: module doc, *Alignment*) is running.
    in_leaf: bool,
    /// The arm's first loop has run (the default keys align only that one).
    ran: bool,
    /// Arm-level iterations completed or started: the counted index of the current one.
    count: i64,
}

/// Verifies every `mbar_wait` of `k` (warp width `warp`); a kernel without one gets an empty
/// verdict. Scalar parameters the trace needs are enumerated over their declared ranges (one
/// value per class the trace tells apart, at most [`MAX_VALUES`] combinations); others are
/// searched (module doc, *Parameters without a range*).
pub fn verify(k: &Kernel, warp: u32) -> Verdict {
    verify_in(k, warp, false).0
}

/// Whether the verdict holds for every value of the one parameter without a declared range
/// (the every-trip-count argument succeeded), and then, on a flattened kernel (`flat`), the
/// most trips for which it does (`Some(n)`: the counter leaves `i32` beyond `n`) and the
/// loops the argument pumps (those whose trip count the parameter gives).
type Every = Option<(Option<i64>, HashSet<Op>)>;

/// [`verify`]; `flat`: `k` is a kernel whose tile loops were flattened (`mbar_flatten`): the
/// arms are aligned by counted keys only, the long-loop shortcut and the flattening are not
/// tried again, and a counter's trip bound is the one that keeps it within `i32`.
fn verify_in(k: &Kernel, warp: u32, flat: bool) -> (Verdict, Every) {
    let waits = wait_ops(k);
    if waits.is_empty() {
        return (Verdict::default(), None);
    }
    // Long constant loops: a clean verdict read from a shorter trace (`mbar_period`); any
    // other outcome is the full trace's.
    if !flat && let Ok(v) = periodic(k, warp, period::LONG, &waits) {
        return (v, None);
    }
    let mut s = Search { k, warp, flat, waits, params: Vec::new(), enumerated: Vec::new(), retried: Vec::new(), sampled: Vec::new(), reduced: Vec::new(), classes: OnceCell::new() };
    loop {
        let step = match verify_all(k, warp, &s.params, &s.waits, flat) {
            Ok(v) => return s.finish(v),
            Err(Missing::Param(p)) if loop_trips::is_trip(k, p) => s.tile_loop(p),
            Err(Missing::Param(p)) => s.param(p),
            Err(Missing::Other(_)) if !s.enumerated.is_empty() => {
                let p = s.enumerated.pop().expect("an enumerated parameter");
                s.search_instead(p)
            }
            Err(Missing::Other((at, why))) => {
                let why = if s.waits.contains(&at) { why } else { format!("{why} (at {})", op_label(k, at)) };
                ControlFlow::Break((not_decided(k, &s.waits, &why), None))
            }
        };
        if let ControlFlow::Break(out) = step {
            return out;
        }
    }
}

/// The `mbar_wait` ops of `k`, in walk order.
fn wait_ops(k: &Kernel) -> Vec<Op> {
    let mut waits = Vec::new();
    k.walk(|o| {
        if matches!(k.ops[o].kind, OpKind::MbarWait { .. }) {
            waits.push(o);
        }
    });
    waits
}

/// The state of [`verify_in`]'s search over the parameters the trace needs: each missing
/// parameter gets its values (enumerated, or searched) and the trace runs again.
struct Search<'k> {
    k: &'k Kernel,
    warp: u32,
    flat: bool,
    waits: Vec<Op>,
    /// The parameters given values so far, with their values.
    params: Vec<(Value, Vec<i64>)>,
    /// Parameters with a declared range enumerated one value per class (`mbar_quotients`).
    enumerated: Vec<Value>,
    /// Those whose enumeration failed (a trace too long) and which were searched instead.
    retried: Vec<Value>,
    /// Parameters without a declared range (and tile loops' trip counts beyond their
    /// bound), only searched for a counterexample.
    sampled: Vec<Value>,
    /// Parameters without a range searched at their default only, or fewer trip counts (the
    /// combinations cap).
    reduced: Vec<Value>,
    /// The trip-count classes of the loops around mbarrier ops, computed once on first use.
    classes: OnceCell<loop_trips::Classes>,
}

impl Search<'_> {
    fn classes(&self) -> &loop_trips::Classes {
        self.classes.get_or_init(|| trip_classes(self.k))
    }

    /// The verdict of the values given: exact where every parameter was enumerated, else
    /// extended to every value by the every-trip-count argument, or taken as written.
    fn finish(&self, mut v: Verdict) -> (Verdict, Every) {
        if self.sampled.is_empty() {
            return (v, None);
        }
        let k = self.k;
        let mut keyed = std::mem::take(&mut v.keyed_before);
        v.serial_loads.clear();
        v.delayed.clear();
        let every = self.outside_range(&mut keyed).and_then(|params| every_trip(k, self.warp, &params, &self.sampled, &v, self.flat));
        match every {
            Ok((pumped, clip)) => {
                keyed.retain(|&(l, w)| outside_loops(k, &pumped, l) && outside_loops(k, &pumped, w));
                v.keyed_before = keyed;
                (v, Some((clip, pumped)))
            }
            Err(why) => (self.taken_as_written(v, &why), None),
        }
    }

    /// The values the every-trip-count argument reads: those searched and, for one parameter
    /// with a declared range, the trip counts 0 to [`TRIPS`] outside it, traced here. The
    /// argument starts from them though no caller runs them, so their verdict must be clean
    /// and the orders `keyed` must hold at them too; a wait wrong there is no counterexample
    /// (the range excludes it), only a premise that fails.
    fn outside_range(&self, keyed: &mut HashSet<(Op, Op)>) -> Result<Vec<(Value, Vec<i64>)>, String> {
        let k = self.k;
        let [(p, vals)] = &self.params[..] else {
            return Ok(self.params.clone());
        };
        let mut base: Vec<i64> = trip_values(k, *p).into_iter().filter(|x| !vals.contains(x)).collect();
        base.sort_unstable();
        base.dedup();
        if k.param_ranges.get(*p).is_none() || base.is_empty() {
            return Ok(self.params.clone());
        }
        let name = loop_trips::name(k, *p);
        let at = format!("trip counts 0 to {TRIPS}, where the argument starts, lie partly outside the declared range of {name}");
        let out = verify_all(k, self.warp, &[(*p, base.clone())], &self.waits, self.flat).map_err(|_| format!("{at}, and the trace fails there"))?;
        if !(out.errors.is_empty() && out.unverified.is_empty()) {
            return Err(format!("{at}, and a wait is not verified there"));
        }
        keyed.retain(|x| out.keyed_before.contains(x));
        Ok(vec![(*p, vals.iter().chain(&base).copied().collect())])
    }

    /// The trace needs the trip count of the tile loops of representative `p`: the verdict
    /// of the flattened kernel where it holds, else every trip count where the leaves'
    /// ranges bound them, else a search of the trip counts that fit the combinations cap.
    fn tile_loop(&mut self, p: Value) -> ControlFlow<(Verdict, Every)> {
        let k = self.k;
        // A tile loop: flattened into its pipeline loop where that is exact.
        if !self.flat
            && self.params.is_empty()
            && let Ok(v) = flat_verdict(k, self.warp, p, &self.waits)
        {
            return ControlFlow::Break((v, None));
        }
        // Trip counts bounded by the leaves' declared ranges and grid: every one is traced,
        // and the verdict is exact (hostile M8 with `%tiles in [0, 24]`).
        let cls = self.classes();
        if let Some(&most) = cls.most.get(&p)
            && combos(&self.params) * (most + 1) <= MAX_VALUES
        {
            self.params.push((p, (0..=most).collect()));
            return ControlFlow::Continue(());
        }
        // Each tile loop multiplies the search (s37's M11: 5^K traces for K loops): past the
        // combinations cap a loop's trip counts are searched from 0 up to what fits, and the
        // W0318 says so. A carried value compared with a constant extends the search past it
        // (hostile M8).
        let to = loop_trips::search_to(k, p, &cls.rep, LOOP_TRIPS, LOOP_TRIPS_MAX);
        let fit = (MAX_VALUES / combos(&self.params) - 1).clamp(0, to);
        // A loop searched at 0 trips only would never run its body: not decided.
        if fit < 1 {
            let why = format!(
                "it depends on {} after other searched values: even one trip of that loop would exceed the {MAX_VALUES} combinations smemsync enumerates",
                loop_trips::name(k, p)
            );
            return ControlFlow::Break((not_decided(k, &self.waits, &why), None));
        }
        if fit < to {
            self.reduced.push(p);
        }
        self.sampled.push(p);
        self.params.push((p, (0..=fit).collect()));
        ControlFlow::Continue(())
    }

    /// The trace needs scalar parameter `p`: one value per class of its declared range that
    /// the trace tells apart (`mbar_quotients`: the values of its trip counts), or, without a
    /// range or with more classes than the combinations cap allows, the values searched for a
    /// counterexample (module doc, *Outcomes*): a declared range never answers worse than
    /// none (hostile P3).
    fn param(&mut self, p: Value) -> ControlFlow<(Verdict, Every)> {
        let range = *self.k.param_ranges.get(p);
        let cap = (MAX_VALUES / combos(&self.params)).max(0) as usize;
        let reps = range.and_then(|(lo, hi)| quotients::representatives(self.k, p, (lo as i64, hi as i64), cap));
        let vals = match reps {
            Some(reps) if reps.len() <= cap => {
                self.enumerated.push(p);
                reps
            }
            _ => self.searched(p, range),
        };
        self.params.push((p, vals));
        ControlFlow::Continue(())
    }

    /// The trace failed with ranged parameter `p` enumerated (too long a trace, say): `p` is
    /// searched instead, as without a range.
    fn search_instead(&mut self, p: Value) -> ControlFlow<(Verdict, Every)> {
        self.params.retain(|(q, _)| *q != p);
        self.retried.push(p);
        let vals = self.searched(p, *self.k.param_ranges.get(p));
        self.params.push((p, vals));
        ControlFlow::Continue(())
    }

    /// The verdict when parameters without a declared range (`sampled`) were only searched: the
    /// errors found stand (a counterexample is exact); a wait with none is not verified for
    /// every value, and is taken as written with W0318 saying so (docs/async.md: refusing every
    /// kernel with a symbolic trip count, Triton's among them, is not what we chose).
    fn taken_as_written(&self, mut v: Verdict, not_all: &str) -> Verdict {
        let (k, sampled, reduced) = (self.k, &self.sampled[..], &self.reduced[..]);
        let why = match sampled.iter().any(|&p| loop_trips::is_trip(k, p)) {
            // A parameter searched at its default only must not read as searched (s37's M12).
            _ if !reduced.is_empty() => {
                let names = |ps: &[Value]| ps.iter().map(|&p| loop_trips::name(k, p)).collect::<Vec<_>>().join(", ");
                format!(
                    "it depends on {}; {} not searched in full (at its default only, or fewer trip counts: more values would exceed the {MAX_VALUES} combinations smemsync enumerates), no combination searched shows it wrong, and it is taken as written (not shown for every value: {not_all})",
                    names(sampled),
                    names(reduced)
                )
            }
            false => {
                let names: Vec<String> = sampled.iter().map(|&p| self.not_enumerated(p)).collect();
                let trips = match sampled.iter().any(|&p| !trip_values(k, p).is_empty()) {
                    true => format!(", those giving trip counts 0 to {TRIPS} where it is divided into one,"),
                    false => String::new(),
                };
                let list = search_list(sampled.iter().any(|&p| k.param_ranges.get(p).is_some()), &trips);
                format!(
                    "it depends on {}; no value searched ({list}) shows it wrong, and it is taken as written (not shown for every trip count: {not_all})",
                    names.join(" and ")
                )
            }
            true => format!(
                "it depends on {}; no combination searched shows it wrong, and it is taken as written (not shown for every trip count: {not_all})",
                sampled.iter().map(|&p| self.searched_values(p)).collect::<Vec<_>>().join(" and ")
            ),
        };
        let wrong: Vec<_> = v.errors.iter().map(at).collect();
        // Advice only where following it cannot make the answer worse (hostile P3): a declared
        // range is enumerated, or searched like this one.
        let note = match sampled.iter().all(|&p| loop_trips::is_trip(k, p)) {
            true => "declare the ranges of the parameters the tile loop's bounds read (and the grid, `grid(...)`) to have every trip count checked; `smemsync check` proves the protocol for every trip count where it can",
            false if sampled.iter().any(|&p| k.param_ranges.get(p).is_some()) => "`smemsync check` proves the protocol for every trip count where it can",
            false => "declare the parameter's range (`%n: i32 in [lo, hi]`) to have every value checked where the values the protocol tells apart (its trip counts) are few enough to enumerate; a wider range is searched as now; `smemsync check` proves the protocol for every trip count where it can",
        };
        for &w in &self.waits {
            let here = Some(k.span(w));
            if v.unverified.contains(&w) || wrong.contains(&here) {
                continue;
            }
            v.warnings.push(
                Diagnostic::warning(
                    DiagKind::Finding,
                    "W0318",
                    format!("`sync` did not verify {}: {why}", op_label(k, w)),
                )
                .with_label(k.span(w), "taken as ordering what it waits for, unverified")
                .with_note(note),
            );
        }
        v
    }

    /// What was searched of `p`: a parameter without a declared range (0 to [`SEARCHED`], the
    /// trip-count values, its default) or a loop's trip count (0 to the most in `params`).
    fn searched_values(&self, p: Value) -> String {
        let k = self.k;
        if loop_trips::is_trip(k, p) {
            let name = loop_trips::name(k, p);
            let to = self.params.iter().find(|(q, _)| *q == p).and_then(|(_, v)| v.iter().max().copied()).unwrap_or(0);
            let exact = match self.classes().exact.contains(&p) {
                true => "",
                false => ", its loops taken to run equal trips: their bounds agree where their `i32` arithmetic does not wrap",
            };
            return format!("{name}, whose bounds read the block id (searched: 0 to {to} trips{exact})");
        }
        let trips = match trip_values(k, p).is_empty() {
            false => format!(", those giving trip counts 0 to {TRIPS} where it is divided into one,"),
            true => String::new(),
        };
        let list = search_list(k.param_ranges.get(p).is_some(), &trips);
        format!("{} (searched: {list})", self.not_enumerated(p))
    }

    /// Why parameter `p` was searched, not enumerated: it has no declared range, or one with
    /// more classes of values than fit the combinations cap (`mbar_quotients`).
    fn not_enumerated(&self, p: Value) -> String {
        let k = self.k;
        let name = loop_trips::name(k, p);
        let Some((lo, hi)) = *k.param_ranges.get(p) else {
            return format!("{name}, which has no declared range to enumerate");
        };
        let (lo, hi) = (lo as i64, hi as i64);
        if self.retried.contains(&p) {
            return format!("{name}, whose declared range [{lo}, {hi}] could not be traced at every value (the trace failed), so it was searched");
        }
        match quotients::representatives(k, p, (lo, hi), MAX_VALUES as usize) {
            Some(_) => format!(
                "{name}, whose declared range [{lo}, {hi}] gives more trip counts (values the protocol tells apart) than fit in the {MAX_VALUES} value combinations smemsync enumerates"
            ),
            None => format!(
                "{name}, whose declared range [{lo}, {hi}] has {} values, more than fit in the {MAX_VALUES} value combinations smemsync enumerates (it is used other than through trip counts, so each value counts)",
                hi - lo + 1
            ),
        }
    }

    /// The values searched of parameter `p` without a declared range, or with one of more
    /// classes than the cap (`range`): 0 to [`SEARCHED`], those giving the trip counts 0 to
    /// [`TRIPS`], and its default, within the range, and the range's ends; its default only
    /// past the combinations cap.
    fn searched(&mut self, p: Value, range: Option<(i32, i32)>) -> Vec<i64> {
        let k = self.k;
        let (lo, hi) = range.map_or((0, i64::MAX), |(l, h)| (l as i64, h as i64));
        let mut v: Vec<i64> = (0..=SEARCHED).chain(trip_values(k, p)).filter(|x| (lo..=hi).contains(x)).collect();
        v.extend(range.map(|_| [lo, hi]).into_iter().flatten());
        v.push(k.run_default(p));
        v.sort_unstable();
        v.dedup();
        if combos(&self.params) * v.len() as i64 > MAX_VALUES {
            v = vec![k.run_default(p)];
            self.reduced.push(p);
        }
        self.sampled.push(p);
        v
    }
}

/// The values [`Search::searched`] tries, for a message: with a declared range (`ranged`),
/// only those within it, and its ends; `trips` names the trip-count values where there are.
fn search_list(ranged: bool, trips: &str) -> String {
    match ranged {
        true => format!("the declared range's ends and, within it, 0 to {SEARCHED}{trips} and the default"),
        false => format!("0 to {SEARCHED}{trips} and the default"),
    }
}

/// Values searched for a counterexample of a parameter without a declared range: 0 to this,
/// and its default.
pub const SEARCHED: i64 = 16;

/// Trip counts searched for a loop whose bounds are an unknown block-uniform expression
/// (`loop_trips`): 0 to this, or further (`LOOP_TRIPS_MAX`) where one of its iteration values
/// is compared with a constant (`loop_trips::search_to`).
pub const LOOP_TRIPS: i64 = 4;

/// The most trip counts searched for such a loop without a bound (`LOOP_TRIPS`).
pub const LOOP_TRIPS_MAX: i64 = 16;

/// The trip-count classes of the loops around mbarrier ops (`loop_trips`).
fn trip_classes(k: &Kernel) -> loop_trips::Classes {
    let mut traced = HashSet::new();
    mark(k, k.body(), &mut traced);
    let loops = (traced.iter().copied()).filter(|&o| matches!(k.ops[o].kind, OpKind::For { .. })).collect();
    loop_trips::classes(k, &loops)
}

/// Trip counts searched for a parameter without a declared range that a trip count divides
/// (`(%K + c) div B`): 0 to this.
pub const TRIPS: i64 = 32;

/// Values of parameter `p` that give every trip count 0 to [`TRIPS`] wherever the kernel
/// divides it by a positive constant, `(p + c) div B` (Triton's `cdiv(K, BLOCK_K)`): for
/// trip count `t`, the largest such value, `t·B − c + B − 1` (within `i32`).
fn trip_values(k: &Kernel, p: Value) -> Vec<i64> {
    let mut out = Vec::new();
    k.walk(|o| {
        if let Some((c, b)) = div_form(k, p, o).or_else(|| strided_form(k, p, o)) {
            let vals = (0..=TRIPS).map(|t| t * b - c + b - 1);
            out.extend(vals.filter(|v| (i32::MIN as i64..=i32::MAX as i64).contains(v)));
        }
    });
    out
}

/// `(c, B)` when op `o` is a loop `for n = lo to p step B` (constant `lo ≥ 0`, `B ≥ 2`):
/// its trip count is `(p − lo + B − 1) div B`, the form `(p + c) div B` with
/// `c = B − 1 − lo` (Triton's `range(0, n_ctx, BLOCK)`).
fn strided_form(k: &Kernel, p: Value, o: Op) -> Option<(i64, i64)> {
    let OpKind::For { lo, hi: Operand::Value(h), step, .. } = &k.ops[o].kind else {
        return None;
    };
    let lo = k.const_i32(*lo).filter(|&l| l >= 0)?;
    let b = k.const_i32(*step).filter(|&b| b >= 2)?;
    (*h == p).then_some((b - 1 - lo, b))
}

/// `(c, B)` when op `o` is `(p + c) div B` with `B > 0` (or `p div B`, `(c + p) div B`,
/// `(p − c) div B`): the trip count the kernel derives from parameter `p`.
fn div_form(k: &Kernel, p: Value, o: Op) -> Option<(i64, i64)> {
    let OpKind::Binary(BinOp::Div, Operand::Value(x), b) = &k.ops[o].kind else {
        return None;
    };
    let b = k.const_i32(*b).filter(|&b| b > 0)?;
    if *x == p {
        return Some((0, b));
    }
    let ValueDef::Result(d, _) = k.values[*x].def else { return None };
    let c = match &k.ops[d].kind {
        OpKind::Binary(BinOp::Add, Operand::Value(y), c) if *y == p => k.const_i32(*c),
        OpKind::Binary(BinOp::Add, c, Operand::Value(y)) if *y == p => k.const_i32(*c),
        OpKind::Binary(BinOp::Sub, Operand::Value(y), c) if *y == p => k.const_i32(*c).map(|c| -c),
        _ => None,
    }?;
    Some((c, b))
}



/// Whether op `o` lies outside every loop of `pumped`. The every-trip-count argument keeps
/// the (release, wait) pairs keyed one before the other at every value searched only where
/// both lie outside the loops it pumps: the trace of `T + P` inserts a block of `P`
/// iterations of every pumped loop and shifts every later event's count by `P` alike, so
/// the order of two events outside those loops is the same for every trip count.
fn outside_loops(k: &Kernel, pumped: &HashSet<Op>, o: Op) -> bool {
    !k.parents().ancestors(o).iter().any(|a| pumped.contains(a))
}

/// Whether the clean search `v` of one parameter without a declared range (`sampled`, its
/// values in `params`) holds for every value: the every-trip-count argument
/// (`mbar_trips`), with the loops it pumps and, on a flattened kernel, the most trips for
/// which it holds (the counter's `i32` bound); `Err` names the premise that fails.
fn every_trip(k: &Kernel, warp: u32, params: &[(Value, Vec<i64>)], sampled: &[Value], v: &Verdict, flat: bool) -> Result<(HashSet<Op>, Option<i64>), String> {
    if !v.errors.is_empty() || !v.unverified.is_empty() {
        return Err("a wait is shown wrong or not decided for some value".into());
    }
    let ([(p, vals)], [q]) = (params, sampled) else {
        return Err("the trace needs more than one parameter".into());
    };
    debug_assert_eq!(p, q);
    if loop_trips::is_trip(k, *p) {
        return Err("a tile loop's trip count is covered for every value only by flattening the tile loop into its pipeline loop, which does not apply here".into());
    }
    let mut traced = HashSet::new();
    mark(k, k.body(), &mut traced);
    let sh = trips::shape(k, *p, &traced)?;
    if flat && sh.guards {
        return Err("a flattened pipeline loop's trip count is compared (a per-tile guard)".into());
    }
    let Some((c, b)) = sh.form else {
        return Err(format!("premise (1) fails: %{} gives no trip count `(%{0} + c) div B` of a loop", k.value_names.get(*p)));
    };
    let kv = |t: i64| t * b - c + b - 1;
    if (0..=TRIPS).any(|t| !vals.contains(&kv(t))) {
        return Err(format!("not every trip count 0 to {TRIPS} was searched"));
    }
    let assign = HashMap::from([(*p, kv(TRIPS))]);
    let Ok(t) = trace(k, warp, &assign, MAX_STEPS, sh.loops.keys().copied().collect(), HashMap::new(), false) else {
        return Err(format!("the trace at trip count {TRIPS} failed"));
    };
    // Iteration values that never repeat may be counters read through residues.
    let mut clip = None;
    let (t0, period) = match trips::period(k, &sh, &t.iters, &Default::default()) {
        Ok(x) => x,
        Err(e) => match counters::residues(k, &sh, &traced, &t.iters, flat)? {
            Some((proj, c)) => {
                clip = c;
                trips::period(k, &sh, &t.iters, &proj)?
            }
            None => return Err(e),
        },
    };
    let pr = Protocol::new(k, t.events, t.weight);
    trips::blocks(&pr, &sh, &t.iters, t0, period)?;
    Ok((sh.loops.keys().copied().collect(), clip))
}

/// The verdict of a kernel with tile loops of representative `rep` (a persistent kernel),
/// read from its flattened kernel (`mbar_flatten`): only a clean verdict that the
/// every-trip-count argument extends to every trip count of the flattened loop is taken
/// (every `t·N` is one); with the counter's `i32` bound, W0334 on each wait says it. `Err`
/// declines, and the search answers as before.
fn flat_verdict(k: &Kernel, warp: u32, rep: Value, waits: &[Op]) -> Result<Verdict, String> {
    let mut traced = HashSet::new();
    mark(k, k.body(), &mut traced);
    let (k2, pipelines) = flatten::flatten(k, rep, &traced)?;
    let (mut v, every) = verify_in(&k2, warp, true);
    let Some((clip, pumped)) = every else {
        return Err("the flattened kernel is not verified for every trip count".into());
    };
    // The flattened run at `T = t·N` stands for `t` tiles of `N` k-steps only where the
    // parameter gives the pipeline loops' trip count and no other loop's (a loop outside the
    // tile loops up to it would run `t·N` trips here, `N` in the kernel).
    if pumped != pipelines {
        return Err("a loop outside the tile loops runs up to the flattened trip count".into());
    }
    if !(v.errors.is_empty() && v.warnings.is_empty() && v.unverified.is_empty()) {
        return Err("the flattened kernel's verdict is not clean".into());
    }
    v.keyed_before.clear();
    v.serial_loads.clear();
    v.delayed.clear();
    if let Some(n) = clip {
        let tile = loop_trips::name(k, rep);
        for &w in waits {
            v.warnings.push(
                Diagnostic::warning(
                    DiagKind::Finding,
                    "W0334",
                    format!("`sync` verified {} for every value of {tile} and every trip count of its pipeline loop with at most {n} pipeline steps per block in all: beyond, the pipeline counter carried from tile to tile leaves `i32` and wraps", op_label(k, w)),
                )
                .with_label(k.span(w), "taken as ordering what it waits for")
                .with_note("smemsync holds integers in 32 bits (a TTGIR `i64` counter too, W1104); the bound is 2^31 pipeline steps of one block, far beyond a real launch"),
            );
        }
    }
    Ok(v)
}

/// The verdict of a kernel whose mbarrier ops lie in long constant loops (more than `long`
/// trips), read from the trace of a shorter trip count of the same residue modulo the loops'
/// period (the child module `mbar_period`); `Err` says why it declines (no long loop, a
/// premise that fails, a verdict that is not clean), and then only [`verify`]'s full trace
/// answers. [`verify`] uses it with [`LONG_LOOP`]; a smaller `long` lets tests compare it
/// with the full trace at small trip counts.
pub fn verify_periodic(k: &Kernel, warp: u32, long: i64) -> Result<Verdict, String> {
    periodic(k, warp, long.max(1), &wait_ops(k))
}

/// The trip count above which [`verify`] reads a constant loop's verdict from a shorter trace.
pub const LONG_LOOP: i64 = period::LONG;

fn periodic(k: &Kernel, warp: u32, long: i64, waits: &[Op]) -> Result<Verdict, String> {
    let mut traced = HashSet::new();
    mark(k, k.body(), &mut traced);
    let Some((c, loops)) = period::long_loops(k, &traced, long)? else {
        return Err("no long constant loop".into());
    };
    let m = period::modulus(k, c, &loops, &traced)?;
    let over = |hi: i64| loops.keys().map(|&o| (o, hi)).collect::<HashMap<Op, i64>>();
    let none = HashMap::new();
    let pumped = loops.keys().copied().collect();
    let t = trace(k, warp, &none, MAX_STEPS, pumped, over(long), false).map_err(|_| "the shortened trace failed".to_string())?;
    // Counters carried as `c + δ` never repeat: taken through their residues (premise 1, carried counters).
    let (i0, p) = match period::stride(&loops, &t.iters, long, m, &Default::default()) {
        Ok(x) => x,
        Err(e) => match counters::residues_upto(k, &trips::Shape::fixed(loops.clone()), &traced, &t.iters, Some(c as i128))? {
            Some((proj, _)) => period::stride(&loops, &t.iters, long, m, &proj)?,
            None => return Err(e),
        },
    };
    let t0 = loops.values().copied().max().unwrap_or(0) + i0 + p;
    if t0 + 2 * p - 1 > long {
        return Err(format!("the trip counts to check (to {}) exceed the {long} traced", t0 + 2 * p - 1));
    }
    let pr = Protocol::new(k, t.events, t.weight);
    trips::blocks(&pr, &trips::Shape::fixed(loops.clone()), &t.iters, t0, p)?;
    let short = t0 + (c - t0) % p;
    let t = trace(k, warp, &none, MAX_STEPS, HashSet::new(), over(short), false).map_err(|_| "the shortened trace failed".to_string())?;
    let pr = Protocol::new(k, t.events, t.weight);
    if !pr.parity_ok() {
        return Err("the default keys do not align the roles".into());
    }
    let v = pr.verdict(waits);
    match v.errors.is_empty() && v.warnings.is_empty() && v.unverified.is_empty() {
        true => Ok(v),
        false => Err(format!("the verdict at trip bound {short} is not clean")),
    }
}

/// Parameter value combinations enumerated at most.
pub const MAX_VALUES: i64 = 256;

fn combos(params: &[(Value, Vec<i64>)]) -> i64 {
    params.iter().map(|(_, v)| v.len() as i64).product()
}

/// Why the trace stopped: a parameter it needs, or anything else.
enum Missing {
    Param(Value),
    Other(Failure),
}

/// Every wait not decided, for reason `why`.
fn not_decided(k: &Kernel, waits: &[Op], why: &str) -> Verdict {
    let mut v = Verdict::default();
    for &w in waits {
        v.unverified.insert(w);
        v.warnings.push(undecided(k, w, why));
    }
    v
}

/// The verdicts for every combination of the values of `params`, joined: a wait is verified
/// when it is for every combination.
fn verify_all(k: &Kernel, warp: u32, params: &[(Value, Vec<i64>)], waits: &[Op], counted_only: bool) -> Result<Verdict, Missing> {
    let mut out = Verdict::default();
    let mut budget = MAX_STEPS;
    for c in 0..combos(params) {
        let mut assign = HashMap::new();
        let mut rest = c;
        for (p, vals) in params {
            assign.insert(*p, vals[(rest % vals.len() as i64) as usize]);
            rest /= vals.len() as i64;
        }
        let t = trace(k, warp, &assign, budget, HashSet::new(), HashMap::new(), true)?;
        budget -= t.steps;
        let (p, keys) = aligned(k, t.events, t.weight, counted_only);
        let marks: Vec<delayed::Mark> = t.marks.into_iter().map(|m| keys.mark(m)).collect();
        let late = delayed::releases(k, &t.watch, &p.ev, &marks);
        let mut v = p.verdict(waits);
        if c == 0 {
            out.keyed_before = std::mem::take(&mut v.keyed_before);
            out.serial_loads = std::mem::take(&mut v.serial_loads);
            out.delayed = late;
        } else {
            out.keyed_before.retain(|p| v.keyed_before.contains(p));
            out.serial_loads.retain(|o, t| v.serial_loads.get(o) == Some(t));
            out.delayed.retain(|d, _| late.contains_key(d));
            for (d, between) in late {
                out.delayed.entry(d).and_modify(|w| w.extend(between));
            }
        }
        if !assign.is_empty() {
            let with: Vec<String> = (params.iter()).map(|(p, ..)| value_note(k, *p, assign[p])).collect();
            for d in v.errors.iter_mut().chain(v.warnings.iter_mut()) {
                d.notes.push(format!("with {}", with.join(", ")));
            }
        }
        out.unverified.extend(v.unverified);
        for d in v.errors {
            if !out.errors.iter().any(|e| at(e) == at(&d)) {
                out.errors.push(d);
            }
        }
        for d in v.warnings {
            if !out.warnings.iter().any(|e| at(e) == at(&d)) {
                out.warnings.push(d);
            }
        }
    }
    // One diagnostic per wait: an error for some values outweighs a warning for others.
    let errs = out.errors.iter().map(at).collect::<Vec<_>>();
    out.warnings.retain(|w| !errs.contains(&at(w)));
    Ok(out)
}

/// How a searched value is named in a diagnostic's note: `%K = 7`, or `2 trips of the loop
/// over %tile` for a loop's trip count (hostile M7: not the counter's value).
fn value_note(k: &Kernel, p: Value, x: i64) -> String {
    match loop_trips::is_trip(k, p) {
        true => format!("{x} trip{} of the loop over %{}", if x == 1 { "" } else { "s" }, k.value_names.get(p)),
        false => format!("%{} = {x}", k.value_names.get(p)),
    }
}

/// Relative skews of the counted keys tried (module doc, *Alignment*): the producer arm's
/// counted iterations shifted by `-MAX_SKEW ..= MAX_SKEW` against the other arm's.
pub const MAX_SKEW: i64 = 8;

/// The protocol of a trace under the first alignment of the role arms whose every wait
/// passes the parity check: the default keys (the arms' first loops by iteration), else
/// the counted keys with skew 0, −1, 1, −2, 2 … ±[`MAX_SKEW`]; with none, the default's
/// (its E0306 stands). Any one key order, used for every wait at once, makes the
/// handshakes' chains sound (docs/async.md, *Alignment*), so the choice is a search, not
/// an assumption. With it, the keys chosen (for the trace's other records: `mbar_delayed`).
fn aligned(k: &Kernel, events: Vec<Event>, weight: HashMap<u32, u32>, counted_only: bool) -> (Protocol<'_>, Keys) {
    let counted = events.iter().any(|e| e.arm.is_some());
    let base = Protocol::new(k, events, weight);
    if !counted || (!counted_only && base.parity_ok()) {
        return (base, Keys::Default);
    }
    for d in std::iter::once(0).chain((1..=MAX_SKEW).flat_map(|d| [-d, d])) {
        let ev = (base.ev.iter()).map(|e| counted_key(e, d)).collect();
        let p = Protocol::new(k, ev, base.weight.clone());
        if p.parity_ok() {
            return (p, Keys::Counted(d));
        }
    }
    match strided(k, &base) {
        Some((p, keys)) => (p, keys),
        None => (base, Keys::Default),
    }
}

/// The key order of a verdict ([`aligned`]): the trace's own, counted with a skew, or strided.
enum Keys {
    Default,
    Counted(i64),
    Strided { arm: i64, m: i64, r: HashMap<u32, i64> },
}

impl Keys {
    /// A watched op's execution (`mbar_delayed`) keyed as an event at its place would be.
    fn mark(&self, mut m: delayed::Mark) -> delayed::Mark {
        match self {
            Keys::Default => {}
            Keys::Counted(d) => counted_pos(&mut m.key, m.arm, *d),
            Keys::Strided { arm, m: n, r } => strided_pos(&mut m.key, m.arm, m.thread, (*arm, *n, r)),
        }
        m
    }
}

/// Strides tried for one arm's counted iterations (module doc, *Alignment*: ping-pong roles).
pub const MAX_STRIDE: i64 = 4;

/// The most offset assignments tried per stride and arm.
pub const MAX_OFFSETS: usize = 16;

/// The first strided alignment under which every wait passes the parity check: one arm's
/// counted iteration `c` of traced thread `t` keyed as iteration `m·c + r(t)` of the other
/// arm (`m` in 2..=[`MAX_STRIDE`], `r(t)` in `0..m` per thread class: the arm's threads
/// split into groups taking turns, CUTLASS's ping-pong consumers). Monotone in each thread's
/// program order with an iteration's events at one position, like every counted key.
fn strided<'k>(k: &'k Kernel, base: &Protocol<'k>) -> Option<(Protocol<'k>, Keys)> {
    for arm in 0..2i64 {
        let mut threads: Vec<u32> = (base.ev.iter())
            .filter(|e| e.arm.is_some_and(|a| e.key[a.at + 1] == arm))
            .map(|e| e.thread)
            .collect();
        threads.sort_unstable();
        threads.dedup();
        for m in 2..=MAX_STRIDE {
            // One class (a role loop unrolled by `m`, the other arm's iterations each a
            // use: hostile L2): offsets 0..=m, `m` placing its iteration `c` level with the
            // other arm's `m(c + 1)` (the arm order then decides which comes first).
            let width = if threads.len() == 1 { m as usize + 1 } else { m as usize };
            let combos = width.checked_pow(threads.len() as u32)?;
            if threads.is_empty() || combos > MAX_OFFSETS {
                continue;
            }
            for c in 0..combos {
                let r: HashMap<u32, i64> =
                    (threads.iter().enumerate()).map(|(i, &t)| (t, (c / width.pow(i as u32)) as i64 % width as i64)).collect();
                let ev = (base.ev.iter()).map(|e| strided_key(e, arm, m, &r)).collect();
                let p = Protocol::new(k, ev, base.weight.clone());
                if p.parity_ok() {
                    return Some((p, Keys::Strided { arm, m, r }));
                }
            }
        }
    }
    None
}

/// Event `e` with its strided key ([`strided`]): in arm `arm`, counted iteration `c` of
/// thread `t` at position `2(m·c + r(t)) + 1`, between loops `2(m·c + r(t))`; the other arm
/// as [`counted_key`] with skew 0.
fn strided_key(e: &Event, arm: i64, m: i64, r: &HashMap<u32, i64>) -> Event {
    let mut e = e.clone();
    strided_pos(&mut e.key, e.arm, e.thread, (arm, m, r));
    e
}

/// [`strided_key`] on a key: its arm position `arm` of thread `t`, with stride `m` and
/// offsets `r`.
fn strided_pos(key: &mut [i64], arm: Option<ArmPos>, t: u32, (which, m, r): (i64, i64, &HashMap<u32, i64>)) {
    counted_pos(key, arm, 0);
    if let Some(a) = arm
        && key[a.at + 1] == which
        && (a.in_loop || a.count != 0)
    {
        key[a.at] = 2 * (m * a.count + r.get(&t).copied().unwrap_or(0)) + a.in_loop as i64;
    }
}

/// Event `e` with its counted key: in a role arm, the arm's iteration position becomes
/// `2(c + d) + 1` in counted iteration `c` and `2(c + d)` between loops after `c ≥ 1` of
/// them, `d` the skew for the first arm and 0 for the others (monotone in program order).
/// Events before an arm's first loop stay first, in arm order, whatever the skew: a branch
/// without loops keeps its earlier arm keyed first, which `sync::handshake_chain` relies on
/// (it then checks only that direction).
fn counted_key(e: &Event, d: i64) -> Event {
    let mut e = e.clone();
    counted_pos(&mut e.key, e.arm, d);
    e
}

/// [`counted_key`] on a key at arm position `arm`.
fn counted_pos(key: &mut [i64], arm: Option<ArmPos>, d: i64) {
    if let Some(a) = arm {
        let d = if key[a.at + 1] == 0 { d } else { 0 };
        key[a.at] = match (a.in_loop, a.count) {
            (false, 0) => i64::MIN / 2,
            (l, c) => 2 * (c + d) + l as i64,
        };
    }
}

/// The (buffer, mbarrier array) of a TMA load `tma_load view @B[%x] .., @M[%x]`: its copy of
/// slot `j` of `@B` completes on element `j` of `@M`.
fn slot_tied(k: &Kernel, o: Op) -> Option<(Buffer, Buffer)> {
    let OpKind::TmaLoad { dst: MemRef::View(v), mbar: MemRef::Buffer(m), mbar_index, .. } = &k.ops[o].kind else {
        return None;
    };
    let [i] = mbar_index[..] else { return None };
    let vd = &k.views[*v];
    let (MemRef::Buffer(b), Some(ViewIndex::At(x))) = (vd.base, vd.indices.first()) else {
        return None;
    };
    let rest_ranges = vd.indices[1..].iter().all(|ix| matches!(ix, ViewIndex::Range(..)));
    (*x == i && rest_ranges).then_some((b, *m))
}

/// Where a diagnostic points (its primary label).
fn at(d: &Diagnostic) -> Option<crate::diag::Span> {
    d.labels.first().map(|l| l.span)
}

/// W0318 for wait `w`.
fn undecided(k: &Kernel, w: Op, why: &str) -> Diagnostic {
    Diagnostic::warning(
        DiagKind::Finding,
        "W0318",
        format!("`sync` did not verify {}: {why}", op_label(k, w)),
    )
    .with_label(k.span(w), "not taken as ordering anything")
    .with_note("the copies and handshakes this wait would order are treated as unordered by it; `smemsync check` verifies the protocol")
}

// ---- trace ----

type Failure = (Op, String);

/// A thread-dependent term's value in one thread, and the parameter its evaluation missed.
type TermValue = (Option<i64>, Option<Value>);

/// A trace: the events of each thread class's representative (its smallest thread), the
/// class sizes by representative, and the steps taken.
struct Trace {
    events: Vec<Event>,
    weight: HashMap<u32, u32>,
    steps: usize,
    /// The runs of the loops asked for (`trace`'s `pumped`).
    iters: Vec<Iters>,
    /// The executions of the watched ops (`trace`'s `watched`), and what was watched.
    marks: Vec<delayed::Mark>,
    watch: delayed::Watch,
}

/// One thread's run of a loop the trace was asked to record: where each iteration's events
/// start, the iteration values each began with, and where the run's events end.
struct Iters {
    thread: u32,
    op: Op,
    starts: Vec<usize>,
    vals: Vec<Vec<Option<i64>>>,
    end: usize,
}

/// The state of one thread's walk.
struct Tracer<'k> {
    k: &'k Kernel,
    warp: u32,
    has_mbar: HashSet<Op>,
    /// Loops with a loop holding mbarrier ops inside them (not counted: [`Align`]).
    nests_mbar: HashSet<Op>,
    /// The representative counter of loops with block-uniform bounds (`loop_trips`).
    trip_rep: HashMap<Op, Value>,
    /// Representatives whose trip counts the leaves' ranges bound (`loop_trips::Classes::most`):
    /// their trip counts are enumerated rather than the parameters their bounds read.
    trip_most: HashSet<Value>,
    tid: u32,
    env: HashMap<Value, i64>,
    key: Vec<i64>,
    /// Alignment of a role branch's arms.
    align: Option<Align>,
    /// Whether an `if` is a role branch (`analysis::role_split`), asked once per op.
    roles: HashMap<Op, bool>,
    events: Vec<Event>,
    seq: usize,
    steps: usize,
    budget: usize,
    /// Values of the enumerated scalar parameters.
    params: &'k HashMap<Value, i64>,
    /// A parameter an evaluation needed and `params` lacks.
    missing: std::cell::Cell<Option<Value>>,
    /// Loops whose iterations are recorded (`mbar_trips`), and their runs.
    pumped: HashSet<Op>,
    iters: Vec<Iters>,
    /// Loops run to another upper bound than their own (`mbar_period`).
    over: HashMap<Op, i64>,
    /// Ops recorded besides the mbarrier events (`mbar_delayed`), and their executions.
    watch: delayed::Watch,
    marks: Vec<delayed::Mark>,
}

/// Every thread class's mbarrier events with the parameters `params`, or why the trace could
/// not be computed (at most `budget` steps); the runs of the loops `pumped` are recorded, and
/// the loops of `over` run to the upper bound given there; with `watched`, the executions
/// of the ops `mbar_delayed` watches too.
fn trace(
    k: &Kernel,
    warp: u32,
    params: &HashMap<Value, i64>,
    budget: usize,
    pumped: HashSet<Op>,
    over: HashMap<Op, i64>,
    watched: bool,
) -> Result<Trace, Missing> {
    let mut has_mbar = HashSet::new();
    mark(k, k.body(), &mut has_mbar);
    let watch = if watched { delayed::Watch::new(k, &has_mbar) } else { Default::default() };
    let nests_mbar = nesting_loops(k, &has_mbar);
    let loops = (has_mbar.iter().copied()).filter(|&o| matches!(k.ops[o].kind, OpKind::For { .. })).collect();
    let cls = loop_trips::classes(k, &loops);
    let (trip_rep, trip_most) = (cls.rep, cls.most.into_keys().collect());
    let mut t = Tracer {
        k,
        warp,
        has_mbar,
        nests_mbar,
        trip_rep,
        trip_most,
        tid: 0,
        env: HashMap::new(),
        params,
        missing: std::cell::Cell::new(None),
        key: Vec::new(),
        align: None,
        roles: HashMap::new(),
        events: Vec::new(),
        seq: 0,
        steps: 0,
        budget,
        pumped,
        iters: Vec::new(),
        over,
        watch,
        marks: Vec::new(),
    };
    // The watched slots' thread-dependent terms split the classes too: a class's threads
    // then record the same slots.
    let slots: Vec<Value> = t.watch.slot_values();
    let classes = t.classes(&crate::analysis::mbar_classes::terms(k, &t.has_mbar, &slots));
    let mut weight = HashMap::new();
    for (tid, n) in classes {
        t.tid = tid;
        t.env.clear();
        t.seq = 0;
        weight.insert(tid, n);
        if let Err(f) = t.region(k.body()) {
            return Err(match t.missing.get() {
                Some(p) => Missing::Param(p),
                None => Missing::Other(f),
            });
        }
    }
    Ok(Trace { events: t.events, weight, steps: t.steps, iters: t.iters, marks: t.marks, watch: t.watch })
}

/// The loops among `has_mbar` that hold another loop among `has_mbar`.
fn nesting_loops(k: &Kernel, has_mbar: &HashSet<Op>) -> HashSet<Op> {
    let parents = k.parents();
    let mut out = HashSet::new();
    for &o in has_mbar {
        if matches!(k.ops[o].kind, OpKind::For { .. } | OpKind::While { .. }) {
            let outer = parents.ancestors(o).into_iter();
            out.extend(outer.filter(|&a| matches!(k.ops[a].kind, OpKind::For { .. } | OpKind::While { .. })));
        }
    }
    out
}

/// The operands the trace evaluates at op `o`: a loop's bounds and initial iteration values,
/// a condition, an mbarrier op's index (and a wait's parity), a TMA load's mbarrier index
/// (`mbar_counters` and `mbar_period` classify them).
fn traced_operands(k: &Kernel, o: Op) -> Vec<Operand> {
    match &k.ops[o].kind {
        OpKind::For { lo, hi, step, init } => [*lo, *hi, *step].into_iter().chain(init.iter().copied()).collect(),
        OpKind::If { cond } => vec![*cond],
        OpKind::MbarInit { index, .. } | OpKind::MbarArrive { index, .. } | OpKind::MbarExpectTx { index, .. } => index.clone(),
        OpKind::MbarWait { index, parity, .. } => index.iter().copied().chain([*parity]).collect(),
        OpKind::TmaLoad { mbar_index, .. } => mbar_index.clone(),
        _ => Vec::new(),
    }
}

/// Marks the ops that are or hold an mbarrier op; whether region `r` holds one.
fn mark(k: &Kernel, r: Region, out: &mut HashSet<Op>) -> bool {
    let mut any = false;
    for &o in k.region_ops(r) {
        let mut here = matches!(
            k.ops[o].kind,
            OpKind::MbarInit { .. }
                | OpKind::MbarArrive { .. }
                | OpKind::MbarExpectTx { .. }
                | OpKind::MbarWait { .. }
                | OpKind::TmaLoad { .. }
        );
        for &c in &k.ops[o].regions {
            here |= mark(k, c, out);
        }
        if here {
            out.insert(o);
            any = true;
        }
    }
    any
}

impl Tracer<'_> {
    fn region(&mut self, r: Region) -> Result<(), Failure> {
        let k = self.k;
        for (i, &op) in k.region_ops(r).iter().enumerate() {
            if !self.has_mbar.contains(&op) {
                if self.watch.observes(op) {
                    self.key.push(i as i64);
                    self.record(op);
                    self.key.pop();
                }
                continue;
            }
            self.steps += 1;
            if self.steps > self.budget {
                return Err((op, "the kernel is too large to trace".into()));
            }
            self.key.push(i as i64);
            self.op(op)?;
            self.key.pop();
        }
        Ok(())
    }

    fn op(&mut self, op: Op) -> Result<(), Failure> {
        let k = self.k;
        let fail = |why: &str| Err((op, why.to_string()));
        match &k.ops[op].kind {
            OpKind::For { lo, hi, step, init } => {
                let (lo, hi, step, init) = (*lo, *hi, *step, init.clone());
                self.for_loop(op, [lo, hi, step], &init)
            }
            OpKind::If { cond } => {
                let Some(c) = self.eval(cond) else {
                    return fail("a condition around mbarrier ops is not known statically");
                };
                let arm = if c != 0 { 0 } else { 1 };
                let r = k.ops[op].regions[arm];
                if self.align.is_none() && self.role_branch(op) {
                    self.key.extend([-1, arm as i64]);
                    let at = self.key.len() - 2;
                    self.align = Some(Align { at, running: false, in_leaf: false, ran: false, count: 0 });
                    let res = self.region(r);
                    self.align = None;
                    self.key.truncate(self.key.len() - 2);
                    res?;
                } else {
                    self.key.push(arm as i64);
                    self.region(r)?;
                    self.key.pop();
                }
                self.results(op, r);
                Ok(())
            }
            OpKind::Stage { .. } => self.region(k.ops[op].regions[0]),
            OpKind::While { .. } => fail("a `while` loop holds mbarrier ops"),
            OpKind::MbarInit { mbar, index, count } => self.event(op, mbar, index, Ev::Init(*count)),
            OpKind::MbarArrive { mbar, index, tx } => self.event(op, mbar, index, Ev::Arrive(*tx)),
            OpKind::MbarExpectTx { mbar, index, bytes } => {
                self.event(op, mbar, index, Ev::ExpectTx(*bytes))
            }
            OpKind::MbarWait { mbar, index, parity } => {
                let Some(p) = self.eval(parity) else {
                    return fail("the parity is not known statically");
                };
                self.event(op, mbar, index, Ev::Wait(p))
            }
            OpKind::TmaLoad { mbar, mbar_index, .. } => {
                let bytes = crate::sync::handshake_mbar::tma_bytes(k, op);
                self.event(op, mbar, mbar_index, Ev::Load(bytes))
            }
            _ => fail("an op holding mbarrier ops is not understood"),
        }
    }

    /// Runs a `for` loop's iterations; a loop of a role arm aligns the arms' keys.
    fn for_loop(&mut self, op: Op, b: [Operand; 3], init: &[Operand]) -> Result<(), Failure> {
        let k = self.k;
        let Some((lo, hi, st, counter)) = self.bounds(op, &b) else {
            return Err((op, "the bounds of a loop around mbarrier ops are not known statically".into()));
        };
        if st <= 0 {
            return Err((op, "a loop around mbarrier ops has a non-positive step".into()));
        }
        // Each iteration takes at least one step (the body holds an mbarrier op): a loop of
        // more trips than the budget left is cut now, not after tracing up to the cap.
        if (hi - lo + st - 1) / st > (self.budget - self.steps.min(self.budget)) as i64 {
            return Err((op, "the kernel is too large to trace".into()));
        }
        let body = k.ops[op].regions[0];
        let args = k.region_args(body).to_vec();
        let mut vals: Vec<Option<i64>> = init.iter().map(|o| self.eval(o)).collect();
        let (outer, arm_loop, counted) = self.enter_arm_loop(op);
        let (mut iv, mut n) = (lo, 0i64);
        let mut rec = (self.pumped.contains(&op)).then(|| Iters { thread: self.tid, op, starts: Vec::new(), vals: Vec::new(), end: 0 });
        while iv < hi {
            if let Some(r) = rec.as_mut() {
                r.starts.push(self.events.len());
                r.vals.push(vals.clone());
            }
            self.set(args[0], counter.then_some(iv));
            for (a, v) in args[1..].iter().zip(&vals) {
                self.set(*a, *v);
            }
            if let Some(s) = arm_loop {
                self.key[s] = n;
            }
            if let (true, Some(a)) = (counted, self.align.as_mut())
                && n > 0
            {
                a.count += 1;
            }
            self.key.push(n);
            let r = self.region(body);
            self.key.pop();
            r?;
            vals = self.yields(body, vals.len());
            iv += st;
            n += 1;
        }
        if let Some(mut r) = rec {
            r.end = self.events.len();
            self.iters.push(r);
        }
        self.leave_arm_loop((outer, arm_loop, counted), n);
        for (res, v) in k.ops[op].results.clone().into_iter().zip(vals) {
            self.set(res, v);
        }
        Ok(())
    }

    /// Entering loop `op` of a role arm: whether it is arm-level (not inside another loop of
    /// the arm; the arm's first one sets the default key at the returned position) and
    /// whether it is counted, a leaf loop (no loop holding mbarrier ops inside it): the
    /// counted keys number the arm's innermost iterations, those of loops nested in an
    /// arm-level loop included (docs/async.md, "Tile loops of persistent kernels").
    fn enter_arm_loop(&mut self, op: Op) -> (bool, Option<usize>, bool) {
        let (outer, arm_loop) = match &mut self.align {
            Some(a) if !a.running => {
                a.running = true;
                (true, (!a.ran).then_some(a.at))
            }
            _ => (false, None),
        };
        let counted = match &mut self.align {
            Some(a) if !a.in_leaf && !self.nests_mbar.contains(&op) => {
                a.in_leaf = true;
                true
            }
            _ => false,
        };
        (outer, arm_loop, counted)
    }

    /// Leaving a loop entered with `enter_arm_loop`'s answer after `n` iterations.
    fn leave_arm_loop(&mut self, (outer, arm_loop, counted): (bool, Option<usize>, bool), n: i64) {
        if let (true, Some(a)) = (counted, self.align.as_mut()) {
            // After the loop: `count` iterations done (the last one was counted at its start).
            a.count += (n > 0) as i64;
            a.in_leaf = false;
        }
        if let (true, Some(a)) = (outer, self.align.as_mut()) {
            a.running = false;
            if let Some(s) = arm_loop {
                self.key[s] = i64::MAX / 2;
                a.ran = true;
            }
        }
    }

    /// A loop's `(lo, hi, step)` and whether its counter is known: evaluated, or, for bounds
    /// that do not evaluate (and need no parameter with a declared range, which is
    /// enumerated instead), `0, t, 1` with `t` the searched trip count of the loop's
    /// representative (`loop_trips`) and the counter unknown. `None` (with the parameter
    /// to search in `missing`) when neither is known.
    fn bounds(&self, op: Op, b: &[Operand; 3]) -> Option<(i64, i64, i64, bool)> {
        // `over`: the pumped bound of a long constant loop (`mbar_period`).
        let hi = self.over.get(&op).copied().or_else(|| self.eval(&b[1]));
        if let (Some(lo), Some(hi), Some(st)) = (self.eval(&b[0]), hi, self.eval(&b[2])) {
            return Some((lo, hi, st, true));
        }
        let ranged = self.missing.get().is_some_and(|p| self.k.param_ranges.get(p).is_some());
        let rep = *self.trip_rep.get(&op).filter(|r| !ranged || self.trip_most.contains(r))?;
        // Bounds that only need parameters are left to the parameters' search and the
        // every-trip-count argument; a trip count stands in for those that read `bid`.
        if self.missing.get().is_some() && !self.reads_bid(b) {
            return None;
        }
        self.missing.set(None);
        match self.params.get(&rep) {
            Some(&t) => Some((0, t, 1, false)),
            None => {
                self.missing.set(Some(rep));
                None
            }
        }
    }

    /// Whether a loop bound reads the block id (`loop_trips`: the persistent tile loop).
    fn reads_bid(&self, b: &[Operand; 3]) -> bool {
        b.iter().any(|o| loop_trips::reads_bid(self.k, o))
    }

    fn set(&mut self, v: Value, x: Option<i64>) {
        match x {
            Some(x) => self.env.insert(v, x),
            None => self.env.remove(&v),
        };
    }

    /// The values yielded at the end of region `r` (`n` of them).
    fn yields(&mut self, r: Region, n: usize) -> Vec<Option<i64>> {
        let k = self.k;
        match k.region_ops(r).last().map(|&o| &k.ops[o].kind) {
            Some(OpKind::Yield(ys)) => ys.clone().iter().map(|y| self.eval(y)).collect(),
            _ => vec![None; n],
        }
    }

    /// Sets the results of an `if` from the arm that ran.
    fn results(&mut self, op: Op, arm: Region) {
        let res = self.k.ops[op].results.clone();
        let vals = self.yields(arm, res.len());
        for (r, v) in res.into_iter().zip(vals) {
            self.set(r, v);
        }
    }

    fn event(&mut self, op: Op, mbar: &MemRef, index: &[Operand], ev: Ev) -> Result<(), Failure> {
        let k = self.k;
        let MemRef::Buffer(b) = *mbar else {
            return Err((op, "an mbarrier named through a view".into()));
        };
        let shape = &k.buffers[b].shape;
        let mut flat = 0i64;
        for (d, o) in index.iter().enumerate() {
            let ext = shape.get(d).copied().unwrap_or(1) as i64;
            match self.eval(o) {
                Some(x) if (0..ext).contains(&x) => flat = flat * ext + x,
                _ => return Err((op, "an mbarrier index is not known statically or is out of range".into())),
            }
        }
        let arm = self.align.map(|a| ArmPos { at: a.at, count: a.count, in_loop: a.in_leaf });
        self.events.push(Event {
            thread: self.tid,
            seq: self.seq,
            key: self.key.clone(),
            arm,
            op,
            slot: Slot(b, flat),
            ev,
        });
        self.seq += 1;
        Ok(())
    }

    /// Records an execution of a watched op (`mbar_delayed`), with its slots' values.
    fn record(&mut self, op: Op) {
        // A slot that needs a parameter is not known here; it never sends the search for one.
        let missing = self.missing.take();
        let slots = self.watch.slots(op).iter().map(|o| self.eval(o)).collect();
        self.missing.set(missing);
        let arm = self.align.map(|a| ArmPos { at: a.at, count: a.count, in_loop: a.in_leaf });
        self.marks.push(delayed::Mark { thread: self.tid, seq: self.seq, key: self.key.clone(), arm, op, slots });
        self.seq += 1;
    }

    /// The value of an integer operand in this thread, if known.
    fn eval(&self, o: &Operand) -> Option<i64> {
        let k = self.k;
        let v = match o {
            Operand::Imm(Scalar::I1(b)) => return Some(*b as i64),
            Operand::Imm(Scalar::I32(x)) => return Some(*x as i64),
            Operand::Imm(Scalar::F32(_)) => return None,
            Operand::Value(v) => *v,
        };
        if let Some(&x) = self.env.get(&v) {
            return Some(x);
        }
        let (d, i) = match k.values[v].def {
            ValueDef::Result(d, i) => (d, i),
            ValueDef::Param(_) => {
                let x = self.params.get(&v).copied();
                if x.is_none() && k.values[v].ty == ScalarType::I32 {
                    self.missing.set(Some(v));
                }
                return x;
            }
            _ => return None,
        };
        let bool_ty = k.values[v].ty == ScalarType::I1;
        match &k.ops[d].kind {
            OpKind::Const(s) => self.eval(&Operand::Imm(*s)),
            OpKind::Special(s) => self.special(*s),
            OpKind::Binary(b, x, y) => b.eval_i32(self.eval(x)?, self.eval(y)?),
            OpKind::Unary(UnOp::Neg, x) => BinOp::Sub.eval_i32(0, self.eval(x)?),
            OpKind::Unary(UnOp::Not, x) if bool_ty => Some(1 - self.eval(x)?),
            OpKind::Cmp(p, x, y) => Some(p.holds(self.eval(x)?, self.eval(y)?) as i64),
            OpKind::Select(c, x, y) => {
                if self.eval(c)? != 0 {
                    self.eval(x)
                } else {
                    self.eval(y)
                }
            }
            OpKind::InGroup(g) => {
                let gd = &k.groups[*g];
                Some((self.tid >= gd.lo && self.tid < gd.hi) as i64)
            }
            // An `if` result: the taken arm's yield, where the condition evaluates (as
            // footprints read it; hostile L12's parity `if %c { yield 1 } else { yield 0 }`).
            OpKind::If { cond } => {
                let arm = if self.eval(cond)? != 0 { 0 } else { 1 };
                let r = *k.ops[d].regions.get(arm)?;
                match k.region_ops(r).last().map(|&y| &k.ops[y].kind) {
                    Some(OpKind::Yield(ys)) => self.eval(ys.get(i)?),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn special(&self, s: Special) -> Option<i64> {
        match s {
            // The launch grid is not the kernel's to assume here.
            Special::GridDim(_) => None,
            _ => crate::analysis::footprint::special_value(self.k, s, self.tid, self.warp),
        }
    }

    /// Whether the `if` op is a role branch: `in_group @g`, or a condition true in exactly
    /// `@g`'s threads (`analysis::role_split`).
    fn role_branch(&mut self, op: Op) -> bool {
        let k = self.k;
        *(self.roles.entry(op)).or_insert_with(|| crate::analysis::role_split::branch_group(k, op).is_some())
    }

    /// The thread classes (`analysis::mbar_classes`): threads whose `terms` evaluate alike,
    /// as (smallest thread, size), by smallest thread.
    fn classes(&mut self, terms: &[Value]) -> Vec<(u32, u32)> {
        let mut by_key: HashMap<Vec<TermValue>, usize> = HashMap::new();
        let mut out: Vec<(u32, u32)> = Vec::new();
        for tid in 0..self.k.threads() {
            self.tid = tid;
            let key: Vec<_> = (terms.iter())
                .map(|&v| {
                    let x = self.eval(&Operand::Value(v));
                    (x, self.missing.take())
                })
                .collect();
            let i = *by_key.entry(key).or_insert_with(|| {
                out.push((tid, 0));
                out.len() - 1
            });
            out[i].1 += 1;
        }
        out
    }
}

// ---- rounds, guarantees, verdict ----

/// Why a slot's rounds are not established.
#[derive(Clone, Debug)]
enum Broken {
    /// The init count is smaller than the arriving threads and not a multiple of them:
    /// (count, arriving threads, an init event, an arrival event).
    Count(u32, usize, usize, usize),
    /// Round `r`, the first whose expected bytes differ from its loads', expects `x` bytes
    /// and its loads write `l < x`; `ordered`: every event of a round `>= 1` comes after the
    /// phase before it completed (`Protocol::not_overtaken`). Then phase `r` never
    /// completes (module doc, *Rounds*); otherwise only the reason it is not decided.
    Short { r: i64, x: i64, l: i64, ordered: bool },
    /// No traced thread initialises the slot, yet it is used: every wait on it reads an
    /// uninitialised mbarrier (hostile H9: a Triton `init_barrier` deleted).
    Uninit,
    Undecided(String),
}

impl Broken {
    /// Why the slot's waits are not decided (for those a [`Broken::Short`] does not refute).
    fn why(&self) -> String {
        match self {
            Broken::Short { r, x, l, .. } => format!("its round {r} expects {x} bytes but its loads write {l}"),
            Broken::Undecided(why) => why.clone(),
            Broken::Uninit => "the mbarrier is never initialised".into(),
            Broken::Count(n, a, ..) => format!("its count {n} is smaller than the {a} threads that arrive on it"),
        }
    }
}

/// The trace with each event's round (arrivals, expect_tx, loads) or guaranteed phase
/// (waits).
struct Protocol<'k> {
    k: &'k Kernel,
    ev: Vec<Event>,
    /// The size of each traced thread's class (its events stand for that many threads').
    weight: HashMap<u32, u32>,
    by_slot: std::collections::BTreeMap<Slot, Vec<usize>>,
    round: Vec<i64>,
    /// Per thread and slot: its waits' (seq, guaranteed phase), in program order.
    waits_of: FxMap<(u32, Slot), Vec<(usize, i64)>>,
    /// Per thread: the slots it waits on.
    slots_of: FxMap<u32, Vec<Slot>>,
    broken: FxMap<Slot, Broken>,
    /// Slots whose rounds are established but whose phases were not shown to complete in
    /// round order (a wait that guarantees less than its round is still shown wrong).
    overtaken: FxMap<Slot, String>,
    /// Memo of [`Protocol::after_upto`]: per (slot `s2`, slot `s`), entry `r` is the best
    /// guarantee on `s` before any event of rounds `0..=r` of `s2`.
    h: FxMap<(Slot, Slot), Vec<i64>>,
    /// Indexes and memos of the round checks (`mbar_rounds`).
    rounds_idx: rounds::Index,
}

impl<'k> Protocol<'k> {
    fn new(k: &'k Kernel, ev: Vec<Event>, weight: HashMap<u32, u32>) -> Self {
        let mut by_slot: std::collections::BTreeMap<Slot, Vec<usize>> = Default::default();
        for (i, e) in ev.iter().enumerate() {
            by_slot.entry(e.slot).or_default().push(i);
        }
        let mut p = Protocol {
            k,
            weight,
            round: vec![-1; ev.len()],
            ev,
            by_slot,
            waits_of: Default::default(),
            slots_of: Default::default(),
            broken: Default::default(),
            overtaken: Default::default(),
            h: Default::default(),
            rounds_idx: Default::default(),
        };
        let slots: Vec<Slot> = p.by_slot.keys().copied().collect();
        for &s in &slots {
            if let Err(b) = p.rounds(s) {
                p.broken.insert(s, b);
            }
        }
        p.guarantees();
        for &s in &slots {
            match p.broken.get(&s) {
                None => {
                    if let Err(why) = p.not_overtaken(s) {
                        p.overtaken.insert(s, why);
                    }
                }
                Some(&Broken::Short { r, x, l, .. }) => {
                    let ordered = p.not_overtaken(s).is_ok();
                    p.broken.insert(s, Broken::Short { r, x, l, ordered });
                }
                Some(_) => {}
            }
        }
        p
    }

    /// Whether every wait passes the parity check against the keys (no E0306 of
    /// [`Protocol::check_wait`]).
    fn parity_ok(&self) -> bool {
        self.by_slot.iter().all(|(s, idx)| {
            if self.broken.contains_key(s) {
                return true;
            }
            let latest = self.latest(*s);
            idx.iter().all(|&i| match self.ev[i].ev {
                Ev::Wait(p) => self.check_wait(i, p, &latest).is_none(),
                _ => true,
            })
        })
    }

    /// The size of traced thread `t`'s class.
    fn w(&self, t: u32) -> u32 {
        self.weight.get(&t).copied().unwrap_or(1)
    }

    /// Assigns the rounds of slot `s`'s arrivals, expect_tx and loads (module doc).
    fn rounds(&mut self, s: Slot) -> Result<(), Broken> {
        let idx = self.by_slot[&s].clone();
        let inits: Vec<usize> = idx.iter().copied().filter(|&i| matches!(self.ev[i].ev, Ev::Init(_))).collect();
        let [init] = inits[..] else {
            return Err(match inits.len() {
                0 => Broken::Uninit,
                n => Broken::Undecided(format!("the mbarrier is initialised {n} times")),
            });
        };
        let Ev::Init(n) = self.ev[init].ev else { unreachable!() };
        let mut per_thread: std::collections::BTreeMap<u32, usize> = Default::default();
        let mut first_arrival = None;
        for &i in &idx {
            if matches!(self.ev[i].ev, Ev::Arrive(_)) {
                *per_thread.entry(self.ev[i].thread).or_default() += 1;
                first_arrival.get_or_insert(i);
            }
        }
        let a: usize = per_thread.keys().map(|t| self.w(*t) as usize).sum();
        let Some(arr) = first_arrival else {
            // No phase ever completes: a wait orders nothing (it returns at once or never).
            return match idx.iter().find(|&&i| matches!(self.ev[i].ev, Ev::Load(_) | Ev::ExpectTx(_))) {
                Some(&i) => Err(Broken::Undecided(format!("{} completes on it, but no thread arrives on it", op_label(self.k, self.ev[i].op)))),
                None => Ok(()),
            };
        };
        if !(n as usize).is_multiple_of(a) {
            return Err(if (n as usize) < a {
                Broken::Count(n, a, init, arr)
            } else {
                Broken::Undecided(format!("its count {n} is not a multiple of the {a} threads that arrive on it"))
            });
        }
        if per_thread.values().collect::<HashSet<_>>().len() > 1 {
            return Err(Broken::Undecided("its threads arrive on it different numbers of times".into()));
        }
        self.assign(&idx, (n as usize / a) as i64)
    }

    /// Rounds of the events `idx` of one slot, `m` arrivals per thread and phase; checks that
    /// each round's expected bytes are the bytes its loads write.
    fn assign(&mut self, idx: &[usize], m: i64) -> Result<(), Broken> {
        let mut arrived: HashMap<u32, (i64, Option<i64>)> = HashMap::new();
        let mut bytes: std::collections::BTreeMap<i64, (i64, i64)> = Default::default();
        for &i in idx {
            let e = &self.ev[i];
            let w = self.weight.get(&e.thread).map_or(1, |&w| w as i64);
            let st = arrived.entry(e.thread).or_insert((0, None));
            let r = st.0 / m;
            self.round[i] = match e.ev {
                Ev::Arrive(tx) => {
                    st.0 += 1;
                    if let Some(b) = tx {
                        st.1 = Some(r);
                        bytes.entry(r).or_default().0 += w * b as i64;
                    }
                    r
                }
                Ev::ExpectTx(b) => {
                    st.1 = Some(r);
                    bytes.entry(r).or_default().0 += w * b as i64;
                    r
                }
                Ev::Load(b) => {
                    let Some(r) = st.1 else {
                        return Err(Broken::Undecided(format!("{} is not preceded by a `tx` arrival of its thread", op_label(self.k, e.op))));
                    };
                    bytes.entry(r).or_default().1 += w * b as i64;
                    r
                }
                Ev::Init(_) | Ev::Wait(_) => -1,
            };
        }
        match bytes.iter().find(|(_, (x, l))| x != l) {
            // Only arrivals expect bytes (no separate `expect_tx`, which may count toward an
            // earlier phase than its round): the shortfall is exact (module doc, *Rounds*).
            Some((&r, &(x, l))) if x > l && !idx.iter().any(|&i| matches!(self.ev[i].ev, Ev::ExpectTx(_))) => Err(Broken::Short { r, x, l, ordered: false }),
            Some((r, (x, l))) => Err(Broken::Undecided(format!("its round {r} expects {x} bytes but its loads write {l}"))),
            None => Ok(()),
        }
    }

    /// The phase each wait guarantees (module doc, *Waits*).
    fn guarantees(&mut self) {
        let mut g: HashMap<(u32, Slot), i64> = HashMap::new();
        for (i, e) in self.ev.iter().enumerate() {
            let Ev::Wait(p) = e.ev else { continue };
            let cur = g.entry((e.thread, e.slot)).or_insert(-1);
            if p.rem_euclid(2) != cur.rem_euclid(2) {
                *cur += 1;
            }
            self.round[i] = *cur;
            let w = self.waits_of.entry((e.thread, e.slot)).or_default();
            if w.is_empty() {
                self.slots_of.entry(e.thread).or_default().push(e.slot);
            }
            w.push((e.seq, *cur));
        }
    }

    /// The phase of slot `s` that thread `t`'s own waits before its event `seq` guarantee.
    fn direct(&self, t: u32, seq: usize, s: Slot) -> i64 {
        let Some(w) = self.waits_of.get(&(t, s)) else {
            return -1;
        };
        let n = w.partition_point(|&(q, _)| q < seq);
        if n == 0 { -1 } else { w[n - 1].1 }
    }

    /// The best phase of `s` that some thread had itself waited for before one of its events
    /// of a round `0..=g` on slot `s2` (the completion of that phase of `s2` comes after it).
    /// One pass over `s2`'s events per slot pair builds the table of every round (prefix
    /// maxima): O(events) once, O(1) per question (the per-round scan was quadratic in the
    /// trip count: K9 of session 35's hostile test).
    fn after_upto(&mut self, s2: Slot, g: i64, s: Slot) -> i64 {
        if g < 0 {
            return -1;
        }
        if !self.h.contains_key(&(s2, s)) {
            let mut best: Vec<i64> = Vec::new();
            for &i in &self.by_slot[&s2] {
                let (r, e) = (self.round[i], &self.ev[i]);
                if r < 0 || matches!(e.ev, Ev::Wait(_) | Ev::Init(_)) {
                    continue;
                }
                let r = r as usize;
                if best.len() <= r {
                    best.resize(r + 1, -1);
                }
                best[r] = best[r].max(self.direct(e.thread, e.seq, s));
            }
            for j in 1..best.len() {
                best[j] = best[j].max(best[j - 1]);
            }
            self.h.insert((s2, s), best);
        }
        let best = &self.h[&(s2, s)];
        best.get(g as usize).or(best.last()).copied().unwrap_or(-1)
    }

    /// Whether phase `r` of slot `s` completed before thread `t`'s event `seq`: its own wait,
    /// or its wait for a phase of another slot one of whose events came after such a wait.
    fn completed_before(&mut self, t: u32, seq: usize, s: Slot, r: i64) -> bool {
        if r < 0 || self.direct(t, seq, s) >= r {
            return true;
        }
        let slots = self.slots_of.get(&t).cloned().unwrap_or_default();
        for s2 in slots {
            let g2 = self.direct(t, seq, s2);
            if self.after_upto(s2, g2, s) >= r {
                return true;
            }
        }
        false
    }

    /// Every arrival and expect_tx of round `r >= 1` on `s` comes after phase `r - 1`.
    fn not_overtaken(&mut self, s: Slot) -> Result<(), String> {
        for i in self.by_slot[&s].clone() {
            if !matches!(self.ev[i].ev, Ev::Arrive(_) | Ev::ExpectTx(_)) {
                continue;
            }
            let (t, seq, r) = (self.ev[i].thread, self.ev[i].seq, self.round[i]);
            if r >= 1 && !self.completed_before(t, seq, s, r - 1) {
                return Err(format!(
                    "{} in thread {t} (round {r}) may come before phase {} of its mbarrier completes",
                    op_label(self.k, self.ev[i].op),
                    r - 1
                ));
            }
        }
        Ok(())
    }
}

/// What is found of one wait op: the first failing execution, wrong before undecided.
enum Finding {
    Wrong(Diagnostic),
    Undecided(String),
}

impl Protocol<'_> {
    /// The verdict on the wait ops `waits`.
    fn verdict(self, waits: &[Op]) -> Verdict {
        let keyed_before = self.keyed_before();
        let serial_loads = self.serial_loads();
        let mut found: HashMap<Op, Finding> = HashMap::new();
        let slots: Vec<Slot> = self.by_slot.keys().copied().collect();
        for s in slots {
            let latest = self.latest(s);
            for i in self.by_slot[&s].clone() {
                let Ev::Wait(p) = self.ev[i].ev else { continue };
                let op = self.ev[i].op;
                if matches!(found.get(&op), Some(Finding::Wrong(_))) {
                    continue;
                }
                let f = match self.broken.get(&s).cloned() {
                    Some(Broken::Count(n, a, init, arr)) => Some(Finding::Wrong(self.count_error(i, n, a, init, arr))),
                    Some(Broken::Short { r, x, l, ordered: true }) if self.round[i] >= r => Some(Finding::Wrong(self.short_error(i, r, x, l))),
                    Some(Broken::Uninit) => Some(Finding::Wrong(self.uninit_error(i))),
                    Some(b) => Some(Finding::Undecided(b.why())),
                    None => match self.check_wait(i, p, &latest) {
                        Some(d) => Some(Finding::Wrong(d)),
                        None => (self.round_finding(i)).or_else(|| self.overtaken.get(&s).cloned().map(Finding::Undecided)),
                    },
                };
                match f {
                    Some(Finding::Undecided(_)) if found.contains_key(&op) => {}
                    Some(f) => {
                        found.insert(op, f);
                    }
                    None => {}
                }
            }
        }
        let mut v = Verdict::default();
        for &w in waits {
            match found.remove(&w) {
                Some(Finding::Wrong(d)) => {
                    v.unverified.insert(w);
                    v.errors.push(d);
                }
                Some(Finding::Undecided(why)) => {
                    v.unverified.insert(w);
                    v.warnings.push(undecided(self.k, w, &why));
                }
                // Verified, or executed by no thread (it then orders nothing).
                None => {}
            }
        }
        v.keyed_before = keyed_before;
        v.serial_loads = serial_loads;
        v
    }

    /// The TMA loads of [`Verdict::serial_loads`]: a load whose view is `view @B[%x]` and whose
    /// mbarrier element is `@M[%x]` (one operand: copies of slot `j` complete on `@M[j]`), and
    /// every slot of `@M` it loads on is established (rounds assigned, none overtaken) with at
    /// most one load per round, issued by one thread. Two such loads of one slot are then in
    /// distinct rounds `r0 < r1`; the later one's events come after phase `r1 − 1` completed
    /// (no overtaking), so after the earlier copy's bytes arrived: never both in flight.
    fn serial_loads(&self) -> HashMap<Op, (Buffer, Buffer)> {
        let mut bad: HashSet<Op> = HashSet::new();
        let mut ops: HashSet<Op> = HashSet::new();
        for (s, idx) in &self.by_slot {
            let loads: Vec<usize> = idx.iter().copied().filter(|&i| matches!(self.ev[i].ev, Ev::Load(_))).collect();
            let mut rounds: Vec<i64> = loads.iter().map(|&i| self.round[i]).collect();
            rounds.sort_unstable();
            let ok = !self.broken.contains_key(s)
                && !self.overtaken.contains_key(s)
                && rounds.windows(2).all(|w| w[0] < w[1])
                && rounds.first().is_none_or(|&r| r >= 0)
                && loads.iter().all(|&i| self.w(self.ev[i].thread) == 1);
            for &i in &loads {
                ops.insert(self.ev[i].op);
                if !ok {
                    bad.insert(self.ev[i].op);
                }
            }
        }
        (ops.into_iter())
            .filter(|o| !bad.contains(o))
            .filter_map(|o| slot_tied(self.k, o).map(|t| (o, t)))
            .collect()
    }

    /// The pairs of [`Verdict::keyed_before`] under this protocol's keys: per op and slot the
    /// least and greatest key of its events, compared for a load or arrival in one role arm
    /// and a wait in another. O(events + ops² · slots).
    fn keyed_before(&self) -> HashSet<(Op, Op)> {
        type Span<'a> = (&'a [i64], &'a [i64]);
        let mut rel: HashMap<Op, HashMap<Slot, Span<'_>>> = HashMap::new();
        let mut acq: HashMap<Op, HashMap<Slot, Span<'_>>> = HashMap::new();
        let mut arm: HashMap<Op, (usize, i64)> = HashMap::new();
        for e in &self.ev {
            let Some(a) = e.arm else { continue };
            let side = match e.ev {
                Ev::Load(_) | Ev::Arrive(_) => &mut rel,
                Ev::Wait(_) => &mut acq,
                _ => continue,
            };
            arm.insert(e.op, (a.at, e.key[a.at + 1]));
            let span = side.entry(e.op).or_default().entry(e.slot).or_insert((&e.key, &e.key));
            span.0 = span.0.min(&e.key);
            span.1 = span.1.max(&e.key);
        }
        let mut out = HashSet::new();
        for (&l, ls) in &rel {
            for (&w, ws) in &acq {
                let (al, aw) = (arm[&l], arm[&w]);
                if al.0 != aw.0 || al.1 == aw.1 {
                    continue;
                }
                let shared: Vec<&Slot> = ls.keys().filter(|s| ws.contains_key(s)).collect();
                if !shared.is_empty() && shared.iter().all(|s| ls[*s].1 < ws[*s].0) {
                    out.insert((l, w));
                }
            }
        }
        out
    }

    /// Slot `s`'s arrivals and loads sorted by key, each with the latest round up to it.
    fn latest(&self, s: Slot) -> Vec<(Vec<i64>, i64, usize)> {
        let mut v: Vec<(Vec<i64>, i64, usize)> = (self.by_slot[&s].iter())
            .filter(|&&i| matches!(self.ev[i].ev, Ev::Arrive(_) | Ev::Load(_)))
            .map(|&i| (self.ev[i].key.clone(), self.round[i], i))
            .collect();
        v.sort();
        for j in 1..v.len() {
            if v[j].1 < v[j - 1].1 {
                v[j].1 = v[j - 1].1;
                v[j].2 = v[j - 1].2;
            }
        }
        v
    }

    /// E0306 when wait event `i` (parity `p`) guarantees less than the latest round keyed
    /// before it.
    fn check_wait(&self, i: usize, p: i64, latest: &[(Vec<i64>, i64, usize)]) -> Option<Diagnostic> {
        let e = &self.ev[i];
        let n = latest.partition_point(|x| x.0 < e.key);
        let (q, at) = match n {
            0 => return None,
            _ => (latest[n - 1].1, latest[n - 1].2),
        };
        let g = self.round[i];
        (g < q).then(|| self.parity_error(i, p, g, q, at))
    }

    fn slot_name(&self, s: Slot) -> String {
        format!("@{}[{}]", self.k.buffers[s.0].name, s.1)
    }

    fn parity_error(&self, i: usize, p: i64, g: i64, q: i64, at: usize) -> Diagnostic {
        let k = self.k;
        let (e, c) = (&self.ev[i], &self.ev[at]);
        let what = match c.ev {
            Ev::Load(_) => match &k.ops[c.op].kind {
                OpKind::TmaLoad { dst, .. } => format!("the copy to @{}", k.buffers[k.root_buffer(*dst)].name),
                _ => "the copy".into(),
            },
            _ => "the arrivals".into(),
        };
        let by = if matches!(c.ev, Ev::Load(_)) { "the load completes" } else { "they complete" };
        let got = if g < 0 { "nothing".to_string() } else { format!("phase {g}") };
        Diagnostic::error(
            DiagKind::Finding,
            "E0306",
            format!("{} does not complete {what}: it waits for parity {p}, {by} phase {q} (parity {})", op_label(k, e.op), q.rem_euclid(2)),
        )
        .with_label(k.span(e.op), format!("in thread {} this wait may return before phase {q} of {} completes", e.thread, self.slot_name(e.slot)))
        .with_label(k.span(c.op), format!("completes phase {q}"))
        .with_note(format!("with the thread's earlier waits on {}, this one guarantees {got}: a wait returns once the phase of its parity has completed, and on a fresh mbarrier the phase before phase 0 (parity 1) counts as complete", self.slot_name(e.slot)))
        .with_help("wait with the parity of the phase that completes the copy (docs/ir.md section 5)")
    }

    /// E0306 for wait event `i`, which guarantees a phase `>= r` of a slot whose round `r`
    /// expects `x` bytes and whose loads write `l < x` ([`Broken::Short`]): phase `r` never
    /// completes, so the wait never returns (or returns before what it is taken to wait for).
    fn short_error(&self, i: usize, r: i64, x: i64, l: i64) -> Diagnostic {
        let e = &self.ev[i];
        let s = self.slot_name(e.slot);
        let g = self.round[i];
        let missing = if l == 0 { "no copy completes on it".to_string() } else { format!("its copies write only {l}") };
        Diagnostic::error(
            DiagKind::Finding,
            "E0306",
            format!("{} can never return: in thread {} it waits for phase {g} of {s}, but phase {r} expects {x} transaction bytes and {missing}", op_label(self.k, e.op), e.thread),
        )
        .with_label(self.k.span(e.op), format!("phase {r} of {s} never completes: {} expected bytes never arrive", x - l))
        .with_note("a phase completes once its arrivals are in and no expected byte is pending; the bytes of a later round's copies cannot count toward it, since those copies are issued only after it completed")
        .with_help(format!("issue the copies that complete on {s} (`tma_load ..., {s}`), or expect only the bytes they write"))
    }

    /// The wait event `i` on a slot no traced thread initialises ([`Broken::Uninit`]).
    fn uninit_error(&self, i: usize) -> Diagnostic {
        let k = self.k;
        let e = &self.ev[i];
        let s = self.slot_name(e.slot);
        Diagnostic::error(DiagKind::Finding, "E0306", format!("{} waits on {s}, which no `mbar_init` initialises", op_label(k, e.op)))
            .with_label(k.span(e.op), format!("{s} is used here uninitialised"))
            .with_note("the trace of every thread (for the parameter values checked) runs no `mbar_init` of this slot: its phase and count are undefined, so the wait orders nothing and may never return")
            .with_help(format!("initialise {s} with `mbar_init` before any thread uses it, ordered before the other threads by a sync op such as `barrier`"))
    }

    fn count_error(&self, i: usize, n: u32, a: usize, init: usize, arr: usize) -> Diagnostic {
        let k = self.k;
        let e = &self.ev[i];
        let s = self.slot_name(e.slot);
        Diagnostic::error(
            DiagKind::Finding,
            "E0306",
            format!("{} does not wait for every arrival: {s} is initialised with count {n}, but {a} threads arrive on it in each phase", op_label(k, e.op)),
        )
        .with_label(k.span(e.op), format!("this wait may return before all {a} threads have arrived on {s}"))
        .with_label(k.span(self.ev[init].op), format!("count {n}"))
        .with_label(k.span(self.ev[arr].op), format!("{a} threads arrive here"))
        .with_note("a phase completes after `count` arrivals, so a phase completes early and the waiting thread may overtake threads that have not arrived yet")
        .with_help(format!("initialise {s} with the number of arrivals per phase ({a})"))
    }
}
