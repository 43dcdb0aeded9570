//! MLIR emission against upstream MLIR/LLVM 22: every kernel under test, emitted for every
//! target that can express it, must verify with `mlir-opt-22`, lower through the upstream
//! pipelines to AMD assembly (gfx942, gfx950, gfx1201, gfx1250) or PTX (sm_80, sm_90), and
//! keep its syncs in place in the ISA: s_barrier after an lgkmcnt(0) wait (gfx9), the LDS
//! wait then s_barrier_signal -1 / s_barrier_wait -1 (gfx12), bar.sync / bar.arrive with
//! their ids and counts, cp.async.wait_group N and mbarrier instructions (NVIDIA).
//!
//! Hand-made kernels under `tests/filetests/mlir/` also carry `ASM-<TARGET>:` lines, which
//! `FileCheck-22` matches against the lowered assembly (order of ds_write / wait / barrier /
//! ds_read). The tools are required: a missing tool fails the test with what to install.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use smemsync::Kernel;
use smemsync::emit::mlir::emit_mlir_kernels;
use smemsync::ir::{Counter, OpKind};
use smemsync::target::Target;

mod common;

const TARGETS: [&str; 6] = ["gfx942", "gfx950", "gfx1201", "gfx1250", "sm_80", "sm_90"];

/// One kernel file under test: its path and text.
struct Case {
    path: PathBuf,
    src: String,
    /// Examples are first run through `smemsync sync --target T` (the syncs placed for each
    /// target); hand-made kernels already carry theirs.
    sync_first: bool,
}

/// The kernels to emit: every example and every hand-made MLIR test kernel that is expected
/// to emit (files with an `EXIT:` line test diagnostics instead). Kernels produced by the
/// sync pipeline can be added here: the checks only need the kernel text.
fn kernels_under_test() -> Vec<Case> {
    let tag = |files: Vec<PathBuf>, sync_first: bool| -> Vec<Case> {
        files
            .into_iter()
            .filter_map(|path| {
                let src = std::fs::read_to_string(&path).ok()?;
                if src.lines().any(|l| l.trim_start().starts_with("// EXIT:")) {
                    return None;
                }
                Some(Case {
                    path,
                    src,
                    sync_first,
                })
            })
            .collect()
    };
    let mut cases = tag(common::kernel_files(&["examples"]), true);
    cases.extend(tag(common::kernel_files(&["tests/filetests/mlir"]), false));
    cases
}

/// The kernel text to emit for a target: the `smemsync sync` output when the case asks for
/// it and the placement succeeds (a kernel with findings keeps its own syncs).
fn source_for(case: &Case, target: &str) -> (String, bool) {
    if !case.sync_first {
        return (case.src.clone(), false);
    }
    let path = case.path.to_string_lossy().into_owned();
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(["sync", "--target", target, &path])
        .output();
    match out {
        Ok(o) if o.status.success() => (String::from_utf8_lossy(&o.stdout).into_owned(), true),
        _ => (case.src.clone(), false),
    }
}

fn require_tools() {
    for tool in ["mlir-opt-22", "FileCheck-22"] {
        let ok = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "`{tool}` is not runnable: the MLIR tests need the LLVM/MLIR 22 tools \
             (apt-get install --no-install-recommends mlir-22-tools llvm-22 llvm-22-tools; \
             scripts/test.sh installs them)"
        );
    }
}

/// The op names of an MLIR text, in order (names of values aside).
fn op_sequence(mlir: &str) -> Vec<String> {
    mlir.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rhs = match l.split_once(" = ") {
                Some((lhs, rhs)) if lhs.starts_with('%') => rhs,
                _ => l,
            };
            let w = rhs.split_whitespace().next()?.split('(').next()?;
            (w.contains('.') && !w.starts_with('%') && !w.starts_with('@')).then(|| w.to_string())
        })
        .collect()
}

