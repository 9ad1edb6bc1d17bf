//! Fuzz target `pfmatch` (match programs): the property is `weir_conformance::fuzz_checks::pfmatch`,
//! which `cargo test` also replays on every saved input in `fuzz/regressions/pfmatch/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weir_conformance::fuzz_checks::pfmatch(data));
