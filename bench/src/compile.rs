//! `weir-bench compile`: how long compiling a filter takes, weir (parse + lower + optimize,
//! then each emitter) against libpcap's `pcap_compile` with its optimizer, per filter of
//! the list; then the large-set scaling, `host a or host b or ...` with 100 to 10,000 terms.
//!
//! libpcap's optimizer takes time that grows about with the cube of the number of terms
//! (seconds at 500, most of a minute at 800 on a current machine), so each libpcap figure is
//! predicted from the previous size first and skipped, with the reason printed, when the
//! prediction exceeds the time budget.

use std::time::{Duration, Instant};

use weir_pflang::names::NameDb;
use weir_pflang::LinkType;
use weir_sys::libpcap;

use crate::filterlist::{self, BenchFilter};
use crate::filters::compile_weir;
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
        "median per compile of up to {rounds} samples; weir = parse + lower + optimize (IR), \
         ->cBPF / ->eBPF add that emitter; libpcap = pcap_compile with its optimizer; compiling \
         to native code (the native and jit engines) is not in these figures"
    ));
    for note in &notes {
        eprintln!("{note}");
    }

    log.line(format!(
        "{:>10} {:>10} {:>10} {:>11} {:>8}  filter",
        "weir us", "->cBPF us", "->eBPF us", "libpcap us", "x pcap"
    ));
    let us = |s: &Samples| s.median() / 1_000.0;
    for (i, f) in list.iter().enumerate() {
        let c = measure(f, &names, rounds, per_filter, pcap_state.is_ok());
        let label = format!("[{}] {}", i + 1, f.label);
        let cell = |r: &Result<Samples, String>| {
            r.as_ref().map_or("-".to_string(), |s| format!("{:.1}", us(s)))
        };
        let ratio = match (&c.weir, &c.pcap) {
            (Ok(w), Ok(p)) => ratio(w.median() / p.median()),
            _ => "-".into(),
        };
        log.line(format!(
            "{:>10} {:>10} {:>10} {:>11} {:>8}  {label}",
            cell(&c.weir),
            cell(&c.cbpf),
            cell(&c.ebpf),
            cell(&c.pcap),
            ratio
        ));
        for (what, r) in
            [("weir", &c.weir), ("->cBPF", &c.cbpf), ("->eBPF", &c.ebpf), ("libpcap", &c.pcap)]
        {
            if let Err(e) = r {
                log.line(format!("{:>10}  {what} skipped: {e}", ""));
            }
        }
    }

    log.line("");
    log.line("large host sets: `host a or host b or ...`, ms per compile");
    log.line(format!(
        "{:>7} {:>10} {:>10} {:>11} {:>8}  samples (weir, libpcap)",
        "terms", "weir ms", "->eBPF ms", "libpcap ms", "x pcap"
    ));
    let ms = |s: &Samples| format!("{:.2}", s.median() / 1e6);
    // (terms, seconds) of the last libpcap compile, for predicting the next.
    let mut last_pcap: Option<(usize, f64)> = None;
    for &n in &terms {
        let f = BenchFilter::host_set(n);
        let weir = time_weir(&f, &names, rounds, budget, true);
        let weir_ir = time_weir(&f, &names, rounds, budget, false);
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
            "{n:>7} {:>10} {:>10} {:>11} {:>8}  {}, {}",
            weir_ir.as_ref().map_or("-".into(), ms),
            weir.as_ref().map_or("-".into(), ms),
            pcap.as_ref().map_or("-".into(), ms),
            ratio,
            count(&weir_ir),
            count(&pcap)
        ));
        for (what, r) in [("weir", &weir_ir), ("->eBPF", &weir), ("libpcap", &pcap)] {
            if let Err(e) = r {
                log.line(format!("{:>7}  {what} skipped: {e}", ""));
            }
        }
    }
    if args.record {
        let path = record::write("compile", command, &notes, &log.lines)?;
        println!("recorded {}", path.display());
    }
    Ok(true)
}

struct CompileFigures {
    weir: Result<Samples, String>,
    cbpf: Result<Samples, String>,
    ebpf: Result<Samples, String>,
    pcap: Result<Samples, String>,
}

fn measure(
    f: &BenchFilter,
    names: &NameDb,
    rounds: usize,
    budget: Duration,
    pcap: bool,
) -> CompileFigures {
    let linktype = LinkType::Ethernet;
    let pipeline = |emit: u8| {
        time_calls(rounds, budget, || -> Result<(), String> {
            let (_, optimized) = compile_weir(&f.expr, linktype, names)?;
            match emit {
                1 => weir_filter::emit::cbpf::emit(&optimized).map(drop).map_err(|e| e.to_string()),
                2 => {
                    weir_filter::emit::ebpf::emit(&optimized, weir_program::ProgType::SocketFilter)
                        .map(drop)
                        .map_err(|e| e.to_string())
                }
                _ => Ok(()),
            }
        })
    };
    let result = |(samples, first): (Samples, Result<(), String>)| first.map(|()| samples);
    let weir = result(pipeline(0));
    // The emitters are timed only when the filter compiles at all.
    let (cbpf, ebpf) = match &weir {
        Ok(_) => (result(pipeline(1)), result(pipeline(2))),
        Err(e) => (Err(e.clone()), Err(e.clone())),
    };
    let pcap = match libpcap::load() {
        Ok(lib) if pcap => {
            result(time_calls(rounds, budget, || lib.compile(&f.expr, 1, true).map(drop)))
        }
        _ => Err("libpcap not loaded".into()),
    };
    CompileFigures { weir, cbpf, ebpf, pcap }
}

fn time_weir(
    f: &BenchFilter,
    names: &NameDb,
    rounds: usize,
    budget: Duration,
    emit: bool,
) -> Result<Samples, String> {
    let (samples, first) = time_calls(rounds, budget, || -> Result<(), String> {
        let (_, optimized) = compile_weir(&f.expr, LinkType::Ethernet, names)?;
        if emit {
            weir_filter::emit::ebpf::emit(&optimized, weir_program::ProgType::SocketFilter)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    first.map(|()| samples)
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
