//! ProgramBuilder: label resolution (forward, backward, functions), `ja` widening, link
//! errors, and that every emitter writes what `decode` would read back.

use weir_isa::ebpf::{Insn, Op};
use weir_program::{validate, LinkError, Program, ProgramBuilder};

fn at(prog: &Program, pc: usize) -> Insn {
    prog.insns()[pc]
}

#[test]
fn forward_and_backward_labels() {
    let mut b = ProgramBuilder::new();
    let top = b.here();
    let done = b.new_label();
    b.jump_imm(Op::Jeq64Imm, 1, 0, done); // 0 -> 3
    b.alu_imm(Op::Add64Imm, 1, -1); // 1
    b.jump_reg(Op::Jne32Reg, 1, 2, top); // 2 -> 0
    b.bind(done);
    b.exit(); // 3
    let prog = b.link().unwrap();
    assert_eq!(at(&prog, 0).off, 2);
    assert_eq!(at(&prog, 2).off, -3);
    assert_eq!(at(&prog, 2).src, 2);
    validate(&prog).unwrap();
}

#[test]
fn label_on_the_next_slot_is_offset_zero() {
    let mut b = ProgramBuilder::new();
    let next = b.new_label();
    b.jump(next);
    b.bind(next);
    b.exit();
    assert_eq!(at(&b.link().unwrap(), 0), Insn::new(Op::Ja, 0, 0, 0, 0));
}

/// A `ja` at slot 0 over `gap` filler instructions, and back again from the end.
fn jump_over(gap: usize) -> Program {
    let mut b = ProgramBuilder::new();
    let start = b.here();
    let end = b.new_label();
    b.jump(end);
    for _ in 0..gap {
        b.alu_imm(Op::Mov64Imm, 0, 0);
    }
    b.bind(end);
    b.jump(start);
    b.link().unwrap()
}

#[test]
fn ja_widens_to_ja32_only_when_needed() {
    let max = usize::try_from(i16::MAX).unwrap();
    let fits = jump_over(max);
    assert_eq!(at(&fits, 0), Insn::new(Op::Ja, 0, 0, i16::MAX, 0));
    // Backward from slot max+1 to 0: -(max+2) = -32769, one past i16::MIN.
    assert_eq!(at(&fits, max + 1), Insn::new(Op::Ja32, 0, 0, 0, -32769));
    validate(&fits).unwrap();

    let wide = jump_over(max + 1);
    assert_eq!(at(&wide, 0), Insn::new(Op::Ja32, 0, 0, 0, 32768));
    assert_eq!(at(&wide, max + 2), Insn::new(Op::Ja32, 0, 0, 0, -32770));
    validate(&wide).unwrap();

    let back = jump_over(max - 1);
    assert_eq!(at(&back, max), Insn::new(Op::Ja, 0, 0, i16::MIN, 0));
}

#[test]
fn conditional_jump_out_of_range_is_an_error() {
    let mut b = ProgramBuilder::new();
    let far = b.new_label();
    b.alu_imm(Op::Mov64Imm, 0, 0);
    b.jump_imm(Op::Jgt64Imm, 1, 3, far);
    for _ in 0..40_000 {
        b.alu_imm(Op::Mov64Imm, 0, 0);
    }
    b.bind(far);
    b.exit();
    assert_eq!(b.link().unwrap_err(), LinkError::OutOfRange { pc: 1, label: far.index() });
}

#[test]
fn ja32_is_always_ja32() {
    let mut b = ProgramBuilder::new();
    let end = b.new_label();
    b.jump32(end);
    b.alu_imm(Op::Mov64Imm, 0, 0);
    b.bind(end);
    b.exit();
    assert_eq!(at(&b.link().unwrap(), 0), Insn::new(Op::Ja32, 0, 0, 0, 1));
}

#[test]
fn link_errors() {
    let mut b = ProgramBuilder::new();
    let never = b.new_label();
    b.jump(never);
    b.exit();
    assert_eq!(b.link().unwrap_err(), LinkError::Unbound(never.index()));

    let mut b = ProgramBuilder::new();
    let twice = b.here();
    b.exit();
    b.bind(twice);
    assert_eq!(b.link().unwrap_err(), LinkError::BoundTwice(twice.index()));

    let mut other = ProgramBuilder::new();
    other.new_label();
    let foreign = other.new_label();
    let mut b = ProgramBuilder::new();
    b.jump(foreign);
    b.exit();
    assert_eq!(b.link().unwrap_err(), LinkError::UnknownLabel(1));
    let mut b = ProgramBuilder::new();
    b.bind(foreign);
    b.exit();
    assert_eq!(b.link().unwrap_err(), LinkError::UnknownLabel(1));
}

#[test]
fn link_error_messages() {
    assert_eq!(LinkError::Unbound(3).to_string(), "label 3 is used but never bound");
    assert_eq!(
        LinkError::OutOfRange { pc: 7, label: 2 }.to_string(),
        "instruction 7: jump to label 2 is out of range for a 16-bit offset"
    );
}

