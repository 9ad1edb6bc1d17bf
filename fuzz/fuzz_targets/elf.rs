//! Fuzz target `elf`: `weir_elf::ObjectSpec::parse` on arbitrary bytes must return (an
//! object or an error), never panic, and whatever it takes must be consistent: every
//! relocation names an `lddw` slot inside its program and a map the program lists. Seed it
//! with the objects of testdata/bpf/ (`cp testdata/bpf/*.o fuzz/corpus/elf/`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_program::RelocTarget;

fuzz_target!(|data: &[u8]| {
    let Ok(object) = weir_elf::ObjectSpec::parse(data) else { return };
    for p in &object.programs {
        for r in p.program.relocations() {
            assert!(r.slot + 1 < p.program.len());
            let (RelocTarget::Map { map } | RelocTarget::MapValue { map, .. }) = r.target;
            assert!(map < p.program.maps().len());
        }
    }
});
