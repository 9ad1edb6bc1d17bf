//! The interpreter's fixed cost per run, for `perf`: short socket-filter programs (the
//! shapes weir's emitter gives `ip`, `arp`, `less 128`, `greater 1000` and `port 22`, and a
//! two-instruction program that is nearly all fixed cost) run over a few frames, as `weir-bench interp`'s
//! filter table runs them (a `__sk_buff` context and the packet).
//!
//! `cargo run --release -p weir-interp --example per_run [-- NAME [SECONDS [ROUNDS PASSES]]]`
//! prints ns per run and per executed instruction (the interpreter's counter), median and
//! minimum of 301 short rounds of 500 passes over the frames. ROUNDS and PASSES set those two
//! numbers instead, so that a run under `valgrind --tool=callgrind` stays short (each pass is
//! 64 runs, plus one untimed pass first).

use std::time::Instant;

use weir_interp::{Config, Interpreter};
use weir_isa::asm::assemble;
use weir_program::abi::Bindings;
use weir_program::exec::Input;
use weir_program::{ProgType, Program, Verified};

const PROGRAMS: &[(&str, &str)] = &[
    ("empty", "mov32 %r0, 0\nexit"),
    (
        "ip",
        "mov %r6, %r1\nldabsh 12\nmov %r7, %r0\njne32 %r7, 2048, +2\nmov32 %r0, 0x40000\nexit\n\
         mov32 %r0, 0\nexit",
    ),
    (
        "arp",
        "mov %r6, %r1\nldabsh 12\nmov %r7, %r0\njne32 %r7, 2054, +2\nmov32 %r0, 0x40000\nexit\n\
         mov32 %r0, 0\nexit",
    ),
    (
        "less 128",
        "mov %r6, %r1\nldxw %r7, [%r6+0]\njgt32 %r7, 128, +2\nmov32 %r0, 0x40000\nexit\n\
         mov32 %r0, 0\nexit",
    ),
    (
        "greater 1000",
        "mov %r6, %r1\nldxw %r7, [%r6+0]\njlt32 %r7, 1000, +2\nmov32 %r0, 0x40000\nexit\n\
         mov32 %r0, 0\nexit",
    ),
    (
        "port 22",
        "mov %r6, %r1\nmov32 %r0, 0\nmov32 %r7, 0\nldabsh 12\njne %r0, 34525, +9\nldabsb 20\n\
         jeq %r0, 6, +2\njeq %r0, 17, +1\njne %r0, 132, +24\nldabsh 54\njeq %r0, 22, +20\n\
         ldabsh 56\njeq %r0, 22, +18\nja +19\njne %r0, 2048, +18\nldabsb 23\njeq %r0, 6, +2\n\
         jeq %r0, 17, +1\njne %r0, 132, +14\nldabsh 20\njset %r0, 8191, +12\nmov %r8, %r0\n\
         ldabsb 14\nand32 %r0, 15\nlsh32 %r0, 2\nmov32 %r7, %r0\nmov %r0, %r8\nldindh %r7, 14\n\
         jeq %r0, 22, +2\nldindh %r7, 16\njne %r0, 22, +2\nmov32 %r0, 0x40000\nexit\n\
         mov32 %r0, 0\nexit",
    ),
];

/// A loop over every byte of the packet (a back jump, so the budget is tested each step):
/// run only when named, to compare the loop's cost per step with the filters'.
const LOOPS: &[(&str, &str)] = &[
    (
        "byte-sum loop",
        "ldxw %r2, [%r1+76]\nldxw %r3, [%r1+80]\nmov %r0, 0\njge %r2, %r3, +4\nldxb %r4, [%r2+0]\n\
     add %r0, %r4\nadd %r2, 1\nja -5\nexit",
    ),
    // The same loop over the frame given as memory (`r1`, `r2`), with no context: the
    // general entry, as `weir-bench interp`'s compute programs run.
    (
        "byte-sum loop mem",
        "mov %r3, %r1\nadd %r3, %r2\nmov %r0, 0\njge %r1, %r3, +4\nldxb %r4, [%r1+0]\n\
         add %r0, %r4\nadd %r1, 1\nja -5\nexit",
    ),
];

