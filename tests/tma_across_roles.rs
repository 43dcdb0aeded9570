//! Async copies read (or overwritten) by another role with no wait (session 37's hostile M9
//! and M13; docs/async.md, "TMA loads read by another role"): a TMA load issued in one arm
//! of a thread-dependent `if` and an access in the other arm, with no handshake in the arms
//! (or named barriers only), is refused with E0602 (E0305 for other async copies) whatever
//! the nesting of the branch (top level, `stage`, `for`, uniform `if`) and however often the
//! slot is loaded. The oracle is the interpreter: each racing input races there, and no kernel
//! `sync` accepts has a racing or deadlocking output. Debug-build time: about 5 s.

mod common;

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::target::Target;

/// The racing inputs: `sync` refused them with nothing (M13) or W1300 alone (M9, the file
/// tests with a producer loop whose every slot is loaded at most once).
const RACING: [(&str, &str); 6] = [
    ("m9", include_str!("tma_across_roles/m9-top-level.kir")),
    ("m13-stage", include_str!("tma_across_roles/m13-stage.kir")),
    ("m13-for", include_str!("tma_across_roles/m13-for.kir")),
    ("m13-if", include_str!("tma_across_roles/m13-if.kir")),
    (
        "step5",
        include_str!("tma_across_roles/step5-slots-loaded-once.kir"),
    ),
    (
        "d1-step3",
        include_str!("tma_across_roles/d1-step3-slots-loaded-once.kir"),
    ),
];

/// The same kernels with the consumers' wait on the load's mbarrier phase.
const CORRECTED: [(&str, &str); 6] = [
    (
        "m9+wait",
        include_str!("tma_across_roles/m9-top-level-with-the-wait.kir"),
    ),
    (
        "m13-stage+wait",
        include_str!("tma_across_roles/m13-stage-with-the-wait.kir"),
    ),
    (
        "m13-for+wait",
        include_str!("tma_across_roles/m13-for-with-the-wait.kir"),
    ),
    (
        "m13-if+wait",
        include_str!("tma_across_roles/m13-if-with-the-wait.kir"),
    ),
    (
        "step5+wait",
        include_str!("tma_across_roles/step5-slots-loaded-once-with-the-wait.kir"),
    ),
    (
        "d1-step3+wait",
        include_str!("tma_across_roles/d1-step3-slots-loaded-once-with-the-wait.kir"),
    ),
];

fn check(k: &smemsync::ir::Kernel, try_proof: bool) -> Verdict {
    let o = CheckOptions {
        target: Some(Target::from_name("sm_90").expect("sm_90")),
        try_proof,
        schedules: 2,
        ..Default::default()
    };
    check_race_free(k, &o).verdict
}

#[test]
fn racing_inputs_are_refused_with_e0602_and_never_proved() {
    for (name, src) in RACING {
        let k = common::parse_verified_as(name, src);
        // The oracle: the input races (so a refusal is owed), and `check`'s static proof
        // does not claim it.
        assert!(
            matches!(check(&k, false), Verdict::Race(_)),
            "{name}: the input should race"
        );
        let v = check(&k, true);
        assert!(
            !matches!(v, Verdict::Proved { .. } | Verdict::Checked { .. }),
            "{name}: {v:?}"
        );
        let codes = common::sync_sm90_race_free(name, src, 2).expect_err(name);
        assert!(codes.iter().any(|c| c == "E0602"), "{name}: {codes:?}");
    }
}

#[test]
fn corrected_inputs_are_accepted_and_race_free() {
    for (name, src) in CORRECTED {
        let out = common::sync_sm90_race_free(name, src, 2)
            .unwrap_or_else(|codes| panic!("{name}: refused with {codes:?}"));
        assert!(
            matches!(check(&out, false), Verdict::Checked { .. }),
            "{name}"
        );
    }
}

