//! `weir-program`: the one currency of weir. Every front end (assembler, classic BPF,
//! pflang, ELF loader) produces a [`Program`] of eBPF instructions; every engine consumes
//! one. This crate also holds what engines and front ends must agree on without knowing each
//! other: the [`abi`] (helper ids and signatures, context layouts, bindings) and the
//! [`Trap`] codes.
//!
//! ```
//! use weir_isa::ebpf::Op;
//! use weir_program::{ProgramBuilder, validate};
//! let mut b = ProgramBuilder::new();
//! let done = b.new_label();
//! b.alu_imm(Op::Mov64Imm, 0, 1);
//! b.jump_imm(Op::Jeq64Imm, 1, 0, done);
//! b.alu_imm(Op::Mov64Imm, 0, 2);
//! b.bind(done);
//! b.exit();
//! let prog = b.link().unwrap();
//! validate(&prog).unwrap();
//! ```

pub mod abi;
mod builder;
mod program;
mod trap;
mod validate;

pub use builder::{Label, LinkError, ProgramBuilder};
pub use program::Program;
pub use trap::{Trap, TrapCode};
pub use validate::{
    function_target, functions, jump_target, validate, validate_calls, ValidateError,
    ValidateErrorKind, MAX_SLOTS,
};
