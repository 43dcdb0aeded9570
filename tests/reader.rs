//! Reader properties: every kernel file in the repository round-trips through the printer,
//! and no input, however malformed, makes the reader, verifier or printer panic.

use std::path::PathBuf;

use smemsync::Kernel;
use smemsync::diag::Span;
use smemsync::emit::text::print_kernels;
use smemsync::ir::SecondaryMap;
use smemsync::reader::parse;
use smemsync::verify::verify;

mod common;
use common::Rng;

fn repo_files() -> Vec<PathBuf> {
    common::kernel_files_under(&["examples", "tests", "benches", "fuzz"])
}

/// The kernel with every span cleared: what "the same kernel" means structurally.
fn structure(k: &Kernel) -> String {
    let mut k = k.clone();
    k.op_spans = SecondaryMap::default();
    k.buffer_spans = SecondaryMap::default();
    k.global_spans = SecondaryMap::default();
    k.value_spans = SecondaryMap::default();
    k.group_spans = SecondaryMap::default();
    k.param_default_spans = SecondaryMap::default();
    k.global_dim_spans = SecondaryMap::default();
    k.kernel_span = Span::UNDEF;
    k.block_span = Span::UNDEF;
    k.grid_span = Span::UNDEF;
    k.target_span = Span::UNDEF;
    for d in &mut k.layouts {
        d.span = Span::UNDEF;
        d.text_span = Span::UNDEF;
    }
    format!("{k:?}")
}

/// Files whose RUN line expects a failure are negative tests of the reader.
fn expects_failure(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("// EXIT:") && !l.contains("EXIT: 0"))
}

/// The read-only visitors (`OpKind::for_each_operand`, `for_each_memref`) see exactly what the
/// mutating ones do, in the same order, on every op of every kernel file.
#[test]
fn read_only_visitors_agree_with_the_mutating_ones() {
    let mut ops = 0;
    for f in repo_files() {
        let text = std::fs::read_to_string(&f).expect("read");
        let Ok(m) = parse(&text) else {
            continue;
        };
        for k in &m.kernels {
            for (_, od) in k.ops.iter() {
                let (mut seen, mut changed) = (Vec::new(), Vec::new());
                od.kind.for_each_operand(|o| seen.push(o));
                od.kind
                    .clone()
                    .for_each_operand_mut(&mut |o| changed.push(*o));
                assert_eq!(seen, changed, "{}: {:?}", f.display(), od.kind);
                let (mut seen, mut changed) = (Vec::new(), Vec::new());
                od.kind.for_each_memref(|m| seen.push(m));
                od.kind
                    .clone()
                    .for_each_memref_mut(&mut |m| changed.push(*m));
                assert_eq!(seen, changed, "{}: {:?}", f.display(), od.kind);
                ops += 1;
            }
        }
    }
    assert!(ops > 1000, "only {ops} ops visited");
}

#[test]
fn every_kernel_file_round_trips() {
    let files = repo_files();
    assert!(
        files.len() >= 10,
        "expected the examples and file tests, found {}",
        files.len()
    );
    let mut checked = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        // TTGIR file tests (tests/filetests/ttgir) are imported, not parsed as `.kir`.
        if expects_failure(&text) || smemsync::reader::ttgir::looks_like_ttgir(&text) {
            continue;
        }
        let m = parse(&text)
            .unwrap_or_else(|d| panic!("{}: {}", f.display(), d.render("f", &text, false)));
        for k in &m.kernels {
            let errs = verify(k);
            assert!(errs.is_empty(), "{}: {:?}", f.display(), errs);
        }
        let printed = print_kernels(&m.kernels);
        let again = parse(&printed).unwrap_or_else(|d| {
            panic!(
                "{}: printed form does not parse: {}\n{printed}",
                f.display(),
                d.render("p", &printed, false)
            )
        });
        assert_eq!(m.kernels.len(), again.kernels.len());
        for (a, b) in m.kernels.iter().zip(&again.kernels) {
            assert_eq!(
                structure(a),
                structure(b),
                "{}: round trip changed the kernel",
                f.display()
            );
        }
        assert_eq!(
            print_kernels(&again.kernels),
            printed,
            "{}: printing is not a fixed point",
            f.display()
        );
        checked += 1;
    }
    assert!(checked >= 10);
}

