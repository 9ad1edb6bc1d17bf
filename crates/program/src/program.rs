//! [`Program`]: slot-indexed eBPF instructions, as decoded by `weir_isa::ebpf::decode`.

use weir_isa::ebpf::{decode_bytes, encode_bytes, Insn};
use weir_isa::DecodeError;

/// An eBPF program: one [`Insn`] per 8-byte slot (the second slot of `lddw` is
/// `Op::LddwHigh`). Jump offsets are in slots, so the target of the jump at `pc` is
/// `pc + off + 1`. A `Program` is only structurally decoded; see [`crate::validate`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    insns: Vec<Insn>,
}

impl Program {
    /// Wraps slot-indexed instructions. Callers that build instructions by hand should prefer
    /// [`crate::ProgramBuilder`], which inserts the `lddw` fillers itself.
    pub fn from_insns(insns: Vec<Insn>) -> Self {
        Program { insns }
    }

    /// Decodes raw bytecode (a whole number of 8-byte little-endian slots).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        Ok(Program { insns: decode_bytes(bytes)? })
    }

    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    pub fn into_insns(self) -> Vec<Insn> {
        self.insns
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        encode_bytes(&self.insns)
    }
}
