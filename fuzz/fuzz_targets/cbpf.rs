//! Fuzz target `cbpf`: the property is `weir_conformance::fuzz_checks::cbpf`, which
//! `cargo test` also replays on every saved input in `fuzz/regressions/cbpf/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| weir_conformance::fuzz_checks::cbpf(data));
