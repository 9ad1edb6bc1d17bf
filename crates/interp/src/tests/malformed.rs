//! Malformed programs: every structural fault `validate` exists to catch still ends in a
//! trap naming the right instruction, never a panic.

use super::{exit, filler, i, run_slots};
use weir_isa::ebpf::Op;
use weir_program::{Trap, TrapCode};

fn bad_jump(pc: usize) -> Result<u64, Trap> {
    Err(Trap::new(TrapCode::BadJump, pc))
}

#[test]
fn unconditional_jumps_outside_the_program() {
    assert_eq!(run_slots(vec![i(Op::Ja, 0, 0, 100, 0), exit()]), bad_jump(0));
    assert_eq!(run_slots(vec![i(Op::Mov64Imm, 0, 0, 0, 0), i(Op::Ja, 0, 0, -3, 0)]), bad_jump(1));
    assert_eq!(run_slots(vec![i(Op::Ja32, 0, 0, 0, i64::from(i32::MIN)), exit()]), bad_jump(0));
    // A jump to one past the end is outside too.
    assert_eq!(run_slots(vec![i(Op::Ja, 0, 0, 1, 0), exit()]), bad_jump(0));
}

#[test]
fn conditional_jumps_outside_the_program_trap_only_when_taken() {
    let program = |r1| {
        vec![
            i(Op::Mov64Imm, 1, 0, 0, r1),
            i(Op::Mov64Imm, 0, 0, 0, 5),
            i(Op::Jeq64Imm, 1, 0, i16::MAX, 1),
            i(Op::Jne64Imm, 1, 0, i16::MIN, 1),
            exit(),
        ]
    };
    // r1 = 1: the first jump is taken.
    assert_eq!(run_slots(program(1)), bad_jump(2));
    // r1 = 0: the first is not, the second is.
    assert_eq!(run_slots(program(0)), bad_jump(3));
    let not_taken = vec![i(Op::Mov64Imm, 0, 0, 0, 5), i(Op::Jeq64Imm, 0, 0, 9, 0), exit()];
    assert_eq!(run_slots(not_taken), Ok(5));
}

#[test]
fn jumps_into_the_second_slot_of_lddw() {
    let lddw = i(Op::Lddw, 0, 0, 0, 7);
    assert_eq!(run_slots(vec![i(Op::Ja, 0, 0, 1, 0), lddw, filler(), exit()]), bad_jump(0));
    let cond = vec![i(Op::Jeq64Imm, 0, 0, 1, 0), lddw, filler(), exit()];
    assert_eq!(run_slots(cond), bad_jump(0));
    let back = vec![lddw, filler(), i(Op::Jeq64Imm, 0, 0, -2, 7), exit()];
    assert_eq!(run_slots(back), bad_jump(2));
}

#[test]
fn running_off_the_end() {
    assert_eq!(run_slots(vec![i(Op::Mov64Imm, 0, 0, 0, 1)]), bad_jump(0));
    let two = vec![i(Op::Mov64Imm, 0, 0, 0, 1), i(Op::Jeq64Imm, 0, 0, -2, 0)];
    assert_eq!(run_slots(two), bad_jump(1));
    // Returning from a call that is the last instruction also runs off the end.
    let call_last = vec![i(Op::Ja, 0, 0, 1, 0), exit(), i(Op::CallLocal, 0, 1, 0, -2)];
    assert_eq!(run_slots(call_last), bad_jump(2));
}

#[test]
fn stray_and_missing_lddw_halves() {
    // Falling into a filler names the instruction before it.
    let stray = vec![i(Op::Mov64Imm, 0, 0, 0, 1), filler(), exit()];
    assert_eq!(run_slots(stray), bad_jump(0));
    assert_eq!(run_slots(vec![filler(), exit()]), bad_jump(0));
    // An lddw without its filler cannot run.
    let missing = vec![i(Op::Lddw, 0, 0, 0, 7), exit()];
    assert_eq!(run_slots(missing), Err(Trap::new(TrapCode::Unsupported, 0)));
    let at_end = vec![i(Op::Mov64Imm, 0, 0, 0, 1), i(Op::Lddw, 0, 0, 0, 7)];
    assert_eq!(run_slots(at_end), Err(Trap::new(TrapCode::Unsupported, 1)));
}

