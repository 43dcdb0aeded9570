//! The interpreter: executes a kernel on the CPU per docs/ir.md, block by block, with every
//! thread of a block, real data in global buffers, and the race detector of [`super::race`]
//! watching every shared-memory access.
//!
//! What it computes: the final contents of every global buffer, or the first race, deadlock
//! or execution error (a [`Stop`]), for one schedule chosen by a seed.
//!
//! Scheduling is cooperative: a thread runs until it blocks at a sync op or a wait, exits, or
//! uses up a quantum of ops; the next thread is drawn from the runnable ones by a seeded
//! generator, so different seeds explore different interleavings. Async copies read their
//! global source at issue and are *performed* (their shared write or read) by an engine at an
//! adversarial moment: with [`EnginePolicy::Latest`] at the completing wait (or, for TMA, when
//! no thread can run without it); with [`EnginePolicy::Random`] also at random moments
//! between. The race detector treats the whole interval as the access, so the verdict does
//! not depend on the moment; the data does, for racy kernels only.
//!
//! Shared memory is one byte array per block ([`shared_layout`]): pinned buffers at their
//! offsets (overlapping ones alias), unpinned ones after them. Stores encode values to the
//! element type's little-endian bytes, loads decode them, and each byte records whether it
//! was written, so a load of an element with an unwritten byte is an uninitialized read.
//!
//! Modelled sync: block barrier, warp_sync, split barrier signal/wait per id, named barriers
//! (arrive/sync with count), mbarriers (init/arrive/expect_tx/wait on parity, TMA transaction
//! bytes), counter waits (per-thread ordered lists per counter; the target decides which
//! counter a `gather_to_lds` and a `gload` increment, generic model: `vmcnt`), cp.async /
//! bulk / wgmma groups, and tokens.
//!
//! Invariants: a thread's frames mirror the region tree (one frame per entered region); a
//! copy is performed at most once and completed at most once. Complexity: O(ops executed)
//! plus O(threads x clock slots) per block-wide sync op.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use super::race::{Acc, AccKind, AccessSite, Conflict, NO_COPY, RaceState, Witness};
use crate::diag::{DiagKind, Diagnostic, Span};
use crate::ir::*;
use crate::ir::arith::floor_div;
use crate::target::Target;

mod wgmma;

/// A per-thread value or buffer element.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Val {
    I1(bool),
    I32(i32),
    F32(f32),
    /// A copy's completion token (the copy id).
    Token(u32),
}

impl Val {
    pub fn as_i64(self) -> i64 {
        match self {
            Val::I1(b) => b as i64,
            Val::I32(v) => v as i64,
            Val::F32(f) => f as i64,
            Val::Token(t) => t as i64,
        }
    }
    pub fn as_f32(self) -> f32 {
        match self {
            Val::I1(b) => b as i32 as f32,
            Val::I32(v) => v as f32,
            Val::F32(f) => f,
            Val::Token(t) => t as f32,
        }
    }
    pub fn truthy(self) -> bool {
        match self {
            Val::I1(b) => b,
            Val::I32(v) => v != 0,
            Val::F32(f) => f != 0.0,
            Val::Token(_) => true,
        }
    }
    fn from_scalar(s: Scalar) -> Val {
        match s {
            Scalar::I1(b) => Val::I1(b),
            Scalar::I32(v) => Val::I32(v),
            Scalar::F32(f) => Val::F32(f),
        }
    }
    /// Converts to a scalar type (i1 as 0/1, f32 to i32 as `ftoi`).
    fn to_ty(self, ty: ScalarType) -> Val {
        match ty {
            ScalarType::I1 => Val::I1(self.as_i64() & 1 != 0),
            ScalarType::I32 => match self {
                Val::F32(f) => Val::I32(f as i32),
                v => Val::I32(v.as_i64() as i32),
            },
            ScalarType::F32 => Val::F32(self.as_f32()),
            ScalarType::Token => self,
        }
    }
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::I1(b) => write!(f, "{}", *b as i32),
            Val::I32(v) => write!(f, "{v}"),
            Val::F32(x) => write!(f, "{x:e}"),
            Val::Token(t) => write!(f, "token{t}"),
        }
    }
}

/// Converts a value to what an element of type `e` holds (integers wrap, floats round).
pub fn store_conv(e: ElemType, v: Val) -> Val {
    match e {
        ElemType::I8 => Val::I32(v.to_ty(ScalarType::I32).as_i64() as i8 as i32),
        ElemType::I16 => Val::I32(v.to_ty(ScalarType::I32).as_i64() as i16 as i32),
        ElemType::I32 => v.to_ty(ScalarType::I32),
        ElemType::F16 => Val::F32(round_f16(v.as_f32())),
        ElemType::BF16 => Val::F32(round_bf16(v.as_f32())),
        ElemType::F32 | ElemType::MBarrier => Val::F32(v.as_f32()),
    }
}

/// Writes the little-endian bytes of `v` stored to an element of type `e` (converted as
/// [`store_conv`] does) into `out`, which holds `e.bytes()` bytes. Mbarriers hold no data.
pub fn encode_elem(e: ElemType, v: Val, out: &mut [u8]) {
    match e {
        ElemType::I8 => out[0] = v.to_ty(ScalarType::I32).as_i64() as i8 as u8,
        ElemType::I16 => {
            let x = v.to_ty(ScalarType::I32).as_i64() as i16;
            out.copy_from_slice(&x.to_le_bytes());
        }
        ElemType::I32 => {
            let x = v.to_ty(ScalarType::I32).as_i64() as i32;
            out.copy_from_slice(&x.to_le_bytes());
        }
        ElemType::F16 => out.copy_from_slice(&f32_to_f16_bits(v.as_f32()).to_le_bytes()),
        ElemType::BF16 => out.copy_from_slice(&f32_to_bf16_bits(v.as_f32()).to_le_bytes()),
        ElemType::F32 => out.copy_from_slice(&v.as_f32().to_bits().to_le_bytes()),
        ElemType::MBarrier => {}
    }
}

/// The value of an element of type `e` held in the little-endian bytes `b` (`e.bytes()` of
/// them): integers sign-extend to i32, floats widen exactly to f32.
pub fn decode_elem(e: ElemType, b: &[u8]) -> Val {
    match e {
        ElemType::I8 => Val::I32(b[0] as i8 as i32),
        ElemType::I16 => Val::I32(i16::from_le_bytes([b[0], b[1]]) as i32),
        ElemType::I32 => Val::I32(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        ElemType::F16 => Val::F32(f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]]))),
        ElemType::BF16 => Val::F32(bf16_bits_to_f32(u16::from_le_bytes([b[0], b[1]]))),
        ElemType::F32 => Val::F32(f32::from_bits(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        ElemType::MBarrier => Val::F32(0.0),
    }
}

/// Byte offset of every shared buffer in a block's shared memory, and the total size:
/// pinned buffers at their `at` offsets (so buffers whose byte ranges overlap alias), then
/// the unpinned ones in declaration order, each at the next multiple of 16 bytes after the
/// end of every pinned buffer and of the unpinned ones before it (so they overlap nothing).
/// Mbarrier buffers hold no data and get offset 0.
pub fn shared_layout(k: &Kernel) -> (Vec<u64>, u64) {
    let mut next = k
        .buffers
        .values()
        .filter(|b| b.elem != ElemType::MBarrier)
        .filter_map(|b| b.offset.map(|o| o + b.bytes()))
        .max()
        .unwrap_or(0);
    let mut base = Vec::new();
    for b in k.buffers.values() {
        if b.elem == ElemType::MBarrier {
            base.push(0);
            continue;
        }
        base.push(match b.offset {
            Some(o) => o,
            None => {
                let o = next.div_ceil(16) * 16;
                next = o + b.bytes();
                o
            }
        });
    }
    (base, next)
}

/// The final contents of one global buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalMem {
    pub name: String,
    pub elem: ElemType,
    pub shape: Vec<u64>,
    /// Row-major elements.
    pub data: Vec<Val>,
}

/// `splitmix64` as docs/ir.md section 3 gives it.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Input element `i` of the `p`-th global parameter (counting global parameters only).
pub fn input_element(seed: u64, p: u64, i: u64, elem: ElemType) -> Val {
    let x = splitmix64(seed ^ (p << 48) ^ i);
    if elem.is_float() {
        let f = ((x >> 40) as f32) / 16_777_216.0 * 2.0 - 1.0;
        store_conv(elem, Val::F32(f))
    } else {
        store_conv(elem, Val::I32(((x >> 33) % 17) as i32 - 8))
    }
}

/// When the copy engine performs a copy's shared access.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EnginePolicy {
    /// At the last legal moment: the completing wait (TMA: when nothing else can run).
    Latest,
    /// At random moments between issue and completion (drawn from the schedule seed).
    Random,
}

/// How collective `local_load`/`local_store` spread a view's elements over the threads. The
/// IR leaves the layout opaque (any thread may own any element; one layout name and one view
/// shape give one mapping), so the checker runs more than one.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum LayoutMap {
    /// docs/ir.md's concrete mapping, the one `run` uses: layouts numbered `n` by name in
    /// order of first appearance (no name: a fresh number), `owner(e) = (e + n) mod T`.
    #[default]
    Documented,
    /// An adversarial one: `owner(e) = (e + n + s + d) mod T`, with `n` as above, `d` the
    /// index of the view shape among the shapes used with that layout name (in order of first
    /// appearance) and `s = T/2 + 1` (1 when that is `T`). With fewer than `T/2 - 1` shapes
    /// per name it gives every position another thread than `Documented` does, so a plain
    /// access of one thread that meets a collective one under `Documented` meets another
    /// thread's here; and one name with two shapes gives two different owners.
    Rotated,
}

/// The diagnostic for an execution that ran past its step limit. Only a `while` loop or an
/// mbarrier wait can spin forever; a kernel with neither simply does more work than the limit
/// allows at this size, which is no finding: the check is inconclusive (a usage error).
fn step_limit(k: &Kernel, max: u64) -> Diagnostic {
    let spin = k.ops_in_order().into_iter().find(|&o| {
        matches!(
            k.ops[o].kind,
            OpKind::While { .. } | OpKind::MbarWait { .. }
        )
    });
    match spin {
        Some(op) => Diagnostic::error(
            DiagKind::Finding,
            "C0009",
            format!("execution exceeded {max} steps"),
        )
        .with_label(k.span(op), "this may spin forever waiting for another thread")
        .with_help("raise --max-steps if the kernel merely does that much work"),
        None => Diagnostic::user(
            "C0012",
            format!("execution exceeded {max} steps; the check is inconclusive"),
        )
        .with_note("the kernel has no `while` loop or mbarrier wait, so nothing spins: it does more work than the limit at this block size and these bounds")
        .with_help("raise --max-steps, or check smaller --bounds"),
    }
}

/// Configuration of one execution.
#[derive(Clone, Debug)]
pub struct ExecConfig {
    pub target: Option<Target>,
    /// Value of every scalar kernel parameter.
    pub scalars: HashMap<Value, Val>,
    pub input_seed: u64,
    pub sched_seed: u64,
    pub policy: EnginePolicy,
    /// Total ops executed before giving up (a spin loop that never ends).
    pub max_steps: u64,
    pub detect_races: bool,
    /// The mapping of collective accesses to threads.
    pub layouts: LayoutMap,
}

/// Why an execution stopped early.
#[derive(Clone, Debug)]
pub enum Stop {
    Race(Box<Witness>),
    Deadlock(Diagnostic),
    Exec(Diagnostic),
}

