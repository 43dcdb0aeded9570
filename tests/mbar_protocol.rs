//! `sync` verifies a kernel's own mbarrier waits before it takes them as ordering anything
//! (`analysis::mbar_protocol`, docs/async.md "What `sync` verifies of an mbarrier protocol"),
//! compared with the race checker's interpreter (`check` without the static proof):
//!
//! - E0306 (a wait shown not to wait for the phase it is taken to complete) implies the
//!   interpreter finds a race in the input, or a deadlock where its schedule let the copy land
//!   before the wait (which then waits for a phase that never completes);
//! - `sync` succeeding implies its output is race-free in the interpreter;
//! - the family's kernels are all decidable: no W0318.
//!
//! The family: a single-role TMA pipeline (one elected thread loads slot `i mod S`, every
//! thread waits on the slot's mbarrier with a parity formula, reads it, and a barrier ends the
//! iteration), with and without a prefetch of the next slot, over parity formulas × slots ×
//! trip counts; and the warp-specialized example with its `empty` count and consumer parity
//! varied. Debug-build time: a few seconds (the interpreter runs one schedule per kernel).

mod common;

use smemsync::check::Verdict;
use smemsync::ir::Kernel;
use smemsync::target::Target;

/// Parity formulas of `%i` for `S` slots and `trips` iterations: (name, IR lines defining
/// `%par`, whether every wait then names the phase of the load it reads: `(i div S) mod 2`
/// for every `i < trips`).
fn parities(s: u32, trips: u32) -> Vec<(&'static str, String, bool)> {
    vec![
        (
            "phase",
            format!("    %ph = div %i, {s}\n    %par = rem %ph, 2\n"),
            true,
        ),
        ("iter", "    %par = rem %i, 2\n".into(), s == 1),
        (
            "next-phase",
            format!("    %i1p = add %i, 1\n    %ph = div %i1p, {s}\n    %par = rem %ph, 2\n"),
            false,
        ),
        (
            "flipped",
            format!("    %ph = div %i, {s}\n    %p0 = rem %ph, 2\n    %par = xor %p0, 1\n"),
            false,
        ),
        ("zero", "    %par = add 0, 0\n".into(), trips <= s),
    ]
}

/// The single-role pipeline of `s` slots and `trips` iterations, parity lines `par`.
fn pipeline(s: u32, trips: u32, par: &str, prefetch: bool) -> String {
    let inits: String = (0..s)
        .map(|j| format!("    mbar_init @full[{j}], 1\n"))
        .collect();
    let load = |slot: &str, row: &str| {
        format!(
            "    %v{slot} = view @buf[%{slot}]\n    mbar_arrive @full[%{slot}] tx 256\n    tma_load %v{slot} <- %X[{row}, 0], @full[%{slot}]\n"
        )
    };
    let (pro, issue) = if prefetch {
        (
            format!("  %z = add 0, 0\n  if %el {{\n{}  }}\n", load("z", "0")),
            format!(
                "    %i1 = add %i, 1\n    %more = cmp lt %i1, {trips}\n    %issue = and %el, %more\n    %ps = rem %i1, {s}\n    if %issue {{\n{}    }}\n",
                load("ps", "%i1")
            ),
        )
    } else {
        (
            String::new(),
            format!(
                "    %ps = rem %i, {s}\n    if %el {{\n{}    }}\n",
                load("ps", "%i")
            ),
        )
    };
    format!(
        "kernel @g(%X: global f32[{trips}, 64], %Y: global f32[{trips}, 64]) block(64) {{
  shared @buf : f32[{s}, 64]
  shared @full : mbarrier[{s}]
  %t = tid.x
  %el = cmp eq %t, 0
  if %el {{
{inits}  }}
  barrier
{pro}  for %i = 0 to {trips} step 1 {{
{issue}    %cs = rem %i, {s}
{par}    mbar_wait @full[%cs], %par
    %cv = view @buf[%cs]
    %r = sub 63, %t
    %x = load %cv[%r]
    gstore %Y[%i, %t], %x
    barrier
  }}
}}
"
    )
}

/// What `sync` said of a kernel: Ok, or the codes of its diagnostics.
fn sync_codes(k: &Kernel) -> Result<(Kernel, Vec<String>), Vec<String>> {
    let t = Target::from_name("sm_90").unwrap();
    match smemsync::sync::driver::synchronize(k, &t, &Default::default()) {
        Ok(s) => Ok((
            s.kernel,
            s.placement
                .warnings
                .iter()
                .map(|w| w.code.to_string())
                .collect(),
        )),
        Err(ds) => Err(ds.iter().map(|d| d.code.to_string()).collect()),
    }
}

