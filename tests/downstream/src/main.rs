//! A downstream user of smemsync's public API: for each kernel file given, read → synchronize →
//! check → emit MLIR, printing one line per kernel. It names nothing outside the facade (the
//! internals are not even compiled public without smemsync's `internals` feature), and `?`
//! turns smemsync's error into `Box<dyn Error>`.
//!
//! Usage: `smemsync-downstream TARGET FILE...`; exits 1 if a kernel is not race-free after
//! synchronization.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [target, files @ ..] = args.as_slice() else {
        return Err("usage: smemsync-downstream TARGET FILE...".into());
    };
    let target: smemsync::Target = target.parse()?;
    let mut all_race_free = true;
    for file in files {
        let text = std::fs::read_to_string(file)?;
        let program = match smemsync::read(&text) {
            Ok(p) => p,
            Err(e) => {
                eprint!("{}", e.render(file, false));
                return Err(e.into());
            }
        };
        let mut opts = smemsync::SyncOptions::new(target.clone());
        opts.explain = true;
        let synced = smemsync::synchronize(&program, &opts)?;
        let verdicts = smemsync::check(
            &synced.program,
            &smemsync::CheckOptions::new(Some(target.clone())),
        )?;
        let mlir = smemsync::emit(&synced.program, smemsync::Format::Mlir, &target)?;
        for (report, verdict) in synced.kernels.iter().zip(&verdicts) {
            all_race_free &= verdict.is_race_free();
            let hazards: usize = report.inserted.iter().map(|s| s.hazards.len()).sum();
            println!(
                "{file}: @{}: {} sync(s) inserted removing {hazards} hazard(s); {}; {} lines of MLIR",
                report.name,
                report.inserted.len(),
                verdict.summary,
                mlir.lines().count()
            );
        }
    }
    if all_race_free {
        Ok(())
    } else {
        Err("a synchronized kernel is not race-free".into())
    }
}
