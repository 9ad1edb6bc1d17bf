//! The run state: the one block of memory generated code and Rust share during a run, and
//! the Rust functions generated code calls (helper calls, `bpf_map_lookup_elem`'s direct
//! path and slow-path access checks).
//!
//! Generated code receives a `*mut RunState` as its only argument and reaches everything
//! through it at fixed offsets ([`offsets`]): the region table it checks every access
//! against, the saved call frames, the helper trampoline, and the fields it leaves its
//! outcome in. Nothing else crosses the boundary, so the layout below is the whole contract
//! between [`crate::codegen`] and [`crate::run`]; it is `#[repr(C)]` and its offsets are
//! taken with `offset_of!`, never written by hand.
//!
//! The region table has one [`RegionEntry`] per address window (see [`crate::guest`]). An
//! access of `size` bytes at guest address `addr` in window `w` is inside its region exactly
//! when `addr - lo_addr < bound[size]` (unsigned, wrapping): `lo_addr` is the lowest address
//! the program may touch (the region's base, or for the stack the running frame's floor),
//! and `bound = len_from_lo - size + 1` (0 when no access of that size fits). One subtraction
//! and one compare check both ends; an address below `lo_addr` wraps to a huge value.

use std::any::Any;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

use weir_program::abi::{
    helper_id, Bindings, ContextLayout, DirectLookup, GuestMemory, HelperCtx, HelperOutcome,
    RunEnv, ValueSpan,
};
use weir_program::TrapCode;

use crate::guest::{CTX, MAPS, REGION_WINDOW, WINDOWS, WINDOW_SHIFT};

/// Exit codes besides the trap codes (1-9) and 0 (the program returned).
/// The instruction budget ran out inside the block starting at the exit's pc; `remaining` is
/// how many of its instructions still fitted, which locates the trapping one.
pub(crate) const EXIT_BUDGET: u64 = 100;
/// A helper did not simply return: `helper_status` says why.
pub(crate) const EXIT_HELPER: u64 = 101;

/// `RunState::helper_status` after a helper call.
pub(crate) const HELPER_RETURNED: u64 = 0;
pub(crate) const HELPER_STOPPED: u64 = 1;
pub(crate) const HELPER_FAILED: u64 = 2;
/// `call %reg` with a value that is neither a function nor a bound helper.
pub(crate) const HELPER_UNBOUND: u64 = 3;
/// The helper panicked; the payload waits in `RunState::panic` to be resumed by Rust.
pub(crate) const HELPER_PANICKED: u64 = 4;

/// Words per call frame: r6-r9, r10 and the return-site number ([`SAVED_WORDS`]), then,
/// for a `bpf_loop` callback's frame, the callback's slot, the index of the call running,
/// the iteration count and the context argument (`codegen`'s `bpf_loop`).
pub(crate) const FRAME_WORDS: usize = 10;
/// The words every frame saves (see [`FRAME_WORDS`]).
pub(crate) const SAVED_WORDS: usize = 6;

/// One address window's region, as generated code checks it (see the module docs).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RegionEntry {
    /// Lowest guest address the program may touch in this window.
    pub lo_addr: u64,
    /// Host address of `lo_addr` (an integer: only used after a passed check).
    pub base_lo: u64,
    /// For loads of 1, 2, 4, 8 bytes: accesses with `addr - lo_addr < bound` are inside.
    pub load_bound: [u64; 4],
    /// The same for stores; 0 where stores need the slow path (the context, whose writable
    /// fields the layout decides).
    pub store_bound: [u64; 4],
    /// Host address of the window's first byte and the region's length: the slow path's view.
    pub host: u64,
    pub len: u64,
    /// Non-zero: the region is lent read-only (a batch's frame in place, `set_read_only`);
    /// its `store_bound` admits nothing and the slow path refuses every store. Generated
    /// code never reads it.
    pub read_only: u64,
    /// Pads the entry to 128 bytes, so an entry's offset is the window number shifted by 7.
    pub _pad: [u64; 3],
}

/// log2 of `size_of::<RegionEntry>()`.
pub(crate) const ENTRY_SHIFT: i64 = 7;
const _: () = assert!(std::mem::size_of::<RegionEntry>() == 1 << ENTRY_SHIFT);

/// Index of an access size in the bound arrays.
pub(crate) fn size_index(size: u8) -> usize {
    match size {
        1 => 0,
        2 => 1,
        4 => 2,
        _ => 3,
    }
}

/// The `bound` of an access of `size` bytes when `span` bytes from `lo_addr` are accessible.
pub(crate) fn bound(span: u64, size: u64) -> u64 {
    span.checked_sub(size).map_or(0, |rest| rest.wrapping_add(1))
}