const FRAGMENTS: &[&str] = &[
    "%",
    "@",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    ":",
    "=",
    "<-",
    "\"",
    "-",
    "-1",
    "0",
    "99999999999999999999",
    "1e400",
    "1.5",
    "for",
    "if",
    "else",
    "while",
    "do",
    "stage",
    "yield",
    "condition",
    "barrier",
    "view",
    "load",
    "store",
    "local_load",
    "tid.x",
    "shared @q : f32[0]",
    "kernel @z() {",
    "\n",
    " ",
    "é",
    "\u{0}",
    "named_sync 99, 0",
    "mbar_wait",
    "cp_async",
    "iter(",
    "%t",
    "@s",
    "layout",
    "waitcnt vmcnt(",
    "block(0)",
];

/// Applies one random edit: delete a range, duplicate a range, or insert a fragment.
fn mutate(src: &str, rng: &mut Rng) -> String {
    let chars: Vec<char> = src.chars().collect();
    let n = chars.len().max(1);
    let a = rng.index(n);
    let b = (a + rng.index(12)).min(chars.len());
    let mut out: Vec<char> = Vec::with_capacity(n + 16);
    match rng.index(3) {
        0 => {
            out.extend(&chars[..a.min(chars.len())]);
            out.extend(&chars[b..]);
        }
        1 => {
            out.extend(&chars[..b]);
            out.extend(&chars[a.min(chars.len())..b]);
            out.extend(&chars[b..]);
        }
        _ => {
            out.extend(&chars[..a.min(chars.len())]);
            out.extend(FRAGMENTS[rng.index(FRAGMENTS.len())].chars());
            out.extend(&chars[a.min(chars.len())..]);
        }
    }
    out.into_iter().collect()
}

/// Parsing, verifying, printing and reparsing never panics, and every rejection carries a
/// diagnostic whose primary span lies inside the input.
#[test]
fn mutated_inputs_never_panic() {
    let seeds: Vec<String> = repo_files()
        .into_iter()
        .map(|f| std::fs::read_to_string(f).expect("read"))
        .collect();
    let mut rng = Rng::new(0x5eed);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    let mut cases = 0;
    let mut rejected = 0;
    while std::time::Instant::now() < deadline && cases < 20_000 {
        let base = &seeds[rng.index(seeds.len())];
        let mut text = base.clone();
        for _ in 0..=rng.index(4) {
            text = mutate(&text, &mut rng);
        }
        let result = std::panic::catch_unwind(|| match parse(&text) {
            Err(d) => {
                let sp = d.primary_span();
                assert!(
                    sp.is_some_and(|s| s.is_undef() || s.lo as usize <= text.len()),
                    "span outside input: {d:?}"
                );
                let _ = d.render("m", &text, false);
                false
            }
            Ok(m) => {
                let mut bad = false;
                for k in &m.kernels {
                    for d in verify(k) {
                        let _ = d.render("m", &text, false);
                        bad = true;
                    }
                }
                if !bad {
                    let p = print_kernels(&m.kernels);
                    parse(&p).expect("printed form of a valid kernel must parse");
                }
                bad
            }
        });
        match result {
            Ok(r) => rejected += r as usize,
            Err(_) => panic!("reader panicked on input:\n{text}"),
        }
        cases += 1;
    }
    assert!(cases > 100, "only {cases} cases ran");
    let _ = rejected;
}

/// A kernel whose store sits inside `d` nested regions of `kind` (`if`, `for`, `while` or
/// `stage`), after an initializing store and before a load of another thread's element. Line
/// `6 + i` opens level `i + 1` (`6 + 4 i` for `while`).
fn nested(kind: &str, d: usize) -> String {
    let mut s = String::from(
        "kernel @k() block(64) {\nshared @a : f32[64]\n%t = tid.x\n%c = cmp lt %t, 32\nstore @a[%t], 0.0\n",
    );
    for i in 0..d {
        s.push_str(&match kind {
            "if" => "if %c {\n".to_string(),
            "for" => format!("for %i{i} = 0 to 1 step 1 {{\n"),
            "while" => format!("while {{\n%w{i} = cmp lt %t, 0\ncondition %w{i}\n}} do () {{\n"),
            _ => "stage \"s\" {\n".to_string(),
        });
    }
    s.push_str("store @a[%t], 1.0\n");
    s.push_str(&"}\n".repeat(d));
    s.push_str("%x = load @a[0]\n}\n");
    s
}

