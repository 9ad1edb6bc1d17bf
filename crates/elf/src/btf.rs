//! Just enough BTF (the kernel's `Documentation/bpf/btf.rst` encoding) to read map
//! definitions: the type records of `.BTF`, the sizes they resolve to, `DATASEC`s and their
//! variables, struct members; and the CO-RE relocation records of `.BTF.ext`, to refuse the
//! programs that have them.
//!
//! Every read is bounds-checked; a record that does not fit, a type id out of range or a
//! type chain longer than [`MAX_CHAIN`] is an error naming the section and offset.

use crate::error::ElfError;

/// Longest chain of modifiers, typedefs and array element types followed when resolving a
/// type (the kernel's own limit on modifier chains is 32).
pub(crate) const MAX_CHAIN: usize = 32;

const MAGIC: u16 = 0xeb9f;

pub(crate) const KIND_INT: u8 = 1;
pub(crate) const KIND_PTR: u8 = 2;
pub(crate) const KIND_ARRAY: u8 = 3;
pub(crate) const KIND_STRUCT: u8 = 4;
pub(crate) const KIND_UNION: u8 = 5;
pub(crate) const KIND_ENUM: u8 = 6;
pub(crate) const KIND_FWD: u8 = 7;
pub(crate) const KIND_TYPEDEF: u8 = 8;
pub(crate) const KIND_VOLATILE: u8 = 9;
pub(crate) const KIND_CONST: u8 = 10;
pub(crate) const KIND_RESTRICT: u8 = 11;
pub(crate) const KIND_FUNC: u8 = 12;
pub(crate) const KIND_FUNC_PROTO: u8 = 13;
pub(crate) const KIND_VAR: u8 = 14;
pub(crate) const KIND_DATASEC: u8 = 15;
pub(crate) const KIND_FLOAT: u8 = 16;
pub(crate) const KIND_DECL_TAG: u8 = 17;
pub(crate) const KIND_TYPE_TAG: u8 = 18;
pub(crate) const KIND_ENUM64: u8 = 19;

/// One type record: its common header and where its trailing records start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BtfType {
    pub kind: u8,
    pub name_off: u32,
    pub vlen: u16,
    /// `size` or `type`, depending on the kind.
    pub size_or_type: u32,
    /// Offset of the trailing records inside the type area.
    extra: usize,
    /// Offset of the record itself inside the `.BTF` section (for errors).
    pub at: usize,
}

/// A variable of a `DATASEC`: (variable type id, offset, size).
pub(crate) type SecVar = (u32, u32, u32);

/// The parsed `.BTF` section.
#[derive(Debug)]
pub(crate) struct Btf<'a> {
    /// Index 0 is `void`.
    types: Vec<BtfType>,
    type_area: &'a [u8],
    strings: &'a [u8],
    /// Where the type area starts inside the section (to turn offsets into section offsets).
    type_base: usize,
}

pub(crate) fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    let bytes = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([bytes[0], bytes[1]]))
}

pub(crate) fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at.checked_add(4)?)?;
    let mut b = [0u8; 4];
    b.copy_from_slice(bytes);
    Some(u32::from_le_bytes(b))
}

fn err(at: usize, what: impl Into<String>) -> ElfError {
    ElfError::malformed(Some(".BTF"), Some(at as u64), what.into())
}

/// Size of the trailing records of a type of `kind` with `vlen` entries.
fn extra_len(kind: u8, vlen: u16) -> Option<usize> {
    let n = usize::from(vlen);
    Some(match kind {
        KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
        KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
        | KIND_FUNC | KIND_FLOAT | KIND_TYPE_TAG => 0,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => n * 12,
        KIND_ENUM | KIND_FUNC_PROTO => n * 8,
        _ => return None,
    })
}

