//! File tests: every `tests/filetests/**/*.kir` file names the commands to run on itself and
//! what their output must contain, in LLVM FileCheck's conventions.
//!
//! Directives (each in a `//` comment):
//! - `RUN: smemsync <args> %s` — a command; `%s` is the file, `smemsync` the built binary, and
//!   `|` pipes one command's stdout into the next. Several RUN lines run in order and their
//!   outputs are concatenated.
//! - `EXIT: N` — the expected exit code of the last command of the last RUN line (default 0).
//! - `CHECK: text`, `CHECK-NEXT:`, `CHECK-SAME:`, `CHECK-NOT:`, `CHECK-LABEL:`,
//!   `CHECK-COUNT-n:` — match stdout line by line (substring match, runs of whitespace
//!   collapsed), with FileCheck's meaning.
//! - `CHECK-ERR: text` — like CHECK, against stderr.
//! - `DIAG@+N: text` — a diagnostic whose primary location is N lines below this one
//!   (`@-N` above, `@0` this line) and whose text contains `text` is printed on stderr.
//!
//! A failure prints the file, the directive and the whole output.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "kir") {
            out.push(p);
        }
    }
}

#[derive(Debug)]
enum Check {
    Plain(String),
    Next(String),
    Same(String),
    Not(String),
    Count(usize, String),
}

fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Matches FileCheck-style directives against `output`; returns an error message on failure.
fn file_check(checks: &[Check], output: &str) -> Result<(), String> {
    let lines: Vec<String> = output.lines().map(norm).collect();
    // cursor: (line index, column) just after the previous match.
    let mut line = 0usize;
    let mut col = 0usize;
    let mut matched_any = false;
    let mut pending_not: Vec<&str> = Vec::new();
    let find_from = |pat: &str, from_line: usize, from_col: usize| -> Option<(usize, usize)> {
        for (i, l) in lines.iter().enumerate().skip(from_line) {
            let start = if i == from_line {
                from_col.min(l.len())
            } else {
                0
            };
            if let Some(p) = l[start..].find(pat) {
                return Some((i, start + p + pat.len()));
            }
        }
        None
    };
    let check_nots =
        |nots: &mut Vec<&str>, from: (usize, usize), to: (usize, usize)| -> Result<(), String> {
            for n in nots.drain(..) {
                for i in from.0..=to.0.min(lines.len().saturating_sub(1)) {
                    if lines.is_empty() {
                        break;
                    }
                    let l = &lines[i];
                    let lo = if i == from.0 { from.1.min(l.len()) } else { 0 };
                    let hi = if i == to.0 {
                        to.1.min(l.len()).max(lo)
                    } else {
                        l.len()
                    };
                    if l[lo..hi].contains(n) {
                        return Err(format!("CHECK-NOT: `{n}` found on output line {}", i + 1));
                    }
                }
            }
            Ok(())
        };
    for c in checks {
        match c {
            Check::Not(p) => pending_not.push(p),
            Check::Plain(p) => {
                let p = norm(p);
                let Some((l, cc)) = find_from(&p, line, col) else {
                    return Err(format!(
                        "CHECK: `{p}` not found after output line {}",
                        line + 1
                    ));
                };
                check_nots(&mut pending_not, (line, col), (l, cc - p.len()))?;
                line = l;
                col = cc;
                matched_any = true;
            }
            Check::Next(p) => {
                let p = norm(p);
                let next = if matched_any { line + 1 } else { 0 };
                match lines.get(next) {
                    Some(l) if l.contains(&p) => {
                        check_nots(
                            &mut pending_not,
                            (line, col),
                            (next, l.find(&p).unwrap_or(0)),
                        )?;
                        line = next;
                        col = l.find(&p).unwrap_or(0) + p.len();
                        matched_any = true;
                    }
                    other => {
                        return Err(format!(
                            "CHECK-NEXT: `{p}` expected on output line {}, found `{}`",
                            next + 1,
                            other.map_or("<end of output>", |s| s.as_str())
                        ));
                    }
                }
            }
            Check::Same(p) => {
                let p = norm(p);
                let l = lines.get(line).map_or("", |s| s.as_str());
                match l.get(col..).and_then(|rest| rest.find(&p)) {
                    Some(off) => col += off + p.len(),
                    None => {
                        return Err(format!("CHECK-SAME: `{p}` not on output line {}", line + 1));
                    }
                }
            }
            Check::Count(n, p) => {
                let p = norm(p);
                for k in 0..*n {
                    let Some((l, cc)) = find_from(&p, line, col) else {
                        return Err(format!("CHECK-COUNT-{n}: only {k} of `{p}` found"));
                    };
                    line = l;
                    col = cc;
                }
                matched_any = true;
            }
        }
    }
    let end = (
        lines.len().saturating_sub(1),
        lines.last().map_or(0, |l| l.len()),
    );
    check_nots(&mut pending_not, (line, col), end)?;
    Ok(())
}

