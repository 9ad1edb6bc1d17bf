//! `weir-elf`: the front end for BPF objects built by clang (`clang -O2 -g -target bpf -c`).
//! It reads an ELF object into an [`ObjectSpec`], pure data: its programs (each a
//! [`weir_program::Program`] with its maps and relocations), its maps (BTF-defined `.maps`,
//! the legacy `maps` section, and the global-data sections `.data`, `.rodata`, `.bss` as
//! single-entry arrays) and its license. Nothing is loaded and nothing is created: the
//! runtime, or the kernel, makes live maps from the specs and resolves the relocations.
//!
//! ```text
//!  clang-built .o ─► weir-elf: ObjectSpec::parse ─► ProgramSpec.program: weir_program::Program
//!                                                   (maps as MapSpecs, lddw relocations,
//!                                                    bpf-to-bpf calls already linked)
//!                                                 ─► validate / verify ─► engine or kernel
//! ```
//!
//! It follows libbpf's conventions (libbpf's `bpf_object__open` is the reference):
//!
//! - **Programs** are the global `FUNC` symbols of the executable sections other than
//!   `.text`; the section name says the program type (`xdp`, `xdp/…`, `xdp.frags…`,
//!   `socket`, `socket/…`, `tc`, `tc/…`, `tcx/…`, `classifier…`, `netkit/…`, `action…`).
//!   Other section kinds (`kprobe/…`, `tracepoint/…`, …) are kept by name and refused
//!   when asked for ([`ObjectSpec::program`]).
//! - **bpf-to-bpf calls**: every function a program calls (in `.text`, or in any executable
//!   section) is appended after it, once, and each `call` (`src = 1`) is re-targeted
//!   there, as libbpf does: a call relocated (`R_BPF_64_32`) against symbol `S` goes to
//!   slot `S.value / 8 + imm + 1` of `S`'s section; an unrelocated one is pc-relative inside
//!   its own section.
//! - **Map references**: an `lddw` relocated (`R_BPF_64_64`) against a map symbol becomes
//!   `lddw map_idx` (`src = 5`, imm = the map's index, what the kernel's `fd_array` mode
//!   takes) with a [`weir_program::RelocTarget::Map`]; one against a global variable becomes
//!   `lddw map_idx_value` (`src = 6`, imm = index, high half = offset) with a
//!   [`weir_program::RelocTarget::MapValue`] whose offset is the symbol's value plus the addend in the
//!   instruction's immediate. Every program lists all the object's maps, in the object's
//!   order, so that its indices are the object's.
//! - **Global data** maps are named by their section (`.data`, `.rodata`, `.bss`,
//!   `.data.foo`, ...), not with libbpf's object-name prefix (`obj_name.rodata`): the
//!   spec has no object name. Their flags are libbpf's (`BPF_F_MMAPABLE`, and
//!   `BPF_F_RDONLY_PROG` for `.rodata`), and `.data`/`.rodata` carry their initial
//!   contents; [`ObjectSpec::set_rodata`] sets a `const volatile` knob by name.
//! - **Callbacks**: `lddw` of a function (`bpf_loop`'s callback; an `R_BPF_64_64` against
//!   a code section, the function's offset in the immediate) becomes `lddw func` (`src =
//!   4`) to where the function is linked. `.BTF.ext` func_info becomes
//!   [`ProgramSpec::functions`] (each linked function's first slot and `FUNC` type), and
//!   `.BTF` [`ObjectSpec::btf`] as the kernel takes it: what a `bpf()` load sends with the
//!   program, as libbpf does, and what tells weir's verifier that the program may take a
//!   function's address. Line info is not read.
//!
//! Refused, with the section and offset: CO-RE relocations (only for the programs that
//! have them), kfunc calls, `.ksyms` and `.kconfig` externs and other undefined symbols
//! (static linking), map-in-map (`values`, `__array`), unknown relocation types, big-endian objects. A malformed or hostile file gives an
//! [`ElfError`], never a panic; memory is bounded by the input's size and
//! [`MAX_PROGRAM_SLOTS`]/[`MAX_TOTAL_SLOTS`].
//!
//! ```no_run
//! use weir_elf::ObjectSpec;
//! let bytes = std::fs::read("testdata/bpf/tc_knob.o").unwrap();
//! let mut object = ObjectSpec::parse(&bytes).unwrap();
//! object.set_rodata("min_len", &128u32.to_le_bytes()).unwrap();
//! let prog = object.program("tc_filter").unwrap();
//! println!("{} ({}): {} slots, {} maps", prog.name, prog.section, prog.program.len(),
//!          prog.program.maps().len());
//! ```

