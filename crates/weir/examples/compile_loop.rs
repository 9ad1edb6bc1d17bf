//! Compiles one filter to the optimized IR over and over, for `perf` (issue 13's small
//! filter compile against `pcap_compile`): `cargo run --release -p weir --example
//! compile_loop -- 'port 22' [SECONDS]` prints microseconds per compile, median and minimum
//! of short rounds, and each phase alone (parse, lower, the libpcap rejects-all check,
//! optimize). A third argument names one phase to run alone for SECONDS (for `perf`).

use std::time::Instant;

use weir::{FilterOptions, NameDb};
use weir_pflang::LinkType;

/// One phase of the compile path, timed alone.
type Phase<'a> = (&'static str, Box<dyn Fn() + 'a>);

/// One pass of the optimizer, as the library exposes it.
type Pass = (&'static str, fn(&weir_filter::Filter) -> weir_filter::Filter);

fn rounds(seconds: f64, mut f: impl FnMut()) -> (f64, f64) {
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 31 || start.elapsed().as_secs_f64() < seconds {
        let t = Instant::now();
        for _ in 0..50 {
            f();
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6 / 50.0);
    }
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], samples[0])
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let expr = args.first().cloned().unwrap_or_else(|| "port 22".to_string());
    let seconds: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0.5);
    let names = NameDb::system();
    let options = FilterOptions::new(LinkType::Ethernet);
    if let Err(e) = weir::compile_filter_with(&expr, &options, &names) {
        eprintln!("{expr}: {e}");
        std::process::exit(1);
    }
    let only = args.get(2).cloned();
    let (median, min) = rounds(if only.is_some() { 0.0 } else { seconds }, || {
        std::hint::black_box(weir::compile_filter_with(&expr, &options, &names).ok());
    });
    println!("{expr}: whole {median:.1} us (min {min:.1})");
    let lower_options = weir_pflang::Options::new(LinkType::Ethernet);
    let Ok(ast) = weir_pflang::parse(&expr) else { return };
    let Ok(lowered) = weir_pflang::lower_with_facts(ast.as_ref(), &lower_options, &names) else {
        return;
    };
    let phases: [Phase<'_>; 4] = [
        ("parse", Box::new(|| drop(std::hint::black_box(weir_pflang::parse(&expr).ok())))),
        (
            "lower",
            Box::new(|| {
                let lowered = weir_pflang::lower_with_facts(ast.as_ref(), &lower_options, &names);
                drop(std::hint::black_box(lowered.ok()));
            }),
        ),
        (
            "rejects-all",
            Box::new(|| {
                std::hint::black_box(weir_pflang::libpcap_rejects_all(&lowered));
            }),
        ),
        (
            "optimize",
            Box::new(|| {
                let filter = lowered.filter.clone();
                drop(std::hint::black_box(weir_filter::opt::optimize_owned(filter)));
            }),
        ),
    ];
    for (name, f) in phases {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let (median, min) = rounds(if only.is_some() { seconds } else { seconds / 4.0 }, f);
        println!("  {name:<12} {median:>7.1} us (min {min:.1})");
    }
    if only.is_none() {
        passes(&lowered.filter, seconds / 4.0);
    }
}

/// The optimizer's passes in the order its fixed-point loop runs them on a small filter,
/// each timed alone from the input the pass before gave (each includes a copy of its
/// input: the public passes borrow the filter). The loop's own sequence: round 1 is
/// simplify with factoring, decide, insert_guards, decide again when a guard was added,
/// simplify; round 2 stops after its first simplify when that changes nothing.
fn passes(lowered: &weir_filter::Filter, seconds: f64) {
    use weir_filter::opt;
    let copy = rounds(seconds, || drop(std::hint::black_box(lowered.clone()))).0;
    println!("  optimize, pass by pass (copying the input: {copy:.1} us, included in each):");
    let mut f = lowered.clone();
    for round in 1..=3 {
        let steps: [Pass; 5] = [
            ("simplify+factor", opt::simplify_factoring),
            ("decide", opt::decide),
            ("insert_guards", opt::insert_guards),
            ("decide", opt::decide),
            ("simplify", opt::simplify),
        ];
        let start = f.clone();
        for (name, pass) in steps {
            let out = pass(&f);
            let (median, _) = rounds(seconds, || drop(std::hint::black_box(pass(&f))));
            let same = if out == f { "unchanged" } else { "changed" };
            println!("    round {round} {name:<16} {median:>7.1} us  {same}");
            f = out;
        }
        if f == start {
            break;
        }
    }
}
