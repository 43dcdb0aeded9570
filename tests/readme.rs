//! The documentation runs as written. Every line of every `sh` code block in README.md,
//! examples/README.md and docs/*.md is a command run from the repository root by `bash -o
//! pipefail`, with the built binary as `smemsync` (first on `PATH`) and a leading
//! `cargo run --release --` meaning the same binary. The line's trailing comment says what it
//! promises:
//! - the exit code: 0 unless the comment ends with `exit N`;
//! - `prints "TEXT"`: TEXT appears in stdout or stderr;
//! - `not run: REASON`: the line is skipped (it needs a GPU, the network, or is the test suite).
//!
//! Lines that are only a comment are skipped; a command may not continue on the next line.
//! The commands run in parallel, so the test takes about as long as the slowest one.
//! Also here: every example is listed in examples/README.md with a command that uses it, every
//! subcommand is in the quick tour and has an example it works on, every `--help` example is a
//! documented command (so it runs too), `--version` lists the targets, and the README states
//! the MSRV Cargo.toml sets.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

mod common;

/// One documented command and what its comment promises.
#[derive(Debug, PartialEq)]
struct Doc {
    /// `FILE:LINE` of the command.
    at: String,
    command: String,
    exit: i32,
    prints: Option<String>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The command and comment of a line: the comment starts at the first ` #`.
fn split_comment(line: &str) -> (&str, &str) {
    match line.find(" #") {
        Some(i) => (line[..i].trim(), line[i + 2..].trim()),
        None if line.trim_start().starts_with('#') => ("", line.trim_start()[1..].trim()),
        None => (line.trim(), ""),
    }
}

/// Parses one line of an `sh` block: `None` for a comment-only line or one marked `not run:`.
fn parse_line(at: String, line: &str) -> Option<Doc> {
    let (command, comment) = split_comment(line);
    if command.is_empty() || comment.contains("not run:") {
        return None;
    }
    assert!(
        !command.ends_with('\\'),
        "{at}: keep one command per line (a continuation is not run)"
    );
    let words: Vec<&str> = comment.split_whitespace().collect();
    let exit = match words.as_slice() {
        [.., w, n] if w.trim_end_matches(',').ends_with("exit") => n
            .parse()
            .unwrap_or_else(|_| panic!("{at}: `exit {n}` is not an exit code")),
        _ => 0,
    };
    let prints = comment.split_once("prints \"").map(|(_, rest)| {
        let (text, _) = rest
            .split_once('"')
            .unwrap_or_else(|| panic!("{at}: unterminated prints \"…\""));
        text.to_string()
    });
    let command = match command.strip_prefix("cargo run --release -- ") {
        Some(args) => format!("smemsync {args}"),
        None => command.to_string(),
    };
    Some(Doc {
        at,
        command,
        exit,
        prints,
    })
}

/// Every documented command of a markdown file (path relative to the repository root).
fn docs_of(rel: &str) -> Vec<Doc> {
    let text = std::fs::read_to_string(root().join(rel)).expect("read markdown");
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut fence = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            in_sh = !fence && info.split_whitespace().next() == Some("sh");
            fence = !fence;
            continue;
        }
        if in_sh && let Some(d) = parse_line(format!("{rel}:{}", i + 1), line) {
            out.push(d);
        }
    }
    out
}

