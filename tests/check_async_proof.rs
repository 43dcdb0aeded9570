//! The static proof on async copies (docs/checker.md, "Async copies in the static proof"):
//! the synchronized GEMMs are proved, every mutant that drops or weakens one of their waits
//! or barriers is never proved when interpretation finds a race (and the races are found),
//! and on random async kernels and their mutants "proved" is never contradicted by the
//! interpreter. Synchronization goes through the command line, so the checker never links
//! the placer.

use std::path::Path;

use smemsync::check::proof::prove;
use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::r#gen::{GenConfig, random_kernel_text};
use smemsync::ir::Kernel;
use smemsync::target::Target;

mod common;
use common::parse_verified as parse;
use common::smemsync_stdout as smemsync;

/// The two GEMMs after `smemsync sync --target sm_90`: the bench kernel and
/// `benches/gpu/gemm128.kir`.
fn synced_gemms() -> Vec<(String, String)> {
    let dir = std::env::temp_dir().join(format!("smemsync-check-async-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bench = dir.join("gemm.kir");
    std::fs::write(&bench, smemsync(&["bench", "--print", "gemm"])).expect("write");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/gpu/gemm128.kir");
    [("bench gemm", bench), ("gemm128.kir", file)]
        .into_iter()
        .map(|(name, p)| {
            let p = p.to_string_lossy().into_owned();
            (
                name.to_string(),
                smemsync(&["sync", "--target", "sm_90", &p]),
            )
        })
        .collect()
}

/// The interpreter's verdict with one schedule (its happens-before detector finds a race on
/// the path it runs); [`confirm`] reruns a mutant the proof accepts with two.
fn interpret(k: &Kernel) -> Verdict {
    interpret_with(k, 1)
}

/// The verdict with two schedules, for the mutants the proof accepts.
fn confirm(k: &Kernel) -> Verdict {
    interpret_with(k, 2)
}

fn interpret_with(k: &smemsync::ir::Kernel, schedules: u32) -> Verdict {
    let o = CheckOptions {
        try_proof: false,
        schedules,
        bounds: vec![("K".into(), 192)],
        ..CheckOptions::default()
    };
    check_race_free(k, &o).verdict
}

#[test]
fn synchronized_gemms_are_proved() {
    for (name, text) in synced_gemms() {
        let k = parse(&text);
        let why = prove(&k, None).unwrap_or_else(|e| panic!("{name}: not proved: {e}"));
        assert!(why.contains("async copies followed"), "{name}: {why}");
    }
}

/// Each placed wait and barrier dropped, and each `cp_async_wait N` weakened to `N + 1`.
fn mutants(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        let is_sync = t == "barrier" || t.starts_with("cp_async_wait") || t.starts_with("waitcnt");
        if !is_sync {
            continue;
        }
        let mut drop = lines.clone();
        drop.remove(i);
        out.push((format!("line {} `{t}` dropped", i + 1), drop.join("\n")));
        if let Some(n) = t
            .strip_prefix("cp_async_wait ")
            .and_then(|n| n.parse::<u32>().ok())
        {
            let mut weak = lines.clone();
            let w = l.replace(t, &format!("cp_async_wait {}", n + 1));
            weak[i] = &w;
            out.push((format!("line {} `{t}` weakened", i + 1), weak.join("\n")));
        }
    }
    out
}

/// How [`proved_mutants_are_race_free`] interprets: `confirm` a mutant the proof accepts
/// (it must give `Checked`), and tell whether a declined one `races`.
struct Interp<'a> {
    confirm: &'a dyn Fn(&Kernel) -> Verdict,
    races: &'a dyn Fn(&Kernel) -> bool,
}

/// The GEMMs' interpretation: one schedule for a declined mutant, two (the first is the
/// one-schedule run) to confirm a proved one.
const GEMM_INTERP: Interp<'static> = Interp {
    confirm: &confirm,
    races: &|k| matches!(interpret(k), Verdict::Race(_)),
};

