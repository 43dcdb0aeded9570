//! Session 38's hostile findings N3 and N4 (kernels in `tests/hostile_n3n4/`):
//!
//! - N3: a persistent warp-specialized pipeline whose roles' pipeline loops run different
//!   trip counts per tile (`0 to %kt` against `1 to %kt` or `2 to %kt`) was flattened
//!   (`mbar_flatten`) and "verified for every trip count" (W0334) although it deadlocks at
//!   three tiles per block: the flattening now needs one trip count per tile in every role,
//!   and the search refutes the kernel (E0306); the mirror stays refused.
//! - N4: a `tx` arrival whose phase no copy completes (the `tma_load` deleted) was a W0318
//!   "not verified"; the waits for that phase can never return: E0306, in the plain, strided,
//!   3-stage, nested and persistent pipelines. Where the byte mismatch is not a shortfall
//!   (the copies write more than expected) the waits stay not decided (W0318).
//!
//! The interpreter confirms the refusals where they matter: the N3 kernels deadlock as
//! written at the bounds the finding names. Debug-build time: about 5 s.

mod common;

use common::smemsync_with_stdin as run;

const DIR: &str = "tests/hostile_n3n4";

/// `sync`'s exit status and standard error on file `name`.
fn sync(name: &str) -> (bool, String) {
    let path = format!("{DIR}/{name}");
    let (ok, _, err) = run(&["sync", "--target", "sm_90", &path], "");
    (ok, err)
}

/// Whether the interpreter (no proof) finds file `name` as written free of races and
/// deadlocks at `bounds`.
fn runs_clean(name: &str, bounds: &str) -> bool {
    let text = std::fs::read_to_string(format!("{DIR}/{name}")).expect("reads");
    let args = [
        "check",
        "--target",
        "sm_90",
        "--no-proof",
        "--bounds",
        bounds,
        "-",
    ];
    run(&args, &text).0
}

#[test]
fn n3_pipelines_of_different_trip_counts_per_tile_are_refused() {
    for (name, bounds) in [
        ("n3-consumers-from-1.kir", "tiles=9,K=65"),
        ("n3-consumers-from-2.kir", "tiles=5,K=192"),
        ("n3-producer-from-1.kir", "tiles=1,K=128"),
    ] {
        let (ok, err) = sync(name);
        assert!(!ok, "{name} accepted:\n{err}");
        assert!(err.contains("error[E0306]"), "{name}:\n{err}");
        assert!(
            !err.contains("W0334"),
            "{name}: still claims every trip count:\n{err}"
        );
        assert!(!runs_clean(name, bounds), "{name} runs clean at {bounds}");
    }
}

#[test]
fn n4_tx_arrivals_without_their_copies_are_refused() {
    for name in [
        "n4-tx-arrival-without-copy.kir",
        "n4-strided-q-load-deleted.kir",
        "n4-3stage-q-load-deleted.kir",
        "n4-nested-load-deleted.kir",
        "n4-persistent-load-deleted.kir",
    ] {
        let (ok, err) = sync(name);
        assert!(!ok, "{name} accepted:\n{err}");
        assert!(
            err.contains("can never return") && err.contains("transaction bytes"),
            "{name}:\n{err}"
        );
    }
}

/// The N4 kernel with a copy of 1024 bytes restored but only `tx` bytes expected: fewer than
/// the copy writes (512) is not a shortfall and stays not decided (W0318, no E0306); the
/// full 1024 is verified; more (2048) can never return.
#[test]
fn n4_only_a_shortfall_of_expected_bytes_is_refuted() {
    let base =
        std::fs::read_to_string(format!("{DIR}/n4-tx-arrival-without-copy.kir")).expect("reads");
    let with_copy = |tx: u32| {
        let arrive =
            format!("      mbar_arrive @qfull[0] tx {tx}\n      tma_load @q <- %X[0], @qfull[0]\n");
        (base.replace("      mbar_arrive @qfull[0] tx 1024\n", &arrive)).replace(
            "kernel @n4(%Y: global f32[256])",
            "kernel @n4(%X: global f32[256], %Y: global f32[256])",
        )
    };
    let sync_text = |text: &str| run(&["sync", "--target", "sm_90", "-"], text);
    let (ok, _, err) = sync_text(&with_copy(512));
    assert!(
        ok && err.contains("W0318") && !err.contains("E0306"),
        "512:\n{err}"
    );
    let (ok, _, err) = sync_text(&with_copy(1024));
    assert!(ok && !err.contains("W0318"), "1024:\n{err}");
    let (ok, _, err) = sync_text(&with_copy(2048));
    assert!(!ok && err.contains("can never return"), "2048:\n{err}");
}
