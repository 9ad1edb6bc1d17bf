//! Writing BTF: the other direction of [`crate::btf`], just what BTF-defined maps need
//! (libbpf 1.x creates maps only from `.maps` with BTF; the legacy `maps` section is
//! refused). Each map is what clang makes of
//!
//! ```c
//! struct { __uint(type, T); __uint(key_size, K); __uint(value_size, V);
//!          __uint(max_entries, N); __uint(map_flags, F); __uint(pinning, P); } name SEC(".maps");
//! ```
//!
//! where `__uint(f, n)` is `int (*f)[n]`: an `int`, one array type per distinct `n`, a
//! pointer to each, an anonymous struct per map, a `VAR` per map (global, allocated) and
//! the `.maps` `DATASEC` listing them. The kinds' numbers are the reader's.

use crate::btf::{
    KIND_ARRAY, KIND_DATASEC, KIND_FUNC, KIND_FUNC_PROTO, KIND_INT, KIND_PTR, KIND_STRUCT, KIND_VAR,
};

const MAGIC: u16 = 0xeb9f;
const HEADER_LEN: u32 = 24;
/// `BTF_VAR_GLOBAL_ALLOCATED`.
const VAR_GLOBAL: u32 = 1;
/// `BTF_INT_SIGNED`, 32 bits: `int`'s encoding word.
const INT_SIGNED_32: u32 = (1 << 24) | 32;

/// One map's `__uint` fields, in declaration order.
pub(crate) struct MapDecl<'a> {
    pub name: &'a str,
    pub fields: Vec<(&'a str, u32)>,
}

/// What [`encode`] returns: the `.BTF` section and each map's (offset, size) in `.maps`.
pub(crate) struct Encoded {
    pub btf: Vec<u8>,
    pub layout: Vec<(u64, u64)>,
    pub maps_size: u64,
}

struct Writer {
    types: Vec<u8>,
    strings: Vec<u8>,
    next_id: u32,
}

impl Writer {
    fn string(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        off
    }
    /// A type record's common header; returns its id.
    fn header(&mut self, name_off: u32, kind: u8, vlen: u16, size_or_type: u32) -> u32 {
        let info = (u32::from(kind) << 24) | u32::from(vlen);
        for w in [name_off, info, size_or_type] {
            self.types.extend_from_slice(&w.to_le_bytes());
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }
    fn word(&mut self, w: u32) {
        self.types.extend_from_slice(&w.to_le_bytes());
    }
}

/// The `.BTF` of `maps` (struct members 8 bytes each, as pointers).
pub(crate) fn encode(maps: &[MapDecl<'_>]) -> Encoded {
    let mut w = Writer { types: Vec::new(), strings: vec![0], next_id: 1 };
    let int_name = w.string("int");
    let int = w.header(int_name, KIND_INT, 0, 4);
    w.word(INT_SIGNED_32);
    // One `int (*)[n]` per distinct n.
    let mut ptr_of: Vec<(u32, u32)> = Vec::new();
    for m in maps {
        for &(_, n) in &m.fields {
            if ptr_of.iter().any(|&(k, _)| k == n) {
                continue;
            }
            let arr = w.header(0, KIND_ARRAY, 0, 0);
            w.word(int);
            w.word(int);
            w.word(n);
            let ptr = w.header(0, KIND_PTR, 0, arr);
            ptr_of.push((n, ptr));
        }
    }
    let mut vars = Vec::new();
    let mut layout = Vec::new();
    let mut offset = 0u64;
    for m in maps {
        let size = 8 * m.fields.len() as u32;
        let names: Vec<u32> = m.fields.iter().map(|(f, _)| w.string(f)).collect();
        let st = w.header(0, KIND_STRUCT, m.fields.len() as u16, size);
        for (i, (&(_, n), name_off)) in m.fields.iter().zip(names).enumerate() {
            let ptr = ptr_of.iter().find(|&&(k, _)| k == n).map_or(0, |&(_, p)| p);
            w.word(name_off);
            w.word(ptr);
            w.word(i as u32 * 64);
        }
        let var_name = w.string(m.name);
        let var = w.header(var_name, KIND_VAR, 0, st);
        w.word(VAR_GLOBAL);
        vars.push((var, offset, u64::from(size)));
        layout.push((offset, u64::from(size)));
        offset += u64::from(size);
    }
    let sec_name = w.string(".maps");
    w.header(sec_name, KIND_DATASEC, vars.len() as u16, offset as u32);
    for (var, off, size) in vars {
        w.word(var);
        w.word(off as u32);
        w.word(size as u32);
    }
    Encoded { btf: w.finish(), layout, maps_size: offset }
}

impl Writer {
    /// The whole blob: header, types, strings.
    fn finish(self) -> Vec<u8> {
        let mut btf = Vec::new();
        btf.extend_from_slice(&MAGIC.to_le_bytes());
        btf.push(1); // version
        btf.push(0); // flags
        let (types, strings) = (self.types.len() as u32, self.strings.len() as u32);
        for v in [HEADER_LEN, 0, types, types, strings] {
            btf.extend_from_slice(&v.to_le_bytes());
        }
        btf.extend_from_slice(&self.types);
        btf.extend_from_slice(&self.strings);
        btf
    }
}

/// The least BTF the kernel wants for a program of several functions (`bpf_loop`'s
/// callbacks, local calls) loaded through `bpf()`: one `FUNC` per name, static, each of
/// prototype `int (void)` (static functions' arguments are not checked against BTF). The
/// function `names[i]` has type id `i + 3` (after `int` and the prototype), which is what
/// `func_info`'s records name.
pub fn func_btf(names: &[&str]) -> Vec<u8> {
    let mut w = Writer { types: Vec::new(), strings: vec![0], next_id: 1 };
    let int_name = w.string("int");
    let int = w.header(int_name, KIND_INT, 0, 4);
    w.word(INT_SIGNED_32);
    let proto = w.header(0, KIND_FUNC_PROTO, 0, int);
    for name in names {
        let name = w.string(name);
        // vlen 0: BTF_FUNC_STATIC.
        w.header(name, KIND_FUNC, 0, proto);
    }
    w.finish()
}

/// The type id [`func_btf`] gives its `index`th function.
pub fn func_btf_id(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX).saturating_add(3)
}
