//! The arithmetic whose eBPF meaning differs from Rust's operators: division and remainder
//! by zero, the signed overflow case, and masked shifts. Kept apart from the run loop so each
//! rule is written once and read in one place (RFC 9669, section 4.1). The interpreter runs
//! these functions, and the verifier's value domain is tested against them, so the domain is
//! sound for exactly what the engines compute.
//!
//! 32-bit functions take and return `u32`; the caller zero-extends into the register.

/// Unsigned division; by zero gives 0.
#[inline(always)]
pub fn div64(a: u64, b: u64) -> u64 {
    a.checked_div(b).unwrap_or(0)
}

/// Unsigned remainder; by zero leaves the dividend.
#[inline(always)]
pub fn mod64(a: u64, b: u64) -> u64 {
    a.checked_rem(b).unwrap_or(a)
}

/// Signed division; by zero gives 0, `i64::MIN / -1` gives `i64::MIN`.
#[inline(always)]
pub fn sdiv64(a: u64, b: u64) -> u64 {
    if b == 0 {
        return 0;
    }
    // With b != 0 the only failure is the overflow MIN / -1, whose result is MIN (= a).
    (a as i64).checked_div(b as i64).map_or(a, |q| q as u64)
}

/// Signed remainder, truncating (sign of the dividend); by zero leaves the dividend,
/// `i64::MIN % -1` is 0.
#[inline(always)]
pub fn smod64(a: u64, b: u64) -> u64 {
    if b == 0 {
        return a;
    }
    // With b != 0 the only failure is MIN % -1, whose remainder is 0.
    (a as i64).checked_rem(b as i64).map_or(0, |r| r as u64)
}

#[inline(always)]
pub fn div32(a: u32, b: u32) -> u32 {
    a.checked_div(b).unwrap_or(0)
}

#[inline(always)]
pub fn mod32(a: u32, b: u32) -> u32 {
    a.checked_rem(b).unwrap_or(a)
}

#[inline(always)]
pub fn sdiv32(a: u32, b: u32) -> u32 {
    if b == 0 {
        return 0;
    }
    // With b != 0 the only failure is the overflow MIN / -1, whose result is MIN (= a).
    (a as i32).checked_div(b as i32).map_or(a, |q| q as u32)
}

#[inline(always)]
pub fn smod32(a: u32, b: u32) -> u32 {
    if b == 0 {
        return a;
    }
    // With b != 0 the only failure is MIN % -1, whose remainder is 0.
    (a as i32).checked_rem(b as i32).map_or(0, |r| r as u32)
}

// Shifts: `wrapping_sh*` masks the amount by the operand's width (& 63, & 31), which is
// exactly the eBPF rule; truncating the amount to u32 first keeps those low bits.

#[inline(always)]
pub fn lsh64(a: u64, b: u64) -> u64 {
    a.wrapping_shl(b as u32)
}

#[inline(always)]
pub fn rsh64(a: u64, b: u64) -> u64 {
    a.wrapping_shr(b as u32)
}

#[inline(always)]
pub fn arsh64(a: u64, b: u64) -> u64 {
    (a as i64).wrapping_shr(b as u32) as u64
}

#[inline(always)]
pub fn lsh32(a: u32, b: u32) -> u32 {
    a.wrapping_shl(b)
}

#[inline(always)]
pub fn rsh32(a: u32, b: u32) -> u32 {
    a.wrapping_shr(b)
}

#[inline(always)]
pub fn arsh32(a: u32, b: u32) -> u32 {
    (a as i32).wrapping_shr(b) as u32
}
