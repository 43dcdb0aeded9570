//! The kernel: arenas of ops, regions, values, views and buffers, plus side tables for
//! names and source spans.
//!
//! Invariants (checked by `verify`): every op sits in exactly one region; every region except
//! the kernel body is owned by exactly one op; a value is defined once and used only where its
//! definition dominates (earlier in the same region or an enclosing one).
//! Complexity: construction is O(1) per entity; [`Kernel::parents`] and walks are O(ops).

use super::entities::*;
use super::ops::*;
use super::types::*;
use crate::diag::Span;

/// A kernel: what smemsync reads, analyses, synchronizes and emits.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub name: String,
    /// Threads per block (x, y, z).
    pub block: [u32; 3],
    /// Blocks per grid (x, y, z), used by the interpreter and the CUDA harness.
    pub grid: [u32; 3],
    pub params: Vec<Param>,
    pub globals: PrimaryMap<Global, GlobalData>,
    pub buffers: PrimaryMap<Buffer, BufferData>,
    pub groups: PrimaryMap<Group, GroupData>,
    pub values: PrimaryMap<Value, ValueData>,
    pub views: PrimaryMap<View, ViewData>,
    pub ops: PrimaryMap<Op, OpData>,
    pub regions: PrimaryMap<Region, RegionData>,
    pub body: Region,
    /// Source names of values and views (printing uses them; passes may leave them empty).
    pub value_names: SecondaryMap<Value, String>,
    pub view_names: SecondaryMap<View, String>,
    /// Source spans (undefined for IR built by passes).
    pub op_spans: SecondaryMap<Op, Span>,
    pub buffer_spans: SecondaryMap<Buffer, Span>,
    pub global_spans: SecondaryMap<Global, Span>,
    pub value_spans: SecondaryMap<Value, Span>,
    pub group_spans: SecondaryMap<Group, Span>,
    pub kernel_span: Span,
    /// The `block(...)` and `grid(...)` of the header (undefined when absent).
    pub block_span: Span,
    pub grid_span: Span,
    /// The target the kernel was synchronized for (`target "sm_90"` in the header): `sync`
    /// writes it, and `check`, `run` and `emit` use it when no `--target` is given.
    pub target: Option<String>,
    pub target_span: Span,
    /// Default values of scalar parameters (`%n: i32 = 8`), used when a run gives none.
    pub param_defaults: SecondaryMap<Value, Option<Scalar>>,
    /// Declared ranges of i32 scalar parameters (`%n: i32 in [1, 4096]`), inclusive: what
    /// every caller promises, and what analyses may assume (the range analysis uses it to
    /// prove that index arithmetic does not wrap).
    pub param_ranges: SecondaryMap<Value, Option<(i32, i32)>>,
    /// Concrete layout definitions (`layout "L" = #ttg...`), in source order; a layout name
    /// used without a definition is opaque.
    pub layouts: Vec<LayoutDef>,
}

impl Kernel {
    pub fn new(name: impl Into<String>) -> Kernel {
        let mut regions = PrimaryMap::new();
        let body = regions.push(RegionData::default());
        Kernel {
            name: name.into(),
            block: [1, 1, 1],
            grid: [1, 1, 1],
            params: Vec::new(),
            globals: PrimaryMap::new(),
            buffers: PrimaryMap::new(),
            groups: PrimaryMap::new(),
            values: PrimaryMap::new(),
            views: PrimaryMap::new(),
            ops: PrimaryMap::new(),
            regions,
            body,
            value_names: SecondaryMap::default(),
            view_names: SecondaryMap::default(),
            op_spans: SecondaryMap::default(),
            buffer_spans: SecondaryMap::default(),
            global_spans: SecondaryMap::default(),
            value_spans: SecondaryMap::default(),
            group_spans: SecondaryMap::with_default(Span::UNDEF),
            kernel_span: Span::UNDEF,
            block_span: Span::UNDEF,
            grid_span: Span::UNDEF,
            target: None,
            target_span: Span::UNDEF,
            param_defaults: SecondaryMap::with_default(None),
            param_ranges: SecondaryMap::with_default(None),
            layouts: Vec::new(),
        }
    }

