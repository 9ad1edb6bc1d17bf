//! As root: every program of every object in testdata/bpf/ goes through the kernel's
//! verifier with its maps created, which proves the map relocations, the global-data
//! offsets and the linked bpf-to-bpf calls right. Skipped (with a `SKIPPED:` line) where
//! `bpf()` is out of reach.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use weir_elf::{ObjectSpec, ProgramSpec};
use weir_isa::ebpf::{encode_bytes, Insn, Op};
use weir_program::RelocTarget;
use weir_sys::kernel::KernelMap;
use weir_sys::kernel::{self, Kernel, LoadedProgram};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/bpf")
}

/// Creates the object's maps (with the initial contents of `.data`/`.rodata`).
fn create_maps(object: &ObjectSpec) -> Vec<KernelMap> {
    let kernel = Kernel::new();
    object
        .maps
        .iter()
        .map(|m| {
            let s = &m.spec;
            let map = kernel
                .map_create(s.map_type, s.key_size, s.value_size, s.max_entries, s.flags)
                .unwrap_or_else(|e| panic!("map {}: {e}", s.name));
            if let Some(initial) = &m.initial {
                map.update(Some(&0u32.to_ne_bytes()), initial, 0).unwrap();
            }
            map
        })
        .collect()
}

/// The program's bytes with its map references bound to the maps' descriptors
/// (`lddw map_fd` / `lddw map_value`, the forms a load without `fd_array` takes).
fn bind(prog: &ProgramSpec, maps: &[KernelMap]) -> Vec<u8> {
    let mut insns: Vec<Insn> = prog.program.insns().to_vec();
    for r in prog.program.relocations() {
        let dst = insns[r.slot].dst;
        insns[r.slot] = match r.target {
            RelocTarget::Map { map } => {
                Insn::new(Op::LddwMapFd, dst, 1, 0, i64::from(maps[map].as_raw_fd()))
            }
            RelocTarget::MapValue { map, offset } => Insn::new(
                Op::LddwMapValue,
                dst,
                2,
                0,
                i64::from(maps[map].as_raw_fd()) | (i64::from(offset) << 32),
            ),
        };
    }
    encode_bytes(&insns)
}

fn load(prog: &ProgramSpec, maps: &[KernelMap]) -> LoadedProgram {
    let prog_type = prog.program.prog_type().unwrap();
    Kernel::new().load(prog_type, &bind(prog, maps)).unwrap_or_else(|e| {
        panic!("{} [{}]: the kernel refused it: {}", prog.name, prog.section, e.reason())
    })
}

#[test]
fn kernel_verifier_accepts_every_program() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_verifier_accepts_every_program: {reason}");
        return;
    }
    let mut loaded = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    paths.sort();
    for path in paths {
        let object = ObjectSpec::parse(&std::fs::read(&path).unwrap()).unwrap();
        let maps = create_maps(&object);
        for prog in &object.programs {
            load(prog, &maps);
            loaded.push(format!("{}:{}", path.file_name().unwrap().to_string_lossy(), prog.name));
        }
    }
    println!("the kernel's verifier accepted {} programs: {loaded:?}", loaded.len());
    assert_eq!(loaded.len(), 13);
}

/// A `const volatile` knob set with `set_rodata` is what the program reads: `tc_filter`
/// returns `verdict`.
#[test]
fn rodata_knob_reaches_the_program() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: rodata_knob_reaches_the_program: {reason}");
        return;
    }
    let bytes = std::fs::read(dir().join("tc_knob.o")).unwrap();
    let frame = [0u8; 64];
    for verdict in [0u32, 2, 7] {
        let mut object = ObjectSpec::parse(&bytes).unwrap();
        object.set_rodata("verdict", &verdict.to_le_bytes()).unwrap();
        let maps = create_maps(&object);
        let prog = load(object.program("tc_filter").unwrap(), &maps);
        let run = prog.test_run(&frame, 1).unwrap();
        assert_eq!(run.retval, verdict);
    }
}
