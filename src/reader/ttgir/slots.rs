//! Rotating shared descriptors: a `!ttg.memdesc` carried through `scf.for` `iter_args`, or
//! chosen by an `scf.if`, that is a different slot of one multi-buffered allocation in
//! different iterations (AMD's pipeliner carries `%a = ttg.memdesc_index %buf[%c0]` and
//! yields `ttg.memdesc_index %buf[%next]`) is imported as an `i32` slot index carried in its
//! place; the view is rebuilt from the index where the descriptor is used:
//! `%a = view @buf[%a_slot]`, as Triton's NVIDIA pipeliner writes its kernels itself.
//!
//! **Why the index form is exact.** Every value the descriptor takes (its initial value and
//! every yielded one) is `V(s) = views(@buf[s])` for one allocation `@buf` and one chain of
//! views (`memdesc_subslice` ranges, `memdesc_trans`/`memdesc_reinterpret`), differing only
//! in the index `s`. `V` is a pure function of `s`, so carrying `s` and applying `V` where the
//! descriptor is used gives the same descriptor in every iteration, by induction on the
//! iteration number (iteration 0: the initial index; iteration `i+1`: the index of the value
//! yielded in iteration `i`); the loop's result is `V` of the result index. An `scf.if` result
//! is the same argument over one execution. A slot index whose initial value and yielded value
//! equal those of another iteration value of the same loop (the same immediate, the same
//! yielded SSA value, or iteration values already shown equal) is that value in every
//! iteration, by a simultaneous induction over all such pairs, so it is not carried twice:
//! Triton's own slot counter then indexes the views, which `ir::induction` recognizes.
//!
//! Refused with E1600, naming the condition that failed: a descriptor (initial or yielded)
//! that is not such a slot, slots of different allocations, one allocation viewed
//! differently, and mbarriers that change between iterations.
//!
//! Complexity: linear in the loop's lines per carried descriptor, plus O(n³) index
//! comparisons to merge the slot indices of a loop with `n` iteration values.

use super::convert::{Converter, Mem, V, operands};
use super::lexer::T;
use crate::diag::{Diagnostic, Span};

/// One view applied after the index.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Step {
    /// `memdesc_subslice`: the `.kir` ranges and the view's shape.
    Sub(String, Vec<u64>),
    /// `memdesc_trans` / `memdesc_reinterpret`: the same bytes, ownership unknown.
    Alias,
}

/// How a descriptor is built from one slot of a multi-buffered allocation.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    /// The allocation (`@buf`), its shape and whether its accesses keep their layouts.
    pub base: String,
    pub base_shape: Vec<u64>,
    pub base_exact: bool,
    /// The root buffer (index in `Converter::buffers`).
    pub buf: usize,
    /// The index value (a TTGIR name; `"NAME slot"` for a carried index).
    pub idx: String,
    /// Views applied after the index, in order.
    pub steps: Vec<Step>,
}

impl Slot {
    /// The slot with one more view applied.
    pub fn then(mut self, s: Step) -> Slot {
        self.steps.push(s);
        self
    }
}

/// One position of the `scf.yield` that ends the region being converted.
#[derive(Clone, Debug)]
pub(super) struct Keep {
    /// Position among the yielded values.
    pub pos: usize,
    /// Whether the value is written in the `.kir` `yield` (false: checked only).
    pub emit: bool,
    /// For a descriptor carried as a slot index: what it must be.
    pub slot: Option<SlotKeep>,
}

impl Keep {
    /// A register value, written as it is.
    pub fn plain(pos: usize) -> Keep {
        Keep {
            pos,
            emit: true,
            slot: None,
        }
    }
}

/// The requirement on a yielded descriptor carried as a slot index.
#[derive(Clone, Debug)]
pub(super) struct SlotKeep {
    /// The carried descriptor (iteration value or `scf.if` result) and whether a loop
    /// carries it (else an `scf.if` chooses it), for messages.
    pub arg: String,
    pub in_loop: bool,
    /// The allocation and views every value must have (the initial value's; an `scf.if`'s
    /// first arm sets it), with a description of where they came from.
    pub sig: Option<(Slot, String)>,
    /// The yield position whose index this one equals (merged indices: checked only).
    pub same_as: Option<usize>,
}

