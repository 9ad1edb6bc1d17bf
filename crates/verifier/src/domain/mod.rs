//! The value domain: what the verifier knows about one 64-bit value (a scalar, or the
//! variable offset of a pointer). STAND-IN: a simple sound version (exact on constants,
//! unsigned intervals for the common operations, otherwise unknown) to develop the
//! analysis against; the real domain (tnum and signed/unsigned 32/64 intervals, the
//! kernel's precision) replaces these files with the same names.

pub mod scalar;
pub mod tnum;

pub use scalar::{AluOp, JmpCond, Scalar, Width};
pub use tnum::Tnum;
