//! `weir flow`: tc-flower rules over packets.
//!
//! ```text
//! weir flow check rules.txt
//! weir flow run rules.txt -r trace.pcap --out-dir out --stats --verdicts --workers 2
//! weir flow run rules.txt -i eth0 --control=/run/weir/flow.ctl    # and, while it runs:
//! weir flow add --control /run/weir/flow.ctl prio 1 protocol ip flower action drop
//! weir flow del --control /run/weir/flow.ctl prio 1
//! weir flow stats --control /run/weir/flow.ctl
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
use std::sync::{Arc, Mutex};

use weir::flow::control::{Row, Table};
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
    /// Print each rule's counters: `line L packets P bytes B used T prio P chain C handle
    /// 0xH` (as `weir flow run --stats`), from a `weir flow run --control` datapath, or,
    /// given OBJECT and RULES, from a compiled datapath running in the kernel (its
    /// counters keep no time: `used ?`).
    Stats {
        /// The object `weir flow compile` wrote (with RULES: the kernel's datapath).
        #[arg(requires = "rules", conflicts_with = "control")]
        object: Option<PathBuf>,
        /// The rule file installed (`weir flow update`).
        rules: Option<PathBuf>,
        /// Where the maps are pinned.
        #[arg(long, value_name = "DIR", default_value = "/sys/fs/bpf")]
        pin_dir: PathBuf,
        /// The control socket of `weir flow run --control`.
        #[arg(long, value_name = "PATH")]
        control: Option<PathBuf>,
    },
    /// Add a rule to a running `weir flow run --control` without stopping it: tc's
    /// arguments after `tc filter add dev DEV ingress`, refused with tc's words (the table
    /// unchanged) where tc refuses it; prints its line, priority, chain and handle.
    Add {
        /// The control socket.
        #[arg(long, value_name = "PATH", default_value = crate::flowctl::DEFAULT_SOCKET)]
        control: PathBuf,
        /// The rule (`[prio N] [chain N] [handle H] protocol P flower [MATCH...] action ...`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        rule: Vec<String>,
    },
    /// Delete rules from a running `weir flow run --control`: `line N` (as --stats
    /// numbers them), or as `tc filter del dev DEV ingress` takes them: `[chain C] prio P
    /// [protocol X] [handle H]` (a priority alone: all its rules), `handle H` alone when
    /// one rule has it, `chain C` alone: the whole chain.
    Del {
        /// The control socket.
        #[arg(long, value_name = "PATH", default_value = crate::flowctl::DEFAULT_SOCKET)]
        control: PathBuf,
        /// `line N` or tc's selector.
        #[arg(trailing_var_arg = true)]
        selector: Vec<String>,
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
    /// Serve `weir flow stats|add|del --control PATH` on this Unix socket while packets
    /// flow (`--control` alone: /run/weir/flow.ctl; another path as `--control=PATH`, so
    /// that `--control rules.txt` never takes the rule file for the socket; removed at the
    /// end).
    #[arg(long, value_name = "PATH", num_args = 0..=1, require_equals = true,
          default_missing_value = crate::flowctl::DEFAULT_SOCKET)]
    pub control: Option<PathBuf>,
}

pub fn run(command: FlowCommand) -> Result<ExitCode, String> {
    match command {
        FlowCommand::Check { rules } => check(&rules),
        FlowCommand::Run(args) => run_rules(&args),
        FlowCommand::Compile { rules, output, capacity } => compile(&rules, &output, capacity),
        FlowCommand::Update { object, rules, pin_dir } => update(&object, &rules, &pin_dir, false),
        FlowCommand::Stats { object: Some(object), rules: Some(rules), pin_dir, .. } => {
            update(&object, &rules, &pin_dir, true)
        }
        FlowCommand::Stats { control, .. } => {
            let path = control.unwrap_or_else(|| PathBuf::from(crate::flowctl::DEFAULT_SOCKET));
            remote(&path, "stats")
        }
        FlowCommand::Add { control, rule } => remote(&control, &format!("add {}", rule.join(" "))),
        FlowCommand::Del { control, selector } => {
            remote(&control, format!("del {}", selector.join(" ")).trim_end())
        }
    }
}