    /// Total threads in a block, saturating at `u32::MAX` (never wrapping); the verifier
    /// refuses blocks over the target's limit (1024 threads), so after verification this is
    /// exact.
    pub fn threads(&self) -> u32 {
        self.block.iter().fold(1u32, |n, &d| n.saturating_mul(d))
    }

    /// The definition of layout `name`, if it has one.
    pub fn layout_def(&self, name: &str) -> Option<&LayoutDef> {
        self.layouts.iter().find(|d| d.name == name)
    }

    pub fn new_value(&mut self, ty: ScalarType, def: ValueDef) -> Value {
        self.values.push(ValueData { ty, def })
    }

    pub fn new_region(&mut self) -> Region {
        self.regions.push(RegionData::default())
    }

    /// Creates an op (not yet placed in a region) with fresh result values of the given types.
    pub fn new_op(&mut self, kind: OpKind, result_tys: &[ScalarType], regions: Vec<Region>) -> Op {
        let op = self.ops.push(OpData {
            kind,
            results: Vec::new(),
            regions,
        });
        let results = result_tys
            .iter()
            .enumerate()
            .map(|(i, ty)| self.new_value(*ty, ValueDef::Result(op, i)))
            .collect();
        self.ops[op].results = results;
        op
    }

    /// Appends an op to the end of a region.
    pub fn append(&mut self, region: Region, op: Op) {
        self.regions[region].ops.push(op);
    }

    /// Creates a view over `base` and the op defining it.
    pub fn new_view(&mut self, base: MemRef, indices: Vec<ViewIndex>) -> (View, Op) {
        let view = self.views.push(ViewData { base, indices });
        let op = self.new_op(OpKind::ViewDef(view), &[], vec![]);
        (view, op)
    }

    /// The shared buffer a memref ultimately refers to.
    pub fn root_buffer(&self, m: MemRef) -> Buffer {
        match m {
            MemRef::Buffer(b) => b,
            MemRef::View(v) => self.root_buffer(self.views[v].base),
        }
    }

    /// The shape of a memref.
    pub fn shape(&self, m: MemRef) -> Vec<u64> {
        match m {
            MemRef::Buffer(b) => self.buffers[b].shape.clone(),
            MemRef::View(v) => {
                let vd = &self.views[v];
                let base = self.shape(vd.base);
                let mut out = Vec::new();
                for (i, ix) in vd.indices.iter().enumerate() {
                    if let ViewIndex::Range(lo, hi) = ix {
                        let _ = i;
                        out.push(hi.saturating_sub(*lo));
                    }
                }
                out.extend(base.iter().skip(vd.indices.len()));
                out
            }
        }
    }

    pub fn elem(&self, m: MemRef) -> ElemType {
        self.buffers[self.root_buffer(m)].elem
    }

    /// For each op and region, the op that owns it (None for the kernel body and for
    /// top-level ops).
    pub fn parents(&self) -> Parents {
        let mut p = Parents {
            op_region: SecondaryMap::with_default(None),
            region_op: SecondaryMap::with_default(None),
        };
        for (r, rd) in self.regions.iter() {
            for &op in &rd.ops {
                p.op_region.set(op, Some(r));
            }
        }
        for (op, od) in self.ops.iter() {
            for &r in &od.regions {
                p.region_op.set(r, Some(op));
            }
        }
        p
    }

    /// Visits every placed op in program (pre-)order.
    pub fn walk(&self, mut f: impl FnMut(Op)) {
        fn go(k: &Kernel, r: Region, f: &mut impl FnMut(Op)) {
            for &op in &k.regions[r].ops {
                f(op);
                for &c in &k.ops[op].regions {
                    go(k, c, f);
                }
            }
        }
        go(self, self.body, &mut f);
    }

    /// Each placed op's position in program order (pre-order over the region tree).
    pub fn program_order(&self) -> std::collections::HashMap<Op, usize> {
        let mut m = std::collections::HashMap::new();
        self.walk(|o| {
            let n = m.len();
            m.insert(o, n);
        });
        m
    }

    /// All placed ops in program order.
    pub fn ops_in_order(&self) -> Vec<Op> {
        let mut v = Vec::new();
        self.walk(|o| v.push(o));
        v
    }

    pub fn value_name(&self, v: Value) -> String {
        let n = self.value_names.get(v);
        if n.is_empty() {
            format!("{v}")
        } else {
            n.clone()
        }
    }

