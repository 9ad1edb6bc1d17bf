//! `weir_elf::write`: what the writer writes, the reader reads back (program, type,
//! section, name, license), and what it cannot write is refused with the reason.

use weir_elf::write::{section_name, write_program, ObjectOptions, DEFAULT_LICENSE};
use weir_elf::ObjectSpec;
use weir_isa::asm::assemble;
use weir_program::{MapSpec, MapType, ProgType, Program, RelocTarget, Relocation};

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
        section: Some("xdp/devmap".into()),
        license: "GPL".into(),
        ..ObjectOptions::new("count_9")
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
    with_map.add_map(array("m"));
    with_map.add_relocation(Relocation {
        slot: 0,
        target: RelocTarget::MapValue { map: 0, offset: 0 },
    });
    let err = write_program(&with_map, &opts).unwrap_err();
    assert!(err.to_string().contains("global data"), "{err}");
    let mut bad_name = program(ProgType::Xdp);
    bad_name.add_map(array("a-b"));
    let err = write_program(&bad_name, &opts).unwrap_err();
    assert!(err.to_string().contains("map name `a-b`"), "{err}");
    let stray = ObjectOptions {
        entries: vec![("nope".into(), vec![0; 4], vec![0; 4])],
        ..ObjectOptions::new("f")
    };
    let err = write_program(&program(ProgType::Xdp), &stray).unwrap_err();
    assert!(err.to_string().contains("map `nope`"), "{err}");

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

fn array(name: &str) -> MapSpec {
    MapSpec {
        name: name.into(),
        map_type: MapType::Array,
        key_size: 4,
        value_size: 4,
        max_entries: 1,
        flags: 0,
    }
}

/// A program with maps: written as BTF-defined maps (pinned by name when asked) with
/// `R_BPF_64_64` relocations, read back as the same specs, the same code (map references
/// as `lddw map_idx`), the initial entries and the notes.
#[test]
fn maps_entries_and_notes_round_trip() {
    use weir_isa::ebpf::Op;
    use weir_program::ProgramBuilder;
    let mut b = ProgramBuilder::new();
    b.lddw_map_idx(1, 1);
    b.lddw_map_idx(2, 0);
    b.alu_imm(Op::Mov64Imm, 0, 2);
    b.exit();
    let mut p = b.link().unwrap().with_prog_type(ProgType::Xdp);
    let hash = MapSpec {
        name: "table".into(),
        map_type: MapType::Hash,
        key_size: 8,
        value_size: 16,
        max_entries: 100,
        flags: 1,
    };
    p.add_map(array("config"));
    p.add_map(hash.clone());
    p.add_relocation(Relocation { slot: 0, target: RelocTarget::Map { map: 1 } });
    p.add_relocation(Relocation { slot: 2, target: RelocTarget::Map { map: 0 } });
    let options = ObjectOptions {
        pin_maps: true,
        entries: vec![
            ("table".into(), vec![1; 8], vec![2; 16]),
            ("config".into(), vec![0; 4], vec![7, 0, 0, 0]),
        ],
        notes: vec![("layout".into(), b"hello".to_vec())],
        ..ObjectOptions::new("prog")
    };
    let bytes = write_program(&p, &options).unwrap();
    let spec = ObjectSpec::parse(&bytes).unwrap();
    assert_eq!(spec.maps.len(), 2);
    assert_eq!(spec.maps[0].spec, array("config"));
    assert_eq!(spec.maps[1].spec, hash);
    assert!(spec
        .maps
        .iter()
        .all(|m| m.pinning == weir_elf::Pinning::ByName && m.origin == weir_elf::MapOrigin::Btf));
    assert_eq!(spec.maps[1].entries, vec![(vec![1; 8], vec![2; 16])]);
    assert_eq!(spec.maps[0].entries, vec![(vec![0; 4], vec![7, 0, 0, 0])]);
    assert_eq!(spec.notes, vec![("layout".to_string(), b"hello".to_vec())]);
    let back = spec.program("prog").unwrap();
    assert_eq!(back.program.insns(), p.insns());
    let mut relocs = back.program.relocations().to_vec();
    relocs.sort_by_key(|r| r.slot);
    assert_eq!(relocs, p.relocations());
    // Without pinning, no `pinning` field.
    let plain = write_program(&p, &ObjectOptions::new("prog")).unwrap();
    let spec = ObjectSpec::parse(&plain).unwrap();
    assert!(spec.maps.iter().all(|m| m.pinning == weir_elf::Pinning::None && m.entries.is_empty()));
}