#[test]
fn bad_call_targets() {
    let bad = |pc| Err(Trap::new(TrapCode::BadCallTarget, pc));
    assert_eq!(run_slots(vec![i(Op::CallLocal, 0, 1, 0, 10), exit()]), bad(0));
    assert_eq!(run_slots(vec![i(Op::CallLocal, 0, 1, 0, -2), exit()]), bad(0));
    // Slot 3 is the filler of the lddw at slot 2.
    let into_filler = vec![i(Op::CallLocal, 0, 1, 0, 2), exit(), i(Op::Lddw, 0, 0, 0, 1), filler()];
    assert_eq!(run_slots(into_filler), bad(0));
    // A function address naming no instruction is refused where it is loaded.
    let func = vec![i(Op::LddwFunc, 1, 4, 0, 5), filler(), exit()];
    assert_eq!(run_slots(func), bad(0));
    let func_filler = vec![i(Op::LddwFunc, 1, 4, 0, 0), filler(), exit()];
    assert_eq!(run_slots(func_filler), bad(0));
    // Its own slot is an instruction, so that address is fine.
    let func_self = vec![i(Op::LddwFunc, 0, 4, 0, -1), filler(), exit()];
    assert_eq!(run_slots(func_self), Ok(crate::guest::FUNC_BASE));
}

#[test]
fn registers_that_do_not_exist() {
    let unsupported = |pc| Err(Trap::new(TrapCode::Unsupported, pc));
    assert_eq!(run_slots(vec![i(Op::Mov64Imm, 11, 0, 0, 1), exit()]), unsupported(0));
    assert_eq!(run_slots(vec![i(Op::Add64Reg, 0, 12, 0, 0), exit()]), unsupported(0));
    assert_eq!(run_slots(vec![i(Op::LdxW, 0, 15, 0, 0), exit()]), unsupported(0));
    assert_eq!(run_slots(vec![i(Op::LdIndB, 0, 13, 0, 0), exit()]), unsupported(0));
    // Fields the operation does not use are ignored, whatever they hold.
    assert_eq!(run_slots(vec![i(Op::Mov64Imm, 0, 14, 3, 9), exit()]), Ok(9));
    assert_eq!(run_slots(vec![i(Op::Mov64Imm, 0, 0, 0, 2), i(Op::Exit, 15, 15, 7, 7)]), Ok(2));
}

#[test]
fn writes_to_r10_are_plain_writes() {
    // Validation refuses them; at run time r10 is an ordinary register and memory
    // checks still apply to whatever it holds.
    let moved = vec![i(Op::Mov64Imm, 10, 0, 0, 5), i(Op::Mov64Reg, 0, 10, 0, 0), exit()];
    assert_eq!(run_slots(moved), Ok(5));
    let load = vec![i(Op::Mov64Imm, 10, 0, 0, 5), i(Op::LdxB, 0, 10, -1, 0), exit()];
    assert_eq!(run_slots(load), Err(Trap::memory(TrapCode::OutOfBounds, 1, 4, 1)));
}

#[test]
fn immediates_wider_than_the_encoding_are_truncated() {
    let wide = vec![i(Op::Mov64Imm, 0, 0, 0, 0), i(Op::Add64Imm, 0, 0, 0, 0x1_0000_0005), exit()];
    assert_eq!(run_slots(wide), Ok(5));
    let wide_neg = vec![i(Op::Mov64Imm, 0, 0, 0, 0x7_ffff_ffff), exit()];
    assert_eq!(run_slots(wide_neg), Ok(u64::MAX));
}

#[test]
fn oversized_inputs_are_refused_before_running() {
    let interp = super::unvalidated(vec![i(Op::Mov64Imm, 0, 0, 0, 1), exit()]);
    let mut cache = interp.cache();
    let window = crate::guest::REGION_WINDOW as usize;
    let mut big = vec![0u8; window + 1];
    let input = crate::Input::new().packet(&mut big);
    let trap = interp.run(&mut cache, input).unwrap_err();
    assert_eq!(
        (trap.code, trap.pc, trap.addr),
        (TrapCode::OutOfBounds, 0, crate::guest::PACKET_BASE)
    );
    // Exactly the window is fine.
    big.truncate(window);
    assert_eq!(interp.run(&mut cache, crate::Input::new().packet(&mut big)), Ok(1));
}
