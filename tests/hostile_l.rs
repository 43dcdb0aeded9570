//! Session 36's hostile findings L10 and L3, each with its variants, against the race
//! checker's interpreter: `sync` either refuses or its output is race-free.
//!
//! - L10 (gfx1200/1201/1250): a hand-written adjacent `barrier_signal -1; barrier_wait -1`
//!   after an LDS access counts as a block barrier only with `waitcnt dscnt(0)` before the
//!   signal (docs/split-barriers.md); `sync` now writes that wait before a split signal of
//!   the input that lacks one when its pair orders a hazard (branch `gfx12split`: only
//!   then; tests/split_pairs.rs checks a pair no hazard crosses gets none). Variants: a store (RAW) or a load (WAR) before the pair; no
//!   wait, `dscnt(1)`, `dscnt(0)` under a thread-dependent `if`, `dscnt(0)` between the halves,
//!   or the correct `dscnt(0)` right before the signal (accepted).
//! - L3 (sm_90): pinned buffers at overlapping bytes alias; the cross-role chain check and
//!   `sync`'s own handshake placement compare them by bytes (docs/pipeline.md). The user's
//!   correct kernel with the slot read through a twin alias (same offset, shape and type) is
//!   accepted without W1340.
//!
//! Debug-build time: see docs/performance.md (section `lfix`).

mod common;

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

/// The interpreter's verdict on `k` for `target` (AMD targets model LDS completion).
fn interpret(k: &smemsync::ir::Kernel, target: &Target) -> Verdict {
    let o = CheckOptions {
        target: Some(*target),
        try_proof: false,
        schedules: 2,
        ..Default::default()
    };
    check_race_free(k, &o).verdict
}

/// `sync` on `src` for `target`: the error codes of a refusal, or the output kernel (after
/// asserting it race-free in the interpreter) with the warning codes.
fn sync(
    name: &str,
    src: &str,
    target: &str,
) -> Result<(smemsync::ir::Kernel, Vec<String>), Vec<String>> {
    let k = common::parse_verified_as(name, src);
    let t = Target::from_name(target).expect("target");
    match synchronize(&k, &t, &PlaceOptions::default()) {
        Err(ds) => Err((ds.iter())
            .filter(|d| d.severity == smemsync::diag::Severity::Error)
            .map(|d| d.code.to_string())
            .collect()),
        Ok(out) => {
            let v = interpret(&out.kernel, &t);
            assert!(
                !matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
                "{name} on {target}: `sync` accepted it and its output is {v:?}\n{}",
                smemsync::emit::text::print_kernel(&out.kernel)
            );
            let warnings = out
                .placement
                .warnings
                .iter()
                .map(|d| d.code.to_string())
                .collect();
            Ok((out.kernel, warnings))
        }
    }
}

/// What comes right before the hand-written split pair.
const BEFORE_PAIR: [(&str, &str); 5] = [
    ("none", ""),
    ("dscnt1", "waitcnt dscnt(1)\n"),
    (
        "guarded",
        "%e = cmp eq %t, 0\nif %e {\nwaitcnt dscnt(0)\n}\n",
    ),
    ("between", ""),
    ("fixed", "waitcnt dscnt(0)\n"),
];

/// An L10 kernel: a RAW (store, pair, load of the neighbour's element) or a WAR (load of the
/// neighbour's element, pair, store of one's own), optionally inside a 3-trip loop.
fn l10(war: bool, before: &str, between: bool, looped: bool) -> String {
    let access = if war {
        "%x = load @s[%m]\n"
    } else {
        "store @s[%t], %t\n"
    };
    let after = if war {
        "store @s[%t], %x\n"
    } else {
        "%x = load @s[%m]\ngstore %out[%t], %x\n"
    };
    let wait = if between { "waitcnt dscnt(0)\n" } else { "" };
    let body = format!("{access}{before}barrier_signal -1\n{wait}barrier_wait -1\n{after}");
    let body = if looped {
        format!("for %i = 0 to 3 step 1 {{\n{body}barrier\n}}\n")
    } else {
        body
    };
    let init = if war {
        "store @s[%t], %t\nbarrier\n"
    } else {
        ""
    };
    format!(
        "kernel @split(%out: global i32[64]) block(64) {{\nshared @s : i32[64]\n%t = tid.x\n%n = add %t, 1\n%m = rem %n, 64\n{init}{body}}}\n"
    )
}

