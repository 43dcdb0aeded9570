//! Warp-specialized pipelines inside a persistent kernel's tile loop (docs/async.md, "Tile
//! loops of persistent kernels"): in each role arm `for %tile = bid.x to %tiles step G`
//! around the k-loop, the pipeline counter carried through both loops — the shape of
//! Triton's persistent warp-specialized matmul (`corpus/triton/matmul_persistent_ws_fp16`).
//!
//! - the hand-written kernel and the corpus kernel (an ignored test: seconds) are accepted (their waits taken as
//!   written with W0318 naming the searched tile-loop trip count) and `sync`'s output is
//!   race-free in the interpreter with one and with two tiles per block;
//! - each mutant (the consumers' counter restarting every tile, the producer's `empty` wait
//!   deleted, the consumers' tile loop stepping differently, the consumers' counter not
//!   carried out of the k-loop) races or deadlocks in the interpreter and `sync` refuses it.

mod common;

const KERNEL: &str = "tests/kernels/persistent/tile-loop-in-each-role.kir";
const CORPUS: &str = "corpus/triton/matmul_persistent_ws_fp16.ttgir";

use common::smemsync_with_stdin as run;

/// `sync`'s output of `path`, which must be accepted with W0318 naming the tile loop (the
/// search: the hand-written kernel's constant pipeline trip count) or, flattened
/// (`mbar_flatten`), W0334 and no W0318 (the corpus kernel).
fn synced(path: &str) -> String {
    let (ok, out, err) = run(&["sync", "--target", "sm_90", path], "");
    assert!(ok, "{path} refused:\n{err}");
    let searched = err.contains("W0318") && err.contains("whose bounds read the block id");
    let flattened = err.contains("W0334") && !err.contains("W0318");
    assert!(
        searched != flattened,
        "{path}: neither the searched nor the flattened tile loop:\n{err}"
    );
    assert!(!err.contains("E03"), "{path}:\n{err}");
    out
}

/// The corpus kernel's waits are decided by the flattened argument (W0334, no W0318): 0.6 s
/// of CPU in the release build for the whole `sync`. Ignored until its debug-build time is
/// measured (session 37 ran out of time; the placement, not the mbarrier check, is most of it):
/// `cargo test --release --test persistent_ws -- --ignored`.
#[test]
#[ignore = "debug-build time not yet measured; run with --ignored"]
fn the_corpus_persistent_matmul_is_verified_flattened() {
    let (ok, _, err) = run(&["sync", "--target", "sm_90", CORPUS], "");
    assert!(ok, "{err}");
    assert_eq!(err.matches("warning[W0334]").count(), 8, "{err}");
    assert!(!err.contains("W0318"), "{err}");
}

/// Whether the interpreter finds `text` race-free with parameter values `bounds`.
fn race_free(text: &str, bounds: &str) -> bool {
    run(
        &["check", "--target", "sm_90", "--bounds", bounds, "-"],
        text,
    )
    .0
}

#[test]
fn the_hand_written_persistent_pipeline_is_accepted_and_its_output_race_free() {
    let out = synced(KERNEL);
    // 6 tiles: one per block 0's loop (step 4: tiles 0 and 4); 12: three.
    for b in ["tiles=1", "tiles=6", "tiles=12"] {
        assert!(race_free(&out, b), "sync's output races with {b}:\n{out}");
    }
}

/// Ignored in CI: its `sync` takes about 5 s of CPU in the release build (the mbarrier
/// search over the tile loop's trip count and `%K`), far more in the debug build. Run with
/// `cargo test --release --test persistent_ws -- --ignored`.
#[test]
#[ignore = "seconds in the release build; run with --ignored"]
fn the_corpus_persistent_matmul_is_accepted_and_its_output_race_free() {
    let out = synced(CORPUS);
    // 4 tiles (block 0 runs one) and 144 (block 0 runs tiles 0 and 132); K = 320 is five
    // k-steps, so the three-slot counter wraps inside a tile.
    for b in ["M=256,N=256,K=256", "M=1536,N=1536,K=320"] {
        assert!(race_free(&out, b), "sync's output races with {b}");
    }
}

#[test]
fn broken_persistent_pipelines_race_and_are_refused() {
    let text = std::fs::read_to_string(KERNEL).expect("kernel");
    let mutants = [
        (
            "consumers restart the counter every tile",
            "%m2 = for %k = 0 to 3 step 1 iter(%n = %n0)",
            "%m2 = for %k = 0 to 3 step 1 iter(%n = 0)",
        ),
        (
            "no empty wait",
            "          mbar_wait @empty[%s], %free\n",
            "",
        ),
        (
            "consumers step the tile loop by 2",
            "%o2 = for %tile = %b1 to %tiles step 4",
            "%o2 = for %tile = %b1 to %tiles step 2",
        ),
        (
            "consumers do not carry the counter",
            "yield %m2",
            "yield %n0",
        ),
    ];
    for (what, old, new) in mutants {
        assert_eq!(text.matches(old).count(), 1, "{what}");
        let m = text.replacen(old, new, 1);
        let (ok, _, err) = run(
            &["check", "--target", "sm_90", "--bounds", "tiles=12", "-"],
            &m,
        );
        assert!(
            !ok,
            "{what}: the interpreter finds no race or deadlock:\n{err}"
        );
        let (ok, _, err) = run(&["sync", "--target", "sm_90", "-"], &m);
        assert!(!ok, "{what}: sync accepts it:\n{err}");
        assert!(
            err.contains("E0306") || err.contains("E0307"),
            "{what}:\n{err}"
        );
    }
}

/// Mutants of the corpus kernel's first consumer partition, each a broken protocol: the
/// flattened argument must not verify them (it declines or its verdict is not clean) and the
/// search refuses them. Ignored in CI: the search takes seconds of the release build; run with
/// `cargo test --release --test persistent_ws -- --ignored`.
#[test]
#[ignore = "seconds in the release build; run with --ignored"]
fn broken_corpus_persistent_matmuls_are_refused() {
    let text = std::fs::read_to_string(CORPUS).expect("corpus kernel");
    let mutants = [
        (
            "the consumer's counter restarts every tile",
            "%arg24 = %arg21)",
            "%arg24 = %c0_i64_5)",
        ),
        (
            "the consumer's parity read from the counter's low bit",
            "%acc_27 = arith.andi %acc_23, %c1_i64_6 {async_task_id = array<i32: 1>}",
            "%acc_27 = arith.andi %arg24, %c1_i64_6 {async_task_id = array<i32: 1>}",
        ),
    ];
    let dir = std::env::temp_dir().join(format!("smemsync-pws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (what, from, to) in mutants {
        assert!(text.contains(from), "{what}: pattern not found");
        let path = dir.join("mutant.ttgir");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write mutant");
        let (ok, _, err) = run(
            &["sync", "--target", "sm_90", path.to_str().expect("path")],
            "",
        );
        assert!(
            !ok && err.contains("E0306"),
            "{what}: not refused with E0306:\n{err}"
        );
        assert!(!err.contains("W0334"), "{what}: verified flattened:\n{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