impl RegionEntry {
    /// Makes this the entry of window `window` for a region at `host` of `len` bytes whose
    /// first `floor` bytes are out of reach (only the stack has a floor), writing its fields
    /// in place (a run sets a handful of words, not the 128-byte entry).
    pub(crate) fn set(&mut self, window: usize, host: u64, len: u64, floor: u64, fast: bool) {
        let window_base = (window as u64).wrapping_mul(REGION_WINDOW);
        let span = len.saturating_sub(floor);
        self.lo_addr = window_base.wrapping_add(floor);
        self.base_lo = host.wrapping_add(floor);
        // Both from the local: reading `load_bound` back right after storing it stalls
        // store forwarding (measured: a third of a helper call's own time).
        let bounds = [1, 2, 4, 8].map(|size| bound(span, size));
        self.load_bound = bounds;
        self.store_bound = if fast { bounds } else { [0; 4] };
        self.host = host;
        self.len = len;
        self.read_only = 0;
    }

    /// The entry of window `window` for `len` bytes at `host` that no store may reach: a
    /// frame lent in place by a batch (`Batch::lend`). Stores take the slow path
    /// (`store_bound` admits nothing), which refuses them (`RunState::store_target`).
    #[inline]
    pub(crate) fn set_read_only(&mut self, window: usize, host: u64, len: u64) {
        self.lo_addr = (window as u64).wrapping_mul(REGION_WINDOW);
        self.base_lo = host;
        self.load_bound = Self::bounds_of(len);
        self.store_bound = [0; 4];
        self.host = host;
        self.len = len;
        self.read_only = 1;
    }

    /// [`RegionEntry::set_read_only`] for the next frame of a lending batch: only the
    /// words that depend on the frame (its host address and length, the load bounds) when
    /// the entry is already a read-only one of `window` (issue 11: the whole entry per
    /// packet was 13 stores). Every writer that admits stores (`set`, `set_value`) also
    /// clears `read_only`, so `read_only == 1` still means `store_bound` admits nothing.
    /// Always inlined: a lent batch's per-frame loop is also compiled in the batch's crate
    /// (`JitProgram::run_batch` is generic over the batch), where `#[inline]` alone left it
    /// a call (issue 11: 20 instructions more a frame, bench/records/2026-12-01-runtime-33.txt).
    #[inline(always)]
    pub(crate) fn lend_frame(&mut self, window: usize, host: u64, len: u64) {
        if !self.lends_in(window) {
            return self.set_read_only(window, host, len);
        }
        self.relend_frame(window, host, len);
    }

    /// Whether this is a read-only entry of `window` (`set_read_only`'s, perhaps moved on
    /// by `lend_frame`): the words `relend_frame` does not write are the lent frame's.
    #[inline(always)]
    pub(crate) fn lends_in(&self, window: usize) -> bool {
        self.read_only == 1 && self.lo_addr == (window as u64).wrapping_mul(REGION_WINDOW)
    }

    /// [`RegionEntry::lend_frame`] without its test, for a caller that knows the entry
    /// `lends_in(window)`: a lent batch's steady frames, whose batch made it so and whose
    /// runs since all ended plainly (no run writes a packet entry: generated code writes
    /// only the stack's and the value's, helpers none; issue 11: the test was 4 of a lent
    /// xdp_counter frame's instructions, bench/records/2026-12-01-runtime-38.txt).
    #[inline(always)]
    pub(crate) fn relend_frame(&mut self, window: usize, host: u64, len: u64) {
        debug_assert!(self.lends_in(window));
        self.base_lo = host;
        self.load_bound = Self::bounds_of(len);
        self.host = host;
        self.len = len;
    }

    /// `bound(len, size)` for the sizes 1, 2, 4 and 8, as the bound arrays hold them: for
    /// a region of at least 8 bytes (every Ethernet frame) three subtractions, none of
    /// them saturating (issue 11: the four bounds with a saturation each were 11 of a
    /// lent frame's instructions, bench/records/2026-12-01-runtime-29.txt).
    #[inline(always)]
    fn bounds_of(len: u64) -> [u64; 4] {
        if len >= 8 {
            [len, len - 1, len - 3, len - 7]
        } else {
            [1, 2, 4, 8].map(|size| bound(len, size))
        }
    }

    /// [`RegionEntry::set`] without a floor, skipped when the entry already describes this
    /// region (the window, host address and length decide every field). Not for the stack's
    /// entry, which generated code moves on calls.
    #[inline]
    pub(crate) fn set_unless_same(&mut self, window: usize, host: u64, len: u64, fast: bool) {
        let window_base = (window as u64).wrapping_mul(REGION_WINDOW);
        if self.host != host
            || self.len != len
            || self.lo_addr != window_base
            || self.read_only != 0
        {
            self.set(window, host, len, 0, fast);
        }
    }

    /// [`RegionEntry::set`] for the stack, skipped when the entry already admits from
    /// `floor`: generated code moves the stack's entry on a call and back on the return
    /// (`set_stack_floor`, every field a function of `lo_addr` as here), so after a run
    /// that returned it stands; one that trapped inside a call left it moved, and it is
    /// set again.
    #[inline]
    pub(crate) fn set_stack_unless_same(&mut self, window: usize, host: u64, len: u64, floor: u64) {
        let lo_addr = (window as u64).wrapping_mul(REGION_WINDOW).wrapping_add(floor);
        if self.host != host
            || self.len != len
            || self.lo_addr != lo_addr
            || self.base_lo != host.wrapping_add(floor)
        {
            self.set(window, host, len, floor, true);
        }
    }

