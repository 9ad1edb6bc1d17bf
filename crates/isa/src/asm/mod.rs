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
//! The assembler also reads the conventions of the common eBPF conformance suite
//! (Alan-Jowett/bpf_conformance), so that its test files assemble as they are:
//!
//! - `exit` as a jump target names the first `exit` instruction of the program when no
//!   `exit:` label is written (a written label wins);
//! - its names for table rows: `swap16/32/64` (`bswap*`), `ldxsb/ldxsh/ldxsw` (RFC 9669's
//!   sign-extending loads, `ldx*sx`), `callx %rN` and `call helper %rN` (the register call),
//!   `call helper N`, `call runtime N` (`call kfunc`), `lock fetch xchg`/`cmpxchg`;
//! - registers with or without `%`, immediates in decimal or `0x` hex with an optional sign.
//!
//! It is stricter than the suite's where the suite silently truncates: an immediate outside
//! -2^31..2^32-1, a jump or memory offset outside the 16-bit range, and registers past
//! `%r10` (the suite's "fake registers" for negative tests) are errors with a line, a column
//! and a caret ([`AsmError::render`]). [`assemble_suite`], which reads the suite's `.data`
//! files (`weir::data`), is the one exception: a 32-bit immediate of up to 64 bits keeps its
//! low 32 bits there, as in the suite, and every such cut is reported ([`Truncation`]).
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
pub use parse::{assemble, assemble_suite, Truncation};
pub use print::{disassemble, disassemble_insn, listing};
pub use raw::parse_raw_words;
