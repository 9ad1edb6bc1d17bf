//! `weir-bench filters`: every filter of the list on every engine, over the hot and the
//! stream workloads; nanoseconds per packet (median of the rounds) and the ratio to
//! libpcap's time.
//!
//! Order of work for each filter: compile it with weir (lower, then optimize) and with
//! libpcap; prepare every engine; run every engine once over the workload and compare the
//! verdicts packet by packet with the reference (weir's IR evaluator, or libpcap when weir
//! cannot compile the filter). Only when all agree is anything timed: a disagreement is
//! printed loudly, the filter is not timed, and the run ends with a failure status. A filter
//! weir cannot compile yet is reported as skipped for weir's engines, and libpcap's side is
//! still measured.

use crate::record::say;
use std::path::PathBuf;
use std::time::Duration;

use weir_filter::Filter;
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_sys::libpcap::{self, BpfInsn};

use crate::engines::{self, Engine, Role, Runner, Subject};
use crate::filterlist::{self, BenchFilter};
use crate::kernel_runs::{self, KernelTurns, TurnTimes};
use crate::record::{self, Log};
use crate::timing::{self, Plan, Samples};
use crate::workload::{self, Source, Workload};

/// `weir-bench filters` options.
#[derive(Debug, clap::Args)]
pub struct FiltersArgs {
    /// Take the packets from this capture (pcap or pcapng) instead of generated traffic.
    #[arg(short = 'r', long = "read", value_name = "CAPTURE")]
    pub read: Option<PathBuf>,
    /// Engines to run, comma-separated (default: all). `list` prints them.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub engines: Vec<String>,
    /// Only the hot workload (256 packets that stay in cache).
    #[arg(long, conflicts_with = "stream")]
    pub hot: bool,
    /// Only the stream workload (100,000 packets, contiguous, run over once per round).
    #[arg(long)]
    pub stream: bool,
    /// Timed rounds per measurement, after warm-up (default 21; 3 with --quick).
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// Repetitions per BPF_PROG_TEST_RUN call (default 200; 10 with --quick).
    #[arg(long, value_name = "N")]
    pub kernel_repeat: Option<u32>,
    /// Smoke mode: short rounds, a 5,000-packet stream, host sets capped at 50 hosts.
    #[arg(long)]
    pub quick: bool,
    /// Write bench/records/<date>-filters.txt.
    #[arg(long)]
    pub record: bool,
    /// Filters to measure (default: bench/filters.txt); `@hosts N` makes a host set.
    pub filters: Vec<String>,
}

/// A filter compiled by both compilers.
struct Compiled {
    bench: BenchFilter,
    unoptimized: Result<Filter, String>,
    optimized: Result<Filter, String>,
    pcap: Result<Vec<BpfInsn>, String>,
}

impl Compiled {
    fn subject(&self) -> Subject<'_> {
        Subject {
            expr: &self.bench.expr,
            filter: self.optimized.as_ref().map_err(String::as_str),
            unoptimized: self.unoptimized.as_ref().map_err(String::as_str),
            pcap: self.pcap.as_deref().map_err(String::as_str),
        }
    }
}

/// weir's compile: parse and lower, then the IR optimizer.
pub fn compile_weir(
    expr: &str,
    linktype: LinkType,
    names: &NameDb,
) -> Result<(Filter, Filter), String> {
    let options = Options::new(linktype);
    let lowered = weir_pflang::compile(expr, &options, names).map_err(|e| {
        let first = e.render(expr);
        first.lines().next().unwrap_or("").to_string()
    })?;
    let optimized = weir_filter::opt::optimize(&lowered);
    Ok((lowered, optimized))
}

/// One engine's outcome on one filter.
struct Row {
    engine: &'static str,
    outcome: Result<Figures, String>,
}

struct Figures {
    ns: f64,
    spread: f64,
    matches: Option<usize>,
    note: String,
}

