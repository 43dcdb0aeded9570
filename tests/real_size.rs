//! The benchmark's generated real-size kernels (`smemsync::bench_kernels`), scaled down so
//! that every answer can be checked:
//! - the flash-attention kernel, synchronized by `sync`, computes softmax attention: the
//!   interpreter's output equals a plain f64 reference (within the f16 rounding of `P`) on
//!   several seeds, rolled and unrolled, with 2 and 3 stages; without its syncs it races;
//! - for the GEMM and flash generators, the optimal placement executes as many block
//!   barriers as the exhaustive oracle given the same waits, and writes no more syncs; both
//!   placements are re-checked by the independent checker (`check`).

use smemsync::bench_kernels::{FlashShape, GemmShape, flash, gemm};
use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::ir::edit::apply;
use smemsync::sync::driver::{Synchronized, synchronize};
use smemsync::sync::{PlaceOptions, Strategy};
use smemsync::target::Target;

mod common;
use common::parse_verified as parse;

/// 64 threads (two 32-wide warps: the K/V tiles cross warps, a row's 4 threads share one),
/// a 16×8 Q tile, 8-row KV blocks.
fn small_flash(stages: u32, unrolled: bool) -> FlashShape {
    FlashShape {
        bm: 16,
        bn: 8,
        d: 8,
        threads: 64,
        cols: 4,
        stages,
        unrolled,
        k_first: false,
    }
}

/// A 16×16×8 GEMM tile on 64 threads (an 8 × 8 grid), 3 stages.
fn small_gemm(unrolled: bool) -> GemmShape {
    GemmShape {
        bm: 16,
        bn: 16,
        bk: 8,
        threads: 64,
        stages: 3,
        unrolled,
    }
}

fn sm80() -> Target {
    Target::from_name("sm_80").expect("known target")
}

fn sync_with(src: &str, strategy: Strategy) -> Synchronized {
    let opts = PlaceOptions {
        strategy,
        ..Default::default()
    };
    synchronize(&parse(src), &sm80(), &opts)
        .unwrap_or_else(|d| panic!("{strategy:?} sync fails: {d:?}\n{src}"))
}

fn print(k: &smemsync::Kernel) -> String {
    smemsync::emit::text::print_kernel(k)
}

/// The interpreter's final global buffers for `text` at `N = n` and `seed`.
fn run(text: &str, n: i64, seed: u64) -> Vec<smemsync::Buffer> {
    let program = smemsync::read(text).expect("synchronized kernel reads back");
    let mut opts = smemsync::RunOptions::new(Some(smemsync::Target::new("sm_80").unwrap()));
    opts.bounds = vec![("N".into(), n)];
    opts.seed = seed;
    let mut out = smemsync::run(&program, &opts).unwrap_or_else(|e| panic!("run fails: {e}"));
    out.remove(0).buffers
}

/// Softmax attention `O = softmax(Q·Kᵀ / √d)·V` over the first `nb·bn` rows of K and V, in
/// f64, from the inputs as the interpreter stored them (already rounded to f16).
fn reference(sh: &FlashShape, q: &[f64], k: &[f64], v: &[f64], n: usize) -> Vec<f64> {
    let (bm, d) = (sh.bm as usize, sh.d as usize);
    let rows = n / sh.bn as usize * sh.bn as usize;
    let scale = 1.0 / (d as f64).sqrt();
    let mut o = vec![0.0; bm * d];
    for r in 0..bm {
        let s: Vec<f64> = (0..rows)
            .map(|j| (0..d).map(|e| q[r * d + e] * k[j * d + e]).sum::<f64>() * scale)
            .collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let l: f64 = p.iter().sum();
        for e in 0..d {
            o[r * d + e] = (0..rows).map(|j| p[j] * v[j * d + e]).sum::<f64>() / l;
        }
    }
    o
}

#[test]
fn synchronized_flash_attention_computes_softmax_attention() {
    for (stages, unrolled) in [(2, false), (3, false), (3, true)] {
        let sh = small_flash(stages, unrolled);
        let src = flash(&sh).expect("shape divides");
        let text = print(&sync_with(&src, Strategy::Optimal).kernel);
        // 4 KV blocks (more than the stages: slots are refilled), then 5 (a partial round).
        for (n, seed) in [(32, 1), (32, 7), (40, 3)] {
            let bufs = run(&text, n, seed);
            let data = |name: &str| {
                let b = bufs.iter().find(|b| b.name == name).expect("buffer");
                b.data.clone()
            };
            let want = reference(&sh, &data("Q"), &data("K"), &data("V"), n as usize);
            let got = data("O");
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                // P is rounded to f16 before P·V (relative 2^-11 per term).
                assert!(
                    (g - w).abs() <= 2e-3 + 2e-3 * w.abs(),
                    "stages {stages}, unrolled {unrolled}, N={n}, seed {seed}: O[{i}] = {g}, reference {w}"
                );
            }
        }
    }
}