/// README.md, examples/README.md and docs/*.md.
fn markdown_files() -> Vec<String> {
    let mut files = vec!["README.md".to_string(), "examples/README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// A directory holding `smemsync`, a link to the binary under test; removed when dropped.
struct BinDir(PathBuf);

impl BinDir {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("smemsync-readme-{}-{n}", std::process::id());
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_smemsync"), dir.join("smemsync"))
            .expect("link");
        BinDir(dir)
    }
}

impl Drop for BinDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs one command line from the repository root: (exit code, stdout and stderr).
fn shell(bin: &Path, command: &str) -> (i32, String) {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-o", "pipefail", "-c", command])
        .current_dir(root())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .expect("run bash");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// What is wrong with one documented command's run, if anything.
fn verdict(d: &Doc, code: i32, out: &str) -> Option<String> {
    let tail: String = out.lines().rev().take(15).collect::<Vec<_>>().join("\n");
    if code != d.exit {
        return Some(format!(
            "{}: `{}` exited {code}, the text promises {}\n{tail}",
            d.at, d.command, d.exit
        ));
    }
    match &d.prints {
        Some(p) if !out.contains(p.as_str()) => Some(format!(
            "{}: `{}` did not print \"{p}\"\n{tail}",
            d.at, d.command
        )),
        _ => None,
    }
}

/// Runs the commands in parallel; the failures, one message each.
fn run_all(docs: &[Doc]) -> Vec<String> {
    let bin = BinDir::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = docs
            .iter()
            .map(|d| {
                let bin = &bin.0;
                s.spawn(move || {
                    let (code, out) = shell(bin, &d.command);
                    verdict(d, code, &out)
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("thread"))
            .collect()
    })
}

#[test]
fn every_documented_command_does_what_its_text_promises() {
    let docs: Vec<Doc> = markdown_files().iter().flat_map(|f| docs_of(f)).collect();
    assert!(docs.len() >= 30, "only {} commands found", docs.len());
    assert!(
        docs.iter().any(|d| d.exit == 1),
        "no command shows a finding"
    );
    let failures = run_all(&docs);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn comments_say_the_exit_code_the_output_and_what_is_not_run() {
    let d = parse_line("x".into(), "smemsync check a.kir   # a witness, exit 1").unwrap();
    assert_eq!((d.exit, d.prints), (1, None));
    let d = parse_line("x".into(), "a | smemsync check -  # prints \"race-free\"").unwrap();
    assert_eq!((d.command.as_str(), d.exit), ("a | smemsync check -", 0));
    assert_eq!(d.prints.as_deref(), Some("race-free"));
    let d = parse_line("x".into(), "cargo run --release -- fmt a.kir").unwrap();
    assert_eq!(d.command, "smemsync fmt a.kir");
    assert_eq!(
        parse_line("x".into(), "bash gpu.sh  # not run: needs a GPU"),
        None
    );
    assert_eq!(parse_line("x".into(), "   # just a comment"), None);
    let exits = parse_line(
        "x".into(),
        "smemsync fmt a.kir  # the exit code of the parser",
    );
    assert_eq!(exits.unwrap().exit, 0);
}

/// The subcommands `smemsync --help` lists.
fn subcommands() -> Vec<String> {
    let (code, help) = shell(&BinDir::new().0, "smemsync --help");
    assert_eq!(code, 0, "{help}");
    let list = help
        .split_once("Commands:")
        .expect("a command list")
        .1
        .split("\n\n")
        .next()
        .unwrap_or_default();
    let names: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(String::from)
        .collect();
    assert!(names.len() >= 9, "{help}");
    names
}

/// Whether a command line runs `smemsync SUB` (in any stage of a pipe).
fn runs(command: &str, sub: &str) -> bool {
    command
        .split('|')
        .any(|stage| stage.split_whitespace().take(2).eq(["smemsync", sub]))
}

#[test]
fn the_quick_tour_uses_every_subcommand() {
    let readme = docs_of("README.md");
    for sub in subcommands() {
        assert!(
            readme.iter().any(|d| runs(&d.command, &sub)),
            "the README's quick tour never runs `smemsync {sub}`"
        );
    }
}

#[test]
fn every_example_is_listed_with_a_command_and_every_subcommand_has_an_example() {
    let text = std::fs::read_to_string(root().join("examples/README.md")).expect("read");
    let docs = docs_of("examples/README.md");
    let names: Vec<String> = (common::kernel_files(&["examples"]).iter())
        .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
        .collect();
    for n in &names {
        assert!(
            text.contains(&format!("### {n}\n")),
            "examples/README.md has no section for {n}"
        );
        let path = format!("examples/{n}");
        assert!(
            docs.iter().any(|d| d.command.contains(&path)),
            "examples/README.md gives no command that uses {path}"
        );
    }
    for sub in subcommands().iter().filter(|s| *s != "bench") {
        assert!(
            docs.iter()
                .any(|d| d.exit == 0 && runs(&d.command, sub) && d.command.contains("examples/")),
            "no command of examples/README.md runs `smemsync {sub}` on an example"
        );
    }
}

/// Each subcommand's `--help` example, and the documented command it must also be (so that
/// the documentation test runs it, with the exit code its comment promises).
#[test]
fn every_subcommand_help_ends_with_an_example_the_docs_run() {
    let docs: Vec<Doc> = markdown_files().iter().flat_map(|f| docs_of(f)).collect();
    let bin = BinDir::new();
    for sub in subcommands() {
        let (code, help) = shell(&bin.0, &format!("smemsync {sub} --help"));
        assert_eq!(code, 0, "{help}");
        let line = help
            .lines()
            .find_map(|l| l.strip_prefix("Example: "))
            .unwrap_or_else(|| panic!("`smemsync {sub} --help` shows no example:\n{help}"));
        let example = parse_line(format!("smemsync {sub} --help"), line)
            .unwrap_or_else(|| panic!("{sub}: `{line}` is not a command"));
        assert!(runs(&example.command, &sub), "{sub}: the example `{line}`");
        assert!(
            docs.iter()
                .any(|d| d.command == example.command && d.exit == example.exit),
            "{sub}: the --help example `{line}` is not among the documented commands"
        );
    }
}

#[test]
fn version_names_every_target() {
    let (code, out) = shell(&BinDir::new().0, "smemsync --version");
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&format!("smemsync {}", env!("CARGO_PKG_VERSION"))));
    for t in smemsync::target::TARGET_NAMES {
        assert!(out.contains(t), "--version does not name {t}:\n{out}");
    }
}

#[test]
fn the_readme_states_the_rust_version_cargo_toml_sets() {
    let toml = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let msrv = toml
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("rust-version in Cargo.toml")
        .trim_matches('"');
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    assert!(
        readme.contains(&format!("Rust {msrv} or newer")),
        "README.md does not say `Rust {msrv} or newer`"
    );
    let stated = readme.matches(" or newer").count();
    assert_eq!(
        stated, 1,
        "README.md states a minimum Rust version {stated} times"
    );
}
