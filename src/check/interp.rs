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
//! bulk / wgmma groups, and tokens. A `wgmma_wait` completes the shared reads of its MMAs for
//! the whole warpgroup, once every thread of it has issued them (`interp::warpgroup`).
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
pub use crate::ir::random::splitmix64;
use crate::ir::random::Rng;
use crate::target::Target;

mod barriers;
mod control;
mod copies;
mod memory;
mod scalar;
mod setup;
mod stops;
mod warpgroup;
mod wgmma;

pub use scalar::binary;
use scalar::{cast, compare};
pub use setup::has_collective_layouts;
use setup::init_globals;
use stops::step_limit;

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

#[derive(Clone, Debug, PartialEq)]
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
    /// A `wgmma_wait` (first) until every thread of the warpgroup issues a wgmma (second).
    Warpgroup(Op, Op),
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
    /// How many wgmma ops (wgmma, commit, wait) the thread executed (`interp::wgmma`).
    warpgroup_seq: usize,
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
    layouts: HashMap<Op, setup::OpaqueOwners>,
    /// Collective ops with a concrete layout: the view elements of each thread.
    concrete: HashMap<Op, Rc<Vec<Vec<u64>>>>,
    iters: HashMap<Vec<i64>, u32>,
    iter_list: Vec<Vec<i64>>,
    tiles: HashMap<TileKey, SharedWrites>,
    /// Per warp: the register-A wgmma rendezvous in progress.
    meets: HashMap<usize, wgmma::Meet>,
    /// Per wgmma op and iteration: the group of its shared reads while threads can still
    /// join it (`interp::wgmma`).
    wgmma_groups: HashMap<(Op, u32), wgmma::WgmmaGroup>,
    /// Per warpgroup, wgmma op and iteration not yet completed: its issues
    /// (`interp::warpgroup`).
    collectives: HashMap<warpgroup::CollectiveKey, warpgroup::Collective>,
    /// Per wgmma copy: its warpgroup's execution.
    collective_of: HashMap<u32, warpgroup::CollectiveKey>,
    /// Per warpgroup: the wgmma ops (wgmma, commit, wait) its threads executed, in order.
    warpgroup_ops: Vec<Vec<Op>>,
    parents: &'a Parents,
}

type TileKey = (Op, u32, Buffer, u64, Vec<i64>);

/// The shared elements a copy writes and their values, plus "already written".
type SharedWrites = Rc<(Vec<(Buffer, u64, Val)>, Cell<bool>)>;

/// A TMA store: shared elements read, the global buffer and elements they go to.
type TmaStoreData = (Vec<(Buffer, u64)>, Global, Vec<u64>);