/// "Never proved when it races" is asserted on the proved mutants: each is interpreted
/// (`interp.confirm`) and must be race-free. The declined ones are interpreted only while
/// `needed(raced so far, mutant)` holds (to show the mutants are not vacuous), which saves
/// most of the interpretation: the proof's answer alone decides which mutants can break the
/// claim. Returns the declined mutants that raced.
fn proved_mutants_are_race_free(
    name: &str,
    cases: Vec<(String, String)>,
    target: Option<Target>,
    interp: &Interp,
    needed: impl Fn(&[String], &str) -> bool,
) -> Vec<String> {
    let mut raced = Vec::new();
    for (what, m) in cases {
        let k = parse(&m);
        match prove(&k, target) {
            Ok(why) => {
                let v = (interp.confirm)(&k);
                assert!(
                    matches!(v, Verdict::Checked { .. }),
                    "{name}, {what}: proved ({why}) but {v:?}"
                );
            }
            Err(_) if needed(&raced, &what) && (interp.races)(&k) => raced.push(what),
            Err(_) => {}
        }
    }
    raced
}

#[test]
fn dropping_or_weakening_a_placed_wait_or_barrier_is_never_proved_when_it_races() {
    for (name, text) in synced_gemms() {
        let raced =
            proved_mutants_are_race_free(&name, mutants(&text), None, &GEMM_INTERP, |r, _| {
                r.len() < 3
            });
        // The wait before the barrier, the barrier, and the weakened wait all race.
        assert!(raced.len() >= 3, "{name}: only {raced:?} race");
    }
}

/// Random text mutations of a generated kernel: drop a wait or barrier line, or weaken a
/// `cp_async_wait 0`.
fn mutate(text: &str, seed: u64) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let syncs: Vec<usize> = (0..lines.len())
        .filter(|i| {
            let t = lines[*i].trim();
            t == "barrier" || t.starts_with("cp_async_wait")
        })
        .collect();
    if syncs.is_empty() {
        return text.to_string();
    }
    let i = syncs[(smemsync::check::splitmix64(seed) % syncs.len() as u64) as usize];
    if seed.is_multiple_of(2) {
        lines.remove(i);
    } else {
        lines[i] = lines[i].replace("cp_async_wait 0", "cp_async_wait 1");
    }
    lines.join("\n")
}

#[test]
fn proof_agrees_with_interpretation_on_random_async_kernels_and_their_mutants() {
    let mut proved_async = 0;
    let mut checked = 0;
    for seed in 0..300u64 {
        for barriers in [true, false] {
            let cfg = GenConfig {
                barriers,
                async_copies: true,
                ..GenConfig::default()
            };
            let text = random_kernel_text(seed, &cfg);
            for variant in [text.clone(), mutate(&text, seed), mutate(&text, seed + 1)] {
                let Ok(k) = smemsync::reader::parse_kernel(&variant) else {
                    continue;
                };
                if !smemsync::verify::verify(&k).is_empty() {
                    continue;
                }
                checked += 1;
                if let Ok(why) = prove(&k, None) {
                    if variant.contains("cp_async ") {
                        proved_async += 1;
                    }
                    let r = check_race_free(
                        &k,
                        &CheckOptions {
                            try_proof: false,
                            schedules: 3,
                            ..CheckOptions::default()
                        },
                    );
                    assert!(
                        r.is_race_free(),
                        "seed {seed} barriers {barriers}: proved ({why}) but {:?}\n{variant}",
                        r.verdict
                    );
                }
            }
        }
    }
    assert!(checked > 500, "only {checked} kernels checked");
    assert!(
        proved_async > 0,
        "the static mode proved no kernel with copies"
    );
}

/// The Triton kernels of `corpus/triton/` whose static proof relies on tile copies, wgmma
/// operand reads, proxy fences and aliased scratch (docs/checker.md, "Async accesses in the
/// static proof"), each imported and synchronized through the command line.
const TRITON: [&str; 8] = [
    "matmul_fp16_s2",
    "matmul_fp16_s3",
    "matmul_fp16_s4",
    "matmul_fp32_s2",
    "matmul_fp32_s3",
    "matmul_fp32_s4",
    "matmul_persistent_fp16",
    "attention_fwd_fp16",
];

