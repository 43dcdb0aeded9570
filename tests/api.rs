//! The public API (the facade of src/lib.rs) as a library user meets it: only items at the
//! crate root, never `smemsync::<module>::…`. Every test here would compile in a crate that
//! depends on smemsync with `default-features = false` (tests/downstream is such a crate).

use smemsync::{
    AccessKind, CheckOptions, DiagKind, Diagnostic, ErrorKind, Format, Outcome, RunOptions,
    Strategy, SyncKind, SyncOptions, Target,
};

fn example(name: &str) -> String {
    let path = format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    1 + text.lines().position(|l| l.contains(needle)).expect(needle)
}

fn gfx942() -> Target {
    Target::new("gfx942").expect("a known target")
}

#[test]
fn errors_convert_into_box_dyn_error_and_display_their_location() {
    fn read_bad() -> Result<(), Box<dyn std::error::Error>> {
        smemsync::read("kernel @k() block(4) {\n  %x = frobnicate 1\n}\n")?;
        Ok(())
    }
    let e = read_bad().unwrap_err();
    assert_eq!(e.to_string(), "2:8: error[E0150]: unknown op `frobnicate`");
    let e = e.downcast::<smemsync::Error>().expect("a smemsync::Error");
    assert_eq!(e.kind(), ErrorKind::Input);
    assert_eq!(e.kind().exit_code(), 2);
    let d = &e.diagnostics()[0];
    let at = e.location(d).expect("a located diagnostic");
    assert_eq!((at.line, at.column), (2, 8));
    assert!(e.render("k.kir", false).contains("--> k.kir:2:8"));
    assert_eq!(
        format!("{e:?}"),
        r#"Error { kind: Input, diagnostics: ["2:8: error[E0150]: unknown op `frobnicate`"] }"#
    );
    // A single diagnostic is an error too.
    let boxed: Box<dyn std::error::Error> = Box::new(d.clone());
    assert_eq!(boxed.to_string(), "error[E0150]: unknown op `frobnicate`");
}

#[test]
fn exit_codes_follow_the_worst_error_kind() {
    let user = Diagnostic::user("E0001", "bad input");
    let finding = Diagnostic::error(DiagKind::Finding, "C0001", "a race");
    let bug = Diagnostic::error(DiagKind::Verifier, "V0001", "a pass broke the IR");
    let warning = Diagnostic::warning(DiagKind::Finding, "W0310", "conservative");
    assert_eq!(ErrorKind::of(std::slice::from_ref(&warning)), None);
    let of = |ds: &[Diagnostic]| ErrorKind::of(ds).map(ErrorKind::exit_code);
    assert_eq!(of(&[warning.clone(), finding.clone()]), Some(1));
    assert_eq!(of(&[finding.clone(), user.clone()]), Some(2));
    assert_eq!(of(&[user, bug, finding]), Some(3));
}

#[test]
fn unknown_targets_are_errors_that_list_the_known_ones() {
    let e = Target::new("gfx999").unwrap_err();
    let d = &e.diagnostics()[0];
    assert_eq!(d.code, "E0200");
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("gfx942") && n.contains("sm_90"))
    );
    assert_eq!(Target::names().len(), 7);
    let t: Target = "sm_80".parse().expect("known");
    assert_eq!((t.name(), t.warp_size()), ("sm_80", 32));
    assert_eq!(gfx942().warp_size(), 64);
}

