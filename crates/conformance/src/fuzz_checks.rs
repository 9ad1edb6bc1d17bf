//! The properties the fuzz targets check, as plain functions, so that `cargo test` replays
//! every saved crasher (`fuzz/regressions/<target>/*`) with exactly the fuzzer's checks.
//! Each function panics when the property fails: that is how libFuzzer sees a finding.

use weir_interp::{Config, Interpreter};
use weir_isa::asm::{assemble as assemble_text, disassemble};
use weir_isa::ebpf::{decode_bytes, encode_bytes};
use weir_program::abi::Bindings;
use weir_program::{Program, Verified};

/// Any byte string either fails to decode, or decodes to instructions that encode back to
/// the same bytes and whose disassembly assembles to the same instructions.
pub fn decode(data: &[u8]) {
    if let Ok(insns) = decode_bytes(data) {
        assert_eq!(encode_bytes(&insns), data, "encode(decode(x)) != x");
        let text = disassemble(&insns);
        let again = assemble_text(&text).expect("a disassembly must assemble");
        assert_eq!(again, insns, "assemble(disassemble(p)) != p");
    }
}

/// Any text either fails with a positioned error, or assembles to a program whose
/// disassembly assembles to the same program.
pub fn assemble(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match assemble_text(text) {
        Ok(insns) => {
            let printed = disassemble(&insns);
            let again = assemble_text(&printed).expect("a disassembly must assemble");
            assert_eq!(again, insns, "assemble(disassemble(p)) != p");
        }
        Err(e) => {
            assert!(e.line >= 1 && e.column >= 1, "error without a position: {e}");
            let _ = e.render(text);
        }
    }
}

/// The first byte is a memory length, the next that many bytes the memory, the rest a
/// program. Whatever a valid program does, a run ends in a value or a trap, and running it
/// twice with the same cache gives the same outcome and memory.
pub fn interp(data: &[u8]) {
    let Some((&mem_len, rest)) = data.split_first() else { return };
    let mem_len = usize::from(mem_len).min(rest.len());
    let (mem, code) = rest.split_at(mem_len);
    let Ok(program) = Program::from_bytes(code) else { return };
    let Ok(program) = Verified::structural(program) else { return };
    let config = Config { instruction_budget: 10_000, ..Config::default() };
    let engine = Interpreter::new(&program, Bindings::conformance(), config);
    let mut cache = engine.cache();
    let mut first_mem = mem.to_vec();
    let first = engine.run_mem(&mut cache, &mut first_mem);
    let mut second_mem = mem.to_vec();
    let second = engine.run_mem(&mut cache, &mut second_mem);
    assert_eq!(first, second, "a reused cache changed the outcome");
    assert_eq!(first_mem, second_mem, "a reused cache changed the memory");
}

/// The first byte is a memory length, the second picks the run's options (bit 0: constant
/// blinding; bits 1-2: an instruction budget of 10,000, 1,000, 100 or 10), then come the
/// memory and the program. A program either fails validation (before any engine), or is
/// longer than the JIT takes, or the JIT compiles it (every other valid program must) and then the JIT and the interpreter agree on
/// everything: the result or the trap, the executed count, the memory and the stack, also
/// on a second run with reused caches.
pub fn jit_diff(data: &[u8]) {
    let Some((&mem_len, rest)) = data.split_first() else { return };
    let Some((&options, rest)) = rest.split_first() else { return };
    let mem_len = usize::from(mem_len).min(rest.len());
    let (mem, code) = rest.split_at(mem_len);
    let Ok(program) = Program::from_bytes(code) else { return };
    let Ok(program) = Verified::structural(program) else { return };
    let budget = [10_000, 1_000, 100, 10][usize::from((options >> 1) & 3)];
    let blinding = options & 1 == 1;
    let limits = Config { instruction_budget: budget, ..Config::default() };
    let jit_config = weir_jit::Config { limits, blinding, ..weir_jit::Config::default() };
    let interp = Interpreter::new(&program, Bindings::conformance(), limits);
    let jit = match weir_jit::Jit::compile(&program, Bindings::conformance(), jit_config) {
        Ok(jit) => jit,
        // Too long for the JIT by design (the facade runs such programs on the interpreter).
        Err(weir_jit::CompileError {
            kind: weir_jit::CompileErrorKind::TooManySlots { .. },
            ..
        }) => return,
        Err(e) => panic!("the JIT refused a valid program: {e}"),
    };
    let mut interp_cache = interp.cache();
    let mut jit_cache = jit.cache();
    for run in 0..2 {
        let mut interp_mem = mem.to_vec();
        let mut jit_mem = mem.to_vec();
        let expected = interp.run_mem(&mut interp_cache, &mut interp_mem);
        let got = jit.run_mem(&mut jit_cache, &mut jit_mem);
        assert_eq!(got, expected, "run {run}: outcome");
        assert_eq!(jit_cache.executed(), interp_cache.executed(), "run {run}: executed");
        assert_eq!(jit_mem, interp_mem, "run {run}: memory");
        assert!(jit_cache.stack() == interp_cache.stack(), "run {run}: stack");
    }
}

/// A fuzz property: panics when it fails.
pub type FuzzCheck = fn(&[u8]);

/// The fuzz targets by name, for the replay test.
pub const TARGETS: &[(&str, FuzzCheck)] =
    &[("decode", decode), ("assemble", assemble), ("interp", interp), ("jit_diff", jit_diff)];
