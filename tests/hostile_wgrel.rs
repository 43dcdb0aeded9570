//! Session 37's hostile findings M2b, M6 and M2 (false refusals of correct warp-specialized
//! consumers): `sync` accepts a commit on every path and a `wgmma_wait N` after `N + 1`
//! commits as completing the access (`handshake_chain::completed_by`), a role split by the
//! `warp` special under the target's warp width (`analysis::role_split`), and CUTLASS's
//! delayed release of the previous stage where `mbar_protocol`'s trace shows it
//! (`analysis::mbar_delayed`; M2 as written, with the producer tail, in Triton's form and at
//! real size). Each accepted kernel's output is checked in the interpreter; every mutant that
//! loses the completion or the release is refused (E0307, or E0306 where it hangs), each M2
//! mutant is shown racing or hanging by the interpreter, and `check`'s static proof never
//! claims "proved" for one.

mod common;

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::target::Target;

const M2: &str = include_str!("hostile_wgrel/m2-delayed-release.kir");
const M2B: &str = include_str!("hostile_wgrel/m2b-commit-in-both-arms.kir");
const M6: &str = include_str!("hostile_wgrel/m6-warp-role-split.kir");
const M2T: &str = include_str!("hostile_wgrel/m2t-triton-carried-slots.kir");
const M2R: &str = include_str!("hostile_wgrel/m2r-cutlass-128x128x64-3-stages.kir");

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

/// The interpreter alone on `src` for sm_90 (two schedules): a race or a deadlock, as every
/// mutant of the delayed release must show.
fn racy_or_hangs(name: &str, src: &str) -> Verdict {
    let k = common::parse_verified_as(name, src);
    let t = Target::from_name("sm_90").expect("sm_90");
    let o = CheckOptions {
        target: Some(t),
        try_proof: false,
        schedules: 2,
        ..Default::default()
    };
    let v = check_race_free(&k, &o).verdict;
    assert!(
        matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
        "{name}: the interpreter finds {v:?}"
    );
    v
}

/// M2 with CUTLASS's producer tail (`load_tail`: the producer waits until the consumers
/// released every stage before it exits), so that a missing last release hangs.
fn m2_with_tail() -> String {
    edit(
        M2,
        "      }\n    }\n  } else {\n",
        "      }\n      mbar_wait @empty[0], 1\n      mbar_wait @empty[1], 1\n    }\n  } else {\n",
    )
}

/// The delayed-release mutants of `base` (M2's text, or M2 with the tail): each loses the
/// order of a consumer's read before the refill of its slot, or a release the producer
/// waits for. Named as in the brief.
fn m2_mutants(base: &str) -> Vec<(&'static str, String)> {
    let release = "      %gt0 = cmp gt %i, 0\n      if %gt0 {\n        %pi = sub %i, 1\n        %ps = rem %pi, 2\n        mbar_arrive @empty[%ps]\n      }\n";
    vec![
        // The producer's `empty` wait for the round before the one it must wait for, the
        // first two rounds unwaited (racy), or with the parity flipped (it hangs).
        (
            "early-producer",
            edit(
                base,
                "        mbar_wait @empty[%s], %free\n",
                "        %late = cmp ge %i, 4\n        if %late {\n          mbar_wait @empty[%s], %par\n        }\n",
            ),
        ),
        (
            "flipped-producer",
            edit(
                base,
                "        %free = xor %par, 1\n",
                "        %free = xor %par, 0\n",
            ),
        ),
        (
            "slot-i-2",
            edit(
                base,
                "        %pi = sub %i, 1\n",
                "        %pi = sub %i, 2\n",
            ),
        ),
        (
            "slot-i",
            edit(
                base,
                "        %ps = rem %pi, 2\n",
                "        %ps = rem %i, 2\n",
            ),
        ),
        (
            "release-before-wait",
            edit(
                &edit(base, release, ""),
                "      wgmma_wait 1\n",
                &format!("{release}      wgmma_wait 1\n"),
            ),
        ),
        ("no-wait-1", edit(base, "      wgmma_wait 1\n", "")),
        (
            "wait-2",
            edit(base, "      wgmma_wait 1\n", "      wgmma_wait 2\n"),
        ),
    ]
}

