//! As root: every program of every object in testdata/bpf/ goes through the kernel's
//! verifier with its maps created, which proves the map relocations, the global-data
//! offsets and the linked bpf-to-bpf calls right. Skipped (with a `SKIPPED:` line) where
//! `bpf()` is out of reach.

use std::path::{Path, PathBuf};

use weir_elf::{ObjectSpec, ProgramSpec};
use weir_sys::kernel::{self, KernelMap, LoadedProgram};
use weir_testkit::kernel_object;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/bpf")
}

/// Creates the object's maps (with the initial contents of `.data`/`.rodata`).
fn create_maps(object: &ObjectSpec) -> Vec<KernelMap> {
    kernel_object::create_maps(object.maps.iter().map(|m| (&m.spec, m.initial.as_deref()))).unwrap()
}

fn load(prog: &ProgramSpec, maps: &[KernelMap]) -> LoadedProgram {
    kernel_object::load(&prog.program, maps)
        .unwrap_or_else(|e| panic!("{} [{}]: {e}", prog.name, prog.section))
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
    assert_eq!(loaded.len(), 15);
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
