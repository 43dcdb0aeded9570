//! `smemsync bench`: hazards found, barriers placed and time taken, for the example kernels
//! and for generated kernels of growing size (10^3 ops by default, up to `--max-ops`).
//!
//! Generated kernels chain independent tiles: each tile stores to its own shared buffer,
//! reads another thread's element back, and every fourth tile does so inside a loop with a
//! symbolic trip count (a RAW and a loop-carried WAR hazard). Build with `--release` for
//! meaningful times. Each row prints wall time, the CPU time of the thread (Linux: on a loaded
//! machine it is the figure to compare) and the peak resident memory of the row.

use std::fmt::Write as _;
use std::time::Instant;

use smemsync::sync::{PlaceOptions, Strategy, place_barriers};
use smemsync::target::Target;

use super::{EXIT_OK, EXIT_USER};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Directory of example kernels to time (skipped when missing).
    #[arg(long, default_value = "examples")]
    pub examples: String,
    /// Largest generated kernel, in ops (powers of ten from 1000 up to this).
    #[arg(long, default_value_t = 1000)]
    pub max_ops: usize,
    /// Target GPU.
    #[arg(long, default_value = "gfx942")]
    pub target: String,
    /// Print one generated real-size kernel instead of timing (`gemm`, `gemm-unrolled`,
    /// `flash`, `flash-unrolled`, `flash-k-first`: its S loop loads K before Q; or a `--real`
    /// row's name such as `"gemm 128x128x64 t64 rolled"`).
    #[arg(long, value_name = "KERNEL")]
    pub print: Option<String>,
    /// Time the whole `sync` pipeline, then `check` on its output, on the real-size suite
    /// instead (GEMMs rolled and unrolled at 128x128x64 and 64x64x32 with 64, 256 and 1024
    /// threads, 32x32x32 and 256x256x64 with 256, the flash-attention loop rolled, unrolled
    /// and with K loaded first, the one-buffer n-pair family up to `--max-pairs`, nested
    /// loops to depth 8, constant trips 8..10^6, and a warp-specialized mbarrier pipeline of
    /// 10^3 and 10^4 trips stepping by 2 on its declared `sm_90`: issue 12's L9).
    #[arg(long)]
    pub real: bool,
    /// Largest n of the n-pair family in `--real` (powers of ten from 10).
    #[arg(long, default_value_t = 10_000)]
    pub max_pairs: usize,
    /// Only the `--real` rows whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
    /// Time the whole `sync` process instead (read and verify the text, synchronize, print),
    /// as the command runs it, on generated kernels of 10^4 ops up to this many (powers of
    /// ten): the time of each stage, the peak resident memory and the peak per op.
    #[arg(long, value_name = "OPS")]
    pub process: Option<usize>,
}

/// A generated kernel of about `ops` ops (see the module doc).
pub fn generate(ops: usize) -> String {
    let tiles = (ops / 8).max(1);
    let mut s = String::new();
    let _ = writeln!(s, "kernel @gen(%n: i32, %X: global f32[256]) block(256) {{");
    for i in 0..tiles {
        let _ = writeln!(s, "  shared @b{i} : f32[256]");
    }
    s.push_str("  %t = tid.x\n  %u = sub 255, %t\n  %x = gload %X[%t]\n");
    for i in 0..tiles {
        if i % 4 == 3 {
            let _ = writeln!(s, "  for %k{i} = 0 to %n step 1 {{");
            let _ = writeln!(s, "    store @b{i}[%t], %x");
            let _ = writeln!(s, "    %y{i} = load @b{i}[%u]");
            let _ = writeln!(s, "    %z{i} = add %y{i}, %x");
            let _ = writeln!(s, "    %w{i} = mul %z{i}, %x");
            let _ = writeln!(s, "  }}");
        } else {
            let _ = writeln!(s, "  store @b{i}[%t], %x");
            let _ = writeln!(s, "  %y{i} = load @b{i}[%u]");
            let _ = writeln!(s, "  %z{i} = add %y{i}, %x");
            let _ = writeln!(s, "  %w{i} = mul %z{i}, %x");
            let _ = writeln!(s, "  %v{i} = add %w{i}, %x");
            let _ = writeln!(s, "  %q{i} = mul %v{i}, %x");
            let _ = writeln!(s, "  %r{i} = add %q{i}, %x");
        }
    }
    s.push_str("}\n");
    s
}

