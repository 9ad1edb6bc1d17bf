//! Reading the ELF container: sections, symbols, relocation records, maps, global data;
//! then linking each program ([`crate::link`]).

use std::collections::HashMap;

use object::elf::{self, FileHeader64, SectionHeader64};
use object::read::elf::{FileHeader, Rel as _, SectionHeader as _, Sym as _};
use object::LittleEndian as LE;
use weir_program::{MapSpec, MapType};

use crate::btf::{self, Btf, CoreRelo};
use crate::error::{ElfError, ElfErrorKind};
use crate::link::{Linked, Linker};
use crate::section::{prog_type_of_section, SUPPORTED};
use crate::{
    DataKind, MapOrigin, ObjectMap, ObjectSpec, Pinning, ProgramSpec, RefusedProgram, Variable,
    BPF_F_MMAPABLE, BPF_F_RDONLY_PROG, MAX_TOTAL_SLOTS,
};

/// `EM_BPF`.
const EM_BPF: u16 = 247;
/// Size of `struct bpf_map_def` (type, key_size, value_size, max_entries, map_flags).
const MAP_DEF_SIZE: usize = 20;

/// A section, with what the linker and the map readers need.
#[derive(Debug)]
pub(crate) struct Sec<'a> {
    pub name: &'a str,
    pub sh_type: u32,
    pub flags: u64,
    /// The file bytes (empty for `SHT_NOBITS`).
    pub data: &'a [u8],
    /// `sh_size` (for `.bss`, which has no bytes in the file).
    pub size: u64,
    /// `sh_info` (for relocation sections: the section they apply to).
    pub info: u32,
    /// `sh_link` (for relocation sections: their symbol table).
    pub link: u32,
}

impl Sec<'_> {
    pub fn is_code(&self) -> bool {
        self.sh_type == elf::SHT_PROGBITS && self.flags & u64::from(elf::SHF_EXECINSTR) != 0
    }
}

/// A symbol, decoded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Symbol<'a> {
    pub name: &'a str,
    pub value: u64,
    pub size: u64,
    pub shndx: u16,
    pub kind: u8,
    pub bind: u8,
}

pub(crate) fn malformed(section: &str, offset: u64, what: impl Into<String>) -> ElfError {
    ElfError::malformed(Some(section), Some(offset), what.into())
}

fn file_err(what: impl Into<String>) -> ElfError {
    ElfError::malformed(None, None, what.into())
}

fn obj_err(what: &str, e: object::read::Error) -> ElfError {
    file_err(format!("{what}: {e}"))
}

/// Where a relocation of a code section points: its type and symbol index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RelocRecord {
    pub r_type: u32,
    pub sym: usize,
}