    /// The entry of a map value (see `RunState::value`): `len` bytes at guest address `addr`
    /// are host memory from `host` on. `host` and `len` stay 0: the slow paths ask the
    /// environment, never this entry, about the values window.
    pub(crate) fn set_value(&mut self, span: &ValueSpan) {
        self.lo_addr = span.addr;
        self.base_lo = span.host.as_ptr() as u64;
        let bounds = [1, 2, 4, 8].map(|size| bound(span.len, size));
        self.load_bound = bounds;
        self.store_bound = if span.writable { bounds } else { [0; 4] };
        self.host = 0;
        self.len = 0;
        // Admits stores, so not a lent entry any more: `lend_frame` trusts this flag.
        self.read_only = 0;
    }

    /// Admits nothing.
    pub(crate) fn clear(&mut self) {
        self.load_bound = [0; 4];
        self.store_bound = [0; 4];
    }

    /// The entry of window `window` for a region at `host` of `len` bytes whose first
    /// `floor` bytes are out of reach (only the stack has a floor).
    #[cfg(test)]
    pub(crate) fn new(window: usize, host: u64, len: u64, floor: u64, fast_stores: bool) -> Self {
        let mut entry = RegionEntry::default();
        entry.set(window, host, len, floor, fast_stores);
        entry
    }
}

/// Everything one run shares between Rust and generated code. Fields up to `helper_id` are
/// read or written by generated code at the offsets in [`offsets`].
#[repr(C)]
pub(crate) struct RunState<'e> {
    pub regions: [RegionEntry; WINDOWS],
    /// The map value a program reached last (a one-entry cache of the values window,
    /// whose table entry admits nothing): filled from [`RunEnv::value_span`] when a helper
    /// returns a value's address (`bpf_map_lookup_elem`) and when a slow path resolves an
    /// access to one, emptied at every helper call and run, so that value accesses after
    /// a lookup are inline. Checked by generated code only after the table refused.
    pub value: RegionEntry,
    /// Host stack address minus `STACK_BASE` (wrapping): `r10 + stack_bias` is a host address.
    pub stack_bias: u64,
    /// What legacy packet loads read: the packet if there is one, else `mem`.
    pub legacy_host: u64,
    pub legacy_len: u64,
    /// Host address of the saved frames (`FRAME_WORDS` words per frame).
    pub frames: u64,
    /// Host address of one byte per slot, 1 where `call %reg` may enter.
    pub call_targets: u64,
    /// Host addresses of [`call_helper`] and [`check_store`].
    pub helper_fn: u64,
    pub store_fn: u64,
    /// Host address of [`check_load`].
    pub load_fn: u64,
    /// Host address of [`map_lookup_fast`], which generated code calls for
    /// `bpf_map_lookup_elem` when the bindings let the environment answer it.
    pub lookup_fn: u64,
    /// The constant-blinding key (see `codegen::Translator::imm`).
    pub key: u64,
    /// Always 1: a value Cranelift cannot see is 1 (see `codegen::Translator::basic_block`).
    pub one: u64,
    /// The entry registers of a full run (`fire` passes them to the code, which takes
    /// them as arguments, not from here; a lean run passes its own).
    pub r1: u64,
    pub r2: u64,
    /// The outcome of any exit but a plain return (which gives `r0` and the budget left in
    /// registers, `code_memory::Exit`): `exit_word` packs the code (a trap code,
    /// [`EXIT_BUDGET`] or [`EXIT_HELPER`]), the access size and the pc (see
    /// `codegen::exit_word`); `exit_value` is the result or the trap's address; then the
    /// budget left and the deepest frame reached.
    pub exit_word: u64,
    pub exit_value: u64,
    pub remaining: u64,
    pub max_depth: u64,
    /// Set by [`check_store`] when it refuses: the trap code.
    pub store_code: u64,
    /// Set by [`call_helper`]: how the helper ended and its id.
    pub helper_status: u64,
    pub helper_id: u64,
    /// Host address of the batch's [`DirectSlot`]s and how many there are (0 when this
    /// run may not use them: `direct_on` false), read by generated code that calls a
    /// map's `find` itself (`codegen`'s `direct_lookup`). Set before each run.
    pub slots: u64,
    pub slot_count: u64,
    // Rust only from here.
    pub bindings: *const Bindings,
    pub ctx_layout: Option<&'static ContextLayout>,
    pub panic: Option<Box<dyn Any + Send>>,
    /// The run's environment (the map values window); lent to helpers during their call.
    pub env: Option<&'e mut dyn RunEnv>,
    /// The environment's [`DirectLookup`]s by map index, taken once per batch
    /// (`run::JitProgram::run_batch`); `direct_env` is the address of the environment they
    /// came from (0: none), and a run uses them (`direct_on`) only when its environment is
    /// that one. Each holds its map (`keep`), so a stale table is never dangling.
    pub direct: Vec<Option<DirectLookup>>,
    pub direct_env: usize,
    pub direct_on: bool,
    /// `direct` as generated code reads it (by map index), built with it once per batch.
    pub slot_table: Vec<DirectSlot>,
}

