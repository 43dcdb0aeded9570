//! Symbolic footprints: decides the footprint engine's thread questions (may two different
//! threads touch one address unit, at which loop-iteration distances; does one instance of
//! a write touch a unit from two threads) by reasoning on quasi-affine index forms instead of
//! enumerating threads × elements × iterations. The formulation, the forms recognized, the
//! decision procedure, the fallbacks and the complexity are in `docs/symbolic.md`.
//!
//! - [`solve`]: bounded integer feasibility (bounds propagation and branching, exact).
//! - [`form`]: IR values as affine forms over solver variables (div/rem and bits as
//!   existential variables), guards as constraints.
//! - [`bits`]: collective footprints (layout owners as GF(2) maps, abstract and unknown
//!   owners) and the thread relation of a pair of sides.
//! - [`pairs`]: the pair-conflict and self-race questions, with the enumerator's meaning.
//! - [`free`]: the self race of a write whose index the enumerator cannot evaluate, with
//!   each unknown value a free variable (E0301, W0317).
//! - [`copies`]: the self race of a tile load issued by several threads (different
//!   origins into one view), over the loops' true iteration domains (E0301, W0317).
//! - [`cases`]: questions through parameters with declared ranges and block ids, asked
//!   once per combination of their values and joined.
//! - [`params`]: pair questions through parameters and block ids as free variables shared
//!   by both sides (no declared range needed).
//! - [`shift`]: solutions moved by whole warps of one thread, proposed as witnesses of the
//!   cross-warp question.
//! - [`split`]: questions whose indices shift by a loop variable, one affine question per
//!   value of its iteration index.
//! - [`overlap`]: the in-flight engine's question (may an async copy and a later access at
//!   related iterations touch a common byte), with `analysis::overlap`'s meaning.
//!
//! Invariant: every answer given equals the enumerating engine's (`analysis::footprint`,
//! `analysis::overlap`), which stays the oracle (`tests/symbolic.rs`) and the fallback wherever this module says
//! `None`.

pub mod bits;
pub mod cases;
pub mod copies;
pub mod form;
pub mod free;
pub mod overlap;
pub mod pairs;
pub mod params;
pub mod shift;
pub mod solve;
pub mod split;
