//! The op signature table: for every [`OpKind`], one row saying how the op is spelled and what
//! it takes — mnemonic, operand slots, results, regions, attributes, effect class and the
//! target feature it needs.
//!
//! The reader, the verifier, the printer and the emitters consult this table instead of each
//! spelling out mnemonics, region counts and target availability: adding an op means one row
//! here plus its semantics (`ir::effects`, the interpreter, the emitters' lowering). The row
//! order is [`OpCode`]'s; a unit test checks that every row sits at its code's index and that
//! every spelling finds its row again.
//!
//! Invariants: [`OpKind::code`] and [`signature`] agree with this table; the spellings of the
//! ops named by their sub-kind (`add`, `neg`, `itof`, `tid.x`) come from [`BinOp`], [`UnOp`],
//! [`CastOp`] and [`Special`], and no spelling belongs to two rows. The effect class is a
//! coarse summary for dispatch and documentation: `ir::effects` stays the one source of what
//! an op reads, writes and orders. Complexity: [`signature`] O(1), [`lookup`] O(rows).
//! Reference: the instruction-definition tables of Cranelift (`cranelift/codegen/meta`), which
//! generate the builder, verifier and printer facts from one description per instruction.

use super::ops::{BinOp, CastOp, OpKind, Special, UnOp};

/// One operand slot of an op's text form, in order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// One scalar operand (`%x` or an immediate typed by the op's rule).
    Scalar,
    /// A comma-separated list of scalar operands (any count, possibly none).
    Scalars,
    /// A word naming the op's sub-kind (`cmp lt`, `atomic add`).
    Word,
    /// A shared buffer or view (`@a`, `%v`): the whole memref.
    Shared,
    /// A shared memref and one i32 index per dimension (`@a[%i, %j]`).
    SharedIndex,
    /// A view's base and indices (`@a[%s, 0:16]`).
    ViewIndices,
    /// A global buffer and one i32 index (or tile origin) per dimension (`%A[%i]`).
    GlobalIndex,
    /// An mbarrier element (`@full[%s]`).
    MbarIndex,
    /// The A operand of a wgmma: a shared memref or registers `[%a0, ..]`.
    WgmmaA,
    /// Token values (`wait_tokens %t0, %t1`).
    Tokens,
    /// Counters with counts (`vmcnt(0) lgkmcnt(0)`).
    Counters,
    /// A thread group (`@producers`).
    Group,
    /// An integer literal (a count, an id, a byte count).
    Literal,
    /// A string literal (a compute's or a stage's name).
    Name,
    /// A loop header: `%k = lo to hi step s`.
    LoopBounds,
    /// Iteration values `iter(%x = init, ..)`.
    IterArgs,
}

/// How many results an op defines.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Results {
    None,
    One,
    /// One (a token or an atomic's old value) when the text binds a name, else none.
    Optional,
    /// One f32 per accumulator operand (`wgmma`).
    PerAccumulator,
    /// The types listed after `:` (`compute`).
    Declared,
    /// One per value carried by the terminators of its regions (`for`, `if`, `while`).
    Carried,
    /// A view, not a value (`view`).
    View,
}

/// The op families that the reader, the verifier and the emitters dispatch on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Constants, arithmetic, thread ids, groups and opaque computes.
    Value,
    /// View definitions.
    View,
    /// Per-thread and collective shared and global accesses.
    Access,
    /// Async copies global -> shared and TMA stores.
    Copy,
    /// Commits and waits of async groups, tokens and counters, and proxy fences.
    Wait,
    /// Block, warp, split and named barriers.
    Barrier,
    /// mbarrier init, arrive, expect, wait and invalidate.
    Mbarrier,
    /// Warpgroup MMA and its commits and waits.
    Wgmma,
    /// Region terminators (`yield`, `condition`).
    Terminator,
    /// Ops owning regions (`for`, `if`, `while`, `stage`).
    Region,
}

