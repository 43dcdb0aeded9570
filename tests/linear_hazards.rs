//! Nearest-source hazards (docs/placement.md, *Nearest-source hazards*) against the full
//! hazard set: on random kernels, the placement computed from the pruned hazards
//! (`find_hazards`, what `sync` uses) is the very placement computed from every hazard
//! (`find_all_hazards`): the same syncs at the same points, the same counts. Each placement is
//! re-checked by the independent race checker (`check::check_race_free`, which shares only the
//! IR with placement), and the exhaustive oracle finds the same optimum over the kept hazards
//! as over the full set (its placement from the kept ones is checked too).
//!
//! A second test measures what pruning buys on the families it is meant for: the hazards of
//! `n` store/load pairs on one buffer, straight-line and inside a loop, grow linearly in `n`
//! with pruning and quadratically without.

use smemsync::Kernel;
use smemsync::analysis::footprint::Footprints;
use smemsync::analysis::hazards::{Hazards, find_all_hazards, find_hazards};
use smemsync::ir::edit::apply;
use smemsync::sync::{PlaceOptions, Placement, Strategy, SyncModel, place_with};
use smemsync::target::Target;

mod common;
use common::{
    hazard_kernel_text as random_kernel, parse_verified as parse, race_check, shrink_on_panic,
};

fn place(k: &Kernel, target: &Target, hz: Hazards, strategy: Strategy) -> Option<Placement> {
    let fp = Footprints::new(k, target.warp);
    let mut model = SyncModel::new(k, &fp, &Default::default());
    model.enable_named(target);
    let opts = PlaceOptions {
        strategy,
        ..Default::default()
    };
    place_with(&model, hz, &opts).ok()
}

fn printed(k: &Kernel, p: &Placement) -> String {
    smemsync::emit::text::print_kernel(&apply(k, &p.plan).expect("plan anchored in its kernel"))
}

#[derive(Default)]
struct Tally {
    kernels: usize,
    pruned: usize,
    hazards_pruned: usize,
    hazards_full: usize,
    checked: usize,
    exhaustive: usize,
}

fn same_placement(seed: u64, src: &str, target: &Target, t: &mut Tally) {
    let k = parse(src);
    let pruned = find_hazards(&k, target);
    let full = find_all_hazards(&k, target);
    // The pruned set is a subset of the full one (same hazards, same coverage).
    for h in &pruned.hazards {
        assert!(
            full.hazards.contains(h),
            "seed {seed}: a pruned-set hazard is not in the full set: {h:?}\n{src}"
        );
    }
    assert_eq!(
        pruned.findings.len(),
        full.findings.len(),
        "seed {seed}: findings differ\n{src}"
    );
    t.hazards_pruned += pruned.hazards.len();
    t.hazards_full += full.hazards.len();
    if pruned.hazards.len() < full.hazards.len() {
        t.pruned += 1;
    }
    for strategy in [Strategy::Optimal, Strategy::Naive] {
        let a = place(&k, target, pruned.clone(), strategy);
        let b = place(&k, target, full.clone(), strategy);
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (None, None) => return,
            (a, b) => panic!(
                "seed {seed}: {strategy:?}: feasibility differs (pruned {}, full {})\n{src}",
                a.is_some(),
                b.is_some()
            ),
        };
        assert_eq!(
            printed(&k, &a),
            printed(&k, &b),
            "seed {seed}: {strategy:?}: nearest-source hazards place differently from the full set\n{src}"
        );
        assert_eq!(a.stats.inserted_executed, b.stats.inserted_executed);
        assert_eq!(
            a.stats.lower_bound, b.stats.lower_bound,
            "seed {seed}\n{src}"
        );
        if strategy == Strategy::Optimal {
            t.kernels += 1;
            if race_check(&k, &a.plan, target) {
                t.checked += 1;
            }
            // The optimum over the kept hazards is the optimum over all of them (the kept
            // ones are a subset, and every placement removing them removes the rest).
            if let Some(ex_full) = place(&k, target, full.clone(), Strategy::Exhaustive) {
                let ex = place(&k, target, pruned.clone(), Strategy::Exhaustive)
                    .expect("the exhaustive search runs on a subset of what it ran on");
                assert_eq!(
                    ex.stats.inserted_executed, ex_full.stats.inserted_executed,
                    "seed {seed}: the optimum over the kept hazards differs from the full set's\n{src}"
                );
                race_check(&k, &ex.plan, target);
                t.exhaustive += 1;
            }
        }
    }
}

