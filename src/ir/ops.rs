//! What an op *is*: its kind and operands, independent of where it sits.
//!
//! Every op kind of the text format is a variant of [`OpKind`]; an op's results and child
//! regions live beside it in [`OpData`]. Inserting a sync op never rewrites another op's
//! payload. Memory effects and sync semantics are *not* matched here: `ir::effects` declares
//! them once per kind and every analysis asks that table.

use super::entities::{Buffer, Global, Group, Region, Value, View};
use super::types::{Scalar, ScalarType};

/// An operand: an SSA value or an immediate constant (whose type is taken from context).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Operand {
    Value(Value),
    Imm(Scalar),
}

impl Operand {
    pub fn value(self) -> Option<Value> {
        match self {
            Operand::Value(v) => Some(v),
            Operand::Imm(_) => None,
        }
    }
    pub fn int(v: i64) -> Operand {
        Operand::Imm(Scalar::I32(v as i32))
    }
}

/// A shared-memory location base: a whole buffer or a view of one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemRef {
    Buffer(Buffer),
    View(View),
}

impl MemRef {
    /// The view, when this names one.
    pub fn view(self) -> Option<View> {
        match self {
            MemRef::View(v) => Some(v),
            MemRef::Buffer(_) => None,
        }
    }
}

/// Thread- and block-id registers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    Tid(u8),
    Bid(u8),
    BlockDim(u8),
    GridDim(u8),
    /// Lane within the warp/wavefront (`tid.linear mod warp`).
    Lane,
    /// Warp/wavefront index within the block (`tid.linear div warp`).
    Warp,
    /// Linear thread id `x + y*bx + z*bx*by`.
    LinearTid,
}

impl Special {
    pub fn name(self) -> &'static str {
        const TID: [&str; 3] = ["tid.x", "tid.y", "tid.z"];
        const BID: [&str; 3] = ["bid.x", "bid.y", "bid.z"];
        const BDIM: [&str; 3] = ["bdim.x", "bdim.y", "bdim.z"];
        const GDIM: [&str; 3] = ["gdim.x", "gdim.y", "gdim.z"];
        match self {
            Special::Tid(d) => TID[d as usize],
            Special::Bid(d) => BID[d as usize],
            Special::BlockDim(d) => BDIM[d as usize],
            Special::GridDim(d) => GDIM[d as usize],
            Special::Lane => "lane",
            Special::Warp => "warp",
            Special::LinearTid => "tid.linear",
        }
    }
    pub fn from_name(s: &str) -> Option<Special> {
        let dim = |c: &str| match c {
            "x" => Some(0u8),
            "y" => Some(1),
            "z" => Some(2),
            _ => None,
        };
        if let Some((a, b)) = s.split_once('.') {
            if a == "tid" && b == "linear" {
                return Some(Special::LinearTid);
            }
            let d = dim(b)?;
            return match a {
                "tid" => Some(Special::Tid(d)),
                "bid" => Some(Special::Bid(d)),
                "bdim" => Some(Special::BlockDim(d)),
                "gdim" => Some(Special::GridDim(d)),
                _ => None,
            };
        }
        match s {
            "lane" => Some(Special::Lane),
            "warp" => Some(Special::Warp),
            _ => None,
        }
    }
    /// Whether the value differs between threads of one block.
    pub fn is_thread_dependent(self) -> bool {
        matches!(
            self,
            Special::Tid(_) | Special::Lane | Special::Warp | Special::LinearTid
        )
    }
}

macro_rules! name_enum {
    ($(#[$m:meta])* $name:ident { $($v:ident = $s:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($v),* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            pub fn name(self) -> &'static str {
                match self { $($name::$v => $s),* }
            }
            pub fn from_name(s: &str) -> Option<Self> {
                match s { $($s => Some($name::$v),)* _ => None }
            }
        }
    };
}

