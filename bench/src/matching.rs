//! `weir-bench match`: pfmatch dispatch (issue 15). A 16-clause match program (a protocol
//! split plus host and port rules) run as one compiled dispatch on native code and on the
//! IR's evaluator, against the 16 clause filters run one after another as native code
//! until one accepts (what a program with 16 separate filters does), and against each
//! clause's filter alone (the goal: dispatch within 1.5x of the slowest). Hot (4,096
//! packets repeated), streaming (one pass over 400,000 packets, more than the caches
//! hold) and shuffled (as many draws from the hot packets in a random order: cached, but no
//! order for the branch predictor to learn). End to end: `weir match --count` against what a user would otherwise run: 16
//! `tcpdump -r F --count` processes whose filters give the same first-match counts
//! (clause i as `(T_i) and not (T_1 or ... or T_i-1)`), and the same 16 filters as
//! `weir filter --count`.
//!
//! Every engine's choice is checked against the reference (each clause's own pflang filter,
//! in order) on every packet before anything is timed, and the end-to-end counts against
//! the dispatch's.

use crate::record::say;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use weir::pfmatch::{parse, Body, Program, Test};
use weir::{Dispatch, Engine, LinkType, NameDb};
use weir_filter::{opt, Abort, Evaluator, Filter, Pred};
use weir_jit::filter::NativeFilter;

use crate::record::{self, Log};
use crate::timing::{time_interleaved, time_passes, ChunkRow, Plan, Samples};
use crate::traffic;

/// The benchmark's program. Handlers whose arguments need IPv4 (`&tcp[0]`) have tests that
/// imply it, so that a clause's test alone decides it and the sequential filters and the
/// tcpdump processes can mean the same thing.
pub const PROGRAM: &str = "\
# 16 clauses: a protocol split plus host and port rules
match {
  arp => arp
  ip host 10.0.0.1 => mgmt_host(&ip[0])
  ip and tcp port 22 => ssh(&tcp[0])
  ip and tcp port 80 => http(&tcp[0], tcp[2:2])
  ip and tcp port 443 => https(&tcp[0])
  ip and udp port 53 => dns(&udp[0], udp[4:2])
  udp port 123 => ntp
  udp port 67 or udp port 68 => dhcp
  icmp => icmp
  net 192.168.0.0/16 and tcp => lan_tcp(&ip[0])
  net 192.168.0.0/16 and udp => lan_udp(&ip[0])
  ip6 and tcp => tcp6
  ip6 and udp => udp6
  ip6 => other6
  tcp => tcp_other
  udp => udp_other
}
";

#[derive(Debug, clap::Args)]
pub struct MatchArgs {
    /// Timed rounds per row.
    #[arg(long, default_value_t = 15, value_name = "N")]
    pub rounds: usize,
    /// Packets of the streaming workload.
    #[arg(long, default_value_t = 400_000, value_name = "N")]
    pub stream_packets: usize,
    /// Packets of the end-to-end capture (0: no end-to-end rows).
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub e2e_packets: usize,
    /// The `weir` binary for the end-to-end rows (default: target/release/weir).
    #[arg(long, value_name = "PATH")]
    pub weir: Option<PathBuf>,
    /// Rounds of the interleaved goal measurement: the dispatch, the 16 sequential filters
    /// and each clause alone take turns chunk by chunk within each round, and the goal
    /// ratios are the medians of the per-round ratios.
    #[arg(long, default_value_t = 31, value_name = "N")]
    pub paired_rounds: usize,
    /// Write bench/records/<date>-pfmatch.txt.
    #[arg(long)]
    pub record: bool,
    /// For a profiler (`perf stat`): only run one row's hot loop, PASSES times over the hot
    /// packets, and print nothing else: `dispatch`, `dispatch-batch` (the dispatch through
    /// its batch call, which prefetches ahead), `dispatch-handlers` (that call through
    /// `weir::Dispatch::handler_each`, the goal rows' path), `sequential` (the 16 clause filters in
    /// turn until one accepts) or a clause's position (1-16). Run it
    /// with 0 passes too, and subtract: what is left is the loop's own count.
    #[arg(long, value_name = "ROW:PASSES")]
    pub only: Option<String>,
    /// The packets `--only` runs over: `hot` (the 4,096 hot packets in one order, repeated),
    /// `stream` (the table's stream packets, `--stream-packets` of them, in order: memory
    /// misses and fresh branch outcomes), `shuffled` (`--stream-packets` draws from the hot
    /// packets in a random order: cached, but no order for the branch predictor to learn) or
    /// `cycled` (`--stream-packets` separately allocated copies of the hot packets in their
    /// order: memory misses, with the hot order's repeating branch outcomes) or `aligned` (the
    /// stream's packets in one buffer, each on a 64-byte boundary) or `straddled` (that buffer
    /// with each packet 48 bytes into a line). Separates a packet's memory
    /// misses from its mispredicted branches (no hardware counters here).
    #[arg(long, default_value = "hot", value_name = "TRAFFIC")]
    pub only_traffic: String,
    /// With `--only`: every row's loop prefetches the packet [`weir_jit::filter::PREFETCH_AHEAD`]
    /// places on, as the dispatch's batch call does (`dispatch-batch`), so that rows compare
    /// like for like.
    #[arg(long)]
    pub prefetch: bool,
}

