//! Solutions read at periodic distances (`symbolic::pairs::periodic_solutions`,
//! docs/symbolic.md "Solutions name threads"): at a periodic distance (a slot
//! `rem %k, P` of a loop whose trip count is not known) a pair question's conflict mask is
//! decided per residue, from the solutions the intersection's solves recorded where they name
//! two threads, and `intra_warp` is false without its solves where a recorded solution at a
//! residue the cross-warp problem relates names two warps. It must never change an answer:
//!
//! - on random pipelined kernels (a slot index `rem (%k + s), P` of a symbolically bounded
//!   loop, per-thread indices `div`/`rem` of `%t + c`, block and warp sizes that put
//!   conflicting threads in one warp or in two), every pair question answers as enumeration;
//! - on every example, every file test, and the 64×64×32 GEMMs and the flash loop, every
//!   pair question answers the same with the reading and without it, under warps of 32 and 64.

use smemsync::analysis::symbolic::pairs;
use smemsync::ir::Kernel;

mod common;
use common::{Rng, parse_verified, shrink_on_panic, switch};

/// The answers with the periodic reading and without it are equal (warps 32 and 64).
fn same_with_and_without(k: &Kernel, cap: usize) -> usize {
    let mut n = 0;
    for warp in [32, 64] {
        let what = format!("answers without / with the periodic reading, warp {warp}");
        n += switch::same_off_and_on(&what, pairs::periodic_solutions, || {
            switch::pair_answers(k, warp, cap)
        })
        .len();
    }
    n
}

#[test]
fn the_periodic_reading_changes_no_answer_on_examples_and_file_tests() {
    let ks = switch::verified_file_kernels_under(&["examples", "tests/filetests"], 100);
    let asked: usize = ks.iter().map(|(_, k)| same_with_and_without(k, 40)).sum();
    eprintln!("{} kernels, {asked} questions compared", ks.len());
}

/// The 64×64×32 GEMMs (64 threads, copies rolled and unrolled) and the flash loop: their
/// copies write slot `rem (%k + 2), 3` of a loop over `%K / 32` tiles, a periodic distance.
#[test]
fn the_periodic_reading_changes_no_answer_on_pipelined_kernels() {
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
        let n = same_with_and_without(&k, 48);
        eprintln!("{name}: {n} questions compared");
    }
}

/// A random software-pipelined kernel: `threads` threads copy into slot
/// `rem (%k + s), P` of a shared tile (stores, or `cp_async`) and read slot `rem %k, P`, in a
/// loop whose trip count is a parameter (so the distance is periodic), with per-thread
/// indices `div`/`rem` of `%t + c` by the row length.
fn pipelined_text(seed: u64) -> String {
    let mut r = Rng::new(seed);
    let threads = *r.pick(&[8u32, 16, 32, 64]);
    let period = 2 + r.below(3);
    let cols = *r.pick(&[4u64, 8, 16]);
    let rows = (2 * threads as u64).div_ceil(cols) + 2;
    let mut s = format!(
        "kernel @k(%n: i32 in [1, 64], %g: global f32[{}]) block({threads}) {{\n  shared @s : f32[{period}, {rows}, {cols}]\n  %t = tid.x\n  %f = itof %t\n",
        period * rows * cols
    );
    s.push_str("  for %k = 0 to %n step 1 {\n");
    for n in 0..2 + r.below(3) {
        let shift = r.below(period);
        let c = r.below(threads as u64 + cols);
        s.push_str(&format!(
            "    %q{n} = add %k, {shift}\n    %sl{n} = rem %q{n}, {period}\n    %e{n} = add %t, {c}\n    %r{n} = div %e{n}, {cols}\n    %c{n} = rem %e{n}, {cols}\n"
        ));
        match r.below(3) {
            0 => s.push_str(&format!("    store @s[%sl{n}, %r{n}, %c{n}], %f\n")),
            1 => s.push_str(&format!("    cp_async @s[%sl{n}, %r{n}, %c{n}] <- %g[%t]\n    cp_async_commit\n    cp_async_wait 0\n")),
            _ => s.push_str(&format!("    %v{n} = load @s[%sl{n}, %r{n}, %c{n}]\n")),
        }
    }
    s.push_str("  }\n}\n");
    s
}

/// Every pair question of the kernel, at warps of 4 and 32: the symbolic answer (periodic
/// reading on), where given, equals enumeration's; returns (answered, asked).
fn equal_to_enumeration(text: &str) -> (usize, usize) {
    pairs::periodic_solutions(true);
    common::all_pair_questions_match_enumeration_at(&parse_verified(text), &[4, 32])
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    #[test]
    fn pipelined_slots_answer_as_enumeration(seed in 0u64..1_000_000) {
        let text = pipelined_text(seed);
        let (answered, asked) = shrink_on_panic(&text, equal_to_enumeration);
        proptest::prop_assert!(answered * 2 >= asked, "answered {answered} of {asked}:\n{text}");
    }
}
