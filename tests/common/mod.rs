//! What the integration tests share: listing the repository's kernel files
//! ([`kernel_files`], [`kernel_files_under`]), parsing a kernel the test wrote (panicking with
//! the rendered diagnostics), finding ops, the one seeded PRNG and random kernel generator
//! (`smemsync::gen`, re-exported), and minimizers that shrink a failing case before it is
//! reported.
//!
//! Minimizers:
//! - [`shrink_text`]: delta debugging over the lines of a kernel (Zeller's ddmin, one pass per
//!   chunk size, halving down to single lines, plus removal of whole `{ … }` blocks and of a
//!   block's braces alone); a candidate counts only if it still parses, verifies and fails.
//!   At most [`SHRINK_ATTEMPTS`] candidates are tried, for at most [`SHRINK_TIME`], each
//!   costing one run of the property.
//! - [`shrink_on_panic`]: runs a property that asserts; when it panics on a kernel, shrinks the
//!   kernel with [`shrink_text`] and panics again with the first message and the smallest
//!   failing kernel.
//! - [`shrink_config`]: for seed-driven oracles, turns the generator's options down one at a
//!   time (fewer statements, shallower nesting, fewer threads, features off) while the same
//!   seed still fails; [`shrink_config_on_panic`] does it for a property that asserts. Unlike
//!   [`shrink_text`] it keeps the generator's invariants (a barrier after every access).
//!
//! Submodule [`param_cases`]: the generated parameter kernels of the uniform and unranged
//! parameter tests. Submodule [`two_roles`]: the two-role mbarrier pipeline kernels of the
//! role tests ([`TwoRoles`]). Submodule [`switch`]: the helpers of the tests that compare an analysis with a shortcut
//! switched on and off over lists of kernels and targets. [`XorShift`]: the small xorshift64*
//! stream of the tests whose case lists were drawn from it (a different stream from [`Rng`]).
//!
//! Each test crate uses part of this module.
#![allow(
    dead_code,
    unused_imports,
    reason = "each test crate uses a different part of the shared module"
)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use smemsync::ir::{Kernel, Op, OpKind};

pub use smemsync::r#gen::{
    GenConfig, Rng, copy_paths_kernel_text, hazard_kernel_text, random_kernel, random_kernel_text,
};

pub mod param_cases;
pub mod switch;
pub mod two_roles;

pub use two_roles::TwoRoles;

/// A small deterministic generator (xorshift64*, Vigna 2016), seeded by its field (non-zero).
/// Kept apart from [`Rng`] so that the cases the tests using it draw stay the same.
pub struct XorShift(pub u64);

