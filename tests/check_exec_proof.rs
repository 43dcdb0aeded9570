//! "Proved" covers execution errors (docs/checker.md, "Static mode"): a kernel whose race
//! freedom is proved is proved *plain* only when no out-of-range index (C0004), division by
//! zero or non-positive step (C0005) or uninitialized shared read (C0006) can stop it first.
//! Every mutant below (an index off by one at the last thread, at the last trip, at the
//! largest parameter; a divisor or step that may be 0; a read before any write; a read of a
//! slot the prologue never filled) is never proved plain, and interpretation finds its
//! error at the values that reach it; the unmutated kernels are proved plain. A soundness
//! oracle over random kernels: none proved plain is one where interpretation, at several
//! parameter values, stops with C0004, C0005 or C0006.

use std::process::Command;

use smemsync::check::proof_exec::{Obligation, obligations};
use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::ir::Kernel;

mod common;
use common::{GenConfig, parse_verified as parse, random_kernel, random_kernel_text};

const BASE: &str = "kernel @k(%X: global f32[256], %n: i32 in [1, 4] = 2, %m: i32 in [1, 4] = 2, %p: i32 in [1, 4] = 2, %s: i32 in [1, 2] = 1) block(128) {
  shared @a : f32[128]
  shared @b : f32[4]
  %t = tid.x
  %x = gload %X[%t]
  store @a[%t], %x
  %lead = cmp eq %t, 0
  for %i = 0 to %n step 1 {
    if %lead {
      store @b[%i], %x
    }
  }
  barrier
  %r = sub 127, %t
  %y = load @a[%r]
  %u = add %p, 123
  %v = load @a[%u]
  %q = div %t, %m
  %z = load @b[0]
  %w = add %y, %z
  %w2 = add %w, %v
  gstore %X[%q], %w2
}
";

fn mutant(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "BASE lacks {from:?}");
    BASE.replacen(from, to, 1)
}

fn check(k: &Kernel) -> Verdict {
    check_race_free(k, &CheckOptions::default()).verdict
}

/// Interpretation alone at the given parameter values: the execution error's code.
fn interpreted_error(k: &Kernel, bounds: &[(&str, i64)]) -> Option<&'static str> {
    let o = CheckOptions {
        try_proof: false,
        schedules: 2,
        bounds: bounds.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        ..CheckOptions::default()
    };
    match check_race_free(k, &o).verdict {
        Verdict::ExecError(d) => Some(d.code),
        _ => None,
    }
}

fn proved_plain(v: &Verdict) -> bool {
    matches!(v, Verdict::Proved { not_shown, .. } if not_shown.is_empty())
}

#[test]
fn the_base_kernel_is_proved_plain() {
    let k = parse(BASE);
    assert!(
        obligations(&k, None).is_empty(),
        "{:?}",
        obligations(&k, None)
    );
    assert!(proved_plain(&check(&k)), "{:?}", check(&k));
    for (n, v) in [("n", 4), ("m", 1), ("p", 4), ("s", 1), ("s", 2)] {
        assert_eq!(interpreted_error(&k, &[(n, v)]), None);
    }
}

