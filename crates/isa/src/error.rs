//! Errors of decoding and assembling, each pointing at where the problem is.

use thiserror::Error;

/// A slot that does not decode, with its index in the program.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("instruction {index}: {kind}")]
pub struct DecodeError {
    pub index: usize,
    pub kind: DecodeErrorKind,
}

impl DecodeError {
    pub fn new(index: usize, kind: DecodeErrorKind) -> Self {
        DecodeError { index, kind }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeErrorKind {
    #[error("unknown opcode {0:#04x}")]
    UnknownOpcode(u8),
    #[error("opcode {opcode:#04x}: {field} = {value} is not one of {allowed}")]
    BadDiscriminator { opcode: u8, field: &'static str, value: i64, allowed: String },
    #[error("{mnemonic}: unused field {field} must be 0, is {value}")]
    UnusedFieldSet { mnemonic: &'static str, field: &'static str, value: i64 },
    #[error("{field} register r{value} does not exist (r0-r10)")]
    BadRegister { field: &'static str, value: u8 },
    #[error("lddw needs a second slot, the program ends")]
    TruncatedLddw,
    #[error("second slot of lddw must have opcode, dst, src and off all 0")]
    BadLddwHigh,
    #[error("{0} trailing bytes: a program is a whole number of 8-byte slots")]
    TrailingBytes(usize),
}
