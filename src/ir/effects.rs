//! The memory-effects and sync-semantics table: the one place that says what each op kind
//! reads, writes and orders.
//!
//! Analyses (hazards, placement), the race checker, the interpreter and the emitters ask
//! [`effects`]; none of them matches opcodes to learn an op's memory behaviour. Both the placer
//! and the independent checker share this table and the IR, and nothing else.
//!
//! An access is *per-thread* (each executing thread touches the element its index operands
//! name) or *collective* (the executing threads together touch every element of the view, in a
//! mapping named by an optional layout; two collective accesses with the same layout and shape
//! map each element to the same thread, unless the layout is an opaque fall-back of a defined
//! encoding: `ir::layout::mapping_name`). Async accesses are performed by a copy engine, not by
//! a thread: an async write becomes visible only when a wait completes it (docs/ir.md, "Async
//! copies"). Complexity: O(operands) per query.

use super::entities::{Global, Value};
use super::kernel::Kernel;
use super::ops::*;
use super::signature::EffectClass;

/// The engine class of an async access; decides which wait completes it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AsyncClass {
    /// AMD `global_load_lds` (gather-to-LDS).
    GatherToLds,
    /// AMD tensor data mover (`tensor_load_to_lds`).
    Tdm,
    /// NVIDIA `cp.async` (commit groups).
    CpAsync,
    /// NVIDIA TMA load completing on an mbarrier.
    Tma,
    /// NVIDIA TMA store (an async read of shared memory; bulk groups).
    TmaStore,
    /// NVIDIA wgmma reading its shared operands (wgmma groups).
    Wgmma,
}

/// What an access does to the elements it touches.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    Read,
    Write,
    /// Read-modify-write; atomics of the same op commute with each other.
    Atomic(AtomicOp),
    /// A write performed later by a copy engine.
    AsyncWrite(AsyncClass),
    /// A read performed later by a copy engine (TMA store, wgmma operands).
    AsyncRead(AsyncClass),
}

impl AccessKind {
    pub fn writes(self) -> bool {
        matches!(
            self,
            AccessKind::Write | AccessKind::Atomic(_) | AccessKind::AsyncWrite(_)
        )
    }
    pub fn reads(self) -> bool {
        matches!(
            self,
            AccessKind::Read | AccessKind::Atomic(_) | AccessKind::AsyncRead(_)
        )
    }
    pub fn is_async(self) -> bool {
        matches!(self, AccessKind::AsyncWrite(_) | AccessKind::AsyncRead(_))
    }
}

/// Which elements an access touches.
#[derive(Clone, Debug, PartialEq)]
pub enum Footprint {
    /// Each executing thread touches the element at these indices of the memref.
    PerThread(Vec<Operand>),
    /// The executing threads together touch every element of the memref.
    Collective { layout: Option<String> },
}

/// One shared-memory access of an op.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedAccess {
    pub mem: MemRef,
    pub kind: AccessKind,
    pub footprint: Footprint,
}

/// One global-memory access of an op.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalAccess {
    pub global: Global,
    pub write: bool,
    /// Per-thread element index, or a tile origin for collective copies.
    pub index: Vec<Operand>,
    pub collective: bool,
}

/// What a wait op completes.
#[derive(Clone, Debug, PartialEq)]
pub enum WaitKind {
    /// All but the newest N cp.async groups of the waiting thread.
    CpAsyncGroups(u32),
    /// All but the newest N bulk (TMA store) groups of the waiting thread.
    BulkGroups(u32),
    /// All but the newest N wgmma groups of the waiting thread.
    WgmmaGroups(u32),
    /// AMD counters: for each, all but the newest N operations the counter tracks.
    Counters(Vec<(Counter, u32)>),
    /// Exactly the copies that produced these tokens.
    Tokens(Vec<Value>),
}

/// The ordering an op provides.
#[derive(Clone, Debug, PartialEq)]
pub enum SyncEffect {
    /// Block-wide barrier (all threads of the block must arrive); orders all thread accesses.
    Barrier,
    /// Orders the accesses of the threads of one warp/wavefront.
    WarpSync,
    SplitSignal(i32),
    SplitWait(i32),
    NamedArrive {
        id: u32,
        count: u32,
    },
    NamedSync {
        id: u32,
        count: u32,
    },
    Wait(WaitKind),
    MbarInit,
    MbarArrive,
    MbarExpectTx,
    MbarWait,
    MbarInval,
    /// Closes an async group (cp.async, bulk, wgmma) of the executing thread.
    Commit(AsyncClass),
    /// `fence.proxy.async.shared::cta`: the executing thread's earlier generic-proxy shared
    /// writes become visible to async-proxy accesses that a later sync orders after it.
    ProxyFence,
}

