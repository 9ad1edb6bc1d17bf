//! Assembler fuzzing: any text either fails with a positioned error, or assembles to a
//! program whose disassembly assembles to the same program.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match weir_isa::asm::assemble(text) {
        Ok(insns) => {
            let printed = weir_isa::asm::disassemble(&insns);
            let again = weir_isa::asm::assemble(&printed).expect("disassembly must assemble");
            assert_eq!(again, insns);
        }
        Err(e) => {
            assert!(e.line >= 1 && e.column >= 1);
            let _ = e.render(text);
        }
    }
});
