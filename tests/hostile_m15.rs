//! Session 37's hostile findings M15 and M4: `sync`'s own handshakes either are declined or
//! their output is race-free and deadlock-free in the interpreter.

mod common;

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

fn sync_is_sound(name: &str, src: &str) {
    let k = common::parse_verified_as(name, src);
    let t = Target::from_name("sm_90").expect("target");
    if let Ok(out) = synchronize(&k, &t, &PlaceOptions::default()) {
        if out.placement.warnings.iter().any(|d| d.code == "W1300") {
            return;
        }
        let o = CheckOptions {
            target: Some(t),
            try_proof: false,
            schedules: 2,
            ..Default::default()
        };
        let v = check_race_free(&out.kernel, &o).verdict;
        assert!(
            !matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
            "{name}: {v:?}"
        );
    }
}

#[test]
fn m15_and_m4_outputs_are_sound() {
    for (n, s) in [
        (
            "m15-cp",
            include_str!("hostile_m15/m15-cp-async-producer.kir"),
        ),
        (
            "m15c",
            include_str!("hostile_m15/m15c-tma-store-consumer.kir"),
        ),
        (
            "m15-wgmma",
            include_str!("hostile_m15/m15-wgmma-consumer.kir"),
        ),
        (
            "m4",
            include_str!("hostile_m15/m4-elect-outside-producer.kir"),
        ),
    ] {
        sync_is_sound(n, s);
    }
}