impl SyncEffect {
    /// Whether every thread of the block must execute the op together.
    pub fn needs_whole_block(&self) -> bool {
        matches!(
            self,
            SyncEffect::Barrier | SyncEffect::SplitSignal(_) | SyncEffect::SplitWait(_)
        )
    }
}

/// The effects of one op.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effects {
    pub shared: Vec<SharedAccess>,
    pub global: Vec<GlobalAccess>,
    pub sync: Option<SyncEffect>,
}

/// The effects of an op's own execution (not of the ops in its regions). Which of the four
/// kinds of effect an op has is its row's [`EffectClass`] in the signature table.
pub fn effects(k: &Kernel, op: super::entities::Op) -> Effects {
    let kind = &k.ops[op].kind;
    let mut e = Effects::default();
    match kind.signature().effects {
        EffectClass::Shared | EffectClass::Global => access_effects(kind, &mut e),
        EffectClass::Async => async_effects(kind, &mut e),
        EffectClass::Completion | EffectClass::Sync => e.sync = sync_effect(kind),
        EffectClass::Pure | EffectClass::Control => {}
    }
    e
}

/// The effects of a synchronous shared or global access (effect class `Shared`, `Global`).
fn access_effects(kind: &OpKind, e: &mut Effects) {
    match kind {
        OpKind::Load { mem, index } => e.shared.push(per(*mem, AccessKind::Read, index)),
        OpKind::Store { mem, index, .. } => e.shared.push(per(*mem, AccessKind::Write, index)),
        OpKind::Atomic { op, mem, index, .. } => {
            e.shared.push(per(*mem, AccessKind::Atomic(*op), index))
        }
        OpKind::LocalLoad { mem, layout } => {
            e.shared.push(coll(*mem, AccessKind::Read, layout.clone()))
        }
        OpKind::LocalStore { mem, layout, .. } => {
            e.shared.push(coll(*mem, AccessKind::Write, layout.clone()))
        }
        OpKind::GLoad { global, index } => e.global.push(gl(*global, false, index, false)),
        OpKind::GStore { global, index, .. } | OpKind::GAtomic { global, index, .. } => {
            e.global.push(gl(*global, true, index, false))
        }
        _ => {}
    }
}

/// A per-thread shared access at `index`.
fn per(mem: MemRef, kind: AccessKind, index: &[Operand]) -> SharedAccess {
    SharedAccess {
        mem,
        kind,
        footprint: Footprint::PerThread(index.to_vec()),
    }
}

/// A collective shared access, its threads mapped by `layout` (opaque when `None`).
fn coll(mem: MemRef, kind: AccessKind, layout: Option<String>) -> SharedAccess {
    SharedAccess {
        mem,
        kind,
        footprint: Footprint::Collective { layout },
    }
}

/// A global access at `index` (a tile's origin when `collective`).
fn gl(global: Global, write: bool, index: &[Operand], collective: bool) -> GlobalAccess {
    GlobalAccess {
        global,
        write,
        index: index.to_vec(),
        collective,
    }
}

