//! Session 37's hostile findings M2b and M6 (false refusals of correct warp-specialized
//! consumers) and M2 (CUTLASS's delayed release, still refused): `sync` accepts a commit on
//! every path and a `wgmma_wait N` after `N + 1` commits as completing the access
//! (`handshake_chain::completed_by`), and a role split by the `warp` special under the
//! target's warp width (`analysis::role_split`). Each accepted kernel's output is checked in
//! the interpreter; every mutant that loses the completion is refused (E0307), and `check`'s
//! static proof never claims "proved" for one.

mod common;

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::target::Target;

const M2: &str = include_str!("hostile_wgrel/m2-delayed-release.kir");
const M2B: &str = include_str!("hostile_wgrel/m2b-commit-in-both-arms.kir");
const M6: &str = include_str!("hostile_wgrel/m6-warp-role-split.kir");

/// The M2b consumer's completion (`if` with a commit in each arm, then `wgmma_wait 0`).
const M2B_COMPLETION: &str = "      if %oc {\n        wgmma_commit\n      } else {\n        wgmma_commit\n      }\n      wgmma_wait 0\n";

/// `src` with `from` replaced by `to` (asserting it occurs).
fn edit(src: &str, from: &str, to: &str) -> String {
    assert!(src.contains(from), "{from:?} not in the kernel");
    src.replacen(from, to, 1)
}

/// `sync --target sm_90`: `Ok` (its output checked race- and deadlock-free) or its errors.
fn sync(name: &str, src: &str) -> Result<(), Vec<String>> {
    common::sync_sm90_race_free(name, src, 2).map(|_| ())
}

/// `check` on `src` for sm_90, the static proof tried first: a "proved" must agree with the
/// interpreter alone (two schedules: no race, no deadlock); any other verdict is the
/// interpreter's own (a race it reports has a witness, never a static claim).
fn check_agrees(name: &str, src: &str) -> Verdict {
    let k = common::parse_verified_as(name, src);
    let t = Target::from_name("sm_90").expect("sm_90");
    let with_proof = CheckOptions {
        target: Some(t),
        schedules: 1,
        ..Default::default()
    };
    let report = check_race_free(&k, &with_proof);
    if let Verdict::Proved { .. } = report.verdict {
        let interp = CheckOptions {
            try_proof: false,
            schedules: 2,
            ..with_proof
        };
        let oracle = check_race_free(&k, &interp).verdict;
        let racy = matches!(oracle, Verdict::Race(_) | Verdict::Deadlock(_));
        assert!(
            !racy,
            "{name}: check proves it, the interpreter finds {oracle:?}"
        );
    }
    report.verdict
}

/// `check` on a correct kernel: proved or checked race-free, never a race or a deadlock.
fn check_race_free_ok(name: &str, src: &str) {
    let v = check_agrees(name, src);
    assert!(
        matches!(v, Verdict::Proved { .. } | Verdict::Checked { .. }),
        "{name}: {v:?}"
    );
}

#[test]
fn m2b_commit_on_every_path_completes_the_wgmma() {
    sync("m2b", M2B).expect("M2b is accepted");
    check_race_free_ok("m2b", M2B);
}

#[test]
fn m2b_mutants_without_a_commit_on_every_path_are_refused() {
    let one_arm = edit(
        M2B,
        M2B_COMPLETION,
        "      if %oc {\n        wgmma_commit\n      }\n      wgmma_wait 0\n",
    );
    let empty_else = edit(
        M2B,
        M2B_COMPLETION,
        "      if %oc {\n        wgmma_commit\n      } else {\n        %z = add %i, 1\n      }\n      wgmma_wait 0\n",
    );
    let in_loop = edit(
        M2B,
        M2B_COMPLETION,
        "      for %z = 0 to 1 step 1 {\n        wgmma_commit\n      }\n      wgmma_wait 0\n",
    );
    let wait_first = edit(
        M2B,
        M2B_COMPLETION,
        "      wgmma_wait 0\n      if %oc {\n        wgmma_commit\n      } else {\n        wgmma_commit\n      }\n",
    );
    for (n, s) in [
        ("one-arm", one_arm),
        ("empty-else", empty_else),
        ("in-loop", in_loop),
        ("wait-first", wait_first),
    ] {
        assert_eq!(sync(n, &s), Err(vec!["E0307".to_string()]), "{n}");
        let _ = check_agrees(n, &s);
    }
}