/// The upstream lowering pipeline from smemsync's MLIR to ISA for a target.
pub fn pipeline(target: &str) -> String {
    if target.starts_with("gfx") {
        format!(
            "builtin.module(gpu.module(convert-scf-to-cf,expand-strided-metadata,lower-affine,\
             convert-math-to-llvm,convert-amdgpu-to-rocdl{{chipset={target}}},\
             convert-gpu-to-rocdl{{chipset={target} runtime=HIP}},reconcile-unrealized-casts),\
             rocdl-attach-target{{chip={target}}},gpu-module-to-binary{{format=isa}})"
        )
    } else {
        // wgmma and TMA instructions need the architecture-specific sm_90a.
        let chip = if target == "sm_90" { "sm_90a" } else { target };
        format!(
            "builtin.module(gpu.module(convert-scf-to-cf,expand-strided-metadata,lower-affine,\
             convert-nvgpu-to-nvvm,convert-gpu-to-nvvm,convert-nvvm-to-llvm,convert-arith-to-llvm,\
             convert-index-to-llvm,reconcile-unrealized-casts),\
             nvvm-attach-target{{chip={chip} features=+ptx80}},gpu-module-to-binary{{format=isa}})"
        )
    }
}

fn run_tool(tool: &str, args: &[&str], stdin: &str) -> (bool, String, String) {
    let child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return (false, String::new(), format!("cannot run {tool}: {e}")),
    };
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    match child.wait_with_output() {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(e) => (false, String::new(), e.to_string()),
    }
}

/// The assembly strings of every `gpu.binary` object, unescaped.
fn assembly(lowered: &str) -> String {
    let mut out = String::new();
    let mut rest = lowered;
    while let Some(i) = rest.find("assembly = \"") {
        rest = &rest[i + "assembly = \"".len()..];
        let bytes = rest.as_bytes();
        let mut j = 0;
        let mut buf: Vec<u8> = Vec::new();
        while j < bytes.len() && bytes[j] != b'"' {
            if bytes[j] == b'\\' && j + 1 < bytes.len() {
                let hex = rest
                    .get(j + 1..j + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        buf.push(b);
                        j += 3;
                    }
                    None => {
                        buf.push(bytes[j + 1]);
                        j += 2;
                    }
                }
            } else {
                buf.push(bytes[j]);
                j += 1;
            }
        }
        out.push_str(&String::from_utf8_lossy(&buf));
        out.push('\n');
        rest = &rest[j.min(rest.len())..];
    }
    out
}

