//! The static proof on nested loops whose ping-pong slot mixes every level's counter
//! (`rem(i1 + ... + a·iN, 2)`, src/check/proof_nest.rs) and on the t64 GEMM, against the
//! interpreter: after `sync` the kernels are proved; every mutant that `sync --without N`
//! makes is never proved when the interpreter finds a race in it, and a proved kernel is
//! never one where it does. Synchronization goes through the command line, so the checker
//! never links the placer.

use std::process::Command;

use smemsync::bench_kernels::GemmShape;
use smemsync::check::proof::prove;
use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::ir::Kernel;
use smemsync::target::Target;

fn sm80() -> Target {
    Target::from_name("sm_80").expect("a known target")
}

/// `smemsync sync --target sm_80 [--without N]` of `src`; `None` when it fails (no N-th
/// sync op).
fn sync(src: &str, without: Option<usize>, tag: &str) -> Option<String> {
    let path = std::env::temp_dir().join(format!(
        "smemsync-proof-nest-{}-{tag}.kir",
        std::process::id()
    ));
    std::fs::write(&path, src).expect("writes the kernel");
    let mut args = vec!["sync".to_string(), "--target".into(), "sm_80".into()];
    if let Some(n) = without {
        args.extend(["--without".to_string(), n.to_string()]);
    }
    args.push(path.display().to_string());
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(&args)
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    let _ = std::fs::remove_file(&path);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn kernel(text: &str) -> Kernel {
    let mut m = smemsync::reader::parse(text).expect("sync prints a kernel that parses");
    m.kernels.remove(0)
}

/// Whether interpretation (no proof, `schedules` schedules) finds a race in `k`.
fn interpreted_race(k: &Kernel, schedules: u32) -> bool {
    let opts = CheckOptions {
        target: Some(sm80()),
        schedules,
        try_proof: false,
        ..CheckOptions::default()
    };
    match check_race_free(k, &opts).verdict {
        Verdict::Race(_) => true,
        Verdict::Checked { .. } => false,
        v => panic!("interpretation ended otherwise: {v:?}"),
    }
}

/// `depth` nested loops of `trips` trips around a store of a thread's own element of a
/// double-buffered row and a load of the mirrored thread's element, the row being
/// `rem(t + i1 + ... + i(depth-1) + a·i(depth) - t, 2)`.
fn nest(depth: usize, trips: u32, threads: u32, a: i32) -> String {
    let mut s = format!(
        "kernel @nest(%out: global f32[{threads}]) block({threads}) {{\n  shared @a : f32[2, {threads}]\n  %t = tid.x\n  %f = itof %t\n  %u = sub {}, %t\n  %s0 = add %t, 0\n",
        threads - 1
    );
    for d in 1..=depth {
        let ind = "  ".repeat(d);
        s += &format!("{ind}for %i{d} = 0 to {trips} step 1 {{\n");
        if d == depth {
            s += &format!("{ind}  %w{d} = mul %i{d}, {a}\n");
        } else {
            s += &format!("{ind}  %w{d} = add %i{d}, 0\n");
        }
        s += &format!("{ind}  %s{d} = add %s{}, %w{d}\n", d - 1);
    }
    let ind = "  ".repeat(depth + 1);
    s += &format!(
        "{ind}%d = sub %s{depth}, %t\n{ind}%m = rem %d, 2\n{ind}store @a[%m, %t], %f\n{ind}%x = load @a[%m, %u]\n"
    );
    for d in (1..=depth).rev() {
        s += &format!("{}}}\n", "  ".repeat(d));
    }
    s + "}\n"
}

#[test]
fn the_nested_loops_rows_are_proved_after_sync() {
    for depth in 1..=8 {
        let src = smemsync::bench_kernels::nested_loops(depth);
        let synced = sync(&src, None, &format!("row{depth}")).expect("sync places it");
        let k = kernel(&synced);
        let r = prove(&k, Some(sm80()));
        assert!(r.is_ok(), "depth {depth}: {r:?}\n{synced}");
        if depth <= 2 {
            assert!(!interpreted_race(&k, 2), "depth {depth}: proved but racy");
        }
    }
}

/// Every mutant of small nested kernels: a racy one (by interpretation) is never proved, a
/// proved one is never racy; the synchronized kernels with the parity flip are proved.
#[test]
fn nested_loop_mutants_are_never_proved_when_racy() {
    let (mut racy, mut proved) = (0, 0);
    for depth in 1..=3 {
        for trips in [3, 4] {
            for a in [1, 2, 3] {
                let src = nest(depth, trips, 64, a);
                let tag = format!("{depth}-{trips}-{a}");
                let synced = sync(&src, None, &tag).expect("sync places it");
                let k = kernel(&synced);
                let ok = prove(&k, Some(sm80())).is_ok();
                if a % 2 == 1 {
                    assert!(ok, "{tag}: the parity flip is not proved\n{synced}");
                }
                assert!(!(ok && interpreted_race(&k, 2)), "{tag}: proved but racy");
                for n in 0.. {
                    let Some(m) = sync(&src, Some(n), &tag) else {
                        break;
                    };
                    let km = kernel(&m);
                    let ok = prove(&km, Some(sm80())).is_ok();
                    let race = interpreted_race(&km, 2);
                    assert!(!(ok && race), "{tag} without {n}: proved but racy\n{m}");
                    racy += usize::from(race);
                    proved += usize::from(ok);
                }
            }
        }
    }
    assert!(racy > 0, "no mutant is racy: the test tests nothing");
    eprintln!("{racy} racy mutants, {proved} proved");
}

#[test]
fn the_t64_gemm_is_proved_and_its_mutants_are_not_when_racy() {
    // `bench --real`'s "gemm 128x128x64 t64 rolled": copy loops of 128 trips.
    let shape = GemmShape {
        threads: 64,
        ..GemmShape::realistic(false)
    };
    let src = smemsync::bench_kernels::gemm(&shape).expect("a GEMM");
    let synced = sync(&src, None, "gemm").expect("sync places it");
    let r = prove(&kernel(&synced), Some(sm80()));
    assert!(r.is_ok(), "{r:?}");
    let mut racy = 0;
    for n in 0.. {
        let Some(m) = sync(&src, Some(n), "gemm") else {
            break;
        };
        let km = kernel(&m);
        let race = interpreted_race(&km, 1);
        racy += usize::from(race);
        assert!(
            !(race && prove(&km, Some(sm80())).is_ok()),
            "without {n}: proved but racy"
        );
    }
    assert!(racy > 0, "no mutant is racy: the test tests nothing");
}
