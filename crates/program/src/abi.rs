//! The application binary interface between programs, front ends and engines: helper ids
//! and signatures, the [`HelperCtx`] a helper is called with, context layouts, and the
//! plain-data [`Bindings`] through which helpers reach an engine (engines never see the
//! runtime crate).
//!
//! **Adding a helper** is one [`Helper`] value (an id, a name and a [`HelperFn`]) added to
//! the [`Bindings`] a program runs with, plus its signature in [`KERNEL_HELPERS`] if it is a
//! kernel helper. A helper reaches guest memory through [`HelperCtx`] (every access checked
//! by the running engine, with the program's own rules) and learns the program type there;
//! what later helpers need from the runtime (the map table) is added to `HelperCtx`, so no
//! helper signature changes.

use std::any::Any;
use std::ptr::NonNull;

use crate::exec::guest;
use crate::{ProgType, TrapCode};

/// Kernel helper ids (`BPF_FUNC_*`) that weir knows by name.
pub mod helper_id {
    pub const MAP_LOOKUP_ELEM: u32 = 1;
    pub const MAP_UPDATE_ELEM: u32 = 2;
    pub const MAP_DELETE_ELEM: u32 = 3;
    pub const PROBE_READ: u32 = 4;
    pub const KTIME_GET_NS: u32 = 5;
    pub const TRACE_PRINTK: u32 = 6;
    pub const GET_PRANDOM_U32: u32 = 7;
    pub const GET_SMP_PROCESSOR_ID: u32 = 8;
    pub const SKB_LOAD_BYTES: u32 = 26;
    pub const CSUM_DIFF: u32 = 28;
    pub const XDP_ADJUST_HEAD: u32 = 44;
    pub const XDP_ADJUST_META: u32 = 54;
    pub const XDP_ADJUST_TAIL: u32 = 65;
    pub const REDIRECT_MAP: u32 = 51;
    /// The conformance suites' "unwind" helper: returns its argument and stops the program
    /// when that argument is 0. It shares id 5 with `ktime_get_ns`; which one a run gets is
    /// the caller's choice of [`super::Bindings`].
    pub const CONFORMANCE_UNWIND: u32 = 5;
    /// `bpf_loop`: run by the engines themselves, not by [`super::Bindings`], since it calls
    /// back into the program ([`super::bpf_loop`]).
    pub const LOOP: u32 = 181;
}

/// `bpf_loop(nr_loops, callback, ctx, flags)` as the kernel runs it (kernel/bpf/bpf_iter.c):
/// `flags` other than 0 is `-EINVAL`, more than [`bpf_loop::MAX_LOOPS`] iterations
/// `-E2BIG`; otherwise `callback(i, ctx, 0, 0, 0)` for `i` in `0..nr_loops` (32 bits), and
/// a non-zero return stops after `i + 1` calls; the result is the number of calls. The
/// engines run the callback (a function address, `lddw func`) as a local call each time;
/// this module holds what they share.
pub mod bpf_loop {
    /// `BPF_MAX_LOOPS`.
    pub const MAX_LOOPS: u64 = 8 * 1024 * 1024;
    /// `-EINVAL` and `-E2BIG` as r0 holds them.
    pub const EINVAL: u64 = (-22i64) as u64;
    pub const E2BIG: u64 = (-7i64) as u64;

    /// The iteration count from r1 and r4, or the result when no callback runs at all (an
    /// error, or 0 iterations).
    pub fn count(r1: u64, r4: u64) -> Result<u64, u64> {
        let count = r1 & 0xffff_ffff;
        match () {
            _ if r4 != 0 => Err(EINVAL),
            _ if count > MAX_LOOPS => Err(E2BIG),
            _ if count == 0 => Err(0),
            _ => Ok(count),
        }
    }
}

