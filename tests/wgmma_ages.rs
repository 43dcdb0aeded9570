//! Exact group ages across inner loops (docs/async.md, "Group ages across inner loops"): the
//! barrier placer reads the completions of a dataflow whose constant-trip loop exits keep only
//! the executions that reach them, so a `wgmma_wait` that really completes the youngest
//! execution of a K iteration is credited with it.
//!
//! Scaled-down Triton-shaped wgmma GEMMs (`S` slots of A and B tiles written by plain stores,
//! an inner loop of `T` chained k16 wgmmas, the refill wait `wgmma_wait N` written or left to
//! `sync`, the accumulator read after the K loop or also inside it) are synchronized with the
//! default strategy and with the exhaustive oracle: both must execute as many barriers, the
//! output must be race-free in the interpreter (`n = 256`; also `n = 128` in the sweep), and no W0320 may be
//! emitted (every inner loop here is shorter than the tracked iterations). The full sweep
//! (2 × 4 × 5 × 2 = 80 kernels) is `#[ignore]`d: `cargo test --release --test wgmma_ages --
//! --ignored`. Also: the W0320 case (an inner loop of 12 trips), and copies in an inner loop
//! of symbolic trip count (the invariant-bounds exit rule) against the interpreter.

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::ir::Kernel;
use smemsync::sync::driver::synchronize;
use smemsync::sync::{PlaceOptions, Strategy};
use smemsync::target::Target;

mod common;

/// One GEMM of the family (module doc): `s` slots, `t` inner trips, the written refill wait
/// (`None`: none, and no commits either: `sync` places both), the accumulator also stored
/// inside the K loop (`read_in`).
fn gemm(s: u32, t: u32, wait: Option<u32>, read_in: bool) -> String {
    let w = wait.map_or(String::new(), |n| format!("    wgmma_wait {n}\n"));
    let commit = if wait.is_some() {
        "      wgmma_commit\n"
    } else {
        ""
    };
    let slot = if s == 3 {
        "    %s1 = add %slot, 1\n    %wrap = cmp eq %slot, 2\n    %ns = select %wrap, 0, %s1\n"
    } else {
        "    %ns = sub 1, %slot\n"
    };
    let rin = if read_in {
        "    gstore %C[%t], %d0\n"
    } else {
        ""
    };
    let a = 1024 * t;
    // A, already in core-matrix order in global memory: element q at [q / 1024, (q / 128)
    // mod 8, (q / 64) mod 2, (q / 8) mod 8, q mod 8] of the slot.
    let copy_a = common::copy_loop_128(
        "    ",
        ("e", &(8 * t).to_string()),
        "%A",
        (
            "%eq",
            &[("%ks", 0), ("%mb", 8), ("%kb", 2), ("%mr", 8), ("%kr", 8)],
        ),
        "@a[%slot, %ks, %mb, %kb, %mr, %kr]",
    );
    // B: thread t's element of row f at [t / 64, (t / 8) mod 8, t mod 8].
    let copy_b = common::copy_loop_128(
        "    ",
        ("f", &t.to_string()),
        "%A",
        ("%t", &[("%p64", 0), ("%pr", 8), ("%pk", 8)]),
        "@b[%slot, %f, 0, %p64, %pr, %pk]",
    );
    format!(
        "kernel @gemm(%n: i32 in [64, 256] = 256, %A: global f16[{a}], %C: global f32[512]) block(128) {{
  shared @a : f16[{s}, {t}, 8, 2, 8, 8]
  shared @b : f16[{s}, {t}, 1, 2, 8, 8]
  %t = tid.x
  %z = const 0.0 : f32
  %r0, %r1, %r2, %r3, %sl = for %k = 0 to %n step 64 iter(%c0 = %z, %c1 = %z, %c2 = %z, %c3 = %z, %slot = 0) {{
{w}{copy_a}{copy_b}    %d0, %d1, %d2, %d3 = for %kk = 0 to {t} step 1 iter(%e0 = %c0, %e1 = %c1, %e2 = %c2, %e3 = %c3) {{
      %av = view @a[%slot, %kk]
      %bv = view @b[%slot, %kk]
      %g0, %g1, %g2, %g3 = wgmma %av, %bv, %e0, %e1, %e2, %e3
{commit}      yield %g0, %g1, %g2, %g3
    }}
{rin}{slot}    yield %d0, %d1, %d2, %d3, %ns
  }}
  gstore %C[%t], %r0
  %t1 = add %t, 128
  gstore %C[%t1], %r1
  %t2 = add %t, 256
  gstore %C[%t2], %r2
  %t3 = add %t, 384
  gstore %C[%t3], %r3
}}
"
    )
}