name_enum!(
    /// Binary arithmetic. Integer `div`/`rem` round toward negative infinity (floor), so that
    /// `k mod 3` is in `[0, 3)` for every `k`; division by zero is an execution error.
    BinOp {
        Add = "add", Sub = "sub", Mul = "mul", Div = "div", Rem = "rem", Min = "min",
        Max = "max", And = "and", Or = "or", Xor = "xor", Shl = "shl", Shr = "shr",
    }
);
impl BinOp {
    /// The `i32` result of `x op y` (operands given as `i64` holding `i32` values; floor
    /// `div`/`rem`, wrapping ring ops, shifts by the low 5 bits); `None` on division by zero.
    pub fn eval_i32(self, x: i64, y: i64) -> Option<i64> {
        fn wrap(x: i64) -> i64 {
            x as i32 as i64
        }
    Some(wrap(match self {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div => {
            if y == 0 {
                return None;
            }
            x.div_euclid(y) - if y < 0 && x.rem_euclid(y) != 0 { 1 } else { 0 }
        }
        BinOp::Rem => {
            if y == 0 {
                return None;
            }
            x - y * BinOp::Div.eval_i32(x, y)?
        }
        BinOp::Min => x.min(y),
        BinOp::Max => x.max(y),
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl => ((x as i32).wrapping_shl((y & 31) as u32)) as i64,
        BinOp::Shr => ((x as i32) >> (y & 31)) as i64,
    }))
}
}

name_enum!(
    /// Unary arithmetic.
    UnOp { Neg = "neg", Not = "not", Exp = "exp", Sqrt = "sqrt", Abs = "abs" }
);
name_enum!(
    /// Comparison predicates (signed for integers, ordered for floats).
    CmpPred { Eq = "eq", Ne = "ne", Lt = "lt", Le = "le", Gt = "gt", Ge = "ge" }
);

impl CmpPred {
    /// Whether the predicate holds for two values (an `i32` `cmp` on integers; for floats
    /// the caller rules out NaN first, since an ordered predicate is false on NaN).
    pub fn holds<T: PartialOrd>(self, x: T, y: T) -> bool {
        match self {
            CmpPred::Eq => x == y,
            CmpPred::Ne => x != y,
            CmpPred::Lt => x < y,
            CmpPred::Le => x <= y,
            CmpPred::Gt => x > y,
            CmpPred::Ge => x >= y,
        }
    }
}
name_enum!(
    /// Conversions between scalar types.
    CastOp { IToF = "itof", FToI = "ftoi" }
);
name_enum!(
    /// Atomic read-modify-write kinds. Atomics of the same kind commute with each other.
    AtomicOp { Add = "add", Min = "min", Max = "max", Exch = "exch", And = "and", Or = "or" }
);
name_enum!(
    /// Hardware wait counters (AMD). `vmcnt`/`lgkmcnt`/`expcnt` on gfx9; `loadcnt`,
    /// `storecnt`, `dscnt`, `kmcnt`, `asynccnt`, `tensorcnt` on gfx12 and gfx1250.
    #[cfg_attr(
        not(feature = "internals"),
        expect(clippy::enum_variant_names, reason = "the ISA's counter names all end in cnt")
    )]
    Counter {
        VmCnt = "vmcnt", LgkmCnt = "lgkmcnt", ExpCnt = "expcnt", DsCnt = "dscnt",
        LoadCnt = "loadcnt", StoreCnt = "storecnt", KmCnt = "kmcnt", AsyncCnt = "asynccnt",
        TensorCnt = "tensorcnt",
    }
);

/// One index position of a view: a dynamic or constant index that drops the dimension, or a
/// static half-open range that keeps it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum ViewIndex {
    At(Operand),
    Range(u64, u64),
}

/// Data of a view: the base it indexes and how. Dynamic (`At`) indices come first, ranges
/// after; the view's shape is the kept ranges' extents followed by the base's remaining dims.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewData {
    pub base: MemRef,
    pub indices: Vec<ViewIndex>,
}

