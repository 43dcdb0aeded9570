pub mod waits;
pub mod waits_paths;