fn sm90() -> Target {
    Target::from_name("sm_90").expect("known target")
}

/// The synchronized kernel, the barriers it executes (at the parameters' defaults) and the
/// codes of its warnings.
fn synced(text: &str, strategy: Strategy) -> (Kernel, u64, Vec<&'static str>) {
    let k = common::parse_verified(text);
    let opts = PlaceOptions {
        strategy,
        ..Default::default()
    };
    let s = synchronize(&k, &sm90(), &opts).expect("synchronizes");
    let codes = s.placement.warnings.iter().map(|w| w.code).collect();
    (s.kernel, s.placement.stats.inserted_executed, codes)
}

/// The interpreter finds no race (nor deadlock) at each of `bounds`.
fn assert_race_free(name: &str, k: &Kernel, target: &Target, bounds: &[&[(&str, i64)]]) {
    for b in bounds {
        let opts = CheckOptions {
            target: Some(*target),
            try_proof: false,
            schedules: 2,
            bounds: b.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            ..Default::default()
        };
        let v = check_race_free(k, &opts).verdict;
        assert!(
            matches!(v, Verdict::Checked { .. }),
            "{name}: the synchronized kernel is not race-free at {b:?}: {v:?}\n{}",
            smemsync::emit::text::print_kernel(k)
        );
    }
}

/// The K trip counts the interpreter runs: 4 (`n = 256`, every slot refilled) in CI, also 2
/// in the sweep.
const CI_BOUNDS: &[&[(&str, i64)]] = &[&[("n", 256)]];
const SWEEP_BOUNDS: &[&[(&str, i64)]] = &[&[("n", 128)], &[("n", 256)]];

/// One GEMM: the default placement executes as many barriers as the exhaustive oracle's
/// (and `expect`, where given), emits no W0320, and is race-free at `bounds`.
fn gemm_case(
    s: u32,
    t: u32,
    wait: Option<u32>,
    read_in: bool,
    expect: Option<u64>,
    bounds: &[&[(&str, i64)]],
) {
    let name = format!("S={s} T={t} wait={wait:?} read_in={read_in}");
    let text = gemm(s, t, wait, read_in);
    let (out, executed, codes) = synced(&text, Strategy::Optimal);
    let (_, exhaustive, _) = synced(&text, Strategy::Exhaustive);
    assert_eq!(
        executed, exhaustive,
        "{name}: default and exhaustive placements differ"
    );
    if let Some(e) = expect {
        assert_eq!(executed, e, "{name}: barriers executed at n = 256");
    }
    assert!(
        !codes.contains(&"W0320"),
        "{name}: W0320 on an inner loop of {t} trips"
    );
    assert_race_free(&name, &out, &sm90(), bounds);
}

#[test]
fn scaled_down_wgmma_gemms_are_placed_at_the_exhaustive_minimum() {
    // The file test's shape, and a written `wgmma_wait 2` with two wgmmas per iteration: the
    // wait at k + 2 completes iteration k's youngest group, the barrier of k + 2 orders it
    // before the refill at k + 3 (one barrier per iteration; two before exact ages).
    gemm_case(3, 4, None, false, Some(4), CI_BOUNDS);
    gemm_case(3, 2, Some(2), false, Some(4), CI_BOUNDS);
    // One group per iteration: `wgmma_wait 2` completes iteration k only at k + 3, the
    // refill's own iteration, and a barrier must follow it.
    gemm_case(3, 1, Some(2), false, Some(8), CI_BOUNDS);
    // Two slots: the refill comes at k + 2, a barrier after the wait is needed.
    gemm_case(2, 2, Some(1), false, Some(8), CI_BOUNDS);
    // The accumulator read inside the K loop waits for every group there.
    gemm_case(3, 3, Some(3), true, Some(4), CI_BOUNDS);
}

