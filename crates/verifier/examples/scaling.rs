//! How verification time grows with program size: synthetic XDP programs of 1k, 4k, 16k and
//! 64k instructions shaped like clang's packet parsers (a bounds check, a load, a branch
//! that rejoins, an accumulator), verified 20 times each; prints the median.
//!
//! `cargo run --release -p weir-verifier --example scaling`

use std::time::{Duration, Instant};

use weir_isa::ebpf::{Insn, Op};
use weir_program::{ProgType, Program};
use weir_verifier::{verify, Options};

/// One block: `if data + k > data_end` return XDP_PASS; `r5 = data[k-1]`; a diamond on
/// r5 that changes the accumulator r0 either way; `r6 ^= r5`. 12 slots.
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

fn program(slots: usize) -> Program {
    let mut insns = vec![
        Insn::new(Op::LdxW, 2, 1, 0, 0),
        Insn::new(Op::LdxW, 3, 1, 4, 0),
        Insn::new(Op::Mov64Imm, 0, 0, 0, 0),
        Insn::new(Op::Mov64Imm, 6, 0, 0, 0),
    ];
    let mut k = 1;
    while insns.len() + 12 < slots {
        block(k, &mut insns);
        k = k % 1000 + 1;
    }
    insns.push(Insn::new(Op::Exit, 0, 0, 0, 0));
    Program::from_insns(insns).with_prog_type(ProgType::Xdp)
}

fn main() {
    println!("{:>8} {:>10} {:>12} {:>8} {:>8}", "slots", "median", "insns", "states", "pruned");
    for slots in [1_000, 4_000, 16_000, 64_000] {
        let p = program(slots);
        let mut times: Vec<Duration> = Vec::new();
        let mut last = None;
        for _ in 0..20 {
            let start = Instant::now();
            let proof = verify(&p, &Options::default()).expect("accepted");
            times.push(start.elapsed());
            last = Some(proof);
        }
        times.sort();
        let proof = last.expect("ran");
        println!(
            "{:>8} {:>8.3}ms {:>12} {:>8} {:>8}",
            p.len(),
            times[times.len() / 2].as_secs_f64() * 1e3,
            proof.stats.insns_processed,
            proof.stats.states,
            proof.stats.pruned
        );
    }
}
