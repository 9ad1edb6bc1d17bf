//! The run environment: maps, the map values window, and a run's requests.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

use weir_maps::{Map, OwnedValue};
use weir_program::abi::RunEnv;
use weir_program::exec::guest::{MAPS_BASE, REGION_WINDOW};
use weir_program::TrapCode;

/// Bytes left free between two values, so that running off one value never lands in the
/// next (the access traps instead).
const GAP: u64 = 64;

/// One value a program can reach, at `addr` in the map values window.
#[derive(Debug)]
struct Slot {
    addr: u64,
    value: OwnedValue,
    writable: bool,
}

impl Slot {
    /// The offset of `[addr, addr + len)` in this value, if it lies inside.
    fn offset(&self, addr: u64, len: u64) -> Option<usize> {
        let offset = addr.checked_sub(self.addr)?;
        let end = offset.checked_add(len)?;
        (end <= self.value.len() as u64).then_some(offset as usize)
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
    statics: Vec<Slot>,
    /// Global data addresses by map index.
    static_addr: Vec<Option<u64>>,
    dynamic: Vec<Slot>,
    dynamic_base: u64,
    next: u64,
    rng: u64,
    origin: Instant,
    /// Set by `bpf_xdp_adjust_*`'s runner before each run.
    pub(crate) packet: PacketBounds,
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
        let mut statics = Vec::new();
        let mut static_addr = Vec::with_capacity(maps.len());
        let mut next = MAPS_BASE;
        for map in &maps {
            let name = map.spec().name.as_str();
            let global = name.starts_with('.') && map.spec().max_entries == 1;
            let value = if global { map.lookup_owned(&0u32.to_ne_bytes(), cpu) } else { None };
            match value {
                Some(value) => {
                    let addr = next;
                    next = next.saturating_add(value.len() as u64).next_multiple_of(8) + GAP;
                    let writable = !name.starts_with(".rodata");
                    statics.push(Slot { addr, value, writable });
                    static_addr.push(Some(addr));
                }
                None => static_addr.push(None),
            }
        }
        Env {
            maps,
            cpu,
            statics,
            static_addr,
            dynamic: Vec::new(),
            dynamic_base: next,
            next,
            rng: 0x5745_4952_5f52_4e47,
            origin: Instant::now(),
            packet: PacketBounds::default(),
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
    pub fn begin_packet(&mut self, packet: PacketBounds) {
        self.begin_run();
        self.packet = packet;
        self.tail_calls = 0;
        self.redirect = None;
    }

    /// Starts one program's run (also of a tail-called program): lookups made by an
    /// earlier run are forgotten.
    pub fn begin_run(&mut self) {
        self.end_run();
        self.dynamic.clear();
        self.next = self.dynamic_base;
        self.tail_call = None;
    }

    /// Ends one program's run (also a trapped one): the ring buffer records it reserved
    /// and neither submitted nor discarded are discarded (the kernel's verifier refuses a
    /// program that can exit, or tail-call, holding one).
    pub fn end_run(&mut self) {
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
        let Some(addr) = self.place(value, true) else {
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
        self.dynamic.retain(|s| s.addr != addr);
        true
    }

    /// The program a successful `bpf_tail_call` asked for, taken.
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
    /// (no such map or element, or the values window full). The map is borrowed, not
    /// cloned, for the lookup: one reference count fewer per call.
    pub(crate) fn lookup_elem(&mut self, handle: u64, key: &[u8]) -> Option<u64> {
        let (_, map) = self.map(handle)?;
        let writable = !map.spec().name.starts_with(".rodata");
        let value = map.lookup_owned(key, self.cpu)?;
        self.place(value, writable)
    }

    /// Gives `value` an address for this run (the one it already has, if any); `None` when
    /// the window is full.
    pub(crate) fn place(&mut self, value: OwnedValue, writable: bool) -> Option<u64> {
        let ptr = value.get().as_ptr();
        let known =
            self.statics.iter().chain(&self.dynamic).find(|s| s.value.get().as_ptr() == ptr);
        if let Some(slot) = known {
            return Some(slot.addr);
        }
        let addr = self.next;
        let end = addr.checked_add(value.len() as u64)?;
        if end > MAPS_BASE + REGION_WINDOW {
            return None;
        }
        self.next = end.next_multiple_of(8).saturating_add(GAP);
        self.dynamic.push(Slot { addr, value, writable });
        Some(addr)
    }

    fn slot(&self, addr: u64, len: u64) -> Option<(&Slot, usize)> {
        self.statics
            .iter()
            .chain(&self.dynamic)
            .find_map(|s| s.offset(addr, len).map(|offset| (s, offset)))
    }
}

// SAFETY: `host` returns addresses inside values the environment keeps alive in its slots
// (`OwnedValue` holds the map or element); static slots live as long as the environment,
// dynamic ones until the next `begin_run`, which the runner calls only between runs. Values
// are 8-byte aligned atomic words that weir-maps only ever accesses atomically.
unsafe impl RunEnv for Env {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TrapCode> {
        let (slot, offset) = self.slot(addr, buf.len() as u64).ok_or(TrapCode::OutOfBounds)?;
        if slot.value.get().read(offset, buf) {
            Ok(())
        } else {
            Err(TrapCode::OutOfBounds)
        }
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), TrapCode> {
        let (slot, offset) = self.slot(addr, bytes.len() as u64).ok_or(TrapCode::OutOfBounds)?;
        if !slot.writable {
            return Err(TrapCode::ReadOnly);
        }
        if slot.value.get().write(offset, bytes) {
            Ok(())
        } else {
            Err(TrapCode::OutOfBounds)
        }
    }

    fn host(&mut self, addr: u64, len: u64, write: bool) -> Option<NonNull<u8>> {
        let (slot, offset) = self.slot(addr, len)?;
        if write && !slot.writable {
            return None;
        }
        let base = slot.value.get().as_ptr();
        NonNull::new(base.wrapping_add(offset))
    }

    fn update(
        &mut self,
        addr: u64,
        len: usize,
        update: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, TrapCode> {
        let (slot, offset) = self.slot(addr, len as u64).ok_or(TrapCode::OutOfBounds)?;
        if !slot.writable {
            return Err(TrapCode::ReadOnly);
        }
        let value = slot.value.get();
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

    fn as_any(&mut self) -> &mut dyn Any {
        self
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
