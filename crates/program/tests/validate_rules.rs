//! One passing and one failing program for every structural rule of `validate` and
//! `validate_calls`, each failure pinned to its exact kind and instruction index.

use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::Bindings;
use weir_program::{
    validate, validate_calls, Program, ValidateError, ValidateErrorKind as K, MAX_SLOTS,
};

fn i(op: Op, dst: u8, src: u8, off: i16, imm: i64) -> Insn {
    Insn::new(op, dst, src, off, imm)
}

fn exit() -> Insn {
    i(Op::Exit, 0, 0, 0, 0)
}

fn mov(dst: u8, imm: i64) -> Insn {
    i(Op::Mov64Imm, dst, 0, 0, imm)
}

fn high() -> Insn {
    i(Op::LddwHigh, 0, 0, 0, 0)
}

fn ja(off: i16) -> Insn {
    i(Op::Ja, 0, 0, off, 0)
}

fn call_local(imm: i64) -> Insn {
    i(Op::CallLocal, 0, 1, 0, imm)
}

fn ok(insns: Vec<Insn>) {
    let prog = Program::from_insns(insns);
    if let Err(e) = validate(&prog) {
        panic!("expected a valid program, got {e}: {prog:?}");
    }
}

fn fails(insns: Vec<Insn>, index: usize, kind: K) {
    let prog = Program::from_insns(insns);
    assert_eq!(validate(&prog), Err(ValidateError { index, kind }), "{prog:?}");
}

#[test]
fn empty() {
    fails(vec![], 0, K::Empty);
    ok(vec![exit()]);
}

#[test]
fn too_long() {
    let mut insns = vec![exit(); MAX_SLOTS];
    ok(insns.clone());
    insns.push(exit());
    fails(insns, MAX_SLOTS, K::TooLong { len: MAX_SLOTS + 1 });
}

#[test]
fn registers_exist() {
    ok(vec![i(Op::Mov64Reg, 9, 10, 0, 0), i(Op::CallReg, 10, 0, 0, 0), exit()]);
    fails(vec![mov(11, 0), exit()], 0, K::BadRegister { field: "dst", value: 11 });
    fails(
        vec![mov(0, 0), i(Op::Add64Reg, 1, 15, 0, 0), exit()],
        1,
        K::BadRegister { field: "src", value: 15 },
    );
    fails(vec![i(Op::CallReg, 11, 0, 0, 0), exit()], 0, K::BadRegister { field: "dst", value: 11 });
    fails(vec![i(Op::LdIndW, 0, 12, 0, 4), exit()], 0, K::BadRegister { field: "src", value: 12 });
}

#[test]
fn unused_fields_are_zero() {
    ok(vec![i(Op::StW, 10, 0, -4, 7), i(Op::LdxW, 0, 10, -4, 0), exit()]);
    fails(
        vec![i(Op::Exit, 0, 0, 0, 7)],
        0,
        K::UnusedFieldSet { mnemonic: "exit", field: "imm", value: 7 },
    );
    fails(
        vec![i(Op::Add64Imm, 1, 3, 0, 7), exit()],
        0,
        K::UnusedFieldSet { mnemonic: "add", field: "src", value: 3 },
    );
    fails(
        vec![mov(0, 0), i(Op::LdxW, 0, 1, 0, 9), exit()],
        1,
        K::UnusedFieldSet { mnemonic: "ldxw", field: "imm", value: 9 },
    );
    // An unused register field is reported as set, not as a bad register.
    fails(
        vec![i(Op::Ja, 12, 0, 0, 0), exit()],
        0,
        K::UnusedFieldSet { mnemonic: "ja", field: "dst", value: 12 },
    );
}

#[test]
fn discriminator_agrees_with_op() {
    // The table value (as decoded) and 0 (as hand-built) both mean the op.
    ok(vec![
        i(Op::Sdiv64Imm, 0, 0, 1, 3),
        i(Op::Sdiv64Imm, 0, 0, 0, 3),
        i(Op::Le16, 0, 0, 0, 16),
        i(Op::AtomicFetchAdd64, 10, 1, -8, 1),
        i(Op::CallLocal, 0, 0, 0, 1),
        exit(),
        exit(),
    ]);
    fails(
        vec![i(Op::Sdiv64Imm, 0, 0, 2, 3), exit()],
        0,
        K::BadDiscriminator { mnemonic: "sdiv", field: "off", expected: 1, value: 2 },
    );
    fails(
        vec![i(Op::Le16, 0, 0, 0, 32), exit()],
        0,
        K::BadDiscriminator { mnemonic: "le16", field: "imm", expected: 16, value: 32 },
    );
    fails(
        vec![i(Op::LddwMapFd, 1, 2, 0, 3), high(), exit()],
        0,
        K::BadDiscriminator { mnemonic: "lddw", field: "src", expected: 1, value: 2 },
    );
}

