//! Fuzz target `flow` (flow rules): the property is `weir_conformance::fuzz_checks::flow`,
//! which `cargo test` also replays on every saved input in `fuzz/regressions/flow/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weir_conformance::fuzz_checks::flow(data));