#[test]
fn l10_hand_written_split_pairs_get_their_lds_wait() {
    for target in ["gfx1200", "gfx1201", "gfx1250"] {
        let t = Target::from_name(target).expect("target");
        for war in [false, true] {
            for looped in [false, true] {
                for (what, before) in BEFORE_PAIR {
                    let src = l10(war, before, what == "between", looped);
                    let name = format!("{target}/{what}/war={war}/loop={looped}");
                    let input = interpret(&common::parse_verified_as(&name, &src), &t);
                    let out = sync(&name, &src, target);
                    if what == "fixed" {
                        // The user's correct kernel: race-free and accepted.
                        assert!(!matches!(input, Verdict::Race(_)), "{name}: {input:?}");
                        out.unwrap_or_else(|e| panic!("{name} refused: {e:?}"));
                    } else if !looped {
                        assert!(matches!(input, Verdict::Race(_)), "{name}: {input:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn l10_the_hostile_kernel() {
    let src = include_str!("hostile_l/l10-split-pair-after-an-lds-store.kir");
    for target in ["gfx1200", "gfx1201", "gfx1250"] {
        let (k, _) = sync("l10", src, target).expect("accepted");
        let text = smemsync::emit::text::print_kernel(&k);
        let (d, s) = (
            text.find("waitcnt dscnt(0)"),
            text.find("barrier_signal -1"),
        );
        assert!(
            d.is_some_and(|d| s.is_some_and(|s| d < s)),
            "{target}\n{text}"
        );
    }
}

/// The L3 kernel with its consumer's slot view and extra access replaced.
fn l3(view: &str, extra: &str, alias_at: u64) -> String {
    let src = include_str!("hostile_l/l3-aliased-store-into-the-other-slot.kir");
    src.replace(
        "shared @alias : f32[2, 256] at 0",
        &format!("shared @alias : f32[2, 256] at {alias_at}"),
    )
    .replace(
        "      %v = view @buf[%s]\n      mbar_wait @full",
        &format!("      %v = view {view}[%s]\n      mbar_wait @full"),
    )
    .replace(
        "      %o = sub 1, %s\n      %va = view @alias[%o]\n      store %va[%rev], 0.0\n",
        extra,
    )
}

#[test]
fn l3_aliased_buffers_are_one_for_the_cross_role_check() {
    let other = "      %o = sub 1, %s\n      %va = view @alias[%o]\n      store %va[%rev], 0.0\n";
    // The hostile kernel, and the same store through @buf: both refused.
    for via in ["@alias", "@buf"] {
        let src = l3("@buf", &other.replace("@alias", via), 0);
        let r = sync(&format!("l3 store via {via}"), &src, "sm_90");
        assert!(
            r.as_ref().is_err_and(|e| e.contains(&"E0307".to_string())),
            "{via}: {r:?}"
        );
    }
    // The natural bug: a store into one's own slot after arriving on `empty` (the store is
    // spliced after the arrival).
    let own = l3("@buf", "", 0).replace(
        "      mbar_arrive @empty[%s]\n",
        "      mbar_arrive @empty[%s]\n      %va = view @alias[%s]\n      store %va[%rev], 0.0\n",
    );
    assert!(sync("l3 own slot", &own, "sm_90").is_err());
    // The companion: the correct protocol, the slot read through a twin alias: accepted
    // without W1340.
    let (_, w) = sync("l3 twin read", &l3("@alias", "", 0), "sm_90").expect("accepted");
    assert!(!w.contains(&"W1340".to_string()), "{w:?}");
    // An alias at another offset (its slot j is not @buf's): the slot argument does not
    // hold; refused or race-free, never a race.
    for at in [1024, 512] {
        let _ = sync("l3 shifted read", &l3("@alias", "", at), "sm_90");
    }
}

#[test]
fn l3_sync_does_not_place_handshakes_per_name_across_aliases() {
    let src = include_str!("hostile_l/l3-aliased-slot-view-without-handshakes.kir");
    let r = sync("al270", src, "sm_90");
    assert!(
        r.as_ref().is_err_and(|e| e.contains(&"E0307".to_string())),
        "{r:?}"
    );
    // Through @buf in both roles: handshakes placed, output race-free.
    let plain = src.replace("view @buf_al[0]", "view @buf[0]");
    sync("al270 plain", &plain, "sm_90").expect("accepted");
}
