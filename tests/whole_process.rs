//! The whole `sync` process on large kernels (issue 12, "10^6 generated ops"): the kernel the
//! pipeline takes (`synchronize_owned`) gives what the borrowing pipeline gives, the streamed
//! printer writes what the string printer returns, `sync` prints the kernel it places and
//! `bench --process` reports every stage. Assertions are on outputs, never on time.

use std::process::Command;

use smemsync::emit::text::{CHUNK, print_kernel, write_kernel};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::{synchronize, synchronize_output, synchronize_owned};
use smemsync::target::Target;

mod common;

fn smemsync(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(args)
        .output()
        .expect("run smemsync");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The generated kernel of `bench` with about `ops` ops, as the tool prints it.
fn generated(ops: usize) -> String {
    let (code, text, err) = smemsync(&["bench", "--print", &format!("generated-{ops}")]);
    assert_eq!(code, 0, "{err}");
    text
}

fn examples() -> Vec<(String, String)> {
    (common::kernel_files(&["examples"]).into_iter())
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read");
            (p.display().to_string(), text)
        })
        .collect()
}

#[test]
fn the_streamed_text_is_the_printed_text_across_chunks() {
    let src = generated(20_000);
    let k = smemsync::reader::parse_kernel(&src).expect("parses");
    let printed = print_kernel(&k);
    assert!(printed.len() > 3 * CHUNK, "the kernel spans several chunks");
    let mut streamed = Vec::new();
    write_kernel(&k, &mut streamed).expect("a Vec takes every write");
    assert_eq!(String::from_utf8(streamed).expect("utf-8"), printed);
}

/// A writer that takes `room` bytes, then fails.
struct Full {
    room: usize,
    taken: usize,
}

impl std::io::Write for Full {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.taken + buf.len() > self.room {
            return Err(std::io::Error::other("full"));
        }
        self.taken += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_writer_stops_the_printer_with_its_error() {
    let k = smemsync::reader::parse_kernel(&generated(20_000)).expect("parses");
    let mut w = Full {
        room: CHUNK,
        taken: 0,
    };
    let err = write_kernel(&k, &mut w).expect_err("the writer fills up");
    assert_eq!(err.to_string(), "full");
    assert!(w.taken <= CHUNK);
}

/// The pipeline that writes the barriers in place (`synchronize_output`, what `sync` without
/// `--explain` runs) gives `owned`'s result: the same output kernel, op ids included (the
/// arena printed op by op), the same inserted ops, warnings, stats, fences and split, and no
/// kernel without the barriers.
fn output_only_agrees(
    k: &smemsync::Kernel,
    target: &Target,
    owned: &smemsync::sync::driver::Synchronized,
    what: &str,
) {
    let opts = PlaceOptions::default();
    let out = synchronize_output(k.clone(), target, &opts).expect(what);
    // Its type says the kernel placement ran on is gone (written over by the output).
    let smemsync::sync::driver::InPlace = out.with_waits;
    assert_eq!(
        print_kernel(&out.kernel),
        print_kernel(&owned.kernel),
        "{what}"
    );
    assert_eq!(
        format!("{:?}", out.kernel.ops),
        format!("{:?}", owned.kernel.ops),
        "{what}"
    );
    assert_eq!(out.inserted(), owned.inserted(), "{what}");
    assert_eq!(out.placement.stats, owned.placement.stats, "{what}");
    assert_eq!(out.placement.plan, owned.placement.plan, "{what}");
    let codes =
        |d: &[smemsync::Diagnostic]| d.iter().map(|x| x.message.clone()).collect::<Vec<_>>();
    assert_eq!(
        codes(&out.placement.warnings),
        codes(&owned.placement.warnings),
        "{what}"
    );
    assert_eq!(out.fences, owned.fences, "{what}");
    assert_eq!(
        format!("{:?}", out.split),
        format!("{:?}", owned.split),
        "{what}"
    );
    assert_eq!(out.waits, owned.waits, "{what}");
}

#[test]
fn the_pipeline_on_a_kernel_it_takes_gives_what_it_gives_on_a_borrowed_one() {
    let opts = PlaceOptions::default();
    for (name, src) in examples() {
        let Ok(m) = smemsync::reader::parse(&src) else {
            continue;
        };
        for t in ["gfx942", "gfx1201", "sm_80", "sm_90"] {
            let target = Target::from_name(t).expect("target");
            for k in &m.kernels {
                let borrowed = synchronize(k, &target, &opts);
                let owned = synchronize_owned(k.clone(), &target, &opts);
                match (borrowed, owned) {
                    (Ok(b), Ok(o)) => {
                        assert_eq!(
                            print_kernel(&b.kernel),
                            print_kernel(&o.kernel),
                            "{name} {t}"
                        );
                        assert_eq!(
                            print_kernel(b.with_waits()),
                            print_kernel(o.with_waits()),
                            "{name} {t}"
                        );
                        assert_eq!(b.placement.stats, o.placement.stats, "{name} {t}");
                        assert_eq!(b.waits, o.waits, "{name} {t}");
                        assert_eq!(b.input_ops, o.input_ops, "{name} {t}");
                        output_only_agrees(k, &target, &o, &format!("{name} {t}"));
                    }
                    (Err(b), Err(o)) => {
                        let codes = |d: &[smemsync::Diagnostic]| {
                            d.iter().map(|x| x.code).collect::<Vec<_>>()
                        };
                        assert_eq!(codes(&b), codes(&o), "{name} {t}");
                        let out = synchronize_output(k.clone(), &target, &opts)
                            .map(|_| ())
                            .expect_err(&format!("{name} {t}: fails as the others do"));
                        assert_eq!(codes(&out), codes(&o), "{name} {t}");
                    }
                    (b, o) => panic!("{name} {t}: {:?} vs {:?}", b.is_ok(), o.is_ok()),
                }
            }
        }
    }
}

#[test]
fn sync_prints_the_kernel_the_pipeline_places() {
    let src = generated(10_000);
    let dir = std::env::temp_dir().join(format!("smemsync-whole-process-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("gen.kir");
    std::fs::write(&file, &src).expect("write");
    let (code, out, err) = smemsync(&["sync", "--target", "gfx942", file.to_str().expect("path")]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 0, "{err}");
    let k = smemsync::reader::parse_kernel(&src).expect("parses");
    let target = Target::from_name("gfx942").expect("target");
    let s = synchronize(&k, &target, &PlaceOptions::default()).expect("synchronizes");
    assert!(s.placement.stats.barriers_written > 0);
    assert_eq!(out, print_kernel(&s.kernel));
}

#[test]
fn bench_process_reports_each_stage_of_each_size() {
    let (code, out, err) = smemsync(&["bench", "--process", "10000"]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(header[0], "kernel");
    assert!(
        header.contains(&"read") && header.contains(&"print"),
        "{out}"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 1, "one row: 10^4 ops only\n{out}");
    let cells: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(cells[0], "generated-10000");
    let k = smemsync::reader::parse_kernel(&generated(10_000)).expect("parses");
    assert_eq!(cells[1], k.ops.len().to_string());
    // read, sync, print, cpu and wall are numbers (or `-` where the platform has no clock).
    for c in &cells[2..7] {
        assert!(*c == "-" || c.parse::<f64>().is_ok(), "{c} in {}", rows[0]);
    }
}
