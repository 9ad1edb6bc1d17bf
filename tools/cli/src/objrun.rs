//! `weir run`: a clang-built BPF object's program over every packet of a capture.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use weir::object::{passes, verdict_name};
use weir::{Engine, Object, ProgType};
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
    /// Read packets from this capture file (`-` for standard input). May be given several
    /// times, or name a directory (its files, by name): the files are run --jobs at a
    /// time, the summary counts summed and -w merged in timestamp order (as mergecap).
    #[arg(short = 'r', action = clap::ArgAction::Append)]
    pub read: Vec<PathBuf>,
    /// With several captures: run this many files at once, one thread (one CPU, for per-CPU
    /// maps) each (default: every core). Maps other than per-CPU ones are shared.
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
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

/// The packet source `-r` or `-i` names, what errors call it, and (live) the guard that
/// turns SIGINT, SIGTERM and SIGHUP into the end of the stream.
type Source = (Packets, String, Option<StopGuard>);

/// What `-r` or `-i` opened: a capture file (run by buffered records where the reader can
/// hand them over so, [`run_capture`]) or an interface.
enum Packets {
    Capture(CaptureReader),
    Live(LiveSource),
}

impl Packets {
    fn source(&mut self) -> &mut dyn PacketSource {
        match self {
            Packets::Capture(capture) => capture,
            Packets::Live(live) => live,
        }
    }
}

fn open_source(args: &RunArgs) -> Result<Source, String> {
    match (args.read.first(), &args.interface) {
        (Some(path), _) => {
            let reader = CaptureReader::open_with_chunk_size(path, READ_CHUNK)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((Packets::Capture(reader), path.display().to_string(), None))
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
            Ok((Packets::Live(live), interface.clone(), Some(guard)))
        }
        (None, None) => Err("weir run needs -r CAPTURE or -i INTERFACE".into()),
    }
}

/// `weir run`'s read size for a capture file. Why not the reader's 1 MiB: between reads
/// every packet goes through the program, and a smaller chunk stays in the CPU's cache from
/// the read to the packet's run; measured over the bench's 1M-packet capture (task-clock of
/// the whole process, alternating in the same run): 128 KiB 0.87-0.93 of 1 MiB's, 64 and
/// 256 KiB between (bench/records/2026-11-30-runtime-19.txt).
const READ_CHUNK: usize = 128 << 10;

/// Most workers `--cpus` takes.
const MAX_CPUS: usize = 256;

/// How many packets got each return value: the summary's counts.
///
/// Why not a map alone: one map update a packet was ~4% of a whole `weir run` over a
/// million packets (perf, 2026-11-30); every program type's common verdicts (XDP's five,
/// TC's, a socket filter's drop) are below [`Verdicts::SMALL`], counted in an array.
#[derive(Default)]
struct Verdicts {
    small: [u64; Verdicts::SMALL],
    other: BTreeMap<u64, u64>,
}

impl Verdicts {
    const SMALL: usize = 8;

    #[inline]
    fn add(&mut self, ret: u64, n: u64) {
        match self.small.get_mut(ret as usize) {
            Some(count) if ret < Verdicts::SMALL as u64 => *count += n,
            _ => self.add_other(ret, n),
        }
    }

    /// A return value past the array: out of line, so that `add` stays small enough to
    /// inline into `weir run`'s per-packet loop (issue 11,
    /// bench/records/2026-12-01-runtime-35.txt).
    #[cold]
    #[inline(never)]
    fn add_other(&mut self, ret: u64, n: u64) {
        *self.other.entry(ret).or_default() += n;
    }

    /// Return values with at least one packet, in increasing order, with their counts.
    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let small = (0u64..).zip(self.small.iter().copied()).filter(|&(_, n)| n > 0);
        small.chain(self.other.iter().map(|(&ret, &n)| (ret, n)))
    }
}

/// Where verdicts go: the summary's counts, `--verdicts` lines, `-w`.
struct Sink<'w, W: Write> {
    out: W,
    verdicts: bool,
    writer: Option<&'w mut CaptureWriter>,
    prog_type: ProgType,
    counts: Verdicts,
    kept_bytes: u64,
}

