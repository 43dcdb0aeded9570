//! Differential oracles over generated kernels: test support shared by `tests/attacks.rs`
//! (a bounded run in `cargo test`) and the cargo-fuzz targets in `fuzz/` (the long runs,
//! docs/fuzzing.md). Not used by the command line.
//!
//! A [`Case`] is a generator seed and a [`GenConfig`] decoded from a seed (tests) or from fuzzer
//! bytes. Each oracle returns `Err(message)` with the kernel text when a property fails, and
//! counts what it exercised in a [`Tally`] so that callers can check they tested something:
//!
//! - [`sync_oracle`]: for gfx942, gfx1201 and sm_90, `sync` of the kernel without barriers
//!   either refuses with a finding or user error, or gives a verifier-clean kernel that the
//!   interpreter (static proof off) finds race-free and that computes what the generator's
//!   race-free version (a barrier after every shared access) computes; "proved" agrees with
//!   the interpreter on the output and on it minus one inserted sync; every emitter runs.
//! - [`proof_oracle`]: whenever the static proof says proved, interpretation finds no race,
//!   deadlock or execution error.
//! - [`plan_smem_oracle`], [`pipeline_oracle`]: `plan-smem` and `pipeline`, followed by `sync`,
//!   compute the same outputs as the race-free original, race-free.
//! - [`plan_objectives_oracle`]: `plan-smem` choosing by objective (both objectives) never
//!   overlaps buffers that are live together, and its chosen plan, synchronized, is race-free
//!   and computes the original's outputs ([`planned_ok`]).
//! - [`emit_oracle`]: text round-trips; MLIR and CUDA give code or diagnostics.
//! - [`limits_oracle`]: kernels sized at, just below and just above the limits of docs/ir.md
//!   (threads per block, block dimensions, shared bytes per target, nesting depth) are accepted
//!   exactly when within them, refused with a located user diagnostic otherwise, and accepted
//!   ones go through every pass.
//!
//! Panics are left to propagate: a panic is a finding for both callers.

use crate::check::{CheckOptions, Outputs, check_race_free, proof, run, splitmix64};
use crate::diag::{DiagKind, Diagnostic};
use crate::r#gen::{GenConfig, random_kernel_text};
use crate::ir::Kernel;
use crate::sync::PlaceOptions;
use crate::sync::driver::{synchronize, without_inserted};
use crate::target::{TARGET_NAMES, Target, Vendor};

/// The targets the generated kernels are synchronized for: wave64 with `s_barrier`, gfx12
/// split barriers, NVIDIA with cp.async.
pub const SYNC_TARGETS: [&str; 3] = ["gfx942", "gfx1201", "sm_90"];

/// What the oracles exercised (so that a run can show it was not vacuous).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub cases: u64,
    pub synced: u64,
    pub sync_refused: u64,
    pub proved: u64,
    pub mutants: u64,
    pub planned: u64,
    pub reused_bytes: u64,
    pub pipelined: u64,
    pub emitted: u64,
    pub limits_accepted: u64,
    pub limits_refused: u64,
}

/// One generated kernel: the seed and configuration of `r#gen`.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub cfg: GenConfig,
}

impl Case {
    /// A case whose options are drawn from `flags` (bits: atomics, slots, async copies,
    /// parameters, collectives, pipeline loop, 2 bits of phases, 2 of depth, 3 of block size).
    pub fn new(seed: u64, flags: u64) -> Case {
        let bit = |i: u32| flags >> i & 1 != 0;
        let (min_threads, max_threads) = match flags >> 10 & 7 {
            6 => (65, 256),
            7 => (1000, 1024),
            _ => (8, 64),
        };
        let cfg = GenConfig {
            min_threads,
            max_threads,
            atomics: bit(0),
            slots: bit(1),
            async_copies: bit(2),
            params: bit(3),
            collectives: bit(4),
            pipeline: bit(5),
            phases: (flags >> 6 & 3) as u32,
            max_depth: 1 + (flags >> 8 & 3) as u32 % 3,
            ..GenConfig::default()
        };
        Case { seed, cfg }
    }

