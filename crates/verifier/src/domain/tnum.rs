//! Tristate numbers: per bit known 0, known 1 or unknown (`mask` bit set = unknown).
//! The operations keep the kernel's names (`add`, `sub`, `mul`), not the operator traits.
#![allow(clippy::should_implement_trait)]

use std::fmt;

/// A set of 64-bit values: those that agree with `value` on every bit not in `mask`.
/// Invariant: `value & mask == 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tnum {
    pub value: u64,
    pub mask: u64,
}

impl Tnum {
    pub const UNKNOWN: Tnum = Tnum { value: 0, mask: u64::MAX };

    pub const fn constant(v: u64) -> Tnum {
        Tnum { value: v, mask: 0 }
    }

    /// The smallest tnum holding every value of `min..=max`.
    pub fn range(min: u64, max: u64) -> Tnum {
        let chi = min ^ max;
        let bits = 64 - chi.leading_zeros();
        if bits > 63 {
            return Tnum::UNKNOWN;
        }
        let delta = (1u64 << bits) - 1;
        Tnum { value: min & !delta, mask: delta }
    }

    pub fn is_const(self) -> bool {
        self.mask == 0
    }

    pub fn contains(self, v: u64) -> bool {
        v & !self.mask == self.value
    }

    /// Whether every value of `other` is in `self`.
    pub fn subsumes(self, other: Tnum) -> bool {
        other.mask & !self.mask == 0 && other.value & !self.mask == self.value
    }

    pub fn add(self, b: Tnum) -> Tnum {
        let sm = self.mask.wrapping_add(b.mask);
        let sv = self.value.wrapping_add(b.value);
        let chi = sm.wrapping_add(sv) ^ sv;
        let mu = chi | self.mask | b.mask;
        Tnum { value: sv & !mu, mask: mu }
    }

    pub fn sub(self, b: Tnum) -> Tnum {
        let dv = self.value.wrapping_sub(b.value);
        let alpha = dv.wrapping_add(self.mask);
        let beta = dv.wrapping_sub(b.mask);
        let mu = (alpha ^ beta) | self.mask | b.mask;
        Tnum { value: dv & !mu, mask: mu }
    }

    pub fn mul(self, b: Tnum) -> Tnum {
        if self.is_const() && b.is_const() {
            return Tnum::constant(self.value.wrapping_mul(b.value));
        }
        // Low zero bits survive a product: the lowest possibly-set bit of each factor.
        let tz = |t: Tnum| (t.value | t.mask).trailing_zeros();
        let zeros = (tz(self) + tz(b)).min(64);
        if zeros >= 64 {
            return Tnum::constant(0);
        }
        Tnum { value: 0, mask: u64::MAX << zeros }
    }

    pub fn and(self, b: Tnum) -> Tnum {
        let alpha = self.value | self.mask;
        let beta = b.value | b.mask;
        let v = self.value & b.value;
        Tnum { value: v, mask: alpha & beta & !v }
    }

    pub fn or(self, b: Tnum) -> Tnum {
        let v = self.value | b.value;
        let mu = self.mask | b.mask;
        Tnum { value: v, mask: mu & !v }
    }

    pub fn xor(self, b: Tnum) -> Tnum {
        let v = self.value ^ b.value;
        let mu = self.mask | b.mask;
        Tnum { value: v & !mu, mask: mu }
    }

    pub fn lshift(self, n: u32) -> Tnum {
        if n >= 64 {
            return Tnum::constant(0);
        }
        Tnum { value: self.value << n, mask: self.mask << n }
    }

    pub fn rshift(self, n: u32) -> Tnum {
        if n >= 64 {
            return Tnum::constant(0);
        }
        Tnum { value: self.value >> n, mask: self.mask >> n }
    }

    /// Arithmetic shift of a `bits`-wide (32 or 64) value; 32-bit results zero-extended.
    pub fn arshift(self, n: u32, bits: u32) -> Tnum {
        if bits == 32 {
            let n = n.min(31);
            let v = ((self.value as u32 as i32) >> n) as u32 as u64;
            let m = ((self.mask as u32 as i32) >> n) as u32 as u64;
            return Tnum { value: v & !m, mask: m };
        }
        let n = n.min(63);
        let v = ((self.value as i64) >> n) as u64;
        let m = ((self.mask as i64) >> n) as u64;
        Tnum { value: v & !m, mask: m }
    }

    /// Values in both.
    pub fn intersect(self, b: Tnum) -> Tnum {
        let v = self.value | b.value;
        let mu = self.mask & b.mask;
        Tnum { value: v & !mu, mask: mu }
    }

    /// Values in either (over-approximated).
    pub fn union(self, b: Tnum) -> Tnum {
        let mu = self.mask | b.mask | (self.value ^ b.value);
        Tnum { value: self.value & !mu, mask: mu }
    }

    /// The low `bytes` bytes (zero-extended).
    pub fn cast(self, bytes: u32) -> Tnum {
        if bytes >= 8 {
            return self;
        }
        let keep = (1u64 << (bytes * 8)) - 1;
        Tnum { value: self.value & keep, mask: self.mask & keep }
    }

    pub fn subreg(self) -> Tnum {
        self.cast(4)
    }

    /// `self` with its low 32 bits replaced by those of `sub`.
    pub fn with_subreg(self, sub: Tnum) -> Tnum {
        let high = Tnum { value: self.value & !0xffff_ffff, mask: self.mask & !0xffff_ffff };
        high.or(sub.subreg())
    }
}

impl fmt::Display for Tnum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_const() {
            write!(f, "{:#x}", self.value)
        } else {
            write!(f, "({:#x}; {:#x})", self.value, self.mask)
        }
    }
}
