//! Writing BPF objects: a program with no calls out of itself (what `weir compile
//! --ebpf` and `weir flow compile` emit) as the relocatable ELF object clang would make of
//! it, so that `bpftool prog load`, libbpf, `ip link set … xdp obj` and `tc filter add …
//! bpf obj` load it and [`crate::ObjectSpec::parse`] reads it back.
//!
//! The object is what libbpf 1.x needs and nothing more: a 64-bit little-endian `ET_REL`
//! file for `EM_BPF`; the code in an executable section named as libbpf names the program
//! type ([`section_name`]); a global `FUNC` symbol for the program at offset 0 of that
//! section, sized to the code (libbpf finds programs by their symbols); a `license`
//! section. A program with maps gets them as BTF-defined maps: a `.maps` section with a
//! global object symbol per map, the `.BTF` that describes them ([`crate::btf_encode`]),
//! and an `R_BPF_64_64` relocation against the map's symbol for each `lddw` that names
//! it. Without maps there is no `.BTF` (libbpf needs none). Initial map entries and
//! notes go in weir's own sections ([`crate::extra`]), which libbpf skips.
//!
//! ```
//! use weir_elf::{write, ObjectSpec};
//! use weir_program::{Program, ProgType};
//! let program = Program::from_bytes(&[0xb7, 0, 0, 0, 2, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0])
//!     .unwrap()
//!     .with_prog_type(ProgType::Xdp);
//! let bytes = write::write_program(&program, &write::ObjectOptions::new("weir_filter")).unwrap();
//! let object = ObjectSpec::parse(&bytes).unwrap();
//! assert_eq!(object.program("weir_filter").unwrap().section, "xdp");
//! ```

use object::write::{Object, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, SectionFlags, SectionKind, SymbolFlags, SymbolKind,
    SymbolScope,
};
use weir_program::{ProgType, Program, RelocTarget};

use crate::btf_encode::MapDecl;
use crate::ElfError;

/// `R_BPF_64_64`: the 64-bit immediate of `lddw`.
const R_BPF_64_64: u32 = 1;

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The license written by default. The kernel only asks a program for a GPL-compatible
/// license when it calls a GPL-only helper; a filter program calls none, so any string
/// would load. weir itself is MIT OR Apache-2.0, and a program weir generates is weir's
/// output; "Dual MIT/GPL" is the kernel's own spelling (`license_is_gpl_compatible`) of a
/// permissive license that stays GPL-compatible, so the object also loads should a later
/// emitter call a GPL-only helper.
pub const DEFAULT_LICENSE: &str = "Dual MIT/GPL";

/// What the object is called inside, beyond the program itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectOptions {
    /// The program's function symbol (what `bpftool prog show` lists as its name; the
    /// kernel keeps the first 15 bytes).
    pub function: String,
    /// The section; `None`: [`section_name`] of the program's type.
    pub section: Option<String>,
    /// The `license` section's string (written with its terminating NUL).
    pub license: String,
    /// Pin every map by name (libbpf's `LIBBPF_PIN_BY_NAME`: under `/sys/fs/bpf` for
    /// bpftool, reused when already pinned).
    pub pin_maps: bool,
    /// Initial map entries (`.weir.entries`; weir's runtime fills them, the kernel's
    /// loaders do not).
    pub entries: Vec<crate::extra::MapEntry>,
    /// Notes (`.weir.note.NAME`), given back by the reader as [`crate::ObjectSpec::notes`].
    pub notes: Vec<(String, Vec<u8>)>,
}