impl<'a> Btf<'a> {
    /// Parses the header, the string area and every type record of a `.BTF` section.
    pub fn parse(data: &'a [u8]) -> Result<Btf<'a>, ElfError> {
        let magic = u16_at(data, 0).ok_or_else(|| err(0, "truncated BTF header"))?;
        if magic != MAGIC {
            return Err(err(0, format!("bad BTF magic {magic:#06x} (want 0xeb9f, little-endian)")));
        }
        let version = data.get(2).copied().unwrap_or(0);
        if version != 1 {
            return Err(err(2, format!("BTF version {version} (want 1)")));
        }
        let field = |at: usize| u32_at(data, at).ok_or_else(|| err(at, "truncated BTF header"));
        let hdr_len = field(4)? as usize;
        if hdr_len < 24 {
            return Err(err(4, format!("BTF header length {hdr_len} is shorter than 24")));
        }
        let (type_off, type_len) = (field(8)? as usize, field(12)? as usize);
        let (str_off, str_len) = (field(16)? as usize, field(20)? as usize);
        let area = |off: usize, len: usize, what: &str| {
            let start = hdr_len.checked_add(off);
            let end = start.and_then(|s| s.checked_add(len));
            match (start, end) {
                (Some(s), Some(e)) if e <= data.len() => Ok((s, &data[s..e])),
                _ => Err(err(
                    8,
                    format!("{what} area ({off:#x}+{len:#x}) runs past the section end"),
                )),
            }
        };
        let (type_base, type_area) = area(type_off, type_len, "type")?;
        let (_, strings) = area(str_off, str_len, "string")?;

        let mut types = vec![BtfType {
            kind: 0,
            name_off: 0,
            vlen: 0,
            size_or_type: 0,
            extra: 0,
            at: type_base,
        }];
        let mut at = 0usize;
        while at < type_area.len() {
            let abs = type_base.saturating_add(at);
            let word = |k: usize| {
                u32_at(type_area, at.saturating_add(k))
                    .ok_or_else(|| err(abs, "truncated type record"))
            };
            let (name_off, info, size_or_type) = (word(0)?, word(4)?, word(8)?);
            let kind = ((info >> 24) & 0x1f) as u8;
            let vlen = (info & 0xffff) as u16;
            let extra_len = extra_len(kind, vlen)
                .ok_or_else(|| err(abs, format!("unknown BTF kind {kind}")))?;
            let extra = at.saturating_add(12);
            let next = extra.saturating_add(extra_len);
            if next > type_area.len() {
                return Err(err(
                    abs,
                    format!("type record of kind {kind} runs past the type area"),
                ));
            }
            types.push(BtfType { kind, name_off, vlen, size_or_type, extra, at: abs });
            at = next;
        }
        Ok(Btf { types, type_area, strings, type_base })
    }

    pub fn get(&self, id: u32) -> Result<&BtfType, ElfError> {
        self.types
            .get(id as usize)
            .ok_or_else(|| err(self.type_base, format!("type id {id} out of range")))
    }

    /// The NUL-terminated string at `off` in the string area.
    pub fn string(&self, off: u32) -> Result<&'a str, ElfError> {
        let start = off as usize;
        let rest = self
            .strings
            .get(start..)
            .ok_or_else(|| err(self.type_base, format!("string offset {off:#x} out of range")))?;
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| err(self.type_base, format!("string at {off:#x} is not terminated")))?;
        std::str::from_utf8(&rest[..end])
            .map_err(|_| err(self.type_base, format!("string at {off:#x} is not UTF-8")))
    }

    pub fn name(&self, ty: &BtfType) -> Result<&'a str, ElfError> {
        self.string(ty.name_off)
    }

    /// Word `k` (0-based, 4 bytes each) of the trailing records of `ty`.
    fn extra_word(&self, ty: &BtfType, k: usize) -> Result<u32, ElfError> {
        let at = k.checked_mul(4).and_then(|o| ty.extra.checked_add(o));
        at.and_then(|at| u32_at(self.type_area, at))
            .ok_or_else(|| err(ty.at, "trailing record out of range"))
    }

    /// Follows typedefs and modifiers (`const`, `volatile`, `restrict`, type tags).
    pub fn skip_modifiers(&self, mut id: u32) -> Result<(u32, &BtfType), ElfError> {
        for _ in 0..MAX_CHAIN {
            let ty = self.get(id)?;
            match ty.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = ty.size_or_type;
                }
                _ => return Ok((id, ty)),
            }
        }
        Err(err(self.get(id)?.at, format!("type chain longer than {MAX_CHAIN}")))
    }

    /// The size in bytes of type `id`.
    pub fn size_of(&self, id: u32) -> Result<u32, ElfError> {
        let mut id = id;
        let mut count: u32 = 1;
        for _ in 0..MAX_CHAIN {
            let (_, ty) = self.skip_modifiers(id)?;
            let size = match ty.kind {
                KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 | KIND_FLOAT
                | KIND_DATASEC => ty.size_or_type,
                KIND_PTR => 8,
                KIND_ARRAY => {
                    let nelems = self.extra_word(ty, 2)?;
                    count = count
                        .checked_mul(nelems)
                        .ok_or_else(|| err(ty.at, "array size overflows"))?;
                    id = self.extra_word(ty, 0)?;
                    continue;
                }
                KIND_VAR => {
                    id = ty.size_or_type;
                    continue;
                }
                other => {
                    return Err(err(ty.at, format!("type of kind {other} has no size")));
                }
            };
            return count.checked_mul(size).ok_or_else(|| err(ty.at, "type size overflows"));
        }
        Err(err(self.type_base, format!("type chain longer than {MAX_CHAIN}")))
    }

    /// The members of struct `ty`: (name, type id).
    pub fn members(&self, ty: &BtfType) -> Result<Vec<(&'a str, u32)>, ElfError> {
        (0..usize::from(ty.vlen))
            .map(|i| {
                let name = self.string(self.extra_word(ty, i * 3)?)?;
                Ok((name, self.extra_word(ty, i * 3 + 1)?))
            })
            .collect()
    }

    /// The number of elements of the array type `ty`.
    pub fn array_len(&self, ty: &BtfType) -> Result<u32, ElfError> {
        self.extra_word(ty, 2)
    }

    /// The `DATASEC` named `name`: its variables as (variable type id, offset, size).
    pub fn datasec(&self, name: &str) -> Result<Option<Vec<SecVar>>, ElfError> {
        for ty in &self.types {
            if ty.kind == KIND_DATASEC && self.name(ty)? == name {
                let vars = (0..usize::from(ty.vlen))
                    .map(|i| {
                        Ok((
                            self.extra_word(ty, i * 3)?,
                            self.extra_word(ty, i * 3 + 1)?,
                            self.extra_word(ty, i * 3 + 2)?,
                        ))
                    })
                    .collect::<Result<Vec<_>, ElfError>>()?;
                return Ok(Some(vars));
            }
        }
        Ok(None)
    }

    /// The names of the variables of the `DATASEC` named `name` (empty when there is none).
    pub fn datasec_var_names(&self, name: &str) -> Result<Vec<&'a str>, ElfError> {
        let Some(vars) = self.datasec(name)? else { return Ok(Vec::new()) };
        vars.iter().map(|&(id, _, _)| self.name(self.get(id)?)).collect()
    }
}

