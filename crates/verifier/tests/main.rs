//! The verifier's integration tests, one binary: the rules (one accepted and one refused
//! program per rule), soundness against the interpreter, and robustness on bad input.

mod robustness;
mod rules;
mod soundness;
