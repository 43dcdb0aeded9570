//! The structural verifier: checks the IR invariants every pass must preserve, collecting
//! every violation as a diagnostic.
//!
//! Invariants:
//! 1. Placement: each op sits in exactly one region, each region but the body is owned by
//!    exactly one op, no region is reachable from itself.
//! 2. Dominance: an operand is a kernel parameter, a region argument of an enclosing region,
//!    or a result of an earlier op of the same or an enclosing region (a `stage` is
//!    transparent: what it defines dominates the ops after it); views likewise.
//! 3. Types: index and bound operands are i32, conditions i1, stored values match the
//!    element's scalar type, binary operands agree, `wait_tokens` takes tokens.
//! 4. Terminators: `yield` only last in a `for` body, `if` arm or `while` body, with the
//!    values the op's results require; `condition` only last in a `while` condition region.
//! 5. Memory: index counts equal the memref's rank; mbarrier arrays only in mbarrier ops;
//!    pinned offsets aligned to the element size.
//! 6. Sync operands: named barrier ids below 16 and counts in 1..=block threads; groups
//!    inside the block; mbarrier arrival counts at least 1; mbarriers only in shared memory.
//! 7. Limits ([`limits`]): block and grid within the target's launch limits, every shared
//!    buffer (offset plus elements times element size, checked) within its shared memory,
//!    regions nested at most [`limits::MAX_NESTING`] deep, global dimensions given by a
//!    parameter positive at the parameter's run value (E0151). These run before anything recurses
//!    over regions or sizes anything, and a violation stops verification there.
//! 8. Atomics: `and`/`or` only on integers.
//! 9. Role-relative layouts ([`roles`]): a collective access under a layout bound to a thread
//!    group runs only in that group's threads (E1620).
//!
//! Ops are checked by family, and the regions an op must own are its row of the signature
//! table (`ir::signature`). Complexity: O(ops + operands): what is in scope is a
//! `ScopedSet` per entity kind, a membership table by entity id with an undo log, so
//! leaving a region costs what the region defined (a copy of the whole scope per region made
//! a kernel of many loops quadratic).

pub mod limits;
pub mod roles;
pub mod target_ops;

use std::collections::HashSet;

use crate::diag::{DiagKind, Diagnostic, Span};
use crate::ir::*;
use crate::target::Limits;

/// Verifies a kernel against the limits of every target ([`Limits::GENERIC`]), returning every
/// violation found (empty when the kernel is well formed).
pub fn verify(k: &Kernel) -> Vec<Diagnostic> {
    verify_with(k, &Limits::GENERIC)
}

/// Verifies a kernel against the launch and shared-memory limits of one target.
pub fn verify_with(k: &Kernel, lim: &Limits) -> Vec<Diagnostic> {
    let mut v = Verifier {
        k,
        errors: Vec::new(),
        visible: ScopedSet::new(k.values.len()),
        views: ScopedSet::new(k.views.len()),
    };
    v.placement();
    if !v.errors.is_empty() {
        return v.errors;
    }
    v.errors.extend(limits::nesting(k));
    v.errors.extend(limits::launch(k, lim));
    v.errors.extend(limits::shared(k, lim));
    v.errors.extend(limits::global_dims(k));
    if !v.errors.is_empty() {
        return v.errors;
    }
    v.decls();
    for p in &k.params {
        if let Param::Scalar(val) = p {
            v.visible.insert(*val);
        }
    }
    v.region(k.body(), RegionRole::Body, &[]);
    v.errors.extend(roles::check(k));
    v.errors
}

#[derive(Copy, Clone, PartialEq, Debug)]
enum RegionRole {
    Body,
    ForBody,
    IfArm,
    WhileCond,
    WhileBody,
    Stage,
}

struct Verifier<'a> {
    k: &'a Kernel,
    errors: Vec<Diagnostic>,
    visible: ScopedSet<Value>,
    views: ScopedSet<View>,
}

