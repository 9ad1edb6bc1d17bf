//! Basic blocks of a validated program, as the translator and the instruction budget see
//! them.
//!
//! A block is a run of instructions entered only at its first one and left only after its
//! last one, so the budget can be charged once per block (see `codegen`). Blocks start at
//! slot 0, at every jump and call target, and after every instruction that ends a block
//! ([`Kind::End`]). When the program has a `call %reg`, every instruction starts a block:
//! such a call may enter any instruction (exactly the interpreter's rule), and each entry
//! point needs its own block; so does a `bpf_loop` the engine runs (its callback is a
//! function address in a register too).
//!
//! Targets are resolved as the interpreter resolves them (32-bit `imm` for `ja32` and local
//! calls, `off` for other jumps). Validation guarantees they name instructions; a target
//! that does not is refused with an error rather than trusted.

use weir_isa::ebpf::{Insn, Op, Operands};
use weir_program::abi::Bindings;

use crate::{CompileError, CompileErrorKind};

/// What an instruction means for block structure and for the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Changes registers only: nothing observable happens if the run stops right after it.
    Pure,
    /// Touches memory, calls a helper or may end the run, then goes on to the next slot.
    Effect,
    /// Ends its block: jumps, calls, exit, and instructions that always trap.
    End,
}

pub(crate) fn kind(insn: &Insn, bindings: &Bindings) -> Kind {
    let Some(spec) = insn.op.spec() else {
        return Kind::End;
    };
    match spec.operands {
        Operands::JmpOff
        | Operands::JmpImm
        | Operands::DstImmOff
        | Operands::DstSrcOff
        | Operands::CallLocal
        | Operands::CallReg
        | Operands::Nothing => Kind::End,
        Operands::CallImm => match insn.op {
            Op::Call if bindings.helper(insn.imm as i32 as u32).is_some() => Kind::Effect,
            _ => Kind::End,
        },
        Operands::Load
        | Operands::StoreImm
        | Operands::StoreReg
        | Operands::Abs
        | Operands::Ind => Kind::Effect,
        Operands::Pseudo(_) if insn.op != Op::LddwFunc => Kind::End,
        Operands::DstImm | Operands::DstSrc | Operands::Dst | Operands::DstImm64 => Kind::Pure,
        Operands::Pseudo(_) => Kind::Pure,
    }
}

/// Whether `insn` is a `bpf_loop` the engine runs itself (helper 181, unbound), which calls
/// back into the program as a local call.
pub(crate) fn runs_callbacks(insn: &Insn, bindings: &Bindings) -> bool {
    let id = insn.imm as i32 as u32;
    insn.op == Op::Call && id == weir_program::abi::helper_id::LOOP && bindings.helper(id).is_none()
}

/// The slot `delta` slots after the one following `pc`, if it starts an instruction.
pub(crate) fn resolve(insns: &[Insn], pc: usize, delta: i64) -> Option<usize> {
    let target = i64::try_from(pc).ok()?.checked_add(1)?.checked_add(delta)?;
    let target = usize::try_from(target).ok()?;
    match insns.get(target)?.op {
        Op::LddwHigh => None,
        _ => Some(target),
    }
}

/// Where the jump or local call at `pc` goes (`None` for other instructions).
pub(crate) fn target_of(insns: &[Insn], pc: usize) -> Option<Result<usize, CompileError>> {
    let insn = insns.get(pc)?;
    let delta = match insn.op {
        Op::Ja32 | Op::CallLocal => i64::from(insn.imm as i32),
        op if op.is_jump() => i64::from(insn.off),
        _ => return None,
    };
    Some(resolve(insns, pc, delta).ok_or(CompileError::new(pc, CompileErrorKind::BadTarget)))
}

/// One basic block: its instructions' slots, in order.
#[derive(Clone, Debug)]
pub(crate) struct BasicBlock {
    pub slots: Vec<usize>,
}

impl BasicBlock {
    pub(crate) fn start(&self) -> usize {
        self.slots.first().copied().unwrap_or(0)
    }
}

/// The blocks of a program and what the translator needs to know about its calls.
#[derive(Clone, Debug)]
pub(crate) struct Cfg {
    pub blocks: Vec<BasicBlock>,
    /// Slot -> index in `blocks` of the block starting there.
    block_at: Vec<Option<u32>>,
    /// Whether any local call (direct or by register) exists: then `exit` may return to a
    /// caller, and frames must be tracked.
    pub has_calls: bool,
    /// Whether some jump goes back (to its own slot or an earlier one): without one, and
    /// without calls, no block runs twice in a run.
    pub has_back_jumps: bool,
}

