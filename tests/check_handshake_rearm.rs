//! The handshake proof's re-arm rule (docs/checker.md, "Re-arm after every waiter"): with
//! several roles waiting on one mbarrier array, a slot's phase may complete again only after
//! every waiter has passed its wait of the phase before. The hostile kernel H7 (Triton's
//! warp-specialized matmul without the producer's wait on partition1's "B empty" array)
//! deadlocks from 4 trips on and must not be claimed; the unmodified kernel stays proved; and
//! deleting any single `mbar_wait` of the warp-specialized kernels never yields a handshake
//! claim whose interpretation deadlocks, nor a race-freedom proof whose interpretation races.

use smemsync::check::handshake_proof::{HandshakeVerdict, prove_handshakes};
use smemsync::check::{AccKind, CheckOptions, Verdict, check_race_free, proof::prove};
use smemsync::ir::Kernel;
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;
use common::parse_verified as parse;

const WS: &str = include_str!("handshake_rearm/matmul-ws-synced.kir");
const H7: &str = include_str!("handshake_rearm/h7-producer-wait-deleted-synced.kir");
const CLAIM: &str = "proved for every trip count";

fn claimed(k: &Kernel) -> bool {
    prove_handshakes(k)
        .iter()
        .any(|v| matches!(v, HandshakeVerdict::Proved(_)))
}

/// Interpretation with one schedule at the given bounds (none: the kernel's defaults).
fn interpret(k: &Kernel, bounds: &[(&str, i64)]) -> Verdict {
    let o = CheckOptions {
        try_proof: false,
        schedules: 1,
        bounds: bounds.iter().map(|&(n, v)| (n.to_string(), v)).collect(),
        ..Default::default()
    };
    check_race_free(k, &o).verdict
}

#[test]
fn h7_is_not_claimed_and_the_corpus_kernel_still_is() {
    let ws = parse(WS);
    let v = prove_handshakes(&ws);
    assert!(
        matches!(&v[..], [HandshakeVerdict::Proved(why)] if why.contains(CLAIM)),
        "{v:?}"
    );
    let h7 = parse(H7);
    let v = prove_handshakes(&h7);
    assert!(!claimed(&h7), "H7 claimed: {v:?}");
    assert!(
        matches!(&v[..], [HandshakeVerdict::NotProved(why)] if why.contains("re-arm") && why.contains("@0")),
        "{v:?}"
    );
    // The interpreter decides at 4 trips (3 slots): with the producer's `empty` wait deleted
    // the refill of slot 0 overwrites a stage a consumer warpgroup's wgmma still reads, and
    // the phases then deadlock. Which it meets first depends on its schedule: since a wgmma
    // wait blocks until the whole warpgroup issued the wgmma (docs/async.md, "wgmma
    // completion: the warpgroup"), it meets the race.
    let d = interpret(&h7, &[("K", 256)]);
    let refill_race = matches!(&d, Verdict::Race(w) if w.first.kind == AccKind::AsyncWrite);
    assert!(matches!(d, Verdict::Deadlock(_)) || refill_race, "{d:?}");
}

/// `text` with its `n`-th line holding `mbar_wait` deleted; `None` past the last.
fn without_wait(text: &str, n: usize) -> Option<String> {
    let waits = text.lines().enumerate();
    let at = waits
        .filter(|(_, l)| l.trim_start().starts_with("mbar_wait "))
        .nth(n)?
        .0;
    let kept: Vec<&str> = (text.lines().enumerate())
        .filter(|&(i, _)| i != at)
        .map(|(_, l)| l)
        .collect();
    Some(kept.join("\n") + "\n")
}

/// Every single-wait mutant: a handshake claim never meets a deadlock, a race-freedom proof
/// never a race, at the bounds given. Returns (mutants, claimed, deadlocked).
fn mutants_hold(name: &str, text: &str, bounds: &[&[(&str, i64)]]) -> (usize, usize, usize) {
    let (mut n, mut claims, mut deadlocks) = (0, 0, 0);
    while let Some(m) = without_wait(text, n) {
        n += 1;
        let k = parse(&m);
        let claim = claimed(&k);
        let proved = prove(&k, None).is_ok();
        claims += usize::from(claim);
        for b in bounds {
            let v = interpret(&k, b);
            let dead = matches!(v, Verdict::Deadlock(_));
            deadlocks += usize::from(dead);
            assert!(
                !(claim && dead),
                "{name} without wait #{n} at {b:?}: claimed, deadlocks"
            );
            let bad = matches!(v, Verdict::Race(_) | Verdict::Deadlock(_));
            assert!(
                !(proved && bad),
                "{name} without wait #{n} at {b:?}: proved, {v:?}"
            );
        }
    }
    (n, claims, deadlocks)
}

/// The claims on the corpus kernel's single-wait mutants (static only: fast in CI). Claimed:
/// the producer's wait on @29 (partition0's "B empty": partition0's arrival on @13, which the
/// producer waits on earlier in the body, still orders the re-arm of B after partition0's
/// wait) and on @21 (partition1's "A empty": likewise through @37), and one acquire wait of
/// each consumer, whose deletion is a data race the race proof and the interpreter see, not a
/// hang. Declined: each wait whose deletion lets a waiter fall two phases behind (H7 is #2).
/// `deleting_one_wait_of_the_triton_kernel_never_claims_a_deadlock` interprets them all.
#[test]
fn the_triton_kernels_single_wait_mutants_claimed_are_those_that_cannot_hang() {
    let mut claims = Vec::new();
    let mut n = 0;
    while let Some(m) = without_wait(WS, n) {
        n += 1;
        claims.push(claimed(&parse(&m)));
    }
    // Waits in order: producer @13 @37 @29 @21, partition0 @8 @0, partition1 @4 @0.
    let expect = [false, false, true, true, true, false, false, true];
    assert_eq!(claims, expect);
}

/// Every single-wait mutant of the corpus kernel interpreted at K = 256 (4 trips over 3
/// slots, where a waiter two phases behind hangs, as in H7). About 3 minutes in the debug
/// build under load: run with `cargo test --release --test check_handshake_rearm -- --ignored`.
#[test]
#[ignore]
fn deleting_one_wait_of_the_triton_kernel_never_claims_a_deadlock() {
    let (n, claims, deadlocks) = mutants_hold("matmul_ws", WS, &[&[("K", 256)]]);
    assert_eq!(n, 8, "the corpus kernel's waits changed");
    assert!(
        claims < n && deadlocks > 0,
        "claims {claims}, deadlocks {deadlocks}"
    );
}

#[test]
fn deleting_one_wait_of_the_small_warp_specialized_kernels_never_claims_a_deadlock() {
    let t = Target::from_name("sm_90").expect("known target");
    for (rel, bounds) in [
        ("examples/tma-warp-specialized.kir", &[&[][..]][..]),
        (
            "tests/filetests/handshake/one-producer-and-two-consumer-groups-get-mbarriers.kir",
            &[&[("n", 3)][..], &[("n", 5)][..]][..],
        ),
    ] {
        let k = common::parse_file(rel);
        let s = synchronize(&k, &t, &PlaceOptions::default()).expect("synchronizes");
        assert!(
            claimed(&s.kernel),
            "{rel}: the synchronized kernel is not claimed"
        );
        let text = smemsync::emit::text::print_kernel(&s.kernel);
        let (n, _, _) = mutants_hold(rel, &text, bounds);
        assert!(n >= 2, "{rel}: {n} waits");
    }
}