/// The row's machine code to /tmp/weir-match-ROW.bin, its address on standard output
/// (`objdump -D -b binary -m i386:x86-64 --adjust-vma=ADDRESS`, beside `perf script`).
fn dump(row: &str, code: &[u8]) -> Result<(), String> {
    let path = std::env::temp_dir().join(format!("weir-match-{row}.bin"));
    std::fs::write(&path, code).map_err(|e| format!("{}: {e}", path.display()))?;
    say!("{row}: {} code bytes at {:p} in {}", code.len(), code.as_ptr(), path.display());
    Ok(())
}

/// A packet and its length on the wire, as the batch calls take them.
type Packet<'a> = (&'a [u8], u32);

/// A row of the goal measurement: a pass over packets, returning its matches.
type Pass<'a> = &'a dyn Fn(&[Packet<'_>]) -> usize;

/// Each packet with its length on the wire (all of it captured).
fn with_wire_len<'a>(set: &[&'a [u8]]) -> Vec<Packet<'a>> {
    set.iter().map(|p| (*p, p.len() as u32)).collect()
}

/// A pass of `verdict` over `batch`, packet by packet: the matches.
fn per_packet(batch: &[Packet<'_>], verdict: impl Fn(&[u8], u32) -> bool) -> usize {
    batch.iter().filter(|&&(p, w)| verdict(p, w)).count()
}

/// `--only ROW:PASSES`: one row's hot loop alone (see [`MatchArgs::only`]).
fn only(spec: &str, program: &Program, args: &MatchArgs) -> Result<bool, String> {
    let (row, passes) = spec.split_once(':').ok_or("--only wants ROW:PASSES")?;
    let passes: usize = passes.parse().map_err(|e| format!("--only passes: {e}"))?;
    let n = args.stream_packets.max(1);
    let frames: Vec<Vec<u8>> = match args.only_traffic.as_str() {
        "hot" | "shuffled" => traffic::frames(traffic::SEED, 4096),
        "stream" | "aligned" | "straddled" => traffic::frames(traffic::SEED ^ 0x15, n),
        "cycled" => {
            let hot = traffic::frames(traffic::SEED, 4096);
            (0..n).map(|i| hot[i % hot.len()].clone()).collect()
        }
        other => return Err(format!("--only-traffic: no traffic `{other}`")),
    };
    // `aligned`: the stream's packets one after another in one buffer, each starting on a
    // 64-byte line (as in a ring of frames), so that the first 64 bytes, every offset the
    // program reads, are one cache line; the heap's frames start 16-byte aligned and so
    // spread those bytes over two lines for most packets.
    let mut arena = Vec::new();
    let mut spans = Vec::new();
    // `straddled`: the same buffer with every packet starting 48 bytes into a line, so that
    // the program's bytes are always on two lines (the same memory otherwise).
    if let Some(skew) = match args.only_traffic.as_str() {
        "aligned" => Some(0),
        "straddled" => Some(48),
        _ => None,
    } {
        let size = frames.iter().map(|f| (f.len() + skew).next_multiple_of(64)).sum::<usize>();
        arena = vec![0u8; size + 64];
        let mut at = arena.as_ptr().align_offset(64);
        for f in &frames {
            arena[at + skew..at + skew + f.len()].copy_from_slice(f);
            spans.push(at + skew..at + skew + f.len());
            at += (f.len() + skew).next_multiple_of(64);
        }
    }
    // Every row and traffic runs over one list of packet slices, so they differ only in
    // which bytes the slices point at and in what order.
    let hot: Vec<&[u8]> = match args.only_traffic.as_str() {
        "shuffled" => {
            let mut rng = weir_testkit::SplitMix64::new(traffic::SEED ^ 0x5f);
            (0..n).map(|_| frames[rng.below(frames.len() as u64) as usize].as_slice()).collect()
        }
        "aligned" | "straddled" => spans.iter().map(|s| &arena[s.clone()]).collect(),
        _ => frames.iter().map(Vec::as_slice).collect(),
    };
    let mut hits = 0usize;
    // Set after each row's compile, just before its loop: the figure is the loop's.
    let started;
    if row == "dispatch" {
        let native = native_dispatch(program)?;
        // The hot function every run calls, and the whole one it leaves packets to.
        dump(row, native.machine_code())?;
        dump("dispatch-whole", native.whole_machine_code())?;
        let mut r = [0u32; 16];
        started = Instant::now();
        for _ in 0..passes {
            hits += pass(&hot, args.prefetch, |p| native.run(p, p.len() as u32, &mut r));
        }
    } else if row == "dispatch-batch" {
        // The same dispatch through its batch call, which prefetches packets ahead.
        let native = native_dispatch(program)?;
        let batch: Vec<(&[u8], u32)> = hot.iter().map(|p| (*p, p.len() as u32)).collect();
        started = Instant::now();
        for _ in 0..passes {
            native.run_each(&batch, |_, matched, _| hits += usize::from(matched));
        }
    } else if row == "dispatch-handlers" {
        // The goal rows' path: `weir::Dispatch::handler_each` (the batch call above, then
        // the handler read from the results, as `weir match --count` does).
        let native =
            Dispatch::prepare(program.clone(), Some(Engine::Native)).map_err(|e| e.message)?;
        let batch: Vec<(&[u8], u32)> = hot.iter().map(|p| (*p, p.len() as u32)).collect();
        started = Instant::now();
        for _ in 0..passes {
            // Counted in a local, as the goal rows' pass does: `hits` is read after the
            // loop by reference, so its own count would stay in memory.
            let mut n = 0;
            native.handler_each(&batch, |_, h| n += usize::from(h.is_some()));
            hits += n;
        }
    } else if row == "sequential" {
        // The 16 clause filters run in turn until one accepts, as the table's row.
        let filters = sequential(program)?;
        started = Instant::now();
        for _ in 0..passes {
            hits +=
                pass(&hot, args.prefetch, |p| filters.iter().any(|f| f.matches(p, p.len() as u32)));
        }
    } else {
        let i: usize = row.parse().map_err(|e| format!("--only row: {e}"))?;
        let (_, f) = tests(program)?
            .into_iter()
            .nth(i.wrapping_sub(1))
            .ok_or(format!("--only: no clause {i}"))?;
        let f = weir_jit::filter::compile(&opt::optimize(&f)).map_err(|e| e.to_string())?;
        dump(row, f.machine_code())?;
        started = Instant::now();
        for _ in 0..passes {
            hits += pass(&hot, args.prefetch, |p| f.matches(p, p.len() as u32));
        }
    }
    let n = (passes * hot.len()).max(1);
    say!(
        "{row}: {passes} passes, {hits} hits, {:.2} ns/packet",
        started.elapsed().as_nanos() as f64 / n as f64
    );
    Ok(true)
}

/// The program's dispatch as the native code `weir match` runs (handler and argument slots
/// written for the chosen handler only).
fn native_dispatch(program: &Program) -> Result<weir_jit::filter::NativeResults, String> {
    let d = weir::pfmatch::Dispatch::compile(program)?;
    weir_jit::filter::compile_results_read(d.filter(), &d.result_slots(), &d.result_reads())
        .map_err(|e| e.to_string())
}

/// One pass of `--only`'s loop: `run` on every packet, the matches counted (one loop for
/// every row, so rows differ only in what they call).
/// With `prefetch`, first the packet `PREFETCH_AHEAD` on, as `run_each` does.
fn pass(packets: &[&[u8]], prefetch: bool, mut run: impl FnMut(&[u8]) -> bool) -> usize {
    if !prefetch {
        return packets.iter().filter(|p| run(p)).count();
    }
    let ahead = weir_jit::filter::PREFETCH_AHEAD;
    let mut hits = 0;
    for (i, p) in packets.iter().enumerate() {
        if let Some(next) = packets.get(i + ahead) {
            weir_jit::filter::prefetch(next);
        }
        hits += usize::from(run(p));
    }
    hits
}

/// The clause tests, in order (the program has no nesting and no `otherwise`).
fn tests(program: &Program) -> Result<Vec<(String, Filter)>, String> {
    program
        .clauses
        .iter()
        .map(|c| match (&c.test, &c.body) {
            (Test::Filter { text, filter }, Body::Handler { .. }) => {
                Ok((text.clone(), filter.clone()))
            }
            _ => Err("the benchmark program is flat, without `otherwise`".to_string()),
        })
        .collect()
}

/// Each clause as one native filter: its test and its arguments' checks (what the clause
/// needs to be chosen), optimized.
fn sequential(program: &Program) -> Result<Vec<NativeFilter>, String> {
    program
        .clauses
        .iter()
        .map(|c| {
            let Test::Filter { filter, .. } = &c.test else { return Err("otherwise".into()) };
            let Body::Handler { args, .. } = &c.body else { return Err("nested".into()) };
            let checks = args.iter().flat_map(|a| a.checks.iter().cloned());
            let pred = Pred::and(std::iter::once(filter.pred.clone()).chain(checks));
            weir_jit::filter::compile(&opt::optimize_owned(Filter::new(pred)))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Tests (comparisons, set lookups, guards, chain walks) the IR evaluator runs on one
/// packet: the evaluator's semantics (an abort inside a Try is its false; outside, it ends
/// the run), counted.
fn tests_run(p: &Pred, e: &mut Evaluator<'_>, n: &mut u64) -> Result<bool, Abort> {
    Ok(match p {
        Pred::And(ps) => {
            for q in ps {
                if !tests_run(q, e, n)? {
                    return Ok(false);
                }
            }
            true
        }
        Pred::Or(ps) => {
            for q in ps {
                if tests_run(q, e, n)? {
                    return Ok(true);
                }
            }
            false
        }
        Pred::Not(q) => !tests_run(q, e, n)?,
        Pred::Try(q) => tests_run(q, e, n).unwrap_or(false),
        Pred::Const(_) | Pred::Store { .. } => e.pred(p)?,
        Pred::Cmp { .. } | Pred::In { .. } | Pred::Guard(_) | Pred::Chain(_) | Pred::Pairs(_) => {
            *n += 1;
            e.pred(p)?
        }
    })
}

/// Mean tests run per packet by a dispatch's predicate over `packets`.
fn mean_tests(d: &weir::pfmatch::Dispatch, packets: &[Vec<u8>]) -> f64 {
    let mut n = 0u64;
    for p in packets {
        let mut e = Evaluator::new(p, p.len() as u32);
        let _ = tests_run(&d.filter().pred, &mut e, &mut n);
    }
    n as f64 / packets.len().max(1) as f64
}

/// Builds the command that runs one filter over the capture.
type CommandFor<'a> = Box<dyn Fn(&str) -> Command + 'a>;

fn first_accepting(filters: &[NativeFilter], packet: &[u8], wire_len: u32) -> Option<usize> {
    filters.iter().position(|f| f.matches(packet, wire_len))
}

struct Row {
    name: String,
    hot: Samples,
    stream: Samples,
    shuffled: Samples,
}

pub fn run(args: &MatchArgs, command: &str) -> Result<bool, String> {
    let mut log = Log::default();
    let program = parse(PROGRAM, LinkType::Ethernet, &NameDb::builtin())
        .map_err(|e| format!("the benchmark program: {e}"))?;
    if let Some(spec) = &args.only {
        return only(spec, &program, args);
    }
    let native = Dispatch::prepare(program.clone(), Some(Engine::Native)).map_err(|e| e.message)?;
    let evaluator =
        Dispatch::prepare(program.clone(), Some(Engine::Reference)).map_err(|e| e.message)?;
    let seq = sequential(&program)?;
    let clause_tests = tests(&program)?;
    let singles: Vec<NativeFilter> = clause_tests
        .iter()
        .map(|(_, f)| weir_jit::filter::compile(&opt::optimize(f)).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;

    let hot: Vec<Vec<u8>> = traffic::frames(traffic::SEED, 4096);
    let stream: Vec<Vec<u8>> = traffic::frames(traffic::SEED ^ 0x15, args.stream_packets);
    // Correctness first: every engine's handler is the reference's, on every packet.
    let mut per_handler = vec![0u64; program.handlers.len()];
    let mut none = 0u64;
    for p in hot.iter().chain(&stream) {
        let wire = p.len() as u32;
        let want = program.reference(p, wire);
        let got = native.run(p, wire);
        if got != want {
            return Err(format!("native dispatch {got:?} != reference {want:?} on {p:02x?}"));
        }
        if evaluator.run(p, wire) != want {
            return Err(format!("evaluator dispatch differs from the reference on {p:02x?}"));
        }
        if native.handler(p, wire) != want.handler {
            return Err(format!("Dispatch::handler differs from run on {p:02x?}"));
        }
        if first_accepting(&seq, p, wire) != want.handler {
            return Err(format!("the sequential filters differ from the reference on {p:02x?}"));
        }
        match want.handler {
            Some(h) => per_handler[h] += 1,
            None => none += 1,
        }
    }
    let shares: Vec<String> = program
        .handlers
        .iter()
        .zip(&per_handler)
        .map(|(n, c)| format!("{n} {:.1}%", *c as f64 * 100.0 / (hot.len() + stream.len()) as f64))
        .collect();
    log.line(format!(
        "correctness: native dispatch, IR evaluator and 16 sequential native filters choose the \
         reference's handler on all {} packets; mix: {}, (none) {none}",
        hot.len() + stream.len(),
        shares.join(", ")
    ));
    // Sharing header tests across clauses, before (each clause optimized alone, one after
    // another) and after (dispatch on header fields): IR size, tests run per packet.
    let unshared = weir::pfmatch::Dispatch::compile_with(&program, 0)?;
    let unshared_native = weir_jit::filter::compile_results_read(
        unshared.filter(),
        &unshared.result_slots(),
        &unshared.result_reads(),
    )
    .map_err(|e| e.to_string())?;
    let unshared_handler = |p: &[u8], w: u32| {
        let mut r = [0u32; 16];
        let hit = unshared_native.run(p, w, &mut r);
        unshared.outcome(hit, &r[..unshared.result_slots().len()]).handler
    };
    for p in hot.iter().chain(&stream) {
        if unshared_handler(p, p.len() as u32) != native.handler(p, p.len() as u32) {
            return Err(format!("the unshared dispatch differs on {p:02x?}"));
        }
    }
    let sample = &stream[..stream.len().min(20_000)];
    log.line(format!(
        "sharing header tests across clauses: IR nodes {} before, {} after; tests run per \
         packet (IR evaluator, {} packets) {:.1} before, {:.1} after",
        opt::node_count(&unshared.filter().pred),
        opt::node_count(&native.compiled().filter().pred),
        sample.len(),
        mean_tests(&unshared, sample),
        mean_tests(native.compiled(), sample)
    ));

    let hot_plan = Plan {
        rounds: args.rounds,
        round_target: Duration::from_millis(20),
        warm_up: Duration::from_millis(50),
        single_pass: false,
        budget: Duration::from_secs(10),
    };
    let stream_plan = Plan { single_pass: true, ..hot_plan };
    // The hot packets again, as many draws as the stream in a seeded random order: every
    // byte cached, as in the hot column, but no repeating order for the branch predictor to
    // learn, as in the stream (2026-11-29-pfmatch-11.txt: the hot column's 4,096 packets in one
    // order let it learn most of the dispatch's branches).
    let mut rng = weir_testkit::SplitMix64::new(traffic::SEED ^ 0x5f);
    let shuffled: Vec<&[u8]> =
        (0..stream.len()).map(|_| hot[rng.below(hot.len() as u64) as usize].as_slice()).collect();
    // Every row is a pass over a list of (packet, wire length), the form of the batch call
    // `weir match --count` makes (`weir::Dispatch::handler_each`, which prefetches ahead), so
    // that the dispatch rows time the product's path; the filters' rows call
    // `NativeFilter::matches` packet by packet, as a user's loop (or `weir filter --count`)
    // does: `NativeFilter` has no batch call.
    let hot_refs: Vec<&[u8]> = hot.iter().map(Vec::as_slice).collect();
    let stream_refs: Vec<&[u8]> = stream.iter().map(Vec::as_slice).collect();
    let (hot_batch, stream_batch, shuffled_batch) =
        (with_wire_len(&hot_refs), with_wire_len(&stream_refs), with_wire_len(&shuffled));
    let time = |name: String, count: Pass<'_>| -> Result<Row, String> {
        let (eh, es, eu) = (count(&hot_batch), count(&stream_batch), count(&shuffled_batch));
        let hot = time_passes(&hot_plan, hot.len(), eh, || count(&hot_batch))?;
        let stream = time_passes(&stream_plan, stream.len(), es, || count(&stream_batch))?;
        let shuffled = time_passes(&stream_plan, shuffled.len(), eu, || count(&shuffled_batch))?;
        Ok(Row { name, hot, stream, shuffled })
    };
    let dispatch_batch = |b: &[Packet<'_>]| {
        let mut n = 0;
        native.handler_each(b, |_, h| n += usize::from(h.is_some()));
        n
    };
    let unshared_slots = unshared.result_slots().len();
    let unshared_batch = |b: &[Packet<'_>]| {
        let mut n = 0;
        unshared_native.run_each(b, |_, hit, r| {
            n += usize::from(unshared.outcome(hit, &r[..unshared_slots]).handler.is_some())
        });
        n
    };
    let evaluator_batch = |b: &[Packet<'_>]| {
        let mut n = 0;
        evaluator.handler_each(b, |_, h| n += usize::from(h.is_some()));
        n
    };
    let sequential_each =
        |b: &[Packet<'_>]| per_packet(b, |p, w| first_accepting(&seq, p, w).is_some());
    let rows = [
        time("dispatch, native (batch call)".into(), &dispatch_batch)?,
        time("dispatch, native, clauses unshared (before)".into(), &unshared_batch)?,
        time("16 filters in turn, native".into(), &sequential_each)?,
        time("dispatch, IR evaluator".into(), &evaluator_batch)?,
    ];
    let mut single_rows = Vec::new();
    for ((text, _), f) in clause_tests.iter().zip(&singles) {
        single_rows.push(time(format!("clause alone: {text}"), &|b| {
            per_packet(b, |p, w| f.matches(p, w))
        })?);
    }
    log.line(format!(
        "ns/packet, median of up to {} rounds (spread = IQR/median); hot: 4,096 packets repeated; \
         stream: one pass over {} packets; shuffled: {} draws from the hot packets in a random \
         order (cached, no order to learn)",
        args.rounds,
        stream.len(),
        shuffled.len()
    ));
    log.line(format!(
        "{:<58} {:>9} {:>7} {:>9} {:>7} {:>9} {:>7}",
        "", "hot", "spread", "stream", "spread", "shuffled", "spread"
    ));
    let show = |log: &mut Log, r: &Row| {
        log.line(format!(
            "{:<58} {:>9.2} {:>6.0}% {:>9.2} {:>6.0}% {:>9.2} {:>6.0}%",
            r.name,
            r.hot.median(),
            r.hot.spread_percent(),
            r.stream.median(),
            r.stream.spread_percent(),
            r.shuffled.median(),
            r.shuffled.spread_percent()
        ));
    };
    for r in rows.iter().chain(&single_rows) {
        show(&mut log, r);
    }
    let slowest = |pick: fn(&Row) -> f64| {
        single_rows
            .iter()
            .max_by(|a, b| pick(a).total_cmp(&pick(b)))
            .map(|r| (r.name.clone(), pick(r)))
    };
    for (label, pick) in [
        ("hot", (|r: &Row| r.hot.median()) as fn(&Row) -> f64),
        ("stream", |r: &Row| r.stream.median()),
        ("shuffled", |r: &Row| r.shuffled.median()),
    ] {
        let d = pick(&rows[0]);
        let s = pick(&rows[2]);
        let e = pick(&rows[3]);
        let (slow_name, slow) = slowest(pick).unwrap_or_default();
        log.line(format!(
            "{label}: 16 sequential / dispatch = {:.2}x (goal >= 4); dispatch / slowest clause \
             alone = {:.2}x (goal <= 1.5; slowest: {}); IR evaluator / dispatch = {:.1}x",
            s / d,
            d / slow,
            slow_name.trim_start_matches("clause alone: "),
            e / d
        ));
    }
    // The goal ratios again, from rows timed side by side (`time_interleaved`): the rows
    // above are timed one after another, seconds apart, and on this shared machine a row's
    // median moves with the load of its own seconds (2026-11-29-pfmatch-14.txt: the
    // sequential row's rounds spread 43-74 ns), so a ratio of two medians carries both rows'
    // noise, and so does the choice of the slowest clause. Here the dispatch, the 16
    // sequential filters and every clause alone take turns chunk by chunk, so all share the
    // load of each round; the slowest clause is the one with the highest median here, and
    // the goals are read from the medians of the per-round ratios. Not for the hot column:
    // what it measures is a branch predictor that has learned the 4,096 packets' one order,
    // and 17 other rows' turns in between undo that (2026-11-30-pfmatch-15.txt: hot
    // dispatch 13-27 ns interleaved, 5.2 alone); the stream and the shuffled draws have no
    // order to learn.
    for (label, packets) in [("stream", &stream_batch), ("shuffled", &shuffled_batch)] {
        let clause_each: Vec<_> = singles
            .iter()
            .map(|f| move |b: &[Packet<'_>]| per_packet(b, |p, w| f.matches(p, w)))
            .collect();
        let mut tests: Vec<Pass<'_>> = vec![&dispatch_batch, &sequential_each];
        tests.extend(clause_each.iter().map(|f| f as Pass<'_>));
        let expected: Vec<usize> = tests.iter().map(|f| f(packets)).collect();
        let mut rows: Vec<_> = tests.iter().map(|f| move |x: &[Packet<'_>]| f(x)).collect();
        let mut refs: Vec<ChunkRow<'_, Packet<'_>>> =
            rows.iter_mut().map(|r| r as ChunkRow<'_, Packet<'_>>).collect();
        let per_round = time_interleaved(
            args.paired_rounds,
            Duration::from_millis(20),
            packets,
            4096,
            &expected,
            &mut refs,
        )?;
        let column = |f: &dyn Fn(&[f64]) -> f64| Samples(per_round.iter().map(|r| f(r)).collect());
        let Some(slow) = (0..singles.len())
            .map(|i| (i, column(&|r| r[2 + i]).median()))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
        else {
            continue;
        };
        let seq_over = column(&|r| r[1] / r[0]);
        let over_slow = column(&|r| r[0] / r[2 + slow]);
        let (sq1, sq3) = seq_over.quartiles();
        let (oq1, oq3) = over_slow.quartiles();
        log.line(format!(
            "{label}, rows interleaved by 4,096-packet chunks (thread CPU time), median of {} \
             per-round ratios [quartiles]: 16 sequential / dispatch = {:.2}x [{sq1:.2}-{sq3:.2}] \
             (goal >= 4); dispatch / slowest clause alone ({}) = {:.2}x [{oq1:.2}-{oq3:.2}] \
             (goal <= 1.5); ns/packet medians: dispatch {:.2}, sequential {:.2}, that clause {:.2}",
            per_round.len(),
            seq_over.median(),
            clause_tests[slow].0,
            over_slow.median(),
            column(&|r| r[0]).median(),
            column(&|r| r[1]).median(),
            column(&|r| r[2 + slow]).median(),
        ));
    }
    xdp_in_kernel(&program, &native, &hot, &mut log)?;
    if args.e2e_packets > 0 {
        e2e(args, &program, &clause_tests, &native, &mut log)?;
    }
    if args.record {
        let notes = vec![
            format!("profile: {}", record::profile()),
            "the machine was shared with other builds and tests while this ran: figures are \
             medians, compare ratios taken in the same run"
                .into(),
            "dispatch rows count packets via weir::Dispatch::handler (the native code computes \
             the handler and its arguments into result slots; only the Vec of arguments is not \
             built)"
                .into(),
            format!("program:\n#   {}", PROGRAM.trim_end().replace('\n', "\n#   ")),
        ];
        let path = record::write("pfmatch", command, &notes, &log.lines)?;
        say!("recorded in {}", path.display());
    }
    Ok(true)
}

/// The dispatch as XDP (`weir compile --match -o`) in the kernel's `BPF_PROG_TEST_RUN`, hot
/// packets only (the test run copies each packet into a fresh buffer): handler counts
/// checked against the reference first, then ns/packet as the kernel times it, raw and net
/// of an XDP program that only returns (the test run's own loop), beside native dispatch.
/// Every XDP test run switches the kernel's XDP dispatcher to the program and back, each
/// time waiting for an RCU grace period (milliseconds on a busy machine), so it runs a
/// sample of the hot frames, each many times in one call.
fn xdp_in_kernel(
    program: &Program,
    native: &Dispatch,
    hot: &[Vec<u8>],
    log: &mut Log,
) -> Result<(), String> {
    if let Err(reason) = weir_sys::kernel::available() {
        log.line(format!("dispatch as XDP in the kernel: skipped ({reason})"));
        return Ok(());
    }
    let xdp = native.compiled().xdp()?;
    let maps =
        weir_testkit::kernel_object::create_maps(xdp.program.maps().iter().map(|m| (m, None)))?;
    let prog = weir_testkit::kernel_object::load(&xdp.program, &maps)?;
    let empty = weir::Program::from_insns(vec![
        weir::isa::ebpf::Insn::new(weir::isa::ebpf::Op::Mov64Imm, 0, 0, 0, 2),
        weir::isa::ebpf::Insn::new(weir::isa::ebpf::Op::Exit, 0, 0, 0, 0),
    ])
    .with_prog_type(weir::ProgType::Xdp);
    let empty = weir_testkit::kernel_object::load(&empty, &[])?;
    let frames: Vec<&Vec<u8>> = hot.iter().filter(|f| f.len() >= 14).step_by(32).collect();
    // Correctness: one run per frame, then every handler's count.
    let mut want = vec![0u64; program.handlers.len() + 1];
    for f in &frames {
        prog.test_run(f, 1).map_err(|e| format!("test run: {e}"))?;
        want[xdp.count_key(program.reference(f, f.len() as u32).handler) as usize] += 1;
    }
    for (key, &w) in want.iter().enumerate() {
        let mut v = vec![0u8; maps[0].value_len()];
        maps[0].lookup(Some(&(key as u32).to_ne_bytes()), &mut v).map_err(|e| e.to_string())?;
        let got: u64 =
            v.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).sum();
        if got != w {
            return Err(format!("XDP dispatch in the kernel: key {key} counted {got}, want {w}"));
        }
    }
    const REPEAT: u32 = 2000;
    let round = |p: &weir_sys::kernel::LoadedProgram| -> Result<f64, String> {
        let mut total = 0u64;
        for f in &frames {
            total += u64::from(p.test_run(f, REPEAT).map_err(|e| e.to_string())?.duration_ns);
        }
        Ok(total as f64 / frames.len() as f64)
    };
    let (mut raw, mut base, mut nat) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        raw.push(round(&prog)?);
        base.push(round(&empty)?);
        let t = Instant::now();
        let mut n = 0usize;
        for _ in 0..REPEAT {
            n += frames.iter().filter(|f| native.handler(f, f.len() as u32).is_some()).count();
        }
        std::hint::black_box(n);
        nat.push(t.elapsed().as_nanos() as f64 / (frames.len() as f64 * f64::from(REPEAT)));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (raw, base, nat) = (median(&mut raw), median(&mut base), median(&mut nat));
    log.line(format!(
        "dispatch as XDP in the kernel's test run ({} of the hot frames x {REPEAT}, {} insns, handler counts \
         checked; median of 5 rounds): {raw:.2} ns/packet raw, {base:.2} for an XDP program that only \
         returns, {:.2} net; native dispatch in the same rounds {nat:.2} (net XDP / native {:.2}x)",
        frames.len(),
        xdp.program.len(),
        raw - base,
        (raw - base) / nat
    ));
    Ok(())
}

/// Whole processes over a generated capture: `weir match --count` against 16 tcpdump
/// (and 16 `weir filter`) processes with first-match filters; counts checked.
fn e2e(
    args: &MatchArgs,
    program: &Program,
    clause_tests: &[(String, Filter)],
    native: &Dispatch,
    log: &mut Log,
) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("weir-bench-match-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let cap = dir.join("match.pcap");
    let prog = dir.join("match.txt");
    std::fs::write(&prog, PROGRAM).map_err(|e| e.to_string())?;
    let mut expected = vec![0u64; program.handlers.len()];
    let packets: Vec<weir_testkit::Packet> = traffic::stream(traffic::SEED ^ 0xe2e)
        .take(args.e2e_packets)
        .enumerate()
        .map(|(i, data)| {
            if let Some(h) = native.handler(&data, data.len() as u32) {
                expected[h] += 1;
            }
            weir_testkit::Packet {
                wire_len: data.len() as u32,
                data,
                ts_sec: 1_700_000_000 + (i / 1_000_000) as u32,
                ts_usec: (i % 1_000_000) as u32,
                description: String::new(),
            }
        })
        .collect();
    weir_testkit::write_pcap(&cap, weir_testkit::LINKTYPE_ETHERNET, &packets)
        .map_err(|e| e.to_string())?;
    drop(packets);
    let size = std::fs::metadata(&cap).map(|m| m.len()).unwrap_or(0);
    let weir = args.weir.clone().unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/weir")
    });
    // Warm the page cache: every process reads the same cached file.
    let _ = std::fs::read(&cap);
    let first_match: Vec<String> = clause_tests
        .iter()
        .enumerate()
        .map(|(i, (t, _))| {
            let earlier: Vec<String> =
                clause_tests[..i].iter().map(|(e, _)| format!("({e})")).collect();
            if earlier.is_empty() {
                format!("({t})")
            } else {
                format!("({t}) and not ({})", earlier.join(" or "))
            }
        })
        .collect();
    let runs = 3;
    let mut times: Vec<(String, Vec<f64>)> = Vec::new();
    // weir match --count.
    let mut weir_match = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new(&weir)
            .arg("match")
            .arg(&prog)
            .arg("-r")
            .arg(&cap)
            .arg("--count")
            .output()
            .map_err(|e| format!("{}: {e}", weir.display()))?;
        weir_match.push(t.elapsed().as_secs_f64());
        if !out.status.success() {
            return Err(format!("weir match: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for (name, n) in program.handlers.iter().zip(&expected) {
            if !text.lines().any(|l| l == format!("{name} {n}")) {
                return Err(format!("weir match --count: {name} is not {n}:\n{text}"));
            }
        }
    }
    times.push(("weir match --count (one process)".into(), weir_match));
    // 16 processes each, of tcpdump and of weir filter.
    let tools: [(&str, CommandFor); 2] = [
        (
            "16 x tcpdump -r F --count 'first-match filter'",
            Box::new(|f: &str| {
                let mut c = Command::new("tcpdump");
                c.arg("-r").arg(&cap).arg("--count").arg(f);
                c
            }),
        ),
        (
            "16 x weir filter -r F --count 'first-match filter'",
            Box::new(|f: &str| {
                let mut c = Command::new(&weir);
                c.arg("filter").arg("-r").arg(&cap).arg("--count").arg(f);
                c
            }),
        ),
    ];
    for (label, make) in &tools {
        let mut samples = Vec::new();
        let mut available = true;
        for _ in 0..runs {
            let t = Instant::now();
            for (f, want) in first_match.iter().zip(&expected) {
                let out = match make(f).output() {
                    Ok(o) => o,
                    Err(e) => {
                        log.line(format!("{label}: SKIPPED: {e}"));
                        available = false;
                        break;
                    }
                };
                let text = String::from_utf8_lossy(&out.stdout);
                let n: Option<u64> = text.split_whitespace().next().and_then(|w| w.parse().ok());
                if !out.status.success() || n != Some(*want) {
                    return Err(format!(
                        "{label}: `{f}` counted {n:?}, the dispatch {want}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
            if !available {
                break;
            }
            samples.push(t.elapsed().as_secs_f64());
        }
        if available {
            times.push((label.to_string(), samples));
        }
    }
    log.line(format!(
        "end to end: {} packets, {:.0} MB capture (page-cached), counts per handler checked; \
         wall seconds, median of {runs}",
        args.e2e_packets,
        size as f64 / 1e6
    ));
    let base = Samples(times[0].1.clone()).median();
    for (label, t) in &times {
        let m = Samples(t.clone()).median();
        log.line(format!("  {label:<52} {m:>7.2} s  {:>6.1}x", m / base));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
