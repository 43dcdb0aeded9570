//! Footprint boxes (`analysis::boxes`) and the in-flight dataflow's per-consumer sets of the
//! copies it may meet (`analysis::inflight`, `Flow::apart`): the strided intervals hold every
//! value the overlap engine's evaluator computes (within the range, on the stride), and the waits, completions and barrier
//! placements with the boxes equal those of the engine asked for every pair
//! (`FlowMemo::no_boxes`: the oracle).

use std::collections::HashMap;

use proptest::prelude::*;
use smemsync::analysis::boxes::Boxes;
use smemsync::analysis::inflight::FlowMemo;
use smemsync::analysis::overlap::Overlap;
use smemsync::ir::*;
use smemsync::sync::PlaceMemo;
use smemsync::sync::waits::plan_waits_memo;
use smemsync::target::Target;

mod common;
use common::switch::{self, Named};

/// One generated index op: `%vI = OP A, B`.
#[derive(Clone, Debug)]
struct GenOp {
    op: &'static str,
    a: usize,
    b: Result<usize, i32>,
}

const OPS: [&str; 12] = [
    "add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
];

fn gen_op() -> impl Strategy<Value = GenOp> {
    (
        0..OPS.len(),
        0usize..64,
        prop_oneof![
            (0usize..64).prop_map(Ok),
            (-9i32..70).prop_map(Err),
            (1i32..9).prop_map(Err)
        ],
    )
        .prop_map(|(o, a, b)| GenOp { op: OPS[o], a, b })
}

