//! [`Verified`]: a program an engine may run, and how much is known about it.
//!
//! Engines accept only a `Verified` program, so the stage order is in the types: nothing
//! reaches an engine without passing a check. Today the check is structural
//! ([`crate::validate`]: registers, `lddw` pairs, targets, function ends), and the
//! [`Assurance`] says so; engines then keep every run-time check. The verifier
//! (`weir-verifier`) makes `Verified` programs too, with a stronger `Assurance` carrying the
//! facts it proved, which the JIT uses to drop checks. Callers do not change: they hold a
//! `Verified` either way.
//!
//! ```
//! use weir_isa::ebpf::Op;
//! use weir_program::{ProgramBuilder, Verified, Assurance};
//! let mut b = ProgramBuilder::new();
//! b.alu_imm(Op::Mov64Imm, 0, 1);
//! b.exit();
//! let verified = Verified::structural(b.link().unwrap()).unwrap();
//! assert_eq!(verified.assurance(), Assurance::Structural);
//! assert_eq!(verified.program().len(), 2);
//! ```

use std::ops::Deref;

use crate::{validate, ProgType, Program, ValidateError};

/// What a check established about a [`Verified`] program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Assurance {
    /// Structurally valid only: engines check every memory access, helper call and jump
    /// target at run time.
    Structural,
    /// Proven safe by the verifier (`weir-verifier`), as the kernel's verifier proves it:
    /// every path ends, every access it could prove is recorded in [`Verified::facts`].
    /// The JIT drops the checks the facts make redundant (when a run meets the facts'
    /// assumptions); the interpreter keeps them all.
    Proven,
}

/// The guest region a proven access reaches (the windows of [`crate::exec::guest`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    /// A frame of the stack: the running one or a caller's, inside
    /// [`Facts::stack_size`] bytes below that frame's top.
    Stack,
    /// The context, inside one field of the program type's layout (a store: a writable
    /// one).
    Context,
    /// The packet, inside the range the run's own `data_end` comparisons proved.
    Packet,
    /// The memory `r1` points at in an untyped program, inside [`Facts::memory_len`] bytes.
    Memory,
    /// A map value or a ring buffer sample: the map values window, which the run's
    /// environment translates access by access.
    MapValue,
}

impl Region {
    /// The guest window of the region ([`crate::exec::guest`]'s numbering).
    pub fn window(self) -> usize {
        use crate::exec::guest;
        match self {
            Region::Stack => guest::STACK,
            Region::Context => guest::CTX,
            Region::Packet => guest::PACKET,
            Region::Memory => guest::MEM,
            Region::MapValue => guest::MAPS,
        }
    }
}

/// What the verifier proved about one instruction (by slot index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InsnFact {
    /// The verifier reached this instruction on some path.
    pub reached: bool,
    /// A memory access (load, store, atomic): `Some(true)` when it is in bounds on every
    /// path the verifier explored (the engine's check is redundant), `Some(false)` when it
    /// stays checked at run time (the legacy packet loads).
    pub access_in_bounds: Option<bool>,
    /// For an access in bounds: the one region it reaches on every path (`None` when
    /// paths reach different regions, or for anything else).
    pub region: Option<Region>,
    /// A division or remainder by a register: `Some(true)` when the divisor is never 0.
    pub divisor_nonzero: Option<bool>,
}

/// The verifier's facts about a program, one per slot, and what they assume of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    pub insns: Vec<InsnFact>,
    /// The program type proven for (its context layout bounds [`Region::Context`]
    /// accesses; `None`: untyped, `r1` = memory of [`Facts::memory_len`] bytes).
    pub prog_type: Option<ProgType>,
    /// Untyped programs: the size of the memory `r1` points at that the proof assumed.
    pub memory_len: Option<u64>,
    /// Bytes per stack frame the proof assumed (an engine with smaller frames cannot use
    /// [`Region::Stack`] facts).
    pub stack_size: u64,
    /// No run executes more instructions than this (the verifier's instructions processed
    /// over all paths: a run follows the explored paths, and a path is only ever cut where
    /// a finished exploration covers it, so no run visits an explored step twice). An
    /// instruction budget at least this large cannot run out. 0: unknown.
    pub max_executed: u64,
    /// Frame 0's bytes (bit `i` of word `i / 64`: the byte at `fp-(i+1)`) whose content at
    /// a run's start the run may observe: read before any write on some path (by the
    /// program or by a helper given them), hit by a write that may miss them (a variable
    /// offset, an atomic, a helper's), or written on some path and left unwritten at some
    /// exit or place a run may stop before one (a helper call, a legacy packet load, an
    /// access to a map value or ring buffer sample: the stack after the run shows them).
    /// Every other byte some path writes a run writes before it reads it and before it can
    /// end, on every path, and the rest no run writes; so an engine may start a run from a
    /// stack that only this program's runs wrote since it was zero, zeroing only these
    /// bytes, and still give the zeroed-stack results: r0 and the final stack, also of a
    /// run that traps at one of those places. (Bytes another program's runs left may lie
    /// where this one never writes: those too need zeroing.) Not covered: a run stopped by an instruction
    /// budget shorter than `max_executed`, or whose input does not meet the proof's
    /// assumptions (an engine then zeroes the whole stack). `None`: not computed (the
    /// program calls a function or runs a callback).
    pub stack_observed: Option<Vec<u64>>,
}

impl Facts {
    pub fn get(&self, pc: usize) -> InsnFact {
        self.insns.get(pc).copied().unwrap_or_default()
    }
}

/// A program that passed a check, with what the check established. Made only by
/// [`Verified::structural`] and [`Verified::proven`] (the verifier).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    program: Program,
    assurance: Assurance,
    facts: Option<std::sync::Arc<Facts>>,
}

impl Verified {
    /// Checks `program` with [`validate`].
    pub fn structural(program: Program) -> Result<Verified, ValidateError> {
        validate(&program)?;
        Ok(Verified { program, assurance: Assurance::Structural, facts: None })
    }

    /// A program the verifier proved safe, with its facts (the verifier's constructor: it
    /// validates the structure again, so no `Verified` skips [`validate`]).
    ///
    /// # Safety
    ///
    /// Engines drop run-time checks on the strength of `facts` (the JIT then reads and
    /// writes host memory unchecked), so every fact must hold on every run of `program`
    /// that meets the facts' own assumptions ([`Facts::prog_type`], [`Facts::memory_len`],
    /// [`Facts::stack_size`]): an access marked in bounds with a region stays inside that
    /// region, a divisor marked non-zero is never 0. `weir-verifier`'s `Proof::into_verified`
    /// is the one caller, with the facts its analysis proved for this very program.
    pub unsafe fn proven(program: Program, facts: Facts) -> Result<Verified, ValidateError> {
        validate(&program)?;
        Ok(Verified {
            program,
            assurance: Assurance::Proven,
            facts: Some(std::sync::Arc::new(facts)),
        })
    }

    /// The verifier's facts (`None` unless [`Assurance::Proven`]).
    pub fn facts(&self) -> Option<&Facts> {
        self.facts.as_deref()
    }

    /// [`Verified::structural`] on a copy of `program`, for callers that keep theirs.
    pub fn check(program: &Program) -> Result<Verified, ValidateError> {
        Verified::structural(program.clone())
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn assurance(&self) -> Assurance {
        self.assurance
    }

    pub fn into_program(self) -> Program {
        self.program
    }
}

impl Deref for Verified {
    type Target = Program;

    fn deref(&self) -> &Program {
        &self.program
    }
}
