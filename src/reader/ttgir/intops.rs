//! Width-exact translation of TTGIR integer ops into `.kir`'s 32-bit arithmetic.
//!
//! `.kir` has one integer type, `i32`, with wrapping arithmetic, floor `div`/`rem`, signed
//! `cmp` and arithmetic `shr` (docs/ir.md). TTGIR has `i8`, `i16`, `i32`, `i64` and `index`,
//! unsigned comparisons, logical shifts and zero extension. The invariant that makes the
//! translation exact: a value of width `w <= 32` is held in `.kir` as the sign extension of
//! its `w` bits; an `i64`/`index` value is held as its low 32 bits, which equal the value
//! while it stays in the `i32` range (docs/ttgir.md, "Integer ops", states this assumption).
//! Each op is written so that the invariant holds after it:
//!
//! - `addi`/`subi`/`muli`/`shli` on `i8`/`i16` re-extend their low `w` bits (`shl` then `shr`
//!   by `32 - w`); `andi`/`ori`/`xori`/`minsi`/`maxsi`/`shrsi` keep a sign extension as is;
//! - unsigned comparisons flip the sign bit of both operands and compare signed: sign
//!   extension keeps the unsigned order, and `x xor 2^31` maps the unsigned order of 32 bits
//!   onto the signed one;
//! - `shrui` masks the shifted value (`i32`) or shifts the zero-extended bits (`i8`/`i16`);
//! - `extui` masks with `2^w - 1`; `trunci` to `i8`/`i16` re-extends; `trunci` to `i32` and
//!   `extsi` keep the value;
//! - casts of constants fold at import time (`trunci 4294967297 : i64 to i32` is `1`).
//!
//! What cannot be held (`extui` of an `i32` into `i64`, `i64` shifts and unsigned
//! comparisons of `i64` values, an `i64` constant outside `i32`) becomes an opaque `compute`
//! with warning W1103, never a different value. Complexity: O(1) `.kir` ops per TTGIR op.
//! Source: the MLIR `arith` dialect's op semantics (mlir.llvm.org/docs/Dialects/ArithOps).

use super::convert::{Converter, Lazy, V};

/// What an integer op becomes.
pub(super) enum IntText {
    /// The `.kir` right-hand side (helper lines already written).
    Text(String),
    /// No exact translation: the caller writes an opaque `compute` with W1103.
    Opaque,
    /// Not an op handled here (the caller's generic rules apply).
    Other,
}

/// The mask of the low `w` bits as an `i32` immediate (`w` in 1..=31).
fn mask(w: u32) -> i64 {
    (1i64 << w) - 1
}

