//! Packet access for the XDP target: direct loads through `data`/`data_end` of `struct
//! xdp_md`, each proven in bounds by an explicit check the Linux verifier understands
//! (`if data + n > data_end: return 0`), loaded little-endian and swapped to network order.
//!
//! Checks for constant offsets are hoisted and merged: at a load that needs more bytes than
//! are known to be checked, one check covers every byte that all paths onward are sure to
//! read ([`super::analysis::anticipated_reads`]), so a straight-line block gets one check
//! for its largest offset and later blocks only check what earlier checks did not cover.
//! X-indexed loads check their own bytes: first that X + k leaves room for the load within
//! `MAX_PACKET_OFF` (the verifier's bound on variable packet offsets), then the end.

use weir_isa::cbpf::ancillary::{ancillary_kernel_name, SKF_AD_ALU_XOR_X, SKF_AD_OFF};
use weir_isa::cbpf::{CbpfInsn, CbpfOp};
use weir_isa::ebpf::Op;
use weir_program::abi::XDP;

use super::analysis::{access_end, always_fails, XDP_MAX_END};
use super::emit::{is_ancillary, Cmp, Emitter, Facts, Operand, REG_A, REG_X};
use super::{TranslateError, TranslateErrorKind};

/// `data`: the first packet byte. Kept unmodified so that every check widens its range.
const REG_DATA: u8 = 8;
/// `data_end`: one past the last packet byte.
const REG_DATA_END: u8 = 9;
/// Registers for the pointers and sums of one check.
const REG_P: u8 = 2;
const REG_Q: u8 = 3;
const REG_R: u8 = 4;

fn field_offset(name: &str) -> i16 {
    XDP.field(name).and_then(|f| i16::try_from(f.offset).ok()).unwrap_or(0)
}

pub(super) fn prologue(e: &mut Emitter<'_>) {
    e.b.load(Op::LdxW, REG_DATA, 1, field_offset("data"));
    e.b.load(Op::LdxW, REG_DATA_END, 1, field_offset("data_end"));
}

/// Translates a packet load, `len` or `ldxb 4*([k]&0xf)`.
pub(super) fn load(
    e: &mut Emitter<'_>,
    index: usize,
    insn: &CbpfInsn,
    facts: Facts,
) -> Result<Facts, TranslateError> {
    use CbpfOp::*;
    let k = insn.k;
    let mut out = facts;
    if is_ancillary(insn) {
        // SKF_AD_ALU_XOR_X is arithmetic, not a field, and needs no socket buffer.
        if k.wrapping_sub(SKF_AD_OFF) == SKF_AD_ALU_XOR_X {
            e.b.alu_reg(Op::Xor32Reg, REG_A, REG_X);
            return Ok(out);
        }
        return Err(TranslateError { index, kind: ancillary_problem(k) });
    }
    if always_fails(insn, e.target) {
        e.return_zero();
        return Ok(out);
    }
    match insn.op {
        LdAbsW => out.checked = constant_load(e, index, REG_A, 4, k, facts.checked),
        LdAbsH => out.checked = constant_load(e, index, REG_A, 2, k, facts.checked),
        LdAbsB => out.checked = constant_load(e, index, REG_A, 1, k, facts.checked),
        LdxMsh => {
            out.checked = constant_load(e, index, REG_X, 1, k, facts.checked);
            e.b.alu_imm(Op::And32Imm, REG_X, 0xf);
            e.b.alu_imm(Op::Lsh32Imm, REG_X, 2);
            out.x_max = 60;
        }
        LdIndW => indexed_load(e, 4, k, facts.x_max),
        LdIndH => indexed_load(e, 2, k, facts.x_max),
        LdIndB => indexed_load(e, 1, k, facts.x_max),
        LdLen => frame_len(e, REG_A),
        LdxLen => {
            frame_len(e, REG_X);
            out.x_max = u32::MAX;
        }
        _ => {}
    }
    Ok(out)
}

/// The error for an ancillary load at `k`: an XDP context has no socket buffer.
pub(super) fn ancillary_problem(k: u32) -> TranslateErrorKind {
    let name = ancillary_kernel_name(k).unwrap_or("SKF_AD_?");
    TranslateErrorKind::AncillaryWithoutSkb(name)
}

/// `len`: XDP sees the whole frame, so the wire length is `data_end - data`.
fn frame_len(e: &mut Emitter<'_>, dst: u8) {
    e.b.alu_reg(Op::Mov64Reg, dst, REG_DATA_END);
    e.b.alu_reg(Op::Sub64Reg, dst, REG_DATA);
}

