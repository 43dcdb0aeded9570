//! Module, function and region structure of the TTGIR importer: `#alias` definitions, the
//! `module attributes` (warps, lanes, target), `tt.func public` headers (parameters become
//! `.kir` scalar parameters and global buffers), and `scf.for`/`scf.if`/`scf.while`/
//! `scf.execute_region` regions with their iteration values and results.
//!
//! Invariant: a region is consumed up to its matching closing line, whatever its body holds;
//! an unterminated region is E1103 at its opening line. Complexity: linear in lines.

use super::convert::{Converter, KernelOut, V, bad, operands};
use super::slots::{Carry, Keep, Slot, SlotKeep};
use super::lexer::T;
use super::types::{self, Ty};
use crate::diag::{Diagnostic, Span};

/// Default of every `i32` parameter for interpretation and executed-barrier counts.
pub const DEFAULT_I32: i64 = 256;

impl Converter<'_> {
    /// Reads the whole module.
    pub fn module(&mut self) -> Result<(), Vec<Diagnostic>> {
        let mut errs = Vec::new();
        while self.pos < self.lines.len() {
            let i = self.pos;
            let line = &self.lines[i];
            match (&line.toks[0].t, line.toks.get(1).map(|t| &t.t)) {
                (T::Ty(a), Some(T::P('='))) if a.starts_with('#') => {
                    let name = a[1..].to_string();
                    let text = line.toks.get(2).map(|t| self.text_of(t.span)).unwrap_or("");
                    self.aliases.insert(name, text.to_string());
                    self.pos += 1;
                }
                (T::Word(w), _) if w == "module" => {
                    errs.extend(self.module_attrs(i));
                    self.pos += 1;
                }
                (T::Word(w), _) if w == "tt.func" => {
                    if let Err(e) = self.func(i) {
                        errs.push(e);
                        self.pos = self.skip_region(i);
                    }
                }
                (T::P('}'), _) => self.pos += 1,
                _ => {
                    let t = &line.toks[0];
                    errs.push(bad(t.span, "expected `module`, `tt.func` or `#alias = ...`"));
                    self.pos += 1;
                }
            }
        }
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }

    fn text_of(&self, s: Span) -> &str {
        self.src.get(s.lo as usize..s.hi as usize).unwrap_or("")
    }

    /// Reads the module's warps, lanes and target; values no kernel can have (no warps, a
    /// warp width other than 32 or 64, more than 1024 threads, a target smemsync does not
    /// know) are E1111-E1113 at the attribute.
    fn module_attrs(&mut self, i: usize) -> Vec<Diagnostic> {
        let line = &self.lines[i];
        let base = line.span.lo;
        let text = self.text(line).to_string();
        let at = |key: &str| {
            let k = text.find(key).unwrap_or(0) as u32;
            Span { lo: base + k, hi: base + k + key.len() as u32 }
        };
        let mut errs = Vec::new();
        let mut refuse = |code: &'static str, key: &str, msg: String| {
            errs.push(Diagnostic::user(code, msg).with_label(at(key), "declared here"));
        };
        if let Some(w) = super::types::int_attr(&text, "\"ttg.num-warps\"") {
            if !(1..=32).contains(&w) {
                let msg = format!("`ttg.num-warps` = {w}: a kernel has 1 to 32 warps");
                refuse("E1111", "\"ttg.num-warps\"", msg);
            }
            self.warps = w.clamp(1, 32) as u64;
        }
        if let Some(l) = super::types::int_attr(&text, "\"ttg.threads-per-warp\"") {
            if l != 32 && l != 64 {
                let msg = format!("`ttg.threads-per-warp` = {l}: warps have 32 or 64 threads");
                refuse("E1112", "\"ttg.threads-per-warp\"", msg);
            }
            self.lanes = l.clamp(1, 64) as u64;
        }
        if self.warps * self.lanes > 1024 {
            let msg = format!(
                "{} warps of {} threads: a block has at most 1024 threads",
                self.warps, self.lanes
            );
            refuse("E1111", "\"ttg.num-warps\"", msg);
        }
        if let Some(k) = text.find("ttg.target = \"") {
            let rest = &text[k + 14..];
            let t = &rest[..rest.find('"').unwrap_or(0)];
            self.target = match t {
                "cuda:90" => Some("sm_90".into()),
                "cuda:80" | "cuda:86" | "cuda:89" => Some("sm_80".into()),
                t if t.starts_with("hip:") => Some(t[4..].to_string()),
                _ => None,
            };
            if self.target.as_deref().is_none_or(|n| crate::target::Target::from_name(n).is_err()) {
                let msg = format!(
                    "`ttg.target` = \"{t}\" is not a target smemsync knows (cuda:80, cuda:86, cuda:89, cuda:90, hip:gfx942, hip:gfx950, hip:gfx1200, hip:gfx1201, hip:gfx1250)"
                );
                refuse("E1113", "ttg.target", msg);
            }
            self.nvidia = t.starts_with("cuda");
        }
        self.has_offsets = self.src.contains("allocation.offset");
        errs
    }

    /// The line after the region opened at line `i` (matching braces by lines).
    pub fn skip_region(&self, i: usize) -> usize {
        let mut depth = 0i64;
        let mut j = i;
        while j < self.lines.len() {
            let l = &self.lines[j];
            for t in &l.toks {
                match t.t {
                    T::P('{') => depth += 1,
                    T::P('}') => depth -= 1,
                    _ => {}
                }
            }
            j += 1;
            if depth <= 0 {
                return j;
            }
        }
        j
    }

    /// One `tt.func`: public ones become kernels, others are skipped (calls to them get the
    /// conservative model of an unknown op).
    fn func(&mut self, i: usize) -> Result<(), Diagnostic> {
        let line = self.lines[i].clone();
        let public = line.word(1) == Some("public");
        if !public {
            self.pos = self.skip_region(i);
            return Ok(());
        }
        let name = line
            .toks
            .iter()
            .find_map(|t| match &t.t {
                T::Sym(s) => Some(s.clone()),
                _ => None,
            })
            .ok_or_else(|| bad(line.span, "expected the function name `@name`"))?;
        self.params(&line)?;
        self.out.clear();
        self.buffers.clear();
        self.need_elect = false;
        self.groups.clear();
        self.role_layouts.clear();
        self.int_ranges.clear();
        self.extra_warps = 0;
        self.pos = i + 1;
        self.region(i)?;
        let body = std::mem::take(&mut self.out);
        let header = self.header(&name);
        self.kernels.push(KernelOut { header, body });
        Ok(())
    }

    /// The function's parameters: pointers become global buffers (shaped later), integers and
    /// floats scalar parameters.
    fn params(&mut self, line: &super::lexer::Line) -> Result<(), Diagnostic> {
        let toks = &line.toks;
        let Some(open) = toks.iter().position(|t| t.t == T::P('(')) else {
            return Err(bad(line.span, "expected the parameter list"));
        };
        let mut k = open + 1;
        let mut depth = 1;
        while k < toks.len() && depth > 0 {
            match &toks[k].t {
                T::P('(') | T::P('{') => depth += 1,
                T::P(')') | T::P('}') => depth -= 1,
                T::Val(n) if depth == 1 => {
                    let ty = match toks.get(k + 2).map(|t| &t.t) {
                        Some(T::Ty(x) | T::Word(x)) if toks[k + 1].t == T::P(':') => x.clone(),
                        _ => return Err(bad(toks[k].span, "expected `: type` after a parameter")),
                    };
                    self.param(n, &ty);
                    k += 2;
                }
                _ => {}
            }
            k += 1;
        }
        Ok(())
    }

    fn param(&mut self, n: &str, ty: &str) {
        let kn = self.fresh(n);
        match types::classify(ty) {
            Ty::Ptr => {
                let elem = ty
                    .trim_start_matches("!tt.ptr<")
                    .trim_end_matches('>')
                    .to_string();
                let e = types::kir_elem(&elem).map_or("f32", |(e, _)| e);
                self.globals.push((kn.clone(), e, Vec::new()));
                self.vals.insert(n.to_string(), V::Ptr(Some(kn)));
            }
            Ty::Int | Ty::Bool => {
                self.scalars.push((kn.clone(), "i32"));
                self.vals.insert(n.to_string(), V::Kir(kn, "i32"));
            }
            Ty::Float => {
                self.scalars.push((kn.clone(), "f32"));
                self.vals.insert(n.to_string(), V::Kir(kn, "f32"));
            }
            _ => {
                self.vals.insert(n.to_string(), V::Unit);
            }
        }
    }

    /// The kernel header and declarations.
    fn header(&mut self, name: &str) -> String {
        let mut params: Vec<String> = self
            .scalars
            .iter()
            .map(|(n, t)| {
                if *t == "i32" {
                    format!("%{n}: i32 = {DEFAULT_I32}")
                } else {
                    format!("%{n}: f32 = 1.0")
                }
            })
            .collect();
        for (n, e, dims) in &self.globals {
            let d = if dims.is_empty() {
                "1".to_string()
            } else {
                let ds: Vec<String> = dims
                    .iter()
                    .map(|x| {
                        if x.parse::<u64>().is_ok() {
                            x.clone()
                        } else {
                            format!("%{x}")
                        }
                    })
                    .collect();
                ds.join(", ")
            };
            params.push(format!("%{n}: global {e}[{d}]"));
        }
        let threads = (self.warps + self.extra_warps) * self.lanes;
        let target = self
            .target
            .as_ref()
            .map(|t| format!(" target \"{t}\""))
            .unwrap_or_default();
        let mut h = format!(
            "kernel @{name}({}) block({threads}){target} {{\n",
            params.join(", ")
        );
        if super::LAYOUT_GRAMMAR {
            for (n, t) in &self.layout_defs {
                h.push_str(&format!("  layout \"{n}\" = {t}\n"));
            }
        } else {
            for (n, t) in &self.layout_defs {
                h.push_str(&format!("  // layout \"{n}\" = {t}\n"));
            }
        }
        for (g, lo, hi) in &self.groups {
            h.push_str(&format!("  group @{g} : threads [{lo}, {hi})\n"));
        }
        // Role-relative layouts name their group, so they follow the groups.
        let comment = if super::LAYOUT_GRAMMAR { "" } else { "// " };
        for (n, g, base) in &self.role_layouts {
            let def = base.as_ref().map(|b| format!(" = #{b}")).unwrap_or_default();
            h.push_str(&format!("  {comment}layout \"{n}\" in @{g}{def}\n"));
        }
        self.place_buffers();
        for b in &self.buffers {
            let (e, shape) = if b.mbarrier {
                ("mbarrier", vec![(b.shape.iter().product::<u64>() / 2).max(1)])
            } else {
                (b.elem, b.shape.clone())
            };
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            let at = b.offset.map(|o| format!(" at {o}")).unwrap_or_default();
            let lay = match &b.layout {
                Some(l) if !b.mbarrier => format!(" layout \"{l}\""),
                _ => String::new(),
            };
            h.push_str(&format!("  shared @{} : {e}[{}]{at}{lay}\n", b.name, dims.join(", ")));
        }
        if self.need_elect {
            h.push_str("  %tid = tid.linear\n  %elect = cmp eq %tid, 0\n");
        }
        h
    }

    /// Reads a region's statements up to its closing line (`self.pos` is the first line
    /// inside; afterwards it is the closing line's successor). `open` is the opening line.
    pub fn region(&mut self, open: usize) -> Result<(), Diagnostic> {
        while self.pos < self.lines.len() {
            let i = self.pos;
            if self.lines[i].starts_with_close() {
                let (o, c) = (self.lines[open].span.lo as usize, self.lines[i].span.lo as usize);
                self.region_end.insert(o, c);
                self.pos += 1;
                return Ok(());
            }
            self.stmt_no += 1;
            self.statement(i)?;
        }
        Err(Diagnostic::user("E1103", "region is not closed")
            .with_label(self.lines[open].span, "opened here"))
    }

    /// `scf.for`: `.kir` `for` with the scalar and register iteration values (pointers and
    /// tokens are dropped: they carry no shared-memory state).
    pub fn scf_for(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let line = st.line.clone();
        let results = st.results.clone();
        let rest = st.rest.to_vec();
        let ops = operands(&rest);
        if ops.len() < 4 {
            return Err(bad(line.span, "expected `scf.for %i = %lo to %hi step %s`"));
        }
        let iv = ops[0].0.clone();
        let iv_bits = iv_type_bits(&rest);
        if iv_bits == 64 {
            for (b, s) in &ops[1..4] {
                self.check_i64(b, "the loop bound", *s);
            }
        }
        let lo = self.value(&ops[1].0, ops[1].1)?;
        let hi = self.value(&ops[2].0, ops[2].1)?;
        let step = self.value(&ops[3].0, ops[3].1)?;
        let pairs: Vec<(String, String, Span)> = ops[4..]
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0].0.clone(), c[1].0.clone(), c[1].1))
            .collect();
        let tys = result_types_of_for(&rest);
        let (yline, yielded) = self.loop_yield(i).unwrap_or_default();
        self.record_loop_ranges(i, &ops, &tys, iv_bits, &yielded);
        let (carry, inits) = self.for_carry(i, &pairs, &tys, &results, &yielded)?;
        let reps = self.slot_reps(i, &pairs, &carry, &inits, &yielded);
        let (kept, iters, keeps) = self.for_kept(&pairs, &carry, &inits, &reps);
        let ivk = self.fresh(&iv);
        self.vals.insert(iv, V::Kir(ivk.clone(), "i32"));
        let res_names = expand_results(&results);
        let kept_res: Vec<String> = kept
            .iter()
            .map(|(k, _, _)| {
                let n = res_names.get(*k).map_or("r", String::as_str);
                match carry[*k] {
                    Carry::Slot(_) => self.fresh(&format!("{n}_slot")),
                    _ => self.fresh(n),
                }
            })
            .collect();
        let lhs = results_lhs(&kept_res);
        let it = if iters.is_empty() {
            String::new()
        } else {
            format!(" iter({})", iters.join(", "))
        };
        self.emit(
            format!("{lhs}for %{ivk} = {lo} to {hi} step {step}{it} {{"),
            Some(line.span),
        );
        self.loop_stack.push(self.loops.len());
        self.loops.push((self.stmt_no, usize::MAX));
        self.push_region();
        self.pos = i + 1;
        let end = self.skip_region(i);
        for (k, (arg, _, sp)) in pairs.iter().enumerate() {
            if let Carry::Slot(s) = &carry[k] {
                let used = self.used_between(arg, i + 1, end, Some(yline));
                self.bind_slot_view(arg, s, used, *sp)?;
            }
        }
        let saved = self.yield_kept.replace(keeps);
        let body = self.region(i);
        self.yield_kept = saved;
        body?;
        self.pop_region();
        self.close_loop();
        let res: Vec<(usize, String)> =
            kept.iter().zip(&kept_res).map(|((k, _, _), r)| (*k, r.clone())).collect();
        let ctx = ForResults {
            pairs: &pairs,
            carry: &carry,
            reps: &reps,
            res: &res,
            end,
            span: line.span,
        };
        self.bind_for_results(&res_names, &ctx)
    }

    /// How each iteration value of the `scf.for` opened at `open` is carried, with its
    /// `.kir` initial value (descriptors yielded unchanged are bound here).
    fn for_carry(
        &mut self,
        open: usize,
        pairs: &[(String, String, Span)],
        tys: &[String],
        results: &[(String, usize, Span)],
        yielded: &[(String, Span)],
    ) -> Result<(Vec<Carry>, Vec<Option<String>>), Diagnostic> {
        let mut carry = Vec::new();
        let mut inits = Vec::new();
        for (k, (arg, init, sp)) in pairs.iter().enumerate() {
            let ty = tys.get(k).map(|t| types::classify(t)).unwrap_or(Ty::Other);
            if let Some(st) = Self::lazy_ty(&ty) {
                let mut v = self.value(init, *sp)?;
                if v == "-1"
                    && let Some(n) = self.wrap_modulus(open, arg, results, k)
                {
                    // `-1` and `N-1` give the same wrapped successor: the orbit then starts
                    // on the cycle, which `ir::induction` recognizes.
                    v = (n - 1).to_string();
                }
                carry.push(Carry::Plain(st));
                inits.push(Some(v));
            } else if let Some((slot, v)) =
                self.carried_slot(open, (arg, init, *sp), yielded.get(k))?
            {
                carry.push(Carry::Slot(slot));
                inits.push(Some(v));
            } else {
                let carried = self.vals.get(init).cloned().unwrap_or(V::Unit);
                self.vals.insert(arg.clone(), carried);
                carry.push(Carry::Static);
                inits.push(None);
            }
        }
        Ok((carry, inits))
    }

    /// The `.kir` iteration values of a loop (position, name, type), their `iter(..)`
    /// texts, and what its `scf.yield` writes and checks; binds the register iteration
    /// values and every slot's index (`"ARG slot"`, the merged one's where merged).
    fn for_kept(
        &mut self,
        pairs: &[(String, String, Span)],
        carry: &[Carry],
        inits: &[Option<String>],
        reps: &[usize],
    ) -> (Vec<Kept>, Vec<String>, Vec<Keep>) {
        let mut kept = Vec::new();
        let mut iters = Vec::new();
        let mut keeps = Vec::new();
        for (k, (arg, init, _)) in pairs.iter().enumerate() {
            let (st, base, slot) = match &carry[k] {
                Carry::Plain(st) => (*st, arg.clone(), None),
                Carry::Slot(s) => {
                    let req = SlotKeep {
                        arg: arg.clone(),
                        in_loop: true,
                        sig: Some((s.clone(), format!("the initial value `%{init}`"))),
                        same_as: (reps[k] != k).then_some(reps[k]),
                    };
                    ("i32", format!("{arg}_slot"), Some(req))
                }
                Carry::Static => continue,
            };
            let emit = reps[k] == k;
            keeps.push(Keep { pos: k, emit, slot });
            if !emit {
                continue;
            }
            let kn = self.fresh(&base);
            iters.push(format!("%{kn} = {}", inits[k].as_deref().unwrap_or("0")));
            kept.push((k, kn.clone(), st));
            if matches!(carry[k], Carry::Plain(_)) {
                self.vals.insert(arg.clone(), V::Kir(kn, st));
            }
        }
        for (k, (arg, _, _)) in pairs.iter().enumerate() {
            let kn = kept.iter().find(|(j, _, _)| *j == reps[k]).map(|x| x.1.clone());
            if let (Carry::Slot(_), Some(kn)) = (&carry[k], kn) {
                self.vals.insert(format!("{arg} slot"), V::Kir(kn, "i32"));
            }
        }
        (kept, iters, keeps)
    }

    /// Binds the descriptor `name` to the view of `slot` at the index `"NAME slot"`, written
    /// when `used`.
    fn bind_slot_view(
        &mut self,
        name: &str,
        slot: &Slot,
        used: bool,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let s = Slot {
            idx: format!("{name} slot"),
            ..slot.clone()
        };
        let m = self.rebuild_view(s, slot.buf, name, used, span)?;
        self.vals.insert(name.to_string(), V::Mem(m));
        Ok(())
    }

    /// Binds the results of a converted `scf.for`: register values to the `.kir` results,
    /// slot descriptors to views of their result index (written after the loop when used),
    /// descriptors yielded unchanged to their initial values.
    fn bind_for_results(
        &mut self,
        res_names: &[String],
        ctx: &ForResults<'_>,
    ) -> Result<(), Diagnostic> {
        let res_of = |p: usize| ctx.res.iter().find(|(j, _)| *j == p).map(|x| x.1.clone());
        for (k, n) in res_names.iter().enumerate() {
            match ctx.carry.get(k) {
                Some(Carry::Plain(st)) => {
                    if let Some(r) = res_of(k) {
                        self.vals.insert(n.clone(), V::Kir(r, st));
                    }
                }
                Some(Carry::Slot(s)) => {
                    let Some(r) = res_of(ctx.reps[k]) else { continue };
                    self.vals.insert(format!("{n} slot"), V::Kir(r, "i32"));
                    let used = self.used_between(n, ctx.end, self.lines.len(), None);
                    self.bind_slot_view(n, s, used, ctx.span)?;
                }
                Some(Carry::Static) | None => {
                    let init = ctx.pairs.get(k).map(|p| p.1.clone()).unwrap_or_default();
                    let v = self.vals.get(&init).cloned().unwrap_or(V::Unit);
                    self.vals.insert(n.clone(), v);
                }
            }
        }
        Ok(())
    }

    /// Ends the innermost open `for`/`while`: records the statement that closes it in
    /// `loops` and writes its `}`.
    fn close_loop(&mut self) {
        let l = self.loop_stack.pop().unwrap_or(0);
        if let Some(x) = self.loops.get_mut(l) {
            x.1 = self.stmt_no;
        }
        self.emit("}".into(), None);
    }

    /// Binds the `do` region's block arguments (`^bb0(%b: T, ...):`, consumed when present):
    /// kept (register) values get fresh `.kir` names, written as the `do (..)` parameters
    /// this returns; the others stand for the before-region argument at their position.
    fn while_body_args(
        &mut self,
        kept: &[(usize, String, &'static str)],
        ops: &[(String, Span)],
    ) -> String {
        let mut body_args = Vec::new();
        if let Some(l) = self.lines.get(self.pos)
            && matches!(l.toks.first().map(|t| &t.t), Some(T::Caret(_)))
        {
            body_args = l
                .toks
                .iter()
                .filter_map(|t| match &t.t {
                    T::Val(n) => Some(n.clone()),
                    _ => None,
                })
                .collect();
            self.pos += 1;
        }
        let mut names = Vec::new();
        for (k, b) in body_args.iter().enumerate() {
            match kept.iter().find(|(j, _, _)| *j == k) {
                Some((_, _, t)) => {
                    let n = self.fresh(b);
                    self.vals.insert(b.clone(), V::Kir(n.clone(), t));
                    names.push(format!("%{n}"));
                }
                None => {
                    let a = ops.get(2 * k).map(|o| o.0.clone()).unwrap_or_default();
                    let v = self.vals.get(&a).cloned().unwrap_or(V::Unit);
                    self.vals.insert(b.clone(), v);
                }
            }
        }
        if names.is_empty() {
            String::new()
        } else {
            format!(" ({})", names.join(", "))
        }
    }

    /// `scf.while (%a = %init, ...) : (T, ...) -> (T, ...) { ...; scf.condition(%c) %a, ... }
    /// do { ^bb0(%b: T, ...): ...; scf.yield ... }`: `.kir` `while iter(..) { ..; condition }
    /// do (..) { ..; yield }`. The condition must forward the before-region's arguments in
    /// order (the `.kir` form passes the iteration values themselves to the body), else E1110.
    pub fn scf_while(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let line = st.line.clone();
        let results = expand_results(&st.results);
        let ops = operands(&st.rest);
        if !ops.len().is_multiple_of(2) {
            return Err(bad(line.span, "expected `scf.while (%arg = %init, ...)`"));
        }
        let tys = result_types_of_for(&st.rest);
        self.while_descriptors_unchanged(i, &ops)?;
        let mut kept = Vec::new();
        let mut iters = Vec::new();
        let mut args = Vec::new();
        for (k, c) in ops.chunks(2).enumerate() {
            let (arg, init, sp) = (c[0].0.clone(), c[1].0.clone(), c[1].1);
            args.push(arg.clone());
            let ty = tys.get(k).map(|t| types::classify(t)).unwrap_or(Ty::Other);
            if let Some(t) = Self::lazy_ty(&ty) {
                let v = self.value(&init, sp)?;
                let kn = self.fresh(&arg);
                iters.push(format!("%{kn} = {v}"));
                kept.push((k, kn.clone(), t));
                self.vals.insert(arg, V::Kir(kn, t));
            } else {
                let carried = self.vals.get(&init).cloned().unwrap_or(V::Unit);
                self.vals.insert(arg, carried);
            }
        }
        let res: Vec<String> = kept
            .iter()
            .map(|(k, _, _)| self.fresh(results.get(*k).map_or("r", String::as_str)))
            .collect();
        let lhs = results_lhs(&res);
        let it = if iters.is_empty() {
            String::new()
        } else {
            format!(" iter({})", iters.join(", "))
        };
        self.emit(format!("{lhs}while{it} {{"), Some(line.span));
        self.loop_stack.push(self.loops.len());
        self.loops.push((self.stmt_no, usize::MAX));
        let saved = self.while_args.replace(args);
        self.push_region();
        self.pos = i + 1;
        let before = self.region(i);
        self.pop_region();
        self.while_args = saved;
        before?;
        // The `} do {` line opens the body; `^bb0(%b: T, ...):` names its arguments.
        let open = self.pos - 1;
        if self.lines[open].word(1) != Some("do") {
            return Err(bad(self.lines[open].span, "expected `} do {` after the `scf.while` condition region"));
        }
        let params = self.while_body_args(&kept, &ops);
        self.emit(format!("}} do{params} {{"), None);
        self.push_region();
        let saved = self
            .yield_kept
            .replace(kept.iter().map(|(k, _, _)| Keep::plain(*k)).collect());
        let body = self.region(open);
        self.yield_kept = saved;
        self.pop_region();
        body?;
        self.close_loop();
        for (j, (k, _, t)) in kept.iter().enumerate() {
            if let Some(n) = results.get(*k) {
                self.vals.insert(n.clone(), V::Kir(res[j].clone(), t));
            }
        }
        Ok(())
    }

    /// `scf.condition(%c) %a, ...` ending a `scf.while` condition region.
    pub fn scf_condition(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let ops = operands(&st.rest);
        let Some(args) = self.while_args.clone() else {
            return Err(bad(span, "`scf.condition` outside a `scf.while` condition region"));
        };
        let (c, cs) = ops
            .first()
            .cloned()
            .ok_or_else(|| bad(span, "expected the condition of `scf.condition`"))?;
        let fwd: Vec<String> = ops[1..].iter().map(|o| o.0.clone()).collect();
        if fwd != args {
            return Err(Diagnostic::user(
                "E1110",
                "`scf.condition` forwards values other than the loop's iteration values in \
                 order; smemsync's `while` passes the iteration values themselves to the body",
            )
            .with_label(span, "forwarded here"));
        }
        let cond = self.value(&c, cs)?;
        self.emit(format!("condition {cond}"), Some(span));
        Ok(())
    }

    /// For the iteration value `arg` of the loop opened at line `open`, starting at -1: the
    /// modulus `N` when its only use is `%inc = arith.addi %arg, 1` wrapped by
    /// `arith.cmpi sge, %inc, N` (Triton's slot counter), and the loop's matching result is
    /// not used (so the initial value is unobservable but through the wrapped successor).
    fn wrap_modulus(
        &self,
        open: usize,
        arg: &str,
        results: &[(String, usize, Span)],
        k: usize,
    ) -> Option<i64> {
        let end = self.skip_region(open);
        let res = expand_results(results).get(k).cloned().unwrap_or_default();
        let mut inc = None;
        let mut uses = 0;
        for j in open + 1..end {
            let Ok(st) = self.stmt(j) else { continue };
            let ops_ = operands(&st.rest);
            if ops_.iter().any(|(n, _)| n == arg) {
                uses += 1;
                if st.op == "arith.addi" && ops_.len() == 2 && self.literal_of(&ops_[1].0) == Some(1) {
                    inc = st.results.first().map(|r| r.0.clone());
                }
            }
        }
        let inc = inc.filter(|_| uses == 1)?;
        let res_used = res.split('#').next().is_some_and(|base| {
            let tag = format!("%{}#{}", base, k);
            self.src.matches(&tag).count() > 0
        });
        if res_used {
            return None;
        }
        for j in open + 1..end {
            let Ok(st) = self.stmt(j) else { continue };
            let ops_ = operands(&st.rest);
            let pred = matches!(st.rest.first().map(|t| &t.t), Some(T::Word(w)) if w == "sge");
            if st.op == "arith.cmpi" && pred && ops_.len() == 2 && ops_[0].0 == inc {
                // The comparison must only choose the wrapped value: a phase bit toggled by it
                // would see the changed first iteration.
                let c = st.results.first().map(|r| r.0.clone())?;
                let c_uses = (open + 1..end)
                    .filter_map(|x| self.stmt(x).ok())
                    .filter(|s| operands(&s.rest).iter().any(|(n, _)| *n == c))
                    .count();
                let inc_uses = (open + 1..end)
                    .filter_map(|x| self.stmt(x).ok())
                    .filter(|s| operands(&s.rest).iter().any(|(n, _)| *n == inc))
                    .count();
                if c_uses != 1 || inc_uses != 2 {
                    return None;
                }
                return self.literal_of(&ops_[1].0).filter(|n| *n > 0);
            }
        }
        None
    }

    /// The integer value of a constant TTGIR value.
    fn literal_of(&self, name: &str) -> Option<i64> {
        match self.vals.get(name) {
            Some(V::Lazy(i)) => {
                let lit = self.lazies[*i].literal.as_deref()?;
                lit.strip_prefix("const ")?.split(" : ").next()?.parse().ok()
            }
            _ => None,
        }
    }

    /// `scf.yield` of the current region: the kept positions' values; a descriptor carried
    /// as a slot index yields its index, after the checks of [`Self::yielded_slot`].
    pub fn scf_yield(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let ops = operands(&st.rest);
        let kept = self.yield_kept.clone().unwrap_or_default();
        let mut vals = Vec::new();
        let mut by_pos = std::collections::HashMap::new();
        for (x, keep) in kept.iter().enumerate() {
            let Some((n, s)) = ops.get(keep.pos).cloned() else {
                return Err(bad(span, "`scf.yield` has fewer values than the region's results"));
            };
            let v = match &keep.slot {
                None => self.value(&n, s)?,
                Some(req) => {
                    let slot = self.yielded_slot(&n, s, req)?;
                    let v = self.value(&slot.idx, s)?;
                    if req.sig.is_none()
                        && let Some(r) = self.yield_kept.as_mut().and_then(|k| k.get_mut(x))
                        && let Some(q) = r.slot.as_mut()
                    {
                        q.sig = Some((slot, format!("`%{n}` (the first arm's)")));
                    }
                    v
                }
            };
            by_pos.insert(keep.pos, v.clone());
            if keep.emit {
                vals.push(v);
            }
        }
        for keep in &kept {
            let Some(req) = &keep.slot else { continue };
            let Some(rep) = req.same_as else { continue };
            if by_pos.get(&keep.pos) != by_pos.get(&rep) {
                let (n, s) = ops[keep.pos].clone();
                return Err(Diagnostic::user(
                    "E1600",
                    format!(
                        "the slot index yielded for `%{}` (by `%{n}`) is not the value the importer \
                         identified it with (position {rep} of the yield): not imported",
                        req.arg
                    ),
                )
                .with_label(s, "yielded here"));
            }
        }
        if !vals.is_empty() {
            self.emit(format!("yield {}", vals.join(", ")), Some(span));
        }
        Ok(())
    }

    /// `scf.if %c [-> (types)] { ... } [else { ... }]`.
    pub fn scf_if(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let results = expand_results(&st.results);
        let ops = operands(&st.rest);
        let tys: Vec<Ty> = if_types(&st.rest).iter().map(|t| types::classify(t)).collect();
        let (c, cs) = ops
            .first()
            .cloned()
            .ok_or_else(|| bad(span, "expected the condition of `scf.if`"))?;
        let cond = self.value(&c, cs)?;
        // Register results, and descriptors chosen by the arms: slots of one allocation,
        // carried as their index ([`super::slots`]).
        let kept: Vec<(usize, &'static str)> = tys
            .iter()
            .enumerate()
            .filter_map(|(k, t)| match t {
                Ty::Mem(_) => Some((k, "slot")),
                _ => Self::lazy_ty(t).map(|s| (k, s)),
            })
            .collect();
        let names: Vec<String> = kept
            .iter()
            .map(|(k, st)| {
                let n = results.get(*k).map_or("r", String::as_str);
                match *st {
                    "slot" => self.fresh(&format!("{n}_slot")),
                    _ => self.fresh(n),
                }
            })
            .collect();
        let lhs = results_lhs(&names);
        self.emit(format!("{lhs}if {cond} {{"), Some(span));
        let keeps = kept
            .iter()
            .map(|(k, st)| Keep {
                pos: *k,
                emit: true,
                slot: (*st == "slot").then(|| SlotKeep {
                    arg: results.get(*k).cloned().unwrap_or_default(),
                    in_loop: false,
                    sig: None,
                    same_as: None,
                }),
            })
            .collect();
        let saved = self.yield_kept.replace(keeps);
        self.push_region();
        self.pos = i + 1;
        self.region_until_else(i)?;
        self.pop_region();
        if self.else_pending {
            self.else_pending = false;
            self.emit("} else {".into(), None);
            self.push_region();
            let e = self.pos - 1;
            self.region(e)?;
            self.pop_region();
        } else if !kept.is_empty() {
            return Err(bad(span, "`scf.if` with results needs an else region"));
        }
        self.emit("}".into(), None);
        let keeps = std::mem::replace(&mut self.yield_kept, saved).unwrap_or_default();
        for (j, (k, st)) in kept.iter().enumerate() {
            let Some(n) = results.get(*k) else { continue };
            if *st != "slot" {
                self.vals.insert(n.clone(), V::Kir(names[j].clone(), st));
                continue;
            }
            let Some((s, _)) = keeps.get(j).and_then(|q| q.slot.as_ref()?.sig.clone()) else {
                continue;
            };
            self.vals.insert(format!("{n} slot"), V::Kir(names[j].clone(), "i32"));
            let used = self.used_between(n, self.pos, self.lines.len(), None);
            self.bind_slot_view(n, &s, used, span)?;
        }
        for (k, n) in results.iter().enumerate() {
            if !kept.iter().any(|(j, _)| *j == k) {
                self.vals.insert(n.clone(), V::Unit);
            }
        }
        Ok(())
    }

    /// Like [`Self::region`], but a `} else {` line ends the then-region with
    /// `else_pending` set.
    fn region_until_else(&mut self, open: usize) -> Result<(), Diagnostic> {
        while self.pos < self.lines.len() {
            let i = self.pos;
            let l = &self.lines[i];
            if l.starts_with_close() {
                let (o, c) = (self.lines[open].span.lo as usize, l.span.lo as usize);
                self.region_end.insert(o, c);
                self.else_pending = l.word(1) == Some("else");
                self.pos += 1;
                return Ok(());
            }
            self.stmt_no += 1;
            self.statement(i)?;
        }
        Err(Diagnostic::user("E1103", "region is not closed")
            .with_label(self.lines[open].span, "opened here"))
    }
}

/// Result names `%r:3` → `r#0, r#1, r#2`; `%r` → `r`.
pub(super) fn expand_results(results: &[(String, usize, Span)]) -> Vec<String> {
    let mut out = Vec::new();
    for (n, c, _) in results {
        if *c == 1 {
            out.push(n.clone());
        } else {
            out.extend((0..*c).map(|k| format!("{n}#{k}")));
        }
    }
    out
}

/// The result types of `scf.for ... -> (t1, t2) : i32 {` (between `->` and the last `:`).
fn result_types_of_for(rest: &[super::lexer::Tok]) -> Vec<String> {
    let Some(a) = rest.iter().position(|t| t.t == T::Arrow) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in &rest[a + 1..] {
        match &t.t {
            T::Ty(x) | T::Word(x) => out.push(x.clone()),
            T::P(':') => break,
            _ => {}
        }
    }
    out
}

/// The bit width of an `scf.for`'s induction variable: the type after its last `:` (32
/// when absent).
fn iv_type_bits(rest: &[super::lexer::Tok]) -> u32 {
    let Some(c) = rest.iter().rposition(|t| t.t == T::P(':')) else {
        return 32;
    };
    match rest.get(c + 1).map(|t| &t.t) {
        Some(T::Ty(x) | T::Word(x)) if types::int_bits(x) > 0 => types::int_bits(x),
        _ => 32,
    }
}

/// The result types of `scf.if %c -> (t1, t2) {`.
fn if_types(rest: &[super::lexer::Tok]) -> Vec<String> {
    let Some(a) = rest.iter().position(|t| t.t == T::Arrow) else {
        return Vec::new();
    };
    rest[a + 1..]
        .iter()
        .filter_map(|t| match &t.t {
            T::Ty(x) | T::Word(x) => Some(x.clone()),
            _ => None,
        })
        .collect()
}

/// The `%a, %b = ` prefix of an op with these `.kir` results (empty without results).
fn results_lhs(names: &[String]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let r: Vec<String> = names.iter().map(|n| format!("%{n}")).collect();
    format!("{} = ", r.join(", "))
}

/// A `.kir` iteration value of a loop: its position, name and type.
type Kept = (usize, String, &'static str);

/// What [`Converter::bind_for_results`] needs of the converted loop.
struct ForResults<'a> {
    /// The `(iteration value, initial value, span)` pairs.
    pairs: &'a [(String, String, Span)],
    carry: &'a [Carry],
    /// The position whose carried value each position is ([`Converter::slot_reps`]).
    reps: &'a [usize],
    /// `.kir` results by position.
    res: &'a [(usize, String)],
    /// The line after the loop.
    end: usize,
    span: Span,
}