fn synced_triton(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("corpus/triton/{name}.ttgir"));
    smemsync(&["sync", &p.to_string_lossy()])
}

#[test]
fn triton_matmuls_and_attention_are_proved() {
    for name in TRITON {
        let k = parse(&synced_triton(name));
        let why = prove(&k, None).unwrap_or_else(|e| panic!("{name}: not proved: {e}"));
        assert!(
            why.contains("wgmma operand reads likewise"),
            "{name}: {why}"
        );
        assert!(why.contains("async copies followed"), "{name}: {why}");
    }
    // The attention kernel stores Q with `local_store` and reads it with wgmma: the store is
    // followed to its fence.
    let why = prove(&parse(&synced_triton("attention_fwd_fp16")), None).expect("proved");
    assert!(
        why.contains("generic writes followed to their proxy fences"),
        "{why}"
    );
}

/// Each barrier, wait and proxy fence of a synchronized kernel dropped, and each wait
/// weakened to `N + 1`.
fn sync_mutants(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        let wait = ["cp_async_wait ", "wgmma_wait "]
            .into_iter()
            .find(|w| t.starts_with(w));
        if t != "barrier" && t != "fence_proxy_async" && wait.is_none() {
            continue;
        }
        let mut drop = lines.clone();
        drop.remove(i);
        out.push((format!("line {} `{t}` dropped", i + 1), drop.join("\n")));
        if let Some(w) = wait
            && let Ok(n) = t[w.len()..].parse::<u32>()
        {
            let mut weak = lines.clone();
            let s = l.replace(t, &format!("{w}{}", n + 1));
            weak[i] = &s;
            out.push((format!("line {} `{t}` weakened", i + 1), weak.join("\n")));
        }
    }
    out
}

fn interpret_once(k: &Kernel) -> Verdict {
    common::interpret_only(k, 1)
}

/// Every mutant of the fp32 matmuls (small enough to interpret each) is interpreted: a racing
/// one is never proved, a proved one is race-free, and the races cover each new kind (a
/// tile copy's wait, a wgmma's wait, the barriers after them).
#[test]
fn dropping_a_sync_of_a_proved_triton_matmul_is_never_proved_when_it_races() {
    const KINDS: [&str; 3] = ["cp_async_wait", "wgmma_wait", "barrier"];
    // Any finding counts (a race, a deadlock, an execution error), as the proof must decline
    // each; a declined mutant is interpreted while its kind has no racing mutant yet.
    let interp = Interp {
        confirm: &interpret_once,
        races: &|k| !matches!(interpret_once(k), Verdict::Checked { .. }),
    };
    for name in ["matmul_fp32_s2", "matmul_fp32_s3"] {
        let cases = sync_mutants(&synced_triton(name));
        let raced = proved_mutants_are_race_free(name, cases, None, &interp, |r, w| {
            (KINDS.iter()).any(|k| w.contains(k) && !r.iter().any(|x| x.contains(k)))
        });
        for kind in KINDS {
            assert!(
                raced.iter().any(|w| w.contains(kind)),
                "{name}: no mutant of a {kind} races: {raced:?}"
            );
        }
    }
}

/// On the larger kernels (interpretation takes seconds each) every mutant is either refuted or
/// declined by the proof; the ones it proves are interpreted and must be race-free, and the
/// fence dropped from the attention kernel is a proxy-fence finding the proof declines.
#[test]
fn dropping_a_sync_of_a_proved_triton_kernel_is_declined_or_confirmed() {
    for name in [
        "matmul_fp16_s3",
        "matmul_persistent_fp16",
        "attention_fwd_fp16",
    ] {
        let mut declined = 0;
        for (what, m) in sync_mutants(&synced_triton(name)) {
            let k = parse(&m);
            match prove(&k, None) {
                Err(_) => declined += 1,
                Ok(why) => {
                    let v = interpret_once(&k);
                    assert!(
                        matches!(v, Verdict::Checked { .. }),
                        "{name}, {what}: proved ({why}) but {v:?}"
                    );
                }
            }
        }
        assert!(declined >= 4, "{name}: only {declined} mutants declined");
    }
    let text = synced_triton("attention_fwd_fp16");
    let (what, m) = sync_mutants(&text)
        .into_iter()
        .find(|(w, _)| w.contains("fence_proxy_async") && w.contains("dropped"))
        .expect("the attention kernel has a fence");
    let k = parse(&m);
    let why = prove(&k, None).expect_err("a dropped fence is not proved");
    assert!(why.contains("fence_proxy_async"), "{what}: {why}");
    let v = interpret_once(&k);
    assert!(
        matches!(&v, Verdict::Race(w) if w.missing_fence),
        "{what}: {v:?}"
    );
}