/// The kind of value a helper argument or result is: the kernel's `enum bpf_arg_type` and
/// `enum bpf_return_type` (include/linux/bpf.h), for the verifier and for printing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// Argument: any initialized value (`ARG_ANYTHING`). Result: an integer
    /// (`RET_INTEGER`).
    Scalar,
    /// The program's context, unmodified (`ARG_PTR_TO_CTX`).
    Context,
    /// A map, from `lddw map_fd`/`map_idx` (`ARG_CONST_MAP_PTR`).
    MapPtr,
    /// Readable memory of the key size of the map in the previous argument
    /// (`ARG_PTR_TO_MAP_KEY`).
    MapKey,
    /// Readable memory of the value size of the map (`ARG_PTR_TO_MAP_VALUE`).
    MapValue,
    /// Memory of the map's value size the helper writes (`ARG_PTR_TO_MAP_VALUE | MEM_UNINIT`).
    UninitMapValue,
    /// Readable memory whose size is the next argument (`ARG_PTR_TO_MEM | MEM_RDONLY`).
    PtrToMem,
    /// As [`ValueKind::PtrToMem`], or null when the size is 0 (`PTR_MAYBE_NULL`).
    PtrToMemOrNull,
    /// Memory the helper writes, size in the next argument (`ARG_PTR_TO_UNINIT_MEM`).
    PtrToUninitMem,
    /// A known-bounded size greater than 0 for the previous argument (`ARG_CONST_SIZE`).
    ConstSize,
    /// As [`ValueKind::ConstSize`], 0 allowed (`ARG_CONST_SIZE_OR_ZERO`).
    ConstSizeOrZero,
    /// A constant size of memory the helper allocates (`ARG_CONST_ALLOC_SIZE_OR_ZERO`).
    ConstAllocSize,
    /// Memory a helper allocated, released by this call (`ARG_PTR_TO_ALLOC_MEM |
    /// OBJ_RELEASE`: the ring buffer's submit and discard).
    ReleaseAllocMem,
    /// A static function of the program (`ARG_PTR_TO_FUNC`, a callback).
    Func,
    /// A pointer into the stack, or null (`ARG_PTR_TO_STACK_OR_NULL`: a callback's context).
    PtrToStackOrNull,
    /// Result: nothing usable (`RET_VOID`).
    Void,
    /// Result: a pointer to a map value, or null (`RET_PTR_TO_MAP_VALUE_OR_NULL`).
    PtrToMapValueOrNull,
    /// Result: memory of the size given by the [`ValueKind::ConstAllocSize`] argument, or
    /// null; a reference the program must release (`RET_PTR_TO_ALLOC_MEM_OR_NULL`, acquire).
    AllocMemOrNull,
}

/// A helper's signature: the kernel's `struct bpf_func_proto` for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelperSig {
    pub id: u32,
    pub name: &'static str,
    pub args: &'static [ValueKind],
    pub ret: ValueKind,
    /// Program types the kernel offers it to (empty: every type).
    pub prog_types: &'static [ProgType],
    /// May take packet pointers as memory arguments (`pkt_access`).
    pub pkt_access: bool,
    /// May move or resize the packet: every packet pointer is invalid after the call
    /// (`bpf_helper_changes_pkt_data`).
    pub changes_pkt_data: bool,
}

impl HelperSig {
    /// Whether a program of `prog_type` (`None`: untyped) may call it.
    pub fn available_for(&self, prog_type: Option<ProgType>) -> bool {
        self.prog_types.is_empty() || prog_type.is_some_and(|t| self.prog_types.contains(&t))
    }
}

const fn sig(id: u32, name: &'static str, args: &'static [ValueKind], ret: ValueKind) -> HelperSig {
    HelperSig { id, name, args, ret, prog_types: &[], pkt_access: false, changes_pkt_data: false }
}

const TC_TYPES: &[ProgType] = &[ProgType::SchedCls, ProgType::SchedAct];
const TC_XDP: &[ProgType] = &[ProgType::SchedCls, ProgType::SchedAct, ProgType::Xdp];
const SKB: &[ProgType] = &[ProgType::SocketFilter, ProgType::SchedCls, ProgType::SchedAct];
const XDP_ONLY: &[ProgType] = &[ProgType::Xdp];

