//! eBPF maps with the kernel's semantics: the live maps a program's `bpf_map_*` helpers
//! and user space (the syscall side) share.
//!
//! # Place in the pipeline
//!
//! A [`weir_program::Program`] carries its maps as [`MapSpec`]s (pure data). Loading a
//! program makes them live: [`Map::create`] per spec, each shared as an `Arc<Map>` between
//! the workers that run the program and whoever reads or updates the map from outside
//! (the runtime, a command, a test). Helpers (`weir-helpers`) call [`Map::lookup`],
//! [`Map::update`], [`Map::delete`], [`Map::push`]/[`Map::pop`]/[`Map::peek`] and the ring
//! buffer's [`RingBuf::reserve`]/[`RingBuf::output`]; user space calls [`Map::lookup_all`],
//! [`Map::update_all`], [`Map::delete`], [`Map::get_next_key`] as it would call `bpf()`.
//! This crate sees only `weir-program`, and no engine sees it: maps reach engines through
//! the helper ABI's context.
//!
//! # Semantics
//!
//! Results are the kernel's: the same error (as an errno, [`MapError::errno`]) for the same
//! operation on the same contents, checked against the kernel by `tests/kernel.rs` for
//! array, per-CPU array, hash, LRU hash (without eviction), LPM trie, queue and stack.
//! Update flags are `BPF_ANY`, `BPF_NOEXIST`, `BPF_EXIST`; `BPF_F_LOCK` is refused
//! (EINVAL), as the kernel refuses it for a value without a `bpf_spin_lock` (weir has no BTF).
//! A key or value of the wrong length is EINVAL (the syscall cannot tell; weir can).
//!
//! Per-CPU maps are per worker: a map is created for `cpus` workers, a program on worker
//! `cpu` sees its own copy, and the syscall side ([`Map::lookup_all`], [`Map::update_all`])
//! sees every copy, each rounded up to 8 bytes, one after the other.
//!
//! LRU maps: an update that adds a key to a full map succeeds by evicting another element
//! (never the one being updated). weir evicts in insertion order with a second chance for
//! elements looked up since the sweep last passed them (the kernel's reference bit); the
//! kernel's choice is approximate too (and it may evict before the map is full, which weir
//! never does). A test may rely on: the count never exceeds `max_entries`, an update into a
//! full map succeeds, and the key just written is present.
//!
//! # Concurrency
//!
//! Every operation takes `&self`; maps are `Send + Sync`. Values live in 8-byte atomic
//! words ([`ValueRef`]), so a program writes a value in place while other threads read or
//! update it, with no undefined behaviour (a reader may see a value half old, half new,
//! word by word, as in the kernel). Arrays never lock: a lookup is an index, and values
//! never move. Hash lookups take no lock and no reference count (a seqlock per stripe of
//! buckets over a pool of elements never freed while the map lives; writers lock the
//! stripe); the LPM table, queues and stacks have one lock; the ring buffer serializes
//! producers and lets one consumer run beside them.
//!
//! A [`ValueRef`] stays valid while it lives: for arrays and hashes until the map is
//! dropped (it borrows the map), for trie elements even after they are deleted or
//! replaced (the element is freed when the last `ValueRef` to it goes). A hash element
//! deleted or replaced goes back to the map's pool and is reused by a later insert, as the
//! kernel reuses a preallocated hash map's elements: a holder then sees the new element's
//! words (still this map's memory, never freed), and only after every never-used element
//! and every element freed before it were taken (FIFO).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use weir_maps::{Map, MapError, BPF_ANY, BPF_NOEXIST};
//! use weir_program::{MapSpec, MapType};
//!
//! let spec = MapSpec {
//!     name: "counts".into(),
//!     map_type: MapType::Hash,
//!     key_size: 4,
//!     value_size: 8,
//!     max_entries: 16,
//!     flags: 0,
//! };
//! let map = Arc::new(Map::create(&spec, 2).unwrap());
//! let key = 7u32.to_ne_bytes();
//! map.update(&key, &0u64.to_ne_bytes(), BPF_ANY, 0).unwrap();
//! assert_eq!(map.update(&key, &[0; 8], BPF_NOEXIST, 0), Err(MapError::Exists));
//! // A program's lookup: the value in place, incremented as `lock xadd` would.
//! let value = map.lookup(&key, 0).unwrap();
//! value.fetch_update(0, 8, |v| v + 1).unwrap();
//! // User space sees the program's write.
//! assert_eq!(map.lookup_all(&key).unwrap(), 1u64.to_ne_bytes());
//! assert_eq!(map.get_next_key(None).unwrap(), key);
//! assert_eq!(map.get_next_key(Some(&key)), Err(MapError::NoEntry));
//! ```

