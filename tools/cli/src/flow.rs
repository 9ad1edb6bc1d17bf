//! `weir flow`: tc-flower rules over packets.
//!
//! ```text
//! weir flow check rules.txt
//! weir flow run rules.txt -r trace.pcap --out-dir out --stats --verdicts --workers 2
//! ```
//!
//! With 32 subtables or more, each worker keeps an exact-match cache of 8,192 flows in
//! front of the classifier.
//!
//! Output files in `--out-dir`: `pass.pcap` (packets no rule dropped or redirected,
//! after the actions' changes) and `DEV.pcap` for every device a `mirred` action names
//! (redirected packets and mirrored copies, in record order; the file exists, empty, when
//! nothing went there). Dropped packets go nowhere.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use weir::flow::{Classifier, FlowCache, Outcome, RuleSet, Verdict, Work, BATCH};
use weir_runtime::capture::{CaptureReader, CaptureWriter};
use weir_runtime::live::{LiveOptions, LiveSource, StopGuard};
use weir_runtime::source::{Packet, PacketSource};

#[derive(clap::Subcommand)]
pub enum FlowCommand {
    /// Parse and check a rule file; print the rules as weir reads them (exit 1 when a
    /// rule is refused, 2 when the file cannot be read).
    Check {
        /// The rule file: one rule per line, the arguments after `tc filter add dev DEV
        /// ingress` (`[prio N] [chain N] protocol P flower [MATCH...] action ...`).
        rules: PathBuf,
    },
    /// Run the rules over a capture file or an interface.
    Run(Box<FlowRunArgs>),
    /// Compile the rules into an XDP object (program + BTF-defined maps, pinned by name)
    /// for `ip link set dev D xdp obj FLOW.o sec xdp` or `bpftool prog load`; the tables
    /// are in the object for `weir run` and go into a kernel's maps with `weir flow update`.
    Compile {
        /// The rule file.
        rules: PathBuf,
        /// The object to write.
        #[arg(short = 'o', value_name = "FLOW.o")]
        output: PathBuf,
        /// Entries per table and counter slots (default: twice the rules, at least 1,024).
        #[arg(long, default_value_t = 0)]
        capacity: u32,
    },
    /// Write a rule file into the maps of a compiled datapath running in the kernel
    /// (pinned by name under --pin-dir): the new table is written beside the one in use,
    /// then switched to in one map write; `mirred` devices are resolved to ifindexes here.
    Update {
        /// The object `weir flow compile` wrote (its layout: subtables, chains, devices).
        object: PathBuf,
        /// The rule file to install.
        rules: PathBuf,
        /// Where the maps are pinned (bpftool's default; `ip link set … xdp obj` pins
        /// them under /sys/fs/bpf/tc/globals).
        #[arg(long, value_name = "DIR", default_value = "/sys/fs/bpf")]
        pin_dir: PathBuf,
    },
    /// Print the counters of a compiled datapath running in the kernel, per rule of the
    /// rule file installed: `line L packets P bytes B`, as `weir flow run --stats`.
    Stats {
        /// The object `weir flow compile` wrote.
        object: PathBuf,
        /// The rule file installed (`weir flow update`).
        rules: PathBuf,
        /// Where the maps are pinned.
        #[arg(long, value_name = "DIR", default_value = "/sys/fs/bpf")]
        pin_dir: PathBuf,
    },
}

#[derive(clap::Args)]
pub struct FlowRunArgs {
    /// The rule file.
    pub rules: PathBuf,
    /// Read packets from this capture file (`-`: standard input); Ethernet only.
    #[arg(short = 'r', value_name = "CAPTURE")]
    pub read: Option<PathBuf>,
    /// Read packets from this interface until SIGINT, SIGTERM or SIGHUP.
    #[arg(short = 'i', value_name = "INTERFACE", conflicts_with = "read")]
    pub interface: Option<String>,
    /// Write pass.pcap and one DEV.pcap per mirred device here (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Print each rule's line, packets and bytes at the end.
    #[arg(long)]
    pub stats: bool,
    /// Print `<index> <rule line or -> <final action>` per packet.
    #[arg(long)]
    pub verdicts: bool,
    /// Worker threads; packets are spread by a symmetric flow hash.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// The interface name `indev` matches see (default: none; with -i, that interface).
    #[arg(long, value_name = "NAME")]
    pub indev: Option<String>,
}

