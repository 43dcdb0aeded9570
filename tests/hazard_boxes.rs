//! Footprint boxes in hazard finding (`Footprints::boxes_apart`, docs/placement.md,
//! *Pairs apart by footprint boxes*): a pair whose boxes are disjoint in some dimension is
//! skipped before any conflict question. The oracle is the same analysis with the boxes off
//! (`Footprints::use_boxes`, `FootprintMemo::no_boxes`; `SMEMSYNC_HAZARD_NO_BOXES=1` in the
//! tool): the hazards, the findings, the wait plan and the barrier placement are equal on
//! every example and the async, placement, handshake and layout file tests on four targets,
//! and on the 64×64×32 GEMMs on sm_80 (with the real-size GEMM and flash kernels: the ignored
//! tests, `cargo test --release --test hazard_boxes -- --ignored`, minutes in CI's debug
//! build); and the boxes are not vacuous on the unrolled GEMM. CI's debug build runs the
//! decisive part (under 15 s there): the hazards of every file kernel on two targets, the
//! waits and barriers of those where the boxes cut a pair question, and the unrolled 64-thread
//! GEMM at 64×64×32.

use smemsync::analysis::footprint::{FootprintMemo, Footprints};
use smemsync::analysis::hazards::find_hazards_with;
use smemsync::analysis::inflight::FlowMemo;
use smemsync::ir::Kernel;
use smemsync::sync::PlaceMemo;
use smemsync::target::Target;

mod common;
use common::switch::{self, Named};

const TARGETS: [&str; 4] = ["sm_80", "sm_90", "gfx950", "gfx1250"];

/// The tile of CI's GEMM (64 threads, copies unrolled): the smallest with the copy and
/// compute structure of the real size (the 64×64×32 one asks four times the questions).
const CI_GEMM: (u32, u32, u32) = (32, 32, 32);

/// The examples and the file tests of the directories with copies, placements, handshakes
/// and layouts.
fn file_kernels() -> Vec<Named> {
    switch::verified_file_kernels(
        &[
            "examples",
            "tests/filetests/async",
            "tests/filetests/placement",
            "tests/filetests/handshake",
            "tests/filetests/layouts",
        ],
        50,
    )
}

/// The GEMMs at `(bm, bn, bk)` (64 and 256 threads, copies rolled and unrolled, except the
/// unrolled 64-thread one at 128×128×64, whose hazards the last test compares: with the boxes
/// off it asks 139 448 pair questions) and, at full size, the flash kernels (rolled, unrolled,
/// K loaded first).
fn real_kernels(shape: (u32, u32, u32), flash: bool) -> Vec<Named> {
    let variants: Vec<(u32, bool)> = [(64, false), (64, true), (256, false), (256, true)]
        .into_iter()
        .filter(|&(threads, unrolled)| !(threads == 64 && unrolled && shape.0 == 128))
        .collect();
    let mut out = switch::gemm_kernels(shape, &variants);
    if flash {
        out.extend(switch::bench_kernels(&[
            "flash",
            "flash-unrolled",
            "flash-k-first",
        ]));
    }
    out
}

/// The hazards and findings of `k` (every field, in order), and the pair questions asked.
fn hazards(k: &Kernel, t: &Target, boxes: bool) -> (String, u64) {
    let mut fp = Footprints::new(k, t.warp);
    fp.use_boxes = boxes;
    let hz = find_hazards_with(&mut fp, t);
    (
        format!("{:?}\n{:?}", hz.hazards, hz.findings),
        fp.pair_questions,
    )
}

/// The wait plan of `k` and the barrier placements of `k` and of `k` with those waits, as
/// debug text, with the hazard boxes on or off (the in-flight dataflow's boxes stay on in
/// both).
fn waits_and_barriers(k: &Kernel, t: &Target, boxes: bool) -> Vec<String> {
    let mut fm = FootprintMemo::default();
    fm.no_boxes = !boxes;
    let mut pm = PlaceMemo {
        flow: FlowMemo::for_kernel(k),
        footprints: Some(Box::new(fm)),
    };
    // The completions do not read the hazard boxes: not compared.
    let stages = switch::Stages {
        completions: false,
        unwaited: true,
    };
    switch::waits_completions_barriers(k, t, &mut pm, stages)
}

/// Hazards, waits and barriers of `ks` on `targets`, with the boxes on and off, are equal.
fn assert_boxes_change_nothing(ks: &[Named], targets: &[&str]) {
    switch::assert_switch_changes_nothing("hazards", ks, targets, |k, t, on| hazards(k, t, on).0);
    switch::assert_switch_changes_nothing("waits and barriers", ks, targets, waits_and_barriers);
}