/// A coarse summary of an op's effects (`ir::effects` gives the exact ones).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EffectClass {
    /// No memory effect and no ordering.
    Pure,
    /// Reads or writes shared memory by the executing threads.
    Shared,
    /// Reads or writes global memory only.
    Global,
    /// Starts an async access of shared memory (a copy engine or wgmma).
    Async,
    /// Closes or waits for async groups, tokens or counters.
    Completion,
    /// Orders threads (barriers, mbarriers) or proxies (fences).
    Sync,
    /// Control flow: its effects are its regions'.
    Control,
}

/// The target feature an op needs (`verify::target_ops` says which targets have which).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// Every target.
    Everywhere,
    /// NVIDIA `cp.async` (sm_80 and later).
    CpAsync,
    /// AMD global-load-to-LDS (gfx942, gfx950, gfx1250).
    GatherToLds,
    /// AMD tensor data mover (gfx1250).
    TensorDma,
    /// NVIDIA TMA and bulk groups (sm_90).
    Tma,
    /// NVIDIA mbarriers (sm_90).
    Mbarrier,
    /// NVIDIA warpgroup MMA (sm_90).
    Wgmma,
    /// NVIDIA async-proxy fences (sm_90).
    ProxyFence,
    /// gfx12 split barriers.
    SplitBarriers,
    /// Named barriers (ids below the target's count).
    NamedBarriers,
    /// AMD counter waits (which counters depends on the generation).
    CounterWaits,
}

/// How the op's first word is found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// The row's mnemonic.
    Word,
    /// A [`BinOp`] name (`add`, `shl`, ..).
    BinOp,
    /// A [`UnOp`] name (`neg`, `sqrt`, ..).
    UnOp,
    /// A [`CastOp`] name (`itof`, `ftoi`).
    CastOp,
    /// A [`Special`] register name (`tid.x`, `lane`, ..).
    Special,
}

/// One row of the table.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub code: OpCode,
    /// The op's word in the text form; for the ops spelled by their sub-kind, the family
    /// name used in documentation (`binary`, `unary`, `cast`, `special`).
    pub mnemonic: &'static str,
    pub spelling: Spelling,
    pub family: Family,
    /// The operand slots of the text form, in order (after any result names and `=`).
    pub operands: &'static [Slot],
    pub results: Results,
    /// How many regions the op owns.
    pub regions: usize,
    /// Optional words after the operands (`layout "L"`, `masked`, `tx N`, `step s`).
    pub attributes: &'static [&'static str],
    pub effects: EffectClass,
    pub needs: Feature,
}

macro_rules! op_table {
    ($($code:ident => $mn:literal, $sp:ident, $fam:ident, [$($slot:ident),*], $res:ident,
       $regions:literal, [$($attr:literal),*], $eff:ident, $feat:ident;)*) => {
        /// The kind of an op without its operands: one per [`OpKind`] variant, in the order
        /// of the table's rows.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum OpCode { $($code),* }

        /// Every row, indexed by [`OpCode`].
        pub static TABLE: &[Signature] = &[$(Signature {
            code: OpCode::$code,
            mnemonic: $mn,
            spelling: Spelling::$sp,
            family: Family::$fam,
            operands: &[$(Slot::$slot),*],
            results: Results::$res,
            regions: $regions,
            attributes: &[$($attr),*],
            effects: EffectClass::$eff,
            needs: Feature::$feat,
        }),*];
    };
}

