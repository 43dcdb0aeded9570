//! Random kernel generator for property tests and fuzzing.
//!
//! What it computes: from a seed and a [`GenConfig`], a small verifier-clean kernel (as text,
//! parsed by the reader so that spans point into it) with a block of 8..=64 threads, nested
//! constant-bound loops, uniform and thread-dependent `if`s, multi-buffered shared buffers
//! (slots selected by `rem %i, S` views), shared stores, loads and atomics whose indices
//! depend on the thread id, constants and loop induction variables, optionally cp.async
//! copies, and global loads/stores so that results are observable.
//!
//! Invariants of every generated kernel: every shared buffer is initialized by its own
//! threads before any other access (no uninitialized reads); every index is reduced modulo
//! the dimension (never out of range); every copy is waited for right after it is issued;
//! there is no division by zero. With `barriers: true` a block barrier follows every shared
//! access at the first uniform point after it (at most one shared access per thread-dependent
//! `if`, no loop with shared accesses inside one), which makes the kernel race-free: every
//! pair of accesses by different threads is separated by a barrier. With `barriers: false`
//! the same seed gives the same kernel without those barriers (the generator draws the same
//! random numbers), which is usually racy.
//!
//! Options beyond the defaults (each off by default, so existing seeds keep their kernels):
//! `params` makes some loop trip counts a parameter `%n: i32 in [0, 64]`; `collectives` adds
//! `local_load`/`local_store` of whole slots with one of two layouts; `pipeline` appends a
//! loop whose `stage "load"` fills a buffer used only in that loop (what `pipeline` takes);
//! `phases` appends phases that each use fresh buffers (what `plan-smem` reuses), some of
//! them touching one buffer per arm of a thread-dependent `if`, each thread its own element.
//!
//! A second statement mix, [`hazard_kernel_text`], serves the placement oracles: unsynchronized
//! shared accesses on a plain and a double-buffered buffer under loops with symbolic trip
//! counts, parameter-uniform (`%flag`) and warp-uniform (`%lo = tid.x < 32`) branches, with
//! thread, neighbour (`t+1`, `t^1`) and constant indices. It promises only that the kernel
//! parses and verifies: it is the input on which placement must find and cover hazards.
//! A third, [`copy_paths_kernel_text`], serves the wait-counter oracles: async copies and
//! global loads on the paths of a loop with branches, the shapes on which a counter wait's
//! count depends on the path taken. All mixes draw from the one PRNG, [`Rng`], which the
//! property tests share.
//!
//! Complexity: O(size of the kernel). The generator is deterministic in its seed.

use std::fmt::Write as _;

use crate::ir::Kernel;

/// What the generator may produce.
#[derive(Clone, Debug)]
pub struct GenConfig {
    pub min_threads: u32,
    pub max_threads: u32,
    /// Maximum statements per region.
    pub max_stmts: u32,
    /// Maximum nesting of loops and ifs.
    pub max_depth: u32,
    /// Emit a barrier after every shared access (race-free by construction).
    pub barriers: bool,
    pub atomics: bool,
    /// Multi-buffered shared buffers indexed by `rem %i, S` views.
    pub slots: bool,
    /// cp.async copies (each followed by commit and `cp_async_wait 0`).
    pub async_copies: bool,
    /// Some loop trip counts are the parameter `%n: i32 in [0, 64]` (default 0..=5).
    pub params: bool,
    /// Collective `local_load`/`local_store` of whole slots, layouts "L0" and "L1".
    pub collectives: bool,
    /// A trailing loop with a `stage "load"` (input of `transform::pipeline`).
    pub pipeline: bool,
    /// Phases in all, the first using the buffers `@s*`, each later one fresh buffers (input
    /// of `transform::smem_plan`); 0 and 1 both mean one phase.
    pub phases: u32,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            min_threads: 8,
            max_threads: 64,
            max_stmts: 5,
            max_depth: 2,
            barriers: true,
            atomics: true,
            slots: true,
            async_copies: true,
            params: false,
            collectives: false,
            pipeline: false,
            phases: 0,
        }
    }
}

