//! The interpreter's `wgmma`: both operand forms, and the register-A hold.
//!
//! Shared A: each thread reads both views at issue (recorded as async reads until a wait
//! completes the wgmma) and computes its own accumulator registers. The threads that issue
//! one wgmma in one iteration on the same views share one recording of those reads (a group
//! read, `check::race`): the first records every element and keeps the values read and the
//! distinct writes of the views' cells; each later one joins when the group read is still in
//! every cell (so nothing was written since and the values are the same) and its issue is
//! ordered after those writes, else it reads and records element by element as the first
//! did (which reports the race as before). Per wgmma: O(elements) once, O(distinct writes)
//! per further thread.
//!
//! Register A (docs/ir.md section 4): each thread's A values are read, and rounded to B's
//! element type, when it issues the wgmma. In the hardware form a thread's results need the
//! A values of the other lanes of its quad, so the wgmma is a rendezvous of the warp (PTX's
//! `.sync.aligned`: every thread of the warp executes the same wgmma): each thread deposits
//! its A values and its snapshot of B and blocks; the last thread of the warp to arrive
//! computes every deposited thread's results and wakes the others. The rendezvous orders
//! nothing between the threads (no happens-before edge), so it hides no race. In any other
//! shape a thread's results use its own A values only and nothing waits.
//!
//! The hold: from issue until a `wgmma_wait` completes the wgmma, the A values are *held*:
//! an op of the issuing thread that reads or redefines one (`ir::wgmma::register_reads`,
//! `register_writes`; another wgmma reading it as A excepted) is C0050.
//!
//! Warpgroups: wgmma, `wgmma_commit` and `wgmma_wait` are `.sync.aligned` over the 4 aligned
//! warps of a warpgroup, so every thread of a warpgroup must execute the same sequence of
//! them: a thread whose n-th such op differs from its warpgroup's is C0053 at once, and a
//! thread that exits having executed fewer than its warpgroup is C0053 when the block ends
//! (hostile H4: a wgmma under `if %t < 64` in a block of 128).
//!
//! Complexity: O(registers x K) per thread and wgmma, O(warp) bookkeeping per rendezvous, plus
//! the shared reads above.

use super::*;
use crate::ir::wgmma;

/// The shared reads of an execution of a wgmma op in one iteration: the views, the group
/// copy its reads are recorded under, the distinct writes of the views' cells at the
/// recording, and the values read.
pub(super) struct WgmmaGroup {
    views: Vec<ViewInst>,
    group: u32,
    writes: Vec<Acc>,
    values: Vec<Rc<Vec<f32>>>,
}

/// One thread's arrival at a register-A wgmma rendezvous.
pub(super) struct Deposit {
    t: usize,
    /// A values, rounded to B's element type.
    a: Vec<f32>,
    /// B's elements (row-major view order), read at this thread's issue.
    b: Vec<f32>,
    accs: Vec<f32>,
    copy: u32,
}

/// A warp's register-A wgmma rendezvous in progress.
#[derive(Default)]
pub(super) struct Meet {
    op: Option<Op>,
    arrived: Vec<Deposit>,
}

