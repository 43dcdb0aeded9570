//! The interpreter's hardware-form `wgmma` against an independent matrix product: a kernel
//! copies row-major A (64 x 16) and B (16 x N) into the core-matrix views of docs/ir.md
//! section 4, runs a chain of two m64nNk16 wgmmas (the second accumulating onto the first),
//! and stores every accumulator register at the (row, column) that the PTX fragment layout
//! gives it, computed in the kernel's own arithmetic. The expected C is computed here with
//! plain loops over A and B: products exact, added in increasing k from the accumulator.
//! The register-A form is checked the same way: each thread loads the eight A elements of its
//! fragment (PTX's `.f16x2` A layout, written out in the kernel's arithmetic) straight from
//! global memory, and both wgmmas of the chain read those registers.

use smemsync::check::interp::{Val, input_element};
use smemsync::check::{CheckOptions, run};
use smemsync::ir::ElemType;

mod common;

fn kernel(n: u64) -> String {
    let r = n / 2;
    let regs = |p: &str| {
        (0..r)
            .map(|i| format!("%{p}{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let zeros = vec!["0.0"; r as usize].join(", ");
    let mut s =
        format!(
        "kernel @mma(%A: global f16[1024], %B: global f16[{b}], %C: global f32[{c}]) block(128) {{
  shared @a : f16[8, 2, 8, 8]
  shared @b : f16[{nb}, 2, 8, 8]
  %t = tid.x
{copy_a}{copy_b}  fence_proxy_async
  barrier
  {d} = wgmma @a, @b, {zeros}
  {e} = wgmma @a, @b, {d}
  wgmma_commit
  wgmma_wait 0
  %w = div %t, 32
  %l = rem %t, 32
  %w16 = mul %w, 16
  %l4 = div %l, 4
  %row = add %w16, %l4
  %lm = rem %l, 4
  %col = mul %lm, 2
",
        b = 16 * n,
        c = 64 * n,
        nb = n / 8,
        d = regs("d"),
        e = regs("e"),
        // A (64 x 16, row-major): element 16 m + k at [m / 8, k / 8, m mod 8, k mod 8].
        copy_a = common::copy_loop_128(
            "  ",
            ("i", "8"),
            "%A",
            ("%iq", &[("%mb", 8), ("%mr", 8), ("%kb", 2), ("%kr", 8)]),
            "@a[%mb, %kb, %mr, %kr]",
        ),
        // B (16 x N, row-major): element N k + n at [n / 8, k / 8, n mod 8, k mod 8].
        copy_b = common::copy_loop_128(
            "  ",
            ("j", &(16 * n / 128).to_string()),
            "%B",
            ("%jq", &[("%kb2", 2), ("%kr2", 8), ("%nb", n / 8), ("%nr", 8)]),
            "@b[%nb, %kb2, %nr, %kr2]",
        ),
    );
    for i in 0..r {
        // Register i: row + 8 ((i / 2) mod 2), column + 8 (i / 4) + i mod 2.
        let (dr, dc) = (8 * ((i / 2) % 2), 8 * (i / 4) + i % 2);
        s.push_str(&format!(
            "  %r{i} = add %row, {dr}\n  %c{i} = add %col, {dc}\n  %rn{i} = mul %r{i}, {n}\n  %x{i} = add %rn{i}, %c{i}\n  gstore %C[%x{i}], %e{i}\n"
        ));
    }
    s.push_str("}\n");
    s
}

/// The same product with A in registers: thread `t` loads `A[row][col]` for its eight
/// fragment positions (rows `16 w + l / 4` and `+ 8`, columns `2 (l mod 4)`, `+ 1`, `+ 8`,
/// `+ 9`) and both wgmmas take them as A.
fn kernel_register_a(n: u64) -> String {
    let src = kernel(n);
    let start = src.find("  for %i = 0 to 8").expect("A copy loop");
    let end = src.find("  for %j = 0 to").expect("B copy loop");
    let mut load = String::from(
        "  %aw = div %t, 32\n  %al = rem %t, 32\n  %aw16 = mul %aw, 16\n  %al4 = div %al, 4\n  %arow = add %aw16, %al4\n  %alm = rem %al, 4\n  %acol = mul %alm, 2\n",
    );
    for i in 0..8u64 {
        let (dr, dc) = (8 * ((i / 2) % 2), 8 * (i / 4) + i % 2);
        load.push_str(&format!(
            "  %ar{i} = add %arow, {dr}\n  %ac{i} = add %acol, {dc}\n  %ar16{i} = mul %ar{i}, 16\n  %ax{i} = add %ar16{i}, %ac{i}\n  %a{i} = gload %A[%ax{i}]\n"
        ));
    }
    let regs = (0..8)
        .map(|i| format!("%a{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let out = format!("{}{load}{}", &src[..start], &src[end..]);
    out.replace("  shared @a : f16[8, 2, 8, 8]\n", "")
        .replace("wgmma @a, @b,", &format!("wgmma [{regs}], @b,"))
}

fn input(p: u64, i: u64) -> f32 {
    match input_element(1, p, i, ElemType::F16) {
        Val::F32(f) => f,
        v => panic!("f16 input read as {v:?}"),
    }
}

#[test]
fn hardware_wgmma_computes_the_matrix_product_in_the_fragment_layout() {
    check_product(kernel);
}

#[test]
fn register_a_wgmma_computes_the_same_product_from_the_a_fragment() {
    let src = kernel_register_a(16);
    assert!(
        src.contains("wgmma [%a0,") && !src.contains("shared @a"),
        "{src}"
    );
    check_product(kernel_register_a);
}

fn check_product(kernel: fn(u64) -> String) {
    for n in [8u64, 16, 32] {
        let k = common::parse_verified(&kernel(n));
        let out = run(&k, 1, &CheckOptions::default()).expect("runs");
        let c = out.get("C").expect("C");
        for row in 0..64 {
            for col in 0..n {
                let dot = |acc: f32| {
                    (0..16).fold(acc, |s, kk| {
                        s + input(0, row * 16 + kk) * input(1, kk * n + col)
                    })
                };
                let want = dot(dot(0.0));
                let got = c.data[(row * n + col) as usize];
                assert_eq!(got, Val::F32(want), "n = {n}, C[{row}][{col}]");
            }
        }
    }
}
