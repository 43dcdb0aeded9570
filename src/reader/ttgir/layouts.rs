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

/// A shared encoding's definition fitted to a buffer of rank `rank`: the text unchanged when
/// its `order` names every dimension (or it has none, as `nvmma_shared`, which folds outer
/// dimensions into rows); for `swizzled_shared`/`amd_rotating_shared` of a multi-buffered
/// allocation (rank above the order's), the order extended by the leading dimensions as the
/// outermost ones, so each slot is swizzled as one tile and the slots follow each other, as
/// Triton lays them out. `None`: an encoding that cannot be fitted (`padded_shared` or
/// `shared_linear` of another rank, or not a shared encoding).
pub fn fit_shared(text: &str, rank: usize) -> Option<String> {
    let kind = text.strip_prefix("#ttg.")?.split('<').next()?;
    let Some(at) = text.find("order = [") else {
        return (kind == "nvmma_shared" && rank >= 2).then(|| text.to_string());
    };
    let open = at + "order = [".len();
    let close = open + text[open..].find(']')?;
    let dims: Vec<usize> = text[open..close]
        .split(',')
        .map(|d| d.trim().parse().ok())
        .collect::<Option<_>>()?;
    if dims.len() == rank {
        return Some(text.to_string());
    }
    if !matches!(kind, "swizzled_shared" | "amd_rotating_shared") || dims.len() > rank {
        return None;
    }
    let extra = rank - dims.len();
    let order: Vec<String> = dims
        .iter()
        .map(|d| d + extra)
        .chain((0..extra).rev())
        .map(|d| d.to_string())
        .collect();
    Some(format!("{}{}{}", &text[..open], order.join(", "), &text[close..]))
}

#[cfg(test)]
mod fit_tests {
    use super::fit_shared;

    #[test]
    fn multi_buffered_swizzles_keep_each_slot_a_tile() {
        let sw = "#ttg.swizzled_shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0]}>";
        assert_eq!(fit_shared(sw, 2).as_deref(), Some(sw));
        assert_eq!(
            fit_shared(sw, 3).as_deref(),
            Some("#ttg.swizzled_shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [2, 1, 0]}>")
        );
        let nv = "#ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>";
        assert_eq!(fit_shared(nv, 3).as_deref(), Some(nv));
        assert_eq!(fit_shared(nv, 1), None);
        let pad = "#ttg.padded_shared<[32:+4] {order = [1, 0], shape = [64, 64]}>";
        assert_eq!(fit_shared(pad, 3), None);
        assert_eq!(fit_shared("#ttg.blocked<{order = [1, 0]}>", 3), None);
    }
}
