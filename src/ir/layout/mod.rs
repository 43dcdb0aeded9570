//! Concrete layouts: Triton's encodings decoded into exact thread-to-element maps (distributed
//! layouts) and element-to-address maps (shared layouts).
//!
//! A kernel defines layouts by name with Triton 3.6's attribute text (`layout "L" =
//! #ttg.blocked<{...}>`, [`LayoutDef`]); `#NAME` inside the text refers to another definition.
//! [`decode`](fn@decode) turns a name and a tile shape into a [`Decoded`] layout: a [`Distributed`]
//! linear layout over GF(2) (register, lane, warp bits -> element bits; [`linear`]) or an
//! [`AddressMap`] (element -> offset within the buffer). Shared layouts move elements within a
//! buffer; they never decide who touches an element.
//!
//! What is conservative, and said so: a layout name without a definition is *opaque* (any
//! executing thread may own any element, docs/ir.md); an encoding smemsync does not model, a
//! non-power-of-two tile, or a layout whose lanes and warps do not match the block becomes
//! opaque with a warning ([`Issue`], W1000–W1003). A buffer whose shared layout pairs its
//! elements with another pinned buffer's differently than row-major addresses do is W1004:
//! smemsync's semantics (interpreter, analyses, emitted CUDA) is row-major, docs/ir.md
//! "Aliasing and W1004". Malformed definitions are errors with the location inside the
//! attribute text (E1001–E1005).
//! Complexity: decoding is O(depth · rank · bits); an [`OwnerMap`] is O(bits²) to build.

pub mod attr;
pub mod decode;
pub mod linear;

use std::collections::HashSet;

use crate::diag::{DiagKind, Diagnostic, Span};
use crate::ir::{Group, Kernel, LayoutDef, MemRef, OpKind};
use attr::{Node, Val};
use decode::{Builder, Problem};
pub use linear::{AddressMap, Distributed, OwnerMap};

/// A decoded layout for one tile shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    Distributed(Distributed),
    Shared(AddressMap),
}

/// Why a layout is not concrete: an error in its definition, or a warning (opaque).
#[derive(Clone, Debug, PartialEq)]
pub struct Issue {
    pub code: &'static str,
    pub msg: String,
    pub span: Span,
    pub error: bool,
}

impl Issue {
    pub fn diagnostic(&self) -> Diagnostic {
        if self.error {
            Diagnostic::user(self.code, self.msg.clone()).with_label(self.span, "here")
        } else {
            let label = "treated as an opaque layout (conservative)";
            Diagnostic::warning(DiagKind::User, self.code, self.msg.clone()).with_label(self.span, label)
        }
    }

    /// [`Issue::diagnostic`] of a distributed layout an access uses: an opaque one says who
    /// holds which element is unknown.
    pub fn owner_diagnostic(&self) -> Diagnostic {
        let d = self.diagnostic();
        if self.error {
            return d;
        }
        d.with_note("who holds which element is unknown: each access under it has an owner mapping of its own, so the same name does not make two accesses same-thread")
    }
}

const MAX_REFS: usize = 16;

struct Cx<'k> {
    k: &'k Kernel,
    stack: Vec<String>,
}

/// The definition of layout `name` with its attribute text, when it has one (a layout bound
/// to a group without `= ...` is opaque: no text).
fn text_def<'k>(k: &'k Kernel, name: &str) -> Option<(&'k LayoutDef, &'k str)> {
    let d = k.layout_def(name)?;
    Some((d, d.text.as_deref()?))
}

fn at(d: &LayoutDef, r: (usize, usize)) -> Span {
    let lo = d.text_span.lo as usize;
    Span::new(lo + r.0, lo + r.1.max(r.0 + 1))
}

fn problem(d: &LayoutDef, p: Problem) -> Issue {
    Issue {
        code: if p.error { "E1004" } else { "W1000" },
        msg: p.msg,
        span: at(d, p.at),
        error: p.error,
    }
}