/// One map's [`DirectLookup`] laid out for generated code, which calls `find` itself for a
/// `bpf_map_lookup_elem` whose map and key it knows when compiling (a key of 4 or 8 bytes
/// on the running frame): the kernel's `map_gen_lookup`, with the walk left to the map.
/// `key_size` 0: no direct lookup for this map (the trampoline then answers). The bounds
/// are the value entry's for the map's `value_len` ([`RegionEntry::set_value`]'s), worked
/// out once per batch so that a found value costs its entry's stores only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DirectSlot {
    pub find: u64,
    pub map: u64,
    pub cpu: u64,
    pub key_size: u64,
    pub base: u64,
    pub shift: u64,
    pub load_bound: [u64; 4],
    pub store_bound: [u64; 4],
}

impl DirectSlot {
    /// The slot of `direct` (the empty slot for `None` or a key of another size: those
    /// maps' lookups stay with the trampoline, which reads any key size).
    pub(crate) fn of(direct: Option<&DirectLookup>) -> DirectSlot {
        let Some(d) = direct.filter(|d| matches!(d.key_size, 4 | 8)) else {
            return DirectSlot::default();
        };
        let bounds = [1, 2, 4, 8].map(|size| bound(d.value_len, size));
        DirectSlot {
            find: d.find as usize as u64,
            map: d.map as u64,
            cpu: d.cpu,
            key_size: u64::from(d.key_size),
            base: d.base,
            shift: u64::from(d.shift),
            load_bound: bounds,
            store_bound: if d.writable { bounds } else { [0; 4] },
        }
    }
}

/// Byte offsets of the fields generated code touches.
pub(crate) mod offsets {
    use super::{offset_of, RegionEntry, RunState};

    const fn field(offset: usize) -> i32 {
        assert!(offset < i32::MAX as usize);
        offset as i32
    }

    pub const REGIONS: i32 = field(offset_of!(RunState, regions));
    pub const VALUE: i32 = field(offset_of!(RunState, value));
    pub const LO_ADDR: i32 = field(offset_of!(RegionEntry, lo_addr));
    pub const BASE_LO: i32 = field(offset_of!(RegionEntry, base_lo));
    pub const LOAD_BOUND: i32 = field(offset_of!(RegionEntry, load_bound));
    pub const STORE_BOUND: i32 = field(offset_of!(RegionEntry, store_bound));
    pub const STACK_BIAS: i32 = field(offset_of!(RunState, stack_bias));
    pub const LEGACY_HOST: i32 = field(offset_of!(RunState, legacy_host));
    pub const LEGACY_LEN: i32 = field(offset_of!(RunState, legacy_len));
    pub const FRAMES: i32 = field(offset_of!(RunState, frames));
    pub const CALL_TARGETS: i32 = field(offset_of!(RunState, call_targets));
    pub const HELPER_FN: i32 = field(offset_of!(RunState, helper_fn));
    pub const STORE_FN: i32 = field(offset_of!(RunState, store_fn));
    pub const LOAD_FN: i32 = field(offset_of!(RunState, load_fn));
    pub const LOOKUP_FN: i32 = field(offset_of!(RunState, lookup_fn));
    pub const KEY: i32 = field(offset_of!(RunState, key));
    pub const ONE: i32 = field(offset_of!(RunState, one));
    pub const EXIT_WORD: i32 = field(offset_of!(RunState, exit_word));
    pub const EXIT_VALUE: i32 = field(offset_of!(RunState, exit_value));
    pub const REMAINING: i32 = field(offset_of!(RunState, remaining));
    pub const MAX_DEPTH: i32 = field(offset_of!(RunState, max_depth));
    pub const STORE_CODE: i32 = field(offset_of!(RunState, store_code));
    pub const HELPER_STATUS: i32 = field(offset_of!(RunState, helper_status));
    pub const SLOTS: i32 = field(offset_of!(RunState, slots));
    pub const SLOT_COUNT: i32 = field(offset_of!(RunState, slot_count));

    /// A [`super::DirectSlot`]'s fields, from the slot's address.
    pub mod slot {
        use super::super::DirectSlot;
        use super::{field, offset_of};

        pub const FIND: i32 = field(offset_of!(DirectSlot, find));
        pub const MAP: i32 = field(offset_of!(DirectSlot, map));
        pub const CPU: i32 = field(offset_of!(DirectSlot, cpu));
        pub const KEY_SIZE: i32 = field(offset_of!(DirectSlot, key_size));
        pub const BASE: i32 = field(offset_of!(DirectSlot, base));
        pub const SHIFT: i32 = field(offset_of!(DirectSlot, shift));
        pub const LOAD_BOUND: i32 = field(offset_of!(DirectSlot, load_bound));
        pub const STORE_BOUND: i32 = field(offset_of!(DirectSlot, store_bound));
    }

