//! Runs the checker's file tests (tests/filetests/check/*.kir) with a small subset of the
//! FileCheck conventions: `RUN`, `EXIT`, ordered `CHECK`/`CHECK-NEXT` on stdout, `CHECK-NOT`,
//! ordered `CHECK-ERR` on stderr (substring matches).

use std::process::Command;

fn run_file(path: &std::path::Path) -> Result<(), String> {
    let src = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let directive = |name: &str| -> Vec<String> {
        src.lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix(&format!("// {name}:"))
                    .map(|s| s.trim().to_string())
            })
            .collect()
    };
    let run = directive("RUN");
    let run = run.first().ok_or("no RUN line")?;
    let exit: i32 = directive("EXIT")
        .first()
        .map_or(Ok(0), |s| s.parse())
        .map_err(|_| "bad EXIT")?;
    let args: Vec<String> = run
        .split_whitespace()
        .skip(1)
        .map(|a| {
            if a == "%s" {
                path.display().to_string()
            } else {
                a.to_string()
            }
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(&args)
        .env("NO_COLOR", "1")
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let ctx = || format!("\n--- stdout\n{stdout}--- stderr\n{stderr}");
    if out.status.code() != Some(exit) {
        return Err(format!(
            "exit {:?}, expected {exit}{}",
            out.status.code(),
            ctx()
        ));
    }
    // Ordered CHECK / CHECK-NEXT over stdout lines.
    let lines: Vec<&str> = stdout.lines().collect();
    let mut pos = 0usize;
    let mut last: Option<usize> = None;
    for l in src.lines().map(str::trim) {
        if let Some(p) = l.strip_prefix("// CHECK:") {
            let p = p.trim();
            let i = (pos..lines.len())
                .find(|i| lines[*i].contains(p))
                .ok_or_else(|| format!("CHECK `{p}` not found{}", ctx()))?;
            last = Some(i);
            pos = i + 1;
        } else if let Some(p) = l.strip_prefix("// CHECK-NEXT:") {
            let p = p.trim();
            let i = last.map_or(0, |x| x + 1);
            if !lines.get(i).is_some_and(|x| x.contains(p)) {
                return Err(format!("CHECK-NEXT `{p}` not on line {}{}", i + 1, ctx()));
            }
            last = Some(i);
            pos = i + 1;
        } else if let Some(p) = l.strip_prefix("// CHECK-NOT:") {
            if stdout.contains(p.trim()) {
                return Err(format!("CHECK-NOT `{}` found{}", p.trim(), ctx()));
            }
        }
    }
    let mut rest = stderr.as_str();
    for p in directive("CHECK-ERR") {
        let i = rest
            .find(&p)
            .ok_or_else(|| format!("CHECK-ERR `{p}` not found (in order){}", ctx()))?;
        rest = &rest[i + p.len()..];
    }
    Ok(())
}

#[test]
fn checker_file_tests() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/filetests/check");
    let mut failures = Vec::new();
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("filetests dir") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "kir") {
            n += 1;
            if let Err(m) = run_file(&p) {
                failures.push(format!("{}: {m}", p.display()));
            }
        }
    }
    assert!(n > 0);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
