//! The interpreter's wgmma operand reads at full block size (docs/checker.md, "Shared reads
//! of a wgmma"): the threads that issue one wgmma share one recording of its reads, which
//! must keep every race the element-by-element recording found. Kernels at 512 threads (four
//! warpgroups) where a store by one thread is unordered with the other threads' wgmma reads
//! (before, between or after their issues; in or out of the loop) are races; the same kernels
//! with the store ordered (a barrier after every thread's wait, or before every issue) are
//! race-free; and the hostile kernel H3 (128x64 and 64x128 operands, 4 trips) is checked
//! quickly (it took 11.6 s CPU per schedule in release before).

use std::time::Instant;

use smemsync::check::{CheckOptions, Verdict, check_race_free};

mod common;
use common::parse_verified as parse;

/// A 512-thread kernel whose loop issues `wgmma @x, @y` `trips` times, with `body_before`
/// at the start of the loop body and `after_loop` after the loop.
fn kernel(trips: u32, body_before: &str, after_loop: &str) -> String {
    format!(
        r#"kernel @k(%n: i32 = {trips}) block(512) target "sm_90" {{
  shared @x : f16[128, 64]
  shared @y : f16[64, 128]
  local_store @x, 1.0 layout "A"
  local_store @y, 1.0 layout "B"
  fence_proxy_async
  barrier
  %t = tid.x
  %r = for %i = 0 to %n step 1 iter(%acc = 0.0) {{
{body_before}
    %d = wgmma @x, @y, %acc
    wgmma_commit
    wgmma_wait 0
    yield %d
  }}
{after_loop}
}}"#
    )
}

fn verdict(src: &str) -> (Verdict, f64) {
    let k = parse(src);
    let opts = CheckOptions {
        try_proof: false,
        schedules: 1,
        ..Default::default()
    };
    let start = Instant::now();
    let v = check_race_free(&k, &opts).verdict;
    (v, start.elapsed().as_secs_f64())
}

/// Thread `who` stores `@x[5, 7]`; inside the loop only in trip `trip`.
fn store_by(who: u32, trip: Option<u32>) -> String {
    let store = "store @x[5, 7], 2.0";
    let inner = match trip {
        Some(i) => format!("%g = cmp eq %i, {i}\n    if %g {{\n      {store}\n    }}"),
        None => store.to_string(),
    };
    format!("  %w = cmp eq %t, {who}\n  if %w {{\n    {inner}\n  }}")
}

#[test]
fn a_store_unordered_with_other_threads_wgmma_reads_is_a_race() {
    // After the loop, no barrier: every other thread's wgmma read of @x[5, 7] is unordered
    // with it, whichever warpgroup the writer is in.
    for who in [0, 1, 130, 300, 511] {
        let src = kernel(2, "", &store_by(who, None));
        let (v, s) = verdict(&src);
        match &v {
            Verdict::Race(w) => {
                assert_eq!(w.buffer, "x", "writer {who}");
                assert_eq!(w.index, vec![5, 7], "writer {who}");
                assert!(
                    w.first.by_engine || w.second.by_engine,
                    "writer {who}: {w:?}"
                );
            }
            other => panic!("writer {who}: expected a race, got {other:?} ({s:.1} s)"),
        }
    }
}

#[test]
fn a_store_between_the_issues_of_one_wgmma_is_a_race() {
    // In the second trip, before its own wgmma: the threads that issued trip 2 earlier (or
    // not yet completed trip 1 in a schedule) read the element unordered with the store.
    for who in [0, 200, 511] {
        let body = store_by(who, Some(1));
        let src = kernel(3, &body, "");
        let (v, s) = verdict(&src);
        assert!(
            matches!(v, Verdict::Race(_)),
            "writer {who}: expected a race, got {v:?} ({s:.1} s)"
        );
    }
}

#[test]
fn ordered_stores_are_not_races() {
    // A barrier after every thread's wait orders all wgmma reads before the store.
    let after = format!("  barrier\n{}", store_by(300, None));
    let (v, s) = verdict(&kernel(2, "", &after));
    assert!(matches!(v, Verdict::Checked { .. }), "{v:?} ({s:.1} s)");
    // A store after a barrier that follows the initial stores, fenced and followed by a
    // barrier, is ordered before every issue.
    let src = kernel(2, "", "").replace(
        "  fence_proxy_async\n  barrier\n  %t = tid.x\n",
        "  barrier\n  %t = tid.x\n  %w = cmp eq %t, 300\n  if %w {\n    store @x[5, 7], 2.0\n  }\n  fence_proxy_async\n  barrier\n",
    );
    let (v, s) = verdict(&src);
    assert!(matches!(v, Verdict::Checked { .. }), "{v:?} ({s:.1} s)");
}

/// H3 (docs/performance.md, "hostfix"): 13 ops, 4 trips of a wgmma on 128x64 and 64x128
/// f16 tiles, 512 threads. Debug build: see the time printed (the limit is generous for a
/// loaded CI machine).
#[test]
fn h3_wgmma_interpretation_at_512_threads_is_fast() {
    let src = kernel(4, "", "");
    let (v, s) = verdict(&src);
    assert!(matches!(v, Verdict::Checked { .. }), "{v:?}");
    eprintln!("H3 at 512 threads, one schedule: {s:.2} s");
    assert!(s < 20.0, "took {s:.1} s");
}