/// Decodes layout `name` for a tile of `shape`. `Err` with a warning when the layout is
/// opaque (undefined names are opaque without an issue: `Ok(None)`).
pub fn decode(k: &Kernel, name: &str, shape: &[u64]) -> Result<Option<Decoded>, Issue> {
    if text_def(k, name).is_none() {
        return Ok(None);
    }
    let mut cx = Cx {
        k,
        stack: Vec::new(),
    };
    cx.named(name, shape, None).map(Some)
}

impl Cx<'_> {
    fn named(&mut self, name: &str, shape: &[u64], from: Option<Span>) -> Result<Decoded, Issue> {
        let Some((d, text)) = text_def(self.k, name) else {
            return Err(Issue {
                code: "E1002",
                msg: format!("no layout named \"{name}\" is defined"),
                span: from.unwrap_or(Span::UNDEF),
                error: true,
            });
        };
        if self.stack.iter().any(|s| s == name) || self.stack.len() > MAX_REFS {
            return Err(Issue {
                code: "E1003",
                msg: format!("layout \"{name}\" refers to itself"),
                span: from.unwrap_or(d.span),
                error: true,
            });
        }
        let node = attr::parse(text).map_err(|e| Issue {
            code: "E1001",
            msg: format!("malformed layout attribute: {}", e.msg),
            span: at(d, (e.at, e.at + 1)),
            error: true,
        })?;
        self.stack.push(name.to_string());
        let r = self.node(d, &node, shape);
        self.stack.pop();
        r
    }

    /// A distributed layout's bases (before flattening).
    fn builder(&mut self, d: &LayoutDef, n: &Node, shape: &[u64]) -> Result<Builder, Issue> {
        if let Val::Ref(r) = &n.val {
            let Some((rd, rtext)) = text_def(self.k, r) else {
                return Err(Issue {
                    code: "E1002",
                    msg: format!("no layout named \"{r}\" is defined"),
                    span: at(d, n.at),
                    error: true,
                });
            };
            let span = at(d, n.at);
            if self.stack.iter().any(|s| s == r) || self.stack.len() > MAX_REFS {
                return Err(Issue {
                    code: "E1003",
                    msg: format!("layout \"{r}\" refers to itself"),
                    span,
                    error: true,
                });
            }
            let node = attr::parse(rtext).map_err(|e| Issue {
                code: "E1001",
                msg: format!("malformed layout attribute: {}", e.msg),
                span: at(rd, (e.at, e.at + 1)),
                error: true,
            })?;
            self.stack.push(r.clone());
            let b = self.builder(rd, &node, shape);
            self.stack.pop();
            return b;
        }
        let Val::Attr(a) = &n.val else {
            return Err(problem(d, Problem { error: true, msg: "expected a layout attribute".into(), at: n.at }));
        };
        let p = |e| problem(d, e);
        match a.name.as_str() {
            "ttg.blocked" => decode::blocked(a, n, shape).map_err(p),
            "ttg.nvidia_mma" => decode::nvidia_mma(a, n, shape).map_err(p),
            "ttg.amd_wmma" => decode::amd_wmma(a, n, shape).map_err(p),
            "ttg.linear" => decode::linear(a, n, shape).map_err(p),
            "ttg.amd_mfma" => {
                let m = decode::mfma_params(a, n).map_err(p)?;
                decode::rank_is(n, 2, shape).map_err(p)?;
                Ok(decode::amd_mfma(&m, shape))
            }
            "ttg.slice" => {
                let dim = decode::int(decode::param(a, n, "dim").map_err(p)?).map_err(p)?;
                let parent = decode::param(a, n, "parent").map_err(p)?;
                if dim < 0 || dim as usize > shape.len() {
                    return Err(p(Problem { error: true, msg: format!("slice dimension {dim} is out of range"), at: n.at }));
                }
                let mut ps = shape.to_vec();
                ps.insert(dim as usize, 1);
                Ok(decode::slice(self.builder(d, parent, &ps)?, dim as usize))
            }
            "ttg.dot_op" => self.dot(d, a, n, shape),
            _ if is_shared(&a.name) => Err(Issue {
                code: "E1005",
                msg: format!("`#{}` is a shared-memory layout, not a distribution over threads", a.name),
                span: at(d, n.at),
                error: true,
            }),
            _ => Err(Issue {
                code: "W1000",
                msg: format!("smemsync does not model the encoding `#{}`", a.name),
                span: at(d, n.at),
                error: false,
            }),
        }
    }

    fn dot(&mut self, d: &LayoutDef, a: &attr::Attr, n: &Node, shape: &[u64]) -> Result<Builder, Issue> {
        let p = |e| problem(d, e);
        let op_idx = decode::int(decode::param(a, n, "opIdx").map_err(p)?).map_err(p)?;
        let kw = decode::int(decode::param(a, n, "kWidth").map_err(p)?).map_err(p)?;
        if !(0..=1).contains(&op_idx) || kw < 1 || !(kw as u64).is_power_of_two() {
            return Err(p(Problem { error: true, msg: "opIdx must be 0 or 1 and kWidth a power of two".into(), at: n.at }));
        }
        decode::rank_is(n, 2, shape).map_err(p)?;
        let parent = decode::param(a, n, "parent").map_err(p)?;
        let (pd, pn) = self.resolve_attr(d, parent)?;
        let Val::Attr(pa) = &pn.val else {
            return Err(not_attr(d, n));
        };
        let pp = |e| problem(&pd, e);
        match pa.name.as_str() {
            "ttg.nvidia_mma" => {
                let major = decode::int(decode::param(pa, &pn, "versionMajor").map_err(pp)?).map_err(pp)?;
                let wpc = decode::pow2_list(decode::param(pa, &pn, "warpsPerCTA").map_err(pp)?).map_err(pp)?;
                if wpc.len() != 2 || (major == 3 && op_idx == 1) {
                    return Err(p(Problem { error: false, msg: "this dot operand layout is not modelled".into(), at: n.at }));
                }
                Ok(decode::nvidia_dot(op_idx, kw as u64, &wpc, shape))
            }
            "ttg.amd_mfma" => {
                let m = decode::mfma_params(pa, &pn).map_err(pp)?;
                Ok(decode::mfma_dot(&m, op_idx, kw as u64, shape))
            }
            other => Err(Issue {
                code: "W1000",
                msg: format!("smemsync does not model dot operands of `#{other}`"),
                span: at(d, n.at),
                error: false,
            }),
        }
    }

    /// Follows references to the attribute node they name (with the definition holding it).
    fn resolve_attr(&mut self, d: &LayoutDef, n: &Node) -> Result<(LayoutDef, Node), Issue> {
        let (mut def, mut node) = (d.clone(), n.clone());
        for _ in 0..MAX_REFS {
            let Val::Ref(r) = &node.val else {
                return Ok((def, node));
            };
            let Some((rd, rtext)) = text_def(self.k, r) else {
                return Err(Issue { code: "E1002", msg: format!("no layout named \"{r}\" is defined"), span: at(&def, node.at), error: true });
            };
            let parsed = attr::parse(rtext).map_err(|e| Issue {
                code: "E1001",
                msg: format!("malformed layout attribute: {}", e.msg),
                span: at(rd, (e.at, e.at + 1)),
                error: true,
            })?;
            def = rd.clone();
            node = parsed;
        }
        Err(Issue { code: "E1003", msg: "layout references form a cycle".into(), span: at(d, n.at), error: true })
    }

    fn node(&mut self, d: &LayoutDef, n: &Node, shape: &[u64]) -> Result<Decoded, Issue> {
        if let Some(bad) = shape.iter().find(|s| !s.is_power_of_two()) {
            return Err(Issue {
                code: "W1001",
                msg: format!("the tile has a dimension of {bad}, not a power of two: its layout is not a linear map"),
                span: d.span,
                error: false,
            });
        }
        if let Val::Attr(a) = &n.val
            && is_shared(&a.name)
        {
            let p = |e| problem(d, e);
            let m = match a.name.as_str() {
                "ttg.swizzled_shared" => decode::swizzled_shared(a, n, shape).map_err(p)?,
                "ttg.nvmma_shared" => decode::nvmma_shared(a, n, shape).map_err(p)?,
                "ttg.shared_linear" => decode::shared_linear(a, n, shape).map_err(p)?,
                "ttg.amd_rotating_shared" => decode::amd_rotating_shared(a, n, shape).map_err(p)?,
                "ttg.padded_shared" => decode::padded_shared(a, n, shape).map_err(p)?,
                other => {
                    return Err(Issue {
                        code: "W1000",
                        msg: format!("smemsync does not model the shared encoding `#{other}`: addresses are taken row-major"),
                        span: at(d, n.at),
                        error: false,
                    });
                }
            };
            return Ok(Decoded::Shared(m));
        }
        let b = self.builder(d, n, shape)?;
        Ok(Decoded::Distributed(b.finish(shape)))
    }
}

