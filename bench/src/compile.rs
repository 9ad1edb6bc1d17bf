//! `weir-bench compile`: how long compiling a filter takes, weir (the facade's compile path:
//! parse, lower, libpcap's "rejects all packets" check, optimize; then each emitter, and
//! native code) against libpcap's `pcap_compile` with its optimizer, per filter of the list;
//! then the large-set scaling, `host a or host b or ...` with 100 to 10,000 terms; then issue
//! 13's firewall list (`not (not (host A1 and port P1) and ...)`) from 100 to 100,000 pairs,
//! in process per phase and as whole `weir` processes (wall time and maximum resident set
//! size from wait4), optionally against an older `weir` binary in the same run.
//!
//! libpcap's optimizer takes time that grows about with the cube of the number of terms
//! (seconds at 500, most of a minute at 800 on a current machine), so each libpcap figure is
//! predicted from the previous size first and skipped, with the reason printed, when the
//! prediction exceeds the time budget.

use crate::record::say;
use std::time::{Duration, Instant};

use weir_pflang::names::NameDb;
use weir_pflang::LinkType;
use weir_sys::libpcap;

use crate::filterlist::{self, BenchFilter};
use crate::record::{self, Log};
use crate::timing::{time_calls, Samples};

/// `weir-bench compile` options.
#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// Sizes of the `host a or host b or ...` scaling test (default 100 800 10000; 20 100
    /// with --quick).
    #[arg(long, num_args = 1.., value_delimiter = ',', value_name = "N")]
    pub terms: Vec<usize>,
    /// Samples per figure, at most (default 21; 3 with --quick).
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// Seconds one figure may take; libpcap sizes predicted to take longer are skipped
    /// (default 120; 2 with --quick). Each filter of the list gets a sixth of it.
    #[arg(long, value_name = "SECS")]
    pub budget: Option<f64>,
    /// Smoke mode: few samples, small sets, small budget.
    #[arg(long)]
    pub quick: bool,
    /// Write bench/records/<date>-compile.txt.
    #[arg(long)]
    pub record: bool,
    /// Sizes of the firewall list (default 100 1000 10000 100000; 100 1000 with --quick).
    #[arg(long, num_args = 1.., value_delimiter = ',', value_name = "N")]
    pub pairs: Vec<usize>,
    /// The `weir` binary timed as a whole process (default: target/release/weir).
    #[arg(long, value_name = "PATH")]
    pub weir: Option<std::path::PathBuf>,
    /// An older `weir` binary to time beside it, on lists of up to --old-max-pairs pairs.
    #[arg(long, value_name = "PATH")]
    pub old_weir: Option<std::path::PathBuf>,
    /// The largest firewall list given to --old-weir (default 10000).
    #[arg(long, value_name = "N")]
    pub old_max_pairs: Option<usize>,
    /// Filters to compile (default: bench/filters.txt).
    pub filters: Vec<String>,
}

/// The exponent libpcap's compile time is predicted with (measured here: 100 -> 500 -> 800
/// terms took 0.06 s -> 8.4 s -> 38 s, an exponent of about 3.1).
const PCAP_GROWTH: f64 = 3.0;

