//! `weir-program`: the one currency of weir. Every front end (assembler, classic BPF,
//! pflang, ELF loader) produces a [`Program`] of eBPF instructions; every engine consumes
//! one. This crate also holds what engines and front ends must agree on without knowing each
//! other: the [`abi`] (helper ids and signatures, the helper calling context, context
//! layouts, bindings), the [`ProgType`], the [`Trap`] codes, the [`Verified`] stage that
//! engines accept, and [`exec`], the one engine contract (input, outcome, limits, guest
//! address map, the `Engine` trait). [`data`] reads the `.data` case format of the eBPF
//! conformance suites (a program, its memory and the expected result), for `weir exec`, the
//! conformance runner and the engines' own tests.
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
pub mod data;
pub mod exec;
mod prog_type;
mod program;
mod trap;
mod validate;
pub mod verified;

pub use builder::{Label, LinkError, ProgramBuilder};
pub use prog_type::{PacketAccess, ProgType};
pub use program::{MapSpec, MapType, Program, RelocTarget, Relocation};
pub use trap::{Trap, TrapCode};
pub use validate::{
    function_target, functions, jump_target, validate, validate_calls, ValidateError,
    ValidateErrorKind, MAX_SLOTS,
};
pub use verified::{Assurance, Facts, InsnFact, Region, Verified};