/// CPU time of the calling thread in nanoseconds (Linux `/proc/thread-self/schedstat`), if
/// the platform reports it: on a loaded machine wall time counts other processes too.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Milliseconds of CPU between two readings of [`thread_cpu_ns`], or "-".
fn cpu_ms(from: Option<u64>) -> String {
    match (from, thread_cpu_ns()) {
        (Some(a), Some(b)) => format!("{:.2}", b.saturating_sub(a) as f64 / 1e6),
        _ => "-".into(),
    }
}

fn row(name: &str, ops: usize, k: &smemsync::Kernel, target: &Target) -> String {
    let opts = PlaceOptions {
        strategy: Strategy::Optimal,
        ..Default::default()
    };
    let reset = reset_peak();
    let c0 = thread_cpu_ns();
    let t0 = Instant::now();
    let r = place_barriers(k, target, &opts);
    let dt = t0.elapsed();
    let cpu = cpu_ms(c0);
    let peak = peak_mib()
        .filter(|_| reset)
        .map_or_else(|| "-".into(), |m| format!("{m:.1}"));
    let naive = place_barriers(
        k,
        target,
        &PlaceOptions {
            strategy: Strategy::Naive,
            ..Default::default()
        },
    );
    match (r, naive) {
        (Ok(p), Ok(n)) => format!(
            "{name:<40} {ops:>9} {:>9} {:>8} {:>6} {:>8} {:>10.2} {cpu:>10} {peak:>8}",
            p.stats.hazards,
            p.stats.barriers_written,
            p.stats.warp_syncs_written,
            n.stats.barriers_written,
            dt.as_secs_f64() * 1e3
        ),
        _ => format!(
            "{name:<40} {ops:>9} {:>9} {:>8} {:>6} {:>8} {:>10.2} {cpu:>10} {peak:>8}",
            "finding",
            "-",
            "-",
            "-",
            dt.as_secs_f64() * 1e3
        ),
    }
}

/// A generated real-size kernel by its short name, or any row of the real-size suite by its
/// name in the table.
fn real_size(name: &str) -> Option<String> {
    if let Some(n) = name.strip_prefix("generated-") {
        return n.parse().ok().map(generate);
    }
    smemsync::bench_kernels::named(name).or_else(|| {
        real_kernels(10)
            .into_iter()
            .find(|(row, _)| row == name)
            .map(|(_, src)| src)
    })
}

pub fn run(args: &BenchArgs) -> i32 {
    if let Some(name) = &args.print {
        return match real_size(name) {
            Some(src) => {
                print!("{src}");
                EXIT_OK
            }
            None => {
                let names = smemsync::bench_kernels::NAMED.join(", ");
                eprintln!(
                    "error: no generated kernel named `{name}` ({names}, or a `--real` row name)"
                );
                EXIT_USER
            }
        };
    }
    let target = match Target::from_name(&args.target) {
        Ok(t) => t,
        Err(d) => {
            eprintln!("error: {}", d.message);
            return EXIT_USER;
        }
    };
    if args.real {
        return real_suite(args, &target);
    }
    if let Some(max) = args.process {
        return process_rows(max, &target);
    }
    println!(
        "{:<40} {:>9} {:>9} {:>8} {:>6} {:>8} {:>10} {:>10} {:>8}",
        "kernel", "ops", "hazards", "barriers", "warp", "naive", "place ms", "cpu ms", "peak MiB"
    );
    if let Ok(rd) = std::fs::read_dir(&args.examples) {
        let mut files: Vec<_> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "kir"))
            .collect();
        files.sort();
        for f in files {
            let Ok(src) = std::fs::read_to_string(&f) else {
                continue;
            };
            let Ok(m) = smemsync::reader::parse(&src) else {
                continue;
            };
            for k in &m.kernels {
                let name = f
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                println!("{}", row(&name, k.ops.len(), k, &target));
            }
        }
    }
    let mut n = 1000;
    while n <= args.max_ops {
        let src = generate(n);
        match smemsync::reader::parse_kernel(&src) {
            Ok(k) => println!(
                "{}",
                row(&format!("generated-{n}"), k.ops.len(), &k, &target)
            ),
            Err(d) => {
                eprintln!("error: generated kernel does not parse: {}", d.message);
                return EXIT_USER;
            }
        }
        n *= 10;
    }
    EXIT_OK
}

