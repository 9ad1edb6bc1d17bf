//! How verification time grows with program size: synthetic XDP programs of 1k to 64k
//! instructions shaped like clang's packet parsers (a bounds check, a load, a branch that
//! rejoins, an accumulator), each verified several times; prints one table row a size with
//! the median of the thread's CPU time and of the wall clock, and program instructions
//! verified per microsecond of CPU time, so a straight line reads as an equal figure down
//! the column. A size the verifier refuses prints its refusal, in the verifier's words, on
//! its row, and the curve goes on.
//!
//! `cargo run --release -p weir-verifier --example scaling [-- [--runs N] [--kernel] [SLOTS...]]`
//!
//! `--kernel` also loads each size into the running kernel (root) and prints its answer on
//! a row of its own: the kernel walks the same program with the same limit of 8,192 pending
//! branches (`BPF_COMPLEXITY_LIMIT_JMP_SEQ`).
//!
//! Every block leaves two branches pending on the path that goes through all of them (the
//! bounds check's way out and the diamond's other side: both are explored depth-first after
//! the fall-through path ends), so a program of more than 8,192 / 2 = 4,096 blocks (about
//! 49k slots) is refused by both verifiers as too complex, whatever their speed.

use std::time::{Duration, Instant};

use weir_isa::ebpf::{Insn, Op};
use weir_program::{ProgType, Program};
use weir_sys::clock::thread_cpu;
use weir_verifier::{verify, Options, Rejection, Stats};

/// Slots of one [`block`].
const BLOCK_SLOTS: usize = 12;

/// The curve's sizes when none are given.
const SIZES: [usize; 6] = [1_000, 4_000, 16_000, 32_000, 48_000, 64_000];

/// One block: `if data + k > data_end` return XDP_PASS; `r5 = data[k-1]`; a diamond on
/// r5 that changes the accumulator r0 either way; `r6 ^= r5`. [`BLOCK_SLOTS`] slots.
fn block(k: i64, out: &mut Vec<Insn>) {
    out.extend([
        Insn::new(Op::Mov64Reg, 4, 2, 0, 0),
        Insn::new(Op::Add64Imm, 4, 0, 0, k),
        Insn::new(Op::Jgt64Reg, 4, 3, 7, 0),
        Insn::new(Op::LdxB, 5, 2, (k - 1) as i16, 0),
        Insn::new(Op::Jgt64Imm, 5, 0, 2, 100),
        Insn::new(Op::Add64Reg, 0, 5, 0, 0),
        Insn::new(Op::Ja, 0, 0, 1, 0),
        Insn::new(Op::Sub64Imm, 0, 0, 0, 1),
        Insn::new(Op::Xor64Reg, 6, 5, 0, 0),
        Insn::new(Op::Ja, 0, 0, 2, 0),
        Insn::new(Op::Mov64Imm, 0, 0, 0, 2),
        Insn::new(Op::Exit, 0, 0, 0, 0),
    ]);
}

/// A program of at most `slots` slots: a prologue, as many blocks as fit, an exit.
fn program(slots: usize) -> Program {
    let mut insns = vec![
        Insn::new(Op::LdxW, 2, 1, 0, 0),
        Insn::new(Op::LdxW, 3, 1, 4, 0),
        Insn::new(Op::Mov64Imm, 0, 0, 0, 0),
        Insn::new(Op::Mov64Imm, 6, 0, 0, 0),
    ];
    let mut k = 1;
    while insns.len() + BLOCK_SLOTS < slots {
        block(k, &mut insns);
        k = k % 1000 + 1;
    }
    insns.push(Insn::new(Op::Exit, 0, 0, 0, 0));
    Program::from_insns(insns).with_prog_type(ProgType::Xdp)
}