pub(crate) fn parse(bytes: &[u8]) -> Result<ObjectSpec, ElfError> {
    if bytes.get(..4) != Some(&elf::ELFMAG[..]) {
        return Err(file_err("not an ELF file (no \\x7fELF magic)"));
    }
    // e_ident[EI_CLASS] and e_ident[EI_DATA].
    if bytes.get(4) != Some(&elf::ELFCLASS64) {
        return Err(file_err("not a 64-bit ELF file (BPF objects are ELFCLASS64)"));
    }
    if bytes.get(5) == Some(&elf::ELFDATA2MSB) {
        return Err(ElfError::unsupported(
            None,
            None,
            "big-endian BPF objects (-target bpfeb); build with -target bpf on a little-endian host or -target bpfel".into(),
        ));
    }
    let header = FileHeader64::<LE>::parse(bytes).map_err(|e| obj_err("ELF header", e))?;
    let endian = header.endian().map_err(|e| obj_err("ELF header", e))?;
    let machine = header.e_machine(endian);
    if machine != EM_BPF {
        return Err(file_err(format!("e_machine is {machine}, not EM_BPF (247)")));
    }
    let e_type = header.e_type(endian);
    if e_type != elf::ET_REL {
        return Err(file_err(format!("e_type is {e_type}, not ET_REL (a relocatable object)")));
    }
    let table = header.sections(endian, bytes).map_err(|e| obj_err("section table", e))?;

    let mut secs: Vec<Sec<'_>> = Vec::with_capacity(table.len());
    for (index, hdr) in table.enumerate() {
        let hdr: &SectionHeader64<LE> = hdr;
        let name = table
            .section_name(endian, hdr)
            .map_err(|e| file_err(format!("name of section {}: {e}", index.0)))?;
        let name = std::str::from_utf8(name)
            .map_err(|_| file_err(format!("name of section {} is not UTF-8", index.0)))?;
        let sh_type = hdr.sh_type(endian);
        let data = if sh_type == elf::SHT_NOBITS {
            &[][..]
        } else {
            hdr.data(endian, bytes).map_err(|_| {
                malformed(
                    name,
                    0,
                    format!(
                        "section contents ({:#x}+{:#x}) run past the end of the file",
                        hdr.sh_offset(endian),
                        hdr.sh_size(endian)
                    ),
                )
            })?
        };
        secs.push(Sec {
            name,
            sh_type,
            flags: hdr.sh_flags(endian),
            data,
            size: hdr.sh_size(endian),
            info: hdr.sh_info(endian),
            link: hdr.sh_link(endian),
        });
    }

    let symtab = table
        .symbols(endian, bytes, elf::SHT_SYMTAB)
        .map_err(|e| malformed(".symtab", 0, format!("symbol table: {e}")))?;
    let symtab_index = symtab.section().0;
    let mut syms: Vec<Symbol<'_>> = Vec::with_capacity(symtab.len());
    for (i, sym) in symtab.enumerate() {
        let name = symtab
            .symbol_name(endian, sym)
            .map_err(|e| malformed(".symtab", (i.0 * 24) as u64, format!("symbol {}: {e}", i.0)))?;
        let name = std::str::from_utf8(name).map_err(|_| {
            malformed(".symtab", (i.0 * 24) as u64, format!("symbol {} name is not UTF-8", i.0))
        })?;
        syms.push(Symbol {
            name,
            value: sym.st_value(endian),
            size: sym.st_size(endian),
            shndx: sym.st_shndx(endian),
            kind: sym.st_type(),
            bind: sym.st_bind(),
        });
    }

    // Symbol indices by section, so that per-section lookups do not rescan the table.
    let mut by_section: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, sym) in syms.iter().enumerate() {
        by_section.entry(usize::from(sym.shndx)).or_default().push(k);
    }
    let in_section = |i: usize| by_section.get(&i).map_or(&[][..], Vec::as_slice);
    let find = |name: &str| secs.iter().position(|s| s.name == name);
    let license = find("license").map(|i| c_string(secs[i].data));
    let kernel_version = find("version").and_then(|i| btf::u32_at(secs[i].data, 0));
    let btf = find(".BTF").map(|i| Btf::parse(secs[i].data));
    let btf_ref = || -> Result<&Btf<'_>, ElfError> {
        match &btf {
            Some(Ok(b)) => Ok(b),
            Some(Err(e)) => Err(e.clone()),
            None => Err(malformed(".maps", 0, "BTF-defined maps without a .BTF section")),
        }
    };

    // Maps, in libbpf's order.
    let mut maps: Vec<ObjectMap> = Vec::new();
    let mut map_at: HashMap<(usize, u64), usize> = HashMap::new();
    if let Some(i) = find("maps") {
        legacy_maps(i, &secs[i], &syms, in_section(i), &mut maps, &mut map_at)?;
    }
    if let Some(i) = find(".maps") {
        btf_maps(&secs[i], &syms, in_section(i), btf_ref()?, &mut maps, &mut map_at, i)?;
    }
    let mut data_map: HashMap<usize, usize> = HashMap::new();
    let mut variables = Vec::new();
    for (i, sec) in secs.iter().enumerate() {
        let Some(kind) = data_kind(sec) else { continue };
        if sec.size == 0 {
            continue;
        }
        let value_size = u32::try_from(sec.size)
            .map_err(|_| malformed(sec.name, 0, format!("size {:#x} is over 4 GiB", sec.size)))?;
        let flags = match kind {
            DataKind::Rodata => BPF_F_MMAPABLE | BPF_F_RDONLY_PROG,
            DataKind::Data | DataKind::Bss => BPF_F_MMAPABLE,
        };
        let index = maps.len();
        maps.push(ObjectMap {
            spec: MapSpec {
                name: sec.name.to_owned(),
                map_type: MapType::Array,
                key_size: 4,
                value_size,
                max_entries: 1,
                flags,
            },
            origin: MapOrigin::Data(kind),
            section: sec.name.to_owned(),
            pinning: Pinning::None,
            initial: (kind != DataKind::Bss).then(|| sec.data.to_vec()),
            entries: Vec::new(),
        });
        data_map.insert(i, index);
        for &k in in_section(i) {
            let sym = &syms[k];
            if sym.kind != elf::STT_OBJECT || sym.name.is_empty() {
                continue;
            }
            let end = sym.value.checked_add(sym.size);
            if end.is_none_or(|e| e > sec.size) {
                return Err(malformed(
                    ".symtab",
                    (k * 24) as u64,
                    format!(
                        "variable `{}` ({:#x}+{:#x}) runs past the end of `{}`",
                        sym.name, sym.value, sym.size, sec.name
                    ),
                ));
            }
            variables.push(Variable {
                name: sym.name.to_owned(),
                map: index,
                offset: sym.value as u32,
                size: sym.size as u32,
            });
        }
    }

    // Relocations of code sections, by section and byte offset.
    let mut relocs: HashMap<usize, HashMap<u64, RelocRecord>> = HashMap::new();
    for (ri, rsec) in secs.iter().enumerate() {
        if rsec.sh_type != elf::SHT_REL && rsec.sh_type != elf::SHT_RELA {
            continue;
        }
        let target = rsec.info as usize;
        let Some(tsec) = secs.get(target) else {
            return Err(malformed(
                rsec.name,
                0,
                format!("applies to section {target}, which does not exist"),
            ));
        };
        if !tsec.is_code() {
            if tsec.name == ".maps" && !rsec.data.is_empty() {
                return Err(ElfError::unsupported(
                    Some(rsec.name),
                    Some(0),
                    "relocations in .maps (map-in-map initial values)".into(),
                ));
            }
            continue;
        }
        if rsec.sh_type == elf::SHT_RELA {
            return Err(ElfError::unsupported(
                Some(rsec.name),
                Some(0),
                "SHT_RELA relocations of code (clang emits SHT_REL)".into(),
            ));
        }
        if rsec.link as usize != symtab_index {
            return Err(malformed(
                rsec.name,
                0,
                format!("links symbol table {}, not .symtab ({symtab_index})", rsec.link),
            ));
        }
        let hdr = table.section(object::SectionIndex(ri)).map_err(|e| obj_err("section", e))?;
        let records = hdr
            .rel(endian, bytes)
            .map_err(|e| malformed(rsec.name, 0, format!("relocation records: {e}")))?
            .map(|(r, _)| r)
            .unwrap_or_default();
        let entry = relocs.entry(target).or_default();
        for (k, rel) in records.iter().enumerate() {
            let at = (k * 16) as u64;
            let offset = rel.r_offset(endian);
            let sym = rel.r_sym(endian) as usize;
            let r_type = rel.r_type(endian);
            if offset % 8 != 0 || offset >= tsec.size {
                return Err(malformed(
                    rsec.name,
                    at,
                    format!(
                        "relocation offset {offset:#x} is not an instruction of `{}` ({:#x} bytes)",
                        tsec.name, tsec.size
                    ),
                ));
            }
            if sym == 0 || sym >= syms.len() {
                return Err(malformed(
                    rsec.name,
                    at,
                    format!("symbol index {sym} out of range (symbols: {})", syms.len()),
                ));
            }
            if entry.insert(offset, RelocRecord { r_type, sym }).is_some() {
                return Err(malformed(
                    rsec.name,
                    at,
                    format!("second relocation for offset {offset:#x}"),
                ));
            }
        }
    }

    let btf_ok = btf.as_ref().and_then(|b| b.as_ref().ok());
    let (core, func_records): (Vec<CoreRelo>, Vec<btf::FuncRecord>) = match find(".BTF.ext") {
        Some(i) => (btf::core_relos(secs[i].data, btf_ok)?, btf::func_infos(secs[i].data, btf_ok)?),
        None => (Vec::new(), Vec::new()),
    };
    // The BTF a kernel load sends: DATASECs sized from their sections, variables placed at
    // their symbols (libbpf's fixup).
    let kernel_btf = match (find(".BTF"), btf_ok) {
        (Some(i), Some(b)) => {
            let size_of =
                |name: &str| find(name).and_then(|k| u32::try_from(secs.get(k)?.size).ok());
            let offset_of = |section: &str, var: &str| {
                let k = find(section)?;
                in_section(k)
                    .iter()
                    .filter_map(|&s| syms.get(s))
                    .find(|s| s.name == var)
                    .and_then(|s| u32::try_from(s.value).ok())
            };
            b.for_kernel(secs[i].data, size_of, offset_of).ok()
        }
        _ => None,
    };
    let (kconfig, ksyms) = match &btf {
        Some(Ok(b)) => (b.datasec_var_names(".kconfig")?, b.datasec_var_names(".ksyms")?),
        _ => (Vec::new(), Vec::new()),
    };

    let specs: Vec<MapSpec> = maps.iter().map(|m| m.spec.clone()).collect();
    let mut linker = Linker::new(&secs, &syms, &relocs, &map_at, &data_map, &core, &specs)?;
    linker.kconfig = kconfig;
    linker.ksyms = ksyms;
    for record in func_records {
        linker.func_info.entry(record.section).or_default().insert(record.insn_off, record.type_id);
    }

    let mut programs = Vec::new();
    let mut refused = Vec::new();
    let mut total: usize = 0;
    for (i, sec) in secs.iter().enumerate() {
        if !sec.is_code() || sec.name == ".text" {
            continue;
        }
        for func in linker.functions(i).iter().filter(|f| f.global).cloned().collect::<Vec<_>>() {
            let Some(prog_type) = prog_type_of_section(sec.name) else {
                refused.push(RefusedProgram {
                    name: func.name.to_owned(),
                    section: sec.name.to_owned(),
                    error: ElfError::unsupported(
                        Some(sec.name),
                        Some(func.start as u64 * 8),
                        format!(
                            "program `{}`: section kind `{}` (weir takes {SUPPORTED})",
                            func.name, sec.name
                        ),
                    ),
                });
                continue;
            };
            match linker.link(&func, Some(prog_type)) {
                Ok(Linked { program, main_slots, functions }) => {
                    total = total.saturating_add(program.len());
                    if total > MAX_TOTAL_SLOTS {
                        return Err(ElfError::unsupported(
                            Some(sec.name),
                            Some(func.start as u64 * 8),
                            format!(
                                "the object's programs, linked, exceed {MAX_TOTAL_SLOTS} slots"
                            ),
                        ));
                    }
                    programs.push(ProgramSpec {
                        name: func.name.to_owned(),
                        section: sec.name.to_owned(),
                        section_offset: func.start as u64 * 8,
                        program,
                        main_slots,
                        license: license.clone(),
                        functions,
                    });
                }
                Err(e) if matches!(e.kind, ElfErrorKind::Malformed(_)) => return Err(e),
                Err(error) => refused.push(RefusedProgram {
                    name: func.name.to_owned(),
                    section: sec.name.to_owned(),
                    error,
                }),
            }
        }
    }
    // An object whose only code is `.text` (the conformance suite's ELF writer makes one: a
    // global `main` in `.text`, no program section) has its global functions as programs, of
    // no declared type; libbpf would find no program in it.
    if programs.is_empty() && refused.is_empty() {
        if let Some(i) = secs.iter().position(|sec| sec.is_code() && sec.name == ".text") {
            for func in linker.functions(i).iter().filter(|f| f.global).cloned().collect::<Vec<_>>()
            {
                let Linked { program, main_slots, functions } = linker.link(&func, None)?;
                programs.push(ProgramSpec {
                    name: func.name.to_owned(),
                    section: ".text".to_owned(),
                    section_offset: func.start as u64 * 8,
                    program,
                    main_slots,
                    license: license.clone(),
                    functions,
                });
            }
        }
    }
    // weir's own sections: initial entries by map name, notes.
    let mut notes = Vec::new();
    for sec in &secs {
        if sec.name == crate::extra::ENTRIES_SECTION {
            for (name, key, value) in crate::extra::decode_entries(sec.data)? {
                let Some(m) = maps.iter_mut().find(|m| m.spec.name == name) else {
                    return Err(malformed(
                        sec.name,
                        0,
                        format!("entries for map `{name}`, which the object does not have"),
                    ));
                };
                if key.len() != m.spec.key_size as usize
                    || value.len() != m.spec.value_size as usize
                {
                    return Err(malformed(
                        sec.name,
                        0,
                        format!(
                            "an entry of map `{name}` is not {}+{} bytes",
                            m.spec.key_size, m.spec.value_size
                        ),
                    ));
                }
                m.entries.push((key, value));
            }
        } else if let Some(name) = sec.name.strip_prefix(crate::extra::NOTE_PREFIX) {
            notes.push((name.to_owned(), sec.data.to_vec()));
        }
    }
    Ok(ObjectSpec {
        license,
        kernel_version,
        maps,
        programs,
        refused,
        variables,
        notes,
        btf: kernel_btf,
    })
}