pub fn run(args: &CompileArgs, command: &str) -> Result<bool, String> {
    let rounds = args.rounds.unwrap_or(if args.quick { 3 } else { 21 }).max(1);
    let budget =
        Duration::from_secs_f64(args.budget.unwrap_or(if args.quick { 2.0 } else { 120.0 }));
    let per_filter = budget / 6;
    let terms = if args.terms.is_empty() {
        if args.quick {
            vec![20, 100]
        } else {
            vec![100, 800, 10_000]
        }
    } else {
        let mut t = args.terms.clone();
        t.sort_unstable();
        t.dedup();
        t
    };
    let list = filterlist::filters(&args.filters, args.quick)?;
    let names = NameDb::system();
    let pcap_state = libpcap::available();
    let mut log = Log::default();
    let mut notes = Vec::new();
    if let Err(e) = &pcap_state {
        notes.push(format!("libpcap: {e}"));
    }
    if record::profile() == "debug" {
        notes.push("WARNING: debug build; use --release for figures that mean anything".into());
    }
    notes.push(format!(
        "median per compile of up to {rounds} samples; weir = weir::compile_filter_with (parse, \
         lower, libpcap's rejects-all check, optimize: the IR `weir filter` runs), ->cBPF / \
         ->eBPF / ->native add that emitter (native: weir_jit::filter::compile, Cranelift); \
         libpcap = pcap_compile with its optimizer"
    ));
    for note in &notes {
        eprintln!("{note}");
    }

    log.line(format!(
        "{:>10} {:>10} {:>10} {:>11} {:>11} {:>8} {:>9}  filter",
        "weir us", "->cBPF us", "->eBPF us", "->native us", "libpcap us", "x pcap", "native x"
    ));
    let us = |s: &Samples| s.median() / 1_000.0;
    // libpcap's in-process compile time per filter, to leave out of the process table the
    // filters tcpdump would take seconds on.
    let mut pcap_ns = Vec::new();
    for (i, f) in list.iter().enumerate() {
        let c = measure(f, &names, rounds, per_filter, pcap_state.is_ok());
        pcap_ns.push(c.pcap.as_ref().ok().map(Samples::median));
        let label = format!("[{}] {}", i + 1, f.label);
        let cell = |r: &Result<Samples, String>| {
            r.as_ref().map_or("-".to_string(), |s| format!("{:.1}", us(s)))
        };
        let ratio_to_pcap = |r: &Result<Samples, String>| match (r, &c.pcap) {
            (Ok(w), Ok(p)) => ratio(w.median() / p.median()),
            _ => "-".into(),
        };
        log.line(format!(
            "{:>10} {:>10} {:>10} {:>11} {:>11} {:>8} {:>9}  {label}",
            cell(&c.weir),
            cell(&c.cbpf),
            cell(&c.ebpf),
            cell(&c.native),
            cell(&c.pcap),
            ratio_to_pcap(&c.weir),
            ratio_to_pcap(&c.native),
        ));
        for (what, r) in [
            ("weir", &c.weir),
            ("->cBPF", &c.cbpf),
            ("->eBPF", &c.ebpf),
            ("->native", &c.native),
            ("libpcap", &c.pcap),
        ] {
            if let Err(e) = r {
                log.line(format!("{:>10}  {what} skipped: {e}", ""));
            }
        }
    }

    compile_processes(args, &list, &pcap_ns, &mut log, &mut notes);

    log.line("");
    log.line("large host sets: `host a or host b or ...`, ms per compile");
    log.line(format!(
        "{:>7} {:>10} {:>10} {:>11} {:>11} {:>8}  samples (weir, libpcap)",
        "terms", "weir ms", "->eBPF ms", "->native ms", "libpcap ms", "x pcap"
    ));
    let ms = |s: &Samples| format!("{:.2}", s.median() / 1e6);
    // (terms, seconds) of the last libpcap compile, for predicting the next.
    let mut last_pcap: Option<(usize, f64)> = None;
    for &n in &terms {
        let f = BenchFilter::host_set(n);
        let weir = time_weir(&f, &names, rounds, budget, Emit::Ebpf);
        let weir_ir = time_weir(&f, &names, rounds, budget, Emit::None);
        let native = time_weir(&f, &names, rounds, budget, Emit::Native);
        let pcap = if pcap_state.is_err() {
            Err("libpcap not loaded".to_string())
        } else {
            time_pcap_scaled(&f, n, rounds, budget, &mut last_pcap)
        };
        let ratio = match (&weir_ir, &pcap) {
            (Ok(w), Ok(p)) => ratio(w.median() / p.median()),
            _ => "-".into(),
        };
        let count = |r: &Result<Samples, String>| r.as_ref().map_or(0, Samples::len);
        log.line(format!(
            "{n:>7} {:>10} {:>10} {:>11} {:>11} {:>8}  {}, {}",
            weir_ir.as_ref().map_or("-".into(), ms),
            weir.as_ref().map_or("-".into(), ms),
            native.as_ref().map_or("-".into(), ms),
            pcap.as_ref().map_or("-".into(), ms),
            ratio,
            count(&weir_ir),
            count(&pcap)
        ));
        for (what, r) in
            [("weir", &weir_ir), ("->eBPF", &weir), ("->native", &native), ("libpcap", &pcap)]
        {
            if let Err(e) = r {
                log.line(format!("{:>7}  {what} skipped: {e}", ""));
            }
        }
    }
    firewall(args, &names, &mut log, &mut notes)?;
    if args.record {
        let path = record::write("compile", command, &notes, &log.lines)?;
        say!("recorded {}", path.display());
    }
    Ok(true)
}

