//! The op table of the TTGIR importer: which ops have a shared-memory model, which have none
//! by a documented rule, and which are unknown (conservative model + warning W1110).
//!
//! The rules (docs/ttgir.md, "Ops without a model"): register and scalar arithmetic
//! (`arith.*`, `math.*`, `tt.splat`, ...) and global memory ops (`tt.load`, `tt.store`,
//! `amdg.buffer_load`, TMA descriptor setup) touch no shared memory; smemsync does not
//! synchronize global memory. Everything not listed is unknown. Complexity: O(1) per op.

/// How the importer treats an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Translated by the converter (shared memory, sync, control, scalar arithmetic).
    Modelled,
    /// No shared-memory effect: registers, scalars or global memory only.
    NoShared,
    /// Not known: conservative model and a warning.
    Unknown,
}

/// Ops the converter translates.
const MODELLED: &[&str] = &[
    "ttg.local_alloc",
    "ttg.local_dealloc",
    "ttg.local_load",
    "ttg.local_store",
    "ttg.memdesc_index",
    "ttg.memdesc_subslice",
    "ttg.memdesc_trans",
    "ttg.memdesc_reinterpret",
    "ttg.async_copy_global_to_local",
    "ttg.async_commit_group",
    "ttg.async_wait",
    "ttg.convert_layout",
    "ttg.warp_specialize",
    "ttng.warp_group_dot",
    "ttng.warp_group_dot_wait",
    "ttng.fence_async_shared",
    "ttng.init_barrier",
    "ttng.inval_barrier",
    "ttng.barrier_expect",
    "ttng.wait_barrier",
    "ttng.arrive_barrier",
    "ttng.async_tma_copy_global_to_local",
    "ttng.async_tma_copy_local_to_global",
    "ttng.async_tma_store_wait",
    "ttng.tensormap_create",
    "ttng.reinterpret_tensor_descriptor",
    "amdg.buffer_load_to_local",
    "amdg.async_copy_local_to_global",
    "gpu.barrier",
    "scf.for",
    "scf.if",
    "scf.while",
    "scf.yield",
    "scf.condition",
    "scf.execute_region",
    "tt.func",
    "tt.return",
    "tt.call",
    "tt.reduce",
    "tt.scan",
    "tt.histogram",
    "tt.atomic_rmw",
    "tt.atomic_cas",
    "tt.get_program_id",
    "tt.get_num_programs",
    "arith.constant",
    "arith.addi",
    "arith.subi",
    "arith.muli",
    "arith.divsi",
    "arith.divui",
    "arith.remsi",
    "arith.remui",
    "arith.andi",
    "arith.ori",
    "arith.xori",
    "arith.shli",
    "arith.shrsi",
    "arith.shrui",
    "arith.minsi",
    "arith.maxsi",
    "arith.cmpi",
    "arith.select",
    "arith.extsi",
    "arith.extui",
    "arith.trunci",
    "arith.index_cast",
    "arith.ceildivsi",
];

/// Ops with no shared-memory effect: register tensors, float scalars, global memory.
const NO_SHARED: &[&str] = &[
    "tt.splat",
    "tt.broadcast",
    "tt.make_range",
    "tt.expand_dims",
    "tt.addptr",
    "tt.load",
    "tt.store",
    "tt.reshape",
    "tt.trans",
    "tt.join",
    "tt.split",
    "tt.cat",
    "tt.bitcast",
    "tt.int_to_ptr",
    "tt.ptr_to_int",
    "tt.fp_to_fp",
    "tt.clampf",
    "tt.precise_sqrt",
    "tt.precise_divf",
    "tt.mulhiui",
    "tt.extern_elementwise",
    "tt.dot",
    "tt.dot_scaled",
    "tt.assume",
    "tt.make_tensor_ptr",
    "tt.advance",
    "tt.make_tensor_descriptor",
    "tt.reduce.return",
    "tt.scan.return",
    "ttg.global_scratch_alloc",
    "ttng.tensormap_fenceproxy_acquire",
    "amdg.buffer_load",
    "amdg.buffer_store",
    "amdg.in_thread_transpose",
    "amdg.extract_slice",
    "amdg.concat",
    "ub.poison",
];

/// How the importer treats `name`.
pub fn class(name: &str) -> Class {
    if MODELLED.contains(&name) {
        Class::Modelled
    } else if NO_SHARED.contains(&name)
        || (name.starts_with("arith.") && !name.ends_with('i'))
        || name.starts_with("math.")
    {
        Class::NoShared
    } else if name.starts_with("arith.") {
        // Integer arithmetic outside the translated set (e.g. `arith.floordivsi`) is still
        // register-only, but its value cannot be followed exactly: a warning when it feeds an
        // index (the converter's business), no shared effect of its own.
        Class::NoShared
    } else {
        Class::Unknown
    }
}

/// The `.kir` binary op of a translated integer `arith` op.
pub fn int_binop(name: &str) -> Option<&'static str> {
    Some(match name {
        "arith.addi" => "add",
        "arith.subi" => "sub",
        "arith.muli" => "mul",
        "arith.divsi" | "arith.divui" => "div",
        "arith.remsi" | "arith.remui" => "rem",
        "arith.andi" => "and",
        "arith.ori" => "or",
        "arith.xori" => "xor",
        "arith.shli" => "shl",
        "arith.shrsi" | "arith.shrui" => "shr",
        "arith.minsi" => "min",
        "arith.maxsi" => "max",
        _ => return None,
    })
}

/// The `.kir` comparison of a signed or equality `arith.cmpi` predicate (unsigned ones are
/// translated by `intops`, flipping the sign bits; docs/ttgir.md).
pub fn cmp_pred(p: &str) -> Option<&'static str> {
    Some(match p {
        "eq" => "eq",
        "ne" => "ne",
        "slt" => "lt",
        "sle" => "le",
        "sgt" => "gt",
        "sge" => "ge",
        _ => return None,
    })
}