    /// Offset of region `window`'s entry.
    pub const fn region(window: usize) -> i32 {
        REGIONS + field(window * std::mem::size_of::<RegionEntry>())
    }
}

impl RunState<'_> {
    /// A state with every region entry empty and the trampolines' addresses in place; a
    /// run fills in the rest (`run::JitProgram::run_stats`).
    pub(crate) fn empty() -> Self {
        RunState {
            regions: [RegionEntry::default(); WINDOWS],
            value: RegionEntry::default(),
            stack_bias: 0,
            legacy_host: 0,
            legacy_len: 0,
            frames: 0,
            call_targets: 0,
            helper_fn: call_helper as *const () as u64,
            store_fn: check_store as *const () as u64,
            load_fn: check_load as *const () as u64,
            lookup_fn: map_lookup_fast as *const () as u64,
            key: 0,
            one: 1,
            r1: 0,
            r2: 0,
            exit_word: 0,
            exit_value: 0,
            remaining: 0,
            max_depth: 0,
            store_code: 0,
            helper_status: 0,
            helper_id: 0,
            slots: 0,
            slot_count: 0,
            bindings: std::ptr::null(),
            ctx_layout: None,
            panic: None,
            env: None,
            direct: Vec::new(),
            direct_env: 0,
            direct_on: false,
            slot_table: Vec::new(),
        }
    }

    /// `bpf_map_lookup_elem(handle, key)` through the map's [`DirectLookup`], when this run
    /// may use the batch's table and the map has one: the key's words read straight from
    /// its region (`None` when the key is not readable there, e.g. in the values window:
    /// the environment's path then reads it), the map probed with no environment in
    /// between, the value's span kept at hand as `lookup_through_env` keeps it. The same
    /// answer as [`RunEnv::map_lookup`]'s (`DirectLookup`'s contract).
    #[inline(always)]
    fn lookup_direct(&mut self, handle: u64, key: u64) -> Option<u64> {
        if !self.direct_on {
            return None;
        }
        let direct = self.direct.get(weir_program::exec::guest::map_index(handle)?)?.as_ref()?;
        let (w0, w1) = if direct.key_size > 16 {
            // A long key in place, by host address and size (`DirectLookup`'s contract):
            // readable there (`load_target`) and unchanged, as in `key_words`.
            let size = u64::from(direct.key_size);
            (self.load_target(key, size).ok()?, size)
        } else {
            self.key_words(key, direct.key_size)?
        };
        // SAFETY: `find` with the map and cpu its `DirectLookup` gives, whose `keep` this
        // table holds for the call; a long key's bytes admitted by `load_target` above.
        let found = unsafe { (direct.find)(direct.map, direct.cpu, w0, w1) };
        self.helper_id = u64::from(helper_id::MAP_LOOKUP_ELEM);
        self.helper_status = HELPER_RETURNED;
        let Some(host) = std::ptr::NonNull::new(found.host) else {
            self.value.clear();
            return Some(0);
        };
        let addr = direct.base.wrapping_add(found.elem.wrapping_shl(direct.shift));
        let (len, writable) = (direct.value_len, direct.writable);
        self.value.set_value(&ValueSpan { addr, host, len, writable });
        Some(addr)
    }

    /// A map key of `size` bytes (at most 16) at guest address `key`, as the two
    /// zero-padded native-order words an element stores (`DirectLookup`); `None` unless the
    /// region table admits it (`load_target`: the values window's entry admits nothing).
    #[inline(always)]
    fn key_words(&self, key: u64, size: u32) -> Option<(u64, u64)> {
        let host = self.load_target(key, u64::from(size)).ok()? as *const u8;
        let mut bytes = [0u8; 16];
        let size = usize::try_from(size).ok().filter(|&size| size <= 16)?;
        // SAFETY: `load_target` admitted `size` bytes at `host` (as in `read`: a region's
        // slice the run borrows, untouched while generated code waits in this call); the
        // common sizes as fixed-size reads, the rest (at most 16 bytes) copied into the
        // local buffer.
        unsafe {
            match size {
                4 => return Some((u64::from(std::ptr::read_unaligned(host.cast::<u32>())), 0)),
                8 => return Some((std::ptr::read_unaligned(host.cast::<u64>()), 0)),
                _ => std::ptr::copy_nonoverlapping(host, bytes.as_mut_ptr(), size),
            }
        }
        let (lo, hi) = bytes.split_at(8);
        Some((u64::from_ne_bytes(lo.try_into().ok()?), u64::from_ne_bytes(hi.try_into().ok()?)))
    }

    /// Where a load of `size` bytes at `addr` reads on the host, or `OutOfBounds`: the
    /// interpreter's rules (the region's bytes, above the running frame's floor).
    fn load_target(&self, addr: u64, size: u64) -> Result<u64, TrapCode> {
        let window = usize::try_from(addr >> WINDOW_SHIFT).unwrap_or(usize::MAX);
        let index = window.min(WINDOWS - 1);
        let entry = self.regions.get(index).ok_or(TrapCode::OutOfBounds)?;
        let offset = addr & (REGION_WINDOW - 1);
        let floor = entry.lo_addr & (REGION_WINDOW - 1);
        let end = offset.checked_add(size).ok_or(TrapCode::OutOfBounds)?;
        if window != index || end > entry.len || offset < floor {
            return Err(TrapCode::OutOfBounds);
        }
        Ok(entry.host.wrapping_add(offset))
    }

    /// Where a store of `size` bytes at `addr` lands on the host, or the trap it raises: the
    /// interpreter's rules exactly (out of bounds first, then the context's writable fields).
    fn store_target(&self, addr: u64, size: u64) -> Result<u64, TrapCode> {
        let host = self.load_target(addr, size)?;
        // `load_target` admitted the window, so it indexes an entry.
        let window = (addr >> WINDOW_SHIFT) as usize;
        if self.regions.get(window).is_some_and(|entry| entry.read_only != 0) {
            return Err(TrapCode::ReadOnly);
        }
        let offset = addr & (REGION_WINDOW - 1);
        if addr >> WINDOW_SHIFT == CTX as u64 && !self.ctx_writable(offset, offset + size) {
            return Err(TrapCode::ReadOnly);
        }
        Ok(host)
    }

    /// Whether `[start, end)` of the context lies inside one writable field.
    fn ctx_writable(&self, start: u64, end: u64) -> bool {
        let Some(layout) = self.ctx_layout else {
            return false;
        };
        layout.fields.iter().any(|field| {
            let field_start = u64::from(field.offset);
            let field_end = field_start.saturating_add(u64::from(field.size));
            field.writable && start >= field_start && end <= field_end
        })
    }
}