mod array;
mod hash;
mod lpm;
mod queue;
mod ringbuf;
mod value;

pub use ringbuf::{
    Reservation, RingBuf, BPF_RB_AVAIL_DATA, BPF_RB_CONS_POS, BPF_RB_FORCE_WAKEUP,
    BPF_RB_NO_WAKEUP, BPF_RB_PROD_POS, BPF_RB_RING_SIZE, RINGBUF_BUSY_BIT, RINGBUF_DISCARD_BIT,
    RINGBUF_HDR_SZ,
};
use std::sync::Arc;
pub use value::{OwnedValue, ValueRef};

/// A hash map's table whose lookups of one-word keys need no test of what the map is:
/// only [`Map::one_word_table`] gives one (see there).
pub use hash::HashMap as OneWordTable;

/// Where a value lies in its map's storage: an array's value or a hash element's, on one
/// CPU ([`Map::lookup_loc`], [`Map::value_at`]). Plain data, no reference count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ValueLoc {
    /// The hash element (0 for arrays).
    elem: u32,
    /// The value's first word: in the element (hashes) or in the array's storage.
    word: u64,
}

impl ValueLoc {
    /// The hash element holding the value (0 for arrays): below [`Map::hash_elems`]'s
    /// count, and [`Map::elem_loc`] gives the location back from it.
    #[inline]
    pub fn elem(&self) -> u32 {
        self.elem
    }
}
use weir_program::abi::FoundElem;
pub use weir_program::{MapSpec, MapType};

use array::{Array, SlotArray, SlotKind};
use hash::{HashKind, HashMap, Src};
use lpm::LpmTrie;
use queue::QueueStack;

/// Update flags (`bpf_map_update_elem`'s last argument).
pub const BPF_ANY: u64 = 0;
pub const BPF_NOEXIST: u64 = 1;
pub const BPF_EXIST: u64 = 2;
pub const BPF_F_LOCK: u64 = 4;

/// Map creation flags (`MapSpec::flags`) weir accepts.
pub const BPF_F_NO_PREALLOC: u32 = 1 << 0;
pub const BPF_F_NO_COMMON_LRU: u32 = 1 << 1;
pub const BPF_F_NUMA_NODE: u32 = 1 << 2;
pub const BPF_F_RDONLY: u32 = 1 << 3;
pub const BPF_F_WRONLY: u32 = 1 << 4;
pub const BPF_F_ZERO_SEED: u32 = 1 << 6;
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;
pub const BPF_F_WRONLY_PROG: u32 = 1 << 8;
pub const BPF_F_MMAPABLE: u32 = 1 << 10;
pub const BPF_F_INNER_MAP: u32 = 1 << 12;

/// The access flags: accepted and recorded, not enforced (weir has no verifier yet to
/// refuse a program's write to a read-only map).
const ACCESS: u32 = BPF_F_RDONLY | BPF_F_WRONLY | BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG;

/// The kernel's `KMALLOC_MAX_SIZE` on x86-64 (4 MiB): the largest value it allocates.
const KMALLOC_MAX_SIZE: u64 = 1 << 22;
/// The kernel's `PCPU_MIN_UNIT_SIZE`: the largest per-CPU value.
const PCPU_MIN_UNIT_SIZE: u64 = 32 << 10;
/// `NR_CPUS` of the usual distribution kernel: the largest cpumap (a kernel build setting:
/// the kernel weir is tested on here has 256, and refuses larger cpumaps with E2BIG).
const NR_CPUS: u32 = 8192;

