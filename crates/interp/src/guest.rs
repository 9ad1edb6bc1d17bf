//! The guest address space: where each region a program can reach appears to it.
//!
//! No host pointer ever reaches a program. Every region has a fixed base below 4 GiB, so a
//! 32-bit context field (`data`, `data_end`) can hold a pointer, and region `i` owns window
//! `i` of [`REGION_WINDOW`] bytes, so finding the region of an address is a shift and an
//! array index, not a search. Window 0 (including address 0) belongs to no region.
//! Other engines (the JIT) use the same bases, so pointer values a program computes, and the
//! traps it raises, are the same in every engine.
//!
//! | region   | base            | window  | who writes                           |
//! |----------|-----------------|---------|--------------------------------------|
//! | stack    | [`STACK_BASE`]  | 256 MiB | the program                          |
//! | context  | [`CTX_BASE`]    | 256 MiB | writable layout fields only          |
//! | packet   | [`PACKET_BASE`] | 256 MiB | the program                          |
//! | memory   | [`MEM_BASE`]    | 256 MiB | the program                          |
//! | functions| [`FUNC_BASE`]   | —       | never: addresses only (`lddw func`)  |
//!
//! All stack frames are contiguous: frame `i` owns `[STACK_BASE + i * stack_size,
//! STACK_BASE + (i + 1) * stack_size)` and starts with `r10` at the top of that range.

/// Base of the stack region (frame 0 at the lowest addresses).
pub const STACK_BASE: u64 = 0x1000_0000;
/// Base of the context region (`r1` at entry when a context is given).
pub const CTX_BASE: u64 = 0x2000_0000;
/// Base of the packet region (what `data`/`data_end` point into).
pub const PACKET_BASE: u64 = 0x3000_0000;
/// Base of the plain memory region (`r1` at entry in the conformance convention).
pub const MEM_BASE: u64 = 0x4000_0000;
/// Base of the function addresses `lddw func(...)` yields: slot `s` is `FUNC_BASE + 8 * s`.
pub const FUNC_BASE: u64 = 0x6000_0000;
/// Size of the address window of each region: the largest stack, context, packet or memory
/// an engine accepts.
pub const REGION_WINDOW: u64 = 0x1000_0000;

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

// Memory translation finds a region by `addr >> 28` and the offset by masking: keep the
// bases on window boundaries, in window order, and the windows that size.
const _: () = {
    assert!(REGION_WINDOW == 1 << 28);
    assert!(STACK_BASE >> 28 == 1 && CTX_BASE >> 28 == 2 && PACKET_BASE >> 28 == 3);
    assert!(MEM_BASE >> 28 == 4 && MEM_BASE + REGION_WINDOW <= FUNC_BASE);
    assert!(FUNC_BASE < 1 << 32);
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
