//! The interpreter's structured control flow: entering `for`, `if`, `while` and `stage`
//! regions, `condition`, and leaving a region (its end, or its `yield`).
//!
//! Invariant: a thread's frames mirror the region tree — one [`Frame`] per entered region,
//! whose kind says what happens at its end (next iteration, the `while` condition again, the
//! op's results). Values move with their pending wgmma marks (docs/async.md, register
//! results), so a wgmma result carried through a loop is still held. Each loop entry or
//! iteration updates the thread's iteration id (witnesses name the iteration). Complexity:
//! O(iteration values) per entry or iteration.

use super::*;

impl BlockExec<'_> {
    /// `for %i = lo to hi step s iter(...)`: C0005 on a step that is not positive; a loop of
    /// no iterations gives its initial values as results.
    pub(super) fn enter_for(
        &mut self,
        th: &mut Thread,
        op: Op,
        [lo, hi, step]: [&Operand; 3],
        init: &[Operand],
    ) -> Result<(), Stop> {
        let k = self.k;
        let (lo, hi, st) = (self.int(th, lo), self.int(th, hi), self.int(th, step));
        if st <= 0 {
            return Err(self.exec_err(op, "C0005", format!("loop step {st} is not positive")));
        }
        let inits: Vec<Val> = init.iter().map(|o| self.val(th, o)).collect();
        let pends: Vec<Option<u32>> = init.iter().map(|o| self.pend_of(th, o)).collect();
        if lo < hi {
            let body = k.ops[op].regions[0];
            let args = k.region_args(body);
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
        Ok(())
    }

    /// `if %c`: enters the arm the thread's condition picks.
    pub(super) fn enter_if(&self, th: &mut Thread, op: Op, cond: &Operand) {
        let c = self.val(th, cond).truthy();
        let r = self.k.ops[op].regions[if c { 0 } else { 1 }];
        th.frames.push(Frame {
            region: r,
            pc: 0,
            kind: FrameKind::IfArm(op),
        });
    }

    /// `while iter(...)`: enters the condition region with the initial values.
    pub(super) fn enter_while(&mut self, th: &mut Thread, op: Op, init: &[Operand]) {
        let k = self.k;
        let inits: Vec<Val> = init.iter().map(|o| self.val(th, o)).collect();
        let pends: Vec<Option<u32>> = init.iter().map(|o| self.pend_of(th, o)).collect();
        let cond = k.ops[op].regions[0];
        for ((a, v), p) in k.region_args(cond).iter().zip(&inits).zip(&pends) {
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

    /// `stage "name"`: runs its region once, in place.
    pub(super) fn enter_stage(&self, th: &mut Thread, op: Op) {
        th.frames.push(Frame {
            region: self.k.ops[op].regions[0],
            pc: 0,
            kind: FrameKind::Plain,
        });
    }

    /// `yield`: ends the region with the yielded values (and their pending marks).
    pub(super) fn yield_values(&mut self, th: &mut Thread, vals: &[Operand]) -> Result<bool, Stop> {
        let vs: Vec<Val> = vals.iter().map(|o| self.val(th, o)).collect();
        th.moving = vals.iter().map(|o| self.pend_of(th, o)).collect();
        self.end_region(th, vs)
    }

    /// `condition %c` ending a `while`'s condition region: false leaves the loop with the
    /// region's arguments as results, true runs the body with them.
    pub(super) fn condition(&mut self, th: &mut Thread, op: Op, c: &Operand) -> Result<(), Stop> {
        let k = self.k;
        let c = self.val(th, c).truthy();
        let fr = th.frames.last().cloned().expect("frame");
        let FrameKind::WhileCond(wop, n) = fr.kind else {
            return Err(self.exec_err(
                op,
                "C0004",
                "`condition` outside a while condition region".into(),
            ));
        };
        let args = k.region_args(fr.region);
        let cur: Vec<Val> = args.iter().map(|a| th.vals[a.index()]).collect();
        let pends: Vec<Option<u32>> = args.iter().map(|a| th.pend[a.index()]).collect();
        if !c {
            th.frames.pop();
            for (i, v) in cur.into_iter().enumerate() {
                self.set(th, wop, i, v);
                self.set_pend(th, wop, i, pends[i]);
            }
            self.update_iter(th);
        } else {
            let body = k.ops[wop].regions[1];
            for ((a, v), p) in k.region_args(body).iter().zip(&cur).zip(&pends) {
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
        Ok(())
    }

    /// Leaves the innermost region with `vals` (a `yield`'s, or none at the region's end).
    pub(super) fn end_region(&mut self, th: &mut Thread, vals: Vec<Val>) -> Result<bool, Stop> {
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
                self.next_iteration(th, fr.region, (op, iv, hi, step), (vals, moving));
            }
            FrameKind::WhileBody(op, n) => {
                let cond = self.k.ops[op].regions[0];
                for ((a, v), p) in self.k.region_args(cond).iter().zip(&vals).zip(&moving) {
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

    /// The end of a `for` body: the next iteration with the yielded values, or the loop's
    /// results (the last iteration values; a body without `yield` carries them unchanged).
    fn next_iteration(
        &mut self,
        th: &mut Thread,
        body: Region,
        (op, iv, hi, step): (Op, i64, i64, i64),
        (vals, moving): (Vec<Val>, Vec<Option<u32>>),
    ) {
        let k = self.k;
        let next = iv.saturating_add(step);
        let args = k.region_args(body);
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
}