/// Operands of a collective per-thread tile copy (`cp_async_tile`, `gather_to_lds_tile`):
/// view element `[i, j]` comes from `src[origin + (i, j)]` (the origin works like
/// `tma_load`'s), copied by its owner under `layout`.
#[derive(Clone, Debug, PartialEq)]
pub struct TileCopy {
    pub dst: MemRef,
    pub src: Global,
    pub origin: Vec<Operand>,
    pub layout: Option<String>,
    /// Source elements outside the global buffer read as zero (instead of an error).
    pub masked: bool,
}

/// The kind and operands of an op.
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    // ---- values ----
    /// `%x = const 3 : i32`
    Const(Scalar),
    /// `%t = tid.x`
    Special(Special),
    /// `%z = add %a, %b`
    Binary(BinOp, Operand, Operand),
    /// `%z = neg %a`
    Unary(UnOp, Operand),
    /// `%c = cmp lt %a, %b`
    Cmp(CmpPred, Operand, Operand),
    /// `%z = select %c, %a, %b`
    Select(Operand, Operand, Operand),
    /// `%f = itof %i`
    Cast(CastOp, Operand),
    /// `%c = in_group @producers` — true in the threads of the group.
    InGroup(Group),
    /// `%r = compute "mma"(%a, %b) : f32` — opaque work, no memory effects. Its results are a
    /// deterministic function of its arguments (docs/ir.md gives it).
    Compute { name: String, args: Vec<Operand> },
    /// `%v = view @a[%slot]` — defines a view (the op's only "result" is the view).
    ViewDef(View),

    // ---- shared memory ----
    /// `%x = load @a[%i, %j]` — per-thread read.
    Load { mem: MemRef, index: Vec<Operand> },
    /// `store @a[%i, %j], %x` — per-thread write.
    Store {
        mem: MemRef,
        index: Vec<Operand>,
        value: Operand,
    },
    /// `%old = atomic add @a[%i], %x` — per-thread read-modify-write (result optional).
    Atomic {
        op: AtomicOp,
        mem: MemRef,
        index: Vec<Operand>,
        value: Operand,
    },
    /// `%x = local_load @a layout "L"` — collective read of the whole view.
    LocalLoad { mem: MemRef, layout: Option<String> },
    /// `local_store @a, %x layout "L"` — collective write of the whole view.
    LocalStore {
        mem: MemRef,
        value: Operand,
        layout: Option<String>,
    },

    // ---- global memory ----
    /// `%x = gload %A[%i]`
    GLoad { global: Global, index: Vec<Operand> },
    /// `gstore %A[%i], %x`
    GStore {
        global: Global,
        index: Vec<Operand>,
        value: Operand,
    },
    /// `%old = gatomic add %A[%i], %x` (result optional)
    GAtomic {
        op: AtomicOp,
        global: Global,
        index: Vec<Operand>,
        value: Operand,
    },

    // ---- async copies global -> shared ----
    /// `%t = gather_to_lds @a[%i] <- %A[%j]` — AMD global_load_lds: per-thread element copy,
    /// completion counted by `vmcnt` (gfx9) / `loadcnt` (gfx12) / `asynccnt` (gfx1250).
    GatherToLds {
        dst: MemRef,
        dst_index: Vec<Operand>,
        src: Global,
        src_index: Vec<Operand>,
    },
    /// `%t = tdm_load @a <- %A[%r, %c]` — AMD tensor DMA: copies the whole view from the
    /// global tile at the origin; counted by `tensorcnt`. Issued once per executing wave.
    TdmLoad {
        dst: MemRef,
        src: Global,
        origin: Vec<Operand>,
    },
    /// `cp_async @a[%i] <- %A[%j]` — NVIDIA cp.async: per-thread element copy, completes in
    /// the thread's next commit group.
    CpAsync {
        dst: MemRef,
        dst_index: Vec<Operand>,
        src: Global,
        src_index: Vec<Operand>,
    },
    /// `cp_async_commit` — closes the thread's current cp.async group.
    CpAsyncCommit,
    /// `cp_async_tile %v <- %A[%r, %c] layout "L" masked` — collective NVIDIA cp.async of
    /// the whole view: each element is copied by the thread that owns it under layout `L`,
    /// as that thread's cp.async (completes in its next commit group).
    CpAsyncTile(TileCopy),
    /// `%t = gather_to_lds_tile %v <- %A[%r, %c] layout "L"` — collective AMD
    /// global/buffer load to LDS of the whole view, each element by its owner, counted like
    /// `gather_to_lds`.
    GatherToLdsTile(TileCopy),
    /// `cp_async_wait 1` — waits until at most N of the thread's groups are pending.
    CpAsyncWait(u32),
    /// `tma_load @a <- %A[%r, %c], @full[%s]` — NVIDIA TMA: copies the whole view; its bytes
    /// complete transactions on the mbarrier.
    TmaLoad {
        dst: MemRef,
        src: Global,
        origin: Vec<Operand>,
        mbar: MemRef,
        mbar_index: Vec<Operand>,
    },
    /// `tma_store %A[%r, %c] <- @a` — NVIDIA TMA store: an async *read* of the view, in the
    /// issuing thread's bulk group.
    TmaStore {
        dst: Global,
        origin: Vec<Operand>,
        src: MemRef,
    },
    /// `bulk_commit` — closes the thread's bulk (TMA store) group.
    BulkCommit,
    /// `bulk_wait 0` — waits until at most N bulk groups have pending shared reads.
    BulkWait(u32),
    /// `wait_tokens %t0, %t1` — waits for exactly the copies that produced the tokens.
    WaitTokens(Vec<Value>),
    /// `waitcnt vmcnt(0) lgkmcnt(0)` — AMD counter wait.
    WaitCnt(Vec<(Counter, u32)>),

    // ---- sync ----
    /// `barrier` — block-wide barrier that also orders shared memory (`__syncthreads`,
    /// `s_waitcnt lgkmcnt(0); s_barrier`).
    Barrier,
    /// `warp_sync` — orders shared memory among the threads of one warp/wavefront.
    WarpSync,
    /// `barrier_signal -1` — gfx12 split barrier, signal half.
    SplitSignal(i32),
    /// `barrier_wait -1` — gfx12 split barrier, wait half.
    SplitWait(i32),
    /// `named_arrive 1, 256` — arrive on named barrier `id` expecting `count` threads.
    NamedArrive { id: u32, count: u32 },
    /// `named_sync 1, 256` — arrive on and wait for named barrier `id`.
    NamedSync { id: u32, count: u32 },
    /// `mbar_init @full[%i], 1`
    MbarInit {
        mbar: MemRef,
        index: Vec<Operand>,
        count: u32,
    },
    /// `mbar_arrive @full[%i]` or `mbar_arrive @full[%i] tx 4096` (arrive.expect_tx)
    MbarArrive {
        mbar: MemRef,
        index: Vec<Operand>,
        tx: Option<u32>,
    },
    /// `mbar_expect_tx @full[%i], 4096`
    MbarExpectTx {
        mbar: MemRef,
        index: Vec<Operand>,
        bytes: u32,
    },
    /// `mbar_wait @full[%i], %parity`
    MbarWait {
        mbar: MemRef,
        index: Vec<Operand>,
        parity: Operand,
    },
    /// `mbar_inval @full[%i]`
    MbarInval { mbar: MemRef, index: Vec<Operand> },
    /// `%d0, .. = wgmma @a, @b, %c0, ..` — Hopper warpgroup MMA: async read of the shared
    /// views, one result register per accumulator operand; A may be registers instead
    /// (`wgmma [%a0, ..], @b, %c0, ..`), read at issue and held until a wait (docs/ir.md
    /// section 4).
    Wgmma {
        a: WgmmaA,
        b: MemRef,
        acc: WgmmaAcc,
    },
    /// `wgmma_commit`
    WgmmaCommit,
    /// `wgmma_wait 0`
    WgmmaWait(u32),
    /// `fence_proxy_async` — NVIDIA `fence.proxy.async.shared::cta`: the executing thread's
    /// earlier generic-proxy writes to shared memory become visible to the async proxy
    /// (wgmma operands, TMA) once a sync op publishes them (docs/ir.md section 5).
    FenceProxyAsync,

    // ---- structure ----
    /// `for %k = lo to hi step s iter(%acc = init) { ... yield }` — region 0 is the body;
    /// its arguments are the induction variable then the iteration values.
    For {
        lo: Operand,
        hi: Operand,
        step: Operand,
        init: Vec<Operand>,
    },
    /// `if %c { ... } else { ... }` — regions 0 (then) and 1 (else).
    If { cond: Operand },
    /// `while iter(%x = init) { ...; condition %c } do { ...; yield }` — region 0 computes the
    /// condition, region 1 is the body; both take the iteration values as arguments.
    While { init: Vec<Operand> },
    /// `stage "name" { ... }` — a grouping with no control effect (like scf.execute_region).
    Stage { name: String },
    /// `yield %a, %b` — region terminator carrying the iteration / branch values.
    Yield(Vec<Operand>),
    /// `condition %c` — terminator of a while's condition region.
    Condition(Operand),
}