/// The entities of one kind in scope: membership by entity id, and the order they came into
/// scope so that a region's definitions leave it in O(their number). An id past the kernel's
/// tables (a dangling reference) is never in scope.
struct ScopedSet<K> {
    member: Vec<bool>,
    log: Vec<K>,
}

impl<K: EntityRef> ScopedSet<K> {
    fn new(len: usize) -> Self {
        ScopedSet {
            member: vec![false; len],
            log: Vec::new(),
        }
    }

    fn insert(&mut self, k: K) {
        if let Some(m) = self.member.get_mut(k.index())
            && !*m
        {
            *m = true;
            self.log.push(k);
        }
    }

    fn contains(&self, k: K) -> bool {
        self.member.get(k.index()).copied().unwrap_or(false)
    }

    /// A point to come back to with [`ScopedSet::undo`].
    fn mark(&self) -> usize {
        self.log.len()
    }

    /// Takes out of scope everything inserted since `mark`.
    fn undo(&mut self, mark: usize) {
        for k in self.log.drain(mark..) {
            self.member[k.index()] = false;
        }
    }
}

impl Verifier<'_> {
    fn err(&mut self, span: Span, msg: impl Into<String>) {
        let msg = msg.into();
        self.errors.push(
            Diagnostic::error(DiagKind::Verifier, "V0001", msg.clone()).with_label(span, msg),
        );
    }

    fn placement(&mut self) {
        let k = self.k;
        let mut op_seen = vec![0u32; k.ops.len()];
        let mut region_owner = vec![0u32; k.regions().len()];
        for rd in k.regions().values() {
            for &op in rd.ops() {
                op_seen[op.index()] += 1;
            }
        }
        for od in k.ops.values() {
            for &r in &od.regions {
                region_owner[r.index()] += 1;
            }
        }
        // Ops never placed are allowed (dead builder ops) only if nothing refers to them; a
        // placed op must be placed once.
        for (op, n) in op_seen.iter().enumerate() {
            if *n > 1 {
                let op = Op::new(op);
                let name = crate::emit::text::op_label(k, op);
                self.err(k.span(op), format!("{name} is placed in {n} regions"));
            }
        }
        for (r, n) in region_owner.iter().enumerate() {
            let r = Region::new(r);
            if r == k.body() && *n != 0 {
                self.err(k.kernel_span, "the kernel body is owned by an op");
            } else if r != k.body() && *n > 1 {
                self.err(k.kernel_span, format!("{r} is owned by {n} ops"));
            }
        }
        // Cycles: walking from the body must not revisit a region.
        let mut seen = HashSet::new();
        let mut stack = vec![k.body()];
        while let Some(r) = stack.pop() {
            if !seen.insert(r) {
                self.err(
                    k.kernel_span,
                    format!("{r} is reachable twice (cyclic nesting)"),
                );
                return;
            }
            for &op in k.region_ops(r) {
                stack.extend(k.ops[op].regions.iter().copied());
            }
        }
    }

    fn decls(&mut self) {
        let k = self.k;
        let threads = k.threads();
        for (b, bd) in k.buffers.iter() {
            if let Some(off) = bd.offset
                && off % bd.elem.bytes() != 0
            {
                self.err(
                    *k.buffer_spans.get(b),
                    format!(
                        "offset {off} of @{} is not aligned to {} bytes",
                        bd.name,
                        bd.elem.bytes()
                    ),
                );
            }
        }
        for (g, gd) in k.globals.iter() {
            if gd.elem == ElemType::MBarrier {
                let msg = format!(
                    "global %{} holds mbarriers, which live in shared memory",
                    gd.name
                );
                self.user_err("E0166", *k.global_spans.get(g), msg);
            }
        }
        for (gid, g) in k.groups.iter() {
            if g.hi > threads {
                let span = *k.group_spans.get(gid);
                self.err(
                    if span.is_undef() { k.kernel_span } else { span },
                    format!(
                        "group @{} ends at thread {} but the block has {threads} threads",
                        g.name, g.hi
                    ),
                );
            }
        }
    }

    /// A user-input violation with its own code (not a broken pass invariant).
    fn user_err(&mut self, code: &'static str, span: Span, msg: impl Into<String>) {
        let msg = msg.into();
        self.errors
            .push(Diagnostic::user(code, msg.clone()).with_label(span, msg));
    }

    fn ty(&self, o: &Operand) -> ScalarType {
        match o {
            Operand::Value(v) => self.k.values[*v].ty,
            Operand::Imm(s) => s.ty(),
        }
    }

    fn use_op(&mut self, span: Span, o: &Operand, want: Option<ScalarType>) {
        if let Operand::Value(v) = o
            && !self.visible.contains(*v)
        {
            self.err(
                span,
                format!(
                    "{} is used where its definition does not dominate",
                    self.k.value_name(*v)
                ),
            );
        }
        if let Some(t) = want {
            let have = self.ty(o);
            if have != t {
                self.err(span, format!("expected a {t} operand, found {have}"));
            }
        }
    }

    fn use_mem(&mut self, span: Span, m: MemRef, index: Option<&[Operand]>, data: bool) {
        if let MemRef::View(v) = m
            && !self.views.contains(v)
        {
            self.err(
                span,
                format!("view {v} is used where its definition does not dominate"),
            );
        }
        let elem = self.k.elem(m);
        if data && elem == ElemType::MBarrier {
            self.err(span, "data access to an mbarrier array");
        }
        if !data && elem != ElemType::MBarrier {
            self.err(span, "mbarrier op on a data buffer");
        }
        if let Some(ix) = index {
            let rank = self.k.rank(m);
            if ix.len() != rank {
                self.err(
                    span,
                    format!("memref of rank {rank} indexed with {} indices", ix.len()),
                );
            }
            for o in ix {
                self.use_op(span, o, Some(ScalarType::I32));
            }
        }
    }

    fn use_global(&mut self, span: Span, g: Global, index: &[Operand], tile: bool) {
        let rank = self.k.globals[g].shape.len();
        if (!tile && index.len() != rank) || (tile && index.len() != rank) {
            self.err(
                span,
                format!("global of rank {rank} indexed with {} indices", index.len()),
            );
        }
        for o in index {
            self.use_op(span, o, Some(ScalarType::I32));
        }
    }

    fn scalar_of(&self, m: MemRef) -> Option<ScalarType> {
        self.k.elem(m).scalar()
    }

    fn region(&mut self, r: Region, role: RegionRole, want_yield: &[ScalarType]) {
        let k = self.k;
        let saved_vals = self.visible.mark();
        let saved_views = self.views.mark();
        for &a in k.region_args(r) {
            self.visible.insert(a);
        }
        let ops = k.region_ops(r);
        for (i, &op) in ops.iter().enumerate() {
            let last = i + 1 == ops.len();
            self.op(op, role, last, want_yield);
        }
        let needs_term = match role {
            RegionRole::WhileCond => true,
            RegionRole::ForBody | RegionRole::IfArm | RegionRole::WhileBody => {
                !want_yield.is_empty()
            }
            _ => false,
        };
        if needs_term {
            let ok = ops.last().is_some_and(|&l| match (&k.ops[l].kind, role) {
                (OpKind::Condition(_), RegionRole::WhileCond) => true,
                (OpKind::Yield(_), RegionRole::WhileCond) => false,
                (OpKind::Yield(_), _) => true,
                _ => false,
            });
            if !ok {
                let span = ops.last().map_or(k.kernel_span, |&l| k.span(l));
                let what = if role == RegionRole::WhileCond {
                    "`condition`"
                } else {
                    "`yield`"
                };
                self.err(span, format!("region must end with {what}"));
            }
        }
        // A stage runs once, in place: its definitions dominate what follows it.
        if role != RegionRole::Stage {
            self.visible.undo(saved_vals);
            self.views.undo(saved_views);
        }
    }

    fn op(&mut self, op: Op, role: RegionRole, last: bool, want_yield: &[ScalarType]) {
        let k = self.k;
        let od = &k.ops[op];
        let s = k.span(op);
        let sig = od.kind.signature();
        match sig.family {
            Family::Value | Family::View => match &od.kind {
                OpKind::Const(_) | OpKind::Special(_) | OpKind::InGroup(_) => {}
                OpKind::Unary(_, a) => self.use_op(s, a, None),
                _ => self.scalar_op(op),
            },
            Family::Access => self.access_op(op),
            Family::Copy | Family::Wgmma => self.async_op(op),
            Family::Wait if sig.code == OpCode::WaitTokens => self.async_op(op),
            Family::Wait if sig.code == OpCode::WaitCnt => self.sync_op(op),
            Family::Barrier | Family::Mbarrier => self.sync_op(op),
            Family::Wait => {}
            Family::Terminator => self.terminator_op(op, role, last, want_yield),
            Family::Region => self.control_op(op),
        }
        if !od.regions.is_empty() && sig.family != Family::Region {
            self.err(s, "only for, if, while and stage own regions");
        }
        for &r in &od.results {
            self.visible.insert(r);
        }
    }

    /// Arithmetic, selects, casts, computes and views: operand types.
    fn scalar_op(&mut self, op: Op) {
        use ScalarType as T;
        let k = self.k;
        let od = &k.ops[op];
        let s = k.span(op);
        match &od.kind {
            OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => {
                self.use_op(s, a, None);
                self.use_op(s, b, None);
                if self.ty(a) != self.ty(b) {
                    self.err(s, "operands have different types");
                }
            }
            OpKind::Select(c, a, b) => {
                self.use_op(s, c, Some(T::I1));
                self.use_op(s, a, None);
                self.use_op(s, b, None);
                if self.ty(a) != self.ty(b) {
                    self.err(s, "select arms have different types");
                }
            }
            OpKind::Cast(c, a) => {
                let want = if *c == CastOp::IToF { T::I32 } else { T::F32 };
                self.use_op(s, a, Some(want));
            }
            OpKind::Compute { args, .. } => {
                for a in args {
                    self.use_op(s, a, None);
                }
            }
            OpKind::ViewDef(v) => {
                let vd = &k.views[*v];
                self.use_mem(s, vd.base, None, true);
                for ix in &vd.indices {
                    if let ViewIndex::At(o) = ix {
                        self.use_op(s, o, Some(T::I32));
                    }
                }
                self.views.insert(*v);
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// Shared and global accesses: memrefs, indices and stored value types.
    fn access_op(&mut self, op: Op) {
        let k = self.k;
        let od = &k.ops[op];
        let s = k.span(op);
        match &od.kind {
            OpKind::Load { mem, index } => self.use_mem(s, *mem, Some(index), true),
            OpKind::Atomic {
                op: aop,
                mem,
                index,
                value,
            } => {
                self.use_mem(s, *mem, Some(index), true);
                let t = self.scalar_of(*mem);
                self.use_op(s, value, t);
                self.atomic_kind(s, *aop, t);
            }
            OpKind::Store { mem, index, value } => {
                self.use_mem(s, *mem, Some(index), true);
                let t = self.scalar_of(*mem);
                self.use_op(s, value, t);
            }
            OpKind::LocalLoad { mem, .. } => self.use_mem(s, *mem, None, true),
            OpKind::LocalStore { mem, value, .. } => {
                self.use_mem(s, *mem, None, true);
                let t = self.scalar_of(*mem);
                self.use_op(s, value, t);
            }
            OpKind::GLoad { global, index } => self.use_global(s, *global, index, false),
            OpKind::GStore {
                global,
                index,
                value,
            } => {
                self.use_global(s, *global, index, false);
                let t = k.globals[*global].elem.scalar();
                self.use_op(s, value, t);
            }
            OpKind::GAtomic {
                op: aop,
                global,
                index,
                value,
            } => {
                self.use_global(s, *global, index, false);
                let t = k.globals[*global].elem.scalar();
                self.use_op(s, value, t);
                self.atomic_kind(s, *aop, t);
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// Async copies, TMA, wgmma and token waits: their operands.
    fn async_op(&mut self, op: Op) {
        use ScalarType as T;
        let k = self.k;
        let od = &k.ops[op];
        let s = k.span(op);
        match &od.kind {
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
                self.use_mem(s, *dst, Some(dst_index), true);
                self.use_global(s, *src, src_index, false);
            }
            OpKind::TdmLoad { dst, src, origin } => {
                self.use_mem(s, *dst, None, true);
                self.use_global(s, *src, origin, true);
            }
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => {
                self.use_mem(s, c.dst, None, true);
                self.use_global(s, c.src, &c.origin, true);
            }
            OpKind::TmaLoad {
                dst,
                src,
                origin,
                mbar,
                mbar_index,
            } => {
                self.use_mem(s, *dst, None, true);
                self.use_global(s, *src, origin, true);
                self.use_mem(s, *mbar, Some(mbar_index), false);
            }
            OpKind::TmaStore { dst, origin, src } => {
                self.use_mem(s, *src, None, true);
                self.use_global(s, *dst, origin, true);
            }
            OpKind::Wgmma { a, b, acc } => {
                match a {
                    WgmmaA::Shared(a) => self.use_mem(s, *a, None, true),
                    WgmmaA::Regs(r) => {
                        for v in r {
                            self.use_op(s, v, Some(T::F32));
                        }
                    }
                }
                self.use_mem(s, *b, None, true);
                for c in acc.all() {
                    self.use_op(s, c, Some(T::F32));
                }
            }
            OpKind::WaitTokens(ts) => {
                for t in ts {
                    self.use_op(s, &Operand::Value(*t), Some(T::Token));
                }
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// Counter waits, named barriers and mbarriers: ids, counts and slots.
    fn sync_op(&mut self, op: Op) {
        use ScalarType as T;
        let k = self.k;
        let od = &k.ops[op];
        let s = k.span(op);
        match &od.kind {
            OpKind::WaitCnt(cs) if cs.is_empty() => self.err(s, "waitcnt names no counter"),
            OpKind::NamedArrive { id, count } | OpKind::NamedSync { id, count } => {
                if *id >= 16 {
                    self.err(s, format!("named barrier id {id} is out of range (0..16)"));
                }
                if *count == 0 || *count > k.threads() {
                    self.err(
                        s,
                        format!("named barrier count {count} must be in 1..={}", k.threads()),
                    );
                }
            }
            OpKind::MbarInit { mbar, index, count } => {
                self.use_mem(s, *mbar, Some(index), false);
                if *count == 0 {
                    let msg = "an mbarrier needs an arrival count of at least 1";
                    self.user_err("E0168", s, msg);
                }
            }
            OpKind::MbarArrive { mbar, index, .. }
            | OpKind::MbarExpectTx { mbar, index, .. }
            | OpKind::MbarInval { mbar, index } => self.use_mem(s, *mbar, Some(index), false),
            OpKind::MbarWait {
                mbar,
                index,
                parity,
            } => {
                self.use_mem(s, *mbar, Some(index), false);
                self.use_op(s, parity, Some(T::I32));
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// `yield` and `condition`: where they may stand and what they carry.
    fn terminator_op(&mut self, op: Op, role: RegionRole, last: bool, want_yield: &[ScalarType]) {
        use ScalarType as T;
        let k = self.k;
        let od = &k.ops[op];
        let s = k.span(op);
        match &od.kind {
            OpKind::Yield(vals) => {
                let allowed = matches!(
                    role,
                    RegionRole::ForBody | RegionRole::IfArm | RegionRole::WhileBody
                );
                if !allowed || !last {
                    self.err(s, "`yield` must be the last op of a loop body or `if` arm");
                }
                for v in vals {
                    self.use_op(s, v, None);
                }
                let tys: Vec<ScalarType> = vals.iter().map(|v| self.ty(v)).collect();
                if tys != want_yield {
                    self.err(
                        s,
                        format!(
                            "`yield` carries ({}) but the enclosing op expects ({})",
                            type_list(&tys),
                            type_list(want_yield)
                        ),
                    );
                }
            }
            OpKind::Condition(c) => {
                if role != RegionRole::WhileCond || !last {
                    self.err(
                        s,
                        "`condition` must be the last op of a while condition region",
                    );
                }
                self.use_op(s, c, Some(T::I1));
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// `for`, `if`, `while` and `stage`: their regions, region arguments and results.
    fn control_op(&mut self, op: Op) {
        use ScalarType as T;
        let k = self.k;
        let od = &k.ops[op];
        let s = k.span(op);
        match &od.kind {
            OpKind::For { lo, hi, step, init } => {
                self.use_op(s, lo, Some(T::I32));
                self.use_op(s, hi, Some(T::I32));
                self.use_op(s, step, Some(T::I32));
                for i in init {
                    self.use_op(s, i, None);
                }
                let tys: Vec<ScalarType> = init.iter().map(|i| self.ty(i)).collect();
                if self.owns_its_regions(op) {
                    let body = od.regions[0];
                    let args = k.region_args(body);
                    let argt: Vec<ScalarType> = args.iter().map(|a| k.values[*a].ty).collect();
                    if argt.first() != Some(&T::I32) || argt[1..] != tys[..] {
                        self.err(s, "loop region arguments do not match the induction variable and iteration values");
                    }
                    self.result_types(op, &tys);
                    self.region(body, RegionRole::ForBody, &tys);
                }
            }
            OpKind::If { cond } => {
                self.use_op(s, cond, Some(T::I1));
                if self.owns_its_regions(op) {
                    let tys: Vec<ScalarType> = od.results.iter().map(|v| k.values[*v].ty).collect();
                    self.region(od.regions[0], RegionRole::IfArm, &tys);
                    self.region(od.regions[1], RegionRole::IfArm, &tys);
                }
            }
            OpKind::While { init } => {
                for i in init {
                    self.use_op(s, i, None);
                }
                let tys: Vec<ScalarType> = init.iter().map(|i| self.ty(i)).collect();
                if self.owns_its_regions(op) {
                    self.result_types(op, &tys);
                    self.region(od.regions[0], RegionRole::WhileCond, &[]);
                    self.region(od.regions[1], RegionRole::WhileBody, &tys);
                }
            }
            OpKind::Stage { .. } if self.owns_its_regions(op) => {
                self.region(od.regions[0], RegionRole::Stage, &[]);
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// Whether `op` owns as many regions as its signature says; reports it when not.
    fn owns_its_regions(&mut self, op: Op) -> bool {
        let od = &self.k.ops[op];
        let sig = od.kind.signature();
        if od.regions.len() == sig.regions {
            return true;
        }
        let n = if sig.regions == 1 { "one region" } else { "two regions" };
        self.err(self.k.span(op), format!("`{}` must own {n}", sig.mnemonic));
        false
    }

    /// Bitwise atomics (`and`, `or`) take integers only.
    fn atomic_kind(&mut self, s: Span, op: AtomicOp, t: Option<ScalarType>) {
        if matches!(op, AtomicOp::And | AtomicOp::Or) && t == Some(ScalarType::F32) {
            let msg = format!(
                "`atomic {}` is bitwise and takes integers, not f32",
                op.name()
            );
            self.user_err("E0167", s, msg);
        }
    }

    fn result_types(&mut self, op: Op, tys: &[ScalarType]) {
        let k = self.k;
        let have: Vec<ScalarType> = k.ops[op].results.iter().map(|v| k.values[*v].ty).collect();
        if have != tys {
            self.err(k.span(op), "op results do not match its iteration values");
        }
    }
}

fn type_list(tys: &[ScalarType]) -> String {
    tys.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}
