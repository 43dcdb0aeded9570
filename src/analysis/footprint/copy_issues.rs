//! Whether the threads that issue one instance of a collective tile load (`tma_load`,
//! `tdm_load`) issue the same copy (docs/ir.md, "Collective tile loads issued by several
//! threads").
//!
//! Such a load is performed once per executing thread. Copies of one instance whose view and
//! origin are equal write the same data to the same elements: they are one write (the race
//! checker merges them, `check::interp::copies`). Copies with different views write disjoint
//! elements (the views of one op differ only in leading indices, all in range, so they are
//! equal or disjoint). Copies with the same view and different origins write one element with
//! different data: a race between the issuing threads that no barrier can order — the self
//! race of a plain store (E0301/W0317, `analysis::hazards`).
//!
//! What it computes, per instance of the load's enclosing loops (constant-bound loops
//! enumerated, up to [`super::MAX_INSTANCES`] instances; other loop variables unknown): for
//! every thread that may execute the instance (guards evaluated as in [`Footprints::touch`]),
//! its view (the unit key of the view's first element) and its origin. [`CopyIssues::Differ`]
//! when two threads that surely execute it (every guard known) share a view with different
//! origins; [`CopyIssues::Same`] when at most one thread may execute it, or all origins are
//! known and equal, or every view's issuers agree on a known origin; otherwise
//! [`CopyIssues::Unknown`]. Exact where values are known: an unknown value or guard never
//! yields `Same` unless the origins are known equal or a single thread may execute.
//!
//! Complexity: O(instances · threads · (|origin| + |view indices|)) evaluations, each memoized
//! per thread; asked only for a load whose origin is not executor-uniform
//! ([`crate::analysis::uniformity::Uniformity::executor_uniform`]), so kernels that issue
//! each copy from one elected thread or with a uniform origin pay nothing.

use super::*;

/// The issues of one collective load, over its instances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyIssues {
    /// Every instance's executing threads issue one copy per view.
    Same,
    /// Threads `threads` both execute one instance and copy into the view whose first unit is
    /// `unit` from origins `origins`.
    Differ {
        threads: (u32, u32),
        origins: (Vec<i64>, Vec<i64>),
        unit: u64,
    },
    /// Not decided (an unknown origin, view or guard, or a difference between threads that
    /// may not both execute).
    Unknown,
}

/// Per view: the first issuer's origin, and the first issuer that surely executes.
struct ViewIssuers {
    first: Vec<i64>,
    sure: Option<(Vec<i64>, u32)>,
}