fn not_attr(d: &LayoutDef, n: &Node) -> Issue {
    problem(d, Problem { error: true, msg: "expected a layout attribute".into(), at: n.at })
}

/// Whether an encoding name is a shared-memory one.
pub fn is_shared(name: &str) -> bool {
    matches!(
        name,
        "ttg.swizzled_shared"
            | "ttg.nvmma_shared"
            | "ttg.padded_shared"
            | "ttg.shared_linear"
            | "ttg.amd_rotating_shared"
            | "ttg.shared"
    )
}

/// The ownership a collective access of `shape` has under `layout` in a block of `threads`
/// threads with `warp` threads a warp: the layout and its writer map when concrete.
#[derive(Clone, Debug)]
pub enum Ownership {
    Concrete(Box<Owned>),
    /// Opaque: no definition, or the issue that made it so.
    Opaque(Option<Issue>),
}

impl Ownership {
    /// Whether collective accesses under this layout's name and one view shape give each
    /// element to one and the same thread, whichever threads execute them: a name without a
    /// definition (docs/ir.md, "Collective accesses": the author's promise), or a concrete
    /// layout that holds every element in one thread (no broadcast). Not an opaque fall-back
    /// of a defined encoding (W1000–W1003, W1125): the encoding it stands for may hold an
    /// element in several threads (a dot operand of a blocked parent, a layout broadcast over
    /// a smaller tile), which then read what another thread wrote.
    pub fn one_owner_by_name(&self) -> bool {
        match self {
            Ownership::Opaque(issue) => issue.is_none(),
            Ownership::Concrete(c) => c.owners.shifts.is_empty(),
        }
    }
}