/// A mutant: its name, text, the obligation it breaks, the values at which interpretation
/// finds it and the code it finds.
type Mutant = (
    &'static str,
    String,
    Obligation,
    Vec<(&'static str, i64)>,
    &'static str,
);

/// Each mutant: the obligation it breaks, the values at which interpretation finds it.
#[test]
fn mutants_are_never_proved_plain_and_interpretation_finds_them() {
    let cases: Vec<Mutant> = vec![
        (
            "index off by one at the last thread",
            mutant("%r = sub 127, %t", "%r = add %t, 1"),
            Obligation::InBounds,
            vec![],
            "C0004",
        ),
        (
            "index off by one at the last trip",
            mutant(
                "for %i = 0 to %n step 1",
                "%n1 = add %n, 1\n  for %i = 0 to %n1 step 1",
            ),
            Obligation::InBounds,
            vec![("n", 4)],
            "C0004",
        ),
        (
            "index off by one at the largest parameter",
            mutant("%u = add %p, 123", "%u = add %p, 124"),
            Obligation::InBounds,
            vec![("p", 4)],
            "C0004",
        ),
        (
            "a divisor that may be zero",
            mutant("%m: i32 in [1, 4]", "%m: i32 in [0, 4]"),
            Obligation::Divisor,
            vec![("m", 0)],
            "C0005",
        ),
        (
            "a step that may be zero",
            mutant("%s: i32 in [1, 2]", "%s: i32 in [0, 2]").replacen(
                "for %i = 0 to %n step 1",
                "for %i = 0 to %n step %s",
                1,
            ),
            Obligation::Divisor,
            vec![("s", 0)],
            "C0005",
        ),
        (
            "a read before any write",
            mutant(
                "  %x = gload %X[%t]\n",
                "  %x = gload %X[%t]\n  %e = load @a[%t]\n  gstore %X[%t], %e\n",
            ),
            Obligation::Initialized,
            vec![],
            "C0006",
        ),
        (
            "a read of an element the loop may not write",
            mutant("%z = load @b[0]", "%z = load @b[1]"),
            Obligation::Initialized,
            vec![("n", 1)],
            "C0006",
        ),
    ];
    assert_mutants_caught(cases);
}

/// `smemsync sync --target sm_80` of `src` (through the command line: the checker never
/// links the placer).
fn synced(src: &str) -> String {
    let path = std::env::temp_dir().join(format!("smemsync-exec-proof-{}.kir", std::process::id()));
    std::fs::write(&path, src).expect("writes the kernel");
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(["sync", "--target", "sm_80"])
        .arg(&path)
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The cp.async double buffer: its slots are initialized by the prologue and by the copies
/// of earlier iterations (rotating `rem %k1, 2` slots); without the prologue copy of one
/// operand, iteration 0 reads a slot nobody filled.
#[test]
fn a_slot_the_prologue_never_filled_is_not_proved_plain() {
    let text = synced(include_str!("../examples/gemm-cp-async-double-buffer.kir"));
    let k = parse(&text);
    let v = check_race_free(&k, &CheckOptions::default()).verdict;
    assert!(proved_plain(&v), "{v:?}");
    let line = "cp_async %b0[%ty, %tx] <- %B[%ty, %tx]\n";
    assert!(text.contains(line), "{text}");
    let m = parse(&text.replacen(line, "", 1));
    let ns = obligations(&m, None);
    assert!(
        ns.iter().any(|n| n.what == Obligation::Initialized),
        "{ns:?}"
    );
    assert!(!proved_plain(&check(&m)));
    assert_eq!(interpreted_error(&m, &[]), Some("C0006"));
}

/// Soundness oracle: a random kernel proved plain never stops with an execution error when
/// interpreted, at the default and extreme parameter values; and enough of them are proved
/// plain for this to mean something.
#[test]
fn random_kernels_proved_plain_never_stop_with_an_execution_error() {
    let cfg = GenConfig {
        params: true,
        ..GenConfig::default()
    };
    let (mut plain, mut total) = (0, 0);
    for seed in 0..300u64 {
        let k = random_kernel(seed, &cfg);
        let v = check(&k);
        if !matches!(v, Verdict::Proved { .. }) {
            continue;
        }
        total += 1;
        if !proved_plain(&v) {
            continue;
        }
        plain += 1;
        let has_n = k.scalar_param("n").is_some();
        let values: &[&[(&str, i64)]] = if has_n {
            &[&[], &[("n", 0)], &[("n", 1)], &[("n", 7)], &[("n", 64)]]
        } else {
            &[&[]]
        };
        for b in values {
            let e = interpreted_error(&k, b);
            assert!(
                !matches!(e, Some("C0004" | "C0005" | "C0006")),
                "seed {seed} proved plain, interpretation at {b:?} stops with {e:?}:\n{}",
                random_kernel_text(seed, &cfg)
            );
        }
    }
    eprintln!("{plain} of {total} proved random kernels proved plain");
    assert!(plain * 4 >= total, "only {plain} of {total} proved plain");
}

/// A three-slot ring filled by a prologue and by copies guarded by `%k + 2 < %n` (Triton's
/// form): iteration `k` reads slot `k mod 3`, which the prologue or iteration `k - 2` wrote,
/// exactly when iteration `k` exists. The trip-count cases decide the guard.
const RING: &str = "kernel @k(%n: i32 in [1, 64] = 4) block(64) {
  shared @a : f32[3, 64]
  %t = tid.x
  %u = sub 63, %t
  store @a[0, %t], 1.0
  store @a[1, %t], 1.0
  for %k = 0 to %n step 1 {
    %nk = add %k, 2
    %has = cmp lt %nk, %n
    %ws = rem %nk, 3
    %rs = rem %k, 3
    barrier
    %x = load @a[%rs, %u]
    barrier
    if %has {
      store @a[%ws, %t], %x
    }
  }
}
";

/// A store loop, a barrier, a load loop with the same bounds (Wave's sibling subgraphs).
const SIBLINGS: &str = "kernel @k(%n: i32 in [0, 64] = 3, %m: i32 in [0, 64] = 3) block(64) {
  shared @s : f32[64]
  %t = tid.x
  %u = sub 63, %t
  for %i = 0 to %n step 1 {
    store @s[%t], 1.0
  }
  barrier
  for %j = 0 to %n step 1 {
    %x = load @s[%u]
  }
}
";