/// A CO-RE relocation record of `.BTF.ext`: the section it applies to and the byte offset
/// of the instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CoreRelo {
    pub section: String,
    pub insn_off: u32,
}

fn ext_err(at: usize, what: impl Into<String>) -> ElfError {
    ElfError::malformed(Some(".BTF.ext"), Some(at as u64), what.into())
}

/// A `func_info` record of `.BTF.ext`: the code section, the byte offset of a function's
/// first instruction in it, and the function's `FUNC` type id in `.BTF`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FuncRecord {
    pub section: String,
    pub insn_off: u32,
    pub type_id: u32,
}

/// The header fields `(off, len)` at `at` of a `.BTF.ext` area, when the header has them.
const FUNC_INFO_AT: usize = 8;
const CORE_RELO_AT: usize = 24;

/// The records of one `.BTF.ext` area (`func_info`, `line_info` or CO-RE relocations, whose
/// `(off, len)` header fields are at `field_at`), each as its section's name and its bytes
/// (at least `min_size` of them): the layout the three areas share, a record size, then
/// per section its name's offset in `btf`'s strings, a count and the records.
fn ext_records<'e>(
    ext: &'e [u8],
    btf: Option<&Btf<'_>>,
    field_at: usize,
    min_size: usize,
    what: &str,
) -> Result<Vec<(String, &'e [u8])>, ElfError> {
    let magic = u16_at(ext, 0).ok_or_else(|| ext_err(0, "truncated .BTF.ext header"))?;
    if magic != MAGIC {
        return Err(ext_err(0, format!("bad .BTF.ext magic {magic:#06x}")));
    }
    let hdr_len = u32_at(ext, 4).ok_or_else(|| ext_err(4, "truncated .BTF.ext header"))? as usize;
    // An older header may end before this area's fields: then the object has none.
    if hdr_len < field_at.saturating_add(8) {
        return Ok(Vec::new());
    }
    let field = |at: usize| u32_at(ext, at).ok_or_else(|| ext_err(at, "truncated header"));
    let (off, len) = (field(field_at)? as usize, field(field_at + 4)? as usize);
    if len == 0 {
        return Ok(Vec::new());
    }
    let start = hdr_len.checked_add(off).ok_or_else(|| ext_err(field_at, "offset overflows"))?;
    let end = start.checked_add(len).ok_or_else(|| ext_err(field_at, "length overflows"))?;
    let area = ext
        .get(start..end)
        .ok_or_else(|| ext_err(field_at, format!("{what} area runs past the section end")))?;
    let Some(btf) = btf else {
        return Err(ext_err(start, format!("{what} without a .BTF section")));
    };
    let rec_size = u32_at(area, 0).ok_or_else(|| ext_err(start, "truncated area"))? as usize;
    if rec_size < min_size {
        return Err(ext_err(start, format!("{what} record size {rec_size} is below {min_size}")));
    }
    let mut out = Vec::new();
    let mut at = 4usize;
    while at < area.len() {
        let abs = start.saturating_add(at);
        let sec_name_off = u32_at(area, at).ok_or_else(|| ext_err(abs, "truncated record"))?;
        let num = u32_at(area, at.saturating_add(4))
            .ok_or_else(|| ext_err(abs, "truncated record"))? as usize;
        let section = btf.string(sec_name_off)?.to_owned();
        let records = num
            .checked_mul(rec_size)
            .and_then(|n| n.checked_add(at.saturating_add(8)))
            .filter(|&e| e <= area.len())
            .ok_or_else(|| ext_err(abs, format!("{num} {what} records run past the area end")))?;
        let mut rec = at.saturating_add(8);
        while rec < records {
            let bytes = area.get(rec..rec.saturating_add(rec_size)).unwrap_or_default();
            out.push((section.clone(), bytes));
            rec = rec.saturating_add(rec_size);
        }
        at = records;
    }
    Ok(out)
}

