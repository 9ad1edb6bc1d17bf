//! `weir match`: a pfmatch program over a capture.
//!
//! ```text
//! weir match dispatch.txt -r trace.pcap            # per packet: index, handler(args) or -
//! weir match dispatch.txt -r trace.pcap --count    # per handler: packets
//! weir match dispatch.txt -r trace.pcap --out-dir out   # out/HANDLER.pcap per handler
//! weir match dispatch.txt --explain [-r trace.pcap]     # the compiled decision structure
//! weir match dispatch.txt -r trace.pcap --engine reference   # the IR's evaluator
//! ```
//!
//! The dispatch runs on the engine the facade picks (`weir::Dispatch`: native code unless
//! it cannot compile, then the IR's evaluator); `--explain` says which on standard error,
//! as `weir filter --explain` does.
//!
//! The program compiles for the capture's link type (Ethernet with `--explain` alone).
//! Packets no clause matches go to no handler: `-` per packet, `(no handler)` in the counts,
//! no file in `--out-dir`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use weir::pflang::Options;
use weir::pfmatch::parse_with;
use weir::{Dispatch, Engine, LinkType, NameDb};
use weir_runtime::capture::{CaptureReader, CaptureWriter};
use weir_runtime::source::PacketSource;

#[derive(clap::Args)]
pub struct MatchArgs {
    /// The match program: `match { test => handler(args) ... }`, `#` comments.
    pub program: PathBuf,
    /// Read packets from this capture file (`-`: standard input).
    #[arg(short = 'r', value_name = "CAPTURE")]
    pub read: Option<PathBuf>,
    /// Print packets per handler instead of a line per packet.
    #[arg(long)]
    pub count: bool,
    /// Write HANDLER.pcap per handler here (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Print the compiled decision structure (optimized per-clause predicates), and on
    /// standard error the engine that runs it and why.
    #[arg(long)]
    pub explain: bool,
    /// Run on this engine instead of the one weir picks (native or reference).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<Engine>,
}

pub fn run(args: &MatchArgs) -> Result<ExitCode, String> {
    let source = std::fs::read_to_string(&args.program)
        .map_err(|e| format!("{}: {e}", args.program.display()))?;
    if args.read.is_none() && !args.explain {
        return Err("weir match: give a capture with -r (or --explain alone)".into());
    }
    let mut reader = match &args.read {
        Some(path) => {
            Some(CaptureReader::open(path).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    let linktype = match &reader {
        Some(r) => {
            LinkType::from_number(r.linktype())
                .filter(|&l| weir::pflang::compiles_for(l))
                .ok_or_else(|| format!("link type {} is not supported for filters", r.linktype()))?
        }
        None => LinkType::Ethernet,
    };
    let program = match parse_with(&source, &Options::new(linktype), &NameDb::system()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("weir: {}: {}", args.program.display(), e.render());
            return Ok(ExitCode::FAILURE);
        }
    };
    for w in &program.warnings {
        eprintln!("weir: {}: {w}", args.program.display());
    }
    let dispatch = Dispatch::prepare(program, args.engine).map_err(|e| {
        let mut message = format!("{}: {}", args.program.display(), e.message);
        for reason in e.reasons {
            message.push_str("\n  ");
            message.push_str(&reason);
        }
        message
    })?;
    if args.explain {
        eprint!("{}", dispatch.choice());
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let io = |e: std::io::Error| format!("standard output: {e}");
    if args.explain {
        write!(out, "{}", dispatch.compiled()).map_err(io)?;
    }
    let Some(reader) = reader.as_mut() else {
        out.flush().map_err(io)?;
        return Ok(ExitCode::SUCCESS);
    };
    let names = dispatch.handlers();
    let mut writers: Vec<Option<CaptureWriter>> = (0..names.len()).map(|_| None).collect();
    if let Some(dir) = &args.out_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let (lt, snaplen) = (reader.linktype(), reader.snaplen().max(65535));
    let mut counts = vec![0u64; names.len()];
    let mut unmatched = 0u64;
    let per_packet = !args.count && args.out_dir.is_none() && !args.explain;
    let only_counts = args.count && args.out_dir.is_none();
    while let Some(p) = reader.next_packet() {
        let p = p.map_err(|e| format!("{}: {e}", display(&args.read)))?;
        if only_counts {
            // Counting needs the handler only: no argument vector per packet. The packet
            // read the slow way, then every complete record buffered after it as one batch
            // (`handler_each` prefetches the packets ahead: bench/records/2026-11-29-pfmatch-14.txt).
            let mut count = |h: Option<usize>| match h {
                Some(h) => counts[h] += 1,
                None => unmatched += 1,
            };
            count(dispatch.handler(p.data, p.wire_len));
            reader.visit_buffered_batch(|batch| dispatch.handler_each(batch, |_, h| count(h)));
            continue;
        }
        let outcome = dispatch.run(p.data, p.wire_len);
        let Some(h) = outcome.handler else {
            unmatched += 1;
            if per_packet {
                writeln!(out, "{} -", p.index).map_err(io)?;
            }
            continue;
        };
        counts[h] += 1;
        if per_packet {
            if outcome.args.is_empty() {
                writeln!(out, "{} {}", p.index, names[h]).map_err(io)?;
            } else {
                let shown: Vec<String> = outcome.args.iter().map(u32::to_string).collect();
                writeln!(out, "{} {}({})", p.index, names[h], shown.join(", ")).map_err(io)?;
            }
        }
        if let Some(dir) = &args.out_dir {
            if writers[h].is_none() {
                let path = dir.join(format!("{}.pcap", names[h]));
                if args.read.as_ref().is_some_and(|r| weir_runtime::output::same_file(&path, r)) {
                    return Err(format!(
                        "{}: the output would overwrite the input",
                        path.display()
                    ));
                }
                let w = CaptureWriter::pcap(&path, lt, snaplen)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                writers[h] = Some(w);
            }
            if let Some(w) = writers[h].as_mut() {
                w.write(&p).map_err(|e| format!("{}: {e}", names[h]))?;
            }
        }
    }
    for (name, w) in names.iter().zip(writers) {
        if let Some(w) = w {
            w.finish().map_err(|e| format!("{name}.pcap: {e}"))?;
        }
    }
    if args.count || args.out_dir.is_some() {
        for (name, n) in names.iter().zip(&counts) {
            writeln!(out, "{name} {n}").map_err(io)?;
        }
        writeln!(out, "(no handler) {unmatched}").map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(ExitCode::SUCCESS)
}

fn display(path: &Option<PathBuf>) -> String {
    path.as_ref().map_or_else(|| "-".into(), |p| p.display().to_string())
}
