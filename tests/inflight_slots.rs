//! Collective copies issued in a loop by some threads only, into slots indexed by the loop
//! variable (docs/async.md, "A collective copy's view among the threads that issue it"),
//! against the interpreter (`check`):
//!
//! - the hostile tester's J7 (TMA loads into distinct slots `@buf[%i]` under `if %lead`, all
//!   in flight, then waited one by one) and its warp-specialized form are accepted unchanged
//!   for 1 to 8 trips, and `check` finds the kernel race-free;
//! - with the slot `rem %i, 2` and every load in flight (no wait between the reuses of a slot)
//!   `sync` must refuse (E0302/E0602) or synchronize into a kernel `check` finds race-free;
//! - with the slot `rem %i, 2` and a wait in each iteration (issue, wait, read) `sync`
//!   synchronizes, and the result is race-free.
//!
//! Debug build: a few seconds.

use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;
use common::parse_verified as parse;

/// The start of the one-block kernels below: eight slots of `@buf` and their mbarriers,
/// initialized by thread 0 (`%lead`) before a barrier.
const PROLOGUE: &str = "kernel @k(%X: global f32[8, 64], %Y: global f32[8, 64]) block(64) {
  shared @buf : f32[8, 64]
  shared @full : mbarrier[8]
  %t = tid.x
  %lead = cmp eq %t, 0
  if %lead {
    for %k = 0 to 8 step 1 {
      mbar_init @full[%k], 1
    }
  }
  barrier";

/// J7 with `n` trips and slot expression `slot` (of `%i`), the consumer loop after the issue
/// loop.
fn all_in_flight(n: u32, slot: &str) -> String {
    format!(
        r#"{PROLOGUE}
  if %lead {{
    for %i = 0 to {n} step 1 {{
      %s = {slot}
      %v = view @buf[%s]
      mbar_arrive @full[%i] tx 256
      tma_load %v <- %X[%i, 0], @full[%i]
    }}
  }}
  for %i = 0 to {n} step 1 {{
    %s = {slot}
    %v = view @buf[%s]
    mbar_wait @full[%i], 0
    %x = load %v[%t]
    gstore %Y[%i, %t], %x
  }}
}}
"#
    )
}

/// Issue, wait and read in one loop: each iteration's copy is waited for before its read.
fn waited_each_iteration(n: u32, slot: &str) -> String {
    format!(
        r#"{PROLOGUE}
  for %i = 0 to {n} step 1 {{
    %s = {slot}
    %v = view @buf[%s]
    if %lead {{
      mbar_arrive @full[%i] tx 256
      tma_load %v <- %X[%i, 0], @full[%i]
    }}
    mbar_wait @full[%i], 0
    %x = load %v[%t]
    gstore %Y[%i, %t], %x
  }}
}}
"#
    )
}

/// J7's warp-specialized form: warp 0's first lane issues the eight loads (a prologue loop
/// of 2, a loop of 6), warp 1 waits for each and reads it.
const WARP_SPECIALIZED: &str = r#"kernel @k(%X: global f32[8, 64], %Y: global f32[8, 64]) block(64) {
  shared @buf : f32[8, 32]
  shared @full : mbarrier[8]
  %t = tid.x
  %w = warp
  %l = lane
  %lead = cmp eq %t, 0
  if %lead {
    for %k = 0 to 8 step 1 {
      mbar_init @full[%k], 1
    }
  }
  barrier
  %prod = cmp eq %w, 0
  if %prod {
    %el = cmp eq %l, 0
    if %el {
      for %i = 0 to 2 step 1 {
        %v = view @buf[%i]
        mbar_arrive @full[%i] tx 128
        tma_load %v <- %X[%i, 0], @full[%i]
      }
      for %j = 0 to 6 step 1 {
        %i = add %j, 2
        %v = view @buf[%i]
        mbar_arrive @full[%i] tx 128
        tma_load %v <- %X[%i, 0], @full[%i]
      }
    }
  } else {
    for %i = 0 to 8 step 1 {
      %v = view @buf[%i]
      mbar_wait @full[%i], 0
      %x = load %v[%l]
      gstore %Y[%i, %l], %x
    }
  }
}
"#;

fn sm90() -> Target {
    Target::from_name("sm_90").expect("known")
}

fn race_free(k: &smemsync::ir::Kernel) -> bool {
    common::interpret_without_deadlock(k, sm90(), &[]).is_race_free()
}

/// `sync`'s result: the kernel and its syncs written, or the codes of its errors.
fn synced(src: &str) -> Result<(smemsync::ir::Kernel, usize), Vec<&'static str>> {
    let k = parse(src);
    match synchronize(&k, &sm90(), &PlaceOptions::default()) {
        Ok(s) => Ok((
            s.kernel,
            s.placement.stats.barriers_written + s.placement.stats.warp_syncs_written,
        )),
        Err(ds) => Err(ds.iter().map(|d| d.code).collect()),
    }
}

#[test]
fn tma_loads_into_distinct_slots_are_accepted_unchanged() {
    for n in 1..=8 {
        let src = all_in_flight(n, "add %i, 0");
        assert!(
            race_free(&parse(&src)),
            "n={n}: the kernel itself races\n{src}"
        );
        match synced(&src) {
            Ok((out, written)) => {
                assert_eq!(written, 0, "n={n}: a sync written\n{src}");
                assert!(race_free(&out), "n={n}\n{src}");
            }
            Err(codes) => panic!("n={n}: refused with {codes:?}\n{src}"),
        }
    }
    let (out, written) = synced(WARP_SPECIALIZED).expect("the warp-specialized J7 is accepted");
    assert_eq!(written, 0);
    assert!(race_free(&parse(WARP_SPECIALIZED)));
    assert!(race_free(&out));
}

#[test]
fn two_slots_reused_while_in_flight_are_refused_or_synchronized() {
    for n in 1..=8 {
        let src = all_in_flight(n, "rem %i, 2");
        match synced(&src) {
            Ok((out, _)) => assert!(race_free(&out), "n={n}: synchronized, but races\n{src}"),
            Err(codes) => {
                assert!(
                    n >= 3,
                    "n={n}: two distinct slots refused with {codes:?}\n{src}"
                );
                assert!(
                    codes.iter().any(|c| *c == "E0302" || *c == "E0602"),
                    "n={n}: {codes:?}"
                );
            }
        }
    }
}

#[test]
fn slots_waited_in_each_iteration_are_synchronized_race_free() {
    for slot in ["add %i, 0", "rem %i, 2"] {
        for n in 1..=8 {
            let src = waited_each_iteration(n, slot);
            let (out, _) = synced(&src).unwrap_or_else(|c| panic!("n={n} {slot}: {c:?}\n{src}"));
            assert!(
                race_free(&out),
                "n={n} {slot}: synchronized, but races\n{src}"
            );
        }
    }
}
