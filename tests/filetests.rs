//! File tests: every `tests/filetests/**/*.kir` file is one test case, named by its path under
//! `tests/filetests/` (`cargo test --test filetests -- check/race-in-loop.kir` runs one;
//! `--list` lists them). Each file names the commands to run on itself and what their output
//! must contain, in LLVM's lit/FileCheck conventions.
//!
//! Directives (each in a `//` comment):
//! - `RUN: smemsync <args> %s` — a command; `%s` is the file, `smemsync` the built binary, and
//!   `|` pipes one command's stdout into the next. Several RUN lines run in order and their
//!   outputs are concatenated.
//! - `EXIT: N` — the expected exit code of the last command of the last RUN line (default 0).
//! - `CHECK…` lines are checked against stdout by LLVM's own `FileCheck-22` (prefix `CHECK`):
//!   its full syntax (`CHECK-NEXT`, `-SAME`, `-NOT`, `-LABEL`, `-COUNT-n`, `-DAG`, `{{regex}}`,
//!   `[[VAR:...]]`), whitespace runs collapsed. Literal `{{` or `[[` in a pattern is written
//!   `{{\{\{}}` or `{{\[\[}}`.
//! - `CHECK-ERR…` lines are checked against stderr the same way (prefix `CHECK-ERR`).
//! - `DIAG@+N: text` — a diagnostic whose primary location is N lines below this one
//!   (`@-N` above, `@0` this line) and whose text contains `text` is printed on stderr.
//!
//! FileCheck-22 comes with llvm-22-tools (`scripts/test.sh` installs it); `FILECHECK=path`
//! names another binary. There is no bless mode: a CHECK line is an assertion written by hand
//! (expected CUDA output, which is regenerated, lives in `tests/cuda.rs` under insta). A
//! failure prints the command, FileCheck's annotated input dump and the whole output.
//!
//! Cost: one process per command plus one FileCheck per checked stream; the cases run in
//! parallel on the harness's threads. A command that a file's RUN lines repeat on the same
//! input (`smemsync sync %s`, then `smemsync sync %s | smemsync check -`) runs once and its
//! stdout, stderr and exit code are reused: the RUN lines' commands are deterministic and
//! write no files the next ones read.

use std::path::Path;
use std::process::{Command, Stdio};

use libtest_mimic::{Arguments, Failed, Trial};

mod common;

/// The directives of one file test that this harness interprets itself.
struct Spec {
    runs: Vec<String>,
    exit: i32,
    /// Whether FileCheck has anything to check on stdout (prefix CHECK) and stderr (CHECK-ERR).
    checks_out: bool,
    checks_err: bool,
    diags: Vec<(usize, String)>,
}

/// Whether `d` (a comment's text) is a FileCheck directive of `prefix`: `PREFIX:` or
/// `PREFIX-SUFFIX:` with a suffix FileCheck knows.
fn is_directive(d: &str, prefix: &str) -> bool {
    let Some(rest) = d.strip_prefix(prefix) else {
        return false;
    };
    let suffix = rest.split(':').next().unwrap_or("");
    rest.contains(':')
        && (suffix.is_empty()
            || ["-NEXT", "-SAME", "-NOT", "-LABEL", "-DAG", "-EMPTY"].contains(&suffix)
            || suffix
                .strip_prefix("-COUNT-")
                .is_some_and(|n| n.parse::<u32>().is_ok()))
}

fn parse_spec(text: &str) -> Result<Spec, String> {
    let mut s = Spec {
        runs: vec![],
        exit: 0,
        checks_out: false,
        checks_err: false,
        diags: vec![],
    };
    for (i, raw) in text.lines().enumerate() {
        let Some(pos) = raw.find("//") else { continue };
        let d = raw[pos + 2..].trim();
        if let Some(r) = d.strip_prefix("RUN:") {
            s.runs.push(r.trim().to_string());
        } else if let Some(r) = d.strip_prefix("EXIT:") {
            s.exit = r
                .trim()
                .parse()
                .map_err(|_| format!("bad EXIT on line {}", i + 1))?;
        } else if let Some(rest) = d.strip_prefix("DIAG@") {
            let (off, r) = rest
                .split_once(':')
                .ok_or_else(|| format!("bad DIAG on line {}", i + 1))?;
            let off: i64 = off
                .trim()
                .parse()
                .map_err(|_| format!("bad DIAG offset on line {}", i + 1))?;
            s.diags
                .push(((i as i64 + 1 + off) as usize, r.trim().to_string()));
        } else if is_directive(d, "CHECK-ERR") {
            s.checks_err = true;
        } else if is_directive(d, "CHECK") {
            s.checks_out = true;
        }
    }
    Ok(s)
}

