//! The crate's integration tests as one binary, linked once (a binary per file linked the
//! whole dependency tree once per file). Each module is one test file; run one with
//! `cargo test --release -p weir-jit --test integration MODULE::`.

mod differential;
mod facts;
mod filter;
mod helpers;
mod lent;
mod semantics;
