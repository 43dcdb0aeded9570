//! On/off comparisons: an exact shortcut in the analyses (footprint boxes, per-dimension
//! tests, near sets, ...) is checked by running the same pipeline with its switch on and off
//! over a list of named kernels and targets, and asserting equal outcomes. This module holds
//! the pieces those tests share:
//!
//! - [`verified_file_kernels`] (from the parent module): the kernels of the `.kir` files in
//!   some directories that parse and verify (invalid file tests are skipped), named by path;
//! - [`gemm_kernels`]: GEMMs of one tile shape over thread counts and rolled/unrolled copies;
//! - [`waits_completions_barriers`]: the wait plan, the completions on the kernel with its
//!   waits and that kernel's barrier placement, and the unwaited kernel's placement, as
//!   chosen by [`Stages`], as debug text, reading and growing a [`PlaceMemo`] the caller configured (the switch lives
//!   in the memo: `FlowMemo::no_boxes`, `FlowMemo::no_dims`, `FootprintMemo::no_boxes`, ...);
//! - [`assert_switch_changes_nothing`]: the loop over targets and kernels, with messages
//!   naming the kernel, the target and what was compared; [`targets_in_turn`] and
//!   [`assert_switch_changes_nothing_in_turn`]: each kernel on a share of the targets (CI);
//! - [`same_off_and_on`]: one comparison through a process-wide switch
//!   (`pairs::periodic_solutions`, `pairs::lattice_test`, ...).
//!
//! Complexity is that of the pipeline run twice per kernel and target; CI runs these in the
//! debug build, so callers keep the CI lists small and the full lists in ignored tests.

use std::fmt::Debug;

use smemsync::analysis::inflight::completions_memo;
use smemsync::bench_kernels::{GemmShape, gemm};
use smemsync::ir::Kernel;
use smemsync::ir::edit::apply;
use smemsync::sync::waits::plan_waits_memo;
use smemsync::sync::{PlaceMemo, PlaceOptions, place_barriers_memo};
use smemsync::target::Target;

pub use super::{Named, verified_file_kernels, verified_file_kernels_under};

/// The verified kernels of the examples and the async and placement file tests (more than
/// 50), the file list of the dataflow's on/off tests.
pub fn async_and_placement_kernels() -> Vec<Named> {
    verified_file_kernels(
        &[
            "examples",
            "tests/filetests/async",
            "tests/filetests/placement",
        ],
        50,
    )
}

/// The GEMMs at `(bm, bn, bk)` for each `(threads, unrolled)` of `variants`, the other
/// parameters those of [`GemmShape::realistic`]; named `gemm BMxBNxBK tT unrolled=U`.
pub fn gemm_kernels((bm, bn, bk): (u32, u32, u32), variants: &[(u32, bool)]) -> Vec<Named> {
    variants
        .iter()
        .map(|&(threads, unrolled)| {
            let sh = GemmShape {
                bm,
                bn,
                bk,
                threads,
                ..GemmShape::realistic(unrolled)
            };
            let name = format!("gemm {bm}x{bn}x{bk} t{threads} unrolled={unrolled}");
            (name, super::parse_verified(&gemm(&sh).unwrap()))
        })
        .collect()
}

/// The named bench kernels (`smemsync::bench_kernels::named`), parsed and verified.
pub fn bench_kernels(names: &[&str]) -> Vec<Named> {
    names
        .iter()
        .map(|&n| {
            let src = smemsync::bench_kernels::named(n).unwrap();
            (n.to_string(), super::parse_verified(&src))
        })
        .collect()
}

/// What [`waits_completions_barriers`] compares besides the wait plan and the barrier
/// placement of the kernel with its waits.
#[derive(Clone, Copy, Debug)]
pub struct Stages {
    /// The completions (`completions_memo`) on the kernel with its waits.
    pub completions: bool,
    /// The barrier placement of the kernel as given (placed before the kernel with waits:
    /// a memo may be reused on a kernel derived by inserting syncs, not the other way round).
    pub unwaited: bool,
}

/// The stages of the in-flight dataflow's on/off tests: the completions, not the unwaited
/// kernel.
pub const COMPLETIONS: Stages = Stages {
    completions: true,
    unwaited: false,
};

/// The wait plan of `k` and, on `k` with those waits, the `stages` asked for and the barrier
/// placement, as debug text (the plan's error alone when planning fails), computed with `memo`
/// (its flow memo for the waits and completions, all of it for the placements).
pub fn waits_completions_barriers(
    k: &Kernel,
    t: &Target,
    memo: &mut PlaceMemo,
    stages: Stages,
) -> Vec<String> {
    let plan = plan_waits_memo(k, t, &mut memo.flow);
    let mut out = vec![format!("{plan:?}")];
    let Ok(p) = plan else {
        return out;
    };
    if stages.unwaited {
        out.push(barriers(k, t, memo));
    }
    let with_waits = apply(k, &p.plan).unwrap();
    if stages.completions {
        let c = completions_memo(&with_waits, t, &mut memo.flow);
        out.push(format!("{c:?}"));
    }
    out.push(barriers(&with_waits, t, memo));
    out
}