pub fn run(command: FlowCommand) -> Result<ExitCode, String> {
    match command {
        FlowCommand::Check { rules } => check(&rules),
        FlowCommand::Run(args) => run_rules(&args),
        FlowCommand::Compile { rules, output, capacity } => compile(&rules, &output, capacity),
        FlowCommand::Update { object, rules, pin_dir } => update(&object, &rules, &pin_dir, false),
        FlowCommand::Stats { object, rules, pin_dir } => update(&object, &rules, &pin_dir, true),
    }
}

/// Read and parse a rule file: `Err((message, exit code))`.
fn load(path: &Path) -> Result<RuleSet, (String, u8)> {
    let bytes = crate::input::read(path).map_err(|e| (e, 2))?;
    let text = crate::input::text(path, &bytes).map_err(|e| (e, 2))?;
    RuleSet::parse(text).map_err(|e| (format!("{}: {e}", path.display()), 1))
}

fn check(path: &Path) -> Result<ExitCode, String> {
    let set = match load(path) {
        Ok(s) => s,
        Err((m, code)) => {
            eprintln!("weir: {m}");
            return Ok(ExitCode::from(code));
        }
    };
    let classifier = Classifier::new(&set);
    let mut text = String::new();
    for (r, prio) in set.rules.iter().zip(&set.prios) {
        text += &format!("line {} prio {prio} chain {}: {r}\n", r.line, r.chain);
    }
    let (subtables, _) = classifier.stats();
    let mut chains: Vec<u32> = set.rules.iter().map(|r| r.chain).collect();
    chains.sort_unstable();
    chains.dedup();
    text += &format!(
        "{} rules, {} chains, {subtables} subtables, key width {} words, devices: {}\n",
        set.rules.len(),
        chains.len(),
        classifier.width(),
        if set.devices().is_empty() { "none".to_string() } else { set.devices().join(" ") }
    );
    crate::out::text(&text)?;
    Ok(ExitCode::SUCCESS)
}

type Source = (Box<dyn PacketSource>, String, Option<StopGuard>);

fn open_source(args: &FlowRunArgs) -> Result<Source, String> {
    let (source, name, guard): Source = match (&args.read, &args.interface) {
        (Some(path), _) => {
            let reader =
                CaptureReader::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            (Box::new(reader), path.display().to_string(), None)
        }
        (None, Some(interface)) => {
            let mut live = LiveSource::open(&LiveOptions::new(interface))
                .map_err(|e| format!("{interface}: {e}"))?;
            let guard = live.stop_on_signals().map_err(|e| format!("signals: {e}"))?;
            live.start().map_err(|e| format!("{interface}: {e}"))?;
            (Box::new(live), interface.clone(), Some(guard))
        }
        (None, None) => return Err("weir flow run needs -r CAPTURE or -i INTERFACE".into()),
    };
    if source.linktype() != 1 {
        return Err(format!(
            "{name}: link type {} is not Ethernet; flower rules take Ethernet frames",
            source.linktype()
        ));
    }
    Ok((source, name, guard))
}

/// One packet read and copied out of the source (actions change packets in place).
#[derive(Default, Clone)]
struct Slot {
    data: Vec<u8>,
    wire_len: u32,
    /// Captured bytes as read (before the actions).
    cap_len: usize,
    ts_sec: u64,
    ts_nsec: u32,
    index: u64,
    mirrored: Vec<(u16, Vec<u8>)>,
    outcome: Option<Outcome>,
}

/// Packets read at a time (split among workers by flow hash).
const CHUNK: usize = 8192;
const MAX_WORKERS: usize = 256;

/// Flows each worker's exact-match cache holds.
const CACHE_FLOWS: usize = 8192;

/// Subtables from which the exact-match cache pays: its hash and compare of the whole key
/// cost more than a few subtable probes (weir-bench flow: slower up to 16 masks, 360 to
/// 280 ns/packet at 64).
const CACHE_FROM_SUBTABLES: usize = 32;

fn process_slots(
    classifier: &Classifier,
    mut cache: Option<&mut FlowCache>,
    slots: &mut [&mut Slot],
    indev: u32,
) {
    for group in slots.chunks_mut(BATCH) {
        let v = classifier.snapshot();
        let mut outcomes = Vec::with_capacity(group.len());
        {
            let mut works: Vec<Work<'_>> = group
                .iter_mut()
                .map(|s| {
                    let s = &mut **s;
                    s.mirrored.clear();
                    Work {
                        data: &mut s.data,
                        wire_len: s.wire_len,
                        indev,
                        now: s
                            .ts_sec
                            .saturating_mul(1_000_000_000)
                            .saturating_add(u64::from(s.ts_nsec)),
                        mark: 0,
                        mirrored: &mut s.mirrored,
                    }
                })
                .collect();
            match cache.as_deref_mut() {
                Some(cache) => {
                    classifier.process_batch_cached(&v, cache, &mut works, &mut outcomes)
                }
                None => classifier.process_batch(&v, &mut works, &mut outcomes),
            }
        }
        for (s, o) in group.iter_mut().zip(outcomes) {
            s.outcome = Some(o);
        }
    }
}

