//! Hand-written gfx12 split barriers as existing syncs (`sync::split_pairs`, branch
//! `gfx12split`): session 36's L7 (a valid rotated split-barrier loop refused with P0001 at
//! 1:1), re-sync of `sync`'s own split output (it doubled the pairs), and the `waitcnt
//! dscnt(0)` written before a hand-written signal only where its pair orders a hazard.
//!
//! Oracles: the race checker's interpreter on the output (AMD targets model LDS completion),
//! and on generated kernels `sync` with each clean hand-written pair replaced by a `barrier`
//! at its wait (what the pair is credited as): the same barriers written and executed.
//! Debug-build time: see docs/performance.md (section `gfx12split`).

mod common;

use common::XorShift;
use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::emit::text::print_kernel;
use smemsync::ir::{Kernel, OpKind};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::{Synchronized, synchronize};
use smemsync::target::Target;

const L7: &str = include_str!("hostile_l/l7-hand-written-rotated-split-barrier-loop.kir");

fn interpret(k: &Kernel, target: &Target) -> Verdict {
    let o = CheckOptions {
        target: Some(*target),
        try_proof: false,
        schedules: 2,
        ..Default::default()
    };
    check_race_free(k, &o).verdict
}

/// `sync` of `src` for `target`, asserting the output neither races nor deadlocks; the error
/// codes of a refusal.
fn sync(name: &str, src: &str, target: &str) -> Result<Synchronized, Vec<String>> {
    let k = common::parse_verified_as(name, src);
    let t = Target::from_name(target).expect("target");
    let out = synchronize(&k, &t, &PlaceOptions::default())
        .map_err(|ds| ds.iter().map(|d| d.code.to_string()).collect::<Vec<_>>())?;
    let v = interpret(&out.kernel, &t);
    assert!(
        !matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
        "{name} on {target}: output is {v:?}\n{}",
        print_kernel(&out.kernel)
    );
    Ok(out)
}

fn count(k: &Kernel, f: impl Fn(&OpKind) -> bool) -> usize {
    common::ops_where(k, f).len()
}

#[test]
fn l7_rotated_split_loop_is_accepted_as_it_is() {
    for target in ["gfx1200", "gfx1201", "gfx1250"] {
        let out = sync("l7", L7, target).unwrap_or_else(|e| panic!("{target}: refused {e:?}"));
        let st = &out.placement.stats;
        assert_eq!(
            (st.barriers_written, st.covered_by_existing),
            (0, 1),
            "{target}"
        );
        let k = &out.kernel;
        let signals = count(k, |o| matches!(o, OpKind::SplitSignal(_)));
        let waits = count(k, |o| matches!(o, OpKind::SplitWait(_)));
        assert_eq!((signals, waits), (2, 2), "{target}\n{}", print_kernel(k));
    }
}

#[test]
fn a_protocol_error_on_an_inserted_op_points_at_a_source_op() {
    // A window holding a shared access is not credited; were `sync` to place a barrier in it,
    // the protocol check of its output would report the inserted signal. The checker itself
    // locates errors of ops without a source at the nearest op that has one.
    let src = "kernel @k() block(64) {\n shared @s : i32[64]\n %t = tid.x\n store @s[%t], %t\n barrier_signal -1\n barrier_wait -1\n}\n";
    let mut k = common::parse_verified(src);
    let body = k.body();
    let extra = k.new_op(OpKind::SplitSignal(-1), &[], vec![]);
    k.insert_op(body, 3, extra);
    let ds = smemsync::check::protocol::check_protocol(&k, 32);
    let d = ds.iter().find(|d| d.code == "P0001").expect("P0001");
    let span = d.labels[0].span;
    assert_eq!(
        &src[span.lo as usize..span.hi as usize],
        "barrier_signal -1"
    );
    assert!(d.labels[0].message.contains("inserted by `sync`"), "{d:?}");
}

/// `sync`'s own output for the split file tests, synchronized again, comes back unchanged.
#[test]
fn sync_of_sync_gfx12_output_is_unchanged() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/filetests/");
    for f in [
        "placement/split-phases-with-a-symbolic-trip-count-are-a-formula.kir",
        "placement/split-lowering-lets-a-rotated-loop-absorb-the-barrier-after-it.kir",
        "placement/split-lowering-drops-a-dscnt-wait-with-no-lds-access-before-it.kir",
        "placement/split-signal-wait-pair-counts-as-a-barrier.kir",
        "check/a-race-suggests-the-sync-command-that-fixes-it.kir",
    ] {
        let src = std::fs::read_to_string(format!("{dir}{f}")).expect("read");
        for target in ["gfx1201", "gfx1250"] {
            let once = print_kernel(&sync(f, &src, target).expect("sync").kernel);
            let again = sync(f, &once, target).expect("re-sync");
            assert_eq!(print_kernel(&again.kernel), once, "{f} on {target}");
            assert_eq!(again.placement.stats.barriers_written, 0, "{f} on {target}");
        }
    }
}

