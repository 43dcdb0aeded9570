//! The checker on every example kernel: the examples as written (unsynchronized inputs of
//! `smemsync sync`) race with a witness; after `smemsync sync` they are race-free. Uses the
//! command line only, so that the checker stays independent of the placer's library API.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn smemsync(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn examples() -> Vec<PathBuf> {
    common::kernel_files(&["examples"])
}

#[test]
fn synchronized_examples_are_race_free_and_bare_ones_race() {
    let tmp = std::env::temp_dir().join(format!("smemsync-check-examples-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("tmp dir");
    let mut racy = 0;
    let mut checked = 0;
    for p in examples() {
        let src = std::fs::read_to_string(&p).expect("read");
        let t = common::example_target(&src);
        let file = p.to_str().expect("utf-8 path");
        let (code, _, err) = smemsync(&["check", "--schedules", "1", "--target", t, file]);
        assert!(
            code == 0 || code == 1,
            "{file}: internal error {code}: {err}"
        );
        if code == 1 && err.contains("C0001") {
            racy += 1;
            assert!(
                err.contains("^^^") && err.contains("--- unordered with this"),
                "{file}: witness without two labels:\n{err}"
            );
        }
        let (code, synced, err) = smemsync(&["sync", "--target", t, file]);
        if code != 0 {
            // The placer may refuse a kernel (a finding); that is its business, not the checker's.
            continue;
        }
        let out = tmp.join(p.file_name().expect("name"));
        std::fs::write(&out, synced).expect("write");
        let (code, stdout, err2) = smemsync(&[
            "check",
            "--schedules",
            "2",
            "--target",
            t,
            out.to_str().expect("path"),
        ]);
        assert_eq!(code, 0, "{file} after sync --target {t}: {err}{err2}");
        assert!(stdout.contains("race-free"), "{stdout}");
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} examples synchronized");
    assert!(racy >= 1, "no example races before synchronization");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn removing_any_inserted_barrier_from_a_barrier_only_example_races() {
    // Examples without async copies or finer syncs: the placer inserts block barriers only,
    // and an optimal placement needs each of them.
    let tmp = std::env::temp_dir().join(format!("smemsync-check-mutants-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("tmp dir");
    let mut mutants = 0;
    for p in examples() {
        let src = std::fs::read_to_string(&p).expect("read");
        if common::example_target(&src) != "gfx942" {
            continue;
        }
        let file = p.to_str().expect("path");
        let (code, full, _) = smemsync(&["sync", "--target", "gfx942", "--no-warp-sync", file]);
        if code != 0 {
            continue;
        }
        for n in 0..16 {
            let nth = n.to_string();
            let (code, mutant, _) = smemsync(&[
                "sync",
                "--target",
                "gfx942",
                "--no-warp-sync",
                "--without",
                &nth,
                file,
            ]);
            if code != 0 || mutant == full {
                break;
            }
            let out = tmp.join(format!(
                "m{n}-{}",
                p.file_name().and_then(|f| f.to_str()).unwrap_or("k.kir")
            ));
            std::fs::write(&out, &mutant).expect("write");
            let (code, stdout, err) = smemsync(&[
                "check",
                "--schedules",
                "2",
                "--target",
                "gfx942",
                out.to_str().expect("path"),
            ]);
            assert_eq!(
                code, 1,
                "{file} without inserted sync #{n} is not reported: {stdout}{err}\n{mutant}"
            );
            assert!(err.contains("C0001"), "{file} #{n}: {err}");
            mutants += 1;
        }
    }
    assert!(mutants >= 5, "only {mutants} mutants");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Runs a kernel file and returns every written buffer file's contents, by name.
fn run_out(file: &Path, seed: u64, dir: &Path) -> Vec<(String, String)> {
    let _ = std::fs::remove_dir_all(dir);
    let (code, _, err) = smemsync(&[
        "run",
        "--seed",
        &seed.to_string(),
        "--out",
        dir.to_str().expect("path"),
        file.to_str().expect("path"),
    ]);
    assert_eq!(code, 0, "run {}: {err}", file.display());
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("out dir")
        .map(|e| {
            let p = e.expect("entry").path();
            (
                p.file_name()
                    .and_then(|f| f.to_str())
                    .unwrap_or("")
                    .to_string(),
                std::fs::read_to_string(&p).expect("read"),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn sync_preserves_the_results_of_race_free_generated_kernels() {
    // A race-free kernel has one result; the syncs the placer adds must not change it.
    let tmp = std::env::temp_dir().join(format!(
        "smemsync-check-sync-preserves-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&tmp).expect("tmp dir");
    let mut compared = 0;
    for seed in 0..12u64 {
        let text = smemsync::r#gen::random_kernel_text(
            seed,
            &smemsync::r#gen::GenConfig {
                async_copies: false,
                ..Default::default()
            },
        );
        let before = tmp.join(format!("g{seed}.kir"));
        std::fs::write(&before, &text).expect("write");
        let (code, synced, _) =
            smemsync(&["sync", "--target", "gfx942", before.to_str().expect("path")]);
        if code != 0 {
            continue;
        }
        let after = tmp.join(format!("g{seed}-synced.kir"));
        std::fs::write(&after, synced).expect("write");
        let a = run_out(&before, seed, &tmp.join("a"));
        let b = run_out(&after, seed, &tmp.join("b"));
        assert_eq!(a, b, "seed {seed}: outputs differ after sync\n{text}");
        compared += 1;
    }
    assert!(compared >= 6, "only {compared} kernels compared");
    let _ = std::fs::remove_dir_all(&tmp);
}