/// The unsynchronized kernel races (the syncs `sync` placed are needed), and the
/// synchronized one is race-free on the checker's interpreter over several schedules.
#[test]
fn flash_attention_races_without_its_syncs() {
    let src = flash(&small_flash(3, false)).expect("shape divides");
    let opts = CheckOptions {
        target: Some(sm80()),
        bounds: vec![("N".into(), 32)],
        ..CheckOptions::default()
    };
    let raw = check_race_free(&parse(&src), &opts);
    assert!(matches!(raw.verdict, Verdict::Race(_)), "{:?}", raw.verdict);
}

/// Candidate sync points the exhaustive search may branch over here: the placer's own
/// `Strategy::Exhaustive` refuses more than 40, fewer than these kernels have (each gap of a
/// pipelined loop body is a candidate); its pruning keeps 400 tractable on them.
const CANDIDATES: usize = 400;

/// The exhaustive oracle on the kernel the optimal placement ran on (`with_waits`: the same
/// waits), built as `sync::place_with` builds its input, with [`CANDIDATES`], from the full
/// hazard set (`find_all_hazards`: no nearest-source, completion or deep blockers), so that
/// what pruning drops is checked too.
fn exhaustive(with_waits: &smemsync::Kernel) -> smemsync::sync::Placement {
    use smemsync::analysis::footprint::Footprints;
    use smemsync::analysis::hazards::find_all_hazards;
    use smemsync::diag::Severity;
    use smemsync::sync::{PointIndex, SyncModel, exhaustive, finish};
    let target = sm80();
    let fp = Footprints::new(with_waits, target.warp);
    let hz = find_all_hazards(with_waits, &target);
    let errors = hz.findings.iter().filter(|d| d.severity == Severity::Error);
    assert_eq!(errors.count(), 0, "{:?}", hz.findings);
    let mut model = SyncModel::new(with_waits, &fp, &Default::default());
    model.enable_named(&target);
    let mut ex_index = PointIndex::default();
    for p in &model.existing {
        ex_index.insert(*p);
    }
    let (existing, pending): (Vec<usize>, Vec<usize>) =
        (0..hz.hazards.len()).partition(|&i| ex_index.covers(&hz.hazards[i]));
    let points = exhaustive::place(&model, &hz.hazards, &pending, CANDIDATES)
        .expect("within the candidate cap");
    finish(&model, hz.hazards, existing, &pending, points)
}

/// Optimal against exhaustive on one generated kernel (same waits); both placements
/// re-checked by `check` with `param` at `value`. Returns the optimal placement's block
/// barriers and warp syncs written.
fn against_oracle(name: &str, src: &str, param: &str, value: i64) -> (usize, usize) {
    let opt = sync_with(src, Strategy::Optimal);
    let ex = exhaustive(opt.with_waits());
    let (o, e) = (&opt.placement.stats, &ex.stats);
    assert_eq!(
        o.inserted_executed,
        e.inserted_executed,
        "{name}: optimal executes {} barriers, the exhaustive oracle {}\n{}\n{:?}",
        o.inserted_executed,
        e.inserted_executed,
        print(&opt.kernel),
        ex.plan
    );
    assert!(
        o.barriers_written + o.warp_syncs_written <= e.barriers_written + e.warp_syncs_written,
        "{name}: optimal writes more syncs than the oracle"
    );
    let ex_kernel = apply(opt.with_waits(), &ex.plan).expect("plan anchored in its kernel");
    for (who, k) in [("optimal", &opt.kernel), ("exhaustive", &ex_kernel)] {
        let opts = CheckOptions {
            target: Some(sm80()),
            bounds: vec![(param.into(), value)],
            schedules: 2,
            ..CheckOptions::default()
        };
        let k = parse(&print(k));
        let r = check_race_free(&k, &opts);
        assert!(
            matches!(r.verdict, Verdict::Proved { .. } | Verdict::Checked { .. }),
            "{name}, {who}: {:?}\n{}",
            r.verdict,
            print(&k)
        );
    }
    (o.barriers_written, o.warp_syncs_written)
}