/// What the yielded value at a position is, for merging indices (see the module doc).
#[derive(Clone, Debug, PartialEq)]
enum Next {
    /// A TTGIR value (the yielded integer, or the index of a yielded `memdesc_index`).
    Name(String),
    /// The iteration value at that position.
    Arg(usize),
    /// Not known before the body is converted: never merged.
    Unknown,
}

/// How an iteration value of an `scf.for` is carried.
pub(super) enum Carry {
    /// A register value of this scalar type.
    Plain(&'static str),
    /// A descriptor carried as a slot index (its initial slot).
    Slot(Slot),
    /// A descriptor yielded unchanged (bound to its initial value), or no shared state.
    Static,
}

impl Converter<'_> {
    /// The slot a `memdesc_index %m[%idx]` result is, when `m` is a whole allocation.
    pub fn slot_of_index(&self, m: &Mem, idx: &str) -> Option<Slot> {
        let whole = self.buffers.get(m.buf).map(|b| format!("@{}", b.name));
        (m.slot.is_none() && whole.as_deref() == Some(m.kir.as_str())).then(|| Slot {
            base: m.kir.clone(),
            base_shape: m.shape.clone(),
            base_exact: m.exact,
            buf: m.buf,
            idx: idx.to_string(),
            steps: Vec::new(),
        })
    }

    /// The descriptor of `slot` in root buffer `buf`: its `view` lines are written when
    /// `write` (else the descriptor is only bound, for a value nothing but a yield reads).
    pub fn rebuild_view(
        &mut self,
        slot: Slot,
        buf: usize,
        hint: &str,
        write: bool,
        span: Span,
    ) -> Result<Mem, Diagnostic> {
        let iv = self.value(&slot.idx, span)?;
        let v = self.fresh(hint);
        if write {
            self.emit(format!("%{v} = view {}[{iv}]", slot.base), None);
        }
        let mut kir = format!("%{v}");
        let mut shape = slot.base_shape.get(1..).unwrap_or_default().to_vec();
        let mut exact = slot.base_exact;
        for s in &slot.steps {
            match s {
                Step::Sub(r, sh) => {
                    let w = self.fresh(hint);
                    if write {
                        self.emit(format!("%{w} = view {kir}[{r}]"), None);
                    }
                    kir = format!("%{w}");
                    shape = sh.clone();
                }
                Step::Alias => exact = false,
            }
        }
        Ok(Mem {
            kir,
            shape,
            buf,
            exact,
            slot: Some(slot),
        })
    }

    /// The values (with spans) of the last `scf.yield` of the region opened at line `open`,
    /// and that line.
    pub fn loop_yield(&self, open: usize) -> Option<(usize, Vec<(String, Span)>)> {
        let end = self.skip_region(open);
        (open + 1..end).rev().find_map(|j| {
            let st = self.stmt(j).ok()?;
            (st.op == "scf.yield").then(|| (j, operands(&st.rest)))
        })
    }

    /// Whether a line in `from..to` other than `skip` uses `name` as an operand.
    pub fn used_between(&self, name: &str, from: usize, to: usize, skip: Option<usize>) -> bool {
        (from..to.min(self.lines.len())).any(|j| {
            Some(j) != skip
                && self
                    .stmt(j)
                    .is_ok_and(|st| operands(&st.rest).iter().any(|(n, _)| n == name))
        })
    }

    /// The statement in `from..to` that defines `name`.
    pub(super) fn def_in(&self, name: &str, from: usize, to: usize) -> Option<super::convert::Stmt> {
        (from..to).find_map(|j| {
            let st = self.stmt(j).ok()?;
            st.results.iter().any(|r| r.0 == name).then_some(st)
        })
    }