#[test]
fn guarded_ring_slots_and_sibling_loops_are_proved_plain_and_their_mutants_are_not() {
    for text in [RING, SIBLINGS] {
        let k = parse(text);
        assert!(
            obligations(&k, None).is_empty(),
            "{:?}",
            obligations(&k, None)
        );
        assert!(proved_plain(&check(&k)));
    }
    let cases = [
        (
            RING.replacen("  store @a[1, %t], 1.0\n", "", 1),
            vec![("n", 4)],
        ),
        (
            // The guard one trip too strict: at n = 3, slot 2 is never written.
            RING.replacen(
                "%has = cmp lt %nk, %n",
                "%nk3 = add %k, 3\n    %has = cmp lt %nk3, %n",
                1,
            ),
            vec![("n", 3)],
        ),
        (
            SIBLINGS.replacen("for %j = 0 to %n", "for %j = 0 to %m", 1),
            vec![("n", 0), ("m", 1)],
        ),
    ];
    for (text, bounds) in cases {
        let k = parse(&text);
        let ns = obligations(&k, None);
        assert!(
            ns.iter().any(|n| n.what == Obligation::Initialized),
            "{ns:?}\n{text}"
        );
        assert!(!proved_plain(&check(&k)));
        assert_eq!(interpreted_error(&k, &bounds), Some("C0006"), "{text}");
    }
}

