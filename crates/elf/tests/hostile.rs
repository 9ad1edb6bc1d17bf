//! Refusals: unsupported features (testdata/bpf/refused/), each named with its section and
//! offset; malformed files, hand-broken in known places; and 10,000 truncated or mutated
//! versions of the test objects, none of which may panic.

use std::path::{Path, PathBuf};

use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection};
use weir_elf::{ElfErrorKind, ObjectSpec};
use weir_testkit::SplitMix64;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/bpf")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap()
}

#[test]
fn core_relocations_refuse_only_the_program_that_has_them() {
    let o = ObjectSpec::parse(&read("refused/core.o")).unwrap();
    assert_eq!(o.program("xdp_plain").unwrap().program.len(), 2);
    let e = o.program("xdp_core").unwrap_err();
    assert!(e.is_unsupported());
    assert_eq!((e.section.as_deref(), e.offset), (Some("xdp"), Some(0)));
    assert!(e.to_string().contains("CO-RE relocation"), "{e}");
}

#[test]
fn externs_and_unknown_section_kinds_are_refused_by_name() {
    let o = ObjectSpec::parse(&read("refused/externs.o")).unwrap();
    let names: Vec<_> = o.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["tc_plain"]);
    for (prog, section, offset, text) in [
        ("xdp_kfunc", "xdp", 0x0, "kfunc or extern function call `bpf_rcu_read_lock`"),
        ("xdp_kconfig", "xdp", 0x18, ".kconfig extern `LINUX_KERNEL_VERSION`"),
        ("xdp_ksym", "xdp", 0x50, ".ksyms extern (ksym) `bpf_prog_active`"),
        ("probe_open", "kprobe/do_sys_open", 0x0, "section kind `kprobe/do_sys_open`"),
    ] {
        let e = o.program(prog).unwrap_err();
        assert!(e.is_unsupported(), "{prog}: {e}");
        assert_eq!((e.section.as_deref(), e.offset), (Some(section), Some(offset)), "{e}");
        assert!(e.to_string().contains(text), "{prog}: {e}");
    }
}

#[test]
fn map_in_map_is_refused() {
    let e = ObjectSpec::parse(&read("refused/map_in_map.o")).unwrap_err();
    assert!(e.is_unsupported());
    assert_eq!((e.section.as_deref(), e.offset), (Some(".maps"), Some(0)));
    assert!(e.to_string().contains("map `outer`: map-in-map"), "{e}");
}

/// The file range of section `name`.
fn section_range(bytes: &[u8], name: &str) -> std::ops::Range<usize> {
    let file = ElfFile64::<LittleEndian>::parse(bytes).unwrap();
    let (start, len) = file.section_by_name(name).unwrap().file_range().unwrap();
    start as usize..(start + len) as usize
}

fn malformed(bytes: &[u8]) -> weir_elf::ElfError {
    let e = ObjectSpec::parse(bytes).unwrap_err();
    assert!(matches!(e.kind, ElfErrorKind::Malformed(_)), "{e}");
    e
}

#[test]
fn bad_relocation_offset() {
    let mut bytes = read("xdp_counter.o");
    let rel = section_range(&bytes, ".relxdp");
    // The second record's r_offset: past the section, then not on an instruction.
    bytes[rel.start + 16..rel.start + 24].copy_from_slice(&0x10_0000u64.to_le_bytes());
    let e = malformed(&bytes);
    assert_eq!((e.section.as_deref(), e.offset), (Some(".relxdp"), Some(16)));
    assert!(e.to_string().contains("relocation offset 0x100000"), "{e}");
    bytes[rel.start + 16..rel.start + 24].copy_from_slice(&0x61u64.to_le_bytes());
    assert!(malformed(&bytes).to_string().contains("relocation offset 0x61"));
}

#[test]
fn symbol_index_out_of_range() {
    let mut bytes = read("xdp_counter.o");
    let rel = section_range(&bytes, ".relxdp");
    // r_info = sym << 32 | type.
    bytes[rel.start + 8..rel.start + 16].copy_from_slice(&((0xffffu64 << 32) | 1).to_le_bytes());
    let e = malformed(&bytes);
    assert_eq!((e.section.as_deref(), e.offset), (Some(".relxdp"), Some(0)));
    assert!(e.to_string().contains("symbol index 65535 out of range"), "{e}");
}

