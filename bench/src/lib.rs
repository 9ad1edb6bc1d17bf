//! `weir_bench`: the benchmark suites as a library, so that `weir bench` (the CLI) and the
//! `weir-bench` binary run the same code. See the binary's documentation for the suites.
//!
//! Module map: `filters` (the filter suite's driver) over `engines` (what runs a filter),
//! `kernel_runs` (the kernel as an engine), `workload` and `traffic` (the packets),
//! `filterlist` (bench/filters.txt), `timing` (rounds, medians); `compile` (compile
//! latency); `interp` (the eBPF interpreter suite); `matching` (pfmatch dispatch against sequential filters, issue 15); `runtime` (the eBPF runtime's goals:
//! load time, map lookups, xdp_counter against the kernel, `weir run` end to end); `e2e` (whole processes: weir, tcpdump
//! and the `floor` reader over a generated capture); `record` (dated records).

pub mod compile;
pub mod e2e;
pub mod emit;
mod engines;
mod filterlist;
pub mod filters;
pub mod floor;
pub mod flow;
pub mod interp;
mod kernel_runs;
pub mod matching;
mod record;
pub mod runtime;
mod timing;
mod traffic;
mod workload;
