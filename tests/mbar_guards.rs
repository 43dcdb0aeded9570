//! Two mbarrier protocols `sync` used to refuse although they are race-free (session 35's
//! K4 and K7; docs/async.md, "Guards that always hold" and "Rounds complete, after their
//! `expect_tx`"), each with variants accepted and mutants refused:
//!
//! - K4: one thread's `mbar_expect_tx` ordered before another thread's arrival by a top-level
//!   `barrier` between them. Accepted, its output race-free in `check`; without the barrier
//!   (or with the arrival before it) the wait is not verified.
//! - K7: the consumer's `mbar_wait` of the TMA pipeline example under a guard that always
//!   holds (on the loop variable, the thread id, a ranged parameter, `and` of two). Accepted
//!   with the unguarded example's barriers, its output race-free in `check`; a guard that is
//!   sometimes false is refused (E0602 naming the guard, or E0306).
//!
//! Debug-build time: a few seconds (one `sync` and one short check per kernel).

mod common;

use smemsync::check::{CheckOptions, check_race_free};
use smemsync::ir::Kernel;
use smemsync::target::Target;

fn sm90() -> Target {
    Target::from_name("sm_90").unwrap()
}

/// `sync`'s output kernel, or the codes of its diagnostics (with their notes' text).
fn sync(k: &Kernel) -> Result<Kernel, Vec<(String, String)>> {
    match smemsync::sync::driver::synchronize(k, &sm90(), &Default::default()) {
        Ok(s) => Ok(s.kernel),
        Err(ds) => Err(ds
            .iter()
            .map(|d| (d.code.to_string(), d.notes.join(" | ")))
            .collect()),
    }
}

/// Asserts that `sync` accepts `src` and that `check` (its static proof, then the
/// interpreter over a few schedules) finds the output race-free; returns the output.
fn accepted(name: &str, src: &str) -> Kernel {
    let k = common::parse_verified_as(name, src);
    let out = sync(&k).unwrap_or_else(|e| panic!("{name}: refused {e:?}\n{src}"));
    let opts = CheckOptions {
        target: Some(sm90()),
        schedules: 3,
        ..Default::default()
    };
    let r = check_race_free(&out, &opts);
    assert!(
        r.is_race_free(),
        "{name}: {}\n{}",
        r.summary(),
        smemsync::emit::text::print_kernel(&out)
    );
    out
}

/// Asserts that `sync` refuses `src` with diagnostic `code`; returns the diagnostics.
fn refused(name: &str, src: &str, code: &str) -> Vec<(String, String)> {
    let k = common::parse_verified_as(name, src);
    match sync(&k) {
        Ok(out) => panic!(
            "{name}: accepted\n{}",
            smemsync::emit::text::print_kernel(&out)
        ),
        Err(ds) => {
            assert!(
                ds.iter().any(|d| d.0 == code),
                "{name}: {ds:?}, want {code}"
            );
            ds
        }
    }
}

fn barriers(k: &Kernel) -> usize {
    common::ops_where(k, |o| matches!(o, smemsync::ir::OpKind::Barrier)).len()
}

/// K4's kernel: thread `tx` expects the bytes (and, with `load_first`, issues the load),
/// then `mid` (a `barrier`, or nothing), then threads below `arrivers` arrive on a slot of
/// count `arrivers`; thread `tx` issues the load after them unless `load_first`.
fn k4(tx: u32, arrivers: u32, mid: &str, load_first: bool) -> String {
    let load = "    tma_load @buf <- %X[0], @full[0]\n";
    let (early, late) = if load_first { (load, "") } else { ("", load) };
    format!(
        "kernel @k(%X: global f32[64], %Y: global f32[64]) block(64) {{
  shared @buf : f32[64]
  shared @full : mbarrier[1]
  %t = tid.x
  %t0 = cmp eq %t, 0
  %tx = cmp eq %t, {tx}
  %arr = cmp lt %t, {arrivers}
  if %t0 {{
    mbar_init @full[0], {arrivers}
  }}
  barrier
  if %tx {{
    mbar_expect_tx @full[0], 256
{early}  }}
{mid}
  if %arr {{
    mbar_arrive @full[0]
  }}
  if %tx {{
{late}    %z = add 0, 0
  }}
  mbar_wait @full[0], 0
  %r = sub 63, %t
  %x = load @buf[%r]
  gstore %Y[%t], %x
}}
"
    )
}

