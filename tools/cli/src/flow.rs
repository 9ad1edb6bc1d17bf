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
//! With 32 subtables or more, each classifying thread keeps an exact-match cache of 8,192
//! flows in front of the classifier.
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
    /// Classifying threads, the reading thread among them; each takes runs of packets
    /// in turn, and the output is in read order as with one.
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
    let bytes =
        crate::input::read_at_most(path, crate::input::RULES_READ_LIMIT, "a flow rule file")
            .map_err(|e| (e, 2))?;
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
    // One snapshot a piece, not a batch: taking one is a read lock and an `Arc` clone on
    // lines every worker writes, which two workers pulled between their cores every 32
    // packets (a rule inserted in place is seen at once all the same; a new version from
    // the next piece on).
    let v = classifier.snapshot();
    // One Work vector and one outcome vector a piece, the classifier called on it a batch
    // at a time: built a 32-packet batch, the two vectors were two allocations and two
    // frees every 32 packets.
    let mut outcomes = Vec::with_capacity(slots.len());
    {
        let mut works: Vec<Work<'_>> = slots
            .iter_mut()
            .map(|s| {
                s.mirrored.clear();
                let now =
                    s.ts_sec.saturating_mul(1_000_000_000).saturating_add(u64::from(s.ts_nsec));
                Work::new(&mut s.data, s.wire_len, indev, now, &mut s.mirrored)
            })
            .collect();
        for batch in works.chunks_mut(BATCH) {
            match cache.as_deref_mut() {
                Some(cache) => classifier.process_batch_cached(&v, cache, batch, &mut outcomes),
                None => classifier.process_batch(&v, batch, &mut outcomes),
            }
        }
    }
    for (s, o) in slots.iter_mut().zip(&outcomes) {
        s.outcome = Some(*o);
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

    /// Whether a packet goes anywhere: with `--stats` alone the reading thread need not
    /// visit the classified packets again.
    fn writes(&self) -> bool {
        !self.writers.is_empty() || self.verdicts
    }

    fn packet(&mut self, s: &Slot) -> Result<(), String> {
        let Some(o) = &s.outcome else { return Ok(()) };
        emit(&mut self.writers, s, o)?;
        if self.verdicts {
            let line = o.line().map_or("-".to_string(), |l| l.to_string());
            let fin = match o.verdict() {
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

/// Pieces each classifying thread may have queued or finished and not yet written: the
/// reader reads the next while the others classify.
const AHEAD: usize = 2;

/// Packets read at a time: one piece, the unit a thread takes. Small enough that the
/// reading thread, between its reads, takes the pieces the others have not reached (the
/// threads even out by themselves, whatever reading costs against classifying), large
/// enough that a hand-off (a lock, a wake-up, a channel) costs little against ~1,000
/// packets' work.
const PIECE: usize = 1024;

/// A run of packets in read order, handed to whichever classifying thread is free. Its
/// slots (and their buffers) come back with it and are filled again in place.
struct Piece {
    /// Its number in read order.
    seq: u64,
    /// Slots in use (the vector keeps more from earlier pieces).
    n: usize,
    slots: Vec<Slot>,
    indev: u32,
}

/// The pieces no thread has taken yet, oldest first, and whether the reader has ended
/// (the workers then leave).
#[derive(Default)]
struct Queue {
    state: Mutex<Waiting>,
    ready: std::sync::Condvar,
}

#[derive(Default)]
struct Waiting {
    pieces: std::collections::VecDeque<Piece>,
    closed: bool,
    /// Workers asleep on `ready`: a push wakes one only if there is one (a wake-up is a
    /// system call, once a piece, while the workers are busy and would find it anyway).
    asleep: usize,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    fn push(&self, piece: Piece) {
        let mut state = self.lock();
        state.pieces.push_back(piece);
        let wake = state.asleep > 0;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
    }
    /// The next piece, if one is queued (the reading thread: it never waits here).
    fn try_pop(&self) -> Option<Piece> {
        self.lock().pieces.pop_front()
    }
    /// The next piece, waiting for one; `None` once the reader has ended.
    fn pop(&self) -> Option<Piece> {
        let mut state = self.lock();
        loop {
            if state.closed {
                return None;
            }
            if let Some(p) = state.pieces.pop_front() {
                return Some(p);
            }
            state.asleep += 1;
            state = self.ready.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
            state.asleep -= 1;
        }
    }
    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// Closes the queue however the reader leaves (an error included), so that the workers
/// end and the scope can join them.
struct Closing<'q>(&'q Queue);

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Set when a worker's thread unwinds, so that the reader stops waiting for its piece.
struct Ended<'f>(&'f std::sync::atomic::AtomicBool);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// A regular file never makes its reader wait: its pieces need not be written before the
/// next read (a capture reader says it would wait whenever its buffer runs out, which
/// for a file emptied the pipeline every megabyte).
fn regular_file(args: &FlowRunArgs) -> bool {
    args.read
        .as_deref()
        .is_some_and(|p| p != Path::new("-") && std::fs::metadata(p).is_ok_and(|m| m.is_file()))
}

/// The packet loop: `--workers N` is N classifying threads, the reading thread and N - 1
/// workers living for the whole run. The reader copies a piece of packets and queues it;
/// once N pieces a thread are out, it takes the oldest ones no worker has reached and
/// classifies them itself (else waits for the oldest to come back), writes the oldest,
/// and reads on. With one thread it classifies each piece it reads. Pieces are written in
/// the order they were read, each in its own order, so the output is the same for any
/// --workers: nothing in a packet's classification depends on the packets before it
/// (each thread's exact-match cache gives what the classifier gives; counters are sums
/// and a maximum). A source that would wait (a live interface, a pipe) has its pieces
/// finished and written before the reader waits. A read error ends the run after the
/// packets read before it are written, as with one thread.
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
    let threads = args.workers;
    let limit = if threads == 1 { 1 } else { AHEAD * threads };
    let regular = regular_file(args);
    let queue = Queue::default();
    let ended = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let _closing = Closing(&queue);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<Piece>();
        for _ in 1..threads {
            let done_tx = done_tx.clone();
            let (queue, ended) = (&queue, &ended);
            scope.spawn(move || {
                let _ended = Ended(ended);
                let mut cache = new_cache();
                while let Some(mut p) = queue.pop() {
                    let cache = Some(&mut cache).filter(|_| use_cache);
                    process_slots(classifier, cache, &mut p.slots[..p.n], p.indev);
                    if done_tx.send(p).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let mut cache = new_cache();
        // Pieces out, oldest first (`None`: not back yet); `first` the oldest's number.
        let mut inflight: std::collections::VecDeque<Option<Piece>> = Default::default();
        let (mut first, mut seq) = (0u64, 0u64);
        let mut total: u64 = 0;
        let mut next_rerank: u64 = 1024;
        // Written pieces' slot vectors, their buffers kept, for the next reads.
        let mut spare: Vec<Vec<Slot>> = Vec::new();
        loop {
            if out.devices.len() != classifier.devices().len() {
                out.devices_changed(&classifier.devices(), args.read.as_deref())?;
            }
            // Read a piece (less when the source would wait: a live interface's verdicts
            // should not wait for a full piece).
            let mut slots = spare.pop().unwrap_or_default();
            let mut n = 0;
            let mut failed = None;
            while n < PIECE {
                let p = match source.next_packet() {
                    None => break,
                    Some(Ok(p)) => p,
                    Some(Err(e)) => {
                        failed = Some(format!("{source_name}: {e}"));
                        break;
                    }
                };
                if slots.len() <= n {
                    slots.push(Slot::default());
                }
                let s = &mut slots[n];
                s.data.clear();
                s.data.extend_from_slice(p.data);
                s.wire_len = p.wire_len;
                s.cap_len = p.data.len();
                s.ts_sec = p.ts_sec;
                s.ts_nsec = p.ts_nsec;
                s.index = p.index;
                s.outcome = None;
                n += 1;
                if !regular && source.would_wait() {
                    break;
                }
            }
            // Rules added with `indev` may name the interface later (looked up after the
            // read, which may have waited for packets while a rule came).
            let indev = indev_name.as_deref().map_or(0, |n| classifier.indev_id(n));
            let waits = n == 0 || failed.is_some() || (!regular && source.would_wait());
            if n > 0 {
                queue.push(Piece { seq, n, slots, indev });
                inflight.push_back(None);
                seq += 1;
            } else {
                spare.push(slots);
            }
            while inflight.len() >= limit || (waits && !inflight.is_empty()) {
                // Finish the oldest piece: take the pieces the workers have finished,
                // else classify what no worker has taken (oldest first), else wait for a
                // worker's. Finished ones first: once the oldest is back the reader
                // writes it and reads on, leaving the queued pieces to the workers (taking
                // them all before looking emptied the queue, and a worker slept and was
                // woken once a piece).
                while matches!(inflight.front(), Some(None)) {
                    let p = if let Ok(p) = done_rx.try_recv() {
                        p
                    } else if let Some(mut p) = queue.try_pop() {
                        let cache = Some(&mut cache).filter(|_| use_cache);
                        process_slots(classifier, cache, &mut p.slots[..p.n], p.indev);
                        p
                    } else {
                        loop {
                            match done_rx.recv_timeout(std::time::Duration::from_millis(20)) {
                                Ok(p) => break p,
                                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                                    if !ended.load(std::sync::atomic::Ordering::Relaxed) => {}
                                Err(_) => return Err("a flow worker ended".to_string()),
                            }
                        }
                    };
                    let at = p.seq.checked_sub(first).and_then(|i| inflight.get_mut(i as usize));
                    match at {
                        Some(at) => *at = Some(p),
                        None => return Err("a flow worker returned an unknown piece".into()),
                    }
                }
                let Some(Some(p)) = inflight.pop_front() else { break };
                first += 1;
                if out.writes() {
                    for s in &p.slots[..p.n] {
                        out.packet(s)?;
                    }
                }
                spare.push(p.slots);
            }
            if waits {
                out.text.flush().map_err(crate::out::error)?;
            }
            if let Some(e) = failed {
                return Err(e);
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
    match o.verdict() {
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

#[cfg(test)]
mod tests {
    use super::{Piece, Queue};

    /// A worker asleep on an empty queue is woken by the next push (the push skips the
    /// wake-up only while no worker sleeps), and by the close once the reader ends.
    #[test]
    fn a_push_wakes_a_sleeping_worker() {
        let queue = Queue::default();
        std::thread::scope(|scope| {
            let (got_tx, got_rx) = std::sync::mpsc::channel();
            scope.spawn(|| {
                let got_tx = got_tx;
                while let Some(p) = queue.pop() {
                    got_tx.send(p.seq).unwrap();
                }
            });
            for seq in 0..3 {
                // Until the worker sleeps: a push then must wake it.
                while queue.lock().asleep == 0 {
                    std::thread::yield_now();
                }
                queue.push(Piece { seq, n: 0, slots: Vec::new(), indev: 0 });
                let got = got_rx.recv_timeout(std::time::Duration::from_secs(10));
                if got != Ok(seq) {
                    queue.close();
                    panic!("piece {seq}: the sleeping worker was not woken ({got:?})");
                }
            }
            queue.close();
        });
    }
}
