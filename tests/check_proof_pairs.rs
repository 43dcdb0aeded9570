//! The static proof's memoized pairing (src/check/proof_pairs.rs) against the pairwise
//! oracle (`prove_pairwise`): equal answers — the same summary, or the same first failing
//! pair — on every example and file test, on variants with barriers removed (racy) and with a
//! barrier after every shared access (race-free), on their synchronized forms, on real-size
//! GEMMs and flash attention after `sync`, and on random kernels. Synchronization goes
//! through the command line, so the checker never links the placer.

use std::path::{Path, PathBuf};
use std::process::Command;

use smemsync::check::proof::{prove, prove_pairwise};
use smemsync::r#gen::{GenConfig, random_kernel_text};
use smemsync::ir::Kernel;
use smemsync::target::Target;

mod common;

/// Every example and file test.
fn kir_files() -> Vec<PathBuf> {
    common::kernel_files_under(&["examples", "tests/filetests"])
}

fn lines_where(src: &str, keep: impl FnMut(&str) -> bool) -> String {
    let mut keep = keep;
    src.lines()
        .filter(|l| keep(l))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `src`, without its first barrier, without any barrier, and with a barrier after every
/// plain shared load and store.
fn variants(src: &str) -> Vec<(&'static str, String)> {
    let is_barrier = |l: &str| l.trim() == "barrier";
    let mut first = true;
    let one_less = lines_where(src, |l| {
        !(is_barrier(l) && std::mem::replace(&mut first, false))
    });
    let none = lines_where(src, |l| !is_barrier(l));
    let mut fenced = String::new();
    for l in src.lines() {
        fenced += l;
        fenced.push('\n');
        let t = l.trim();
        if t.starts_with("store @") || t.contains("= load @") {
            let indent = &l[..l.len() - l.trim_start().len()];
            fenced += &format!("{indent}barrier\n");
        }
    }
    vec![
        ("", src.to_string()),
        (" minus one barrier", one_less),
        (" minus barriers", none),
        (" plus barriers", fenced),
    ]
}

fn kernels(text: &str) -> Vec<Kernel> {
    smemsync::reader::parse(text).map_or(Vec::new(), |m| m.kernels)
}

/// Asserts equal answers; returns whether the kernel was proved.
fn same_answer(name: &str, k: &Kernel, target: Option<Target>) -> bool {
    if k.threads() == 0 || k.threads() > 4096 {
        return false;
    }
    let new = prove(k, target);
    let old = prove_pairwise(k, target);
    assert_eq!(new, old, "{name} ({:?})", target.map(|t| t.name));
    new.is_ok()
}

fn target(name: &str) -> Target {
    Target::from_name(name).expect("a known target")
}

fn smemsync(args: &[&str]) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The generic model (`generic`) and the targets the file comparison covers.
const TARGETS: [&str; 4] = ["generic", "sm_80", "sm_90", "gfx942"];

/// Compares the two pairings on every kernel of every file and variant, each on the
/// `per_kernel` of [`TARGETS`] that `switch::targets_in_turn` gives it (kernels counted in
/// order); the numbers of kernels proved and declined.
fn compare_files_and_variants(per_kernel: usize) -> (usize, usize) {
    let (mut proved, mut declined, mut i) = (0, 0, 0);
    for f in kir_files() {
        let Ok(src) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (tag, text) in variants(&src) {
            for k in kernels(&text) {
                for t in common::switch::targets_in_turn(i, &TARGETS, per_kernel) {
                    let t = (t != "generic").then(|| target(t));
                    let name = format!("{}{tag}", f.display());
                    if same_answer(&name, &k, t) {
                        proved += 1;
                    } else {
                        declined += 1;
                    }
                }
                i += 1;
            }
        }
    }
    (proved, declined)
}

/// Each kernel on two of the four targets in CI's debug build (every target meets half of
/// them); every kernel on every target in the ignored test below.
#[test]
fn memoized_pairing_answers_as_the_pairwise_one_on_every_file_and_variant() {
    let (proved, declined) = compare_files_and_variants(2);
    // Both outcomes are exercised, so the comparison is not vacuous.
    assert!(
        proved > 100 && declined > 100,
        "{proved} proved, {declined} declined"
    );
}

#[test]
#[ignore = "25 s in a debug build: cargo test --release --test check_proof_pairs -- --ignored"]
fn memoized_pairing_answers_as_the_pairwise_one_on_every_file_variant_and_target() {
    let (proved, declined) = compare_files_and_variants(TARGETS.len());
    assert!(
        proved > 200 && declined > 200,
        "{proved} proved, {declined} declined"
    );
}

#[test]
fn memoized_pairing_answers_as_the_pairwise_one_after_sync() {
    let dir = std::env::temp_dir().join(format!("smemsync-proof-pairs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    for f in kir_files()
        .into_iter()
        .filter(|f| f.starts_with(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")))
    {
        inputs.push((f.display().to_string(), f));
    }
    for row in [
        "gemm 64x64x32 t64 unrolled",
        "gemm 64x64x32 t256 rolled",
        "gemm 32x32x32 t256 unrolled",
        "flash 128x64 d64 t128 rolled",
    ] {
        let Some(text) = smemsync(&["bench", "--print", row]) else {
            panic!("bench --print {row}");
        };
        let p = dir.join(format!("{}.kir", row.replace(' ', "_")));
        std::fs::write(&p, text).expect("write");
        inputs.push((row.to_string(), p));
    }
    let mut proved = 0;
    for (name, p) in &inputs {
        for t in ["sm_80", "gfx942"] {
            let Some(out) = smemsync(&["sync", "--target", t, &p.to_string_lossy()]) else {
                continue;
            };
            for k in kernels(&out) {
                proved += usize::from(same_answer(name, &k, Some(target(t))));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(proved >= 12, "{proved} proved");
}

#[test]
fn memoized_pairing_answers_as_the_pairwise_one_on_random_kernels() {
    let mut proved = 0;
    for seed in 0..300u64 {
        let cfg = GenConfig {
            barriers: seed % 2 == 0,
            pipeline: seed % 3 == 0,
            collectives: seed % 5 == 0,
            ..GenConfig::default()
        };
        let text = random_kernel_text(seed, &cfg);
        for k in kernels(&text) {
            for t in [None, Some(target("sm_80"))] {
                proved += usize::from(same_answer(&format!("seed {seed}"), &k, t));
            }
        }
    }
    assert!(proved >= 50, "{proved} proved");
}
