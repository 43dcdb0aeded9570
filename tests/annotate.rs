//! `sync --annotate` on every Triton kernel of `corpus/triton/` (docs/ttgir.md): no annotation
//! is written inside an op's combiner region (between `({` and its `^bb0`, or in its body),
//! the annotated text keeps a valid MLIR block structure (checked by `mlir-opt-22` on a
//! skeleton of it, see [`skeleton`]), and importing the annotated text again inserts only the
//! syncs the annotation could not write as TTGIR ops (the round trip).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use smemsync::reader::ttgir::lexer::lex_lines;

mod common;
use common::smemsync_stdout as smemsync;

/// Corpus kernels whose `sync` takes seconds in the release build (minutes in CI's debug
/// build): the persistent warp-specialized matmul's mbarrier search (docs/async.md, "Tile
/// loops of persistent kernels") and the three-stage warp-specialized attention's
/// every-trip-count traces (the two-stage one stays in CI). They are annotated by the ignored test below:
/// `cargo test --release --test annotate -- --ignored`.
const SLOW: &[&str] = &["matmul_persistent_ws_fp16", "attention_fwd_ws_fp16_s3"];

/// The corpus's TTGIR files, sorted: the [`SLOW`] ones only, or all others.
fn corpus(slow: bool) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/triton");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("corpus")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "ttgir"))
        .filter(|p| SLOW.iter().any(|s| p.file_stem().is_some_and(|f| f == *s)) == slow)
        .collect();
    v.sort();
    v
}

/// The lines (1-based) of annotations written inside a generic-form op's region
/// (`%r = "tt.reduce"(...) ... ({` up to its `})`): the region is a combiner the `.kir`
/// does not model, so nothing of smemsync's belongs there.
fn inside_combiners(text: &str) -> Vec<usize> {
    let mut bad = Vec::new();
    let mut depth: Option<i64> = None;
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if let Some(d) = depth.as_mut() {
            if line.contains("// smemsync") {
                bad.push(i + 1);
            }
            *d += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            if *d <= 0 {
                depth = None;
            }
        } else if code.contains("\"(") && code.trim_end().ends_with("({") {
            depth = Some(1);
        }
    }
    bad
}

/// A skeleton of TTGIR text that `mlir-opt-22` parses without Triton's dialects (it cannot
/// read their custom syntax): every statement keeps its place as a generic unregistered op,
/// `gpu.barrier` (a registered op that is no terminator) stays itself, region-opening lines
/// open a region, `} else {` starts the op's next region, `^bb` labels start a block. A
/// barrier written before a region's `^bb0` then makes an unterminated entry block, one after
/// a region's terminator an unterminated block: both are MLIR errors.
fn skeleton(text: &str) -> String {
    let mut out = String::new();
    for l in lex_lines(text).expect("lexes") {
        let src = text[l.span.lo as usize..l.span.hi as usize].trim();
        if src.starts_with('#') {
            continue;
        }
        let s = if l.starts_with_close() && l.ends_with_open() {
            "}, {".to_string()
        } else if l.starts_with_close() {
            "}) : () -> ()".to_string()
        } else if src.starts_with('^') {
            "^bb0:".to_string()
        } else if l.ends_with_open() {
            "\"x.op\"() ({".to_string()
        } else if src.starts_with("gpu.barrier") {
            "gpu.barrier".to_string()
        } else {
            "\"x.op\"() : () -> ()".to_string()
        };
        out.push_str(&s);
        out.push('\n');
    }
    out
}

