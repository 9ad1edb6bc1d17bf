//! `weir cbpf ...`: classic BPF programs in any of the forms tcpdump and the kernel use.

use crate::out;
use clap::{Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use weir::cbpf::{CbpfFilter, Format, Rules};
use weir::isa::cbpf::{encode, format_dd, format_ddd, format_listing, CbpfInsn};
use weir::ProgType;
use weir_runtime::capture::CaptureReader;
use weir_runtime::source::PacketSource;

/// The forms a classic program file can take.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    /// Decide from the content.
    Auto,
    /// `tcpdump -d` listing (also an assembler).
    Listing,
    /// `tcpdump -dd` C array.
    Dd,
    /// `tcpdump -ddd` decimal, count line first.
    Ddd,
    /// Raw `struct sock_filter` bytes.
    Raw,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Auto => Format::Auto,
            FormatArg::Listing => Format::Listing,
            FormatArg::Dd => Format::CArray,
            FormatArg::Ddd => Format::Decimal,
            FormatArg::Raw => Format::Raw,
        }
    }
}

/// Whose rules a program must pass.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RulesArg {
    /// The Linux kernel's classic checker plus libpcap's rules.
    Kernel,
    /// libpcap's `bpf_validate` alone (admits `ip6 protochain`'s backward jump).
    Libpcap,
}

impl From<RulesArg> for Rules {
    fn from(r: RulesArg) -> Rules {
        match r {
            RulesArg::Kernel => Rules::Kernel,
            RulesArg::Libpcap => Rules::Libpcap,
        }
    }
}

#[derive(Subcommand)]
pub enum CbpfCommand {
    /// Check a program against libpcap's rules (as tcpdump loads programs), or the kernel's.
    Validate {
        /// Program file (`-` for standard input).
        prog: PathBuf,
        #[arg(long, value_enum, default_value = "auto")]
        format: FormatArg,
        /// The same default as `cbpf run`: libpcap's.
        #[arg(long, value_enum, default_value = "libpcap")]
        rules: RulesArg,
    },
    /// Run a program over every packet of a capture file.
    Run {
        /// Program file.
        prog: PathBuf,
        /// Capture file (pcap or pcapng; `-` for standard input).
        #[arg(short = 'r', long = "read")]
        capture: PathBuf,
        /// Print only the number of packets the program accepts.
        #[arg(long)]
        count: bool,
        #[arg(long, value_enum, default_value = "auto")]
        format: FormatArg,
        #[arg(long, value_enum, default_value = "libpcap")]
        rules: RulesArg,
        /// Run on this engine (jit, interp: the eBPF translation; cbpf: the classic
        /// interpreter) instead of the one weir picks.
        #[arg(long, value_name = "ENGINE")]
        engine: Option<weir::Engine>,
        /// Say on standard error which engine runs the program, and why.
        #[arg(long)]
        explain: bool,
    },
    /// Translate a program to eBPF and print the eBPF listing.
    Translate {
        prog: PathBuf,
        #[arg(long, value_enum, default_value = "auto")]
        format: FormatArg,
        /// The eBPF program type: socket (`__sk_buff` context, LD_ABS/LD_IND loads; also
        /// sched_cls and sched_act) or xdp (direct packet access with bounds checks the Linux
        /// verifier accepts).
        #[arg(long, default_value = "socket")]
        target: ProgType,
    },
    /// Print a program as `tcpdump -d`, `-dd` or `-ddd` would.
    Print {
        prog: PathBuf,
        #[arg(long, value_enum, default_value = "auto")]
        format: FormatArg,
        /// Output form.
        #[arg(long = "as", value_enum, default_value = "listing")]
        output: FormatArg,
    },
}

fn load(path: &Path, format: FormatArg) -> Result<Vec<CbpfInsn>, String> {
    let bytes = crate::input::read(path)?;
    weir::cbpf::parse(&bytes, format.into()).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(command: CbpfCommand) -> Result<ExitCode, String> {
    match command {
        CbpfCommand::Validate { prog, format, rules } => {
            let insns = load(&prog, format)?;
            CbpfFilter::with_rules(&insns, rules.into())
                .map_err(|e| format!("{}: {e}", prog.display()))?;
            out::line(&format!("{}: valid, {} instructions", prog.display(), insns.len()))?;
            Ok(ExitCode::SUCCESS)
        }
        CbpfCommand::Run { prog, capture, count, format, rules, engine, explain } => {
            let insns = load(&prog, format)?;
            // Validation first, so its message names the instruction as before.
            CbpfFilter::with_rules(&insns, rules.into())
                .map_err(|e| format!("{}: {e}", prog.display()))?;
            let mut filter = weir::PreparedClassic::new(&insns, rules.into(), engine)
                .map_err(|e| format!("{}: {e}", prog.display()))?;
            if explain {
                eprint!("weir: {}", filter.choice());
            }
            let mut file = CaptureReader::open(&capture)
                .map_err(|e| format!("{}: {e}", capture.display()))?
                .without_blocks();
            let mut matched: u64 = 0;
            let mut seen: u64 = 0;
            let mut failure = None;
            while let Some(record) = file.next_packet() {
                let record = match record {
                    Ok(r) => r,
                    Err(e) => {
                        failure = Some(format!("{}: {e}", capture.display()));
                        break;
                    }
                };
                seen = seen.saturating_add(1);
                let verdict = filter.run(record.data, record.wire_len);
                if verdict != 0 {
                    matched = matched.saturating_add(1);
                    if !count {
                        out::line(&format!(
                            "{} {}.{:06} {}/{} bytes -> {verdict}",
                            record.index.saturating_add(1),
                            record.ts_sec,
                            record.ts_nsec / 1000,
                            record.data.len(),
                            record.wire_len
                        ))?;
                    }
                }
            }
            if count {
                out::line(&matched.to_string())?;
            }
            match failure {
                // The packets before the damage were processed; say where it stopped.
                Some(e) => Err(format!("{e} (stopped after {seen} packets, {matched} matched)")),
                None => Ok(ExitCode::SUCCESS),
            }
        }
        CbpfCommand::Translate { prog, format, target } => {
            let insns = load(&prog, format)?;
            let program = weir::cbpf::translate::translate(&insns, target)
                .map_err(|e| format!("{}: {e}", prog.display()))?;
            out::text(&weir::isa::asm::disassemble(program.insns()))?;
            Ok(ExitCode::SUCCESS)
        }
        CbpfCommand::Print { prog, format, output } => {
            let insns = load(&prog, format)?;
            let text = match output {
                FormatArg::Auto | FormatArg::Listing => format_listing(&insns),
                FormatArg::Dd => format_dd(&encode(&insns)),
                FormatArg::Ddd => format_ddd(&encode(&insns)),
                FormatArg::Raw => {
                    crate::run::refuse_binary_to_terminal(
                        "sock_filter bytes",
                        "--as listing|dd|ddd",
                    )?;
                    let bytes: Vec<u8> = encode(&insns).iter().flat_map(|r| r.to_bytes()).collect();
                    out::bytes(&bytes)?;
                    return Ok(ExitCode::SUCCESS);
                }
            };
            out::text(&text)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
