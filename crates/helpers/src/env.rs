//! The run environment: maps, the map values window, and a run's requests.

use std::any::Any;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

use weir_maps::{Map, MapType, OneWordTable, OwnedValue, ValueLoc, ValueRef};
use weir_program::abi::{DirectLookup, FoundElem, GuestMemory, RunEnv, ValueSpan};
use weir_program::exec::guest::{map_index, window, MAPS, MAPS_BASE, REGION_WINDOW};
use weir_program::TrapCode;

/// Bytes left free between two values, so that running off one value never lands in the
/// next (the access traps instead).
const GAP: u64 = 64;

/// How a slot keeps its value: a location in one of the environment's maps (arrays and
/// hashes: no reference count, the map outlives the environment), or an owned value (trie
/// elements, ring buffer samples).
#[derive(Debug)]
enum Held {
    Loc(usize, ValueLoc),
    /// Boxed: a slot stays small, and lookups in arrays and hashes never build one.
    Owned(Box<OwnedValue>),
}

/// One value a program can reach, at `addr` in the map values window.
#[derive(Debug)]
struct Slot {
    addr: u64,
    len: u64,
    /// The value's host address (stable while the environment lives: see `RunEnv`'s
    /// safety note), for `host` and to find a value placed already.
    ptr: usize,
    held: Held,
    writable: bool,
}

/// An array map laid out whole in the values window: value `i` at `base + (i << shift)`
/// (a power-of-two pitch at least `GAP` bytes wider than the value, so that running off
/// one value traps), so a lookup is arithmetic and an access finds its value in O(1), as
/// the kernel's JIT inlines `array_map_gen_lookup`. Global data maps are one-entry arrays.
/// A hash map (not a devmap hash) is laid out the same way by element (`hash`): element
/// `e`'s value at `base + (e << shift)`, so a lookup's address is arithmetic on the
/// element the map found (no per-run placement), stable as the element's memory is
/// (`Map::elem_loc`).
#[derive(Clone, Copy, Debug)]
struct ArrayRegion {
    base: u64,
    end: u64,
    shift: u32,
    entries: u32,
    value_len: u64,
    map: usize,
    writable: bool,
    hash: bool,
}

impl ArrayRegion {
    /// Value `index`'s location on `cpu`: an array's index or a hash's element.
    #[inline]
    fn loc(&self, map: &Map, index: u32, cpu: usize) -> Option<ValueLoc> {
        if self.hash {
            map.elem_loc(index, cpu)
        } else {
            map.array_loc(index, cpu)
        }
    }
}

/// A map's `bpf_map_lookup_elem` resolved once, when the environment is made (its maps
/// never change), as the kernel's `map_gen_lookup` resolves a map's lookup at load: the
/// key size, the layout of its values in the window (a copy of its `ArrayRegion`) and
/// whether programs may write them, so that a lookup reads one entry by map index instead
/// of the spec, the layout table and the writable table in turn.
#[derive(Clone, Copy, Debug)]
struct Lookup {
    key_size: usize,
    laid_out: Option<ArrayRegion>,
    in_place: bool,
    writable: bool,
}

/// Values a run may place before `place` indexes them by host address.
const SCAN_MAX: usize = 8;

/// The values window's share that whole arrays may take; the rest is for lookups' values.
const ARRAY_SHARE: u64 = REGION_WINDOW / 2;

/// A hasher for host addresses (the dedup index of a run's values): one multiply.
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
}

/// Where an XDP buffer lies in guest memory, for `bpf_xdp_adjust_*`: the lowest address
/// `data_meta` may reach and the highest `data_end` may.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketBounds {
    pub hard_start: u64,
    pub hard_end: u64,
}

/// A redirect a program asked for (`bpf_redirect`, `bpf_redirect_map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redirect {
    Ifindex { ifindex: u32, flags: u64 },
    Map { map: usize, key: u32 },
}

/// What helpers work with during runs: see the crate docs. One per worker.
#[derive(Debug)]
pub struct Env {
    maps: Vec<Arc<Map>>,
    cpu: usize,
    /// Maps laid out whole, by address.
    arrays: Vec<ArrayRegion>,
    /// Each map's lookup, by map index (whether programs may write its values: `.rodata*`
    /// maps are read-only).
    lookups: Vec<Lookup>,
    /// The hash maps' lookups as plain functions for native code (`RunEnv::direct_lookups`),
    /// by map index: those laid out by element with keys of at most 16 bytes.
    direct: Vec<Option<DirectLookup>>,
    /// Global data addresses by map index.
    static_addr: Vec<Option<u64>>,
    /// This run's other values, by address (addresses only grow within a run).
    dynamic: Vec<Slot>,
    /// The address each of this run's values got, by host address (one value, one
    /// address), once a run has more than `SCAN_MAX` of them; below, a scan is faster.
    placed: HashMap<usize, u64, BuildHasherDefault<AddrHasher>>,
    dynamic_base: u64,
    next: u64,
    rng: u64,
    origin: Instant,
    /// Set by `bpf_xdp_adjust_*`'s runner before each run.
    pub(crate) packet: PacketBounds,
    /// The highest guest address `data_end` reached this packet through
    /// `bpf_xdp_adjust_tail` (0: never moved): see [`Env::packet_reach`].
    pub(crate) packet_reach: u64,
    /// The lowest guest address `data_meta` reached this packet through
    /// `bpf_xdp_adjust_head`/`bpf_xdp_adjust_meta` (`u64::MAX`: never moved): see
    /// [`Env::packet_floor`].
    pub(crate) packet_floor: u64,
    /// A successful `bpf_tail_call` of this run: the program index to run next.
    pub(crate) tail_call: Option<u32>,
    pub(crate) tail_calls: u32,
    pub(crate) redirect: Option<Redirect>,
    /// Where `bpf_trace_printk` lines go: standard error, or kept (tests).
    pub(crate) trace: Option<Vec<String>>,
    /// Ring buffer records this run reserved and has not submitted or discarded yet: the
    /// sample's guest address, the map, the record's position.
    reserved: Vec<(u64, Arc<Map>, u64)>,
}

