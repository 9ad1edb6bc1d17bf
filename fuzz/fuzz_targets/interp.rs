//! Interpreter fuzzing: the first bytes are memory, the rest a program. Whatever the
//! program does, a run ends in a value or a trap: never a panic, a hang or a stray access.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_interp::{Config, Interpreter};
use weir_program::abi::Bindings;
use weir_program::Program;

fuzz_target!(|data: &[u8]| {
    let Some((&mem_len, rest)) = data.split_first() else { return };
    let mem_len = usize::from(mem_len).min(rest.len());
    let (mem, code) = rest.split_at(mem_len);
    let Ok(program) = Program::from_bytes(code) else { return };
    let config = Config { instruction_budget: 10_000, ..Config::default() };
    let Ok(interp) = Interpreter::new(&program, Bindings::conformance(), config) else { return };
    let mut mem = mem.to_vec();
    let mut cache = interp.cache();
    let _ = interp.run_mem(&mut cache, &mut mem);
});