    /// How the `scf.for` opened at `open` carries the descriptor `arg` (initially `init`)
    /// that it yields as `yielded`: `None` when the loop yields it unchanged (bound to its
    /// initial value, as before), else its initial slot and initial index; a
    /// descriptor that changes but is not a slot is E1600 at the yielded value.
    pub fn carried_slot(
        &mut self,
        open: usize,
        (arg, init, sp): (&str, &str, Span),
        yielded: Option<&(String, Span)>,
    ) -> Result<Option<(Slot, String)>, Diagnostic> {
        let Some((y, ys)) = yielded else {
            return Ok(None);
        };
        let end = self.skip_region(open);
        let carried = self.vals.get(init).cloned();
        let same_outside = self.def_in(y, open + 1, end).is_none()
            && match (&carried, self.vals.get(y)) {
                (Some(V::Mem(m)), Some(V::Mem(n))) => m.kir == n.kir && m.shape == n.shape,
                (Some(V::Mbar(x, i)), Some(V::Mbar(z, j))) => x == z && i == j,
                _ => false,
            };
        if y == arg || y == init || same_outside {
            return Ok(None);
        }
        let cond = match carried {
            Some(V::Mem(m)) => match m.slot {
                Some(s) => {
                    let v = self.value(&s.idx, sp)?;
                    return Ok(Some((s, v)));
                }
                None => format!("its initial value `%{init}` {NOT_A_SLOT}"),
            },
            Some(V::Mbar(..)) => {
                "it is an mbarrier (only data buffers are carried as slot indices)".into()
            }
            _ => return Ok(None),
        };
        Err(refusal(&format!("the loop carries the shared-memory descriptor `%{arg}` but yields `%{y}`, another one, and {cond}"), *ys))
    }

