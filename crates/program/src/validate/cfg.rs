//! Control-flow structure: where jumps and calls go, and where functions begin and end.
//! Engines and the verifier share these definitions (`jump_target`, `function_target`,
//! `functions`) so that every consumer agrees on what a slot offset means.
//!
//! Functions follow the kernel's rule: slot 0 starts the main function and every target of
//! `call local` or `lddw func(...)` starts another; a function runs until the next start.
//! A jump may not leave its function, and no function may fall through into the next one.

use super::{ValidateError, ValidateErrorKind};
use crate::Program;
use std::ops::Range;
use weir_isa::ebpf::{Insn, Op};

/// `pc + 1 + offset`, saturating so that hostile offsets land far outside any program
/// instead of wrapping back into it.
fn relative(pc: usize, offset: i64) -> i64 {
    i64::try_from(pc).unwrap_or(i64::MAX).saturating_add(1).saturating_add(offset)
}

/// The slot a jump at `pc` goes to when taken (`None` if `insn` is not a jump). `ja32` keeps
/// its offset in `imm`, every other jump in `off`. The result may lie outside the program.
pub fn jump_target(pc: usize, insn: &Insn) -> Option<i64> {
    match insn.op {
        Op::Ja32 => Some(relative(pc, insn.imm)),
        op if op.is_jump() => Some(relative(pc, i64::from(insn.off))),
        _ => None,
    }
}

/// The function a `call local` or `lddw func(...)` at `pc` refers to (`None` for any other
/// instruction). For `lddw func` the offset is the low 32 bits of `imm`, read as signed:
/// bytecode from clang leaves the high half zero, the builder sign-extends, and both mean
/// the same slot. The result may lie outside the program.
pub fn function_target(pc: usize, insn: &Insn) -> Option<i64> {
    match insn.op {
        Op::CallLocal => Some(relative(pc, insn.imm)),
        // Truncation to the low half is the encoding's meaning (see above).
        Op::LddwFunc => Some(relative(pc, i64::from(insn.imm as i32))),
        _ => None,
    }
}

/// `target` as a slot index if it names a real instruction (inside the program and not the
/// second slot of an `lddw`).
fn instruction_at(insns: &[Insn], target: i64) -> Option<usize> {
    let slot = usize::try_from(target).ok()?;
    insns.get(slot).filter(|insn| insn.op != Op::LddwHigh).map(|_| slot)
}

/// Function boundaries, in slot order, covering the whole program. Targets that do not name
/// an instruction are ignored, so this is meaningful (and panic-free) even for programs that
/// fail validation; for an empty program it is empty.
pub fn functions(program: &Program) -> Vec<Range<usize>> {
    function_ranges(program.insns())
}

fn function_ranges(insns: &[Insn]) -> Vec<Range<usize>> {
    if insns.is_empty() {
        return Vec::new();
    }
    let mut starts = vec![0];
    for (pc, insn) in insns.iter().enumerate() {
        if let Some(start) = function_target(pc, insn).and_then(|t| instruction_at(insns, t)) {
            starts.push(start);
        }
    }
    starts.sort_unstable();
    starts.dedup();
    let ends = starts.iter().skip(1).copied().chain(std::iter::once(insns.len()));
    starts.iter().copied().zip(ends).map(|(start, end)| start..end).collect()
}

/// The second validation pass. Assumes the slot pass succeeded (every `lddw` has its second
/// slot, every second slot its `lddw`).
pub(super) fn check_control_flow(insns: &[Insn]) -> Result<(), ValidateError> {
    check_targets(insns)?;
    for function in function_ranges(insns) {
        check_function(insns, function)?;
    }
    Ok(())
}