/// Signatures of the kernel helpers weir knows, with the kernel's prototypes
/// (kernel/bpf/helpers.c, kernel/bpf/ringbuf.c, net/core/filter.c): every helper
/// weir runs has one.
pub static KERNEL_HELPERS: &[HelperSig] = {
    use ValueKind::*;
    &[
        HelperSig {
            pkt_access: true,
            ..sig(
                helper_id::MAP_LOOKUP_ELEM,
                "bpf_map_lookup_elem",
                &[MapPtr, MapKey],
                PtrToMapValueOrNull,
            )
        },
        HelperSig {
            pkt_access: true,
            ..sig(
                helper_id::MAP_UPDATE_ELEM,
                "bpf_map_update_elem",
                &[MapPtr, MapKey, MapValue, Scalar],
                Scalar,
            )
        },
        HelperSig {
            pkt_access: true,
            ..sig(helper_id::MAP_DELETE_ELEM, "bpf_map_delete_elem", &[MapPtr, MapKey], Scalar)
        },
        sig(helper_id::KTIME_GET_NS, "bpf_ktime_get_ns", &[], Scalar),
        sig(helper_id::TRACE_PRINTK, "bpf_trace_printk", &[PtrToMem, ConstSize], Scalar),
        sig(helper_id::GET_PRANDOM_U32, "bpf_get_prandom_u32", &[], Scalar),
        sig(helper_id::GET_SMP_PROCESSOR_ID, "bpf_get_smp_processor_id", &[], Scalar),
        HelperSig {
            prog_types: TC_TYPES,
            pkt_access: true,
            changes_pkt_data: true,
            ..sig(9, "bpf_skb_store_bytes", &[Context, Scalar, PtrToMem, ConstSize, Scalar], Scalar)
        },
        HelperSig {
            prog_types: TC_TYPES,
            changes_pkt_data: true,
            ..sig(10, "bpf_l3_csum_replace", &[Context, Scalar, Scalar, Scalar, Scalar], Scalar)
        },
        HelperSig {
            prog_types: TC_TYPES,
            changes_pkt_data: true,
            ..sig(11, "bpf_l4_csum_replace", &[Context, Scalar, Scalar, Scalar, Scalar], Scalar)
        },
        sig(12, "bpf_tail_call", &[Context, MapPtr, Scalar], Void),
        HelperSig { prog_types: TC_XDP, ..sig(23, "bpf_redirect", &[Scalar, Scalar], Scalar) },
        HelperSig {
            prog_types: SKB,
            pkt_access: true,
            ..sig(
                helper_id::SKB_LOAD_BYTES,
                "bpf_skb_load_bytes",
                &[Context, Scalar, PtrToUninitMem, ConstSize],
                Scalar,
            )
        },
        HelperSig {
            prog_types: TC_XDP,
            pkt_access: true,
            ..sig(
                helper_id::CSUM_DIFF,
                "bpf_csum_diff",
                &[PtrToMemOrNull, ConstSizeOrZero, PtrToMemOrNull, ConstSizeOrZero, Scalar],
                Scalar,
            )
        },
        // The kernel's prototype (net/core/filter.c): the skb's flow hash, tc only.
        HelperSig { prog_types: TC_TYPES, ..sig(34, "bpf_get_hash_recalc", &[Context], Scalar) },
        HelperSig {
            prog_types: XDP_ONLY,
            changes_pkt_data: true,
            ..sig(helper_id::XDP_ADJUST_HEAD, "bpf_xdp_adjust_head", &[Context, Scalar], Scalar)
        },
        HelperSig {
            prog_types: XDP_ONLY,
            ..sig(51, "bpf_redirect_map", &[MapPtr, Scalar, Scalar], Scalar)
        },
        HelperSig {
            prog_types: XDP_ONLY,
            changes_pkt_data: true,
            ..sig(54, "bpf_xdp_adjust_meta", &[Context, Scalar], Scalar)
        },
        HelperSig {
            prog_types: XDP_ONLY,
            changes_pkt_data: true,
            ..sig(65, "bpf_xdp_adjust_tail", &[Context, Scalar], Scalar)
        },
        sig(87, "bpf_map_push_elem", &[MapPtr, MapValue, Scalar], Scalar),
        sig(88, "bpf_map_pop_elem", &[MapPtr, UninitMapValue], Scalar),
        sig(89, "bpf_map_peek_elem", &[MapPtr, UninitMapValue], Scalar),
        sig(125, "bpf_ktime_get_boot_ns", &[], Scalar),
        sig(130, "bpf_ringbuf_output", &[MapPtr, PtrToMem, ConstSizeOrZero, Scalar], Scalar),
        sig(131, "bpf_ringbuf_reserve", &[MapPtr, ConstAllocSize, Scalar], AllocMemOrNull),
        sig(132, "bpf_ringbuf_submit", &[ReleaseAllocMem, Scalar], Void),
        sig(133, "bpf_ringbuf_discard", &[ReleaseAllocMem, Scalar], Void),
        sig(134, "bpf_ringbuf_query", &[MapPtr, Scalar], Scalar),
        sig(160, "bpf_ktime_get_coarse_ns", &[], Scalar),
        sig(181, "bpf_loop", &[Scalar, Func, PtrToStackOrNull, Scalar], Scalar),
    ]
};

