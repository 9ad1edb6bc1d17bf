//! How deep into frame 0 a run of a proven program can write: the lowest offset from `r10`
//! of any stack byte a store, an atomic or a helper's memory argument reaches, so that
//! between runs only those bytes are zeroed (not the whole frame).
//!
//! A forward dataflow over the program's control flow tracks, per register, whether it may
//! hold a pointer into frame 0 and the lowest offset from `r10` it may then have. It is
//! sound only for programs the verifier proved (a proof rules out stack pointers made from
//! scalars, and the JIT runs such a program's proven code only on runs that meet the
//! proof's assumptions); anything it cannot follow gives no answer, and the whole frame is
//! zeroed as before: a stack pointer stored to memory (a spill), changed by anything but a
//! constant add or subtract, used as a store base or helper argument after such a change,
//! or a local call (callee frames) or a call through a register.

use weir_isa::ebpf::{Insn, Op, Operands};

/// What a register may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    /// Not a pointer into the stack.
    NotStack,
    /// Possibly `r10 + k` for some `k >= min` (or not a stack pointer at all).
    Stack(i64),
    /// Possibly a stack pointer at an offset the analysis does not know.
    Unknown,
}

impl Value {
    fn join(self, other: Value) -> Value {
        match (self, other) {
            (Value::Unknown, _) | (_, Value::Unknown) => Value::Unknown,
            (Value::Stack(a), Value::Stack(b)) => Value::Stack(a.min(b)),
            (Value::Stack(a), Value::NotStack) | (Value::NotStack, Value::Stack(a)) => {
                Value::Stack(a)
            }
            (Value::NotStack, Value::NotStack) => Value::NotStack,
        }
    }

    fn is_stack(self) -> bool {
        self != Value::NotStack
    }
}

type State = [Value; 11];

/// The lowest offset from `r10` (0 or negative, at least `-frame`) any run can write in
/// frame 0, or `None` when the analysis cannot tell (see the module docs). `frame`: the
/// bytes of a frame.
pub(crate) fn lowest_write(insns: &[Insn], frame: u64) -> Option<i64> {
    let floor = -i64::try_from(frame).ok()?;
    let mut states: Vec<Option<State>> = vec![None; insns.len()];
    let mut entry = [Value::NotStack; 11];
    entry[10] = Value::Stack(0);
    *states.first_mut()? = Some(entry);
    let mut work = vec![0usize];
    let mut lowest = 0i64;
    // Each state only grows (a register's offset only falls, bounded by `floor`), so this
    // ends; the bound is a guard against a mistake, not a limit a program reaches.
    let mut steps = 0usize;
    let limit = insns.len().saturating_mul(64).saturating_add(1024);
    while let Some(pc) = work.pop() {
        steps += 1;
        if steps > limit {
            return None;
        }
        let insn = insns.get(pc)?;
        let mut s = (*states.get(pc)?)?;
        let reg = |s: &State, r: u8| s.get(usize::from(r)).copied();
        let mut write_at = |base: Value, off: i64| -> Option<()> {
            match base {
                Value::NotStack => Some(()),
                Value::Stack(k) => {
                    lowest = lowest.min(k.checked_add(off)?);
                    Some(())
                }
                Value::Unknown => None,
            }
        };
        let operands = insn.op.spec().map(|spec| spec.operands)?;
        let next = pc.checked_add(insn.slots())?;
        let mut successors: [Option<usize>; 2] = [Some(next), None];
        match operands {
            Operands::DstImm | Operands::DstSrc | Operands::Dst => {
                let dst = reg(&s, insn.dst)?;
                let src = if operands == Operands::DstSrc { reg(&s, insn.src)? } else { dst };
                let value = match insn.op {
                    Op::Mov64Imm => Value::NotStack,
                    Op::Mov64Reg => src,
                    Op::Add64Imm | Op::Sub64Imm => match dst {
                        Value::Stack(k) => {
                            let delta = if insn.op == Op::Add64Imm { insn.imm } else { -insn.imm };
                            Value::Stack(k.checked_add(delta.min(0))?)
                        }
                        other => other,
                    },
                    _ if dst.is_stack() || src.is_stack() => Value::Unknown,
                    _ => Value::NotStack,
                };
                *s.get_mut(usize::from(insn.dst))? = value;
            }
            Operands::Load => *s.get_mut(usize::from(insn.dst))? = Value::NotStack,
            Operands::StoreImm => write_at(reg(&s, insn.dst)?, i64::from(insn.off))?,
            Operands::StoreReg => {
                // A stack pointer written to memory could come back from any load.
                if reg(&s, insn.src)?.is_stack() {
                    return None;
                }
                write_at(reg(&s, insn.dst)?, i64::from(insn.off))?;
            }
            Operands::DstImm64 | Operands::Pseudo(_) => {
                *s.get_mut(usize::from(insn.dst))? = Value::NotStack;
            }
            Operands::Abs | Operands::Ind => *s.get_mut(0)? = Value::NotStack,
            // `bpf_loop`: its callbacks run in frames below.
            Operands::CallImm if insn.imm == i64::from(weir_program::abi::helper_id::LOOP) => {
                return None
            }
            Operands::CallImm => {
                // A helper writes upward from a pointer argument (inside the frame, or
                // it traps).
                for r in 1..=5u8 {
                    write_at(reg(&s, r)?, 0)?;
                }
                for r in s.get_mut(0..=5)? {
                    *r = Value::NotStack;
                }
            }
            Operands::CallLocal | Operands::CallReg => return None,
            Operands::JmpOff => {
                successors = [jump(pc, i64::from(insn.off))?.into(), None];
            }
            Operands::JmpImm => successors = [jump(pc, insn.imm)?.into(), None],
            Operands::DstImmOff | Operands::DstSrcOff => {
                successors[1] = Some(jump(pc, i64::from(insn.off))?);
            }
            Operands::Nothing => successors = [None, None],
        }
        if lowest < floor {
            return None;
        }
        for to in successors.into_iter().flatten() {
            if to >= insns.len() {
                continue;
            }
            let slot = states.get_mut(to)?;
            let joined = match slot {
                Some(old) => {
                    let mut joined = *old;
                    for (j, v) in joined.iter_mut().zip(s) {
                        *j = j.join(v);
                    }
                    joined
                }
                None => s,
            };
            // Offsets below the frame are out of it: no write there lands anywhere.
            if joined.iter().any(|v| matches!(v, Value::Stack(k) if *k < floor)) {
                return None;
            }
            if *slot != Some(joined) {
                *slot = Some(joined);
                work.push(to);
            }
        }
    }
    Some(lowest)
}