/// An op: its kind, results, and owned child regions. Both lists are fixed when the op is
/// created ([`super::Kernel::new_op`]), so they are boxed slices: 16 bytes each in the op
/// arena, where a `Vec`'s capacity made them 24 (docs/performance.md, `bytes39`).
#[derive(Clone, Debug, PartialEq)]
pub struct OpData {
    pub kind: OpKind,
    pub results: Box<[Value]>,
    pub regions: Box<[Region]>,
}

/// The accumulator operands of a `wgmma`: one per result register, in the order of the
/// hardware fragment (docs/ir.md section 4). Never empty (the reader and the verifier
/// refuse a wgmma without one). Code that must see every accumulator iterates
/// [`WgmmaAcc::all`]; [`WgmmaAcc::first`] names the one case that wants a single one.
#[derive(Clone, Debug, PartialEq)]
pub struct WgmmaAcc(pub Vec<Operand>);

impl WgmmaAcc {
    /// Every accumulator operand, in register order.
    pub fn all(&self) -> &[Operand] {
        &self.0
    }

    /// The first accumulator (register 0), if any.
    pub fn first(&self) -> Option<&Operand> {
        self.0.first()
    }
}

/// The A operand of a `wgmma`: a shared view, read asynchronously like B, or registers
/// (`[%a0, ..]`, f32 values rounded to B's element type), read when the wgmma is issued and
/// *held* until a `wgmma_wait` completes it (docs/ir.md section 4).
#[derive(Clone, Debug, PartialEq)]
pub enum WgmmaA {
    Shared(MemRef),
    Regs(Vec<Operand>),
}

