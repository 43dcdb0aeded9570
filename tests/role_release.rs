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
    let mut signal =
        String::from("mbar_arrive @full[%s] tx 1024\ntma_load %v <- %X[%i, 0], @full[%s]\n");
    for (d, g) in guards.iter().enumerate().rev() {
        signal = format!("%g{d} = {g}\nif %g{d} {{\n{signal}}}\n");
    }
    let head = |par: &str| {
        format!(
            "for %i = 0 to {trips} step 1 {{\n%q = div %i, 2\n%par = rem %q, 2\n{par}%s = rem %i, 2\n"
        )
    };
    common::TwoRoles {
        name: "nested_elect",
        rows: trips.into(),
        producers: 64,
        elect: false,
        producer: format!(
            "{}mbar_wait @empty[%s], %free\n%v = view @buf[%s]\n{signal}}}\n",
            head("%free = xor %par, 1\n")
        ),
        consumer: format!(
            "{}{}%v = view @buf[%s]\nmbar_wait @full[%s], %par\n%x = load %v[%rev]\n\
             mbar_arrive @empty[%s]\n%y = exp %x\ngstore %Y[%i, %c], %y\n}}\n",
            common::two_roles::consumer_lanes(64, 256),
            head("")
        ),
        ..Default::default()
    }
    .text()
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
