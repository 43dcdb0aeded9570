//! Hand-written cross-role mbarrier handshakes under mutation (docs/pipeline.md, "Hand-written
//! handshakes: what `sync` checks"): in every warp-specialized kernel with its own handshakes
//! (the example, file tests with roles, Triton's warp-specialized matmul), each `mbar_wait` and
//! each arrival (one Triton `arrive_barrier`: the elected block of arrivals) is deleted in turn,
//! and each arrival is moved above the last shared access before it (an "early arrive"). `sync`
//! must refuse the mutant with an error, or print a kernel the interpreter (one schedule) finds
//! free of races; a deadlock of the user's kernel is not a race. The mutants that remove the
//! only order of a cross-role conflict must be refused with E0307 (H7 and its kin).

use smemsync::check::Verdict;
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;

/// `sync`'s verdict on a kernel text: the codes of its errors, or whether its output races.
#[derive(Debug, PartialEq)]
enum Outcome {
    Refused(Vec<String>),
    RaceFree,
    Deadlock,
}

fn outcome(name: &str, src: &str, interpret: bool) -> Outcome {
    let k = common::parse_verified_as(name, src);
    let t = Target::from_name("sm_90").expect("sm_90");
    match synchronize(&k, &t, &PlaceOptions::default()) {
        Err(ds) => Outcome::Refused(
            (ds.iter())
                .filter(|d| d.severity == smemsync::diag::Severity::Error)
                .map(|d| d.code.to_string())
                .collect(),
        ),
        Ok(_) if !interpret => Outcome::RaceFree,
        Ok(s) => match common::interpret_only(&s.kernel, 1) {
            Verdict::Race(_) => panic!("{name}: `sync` accepted it and its output races\n{src}"),
            Verdict::Deadlock(_) => Outcome::Deadlock,
            _ => Outcome::RaceFree,
        },
    }
}

fn indent(l: &str) -> usize {
    l.len() - l.trim_start().len()
}

/// Whether a `.kir` line is a shared-memory access (the ops a handshake orders).
fn is_access(l: &str) -> bool {
    let t = l.trim();
    let op = match t.split_once(" = ") {
        Some((lhs, rhs)) if lhs.starts_with('%') => rhs,
        _ => t,
    };
    let word = op.split_whitespace().next().unwrap_or("");
    [
        "load",
        "store",
        "wgmma",
        "tma_load",
        "local_load",
        "local_store",
        "tma_store",
        "cp_async",
    ]
    .contains(&word)
}

