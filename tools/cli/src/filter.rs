//! `weir filter`: a tcpdump expression over a capture file, with tcpdump's conventions.
//!
//! ```text
//! weir filter -r trace.pcap 'tcp port 80'            # one line per matching packet
//! weir filter -r trace.pcap --count udp              # just the number
//! weir filter -r - -w web.pcapng -F web.filter < trace.pcapng
//! ```
//!
//! The expression is the remaining arguments joined with spaces, or with `-F` a file's
//! contents, where `#` starts a comment that runs to the end of the line (as tcpdump reads
//! such files). It is compiled for the capture's link type, or the one `-y` names, through
//! `weir::compile_filter_with`; every record is then tested in one place ([`Matcher`]), which is
//! where the engine the facade chose (`--engine`, `--explain`) runs it.
//!
//! A capture damaged midway (cut short, a record with an absurd length) is processed up to
//! the damage: the packets before it are printed, counted and written, then the error says
//! which record and byte it stopped at and the exit status is 1. With `-w` the output is
//! then still a complete, valid capture, renamed into place, holding the matching packets
//! that came before the damage, and the message says so. An output is never left
//! half-written under its final name (see `weir_runtime::capture::CaptureWriter`), and
//! what `-w` names is treated as tcpdump treats it (`weir_runtime::output`): a device or
//! FIFO is written through, a link is followed, a replaced file keeps its mode and owner,
//! a hard-linked file is written in place, and the capture being read is refused.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use weir::pflang::{CompileError, LinkType};
use weir::Filter;
use weir::FilterOptions;
use weir::NameDb;
use weir::{Engine, PreparedFilter};
use weir_runtime::capture::{CaptureReader, CaptureWriter, Turn};
use weir_runtime::source::{Packet, PacketSource};

use weir::packet::summary;

/// Captures at least this large get a progress bar (on a terminal).
const PROGRESS_MIN_BYTES: u64 = 32 << 20;

#[derive(Args)]
#[command(after_help = "\
The expression is tcpdump's filter language; quote it or pass it as several words.
Without -w, each matching packet is printed on one line as `tcpdump -q -n` prints it
(timestamps in UTC). With -w, matching packets are written instead, as a capture of the
input's format (pcap or pcapng), link type and timestamp resolution; a regular file appears
under its name only when complete, keeping the mode and owner of the file it replaces. A
device or FIFO (/dev/null, a named pipe) is written through, a symbolic link is followed,
a file with several hard links is written in place, and -w naming the -r file is refused.

A capture that is damaged midway is processed up to the damage and weir exits with status 1,
naming the record and byte offset where it stopped. With -w the output file is kept: it is
a valid capture holding the matching packets before that record, and the message says so.

Without -r, weir captures live from -i IFACE (or the default interface, as tcpdump picks it;
root or CAP_NET_RAW needed). The filter runs in the kernel as classic BPF when it fits, else
as an eBPF socket filter, else in user space (--explain says which). -c or Ctrl-C ends the
capture; -w then holds a complete pcap, and tcpdump's three statistics lines follow on
standard error.

