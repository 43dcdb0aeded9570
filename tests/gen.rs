//! Property tests of the checker on generated kernels (time-bounded).

use smemsync::check::{CheckOptions, Verdict, check_race_free, run_with_schedule};
use smemsync::r#gen::{GenConfig, random_kernel, random_kernel_text};

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
        let k = random_kernel(seed, &GenConfig::default());
        let r = check_race_free(&k, &quick());
        assert!(
            r.is_race_free(),
            "seed {seed}: {:?}\n{}",
            r.verdict,
            random_kernel_text(seed, &GenConfig::default())
        );
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
        let k = random_kernel(seed, &GenConfig::default());
        let a = run_with_schedule(&k, seed, 0, &o)
            .unwrap_or_else(|d| panic!("seed {seed}: {}", d.message));
        for s in 1..4 {
            let b = run_with_schedule(&k, seed, s, &o)
                .unwrap_or_else(|d| panic!("seed {seed}: {}", d.message));
            assert_eq!(a, b, "seed {seed}, schedule {s}");
        }
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
