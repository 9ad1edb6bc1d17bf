//! `weir-verifier`: proves eBPF programs safe before they run (stand-in root for the value
//! domain's branch; the verifier's own skeleton replaces this file).
//!
//! ```
//! use weir_verifier::domain::Scalar;
//! assert_eq!(Scalar::constant(7).as_const(), Some(7));
//! ```

pub mod domain;
