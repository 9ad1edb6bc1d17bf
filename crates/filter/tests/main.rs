//! The crate's integration tests as one binary, linked once (a binary per file linked the
//! whole dependency tree once per file). Each module is one test file; run one with
//! `cargo test --release -p weir-filter --test integration MODULE::`.

// The filter generator and packets emit.rs and emit_kernel.rs share.
mod emit_common;

mod emit;
mod emit_kernel;
mod opt;
mod tighten;