/// A random kernel (see the module doc). Never fails: the text it builds always parses.
pub fn random_kernel(seed: u64, cfg: &GenConfig) -> Kernel {
    let text = random_kernel_text(seed, cfg);
    match crate::reader::parse_kernel(&text) {
        Ok(k) => k,
        // Unreachable by construction; a kernel with no ops keeps callers total.
        Err(_) => crate::reader::parse_kernel("kernel @empty() block(8) {\n}\n")
            .unwrap_or_else(|_| Kernel::new("empty")),
    }
}

/// The one seeded PRNG of the generators and the property tests (it lives in the IR, which
/// the interpreter shares: [`crate::ir::random`]).
pub use crate::ir::random::Rng;

struct Buf {
    name: String,
    slots: u64,
}

impl Buf {
    fn decl(&self, threads: u64) -> String {
        format!("shared @{} : i32[{}, {threads}]", self.name, self.slots)
    }
}

struct Gen<'a> {
    cfg: &'a GenConfig,
    rng: Rng,
    body: String,
    indent: usize,
    names: usize,
    threads: u64,
    bufs: Vec<Buf>,
    outs: u64,
    /// Induction variables in scope.
    ivs: Vec<String>,
    /// Inside a thread-dependent `if` (depth of such ifs).
    divergent: u32,
    /// Shared accesses emitted in the current outermost divergent `if`.
    div_accesses: u32,
    pending_barrier: bool,
    /// Declarations of the buffers of the pipeline loop and of the phases.
    decls: Vec<String>,
    /// The default of `%n` (with `params`).
    n_default: u64,
}

/// The text of [`random_kernel`].
pub fn random_kernel_text(seed: u64, cfg: &GenConfig) -> String {
    let mut g = Gen::new(seed, cfg);
    g.line("%t = tid.x");
    g.line("%g = gload %in[%t]");
    g.init_buffers();
    let n = 1 + g.rng.below(g.cfg.max_stmts as u64);
    for _ in 0..n {
        g.stmt(0);
    }
    if cfg.pipeline {
        g.pipeline_loop();
    }
    for p in 1..cfg.phases.max(1) {
        g.phase(p);
    }
    g.finish(seed)
}

impl<'a> Gen<'a> {
    fn new(seed: u64, cfg: &'a GenConfig) -> Self {
        let mut rng = Rng::new(seed ^ 0x5EED_0000_0000_0000);
        let lo = cfg.min_threads.max(1) as u64;
        let hi = cfg.max_threads.max(cfg.min_threads).max(1) as u64;
        let threads = lo + rng.below(hi - lo + 1);
        let nbufs = 1 + rng.below(2);
        let mut bufs = Vec::new();
        for b in 0..nbufs {
            let slots = if cfg.slots { 1 + rng.below(3) } else { 1 };
            bufs.push(Buf {
                name: format!("s{b}"),
                slots,
            });
        }
        let n_default = if cfg.params { rng.below(6) } else { 0 };
        Gen {
            cfg,
            rng,
            body: String::new(),
            indent: 1,
            names: 0,
            threads,
            bufs,
            outs: 0,
            ivs: Vec::new(),
            divergent: 0,
            div_accesses: 0,
            pending_barrier: false,
            decls: Vec::new(),
            n_default,
        }
    }

    /// Each thread initializes its own element of every slot of every current buffer.
    fn init_buffers(&mut self) {
        for b in 0..self.bufs.len() {
            for s in 0..self.bufs[b].slots {
                let name = self.bufs[b].name.clone();
                self.line(&format!("store @{name}[{s}, %t], %g"));
            }
        }
        self.barrier();
    }

