//! Witnesses moved instead of solved (docs/symbolic.md, "Solutions moved by whole warps" and
//! "A solution of one translate mended for another"): a recorded solution of a pair question
//! with one thread moved by whole warps answers its cross-warp question
//! (`pairs::warp_shifts`), and the last solution of an in-flight overlap question, mended,
//! answers a translated one (`symbolic::overlap::mended_witnesses`). Both only ever answer
//! "satisfiable" from a point they check, so they must never change an answer:
//!
//! 1. on random kernels of unrolled copies (`div`/`rem` of `%t + c` into a pipelined slot)
//!    and an inner loop of loads, every pair question answers as enumeration with the shifts
//!    on (warps 4 and 32), and every ordered overlap question under random tags answers the
//!    same, with the same W0314 notes, with the mended witnesses and without them;
//! 2. on the examples and file tests, and the 64×64×32 GEMMs and the flash loop, every pair
//!    question answers the same with the shifts and without them (warps 32 and 64);
//! 3. on the examples, the async and placement file tests, the 64×64×32 unrolled GEMM and
//!    flash on sm_80, the waits, completions and barriers are the same with the mended
//!    witnesses and without them, and the unrolled GEMM has mended answers.
//!
//! The 128×128×64 t64 unrolled GEMM (the kernel these serve) is compared in ignored tests:
//! `cargo test --release --test translate_witnesses -- --ignored`.

use proptest::prelude::*;
use smemsync::analysis::inflight::{FlowMemo, completions_memo};
use smemsync::analysis::overlap::{IterTag, Overlap};
use smemsync::analysis::symbolic::{overlap as sym_overlap, pairs};
use smemsync::ir::edit::apply;
use smemsync::ir::*;
use smemsync::sync::waits::plan_waits_memo;
use smemsync::sync::{PlaceMemo, PlaceOptions, place_barriers_memo};
use smemsync::target::Target;

mod common;
use common::{parse_verified, switch};

/// A random pipelined kernel of unrolled copies: `threads` threads copy `copies` rows'
/// worth of `%t + threads·j + c` (row `div`, column `rem` by 16) into slot
/// `rem (%k + shift), P`, then an inner loop over the rows loads columns
/// `(%t rem D)·(16/D) + i` of slot `rem %k, P`.
fn unrolled_text(seed: u64) -> String {
    let mut r = common::Rng::new(seed);
    let threads = *r.pick(&[8u32, 16, 32, 64]) as u64;
    let period = 2 + r.below(2);
    let copies = 1 + r.below(4);
    let c0 = r.below(16);
    let d = *r.pick(&[2u64, 4, 8]);
    let rows = (threads * copies + c0).div_ceil(16) + 1;
    let mut s = format!(
        "kernel @k(%n: i32 in [1, 64], %g: global f32[4096]) block({threads}) {{\n  shared @s : f32[{period}, {rows}, 16]\n  %t = tid.x\n  %f = itof %t\n  %tc = rem %t, {d}\n  %lb = mul %tc, {}\n",
        16 / d
    );
    s.push_str(&format!(
        "  for %k = 0 to %n step 1 {{\n    %q = add %k, {}\n    %sl = rem %q, {period}\n",
        r.below(period)
    ));
    for j in 0..copies {
        s.push_str(&format!(
            "    %e{j} = add %t, {}\n    %r{j} = div %e{j}, 16\n    %c{j} = rem %e{j}, 16\n",
            threads * j + c0
        ));
        match r.below(3) {
            0 => s.push_str(&format!("    store @s[%sl, %r{j}, %c{j}], %f\n")),
            _ => s.push_str(&format!("    cp_async @s[%sl, %r{j}, %c{j}] <- %g[%t]\n")),
        }
    }
    s.push_str("    cp_async_commit\n    %s0 = rem %k, ");
    s.push_str(&format!("{period}\n    for %kk = 0 to {rows} step 1 {{\n"));
    for i in 0..(1 + r.below(16 / d)) {
        s.push_str(&format!(
            "      %lc{i} = add %lb, {i}\n      %v{i} = load @s[%s0, %kk, %lc{i}]\n"
        ));
    }
    s.push_str("    }\n  }\n}\n");
    s
}

/// Every pair question of the kernel at warps of 4 and 32, shifts on: the symbolic answer,
/// where given, equals enumeration's; returns (answered, asked).
fn pairs_equal_to_enumeration(text: &str) -> (usize, usize) {
    pairs::warp_shifts(true);
    common::all_pair_questions_match_enumeration_at(&parse_verified(text), &[4, 32])
}