pub fn kernel_helper(id: u32) -> Option<&'static HelperSig> {
    KERNEL_HELPERS.iter().find(|h| h.id == id)
}

pub fn kernel_helper_by_name(name: &str) -> Option<&'static HelperSig> {
    KERNEL_HELPERS.iter().find(|h| h.name == name)
}

/// What a helper did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelperOutcome {
    /// Put the value in r0 and go on.
    Return(u64),
    /// Stop the whole program now with this value in r0 (the conformance "unwind").
    Stop(u64),
    /// The helper failed: the run ends with `TrapCode::HelperFailed`.
    Fail,
}

/// Guest memory as a helper sees it: reads and writes at guest addresses
/// ([`crate::exec::guest`]), checked by the engine with exactly the rules the program's own
/// loads and stores follow (region bounds, the stack floor of the running frame, the
/// context's writable fields). Engines implement it over their run state.
pub trait GuestMemory {
    /// Fills `buf` from guest address `addr`: `Err(OutOfBounds)` if any byte is outside
    /// every region the program may read.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TrapCode>;
    /// Writes `bytes` at guest address `addr`: `Err(OutOfBounds)` if any byte is outside
    /// every region, `Err(ReadOnly)` if the program may not write there.
    fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), TrapCode>;
    /// Writes `bytes` at byte `offset` of the context whatever its layout allows: what a
    /// helper that moves the packet (`bpf_xdp_adjust_head`) does to `data`. `OutOfBounds`
    /// outside the context.
    fn write_context(&mut self, offset: usize, bytes: &[u8]) -> Result<(), TrapCode>;
}

/// The run's environment: what a program reaches besides its input slices. It owns the map
/// values window ([`guest::MAPS_BASE`]): engines send it every access to that window, and
/// it gives helpers the maps and the run's other state (through [`RunEnv::as_any`], which
/// the helper crate that made the environment downcasts). Engines know only this trait.
///
/// # Safety
///
/// [`RunEnv::host`] hands native code a host address it will read and write directly: an
/// implementation must return only addresses of memory valid for reads and writes of `len`
/// bytes, 8-byte aligned words that nothing else treats as non-atomic Rust memory, and keep
/// it valid until the environment is dropped.
pub unsafe trait RunEnv {
    /// Fills `buf` from `addr` in the map values window: `Err(OutOfBounds)` unless every
    /// byte lies inside one value the program may reach.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TrapCode>;
    /// Writes `bytes` at `addr` in the map values window: `Err(OutOfBounds)` as for `read`,
    /// `Err(ReadOnly)` for a read-only value (`.rodata`).
    fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), TrapCode>;
    /// The host address of `len` bytes at `addr` inside one value, for native code; `None`
    /// when they are not (the access then traps as `read`/`write` would). `write` asks for
    /// a writable value.
    fn host(&mut self, addr: u64, len: u64, write: bool) -> Option<NonNull<u8>>;
    /// An atomic read-modify-write of the `len`-byte (4 or 8) integer at `addr`, as
    /// `BPF_ATOMIC` instructions do it on a value other threads also reach: stores
    /// `update(old)` and returns `old`. Errors as for `write`. The default (a read, then a
    /// write) suits environments only one thread uses.
    fn update(
        &mut self,
        addr: u64,
        len: usize,
        update: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, TrapCode> {
        let mut bytes = [0u8; 8];
        let word = bytes.get_mut(..len).ok_or(TrapCode::OutOfBounds)?;
        self.read(addr, word)?;
        let old = u64::from_le_bytes(bytes);
        let new = update(old).to_le_bytes();
        self.write(addr, new.get(..len).ok_or(TrapCode::OutOfBounds)?)?;
        Ok(old)
    }
    /// The whole value holding `addr`, for native code that keeps it at hand (a one-entry
    /// cache of the values window, refilled after each helper call): `None` when `addr`
    /// lies in no value, or the environment does not say (the default: every access then
    /// goes through [`RunEnv::host`]). The span's memory follows `host`'s rules and must
    /// stay valid until the next helper call or the end of the run, whichever comes first;
    /// engines drop the span at both.
    fn value_span(&mut self, addr: u64) -> Option<ValueSpan> {
        let _ = addr;
        None
    }
    /// `bpf_map_lookup_elem(handle, key)` answered by the environment itself, for engines
    /// whose bindings say so ([`Bindings::env_map_lookup`]): one call, no helper context,
    /// no downcast. The key is read at guest address `key` (from `memory`, or from the
    /// environment's own values window). Gives r0 (the value's address, 0 when there is no
    /// element) and the value's span (see [`RunEnv::value_span`]). `None`: the environment
    /// does not answer this call (a map type it resolves no faster, an unreadable key); the
    /// engine then calls the bound helper, which has the call's whole semantics. An answer
    /// must be exactly the bound helper's. Implementations must not panic (engines call it
    /// without `catch_unwind`).
    fn map_lookup(
        &mut self,
        handle: u64,
        key: u64,
        memory: &dyn GuestMemory,
    ) -> Option<(u64, Option<ValueSpan>)> {
        let _ = (handle, key, memory);
        None
    }
    /// The maps whose `bpf_map_lookup_elem` native code may answer through a plain
    /// function ([`DirectLookup`]), by map index (`None`: through
    /// [`RunEnv::map_lookup`] or the helper), written into `out` (emptied first). An
    /// engine asks once per batch, not per run: an environment's answer must not change
    /// while it lives. The default: none.
    fn direct_lookups(&self, out: &mut Vec<Option<DirectLookup>>) {
        out.clear();
    }
    /// The environment itself, for the helpers that made it.
    fn as_any(&mut self) -> &mut dyn Any;
}

