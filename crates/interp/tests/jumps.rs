//! Jumps: every conditional jump of the opcode table, in both widths and both operand
//! kinds, at the boundaries where signed and unsigned orders and the 32/64-bit views differ.

use crate::common::*;
use weir_isa::ebpf::{Op, Operands, OPCODES};

/// What the jump's condition says about `a` and `b`, with `b` at 64 bits (32-bit
/// conditions look at the low halves only).
fn model(mnemonic: &str, a: u64, b: u64) -> bool {
    let (name, wide) = match mnemonic.strip_suffix("32") {
        Some(name) => (name, false),
        None => (mnemonic, true),
    };
    let (ua, ub) = if wide { (a, b) } else { (a & 0xffff_ffff, b & 0xffff_ffff) };
    let (sa, sb) = if wide {
        (a as i64, b as i64)
    } else {
        (i64::from(a as u32 as i32), i64::from(b as u32 as i32))
    };
    match name {
        "jeq" => ua == ub,
        "jne" => ua != ub,
        "jgt" => ua > ub,
        "jge" => ua >= ub,
        "jlt" => ua < ub,
        "jle" => ua <= ub,
        "jset" => ua & ub != 0,
        "jsgt" => sa > sb,
        "jsge" => sa >= sb,
        "jslt" => sa < sb,
        "jsle" => sa <= sb,
        other => panic!("unknown condition {other}"),
    }
}

const VALUES: &[u64] = &[
    0,
    1,
    2,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x1_0000_0001,
    0xffff_ffff_0000_0001,
    0x8000_0000_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0xffff_ffff_ffff_fffe,
    u64::MAX,
];

const IMMEDIATES: &[i32] = &[0, 1, 2, -1, -2, i32::MAX, i32::MIN];

/// `r0 = 1` if the jump is taken, else 0.
fn taken(jump: weir_isa::ebpf::Insn, a: u64, b: u64) -> u64 {
    run(&[lddw(1, a), lddw(2, b), mov(0, 0), jump, exit(), mov(0, 1), exit()]).unwrap()
}

#[test]
fn every_conditional_jump_at_the_boundaries() {
    let mut checked_ops = 0;
    for spec in OPCODES.iter().filter(|s| s.op.is_conditional_jump()) {
        checked_ops += 1;
        let mut cases = 0;
        match spec.operands {
            Operands::DstSrcOff => {
                for &a in VALUES {
                    for &b in VALUES {
                        let got = taken(jmp_reg(spec.op, 1, 2, 1), a, b);
                        let want = u64::from(model(spec.mnemonic, a, b));
                        assert_eq!(got, want, "{} {a:#x}, {b:#x}", spec.mnemonic);
                        cases += 1;
                    }
                }
            }
            Operands::DstImmOff => {
                for &a in VALUES {
                    for &k in IMMEDIATES {
                        let got = taken(jmp_imm(spec.op, 1, i64::from(k), 1), a, 0);
                        // The immediate sign-extends to 64 bits; 32-bit jumps see its low half.
                        let want = u64::from(model(spec.mnemonic, a, i64::from(k) as u64));
                        assert_eq!(got, want, "{} {a:#x}, {k}", spec.mnemonic);
                        cases += 1;
                    }
                }
            }
            other => panic!("{:?} has operands {other:?}", spec.op),
        }
        assert!(cases > 0);
    }
    assert_eq!(checked_ops, 44, "11 conditions x imm/reg x 32/64");
}

#[test]
fn signed_and_unsigned_orders_differ_where_expected() {
    // -1 vs 1: unsigned greater, signed less.
    let (a, b) = (u64::MAX, 1);
    assert_eq!(taken(jmp_reg(Op::Jgt64Reg, 1, 2, 1), a, b), 1);
    assert_eq!(taken(jmp_reg(Op::Jsgt64Reg, 1, 2, 1), a, b), 0);
    assert_eq!(taken(jmp_reg(Op::Jslt64Reg, 1, 2, 1), a, b), 1);
    // Equal low halves: 32-bit equal, 64-bit not.
    let (a, b) = (0x1_0000_0005, 5);
    assert_eq!(taken(jmp_reg(Op::Jeq32Reg, 1, 2, 1), a, b), 1);
    assert_eq!(taken(jmp_reg(Op::Jeq64Reg, 1, 2, 1), a, b), 0);
    // jset on bits only in the high half.
    assert_eq!(taken(jmp_imm(Op::Jset64Imm, 1, -1, 1), 0x1_0000_0000, 0), 1);
    assert_eq!(taken(jmp_imm(Op::Jset32Imm, 1, -1, 1), 0x1_0000_0000, 0), 0);
    // jeq with imm -1 matches all-ones in 64 bits, and 0xffff_ffff in 32 bits.
    assert_eq!(taken(jmp_imm(Op::Jeq64Imm, 1, -1, 1), 0xffff_ffff, 0), 0);
    assert_eq!(taken(jmp_imm(Op::Jeq32Imm, 1, -1, 1), 0xffff_ffff, 0), 1);
}

#[test]
fn unconditional_jumps_forward_and_back() {
    // Jump forward over a mov, then back to an exit placed before.
    let insns = [
        mov(0, 1),
        ja(2),                   // -> 4
        exit(),                  // 2: reached from the backward jump
        mov(0, 99),              // 3: skipped
        imm(Op::Add64Imm, 0, 1), // 4
        ja(-4),                  // -> 2
    ];
    assert_eq!(run(&insns).unwrap(), 2);
    let insns = [mov(0, 1), imm(Op::Ja32, 0, 1), mov(0, 7), exit()];
    assert_eq!(run(&insns).unwrap(), 1);
}

#[test]
fn jumps_count_lddw_as_two_slots() {
    // The jump's offset is in slots: over lddw (2 slots) and mov lands on exit.
    let insns = [mov(0, 3), ja(3), lddw(0, 9), mov(0, 8), exit()];
    assert_eq!(run(&insns).unwrap(), 3);
}

#[test]
fn a_loop_runs_to_completion() {
    // r0 = sum 1..=100
    let insns = [
        mov(0, 0),
        mov(1, 100),
        reg(Op::Add64Reg, 0, 1),
        imm(Op::Sub64Imm, 1, 1),
        jmp_imm(Op::Jne64Imm, 1, 0, -3),
        exit(),
    ];
    assert_eq!(run(&insns).unwrap(), 5050);
}