/// A kernel whose loop body computes `ops` from the thread registers, the loop variable and
/// earlier results; `param`: the loop runs to a parameter in `[1, 40]`.
fn source(
    block: (u32, u32),
    (lo, trip, step): (i32, i32, i32),
    param: bool,
    ops: &[GenOp],
) -> String {
    let mut names: Vec<String> = ["%t", "%u", "%ln", "%wp", "%lin", "%k"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let hi = if param {
        "%n".to_string()
    } else {
        (lo + trip * step).to_string()
    };
    let mut body = String::new();
    for (i, g) in ops.iter().enumerate() {
        let a = &names[g.a % names.len()];
        let b = match g.b {
            Ok(j) => names[j % names.len()].clone(),
            Err(c) if matches!(g.op, "shl" | "shr") => c.rem_euclid(6).to_string(),
            Err(c) => c.to_string(),
        };
        body.push_str(&format!("    %v{i} = {} {a}, {b}\n", g.op));
        names.push(format!("%v{i}"));
    }
    format!(
        "kernel @boxes(%n: i32 in [1, 40]) block({}, {}) {{\n  shared @s : f32[64]\n  %t = tid.x\n  %u = tid.y\n  %ln = lane\n  %wp = warp\n  %lin = tid.linear\n  for %k = {lo} to {hi} step {step} {{\n{body}    store @s[%t], 1.0\n  }}\n}}\n",
        block.0, block.1
    )
}

/// Every value the engine's evaluator computes, for every thread and iteration, lies in the
/// value's interval (where the boxes give one).
fn intervals_hold(src: &str, lo: i64, hi: i64, step: i64) -> Result<(), TestCaseError> {
    let Ok(k) = smemsync::reader::parse_kernel(src) else {
        return Ok(());
    };
    if !smemsync::verify::verify(&k).is_empty() {
        return Ok(());
    }
    let l = k
        .ops_in_order()
        .into_iter()
        .find(|o| matches!(k.ops[*o].kind, OpKind::For { .. }))
        .unwrap();
    let iv = k.region_args(k.ops[l].regions[0])[0];
    let ov = Overlap::new(&k, 32);
    let mut boxes = Boxes::new(&k, 32);
    let results: Vec<Value> = k
        .ops_in_order()
        .into_iter()
        .filter(|o| matches!(k.ops[*o].kind, OpKind::Binary(..)))
        .filter_map(|o| k.ops[o].results.first().copied())
        .collect();
    for v in results {
        let Some(b) = boxes.operand(Operand::Value(v), 0) else {
            continue;
        };
        let mut x = lo;
        while x < hi {
            let env = HashMap::from([(iv, x)]);
            for t in 0..k.threads() {
                if let Some(got) = ov.eval_at(Operand::Value(v), &env, t) {
                    prop_assert!(
                        b.lo <= got && got <= b.hi,
                        "{} = {got} at k = {x}, thread {t}, outside [{}, {}]\n{src}",
                        k.value_name(v),
                        b.lo,
                        b.hi
                    );
                    // The stride: every value is the least one plus a multiple of it.
                    prop_assert!(
                        if b.stride == 0 {
                            got == b.lo
                        } else {
                            (got - b.lo) % b.stride == 0
                        },
                        "{} = {got} at k = {x}, thread {t}, off the stride {} from {}\n{src}",
                        k.value_name(v),
                        b.stride,
                        b.lo
                    );
                }
            }
            x += step;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn value_intervals_hold_every_evaluated_value(
        block in prop_oneof![Just((32u32, 1u32)), Just((64, 1)), Just((16, 4)), Just((48, 1)), Just((8, 8))],
        lo in 0i32..4,
        trip in 1i32..6,
        step in 1i32..4,
        param in any::<bool>(),
        ops in proptest::collection::vec(gen_op(), 1..7),
    ) {
        let src = source(block, (lo, trip, step), param, &ops);
        // With a parameter bound, the loop's largest trip (`%n` up to 40).
        let hi = if param { 40 } else { (lo + trip * step) as i64 };
        intervals_hold(&src, lo as i64, hi, step as i64)?;
    }
}

/// Boxes through views: an `At` index fixes a root index (its interval), a `Range` a constant
/// window, and an index that may leave its dimension gives no box.
/// The shared accesses of a kernel, in program order.
fn shared_accesses(k: &Kernel) -> Vec<SharedAccess> {
    k.ops_in_order()
        .into_iter()
        .flat_map(|o| effects(k, o).shared)
        .collect()
}

#[test]
fn boxes_follow_views_and_refuse_out_of_range_indices() {
    let k = smemsync::reader::parse_kernel(
        "kernel @v() block(64) {
  shared @a : f16[3, 128, 64]
  %t = tid.x
  %r = div %t, 16
  %c = rem %t, 16
  for %k = 0 to 9 step 1 {
    %s = rem %k, 3
    %v = view @a[%s]
    %w = view %v[8:24, 16:32]
    store %w[%r, %c], 1.0
    %big = add %c, 60
    %x = load %v[%t, %big]
    %row = add %r, 100
    %y = load %v[%row, %c]
  }
}
",
    )
    .unwrap();
    let accs = shared_accesses(&k);
    assert_eq!(accs.len(), 3);
    let mut b = Boxes::new(&k, 32);
    let iv = smemsync::analysis::boxes::Iv::dense;
    assert_eq!(
        b.of(&accs[0]),
        Some(vec![iv(0, 2), iv(8, 11), iv(16, 31)]),
        "store through two views"
    );
    assert_eq!(b.of(&accs[1]), None, "columns 60..76 of 64");
    assert_eq!(
        b.of(&accs[2]),
        Some(vec![iv(0, 2), iv(100, 103), iv(0, 15)])
    );
    assert!(b.apart(&accs[0], &accs[2]), "rows 8..12 and 100..104");
    assert!(!b.apart(&accs[0], &accs[0]));
}

/// Strides: a product by a constant keeps its multiples, a sum shifts them, a `rem` across
/// quotients keeps the gcd of stride and divisor; accesses whose rows differ in residue are
/// apart though their ranges overlap (the unrolled GEMM's `16·(t / 8) + i` rows against a
/// copy's row `j`).
#[test]
fn strided_boxes_part_rows_of_other_residues() {
    let k = smemsync::reader::parse_kernel(
        "kernel @s() block(64) {
  shared @a : f16[128, 64]
  %t = tid.x
  %tr = div %t, 8
  %r0 = mul %tr, 16
  %r3 = add %r0, 3
  %q = mul %t, 4
  %m = rem %q, 24
  %x = load @a[%r3, %t]
  store @a[5, %t], 1.0
  store @a[19, %t], 1.0
}
",
    )
    .unwrap();
    let accs = shared_accesses(&k);
    let mut b = Boxes::new(&k, 32);
    let val = |n: &str| {
        let ops = k.ops_in_order();
        let v = ops.iter().flat_map(|&o| k.ops[o].results.clone());
        Operand::Value(
            v.into_iter()
                .find(|&v| k.value_name(v).trim_start_matches('%') == n.trim_start_matches('%'))
                .unwrap(),
        )
    };
    let iv = |lo, hi, stride| smemsync::analysis::boxes::Iv { lo, hi, stride };
    assert_eq!(b.operand(val("%r3"), 0), Some(iv(3, 115, 16)));
    assert_eq!(
        b.operand(val("%m"), 0),
        Some(iv(0, 20, 4)),
        "t*4 rem 24: multiples of gcd(4, 24)"
    );
    assert!(b.apart(&accs[0], &accs[1]), "rows 3 + 16i against row 5");
    assert!(!b.apart(&accs[0], &accs[2]), "rows 3 + 16i meet row 19");
}

/// The kernels the in-flight oracles run on: the examples, the async and placement file
/// tests, and GEMMs at `shape` (64 and 256 threads, copies rolled and unrolled), with the
/// flash kernels when `flash`.
fn kernels(shape: (u32, u32, u32), flash: bool) -> Vec<Named> {
    let mut out = switch::async_and_placement_kernels();
    out.extend(gemms(shape));
    if flash {
        out.extend(switch::bench_kernels(&["flash", "flash-k-first"]));
    }
    out
}

/// The GEMMs at `shape`: 64 and 256 threads, copies rolled and unrolled.
fn gemms(shape: (u32, u32, u32)) -> Vec<Named> {
    switch::gemm_kernels(shape, &[(64, false), (64, true), (256, false), (256, true)])
}

/// The wait plan, the completions on the kernel with its waits and the barrier placement of
/// that kernel, as debug text, with the boxes on or off.
fn waits_completions_barriers(k: &Kernel, t: &Target, boxes: bool) -> Vec<String> {
    let mut pm = PlaceMemo {
        flow: FlowMemo::for_kernel(k),
        footprints: Some(Box::default()),
    };
    pm.flow.no_boxes = !boxes;
    switch::waits_completions_barriers(k, t, &mut pm, switch::COMPLETIONS)
}

/// On the 64×64×32 GEMMs in CI, each kernel on two of the four targets (in turn: every
/// target meets half of them), the files and the GEMMs as two tests that run side by side;
/// every kernel on every target, and the real-size GEMMs and the flash kernels, are the
/// ignored tests below (minutes in CI's debug build).
#[test]
fn boxes_and_near_sets_change_no_wait_completion_or_barrier() {
    assert_boxes_change_nothing(&switch::async_and_placement_kernels(), 2);
}

#[test]
fn boxes_and_near_sets_change_no_wait_completion_or_barrier_of_a_gemm() {
    assert_boxes_change_nothing(&gemms((64, 64, 32)), 2);
}

#[test]
#[ignore = "a minute in a debug build: run with --release -- --ignored"]
fn boxes_and_near_sets_change_nothing_on_every_target() {
    assert_boxes_change_nothing(&kernels((64, 64, 32), false), TARGETS.len());
}

#[test]
#[ignore = "minutes in a debug build: run with --release -- --ignored"]
fn boxes_and_near_sets_change_nothing_on_the_real_size_kernels() {
    assert_boxes_change_nothing(&kernels((128, 128, 64), true), TARGETS.len());
}

const TARGETS: [&str; 4] = ["sm_80", "sm_90", "gfx950", "gfx1250"];

/// Waits, completions and barriers equal with the boxes on and off, each kernel of `ks` on
/// `per_kernel` of [`TARGETS`] in turn.
fn assert_boxes_change_nothing(ks: &[Named], per_kernel: usize) {
    switch::assert_switch_changes_nothing_in_turn(
        "waits, completions and barriers",
        ks,
        &TARGETS,
        per_kernel,
        waits_completions_barriers,
    );
}

/// The boxes are not vacuous: on the unrolled 64-thread GEMM they rule out most copy pairs,
/// so the dataflow asks far fewer footprint questions (at 64×64×32 in CI, at 128×128×64 in
/// the ignored test).
#[test]
fn boxes_rule_out_the_copy_pairs_of_the_unrolled_gemm() {
    boxes_rule_out_the_copy_pairs((64, 64, 32));
}

#[test]
#[ignore = "minutes in a debug build: run with --release -- --ignored"]
fn boxes_rule_out_the_copy_pairs_of_the_real_size_unrolled_gemm() {
    boxes_rule_out_the_copy_pairs((128, 128, 64));
}

fn boxes_rule_out_the_copy_pairs(shape: (u32, u32, u32)) {
    let (_, k) = switch::gemm_kernels(shape, &[(64, true)]).remove(0);
    let t = Target::from_name("sm_80").unwrap();
    let asked = |no_boxes: bool| {
        let mut memo = FlowMemo::for_kernel(&k);
        memo.no_boxes = no_boxes;
        plan_waits_memo(&k, &t, &mut memo).unwrap();
        memo.len()
    };
    let (with, without) = (asked(false), asked(true));
    assert!(
        with * 3 < without,
        "{with} answers with boxes, {without} without"
    );
}