/// The instructions of an assembly listing (no directives, labels or comments).
fn instructions(asm: &str) -> Vec<String> {
    asm.lines()
        .map(|l| {
            l.split("//")
                .next()
                .unwrap_or("")
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
        })
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with('.')
                && !l.ends_with(':')
                && !l.starts_with('{')
                && !l.starts_with('}')
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Sync ops of the kernels, to compare with the ISA.
#[derive(Default)]
struct Syncs {
    barriers: usize,
    splits: usize,
    named: Vec<(bool, u32, u32)>,
    cp_waits: Vec<u32>,
    mbar: Vec<&'static str>,
    /// AMD instructions the kernels' async copies and waits must produce.
    amd: Vec<&'static str>,
    /// Whether some kernel has more threads than one warp (a single-wave workgroup's barrier
    /// is legitimately removed by LLVM).
    multi_warp: bool,
}

fn syncs(ks: &[Kernel], t: &Target) -> Syncs {
    let mut s = Syncs::default();
    for k in ks {
        s.multi_warp |= k.threads() > t.warp;
        for op in k.ops_in_order() {
            match &k.ops[op].kind {
                OpKind::Barrier => s.barriers += 1,
                OpKind::SplitSignal(_) => s.splits += 1,
                OpKind::NamedArrive { id, count } => s.named.push((false, *id, *count)),
                OpKind::NamedSync { id, count } => s.named.push((true, *id, *count)),
                OpKind::CpAsyncWait(n) => s.cp_waits.push(*n),
                OpKind::MbarInit { .. } => s.mbar.push("mbarrier.init"),
                OpKind::MbarArrive { tx: None, .. } => s.mbar.push("mbarrier.arrive"),
                OpKind::MbarArrive { tx: Some(_), .. } => s.mbar.push("mbarrier.arrive.expect_tx"),
                OpKind::MbarExpectTx { .. } => s.mbar.push("mbarrier.expect_tx"),
                OpKind::MbarWait { .. } => s.mbar.push("mbarrier.try_wait.parity"),
                OpKind::MbarInval { .. } => s.mbar.push("mbarrier.inval"),
                OpKind::TdmLoad { .. } => s.amd.push("tensor_load_to_lds"),
                OpKind::TmaLoad { .. } => s
                    .mbar
                    .push("cp.async.bulk.tensor.2d.shared::cluster.global"),
                OpKind::TmaStore { .. } => {
                    s.mbar.push("cp.async.bulk.tensor.2d.global.shared::cta")
                }
                OpKind::GatherToLds { .. } => s.amd.push(if t.gfx12_counters() {
                    "global_load_async_to_lds"
                } else {
                    "global_load_lds_dword"
                }),
                OpKind::WaitCnt(cs) => {
                    for (c, _) in cs {
                        s.amd.push(match c {
                            Counter::TensorCnt => "s_wait_tensorcnt",
                            Counter::VmCnt => "s_waitcnt vmcnt",
                            Counter::AsyncCnt => "s_wait_asynccnt",
                            _ => continue,
                        });
                    }
                }
                _ => {}
            }
        }
    }
    s
}

fn is_ds(i: &str) -> bool {
    i.starts_with("ds_")
}

/// Whether an AMD wait instruction waits for every outstanding LDS operation.
fn waits_for_lds(i: &str, gfx12: bool) -> bool {
    if !gfx12 {
        return i.starts_with("s_waitcnt") && i.contains("lgkmcnt(0)");
    }
    let Some(rest) = i.strip_prefix("s_wait_") else {
        return false;
    };
    let mut parts = rest.split_whitespace();
    let name = parts.next().unwrap_or("");
    let imm = parts.next().unwrap_or("");
    let v = if let Some(h) = imm.strip_prefix("0x") {
        u32::from_str_radix(h, 16).ok()
    } else {
        imm.parse().ok()
    };
    match (name, v) {
        ("dscnt", Some(0)) => true,
        ("loadcnt_dscnt" | "storecnt_dscnt", Some(v)) => v & 0x3f == 0,
        _ => false,
    }
}

/// A state of the split-barrier protocol on a path: no signal outstanding.
const IDLE: u8 = 1;
/// A signal not yet waited for.
const SIGNALLED: u8 = 2;

/// A basic block of the assembly [`split_protocol_on_cfg`] reads.
#[derive(Default)]
struct Block {
    ins: Vec<String>,
    succ: Vec<String>,
    falls_through: bool,
    exits: bool,
}

/// The basic blocks of an assembly listing (named by label; a block also ends at a branch)
/// and the indices of the blocks that start a function.
fn asm_blocks(asm: &str) -> (Vec<(String, Block)>, Vec<usize>) {
    let mut blocks: Vec<(String, Block)> = Vec::new();
    // Instructions before any label form an entry of their own.
    let mut func_entries: Vec<usize> = vec![0];
    let mut cur: Option<(String, Block)> = Some(("<entry>".to_string(), Block::default()));
    let push = |cur: &mut Option<(String, Block)>, blocks: &mut Vec<(String, Block)>| {
        if let Some(b) = cur.take() {
            blocks.push(b);
        }
    };
    for raw in asm.lines() {
        let l = raw
            .split("//")
            .next()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim();
        if l.is_empty() {
            continue;
        }
        if let Some(label) = l.strip_suffix(':') {
            let is_func = !label.starts_with('.');
            if let Some((_, b)) = cur.as_mut()
                && !b.exits
                && b.succ.is_empty()
            {
                b.falls_through = true;
            }
            push(&mut cur, &mut blocks);
            if is_func {
                func_entries.push(blocks.len());
            }
            cur = Some((label.to_string(), Block::default()));
            continue;
        }
        if l.starts_with('.') {
            continue;
        }
        let Some((_, b)) = cur.as_mut() else { continue };
        let x = l.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(t) = x.strip_prefix("s_branch ") {
            b.succ.push(t.to_string());
            b.exits = true;
            let name = format!("{}.after", b.succ.len());
            push(&mut cur, &mut blocks);
            cur = Some((name, Block::default()));
            continue;
        }
        if x.starts_with("s_cbranch_") {
            if let Some(t) = x.split_whitespace().nth(1) {
                b.succ.push(t.to_string());
            }
            b.falls_through = true;
            let name = format!(".split{}", blocks.len());
            push(&mut cur, &mut blocks);
            cur = Some((name, Block::default()));
            continue;
        }
        if x.starts_with("s_endpgm") || x.starts_with("s_setpc_b64") {
            b.ins.push(x);
            b.exits = true;
            continue;
        }
        b.ins.push(x);
    }
    push(&mut cur, &mut blocks);
    (blocks, func_entries)
}

/// The state after a block of [`split_protocol_on_cfg`] entered in the states `st`, or why a
/// path through it breaks the alternation.
fn block_transfer(block: &(String, Block), mut st: u8) -> Result<u8, String> {
    for x in &block.1.ins {
        if x.starts_with("s_barrier_signal") {
            if st & SIGNALLED != 0 {
                return Err(format!(
                    "a path signals twice without a wait (block {})",
                    block.0
                ));
            }
            st = SIGNALLED;
        } else if x.starts_with("s_barrier_wait") {
            if st & IDLE != 0 {
                return Err(format!("a path waits without a signal (block {})", block.0));
            }
            st = IDLE;
        } else if x.starts_with("s_endpgm") && st & SIGNALLED != 0 {
            return Err(format!(
                "a path ends with a signal never waited for (block {})",
                block.0
            ));
        }
    }
    Ok(st)
}

/// Proves on the control-flow graph of the assembly that split-barrier signals and waits
/// alternate on every path (the block layout need not follow program order: a loop's
/// back-edge block may sit before its header). Blocks start at labels and end at branches;
/// each block's entry state is the set of states {idle, signalled} reachable there, iterated
/// to a fixpoint; every function starts idle and must end idle.
fn split_protocol_on_cfg(asm: &str) -> Result<(), String> {
    let (blocks, func_entries) = asm_blocks(asm);
    let index: std::collections::HashMap<String, usize> = blocks
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.clone(), i))
        .collect();
    let succs = |i: usize| -> Vec<usize> {
        let b = &blocks[i].1;
        let mut v: Vec<usize> = b
            .succ
            .iter()
            .filter_map(|n| index.get(n).copied())
            .collect();
        if b.falls_through && !b.exits && i + 1 < blocks.len() && !func_entries.contains(&(i + 1)) {
            v.push(i + 1);
        }
        v
    };
    let mut entry = vec![0u8; blocks.len()];
    let mut work: Vec<usize> = Vec::new();
    for &f in &func_entries {
        if f < blocks.len() {
            entry[f] = IDLE;
            work.push(f);
        }
    }
    while let Some(i) = work.pop() {
        let st = block_transfer(&blocks[i], entry[i])?;
        let next = succs(i);
        if next.is_empty() && st & SIGNALLED != 0 {
            return Err(format!(
                "a path ends with a signal never waited for (block {})",
                blocks[i].0
            ));
        }
        for j in next {
            if entry[j] | st != entry[j] {
                entry[j] |= st;
                work.push(j);
            }
        }
    }
    Ok(())
}