#[test]
fn nearest_source_hazards_place_exactly_as_the_full_set_on_random_kernels() {
    let mut t = Tally::default();
    for (target, seeds) in [("gfx942", 0..150u64), ("sm_90", 1000..1150u64)] {
        let target = Target::from_name(target).expect("known");
        for seed in seeds {
            let threads = if seed % 3 == 0 { 64 } else { 128 };
            let src = random_kernel(seed, threads);
            shrink_on_panic(&src, |s| {
                same_placement(seed, s, &target, &mut Tally::default())
            });
            same_placement(seed, &src, &target, &mut t);
        }
    }
    eprintln!(
        "kernels placed {}, with hazards pruned {}, hazards {} of {}, race-checked {}, exhaustive {}",
        t.kernels, t.pruned, t.hazards_pruned, t.hazards_full, t.checked, t.exhaustive
    );
    assert!(t.kernels >= 150, "only {} kernels placed", t.kernels);
    assert!(
        t.pruned >= 30,
        "pruning left hazards out of only {} kernels",
        t.pruned
    );
    assert!(
        t.checked >= 40,
        "only {} placements race-checked",
        t.checked
    );
    assert!(
        t.exhaustive >= 60,
        "only {} compared with the exhaustive oracle",
        t.exhaustive
    );
}

/// `n` store/load pairs on one buffer, in straight-line code or in a loop body.
fn pairs(n: usize, looped: bool) -> String {
    let mut s = String::from(
        "kernel @pairs(%n: i32) block(64) {\n  shared @a : f32[64]\n  %t = tid.x\n  %f = itof %t\n  %u = sub 63, %t\n",
    );
    let ind = if looped { "    " } else { "  " };
    if looped {
        s.push_str("  for %k = 0 to %n step 1 {\n");
    }
    for i in 0..n {
        s.push_str(&format!(
            "{ind}store @a[%t], %f\n{ind}%x{i} = load @a[%u]\n"
        ));
    }
    if looped {
        s.push_str("  }\n");
    }
    s.push_str("}\n");
    s
}

#[test]
fn hazards_of_one_buffer_pairs_grow_linearly() {
    let target = Target::from_name("sm_80").expect("known");
    for looped in [false, true] {
        for n in [8, 16, 32] {
            let k = parse(&pairs(n, looped));
            let pruned = find_hazards(&k, &target).hazards.len();
            let full = find_all_hazards(&k, &target).hazards.len();
            // Each access keeps its nearest sources: a few hazards per access.
            assert!(
                pruned <= 4 * 2 * n,
                "looped {looped}, n {n}: {pruned} hazards kept (full set {full})"
            );
            // Without pruning every store/load pair is a hazard (quadratic).
            assert!(full >= n * n, "looped {looped}, n {n}: full set {full}");
            let a = place(&k, &target, find_hazards(&k, &target), Strategy::Optimal)
                .expect("placeable");
            let b = place(
                &k,
                &target,
                find_all_hazards(&k, &target),
                Strategy::Optimal,
            )
            .expect("placeable");
            assert_eq!(printed(&k, &a), printed(&k, &b));
        }
    }
}

/// The forward question's shortcut (`conflicts::forward_conflict`: the innermost common loop's
/// carried question decides distance 0 first) answers what the forward question itself
/// answers, for every pair of accesses of one address space and every common loop prefix, on
/// random kernels and on every example (symbolic engine on and off).
#[test]
fn forward_shortcut_answers_the_forward_question() {
    use smemsync::analysis::conflicts::{forward_conflict, pair_conflict};
    let mut kernels: Vec<String> = (0..60u64)
        .map(|seed| random_kernel(seed, if seed % 3 == 0 { 64 } else { 128 }))
        .collect();
    for p in common::kernel_files(&["examples"]) {
        kernels.push(std::fs::read_to_string(&p).expect("readable example"));
    }
    let target = Target::from_name("gfx942").expect("known");
    let mut asked = 0;
    let mut conflicting = 0;
    for src in &kernels {
        let k = parse(src);
        for symbolic in [true, false] {
            let mut fp = Footprints::new(&k, target.warp);
            fp.symbolic = symbolic;
            let n = fp.accesses.len();
            for a in 0..n {
                for b in 0..n {
                    if fp.accesses[a].space != fp.accesses[b].space {
                        continue;
                    }
                    let (la, lb) = (&fp.accesses[a].loops, &fp.accesses[b].loops);
                    let common = la.iter().zip(lb).take_while(|(x, y)| x == y).count();
                    for m in 1..=common {
                        let direct = pair_conflict(&mut fp, a, b, m, None);
                        let short = forward_conflict(&mut fp, a, b, m);
                        assert_eq!(
                            short.is_some(),
                            direct.conflict & 1 != 0,
                            "accesses {a} -> {b}, {m} common loops, symbolic {symbolic}:\n{src}"
                        );
                        if let Some(pc) = short {
                            assert_eq!(pc, direct);
                            conflicting += 1;
                        }
                        asked += 1;
                    }
                }
            }
        }
    }
    eprintln!("forward questions compared {asked}, conflicting {conflicting}");
    assert!(
        asked >= 1000 && conflicting >= 50,
        "{asked} asked, {conflicting} conflicting"
    );
}
