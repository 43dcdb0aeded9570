//! Property tests of the checker on generated kernels (time-bounded).

use smemsync::check::{CheckOptions, Verdict, check_race_free, run_with_schedule};

mod common;
use common::{GenConfig, random_kernel, random_kernel_text, shrink_config_on_panic};

const SEEDS: u64 = 60;

fn quick() -> CheckOptions {
    CheckOptions {
        schedules: 2,
        ..CheckOptions::default()
    }
}

#[test]
fn generated_kernels_are_verifier_clean_and_round_trip() {
    for seed in 0..200 {
        for barriers in [true, false] {
            let cfg = GenConfig {
                barriers,
                ..GenConfig::default()
            };
            let text = random_kernel_text(seed, &cfg);
            let k = smemsync::reader::parse_kernel(&text).unwrap_or_else(|d| {
                panic!("seed {seed}: {}\n{text}", d.render("gen", &text, false))
            });
            let errs = smemsync::verify::verify(&k);
            assert!(
                errs.is_empty(),
                "seed {seed}: {}\n{text}",
                errs.iter()
                    .map(|d| d.render("gen", &text, false))
                    .collect::<String>()
            );
            let printed = smemsync::emit::text::print_kernel(&k);
            assert!(
                smemsync::reader::parse_kernel(&printed).is_ok(),
                "seed {seed}: printed form does not parse"
            );
        }
    }
    // Different seeds give different kernels.
    let a = random_kernel_text(1, &GenConfig::default());
    let b = random_kernel_text(2, &GenConfig::default());
    assert_ne!(a, b);
    assert_eq!(a, random_kernel_text(1, &GenConfig::default()));
}

#[test]
fn a_barrier_after_every_shared_access_is_race_free() {
    for seed in 0..SEEDS {
        shrink_config_on_panic(&GenConfig::default(), |cfg| {
            let k = random_kernel(seed, cfg);
            let r = check_race_free(&k, &quick());
            assert!(
                r.is_race_free(),
                "seed {seed}: {:?}\n{}",
                r.verdict,
                random_kernel_text(seed, cfg)
            );
        });
    }
}

#[test]
fn removing_all_barriers_usually_races() {
    let cfg = GenConfig {
        barriers: false,
        ..GenConfig::default()
    };
    let mut racy = 0;
    for seed in 0..SEEDS {
        let k = random_kernel(seed, &cfg);
        let r = check_race_free(&k, &quick());
        // Without barriers nothing else may go wrong but a race.
        assert!(
            matches!(
                r.verdict,
                Verdict::Race(_) | Verdict::Proved { .. } | Verdict::Checked { .. }
            ),
            "seed {seed}: {:?}",
            r.verdict
        );
        if r.is_race() {
            racy += 1;
        }
    }
    // Every generated kernel initializes its buffers and then reads or writes elements owned
    // by other threads in most cases.
    assert!(
        racy * 10 >= SEEDS * 8,
        "only {racy} of {SEEDS} unsynchronized kernels race"
    );
}

#[test]
fn race_free_kernels_give_the_same_outputs_under_every_schedule() {
    let o = CheckOptions::default();
    for seed in 0..SEEDS / 2 {
        shrink_config_on_panic(&GenConfig::default(), |cfg| {
            let k = random_kernel(seed, cfg);
            let a = run_with_schedule(&k, seed, 0, &o)
                .unwrap_or_else(|d| panic!("seed {seed}: {}", d.message));
            for s in 1..4 {
                let b = run_with_schedule(&k, seed, s, &o)
                    .unwrap_or_else(|d| panic!("seed {seed}: {}", d.message));
                assert_eq!(a, b, "seed {seed}, schedule {s}");
            }
        });
    }
}

#[test]
fn proof_agrees_with_interpretation_on_generated_kernels() {
    // Whenever the static mode proves a kernel, interpretation finds no race in it.
    let mut proved = 0;
    for seed in 0..SEEDS {
        for barriers in [true, false] {
            let cfg = GenConfig {
                barriers,
                async_copies: false,
                ..GenConfig::default()
            };
            let k = random_kernel(seed, &cfg);
            if smemsync::check::proof::prove(&k, None).is_ok() {
                proved += 1;
                let r = check_race_free(
                    &k,
                    &CheckOptions {
                        try_proof: false,
                        ..quick()
                    },
                );
                assert!(
                    r.is_race_free(),
                    "seed {seed} barriers {barriers}: proved but {:?}",
                    r.verdict
                );
            }
        }
    }
    assert!(proved > 0, "the static mode proved no generated kernel");
}

/// The minimizers of `tests/common` find smaller failing cases: a kernel shrunk for "has an
/// atomic" keeps an atomic, still verifies and loses most lines; options shrunk for "the text
/// has a cp.async copy" keep one and turn everything else down.
#[test]
fn the_minimizers_shrink_failing_cases_and_keep_them_failing() {
    let cfg = GenConfig::default();
    let seed = (0..200)
        .find(|&s| {
            let t = random_kernel_text(s, &cfg);
            t.contains("atomic") && t.lines().count() > 40
        })
        .expect("a large kernel with an atomic");
    let text = random_kernel_text(seed, &cfg);
    let small = common::shrink_text(&text, |t| t.contains("atomic"));
    assert!(small.contains("atomic"), "{small}");
    common::parse_verified(&small);
    assert!(
        small.lines().count() * 3 < text.lines().count(),
        "{} of {} lines left:\n{small}",
        small.lines().count(),
        text.lines().count()
    );
    let seed = (0..200)
        .find(|&s| random_kernel_text(s, &cfg).contains("cp_async "))
        .expect("a kernel with a copy");
    let copies = |c: &GenConfig| random_kernel_text(seed, c).contains("cp_async ");
    let shrunk = common::shrink_config(&cfg, copies);
    assert!(copies(&shrunk), "{shrunk:?}");
    assert!(shrunk.async_copies && !shrunk.atomics, "{shrunk:?}");
    assert!(
        shrunk.max_stmts < cfg.max_stmts || shrunk.max_depth < cfg.max_depth,
        "{shrunk:?}"
    );
}

/// `shrink_on_panic` reports the first failure together with a smaller kernel that fails too.
#[test]
fn a_failing_property_is_reported_with_its_shrunk_kernel() {
    let cfg = GenConfig::default();
    let text = (0..200)
        .map(|s| random_kernel_text(s, &cfg))
        .find(|t| t.contains("atomic") && t.lines().count() > 40)
        .expect("a large kernel with an atomic");
    let report = std::panic::catch_unwind(|| {
        common::shrink_on_panic(&text, |t| assert!(!t.contains("atomic"), "has an atomic"))
    })
    .expect_err("the property fails");
    let msg = report
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(msg.starts_with("has an atomic"), "{msg}");
    let (_, kernel) = msg.split_once("--- shrunk kernel ---\n").expect("shrunk");
    assert!(kernel.contains("atomic"), "{kernel}");
    assert!(
        kernel.lines().count() * 3 < text.lines().count(),
        "{kernel}"
    );
}