/// The string up to the first NUL (all of it when there is none), lossily decoded.
fn c_string(data: &[u8]) -> String {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    String::from_utf8_lossy(&data[..end]).into_owned()
}

fn data_kind(sec: &Sec<'_>) -> Option<DataKind> {
    if sec.flags & u64::from(elf::SHF_ALLOC) == 0 || sec.is_code() {
        return None;
    }
    let is = |base: &str| {
        sec.name == base || sec.name.strip_prefix(base).is_some_and(|r| r.starts_with('.'))
    };
    match sec.sh_type {
        elf::SHT_PROGBITS if is(".data") => Some(DataKind::Data),
        elf::SHT_PROGBITS if is(".rodata") => Some(DataKind::Rodata),
        elf::SHT_NOBITS if is(".bss") => Some(DataKind::Bss),
        _ => None,
    }
}

/// The symbols that declare maps among `members` (a section's symbols): objects, or
/// untyped, in table order.
fn map_symbols<'a>(syms: &[Symbol<'a>], members: &[usize]) -> Vec<Symbol<'a>> {
    members
        .iter()
        .map(|&k| syms[k])
        .filter(|s| (s.kind == elf::STT_OBJECT || s.kind == elf::STT_NOTYPE) && !s.name.is_empty())
        .collect()
}