const QUANTUM: u32 = 4096;
const NCOUNTERS: usize = 9;

fn counter_index(c: Counter) -> usize {
    Counter::ALL.iter().position(|x| *x == c).unwrap_or(0)
}

#[derive(Clone, Debug)]
struct ViewInst {
    buf: Buffer,
    off: u64,
    shape: Vec<u64>,
    strides: Vec<u64>,
}

impl ViewInst {
    fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
    /// Root-buffer element of the view's `e`-th element (row-major).
    fn element(&self, mut e: u64) -> u64 {
        let mut off = self.off;
        for d in (0..self.shape.len()).rev() {
            let n = self.shape[d].max(1);
            off += (e % n) * self.strides[d];
            e /= n;
        }
        off
    }
}

#[derive(Clone, Copy, Debug)]
enum FrameKind {
    Plain,
    IfArm(Op),
    For { op: Op, iv: i64, hi: i64, step: i64 },
    WhileCond(Op, i64),
    WhileBody(Op, i64),
}

#[derive(Clone, Debug)]
struct Frame {
    region: Region,
    pc: usize,
    kind: FrameKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Blocked {
    Barrier(Op),
    Warp(Op),
    Split(i32, u64, Op),
    Named(u32, Op),
    Mbar(usize, i64, Op),
}

#[derive(Clone, Copy, Debug, PartialEq, Default)]
enum Status {
    #[default]
    Ready,
    Blocked(Blocked),
    Exited,
}

#[derive(Default)]
struct Thread {
    lin: u32,
    xyz: [u32; 3],
    vals: Vec<Val>,
    views: Vec<Option<ViewInst>>,
    frames: Vec<Frame>,
    status: Status,
    iter: u32,
    /// Per counter, outstanding operations in issue order (None: a plain global load).
    cnt: [Vec<Option<u32>>; NCOUNTERS],
    /// cp.async, bulk, wgmma: (open group, committed groups).
    groups: [(Vec<u32>, Vec<Vec<u32>>); 3],
    split: HashMap<i32, u64>,
    lds_unfenced: bool,
    fence_clock: u32,
    /// Per value: the wgmma execution (copy id) whose asynchronous result it holds, until a
    /// `wgmma_wait` completes it (moves carry it along: docs/async.md, register results).
    pend: Vec<Option<u32>>,
    /// The pending marks of the values a `yield` hands to its region's successor.
    moving: Vec<Option<u32>>,
    /// Values held as register A by a wgmma execution (copy id) until a wait completes it.
    held: Vec<(Value, u32)>,
}

/// Data a copy moves when performed.
struct PendingCopy {
    issuer: usize,
    op: Op,
    /// Async writes: (buffer, element, value), shared by the identical copies that several
    /// threads issue from one op in one iteration (with a flag: already written).
    writes: SharedWrites,
    /// TMA store: shared elements read, and the global elements they go to.
    store: Option<TmaStoreData>,
    /// TMA load: the mbarrier slot and bytes it completes.
    mbar: Option<(usize, i64)>,
}

#[derive(Default)]
struct BarState {
    op: Option<Op>,
    arrived: Vec<usize>,
    vc: Vec<u32>,
}

#[derive(Default)]
struct SplitState {
    cur: u64,
    signalled: usize,
    vc: Vec<u32>,
    done: Vec<Vec<u32>>,
    waiters: Vec<(usize, u64)>,
    signal_op: Option<Op>,
}

#[derive(Default)]
struct NamedState {
    count: u32,
    arrived: u32,
    vc: Vec<u32>,
    waiters: Vec<usize>,
    op: Option<Op>,
}

#[derive(Default, Clone)]
struct MbarState {
    init: bool,
    count: i64,
    pending: i64,
    tx: i64,
    phases: u32,
    vc: Vec<u32>,
    last_vc: Vec<u32>,
    attached: Vec<u32>,
    waiters: Vec<usize>,
    init_by: (usize, u32, Option<Op>),
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        splitmix64(self.0)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Executes the whole grid. Returns the final global buffers, or why execution stopped.
pub fn execute(k: &Kernel, cfg: &ExecConfig) -> Result<Vec<GlobalMem>, Stop> {
    let mut globals = init_globals(k, cfg)?;
    let mut steps = 0u64;
    for bz in 0..k.grid[2] {
        for by in 0..k.grid[1] {
            for bx in 0..k.grid[0] {
                let mut b = BlockExec::new(k, cfg, &mut globals, [bx, by, bz], &mut steps);
                b.run()?;
            }
        }
    }
    Ok(globals)
}

fn user_err(msg: String) -> Stop {
    Stop::Exec(Diagnostic::user("C0010", msg))
}

fn init_globals(k: &Kernel, cfg: &ExecConfig) -> Result<Vec<GlobalMem>, Stop> {
    let mut out = Vec::new();
    for (p, g) in k.globals.values().enumerate() {
        let mut shape = Vec::new();
        for d in &g.shape {
            let n = match d {
                Dim::Const(c) => *c as i64,
                Dim::Param(v) => match cfg.scalars.get(v) {
                    Some(x) => x.as_i64(),
                    None => {
                        return Err(user_err(format!(
                            "no value for parameter {}",
                            k.value_name(*v)
                        )));
                    }
                },
            };
            if !(0..=(1 << 26)).contains(&n) {
                return Err(user_err(format!(
                    "global %{} has dimension {n}, out of the supported range",
                    g.name
                )));
            }
            shape.push(n as u64);
        }
        let count: u64 = shape.iter().product();
        if count > 1 << 26 {
            return Err(user_err(format!(
                "global %{} has {count} elements, too many to interpret",
                g.name
            )));
        }
        let data = (0..count)
            .map(|i| input_element(cfg.input_seed, p as u64, i, g.elem))
            .collect();
        out.push(GlobalMem {
            name: g.name.clone(),
            elem: g.elem,
            shape,
            data,
        });
    }
    Ok(out)
}

struct BlockExec<'a> {
    k: &'a Kernel,
    cfg: &'a ExecConfig,
    globals: &'a mut Vec<GlobalMem>,
    bid: [u32; 3],
    steps: &'a mut u64,
    nthreads: usize,
    warp: usize,
    threads: Vec<Thread>,
    ready: Vec<usize>,
    cur: usize,
    running: bool,
    cur_woken: bool,
    /// The first error that must not mask a race found later in the block (an
    /// uninitialized read, which a later unordered write may explain; a copy outstanding at
    /// its thread's exit). Reported when the block ends without a race.
    deferred: Option<Stop>,
    rng: Rng,
    /// The block's shared memory, one byte array ([`shared_layout`]): aliasing pinned
    /// buffers read each other's bytes.
    smem: Vec<u8>,
    /// Per shared byte: written by a thread or copy of this block.
    written: Vec<bool>,
    /// Per buffer: byte offset of element 0, bytes per element (0 for mbarriers, which hold
    /// no data), element type.
    place: Vec<(usize, usize, ElemType)>,
    /// Per buffer: first granule, granules per element.
    gran: Vec<(usize, usize)>,
    mbar_base: Vec<usize>,
    race: RaceState,
    copies: HashMap<u32, PendingCopy>,
    unperformed: Vec<u32>,
    copy_ops: HashMap<u32, (Op, usize)>,
    bar: BarState,
    warps: Vec<BarState>,
    split: HashMap<i32, SplitState>,
    named: HashMap<u32, NamedState>,
    mbar: Vec<MbarState>,
    layouts: HashMap<Op, u64>,
    /// Collective ops with a concrete layout: the view elements of each thread.
    concrete: HashMap<Op, Rc<Vec<Vec<u64>>>>,
    iters: HashMap<Vec<i64>, u32>,
    iter_list: Vec<Vec<i64>>,
    tiles: HashMap<TileKey, SharedWrites>,
    /// Per warp: the register-A wgmma rendezvous in progress.
    meets: HashMap<usize, wgmma::Meet>,
    parents: Parents,
}

type TileKey = (Op, u32, Buffer, u64, Vec<i64>);

/// The shared elements a copy writes and their values, plus "already written".
type SharedWrites = Rc<(Vec<(Buffer, u64, Val)>, Cell<bool>)>;

/// A TMA store: shared elements read, the global buffer and elements they go to.
type TmaStoreData = (Vec<(Buffer, u64)>, Global, Vec<u64>);

/// Whether the kernel has collective `local_load`/`local_store` ops (whose thread mapping
/// [`LayoutMap`] chooses).
pub fn has_collective_layouts(k: &Kernel) -> bool {
    crate::ir::layout::collective_uses(k)
        .into_iter()
        .any(|(_, name, mem)| concrete_owners(k, name, &k.shape(mem), 32).is_none()
            && concrete_owners(k, name, &k.shape(mem), 64).is_none())
}

/// The decoded layout of a collective access when it is concrete (docs/ir.md, "Concrete
/// layouts"): the checker executes that map; only opaque layouts get [`LayoutMap`]'s choices.
fn concrete_owners(
    k: &Kernel,
    name: Option<&str>,
    shape: &[u64],
    warp: u32,
) -> Option<Box<(crate::ir::layout::Distributed, crate::ir::layout::OwnerMap)>> {
    match crate::ir::layout::ownership(k, name, shape, warp) {
        crate::ir::layout::Ownership::Concrete(c) => Some(c),
        crate::ir::layout::Ownership::Opaque(_) => None,
    }
}

/// Per collective op with a concrete layout, the view elements each thread touches: every
/// element it holds when the op reads, the elements it writes (it is their lowest holder)
/// when the op writes. Enumerates the layout's inputs once per op.
fn concrete_elements(k: &Kernel, warp: u32) -> HashMap<Op, Rc<Vec<Vec<u64>>>> {
    let mut out = HashMap::new();
    for (op, name, mem) in crate::ir::layout::collective_uses(k) {
        let Some(c) = concrete_owners(k, name, &k.shape(mem), warp) else {
            continue;
        };
        let (d, m) = &*c;
        let reads = matches!(k.ops[op].kind, OpKind::LocalLoad { .. });
        let n = (d.lanes() * d.warps()) as usize;
        let mut per = vec![Vec::new(); n];
        for t in 0..n as u32 {
            let v = &mut per[t as usize];
            for r in 0..d.registers() {
                let e = d.element(r, t);
                if (reads || m.writer(e) == t) && !v.contains(&e) {
                    v.push(e);
                }
            }
            v.sort_unstable();
        }
        out.insert(op, Rc::new(per));
    }
    out
}

/// Per collective op, the offset `o` of its mapping `owner(e) = (e + o) mod threads`
/// ([`LayoutMap`]).
fn layout_offsets(k: &Kernel, map: LayoutMap, threads: u64) -> HashMap<Op, u64> {
    let shift = match (map, threads / 2 + 1) {
        (LayoutMap::Documented, _) => 0,
        (LayoutMap::Rotated, s) if s < threads => s,
        (LayoutMap::Rotated, _) => 1,
    };
    let mut out = HashMap::new();
    let ids = k.layout_ids();
    let mut names: HashMap<String, Vec<Vec<u64>>> = HashMap::new();
    k.walk(|op| {
        let (l, mem) = match &k.ops[op].kind {
            OpKind::LocalLoad { layout, mem } | OpKind::LocalStore { layout, mem, .. } => {
                (layout, *mem)
            }
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => (&c.layout, c.dst),
            _ => return,
        };
        let num = ids.get(&op).map_or(0, |&n| u64::from(n));
        let shapes = match l {
            Some(name) => names.entry(name.clone()).or_default(),
            None => {
                out.insert(op, num + shift);
                return;
            }
        };
        let shape = k.shape(mem);
        let d = shapes
            .iter()
            .position(|x| *x == shape)
            .unwrap_or(shapes.len());
        if d == shapes.len() {
            shapes.push(shape);
        }
        let d = if map == LayoutMap::Rotated {
            d as u64
        } else {
            0
        };
        out.insert(op, num + shift + d);
    });
    out
}

impl<'a> BlockExec<'a> {
    fn new(
        k: &'a Kernel,
        cfg: &'a ExecConfig,
        globals: &'a mut Vec<GlobalMem>,
        bid: [u32; 3],
        steps: &'a mut u64,
    ) -> Self {
        let n = k.threads() as usize;
        let warp = cfg.target.map_or(32, |t| t.warp as usize).max(1);
        // Shared layout in bytes (pinned buffers at their offsets, the others after them);
        // the race detector's granule is the smallest element size.
        let (base, bytes) = shared_layout(k);
        let g = k
            .buffers
            .values()
            .filter(|b| b.elem != ElemType::MBarrier)
            .map(|b| b.elem.bytes())
            .min()
            .unwrap_or(4);
        let mut gran = Vec::new();
        let mut place = Vec::new();
        let mut mbar_base = Vec::new();
        let mut nmbar = 0usize;
        for (b, o) in k.buffers.values().zip(&base) {
            let size = if b.elem == ElemType::MBarrier {
                0
            } else {
                b.elem.bytes() as usize
            };
            place.push((*o as usize, size, b.elem));
            if b.elem == ElemType::MBarrier {
                gran.push((0, 0));
                mbar_base.push(nmbar);
                nmbar += b.elements() as usize;
                continue;
            }
            gran.push(((o / g) as usize, (b.elem.bytes() / g) as usize));
            mbar_base.push(0);
        }
        let granules = (bytes.div_ceil(g)) as usize + 1;
        let smem = vec![0u8; bytes as usize];
        let written = vec![false; bytes as usize];
        let layouts = layout_offsets(k, cfg.layouts, n as u64);
        let mut threads = Vec::with_capacity(n);
        for t in 0..n {
            let bx = k.block[0] as usize;
            let by = k.block[1] as usize;
            let xyz = [
                (t % bx) as u32,
                ((t / bx) % by) as u32,
                (t / (bx * by)) as u32,
            ];
            let mut vals = vec![Val::I32(0); k.values.len()];
            for (v, x) in &cfg.scalars {
                if v.index() < vals.len() {
                    vals[v.index()] = *x;
                }
            }
            threads.push(Thread {
                lin: t as u32,
                xyz,
                pend: vec![None; vals.len()],
                vals,
                views: vec![None; k.views.len()],
                frames: vec![Frame {
                    region: k.body,
                    pc: 0,
                    kind: FrameKind::Plain,
                }],
                ..Thread::default()
            });
        }
        let mut race = RaceState::new(n, nmbar, granules);
        race.blind = crate::ir::layout::inexact_aliases(k)
            .into_iter()
            .flat_map(|(b, c)| {
                let (b, c) = (b.index() as u32, c.index() as u32);
                [(b, c), (c, b)]
            })
            .collect();
        let nwarps = n.div_ceil(warp);
        let zero = race.zero();
        let mut iters = HashMap::new();
        iters.insert(Vec::new(), 0);
        BlockExec {
            k,
            cfg,
            globals,
            bid,
            steps,
            nthreads: n,
            warp,
            threads,
            ready: (0..n).rev().collect(),
            cur: 0,
            running: false,
            cur_woken: false,
            deferred: None,
            rng: Rng(cfg.sched_seed
                ^ ((bid[0] as u64) << 20)
                ^ ((bid[1] as u64) << 40)
                ^ ((bid[2] as u64) << 50)),
            smem,
            written,
            place,
            gran,
            mbar_base,
            bar: BarState {
                vc: zero.clone(),
                ..BarState::default()
            },
            warps: (0..nwarps)
                .map(|_| BarState {
                    vc: zero.clone(),
                    ..BarState::default()
                })
                .collect(),
            race,
            copies: HashMap::new(),
            unperformed: Vec::new(),
            copy_ops: HashMap::new(),
            split: HashMap::new(),
            named: HashMap::new(),
            mbar: vec![MbarState::default(); nmbar],
            layouts,
            concrete: concrete_elements(k, warp as u32),
            iters,
            iter_list: vec![Vec::new()],
            tiles: HashMap::new(),
            meets: HashMap::new(),
            parents: k.parents(),
        }
    }

