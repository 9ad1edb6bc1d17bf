//! Linking one program: its function, then every function it calls (transitively), each
//! once, with calls re-targeted and `lddw` map references turned into map indices and
//! [`Relocation`]s.

use std::cell::Cell;
use std::collections::HashMap;

use object::elf;
use weir_isa::ebpf::{decode_bytes, Insn, Op};
use weir_program::{MapSpec, ProgType, Program, RelocTarget, Relocation};

use crate::btf::CoreRelo;
use crate::error::ElfError;
use crate::parse::{malformed, RelocRecord, Sec, Symbol};
use crate::{MAX_PROGRAM_SLOTS, MAX_TOTAL_SLOTS};

/// `R_BPF_64_64`: the 64-bit immediate of `lddw`.
const R_BPF_64_64: u32 = 1;
/// `R_BPF_64_32`: the 32-bit immediate of `call`.
const R_BPF_64_32: u32 = 10;

/// A function: a `FUNC` symbol of an executable section.
#[derive(Clone, Debug)]
pub(crate) struct Function<'a> {
    pub name: &'a str,
    pub section: usize,
    /// First slot inside the section.
    pub start: usize,
    /// Number of slots.
    pub len: usize,
    /// Global (or weak) binding: a program when outside `.text`.
    pub global: bool,
}

pub(crate) struct Linker<'s, 'a> {
    secs: &'s [Sec<'a>],
    syms: &'s [Symbol<'a>],
    relocs: &'s HashMap<usize, HashMap<u64, RelocRecord>>,
    map_at: &'s HashMap<(usize, u64), usize>,
    data_map: &'s HashMap<usize, usize>,
    /// CO-RE relocation offsets by section name, sorted.
    core: HashMap<&'s str, Vec<u32>>,
    maps: &'s [MapSpec],
    /// Slots placed so far by every `link` (kept or refused): bounds the work a hostile
    /// object can ask for, not only the output.
    work: Cell<usize>,
    /// Functions of each code section, sorted by start.
    funcs: HashMap<usize, Vec<Function<'a>>>,
    pub kconfig: Vec<&'a str>,
    pub ksyms: Vec<&'a str>,
    /// `.BTF.ext` func_info: per code section, a function's byte offset -> its `FUNC` type.
    pub func_info: HashMap<String, HashMap<u32, u32>>,
}

/// A program linked from an object: the program, the slots of its main function, and its
/// functions' BTF (`func_info`, in slot order) when the object has `.BTF.ext` func_info.
pub(crate) struct Linked {
    pub program: Program,
    pub main_slots: usize,
    pub functions: Vec<crate::FuncInfo>,
}

fn unsupported(section: &str, offset: u64, what: String) -> ElfError {
    ElfError::unsupported(Some(section), Some(offset), what)
}