/// A budget too small for the walk: the verdict is never plain "proved", it names the
/// budget (one `Budget` entry at the op where the walk stopped), and its summary says that
/// execution errors were not looked for; a large enough budget proves the kernel plain.
/// On a mutant and random kernels: a budget of 0 always stops the walk, and a random budget
/// is never silent where the full walk is not.
#[test]
fn a_budget_too_small_is_never_proved_plain() {
    use smemsync::check::proof_exec::obligations_within;
    let k = parse(BASE);
    // (The block-wide pass spends about one unit per op on this kernel: 10 stops it.)
    for budget in [0, 1, 5, 10] {
        let o = CheckOptions {
            exec_budget: budget,
            ..CheckOptions::default()
        };
        let r = check_race_free(&k, &o);
        assert!(
            !proved_plain(&r.verdict),
            "budget {budget}: {:?}",
            r.verdict
        );
        assert!(
            r.summary().contains("execution errors not all looked for"),
            "budget {budget}: {}",
            r.summary()
        );
        let ns = obligations_within(&k, None, budget);
        assert_eq!(
            ns.iter().filter(|n| n.what == Obligation::Budget).count(),
            1,
            "{ns:?}"
        );
    }
    let r = check_race_free(
        &k,
        &CheckOptions {
            exec_budget: u64::MAX / 2,
            ..CheckOptions::default()
        },
    );
    assert!(proved_plain(&r.verdict), "{:?}", r.verdict);
    let cfg = GenConfig {
        params: true,
        ..GenConfig::default()
    };
    let mut kernels = vec![parse(&mutant("%r = sub 127, %t", "%r = sub 128, %t"))];
    kernels.extend((0..80u64).map(|seed| random_kernel(seed, &cfg)));
    let mut rng = 0x9e37_79b9u64;
    for k in kernels {
        let full = obligations_within(&k, None, u64::MAX / 2);
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let budget = rng >> 50;
        let cut = obligations_within(&k, None, budget);
        // Never silent where the full walk is not: a budget adds entries, never hides one.
        assert!(full.is_empty() || !cut.is_empty(), "budget {budget}");
        // A budget below one op's work always stops the walk.
        let tiny = obligations_within(&k, None, 0);
        assert!(
            tiny.iter().any(|n| n.what == Obligation::Budget),
            "{tiny:?}"
        );
    }
}

/// Three kernels a review found proved plain although they stop with an execution error:
/// a counter loop's result one past its iterations' range (the last yield), a loop whose
/// trip count differs per thread read as giving one value in every thread, and a top-level
/// loop whose trip-count cases passed `i32::MAX` (the case was dropped, not clipped). None
/// is proved plain, and interpretation finds each error at the values that reach it.
#[test]
fn the_reviewed_holes_are_never_proved_plain() {
    let last_yield = "kernel @x(%out: global f32[64], %n: i32 in [0, 100]) block(64) {
  shared @s : f32[100]
  %t = tid.x
  %r = for %k = 0 to %n step 1 iter(%c = 0) {
    %c1 = add %c, 1
    yield %c1
  }
  %z = cmp eq %t, 0
  if %z {
    store @s[%r], 1.0
  }
}
";
    let per_thread_trips = "kernel @x(%out: global f32[64]) block(64) {
  shared @s : f32[64]
  %t = tid.x
  %h = rem %t, 4
  %r = for %k = 0 to %h step 1 iter(%c = 0) {
    %c1 = add %c, 1
    yield %c1
  }
  for %k = 0 to %r step 1 {
    store @s[%t], 1.0
  }
  barrier
  %u = sub 63, %t
  for %k2 = 0 to %r step 1 {
    %x = load @s[%u]
    gstore %out[%t], %x
  }
}
";
    let cases_past_max =
        "kernel @x(%out: global f32[64], %n: i32 in [1073741825, 2147483647]) block(64) {
  shared @s : f32[64]
  %t = tid.x
  %x = load @s[100]
  gstore %out[%t], %x
  for %k = 0 to %n step 1073741824 {
    gstore %out[%t], 0.0
  }
}
";
    for (name, src, bounds, code) in [
        ("last yield", last_yield, vec![("n", 100)], "C0004"),
        ("per-thread trips", per_thread_trips, vec![], "C0006"),
        (
            "cases past i32::MAX",
            cases_past_max,
            vec![("n", 1073741825)],
            "C0004",
        ),
    ] {
        let k = parse(src);
        let v = check(&k);
        assert!(!proved_plain(&v), "{name}: proved plain: {v:?}");
        assert_eq!(interpreted_error(&k, &bounds), Some(code), "{name}");
    }
}

