//! `i64` arithmetic in the TTGIR importer against the interpreter: `.kir` holds an `i64`
//! value as its low 32 bits, which is exact while the value stays in the `i32` range; where
//! the importer cannot show that for a value an op reads beyond its low bits, it warns W1104
//! (docs/ttgir.md, "Integer ops"). Each kernel here computes
//! `trunci(((pid * A) + B) / C)` through `i64` (`extsi`, `muli`, `addi`, `divsi`, `trunci`),
//! the imported `.kir` is run by the interpreter over a grid of 8 programs with the value
//! stored to a global, and every program's value is compared with the exact `i64` one:
//! wherever they differ, the import must have said W1104. The sweep also shows the
//! warning is not given where the ranges prove the values fit (the counter case of
//! tests/filetests/ttgir/i64-counter-of-a-loop-is-shown-to-fit-in-i32.kir covers loops).

const GRID: i64 = 8;

fn ttgir(a: i64, b: i64, c: i64, divide: &str) -> String {
    format!(
        r#"#blocked = #ttg.blocked<{{sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1], order = [1, 0]}}>
#shared = #ttg.swizzled_shared<{{vec = 1, perPhase = 1, maxPhase = 1, order = [1, 0]}}>
#smem = #ttg.shared_memory
module attributes {{"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = 1 : i32, ttg.target = "cuda:90", "ttg.threads-per-warp" = 32 : i32}} {{
  tt.func public @k(%p: !tt.ptr<f32>) {{
    %c0 = arith.constant 0 : i32
    %ca = arith.constant {a} : i64
    %cb = arith.constant {b} : i64
    %cc = arith.constant {c} : i64
    %v = arith.constant dense<1.000000e+00> : tensor<4x8xf32, #blocked>
    %x = ttg.local_alloc : () -> !ttg.memdesc<4x8xf32, #shared, #smem, mutable>
    %pid = tt.get_program_id x : i32
    %p64 = arith.extsi %pid : i32 to i64
    %m = arith.muli %p64, %ca : i64
    %s = arith.addi %m, %cb : i64
    %q = arith.{divide} %s, %cc : i64
    %q32 = arith.trunci %q : i64 to i32
    %g = arith.cmpi sgt, %q32, %c0 : i32
    scf.if %g {{
      ttg.local_store %v, %x : tensor<4x8xf32, #blocked> -> !ttg.memdesc<4x8xf32, #shared, #smem, mutable>
    }}
    tt.return
  }}
}}
"#
    )
}

/// The exact value: `i64` wrapping arithmetic, `divsi`/`remsi` truncating, then the low 32 bits.
fn exact(pid: i64, a: i64, b: i64, c: i64, divide: &str) -> i64 {
    let s = pid.wrapping_mul(a).wrapping_add(b);
    let q = if divide == "divsi" { s / c } else { s % c };
    q as i32 as i64
}

/// The imported kernel's `%q32` per program, by the interpreter: the `.kir` gets an output
/// global, a grid and a store of the value.
fn interpreted(kir: &str) -> Vec<i64> {
    let header = kir.lines().next().expect("a header");
    let new_header = header.replace(
        ") block(32)",
        &format!(", %out: global i32[{GRID}]) block(32) grid({GRID})"),
    );
    let body = kir.trim_end().strip_suffix('}').expect("a closing brace");
    let text = format!(
        "{}\n  %bq = bid.x\n  gstore %out[%bq], %q32\n}}\n",
        body.replacen(header, &new_header, 1)
    );
    let p = smemsync::read(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let out = smemsync::run(&p, &smemsync::RunOptions::new(None))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let buf = out[0]
        .buffers
        .iter()
        .find(|b| b.name == "out")
        .expect("%out");
    buf.data.iter().map(|&x| x as i64).collect()
}

#[test]
fn a_value_that_differs_from_the_exact_i64_one_is_always_warned() {
    let (mut warned, mut differed, mut exact_silent) = (0, 0, 0);
    for a in [1i64, 3, 1000, 1 << 20, 1 << 29, (1 << 31) - 1] {
        for b in [0i64, 5, (1 << 31) - 1] {
            for c in [1i64, 3, 1 << 20] {
                for divide in ["divsi", "remsi"] {
                    let src = ttgir(a, b, c, divide);
                    let (p, warnings) = smemsync::read_ttgir(&src).expect("imports");
                    let w1104 = warnings.iter().any(|d| d.code == "W1104");
                    let got = interpreted(&p.to_text());
                    let want: Vec<i64> = (0..GRID).map(|i| exact(i, a, b, c, divide)).collect();
                    let what = format!("A={a} B={b} C={c} {divide}");
                    if got != want {
                        differed += 1;
                        assert!(
                            w1104,
                            "{what}: .kir {got:?} != exact {want:?} without W1104"
                        );
                    }
                    warned += w1104 as usize;
                    // Values provably in range (pid < 2^31, A*pid + B < 2^31) must not warn.
                    let max = (i32::MAX as i128) * a as i128 + b as i128;
                    if max <= i32::MAX as i128 {
                        exact_silent += 1;
                        assert!(!w1104, "{what}: in range, yet W1104");
                    }
                }
            }
        }
    }
    // The sweep is not vacuous: some imports differ (and warn), some are shown exact.
    assert!(
        differed > 0 && warned >= differed && exact_silent > 0,
        "{differed} {warned} {exact_silent}"
    );
}