#[test]
fn k4_expect_tx_ordered_by_a_barrier_is_accepted() {
    for (tx, arrivers, load_first) in [
        (1, 1, false),
        (40, 1, false),
        (1, 2, false),
        (1, 1, true),
        (63, 3, true),
    ] {
        let name = format!("K4 tx={tx} arrivers={arrivers} load_first={load_first}");
        accepted(&name, &k4(tx, arrivers, "  barrier", load_first));
    }
}

#[test]
fn k4_without_the_barrier_is_refused() {
    for (tx, arrivers) in [(1, 1), (40, 1), (40, 2)] {
        let name = format!("K4 no barrier tx={tx} arrivers={arrivers}");
        refused(&name, &k4(tx, arrivers, "", false), "E0306");
        // A warp sync orders nothing between threads of two warps.
        if tx >= 32 {
            refused(&name, &k4(tx, arrivers, "  warp_sync", false), "E0602");
        }
    }
}

/// The TMA pipeline example with its consumer wait under `if %gg`, `%gg` defined by `guard`
/// (lines at the wait's indentation); the kernel takes `%n: i32 in [1, 8]`.
fn k7(guard: &str) -> String {
    let src = k7_unguarded();
    let wait = "    mbar_wait @full[%cs], %par\n";
    assert!(src.contains(wait));
    src.replace(wait, &format!("{guard}    if %gg {{\n  {wait}    }}\n"))
}

/// The TMA pipeline example taking `%n: i32 in [1, 8]`.
fn k7_unguarded() -> String {
    let src = std::fs::read_to_string("examples/tma-mbarrier-pipeline.kir").unwrap();
    src.replace(
        "%Y: global f32[8, 256])",
        "%Y: global f32[8, 256], %n: i32 in [1, 8] = 4)",
    )
}

#[test]
fn k7_always_true_guards_are_read_as_unguarded() {
    let plain = accepted("K7 unguarded", &k7_unguarded());
    for guard in [
        "    %gg = cmp ge %i, 0\n",
        "    %gg = cmp lt %i, 8\n",
        "    %gg = cmp le %i, 7\n",
        "    %gg = cmp ne %i, 9\n",
        "    %gg = cmp lt %t, 256\n",
        "    %gg = cmp lt %t, 1024\n",
        "    %gg = cmp gt %n, 0\n",
        "    %g1 = cmp ge %i, 0\n    %g2 = cmp lt %t, 256\n    %gg = and %g1, %g2\n",
        "    %g1 = cmp lt %i, 0\n    %g2 = cmp le %n, 8\n    %gg = or %g1, %g2\n",
    ] {
        let out = accepted(&format!("K7 {guard}"), &k7(guard));
        assert_eq!(
            barriers(&out),
            barriers(&plain),
            "K7 {guard}: not the unguarded placement"
        );
    }
}

#[test]
fn k7_guards_sometimes_false_are_refused() {
    for guard in [
        "    %gg = cmp lt %t, 100\n",
        "    %gg = cmp lt %t, 255\n",
        "    %gg = cmp lt %i, 7\n",
        "    %gg = cmp gt %n, 1\n",
        "    %g1 = cmp ge %i, 0\n    %g2 = cmp lt %t, 128\n    %gg = and %g1, %g2\n",
    ] {
        let ds = refused(&format!("K7 {guard}"), &k7(guard), "E0602");
        assert!(
            ds.iter()
                .any(|d| d.0 == "E0602" && d.1.contains("runs only under `if %gg`")),
            "K7 {guard}: no note names the guard: {ds:?}"
        );
    }
    // Skipping one iteration's wait leaves its parity behind: the next wait is wrong.
    refused("K7 i != 3", &k7("    %gg = cmp ne %i, 3\n"), "E0306");
}

/// An operand's value at (thread, iteration, parameter).
type Term = fn(i64, i64, i64) -> i64;
/// A condition's value at (thread, iteration, parameter).
type Cond = fn(i64, i64, i64) -> bool;