/// The oracle comparison for one kernel; returns whether `sync` refused it with E0306.
fn compare(name: &str, src: &str) -> bool {
    let k = common::parse_verified_as(name, src);
    match sync_codes(&k) {
        Ok((out, warnings)) => {
            assert!(
                !warnings.iter().any(|c| c == "W0318"),
                "{name}: W0318\n{src}"
            );
            let v = common::interpret_only(&out, 1);
            assert!(
                !matches!(v, Verdict::Race(_)),
                "{name}: `sync` accepted it but its output races\n{src}"
            );
            false
        }
        Err(codes) => {
            // W0318 may come with E0306: a wrong wait also breaks the order of the phases
            // that later arrivals rely on.
            let e0306 = codes.iter().any(|c| c == "E0306");
            assert!(e0306, "{name}: refused without E0306: {codes:?}\n{src}");
            // The wait may return before the copy lands (a race) or, where the copy landed
            // first, wait for a phase that never completes (a deadlock): the schedule the
            // interpreter runs decides which it meets; it must meet one.
            let v = common::interpret_only(&k, 1);
            assert!(
                matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
                "{name}: E0306 but the interpreter finds neither a race nor a deadlock\n{src}"
            );
            true
        }
    }
}

#[test]
fn pipeline_parities_match_the_interpreter() {
    let mut refused = 0;
    let mut cases = 0;
    for s in 1..=3u32 {
        for trips in [s, 2 * s + 1] {
            for prefetch in [false, true] {
                if prefetch && s == 1 {
                    continue; // the prefetch would overwrite the slot being read
                }
                for (pname, par, correct) in parities(s, trips) {
                    let name = format!("S={s} trips={trips} prefetch={prefetch} parity={pname}");
                    let src = pipeline(s, trips, &par, prefetch);
                    let e0306 = compare(&name, &src);
                    // Refused exactly when some iteration waits for a phase other than
                    // its load's.
                    assert_eq!(e0306, !correct, "{name}: refused?\n{src}");
                    refused += e0306 as u32;
                    cases += 1;
                }
            }
        }
    }
    // 10 shapes × 5 formulas; correct: `phase` always, `iter` for one slot, `zero` when
    // each slot is used once.
    assert_eq!((cases, refused), (50, 33), "cases, refused");
}

#[test]
fn warp_specialized_counts_and_parities_match_the_interpreter() {
    let base = std::fs::read_to_string("examples/tma-warp-specialized.kir").unwrap();
    let flip = |s: &str| {
        s.replace(
            "      mbar_wait @full[%s], %par\n",
            "      %fl = xor %par, 1\n      mbar_wait @full[%s], %fl\n",
        )
    };
    let count = |s: &str, n: u32| {
        s.replace(
            "mbar_init @empty[0], 256",
            &format!("mbar_init @empty[0], {n}"),
        )
    };
    let mut got = Vec::new();
    for n in [255, 256] {
        for flipped in [false, true] {
            let mut src = count(&base, n);
            if flipped {
                src = flip(&src);
            }
            got.push(compare(&format!("ws empty[0]={n} flipped={flipped}"), &src));
        }
    }
    assert_eq!(got, [true, true, false, true]);
}

/// The single-role pipeline of `s` slots (no prefetch) with its trip count taken from a
/// parameter without a declared range, Triton's way: `(%K + 63) div 64`.
fn pipeline_unranged(s: u32, par: &str) -> String {
    pipeline(s, 1, par, false)
        .replace(
            "kernel @g(%X: global f32[1, 64], %Y: global f32[1, 64])",
            "kernel @g(%K: i32, %X: global f32[64, 64], %Y: global f32[64, 64])",
        )
        .replace(
            "  for %i = 0 to 1 step 1 {",
            "  %k63 = add %K, 63\n  %T = div %k63, 64\n  for %i = 0 to %T step 1 {",
        )
}

