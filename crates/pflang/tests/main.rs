//! The crate's integration tests as one binary, linked once (a binary per file linked the
//! whole dependency tree once per file). Each module is one test file; run one with
//! `cargo test --release -p weir-pflang --test integration MODULE::`.

// golden.rs is a binary of its own (see Cargo.toml): its files name `--test golden`.

mod differential;
mod kernel;
mod libpcap_oracle;
mod lower_link;
mod lower_net;
mod native;
mod parse;
mod rejects;
