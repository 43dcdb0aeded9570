//! A completing wait inside a region that may not run (an `if` arm, a loop of possibly zero
//! trips) must not order what follows the region (docs/async.md, "A completion on every
//! path"). Every shape of the structured sweep — a copy; a region {if, if/else, loop `0..n`,
//! loop `1..n`, nested loop} holding a wait, a wait and a barrier, or a barrier, with or
//! without a read inside; then nothing, a wait or a barrier; then a read — is synchronized and
//! the output run by the interpreter at `n = 0..3` (the paths that skip the region): it must
//! be race-free, and the static proof must never say "proved" of a racing output. cp.async
//! on sm_80 (all 240 shapes), gather_to_lds + waitcnt on gfx942 and TMA store + bulk_wait on
//! sm_90 (subsets). The placements of a subset are compared with the exhaustive strategy's.

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::sync::driver::synchronize;
use smemsync::sync::{PlaceOptions, Strategy};
use smemsync::target::Target;

mod common;

/// One async family: the target, the copy (with its commit), the wait, and the kernel's
/// header, body start and final read.
struct Family {
    target: &'static str,
    copy: &'static str,
    commit: &'static str,
    wait: &'static str,
}

const CP_ASYNC: Family = Family {
    target: "sm_80",
    copy: "cp_async @a[%t] <- %X[0, %t]",
    commit: "cp_async_commit",
    wait: "cp_async_wait 0",
};

const G2L: Family = Family {
    target: "gfx942",
    copy: "%tok = gather_to_lds @a[%t] <- %X[0, %t]",
    commit: "",
    wait: "waitcnt vmcnt(0)",
};

const REGIONS: [(&str, &str, &str); 5] = [
    ("loop", "for %k = 0 to %n step 1 {", "}"),
    ("if", "%c = cmp gt %n, 1\n  if %c {", "}"),
    (
        "nest",
        "for %k = 0 to %n step 1 {\n  for %j = 0 to 2 step 1 {",
        "}\n  }",
    ),
    (
        "ifelse",
        "%c = cmp gt %n, 1\n  if %c {",
        "} else {\n    %q = const 0 : i32\n  }",
    ),
    ("loop1", "for %k = 1 to %n step 1 {", "}"),
];

/// The sweep's kernels of one family: (name, text).
fn shapes(f: &Family, commits: &[bool]) -> Vec<(String, String)> {
    let syncs = |w: &str| -> [(&'static str, String); 3] {
        [
            ("w", w.to_string()),
            ("wb", format!("{w}\n    barrier")),
            ("b", "barrier".to_string()),
        ]
    };
    let mut out = Vec::new();
    for (wr, wv) in syncs(f.wait) {
        for (rn, open, close) in REGIONS {
            let after = [("none", String::new())].into_iter().chain(syncs(f.wait));
            for (aw, av) in after {
                for &commit in commits {
                    for readin in [false, true] {
                        let mut inner = format!("    {wv}");
                        if readin {
                            inner += "\n    %x = load @a[%r]\n    gstore %out[%t], %x";
                        }
                        let cm = if commit { f.commit } else { "" };
                        let text = format!(
                            "kernel @k(%n: i32 in [0, 4] = 2, %X: global f32[8, 64], %out: global f32[64]) block(64) {{\n  shared @a : f32[64]\n  %t = tid.x\n  %r = sub 63, %t\n  {}\n  {cm}\n  {open}\n{inner}\n  {close}\n  {av}\n  %y = load @a[%r]\n  gstore %out[%t], %y\n}}\n",
                            f.copy
                        );
                        let name =
                            format!("{wr}-in-{rn}/after-{aw}/commit={commit}/read-in={readin}");
                        out.push((name, text));
                    }
                }
            }
        }
    }
    out
}

/// The TMA-store form (sm_90): thread 0 stores the tile the block wrote; the region holds
/// thread 0's `bulk_wait` (and a barrier); every thread then overwrites an element.
fn tma_shapes() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (rn, open, close) in REGIONS {
        for (wr, wv) in [
            ("w", "if %el {\n      bulk_wait 0\n    }"),
            ("wb", "if %el {\n      bulk_wait 0\n    }\n    barrier"),
        ] {
            let text = format!(
                "kernel @k(%n: i32 in [0, 4] = 2, %Y: global f32[1, 64]) block(64) {{\n  shared @o : f32[1, 64]\n  %t = tid.x\n  %f = itof %t\n  %v = view @o[0]\n  store %v[%t], %f\n  fence_proxy_async\n  barrier\n  %el = cmp eq %t, 0\n  if %el {{\n    tma_store %Y[0, 0] <- %v\n    bulk_commit\n  }}\n  {open}\n    {wv}\n  {close}\n  %r = sub 63, %t\n  store %v[%r], %f\n}}\n"
            );
            out.push((format!("tma-{wr}-in-{rn}"), text));
        }
    }
    out
}