/// The whole family (80 kernels, several minutes in the debug build): run with
/// `cargo test --release --test wgmma_ages -- --ignored`.
#[test]
#[ignore = "sweep: cargo test --release --test wgmma_ages -- --ignored"]
fn every_scaled_down_wgmma_gemm_is_placed_at_the_exhaustive_minimum() {
    for s in [2, 3] {
        for t in 1..=4 {
            for wait in [None, Some(0), Some(1), Some(2), Some(3)] {
                for read_in in [false, true] {
                    gemm_case(s, t, wait, read_in, None, SWEEP_BOUNDS);
                }
            }
        }
    }
}

#[test]
fn a_wait_after_a_long_inner_loop_is_reported_when_not_credited() {
    // Twelve inner trips: the executions of the previous K iteration merge with the saturated
    // ones when the inner loop is re-entered, and the youngest test cannot tell whether the
    // written `wgmma_wait 2` completes the youngest: W0320, counted as conservative.
    let k = common::parse_verified(&gemm(3, 12, Some(2), false));
    let s = synchronize(&k, &sm90(), &PlaceOptions::default()).expect("synchronizes");
    let w: Vec<_> = s
        .placement
        .warnings
        .iter()
        .filter(|w| w.code == "W0320")
        .collect();
    assert_eq!(w.len(), 1, "one W0320: {:?}", s.placement.warnings);
    assert!(w[0].message.contains("wgmma_wait 2"), "{}", w[0].message);
    let counted = s
        .placement
        .warnings
        .iter()
        .filter(|w| smemsync::sync::is_conservative(w.code))
        .count();
    assert_eq!(s.placement.stats.conservative, counted);
    assert!(counted >= 1);
}

/// cp.async copies in an inner loop of `%m` trips (bounds the same in every K iteration),
/// the previous slot read by other threads; `wait` is the written wait at the top.
fn copy_loop(wait: Option<u32>, hi: &str) -> String {
    let w = wait.map_or(String::new(), |n| format!("    cp_async_wait {n}\n"));
    format!(
        "kernel @k(%n: i32 in [1, 6] = 4, %m: i32 in [1, 3] = 2, %X: global f32[4, 64], %out: global f32[64]) block(64) {{
  shared @a : f32[2, 3, 64]
  %t = tid.x
  %r = sub 63, %t
  %f = itof %t
  store @a[1, 0, %t], %f
  for %i = 0 to %n step 1 {{
    %s = rem %i, 2
{w}    for %j = 0 to {hi} step 1 {{
      cp_async @a[%s, %j, %t] <- %X[%j, %t]
      cp_async_commit
    }}
    %p = sub 1, %s
    %x = load @a[%p, 0, %r]
    gstore %out[%t], %x
  }}
}}
"
    )
}

#[test]
fn copies_in_an_inner_loop_of_symbolic_trips_stay_race_free() {
    // The exit rule for invariant bounds drops the zero-trip copy of an entry the loop
    // itself issued in an earlier instance; the interpreter checks every trip count of `%m`
    // (1 is the one that rule relies on) and K trip counts 1 to 4.
    let target = Target::from_name("sm_80").expect("known target");
    for wait in [None, Some(1), Some(2)] {
        for hi in ["%m", "1", "2"] {
            let k = common::parse_verified(&copy_loop(wait, hi));
            let s = synchronize(&k, &target, &PlaceOptions::default()).expect("synchronizes");
            let bounds: Vec<Vec<(&str, i64)>> = (1..=3)
                .flat_map(|m| (1..=4).map(move |n| vec![("n", n), ("m", m)]))
                .collect();
            let b: Vec<&[(&str, i64)]> = bounds.iter().map(|v| v.as_slice()).collect();
            assert_race_free(&format!("wait={wait:?} hi={hi}"), &s.kernel, &target, &b);
        }
    }
}