impl Cfg {
    pub(crate) fn build(insns: &[Insn], bindings: &Bindings) -> Result<Cfg, CompileError> {
        let len = insns.len();
        // `bpf_loop`'s callback is a run-time function address, like `call %reg`'s.
        let has_callx = insns.iter().any(|i| i.op == Op::CallReg || runs_callbacks(i, bindings));
        let has_calls = has_callx || insns.iter().any(|i| i.op == Op::CallLocal);
        let mut has_back_jumps = false;
        let mut leader = vec![has_callx; len];
        if let Some(first) = leader.first_mut() {
            *first = true;
        }
        for (pc, insn) in insns.iter().enumerate() {
            if insn.op == Op::LddwHigh {
                continue;
            }
            if let Some(target) = target_of(insns, pc) {
                let target = target?;
                has_back_jumps |= target <= pc;
                if let Some(slot) = leader.get_mut(target) {
                    *slot = true;
                }
            }
            if kind(insn, bindings) == Kind::End {
                if let Some(next) = leader.get_mut(pc.saturating_add(insn.slots())) {
                    *next = true;
                }
            }
        }
        let mut blocks: Vec<BasicBlock> = Vec::new();
        let mut block_at = vec![None; len];
        for (pc, insn) in insns.iter().enumerate() {
            if insn.op == Op::LddwHigh {
                continue;
            }
            if leader.get(pc).copied().unwrap_or(false) || blocks.is_empty() {
                let index = u32::try_from(blocks.len())
                    .map_err(|_| CompileError::new(pc, CompileErrorKind::TooLarge))?;
                if let Some(slot) = block_at.get_mut(pc) {
                    *slot = Some(index);
                }
                blocks.push(BasicBlock { slots: Vec::new() });
            }
            if let Some(block) = blocks.last_mut() {
                block.slots.push(pc);
            }
        }
        Ok(Cfg { blocks, block_at, has_calls, has_back_jumps })
    }

    /// The block starting at `slot`, if one does.
    pub(crate) fn block_at(&self, slot: usize) -> Option<usize> {
        self.block_at.get(slot).copied().flatten().map(|b| b as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_at_targets_and_after_ends() {
        let insns = vec![
            Insn::new(Op::Mov64Imm, 0, 0, 0, 1),
            Insn::new(Op::Jeq64Imm, 1, 0, 1, 0),
            Insn::new(Op::Add64Imm, 0, 0, 0, 1),
            Insn::new(Op::Add64Imm, 0, 0, 0, 1),
            Insn::new(Op::Exit, 0, 0, 0, 0),
        ];
        let cfg = Cfg::build(&insns, &Bindings::new()).unwrap();
        let starts: Vec<usize> = cfg.blocks.iter().map(BasicBlock::start).collect();
        assert_eq!(starts, [0, 2, 3]);
        assert_eq!(cfg.blocks[0].slots, [0, 1]);
        assert_eq!(cfg.block_at(3), Some(2));
        assert_eq!(cfg.block_at(1), None);
        assert!(!cfg.has_calls);
        assert!(!cfg.has_back_jumps);
    }

    #[test]
    fn a_jump_to_itself_or_before_is_a_back_jump() {
        let mov = Insn::new(Op::Mov64Imm, 0, 0, 0, 1);
        let exit = Insn::new(Op::Exit, 0, 0, 0, 0);
        for (off, back) in [(-1, true), (-2, true), (0, false), (1, false)] {
            let insns = vec![mov, Insn::new(Op::Jeq64Imm, 0, 0, off, 0), mov, exit];
            let cfg = Cfg::build(&insns, &Bindings::new()).unwrap();
            assert_eq!(cfg.has_back_jumps, back, "off {off}");
        }
    }

    #[test]
    fn callx_makes_every_instruction_a_block() {
        let insns = vec![
            Insn::new(Op::Lddw, 1, 0, 0, 7),
            Insn::new(Op::LddwHigh, 0, 0, 0, 0),
            Insn::new(Op::CallReg, 1, 0, 0, 0),
            Insn::new(Op::Exit, 0, 0, 0, 0),
        ];
        let cfg = Cfg::build(&insns, &Bindings::new()).unwrap();
        assert_eq!(cfg.blocks.len(), 3);
        assert!(cfg.has_calls);
        assert_eq!(cfg.block_at(1), None);
    }

    #[test]
    fn bad_targets_are_refused() {
        let insns = vec![Insn::new(Op::Ja, 0, 0, 5, 0), Insn::new(Op::Exit, 0, 0, 0, 0)];
        let err = Cfg::build(&insns, &Bindings::new()).unwrap_err();
        assert_eq!((err.index, err.kind), (0, CompileErrorKind::BadTarget));
    }
}
