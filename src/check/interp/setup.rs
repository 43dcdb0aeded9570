//! Setting up an execution: the global buffers with their seeded inputs, and per block the
//! shared byte array, the race detector's granules and mbarrier slots, the threads, and the
//! mapping of collective accesses to threads ([`LayoutMap`], concrete layouts).
//!
//! Invariants: a buffer's granules start at its byte offset divided by the granule (the
//! smallest element size), so aliasing buffers share granules exactly where they share bytes;
//! mbarrier buffers take no bytes and one slot per element. Complexity: O(buffers + threads x
//! values) per block, plus O(view elements) per collective op with a concrete layout.

use super::*;

/// A usage error found before execution (C0010), located at `span` when the kernel has one.
fn user_err(msg: String, span: Span, label: &str) -> Stop {
    let d = Diagnostic::user("C0010", msg);
    Stop::Exec(if span.is_undef() {
        d
    } else {
        d.with_label(span, label)
    })
}

/// Every global buffer at its parameter's shape, filled with the seeded input data.
pub(super) fn init_globals(k: &Kernel, cfg: &ExecConfig) -> Result<Vec<GlobalMem>, Stop> {
    let mut out = Vec::new();
    for (p, (gid, g)) in k.globals.iter().enumerate() {
        let shape = global_shape(k, cfg, gid)?;
        let count: u64 = shape.iter().product();
        if count > 1 << 26 {
            return Err(user_err(
                format!("global %{} has {count} elements, too many to interpret", g.name),
                *k.global_spans.get(gid),
                "declared here",
            ));
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

/// The dimensions of global `gid` at this run's parameter values, each in 0..=2^26 (C0010,
/// located on the dimension, otherwise: the verifier refuses a non-positive default, so only a
/// value given on the command line reaches it).
fn global_shape(k: &Kernel, cfg: &ExecConfig, gid: Global) -> Result<Vec<u64>, Stop> {
    let g = &k.globals[gid];
    let mut shape = Vec::new();
    for (i, d) in g.shape.iter().enumerate() {
        let at = k.global_dim_spans.get(gid).get(i).copied().unwrap_or(Span::UNDEF);
        let n = match d {
            Dim::Const(c) => *c as i64,
            Dim::Param(v) => match cfg.scalars.get(v) {
                Some(x) => x.as_i64(),
                None => {
                    let msg = format!("no value for parameter {}", k.value_name(*v));
                    return Err(user_err(msg, at, "this dimension"));
                }
            },
        };
        if !(0..=(1 << 26)).contains(&n) {
            let msg = format!(
                "global %{} has dimension {n}, out of the supported range",
                g.name
            );
            return Err(user_err(msg, at, "this dimension"));
        }
        shape.push(n as u64);
    }
    Ok(shape)
}


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
) -> Option<Box<crate::ir::layout::Owned>> {
    match crate::ir::layout::ownership(k, name, shape, warp) {
        crate::ir::layout::Ownership::Concrete(c) => Some(c),
        crate::ir::layout::Ownership::Opaque(_) => None,
    }
}

/// Per collective op with a concrete layout, the view elements each block thread touches:
/// every element it holds when the op reads, the elements it writes (it is their lowest
/// holder) when the op writes; none for threads outside the layout's (a role-relative
/// layout's group). Enumerates the layout's inputs once per op.
fn concrete_elements(k: &Kernel, warp: u32) -> HashMap<Op, Rc<Vec<Vec<u64>>>> {
    let mut out = HashMap::new();
    for (op, name, mem) in crate::ir::layout::collective_uses(k) {
        let Some(c) = concrete_owners(k, name, &k.shape(mem), warp) else {
            continue;
        };
        let (d, m, first) = (&c.layout, &c.owners, c.first as usize);
        let reads = matches!(k.ops[op].kind, OpKind::LocalLoad { .. });
        let n = (d.lanes() * d.warps()) as usize;
        let mut per = vec![Vec::new(); first + n];
        for t in 0..n as u32 {
            let v = &mut per[first + t as usize];
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

/// The opaque mapping of one collective op: element `e` belongs to block thread `first +
/// (e + n) mod count`, over the layout's threads `[first, first + count)` (a role-relative
/// layout's group, else the block).
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct OpaqueOwners {
    pub n: u64,
    pub first: u64,
    pub count: u64,
}

/// Per collective op, its mapping `owner(e) = first + (e + o) mod count` ([`LayoutMap`]).
fn layout_offsets(k: &Kernel, map: LayoutMap, warp: u32) -> HashMap<Op, OpaqueOwners> {
    let mut out = HashMap::new();
    let ids = k.layout_ids(warp);
    let mut names: HashMap<String, Vec<Vec<u64>>> = HashMap::new();
    k.walk(|op| {
        let (l, mem) = match &k.ops[op].kind {
            OpKind::LocalLoad { layout, mem } | OpKind::LocalStore { layout, mem, .. } => {
                (layout, *mem)
            }
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => (&c.layout, c.dst),
            _ => return,
        };
        let lt = crate::ir::layout::layout_threads(k, l.as_deref());
        let threads = u64::from(lt.count.max(1));
        let shift = match (map, threads / 2 + 1) {
            (LayoutMap::Documented, _) => 0,
            (LayoutMap::Rotated, s) if s < threads => s,
            (LayoutMap::Rotated, _) => 1,
        };
        let num = ids.get(&op).map_or(0, |&n| u64::from(n));
        let owners = |n| OpaqueOwners {
            n,
            first: u64::from(lt.first),
            count: threads,
        };
        // An opaque fall-back of a defined encoding shares no mapping (`layout_ids`).
        let shapes = match crate::ir::layout::mapping_name(k, l.as_deref(), mem, warp) {
            Some(name) => names.entry(name.to_string()).or_default(),
            None => {
                out.insert(op, owners(num + shift));
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
        out.insert(op, owners(num + shift + d));
    });
    out
}


/// Where the shared buffers live: the block's byte array (pinned buffers at their offsets,
/// the others after them), the race detector's granules and the mbarrier slots.
struct SharedPlace {
    bytes: u64,
    /// Per buffer: byte offset of element 0, bytes per element (0 for mbarriers), type.
    place: Vec<(usize, usize, ElemType)>,
    /// Per buffer: first granule, granules per element.
    gran: Vec<(usize, usize)>,
    /// Per buffer: its first mbarrier slot (0 for data buffers).
    mbar_base: Vec<usize>,
    nmbar: usize,
    granules: usize,
}

/// The shared placement of `k`'s buffers; the race detector's granule is the smallest
/// element size.
fn shared_place(k: &Kernel) -> SharedPlace {
    let (base, bytes) = shared_layout(k);
    let g = k
        .buffers
        .values()
        .filter(|b| b.elem != ElemType::MBarrier)
        .map(|b| b.elem.bytes())
        .min()
        .unwrap_or(4);
    let mut sp = SharedPlace {
        bytes,
        place: Vec::new(),
        gran: Vec::new(),
        mbar_base: Vec::new(),
        nmbar: 0,
        granules: (bytes.div_ceil(g)) as usize + 1,
    };
    for (b, o) in k.buffers.values().zip(&base) {
        let size = if b.elem == ElemType::MBarrier {
            0
        } else {
            b.elem.bytes() as usize
        };
        sp.place.push((*o as usize, size, b.elem));
        if b.elem == ElemType::MBarrier {
            sp.gran.push((0, 0));
            sp.mbar_base.push(sp.nmbar);
            sp.nmbar += b.elements() as usize;
            continue;
        }
        sp.gran.push(((o / g) as usize, (b.elem.bytes() / g) as usize));
        sp.mbar_base.push(0);
    }
    sp
}

/// The block's `n` threads at the kernel entry, scalar parameters bound.
fn new_threads(k: &Kernel, cfg: &ExecConfig, n: usize) -> Vec<Thread> {
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
                region: k.body(),
                pc: 0,
                kind: FrameKind::Plain,
            }],
            ..Thread::default()
        });
    }
    threads
}

/// The race detector of a block of `n` threads; pairs of inexactly aliased buffers
/// (`ir::layout::inexact_aliases`) are ordered only by block barriers.
fn new_race(k: &Kernel, n: usize, sp: &SharedPlace) -> RaceState {
    let mut race = RaceState::new(n, sp.nmbar, sp.granules);
    race.blind = crate::ir::layout::inexact_aliases(k)
        .into_iter()
        .flat_map(|(b, c)| {
            let (b, c) = (b.index() as u32, c.index() as u32);
            [(b, c), (c, b)]
        })
        .collect();
    race
}

impl<'a> BlockExec<'a> {
    /// Block `bid` of `k` at its entry.
    pub(super) fn new(
        k: &'a Kernel,
        cfg: &'a ExecConfig,
        globals: &'a mut Vec<GlobalMem>,
        bid: [u32; 3],
        steps: &'a mut u64,
    ) -> Self {
        let n = k.threads() as usize;
        let warp = cfg.target.map_or(32, |t| t.warp as usize).max(1);
        let sp = shared_place(k);
        let race = new_race(k, n, &sp);
        let zero = race.zero();
        let barrier = || BarState {
            vc: zero.clone(),
            ..BarState::default()
        };
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
            threads: new_threads(k, cfg, n),
            ready: (0..n).rev().collect(),
            cur: 0,
            running: false,
            cur_woken: false,
            deferred: None,
            rng: Rng::counter(
                cfg.sched_seed
                    ^ ((bid[0] as u64) << 20)
                    ^ ((bid[1] as u64) << 40)
                    ^ ((bid[2] as u64) << 50),
            ),
            smem: vec![0u8; sp.bytes as usize],
            written: vec![false; sp.bytes as usize],
            place: sp.place,
            gran: sp.gran,
            mbar_base: sp.mbar_base,
            bar: barrier(),
            warps: (0..n.div_ceil(warp)).map(|_| barrier()).collect(),
            race,
            copies: HashMap::new(),
            unperformed: Vec::new(),
            copy_ops: HashMap::new(),
            split: HashMap::new(),
            named: HashMap::new(),
            mbar: vec![MbarState::default(); sp.nmbar],
            layouts: layout_offsets(k, cfg.layouts, warp as u32),
            concrete: concrete_elements(k, warp as u32),
            iters,
            iter_list: vec![Vec::new()],
            tiles: HashMap::new(),
            meets: HashMap::new(),
            wgmma_groups: HashMap::new(),
            collectives: HashMap::new(),
            collective_of: HashMap::new(),
            warpgroup_ops: Vec::new(),
            parents: k.parents(),
        }
    }
}