    /// The kernel text: header, declarations, body.
    fn finish(self, seed: u64) -> String {
        let threads = self.threads;
        let mut out = String::new();
        let _ = writeln!(out, "// generated by smemsync::r#gen (seed {seed})");
        let n = if self.cfg.params {
            format!("%n: i32 in [0, 64] = {}, ", self.n_default)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "kernel @gen{seed}({n}%in: global i32[{threads}], %out: global i32[{}]) block({threads}) {{",
            threads * self.outs.max(1)
        );
        for b in &self.bufs {
            let _ = writeln!(out, "  {}", b.decl(threads));
        }
        for d in &self.decls {
            let _ = writeln!(out, "  {d}");
        }
        out.push_str(&self.body);
        out.push_str("}\n");
        out
    }
}

impl Gen<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.body.push_str("  ");
        }
        self.body.push_str(s);
        self.body.push('\n');
    }

    fn fresh(&mut self) -> String {
        self.names += 1;
        format!("%v{}", self.names)
    }

    fn barrier(&mut self) {
        if self.cfg.barriers {
            self.line("barrier");
        }
    }

    /// After a shared access: a barrier now, or after the enclosing divergent `if`.
    fn after_access(&mut self) {
        if self.divergent > 0 {
            self.div_accesses += 1;
            self.pending_barrier = true;
        } else {
            self.barrier();
        }
    }

    fn may_access(&self) -> bool {
        self.divergent == 0 || self.div_accesses == 0
    }

    /// An i32 index in `[0, threads)`; with `perm`, a permutation of the threads (so that
    /// one store never has two threads writing one element).
    fn index(&mut self, perm: bool) -> String {
        let n = self.threads;
        let mut choice = self.rng.below(6);
        if perm && choice == 4 {
            choice = 5;
        }
        let v = self.fresh();
        match choice {
            0 => return "%t".into(),
            1 => {
                let c = self.rng.below(n);
                let s = self.fresh();
                self.line(&format!("{s} = add %t, {c}"));
                self.line(&format!("{v} = rem {s}, {n}"));
            }
            2 => {
                let mut a = 1 + self.rng.below(4);
                if perm && crate::ir::arith::gcd(a as i64, n as i64) != 1 {
                    a = 1;
                }
                let c = self.rng.below(n);
                let m = self.fresh();
                let s = self.fresh();
                self.line(&format!("{m} = mul %t, {a}"));
                self.line(&format!("{s} = add {m}, {c}"));
                self.line(&format!("{v} = rem {s}, {n}"));
            }
            3 if !self.ivs.is_empty() => {
                let iv = self.ivs[self.rng.below(self.ivs.len() as u64) as usize].clone();
                let s = self.fresh();
                self.line(&format!("{s} = add %t, {iv}"));
                self.line(&format!("{v} = rem {s}, {n}"));
            }
            4 if !self.ivs.is_empty() => {
                let iv = self.ivs[self.rng.below(self.ivs.len() as u64) as usize].clone();
                let k = 1 + self.rng.below(3);
                let m = self.fresh();
                self.line(&format!("{m} = mul {iv}, {k}"));
                self.line(&format!("{v} = rem {m}, {n}"));
            }
            _ => {
                let s = self.fresh();
                self.line(&format!("{s} = sub {}, %t", n - 1));
                self.line(&format!("{v} = rem {s}, {n}"));
            }
        }
        v
    }

    /// A memref and its slot index operand text, e.g. `@s0[1, ` or a view `%v3[`.
    fn target(&mut self) -> String {
        let b = self.rng.below(self.bufs.len() as u64) as usize;
        let name = self.bufs[b].name.clone();
        let slots = self.bufs[b].slots;
        if slots > 1 && !self.ivs.is_empty() && self.rng.chance(2, 3) {
            let iv = self.ivs[self.rng.below(self.ivs.len() as u64) as usize].clone();
            let off = self.rng.below(slots);
            let s = self.fresh();
            let r = self.fresh();
            let v = self.fresh();
            self.line(&format!("{s} = add {iv}, {off}"));
            self.line(&format!("{r} = rem {s}, {slots}"));
            self.line(&format!("{v} = view @{name}[{r}]"));
            format!("{v}[")
        } else {
            format!("@{name}[{}, ", self.rng.below(slots))
        }
    }

    fn observe(&mut self, v: &str) {
        let j = self.outs;
        self.outs += 1;
        let n = self.threads;
        let i = self.fresh();
        self.line(&format!("{i} = add %t, {}", j * n));
        self.line(&format!("gstore %out[{i}], {v}"));
    }

    fn stmt(&mut self, depth: u32) {
        let c = self.rng.below(8);
        match c {
            0 | 1 if self.may_access() => self.store_stmt(),
            2 | 3 if self.may_access() => self.load_stmt(),
            4 if self.may_access() && self.cfg.atomics => {
                let t = self.target();
                let i = self.index(false);
                let x = self.fresh();
                self.line(&format!("{x} = atomic add {t}{i}], 1"));
                self.after_access();
            }
            5 if self.may_access() && self.cfg.async_copies && self.divergent == 0 => {
                let t = self.target();
                let i = self.index(true);
                let j = self.index(false);
                self.line(&format!("cp_async {t}{i}] <- %in[{j}]"));
                self.line("cp_async_commit");
                self.line("cp_async_wait 0");
                self.after_access();
            }
            6 if depth < self.cfg.max_depth && self.divergent == 0 => self.loop_stmt(depth),
            7 if depth < self.cfg.max_depth => self.if_stmt(depth),
            _ => {
                // Register-only work keeps results flowing.
                let x = self.fresh();
                let k = self.rng.below(5);
                self.line(&format!("{x} = mul %g, {k}"));
                self.observe(&x);
            }
        }
    }

    /// With `collectives`, at uniform points, one time in three.
    fn collective_now(&mut self) -> bool {
        self.cfg.collectives && self.divergent == 0 && self.rng.chance(1, 3)
    }

    /// A view of one whole slot of a buffer (for collective accesses).
    fn slot_view(&mut self) -> String {
        let t = self.target();
        if let Some(v) = t.strip_suffix('[') {
            return v.to_string();
        }
        let inner = t.trim_end_matches(", ");
        let v = self.fresh();
        self.line(&format!("{v} = view {inner}]"));
        v
    }

    fn store_stmt(&mut self) {
        if self.collective_now() {
            let v = self.slot_view();
            let l = self.rng.below(2);
            self.line(&format!("local_store {v}, %g layout \"L{l}\""));
            self.after_access();
            return;
        }
        let t = self.target();
        let i = self.index(true);
        let val = self.fresh();
        let base = if self.ivs.is_empty() {
            "%t".to_string()
        } else {
            self.ivs[self.ivs.len() - 1].clone()
        };
        self.line(&format!("{val} = add %g, {base}"));
        self.line(&format!("store {t}{i}], {val}"));
        self.after_access();
    }

    fn load_stmt(&mut self) {
        let x = self.fresh();
        if self.collective_now() {
            let v = self.slot_view();
            let l = self.rng.below(2);
            self.line(&format!("{x} = local_load {v} layout \"L{l}\""));
        } else {
            let t = self.target();
            let i = self.index(false);
            self.line(&format!("{x} = load {t}{i}]"));
        }
        self.after_access();
        self.observe(&x);
    }

    fn loop_stmt(&mut self, depth: u32) {
        let iv = self.fresh();
        let trip = 1 + self.rng.below(4);
        let trip = if self.cfg.params && self.rng.chance(1, 3) {
            "%n".to_string()
        } else {
            trip.to_string()
        };
        self.line(&format!("for {iv} = 0 to {trip} step 1 {{"));
        self.indent += 1;
        self.ivs.push(iv);
        let n = 1 + self.rng.below(self.cfg.max_stmts as u64);
        for _ in 0..n {
            self.stmt(depth + 1);
        }
        self.ivs.pop();
        self.indent -= 1;
        self.line("}");
    }

    fn if_stmt(&mut self, depth: u32) {
        let thread_dep = self.rng.chance(1, 2) || self.ivs.is_empty();
        let cond = self.fresh();
        if thread_dep {
            let k = 1 + self.rng.below(self.threads);
            self.line(&format!("{cond} = cmp lt %t, {k}"));
        } else {
            let iv = self.ivs[self.ivs.len() - 1].clone();
            self.line(&format!("{cond} = cmp lt {iv}, 2"));
        }
        let outer = thread_dep && self.divergent == 0;
        if thread_dep {
            if outer {
                self.div_accesses = 0;
            }
            self.divergent += 1;
        }
        self.line(&format!("if {cond} {{"));
        self.arm(depth, 3);
        if self.rng.chance(1, 2) {
            self.line("} else {");
            self.arm(depth, 2);
        }
        self.line("}");
        if thread_dep {
            self.divergent -= 1;
            if outer && self.pending_barrier {
                self.pending_barrier = false;
                self.barrier();
            }
        }
    }

    /// The statements of an `if` arm: 1 to `max` of them, one level deeper.
    fn arm(&mut self, depth: u32, max: u64) {
        self.indent += 1;
        let n = 1 + self.rng.below(max);
        for _ in 0..n {
            self.stmt(depth + 1);
        }
        self.indent -= 1;
    }

    /// The loop of `pipeline`: its `stage "load"` fills `@p` (used nowhere else) from global
    /// memory or by cp.async; the body reads another thread's element into an accumulator.
    fn pipeline_loop(&mut self) {
        let n = self.threads;
        self.decls.push(format!("shared @p : i32[{n}]"));
        let (k, a, acc) = (self.fresh(), self.fresh(), self.fresh());
        let trip = 1 + self.rng.below(6);
        let trip = if self.cfg.params && self.rng.chance(1, 2) {
            "%n".to_string()
        } else {
            trip.to_string()
        };
        let copy = self.cfg.async_copies && self.rng.chance(1, 2);
        self.line(&format!(
            "{acc} = for {k} = 0 to {trip} step 1 iter({a} = 0) {{"
        ));
        self.indent += 1;
        self.ivs.push(k);
        self.line("stage \"load\" {");
        self.indent += 1;
        let i = self.index(true);
        let j = self.index(false);
        if copy {
            self.line(&format!("cp_async @p[{i}] <- %in[{j}]"));
            self.line("cp_async_commit");
        } else {
            let x = self.fresh();
            self.line(&format!("{x} = gload %in[{j}]"));
            self.line(&format!("store @p[{i}], {x}"));
        }
        self.indent -= 1;
        self.line("}");
        if copy {
            self.line("cp_async_wait 0");
        }
        self.barrier();
        let r = self.index(false);
        let (y, s) = (self.fresh(), self.fresh());
        self.line(&format!("{y} = load @p[{r}]"));
        self.line(&format!("{s} = add {a}, {y}"));
        self.barrier();
        self.line(&format!("yield {s}"));
        self.ivs.pop();
        self.indent -= 1;
        self.line("}");
        self.observe(&acc);
    }

    /// Phase `p`: fresh buffers, initialized and then used like the first ones, or one
    /// buffer per arm of a thread-dependent `if`.
    fn phase(&mut self, p: u32) {
        if self.rng.chance(1, 3) {
            return self.divergent_phase(p);
        }
        let nbufs = 1 + self.rng.below(2);
        let mut bufs = Vec::new();
        for b in 0..nbufs {
            let slots = if self.cfg.slots {
                1 + self.rng.below(3)
            } else {
                1
            };
            let name = format!("q{p}_{b}");
            bufs.push(Buf { name, slots });
        }
        self.decls.extend(bufs.iter().map(|b| b.decl(self.threads)));
        let outer = std::mem::replace(&mut self.bufs, bufs);
        self.init_buffers();
        let n = 1 + self.rng.below(self.cfg.max_stmts as u64);
        for _ in 0..n {
            self.stmt(0);
        }
        self.bufs = outer;
    }

    /// Buffers `@q{p}a` and `@q{p}b`, each touched in one arm of `if tid < K`, every thread
    /// storing and loading back one element (its own in `a`, a rotation in `b`).
    fn divergent_phase(&mut self, p: u32) {
        let n = self.threads;
        let (a, b) = (format!("q{p}a"), format!("q{p}b"));
        self.decls.push(format!("shared @{a} : i32[{n}]"));
        self.decls.push(format!("shared @{b} : i32[{n}]"));
        let cond = self.fresh();
        let k = 1 + self.rng.below(n);
        self.line(&format!("{cond} = cmp lt %t, {k}"));
        self.line(&format!("if {cond} {{"));
        self.indent += 1;
        self.own_element(&a, "%t".into());
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
        let (s, i) = (self.fresh(), self.fresh());
        let c = 1 + self.rng.below(n);
        self.line(&format!("{s} = add %t, {c}"));
        self.line(&format!("{i} = rem {s}, {n}"));
        self.own_element(&b, i);
        self.indent -= 1;
        self.line("}");
        self.barrier();
    }

    fn own_element(&mut self, buf: &str, i: String) {
        let (v, x) = (self.fresh(), self.fresh());
        self.line(&format!("{v} = mul %g, 3"));
        self.line(&format!("store @{buf}[{i}], {v}"));
        self.line(&format!("{x} = load @{buf}[{i}]"));
        self.observe(&x);
    }
}