impl WgmmaA {
    /// The shared view, when A is one.
    pub fn shared(&self) -> Option<MemRef> {
        match self {
            WgmmaA::Shared(m) => Some(*m),
            WgmmaA::Regs(_) => None,
        }
    }

    /// The register operands (empty when A is a shared view).
    pub fn regs(&self) -> &[Operand] {
        match self {
            WgmmaA::Shared(_) => &[],
            WgmmaA::Regs(r) => r,
        }
    }
}

/// Where a value comes from.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum ValueDef {
    /// A scalar kernel parameter (uniform across the grid).
    Param(usize),
    /// Result `n` of an op.
    Result(super::entities::Op, usize),
    /// Argument `n` of a region (loop induction variable, iteration value).
    RegionArg(Region, usize),
}

/// A value: its type and where it is defined.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueData {
    pub ty: ScalarType,
    pub def: ValueDef,
}

/// A shared buffer (or mbarrier array) declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferData {
    pub name: String,
    pub elem: super::types::ElemType,
    pub shape: Vec<u64>,
    /// Byte offset in the block's shared memory, when pinned (pinned buffers may alias).
    pub offset: Option<u64>,
    /// A shared layout (`layout "S"` after the declaration): how elements are placed at
    /// addresses within the buffer (a swizzle or padding; never who touches them).
    pub layout: Option<String>,
}

