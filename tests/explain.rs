//! `smemsync explain`: the report (text and JSON), the timeline SVG and the HTML page.
//!
//! The SVG is snapshot-tested (insta) on kernels that show each element (a loop-carried RAW,
//! warp syncs, a split barrier, async copies), parsed as XML (roxmltree) for every example,
//! and checked geometrically: every sync line crosses the interval of every hazard it claims
//! to remove. The HTML page is loaded by a real headless Chromium (`chromium`, installed by
//! scripts/test.sh), which steps through every sync and hazard (`#step-all`) and must log no
//! error and leave a screenshot. Every kernel explained here is also synchronized with
//! `smemsync sync` and re-proved by `smemsync check` (the independent checker).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn smemsync(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("writes stdin");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("finishes");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smemsync-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

/// The synchronized kernel is race-free by the independent checker (run with the values of
/// the file's `// PARAMS:` line, as the GPU tests run it).
fn recheck(target: &str, file: &str) {
    let (code, out, err) = smemsync(&["sync", "--target", target, file], None);
    assert_eq!(code, 0, "sync {file}: {err}");
    let src = std::fs::read_to_string(root().join(file)).expect("file");
    let params: Vec<String> = src
        .lines()
        .filter_map(|l| l.strip_prefix("// PARAMS: "))
        .flat_map(|p| p.split_whitespace().map(|x| format!("--bounds={x}")))
        .collect();
    let mut args = vec!["check", "--target", target];
    args.extend(params.iter().map(String::as_str));
    args.push("-");
    let (code, out, err) = smemsync(&args, Some(&out));
    assert_eq!(code, 0, "check after sync {file}: {out}{err}");
    assert!(out.contains("race-free"), "{out}");
}

/// `explain --svg` of `file` for `target`, after re-checking its synchronization.
fn svg_of(target: &str, file: &str) -> String {
    recheck(target, file);
    let stem = Path::new(file).file_stem().unwrap().to_string_lossy();
    let path = tmp(&format!("{stem}-{target}.svg"));
    let p = path.to_string_lossy();
    let (code, _, err) = smemsync(&["explain", "--target", target, "--svg", &p, file], None);
    assert_eq!(code, 0, "explain {file}: {err}");
    std::fs::read_to_string(&path).expect("svg written")
}

/// (target, example) pairs: every example on a target that has its ops.
fn examples() -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> = (common::kernel_files(&["examples"]).into_iter())
        .map(|p| {
            let src = std::fs::read_to_string(&p).expect("example");
            let target = common::example_target(&src);
            let rel = p
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (target, rel)
        })
        .collect();
    v.sort();
    v.push(("sm_80", "benches/gpu/gemm128.kir".into()));
    v.push(("gfx1201", "examples/prefix-scan.kir".into()));
    v
}

fn num(n: roxmltree::Node, a: &str) -> f64 {
    n.attribute(a)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{a} of {:?}", n.tag_name().name()))
}

/// Parses the SVG and checks that every sync line crosses, at its own y, a vertical
/// interval of every hazard lane it lists; returns the number of syncs drawn.
fn check_svg(svg: &str, what: &str) -> usize {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{what}: {e}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg", "{what}");
    let lanes: Vec<roxmltree::Node> = doc
        .descendants()
        .filter(|n| n.attribute("data-hazard").is_some() && n.tag_name().name() == "g")
        .collect();
    let mut syncs = 0;
    for g in doc
        .descendants()
        .filter(|n| n.attribute("data-sync").is_some())
    {
        syncs += 1;
        let line = g
            .children()
            .find(|c| {
                c.tag_name().name() == "line"
                    && matches!(c.attribute("class"), Some("bar" | "wait"))
            })
            .unwrap_or_else(|| panic!("{what}: sync without its line"));
        let y = num(line, "y1");
        let (x0, x1) = (num(line, "x1"), num(line, "x2"));
        let hs: Vec<&str> = g
            .attribute("data-hazards")
            .unwrap_or("")
            .split_whitespace()
            .collect();
        for h in hs {
            let lane = lanes
                .iter()
                .find(|l| {
                    l.attribute("data-hazard")
                        .unwrap()
                        .split_whitespace()
                        .any(|x| x == h)
                })
                .unwrap_or_else(|| panic!("{what}: sync lists hazard {h} that is not drawn"));
            let crossed = lane
                .children()
                .filter(|c| c.tag_name().name() == "line")
                .any(|l| {
                    let (a, b) = (num(l, "y1"), num(l, "y2"));
                    let x = num(l, "x1");
                    a.min(b) <= y && y <= a.max(b) && x0 <= x && x <= x1
                });
            assert!(
                crossed,
                "{what}: the line of sync {:?} misses hazard {h}",
                g.attribute("data-sync")
            );
        }
    }
    syncs
}