impl<W: Write> Sink<'_, W> {
    /// Runs the program on one packet and records its verdict with the packet as the
    /// program left it. A trap is an error naming the packet (and its capture, `source`,
    /// when there are several).
    fn run(
        &mut self,
        loaded: &mut weir::Loaded,
        packet: Packet<'_>,
        source: Option<&str>,
    ) -> Result<(), String> {
        // The packet is lent from the runner's buffer: no copy or allocation per packet.
        let verdict = loaded.run_view(packet.data).map_err(|t| {
            let at = format!("packet {}: the program trapped: {t}", packet.index);
            match source {
                Some(s) => format!("{s}: {at}"),
                None => at,
            }
        })?;
        let fresh = Packet {
            data: verdict.packet,
            wire_len: verdict.packet.len() as u32,
            stored: None,
            ..packet
        };
        self.record(packet.data.len(), verdict.ret, || Ok(fresh))
    }

    /// One packet's verdict; `out_packet` builds the packet as the program left it (with
    /// the record's metadata), `len` is the captured length it came in with. The packet is
    /// built only for `--verdicts` or `-w`: a count alone needs none (issue 11,
    /// bench/records/2026-11-30-runtime-20.txt).
    #[inline(always)]
    fn record<'a>(
        &mut self,
        len: usize,
        ret: u64,
        out_packet: impl FnOnce() -> Result<Packet<'a>, String>,
    ) -> Result<(), String> {
        self.counts.add(ret, 1);
        if self.prog_type == ProgType::SocketFilter {
            self.kept_bytes += ret.min(len.saturating_sub(14) as u64);
        }
        if self.verdicts || self.writer.is_some() {
            self.write_out(&out_packet()?, ret)?;
        }
        Ok(())
    }

    /// `--verdicts`' line and `-w`'s packet for one verdict: out of line, the I/O is the
    /// cost there, and `record` without it inlines into the per-packet loop.
    #[inline(never)]
    fn write_out(&mut self, out_packet: &Packet<'_>, ret: u64) -> Result<(), String> {
        if self.verdicts {
            writeln!(self.out, "{} {}", out_packet.index, ret as i64).map_err(|e| e.to_string())?;
        }
        if let Some(w) = &mut self.writer {
            if passes(self.prog_type, ret) {
                w.write(out_packet).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}

/// A record's metadata, carried beside its bytes to a worker and back.
#[derive(Clone, Copy)]
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

pub fn run(args: RunArgs) -> Result<ExitCode, String> {
    if args.cpus == 0 || args.cpus > MAX_CPUS {
        return Err(format!("weir run --cpus: 1 to {MAX_CPUS} workers"));
    }
    // Several captures: a file per thread, each thread a CPU (crate::jobs).
    let many = args.read.len() > 1 || args.read.first().is_some_and(|r| r.is_dir());
    let files = if many { crate::jobs::inputs(&args.read)? } else { Vec::new() };
    let jobs = crate::jobs::check_jobs(args.jobs.unwrap_or_else(crate::jobs::default_jobs))?
        .min(files.len().max(1));
    if many && args.cpus > 1 {
        return Err("weir run: --cpus spreads one capture's packets, --jobs several captures; \
                    give one of them"
            .into());
    }
    if many && args.verdicts {
        return Err(
            "weir run --verdicts: one capture at a time (record numbers are per file)".into()
        );
    }
    let cpus = if many { jobs.min(MAX_CPUS) } else { args.cpus };
    let bytes =
        std::fs::read(&args.object).map_err(|e| format!("{}: {e}", args.object.display()))?;
    let object = Object::open_with_cpus(&bytes, cpus)
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
    if many {
        return run_many(&args, &object, entry, &files, cpus);
    }
    // The packets: a capture file, or an interface until SIGINT, SIGTERM or SIGHUP.
    let (mut packets, source_name, _signals) = open_source(&args)?;
    let reader = packets.source();
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
        counts: Verdicts::default(),
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
            sink.record(m.len, v.ret, || Ok(m.packet(&v.packet)))
        })?;
    } else {
        let mut loaded = object.load_with(entry, args.engine, 0, !args.no_verify)?;
        if args.explain {
            eprintln!("{}", loaded.explain());
        }
        sink.prog_type = loaded.prog_type();
        match &mut packets {
            Packets::Capture(capture) => {
                run_capture(&mut loaded, &mut sink, capture, &source_name)?
            }
            Packets::Live(live) => {
                run_stream(&mut loaded, &mut sink, live, &source_name, false)?;
            }
        }
    }
    let Sink { mut out, counts, kept_bytes, prog_type, .. } = sink;
    if !args.verdicts {
        summary(&mut out, prog_type, &counts, kept_bytes)?;
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

/// Runs the program over a capture file: the complete records buffered as one batch each
/// (`CaptureReader::buffered`: each packet's view made as the batch asks for it, no read
/// and no check for one per record), then the record that needs a read (one across two
/// chunks, damage, the end) as `next_packet` gives it; a capture the reader cannot hand over
/// so (pcapng, swapped length fields) packet by packet in one batch. The verdicts, output
/// and errors are those of one batch over `next_packet`'s packets.
///
/// Why: building every packet through `next_packet`, with its check for a read after each,
/// cost more than the program's run on the bench's capture (issue 11,
/// bench/records/2026-11-30-runtime-19.txt).
fn run_capture<W: Write>(
    loaded: &mut weir::Loaded,
    sink: &mut Sink<'_, W>,
    capture: &mut CaptureReader,
    source_name: &str,
) -> Result<(), String> {
    loop {
        let Some(mut run) = capture.buffered() else {
            return run_stream(loaded, sink, capture, source_name, false).map(|_| ());
        };
        // The records as an iterator of frames (`Loaded::run_batch_frames`), each keeping
        // its metadata for its verdict as it is taken: no callback a frame, so that the
        // record walk, the run and the verdict compile as one loop (issue 11,
        // bench/records/2026-12-01-runtime-34.txt).
        // Only the captured length and where the record lies are kept a packet; the rest of
        // its metadata is decoded from the record when its verdict is written or names it
        // (issue 11: decoding every packet's timestamps and offset for a count was ~25
        // instructions a packet, bench/records/2026-12-01-runtime-38.txt).
        let (meta, never) = (std::cell::Cell::new(None), std::cell::Cell::new(false));
        let records = run.records();
        let frames = std::iter::from_fn(|| {
            let (data, record) = run.next_record()?;
            meta.set(Some((data.len(), record)));
            Some(data)
        });
        let resolve = |record| records.packet(record).map(|packet| Meta::of(&packet));
        loaded.run_batch_frames(frames, verdicts(&meta, resolve, sink, &never))?;
        drop(run);
        // The next record needs a read, which may wait (a pipe): show what is printed so far.
        if capture.would_wait() {
            sink.out.flush().map_err(|e| e.to_string())?;
        }
        if !run_stream(loaded, sink, capture, source_name, true)? {
            return Ok(());
        }
    }
}

/// Runs the program over `reader`'s packets (`one`: over the next packet only), one batch:
/// the engine's run state set up once, each frame lent or copied into the runner's buffer
/// from the reader's view, each verdict lent back with the record's metadata kept beside
/// it. Returns whether a packet came (false: the source ended).
fn run_stream<W: Write>(
    loaded: &mut weir::Loaded,
    sink: &mut Sink<'_, W>,
    reader: &mut dyn PacketSource,
    source_name: &str,
    one: bool,
) -> Result<bool, String> {
    let (meta, waits) = (std::cell::Cell::new(None), std::cell::Cell::new(false));
    let watch = sink.verdicts;
    let mut stream =
        Stream { reader, source_name, one, watch, came: false, meta: &meta, waits: &waits };
    loaded.run_batch_from(&mut stream, verdicts(&meta, Some, sink, &waits))?;
    Ok(stream.came)
}

/// `run_stream`'s frames: the reader's packets as `next_packet` gives them (each borrows
/// the reader until the next, so no iterator of frames), the record's metadata kept in
/// `meta` for its verdict. A source of its own type (`Loaded::run_batch_from`), so that
/// the batch's loop calls its `put` directly, not through `dyn` a frame (issue 11,
/// bench/records/2026-12-01-runtime-35.txt).
struct Stream<'s> {
    reader: &'s mut dyn PacketSource,
    source_name: &'s str,
    /// Over the next packet only.
    one: bool,
    /// Whether to ask the reader if its next packet would wait (`waits`): only with
    /// `--verdicts`, the one output printed per packet, which the flush is for; without it
    /// the flush has nothing to show, and the question was 84 instructions a packet
    /// (issue 11, bench/records/2026-12-01-runtime-35.txt).
    watch: bool,
    /// Whether a packet came.
    came: bool,
    meta: &'s std::cell::Cell<Option<(usize, Meta)>>,
    /// The reader's next packet may keep us waiting (a live interface, a pipe): the
    /// verdicts flush standard output.
    waits: &'s std::cell::Cell<bool>,
}