    fn amd(&self) -> bool {
        self.cfg.target.is_some_and(|t| t.is_amd())
    }

    fn exec_err(&self, op: Op, code: &'static str, msg: String) -> Stop {
        let t = self.cur;
        let xyz = xyz_of(self.k, t as u32);
        Stop::Exec(
            Diagnostic::error(DiagKind::Finding, code, msg)
                .with_label(self.k.span(op), format!("in thread {t} {}", fmt_xyz(xyz)))
                .with_note(format!("block {}", fmt_xyz(self.bid))),
        )
    }

    // ---------------------------------------------------------------- scheduling

    fn run(&mut self) -> Result<(), Stop> {
        loop {
            if self.cfg.policy == EnginePolicy::Random
                && !self.unperformed.is_empty()
                && self.rng.below(2) == 0
            {
                let i = self.rng.below(self.unperformed.len());
                let c = self.unperformed[i];
                self.perform(c)?;
            }
            if self.ready.is_empty() {
                // Nothing can run: the engine delivers a TMA copy, if any is pending.
                let tma: Vec<u32> = self
                    .unperformed
                    .iter()
                    .copied()
                    .filter(|c| self.copies.get(c).is_some_and(|p| p.mbar.is_some()))
                    .collect();
                if !tma.is_empty() {
                    let c = tma[self.rng.below(tma.len())];
                    self.perform(c)?;
                    continue;
                }
                if self.threads.iter().all(|t| t.status == Status::Exited) {
                    return self.finish();
                }
                return Err(self.deadlock());
            }
            let i = self.rng.below(self.ready.len());
            let t = self.ready.swap_remove(i);
            self.run_thread(t)?;
        }
    }