impl BufferData {
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
    pub fn bytes(&self) -> u64 {
        self.elements() * self.elem.bytes()
    }
}

/// A layout definition: `layout "NAME" = #ttg.blocked<{...}>` (the attribute text verbatim;
/// `ir::layout` decodes it), optionally bound to a thread group: `layout "NAME" in @g = ...`
/// numbers the layout's threads from the group's first thread (a *role-relative* layout;
/// without `= ...` the layout is opaque over the group's threads). docs/ir.md, "Role-relative
/// layouts".
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutDef {
    pub name: String,
    /// The attribute text; `None` for an opaque layout bound to a group.
    pub text: Option<String>,
    /// The thread group whose threads the layout numbers from 0 (`None`: the block's).
    pub group: Option<Group>,
    /// The whole definition.
    pub span: crate::diag::Span,
    /// Where the attribute text starts (its byte offsets are relative to this).
    pub text_span: crate::diag::Span,
}

/// A dimension of a global buffer: a constant or a scalar parameter.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Dim {
    Const(u64),
    Param(Value),
}

/// A global buffer parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalData {
    pub name: String,
    pub elem: super::types::ElemType,
    pub shape: Vec<Dim>,
}

/// A thread group: linear thread ids in `[lo, hi)`.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupData {
    pub name: String,
    pub lo: u32,
    pub hi: u32,
}

/// A kernel parameter in declaration order.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Param {
    Global(Global),
    Scalar(Value),
}

impl OpKind {
    /// Calls `f` on every scalar operand of the op, in the order of
    /// [`OpKind::for_each_operand_mut`], without copying or changing the op (not on region
    /// contents; a view's own indices are in the view table). Token values of `wait_tokens`
    /// are passed as `Operand::Value`s.
    pub fn for_each_operand(&self, mut f: impl FnMut(Operand)) {
        let all = |v: &[Operand], f: &mut dyn FnMut(Operand)| v.iter().for_each(|o| f(*o));
        match self {
            OpKind::Const(_) | OpKind::Special(_) | OpKind::InGroup(_) | OpKind::ViewDef(_) => {}
            OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => {
                f(*a);
                f(*b);
            }
            OpKind::Unary(_, a) | OpKind::Cast(_, a) | OpKind::Condition(a) => f(*a),
            OpKind::Select(c, a, b) => {
                f(*c);
                f(*a);
                f(*b);
            }
            OpKind::Compute { args, .. } | OpKind::Yield(args) => all(args, &mut f),
            OpKind::Load { index, .. } | OpKind::GLoad { index, .. } => all(index, &mut f),
            OpKind::Store { index, value, .. }
            | OpKind::Atomic { index, value, .. }
            | OpKind::GStore { index, value, .. }
            | OpKind::GAtomic { index, value, .. } => {
                all(index, &mut f);
                f(*value);
            }
            OpKind::LocalLoad { .. } => {}
            OpKind::LocalStore { value, .. } => f(*value),
            OpKind::GatherToLds {
                dst_index,
                src_index,
                ..
            }
            | OpKind::CpAsync {
                dst_index,
                src_index,
                ..
            } => {
                all(dst_index, &mut f);
                all(src_index, &mut f);
            }
            OpKind::TdmLoad { origin, .. } | OpKind::TmaStore { origin, .. } => {
                all(origin, &mut f)
            }
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => all(&c.origin, &mut f),
            OpKind::TmaLoad {
                origin, mbar_index, ..
            } => {
                all(origin, &mut f);
                all(mbar_index, &mut f);
            }
            OpKind::WaitTokens(ts) => ts.iter().for_each(|t| f(Operand::Value(*t))),
            OpKind::MbarInit { index, .. }
            | OpKind::MbarArrive { index, .. }
            | OpKind::MbarExpectTx { index, .. }
            | OpKind::MbarInval { index, .. } => all(index, &mut f),
            OpKind::MbarWait { index, parity, .. } => {
                all(index, &mut f);
                f(*parity);
            }
            OpKind::Wgmma { a, acc, .. } => {
                all(a.regs(), &mut f);
                all(acc.all(), &mut f);
            }
            OpKind::For { lo, hi, step, init } => {
                f(*lo);
                f(*hi);
                f(*step);
                all(init, &mut f);
            }
            OpKind::If { cond } => f(*cond),
            OpKind::While { init } => all(init, &mut f),
            OpKind::Stage { .. }
            | OpKind::CpAsyncCommit
            | OpKind::CpAsyncWait(_)
            | OpKind::BulkCommit
            | OpKind::BulkWait(_)
            | OpKind::WaitCnt(_)
            | OpKind::Barrier
            | OpKind::WarpSync
            | OpKind::SplitSignal(_)
            | OpKind::SplitWait(_)
            | OpKind::NamedArrive { .. }
            | OpKind::NamedSync { .. }
            | OpKind::WgmmaCommit
            | OpKind::WgmmaWait(_)
            | OpKind::FenceProxyAsync => {}
        }
    }

