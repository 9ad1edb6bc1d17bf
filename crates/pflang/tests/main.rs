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

/// A list of testdata/pflang: its lines, comment lines (`#` first) and blank ones left out.
fn testdata_list(name: &str) -> Vec<String> {
    let path = format!("{}/../../testdata/pflang/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// A message with its quoted parts (names, numbers as written) blanked, so that failures
/// that differ only in them fall in one class.
fn generalize(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut quote: Option<char> = None;
    for c in message.chars() {
        match quote {
            Some(q) if c == q => {
                out.push('_');
                out.push(c);
                quote = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if matches!(c, '\'' | '"' | '`') {
                    quote = Some(c);
                }
            }
        }
    }
    if quote.is_some() {
        out.push('_');
    }
    out
}

/// Words for random token soups that mostly resolve (names that exist, valid numbers), so
/// libpcap's verdict is about syntax more often than about names.
const SOUP: &[&str] = &[
    "host",
    "net",
    "port",
    "portrange",
    "src",
    "dst",
    "and",
    "or",
    "not",
    "!",
    "(",
    ")",
    "(",
    ")",
    "tcp",
    "udp",
    "ip",
    "ip6",
    "ether",
    "[",
    "]",
    ":",
    "1",
    "2",
    "4",
    "80",
    "10.0.0.1",
    "::1",
    "aa:bb:cc:dd:ee:ff",
    "localhost",
    "len",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    ">",
    "<",
    "=",
    "!=",
    "vlan",
    "proto",
    "broadcast",
    "less",
    "10.0.0.0",
    "mask",
    "255.0.0.0",
    "llc",
    "1-1024",
    "tcp-syn",
    "\\tcp",
    "gateway",
    "protochain",
    "multicast",
    "mpls",
    "pppoes",
];

mod differential;
mod fuse;
mod kernel;
mod libpcap_oracle;
mod lower_link;
mod lower_net;
mod native;
mod opt_shortcuts;
mod pairs;
mod parse;
mod rejects;
mod rejects_all;
mod truncation;