    /// For each iteration value of the loop opened at `open`, the position whose carried
    /// value it is (itself, or an equal one: see the module doc); only slot indices are
    /// merged, into integer iteration values or earlier slot indices.
    pub fn slot_reps(
        &self,
        open: usize,
        pairs: &[(String, String, Span)],
        carry: &[Carry],
        inits: &[Option<String>],
        yielded: &[(String, Span)],
    ) -> Vec<usize> {
        let end = self.skip_region(open);
        let n = pairs.len();
        let next: Vec<Next> = (0..n)
            .map(|k| {
                let Some((y, _)) = yielded.get(k) else {
                    return Next::Unknown;
                };
                if let Some(p) = pairs.iter().position(|(a, _, _)| a == y) {
                    return Next::Arg(p);
                }
                match &carry[k] {
                    Carry::Plain("i32") => Next::Name(y.clone()),
                    Carry::Slot(_) => match self.def_in(y, open + 1, end) {
                        Some(st) if st.op == "ttg.memdesc_index" => operands(&st.rest)
                            .get(1)
                            .map_or(Next::Unknown, |o| Next::Name(o.0.clone())),
                        _ => Next::Unknown,
                    },
                    _ => Next::Unknown,
                }
            })
            .collect();
        let mut rep: Vec<usize> = (0..n).collect();
        let find = |rep: &[usize], mut p: usize| {
            for _ in 0..=n {
                if rep[p] == p {
                    break;
                }
                p = rep[p];
            }
            p
        };
        let key = |rep: &[usize], k: usize| match &next[k] {
            Next::Arg(p) => Next::Arg(find(rep, *p)),
            x => x.clone(),
        };
        for _ in 0..=n {
            let mut changed = false;
            for k in 0..n {
                if !matches!(carry[k], Carry::Slot(_))
                    || next[k] == Next::Unknown
                    || find(&rep, k) != k
                {
                    continue;
                }
                let kk = key(&rep, k);
                let cand = (0..n).find(|&j| {
                    let eligible = match carry[j] {
                        Carry::Plain(t) => t == "i32",
                        Carry::Slot(_) => j < k,
                        Carry::Static => false,
                    };
                    j != k
                        && eligible
                        && find(&rep, j) == j
                        && inits[j].is_some()
                        && inits[j] == inits[k]
                        && key(&rep, j) == kk
                });
                if let Some(j) = cand {
                    rep[k] = j;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        (0..n).map(|k| find(&rep, k)).collect()
    }

    /// Checks a descriptor `%y` yielded at a slot position against its requirement (the
    /// allocation and views of the first value; none yet in an `scf.if`'s first arm, where
    /// the caller records the returned slot as the requirement), and returns its slot.
    pub fn yielded_slot(
        &self,
        y: &str,
        span: Span,
        req: &SlotKeep,
    ) -> Result<Slot, Diagnostic> {
        let prefix = if req.in_loop {
            format!(
                "the loop carries the shared-memory descriptor `%{}` but yields `%{y}`, another one, and",
                req.arg
            )
        } else {
            format!(
                "the `scf.if` result `%{}` is a shared-memory descriptor chosen by the arms (this one yields `%{y}`), and",
                req.arg
            )
        };
        let cond = match self.vals.get(y) {
            Some(V::Mem(m)) => match (&m.slot, &req.sig) {
                (Some(s), None) => return Ok(s.clone()),
                (Some(s), Some((f, from))) if s.base != f.base => format!(
                    "`%{y}` is a slot of `{}` while {from} is a slot of `{}`: slots of different allocations",
                    s.base, f.base
                ),
                (Some(s), Some((f, from))) if s.steps != f.steps => format!(
                    "`%{y}` and {from} are slots of `{}` viewed differently after the index (`memdesc_subslice`, `memdesc_trans`, `memdesc_reinterpret`)",
                    s.base
                ),
                (Some(s), Some(_)) => return Ok(s.clone()),
                (None, _) => format!("`%{y}` {NOT_A_SLOT}"),
            },
            Some(V::Mbar(..)) => {
                format!("`%{y}` is an mbarrier (only data buffers are carried as slot indices)")
            }
            _ => format!("`%{y}` is not a shared-memory descriptor"),
        };
        Err(refusal(&format!("{prefix} {cond}"), span))
    }
}

impl Converter<'_> {
    /// The shared descriptors an `scf.while` opened at `open` carries (`ops`: its
    /// `%arg = %init` pairs) must be yielded unchanged by its `do` region: the importer binds
    /// them to their initial values (slot indices are carried only through `scf.for`), so a
    /// `while` that yields another one is E1600 at the yielded value.
    pub fn while_descriptors_unchanged(
        &self,
        open: usize,
        ops: &[(String, Span)],
    ) -> Result<(), Diagnostic> {
        let Some((_, yielded)) = self.loop_yield(open) else {
            return Ok(());
        };
        let end = self.skip_region(open);
        let body_args: Vec<String> = (open + 1..end)
            .find(|&j| self.lines[j - 1].word(1) == Some("do"))
            .and_then(|j| self.lines.get(j))
            .filter(|l| matches!(l.toks.first().map(|t| &t.t), Some(T::Caret(_))))
            .map(|l| {
                l.toks
                    .iter()
                    .filter_map(|t| match &t.t {
                        T::Val(n) => Some(n.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (k, c) in ops.chunks(2).enumerate() {
            let [(arg, _), (init, _)] = c else { continue };
            if !matches!(self.vals.get(init), Some(V::Mem(_) | V::Mbar(..))) {
                continue;
            }
            let Some((y, ys)) = yielded.get(k) else { continue };
            if y == arg || y == init || body_args.get(k) == Some(y) {
                continue;
            }
            return Err(refusal(
                &format!(
                    "the `scf.while` carries the shared-memory descriptor `%{arg}` but yields `%{y}`, \
                     another one, and only `scf.for` loops carry descriptors as slot indices"
                ),
                *ys,
            ));
        }
        Ok(())
    }
}

/// What a value that is not a slot is.
const NOT_A_SLOT: &str = "is not a slot of a multi-buffered allocation (a `ttg.memdesc_index` \
     of a `ttg.local_alloc`, possibly viewed through `memdesc_subslice`, `memdesc_trans` or \
     `memdesc_reinterpret`)";

/// E1600 at the yielded value.
fn refusal(msg: &str, span: Span) -> Diagnostic {
    Diagnostic::user(
        "E1600",
        format!(
            "{msg}: a shared-memory descriptor that changes between iterations or arms is \
             imported only as a slot of one multi-buffered allocation (the same views of \
             `ttg.memdesc_index` of one `ttg.local_alloc`), carried as an `i32` index"
        ),
    )
    .with_label(span, "yielded here")
}
