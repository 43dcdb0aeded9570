//! Bounded runs of the attack oracles (`smemsync::oracles`, the same code the cargo-fuzz
//! targets in `fuzz/` run) over fixed seed ranges: sync output race-free and computing what
//! the race-free original computes, "proved" never contradicted by interpretation, plan-smem
//! and pipeline preserving results, emitters total, kernels at the limits accepted or refused
//! with a located diagnostic.
//!
//! Each test stops at its seed count or after [`BUDGET`] once [`MIN_CASES`] ran, and asserts
//! it exercised enough. `SMEMSYNC_ATTACK_SEEDS=N` (and optionally `SMEMSYNC_ATTACK_START=S`)
//! runs exactly seeds `S..S+N` with no time limit: the long run of docs/fuzzing.md. A failing
//! generated case is reported with the smallest generator options (same seed) that fail the
//! same way (`common::shrink_config`).

use std::time::{Duration, Instant};

use smemsync::oracles::{
    Case, LimitCase, Tally, limits_oracle, outputs, pipeline_oracle, plan_smem_oracle,
    proof_oracle, race_free, same_outputs, sync_oracle,
};
use smemsync::target::Target;

mod common;
use common::shrink_config;

const BUDGET: Duration = Duration::from_secs(4);
/// Cases every driver runs whatever the time (the tests' minimums), so a loaded machine makes
/// a test slower, never failing.
const MIN_CASES: u64 = 24;

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// Runs `oracle` on seeds from `0..seeds` (or the environment's range) until the budget is
/// spent and at least [`MIN_CASES`] ran; panics with the seed on the first failure.
fn drive(seeds: u64, mut oracle: impl FnMut(u64, &mut Tally) -> Result<(), String>) -> Tally {
    let long = env("SMEMSYNC_ATTACK_SEEDS");
    let start = env("SMEMSYNC_ATTACK_START").unwrap_or(0);
    let n = long.unwrap_or(seeds);
    let t0 = Instant::now();
    let mut tally = Tally::default();
    for seed in start..start + n {
        if long.is_none() && t0.elapsed() > BUDGET && tally.cases >= MIN_CASES {
            break;
        }
        if let Err(e) = oracle(seed, &mut tally) {
            panic!("seed {seed}: {e}");
        }
        tally.cases += 1;
    }
    eprintln!("{:.1} s: {tally:?}", t0.elapsed().as_secs_f64());
    tally
}

/// The part of an oracle's error that names the failure (before the first `:`): a shrunk case
/// must fail the same way, not for another reason.
fn failure_kind(e: &str) -> &str {
    e.split(':').next().unwrap_or(e)
}

/// [`drive`] over generated cases: on the first failure, shrinks the case's generator options
/// (same seed) to the smallest that fails the same way, and panics with both and the shrunk
/// kernel's text.
fn drive_cases(
    seeds: u64,
    make: impl Fn(u64) -> Case,
    oracle: impl Fn(&Case, &mut Tally) -> Result<(), String>,
) -> Tally {
    drive(seeds, |seed, tally| {
        let case = make(seed);
        let Err(e) = oracle(&case, tally) else {
            return Ok(());
        };
        let kind = failure_kind(&e).to_string();
        let cfg = shrink_config(&case.cfg, |cfg| {
            let c = Case {
                seed,
                cfg: cfg.clone(),
            };
            oracle(&c, &mut Tally::default()).is_err_and(|e2| failure_kind(&e2) == kind)
        });
        let small = Case { seed, cfg };
        Err(format!(
            "{e}\n--- shrunk to {:?}, which fails the same way; its kernel ---\n{}",
            small.cfg,
            small.text(true)
        ))
    })
}

#[test]
fn sync_output_is_race_free_and_computes_what_the_race_free_original_does() {
    let t = drive_cases(200, Case::from_seed, sync_oracle);
    assert!(t.cases >= 5, "{t:?}");
    assert!(t.synced >= 2 * t.cases, "sync refused too often: {t:?}");
    assert!(t.mutants > 0 && t.emitted > 0 && t.proved > 0, "{t:?}");
}

#[test]
fn proved_is_never_contradicted_by_interpretation() {
    // The static mode declines async copies: leave them out to reach it more often.
    let no_copies = |s| {
        let mut case = Case::from_seed(s);
        case.cfg.async_copies = false;
        case
    };
    let t = drive_cases(400, no_copies, |case, t| {
        for barriers in [false, true] {
            let k = case.kernel(barriers)?;
            for name in smemsync::oracles::SYNC_TARGETS {
                proof_oracle(&k, Target::from_name(name).expect("target"), t)?;
            }
        }
        Ok(())
    });
    assert!(t.cases >= 20 && t.proved >= 10, "{t:?}");
}

/// Cases with a pipeline loop and trailing phases (bits 5 to 7 of the flags), small blocks.
fn transform_case(seed: u64) -> Case {
    let flags = smemsync::check::splitmix64(seed) & !(7 << 10) | 0b111 << 5;
    Case::new(seed, flags)
}

#[test]
fn plan_smem_then_sync_preserves_results() {
    let t = drive_cases(200, transform_case, plan_smem_oracle);
    assert!(t.cases >= 10, "{t:?}");
    assert!(
        t.reused_bytes * 4 >= t.planned,
        "plan-smem rarely reused bytes: {t:?}"
    );
}

#[test]
fn pipeline_then_sync_preserves_results() {
    let t = drive_cases(200, transform_case, pipeline_oracle);
    assert!(t.cases >= 10 && t.pipelined >= 4 * t.cases, "{t:?}");
}

#[test]
fn kernels_at_the_limits_are_accepted_or_refused_with_a_located_diagnostic() {
    let t = drive(300, limits_oracle);
    assert!(t.limits_accepted >= 5 && t.limits_refused >= 5, "{t:?}");
}

#[test]
fn the_oracles_reject_what_they_must() {
    // A kernel without its barriers races; a kernel computing something else is caught.
    let t = Target::from_name("gfx942").expect("target");
    let mut racy = 0;
    for seed in 0..20 {
        let case = Case::from_seed(seed);
        racy += race_free(&case.kernel(false).unwrap(), t, "bare").is_err() as u32;
        let want = outputs(&case.kernel(true).unwrap(), seed, t).unwrap();
        let mut text = case.text(true);
        text.truncate(text.trim_end().len() - 1);
        text.push_str("  %bad = add %g, 1\n  gstore %in[%t], %bad\n}\n");
        let other = smemsync::reader::parse_kernel(&text).unwrap();
        assert!(
            same_outputs(&want, &other, seed, t, "edit").is_err(),
            "seed {seed}"
        );
    }
    assert!(
        racy >= 10,
        "only {racy} of 20 kernels without barriers race"
    );
    // The restated limits refuse one thread too many and one nesting level too many.
    let over = (0..200)
        .map(LimitCase::from_seed)
        .filter(|c| !c.within_limits())
        .count();
    assert!(over >= 20, "{over}");
}