op_table! {
    // code => mnemonic, spelling, family, operands, results, regions, attributes, effects, needs
    Const => "const", Word, Value, [Literal], One, 0, [":"], Pure, Everywhere;
    Special => "special", Special, Value, [], One, 0, [], Pure, Everywhere;
    Binary => "binary", BinOp, Value, [Scalar, Scalar], One, 0, [], Pure, Everywhere;
    Unary => "unary", UnOp, Value, [Scalar], One, 0, [], Pure, Everywhere;
    Cmp => "cmp", Word, Value, [Word, Scalar, Scalar], One, 0, [], Pure, Everywhere;
    Select => "select", Word, Value, [Scalar, Scalar, Scalar], One, 0, [], Pure, Everywhere;
    Cast => "cast", CastOp, Value, [Scalar], One, 0, [], Pure, Everywhere;
    InGroup => "in_group", Word, Value, [Group], One, 0, [], Pure, Everywhere;
    Compute => "compute", Word, Value, [Name, Scalars], Declared, 0, [":"], Pure, Everywhere;
    ViewDef => "view", Word, View, [ViewIndices], View, 0, [], Pure, Everywhere;
    Load => "load", Word, Access, [SharedIndex], One, 0, [], Shared, Everywhere;
    Store => "store", Word, Access, [SharedIndex, Scalar], None, 0, [], Shared, Everywhere;
    Atomic => "atomic", Word, Access, [Word, SharedIndex, Scalar], Optional, 0, [], Shared,
        Everywhere;
    LocalLoad => "local_load", Word, Access, [Shared], One, 0, ["layout"], Shared, Everywhere;
    LocalStore => "local_store", Word, Access, [Shared, Scalar], None, 0, ["layout"], Shared,
        Everywhere;
    GLoad => "gload", Word, Access, [GlobalIndex], One, 0, [], Global, Everywhere;
    GStore => "gstore", Word, Access, [GlobalIndex, Scalar], None, 0, [], Global, Everywhere;
    GAtomic => "gatomic", Word, Access, [Word, GlobalIndex, Scalar], Optional, 0, [], Global,
        Everywhere;
    GatherToLds => "gather_to_lds", Word, Copy, [SharedIndex, GlobalIndex], Optional, 0, [],
        Async, GatherToLds;
    TdmLoad => "tdm_load", Word, Copy, [Shared, GlobalIndex], Optional, 0, [], Async, TensorDma;
    CpAsync => "cp_async", Word, Copy, [SharedIndex, GlobalIndex], Optional, 0, [], Async,
        CpAsync;
    CpAsyncCommit => "cp_async_commit", Word, Wait, [], None, 0, [], Completion, CpAsync;
    CpAsyncTile => "cp_async_tile", Word, Copy, [Shared, GlobalIndex], Optional, 0,
        ["layout", "masked"], Async, CpAsync;
    GatherToLdsTile => "gather_to_lds_tile", Word, Copy, [Shared, GlobalIndex], Optional, 0,
        ["layout", "masked"], Async, GatherToLds;
    CpAsyncWait => "cp_async_wait", Word, Wait, [Literal], None, 0, [], Completion, CpAsync;
    TmaLoad => "tma_load", Word, Copy, [Shared, GlobalIndex, MbarIndex], Optional, 0, [], Async,
        Tma;
    TmaStore => "tma_store", Word, Copy, [GlobalIndex, Shared], None, 0, [], Async, Tma;
    BulkCommit => "bulk_commit", Word, Wait, [], None, 0, [], Completion, Tma;
    BulkWait => "bulk_wait", Word, Wait, [Literal], None, 0, [], Completion, Tma;
    WaitTokens => "wait_tokens", Word, Wait, [Tokens], None, 0, [], Completion, Everywhere;
    WaitCnt => "waitcnt", Word, Wait, [Counters], None, 0, [], Completion, CounterWaits;
    Barrier => "barrier", Word, Barrier, [], None, 0, [], Sync, Everywhere;
    WarpSync => "warp_sync", Word, Barrier, [], None, 0, [], Sync, Everywhere;
    SplitSignal => "barrier_signal", Word, Barrier, [Literal], None, 0, [], Sync, SplitBarriers;
    SplitWait => "barrier_wait", Word, Barrier, [Literal], None, 0, [], Sync, SplitBarriers;
    NamedArrive => "named_arrive", Word, Barrier, [Literal, Literal], None, 0, [], Sync,
        NamedBarriers;
    NamedSync => "named_sync", Word, Barrier, [Literal, Literal], None, 0, [], Sync,
        NamedBarriers;
    MbarInit => "mbar_init", Word, Mbarrier, [MbarIndex, Literal], None, 0, [], Sync, Mbarrier;
    MbarArrive => "mbar_arrive", Word, Mbarrier, [MbarIndex], None, 0, ["tx"], Sync, Mbarrier;
    MbarExpectTx => "mbar_expect_tx", Word, Mbarrier, [MbarIndex, Literal], None, 0, [], Sync,
        Mbarrier;
    MbarWait => "mbar_wait", Word, Mbarrier, [MbarIndex, Scalar], None, 0, [], Sync, Mbarrier;
    MbarInval => "mbar_inval", Word, Mbarrier, [MbarIndex], None, 0, [], Sync, Mbarrier;
    Wgmma => "wgmma", Word, Wgmma, [WgmmaA, Shared, Scalars], PerAccumulator, 0, [], Async,
        Wgmma;
    WgmmaCommit => "wgmma_commit", Word, Wgmma, [], None, 0, [], Completion, Wgmma;
    WgmmaWait => "wgmma_wait", Word, Wgmma, [Literal], None, 0, [], Completion, Wgmma;
    FenceProxyAsync => "fence_proxy_async", Word, Wait, [], None, 0, [], Sync, ProxyFence;
    For => "for", Word, Region, [LoopBounds, IterArgs], Carried, 1, ["step", "iter"], Control,
        Everywhere;
    If => "if", Word, Region, [Scalar], Carried, 2, ["else"], Control, Everywhere;
    While => "while", Word, Region, [IterArgs], Carried, 2, ["do"], Control, Everywhere;
    Stage => "stage", Word, Region, [Name], None, 1, [], Control, Everywhere;
    Yield => "yield", Word, Terminator, [Scalars], None, 0, [], Control, Everywhere;
    Condition => "condition", Word, Terminator, [Scalar], None, 0, [], Control, Everywhere;
}

