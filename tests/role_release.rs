//! The role barrier before an elected signal (docs/placement.md, "Mbarrier objects", rule 2)
//! when the election is nested in more than one thread-dependent `if`: the producer role's
//! threads all wait on `empty`, and one thread, chosen by two or three nested `if`s, issues
//! the refill. `sync` must order the role's wait before the signal by a barrier of the role;
//! without it the interpreter finds the lost-phase deadlock (C0002), with it `check` is clean.

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::ir::OpKind;
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::{synchronize, without_inserted};
use smemsync::target::Target;

mod common;
use common::parse_verified;

/// A warp-specialized TMA pipeline whose producer role (threads 0-63, two warps) waits on
/// `empty` in every thread and signals from thread 0 under `guards` (nested `if`s, each a
/// condition on `%t`, outermost first).
fn pipeline(guards: &[&str], trips: u32) -> String {
    let mut signal = String::from(
        "mbar_arrive @full[%s] tx 1024\n        tma_load %v <- %X[%i, 0], @full[%s]\n",
    );
    for (d, g) in guards.iter().enumerate().rev() {
        signal = format!("%g{d} = {g}\n        if %g{d} {{\n        {signal}        }}\n");
    }
    format!(
        "kernel @nested_elect(%X: global f32[{trips}, 256], %Y: global f32[{trips}, 256]) block(320) {{
  group @producer : threads [0, 64)
  group @consumers : threads [64, 320)
  shared @buf : f32[2, 256]
  shared @full : mbarrier[2]
  shared @empty : mbarrier[2]
  %t = tid.x
  %lead = cmp eq %t, 0
  if %lead {{
    mbar_init @full[0], 1
    mbar_init @full[1], 1
    mbar_init @empty[0], 256
    mbar_init @empty[1], 256
  }}
  barrier
  %isp = in_group @producer
  if %isp {{
    for %i = 0 to {trips} step 1 {{
      %q = div %i, 2
      %par = rem %q, 2
      %free = xor %par, 1
      %s = rem %i, 2
      mbar_wait @empty[%s], %free
      %v = view @buf[%s]
      {signal}
    }}
  }} else {{
    %c = sub %t, 64
    %rev = sub 255, %c
    for %i = 0 to {trips} step 1 {{
      %q = div %i, 2
      %par = rem %q, 2
      %s = rem %i, 2
      %v = view @buf[%s]
      mbar_wait @full[%s], %par
      %x = load %v[%rev]
      mbar_arrive @empty[%s]
      %y = exp %x
      gstore %Y[%i, %c], %y
    }}
  }}
}}
"
    )
}

fn check(k: &smemsync::ir::Kernel, t: &Target) -> smemsync::check::CheckReport {
    let o = CheckOptions {
        target: Some(*t),
        schedules: 4,
        ..Default::default()
    };
    check_race_free(k, &o)
}

/// `sync` places a role barrier that `check` needs: the result is clean, and dropping any
/// inserted `named_sync` deadlocks (C0002) in the interpreter.
fn role_barrier_placed_and_needed(guards: &[&str], trips: u32) {
    let src = pipeline(guards, trips);
    let k = parse_verified(&src);
    let t = Target::from_name("sm_90").expect("known target");
    let s = synchronize(&k, &t, &PlaceOptions::default()).expect("synchronizes");
    let text = smemsync::emit::text::print_kernel(&s.kernel);
    let r = check(&s.kernel, &t);
    assert!(
        r.is_race_free(),
        "{guards:?}: the synchronized kernel fails: {}\n{text}",
        r.summary()
    );
    let inserted = s.inserted();
    let named: Vec<usize> = (0..inserted.len())
        .filter(|&i| matches!(s.kernel.ops[inserted[i]].kind, OpKind::NamedSync { .. }))
        .collect();
    assert!(
        !named.is_empty(),
        "{guards:?}: no role barrier placed\n{text}"
    );
    for i in named {
        let m = without_inserted(&s.kernel, s.input_ops, i).expect("mutant");
        match check(&m, &t).verdict {
            Verdict::Deadlock(d) => assert_eq!(d.code, "C0002", "{guards:?}: {}", d.message),
            v => panic!(
                "{guards:?}: without inserted op #{i} the kernel is not a deadlock: {v:?}\n{text}"
            ),
        }
    }
}

#[test]
fn an_election_directly_in_the_role_gets_the_role_barrier() {
    role_barrier_placed_and_needed(&["cmp eq %t, 0"], 8);
}

#[test]
fn an_election_nested_in_two_ifs_gets_the_role_barrier() {
    role_barrier_placed_and_needed(&["cmp lt %t, 32", "cmp eq %t, 0"], 8);
    role_barrier_placed_and_needed(&["cmp lt %t, 32", "cmp eq %t, 0"], 16);
}

#[test]
fn an_election_nested_in_three_ifs_gets_the_role_barrier() {
    role_barrier_placed_and_needed(&["cmp lt %t, 32", "cmp lt %t, 8", "cmp eq %t, 0"], 8);
}
