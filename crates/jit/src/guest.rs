//! The guest address space the JIT's programs see: the same fixed region bases as the
//! reference interpreter (`weir_interp::guest`), so pointer values a program computes and
//! the addresses traps report are identical in both engines. Engines do not depend on each
//! other, so the constants are restated here; a test in `tests/differential.rs` checks them
//! against the interpreter's.
//!
//! Region `i` owns window `i` of [`REGION_WINDOW`] bytes: window 1 the stack (all frames,
//! frame 0 at the top), 2 the context, 3 the packet, 4 plain memory. Generated code finds
//! the table entry of an address with a shift and a mask (the window number modulo
//! [`WINDOWS`]); an address beyond the table's windows lands on some entry but can never pass
//! its bounds check (see `codegen::memory`).

/// Base of the stack region (frame 0 at the highest addresses).
pub const STACK_BASE: u64 = 0x1000_0000;
/// Base of the context region.
pub const CTX_BASE: u64 = 0x2000_0000;
/// Base of the packet region.
pub const PACKET_BASE: u64 = 0x3000_0000;
/// Base of the plain memory region.
pub const MEM_BASE: u64 = 0x4000_0000;
/// Base of function addresses: `lddw func(...)` at slot `s` yields `FUNC_BASE + 8 * s`.
pub const FUNC_BASE: u64 = 0x6000_0000;
/// Size of each region's address window.
pub const REGION_WINDOW: u64 = 0x1000_0000;
/// log2 of [`REGION_WINDOW`]: the shift that turns an address into its window number.
pub const WINDOW_SHIFT: i64 = 28;

/// Window numbers, which are also indices in the run's region table.
pub const STACK: usize = 1;
pub const CTX: usize = 2;
pub const PACKET: usize = 3;
pub const MEM: usize = 4;
/// Entries in the region table (a power of two: generated code masks with `WINDOWS - 1`).
/// Entries 0, 5, 6 and 7 never hold a region.
pub const WINDOWS: usize = 8;

const _: () = {
    assert!(REGION_WINDOW == 1 << WINDOW_SHIFT);
    assert!(STACK_BASE == STACK as u64 * REGION_WINDOW);
    assert!(CTX_BASE == CTX as u64 * REGION_WINDOW);
    assert!(PACKET_BASE == PACKET as u64 * REGION_WINDOW);
    assert!(MEM_BASE == MEM as u64 * REGION_WINDOW);
    assert!(WINDOWS.is_power_of_two() && MEM < WINDOWS);
    // The function window holds no region.
    assert!(FUNC_BASE / REGION_WINDOW < WINDOWS as u64 && FUNC_BASE / REGION_WINDOW > 4);
};

/// The address `lddw func(...)` yields for the function starting at `slot`.
pub fn func_addr(slot: usize) -> Option<u64> {
    u64::try_from(slot).ok()?.checked_mul(8)?.checked_add(FUNC_BASE)
}