/// The real-size suite's kernels: name and source, in the order the table prints them.
fn real_kernels(max_pairs: usize) -> Vec<(String, String)> {
    use smemsync::bench_kernels::{
        const_trip, mbar_stepped, n_pairs, nested_loops, real_tiled_kernels,
    };
    let mut out = real_tiled_kernels();
    let mut n = 10;
    while n <= max_pairs {
        out.push((format!("one-buffer pairs n={n}"), n_pairs(n)));
        n *= 10;
    }
    for depth in 1..=8 {
        out.push((format!("nested loops depth {depth}"), nested_loops(depth)));
    }
    for trips in [8, 64, 256, 257, 1000, 10_000, 1_000_000] {
        out.push((format!("constant trips {trips}"), const_trip(trips)));
    }
    for trips in [1000, 10_000] {
        out.push((
            format!("mbarrier step-2 trips {trips}"),
            mbar_stepped(trips),
        ));
    }
    out
}

/// `bench --process`: the whole `sync` process, stage by stage, on generated kernels of 10^4
/// ops up to `max` (powers of ten), as `smemsync sync` runs it: reading and verifying the text
/// (`cli::load_for_target`), the pipeline on the kernel it takes (`synchronize_output`, as `sync` runs it), and
/// printing (`write_kernel`, to a sink: the cost of a terminal or a file is not smemsync's).
/// CPU milliseconds of the thread per stage; the peak resident memory of the row (the
/// generated text included, as the command holds its input) and that peak per op.
fn process_rows(max: usize, target: &Target) -> i32 {
    println!(
        "{:<24} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10}",
        "kernel",
        "ops",
        "read ms",
        "sync ms",
        "print ms",
        "cpu ms",
        "wall ms",
        "peak MiB",
        "KiB/op"
    );
    let mut n = 10_000;
    while n <= max {
        let input = super::Input {
            name: format!("generated-{n}"),
            text: generate(n),
            ttgir: None,
        };
        if let Err(code) = process_row(&input, target) {
            return code;
        }
        n *= 10;
    }
    EXIT_OK
}

/// One row of [`process_rows`]; the error is an exit code (a generated kernel that does not
/// read, or a finding).
fn process_row(input: &super::Input, target: &Target) -> Result<(), i32> {
    use smemsync::sync::driver::synchronize_output;
    let reset = reset_peak();
    let t0 = Instant::now();
    let c0 = thread_cpu_ns();
    let mut kernels = super::load_for_target(input, Some(target))?;
    let c1 = thread_cpu_ns();
    let Some(k) = kernels.pop() else {
        return Err(EXIT_USER);
    };
    let ops = k.ops.len();
    let synced = synchronize_output(k, target, &PlaceOptions::default());
    let c2 = thread_cpu_ns();
    let s = synced.map_err(|d| {
        super::report(input, &d);
        super::exit_code(&d)
    })?;
    let printed = smemsync::emit::text::write_kernel(&s.kernel, &mut std::io::sink());
    let c3 = thread_cpu_ns();
    let wall = t0.elapsed().as_secs_f64() * 1e3;
    if printed.is_err() {
        return Err(EXIT_USER);
    }
    let ms = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.1}", b.saturating_sub(a) as f64 / 1e6),
        _ => "-".into(),
    };
    let peak = peak_mib().filter(|_| reset);
    let (peak, per_op) = peak.map_or_else(
        || ("-".into(), "-".into()),
        |m| (format!("{m:.1}"), format!("{:.2}", m * 1024.0 / ops as f64)),
    );
    println!(
        "{:<24} {ops:>9} {:>10} {:>10} {:>10} {:>10} {wall:>10.1} {peak:>9} {per_op:>10}",
        input.name,
        ms(c0, c1),
        ms(c1, c2),
        ms(c2, c3),
        ms(c0, c3),
    );
    Ok(())
}

/// Resets the process' peak resident memory (Linux `clear_refs`); false where unsupported
/// (the figure is then the process' peak so far).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Peak resident memory in MiB (`VmHWM`), if the platform reports it.
fn peak_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Interpretation bounds for [`check_column`]: a scalar parameter with a declared range and
/// no default takes three times its least value (within the range), so that a pipelined
/// loop over `%K / 64` runs three iterations; the checker's own fallback (4) may lie below
/// the range and skip the loop.
fn check_bounds(k: &smemsync::Kernel) -> Vec<(String, i64)> {
    use smemsync::ir::Param;
    k.params
        .iter()
        .filter_map(|p| match p {
            Param::Scalar(v) if k.param_defaults.get(*v).is_none() => {
                let (lo, hi) = (*k.param_ranges.get(*v))?;
                let x = (3 * i64::from(lo)).min(i64::from(hi));
                Some((k.value_name(*v).to_string(), x))
            }
            _ => None,
        })
        .collect()
}