/// A concrete ownership: the decoded layout, its writer map, and where its threads start.
/// Layout thread `t` (the `t` of [`Distributed`] and [`OwnerMap`]) is block thread
/// `first + t`.
#[derive(Clone, Debug)]
pub struct Owned {
    pub layout: Distributed,
    pub owners: OwnerMap,
    /// The first thread of the group a role-relative layout is bound to (0 otherwise); a
    /// multiple of the warp width, so layout warps are hardware warps.
    pub first: u32,
}

impl Owned {
    /// The block thread that writes element `e` (row-major within the view).
    pub fn writer(&self, e: u64) -> u32 {
        self.first + self.owners.writer(e)
    }
}

/// The block threads a collective access under a layout spreads over: `[first, first +
/// count)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LayoutThreads {
    pub first: u32,
    pub count: u32,
}

/// The group a layout is bound to (`layout "L" in @g`), if any.
pub fn layout_group(k: &Kernel, layout: Option<&str>) -> Option<Group> {
    k.layout_def(layout?)?.group
}

/// The threads a collective access under `layout` spreads over: its group's for a
/// role-relative layout (docs/ir.md, "Role-relative layouts"), the block's otherwise.
pub fn layout_threads(k: &Kernel, layout: Option<&str>) -> LayoutThreads {
    match layout_group(k, layout) {
        Some(g) => {
            let gd = &k.groups[g];
            LayoutThreads {
                first: gd.lo,
                count: gd.hi.saturating_sub(gd.lo),
            }
        }
        None => LayoutThreads {
            first: 0,
            count: k.threads(),
        },
    }
}