    /// Calls `f` on every shared memref the op names directly, in the order of
    /// [`OpKind::for_each_memref_mut`], without changing the op.
    pub fn for_each_memref(&self, mut f: impl FnMut(MemRef)) {
        match self {
            OpKind::Load { mem, .. }
            | OpKind::Store { mem, .. }
            | OpKind::Atomic { mem, .. }
            | OpKind::LocalLoad { mem, .. }
            | OpKind::LocalStore { mem, .. } => f(*mem),
            OpKind::GatherToLds { dst, .. }
            | OpKind::CpAsync { dst, .. }
            | OpKind::TdmLoad { dst, .. } => f(*dst),
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => f(c.dst),
            OpKind::TmaLoad { dst, mbar, .. } => {
                f(*dst);
                f(*mbar);
            }
            OpKind::TmaStore { src, .. } => f(*src),
            OpKind::MbarInit { mbar, .. }
            | OpKind::MbarArrive { mbar, .. }
            | OpKind::MbarExpectTx { mbar, .. }
            | OpKind::MbarWait { mbar, .. }
            | OpKind::MbarInval { mbar, .. } => f(*mbar),
            OpKind::Wgmma { a, b, .. } => {
                if let WgmmaA::Shared(a) = a {
                    f(*a);
                }
                f(*b);
            }
            _ => {}
        }
    }

