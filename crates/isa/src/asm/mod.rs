//! The eBPF text assembler and disassembler, in the syntax every weir tool and the
//! conformance corpus share (`mov32 %r0, 1`, `jeq %r1, 5, +2`, `ldxw %r0, [%r1+4]`, labels,
//! `#` comments). Both directions read the one opcode table ([`crate::ebpf::OPCODES`]):
//! mnemonics and operand shapes come from its rows, so the assembler, the disassembler, the
//! decoder and the encoder cannot disagree about an instruction.
//!
//! ```
//! use weir_isa::asm::{assemble, disassemble};
//! let insns = assemble("mov32 %r0, 1\njeq %r1, 5, done\nmov %r0, 2\ndone: exit\n").unwrap();
//! assert_eq!(disassemble(&insns), "mov32 %r0, 1\njeq %r1, 5, +1\nmov %r0, 2\nexit\n");
//! assert_eq!(assemble(&disassemble(&insns)).unwrap(), insns);
//! ```
//!
//! Guarantees, tested as properties: `assemble(&disassemble(p)) == p` for every program `p`
//! that [`crate::ebpf::decode`] can produce, and `disassemble(&assemble(t)) == t` for
//! canonical text `t` (what [`disassemble`] writes).

mod error;
mod lexer;
mod parse;
mod print;
mod raw;
#[cfg(test)]
mod tests;

pub use error::AsmError;
pub use parse::assemble;
pub use print::{disassemble, disassemble_insn, listing};
pub use raw::parse_raw_words;