/// A random kernel of the hazard mix (see the module doc): 4..=8 statements at the top level,
/// loops (`0 to 4` or `0 to %n`) and ifs nested up to two deep, on `threads` threads.
pub fn hazard_kernel_text(seed: u64, threads: u32) -> String {
    let mut h = HazardGen {
        rng: Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
        body: String::new(),
        names: 0,
        ivs: Vec::new(),
    };
    let mut budget = 4 + h.rng.below(5);
    h.stmts(0, &mut budget);
    format!(
        "kernel @rand(%n: i32, %f: i32) block({threads}) {{\n  shared @s : i32[{threads}]\n  shared @d : i32[2, {threads}]\n  %t = tid.x\n  %one = const 1 : i32\n  %t1 = add %t, 1\n  %tn = rem %t1, {threads}\n  %t3 = xor %t, 1\n  %tw = rem %t3, {threads}\n  %flag = cmp gt %f, 0\n  %lo = cmp lt %t, 32\n{}}}\n",
        h.body
    )
}

/// State of [`hazard_kernel_text`].
struct HazardGen {
    rng: Rng,
    body: String,
    names: usize,
    /// Induction variables in scope, innermost last.
    ivs: Vec<String>,
}

impl HazardGen {
    fn fresh(&mut self, prefix: &str) -> String {
        let n = self.names;
        self.names += 1;
        format!("%{prefix}{n}")
    }

