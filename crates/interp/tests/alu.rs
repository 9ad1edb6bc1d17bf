//! ALU semantics: every edge case `notes/common.md` names, then a property test of every
//! binary ALU operation against a model written with wide (i128/u128) arithmetic.

use crate::common::*;
use proptest::prelude::*;
use weir_isa::ebpf::Op;

const MIN64: u64 = i64::MIN as u64;
const NEG1: u64 = u64::MAX;

#[test]
fn division_by_zero_gives_zero() {
    assert_eq!(eval_reg(Op::Div64Reg, 7, 0), 0);
    assert_eq!(eval_imm(Op::Div64Imm, 7, 0), 0);
    assert_eq!(eval_reg(Op::Div32Reg, 0xffff_ffff_0000_0007, 0), 0);
    assert_eq!(eval_imm(Op::Div32Imm, 7, 0), 0);
    assert_eq!(eval_reg(Op::Sdiv64Reg, NEG1, 0), 0);
    assert_eq!(eval_imm(Op::Sdiv64Imm, 7, 0), 0);
    assert_eq!(eval_reg(Op::Sdiv32Reg, 7, 0), 0);
    assert_eq!(eval_imm(Op::Sdiv32Imm, 0xffff_ffff, 0), 0);
    // 32-bit division by a register whose low half is zero is division by zero.
    assert_eq!(eval_reg(Op::Div32Reg, 7, 0x1_0000_0000), 0);
}

#[test]
fn modulo_by_zero_keeps_the_dividend() {
    assert_eq!(eval_reg(Op::Mod64Reg, 7, 0), 7);
    assert_eq!(eval_imm(Op::Mod64Imm, NEG1, 0), NEG1);
    assert_eq!(eval_reg(Op::Smod64Reg, MIN64, 0), MIN64);
    assert_eq!(eval_imm(Op::Smod64Imm, 0xdead, 0), 0xdead);
    // 32-bit: the dividend's low half, zero-extended.
    assert_eq!(eval_reg(Op::Mod32Reg, 0xffff_ffff_0000_0007, 0), 7);
    assert_eq!(eval_imm(Op::Mod32Imm, 0xffff_ffff_ffff_fff9, 0), 0xffff_fff9);
    assert_eq!(eval_reg(Op::Smod32Reg, 0x1_8000_0000, 0), 0x8000_0000);
    assert_eq!(eval_imm(Op::Smod32Imm, 0xabcd_0000_0000_0005, 0), 5);
}

#[test]
fn int_min_divided_by_minus_one() {
    assert_eq!(eval_reg(Op::Sdiv64Reg, MIN64, NEG1), MIN64);
    assert_eq!(eval_imm(Op::Sdiv64Imm, MIN64, -1), MIN64);
    assert_eq!(eval_reg(Op::Smod64Reg, MIN64, NEG1), 0);
    assert_eq!(eval_imm(Op::Smod64Imm, MIN64, -1), 0);
    assert_eq!(eval_reg(Op::Sdiv32Reg, 0x8000_0000, 0xffff_ffff), 0x8000_0000);
    assert_eq!(eval_imm(Op::Sdiv32Imm, 0x8000_0000, -1), 0x8000_0000);
    assert_eq!(eval_reg(Op::Smod32Reg, 0x8000_0000, 0xffff_ffff), 0);
    assert_eq!(eval_imm(Op::Smod32Imm, 0xffff_ffff_8000_0000, -1), 0);
}

#[test]
fn signed_division_truncates_toward_zero() {
    assert_eq!(eval_imm(Op::Sdiv64Imm, -7i64 as u64, 2), -3i64 as u64);
    assert_eq!(eval_imm(Op::Smod64Imm, -7i64 as u64, 2), -1i64 as u64);
    assert_eq!(eval_imm(Op::Smod64Imm, 7, -2), 1);
    assert_eq!(eval_imm(Op::Sdiv32Imm, -7i32 as u32 as u64, 2), -3i32 as u32 as u64);
    assert_eq!(eval_imm(Op::Smod32Imm, -7i32 as u32 as u64, 2), -1i32 as u32 as u64);
    assert_eq!(eval_imm(Op::Smod32Imm, 7, -2), 1);
}