/// Checks the ISA keeps the kernels' syncs, in order relative to the LDS accesses.
fn check_isa(target: &str, asm: &str, s: &Syncs) -> Result<(), String> {
    let ins = instructions(asm);
    if target.starts_with("gfx") {
        check_amd_isa(target, asm, &ins, s)
    } else {
        check_nvidia_isa(&ins, s)
    }
}

/// [`check_isa`] on AMD: every barrier after an LDS access has an LDS wait between them, gfx12
/// split barriers alternate on every path, and the kernel's barriers and waits are there.
fn check_amd_isa(target: &str, asm: &str, ins: &[String], s: &Syncs) -> Result<(), String> {
    let gfx12 = target.starts_with("gfx12");
    let mut last_ds: Option<usize> = None;
    let mut last_lds_wait: Option<usize> = None;
    let mut barriers = 0;
    for (i, x) in ins.iter().enumerate() {
        if is_ds(x) {
            last_ds = Some(i);
        }
        if waits_for_lds(x, gfx12) {
            last_lds_wait = Some(i);
        }
        let is_barrier = if gfx12 {
            x == "s_barrier_signal -1"
        } else {
            x == "s_barrier"
        };
        if is_barrier {
            barriers += 1;
            if let Some(d) = last_ds
                && last_lds_wait.is_none_or(|w| w < d)
            {
                return Err(format!(
                    "`{x}` (instruction {i}) follows `{}` with no LDS wait between",
                    ins[d]
                ));
            }
        }
    }
    if gfx12 {
        split_protocol_on_cfg(asm)?;
    }
    if (s.barriers + s.splits) > 0 && s.multi_warp && barriers == 0 {
        return Err("the kernel's barriers are missing from the ISA".into());
    }
    for want in &s.amd {
        if !ins.iter().any(|i| i.starts_with(want)) {
            return Err(format!("`{want}` missing"));
        }
    }
    Ok(())
}