/// Decodes the distributed layout of a collective access.
pub fn ownership(k: &Kernel, layout: Option<&str>, shape: &[u64], warp: u32) -> Ownership {
    let Some(name) = layout else {
        return Ownership::Opaque(None);
    };
    let def_span = k.layout_def(name).map_or(Span::UNDEF, |d| d.span);
    let d = match decode(k, name, shape) {
        Ok(Some(Decoded::Distributed(d))) => d,
        Ok(Some(Decoded::Shared(_))) => {
            return Ownership::Opaque(Some(Issue {
                code: "E1005",
                msg: format!("layout \"{name}\" is a shared-memory layout; a collective access needs a distributed one"),
                span: def_span,
                error: true,
            }));
        }
        Ok(None) => return Ownership::Opaque(None),
        Err(i) => return Ownership::Opaque(Some(i)),
    };
    if let Some(i) = thread_mismatch(k, name, &d, warp) {
        return Ownership::Opaque(Some(i));
    }
    let first = layout_threads(k, Some(name)).first;
    match d.owner_map() {
        Some(m) => Ownership::Concrete(Box::new(Owned {
            layout: d,
            owners: m,
            first,
        })),
        None => Ownership::Opaque(Some(Issue {
            code: "W1003",
            msg: format!("layout \"{name}\" does not reach every element of a {shape:?} tile"),
            span: def_span,
            error: false,
        })),
    }
}

/// Why decoded layout `d` (named `name`) does not fit the threads it is bound to: lanes other
/// than the warp's (W1002), a thread count other than the block's (W1002) or its group's
/// (E1621: the definition names the group, so the mismatch is the author's error), or a group
/// that starts inside a warp (W1125: layout lanes would not be hardware lanes).
fn thread_mismatch(k: &Kernel, name: &str, d: &Distributed, warp: u32) -> Option<Issue> {
    let def_span = k.layout_def(name).map_or(Span::UNDEF, |d| d.span);
    let LayoutThreads { first, count } = layout_threads(k, Some(name));
    let group = layout_group(k, Some(name)).map(|g| &k.groups[g]);
    let spread = d.lanes() * d.warps();
    if let Some(g) = group
        && spread != count
    {
        return Some(Issue {
            code: "E1621",
            msg: format!(
                "layout \"{name}\" spreads over {spread} threads ({} warps of {} lanes), but its group `@{}` has {count} threads",
                d.warps(),
                d.lanes(),
                g.name
            ),
            span: def_span,
            error: true,
        });
    }
    if d.lanes() != warp || spread != count {
        let threads = k.threads();
        return Some(Issue {
            code: "W1002",
            msg: format!(
                "layout \"{name}\" spreads over {} warps of {} lanes, but the block has {threads} threads in warps of {warp}",
                d.warps(),
                d.lanes()
            ),
            span: def_span,
            error: false,
        });
    }
    if let Some(g) = group
        && first % warp.max(1) != 0
    {
        return Some(Issue {
            code: "W1125",
            msg: format!(
                "group `@{}` starts at thread {first}, inside a warp of {warp}: the lanes of layout \"{name}\" are not the hardware's",
                g.name
            ),
            span: def_span,
            error: false,
        });
    }
    None
}

/// The collective accesses of a kernel with their layout names and memrefs.
pub fn collective_uses(k: &Kernel) -> Vec<(crate::ir::Op, Option<&str>, MemRef)> {
    let mut out = Vec::new();
    for op in k.ops_in_order() {
        match &k.ops[op].kind {
            OpKind::LocalLoad { mem, layout } | OpKind::LocalStore { mem, layout, .. } => {
                out.push((op, layout.as_deref(), *mem))
            }
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => {
                out.push((op, c.layout.as_deref(), c.dst))
            }
            _ => {}
        }
    }
    out
}