#[test]
fn unsigned_64_bit_division_sign_extends_the_immediate() {
    // imm -1 becomes 0xffff_ffff_ffff_ffff, then divides unsigned.
    assert_eq!(eval_imm(Op::Div64Imm, NEG1, -1), 1);
    assert_eq!(eval_imm(Op::Div64Imm, 5, -1), 0);
    assert_eq!(eval_imm(Op::Mod64Imm, 5, -1), 5);
    // 32-bit: imm is used as u32.
    assert_eq!(eval_imm(Op::Div32Imm, 0xffff_ffff, -1), 1);
    assert_eq!(eval_imm(Op::Mod32Imm, 0xffff_fffe, -1), 0xffff_fffe);
}

#[test]
fn shift_amounts_are_masked() {
    assert_eq!(eval_imm(Op::Lsh64Imm, 1, 64), 1);
    assert_eq!(eval_reg(Op::Lsh64Reg, 1, 65), 2);
    assert_eq!(eval_reg(Op::Lsh64Reg, 1, 0xffff_ffff_0000_0003), 8);
    assert_eq!(eval_imm(Op::Rsh64Imm, 0x8000_0000_0000_0000, 127), 1);
    assert_eq!(eval_reg(Op::Arsh64Reg, MIN64, 63), NEG1);
    assert_eq!(eval_imm(Op::Arsh64Imm, MIN64, 64), MIN64);
    assert_eq!(eval_imm(Op::Lsh32Imm, 1, 33), 2);
    assert_eq!(eval_reg(Op::Lsh32Reg, 0xffff_ffff_0000_0001, 32), 1);
    assert_eq!(eval_imm(Op::Rsh32Imm, 0x8000_0000, 32), 0x8000_0000);
    assert_eq!(eval_reg(Op::Rsh32Reg, 0x1_0000_0000, 0), 0);
}

#[test]
fn arsh32_shifts_the_low_half_and_zero_extends() {
    assert_eq!(eval_imm(Op::Arsh32Imm, 0x8000_0000, 31), 0xffff_ffff);
    assert_eq!(eval_imm(Op::Arsh32Imm, 0x8000_0000, 4), 0xf800_0000);
    // Bit 31 decides the sign, not bit 63.
    assert_eq!(eval_reg(Op::Arsh32Reg, 0x8000_0000_7fff_ffff, 4), 0x07ff_ffff);
    assert_eq!(eval_reg(Op::Arsh32Reg, 0xffff_fff0, 36), 0xffff_ffff);
}

#[test]
fn thirty_two_bit_results_are_zero_extended() {
    assert_eq!(eval_imm(Op::Add32Imm, 0xffff_ffff, 1), 0);
    assert_eq!(eval_imm(Op::Add64Imm, 0xffff_ffff, 1), 0x1_0000_0000);
    assert_eq!(eval_imm(Op::Sub32Imm, 0, 1), 0xffff_ffff);
    assert_eq!(eval_imm(Op::Mul32Imm, 0x1_0001_0000, 0x10000), 0);
    assert_eq!(eval_imm(Op::Or32Imm, 0xffff_ffff_0000_0000, 1), 1);
    assert_eq!(eval_imm(Op::And32Imm, NEG1, -1), 0xffff_ffff);
    assert_eq!(eval_imm(Op::Xor32Imm, NEG1, 0), 0xffff_ffff);
    assert_eq!(eval_imm(Op::Mov32Imm, 0x1234, -1), 0xffff_ffff);
    assert_eq!(eval_imm(Op::Mov64Imm, 0x1234, -1), NEG1);
    assert_eq!(eval_reg(Op::Mov32Reg, 0, NEG1), 0xffff_ffff);
    assert_eq!(eval_unary(Op::Neg32, 1), 0xffff_ffff);
    assert_eq!(eval_unary(Op::Neg32, 0x1_0000_0000), 0);
    assert_eq!(eval_unary(Op::Neg64, 1), NEG1);
    assert_eq!(eval_unary(Op::Neg64, MIN64), MIN64);
}