#[test]
fn scaled_down_gemms_are_placed_at_the_exhaustive_minimum() {
    // The 32x32x16 tile is the unrolled t64 shape of `bench --real` scaled down: 8 copies per
    // buffer and a 4x4 register tile (4 readers per buffer), whose reader -> copy pairs
    // deep blockers drop (`analysis::deep_blockers`).
    let t64 = GemmShape {
        bm: 32,
        bn: 32,
        bk: 16,
        ..small_gemm(true)
    };
    for (sh, k) in [(small_gemm(false), 24), (small_gemm(true), 24), (t64, 48)] {
        let src = gemm(&sh).expect("shape divides");
        let name = format!(
            "gemm {}x{}x{} t64 unrolled={}",
            sh.bm, sh.bn, sh.bk, sh.unrolled
        );
        // One barrier per K iteration: after the wait for the current slot, before the refill
        // of the slot the previous iteration read.
        assert_eq!(against_oracle(&name, &src, "K", k), (1, 0), "{name}");
    }
    // The oracle's full set is larger there: the comparison covers dropped hazards.
    let synced = sync_with(&gemm(&t64).expect("shape divides"), Strategy::Optimal);
    let k = synced.with_waits();
    let kept = smemsync::analysis::hazards::find_hazards(k, &sm80())
        .hazards
        .len();
    let full = smemsync::analysis::hazards::find_all_hazards(k, &sm80())
        .hazards
        .len();
    assert!(kept < full, "32x32x16: {kept} kept of {full}");
}

/// In either load order of the S loop (K tile first, or the Q tile first) the K tile's wait
/// ends at the top of the KV loop (the joint placement; with Q first it leaves the
/// head-dimension loop): one block barrier per KV block, the exhaustive minimum, as many
/// executed in both orders; the result is softmax attention.
#[test]
fn flash_attention_gets_one_barrier_per_kv_block_in_either_load_order() {
    let mut executed = Vec::new();
    for k_first in [true, false] {
        let sh = FlashShape {
            k_first,
            ..small_flash(3, false)
        };
        let src = flash(&sh).expect("shape divides");
        let name = format!("flash 16x8 d8 t64 k_first={k_first}");
        assert_eq!(against_oracle(&name, &src, "N", 32), (1, 2), "{name}");
        let synced = sync_with(&src, Strategy::Optimal);
        executed.push(synced.placement.stats.barriers_executed);
        let text = print(&synced.kernel);
        let bufs = run(&text, 32, 5);
        let data = |n: &str| {
            bufs.iter()
                .find(|b| b.name == n)
                .expect("buffer")
                .data
                .clone()
        };
        let want = reference(&sh, &data("Q"), &data("K"), &data("V"), 32);
        for (g, w) in data("O").iter().zip(&want) {
            assert!(
                (g - w).abs() <= 2e-3 + 2e-3 * w.abs(),
                "{name}: {g} against {w}"
            );
        }
    }
    assert_eq!(
        executed[0], executed[1],
        "barriers executed, K first against Q first"
    );
}

#[test]
fn scaled_down_flash_attention_is_placed_at_the_exhaustive_minimum() {
    for (stages, unrolled) in [(2, false), (3, false), (3, true)] {
        let src = flash(&small_flash(stages, unrolled)).expect("shape divides");
        let name = format!("flash 16x8 d8 t64 stages={stages} unrolled={unrolled}");
        let (barriers, warp_syncs) = against_oracle(&name, &src, "N", 32);
        // A row's four threads share a warp: its statistics and its P row need warp syncs
        // only; the K/V tiles cross warps and need block barriers.
        assert!(barriers >= 1, "{name}: no block barrier");
        assert_eq!(warp_syncs, 2, "{name}");
    }
}

/// Every kernel `smemsync bench --print` names parses and verifies at its real size, and an
/// unknown name has none.
#[test]
fn every_named_real_size_kernel_parses_and_verifies() {
    for name in smemsync::bench_kernels::NAMED {
        let src = smemsync::bench_kernels::named(name).expect("named kernel");
        let k = parse(&src);
        assert!(k.ops.len() > 100, "{name}: {} ops", k.ops.len());
    }
    assert!(smemsync::bench_kernels::named("flash-rolled").is_none());
}
