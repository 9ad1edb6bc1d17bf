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

/// A number from the environment (decimal, or hex with `0x`): the long offline runs' knobs
/// (counts, extra seeds).
fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
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
