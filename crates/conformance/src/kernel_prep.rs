//! Preparing corpus programs for the Linux kernel, the independent oracle of
//! `tests/kernel_oracle.rs`. Pure code, kept apart from the syscalls so it can be tested
//! anywhere.
//!
//! The kernel runs a socket filter with `r1` = the skb and returns only the low 32 bits of
//! `r0`. So each program is sent with a two-slot prologue `mov r1, 0; mov r2, 0` (the
//! corpus's own entry state when a case has no memory; slot offsets are relative, so nothing
//! else moves), and, for programs without local calls, a second time with every `exit`
//! turned into a jump to an appended `rsh r0, 32; exit`, which returns the high 32 bits.

use weir_isa::ebpf::{encode, Insn, Op, RawInsn};
use weir_program::Program;

/// Which instructions keep a case away from the kernel: helper calls (helper 5 means
/// "unwind" only in the corpus), callx and kfuncs, and legacy packet loads (they read the
/// corpus's memory, not the kernel's packet).
pub fn needs_corpus_runtime(program: &Program) -> bool {
    program.insns().iter().any(|insn| {
        matches!(
            insn.op,
            Op::Call
                | Op::CallReg
                | Op::CallKfunc
                | Op::LdAbsB
                | Op::LdAbsH
                | Op::LdAbsW
                | Op::LdIndB
                | Op::LdIndH
                | Op::LdIndW
        ) || insn.op.pseudo_kind().is_some()
    })
}

fn has_local_calls(program: &Program) -> bool {
    program.insns().iter().any(|insn| matches!(insn.op, Op::CallLocal))
}

fn prologue() -> [Insn; 2] {
    [Insn::new(Op::Mov64Imm, 1, 0, 0, 0), Insn::new(Op::Mov64Imm, 2, 0, 0, 0)]
}

/// The program as the kernel gets it to check the low 32 bits of `r0`.
pub fn low_half_program(program: &Program) -> Vec<RawInsn> {
    let mut insns = prologue().to_vec();
    insns.extend_from_slice(program.insns());
    encode(&insns)
}

/// The program returning the high 32 bits of `r0`, or `None` when it has local calls (an
/// `exit` there may return from a function, not end the program).
pub fn high_half_program(program: &Program) -> Option<Vec<RawInsn>> {
    if has_local_calls(program) {
        return None;
    }
    let mut insns = prologue().to_vec();
    insns.extend_from_slice(program.insns());
    let tail = insns.len();
    for (pc, insn) in insns.iter_mut().enumerate() {
        if insn.op != Op::Exit {
            continue;
        }
        // The jump at `pc` lands on `pc + offset + 1`.
        let offset = i64::try_from(tail).ok()? - i64::try_from(pc).ok()? - 1;
        *insn = match i16::try_from(offset) {
            Ok(off) => Insn::new(Op::Ja, 0, 0, off, 0),
            Err(_) => Insn::new(Op::Ja32, 0, 0, 0, offset),
        };
    }
    insns.push(Insn::new(Op::Rsh64Imm, 0, 0, 0, 32));
    insns.push(Insn::new(Op::Exit, 0, 0, 0, 0));
    Some(encode(&insns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_isa::ebpf::decode;

    fn program(insns: Vec<Insn>) -> Program {
        Program::from_insns(insns)
    }

    #[test]
    fn exits_jump_to_the_tail() {
        let p = program(vec![
            Insn::new(Op::Jeq64Imm, 1, 0, 1, 0),
            Insn::new(Op::Exit, 0, 0, 0, 0),
            Insn::new(Op::Lddw, 0, 0, 0, 1 << 40),
            Insn::new(Op::LddwHigh, 0, 0, 0, 0),
            Insn::new(Op::Exit, 0, 0, 0, 0),
        ]);
        let insns = decode(&high_half_program(&p).unwrap()).unwrap();
        assert_eq!(insns.len(), 2 + 5 + 2);
        assert_eq!(insns[3], Insn::new(Op::Ja, 0, 0, 3, 0));
        assert_eq!(insns[6], Insn::new(Op::Ja, 0, 0, 0, 0));
        assert_eq!(insns[7], Insn::new(Op::Rsh64Imm, 0, 0, 0, 32));
        assert_eq!(insns[8].op, Op::Exit);
        assert_eq!(decode(&low_half_program(&p)).unwrap().len(), 7);
    }

    #[test]
    fn local_calls_and_helpers_are_recognized() {
        let call = program(vec![
            Insn::new(Op::CallLocal, 0, 1, 0, 1),
            Insn::new(Op::Exit, 0, 0, 0, 0),
            Insn::new(Op::Exit, 0, 0, 0, 0),
        ]);
        assert!(high_half_program(&call).is_none());
        assert!(!needs_corpus_runtime(&call));
        let helper =
            program(vec![Insn::new(Op::Call, 0, 0, 0, 5), Insn::new(Op::Exit, 0, 0, 0, 0)]);
        assert!(needs_corpus_runtime(&helper));
    }
}