/// One request to a `--control` datapath, its answer printed.
fn remote(path: &Path, request: &str) -> Result<ExitCode, String> {
    if request.contains('\n') {
        eprintln!("weir: one rule, on one line");
        return Ok(ExitCode::from(1));
    }
    match crate::flowctl::request(path, request) {
        Ok(text) => {
            crate::out::text(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Err((message, code)) => {
            eprintln!("weir: {message}");
            Ok(ExitCode::from(code))
        }
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
    slots: &mut [Slot],
    indev: u32,
) {
    for group in slots.chunks_mut(BATCH) {
        let v = classifier.snapshot();
        let mut outcomes = Vec::with_capacity(group.len());
        {
            let mut works: Vec<Work<'_>> = group
                .iter_mut()
                .map(|s| {
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
    let table = Mutex::new(Table::new(&set));
    drop(set);
    // Served before the source is opened (reading a pipe's header waits for the writer;
    // an interface may see nothing for a while): a client may add rules from the start.
    let server = args.control.as_deref().map(crate::flowctl::Server::bind).transpose()?;
    let classifier = Arc::new(classifier);
    let table = Arc::new(table);
    let serving = server.map(|s| s.serve(classifier.clone(), table.clone()));
    let done = run_source(args, &classifier, &table, serving);
    done?;
    Ok(ExitCode::SUCCESS)
}

/// Open the source and the outputs, pump the packets, stop the control socket's thread
/// (`serving`) and print the counters.
fn run_source(
    args: &FlowRunArgs,
    classifier: &Classifier,
    table: &Mutex<Table>,
    serving: Option<crate::flowctl::Serving>,
) -> Result<(), String> {
    let (mut source, source_name, _guard) = open_source(args)?;
    let mut out = Output {
        writers: Vec::new(),
        dir: args.out_dir.clone(),
        snaplen: source.snaplen().max(65535),
        devices: Vec::new(),
        verdicts: args.verdicts,
        text: std::io::BufWriter::new(std::io::stdout().lock()),
    };
    if let Some(dir) = &args.out_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    out.devices_changed(&classifier.devices(), args.read.as_deref())?;
    let pumped = pump(args, classifier, &mut *source, &source_name, &mut out);
    drop(serving);
    pumped?;
    if args.stats {
        let table = match table.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for row in table.rows(classifier) {
            writeln!(out.text, "{row}").map_err(crate::out::error)?;
        }
    }
    out.text.flush().map_err(crate::out::error)?;
    for w in out.writers {
        w.finish().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Where processed packets go: the capture writers (pass.pcap, then one per device in the
/// classifier's device order) and the verdict lines.
struct Output<'o> {
    writers: Vec<CaptureWriter>,
    dir: Option<PathBuf>,
    snaplen: u32,
    devices: Vec<String>,
    verdicts: bool,
    text: std::io::BufWriter<std::io::StdoutLock<'o>>,
}

impl Output<'_> {
    /// Take the classifier's device list (it grows when `weir flow add` names a new
    /// `mirred` device): a writer for each new one.
    fn devices_changed(&mut self, devices: &[String], input: Option<&Path>) -> Result<(), String> {
        if let Some(dir) = &self.dir {
            let have = self.writers.len().saturating_sub(1);
            let first = self.writers.is_empty();
            let new = devices.iter().skip(have).map(String::as_str);
            for name in first.then_some("pass").into_iter().chain(new) {
                let path = dir.join(format!("{name}.pcap"));
                if input.is_some_and(|i| weir_runtime::output::same_file(&path, i)) {
                    return Err(format!(
                        "{}: the output would overwrite the input",
                        path.display()
                    ));
                }
                self.writers.push(
                    CaptureWriter::pcap(&path, 1, self.snaplen)
                        .map_err(|e| format!("{}: {e}", path.display()))?,
                );
            }
        }
        self.devices = devices.to_vec();
        Ok(())
    }

    fn packet(&mut self, s: &Slot) -> Result<(), String> {
        let Some(o) = &s.outcome else { return Ok(()) };
        emit(&mut self.writers, s, o)?;
        if self.verdicts {
            let line = o.line.map_or("-".to_string(), |l| l.to_string());
            let fin = match o.verdict {
                Verdict::Pass => "pass".to_string(),
                Verdict::Drop => "drop".to_string(),
                Verdict::Redirect(d) => {
                    format!("redirect:{}", self.devices.get(usize::from(d)).map_or("?", |s| s))
                }
            };
            writeln!(self.text, "{} {line} {fin}", s.index).map_err(crate::out::error)?;
        }
        Ok(())
    }
}

/// Chunks a worker may have queued or finished and not yet taken: the reader fills the
/// next chunk while the workers classify the last.
const DEPTH: usize = 2;

/// The packet loop. One worker classifies on the reading thread. More are threads that
/// live for the whole run, each fed by a bounded channel: the reader copies a chunk of
/// packets, deals them out by a symmetric flow hash (a flow's packets stay on one worker,
/// in order), and while the workers classify it reads the next. Each chunk's packets are
/// then written in the order they were read (each worker returns its share in order, and
/// the reader kept which worker had each packet), so the output is the same for any
/// --workers. A source that would wait (a live interface, a pipe) has its chunks finished
/// and written before the reader waits.
fn pump(
    args: &FlowRunArgs,
    classifier: &Classifier,
    source: &mut dyn PacketSource,
    source_name: &str,
    out: &mut Output<'_>,
) -> Result<(), String> {
    let use_cache = classifier.stats().0 >= CACHE_FROM_SUBTABLES;
    let new_cache = || FlowCache::new(if use_cache { CACHE_FLOWS } else { 64 });
    let indev_name = args.indev.clone().or_else(|| args.interface.clone());
    let workers = args.workers;
    std::thread::scope(|scope| {
        let mut jobs = Vec::new();
        let mut results = Vec::new();
        if workers > 1 {
            for _ in 0..workers {
                let (job_tx, job_rx) = std::sync::mpsc::sync_channel::<(Vec<Slot>, u32)>(DEPTH);
                let (res_tx, res_rx) = std::sync::mpsc::sync_channel::<Vec<Slot>>(DEPTH);
                jobs.push(job_tx);
                results.push(res_rx);
                scope.spawn(move || {
                    let mut cache = new_cache();
                    for (mut slots, indev) in job_rx {
                        let cache = Some(&mut cache).filter(|_| use_cache);
                        process_slots(classifier, cache, &mut slots, indev);
                        if res_tx.send(slots).is_err() {
                            break;
                        }
                    }
                });
            }
        }
        let mut cache = new_cache();
        // The chunk being read; with workers its slots go out in the parts and come back
        // to the pool.
        let mut chunk: Vec<Slot> = Vec::new();
        let mut pool: Vec<Slot> = Vec::new();
        // Per chunk in flight: the worker of each of its packets, in read order.
        let mut inflight: std::collections::VecDeque<Vec<u16>> = Default::default();
        let mut total: u64 = 0;
        let mut next_rerank: u64 = 1024;
        // Part vectors back from the workers, emptied, for the next chunks: a fresh one
        // per part and chunk (half a megabyte) cost page faults on every chunk.
        let mut spare: Vec<Vec<Slot>> = Vec::new();
        let finish = |owners: Vec<u16>,
                      out: &mut Output<'_>,
                      pool: &mut Vec<Slot>,
                      spare: &mut Vec<Vec<Slot>>|
         -> Result<(), String> {
            let mut parts = Vec::with_capacity(workers);
            for r in &results {
                parts.push(r.recv().map_err(|_| "a flow worker ended".to_string())?);
            }
            let mut next = vec![0usize; workers];
            for w in owners {
                let w = usize::from(w);
                let Some(s) = parts[w].get_mut(next[w]).map(std::mem::take) else {
                    return Err("a flow worker returned fewer packets".into());
                };
                next[w] += 1;
                out.packet(&s)?;
                pool.push(s);
            }
            for mut p in parts {
                p.clear();
                spare.push(p);
            }
            Ok(())
        };
        loop {
            if out.devices.len() != classifier.devices().len() {
                out.devices_changed(&classifier.devices(), args.read.as_deref())?;
            }
            // Read a chunk (less when the source would wait: a live interface's verdicts
            // should not wait for 8,192 packets).
            let mut n = 0;
            while n < CHUNK {
                let Some(p) = source.next_packet() else { break };
                let p = p.map_err(|e| format!("{source_name}: {e}"))?;
                if chunk.len() <= n {
                    chunk.push(pool.pop().unwrap_or_default());
                }
                // Filled in place: one worker keeps its slots and their buffers.
                let s = &mut chunk[n];
                s.data.clear();
                s.data.extend_from_slice(p.data);
                s.wire_len = p.wire_len;
                s.cap_len = p.data.len();
                s.ts_sec = p.ts_sec;
                s.ts_nsec = p.ts_nsec;
                s.index = p.index;
                s.outcome = None;
                n += 1;
                if source.would_wait() {
                    break;
                }
            }
            // Rules added with `indev` may name the interface later (looked up after the
            // read, which may have waited for packets while a rule came).
            let indev = indev_name.as_deref().map_or(0, |n| classifier.indev_id(n));
            let waits = n == 0 || source.would_wait();
            if workers == 1 {
                let cache = Some(&mut cache).filter(|_| use_cache);
                process_slots(classifier, cache, &mut chunk[..n], indev);
                for s in &chunk[..n] {
                    out.packet(s)?;
                }
            } else if n > 0 {
                let mut parts: Vec<Vec<Slot>> =
                    (0..workers).map(|_| spare.pop().unwrap_or_default()).collect();
                let mut owners = Vec::with_capacity(n);
                for s in chunk.drain(..n) {
                    let w = weir::flow_hash(&s.data) as usize % workers;
                    owners.push(w as u16);
                    parts[w].push(s);
                }
                for (tx, part) in jobs.iter().zip(parts) {
                    tx.send((part, indev)).map_err(|_| "a flow worker ended".to_string())?;
                }
                inflight.push_back(owners);
            }
            while inflight.len() >= DEPTH || (waits && !inflight.is_empty()) {
                let owners = inflight.pop_front().unwrap_or_default();
                finish(owners, out, &mut pool, &mut spare)?;
            }
            if waits {
                out.text.flush().map_err(crate::out::error)?;
            }
            if n == 0 {
                break;
            }
            total += n as u64;
            if total >= next_rerank {
                // Subtables by hits: the traffic so far says which masks match most.
                classifier.rerank();
                next_rerank = next_rerank.saturating_mul(8);
            }
        }
        drop(jobs);
        Ok(())
    })
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
                let handles = weir::flow::control::handles(&set);
                for (((line, packets, bytes), r), (prio, handle)) in
                    rows.into_iter().zip(&set.rules).zip(set.prios.iter().zip(handles))
                {
                    let row = Row {
                        line,
                        chain: r.chain,
                        prio: *prio,
                        handle,
                        packets,
                        bytes,
                        last_used: None,
                    };
                    text += &format!("{row}\n");
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
