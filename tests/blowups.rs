//! Inputs that used to exhaust time, memory or the stack (issue 11's reproducers, scaled):
//! each must now finish with a real answer. The assertions are on the answers (linear hazard
//! counts, the minimal barrier count, exit codes), not on time.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn smemsync(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn smemsync");
    let mut stdin = child.stdin.take().expect("stdin");
    let text = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().expect("run smemsync");
    writer.join().expect("writer").expect("write stdin");
    out
}

/// The value of `name=` in a `// stats:` line.
fn stat(out: &Output, name: &str) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("// stats:"))
        .unwrap_or_else(|| panic!("no stats line in\n{text}"));
    let key = format!("{name}=");
    let v = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&key))
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    v.parse().expect("a number")
}

/// `n` pairs `store @a[%t]; load @a[255 - %t]` in straight-line code (repro gen_line.py).
fn line_kernel(n: usize) -> String {
    let mut s = String::from(
        "kernel @k(%out: global f32[256]) block(256) {\n  shared @a : f32[256]\n  %t = tid.x\n  %f = itof %t\n  %r = sub 255, %t\n",
    );
    for i in 0..n {
        s += &format!("  store @a[%t], %f\n  %x{i} = load @a[%r]\n");
    }
    s + "}\n"
}

#[test]
fn straight_line_hazards_are_linear_in_the_accesses() {
    let n = 300;
    let out = smemsync(
        &["sync", "--target", "sm_90", "--stats", "-"],
        &line_kernel(n),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each access needs a barrier before the next one: 2n - 1 barriers, one nearest hazard
    // per access (n^2 hazards were built before).
    assert_eq!(stat(&out, "barriers_written"), 2 * n as u64 - 1);
    assert!(
        stat(&out, "hazards") <= 2 * n as u64,
        "hazards are not linear"
    );
    let checked = smemsync(
        &["check", "--target", "sm_90", "-"],
        &String::from_utf8_lossy(&out.stdout),
    );
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
}

#[test]
fn stores_in_a_loop_nest_that_ignore_its_variables_are_not_enumerated() {
    // repro sync_oom_loopnest.kir: 1024 threads, a 64x64 nest of ten stores of the thread's
    // own element (475 s and 4 GB before), then one read of element 0.
    let mut s = String::from(
        "kernel @k() block(1024) {\n  shared @a : f32[1024]\n  %t = tid.x\n  for %i = 0 to 64 step 1 {\n    for %j = 0 to 64 step 1 {\n",
    );
    for _ in 0..10 {
        s += "      store @a[%t], 1.0\n";
    }
    s += "    }\n  }\n  %x = load @a[0]\n}\n";
    let out = smemsync(&["sync", "--target", "sm_90", "--stats", "-"], &s);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stat(&out, "barriers_written"), 1);
    assert_eq!(stat(&out, "barriers_executed"), 1);
}

#[test]
fn a_long_definition_chain_does_not_overflow_the_stack() {
    // 50k dependent adds: the analyses recurse along definitions.
    let n = 50_000;
    let mut s = String::from(
        "kernel @k(%out: global f32[64]) block(64) {\n  shared @a : f32[64]\n  %t = tid.x\n  %f = itof %t\n  %v0 = add %t, 1\n",
    );
    for i in 1..n {
        s += &format!("  %v{i} = add %v{}, 1\n", i - 1);
    }
    s += &format!(
        "  %u = rem %v{}, 64\n  store @a[%u], %f\n  %x = load @a[%t]\n  gstore %out[%t], %x\n}}\n",
        n - 1
    );
    let synced = smemsync(&["sync", "--target", "sm_90", "-"], &s);
    assert!(
        synced.status.success(),
        "{}",
        String::from_utf8_lossy(&synced.stderr)
    );
    let text = String::from_utf8_lossy(&synced.stdout).to_string();
    assert!(
        text.contains("barrier"),
        "the store and load need a barrier"
    );
    let checked = smemsync(&["check", "--target", "sm_90", "-"], &text);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    for format in ["mlir", "cuda"] {
        let out = smemsync(
            &["emit", "--format", format, "--target", "sm_90", "-"],
            &text,
        );
        assert!(
            out.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
