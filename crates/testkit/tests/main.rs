//! The crate's integration tests as one binary, linked once (a binary per file linked the
//! whole dependency tree once per file). Each module is one test file; run one with
//! `cargo test --release -p weir-testkit --test integration MODULE::`.

mod corpus;
mod pcap;
mod tcpdump;