/// A map's element as a [`DirectLookup`]'s `find` gives it: its index and the host
/// address of the value's first byte (null: no element).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundElem {
    pub elem: u64,
    pub host: *mut u8,
}

impl FoundElem {
    /// No element: a null `host` (and element 0, which native code expects of a miss).
    pub const NONE: FoundElem = FoundElem { elem: 0, host: std::ptr::null_mut() };
}

/// One map's `bpf_map_lookup_elem` resolved for native code, as the kernel's JIT inlines a
/// map's `map_gen_lookup`: `find(map, cpu, w0, w1)` probes the map for a key of `key_size`
/// (at most 16) bytes given as the two words an element stores (the key's first 8 bytes
/// and the rest, each zero-padded, native byte order), or for a longer key, given in
/// place: `w0` the host address of its `key_size` bytes (readable and unchanged during
/// the call), `w1` that size; with no environment in between;
/// element `e`'s value lies at guest address `base + (e << shift)`, `value_len` bytes,
/// writable by the program when `writable`. The answer must be exactly
/// [`RunEnv::map_lookup`]'s (and the bound helper's) for the same key: the same address
/// and value span.
#[derive(Clone)]
pub struct DirectLookup {
    /// # Safety
    ///
    /// Called with `map` and `cpu` as given here, while `keep` lives. The host address it
    /// returns follows [`RunEnv::host`]'s rules for `value_len` bytes, and stays valid while
    /// `keep` lives.
    pub find: unsafe extern "C" fn(map: *const (), cpu: u64, w0: u64, w1: u64) -> FoundElem,
    pub map: *const (),
    pub cpu: u64,
    /// Owns what `map` points at.
    pub keep: std::sync::Arc<dyn Any + Send + Sync>,
    pub key_size: u32,
    pub base: u64,
    pub shift: u32,
    pub value_len: u64,
    pub writable: bool,
}

// SAFETY: `map` points into `keep`'s data, which is `Send + Sync`, and `find` only reads it
// through shared references (the maps are thread-safe), so a copy may move to another
// thread with its `keep`.
unsafe impl Send for DirectLookup {}
// SAFETY: as for `Send`: nothing is reached through `&DirectLookup` but `keep`'s shared data.
unsafe impl Sync for DirectLookup {}