/// The block-wide pass (docs/checker.md, "The block-wide pass"): indices, divisors and
/// writes whose values differ per thread, shown from their interval over the block where
/// it suffices and thread by thread where it does not. `%j = xor %t, 1` writes every
/// element once (a permutation the hull `[0, 127]` does not show); thread 0 alone writes
/// `@c[0]`; `%t div (%t rem 4 + 1)` reads in range with a non-zero divisor.
const WIDE: &str = "kernel @w(%X: global f32[256]) block(128) {
  shared @a : f32[128]
  shared @c : f32[4]
  %t = tid.x
  %x = gload %X[%t]
  %j = xor %t, 1
  store @a[%j], %x
  %lead = cmp eq %t, 0
  if %lead {
    store @c[0], %x
  }
  barrier
  %h = rem %t, 4
  %d = add %h, 1
  %q = div %t, %d
  %y = load @a[%q]
  %r = sub 127, %t
  %y2 = load @a[%r]
  %z = load @c[0]
  %w = add %y, %z
  %w2 = add %w, %y2
  gstore %X[%t], %w2
}
";

/// Mutants the block-wide pass could miss if its per-thread refinement were wrong: an index
/// out of range for one thread only (through `rem`, `xor`, `div`), a divisor zero in one
/// thread, an element one thread fails to write, a single writer no thread is. None is
/// proved plain, and interpretation finds each error.
#[test]
fn block_wide_mutants_are_never_proved_plain() {
    let k = parse(WIDE);
    assert!(
        obligations(&k, None).is_empty(),
        "{:?}",
        obligations(&k, None)
    );
    assert!(proved_plain(&check(&k)), "{:?}", check(&k));
    let m = |from: &str, to: &str| {
        assert!(WIDE.contains(from), "WIDE lacks {from:?}");
        WIDE.replacen(from, to, 1)
    };
    let cases: Vec<Mutant> = vec![
        (
            "a rem index past the end in thread 126 only",
            m(
                "store @a[%j], %x",
                "%j1 = add %j, 1\n  %j2 = rem %j1, 129\n  store @a[%j2], %x",
            ),
            Obligation::InBounds,
            vec![],
            "C0004",
        ),
        (
            "a div index past the end in thread 124 only",
            m("%y = load @a[%q]", "%q4 = add %q, 4\n  %y = load @a[%q4]"),
            Obligation::InBounds,
            vec![],
            "C0004",
        ),
        (
            "an xor index past the end in thread 126 only",
            m(
                "%y2 = load @a[%r]",
                "%r0 = xor %t, 1\n  %r1 = add %r0, 1\n  %y2 = load @a[%r1]",
            ),
            Obligation::InBounds,
            vec![],
            "C0004",
        ),
        (
            "a divisor zero in every fourth thread",
            m("%d = add %h, 1", "%d = add %h, 0"),
            Obligation::Divisor,
            vec![],
            "C0005",
        ),
        (
            "an element no thread writes (the last thread skips its write)",
            m(
                "  store @a[%j], %x\n",
                "  %some = cmp lt %t, 127\n  if %some {\n    store @a[%t], %x\n  }\n",
            ),
            Obligation::Initialized,
            vec![],
            "C0006",
        ),
        (
            "a single writer that no thread is",
            m("%lead = cmp eq %t, 0", "%lead = cmp eq %t, 128"),
            Obligation::Initialized,
            vec![],
            "C0006",
        ),
    ];
    assert_mutants_caught(cases);
}

/// A write refined thread by thread in a loop is memoized by the intervals of its slice:
/// iterations whose slices differ (the row `%i`) never reuse another's elements. The rows
/// `%n..4` are never written: a read of row 3 is not proved plain when `%n` may be 3.
#[test]
fn refined_writes_in_a_loop_cover_only_their_iterations() {
    let text = |n: &str| {
        format!(
            "kernel @m(%X: global f32[64], %n: i32 in [{n}, 4] = 4) block(64) {{
  shared @a : f32[4, 64]
  %t = tid.x
  for %i = 0 to %n step 1 {{
    %e = add %t, 0
    %c = xor %e, 3
    store @a[%i, %c], 1.0
  }}
  barrier
  %u = sub 63, %t
  %y = load @a[3, %u]
  gstore %X[%t], %y
}}
"
        )
    };
    let k = parse(&text("4"));
    assert!(
        obligations(&k, None).is_empty(),
        "{:?}",
        obligations(&k, None)
    );
    let m = parse(&text("3"));
    let ns = obligations(&m, None);
    assert!(
        ns.iter().any(|n| n.what == Obligation::Initialized),
        "{ns:?}"
    );
    assert_eq!(interpreted_error(&m, &[("n", 3)]), Some("C0006"));
}