/// Every jump, call and function reference names a real instruction.
fn check_targets(insns: &[Insn]) -> Result<(), ValidateError> {
    let len = insns.len();
    for (pc, insn) in insns.iter().enumerate() {
        let fail = |kind| Err(ValidateError::new(pc, kind));
        if let Some(target) = jump_target(pc, insn) {
            match usize::try_from(target).ok().and_then(|slot| Some((slot, insns.get(slot)?))) {
                None => return fail(ValidateErrorKind::JumpOutOfProgram { target, len }),
                Some((slot, to)) if to.op == Op::LddwHigh => {
                    return fail(ValidateErrorKind::JumpIntoLddw { target: slot })
                }
                Some(_) => {}
            }
        }
        if let Some(target) = function_target(pc, insn) {
            let is_call = insn.op == Op::CallLocal;
            match usize::try_from(target).ok().and_then(|slot| Some((slot, insns.get(slot)?))) {
                None if is_call => {
                    return fail(ValidateErrorKind::CallOutOfProgram { target, len })
                }
                None => return fail(ValidateErrorKind::FuncRefOutOfProgram { target, len }),
                Some((slot, to)) if to.op == Op::LddwHigh => {
                    return fail(if is_call {
                        ValidateErrorKind::CallIntoLddw { target: slot }
                    } else {
                        ValidateErrorKind::FuncRefIntoLddw { target: slot }
                    })
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Jumps stay inside `function`, and its last instruction cannot fall through.
fn check_function(insns: &[Insn], function: Range<usize>) -> Result<(), ValidateError> {
    let (function_start, function_end) = (function.start, function.end);
    let body = insns.get(function.clone()).unwrap_or_default();
    for (pc, insn) in function.clone().zip(body) {
        let Some(target) = jump_target(pc, insn) else { continue };
        let inside = usize::try_from(target).is_ok_and(|slot| function.contains(&slot));
        if !inside {
            // `check_targets` ran first, so the target is a slot of the program.
            let target = usize::try_from(target).unwrap_or(usize::MAX);
            return Err(ValidateError::new(
                pc,
                ValidateErrorKind::JumpOutOfFunction { target, function_start, function_end },
            ));
        }
    }
    // The last slot may be an lddw's second half; the instruction is then the one before.
    let mut last = function_end.saturating_sub(1);
    if body.last().is_some_and(|insn| insn.op == Op::LddwHigh) {
        last = last.saturating_sub(1);
    }
    match insns.get(last).map(|insn| insn.op) {
        Some(Op::Exit | Op::Ja | Op::Ja32) => Ok(()),
        _ => Err(ValidateError::new(
            last,
            ValidateErrorKind::FallsOffEnd { function_start, function_end },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(op: Op, off: i16, imm: i64) -> Insn {
        Insn::new(op, 0, 0, off, imm)
    }

    #[test]
    fn targets_count_from_the_next_slot() {
        assert_eq!(jump_target(3, &insn(Op::Ja, -4, 0)), Some(0));
        assert_eq!(jump_target(3, &insn(Op::Ja32, 0, 70_000)), Some(70_004));
        assert_eq!(jump_target(3, &insn(Op::Jeq64Imm, 2, 9)), Some(6));
        assert_eq!(jump_target(3, &insn(Op::Exit, 0, 0)), None);
        assert_eq!(jump_target(3, &insn(Op::CallLocal, 0, 1)), None);
        assert_eq!(function_target(3, &insn(Op::CallLocal, 0, -4)), Some(0));
        assert_eq!(function_target(0, &insn(Op::Call, 0, 5)), None);
    }

    #[test]
    fn lddw_func_reads_the_low_half_signed() {
        // -2 with a zero high half, as clang writes it, and sign-extended, as the builder does.
        assert_eq!(function_target(5, &insn(Op::LddwFunc, 0, 0xffff_fffe)), Some(4));
        assert_eq!(function_target(5, &insn(Op::LddwFunc, 0, -2)), Some(4));
    }

    #[test]
    fn hostile_offsets_saturate() {
        assert_eq!(jump_target(usize::MAX, &insn(Op::Ja32, 0, i64::MAX)), Some(i64::MAX));
        assert_eq!(function_target(0, &insn(Op::CallLocal, 0, i64::MIN)), Some(i64::MIN + 1));
    }

    #[test]
    fn functions_split_at_call_targets_and_ignore_bad_ones() {
        let prog = Program::from_insns(vec![
            insn(Op::CallLocal, 0, 2),   // 0 -> 3
            insn(Op::LddwFunc, 0, 3),    // 1 -> 5
            insn(Op::LddwHigh, 0, 0),    // 2
            insn(Op::Exit, 0, 0),        // 3
            insn(Op::CallLocal, 0, 100), // 4: outside, ignored
            insn(Op::CallLocal, 0, -4),  // 5 -> 2, a filler, ignored
            insn(Op::Exit, 0, 0),        // 6
        ]);
        assert_eq!(functions(&prog), vec![0..3, 3..5, 5..7]);
        assert!(functions(&Program::default()).is_empty());
    }
}