/// A failed map operation, as the kernel's errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum MapError {
    #[error("no such element (ENOENT)")]
    NoEntry,
    #[error("element exists (EEXIST)")]
    Exists,
    #[error("too big: map full or index out of range (E2BIG)")]
    TooBig,
    #[error("invalid argument (EINVAL)")]
    Invalid,
    #[error("out of memory (ENOMEM)")]
    NoMemory,
    #[error("no space left (ENOSPC)")]
    NoSpace,
    #[error("no room in the ring buffer (EAGAIN)")]
    Again,
    #[error("not supported by this map type (ENOTSUPP)")]
    NotSupported,
    #[error("operation not supported (EOPNOTSUPP)")]
    OpNotSupported,
}

impl MapError {
    /// The errno the kernel gives (524 is the kernel-internal `ENOTSUPP` that `bpf()`
    /// returns for operations a map type does not have).
    pub fn errno(self) -> i32 {
        match self {
            MapError::NoEntry => 2,
            MapError::Exists => 17,
            MapError::TooBig => 7,
            MapError::Invalid => 22,
            MapError::NoMemory => 12,
            MapError::NoSpace => 28,
            MapError::Again => 11,
            MapError::NotSupported => 524,
            MapError::OpNotSupported => 95,
        }
    }

    /// The error for an errno, when it is one a map gives.
    pub fn from_errno(errno: i32) -> Option<MapError> {
        const ALL: [MapError; 9] = [
            MapError::NoEntry,
            MapError::Exists,
            MapError::TooBig,
            MapError::Invalid,
            MapError::NoMemory,
            MapError::NoSpace,
            MapError::Again,
            MapError::NotSupported,
            MapError::OpNotSupported,
        ];
        ALL.into_iter().find(|e| e.errno() == errno)
    }
}

/// Unknown flags and `BPF_F_LOCK` (no spin lock in weir's values) are EINVAL.
pub(crate) fn check_update_flags(flags: u64) -> Result<(), MapError> {
    if flags & BPF_F_LOCK != 0 || flags > BPF_EXIST {
        return Err(MapError::Invalid);
    }
    Ok(())
}

/// The tag first (`repr(u8)`): `Map::lookup`'s match is one byte compared, where the
/// niche encoding the compiler picked by default cost a load, a subtraction and a
/// conditional move per lookup (a fifth of an array lookup).
#[derive(Debug)]
#[repr(u8)]
enum Kind {
    Array(Array),
    PercpuArray(Array),
    Hash(HashMap),
    Slots(SlotArray),
    Lpm(LpmTrie),
    Queue(QueueStack),
    Ring(RingBuf),
}

/// A live map: one of the kernel's map types, with its contents.
#[derive(Debug)]
pub struct Map {
    kind: Kind,
    spec: MapSpec,
    cpus: usize,
}

fn invalid_if(cond: bool) -> Result<(), MapError> {
    if cond {
        Err(MapError::Invalid)
    } else {
        Ok(())
    }
}

fn too_big_if(cond: bool) -> Result<(), MapError> {
    if cond {
        Err(MapError::TooBig)
    } else {
        Ok(())
    }
}