/// The tag of one loop for one query, from a drawn byte.
fn tag(b: u8) -> Option<IterTag> {
    match b % 8 {
        0..=2 => Some(IterTag::Dist(u32::from(b % 8))),
        3 | 4 => Some(IterTag::Unknown),
        5 => Some(IterTag::Pre(u32::from(b % 3))),
        _ => None,
    }
}

/// Every ordered pair of accesses of the kernel asked under tags drawn from `tags`, by an
/// engine with the mended witnesses and one without: the same answers and notes. Returns
/// the questions answered by a mended solution.
fn overlaps_same_with_and_without(text: &str, tags: &[u8]) -> u64 {
    let k = parse_verified(text);
    let ops: Vec<Op> = k
        .ops
        .iter()
        .map(|(op, _)| op)
        .filter(|&op| !effects::effects(&k, op).shared.is_empty())
        .collect();
    let (mut on, mut off) = (Overlap::new(&k, 32), Overlap::new(&k, 32));
    let (mut n, mut mended) = (0usize, 0);
    for &x in &ops {
        for &y in &ops {
            let mut tg = Vec::new();
            for (i, &l) in on.for_loops(y).iter().enumerate() {
                if let Some(g) = tag(tags[(n + 5 * i) % tags.len()]) {
                    tg.push((l, g));
                }
            }
            n += 1;
            for xa in &effects::effects(&k, x).shared {
                for ya in &effects::effects(&k, y).shared {
                    sym_overlap::mended_witnesses(true);
                    let a = on.may_overlap(x, xa, y, ya, &tg);
                    mended += sym_overlap::mended_count();
                    sym_overlap::mended_witnesses(false);
                    let b = off.may_overlap(x, xa, y, ya, &tg);
                    assert_eq!(a, b, "{x:?} then {y:?} under {tg:?} in\n{text}");
                    assert_eq!(
                        &*on.conservative.borrow(),
                        &*off.conservative.borrow(),
                        "notes\n{text}"
                    );
                }
            }
        }
    }
    sym_overlap::mended_witnesses(true);
    mended
}

/// The random kernels do reach both shortcuts: over 24 seeds, some cross-warp question is
/// answered by a shift and some overlap question by a mended solution.
#[test]
fn random_kernels_reach_both_shortcuts() {
    let (mut shifted, mut mended) = (0, 0);
    for seed in 0..24 {
        let text = unrolled_text(seed);
        pairs_equal_to_enumeration(&text);
        shifted += pairs::warp_shift_counts().1;
        mended += overlaps_same_with_and_without(&text, &[0, 1, 3, 5, 2, 4, 6, 7]);
    }
    eprintln!("{shifted} cross-warp questions shifted, {mended} overlap questions mended");
    assert!(
        shifted > 0 && mended > 0,
        "shifted {shifted}, mended {mended}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn shifted_cross_warp_answers_equal_enumeration(seed in 0u64..1_000_000) {
        let text = unrolled_text(seed);
        let (answered, asked) = common::shrink_on_panic(&text, pairs_equal_to_enumeration);
        prop_assert!(answered * 2 >= asked, "answered {answered} of {asked}:\n{text}");
    }

    #[test]
    fn mended_overlap_answers_equal_solved_ones(
        seed in 0u64..1_000_000,
        tags in prop::collection::vec(any::<u8>(), 8),
    ) {
        let text = unrolled_text(seed);
        overlaps_same_with_and_without(&text, &tags);
    }
}

/// The answers with the warp shifts and without them are equal (warps 32 and 64); returns
/// the questions compared and the cross-warp questions the shifts answered.
fn shifts_change_nothing(k: &Kernel, cap: usize) -> (usize, u64) {
    let (mut n, mut hits) = (0, 0);
    for warp in [32, 64] {
        pairs::warp_shifts(false);
        let off = switch::pair_answers(k, warp, cap);
        pairs::warp_shifts(true);
        let on = switch::pair_answers(k, warp, cap);
        hits += pairs::warp_shift_counts().1;
        assert_eq!(
            off, on,
            "answers without / with the warp shifts, warp {warp}"
        );
        n += on.len();
    }
    (n, hits)
}