/// Runs the suite; `Ok(false)` when a filter's engines disagreed or an engine failed.
pub fn run(args: &FiltersArgs, command: &str) -> Result<bool, String> {
    if args.engines.iter().any(|e| e == "list") {
        for e in engines::ENGINES.iter() {
            say!("{:<17} {}", e.name, e.about);
        }
        return Ok(true);
    }
    let selected = select_engines(&args.engines)?;
    let rounds = args.rounds.unwrap_or(if args.quick { 3 } else { 21 });
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let repeat = args.kernel_repeat.unwrap_or(if args.quick { 10 } else { 200 }).max(1);
    let list = filterlist::filters(&args.filters, args.quick)?;
    let (hot, stream) = match (args.hot, args.stream) {
        (true, false) => (true, false),
        (false, true) => (false, true),
        _ => (true, true),
    };
    let stream_count =
        if args.quick { workload::QUICK_STREAM_PACKETS } else { workload::STREAM_PACKETS };
    let source = args.read.clone().map_or(Source::Generated, Source::Capture);
    let packets = source.load(if stream { stream_count } else { workload::HOT_PACKETS })?;
    let linktype = LinkType::from_number(packets.linktype)
        .filter(|&link| weir_pflang::compiles_for(link))
        .ok_or_else(|| format!("link type {} is not one weir filters", packets.linktype))?;
    let mut workloads = Vec::new();
    if hot {
        workloads.push(Workload::new("hot", &packets, workload::HOT_PACKETS));
    }
    if stream {
        workloads.push(Workload::new("stream", &packets, stream_count));
    }
    drop(packets);

    let mut log = Log::default();
    let mut notes = vec![format!("machine: {}", record::machine())];
    if record::profile() == "debug" {
        notes.push("WARNING: debug build; use --release for figures that mean anything".into());
    }
    let pcap_state = libpcap::available();
    let kernel_state = weir_sys::kernel::available();
    if let Err(e) = &pcap_state {
        notes.push(format!("libpcap: {e}"));
    }
    if let Err(e) = &kernel_state {
        notes.push(format!("kernel: {e}"));
    }
    notes.push(format!(
        "ns/pkt: median of {rounds} rounds after warm-up; x libpcap: time / libpcap's time \
         (below 1 is faster); spread: interquartile range / median"
    ));
    notes.push(format!(
        "kernel: BPF_PROG_TEST_RUN, {repeat} repetitions per packet, the kernel engines and an \
         accept-all program in turns packet by packet; ns/pkt is the median of the rounds' \
         nets (a program's mean less the accept-all program's in the same round), the note \
         gives raw and overhead"
    ));
    for note in &notes {
        eprintln!("{note}");
    }
    log.line("engines:");
    let mut usable = Vec::new();
    for e in selected {
        match (e.available)() {
            Ok(()) => {
                log.line(format!("  {:<17} {}", e.name, e.about));
                usable.push(e);
            }
            Err(why) => log.line(format!("  {:<17} not measured: {why}", e.name)),
        }
    }

    let names = NameDb::system();
    let compiled: Vec<Compiled> = list
        .into_iter()
        .map(|bench| {
            let weir = compile_weir(&bench.expr, linktype, &names);
            let (unoptimized, optimized) = match weir {
                Ok((u, o)) => (Ok(u), Ok(o)),
                Err(e) => (Err(e.clone()), Err(e)),
            };
            let pcap = libpcap::load()
                .and_then(|pcap| pcap.compile(&bench.expr, linktype.dlt() as i32, true));
            Compiled { bench, unoptimized, optimized, pcap }
        })
        .collect();

    let mut all_ok = true;
    for mut w in workloads {
        let plan = if w.kind == "hot" {
            Plan {
                rounds,
                round_target: Duration::from_micros(if args.quick { 200 } else { 2_000 }),
                warm_up: Duration::from_millis(if args.quick { 2 } else { 50 }),
                single_pass: false,
                budget: Duration::from_secs(if args.quick { 1 } else { 10 }),
            }
        } else {
            Plan {
                rounds,
                round_target: Duration::ZERO,
                warm_up: Duration::ZERO,
                single_pass: true,
                budget: Duration::from_secs(if args.quick { 1 } else { 20 }),
            }
        };
        log.line("");
        log.line(w.describe());
        let mut engines = usable.clone();
        if w.kind != "stream" {
            engines.retain(|e| !e.stream_only);
        }
        if let Some(why) = kernel_runs::unusable(&w, &kernel_state) {
            let (kernel, rest): (Vec<_>, Vec<_>) = engines.into_iter().partition(|e| e.in_kernel);
            engines = rest;
            if !kernel.is_empty() {
                let names: Vec<&str> = kernel.iter().map(|e| e.name.as_str()).collect();
                log.line(format!("  {}: not measured here: {why}", names.join(", ")));
            }
        }
        let mut ratios: Vec<(&'static str, Vec<f64>)> =
            engines.iter().map(|e| (e.name.as_str(), Vec::new())).collect();
        for (index, c) in compiled.iter().enumerate() {
            let place = format!("[{}] {}", index + 1, c.bench.label);
            log.line(place.clone());
            // A compile error is said once, not once per engine it stops.
            let compile_errors: Vec<&str> = [&c.optimized.as_ref().err(), &c.pcap.as_ref().err()]
                .into_iter()
                .flatten()
                .map(|e| e.as_str())
                .collect();
            if let Err(e) = &c.optimized {
                log.line(format!("    weir: skipped: {e}"));
            }
            if let Err(e) = &c.pcap {
                log.line(format!("    libpcap: skipped: {e}"));
            }
            let rows = match measure(c, &engines, &mut w, &plan, repeat) {
                Ok(rows) => rows,
                Err(mismatch) => {
                    all_ok = false;
                    for line in mismatch.lines() {
                        eprintln!("!!! {place}: {line}");
                        log.line(format!("    !!! {line}"));
                    }
                    log.line("    !!! not timed: the engines disagree");
                    continue;
                }
            };
            let pcap_ns = rows
                .iter()
                .find(|r| r.engine == "libpcap")
                .and_then(|r| r.outcome.as_ref().ok())
                .map(|f| f.ns);
            let shown = rows.iter().filter(|r| match &r.outcome {
                Ok(_) => true,
                Err(reason) => !compile_errors.contains(&reason.as_str()),
            });
            if shown.count() > 0 {
                log.line(format!(
                    "    {:<17} {:>9} {:>9} {:>8} {:>7}  note",
                    "engine", "ns/pkt", "x libpcap", "matches", "spread"
                ));
            }
            for row in &rows {
                match &row.outcome {
                    Ok(f) => {
                        let ratio = pcap_ns.filter(|p| *p > 0.0).map(|p| f.ns / p);
                        if let (Some(r), Some(slot)) =
                            (ratio, ratios.iter_mut().find(|(n, _)| *n == row.engine))
                        {
                            if r > 0.0 {
                                slot.1.push(r);
                            }
                        }
                        log.line(format!(
                            "    {:<17} {:>9.1} {:>9} {:>8} {:>6.0}%  {}",
                            row.engine,
                            f.ns,
                            ratio.map_or("-".into(), |r| format!("{r:.2}")),
                            f.matches.map_or("-".into(), |m| m.to_string()),
                            f.spread,
                            f.note
                        ));
                    }
                    Err(reason) if compile_errors.contains(&reason.as_str()) => {}
                    Err(reason) => {
                        if reason.starts_with("FAILED") {
                            all_ok = false;
                        }
                        let first = reason.lines().next().unwrap_or("");
                        log.line(format!("    {:<17} skipped: {first}", row.engine));
                    }
                }
            }
        }
        log.line(format!(
            "summary ({}): geometric mean of time / libpcap's time over the filters both ran",
            w.kind
        ));
        for (name, rs) in &ratios {
            if name == &"libpcap" || rs.is_empty() {
                continue;
            }
            let geo = (rs.iter().map(|r| r.ln()).sum::<f64>() / rs.len() as f64).exp();
            let filters = if rs.len() == 1 { "filter" } else { "filters" };
            log.line(format!("    {name:<17} {geo:>6.2}x  ({} {filters})", rs.len()));
        }
    }
    if args.record {
        match record::write("filters", command, &notes[1..], &log.lines) {
            Ok(path) => say!("recorded {}", path.display()),
            Err(e) => return Err(e),
        }
    }
    Ok(all_ok)
}

fn select_engines(names: &[String]) -> Result<Vec<&'static Engine>, String> {
    if names.is_empty() {
        return Ok(engines::ENGINES.iter().collect());
    }
    names.iter().map(|n| engines::lookup(n)).collect()
}