/// What one command of a RUN line gave: stdout, stderr and exit code.
type Ran = (Vec<u8>, String, i32);

/// The commands a file's RUN lines already ran, by their words and standard input: a command
/// a file runs again on the same input (`smemsync sync %s` alone and piped into `check`) is
/// answered from here. Exact: smemsync and the tools are deterministic, and the answer kept is
/// the whole of what the command gave (stdout, stderr, exit code).
type Memo = std::collections::HashMap<(Vec<String>, Option<Vec<u8>>), Ran>;

/// Runs one RUN line (a pipeline); returns (stdout, stderr, exit code of the last command).
fn run_line(line: &str, file: &Path, ran: &mut Memo) -> Result<(String, String, i32), String> {
    let mut input: Option<Vec<u8>> = None;
    let mut stderr_all = String::new();
    let mut code = 0;
    for part in line.split('|') {
        let words: Vec<String> = part
            .split_whitespace()
            .map(|w| w.replace("%s", &file.to_string_lossy()))
            .collect();
        let key = (words, input.take());
        let (out, err, c) = match ran.get(&key) {
            Some(r) => r.clone(),
            None => {
                let r = run_command(&key.0, key.1.clone())?;
                ran.insert(key, r.clone());
                r
            }
        };
        stderr_all.push_str(&err);
        code = c;
        input = Some(out);
    }
    Ok((
        String::from_utf8_lossy(&input.unwrap_or_default()).into_owned(),
        stderr_all,
        code,
    ))
}

/// Runs one command of a RUN line (`smemsync` is the built binary) with `input` on its
/// standard input (none: it reads nothing).
fn run_command(words: &[String], input: Option<Vec<u8>>) -> Result<Ran, String> {
    let bin = env!("CARGO_BIN_EXE_smemsync");
    let Some(first) = words.first() else {
        return Err("empty command in a RUN line".into());
    };
    let prog = if first == "smemsync" {
        bin.to_string()
    } else {
        first.clone()
    };
    let mut child = Command::new(&prog)
        .args(&words[1..])
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run `{prog}`: {e}"))?;
    if let Some(data) = input {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped stdin");
        std::thread::spawn(move || {
            let _ = stdin.write_all(&data);
        });
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    Ok((
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    ))
}

/// The FileCheck binary: `$FILECHECK`, else `FileCheck-22`.
fn filecheck_bin() -> String {
    std::env::var("FILECHECK").unwrap_or_else(|_| "FileCheck-22".into())
}

/// Runs FileCheck with the directives of `check_file` under `prefix` against `input`;
/// on a mismatch, FileCheck's report (with its annotated dump of the input).
fn file_check(check_file: &Path, prefix: &str, input: &str) -> Result<(), String> {
    let mut child = Command::new(filecheck_bin())
        .arg(check_file)
        .arg(format!("--check-prefix={prefix}"))
        .args(["--allow-empty", "--dump-input=fail", "--color=false"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot run `{}` ({e}): install llvm-22-tools (scripts/test.sh does) or set FILECHECK",
                filecheck_bin()
            )
        })?;
    let data = input.as_bytes().to_vec();
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let _ = writer.join();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "FileCheck --check-prefix={prefix} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Whether `stderr` holds a diagnostic containing `text` whose primary location is `line`:
/// in the same blank-line-separated block as the `-->` line naming it, or anywhere when the
/// `-->` line and the text are apart.
fn has_diag(stderr: &str, line: usize, text: &str) -> bool {
    let loc = format!(":{line}:");
    stderr
        .split("\n\n")
        .any(|d| d.contains(text) && d.contains(&loc))
        || stderr.contains(text)
            && stderr
                .lines()
                .any(|l| l.contains("-->") && l.contains(&loc))
}

fn run_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let spec = parse_spec(&text)?;
    if spec.runs.is_empty() {
        return Err("no RUN line".into());
    }
    let (mut stdout, mut stderr, mut code) = (String::new(), String::new(), 0);
    let mut ran = Memo::new();
    for r in &spec.runs {
        let (o, e, c) = run_line(r, path, &mut ran).map_err(|e| format!("RUN: {r}: {e}"))?;
        stdout.push_str(&o);
        stderr.push_str(&e);
        code = c;
    }
    let show = || format!("\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    if code != spec.exit {
        return Err(format!(
            "exit code {code}, expected {}{}",
            spec.exit,
            show()
        ));
    }
    if spec.checks_out {
        file_check(path, "CHECK", &stdout).map_err(|e| format!("stdout: {e}{}", show()))?;
    }
    if spec.checks_err {
        file_check(path, "CHECK-ERR", &stderr).map_err(|e| format!("stderr: {e}{}", show()))?;
    }
    for (line, t) in &spec.diags {
        if !has_diag(&stderr, *line, t) {
            return Err(format!(
                "DIAG: no diagnostic `{t}` at line {line}{}",
                show()
            ));
        }
    }
    Ok(())
}

