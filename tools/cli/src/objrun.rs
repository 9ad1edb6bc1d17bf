//! `weir run`: a clang-built BPF object's program over every packet of a capture.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use weir::{Engine, Object, ProgType, Verdict};
use weir_runtime::capture::{CaptureReader, CaptureWriter};
use weir_runtime::live::{LiveOptions, LiveSource, StopGuard};
use weir_runtime::source::{Packet, PacketSource};

#[derive(clap::Args)]
pub struct RunArgs {
    /// The BPF object (`clang -target bpf -c`).
    pub object: PathBuf,
    /// The entry program, by function name (default: the object's only program).
    #[arg(long)]
    pub prog: Option<String>,
    /// The entry program, by section name.
    #[arg(long, conflicts_with = "prog")]
    pub section: Option<String>,
    /// Read packets from this capture file (`-` for standard input).
    #[arg(short = 'r')]
    pub read: Option<PathBuf>,
    /// Read packets from this interface (Ethernet) until SIGINT, SIGTERM or SIGHUP.
    #[arg(short = 'i', conflicts_with = "read")]
    pub interface: Option<String>,
    /// One line per packet: `<record index> <return value>`.
    #[arg(long)]
    pub verdicts: bool,
    /// Write the packets the program passes (XDP_PASS, XDP_TX; tc: TC_ACT_OK), as it left
    /// them, to this pcap file.
    #[arg(short = 'w')]
    pub write: Option<PathBuf>,
    /// Preload maps from this JSON file (the `--maps-out` format).
    #[arg(long)]
    pub maps_in: Option<PathBuf>,
    /// Write every map's contents as JSON here at the end.
    #[arg(long)]
    pub maps_out: Option<PathBuf>,
    /// Workers (threads; per-CPU maps have a copy per worker, other maps are shared):
    /// packets go to workers by a symmetric flow hash, output stays in record order.
    #[arg(long, default_value_t = 1)]
    pub cpus: usize,
    /// Run on this engine (jit, interp).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<Engine>,
    /// Say on standard error which engine runs the program, and why.
    #[arg(long)]
    pub explain: bool,
    /// Run without proving the program safe first (the engines check every access at run
    /// time either way).
    #[arg(long)]
    pub no_verify: bool,
}

/// The name of a return value for the summary.
fn verdict_name(prog_type: ProgType, ret: u64) -> String {
    let names: &[&str] = match prog_type {
        ProgType::Xdp => &["XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT"],
        ProgType::SchedCls | ProgType::SchedAct => &[
            "TC_ACT_OK",
            "TC_ACT_RECLASSIFY",
            "TC_ACT_SHOT",
            "TC_ACT_PIPE",
            "TC_ACT_STOLEN",
            "TC_ACT_QUEUED",
            "TC_ACT_REPEAT",
            "TC_ACT_REDIRECT",
        ],
        ProgType::SocketFilter => &[],
    };
    if matches!(prog_type, ProgType::SchedCls | ProgType::SchedAct) && ret as i32 == -1 {
        return "TC_ACT_UNSPEC".into();
    }
    names.get(ret as usize).map_or_else(|| format!("{}", ret as i64), |n| n.to_string())
}

fn passes(prog_type: ProgType, ret: u64) -> bool {
    match prog_type {
        ProgType::Xdp => ret == 2 || ret == 3,
        ProgType::SchedCls | ProgType::SchedAct => ret == 0,
        ProgType::SocketFilter => ret != 0,
    }
}

/// The packet source `-r` or `-i` names, what errors call it, and (live) the guard that
/// turns SIGINT, SIGTERM and SIGHUP into the end of the stream.
type Source = (Box<dyn PacketSource>, String, Option<StopGuard>);

