//! The in-flight question through scalar parameters (docs/async.md, "Parameters in flight"),
//! against the interpreter: a copy (`cp_async` on sm_80, `tma_load` through a view on sm_90)
//! whose index reads `%p` (unranged, or ranged), a store or load at another index on `%p`
//! before the wait, then the wait and a read of the copy. Each kernel is synchronized and:
//!
//! - synchronized: `check` finds the result race-free at several values of `%p` that keep
//!   every index in its dimension (an index out of range is an execution error);
//! - refused: the refusal is E0302/E0602, and the pair meets for some `%p` or a W03xx warning
//!   says the answer was conservative (never a silent whole-buffer answer);
//! - where the two indices are apart for every `%p` in a linear form: no wait before the
//!   consumer, no conservative answer.
//!
//! Debug build: a few seconds.

use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;
use common::parse_verified as parse;

/// A cp.async kernel on a flat `f32[512]` buffer: the copy writes `@buf[copy]`, `access`
/// (`store` or `load`) touches `@buf[other]` before the wait.
fn cp_async(param: &str, copy: &str, other: &str, access: &str) -> String {
    let touch = match access {
        "store" => format!("store @buf[{other}], 1.0"),
        _ => format!("%y = load @buf[{other}]\n  gstore %Z[%t], %y"),
    };
    format!(
        r#"kernel @k(%p: i32{param}, %X: global f32[64], %Y: global f32[64], %Z: global f32[64]) block(64) {{
  shared @buf : f32[512]
  %t = tid.x
  %b = mul %p, 64
  %i = add %b, %t
  %i64 = add %i, 64
  %i32 = add %i, 32
  %r = sub 63, %t
  %ir = add %b, %r
  cp_async @buf[{copy}] <- %X[%t]
  cp_async_commit
  {touch}
  cp_async_wait 0
  %x = load @buf[{copy}]
  gstore %Y[%t], %x
}}
"#
    )
}

/// A TMA kernel on `f32[8, 64]`: the elected thread loads row `%p` through a view, every
/// thread touches row `row` before the mbarrier wait.
fn tma(param: &str, row: &str, access: &str) -> String {
    let touch = match access {
        "store" => format!("store @buf[{row}, %t], 1.0"),
        _ => format!("%y = load @buf[{row}, %t]\n  gstore %Z[%t], %y"),
    };
    format!(
        r#"kernel @k(%p: i32{param}, %X: global f32[8, 64], %Y: global f32[64], %Z: global f32[64]) block(64) {{
  shared @buf : f32[8, 64]
  shared @full : mbarrier[1]
  %t = tid.x
  %q = add %p, 1
  %m = and %p, 7
  %mq = and %q, 7
  %lead = cmp eq %t, 0
  if %lead {{
    mbar_init @full[0], 1
  }}
  barrier
  if %lead {{
    %v = view @buf[%p]
    mbar_arrive @full[0] tx 256
    tma_load %v <- %X[0, 0], @full[0]
  }}
  {touch}
  mbar_wait @full[0], 0
  %x = load @buf[%p, %t]
  gstore %Y[%t], %x
}}
"#
    )
}

/// Whether `check` finds a race in `k` with `%p = p`.
fn races(k: &smemsync::ir::Kernel, target: Target, p: i64) -> bool {
    common::interpret_without_deadlock(k, target, &[("p", p)]).is_race()
}

/// What one case expects: the pair meets for some `%p` (a wait or a refusal is right), or
/// is apart for every `%p` in a form the engine decides (nothing to add, nothing
/// conservative), or is apart but may be answered conservatively (with a warning).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Meets,
    Apart,
    ApartOrWarned,
}

fn run_case(src: &str, target: Target, values: &[i64], expect: Expect) {
    let k = parse(src);
    match synchronize(&k, &target, &PlaceOptions::default()) {
        Ok(s) => {
            let warned = s
                .placement
                .warnings
                .iter()
                .any(|d| d.code.starts_with("W031") || d.code.starts_with("W032"));
            if expect == Expect::Apart {
                assert_eq!(s.placement.stats.conservative, 0, "conservative\n{src}");
                assert_eq!(s.waits.edits.len(), 0, "a wait written\n{src}");
            }
            if expect == Expect::ApartOrWarned && !s.waits.edits.is_empty() {
                assert!(warned, "a wait written without a warning\n{src}");
            }
            for &p in values {
                assert!(
                    !races(&s.kernel, target, p),
                    "synchronized, but a race at p={p}\n{}",
                    smemsync::emit::text::print_kernel(&s.kernel)
                );
            }
        }
        Err(ds) => {
            let codes: Vec<&str> = ds.iter().map(|d| d.code).collect();
            assert!(
                codes.iter().any(|c| *c == "E0302" || *c == "E0602"),
                "{codes:?}\n{src}"
            );
            let warned = codes
                .iter()
                .any(|c| c.starts_with("W031") || c.starts_with("W032"));
            assert!(
                expect == Expect::Meets || (expect == Expect::ApartOrWarned && warned),
                "refused ({codes:?}) though the pair is apart for every p\n{src}"
            );
            if expect == Expect::Meets {
                // The refusal is a real race of the input at some value.
                assert!(
                    values.iter().any(|&p| races(&k, target, p)),
                    "refused, but no race\n{src}"
                );
            }
        }
    }
}

#[test]
fn cp_async_through_a_parameter_is_exact_or_warned() {
    let sm80 = Target::from_name("sm_80").expect("known");
    // %i = 64·p + t; every index stays in [0, 512) for p in 0..=6.
    let values = [0, 1, 3, 6];
    for param in ["", " in [0, 6]"] {
        for access in ["store", "load"] {
            for (other, expect) in [
                ("%i64", Expect::Apart),
                ("%i", Expect::Meets),
                ("%ir", Expect::Meets),
                ("%i32", Expect::Meets),
                ("%t", Expect::Meets),
            ] {
                let src = cp_async(param, "%i", other, access);
                run_case(&src, sm80, &values, expect);
            }
        }
    }
}

#[test]
fn tma_rows_through_a_parameter_are_exact_or_warned() {
    let sm90 = Target::from_name("sm_90").expect("known");
    let values = [0, 2, 6];
    for param in ["", " in [0, 6]"] {
        for access in ["store", "load"] {
            for (row, expect) in [
                ("%q", Expect::Apart),
                ("%p", Expect::Meets),
                ("0", Expect::Meets),
                ("%m", Expect::Meets),
                // Apart for every `%p` that keeps row `%p` in range, but through a bit
                // operation on a wide `%p`: decided when ranged, warned when not.
                ("%mq", Expect::ApartOrWarned),
            ] {
                let src = tma(param, row, access);
                run_case(&src, sm90, &values, expect);
            }
        }
    }
}