impl Env {
    /// An environment for worker `cpu` over the object's maps, in the object's order.
    /// Global data maps (array maps named `.data`, `.bss`, `.rodata` or `.rodata.*` and
    /// the like, with one element) get their fixed address now; `.rodata` is read-only.
    pub fn new(maps: Vec<Arc<Map>>, cpu: usize) -> Env {
        let mut arrays = Vec::new();
        let mut lookups = Vec::with_capacity(maps.len());
        let mut direct = Vec::with_capacity(maps.len());
        let mut static_addr = Vec::with_capacity(maps.len());
        let mut next = MAPS_BASE;
        for (index, map) in maps.iter().enumerate() {
            let spec = map.spec();
            let name = spec.name.as_str();
            let writable = !name.starts_with(".rodata");
            let global = name.starts_with('.') && spec.max_entries == 1;
            let array = matches!(spec.map_type, MapType::Array | MapType::PercpuArray);
            let hash = map.hash_elems();
            let laid_out = match (map.array_pitch().filter(|_| array), hash) {
                (Some(pitch), _) => Some((pitch, u64::from(spec.max_entries))),
                (None, Some((elems, pitch))) => Some((pitch, elems as u64)),
                (None, None) => None,
            };
            let region = laid_out.and_then(|(pitch, entries)| {
                let pitch = (pitch as u64).checked_add(GAP)?.next_power_of_two();
                let shift = pitch.trailing_zeros();
                let span = entries.checked_shl(shift)?;
                let end = next.checked_add(span)?;
                (end <= MAPS_BASE + ARRAY_SHARE).then_some(ArrayRegion {
                    base: next,
                    end,
                    shift,
                    entries: u32::try_from(entries).ok()?,
                    value_len: u64::from(spec.value_size),
                    map: index,
                    writable,
                    hash: hash.is_some(),
                })
            });
            lookups.push(Lookup {
                key_size: usize::try_from(spec.key_size).unwrap_or(usize::MAX),
                laid_out: region,
                in_place: map.values_in_place(),
                writable,
            });
            // Keys past 16 bytes get a `find` of their own: the key in place, by address;
            // a map of one-word keys, neither per-CPU nor LRU, its table's one-word probe,
            // which tests nothing this choice knew.
            let (find, target): (FindFn, *const ()) = match map.one_word_table() {
                _ if spec.key_size > 16 => (find_hash_long, Arc::as_ptr(map).cast()),
                Some(table) => (find_one_word, std::ptr::from_ref(table).cast()),
                None => (find_hash_elem, Arc::as_ptr(map).cast()),
            };
            direct.push(region.filter(|r| r.hash).map(|r| DirectLookup {
                find,
                map: target,
                cpu: cpu as u64,
                keep: Arc::clone(map) as Arc<dyn Any + Send + Sync>,
                key_size: spec.key_size,
                base: r.base,
                shift: r.shift,
                value_len: r.value_len,
                writable: r.writable,
            }));
            match region {
                Some(region) => {
                    next = region.end;
                    static_addr.push((global && !region.hash).then_some(region.base));
                    arrays.push(region);
                }
                None => static_addr.push(None),
            }
        }
        Env {
            maps,
            cpu,
            arrays,
            lookups,
            direct,
            static_addr,
            dynamic: Vec::new(),
            placed: HashMap::default(),
            dynamic_base: next,
            next,
            rng: 0x5745_4952_5f52_4e47,
            origin: Instant::now(),
            packet: PacketBounds::default(),
            packet_reach: 0,
            packet_floor: u64::MAX,
            tail_call: None,
            tail_calls: 0,
            redirect: None,
            trace: None,
            reserved: Vec::new(),
        }
    }

    /// The maps, in the object's order.
    pub fn maps(&self) -> &[Arc<Map>] {
        &self.maps
    }

    /// The guest address of global data map `map`'s value (what `lddw map_value` loads,
    /// before its offset).
    pub fn static_addr(&self, map: usize) -> Option<u64> {
        self.static_addr.get(map).copied().flatten()
    }

    /// Seeds `bpf_get_prandom_u32`.
    pub fn seed(&mut self, seed: u64) {
        self.rng = seed;
    }

    /// Keeps `bpf_trace_printk` lines instead of printing them (see [`Env::take_trace`]).
    pub fn keep_trace(&mut self) {
        self.trace = Some(Vec::new());
    }

    /// The `bpf_trace_printk` lines kept so far.
    pub fn take_trace(&mut self) -> Vec<String> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Starts a packet: no values of an earlier run reachable, no tail call or redirect,
    /// the tail call count at 0.
    #[inline]
    pub fn begin_packet(&mut self, packet: PacketBounds) {
        self.begin_run();
        self.packet = packet;
        self.packet_reach = 0;
        self.packet_floor = u64::MAX;
        self.tail_calls = 0;
        self.redirect = None;
    }

    /// Starts the run of a packet lent after another in the same batch, by a program that
    /// leaves the packet (`weir`'s `leaves_packet`: no `bpf_xdp_adjust_*`, no tail call, no
    /// ring buffer): of [`Env::begin_packet`], only what such a run can change, the values
    /// it placed and its redirect; after [`Env::end_run`], which ended the last run. The
    /// packet's bounds, reach and floor, the tail call and the tail-call count stay as the
    /// batch's `begin_packet` left them: such a run changes none of them and reads none
    /// (the bounds are read by `bpf_xdp_adjust_*` alone; issue 11: `begin_packet` per lent
    /// frame was 15 instructions, bench/records/2026-12-01-runtime-31.txt).
    #[inline]
    pub fn begin_lent_frame(&mut self) {
        self.forget_run_values();
        self.redirect = None;
    }

    /// Starts one program's run (also of a tail-called program): lookups made by an
    /// earlier run are forgotten.
    #[inline]
    pub fn begin_run(&mut self) {
        self.end_run();
        // Only what a run used is reset (most runs of an array-counting program use
        // nothing here), out of line: the usual begin is a few stores, inlined into the
        // runner's per-packet loop (issue 11: a call per packet in the profile).
        self.forget_run_values();
        self.tail_call = None;
    }

    /// The values the last run placed, unreachable, the next placed where the first was.
    #[inline]
    fn forget_run_values(&mut self) {
        if !self.dynamic.is_empty() {
            self.forget_values();
        }
        self.next = self.dynamic_base;
    }

    /// The values an earlier run placed, forgotten (see [`Env::begin_run`]).
    #[inline(never)]
    fn forget_values(&mut self) {
        self.dynamic.clear();
        if !self.placed.is_empty() {
            self.placed.clear();
        }
    }

    /// Ends one program's run (also a trapped one): the ring buffer records it reserved
    /// and neither submitted nor discarded are discarded (the kernel's verifier refuses a
    /// program that can exit, or tail-call, holding one).
    #[inline]
    pub fn end_run(&mut self) {
        if !self.reserved.is_empty() {
            self.discard_reserved();
        }
    }

    #[cold]
    fn discard_reserved(&mut self) {
        for (_, map, pos) in self.reserved.drain(..) {
            if let Some(ring) = map.ring_buf() {
                ring.finish_at(pos, true);
            }
        }
    }

