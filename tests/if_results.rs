//! Values chosen by `if` results (a slot picked by a branch, as Triton's `scf.if` yields
//! them): the footprint analysis reads result `n` of an `if` as the yield of the arm its
//! condition takes, like a `select` of the two yields (docs/placement.md, "`if` results"). Each
//! generated kernel here is synchronized, must get no W0317 (its indices are all known), and
//! is re-run by the interpreter (`check`, several trip counts): race-free. Kernels whose
//! condition depends on the thread check that such a result is evaluated per thread.

use smemsync::{CheckOptions, SyncOptions, Target};

/// A loop over a `slots`-slot buffer: read slot `%u` in a transposed layout, choose the
/// next slot with an `if` (`cond` on `%u + 1`: `lt`/`ne` take `%u + 1` in the then-arm,
/// `ge`/`eq` in the else-arm, so the slot stays in range), write it, carry it.
fn rotating(slots: i64, cond: &str, other: i64) -> String {
    let (then, els) = match cond {
        "lt" | "ne" => ("%u1".to_string(), other.to_string()),
        _ => (other.to_string(), "%u1".to_string()),
    };
    format!(
        "kernel @k(%n: i32 = 5) block(64) {{
  shared @x : f32[{slots}, 64]
  %t = tid.x
  %r = sub 63, %t
  store @x[0, %t], 0.0
  %res = for %i = 0 to %n step 1 iter(%u = 0) {{
    %y = load @x[%u, %r]
    %u1 = add %u, 1
    %c = cmp {cond} %u1, {slots}
    %nx = if %c {{
      yield {then}
    }} else {{
      yield {els}
    }}
    store @x[%nx, %t], 1.0
    yield %nx
  }}
}}
"
    )
}

/// A slot chosen per thread: threads below `split` write slot 0, the others slot 1; then
/// every thread reads its mirror's element of its own slot.
fn per_thread(split: i64) -> String {
    format!(
        "kernel @k() block(64) {{
  shared @x : f32[2, 64]
  %t = tid.x
  %r = sub 63, %t
  store @x[0, %t], 0.0
  store @x[1, %t], 0.0
  %c = cmp lt %t, {split}
  %s = if %c {{
    yield 0
  }} else {{
    yield 1
  }}
  store @x[%s, %t], 1.0
  %y = load @x[%s, %r]
}}
"
    )
}

fn sync_and_check(src: &str) {
    let p = smemsync::read(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let s = smemsync::synchronize(&p, &SyncOptions::new(Target::new("sm_80").expect("known")))
        .unwrap_or_else(|e| panic!("{e}\n{src}"));
    let w: Vec<_> = s.kernels[0].warnings.iter().map(|d| d.code).collect();
    assert!(!w.contains(&"W0317"), "{w:?}\n{src}");
    for n in [1, 2, 3, 6] {
        let mut o = CheckOptions::new(None);
        o.bounds = vec![("n".into(), n)];
        o.prove = false;
        if !src.contains("%n") {
            o.bounds.clear();
        }
        let v = smemsync::check(&s.program, &o).expect("checks");
        assert!(v[0].is_race_free(), "n={n}: {}\n{}", v[0].summary, s.text());
    }
}

#[test]
fn if_chosen_slots_are_synchronized_race_free() {
    for slots in [2, 3] {
        for cond in ["lt", "ne", "ge", "eq"] {
            for other in [0, 1] {
                sync_and_check(&rotating(slots, cond, other));
            }
        }
    }
}

#[test]
fn a_per_thread_if_result_is_evaluated_per_thread() {
    for split in [0, 1, 31, 32, 33, 64] {
        sync_and_check(&per_thread(split));
    }
}

#[test]
fn the_rotating_slot_needs_one_barrier_per_iteration() {
    // Slot `u` is read, the other one written: only the next iteration meets them.
    let p = smemsync::read(&rotating(2, "lt", 0)).expect("reads");
    let s = smemsync::synchronize(&p, &SyncOptions::new(Target::new("sm_80").expect("known")))
        .expect("syncs");
    assert_eq!(s.kernels[0].stats.barriers_written, 1, "{}", s.text());
}
