//! Prints what weir-elf reads from BPF objects: `cargo run -p weir-elf --example elf_dump -- FILE.o...`

use weir_elf::ObjectSpec;

fn main() {
    for path in std::env::args().skip(1) {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{path}: {e}");
                continue;
            }
        };
        let object = match ObjectSpec::parse(&bytes) {
            Ok(o) => o,
            Err(e) => {
                println!("{path}: {e}");
                continue;
            }
        };
        println!("{path}: license {:?}", object.license);
        for (i, m) in object.maps.iter().enumerate() {
            println!("  map {i}: {:?} {:?} pinning {:?}", m.spec, m.origin, m.pinning);
        }
        for v in &object.variables {
            println!("  var {} map {} +{} ({} bytes)", v.name, v.map, v.offset, v.size);
        }
        for p in &object.programs {
            println!(
                "  prog {} [{}] {:?}: {} slots ({} main)",
                p.name,
                p.section,
                p.program.prog_type(),
                p.program.len(),
                p.main_slots
            );
            for r in p.program.relocations() {
                println!("    reloc slot {} -> {:?}", r.slot, r.target);
            }
            for (pc, insn) in p.program.insns().iter().enumerate() {
                if matches!(insn.op, weir_isa::ebpf::Op::CallLocal) {
                    println!("    call at {pc}: imm {}", insn.imm);
                }
            }
        }
        for r in &object.refused {
            println!("  refused {} [{}]: {}", r.name, r.section, r.error);
        }
    }
}
