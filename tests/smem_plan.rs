//! Property tests of shared-memory planning (`transform::smem_plan::plan_with`) on random
//! kernels: buffers live at the same time never share bytes, the chosen plan synchronized by
//! `sync` is race-free under interpretation, and it computes what the unplanned kernel
//! computes (`oracles::planned_ok`), for both objectives.
//!
//! Generators: the project's (`smemsync::gen` through `oracles::Case`, several phases of
//! fresh buffers) and one here that stresses liveness across loop back edges: a loop whose
//! body writes some buffers in full before reading them (private to an iteration), others
//! partly, under an `if`, or not at all before a read (loop-carried), read back at
//! other threads' elements and some read again after the loop. A third builds multi-buffered
//! kernels (a ring of slots with a prologue, a main loop and a peeled epilogue, slots by
//! `rem` or select-wrap counters) with scratch buffers at random places, and checks the
//! construction's own liveness besides: no scratch buffer on a slot that holds data.
//!
//! Each test runs a fixed number of seeds (every plan synchronizes all its candidates, so
//! they are few), or `SMEMSYNC_PLAN_SEEDS=N` of them for a long run, and asserts it
//! exercised enough.

use smemsync::check::splitmix64;
use smemsync::r#gen::Rng;
use smemsync::oracles::{Case, Tally, outputs, plan_objectives_oracle, planned_ok};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;
use smemsync::transform::smem_plan::{Objective, PlanOptions, lifetimes, plan_with};