/// Runs `f` on a thread with the default 2 MiB test stack (a stack overflow aborts the test).
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic");
}

/// Nesting one region deeper than the limit is refused with E0163 at the opening of the
/// first region too many (counted per kind), and 5000 levels do not overflow the reader.
#[test]
fn nesting_beyond_the_limit_is_refused_where_it_starts() {
    use smemsync::verify::limits::MAX_NESTING;
    on_small_stack(|| {
        for kind in ["if", "for", "while", "stage"] {
            for d in [MAX_NESTING + 1, 5000] {
                let src = nested(kind, d);
                let err = parse(&src).expect_err("too deep");
                assert_eq!(err.code, "E0163", "{kind} x{d}: {err:?}");
                let line = smemsync::diag::line_number(&src, err.primary_span().expect("span"));
                let per_level = if kind == "while" { 4 } else { 1 };
                assert_eq!(line, Some(6 + MAX_NESTING * per_level), "{kind} x{d}");
            }
        }
    });
}

/// At the nesting limit every pass runs on a 2 MiB stack: reader, verifier, printer, sync
/// (block and split barriers), waits, the checker, smem planning and both emitters; the MLIR
/// importer reads the emitted MLIR back and refuses one `scf.if` more.
#[test]
fn nesting_at_the_limit_runs_every_pass_on_a_test_stack() {
    use smemsync::target::Target;
    use smemsync::verify::limits::MAX_NESTING;
    on_small_stack(|| {
        for kind in ["if", "for", "while", "stage"] {
            let m = parse(&nested(kind, MAX_NESTING)).expect("at the limit parses");
            let k = &m.kernels[0];
            assert!(verify(k).is_empty(), "{kind}");
            parse(&print_kernels(&m.kernels)).expect("round trip");
            for t in ["gfx942", "gfx1201", "sm_90"] {
                let t = Target::from_name(t).expect("target");
                let opts = smemsync::sync::PlaceOptions::default();
                let s = smemsync::sync::driver::synchronize(k, &t, &opts).expect("sync");
                let copts = smemsync::check::CheckOptions {
                    target: Some(t),
                    ..Default::default()
                };
                let racy = smemsync::check::check_race_free(k, &copts);
                let fixed = smemsync::check::check_race_free(&s.kernel, &copts);
                assert!(racy.to_diagnostic(k).is_some(), "{kind}: the input races");
                let d = fixed.to_diagnostic(&s.kernel);
                assert!(d.is_none(), "{kind} on {}: synced races: {d:?}", t.name);
                smemsync::sync::waits::plan_waits(k, &t).expect("waits");
                smemsync::emit::cuda::emit_cuda(k, &t, &Default::default()).ok();
            }
            smemsync::transform::smem_plan::plan_shared_memory(k);
            let t = Target::from_name("gfx942").expect("target");
            let mlir = smemsync::emit::mlir::emit_mlir_kernels(&m.kernels, &t).expect("mlir");
            smemsync::reader::mlir::import_mlir(&mlir, &t).expect("mlir reads back");
        }
        let t = Target::from_name("gfx942").expect("target");
        let m = parse(&nested("if", MAX_NESTING)).expect("at the limit");
        let mlir = smemsync::emit::mlir::emit_mlir_kernels(&m.kernels, &t).expect("mlir");
        let open = mlir.find("scf.if").expect("an scf.if");
        let mut more = mlir.clone();
        more.insert_str(open, "scf.if %c {\n");
        let close = more.rfind("gpu.return").expect("return");
        more.insert_str(close, "}\n");
        let errs = smemsync::reader::mlir::import_mlir(&more, &t).expect_err("too deep");
        assert!(errs.iter().any(|d| d.code == "E0163"), "{errs:?}");
    });
}