/// The row of an op code.
pub fn signature(code: OpCode) -> &'static Signature {
    &TABLE[code as usize]
}

/// The op code whose text starts with `word`, if any (`add` → [`OpCode::Binary`], `tid.x` →
/// [`OpCode::Special`]).
pub fn lookup(word: &str) -> Option<OpCode> {
    if BinOp::from_name(word).is_some() {
        return Some(OpCode::Binary);
    }
    if UnOp::from_name(word).is_some() {
        return Some(OpCode::Unary);
    }
    if CastOp::from_name(word).is_some() {
        return Some(OpCode::Cast);
    }
    if Special::from_name(word).is_some() {
        return Some(OpCode::Special);
    }
    TABLE
        .iter()
        .find(|s| s.spelling == Spelling::Word && s.mnemonic == word)
        .map(|s| s.code)
}

impl OpKind {
    /// The op's code (its variant without operands).
    pub fn code(&self) -> OpCode {
        use OpCode as C;
        match self {
            OpKind::Const(_) => C::Const,
            OpKind::Special(_) => C::Special,
            OpKind::Binary(..) => C::Binary,
            OpKind::Unary(..) => C::Unary,
            OpKind::Cmp(..) => C::Cmp,
            OpKind::Select(..) => C::Select,
            OpKind::Cast(..) => C::Cast,
            OpKind::InGroup(_) => C::InGroup,
            OpKind::Compute { .. } => C::Compute,
            OpKind::ViewDef(_) => C::ViewDef,
            OpKind::Load { .. } => C::Load,
            OpKind::Store { .. } => C::Store,
            OpKind::Atomic { .. } => C::Atomic,
            OpKind::LocalLoad { .. } => C::LocalLoad,
            OpKind::LocalStore { .. } => C::LocalStore,
            OpKind::GLoad { .. } => C::GLoad,
            OpKind::GStore { .. } => C::GStore,
            OpKind::GAtomic { .. } => C::GAtomic,
            OpKind::GatherToLds { .. } => C::GatherToLds,
            OpKind::TdmLoad { .. } => C::TdmLoad,
            OpKind::CpAsync { .. } => C::CpAsync,
            OpKind::CpAsyncCommit => C::CpAsyncCommit,
            OpKind::CpAsyncTile(_) => C::CpAsyncTile,
            OpKind::GatherToLdsTile(_) => C::GatherToLdsTile,
            OpKind::CpAsyncWait(_) => C::CpAsyncWait,
            OpKind::TmaLoad { .. } => C::TmaLoad,
            OpKind::TmaStore { .. } => C::TmaStore,
            OpKind::BulkCommit => C::BulkCommit,
            OpKind::BulkWait(_) => C::BulkWait,
            OpKind::WaitTokens(_) => C::WaitTokens,
            OpKind::WaitCnt(_) => C::WaitCnt,
            OpKind::Barrier => C::Barrier,
            OpKind::WarpSync => C::WarpSync,
            OpKind::SplitSignal(_) => C::SplitSignal,
            OpKind::SplitWait(_) => C::SplitWait,
            OpKind::NamedArrive { .. } => C::NamedArrive,
            OpKind::NamedSync { .. } => C::NamedSync,
            OpKind::MbarInit { .. } => C::MbarInit,
            OpKind::MbarArrive { .. } => C::MbarArrive,
            OpKind::MbarExpectTx { .. } => C::MbarExpectTx,
            OpKind::MbarWait { .. } => C::MbarWait,
            OpKind::MbarInval { .. } => C::MbarInval,
            OpKind::Wgmma { .. } => C::Wgmma,
            OpKind::WgmmaCommit => C::WgmmaCommit,
            OpKind::WgmmaWait(_) => C::WgmmaWait,
            OpKind::FenceProxyAsync => C::FenceProxyAsync,
            OpKind::For { .. } => C::For,
            OpKind::If { .. } => C::If,
            OpKind::While { .. } => C::While,
            OpKind::Stage { .. } => C::Stage,
            OpKind::Yield(_) => C::Yield,
            OpKind::Condition(_) => C::Condition,
        }
    }