    pub fn global_by_name(&self, name: &str) -> Option<Global> {
        self.globals
            .iter()
            .find(|(_, g)| g.name == name)
            .map(|(g, _)| g)
    }

    pub fn buffer_by_name(&self, name: &str) -> Option<Buffer> {
        self.buffers
            .iter()
            .find(|(_, b)| b.name == name)
            .map(|(b, _)| b)
    }

    /// The scalar parameter with this source name.
    pub fn scalar_param(&self, name: &str) -> Option<Value> {
        self.params.iter().find_map(|p| match p {
            Param::Scalar(v) if *self.value_names.get(*v) == name => Some(*v),
            _ => None,
        })
    }

    pub fn span(&self, op: Op) -> Span {
        *self.op_spans.get(op)
    }
}

/// How cloned ops refer to values and memrefs: uses of a key are replaced by its image.
#[derive(Clone, Debug, Default)]
pub struct CloneMap {
    pub values: std::collections::HashMap<Value, Operand>,
    pub mems: std::collections::HashMap<MemRef, MemRef>,
}

impl Kernel {
    /// Clones `op` (with its regions) into a new, unplaced op, rewriting uses through `map`
    /// and recording the clone's results, region arguments and views in it. The clone keeps
    /// the original's span (so diagnostics point at the source op) but not its value names.
    pub fn clone_op(&mut self, op: Op, map: &mut CloneMap) -> Op {
        let mut kind = self.ops[op].kind.clone();
        let subst = |o: &mut Operand, map: &CloneMap| {
            if let Operand::Value(v) = o
                && let Some(n) = map.values.get(v)
            {
                *o = *n;
            }
        };
        kind.for_each_operand_mut(&mut |o| subst(o, map));
        kind.for_each_memref_mut(&mut |m| {
            if let Some(n) = map.mems.get(m) {
                *m = *n;
            }
        });
        if let OpKind::ViewDef(v) = kind {
            let mut vd = self.views[v].clone();
            if let Some(n) = map.mems.get(&vd.base) {
                vd.base = *n;
            }
            for ix in vd.indices.iter_mut() {
                if let ViewIndex::At(o) = ix {
                    subst(o, map);
                }
            }
            let nv = self.views.push(vd);
            map.mems.insert(MemRef::View(v), MemRef::View(nv));
            kind = OpKind::ViewDef(nv);
        }
        let mut regions = Vec::new();
        for r in self.ops[op].regions.clone() {
            let nr = self.new_region();
            for (i, a) in self.regions[r].args.clone().into_iter().enumerate() {
                let ty = self.values[a].ty;
                let na = self.new_value(ty, ValueDef::RegionArg(nr, i));
                self.regions[nr].args.push(na);
                map.values.insert(a, Operand::Value(na));
            }
            for c in self.regions[r].ops.clone() {
                let nc = self.clone_op(c, map);
                self.regions[nr].ops.push(nc);
            }
            regions.push(nr);
        }
        let tys: Vec<ScalarType> = self.ops[op]
            .results
            .iter()
            .map(|v| self.values[*v].ty)
            .collect();
        let new = self.new_op(kind, &tys, regions);
        for (a, b) in self.ops[op]
            .results
            .clone()
            .into_iter()
            .zip(self.ops[new].results.clone())
        {
            map.values.insert(a, Operand::Value(b));
        }
        let span = self.span(op);
        self.op_spans.set(new, span);
        new
    }
}

/// Parent links computed by [`Kernel::parents`].
#[derive(Clone, Debug)]
pub struct Parents {
    pub op_region: SecondaryMap<Op, Option<Region>>,
    pub region_op: SecondaryMap<Region, Option<Op>>,
}

impl Parents {
    /// The op enclosing `op`, if any.
    pub fn parent_op(&self, op: Op) -> Option<Op> {
        self.op_region[op].and_then(|r| self.region_op[r])
    }
    /// Ops enclosing `op`, innermost first.
    pub fn ancestors(&self, op: Op) -> Vec<Op> {
        let mut v = Vec::new();
        let mut cur = self.parent_op(op);
        while let Some(p) = cur {
            v.push(p);
            cur = self.parent_op(p);
        }
        v
    }
}
