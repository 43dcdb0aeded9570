//! Targets: which sync ops a GPU has and what they cost.
//!
//! A [`Target`] is built from a name (`gfx942`, `gfx950`, `gfx1200`, `gfx1201`, `gfx1250`,
//! `sm_80`, `sm_90`); unknown names are errors that list the known ones. Placement asks the
//! target whether split or named barriers exist, the warp width, and which counter an async
//! copy or memory op increments.

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
    pub gather_to_lds: bool,
    pub tensor_dma: bool,
}

pub const TARGET_NAMES: [&str; 7] = [
    "gfx942", "gfx950", "gfx1200", "gfx1201", "gfx1250", "sm_80", "sm_90",
];

impl Target {
    /// Looks a target up by name.
    pub fn from_name(name: &str) -> Result<Target, Diagnostic> {
        let amd = |name, warp, split, named, g2l, tdm| Target {
            name,
            vendor: Vendor::Amd,
            warp,
            split_barriers: split,
            named_barriers: named,
            cp_async: false,
            tma: false,
            mbarrier: false,
            wgmma: false,
            gather_to_lds: g2l,
            tensor_dma: tdm,
        };
        let nv = |name, hopper: bool| Target {
            name,
            vendor: Vendor::Nvidia,
            warp: 32,
            split_barriers: false,
            named_barriers: 16,
            cp_async: true,
            tma: hopper,
            mbarrier: hopper,
            wgmma: hopper,
            gather_to_lds: false,
            tensor_dma: false,
        };
        Ok(match name {
            "gfx942" => amd("gfx942", 64, false, 0, false, false),
            "gfx950" => amd("gfx950", 64, false, 0, true, false),
            "gfx1200" => amd("gfx1200", 32, true, 0, false, false),
            "gfx1201" => amd("gfx1201", 32, true, 0, false, false),
            "gfx1250" => amd("gfx1250", 32, true, 16, true, true),
            "sm_80" => nv("sm_80", false),
            "sm_90" => nv("sm_90", true),
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
