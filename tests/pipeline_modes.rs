//! `pipeline --mode` (docs/transforms.md, docs/pipeline.md): the pipelined and synchronized
//! kernel computes what the kernel as written computes, for trip counts 0, 1, below the
//! prefetch distance, equal to the stage count and large, and the checker finds it race-free
//! at each of them (cp-async, tma, warp-specialized).

use smemsync::Kernel;
use smemsync::check::{CheckOptions, Outputs, check_race_free, run};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;
use smemsync::transform::pipeline::PipelinedLoop;
use smemsync::transform::pipeline_cp_async::cp_async_pipeline;
use smemsync::transform::pipeline_tma::tma_pipeline;
use smemsync::transform::pipeline_ws::warp_specialized;

mod common;
use common::{parse_file, parse_verified};

/// Thread t reads its neighbours' elements: the rows need barriers, as written and pipelined.
const STENCIL: &str =
    "kernel @s(%in: global f32[48, 64], %out: global f32[48, 64], %n: i32 in [0, 48]) block(64) {
  shared @row : f32[64]
  %t = tid.x
  %t1 = add %t, 1
  %right = rem %t1, 64
  for %k = LO to %n step 1 {
    stage \"load\" {
      %x = gload %in[%k, %t]
      store @row[%t], %x
    }
    %a = load @row[%right]
    %b = load @row[%t]
    %y = add %a, %b
    gstore %out[%k, %t], %y
  }
}";

/// Two buffers filled by one stage, each thread reading only its own elements: the kernel as
/// written runs without any sync, so it is compared unsynchronized too.
const OWN: &str = "kernel @o(%A: global f32[48, 32], %B: global f32[48, 32], %C: global f32[48, 32], %n: i32 in [0, 48]) block(32) {
  shared @a : f32[32]
  shared @b : f32[32]
  %t = tid.x
  for %k = LO to %n step 1 {
    stage \"load\" {
      %x = gload %A[%k, %t]
      store @a[%t], %x
      %y = gload %B[%k, %t]
      store @b[%t], %y
    }
    %u = load @a[%t]
    %v = load @b[%t]
    %w = mul %u, %v
    gstore %C[%k, %t], %w
  }
}";

fn parse(src: &str, lo: i64) -> Kernel {
    let src = src.replace("LO", &lo.to_string());
    parse_verified(&src)
}

fn opts(t: &Target, n: i64) -> CheckOptions {
    CheckOptions {
        target: Some(*t),
        schedules: 3,
        bounds: vec![("n".to_string(), n)],
        ..Default::default()
    }
}

fn synced(k: &Kernel, t: &Target) -> Kernel {
    synchronize(k, t, &PlaceOptions::default())
        .expect("synchronizes")
        .kernel
}

fn outputs(k: &Kernel, t: &Target, n: i64) -> Outputs {
    let text = smemsync::emit::text::print_kernel(k);
    run(k, 7, &opts(t, n)).unwrap_or_else(|d| panic!("n={n}: {}\n{text}", d.message))
}

type Build = fn(
    &Kernel,
    u32,
    Option<u32>,
) -> Result<(Kernel, Vec<PipelinedLoop>), Vec<smemsync::diag::Diagnostic>>;

/// Pipelines `src` with `d` stages and prefetch `p`, and compares at every trip count.
fn equivalent(src: &str, lo: i64, d: u32, p: u32, runs_unsynced: bool) {
    equivalent_with(cp_async_pipeline, src, lo, d, Some(p), runs_unsynced);
}

/// Builds the pipeline with `build` and compares at trip counts 0, 1, P - 1 (or D - 1 when
/// the mode has no prefetch distance), D and 40.
fn equivalent_with(build: Build, src: &str, lo: i64, d: u32, p: Option<u32>, runs_unsynced: bool) {
    let t = Target::from_name("sm_90").expect("known");
    let k = parse(src, lo);
    let (piped, loops) = build(&k, d, p).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(loops.len(), 1);
    let (before, after) = (synced(&k, &t), synced(&piped, &t));
    let text = smemsync::emit::text::print_kernel(&after);
    let below = p.unwrap_or(d) as i64 - 1;
    for trips in [0, 1, below, d as i64, 40] {
        let n = lo + trips;
        let want = outputs(&before, &t, n);
        if runs_unsynced {
            assert_eq!(outputs(&k, &t, n), want, "as written, n={n}");
        }
        assert_eq!(outputs(&after, &t, n), want, "D={d} P={p:?} n={n}\n{text}");
        let r = check_race_free(&after, &opts(&t, n));
        assert!(
            r.is_race_free(),
            "D={d} P={p:?} n={n}: {}\n{text}",
            r.summary()
        );
    }
}

