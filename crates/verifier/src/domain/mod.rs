//! The value domain: what the verifier knows about one 64-bit value (a scalar register, or
//! the variable offset of a pointer).
//!
//! Two pieces, as in the kernel's verifier: a [`Tnum`] (which bits are known) and
//! [`Scalar`], a tnum with four intervals kept in step with it: signed and unsigned, over the
//! whole 64-bit value and over its low 32 bits (the sub-register that 32-bit instructions
//! read). Every operation is *sound*: the abstract result holds every concrete result the
//! engines can compute (`weir_program::exec::alu` and the interpreter's wrapping arithmetic)
//! from any values the operands hold. Within that, it aims at the kernel's precision, so
//! that programs the kernel accepts are accepted here too.
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
//! ```

pub mod scalar;
pub mod tnum;

#[cfg(test)]
mod tests;

pub use scalar::{AluOp, JmpCond, Scalar, Width};
pub use tnum::Tnum;