impl<'s, 'a> Linker<'s, 'a> {
    pub fn new(
        secs: &'s [Sec<'a>],
        syms: &'s [Symbol<'a>],
        relocs: &'s HashMap<usize, HashMap<u64, RelocRecord>>,
        map_at: &'s HashMap<(usize, u64), usize>,
        data_map: &'s HashMap<usize, usize>,
        core: &'s [CoreRelo],
        maps: &'s [MapSpec],
    ) -> Result<Self, ElfError> {
        let mut funcs: HashMap<usize, Vec<Function<'a>>> = HashMap::new();
        for (k, sym) in syms.iter().enumerate() {
            if sym.kind != elf::STT_FUNC {
                continue;
            }
            let index = usize::from(sym.shndx);
            let Some(sec) = secs.get(index).filter(|s| s.is_code()) else { continue };
            let at = (k * 24) as u64;
            let end = sym.value.checked_add(sym.size);
            if sym.value % 8 != 0 || sym.size % 8 != 0 || sym.size == 0 {
                return Err(malformed(
                    ".symtab",
                    at,
                    format!(
                        "function `{}` ({:#x}+{:#x}) is not a whole number of instructions",
                        sym.name, sym.value, sym.size
                    ),
                ));
            }
            if end.is_none_or(|e| e > sec.data.len() as u64) {
                return Err(malformed(
                    ".symtab",
                    at,
                    format!(
                        "function `{}` ({:#x}+{:#x}) runs past the end of `{}`",
                        sym.name, sym.value, sym.size, sec.name
                    ),
                ));
            }
            funcs.entry(index).or_default().push(Function {
                name: sym.name,
                section: index,
                start: (sym.value / 8) as usize,
                len: (sym.size / 8) as usize,
                global: sym.bind == elf::STB_GLOBAL || sym.bind == elf::STB_WEAK,
            });
        }
        for list in funcs.values_mut() {
            list.sort_by_key(|f| f.start);
        }
        let mut by_section: HashMap<&'s str, Vec<u32>> = HashMap::new();
        for relo in core {
            by_section.entry(relo.section.as_str()).or_default().push(relo.insn_off);
        }
        for offsets in by_section.values_mut() {
            offsets.sort_unstable();
        }
        Ok(Linker {
            secs,
            syms,
            relocs,
            map_at,
            data_map,
            core: by_section,
            maps,
            work: Cell::new(0),
            funcs,
            kconfig: Vec::new(),
            ksyms: Vec::new(),
            func_info: HashMap::new(),
        })
    }

    /// The functions of code section `section`, by start.
    pub fn functions(&self, section: usize) -> &[Function<'a>] {
        self.funcs.get(&section).map_or(&[], Vec::as_slice)
    }

    /// The function of `section` that contains `slot` (the last one starting at or before
    /// it: a binary search, so that many calls into many functions stay cheap).
    fn function_at(&self, section: usize, slot: usize) -> Option<&Function<'a>> {
        let funcs = self.functions(section);
        let candidate = funcs.get(funcs.partition_point(|f| f.start <= slot).checked_sub(1)?)?;
        (slot < candidate.start + candidate.len).then_some(candidate)
    }

    fn decode(&self, f: &Function<'a>) -> Result<Vec<Insn>, ElfError> {
        let sec = &self.secs[f.section];
        let bytes = sec.data.get(f.start * 8..(f.start + f.len) * 8).unwrap_or_default();
        decode_bytes(bytes).map_err(|e| {
            malformed(
                sec.name,
                ((f.start + e.index) * 8) as u64,
                format!("function `{}`: {}", f.name, e.kind),
            )
        })
    }

    /// Links the program whose main function is `main`: returns it and the number of slots
    /// of `main` itself.
    pub fn link(
        &self,
        main: &Function<'a>,
        prog_type: Option<ProgType>,
    ) -> Result<Linked, ElfError> {
        let mut out: Vec<Insn> = Vec::new();
        let mut relocations: Vec<Relocation> = Vec::new();
        // (section, start) of each placed function -> where it starts in `out`.
        let mut placed: HashMap<(usize, usize), usize> = HashMap::new();
        let mut queue: Vec<(Function<'a>, usize)> = Vec::new();
        self.place(main, &mut out, &mut placed, &mut queue)?;
        while let Some((f, base)) = queue.pop() {
            let sec = &self.secs[f.section];
            let relocs = self.relocs.get(&f.section);
            for j in 0..f.len {
                let at = base + j;
                let insn = out[at];
                let slot = f.start + j;
                let offset = (slot * 8) as u64;
                let record = relocs.and_then(|r| r.get(&offset)).copied();
                if insn.op == Op::LddwHigh {
                    if record.is_some() {
                        return Err(malformed(
                            sec.name,
                            offset,
                            "relocation on the second slot of lddw",
                        ));
                    }
                    continue;
                }
                let call_target = match record {
                    Some(rec) => match self.relocated(sec, offset, insn, rec)? {
                        Resolved::Call { section, slot } => Some((section, slot, Op::CallLocal)),
                        Resolved::Func { section, slot } => Some((section, slot, Op::LddwFunc)),
                        Resolved::Map(target) => {
                            out[at] = lddw_for(insn.dst, target);
                            relocations.push(Relocation { slot: at, target });
                            None
                        }
                    },
                    None => match insn.op {
                        Op::CallLocal => {
                            let target = (slot as i64)
                                .checked_add(insn.imm)
                                .and_then(|t| t.checked_add(1))
                                .and_then(|t| usize::try_from(t).ok())
                                .ok_or_else(|| {
                                    malformed(sec.name, offset, "call target out of range")
                                })?;
                            Some((f.section, target, Op::CallLocal))
                        }
                        Op::CallKfunc => {
                            return Err(unsupported(sec.name, offset, "kfunc call".into()));
                        }
                        // Without a relocation the address is relative to the instruction:
                        // it stays right when it lands inside the same function, which is
                        // copied whole (hand-made objects such as the conformance runner's).
                        Op::LddwFunc => {
                            let target = (slot as i64)
                                .checked_add(insn.imm)
                                .and_then(|t| t.checked_add(1))
                                .and_then(|t| usize::try_from(t).ok());
                            if !target.is_some_and(|t| t >= f.start && t < f.start + f.len) {
                                return Err(unsupported(
                                    sec.name,
                                    offset,
                                    "lddw of a function (callback)".into(),
                                ));
                            }
                            None
                        }
                        _ => None,
                    },
                };
                if let Some((tsec, tslot, op)) = call_target {
                    let callee = self.function_at(tsec, tslot).cloned().ok_or_else(|| {
                        malformed(
                            sec.name,
                            offset,
                            format!(
                                "call into slot {tslot} of `{}`, which is in no function",
                                self.secs.get(tsec).map_or("?", |s| s.name)
                            ),
                        )
                    })?;
                    let cbase = match placed.get(&(callee.section, callee.start)) {
                        Some(&b) => b,
                        None => self.place(&callee, &mut out, &mut placed, &mut queue)?,
                    };
                    let dest = cbase + (tslot - callee.start);
                    let imm = dest as i64 - at as i64 - 1;
                    if i32::try_from(imm).is_err() {
                        return Err(unsupported(sec.name, offset, "call too far".into()));
                    }
                    out[at] = match op {
                        // `lddw func` (src 4): the callback's slot relative to the next.
                        Op::LddwFunc => Insn::new(Op::LddwFunc, insn.dst, 4, 0, imm),
                        _ => Insn::new(Op::CallLocal, 0, 1, 0, imm),
                    };
                }
            }
        }
        let main_slots = main.len;
        let mut functions: Vec<crate::FuncInfo> = Vec::new();
        for (&(section, start), &base) in &placed {
            let name = self.secs.get(section).map_or("", |s| s.name);
            let type_id = self
                .func_info
                .get(name)
                .and_then(|by_off| by_off.get(&((start as u32).wrapping_mul(8))));
            if let (Some(&type_id), Some(f)) = (type_id, self.function_at(section, start)) {
                functions.push(crate::FuncInfo {
                    slot: base as u32,
                    type_id,
                    name: f.name.to_owned(),
                });
            }
        }
        functions.sort_by_key(|f| f.slot);
        // The kernel wants func_info for every function or none.
        if functions.len() != placed.len() {
            functions.clear();
        }
        let mut program = Program::from_insns(out);
        if let Some(prog_type) = prog_type {
            program = program.with_prog_type(prog_type);
        }
        for spec in self.maps {
            program.add_map(spec.clone());
        }
        relocations.sort_by_key(|r| r.slot);
        for r in relocations {
            program.add_relocation(r);
        }
        Ok(Linked { program, main_slots, functions })
    }

    /// Appends `f` to the program; returns where it starts.
    fn place(
        &self,
        f: &Function<'a>,
        out: &mut Vec<Insn>,
        placed: &mut HashMap<(usize, usize), usize>,
        queue: &mut Vec<(Function<'a>, usize)>,
    ) -> Result<usize, ElfError> {
        let sec = &self.secs[f.section];
        if out.len().saturating_add(f.len) > MAX_PROGRAM_SLOTS {
            return Err(unsupported(
                sec.name,
                (f.start * 8) as u64,
                format!("linked program longer than {MAX_PROGRAM_SLOTS} slots"),
            ));
        }
        let work = self.work.get().saturating_add(f.len);
        if work > MAX_TOTAL_SLOTS {
            return Err(unsupported(
                sec.name,
                (f.start * 8) as u64,
                format!("linking the object's programs takes more than {MAX_TOTAL_SLOTS} slots"),
            ));
        }
        self.work.set(work);
        let (lo, hi) = ((f.start * 8) as u64, ((f.start + f.len) * 8) as u64);
        if let Some(offsets) = self.core.get(sec.name) {
            let first = offsets.partition_point(|&o| u64::from(o) < lo);
            if let Some(&off) = offsets.get(first).filter(|&&o| u64::from(o) < hi) {
                return Err(unsupported(
                    sec.name,
                    u64::from(off),
                    format!("CO-RE relocation (.BTF.ext) in function `{}`", f.name),
                ));
            }
        }
        let base = out.len();
        out.extend(self.decode(f)?);
        placed.insert((f.section, f.start), base);
        queue.push((f.clone(), base));
        Ok(base)
    }

    /// What the relocation `rec` on the instruction at `offset` of `sec` resolves to.
    fn relocated(
        &self,
        sec: &Sec<'a>,
        offset: u64,
        insn: Insn,
        rec: RelocRecord,
    ) -> Result<Resolved, ElfError> {
        let sym = self.syms[rec.sym];
        let is_call = insn.op == Op::CallLocal || insn.op == Op::Call;
        if sym.shndx == elf::SHN_UNDEF {
            let what = if is_call {
                format!("kfunc or extern function call `{}`", sym.name)
            } else if self.kconfig.contains(&sym.name) {
                format!(".kconfig extern `{}`", sym.name)
            } else if self.ksyms.contains(&sym.name) {
                format!(".ksyms extern (ksym) `{}`", sym.name)
            } else {
                format!("extern symbol `{}` (static linking)", sym.name)
            };
            return Err(unsupported(sec.name, offset, what));
        }
        let target = usize::from(sym.shndx);
        let Some(tsec) = self.secs.get(target).filter(|_| sym.shndx < elf::SHN_LORESERVE) else {
            return Err(malformed(
                sec.name,
                offset,
                format!("symbol `{}` in section {:#x}, which does not exist", sym.name, sym.shndx),
            ));
        };
        match rec.r_type {
            R_BPF_64_32 => {
                if insn.op != Op::CallLocal {
                    return Err(malformed(
                        sec.name,
                        offset,
                        "R_BPF_64_32 relocation on an instruction that is not `call` with src=1",
                    ));
                }
                if !tsec.is_code() || !sym.value.is_multiple_of(8) {
                    return Err(malformed(
                        sec.name,
                        offset,
                        format!("call relocation against `{}` in `{}`", sym.name, tsec.name),
                    ));
                }
                let slot = ((sym.value / 8) as i64)
                    .checked_add(insn.imm)
                    .and_then(|t| t.checked_add(1))
                    .and_then(|t| usize::try_from(t).ok())
                    .ok_or_else(|| malformed(sec.name, offset, "call target out of range"))?;
                Ok(Resolved::Call { section: target, slot })
            }
            R_BPF_64_64 => {
                if insn.op != Op::Lddw {
                    return Err(malformed(
                        sec.name,
                        offset,
                        "R_BPF_64_64 relocation on an instruction that is not lddw (src=0)",
                    ));
                }
                if let Some(&map) = self.map_at.get(&(target, sym.value)) {
                    return Ok(Resolved::Map(RelocTarget::Map { map }));
                }
                if let Some(&map) = self.data_map.get(&target) {
                    // The addend is the low immediate (REL records carry none).
                    let addend = i64::from(insn.imm as i32);
                    let off = i64::try_from(sym.value).ok().and_then(|v| v.checked_add(addend));
                    let size = self.maps.get(map).map_or(0, |m| i64::from(m.value_size));
                    return match off.filter(|&o| (0..size).contains(&o)) {
                        Some(o) => {
                            Ok(Resolved::Map(RelocTarget::MapValue { map, offset: o as u32 }))
                        }
                        None => Err(malformed(
                            sec.name,
                            offset,
                            format!(
                                "`{}`{addend:+} is outside `{}` ({size} bytes)",
                                sym.name, tsec.name
                            ),
                        )),
                    };
                }
                if tsec.is_code() {
                    // A callback's address (`bpf_loop`): the symbol (a function, or the
                    // section with the function's byte offset in the immediate, as clang
                    // writes it for a static function) plus the addend, as libbpf reads it.
                    let addend = i64::from(insn.imm as i32);
                    let at = i64::try_from(sym.value).ok().and_then(|v| v.checked_add(addend));
                    let slot = at
                        .filter(|&a| a >= 0 && a % 8 == 0)
                        .and_then(|a| usize::try_from(a / 8).ok())
                        .ok_or_else(|| {
                            malformed(
                                sec.name,
                                offset,
                                format!("lddw of `{}`{addend:+}: no instruction", sym.name),
                            )
                        })?;
                    return Ok(Resolved::Func { section: target, slot });
                }
                if tsec.name == ".maps" || tsec.name == "maps" {
                    return Err(malformed(
                        sec.name,
                        offset,
                        format!("`{}` at {:#x} of `{}` is no map", sym.name, sym.value, tsec.name),
                    ));
                }
                Err(unsupported(
                    sec.name,
                    offset,
                    format!("lddw of `{}` in section `{}`", sym.name, tsec.name),
                ))
            }
            other => Err(unsupported(sec.name, offset, format!("relocation type {other}"))),
        }
    }
}

enum Resolved {
    Call {
        section: usize,
        slot: usize,
    },
    /// A function's address (`lddw` src 4 once linked).
    Func {
        section: usize,
        slot: usize,
    },
    Map(RelocTarget),
}

/// The `lddw` a map relocation becomes: `map_idx` (src 5) or `map_idx_value` (src 6,
/// offset in the high half), the forms the kernel resolves through `fd_array`.
fn lddw_for(dst: u8, target: RelocTarget) -> Insn {
    match target {
        RelocTarget::Map { map } => Insn::new(Op::LddwMapIdx, dst, 5, 0, map as i64),
        RelocTarget::MapValue { map, offset } => Insn::new(
            Op::LddwMapIdxValue,
            dst,
            6,
            0,
            (map as i64 & 0xffff_ffff) | (i64::from(offset) << 32),
        ),
    }
}