fn run_rules(args: &FlowRunArgs) -> Result<ExitCode, String> {
    if args.workers == 0 || args.workers > MAX_WORKERS {
        return Err(format!("weir flow run --workers: 1 to {MAX_WORKERS}"));
    }
    let set = match load(&args.rules) {
        Ok(s) => s,
        Err((m, code)) => {
            eprintln!("weir: {m}");
            return Ok(ExitCode::from(code));
        }
    };
    let classifier = Classifier::new(&set);
    let devices = classifier.devices();
    let (mut source, source_name, _guard) = open_source(args)?;
    let indev_name = args.indev.clone().or_else(|| args.interface.clone());
    let indev = indev_name.as_deref().map_or(0, |n| classifier.indev_id(n));
    let snaplen = source.snaplen().max(65535);
    // Writers: pass.pcap, then one per device, in the classifier's device order.
    let mut writers: Vec<CaptureWriter> = Vec::new();
    if let Some(dir) = &args.out_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for name in std::iter::once("pass").chain(devices.iter().map(String::as_str)) {
            let path = dir.join(format!("{name}.pcap"));
            if let Some(input) = &args.read {
                if weir_runtime::output::same_file(&path, input) {
                    return Err(format!(
                        "{}: the output would overwrite the input",
                        path.display()
                    ));
                }
            }
            writers.push(
                CaptureWriter::pcap(&path, 1, snaplen)
                    .map_err(|e| format!("{}: {e}", path.display()))?,
            );
        }
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut chunk: Vec<Slot> = Vec::new();
    let use_cache = classifier.stats().0 >= CACHE_FROM_SUBTABLES;
    let mut caches: Vec<FlowCache> = (0..args.workers)
        .map(|_| FlowCache::new(if use_cache { CACHE_FLOWS } else { 64 }))
        .collect();
    let mut total: u64 = 0;
    let mut next_rerank: u64 = 1024;
    loop {
        // Read a chunk (less when the source would wait: a live interface's verdicts
        // should not wait for 8,192 packets).
        let mut n = 0;
        while n < CHUNK {
            let Some(p) = source.next_packet() else { break };
            let p = p.map_err(|e| format!("{source_name}: {e}"))?;
            if chunk.len() <= n {
                chunk.push(Slot::default());
            }
            let s = &mut chunk[n];
            s.data.clear();
            s.data.extend_from_slice(p.data);
            s.wire_len = p.wire_len;
            s.cap_len = p.data.len();
            s.ts_sec = p.ts_sec;
            s.ts_nsec = p.ts_nsec;
            s.index = p.index;
            n += 1;
            if source.would_wait() {
                break;
            }
        }
        if n == 0 {
            break;
        }
        let slots = &mut chunk[..n];
        if args.workers == 1 {
            let mut refs: Vec<&mut Slot> = slots.iter_mut().collect();
            process_slots(&classifier, caches.first_mut().filter(|_| use_cache), &mut refs, indev);
        } else {
            let mut shards: Vec<Vec<&mut Slot>> = (0..args.workers).map(|_| Vec::new()).collect();
            for s in slots.iter_mut() {
                let h = weir::flow_hash(&s.data) as usize;
                shards[h % args.workers].push(s);
            }
            let classifier = &classifier;
            std::thread::scope(|scope| {
                for (shard, cache) in shards.iter_mut().zip(caches.iter_mut()) {
                    let cache = Some(cache).filter(|_| use_cache);
                    scope.spawn(move || process_slots(classifier, cache, shard, indev));
                }
            });
        }
        for s in chunk[..n].iter() {
            let Some(o) = &s.outcome else { continue };
            emit(&mut writers, s, o)?;
            if args.verdicts {
                let line = o.line.map_or("-".to_string(), |l| l.to_string());
                let fin = match o.verdict {
                    Verdict::Pass => "pass".to_string(),
                    Verdict::Drop => "drop".to_string(),
                    Verdict::Redirect(d) => {
                        format!("redirect:{}", devices.get(usize::from(d)).map_or("?", |s| s))
                    }
                };
                writeln!(out, "{} {line} {fin}", s.index).map_err(crate::out::error)?;
            }
        }
        if source.would_wait() {
            out.flush().map_err(crate::out::error)?;
        }
        total += n as u64;
        if total >= next_rerank {
            // Subtables by hits: the traffic so far says which masks match most.
            classifier.rerank();
            next_rerank = next_rerank.saturating_mul(8);
        }
    }
    if args.stats {
        for (line, packets, bytes, _) in classifier.counters() {
            writeln!(out, "line {line} packets {packets} bytes {bytes}")
                .map_err(crate::out::error)?;
        }
    }
    out.flush().map_err(crate::out::error)?;
    for w in writers {
        w.finish().map_err(|e| e.to_string())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Write a packet's copies and its final form where they go.
fn emit(writers: &mut [CaptureWriter], s: &Slot, o: &Outcome) -> Result<(), String> {
    if writers.is_empty() {
        return Ok(());
    }
    fn packet<'d>(s: &Slot, data: &'d [u8]) -> Packet<'d> {
        Packet {
            index: s.index,
            data,
            // What the actions added or took away (a VLAN tag) changes the wire length alike.
            wire_len: (i64::from(s.wire_len) + data.len() as i64 - s.cap_len as i64)
                .max(data.len() as i64) as u32,
            ts_sec: s.ts_sec,
            ts_nsec: s.ts_nsec,
            linktype: 1,
            interface: 0,
            offset: 0,
            stored: None,
        }
    }
    let mut write = |w: usize, data: &[u8]| -> Result<(), String> {
        match writers.get_mut(w) {
            Some(wr) => wr.write(&packet(s, data)).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    };
    for (d, bytes) in &s.mirrored {
        write(1 + usize::from(*d), bytes)?;
    }
    match o.verdict {
        Verdict::Pass => write(0, &s.data),
        Verdict::Redirect(d) => write(1 + usize::from(d), &s.data),
        Verdict::Drop => Ok(()),
    }
}

fn compile(path: &Path, output: &Path, capacity: u32) -> Result<ExitCode, String> {
    let set = match load(path) {
        Ok(s) => s,
        Err((m, code)) => {
            eprintln!("weir: {m}");
            return Ok(ExitCode::from(code));
        }
    };
    let options = weir::flow::xdp::XdpOptions { capacity };
    let datapath = match weir::flow::xdp::compile(&set, options) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("weir: {}: {e}", path.display());
            return Ok(ExitCode::from(1));
        }
    };
    let bytes =
        weir::flow_xdp::object(&datapath).map_err(|e| format!("{}: {e}", output.display()))?;
    std::fs::write(output, bytes).map_err(|e| format!("{}: {e}", output.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// `weir flow update`, or with `stats` `weir flow stats`.
fn update(object: &Path, path: &Path, pin_dir: &Path, stats: bool) -> Result<ExitCode, String> {
    let set = match load(path) {
        Ok(s) => s,
        Err((m, code)) => {
            eprintln!("weir: {m}");
            return Ok(ExitCode::from(code));
        }
    };
    let bytes = crate::input::read(object)?;
    let layout =
        weir::flow_xdp::layout(&bytes).map_err(|e| format!("{}: {e}", object.display()))?;
    if stats {
        return match weir::flow_xdp::stats_pinned(&layout, &set, pin_dir) {
            Ok(rows) => {
                let mut text = String::new();
                for (line, packets, bytes) in rows {
                    text += &format!("line {line} packets {packets} bytes {bytes}\n");
                }
                crate::out::text(&text)?;
                Ok(ExitCode::SUCCESS)
            }
            Err(weir::flow_xdp::UpdateError::Rules(e)) => {
                eprintln!("weir: {}: {e}", path.display());
                Ok(ExitCode::from(1))
            }
            Err(weir::flow_xdp::UpdateError::Kernel(e)) => Err(e),
        };
    }
    match weir::flow_xdp::update_pinned(&layout, &set, pin_dir) {
        Ok(report) => {
            crate::out::text(&format!(
                "generation {}: {} entries in {} tables, {:.1} us per entry\n",
                report.generation,
                report.entries,
                layout.subtables.len(),
                report.per_entry_ns as f64 / 1000.0
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(weir::flow_xdp::UpdateError::Rules(e)) => {
            eprintln!("weir: {}: {e}", path.display());
            Ok(ExitCode::from(1))
        }
        Err(weir::flow_xdp::UpdateError::Kernel(e)) => Err(e),
    }
}