#[test]
fn sixty_four_bit_immediates_are_sign_extended() {
    assert_eq!(eval_imm(Op::Add64Imm, 0, -1), NEG1);
    assert_eq!(eval_imm(Op::And64Imm, NEG1, -2), NEG1 - 1);
    assert_eq!(eval_imm(Op::Or64Imm, 0, i32::MIN), 0xffff_ffff_8000_0000);
    assert_eq!(eval_imm(Op::Xor64Imm, 0, i32::MAX), 0x7fff_ffff);
    assert_eq!(eval_imm(Op::Mul64Imm, 3, -1), (-3i64) as u64);
    assert_eq!(eval_imm(Op::Sub64Imm, 0, i32::MIN), 0x8000_0000);
}

#[test]
fn sign_extending_moves() {
    assert_eq!(eval_movsx(Op::MovSx8To64, 0x80), 0xffff_ffff_ffff_ff80);
    assert_eq!(eval_movsx(Op::MovSx8To64, 0xffff_ff7f), 0x7f);
    assert_eq!(eval_movsx(Op::MovSx16To64, 0x8000), 0xffff_ffff_ffff_8000);
    assert_eq!(eval_movsx(Op::MovSx16To64, 0xabcd_7fff), 0x7fff);
    assert_eq!(eval_movsx(Op::MovSx32To64, 0x8000_0000), 0xffff_ffff_8000_0000);
    assert_eq!(eval_movsx(Op::MovSx32To64, 0xffff_ffff_7fff_ffff), 0x7fff_ffff);
    // The 32-bit forms sign-extend to 32 bits, then zero-extend.
    assert_eq!(eval_movsx(Op::MovSx8To32, 0x80), 0xffff_ff80);
    assert_eq!(eval_movsx(Op::MovSx8To32, 0x1_0000_0001), 1);
    assert_eq!(eval_movsx(Op::MovSx16To32, 0x8000), 0xffff_8000);
    assert_eq!(eval_movsx(Op::MovSx16To32, 0xffff_ffff_0000_1234), 0x1234);
}

#[test]
fn byte_swaps() {
    let v = 0x0102_0304_0506_0708u64;
    assert_eq!(eval_unary(Op::Le16, v), 0x0708);
    assert_eq!(eval_unary(Op::Le32, v), 0x0506_0708);
    assert_eq!(eval_unary(Op::Le64, v), v);
    assert_eq!(eval_unary(Op::Be16, v), 0x0807);
    assert_eq!(eval_unary(Op::Be32, v), 0x0807_0605);
    assert_eq!(eval_unary(Op::Be64, v), 0x0807_0605_0403_0201);
    assert_eq!(eval_unary(Op::Bswap16, v), 0x0807);
    assert_eq!(eval_unary(Op::Bswap32, v), 0x0807_0605);
    assert_eq!(eval_unary(Op::Bswap64, v), 0x0807_0605_0403_0201);
}