/// Frames: IPv4/TCP to port 22 and 80, IPv4/UDP, IPv6/TCP, ARP; lengths 60 to 1514.
fn frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..64u16 {
        let len = [60usize, 74, 590, 1514][usize::from(i % 4)];
        let mut f = vec![0u8; len];
        let (ethertype, proto): (u16, u8) = match i % 5 {
            0 | 1 => (0x0800, 6),
            2 => (0x0800, 17),
            3 => (0x86dd, 6),
            _ => (0x0806, 0),
        };
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f[14] = 0x45;
        f[23] = proto;
        f[20] = proto; // the IPv6 next header
        let port: u16 = if i % 3 == 0 { 22 } else { 80 };
        f[36..38].copy_from_slice(&port.to_be_bytes());
        f[56..58].copy_from_slice(&port.to_be_bytes());
        out.push(f);
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let only = args.first().cloned();
    let seconds: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let min_rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(301);
    let runs: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(500);
    let mut frames = frames();
    let layout = ProgType::SocketFilter.context_layout();
    let len_at = layout.field("len").map_or(0, |f| f.offset as usize);
    let mut ctx = vec![0u8; layout.size as usize];
    for (name, text) in PROGRAMS.iter().chain(LOOPS.iter().filter(|_| only.is_some())) {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let insns = match assemble(text) {
            Ok(insns) => insns,
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(1);
            }
        };
        let program = Program::from_insns(insns).with_prog_type(ProgType::SocketFilter);
        let verified = match Verified::structural(program) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(1);
            }
        };
        // The memory loop runs as the bench's compute programs do: no context layout.
        let mem = name.ends_with("mem");
        let bindings =
            if mem { Bindings::new() } else { Bindings::for_prog_type(ProgType::SocketFilter) };
        let interp = Interpreter::new(&verified, bindings, Config::default());
        let mut cache = interp.cache();
        let mut pass = || -> u64 {
            let mut executed = 0u64;
            for frame in frames.iter_mut() {
                let wire = frame.len() as u32;
                if let Some(field) = ctx.get_mut(len_at..len_at + 4) {
                    field.copy_from_slice(&wire.to_le_bytes());
                }
                let input = if mem {
                    Input::new().mem(frame)
                } else {
                    Input::new().ctx(&mut ctx).packet(frame)
                };
                match interp.run_stats(&mut cache, input) {
                    Ok(outcome) => executed += outcome.executed,
                    Err(trap) => {
                        eprintln!("{name}: trapped: {trap}");
                        std::process::exit(1);
                    }
                }
            }
            executed
        };
        let executed = pass();
        // Short rounds, many of them: on a shared machine the fastest rounds are the ones
        // no other process interrupted, so the minimum is reported beside the median.
        let mut rounds = Vec::new();
        let until = Instant::now();
        loop {
            let t = Instant::now();
            let mut sink = 0u64;
            for _ in 0..runs {
                sink = sink.wrapping_add(std::hint::black_box(pass()));
            }
            std::hint::black_box(sink);
            rounds.push(t.elapsed().as_nanos() as f64 / runs as f64);
            if rounds.len() >= min_rounds && until.elapsed().as_secs_f64() >= seconds {
                break;
            }
        }
        rounds.sort_by(f64::total_cmp);
        let (ns, min) = (rounds[rounds.len() / 2], rounds[0]);
        let packets = 64.0;
        println!(
            "{name:<14} {:>7.1} ns/run (min {:>5.1}) {:>6.1} insns/run {:>6.2} ns/insn (min {:>5.2})",
            ns / packets,
            min / packets,
            executed as f64 / packets,
            ns / executed as f64,
            min / executed as f64
        );
    }
}
