//! Collective tile loads (`tma_load`, `tdm_load`) issued by several threads (session 36's
//! hostile L4, docs/ir.md "Collective tile loads issued by several threads"): each issuer
//! performs the copy, so issuers that copy into one view from different origins write its
//! elements with different data, a race no barrier can order. `sync` reports it (E0301;
//! W0317 when not decided) exactly when the race checker's interpreter finds the race, its
//! accepted outputs are race-free, and `check` (static proof first) never proves such a
//! kernel race-free.
//!
//! Oracle sweep: a gfx1250 `tdm_load` under every combination of a few issuer guards, origin
//! rows and destination slots (140 kernels of 64 threads), `sync`'s verdict against the
//! interpreter's on the input. Debug-build time: see docs/performance.md (section `l4coll`).

mod common;

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::diag::Severity;
use smemsync::ir::Kernel;
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

/// `sync` of `k` for `target`: the error codes of a refusal, or the warning codes of an
/// acceptance after asserting its output neither races nor deadlocks in the interpreter.
fn sync(name: &str, k: &Kernel, target: &str) -> Result<Vec<String>, Vec<String>> {
    let t = Target::from_name(target).expect("target");
    match synchronize(k, &t, &PlaceOptions::default()) {
        Err(ds) => Err((ds.iter())
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.code.to_string())
            .collect()),
        Ok(out) => {
            let w: Vec<String> = (out.placement.warnings.iter())
                .map(|d| d.code.to_string())
                .collect();
            // W0317 says the copies may race: the output is race-free only for some values.
            let v = interpret(&out.kernel, target);
            assert!(
                w.iter().any(|c| c == "W0317")
                    || !matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
                "{name}: `sync` accepted it and its output is {v:?}"
            );
            Ok(w)
        }
    }
}

/// The interpreter's verdict (no static proof, two schedules).
fn interpret(k: &Kernel, target: &str) -> Verdict {
    let o = CheckOptions {
        target: Target::from_name(target).ok(),
        try_proof: false,
        schedules: 2,
        ..Default::default()
    };
    check_race_free(k, &o).verdict
}

/// `check`'s verdict with its static proof first.
fn check(k: &Kernel, target: &str) -> Verdict {
    let o = CheckOptions {
        target: Target::from_name(target).ok(),
        schedules: 2,
        ..Default::default()
    };
    check_race_free(k, &o).verdict
}

const L4: &str = include_str!(
    "filetests/soundness/tma-load-by-two-threads-with-a-thread-dependent-origin-is-refused.kir"
);

/// Hostile L4 (sm_90) and its variants: the origin row of the two issuers' copies.
#[test]
fn l4_tma_load_refused_exactly_when_the_issuers_origins_differ() {
    let half = "  %h = div %t, 2\n  %two = cmp lt %t, 2";
    let cases = [
        ("L4 (row %t)", L4.to_string(), true),
        ("row 0", L4.replace("%X[%t, 0]", "%X[0, 0]"), false),
        (
            "row %t / 2",
            L4.replace("  %two = cmp lt %t, 2", half)
                .replace("%X[%t, 0]", "%X[%h, 0]"),
            false,
        ),
        (
            "one issuer",
            L4.replace("mbar_init @m[0], 2", "mbar_init @m[0], 1")
                .replace("cmp lt %t, 2", "cmp lt %t, 1"),
            false,
        ),
    ];
    for (name, src, races) in cases {
        let k = common::parse_verified_as(name, &src);
        let s = sync(name, &k, "sm_90");
        assert_eq!(s.is_err(), races, "{name}: sync gave {s:?}");
        if let Err(codes) = &s {
            assert_eq!(codes, &["E0301"], "{name}");
        } else {
            assert!(!s.unwrap().iter().any(|c| c == "W0317"), "{name}: W0317");
        }
        let v = check(&k, "sm_90");
        assert_eq!(
            matches!(v, Verdict::Race(_)),
            races,
            "{name}: check gave {v:?}"
        );
        assert!(!races || !matches!(v, Verdict::Proved { .. }), "{name}");
    }
}

