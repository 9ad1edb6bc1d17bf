//! Structural validation (to be completed by the validation work).

use crate::Program;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instruction {index}: {kind}")]
pub struct ValidateError {
    pub index: usize,
    pub kind: ValidateErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidateErrorKind {
    #[error("the program is empty")]
    Empty,
}

pub fn validate(program: &Program) -> Result<(), ValidateError> {
    if program.is_empty() {
        return Err(ValidateError { index: 0, kind: ValidateErrorKind::Empty });
    }
    Ok(())
}
