//! `weir-bench`: times weir's engines against other implementations on the same programs
//! and inputs, in one run, and reports medians and ratios. Results are checked for
//! agreement before anything is timed. A benchmark is not a test: nothing here asserts a
//! speed; `--record` writes a dated record under `bench/records/`.
//!
//! ```text
//! cargo run --release -p weir-bench -- interp            # weir interpreter vs rbpf
//! cargo run --release -p weir-bench -- interp --record   # and keep the figures
//! ```

use std::time::Instant;
use weir_interp::{Config, Interpreter};
use weir_program::abi::Bindings;
use weir_program::Program;

const PROGRAMS: &[(&str, &str)] = &[
    ("byte-sum", include_str!("../programs/byte-sum.s")),
    ("inet-checksum", include_str!("../programs/inet-checksum.s")),
    ("fnv1a-hash", include_str!("../programs/fnv1a-hash.s")),
    ("stack-copy", include_str!("../programs/stack-copy.s")),
];

const PACKET_LEN: usize = 1500;

struct Options {
    rounds: usize,
    record: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut opts = Options { rounds: 25, record: false };
    let mut args = std::env::args().skip(1);
    let mut suite = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => {
                let n = args.next().ok_or("--rounds needs a number")?;
                opts.rounds = n.parse().map_err(|_| format!("--rounds: `{n}` is not a number"))?;
            }
            "--record" => opts.record = true,
            "interp" => suite = Some(arg),
            other => {
                return Err(format!(
                    "unknown argument `{other}` (usage: weir-bench interp [--rounds N] [--record])"
                ))
            }
        }
    }
    if suite.is_none() {
        return Err("usage: weir-bench interp [--rounds N] [--record]".into());
    }
    if opts.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    Ok(opts)
}

/// A deterministic packet: the benchmark must see the same bytes every run.
fn packet() -> Vec<u8> {
    let mut state: u32 = 0x1234_5678;
    (0..PACKET_LEN + 8)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// Median nanoseconds per call over `rounds` rounds; each round runs `inner` calls.
fn time_median(rounds: usize, inner: usize, mut call: impl FnMut() -> u64) -> f64 {
    let mut sink = 0u64;
    for _ in 0..inner {
        sink = sink.wrapping_add(call());
    }
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..inner {
                sink = sink.wrapping_add(call());
            }
            start.elapsed().as_nanos() as f64 / inner as f64
        })
        .collect();
    std::hint::black_box(sink);
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("weir-bench: {e}");
            std::process::exit(2);
        }
    };
    let pkt = packet();
    let mut lines = vec![format!(
        "{:<15} {:>12} {:>12} {:>8}   (ns per run, median of {} rounds)",
        "program", "weir-interp", "rbpf-interp", "ratio", opts.rounds
    )];
    println!("{}", lines[0]);
    let mut failed = false;
    for (name, source) in PROGRAMS {
        let insns = match weir_isa::asm::assemble(source) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(1);
            }
        };
        let program = Program::from_insns(insns);
        let bytes = program.to_bytes();
        let interp = match Interpreter::new(&program, Bindings::new(), Config::default()) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(1);
            }
        };
        let mut cache = interp.cache();
        let mut weir_mem = pkt.clone();
        let mut rbpf_mem = pkt.clone();
        let vm = match rbpf::EbpfVmRaw::new(Some(&bytes)) {
            Ok(vm) => vm,
            Err(e) => {
                eprintln!("{name}: rbpf refuses the program: {e}");
                std::process::exit(1);
            }
        };
        let weir_r0 = interp.run_mem(&mut cache, &mut weir_mem);
        let rbpf_r0 = vm.execute_program(&mut rbpf_mem);
        match (&weir_r0, &rbpf_r0) {
            (Ok(a), Ok(b)) if a == b => {}
            _ => {
                eprintln!("{name}: results differ: weir {weir_r0:?}, rbpf {rbpf_r0:?}");
                failed = true;
                continue;
            }
        }
        let inner = 200;
        let weir_ns = time_median(opts.rounds, inner, || {
            interp.run_mem(&mut cache, &mut weir_mem).unwrap_or(0)
        });
        let rbpf_ns =
            time_median(opts.rounds, inner, || vm.execute_program(&mut rbpf_mem).unwrap_or(0));
        let line =
            format!("{name:<15} {weir_ns:>12.0} {rbpf_ns:>12.0} {:>7.2}x", rbpf_ns / weir_ns);
        println!("{line}");
        lines.push(line);
    }
    if failed {
        std::process::exit(1);
    }
    if opts.record {
        record(&lines);
    }
}

fn record(lines: &[String]) {
    let date = std::process::Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "undated".into());
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("records");
    let path = dir.join(format!("{date}-interp.txt"));
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(str::to_string))
        .unwrap_or_default();
    let text = format!(
        "# weir-bench interp, {date}\n# {cpu}\n# ratio = rbpf time / weir time\n{}\n",
        lines.join("\n")
    );
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
        Ok(()) => println!("recorded {}", path.display()),
        Err(e) => eprintln!("weir-bench: {}: {e}", path.display()),
    }
}
