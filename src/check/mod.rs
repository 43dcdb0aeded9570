//! Independent verification: the split/named-barrier protocol verifier (and the race checker
//! and interpreter). Shares only the IR and the effects table with placement.

pub mod protocol;