/// The harness itself holds FileCheck's semantics, not an imitation: CHECK-LABEL splits the
/// input into blocks that the checks between labels may not leave, CHECK-NOT covers the range
/// between its neighbours, and `{{regex}}` is a regex.
fn filecheck_semantics() -> Result<(), Failed> {
    let dir = std::env::temp_dir().join(format!("smemsync-filecheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let check = |checks: &str, input: &str| -> bool {
        let f = dir.join("c.kir");
        std::fs::write(&f, checks).expect("write checks");
        file_check(&f, "CHECK", input).is_ok()
    };
    let input = "@a:\n  load\n@b:\n  barrier\n  store 12\n";
    let label = "// CHECK-LABEL: @a:\n// CHECK: barrier\n// CHECK-LABEL: @b:\n";
    let cases = [
        // `barrier` is not in @a's block: a substring matcher would accept it.
        (label, false),
        ("// CHECK-LABEL: @b:\n// CHECK: barrier\n", true),
        (
            "// CHECK: @a:\n// CHECK-NOT: barrier\n// CHECK: @b:\n",
            true,
        ),
        (
            "// CHECK: @a:\n// CHECK-NOT: barrier\n// CHECK: store\n",
            false,
        ),
        ("// CHECK: store {{[0-9]+}}\n", true),
        (
            "// CHECK: load\n// CHECK-NEXT: @b:\n// CHECK-SAME: {{^}}\n",
            true,
        ),
        ("// CHECK-COUNT-2: @\n// CHECK-NOT: @\n", true),
    ];
    for (checks, want) in cases {
        if check(checks, input) != want {
            return Err(format!("FileCheck gave {} for\n{checks}", !want).into());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Invalid UTF-8 cannot live in a `.kir` file test (the harness reads text): the CLI must
/// refuse it with exit 2 and the line, column and byte of the first bad byte.
fn invalid_utf8_input_is_located() -> Result<(), Failed> {
    let dir = std::env::temp_dir().join(format!("smemsync-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join("latin1.kir");
    std::fs::write(&path, b"kernel @k() block(4) {\n // caf\xe9\n}\n")
        .map_err(|e| e.to_string())?;
    for cmd in ["fmt", "check"] {
        let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
            .arg(cmd)
            .arg(&path)
            .output()
            .map_err(|e| e.to_string())?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(2) || !err.contains("latin1.kir:2:8: invalid UTF-8 at byte 30")
        {
            return Err(format!("{cmd}: exit {:?}: {err}", out.status.code()).into());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut all = common::kernel_files_under(&["tests/filetests"]);
    assert!(!all.is_empty(), "no file tests under {}", root.display());
    // The harness's threads take the cases in order: the largest files (the imported Triton
    // kernels, the slowest cases) first, so that none of them starts last and runs alone.
    all.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map_or(0, |m| m.len())));
    let mut trials: Vec<Trial> = all
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            Trial::test(name, move || run_file(&path).map_err(Failed::from))
        })
        .collect();
    trials.push(Trial::test(
        "harness::filecheck_semantics",
        filecheck_semantics,
    ));
    trials.push(Trial::test(
        "harness::invalid_utf8_input_is_located",
        invalid_utf8_input_is_located,
    ));
    libtest_mimic::run(&args, trials).exit();
}