/// The CO-RE relocation records of a `.BTF.ext` section (section names come from `btf`'s
/// string area).
pub(crate) fn core_relos(ext: &[u8], btf: Option<&Btf<'_>>) -> Result<Vec<CoreRelo>, ElfError> {
    let records = ext_records(ext, btf, CORE_RELO_AT, 16, "CO-RE relocation")?;
    Ok(records
        .into_iter()
        .map(|(section, rec)| CoreRelo { section, insn_off: u32_at(rec, 0).unwrap_or(0) })
        .collect())
}

/// The `func_info` records of a `.BTF.ext` section: where each function starts and its
/// `FUNC` type, which must be a `FUNC` of `btf`. What libbpf hands the kernel with a
/// program that has subprograms, and what the kernel's verifier wants before a program may
/// take a function's address (`bpf_loop`'s callback).
pub(crate) fn func_infos(ext: &[u8], btf: Option<&Btf<'_>>) -> Result<Vec<FuncRecord>, ElfError> {
    // Without BTF the records name nothing: the programs load as bare code.
    if btf.is_none() {
        return Ok(Vec::new());
    }
    let records = ext_records(ext, btf, FUNC_INFO_AT, 8, "func_info")?;
    let mut out = Vec::with_capacity(records.len());
    for (section, rec) in records {
        let (insn_off, type_id) = (u32_at(rec, 0).unwrap_or(0), u32_at(rec, 4).unwrap_or(0));
        let is_func = btf.map(|b| b.get(type_id).map(|t| t.kind == KIND_FUNC));
        if !matches!(is_func, Some(Ok(true))) {
            return Err(ext_err(
                0,
                format!("func_info of `{section}`+{insn_off:#x}: type {type_id} is no FUNC"),
            ));
        }
        if insn_off % 8 != 0 {
            return Err(ext_err(
                0,
                format!("func_info of `{section}`: offset {insn_off:#x} is not an instruction's"),
            ));
        }
        out.push(FuncRecord { section, insn_off, type_id });
    }
    Ok(out)
}