#[test]
fn a_tile_written_by_stores_and_read_by_wgmma_gets_a_reported_proxy_fence() {
    let src = "kernel @k(%Out: global f32[128]) block(128) {
  shared @a : f16[8, 16]
  shared @b : f16[16, 8]
  %t = tid.x
  %r = div %t, 16
  %c = rem %t, 16
  store @a[%r, %c], 1.0
  store @b[%c, %r], 2.0
  %acc = wgmma @a, @b, 0.0
  wgmma_commit
  wgmma_wait 0
  gstore %Out[%t], %acc
}
";
    let program = smemsync::read(src).expect("reads");
    let mut opts = SyncOptions::new(Target::new("sm_90").expect("known"));
    opts.explain = true;
    let s = smemsync::synchronize(&program, &opts).expect("synchronizes");
    let kinds: Vec<SyncKind> = s.kernels[0].inserted.iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [SyncKind::Barrier, SyncKind::ProxyFence],
        "{kinds:?}"
    );
    let f = &s.kernels[0].inserted[1];
    assert_eq!(f.op, "fence_proxy_async");
    assert!(f.at.contains("barrier"), "{}", f.at);
    assert!(f.reason.as_deref().is_some_and(|r| r.contains("store @b")));
    assert!(
        s.text()
            .contains("fence_proxy_async\n  barrier\n  %acc = wgmma")
    );
}

#[test]
fn transpose_gets_one_barrier_that_removes_the_raw_hazard() {
    let src = example("transpose.kir");
    let program = smemsync::read(&src).expect("reads");
    assert_eq!(program.kernel_names(), ["transpose"]);
    let mut opts = SyncOptions::new(gfx942());
    opts.explain = true;
    let s = smemsync::synchronize(&program, &opts).expect("synchronizes");
    let report = &s.kernels[0];
    let [b] = report.inserted.as_slice() else {
        panic!("one sync: {:?}", report.inserted)
    };
    assert_eq!((b.kind, b.op.as_str()), (SyncKind::Barrier, "barrier"));
    assert_eq!(b.line, Some(line_of(&src, "%y = load @tile")));
    let [h] = b.hazards.as_slice() else {
        panic!("one hazard: {:?}", b.hazards)
    };
    assert_eq!((h.kind.as_str(), h.buffer.as_str()), ("RAW", "@tile"));
    assert_eq!(h.source_line, Some(line_of(&src, "store @tile")));
    assert_eq!(h.carried_by, None);
    assert_eq!(report.stats.barriers_written, 1);
    assert!(s.text().contains("target \"gfx942\""));
    assert_eq!(s.to_string(), s.text());
    assert_eq!(s.program.declared_target(), Some("gfx942"));
    // Without explain the syncs are listed, the hazards not.
    let plain = smemsync::synchronize(&program, &SyncOptions::new(gfx942())).expect("syncs");
    assert!(plain.kernels[0].inserted[0].hazards.is_empty());
}

#[test]
fn check_returns_the_race_as_a_witness_and_the_synchronized_kernel_as_race_free() {
    let src = example("transpose.kir");
    let program = smemsync::read(&src).expect("reads");
    let v = smemsync::check(&program, &CheckOptions::new(None)).expect("checks");
    let w = v[0].witness().expect("a race");
    assert!(!v[0].is_race_free());
    assert_eq!(w.buffer, "tile");
    let kinds = [w.first.kind, w.second.kind];
    assert!(kinds.contains(&AccessKind::Write) && kinds.contains(&AccessKind::Read));
    assert_ne!(w.first.thread, w.second.thread);
    let lines = [w.first.location, w.second.location].map(|l| l.expect("located").line);
    let (store, load) = (
        line_of(&src, "store @tile"),
        line_of(&src, "%y = load @tile"),
    );
    assert!(
        lines == [store, load] || lines == [load, store],
        "{lines:?}"
    );
    let d = v[0].diagnostic.as_ref().expect("a diagnostic");
    assert_eq!(d.code, "C0001");
    assert!(
        program
            .render(std::slice::from_ref(d), "t.kir", false)
            .contains("t.kir:")
    );

    let synced = smemsync::synchronize(&program, &SyncOptions::new(gfx942())).expect("syncs");
    let v = smemsync::check(&synced.program, &CheckOptions::new(None)).expect("checks");
    assert!(v[0].is_race_free(), "{}", v[0].summary);
    assert!(matches!(
        v[0].outcome,
        Outcome::Proved { .. } | Outcome::Checked { .. }
    ));
}