impl<'a> BlockExec<'a> {
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
                && self.rng.index(2) == 0
            {
                let i = self.rng.index(self.unperformed.len());
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
                    let c = tma[self.rng.index(tma.len())];
                    self.perform(c)?;
                    continue;
                }
                if self.threads.iter().all(|t| t.status == Status::Exited) {
                    return self.finish();
                }
                return Err(self.deadlock());
            }
            let i = self.rng.index(self.ready.len());
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
        if let Some(c) = outstanding.into_iter().find(|c| !self.own_done(*c)) {
            let op = self.copy_ops.get(&c).map(|x| x.0);
            let e = self.outstanding(c, op, th.lin);
            self.defer(e);
        }
        Ok(())
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
        self.warpgroups_complete()?;
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
        (!self.own_done(c)).then_some(c)
    }

    /// Marks result `i` of `op` (a move's destination) with the pending mark `p`.
    fn set_pend(&self, th: &mut Thread, op: Op, i: usize, p: Option<u32>) {
        if let Some(r) = self.k.ops[op].results.get(i) {
            th.pend[r.index()] = p;
        }
    }

    /// C0015: `op` consumes a value that holds a wgmma result no wait has completed.
    fn check_register_reads(&self, th: &Thread, op: Op) -> Result<(), Stop> {
        for v in crate::ir::wgmma::consumed(self.k, op) {
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

    // ---------------------------------------------------------------- ops

    /// The next op of `th`'s innermost region, advancing its pc; None at the region's end
    /// (or when the thread has no frame left).
    fn fetch(&self, th: &mut Thread) -> Option<Op> {
        let fr = th.frames.last_mut()?;
        let op = *self.k.region_ops(fr.region).get(fr.pc)?;
        fr.pc += 1;
        Some(op)
    }

    /// Executes one op (or region end) of `th`. Ok(true): continue; Ok(false): the thread
    /// blocked or exited (see its status). Each op family lives in its own file (module doc).
    fn step(&mut self, th: &mut Thread) -> Result<bool, Stop> {
        let k = self.k;
        let Some(op) = self.fetch(th) else {
            if th.frames.is_empty() {
                th.status = Status::Exited;
                return Ok(false);
            }
            return self.end_region(th, Vec::new());
        };
        self.check_register_reads(th, op)?;
        self.check_held_registers(th, op)?;
        if matches!(k.ops[op].kind, OpKind::Wgmma { .. } | OpKind::WgmmaCommit | OpKind::WgmmaWait(_)) {
            self.warpgroup_op(th, op)?;
        }
        match &k.ops[op].kind {
            OpKind::Const(s) => self.set(th, op, 0, Val::from_scalar(*s)),
            OpKind::Special(s) => {
                let v = self.special(th, *s);
                self.set(th, op, 0, v);
            }
            OpKind::Binary(b, x, y) => self.binary_op(th, op, (*b, x, y))?,
            OpKind::Unary(u, x) => self.unary_op(th, op, *u, x),
            OpKind::Cmp(p, x, y) => {
                let r = compare(*p, self.val(th, x), self.val(th, y));
                self.set(th, op, 0, Val::I1(r));
            }
            OpKind::Select(c, a, b) => self.select_op(th, op, [c, a, b]),
            OpKind::Cast(c, a) => {
                let v = cast(*c, self.val(th, a));
                self.set(th, op, 0, v);
            }
            OpKind::InGroup(g) => self.in_group(th, op, *g),
            OpKind::Compute { args, .. } => self.compute_op(th, op, args),
            OpKind::ViewDef(v) => self.view_def(th, op, *v)?,
            OpKind::Load { mem, index } => self.load(th, op, (*mem, index))?,
            OpKind::Store { mem, index, value } => self.store(th, op, (*mem, index), value)?,
            OpKind::Atomic {
                op: a,
                mem,
                index,
                value,
            } => self.shared_atomic(th, op, (*a, *mem, index), value)?,
            OpKind::LocalLoad { mem, .. } => self.local_load(th, op, *mem)?,
            OpKind::LocalStore { mem, value, .. } => self.local_store(th, op, *mem, value)?,
            OpKind::GLoad { global, index } => self.gload(th, op, (*global, index))?,
            OpKind::GStore {
                global,
                index,
                value,
            } => self.gstore(th, op, (*global, index), value)?,
            OpKind::GAtomic {
                op: a,
                global,
                index,
                value,
            } => self.global_atomic(th, op, (*a, *global, index), value)?,
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => self.tile_copy(th, op, c)?,
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
            } => self.element_copy(th, op, (*dst, dst_index), (*src, src_index))?,
            OpKind::TdmLoad { dst, src, origin }
            | OpKind::TmaLoad {
                dst, src, origin, ..
            } => self.tile_load(th, op, (*dst, *src, origin))?,
            OpKind::TmaStore { dst, origin, src } => self.tma_store(th, op, (*dst, origin, *src))?,
            OpKind::Wgmma { a, b, acc } => return self.exec_wgmma(th, op, (a, *b, acc)),
            OpKind::CpAsyncCommit => self.commit(th, 0),
            OpKind::BulkCommit => self.commit(th, 1),
            OpKind::WgmmaCommit => self.commit(th, 2),
            OpKind::CpAsyncWait(n) => self.wait_groups(th, 0, *n)?,
            OpKind::BulkWait(n) => self.wait_groups(th, 1, *n)?,
            OpKind::WgmmaWait(n) => return self.wgmma_wait(th, op, *n),
            OpKind::FenceProxyAsync => {
                if self.cfg.detect_races {
                    self.race.proxy_fence(th.lin as usize);
                }
            }
            OpKind::WaitCnt(list) => self.wait_cnt(th, list)?,
            OpKind::WaitTokens(toks) => self.wait_tokens(th, toks)?,
            OpKind::Barrier => {
                self.fence(th);
                return self.arrive_barrier(th, op, false);
            }
            OpKind::WarpSync => return self.arrive_barrier(th, op, true),
            OpKind::SplitSignal(id) => self.split_signal(th, op, *id)?,
            OpKind::SplitWait(id) => return self.split_wait(th, op, *id),
            OpKind::NamedArrive { id, count } => {
                return self.named_barrier(th, op, (*id, *count), false);
            }
            OpKind::NamedSync { id, count } => {
                return self.named_barrier(th, op, (*id, *count), true);
            }
            OpKind::MbarInit { mbar, index, count } => self.mbar_init(th, op, (*mbar, index), *count)?,
            OpKind::MbarArrive { mbar, index, tx } => self.mbar_arrive(th, op, (*mbar, index), *tx)?,
            OpKind::MbarExpectTx { mbar, index, bytes } => {
                self.mbar_expect_tx(th, op, (*mbar, index), *bytes)?
            }
            OpKind::MbarWait {
                mbar,
                index,
                parity,
            } => return self.mbar_wait(th, op, (*mbar, index), parity),
            OpKind::MbarInval { mbar, index } => self.mbar_inval(th, op, (*mbar, index))?,
            OpKind::For { lo, hi, step, init } => self.enter_for(th, op, [lo, hi, step], init)?,
            OpKind::If { cond } => self.enter_if(th, op, cond),
            OpKind::While { init } => self.enter_while(th, op, init),
            OpKind::Stage { .. } => self.enter_stage(th, op),
            OpKind::Yield(vals) => return self.yield_values(th, vals),
            OpKind::Condition(c) => self.condition(th, op, c)?,
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
        | Blocked::Mbar(_, _, o)
        | Blocked::Warpgroup(o, _) => o,
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


