//! The guest address space: where each region a program can reach appears to it. Every
//! engine uses this one map, so pointer values a program computes, and the addresses its
//! traps report, are the same in the interpreter and the JIT.
//!
//! No host pointer ever reaches a program. Every region has a fixed base below 4 GiB, so a
//! 32-bit context field (`data`, `data_end`) can hold a pointer, and region `i` owns window
//! `i` of [`REGION_WINDOW`] bytes, so finding the region of an address is a shift and an
//! array index, not a search. Window 0 (including address 0) belongs to no region.
//!
//! | window | region    | base            | size    | who writes                           |
//! |--------|-----------|-----------------|---------|--------------------------------------|
//! | 1      | stack     | [`STACK_BASE`]  | 256 MiB | the program                          |
//! | 2      | context   | [`CTX_BASE`]    | 256 MiB | writable layout fields only          |
//! | 3      | packet    | [`PACKET_BASE`] | 256 MiB | the program                          |
//! | 4      | memory    | [`MEM_BASE`]    | 256 MiB | the program                          |
//! | 5      | map values| [`MAPS_BASE`]   | 256 MiB | the program, through the run's [`crate::abi::RunEnv`] |
//! | 6      | functions | [`FUNC_BASE`]   | —       | never: addresses only (`lddw func`)  |
//! | 7      | map handles | [`MAP_HANDLE_BASE`] | — | never: addresses only (`lddw map`)     |
//!
//! Map values (window 5) are not a slice of the input: the run's environment
//! ([`crate::abi::RunEnv`]) gives each value a program reaches (a lookup's result, a global
//! data section, a ring buffer reservation) an address in the window and checks every access
//! to it; engines ask it only when an address is in no region of their own.
//!
//! The stack holds every frame, contiguous: frame 0 (the entry function) is the highest
//! `stack_size` bytes with `r10` at the very top of the region; frame `i` is the
//! `stack_size` bytes below frame `i - 1`. So frame `i` owns
//! `[STACK_BASE + (frames - 1 - i) * stack_size, STACK_BASE + (frames - i) * stack_size)`
//! (see [`super::StackShape`]).

/// Base of the stack region (window 1).
pub const STACK_BASE: u64 = 0x1000_0000;
/// Base of the context region (`r1` at entry when a context is given; window 2).
pub const CTX_BASE: u64 = 0x2000_0000;
/// Base of the packet region (what `data`/`data_end` point into; window 3).
pub const PACKET_BASE: u64 = 0x3000_0000;
/// Base of the plain memory region (`r1` at entry in the conformance convention; window 4).
pub const MEM_BASE: u64 = 0x4000_0000;
/// Base of the map values window (window 5), owned by the run's environment.
pub const MAPS_BASE: u64 = 0x5000_0000;
/// Map `i` of a program is the handle `MAP_HANDLE_BASE + i` in `r1` of a map helper (what
/// `lddw map` loads once relocated). No region: a program cannot read through it.
pub const MAP_HANDLE_BASE: u64 = 0x7000_0000;

/// The handle of map `index`, or `None` past the window.
#[inline]
pub fn map_handle(index: usize) -> Option<u64> {
    let index = u64::try_from(index).ok().filter(|&i| i < REGION_WINDOW)?;
    Some(MAP_HANDLE_BASE + index)
}

/// The map index a handle names, if it is one.
#[inline]
pub fn map_index(handle: u64) -> Option<usize> {
    let index = handle.checked_sub(MAP_HANDLE_BASE).filter(|&i| i < REGION_WINDOW)?;
    usize::try_from(index).ok()
}

/// Base of the function addresses `lddw func(...)` yields: slot `s` is `FUNC_BASE + 8 * s`.
pub const FUNC_BASE: u64 = 0x6000_0000;
/// Size of the address window of each region: the largest stack, context, packet or memory
/// an engine accepts.
pub const REGION_WINDOW: u64 = 0x1000_0000;
/// log2 of [`REGION_WINDOW`]: the shift that turns an address into its window number.
pub const WINDOW_SHIFT: u32 = 28;

/// Window numbers, which engines also use as indices of their region tables.
pub const STACK: usize = 1;
pub const CTX: usize = 2;
pub const PACKET: usize = 3;
pub const MEM: usize = 4;
pub const MAPS: usize = 5;
/// Windows an engine's region table needs (a power of two, so a table can be indexed by
/// masking). Windows 0, 6 and 7 never hold a region; window 5 (map values) is the run
/// environment's, not an engine's.
pub const WINDOWS: usize = 8;

/// The window an address falls in (its region's index, if it has one).
#[inline]
pub const fn window(addr: u64) -> u64 {
    addr >> WINDOW_SHIFT
}

/// The address `lddw func(...)` yields for the function starting at `slot`, or `None` if
/// the slot has no address (only for absurdly long programs).
pub fn func_addr(slot: usize) -> Option<u64> {
    u64::try_from(slot).ok()?.checked_mul(8)?.checked_add(FUNC_BASE)
}

/// The slot a function address names, if it is one (in range of the function window and
/// aligned to a slot). Whether a function starts there is the engine's question.
pub fn func_slot(addr: u64) -> Option<usize> {
    let offset = addr.checked_sub(FUNC_BASE)?;
    if offset % 8 != 0 {
        return None;
    }
    usize::try_from(offset / 8).ok()
}

// Engines find a region by `addr >> WINDOW_SHIFT` and the offset by masking: keep the bases
// on window boundaries, in window order, and the windows that size.
const _: () = {
    assert!(REGION_WINDOW == 1 << WINDOW_SHIFT);
    assert!(STACK_BASE == STACK as u64 * REGION_WINDOW);
    assert!(CTX_BASE == CTX as u64 * REGION_WINDOW);
    assert!(PACKET_BASE == PACKET as u64 * REGION_WINDOW);
    assert!(MEM_BASE == MEM as u64 * REGION_WINDOW);
    assert!(WINDOWS.is_power_of_two() && MEM < WINDOWS);
    // The function window holds no region and lies inside the table's windows.
    assert!(window(FUNC_BASE) < WINDOWS as u64 && window(FUNC_BASE) > MEM as u64);
    assert!(FUNC_BASE < 1 << 32);
    assert!(MAPS_BASE == MAPS as u64 * REGION_WINDOW);
    assert!(window(MAP_HANDLE_BASE) == 7 && window(MAP_HANDLE_BASE) < WINDOWS as u64);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_addresses_round_trip() {
        for slot in [0usize, 1, 7, 4096] {
            let addr = func_addr(slot).unwrap_or(0);
            assert_eq!(func_slot(addr), Some(slot));
        }
        assert_eq!(func_slot(FUNC_BASE - 8), None);
        assert_eq!(func_slot(FUNC_BASE + 4), None);
    }
}