impl BlockExec<'_> {
    /// Executes `%d.. = wgmma A, %b, %c..` for `th`. Ok(false): the thread waits for the rest
    /// of its warp (register A in the hardware form).
    pub(super) fn exec_wgmma(
        &mut self,
        th: &mut Thread,
        op: Op,
        (a, b, acc): (&WgmmaA, MemRef, &WgmmaAcc),
    ) -> Result<bool, Stop> {
        let t = th.lin as usize;
        let p = PendingCopy {
            issuer: t,
            op,
            writes: Rc::new((Vec::new(), Cell::new(true))),
            store: None,
            mbar: None,
        };
        let c = self.new_copy(th, op, p);
        self.issue_collective(th, op, c);
        let mut views = self.wgmma_reads(th, op, a.shared().into_iter().chain([b]), c)?;
        th.groups[2].0.push(c);
        let accs: Vec<f32> = acc.all().iter().map(|o| self.val(th, o).as_f32()).collect();
        let hw = wgmma::hardware_shape(self.k, a, b, accs.len()).is_ok();
        let d = match a {
            WgmmaA::Shared(_) if hw => hardware_results(&accs, t as u64, &|r, kk| {
                views[0][wgmma::a_element(r, kk) as usize]
            }, &|kk, n| views[1][wgmma::b_element(kk, n) as usize]),
            WgmmaA::Shared(_) => abstract_results(&accs, views.iter().flat_map(|v| v.iter())),
            WgmmaA::Regs(regs) => {
                let elem = self.k.elem(b);
                let av: Vec<f32> = regs
                    .iter()
                    .map(|o| store_conv(elem, self.val(th, o)).as_f32())
                    .collect();
                for v in regs.iter().filter_map(|o| o.value()) {
                    th.held.push((v, c));
                }
                if hw {
                    let b = views.pop().map(|v| v.to_vec()).unwrap_or_default();
                    let dep = Deposit { t, a: av, b, accs, copy: c };
                    return self.meet_register_a(th, op, dep);
                }
                abstract_results(&accs, av.iter().chain(views.iter().flat_map(|v| v.iter())))
            }
        };
        set_results(self, th, op, &d, c);
        Ok(true)
    }

    /// The values of the shared operand views `mems` (row-major view order) as `th` reads
    /// them issuing wgmma `op` as copy `c`, recorded as async reads: joining the group read
    /// of the threads that issued `op` before in this iteration when that is exact (module
    /// doc), else element by element as a new group's first reader.
    fn wgmma_reads(
        &mut self,
        th: &Thread,
        op: Op,
        mems: impl Iterator<Item = MemRef>,
        c: u32,
    ) -> Result<Vec<Rc<Vec<f32>>>, Stop> {
        let views: Vec<ViewInst> = mems.map(|m| self.memref(th, m, op)).collect::<Result<_, _>>()?;
        let t = th.lin as usize;
        let buf = views.first().map_or(0, |v| v.buf.index() as u32);
        let member = self.access_of(th, op, AccKind::AsyncRead, c, buf);
        if !self.cfg.detect_races {
            return self.read_views(th, op, &views, c);
        }
        if let Some(g) = self.wgmma_groups.get(&(op, th.iter))
            && g.views == views
            && self.race.group_intact(g.group)
            && !self.race.conflict_in(&g.writes, &member, t, true)
        {
            let (group, values) = (g.group, g.values.clone());
            self.race.join_group(group, member);
            return Ok(values);
        }
        let group = self.race.new_group();
        self.race.join_group(group, member);
        let values = self.read_views(th, op, &views, group)?;
        let mut seen = Default::default();
        let mut writes = Vec::new();
        for v in &views {
            for e in 0..v.elements() {
                let at = self.cells(v.buf, v.element(e));
                self.race.writes_in(at, &mut seen, &mut writes);
            }
        }
        // Groups no thread can join any more (a cell lost their read) are dropped.
        let race = &self.race;
        self.wgmma_groups.retain(|_, g| race.group_intact(g.group));
        let g = WgmmaGroup { views, group, writes, values: values.clone() };
        self.wgmma_groups.insert((op, th.iter), g);
        Ok(values)
    }

    /// Reads and records every element of `views` for `th` as async reads of copy `c`.
    fn read_views(
        &mut self,
        th: &Thread,
        op: Op,
        views: &[ViewInst],
        c: u32,
    ) -> Result<Vec<Rc<Vec<f32>>>, Stop> {
        let mut out = Vec::new();
        for vi in views {
            let mut vals = Vec::new();
            for e in 0..vi.elements() {
                let el = vi.element(e);
                self.record(th, op, (vi.buf, el), AccKind::AsyncRead, c)?;
                vals.push(self.read_smem(vi.buf, el, op)?.as_f32());
            }
            out.push(Rc::new(vals));
        }
        Ok(out)
    }

    /// Records `th`'s next wgmma op in its warpgroup's sequence; C0053 when another thread
    /// of the warpgroup executed a different op at that position.
    pub(super) fn warpgroup_op(&mut self, th: &mut Thread, op: Op) -> Result<(), Stop> {
        let g = th.lin as usize / (4 * self.warp);
        if self.warpgroup_ops.len() <= g {
            self.warpgroup_ops.resize_with(g + 1, Vec::new);
        }
        let i = th.warpgroup_seq;
        th.warpgroup_seq += 1;
        let log = &mut self.warpgroup_ops[g];
        match log.get(i) {
            None => log.push(op),
            Some(&o) if o != op => {
                let d = self.warpgroup_split(g, op, th.lin as usize).with_label(
                    self.k.span(o),
                    "while another thread of its warpgroup executes this one",
                );
                return Err(Stop::Deadlock(d));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// C0053 for the first thread (at the block's end) that executed fewer wgmma ops than
    /// its warpgroup.
    pub(super) fn warpgroups_complete(&self) -> Result<(), Stop> {
        for th in &self.threads {
            let g = th.lin as usize / (4 * self.warp);
            let log = self.warpgroup_ops.get(g);
            if let Some(&op) = log.and_then(|l| l.get(th.warpgroup_seq)) {
                return Err(Stop::Deadlock(self.warpgroup_split(g, op, th.lin as usize)));
            }
        }
        Ok(())
    }

    fn warpgroup_split(&self, g: usize, op: Op, t: usize) -> Diagnostic {
        Diagnostic::error(DiagKind::Finding, "C0053", format!("wgmma op not executed by every thread of warpgroup {g} (`.sync.aligned`: undefined behaviour)"))
            .with_label(self.k.span(op), format!("thread {t} does not execute this with its warpgroup"))
            .with_help("a wgmma, `wgmma_commit` and `wgmma_wait` must be executed by all 128 threads of a warpgroup together: move it out of control that splits the warpgroup")
            .with_note(format!("block {}", fmt_xyz(self.bid)))
    }

    /// Deposits `th`'s register-A arrival at its warp's rendezvous; the last thread of the
    /// warp computes everyone's results. Ok(false): `th` waits for the others.
    fn meet_register_a(&mut self, th: &mut Thread, op: Op, dep: Deposit) -> Result<bool, Stop> {
        let t = th.lin as usize;
        let w = t / self.warp;
        let need = (self.nthreads - w * self.warp).min(self.warp);
        if let Some(prev) = self.meets.get(&w).and_then(|m| m.op)
            && prev != op
        {
            let d = Diagnostic::error(
                DiagKind::Finding,
                "C0051",
                "divergent wgmma: threads of one warp issue different register-A wgmmas",
            )
            .with_label(self.k.span(op), format!("thread {t} issues this one"))
            .with_label(self.k.span(prev), "while other threads of its warp issue this one")
            .with_help("every thread of a warpgroup must execute the same wgmma (PTX `.sync.aligned`)")
            .with_note(format!("block {}", fmt_xyz(self.bid)));
            return Err(Stop::Deadlock(d));
        }
        let meet = self.meets.entry(w).or_default();
        meet.op = Some(op);
        meet.arrived.push(dep);
        if meet.arrived.len() < need {
            th.status = Status::Blocked(Blocked::Warp(op));
            return Ok(false);
        }
        let arrived = std::mem::take(&mut meet.arrived);
        meet.op = None;
        if !need.is_multiple_of(32) {
            return Err(self.exec_err(
                op,
                "C0052",
                format!("a register-A wgmma needs whole warps; warp {w} has {need} threads"),
            ));
        }
        // A's rows of this warp, from the lanes that hold them.
        let mut amat = vec![f32::NAN; (wgmma::M * wgmma::K) as usize];
        for d in &arrived {
            for (i, x) in d.a.iter().enumerate() {
                let (r, col) = wgmma::a_fragment_position(d.t as u64, i as u64);
                amat[(r * wgmma::K + col) as usize] = *x;
            }
        }
        for d in arrived {
            let res = hardware_results(
                &d.accs,
                d.t as u64,
                &|r, kk| amat[(r * wgmma::K + kk) as usize],
                &|kk, n| d.b[wgmma::b_element(kk, n) as usize],
            );
            if d.t == t {
                set_results(self, th, op, &res, d.copy);
            } else {
                let mut other = std::mem::take(&mut self.threads[d.t]);
                set_results(self, &mut other, op, &res, d.copy);
                self.threads[d.t] = other;
                self.wake_acquired(d.t);
            }
        }
        Ok(true)
    }

    /// C0050: `op` reads or redefines a value that a wgmma of this thread still holds as
    /// register A.
    pub(super) fn check_held_registers(&self, th: &mut Thread, op: Op) -> Result<(), Stop> {
        th.held.retain(|(_, c)| !self.own_done(*c));
        if th.held.is_empty() {
            return Ok(());
        }
        let k = self.k;
        let reads = wgmma::register_reads(k, op);
        let writes = wgmma::register_writes(k, self.parents, op);
        for (vals, how) in [(reads, "reads"), (writes, "redefines")] {
            let Some((v, c)) = th
                .held
                .iter()
                .find(|(v, _)| vals.contains(v))
                .copied()
            else {
                continue;
            };
            let w = self.copy_ops.get(&c).map_or(op, |x| x.0);
            let t = self.cur;
            let d = Diagnostic::error(
                DiagKind::Finding,
                "C0050",
                format!("{how} a register that a pending `wgmma` reads as A"),
            )
            .with_label(
                k.span(op),
                format!("{how} it in thread {t} {}", fmt_xyz(xyz_of(k, t as u32))),
            )
            .with_label(k.span(w), "the wgmma holding it as A")
            .with_note(format!("block {}", fmt_xyz(self.bid)))
            .with_note(format!("the register holds %{}", k.value_name(v)))
            .with_help("the A registers of a wgmma may not be accessed until a wgmma_wait completes it (`smemsync sync` places the weakest)");
            return Err(Stop::Exec(d));
        }
        Ok(())
    }
}

/// Writes a wgmma's results into `th`, each marked pending on execution `c`.
fn set_results(x: &BlockExec<'_>, th: &mut Thread, op: Op, d: &[f32], c: u32) {
    for (i, v) in d.iter().enumerate() {
        x.set(th, op, i, Val::F32(*v));
        x.set_pend(th, op, i, Some(c));
    }
}

/// The hardware form: register `i` of thread `t` is `D[row][col] = C_i + sum over k of
/// A[row][k] * B[k][col]`, products exact (f16/bf16 products fit f32), added in increasing
/// `k`, each addition rounded to f32.
fn hardware_results(
    accs: &[f32],
    t: u64,
    a: &dyn Fn(u64, u64) -> f32,
    b: &dyn Fn(u64, u64) -> f32,
) -> Vec<f32> {
    accs.iter()
        .enumerate()
        .map(|(i, &c)| {
            let (row, col) = wgmma::fragment_position(t, i as u64);
            (0..wgmma::K).fold(c, |s, kk| s + a(row, kk) * b(kk, col))
        })
        .collect()
}

/// Any other shape: each result is its accumulator plus the sum of every operand element.
fn abstract_results<'v>(accs: &[f32], elems: impl Iterator<Item = &'v f32> + Clone) -> Vec<f32> {
    accs.iter()
        .map(|&c| elems.clone().fold(c, |s, x| s + x))
        .collect()
}