impl ObjectOptions {
    /// The program named `function`, in its type's section, with [`DEFAULT_LICENSE`].
    pub fn new(function: &str) -> Self {
        ObjectOptions {
            function: function.to_owned(),
            section: None,
            license: DEFAULT_LICENSE.to_owned(),
            pin_maps: false,
            entries: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// The section name libbpf 1.x gives a program type (its `SEC()` table: `socket`, `xdp`,
/// `tc`, `action`); the reader's [`crate::prog_type_of_section`] maps each back.
pub fn section_name(prog_type: ProgType) -> &'static str {
    match prog_type {
        ProgType::SocketFilter => "socket",
        ProgType::SchedCls => "tc",
        ProgType::SchedAct => "action",
        ProgType::Xdp => "xdp",
    }
}

/// The object file for `program`, which must have a program type; its relocations may
/// name maps (`lddw map_idx`), not addresses inside them (global data is not written).
/// Errors name what is refused.
pub fn write_program(program: &Program, options: &ObjectOptions) -> Result<Vec<u8>, ElfError> {
    let refuse = |what: String| ElfError::unsupported(None, None, what);
    let prog_type =
        program.prog_type().ok_or_else(|| refuse("writing a program without a type".into()))?;
    for r in program.relocations() {
        match r.target {
            RelocTarget::Map { map } if map < program.maps().len() => {}
            RelocTarget::Map { map } => {
                return Err(refuse(format!(
                    "slot {}: a relocation to map {map}, which the program does not have",
                    r.slot
                )))
            }
            RelocTarget::MapValue { .. } => {
                return Err(refuse(format!(
                    "slot {}: a relocation into a map's value (global data)",
                    r.slot
                )))
            }
        }
        if !program.insns().get(r.slot).is_some_and(|i| i.op.is_lddw()) {
            return Err(refuse(format!(
                "slot {}: a relocation on an instruction that is not lddw",
                r.slot
            )));
        }
    }
    for m in program.maps() {
        if !valid_name(&m.name) {
            return Err(refuse(format!(
                "map name `{}` (letters, digits and `_`, not starting with a digit)",
                m.name
            )));
        }
    }
    for (name, _, _) in &options.entries {
        if !program.maps().iter().any(|m| &m.name == name) {
            return Err(refuse(format!(
                "initial entries for map `{name}`, which the program does not have"
            )));
        }
    }
    if program.is_empty() {
        return Err(refuse("writing an empty program".into()));
    }
    if !valid_name(&options.function) {
        return Err(refuse(format!(
            "function name `{}` (letters, digits and `_`, not starting with a digit)",
            options.function
        )));
    }
    let section = options.section.as_deref().unwrap_or(section_name(prog_type));
    if crate::prog_type_of_section(section) != Some(prog_type) {
        return Err(refuse(format!(
            "section `{section}` for a {} program (the reader would not give it that type)",
            prog_type.name()
        )));
    }
    if options.license.contains('\0') {
        return Err(refuse("a license string with a NUL byte".into()));
    }

    let mut obj = Object::new(BinaryFormat::Elf, Architecture::Bpf, Endianness::Little);
    // Map references are written as clang writes them: a plain `lddw` (imm 0) with a
    // relocation against the map's symbol.
    let mut insns = program.insns().to_vec();
    for r in program.relocations() {
        if let Some(insn) = insns.get_mut(r.slot) {
            *insn = weir_isa::ebpf::Insn::new(weir_isa::ebpf::Op::Lddw, insn.dst, 0, 0, 0);
        }
    }
    let code = weir_isa::ebpf::encode_bytes(&insns);
    let text = obj.add_section(Vec::new(), section.as_bytes().to_vec(), SectionKind::Text);
    // clang's flags for a program section: allocated and executable (SHF_ALLOC | SHF_EXECINSTR).
    obj.section_mut(text).flags = SectionFlags::Elf {
        sh_flags: u64::from(object::elf::SHF_ALLOC | object::elf::SHF_EXECINSTR),
    };
    let offset = obj.append_section_data(text, &code, 8);
    let function = obj.add_symbol(Symbol {
        name: options.function.as_bytes().to_vec(),
        value: offset,
        size: code.len() as u64,
        kind: SymbolKind::Text,
        // Dynamic: STB_GLOBAL with default visibility, as clang writes a non-static function
        // (Linkage would make it hidden, which libbpf takes for a static program).
        scope: SymbolScope::Dynamic,
        weak: false,
        section: SymbolSection::Section(text),
        flags: SymbolFlags::None,
    });

    let license = obj.add_section(Vec::new(), b"license".to_vec(), SectionKind::Data);
    let mut license_bytes = options.license.as_bytes().to_vec();
    license_bytes.push(0);
    obj.append_section_data(license, &license_bytes, 1);
    // clang also gives `license` a data symbol (`_license`); neither libbpf nor the reader
    // needs one, so the object has none.
    let _ = function;

    if !program.maps().is_empty() {
        let decls: Vec<MapDecl<'_>> = program
            .maps()
            .iter()
            .map(|m| {
                let mut fields = vec![
                    ("type", m.map_type.kernel_id()),
                    ("key_size", m.key_size),
                    ("value_size", m.value_size),
                    ("max_entries", m.max_entries),
                ];
                if m.flags != 0 {
                    fields.push(("map_flags", m.flags));
                }
                if options.pin_maps {
                    fields.push(("pinning", 1));
                }
                MapDecl { name: &m.name, fields }
            })
            .collect();
        let encoded = crate::btf_encode::encode(&decls);
        let maps = obj.add_section(Vec::new(), b".maps".to_vec(), SectionKind::Data);
        obj.append_section_data(maps, &vec![0u8; encoded.maps_size as usize], 8);
        let mut symbols = Vec::new();
        for (m, (off, size)) in program.maps().iter().zip(&encoded.layout) {
            symbols.push(obj.add_symbol(Symbol {
                name: m.name.as_bytes().to_vec(),
                value: *off,
                size: *size,
                kind: SymbolKind::Data,
                scope: SymbolScope::Dynamic,
                weak: false,
                section: SymbolSection::Section(maps),
                flags: SymbolFlags::None,
            }));
        }
        let btf = obj.add_section(Vec::new(), b".BTF".to_vec(), SectionKind::Metadata);
        obj.append_section_data(btf, &encoded.btf, 4);
        for r in program.relocations() {
            let RelocTarget::Map { map } = r.target else { continue };
            obj.add_relocation(
                text,
                object::write::Relocation {
                    offset: offset + r.slot as u64 * 8,
                    symbol: symbols[map],
                    addend: 0,
                    flags: object::RelocationFlags::Elf { r_type: R_BPF_64_64 },
                },
            )
            .map_err(|e| refuse(format!("the ELF writer: {e}")))?;
        }
    }
    if !options.entries.is_empty() {
        let sec = obj.add_section(
            Vec::new(),
            crate::extra::ENTRIES_SECTION.as_bytes().to_vec(),
            SectionKind::Metadata,
        );
        obj.append_section_data(sec, &crate::extra::encode_entries(&options.entries), 8);
    }
    for (name, bytes) in &options.notes {
        let full = format!("{}{name}", crate::extra::NOTE_PREFIX);
        let sec = obj.add_section(Vec::new(), full.into_bytes(), SectionKind::Metadata);
        obj.append_section_data(sec, bytes, 1);
    }

    obj.write().map_err(|e| refuse(format!("the ELF writer: {e}")))
}