#[test]
fn a_split_pair_no_hazard_crosses_gets_no_dscnt_wait() {
    // Each thread reads back its own element: no hazard, nothing for the pair to order, so
    // the store may still be in flight at the signal.
    for between in ["", "%u = add %t, 1\n"] {
        let src = format!(
            "kernel @k(%out: global i32[64]) block(64) {{\nshared @s : i32[64]\n%t = tid.x\nstore @s[%t], %t\nbarrier_signal -1\n{between}barrier_wait -1\n%x = load @s[%t]\ngstore %out[%t], %x\n}}\n"
        );
        for target in ["gfx1200", "gfx1201", "gfx1250"] {
            let out = sync("no-hazard", &src, target).expect("accepted");
            let k = &out.kernel;
            assert_eq!(
                count(k, |o| matches!(o, OpKind::WaitCnt(_))),
                0,
                "{}",
                print_kernel(k)
            );
        }
        // The same pair with a load of the neighbour's element gets its wait.
        let racy = src.replace("load @s[%t]", "load @s[%m]").replace(
            "%t = tid.x\n",
            "%t = tid.x\n%n = add %t, 1\n%m = rem %n, 64\n",
        );
        let out = sync("hazard", &racy, "gfx1201").expect("accepted");
        assert_eq!(count(&out.kernel, |o| matches!(o, OpKind::WaitCnt(_))), 1);
    }
}

/// A generated kernel: straight-line shared and register work, optionally inside a 3-trip
/// loop, with hand-written split pairs at random places (never crossing), and a rotated pair
/// around the loop. Returns the text, and the text with every pair whose window is clean
/// replaced by a `barrier` at its wait (`None` when a window holds a shared access).
fn generated(rng: &mut XorShift) -> (String, Option<String>) {
    let n = 3 + rng.below(5);
    let mut work: Vec<String> = (0..n)
        .map(|i| match rng.below(5) {
            0 => "store @s[%t], %t".to_string(),
            1 => format!("%x{i} = load @s[%m]"),
            2 => format!("%y{i} = load @s[%t]"),
            3 => "store @s[%m], %t".to_string(),
            _ => format!("%a{i} = add %t, {i}"),
        })
        .collect();
    let mut clean = true;
    // Pairs: (signal position, wait position) over `work`, left to right.
    let mut at = 0;
    let mut marks: Vec<(usize, &str)> = Vec::new();
    while at < work.len() && rng.below(3) != 0 {
        let s = at + rng.below(work.len() - at);
        let w = s + rng.below(2.min(work.len() - s) + 1).min(work.len() - s);
        clean &= work[s..w].iter().all(|l| l.starts_with("%a"));
        marks.push((s, "S"));
        marks.push((w, "W"));
        at = w + 1;
    }
    let fence = rng.below(2) == 0;
    for &(p, m) in marks.iter().rev() {
        let line = match m {
            "S" if fence => "waitcnt dscnt(0)\nbarrier_signal -1",
            "S" => "barrier_signal -1",
            _ => "barrier_wait -1",
        };
        work.insert(p, line.to_string());
    }
    let looped = rng.below(2) == 0;
    let body = if looped {
        format!(
            "barrier_signal -1\nfor %i = 0 to 3 step 1 {{\nbarrier_wait -1\n{}\nbarrier_signal -1\n}}\nbarrier_wait -1\n",
            work.join("\n")
        )
    } else {
        format!("{}\n", work.join("\n"))
    };
    let head = "kernel @k(%out: global i32[64]) block(64) {\nshared @s : i32[64]\n%t = tid.x\n%n = add %t, 1\n%m = rem %n, 64\n";
    let src = format!("{head}{body}}}\n");
    // A clean pair is a barrier at its wait: drop the signals, turn waits into barriers.
    let as_barriers = clean.then(|| {
        src.lines()
            .filter(|l| *l != "barrier_signal -1")
            .map(|l| if l == "barrier_wait -1" { "barrier" } else { l })
            .collect::<Vec<_>>()
            .join("\n")
    });
    (src, as_barriers)
}

/// Generated kernels (clean and dirty windows): the output never races or deadlocks in the
/// interpreter ([`sync`]); a refusal is P0001 only, for a kernel with a dirty window whose
/// input itself races (a hazard with both accesses inside one window: no barrier may go
/// there); `sync` of the output is the output (branch `gfx12idem`); with clean windows only,
/// the same counts as the kernel with each pair a `barrier` at its wait.
#[test]
fn generated_split_pairs_are_sound_and_credited_like_barriers() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let t = Target::from_name("gfx1201").expect("target");
    let (mut compared, mut dirty_accepted) = (0, 0);
    for case in 0..60 {
        let (src, as_barriers) = generated(&mut rng);
        let name = format!("case {case}");
        let out = match sync(&name, &src, "gfx1201") {
            Ok(out) => out,
            Err(codes) => {
                assert!(as_barriers.is_none(), "{name}: clean pairs refused\n{src}");
                assert!(
                    codes.iter().all(|c| c == "P0001"),
                    "{name}: {codes:?}\n{src}"
                );
                let v = interpret(&common::parse_verified_as(&name, &src), &t);
                assert!(
                    matches!(v, Verdict::Race(_)),
                    "{name}: refused, input {v:?}\n{src}"
                );
                continue;
            }
        };
        let text = print_kernel(&out.kernel);
        let again = sync(&name, &text, "gfx1201").expect("sync of sync's output");
        assert_eq!(
            print_kernel(&again.kernel),
            text,
            "{name}: not idempotent\n{src}"
        );
        let Some(b) = as_barriers else {
            dirty_accepted += 1;
            continue;
        };
        let base = sync(&name, &b, "gfx1201").expect("barrier form");
        let (s, t) = (&out.placement.stats, &base.placement.stats);
        assert_eq!(
            (
                s.barriers_written,
                s.inserted_executed,
                s.covered_by_existing
            ),
            (
                t.barriers_written,
                t.inserted_executed,
                t.covered_by_existing
            ),
            "{name}\n{src}\n{b}"
        );
        compared += 1;
    }
    assert!(
        compared >= 15 && dirty_accepted >= 10,
        "{compared} {dirty_accepted}"
    );
}