/// The corpus kernels whose collective accesses under concrete layouts (and scratch pinned
/// over other buffers) the proof now compares element by element: proved, and each barrier
/// dropped is never proved and races by interpretation.
#[test]
fn triton_reductions_are_proved_and_need_each_barrier() {
    for name in [
        "softmax",
        "softmax_gfx942",
        "layernorm_fwd",
        "reduce_cols",
        "matmul_fp16_s3_gfx942",
    ] {
        let text = synced_triton(name);
        let k = parse(&text);
        // The kernel's own target (warp width 64 on gfx942), as `smemsync check` uses it.
        let target = k
            .target
            .as_deref()
            .map(|t| Target::from_name(t).expect("target"));
        prove(&k, target).unwrap_or_else(|e| panic!("{name}: not proved: {e}"));
        let run = |k: &Kernel| {
            let o = CheckOptions {
                try_proof: false,
                schedules: 1,
                target,
                ..CheckOptions::default()
            };
            check_race_free(k, &o).verdict
        };
        let interp = Interp {
            confirm: &run,
            races: &|k| !matches!(run(k), Verdict::Checked { .. }),
        };
        let raced =
            proved_mutants_are_race_free(name, sync_mutants(&text), target, &interp, |r, _| {
                r.is_empty()
            });
        let races = raced.len();
        assert!(races >= 1, "{name}: no dropped barrier races");
    }
}

/// The unrolled GEMM's copies stand in long runs of `cp_async` in one region, whose in-flight
/// walks the proof shares (`check/proof_async/chain.rs`): each placed wait and barrier
/// dropped or weakened, and a read of the first copy's element inserted in the middle of a
/// run (the run is cut there; the copies before it are still in flight and collide with it,
/// the thread's own access included), is never proved when interpretation finds a race.
#[test]
fn shared_walks_of_unrolled_copies_still_catch_every_dropped_sync() {
    let dir = std::env::temp_dir().join(format!("smemsync-check-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("gemm.kir");
    let row = "gemm 64x64x32 t64 unrolled";
    std::fs::write(&src, smemsync(&["bench", "--print", row])).expect("write");
    let text = smemsync(&["sync", "--target", "sm_80", &src.to_string_lossy()]);
    let sm80 = Target::from_name("sm_80").expect("target");
    let why = prove(&parse(&text), Some(sm80)).expect("the synced GEMM is proved");
    assert!(why.contains("async copies followed"), "{why}");
    let mut cases = mutants(&text);
    let lines: Vec<&str> = text.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.trim().starts_with("cp_async @a[%slotam, %ram0, %cam0]"))
        .expect("the loop's first copy");
    let mut read = lines.clone();
    read.insert(first + 12, "      %mz = load @a[%slotam, %ram0, %cam0]");
    cases.push(("a read inside a run of copies".into(), read.join("\n")));
    let inside = |w: &str| w.contains("inside a run");
    let raced = proved_mutants_are_race_free(
        "the unrolled GEMM",
        cases,
        Some(sm80),
        &GEMM_INTERP,
        |r, w| r.len() < 3 || inside(w),
    );
    assert!(
        raced.iter().any(|w| w.contains("inside a run")),
        "the read inside a run does not race: {raced:?}"
    );
    assert!(raced.len() >= 3, "only {raced:?} race");
}