/// The hand-written gfx1250 kernels of the file tests: `check` agrees with `sync`.
#[test]
fn tdm_file_kernels_check_agrees_with_sync() {
    let files: [(&str, &str, Option<bool>); 5] = [
        (
            "two threads",
            include_str!(
                "filetests/soundness/tdm-load-by-two-threads-with-a-thread-dependent-origin-is-refused.kir"
            ),
            Some(true),
        ),
        (
            "per wave, one view",
            include_str!(
                "filetests/soundness/tdm-load-per-wave-with-a-wave-dependent-origin-into-one-view-is-refused.kir"
            ),
            Some(true),
        ),
        (
            "per wave, own slot",
            include_str!("filetests/soundness/tdm-load-per-wave-into-its-own-slot-is-accepted.kir"),
            Some(false),
        ),
        (
            "in a loop",
            include_str!(
                "filetests/soundness/tdm-load-in-a-loop-by-two-threads-with-a-thread-dependent-origin-is-refused.kir"
            ),
            Some(true),
        ),
        (
            "issuers below %n",
            include_str!(
                "filetests/soundness/tdm-load-by-a-parameter-many-threads-depends-on-the-parameter.kir"
            ),
            None,
        ),
    ];
    for (name, src, races) in files {
        let k = common::parse_verified_as(name, src);
        let s = sync(name, &k, "gfx1250");
        match races {
            Some(true) => assert_eq!(s, Err(vec!["E0301".to_string()]), "{name}"),
            Some(false) => assert!(s.as_ref().is_ok_and(|w| w.is_empty()), "{name}: {s:?}"),
            None => assert!(
                s.as_ref().is_ok_and(|w| w.iter().any(|c| c == "W0317")),
                "{name}: {s:?}"
            ),
        }
        let v = check(&k, "gfx1250");
        match races {
            Some(r) => assert_eq!(matches!(v, Verdict::Race(_)), r, "{name}: {v:?}"),
            None => {
                // One issuer with %n = 1, two different copies of one view with %n = 2.
                for (n, r) in [(1, false), (2, true)] {
                    let o = CheckOptions {
                        target: Target::from_name("gfx1250").ok(),
                        bounds: vec![("n".into(), n)],
                        schedules: 2,
                        ..Default::default()
                    };
                    let v = check_race_free(&k, &o).verdict;
                    assert_eq!(matches!(v, Verdict::Race(_)), r, "{name}, n = {n}: {v:?}");
                }
            }
        }
    }
}

/// A gfx1250 kernel of 64 threads (two waves): the threads where `guard` holds copy row
/// `origin` of `%X` into slot `slot` of `@buf`.
fn tdm_kernel(guard: &str, origin: &str, slot: &str) -> String {
    format!(
        "kernel @k(%X: global f32[64, 64]) block(64) {{
  shared @buf : f32[4, 64]
  %t = tid.x
  %l = lane
  %o = {origin}
  %s = {slot}
  %g = {guard}
  if %g {{
    %v = view @buf[%s]
    tdm_load %v <- %X[%o, 0]
  }}
  waitcnt tensorcnt(0)
  barrier
}}
"
    )
}

/// The sweep: `sync` refuses (E0301) exactly the kernels whose input races in the
/// interpreter, never answers W0317 (every value is known), and accepts the others.
#[test]
fn tdm_issue_sweep_matches_the_interpreter() {
    let guards = [
        "cmp lt %t, 2",
        "cmp eq %t, 0",
        "cmp lt %t, 4",
        "cmp eq %l, 0",
        "cmp lt %t, 64",
    ];
    let origins = [
        "mul %t, 0",
        "div %t, 2",
        "rem %t, 2",
        "div %t, 32",
        "rem %t, 3",
        "and %t, 4",
        "div %t, 8",
    ];
    let slots = ["mul %t, 0", "rem %t, 2", "div %t, 32", "rem %t, 4"];
    let (mut refused, mut accepted) = (0, 0);
    for g in guards {
        for o in origins {
            for s in slots {
                let src = tdm_kernel(g, o, s);
                let name = format!("guard `{g}`, origin `{o}`, slot `{s}`");
                let k = common::parse_verified_as(&name, &src);
                let races = matches!(interpret(&k, "gfx1250"), Verdict::Race(_));
                match sync(&name, &k, "gfx1250") {
                    Err(codes) => {
                        assert_eq!(codes, ["E0301"], "{name}");
                        assert!(races, "{name}: refused, but the interpreter finds no race");
                        refused += 1;
                    }
                    Ok(w) => {
                        assert!(!races, "{name}: accepted, but the input races");
                        assert!(!w.iter().any(|c| c == "W0317"), "{name}: W0317");
                        accepted += 1;
                    }
                }
            }
        }
    }
    eprintln!("{refused} refused, {accepted} accepted");
    assert!(
        refused >= 20 && accepted >= 20,
        "{refused} refused, {accepted} accepted"
    );
}
