//! The exit wait of an inner copy loop for a pair carried across a common loop
//! (docs/async.md, "The youngest execution": hostile K8). A copy in an inner loop whose own
//! WAW puts a wait in its body, an exit wait after the inner loop that some outer iteration
//! skips (`if %i > 0`, `%i < 3`, `%i % 2 == 1`, `%i * %i < 10`), and a read of an earlier
//! outer iteration's slot: `sync` must write a barrier after the completion of the copy in
//! the iteration that reads it. Each synchronized kernel is run by the interpreter and must be
//! race-free (the base output raced on every file of `tests/youngest_carried/`), and the static
//! proof must never say "proved" of a racing output. A small generated sweep of the same
//! family (copies in inner loops, waits at random places, guarded or not) follows.

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;
use common::XorShift;

/// Synchronizes `text` for `target`; `None` where sync refuses the kernel.
fn synced(text: &str, target: &Target) -> Option<smemsync::ir::Kernel> {
    let k = common::parse_verified(text);
    synchronize(&k, target, &PlaceOptions::default())
        .ok()
        .map(|s| s.kernel)
}

/// The interpreter's verdict on `k` at each of `bounds` (none: the kernel has no parameter).
fn assert_race_free(name: &str, k: &smemsync::ir::Kernel, target: &Target, bounds: &[i64]) {
    let runs: Vec<Vec<(String, i64)>> = if bounds.is_empty() {
        vec![Vec::new()]
    } else {
        bounds.iter().map(|&n| vec![("n".to_string(), n)]).collect()
    };
    for b in runs {
        let opts = CheckOptions {
            target: Some(*target),
            try_proof: false,
            schedules: 2,
            bounds: b.clone(),
            ..Default::default()
        };
        let v = check_race_free(k, &opts).verdict;
        if matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)) {
            let proved = smemsync::check::proof::prove(k, Some(*target)).is_ok();
            panic!(
                "{name}: the synchronized kernel races at {b:?} (proved: {proved}): {v:?}\n{}",
                smemsync::emit::text::print_kernel(k)
            );
        }
    }
}

/// The hostile files (K8 and the generators' finds) with the targets they raced on.
const FILES: &[(&str, &str, &[&str])] = &[
    (
        "k8-guarded-exit-wait",
        include_str!("youngest_carried/k8-guarded-exit-wait.kir"),
        &["sm_80"],
    ),
    (
        "g10-6009",
        include_str!("youngest_carried/g10-6009.kir"),
        &["sm_80"],
    ),
    (
        "g10-6067",
        include_str!("youngest_carried/g10-6067.kir"),
        &["sm_80"],
    ),
    (
        "g10-6070",
        include_str!("youngest_carried/g10-6070.kir"),
        &["sm_80"],
    ),
    (
        "g10-6071",
        include_str!("youngest_carried/g10-6071.kir"),
        &["sm_80"],
    ),
    (
        "g10-6102",
        include_str!("youngest_carried/g10-6102.kir"),
        &["gfx950"],
    ),
    (
        "g10-6131",
        include_str!("youngest_carried/g10-6131.kir"),
        &["gfx950"],
    ),
    (
        "g10-6158",
        include_str!("youngest_carried/g10-6158.kir"),
        &["sm_80"],
    ),
    (
        "g10-6228",
        include_str!("youngest_carried/g10-6228.kir"),
        &["sm_80"],
    ),
    (
        "g4-5120",
        include_str!("youngest_carried/g4-5120.kir"),
        &["gfx942"],
    ),
    (
        "g4-5142",
        include_str!("youngest_carried/g4-5142.kir"),
        &["gfx942"],
    ),
    (
        "g4-5177",
        include_str!("youngest_carried/g4-5177.kir"),
        &["gfx942"],
    ),
];

#[test]
fn hostile_inner_copy_loops_with_skipped_exit_waits_sync_race_free() {
    for (name, text, targets) in FILES {
        for t in *targets {
            let target = Target::from_name(t).expect("known target");
            let out = synced(text, &target).unwrap_or_else(|| panic!("{name}: sync refuses"));
            let bounds: &[i64] = if text.contains("%n: i32") {
                &[8, 11]
            } else {
                &[]
            };
            assert_race_free(&format!("{name} on {t}"), &out, &target, bounds);
        }
    }
}

