//! The crate's integration tests as one binary, linked once (a binary per file linked the
//! whole dependency tree once per file). Each module is one test file; run one with
//! `cargo test --release -p weir-interp --test integration MODULE::`.

// Helpers the test files share.
mod common;

mod alu;
mod calls;
mod jumps;
mod memory;