/// Prepared engines: the in-process ones with their verdicts, the kernel ones loaded (their
/// index among the kernel programs, which are timed together in turns).
enum Ready {
    InProcess(engines::Verdict, Role),
    Kernel(usize),
}

/// Checks agreement, then times every engine on one filter. `Err` is a disagreement.
fn measure(
    c: &Compiled,
    selected: &[&'static Engine],
    w: &mut Workload,
    plan: &Plan,
    repeat: u32,
) -> Result<Vec<Row>, String> {
    let subject = c.subject();
    let mut rows = Vec::new();
    let mut ready: Vec<(&'static str, Ready)> = Vec::new();
    let mut turns: Option<KernelTurns> = None;
    for engine in selected {
        let prepared = (engine.prepare)(&subject).and_then(|runner| match runner {
            Runner::InProcess(v) => Ok(Ready::InProcess(v, engine.role)),
            Runner::Kernel(program) => {
                let loaded = match &mut turns {
                    Some(t) => t.add(&program),
                    None => KernelTurns::new().and_then(|t| {
                        let t = turns.insert(t);
                        t.add(&program)
                    }),
                };
                loaded.map(Ready::Kernel).map_err(|e| {
                    // Weir's eBPF must pass the verifier: a refusal is a failure, with the
                    // end of the log (where the reason is) on stderr.
                    let tail: Vec<&str> = e.lines().rev().take(20).collect();
                    eprintln!("{}: {}:", engine.name, subject.expr);
                    for line in tail.iter().rev() {
                        eprintln!("    {line}");
                    }
                    format!("FAILED: {e}")
                })
            }
        });
        match prepared {
            Ok(r) => ready.push((engine.name.as_str(), r)),
            Err(e) => rows.push(Row { engine: &engine.name, outcome: Err(e) }),
        }
    }

    // Verdicts of every filter engine, then agreement with the reference.
    let mut verdicts: Vec<(&'static str, Vec<bool>)> = Vec::new();
    let mut checked = Vec::with_capacity(ready.len());
    for (name, mut r) in ready {
        let v = match &mut r {
            Ready::InProcess(_, Role::Baseline) => {
                checked.push((name, r));
                continue;
            }
            Ready::InProcess(run, Role::Engine) => {
                let mut v = Vec::with_capacity(w.len());
                w.for_each(|pkt, wire| v.push(run(pkt, wire)));
                v
            }
            Ready::Kernel(index) => match turns.as_ref().map(|t| t.verdicts(*index, w)) {
                Some(Ok(v)) => v,
                Some(Err(e)) => {
                    rows.push(Row { engine: name, outcome: Err(format!("FAILED: {e}")) });
                    continue;
                }
                None => continue,
            },
        };
        verdicts.push((name, v));
        checked.push((name, r));
    }
    let reference = [engines::reference_name().as_str(), "libpcap"]
        .iter()
        .find_map(|want| verdicts.iter().find(|(n, _)| n == want))
        .or(verdicts.first());
    let mut disagreements = Vec::new();
    if let Some((ref_name, ref_v)) = reference {
        for (name, v) in &verdicts {
            if let Some(i) = (0..v.len()).find(|&i| v[i] != ref_v[i]) {
                let differ = v.iter().zip(ref_v).filter(|(a, b)| a != b).count();
                let count = |x: &Vec<bool>| x.iter().filter(|&&b| b).count();
                let (pkt, wire) = w.packets().nth(i).unwrap_or((&[], 0));
                disagreements.push(format!(
                    "MISMATCH: `{name}` disagrees with `{ref_name}` on {differ} of {} packets \
                     ({name}: {} matches, {ref_name}: {}); first at packet {i}: {ref_name} \
                     {}, {name} {}; {} of {wire} bytes: {}",
                    v.len(),
                    count(v),
                    count(ref_v),
                    ref_v[i],
                    v[i],
                    pkt.len(),
                    hex(pkt, 96)
                ));
            }
        }
    }
    if !disagreements.is_empty() {
        return Err(disagreements.join("\n"));
    }
    let matches_of = |name: &str| {
        verdicts.iter().find(|(n, _)| *n == name).map(|(_, v)| v.iter().filter(|&&b| b).count())
    };

    // The kernel programs that gave their verdicts, timed together packet by packet.
    let mut kernel_times: Option<Result<TurnTimes, String>> = None;
    for (name, r) in checked {
        let outcome = match r {
            Ready::InProcess(mut run, role) => {
                let expected = match role {
                    Role::Engine => matches_of(name).unwrap_or(0),
                    Role::Baseline => 0,
                };
                let packets = w.len();
                let samples = timing::time_passes(plan, packets, expected, || {
                    let mut n = 0usize;
                    w.for_each(|pkt, wire| n += usize::from(run(pkt, wire)));
                    n
                });
                samples.map(|s: Samples| Figures {
                    ns: s.median(),
                    spread: s.spread_percent(),
                    matches: (role == Role::Engine).then_some(expected),
                    note: if s.len() < plan.rounds {
                        format!("{} of {} rounds (time budget)", s.len(), plan.rounds)
                    } else {
                        String::new()
                    },
                })
            }
            Ready::Kernel(index) => {
                let times = kernel_times.get_or_insert_with(|| match &turns {
                    Some(t) => t.time(w, plan.rounds, repeat),
                    None => Err("no kernel program loaded".into()),
                });
                match times {
                    Ok(k) => {
                        let raw = k.raw(index);
                        Ok(Figures {
                            ns: k.net(index).median(),
                            spread: raw.spread_percent(),
                            matches: matches_of(name),
                            note: format!(
                                "raw {:.1}, loop overhead {:.1} ns",
                                raw.median(),
                                k.overhead.median()
                            ),
                        })
                    }
                    Err(e) => Err(e.clone()),
                }
            }
        };
        rows.push(Row { engine: name, outcome });
    }
    // Report in the order of the engine list.
    rows.sort_by_key(|r| selected.iter().position(|e| e.name == r.engine));
    Ok(rows)
}

fn hex(bytes: &[u8], max: usize) -> String {
    let shown: Vec<String> = bytes.iter().take(max).map(|b| format!("{b:02x}")).collect();
    let more = if bytes.len() > max { " ..." } else { "" };
    format!("{}{more}", shown.join(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(expr: &str, pcap_expr: &str) -> Result<Compiled, String> {
        libpcap::available()?;
        let (u, o) = compile_weir(expr, LinkType::Ethernet, &NameDb::builtin())?;
        Ok(Compiled {
            bench: BenchFilter::plain(expr),
            unoptimized: Ok(u),
            optimized: Ok(o),
            pcap: libpcap::load()?.compile(pcap_expr, 1, true),
        })
    }

    fn small_plan() -> Plan {
        Plan {
            rounds: 2,
            round_target: Duration::from_micros(50),
            warm_up: Duration::from_micros(50),
            single_pass: false,
            budget: Duration::from_secs(5),
        }
    }

    fn workload() -> Workload {
        let packets = Source::Generated.load(64).unwrap();
        Workload::new("hot", &packets, 64)
    }

    fn pick(names: &[&str]) -> Vec<&'static Engine> {
        names.iter().map(|n| engines::find(n).unwrap()).collect()
    }

    #[test]
    fn engines_agree_and_are_timed() {
        let c = match compiled("tcp port 22", "tcp port 22") {
            Ok(c) => c,
            Err(e) => return println!("SKIPPED: engines_agree_and_are_timed: {e}"),
        };
        let selected =
            pick(&["reference", "cbpf/pcap", "interp/pcap", "jit/pcap", "libpcap", "touch"]);
        let rows = measure(&c, &selected, &mut workload(), &small_plan(), 1).unwrap();
        assert_eq!(rows.len(), selected.len());
        let matches: Vec<Option<usize>> =
            rows.iter().map(|r| r.outcome.as_ref().unwrap().matches).collect();
        let reference = matches[0].unwrap();
        assert!(reference > 0 && reference < 64, "{reference} of 64 packets match");
        assert_eq!(&matches[..5], &[Some(reference); 5]);
        assert_eq!(matches[5], None, "the baseline has no verdicts");
        assert!(rows.iter().all(|r| r.outcome.as_ref().unwrap().ns > 0.0));
    }

    #[test]
    fn a_disagreement_stops_the_filter_before_timing() {
        // libpcap's program is for another filter: every engine fed it disagrees with weir.
        let c = match compiled("tcp port 22", "udp") {
            Ok(c) => c,
            Err(e) => return println!("SKIPPED: a_disagreement_stops_the_filter: {e}"),
        };
        let err = measure(&c, &pick(&["reference", "libpcap"]), &mut workload(), &small_plan(), 1)
            .err()
            .unwrap();
        assert!(err.starts_with("MISMATCH: `libpcap` disagrees with `reference`"), "{err}");
    }

    #[test]
    fn engines_that_cannot_prepare_are_skipped_rows() {
        let c = Compiled {
            bench: BenchFilter::plain("ip"),
            unoptimized: Err("not supported: x".into()),
            optimized: Err("not supported: x".into()),
            pcap: Err("libpcap not found".into()),
        };
        let rows = measure(&c, &pick(&["reference", "libpcap"]), &mut workload(), &small_plan(), 1)
            .unwrap();
        let reasons: Vec<&str> =
            rows.iter().map(|r| r.outcome.as_ref().err().unwrap().as_str()).collect();
        assert_eq!(reasons, ["not supported: x", "libpcap not found"]);
    }
}