/// The name under which a collective access of `mem` under `layout` shares its owner mapping
/// with the other accesses of that name ([`Kernel::layout_ids`]): the name, unless the layout
/// is an opaque fall-back of a defined encoding (an [`Issue`]: W1000–W1003, W1125; `warp`
/// decides W1002), which may replicate elements, so that one name does not mean one owner.
pub fn mapping_name<'a>(
    k: &Kernel,
    layout: Option<&'a str>,
    mem: MemRef,
    warp: u32,
) -> Option<&'a str> {
    layout.filter(|&l| {
        !matches!(
            ownership(k, Some(l), &k.shape(mem), warp),
            Ownership::Opaque(Some(_))
        )
    })
}

impl Kernel {
    /// The layout number of every collective access ([`collective_uses`]) with `warp`
    /// threads a warp: layouts numbered by name in program order of first use, an access
    /// without a layout name, or under an opaque fall-back of a defined encoding
    /// ([`mapping_name`]), taking a fresh number. docs/ir.md's documented owner mapping `owner(e) =
    /// (e + n) mod T` uses this `n`; the CUDA and MLIR emitters name their collective helpers
    /// by it. The one numbering: nothing else numbers layouts. O(ops), plus a decode per
    /// access with a defined layout.
    pub fn layout_ids(&self, warp: u32) -> std::collections::HashMap<crate::ir::Op, u32> {
        let mut by_name: std::collections::HashMap<&str, u32> = Default::default();
        let mut next = 0u32;
        let mut fresh = || {
            next += 1;
            next - 1
        };
        let mut out = std::collections::HashMap::new();
        for (op, name, mem) in collective_uses(self) {
            let id = match mapping_name(self, name, mem, warp) {
                Some(l) => *by_name.entry(l).or_insert_with(&mut fresh),
                None => fresh(),
            };
            out.insert(op, id);
        }
        out
    }
}

/// The address map of a buffer's shared layout (`None`: row-major).
pub fn buffer_addresses(k: &Kernel, b: crate::ir::Buffer) -> Option<AddressMap> {
    let bd = &k.buffers[b];
    match decode(k, bd.layout.as_deref()?, &bd.shape) {
        Ok(Some(Decoded::Shared(m))) if !m.is_identity() => Some(m),
        _ => None,
    }
}

/// Every diagnostic about the layouts of `k` with `warp` threads a warp: errors (malformed
/// definitions, wrong kinds) and warnings (opaque fall-backs), each once, located.
pub fn diagnostics(k: &Kernel, warp: u32) -> Vec<Diagnostic> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    // `owners`: the layout distributes an access over threads (not a buffer's addresses).
    let mut push = |i: Issue, use_span: Span, owners: bool, out: &mut Vec<Diagnostic>| {
        if seen.insert((i.code, i.span.lo, i.span.hi)) {
            let mut d = if owners { i.owner_diagnostic() } else { i.diagnostic() };
            if use_span != Span::UNDEF && use_span != i.span {
                d = d.with_label(use_span, "used here");
            }
            out.push(d);
        }
    };
    for d in &k.layouts {
        let Some(text) = &d.text else { continue };
        if let Err(e) = attr::parse(text) {
            push(
                Issue {
                    code: "E1001",
                    msg: format!("malformed layout attribute: {}", e.msg),
                    span: at(d, (e.at, e.at + 1)),
                    error: true,
                },
                Span::UNDEF,
                false,
                &mut out,
            );
        }
    }
    for (op, name, mem) in collective_uses(k) {
        if let Ownership::Opaque(Some(i)) = ownership(k, name, &k.shape(mem), warp) {
            push(i, k.span(op), true, &mut out);
        }
    }
    for (b, bd) in k.buffers.iter() {
        let Some(name) = bd.layout.as_deref() else { continue };
        let span = *k.buffer_spans.get(b);
        match decode(k, name, &bd.shape) {
            Ok(Some(Decoded::Distributed(_))) => push(
                Issue {
                    code: "E1005",
                    msg: format!("layout \"{name}\" distributes a tile over threads; a buffer needs a shared-memory layout"),
                    span,
                    error: true,
                },
                Span::UNDEF,
                false,
                &mut out,
            ),
            Err(i) => push(i, span, false, &mut out),
            _ => {}
        }
    }
    for (b, c) in inexact_aliases(k) {
        let (bd, cd) = (&k.buffers[b], &k.buffers[c]);
        let d = Diagnostic::warning(
            DiagKind::User,
            "W1004",
            format!("buffers `@{}` and `@{}` share bytes, and smemsync does not know that their shared layouts pair their elements as row-major addresses do; an access to one and an access to the other are treated as touching the shared bytes from different threads (conservative; docs/ir.md, \"Aliasing and W1004\")", bd.name, cd.name),
        )
        .with_label(*k.buffer_spans.get(b), "this buffer")
        .with_label(*k.buffer_spans.get(c), "shares bytes with this one");
        out.push(d);
    }
    out
}