/// The slot a jump at `pc` with offset `off` goes to.
fn jump(pc: usize, off: i64) -> Option<usize> {
    usize::try_from(i64::try_from(pc).ok()?.checked_add(1)?.checked_add(off)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_program::ProgramBuilder;

    fn lowest(build: impl FnOnce(&mut ProgramBuilder)) -> Option<i64> {
        let mut b = ProgramBuilder::new();
        build(&mut b);
        b.alu_imm(Op::Mov64Imm, 0, 0);
        b.exit();
        lowest_write(b.link().unwrap().insns(), 512)
    }

    #[test]
    fn direct_stores_and_helper_arguments_set_the_depth() {
        assert_eq!(lowest(|_| {}), Some(0));
        assert_eq!(
            lowest(|b| {
                b.store_imm(Op::StW, 10, -4, 1);
            }),
            Some(-4)
        );
        // The key pointer of a lookup, as clang makes it.
        assert_eq!(
            lowest(|b| {
                b.store_imm(Op::StW, 10, -4, 1);
                b.alu_reg(Op::Mov64Reg, 2, 10);
                b.alu_imm(Op::Add64Imm, 2, -24);
                b.call_helper(1);
            }),
            Some(-24)
        );
        // A store through a derived pointer, below it.
        assert_eq!(
            lowest(|b| {
                b.alu_reg(Op::Mov64Reg, 3, 10);
                b.alu_imm(Op::Add64Imm, 3, -16);
                b.store_imm(Op::StDw, 3, -8, 1);
            }),
            Some(-24)
        );
    }

    /// End to end: a proven program that writes frame 0 on one run and reads the same
    /// bytes unwritten on the next (privileged programs may) must read zeros.
    #[test]
    fn a_proven_run_reads_zeros_where_the_last_run_wrote() {
        use weir_program::exec::Input;
        use weir_program::{Assurance, ProgramBuilder};
        let mut b = ProgramBuilder::new();
        let skip = b.new_label();
        b.load(Op::LdxB, 2, 1, 0);
        b.load(Op::LdxDw, 0, 10, -40);
        b.jump_imm(Op::Jeq64Imm, 2, 0, skip);
        b.alu_reg(Op::Mov64Reg, 3, 10);
        b.alu_imm(Op::Add64Imm, 3, -32);
        b.store_imm(Op::StDw, 3, -8, 7);
        b.bind(skip);
        b.exit();
        let program = b.link().unwrap();
        assert_eq!(lowest_write(program.insns(), 512), Some(-40));
        let options = weir_verifier::Options {
            memory_len: Some(1),
            helpers: Some(vec![5]),
            ..weir_verifier::Options::default()
        };
        let proof = weir_verifier::verify(&program, &options).expect("the verifier accepts it");
        let verified = proof.into_verified(program.clone()).unwrap();
        assert_eq!(verified.assurance(), Assurance::Proven);
        let bindings = weir_program::abi::Bindings::conformance();
        let jit = crate::Jit::compile(&verified, bindings, crate::Config::default()).unwrap();
        let mut cache = jit.cache();
        let mut run = |flag: u8| {
            let mut mem = [flag];
            jit.run_stats(&mut cache, Input::new().mem(&mut mem)).unwrap().r0
        };
        assert_eq!(run(1), 0);
        assert_eq!(run(0), 0, "the last run's store must be gone");
        assert_eq!(run(1), 0);
        assert_eq!(run(1), 0);
    }

    #[test]
    fn what_it_cannot_follow_gives_no_answer() {
        // A spilled stack pointer.
        assert_eq!(
            lowest(|b| {
                b.alu_reg(Op::Mov64Reg, 3, 10);
                b.store_reg(Op::StxDw, 10, -8, 3);
            }),
            None
        );
        // A variable offset, then a store.
        assert_eq!(
            lowest(|b| {
                b.alu_reg(Op::Mov64Reg, 3, 10);
                b.alu_reg(Op::Add64Reg, 3, 1);
                b.store_imm(Op::StB, 3, 0, 1);
            }),
            None
        );
        // Below the frame.
        assert_eq!(
            lowest(|b| {
                b.store_imm(Op::StB, 10, -600, 1);
            }),
            None
        );
    }
}
