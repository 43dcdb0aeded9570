//! End to end: every example kernel, synchronized by smemsync's pipeline for each target that
//! can express it, is re-proved race-free by the independent checker; the optimal and the
//! naive placements compute the same results; and every barrier the placer reports as the
//! only remover of some hazard is really needed: without it the checker finds a race.

use std::collections::{BTreeSet, HashMap};

use smemsync::Kernel;
use smemsync::check::{CheckOptions, check_race_free, run};
use smemsync::ir::edit::apply;
use smemsync::sync::driver::synchronize;
use smemsync::sync::{PlaceOptions, Strategy};
use smemsync::target::Target;

mod common;

fn examples() -> Vec<(String, Kernel)> {
    let mut v = Vec::new();
    for p in common::kernel_files(&["examples"]) {
        let k = common::parse_file(&p);
        v.push((
            p.file_name().expect("name").to_string_lossy().into_owned(),
            k,
        ));
    }
    v
}

fn check_opts(t: &Target) -> CheckOptions {
    CheckOptions {
        target: Some(*t),
        schedules: 2,
        ..Default::default()
    }
}

fn opts(s: Strategy) -> PlaceOptions {
    PlaceOptions {
        strategy: s,
        ..Default::default()
    }
}

const TARGETS: [&str; 6] = ["gfx942", "gfx950", "gfx1201", "gfx1250", "sm_80", "sm_90"];

#[test]
fn every_example_synchronized_for_every_target_is_race_free() {
    let mut checked = 0;
    let mut per_target: HashMap<&str, usize> = HashMap::new();
    for (name, k) in examples() {
        for t in TARGETS {
            let target = Target::from_name(t).expect("known target");
            let Ok(s) = synchronize(&k, &target, &opts(Strategy::Optimal)) else {
                // AMD-only ops on NVIDIA targets and the reverse are refused with diagnostics.
                continue;
            };
            let r = check_race_free(&s.kernel, &check_opts(&target));
            assert!(
                r.is_race_free(),
                "{name} on {t}: {}\n{}",
                r.summary(),
                smemsync::emit::text::print_kernel(&s.kernel)
            );
            checked += 1;
            *per_target.entry(t).or_default() += 1;
        }
    }
    // Every target synchronizes most examples.
    for t in TARGETS {
        assert!(
            per_target.get(t).copied().unwrap_or(0) >= 8,
            "{t}: only {:?} examples",
            per_target.get(t)
        );
    }
    assert!(checked >= 60, "only {checked} kernel/target pairs checked");
}

#[test]
fn optimal_and_naive_placements_compute_the_same_results() {
    for (name, k) in examples() {
        for t in ["gfx942", "sm_90"] {
            let target = Target::from_name(t).expect("known target");
            let (Ok(a), Ok(b)) = (
                synchronize(&k, &target, &opts(Strategy::Optimal)),
                synchronize(&k, &target, &opts(Strategy::Naive)),
            ) else {
                continue;
            };
            for seed in [1, 7] {
                let ra = run(&a.kernel, seed, &check_opts(&target))
                    .unwrap_or_else(|d| panic!("{name} {t}: {}", d.message));
                let rb = run(&b.kernel, seed, &check_opts(&target))
                    .unwrap_or_else(|d| panic!("{name} {t}: {}", d.message));
                assert_eq!(
                    ra, rb,
                    "{name} on {t}, seed {seed}: optimal and naive placements disagree"
                );
            }
        }
    }
}

#[test]
fn every_barrier_the_placer_needs_is_caught_missing_by_the_checker() {
    let mut mutated = 0;
    for (name, k) in examples() {
        for t in ["gfx942", "sm_90"] {
            let target = Target::from_name(t).expect("known target");
            let Ok(s) = synchronize(&k, &target, &opts(Strategy::Optimal)) else {
                continue;
            };
            let p = &s.placement;
            let existing: BTreeSet<usize> = p.existing.iter().copied().collect();
            for (i, removes) in p.removes.iter().enumerate() {
                // Needed: the only remover of some hazard.
                let needed = removes.iter().any(|h| {
                    !existing.contains(h)
                        && p.removes
                            .iter()
                            .enumerate()
                            .all(|(j, r)| j == i || !r.contains(h))
                });
                if !needed {
                    continue;
                }
                let mutant =
                    apply(s.with_waits(), &p.plan.without(i)).expect("plan anchored in its kernel");
                let mut o = check_opts(&target);
                o.schedules = 4;
                let r = check_race_free(&mutant, &o);
                assert!(
                    !r.is_race_free(),
                    "{name} on {t}: sync #{i} is reported needed, but the checker finds no race without it\n{}",
                    smemsync::emit::text::print_kernel(&mutant)
                );
                mutated += 1;
            }
        }
    }
    assert!(mutated >= 15, "only {mutated} mutants");
}

/// A hazard inside a role branch of a warp-specialized kernel is ordered with a named barrier
/// over the arm's threads (a block barrier there would deadlock); the checker proves the
/// result race-free and finds a race without each inserted named barrier.
#[test]
fn role_branch_hazards_get_named_barriers_the_checker_needs() {
    let src = "kernel @ws(%X: global f32[8, 128], %Y: global f32[8, 128]) block(160) {
  group @producer : threads [0, 32)
  shared @c : f32[128]
  %t = tid.x
  %isp = in_group @producer
  if %isp {
    %z = add %t, 1
  } else {
    %u = sub %t, 32
    for %i = 0 to 8 step 1 {
      %x = gload %X[%i, %u]
      store @c[%u], %x
      %r = sub 127, %u
      %v = load @c[%r]
      gstore %Y[%i, %u], %v
    }
  }
}";
    let k = common::parse_verified(src);
    let target = Target::from_name("sm_90").expect("known");
    let s = synchronize(&k, &target, &opts(Strategy::Optimal)).expect("synchronizes");
    let named: Vec<_> = s
        .inserted()
        .into_iter()
        .filter(|&o| {
            matches!(
                s.kernel.ops[o].kind,
                smemsync::ir::OpKind::NamedSync { count: 128, .. }
            )
        })
        .collect();
    assert_eq!(
        named.len(),
        2,
        "{}",
        smemsync::emit::text::print_kernel(&s.kernel)
    );
    assert!(check_race_free(&s.kernel, &check_opts(&target)).is_race_free());
    assert!(smemsync::check::protocol::check_protocol(&s.kernel, 32).is_empty());
    for n in 0..named.len() {
        let m =
            smemsync::sync::driver::without_inserted(&s.kernel, s.input_ops, n).expect("mutant");
        let mut o = check_opts(&target);
        o.schedules = 4;
        assert!(
            !check_race_free(&m, &o).is_race_free(),
            "named barrier #{n} is not needed"
        );
    }
    // A target without named barriers refuses rather than deadlock.
    let amd = Target::from_name("gfx942").expect("known");
    assert!(synchronize(&k, &amd, &opts(Strategy::Optimal)).is_err());
}
