//! A guess, per register, of the region its pointers point into, so that a memory access
//! can first try the one region it most likely reaches (see `codegen::memory`).
//!
//! The guess is only ever a guess: an access checks its address against the guessed
//! region's bounds, and anything outside them takes the full region-table path, which
//! finds the right region or traps. A wrong guess costs time, never meaning, so the
//! analysis can be cheap and flow-insensitive: each register gets the join of every kind of
//! pointer any instruction of the program may put in it. Scalars do not count (adding a
//! number to a pointer keeps its region), and a register that may hold pointers into two
//! different regions gets no guess.

use weir_isa::ebpf::{Insn, Op, REG_COUNT};
use weir_program::abi::{helper_id, Bindings};

/// Where a register's pointers point, as far as the program's text tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guess {
    /// Never seen holding a pointer.
    Scalar,
    /// The region `r1` points at on entry: the context, or plain memory without one.
    Input,
    /// The packet: pointers loaded from the context (its data / data-end fields).
    Packet,
    /// The stack: `r10` and what is derived from it.
    Stack,
    /// A map value: what `bpf_map_lookup_elem` returns (checked first against the value
    /// entry, the value reached last, whose window's table entry admits nothing).
    Value,
    /// Pointers into more than one region.
    Mixed,
}

impl Guess {
    fn join(self, other: Guess) -> Guess {
        match (self, other) {
            (a, b) if a == b => a,
            (Guess::Scalar, b) => b,
            (a, Guess::Scalar) => a,
            _ => Guess::Mixed,
        }
    }
}

/// The guess for every register, r0..r10.
pub(crate) fn guess(insns: &[Insn], bindings: &Bindings) -> [Guess; REG_COUNT as usize] {
    let mut guesses = [Guess::Scalar; REG_COUNT as usize];
    let at = |guesses: &[Guess], r: u8| guesses.get(usize::from(r)).copied();
    if let Some(r1) = guesses.get_mut(1) {
        *r1 = Guess::Input;
    }
    if let Some(r10) = guesses.get_mut(10) {
        *r10 = Guess::Stack;
    }
    // Each pass only moves guesses up a three-level lattice, so this ends within a few
    // passes; the bound is a guard, not a limit ever reached.
    for _ in 0..4 * usize::from(REG_COUNT) {
        let mut changed = false;
        for insn in insns {
            let (dst, produced) = match insn.op {
                // A copy, or a pointer plus a number: the source's region flows in (dst
                // keeps its own, since the guess joins over all assignments).
                Op::Mov64Reg | Op::Add64Reg => (insn.dst, at(&guesses, insn.src)),
                // A pointer loaded from the context: the packet's fields live there.
                Op::LdxDw | Op::LdxW
                    if bindings.context.is_some()
                        && at(&guesses, insn.src) == Some(Guess::Input) =>
                {
                    (insn.dst, Some(Guess::Packet))
                }
                // A map lookup's answer (or 0, a number) in r0.
                Op::Call if insn.imm as i32 as u32 == helper_id::MAP_LOOKUP_ELEM => {
                    (0, Some(Guess::Value))
                }
                _ => (insn.dst, None),
            };
            let (Some(produced), Some(slot)) = (produced, guesses.get_mut(usize::from(dst))) else {
                continue;
            };
            let joined = slot.join(produced);
            if joined != *slot && dst != 10 {
                *slot = joined;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    guesses
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_sums_keep_their_region_and_conflicts_give_none() {
        let insns = vec![
            Insn::new(Op::Mov64Reg, 4, 1, 0, 0),  // r4 = r1
            Insn::new(Op::Add64Reg, 4, 3, 0, 0),  // r4 += r3 (a number)
            Insn::new(Op::Mov64Reg, 6, 10, 0, 0), // r6 = r10
            Insn::new(Op::Sub64Imm, 6, 0, 0, 256),
            Insn::new(Op::Mov64Reg, 7, 4, 0, 0), // r7 = r4 ...
            Insn::new(Op::Mov64Reg, 7, 6, 0, 0), // ... or r6
            Insn::new(Op::Exit, 0, 0, 0, 0),
        ];
        let g = guess(&insns, &Bindings::new());
        assert_eq!(g[4], Guess::Input);
        assert_eq!(g[6], Guess::Stack);
        assert_eq!(g[7], Guess::Mixed);
        assert_eq!(g[3], Guess::Scalar);
        assert_eq!(g[10], Guess::Stack);
    }

    #[test]
    fn a_lookups_answer_is_a_map_value_and_other_helpers_give_numbers() {
        let call = |id: i64| Insn::new(Op::Call, 0, 0, 0, id);
        let insns = vec![
            call(i64::from(helper_id::MAP_LOOKUP_ELEM)),
            Insn::new(Op::Mov64Reg, 6, 0, 0, 0), // r6 = r0: a value
            call(5),                             // r0 = a number (ktime)
            Insn::new(Op::Mov64Reg, 7, 0, 0, 0), // r7 = r0: a value still (joined)
            Insn::new(Op::Mov64Reg, 8, 10, 0, 0),
            Insn::new(Op::Mov64Reg, 8, 6, 0, 0), // r8: the stack or a value
            Insn::new(Op::Exit, 0, 0, 0, 0),
        ];
        let g = guess(&insns, &Bindings::new());
        assert_eq!((g[0], g[6], g[7]), (Guess::Value, Guess::Value, Guess::Value));
        assert_eq!(g[8], Guess::Mixed);
        let no_lookup =
            [call(5), Insn::new(Op::Mov64Reg, 6, 0, 0, 0), Insn::new(Op::Exit, 0, 0, 0, 0)];
        assert_eq!(guess(&no_lookup, &Bindings::new())[6], Guess::Scalar);
    }
}
