//! `pipeline --mode` (docs/transforms.md): the pipelined and synchronized kernel computes
//! what the kernel as written computes, for trip counts 0, 1, below the prefetch distance,
//! equal to the stage count and large, and the checker finds it race-free at each of them.

use smemsync::Kernel;
use smemsync::check::{CheckOptions, Outputs, check_race_free, run};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;
use smemsync::transform::pipeline_cp_async::cp_async_pipeline;

/// Thread t reads its neighbours' elements: the rows need barriers, as written and pipelined.
const STENCIL: &str =
    "kernel @s(%in: global f32[48, 64], %out: global f32[48, 64], %n: i32 in [0, 48]) block(64) {
  shared @row : f32[64]
  %t = tid.x
  %t1 = add %t, 1
  %right = rem %t1, 64
  for %k = LO to %n step 1 {
    stage \"load\" {
      %x = gload %in[%k, %t]
      store @row[%t], %x
    }
    %a = load @row[%right]
    %b = load @row[%t]
    %y = add %a, %b
    gstore %out[%k, %t], %y
  }
}";

/// Two buffers filled by one stage, each thread reading only its own elements: the kernel as
/// written runs without any sync, so it is compared unsynchronized too.
const OWN: &str = "kernel @o(%A: global f32[48, 32], %B: global f32[48, 32], %C: global f32[48, 32], %n: i32 in [0, 48]) block(32) {
  shared @a : f32[32]
  shared @b : f32[32]
  %t = tid.x
  for %k = LO to %n step 1 {
    stage \"load\" {
      %x = gload %A[%k, %t]
      store @a[%t], %x
      %y = gload %B[%k, %t]
      store @b[%t], %y
    }
    %u = load @a[%t]
    %v = load @b[%t]
    %w = mul %u, %v
    gstore %C[%k, %t], %w
  }
}";

fn parse(src: &str, lo: i64) -> Kernel {
    let src = src.replace("LO", &lo.to_string());
    smemsync::reader::parse_kernel(&src).expect("parses")
}

fn opts(t: &Target, n: i64) -> CheckOptions {
    CheckOptions {
        target: Some(*t),
        schedules: 3,
        bounds: vec![("n".to_string(), n)],
        ..Default::default()
    }
}

fn synced(k: &Kernel, t: &Target) -> Kernel {
    synchronize(k, t, &PlaceOptions::default())
        .expect("synchronizes")
        .kernel
}

fn outputs(k: &Kernel, t: &Target, n: i64) -> Outputs {
    let text = smemsync::emit::text::print_kernel(k);
    run(k, 7, &opts(t, n)).unwrap_or_else(|d| panic!("n={n}: {}\n{text}", d.message))
}

/// Pipelines `src` with `d` stages and prefetch `p`, and compares at every trip count.
fn equivalent(src: &str, lo: i64, d: u32, p: u32, runs_unsynced: bool) {
    let t = Target::from_name("sm_90").expect("known");
    let k = parse(src, lo);
    let (piped, loops) = cp_async_pipeline(&k, d, Some(p)).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(loops.len(), 1);
    let (before, after) = (synced(&k, &t), synced(&piped, &t));
    let text = smemsync::emit::text::print_kernel(&after);
    for trips in [0, 1, p as i64 - 1, d as i64, 40] {
        let n = lo + trips;
        let want = outputs(&before, &t, n);
        if runs_unsynced {
            assert_eq!(outputs(&k, &t, n), want, "as written, n={n}");
        }
        assert_eq!(outputs(&after, &t, n), want, "D={d} P={p} n={n}\n{text}");
        let r = check_race_free(&after, &opts(&t, n));
        assert!(
            r.is_race_free(),
            "D={d} P={p} n={n}: {}\n{text}",
            r.summary()
        );
    }
}

#[test]
fn cp_async_stencil_computes_the_same_rows_for_every_trip_count() {
    for (d, p) in [(2, 1), (3, 2), (4, 3), (4, 2)] {
        equivalent(STENCIL, 0, d, p, false);
    }
}

#[test]
fn cp_async_loop_from_a_nonzero_bound_keeps_its_slots() {
    equivalent(STENCIL, 3, 3, 2, false);
}

#[test]
fn cp_async_two_buffers_match_the_unsynchronized_kernel() {
    for (d, p) in [(2, 1), (4, 3)] {
        equivalent(OWN, 0, d, p, true);
    }
}

#[test]
fn cp_async_places_one_constant_wait_in_the_main_loop() {
    let t = Target::from_name("sm_90").expect("known");
    let (piped, _) = cp_async_pipeline(&parse(STENCIL, 0), 4, Some(3)).expect("pipelines");
    let text = smemsync::emit::text::print_kernel(&synced(&piped, &t));
    let main = &text[text.find("for %k").expect("main loop")..];
    let wait = main
        .find("cp_async_wait 2")
        .expect("P-1 groups stay in flight");
    let commit = main.find("cp_async_commit").expect("a commit per stage");
    assert!(
        wait < commit,
        "the wait precedes this iteration's commit\n{text}"
    );
    assert!(main.contains("add %k, 3"), "prefetch distance 3\n{text}");
}