/// Largest buffer whose element pairing is checked by enumeration (beyond: W1004 without it).
const MAX_PAIRING: u64 = 1 << 22;

/// A buffer's element-to-address map as far as smemsync knows it.
enum MapKnowledge {
    /// Decoded: `None` is row-major (no layout, or the identity).
    Known(Option<AddressMap>),
    /// The buffer names a layout that is not a decodable shared layout (no definition, e.g.
    /// the importer's `scratch` for Triton's scratch buffers, or an opaque fall-back).
    Unknown,
}
use MapKnowledge::{Known, Unknown};

fn address_map(k: &Kernel, b: crate::ir::Buffer) -> MapKnowledge {
    let bd = &k.buffers[b];
    let Some(name) = bd.layout.as_deref() else {
        return Known(None);
    };
    match decode(k, name, &bd.shape) {
        Ok(Some(Decoded::Shared(m))) => Known((!m.is_identity()).then_some(m)),
        _ => Unknown,
    }
}

/// Whether pinned buffers `b` and `c` (maps `mb`, `mc`; `None`: row-major, or unknown when
/// the caller says so) share a byte, padding included.
fn overlap(
    k: &Kernel,
    b: crate::ir::Buffer,
    mb: Option<&AddressMap>,
    c: crate::ir::Buffer,
    mc: Option<&AddressMap>,
) -> bool {
    let (bd, cd) = (&k.buffers[b], &k.buffers[c]);
    let (Some(ob), Some(oc)) = (bd.offset, cd.offset) else {
        return false;
    };
    let end = |o: u64, d: &crate::ir::BufferData, m: Option<&AddressMap>| {
        (o + m.map_or(d.elements(), |x| x.span()) * d.elem.bytes()).max(o + d.bytes())
    };
    ob.max(oc) < end(ob, bd, mb).min(end(oc, cd, mc))
}

/// Whether pinned buffers `b` and `c` share bytes and some element of `b` meets a different
/// element of `c` at their layouts' addresses than at their row-major ones (`None`:
/// row-major). Buffers of different element sizes or misaligned offsets differ.
/// Complexity: O(elements of `b` + span of `c`).
fn pair_differs(
    k: &Kernel,
    b: crate::ir::Buffer,
    m: Option<&AddressMap>,
    c: crate::ir::Buffer,
    mc: Option<&AddressMap>,
) -> bool {
    let (bd, cd) = (&k.buffers[b], &k.buffers[c]);
    if !overlap(k, b, m, c, mc) {
        return false;
    }
    if m.is_none() && mc.is_none() {
        return false;
    }
    let (Some(ob), Some(oc)) = (bd.offset, cd.offset) else {
        return false;
    };
    let n = bd.elements();
    let s = bd.elem.bytes();
    if cd.elem.bytes() != s || ob.abs_diff(oc) % s != 0 || n > MAX_PAIRING || cd.elements() > MAX_PAIRING {
        return true;
    }
    // c's element at each of its element slots (u64::MAX: padding).
    let slots = mc.map_or(cd.elements(), |x| x.span());
    let mut at = vec![u64::MAX; slots as usize];
    for f in 0..cd.elements() {
        let o = mc.map_or(f, |x| x.offset(f));
        if let Some(v) = at.get_mut(o as usize) {
            *v = f;
        }
    }
    let d = (ob as i64 - oc as i64) / s as i64;
    let slot = |o: u64| -> u64 {
        let j = o as i64 + d;
        if j < 0 { u64::MAX } else { at.get(j as usize).copied().unwrap_or(u64::MAX) }
    };
    let rm = |e: u64| -> u64 {
        let j = e as i64 + d;
        if j < 0 || j as u64 >= cd.elements() { u64::MAX } else { j as u64 }
    };
    (0..n).any(|e| rm(e) != slot(m.map_or(e, |x| x.offset(e))))
}

