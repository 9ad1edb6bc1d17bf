//! Structural validation: the checks every engine may rely on before it runs a program, and
//! that need no data flow (the verifier proves the rest). A program that passes [`validate`]
//! has valid registers, well-formed `lddw` pairs, no write to r10, jump and call targets on
//! real instructions inside their function, and no path that falls off a function's end.
//!
//! The checks run in three passes, each assuming what the earlier ones established: slots
//! one at a time ([`slots`]), then targets and function boundaries ([`cfg`]). Helper bindings
//! are a separate question ([`validate_calls`]) because only the caller knows them.

mod calls;
mod cfg;
mod slots;

use crate::Program;

pub use calls::validate_calls;
pub use cfg::{function_target, functions, jump_target};

/// The longest program `validate` accepts, in slots (the kernel's limit for privileged
/// programs).
pub const MAX_SLOTS: usize = 1_000_000;

/// A structural error and the slot it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instruction {index}: {kind}")]
pub struct ValidateError {
    pub index: usize,
    pub kind: ValidateErrorKind,
}

impl ValidateError {
    pub fn new(index: usize, kind: ValidateErrorKind) -> Self {
        ValidateError { index, kind }
    }
}

/// Why a program is structurally invalid. Targets are slot indices (`i64` where the target
/// may lie before slot 0 or beyond the program).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidateErrorKind {
    #[error("the program is empty")]
    Empty,
    #[error("the program has {len} slots, more than the limit of {MAX_SLOTS}")]
    TooLong { len: usize },
    #[error("{field} register r{value} does not exist (registers are r0-r10)")]
    BadRegister { field: &'static str, value: u8 },
    #[error("{mnemonic} does not use {field}, which must be 0 but is {value}")]
    UnusedFieldSet { mnemonic: &'static str, field: &'static str, value: i64 },
    #[error("{mnemonic} needs {field} = {expected} (or 0), but it is {value}")]
    BadDiscriminator { mnemonic: &'static str, field: &'static str, expected: i64, value: i64 },
    #[error("{mnemonic} takes a 32-bit immediate, but imm is {value}")]
    ImmOutOfRange { mnemonic: &'static str, value: i64 },
    #[error("lddw is not followed by its second slot")]
    MissingLddwHigh,
    #[error("the second slot of an lddw appears without the lddw before it")]
    StrayLddwHigh,
    #[error("writes r10, the read-only frame pointer (through {field})")]
    WritesFramePointer { field: &'static str },
    #[error("jump target {target} is outside the program (slots 0..{len})")]
    JumpOutOfProgram { target: i64, len: usize },
    #[error("jump target {target} is the second slot of an lddw")]
    JumpIntoLddw { target: usize },
    #[error("jump to {target} leaves its function (slots {function_start}..{function_end})")]
    JumpOutOfFunction { target: usize, function_start: usize, function_end: usize },
    #[error("call target {target} is outside the program (slots 0..{len})")]
    CallOutOfProgram { target: i64, len: usize },
    #[error("call target {target} is the second slot of an lddw")]
    CallIntoLddw { target: usize },
    #[error("lddw func target {target} is outside the program (slots 0..{len})")]
    FuncRefOutOfProgram { target: i64, len: usize },
    #[error("lddw func target {target} is the second slot of an lddw")]
    FuncRefIntoLddw { target: usize },
    #[error(
        "the function at slots {function_start}..{function_end} can run past its end \
         (its last instruction must be exit or an unconditional jump)"
    )]
    FallsOffEnd { function_start: usize, function_end: usize },
    #[error("call to helper {id}, which has no binding")]
    UnknownHelper { id: i64 },
    #[error("call kfunc {id}: kfunc calls are not supported")]
    KfuncUnsupported { id: i64 },
    /// A verifier's proof offered for a program it was not about (see `Verified::proven`).
    #[error("this slot differs from the program the verifier proved")]
    NotProven,
}

/// Checks a program's structure (see the module docs for what that covers). Stops at the
/// first error; errors of one pass come in slot order.
pub fn validate(program: &Program) -> Result<(), ValidateError> {
    let insns = program.insns();
    if insns.is_empty() {
        return Err(ValidateError::new(0, ValidateErrorKind::Empty));
    }
    if insns.len() > MAX_SLOTS {
        return Err(ValidateError::new(MAX_SLOTS, ValidateErrorKind::TooLong { len: insns.len() }));
    }
    slots::check_slots(insns)?;
    cfg::check_control_flow(insns)
}