/// Synchronizes `text` for `target` with `strategy`; `None` where sync refuses the kernel.
fn synced(text: &str, target: &Target, strategy: Strategy) -> Option<(smemsync::ir::Kernel, u64)> {
    let k = common::parse_verified(text);
    let opts = PlaceOptions {
        strategy,
        ..Default::default()
    };
    let s = synchronize(&k, target, &opts).ok()?;
    Some((s.kernel, s.placement.stats.inserted_executed))
}

/// The interpreter's verdict at `n = 0..3`, and the static proof never contradicting it.
fn assert_race_free(name: &str, k: &smemsync::ir::Kernel, target: &Target) {
    let proved = smemsync::check::proof::prove(k, Some(*target)).is_ok();
    for n in 0..4 {
        let opts = CheckOptions {
            target: Some(*target),
            try_proof: false,
            schedules: 2,
            bounds: vec![("n".into(), n)],
            ..Default::default()
        };
        let v = check_race_free(k, &opts).verdict;
        assert!(
            !matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
            "{name}: the synchronized kernel races at n = {n} (proved: {proved}): {v:?}\n{}",
            smemsync::emit::text::print_kernel(k)
        );
    }
}

fn sweep(shapes: &[(String, String)], target: &str, exhaustive_every: usize) {
    let target = Target::from_name(target).expect("known target");
    let mut synced_count = 0;
    for (i, (name, text)) in shapes.iter().enumerate() {
        let Some((out, executed)) = synced(text, &target, Strategy::Optimal) else {
            continue;
        };
        synced_count += 1;
        assert_race_free(name, &out, &target);
        if exhaustive_every > 0
            && i % exhaustive_every == 0
            && let Some((ex, ex_executed)) = synced(text, &target, Strategy::Exhaustive)
        {
            assert_race_free(&format!("{name} (exhaustive)"), &ex, &target);
            assert_eq!(
                executed, ex_executed,
                "{name}: optimal and exhaustive differ"
            );
        }
    }
    assert!(synced_count * 2 > shapes.len(), "most shapes synchronize");
}

#[test]
fn cp_async_sweep_is_race_free_on_the_paths_that_skip_the_region() {
    let s = shapes(&CP_ASYNC, &[true, false]);
    assert_eq!(s.len(), 240);
    sweep(&s, CP_ASYNC.target, 7);
}

#[test]
fn gather_to_lds_sweep_is_race_free_on_the_paths_that_skip_the_region() {
    let s = shapes(&G2L, &[false]);
    sweep(&s, G2L.target, 11);
}

#[test]
fn tma_store_sweep_is_race_free_on_the_paths_that_skip_the_region() {
    sweep(&tma_shapes(), "sm_90", 3);
}

/// Regions of a copy loop's body that may not run in the iteration that issued the copy
/// (docs/async.md, "Copies issued in loops"): guards on the iteration, on a parameter, an
/// if/else, nested loops of possibly zero trips.
const LOOP_REGIONS: [(&str, &str, &str); 6] = [
    ("ifpos", "%c = cmp gt %i, 0\n    if %c {", "}"),
    (
        "ifodd",
        "%o = rem %i, 2\n    %c = cmp eq %o, 0\n    if %c {",
        "}",
    ),
    ("ifn", "%c = cmp gt %n, 1\n    if %c {", "}"),
    (
        "ifelse",
        "%c = cmp gt %i, 0\n    if %c {",
        "} else {\n      %q = const 0 : i32\n    }",
    ),
    ("nest", "for %j = 0 to %n step 1 {", "}"),
    ("nest1", "for %j = 1 to %n step 1 {", "}"),
];

/// A read of slot `(i - d) mod s` (distance `d` from the copy of iteration `i`).
fn read_slot(d: u32, s: u32, ind: &str) -> String {
    format!(
        "{ind}%sd = add %i, {}\n{ind}%pd = rem %sd, {s}\n{ind}%ud = view @a[%pd]\n{ind}%yd = load %ud[%r]\n{ind}gstore %out[%t], %yd",
        (s - d % s) % s
    )
}