struct CompileFigures {
    weir: Result<Samples, String>,
    cbpf: Result<Samples, String>,
    ebpf: Result<Samples, String>,
    native: Result<Samples, String>,
    pcap: Result<Samples, String>,
}

/// What follows the IR compile in a timed call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Emit {
    None,
    Cbpf,
    Ebpf,
    Native,
}

/// The facade's compile path, as `weir filter` runs it (the Ethernet link type).
fn compile_ir(expr: &str, names: &NameDb) -> Result<weir_filter::Filter, String> {
    weir::compile_filter_with(expr, &weir::FilterOptions::new(LinkType::Ethernet), names)
        .map_err(|e| e.render(expr).lines().next().unwrap_or("").to_string())
}

/// One compile: the IR, then `emit`'s output (dropped).
fn compile_once(expr: &str, names: &NameDb, emit: Emit) -> Result<(), String> {
    let ir = compile_ir(expr, names)?;
    match emit {
        Emit::None => Ok(()),
        Emit::Cbpf => weir_filter::emit::cbpf::emit(&ir).map(drop).map_err(|e| e.to_string()),
        Emit::Ebpf => weir::emit_ebpf(&ir, weir_program::ProgType::SocketFilter).map(drop),
        Emit::Native => weir_jit::filter::compile(&ir).map(drop).map_err(|e| e.to_string()),
    }
}

fn measure(
    f: &BenchFilter,
    names: &NameDb,
    rounds: usize,
    budget: Duration,
    pcap: bool,
) -> CompileFigures {
    let pipeline = |emit: Emit| time_calls(rounds, budget, || compile_once(&f.expr, names, emit));
    let result = |(samples, first): (Samples, Result<(), String>)| first.map(|()| samples);
    let weir = result(pipeline(Emit::None));
    // The emitters are timed only when the filter compiles at all.
    let (cbpf, ebpf, native) = match &weir {
        Ok(_) => (
            result(pipeline(Emit::Cbpf)),
            result(pipeline(Emit::Ebpf)),
            result(pipeline(Emit::Native)),
        ),
        Err(e) => (Err(e.clone()), Err(e.clone()), Err(e.clone())),
    };
    let pcap = match libpcap::load() {
        Ok(lib) if pcap => {
            result(time_calls(rounds, budget, || lib.compile(&f.expr, 1, true).map(drop)))
        }
        _ => Err("libpcap not loaded".into()),
    };
    CompileFigures { weir, cbpf, ebpf, native, pcap }
}

fn time_weir(
    f: &BenchFilter,
    names: &NameDb,
    rounds: usize,
    budget: Duration,
    emit: Emit,
) -> Result<Samples, String> {
    let (samples, first) = time_calls(rounds, budget, || compile_once(&f.expr, names, emit));
    first.map(|()| samples)
}