/// Whether shared buffers `b` and `c` may share a byte: one buffer, or two pinned buffers
/// whose byte ranges overlap, padding included (docs/ir.md: unpinned buffers never alias).
/// A buffer whose layout smemsync cannot decode is taken at its row-major extent, as in
/// [`inexact_aliases`] (a layout places elements within the buffer). O(1) plus the layouts'
/// decoding.
pub fn share_bytes(k: &Kernel, b: crate::ir::Buffer, c: crate::ir::Buffer) -> bool {
    if b == c {
        return true;
    }
    let (bd, cd) = (&k.buffers[b], &k.buffers[c]);
    let (Some(ob), Some(oc)) = (bd.offset, cd.offset) else {
        return false;
    };
    let end = |x: crate::ir::Buffer, o: u64, d: &crate::ir::BufferData| match address_map(k, x) {
        Known(m) => (o + m.as_ref().map_or(d.elements(), |x| x.span()) * d.elem.bytes()).max(o + d.bytes()),
        Unknown => o + d.bytes(),
    };
    ob.max(oc) < end(b, ob, bd).min(end(c, oc, cd))
}

/// Whether shared buffers `b` and `c` hold every element at the same bytes: one buffer, or
/// two pinned at one offset with one element type, shape and layout (element `e` of one is
/// element `e` of the other, so index `j` of the first dimension names the same bytes in
/// both).
pub fn same_bytes(k: &Kernel, b: crate::ir::Buffer, c: crate::ir::Buffer) -> bool {
    let (bd, cd) = (&k.buffers[b], &k.buffers[c]);
    b == c
        || (bd.offset.is_some()
            && bd.offset == cd.offset
            && bd.elem == cd.elem
            && bd.shape == cd.shape
            && bd.layout == cd.layout)
}

/// The pairs `(b, c)` (`b < c`) of different pinned data buffers that share bytes (padding
/// included) where the pairing of their elements at real addresses is not known to be the
/// row-major one: a layout smemsync cannot decode on either (unknown address map), or known
/// maps that pair elements differently (`pair_differs`). Analyses must not conclude "same
/// thread" for an access to `b` and one to `c`: such a pair may touch one byte from two
/// threads (docs/ir.md, "Aliasing and W1004"). Row-major buffers, and buffers of one shape,
/// layout and offset, pair exactly and are not listed.
/// Complexity: O(pinned² · (elements + span)).
pub fn inexact_aliases(k: &Kernel) -> Vec<(crate::ir::Buffer, crate::ir::Buffer)> {
    let pinned: Vec<_> = k
        .buffers
        .iter()
        .filter(|(_, d)| d.offset.is_some() && d.elem != crate::ir::ElemType::MBarrier)
        .map(|(b, _)| (b, address_map(k, b)))
        .collect();
    let mut out = Vec::new();
    for (i, (b, mb)) in pinned.iter().enumerate() {
        for (c, mc) in &pinned[i + 1..] {
            let inexact = match (mb, mc) {
                (Known(x), Known(y)) => pair_differs(k, *b, x.as_ref(), *c, y.as_ref()),
                (Known(x), Unknown) => overlap(k, *b, x.as_ref(), *c, None),
                (Unknown, Known(y)) => overlap(k, *b, None, *c, y.as_ref()),
                (Unknown, Unknown) => overlap(k, *b, None, *c, None),
            };
            if inexact {
                out.push((*b, *c));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