impl XorShift {
    /// Uniform in `0..n` (up to a small bias); `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// `sync --target sm_90` of `src` in process: its error codes, or its output after checking
/// it neither races nor deadlocks in the interpreter (`schedules` schedules).
pub fn sync_sm90_race_free(name: &str, src: &str, schedules: u32) -> Result<Kernel, Vec<String>> {
    use smemsync::check::Verdict;
    let k = parse_verified_as(name, src);
    let t = smemsync::target::Target::from_name("sm_90").expect("sm_90");
    let opts = smemsync::sync::PlaceOptions::default();
    match smemsync::sync::driver::synchronize(&k, &t, &opts) {
        Err(ds) => Err((ds.iter())
            .filter(|d| d.severity == smemsync::diag::Severity::Error)
            .map(|d| d.code.to_string())
            .collect()),
        Ok(out) => {
            let v = interpret_only(&out.kernel, schedules);
            assert!(
                !matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
                "{name}: `sync` accepted it and its output is {v:?}\n{src}"
            );
            Ok(out.kernel)
        }
    }
}

/// Runs the `smemsync` binary with `args` (no colours) and returns its standard output;
/// panics with its standard error when it exits with an error.
pub fn smemsync_stdout(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "smemsync {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the `smemsync` binary with `args` (no colours) and `input` on its standard input:
/// whether it exited successfully, its standard output and its standard error.
pub fn smemsync_with_stdin(args: &[&str], input: &str) -> (bool, String, String) {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_smemsync"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    (child.stdin.take().expect("stdin"))
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("waits");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The `.kir` files directly in each of `dirs` (paths relative to the crate root), sorted.
/// Panics when a directory cannot be read: a test that lists none would pass vacuously.
pub fn kernel_files(dirs: &[&str]) -> Vec<std::path::PathBuf> {
    list_kernel_files(dirs, false)
}

/// The `.kir` files in each of `dirs` (relative to the crate root) and every directory below
/// them but build outputs (`target`) and hidden ones, sorted; panics as [`kernel_files`].
pub fn kernel_files_under(dirs: &[&str]) -> Vec<std::path::PathBuf> {
    list_kernel_files(dirs, true)
}

/// A kernel and the name a failing assertion reports.
pub type Named = (String, Kernel);

/// The kernels of the `.kir` files directly in `dirs` (relative to the crate root) that parse
/// and verify, named by path, in path order. Panics when no more than `min` are read (a list
/// that lost its files would make the comparison vacuous).
pub fn verified_file_kernels(dirs: &[&str], min: usize) -> Vec<Named> {
    verified_kernels_of(&kernel_files(dirs), dirs, min)
}

/// As [`verified_file_kernels`], over the files of `dirs` and every directory below them
/// ([`kernel_files_under`]).
pub fn verified_file_kernels_under(dirs: &[&str], min: usize) -> Vec<Named> {
    verified_kernels_of(&kernel_files_under(dirs), dirs, min)
}

/// The kernels of `files` that parse and verify, named by path; panics when no more than
/// `min` are read from `dirs`.
fn verified_kernels_of(files: &[std::path::PathBuf], dirs: &[&str], min: usize) -> Vec<Named> {
    let out: Vec<Named> = files
        .iter()
        .filter_map(|p| {
            let k = smemsync::reader::parse_kernel(&std::fs::read_to_string(p).ok()?).ok()?;
            smemsync::verify::verify(&k)
                .is_empty()
                .then(|| (p.display().to_string(), k))
        })
        .collect();
    assert!(
        out.len() > min,
        "only {} kernels read from {dirs:?}",
        out.len()
    );
    out
}

/// [`kernel_files`] or, `recursive`, [`kernel_files_under`].
fn list_kernel_files(dirs: &[&str], recursive: bool) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for d in dirs {
        collect_kernel_files(&crate_dir(d), recursive, &mut out);
    }
    out.sort();
    out
}

/// `dir` under the crate root (tests may run from elsewhere).
fn crate_dir(dir: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
}

/// Appends the `.kir` files of `dir` to `out`, and those below it when `recursive`.
fn collect_kernel_files(dir: &std::path::Path, recursive: bool, out: &mut Vec<std::path::PathBuf>) {
    let rd =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for p in rd.flatten().map(|e| e.path()) {
        if p.is_dir() {
            let skipped = p
                .file_name()
                .is_some_and(|n| n == "target" || n.to_string_lossy().starts_with('.'));
            if recursive && !skipped {
                collect_kernel_files(&p, true, out);
            }
        } else if p.extension().is_some_and(|x| x == "kir") {
            out.push(p);
        }
    }
}

/// Parses one kernel and runs the structural verifier, panicking with the rendered
/// diagnostics and the source when either complains.
pub fn parse_verified(src: &str) -> Kernel {
    parse_verified_as("test", src)
}

/// [`parse_verified`] for a kernel read from the file `name` (which the diagnostics name).
pub fn parse_verified_as(name: &str, src: &str) -> Kernel {
    let k = smemsync::reader::parse_kernel(src)
        .unwrap_or_else(|d| panic!("parse: {}\n{src}", d.render(name, src, false)));
    let errs = smemsync::verify::verify(&k);
    assert!(
        errs.is_empty(),
        "verify: {}\n{src}",
        smemsync::diag::render_all(&errs, name, src, false)
    );
    k
}

/// Reads, parses and verifies the kernel file at `path` ([`parse_verified_as`], naming the
/// file), panicking when it cannot be read.
pub fn parse_file(path: impl AsRef<std::path::Path>) -> Kernel {
    let path = path.as_ref();
    let src = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_verified_as(&path.to_string_lossy(), &src)
}

/// The ops of `k` in program order whose kind satisfies `f`.
pub fn ops_where(k: &Kernel, f: impl Fn(&OpKind) -> bool) -> Vec<Op> {
    k.ops_in_order()
        .into_iter()
        .filter(|o| f(&k.ops[*o].kind))
        .collect()
}

/// Most candidates a shrink tries.
pub const SHRINK_ATTEMPTS: usize = 1000;

/// Longest a shrink runs (the property may be slow); the smallest kernel so far is kept.
pub const SHRINK_TIME: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether `text` parses and verifies: only such kernels are shrink candidates.
fn valid(text: &str) -> bool {
    smemsync::reader::parse_kernel(text).is_ok_and(|k| smemsync::verify::verify(&k).is_empty())
}

/// For each line, the index of the line closing the block it opens (a line ending in `{`).
fn block_ends(lines: &[&str]) -> Vec<Option<usize>> {
    let mut ends = vec![None; lines.len()];
    let mut open = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_end();
        if t.trim_start().starts_with('}')
            && let Some(o) = open.pop()
        {
            ends[o] = Some(i);
        }
        if t.ends_with('{') {
            open.push(i);
        }
    }
    ends
}

/// Shrinks `text` to a kernel, as small as this search finds, that still parses, verifies and
/// `fails`. `fails(text)` must hold on entry (it is not re-checked).
pub fn shrink_text(text: &str, mut fails: impl FnMut(&str) -> bool) -> String {
    let mut best: Vec<String> = text.lines().map(str::to_string).collect();
    let mut attempts = 0;
    let deadline = std::time::Instant::now() + SHRINK_TIME;
    let mut try_lines = |cand: Vec<String>, attempts: &mut usize| -> Option<Vec<String>> {
        *attempts += 1;
        if std::time::Instant::now() > deadline {
            *attempts = SHRINK_ATTEMPTS;
            return None;
        }
        let t = cand.join("\n") + "\n";
        (valid(&t) && fails(&t)).then_some(cand)
    };
    let mut progress = true;
    while progress && attempts < SHRINK_ATTEMPTS {
        progress = false;
        // Whole blocks, then a block's braces alone (its body kept).
        let refs: Vec<&str> = best.iter().map(String::as_str).collect();
        let ends = block_ends(&refs);
        for (open, end) in ends.iter().enumerate().rev() {
            let Some(end) = *end else { continue };
            if open == 0 || attempts >= SHRINK_ATTEMPTS {
                continue;
            }
            let mut whole = best.clone();
            whole.drain(open..=end);
            let mut unwrapped = best.clone();
            unwrapped.remove(end);
            unwrapped.remove(open);
            for cand in [whole, unwrapped] {
                if let Some(b) = try_lines(cand, &mut attempts) {
                    best = b;
                    progress = true;
                    break;
                }
            }
            if progress {
                break;
            }
        }
        if progress {
            continue;
        }
        // Chunks of lines, halving the chunk size down to one line.
        let mut chunk = (best.len() / 2).max(1);
        while chunk >= 1 && !progress && attempts < SHRINK_ATTEMPTS {
            let mut start = 0;
            while start + chunk <= best.len() && attempts < SHRINK_ATTEMPTS {
                let mut cand = best.clone();
                cand.drain(start..start + chunk);
                if let Some(b) = try_lines(cand, &mut attempts) {
                    best = b;
                    progress = true;
                } else {
                    start += chunk;
                }
            }
            chunk /= 2;
        }
    }
    best.join("\n") + "\n"
}

/// The message of a panic payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// Runs `property` on the kernel `text` and returns its result; when it panics, shrinks the
/// kernel to a smaller one on which it still panics and panics with both messages and the
/// shrunk kernel. While shrinking, the panic hook is silenced (the candidates' panics are
/// expected), and restored before the final panic.
pub fn shrink_on_panic<R>(text: &str, property: impl Fn(&str) -> R) -> R {
    let first = match catch_unwind(AssertUnwindSafe(|| property(text))) {
        Ok(r) => return r,
        Err(p) => panic_message(p.as_ref()),
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let small = shrink_text(text, |t| {
        catch_unwind(AssertUnwindSafe(|| {
            property(t);
        }))
        .is_err()
    });
    let again = catch_unwind(AssertUnwindSafe(|| {
        property(&small);
    }))
    .err()
    .map(|p| panic_message(p.as_ref()))
    .unwrap_or_default();
    std::panic::set_hook(hook);
    panic!(
        "{first}\n\n--- shrunk to {} of {} lines, which fails with ---\n{again}\n--- shrunk kernel ---\n{small}",
        small.lines().count(),
        text.lines().count()
    );
}

/// Turns the options of `cfg` down one at a time while `fails` (the oracle on the same seed)
/// still holds; returns the smallest failing configuration found. `fails(cfg)` must hold on
/// entry, and should recognise the same failure (not any failure): a feature turned off may
/// make an oracle refuse the case for another reason. `barriers` is never changed: it decides
/// what a case promises, not its size. Each step keeps a change only if the case still fails.
pub fn shrink_config(cfg: &GenConfig, mut fails: impl FnMut(&GenConfig) -> bool) -> GenConfig {
    type Step = fn(&mut GenConfig) -> bool;
    let steps: [Step; 10] = [
        |c| dec(&mut c.max_stmts, 1),
        |c| dec(&mut c.max_depth, 0),
        |c| dec(&mut c.phases, 0),
        |c| {
            let lo = c.min_threads.max(1);
            c.max_threads > lo && {
                c.max_threads = (c.max_threads / 2).max(lo);
                true
            }
        },
        |c| std::mem::take(&mut c.atomics),
        |c| std::mem::take(&mut c.slots),
        |c| std::mem::take(&mut c.async_copies),
        |c| std::mem::take(&mut c.params),
        |c| std::mem::take(&mut c.collectives),
        |c| std::mem::take(&mut c.pipeline),
    ];
    let mut best = cfg.clone();
    let mut progress = true;
    while progress {
        progress = false;
        for step in steps {
            let mut cand = best.clone();
            if step(&mut cand) && fails(&cand) {
                best = cand;
                progress = true;
            }
        }
    }
    best
}

/// Runs `property` on the generator options `cfg` (it generates its kernel from them with a
/// seed of its own); when it panics, shrinks the options with [`shrink_config`] to the
/// smallest on which it still panics and panics with both messages and the shrunk options.
/// The panic hook is silenced while shrinking, as in [`shrink_on_panic`].
pub fn shrink_config_on_panic<R>(cfg: &GenConfig, property: impl Fn(&GenConfig) -> R) -> R {
    let first = match catch_unwind(AssertUnwindSafe(|| property(cfg))) {
        Ok(r) => return r,
        Err(p) => panic_message(p.as_ref()),
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let panics = |c: &GenConfig| {
        catch_unwind(AssertUnwindSafe(|| {
            property(c);
        }))
        .err()
        .map(|p| panic_message(p.as_ref()))
    };
    let small = shrink_config(cfg, |c| panics(c).is_some());
    let again = panics(&small).unwrap_or_default();
    std::panic::set_hook(hook);
    panic!("{first}\n\n--- shrunk to {small:?}, which fails with ---\n{again}");
}

/// Decrements `x` if it is above `floor`; whether it did.
fn dec(x: &mut u32, floor: u32) -> bool {
    *x > floor && {
        *x -= 1;
        true
    }
}

/// Runs the independent race checker on the synchronized kernel. Random kernels may read
/// shared memory nobody wrote (an execution error for the interpreter, not a race), so only
/// races and deadlocks fail; returns whether the checker proved or checked the kernel.
pub fn race_check(
    k: &Kernel,
    plan: &smemsync::ir::edit::SyncPlan,
    target: &smemsync::target::Target,
) -> bool {
    use smemsync::check::{CheckOptions, Verdict, check_race_free};
    use smemsync::ir::edit::apply;
    let out = apply(k, plan).expect("plan anchored in its kernel");
    let opts = CheckOptions {
        target: Some(*target),
        schedules: 2,
        bounds: vec![("n".into(), 3), ("f".into(), 1)],
        ..Default::default()
    };
    let r = check_race_free(&out, &opts);
    match &r.verdict {
        Verdict::Race(_) | Verdict::Deadlock(_) => panic!(
            "the checker rejects a placement: {}\n{}",
            r.summary(),
            smemsync::emit::text::print_kernel(&out)
        ),
        // The static proof established race freedom, and the short interpretation then found
        // an execution error of the generated input (an uninitialized read): still race-free.
        Verdict::ExecError(_) => smemsync::check::proof::prove(&out, Some(*target)).is_ok(),
        _ => r.is_race_free(),
    }
}

/// The target an example kernel needs, read from its text (its async ops exist only there):
/// gfx1250 for `tdm_load`, gfx942 for `gather_to_lds` (its waits name gfx9's vmcnt), sm_90
/// for NVIDIA's async ops, gfx942 otherwise.
pub fn example_target(src: &str) -> &'static str {
    if src.contains("tdm_load") {
        "gfx1250"
    } else if src.contains("gather_to_lds") {
        "gfx942"
    } else if ["cp_async", "tma_", "mbar_", "named_", "wgmma"]
        .iter()
        .any(|s| src.contains(s))
    {
        "sm_90"
    } else {
        "gfx942"
    }
}

/// The interpreter's verdict on `k` (no static proof, one schedule) with scalar parameter
/// `%K` bound to `kv`: the mbarrier tests' trip-count oracle.
pub fn interpret_at(k: &Kernel, kv: i64) -> smemsync::check::Verdict {
    let o = smemsync::check::CheckOptions {
        try_proof: false,
        schedules: 1,
        bounds: vec![("K".into(), kv)],
        ..Default::default()
    };
    smemsync::check::check_race_free(k, &o).verdict
}

/// The interpreter's verdict alone (no static proof) over `schedules` schedules and the
/// kernel's default bounds: the oracle the static-proof tests compare "proved" with.
pub fn interpret_only(k: &Kernel, schedules: u32) -> smemsync::check::Verdict {
    let o = smemsync::check::CheckOptions {
        try_proof: false,
        schedules,
        ..Default::default()
    };
    smemsync::check::check_race_free(k, &o).verdict
}

/// The interpreter alone (no static proof, two schedules) on `k` for `target` with the
/// parameters at `bounds`, after asserting that no schedule deadlocks: the oracle of the
/// in-flight tests, which ask `is_race` or `is_race_free` of the report.
pub fn interpret_without_deadlock(
    k: &Kernel,
    target: smemsync::target::Target,
    bounds: &[(&str, i64)],
) -> smemsync::check::CheckReport {
    let o = smemsync::check::CheckOptions {
        target: Some(target),
        bounds: bounds.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        try_proof: false,
        schedules: 2,
        ..Default::default()
    };
    let r = smemsync::check::check_race_free(k, &o);
    assert!(
        !matches!(r.verdict, smemsync::check::Verdict::Deadlock(_)),
        "deadlock: {}",
        r.summary()
    );
    r
}

/// Kernel text of a loop over `%V` from 0 to `trips` in which each of 128 threads copies
/// element `%Vq = 128 V + %t` of `global` to shared memory: `%Vx = gload global[%Vq]`, the
/// mixed-radix digits `ds` of `of` (`%Vq` or another index, see [`digits`]), then `store
/// dest, %Vx` (`dest` names the digits). Lines indented by `ind`; the wgmma tests' copies of
/// A and B tiles into core-matrix layouts.
pub fn copy_loop_128(
    ind: &str,
    (v, trips): (&str, &str),
    global: &str,
    (of, ds): (&str, &[(&str, u64)]),
    dest: &str,
) -> String {
    let i = format!("{ind}  ");
    format!(
        "{ind}for %{v} = 0 to {trips} step 1 {{\n{i}%{v}128 = mul %{v}, 128\n{i}%{v}q = add %{v}128, %t\n{i}%{v}x = gload {global}[%{v}q]\n{}{i}store {dest}, %{v}x\n{ind}}}\n",
        digits(&i, of, ds)
    )
}

/// Kernel text splitting `q` into mixed-radix digits `(name, radix)`, most significant first:
/// a digit is `(q / w) mod radix`, `w` the product of the radices after it; the first digit
/// is `q / w` (its radix unused: `q` is below the product of all). Lines indented by `ind`.
pub fn digits(ind: &str, q: &str, ds: &[(&str, u64)]) -> String {
    let mut out = String::new();
    for (j, (name, radix)) in ds.iter().enumerate() {
        let w: u64 = ds[j + 1..].iter().map(|d| d.1).product();
        if j == 0 {
            out += &format!("{ind}{name} = div {q}, {w}\n");
        } else if w == 1 {
            out += &format!("{ind}{name} = rem {q}, {radix}\n");
        } else {
            out += &format!("{ind}{name}w = div {q}, {w}\n{ind}{name} = rem {name}w, {radix}\n");
        }
    }
    out
}

/// The overlap engine's oracle, shared by the symbolic-engine tests: the ops of a kernel that
/// access shared memory (in id order), the engine as the analysis runs it (`sym`) and one
/// that enumerates (`en`).
pub struct OverlapOracle<'k> {
    pub ops: Vec<Op>,
    pub sym: smemsync::analysis::overlap::Overlap<'k>,
    pub en: smemsync::analysis::overlap::Overlap<'k>,
}

impl<'k> OverlapOracle<'k> {
    pub fn new(k: &'k Kernel) -> Self {
        use smemsync::analysis::overlap::Overlap;
        let ops = (k.ops.iter().map(|(op, _)| op))
            .filter(|&op| !smemsync::ir::effects::effects(k, op).shared.is_empty())
            .collect();
        let mut en = Overlap::new(k, 32);
        en.symbolic = false;
        // Each question prepared on its own (`Overlap::prep_memo`): the oracle of that memo.
        en.prep_memo = false;
        OverlapOracle {
            ops,
            sym: Overlap::new(k, 32),
            en,
        }
    }

