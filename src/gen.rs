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
//! Complexity: O(size of the kernel). The generator is deterministic in its seed.

use std::fmt::Write as _;

use crate::check::splitmix64;
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

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        if n == 0 { 0 } else { splitmix64(self.0) % n }
    }
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

struct Buf {
    name: String,
    slots: u64,
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
}

/// The text of [`random_kernel`].
pub fn random_kernel_text(seed: u64, cfg: &GenConfig) -> String {
    let mut rng = Rng(seed ^ 0x5EED_0000_0000_0000);
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
    let mut g = Gen {
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
    };
    g.line("%t = tid.x");
    g.line("%g = gload %in[%t]");
    // Each thread initializes its own element of every slot of every buffer.
    for b in 0..g.bufs.len() {
        for s in 0..g.bufs[b].slots {
            let name = g.bufs[b].name.clone();
            g.line(&format!("store @{name}[{s}, %t], %g"));
        }
    }
    g.barrier();
    let n = 1 + g.rng.below(g.cfg.max_stmts as u64);
    for _ in 0..n {
        g.stmt(0);
    }
    let mut out = String::new();
    let _ = writeln!(out, "// generated by smemsync::r#gen (seed {seed})");
    let _ = writeln!(
        out,
        "kernel @gen{seed}(%in: global i32[{threads}], %out: global i32[{}]) block({threads}) {{",
        threads * g.outs.max(1)
    );
    for b in &g.bufs {
        let _ = writeln!(out, "  shared @{} : i32[{}, {threads}]", b.name, b.slots);
    }
    out.push_str(&g.body);
    out.push_str("}\n");
    out
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
                if perm && gcd(a, n) != 1 {
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
            0 | 1 if self.may_access() => {
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
            2 | 3 if self.may_access() => {
                let t = self.target();
                let i = self.index(false);
                let x = self.fresh();
                self.line(&format!("{x} = load {t}{i}]"));
                self.after_access();
                self.observe(&x);
            }
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
            6 if depth < self.cfg.max_depth && self.divergent == 0 => {
                let iv = self.fresh();
                let trip = 1 + self.rng.below(4);
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
            7 if depth < self.cfg.max_depth => {
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
                self.indent += 1;
                let n = 1 + self.rng.below(3);
                for _ in 0..n {
                    self.stmt(depth + 1);
                }
                self.indent -= 1;
                if self.rng.chance(1, 2) {
                    self.line("} else {");
                    self.indent += 1;
                    let n = 1 + self.rng.below(2);
                    for _ in 0..n {
                        self.stmt(depth + 1);
                    }
                    self.indent -= 1;
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
            _ => {
                // Register-only work keeps results flowing.
                let x = self.fresh();
                let k = self.rng.below(5);
                self.line(&format!("{x} = mul %g, {k}"));
                self.observe(&x);
            }
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