    /// The op's row of the signature table.
    pub fn signature(&self) -> &'static Signature {
        signature(self.code())
    }

    /// Whether the op only computes values: no memory effect, no ordering, no regions (its
    /// row's effect class is [`EffectClass::Pure`]: constants, arithmetic, thread ids, group
    /// tests, opaque computes, views).
    pub fn is_pure(&self) -> bool {
        self.signature().effects == EffectClass::Pure
    }

    /// The word that starts the op's text (`load`, `add`, `tid.x`).
    pub fn mnemonic(&self) -> &'static str {
        match self {
            OpKind::Binary(b, ..) => b.name(),
            OpKind::Unary(u, _) => u.name(),
            OpKind::Cast(c, _) => c.name(),
            OpKind::Special(s) => s.name(),
            _ => self.signature().mnemonic,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sit_at_their_codes() {
        for (i, s) in TABLE.iter().enumerate() {
            assert_eq!(s.code as usize, i, "row {} out of place", s.mnemonic);
        }
    }

    #[test]
    fn every_spelling_finds_its_row_once() {
        let mut words: Vec<&str> = TABLE
            .iter()
            .filter(|s| s.spelling == Spelling::Word)
            .map(|s| s.mnemonic)
            .collect();
        for s in TABLE.iter().filter(|s| s.spelling == Spelling::Word) {
            assert_eq!(lookup(s.mnemonic), Some(s.code));
        }
        words.extend(BinOp::ALL.iter().map(|b| b.name()));
        words.extend(UnOp::ALL.iter().map(|u| u.name()));
        words.extend(CastOp::ALL.iter().map(|c| c.name()));
        let n = words.len();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), n, "a word spells two ops");
        assert_eq!(lookup("shl"), Some(OpCode::Binary));
        assert_eq!(lookup("tid.linear"), Some(OpCode::Special));
        assert_eq!(lookup("sqrt"), Some(OpCode::Unary));
        assert_eq!(lookup("ftoi"), Some(OpCode::Cast));
        assert_eq!(lookup("nonsense"), None);
    }

    #[test]
    fn only_region_ops_own_regions() {
        for s in TABLE {
            assert_eq!(s.regions > 0, s.family == Family::Region, "{}", s.mnemonic);
        }
    }
}