/// Line ranges `[a, b)` of the handshake units: one `mbar_wait`, or a run of identical
/// `mbar_arrive` lines (with the `if` around it when the run is all the `if` holds).
fn units(lines: &[&str]) -> Vec<(usize, usize, bool)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if t.starts_with("mbar_wait ") {
            out.push((i, i + 1, false));
        } else if t.starts_with("mbar_arrive ") {
            let mut j = i + 1;
            while j < lines.len() && lines[j] == lines[i] {
                j += 1;
            }
            let whole_if = i > 0
                && lines[i - 1].trim().starts_with("if ")
                && j < lines.len()
                && lines[j].trim() == "}";
            out.push(if whole_if {
                (i - 1, j + 1, true)
            } else {
                (i, j, true)
            });
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// Whether `text` names value `v` (not a longer name that starts with it).
fn uses(text: &str, v: &str) -> bool {
    text.match_indices(v).any(|(i, _)| {
        (text[i + v.len()..].chars().next()).is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

/// The unit `[a, b)` moved above the nearest shared access before it in its block, unless a
/// value it uses is defined on the way (None: no such move).
fn moved_early(lines: &[&str], a: usize, b: usize) -> Option<Vec<String>> {
    let ind = indent(lines[a]);
    let unit = lines[a..b].join("\n");
    let mut j = a;
    loop {
        j = j.checked_sub(1)?;
        let l = lines[j];
        if l.trim().is_empty() || indent(l) > ind {
            continue;
        }
        if indent(l) < ind {
            return None;
        }
        if let Some((lhs, _)) = l.trim().split_once(" = ") {
            let used = lhs.split(", ").any(|v| uses(&unit, v));
            if used {
                return None;
            }
        }
        if is_access(l) {
            break;
        }
    }
    let mut out: Vec<String> = lines[..j].iter().map(|s| s.to_string()).collect();
    out.extend(lines[a..b].iter().map(|s| s.to_string()));
    out.extend(lines[j..a].iter().map(|s| s.to_string()));
    out.extend(lines[b..].iter().map(|s| s.to_string()));
    Some(out)
}

/// What the mutants of one kernel came to.
#[derive(Debug, Default)]
struct Tally {
    mutants: usize,
    /// Refused with E0307 among their errors, or with E0306 (deleting an arrival leaves a
    /// wait that can never return: `analysis::mbar_rounds` says so before the chains are
    /// asked).
    e0307: usize,
    /// Accepted: "OP deleted" / "OP moved early", OP the unit's first mbarrier op.
    accepted: Vec<String>,
}

/// Runs every mutant of `src` (the kernel as written must be accepted); with `interpret`,
/// the output of every accepted mutant is interpreted (one schedule) and must not race.
fn mutants(name: &str, src: &str, interpret: bool) -> Tally {
    assert!(
        !matches!(outcome(name, src, interpret), Outcome::Refused(_)),
        "{name}: the kernel as written is refused"
    );
    let lines: Vec<&str> = src.lines().collect();
    let mut t = Tally::default();
    for (a, b, arrive) in units(&lines) {
        let op = (lines[a..b].iter())
            .map(|l| l.trim())
            .find(|l| l.starts_with("mbar_"))
            .unwrap_or_default();
        let mut variants = vec![("deleted", [&lines[..a], &lines[b..]].concat().join("\n"))];
        if arrive && let Some(m) = moved_early(&lines, a, b) {
            variants.push(("moved early", m.join("\n")));
        }
        for (what, text) in variants {
            let label = format!("{op} {what}");
            t.mutants += 1;
            match outcome(&format!("{name}: {label}"), &text, interpret) {
                Outcome::Refused(codes) => {
                    assert!(
                        !codes.is_empty(),
                        "{name}: {label}: refused without an error"
                    );
                    t.e0307 += codes.iter().any(|c| c == "E0307" || c == "E0306") as usize;
                }
                _ => t.accepted.push(label),
            }
        }
    }
    eprintln!("{name}: {t:?}");
    t
}

const WS3: &str = include_str!(
    "filetests/soundness/ws-producer-refill-without-partition1-release-is-refused.kir"
);

/// The reduced H7 file test with the missing wait restored: accepted and race-free; every
/// mutant refused or race-free, and the H7 mutant (the second wait deleted) is E0307.
#[test]
fn three_roles_with_one_empty_array_per_consumer_group() {
    let src = WS3.replace(
        "        mbar_wait @emptyL[%s], %free\n",
        "        mbar_wait @emptyL[%s], %free\n        mbar_wait @emptyU[%s], %free\n",
    );
    assert_eq!(outcome("ws3", &src, true), Outcome::RaceFree);
    assert_eq!(
        outcome("h7", WS3, false),
        Outcome::Refused(vec!["E0307".into()])
    );
    let t = mutants("ws3", &src, true);
    // 4 waits deleted, 3 arrivals deleted, 2 consumer arrivals moved above their load: each
    // removes the only order of some cross-role conflict.
    assert_eq!((t.mutants, t.e0307), (9, 9), "{t:?}");
}

/// examples/tma-warp-specialized.kir: deleting the producer's `empty` wait or the consumers'
/// `full` wait, or moving the consumers' arrival above their read, is E0307.
#[test]
fn the_warp_specialized_example() {
    let src = std::fs::read_to_string("examples/tma-warp-specialized.kir").unwrap();
    let t = mutants("tma-warp-specialized", &src, true);
    // 2 waits and 2 arrivals deleted, the consumers' arrival moved above their load.
    assert_eq!((t.mutants, t.e0307), (5, 5), "{t:?}");
}

/// A loop-free file test with roles (one store, arrive / wait, load): every mutant refused.
#[test]
fn loop_free_file_test_with_roles() {
    let f = "tests/filetests/check/mbarrier-parity-wait-orders-producers-before-consumers.kir";
    let t = mutants(f, &std::fs::read_to_string(f).unwrap(), true);
    assert_eq!((t.mutants, t.e0307), (3, 3), "{t:?}");
}

/// The Triton-spelled file test (`%n` in `[0, 64]`: `mbar_protocol` enumerates every value,
/// 65 traces per `sync`). Ignored in CI (about a minute in the debug build); run with
/// `cargo test --release --test handshake_chain -- --ignored`.
#[test]
#[ignore]
fn triton_spelled_file_test() {
    let f = "tests/filetests/handshake/triton-spelled-slots-and-parities-are-proved.kir";
    let t = mutants(f, &std::fs::read_to_string(f).unwrap(), true);
    assert_eq!((t.mutants, t.e0307), (5, 5), "{t:?}");
}

/// The corpus matmul's mutants `sync` accepts: each removes a wait or an arrival that another
/// chain makes redundant (a consumer group's single `wgmma` reads both of its slots, so its
/// arrival on the first slot's `empty` array, which the producer waits on before both loads,
/// orders both). Deleting the arrival leaves the producer waiting on an array nobody arrives
/// on: the user's kernel deadlocks (`check`: C0021), which is not a race.
const MATMUL_ACCEPTED: [&str; 6] = [
    "mbar_wait @29[%acc_15], %acc_19 deleted",
    "mbar_wait @21[%acc_15], %acc_19 deleted",
    "mbar_arrive @29[%acc_22] deleted",
    "mbar_arrive @29[%acc_22] moved early",
    "mbar_arrive @21[%acc_22_1] deleted",
    "mbar_arrive @21[%acc_22_1] moved early",
];

fn matmul_kir() -> String {
    let ttgir =
        std::fs::read_to_string("corpus/triton/matmul_warp_specialized_fp16.ttgir").unwrap();
    smemsync::reader::ttgir::import_ttgir(&ttgir)
        .expect("imports")
        .kir
}

/// H7 on the corpus matmul, imported: the producer's wait on partition1's `empty` mbarrier
/// for the B slot (`@37`) deleted is E0307; the kernel as written is accepted.
#[test]
fn triton_warp_specialized_matmul_h7() {
    let kir = matmul_kir();
    assert_eq!(outcome("matmul", &kir, false), Outcome::RaceFree);
    let wait = "      mbar_wait @37[%acc_15], %acc_19\n";
    assert!(kir.contains(wait));
    let h7 = kir.replacen(wait, "", 1);
    assert_eq!(
        outcome("h7", &h7, false),
        Outcome::Refused(vec!["E0307".into()])
    );
}

/// Triton's warp-specialized matmul: every wait and `arrive_barrier` deleted, every consumer
/// arrival moved above the `wgmma` it follows (19 mutants); the accepted ones interpreted.
/// Ignored in CI (20 `sync`s and 7 interpretations of 384 threads: minutes in the debug
/// build); run with `cargo test --release --test handshake_chain -- --ignored` (100 s on a
/// loaded 2-core VM).
#[test]
#[ignore]
fn triton_warp_specialized_matmul_mutants() {
    let t = mutants("matmul_warp_specialized_fp16", &matmul_kir(), true);
    assert_eq!(t.accepted, MATMUL_ACCEPTED, "{t:?}");
    assert_eq!((t.mutants, t.e0307), (19, 13), "{t:?}");
}

/// An asynchronous access is released by an arrival only once its own threads completed it
/// (K1, K2, K2b of session 35's hostile test): with the completing wait moved above the
/// arrival each kernel is accepted and its output is race-free; without the commit that
/// closes the copy's group the wait completes nothing, and the kernel stays refused.
#[test]
fn async_accesses_are_released_after_their_completion() {
    let dir = "tests/filetests/soundness/";
    let cases = [
        (
            "ws-tma-store-read-released-before-its-bulk-wait-is-refused.kir",
            "      bulk_commit\n",
            "      mbar_arrive @empty[%s]\n",
            "      bulk_wait 0\n",
        ),
        (
            "ws-cp-async-write-released-before-its-wait-is-refused.kir",
            "      cp_async_commit\n",
            "      mbar_arrive @empty[%s]\n",
            "      cp_async_wait 0\n",
        ),
        (
            "ws-cp-async-producer-arriving-full-before-its-wait-is-refused.kir",
            "    cp_async_commit\n",
            "    mbar_arrive @full[0]\n",
            "    cp_async_wait 0\n",
        ),
    ];
    for (file, commit, arrive, wait) in cases {
        let src = std::fs::read_to_string(format!("{dir}{file}")).unwrap();
        assert_eq!(
            outcome(file, &src, false),
            Outcome::Refused(vec!["E0307".into()]),
            "{file}"
        );
        assert!(src.contains(arrive), "{file}: no `{}`", arrive.trim());
        // The wait in front of the arrival (and, where the kernel waits again later, that
        // later wait kept: it completes nothing more).
        let fixed = src.replacen(arrive, &format!("{wait}{arrive}"), 1);
        assert_eq!(
            outcome(file, &fixed, true),
            Outcome::RaceFree,
            "{file} with the wait first:\n{fixed}"
        );
        let uncommitted = fixed.replacen(commit, "", 1);
        assert!(
            matches!(outcome(file, &uncommitted, false), Outcome::Refused(_)),
            "{file}: a wait with no commit before it completes no copy, yet it was accepted:\n{uncommitted}"
        );
    }
}