/// Issue 12's target: the bench's 128x128x64 GEMM (64 threads, rolled) and the flash loop,
/// synced for sm_80, are proved plain under the default budget.
#[test]
fn the_bench_gemm_and_flash_are_proved_plain_within_the_default_budget() {
    for row in ["gemm 128x128x64 t64 rolled", "flash 128x64 d64 t128 rolled"] {
        let k = parse(&synced(&common::smemsync_stdout(&[
            "bench", "--print", row,
        ])));
        let o = CheckOptions {
            target: Some(smemsync::target::Target::from_name("sm_80").expect("known")),
            ..CheckOptions::default()
        };
        let v = check_race_free(&k, &o).verdict;
        assert!(proved_plain(&v), "{row}: {v:?}");
    }
}

/// Each mutant leaves its obligation not shown, is not proved plain, and stops the
/// interpreter with its error code.
fn assert_mutants_caught(cases: Vec<Mutant>) {
    for (name, text, what, bounds, code) in cases {
        let k = parse(&text);
        let ns = obligations(&k, None);
        assert!(
            ns.iter().any(|n| n.what == what),
            "{name}: {what:?} shown: {ns:?}"
        );
        let v = check(&k);
        assert!(!proved_plain(&v), "{name}: proved plain: {v:?}");
        assert_eq!(interpreted_error(&k, &bounds), Some(code), "{name}");
    }
}

/// `n` pairs `store @a[IDX]; barrier; load @a[%u]; barrier` on one buffer (the bench's
/// one-buffer family after `sync`, the buffer twice as large), the stores writing through
/// `idx` (`%t`, or a value computed from it in `pre`); the loads read elements 0..256.
fn one_buffer_pairs(n: usize, idx: &str, pre: &str) -> String {
    let mut s = format!(
        "kernel @pairs(%out: global f32[256]) block(256) {{\n  shared @a : f32[512]\n  %t = tid.x\n  %f = itof %t\n  %u = sub 255, %t\n{pre}"
    );
    for i in 0..n {
        s += &format!("  store @a[{idx}], %f\n  barrier\n  %x{i} = load @a[%u]\n  barrier\n");
    }
    s + "}\n"
}

/// The n stores of the one-buffer family share one refined-write memo entry (keyed by the
/// index values, docs/checker.md "The block-wide pass"): at n = 10^4 the kernel is proved
/// plain within the default budget (it was `proved-budget`), and a family whose stores (all,
/// or only the first) write the other half of the buffer, through another value, still
/// leaves its reads not shown and stops the interpreter with C0006.
#[test]
fn the_one_buffer_family_is_proved_plain_and_its_other_half_writes_are_caught() {
    let k = parse(&one_buffer_pairs(10_000, "%t", ""));
    let ns = obligations(&k, None);
    assert!(ns.is_empty(), "n = 10^4: {:?}", ns.first());
    let half = "  %h = add %t, 256\n";
    assert_mutants_caught(vec![
        (
            "stores of the other half",
            one_buffer_pairs(50, "%h", half),
            Obligation::Initialized,
            vec![],
            "C0006",
        ),
        (
            "the first store of the other half, the rest of the read half",
            one_buffer_pairs(20, "%t", half).replacen("store @a[%t]", "store @a[%h]", 1),
            Obligation::Initialized,
            vec![],
            "C0006",
        ),
    ]);
}
