//! Fuzz target `verify`: the verifier on any program (never a panic, always an answer), an
//! accepted program's runs on the interpreter (no memory trap, no longer than the proof's
//! bound) and the JIT with the proof's checks dropped against the interpreter. The property
//! is `weir_conformance::fuzz_checks::verify`, which `cargo test` also replays on every
//! saved input in `fuzz/regressions/verify/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weir_conformance::fuzz_checks::verify(data));
