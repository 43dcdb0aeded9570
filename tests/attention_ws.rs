//! Triton's warp-specialized flash attention (`corpus/triton/attention_fwd_ws_fp16`, and its
//! three-stage variant `attention_fwd_ws_fp16_s3`): a TMA producer partition and two `wgmma`
//! consumer partitions over `for start = 0 to %n_ctx step 64`, the Q tile loaded once before
//! the loops (docs/pipeline.md, "Filled once before the loop"; docs/async.md, "Strided loops
//! over the parameter").
//!
//! `sync` accepts it with every wait verified for every `%n_ctx` (no W0318, no E0307) and its
//! output is race-free in the interpreter at trip counts 0, 1, a partial last block and
//! several blocks.

mod common;

use common::smemsync_with_stdin as run;

/// `sync`'s output of corpus kernel `name`, accepted with every wait verified.
fn synced(name: &str) -> String {
    let path = format!("corpus/triton/{name}.ttgir");
    let (ok, out, err) = run(&["sync", "--target", "sm_90", &path], "");
    assert!(ok, "{path} refused:\n{err}");
    for code in ["W0318", "E0307", "E0306"] {
        assert!(!err.contains(code), "{path}: {code}\n{err}");
    }
    out
}

/// Asserts the interpreter finds `text` race-free at each `%n_ctx` of `values`.
fn race_free_at(text: &str, values: &[i64]) {
    for n in values {
        let bounds = format!("n_ctx={n}");
        let (ok, out, err) = run(
            &["check", "--target", "sm_90", "--bounds", &bounds, "-"],
            text,
        );
        assert!(ok && out.contains("race-free"), "n_ctx={n}:\n{out}\n{err}");
    }
}

#[test]
fn warp_specialized_attention_is_accepted_and_race_free() {
    let out = synced("attention_fwd_ws_fp16");
    race_free_at(&out, &[0, 64, 200]);
}

/// The three-stage variant (its Triton build computes non-finite values at random rows on an
/// H200; corpus/triton/README.md): accepted alike. Seconds in the debug build:
/// `cargo test --release --test attention_ws -- --ignored`.
#[test]
#[ignore]
fn three_stage_warp_specialized_attention_is_accepted_and_race_free() {
    let out = synced("attention_fwd_ws_fp16_s3");
    race_free_at(&out, &[0, 64, 192, 320]);
}