/// An unranged `%K`: the values giving trip counts 0 to 32 are searched. A parity wrong only
/// from trip `S + 1` on (`zero`), or from the second trip (`next-phase`), beyond the one trip
/// that `%K` in 0..16 gives, is E0306 and the interpreter meets a race or a deadlock at the
/// value named; a right one (`phase`) is taken as written (W0318) and the interpreter finds
/// its output race-free at `K` giving 0, 1, 2, S, S + 1 and 2·(2·S) + 1 trips.
#[test]
fn unranged_trip_counts_are_searched_and_match_the_interpreter() {
    for s in [2u32, 3] {
        for (pname, par, _) in parities(s, 64) {
            if !matches!(pname, "phase" | "zero" | "next-phase") {
                continue;
            }
            let name = format!("S={s} unranged K parity={pname}");
            let src = pipeline_unranged(s, &par);
            let k = common::parse_verified_as(&name, &src);
            let t = Target::from_name("sm_90").unwrap();
            match smemsync::sync::driver::synchronize(&k, &t, &Default::default()) {
                Ok(out) => {
                    assert_eq!(pname, "phase", "{name}: accepted\n{src}");
                    let w: Vec<_> = out
                        .placement
                        .warnings
                        .iter()
                        .filter(|w| w.code == "W0318")
                        .collect();
                    assert!(
                        !w.is_empty() && w.iter().all(|w| w.message.contains("taken as written")),
                        "{name}: {w:?}"
                    );
                    for trips in [0, 1, 2, s, s + 1, 4 * s + 1] {
                        let v = common::interpret_at(&out.kernel, 64 * trips as i64);
                        assert!(
                            matches!(v, Verdict::Checked { .. }),
                            "{name} trips={trips}: {v:?}"
                        );
                    }
                }
                Err(ds) => {
                    assert_ne!(pname, "phase", "{name}: refused: {ds:?}");
                    let d = ds
                        .iter()
                        .find(|d| d.code == "E0306")
                        .unwrap_or_else(|| panic!("{name}: {ds:?}"));
                    let note = d
                        .notes
                        .iter()
                        .find_map(|n| n.strip_prefix("with %K = "))
                        .unwrap_or_else(|| panic!("{name}: {d:?}"));
                    let kv: i64 = note.parse().unwrap();
                    assert!(
                        kv > 16,
                        "{name}: found at K = {kv}, which 0..16 already had"
                    );
                    let v = common::interpret_at(&k, kv);
                    assert!(
                        matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
                        "{name} K={kv}: {v:?}"
                    );
                }
            }
        }
    }
}

/// Arrivals by one thread per warp (a class of two threads, `lane == 1`: threads 1 and 33
/// trace alike): the class counts for both. Each warp's leader arrives with 128 bytes and loads its half of the slot; count
/// 2 is right, count 1 completes a phase after one warp's half (E0306), count 3 is not a
/// multiple of the two arrivals (W0318, not trusted: the copy is then left unordered).
#[test]
fn a_class_of_warp_leaders_counts_every_leader() {
    for (n, want) in [(2, "ok"), (1, "E0306"), (3, "W0318")] {
        let src = format!(
            "kernel @g(%X: global f32[8, 64], %Y: global f32[8, 64]) block(64) {{
  shared @buf : f32[2, 2, 32]
  shared @full : mbarrier[2]
  %t = tid.x
  %el = cmp eq %t, 0
  %ln = lane
  %w = warp
  %lead = cmp eq %ln, 1
  if %el {{
    mbar_init @full[0], {n}
    mbar_init @full[1], {n}
  }}
  barrier
  for %i = 0 to 8 step 1 {{
    %s = rem %i, 2
    if %lead {{
      %h = view @buf[%s, %w]
      mbar_arrive @full[%s] tx 128
      %c = mul %w, 32
      tma_load %h <- %X[%i, %c], @full[%s]
    }}
    %ph = div %i, 2
    %par = rem %ph, 2
    mbar_wait @full[%s], %par
    %r = sub 63, %t
    %rw = div %r, 32
    %rl = rem %r, 32
    %x = load @buf[%s, %rw, %rl]
    gstore %Y[%i, %t], %x
    barrier
  }}
}}
"
        );
        let name = format!("warp leaders count {n}");
        let k = common::parse_verified_as(&name, &src);
        match sync_codes(&k) {
            Ok((out, w)) => {
                assert_eq!(want, "ok", "{name}: accepted with {w:?}");
                assert!(w.iter().all(|c| c != "W0318"), "{name}: {w:?}");
                assert!(
                    !matches!(common::interpret_only(&out, 1), Verdict::Race(_)),
                    "{name}"
                );
            }
            Err(codes) => assert!(
                codes.iter().any(|c| c == want),
                "{name}: {codes:?}, want {want}"
            ),
        }
    }
}

/// What `sync` said of a kernel in the rounds family, checked against the interpreter
/// (`schedules` random schedules): a wait it verified leaves the output free of races and
/// deadlocks; E0306 means the input races or deadlocks; anything else (W0318 and the
/// dataflow's refusal) claims nothing.
#[derive(Debug, PartialEq)]
enum Said {
    Verified,
    Wrong,
    NotTrusted,
}

fn compare_rounds(name: &str, src: &str, schedules: u32) -> Said {
    let k = common::parse_verified_as(name, src);
    match sync_codes(&k) {
        Ok((_, warnings)) if warnings.iter().any(|c| c == "W0318") => Said::NotTrusted,
        Ok((out, _)) => {
            let v = common::interpret_only(&out, schedules);
            assert!(
                !matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
                "{name}: `sync` verified it but its output races or deadlocks: {v:?}\n{src}"
            );
            Said::Verified
        }
        Err(codes) if codes.iter().any(|c| c == "E0306") => {
            let v = common::interpret_only(&k, schedules);
            assert!(
                matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
                "{name}: E0306 but the interpreter finds neither a race nor a deadlock\n{src}"
            );
            Said::Wrong
        }
        Err(_) => Said::NotTrusted,
    }
}