/// [`check_isa`] on NVIDIA: the kernel's block barrier, named barriers, cp.async waits and
/// mbarrier ops are there.
fn check_nvidia_isa(ins: &[String], s: &Syncs) -> Result<(), String> {
    if s.barriers > 0
        && !ins
            .iter()
            .any(|i| i == "bar.sync 0" || i == "barrier.sync 0")
    {
        return Err("`bar.sync 0` missing".into());
    }
    for (sync, id, n) in &s.named {
        let want = if *sync {
            format!("bar.sync {id}, {n}")
        } else {
            format!("bar.arrive {id}, {n}")
        };
        if !ins.contains(&want) {
            return Err(format!("`{want}` missing"));
        }
    }
    for n in &s.cp_waits {
        let want = format!("cp.async.wait_group {n}");
        if !ins.contains(&want) {
            return Err(format!("`{want}` missing"));
        }
    }
    for m in &s.mbar {
        if !ins.iter().any(|i| i.starts_with(m)) {
            return Err(format!("`{m}` missing"));
        }
    }
    Ok(())
}

/// FileCheck-22 with the `ASM-<TARGET>` prefix of a hand-made kernel, if it has one.
fn file_check(case: &Case, target: &str, asm: &str) -> Result<(), String> {
    let prefix = format!("ASM-{}", target.to_uppercase().replace('_', ""));
    if !case.src.contains(&format!("// {prefix}:")) {
        return Ok(());
    }
    let path = case.path.to_string_lossy().into_owned();
    let (ok, _, err) = run_tool(
        "FileCheck-22",
        &[&format!("--check-prefix={prefix}"), &path],
        asm,
    );
    if ok {
        Ok(())
    } else {
        Err(format!("FileCheck-22 --check-prefix={prefix}:\n{err}"))
    }
}

struct Outcome {
    expressible: Vec<(String, String)>,
    failures: Vec<String>,
    /// Pairs emitted from `smemsync sync` output.
    synced: usize,
}

/// mlir-opt-22 accepts the emitted module, and its re-printing (renamed values, elided
/// types) reads back to the same ops.
fn reprint_reads_back(name: &str, target: &str, t: &Target, mlir: &str) -> Result<(), String> {
    let (ok, reprinted, err) = run_tool("mlir-opt-22", &["-"], mlir);
    if !ok {
        return Err(format!(
            "{name} on {target}: mlir-opt-22 rejects the output:\n{err}\n{mlir}"
        ));
    }
    // mlir-opt's re-printing (renamed values, elided types) reads back to the same ops.
    match smemsync::reader::mlir::import_mlir(&reprinted, t).map(|ks| emit_mlir_kernels(&ks, t)) {
        Ok(Ok(again)) if op_sequence(&again) == op_sequence(mlir) => {}
        Ok(Ok(again)) => {
            return Err(format!(
                "{name} on {target}: mlir-opt's printing reads back to other ops:\n{again}"
            ));
        }
        Ok(Err(d)) | Err(d) => {
            let msgs: Vec<String> = d
                .iter()
                .map(|x| x.render("<mlir-opt>", &reprinted, false))
                .collect();
            return Err(format!(
                "{name} on {target}: mlir-opt's printing does not read back:\n{}",
                msgs.join("\n")
            ));
        }
    }
    Ok(())
}