/// Guest memory for helpers: the same checks as generated code's accesses.
impl GuestMemory for RunState<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TrapCode> {
        if addr >> WINDOW_SHIFT == MAPS as u64 {
            return self.env.as_ref().ok_or(TrapCode::OutOfBounds)?.read(addr, buf);
        }
        let host = self.load_target(addr, buf.len() as u64)?;
        // SAFETY: `load_target` admitted `buf.len()` bytes at `host`: inside a region's slice,
        // which the run borrows for its whole duration and nothing else touches while
        // generated code is suspended in this helper call; `buf` is the helper's own memory,
        // never a guest region, so the two do not overlap. The common map keys' sizes as
        // fixed-size copies (a variable-length one is a `memcpy` call, a tenth of a map
        // lookup's cost here).
        unsafe {
            let from = host as *const u8;
            match <&mut [u8; 4]>::try_from(&mut *buf) {
                Ok(word) => *word = std::ptr::read_unaligned(from.cast::<[u8; 4]>()),
                Err(_) => match <&mut [u8; 8]>::try_from(&mut *buf) {
                    Ok(word) => *word = std::ptr::read_unaligned(from.cast::<[u8; 8]>()),
                    Err(_) => std::ptr::copy_nonoverlapping(from, buf.as_mut_ptr(), buf.len()),
                },
            }
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), TrapCode> {
        if addr >> WINDOW_SHIFT == MAPS as u64 {
            return self.env.as_mut().ok_or(TrapCode::OutOfBounds)?.write(addr, bytes);
        }
        let host = self.store_target(addr, bytes.len() as u64)?;
        // SAFETY: as in `read`; `store_target` also applied the context's writable fields.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), host as *mut u8, bytes.len()) };
        Ok(())
    }

    fn write_context(&mut self, offset: usize, bytes: &[u8]) -> Result<(), TrapCode> {
        let entry = self.regions.get(CTX).ok_or(TrapCode::OutOfBounds)?;
        let end = (offset as u64).checked_add(bytes.len() as u64).ok_or(TrapCode::OutOfBounds)?;
        if end > entry.len {
            return Err(TrapCode::OutOfBounds);
        }
        let host = entry.host.wrapping_add(offset as u64);
        // SAFETY: `[offset, end)` lies inside the context's slice (checked just above),
        // which the run borrows whole and nothing else touches while generated code is
        // suspended in this helper call; `bytes` is the helper's own memory.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), host as *mut u8, bytes.len()) };
        Ok(())
    }
}

/// The host address the environment gives `size` bytes at `addr` in the map values window.
fn env_host(state: &mut RunState<'_>, addr: u64, size: u64, write: bool) -> Result<u64, TrapCode> {
    if addr >> WINDOW_SHIFT != MAPS as u64 {
        return Err(TrapCode::OutOfBounds);
    }
    let env = state.env.as_mut().ok_or(TrapCode::OutOfBounds)?;
    match env.host(addr, size, write) {
        Some(host) => {
            // The next accesses to this value skip the call (see `RunState::value`).
            match env.value_span(addr) {
                Some(span) => state.value.set_value(&span),
                None => state.value.clear(),
            }
            Ok(host.as_ptr() as u64)
        }
        // Refused: the environment's own check names the trap (read-only or out of bounds).
        None if write => {
            let mut probe = vec![0u8; usize::try_from(size).unwrap_or(0)];
            env.read(addr, &mut probe)?;
            Err(TrapCode::ReadOnly)
        }
        None => Err(TrapCode::OutOfBounds),
    }
}

