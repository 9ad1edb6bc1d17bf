//! Tests that need the crate's insides: programs `validate` would refuse, run anyway
//! through the unvalidated constructor to show that the run-time checks alone keep them
//! harmless, and random programs (most of which are malformed) for the same reason.
#![allow(clippy::arithmetic_side_effects)]

mod malformed;
mod random;

use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::Bindings;
use weir_program::{Program, Trap};

use crate::{Config, Interpreter};

fn unvalidated(insns: Vec<Insn>) -> Interpreter {
    Interpreter::new_unvalidated(
        &Program::from_insns(insns),
        Bindings::conformance(),
        Config::default(),
    )
}

/// Runs exactly these slots (no filler slots are added).
fn run_slots(insns: Vec<Insn>) -> Result<u64, Trap> {
    let interp = unvalidated(insns);
    let mut cache = interp.cache();
    interp.run_mem(&mut cache, &mut [])
}

fn i(op: Op, dst: u8, src: u8, off: i16, imm: i64) -> Insn {
    Insn::new(op, dst, src, off, imm)
}

fn filler() -> Insn {
    i(Op::LddwHigh, 0, 0, 0, 0)
}

fn exit() -> Insn {
    i(Op::Exit, 0, 0, 0, 0)
}