impl weir::FrameSource<String> for &mut Stream<'_> {
    #[inline(always)]
    fn next_frame(&mut self, mut put: impl FnMut(&[u8])) -> Result<bool, String> {
        if self.one && self.came {
            return Ok(false);
        }
        let Some(packet) = self.reader.next_packet() else { return Ok(false) };
        let packet = packet.map_err(|e| format!("{}: {e}", self.source_name))?;
        self.came = true;
        self.meta.set(Some((packet.data.len(), Meta::of(&packet))));
        put(packet.data);
        if self.watch {
            self.waits.set(self.reader.would_wait());
        }
        Ok(true)
    }
}

/// What each verdict does: recorded with its packet's captured length and metadata (which
/// the source kept in `meta`: the length, and what `resolve` makes the metadata of, asked
/// only for an output or an error; `None`: no metadata for it, an error as a verdict
/// without its packet is), standard output flushed after it while `waits`.
///
/// Its errors and the flush are out of line (`unpaired`, `trapped`, `flush`), so that
/// what a counted packet runs is small enough to inline into the batch's loop (it was a
/// call of 37 instructions a packet: issue 11, bench/records/2026-12-01-runtime-35.txt).
fn verdicts<'a, 's, K, R, W, T>(
    meta: &'a std::cell::Cell<Option<(usize, K)>>,
    resolve: R,
    sink: &'a mut Sink<'s, W>,
    waits: &'a std::cell::Cell<bool>,
) -> impl FnMut(Result<weir::VerdictView<'_>, T>) -> Result<(), String> + use<'a, 's, K, R, W, T>
where
    K: Copy,
    R: Fn(K) -> Option<Meta> + 'a,
    W: Write,
    T: std::fmt::Display,
{
    // Always inlined: compiled in this crate as `each` of the weir crate's batch, which
    // calls it from more than one place, it stayed a call a packet (runtime-35).
    #[inline(always)]
    move |verdict| {
        let Some((len, kept)) = meta.take() else { return Err(unpaired()) };
        let verdict = match verdict {
            Ok(verdict) => verdict,
            Err(t) => return Err(trapped(resolve(kept).ok_or_else(unpaired)?.index, t)),
        };
        let packet = |m: Meta| m.packet(verdict.packet);
        sink.record(len, verdict.ret, || resolve(kept).map(packet).ok_or_else(unpaired))?;
        // A live interface may keep us waiting: show what is printed so far.
        if waits.get() {
            flush(&mut sink.out)?;
        }
        Ok(())
    }
}

#[cold]
#[inline(never)]
fn unpaired() -> String {
    "a verdict without its packet".to_string()
}

#[cold]
#[inline(never)]
fn trapped(index: u64, trap: impl std::fmt::Display) -> String {
    format!("packet {index}: the program trapped: {trap}")
}

#[inline(never)]
fn flush(out: &mut impl Write) -> Result<(), String> {
    out.flush().map_err(|e| e.to_string())
}

/// The summary lines: a count per verdict, or a socket filter's accepted, dropped, kept.
fn summary(
    out: &mut impl Write,
    prog_type: ProgType,
    counts: &Verdicts,
    kept_bytes: u64,
) -> Result<(), String> {
    if prog_type == ProgType::SocketFilter {
        let dropped = counts.small[0];
        let accepted: u64 = counts.iter().map(|(_, n)| n).sum::<u64>() - dropped;
        writeln!(out, "accepted {accepted}").map_err(|e| e.to_string())?;
        writeln!(out, "dropped {dropped}").map_err(|e| e.to_string())?;
        writeln!(out, "bytes kept {kept_bytes}").map_err(|e| e.to_string())?;
    } else {
        for (ret, n) in counts.iter() {
            writeln!(out, "{} {n}", verdict_name(prog_type, ret)).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// What one capture of several gave: its verdict counts, the bytes a socket filter kept.
type FileVerdicts = (Verdicts, u64);

/// Several captures (several -r, or a directory): thread `t` loads the program as CPU `t`
/// and runs it over one file after another; the summaries are summed and the passed
/// packets (-w) merged in timestamp order ([`crate::jobs`]). A file that fails (damage, a
/// trap) is reported after the others have run, and the exit status is 1.
fn run_many(
    args: &RunArgs,
    object: &Object,
    entry: usize,
    files: &[PathBuf],
    jobs: usize,
) -> Result<ExitCode, String> {
    if let Some(write) = &args.write {
        for read in files {
            crate::run::refuse_input_as_output(write, read, "-r ")?;
        }
    }
    let (mut linktype, mut snaplen) = (None, 0u32);
    for file in files {
        let reader = CaptureReader::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
        match linktype {
            Some(first) if first != reader.linktype() && args.write.is_some() => {
                return Err(format!(
                    "{}: link type {} where the first capture has {first}: -w merges into one \
                     pcap, which has one link type",
                    file.display(),
                    reader.linktype()
                ))
            }
            _ => linktype = linktype.or(Some(reader.linktype())),
        }
        snaplen = snaplen.max(reader.snaplen());
    }
    let linktype = linktype.unwrap_or(1);
    let prog_type = object.programs().get(entry).map(|p| p.prog_type).ok_or("no entry")?;
    let scratch = match &args.write {
        Some(write) => Some(crate::jobs::Scratch::new(Some(write), files.len())?),
        None => None,
    };
    let results = crate::jobs::each_file(
        files,
        jobs,
        |cpu| {
            let loaded = object.load_with(entry, args.engine, cpu, !args.no_verify);
            if let (Ok(loaded), true) = (&loaded, args.explain && cpu == 0) {
                eprintln!("{}", loaded.explain());
            }
            loaded
        },
        |loaded, i, file| -> Result<FileVerdicts, String> {
            let loaded = loaded.as_mut().map_err(|e| e.clone())?;
            let source = file.display().to_string();
            let mut reader = CaptureReader::open(file).map_err(|e| format!("{source}: {e}"))?;
            let mut part = match &scratch {
                Some(s) => Some(
                    CaptureWriter::pcap(&s.part(i), reader.linktype(), snaplen.max(65535))
                        .map_err(|e| e.to_string())?,
                ),
                None => None,
            };
            let mut sink = Sink {
                out: std::io::sink(),
                verdicts: false,
                writer: part.as_mut(),
                prog_type,
                counts: Verdicts::default(),
                kept_bytes: 0,
            };
            while let Some(packet) = reader.next_packet() {
                let packet = packet.map_err(|e| format!("{source}: {e}"))?;
                sink.run(loaded, packet, Some(&source))?;
            }
            let (counts, kept) = (sink.counts, sink.kept_bytes);
            if let Some(part) = part {
                part.finish().map_err(|e| e.to_string())?;
            }
            Ok((counts, kept))
        },
    );
    if results.len() != files.len() {
        return Err("internal: a worker thread failed".into());
    }
    let mut counts = Verdicts::default();
    let mut kept_bytes = 0;
    let mut failures = Vec::new();
    // The files that ran to their end (a failed file's part was never completed).
    let mut whole = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        match result {
            Ok((file_counts, kept)) => {
                whole.push(i);
                for (ret, n) in file_counts.iter() {
                    counts.add(ret, n);
                }
                kept_bytes += kept;
            }
            Err(e) => failures.push(e),
        }
    }
    if let (Some(scratch), Some(write)) = (&scratch, &args.write) {
        let mut out = CaptureWriter::pcap(write, linktype, snaplen.max(65535))
            .map_err(|e| format!("{}: {e}", write.display()))?;
        let parts: Vec<PathBuf> = whole.iter().map(|&i| scratch.part(i)).collect();
        crate::jobs::merge(&parts, |packet| {
            out.write(packet).map_err(|e| format!("{}: {e}", write.display()))?;
            Ok(true)
        })?;
        out.finish().map_err(|e| format!("{}: {e}", write.display()))?;
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    summary(&mut out, prog_type, &counts, kept_bytes)?;
    out.flush().map_err(|e| e.to_string())?;
    if let Some(maps_out) = &args.maps_out {
        std::fs::write(maps_out, object.maps_json())
            .map_err(|e| format!("{}: {e}", maps_out.display()))?;
    }
    if failures.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(failures.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::Verdicts;
    use std::collections::BTreeMap;

    /// The array and the map together count as one map would, in increasing order of
    /// return value, whatever order the packets come in.
    #[test]
    fn verdicts_count_as_a_map_does() {
        let rets = [9, 0, u64::MAX, 7, 8, 2, 2, 1 << 32, 0, 7, 8, (1 << 32) + 1, 3, u64::MAX];
        let (mut tally, mut map) = (Verdicts::default(), BTreeMap::new());
        for (i, &ret) in rets.iter().enumerate() {
            let n = i as u64 + 1;
            tally.add(ret, n);
            *map.entry(ret).or_insert(0u64) += n;
        }
        assert_eq!(tally.iter().collect::<Vec<_>>(), map.into_iter().collect::<Vec<_>>());
        assert_eq!(Verdicts::default().iter().count(), 0);
    }
}
