pub mod inflight;
pub mod overlap;
