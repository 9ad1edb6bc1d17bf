//! [`Program`]: slot-indexed eBPF instructions, as decoded by `weir_isa::ebpf::decode`,
//! with what the instructions refer to: the program type, the maps (as specs) and the
//! relocations that bind `lddw` instructions to them.

use weir_isa::ebpf::{decode_bytes, encode_bytes, Insn};
use weir_isa::DecodeError;

use crate::ProgType;

/// An eBPF program: one [`Insn`] per 8-byte slot (the second slot of `lddw` is
/// `Op::LddwHigh`). Jump offsets are in slots, so the target of the jump at `pc` is
/// `pc + off + 1`. A `Program` is only structurally decoded; see [`crate::validate`].
///
/// A program is pure data (a spec): its maps are [`MapSpec`]s, and an `lddw` that names a
/// map says so through a [`Relocation`]; loading (the runtime, or the kernel) makes live maps
/// and resolves the relocations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    insns: Vec<Insn>,
    prog_type: Option<ProgType>,
    maps: Vec<MapSpec>,
    relocations: Vec<Relocation>,
}

/// A map type, with the kernel's numbering (`enum bpf_map_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapType {
    #[doc(alias = "BPF_MAP_TYPE_HASH")]
    Hash,
    #[doc(alias = "BPF_MAP_TYPE_ARRAY")]
    Array,
    #[doc(alias = "BPF_MAP_TYPE_PROG_ARRAY")]
    ProgArray,
    #[doc(alias = "BPF_MAP_TYPE_PERF_EVENT_ARRAY")]
    PerfEventArray,
    #[doc(alias = "BPF_MAP_TYPE_PERCPU_HASH")]
    PercpuHash,
    #[doc(alias = "BPF_MAP_TYPE_PERCPU_ARRAY")]
    PercpuArray,
    #[doc(alias = "BPF_MAP_TYPE_LRU_HASH")]
    LruHash,
    #[doc(alias = "BPF_MAP_TYPE_LRU_PERCPU_HASH")]
    LruPercpuHash,
    #[doc(alias = "BPF_MAP_TYPE_LPM_TRIE")]
    LpmTrie,
    #[doc(alias = "BPF_MAP_TYPE_DEVMAP")]
    DevMap,
    #[doc(alias = "BPF_MAP_TYPE_CPUMAP")]
    CpuMap,
    #[doc(alias = "BPF_MAP_TYPE_QUEUE")]
    Queue,
    #[doc(alias = "BPF_MAP_TYPE_STACK")]
    Stack,
    #[doc(alias = "BPF_MAP_TYPE_DEVMAP_HASH")]
    DevMapHash,
    #[doc(alias = "BPF_MAP_TYPE_RINGBUF")]
    RingBuf,
    /// Any other kernel map type, by number.
    Other(u32),
}

impl MapType {
    /// The kernel's `enum bpf_map_type` value.
    pub fn kernel_id(self) -> u32 {
        match self {
            MapType::Hash => 1,
            MapType::Array => 2,
            MapType::ProgArray => 3,
            MapType::PerfEventArray => 4,
            MapType::PercpuHash => 5,
            MapType::PercpuArray => 6,
            MapType::LruHash => 9,
            MapType::LruPercpuHash => 10,
            MapType::LpmTrie => 11,
            MapType::DevMap => 14,
            MapType::CpuMap => 16,
            MapType::Queue => 22,
            MapType::Stack => 23,
            MapType::DevMapHash => 25,
            MapType::RingBuf => 27,
            MapType::Other(id) => id,
        }
    }

    /// The type with this kernel number (named when weir knows it).
    pub fn from_kernel_id(id: u32) -> MapType {
        const NAMED: [MapType; 15] = [
            MapType::Hash,
            MapType::Array,
            MapType::ProgArray,
            MapType::PerfEventArray,
            MapType::PercpuHash,
            MapType::PercpuArray,
            MapType::LruHash,
            MapType::LruPercpuHash,
            MapType::LpmTrie,
            MapType::DevMap,
            MapType::CpuMap,
            MapType::Queue,
            MapType::Stack,
            MapType::DevMapHash,
            MapType::RingBuf,
        ];
        NAMED.into_iter().find(|t| t.kernel_id() == id).unwrap_or(MapType::Other(id))
    }

    /// The name bpftool prints for this type (`hash`, `percpu_array`, `ringbuf`, ...), the
    /// kernel's `BPF_MAP_TYPE_*` suffix in lower case; `None` for a number the table does not
    /// know.
    pub fn name(self) -> Option<&'static str> {
        let id = self.kernel_id();
        MAP_TYPE_NAMES.iter().find(|&&(i, _)| i == id).map(|&(_, n)| n)
    }

    /// The type bpftool calls `name` (case-insensitive; `BPF_MAP_TYPE_` prefix allowed).
    pub fn from_name(name: &str) -> Option<MapType> {
        let lower = name.to_ascii_lowercase();
        let name = lower.strip_prefix("bpf_map_type_").unwrap_or(&lower);
        MAP_TYPE_NAMES.iter().find(|&&(_, n)| n == name).map(|&(id, _)| MapType::from_kernel_id(id))
    }
}

