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
{}}}
",
        tdm_issue(guard, origin, slot)
    )
}

/// The issue of [`tdm_kernel`]: `%o`, `%s`, `%g` and the guarded `tdm_load`, its wait and a
/// barrier.
fn tdm_issue(guard: &str, origin: &str, slot: &str) -> String {
    format!(
        "%o = {origin}
%s = {slot}
%g = {guard}
if %g {{
  %v = view @buf[%s]
  tdm_load %v <- %X[%o, 0]
}}
waitcnt tensorcnt(0)
barrier
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

/// A gfx1250 kernel of `threads` threads whose loop of `trips` iterations (`%n` for a
/// parameter) is [`tdm_issue`]: guard, origin and slot may read `%k`, `%h = %t / 2` and
/// `%j = %k / 259`.
fn tdm_loop_kernel(threads: u32, trips: &str, guard: &str, origin: &str, slot: &str) -> String {
    let param = if trips == "%n" { ", %n: i32" } else { "" };
    format!(
        "kernel @k(%X: global f32[64, 64]{param}) block({threads}) {{
  shared @buf : f32[4, 64]
  %t = tid.x
  %l = lane
  %h = div %t, 2
  for %k = 0 to {trips} step 1 {{
    %j = div %k, 259
{}  }}
}}
",
        tdm_issue(guard, origin, slot)
    )
}

/// Guards, origins and slots of the loop sweeps, several reading the loop variable.
const LOOP_GUARDS: [&str; 5] = [
    "cmp lt %t, 2",
    "cmp eq %l, 0",
    "cmp lt %t, 4",
    "cmp lt %t, %k",
    "cmp eq %t, %k",
];
const LOOP_ORIGINS: [&str; 6] = [
    "div %t, 2",
    "rem %t, 2",
    "add %t, %k",
    "sub %h, %k",
    "div %t, 32",
    "and %t, 4",
];
const LOOP_SLOTS: [&str; 4] = ["rem %k, 2", "rem %t, 2", "div %t, 32", "rem %h, 4"];

/// The oracle: on loops short enough to enumerate (3 trips), `symbolic::copies` answers
/// every kernel of the sweep, and each answer is the enumeration's
/// (`footprint::copy_issues`): a race exactly when it finds two issuers of one instance
/// with one view and different origins, and then for every value (no unknowns here).
#[test]
fn tdm_loop_symbolic_verdicts_equal_enumeration() {
    use smemsync::analysis::footprint::{CopyIssues, Footprints};
    use smemsync::analysis::symbolic::copies::{self, Verdict as Sym};
    use smemsync::ir::OpKind;
    let (mut races, mut clean) = (0, 0);
    for g in LOOP_GUARDS {
        for o in LOOP_ORIGINS {
            for s in LOOP_SLOTS {
                let name = format!("guard `{g}`, origin `{o}`, slot `{s}`");
                let k = common::parse_verified_as(&name, &tdm_loop_kernel(64, "3", g, o, s));
                let mut fp = Footprints::new(&k, 32);
                let ai = (0..fp.accesses.len())
                    .find(|&i| matches!(k.ops[fp.accesses[i].id.op].kind, OpKind::TdmLoad { .. }))
                    .expect("the tdm_load's access");
                let Some(enumerated) = fp.copy_issues(ai) else {
                    continue;
                };
                let symbolic = copies::self_race(&fp, ai);
                match (&enumerated, &symbolic) {
                    (
                        CopyIssues::Differ { .. },
                        Sym::Always {
                            witness,
                            runs: false,
                        },
                    ) => {
                        let w = witness;
                        assert!(
                            w.threads.0 != w.threads.1 && w.origins.0 != w.origins.1,
                            "{name}: {w:?}"
                        );
                        assert!(w.leaves.is_empty(), "{name}: {w:?}");
                        races += 1;
                    }
                    (CopyIssues::Same, Sym::Never) => clean += 1,
                    _ => panic!("{name}: enumeration {enumerated:?}, symbolic {symbolic:?}"),
                }
            }
        }
    }
    eprintln!("{races} races, {clean} race-free");
    assert!(
        races >= 30 && clean >= 30,
        "{races} races, {clean} race-free"
    );
}

/// What `sync` says of a kernel of the loop sweep past the enumeration.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Says {
    /// E0301.
    Races,
    /// Accepted without W0317.
    Clean,
    /// Accepted with W0317: a race for some trip counts only.
    Depends,
}

/// Past the enumeration (260 trips, and `%n` trips run with %n = 260; 16 threads, as the
/// interpreter runs every trip in the debug build): `sync` refuses
/// (E0301) exactly the kernels whose input races in the interpreter at 260 trips, accepts
/// the others, and answers W0317 only for `%n` trips where the race needs more than one
/// iteration (it then holds for some values of %n only).
#[test]
fn tdm_loop_past_the_enumeration_matches_the_interpreter() {
    use Says::*;
    let cases = [
        ("cmp lt %t, 2", "rem %t, 2", "rem %k, 2", Races, Races),
        ("cmp lt %t, 2", "div %t, 2", "rem %k, 2", Clean, Clean),
        ("cmp lt %t, 2", "rem %t, 2", "rem %t, 2", Clean, Clean),
        // Rows 0 and min(1, k / 259): threads 0 and 1 differ in iteration 259 only.
        ("cmp lt %t, 2", "min %t, %j", "rem %k, 2", Races, Depends),
        // Threads below k issue rows t / 2: from iteration 3 on, rows 0, 0, 1.
        ("cmp lt %t, %k", "div %t, 2", "rem %k, 2", Races, Depends),
        // Only thread k issues in iteration k: one issuer per instance.
        ("cmp eq %t, %k", "add %t, %k", "rem %k, 2", Clean, Clean),
    ];
    for (g, o, s, fixed, symbolic) in cases {
        for (trips, says) in [("260", fixed), ("%n", symbolic)] {
            let name = format!("{trips} trips, guard `{g}`, origin `{o}`, slot `{s}`");
            let k = common::parse_verified_as(&name, &tdm_loop_kernel(16, trips, g, o, s));
            let opts = CheckOptions {
                target: Target::from_name("gfx1250").ok(),
                try_proof: false,
                schedules: 1,
                bounds: (trips == "%n")
                    .then(|| ("n".to_string(), 260))
                    .into_iter()
                    .collect(),
                ..Default::default()
            };
            let v = check_race_free(&k, &opts).verdict;
            let races = matches!(v, Verdict::Race(_));
            assert_eq!(races, fixed == Races, "{name}: the interpreter gave {v:?}");
            let got = match sync(&name, &k, "gfx1250") {
                Err(codes) => {
                    assert_eq!(codes, ["E0301"], "{name}");
                    Races
                }
                Ok(w) if w.iter().any(|c| c == "W0317") => Depends,
                Ok(_) => Clean,
            };
            assert_eq!(got, says, "{name}");
        }
    }
}