#[test]
fn every_example_draws_a_well_formed_svg_whose_syncs_stab_their_hazards() {
    for (target, file) in examples() {
        let svg = svg_of(target, &file);
        let drawn = check_svg(&svg, &file);
        let (_, json, err) = smemsync(
            &["explain", "--format", "json", "--target", target, &file],
            None,
        );
        let doc: serde_json::Value =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{file}: {e}\n{err}"));
        let syncs = doc["kernels"][0]["syncs"].as_array().expect("syncs").len();
        let placed = doc["kernels"][0]["syncs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !s["output_line"].is_null())
            .count();
        assert_eq!(
            placed, syncs,
            "{file}: every inserted sync has its output line"
        );
        assert_eq!(drawn, syncs, "{file}: one drawn sync per inserted sync");
    }
}

#[test]
fn the_json_report_is_consistent_with_itself_and_the_output() {
    for (target, file) in examples() {
        let (code, json, err) = smemsync(
            &["explain", "--format", "json", "--target", target, &file],
            None,
        );
        assert_eq!(code, 0, "{file}: {err}");
        let doc: serde_json::Value = serde_json::from_str(&json).expect("json");
        for k in doc["kernels"].as_array().unwrap() {
            let output: Vec<&str> = k["output"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap())
                .collect();
            let hazards = k["hazards"].as_array().unwrap();
            for (i, s) in k["syncs"].as_array().unwrap().iter().enumerate() {
                let line = s["output_line"].as_u64().expect("placed") as usize;
                let text = output[line - 1].trim();
                let op = s["op"].as_str().unwrap();
                assert_eq!(text, op, "{file}: sync #{i} is on output line {line}");
                for h in s["removes"].as_array().unwrap() {
                    let id = h.as_str().unwrap();
                    let hz = hazards
                        .iter()
                        .find(|x| x["id"] == *id)
                        .expect("listed hazard exists");
                    let by: Vec<u64> = hz["removed_by"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap())
                        .collect();
                    assert!(
                        by.contains(&(i as u64)),
                        "{file}: {id} removed by sync #{i}"
                    );
                }
            }
            for hz in hazards {
                // A hazard is removed by an inserted sync or by one of the input's.
                let by = hz["removed_by"].as_array().unwrap();
                assert!(
                    !by.is_empty() || hz["existing"] == true,
                    "{file}: {hz} is removed by nothing"
                );
            }
        }
    }
}

#[test]
fn the_text_report_explains_the_reduction_tree() {
    recheck("gfx942", "examples/reduction-tree.kir");
    let (code, out, err) = smemsync(
        &[
            "explain",
            "--target",
            "gfx942",
            "examples/reduction-tree.kir",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    // The listing numbers the output; the barrier's line is the one it names.
    let line = out
        .lines()
        .find(|l| l.starts_with("sync #0: barrier (output line "))
        .expect("sync #0");
    let n: usize = line["sync #0: barrier (output line ".len()..]
        .split(')')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let listed = out
        .lines()
        .find(|l| l.starts_with(&format!("{n:>4} | ")))
        .unwrap();
    assert!(listed.contains("barrier"), "{listed}");
    assert!(out.contains("executes 8 times per block"), "{out}");
    assert!(
        out.contains("would execute once instead of 8 times but leaves H1"),
        "{out}"
    );
    assert!(
        out.contains("carried by `for %i = 0 to 8 step 1` (input line 13) at iteration distance 1")
    );
    assert!(out.contains("e.g. @s["), "{out}");
    // Thread 0 reads back its own element; `load @s[%u]` and the next iteration's stores never meet.
    assert!(out.contains("same thread: @s `store @s[%t], %x` (input line 12) -> `%r = load @s[0]` (input line 26)"), "{out}");
    assert!(out.contains("disjoint elements: @s `%c = load @s[%u]` (input line 19) -> `store @s[%t], %sum` (input line 21)"), "{out}");
}

#[test]
fn sync_explain_names_an_inserted_wait_by_its_output_line_and_each_hazard_once() {
    // gemm-gather-to-lds without its wait: smemsync inserts one, and the hazards that its
    // copies make visible there must cite the wait's line in the output, not line 1.
    let src = std::fs::read_to_string(root().join("examples/gemm-gather-to-lds.kir")).unwrap();
    let without: String = src
        .lines()
        .filter(|l| l.trim() != "waitcnt vmcnt(0)")
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without, src);
    let (code, out, err) = smemsync(
        &["sync", "--target", "gfx942", "--explain", "-"],
        Some(&without),
    );
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("(line 1)"), "{out}");
    let cited = out
        .split("`waitcnt vmcnt(0)` (inserted, output line ")
        .nth(1)
        .expect("cited by output line");
    let n: usize = cited.split(')').next().unwrap().parse().unwrap();
    assert_eq!(
        out.lines().nth(n - 1).map(str::trim),
        Some("waitcnt vmcnt(0)"),
        "{out}"
    );
    // No hazard line is written twice.
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("//   RAW") || l.starts_with("//   WAR"))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for l in &lines {
        assert!(seen.insert(*l), "written twice: {l}");
    }
    assert!(out.contains("hazard(s) listed under sync #0"), "{out}");
}