#[test]
fn cp_async_stencil_computes_the_same_rows_for_every_trip_count() {
    for (d, p) in [(2, 1), (3, 2), (4, 3), (4, 2)] {
        equivalent(STENCIL, 0, d, p, false);
    }
}

#[test]
fn cp_async_loop_from_a_nonzero_bound_keeps_its_slots() {
    equivalent(STENCIL, 3, 3, 2, false);
}

#[test]
fn cp_async_two_buffers_match_the_unsynchronized_kernel() {
    for (d, p) in [(2, 1), (4, 3)] {
        equivalent(OWN, 0, d, p, true);
    }
}

#[test]
fn cp_async_places_one_constant_wait_in_the_main_loop() {
    let t = Target::from_name("sm_90").expect("known");
    let (piped, _) = cp_async_pipeline(&parse(STENCIL, 0), 4, Some(3)).expect("pipelines");
    let text = smemsync::emit::text::print_kernel(&synced(&piped, &t));
    let main = &text[text.find("for %k").expect("main loop")..];
    let wait = main
        .find("cp_async_wait 2")
        .expect("P-1 groups stay in flight");
    let commit = main.find("cp_async_commit").expect("a commit per stage");
    assert!(
        wait < commit,
        "the wait precedes this iteration's commit\n{text}"
    );
    assert!(main.contains("add %k, 3"), "prefetch distance 3\n{text}");
}

/// The stencil with its row filled by a tile copy (the form `--mode tma` and
/// `--mode warp-specialized` take): the copy completes in the thread's cp.async group as
/// written, so the kernel before pipelining is synchronized with a wait and barriers.
const TILE_STENCIL: &str =
    "kernel @s(%in: global f32[48, 64], %out: global f32[48, 64], %n: i32 in [0, 48]) block(64) {
  shared @row : f32[64]
  %t = tid.x
  %t1 = add %t, 1
  %right = rem %t1, 64
  for %k = LO to %n step 1 {
    stage \"load\" {
      cp_async_tile @row <- %in[%k, 0]
    }
    %a = load @row[%right]
    %b = load @row[%t]
    %y = add %a, %b
    gstore %out[%k, %t], %y
  }
}";

/// Two tiles per stage, of different sizes, read in a different pattern.
const TWO_TILES: &str =
    "kernel @two(%A: global f32[48, 32], %B: global f32[48, 64], %C: global f32[48, 32], %n: i32 in [0, 48]) block(32) {
  shared @a : f32[32]
  shared @b : f32[64]
  %t = tid.x
  %r = sub 31, %t
  %t2 = mul %t, 2
  for %k = LO to %n step 1 {
    stage \"load\" {
      cp_async_tile @a <- %A[%k, 0]
      cp_async_tile @b <- %B[%k, 0]
    }
    %u = load @a[%r]
    %v = load @b[%t2]
    %w = mul %u, %v
    gstore %C[%k, %t], %w
  }
}";

#[test]
fn tma_stencil_computes_the_same_rows_for_every_trip_count() {
    for (d, p) in [(2, 1), (3, 2), (4, 2)] {
        equivalent_with(tma_pipeline, TILE_STENCIL, 0, d, Some(p), false);
    }
    equivalent_with(tma_pipeline, TILE_STENCIL, 3, 3, Some(2), false);
    equivalent_with(tma_pipeline, TWO_TILES, 0, 3, Some(2), false);
}

#[test]
fn warp_specialized_stencil_computes_the_same_rows_for_every_trip_count() {
    for d in [2, 3, 4] {
        equivalent_with(warp_specialized, TILE_STENCIL, 0, d, None, false);
    }
    equivalent_with(warp_specialized, TILE_STENCIL, 3, 3, None, false);
    equivalent_with(warp_specialized, TWO_TILES, 0, 2, None, false);
}

