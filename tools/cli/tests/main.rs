//! The crate's integration tests as one binary, linked once (a binary per file linked the
//! whole dependency tree once per file). Each module is one test file; run one with
//! `cargo test --release -p weir-cli --test integration MODULE::`.

/// Helpers the test files share.
mod common;

mod cli;
mod compile_object;
mod filter;
mod flow;
mod flow_control;
mod flow_xdp;
mod jobs;
mod lines;
mod links;
mod live;
mod matching;
mod never_panics;
mod output;
mod plugin;
mod rejects_all;
mod run;
mod run_cpus;
mod snaplen_copy;
mod tcpdump_habits;
mod verify;
