//! The generated kernels of the parameter tests (`tests/uniform_cases.rs` with declared
//! ranges, `tests/unranged_params.rs` without): 64 threads store into `@a : f32[4, 64]` and
//! load from it at a row and a column drawn from [`ROWS`] and [`COLS`] (uniform through the
//! parameters `%m` and `%p`, or thread-dependent: rows, lane offsets within a warp, wrapped
//! columns, double-buffer slots over a loop), and the two questions those tests ask of each:
//! what hazard finding says ([`said`]) and whether the interpreter finds a race at given
//! parameter values ([`races`]).
//!
//! Each kernel is a few dozen ops; [`races`] interprets two schedules of 64 threads.

use smemsync::analysis::hazards::find_hazards;
use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::ir::Kernel;
use smemsync::target::Target;

/// Row indices (dimension of 4): uniform through the parameters, or thread-dependent.
pub const ROWS: &[&str] = &["%m", "%m", "%mq", "%mp", "%tq", "0", "%s"];
/// Column indices (dimension of 64).
pub const COLS: &[&str] = &["%t", "%t", "%tp", "%tr", "%tw", "%tm", "%th"];

/// The declared ranges of `%m` and `%p` in the ranged kernels.
pub const RANGED: (&str, &str) = (" in [0, 3]", " in [0, 5]");
/// No declared ranges.
pub const UNRANGED: (&str, &str) = ("", "");

/// A kernel that stores at `@a[r1, c1]` and loads `@a[r2, c2]`, in a loop of three
/// iterations when `looped` (`%s` is then the slot `rem(%k + %m, 2)`), with `ranges` written
/// after the types of `%m` and `%p` ([`RANGED`] or [`UNRANGED`]).
pub fn kernel(
    store: (&str, &str),
    load: (&str, &str),
    looped: bool,
    (rm, rp): (&str, &str),
) -> String {
    let body = format!(
        "store @a[{}, {}], %f\n  %x = load @a[{}, {}]\n  gstore %out[%t], %x\n",
        store.0, store.1, load.0, load.1
    );
    let (open, close, s) = if looped {
        (
            "for %k = 0 to 3 step 1 {\n  %ks = add %k, %m\n  %s = rem %ks, 2\n  ",
            "}\n",
            "",
        )
    } else {
        ("", "", "%s = rem %m, 2\n  ")
    };
    format!(
        r#"kernel @k(%m: i32{rm} = 1, %p: i32{rp} = 2, %out: global f32[64]) block(64) {{
  shared @a : f32[4, 64]
  %t = tid.x
  %f = itof %t
  %m1 = add %m, 1
  %mq = rem %m1, 4
  %mp0 = add %m, %p
  %mp = rem %mp0, 4
  %tq = div %t, 16
  %tp0 = add %t, %p
  %tp = and %tp0, 63
  %tr = sub 63, %t
  %hi = and %t, -32
  %lo = and %tp0, 31
  %tw = add %hi, %lo
  %tm0 = add %t, %m
  %tm = rem %tm0, 64
  %th = div %t, 2
  {s}{open}{body}{close}}}
"#
    )
}

/// What hazard finding says of a kernel.
#[derive(Debug, PartialEq, Clone, Copy)]
pub enum Said {
    /// A race of one op (E0301).
    Race,
    /// A conservative answer (a W031x warning): either may happen.
    May,
    /// Nothing.
    Nothing,
}

/// What [`find_hazards`] says of `k` on `target`.
pub fn said(k: &Kernel, target: &Target) -> Said {
    let h = find_hazards(k, target);
    let codes: Vec<&str> = h.findings.iter().map(|d| d.code).collect();
    if codes.contains(&"E0301") {
        Said::Race
    } else if codes.iter().any(|c| c.starts_with("W031")) {
        Said::May
    } else {
        Said::Nothing
    }
}

/// Whether interpretation of `k` finds a race with `%m = m`, `%p = p` (two schedules);
/// panics on a deadlock.
pub fn races(k: &Kernel, target: &Target, m: i64, p: i64) -> bool {
    let o = CheckOptions {
        target: Some(*target),
        bounds: vec![("m".into(), m), ("p".into(), p)],
        try_proof: false,
        schedules: 2,
        ..CheckOptions::default()
    };
    let r = check_race_free(k, &o);
    assert!(
        !matches!(r.verdict, Verdict::Deadlock(_)),
        "deadlock: {}",
        r.summary()
    );
    r.is_race()
}