/// Runs `mlir-opt-22 --allow-unregistered-dialect` on `text`, each of its chunks apart
/// (`--split-input-file`: chunks end at `// -----` lines): its error output when some chunk
/// is rejected.
fn mlir_opt_rejects(text: &str) -> Option<String> {
    let mut child = Command::new("mlir-opt-22")
        .args(["--allow-unregistered-dialect", "--split-input-file", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect(
            "mlir-opt-22 runs (apt-get install --no-install-recommends mlir-22-tools; \
             scripts/test.sh installs it)",
        );
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("writes");
    let o = child.wait_with_output().expect("waits");
    (!o.status.success()).then(|| String::from_utf8_lossy(&o.stderr).into_owned())
}

fn inserted(stats: &str) -> usize {
    let v = stats
        .split("inserted_syncs=")
        .nth(1)
        .expect("inserted_syncs");
    v.chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .expect("count")
}

/// The skeleton check can fail: the annotation smemsync wrote before this fix (a barrier
/// between `({` and `^bb0`) is rejected.
#[test]
fn skeleton_rejects_a_barrier_before_the_entry_label() {
    let bad = "%a = \"tt.reduce\"(%v) <{axis = 0 : i32}> ({\n  gpu.barrier // smemsync\n\
               ^bb0(%x: f32, %y: f32):\n  tt.reduce.return %x : f32\n}) : (f32) -> f32\n";
    let err = mlir_opt_rejects(&skeleton(bad)).expect("rejected");
    assert!(err.contains("terminator"), "{err}");
    assert_eq!(inside_combiners(bad), vec![2]);
    let good = bad.replace("  gpu.barrier // smemsync\n", "");
    assert_eq!(mlir_opt_rejects(&skeleton(&good)), None);
    // Read together (as the corpus test reads its skeletons), one bad chunk among good ones
    // is found.
    let (good, bad) = (skeleton(&good), skeleton(bad));
    assert_eq!(mlir_opt_rejects(&[&*good, &good].join("// -----\n")), None);
    let err = mlir_opt_rejects(&[&*good, &bad, &good].join("// -----\n")).expect("rejected");
    assert!(err.contains("terminator"), "{err}");
}

/// Every corpus kernel: annotations outside combiner regions, a valid block structure, and the
/// round trip. Re-importing inserts exactly the syncs written as notes rather than ops:
/// barriers inside a scratch op (Triton's lowering of the op has them; TTGIR cannot express
/// them) and comments (`// named_sync ...`). `matmul_persistent_fp16` re-inserted one barrier
/// more until branch `idem37` (a second barrier beside an annotated one before the loop's
/// wgmma: the copy complete only at its destination, the barrier just before it not
/// credited; docs/async.md, *A completion on every path*, rule 5); no kernel does now. The
/// kernels are annotated on as many
/// threads as the machine has cores, and `mlir-opt-22` reads all skeletons in one run.
#[test]
fn corpus_annotations_stay_outside_regions_and_round_trip() {
    annotations_stay_outside_regions_and_round_trip(corpus(false), "all");
}

/// The [`SLOW`] corpus kernels, as the test above.
#[test]
#[ignore = "seconds per kernel in the release build; run with --ignored"]
fn slow_corpus_annotations_stay_outside_regions_and_round_trip() {
    annotations_stay_outside_regions_and_round_trip(corpus(true), "slow");
}

fn annotations_stay_outside_regions_and_round_trip(files: Vec<PathBuf>, tag: &str) {
    assert!(!files.is_empty(), "no corpus kernel listed");
    let dir = std::env::temp_dir().join(format!("smemsync-annotate-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut annotated: Vec<(String, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (files, dir) = (&files, &dir);
                s.spawn(move || {
                    (files.iter().skip(w).step_by(workers))
                        .map(|path| annotate_and_round_trip(path, dir))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        (handles.into_iter())
            .flat_map(|h| h.join().expect("a corpus kernel failed (above)"))
            .collect()
    });
    let _ = std::fs::remove_dir_all(&dir);
    annotated.sort();
    assert_eq!(annotated.len(), files.len());
    let skeletons: Vec<String> = annotated.iter().map(|(_, ann)| skeleton(ann)).collect();
    if mlir_opt_rejects(&skeletons.join("// -----\n")).is_some() {
        // Name the kernels whose skeletons are rejected, one run each.
        for ((name, ann), sk) in annotated.iter().zip(&skeletons) {
            if let Some(err) = mlir_opt_rejects(sk) {
                panic!("{name}: the annotated block structure is rejected:\n{err}\n{ann}");
            }
        }
        panic!("the skeletons are rejected together, each accepted alone");
    }
}

/// `sync --annotate` on one corpus kernel: no annotation inside a combiner region, and the
/// round trip (written to `dir`) inserts the syncs noted; the kernel's name and annotated
/// text.
fn annotate_and_round_trip(path: &Path, dir: &Path) -> (String, String) {
    let name = path
        .file_stem()
        .expect("stem")
        .to_string_lossy()
        .into_owned();
    let ann = smemsync(&["sync", "--annotate", path.to_str().expect("utf-8")]);
    assert_eq!(
        inside_combiners(&ann),
        Vec::<usize>::new(),
        "{name}:\n{ann}"
    );
    let notes = ann
        .lines()
        .filter(|l| l.contains("smemsync: inside") || l.trim_start().starts_with("// "))
        .filter(|l| l.contains("// smemsync"))
        .count();
    let file = dir.join(format!("{name}.ttgir"));
    std::fs::write(&file, &ann).expect("write");
    let again = inserted(&smemsync(&[
        "sync",
        "--stats",
        file.to_str().expect("utf-8"),
    ]));
    assert_eq!(again, notes, "{name}: the round trip inserts other syncs");
    (name, ann)
}