#[test]
fn a_target_contradicting_the_declared_one_is_refused() {
    let program = smemsync::read(&example("transpose.kir")).expect("reads");
    let synced = smemsync::synchronize(&program, &SyncOptions::new(gfx942())).expect("syncs");
    let sm90 = Target::new("sm_90").expect("known");
    let e = smemsync::check(&synced.program, &CheckOptions::new(Some(sm90))).unwrap_err();
    assert_eq!(e.diagnostics()[0].code, "E0171");
    assert_eq!(e.kind().exit_code(), 2);
}

#[test]
fn ops_the_target_lacks_are_refused_before_synchronizing() {
    let program = smemsync::read(&example("tma-mbarrier-pipeline.kir")).expect("reads");
    let e = smemsync::synchronize(&program, &SyncOptions::new(gfx942())).unwrap_err();
    assert!(e.diagnostics().iter().all(|d| d.code == "E0170"), "{e}");
    assert_eq!(e.kind(), ErrorKind::Input);
    assert!(smemsync::verify(&program, &Target::new("sm_90").expect("known")).is_ok());
}

#[test]
fn run_executes_the_synchronized_transpose() {
    let program = smemsync::read(&example("transpose.kir")).expect("reads");
    let synced = smemsync::synchronize(&program, &SyncOptions::new(gfx942())).expect("syncs");
    let mut opts = RunOptions::new(None);
    opts.seed = 7;
    let out = smemsync::run(&synced.program, &opts).expect("runs");
    let [a, b] = out[0].buffers.as_slice() else {
        panic!("two buffers")
    };
    assert_eq!((a.name.as_str(), b.name.as_str()), ("in", "out"));
    assert_eq!(a.shape, [64, 64]);
    for i in 0..64 {
        for j in 0..64 {
            assert_eq!(b.data[i * 64 + j], a.data[j * 64 + i]);
        }
    }
    // The unsynchronized kernel reads an element before another thread wrote it.
    assert!(smemsync::run(&program, &opts).is_err());
}

#[test]
fn emit_writes_each_format_and_cuda_needs_one_kernel() {
    let src = example("transpose.kir");
    let sm90 = Target::new("sm_90").expect("known");
    let program = smemsync::read(&src).expect("reads");
    let synced = smemsync::synchronize(&program, &SyncOptions::new(sm90.clone())).expect("syncs");
    let cuda = smemsync::emit(&synced.program, Format::Cuda, &sm90).expect("cuda");
    assert!(cuda.contains("__syncthreads()"));
    let mlir = smemsync::emit(&synced.program, Format::Mlir, &sm90).expect("mlir");
    let back = smemsync::read_mlir(&mlir, &sm90).expect("reads its own MLIR");
    // MLIR does not carry the target the header declares (docs/ir.md).
    let without_target = synced.program.to_text().replace(" target \"sm_90\"", "");
    assert_eq!(back.to_text(), without_target);

    let two =
        smemsync::read(&format!("{src}\n{}", src.replace("@transpose", "@other"))).expect("reads");
    let e = smemsync::emit(&two, Format::Cuda, &sm90).unwrap_err();
    assert_eq!(e.diagnostics()[0].code, "E0710");
    let one = two.select("@other").expect("selects");
    assert_eq!(one.kernel_names(), ["other"]);
    assert_eq!(
        two.select("nope").unwrap_err().diagnostics()[0].code,
        "E0172"
    );
    assert_eq!(
        smemsync::emit(&two, Format::Text, &sm90).expect("text"),
        two.to_text()
    );
}

#[test]
fn the_naive_strategy_never_writes_fewer_barriers() {
    let program = smemsync::read(&example("reduction-tree.kir")).expect("reads");
    let optimal = smemsync::synchronize(&program, &SyncOptions::new(gfx942())).expect("syncs");
    let mut opts = SyncOptions::new(gfx942());
    opts.strategy = Strategy::Naive;
    let naive = smemsync::synchronize(&program, &opts).expect("syncs");
    let executed = |s: &smemsync::Synchronized| s.kernels[0].stats.barriers_executed;
    assert!(executed(&naive) >= executed(&optimal));
    assert!(executed(&optimal) >= optimal.kernels[0].stats.lower_bound);
}
