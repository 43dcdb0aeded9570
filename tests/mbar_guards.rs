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
