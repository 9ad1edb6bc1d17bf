//! `weir-bench`: times weir's engines against other implementations on the same programs,
//! filters and packets, in one run, and reports medians and ratios. Results are checked
//! for agreement before anything is timed. A benchmark is not a test: nothing here asserts
//! a speed; `--record` writes a dated record under `bench/records/`.
//!
//! ```text
//! cargo run --release -p weir-bench -- interp              # weir interpreter vs rbpf
//! cargo run --release -p weir-bench -- filters             # every filter, every engine
//! cargo run --release -p weir-bench -- filters --hot 'port 22' --engines jit,libpcap
//! cargo run --release -p weir-bench -- filters -r capture.pcap --stream
//! cargo run --release -p weir-bench -- compile             # compile latency, host sets
//! cargo run --release -p weir-bench -- e2e                 # weir, tcpdump, floor processes
//! cargo run --release -p weir-bench -- e2e --big 4 --rounds 1   # max RSS on a 4 GiB file
//! cargo run -p weir-bench -- filters --rounds 3 --quick    # CI smoke: seconds
//! cargo run --release -p weir-bench -- runtime --record    # the eBPF runtime's goals
//! cargo run --release -p weir-bench -- flow --record       # the flow datapath's goals
//! cargo run --release -p weir-bench -- match --record      # pfmatch dispatch's goals
//! ```
//!
//! Module map: `filters` (the filter suite's driver) over `engines` (what runs a filter),
//! `kernel_runs` (the kernel as an engine), `workload` and `traffic` (the packets),
//! `filterlist` (bench/filters.txt), `timing` (rounds, medians); `compile` (compile
//! latency); `interp` (the eBPF interpreter suite); `e2e` (whole processes: `weir filter`,
//! `tcpdump` and the floor reader `weir-bench-floor` timed over a generated, page-cached
//! capture, `--count` and `-w`; wall time, CPU time and max RSS); `record` (dated records).

use weir_bench::{compile, e2e, emit, filters, flow, interp, matching, runtime};

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "weir-bench",
    about = "Comparative benchmarks: weir's engines against libpcap, the kernel and rbpf"
)]
struct Cli {
    #[command(subcommand)]
    suite: Suite,
}

#[derive(Debug, Subcommand)]
enum Suite {
    /// weir's eBPF interpreter against rbpf's on four programs, and weir's classic
    /// interpreter against libpcap's bpf_filter on the bench filters.
    Interp {
        /// Timed rounds per program.
        #[arg(long, default_value_t = 25, value_name = "N")]
        rounds: usize,
        /// Write bench/records/<date>-interp.txt.
        #[arg(long)]
        record: bool,
        /// Only the classic interpreter's rows (weir's against libpcap's bpf_filter).
        #[arg(long)]
        cbpf_only: bool,
    },
    /// Filters on every engine (weir's, libpcap, the kernel): ns per packet, x libpcap.
    Filters(filters::FiltersArgs),
    /// Compile latency: weir against libpcap, per filter and for large host sets.
    Compile(compile::CompileArgs),
    /// Emitted program size and kernel cost: weir's classic and eBPF against libpcap's.
    Emit(emit::EmitArgs),
    /// Whole processes: weir filter, tcpdump and a floor reader over a generated capture.
    E2e(e2e::E2eArgs),
    /// The eBPF runtime's goals: load time, map lookups, xdp_counter against the kernel's
    /// test run, `weir run` end to end.
    Runtime(runtime::RuntimeArgs),
    /// The flow datapath's goals: classifier ns/packet against rules and masks and the
    /// linear reference, updates, memory per rule, workers, `weir flow run` end to end.
    Flow(flow::FlowArgs),
    /// pfmatch: a 16-clause dispatch (native, IR evaluator) against the 16 filters run in
    /// turn and each alone; `weir match --count` against 16 tcpdump processes.
    Match(matching::MatchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = std::iter::once("weir-bench".to_string())
        .chain(std::env::args().skip(1).map(|a| if a.contains(' ') { format!("'{a}'") } else { a }))
        .collect::<Vec<_>>()
        .join(" ");
    let outcome = match &cli.suite {
        Suite::Interp { rounds, record, cbpf_only } => {
            interp::run(*rounds, *record, *cbpf_only, &command)
        }
        Suite::Filters(args) => filters::run(args, &command),
        Suite::Compile(args) => compile::run(args, &command),
        Suite::E2e(args) => e2e::run(args, &command),
        Suite::Runtime(args) => runtime::run(args, &command),
        Suite::Emit(args) => emit::run(args, &command),
        Suite::Flow(args) => flow::run(args, &command),
        Suite::Match(args) => matching::run(args, &command),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("weir-bench: FAILED (see the messages above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("weir-bench: {e}");
            ExitCode::from(2)
        }
    }
}
