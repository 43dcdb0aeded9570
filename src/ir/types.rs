//! Scalar and element types, and immediate constants.
//!
//! Per-thread values are `i1`, `i32` or `f32`. Shared and global buffers store elements of a
//! storage type (`i8`, `i16`, `i32`, `f16`, `bf16`, `f32`) that widens to a scalar type on load
//! (integers to `i32`, floats to `f32`) and narrows on store (integers wrap, floats round to
//! nearest even). mbarrier arrays have the storage type `mbarrier` (8 bytes, no data access).

use std::fmt;

/// The type of a per-thread value.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    I1,
    I32,
    F32,
    /// Completion token of an async copy (only consumed by `wait_tokens`).
    Token,
}

impl ScalarType {
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::I1 => "i1",
            ScalarType::I32 => "i32",
            ScalarType::F32 => "f32",
            ScalarType::Token => "token",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "i1" => ScalarType::I1,
            "i32" => ScalarType::I32,
            "f32" => ScalarType::F32,
            "token" => ScalarType::Token,
            _ => return None,
        })
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The storage type of a buffer element.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    I8,
    I16,
    I32,
    F16,
    BF16,
    F32,
    /// An mbarrier object (8 bytes); only mbarrier ops may touch it.
    MBarrier,
}

impl ElemType {
    pub const ALL: [ElemType; 7] = [
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::F16,
        ElemType::BF16,
        ElemType::F32,
        ElemType::MBarrier,
    ];
    pub fn name(self) -> &'static str {
        match self {
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::F16 => "f16",
            ElemType::BF16 => "bf16",
            ElemType::F32 => "f32",
            ElemType::MBarrier => "mbarrier",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        ElemType::ALL.into_iter().find(|e| e.name() == s)
    }
    /// Size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            ElemType::I8 => 1,
            ElemType::I16 | ElemType::F16 | ElemType::BF16 => 2,
            ElemType::I32 | ElemType::F32 => 4,
            ElemType::MBarrier => 8,
        }
    }
    /// The scalar type a load of this element produces.
    pub fn scalar(self) -> Option<ScalarType> {
        match self {
            ElemType::I8 | ElemType::I16 | ElemType::I32 => Some(ScalarType::I32),
            ElemType::F16 | ElemType::BF16 | ElemType::F32 => Some(ScalarType::F32),
            ElemType::MBarrier => None,
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F16 | ElemType::BF16 | ElemType::F32)
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scalar constant. Floats compare by bit pattern so that kernels compare structurally.
#[derive(Copy, Clone, Debug)]
pub enum Scalar {
    I1(bool),
    I32(i32),
    F32(f32),
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Scalar::I1(a), Scalar::I1(b)) => a == b,
            (Scalar::I32(a), Scalar::I32(b)) => a == b,
            (Scalar::F32(a), Scalar::F32(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Scalar {
    pub fn ty(self) -> ScalarType {
        match self {
            Scalar::I1(_) => ScalarType::I1,
            Scalar::I32(_) => ScalarType::I32,
            Scalar::F32(_) => ScalarType::F32,
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::I1(b) => b as i64,
            Scalar::I32(v) => v as i64,
            Scalar::F32(v) => v as i64,
        }
    }
    pub fn as_f32(self) -> f32 {
        match self {
            Scalar::I1(b) => b as i32 as f32,
            Scalar::I32(v) => v as f32,
            Scalar::F32(v) => v,
        }
    }
    pub fn truthy(self) -> bool {
        match self {
            Scalar::I1(b) => b,
            Scalar::I32(v) => v != 0,
            Scalar::F32(v) => v != 0.0,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::I1(b) => write!(f, "{b}"),
            Scalar::I32(v) => write!(f, "{v}"),
            Scalar::F32(v) => write_f32(f, *v),
        }
    }
}

/// Writes an f32 so that it reads back bit-exactly and always looks like a float.
pub fn write_f32(f: &mut impl fmt::Write, v: f32) -> fmt::Result {
    if v.is_nan() {
        write!(f, "nan")
    } else if v.is_infinite() {
        write!(f, "{}", if v > 0.0 { "inf" } else { "-inf" })
    } else {
        let s = format!("{v:?}");
        if s.contains('.') || s.contains('e') {
            f.write_str(&s)
        } else {
            write!(f, "{s}.0")
        }
    }
}

/// Rounds an f32 to the nearest f16 (ties to even) and back.
pub fn round_f16(v: f32) -> f32 {
    f16_to_f32(f32_to_f16(v))
}

/// Rounds an f32 to the nearest bf16 (ties to even) and back.
pub fn round_bf16(v: f32) -> f32 {
    if v.is_nan() {
        return v;
    }
    let b = v.to_bits();
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(r)
}

/// The bits of the f16 nearest to `v` (ties to even; NaN stays a quiet NaN).
pub fn f32_to_f16_bits(v: f32) -> u16 {
    f32_to_f16(v)
}

/// The f32 value of the f16 with bits `h` (exact).
pub fn f16_bits_to_f32(h: u16) -> f32 {
    f16_to_f32(h)
}

/// The bits of the bf16 nearest to `v` (ties to even; NaN stays a quiet NaN).
pub fn f32_to_bf16_bits(v: f32) -> u16 {
    if v.is_nan() {
        return ((v.to_bits() >> 16) as u16) | 0x0040;
    }
    (round_bf16(v).to_bits() >> 16) as u16
}

/// The f32 value of the bf16 with bits `h` (exact).
pub fn bf16_bits_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

fn f32_to_f16(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1 << shift) - 1);
        let mut h = m >> shift;
        if rem > half || (rem == half && (h & 1) == 1) {
            h += 1;
        }
        return sign | h as u16;
    }
    let mut h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && (h & 1) == 1) {
        h += 1;
    }
    sign | h as u16
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: normalize.
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounding_matches_known_values() {
        assert_eq!(round_f16(1.0), 1.0);
        assert_eq!(round_f16(65504.0), 65504.0);
        assert_eq!(round_f16(1.0 + 1.0 / 4096.0), 1.0); // below half an ulp
        assert_eq!(round_f16(1.0 + 3.0 / 2048.0), 1.0 + 2.0 / 1024.0); // tie to even
        assert!(round_f16(1e6).is_infinite());
        assert_eq!(round_f16(5.960_464_5e-8), 5.960_464_5e-8); // smallest subnormal
    }

    #[test]
    fn half_bit_conversions_round_trip() {
        for v in [
            0.0f32,
            -0.0,
            1.0,
            -2.5,
            65504.0,
            5.960_464_5e-8,
            0.1,
            3.0e-5,
        ] {
            let h = f32_to_f16_bits(v);
            assert_eq!(f16_bits_to_f32(h).to_bits(), round_f16(v).to_bits());
            assert_eq!(f32_to_f16_bits(f16_bits_to_f32(h)), h);
            let b = f32_to_bf16_bits(v);
            assert_eq!(bf16_bits_to_f32(b).to_bits(), round_bf16(v).to_bits());
            assert_eq!(f32_to_bf16_bits(bf16_bits_to_f32(b)), b);
        }
        assert_eq!(f32_to_f16_bits(1.0), 0x3c00);
        assert_eq!(f32_to_bf16_bits(1.0), 0x3f80);
        assert!(f16_bits_to_f32(f32_to_f16_bits(f32::NAN)).is_nan());
        assert!(bf16_bits_to_f32(f32_to_bf16_bits(f32::from_bits(0x7f80_0001))).is_nan());
    }

    #[test]
    fn bf16_rounding_keeps_top_bits() {
        assert_eq!(round_bf16(1.0), 1.0);
        assert_eq!(round_bf16(1.0 + 1.0 / 512.0), 1.0);
        assert_eq!(round_bf16(3.0), 3.0);
    }
}