#[test]
fn warp_shifts_change_no_pair_answer_on_examples_and_file_tests() {
    let files = common::kernel_files_under(&["examples", "tests/filetests"]);
    let (mut kernels, mut asked) = (0, 0);
    for f in &files {
        let src = std::fs::read_to_string(f).expect("readable");
        let Ok(k) = smemsync::reader::parse_kernel(&src) else {
            continue;
        };
        if !smemsync::verify::verify(&k).is_empty() {
            continue;
        }
        kernels += 1;
        asked += shifts_change_nothing(&k, 40).0;
    }
    eprintln!("{kernels} kernels, {asked} questions compared");
    assert!(kernels > 100, "only {kernels} kernels parsed");
}

/// The pipelined bench kernels at 64×64×32 and flash (their first 48 accesses): the same
/// answers.
#[test]
fn warp_shifts_change_no_pair_answer_on_pipelined_kernels() {
    let wanted = [
        "gemm 64x64x32 t64 unrolled",
        "gemm 64x64x32 t64 rolled",
        "flash 128x64 d64 t128 rolled",
    ];
    for (name, text) in smemsync::bench_kernels::real_tiled_kernels() {
        if !wanted.contains(&name.as_str()) {
            continue;
        }
        let k = parse_verified(&text);
        let (n, hits) = shifts_change_nothing(&k, 48);
        eprintln!("{name}: {n} questions compared, {hits} answered by a shift");
    }
}

/// Verified kernels of the examples and the async and placement file tests, and the named
/// bench kernels.
fn kernels(bench: &[&str]) -> Vec<(String, Kernel)> {
    let mut out = common::verified_file_kernels(
        &[
            "examples",
            "tests/filetests/async",
            "tests/filetests/placement",
        ],
        50,
    );
    for (name, text) in smemsync::bench_kernels::real_tiled_kernels() {
        if bench.contains(&name.as_str()) {
            out.push((name, parse_verified(&text)));
        }
    }
    out
}

/// The wait plan, the completions on the kernel with its waits and the barrier placement of
/// that kernel, as debug text, with the mended witnesses and the warp shifts on or off; and
/// the questions each answered.
fn waits_completions_barriers(k: &Kernel, t: &Target, on: bool) -> (Vec<String>, (u64, u64)) {
    sym_overlap::mended_witnesses(on);
    pairs::warp_shifts(on);
    let mut memo = FlowMemo::for_kernel(k);
    let plan = plan_waits_memo(k, t, &mut memo);
    let mut out = vec![format!("{plan:?}")];
    if let Ok(p) = &plan {
        let with_waits = apply(k, &p.plan).unwrap();
        let c = completions_memo(&with_waits, t, &mut memo);
        out.push(format!("{c:?}"));
        let mut pm = PlaceMemo {
            flow: memo,
            footprints: Some(Box::default()),
        };
        match place_barriers_memo(&with_waits, t, &PlaceOptions::default(), &mut pm) {
            Ok(b) => out.push(format!("{:?} {:?} {:?}", b.stats, b.plan, b.warnings)),
            Err(e) => out.push(format!("{e:?}")),
        }
    }
    let n = (sym_overlap::mended_count(), pairs::warp_shift_counts().1);
    sym_overlap::mended_witnesses(true);
    pairs::warp_shifts(true);
    (out, n)
}

fn mended_change_nothing(bench: &[&str]) {
    let t = Target::from_name("sm_80").unwrap();
    for (name, k) in &kernels(bench) {
        let (got, (mended, shifted)) = waits_completions_barriers(k, &t, true);
        let (want, _) = waits_completions_barriers(k, &t, false);
        assert_eq!(got, want, "{name}");
        if !name.ends_with(".kir") {
            eprintln!("{name}: {mended} overlap questions mended, {shifted} cross-warp shifted");
        }
        if name.starts_with("gemm") && name.contains("t64 unrolled") {
            assert!(
                mended > 0 && shifted > 0,
                "{name}: mended {mended}, shifted {shifted}"
            );
        }
    }
}

#[test]
fn mended_witnesses_change_no_wait_completion_or_barrier() {
    mended_change_nothing(&["gemm 64x64x32 t64 unrolled", "flash 128x64 d64 t128 rolled"]);
}

/// The kernel these serve, and the other unrolled bench kernels (release build: about a
/// second each).
#[test]
#[ignore]
fn real_size_unrolled_kernels_change_nothing() {
    mended_change_nothing(&[
        "gemm 128x128x64 t64 unrolled",
        "gemm 128x128x64 t256 unrolled",
        "flash 128x64 d64 t128 unrolled",
    ]);
}