    /// The case of a test seed (options drawn from the seed).
    pub fn from_seed(seed: u64) -> Case {
        Case::new(seed, seed_flags(seed))
    }

    /// The case of fuzzer bytes: a little-endian seed, then bytes XORed into the flags drawn
    /// from the seed (missing bytes are 0), so that short inputs reach every option too.
    pub fn from_bytes(data: &[u8]) -> Case {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            for (j, x) in data.iter().skip(i * 8).take(8).enumerate() {
                b[j] = *x;
            }
            u64::from_le_bytes(b)
        };
        let seed = word(0);
        Case::new(seed, seed_flags(seed) ^ word(1))
    }

    /// The generated text, with or without a barrier after every shared access.
    pub fn text(&self, barriers: bool) -> String {
        random_kernel_text(
            self.seed,
            &GenConfig {
                barriers,
                ..self.cfg.clone()
            },
        )
    }

    /// The parsed kernel (the generator's text always parses and verifies).
    pub fn kernel(&self, barriers: bool) -> Result<Kernel, String> {
        let text = self.text(barriers);
        let k =
            crate::reader::parse_kernel(&text).map_err(|d| fail("does not parse", &d, &text))?;
        if let Some(d) = crate::verify::verify(&k).first() {
            return Err(fail("does not verify", d, &text));
        }
        Ok(k)
    }
}

/// The options drawn from a seed alone.
fn seed_flags(seed: u64) -> u64 {
    splitmix64(seed ^ 0x00A7_7AC4)
}

fn fail(what: &str, d: &Diagnostic, text: &str) -> String {
    format!("{what}: {}\n{text}", d.render("generated", text, false))
}

/// Interpretation options for a target: 2 schedules, no static proof.
pub fn interp_options(t: Target) -> CheckOptions {
    CheckOptions {
        target: Some(t),
        schedules: 2,
        try_proof: false,
        ..CheckOptions::default()
    }
}

fn target(name: &str) -> Target {
    Target::from_name(name).unwrap_or_else(|_| panic!("unknown target {name}"))
}

/// Interpretation finds `k` race-free (no race, deadlock or execution error).
pub fn race_free(k: &Kernel, t: Target, what: &str) -> Result<(), String> {
    let r = check_race_free(k, &interp_options(t));
    if r.is_race_free() {
        return Ok(());
    }
    Err(format!(
        "{what} on {}: {}\n{}",
        t.name,
        r.summary(),
        crate::emit::text::print_kernel(k)
    ))
}

/// The outputs of `k` for input seed `seed` on target `t`.
pub fn outputs(k: &Kernel, seed: u64, t: Target) -> Result<Outputs, String> {
    run(k, seed, &interp_options(t)).map_err(|d| {
        format!(
            "run on {}: {}\n{}",
            t.name,
            d.message,
            crate::emit::text::print_kernel(k)
        )
    })
}

/// `got` computes what `want` computes (same inputs), else a message showing `got`.
pub fn same_outputs(
    want: &Outputs,
    got: &Kernel,
    seed: u64,
    t: Target,
    what: &str,
) -> Result<(), String> {
    if outputs(got, seed, t)? == *want {
        return Ok(());
    }
    Err(format!(
        "{what} on {} changes the results\n{}",
        t.name,
        crate::emit::text::print_kernel(got)
    ))
}

/// A refusal is fine unless a pass broke an invariant (a verifier diagnostic).
fn refusal_ok(diags: &[Diagnostic], what: &str, k: &Kernel) -> Result<(), String> {
    match diags.iter().find(|d| d.kind == DiagKind::Verifier) {
        None => Ok(()),
        Some(d) => Err(format!(
            "{what}: internal error {} {}\n{}",
            d.code,
            d.message,
            crate::emit::text::print_kernel(k)
        )),
    }
}