/// The module lowers to assembly that keeps the kernels' syncs in order with the LDS
/// accesses (`check_isa`) and matches the case's CHECK lines.
fn lowers_with_its_syncs(
    case: &Case,
    (name, target, t): (&str, &str, &Target),
    kernels: &[smemsync::Kernel],
    mlir: &str,
) -> Result<(), String> {
    let (ok, lowered, err) = run_tool(
        "mlir-opt-22",
        &[&format!("--pass-pipeline={}", pipeline(target)), "-"],
        mlir,
    );
    if !ok {
        return Err(format!("{name} on {target}: lowering failed:\n{err}"));
    }
    let asm = assembly(&lowered);
    if instructions(&asm).is_empty() {
        return Err(format!(
            "{name} on {target}: no assembly in the lowered module"
        ));
    }
    if let Err(e) = check_isa(target, &asm, &syncs(kernels, t)) {
        return Err(format!("{name} on {target}: {e}\n{asm}"));
    }
    if let Err(e) = file_check(case, target, &asm) {
        return Err(format!("{name} on {target}: {e}"));
    }
    Ok(())
}

fn run_case(case: &Case, target: &str, out: &Mutex<Outcome>) {
    let name = case
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fail = |m: String| {
        out.lock()
            .unwrap_or_else(|e| e.into_inner())
            .failures
            .push(m)
    };
    let (src, synced) = source_for(case, target);
    let file = name.clone();
    let name = if synced {
        format!("{name} (after sync)")
    } else {
        name
    };
    let module = match smemsync::reader::parse(&src) {
        Ok(m) => m,
        Err(d) => return fail(format!("{name}: does not parse: {}", d.message)),
    };
    let t = Target::from_name(target).unwrap_or_else(|_| panic!("known target {target}"));
    let mlir = match emit_mlir_kernels(&module.kernels, &t) {
        Ok(m) => m,
        Err(diags) => {
            // Not expressible on this target: each reason must point at an op.
            if let Some(d) = diags
                .iter()
                .find(|d| d.primary_span().is_none_or(|s| s.is_undef()))
            {
                fail(format!(
                    "{name} on {target}: diagnostic without a span: {}",
                    d.message
                ));
            }
            return;
        }
    };
    let checked = reprint_reads_back(&name, target, &t, &mlir)
        .and_then(|()| lowers_with_its_syncs(case, (&name, target, &t), &module.kernels, &mlir));
    if let Err(m) = checked {
        return fail(m);
    }
    // What was emitted reads back to the same MLIR.
    let again = smemsync::reader::mlir::import_mlir(&mlir, &t).map(|ks| emit_mlir_kernels(&ks, &t));
    if !matches!(&again, Ok(Ok(m)) if *m == mlir) {
        return fail(format!(
            "{name} on {target}: emit(import(emit(k))) differs from emit(k)"
        ));
    }
    let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
    o.expressible.push((file, target.to_string()));
    if synced {
        o.synced += 1;
    }
}

#[test]
fn every_kernel_verifies_and_lowers_with_its_syncs_in_place() {
    require_tools();
    let cases = kernels_under_test();
    let jobs: Vec<(&Case, &str)> = cases
        .iter()
        .flat_map(|c| TARGETS.iter().map(move |t| (c, *t)))
        .collect();
    let out = Mutex::new(Outcome {
        expressible: Vec::new(),
        failures: Vec::new(),
        synced: 0,
    });
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                        *n += 1;
                        *n - 1
                    };
                    let Some((c, t)) = jobs.get(i) else { break };
                    run_case(c, t, &out);
                }
            });
        }
    });
    let out = out.into_inner().unwrap_or_else(|e| e.into_inner());
    assert!(
        out.failures.is_empty(),
        "{} failure(s):\n\n{}",
        out.failures.len(),
        out.failures.join("\n\n")
    );
    // Every hand-made kernel is expressible on the targets its ASM lines name, and the
    // transpose is expressible everywhere.
    for c in &cases {
        let name = c
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for t in TARGETS {
            let prefix = format!("// ASM-{}:", t.to_uppercase().replace('_', ""));
            let expressible = out.expressible.iter().any(|(n, tt)| *n == name && tt == t);
            assert!(
                !c.src.contains(&prefix) || expressible,
                "{name} has {prefix} checks but did not emit for {t}"
            );
        }
    }
    for t in TARGETS {
        assert!(
            out.expressible
                .iter()
                .any(|(n, tt)| n == "transpose.kir" && tt == t),
            "transpose not emitted for {t}"
        );
    }
    eprintln!(
        "{} kernel/target pairs emitted, verified and lowered ({} from `smemsync sync` output), of {} tried",
        out.expressible.len(),
        out.synced,
        jobs.len()
    );
    assert!(
        out.synced >= 30,
        "only {} example/target pairs came from `smemsync sync`",
        out.synced
    );
}