impl Btf<'_> {
    /// `.BTF` as the kernel takes it (`BPF_BTF_LOAD`): `data` with each `DATASEC` of size 0
    /// given its section's size and its variables their symbols' offsets, as libbpf's
    /// `btf_fixup_datasec` does (clang leaves them to the loader: it does not know the
    /// final layout, and the kernel refuses a `DATASEC` of size 0).
    pub fn for_kernel(
        &self,
        data: &[u8],
        section_size: impl Fn(&str) -> Option<u32>,
        symbol_offset: impl Fn(&str, &str) -> Option<u32>,
    ) -> Result<Vec<u8>, ElfError> {
        let mut out = data.to_vec();
        for ty in self.types.iter().skip(1) {
            if ty.kind != KIND_DATASEC || ty.size_or_type != 0 {
                continue;
            }
            let name = self.name(ty)?;
            let Some(size) = section_size(name) else { continue };
            put(&mut out, ty.at + 8, size)?;
            for k in 0..usize::from(ty.vlen) {
                let var = self.extra_word(ty, 3 * k)?;
                let var_name = self.name(self.get(var)?)?;
                if let Some(offset) = symbol_offset(name, var_name) {
                    put(&mut out, self.type_base + ty.extra + 12 * k + 4, offset)?;
                }
            }
        }
        Ok(out)
    }
}

fn put(data: &mut [u8], at: usize, value: u32) -> Result<(), ElfError> {
    let slot = data
        .get_mut(at..at.saturating_add(4))
        .ok_or_else(|| err(at, "record runs past the section end"))?;
    slot.copy_from_slice(&value.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.BTF.ext` with a func_info area of `records` (section name offset, then each
    /// record's two words), `rec_size` bytes each.
    fn ext(rec_size: u32, sec_name_off: u32, records: &[(u32, u32)]) -> Vec<u8> {
        let mut area = rec_size.to_le_bytes().to_vec();
        area.extend(sec_name_off.to_le_bytes());
        area.extend((records.len() as u32).to_le_bytes());
        for &(insn_off, type_id) in records {
            area.extend(insn_off.to_le_bytes());
            area.extend(type_id.to_le_bytes());
            area.resize(area.len() + rec_size as usize - 8, 0);
        }
        let mut out = vec![0x9f, 0xeb, 1, 0];
        out.extend(32u32.to_le_bytes());
        for word in [0, area.len() as u32, 0, 0, 0, 0] {
            out.extend(word.to_le_bytes());
        }
        out.extend(area);
        out
    }

    #[test]
    fn func_info_names_each_functions_start_and_type() {
        // Strings "\0int\0main\0cb\0"; types 1 int, 2 proto, 3 FUNC main, 4 FUNC cb.
        let data = crate::func_btf(&["main", "cb"]);
        let btf = Btf::parse(&data).unwrap();
        let records = func_infos(&ext(8, 5, &[(0, 3), (0x58, 4)]), Some(&btf)).unwrap();
        let want = |insn_off, type_id| FuncRecord { section: "main".into(), insn_off, type_id };
        assert_eq!(records, [want(0, 3), want(0x58, 4)]);
        // A larger record size (a newer clang's) is stepped over.
        assert_eq!(func_infos(&ext(12, 5, &[(8, 4)]), Some(&btf)).unwrap(), [want(8, 4)]);
        // Without BTF nothing is named: no records.
        assert!(func_infos(&ext(8, 5, &[(0, 3)]), None).unwrap().is_empty());
    }

    #[test]
    fn bad_func_info_is_an_error_naming_the_record() {
        let data = crate::func_btf(&["main", "cb"]);
        let btf = Btf::parse(&data).unwrap();
        let message = |ext: Vec<u8>| func_infos(&ext, Some(&btf)).unwrap_err().to_string();
        // Type 2 is the prototype, not a FUNC; type 9 does not exist.
        assert!(message(ext(8, 5, &[(0, 2)])).contains("type 2 is no FUNC"));
        assert!(message(ext(8, 5, &[(0, 9)])).contains("type 9 is no FUNC"));
        // Half an instruction in.
        assert!(message(ext(8, 5, &[(4, 3)])).contains("not an instruction"));
        // A record size below the two words, and a count past the area's end.
        assert!(message(ext(4, 5, &[])).contains("below 8"));
        let mut long = ext(8, 5, &[(0, 3)]);
        long[32 + 8] = 5;
        assert!(message(long).contains("run past"));
    }
}
