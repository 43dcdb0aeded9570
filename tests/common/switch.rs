//! On/off comparisons: an exact shortcut in the analyses (footprint boxes, per-dimension
//! tests, near sets, ...) is checked by running the same pipeline with its switch on and off
//! over a list of named kernels and targets, and asserting equal outcomes. This module holds
//! the pieces those tests share:
//!
//! - [`verified_file_kernels`]: the kernels of the `.kir` files in some directories that parse
//!   and verify (invalid file tests are skipped, not failed), named by path;
//! - [`gemm_kernels`]: GEMMs of one tile shape over thread counts and rolled/unrolled copies;
//! - [`waits_completions_barriers`]: the wait plan, the completions on the kernel with its
//!   waits, and that kernel's barrier placement (optionally the unwaited kernel's too), as
//!   debug text, reading and growing a [`PlaceMemo`] the caller configured (the switch lives
//!   in the memo: `FlowMemo::no_boxes`, `FlowMemo::no_dims`, `FootprintMemo::no_boxes`, ...);
//! - [`assert_switch_changes_nothing`]: the loop over targets and kernels, with messages
//!   naming the kernel, the target and what was compared.
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

/// A kernel and the name a failing assertion reports.
pub type Named = (String, Kernel);

/// The kernels of the `.kir` files directly in `dirs` (relative to the crate root) that parse
/// and verify, named by path, in path order. Panics when no more than `min` are read (a list
/// that lost its files would make the comparison vacuous).
pub fn verified_file_kernels(dirs: &[&str], min: usize) -> Vec<Named> {
    let out: Vec<Named> = super::kernel_files(dirs)
        .iter()
        .filter_map(|p| {
            let k = smemsync::reader::parse_kernel(&std::fs::read_to_string(p).ok()?).ok()?;
            smemsync::verify::verify(&k)
                .is_empty()
                .then(|| (p.display().to_string(), k))
        })
        .collect();
    assert!(
        out.len() > min,
        "only {} kernels read from {dirs:?}",
        out.len()
    );
    out
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

/// The wait plan of `k`, the completions on `k` with those waits and the barrier placement
/// of that kernel, as debug text (the plan's error alone when planning fails), computed with
/// `memo` (its flow memo for the waits and completions, all of it for the placements). With
/// `unwaited`, the placement of `k` itself comes after the plan: it is placed before the
/// kernel with waits, as a memo may be reused on a kernel derived by inserting syncs but not
/// the other way round.
pub fn waits_completions_barriers(
    k: &Kernel,
    t: &Target,
    memo: &mut PlaceMemo,
    unwaited: bool,
) -> Vec<String> {
    let plan = plan_waits_memo(k, t, &mut memo.flow);
    let mut out = vec![format!("{plan:?}")];
    let Ok(p) = plan else {
        return out;
    };
    if unwaited {
        out.push(barriers(k, t, memo));
    }
    let with_waits = apply(k, &p.plan).unwrap();
    let c = completions_memo(&with_waits, t, &mut memo.flow);
    out.push(format!("{c:?}"));
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
