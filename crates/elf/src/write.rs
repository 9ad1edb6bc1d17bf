//! Writing BPF objects: a self-contained program (no maps, no calls out of itself, what
//! `weir compile --ebpf` emits) as the relocatable ELF object clang would make of it, so
//! that `bpftool prog load`, libbpf and `tc filter add … bpf obj` load it and
//! [`crate::ObjectSpec::parse`] reads it back.
//!
//! The object is what libbpf 1.x needs and nothing more: a 64-bit little-endian `ET_REL`
//! file for `EM_BPF`; the code in an executable section named as libbpf names the program
//! type ([`section_name`]); a global `FUNC` symbol for the program at offset 0 of that
//! section, sized to the code (libbpf finds programs by their symbols); a `license`
//! section. No `.BTF`: libbpf only needs BTF for BTF-defined maps (`.maps`), global data
//! and CO-RE, none of which such a program has (bpftool and tc load it without, tested in
//! the CLI's kernel test).
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
use weir_program::{ProgType, Program};

use crate::ElfError;

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
}

impl ObjectOptions {
    /// The program named `function`, in its type's section, with [`DEFAULT_LICENSE`].
    pub fn new(function: &str) -> Self {
        ObjectOptions {
            function: function.to_owned(),
            section: None,
            license: DEFAULT_LICENSE.to_owned(),
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

/// The object file for `program`, which must have a program type and no maps or
/// relocations (the writer emits no map sections and no relocation records). Errors name
/// what is refused.
pub fn write_program(program: &Program, options: &ObjectOptions) -> Result<Vec<u8>, ElfError> {
    let refuse = |what: String| ElfError::unsupported(None, None, what);
    let prog_type =
        program.prog_type().ok_or_else(|| refuse("writing a program without a type".into()))?;
    if !program.maps().is_empty() || !program.relocations().is_empty() {
        return Err(refuse(format!(
            "writing a program with maps or relocations ({} maps, {} relocations)",
            program.maps().len(),
            program.relocations().len()
        )));
    }
    if program.is_empty() {
        return Err(refuse("writing an empty program".into()));
    }
    let valid_name = |s: &str| {
        !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
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
    let code = program.to_bytes();
    let text = obj.add_section(Vec::new(), section.as_bytes().to_vec(), SectionKind::Text);
    // clang's flags for a program section: allocated and executable (SHF_ALLOC | SHF_EXECINSTR).
    obj.section_mut(text).flags = SectionFlags::Elf {
        sh_flags: u64::from(object::elf::SHF_ALLOC | object::elf::SHF_EXECINSTR),
    };
    let offset = obj.append_section_data(text, &code, 8);
    obj.add_symbol(Symbol {
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

    obj.write().map_err(|e| refuse(format!("the ELF writer: {e}")))
}