impl Footprints<'_> {
    /// The origin of access `ai` when it is a collective `tma_load`/`tdm_load` whose origin
    /// is not executor-uniform (its issuers may copy different tiles); `None` otherwise.
    fn issued_origin(&self, ai: usize) -> Option<&[Operand]> {
        let a = &self.accesses[ai];
        let origin = match &self.k.ops[a.id.op].kind {
            OpKind::TmaLoad { origin, .. } | OpKind::TdmLoad { origin, .. } => origin,
            _ => return None,
        };
        let collective = matches!(a.access.footprint, Footprint::Collective { .. })
            && matches!(
                a.access.kind,
                AccessKind::AsyncWrite(AsyncClass::Tma | AsyncClass::Tdm)
            );
        let uniform = origin.iter().all(|o| self.uniform.executor_uniform(o));
        (collective && !uniform).then_some(origin.as_slice())
    }

    /// Whether access `ai` is a collective load whose issuers may copy different tiles
    /// (the question of [`Footprints::copy_issues`] and `symbolic::copies`).
    pub fn issued_copy(&self, ai: usize) -> bool {
        self.issued_origin(ai).is_some()
    }

    /// [`CopyIssues`] of access `ai` when it is a collective `tma_load`/`tdm_load` whose
    /// origin is not executor-uniform; `None` for any other access (its copies are one).
    pub fn copy_issues(&mut self, ai: usize) -> Option<CopyIssues> {
        let origin = self.issued_origin(ai)?.to_vec();
        let loops = self.accesses[ai].loops.clone();
        let mut memo = DenseMemo::new(self.k);
        let mut env = Env::default();
        let mut unknown = false;
        let budget = super::MAX_INSTANCES;
        let r = self.issues_in(ai, &origin, &loops, &mut env, &mut memo, budget, &mut unknown);
        Some(r.unwrap_or(if unknown {
            CopyIssues::Unknown
        } else {
            CopyIssues::Same
        }))
    }

    /// Enumerates the loops from `loops[0]` on (constant domains only, within `budget`
    /// instances); `Some(Differ)` at the first instance with a definite race, else sets
    /// `unknown` for an undecided instance.
    #[expect(clippy::too_many_arguments, reason = "recursive enumeration state")]
    fn issues_in(
        &self,
        ai: usize,
        origin: &[Operand],
        loops: &[Op],
        env: &mut Env,
        memo: &mut DenseMemo,
        budget: usize,
        unknown: &mut bool,
    ) -> Option<CopyIssues> {
        let Some((&l, rest)) = loops.split_first() else {
            return match self.issues_at(ai, origin, env, memo) {
                CopyIssues::Same => None,
                CopyIssues::Unknown => {
                    *unknown = true;
                    None
                }
                d => Some(d),
            };
        };
        let values = match (self.domains.get(&l).copied(), &self.k.ops[l].kind) {
            (Some(LoopDomain::Exact { step, trip }), OpKind::For { lo, .. })
                if (trip.max(0) as usize) <= budget =>
            {
                memo.new_env();
                self.eval_operand(lo, env, 0, memo)
                    .map(|lo| (0..trip.max(0)).map(|i| lo + i * step).collect::<Vec<_>>())
            }
            _ => None,
        };
        let iv = match &self.k.ops[l].kind {
            OpKind::For { .. } => Some(self.k.region_args(self.k.ops[l].regions[0])[0]),
            _ => None,
        };
        match (values, iv) {
            (Some(vals), Some(iv)) => {
                let budget = budget / vals.len().max(1);
                for x in vals {
                    env.insert(iv, x);
                    let r = self.issues_in(ai, origin, rest, env, memo, budget, unknown);
                    if r.is_some() {
                        return r;
                    }
                }
                env.remove(&iv);
                None
            }
            _ => self.issues_in(ai, origin, rest, env, memo, budget, unknown),
        }
    }

    /// [`CopyIssues`] of one instance (loop variables in `env`).
    fn issues_at(
        &self,
        ai: usize,
        origin: &[Operand],
        env: &Env,
        memo: &mut DenseMemo,
    ) -> CopyIssues {
        let a = &self.accesses[ai];
        let guards = self.guards(a.id.op);
        let shape = self.k.shape(a.access.mem);
        let mut s = IndexScratch::default();
        let mut views: HashMap<u64, ViewIssuers> = HashMap::default();
        let (mut executors, mut undecided, mut differ) = (0usize, false, false);
        let mut first_origin: Option<Option<Vec<i64>>> = None;
        memo.new_env();
        for tid in 0..self.k.threads().max(1) {
            memo.new_thread();
            if !self.executes(&guards, env, tid, memo) {
                continue;
            }
            executors += 1;
            let sure = guards.iter().all(|&(c, then)| {
                self.eval_operand(c, env, tid, memo)
                    .is_some_and(|c| (c != 0) == then)
            });
            let org: Option<Vec<i64>> =
                origin.iter().map(|o| self.eval_operand(o, env, tid, memo)).collect();
            let first = first_origin.get_or_insert_with(|| org.clone());
            if first.is_none() || *first != org {
                differ = true;
            }
            s.cur.clear();
            s.cur.resize(shape.len(), Some(0));
            let view = self
                .root_index(a.access.mem, &mut s, env, tid, memo)
                .and_then(|b| self.unit_key(b, &s.root))
                .map(|(key, _)| key);
            let (Some(view), Some(org)) = (view, org) else {
                undecided = true;
                continue;
            };
            let v = views.entry(view).or_insert_with(|| ViewIssuers {
                first: org.clone(),
                sure: None,
            });
            undecided |= v.first != org;
            if !sure {
                continue;
            }
            match &v.sure {
                Some((o, t)) if *o != org => {
                    return CopyIssues::Differ {
                        threads: (*t, tid),
                        origins: (o.clone(), org),
                        unit: view,
                    };
                }
                Some(_) => {}
                None => v.sure = Some((org, tid)),
            }
        }
        if executors <= 1 || !differ || !undecided {
            CopyIssues::Same
        } else {
            CopyIssues::Unknown
        }
    }
}