/// One condition `cmp P X, C` (or two joined by `and`/`or`, or negated) on the thread id,
/// the loop variable of `for %i = 2 to 7`, a parameter `%n: i32 in [1, 8]` or `div %t, 32`:
/// `analysis::guards` decides it only where every (thread, iteration, parameter) value gives
/// that outcome (enumerated), and decides every direct comparison of `%t`, `%i` or `%n` with
/// a constant that has one outcome.
#[test]
fn guard_outcomes_match_enumeration() {
    use smemsync::ir::{CmpPred, OpKind};
    let preds = [
        CmpPred::Eq,
        CmpPred::Ne,
        CmpPred::Lt,
        CmpPred::Le,
        CmpPred::Gt,
        CmpPred::Ge,
    ];
    let name = |p: CmpPred| format!("{p:?}").to_lowercase();
    // Each operand: its name and its value at (t, i, n).
    let xs: [(&str, Term); 4] = [
        ("%t", |t, _, _| t),
        ("%i", |_, i, _| i),
        ("%n", |_, _, n| n),
        ("%w", |t, _, _| t / 32),
    ];
    let mut decided = 0;
    let mut check = |lines: String, eval: &dyn Fn(i64, i64, i64) -> bool, direct: bool| {
        let src = format!(
            "kernel @g(%n: i32 in [1, 8] = 4) block(64) {{\n  %t = tid.x\n  %w = div %t, 32\n  for %i = 2 to 7 step 1 {{\n{lines}    if %g {{\n      %z = add 0, 0\n    }}\n  }}\n}}\n"
        );
        let k = common::parse_verified_as("guard", &src);
        let f = common::ops_where(&k, |o| matches!(o, OpKind::If { .. }))[0];
        let OpKind::If { cond } = &k.ops[f].kind else {
            unreachable!()
        };
        let got =
            smemsync::analysis::guards::outcome(&k, &smemsync::ir::ranges::Ranges::new(&k), cond);
        let mut seen = std::collections::BTreeSet::new();
        for t in 0..64 {
            for i in 2..7 {
                for n in 1..=8 {
                    seen.insert(eval(t, i, n));
                }
            }
        }
        let all = (seen.len() == 1).then(|| *seen.first().unwrap());
        if let Some(b) = got {
            assert_eq!(
                all,
                Some(b),
                "decided {b} but some execution differs:\n{src}"
            );
            decided += 1;
        } else if direct {
            assert_eq!(all, None, "undecided, but every execution agrees:\n{src}");
        }
    };
    for p in preds {
        for (x, fx) in xs {
            for c in [-1, 0, 1, 2, 6, 7, 8, 9, 31, 62, 63, 64, 65] {
                let lines = format!("    %g = cmp {} {x}, {c}\n", name(p));
                check(lines, &move |t, i, n| p.holds(fx(t, i, n), c), x != "%w");
                let lines = format!("    %g = cmp {} {c}, {x}\n", name(p));
                check(lines, &move |t, i, n| p.holds(c, fx(t, i, n)), x != "%w");
            }
        }
    }
    // Joined conditions: soundness only.
    let parts: [(&str, Cond); 4] = [
        ("cmp ge %i, 2", |_, i, _| i >= 2),
        ("cmp lt %t, 40", |t, _, _| t < 40),
        ("cmp le %n, 8", |_, _, n| n <= 8),
        ("cmp gt %i, 5", |_, i, _| i > 5),
    ];
    for (a, fa) in parts {
        for (b, fb) in parts {
            for (op, fop) in [
                ("and", (|x, y| x && y) as fn(bool, bool) -> bool),
                ("or", |x, y| x || y),
                ("xor", |x, y| x != y),
            ] {
                let lines = format!("    %a = {a}\n    %b = {b}\n    %g = {op} %a, %b\n");
                check(lines, &move |t, i, n| fop(fa(t, i, n), fb(t, i, n)), false);
            }
            let lines = format!("    %a = {a}\n    %g = not %a\n");
            check(lines, &move |t, i, n| !fa(t, i, n), false);
        }
    }
    assert!(decided > 100, "only {decided} conditions decided");
}