/// The wait of `fam` (`cp`: cp.async on sm_80, else gather_to_lds on gfx950) with count `c`,
/// guarded by `guard` (a condition's ops and its value, or none).
fn wait(rng: &mut XorShift, cp: bool, inner: bool, q: &mut u32, ind: &str) -> String {
    let c = rng.below(3);
    let w = if cp {
        format!("cp_async_wait {c}")
    } else {
        format!("waitcnt vmcnt({c})")
    };
    let guards: &[&str] = if inner {
        &["none", "gt0", "lt3", "odd", "jz"]
    } else {
        &["none", "gt0", "lt3", "odd"]
    };
    *q += 1;
    let g = match guards[rng.below(guards.len())] {
        "none" => return format!("{ind}{w}\n"),
        "gt0" => format!("{ind}%g{q} = cmp gt %i, 0\n"),
        "lt3" => format!("{ind}%g{q} = cmp lt %i, 3\n"),
        "jz" => format!("{ind}%g{q} = cmp eq %j, 0\n"),
        _ => format!("{ind}%go{q} = rem %i, 2\n{ind}%g{q} = cmp eq %go{q}, 1\n"),
    };
    format!("{g}{ind}if %g{q} {{\n{ind}  {w}\n{ind}}}\n")
}

/// One kernel of the family (hostile generator gen10's shape): outer loop of 4 trips over
/// `S` slots, inner copy loop of `J` trips (the thread's own element: WAW), waits at random
/// places, a read of the slot `d` iterations back.
fn gen_kernel(rng: &mut XorShift) -> (String, &'static str) {
    let cp = rng.below(2) == 0;
    let (s, j, d) = (2 + rng.below(2), 1 + rng.below(3), rng.below(2));
    let mut q = 0;
    let (i1, i2) = ("    ", "      ");
    let mut body = format!("{i1}%row = and %i, 15\n{i1}%ib = add %i, 12\n{i1}%s = rem %ib, {s}\n");
    if rng.below(2) == 0 {
        body += &wait(rng, cp, false, &mut q, i1);
    }
    body += &format!("{i1}for %j = 0 to {j} step 1 {{\n{i2}%v = view @a[%s]\n");
    if rng.below(2) == 0 {
        body += &wait(rng, cp, true, &mut q, i2);
    }
    body += &if cp {
        format!("{i2}cp_async %v[%t] <- %X[%row, %t]\n{i2}cp_async_commit\n")
    } else {
        format!("{i2}%tok = gather_to_lds %v[%t] <- %X[%row, %t]\n")
    };
    if rng.below(2) == 0 {
        body += &wait(rng, cp, true, &mut q, i2);
    }
    body += &format!("{i1}}}\n");
    if rng.below(10) < 7 {
        body += &wait(rng, cp, false, &mut q, i1);
    }
    body += &format!(
        "{i1}%qd = sub %ib, {d}\n{i1}%sd = rem %qd, {s}\n{i1}%u = view @a[%sd]\n{i1}%y = load %u[%r]\n{i1}gstore %out[%t], %y\n"
    );
    let init: String = (0..s)
        .map(|x| format!("  %z{x} = view @a[{x}]\n  store %z{x}[%t], 0.0\n"))
        .collect();
    let last = if cp {
        "cp_async_wait 0"
    } else {
        "waitcnt vmcnt(0)"
    };
    let text = format!(
        "kernel @k(%X: global f32[16, 64], %out: global f32[64]) block(64) {{\n  shared @a : f32[{s}, 64]\n  \
         %t = tid.x\n  %r = sub 63, %t\n{init}  barrier\n  for %i = 0 to 4 step 1 {{\n{body}  }}\n  {last}\n}}\n"
    );
    (text, if cp { "sm_80" } else { "gfx950" })
}

#[test]
fn generated_inner_copy_loops_with_guarded_waits_sync_race_free() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut synced_count = 0;
    for n in 0..40 {
        let (text, t) = gen_kernel(&mut rng);
        let target = Target::from_name(t).expect("known target");
        let Some(out) = synced(&text, &target) else {
            continue;
        };
        synced_count += 1;
        assert_race_free(
            &format!("generated #{n} on {t}:\n{text}"),
            &out,
            &target,
            &[],
        );
    }
    assert!(
        synced_count >= 30,
        "most generated kernels synchronize ({synced_count})"
    );
}