    fn line(&mut self, depth: usize, text: &str) {
        self.body.push_str(&"  ".repeat(depth + 1));
        self.body.push_str(text);
        self.body.push('\n');
    }

    /// `budget` statements at nesting `depth` (a loop or if counts as one).
    fn stmts(&mut self, depth: usize, budget: &mut u64) {
        while *budget > 0 {
            *budget -= 1;
            match self.rng.below(12) {
                0 if depth < 2 => {
                    let k = self.fresh("k");
                    let hi = if self.rng.below(3) == 0 { "4" } else { "%n" };
                    self.line(depth, &format!("for {k} = 0 to {hi} step 1 {{"));
                    self.ivs.push(k);
                    let mut inner = 2 + self.rng.below(4);
                    self.stmts(depth + 1, &mut inner);
                    self.ivs.pop();
                    self.line(depth, "}");
                }
                1 if depth < 2 => {
                    let cond = if self.rng.below(5) == 0 {
                        "%lo"
                    } else {
                        "%flag"
                    };
                    self.line(depth, &format!("if {cond} {{"));
                    let mut inner = 1 + self.rng.below(3);
                    self.stmts(depth + 1, &mut inner);
                    self.line(depth, "}");
                }
                _ => self.access(depth),
            }
        }
    }

    /// A store, load or atomic on `@s` or on a slot of the double buffer `@d`.
    fn access(&mut self, depth: usize) {
        let buf = if self.rng.below(2) == 0 { "@s" } else { "@d" };
        let kind = self.rng.below(7);
        let idx = match self.rng.below(if kind <= 2 { 3 } else { 4 }) {
            0 => "%t",
            1 => "%tn",
            2 => "%tw",
            _ => "0",
        };
        let mem = if buf == "@d" {
            let slot = self.slot(depth);
            let v = self.fresh("v");
            self.line(depth, &format!("{v} = view @d[{slot}]"));
            v
        } else {
            "@s".to_string()
        };
        match kind {
            0..=2 => self.line(depth, &format!("store {mem}[{idx}], %one")),
            3..=5 => {
                let x = self.fresh("x");
                self.line(depth, &format!("{x} = load {mem}[{idx}]"));
            }
            _ => {
                let x = self.fresh("a");
                self.line(depth, &format!("{x} = atomic add {mem}[{idx}], %one"));
            }
        }
    }