/// One generated kernel: the producer's elected thread copies into slot 0 (TMA or cp.async),
/// the consumers read slot `rslot`; the role branch at `nest`, the producer in the then-arm
/// or the else-arm; `sync` is `none` (no handshake), `named` (a named barrier only: it
/// orders the threads but completes no copy) or `wait` (an mbarrier arrival the consumers
/// wait on, after the cp.async's own wait).
fn generated(nest: &str, producer_first: bool, sync: &str, rslot: u32, tma: bool) -> String {
    let mut prod = vec![
        "%elect = cmp eq %t, 0".to_string(),
        "if %elect {".into(),
        "  %v = view @buf[0]".into(),
    ];
    if tma && sync == "wait" {
        prod.push("  mbar_arrive @full[0] tx 1024".into());
    }
    if tma {
        prod.push("  tma_load %v <- %X[0, 0], @full[0]".into());
    } else {
        prod.push("  %tk = cp_async %v[%t] <- %X[0, %t]".into());
    }
    if !tma && sync == "wait" {
        prod.extend(["  wait_tokens %tk".into(), "  mbar_arrive @full[0]".into()]);
    }
    prod.push("}".into());
    if sync == "named" {
        prod.push("named_arrive 1, 288".into());
    }
    let mut cons = vec![
        "%c = sub %t, 32".to_string(),
        "%rev = sub 255, %c".into(),
        format!("%v = view @buf[{rslot}]"),
    ];
    match sync {
        "named" => cons.push("named_sync 1, 288".into()),
        "wait" => cons.push("mbar_wait @full[0], 0".into()),
        _ => {}
    }
    cons.extend(["%x = load %v[%rev]".into(), "gstore %Y[%c], %x".into()]);
    let (then, els, g) = if producer_first {
        (prod, cons, "producer")
    } else {
        (cons, prod, "consumers")
    };
    let ind = |v: &[String]| v.iter().map(|l| format!("  {l}")).collect::<Vec<_>>();
    let mut br = vec![format!("%r = in_group @{g}"), "if %r {".into()];
    br.extend(ind(&then));
    br.push("} else {".into());
    br.extend(ind(&els));
    br.push("}".into());
    let open = match nest {
        "stage" => Some("stage \"ws\" {"),
        "for" => Some("for %o = 0 to 1 step 1 {"),
        "if" => Some("if %one {"),
        _ => None,
    };
    if let Some(o) = open {
        let mut b = vec![o.to_string()];
        b.extend(ind(&br));
        b.push("}".into());
        br = b;
    }
    let head = "kernel @g(%X: global f32[8, 256], %Y: global f32[256]) block(288) {\n  group @producer : threads [0, 32)\n  group @consumers : threads [32, 288)\n  shared @buf : f32[2, 256]\n  shared @full : mbarrier[2]\n  %t = tid.x\n  %one = cmp eq 1, 1\n  %lead = cmp eq %t, 0\n  if %lead {\n    mbar_init @full[0], 1\n  }\n  barrier\n";
    format!("{head}{}\n}}\n", ind(&br).join("\n"))
}

/// Every generated shape: where the input races in the interpreter, `sync` refuses it;
/// where `sync` accepts, its output neither races nor deadlocks. The shapes with no handshake
/// or a named barrier only that read the copied slot are all refused (the s37 finding).
#[test]
fn generated_role_branches_are_refused_or_race_free() {
    let mut refused = 0;
    for nest in ["top", "stage", "for", "if"] {
        for (producer_first, sync, rslot, tma) in [
            (true, "none", 0, true),
            (true, "none", 1, true),
            (true, "named", 0, true),
            (true, "wait", 0, true),
            (false, "none", 0, true),
            (true, "none", 0, false),
            (true, "named", 0, false),
            (true, "wait", 0, false),
        ] {
            let src = generated(nest, producer_first, sync, rslot, tma);
            let name = format!("{nest}-{producer_first}-{sync}-{rslot}-{tma}");
            let k = common::parse_verified_as(&name, &src);
            let races = matches!(check(&k, false), Verdict::Race(_));
            match common::sync_sm90_race_free(&name, &src, 2) {
                Ok(_) => assert!(
                    !races,
                    "{name}: the input races and `sync` accepted it\n{src}"
                ),
                Err(codes) => {
                    refused += 1;
                    // A TMA read by the other role with no mbarrier wait: E0602 in particular.
                    if tma && rslot == 0 && sync != "wait" {
                        assert!(
                            codes.iter().any(|c| c == "E0602" || c == "E0305"),
                            "{name}: {codes:?}"
                        );
                    }
                }
            }
            if sync != "wait" && rslot == 0 && (tma || sync == "none") {
                assert!(races, "{name}: the generator meant a racing input\n{src}");
            }
        }
    }
    assert!(refused >= 16, "{refused}");
}