struct Spec {
    runs: Vec<String>,
    exit: i32,
    out: Vec<Check>,
    err: Vec<Check>,
    diags: Vec<(usize, String)>,
}

fn parse_spec(text: &str) -> Spec {
    let mut s = Spec {
        runs: vec![],
        exit: 0,
        out: vec![],
        err: vec![],
        diags: vec![],
    };
    for (i, raw) in text.lines().enumerate() {
        let Some(pos) = raw.find("//") else { continue };
        let d = raw[pos + 2..].trim();
        let after = |k: &str| d.strip_prefix(k).map(|r| r.trim().to_string());
        if let Some(r) = after("RUN:") {
            s.runs.push(r);
        } else if let Some(r) = after("EXIT:") {
            s.exit = r
                .parse()
                .unwrap_or_else(|_| panic!("bad EXIT line {}", i + 1));
        } else if let Some(r) = after("CHECK-NEXT:") {
            s.out.push(Check::Next(r));
        } else if let Some(r) = after("CHECK-SAME:") {
            s.out.push(Check::Same(r));
        } else if let Some(r) = after("CHECK-NOT:") {
            s.out.push(Check::Not(r));
        } else if let Some(r) = after("CHECK-LABEL:") {
            s.out.push(Check::Plain(r));
        } else if let Some(r) = after("CHECK-ERR:") {
            s.err.push(Check::Plain(r));
        } else if let Some(r) = after("CHECK-ERR-NOT:") {
            s.err.push(Check::Not(r));
        } else if let Some(rest) = d.strip_prefix("CHECK-COUNT-") {
            let (n, r) = rest
                .split_once(':')
                .unwrap_or_else(|| panic!("bad CHECK-COUNT line {}", i + 1));
            s.out.push(Check::Count(
                n.trim().parse().expect("count"),
                r.trim().to_string(),
            ));
        } else if let Some(r) = after("CHECK:") {
            s.out.push(Check::Plain(r));
        } else if let Some(rest) = d.strip_prefix("DIAG@") {
            let (off, r) = rest
                .split_once(':')
                .unwrap_or_else(|| panic!("bad DIAG line {}", i + 1));
            let off: i64 = off.trim().parse().expect("DIAG offset");
            s.diags
                .push(((i as i64 + 1 + off) as usize, r.trim().to_string()));
        }
    }
    s
}