#[test]
fn wait_n_completes_the_group_with_n_younger_commits() {
    // Two groups closed after the access: `wgmma_wait 1` leaves only the younger pending.
    let two = |wait: &str| {
        edit(
            M2B,
            M2B_COMPLETION,
            &format!("      wgmma_commit\n      wgmma_commit\n      {wait}\n"),
        )
    };
    let every_path = edit(
        M2B,
        M2B_COMPLETION,
        &format!("      wgmma_commit\n{M2B_COMPLETION}").replace("wgmma_wait 0", "wgmma_wait 1"),
    );
    for (n, s) in [
        ("wait-1", two("wgmma_wait 1")),
        ("wait-0", two("wgmma_wait 0")),
        ("every-path", every_path),
    ] {
        sync(n, &s).unwrap_or_else(|e| panic!("{n}: {e:?}"));
        let _ = check_agrees(n, &s);
    }
    // One group after the access's own: `wgmma_wait 2` (or 1 with one commit) may leave it
    // pending.
    let one = |c: usize, wait: &str| {
        edit(
            M2B,
            M2B_COMPLETION,
            &format!("{}      {wait}\n", "      wgmma_commit\n".repeat(c)),
        )
    };
    for (n, s) in [
        ("c2-wait-2", one(2, "wgmma_wait 2")),
        ("c1-wait-1", one(1, "wgmma_wait 1")),
        ("c3-wait-3", one(3, "wgmma_wait 3")),
    ] {
        assert_eq!(sync(n, &s), Err(vec!["E0307".to_string()]), "{n}");
        let _ = check_agrees(n, &s);
    }
}

#[test]
fn m2_delayed_release_is_refused_with_its_note() {
    // Not recognised (docs/async.md, "wgmma completion"): refused, with the note naming the
    // delayed arrival; `check` decides it (race-free).
    let k = common::parse_verified_as("m2", M2);
    let t = Target::from_name("sm_90").expect("sm_90");
    let Err(ds) = smemsync::sync::driver::synchronize(&k, &t, &Default::default()) else {
        panic!("M2 is refused");
    };
    let e = ds.iter().find(|d| d.code == "E0307").expect("E0307");
    assert!(
        e.notes.iter().any(|n| n.contains("delayed release")),
        "{e:?}"
    );
    check_race_free_ok("m2", M2);
    // Its mutants: `wgmma_wait 2`, the current slot released, the drain removed.
    let wait2 = edit(M2, "      wgmma_wait 1\n", "      wgmma_wait 2\n");
    let current = edit(
        M2,
        "        mbar_arrive @empty[%ps]\n",
        "        mbar_arrive @empty[%s]\n",
    );
    let no_drain = edit(M2, "    wgmma_wait 0\n    mbar_arrive @empty[1]\n", "");
    for (n, s) in [
        ("wait2", wait2),
        ("current", current),
        ("no-drain", no_drain),
    ] {
        assert!(sync(n, &s).is_err(), "{n}");
        let _ = check_agrees(n, &s);
    }
}

#[test]
fn m6_role_split_by_warp_uses_the_target_width() {
    sync("m6", M6).expect("M6 is accepted");
    check_race_free_ok("m6", M6);
    // A 64-thread producer (warps 0 and 1 on a 32-wide target).
    let two_warps = edit(M6, "block(288)", "block(320)");
    let two_warps = edit(&two_warps, "threads [0, 32)", "threads [0, 64)");
    let two_warps = edit(&two_warps, "threads [32, 288)", "threads [64, 320)");
    let two_warps = edit(&two_warps, "%isp = cmp eq %w, 0", "%isp = cmp lt %w, 2");
    let two_warps = edit(&two_warps, "%c = sub %t, 32", "%c = sub %t, 64");
    sync("m6-two-warps", &two_warps).expect("the 64-thread producer is accepted");
    check_race_free_ok("m6-two-warps", &two_warps);
    // Deleting either wait is still refused.
    let no_full = edit(M6, "      mbar_wait @full[%s], %par\n", "");
    let no_empty = edit(M6, "        mbar_wait @empty[%s], %free\n", "");
    for (n, s) in [("no-full", no_full), ("no-empty", no_empty)] {
        assert!(sync(n, &s).is_err(), "{n}");
    }
}