/// Whenever the static proof says proved, interpretation agrees.
pub fn proof_oracle(k: &Kernel, t: Target, tally: &mut Tally) -> Result<(), String> {
    if proof::prove(k, Some(t)).is_err() {
        return Ok(());
    }
    tally.proved += 1;
    race_free(k, t, "proved, but interpretation disagrees")
}

/// `sync` on every target of [`SYNC_TARGETS`] (see the module doc).
pub fn sync_oracle(case: &Case, tally: &mut Tally) -> Result<(), String> {
    let bare = case.kernel(false)?;
    let safe = case.kernel(true)?;
    for name in SYNC_TARGETS {
        let t = target(name);
        proof_oracle(&bare, t, tally)?;
        proof_oracle(&safe, t, tally)?;
        let want = outputs(&safe, case.seed, t)?;
        let s = match synchronize(&bare, &t, &PlaceOptions::default()) {
            Ok(s) => s,
            Err(d) => {
                tally.sync_refused += 1;
                refusal_ok(&d, "sync", &bare)?;
                continue;
            }
        };
        tally.synced += 1;
        if let Some(d) = crate::verify::verify_with(&s.kernel, &t.limits).first() {
            return Err(format!("sync output does not verify: {}", d.message));
        }
        race_free(&s.kernel, t, "sync output races")?;
        same_outputs(&want, &s.kernel, case.seed, t, "sync")?;
        proof_oracle(&s.kernel, t, tally)?;
        for n in 0..2 {
            if let Some(m) = without_inserted(&s.kernel, s.input_ops, n) {
                tally.mutants += 1;
                proof_oracle(&m, t, tally)?;
            }
        }
        emit_oracle(&s.kernel, t, tally)?;
    }
    Ok(())
}

/// Text round-trips; MLIR (and CUDA on NVIDIA) give code or diagnostics, never a panic.
pub fn emit_oracle(k: &Kernel, t: Target, tally: &mut Tally) -> Result<(), String> {
    let text = crate::emit::text::print_kernel(k);
    let again = crate::reader::parse_kernel(&text).map_err(|d| fail("printed form", &d, &text))?;
    if crate::emit::text::print_kernel(&again) != text {
        return Err(format!("printing is not a fixed point\n{text}"));
    }
    if let Err(d) = crate::emit::mlir::emit_mlir(k, &t) {
        refusal_ok(&d, "emit mlir", k)?;
    }
    if t.vendor == Vendor::Nvidia {
        let opts = crate::emit::cuda::CudaOptions::default();
        if let Err(d) = crate::emit::cuda::emit_cuda(k, &t, &opts) {
            refusal_ok(&d, "emit cuda", k)?;
        }
    }
    tally.emitted += 1;
    Ok(())
}

/// The target a transform case is synchronized for (one per case, drawn from the seed).
fn transform_target(case: &Case) -> Target {
    target(SYNC_TARGETS[(case.seed % SYNC_TARGETS.len() as u64) as usize])
}

/// `transformed` (from `original`), synchronized, is race-free and computes `want`; `sync`
/// may refuse it only if it refuses `original` too.
fn transformed_ok(
    original: &Kernel,
    transformed: &Kernel,
    want: &Outputs,
    case: &Case,
    what: &str,
) -> Result<(), String> {
    let t = transform_target(case);
    let opts = PlaceOptions::default();
    if let Some(d) = crate::verify::verify_with(transformed, &t.limits).first() {
        return Err(format!("{what} output does not verify: {}", d.message));
    }
    let s = match synchronize(transformed, &t, &opts) {
        Ok(s) => s,
        Err(d) => {
            refusal_ok(&d, what, transformed)?;
            if synchronize(original, &t, &opts).is_ok() {
                return Err(format!(
                    "sync on {} refuses the {what} output ({}) but not its input\n{}",
                    t.name,
                    d.first().map_or("", |d| d.message.as_str()),
                    crate::emit::text::print_kernel(transformed)
                ));
            }
            return Ok(());
        }
    };
    race_free(&s.kernel, t, &format!("{what} then sync races"))?;
    same_outputs(want, &s.kernel, case.seed, t, &format!("{what} then sync"))
}