/// The hazards of every kernel of `ks` on `target` are equal with the boxes on and off; the
/// kernels where the boxes ruled out a pair question (the ones where waits and barriers can
/// differ at all) are returned.
fn hazards_equal_and_cut(ks: &[Named], target: &str) -> Vec<Named> {
    let t = Target::from_name(target).unwrap();
    let mut cut = Vec::new();
    for (name, k) in ks {
        let (on, asked_on) = hazards(k, &t, true);
        let (off, asked_off) = hazards(k, &t, false);
        assert_eq!(
            on, off,
            "hazards of {name} on {target}: boxes on (left), off (right)"
        );
        if asked_on < asked_off {
            cut.push((name.clone(), k.clone()));
        }
    }
    cut
}

/// CI's comparison: on sm_90 (cp.async, TMA, mbarriers and wgmma), the hazards of every
/// file kernel, and the waits and barriers of the kernels where the boxes cut some pair
/// question (elsewhere the two runs ask the same questions). The full comparison on four
/// targets (gfx950's `gather_to_lds` and warps of 64 among them) is the ignored test below.
#[test]
fn boxes_change_no_hazard_finding_wait_or_barrier() {
    let (ks, target) = (file_kernels(), "sm_90");
    let cut = hazards_equal_and_cut(&ks, target);
    eprintln!(
        "{target}: the boxes cut questions on {} of {} kernels",
        cut.len(),
        ks.len()
    );
    assert!(
        cut.len() >= 10,
        "the boxes cut questions on {} kernels only",
        cut.len()
    );
    switch::assert_switch_changes_nothing(
        "waits and barriers",
        &cut,
        &[target],
        waits_and_barriers,
    );
}

/// Everything on all four targets: every file kernel's hazards, waits and barriers (about a
/// minute in CI's debug build; `cargo test --release --test hazard_boxes -- --ignored`).
#[test]
#[ignore = "a minute in a debug build: run with --release -- --ignored"]
fn boxes_change_no_hazard_finding_wait_or_barrier_on_four_targets() {
    assert_boxes_change_nothing(&file_kernels(), &TARGETS);
}

/// The scaled-down GEMM whose copy pairs the boxes separate (64×64×32, 64 threads, copies
/// unrolled: the same copy and compute structure as the real size) on sm_80, its copy target:
/// its waits and barriers (its hazards are compared by
/// [`boxes_rule_out_most_pair_questions_of_the_unrolled_gemm`]). The other scaled-down
/// variants are the ignored test below, the real-size ones on sm_80 and gfx950 the one after
/// it (minutes in CI's debug build).
#[test]
fn boxes_change_nothing_on_the_scaled_down_unrolled_gemm() {
    let ks = switch::gemm_kernels(CI_GEMM, &[(64, true)]);
    switch::assert_switch_changes_nothing(
        "waits and barriers",
        &ks,
        &["sm_80"],
        waits_and_barriers,
    );
}

#[test]
#[ignore = "20 s in a debug build: run with --release -- --ignored"]
fn boxes_change_nothing_on_the_scaled_down_gemms() {
    assert_boxes_change_nothing(&real_kernels((64, 64, 32), false), &["sm_80"]);
}

#[test]
#[ignore = "minutes in a debug build: run with --release -- --ignored"]
fn boxes_change_nothing_on_the_real_size_kernels() {
    assert_boxes_change_nothing(&real_kernels((128, 128, 64), true), &["sm_80", "gfx950"]);
}

/// The boxes are not vacuous: on the unrolled 64-thread GEMM (its copy pairs touch disjoint
/// rows) they leave a small fraction of the pair questions; at 64×64×32 in CI, at 128×128×64
/// in the ignored test.
#[test]
fn boxes_rule_out_most_pair_questions_of_the_unrolled_gemm() {
    boxes_rule_out_most_pair_questions(CI_GEMM);
}

#[test]
#[ignore = "10 s in a debug build: run with --release -- --ignored"]
fn boxes_rule_out_most_pair_questions_of_the_64x64x32_unrolled_gemm() {
    boxes_rule_out_most_pair_questions((64, 64, 32));
}

#[test]
#[ignore = "minutes in a debug build: run with --release -- --ignored"]
fn boxes_rule_out_most_pair_questions_of_the_real_size_unrolled_gemm() {
    boxes_rule_out_most_pair_questions((128, 128, 64));
}

fn boxes_rule_out_most_pair_questions(shape: (u32, u32, u32)) {
    let (_, k) = switch::gemm_kernels(shape, &[(64, true)]).remove(0);
    let t = Target::from_name("sm_80").unwrap();
    let (a, with) = hazards(&k, &t, true);
    let (b, without) = hazards(&k, &t, false);
    assert_eq!(a, b);
    assert!(
        with * 5 < without,
        "{with} questions with boxes, {without} without"
    );
}