#[test]
fn an_aliased_pinned_hazard_names_both_buffers() {
    let file = "tests/filetests/smem-reuse/e1-simple-case-block-reduction.kir";
    let (code, out, err) = smemsync(
        &[
            "sync",
            "--plan-smem",
            "--target",
            "sm_80",
            "--explain",
            file,
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("WAR @A (aliased by @B) `%a = load @A[%i]`"),
        "{out}"
    );
    let (code, out, err) = smemsync(&["check", "--target", "sm_80", "-"], Some(&out));
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn svg_snapshots() {
    for (name, target, file) in [
        ("reduction_tree", "gfx942", "examples/reduction-tree.kir"),
        (
            "softmax_row_warp_syncs",
            "gfx942",
            "examples/softmax-row.kir",
        ),
        ("prefix_scan_split", "gfx1201", "examples/prefix-scan.kir"),
        (
            "cp_async_double_buffer",
            "sm_80",
            "examples/gemm-cp-async-double-buffer.kir",
        ),
    ] {
        insta::assert_snapshot!(name, svg_of(target, file));
    }
}

#[test]
fn svg_of_a_file_with_two_kernels_needs_a_kernel_name() {
    let two = format!(
        "{}\n{}",
        std::fs::read_to_string(root().join("examples/transpose.kir")).unwrap(),
        std::fs::read_to_string(root().join("examples/reduction-tree.kir")).unwrap()
    );
    let path = tmp("two.svg");
    let p = path.to_string_lossy();
    let (code, _, err) = smemsync(
        &["explain", "--target", "gfx942", "--svg", &p, "-"],
        Some(&two),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("E1200"), "{err}");
    let (code, _, err) = smemsync(
        &[
            "explain", "--target", "gfx942", "--svg", &p, "--kernel", "nope", "-",
        ],
        Some(&two),
    );
    assert_eq!(code, 2);
    assert!(err.contains("E1201"), "{err}");
    let (code, _, err) = smemsync(
        &[
            "explain", "--target", "gfx942", "--svg", &p, "--kernel", "reduce", "-",
        ],
        Some(&two),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("@reduce on gfx942")
    );
}

/// Loads the HTML report in headless Chromium with a recorder of script errors injected
/// first; `#step-all` makes the page step through every sync and hazard.
#[test]
fn the_html_report_runs_in_headless_chromium_without_errors() {
    for (target, file) in [
        ("gfx942", "examples/softmax-row.kir"),
        ("sm_80", "benches/gpu/gemm128.kir"),
    ] {
        recheck(target, file);
        let stem = Path::new(file)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let html = tmp(&format!("{stem}.html"));
        let h = html.to_string_lossy().into_owned();
        let (code, _, err) = smemsync(&["explain", "--target", target, "--html", &h, file], None);
        assert_eq!(code, 0, "{err}");
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(
            !page.contains("http://") && !page.contains("https://") || !page.contains("src=\"http"),
            "no network"
        );
        assert!(!page.contains("<link"), "self-contained");
        let recorder = "<script>window.__errors=[];window.addEventListener('error',function(e){document.documentElement.setAttribute('data-errors',(document.documentElement.getAttribute('data-errors')||'')+e.message+';');});</script>";
        let probed = page.replacen("<head>", &format!("<head>{recorder}"), 1);
        let probe = tmp(&format!("{stem}-probe.html"));
        std::fs::write(&probe, probed).unwrap();
        let url = format!("file://{}#step-all", probe.to_string_lossy());
        let shot = tmp(&format!("{stem}.png"));
        let chrome = |extra: &[&str]| {
            let mut args = vec![
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                // Containers often give /dev/shm 64 MiB, which Chromium can exhaust.
                "--disable-dev-shm-usage",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1400,1000",
            ];
            args.extend_from_slice(extra);
            args.push(&url);
            Command::new("chromium")
                .args(&args)
                .output()
                .expect("chromium runs (scripts/test.sh installs it)")
        };
        let shot_arg = format!("--screenshot={}", shot.to_string_lossy());
        let out = chrome(&[&shot_arg]);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        let png = std::fs::read(&shot).expect("screenshot written");
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "a real screenshot"
        );
        for line in log.lines().filter(|l| l.contains("CONSOLE")) {
            assert!(
                !line.contains("Uncaught") && !line.contains("Error"),
                "console: {line}"
            );
        }
        let dom = chrome(&["--dump-dom"]);
        let dom = String::from_utf8_lossy(&dom.stdout);
        assert!(
            dom.contains("data-stepped=\"yes\""),
            "the script ran to its end"
        );
        assert!(!dom.contains("data-errors="), "script errors: {dom}");
    }
}

#[test]
fn the_readme_picture_is_what_explain_draws_today() {
    let committed = std::fs::read_to_string(root().join("docs/img/explain-reduction-tree.svg"))
        .expect("docs/img/explain-reduction-tree.svg");
    let now = svg_of("gfx942", "examples/reduction-tree.kir");
    assert!(
        committed == now,
        "regenerate it: smemsync explain --target gfx942 --svg docs/img/explain-reduction-tree.svg examples/reduction-tree.kir"
    );
}

/// Every barrier `sync` places is explained: `sync --explain` writes one `// sync #i` line
/// per inserted barrier, warp sync or named barrier, naming its op and at least one hazard,
/// and `explain --format json` lists at least one removed hazard per sync; a role barrier's
/// hazards (no element, no threads) say which rule they come from.
#[test]
fn every_placed_barrier_is_explained_the_role_barrier_included() {
    let role = "tests/filetests/placement/an-election-nested-in-two-ifs-gets-the-role-barrier.kir";
    let mut files: Vec<(&str, String)> = examples();
    // Split-barrier targets (gfx12) write a signal and a wait per sync: the SVG test above
    // counts those.
    files.retain(|(t, _)| !t.starts_with("gfx12"));
    files.push(("sm_90", role.to_string()));
    for (t, file) in &files {
        let (t, file) = (*t, file.as_str());
        let (code, out, err) = smemsync(&["sync", "--target", t, file], None);
        if code != 0 {
            continue;
        }
        let placed = |text: &str| {
            (text.lines().map(str::trim))
                .filter(|l| *l == "barrier" || *l == "warp_sync" || l.starts_with("named_sync "))
                .count()
        };
        let input = std::fs::read_to_string(root().join(file)).unwrap();
        let inserted = placed(&out) - placed(&input);
        let (_, text, _) = smemsync(&["sync", "--target", t, "--explain", file], None);
        let headers: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("// sync #"))
            .collect();
        assert_eq!(headers.len(), inserted, "{file}: {err}\n{text}");
        for h in &headers {
            assert!(!h.ends_with(" removes 0 hazard(s)"), "{file}: {h}");
        }
        let (_, json, _) = smemsync(&["explain", "--target", t, "--format", "json", file], None);
        let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        let k = &doc["kernels"][0];
        let syncs = k["syncs"].as_array().expect("syncs");
        assert_eq!(syncs.len(), inserted, "{file}");
        for s in syncs {
            assert!(!s["removes"].as_array().unwrap().is_empty(), "{file}: {s}");
        }
        if file == role {
            assert!(text.contains("// sync #0: named_sync 1, 64 "), "{text}");
            assert_eq!(text.matches("(role barrier: ").count(), 4, "{text}");
            let rules = k["hazards"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|h| h["rule"].is_string());
            assert_eq!(rules.count(), 4, "{json}");
        }
    }
}