/// One TMA load on a fresh mbarrier initialised with `count`: threads below `arrivers`
/// arrive without `tx`; thread `tx` expects the bytes and issues the load, before the
/// arrivals in program text or after them, with a `barrier` between when `barrier`.
fn one_round(count: u32, arrivers: u32, tx: u32, expect_first: bool, barrier: bool) -> String {
    let expect =
        "  if %tx {\n    mbar_expect_tx @full[0], 256\n    tma_load @buf <- %X[0], @full[0]\n  }\n";
    let arrive = "  if %arr {\n    mbar_arrive @full[0]\n  }\n";
    let bar = if barrier { "  barrier\n" } else { "" };
    let (first, second) = if expect_first {
        (expect, arrive)
    } else {
        (arrive, expect)
    };
    format!(
        "kernel @g(%X: global f32[64], %Y: global f32[64]) block(64) {{
  shared @buf : f32[64]
  shared @full : mbarrier[1]
  %t = tid.x
  %t0 = cmp eq %t, 0
  %tx = cmp eq %t, {tx}
  %arr = cmp lt %t, {arrivers}
  if %t0 {{
    mbar_init @full[0], {count}
  }}
  barrier
{first}{bar}{second}  mbar_wait @full[0], 0
  %r = sub 63, %t
  %x = load @buf[%r]
  gstore %Y[%t], %x
}}
"
    )
}

#[test]
fn split_tx_and_counts_match_the_interpreter() {
    let mut got = std::collections::BTreeMap::new();
    for count in 1..=2u32 {
        for arrivers in 1..=2u32 {
            for tx in 0..=1u32 {
                for expect_first in [true, false] {
                    for barrier in [false, true] {
                        let name = format!(
                            "count={count} arrivers={arrivers} tx={tx} first={expect_first} barrier={barrier}"
                        );
                        let src = one_round(count, arrivers, tx, expect_first, barrier);
                        got.insert(name.clone(), compare_rounds(&name, &src, 8));
                    }
                }
            }
        }
    }
    let said = |s: &str| &got[s];
    // The thread that arrives expects the bytes first: verified.
    assert_eq!(
        said("count=1 arrivers=1 tx=0 first=true barrier=false"),
        &Said::Verified
    );
    // Another thread expects them, unordered with the arrival: the phase may complete first.
    assert_eq!(
        said("count=1 arrivers=1 tx=1 first=true barrier=false"),
        &Said::Wrong
    );
    assert_eq!(
        said("count=1 arrivers=1 tx=1 first=false barrier=false"),
        &Said::Wrong
    );
    // Both threads arrive, each after its own expect_tx: verified.
    assert_eq!(
        said("count=2 arrivers=2 tx=1 first=true barrier=false"),
        &Said::Verified
    );
    // Count 2, one arrival: the wait can never return.
    assert_eq!(
        said("count=2 arrivers=1 tx=0 first=true barrier=false"),
        &Said::Wrong
    );
    // Count 1, two arrivals per phase: the count is too small.
    assert_eq!(
        said("count=1 arrivers=2 tx=0 first=true barrier=false"),
        &Said::Wrong
    );
    // A top-level barrier orders another thread's expect_tx before the arrival: verified
    // (session 35's K4).
    assert_eq!(
        said("count=1 arrivers=1 tx=1 first=true barrier=true"),
        &Said::Verified
    );
    // Never a verified wait where a barrier orders the arrival before the expect_tx.
    assert_ne!(
        said("count=1 arrivers=1 tx=1 first=false barrier=true"),
        &Said::Verified
    );
}

#[test]
fn warp_specialized_trip_mismatch_matches_the_interpreter() {
    let base = std::fs::read_to_string("examples/tma-warp-specialized.kir").unwrap();
    let trips = |s: &str, producer: u32, consumer: u32| {
        let (p, c) = s.split_once("  } else {").unwrap();
        format!(
            "{}  }} else {{{}",
            p.replace("for %i = 0 to 8", &format!("for %i = 0 to {producer}")),
            c.replace("for %i = 0 to 8", &format!("for %i = 0 to {consumer}"))
        )
        .replace("global f32[8, 256]", "global f32[12, 256]")
    };
    let mut got = Vec::new();
    for (p, c) in [(8, 8), (9, 8), (8, 9), (11, 8)] {
        got.push(compare_rounds(
            &format!("ws producer={p} consumer={c}"),
            &trips(&base, p, c),
            1,
        ));
    }
    // A consumer round the producer never issues, or a producer refill waiting for a
    // consumer release that never comes: deadlocks.
    assert_eq!(
        got,
        [Said::Verified, Said::Verified, Said::Wrong, Said::Wrong]
    );
}