/// The barrier placement of `k` with default options, as debug text (stats, plan, warnings;
/// or the diagnostics).
pub fn barriers(k: &Kernel, t: &Target, memo: &mut PlaceMemo) -> String {
    match place_barriers_memo(k, t, &PlaceOptions::default(), memo) {
        Ok(b) => format!("{:?} {:?} {:?}", b.stats, b.plan, b.warnings),
        Err(e) => format!("{e:?}"),
    }
}

/// Asserts that `run` answers the same with a process-wide switch off and on (`set(false)`,
/// `run()`, then `set(true)`, `run()`; a failure names `what`), leaves the switch on and
/// returns the answer with it on.
pub fn same_off_and_on<R: PartialEq + Debug>(
    what: &str,
    set: impl Fn(bool),
    mut run: impl FnMut() -> R,
) -> R {
    set(false);
    let off = run();
    set(true);
    let on = run();
    assert_eq!(off, on, "{what}: switch off (left), on (right)");
    on
}

/// Asserts `run(k, t, true) == run(k, t, false)` (switch on, then off) for every kernel of
/// `ks` on every target named in `targets`; a failure names `what`, the kernel and the target.
pub fn assert_switch_changes_nothing<R: PartialEq + Debug>(
    what: &str,
    ks: &[Named],
    targets: &[&str],
    run: impl Fn(&Kernel, &Target, bool) -> R,
) {
    for t in targets {
        let t = Target::from_name(t).unwrap_or_else(|e| panic!("target {t}: {e:?}"));
        for (name, k) in ks {
            let on = run(k, &t, true);
            let off = run(k, &t, false);
            assert_eq!(
                on, off,
                "{what} of {name} on {}: switch on (left), off (right)",
                t.name
            );
        }
    }
}

/// The targets kernel `i` of a list runs on when each kernel takes `per_kernel` of `targets`
/// in turn: `targets[i]`, `targets[i + s]`, ... (indices mod `targets.len()`, `s =
/// targets.len() / per_kernel`), so that over a list each target meets an even share of the
/// kernels. The on/off and oracle tests run such a share in CI's debug build and every kernel
/// on every target (`per_kernel == targets.len()`) in ignored tests.
pub fn targets_in_turn<'t>(
    i: usize,
    targets: &[&'t str],
    per_kernel: usize,
) -> impl Iterator<Item = &'t str> {
    let n = targets.len();
    assert!(
        (1..=n).contains(&per_kernel) && n.is_multiple_of(per_kernel),
        "{per_kernel} of {n} targets"
    );
    let targets = targets.to_vec();
    (0..per_kernel).map(move |j| targets[(i + j * (n / per_kernel)) % n])
}

/// [`assert_switch_changes_nothing`] with kernel `i` of `ks` run on the `per_kernel` targets
/// [`targets_in_turn`] gives it.
pub fn assert_switch_changes_nothing_in_turn<R: PartialEq + Debug>(
    what: &str,
    ks: &[Named],
    targets: &[&str],
    per_kernel: usize,
    run: impl Fn(&Kernel, &Target, bool) -> R,
) {
    for (i, k) in ks.iter().enumerate() {
        let mine: Vec<&str> = targets_in_turn(i, targets, per_kernel).collect();
        assert_switch_changes_nothing(what, std::slice::from_ref(k), &mine, &run);
    }
}

/// One pair question (accesses, common prefix, distance level) and its answer: conflict and
/// intersect masks and the intra-warp flag, `None` where the engine declines.
pub type PairAnswer = (usize, usize, usize, Option<usize>, Option<(u64, u64, bool)>);

/// Every pair question of the kernel's first `cap` accesses (each common prefix, each
/// distance level), answered by one fresh `Footprints`.
pub fn pair_answers(k: &smemsync::Kernel, warp: u32, cap: usize) -> Vec<PairAnswer> {
    let fp = smemsync::analysis::footprint::Footprints::new(k, warp);
    let n = fp.accesses.len().min(cap);
    let mut out = Vec::new();
    for ai in 0..n {
        for bi in 0..n {
            if fp.accesses[ai].space != fp.accesses[bi].space {
                continue;
            }
            let nest = fp.accesses[ai].loops.len().min(fp.accesses[bi].loops.len());
            for plen in 0..=nest {
                for var in std::iter::once(None).chain((0..plen).map(Some)) {
                    let r =
                        smemsync::analysis::symbolic::pairs::pair_conflict(&fp, ai, bi, plen, var)
                            .map(|p| (p.conflict, p.intersect, p.intra_warp));
                    out.push((ai, bi, plen, var, r));
                }
            }
        }
    }
    out
}
