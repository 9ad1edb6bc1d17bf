//! The crate's integration tests as one binary, linked once (a binary per file linked the
//! whole dependency tree once per file). Each module is one test file; run one with
//! `cargo test --release -p weir-conformance --test integration MODULE::`.

mod corpus;
mod extension;
mod fuzz_regressions;
mod kernel_oracle;
mod parse_errors;
mod protochain;
