//! [`Verified`]: a program an engine may run, and how much is known about it.
//!
//! Engines accept only a `Verified` program, so the stage order is in the types: nothing
//! reaches an engine without passing a check. Today the check is structural
//! ([`crate::validate`]: registers, `lddw` pairs, targets, function ends), and the
//! [`Assurance`] says so; engines then keep every run-time check. The verifier (a later
//! crate) makes `Verified` programs too, with a stronger `Assurance` carrying the facts it
//! proved, which engines may use to drop checks. Callers do not change: they hold a
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

use crate::{validate, Program, ValidateError};

/// What a check established about a [`Verified`] program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Assurance {
    /// Structurally valid only: engines check every memory access, helper call and jump
    /// target at run time.
    Structural,
}

/// A program that passed a check, with what the check established. Made only by
/// [`Verified::structural`] (and, later, the verifier).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    program: Program,
    assurance: Assurance,
}

impl Verified {
    /// Checks `program` with [`validate`].
    pub fn structural(program: Program) -> Result<Verified, ValidateError> {
        validate(&program)?;
        Ok(Verified { program, assurance: Assurance::Structural })
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