/// The loop family of `scripts/sweep_async_loops.py` (a deterministic subset): a copy into
/// slot `i mod s` of a `for` of `%n` or one trip, its wait (and a barrier) in a region of the
/// body, and a read of the previous iteration's slot after the region or in the wait's arm,
/// or of slot 0 after the loop.
fn loop_shapes(f: &Family) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (rn, open, close) in LOOP_REGIONS {
        for wb in [false, true] {
            for dest in ["prev", "arm", "after"] {
                for trip in ["%n", "1"] {
                    let s = if dest == "after" { 1 } else { 2 };
                    let mut inner = format!("      {}", f.wait);
                    if wb {
                        inner += "\n      barrier";
                    }
                    if dest == "arm" {
                        inner += &format!("\n{}", read_slot(1, s, "      "));
                    }
                    let mut body = format!(
                        "    %s = rem %i, {s}\n    %v = view @a[%s]\n    {}\n    {}\n    {open}\n{inner}\n    {close}\n",
                        f.copy
                            .replace("@a[%t] <- %X[0, %t]", "%v[%t] <- %X[%i, %t]"),
                        f.commit
                    );
                    if dest == "prev" {
                        body += &read_slot(1, s, "    ");
                        body += "\n";
                    }
                    let init: String = (0..s)
                        .map(|k| format!("  %z{k} = view @a[{k}]\n  store %z{k}[%t], 0.0\n"))
                        .collect();
                    let tail = if dest == "after" {
                        "  %ua = view @a[0]\n  %ya = load %ua[%r]\n  gstore %out[%t], %ya\n"
                    } else {
                        ""
                    };
                    let text = format!(
                        "kernel @k(%n: i32 in [0, 4] = 2, %X: global f32[8, 64], %out: global f32[64]) block(64) {{\n  shared @a : f32[{s}, 64]\n  %t = tid.x\n  %r = sub 63, %t\n{init}  barrier\n  for %i = 0 to {trip} step 1 {{\n{body}  }}\n{tail}}}\n"
                    );
                    out.push((format!("loop-{rn}/barrier={wb}/{dest}/trip={trip}"), text));
                }
            }
        }
    }
    out
}

/// The TMA-store loop form (sm_90): each iteration writes slot `i mod s` and thread 0 stores
/// it; thread 0's `bulk_wait` (and a barrier) in a region of the body; a write into the next
/// slot in the wait's arm, or into slot 0 after the loop (after thread 0's `bulk_wait 0`).
fn tma_loop_shapes() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (rn, open, close) in LOOP_REGIONS {
        for (dest, trip) in [("arm", "%n"), ("after", "1"), ("after", "%n")] {
            let s = if dest == "arm" { 2 } else { 1 };
            let mut inner =
                "      if %el {\n        bulk_wait 0\n      }\n      barrier".to_string();
            if dest == "arm" {
                inner += &format!(
                    "\n      %sa = add %i, 1\n      %pa = rem %sa, {s}\n      %va = view @o[%pa]\n      store %va[%r], %f"
                );
            }
            let tail = if dest == "after" {
                "  if %el {\n    bulk_wait 0\n  }\n  %vz = view @o[0]\n  store %vz[%r], %f\n"
            } else {
                ""
            };
            let text = format!(
                "kernel @k(%n: i32 in [0, 4] = 2, %Y: global f32[8, 64]) block(64) {{\n  shared @o : f32[{s}, 64]\n  %t = tid.x\n  %r = sub 63, %t\n  %f = itof %t\n  %el = cmp eq %t, 0\n  for %i = 0 to {trip} step 1 {{\n    %s = rem %i, {s}\n    %v = view @o[%s]\n    store %v[%t], %f\n    fence_proxy_async\n    barrier\n    if %el {{\n      tma_store %Y[%i, 0] <- %v\n      bulk_commit\n    }}\n    {open}\n{inner}\n    {close}\n  }}\n{tail}}}\n"
            );
            out.push((format!("tma-loop-{rn}/{dest}/trip={trip}"), text));
        }
    }
    out
}

#[test]
fn cp_async_loop_family_is_race_free_in_every_iteration() {
    let s = loop_shapes(&CP_ASYNC);
    assert_eq!(s.len(), 72);
    sweep(&s, CP_ASYNC.target, 0);
}

#[test]
fn gather_to_lds_loop_family_is_race_free_in_every_iteration() {
    let s: Vec<_> = loop_shapes(&G2L).into_iter().step_by(3).collect();
    sweep(&s, G2L.target, 0);
}

#[test]
fn tma_store_loop_family_is_race_free_in_every_iteration() {
    sweep(&tma_loop_shapes(), "sm_90", 0);
}