/// The slow path of a load whose fast check failed: the host address to read, or 0 with
/// the trap code in `store_code` (the map values window is the environment's).
pub(crate) extern "C" fn check_load(state: *mut RunState<'_>, addr: u64, size: u64) -> u64 {
    // SAFETY: as in `check_store`.
    let state = unsafe { &mut *state };
    match state.load_target(addr, size).or_else(|_| env_host(state, addr, size, false)) {
        Ok(host) => host,
        Err(code) => {
            state.store_code = u64::from(code.code());
            0
        }
    }
}

/// The slow path of a store (every store to the context, and every store whose fast check
/// failed): returns the host address to write, or 0 with the trap code in `store_code`.
pub(crate) extern "C" fn check_store(state: *mut RunState<'_>, addr: u64, size: u64) -> u64 {
    // SAFETY: generated code passes the `RunState` pointer it was called with, which
    // `run::JitProgram::run_stats` made from a live `&mut RunState` it does not touch until
    // the generated code returns; generated code itself is suspended during this call, so
    // this is the only reference to the state.
    let state = unsafe { &mut *state };
    let target = match state.store_target(addr, size) {
        Err(TrapCode::OutOfBounds) => env_host(state, addr, size, true),
        other => other,
    };
    match target {
        Ok(host) => host,
        Err(code) => {
            state.store_code = u64::from(code.code());
            0
        }
    }
}

/// `bpf_map_lookup_elem(handle, key)` answered by the environment (`RunEnv::map_lookup`,
/// which the bindings say is the bound helper's equal): one call reaching the map, no
/// helper context and no downcast; the value's span kept at hand for the accesses that
/// follow. `None` when the environment declines (the helper then runs). Not wrapped in
/// `catch_unwind`: `RunEnv::map_lookup` must not panic, and if one did, the panic would
/// stop at `call_helper`'s `extern "C"` boundary (an abort, never an unwind into
/// generated code).
fn lookup_through_env(state: &mut RunState<'_>, handle: u64, key: u64) -> Option<u64> {
    let env = state.env.take()?;
    let answer = env.map_lookup(handle, key, &*state);
    state.env = Some(env);
    let (value, span) = answer?;
    match span {
        Some(span) => state.value.set_value(&span),
        None => state.value.clear(),
    }
    state.helper_status = HELPER_RETURNED;
    Some(value)
}

/// `bpf_map_lookup_elem` (`id` 1, bound so that the environment answers it,
/// `Bindings::env_map_lookup`): through the map's [`DirectLookup`] when the run has one
/// (`RunState::lookup_direct`), else [`call_helper`]. Called by generated code as
/// `call_helper` is, with the same arguments; cannot panic on the direct path (no
/// indexing, `unwrap` or division there, nor in the maps' lock-free lookup).
#[allow(clippy::too_many_arguments)] // the C ABI call generated code makes: id and r1-r5
pub(crate) extern "C" fn map_lookup_fast(
    state: *mut RunState<'_>,
    id: u64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
) -> u64 {
    // SAFETY: as in `check_store`: the pointer comes from a live, otherwise unused
    // `&mut RunState`; this borrow ends before `call_helper` takes its own.
    let run = unsafe { &mut *state };
    if let Some(value) = run.lookup_direct(a1, a2) {
        return value;
    }
    call_helper(state, id, a1, a2, a3, a4, a5)
}