impl std::fmt::Debug for DirectLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectLookup")
            .field("key_size", &self.key_size)
            .field("base", &self.base)
            .field("shift", &self.shift)
            .field("value_len", &self.value_len)
            .field("writable", &self.writable)
            .finish_non_exhaustive()
    }
}

/// One value of the map values window as [`RunEnv::value_span`] gives it: guest address
/// `addr` and the `len` bytes after it are host memory from `host` on; `writable` when the
/// program may store to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueSpan {
    pub addr: u64,
    pub host: NonNull<u8>,
    pub len: u64,
    pub writable: bool,
}

/// What a helper is called with besides its arguments: guest memory, the run's
/// environment and the program type.
pub struct HelperCtx<'a> {
    memory: &'a mut dyn GuestMemory,
    env: Option<&'a mut dyn RunEnv>,
    prog_type: Option<ProgType>,
}

impl<'a> HelperCtx<'a> {
    /// Engines make one per helper call.
    pub fn new(memory: &'a mut dyn GuestMemory, prog_type: Option<ProgType>) -> Self {
        HelperCtx { memory, env: None, prog_type }
    }

    /// With the run's environment (engines pass the one of [`crate::exec::Input::env`]).
    pub fn with_env(mut self, env: Option<&'a mut dyn RunEnv>) -> Self {
        self.env = env;
        self
    }

    /// Reads guest memory (see [`GuestMemory::read`]; the map values window through the
    /// environment).
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TrapCode> {
        if guest::window(addr) == guest::MAPS as u64 {
            return self.env.as_ref().ok_or(TrapCode::OutOfBounds)?.read(addr, buf);
        }
        self.memory.read(addr, buf)
    }

    /// Writes guest memory (see [`GuestMemory::write`]).
    pub fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), TrapCode> {
        if guest::window(addr) == guest::MAPS as u64 {
            return self.env.as_mut().ok_or(TrapCode::OutOfBounds)?.write(addr, bytes);
        }
        self.memory.write(addr, bytes)
    }

    /// Writes the context past its layout's rules (see [`GuestMemory::write_context`]).
    pub fn write_context(&mut self, offset: usize, bytes: &[u8]) -> Result<(), TrapCode> {
        self.memory.write_context(offset, bytes)
    }

    /// The run's environment, if the run has one.
    pub fn env(&mut self) -> Option<&mut dyn RunEnv> {
        match &mut self.env {
            Some(env) => Some(&mut **env),
            None => None,
        }
    }

    /// The program type the program runs as, if the bindings name one.
    pub fn prog_type(&self) -> Option<ProgType> {
        self.prog_type
    }
}

/// A helper implementation: plain data, so engines need no runtime crate. Arguments are
/// r1-r5; the context gives guest memory and the program type.
pub type HelperFn = fn(&mut HelperCtx<'_>, &[u64; 5]) -> HelperOutcome;

#[derive(Clone, Copy, Debug)]
pub struct Helper {
    pub id: u32,
    pub name: &'static str,
    pub func: HelperFn,
}

fn unwind(_: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    if args[0] == 0 {
        HelperOutcome::Stop(0)
    } else {
        HelperOutcome::Return(args[0])
    }
}

/// The conformance suites' helper 5.
pub const UNWIND: Helper =
    Helper { id: helper_id::CONFORMANCE_UNWIND, name: "unwind", func: unwind };

/// Helpers, program type and context layout an engine runs a program with.
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    helpers: Vec<Helper>,
    /// The context `r1` points at (its packet fields are filled in before each run).
    pub context: Option<&'static ContextLayout>,
    /// The program type helpers see ([`HelperCtx::prog_type`]).
    pub prog_type: Option<ProgType>,
    /// Whether helper 1 (`bpf_map_lookup_elem`) is the environment's own
    /// [`RunEnv::map_lookup`] (engines may call that instead of the helper function).
    env_map_lookup: bool,
}

impl Bindings {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bindings for a program of type `prog_type`: its context layout, no helpers yet.
    pub fn for_prog_type(prog_type: ProgType) -> Self {
        Bindings {
            helpers: Vec::new(),
            context: Some(prog_type.context_layout()),
            prog_type: Some(prog_type),
            env_map_lookup: false,
        }
    }

    /// Bindings the common eBPF conformance runners expect: helper 5 is "unwind".
    pub fn conformance() -> Self {
        let mut b = Self::new();
        b.add_helper(UNWIND);
        b
    }

