//! Lazy values of the TTGIR importer: a pure op (integer scalar arithmetic, tensor or float
//! arithmetic, constants, program ids) is written into `.kir` only where a shared-memory op,
//! a loop bound, a condition or a yield first needs its value.
//!
//! Integer scalars are translated exactly (`arith.addi` → `add`, `arith.cmpi slt` → `cmp lt`,
//! `arith.select` → `select`, `arith.divsi`/`remsi` → `div`/`rem`, exact for non-negative
//! dividends: warning W1101; widths and unsigned ops: [`super::intops`]); tensors and floats become `compute "op"(...)` (no shared effect;
//! the data is not smemsync's concern). Invariant: a value written inside a region is reused
//! only inside it. Complexity: each lazy value is written at most once per open region.

use super::convert::{Converter, Lazy, V, bad};
use super::intops::IntText;
use super::ops;
use super::types::{self, Ty};
use crate::diag::{Diagnostic, Span};

impl Converter<'_> {
    /// Records a pure op's result as a lazy value.
    pub fn lazy(&mut self, name: &str, l: Lazy) {
        self.lazies.push(l);
        self.vals
            .insert(name.to_string(), V::Lazy(self.lazies.len() - 1));
    }

    /// The `.kir` operand holding a TTGIR value, writing its definition if needed.
    pub fn value(&mut self, name: &str, span: Span) -> Result<String, Diagnostic> {
        self.value_depth(name, span, 0)
    }

    fn value_depth(&mut self, name: &str, span: Span, d: usize) -> Result<String, Diagnostic> {
        if d > 200 {
            return Err(bad(span, "value chain too deep to import"));
        }
        match self.vals.get(name).cloned() {
            Some(V::Kir(k, _)) => Ok(format!("%{k}")),
            Some(V::Lazy(i)) => {
                for c in self.cache.iter().rev() {
                    if let Some(k) = c.get(name) {
                        return Ok(format!("%{k}"));
                    }
                }
                let l = self.lazies[i].clone();
                if let Some(imm) = l.literal.as_deref().and_then(immediate) {
                    // Constants are immediates: induction recognition (`ir::induction`)
                    // needs constant initial values and steps it can see.
                    return Ok(imm);
                }
                let text = self.lazy_text(&l, d)?;
                let k = self.fresh(name);
                self.emit(format!("%{k} = {text}"), None);
                if let Some(c) = self.cache.last_mut() {
                    c.insert(name.to_string(), k.clone());
                }
                Ok(format!("%{k}"))
            }
            Some(_) => Err(bad(
                span,
                format!("`%{name}` is not a scalar or register value here"),
            )),
            None => Err(bad(span, format!("`%{name}` is not defined"))),
        }
    }

    /// The `.kir` right-hand side of a lazy op.
    fn lazy_text(&mut self, l: &Lazy, d: usize) -> Result<String, Diagnostic> {
        if let Some(lit) = &l.literal {
            if l.int.is_some() && lit.starts_with("compute") {
                let msg = format!(
                    "integer constant {} does not fit in `.kir`'s i32: its value is opaque (`compute`), so indices derived from it are unknown to smemsync",
                    l.int.unwrap_or_default()
                );
                self.warn("W1103", "wide-constant", l.span, msg);
            }
            return Ok(lit.clone());
        }
        let folded = if l.ty == "i32" { self.fold_cast(l) } else { None };
        let mut args = Vec::new();
        for a in &l.args {
            if folded.is_some() {
                break;
            }
            if matches!(
                self.vals.get(a),
                Some(V::Ptr(_) | V::Desc(_) | V::Unit | V::Mem(_) | V::Mbar(..))
            ) {
                continue;
            }
            args.push(self.value_depth(a, l.span, d + 1)?);
        }
        let scalar_int = l.ty == "i32" || l.ty == "i1";
        if scalar_int {
            self.check_i64_operands(l);
            match folded.unwrap_or_else(|| self.int_text(l, &args)) {
                IntText::Text(t) => return Ok(t),
                IntText::Opaque => {
                    let msg = format!(
                        "integer `{}` has no exact `.kir` translation at this width: its value is opaque (`compute`), so indices derived from it are unknown to smemsync",
                        l.op
                    );
                    self.warn("W1103", &l.op, l.span, msg);
                    let ty = l.ty;
                    return Ok(format!("compute \"{}\"({}) : {ty}", l.op, args.join(", ")));
                }
                IntText::Other => {}
            }
            if let Some(b) = ops::int_binop(&l.op)
                && args.len() == 2
            {
                if matches!(
                    l.op.as_str(),
                    "arith.divsi" | "arith.remsi" | "arith.divui" | "arith.remui"
                ) {
                    let msg = format!(
                        "`{}` is imported as floor `{b}`: exact for a non-negative dividend (Triton's sizes, offsets and counters)",
                        l.op
                    );
                    self.warn("W1101", "div", l.span, msg);
                }
                return Ok(format!("{b} {}, {}", args[0], args[1]));
            }
            match l.op.as_str() {
                "arith.cmpi" if args.len() == 2 => {
                    if let Some(p) = l.pred.as_deref().and_then(ops::cmp_pred) {
                        return Ok(format!("cmp {p} {}, {}", args[0], args[1]));
                    }
                }
                "arith.select" if args.len() == 3 => {
                    return Ok(format!("select {}, {}, {}", args[0], args[1], args[2]));
                }
                "arith.trunci" if l.ty == "i1" && args.len() == 1 => {
                    // To i1: the low bit (`.kir` keeps booleans apart from integers).
                    let t = self.fresh("bit");
                    self.emit(format!("%{t} = and {}, 1", args[0]), None);
                    return Ok(format!("cmp ne %{t}, 0"));
                }
                "arith.extsi" | "arith.extui"
                    if args.len() == 1 && self.scalar_ty(&l.args[0]) == Some("i1") =>
                {
                    let one = if l.op == "arith.extsi" { "-1" } else { "1" };
                    return Ok(format!("select {}, {one}, 0", args[0]));
                }
                "arith.extsi" | "arith.extui" | "arith.trunci" | "arith.index_cast"
                    if args.len() == 1 =>
                {
                    return Ok(format!("add {}, 0", args[0]));
                }
                "arith.ceildivsi" if args.len() == 2 => {
                    // ceil(a / b) = floor((a + b - 1) / b) for b > 0.
                    let t = self.fresh("ceil");
                    self.emit(format!("%{t} = add {}, {}", args[0], args[1]), None);
                    let u = self.fresh("ceil");
                    self.emit(format!("%{u} = sub %{t}, 1"), None);
                    return Ok(format!("div %{u}, {}", args[1]));
                }
                _ => {}
            }
            if l.ty == "i32" && !l.op.starts_with("tt.") && l.op.starts_with("arith.") {
                let msg = format!(
                    "integer `{}` has no exact `.kir` translation: its value is opaque (`compute`), so indices derived from it are unknown to smemsync",
                    l.op
                );
                self.warn("W1103", &l.op, l.span, msg);
            }
        }
        Ok(format!("compute \"{}\"({}) : {}", l.op, args.join(", "), l.ty))
    }

    /// The scalar type of a TTGIR value, when it is a register value.
    fn scalar_ty(&self, name: &str) -> Option<&'static str> {
        match self.vals.get(name) {
            Some(V::Kir(_, t)) => Some(t),
            Some(V::Lazy(i)) => self.lazies.get(*i).map(|l| l.ty),
            _ => None,
        }
    }

    /// The lazy scalar type of a TTGIR result type (`None`: not a register value).
    pub fn lazy_ty(ty: &Ty) -> Option<&'static str> {
        match ty {
            Ty::Int => Some("i32"),
            Ty::Bool => Some("i1"),
            Ty::Float => Some("f32"),
            Ty::Tensor(s) => Some(types::scalar_of(&s.elem)),
            _ => None,
        }
    }
}

/// The immediate operand of a `const` literal (`const 3 : i32` → `3`), if it is one.
fn immediate(lit: &str) -> Option<String> {
    let body = lit.strip_prefix("const ")?;
    let v = body.split(" : ").next()?.trim();
    (!v.is_empty()).then(|| v.to_string())
}
