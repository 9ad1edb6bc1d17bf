//! Decoder fuzzing: any byte string either fails to decode with an error, or decodes to
//! instructions that encode back to exactly the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_isa::ebpf::{decode_bytes, encode_bytes};

fuzz_target!(|data: &[u8]| {
    if let Ok(insns) = decode_bytes(data) {
        assert_eq!(encode_bytes(&insns), data);
        let text = weir_isa::asm::disassemble(&insns);
        let again = weir_isa::asm::assemble(&text).expect("disassembly must assemble");
        assert_eq!(again, insns);
    }
});