/// Issue 13's firewall list from 100 to 100,000 pairs: per phase in this process (one
/// compile each: the large ones take seconds), then as whole `weir` processes.
fn firewall(
    args: &CompileArgs,
    names: &NameDb,
    log: &mut Log,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let mut pairs = if !args.pairs.is_empty() {
        args.pairs.clone()
    } else if args.quick {
        vec![100, 1_000]
    } else {
        vec![100, 1_000, 10_000, 100_000]
    };
    pairs.sort_unstable();
    pairs.dedup();
    let budget = args.budget.unwrap_or(if args.quick { 2.0 } else { 120.0 });
    log.line("");
    log.line(
        "firewall list `not (not (host A1 and port P1) and not (host A2 and port P2) and ...)`, \
         in process, ms (one compile each)",
    );
    log.line(format!(
        "{:>7} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9} {:>10}",
        "pairs",
        "IR nodes",
        "lower ms",
        "rejects ms",
        "opt ms",
        "nodes",
        "->eBPF ms",
        "->native ms"
    ));
    // Seconds per optimized node of the last native compile, to skip one predicted to run
    // past the budget.
    let mut native_rate: Option<f64> = None;
    for &n in &pairs {
        let f = BenchFilter::firewall(n);
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
        let start = Instant::now();
        let ast = weir_pflang::parse(&f.expr).map_err(|e| e.to_string())?;
        let lowered = weir_pflang::lower_with_facts(
            ast.as_ref(),
            &weir_pflang::Options::new(LinkType::Ethernet),
            names,
        )
        .map_err(|e| e.to_string())?;
        let lower = start.elapsed();
        let before = weir_filter::opt::node_count(&lowered.filter.pred);
        let start = Instant::now();
        let refused = weir_pflang::libpcap_rejects_all(&lowered);
        let rejects = start.elapsed();
        let start = Instant::now();
        let optimized = weir_filter::opt::optimize_owned(lowered.filter);
        let opt = start.elapsed();
        let after = weir_filter::opt::node_count(&optimized.pred);
        let start = Instant::now();
        let ebpf = weir::emit_ebpf(&optimized, weir_program::ProgType::SocketFilter)
            .map(|p| format!("{} ({} insns)", ms(start.elapsed()), p.insns().len()));
        let predicted = native_rate.map_or(0.0, |r| r * after as f64);
        let native = if predicted > budget {
            Err(format!("skipped: about {predicted:.0} s predicted, over the budget"))
        } else {
            let start = Instant::now();
            let r = weir_jit::filter::compile(&optimized).map(drop).map_err(|e| e.to_string());
            let secs = start.elapsed().as_secs_f64();
            native_rate = Some(secs / after.max(1) as f64);
            r.map(|()| format!("{:.1}", secs * 1e3))
        };
        log.line(format!(
            "{n:>7} {before:>10} {:>9} {:>11} {:>9} {after:>9} {:>9} {:>10}{}",
            ms(lower),
            ms(rejects),
            ms(opt),
            ebpf.as_deref().unwrap_or("-"),
            native.as_deref().unwrap_or("-"),
            if refused { "  (rejects all packets)" } else { "" }
        ));
        for (what, r) in [("->eBPF", &ebpf), ("->native", &native)] {
            if let Err(e) = r {
                log.line(format!("{:>7}  {what}: {e}", ""));
            }
        }
    }
    processes(args, &pairs, log, notes)
}

/// The `weir` binary timed as whole processes: --weir, or target/release/weir beside this
/// benchmark.
fn weir_binary(args: &CompileArgs) -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where is weir-bench? {e}"))?;
    let default = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|t| t.join("release").join("weir"))
        .unwrap_or_else(|| "weir".into());
    Ok(args.weir.clone().unwrap_or(default))
}