#[test]
fn warp_specialized_handshakes_are_proved_for_every_trip_count() {
    use smemsync::check::handshake_proof::{HandshakeVerdict, prove_handshakes};
    let t = Target::from_name("sm_90").expect("known");
    for src in [TILE_STENCIL, TWO_TILES] {
        let (piped, _) = warp_specialized(&parse(src, 0), 3, None).expect("splits");
        let after = synced(&piped, &t);
        let verdicts = prove_handshakes(&after);
        assert_eq!(verdicts.len(), 1, "one role branch");
        for v in verdicts {
            assert!(
                matches!(v, HandshakeVerdict::Proved(_)),
                "{v:?}\n{}",
                smemsync::emit::text::print_kernel(&after)
            );
        }
    }
}

#[test]
fn warp_specialized_mode_writes_no_sync_and_appends_one_producer_warp() {
    let (piped, _) = warp_specialized(&parse(TILE_STENCIL, 0), 2, None).expect("splits");
    assert_eq!(piped.block, [96, 1, 1]);
    let text = smemsync::emit::text::print_kernel(&piped);
    assert!(
        text.contains("group @producer : threads [64, 96)"),
        "{text}"
    );
    for sync in ["barrier", "mbar_", "named_", "cp_async_wait"] {
        let placed = text.lines().any(|l| l.trim_start().starts_with(sync));
        assert!(!placed, "the transform placed `{sync}`\n{text}");
    }
}

#[test]
fn the_gpu_warp_specialized_gemm_is_the_pipeline_output() {
    let root = env!("CARGO_MANIFEST_DIR");
    let input = parse_file(format!("{root}/tests/pipeline/gemm-tiles.kir"));
    let (piped, _) = warp_specialized(&input, 3, None).expect("splits");
    let committed = parse_file(format!("{root}/tests/gpu/gemm-ws-pipelined.kir"));
    assert_eq!(
        smemsync::emit::text::print_kernel(&committed),
        smemsync::emit::text::print_kernel(&piped),
        "regenerate tests/gpu/gemm-ws-pipelined.kir with `smemsync pipeline --mode warp-specialized --stages 3 tests/pipeline/gemm-tiles.kir` (keep its comment header)"
    );
}

#[test]
fn warp_specialized_refusals_name_their_codes() {
    let k = parse(TILE_STENCIL, 0);
    let codes =
        |r: Result<(Kernel, Vec<PipelinedLoop>), Vec<smemsync::diag::Diagnostic>>| -> Vec<String> {
            r.expect_err("refused")
                .into_iter()
                .map(|d| d.code.to_string())
                .collect()
        };
    assert_eq!(codes(warp_specialized(&k, 3, Some(1))), ["E1346"]);
    assert_eq!(codes(warp_specialized(&k, 1, None)), ["E1342"]);
    let nested = TILE_STENCIL
        .replace(
            "for %k = LO to %n step 1 {",
            "for %o = 0 to 1 step 1 {\n  for %k = LO to %n step 1 {",
        )
        .replacen("\n}", "\n}\n}", 1);
    let nk = parse(&nested, 0);
    assert!(codes(warp_specialized(&nk, 2, None)).contains(&"E1347".to_string()));
    let two_d = TILE_STENCIL.replace("block(64)", "block(32, 2)");
    assert!(codes(warp_specialized(&parse(&two_d, 0), 2, None)).contains(&"E1348".to_string()));
    let negative = parse(
        &TILE_STENCIL.replace("%n: i32 in [0, 48]", "%n: i32 in [0, 48], %lo: i32"),
        0,
    );
    let neg =
        smemsync::emit::text::print_kernel(&negative).replace("for %k = 0 to", "for %k = %lo to");
    let neg = parse_verified(&neg);
    assert_eq!(codes(warp_specialized(&neg, 2, None)), ["E1351"]);
    let masked = TILE_STENCIL.replace("%in[%k, 0]", "%in[%k, 0] masked");
    assert_eq!(codes(tma_pipeline(&parse(&masked, 0), 2, None)), ["E1345"]);
}
