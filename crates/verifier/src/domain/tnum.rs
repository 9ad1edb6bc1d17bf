//! Tristate numbers: what is known of each bit of a 64-bit value.
//!
//! A [`Tnum`] `(value; mask)` stands for every `x` with `x & !mask == value`: a bit set in
//! `mask` is unknown, any other bit is the bit of `value`. The invariant is
//! `value & mask == 0`. The operations follow the kernel's `tnum.c` in meaning (each result
//! holds every concrete result of the operation on members of the operands), written here
//! from that definition; where a rule is not obvious its argument is given beside it.
//!
//! ```
//! use weir_verifier::domain::Tnum;
//! let low_byte = Tnum::UNKNOWN.and(Tnum::constant(0xff));
//! assert_eq!(low_byte.to_string(), "(0x0; 0xff)");
//! assert!(low_byte.contains(0x42) && !low_byte.contains(0x100));
//! // Adding 1 may carry into bit 8.
//! assert_eq!(low_byte.add(Tnum::constant(1)), Tnum { value: 0, mask: 0x1ff });
//! ```

use std::fmt;

/// A tristate number: bit `i` is unknown when bit `i` of `mask` is set, else it is bit `i` of
/// `value`. Invariant: `value & mask == 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tnum {
    pub value: u64,
    pub mask: u64,
}

// The operations are named after what they abstract (the kernel's tnum_add, tnum_and, ...),
// an interface the verifier codes against; as operator traits they would read as concrete
// arithmetic on one number.
#[allow(clippy::should_implement_trait)]
impl Tnum {
    /// Nothing known: every 64-bit value.
    pub const UNKNOWN: Tnum = Tnum { value: 0, mask: u64::MAX };

    /// Exactly `v`.
    pub fn constant(v: u64) -> Tnum {
        Tnum { value: v, mask: 0 }
    }

    /// The smallest tnum holding every value of `[min, max]`: the common high bits of `min`
    /// and `max` are known, every bit from the highest differing one down is unknown. With
    /// `min > max` (an empty range) the result still holds both ends, never panics.
    pub fn range(min: u64, max: u64) -> Tnum {
        let chi = min ^ max;
        if chi == 0 {
            return Tnum::constant(min);
        }
        // Bits below and at the highest differing bit.
        let delta = u64::MAX >> chi.leading_zeros();
        Tnum { value: min & !delta, mask: delta }
    }

    /// Whether exactly one value is held.
    pub fn is_const(self) -> bool {
        self.mask == 0
    }

    /// Whether `v` is a member.
    pub fn contains(self, v: u64) -> bool {
        v & !self.mask == self.value
    }

    /// Whether every member of `other` is a member of `self` (the kernel's `tnum_in`).
    pub fn subsumes(self, other: Tnum) -> bool {
        if other.mask & !self.mask != 0 {
            return false;
        }
        other.value & !self.mask == self.value
    }

    /// The smallest member (unknown bits 0).
    pub fn min(self) -> u64 {
        self.value
    }

    /// The largest member (unknown bits 1).
    pub fn max(self) -> u64 {
        self.value | self.mask
    }

    /// The smallest member as a signed 64-bit number: the sign bit set if it may be, every
    /// other unknown bit clear.
    pub fn smin(self) -> i64 {
        (self.value | (self.mask & (1 << 63))) as i64
    }

    /// The largest member as a signed 64-bit number: the sign bit clear if it may be, every
    /// other unknown bit set.
    pub fn smax(self) -> i64 {
        (self.value | (self.mask & !(1 << 63))) as i64
    }

    /// Sum: the carries out of the unknown bits make every bit they may reach unknown.
    pub fn add(self, o: Tnum) -> Tnum {
        let sm = self.mask.wrapping_add(o.mask);
        let sv = self.value.wrapping_add(o.value);
        // sv + sm is the sum with every unknown bit 1: the bits where it differs from sv
        // are those a carry from an unknown bit may change.
        let chi = sv.wrapping_add(sm) ^ sv;
        let mu = chi | self.mask | o.mask;
        Tnum { value: sv & !mu, mask: mu }
    }