/// The model: what each binary ALU op computes, with `b` already at the operand width
/// the instruction uses (register value, or immediate extended per the spec).
// Written out by cases on purpose: the model spells the rules differently from the
// interpreter's `checked_*` calls.
#[allow(clippy::manual_checked_ops)]
fn model(op: Op, a: u64, b: u64) -> u64 {
    let (a32, b32) = (a as u32, b as u32);
    let (sa, sb) = (a as i64 as i128, b as i64 as i128);
    let (sa32, sb32) = (a32 as i32 as i128, b32 as i32 as i128);
    let z = |v: u32| u64::from(v);
    match op {
        Op::Add64Imm | Op::Add64Reg => ((a as u128 + b as u128) & u64::MAX as u128) as u64,
        Op::Sub64Imm | Op::Sub64Reg => (a as u128 + (1u128 << 64) - b as u128) as u64,
        Op::Mul64Imm | Op::Mul64Reg => ((a as u128 * b as u128) & u64::MAX as u128) as u64,
        Op::Div64Imm | Op::Div64Reg => {
            if b == 0 {
                0
            } else {
                (a as u128 / b as u128) as u64
            }
        }
        Op::Mod64Imm | Op::Mod64Reg => {
            if b == 0 {
                a
            } else {
                (a as u128 % b as u128) as u64
            }
        }
        Op::Sdiv64Imm | Op::Sdiv64Reg => {
            if sb == 0 {
                0
            } else {
                (sa / sb) as u64
            }
        }
        Op::Smod64Imm | Op::Smod64Reg => {
            if sb == 0 {
                a
            } else {
                (sa % sb) as u64
            }
        }
        Op::Or64Imm | Op::Or64Reg => a | b,
        Op::And64Imm | Op::And64Reg => a & b,
        Op::Xor64Imm | Op::Xor64Reg => a ^ b,
        Op::Lsh64Imm | Op::Lsh64Reg => ((a as u128) << (b % 64)) as u64,
        Op::Rsh64Imm | Op::Rsh64Reg => a >> (b % 64),
        Op::Arsh64Imm | Op::Arsh64Reg => (sa >> (b % 64)) as u64,
        Op::Mov64Imm | Op::Mov64Reg => b,
        Op::Add32Imm | Op::Add32Reg => ((a32 as u64 + b32 as u64) as u32).into(),
        Op::Sub32Imm | Op::Sub32Reg => ((a32 as u64 + (1u64 << 32) - b32 as u64) as u32).into(),
        Op::Mul32Imm | Op::Mul32Reg => ((a32 as u64 * b32 as u64) as u32).into(),
        Op::Div32Imm | Op::Div32Reg => {
            if b32 == 0 {
                0
            } else {
                z(a32 / b32)
            }
        }
        Op::Mod32Imm | Op::Mod32Reg => {
            if b32 == 0 {
                z(a32)
            } else {
                z(a32 % b32)
            }
        }
        Op::Sdiv32Imm | Op::Sdiv32Reg => {
            if sb32 == 0 {
                0
            } else {
                z((sa32 / sb32) as u32)
            }
        }
        Op::Smod32Imm | Op::Smod32Reg => {
            if sb32 == 0 {
                z(a32)
            } else {
                z((sa32 % sb32) as u32)
            }
        }
        Op::Or32Imm | Op::Or32Reg => z(a32 | b32),
        Op::And32Imm | Op::And32Reg => z(a32 & b32),
        Op::Xor32Imm | Op::Xor32Reg => z(a32 ^ b32),
        Op::Lsh32Imm | Op::Lsh32Reg => z(((a32 as u64) << (b32 % 32)) as u32),
        Op::Rsh32Imm | Op::Rsh32Reg => z(a32 >> (b32 % 32)),
        Op::Arsh32Imm | Op::Arsh32Reg => z((sa32 >> (b32 % 32)) as u32),
        Op::Mov32Imm | Op::Mov32Reg => z(b32),
        other => panic!("no model for {other:?}"),
    }
}

/// Every ALU row with two operands, by the table.
fn binary_alu_ops() -> Vec<(Op, bool)> {
    use weir_isa::ebpf::{Operands, OPCODES};
    OPCODES
        .iter()
        .filter(|s| matches!(s.opcode & 0x07, 0x04 | 0x07))
        .filter(|s| !s.mnemonic.starts_with("movsx"))
        .filter_map(|s| match s.operands {
            Operands::DstImm => Some((s.op, true)),
            Operands::DstSrc => Some((s.op, false)),
            _ => None,
        })
        .collect()
}

#[test]
fn every_binary_alu_op_is_covered_by_the_model() {
    let ops = binary_alu_ops();
    assert_eq!(ops.len(), 56, "14 operations x imm/reg x 32/64");
    for (op, _) in ops {
        let _ = model(op, 1, 1);
    }
}

fn interesting_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(i64::MIN as u64),
        Just(i64::MAX as u64),
        Just(0xffff_ffff),
        Just(0x8000_0000),
        Just(0x7fff_ffff),
        0u64..70,
    ]
}

fn interesting_i32() -> impl Strategy<Value = i32> {
    prop_oneof![any::<i32>(), Just(0), Just(1), Just(-1), Just(i32::MIN), Just(i32::MAX), 0i32..70]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn alu_matches_the_model(a in interesting_u64(), b in interesting_u64(), k in interesting_i32()) {
        for (op, is_imm) in binary_alu_ops() {
            if is_imm {
                // 64-bit ops see the immediate sign-extended, 32-bit ops its u32 value:
                // both are the low 32 bits of the sign-extended form.
                let operand = i64::from(k) as u64;
                prop_assert_eq!(eval_imm(op, a, k), model(op, a, operand), "{:?} {:#x} {}", op, a, k);
            } else {
                prop_assert_eq!(eval_reg(op, a, b), model(op, a, b), "{:?} {:#x} {:#x}", op, a, b);
            }
        }
    }
}