#[test]
fn inexpressible_ops_are_diagnostics_with_spans() {
    let src = "kernel @k(%A: global f32[64]) block(64) {\n  shared @s : f32[64]\n  %t = tid.x\n  named_sync 1, 64\n  cp_async @s[%t] <- %A[%t]\n}\n";
    let k = smemsync::reader::parse_kernel(src).expect("parses");
    let t = Target::from_name("gfx942").expect("target");
    let diags = smemsync::emit::mlir::emit_mlir(&k, &t)
        .expect_err("named barriers and cp.async are not gfx942 ops");
    assert_eq!(diags.len(), 2, "{diags:?}");
    let lines: Vec<usize> = diags
        .iter()
        .filter_map(|d| smemsync::diag::line_number(src, d.primary_span()?))
        .collect();
    assert_eq!(lines, vec![4, 5]);
}

#[test]
fn the_isa_check_rejects_a_barrier_without_the_lds_wait() {
    let s = Syncs {
        barriers: 1,
        multi_warp: true,
        ..Syncs::default()
    };
    let bad9 = "\tds_write_b32 v0, v1\n\ts_barrier\n\tds_read_b32 v2, v0\n";
    assert!(check_isa("gfx942", bad9, &s).is_err());
    let good9 = "\tds_write_b32 v0, v1\n\ts_waitcnt vmcnt(0) lgkmcnt(0)\n\ts_barrier\n\tds_read_b32 v2, v0\n";
    assert!(check_isa("gfx942", good9, &s).is_ok());
    let bad12 = "\tds_store_b32 v0, v1\n\ts_wait_loadcnt_dscnt 0x301\n\ts_barrier_signal -1\n\ts_barrier_wait -1\n";
    assert!(check_isa("gfx1201", bad12, &s).is_err());
    let good12 = "\tds_store_b32 v0, v1\n\ts_wait_loadcnt_dscnt 0x300\n\ts_barrier_signal -1\n\ts_barrier_wait -1\n";
    assert!(check_isa("gfx1201", good12, &s).is_ok());
    let unpaired = "\ts_barrier_signal -1\n\tds_load_b32 v0, v1\n";
    assert!(check_isa("gfx1201", unpaired, &s).is_err());
    let missing = Syncs {
        cp_waits: vec![1],
        ..Syncs::default()
    };
    assert!(check_isa("sm_80", "\tcp.async.wait_group 0;\n", &missing).is_err());
}

#[test]
fn emit_import_emit_is_stable_for_every_kernel_and_target() {
    let mut checked = 0;
    for case in kernels_under_test() {
        let name = case
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let module =
            smemsync::reader::parse(&case.src).unwrap_or_else(|d| panic!("{name}: {}", d.message));
        for t in TARGETS {
            let target = Target::from_name(t).expect("known target");
            let Ok(first) = emit_mlir_kernels(&module.kernels, &target) else {
                continue;
            };
            let imported =
                smemsync::reader::mlir::import_mlir(&first, &target).unwrap_or_else(|d| {
                    let msgs: Vec<String> =
                        d.iter().map(|x| x.render(&name, &first, false)).collect();
                    panic!(
                        "{name} on {t}: import failed:\n{}\n{first}",
                        msgs.join("\n")
                    )
                });
            assert_eq!(
                imported.len(),
                module.kernels.len(),
                "{name} on {t}: kernel count"
            );
            let second = emit_mlir_kernels(&imported, &target)
                .unwrap_or_else(|d| panic!("{name} on {t}: re-emit failed: {d:?}"));
            assert_eq!(
                first, second,
                "{name} on {t}: emit(import(emit(k))) differs from emit(k)"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 40,
        "only {checked} kernel/target pairs round-tripped"
    );
}
