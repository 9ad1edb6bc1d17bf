//! The value domain: what the verifier knows about one 64-bit value (a scalar register, or
//! the variable offset of a pointer).
//!
//! Two pieces, as in the kernel's verifier: a [`Tnum`] (which bits are known) and
//! [`Scalar`], a tnum with four intervals kept in step with it: signed and unsigned, over the
//! whole 64-bit value and over its low 32 bits (the sub-register that 32-bit instructions
//! read). Every operation is *sound*: the abstract result holds every concrete result the
//! engines can compute (`weir_program::exec::alu` and the interpreter's wrapping arithmetic,
//! [`AluOp::eval`]) from any values the operands hold. Within that, it aims at the kernel's
//! precision or better, so that programs the kernel accepts are accepted here too.
//!
//! What the analysis calls:
//! - building values: [`Scalar::unknown`], [`Scalar::constant`], [`Scalar::range_u64`],
//!   [`Scalar::range_i64`], [`Scalar::from_tnum`];
//! - instructions: [`Scalar::alu`] (every ALU operation at both widths, exact on
//!   constants), [`Scalar::zext32`] and [`Scalar::truncated`] (narrow loads and spills);
//! - conditional jumps: [`Scalar::refine`] (both operands narrowed on either edge, `None`
//!   for an edge no pair of values can take) and [`Scalar::branch_taken`] (which is
//!   exactly "one edge's refinement is `None`": a caller that refines both edges anyway
//!   need not ask it first);
//! - the concrete semantics, for constant folding and tests: [`AluOp::eval`] and
//!   [`JmpCond::holds`];
//! - states: [`Scalar::join`], [`Scalar::meet`], [`Scalar::subsumes`] (pruning),
//!   [`Scalar::contains`], [`Scalar::is_empty`], [`Scalar::normalized`];
//! - the kernel-style text of a value for the log (`Display`).
//!
//! Widening is not offered: the analysis explores paths and prunes by subsumption.
//!
//! The tests (`tests.rs`) check soundness against the engines' semantics for every
//! operation at both widths, every condition on both edges, chains of both, raw unnormalized
//! inputs, and small ranges around every semantic boundary with all member pairs; and
//! precision on hand-written cases taken from the kernel's bounds patterns.
//!
//! ```
//! use weir_verifier::domain::{AluOp, JmpCond, Scalar, Width};
//! let x = Scalar::unknown();
//! // x & 0xff is a byte.
//! let byte = Scalar::alu(AluOp::And, Width::W64, &x, &Scalar::constant(0xff));
//! assert_eq!((byte.umin, byte.umax), (0, 255));
//! // On the edge where `byte < 10` holds, it is at most 9.
//! let (small, _) = Scalar::refine(JmpCond::Lt, Width::W64, &byte, &Scalar::constant(10), true).unwrap();
//! assert_eq!(small.umax, 9);
//! assert_eq!(small.to_string(), "scalar(umin=0,umax=9,var_off=(0x0; 0xf))");
//! // Whether `byte > 300` can hold: never.
//! assert_eq!(Scalar::branch_taken(JmpCond::Gt, Width::W64, &byte, &Scalar::constant(300)), Some(false));
//! ```

pub mod scalar;
pub mod tnum;

#[cfg(test)]
mod tests;

pub use scalar::{AluOp, JmpCond, Scalar, Width};
pub use tnum::Tnum;