/// Runs one RUN line (a pipeline); returns (stdout, stderr, exit code of the last command).
fn run_line(line: &str, file: &Path) -> (String, String, i32) {
    let bin = env!("CARGO_BIN_EXE_smemsync");
    let mut input: Option<Vec<u8>> = None;
    let mut stderr_all = String::new();
    let mut code = 0;
    for part in line.split('|') {
        let words: Vec<String> = part
            .split_whitespace()
            .map(|w| w.replace("%s", &file.to_string_lossy()))
            .collect();
        assert!(
            !words.is_empty(),
            "empty command in RUN line of {}",
            file.display()
        );
        let prog = if words[0] == "smemsync" {
            bin.to_string()
        } else {
            words[0].clone()
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
            .unwrap_or_else(|e| panic!("cannot run `{prog}` for {}: {e}", file.display()));
        if let Some(data) = input.take() {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            std::thread::spawn(move || {
                let _ = stdin.write_all(&data);
            });
        }
        let out = child.wait_with_output().expect("wait");
        stderr_all.push_str(&String::from_utf8_lossy(&out.stderr));
        code = out.status.code().unwrap_or(-1);
        input = Some(out.stdout);
    }
    (
        String::from_utf8_lossy(&input.unwrap_or_default()).into_owned(),
        stderr_all,
        code,
    )
}

fn run_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let spec = parse_spec(&text);
    if spec.runs.is_empty() {
        return Err("no RUN line".into());
    }
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut code = 0;
    for r in &spec.runs {
        let (o, e, c) = run_line(r, path);
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
    file_check(&spec.out, &stdout).map_err(|e| format!("{e}{}", show()))?;
    file_check(&spec.err, &stderr).map_err(|e| format!("stderr {e}{}", show()))?;
    for (line, t) in &spec.diags {
        let loc = format!(":{line}:");
        let ok = stderr
            .split("\n\n")
            .any(|d| d.contains(t.as_str()) && d.contains(&loc))
            || stderr.contains(t.as_str())
                && stderr
                    .lines()
                    .any(|l| l.contains("-->") && l.contains(&loc));
        if !ok {
            return Err(format!(
                "DIAG: no diagnostic `{t}` at line {line}{}",
                show()
            ));
        }
    }
    Ok(())
}

#[test]
fn file_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut all = Vec::new();
    files(&root, &mut all);
    assert!(
        !all.is_empty(),
        "no file tests found under {}",
        root.display()
    );
    let filter = std::env::var("FILETEST").unwrap_or_default();
    let mut failures = Vec::new();
    let mut ran = 0;
    for f in &all {
        if !f.to_string_lossy().contains(&filter) {
            continue;
        }
        ran += 1;
        if let Err(e) = run_file(f) {
            failures.push(format!("FAIL {}: {e}", f.display()));
        }
    }
    println!("{ran} file tests ran, {} failed", failures.len());
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn file_check_matcher_semantics() {
    let out = "a b\nc  d\ne\n";
    let ok = |c: Vec<Check>| file_check(&c, out);
    assert!(ok(vec![Check::Plain("a".into()), Check::Next("c d".into())]).is_ok());
    assert!(ok(vec![Check::Plain("a".into()), Check::Next("e".into())]).is_err());
    assert!(
        ok(vec![
            Check::Plain("a".into()),
            Check::Not("d".into()),
            Check::Plain("e".into())
        ])
        .is_err()
    );
    assert!(
        ok(vec![
            Check::Plain("c".into()),
            Check::Not("a".into()),
            Check::Plain("e".into())
        ])
        .is_ok()
    );
    assert!(ok(vec![Check::Plain("e".into()), Check::Plain("a".into())]).is_err());
    assert!(ok(vec![Check::Plain("a".into()), Check::Same("b".into())]).is_ok());
    assert!(ok(vec![Check::Count(2, "d".into())]).is_err());
    assert!(ok(vec![Check::Not("zzz".into())]).is_ok());
    assert!(ok(vec![Check::Not("e".into())]).is_err());
}

/// Invalid UTF-8 cannot live in a `.kir` file test (the harness reads text): the CLI must
/// refuse it with exit 2 and the line, column and byte of the first bad byte.
#[test]
fn invalid_utf8_input_is_located() {
    let dir = std::env::temp_dir().join(format!("smemsync-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("latin1.kir");
    std::fs::write(&path, b"kernel @k() block(4) {\n // caf\xe9\n}\n").expect("write");
    for cmd in ["fmt", "check"] {
        let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
            .arg(cmd)
            .arg(&path)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("latin1.kir:2:8: invalid UTF-8 at byte 30"),
            "{cmd}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
