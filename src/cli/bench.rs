//! `smemsync bench`: hazards found, barriers placed and time taken, for the example kernels
//! and for generated kernels of growing size (10^3 ops by default, up to `--max-ops`).
//!
//! Generated kernels chain independent tiles: each tile stores to its own shared buffer,
//! reads another thread's element back, and every fourth tile does so inside a loop with a
//! symbolic trip count (a RAW and a loop-carried WAR hazard). Build with `--release` for
//! meaningful times.

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
    /// Print one generated real-size kernel instead of timing (`gemm`, `gemm-unrolled`).
    #[arg(long, value_name = "KERNEL")]
    pub print: Option<String>,
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

fn row(name: &str, ops: usize, k: &smemsync::Kernel, target: &Target) -> String {
    let opts = PlaceOptions {
        strategy: Strategy::Optimal,
        ..Default::default()
    };
    let t0 = Instant::now();
    let r = place_barriers(k, target, &opts);
    let dt = t0.elapsed();
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
            "{name:<40} {ops:>9} {:>9} {:>8} {:>6} {:>8} {:>10.2}",
            p.stats.hazards,
            p.stats.barriers_written,
            p.stats.warp_syncs_written,
            n.stats.barriers_written,
            dt.as_secs_f64() * 1e3
        ),
        _ => format!(
            "{name:<40} {ops:>9} {:>9} {:>8} {:>6} {:>8} {:>10.2}",
            "finding",
            "-",
            "-",
            "-",
            dt.as_secs_f64() * 1e3
        ),
    }
}

/// The generated real-size kernels, by name.
fn real_size(name: &str) -> Option<String> {
    use smemsync::bench_kernels::{GemmShape, gemm};
    match name {
        "gemm" => gemm(&GemmShape::realistic(false)),
        "gemm-unrolled" => gemm(&GemmShape::realistic(true)),
        _ => None,
    }
}

pub fn run(args: &BenchArgs) -> i32 {
    if let Some(name) = &args.print {
        return match real_size(name) {
            Some(src) => {
                print!("{src}");
                EXIT_OK
            }
            None => {
                eprintln!("error: no generated kernel named `{name}` (gemm, gemm-unrolled)");
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
    println!(
        "{:<40} {:>9} {:>9} {:>8} {:>6} {:>8} {:>10}",
        "kernel", "ops", "hazards", "barriers", "warp", "naive", "place ms"
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
