//! Fuzz target `interp`: the property is `weir_conformance::fuzz_checks::interp`, which
//! `cargo test` also replays on every saved input in `fuzz/regressions/interp/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weir_conformance::fuzz_checks::interp(data));