impl Converter<'_> {
    /// The translation of the integer op `l` with its `.kir` operands `args`.
    pub(super) fn int_text(&mut self, l: &Lazy, args: &[String]) -> IntText {
        let (w, aw) = (l.bits, l.arg_bits);
        if aw == 1 && l.op != "arith.extui" && l.op != "arith.extsi" {
            return self.i1_text(l, args);
        }
        match (l.op.as_str(), args) {
            ("arith.addi" | "arith.subi" | "arith.muli" | "arith.shli", [a, b])
                if w == 8 || w == 16 =>
            {
                let op = &l.op[6..l.op.len() - 1];
                let t = self.helper(format!("{op} {a}, {b}"));
                IntText::Text(self.sext(&t, w))
            }
            ("arith.shli" | "arith.shrsi" | "arith.shrui", _) if w == 64 => IntText::Opaque,
            ("arith.shrui", [a, b]) => self.shrui(a, b, w),
            ("arith.cmpi", [a, b]) => self.unsigned_cmp(l, a, b, aw),
            ("arith.extui", [a]) if aw == 32 && w == 64 => IntText::Opaque,
            ("arith.extui", [a]) if aw > 1 && aw < 32 => {
                IntText::Text(format!("and {a}, {}", mask(aw)))
            }
            ("arith.trunci" | "arith.index_cast", [a]) if w > 1 && w < 32 && aw > w => {
                IntText::Text(self.sext(a, w))
            }
            _ => IntText::Other,
        }
    }

    /// An op on `i1` operands, written with `.kir`'s logical `and`/`or`/`xor`/`not`. MLIR's
    /// `i1` is a one-bit integer: wrapping `addi`/`subi` are `xor`, `muli` is `and`, and a
    /// signed order reads `true` as -1 (`true <s false`), an unsigned one as 1.
    fn i1_text(&mut self, l: &Lazy, args: &[String]) -> IntText {
        let [a, b] = args else {
            return IntText::Other;
        };
        // `a and not b` is `a > b` unsigned (`a < b` signed); `a or not b` is `a >= b`.
        let mut and_not = |x: &str, y: &str| {
            let n = self.helper(format!("not {y}"));
            format!("and {x}, {n}")
        };
        let text = match (l.op.as_str(), l.pred.as_deref()) {
            ("arith.addi" | "arith.subi", _) => format!("xor {a}, {b}"),
            ("arith.muli" | "arith.minui" | "arith.maxsi", _) => format!("and {a}, {b}"),
            ("arith.maxui" | "arith.minsi", _) => format!("or {a}, {b}"),
            ("arith.cmpi", Some("ugt" | "slt")) => and_not(a, b),
            ("arith.cmpi", Some("ult" | "sgt")) => and_not(b, a),
            ("arith.cmpi", Some("uge" | "sle")) => {
                let n = self.helper(format!("not {b}"));
                format!("or {a}, {n}")
            }
            ("arith.cmpi", Some("ule" | "sge")) => {
                let n = self.helper(format!("not {a}"));
                format!("or {b}, {n}")
            }
            ("arith.cmpi", Some("eq" | "ne")) => return IntText::Other,
            ("arith.andi" | "arith.ori" | "arith.xori", _) => return IntText::Other,
            ("arith.cmpi", _) => return IntText::Opaque,
            _ if l.op.starts_with("arith.") && l.op.ends_with('i') => return IntText::Opaque,
            _ => return IntText::Other,
        };
        IntText::Text(text)
    }

    /// Writes `%h = text` and returns `%h`.
    fn helper(&mut self, text: String) -> String {
        let t = self.fresh("int");
        self.emit(format!("%{t} = {text}"), None);
        format!("%{t}")
    }

    /// The right-hand side sign-extending the low `w` bits of `x` (`w` < 32).
    fn sext(&mut self, x: &str, w: u32) -> String {
        let t = self.helper(format!("shl {x}, {}", 32 - w));
        format!("shr {t}, {}", 32 - w)
    }

    /// `arith.shrui` of width `w` (8, 16 or 32; a shift by `w` or more is poison in MLIR).
    fn shrui(&mut self, a: &str, b: &str, w: u32) -> IntText {
        if w < 32 && w > 1 {
            // The zero-extended bits shift right; a shift by 0 keeps the sign: re-extend.
            let z = self.helper(format!("and {a}, {}", mask(w)));
            let s = self.helper(format!("shr {z}, {b}"));
            return IntText::Text(self.sext(&s, w));
        }
        if w != 32 {
            return IntText::Opaque;
        }
        if let Ok(s) = b.parse::<u32>()
            && s < 32
        {
            let m = (u32::MAX >> s) as i32;
            let t = self.helper(format!("shr {a}, {s}"));
            return IntText::Text(format!("and {t}, {m}"));
        }
        // mask = not ((-1 << (31 - s)) << 1): the low 32 - s bits, for s in [0, 31].
        let r = self.helper(format!("sub 31, {b}"));
        let h = self.helper(format!("shl -1, {r}"));
        let h2 = self.helper(format!("shl {h}, 1"));
        let m = self.helper(format!("not {h2}"));
        let t = self.helper(format!("shr {a}, {b}"));
        IntText::Text(format!("and {t}, {m}"))
    }

    /// An unsigned `arith.cmpi` (`ult`, `ule`, `ugt`, `uge`) of operands of width `aw`.
    fn unsigned_cmp(&mut self, l: &Lazy, a: &str, b: &str, aw: u32) -> IntText {
        let p = match l.pred.as_deref() {
            Some("ult") => "lt",
            Some("ule") => "le",
            Some("ugt") => "gt",
            Some("uge") => "ge",
            _ => return IntText::Other,
        };
        if aw <= 1 || aw > 32 {
            // i1 has no `.kir` order; i64 values are only known modulo 2^32.
            return IntText::Opaque;
        }
        let fa = self.helper(format!("xor {a}, -2147483648"));
        let fb = self.helper(format!("xor {b}, -2147483648"));
        IntText::Text(format!("cmp {p} {fa}, {fb}"))
    }

    /// A cast of an integer constant, folded (before its operand is written, so that a wide
    /// constant used only through a cast is not written at all).
    pub(super) fn fold_cast(&self, l: &Lazy) -> Option<IntText> {
        let v = self.folded_cast(l)?;
        Some(match i32::try_from(v) {
            Ok(v) => IntText::Text(format!("const {v} : i32")),
            Err(_) => IntText::Opaque,
        })
    }

    /// The value of a cast (`trunci`, `extsi`, `extui`, `index_cast`) of an integer constant.
    fn folded_cast(&self, l: &Lazy) -> Option<i64> {
        let cast = matches!(
            l.op.as_str(),
            "arith.trunci" | "arith.extsi" | "arith.extui" | "arith.index_cast"
        );
        if !cast || l.bits <= 1 || l.arg_bits <= 1 {
            return None;
        }
        let v = match self.vals.get(l.args.first()?)? {
            V::Lazy(i) => self.lazies.get(*i)?.int?,
            _ => return None,
        };
        let v = if l.op == "arith.extui" && l.arg_bits < 64 {
            v & ((1i64 << l.arg_bits) - 1)
        } else {
            v
        };
        Some(super::types::wrap_int(v, l.bits))
    }
}