    /// `bpf_ringbuf_reserve`: the sample's guest address, or `None` (not a ring buffer,
    /// no room, bad flags, or the values window full).
    pub(crate) fn ring_reserve(&mut self, map: &Arc<Map>, size: u64, flags: u64) -> Option<u64> {
        let (pos, value) = map.ring_reserve(size, flags)?;
        let Some(addr) = self.place(Held::Owned(Box::new(value)), true) else {
            if let Some(ring) = map.ring_buf() {
                ring.finish_at(pos, true);
            }
            return None;
        };
        self.reserved.push((addr, Arc::clone(map), pos));
        Some(addr)
    }

    /// `bpf_ringbuf_submit`/`discard` of the sample at `addr`: `false` when this run holds
    /// no record there. The sample is unreachable afterwards.
    pub(crate) fn ring_finish(&mut self, addr: u64, discard: bool) -> bool {
        let Some(at) = self.reserved.iter().position(|(a, _, _)| *a == addr) else {
            return false;
        };
        let (_, map, pos) = self.reserved.swap_remove(at);
        if let Some(ring) = map.ring_buf() {
            ring.finish_at(pos, discard);
        }
        if let Some(at) = self.dynamic_at(addr) {
            let slot = self.dynamic.remove(at);
            self.placed.remove(&slot.ptr);
        }
        true
    }

    /// The highest guest address the packet's `data_end` reached through
    /// `bpf_xdp_adjust_tail` since `begin_packet` (0 if it never moved): with the final
    /// `data_end`, the end of the bytes a program the kernel's verifier accepts may have
    /// written in its buffer.
    #[inline]
    pub fn packet_reach(&self) -> u64 {
        self.packet_reach
    }

    /// The lowest guest address the packet's `data_meta` reached through
    /// `bpf_xdp_adjust_head`/`bpf_xdp_adjust_meta` since `begin_packet` (`None` if it never
    /// moved): with the final `data_meta`, the start of the bytes a program the kernel's
    /// verifier accepts may have written in its buffer's headroom.
    #[inline]
    pub fn packet_floor(&self) -> Option<u64> {
        (self.packet_floor != u64::MAX).then_some(self.packet_floor)
    }

    /// The program a successful `bpf_tail_call` asked for, taken.
    #[inline]
    pub fn take_tail_call(&mut self) -> Option<u32> {
        self.tail_call.take()
    }

    /// The last redirect the packet asked for.
    pub fn redirect(&self) -> Option<Redirect> {
        self.redirect
    }

    pub(crate) fn cpu(&self) -> usize {
        self.cpu
    }

    pub(crate) fn map(&self, handle: u64) -> Option<(usize, &Arc<Map>)> {
        let index = weir_program::exec::guest::map_index(handle)?;
        Some((index, self.maps.get(index)?))
    }

    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub(crate) fn next_random(&mut self) -> u32 {
        // SplitMix64.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u32
    }

    /// `bpf_map_lookup_elem` on this worker: the value's address for this run, or `None`
    /// (no such map or element, or the values window full). An array laid out whole
    /// answers with arithmetic; a hash's value is kept as a location in the map (no
    /// reference count); other maps' values are owned for the run.
    #[inline]
    pub(crate) fn lookup_elem(&mut self, handle: u64, key: &[u8]) -> Option<u64> {
        let index = weir_program::exec::guest::map_index(handle)?;
        let lookup = *self.lookups.get(index)?;
        if let Some(region) = lookup.laid_out {
            if region.hash {
                let loc = self.maps.get(index)?.lookup_loc(key, self.cpu)?;
                return Some(region.base + (u64::from(loc.elem()) << region.shift));
            }
            let i = u32::from_ne_bytes(key.try_into().ok()?);
            return (i < region.entries).then(|| region.base + (u64::from(i) << region.shift));
        }
        let map = self.maps.get(index)?;
        let writable = lookup.writable;
        if lookup.in_place {
            let loc = map.lookup_loc(key, self.cpu)?;
            let value = map.value_at(loc)?;
            let (ptr, len) = (value.as_ptr() as usize, value.len() as u64);
            return self.place_at(ptr, len, Held::Loc(index, loc), writable);
        }
        let held = Held::Owned(Box::new(map.lookup_owned(key, self.cpu)?));
        self.place(held, writable)
    }

    /// The value a slot holds.
    fn value_of<'s>(&'s self, slot: &'s Slot) -> Option<ValueRef<'s>> {
        match &slot.held {
            Held::Loc(map, loc) => self.maps.get(*map)?.value_at(*loc),
            Held::Owned(value) => Some(value.get()),
        }
    }

    /// Gives a value an address for this run (the one it already has, if any); `None` when
    /// the window is full.
    fn place(&mut self, held: Held, writable: bool) -> Option<u64> {
        let Held::Owned(owned) = &held else {
            return None;
        };
        let value = owned.get();
        let (ptr, len) = (value.as_ptr() as usize, value.len() as u64);
        self.place_at(ptr, len, held, writable)
    }

    /// `place` of a value whose host address and length are known.
    #[inline]
    fn place_at(&mut self, ptr: usize, len: u64, held: Held, writable: bool) -> Option<u64> {
        let known = if self.dynamic.len() <= SCAN_MAX {
            self.dynamic.iter().find(|s| s.ptr == ptr).map(|s| s.addr)
        } else {
            self.placed.get(&ptr).copied()
        };
        if let Some(addr) = known {
            return Some(addr);
        }
        let addr = self.next;
        let end = addr.checked_add(len)?;
        if end > MAPS_BASE + REGION_WINDOW {
            return None;
        }
        self.next = end.next_multiple_of(8).saturating_add(GAP);
        if self.dynamic.len() == SCAN_MAX {
            // From here on, an index: the scan would grow with the run.
            self.placed.extend(self.dynamic.iter().map(|s| (s.ptr, s.addr)));
        }
        if self.dynamic.len() >= SCAN_MAX {
            self.placed.insert(ptr, addr);
        }
        self.dynamic.push(Slot { addr, len, ptr, held, writable });
        Some(addr)
    }

    /// The index of the dynamic slot that starts at or below `addr` (the only one that
    /// may hold it).
    fn dynamic_at(&self, addr: u64) -> Option<usize> {
        self.dynamic.partition_point(|s| s.addr <= addr).checked_sub(1)
    }

