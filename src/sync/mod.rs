pub mod waits;