fn legacy_maps(
    index: usize,
    sec: &Sec<'_>,
    syms: &[Symbol<'_>],
    members: &[usize],
    maps: &mut Vec<ObjectMap>,
    map_at: &mut HashMap<(usize, u64), usize>,
) -> Result<(), ElfError> {
    let decls = map_symbols(syms, members);
    if decls.is_empty() {
        return Ok(());
    }
    let size = sec.data.len();
    if size == 0 || !size.is_multiple_of(decls.len()) {
        return Err(malformed(
            sec.name,
            0,
            format!("{size} bytes do not divide into {} map definitions", decls.len()),
        ));
    }
    let def_size = size / decls.len();
    if def_size < MAP_DEF_SIZE {
        return Err(malformed(
            sec.name,
            0,
            format!("map definitions of {def_size} bytes, shorter than struct bpf_map_def (20)"),
        ));
    }
    for sym in decls {
        let at = sym.value;
        let def = usize::try_from(at)
            .ok()
            .and_then(|a| sec.data.get(a..a.checked_add(def_size)?))
            .ok_or_else(|| {
                malformed(sec.name, at, format!("map `{}` runs past the section end", sym.name))
            })?;
        let word = |k: usize| btf::u32_at(def, k * 4).unwrap_or(0);
        if def[MAP_DEF_SIZE..].iter().any(|&b| b != 0) {
            return Err(ElfError::unsupported(
                Some(sec.name),
                Some(at),
                format!(
                    "map `{}`: fields beyond struct bpf_map_def (iproute2's bpf_elf_map: pinning, inner maps)",
                    sym.name
                ),
            ));
        }
        let map_type = MapType::from_kernel_id(word(0));
        refuse_map_in_map(sec.name, at, sym.name, map_type)?;
        map_at.insert((index, at), maps.len());
        maps.push(ObjectMap {
            spec: MapSpec {
                name: sym.name.to_owned(),
                map_type,
                key_size: word(1),
                value_size: word(2),
                max_entries: word(3),
                flags: word(4),
            },
            origin: MapOrigin::Legacy,
            section: sec.name.to_owned(),
            pinning: Pinning::None,
            initial: None,
            entries: Vec::new(),
        });
    }
    Ok(())
}

/// `BPF_MAP_TYPE_ARRAY_OF_MAPS` and `BPF_MAP_TYPE_HASH_OF_MAPS`.
fn refuse_map_in_map(section: &str, at: u64, name: &str, t: MapType) -> Result<(), ElfError> {
    if matches!(t.kernel_id(), 12 | 13) {
        return Err(ElfError::unsupported(
            Some(section),
            Some(at),
            format!("map `{name}`: map-in-map (type {})", t.kernel_id()),
        ));
    }
    Ok(())
}

fn btf_maps(
    sec: &Sec<'_>,
    syms: &[Symbol<'_>],
    members: &[usize],
    btf: &Btf<'_>,
    maps: &mut Vec<ObjectMap>,
    map_at: &mut HashMap<(usize, u64), usize>,
    index: usize,
) -> Result<(), ElfError> {
    let decls = map_symbols(syms, members);
    let by_name: HashMap<&str, &Symbol<'_>> = decls.iter().map(|s| (s.name, s)).collect();
    let Some(vars) = btf.datasec(".maps")? else {
        if decls.is_empty() {
            return Ok(());
        }
        return Err(malformed(sec.name, 0, "map symbols but no .maps DATASEC in .BTF"));
    };
    for (var_id, _, _) in vars {
        let var = btf.get(var_id)?;
        if var.kind != btf::KIND_VAR {
            return Err(btf_err(var.at, format!("DATASEC .maps entry {var_id} is not a VAR")));
        }
        let name = btf.name(var)?;
        let sym = by_name
            .get(name)
            .ok_or_else(|| malformed(sec.name, 0, format!("map `{name}` has no ELF symbol")))?;
        let at = sym.value;
        if at >= sec.size {
            return Err(malformed(sec.name, at, format!("map `{name}` is past the section end")));
        }
        let (_, def) = btf.skip_modifiers(var.size_or_type)?;
        if def.kind != btf::KIND_STRUCT {
            return Err(malformed(sec.name, at, format!("map `{name}` is not a struct")));
        }
        let mut spec = MapSpec {
            name: name.to_owned(),
            map_type: MapType::Other(0),
            key_size: 0,
            value_size: 0,
            max_entries: 0,
            flags: 0,
        };
        let mut pinning = Pinning::None;
        let mut has_type = false;
        let (mut key_size, mut key_type, mut value_size, mut value_type) = (None, None, None, None);
        for (field, ty) in btf.members(def)? {
            // __uint(name, val): a pointer to an array of `val` elements.
            let int = || -> Result<u32, ElfError> {
                let (_, ptr) = btf.skip_modifiers(ty)?;
                let (_, arr) = if ptr.kind == btf::KIND_PTR {
                    btf.skip_modifiers(ptr.size_or_type)?
                } else {
                    (0, ptr)
                };
                if ptr.kind != btf::KIND_PTR || arr.kind != btf::KIND_ARRAY {
                    return Err(malformed(
                        sec.name,
                        at,
                        format!("map `{name}`: field `{field}` is not __uint(...)"),
                    ));
                }
                btf.array_len(arr)
            };
            // __type(name, T): a pointer to T.
            let pointee = || -> Result<u32, ElfError> {
                let (_, ptr) = btf.skip_modifiers(ty)?;
                if ptr.kind != btf::KIND_PTR {
                    return Err(malformed(
                        sec.name,
                        at,
                        format!("map `{name}`: field `{field}` is not __type(...)"),
                    ));
                }
                btf.size_of(ptr.size_or_type)
            };
            match field {
                "type" => {
                    spec.map_type = MapType::from_kernel_id(int()?);
                    has_type = true;
                }
                "max_entries" => spec.max_entries = int()?,
                "map_flags" => spec.flags = int()?,
                "key_size" => key_size = Some(int()?),
                "value_size" => value_size = Some(int()?),
                "key" => key_type = Some(pointee()?),
                "value" => value_type = Some(pointee()?),
                "pinning" => {
                    pinning = match int()? {
                        0 => Pinning::None,
                        1 => Pinning::ByName,
                        other => {
                            return Err(ElfError::unsupported(
                                Some(sec.name),
                                Some(at),
                                format!("map `{name}`: pinning {other}"),
                            ))
                        }
                    }
                }
                "values" => {
                    return Err(ElfError::unsupported(
                        Some(sec.name),
                        Some(at),
                        format!("map `{name}`: map-in-map (`values`)"),
                    ))
                }
                "numa_node" | "map_extra" => {
                    if int()? != 0 {
                        return Err(ElfError::unsupported(
                            Some(sec.name),
                            Some(at),
                            format!("map `{name}`: `{field}`"),
                        ));
                    }
                }
                other => {
                    return Err(ElfError::unsupported(
                        Some(sec.name),
                        Some(at),
                        format!("map `{name}`: unknown map field `{other}`"),
                    ))
                }
            }
        }
        if !has_type {
            return Err(malformed(sec.name, at, format!("map `{name}` has no `type`")));
        }
        refuse_map_in_map(sec.name, at, name, spec.map_type)?;
        spec.key_size = both(sec.name, at, name, "key", key_size, key_type)?;
        spec.value_size = both(sec.name, at, name, "value", value_size, value_type)?;
        map_at.insert((index, at), maps.len());
        maps.push(ObjectMap {
            spec,
            origin: MapOrigin::Btf,
            section: sec.name.to_owned(),
            pinning,
            initial: None,
            entries: Vec::new(),
        });
    }
    Ok(())
}

fn btf_err(at: usize, what: String) -> ElfError {
    ElfError::malformed(Some(".BTF"), Some(at as u64), what)
}

/// A size given both as `X_size` and as `X`'s type must agree; either alone is the size,
/// neither is 0 (ring buffers, for example, have no key or value).
fn both(
    section: &str,
    at: u64,
    name: &str,
    what: &str,
    size: Option<u32>,
    of_type: Option<u32>,
) -> Result<u32, ElfError> {
    match (size, of_type) {
        (Some(a), Some(b)) if a != b => Err(malformed(
            section,
            at,
            format!("map `{name}`: {what}_size {a} but {what} type of {b} bytes"),
        )),
        (Some(a), _) | (None, Some(a)) => Ok(a),
        (None, None) => Ok(0),
    }
}