#[test]
fn m2_delayed_release_is_accepted() {
    // The trace shows every read released by the next iteration's arrival on its slot (the
    // last by the one after the loop) with no `empty` wait of the producer keyed between
    // (docs/async.md, "wgmma completion"); the output is checked in the interpreter.
    sync("m2", M2).expect("M2 is accepted");
    check_race_free_ok("m2", M2);
    let tail = m2_with_tail();
    sync("m2-tail", &tail).expect("M2 with the producer tail is accepted");
    check_race_free_ok("m2-tail", &tail);
}

#[test]
fn m2_delayed_release_mutants_race_or_hang_and_are_refused() {
    let tail = m2_with_tail();
    let mut all = m2_mutants(M2);
    // The last release missing: the producer's tail waits for it forever.
    all.push((
        "no-last-release",
        edit(
            &tail,
            "    wgmma_wait 0\n    mbar_arrive @empty[1]\n",
            "    wgmma_wait 0\n",
        ),
    ));
    for (n, s) in &all {
        racy_or_hangs(n, s);
        let e = sync(n, s).expect_err(n);
        assert!(e.iter().all(|c| c == "E0307" || c == "E0306"), "{n}: {e:?}");
        let _ = check_agrees(n, s);
    }
    // Where the trace rule fails (the read not complete before its release) the E0307 still
    // names the delayed arrival.
    let wait2 = &all.iter().find(|(n, _)| *n == "wait-2").expect("wait-2").1;
    let k = common::parse_verified_as("wait-2", wait2);
    let t = Target::from_name("sm_90").expect("sm_90");
    let Err(ds) = smemsync::sync::driver::synchronize(&k, &t, &Default::default()) else {
        panic!("refused");
    };
    let e = ds.iter().find(|d| d.code == "E0307").expect("E0307");
    assert!(
        e.notes.iter().any(|n| n.contains("delayed release")),
        "{e:?}"
    );
}

#[test]
fn m2_delayed_release_in_triton_form_is_accepted() {
    // Slots, phases and the previous slot carried as iteration values (Triton's form).
    sync("m2t", M2T).expect("M2 in Triton's form is accepted");
    check_race_free_ok("m2t", M2T);
    // The carried "previous" slot made the current one; the completing wait removed.
    let current = edit(
        M2T,
        "      yield %d0, %d1, %d2, %d3, %sn, %phn, %s\n",
        "      yield %d0, %d1, %d2, %d3, %sn, %phn, %sn\n",
    );
    let no_wait = edit(M2T, "      wgmma_wait 1\n", "");
    for (n, s) in [("m2t-current", current), ("m2t-no-wait-1", no_wait)] {
        racy_or_hangs(n, &s);
        assert!(sync(n, &s).is_err(), "{n}");
    }
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "384 threads and eight m64n128k16 wgmmas per stage in the interpreter: release builds only"
)]
fn m2_delayed_release_at_real_size_is_accepted() {
    // 128x128x64 tiles, 3 stages, two consumer warpgroups: the output is checked in the
    // interpreter (one schedule: 384 threads, eight m64n128k16 wgmmas per stage).
    common::sync_sm90_race_free("m2r", M2R, 1).expect("M2 at real size is accepted");
    // The current stage released (its wgmmas still pending after `wgmma_wait 1`), and the
    // completing wait removed: refused (whether they race is the small kernel's test).
    let current = edit(
        M2R,
        "        %ps = rem %pi, 3\n",
        "        %ps = rem %i, 3\n",
    );
    let no_wait = edit(M2R, "      wgmma_wait 1\n", "");
    for (n, s) in [("m2r-current", current), ("m2r-no-wait-1", no_wait)] {
        assert!(sync(n, &s).is_err(), "{n}");
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