/// `if data + bytes > data_end: return 0` (`bytes` at most [`XDP_MAX_END`]).
fn check_length(e: &mut Emitter<'_>, bytes: u32) {
    e.b.alu_reg(Op::Mov64Reg, REG_P, REG_DATA);
    e.b.alu_imm(Op::Add64Imm, REG_P, bytes as i32);
    e.fail_unless(Cmp::Le, REG_P, Operand::Reg(REG_DATA_END));
}

/// `size` bytes at constant offset `k` into `dst`, network order, checked unless `checked`
/// bytes are already known present. Returns the bytes known present afterwards.
fn constant_load(
    e: &mut Emitter<'_>,
    index: usize,
    dst: u8,
    size: u32,
    k: u32,
    checked: u32,
) -> u32 {
    // Not an always-failing load, so k + size <= XDP_MAX_END.
    let end = k.wrapping_add(size);
    let mut checked = checked;
    if end > checked {
        checked = e.anticipated(index).max(end).min(XDP_MAX_END);
        check_length(e, checked);
    }
    match i16::try_from(k) {
        Ok(off) => load_swapped(e, dst, REG_DATA, off, size),
        Err(_) => {
            e.b.alu_reg(Op::Mov64Reg, REG_P, REG_DATA);
            e.b.alu_imm(Op::Add64Imm, REG_P, k as i32);
            load_swapped(e, dst, REG_P, 0, size);
        }
    }
    checked
}

/// `ld [x + k]`: check that X + k leaves room for the load below `MAX_PACKET_OFF`, which
/// bounds the pointer arithmetic for the verifier (X's known bound may make that check
/// unnecessary), then that the bytes are in the packet.
fn indexed_load(e: &mut Emitter<'_>, size: u32, k: u32, x_max: u32) {
    let worst_end = u64::from(x_max).wrapping_add(access_end(k, size));
    if worst_end <= u64::from(XDP_MAX_END) {
        // Known small: k + size fits in i32 and, when k fits, in the load's 16-bit offset.
        e.b.alu_reg(Op::Mov64Reg, REG_P, REG_DATA);
        e.b.alu_reg(Op::Add64Reg, REG_P, REG_X);
        let off = match i16::try_from(k) {
            Ok(off) => off,
            Err(_) => {
                e.b.alu_imm(Op::Add64Imm, REG_P, k as i32);
                0
            }
        };
        let end_from_p = u32::try_from(off).unwrap_or(0).wrapping_add(size);
        e.b.alu_reg(Op::Mov64Reg, REG_Q, REG_P);
        e.b.alu_imm(Op::Add64Imm, REG_Q, end_from_p as i32);
        e.fail_unless(Cmp::Le, REG_Q, Operand::Reg(REG_DATA_END));
        load_swapped(e, REG_A, REG_P, off, size);
        return;
    }
    // The exact offset X + k, in 64 bits (X is zero-extended; k as u32).
    e.b.alu_imm(Op::Mov32Imm, REG_P, k as i32);
    e.b.alu_reg(Op::Add64Reg, REG_P, REG_X);
    let last_start = XDP_MAX_END.wrapping_sub(size);
    e.fail_unless(Cmp::Le, REG_P, Operand::Imm(last_start as i32));
    e.b.alu_reg(Op::Mov64Reg, REG_Q, REG_DATA);
    e.b.alu_reg(Op::Add64Reg, REG_Q, REG_P);
    e.b.alu_reg(Op::Mov64Reg, REG_R, REG_Q);
    e.b.alu_imm(Op::Add64Imm, REG_R, size as i32);
    e.fail_unless(Cmp::Le, REG_R, Operand::Reg(REG_DATA_END));
    load_swapped(e, REG_A, REG_Q, 0, size);
}

/// `dst` = the `size` bytes at `base + off`, as the big-endian number they spell.
fn load_swapped(e: &mut Emitter<'_>, dst: u8, base: u8, off: i16, size: u32) {
    let (load, swap) = match size {
        4 => (Op::LdxW, Some(Op::Be32)),
        2 => (Op::LdxH, Some(Op::Be16)),
        _ => (Op::LdxB, None),
    };
    e.b.load(load, dst, base, off);
    if let Some(swap) = swap {
        e.b.byte_swap(swap, dst);
    }
}