fn open_source(args: &RunArgs) -> Result<Source, String> {
    match (&args.read, &args.interface) {
        (Some(path), _) => {
            let reader =
                CaptureReader::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((Box::new(reader), path.display().to_string(), None))
        }
        (None, Some(interface)) => {
            let mut live = LiveSource::open(&LiveOptions::new(interface))
                .map_err(|e| format!("{interface}: {e}"))?;
            // XDP and tc programs take Ethernet frames (the kernel attaches them to
            // Ethernet devices); a cooked or other link type would be misread.
            if live.linktype() != 1 {
                return Err(format!(
                    "weir run -i {interface}: link type {} is not Ethernet; the programs \
                     weir runs take Ethernet frames",
                    live.linktype()
                ));
            }
            let guard = live.stop_on_signals().map_err(|e| format!("signals: {e}"))?;
            live.start().map_err(|e| format!("{interface}: {e}"))?;
            eprintln!(
                "weir: listening on {interface}, link-type EN10MB, snapshot length {} bytes",
                live.snaplen()
            );
            Ok((Box::new(live), interface.clone(), Some(guard)))
        }
        (None, None) => Err("weir run needs -r CAPTURE or -i INTERFACE".into()),
    }
}

/// Most workers `--cpus` takes.
const MAX_CPUS: usize = 256;

/// Where verdicts go: the summary's counts, `--verdicts` lines, `-w`.
struct Sink<'w, W: Write> {
    out: W,
    verdicts: bool,
    writer: Option<&'w mut CaptureWriter>,
    prog_type: ProgType,
    counts: BTreeMap<u64, u64>,
    kept_bytes: u64,
}

impl<W: Write> Sink<'_, W> {
    /// One packet's verdict; `out_packet` is the packet as the program left it (with the
    /// record's metadata), `len` the captured length it came in with.
    fn record(
        &mut self,
        out_packet: &Packet<'_>,
        len: usize,
        verdict: &Verdict,
    ) -> Result<(), String> {
        *self.counts.entry(verdict.ret).or_default() += 1;
        if self.prog_type == ProgType::SocketFilter {
            self.kept_bytes += verdict.ret.min(len.saturating_sub(14) as u64);
        }
        if self.verdicts {
            writeln!(self.out, "{} {}", out_packet.index, verdict.ret as i64)
                .map_err(|e| e.to_string())?;
        }
        if let Some(w) = &mut self.writer {
            if passes(self.prog_type, verdict.ret) {
                w.write(out_packet).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}

/// A record's metadata, carried beside its bytes to a worker and back.
struct Meta {
    index: u64,
    len: usize,
    ts_sec: u64,
    ts_nsec: u32,
    linktype: u32,
    interface: u32,
    offset: u64,
}

impl Meta {
    fn of(p: &Packet<'_>) -> Meta {
        Meta {
            index: p.index,
            len: p.data.len(),
            ts_sec: p.ts_sec,
            ts_nsec: p.ts_nsec,
            linktype: p.linktype,
            interface: p.interface,
            offset: p.offset,
        }
    }

    /// The packet as the program left it, with this record's metadata.
    fn packet<'a>(&self, data: &'a [u8]) -> Packet<'a> {
        Packet {
            index: self.index,
            data,
            wire_len: data.len() as u32,
            ts_sec: self.ts_sec,
            ts_nsec: self.ts_nsec,
            linktype: self.linktype,
            interface: self.interface,
            offset: self.offset,
            stored: None,
        }
    }
}

/// The engine choice and, on the JIT, the run-time checks it kept and dropped.
pub fn explained(loaded: &weir::Loaded) -> String {
    let mut text = loaded.choice().to_string();
    match loaded.checks() {
        Some(checks) => text.push_str(&format!("jit: {}", checks.summary())),
        None => text.push_str(&format!(
            "{}: every memory access and division checked at run time (only the JIT uses the \
             verifier's facts)",
            loaded.choice().engine
        )),
    }
    text
}