/// Calls the helper bound to `id` with r1-r5: returns its r0 (or its stop value) and leaves
/// how it ended in `helper_status`. Never unwinds into generated code: a panic is caught
/// and handed back to Rust, which resumes it after generated code has returned.
#[allow(clippy::too_many_arguments)] // the C ABI call generated code makes: id and r1-r5
pub(crate) extern "C" fn call_helper(
    state: *mut RunState<'_>,
    id: u64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
) -> u64 {
    // SAFETY: as in `check_store`: the pointer comes from a live, otherwise unused
    // `&mut RunState`. `bindings` points at the `Bindings` of the `JitProgram` being run,
    // which the caller of the generated code borrows for the whole run.
    let (state, bindings) = unsafe {
        let state = &mut *state;
        let bindings = &*state.bindings;
        (state, bindings)
    };
    state.helper_id = id;
    if id == u64::from(helper_id::MAP_LOOKUP_ELEM) && bindings.env_map_lookup() {
        if let Some(value) = lookup_through_env(state, a1, a2) {
            return value;
        }
    }
    let Some(helper) = u32::try_from(id).ok().and_then(|id| bindings.helper(id)) else {
        state.helper_status = HELPER_UNBOUND;
        return 0;
    };
    let func = helper.func;
    let args = [a1, a2, a3, a4, a5];
    let prog_type = bindings.prog_type;
    let mut env = state.env.take();
    let called = catch_unwind(AssertUnwindSafe(|| {
        let lent: Option<&mut dyn RunEnv> = match &mut env {
            Some(env) => Some(&mut **env),
            None => None,
        };
        func(&mut HelperCtx::new(&mut *state, prog_type).with_env(lent), &args)
    }));
    // The helper may have ended the value the cache held (a ring buffer sample submitted);
    // a value's address it returns is most likely accessed next.
    state.value.clear();
    if let (Ok(HelperOutcome::Return(value)), Some(env)) = (&called, env.as_mut()) {
        if *value >> WINDOW_SHIFT == MAPS as u64 {
            if let Some(span) = env.value_span(*value) {
                state.value.set_value(&span);
            }
        }
    }
    state.env = env;
    match called {
        Ok(HelperOutcome::Return(value)) => {
            state.helper_status = HELPER_RETURNED;
            value
        }
        Ok(HelperOutcome::Stop(value)) => {
            state.helper_status = HELPER_STOPPED;
            value
        }
        Ok(HelperOutcome::Fail) => {
            state.helper_status = HELPER_FAILED;
            0
        }
        Err(payload) => {
            state.panic = Some(payload);
            state.helper_status = HELPER_PANICKED;
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_refuse_what_does_not_fit() {
        assert_eq!(bound(0, 1), 0);
        assert_eq!(bound(3, 4), 0);
        assert_eq!(bound(4, 4), 1);
        assert_eq!(bound(512, 8), 505);
    }

    /// A lent frame's load bounds, by `lend_frame` after a frame of another length and by
    /// `set_read_only` afresh, are `bound(len, size)` for every size: lengths around the
    /// sizes (0 to 20), a full-size frame and the window's largest.
    #[test]
    fn lent_frames_bounds_are_each_sizes_bound() {
        let lens = (0..=20).chain([1514, REGION_WINDOW - 1, REGION_WINDOW]);
        for (before, len) in lens.clone().flat_map(|a| lens.clone().map(move |b| (a, b))) {
            let want = [1, 2, 4, 8].map(|size| bound(len, size));
            let mut lent = RegionEntry::default();
            lent.set_read_only(2, 0x1000, before);
            lent.lend_frame(2, 0x2000, len);
            assert_eq!(lent.load_bound, want, "len {len} after {before}");
            assert_eq!((lent.store_bound, lent.base_lo, lent.len), ([0; 4], 0x2000, len));
            let mut fresh = RegionEntry::default();
            fresh.set_read_only(2, 0x2000, len);
            assert_eq!(fresh.load_bound, want, "len {len}");
        }
    }

    /// `relend_frame` on an entry that `lends_in` the window (after `set_read_only`, or
    /// after `lend_frame` of another frame) leaves the entry `set_read_only` makes for the
    /// frame, word for word; `lends_in` holds only for a read-only entry of that window.
    #[test]
    fn relent_frames_are_the_read_only_entry_of_the_frame() {
        let words = |e: &RegionEntry| {
            (e.lo_addr, e.base_lo, e.load_bound, e.store_bound, e.host, e.len, e.read_only)
        };
        let lens = (0..=20).chain([1514, REGION_WINDOW]);
        for (before, len) in lens.clone().flat_map(|a| lens.clone().map(move |b| (a, b))) {
            let mut fresh = RegionEntry::default();
            fresh.set_read_only(2, 0x2000 + len, len);
            let mut lent = RegionEntry::default();
            lent.set_read_only(2, 0x1000, before);
            assert!(lent.lends_in(2) && !lent.lends_in(3));
            lent.relend_frame(2, 0x2000 + len, len);
            assert_eq!(words(&lent), words(&fresh), "len {len} after {before}");
            lent.lend_frame(2, 0x3000, before);
            lent.relend_frame(2, 0x2000 + len, len);
            assert_eq!(words(&lent), words(&fresh), "len {len} after a lend of {before}");
        }
        let mut stores = RegionEntry::default();
        stores.set(2, 0x1000, 64, 0, true);
        assert!(!stores.lends_in(2));
        let mut value = RegionEntry::default();
        value.set_read_only(2, 0x1000, 64);
        let host = std::ptr::NonNull::dangling();
        value.set_value(&ValueSpan { addr: 2 * REGION_WINDOW, host, len: 8, writable: false });
        assert!(!value.lends_in(2), "set_value admits stores' way: not a lent entry");
    }

    #[test]
    fn entries_accept_exactly_their_bytes() {
        let e = RegionEntry::new(4, 0x1000, 16, 0, true);
        let inside =
            |addr: u64, size: u8| addr.wrapping_sub(e.lo_addr) < e.load_bound[size_index(size)];
        assert!(inside(0x4000_0000, 8));
        assert!(inside(0x4000_0008, 8));
        assert!(!inside(0x4000_0009, 8));
        assert!(!inside(0x3fff_ffff, 1));
        assert!(inside(0x4000_000f, 1));
        assert!(!inside(0x4000_0010, 1));
        let stack = RegionEntry::new(1, 0x1000, 64, 32, true);
        let inside = |addr: u64| addr.wrapping_sub(stack.lo_addr) < stack.load_bound[0];
        assert!(!inside(0x1000_001f));
        assert!(inside(0x1000_0020));
        assert!(inside(0x1000_003f));
        assert!(!inside(0x1000_0040));
    }
}