impl Map {
    /// Makes the map `spec` declares, for `cpus` workers (per-CPU maps keep one value per
    /// worker; other maps ignore it, but it must be at least 1). The checks are the
    /// kernel's `map_alloc_check`s, with its errors; a map type weir does not implement is
    /// `OpNotSupported`.
    pub fn create(spec: &MapSpec, cpus: usize) -> Result<Map, MapError> {
        invalid_if(cpus == 0)?;
        let (k, v, n, f) = (spec.key_size, spec.value_size, spec.max_entries, spec.flags);
        let kind = match spec.map_type {
            MapType::Array | MapType::PercpuArray => {
                let percpu = spec.map_type == MapType::PercpuArray;
                let mask = BPF_F_NUMA_NODE | ACCESS | BPF_F_MMAPABLE | BPF_F_INNER_MAP;
                invalid_if(n == 0 || k != 4 || v == 0 || f & !mask != 0)?;
                invalid_if(percpu && f & (BPF_F_NUMA_NODE | BPF_F_MMAPABLE) != 0)?;
                too_big_if(u64::from(v) > KMALLOC_MAX_SIZE)?;
                too_big_if(percpu && u64::from(v).next_multiple_of(8) > PCPU_MIN_UNIT_SIZE)?;
                let array = Array::new(v, n, if percpu { cpus } else { 1 }, percpu)?;
                if percpu {
                    Kind::PercpuArray(array)
                } else {
                    Kind::Array(array)
                }
            }
            MapType::Hash | MapType::PercpuHash | MapType::LruHash | MapType::LruPercpuHash => {
                let lru = matches!(spec.map_type, MapType::LruHash | MapType::LruPercpuHash);
                let percpu = matches!(spec.map_type, MapType::PercpuHash | MapType::LruPercpuHash);
                let mask = BPF_F_NO_PREALLOC
                    | BPF_F_NO_COMMON_LRU
                    | BPF_F_NUMA_NODE
                    | ACCESS
                    | BPF_F_ZERO_SEED;
                invalid_if(f & !mask != 0)?;
                invalid_if(!lru && f & BPF_F_NO_COMMON_LRU != 0)?;
                if lru && f & BPF_F_NO_PREALLOC != 0 {
                    return Err(MapError::NotSupported);
                }
                invalid_if(f & BPF_F_NUMA_NODE != 0 && (percpu || f & BPF_F_NO_COMMON_LRU != 0))?;
                invalid_if(n == 0 || k == 0 || v == 0)?;
                // The element (header, key and value rounded to 8) must fit a kmalloc.
                too_big_if(u64::from(k) + u64::from(v) >= KMALLOC_MAX_SIZE - 64)?;
                too_big_if(percpu && u64::from(v).next_multiple_of(8) > PCPU_MIN_UNIT_SIZE)?;
                let seed = if f & BPF_F_ZERO_SEED != 0 { 0 } else { hash::random_seed() };
                let kind = HashKind { percpu, lru, devmap: false };
                Kind::Hash(HashMap::new(kind, k, v, n, cpus, seed)?)
            }
            MapType::DevMapHash => {
                invalid_if(n == 0 || k != 4 || (v != 4 && v != 8))?;
                invalid_if(f & !(BPF_F_NUMA_NODE | BPF_F_RDONLY | BPF_F_WRONLY) != 0)?;
                let kind = HashKind { percpu: false, lru: false, devmap: true };
                Kind::Hash(HashMap::new(kind, k, v, n, 1, hash::random_seed())?)
            }
            MapType::ProgArray => {
                invalid_if(v != 4 || f & (BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG) != 0)?;
                invalid_if(n == 0 || k != 4 || f & !(BPF_F_NUMA_NODE | ACCESS) != 0)?;
                Kind::Slots(SlotArray::new(SlotKind::Prog, v, n)?)
            }
            MapType::DevMap => {
                invalid_if(n == 0 || k != 4 || (v != 4 && v != 8))?;
                invalid_if(f & !(BPF_F_NUMA_NODE | BPF_F_RDONLY | BPF_F_WRONLY) != 0)?;
                Kind::Slots(SlotArray::new(SlotKind::Dev, v, n)?)
            }
            MapType::CpuMap => {
                invalid_if(n == 0 || k != 4 || (v != 4 && v != 8) || f & !BPF_F_NUMA_NODE != 0)?;
                too_big_if(n > NR_CPUS)?;
                Kind::Slots(SlotArray::new(SlotKind::Cpu, v, n)?)
            }
            MapType::LpmTrie => {
                invalid_if(n == 0 || f & BPF_F_NO_PREALLOC == 0)?;
                invalid_if(f & !(BPF_F_NO_PREALLOC | BPF_F_NUMA_NODE | ACCESS) != 0)?;
                invalid_if(!(5..=4 + 256).contains(&k))?;
                invalid_if(v == 0 || u64::from(v) > KMALLOC_MAX_SIZE - 256 - 32)?;
                Kind::Lpm(LpmTrie::new(k, v, n))
            }
            MapType::Queue | MapType::Stack => {
                invalid_if(n == 0 || k != 0 || v == 0 || f & !(BPF_F_NUMA_NODE | ACCESS) != 0)?;
                too_big_if(u64::from(v) > KMALLOC_MAX_SIZE)?;
                Kind::Queue(QueueStack::new(spec.map_type == MapType::Stack, v, n))
            }
            MapType::RingBuf => {
                invalid_if(f & !BPF_F_NUMA_NODE != 0 || k != 0 || v != 0)?;
                invalid_if(!n.is_power_of_two() || n % 4096 != 0)?;
                Kind::Ring(RingBuf::new(n)?)
            }
            MapType::PerfEventArray | MapType::Other(_) => return Err(MapError::OpNotSupported),
        };
        Ok(Map { kind, spec: spec.clone(), cpus })
    }

