//! `weir-bench interp`: weir's eBPF interpreter against rbpf's, on four small programs
//! (bench/programs/*.s) over one 1,500-byte buffer. Results must agree before either is
//! timed; the ratio is rbpf's time over weir's.

use std::time::Instant;

use weir_interp::{Config, Interpreter};
use weir_program::abi::Bindings;
use weir_program::Program;

use crate::record::{self, Log};

const PROGRAMS: &[(&str, &str)] = &[
    ("byte-sum", include_str!("../programs/byte-sum.s")),
    ("inet-checksum", include_str!("../programs/inet-checksum.s")),
    ("fnv1a-hash", include_str!("../programs/fnv1a-hash.s")),
    ("stack-copy", include_str!("../programs/stack-copy.s")),
];

const PACKET_LEN: usize = 1500;

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

/// Runs the suite; `Ok(false)` when the two interpreters disagree on a program.
pub fn run(rounds: usize, record: bool, command: &str) -> Result<bool, String> {
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let pkt = packet();
    let mut log = Log::default();
    log.line(format!(
        "{:<15} {:>12} {:>12} {:>8}   (ns per run, median of {rounds} rounds)",
        "program", "weir-interp", "rbpf-interp", "ratio"
    ));
    let mut agreed = true;
    for (name, source) in PROGRAMS {
        let insns = weir_isa::asm::assemble(source).map_err(|e| format!("{name}: {e}"))?;
        let program = Program::from_insns(insns);
        let bytes = program.to_bytes();
        let interp = Interpreter::new(&program, Bindings::new(), Config::default())
            .map_err(|e| format!("{name}: {e}"))?;
        let mut cache = interp.cache();
        let mut weir_mem = pkt.clone();
        let mut rbpf_mem = pkt.clone();
        let vm = rbpf::EbpfVmRaw::new(Some(&bytes))
            .map_err(|e| format!("{name}: rbpf refuses the program: {e}"))?;
        let weir_r0 = interp.run_mem(&mut cache, &mut weir_mem);
        let rbpf_r0 = vm.execute_program(&mut rbpf_mem);
        match (&weir_r0, &rbpf_r0) {
            (Ok(a), Ok(b)) if a == b => {}
            _ => {
                eprintln!("{name}: results differ: weir {weir_r0:?}, rbpf {rbpf_r0:?}");
                agreed = false;
                continue;
            }
        }
        let inner = 200;
        let weir_ns =
            time_median(rounds, inner, || interp.run_mem(&mut cache, &mut weir_mem).unwrap_or(0));
        let rbpf_ns = time_median(rounds, inner, || vm.execute_program(&mut rbpf_mem).unwrap_or(0));
        log.line(format!("{name:<15} {weir_ns:>12.0} {rbpf_ns:>12.0} {:>7.2}x", rbpf_ns / weir_ns));
    }
    if agreed && record {
        let notes = ["ratio = rbpf time / weir time".to_string()];
        let path = record::write("interp", command, &notes, &log.lines)?;
        println!("recorded {}", path.display());
    }
    Ok(agreed)
}
