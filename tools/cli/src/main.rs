//! `weir`: the command-line face of weir. Today: filter capture files with tcpdump
//! expressions and print the programs they compile to; assemble, disassemble and run eBPF
//! programs; prove them safe (`verify`); classic BPF tools; and the plugin protocol of the common eBPF conformance
//! runners.
//!
//! ```text
//! weir filter -r trace.pcap 'tcp port 80'       # like tcpdump -q -n -r trace.pcap ...
//! weir compile -d 'udp and not port 53'         # like tcpdump -d
//! weir bench --hot 'port 22'                    # (--features bench) engines vs libpcap, kernel
//! weir exec testdata/samples/checksum.data     # prints r0 in hex
//! weir asm prog.s -o prog.bin && weir disasm --listing prog.bin
//! ```

// Standard output goes through `out`, which cannot panic.
#![deny(clippy::print_stdout)]

mod cbpf;
mod compile;
mod filter;
mod flow;
mod flowctl;
mod hex;
mod input;
mod jobs;
mod live;
mod matching;
mod objrun;
mod out;
mod plugin;
mod run;
mod tcpdump_flags;
mod verify;
mod workers;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "weir", version, about = "A userspace BPF packet engine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a tcpdump filter expression over a capture file or a live interface: print, count
    /// or write the matching packets.
    Filter(Box<filter::FilterArgs>),
    /// Compile a tcpdump filter expression and print the program (classic BPF or eBPF).
    Compile(compile::CompileArgs),
    /// Time filters on every engine (weir's native code, eBPF JIT and interpreters, libpcap,
    /// the kernel): ns per packet and ratio to libpcap, after checking that all agree.
    #[cfg(feature = "bench")]
    Bench(weir_bench::filters::FiltersArgs),
    /// Assemble eBPF text into bytecode.
    Asm {
        /// Assembly file (`-` for standard input).
        file: PathBuf,
        /// Write the bytecode here (`-` for standard output). A regular file is replaced only
        /// when complete, keeping its mode and owner; a device or FIFO is written through.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print one 64-bit word per slot (the `-- raw` format) instead of raw bytes.
        #[arg(long)]
        words: bool,
    },
    /// Disassemble eBPF bytecode (raw bytes, or `-- raw` style hex words).
    Disasm {
        /// Bytecode file (`-` for standard input).
        file: PathBuf,
        /// A listing for humans: slot numbers, bytes and jump targets.
        #[arg(long)]
        listing: bool,
    },
    /// Run an eBPF program (assembly, bytecode, or a `.data` case) and print r0 in hex.
    Exec {
        /// Program file: assembly text, raw bytecode, or the sectioned `.data` format.
        file: PathBuf,
        /// Memory the program gets in r1 (length in r2), as hex bytes; overrides `-- mem`.
        #[arg(long)]
        mem: Option<String>,
        /// Run on this engine (jit, interp) instead of the one weir picks; an engine that
        /// cannot take the program is then an error, not a fallback.
        #[arg(long, value_name = "ENGINE")]
        engine: Option<weir::Engine>,
        /// Say on standard error which engine runs the program, and why.
        #[arg(long)]
        explain: bool,
        /// Stop after this many instructions (a trap, not a hang).
        #[arg(long)]
        budget: Option<u64>,
        /// For `.data` files: compare with the `-- result`/`-- error` section and exit 1 on a
        /// mismatch.
        #[arg(long)]
        check: bool,
        /// Run without proving the program safe first (the engines check every access
        /// at run time either way).
        #[arg(long)]
        no_verify: bool,
    },
    /// Run a clang-built BPF object's program (XDP, tc, socket filter) with its maps over
    /// every packet of a capture: verdicts, the packets it passes, the maps.
    Run(Box<objrun::RunArgs>),
    /// tc-flower rules on a tuple-space classifier: `check` a rule file, `run` it over a
    /// capture or an interface (verdicts, per-rule counters, a capture per output device).
    Flow {
        #[command(subcommand)]
        command: flow::FlowCommand,
    },
    /// Multi-way dispatch: a `match { test => handler(args) ... }` program (pflang tests)
    /// over a capture: per-packet handlers, per-handler counts or captures.
    Match(matching::MatchArgs),
    /// Prove a program safe as the kernel's verifier would (exit 0), or say where and why
    /// not (exit 1); 2 when the input cannot be read.
    Verify(verify::VerifyArgs),
    /// Classic BPF: check, run over a capture, reformat.
    #[command(subcommand)]
    Cbpf(cbpf::CbpfCommand),
    /// The plugin protocol of the eBPF conformance runner (bpf_conformance): program bytes
    /// as hex on standard input, memory as hex in the first argument; prints r0 in hex.
    /// Started as `weir-conformance-plugin` (a link to weir), weir is this command.
    ConformancePlugin(plugin::PluginArgs),
}

/// `weir bench`: the filter suite of `bench/`, with the same options.
#[cfg(feature = "bench")]
fn bench(args: &weir_bench::filters::FiltersArgs) -> Result<ExitCode, String> {
    let command = std::iter::once("weir bench".to_string())
        .chain(std::env::args().skip(2))
        .collect::<Vec<_>>()
        .join(" ");
    match weir_bench::filters::run(args, &command)? {
        true => Ok(ExitCode::SUCCESS),
        false => Err("the engines disagreed or failed (see the messages above)".into()),
    }
}

fn main() -> ExitCode {
    if plugin::invoked_as_plugin() {
        return plugin::main_as_plugin();
    }
    let cli = Cli::parse_from(plugin::weir_arguments());
    let result = match cli.command {
        Command::Filter(args) => filter::run(*args),
        Command::Compile(args) => compile::run(args),
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench(&args),
        Command::Asm { file, output, words } => run::asm(&file, output.as_deref(), words),
        Command::Disasm { file, listing } => run::disasm(&file, listing),
        Command::Exec { file, mem, engine, explain, budget, check, no_verify } => run::exec(
            &file,
            mem.as_deref(),
            run::EngineRequest { engine, explain },
            budget,
            check,
            !no_verify,
        ),
        Command::Verify(args) => verify::run(args),
        Command::Cbpf(command) => cbpf::run(command),
        Command::Run(args) => objrun::run(*args),
        Command::Flow { command } => flow::run(command),
        Command::Match(args) => matching::run(&args),
        Command::ConformancePlugin(args) => return plugin::finish(plugin::run(&args)),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("weir: {message}");
            ExitCode::FAILURE
        }
    }
}