    /// The spec the map was made from.
    #[inline]
    pub fn spec(&self) -> &MapSpec {
        &self.spec
    }

    pub fn map_type(&self) -> MapType {
        self.spec.map_type
    }

    /// The number of workers (CPUs) the map was made for.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// The size of one value as the syscall side reads and writes it: `value_size`, or for
    /// a per-CPU map `cpus` copies of it rounded up to 8 bytes.
    pub fn syscall_value_size(&self) -> usize {
        let v = self.spec.value_size as usize;
        if self.is_percpu() {
            v.next_multiple_of(8) * self.cpus
        } else {
            v
        }
    }

    /// Whether the map keeps a value per worker (`percpu_array`, `percpu_hash`,
    /// `lru_percpu_hash`): [`lookup_all`](Self::lookup_all) gives them all, each rounded
    /// up to 8 bytes.
    #[inline]
    pub fn is_percpu(&self) -> bool {
        matches!(
            self.spec.map_type,
            MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
        )
    }

    /// [`Map::lookup`] for a holder that must not borrow the map: the value in place, kept
    /// alive by the result (program arrays, device and CPU maps give `None`).
    pub fn lookup_owned(self: &Arc<Map>, key: &[u8], cpu: usize) -> Option<OwnedValue> {
        match &self.kind {
            Kind::Slots(_) => None,
            Kind::Lpm(t) => OwnedValue::of(t.lookup(key)?),
            _ => Some(OwnedValue::at(self, self.lookup_loc(key, cpu)?)),
        }
    }

    /// Whether this map's values stay where they are while the map lives (arrays and
    /// hashes: [`Map::lookup_loc`] and [`Map::value_at`] work on them): a location can
    /// be kept instead of a reference to the value.
    pub fn values_in_place(&self) -> bool {
        matches!(self.kind, Kind::Array(_) | Kind::PercpuArray(_) | Kind::Hash(_))
    }