Several captures (-r A -r B, or -r DIR): unlike tcpdump, which reads one -r, weir reads
them all, --jobs files at a time. --count prints the total. Printed lines and -w output
come out merged in timestamp order across the files, as mergecap merges them (ties: the
earlier file first); -w then writes a pcap (microsecond timestamps, as tcpdump -w writes)
and needs the inputs to share one link type. -c N keeps the first N of the merged order.
A damaged file is processed up to its damage, the others whole, and weir exits with 1.")]
pub struct FilterArgs {
    /// Capture file to read (pcap or pcapng); `-` reads standard input. Without -r (and
    /// without -i), weir captures from the default interface, as tcpdump does. Unlike
    /// tcpdump, -r may be given several times, or name a directory (its files, by name):
    /// see --jobs.
    #[arg(
        short = 'r',
        long = "read",
        value_name = "FILE",
        conflicts_with = "interface",
        action = clap::ArgAction::Append
    )]
    read: Vec<PathBuf>,
    /// With several captures (several -r, or a directory): process this many files at
    /// once, on as many threads (default: every core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// List the interfaces weir can capture from, as tcpdump -D does, and exit.
    #[arg(short = 'D', long = "list-interfaces")]
    list_interfaces: bool,
    #[command(flatten)]
    live: crate::live::LiveArgs,
    /// Write the matching packets to this capture file (`-` for standard output) instead
    /// of printing them.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    write: Option<PathBuf>,
    /// Stop after this many matching packets.
    #[arg(short = 'c', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// Read the expression from this file (`#` comments allowed); the expression arguments
    /// are then ignored, as tcpdump ignores them.
    #[arg(short = 'F', value_name = "EXPRFILE")]
    expression_file: Option<PathBuf>,
    /// Print only the number of matching packets.
    #[arg(long)]
    count: bool,
    /// Treat the packets as this link type (a tcpdump -y name such as EN10MB, LINUX_SLL,
    /// RAW, or a DLT number) instead of the capture's own.
    #[arg(short = 'y', long = "linktype", value_name = "LINKTYPE")]
    linktype: Option<String>,
    /// Run on this engine instead of the one weir picks (native, jit, interp, cbpf,
    /// reference); an engine that cannot take the filter is then an error.
    #[arg(long, value_name = "ENGINE")]
    engine: Option<weir::Engine>,
    /// Say on standard error which engine runs the filter, and why.
    #[arg(long)]
    explain: bool,
    /// Print the classic BPF program instead of running it, as tcpdump's -d (listing), -dd
    /// (C array) and -ddd (decimal) do, for the capture's link type (or -y's).
    #[arg(short = 'd', action = clap::ArgAction::Count)]
    dump: u8,
    /// Turn the filter optimizer off, as tcpdump's -O does.
    #[arg(short = 'O', long = "no-optimize")]
    no_optimize: bool,
    /// Flush standard output after each line (tcpdump's -l, for `| grep`).
    #[arg(short = 'l')]
    line_buffered: bool,
    /// With -w: flush the output after each packet (tcpdump's -U, for pipes).
    #[arg(short = 'U', long = "packet-buffered")]
    packet_buffered: bool,
    /// Accepted for tcpdump's sake: weir prints addresses and ports as numbers always.
    #[arg(short = 'n', action = clap::ArgAction::Count)]
    numeric: u8,
    /// Accepted for tcpdump's sake: weir's lines are tcpdump's quiet (-q) lines.
    #[arg(short = 'q')]
    quiet: bool,
    #[command(flatten)]
    refused: crate::tcpdump_flags::RefusedFlags,
    /// The filter expression; empty matches every packet.
    #[arg(value_name = "EXPRESSION")]
    expression: Vec<String>,
}

/// A filter expression and where it came from, for error messages that point into it.
pub struct Expression {
    pub text: String,
    /// For `-F`: the file and its text as written (comments included).
    file: Option<(PathBuf, String)>,
}

impl Expression {
    /// The expression from `-F FILE` if given, else the arguments joined with spaces.
    pub fn read(args: &[String], file: Option<&Path>) -> Result<Expression, String> {
        let Some(path) = file else {
            return Ok(Expression { text: args.join(" "), file: None });
        };
        if !args.is_empty() {
            eprintln!(
                "weir: warning: the expression is read from {}; the expression arguments \
                 are ignored",
                path.display()
            );
        }
        let bytes = crate::input::read(path)?;
        let original = crate::input::text(path, &bytes)?.to_owned();
        Ok(Expression {
            text: blank_comments(&original),
            file: Some((path.to_path_buf(), original)),
        })
    }

    /// A compile error with the expression and a caret under the place; for `-F`, as
    /// `FILE:LINE:COL: message` with that line of the file.
    pub fn error(&self, err: &CompileError) -> String {
        // About the whole expression, not a place in it: tcpdump's one line.
        if err.message == weir::REJECTS_ALL {
            return err.message.clone();
        }
        let Some((path, original)) = &self.file else {
            return err.render(&self.text);
        };
        let start = err.span.start.min(self.text.len());
        let before = self.text.get(..start).unwrap_or("");
        let line_number = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = self.text.get(line_start..start).map_or(0, |s| s.chars().count());
        let width = self
            .text
            .get(start..err.span.end.clamp(start, self.text.len()))
            .map_or(1, |s| s.chars().take_while(|&c| c != '\n').count().max(1));
        let line = original.lines().nth(line_number - 1).unwrap_or("");
        let shown: String = line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        format!(
            "{}:{line_number}:{}: {}\n  {shown}\n  {}{}",
            path.display(),
            column + 1,
            err.message,
            " ".repeat(column),
            "^".repeat(width)
        )
    }
}