#[test]
fn unknown_relocation_type_refuses_the_program() {
    let mut bytes = read("xdp_counter.o");
    let rel = section_range(&bytes, ".relxdp");
    let info = u64::from_le_bytes(bytes[rel.start + 8..rel.start + 16].try_into().unwrap());
    bytes[rel.start + 8..rel.start + 16]
        .copy_from_slice(&((info & !0xffff_ffff) | 77).to_le_bytes());
    let o = ObjectSpec::parse(&bytes).unwrap();
    let e = o.program("xdp_count").unwrap_err();
    assert!(e.is_unsupported());
    assert!(e.to_string().contains("relocation type 77"), "{e}");
    assert_eq!(e.section.as_deref(), Some("xdp"));
}

#[test]
fn huge_counts_and_truncated_sections() {
    let pristine = read("tc_knob.o");
    // e_shnum = 0xffff: the section table would run past the file.
    let mut bytes = pristine.clone();
    bytes[60..62].copy_from_slice(&0xffffu16.to_le_bytes());
    malformed(&bytes);
    // A BTF type with vlen 0xffff members runs past the type area.
    let mut bytes = pristine.clone();
    let btf = section_range(&bytes, ".BTF");
    let hdr_len = u32::from_le_bytes(bytes[btf.start + 4..btf.start + 8].try_into().unwrap());
    let first_type = btf.start + hdr_len as usize;
    bytes[first_type + 4..first_type + 8].copy_from_slice(&((4u32 << 24) | 0xffff).to_le_bytes());
    let e = malformed(&bytes);
    assert_eq!(e.section.as_deref(), Some(".BTF"));
    // The BTF string area said to be 4 GiB long.
    let mut bytes = pristine.clone();
    bytes[btf.start + 20..btf.start + 24].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(malformed(&bytes).to_string().contains("string area"));
    // Every truncation: an error, never a panic.
    for len in (0..pristine.len()).step_by(7) {
        assert!(ObjectSpec::parse(&pristine[..len]).is_err(), "truncated to {len}");
    }
}

/// One mutation: truncation, byte flips, or an interesting value written over 1, 2, 4 or
/// 8 bytes (sizes, offsets, counts, indices).
fn mutate(rng: &mut SplitMix64, data: &mut Vec<u8>) {
    const INTERESTING: [u64; 10] =
        [0, 1, 7, 8, 0x7f, 0xff, 0xffff, 0x7fff_ffff, 0xffff_ffff, u64::MAX];
    match rng.below_usize(4) {
        0 => data.truncate(rng.below_usize(data.len())),
        1 => {
            for _ in 0..1 + rng.below_usize(8) {
                let at = rng.below_usize(data.len());
                data[at] ^= 1 << rng.below_usize(8);
            }
        }
        _ => {
            let width = [1, 2, 4, 8][rng.below_usize(4)];
            // A file truncated below the width has nothing to overwrite.
            if data.len() < width {
                return;
            }
            let at = rng.below_usize(data.len().saturating_sub(width));
            let value = INTERESTING[rng.below_usize(INTERESTING.len())].to_le_bytes();
            data[at..at + width].copy_from_slice(&value[..width]);
        }
    }
}

#[test]
fn ten_thousand_mutations_never_panic() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "o") && !p.ends_with("big.o"))
        .collect();
    paths.sort();
    let originals: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let mut rng = SplitMix64::new(0x5eed_e1f0);
    let (mut ok, mut err) = (0, 0);
    for i in 0..10_000 {
        let mut data = originals[i % originals.len()].clone();
        for _ in 0..1 + rng.below_usize(3) {
            mutate(&mut rng, &mut data);
        }
        match ObjectSpec::parse(&data) {
            Ok(o) => {
                ok += 1;
                // Whatever was taken is consistent: relocations point at lddw slots inside
                // the program and at maps it lists.
                for p in &o.programs {
                    for r in p.program.relocations() {
                        assert!(r.slot + 1 < p.program.len());
                        let map = match r.target {
                            weir_program::RelocTarget::Map { map } => map,
                            weir_program::RelocTarget::MapValue { map, .. } => map,
                        };
                        assert!(map < p.program.maps().len());
                    }
                }
            }
            Err(e) => {
                err += 1;
                assert!(!e.to_string().is_empty());
            }
        }
    }
    println!("10,000 mutated objects: {ok} parsed, {err} refused");
    assert!(ok > 0 && err > 0);
}
