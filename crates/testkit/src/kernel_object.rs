//! A program and its maps in the kernel, for the kernel-oracle tests: the maps created
//! through `weir-sys` (global data with its initial contents), the program's `lddw map_idx`
//! relocations bound to their descriptors, the program loaded, and a map read back whole.

use std::os::fd::AsRawFd;

use weir_isa::ebpf::{encode_bytes, Insn, Op};
use weir_program::{MapSpec, Program, RelocTarget};
use weir_sys::kernel::{FuncInfo, Kernel, KernelMap, LoadedProgram};

/// Creates one kernel map per spec, in order; a map with initial contents (`.data`,
/// `.rodata`) gets them at key 0.
pub fn create_maps<'a>(
    maps: impl IntoIterator<Item = (&'a MapSpec, Option<&'a [u8]>)>,
) -> Result<Vec<KernelMap>, String> {
    let kernel = Kernel::new();
    let mut out = Vec::new();
    for (s, initial) in maps {
        let map = kernel
            .map_create(s.map_type, s.key_size, s.value_size, s.max_entries, s.flags)
            .map_err(|e| format!("map {}: {e}", s.name))?;
        if let Some(initial) = initial {
            map.update(Some(&0u32.to_ne_bytes()), initial, 0)
                .map_err(|e| format!("map {}: initial contents: {e}", s.name))?;
        }
        out.push(map);
    }
    Ok(out)
}

/// The program's bytes with its map references bound to the maps' descriptors
/// (`lddw map_fd` / `lddw map_value`, the forms a load without `fd_array` takes).
pub fn bind(program: &Program, maps: &[KernelMap]) -> Result<Vec<u8>, String> {
    let mut insns: Vec<Insn> = program.insns().to_vec();
    for r in program.relocations() {
        let map_fd = |map: usize| {
            maps.get(map)
                .map(|m| i64::from(m.as_raw_fd()))
                .ok_or_else(|| format!("slot {}: no map {map}", r.slot))
        };
        let insn = match r.target {
            RelocTarget::Map { map } => (Op::LddwMapFd, 1, map_fd(map)?),
            RelocTarget::MapValue { map, offset } => {
                (Op::LddwMapValue, 2, map_fd(map)? | (i64::from(offset) << 32))
            }
        };
        let slot = insns.get_mut(r.slot).ok_or_else(|| format!("relocation at slot {}", r.slot))?;
        *slot = Insn::new(insn.0, slot.dst, insn.1, 0, insn.2);
    }
    Ok(encode_bytes(&insns))
}

/// Loads `program` (its type from the program) with its maps bound; a refusal carries the
/// verifier's reason.
pub fn load(program: &Program, maps: &[KernelMap]) -> Result<LoadedProgram, String> {
    let prog_type = program.prog_type().ok_or("the program has no type")?;
    Kernel::new()
        .load(prog_type, &bind(program, maps)?)
        .map_err(|e| format!("the kernel refused it: {}", e.reason()))
}

/// [`load`] with the program's functions described in BTF: `btf` (an object's `.BTF` as
/// the kernel takes it, `weir_elf::ObjectSpec::btf`) and per function its first slot and
/// `FUNC` type id (`ProgramSpec::functions`), sent as libbpf sends them (`BPF_BTF_LOAD`,
/// then `prog_btf_fd` and `func_info`): what a program with `bpf_loop` callbacks needs.
pub fn load_with_funcs(
    program: &Program,
    maps: &[KernelMap],
    btf: &[u8],
    funcs: &[(u32, u32)],
) -> Result<LoadedProgram, String> {
    let prog_type = program.prog_type().ok_or("the program has no type")?;
    Kernel::new()
        .load_with_funcs(prog_type, &bind(program, maps)?, FuncInfo { btf, funcs })
        .map_err(|e| format!("the kernel refused it: {}", e.reason()))
}

/// A map's contents: `(key, value)` pairs.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every `(key, value)` of `map` (`key_size`-byte keys) by `get_next_key` and lookups, in
/// key byte order. Values are [`KernelMap::value_len`] bytes (per-CPU maps: every possible
/// CPU's, 8-byte aligned).
pub fn dump(map: &KernelMap, key_size: usize) -> Result<Entries, String> {
    let mut out = Vec::new();
    let mut key: Option<Vec<u8>> = None;
    loop {
        let next = match map.get_next_key(key.as_deref()) {
            Ok(next) => next,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(format!("get_next_key: {e}")),
        };
        if next.len() != key_size {
            return Err(format!("get_next_key gave {} bytes, not {key_size}", next.len()));
        }
        let mut value = vec![0u8; map.value_len()];
        match map.lookup(Some(&next), &mut value) {
            Ok(()) => out.push((next.clone(), value)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("lookup: {e}")),
        }
        key = Some(next);
    }
    out.sort();
    Ok(out)
}