    /// The value holding `[addr, addr + len)`, the offset in it and whether programs may
    /// write it: O(1) for whole arrays, a binary search over this run's other values.
    #[inline]
    fn slot(&self, addr: u64, len: u64) -> Option<(ValueRef<'_>, usize, bool)> {
        if addr < self.dynamic_base {
            let at = self.arrays.partition_point(|r| r.base <= addr).checked_sub(1)?;
            let region = self.arrays.get(at)?;
            let offset = addr.checked_sub(region.base)?;
            let index = u32::try_from(offset >> region.shift).ok()?;
            let within = offset & ((1u64 << region.shift) - 1);
            if addr >= region.end || within.checked_add(len)? > region.value_len {
                return None;
            }
            let map = self.maps.get(region.map)?;
            let value = map.value_at(region.loc(map, index, self.cpu)?)?;
            return Some((value, within as usize, region.writable));
        }
        let slot = self.dynamic.get(self.dynamic_at(addr)?)?;
        let offset = addr - slot.addr;
        if offset.checked_add(len)? > slot.len {
            return None;
        }
        Some((self.value_of(slot)?, offset as usize, slot.writable))
    }
}

// SAFETY: `host` returns addresses inside values that stay allocated while the environment
// lives: array and hash values are words of a map's storage, which is never freed while the
// map lives, and the environment holds every map (`Arc<Map>`; a hash element deleted and
// reused meanwhile is still that map's memory, as with the kernel's preallocated maps); a
// trie element or ring buffer sample is held by the slot's `OwnedValue` until the next
// `begin_run`, which the runner calls only between runs. Values are 8-byte aligned atomic
// words that weir-maps only ever accesses atomically.
unsafe impl RunEnv for Env {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TrapCode> {
        let (value, offset, _) = self.slot(addr, buf.len() as u64).ok_or(TrapCode::OutOfBounds)?;
        if value.read(offset, buf) {
            Ok(())
        } else {
            Err(TrapCode::OutOfBounds)
        }
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), TrapCode> {
        let (value, offset, writable) =
            self.slot(addr, bytes.len() as u64).ok_or(TrapCode::OutOfBounds)?;
        if !writable {
            return Err(TrapCode::ReadOnly);
        }
        if value.write(offset, bytes) {
            Ok(())
        } else {
            Err(TrapCode::OutOfBounds)
        }
    }

    fn host(&mut self, addr: u64, len: u64, write: bool) -> Option<NonNull<u8>> {
        // A run's value: its host address kept at `place` (no map access).
        if addr >= self.dynamic_base {
            let slot = self.dynamic.get(self.dynamic_at(addr)?)?;
            let offset = addr - slot.addr;
            if offset.checked_add(len)? > slot.len || (write && !slot.writable) {
                return None;
            }
            return NonNull::new((slot.ptr as *mut u8).wrapping_add(offset as usize));
        }
        let (value, offset, writable) = self.slot(addr, len)?;
        if write && !writable {
            return None;
        }
        NonNull::new(value.as_ptr().wrapping_add(offset))
    }

    fn value_span(&mut self, addr: u64) -> Option<ValueSpan> {
        if addr >= self.dynamic_base {
            let slot = self.dynamic.get(self.dynamic_at(addr)?)?;
            if addr - slot.addr >= slot.len {
                return None;
            }
            let host = NonNull::new(slot.ptr as *mut u8)?;
            return Some(ValueSpan {
                addr: slot.addr,
                host,
                len: slot.len,
                writable: slot.writable,
            });
        }
        // A whole array's value: the one `addr` falls in (its pitch's gap holds none).
        let at = self.arrays.partition_point(|r| r.base <= addr).checked_sub(1)?;
        let region = self.arrays.get(at)?;
        let offset = addr.checked_sub(region.base)?;
        let within = offset & ((1u64 << region.shift) - 1);
        if addr >= region.end || within >= region.value_len {
            return None;
        }
        let index = u32::try_from(offset >> region.shift).ok()?;
        let map = self.maps.get(region.map)?;
        let value = map.value_at(region.loc(map, index, self.cpu)?)?;
        let host = NonNull::new(value.as_ptr())?;
        let (len, writable) = (region.value_len, region.writable);
        Some(ValueSpan { addr: addr - within, host, len, writable })
    }