/// The effects of an asynchronous copy or wgmma: its shared side is an async access of its
/// class, its global side (copies) an ordinary access.
fn async_effects(kind: &OpKind, e: &mut Effects) {
    match kind {
        OpKind::GatherToLds {
            dst,
            dst_index,
            src,
            src_index,
        } => {
            e.shared.push(per(
                *dst,
                AccessKind::AsyncWrite(AsyncClass::GatherToLds),
                dst_index,
            ));
            e.global.push(gl(*src, false, src_index, false));
        }
        OpKind::CpAsync {
            dst,
            dst_index,
            src,
            src_index,
        } => {
            e.shared.push(per(
                *dst,
                AccessKind::AsyncWrite(AsyncClass::CpAsync),
                dst_index,
            ));
            e.global.push(gl(*src, false, src_index, false));
        }
        OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => {
            let class = if matches!(kind, OpKind::CpAsyncTile(_)) {
                AsyncClass::CpAsync
            } else {
                AsyncClass::GatherToLds
            };
            e.shared
                .push(coll(c.dst, AccessKind::AsyncWrite(class), c.layout.clone()));
            e.global.push(gl(c.src, false, &c.origin, true));
        }
        OpKind::TdmLoad { dst, src, origin } => {
            e.shared
                .push(coll(*dst, AccessKind::AsyncWrite(AsyncClass::Tdm), None));
            e.global.push(gl(*src, false, origin, true));
        }
        OpKind::TmaLoad {
            dst, src, origin, ..
        } => {
            e.shared
                .push(coll(*dst, AccessKind::AsyncWrite(AsyncClass::Tma), None));
            e.global.push(gl(*src, false, origin, true));
        }
        OpKind::TmaStore { dst, origin, src } => {
            e.shared.push(coll(
                *src,
                AccessKind::AsyncRead(AsyncClass::TmaStore),
                None,
            ));
            e.global.push(gl(*dst, true, origin, true));
        }
        OpKind::Wgmma { a, b, .. } => {
            // Register A is read at issue; only shared operands are async reads.
            if let Some(a) = a.shared() {
                e.shared
                    .push(coll(a, AccessKind::AsyncRead(AsyncClass::Wgmma), None));
            }
            e.shared
                .push(coll(*b, AccessKind::AsyncRead(AsyncClass::Wgmma), None));
        }
        _ => {}
    }
}

/// The synchronization effect of a sync op (commit, wait, fence, barrier, mbarrier op);
/// `None` for every other op. What [`effects`] reports as `sync`, without building the
/// access vectors.
pub fn sync_effect(kind: &OpKind) -> Option<SyncEffect> {
    match kind {
        OpKind::CpAsyncCommit => Some(SyncEffect::Commit(AsyncClass::CpAsync)),
        OpKind::BulkCommit => Some(SyncEffect::Commit(AsyncClass::TmaStore)),
        OpKind::WgmmaCommit => Some(SyncEffect::Commit(AsyncClass::Wgmma)),
        OpKind::CpAsyncWait(n) => Some(SyncEffect::Wait(WaitKind::CpAsyncGroups(*n))),
        OpKind::BulkWait(n) => Some(SyncEffect::Wait(WaitKind::BulkGroups(*n))),
        OpKind::WgmmaWait(n) => Some(SyncEffect::Wait(WaitKind::WgmmaGroups(*n))),
        OpKind::WaitCnt(c) => Some(SyncEffect::Wait(WaitKind::Counters(c.clone()))),
        OpKind::WaitTokens(t) => Some(SyncEffect::Wait(WaitKind::Tokens(t.clone()))),
        OpKind::FenceProxyAsync => Some(SyncEffect::ProxyFence),
        OpKind::Barrier => Some(SyncEffect::Barrier),
        OpKind::WarpSync => Some(SyncEffect::WarpSync),
        OpKind::SplitSignal(id) => Some(SyncEffect::SplitSignal(*id)),
        OpKind::SplitWait(id) => Some(SyncEffect::SplitWait(*id)),
        OpKind::NamedArrive { id, count } => Some(SyncEffect::NamedArrive {
            id: *id,
            count: *count,
        }),
        OpKind::NamedSync { id, count } => Some(SyncEffect::NamedSync {
            id: *id,
            count: *count,
        }),
        OpKind::MbarInit { .. } => Some(SyncEffect::MbarInit),
        OpKind::MbarArrive { .. } => Some(SyncEffect::MbarArrive),
        OpKind::MbarExpectTx { .. } => Some(SyncEffect::MbarExpectTx),
        OpKind::MbarWait { .. } => Some(SyncEffect::MbarWait),
        OpKind::MbarInval { .. } => Some(SyncEffect::MbarInval),
        _ => None,
    }
}

/// The global buffers some op of `k` writes (`gstore`, `gatomic`, `tma_store`): a `gload` of
/// one of them may return different values in different threads, whatever its index, since
/// the write (by a thread of this block or of another) is not ordered with the load
/// (docs/ir.md, "Uniformity"). O(ops).
pub fn written_globals(k: &Kernel) -> std::collections::HashSet<Global> {
    k.ops_in_order()
        .into_iter()
        .flat_map(|op| effects(k, op).global)
        .filter(|g| g.write)
        .map(|g| g.global)
        .collect()
}

/// Whether the op is a sync op (barrier, wait, commit, mbarrier op).
pub fn is_sync(k: &Kernel, op: super::entities::Op) -> bool {
    // The sync effect alone: `effects` would build the access vectors too.
    sync_effect(&k.ops[op].kind).is_some()
}
