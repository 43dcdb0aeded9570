//! The static proof on TMA loads completed by mbarrier phases (docs/checker.md, "TMA loads in
//! the static proof"): the synchronized single-role TMA pipelines (the example and Triton's
//! TMA matmul) are proved; every mutant that drops a pipeline wait, flips its parity, drops
//! an arrive's transaction bytes or drops a barrier is never proved, and interpretation finds
//! what is wrong with the example's mutants; the warp-specialized example's two roles are
//! proved by the two-role form (tests/check_elected_proof.rs), Triton's warp-specialized
//! matmul, outside it, is left to the interpreter. Synchronization goes through the command
//! line, so the checker never links the placer.

use std::path::Path;

use smemsync::check::Verdict;
use smemsync::check::proof::prove;

mod common;
use common::parse_verified as parse;

fn synced(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    common::smemsync_stdout(&["sync", "--target", "sm_90", &p.to_string_lossy()])
}

const PIPELINES: [&str; 2] = [
    "examples/tma-mbarrier-pipeline.kir",
    "corpus/triton/matmul_tma_fp16.ttgir",
];

#[test]
fn synchronized_tma_pipelines_are_proved() {
    for rel in PIPELINES {
        let k = parse(&synced(rel));
        let why = prove(&k, None).unwrap_or_else(|e| panic!("{rel}: not proved: {e}"));
        assert!(why.contains("async copies followed"), "{rel}: {why}");
    }
}

/// Mutants of the kinds the pipeline form must refute: each barrier and each `mbar_wait`
/// dropped, each wait's parity flipped, each arrive's `tx` dropped.
fn mutants(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        let with = |new: &str| {
            let mut m: Vec<String> = lines.iter().map(|x| x.to_string()).collect();
            m[i] = new.to_string();
            m.join("\n")
        };
        if t == "barrier" || t.starts_with("mbar_wait") {
            out.push((format!("line {} `{t}` dropped", i + 1), with("")));
        }
        if let Some((head, par)) = t
            .strip_prefix("mbar_wait ")
            .and_then(|r| r.rsplit_once(", "))
        {
            let flipped = format!("%flip{i} = xor {par}, 1\n  mbar_wait {head}, %flip{i}");
            out.push((
                format!("line {} `{t}` parity flipped", i + 1),
                with(&flipped),
            ));
        }
        if t.starts_with("mbar_arrive") && t.contains(" tx ") {
            let bare = l.split(" tx ").next().unwrap_or(l);
            out.push((format!("line {} `{t}` without tx", i + 1), with(bare)));
        }
    }
    out
}

fn interpret(k: &smemsync::ir::Kernel) -> Verdict {
    common::interpret_only(k, 2)
}

#[test]
fn pipeline_mutants_are_never_proved() {
    for rel in PIPELINES {
        let text = synced(rel);
        let ms = mutants(&text);
        assert!(ms.len() >= 4, "{rel}: only {} mutants", ms.len());
        for (what, m) in ms {
            let k = parse(&m);
            if let Ok(why) = prove(&k, None) {
                panic!("{rel}, {what}: proved ({why})");
            }
        }
    }
}

#[test]
fn the_example_mutants_race_or_deadlock_under_interpretation() {
    let text = synced(PIPELINES[0]);
    for (what, m) in mutants(&text) {
        let k = parse(&m);
        let v = interpret(&k);
        assert!(
            !matches!(v, Verdict::Checked { .. } | Verdict::Proved { .. }),
            "{what}: the interpreter finds nothing wrong"
        );
    }
}

/// The example's two roles are proved (tests/check_elected_proof.rs); Triton's
/// warp-specialized matmul is outside the two-role form (its handshakes are not proved, and
/// wgmma reads its slots), so it is left to the interpreter.
#[test]
fn warp_specialized_tma_kernels_are_proved_or_left_to_the_interpreter() {
    let rel = "examples/tma-warp-specialized.kir";
    let why = prove(&parse(&synced(rel)), None).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert!(
        why.contains("ordered by the roles' mbarrier handshakes"),
        "{why}"
    );
    let rel = "corpus/triton/matmul_warp_specialized_fp16.ttgir";
    let why = prove(&parse(&synced(rel)), None).expect_err(rel);
    assert!(why.contains("mbarrier"), "{rel}: {why}");
}

/// A store in the `else` arm of the elected thread's TMA load runs concurrently with the load
/// (no path leads from one to the other): the intervals must pair them, not the load's walk.
#[test]
fn an_access_beside_a_tma_load_in_the_other_arm_is_not_proved() {
    let text = synced(PIPELINES[0]);
    let old = "    tma_load %s0 <- %X[0, 0], @full[0]\n  }";
    assert!(text.contains(old), "the example's prologue load moved");
    let m = text.replacen(
        old,
        "    tma_load %s0 <- %X[0, 0], @full[0]\n  } else {\n    store %s0[%t], 0.0\n  }",
        1,
    );
    let k = parse(&m);
    assert!(prove(&k, None).is_err(), "proved a racing kernel");
    assert!(matches!(interpret(&k), Verdict::Race(_)));
}
