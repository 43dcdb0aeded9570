//! `cargo bench --bench sync`: the time of `smemsync::synchronize` (the public API's whole
//! `sync` pipeline: verification, waits, barriers, lowering) on every example kernel and on
//! the generated real-size kernels of `smemsync bench --print` (the 128×128×64 cp.async GEMM
//! and the flash-attention loop, copies rolled and unrolled, and the flash loop with its K
//! loads first).
//!
//! Each example runs on the first target that synchronizes it (its declared one, else sm_90,
//! gfx942, gfx1250, gfx1201: the examples use ops of different targets); the real-size
//! kernels on sm_80. Reading the text is outside the timed part. The examples are fast and
//! sampled 20 times; a real-size kernel takes up to seconds on a loaded machine, so it is
//! sampled 5 times. `smemsync bench --real` prints the same kernels' hazards, barriers,
//! memory and `check` time; this bench gives divan's statistics of the time alone, per
//! argument (`cargo bench --bench sync -- flash` for one group).

use std::path::{Path, PathBuf};

use divan::Bencher;
use smemsync::bench_kernels::{NAMED, named};
use smemsync::{Program, SyncOptions, Target};

fn main() {
    divan::main();
}

/// The example files, by name.
fn examples() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "kir"))
                .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn example_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

/// The first target that synchronizes `program` without error.
fn target_for(program: &Program, text: &str) -> Option<Target> {
    let declared = text
        .split("target \"")
        .nth(1)
        .and_then(|t| t.split('"').next());
    declared
        .into_iter()
        .chain(["sm_90", "gfx942", "gfx1250", "gfx1201"])
        .filter_map(|n| Target::new(n).ok())
        .find(|t| smemsync::synchronize(program, &SyncOptions::new(t.clone())).is_ok())
}

#[divan::bench(args = examples(), sample_count = 20, sample_size = 1)]
fn example(b: Bencher, name: &str) {
    let text = std::fs::read_to_string(example_path(name)).expect("example reads");
    let program = smemsync::read(&text).expect("example parses");
    let Some(target) = target_for(&program, &text) else {
        // No target synchronizes it (an example of a refusal): nothing to time.
        return;
    };
    let opts = SyncOptions::new(target);
    b.bench(|| smemsync::synchronize(divan::black_box(&program), &opts));
}

#[divan::bench(args = NAMED, sample_count = 5, sample_size = 1)]
fn real_size(b: Bencher, name: &str) {
    let text = named(name).expect("a generated kernel's name");
    let program = smemsync::read(&text).expect("generated kernel parses");
    let opts = SyncOptions::new(Target::new("sm_80").expect("known target"));
    b.bench(|| smemsync::synchronize(divan::black_box(&program), &opts));
}
