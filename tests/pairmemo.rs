//! The unit-lattice test of pair questions (`symbolic::pairs::lattice_test`,
//! docs/symbolic.md "Unit lattices"): a question whose two unit forms cannot meet (their
//! difference ranges over multiples of a gcd, none of them in the interval the two unit
//! ranges need) is answered "no instance pair" without building its problem. It must never
//! change an answer:
//!
//! - on every example, every file test and the real-size GEMM and flash kernels, under warps
//!   of 32 and 64, every pair question (`pair_conflict`, every common prefix and distance
//!   level) and every in-flight intersection (`intersects_at`) answers the same with the
//!   test and without it;
//! - on random kernels of pinned buffers of mixed element sizes (units of several bytes, so
//!   that both sides cover more than one unit) whose per-thread indices are scaled thread ids
//!   plus random constants, the answers with the test equal enumeration's.

use smemsync::analysis::conflicts::PairConflict;
use smemsync::analysis::footprint::Footprints;
use smemsync::analysis::symbolic::pairs;
use smemsync::ir::Kernel;

mod common;
use common::{parse_verified, shrink_on_panic, switch};

type Answer = Option<(u64, u64, bool)>;

/// One question and its answers: (source, destination, plen, var, pair answer, in-flight
/// intersection).
type Asked = (usize, usize, usize, Option<usize>, Answer, Option<bool>);

fn key(r: Option<PairConflict>) -> Answer {
    r.map(|p| (p.conflict, p.intersect, p.intra_warp))
}

/// Every pair question and unpinned in-flight intersection of the kernel's first `cap`
/// accesses, answered by one fresh `Footprints` (its own memo).
fn answers(k: &Kernel, warp: u32, cap: usize) -> Vec<Asked> {
    let fp = Footprints::new(k, warp);
    let n = fp.accesses.len().min(cap);
    let mut out = Vec::new();
    for ai in 0..n {
        for bi in 0..n {
            if fp.accesses[ai].space != fp.accesses[bi].space {
                continue;
            }
            let nest = fp.accesses[ai].loops.len().min(fp.accesses[bi].loops.len());
            for plen in 0..=nest {
                let meets = pairs::intersects_at(&fp, ai, bi, plen, None);
                for var in std::iter::once(None).chain((0..plen).map(Some)) {
                    let r = key(pairs::pair_conflict(&fp, ai, bi, plen, var));
                    out.push((ai, bi, plen, var, r, meets));
                }
            }
        }
    }
    out
}

/// The answers with the lattice test and without it are equal; returns how many questions
/// the test could have cut (answered "no intersection").
fn same_with_and_without(k: &Kernel, cap: usize) -> usize {
    let mut empty = 0;
    for warp in [32, 64] {
        let what = format!(
            "questions (source, destination, plen, var, answer, meets) without / with the lattice test, warp {warp}"
        );
        let on = switch::same_off_and_on(&what, pairs::lattice_test, || answers(k, warp, cap));
        empty += on.iter().filter(|y| matches!(y.4, Some((0, 0, _)))).count();
    }
    empty
}

#[test]
fn the_lattice_test_changes_no_answer_on_examples_and_file_tests() {
    // Files that do not parse or verify (the negative file tests) have no questions.
    let ks = switch::verified_file_kernels_under(&["examples", "tests/filetests"], 100);
    let empty: usize = ks.iter().map(|(_, k)| same_with_and_without(k, 48)).sum();
    eprintln!("{} kernels, {empty} empty answers compared", ks.len());
}

#[test]
fn the_lattice_test_changes_no_answer_on_real_size_kernels() {
    for name in ["flash", "flash-unrolled", "gemm", "gemm-unrolled"] {
        let text = smemsync::bench_kernels::named(name).expect("a bench kernel");
        let k = parse_verified(&text);
        let empty = same_with_and_without(&k, 120);
        eprintln!("{name}: {empty} empty answers compared");
    }
}

/// A random kernel of two or three pinned buffers of i8, f16 or f32 elements (so units of
/// 1 or 2 bytes and sides of 1 to 4 units), overlapping or not, with loads and stores at
/// `a·%t + c` (`a` in 1..4, `c` in 0..7), some in a loop of 2 or 3 trips adding `b·%i`.
fn pinned_text(seed: u64) -> String {
    let mut r = common::Rng::new(seed);
    let threads = *r.pick(&[8u32, 16, 32]);
    let elems = ["i8", "f16", "f32"];
    let nbuf = 2 + r.below(2) as usize;
    let mut s = format!("kernel @k() block({threads}) {{\n");
    let mut bufs = Vec::new();
    for j in 0..nbuf {
        let e = *r.pick(&elems);
        let len = 4 * threads as u64 + 8 + r.below(32);
        let at = 4 * r.below(48);
        s.push_str(&format!("  shared @b{j} : {e}[{len}] at {at}\n"));
        bufs.push((e, len));
    }
    s.push_str("  %t = tid.x\n  %f = itof %t\n");
    let looped = r.chance(1, 2);
    if looped {
        s.push_str(&format!("  for %i = 0 to {} step 1 {{\n", 2 + r.below(2)));
    }
    for n in 0..3 + r.below(4) {
        // In bounds for every thread and iteration: a·t + c + i ≤ 4·(T − 1) + 7 + 2 < len.
        let (j, a, c) = (r.below(nbuf as u64) as usize, 1 + r.below(4), r.below(8));
        s.push_str(&format!(
            "  %m{n} = mul %t, {a}\n  %x{n} = add %m{n}, {c}\n"
        ));
        let ix = if looped && r.chance(1, 2) {
            s.push_str(&format!("  %y{n} = add %x{n}, %i\n"));
            format!("%y{n}")
        } else {
            format!("%x{n}")
        };
        let e = bufs[j].0;
        if r.chance(1, 2) {
            s.push_str(&format!("  %v{n} = load @b{j}[{ix}]\n"));
        } else {
            let z = if e == "i8" { "%t" } else { "%f" };
            s.push_str(&format!("  store @b{j}[{ix}], {z}\n"));
        }
    }
    if looped {
        s.push_str("  }\n");
    }
    s.push_str("}\n");
    s
}

/// Every pair question of the kernel: the symbolic answer (lattice test on), where given,
/// equals enumeration's; returns (answered, asked).
fn equal_to_enumeration(text: &str) -> (usize, usize) {
    pairs::lattice_test(true);
    let k = parse_verified(text);
    common::all_pair_questions_match_enumeration(&mut Footprints::new(&k, 32))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    #[test]
    fn pinned_mixed_sizes_answer_as_enumeration(seed in 0u64..1_000_000) {
        let text = pinned_text(seed);
        let (answered, asked) = shrink_on_panic(&text, equal_to_enumeration);
        proptest::prop_assert!(answered * 2 >= asked, "answered {answered} of {asked}:\n{text}");
    }
}
