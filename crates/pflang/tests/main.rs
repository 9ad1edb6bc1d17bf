//! The crate's integration tests as one binary, linked once (a binary per file linked the
//! whole dependency tree once per file). Each module is one test file; run one with
//! `cargo test --release -p weir-pflang --test integration MODULE::`.

// golden.rs is a binary of its own (see Cargo.toml): its files name `--test golden`.

use weir_pflang::names::NameDb;
use weir_pflang::Options;

/// Parses, lowers and optimizes, as the facade's compile path does (`weir_pflang::compile`
/// stops after lowering).
fn compile(
    expr: &str,
    options: &Options,
    names: &NameDb,
) -> Result<weir_filter::Filter, weir_pflang::CompileError> {
    weir_pflang::compile(expr, options, names).map(weir_filter::opt::optimize_owned)
}

mod differential;
mod kernel;
mod libpcap_oracle;
mod lower_link;
mod lower_net;
mod native;
mod parse;
mod rejects;
mod rejects_all;
mod truncation;