/// Every map type bpftool names, by the kernel's number (`enum bpf_map_type`, Linux 6.18):
/// the one name table ([`MapType::name`], [`MapType::from_name`]).
const MAP_TYPE_NAMES: [(u32, &str); 33] = [
    (1, "hash"),
    (2, "array"),
    (3, "prog_array"),
    (4, "perf_event_array"),
    (5, "percpu_hash"),
    (6, "percpu_array"),
    (7, "stack_trace"),
    (8, "cgroup_array"),
    (9, "lru_hash"),
    (10, "lru_percpu_hash"),
    (11, "lpm_trie"),
    (12, "array_of_maps"),
    (13, "hash_of_maps"),
    (14, "devmap"),
    (15, "sockmap"),
    (16, "cpumap"),
    (17, "xskmap"),
    (18, "sockhash"),
    (19, "cgroup_storage"),
    (20, "reuseport_sockarray"),
    (21, "percpu_cgroup_storage"),
    (22, "queue"),
    (23, "stack"),
    (24, "sk_storage"),
    (25, "devmap_hash"),
    (26, "struct_ops"),
    (27, "ringbuf"),
    (28, "inode_storage"),
    (29, "task_storage"),
    (30, "bloom_filter"),
    (31, "user_ringbuf"),
    (32, "cgrp_storage"),
    (33, "arena"),
];

/// A map a program uses, as declared (in an ELF object's `.maps`, by a flow datapath, ...):
/// what the kernel's `BPF_MAP_CREATE` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSpec {
    pub name: String,
    pub map_type: MapType,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    /// `BPF_F_*` map flags.
    pub flags: u32,
}

/// What an `lddw` refers to, resolved when the program is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelocTarget {
    /// The map itself (`BPF_PSEUDO_MAP_FD`): index into [`Program::maps`].
    Map { map: usize },
    /// An address inside the map's first value (`BPF_PSEUDO_MAP_VALUE`: global data).
    MapValue { map: usize, offset: u32 },
}

/// A relocation: the `lddw` at `slot` takes the value of `target` at load time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relocation {
    pub slot: usize,
    pub target: RelocTarget,
}

impl Program {
    /// Wraps slot-indexed instructions. Callers that build instructions by hand should prefer
    /// [`crate::ProgramBuilder`], which inserts the `lddw` fillers itself.
    pub fn from_insns(insns: Vec<Insn>) -> Self {
        Program { insns, ..Program::default() }
    }

    /// Decodes raw bytecode (a whole number of 8-byte little-endian slots).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        Ok(Program::from_insns(decode_bytes(bytes)?))
    }

    /// The same program, declared as being of type `prog_type`.
    pub fn with_prog_type(mut self, prog_type: ProgType) -> Self {
        self.prog_type = Some(prog_type);
        self
    }

    /// Adds a map the program uses; returns its index (what [`RelocTarget`]s name).
    pub fn add_map(&mut self, spec: MapSpec) -> usize {
        self.maps.push(spec);
        self.maps.len() - 1
    }

    /// Records that the `lddw` at `relocation.slot` refers to a map.
    pub fn add_relocation(&mut self, relocation: Relocation) {
        self.relocations.push(relocation);
    }

    /// The declared program type (`None`: any; the caller's bindings decide the context).
    pub fn prog_type(&self) -> Option<ProgType> {
        self.prog_type
    }

    pub fn maps(&self) -> &[MapSpec] {
        &self.maps
    }

    pub fn relocations(&self) -> &[Relocation] {
        &self.relocations
    }

    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    pub fn into_insns(self) -> Vec<Insn> {
        self.insns
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        encode_bytes(&self.insns)
    }
}

#[cfg(test)]
mod map_type_tests {
    use super::MapType;

    #[test]
    fn map_type_numbers_round_trip_and_are_the_kernels() {
        // A few numbers from the kernel's `enum bpf_map_type` (include/uapi/linux/bpf.h).
        let known = [(1, MapType::Hash), (11, MapType::LpmTrie), (14, MapType::DevMap)];
        let more = [(16, MapType::CpuMap), (22, MapType::Queue), (23, MapType::Stack)];
        for (id, t) in known.into_iter().chain(more).chain([(25, MapType::DevMapHash)]) {
            assert_eq!(t.kernel_id(), id);
            assert_eq!(MapType::from_kernel_id(id), t);
        }
        for id in 0..64 {
            assert_eq!(MapType::from_kernel_id(id).kernel_id(), id);
        }
        assert_eq!(MapType::from_kernel_id(21), MapType::Other(21));
    }

    #[test]
    fn map_type_names_round_trip_and_are_bpftools() {
        assert_eq!(MapType::from_name("hash"), Some(MapType::Hash));
        assert_eq!(MapType::from_name("LRU_PERCPU_HASH"), Some(MapType::LruPercpuHash));
        assert_eq!(MapType::from_name("BPF_MAP_TYPE_RINGBUF"), Some(MapType::RingBuf));
        assert_eq!(MapType::from_name("sockmap"), Some(MapType::Other(15)));
        assert_eq!(MapType::from_name("hashmap"), None);
        assert_eq!(MapType::Other(99).name(), None);
        for id in 1..=33 {
            let t = MapType::from_kernel_id(id);
            let name = t.name().unwrap_or_else(|| panic!("type {id} has no name"));
            assert_eq!(MapType::from_name(name), Some(t));
        }
    }
}