    /// [`Self::compare`] on every ordered pair of [`Self::ops`] (`x` then `y` in id order),
    /// under the tags `tags_of(n, loops)` gives (`n` counts the pairs asked, `loops` are the
    /// loops around `y`): the number of questions, or the first difference.
    pub fn compare_every_pair(
        &mut self,
        k: &Kernel,
        mut tags_of: impl FnMut(usize, &[Op]) -> Vec<(Op, smemsync::analysis::overlap::IterTag)>,
    ) -> Result<usize, String> {
        let (mut n, mut asked) = (0, 0);
        for x in self.ops.clone() {
            for y in self.ops.clone() {
                let tags = tags_of(n, &self.sym.for_loops(y));
                n += 1;
                asked += self.compare(k, (x, y), &tags)?;
            }
        }
        Ok(asked)
    }

    /// Asks both engines about every access of `x` then every access of `y` under `tags`:
    /// the number of questions, or the first that the engines answer differently, or after
    /// which their conservative-answer notes (W0314) differ.
    pub fn compare(
        &mut self,
        k: &Kernel,
        (x, y): (Op, Op),
        tags: &[(Op, smemsync::analysis::overlap::IterTag)],
    ) -> Result<usize, String> {
        let xs = smemsync::ir::effects::effects(k, x).shared;
        let ys = smemsync::ir::effects::effects(k, y).shared;
        for xa in &xs {
            for ya in &ys {
                let s = self.sym.may_overlap(x, xa, y, ya, tags);
                let e = self.en.may_overlap(x, xa, y, ya, tags);
                // Through a parameter or block id the enumeration is conservative (W0314)
                // and the symbolic engine may decide (docs/async.md, "Parameters in
                // flight"): there it may only say less, and its notes are a subset.
                let mut ops = index_operands(k, xa);
                ops.extend(index_operands(k, ya));
                let leaves =
                    !smemsync::analysis::symbolic::params::operand_leaves(k, &ops).is_empty();
                let noted = self
                    .en
                    .conservative
                    .borrow()
                    .iter()
                    .any(|&(a, b, _)| a == x && b == y);
                if s != e && !(leaves && noted && !s) {
                    return Err(format!(
                        "overlap of {x:?} then {y:?} under {tags:?}: symbolic {s}, enumerated {e}"
                    ));
                }
                let (sn, en) = (
                    self.sym.conservative.borrow(),
                    self.en.conservative.borrow(),
                );
                // The notes of this pair (the lists accumulate over every question asked;
                // an earlier pair through a parameter may have left the engines' lists apart).
                let mine = |v: &Vec<(Op, Op, &'static str)>| -> Vec<(Op, Op, &'static str)> {
                    v.iter().filter(|n| n.0 == x && n.1 == y).cloned().collect()
                };
                let same = if leaves {
                    sn.iter().all(|n| en.contains(n))
                } else {
                    mine(&sn) == mine(&en)
                };
                if !same {
                    return Err(format!("W0314 notes after {x:?} then {y:?} under {tags:?}"));
                }
            }
        }
        Ok(xs.len() * ys.len())
    }
}

/// The operands an access's elements depend on: its per-thread indices and its views' indices.
pub fn index_operands(k: &Kernel, a: &smemsync::ir::SharedAccess) -> Vec<smemsync::ir::Operand> {
    use smemsync::ir::{Footprint, MemRef, ViewIndex};
    let mut out = match &a.footprint {
        Footprint::PerThread(ix) => ix.clone(),
        Footprint::Collective { .. } => Vec::new(),
    };
    let mut m = a.mem;
    while let MemRef::View(v) = m {
        for ix in &k.views[v].indices {
            if let ViewIndex::At(o) = ix {
                out.push(*o);
            }
        }
        m = k.views[v].base;
    }
    out
}

/// Every pair question of the kernel of `fp` ([`pair_questions_match_enumeration`] for each
/// ordered pair of accesses and each common loop-nest length): returns (answered, asked).
pub fn all_pair_questions_match_enumeration(
    fp: &mut smemsync::analysis::footprint::Footprints,
) -> (usize, usize) {
    let (mut answered, mut asked) = (0, 0);
    for ai in 0..fp.accesses.len() {
        for bi in 0..fp.accesses.len() {
            let nest = fp.accesses[ai].loops.len().min(fp.accesses[bi].loops.len());
            for plen in 0..=nest {
                let (a, q) = pair_questions_match_enumeration(fp, ai, bi, plen);
                answered += a;
                asked += q;
            }
        }
    }
    (answered, asked)
}

/// [`all_pair_questions_match_enumeration`] on `k` at each warp width of `warps` (a fresh
/// `Footprints` each); returns (answered, asked) summed.
pub fn all_pair_questions_match_enumeration_at(k: &Kernel, warps: &[u32]) -> (usize, usize) {
    let (mut answered, mut asked) = (0, 0);
    for &warp in warps {
        let mut fp = smemsync::analysis::footprint::Footprints::new(k, warp);
        let (a, q) = all_pair_questions_match_enumeration(&mut fp);
        answered += a;
        asked += q;
    }
    (answered, asked)
}

/// Every pair question from access `ai` to `bi` at common loop-nest length `plen` (no
/// carrying loop, then each of the `plen` loops, as hazard finding asks them): the symbolic
/// answer, where given, equals enumeration's; returns (answered, asked).
pub fn pair_questions_match_enumeration(
    fp: &mut smemsync::analysis::footprint::Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
) -> (usize, usize) {
    use smemsync::analysis::conflicts::pair_conflict_enumerated;
    use smemsync::analysis::symbolic::pairs;
    let (mut answered, mut asked) = (0, 0);
    for var in std::iter::once(None).chain((0..plen).map(Some)) {
        asked += 1;
        let Some(s) = pairs::pair_conflict(fp, ai, bi, plen, var) else {
            continue;
        };
        answered += 1;
        let e = pair_conflict_enumerated(fp, ai, bi, plen, var);
        assert_eq!(
            (s.conflict, s.intersect, s.intra_warp),
            (e.conflict, e.intersect, e.intra_warp),
            "pair {ai} -> {bi}, plen {plen}, var {var:?} (symbolic, enumerated)"
        );
    }
    (answered, asked)
}