    /// The slot of `@d`: `k mod 2` or `(k + 1) mod 2` of the innermost loop, else 0.
    fn slot(&mut self, depth: usize) -> String {
        let Some(k) = self.ivs.last().cloned() else {
            let _ = self.rng.below(2);
            return "0".into();
        };
        let s = self.fresh("sl");
        if self.rng.below(2) == 0 {
            self.line(depth, &format!("{s}a = rem {k}, 2"));
            format!("{s}a")
        } else {
            self.line(depth, &format!("{s}b = add {k}, 1"));
            self.line(depth, &format!("{s} = rem {s}b, 2"));
            s
        }
    }
}

/// A straight-line piece: copies (`c`), global loads (`g`), nothing else.
fn copy_piece(r: &mut Rng, s: &mut String, ind: &str, id: &mut u32) {
    for _ in 0..r.below(3) {
        *id += 1;
        if r.below(3) == 0 {
            s.push_str(&format!("{ind}gather_to_lds @a[%t] <- %X[%t]\n"));
        } else {
            s.push_str(&format!("{ind}%g{id} = gload %Y[%t]\n"));
        }
    }
}

/// A random kernel of the copy-paths mix (see the module doc), for the wait-counter oracles:
/// one loop over `%n` whose body mixes `gather_to_lds` copies and global loads, in straight
/// lines and in both arms of `if %c`, then a consumer of the copied buffer. `tracked`: the
/// branch condition is computed once per thread (outside the loop), which the
/// dataflow tracks (two `if`s on it take the same arm) and the walk does not; otherwise it is
/// recomputed in each iteration, and both see the same paths.
pub fn copy_paths_kernel_text(seed: u64, tracked: bool) -> String {
    let mut r = Rng::new(seed);
    let mut id = 0;
    let mut s = String::from(
        "kernel @o(%X: global f32[64], %Y: global f32[64], %Out: global f32[64], %n: i32) block(64) {\n  shared @a : f32[64]\n  %t = tid.x\n",
    );
    // Every thread's element is initialized, whichever copies its thread issues.
    s += "  store @a[%t], 0.0\n";
    if tracked {
        s += "  %c = cmp lt %t, 32\n";
    }
    copy_piece(&mut r, &mut s, "  ", &mut id);
    s += "  for %k = 0 to %n step 1 {\n";
    if !tracked {
        s += "    %c = cmp lt %t, %k\n";
    }
    for _ in 0..1 + r.below(3) {
        copy_piece(&mut r, &mut s, "    ", &mut id);
        if r.below(2) == 0 {
            s += "    if %c {\n";
            copy_piece(&mut r, &mut s, "      ", &mut id);
            s += "    } else {\n";
            copy_piece(&mut r, &mut s, "      ", &mut id);
            s += "    }\n";
        }
    }
    if r.below(2) == 0 {
        s += "    if %c {\n      %v = load @a[%t]\n      gstore %Out[%t], %v\n    }\n";
    } else {
        s += "    %v = load @a[%t]\n    gstore %Out[%t], %v\n";
    }
    s += "  }\n}\n";
    s
}
