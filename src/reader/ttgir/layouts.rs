//! What the importer needs to know about Triton's layouts: their `.kir` names, and how many
//! warps a distributed layout spreads along each dimension (which decides whether a
//! `tt.reduce` or `tt.scan` crosses warps, and so uses shared scratch).
//!
//! Encodings are read from their text (`#ttg.blocked<{warpsPerCTA = [8, 1], ...}>`, aliases
//! `#blocked1` resolved through the module's definitions). An encoding this module cannot
//! read gives `None`, and the caller takes the conservative choice (scratch traffic).
//! Complexity: linear in the encoding text per query (alias chains are bounded by 16).

use std::collections::HashMap;

use super::types::{int_attr, list_attr};

/// The module's `#name = ...` definitions.
pub type Aliases = HashMap<String, String>;

/// The encoding text with an alias (`#blocked1`) resolved, following at most 16 links.
pub fn resolve<'a>(aliases: &'a Aliases, mut text: &'a str) -> &'a str {
    for _ in 0..16 {
        match text
            .strip_prefix('#')
            .filter(|n| !n.contains('<'))
            .and_then(|n| aliases.get(n))
        {
            Some(t) => text = t,
            None => break,
        }
    }
    text
}

/// The `parent = #x` of a slice or dot_op encoding.
fn parent(text: &str) -> Option<&str> {
    let at = text.find("parent = ")?;
    let rest = &text[at + 9..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// Warps along each dimension of a distributed encoding.
pub fn warps_per_dim(aliases: &Aliases, enc: &str) -> Option<Vec<i64>> {
    let t = resolve(aliases, enc);
    if t.starts_with("#ttg.blocked")
        || t.starts_with("#ttg.nvidia_mma")
        || t.starts_with("#ttg.amd_mfma")
        || t.starts_with("#ttg.amd_wmma")
    {
        return list_attr(t, "warpsPerCTA");
    }
    if t.starts_with("#ttg.slice") {
        let dim = int_attr(t, "dim")? as usize;
        let mut w = warps_per_dim(aliases, parent(t)?)?;
        if dim < w.len() {
            w.remove(dim);
            return Some(w);
        }
        return None;
    }
    if t.starts_with("#ttg.dot_op") {
        return warps_per_dim(aliases, parent(t)?);
    }
    if t.starts_with("#ttg.linear") {
        return linear_warps(t);
    }
    None
}

/// Warps per dimension of `#ttg.linear<{..., warp = [[a, b], ...], ...}>`: each warp basis
/// vector doubles the warps of every dimension it moves.
fn linear_warps(t: &str) -> Option<Vec<i64>> {
    let at = t.find("warp = [")?;
    let rest = &t[at + 8..];
    let mut depth = 1;
    let mut end = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    end = i;
                    break;
                }
            }
            _ => {}
        }
    }
    let body = &rest[..end];
    let mut out: Vec<i64> = Vec::new();
    for basis in body.split('[').skip(1) {
        let nums: Vec<i64> = basis
            .trim_end_matches([']', ',', ' '])
            .split(',')
            .filter_map(|s| s.trim().trim_end_matches(']').parse().ok())
            .collect();
        if out.is_empty() {
            out = vec![1; nums.len()];
        }
        for (d, n) in nums.iter().enumerate() {
            if *n != 0 && d < out.len() {
                out[d] *= 2;
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Whether converting `from` to `to` needs no shared memory by a rule smemsync knows: the
/// same encoding, or Triton's MMA-v3-accumulator to dot-operand-A shortcut (a register
/// permutation; `isMmaToDotShortcut` in Triton).
pub fn convert_is_register_only(aliases: &Aliases, from: &str, to: &str) -> bool {
    let (f, t) = (resolve(aliases, from), resolve(aliases, to));
    if f == t {
        return true;
    }
    if f.starts_with("#ttg.nvidia_mma") && t.starts_with("#ttg.dot_op") {
        let same_parent = parent(t).is_some_and(|p| resolve(aliases, p) == f);
        return same_parent
            && int_attr(t, "opIdx") == Some(0)
            && int_attr(f, "versionMajor") == Some(3);
    }
    false
}