mod btf;
mod btf_encode;
mod error;
pub mod extra;
mod link;
mod parse;
mod section;
pub mod write;

pub use btf_encode::{func_btf, func_btf_id};
pub use error::{ElfError, ElfErrorKind};
pub use section::prog_type_of_section;

use weir_program::{MapSpec, Program};

/// Longest program weir links (the main function and every function it calls), in slots:
/// the kernel's `BPF_COMPLEXITY_LIMIT_INSNS`.
pub const MAX_PROGRAM_SLOTS: usize = 1_000_000;

/// Most slots of all the programs of one object together (calls copy functions into every
/// program that calls them, so this bounds the output, not only the input).
pub const MAX_TOTAL_SLOTS: usize = 4_000_000;

/// `BPF_F_RDONLY_PROG`: the program may not write the map.
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;
/// `BPF_F_MMAPABLE`: the array may be mapped into user space.
pub const BPF_F_MMAPABLE: u32 = 1 << 10;

/// A parsed object: its programs, maps and license.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectSpec {
    /// The `license` section's string (`None` when the object has none).
    pub license: Option<String>,
    /// The `version` section (the kernel version old kprobe loaders wanted), when present.
    pub kernel_version: Option<u32>,
    /// Every map, in libbpf's order: the legacy `maps` section, then `.maps`, then the
    /// global-data sections in section order.
    pub maps: Vec<ObjectMap>,
    /// The programs weir can take, in section order then symbol order.
    pub programs: Vec<ProgramSpec>,
    /// The programs found but refused (unknown section kind, CO-RE, kfuncs ...), with why.
    pub refused: Vec<RefusedProgram>,
    /// The global variables of the global-data sections (what [`ObjectSpec::set_rodata`]
    /// looks up).
    pub variables: Vec<Variable>,
    /// weir's notes (`.weir.note.NAME` sections, [`extra`]): (NAME, bytes).
    pub notes: Vec<(String, Vec<u8>)>,
    /// The object's `.BTF` as the kernel takes it (`DATASEC` sizes and variable offsets
    /// filled in, as libbpf does), to load with programs that have
    /// [`ProgramSpec::functions`]; `None` without `.BTF`.
    pub btf: Option<Vec<u8>>,
}

/// One function of a linked program as `.BTF.ext` func_info describes it: what the kernel
/// wants with a program of several functions (`bpf_func_info`, with the object's
/// [`ObjectSpec::btf`]) and what lets a verifier take a function's address (`bpf_loop`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncInfo {
    /// The function's first slot in [`ProgramSpec::program`].
    pub slot: u32,
    /// Its `FUNC` type id in the object's BTF.
    pub type_id: u32,
    /// Its symbol's name.
    pub name: String,
}

/// One program: a global function of a program section, linked with the functions it calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramSpec {
    /// The function's name.
    pub name: String,
    /// The ELF section it is in (libbpf's `SEC()` name), e.g. `xdp` or `tcx/ingress`.
    pub section: String,
    /// Byte offset of the function inside its section (what `llvm-objdump -d -r` shows).
    pub section_offset: u64,
    /// The program, its type set from the section, all the object's maps and its
    /// relocations.
    pub program: Program,
    /// How many slots of [`ProgramSpec::program`] are the function itself; the functions
    /// it calls follow.
    pub main_slots: usize,
    /// The object's license (copied so that a program can be loaded on its own).
    pub license: Option<String>,
    /// Every function of the linked program, by first slot, from `.BTF.ext` func_info;
    /// empty when the object has none for one of them (a bare object, `weir compile`'s).
    pub functions: Vec<FuncInfo>,
}

/// A program the object has but weir refuses, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedProgram {
    pub name: String,
    pub section: String,
    pub error: ElfError,
}

