//! Cross-role handshakes placed by `sync` (docs/pipeline.md): every placement is re-proved by
//! the independent checker for several trip counts, and every placed op is needed (dropping
//! any one makes the checker find a race, a deadlock or an mbarrier used before its init).

use smemsync::check::{CheckOptions, check_race_free};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::{synchronize, without_inserted};
use smemsync::target::Target;

mod common;
use common::parse_file as kernel;

fn opts(t: &Target, n: Option<i64>) -> CheckOptions {
    CheckOptions {
        target: Some(*t),
        schedules: 3,
        bounds: n.map(|n| vec![("n".to_string(), n)]).unwrap_or_default(),
        ..Default::default()
    }
}

/// Synchronizes `path` for `target`, checks the result for each trip count and each mutant
/// that drops one inserted op; returns the number of inserted ops.
fn placed_and_needed(path: &str, target: &str, trips: &[Option<i64>]) -> usize {
    let k = kernel(path);
    let t = Target::from_name(target).expect("known target");
    let s = synchronize(&k, &t, &PlaceOptions::default()).expect("synchronizes");
    assert_eq!(s.handshakes.len(), 1, "{path}: one role branch handled");
    let text = smemsync::emit::text::print_kernel(&s.kernel);
    for &n in trips {
        let r = check_race_free(&s.kernel, &opts(&t, n));
        assert!(r.is_race_free(), "{path} n={n:?}: {}\n{text}", r.summary());
    }
    let inserted = s.inserted().len();
    for i in 0..inserted {
        let m = without_inserted(&s.kernel, s.input_ops, i).expect("mutant");
        let bad = trips
            .iter()
            .any(|&n| !check_race_free(&m, &opts(&t, n)).is_race_free());
        assert!(
            bad,
            "{path} on {target}: inserted op #{i} is not needed\n{text}"
        );
    }
    inserted
}

#[test]
fn named_barrier_handshakes_are_proved_and_each_is_needed() {
    let f = "tests/filetests/handshake/named-barrier-handshakes-come-back-when-removed.kir";
    assert_eq!(placed_and_needed(f, "sm_90", &[None]), 8);
    assert_eq!(placed_and_needed(f, "sm_80", &[None]), 8);
    let f = "tests/filetests/handshake/named-handshakes-hold-for-every-trip-count.kir";
    let trips = [Some(0), Some(1), Some(2), Some(6), Some(40)];
    assert_eq!(placed_and_needed(f, "sm_90", &trips), 8);
}

#[test]
fn mbarrier_handshakes_are_proved_and_each_is_needed() {
    let f = "tests/filetests/handshake/tma-mbarrier-handshakes-come-back-when-removed.kir";
    assert_eq!(placed_and_needed(f, "sm_90", &[None]), 9);
    let f = "tests/filetests/handshake/tma-handshakes-hold-for-every-trip-count.kir";
    let trips = [Some(0), Some(1), Some(2), Some(3), Some(7), Some(40)];
    // Three slots: six inits, the barrier, and a wait and an arrival per role.
    assert_eq!(placed_and_needed(f, "sm_90", &trips), 11);
}

#[test]
fn the_hand_written_examples_are_left_as_written_and_still_check() {
    for (f, written) in [
        ("examples/warp-specialized-named-barriers.kir", 0),
        ("examples/tma-warp-specialized.kir", 0),
    ] {
        let k = kernel(f);
        let t = Target::from_name("sm_90").expect("known");
        let s = synchronize(&k, &t, &PlaceOptions::default()).expect("synchronizes");
        assert!(s.handshakes.is_empty(), "{f}");
        assert_eq!(s.inserted().len(), written, "{f}");
        assert!(check_race_free(&s.kernel, &opts(&t, None)).is_race_free());
    }
}
