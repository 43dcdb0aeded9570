//! Diagnostics as the CLI writes them: a wrong target, a malformed kernel and a racy kernel each
//! exit with the documented code (2, 2, 1), rendered by annotate-snippets in text and as one
//! JSON object a line with `--format json`; `sync --format json` carries the same facts as
//! `--explain`/`--stats` text (docs/diagnostics.md). JSON is parsed with serde_json, a parser
//! independent of the writer.

use std::process::Command;

use serde_json::Value;

/// Runs the binary; (exit code, stdout, stderr).
fn smemsync(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .output()
        .expect("run smemsync");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every stderr line parsed as one diagnostic.
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn malformed_kernel() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("smemsync-diag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("malformed.kir");
    std::fs::write(&path, "kernel @k() block(4) {\n  %x = frob\n}\n").expect("write");
    path
}

#[test]
fn wrong_target_malformed_and_racy_inputs_exit_as_documented_in_text_and_json() {
    let bad = malformed_kernel();
    let bad = bad.to_str().expect("path");
    let cases: [(&[&str], i32, &str); 3] = [
        (
            &["sync", "--target", "gfx9999", "examples/transpose.kir"],
            2,
            "E0200",
        ),
        (&["fmt", bad], 2, "E0150"),
        (&["check", "examples/transpose.kir"], 1, "C0001"),
    ];
    for (args, code, diag) in cases {
        let (c, _, err) = smemsync(args);
        assert_eq!(c, code, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("error[{diag}]: ")),
            "{args:?}: {err}"
        );
        let mut json_args = args.to_vec();
        json_args.insert(1, "--format=json");
        let (c, _, err) = smemsync(&json_args);
        assert_eq!(c, code, "{json_args:?}: {err}");
        let diags = json_lines(&err);
        assert_eq!(diags.len(), 1, "{err}");
        assert_eq!(diags[0]["code"], diag);
        assert_eq!(diags[0]["severity"], "error");
    }
}

#[test]
fn a_race_in_json_names_both_accesses_with_positions() {
    let (code, _, err) = smemsync(&["check", "--format", "json", "examples/transpose.kir"]);
    assert_eq!(code, 1, "{err}");
    let d = &json_lines(&err)[0];
    assert_eq!(d["kind"], "finding");
    let labels = d["labels"].as_array().expect("labels");
    assert_eq!(labels.len(), 2, "{d}");
    let src = std::fs::read_to_string("examples/transpose.kir").expect("example");
    for (label, primary) in labels.iter().zip([true, false]) {
        assert_eq!(label["primary"], primary);
        assert_eq!(label["file"], "examples/transpose.kir");
        let lo = label["byte_start"].as_u64().expect("byte_start") as usize;
        let hi = label["byte_end"].as_u64().expect("byte_end") as usize;
        let line = label["line"].as_u64().expect("line") as usize;
        // The byte span and the line agree with the file.
        assert_eq!(src[..lo].matches('\n').count() + 1, line);
        assert!(src[lo..hi].contains("@tile"), "{}", &src[lo..hi]);
    }
    assert_ne!(labels[0]["line"], labels[1]["line"]);
}

#[test]
fn malformed_input_on_stdin_is_located_in_json() {
    let bad = malformed_kernel();
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(["check", "--format", "json", bad.to_str().expect("path")])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let d = &json_lines(&err)[0];
    assert_eq!(d["labels"][0]["line"], 2);
    assert_eq!(d["labels"][0]["column"], 8);
    assert_eq!(d["labels"][0]["end_column"], 12);
}

#[test]
fn usage_errors_without_a_location_are_e0010_in_json_and_unchanged_in_text() {
    let (code, _, err) = smemsync(&["check", "--block", "0", "examples/transpose.kir"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error: --block `0`"), "{err}");
    let (code, _, err) = smemsync(&[
        "check",
        "--format",
        "json",
        "--block",
        "0",
        "examples/transpose.kir",
    ]);
    assert_eq!(code, 2);
    let d = &json_lines(&err)[0];
    assert_eq!(d["code"], "E0010");
    assert!(d["labels"].as_array().expect("labels").is_empty());
}

/// The `// stats:` comment of `sync --stats` as (key, value) pairs.
fn text_stats(out: &str) -> Vec<(String, String)> {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("// stats: "))
        .expect("stats line");
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn sync_json_carries_the_text_explain_and_stats() {
    for (file, target) in [
        ("examples/transpose.kir", "gfx942"),
        ("examples/reduction-tree.kir", "gfx942"),
        ("examples/gemm-gather-to-lds.kir", "gfx942"),
    ] {
        let base = ["sync", "--target", target, "--explain", "--stats", file];
        let (code, text, err) = smemsync(&base);
        assert_eq!(code, 0, "{file}: {err}");
        let mut args = base.to_vec();
        args.push("--format=json");
        let (code, json, err) = smemsync(&args);
        assert_eq!(code, 0, "{file}: {err}");
        let doc: Value = serde_json::from_str(&json).expect("one JSON document");
        let k = &doc["kernels"][0];
        let kernel_text = k["text"].as_str().expect("text");
        assert!(text.starts_with(kernel_text), "{file}: text differs");
        for (key, value) in text_stats(&text) {
            let j = &k["stats"][key.as_str()];
            if !j.is_null() {
                assert_eq!(j.to_string(), value, "{file}: stats {key}");
            }
        }
        let syncs = k["syncs"].as_array().expect("syncs");
        for (i, s) in syncs.iter().enumerate() {
            let header = format!(
                "// sync #{i}: {} {}",
                s["op"].as_str().expect("op"),
                s["at"].as_str().expect("at")
            );
            assert!(text.contains(&header), "{file}: no `{header}`");
            for h in s["removes"].as_array().expect("removes") {
                // The example element (`, e.g. …`) may differ from run to run.
                let text_of = h["text"].as_str().expect("text");
                let line = format!("//   {}", text_of.split(", e.g.").next().unwrap_or(text_of));
                assert!(text.contains(&line), "{file}: no `{line}`");
                assert!(
                    h["from"]["line"].is_u64() && h["to"]["line"].is_u64(),
                    "{h}"
                );
            }
        }
        let waits = k["waits"].as_array().expect("waits");
        assert_eq!(waits.len(), text.matches("// wait #").count(), "{file}");
        let written = k["stats"]["barriers_written"]
            .as_u64()
            .expect("barriers_written")
            + k["stats"]["warp_syncs_written"]
                .as_u64()
                .expect("warp_syncs_written");
        assert_eq!(
            written,
            syncs.len() as u64,
            "{file}: one sync entry per inserted sync"
        );
        assert!(!syncs.is_empty(), "{file}: the example needs a sync");
    }
}