/// `check` on a synchronized kernel as the command runs it (static proof first, else
/// interpretation, at [`check_bounds`]): CPU milliseconds of the thread (wall time where the
/// platform does not report it) and the verdict: `proved` (the static proof),
/// `interpreted` (the proof refused it; no race found by executing it), or `race`,
/// `deadlock`, `error` (the checker's findings: a wrong placement or kernel).
fn check_column(k: &smemsync::Kernel, target: &Target) -> (String, &'static str) {
    use smemsync::check::{CheckOptions, Verdict, check_race_free};
    let opts = CheckOptions {
        target: Some(*target),
        bounds: check_bounds(k),
        ..CheckOptions::default()
    };
    let c0 = thread_cpu_ns();
    let t0 = Instant::now();
    let r = check_race_free(k, &opts);
    let ms = match c0 {
        Some(_) => cpu_ms(c0),
        None => format!("{:.2}", t0.elapsed().as_secs_f64() * 1e3),
    };
    let verdict = match r.verdict {
        Verdict::Proved { ref not_shown, .. } if not_shown.is_empty() => "proved",
        Verdict::Proved { ref not_shown, .. }
            if not_shown
                .iter()
                .any(|n| n.what == smemsync::check::proof_exec::Obligation::Budget) =>
        {
            "proved-budget"
        }
        Verdict::Proved { .. } => "proved-partly",
        Verdict::Checked { .. } => "interpreted",
        Verdict::Race(_) => "race",
        Verdict::Deadlock(_) => "deadlock",
        Verdict::ExecError(_) => "error",
    };
    (ms, verdict)
}

/// `bench --real`: the whole `sync` pipeline (waits, joint placement, lowering, verifier) per
/// kernel: time, peak memory, hazards, barriers written and executed, conservative answers;
/// then `check` on the output ([`check_column`]).
fn real_suite(args: &BenchArgs, target: &Target) -> i32 {
    use smemsync::sync::driver::synchronize;
    let exact_peak = reset_peak();
    println!(
        "{:<34} {:>7} {:>10} {:>10} {:>8} {:>8} {:>8} {:>12} {:>5} {:>10} {:>11}",
        "kernel",
        "ops",
        "sync ms",
        "cpu ms",
        "peak MiB",
        "hazards",
        "barriers",
        "executed",
        "cons",
        "check ms",
        "check"
    );
    for (name, src) in real_kernels(args.max_pairs) {
        if args
            .only
            .as_ref()
            .is_some_and(|o| !name.contains(o.as_str()))
        {
            continue;
        }
        let k = match smemsync::reader::parse_kernel(&src) {
            Ok(k) => k,
            Err(d) => {
                eprintln!(
                    "error: generated kernel {name} does not parse: {}",
                    d.message
                );
                return EXIT_USER;
            }
        };
        // A row whose kernel declares its target (the mbarrier pipelines: sm_90) runs on it.
        let target = match k.target.as_deref().map(Target::from_name) {
            Some(Ok(t)) => t,
            _ => *target,
        };
        let target = &target;
        reset_peak();
        let opts = PlaceOptions::default();
        let c0 = thread_cpu_ns();
        let t0 = Instant::now();
        let r = synchronize(&k, target, &opts);
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let cpu = cpu_ms(c0);
        let peak = peak_mib().map_or_else(|| "-".into(), |m| format!("{m:.1}"));
        match r {
            Ok(s) => {
                let st = &s.placement.stats;
                let (check_ms, verdict) = check_column(&s.kernel, target);
                println!(
                    "{name:<34} {:>7} {ms:>10.2} {cpu:>10} {peak:>8} {:>8} {:>8} {:>12} {:>5} {check_ms:>10} {verdict:>11}",
                    k.ops.len(),
                    st.hazards,
                    st.barriers_written,
                    st.barriers_executed,
                    st.conservative
                );
            }
            Err(_) => println!(
                "{name:<34} {:>7} {ms:>10.2} {cpu:>10} {peak:>8} {:>8} {:>8} {:>12} {:>5}",
                k.ops.len(),
                "finding",
                "-",
                "-",
                "-"
            ),
        }
    }
    if !exact_peak {
        println!("(peak memory: the process' peak so far; this platform cannot reset it)");
    }
    EXIT_OK
}
