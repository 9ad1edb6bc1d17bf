//! Fuzz target `jit_diff`: the JIT against the interpreter. The property is
//! `weir_conformance::fuzz_checks::jit_diff`, which `cargo test` also replays on every saved
//! input in `fuzz/regressions/jit_diff/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weir_conformance::fuzz_checks::jit_diff(data));