/// Where a map was declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapOrigin {
    /// A BTF-defined map in `.maps` (`struct { __uint(type, ...); ... } name SEC(".maps")`).
    Btf,
    /// A `struct bpf_map_def` record in the legacy `maps` section.
    Legacy,
    /// A global-data section as a single-entry array.
    Data(DataKind),
}

/// Which kind of global-data section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    /// `.data`, `.data.*`: initialized, writable.
    Data,
    /// `.rodata`, `.rodata.*`: read-only for programs (`const`, `const volatile` knobs).
    Rodata,
    /// `.bss`: zero-initialized.
    Bss,
}

/// libbpf's `pinning` attribute of a BTF-defined map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Pinning {
    #[default]
    None,
    /// `LIBBPF_PIN_BY_NAME`: pinned under the bpffs directory by the map's name.
    ByName,
}

/// A map of the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectMap {
    /// What `BPF_MAP_CREATE` takes (the name is the symbol's, or the section's for data).
    pub spec: MapSpec,
    pub origin: MapOrigin,
    /// The section it was declared in.
    pub section: String,
    pub pinning: Pinning,
    /// The initial value of the single entry of a `.data`/`.rodata` map (`value_size`
    /// bytes); `None` for other maps and for `.bss` (all zeros).
    pub initial: Option<Vec<u8>>,
    /// Initial entries (key, value) from weir's `.weir.entries` section ([`extra`]).
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A global variable in a global-data section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    /// Index into [`ObjectSpec::maps`] of its section's map.
    pub map: usize,
    /// Offset inside the map's value.
    pub offset: u32,
    pub size: u32,
}

impl ObjectSpec {
    /// Reads a clang-built BPF object (64-bit little-endian ELF relocatable, `EM_BPF`).
    pub fn parse(bytes: &[u8]) -> Result<ObjectSpec, ElfError> {
        parse::parse(bytes)
    }

    /// The program named `name`: an error if the object has none, or refuses it (the error
    /// then says why, with the section and offset).
    pub fn program(&self, name: &str) -> Result<&ProgramSpec, ElfError> {
        if let Some(p) = self.programs.iter().find(|p| p.name == name) {
            return Ok(p);
        }
        if let Some(r) = self.refused.iter().find(|r| r.name == name) {
            return Err(r.error.clone());
        }
        Err(ElfError {
            section: None,
            offset: None,
            kind: ElfErrorKind::NoSuchProgram(name.to_owned()),
        })
    }

    /// The map named `name`.
    pub fn map(&self, name: &str) -> Option<&ObjectMap> {
        self.maps.iter().find(|m| m.spec.name == name)
    }

    /// Sets the initial value of the read-only global `name` (a `const volatile` knob in
    /// `.rodata`): `value` must be exactly the variable's size. Programs read it from the
    /// map's initial contents, which the loader writes (and freezes) before loading them.
    pub fn set_rodata(&mut self, name: &str, value: &[u8]) -> Result<(), ElfError> {
        let not_found = || ElfError {
            section: None,
            offset: None,
            kind: ElfErrorKind::NoSuchVariable(name.to_owned()),
        };
        let var = self
            .variables
            .iter()
            .find(|v| {
                v.name == name
                    && self
                        .maps
                        .get(v.map)
                        .is_some_and(|m| m.origin == MapOrigin::Data(DataKind::Rodata))
            })
            .ok_or_else(not_found)?;
        let (offset, size) = (var.offset, var.size);
        let map = self.maps.get_mut(var.map).ok_or_else(not_found)?;
        if value.len() != size as usize {
            return Err(ElfError::malformed(
                Some(&map.section),
                Some(u64::from(offset)),
                format!("`{name}` is {size} bytes, the value given is {}", value.len()),
            ));
        }
        let start = offset as usize;
        let slot = map
            .initial
            .as_mut()
            .and_then(|v| v.get_mut(start..start.checked_add(value.len())?))
            .ok_or_else(not_found)?;
        slot.copy_from_slice(value);
        Ok(())
    }

    /// The current value of the global `name` in its map's initial contents (`None` for
    /// `.bss` variables and unknown names).
    pub fn variable_value(&self, name: &str) -> Option<&[u8]> {
        let var = self.variables.iter().find(|v| v.name == name)?;
        let start = var.offset as usize;
        self.maps.get(var.map)?.initial.as_ref()?.get(start..start.checked_add(var.size as usize)?)
    }
}
