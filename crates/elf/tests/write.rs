//! `weir_elf::write`: what the writer writes, the reader reads back (program, type,
//! section, name, license), and what it cannot write is refused with the reason.

use weir_elf::write::{section_name, write_program, ObjectOptions, DEFAULT_LICENSE};
use weir_elf::ObjectSpec;
use weir_isa::asm::assemble;
use weir_program::{MapSpec, MapType, ProgType, Program};

fn program(prog_type: ProgType) -> Program {
    let insns = assemble(
        "mov r0, 0\n lddw r1, 0x1122334455667788\n jeq r1, 0, +1\n mov r0, 2\n ldabsb 12\n exit",
    )
    .unwrap();
    Program::from_insns(insns).with_prog_type(prog_type)
}

#[test]
fn every_type_round_trips() {
    for prog_type in ProgType::ALL {
        let program = program(prog_type);
        let bytes = write_program(&program, &ObjectOptions::new("weir_filter")).unwrap();
        let spec = ObjectSpec::parse(&bytes).unwrap();
        assert_eq!(spec.license.as_deref(), Some(DEFAULT_LICENSE));
        assert!(spec.maps.is_empty() && spec.refused.is_empty() && spec.variables.is_empty());
        assert_eq!(spec.programs.len(), 1);
        let back = &spec.programs[0];
        assert_eq!(back.name, "weir_filter");
        assert_eq!(back.section, section_name(prog_type));
        assert_eq!(back.section_offset, 0);
        assert_eq!(back.main_slots, program.len());
        assert_eq!(back.program.prog_type(), Some(prog_type));
        assert_eq!(back.program.insns(), program.insns());
        assert_eq!(back.program.to_bytes(), program.to_bytes());
    }
}

#[test]
fn name_section_and_license_are_the_callers() {
    let options = ObjectOptions {
        function: "count_9".into(),
        section: Some("xdp/devmap".into()),
        license: "GPL".into(),
    };
    let bytes = write_program(&program(ProgType::Xdp), &options).unwrap();
    let spec = ObjectSpec::parse(&bytes).unwrap();
    assert_eq!(spec.license.as_deref(), Some("GPL"));
    let back = spec.program("count_9").unwrap();
    assert_eq!(back.section, "xdp/devmap");
}

#[test]
fn what_it_cannot_write_is_refused() {
    let opts = ObjectOptions::new("f");
    let untyped = Program::from_insns(program(ProgType::Xdp).into_insns());
    let err = write_program(&untyped, &opts).unwrap_err();
    assert!(err.is_unsupported() && err.to_string().contains("without a type"), "{err}");

    let mut with_map = program(ProgType::Xdp);
    with_map.add_map(MapSpec {
        name: "m".into(),
        map_type: MapType::Array,
        key_size: 4,
        value_size: 4,
        max_entries: 1,
        flags: 0,
    });
    let err = write_program(&with_map, &opts).unwrap_err();
    assert!(err.to_string().contains("1 maps"), "{err}");

    let empty = Program::from_insns(Vec::new()).with_prog_type(ProgType::Xdp);
    assert!(write_program(&empty, &opts).unwrap_err().to_string().contains("empty"));

    for bad in ["", "9x", "a b", "a-b", "é"] {
        let err = write_program(&program(ProgType::Xdp), &ObjectOptions::new(bad)).unwrap_err();
        assert!(err.to_string().contains("function name"), "{bad}: {err}");
    }
    let wrong_section = ObjectOptions { section: Some("tc".into()), ..ObjectOptions::new("f") };
    let err = write_program(&program(ProgType::Xdp), &wrong_section).unwrap_err();
    assert!(err.to_string().contains("section `tc` for a"), "{err}");
    let nul = ObjectOptions { license: "GPL\0x".into(), ..ObjectOptions::new("f") };
    assert!(write_program(&program(ProgType::Xdp), &nul).is_err());
}