#[test]
fn immediates_fit_32_bits_except_lddw() {
    ok(vec![
        mov(0, i64::from(i32::MIN)),
        mov(0, i64::from(i32::MAX)),
        i(Op::Lddw, 0, 0, 0, i64::MAX),
        high(),
        exit(),
    ]);
    fails(vec![mov(0, 1 << 32), exit()], 0, K::ImmOutOfRange { mnemonic: "mov", value: 1 << 32 });
    fails(
        vec![mov(0, 0), i(Op::Mov32Imm, 0, 0, 0, 0xffff_ffff), exit()],
        1,
        K::ImmOutOfRange { mnemonic: "mov32", value: 0xffff_ffff },
    );
}

#[test]
fn lddw_has_its_second_slot() {
    ok(vec![i(Op::Lddw, 0, 0, 0, 1), high(), exit()]);
    fails(vec![mov(0, 0), i(Op::Lddw, 0, 0, 0, 1), exit()], 1, K::MissingLddwHigh);
    fails(vec![exit(), i(Op::LddwMapFd, 1, 1, 0, 3)], 1, K::MissingLddwHigh);
    fails(vec![i(Op::Lddw, 0, 0, 0, 1), high(), high(), exit()], 2, K::StrayLddwHigh);
    fails(vec![high(), exit()], 0, K::StrayLddwHigh);
    fails(
        vec![i(Op::Lddw, 0, 0, 0, 1), i(Op::LddwHigh, 0, 0, 0, 5), exit()],
        1,
        K::UnusedFieldSet { mnemonic: "lddw (second slot)", field: "imm", value: 5 },
    );
}

#[test]
fn r10_is_never_written() {
    ok(vec![
        i(Op::StxDw, 10, 1, -8, 0),
        i(Op::AtomicAdd64, 10, 10, -8, 0),
        i(Op::AtomicCmpXchg64, 10, 10, -8, 0xf1),
        i(Op::Mov64Reg, 0, 10, 0, 0),
        exit(),
    ]);
    let dst = K::WritesFramePointer { field: "dst" };
    let src = K::WritesFramePointer { field: "src" };
    fails(vec![mov(10, 1), exit()], 0, dst.clone());
    fails(vec![i(Op::LdxDw, 10, 1, 0, 0), exit()], 0, dst.clone());
    fails(vec![i(Op::Neg32, 10, 0, 0, 0), exit()], 0, dst.clone());
    fails(vec![mov(0, 0), i(Op::Lddw, 10, 0, 0, 1), high(), exit()], 1, dst);
    fails(vec![i(Op::AtomicFetchAdd64, 1, 10, 0, 1), exit()], 0, src.clone());
    fails(vec![i(Op::AtomicXchg32, 1, 10, 0, 0xe1), exit()], 0, src);
}

#[test]
fn jump_targets_are_in_the_program() {
    ok(vec![ja(0), i(Op::Jeq64Imm, 1, 0, -2, 0), i(Op::Ja32, 0, 0, 0, -3), exit()]);
    fails(vec![ja(1), exit()], 0, K::JumpOutOfProgram { target: 2, len: 2 });
    fails(vec![mov(0, 0), ja(-3), exit()], 1, K::JumpOutOfProgram { target: -1, len: 3 });
    fails(
        vec![mov(0, 0), i(Op::Ja32, 0, 0, 0, 70_000), exit()],
        1,
        K::JumpOutOfProgram { target: 70_002, len: 3 },
    );
    fails(vec![i(Op::Jne32Reg, 1, 2, 5, 0), exit()], 0, K::JumpOutOfProgram { target: 6, len: 2 });
}

#[test]
fn jumps_do_not_land_in_lddw() {
    ok(vec![ja(0), i(Op::Lddw, 0, 0, 0, 1), high(), exit()]);
    fails(vec![ja(1), i(Op::Lddw, 0, 0, 0, 1), high(), exit()], 0, K::JumpIntoLddw { target: 2 });
    fails(
        vec![i(Op::Lddw, 0, 0, 0, 1), high(), i(Op::Ja32, 0, 0, 0, -2), exit()],
        2,
        K::JumpIntoLddw { target: 1 },
    );
}

#[test]
fn call_targets_are_instructions() {
    ok(vec![call_local(1), exit(), exit()]);
    fails(vec![call_local(5), exit()], 0, K::CallOutOfProgram { target: 6, len: 2 });
    fails(vec![call_local(-2), exit()], 0, K::CallOutOfProgram { target: -1, len: 2 });
    fails(
        vec![call_local(2), exit(), i(Op::Lddw, 0, 0, 0, 1), high(), exit()],
        0,
        K::CallIntoLddw { target: 3 },
    );
}