    /// Difference: the borrows of the extreme cases bound the bits that may change.
    pub fn sub(self, o: Tnum) -> Tnum {
        let dv = self.value.wrapping_sub(o.value);
        // Largest minuend minus smallest subtrahend, and smallest minus largest.
        let alpha = dv.wrapping_add(self.mask);
        let beta = dv.wrapping_sub(o.mask);
        let chi = alpha ^ beta;
        let mu = chi | self.mask | o.mask;
        Tnum { value: dv & !mu, mask: mu }
    }

    /// Product, as long multiplication: the known product of the known parts, plus for each
    /// bit of `self` a partial product that is `o` shifted (bit known 1: only `o`'s unknown
    /// bits are unknown; bit unknown: `o`'s possible bits are).
    pub fn mul(self, o: Tnum) -> Tnum {
        let known = self.value.wrapping_mul(o.value);
        let mut acc = Tnum::constant(0);
        let (mut a, mut b) = (self, o);
        while a.value != 0 || a.mask != 0 {
            if a.value & 1 != 0 {
                acc = acc.add(Tnum { value: 0, mask: b.mask });
            } else if a.mask & 1 != 0 {
                acc = acc.add(Tnum { value: 0, mask: b.value | b.mask });
            }
            a = a.rshift(1);
            b = b.lshift(1);
        }
        Tnum::constant(known).add(acc)
    }

    /// Bitwise and: a bit is known 0 if it is in either, known 1 if it is in both.
    pub fn and(self, o: Tnum) -> Tnum {
        let alpha = self.value | self.mask;
        let beta = o.value | o.mask;
        let v = self.value & o.value;
        Tnum { value: v, mask: alpha & beta & !v }
    }

    /// Bitwise or: a bit is known 1 if it is in either, known 0 if it is in neither.
    pub fn or(self, o: Tnum) -> Tnum {
        let v = self.value | o.value;
        let mu = self.mask | o.mask;
        Tnum { value: v, mask: mu & !v }
    }

    /// Bitwise exclusive or: known where both are known.
    pub fn xor(self, o: Tnum) -> Tnum {
        let v = self.value ^ o.value;
        let mu = self.mask | o.mask;
        Tnum { value: v & !mu, mask: mu }
    }

    /// Left shift by `n`; `n >= 64` shifts everything out (0).
    pub fn lshift(self, n: u32) -> Tnum {
        Tnum {
            value: self.value.checked_shl(n).unwrap_or(0),
            mask: self.mask.checked_shl(n).unwrap_or(0),
        }
    }

    /// Logical right shift by `n`; `n >= 64` shifts everything out (0).
    pub fn rshift(self, n: u32) -> Tnum {
        Tnum {
            value: self.value.checked_shr(n).unwrap_or(0),
            mask: self.mask.checked_shr(n).unwrap_or(0),
        }
    }

    /// Arithmetic right shift by `n` of the low `bits` bits (32 or 64) taken as a signed
    /// number; a 32-bit result is zero-extended. Shifting the mask arithmetically spreads an
    /// unknown sign bit, a known one spreads from the value. `n >= bits` acts as `bits - 1`
    /// (every bit a copy of the sign).
    pub fn arshift(self, n: u32, bits: u32) -> Tnum {
        if bits == 32 {
            let n = n.min(31);
            Tnum {
                value: u64::from(((self.value as u32 as i32) >> n) as u32),
                mask: u64::from(((self.mask as u32 as i32) >> n) as u32),
            }
        } else {
            let n = n.min(63);
            Tnum {
                value: ((self.value as i64) >> n) as u64,
                mask: ((self.mask as i64) >> n) as u64,
            }
        }
    }

    /// The values in both (meet), when `self` and `o` have a value in common: each bit known
    /// in either is known. When they have none (a bit known 0 in one and 1 in the other),
    /// the result is meaningless; [`Tnum::try_intersect`] says so instead.
    pub fn intersect(self, o: Tnum) -> Tnum {
        let v = self.value | o.value;
        let mu = self.mask & o.mask;
        Tnum { value: v & !mu, mask: mu }
    }

    /// The values in both, or `None` when no value is (a bit known differently in each).
    pub fn try_intersect(self, o: Tnum) -> Option<Tnum> {
        if (self.value ^ o.value) & !self.mask & !o.mask != 0 {
            return None;
        }
        Some(self.intersect(o))
    }