    /// Calls `f` on every scalar operand of the op (not on region contents). Token values of
    /// `wait_tokens` are included as `Operand::Value`s.
    pub fn for_each_operand_mut(&mut self, f: &mut dyn FnMut(&mut Operand)) {
        let all =
            |v: &mut Vec<Operand>, f: &mut dyn FnMut(&mut Operand)| v.iter_mut().for_each(&mut *f);
        match self {
            OpKind::Const(_) | OpKind::Special(_) | OpKind::InGroup(_) | OpKind::ViewDef(_) => {}
            OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => {
                f(a);
                f(b);
            }
            OpKind::Unary(_, a) | OpKind::Cast(_, a) | OpKind::Condition(a) => f(a),
            OpKind::Select(c, a, b) => {
                f(c);
                f(a);
                f(b);
            }
            OpKind::Compute { args, .. } | OpKind::Yield(args) => all(args, f),
            OpKind::Load { index, .. } | OpKind::GLoad { index, .. } => all(index, f),
            OpKind::Store { index, value, .. }
            | OpKind::Atomic { index, value, .. }
            | OpKind::GStore { index, value, .. }
            | OpKind::GAtomic { index, value, .. } => {
                all(index, f);
                f(value);
            }
            OpKind::LocalLoad { .. } => {}
            OpKind::LocalStore { value, .. } => f(value),
            OpKind::GatherToLds {
                dst_index,
                src_index,
                ..
            }
            | OpKind::CpAsync {
                dst_index,
                src_index,
                ..
            } => {
                all(dst_index, f);
                all(src_index, f);
            }
            OpKind::TdmLoad { origin, .. } | OpKind::TmaStore { origin, .. } => all(origin, f),
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => all(&mut c.origin, f),
            OpKind::TmaLoad {
                origin, mbar_index, ..
            } => {
                all(origin, f);
                all(mbar_index, f);
            }
            OpKind::WaitTokens(ts) => {
                for t in ts.iter_mut() {
                    let mut o = Operand::Value(*t);
                    f(&mut o);
                    if let Operand::Value(v) = o {
                        *t = v;
                    }
                }
            }
            OpKind::MbarInit { index, .. }
            | OpKind::MbarArrive { index, .. }
            | OpKind::MbarExpectTx { index, .. }
            | OpKind::MbarInval { index, .. } => all(index, f),
            OpKind::MbarWait { index, parity, .. } => {
                all(index, f);
                f(parity);
            }
            OpKind::Wgmma { a, acc, .. } => {
                if let WgmmaA::Regs(r) = a {
                    all(r, f);
                }
                all(&mut acc.0, f);
            }
            OpKind::For { lo, hi, step, init } => {
                f(lo);
                f(hi);
                f(step);
                all(init, f);
            }
            OpKind::If { cond } => f(cond),
            OpKind::While { init } => all(init, f),
            OpKind::Stage { .. }
            | OpKind::CpAsyncCommit
            | OpKind::CpAsyncWait(_)
            | OpKind::BulkCommit
            | OpKind::BulkWait(_)
            | OpKind::WaitCnt(_)
            | OpKind::Barrier
            | OpKind::WarpSync
            | OpKind::SplitSignal(_)
            | OpKind::SplitWait(_)
            | OpKind::NamedArrive { .. }
            | OpKind::NamedSync { .. }
            | OpKind::WgmmaCommit
            | OpKind::WgmmaWait(_)
            | OpKind::FenceProxyAsync => {}
        }
    }

    /// Calls `f` on every shared memref the op names directly (views' own bases excluded:
    /// they live in the view table).
    pub fn for_each_memref_mut(&mut self, f: &mut dyn FnMut(&mut MemRef)) {
        match self {
            OpKind::Load { mem, .. }
            | OpKind::Store { mem, .. }
            | OpKind::Atomic { mem, .. }
            | OpKind::LocalLoad { mem, .. }
            | OpKind::LocalStore { mem, .. } => f(mem),
            OpKind::GatherToLds { dst, .. }
            | OpKind::CpAsync { dst, .. }
            | OpKind::TdmLoad { dst, .. } => f(dst),
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => f(&mut c.dst),
            OpKind::TmaLoad { dst, mbar, .. } => {
                f(dst);
                f(mbar);
            }
            OpKind::TmaStore { src, .. } => f(src),
            OpKind::MbarInit { mbar, .. }
            | OpKind::MbarArrive { mbar, .. }
            | OpKind::MbarExpectTx { mbar, .. }
            | OpKind::MbarWait { mbar, .. }
            | OpKind::MbarInval { mbar, .. } => f(mbar),
            OpKind::Wgmma { a, b, .. } => {
                if let WgmmaA::Shared(a) = a {
                    f(a);
                }
                f(b);
            }
            _ => {}
        }
    }

    /// The value operands of the op, in order.
    pub fn value_uses(&self) -> Vec<Value> {
        let mut v = Vec::new();
        self.for_each_operand(|o| v.extend(o.value()));
        v
    }
}