/// One size's verifications: the medians of every run's thread CPU time and wall clock,
/// and the last run's statistics; or the verifier's refusal (the first run's: a refused
/// program is not timed again).
#[derive(Debug)]
enum Row {
    Proven { cpu: Duration, wall: Duration, stats: Stats },
    Refused { cpu: Duration, wall: Duration, rejection: Rejection },
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// Verifies `p` `runs` times (at least once).
fn measure(p: &Program, runs: usize) -> Row {
    let (mut cpus, mut walls) = (Vec::new(), Vec::new());
    let mut stats = Stats::default();
    for _ in 0..runs.max(1) {
        let (cpu, wall) = (thread_cpu(), Instant::now());
        let result = verify(p, &Options::default());
        let (cpu, wall) = (thread_cpu() - cpu, wall.elapsed());
        match result {
            Ok(proof) => stats = proof.stats,
            Err(rejection) => return Row::Refused { cpu, wall, rejection },
        }
        cpus.push(cpu);
        walls.push(wall);
    }
    Row::Proven { cpu: median(cpus), wall: median(walls), stats }
}

fn ms(d: Duration) -> String {
    format!("{:.3}ms", d.as_secs_f64() * 1e3)
}

/// Program instructions verified per microsecond of `cpu`.
fn per_us(slots: usize, cpu: Duration) -> f64 {
    slots as f64 / (cpu.as_secs_f64() * 1e6).max(f64::MIN_POSITIVE)
}

const HEADER: &str =
    "   slots        cpu       wall  insn/us    processed   states   pruned  pending";

fn format_row(slots: usize, row: &Row) -> String {
    match row {
        Row::Proven { cpu, wall, stats } => format!(
            "{slots:>8} {:>10} {:>10} {:>8.2} {:>12} {:>8} {:>8} {:>8}",
            ms(*cpu),
            ms(*wall),
            per_us(slots, *cpu),
            stats.insns_processed,
            stats.states,
            stats.pruned,
            stats.max_pending
        ),
        Row::Refused { cpu, wall, rejection } => format!(
            "{slots:>8} {:>10} {:>10} {:>8} refused at {rejection}",
            ms(*cpu),
            ms(*wall),
            "-"
        ),
    }
}

/// The kernel's answer for `p`, as a row of its own.
fn kernel_row(kernel: &weir_sys::kernel::Kernel, p: &Program) -> String {
    let answer = match kernel.load_with_stats(ProgType::Xdp, &p.to_bytes()) {
        Ok((_, stats)) => {
            let known = |n: Option<u64>| n.map_or("?".to_string(), |n| n.to_string());
            format!(
                "accepted, {} insns processed, verification time {} us",
                known(stats.processed),
                known(stats.verification_us)
            )
        }
        Err(e) => format!("refused: {}", e.reason()),
    };
    format!("{:>8} kernel: {answer}", "")
}

#[derive(Debug)]
struct Args {
    runs: usize,
    kernel: bool,
    sizes: Vec<usize>,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut out = Args { runs: 21, kernel: false, sizes: Vec::new() };
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--kernel" => out.kernel = true,
            "--runs" => {
                let n = args.next().ok_or("--runs needs a count")?;
                out.runs = n.parse().map_err(|_| format!("--runs: not a count: {n:?}"))?;
            }
            size => out.sizes.push(size.parse().map_err(|_| {
                format!("not a size in slots: {size:?} (usage: [--runs N] [--kernel] [SLOTS...])")
            })?),
        }
    }
    if out.sizes.is_empty() {
        out.sizes = SIZES.to_vec();
    }
    Ok(out)
}

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("scaling: {e}");
            std::process::exit(2);
        }
    };
    let kernel = weir_sys::kernel::Kernel::new();
    let kernel_ok = args.kernel
        && match kernel.available() {
            Ok(()) => true,
            Err(reason) => {
                println!("SKIPPED: kernel rows: {reason}");
                false
            }
        };
    println!(
        "cpu, wall: medians of {} runs (cpu: this thread's CPU time); insn/us: slots per cpu us",
        args.runs
    );
    println!("{HEADER}");
    for &slots in &args.sizes {
        let p = program(slots);
        println!("{}", format_row(p.len(), &measure(&p, args.runs)));
        if kernel_ok {
            println!("{}", kernel_row(&kernel, &p));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_verifier::Rule;

    #[test]
    fn a_refused_size_is_a_row_with_the_verifiers_words() {
        let p = program(64_000);
        let row = measure(&p, 3);
        let Row::Refused { rejection, .. } = &row else { panic!("64k proven: {row:?}") };
        assert_eq!(rejection.rule, Rule::TooComplex);
        let line = format_row(p.len(), &row);
        assert!(line.starts_with(&format!("{:>8} ", p.len())), "{line}");
        assert!(line.contains("refused at ") && line.contains("jumps is too complex"), "{line}");
    }

    #[test]
    fn the_curve_is_proven_up_to_48k_with_two_branches_pending_a_block() {
        for slots in [1_000, 4_000, 48_000] {
            let p = program(slots);
            assert!(p.len() <= slots && p.len() + BLOCK_SLOTS > slots, "{slots}: {}", p.len());
            let blocks = (p.len() - 5) / BLOCK_SLOTS;
            let row = measure(&p, 2);
            let Row::Proven { stats, cpu, wall } = &row else { panic!("{slots}: {row:?}") };
            // The deepest pending stack is the path through every block.
            assert_eq!(stats.max_pending, 2 * blocks as u64, "{slots}");
            assert!(*cpu > Duration::ZERO && *wall > Duration::ZERO);
            let line = format_row(p.len(), &row);
            assert_eq!(
                line.split_whitespace().count(),
                HEADER.split_whitespace().count(),
                "{line}"
            );
        }
    }

    #[test]
    fn medians_and_rates() {
        let ms = Duration::from_millis;
        assert_eq!(median(vec![ms(5), ms(1), ms(3)]), ms(3));
        assert_eq!(median(vec![]), Duration::ZERO);
        assert_eq!(per_us(4_000, ms(4)), 1.0);
    }

    #[test]
    fn arguments() {
        let parse = |a: &[&str]| parse_args(a.iter().map(|s| s.to_string()));
        let a = parse(&[]).unwrap();
        assert_eq!((a.runs, a.kernel, a.sizes), (21, false, SIZES.to_vec()));
        let a = parse(&["--runs", "3", "--kernel", "4000", "1000"]).unwrap();
        assert_eq!((a.runs, a.kernel, a.sizes), (3, true, vec![4_000, 1_000]));
        assert!(parse(&["4k"]).unwrap_err().contains("not a size"));
        assert!(parse(&["--runs"]).unwrap_err().contains("needs a count"));
    }

    /// The kernel gives the same answers: 4k proven after as many instructions processed
    /// (its statistics read from its log), 64k refused as too complex.
    #[test]
    fn the_kernel_agrees() {
        let kernel = weir_sys::kernel::Kernel::new();
        if let Err(reason) = kernel.available() {
            println!("SKIPPED: the_kernel_agrees: {reason}");
            return;
        }
        let small = kernel_row(&kernel, &program(4_000));
        assert!(small.contains("kernel: accepted, 4321 insns processed"), "{small}");
        assert!(small.contains("verification time") && !small.contains('?'), "{small}");
        let big = kernel_row(&kernel, &program(64_000));
        assert!(big.contains("kernel: refused") && big.contains("jumps is too complex"), "{big}");
    }
}