    /// The smallest tnum holding every value of both (join): known where both know the same.
    pub fn union(self, o: Tnum) -> Tnum {
        let mu = self.mask | o.mask | (self.value ^ o.value);
        Tnum { value: self.value & o.value & !mu, mask: mu }
    }

    /// The low `bytes` bytes, zero-extended (`bytes >= 8` keeps all).
    pub fn cast(self, bytes: u32) -> Tnum {
        let keep = if bytes >= 8 { u64::MAX } else { (1u64 << (bytes * 8)) - 1 };
        Tnum { value: self.value & keep, mask: self.mask & keep }
    }

    /// The low 32 bits, zero-extended.
    pub fn subreg(self) -> Tnum {
        self.cast(4)
    }

    /// The high 32 bits of `self` with the low 32 bits of `sub`.
    pub fn with_subreg(self, sub: Tnum) -> Tnum {
        const HIGH: u64 = 0xffff_ffff_0000_0000;
        Tnum {
            value: (self.value & HIGH) | (sub.value & !HIGH),
            mask: (self.mask & HIGH) | (sub.mask & !HIGH),
        }
    }

    /// The low `bytes` bytes (2, 4 or 8) in the opposite byte order, zero-extended: a byte
    /// permutation moves each bit's knowledge with it, so the result is exact.
    pub fn swap_bytes(self, bytes: u32) -> Tnum {
        match bytes {
            2 => Tnum {
                value: u64::from((self.value as u16).swap_bytes()),
                mask: u64::from((self.mask as u16).swap_bytes()),
            },
            4 => Tnum {
                value: u64::from((self.value as u32).swap_bytes()),
                mask: u64::from((self.mask as u32).swap_bytes()),
            },
            _ => Tnum { value: self.value.swap_bytes(), mask: self.mask.swap_bytes() },
        }
    }

    /// Whether every member is a multiple of `size` (a power of two): the low bits known 0,
    /// as an aligned access needs.
    pub fn is_aligned(self, size: u64) -> bool {
        (self.value | self.mask) & size.wrapping_sub(1) == 0
    }

    /// The bitwise complement of every member (order-reversing: `!x <= !y` iff `x >= y`).
    pub fn not(self) -> Tnum {
        Tnum { value: !self.value & !self.mask, mask: self.mask }
    }

    /// The smallest member `>= x`, or `None` when every member is below `x`.
    ///
    /// When `x` is not a member, look at the highest known bit where `x` differs from the
    /// tnum. If `x` has a 0 there, the answer keeps `x` above that bit, sets it, and takes
    /// the smallest member bits below. If `x` has a 1 there, the prefix of `x` above it must
    /// grow: the lowest unknown bit above it where `x` has a 0 becomes 1 (none: no member is
    /// `>= x`), with the smallest member bits below.
    pub fn min_ge(self, x: u64) -> Option<u64> {
        if self.value & self.mask != 0 {
            // Not a tnum (a bit both known and unknown): no member.
            return None;
        }
        if self.contains(x) {
            return Some(x);
        }
        let diff = (x ^ self.value) & !self.mask;
        let h = 63 - diff.leading_zeros();
        let bit = 1u64 << h;
        // Bits strictly above position `p`.
        let above = |p: u32| if p >= 63 { 0 } else { u64::MAX << (p + 1) };
        if x & bit == 0 {
            return Some((x & above(h)) | bit | (self.value & (bit - 1)));
        }
        let candidates = self.mask & !x & above(h);
        if candidates == 0 {
            return None;
        }
        let p = candidates.trailing_zeros();
        let pbit = 1u64 << p;
        Some((x & above(p)) | pbit | (self.value & (pbit - 1)))
    }

    /// The largest member `<= x`, or `None` when every member is above `x` (the mirror of
    /// [`Tnum::min_ge`] through the complement).
    pub fn max_le(self, x: u64) -> Option<u64> {
        self.not().min_ge(!x).map(|y| !y)
    }
}

impl fmt::Display for Tnum {
    /// As the kernel prints `var_off`: `(0x0; 0xff)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({:#x}; {:#x})", self.value, self.mask)
    }
}