/// Whole processes per filter of the list, as a user compares them: `weir compile -d EXPR`
/// (and the --old-weir binary's) beside `tcpdump -d EXPR` (libpcap's compile and optimizer
/// behind tcpdump's start-up; it assumes Ethernet without an interface, as weir does).
/// Median wall time of a few interleaved runs each, process start included, and the
/// listings' lengths (classic instructions) from the same runs. Filters libpcap takes over
/// 100 ms on in process (the large host set) are left out.
fn compile_processes(
    args: &CompileArgs,
    list: &[BenchFilter],
    pcap_ns: &[Option<f64>],
    log: &mut Log,
    notes: &mut Vec<String>,
) {
    const RUNS: usize = 7;
    let weir = match weir_binary(args) {
        Ok(w) if w.exists() => w,
        _ => {
            notes.push("no weir binary: the whole-process compile rows are skipped".into());
            return;
        }
    };
    let tcpdump = std::path::PathBuf::from("/usr/bin/tcpdump");
    let have_tcpdump = tcpdump.exists();
    if !have_tcpdump {
        notes.push("no /usr/bin/tcpdump: the whole-process rows have no tcpdump column".into());
    }
    let mut binaries = vec![("new", weir)];
    if let Some(old) = &args.old_weir {
        binaries.push(("old", old.clone()));
    }
    log.line("");
    log.line(format!(
        "whole processes, ms (median of {RUNS} interleaved runs, in turn, process start included): \
         weir = `weir compile -d EXPR`{}, tcpdump = `tcpdump -d EXPR`; insns = lines of each \
         listing",
        if binaries.len() > 1 { ", old = the same with --old-weir" } else { "" }
    ));
    log.line(format!(
        "{:>9} {:>9} {:>10} {:>10} {:>13}  filter",
        "weir ms",
        if binaries.len() > 1 { "old ms" } else { "" },
        "tcpdump ms",
        "x tcpdump",
        "insns w/tcpd"
    ));
    for (i, f) in list.iter().enumerate() {
        if pcap_ns.get(i).copied().flatten().is_some_and(|ns| ns > 1e8) {
            continue;
        }
        let expr: std::ffi::OsString = f.expr.clone().into();
        let mut walls: Vec<Vec<f64>> = vec![Vec::new(); binaries.len() + 1];
        let mut lengths: Vec<Option<usize>> = vec![None; binaries.len() + 1];
        let mut failed: Vec<String> = Vec::new();
        for run in 0..RUNS {
            let mut runs: Vec<(usize, &std::path::Path, Vec<std::ffi::OsString>)> = binaries
                .iter()
                .enumerate()
                .map(|(k, (_, b))| {
                    (k, b.as_path(), vec!["compile".into(), "-d".into(), expr.clone()])
                })
                .collect();
            if have_tcpdump {
                runs.push((binaries.len(), tcpdump.as_path(), vec!["-d".into(), expr.clone()]));
            }
            // Each run starts with another program: none is always the first after a pause.
            let n = runs.len();
            runs.rotate_left(run % n);
            for (k, bin, argv) in runs {
                let mut cmd = std::process::Command::new(bin);
                cmd.args(&argv);
                match crate::e2e::timed(&mut cmd) {
                    Ok(run) => {
                        walls[k].push(run.wall.as_secs_f64() * 1e3);
                        lengths[k] = Some(run.stdout.lines().count());
                    }
                    Err(e) => failed.push(format!("{}: {e}", bin.display())),
                }
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        let meds: Vec<Option<f64>> = walls.iter_mut().map(median).collect();
        let cell = |m: Option<f64>| m.map_or("-".to_string(), |m| format!("{m:.2}"));
        let tcpd = meds.last().copied().flatten().filter(|_| have_tcpdump);
        let new = meds.first().copied().flatten();
        let x = match (new, tcpd) {
            (Some(w), Some(t)) => ratio(w / t),
            _ => "-".into(),
        };
        let len =
            |k: usize| lengths.get(k).copied().flatten().map_or("-".into(), |n| n.to_string());
        log.line(format!(
            "{:>9} {:>9} {:>10} {:>10} {:>13}  [{}] {}",
            cell(new),
            if binaries.len() > 1 { cell(meds.get(1).copied().flatten()) } else { String::new() },
            cell(tcpd),
            x,
            format!("{}/{}", len(0), len(binaries.len())),
            i + 1,
            f.label
        ));
        failed.dedup();
        for e in failed {
            log.line(format!("{:>9}  failed: {e}", ""));
        }
    }
}

/// The firewall lists through whole `weir` processes: `weir filter -F LIST -r sample.pcap
/// --count` (the engine weir picks: large filters start on the evaluator while their native
/// code compiles), the same with `--engine native` (native code before the first packet),
/// and `weir compile --ebpf -F LIST -o /dev/null`. Wall time and maximum RSS per process
/// ([`measured`]), one run each.
fn processes(
    args: &CompileArgs,
    pairs: &[usize],
    log: &mut Log,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let weir = weir_binary(args)?;
    if !weir.exists() {
        notes.push(format!(
            "no weir binary at {} (cargo build --release -p weir-cli, or --weir PATH): the \
             process rows are skipped",
            weir.display()
        ));
        return Ok(());
    }
    let mut binaries = vec![("new", weir)];
    if let Some(old) = &args.old_weir {
        binaries.push(("old", old.clone()));
    }
    let old_max = args.old_max_pairs.unwrap_or(10_000);
    let capture = weir_testkit::sample_capture_path();
    log.line("");
    log.line(
        "firewall list as whole processes: wall ms / max RSS MB (one run each); filter = \
         `weir filter -F LIST -r sample.pcap --count`, native = the same with --engine native, \
         ebpf = `weir compile --ebpf -F LIST -o /dev/null`",
    );
    log.line(format!(
        "{:>7} {:>4} {:>18} {:>18} {:>18}",
        "pairs", "weir", "filter", "native", "ebpf"
    ));
    for &n in pairs {
        let f = BenchFilter::firewall(n);
        let list = std::env::temp_dir().join(format!("weir-bench-firewall-{n}.txt"));
        std::fs::write(&list, &f.expr).map_err(|e| format!("{}: {e}", list.display()))?;
        let mut counts = Vec::new();
        for (name, bin) in &binaries {
            if *name == "old" && n > old_max {
                log.line(format!("{n:>7} {name:>4}  skipped: over --old-max-pairs {old_max}"));
                continue;
            }
            let cell = |r: &Result<crate::e2e::Run, String>| match r {
                Ok(run) => format!("{:.0} / {:.0}", run.wall.as_secs_f64() * 1e3, mib(run)),
                Err(_) => "failed".to_string(),
            };
            let filter = |engine: Option<&str>| {
                let mut args: Vec<std::ffi::OsString> = vec!["filter".into(), "-F".into()];
                args.extend([list.clone().into(), "-r".into(), capture.clone().into()]);
                args.push("--count".into());
                if let Some(e) = engine {
                    args.extend(["--engine".into(), e.into()]);
                }
                measured(bin, &args)
            };
            let any = filter(None);
            let native = filter(Some("native"));
            let mut args: Vec<std::ffi::OsString> =
                ["compile", "--ebpf", "-o", "/dev/null", "-F"].iter().map(Into::into).collect();
            args.push(list.clone().into());
            let ebpf = measured(bin, &args);
            log.line(format!(
                "{n:>7} {name:>4} {:>18} {:>18} {:>18}",
                cell(&any),
                cell(&native),
                cell(&ebpf)
            ));
            for (what, r) in [("filter", &any), ("native", &native), ("ebpf", &ebpf)] {
                match r {
                    Err(e) => log.line(format!("{:>7}  {what}: {e}", "")),
                    Ok(run) if what != "ebpf" => counts.push(run.stdout.trim().to_string()),
                    Ok(_) => {}
                }
            }
        }
        counts.dedup();
        if counts.len() > 1 {
            log.line(format!("{n:>7}  the counts differ: {counts:?}"));
        }
        let _ = std::fs::remove_file(&list);
    }
    Ok(())
}

fn mib(run: &crate::e2e::Run) -> f64 {
    run.max_rss_kib as f64 / 1024.0
}

/// `bin args` as one timed process. Its maximum resident set size comes from /usr/bin/time
/// (GNU time's `%M`) when it is installed: Linux keeps a process's peak across `execve`, so
/// a child spawned straight from this (large) benchmark would report the benchmark's own
/// memory; time forks it from a small process. Without time, wait4's figure is kept.
fn measured(bin: &std::path::Path, args: &[std::ffi::OsString]) -> Result<crate::e2e::Run, String> {
    const TIME: &str = "/usr/bin/time";
    if !std::path::Path::new(TIME).exists() {
        let mut cmd = std::process::Command::new(bin);
        cmd.args(args);
        return crate::e2e::timed(&mut cmd);
    }
    let report = std::env::temp_dir().join(format!("weir-bench-rss-{}", std::process::id()));
    let mut cmd = std::process::Command::new(TIME);
    cmd.arg("-f").arg("%M").arg("-o").arg(&report).arg(bin).args(args);
    let mut run = crate::e2e::timed(&mut cmd)?;
    let text = std::fs::read_to_string(&report).map_err(|e| format!("{TIME}'s report: {e}"))?;
    let _ = std::fs::remove_file(&report);
    run.max_rss_kib = text
        .lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .next_back()
        .ok_or_else(|| format!("{TIME} reported no size: {text:?}"))?;
    Ok(run)
}

/// libpcap on a host set of `n` terms, unless the time predicted from the last size
/// measured exceeds `budget`. Without a smaller size measured yet, 100 terms are measured
/// first to predict from.
fn time_pcap_scaled(
    f: &BenchFilter,
    n: usize,
    rounds: usize,
    budget: Duration,
    last: &mut Option<(usize, f64)>,
) -> Result<Samples, String> {
    let lib = libpcap::load()?;
    if last.is_none() && n > 100 {
        let probe = BenchFilter::host_set(100);
        let start = Instant::now();
        lib.compile(&probe.expr, 1, true)?;
        *last = Some((100, start.elapsed().as_secs_f64()));
    }
    if let Some((m, secs)) = *last {
        let predicted = secs * (n as f64 / m as f64).powf(PCAP_GROWTH);
        if predicted > budget.as_secs_f64() {
            return Err(format!(
                "about {} predicted (libpcap's optimizer grows ~N^3; {secs:.2} s at {m} terms), \
                 over the budget of {:.0} s (--budget SECS)",
                human_secs(predicted),
                budget.as_secs_f64()
            ));
        }
    }
    let (samples, first) = time_calls(rounds, budget, || lib.compile(&f.expr, 1, true).map(drop));
    first?;
    *last = Some((n, samples.median() / 1e9));
    Ok(samples)
}

/// Two decimals, or three significant digits for small ratios (0.000338).
fn ratio(r: f64) -> String {
    if r >= 0.1 || r <= 0.0 || !r.is_finite() {
        format!("{r:.2}")
    } else {
        let decimals = (2.0 - r.log10().floor()) as usize;
        format!("{r:.decimals$}")
    }
}

fn human_secs(s: f64) -> String {
    if s >= 7_200.0 {
        format!("{:.0} h", s / 3_600.0)
    } else if s >= 120.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_keep_three_digits_when_small() {
        assert_eq!(ratio(9.92), "9.92");
        assert_eq!(ratio(0.018), "0.0180");
        assert_eq!(ratio(0.000338), "0.000338");
        assert_eq!(human_secs(133_200.0), "37 h");
        assert_eq!(human_secs(300.0), "5 min");
    }
}