/// `plan-smem` then `sync` preserves the results, of the kernel with and without barriers.
pub fn plan_smem_oracle(case: &Case, tally: &mut Tally) -> Result<(), String> {
    let safe = case.kernel(true)?;
    let want = outputs(&safe, case.seed, transform_target(case))?;
    for k in [case.kernel(false)?, safe] {
        let plan = crate::transform::smem_plan::plan_shared_memory(&k);
        tally.planned += 1;
        if plan.peak < plan.peak_before {
            tally.reused_bytes += 1;
        }
        if plan.peak > plan.peak_before {
            return Err(format!(
                "plan-smem grows shared memory\n{}",
                case.text(true)
            ));
        }
        transformed_ok(&k, &plan.kernel, &want, case, "plan-smem")?;
    }
    Ok(())
}

/// `plan-smem` by objective (`smem_plan::plan_with`) on the kernel without barriers (even
/// seeds) or with them (odd), fewest bytes first (seed bit 1 clear) or fewest barriers first,
/// checked by [`planned_ok`]. (One plan per case: each synchronizes every candidate.)
pub fn plan_objectives_oracle(case: &Case, tally: &mut Tally) -> Result<(), String> {
    use crate::transform::smem_plan::{Objective, PlanOptions, plan_with};
    let t = transform_target(case);
    let safe = case.kernel(true)?;
    let want = outputs(&safe, case.seed, t)?;
    let k = if case.seed.is_multiple_of(2) {
        case.kernel(false)?
    } else {
        safe
    };
    {
        let objective = if case.seed & 2 == 0 {
            Objective::Bytes
        } else {
            Objective::Barriers
        };
        {
            let opts = PlanOptions {
                objective,
                ..PlanOptions::new(t)
            };
            match plan_with(&k, &opts) {
                Ok(r) => planned_ok(&k, &r, &opts, &want, case.seed, tally)?,
                // The planner refuses only what `sync` refuses in the input.
                Err(d) => {
                    refusal_ok(&d, "plan-smem", &k)?;
                    if synchronize(&k, &t, &opts.place).is_ok() {
                        return Err(format!(
                            "plan-smem refuses a kernel sync accepts: {}\n{}",
                            d.first().map_or("", |d| d.message.as_str()),
                            crate::emit::text::print_kernel(&k)
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A plan of `k` is sound and honours its objective: buffers whose lifetimes interfere (in
/// `k`) get disjoint bytes; the chosen plan, synchronized, verifies, is race-free under
/// interpretation and computes `want`; bytes first never exceeds the no-reuse peak, barriers
/// first never executes more barriers than the kernel synchronized without reuse.
pub fn planned_ok(
    k: &Kernel,
    r: &crate::transform::smem_plan::PlanReport,
    opts: &crate::transform::smem_plan::PlanOptions,
    want: &Outputs,
    seed: u64,
    tally: &mut Tally,
) -> Result<(), String> {
    use crate::transform::smem_plan::{Objective, lifetimes};
    let text = || crate::emit::text::print_kernel(k);
    let lt = lifetimes(k);
    let ps = &r.plan.placements;
    for (i, a) in ps.iter().enumerate() {
        for b in &ps[i + 1..] {
            let pinned =
                k.buffers[a.buffer].offset.is_some() && k.buffers[b.buffer].offset.is_some();
            let lies = lt.may_lie(a.buffer, b.buffer, (a.offset, a.bytes), (b.offset, b.bytes));
            if !lies && !pinned {
                return Err(format!(
                    "plan-smem overlaps @{} and @{}, live together\n{}",
                    k.buffers[a.buffer].name,
                    k.buffers[b.buffer].name,
                    text()
                ));
            }
        }
    }
    tally.planned += 1;
    if r.plan.peak < r.plan.peak_before {
        tally.reused_bytes += 1;
    }
    match opts.objective {
        Objective::Bytes if r.plan.peak > r.plan.peak_before => {
            return Err(format!("plan-smem grows shared memory\n{}", text()));
        }
        Objective::Barriers if r.barriers > r.barriers_before => {
            return Err(format!(
                "plan-smem --objective barriers adds barriers\n{}",
                text()
            ));
        }
        _ => {}
    }
    let t = opts.target;
    if let Some(d) = crate::verify::verify_with(&r.synced.kernel, &t.limits).first() {
        return Err(format!(
            "planned and synced output does not verify: {}",
            d.message
        ));
    }
    race_free(&r.synced.kernel, t, "plan-smem then sync races")?;
    same_outputs(want, &r.synced.kernel, seed, t, "plan-smem then sync")
}

/// `pipeline --stages 2|3` then `sync` preserves the results (cases with a pipeline loop).
pub fn pipeline_oracle(case: &Case, tally: &mut Tally) -> Result<(), String> {
    if !case.cfg.pipeline {
        return Ok(());
    }
    let safe = case.kernel(true)?;
    let want = outputs(&safe, case.seed, transform_target(case))?;
    for k in [case.kernel(false)?, safe] {
        for stages in [2, 3] {
            let (pk, _) = crate::transform::pipeline::circular_buffer(&k, stages).map_err(|d| {
                let m = d.first().map_or("", |d| d.message.as_str());
                format!("pipeline refuses a legal loop: {m}\n{}", case.text(true))
            })?;
            tally.pipelined += 1;
            transformed_ok(&k, &pk, &want, case, &format!("pipeline --stages {stages}"))?;
        }
    }
    Ok(())
}

/// A kernel sized near one limit of docs/ir.md (the others kept small).
#[derive(Clone, Debug)]
pub struct LimitCase {
    pub target: Target,
    pub block: [u64; 3],
    /// Elements of the i32 buffer `@a`, and its `at` offset.
    pub elems: u64,
    pub offset: Option<u64>,
    /// Region-owning ops around the store (loops of one trip, or uniform `if`s).
    pub depth: u64,
    pub ifs: bool,
}

impl LimitCase {
    /// The case of a seed: one limit (block, shared bytes, nesting) at, below or above.
    pub fn from_seed(seed: u64) -> LimitCase {
        let mut x = seed;
        let mut draw = |n: u64| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            splitmix64(x) % n
        };
        let t = target(TARGET_NAMES[draw(TARGET_NAMES.len() as u64) as usize]);
        let mut c = LimitCase {
            target: t,
            block: [64, 1, 1],
            elems: 1024,
            offset: None,
            depth: 1,
            ifs: draw(2) == 1,
        };
        let step = draw(3) as i64 - 1;
        let near = |v: u64| v.saturating_add_signed(step);
        match draw(4) {
            0 => {
                const BLOCKS: [[u64; 3]; 6] = [
                    [1024, 1, 1],
                    [32, 32, 1],
                    [1, 16, 64],
                    [4, 4, 64],
                    [2, 512, 1],
                    [65536, 65536, 1],
                ];
                let mut b = BLOCKS[draw(BLOCKS.len() as u64) as usize];
                let axis = draw(3) as usize;
                b[axis] = near(b[axis]).max(1);
                c.block = b;
            }
            1 => c.elems = near(t.limits.max_shared_bytes / 4),
            2 => {
                c.elems = 256;
                c.offset = Some(near(t.limits.max_shared_bytes / 4 - 256) * 4);
            }
            _ => c.depth = near(crate::verify::limits::MAX_NESTING as u64),
        }
        c
    }

    /// Whether the kernel is within the limits (docs/ir.md "Limits", restated here).
    pub fn within_limits(&self) -> bool {
        let l = &self.target.limits;
        let dims = (0..3).all(|i| self.block[i] <= l.max_block[i] as u64);
        let threads = self.block.iter().product::<u64>();
        let end = self.offset.unwrap_or(0) + self.elems * 4;
        dims && threads <= l.max_threads_per_block as u64
            && end <= l.max_shared_bytes
            && self.depth <= crate::verify::limits::MAX_NESTING as u64
    }

    /// The kernel text: every thread stores its element inside the nest, then reads its
    /// neighbour's (a hazard `sync` must fix with one barrier).
    pub fn text(&self) -> String {
        let [x, y, z] = self.block;
        let n = (x * y * z).min(4096);
        let e = self.elems;
        // Each thread stores one element and reads its neighbour's: every read is written.
        let m = e.min(x * y * z).max(1);
        let at = self.offset.map_or(String::new(), |o| format!(" at {o}"));
        let mut s = format!(
            "kernel @lim(%in: global i32[{n}], %out: global i32[{n}]) block({x}, {y}, {z}) {{\n  shared @a : i32[{e}]{at}\n  %x = tid.x\n  %y = tid.y\n  %z = tid.z\n  %zy = mul %z, {y}\n  %r = add %y, %zy\n  %rx = mul %r, {x}\n  %l = add %x, %rx\n  %g = gload %in[%l]\n  %i = rem %l, {m}\n  %l1 = add %l, 1\n  %j = rem %l1, {m}\n  %zero = const 0\n  %c = cmp lt %zero, 1\n"
        );
        for d in 0..self.depth {
            if self.ifs {
                s.push_str("if %c {\n");
            } else {
                s.push_str(&format!("for %k{d} = 0 to 1 step 1 {{\n"));
            }
        }
        s.push_str("store @a[%i], %g\n");
        for _ in 0..self.depth {
            s.push_str("}\n");
        }
        s.push_str("  %v = load @a[%j]\n  gstore %out[%l], %v\n}\n");
        s
    }
}

/// A kernel near the limits is accepted exactly when within them; refusals are user
/// diagnostics with a location; accepted kernels go through sync, check, plan-smem and emit.
pub fn limits_oracle(seed: u64, tally: &mut Tally) -> Result<(), String> {
    let c = LimitCase::from_seed(seed);
    let text = c.text();
    let t = c.target;
    let k = crate::reader::parse_kernel(&text).map_err(|d| vec![d]);
    let k = k.and_then(|k| match crate::verify::verify_with(&k, &t.limits) {
        d if d.is_empty() => Ok(k),
        d => Err(d),
    });
    let header = || {
        format!(
            "{c:?} on {}:\n{}",
            t.name,
            text.lines().take(3).collect::<String>()
        )
    };
    let k = match (k, c.within_limits()) {
        (Ok(k), true) => k,
        (Err(d), false) => {
            tally.limits_refused += 1;
            return match d
                .iter()
                .find(|d| d.kind != DiagKind::User || d.primary_span().is_none_or(|s| s.is_undef()))
            {
                None => Ok(()),
                Some(d) => Err(format!(
                    "refusal {} without a location: {}\n{}",
                    d.code,
                    d.message,
                    header()
                )),
            };
        }
        (Ok(_), false) => return Err(format!("accepted beyond the limits: {}", header())),
        (Err(d), true) => {
            return Err(format!(
                "refused within the limits: {}: {}",
                d[0].message,
                header()
            ));
        }
    };
    tally.limits_accepted += 1;
    match synchronize(&k, &t, &PlaceOptions::default()) {
        Ok(s) => race_free(&s.kernel, t, "sync output races")?,
        Err(d) => refusal_ok(&d, "sync", &k)?,
    }
    crate::transform::smem_plan::plan_shared_memory(&k);
    emit_oracle(&k, t, tally)
}