    fn update(
        &mut self,
        addr: u64,
        len: usize,
        update: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, TrapCode> {
        let (value, offset, writable) = self.slot(addr, len as u64).ok_or(TrapCode::OutOfBounds)?;
        if !writable {
            return Err(TrapCode::ReadOnly);
        }
        // The kernel refuses a misaligned `BPF_ATOMIC`; unverified, it gets the plain
        // read-then-write the default does.
        if let Some(old) = value.fetch_update(offset, len, &mut *update) {
            return Ok(old);
        }
        let mut bytes = [0u8; 8];
        let word = bytes.get_mut(..len).ok_or(TrapCode::OutOfBounds)?;
        if !value.read(offset, word) {
            return Err(TrapCode::OutOfBounds);
        }
        let old = u64::from_le_bytes(bytes);
        let new = update(old).to_le_bytes();
        if !value.write(offset, new.get(..len).ok_or(TrapCode::OutOfBounds)?) {
            return Err(TrapCode::OutOfBounds);
        }
        Ok(old)
    }

    /// The lookup of `lookup_elem` for whole arrays and in-place (hash) values, with the
    /// value's span, in one call. Cannot panic: no indexing, `unwrap` or division on this
    /// path (nor in weir-maps' `lookup_loc`/`value_at`/`array_loc`, which use `get` and
    /// wrapping arithmetic); every miss is a `None` or `(0, None)`.
    fn map_lookup(
        &mut self,
        handle: u64,
        key: u64,
        memory: &dyn GuestMemory,
    ) -> Option<(u64, Option<ValueSpan>)> {
        let index = map_index(handle)?;
        // The map's lookup as resolved when the environment was made: one entry, no spec,
        // layout table or writable table read per call.
        let (lookup, map) = (*self.lookups.get(index)?, self.maps.get(index)?);
        // Every key of the test corpus fits; a longer one takes the helper's path.
        let mut buf = [0u8; 64];
        let key_bytes = buf.get_mut(..lookup.key_size)?;
        if window(key) == MAPS as u64 {
            RunEnv::read(self, key, key_bytes).ok()?;
        } else {
            memory.read(key, key_bytes).ok()?;
        }
        if let Some(region) = lookup.laid_out {
            // One step in the map: the element (or index) gives the guest address, its
            // words the host one.
            let Some((loc, ptr)) = map.lookup_ptr(key_bytes, self.cpu) else {
                return Some((0, None));
            };
            let slot = if region.hash {
                u64::from(loc.elem())
            } else {
                let i = u32::from_ne_bytes((&*key_bytes).try_into().ok()?);
                if i >= region.entries {
                    return Some((0, None));
                }
                u64::from(i)
            };
            let addr = region.base + (slot << region.shift);
            let host = NonNull::new(ptr)?;
            let span = ValueSpan { addr, host, len: region.value_len, writable: region.writable };
            return Some((addr, Some(span)));
        }
        if !lookup.in_place {
            return None;
        }
        let writable = lookup.writable;
        let Some(loc) = map.lookup_loc(key_bytes, self.cpu) else {
            return Some((0, None));
        };
        // The address alone: no `ValueRef` (an enum with a reference-counted variant,
        // built and dropped per lookup) on this path.
        let (ptr, len) = map.value_ptr(loc)?;
        let (host, len) = (NonNull::new(ptr)?, len as u64);
        let addr = self.place_at(host.as_ptr() as usize, len, Held::Loc(index, loc), writable)?;
        Some((addr, Some(ValueSpan { addr, host, len, writable })))
    }

    fn direct_lookups(&self, out: &mut Vec<Option<DirectLookup>>) {
        out.clear();
        out.extend(self.direct.iter().cloned());
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

/// The type of [`DirectLookup`]'s `find`.
type FindFn = unsafe extern "C" fn(map: *const (), cpu: u64, w0: u64, w1: u64) -> FoundElem;

/// A hash map's `find` for [`DirectLookup`]: [`Map::lookup_key_words`], the element and
/// the value's host address (null: no element), the same answer `RunEnv::map_lookup`
/// gives through `Map::lookup_ptr` (the element's value at `base + (elem << shift)`).
///
/// # Safety
///
/// `map` is `Arc::as_ptr` of the `Arc<Map>` the `DirectLookup`'s `keep` holds, alive for
/// the call.
unsafe extern "C" fn find_hash_elem(map: *const (), cpu: u64, w0: u64, w1: u64) -> FoundElem {
    // SAFETY: see the function's contract: a live `Map`, only read through `&` (its
    // lookups are lock-free and thread-safe).
    let map = unsafe { &*map.cast::<Map>() };
    map.lookup_key_words(w0, w1, usize::try_from(cpu).unwrap_or(usize::MAX))
}

/// [`find_hash_elem`] for a map [`Map::one_word_table`] gives a table of: that table's
/// probe, `OneWordTable::probe_one_word`, the same answer for a key of at most 8 bytes
/// (its second word `w1` is 0, as `DirectLookup` passes such a key; any worker reads the
/// one value, so `cpu` is not needed).
///
/// # Safety
///
/// `table` is what `Map::one_word_table` gave for the `Map` the `DirectLookup`'s `keep`
/// holds, alive for the call.
unsafe extern "C" fn find_one_word(table: *const (), _cpu: u64, w0: u64, w1: u64) -> FoundElem {
    debug_assert_eq!(w1, 0);
    // SAFETY: see the function's contract: a live table inside a live `Map`, only read
    // through `&` (its lookups are lock-free and thread-safe).
    let table = unsafe { &*table.cast::<OneWordTable>() };
    table.probe_one_word(w0)
}

/// [`find_hash_elem`] for a map whose keys are longer than 16 bytes, as [`DirectLookup`]
/// takes such a key: `key` is the host address of its `len` bytes, read in place (a flow
/// table's 56-byte key is not copied, nor read through guest memory). The answer is
/// `RunEnv::map_lookup`'s, from the same `Map::lookup_ptr`; a `len` other than the map's
/// key size finds nothing.
///
/// # Safety
///
/// As [`find_hash_elem`]'s, and `key` is readable for `len` bytes, unchanged during the
/// call.
unsafe extern "C" fn find_hash_long(map: *const (), cpu: u64, key: u64, len: u64) -> FoundElem {
    // SAFETY: see the function's contract: a live `Map`, only read through `&`, and `len`
    // readable bytes at `key` that nothing writes while this shared slice lives.
    let (map, key) = unsafe {
        let len = usize::try_from(len).unwrap_or(0);
        (&*map.cast::<Map>(), std::slice::from_raw_parts(key as usize as *const u8, len))
    };
    let cpu = usize::try_from(cpu).unwrap_or(usize::MAX);
    match map.lookup_ptr(key, cpu) {
        Some((loc, host)) => FoundElem { elem: u64::from(loc.elem()), host },
        None => FoundElem::NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_program::{MapSpec, MapType};

    fn ring() -> Arc<Map> {
        let spec = MapSpec {
            name: "events".into(),
            map_type: MapType::RingBuf,
            key_size: 0,
            value_size: 0,
            max_entries: 4096,
            flags: 0,
        };
        Arc::new(Map::create(&spec, 1).unwrap())
    }

    fn map(name: &str, map_type: MapType, value_size: u32, max_entries: u32) -> Arc<Map> {
        let spec =
            MapSpec { name: name.into(), map_type, key_size: 4, value_size, max_entries, flags: 0 };
        Arc::new(Map::create(&spec, 2).unwrap())
    }

    /// A guest memory of `N` stack bytes, for `map_lookup`'s key reads.
    struct Stack<const N: usize>(u64, [u8; N]);

    impl<const N: usize> GuestMemory for Stack<N> {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TrapCode> {
            let at = addr.checked_sub(self.0).ok_or(TrapCode::OutOfBounds)? as usize;
            let from = self.1.get(at..at + buf.len()).ok_or(TrapCode::OutOfBounds)?;
            buf.copy_from_slice(from);
            Ok(())
        }

        fn write(&mut self, _: u64, _: &[u8]) -> Result<(), TrapCode> {
            Err(TrapCode::ReadOnly)
        }

        fn write_context(&mut self, _: usize, _: &[u8]) -> Result<(), TrapCode> {
            Err(TrapCode::ReadOnly)
        }
    }

    /// `RunEnv::map_lookup` through the lookups resolved at `Env::new`: the addresses
    /// `lookup_elem` gives, each value's span with its map's length and writability, keys
    /// of each map's own size (a shorter memory fails the read), misses as `(0, None)`.
    #[test]
    fn map_lookup_answers_from_the_resolved_lookups() {
        let array = map("counts", MapType::Array, 12, 4);
        let hash = map("flows", MapType::Hash, 8, 8);
        let spec = MapSpec {
            name: "wide".into(),
            map_type: MapType::Hash,
            key_size: 8,
            value_size: 4,
            max_entries: 4,
            flags: 0,
        };
        let wide = Arc::new(Map::create(&spec, 2).unwrap());
        let rodata = map(".rodata", MapType::Array, 8, 1);
        hash.update(&7u32.to_ne_bytes(), &[3; 8], 0, 0).unwrap();
        wide.update(&9u64.to_ne_bytes(), &[5; 4], 0, 0).unwrap();
        let maps = vec![array, hash, rodata, wide];
        let mut env = Env::new(maps, 1);
        let handle = |i: usize| weir_program::exec::guest::map_handle(i).unwrap();
        let base = weir_program::exec::guest::STACK_BASE;
        let key = |k: u64| Stack(base, k.to_ne_bytes());
        env.begin_run();
        let cases = [(0, 3, 12, true), (1, 7, 8, true), (2, 0, 8, false), (3, 9, 4, true)];
        for (map, k, len, writable) in cases {
            let (addr, span) = env.map_lookup(handle(map), base, &key(k)).unwrap();
            let span = span.unwrap();
            assert_eq!((span.addr, span.len, span.writable), (addr, len, writable), "map {map}");
            let key_size = if map == 3 { 8 } else { 4 };
            let want = env.lookup_elem(handle(map), &k.to_ne_bytes()[..key_size]);
            assert_eq!(Some(addr), want, "map {map}");
        }
        // Misses: past the array, a key not in the hash.
        assert_eq!(env.map_lookup(handle(0), base, &key(4)), Some((0, None)));
        assert_eq!(env.map_lookup(handle(1), base, &key(8)), Some((0, None)));
        // An 8-byte key read from 4 bytes before the memory's end: the read fails.
        assert_eq!(env.map_lookup(handle(3), base + 4, &key(9)), None);
        assert_eq!(env.map_lookup(handle(4), base, &key(0)), None);
    }

    /// `RunEnv::direct_lookups`: a function for each hash map (keys of every size up to
    /// 16 bytes as words, longer ones in place; per-CPU and LRU too), none for arrays; each
    /// gives `map_lookup`'s address and span for a key found, a null host for one missing,
    /// and sees updates made after the table was taken.
    #[test]
    fn direct_lookups_answer_as_map_lookup_does() {
        let spec = |name: &str, map_type, key_size| MapSpec {
            name: name.into(),
            map_type,
            key_size,
            value_size: 12,
            max_entries: 8,
            flags: 0,
        };
        let specs = [
            spec("k1", MapType::Hash, 1),
            spec("k2", MapType::Hash, 2),
            spec("k4", MapType::PercpuHash, 4),
            spec("k8", MapType::LruHash, 8),
            spec("k12", MapType::Hash, 12),
            spec("k16", MapType::Hash, 16),
            spec("k17", MapType::Hash, 17),
            spec("k24", MapType::LruHash, 24),
            spec("k56", MapType::PercpuHash, 56),
            spec("arr", MapType::Array, 4),
        ];
        let maps: Vec<Arc<Map>> =
            specs.iter().map(|s| Arc::new(Map::create(s, 2).unwrap())).collect();
        // A key per map whose last byte (in the second word for 12 and 16 bytes, the last
        // word of a long key) tells it from its neighbour `k ^ 1`.
        let key = |size: u32, k: u8| {
            let mut key: Vec<u8> = (0..size as u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
            if let Some(last) = key.last_mut() {
                *last = k;
            }
            key
        };
        for (map, spec) in maps.iter().zip(&specs).take(specs.len() - 1) {
            map.update(&key(spec.key_size, 6), &[9; 12], 0, 1).unwrap();
        }
        let mut env = Env::new(maps.clone(), 1);
        let mut direct = vec![None];
        env.direct_lookups(&mut direct);
        assert_eq!(direct.len(), specs.len());
        let handle = |i: usize| weir_program::exec::guest::map_handle(i).unwrap();
        env.begin_run();
        for (i, spec) in specs.iter().enumerate() {
            let Some(d) = &direct[i] else {
                assert!(spec.map_type == MapType::Array, "{}", spec.name);
                continue;
            };
            assert!(spec.map_type != MapType::Array, "{}", spec.name);
            assert_eq!((d.key_size, d.value_len, d.writable), (spec.key_size, 12, true));
            let words = |k: u8| {
                let mut w = [0u8; 16];
                w[..spec.key_size as usize].copy_from_slice(&key(spec.key_size, k));
                let (lo, hi) = w.split_at(8);
                (
                    u64::from_ne_bytes(lo.try_into().unwrap()),
                    u64::from_ne_bytes(hi.try_into().unwrap()),
                )
            };
            // SAFETY: the function's own map and cpu, its `keep` held by `direct`; a long
            // key (past 16 bytes) by the address and size of `bytes`, alive for the call.
            let find = |k: u8| {
                let bytes = key(spec.key_size, k);
                let (w0, w1) = match spec.key_size {
                    0..=16 => words(k),
                    n => (bytes.as_ptr() as u64, u64::from(n)),
                };
                unsafe { (d.find)(d.map, d.cpu, w0, w1) }
            };
            let base = weir_program::exec::guest::STACK_BASE;
            let mut stack = [0u8; 64];
            stack[..spec.key_size as usize].copy_from_slice(&key(spec.key_size, 6));
            let memory = Stack(base, stack);
            let (addr, span) = env.map_lookup(handle(i), base, &memory).unwrap();
            let span = span.unwrap();
            let found = find(6);
            assert_eq!(d.base + (found.elem << d.shift), addr, "{}", spec.name);
            assert_eq!(found.host, span.host.as_ptr(), "{}", spec.name);
            // The neighbour key is missing; inserted afterwards, it is found.
            assert!(find(7).host.is_null(), "{}", spec.name);
            maps[i].update(&key(spec.key_size, 7), &[4; 12], 0, 1).unwrap();
            let added = find(7);
            assert!(!added.host.is_null() && added.elem != found.elem, "{}", spec.name);
        }
    }

    /// The `find` a `DirectLookup` takes is chosen when the environment binds the map: the
    /// table's one-word probe for a hash map of 4- or 8-byte keys neither per-CPU nor LRU,
    /// `find_hash_elem` on the map for the others (per-CPU: this worker's copy). Either
    /// gives `map_lookup`'s address and value for keys found, in chains, missing, deleted,
    /// replaced by an update and inserted again.
    #[test]
    fn one_word_maps_direct_lookups_probe_their_table() {
        let spec = |map_type, key_size| MapSpec {
            name: "m".into(),
            map_type,
            key_size,
            value_size: 8,
            max_entries: 64,
            flags: 0,
        };
        let specs = [
            (spec(MapType::Hash, 4), true),
            (spec(MapType::Hash, 8), true),
            (spec(MapType::PercpuHash, 4), false),
            (spec(MapType::LruHash, 8), false),
            (spec(MapType::LruPercpuHash, 4), false),
            (spec(MapType::Hash, 12), false),
        ];
        let maps: Vec<Arc<Map>> =
            specs.iter().map(|(s, _)| Arc::new(Map::create(s, 2).unwrap())).collect();
        let key = |size: u32, i: u64| i.to_ne_bytes().into_iter().cycle().take(size as usize);
        for (map, (spec, _)) in maps.iter().zip(&specs) {
            for i in 0..48u64 {
                let key: Vec<u8> = key(spec.key_size, i).collect();
                map.update(&key, &i.to_ne_bytes(), 0, 1).unwrap();
            }
        }
        let mut env = Env::new(maps.clone(), 1);
        let mut direct = Vec::new();
        env.direct_lookups(&mut direct);
        let handle = |i: usize| weir_program::exec::guest::map_handle(i).unwrap();
        let base = weir_program::exec::guest::STACK_BASE;
        env.begin_run();
        for (m, (spec, one_word)) in specs.iter().enumerate() {
            let what = format!("{:?}, {}-byte keys", spec.map_type, spec.key_size);
            let d = direct[m].as_ref().expect(&what);
            let probe = d.find as usize == find_one_word as FindFn as usize;
            assert_eq!(probe, *one_word, "{what}: the table's probe");
            let on_map = d.find as usize == find_hash_elem as FindFn as usize;
            assert_eq!(on_map, !one_word, "{what}: the map's find");
            assert_eq!(d.map == Arc::as_ptr(&maps[m]).cast(), !one_word, "{what}: on the map");
            let answer = |env: &mut Env, i: u64| {
                let mut stack = [0u8; 16];
                for (b, k) in stack.iter_mut().zip(key(spec.key_size, i)) {
                    *b = k;
                }
                let (w0, w1) = stack.split_at(8);
                let (w0, w1) = (
                    u64::from_ne_bytes(w0.try_into().unwrap()),
                    u64::from_ne_bytes(w1.try_into().unwrap()),
                );
                // SAFETY: the function's own map and cpu, its `keep` held by `direct`.
                let found = unsafe { (d.find)(d.map, d.cpu, w0, w1) };
                let (addr, span) = env.map_lookup(handle(m), base, &Stack(base, stack)).unwrap();
                let got = (!found.host.is_null()).then(|| d.base + (found.elem << d.shift));
                assert_eq!(got, (addr != 0).then_some(addr), "{what}: key {i}");
                assert_eq!(found.host, span.map_or(std::ptr::null_mut(), |s| s.host.as_ptr()));
                (!found.host.is_null()).then(|| {
                    let mut value = [0u8; 8];
                    env.read(addr, &mut value).unwrap();
                    u64::from_ne_bytes(value)
                })
            };
            for i in 0..64u64 {
                assert_eq!(answer(&mut env, i), (i < 48).then_some(i), "{what}: key {i}");
            }
            let key_of = |i: u64| key(spec.key_size, i).collect::<Vec<u8>>();
            maps[m].delete(&key_of(5)).unwrap();
            maps[m].update(&key_of(6), &66u64.to_ne_bytes(), 2, 1).unwrap();
            assert_eq!(answer(&mut env, 5), None, "{what}: deleted");
            assert_eq!(answer(&mut env, 6), Some(66), "{what}: updated");
            maps[m].update(&key_of(5), &55u64.to_ne_bytes(), 1, 1).unwrap();
            assert_eq!(answer(&mut env, 5), Some(55), "{what}: inserted again");
            assert_eq!(answer(&mut env, 7), Some(7), "{what}: untouched");
        }
    }

    #[test]
    fn array_and_hash_values_are_laid_out_whole() {
        let array = map("counts", MapType::Array, 12, 4);
        let percpu = map("per", MapType::PercpuArray, 8, 2);
        let hash = map("flows", MapType::Hash, 8, 8);
        let rodata = map(".rodata", MapType::Array, 8, 1);
        hash.update(&7u32.to_ne_bytes(), &[3; 8], 0, 0).unwrap();
        let mut env = Env::new(vec![array.clone(), percpu.clone(), hash.clone(), rodata], 1);
        let handle = |i: usize| weir_program::exec::guest::map_handle(i).unwrap();
        env.begin_run();
        let a0 = env.lookup_elem(handle(0), &0u32.to_ne_bytes()).unwrap();
        let a3 = env.lookup_elem(handle(0), &3u32.to_ne_bytes()).unwrap();
        assert!(env.lookup_elem(handle(0), &4u32.to_ne_bytes()).is_none());
        assert_eq!(env.lookup_elem(handle(0), &3u32.to_ne_bytes()), Some(a3));
        // Value 3 written through the window lands in the map; its last byte is reachable,
        // the byte after it (in the gap) is not.
        env.write(a3 + 4, &9u32.to_ne_bytes()).unwrap();
        assert_eq!(array.lookup(&3u32.to_ne_bytes(), 0).unwrap().load(4, 4), Some(9));
        assert!(env.read(a3 + 11, &mut [0u8; 1]).is_ok());
        assert_eq!(env.read(a3 + 12, &mut [0u8; 1]), Err(TrapCode::OutOfBounds));
        assert_eq!(env.read(a3 + 9, &mut [0u8; 4]), Err(TrapCode::OutOfBounds));
        assert!(a3 > a0 && (a3 - a0).is_multiple_of(3));
        // Per-CPU: this worker's (1) copy.
        let p1 = env.lookup_elem(handle(1), &1u32.to_ne_bytes()).unwrap();
        env.write(p1, &5u64.to_ne_bytes()).unwrap();
        assert_eq!(percpu.lookup(&1u32.to_ne_bytes(), 1).unwrap().load(0, 8), Some(5));
        assert_eq!(percpu.lookup(&1u32.to_ne_bytes(), 0).unwrap().load(0, 8), Some(0));
        // A hash value: its element's address, its bytes reachable, nothing past them, and
        // no element that was never handed out.
        let h = env.lookup_elem(handle(2), &7u32.to_ne_bytes()).unwrap();
        assert_eq!(env.lookup_elem(handle(2), &7u32.to_ne_bytes()), Some(h));
        assert!(env.lookup_elem(handle(2), &8u32.to_ne_bytes()).is_none());
        let mut got = [0u8; 8];
        env.read(h, &mut got).unwrap();
        assert_eq!(got, [3; 8]);
        assert!(env.host(h, 8, true).is_some());
        assert!(env.host(h + 1, 8, false).is_none());
        let span = env.value_span(h + 3).unwrap();
        assert_eq!((span.addr, span.len, span.writable), (h, 8, true));
        // Element 0 holds key 7; the next insert takes element 1, one pitch further.
        let pitch = 1u64 << (8u64 + GAP).next_power_of_two().trailing_zeros();
        hash.update(&8u32.to_ne_bytes(), &[4; 8], 0, 0).unwrap();
        let h8 = env.lookup_elem(handle(2), &8u32.to_ne_bytes()).unwrap();
        assert_eq!(h8, h + pitch);
        env.read(h8, &mut got).unwrap();
        assert_eq!(got, [4; 8]);
        // Global read-only data: at its static address, not writable.
        let r = env.static_addr(3).unwrap();
        assert_eq!(env.write(r, &[1]), Err(TrapCode::ReadOnly));
        assert!(env.host(r, 8, true).is_none() && env.host(r, 8, false).is_some());
        // The next run finds the same addresses: hash values are laid out by element, as
        // arrays by index (the element's memory is the map's while it lives).
        env.begin_run();
        assert_eq!(env.lookup_elem(handle(2), &7u32.to_ne_bytes()), Some(h));
        assert_eq!(env.lookup_elem(handle(0), &3u32.to_ne_bytes()), Some(a3));
    }

    #[test]
    fn per_cpu_hash_values_by_element_are_this_workers_copy() {
        let hash = map("per_flow", MapType::PercpuHash, 8, 4);
        // Both CPUs' copies: 1 on CPU 0, 2 on CPU 1.
        let mut both = 1u64.to_ne_bytes().to_vec();
        both.extend_from_slice(&2u64.to_ne_bytes());
        hash.update_all(&5u32.to_ne_bytes(), &both, 0).unwrap();
        let handle = weir_program::exec::guest::map_handle(0).unwrap();
        let mut env1 = Env::new(vec![hash.clone()], 1);
        let mut env0 = Env::new(vec![hash.clone()], 0);
        let a1 = env1.lookup_elem(handle, &5u32.to_ne_bytes()).unwrap();
        let a0 = env0.lookup_elem(handle, &5u32.to_ne_bytes()).unwrap();
        // The same element, so the same address in each worker's window.
        assert_eq!(a0, a1);
        let mut got = [0u8; 8];
        env1.read(a1, &mut got).unwrap();
        assert_eq!(u64::from_ne_bytes(got), 2);
        env0.read(a0, &mut got).unwrap();
        assert_eq!(u64::from_ne_bytes(got), 1);
        // A write through worker 1's window lands in CPU 1's copy only.
        env1.write(a1, &9u64.to_ne_bytes()).unwrap();
        assert_eq!(hash.lookup(&5u32.to_ne_bytes(), 1).unwrap().load(0, 8), Some(9));
        assert_eq!(hash.lookup(&5u32.to_ne_bytes(), 0).unwrap().load(0, 8), Some(1));
        let span = env1.value_span(a1).unwrap();
        assert_eq!((span.addr, span.len), (a1, 8));
        assert_eq!(env1.read(a1 + 8, &mut got), Err(TrapCode::OutOfBounds));
    }

    /// `begin_lent_frame` (a frame lent after another in one batch) gives the next run
    /// what `begin_packet` would of all that a run of a program that leaves the packet can
    /// change: the last run's values unreachable, the next value placed where a packet's
    /// first goes, no redirect; and keeps what such a run cannot change as the batch's
    /// `begin_packet` set it.
    #[test]
    fn a_lent_frames_begin_resets_what_a_lent_run_can_change() {
        let spec = MapSpec {
            name: "prefixes".into(),
            map_type: MapType::LpmTrie,
            key_size: 8,
            value_size: 4,
            max_entries: 8,
            flags: 1,
        };
        let trie = Arc::new(Map::create(&spec, 1).unwrap());
        let key = |prefix: u32, ip: [u8; 4]| [prefix.to_ne_bytes(), ip].concat();
        trie.update(&key(8, [10, 0, 0, 0]), &7u32.to_ne_bytes(), 0, 0).unwrap();
        trie.update(&key(16, [10, 1, 0, 0]), &9u32.to_ne_bytes(), 0, 0).unwrap();
        let handle = weir_program::exec::guest::map_handle(0).unwrap();
        let (nine, seven) = (key(32, [10, 1, 2, 3]), key(32, [10, 2, 2, 3]));
        let mut env = Env::new(vec![trie], 0);
        let base = weir_program::exec::guest::PACKET_BASE;
        let bounds = PacketBounds { hard_start: base, hard_end: base + 3520 };
        env.begin_packet(bounds);
        // A packet's first two values, placed by this run.
        let first = env.lookup_elem(handle, &nine).unwrap();
        let second = env.lookup_elem(handle, &seven).unwrap();
        assert!(first >= env.dynamic_base && second > first);
        env.redirect = Some(Redirect::Ifindex { ifindex: 3, flags: 0 });
        let value = |env: &Env, addr| {
            let mut got = [0u8; 4];
            env.read(addr, &mut got).map(|()| u32::from_ne_bytes(got))
        };
        for frame in 0..3 {
            env.end_run();
            env.begin_lent_frame();
            assert_eq!(env.redirect(), None, "frame {frame}");
            // The last run's values are gone, and the next one placed goes where a
            // packet's first does, whichever it is.
            assert_eq!(value(&env, second), Err(TrapCode::OutOfBounds), "frame {frame}");
            let got = env.lookup_elem(handle, if frame % 2 == 0 { &seven } else { &nine });
            assert_eq!(got, Some(first), "frame {frame}");
            assert_eq!(value(&env, first), Ok(if frame % 2 == 0 { 7 } else { 9 }));
            let other = env.lookup_elem(handle, if frame % 2 == 0 { &nine } else { &seven });
            assert_eq!(other, Some(second), "frame {frame}");
            env.redirect = Some(Redirect::Map { map: 0, key: frame });
        }
        // What such a run cannot change, as the batch's `begin_packet` left it.
        assert_eq!(env.packet, bounds);
        assert_eq!((env.packet_reach(), env.packet_floor()), (0, None));
        assert_eq!((env.tail_call, env.tail_calls), (None, 0));
    }

    #[test]
    fn reservations_left_at_the_end_of_a_run_are_discarded() {
        let map = ring();
        let mut env = Env::new(vec![Arc::clone(&map)], 0);
        env.begin_run();
        let kept = env.ring_reserve(&map, 8, 0).unwrap();
        let left = env.ring_reserve(&map, 16, 0).unwrap();
        assert_ne!(kept, left);
        env.write(kept, &7u64.to_ne_bytes()).unwrap();
        env.write(left, &9u64.to_ne_bytes()).unwrap();
        assert!(env.ring_finish(kept, false));
        // Submitted: no longer this run's to finish, nor to reach.
        assert!(!env.ring_finish(kept, true));
        assert_eq!(env.read(kept, &mut [0u8; 8]), Err(TrapCode::OutOfBounds));
        assert!(env.ring_reserve(&map, 8, 1).is_none(), "flags must be 0");
        env.end_run();
        let mut records = Vec::new();
        let rb = map.ring_buf().unwrap();
        assert_eq!(rb.consume(|r| records.push(r.to_vec())), 1);
        assert_eq!(records, vec![7u64.to_ne_bytes().to_vec()]);
        // Both records were consumed (the discarded one skipped): the ring is empty.
        assert_eq!(rb.query(weir_maps::BPF_RB_AVAIL_DATA), 0);
        assert!(!env.ring_finish(left, false));
    }
}