    fn run_thread(&mut self, t: usize) -> Result<(), Stop> {
        let mut th = std::mem::take(&mut self.threads[t]);
        self.cur = t;
        self.running = true;
        th.status = Status::Ready;
        let mut res = Ok(());
        let mut n = 0;
        loop {
            if n >= QUANTUM {
                self.ready.push(t);
                break;
            }
            n += 1;
            *self.steps += 1;
            if *self.steps > self.cfg.max_steps {
                res = Err(Stop::Exec(step_limit(self.k, self.cfg.max_steps)));
                break;
            }
            self.cur_woken = false;
            match self.step(&mut th) {
                Ok(true) => {}
                Ok(false) => {
                    if th.status == Status::Exited {
                        res = self.on_exit(&th);
                        break;
                    }
                    if self.cur_woken {
                        th.status = Status::Ready;
                        continue;
                    }
                    break;
                }
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        self.threads[t] = th;
        self.running = false;
        res
    }

    fn wake(&mut self, w: usize, vc: &[u32]) {
        self.race.acquire(w, vc);
        self.wake_acquired(w);
    }

    fn wake_acquired(&mut self, w: usize) {
        if self.running && w == self.cur {
            self.cur_woken = true;
        } else {
            self.threads[w].status = Status::Ready;
            self.ready.push(w);
        }
    }

    fn on_exit(&mut self, th: &Thread) -> Result<(), Stop> {
        if let Some(id) = th.split.keys().next() {
            let op = self.split.get(id).and_then(|s| s.signal_op);
            let d = Diagnostic::error(
                DiagKind::Finding,
                "C0008",
                format!("split barrier {id} signalled but never waited for (orphan signal)"),
            )
            .with_label(
                op.map_or(Span::UNDEF, |o| self.k.span(o)),
                format!("thread {} exits after this signal", th.lin),
            );
            return Err(Stop::Deadlock(d));
        }
        let mut outstanding = Vec::new();
        for l in &th.cnt {
            outstanding.extend(l.iter().flatten().copied());
        }
        for (open, done) in &th.groups {
            outstanding.extend(open.iter().copied());
            for g in done {
                outstanding.extend(g.iter().copied());
            }
        }
        if let Some(c) = outstanding.into_iter().find(|c| !self.race.is_complete(*c)) {
            let op = self.copy_ops.get(&c).map(|x| x.0);
            let e = self.outstanding(c, op, th.lin);
            self.defer(e);
        }
        Ok(())
    }

    fn outstanding(&self, _c: u32, op: Option<Op>, t: u32) -> Stop {
        Stop::Deadlock(
            Diagnostic::error(
                DiagKind::Finding,
                "C0007",
                "an async copy is still outstanding when its thread exits",
            )
            .with_label(
                op.map_or(Span::UNDEF, |o| self.k.span(o)),
                format!("issued by thread {t}, never waited for"),
            )
            .with_note("its write may land after the kernel ends; wait for it before the end")
            .with_note(format!("block {}", fmt_xyz(self.bid))),
        )
    }

    fn defer(&mut self, e: Stop) {
        if self.deferred.is_none() {
            self.deferred = Some(e);
        }
    }

    fn finish(&mut self) -> Result<(), Stop> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        // Copies never completed (e.g. a TMA whose phase never completed).
        let mut left: Vec<(u32, Op, usize)> = self
            .copy_ops
            .iter()
            .filter(|(c, _)| !self.race.is_complete(**c))
            .map(|(c, (o, t))| (*c, *o, *t))
            .collect();
        left.sort_by_key(|x| x.0);
        if let Some((c, op, t)) = left.first() {
            return Err(self.outstanding(*c, Some(*op), *t as u32));
        }
        Ok(())
    }

    fn deadlock(&self) -> Stop {
        let k = self.k;
        let n = self.nthreads;
        let first = self.threads.iter().find_map(|t| match t.status {
            Status::Blocked(b) => Some((t.lin as usize, b)),
            _ => None,
        });
        let Some((t, b)) = first else {
            return Stop::Deadlock(Diagnostic::error(DiagKind::Finding, "C0002", "deadlock"));
        };
        let other = |pred: &dyn Fn(&Thread) -> bool| self.threads.iter().find(|th| pred(th));
        let describe = |th: &Thread| -> (Span, String) {
            match th.status {
                Status::Exited => (
                    k.kernel_span,
                    format!(
                        "thread {} {} exits without reaching it",
                        th.lin,
                        fmt_xyz(th.xyz)
                    ),
                ),
                Status::Blocked(b2) => {
                    let op = blocked_op(b2);
                    (
                        k.span(op),
                        format!("thread {} {} waits here instead", th.lin, fmt_xyz(th.xyz)),
                    )
                }
                Status::Ready => (Span::UNDEF, String::new()),
            }
        };
        let xyz = self.threads[t].xyz;
        let mut d = {
            match b {
                Blocked::Barrier(op) => {
                    let arrived = self.bar.arrived.len();
                    let mut d = Diagnostic::error(
                        DiagKind::Finding,
                        "C0002",
                        format!("deadlock: barrier reached by {arrived} of {n} threads"),
                    )
                    .with_label(
                        k.span(op),
                        format!("thread {t} {} waits here", fmt_xyz(xyz)),
                    );
                    if let Some(o) = other(&|th| th.status != Status::Blocked(Blocked::Barrier(op)))
                    {
                        let (s, m) = describe(o);
                        d = d.with_label(s, m);
                    }
                    d.with_help("a barrier must be reached by every thread of the block: move it out of thread-dependent control")
                }
                Blocked::Warp(op) => {
                    let w = t / self.warp;
                    let mut d = Diagnostic::error(
                        DiagKind::Finding,
                        "C0002",
                        format!("deadlock: {} not reached by every thread of warp {w}", if matches!(k.ops[op].kind, OpKind::Wgmma { .. }) { "wgmma" } else { "warp_sync" }),
                    )
                    .with_label(k.span(op), format!("thread {t} waits here"));
                    if let Some(o) = self
                        .threads
                        .iter()
                        .filter(|th| th.lin as usize / self.warp == w)
                        .find(|th| th.status != Status::Blocked(Blocked::Warp(op)))
                    {
                        let (s, m) = describe(o);
                        d = d.with_label(s, m);
                    }
                    d
                }
                Blocked::Split(id, p, op) => {
                    let st = self.split.get(&id);
                    let sig = st.map_or(0, |s| s.signalled);
                    let mut d = Diagnostic::error(DiagKind::Finding, "C0002", format!("deadlock: split barrier {id} wait never completes ({sig} of {n} threads signalled phase {p})"))
                        .with_label(k.span(op), format!("thread {t} waits here"));
                    if let Some(o) = other(&|th| {
                        !th.split.contains_key(&id)
                            && !matches!(th.status, Status::Blocked(Blocked::Split(..)))
                    }) {
                        let (s, m) = describe(o);
                        d = d.with_label(s, m);
                    }
                    d
                }
                Blocked::Named(id, op) => {
                    let st = self.named.get(&id);
                    let (a, c) = st.map_or((0, 0), |s| (s.arrived, s.count));
                    Diagnostic::error(DiagKind::Finding, "C0002", format!("deadlock: named barrier {id} phase has {a} of {c} arrivals and never completes"))
                        .with_label(k.span(op), format!("thread {t} waits here"))
                }
                Blocked::Mbar(slot, p, op) => {
                    let m = &self.mbar[slot];
                    Diagnostic::error(DiagKind::Finding, "C0002", format!("deadlock: mbarrier wait on parity {p} can never complete ({} arrivals and {} transaction bytes pending, {} phases completed)", m.pending, m.tx, m.phases))
                        .with_label(k.span(op), format!("thread {t} waits here"))
                }
            }
        };
        d = d.with_note(format!("block {}", fmt_xyz(self.bid)));
        Stop::Deadlock(d)
    }

    // ---------------------------------------------------------------- values

    fn val(&self, th: &Thread, o: &Operand) -> Val {
        match o {
            Operand::Value(v) => th.vals[v.index()],
            Operand::Imm(s) => Val::from_scalar(*s),
        }
    }

    /// The wgmma execution whose result operand `o` still holds in flight, if any.
    fn pend_of(&self, th: &Thread, o: &Operand) -> Option<u32> {
        let c = th.pend[o.value()?.index()]?;
        (!self.race.is_complete(c)).then_some(c)
    }

    /// Marks result `i` of `op` (a move's destination) with the pending mark `p`.
    fn set_pend(&self, th: &mut Thread, op: Op, i: usize, p: Option<u32>) {
        if let Some(r) = self.k.ops[op].results.get(i) {
            th.pend[r.index()] = p;
        }
    }

    /// C0015: `op` consumes a value that holds a wgmma result no wait has completed.
    fn check_register_reads(&self, th: &Thread, op: Op) -> Result<(), Stop> {
        for v in crate::analysis::regdeps::consumed(self.k, op) {
            if let Some(c) = self.pend_of(th, &Operand::Value(v)) {
                let w = self.copy_ops.get(&c).map(|x| x.0).unwrap_or(op);
                let t = self.cur;
                let d = Diagnostic::error(
                    DiagKind::Finding,
                    "C0015",
                    "reads the result of a `wgmma` before a `wgmma_wait` completes it",
                )
                .with_label(
                    self.k.span(op),
                    format!("read in thread {t} {}", fmt_xyz(xyz_of(self.k, t as u32))),
                )
                .with_label(self.k.span(w), "the wgmma still writing it")
                .with_note(format!("block {}", fmt_xyz(self.bid)))
                .with_help("wgmma_commit, then wgmma_wait N before the first use of the accumulator (`smemsync sync` places the weakest)");
                return Err(Stop::Exec(d));
            }
        }
        Ok(())
    }

    fn int(&self, th: &Thread, o: &Operand) -> i64 {
        self.val(th, o).as_i64()
    }

    fn set(&self, th: &mut Thread, op: Op, i: usize, v: Val) {
        if let Some(r) = self.k.ops[op].results.get(i) {
            th.pend[r.index()] = None;
            let ty = self.k.values[*r].ty;
            th.vals[r.index()] = if ty == ScalarType::Token {
                v
            } else {
                v.to_ty(ty)
            };
        }
    }

    fn update_iter(&mut self, th: &mut Thread) {
        let mut v = Vec::new();
        for f in &th.frames {
            match f.kind {
                FrameKind::For { iv, .. } => v.push(iv),
                FrameKind::WhileCond(_, n) | FrameKind::WhileBody(_, n) => v.push(n),
                _ => {}
            }
        }
        let next = self.iter_list.len() as u32;
        let id = *self.iters.entry(v.clone()).or_insert(next);
        if id == next {
            self.iter_list.push(v);
        }
        th.iter = id;
    }

    // ---------------------------------------------------------------- memory

    fn memref(&self, th: &Thread, m: MemRef, op: Op) -> Result<ViewInst, Stop> {
        match m {
            MemRef::Buffer(b) => {
                let shape = self.k.buffers[b].shape.clone();
                Ok(ViewInst {
                    buf: b,
                    off: 0,
                    strides: strides(&shape),
                    shape,
                })
            }
            MemRef::View(v) => th.views[v.index()].clone().ok_or_else(|| {
                self.exec_err(
                    op,
                    "C0004",
                    format!(
                        "view {} used before it is defined",
                        self.k.view_names.get(v)
                    ),
                )
            }),
        }
    }

    fn element(
        &self,
        th: &Thread,
        m: MemRef,
        index: &[Operand],
        op: Op,
    ) -> Result<(Buffer, u64), Stop> {
        // Borrow the view (no allocation on this hot path); a whole buffer is row-major.
        let (buf, base, shape, strides): (Buffer, u64, &[u64], Option<&[u64]>) = match m {
            MemRef::Buffer(b) => (b, 0, &self.k.buffers[b].shape, None),
            MemRef::View(v) => match th.views[v.index()].as_ref() {
                Some(vi) => (vi.buf, vi.off, &vi.shape, Some(&vi.strides)),
                None => return self.memref(th, m, op).map(|_| (Buffer::new(0), 0)),
            },
        };
        let mut off = 0u64;
        for (d, o) in index.iter().enumerate() {
            let i = self.int(th, o);
            let n = shape.get(d).copied().unwrap_or(0);
            if i < 0 || i as u64 >= n {
                let name = &self.k.buffers[buf].name;
                return Err(self.exec_err(
                    op,
                    "C0004",
                    format!("index {i} out of range 0..{n} in dimension {d} of a view of @{name}"),
                ));
            }
            match strides {
                Some(st) => off += i as u64 * st[d],
                None => off = off * n + i as u64,
            }
        }
        if strides.is_none() {
            // Trailing dimensions not indexed (a rank mismatch the verifier rejects).
            for n in shape.iter().skip(index.len()) {
                off *= n;
            }
        }
        Ok((buf, base + off))
    }

    fn global_index(
        &self,
        th: &Thread,
        g: Global,
        index: &[Operand],
        op: Op,
    ) -> Result<usize, Stop> {
        let gm = &self.globals[g.index()];
        let mut off = 0u64;
        for (d, o) in index.iter().enumerate() {
            let i = self.int(th, o);
            let n = gm.shape.get(d).copied().unwrap_or(0);
            if i < 0 || i as u64 >= n {
                return Err(self.exec_err(
                    op,
                    "C0004",
                    format!(
                        "index {i} out of range 0..{n} in dimension {d} of %{}",
                        gm.name
                    ),
                ));
            }
            off = off * n + i as u64;
        }
        Ok(off as usize)
    }

    /// Global elements of a tile copy with view shape `shape` at `origin`.
    /// The view elements thread `t` touches in collective op `op` over `total` elements: its
    /// concrete layout's, or docs/ir.md's mapping `owner(e) = (e + n) mod T` when opaque.
    fn my_elements(&self, op: Op, t: usize, total: u64) -> Rc<Vec<u64>> {
        if let Some(per) = self.concrete.get(&op) {
            return Rc::new(per.get(t).cloned().unwrap_or_default());
        }
        let n = self.layouts.get(&op).copied().unwrap_or(0);
        let tt = self.nthreads as u64;
        let e0 = ((t as u64 + tt) - (n % tt)) % tt;
        Rc::new((e0..total).step_by(tt as usize).collect())
    }

    /// The global element a tile copy reads for view element `e` (row-major in `shape`):
    /// `origin` plus the element's coordinates in the trailing dimensions. Out of range is
    /// an error, or `None` (reads as zero) when the copy is `masked`.
    fn tile_element(
        &self,
        g: Global,
        origin: &[i64],
        shape: &[u64],
        e: u64,
        masked: bool,
        op: Op,
    ) -> Result<Option<u64>, Stop> {
        let gm = &self.globals[g.index()];
        let r = gm.shape.len();
        let k1 = shape.len();
        let mut coord = vec![0u64; k1];
        let mut rest = e;
        for d in (0..k1).rev() {
            coord[d] = rest % shape[d].max(1);
            rest /= shape[d].max(1);
        }
        let mut off = 0u64;
        for d in 0..r {
            let mut i = origin.get(d).copied().unwrap_or(0);
            if d + k1 >= r {
                i += coord[d + k1 - r] as i64;
            }
            if i < 0 || i as u64 >= gm.shape[d] {
                if masked {
                    return Ok(None);
                }
                return Err(self.exec_err(
                    op,
                    "C0004",
                    format!(
                        "tile element {i} out of range 0..{} in dimension {d} of %{} (only a `masked` tile copy reads zero out of range)",
                        gm.shape[d], gm.name
                    ),
                ));
            }
            off = off * gm.shape[d] + i as u64;
        }
        Ok(Some(off))
    }

    fn tile(&self, g: Global, origin: &[i64], shape: &[u64], op: Op) -> Result<Vec<u64>, Stop> {
        let gm = &self.globals[g.index()];
        let r = gm.shape.len();
        let k1 = shape.len();
        if r < k1 || origin.len() != r {
            return Err(self.exec_err(
                op,
                "C0004",
                format!(
                    "tile of rank {k1} does not fit global %{} of rank {r}",
                    gm.name
                ),
            ));
        }
        let e: u64 = shape.iter().product();
        (0..e)
            .map(|i| {
                let off = self.tile_element(g, origin, shape, i, false, op)?;
                Ok(off.expect("an unmasked tile element is in range or an error"))
            })
            .collect()
    }

    fn record(
        &mut self,
        th: &Thread,
        op: Op,
        buf: Buffer,
        elem: u64,
        kind: AccKind,
        copy: u32,
    ) -> Result<(), Stop> {
        if !self.cfg.detect_races {
            return Ok(());
        }
        let (g0, per) = self.gran[buf.index()];
        let t = th.lin as usize;
        let acc = Acc {
            thread: th.lin,
            clock: self.race.epoch(t),
            op,
            iter: th.iter,
            kind,
            copy,
            fences: self.race.fences(t),
            buf: buf.index() as u32,
        };
        // wgmma operands and TMA copies go through the async proxy (cp.async does not).
        let async_proxy = matches!(
            self.k.ops[op].kind,
            OpKind::Wgmma { .. } | OpKind::TmaLoad { .. } | OpKind::TmaStore { .. }
        );
        match self
            .race
            .access_proxy(g0 + elem as usize * per, per, acc, async_proxy)
        {
            Ok(()) => Ok(()),
            Err(c) => Err(Stop::Race(Box::new(self.witness(c, buf, elem)))),
        }
    }

    fn site(&self, a: &Acc) -> AccessSite {
        let k = self.k;
        let t = a.thread;
        let parents = k.parents();
        let mut loops: Vec<String> = parents
            .ancestors(a.op)
            .into_iter()
            .filter_map(|p| match &k.ops[p].kind {
                OpKind::For { .. } => Some(format!(
                    "%{}",
                    k.value_name(k.regions[k.ops[p].regions[0]].args[0])
                )),
                OpKind::While { .. } => Some("while iteration".to_string()),
                _ => None,
            })
            .collect();
        loops.reverse();
        let vals = self
            .iter_list
            .get(a.iter as usize)
            .cloned()
            .unwrap_or_default();
        AccessSite {
            op: a.op,
            span: k.span(a.op),
            thread: a.thread,
            thread_xyz: xyz_of(k, t),
            by_engine: a.copy != NO_COPY,
            kind: a.kind,
            iteration: loops.into_iter().zip(vals).collect(),
        }
    }

    fn witness(&self, c: Conflict, buf: Buffer, elem: u64) -> Witness {
        let first = self.site(&c.earlier);
        let second = self.site(&c.later);
        let shape = &self.k.buffers[buf].shape;
        let mut index = vec![0u64; shape.len()];
        let mut e = elem;
        for d in (0..shape.len()).rev() {
            index[d] = e % shape[d].max(1);
            e /= shape[d].max(1);
        }
        Witness {
            first,
            second,
            buffer: self.k.buffers[buf].name.clone(),
            index,
            block_id: self.bid,
            missing_fence: c.missing_fence,
        }
    }

    /// The value of a shared element from the block's shared bytes, and whether every one of
    /// its bytes was written (bytes never written read as 0).
    fn load_smem(&self, buf: Buffer, elem: u64) -> (Val, bool) {
        let (base, n, ty) = self.place[buf.index()];
        let a = base + elem as usize * n;
        match (self.smem.get(a..a + n), self.written.get(a..a + n)) {
            (Some(b), Some(w)) => (decode_elem(ty, b), w.iter().all(|x| *x)),
            _ => (decode_elem(ty, &[0; 4]), false),
        }
    }

    /// Reads a shared element. An element with a byte never written is uninitialized: it
    /// reads with those bytes as 0 and the error is deferred (a later unordered write would
    /// make it a race, which takes precedence).
    fn read_smem(&mut self, buf: Buffer, elem: u64, op: Op) -> Result<Val, Stop> {
        let (v, init) = self.load_smem(buf, elem);
        if !init {
            let shape = &self.k.buffers[buf].shape;
            let idx = unlinear(elem, shape);
            let e = self.exec_err(
                op,
                "C0006",
                format!(
                    "read of uninitialized shared element @{}{:?}",
                    self.k.buffers[buf].name, idx
                ),
            );
            self.defer(e);
        }
        Ok(v)
    }

    /// Stores `v` to a shared element: its bytes in the element type's encoding.
    fn write_smem(&mut self, buf: Buffer, elem: u64, v: Val) {
        let (base, n, ty) = self.place[buf.index()];
        let a = base + elem as usize * n;
        if let Some(b) = self.smem.get_mut(a..a + n) {
            encode_elem(ty, v, b);
            self.written[a..a + n].fill(true);
        }
    }

    // ---------------------------------------------------------------- copies

    fn new_copy(&mut self, th: &Thread, op: Op, p: PendingCopy) -> u32 {
        let c = self.race.new_copy();
        self.copy_ops.insert(c, (op, th.lin as usize));
        self.copies.insert(c, p);
        self.unperformed.push(c);
        c
    }

    /// Performs a copy's memory effect (once).
    fn perform(&mut self, c: u32) -> Result<(), Stop> {
        let Some(p) = self.copies.remove(&c) else {
            return Ok(());
        };
        self.unperformed.retain(|x| *x != c);
        if !p.writes.1.get() {
            p.writes.1.set(true);
            for (b, e, v) in &p.writes.0 {
                self.write_smem(*b, *e, *v);
            }
        }
        if let Some((reads, g, gidx)) = &p.store {
            let mut vals = Vec::with_capacity(reads.len());
            for (b, e) in reads {
                match self.load_smem(*b, *e) {
                    (v, true) => vals.push(v),
                    (_, false) => {
                        let save = self.cur;
                        self.cur = p.issuer;
                        let err = self.exec_err(
                            p.op,
                            "C0006",
                            format!(
                                "TMA store reads uninitialized shared element of @{}",
                                self.k.buffers[*b].name
                            ),
                        );
                        self.cur = save;
                        return Err(err);
                    }
                }
            }
            let elem = self.globals[g.index()].elem;
            for (i, v) in gidx.iter().zip(vals) {
                self.globals[g.index()].data[*i as usize] = store_conv(elem, v);
            }
        }
        if let Some((slot, bytes)) = p.mbar {
            if !self.mbar[slot].init {
                let save = self.cur;
                self.cur = p.issuer;
                let err = self.exec_err(
                    p.op,
                    "C0011",
                    "TMA completes on an mbarrier that is not initialized".into(),
                );
                self.cur = save;
                return Err(err);
            }
            self.mbar[slot].tx -= bytes;
            self.mbar[slot].attached.push(c);
            self.mbar_check(slot);
        }
        Ok(())
    }

    /// Completes a copy at the waiting thread's current epoch.
    fn complete(&mut self, c: u32, t: usize) -> Result<(), Stop> {
        self.perform(c)?;
        let e = self.race.epoch(t);
        self.race.complete(c, t, e);
        Ok(())
    }

    fn wait_groups(&mut self, th: &mut Thread, g: usize, n: u32) -> Result<(), Stop> {
        // Positional, as in PTX: every committed group older than the N most recent must be
        // complete; an empty group still counts as one of the N.
        let t = th.lin as usize;
        let mut groups = std::mem::take(&mut th.groups[g].1);
        let older = groups.len().saturating_sub(n as usize);
        for grp in groups.drain(..older) {
            for c in grp {
                if !self.race.is_complete(c) {
                    self.complete(c, t)?;
                }
            }
        }
        th.groups[g].1 = groups;
        Ok(())
    }

    // ---------------------------------------------------------------- mbarriers

    fn mbar_slot(&self, th: &Thread, m: MemRef, index: &[Operand], op: Op) -> Result<usize, Stop> {
        let (b, e) = self.element(th, m, index, op)?;
        Ok(self.mbar_base[b.index()] + e as usize)
    }

    fn mbar_use(&self, th: &Thread, slot: usize, op: Op) -> Result<(), Stop> {
        let m = &self.mbar[slot];
        if !m.init {
            return Err(self.exec_err(
                op,
                "C0011",
                "mbarrier used before `mbar_init` (or after `mbar_inval`)".into(),
            ));
        }
        let (it, clock, iop) = m.init_by;
        let t = th.lin as usize;
        if self.cfg.detect_races && it != t && clock > self.race.get(t, it) {
            let iop = iop.unwrap_or(op);
            let a = Acc {
                thread: it as u32,
                clock,
                op: iop,
                iter: 0,
                kind: AccKind::Write,
                copy: NO_COPY,
                fences: 0,
                buf: crate::check::race::NO_BUFFER,
            };
            let b = Acc {
                thread: th.lin,
                clock: self.race.epoch(t),
                op,
                iter: th.iter,
                kind: AccKind::Read,
                copy: NO_COPY,
                fences: 0,
                buf: crate::check::race::NO_BUFFER,
            };
            let mut w = self.witness(
                Conflict {
                    earlier: a,
                    later: b,
                    missing_fence: false,
                },
                Buffer::new(0),
                0,
            );
            let (buf, idx) = self.mbar_name(slot);
            w.buffer = buf;
            w.index = idx;
            return Err(Stop::Race(Box::new(w)));
        }
        Ok(())
    }

    fn mbar_name(&self, slot: usize) -> (String, Vec<u64>) {
        for (b, bd) in self.k.buffers.iter() {
            if bd.elem == ElemType::MBarrier {
                let base = self.mbar_base[b.index()];
                if slot >= base && slot < base + bd.elements() as usize {
                    return (bd.name.clone(), unlinear((slot - base) as u64, &bd.shape));
                }
            }
        }
        (String::new(), Vec::new())
    }

    fn mbar_check(&mut self, slot: usize) {
        let n = self.nthreads;
        let m = &mut self.mbar[slot];
        if m.pending > 0 || m.tx != 0 {
            return;
        }
        m.phases += 1;
        m.vc[n + slot] = m.phases;
        m.last_vc = std::mem::replace(&mut m.vc, vec![0; self.race.slots]);
        m.pending = m.count;
        let attached = std::mem::take(&mut m.attached);
        let waiters = std::mem::take(&mut m.waiters);
        let phases = m.phases;
        let vc = m.last_vc.clone();
        for c in attached {
            self.race.complete(c, n + slot, phases);
        }
        for w in waiters {
            self.wake(w, &vc);
        }
    }

    // ---------------------------------------------------------------- barriers

    fn fence(&mut self, th: &mut Thread) {
        if th.lds_unfenced {
            let t = th.lin as usize;
            th.fence_clock = self.race.epoch(t);
            self.race.tick(t);
            th.lds_unfenced = false;
        }
    }

    fn arrive_barrier(&mut self, th: &mut Thread, op: Op, warp: bool) -> Result<bool, Stop> {
        let t = th.lin as usize;
        let (bs, need) = if warp {
            let w = t / self.warp;
            let need = (self.nthreads - w * self.warp).min(self.warp);
            (&mut self.warps[w], need)
        } else {
            (&mut self.bar, self.nthreads)
        };
        if let Some(prev) = bs.op
            && prev != op
        {
            {
                let other = bs.arrived.first().copied().unwrap_or(0);
                let what = if warp { "warp_sync" } else { "barrier" };
                let d = Diagnostic::error(DiagKind::Finding, "C0003", format!("divergent {what}: threads meet different {what} ops"))
                    .with_label(self.k.span(op), format!("thread {t} arrives here"))
                    .with_label(self.k.span(prev), format!("while thread {other} waits here"))
                    .with_help("every thread must execute the same sequence of barriers; move the barrier out of thread-dependent control")
                    .with_note(format!("block {}", fmt_xyz(self.bid)));
                return Err(Stop::Deadlock(d));
            }
        }
        if bs.arrived.is_empty() && !warp {
            bs.vc = self.race.base();
        }
        bs.op = Some(op);
        bs.arrived.push(t);
        let mut vc = std::mem::take(&mut bs.vc);
        if warp {
            self.race.release(t, &mut vc, None);
        } else {
            self.race.release_barrier(t, &mut vc);
        }
        let bs = if warp {
            &mut self.warps[t / self.warp]
        } else {
            &mut self.bar
        };
        bs.vc = vc;
        th.status = Status::Blocked(if warp {
            Blocked::Warp(op)
        } else {
            Blocked::Barrier(op)
        });
        if bs.arrived.len() == need {
            let arrived = std::mem::take(&mut bs.arrived);
            let vc = std::mem::replace(&mut bs.vc, vec![0; self.race.slots]);
            bs.op = None;
            if warp {
                for w in arrived {
                    self.wake(w, &vc);
                }
            } else {
                self.race.barrier_done(&vc, &arrived);
                for w in arrived {
                    self.wake_acquired(w);
                }
            }
        }
        Ok(false)
    }

    // ---------------------------------------------------------------- ops

    /// Executes one op (or region end) of `th`. Ok(true): continue; Ok(false): the thread
    /// blocked or exited (see its status).
    fn step(&mut self, th: &mut Thread) -> Result<bool, Stop> {
        let k = self.k;
        let Some(fr) = th.frames.last_mut() else {
            th.status = Status::Exited;
            return Ok(false);
        };
        let ops = &k.regions[fr.region].ops;
        if fr.pc >= ops.len() {
            return self.end_region(th, Vec::new());
        }
        let op = ops[fr.pc];
        fr.pc += 1;
        let t = th.lin as usize;
        let od = &k.ops[op];
        self.check_register_reads(th, op)?;
        self.check_held_registers(th, op)?;
        match &od.kind {
            OpKind::Const(s) => self.set(th, op, 0, Val::from_scalar(*s)),
            OpKind::Special(s) => {
                let v = match s {
                    Special::Tid(d) => th.xyz[*d as usize] as i64,
                    Special::Bid(d) => self.bid[*d as usize] as i64,
                    Special::BlockDim(d) => k.block[*d as usize] as i64,
                    Special::GridDim(d) => k.grid[*d as usize] as i64,
                    Special::Lane => (t % self.warp) as i64,
                    Special::Warp => (t / self.warp) as i64,
                    Special::LinearTid => t as i64,
                };
                self.set(th, op, 0, Val::I32(v as i32));
            }
            OpKind::Binary(b, x, y) => {
                let ty = od
                    .results
                    .first()
                    .map_or(ScalarType::I32, |r| k.values[*r].ty);
                let (x, y) = (self.val(th, x), self.val(th, y));
                let v = match binary(*b, ty, x, y) {
                    Some(v) => v,
                    None => {
                        return Err(self.exec_err(op, "C0005", "integer division by zero".into()));
                    }
                };
                self.set(th, op, 0, v);
            }
            OpKind::Unary(u, x) => {
                let ty = od
                    .results
                    .first()
                    .map_or(ScalarType::I32, |r| k.values[*r].ty);
                let x = self.val(th, x);
                self.set(th, op, 0, unary(*u, ty, x));
            }
            OpKind::Cmp(p, x, y) => {
                let (x, y) = (self.val(th, x), self.val(th, y));
                let r = match (x, y) {
                    (Val::F32(_), _) | (_, Val::F32(_)) => {
                        let (a, b) = (x.as_f32(), y.as_f32());
                        let ord = !a.is_nan() && !b.is_nan();
                        ord && match p {
                            CmpPred::Eq => a == b,
                            CmpPred::Ne => a != b,
                            CmpPred::Lt => a < b,
                            CmpPred::Le => a <= b,
                            CmpPred::Gt => a > b,
                            CmpPred::Ge => a >= b,
                        }
                    }
                    _ => {
                        let (a, b) = (x.as_i64(), y.as_i64());
                        match p {
                            CmpPred::Eq => a == b,
                            CmpPred::Ne => a != b,
                            CmpPred::Lt => a < b,
                            CmpPred::Le => a <= b,
                            CmpPred::Gt => a > b,
                            CmpPred::Ge => a >= b,
                        }
                    }
                };
                self.set(th, op, 0, Val::I1(r));
            }
            OpKind::Select(c, a, b) => {
                let v = if self.val(th, c).truthy() {
                    self.val(th, a)
                } else {
                    self.val(th, b)
                };
                self.set(th, op, 0, v);
            }
            OpKind::Cast(c, a) => {
                let x = self.val(th, a);
                let v = match c {
                    CastOp::IToF => Val::F32(x.as_i64() as i32 as f32),
                    CastOp::FToI => Val::I32(x.as_f32() as i32),
                };
                self.set(th, op, 0, v);
            }
            OpKind::InGroup(g) => {
                let gd = &k.groups[*g];
                self.set(
                    th,
                    op,
                    0,
                    Val::I1((gd.lo as usize..gd.hi as usize).contains(&t)),
                );
            }
            OpKind::Compute { args, .. } => {
                let args: Vec<Val> = args.iter().map(|a| self.val(th, a)).collect();
                for (j, r) in od.results.iter().enumerate() {
                    let ty = k.values[*r].ty;
                    let v = compute(ty, &args, j);
                    th.vals[r.index()] = v;
                }
            }
            OpKind::ViewDef(v) => {
                let vd = &k.views[*v];
                let base = self.memref(th, vd.base, op)?;
                let mut off = base.off;
                let mut shape = Vec::new();
                let mut st = Vec::new();
                for (d, ix) in vd.indices.iter().enumerate() {
                    let n = base.shape.get(d).copied().unwrap_or(0);
                    match ix {
                        ViewIndex::At(o) => {
                            let i = self.int(th, o);
                            if i < 0 || i as u64 >= n {
                                return Err(self.exec_err(
                                    op,
                                    "C0004",
                                    format!("view index {i} out of range 0..{n} in dimension {d}"),
                                ));
                            }
                            off += i as u64 * base.strides[d];
                        }
                        ViewIndex::Range(lo, hi) => {
                            if lo > hi || *hi > n {
                                return Err(self.exec_err(
                                    op,
                                    "C0004",
                                    format!(
                                        "view range {lo}:{hi} out of range 0..{n} in dimension {d}"
                                    ),
                                ));
                            }
                            off += lo * base.strides[d];
                            shape.push(hi - lo);
                            st.push(base.strides[d]);
                        }
                    }
                }
                let used = vd.indices.len().min(base.shape.len());
                shape.extend_from_slice(&base.shape[used..]);
                st.extend_from_slice(&base.strides[used..]);
                th.views[v.index()] = Some(ViewInst {
                    buf: base.buf,
                    off,
                    shape,
                    strides: st,
                });
            }
            OpKind::Load { mem, index } => {
                let (b, e) = self.element(th, *mem, index, op)?;
                self.record(th, op, b, e, AccKind::Read, NO_COPY)?;
                th.lds_unfenced = true;
                let v = self.read_smem(b, e, op)?;
                self.set(th, op, 0, v);
            }
            OpKind::Store { mem, index, value } => {
                let (b, e) = self.element(th, *mem, index, op)?;
                self.record(th, op, b, e, AccKind::Write, NO_COPY)?;
                th.lds_unfenced = true;
                let v = self.val(th, value);
                self.write_smem(b, e, v);
            }
            OpKind::Atomic {
                op: a,
                mem,
                index,
                value,
            } => {
                let (b, e) = self.element(th, *mem, index, op)?;
                self.record(th, op, b, e, AccKind::Atomic(*a), NO_COPY)?;
                th.lds_unfenced = true;
                let old = self.read_smem(b, e, op)?;
                let x = self.val(th, value);
                self.write_smem(b, e, atomic(*a, old, x));
                self.set(th, op, 0, old);
            }
            OpKind::LocalLoad { mem, .. } | OpKind::LocalStore { mem, .. } => {
                let vi = self.memref(th, *mem, op)?;
                let mine = self.my_elements(op, t, vi.elements());
                th.lds_unfenced = true;
                if let OpKind::LocalStore { value, .. } = &od.kind {
                    let x = self.val(th, value);
                    for &e in mine.iter() {
                        let el = vi.element(e);
                        self.record(th, op, vi.buf, el, AccKind::Write, NO_COPY)?;
                        let v = match x {
                            Val::F32(f) => Val::F32(f + e as f32),
                            other => Val::I32((other.as_i64() as i32).wrapping_add(e as i32)),
                        };
                        self.write_smem(vi.buf, el, v);
                    }
                } else {
                    let ty = od
                        .results
                        .first()
                        .map_or(ScalarType::F32, |r| k.values[*r].ty);
                    let mut acc = Val::I32(0).to_ty(ty);
                    for &e in mine.iter() {
                        let el = vi.element(e);
                        self.record(th, op, vi.buf, el, AccKind::Read, NO_COPY)?;
                        let v = self.read_smem(vi.buf, el, op)?;
                        acc = binary(BinOp::Add, ty, acc, v.to_ty(ty)).unwrap_or(acc);
                    }
                    self.set(th, op, 0, acc);
                }
            }
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => {
                let vi = self.memref(th, c.dst, op)?;
                let mine = self.my_elements(op, t, vi.elements());
                let org: Vec<i64> = c.origin.iter().map(|o| self.int(th, o)).collect();
                let mut writes = Vec::with_capacity(mine.len());
                for &e in mine.iter() {
                    let v = match self.tile_element(c.src, &org, &vi.shape, e, c.masked, op)? {
                        Some(gi) => self.globals[c.src.index()].data[gi as usize],
                        None => Val::I32(0),
                    };
                    writes.push((vi.buf, vi.element(e), v));
                }
                let p = PendingCopy {
                    issuer: t,
                    op,
                    writes: Rc::new((writes, Cell::new(false))),
                    store: None,
                    mbar: None,
                };
                let els: Vec<u64> = p.writes.0.iter().map(|w| w.1).collect();
                let cp = self.new_copy(th, op, p);
                for el in els {
                    self.record(th, op, vi.buf, el, AccKind::AsyncWrite, cp)?;
                }
                if matches!(od.kind, OpKind::CpAsyncTile(_)) {
                    th.groups[0].0.push(cp);
                } else {
                    let ctr = self
                        .cfg
                        .target
                        .and_then(|tg| tg.async_counter(AsyncClass::GatherToLds))
                        .unwrap_or(Counter::VmCnt);
                    th.cnt[counter_index(ctr)].push(Some(cp));
                }
                self.set(th, op, 0, Val::Token(cp));
            }
            OpKind::GLoad { global, index } => {
                let i = self.global_index(th, *global, index, op)?;
                let v = self.globals[global.index()].data[i];
                self.set(th, op, 0, v);
                let c = match self.cfg.target {
                    Some(tg) => tg.global_load_counter(),
                    None => Some(Counter::VmCnt),
                };
                if let Some(c) = c {
                    th.cnt[counter_index(c)].push(None);
                }
            }
            OpKind::GStore {
                global,
                index,
                value,
            } => {
                let i = self.global_index(th, *global, index, op)?;
                let v = self.val(th, value);
                let e = self.globals[global.index()].elem;
                self.globals[global.index()].data[i] = store_conv(e, v);
            }
            OpKind::GAtomic {
                op: a,
                global,
                index,
                value,
            } => {
                let i = self.global_index(th, *global, index, op)?;
                let x = self.val(th, value);
                let g = &mut self.globals[global.index()];
                let old = g.data[i];
                g.data[i] = store_conv(g.elem, atomic(*a, old, x));
                self.set(th, op, 0, old);
            }
            OpKind::GatherToLds {
                dst,
                dst_index,
                src,
                src_index,
            }
            | OpKind::CpAsync {
                dst,
                dst_index,
                src,
                src_index,
            } => {
                let (b, e) = self.element(th, *dst, dst_index, op)?;
                let gi = self.global_index(th, *src, src_index, op)?;
                let v = self.globals[src.index()].data[gi];
                let p = PendingCopy {
                    issuer: t,
                    op,
                    writes: Rc::new((vec![(b, e, v)], Cell::new(false))),
                    store: None,
                    mbar: None,
                };
                let c = self.new_copy(th, op, p);
                self.record(th, op, b, e, AccKind::AsyncWrite, c)?;
                if matches!(od.kind, OpKind::CpAsync { .. }) {
                    th.groups[0].0.push(c);
                } else {
                    let ctr = self
                        .cfg
                        .target
                        .and_then(|tg| tg.async_counter(AsyncClass::GatherToLds))
                        .unwrap_or(Counter::VmCnt);
                    th.cnt[counter_index(ctr)].push(Some(c));
                }
                self.set(th, op, 0, Val::Token(c));
            }
            OpKind::TdmLoad { dst, src, origin }
            | OpKind::TmaLoad {
                dst, src, origin, ..
            } => {
                let vi = self.memref(th, *dst, op)?;
                let org: Vec<i64> = origin.iter().map(|o| self.int(th, o)).collect();
                // Threads issuing this op in the same iteration copy the same tile: one
                // record and one data set stand for all of them.
                let key = (op, th.iter, vi.buf, vi.off, org.clone());
                let shared = self.tiles.get(&key).cloned();
                let fresh = shared.is_none();
                let writes = match shared {
                    Some(w) => w,
                    None => {
                        let gidx = self.tile(*src, &org, &vi.shape, op)?;
                        let mut writes = Vec::with_capacity(gidx.len());
                        for (e, gi) in gidx.iter().enumerate() {
                            writes.push((
                                vi.buf,
                                vi.element(e as u64),
                                self.globals[src.index()].data[*gi as usize],
                            ));
                        }
                        let w = Rc::new((writes, Cell::new(false)));
                        self.tiles.insert(key, w.clone());
                        w
                    }
                };
                let mbar = if let OpKind::TmaLoad {
                    mbar, mbar_index, ..
                } = &od.kind
                {
                    let slot = self.mbar_slot(th, *mbar, mbar_index, op)?;
                    let bytes = vi.elements() * k.buffers[vi.buf].elem.bytes();
                    Some((slot, bytes as i64))
                } else {
                    None
                };
                let p = PendingCopy {
                    issuer: t,
                    op,
                    writes: writes.clone(),
                    store: None,
                    mbar,
                };
                let c = self.new_copy(th, op, p);
                if fresh {
                    for w in &writes.0 {
                        self.record(th, op, vi.buf, w.1, AccKind::AsyncWrite, c)?;
                    }
                }
                if mbar.is_none() {
                    th.cnt[counter_index(Counter::TensorCnt)].push(Some(c));
                }
                self.set(th, op, 0, Val::Token(c));
            }
            OpKind::TmaStore { dst, origin, src } => {
                let vi = self.memref(th, *src, op)?;
                let org: Vec<i64> = origin.iter().map(|o| self.int(th, o)).collect();
                let gidx = self.tile(*dst, &org, &vi.shape, op)?;
                let reads: Vec<(Buffer, u64)> = (0..vi.elements())
                    .map(|e| (vi.buf, vi.element(e)))
                    .collect();
                let p = PendingCopy {
                    issuer: t,
                    op,
                    writes: Rc::new((Vec::new(), Cell::new(true))),
                    store: Some((reads.clone(), *dst, gidx)),
                    mbar: None,
                };
                let c = self.new_copy(th, op, p);
                for (b, el) in reads {
                    self.record(th, op, b, el, AccKind::AsyncRead, c)?;
                }
                th.groups[1].0.push(c);
            }
            OpKind::Wgmma { a, b, acc } => return self.exec_wgmma(th, op, (a, *b, acc)),
            OpKind::CpAsyncCommit | OpKind::BulkCommit | OpKind::WgmmaCommit => {
                let g = match od.kind {
                    OpKind::CpAsyncCommit => 0,
                    OpKind::BulkCommit => 1,
                    _ => 2,
                };
                let open = std::mem::take(&mut th.groups[g].0);
                th.groups[g].1.push(open);
            }
            OpKind::CpAsyncWait(n) => self.wait_groups(th, 0, *n)?,
            OpKind::BulkWait(n) => self.wait_groups(th, 1, *n)?,
            OpKind::WgmmaWait(n) => self.wait_groups(th, 2, *n)?,
            OpKind::FenceProxyAsync => {
                if self.cfg.detect_races {
                    self.race.proxy_fence(t);
                }
            }
            OpKind::WaitCnt(list) => {
                for (c, n) in list {
                    let ci = counter_index(*c);
                    let mut l = std::mem::take(&mut th.cnt[ci]);
                    l.retain(|x| x.is_none_or(|c| !self.race.is_complete(c)));
                    while l.len() > *n as usize {
                        if let Some(c) = l.remove(0) {
                            self.complete(c, t)?;
                        }
                    }
                    th.cnt[ci] = l;
                    if *n == 0 && matches!(c, Counter::DsCnt | Counter::LgkmCnt) {
                        self.fence(th);
                    }
                }
            }
            OpKind::WaitTokens(toks) => {
                for tv in toks {
                    if let Val::Token(c) = th.vals[tv.index()] {
                        self.complete(c, t)?;
                    }
                }
            }
            OpKind::Barrier => {
                self.fence(th);
                return self.arrive_barrier(th, op, false);
            }
            OpKind::WarpSync => return self.arrive_barrier(th, op, true),
            OpKind::SplitSignal(id) => {
                if th.split.contains_key(id) {
                    let d = Diagnostic::error(
                        DiagKind::Finding,
                        "C0008",
                        format!("split barrier {id} signalled twice without a wait"),
                    )
                    .with_label(k.span(op), format!("second signal in thread {t}"));
                    return Err(Stop::Deadlock(d));
                }
                let own = if self.amd() && th.lds_unfenced {
                    Some(th.fence_clock)
                } else {
                    None
                };
                let n = self.nthreads;
                let slots = self.race.slots;
                let st = self.split.entry(*id).or_insert_with(|| SplitState {
                    vc: vec![0; slots],
                    ..SplitState::default()
                });
                st.signal_op = Some(op);
                let p = st.cur;
                let mut vc = std::mem::take(&mut st.vc);
                self.race.release(t, &mut vc, own);
                let st = self.split.get_mut(id).expect("split state");
                st.vc = vc;
                st.signalled += 1;
                th.split.insert(*id, p);
                if st.signalled == n {
                    let vc = std::mem::replace(&mut st.vc, vec![0; slots]);
                    st.done.push(vc.clone());
                    st.cur += 1;
                    st.signalled = 0;
                    let waiters: Vec<usize> = st
                        .waiters
                        .iter()
                        .filter(|w| w.1 == p)
                        .map(|w| w.0)
                        .collect();
                    st.waiters.retain(|w| w.1 != p);
                    for w in waiters {
                        self.wake(w, &vc);
                    }
                }
            }
            OpKind::SplitWait(id) => {
                let Some(p) = th.split.remove(id) else {
                    let d = Diagnostic::error(
                        DiagKind::Finding,
                        "C0008",
                        format!("split barrier {id} wait without a signal before it"),
                    )
                    .with_label(k.span(op), format!("in thread {t}"));
                    return Err(Stop::Deadlock(d));
                };
                let st = self
                    .split
                    .get_mut(id)
                    .expect("signalled split barrier has state");
                if let Some(vc) = st.done.get(p as usize).cloned() {
                    self.race.acquire(t, &vc);
                } else {
                    st.waiters.push((t, p));
                    th.status = Status::Blocked(Blocked::Split(*id, p, op));
                    return Ok(false);
                }
            }
            OpKind::NamedArrive { id, count } | OpKind::NamedSync { id, count } => {
                let sync = matches!(od.kind, OpKind::NamedSync { .. });
                let slots = self.race.slots;
                let st = self.named.entry(*id).or_insert_with(|| NamedState {
                    vc: vec![0; slots],
                    ..NamedState::default()
                });
                if st.arrived > 0 && st.count != *count {
                    let prev = st.op.unwrap_or(op);
                    let d = Diagnostic::error(DiagKind::Finding, "C0008", format!("named barrier {id}: ops of one phase disagree on the thread count ({} vs {count})", st.count))
                        .with_label(k.span(op), format!("thread {t} arrives expecting {count}"))
                        .with_label(k.span(prev), format!("an earlier arrival expects {}", st.count));
                    return Err(Stop::Deadlock(d));
                }
                st.count = *count;
                st.op = Some(op);
                let mut vc = std::mem::take(&mut st.vc);
                self.race.release(t, &mut vc, None);
                let st = self.named.get_mut(id).expect("named state");
                st.vc = vc;
                st.arrived += 1;
                if sync {
                    st.waiters.push(t);
                    th.status = Status::Blocked(Blocked::Named(*id, op));
                }
                if st.arrived >= st.count {
                    let vc = std::mem::replace(&mut st.vc, vec![0; slots]);
                    let waiters = std::mem::take(&mut st.waiters);
                    st.arrived = 0;
                    st.op = None;
                    for w in waiters {
                        self.wake(w, &vc);
                    }
                }
                if sync {
                    return Ok(false);
                }
            }
            OpKind::MbarInit { mbar, index, count } => {
                let slot = self.mbar_slot(th, *mbar, index, op)?;
                let slots = self.race.slots;
                self.mbar[slot] = MbarState {
                    init: true,
                    count: *count as i64,
                    pending: *count as i64,
                    tx: 0,
                    phases: 0,
                    vc: vec![0; slots],
                    last_vc: vec![0; slots],
                    attached: Vec::new(),
                    waiters: Vec::new(),
                    init_by: (t, self.race.epoch(t), Some(op)),
                };
            }
            OpKind::MbarArrive { mbar, index, tx } => {
                let slot = self.mbar_slot(th, *mbar, index, op)?;
                self.mbar_use(th, slot, op)?;
                let mut vc = std::mem::take(&mut self.mbar[slot].vc);
                self.race.release(t, &mut vc, None);
                let m = &mut self.mbar[slot];
                m.vc = vc;
                m.tx += tx.unwrap_or(0) as i64;
                m.pending -= 1;
                self.mbar_check(slot);
            }
            OpKind::MbarExpectTx { mbar, index, bytes } => {
                let slot = self.mbar_slot(th, *mbar, index, op)?;
                self.mbar_use(th, slot, op)?;
                self.mbar[slot].tx += *bytes as i64;
                self.mbar_check(slot);
            }
            OpKind::MbarWait {
                mbar,
                index,
                parity,
            } => {
                let slot = self.mbar_slot(th, *mbar, index, op)?;
                self.mbar_use(th, slot, op)?;
                let p = self.int(th, parity) & 1;
                let m = &mut self.mbar[slot];
                if (m.phases as i64 & 1) != p {
                    let vc = m.last_vc.clone();
                    self.race.acquire(t, &vc);
                } else {
                    m.waiters.push(t);
                    th.status = Status::Blocked(Blocked::Mbar(slot, p, op));
                    return Ok(false);
                }
            }
            OpKind::MbarInval { mbar, index } => {
                let slot = self.mbar_slot(th, *mbar, index, op)?;
                self.mbar[slot].init = false;
            }
            OpKind::For { lo, hi, step, init } => {
                let (lo, hi, st) = (self.int(th, lo), self.int(th, hi), self.int(th, step));
                if st <= 0 {
                    return Err(self.exec_err(
                        op,
                        "C0005",
                        format!("loop step {st} is not positive"),
                    ));
                }
                let inits: Vec<Val> = init.iter().map(|o| self.val(th, o)).collect();
                let pends: Vec<Option<u32>> = init.iter().map(|o| self.pend_of(th, o)).collect();
                if lo < hi {
                    let body = od.regions[0];
                    let args = &k.regions[body].args;
                    th.vals[args[0].index()] = Val::I32(lo as i32);
                    for ((a, v), p) in args[1..].iter().zip(&inits).zip(&pends) {
                        th.vals[a.index()] = *v;
                        th.pend[a.index()] = *p;
                    }
                    th.frames.push(Frame {
                        region: body,
                        pc: 0,
                        kind: FrameKind::For {
                            op,
                            iv: lo,
                            hi,
                            step: st,
                        },
                    });
                    self.update_iter(th);
                } else {
                    for (i, v) in inits.into_iter().enumerate() {
                        self.set(th, op, i, v);
                        self.set_pend(th, op, i, pends[i]);
                    }
                }
            }
            OpKind::If { cond } => {
                let c = self.val(th, cond).truthy();
                let r = od.regions[if c { 0 } else { 1 }];
                th.frames.push(Frame {
                    region: r,
                    pc: 0,
                    kind: FrameKind::IfArm(op),
                });
            }
            OpKind::While { init } => {
                let inits: Vec<Val> = init.iter().map(|o| self.val(th, o)).collect();
                let pends: Vec<Option<u32>> = init.iter().map(|o| self.pend_of(th, o)).collect();
                let cond = od.regions[0];
                for ((a, v), p) in k.regions[cond].args.iter().zip(&inits).zip(&pends) {
                    th.vals[a.index()] = *v;
                    th.pend[a.index()] = *p;
                }
                th.frames.push(Frame {
                    region: cond,
                    pc: 0,
                    kind: FrameKind::WhileCond(op, 0),
                });
                self.update_iter(th);
            }
            OpKind::Stage { .. } => {
                th.frames.push(Frame {
                    region: od.regions[0],
                    pc: 0,
                    kind: FrameKind::Plain,
                });
            }
            OpKind::Yield(vals) => {
                let vs: Vec<Val> = vals.iter().map(|o| self.val(th, o)).collect();
                th.moving = vals.iter().map(|o| self.pend_of(th, o)).collect();
                return self.end_region(th, vs);
            }
            OpKind::Condition(c) => {
                let c = self.val(th, c).truthy();
                let fr = th.frames.last().cloned().expect("frame");
                let FrameKind::WhileCond(wop, n) = fr.kind else {
                    return Err(self.exec_err(
                        op,
                        "C0004",
                        "`condition` outside a while condition region".into(),
                    ));
                };
                let cur: Vec<Val> = k.regions[fr.region]
                    .args
                    .iter()
                    .map(|a| th.vals[a.index()])
                    .collect();
                let pends: Vec<Option<u32>> = k.regions[fr.region]
                    .args
                    .iter()
                    .map(|a| th.pend[a.index()])
                    .collect();
                if !c {
                    th.frames.pop();
                    for (i, v) in cur.into_iter().enumerate() {
                        self.set(th, wop, i, v);
                        self.set_pend(th, wop, i, pends[i]);
                    }
                    self.update_iter(th);
                } else {
                    let body = k.ops[wop].regions[1];
                    for ((a, v), p) in k.regions[body].args.iter().zip(&cur).zip(&pends) {
                        th.vals[a.index()] = *v;
                        th.pend[a.index()] = *p;
                    }
                    let last = th.frames.last_mut().expect("frame");
                    *last = Frame {
                        region: body,
                        pc: 0,
                        kind: FrameKind::WhileBody(wop, n),
                    };
                }
            }
        }
        Ok(true)
    }

    fn end_region(&mut self, th: &mut Thread, vals: Vec<Val>) -> Result<bool, Stop> {
        let k = self.k;
        let fr = th.frames.last().cloned().expect("frame");
        // The pending wgmma marks of the yielded values (none when the region has no yield).
        let mut moving = std::mem::take(&mut th.moving);
        moving.resize(vals.len(), None);
        match fr.kind {
            FrameKind::Plain => {
                th.frames.pop();
                if th.frames.is_empty() {
                    th.status = Status::Exited;
                    return Ok(false);
                }
            }
            FrameKind::IfArm(op) => {
                th.frames.pop();
                for (i, v) in vals.into_iter().enumerate() {
                    self.set(th, op, i, v);
                    self.set_pend(th, op, i, moving[i]);
                }
            }
            FrameKind::For { op, iv, hi, step } => {
                let next = iv.saturating_add(step);
                let args = &k.regions[fr.region].args;
                if next < hi {
                    th.vals[args[0].index()] = Val::I32(next as i32);
                    for ((a, v), p) in args[1..].iter().zip(&vals).zip(&moving) {
                        th.vals[a.index()] = *v;
                        th.pend[a.index()] = *p;
                    }
                    let last = th.frames.last_mut().expect("frame");
                    last.pc = 0;
                    last.kind = FrameKind::For {
                        op,
                        iv: next,
                        hi,
                        step,
                    };
                } else {
                    th.frames.pop();
                    // A body without `yield` carries its iteration values unchanged.
                    let (vals, moving) = if vals.is_empty() {
                        (
                            args[1..].iter().map(|a| th.vals[a.index()]).collect(),
                            args[1..].iter().map(|a| th.pend[a.index()]).collect(),
                        )
                    } else {
                        (vals, moving)
                    };
                    for (i, v) in vals.into_iter().enumerate() {
                        self.set(th, op, i, v);
                        self.set_pend(th, op, i, moving[i]);
                    }
                }
                self.update_iter(th);
            }
            FrameKind::WhileBody(op, n) => {
                let cond = k.ops[op].regions[0];
                for ((a, v), p) in k.regions[cond].args.iter().zip(&vals).zip(&moving) {
                    th.vals[a.index()] = *v;
                    th.pend[a.index()] = *p;
                }
                let last = th.frames.last_mut().expect("frame");
                *last = Frame {
                    region: cond,
                    pc: 0,
                    kind: FrameKind::WhileCond(op, n + 1),
                };
                self.update_iter(th);
            }
            FrameKind::WhileCond(op, _) => {
                return Err(self.exec_err(
                    op,
                    "C0004",
                    "while condition region ends without `condition`".into(),
                ));
            }
        }
        Ok(true)
    }
}

fn blocked_op(b: Blocked) -> Op {
    match b {
        Blocked::Barrier(o)
        | Blocked::Warp(o)
        | Blocked::Split(_, _, o)
        | Blocked::Named(_, o)
        | Blocked::Mbar(_, _, o) => o,
    }
}

/// `(x, y, z)` of a linear thread id.
pub fn xyz_of(k: &Kernel, t: u32) -> [u32; 3] {
    let bx = k.block[0].max(1);
    let by = k.block[1].max(1);
    [t % bx, (t / bx) % by, t / (bx * by)]
}

pub fn fmt_xyz(x: [u32; 3]) -> String {
    format!("({}, {}, {})", x[0], x[1], x[2])
}

fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

fn unlinear(mut e: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0u64; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = e % shape[d].max(1);
        e /= shape[d].max(1);
    }
    idx
}


/// Binary arithmetic per docs/ir.md; None for an integer division by zero.
pub fn binary(b: BinOp, ty: ScalarType, x: Val, y: Val) -> Option<Val> {
    Some(match ty {
        ScalarType::F32 => {
            let (a, c) = (x.as_f32(), y.as_f32());
            Val::F32(match b {
                BinOp::Add => a + c,
                BinOp::Sub => a - c,
                BinOp::Mul => a * c,
                BinOp::Div => a / c,
                BinOp::Rem => a - c * (a / c).floor(),
                BinOp::Min => a.min(c),
                BinOp::Max => a.max(c),
                BinOp::And => f32::from_bits(a.to_bits() & c.to_bits()),
                BinOp::Or => f32::from_bits(a.to_bits() | c.to_bits()),
                BinOp::Xor => f32::from_bits(a.to_bits() ^ c.to_bits()),
                BinOp::Shl | BinOp::Shr => a,
            })
        }
        ScalarType::I1 => {
            let (a, c) = (x.truthy(), y.truthy());
            Val::I1(match b {
                BinOp::And | BinOp::Mul | BinOp::Min => a && c,
                BinOp::Or | BinOp::Max => a || c,
                BinOp::Xor | BinOp::Add | BinOp::Sub => a ^ c,
                _ => a,
            })
        }
        _ => {
            let (a, c) = (x.as_i64() as i32, y.as_i64() as i32);
            Val::I32(match b {
                BinOp::Add => a.wrapping_add(c),
                BinOp::Sub => a.wrapping_sub(c),
                BinOp::Mul => a.wrapping_mul(c),
                BinOp::Div => floor_div(a as i64, c as i64)? as i32,
                BinOp::Rem => {
                    let (a, c) = (a as i64, c as i64);
                    (a - c * floor_div(a, c)?) as i32
                }
                BinOp::Min => a.min(c),
                BinOp::Max => a.max(c),
                BinOp::And => a & c,
                BinOp::Or => a | c,
                BinOp::Xor => a ^ c,
                BinOp::Shl => a.wrapping_shl(c as u32 & 31),
                BinOp::Shr => a.wrapping_shr(c as u32 & 31),
            })
        }
    })
}

fn unary(u: UnOp, ty: ScalarType, x: Val) -> Val {
    match ty {
        ScalarType::F32 => {
            let a = x.as_f32();
            Val::F32(match u {
                UnOp::Neg => -a,
                UnOp::Not => f32::from_bits(!a.to_bits()),
                UnOp::Exp => a.exp(),
                UnOp::Sqrt => a.sqrt(),
                UnOp::Abs => a.abs(),
            })
        }
        ScalarType::I1 => Val::I1(match u {
            UnOp::Not => !x.truthy(),
            _ => x.truthy(),
        }),
        _ => {
            let a = x.as_i64() as i32;
            Val::I32(match u {
                UnOp::Neg => a.wrapping_neg(),
                UnOp::Not => !a,
                UnOp::Exp => (a as f32).exp() as i32,
                UnOp::Sqrt => (a as f32).sqrt() as i32,
                UnOp::Abs => a.wrapping_abs(),
            })
        }
    }
}

fn atomic(a: AtomicOp, old: Val, x: Val) -> Val {
    match old {
        Val::F32(o) => {
            let x = x.as_f32();
            Val::F32(match a {
                AtomicOp::Add => o + x,
                AtomicOp::Min => o.min(x),
                AtomicOp::Max => o.max(x),
                AtomicOp::Exch => x,
                AtomicOp::And => f32::from_bits(o.to_bits() & x.to_bits()),
                AtomicOp::Or => f32::from_bits(o.to_bits() | x.to_bits()),
            })
        }
        _ => {
            let (o, x) = (old.as_i64() as i32, x.as_i64() as i32);
            Val::I32(match a {
                AtomicOp::Add => o.wrapping_add(x),
                AtomicOp::Min => o.min(x),
                AtomicOp::Max => o.max(x),
                AtomicOp::Exch => x,
                AtomicOp::And => o & x,
                AtomicOp::Or => o | x,
            })
        }
    }
}

/// `compute`'s result `j`: the sum of its arguments converted to the result type, plus `j`.
fn compute(ty: ScalarType, args: &[Val], j: usize) -> Val {
    match ty {
        ScalarType::F32 => {
            let mut s = 0f32;
            for a in args {
                s += a.to_ty(ScalarType::F32).as_f32();
            }
            Val::F32(s + j as f32)
        }
        _ => {
            let mut s = 0i32;
            for a in args {
                s = s.wrapping_add(a.to_ty(ScalarType::I32).as_i64() as i32);
            }
            let s = s.wrapping_add(j as i32);
            if ty == ScalarType::I1 {
                Val::I1(s & 1 != 0)
            } else {
                Val::I32(s)
            }
        }
    }
}