    /// Adds or replaces the helper with this id.
    pub fn add_helper(&mut self, helper: Helper) {
        if helper.id == helper_id::MAP_LOOKUP_ELEM {
            self.env_map_lookup = false;
        }
        self.helpers.retain(|h| h.id != helper.id);
        self.helpers.push(helper);
    }

    /// Declares that the helper bound to `bpf_map_lookup_elem` (added before) does exactly
    /// what the run's environment's [`RunEnv::map_lookup`] does when it answers: set by the
    /// crate that makes both (weir-helpers). Replacing helper 1 later clears it.
    pub fn lookup_through_env(&mut self) {
        self.env_map_lookup = self.helper(helper_id::MAP_LOOKUP_ELEM).is_some();
    }

    /// See [`Bindings::lookup_through_env`].
    #[inline]
    pub fn env_map_lookup(&self) -> bool {
        self.env_map_lookup
    }

    #[inline]
    pub fn helper(&self, id: u32) -> Option<&Helper> {
        self.helpers.iter().find(|h| h.id == id)
    }

    pub fn helpers(&self) -> &[Helper] {
        &self.helpers
    }
}

/// How a context field is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// An ordinary value.
    Plain,
    /// Holds the start of packet data (a pointer in the guest's address space).
    PacketStart,
    /// Holds the end of packet data.
    PacketEnd,
    /// Holds the start of packet metadata (XDP).
    MetaStart,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextField {
    pub name: &'static str,
    pub offset: u32,
    pub size: u32,
    pub kind: FieldKind,
    pub writable: bool,
}

/// The layout of a program type's context (`r1` at entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextLayout {
    pub name: &'static str,
    pub size: u32,
    pub fields: &'static [ContextField],
}

impl ContextLayout {
    pub fn field(&self, name: &str) -> Option<&ContextField> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn field_at(&self, offset: u32) -> Option<&ContextField> {
        self.fields.iter().find(|f| f.offset == offset)
    }
}

const fn plain(name: &'static str, offset: u32) -> ContextField {
    ContextField { name, offset, size: 4, kind: FieldKind::Plain, writable: false }
}

/// `struct __sk_buff` as socket filters see it (the fields weir fills in).
pub static SOCKET_FILTER: ContextLayout = ContextLayout {
    name: "__sk_buff",
    size: 192,
    fields: &[
        plain("len", 0),
        plain("pkt_type", 4),
        plain("mark", 8),
        plain("queue_mapping", 12),
        plain("protocol", 16),
        plain("vlan_present", 20),
        plain("vlan_tci", 24),
        plain("vlan_proto", 28),
        plain("priority", 32),
        plain("ingress_ifindex", 36),
        plain("ifindex", 40),
        plain("tc_index", 44),
        ContextField { name: "cb", offset: 48, size: 20, kind: FieldKind::Plain, writable: true },
        plain("hash", 68),
        plain("tc_classid", 72),
        ContextField {
            name: "data",
            offset: 76,
            size: 4,
            kind: FieldKind::PacketStart,
            writable: false,
        },
        ContextField {
            name: "data_end",
            offset: 80,
            size: 4,
            kind: FieldKind::PacketEnd,
            writable: false,
        },
        plain("napi_id", 84),
    ],
};

const fn written(name: &'static str, offset: u32) -> ContextField {
    ContextField { name, offset, size: 4, kind: FieldKind::Plain, writable: true }
}

