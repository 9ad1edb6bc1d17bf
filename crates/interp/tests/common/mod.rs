//! Helpers shared by the interpreter's integration tests: short constructors for
//! instructions and one-call ways to build and run a program.
#![allow(dead_code)]

use weir_interp::{Cache, Config, Input, Interpreter};
use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::Bindings;
use weir_program::{Program, Trap, Verified};

pub fn insn(op: Op, dst: u8, src: u8, off: i16, imm: i64) -> Insn {
    Insn::new(op, dst, src, off, imm)
}

/// `op dst, imm` (ALU with an immediate, or any dst+imm shape).
pub fn imm(op: Op, dst: u8, imm: i64) -> Insn {
    Insn::new(op, dst, 0, 0, imm)
}

/// `op dst, src`.
pub fn reg(op: Op, dst: u8, src: u8) -> Insn {
    Insn::new(op, dst, src, 0, 0)
}

pub fn mov(dst: u8, value: i64) -> Insn {
    imm(Op::Mov64Imm, dst, value)
}

pub fn lddw(dst: u8, value: u64) -> Insn {
    Insn::new(Op::Lddw, dst, 0, 0, value as i64)
}

/// A conditional jump with an immediate.
pub fn jmp_imm(op: Op, dst: u8, value: i64, off: i16) -> Insn {
    Insn::new(op, dst, 0, off, value)
}

/// A conditional jump against a register.
pub fn jmp_reg(op: Op, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op, dst, src, off, 0)
}

pub fn ja(off: i16) -> Insn {
    Insn::new(Op::Ja, 0, 0, off, 0)
}

/// A load `dst = [src + off]` or any dst/src/off shape (stores, atomics).
pub fn mem(op: Op, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op, dst, src, off, 0)
}

/// A store of an immediate `[dst + off] = value`.
pub fn st(op: Op, dst: u8, off: i16, value: i64) -> Insn {
    Insn::new(op, dst, 0, off, value)
}

pub fn call(id: i64) -> Insn {
    Insn::new(Op::Call, 0, 0, 0, id)
}

pub fn call_local(delta: i64) -> Insn {
    Insn::new(Op::CallLocal, 0, 1, 0, delta)
}

pub fn exit() -> Insn {
    Insn::new(Op::Exit, 0, 0, 0, 0)
}

/// Slot-indexed program: every `lddw` gets its filler slot, as the builder does.
pub fn program(insns: &[Insn]) -> Program {
    let mut slots = Vec::with_capacity(insns.len() * 2);
    for &i in insns {
        slots.push(i);
        if i.op.is_lddw() {
            slots.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
        }
    }
    Program::from_insns(slots)
}

pub fn interp_with(insns: &[Insn], bindings: Bindings, config: Config) -> Interpreter {
    let program = Verified::structural(program(insns)).expect("valid program");
    Interpreter::new(&program, bindings, config)
}

pub fn interp(insns: &[Insn]) -> Interpreter {
    interp_with(insns, Bindings::conformance(), Config::default())
}

/// Runs with the conformance convention over `mem`.
pub fn run_mem(insns: &[Insn], mem: &mut [u8]) -> Result<u64, Trap> {
    let i = interp(insns);
    let mut cache = i.cache();
    i.run_mem(&mut cache, mem)
}

/// Runs with no memory at all.
pub fn run(insns: &[Insn]) -> Result<u64, Trap> {
    run_mem(insns, &mut [])
}

pub fn run_input(insns: &[Insn], bindings: Bindings, input: Input<'_>) -> Result<u64, Trap> {
    let i = interp_with(insns, bindings, Config::default());
    let mut cache: Cache = i.cache();
    i.run(&mut cache, input)
}

/// `r0 = a; r0 op= imm; exit`.
pub fn eval_imm(op: Op, a: u64, b: i32) -> u64 {
    run(&[lddw(0, a), imm(op, 0, i64::from(b)), exit()]).expect("alu runs")
}

/// `r0 = a; r1 = b; r0 op= r1; exit`.
pub fn eval_reg(op: Op, a: u64, b: u64) -> u64 {
    run(&[lddw(0, a), lddw(1, b), reg(op, 0, 1), exit()]).expect("alu runs")
}

/// `r1 = a; r0 = op r1 (dst-only ops apply to r0 = a)`.
pub fn eval_unary(op: Op, a: u64) -> u64 {
    run(&[lddw(0, a), reg(op, 0, 0), exit()]).expect("alu runs")
}

/// `r1 = a; r0 = movsx r1`.
pub fn eval_movsx(op: Op, a: u64) -> u64 {
    run(&[lddw(1, a), mov(0, 0x5a5a), reg(op, 0, 1), exit()]).expect("movsx runs")
}
