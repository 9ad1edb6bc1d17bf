//! The committed objects of testdata/bpf/, parsed: programs, maps, relocations and calls,
//! checked against what the C sources say and, where the tools are installed, against
//! `llvm-objdump`'s symbol table and relocation records. Also: the committed objects are
//! what scripts/build-bpf-objects.sh builds.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use weir_elf::{
    DataKind, ElfErrorKind, MapOrigin, ObjectSpec, Pinning, BPF_F_MMAPABLE, BPF_F_RDONLY_PROG,
};
use weir_isa::ebpf::Op;
use weir_program::{MapType, ProgType, RelocTarget};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/bpf")
}

fn objects() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    all.sort();
    all
}

fn load(name: &str) -> ObjectSpec {
    let bytes = std::fs::read(dir().join(format!("{name}.o"))).unwrap();
    ObjectSpec::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn map_names(o: &ObjectSpec) -> Vec<&str> {
    o.maps.iter().map(|m| m.spec.name.as_str()).collect()
}

#[test]
fn xdp_counter() {
    let o = load("xdp_counter");
    assert_eq!(o.license.as_deref(), Some("GPL"));
    assert_eq!(map_names(&o), ["proto_count"]);
    let m = &o.maps[0];
    assert_eq!(
        (m.spec.map_type, m.spec.key_size, m.spec.value_size, m.spec.max_entries),
        (MapType::Hash, 4, 8, 256)
    );
    assert_eq!((m.origin, m.pinning, m.initial.as_ref()), (MapOrigin::Btf, Pinning::None, None));
    let p = o.program("xdp_count").unwrap();
    assert_eq!((p.section.as_str(), p.program.prog_type()), ("xdp", Some(ProgType::Xdp)));
    assert_eq!((p.program.len(), p.main_slots), (30, 30));
    let relocs: Vec<_> = p.program.relocations().iter().map(|r| (r.slot, r.target)).collect();
    assert_eq!(relocs, [(13, RelocTarget::Map { map: 0 }), (24, RelocTarget::Map { map: 0 })]);
    for r in p.program.relocations() {
        let insn = p.program.insns()[r.slot];
        assert_eq!((insn.op, insn.src, insn.imm), (Op::LddwMapIdx, 5, 0));
        assert_eq!(p.program.insns()[r.slot + 1].op, Op::LddwHigh);
    }
    assert_eq!(p.program.maps().len(), 1);
    assert!(o.refused.is_empty());
}

#[test]
fn tc_knob_global_data() {
    let mut o = load("tc_knob");
    assert_eq!(map_names(&o), ["lengths", ".rodata", ".data", ".bss"]);
    let kinds: Vec<_> = o.maps.iter().map(|m| m.origin).collect();
    assert_eq!(
        kinds,
        [
            MapOrigin::Btf,
            MapOrigin::Data(DataKind::Rodata),
            MapOrigin::Data(DataKind::Data),
            MapOrigin::Data(DataKind::Bss)
        ]
    );
    for m in &o.maps[1..] {
        assert_eq!((m.spec.map_type, m.spec.key_size, m.spec.max_entries), (MapType::Array, 4, 1));
        assert_eq!(m.spec.value_size, 8);
    }
    assert_eq!(o.maps[1].spec.flags, BPF_F_MMAPABLE | BPF_F_RDONLY_PROG);
    assert_eq!(o.maps[2].spec.flags, BPF_F_MMAPABLE);
    // min_len = 64, verdict = TC_ACT_OK (0); seen = 1; total_bytes in .bss.
    assert_eq!(o.maps[1].initial.as_deref(), Some(&[64, 0, 0, 0, 0, 0, 0, 0][..]));
    assert_eq!(o.maps[2].initial.as_deref(), Some(&1u64.to_le_bytes()[..]));
    assert_eq!(o.maps[3].initial, None);
    assert_eq!(o.variable_value("min_len"), Some(&64u32.to_le_bytes()[..]));

    let p = o.program("tc_filter").unwrap();
    assert_eq!(p.program.prog_type(), Some(ProgType::SchedCls));
    let relocs: Vec<_> = p.program.relocations().iter().map(|r| (r.slot, r.target)).collect();
    assert_eq!(
        relocs,
        [
            (2, RelocTarget::MapValue { map: 1, offset: 0 }),
            (11, RelocTarget::Map { map: 0 }),
            (18, RelocTarget::MapValue { map: 2, offset: 0 }),
            (24, RelocTarget::MapValue { map: 3, offset: 0 }),
            (29, RelocTarget::MapValue { map: 1, offset: 4 }),
        ]
    );
    let last = p.program.insns()[29];
    assert_eq!((last.op, last.src, last.imm), (Op::LddwMapIdxValue, 6, 1 | (4 << 32)));

    o.set_rodata("min_len", &128u32.to_le_bytes()).unwrap();
    o.set_rodata("verdict", &2u32.to_le_bytes()).unwrap();
    assert_eq!(o.maps[1].initial.as_deref(), Some(&[128, 0, 0, 0, 2, 0, 0, 0][..]));
    let e = o.set_rodata("min_len", &[1, 2]).unwrap_err();
    assert!(e.to_string().contains("4 bytes"), "{e}");
    assert_eq!(e.section.as_deref(), Some(".rodata"));
    // Not read-only, or unknown: refused, nothing changed.
    for name in ["seen", "total_bytes", "nope"] {
        let e = o.set_rodata(name, &[0; 8]).unwrap_err();
        assert_eq!(e.kind, ElfErrorKind::NoSuchVariable(name.into()));
    }
    assert_eq!(o.variable_value("seen"), Some(&1u64.to_le_bytes()[..]));
}

#[test]
fn socket_filter() {
    let o = load("socket_filter");
    assert_eq!(o.license.as_deref(), Some("Dual BSD/GPL"));
    assert!(o.maps.is_empty());
    let p = o.program("tcp_only").unwrap();
    assert_eq!(p.program.prog_type(), Some(ProgType::SocketFilter));
    assert_eq!(p.program.len(), 10);
    assert!(p.program.insns().iter().any(|i| i.op == Op::LdAbsH));
}

#[test]
fn two_programs_in_one_section() {
    let o = load("two_funcs");
    let got: Vec<_> = o
        .programs
        .iter()
        .map(|p| (p.name.as_str(), p.section.as_str(), p.section_offset, p.program.len()))
        .collect();
    assert_eq!(
        got,
        [
            ("xdp_pass", "xdp", 0, 2),
            ("xdp_drop_short", "xdp", 16, 10),
            ("xdp_devmap_pass", "xdp/devmap", 0, 2)
        ]
    );
    assert!(o.programs.iter().all(|p| p.program.prog_type() == Some(ProgType::Xdp)));
    let e = o.program("xdp_missing").unwrap_err();
    assert_eq!(e.kind, ElfErrorKind::NoSuchProgram("xdp_missing".into()));
}

/// The target slot of the call at `pc`.
fn call_target(p: &weir_program::Program, pc: usize) -> usize {
    let insn = p.insns()[pc];
    assert_eq!((insn.op, insn.src), (Op::CallLocal, 1), "slot {pc}");
    usize::try_from(pc as i64 + insn.imm + 1).unwrap()
}

#[test]
fn bpf_to_bpf_calls() {
    let o = load("calls");
    assert_eq!(map_names(&o), ["hits", ".data"]);
    // xdp_calls (11 slots) calls classify (.text 0..8), which calls bump (.text 8..25).
    let x = o.program("xdp_calls").unwrap();
    assert_eq!((x.main_slots, x.program.len()), (11, 11 + 8 + 17));
    assert_eq!(call_target(&x.program, 3), 11);
    let calls: Vec<usize> = (0..x.program.len())
        .filter(|&pc| x.program.insns()[pc].op == Op::CallLocal)
        .map(|pc| call_target(&x.program, pc))
        .collect();
    // classify's one call (`call bump` at .text slot 6) is now at 11 + 6 and goes to 19.
    assert_eq!(calls, [11, 19]);
    assert_eq!(call_target(&x.program, 17), 19);
    // bump's map and global-data references moved with it.
    let relocs: Vec<_> = x.program.relocations().iter().map(|r| (r.slot, r.target)).collect();
    assert_eq!(
        relocs,
        [
            (19 + 3, RelocTarget::Map { map: 0 }),
            (19 + 8, RelocTarget::MapValue { map: 1, offset: 0 })
        ]
    );
    // tc_calls calls bump only: `call 7` relocated against .text's section symbol goes to
    // .text slot 0 + 7 + 1 = 8, bump's first slot, appended at 4.
    let t = o.program("tc_calls").unwrap();
    assert_eq!((t.main_slots, t.program.len()), (4, 4 + 17));
    assert_eq!(call_target(&t.program, 2), 4);
    assert_eq!(&t.program.insns()[4..], &x.program.insns()[19..]);
    // Every call lands on the first slot of an appended function, and the program ends
    // with an exit.
    for p in &o.programs {
        assert_eq!(p.program.insns().last().map(|i| i.op), Some(Op::Exit));
    }
}

#[test]
fn legacy_maps_section() {
    let o = load("legacy_maps");
    let specs: Vec<_> = o
        .maps
        .iter()
        .map(|m| {
            (
                m.spec.name.as_str(),
                m.spec.map_type,
                m.spec.key_size,
                m.spec.value_size,
                m.spec.max_entries,
                m.spec.flags,
                m.origin,
            )
        })
        .collect();
    assert_eq!(
        specs,
        [
            ("legacy_counts", MapType::Array, 4, 8, 8, 0, MapOrigin::Legacy),
            ("legacy_flows", MapType::Hash, 8, 16, 1024, 1, MapOrigin::Legacy)
        ]
    );
    let p = o.program("legacy_prog").unwrap();
    let targets: Vec<_> = p.program.relocations().iter().map(|r| r.target).collect();
    assert_eq!(targets, [RelocTarget::Map { map: 0 }, RelocTarget::Map { map: 1 }]);
}

#[test]
fn tail_call_prog_array() {
    let o = load("tail_call");
    let m = o.map("jump_table").unwrap();
    assert_eq!(
        (m.spec.map_type, m.spec.key_size, m.spec.value_size, m.spec.max_entries, m.pinning),
        (MapType::ProgArray, 4, 4, 8, Pinning::ByName)
    );
    let d = o.program("xdp_dispatch").unwrap();
    assert_eq!(d.program.relocations().len(), 1);
    assert!(d.program.insns().iter().any(|i| i.op == Op::Call && i.imm == 12)); // tail_call
    assert_eq!(o.program("xdp_target").unwrap().program.len(), 2);
}

#[test]
fn lpm_trie_and_ring_buffer() {
    let o = load("lpm_ringbuf");
    let lpm = o.map("prefixes").unwrap();
    assert_eq!(
        (lpm.spec.map_type, lpm.spec.key_size, lpm.spec.value_size, lpm.spec.flags),
        (MapType::LpmTrie, 8, 4, 1)
    );
    let rb = o.map("events").unwrap();
    assert_eq!(
        (rb.spec.map_type, rb.spec.key_size, rb.spec.value_size, rb.spec.max_entries),
        (MapType::RingBuf, 0, 0, 4096)
    );
    let p = o.program("xdp_lpm").unwrap();
    let targets: Vec<_> = p.program.relocations().iter().map(|r| r.target).collect();
    assert_eq!(targets, [RelocTarget::Map { map: 0 }, RelocTarget::Map { map: 1 }]);
}

fn tool(name: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(name).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Cross-check with `llvm-objdump -t -r`: each program's length is its FUNC symbol's size,
/// and its relocated `lddw`s (inside the function itself) are exactly the R_BPF_64_64
/// records of that range of its section.
#[test]
fn matches_llvm_objdump() {
    if tool("llvm-objdump", &["--version"]).is_none() {
        println!("SKIPPED: matches_llvm_objdump: llvm-objdump is not installed");
        return;
    }
    let mut checked = 0;
    for path in objects() {
        let o = ObjectSpec::parse(&std::fs::read(&path).unwrap()).unwrap();
        let p = path.to_str().unwrap();
        let symbols = tool("llvm-objdump", &["-t", p]).unwrap();
        let relocs = tool("llvm-objdump", &["-r", p]).unwrap();
        for prog in &o.programs {
            // "0000000000000000 g     F xdp	0000000000000058 xdp_calls"
            let line = symbols
                .lines()
                .find(|l| l.split_whitespace().last() == Some(prog.name.as_str()))
                .unwrap_or_else(|| panic!("{p}: no symbol {}", prog.name));
            let size = u64::from_str_radix(line.split_whitespace().rev().nth(1).unwrap(), 16);
            assert_eq!(size.unwrap() / 8, prog.main_slots as u64, "{p}: {}", prog.name);

            let mut in_section = false;
            let mut want = BTreeSet::new();
            for l in relocs.lines() {
                if let Some(rest) = l.strip_prefix("RELOCATION RECORDS FOR [") {
                    in_section = rest.trim_end_matches("]:") == prog.section;
                    continue;
                }
                let f: Vec<&str> = l.split_whitespace().collect();
                if in_section && f.len() == 3 && f[1] == "R_BPF_64_64" {
                    let off = u64::from_str_radix(f[0], 16).unwrap();
                    let end = prog.section_offset + prog.main_slots as u64 * 8;
                    if (prog.section_offset..end).contains(&off) {
                        want.insert((off - prog.section_offset) / 8);
                    }
                }
            }
            let got: BTreeSet<u64> = prog
                .program
                .relocations()
                .iter()
                .filter(|r| r.slot < prog.main_slots)
                .map(|r| r.slot as u64)
                .collect();
            assert_eq!(got, want, "{p}: {}", prog.name);
            checked += 1;
        }
    }
    assert!(checked >= 13, "{checked} programs checked");
}

/// The committed objects are what scripts/build-bpf-objects.sh builds. The build is
/// byte-reproducible (checked: the same bytes across runs and from another checkout
/// directory, thanks to the debug prefix map), so bytes are compared; with another clang
/// than the one that built them (14) the objects legitimately differ, and the test says
/// so instead.
#[test]
fn committed_objects_are_rebuilt_identically() {
    let Some(version) = tool("clang", &["--version"]) else {
        println!("SKIPPED: committed_objects_are_rebuilt_identically: clang is not installed");
        return;
    };
    if !version.contains("clang version 14.") {
        let first = version.lines().next().unwrap_or_default();
        println!(
            "SKIPPED: committed_objects_are_rebuilt_identically: {first}, objects built with 14"
        );
        return;
    }
    let out = std::env::temp_dir().join(format!("weir-elf-rebuild-{}", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-bpf-objects.sh");
    let status = Command::new("bash").arg(script).arg(&out).status().unwrap();
    assert!(status.success());
    let mut differ = Vec::new();
    for path in objects() {
        let name = path.file_name().unwrap();
        let built = std::fs::read(out.join(name)).unwrap();
        if built != std::fs::read(&path).unwrap() {
            differ.push(name.to_string_lossy().into_owned());
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(differ.is_empty(), "rebuild with scripts/build-bpf-objects.sh: {differ:?} differ");
    // Every source has its object.
    let sources = std::fs::read_dir(dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "c"))
        .count();
    assert_eq!(sources, objects().len());
}

#[test]
fn parse_time_of_a_10k_instruction_object() {
    let bytes = std::fs::read(dir().join("big.o")).unwrap();
    let o = ObjectSpec::parse(&bytes).unwrap();
    assert_eq!(o.programs[0].program.len(), 10_505);
    let runs = 50;
    let start = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(ObjectSpec::parse(std::hint::black_box(&bytes)).unwrap());
    }
    let per = start.elapsed() / runs;
    println!("parse of big.o ({} bytes, 10,505 slots): {per:?} per parse", bytes.len());
    // The goal is 10 ms; the bound leaves room for a debug build and a loaded machine.
    assert!(per < std::time::Duration::from_millis(100), "{per:?}");
}