/// Seeds to run: `default`, or `SMEMSYNC_PLAN_SEEDS` when set.
fn seeds(default: u64) -> u64 {
    std::env::var("SMEMSYNC_PLAN_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[test]
fn plans_of_generated_kernels_keep_live_buffers_apart_and_results_unchanged() {
    let mut tally = Tally::default();
    for seed in 0..seeds(4) {
        // Several phases of fresh buffers (bits 6-7), small blocks (bits 10-12 clear).
        let flags = splitmix64(seed) & !(7 << 10) | 0b11 << 6;
        let case = Case::new(seed, flags);
        if let Err(e) = plan_objectives_oracle(&case, &mut tally) {
            panic!("seed {seed}: {e}");
        }
        tally.cases += 1;
    }
    eprintln!("{tally:?}");
    assert!(tally.cases >= 4, "{tally:?}");
    assert!(tally.reused_bytes > 0, "no plan reused bytes: {tally:?}");
}

/// How a buffer is treated in the loop body of a [`loop_kernel`].
#[derive(Copy, Clone, Debug, PartialEq)]
enum Use {
    /// Written by every thread, then read: private to an iteration.
    Full,
    /// Written by half the threads, then read anywhere: loop-carried.
    Half,
    /// Written under a uniform `if`: not a must-write.
    Guarded,
    /// Read before it is written: loop-carried.
    ReadFirst,
}

/// A random kernel with one loop over `n` buffers (see the module doc) and its buffer uses.
fn loop_kernel(seed: u64) -> (String, Vec<Use>) {
    let mut r = Rng::new(seed);
    let mut next = |m: u64| r.below(m);
    let b = [32u64, 64, 128][next(3) as usize];
    let n = 2 + next(3) as usize;
    let trips = 2 + next(3);
    let uses: Vec<Use> = (0..n)
        .map(|_| {
            [
                Use::Full,
                Use::Full,
                Use::Half,
                Use::Guarded,
                Use::ReadFirst,
            ][next(5) as usize]
        })
        .collect();
    let after: Vec<bool> = (0..n).map(|_| next(4) == 0).collect();
    let mut s = format!(
        "kernel @k(%x: global f32[{trips}, {b}], %y: global f32[{trips}, {}], %z: global f32[{}], %n: i32 = 1) block({b}) {{\n",
        n as u64 * b,
        n as u64 * b
    );
    for i in 0..n {
        s += &format!("  shared @s{i} : f32[{b}]\n");
    }
    s += &format!(
        "  %t = tid.x\n  %h = cmp lt %t, {}\n  %c = cmp lt %n, 4\n",
        b / 2
    );
    for i in 0..n {
        let m = 1 + next(b - 1);
        s += &format!("  %m{i} = xor %t, {m}\n");
        if uses[i] != Use::Full || after[i] {
            s += &format!("  %f{i} = itof %t\n  store @s{i}[%t], %f{i}\n");
        }
    }
    s += &format!("  for %k = 0 to {trips} step 1 {{\n    %g = gload %x[%k, %t]\n");
    for (i, u) in uses.iter().enumerate() {
        let write = format!("    %w{i} = add %g, {i}.0\n");
        let read = format!(
            "    %r{i} = load @s{i}[%m{i}]\n    %o{i} = add %t, {}\n    gstore %y[%k, %o{i}], %r{i}\n",
            i as u64 * b
        );
        s += &write;
        s += &match u {
            Use::Full => format!("    store @s{i}[%t], %w{i}\n{read}"),
            Use::Half => format!("    if %h {{\n      store @s{i}[%t], %w{i}\n    }}\n{read}"),
            Use::Guarded => format!("    if %c {{\n      store @s{i}[%t], %w{i}\n    }}\n{read}"),
            Use::ReadFirst => format!("{read}    store @s{i}[%t], %w{i}\n"),
        };
    }
    s += "  }\n";
    for i in (0..n).filter(|&i| after[i]) {
        s += &format!(
            "  %a{i} = load @s{i}[%m{i}]\n  %p{i} = add %t, {}\n  gstore %z[%p{i}], %a{i}\n",
            i as u64 * b
        );
    }
    s += "}\n";
    let uses = uses
        .iter()
        .zip(&after)
        .map(|(&u, &a)| if a && u == Use::Full { Use::Half } else { u })
        .collect();
    (s, uses)
}

#[test]
fn loop_private_buffers_share_bytes_and_loop_carried_ones_never_do() {
    let mut tally = Tally::default();
    let (mut private, mut carried, mut cases) = (0, 0, 0);
    for seed in 0..seeds(16) {
        let (text, uses) = loop_kernel(seed);
        let k = smemsync::reader::parse_kernel(&text).unwrap_or_else(|d| panic!("{text}\n{d:?}"));
        let t = Target::from_name(["gfx942", "sm_90"][seed as usize % 2]).expect("target");
        // What each buffer's liveness must be: private exactly for full writes before reads
        // (and no read after the loop).
        let lt = lifetimes(&k);
        for (b, u) in k.buffers.keys().zip(&uses) {
            let is_private = lt.private_to.get(b).is_some();
            assert_eq!(is_private, *u == Use::Full, "seed {seed}: {u:?}\n{text}");
            if is_private {
                private += 1;
            } else {
                carried += 1;
            }
        }
        let base = synchronize(&k, &t, &PlaceOptions::default())
            .unwrap_or_else(|d| panic!("seed {seed}: sync refuses: {:?}\n{text}", d[0].message));
        let want = outputs(&base.kernel, seed, t).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for objective in [Objective::Bytes, Objective::Barriers] {
            let opts = PlanOptions {
                objective,
                ..PlanOptions::new(t)
            };
            let r = plan_with(&k, &opts).unwrap_or_else(|d| panic!("seed {seed}: {:?}", d[0]));
            if let Err(e) = planned_ok(&k, &r, &opts, &want, seed, &mut tally) {
                panic!("seed {seed}: {e}");
            }
        }
        cases += 1;
    }
    eprintln!("{cases} kernels, {private} private buffers, {carried} carried: {tally:?}");
    assert!(
        private >= 5 && carried >= 5,
        "{cases} kernels: {private} {carried}"
    );
    assert!(tally.reused_bytes >= 2, "{tally:?}");
}

/// A kernel handing buffer `@h` (filled before the loop) to `@g` (filled in the loop, read
/// after it) element by element: iteration `k` reads slot `(k + r1) mod T` of `@h` and then
/// writes slot `(k + r2) mod T` of `@g`, each at a permutation of the threads. Whether `@g`
/// may take `@h`'s bytes depends on `r1` and `r2`: a write must not land on a slot a later
/// iteration still reads, so exactly when `r1 == r2` (the second result).
fn hand_off_kernel(seed: u64) -> (String, bool) {
    let mut r = Rng::new(seed ^ 0x4A4D);
    let mut next = |m: u64| r.below(m);
    let b = [32u64, 64][next(2) as usize];
    let trips = 2 + next(3);
    let (r1, r2) = (next(trips), next(trips));
    let (m1, m2) = (next(b), next(b));
    let n = trips * b;
    let mut s = format!(
        "kernel @h(%x: global f32[{n}], %y: global f32[{n}]) block({b}) {{\n  shared @h : f32[{n}]\n  shared @g : f32[{n}]\n  %t = tid.x\n"
    );
    s += &format!(
        "  for %j = 0 to {trips} step 1 {{\n    %jb = mul %j, {b}\n    %e = add %jb, %t\n    %v = gload %x[%e]\n    store @h[%e], %v\n  }}\n"
    );
    s += &format!(
        "  %p = xor %t, {m1}\n  %q = xor %t, {m2}\n  for %k = 0 to {trips} step 1 {{\n    %k1 = add %k, {r1}\n    %s1 = rem %k1, {trips}\n    %b1 = mul %s1, {b}\n    %i1 = add %b1, %p\n    %a = load @h[%i1]\n    %w = mul %a, 3.0\n    %k2 = add %k, {r2}\n    %s2 = rem %k2, {trips}\n    %b2 = mul %s2, {b}\n    %i2 = add %b2, %q\n    store @g[%i2], %w\n  }}\n"
    );
    s += &format!(
        "  for %j = 0 to {trips} step 1 {{\n    %jb2 = mul %j, {b}\n    %e2 = add %jb2, %t\n    %o = load @g[%e2]\n    gstore %y[%e2], %o\n  }}\n}}\n"
    );
    (s, r1 == r2)
}

#[test]
fn hand_offs_inside_a_loop_keep_results_unchanged() {
    let mut tally = Tally::default();
    let (mut handed, mut kept_apart) = (0, 0);
    for seed in 0..seeds(12) {
        let (text, valid) = hand_off_kernel(seed);
        let k = smemsync::reader::parse_kernel(&text).unwrap_or_else(|d| panic!("{text}\n{d:?}"));
        let t = Target::from_name("gfx942").expect("target");
        let found = !lifetimes(&k).handoffs.is_empty();
        assert_eq!(found, valid, "seed {seed}: hand-off found {found}\n{text}");
        if found {
            handed += 1;
        } else {
            kept_apart += 1;
        }
        let base = synchronize(&k, &t, &PlaceOptions::default())
            .unwrap_or_else(|d| panic!("seed {seed}: sync refuses: {:?}\n{text}", d[0].message));
        let want = outputs(&base.kernel, seed, t).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let opts = PlanOptions::new(t);
        let r = plan_with(&k, &opts).unwrap_or_else(|d| panic!("seed {seed}: {:?}", d[0]));
        if let Err(e) = planned_ok(&k, &r, &opts, &want, seed, &mut tally) {
            panic!("seed {seed}: {e}");
        }
    }
    eprintln!("{handed} hand-offs, {kept_apart} kept apart: {tally:?}");
    assert!(handed >= 2 && kept_apart >= 2, "{handed} {kept_apart}");
    assert!(tally.reused_bytes >= 2, "{tally:?}");
}

/// Where a scratch buffer of a [`ring_kernel`] is used.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Place {
    /// Before the prologue: the ring holds nothing yet.
    Before,
    /// Between the prologue and the main loop: the slots the prologue filled hold data.
    Between,
    /// In the main loop's body: every slot the kernel ever fills is live across its back edge.
    Main,
    /// In the epilogue's body, before its read: the slots the epilogue reads hold data.
    Epilogue,
    /// After the epilogue: the ring is dead.
    After,
}

/// A random multi-buffered kernel: a ring of `S` slots (2 to 4) filled `P` iterations ahead
/// (`1 <= P < S`) over `T` iterations — a prologue filling iterations `0..P`, a main loop
/// prefetching `k + P` and consuming `k`, a peeled epilogue consuming the last `P` — with slot
/// indices by `rem` or by select-wrap slot counters (iteration values from a constant, as
/// `ir::induction` recognizes), and one to three scratch buffers of one slot's size used at
/// random places. Returns the text and, for each scratch buffer, the slots it must never
/// share bytes with (an independent statement of the ring's liveness: the slots holding data
/// while the scratch buffer is used, by construction).
fn ring_kernel(seed: u64) -> (String, Vec<Vec<u64>>) {
    let mut r = Rng::new(seed ^ 0x5106);
    let mut next = |m: u64| r.below(m);
    let b = [32u64, 64][next(2) as usize];
    let s = 2 + next(3);
    let p = 1 + next(s - 1);
    let t = p + 1 + next(5);
    let counters = next(2) == 0;
    let places: Vec<Place> = (0..1 + next(3))
        .map(|_| {
            [
                Place::Before,
                Place::Between,
                Place::Main,
                Place::Epilogue,
                Place::After,
            ][next(5) as usize]
        })
        .collect();
    let m = 1 + next(b - 1);
    let ring = Ring {
        b,
        s,
        p,
        t,
        counters,
        places,
        m,
    };
    (ring.text(), ring.forbidden())
}

/// The shape [`ring_kernel`] draws: rows of `b` elements (and threads), `s` slots filled `p`
/// iterations ahead over `t` iterations, slot counters (`counters`) or `rem`, where each
/// scratch buffer is used, and the xor `m` by which each thread reads another's element.
struct Ring {
    b: u64,
    s: u64,
    p: u64,
    t: u64,
    counters: bool,
    places: Vec<Place>,
    m: u64,
}

impl Ring {
    /// For each scratch buffer, the slots holding data where it is used.
    fn forbidden(&self) -> Vec<Vec<u64>> {
        let (s, p, t) = (self.s, self.p, self.t);
        let live_at = |pl: Place| -> Vec<u64> {
            match pl {
                Place::Before | Place::After => vec![],
                Place::Between => (0..p).map(|j| j % s).collect(),
                Place::Main => (0..t.min(s)).collect(),
                Place::Epilogue => (t - p..t).map(|e| e % s).collect(),
            }
        };
        self.places.iter().map(|&pl| live_at(pl)).collect()
    }

    /// The uses of the scratch buffers placed `at`, indented by `ind`.
    fn scratch(&self, at: Place, ind: &str) -> String {
        let mut c = String::new();
        for (i, _) in self.places.iter().enumerate().filter(|&(_, &x)| x == at) {
            c += &format!(
                "{ind}%cw{i} = itof %t\n{ind}store @c{i}[%t], %cw{i}\n{ind}%cr{i} = load @c{i}[%u]\n{ind}gstore %z[{i}, %t], %cr{i}\n"
            );
        }
        c
    }

    /// The slot counter `v` advanced with a select-wrap, as `%{out}`.
    fn wrap(&self, v: &str, out: &str) -> String {
        format!(
            "    %w{out} = cmp eq {v}, {}\n    %i{out} = add {v}, 1\n    %{out} = select %w{out}, 0, %i{out}\n",
            self.s - 1
        )
    }

    /// The kernel's text.
    fn text(&self) -> String {
        let (b, s, p, t, m, n) = (self.b, self.s, self.p, self.t, self.m, self.places.len());
        let mut k = format!(
            "kernel @ring(%x: global f32[{t}, {b}], %y: global f32[{t}, {b}], %z: global f32[{n}, {b}]) block({b}) {{\n  shared @ring : f32[{s}, {b}]\n"
        );
        for i in 0..n {
            k += &format!("  shared @c{i} : f32[{b}]\n");
        }
        k += &format!("  %t = tid.x\n  %u = xor %t, {m}\n");
        k += &self.scratch(Place::Before, "  ");
        k += &format!(
            "  for %j = 0 to {p} step 1 {{\n    %js = rem %j, {s}\n    %jv = view @ring[%js]\n    %g = gload %x[%j, %t]\n    store %jv[%t], %g\n  }}\n"
        );
        k += &self.scratch(Place::Between, "  ");
        k += &self.main_loop();
        k += &self.epilogue();
        k += &self.scratch(Place::After, "  ");
        k += "}\n";
        k
    }

    /// The main loop: prefetch iteration `k + p`, consume `k`.
    fn main_loop(&self) -> String {
        let (s, p, t) = (self.s, self.p, self.t);
        let main_hi = t - p;
        let mut k = if self.counters {
            format!(
                "  %fp, %fc = for %k = 0 to {main_hi} step 1 iter(%sp = {}, %sc = 0) {{\n",
                p % s
            )
        } else {
            format!(
                "  for %k = 0 to {main_hi} step 1 {{\n    %kp = add %k, {p}\n    %sp = rem %kp, {s}\n    %sc = rem %k, {s}\n"
            )
        };
        k += &format!(
            "    %kq = add %k, {p}\n    %pv = view @ring[%sp]\n    %g2 = gload %x[%kq, %t]\n    store %pv[%t], %g2\n    %cv = view @ring[%sc]\n    %a = load %cv[%u]\n    gstore %y[%k, %t], %a\n"
        );
        k += &self.scratch(Place::Main, "    ");
        if self.counters {
            k += &self.wrap("%sp", "np");
            k += &self.wrap("%sc", "nc");
            k += "    yield %np, %nc\n";
        }
        k += "  }\n";
        k
    }

    /// The peeled epilogue: consume the last `p` iterations.
    fn epilogue(&self) -> String {
        let (s, t) = (self.s, self.t);
        let main_hi = t - self.p;
        let mut k = if self.counters {
            format!(
                "  %fe = for %e = {main_hi} to {t} step 1 iter(%se = {}) {{\n",
                main_hi % s
            )
        } else {
            format!("  for %e = {main_hi} to {t} step 1 {{\n    %se = rem %e, {s}\n")
        };
        // Before the iteration's read of its slot: that slot still holds data (after the read,
        // the slot read last could be handed to the scratch buffer element by element).
        k += &self.scratch(Place::Epilogue, "    ");
        k += "    %ev = view @ring[%se]\n    %b = load %ev[%u]\n    gstore %y[%e, %t], %b\n";
        if self.counters {
            k += &self.wrap("%se", "ne");
            k += "    yield %ne\n";
        }
        k += "  }\n";
        k
    }
}

#[test]
fn dead_ring_slots_lend_their_bytes_and_live_ones_never_do() {
    let mut tally = Tally::default();
    let (mut into_slots, mut cases) = (0, 0);
    for seed in 0..seeds(16) {
        let (text, forbidden) = ring_kernel(seed);
        let k = smemsync::reader::parse_kernel(&text).unwrap_or_else(|d| panic!("{text}\n{d:?}"));
        let t = Target::from_name(["sm_90", "gfx942"][seed as usize % 2]).expect("target");
        let base = synchronize(&k, &t, &PlaceOptions::default())
            .unwrap_or_else(|d| panic!("seed {seed}: sync refuses: {:?}\n{text}", d[0].message));
        let want = outputs(&base.kernel, seed, t).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let opts = PlanOptions::new(t);
        let r = plan_with(&k, &opts).unwrap_or_else(|d| panic!("seed {seed}: {:?}", d[0]));
        if let Err(e) = planned_ok(&k, &r, &opts, &want, seed, &mut tally) {
            panic!("seed {seed}: {e}");
        }
        // The construction's liveness, independent of the planner's: a scratch buffer never
        // shares bytes with a slot holding data while it is used.
        let at = |name: &str| {
            r.plan
                .placements
                .iter()
                .find(|p| k.buffers[p.buffer].name == name)
                .expect("placed")
        };
        let ring = at("ring");
        let width = ring.bytes / k.buffers[ring.buffer].shape[0];
        for (i, slots) in forbidden.iter().enumerate() {
            let c = at(&format!("c{i}"));
            for slot in 0..k.buffers[ring.buffer].shape[0] {
                let lo = ring.offset + slot * width;
                if lo < c.offset + c.bytes && c.offset < lo + width {
                    assert!(
                        !slots.contains(&slot),
                        "seed {seed}: @c{i} over live slot {slot}\n{text}"
                    );
                    into_slots += u64::from(!slots.is_empty());
                }
            }
        }
        cases += 1;
    }
    eprintln!(
        "{cases} ring kernels, {into_slots} scratch buffers in a dead slot while others live: {tally:?}"
    );
    assert!(into_slots >= 2, "{into_slots}");
    assert!(tally.reused_bytes >= 4, "{tally:?}");
}