pub fn run(args: RunArgs) -> Result<ExitCode, String> {
    if args.cpus == 0 || args.cpus > MAX_CPUS {
        return Err(format!("weir run --cpus: 1 to {MAX_CPUS} workers"));
    }
    let bytes =
        std::fs::read(&args.object).map_err(|e| format!("{}: {e}", args.object.display()))?;
    let object = Object::open_with_cpus(&bytes, args.cpus)
        .map_err(|e| format!("{}: {e}", args.object.display()))?;
    if let Some(maps_in) = &args.maps_in {
        let text =
            std::fs::read_to_string(maps_in).map_err(|e| format!("{}: {e}", maps_in.display()))?;
        object.load_maps_json(&text).map_err(|e| format!("{}: {e}", maps_in.display()))?;
    }
    let entry = object.entry(args.prog.as_deref(), args.section.as_deref())?;
    if !args.no_verify {
        let proof = object.verify(entry, false).map_err(|r| {
            format!(
                "verify: {} (run with --no-verify to run it anyway)",
                crate::verify::describe(&r)
            )
        })?;
        if args.explain {
            eprint!("{}", crate::verify::explain(&proof));
        }
    }
    // The packets: a capture file, or an interface until SIGINT, SIGTERM or SIGHUP.
    let (mut reader, source_name, _signals) = open_source(&args)?;
    let mut writer = match &args.write {
        Some(out) => Some(
            CaptureWriter::pcap(out, reader.linktype(), reader.snaplen().max(65535))
                .map_err(|e| format!("{}: {e}", out.display()))?,
        ),
        None => None,
    };
    let stdout = std::io::stdout();
    let mut sink = Sink {
        out: std::io::BufWriter::new(stdout.lock()),
        verdicts: args.verdicts,
        writer: writer.as_mut(),
        prog_type: ProgType::Xdp,
        counts: BTreeMap::new(),
        kept_bytes: 0,
    };
    if args.cpus > 1 {
        let next = || match reader.next_packet() {
            None => Ok(None),
            Some(Err(e)) => Err(format!("{source_name}: {e}")),
            Some(Ok(p)) => Ok(Some((p.data.to_vec(), p.index, Meta::of(&p)))),
        };
        let loaded = |l: &crate::workers::Ready| {
            if args.explain {
                eprintln!("{}", l.choice);
            }
            Ok(())
        };
        let prog_type = object.programs().get(entry).map(|p| p.prog_type).ok_or("no entry")?;
        sink.prog_type = prog_type;
        let plan = crate::workers::Plan {
            entry,
            engine: args.engine,
            cpus: args.cpus,
            keep_packets: args.write.is_some(),
            proven: !args.no_verify,
        };
        crate::workers::run(&object, &plan, next, loaded, |m, v| {
            sink.record(&m.packet(&v.packet), m.len, &v)
        })?;
    } else {
        let mut loaded = object.load_with(entry, args.engine, 0, !args.no_verify)?;
        loaded.keep_packets(args.write.is_some());
        if args.explain {
            eprintln!("{}", explained(&loaded));
        }
        sink.prog_type = loaded.prog_type();
        while let Some(packet) = reader.next_packet() {
            let packet = packet.map_err(|e| format!("{source_name}: {e}"))?;
            let verdict = loaded
                .run(packet.data)
                .map_err(|t| format!("packet {}: the program trapped: {t}", packet.index))?;
            let fresh = Packet {
                data: &verdict.packet,
                wire_len: verdict.packet.len() as u32,
                stored: None,
                ..packet
            };
            sink.record(&fresh, packet.data.len(), &verdict)?;
            // A live interface may keep us waiting: show what is printed so far.
            if reader.would_wait() {
                sink.out.flush().map_err(|e| e.to_string())?;
            }
        }
    }
    let Sink { mut out, counts, kept_bytes, prog_type, .. } = sink;
    if !args.verdicts {
        if prog_type == ProgType::SocketFilter {
            let dropped = counts.get(&0).copied().unwrap_or(0);
            let accepted: u64 = counts.values().sum::<u64>() - dropped;
            writeln!(out, "accepted {accepted}").map_err(|e| e.to_string())?;
            writeln!(out, "dropped {dropped}").map_err(|e| e.to_string())?;
            writeln!(out, "bytes kept {kept_bytes}").map_err(|e| e.to_string())?;
        } else {
            for (ret, n) in &counts {
                writeln!(out, "{} {n}", verdict_name(prog_type, *ret))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    if let Some(w) = writer {
        w.finish().map_err(|e| e.to_string())?;
    }
    if let Some(maps_out) = &args.maps_out {
        std::fs::write(maps_out, object.maps_json())
            .map_err(|e| format!("{}: {e}", maps_out.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