#[test]
fn function_references_are_instructions() {
    ok(vec![i(Op::LddwFunc, 1, 4, 0, 2), high(), exit(), exit()]);
    // The offset is the low half, signed: 0xffff_fffe is -2.
    ok(vec![exit(), i(Op::LddwFunc, 1, 4, 0, 0xffff_fffe), high(), exit()]);
    fails(
        vec![i(Op::LddwFunc, 1, 4, 0, 2), high(), exit()],
        0,
        K::FuncRefOutOfProgram { target: 3, len: 3 },
    );
    fails(vec![i(Op::LddwFunc, 1, 4, 0, 0), high(), exit()], 0, K::FuncRefIntoLddw { target: 1 });
}

#[test]
fn jumps_stay_in_their_function() {
    // main: 0..3, callee: 3..5 (with a loop back to its own start).
    ok(vec![call_local(2), mov(0, 0), exit(), i(Op::Jeq64Imm, 1, 0, -1, 0), exit()]);
    fails(
        vec![call_local(2), ja(1), exit(), mov(0, 1), exit()],
        1,
        K::JumpOutOfFunction { target: 3, function_start: 0, function_end: 3 },
    );
    fails(
        vec![call_local(2), mov(0, 0), exit(), i(Op::Jeq64Imm, 1, 0, -3, 0), exit()],
        3,
        K::JumpOutOfFunction { target: 1, function_start: 3, function_end: 5 },
    );
    // A function address taken by lddw func starts a function just like a call does.
    fails(
        vec![i(Op::LddwFunc, 1, 4, 0, 3), high(), ja(1), exit(), exit()],
        2,
        K::JumpOutOfFunction { target: 4, function_start: 0, function_end: 4 },
    );
}

#[test]
fn functions_end_with_exit_or_ja() {
    ok(vec![mov(0, 0), exit()]);
    ok(vec![mov(0, 0), ja(-2)]);
    ok(vec![call_local(1), i(Op::Ja32, 0, 0, 0, -2), exit()]);
    fails(vec![mov(0, 0)], 0, K::FallsOffEnd { function_start: 0, function_end: 1 });
    fails(
        vec![mov(0, 0), i(Op::Jeq64Imm, 0, 0, -2, 0)],
        1,
        K::FallsOffEnd { function_start: 0, function_end: 2 },
    );
    // The last instruction of a function ending in lddw is the lddw, not its second slot.
    fails(
        vec![mov(0, 0), i(Op::Lddw, 0, 0, 0, 1), high()],
        1,
        K::FallsOffEnd { function_start: 0, function_end: 3 },
    );
    // main falls into the function that starts after it.
    fails(
        vec![call_local(1), mov(0, 0), exit()],
        1,
        K::FallsOffEnd { function_start: 0, function_end: 2 },
    );
    fails(
        vec![call_local(1), exit(), mov(0, 0)],
        2,
        K::FallsOffEnd { function_start: 2, function_end: 3 },
    );
}

#[test]
fn slot_errors_come_before_control_flow_errors() {
    // Slot 0 jumps out of the program, but slot 1's bad register is a first-pass error.
    fails(vec![ja(5), mov(11, 0), exit()], 1, K::BadRegister { field: "dst", value: 11 });
}

#[test]
fn display_names_the_instruction() {
    let err = validate(&Program::from_insns(vec![ja(1), exit()])).unwrap_err();
    assert_eq!(err.to_string(), "instruction 0: jump target 2 is outside the program (slots 0..2)");
    let err = validate(&Program::from_insns(vec![mov(10, 0), exit()])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "instruction 0: writes r10, the read-only frame pointer (through dst)"
    );
}

#[test]
fn calls_need_bindings() {
    let conformance = Bindings::conformance();
    let prog = |insns| Program::from_insns(insns);
    let calls = |id: i64| vec![mov(1, 1), i(Op::Call, 0, 0, 0, id), exit()];
    assert_eq!(validate_calls(&prog(calls(5)), &conformance), Ok(()));
    assert_eq!(
        validate_calls(&prog(calls(6)), &conformance),
        Err(ValidateError { index: 1, kind: K::UnknownHelper { id: 6 } })
    );
    assert_eq!(
        validate_calls(&prog(calls(5)), &Bindings::new()),
        Err(ValidateError { index: 1, kind: K::UnknownHelper { id: 5 } })
    );
    assert_eq!(
        validate_calls(&prog(calls(-1)), &conformance),
        Err(ValidateError { index: 1, kind: K::UnknownHelper { id: -1 } })
    );
    let kfunc = prog(vec![i(Op::CallKfunc, 0, 2, 0, 1234), exit()]);
    assert_eq!(validate(&kfunc), Ok(()));
    assert_eq!(
        validate_calls(&kfunc, &conformance),
        Err(ValidateError { index: 0, kind: K::KfuncUnsupported { id: 1234 } })
    );
    // Local calls and callx need no binding.
    let local = prog(vec![call_local(1), exit(), i(Op::CallReg, 1, 0, 0, 0), exit()]);
    assert_eq!(validate_calls(&local, &Bindings::new()), Ok(()));
}