    /// A program's lookup as a location in the map's storage (arrays and hashes; `None`
    /// for other types and missing keys): [`Map::value_at`] gives the value back in O(1)
    /// without a reference count. A hash element deleted later is reused by a later
    /// insert (as the kernel's preallocated elements are): its location then names the
    /// new element's value, still memory of this map.
    #[inline]
    pub fn lookup_loc(&self, key: &[u8], cpu: usize) -> Option<ValueLoc> {
        match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => {
                a.lookup_start(key, cpu).map(|w| ValueLoc { elem: 0, word: w as u64 })
            }
            Kind::Hash(h) => {
                let cpu = if self.is_percpu() { cpu } else { 0 };
                h.lookup_loc(key, cpu).map(|(e, w)| ValueLoc { elem: e, word: w as u64 })
            }
            _ => None,
        }
    }

    /// The value at `loc` (from [`Map::lookup_loc`] on this map).
    #[inline]
    pub fn value_at(&self, loc: ValueLoc) -> Option<ValueRef<'_>> {
        let word = usize::try_from(loc.word).ok()?;
        match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => a.value_at(word),
            Kind::Hash(h) => h.value_at(loc.elem, word),
            _ => None,
        }
    }

    /// The value at `loc` as the host address of its first byte and its length: what
    /// [`Map::value_at`] gives, without building a [`ValueRef`] (a run environment that
    /// hands the address to native code needs nothing else). The bytes are the map's
    /// atomic words: valid while the map lives, accessed as `ValueRef` accesses them.
    #[inline]
    pub fn value_ptr(&self, loc: ValueLoc) -> Option<(*mut u8, usize)> {
        let word = usize::try_from(loc.word).ok()?;
        let (words, len) = match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => (a.value_words(word)?, a.value_size()),
            Kind::Hash(h) => (h.value_words_at(loc.elem, word)?, h.value_size()),
            _ => return None,
        };
        Some((words.first()?.as_ptr().cast(), len))
    }

    /// [`Map::lookup_loc`] and [`Map::value_ptr`] of its answer in one step (one match on
    /// the map's type, one walk of a hash chain): the location and the value's host
    /// address. What a run environment's `bpf_map_lookup_elem` needs; `None` as
    /// `lookup_loc` gives it.
    #[inline(always)]
    pub fn lookup_ptr(&self, key: &[u8], cpu: usize) -> Option<(ValueLoc, *mut u8)> {
        let (loc, words) = match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => {
                let w = a.lookup_start(key, cpu)?;
                (ValueLoc { elem: 0, word: w as u64 }, a.value_words(w)?)
            }
            Kind::Hash(h) => {
                let cpu = if self.is_percpu() { cpu } else { 0 };
                let (e, w, words) = h.lookup_words(key, cpu)?;
                (ValueLoc { elem: e, word: w as u64 }, words)
            }
            _ => return None,
        };
        Some((loc, words.first()?.as_ptr().cast()))
    }

    /// [`Map::lookup_ptr`] of a hash map (not a devmap hash) for a key of at most 16 bytes
    /// given as the two words an element stores it in (its first 8 bytes and the rest,
    /// each zero-padded, native byte order): the element and the value's host address
    /// (a null `host`: no element), as native code takes them, with no key slice, length
    /// dispatch or type match beyond the hash's. For a run
    /// environment that hands native code one map's lookup (the kernel's
    /// `map_gen_lookup`); the caller keeps the key's size (`key_size <= 16`).
    #[inline(always)]
    pub fn lookup_key_words(&self, w0: u64, w1: u64, cpu: usize) -> FoundElem {
        let Kind::Hash(h) = &self.kind else {
            return FoundElem::NONE;
        };
        h.lookup_key_words(w0, w1, cpu)
    }

    /// The table of a hash map whose program lookups [`OneWordTable::probe_one_word`]
    /// answers (keys of 1 to 8 bytes, neither per-CPU nor LRU): [`Map::lookup_key_words`]
    /// of a key `w0` (with no second word) is `probe_one_word(w0)` on any worker, without
    /// its tests of the map's type, the second word and the flags. `None` for every other
    /// map, whose lookups take [`Map::lookup_key_words`]. For a run environment that
    /// chooses a map's lookup once, when it binds the map.
    pub fn one_word_table(&self) -> Option<&OneWordTable> {
        match &self.kind {
            Kind::Hash(h) if h.is_one_word_shared() => Some(h),
            _ => None,
        }
    }

    /// An array's value `index` on `cpu` as a location, without a key (`None` past
    /// `max_entries` or for other types): for a caller that lays the array's values out
    /// itself.
    pub fn array_loc(&self, index: u32, cpu: usize) -> Option<ValueLoc> {
        match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => a
                .lookup_start(&index.to_ne_bytes(), cpu)
                .map(|w| ValueLoc { elem: 0, word: w as u64 }),
            _ => None,
        }
    }

    /// A hash map's values by element: `(elements, pitch)`, element indexes below
    /// `elements` (what [`Map::lookup_loc`]'s locations hold, see [`ValueLoc::elem`]), one
    /// value per element and CPU, `pitch` bytes (`value_size` rounded up to 8) apart at
    /// most; `None` for other types (devmap hashes included: their values are not a
    /// program's to write). For an environment that gives every element's value a fixed
    /// address, as arrays get one ([`Map::elem_loc`] translates back).
    pub fn hash_elems(&self) -> Option<(usize, usize)> {
        match &self.kind {
            Kind::Hash(h) if self.spec.map_type != MapType::DevMapHash => {
                Some((h.elem_capacity(), h.value_pitch()))
            }
            _ => None,
        }
    }

    /// Element `elem`'s value on `cpu` (a shared hash's one value whatever the CPU), as
    /// [`Map::lookup_loc`] locates it: `None` for an element whose memory is not
    /// allocated yet (a big map's pool grows by chunks) or for other types. An element
    /// never filled, or deleted since, is still this map's memory (zeroed, or reused by a
    /// later insert), as with [`Map::lookup_loc`].
    #[inline]
    pub fn elem_loc(&self, elem: u32, cpu: usize) -> Option<ValueLoc> {
        match &self.kind {
            Kind::Hash(h) => {
                let cpu = if self.is_percpu() { cpu } else { 0 };
                h.elem_loc(elem, cpu).map(|(e, w)| ValueLoc { elem: e, word: w as u64 })
            }
            _ => None,
        }
    }

    /// The bytes between the starts of two consecutive values of an array (its
    /// `value_size` rounded up to 8); `None` for other types.
    pub fn array_pitch(&self) -> Option<usize> {
        match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => Some(a.stride() * 8),
            _ => None,
        }
    }

    /// `bpf_ringbuf_reserve` for a holder that keeps the map alive: the record's position
    /// and its sample, writable in place; `None` when this is not a ring buffer or
    /// [`RingBuf::reserve_at`] refuses. Finish it with [`RingBuf::finish_at`].
    pub fn ring_reserve(self: &Arc<Map>, size: u64, flags: u64) -> Option<(u64, OwnedValue)> {
        let (pos, size) = self.ring_buf()?.reserve_at(size, flags)?;
        Some((pos, OwnedValue::ring(self, pos, size)))
    }

    /// A program's `bpf_map_lookup_elem` on worker `cpu`: the value in place, or `None`
    /// (no element, a malformed key, or a map type programs do not look up: program
    /// arrays, queues, stacks, ring buffers).
    #[inline]
    pub fn lookup(&self, key: &[u8], cpu: usize) -> Option<ValueRef<'_>> {
        // Every arm gives the value's words (two registers, where a `ValueRef` is five
        // words returned through memory), and the `ValueRef` is built once, here: inlined
        // into the caller it is known to borrow the map, so dropping it costs nothing.
        // Two types inline, arrays and hashes: the type's byte is then one compare for
        // each (a third inline arm, per-CPU arrays, cost an array lookup two more).
        let words = match &self.kind {
            Kind::Array(a) => a.lookup_shared(key),
            // A shared (not per-CPU) hash has one value, whichever worker asks.
            Kind::Hash(h) => h.lookup(key, if self.is_percpu() { cpu } else { 0 }),
            _ => return self.lookup_other(key, cpu),
        }?;
        Some(ValueRef::in_map(words, self.spec.value_size as usize))
    }

    /// The other lookups, out of line (see [`Map::lookup`]).
    #[inline(never)]
    fn lookup_other(&self, key: &[u8], cpu: usize) -> Option<ValueRef<'_>> {
        match &self.kind {
            Kind::PercpuArray(a) => {
                Some(ValueRef::in_map(a.lookup_words(key, cpu)?, self.spec.value_size as usize))
            }
            Kind::Slots(s) => s.lookup(key),
            Kind::Lpm(t) => t.lookup(key),
            _ => None,
        }
    }

    /// A program's `bpf_map_update_elem` on worker `cpu` (a per-CPU map's new element
    /// starts zeroed on the other workers). Queues and stacks push.
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64, cpu: usize) -> Result<(), MapError> {
        match &self.kind {
            Kind::Array(a) => a.update(key, value, flags, Some(0)),
            Kind::PercpuArray(a) => a.update(key, value, flags, Some(cpu)),
            Kind::Hash(h) => {
                h.update(key, Src::Cpu(value, if self.is_percpu() { cpu } else { 0 }), flags)
            }
            _ => self.update_all(key, value, flags),
        }
    }

    /// The syscall's `BPF_MAP_UPDATE_ELEM`: for per-CPU maps, `value` holds every worker's
    /// value, each rounded up to 8 bytes ([`syscall_value_size`](Self::syscall_value_size)).
    /// Queues and stacks push (`key` empty).
    pub fn update_all(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        match &self.kind {
            Kind::Array(a) => a.update(key, value, flags, Some(0)),
            Kind::PercpuArray(a) => a.update(key, value, flags, None),
            Kind::Hash(h) => h.update(key, Src::All(value), flags),
            Kind::Slots(s) => s.update(key, value, flags),
            Kind::Lpm(t) => t.update(key, value, flags),
            Kind::Queue(q) => {
                invalid_if(!key.is_empty())?;
                q.push(value, flags)
            }
            Kind::Ring(_) => Err(MapError::NotSupported),
        }
    }

    /// The syscall's `BPF_MAP_LOOKUP_ELEM`: a copy of the value (per-CPU maps: every
    /// worker's; program arrays: the program index; queues and stacks: peek).
    pub fn lookup_all(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => a.lookup_all(key),
            Kind::Hash(h) => h.lookup_all(key),
            Kind::Slots(s) => s.lookup_all(key),
            Kind::Lpm(t) => t.lookup_all(key),
            Kind::Queue(q) => {
                invalid_if(!key.is_empty())?;
                q.peek()
            }
            Kind::Ring(_) => Err(MapError::NotSupported),
        }
    }

    /// `bpf_map_delete_elem` (program or syscall). Arrays cannot delete (EINVAL).
    pub fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => {
                array::index_of(key)?;
                let _ = a;
                Err(MapError::Invalid)
            }
            Kind::Hash(h) => h.delete(key),
            Kind::Slots(s) => s.delete(key),
            Kind::Lpm(t) => t.delete(key),
            Kind::Queue(_) => Err(MapError::Invalid),
            Kind::Ring(_) => Err(MapError::NotSupported),
        }
    }

    /// The syscall's `BPF_MAP_GET_NEXT_KEY`: `None` (or a key not in the map) gives the
    /// first key, the last key gives ENOENT. Every key is visited once when the map does
    /// not change meanwhile; the order is weir's (arrays: by index).
    pub fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        match &self.kind {
            Kind::Array(a) | Kind::PercpuArray(a) => a.get_next_key(key),
            Kind::Hash(h) => h.get_next_key(key),
            Kind::Slots(s) => s.get_next_key(key),
            Kind::Lpm(t) => t.get_next_key(key),
            Kind::Queue(_) => Err(MapError::Invalid),
            Kind::Ring(_) => Err(MapError::NotSupported),
        }
    }

    /// The syscall's `BPF_MAP_LOOKUP_AND_DELETE_ELEM`: pop for queues and stacks; for hash
    /// maps the value, then the element deleted (two steps, not one atomic one).
    pub fn lookup_and_delete(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        match &self.kind {
            Kind::Queue(q) => {
                invalid_if(!key.is_empty())?;
                q.pop()
            }
            Kind::Hash(_) if self.spec.map_type != MapType::DevMapHash => {
                let v = self.lookup_all(key)?;
                self.delete(key)?;
                Ok(v)
            }
            _ => Err(MapError::NotSupported),
        }
    }

    /// `bpf_map_push_elem` (queues and stacks; EINVAL for other maps).
    pub fn push(&self, value: &[u8], flags: u64) -> Result<(), MapError> {
        match &self.kind {
            Kind::Queue(q) => q.push(value, flags),
            _ => Err(MapError::Invalid),
        }
    }

    /// `bpf_map_pop_elem`: the oldest value of a queue, the newest of a stack.
    pub fn pop(&self) -> Result<Vec<u8>, MapError> {
        match &self.kind {
            Kind::Queue(q) => q.pop(),
            _ => Err(MapError::Invalid),
        }
    }

    /// `bpf_map_peek_elem`: what [`pop`](Self::pop) would take, left in place.
    pub fn peek(&self) -> Result<Vec<u8>, MapError> {
        match &self.kind {
            Kind::Queue(q) => q.peek(),
            _ => Err(MapError::Invalid),
        }
    }

    /// The ring buffer, for `bpf_ringbuf_*` and its consumer.
    pub fn ring_buf(&self) -> Option<&RingBuf> {
        match &self.kind {
            Kind::Ring(r) => Some(r),
            _ => None,
        }
    }

    /// A program array's program index at `index` (what `bpf_tail_call` jumps to).
    pub fn prog_at(&self, index: u32) -> Option<u32> {
        match &self.kind {
            Kind::Slots(s) if self.spec.map_type == MapType::ProgArray => s.prog_at(index),
            _ => None,
        }
    }

    /// Elements held now (hashes, queues, stacks); arrays hold `max_entries` always.
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Hash(h) => h.len(),
            Kind::Queue(q) => q.len(),
            Kind::Lpm(t) => t.len(),
            Kind::Array(_) | Kind::PercpuArray(_) | Kind::Slots(_) => {
                self.spec.max_entries as usize
            }
            Kind::Ring(_) => 0,
        }
    }

    /// Whether [`len`](Self::len) is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