#[test]
fn local_calls_and_function_addresses() {
    let mut b = ProgramBuilder::new();
    let callee = b.new_label();
    let main = b.here();
    b.call_local(callee); // 0 -> 5
    b.lddw_func(2, callee); // 1, 2 -> 5
    b.call_reg(2); // 3
    b.exit(); // 4
    b.bind(callee);
    b.lddw_func(3, main); // 5, 6 -> 0
    b.alu_imm(Op::Mov64Imm, 0, 7); // 7
    b.exit(); // 8
    let prog = b.link().unwrap();
    assert_eq!(at(&prog, 0), Insn::new(Op::CallLocal, 0, 1, 0, 4));
    assert_eq!(at(&prog, 1), Insn::new(Op::LddwFunc, 2, 4, 0, 3));
    assert_eq!(at(&prog, 2).op, Op::LddwHigh);
    assert_eq!(at(&prog, 5), Insn::new(Op::LddwFunc, 3, 4, 0, -6));
    assert_eq!(weir_program::functions(&prog), vec![0..5, 5..9]);
    validate(&prog).unwrap();
}

#[test]
fn lddw_takes_two_slots_and_positions_follow() {
    let mut b = ProgramBuilder::new();
    assert_eq!(b.lddw(1, 0x1122_3344_5566_7788), 0);
    assert_eq!(b.position(), 2);
    assert_eq!(b.lddw_map_value(2, 3, 16), 2);
    assert_eq!(b.lddw_map_idx_value(3, 1, 0xffff_fff0), 4);
    assert_eq!(b.exit(), 6);
    let prog = b.link().unwrap();
    let ops: Vec<Op> = prog.insns().iter().map(|i| i.op).collect();
    use Op::*;
    assert_eq!(ops, [Lddw, LddwHigh, LddwMapValue, LddwHigh, LddwMapIdxValue, LddwHigh, Exit]);
    assert_eq!(at(&prog, 0).imm, 0x1122_3344_5566_7788);
    assert_eq!(at(&prog, 2).imm, (16 << 32) | 3);
    // The high half is the offset, as decode reads it back.
    assert_eq!(at(&prog, 4).imm, 1 | (0xffff_fff0_u64 << 32) as i64);
    assert_eq!(Program::from_bytes(&prog.to_bytes()).unwrap(), prog);
    validate(&prog).unwrap();
}

/// One program using every emitter; it must validate and survive an encode/decode round
/// trip unchanged (so the builder writes exactly what `decode` produces).
#[test]
fn every_emitter_writes_the_decoded_form() {
    let mut b = ProgramBuilder::new();
    let sub = b.new_label();
    let out = b.new_label();
    b.alu_imm(Op::Mov64Imm, 0, -1);
    b.alu_imm(Op::Sdiv64Imm, 0, 3);
    b.alu_reg(Op::Smod32Reg, 0, 1);
    b.alu_reg(Op::MovSx16To64, 2, 0);
    b.neg64(0);
    b.neg32(1);
    b.byte_swap(Op::Be16, 0);
    b.byte_swap(Op::Bswap64, 1);
    b.load(Op::LdxHSx, 3, 1, -2);
    b.store_imm(Op::StDw, 10, -8, -5);
    b.store_reg(Op::StxB, 10, -9, 3);
    b.atomic(Op::AtomicFetchXor32, 10, -16, 4);
    b.atomic(Op::AtomicCmpXchg64, 10, -8, 5);
    b.ld_abs(Op::LdAbsH, 12);
    b.ld_ind(Op::LdIndW, 6, 14);
    b.lddw(7, -2);
    b.lddw_map_fd(1, 3);
    b.lddw_btf_id(2, 77);
    b.lddw_map_idx(3, 0);
    b.lddw_func(4, sub);
    b.call_helper(5);
    b.call_kfunc(1234);
    b.call_reg(4);
    b.call_local(sub);
    b.jump_imm(Op::Jsge32Imm, 1, -3, out);
    b.jump_reg(Op::Jset64Reg, 1, 2, out);
    b.jump32(out);
    b.bind(out);
    b.exit();
    b.bind(sub);
    b.alu_imm(Op::Mov32Imm, 0, 0);
    b.exit();
    let prog = b.link().unwrap();
    validate(&prog).unwrap();
    assert_eq!(Program::from_bytes(&prog.to_bytes()).unwrap(), prog);
    // The discriminators were filled in from the table.
    let sdiv = at(&prog, 1);
    assert_eq!((sdiv.op, sdiv.off), (Op::Sdiv64Imm, 1));
    let be16 = at(&prog, 6);
    assert_eq!((be16.op, be16.imm), (Op::Be16, 16));
    let fetch_xor = at(&prog, 11);
    assert_eq!((fetch_xor.op, fetch_xor.imm), (Op::AtomicFetchXor32, 0xa1));
}
