//! `weir-isa`: the instruction sets weir speaks, and nothing else. It is the bottom of the
//! pipeline: every front end produces these instructions and every engine consumes them.
//!
//! - [`ebpf`]: RFC 9669 eBPF, decoded through one opcode table ([`ebpf::OPCODES`]).
//! - [`cbpf`]: classic BPF (`struct sock_filter`) encodings.
//! - [`asm`]: the text assembler and disassembler for eBPF.
//!
//! ```
//! use weir_isa::ebpf::{decode_bytes, encode_bytes};
//! // mov32 r0, 42; exit
//! let bytes = [0xb4, 0, 0, 0, 42, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
//! let insns = decode_bytes(&bytes).unwrap();
//! assert_eq!(encode_bytes(&insns), bytes);
//! ```
#![deny(clippy::arithmetic_side_effects)]

pub mod asm;
pub mod cbpf;
pub mod ebpf;
pub mod error;

pub use error::{DecodeError, DecodeErrorKind};