/// `struct __sk_buff` as tc programs (`sched_cls`, `sched_act`) see it: the socket
/// filter's fields, `data_meta`, the later read-only fields the kernel's test run fills
/// (zero there), and the fields a tc program may write (`mark`, `queue_mapping`,
/// `priority`, `tc_index`, `cb`, `tc_classid`). weir keeps every field 32 bits wide: the
/// kernel stores `queue_mapping`, `tc_index` and `tc_classid` in 16 bits (a wider value
/// written reads back truncated there, whole here) and ignores a `queue_mapping` write of
/// 65,535 or more.
pub static TC: ContextLayout = ContextLayout {
    name: "__sk_buff",
    size: 192,
    fields: &[
        plain("len", 0),
        plain("pkt_type", 4),
        written("mark", 8),
        written("queue_mapping", 12),
        plain("protocol", 16),
        plain("vlan_present", 20),
        plain("vlan_tci", 24),
        plain("vlan_proto", 28),
        written("priority", 32),
        plain("ingress_ifindex", 36),
        plain("ifindex", 40),
        written("tc_index", 44),
        ContextField { name: "cb", offset: 48, size: 20, kind: FieldKind::Plain, writable: true },
        plain("hash", 68),
        written("tc_classid", 72),
        ContextField {
            name: "data",
            offset: 76,
            size: 4,
            kind: FieldKind::PacketStart,
            writable: false,
        },
        ContextField {
            name: "data_end",
            offset: 80,
            size: 4,
            kind: FieldKind::PacketEnd,
            writable: false,
        },
        plain("napi_id", 84),
        ContextField {
            name: "data_meta",
            offset: 140,
            size: 4,
            kind: FieldKind::MetaStart,
            writable: false,
        },
        ContextField {
            name: "tstamp",
            offset: 152,
            size: 8,
            kind: FieldKind::Plain,
            writable: false,
        },
        plain("wire_len", 160),
        plain("gso_segs", 164),
        plain("gso_size", 176),
        ContextField {
            name: "hwtstamp",
            offset: 184,
            size: 8,
            kind: FieldKind::Plain,
            writable: false,
        },
    ],
};

/// `struct xdp_md`.
pub static XDP: ContextLayout = ContextLayout {
    name: "xdp_md",
    size: 24,
    fields: &[
        ContextField {
            name: "data",
            offset: 0,
            size: 4,
            kind: FieldKind::PacketStart,
            writable: false,
        },
        ContextField {
            name: "data_end",
            offset: 4,
            size: 4,
            kind: FieldKind::PacketEnd,
            writable: false,
        },
        ContextField {
            name: "data_meta",
            offset: 8,
            size: 4,
            kind: FieldKind::MetaStart,
            writable: false,
        },
        plain("ingress_ifindex", 12),
        plain("rx_queue_index", 16),
        plain("egress_ifindex", 20),
    ],
};

/// XDP verdicts.
pub mod xdp_action {
    pub const ABORTED: u32 = 0;
    pub const DROP: u32 = 1;
    pub const PASS: u32 = 2;
    pub const TX: u32 = 3;
    pub const REDIRECT: u32 = 4;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory that holds nothing.
    struct NoMemory;

    impl GuestMemory for NoMemory {
        fn read(&self, _: u64, _: &mut [u8]) -> Result<(), TrapCode> {
            Err(TrapCode::OutOfBounds)
        }
        fn write(&mut self, _: u64, _: &[u8]) -> Result<(), TrapCode> {
            Err(TrapCode::OutOfBounds)
        }
        fn write_context(&mut self, _: usize, _: &[u8]) -> Result<(), TrapCode> {
            Err(TrapCode::OutOfBounds)
        }
    }

    #[test]
    fn unwind_stops_on_zero() {
        let b = Bindings::conformance();
        let h = b.helper(5).unwrap();
        let mut memory = NoMemory;
        let mut ctx = HelperCtx::new(&mut memory, None);
        assert_eq!((h.func)(&mut ctx, &[0, 0, 0, 0, 0]), HelperOutcome::Stop(0));
        assert_eq!((h.func)(&mut ctx, &[7, 0, 0, 0, 0]), HelperOutcome::Return(7));
        assert!(b.helper(6).is_none());
    }

    #[test]
    fn bindings_for_a_prog_type_carry_its_context() {
        let b = Bindings::for_prog_type(ProgType::Xdp);
        assert_eq!(b.context.map(|l| l.name), Some("xdp_md"));
        assert_eq!(b.prog_type, Some(ProgType::Xdp));
    }

    #[test]
    fn layouts_do_not_overlap() {
        for layout in [&SOCKET_FILTER, &TC, &XDP] {
            let mut fields: Vec<_> = layout.fields.to_vec();
            fields.sort_by_key(|f| f.offset);
            for w in fields.windows(2) {
                assert!(w[0].offset + w[0].size <= w[1].offset, "{}: {}", layout.name, w[1].name);
            }
            let last = fields.last().unwrap();
            assert!(last.offset + last.size <= layout.size);
        }
    }
}
