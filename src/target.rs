//! Targets: which sync ops a GPU has and what they cost.
//!
//! A [`Target`] is built from a name (`gfx942`, `gfx950`, `gfx1200`, `gfx1201`, `gfx1250`,
//! `sm_80`, `sm_90`); unknown names are errors that list the known ones. Placement asks the
//! target whether split or named barriers exist, the warp width, and which counter an async
//! copy or memory op increments; the verifier asks it for the launch and shared-memory
//! [`Limits`] a kernel must respect.

use crate::diag::Diagnostic;
use crate::ir::{AsyncClass, Counter};

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Vendor {
    Amd,
    Nvidia,
}

/// A GPU target.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    pub name: &'static str,
    pub vendor: Vendor,
    /// Threads per warp/wavefront.
    pub warp: u32,
    /// gfx12 split barriers (`s_barrier_signal`/`s_barrier_wait`).
    pub split_barriers: bool,
    /// Named barriers with ids and thread counts (`bar.sync id, n` / gfx1250).
    pub named_barriers: u32,
    pub cp_async: bool,
    pub tma: bool,
    pub mbarrier: bool,
    pub wgmma: bool,
    /// `fence.proxy.async.shared::cta` (sm_90: the async proxy of wgmma and TMA).
    pub proxy_fence: bool,
    pub gather_to_lds: bool,
    pub tensor_dma: bool,
    /// Block, grid and shared-memory limits.
    pub limits: Limits,
}

/// What a kernel launch may ask of a target: threads per block, block and grid dimensions,
/// and shared memory per block (the most a kernel may opt into). The verifier checks every
/// kernel against these with checked arithmetic, so no later pass multiplies sizes that wrap.
///
/// Sources: CUDA C Programming Guide, "Technical Specifications per Compute Capability"
/// (1024 threads per block, block dimensions 1024 x 1024 x 64, grid 2^31-1 x 65535 x 65535,
/// 163 KiB = 166912 bytes of shared memory per block on sm_80 and 227 KiB = 232448 bytes on
/// sm_90); LLVM's AMDGPU backend (`lds-limit-diagnostics-*.ll`: 65536 bytes of LDS per
/// workgroup on gfx942 and gfx12, 163840 on gfx950, 327680 on gfx1250) and HIP (1024
/// work-items per workgroup in each dimension and in total; grid 2^31-1 blocks per
/// dimension, HIP also requiring grid x block < 2^32 per dimension).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Whose limits these are (a target name, or `any target`), for diagnostics.
    pub source: &'static str,
    pub max_threads_per_block: u32,
    pub max_block: [u32; 3],
    pub max_grid: [u32; 3],
    pub max_shared_bytes: u64,
}

/// 2^31 - 1, the largest grid x dimension on every target.
const GRID_X: u32 = i32::MAX as u32;

impl Limits {
    /// The limits of an AMD target with `lds` bytes of LDS per workgroup.
    const fn amd(source: &'static str, lds: u64) -> Limits {
        Limits {
            source,
            max_threads_per_block: 1024,
            max_block: [1024, 1024, 1024],
            max_grid: [GRID_X, GRID_X, GRID_X],
            max_shared_bytes: lds,
        }
    }

    /// The limits of an NVIDIA target with `smem` bytes of shared memory per block.
    const fn nvidia(source: &'static str, smem: u64) -> Limits {
        Limits {
            source,
            max_threads_per_block: 1024,
            max_block: [1024, 1024, 64],
            max_grid: [GRID_X, 65535, 65535],
            max_shared_bytes: smem,
        }
    }

    /// The limits that hold when no target is named: the largest of every target's, so a
    /// kernel is refused only when no target could run it.
    pub const GENERIC: Limits = Limits {
        source: "any target",
        max_threads_per_block: 1024,
        max_block: [1024, 1024, 1024],
        max_grid: [GRID_X, GRID_X, GRID_X],
        max_shared_bytes: 327680,
    };

    /// Total threads of a block, `None` when the product overflows u32.
    pub fn threads(block: [u32; 3]) -> Option<u32> {
        block[0].checked_mul(block[1])?.checked_mul(block[2])
    }

    /// Why `block` cannot be launched under these limits, if it cannot.
    pub fn block_error(&self, block: [u32; 3]) -> Option<String> {
        let shown = format!("{}x{}x{}", block[0], block[1], block[2]);
        for (i, (&d, &max)) in block.iter().zip(&self.max_block).enumerate() {
            if d == 0 || d > max {
                let axis = ["x", "y", "z"][i];
                return Some(format!(
                    "block {shown}: dimension {axis} must be in 1..={max}"
                ));
            }
        }
        match Self::threads(block) {
            Some(n) if n <= self.max_threads_per_block => None,
            n => Some(format!(
                "block {shown} has {} threads, more than the {} a block may have",
                n.map_or_else(|| "over 2^32".to_string(), |n| n.to_string()),
                self.max_threads_per_block
            )),
        }
    }