/// `#` to the end of the line becomes spaces, so columns stay where they were.
fn blank_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_comment = false;
    for c in text.chars() {
        match c {
            '\n' => {
                in_comment = false;
                out.push('\n');
            }
            '#' => {
                in_comment = true;
                out.push(' ');
            }
            _ if in_comment => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

/// The names of the link types filters compile for, for error messages.
fn linktype_names() -> String {
    weir::pflang::LINK_TYPES.map(LinkType::name).join(", ")
}

/// The error for a capture link type filters do not compile for.
fn unsupported(dlt: u32) -> String {
    format!(
        "link type {dlt} is not one weir compiles filters for (supported: {}); -y LINKTYPE \
         reads the packets as another",
        linktype_names()
    )
}

/// The link type of a capture's number, if filters compile for it.
fn supported(number: u32) -> Option<LinkType> {
    LinkType::from_number(number).filter(|&link| weir::pflang::compiles_for(link))
}

/// Parses a `-y` argument: a link type filters compile for, by name or number.
pub fn linktype_arg(name: &str) -> Result<LinkType, String> {
    LinkType::from_name(name).filter(|&link| weir::pflang::compiles_for(link)).ok_or_else(|| {
        format!("-y {name}: unknown or unsupported link type (known: {})", linktype_names())
    })
}

/// Compiler options as tcpdump sets them when it reads a file (or only compiles): the
/// netmask is unknown and taken as 0, so `ip broadcast` means 0.0.0.0 or 255.255.255.255.
pub fn options(linktype: LinkType) -> FilterOptions {
    let mut options = FilterOptions::new(linktype);
    options.netmask = Some(0);
    options
}

/// The filter prepared on the engine the facade picks (or `engine`); a refusal lists each
/// engine's reason on its own line.
pub fn prepare(filter: &Filter, engine: Option<Engine>) -> Result<PreparedFilter, String> {
    PreparedFilter::new(filter, engine).map_err(|e| {
        let mut message = e.message;
        for reason in e.reasons {
            message.push_str("\n  ");
            message.push_str(&reason);
        }
        message
    })
}

/// The one place a packet meets the filter: the filter on the engine the facade chose
/// (or the one `--engine` forced).
struct Matcher {
    prepared: PreparedFilter,
}

impl Matcher {
    fn new(filter: &Filter, engine: Option<Engine>) -> Result<Matcher, String> {
        Ok(Matcher { prepared: prepare(filter, engine)? })
    }

    fn matches(&mut self, data: &[u8], wire_len: u32) -> bool {
        self.prepared.matches(data, wire_len)
    }
}

/// One filter per link type the capture uses (pcapng interfaces may differ), compiled on
/// first use.
struct Matchers<'e> {
    expression: &'e Expression,
    names: NameDb,
    /// (link type number or -y's DLT, the link type compiled for, its filter); captures
    /// rarely have more than one, so a scan beats hashing every packet's key.
    by_linktype: Vec<(u32, LinkType, Matcher)>,
    forced: Option<LinkType>,
    engine: Option<Engine>,
    explain: bool,
    optimize: bool,
}

impl<'e> Matchers<'e> {
    fn get(&mut self, dlt: u32) -> Result<(LinkType, &mut Matcher), String> {
        let key = self.forced.map_or(dlt, LinkType::dlt);
        let found = match self.by_linktype.iter().position(|entry| entry.0 == key) {
            Some(found) => found,
            None => {
                let linktype = match self.forced {
                    Some(linktype) => linktype,
                    None => supported(dlt).ok_or_else(|| unsupported(dlt))?,
                };
                let mut options = options(linktype);
                options.optimize = self.optimize;
                let filter =
                    weir::compile_filter_with(&self.expression.text, &options, &self.names)
                        .map_err(|e| self.expression.error(&e))?;
                let matcher = Matcher::new(&filter, self.engine)?;
                if self.explain {
                    eprint!("weir: {}: {}", linktype.name(), matcher.prepared.choice());
                }
                self.by_linktype.push((key, linktype, matcher));
                self.by_linktype.len() - 1
            }
        };
        let (_, linktype, matcher) =
            self.by_linktype.get_mut(found).ok_or_else(|| "internal: filter cache".to_string())?;
        Ok((*linktype, matcher))
    }
}

/// Where matching packets go.
enum Sink {
    /// Not the locked handle: the packet loop may move between threads
    /// ([`CaptureReader::relay`]); the buffer locks standard output once per flush.
    Lines(std::io::BufWriter<std::io::Stdout>),
    Capture(Box<CaptureWriter>, PathBuf),
    Nothing,
}

pub fn run(args: FilterArgs) -> Result<ExitCode, String> {
    args.refused.refuse()?;
    // -n and -q describe what weir always does.
    let _ = (args.numeric, args.quiet);
    if args.list_interfaces {
        return crate::live::list_interfaces();
    }
    if let Some(jobs) = args.jobs {
        crate::jobs::check_jobs(jobs)?;
    }
    match args.read.as_slice() {
        [] => run_live(args),
        [read] if !read.is_dir() => {
            let read = read.clone();
            run_capture(args, read)
        }
        reads => {
            let files = crate::jobs::inputs(reads)?;
            run_many(args, files)
        }
    }
}

/// `-d`, `-dd`, `-ddd`: the classic BPF program tcpdump would print for the same options.
/// `snapshot` is the source's snapshot length (a capture's as libpcap adjusts it, an
/// interface's `-s`): pcap_compile accepts with it, so the `ret` of a listing shows it.
fn dump_program(
    args: &FilterArgs,
    expression: &Expression,
    linktype: LinkType,
    snapshot: u32,
) -> Result<ExitCode, String> {
    let mut options = options(linktype);
    options.optimize = !args.no_optimize;
    let mut filter = weir::compile_filter_with(&expression.text, &options, &NameDb::system())
        .map_err(|e| expression.error(&e))?;
    filter.accept = snapshot;
    let insns = if options.optimize {
        weir::emit::cbpf::emit(&filter)
    } else {
        weir::emit::cbpf::emit_unoptimized(&filter)
    }
    .map_err(|e| format!("classic BPF emitter: {e}"))?;
    let text = match args.dump {
        1 => weir::isa::cbpf::format_listing(&insns),
        2 => weir::isa::cbpf::format_dd(&weir::isa::cbpf::encode(&insns)),
        _ => weir::isa::cbpf::format_ddd(&weir::isa::cbpf::encode(&insns)),
    };
    crate::out::text(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn run_capture(args: FilterArgs, read: PathBuf) -> Result<ExitCode, String> {
    // Before anything is read, written or truncated: `-w` must not name the capture.
    if let Some(write) = &args.write {
        crate::run::refuse_input_as_output(write, &read, "-r ")?;
    }
    let expression = Expression::read(&args.expression, args.expression_file.as_deref())?;
    let forced = args.linktype.as_deref().map(linktype_arg).transpose()?;
    let source = read.display().to_string();
    let mut capture = CaptureReader::open(&read).map_err(|e| format!("{source}: {e}"))?;
    if args.dump > 0 {
        let linktype = match forced {
            Some(linktype) => linktype,
            None => supported(capture.linktype()).ok_or_else(|| unsupported(capture.linktype()))?,
        };
        return dump_program(&args, &expression, linktype, capture.snaplen());
    }
    if args.write.is_none() {
        capture = capture.without_blocks();
    }
    let mut matchers = Matchers {
        expression: &expression,
        names: NameDb::system(),
        by_linktype: Vec::new(),
        forced,
        engine: args.engine,
        explain: args.explain,
        optimize: !args.no_optimize,
    };
    // Compile before touching any output, so a bad expression (or link type) writes nothing.
    matchers.get(capture.linktype())?;
    if let Some(linktype) = forced {
        if supported(capture.linktype()) != Some(linktype) {
            eprintln!(
                "weir: note: {source} has link type {}; reading it as {} (-y)",
                capture.linktype(),
                linktype.name()
            );
        }
    }

    let sink = match &args.write {
        Some(path) => Sink::Capture(
            Box::new(
                CaptureWriter::like(path, &capture)
                    .map_err(|e| format!("{}: {e}", path.display()))?,
            ),
            path.clone(),
        ),
        None => Sink::for_args(&args),
    };
    let progress = progress_bar(&args, matches!(sink, Sink::Lines(_)));
    // The packet loop in turns, on whichever thread read the chunk (CaptureReader::relay).
    let mut state = (Pump::new(sink, &args), matchers, Pumped::default(), None);
    let fast = match &state.0.sink {
        Sink::Nothing => true,
        Sink::Capture(writer, _) => writer.takes_pcap_runs(),
        Sink::Lines(_) => false,
    };
    let progress_ref = progress.as_ref();
    capture.relay(&mut state, |capture, (pump, matchers, pumped, failed)| {
        if fast {
            return match fast_turn(capture, &source, matchers, pump, progress_ref, pumped) {
                Ok(turn) => turn,
                Err(e) => {
                    *failed = Some(e);
                    Turn::Stop
                }
            };
        }
        let mut select = |packet: &Packet<'_>| {
            let (linktype, matcher) = matchers
                .get(packet.linktype)
                .map_err(|e| format!("{source}: record {}: {e}", packet.index + 1))?;
            if !matcher.matches(packet.data, packet.wire_len) {
                return Ok(None);
            }
            Ok(Some(if forced.is_some() { linktype.dlt() } else { packet.linktype }))
        };
        match pump.turn(capture, progress_ref, &mut select, pumped) {
            Ok(true) => Turn::More,
            Ok(false) => Turn::Stop,
            Err(e) => {
                *failed = Some(e);
                Turn::Stop
            }
        }
    });
    let (pump, _, pumped, failed) = state;
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let Pumped { matched, seen, damage, output_closed } = pumped;
    if output_closed {
        // Standard output was closed (`| head`): nothing more to do.
        return Ok(ExitCode::SUCCESS);
    }
    let kept = pump.finish(args.count, matched)?;
    let Some(damage) = damage else {
        return Ok(ExitCode::SUCCESS);
    };
    let mut message = format!(
        "{source}: {damage}\nweir: stopped there: {seen} packets read before the damage, {matched} matched"
    );
    if let Some(path) = kept {
        let record =
            damage.record.map_or(String::from("the damage"), |r| format!("record {}", r + 1));
        message.push_str(&format!(
            "\nweir: {} is complete as a capture but holds only the {matched} matching packets \
             before {record}",
            path.display()
        ));
    }
    Err(message)
}

/// [`Pump::turn`] for `--count` (a sink that keeps nothing) and for `-w` copying a pcap
/// through (without `-U`): the complete records buffered go straight from the read buffer
/// to the filter ([`CaptureReader::visit_buffered`], [`CaptureReader::copy_buffered`]: no
/// packet view, no timestamp, no per-record sink branch; `-w` gets the kept records in runs,
/// one write per run of consecutive ones); the one packet each round that needs more (a
/// record across chunks, damage, the end, a pcapng block) goes through `next_packet` as in
/// `Pump::turn`. Why: per record, building the view and the sink's branches cost more than
/// the filter call (bench/records/2026-11-29-e2e-5.txt).
fn fast_turn(
    capture: &mut CaptureReader,
    source: &str,
    matchers: &mut Matchers<'_>,
    pump: &mut Pump,
    progress: Option<&ProgressBar>,
    pumped: &mut Pumped,
) -> Result<Turn, String> {
    // The file's one link type (pcap; a pcapng packet goes through the slow path, which
    // picks its interface's filter).
    let linktype = capture.linktype();
    let limit = pump.limit;
    let reached = |matched: u64| limit.is_some_and(|limit| matched >= limit);
    loop {
        // One packet the slow way: it reads (or joins the next chunk) when it must.
        let Some(packet) = capture.next_packet() else { return Ok(Turn::Stop) };
        let packet = match packet {
            Ok(packet) => packet,
            Err(e) => {
                pumped.damage = Some(e);
                return Ok(Turn::Stop);
            }
        };
        pumped.seen += 1;
        let (_, matcher) = matchers
            .get(packet.linktype)
            .map_err(|e| format!("{source}: record {}: {e}", packet.index + 1))?;
        let hit = matcher.matches(packet.data, packet.wire_len);
        if let Sink::Capture(writer, path) = &mut pump.sink {
            let written = if hit { writer.write(&packet) } else { writer.skip(&packet) };
            written.map_err(|e| write_error(path, e))?;
        }
        if hit {
            pumped.matched += 1;
            if reached(pumped.matched) {
                return Ok(Turn::Stop);
            }
        }
        // Then every complete record buffered after it, the fast way.
        let (_, matcher) = matchers.get(linktype).map_err(|e| format!("{source}: {e}"))?;
        match &mut pump.sink {
            Sink::Capture(writer, path) => {
                let left = limit.map_or(u64::MAX, |limit| limit.saturating_sub(pumped.matched));
                let (seen, kept) = capture
                    .copy_buffered(
                        |data, wire_len| matcher.matches(data, wire_len),
                        left,
                        |runs, count| writer.write_pcap_runs(runs, count),
                    )
                    .map_err(|e| write_error(path, e))?;
                pumped.seen += seen;
                pumped.matched += kept;
            }
            _ => {
                let mut matched = pumped.matched;
                pumped.seen += capture.visit_buffered(|data, wire_len| {
                    matched += u64::from(matcher.matches(data, wire_len));
                    !reached(matched)
                });
                pumped.matched = matched;
            }
        }
        if reached(pumped.matched) {
            return Ok(Turn::Stop);
        }
        if capture.would_wait() {
            if let Some(bar) = progress {
                bar.set_position(capture.position());
            }
            return Ok(Turn::More);
        }
    }
}

/// What one file of several gave: its counts, and the damage that ended it early.
struct FileDone {
    matched: u64,
    seen: u64,
    damage: Option<weir_runtime::capture::CaptureError>,
}

/// One file of several: its packets through the filter, the selected ones written to
/// `part` (a capture in the input's format) when given. At most `limit` are selected (the
/// first N of the merged order are among the first N of each file).
fn filter_one(
    path: &Path,
    expression: &Expression,
    args: &FilterArgs,
    explain: bool,
    part: Option<&Path>,
) -> Result<FileDone, String> {
    let source = path.display().to_string();
    let mut capture = CaptureReader::open(path).map_err(|e| format!("{source}: {e}"))?;
    if part.is_none() {
        capture = capture.without_blocks();
    }
    let mut matchers = Matchers {
        expression,
        names: NameDb::system(),
        by_linktype: Vec::new(),
        forced: args.linktype.as_deref().map(linktype_arg).transpose()?,
        engine: args.engine,
        explain,
        optimize: !args.no_optimize,
    };
    let mut writer = match part {
        Some(part) => Some(
            CaptureWriter::like(part, &capture).map_err(|e| format!("{}: {e}", part.display()))?,
        ),
        None => None,
    };
    let mut done = FileDone { matched: 0, seen: 0, damage: None };
    let write_failed = |e: std::io::Error| format!("{}: {e}", part.unwrap_or(path).display());
    while let Some(packet) = capture.next_packet() {
        let packet = match packet {
            Ok(packet) => packet,
            Err(e) => {
                done.damage = Some(e);
                break;
            }
        };
        done.seen += 1;
        let (_, matcher) = matchers
            .get(packet.linktype)
            .map_err(|e| format!("{source}: record {}: {e}", packet.index + 1))?;
        let hit = matcher.matches(packet.data, packet.wire_len);
        if let Some(writer) = writer.as_mut() {
            let written = if hit { writer.write(&packet) } else { writer.skip(&packet) };
            written.map_err(write_failed)?;
        }
        done.matched += u64::from(hit);
        if hit && args.limit.is_some_and(|limit| done.matched >= limit) {
            break;
        }
    }
    if let Some(writer) = writer {
        writer.finish().map_err(write_failed)?;
    }
    Ok(done)
}

/// Several captures (several -r, or a directory): each file on one of `--jobs` threads,
/// counts summed, packets merged in timestamp order ([`crate::jobs`]).
fn run_many(args: FilterArgs, files: Vec<PathBuf>) -> Result<ExitCode, String> {
    if args.dump > 0 {
        return Err("-d prints the program for one capture's link type: give one -r".into());
    }
    if let Some(write) = &args.write {
        for read in &files {
            crate::run::refuse_input_as_output(write, read, "-r ")?;
        }
    }
    let expression = Expression::read(&args.expression, args.expression_file.as_deref())?;
    let forced = args.linktype.as_deref().map(linktype_arg).transpose()?;
    // Every header read and the expression compiled for each link type before any work
    // or output: a missing file or a bad expression writes nothing.
    let mut linktypes = Vec::with_capacity(files.len());
    let mut snaplen = 0u32;
    let mut check = Matchers {
        expression: &expression,
        names: NameDb::system(),
        by_linktype: Vec::new(),
        forced,
        engine: args.engine,
        explain: false,
        optimize: !args.no_optimize,
    };
    for file in &files {
        let capture = CaptureReader::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
        check.get(capture.linktype())?;
        linktypes.push(capture.linktype());
        snaplen = snaplen.max(capture.snaplen());
    }
    let jobs = args.jobs.unwrap_or_else(crate::jobs::default_jobs);
    let merging = args.write.is_some() || !args.count;
    let out_linktype = linktypes.first().copied().unwrap_or(1);
    if args.write.is_some() {
        if let Some(other) = linktypes.iter().position(|&l| l != out_linktype) {
            return Err(format!(
                "{} has link type {out_linktype} and {} link type {}: -w merges into one pcap,                  which has one link type; filter them separately",
                files[0].display(),
                files[other].display(),
                linktypes[other]
            ));
        }
    }
    let scratch = if merging {
        Some(crate::jobs::Scratch::new(args.write.as_deref(), files.len())?)
    } else {
        None
    };
    let results = crate::jobs::each_file(
        &files,
        jobs,
        |_| (),
        |(), i, file| {
            let part = scratch.as_ref().map(|s| s.part(i));
            filter_one(file, &expression, &args, args.explain && i == 0, part.as_deref())
        },
    );
    if results.len() != files.len() {
        return Err("internal: a worker thread failed".into());
    }
    let mut failures = Vec::new();
    let mut matched = 0u64;
    for (file, result) in files.iter().zip(&results) {
        match result {
            Ok(done) => {
                matched += done.matched;
                if let Some(damage) = &done.damage {
                    failures.push(format!(
                        "{}: {damage}\nweir: stopped there: {} packets read before the damage, \
                         {} matched",
                        file.display(),
                        done.seen,
                        done.matched
                    ));
                }
            }
            Err(e) => failures.push(e.clone()),
        }
    }
    // A file that could not be processed at all (an error, not damage) fails the command
    // before anything is written.
    if results.iter().any(Result::is_err) {
        return Err(failures.join("\n"));
    }
    let total = match &scratch {
        None => args.limit.map_or(matched, |limit| matched.min(limit)),
        Some(scratch) => {
            let parts: Vec<PathBuf> = (0..files.len()).map(|i| scratch.part(i)).collect();
            let sink = match &args.write {
                Some(path) => Sink::Capture(
                    Box::new(
                        CaptureWriter::pcap(path, out_linktype, snaplen.max(1))
                            .map_err(|e| format!("{}: {e}", path.display()))?,
                    ),
                    path.clone(),
                ),
                None => Sink::for_args(&args),
            };
            let mut pump = Pump::new(sink, &args);
            let mut emitted = 0u64;
            let mut closed = false;
            crate::jobs::merge(&parts, |packet| {
                let print_as = forced.map_or(packet.linktype, LinkType::dlt);
                if !emit(&mut pump.sink, packet, print_as, pump.line_buffered)? {
                    closed = true;
                    return Ok(false);
                }
                emitted += 1;
                Ok(pump.limit.is_none_or(|limit| emitted < limit))
            })?;
            if closed {
                return Ok(ExitCode::SUCCESS);
            }
            pump.finish(args.count, emitted)?;
            emitted
        }
    };
    if scratch.is_none() {
        crate::out::line(&total.to_string())?;
    }
    if failures.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(failures.join("\n"))
    }
}

/// Without -r: capture live (`-i`, or the default interface as tcpdump picks it), through
/// the same packet loop as a file.
fn run_live(args: FilterArgs) -> Result<ExitCode, String> {
    let expression = Expression::read(&args.expression, args.expression_file.as_deref())?;
    let forced = args.linktype.as_deref().map(linktype_arg).transpose()?;
    let names = NameDb::system();
    let optimize = !args.no_optimize;
    let mut compile = |linktype: LinkType| {
        let mut options = options(forced.unwrap_or(linktype));
        options.optimize = optimize;
        weir::compile_filter_with(&expression.text, &options, &names)
            .map_err(|e| expression.error(&e))
    };
    let mut live = crate::live::Live::open(&args.live, &mut compile, args.engine, args.explain)?;
    if args.dump > 0 {
        let snapshot = live.source.snaplen();
        return dump_program(&args, &expression, forced.unwrap_or(live.linktype), snapshot);
    }
    let sink = match &args.write {
        Some(path) => Sink::Capture(
            Box::new(
                CaptureWriter::pcap(path, live.source.linktype(), live.source.snaplen())
                    .map_err(|e| format!("{}: {e}", path.display()))?,
            ),
            path.clone(),
        ),
        None => Sink::for_args(&args),
    };
    live.listening();
    let print_as = forced.unwrap_or(live.linktype).dlt();
    let mut pump = Pump::new(sink, &args);
    let placement = &mut live.placement;
    let pumped = pump.run(&mut live.source, None, |packet| {
        Ok(placement.matches(packet.data, packet.wire_len).then_some(print_as))
    })?;
    let failure = pumped.damage.map(|e| format!("{}: {}", live.interface, e.message));
    if !pumped.output_closed {
        pump.finish(args.count, pumped.matched)?;
    }
    live.print_statistics(pumped.matched)?;
    match failure {
        Some(message) => Err(message),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// What a run of the packet loop saw.
#[derive(Default)]
struct Pumped {
    matched: u64,
    seen: u64,
    /// The damage (or capture error) that ended the stream early.
    damage: Option<weir_runtime::capture::CaptureError>,
    /// Standard output went away (`| head`).
    output_closed: bool,
}

/// The one packet loop of `weir filter`, for files and interfaces alike: each packet the
/// selector keeps goes to the sink (a line, a record, a count) until the source ends, `-c`
/// is reached or standard output closes.
struct Pump {
    sink: Sink,
    limit: Option<u64>,
    line_buffered: bool,
}

impl Pump {
    fn new(sink: Sink, args: &FilterArgs) -> Pump {
        let mut sink = sink;
        if let Sink::Capture(writer, _) = &mut sink {
            writer.flush_each_packet(args.packet_buffered);
        }
        Pump { sink, limit: args.limit, line_buffered: args.line_buffered }
    }

    /// `select` says whether a packet matches, and as which link type to print it.
    fn run<S: PacketSource>(
        &mut self,
        source: &mut S,
        progress: Option<&ProgressBar>,
        mut select: impl FnMut(&Packet<'_>) -> Result<Option<u32>, String>,
    ) -> Result<Pumped, String> {
        let mut pumped = Pumped::default();
        while self.turn(source, progress, &mut select, &mut pumped)? {}
        Ok(pumped)
    }

    /// Packets until the source would wait for more input (true: go on) or ends, `-c` is
    /// reached or standard output closes (false). At least one packet is read, waiting if
    /// need be.
    fn turn<S: PacketSource>(
        &mut self,
        source: &mut S,
        progress: Option<&ProgressBar>,
        select: &mut impl FnMut(&Packet<'_>) -> Result<Option<u32>, String>,
        pumped: &mut Pumped,
    ) -> Result<bool, String> {
        loop {
            let Some(packet) = source.next_packet() else { return Ok(false) };
            let packet = match packet {
                Ok(packet) => packet,
                Err(e) => {
                    pumped.damage = Some(e);
                    return Ok(false);
                }
            };
            pumped.seen += 1;
            if pumped.seen & 0xfff == 0 {
                if let Some(bar) = progress {
                    bar.set_position(packet.offset);
                }
            }
            match select(&packet)? {
                None => {
                    if let Sink::Capture(writer, path) = &mut self.sink {
                        writer.skip(&packet).map_err(|e| write_error(path, e))?;
                    }
                }
                Some(print_as) => {
                    pumped.matched += 1;
                    if !emit(&mut self.sink, &packet, print_as, self.line_buffered)? {
                        pumped.output_closed = true;
                        return Ok(false);
                    }
                    if self.limit.is_some_and(|limit| pumped.matched >= limit) {
                        return Ok(false);
                    }
                }
            }
            // About to wait for more input (a pipe, a FIFO, a quiet interface): what is
            // printed so far goes out now, so a reader of the lines sees each packet while
            // the capture still streams.
            if source.would_wait() {
                if let Sink::Lines(out) = &mut self.sink {
                    match out.flush() {
                        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                            pumped.output_closed = true;
                            return Ok(false);
                        }
                        other => other.map_err(crate::out::error)?,
                    }
                }
                return Ok(true);
            }
        }
    }

    /// Completes the output: lines flushed, a capture finished (renamed into place; its
    /// path returned), the count printed.
    fn finish(self, count: bool, matched: u64) -> Result<Option<PathBuf>, String> {
        let kept = match self.sink {
            Sink::Lines(mut out) => {
                out.flush().map_err(crate::out::error)?;
                None
            }
            Sink::Capture(writer, path) => {
                writer.finish().map_err(|e| write_error(&path, e))?;
                Some(path)
            }
            Sink::Nothing => None,
        };
        if count {
            crate::out::line(&matched.to_string())?;
        }
        Ok(kept)
    }
}

impl Sink {
    /// Lines, or nothing with `--count` (for `-w`, the caller makes the writer).
    fn for_args(args: &FilterArgs) -> Sink {
        if args.count {
            Sink::Nothing
        } else {
            Sink::Lines(std::io::BufWriter::new(std::io::stdout()))
        }
    }
}

/// A failed write of the output capture: through standard output (`-w -`) it means what any
/// standard-output error means ([`crate::out::error`]: a closed pipe ends quietly).
fn write_error(path: &Path, e: std::io::Error) -> String {
    if path.as_os_str() == "-" {
        return crate::out::error(e);
    }
    format!("{}: {e}", path.display())
}

/// Sends one matching packet to the sink; false when standard output has gone away.
/// With `line_buffered` (-l) each line is flushed as it is written.
fn emit(
    sink: &mut Sink,
    packet: &Packet<'_>,
    linktype: u32,
    line_buffered: bool,
) -> Result<bool, String> {
    match sink {
        Sink::Lines(out) => {
            let line = summary::line(
                linktype,
                packet.ts_sec,
                packet.ts_nsec,
                packet.data,
                packet.wire_len,
            );
            let written = writeln!(out, "{line}");
            let written = if line_buffered { written.and_then(|()| out.flush()) } else { written };
            match written {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
                Err(e) => Err(format!("standard output: {e}")),
            }
        }
        Sink::Capture(writer, path) => {
            writer.write(packet).map_err(|e| write_error(path, e))?;
            Ok(true)
        }
        Sink::Nothing => Ok(true),
    }
}

/// A progress bar for a large capture file, on a terminal, when the terminal is not also
/// receiving the packet lines.
fn progress_bar(args: &FilterArgs, printing: bool) -> Option<ProgressBar> {
    let stderr_is_terminal = std::io::stderr().is_terminal();
    if !stderr_is_terminal || (printing && std::io::stdout().is_terminal()) {
        return None;
    }
    let metadata = std::fs::metadata(args.read.first()?).ok()?;
    if !metadata.is_file() || metadata.len() < PROGRESS_MIN_BYTES {
        return None;
    }
    let bar = ProgressBar::with_draw_target(Some(metadata.len()), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {eta}")
    {
        bar.set_style(style);
    }
    Some(bar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_become_spaces_and_keep_columns() {
        assert_eq!(blank_comments("ip # v4\nand udp"), "ip     \nand udp");
        assert_eq!(blank_comments("#é\ntcp"), "  \ntcp");
    }

    #[test]
    fn file_errors_name_line_and_column() {
        let expression = Expression {
            text: blank_comments("ip # first\nand hst 1"),
            file: Some((PathBuf::from("f.txt"), "ip # first\nand hst 1".to_string())),
        };
        let start = expression.text.find("hst").unwrap();
        let err = CompileError::new(weir::pflang::Span { start, end: start + 3 }, "bad");
        let text = expression.error(&err);
        assert_eq!(text, "f.txt:2:5: bad\n  and hst 1\n      ^^^");
    }
}