    /// Why `grid` cannot be launched under these limits, if it cannot.
    pub fn grid_error(&self, grid: [u32; 3]) -> Option<String> {
        let shown = format!("{}x{}x{}", grid[0], grid[1], grid[2]);
        for (i, (&d, &max)) in grid.iter().zip(&self.max_grid).enumerate() {
            if d == 0 || d > max {
                let axis = ["x", "y", "z"][i];
                return Some(format!(
                    "grid {shown}: dimension {axis} must be in 1..={max}"
                ));
            }
        }
        None
    }
}

pub const TARGET_NAMES: [&str; 7] = [
    "gfx942", "gfx950", "gfx1200", "gfx1201", "gfx1250", "sm_80", "sm_90",
];

impl Target {
    /// Looks a target up by name.
    pub fn from_name(name: &str) -> Result<Target, Diagnostic> {
        let amd = |name, warp, split, named, g2l, tdm, lds| Target {
            name,
            vendor: Vendor::Amd,
            warp,
            split_barriers: split,
            named_barriers: named,
            cp_async: false,
            tma: false,
            mbarrier: false,
            wgmma: false,
            proxy_fence: false,
            gather_to_lds: g2l,
            tensor_dma: tdm,
            limits: Limits::amd(name, lds),
        };
        let nv = |name, hopper: bool, smem| Target {
            name,
            vendor: Vendor::Nvidia,
            warp: 32,
            split_barriers: false,
            named_barriers: 16,
            cp_async: true,
            tma: hopper,
            mbarrier: hopper,
            wgmma: hopper,
            proxy_fence: hopper,
            gather_to_lds: false,
            tensor_dma: false,
            limits: Limits::nvidia(name, smem),
        };
        Ok(match name {
            "gfx942" => amd("gfx942", 64, false, 0, true, false, 65536),
            "gfx950" => amd("gfx950", 64, false, 0, true, false, 163840),
            "gfx1200" => amd("gfx1200", 32, true, 0, false, false, 65536),
            "gfx1201" => amd("gfx1201", 32, true, 0, false, false, 65536),
            "gfx1250" => amd("gfx1250", 32, true, 16, true, true, 327680),
            "sm_80" => nv("sm_80", false, 166912),
            "sm_90" => nv("sm_90", true, 232448),
            _ => {
                return Err(
                    Diagnostic::user("E0200", format!("unknown target `{name}`"))
                        .with_note(format!("known targets: {}", TARGET_NAMES.join(", "))),
                );
            }
        })
    }

    pub fn is_amd(&self) -> bool {
        self.vendor == Vendor::Amd
    }

    /// gfx12-family counters (`s_wait_*cnt`) instead of gfx9 `s_waitcnt`.
    pub fn gfx12_counters(&self) -> bool {
        self.is_amd() && self.name.starts_with("gfx12")
    }

    /// The AMD counter that tracks an async copy of this class, if the target counts it.
    pub fn async_counter(&self, class: AsyncClass) -> Option<Counter> {
        if !self.is_amd() {
            return None;
        }
        match class {
            AsyncClass::GatherToLds if self.name == "gfx1250" => Some(Counter::AsyncCnt),
            AsyncClass::GatherToLds if self.gfx12_counters() => Some(Counter::LoadCnt),
            AsyncClass::GatherToLds => Some(Counter::VmCnt),
            AsyncClass::Tdm => Some(Counter::TensorCnt),
            _ => None,
        }
    }

    /// The AMD counter a plain global load increments (it shares the copy's counter on gfx9,
    /// so count waits must count it too).
    pub fn global_load_counter(&self) -> Option<Counter> {
        if !self.is_amd() {
            None
        } else if self.gfx12_counters() {
            Some(Counter::LoadCnt)
        } else {
            Some(Counter::VmCnt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With no target, nothing any target accepts may be refused.
    #[test]
    fn generic_limits_are_the_largest_of_every_target() {
        let all: Vec<Limits> = TARGET_NAMES
            .iter()
            .map(|n| Target::from_name(n).expect("known").limits)
            .collect();
        let g = Limits::GENERIC;
        let max = |f: fn(&Limits) -> u64| all.iter().map(f).max().unwrap_or(0);
        assert_eq!(g.max_shared_bytes, max(|l| l.max_shared_bytes));
        assert_eq!(
            g.max_threads_per_block as u64,
            max(|l| l.max_threads_per_block as u64)
        );
        for i in 0..3 {
            assert!(all.iter().all(|l| l.max_block[i] <= g.max_block[i]));
            assert!(all.iter().all(|l| l.max_grid[i] <= g.max_grid[i]));
        }
    }

    #[test]
    fn block_products_are_checked_not_wrapped() {
        let g = Limits::GENERIC;
        assert_eq!(Limits::threads([65536, 65536, 1]), None);
        assert!(g.block_error([1024, 1, 1]).is_none());
        assert!(g.block_error([1025, 1, 1]).is_some());
        assert!(g.block_error([32, 64, 1]).is_some());
        assert!(g.block_error([0, 1, 1]).is_some());
    }
}
