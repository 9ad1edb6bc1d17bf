//! Abstract values: what the optimizer knows about a u32 the filter computes.
//!
//! A [`Domain`] combines an inclusive interval, known bits (bits known to be 0 or 1) and a
//! short list of excluded values. Each part is cheap and catches a different shape of test
//! that pflang produces: ranges (`len > 100`, port ranges), masked compares
//! (`ip[6:2] & 0x1fff == 0`, `ip[0] & 0xf0 == 0x40`) and failed equalities along an `or`
//! chain (`port 80 or port 443 ...`). Everything here over-approximates: a domain always
//! contains every value the expression can really take, so a decision drawn from it is sound.

use crate::eval;
use crate::ir::{BinOp, CmpOp, Expr, Size, ValueSet};

/// How many excluded values a domain remembers (more would make copies of facts costly).
const NE_CAP: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Domain {
    pub lo: u32,
    pub hi: u32,
    /// Bits known to be 0.
    pub zeros: u32,
    /// Bits known to be 1.
    pub ones: u32,
    ne: [u32; NE_CAP],
    ne_len: u8,
}

impl Domain {
    pub const FULL: Domain =
        Domain { lo: 0, hi: u32::MAX, zeros: 0, ones: 0, ne: [0; NE_CAP], ne_len: 0 };

    const EMPTY: Domain = Domain { lo: 1, hi: 0, zeros: 0, ones: 0, ne: [0; NE_CAP], ne_len: 0 };

    pub fn exact(v: u32) -> Domain {
        Domain { lo: v, hi: v, zeros: !v, ones: v, ..Domain::FULL }
    }

    pub fn range(lo: u32, hi: u32) -> Domain {
        Domain { lo, hi, ..Domain::FULL }.normalize()
    }

    /// The domain with more bits known (0 in `zeros`, 1 in `ones`).
    pub fn with_bits(self, zeros: u32, ones: u32) -> Domain {
        if self.is_empty() {
            return self;
        }
        Domain { zeros: self.zeros | zeros, ones: self.ones | ones, ..self }.normalize()
    }

    /// The values a big-endian load of `size` bytes can produce.
    pub fn of_size(size: Size) -> Domain {
        const BYTE: Domain = Domain { hi: 0xff, zeros: !0xff, ..Domain::FULL };
        const HALF: Domain = Domain { hi: 0xffff, zeros: !0xffff, ..Domain::FULL };
        match size {
            Size::Byte => BYTE,
            Size::Half => HALF,
            Size::Word => Domain::FULL,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lo > self.hi
    }

    pub fn as_const(&self) -> Option<u32> {
        (self.lo == self.hi).then_some(self.lo)
    }

    fn excluded(&self) -> &[u32] {
        self.ne.get(..usize::from(self.ne_len)).unwrap_or(&[])
    }

    pub fn contains(&self, v: u32) -> bool {
        self.lo <= v
            && v <= self.hi
            && v & self.zeros == 0
            && v & self.ones == self.ones
            && !self.excluded().contains(&v)
    }

    /// Can the value be 0? (Division guards.)
    pub fn may_be_zero(&self) -> bool {
        self.contains(0)
    }

    /// Tightens the parts against each other; an inconsistent domain becomes empty.
    fn normalize(mut self) -> Domain {
        for _ in 0..3 {
            if self.zeros & self.ones != 0 || self.lo > self.hi {
                return Domain::EMPTY;
            }
            self.lo = self.lo.max(self.ones);
            self.hi = self.hi.min(!self.zeros);
            while self.lo < self.hi && self.excluded().contains(&self.lo) {
                self.lo += 1;
            }
            while self.lo < self.hi && self.excluded().contains(&self.hi) {
                self.hi -= 1;
            }
            if self.lo > self.hi {
                return Domain::EMPTY;
            }
            if self.lo == self.hi {
                let v = self.lo;
                if v & self.zeros != 0 || v & self.ones != self.ones || self.excluded().contains(&v)
                {
                    return Domain::EMPTY;
                }
                return Domain::exact(v);
            }
            // The bits above the highest bit where lo and hi differ are shared by every
            // value in between.
            let agree = (self.lo ^ self.hi).leading_zeros();
            let prefix = u32::MAX.checked_shr(agree).map_or(u32::MAX, |m| !m);
            let (ones, zeros) = (self.ones | (self.lo & prefix), self.zeros | (!self.lo & prefix));
            if ones == self.ones && zeros == self.zeros {
                break;
            }
            self.ones = ones;
            self.zeros = zeros;
        }
        if self.zeros & self.ones != 0 || self.lo > self.hi {
            return Domain::EMPTY;
        }
        if self.ne_len == 0 {
            // (what the loops below give for an empty list, without a `memset` call: most
            // domains normalized are an operator's result, which excludes nothing)
            self.ne = [0; NE_CAP];
            return self;
        }
        // Forget exclusions the other parts already imply.
        let mut kept = 0usize;
        for i in 0..usize::from(self.ne_len) {
            let v = self.ne.get(i).copied().unwrap_or(0);
            let useful =
                self.lo < v && v < self.hi && v & self.zeros == 0 && v & self.ones == self.ones;
            if useful {
                if let Some(slot) = self.ne.get_mut(kept) {
                    *slot = v;
                }
                kept += 1;
            }
        }
        self.ne_len = u8::try_from(kept).unwrap_or(0);
        // Unused slots are zero so that equal domains compare equal.
        for slot in self.ne.iter_mut().skip(kept) {
            *slot = 0;
        }
        self
    }

    /// Whether [`Domain::normalize`] gives this domain back, and would with a value more
    /// excluded (room for it in the list) that it contains strictly between its bounds. Its
    /// first round then changes nothing and stops (the bounds within the known bits, neither
    /// of them excluded, the bits the bounds share known), and every value excluded is kept,
    /// in order (each strictly within the bounds and the known bits), the unused slots zero.
    /// (A nonempty domain is assumed: the caller's value is in it.)
    fn is_normal_with_room(&self) -> bool {
        let agree = (self.lo ^ self.hi).leading_zeros();
        let prefix = u32::MAX.checked_shr(agree).map_or(u32::MAX, |m| !m);
        let len = usize::from(self.ne_len);
        len < NE_CAP
            && self.ones <= self.lo
            && self.hi <= !self.zeros
            && self.lo & prefix & !self.ones == 0
            && !self.lo & prefix & !self.zeros == 0
            && self.excluded().iter().all(|&e| {
                self.lo < e && e < self.hi && e & self.zeros == 0 && e & self.ones == self.ones
            })
            && self.ne.get(len..).is_some_and(|unused| unused.iter().all(|&e| e == 0))
    }

    fn push_excluded(&mut self, v: u32) {
        if usize::from(self.ne_len) < NE_CAP && !self.excluded().contains(&v) {
            if let Some(slot) = self.ne.get_mut(usize::from(self.ne_len)) {
                *slot = v;
                self.ne_len += 1;
            }
        }
    }

    /// Both hold.
    pub fn meet(self, other: Domain) -> Domain {
        if self.is_empty() || other.is_empty() {
            return Domain::EMPTY;
        }
        if other == Domain::FULL {
            return self;
        }
        if self == Domain::FULL {
            return other;
        }
        // One side a single value (a compare's `==`, a constant operand): the other holds it
        // or not, which is what normalizing the intersection finds, without its loops
        // (issue 13: most meets of a small filter's `decide` are of this kind). For the
        // other's known bits disagreeing, normalizing answers empty; so the shortcut is
        // taken only when they agree.
        if let Some(v) = other.single() {
            if self.zeros & self.ones == 0 {
                return if self.contains(v) { other } else { Domain::EMPTY };
            }
        }
        if let Some(v) = self.single() {
            if other.zeros & other.ones == 0 {
                return if other.contains(v) { self } else { Domain::EMPTY };
            }
        }
        self.meet_intersecting(other)
    }

    /// The value of a domain that is exactly [`Domain::exact`] of it.
    fn single(&self) -> Option<u32> {
        (*self == Domain::exact(self.lo)).then_some(self.lo)
    }

    /// [`Domain::meet`] without its shortcuts: the parts intersected, then normalized.
    fn meet_intersecting(self, other: Domain) -> Domain {
        let mut d = Domain {
            lo: self.lo.max(other.lo),
            hi: self.hi.min(other.hi),
            zeros: self.zeros | other.zeros,
            ones: self.ones | other.ones,
            ..self
        };
        for &v in other.excluded() {
            d.push_excluded(v);
        }
        d.normalize()
    }

    /// Either holds (the facts after two paths merge).
    pub fn join(self, other: Domain) -> Domain {
        if self.is_empty() {
            return other;
        }
        if other.is_empty() {
            return self;
        }
        let mut d = Domain {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
            zeros: self.zeros & other.zeros,
            ones: self.ones & other.ones,
            ne: [0; NE_CAP],
            ne_len: 0,
        };
        for &v in self.excluded() {
            if !other.contains(v) {
                d.push_excluded(v);
            }
        }
        for &v in other.excluded() {
            if !self.contains(v) {
                d.push_excluded(v);
            }
        }
        d.normalize()
    }

    pub fn exclude(mut self, v: u32) -> Domain {
        if !self.contains(v) {
            return self;
        }
        if self.lo < v && v < self.hi && self.is_normal_with_room() {
            // `normalize` would give it back with `v` excluded (see `is_normal_with_room`):
            // the failed equalities of a dispatch or an `or` chain, excluded one by one
            // (issue 13, compile-33: ~150 instructions a normalize, 12 per optimize of
            // `port 22`).
            self.push_excluded(v);
            return self;
        }
        self.push_excluded(v);
        if v == self.lo || v == self.hi {
            // normalize moves the bound even when the list was full
            if v == self.lo && self.lo < self.hi {
                self.lo += 1;
            } else if v == self.hi && self.lo < self.hi {
                self.hi -= 1;
            } else {
                return Domain::EMPTY;
            }
        }
        self.normalize()
    }

    /// The domain narrowed by knowing `(value op c) == truth`.
    pub fn refine(self, op: CmpOp, c: u32, truth: bool) -> Domain {
        use CmpOp::*;
        let op = if truth { op } else { negate(op).unwrap_or(op) };
        match (op, truth) {
            (Set, true) => {
                if c == 0 {
                    return Domain::EMPTY;
                }
                let mut d = self;
                if c.is_power_of_two() {
                    d.ones |= c;
                }
                // A nonzero `value & c` means the value is at least c's lowest bit.
                d.lo = d.lo.max(c & c.wrapping_neg());
                d.normalize()
            }
            (Set, false) => Domain { zeros: self.zeros | c, ..self }.normalize(),
            (Eq, _) => self.meet(Domain::exact(c)),
            (Ne, _) => self.exclude(c),
            (Lt, _) => match c.checked_sub(1) {
                Some(h) => self.meet(Domain::range(0, h)),
                None => Domain::EMPTY,
            },
            (Le, _) => self.meet(Domain::range(0, c)),
            (Gt, _) => match c.checked_add(1) {
                Some(l) => self.meet(Domain::range(l, u32::MAX)),
                None => Domain::EMPTY,
            },
            (Ge, _) => self.meet(Domain::range(c, u32::MAX)),
        }
    }

    /// The domain narrowed by knowing whether the value is in `set`.
    pub fn refine_in(self, set: &ValueSet, truth: bool) -> Domain {
        let ranges = set.ranges();
        if truth {
            // The first member of the set at or above lo, and the last at or below hi.
            let i = ranges.partition_point(|&(_, h)| h < self.lo);
            let Some(&(first_lo, _)) = ranges.get(i) else { return Domain::EMPTY };
            let lo = self.lo.max(first_lo);
            let j = ranges.partition_point(|&(l, _)| l <= self.hi);
            let Some(&(_, last_hi)) = j.checked_sub(1).and_then(|j| ranges.get(j)) else {
                return Domain::EMPTY;
            };
            let hi = self.hi.min(last_hi);
            if lo > hi {
                return Domain::EMPTY;
            }
            // With values ruled out, the bounds are the first and last members not ruled
            // out (a dispatch's branch for the other values of a field, `k not in {1, 6}`,
            // then decides `k in {1, 6}` false; the ranges between members do not).
            let (lo, hi) = if self.ne_len == 0 {
                (lo, hi)
            } else {
                let allowed = |v: &u32| !self.excluded().contains(v);
                let within = ranges.get(i..j).unwrap_or(&[]);
                let clip = |&(l, h): &(u32, u32)| (l.max(lo), h.min(hi));
                let first = within.iter().map(clip).find_map(|(l, h)| (l..=h).find(allowed));
                let last =
                    within.iter().rev().map(clip).find_map(|(l, h)| (l..=h).rev().find(allowed));
                let (Some(lo), Some(hi)) = (first, last) else { return Domain::EMPTY };
                (lo, hi)
            };
            let mut d = Domain { lo, hi, ..self }.normalize();
            // A set that leaves out a few values between its ranges (the optimizer merges a
            // dispatch's `k != 1 and k != 6 and k != 17` into `k in {0, 2-5, 7-16, 18-..}`):
            // those values are excluded, so `k == 6` is then decided.
            let gap = |w: &[(u32, u32)]| match w {
                [(_, a), (b, _)] => u64::from(*a) + 1..u64::from(*b),
                _ => 0..0,
            };
            let gaps: u64 = ranges.windows(2).map(|w| gap(w).count() as u64).sum();
            if gaps <= NE_CAP as u64 {
                for v in ranges.windows(2).flat_map(gap) {
                    d = d.exclude(v as u32);
                }
            }
            d
        } else {
            let mut d = self;
            for _ in 0..4 {
                if d.is_empty() {
                    break;
                }
                let lo_in = range_containing(ranges, d.lo);
                let hi_in = range_containing(ranges, d.hi);
                match (lo_in, hi_in) {
                    (None, None) => break,
                    (Some((_, h)), _) => match h.checked_add(1) {
                        Some(l) if l <= d.hi => d = Domain { lo: l, ..d }.normalize(),
                        _ => return Domain::EMPTY,
                    },
                    (None, Some((l, _))) => match l.checked_sub(1) {
                        Some(h) if h >= d.lo => d = Domain { hi: h, ..d }.normalize(),
                        _ => return Domain::EMPTY,
                    },
                }
            }
            // A few members left out one by one (a dispatch's branch for the other values
            // of a header field: `ip[9] not in {1, 6, 17}` then decides `ip[9] == 6`).
            let members: u64 = ranges.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
            if members <= NE_CAP as u64 {
                for &(a, b) in ranges {
                    for v in a..=b {
                        d = d.exclude(v);
                    }
                }
            }
            d
        }
    }

    /// `Some(true)` when every value is in `set`, `Some(false)` when none is.
    pub fn decide_in(&self, set: &ValueSet) -> Option<bool> {
        if self.is_empty() {
            return None;
        }
        let ranges = set.ranges();
        let i = ranges.partition_point(|&(_, h)| h < self.lo);
        match ranges.get(i) {
            None => Some(false),
            Some(&(l, h)) if l <= self.lo && self.hi <= h => Some(true),
            Some(&(l, _)) if l > self.hi => Some(false),
            Some(_) => {
                if let Some(v) = self.as_const() {
                    return Some(set.contains(v));
                }
                None
            }
        }
    }
}

fn range_containing(ranges: &[(u32, u32)], v: u32) -> Option<(u32, u32)> {
    let i = ranges.partition_point(|&(_, h)| h < v);
    ranges.get(i).copied().filter(|&(l, _)| l <= v)
}

/// The comparison that is true exactly when `op` is false (`Set` has none among CmpOps).
pub(crate) fn negate(op: CmpOp) -> Option<CmpOp> {
    use CmpOp::*;
    Some(match op {
        Eq => Ne,
        Ne => Eq,
        Gt => Le,
        Ge => Lt,
        Lt => Ge,
        Le => Gt,
        Set => return None,
    })
}

/// The comparison with its operands swapped: `a op b` == `b (flip op) a`.
pub(crate) fn flip(op: CmpOp) -> CmpOp {
    use CmpOp::*;
    match op {
        Eq | Ne | Set => op,
        Gt => Lt,
        Ge => Le,
        Lt => Gt,
        Le => Ge,
    }
}

/// Smallest all-ones mask covering `v`.
fn smear(v: u32) -> u32 {
    u32::MAX.checked_shr(v.leading_zeros()).unwrap_or(0)
}

/// The abstract counterpart of [`eval::binary`] (for the values where it does not abort).
pub(crate) fn binary(op: BinOp, a: Domain, b: Domain) -> Domain {
    if a.is_empty() || b.is_empty() {
        return Domain::FULL;
    }
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        return eval::binary(op, x, y).map_or(Domain::FULL, Domain::exact);
    }
    let (alo, ahi, blo, bhi) = (u64::from(a.lo), u64::from(a.hi), u64::from(b.lo), u64::from(b.hi));
    let interval = |lo: u64, hi: u64| match (u32::try_from(lo), u32::try_from(hi)) {
        (Ok(lo), Ok(hi)) => Domain::range(lo, hi),
        _ => Domain::FULL,
    };
    match op {
        BinOp::Add => interval(alo + blo, ahi + bhi),
        BinOp::Sub if a.lo >= b.hi => interval(alo - bhi, ahi - blo),
        BinOp::Sub => Domain::FULL,
        BinOp::Mul => interval(alo * blo, ahi * bhi),
        BinOp::Div => interval(alo / bhi.max(1), ahi / blo.max(1)),
        BinOp::Mod if a.hi < b.lo => a,
        BinOp::Mod => Domain::range(0, a.hi.min(b.hi.saturating_sub(1))),
        BinOp::And => Domain {
            lo: 0,
            hi: a.hi.min(b.hi),
            zeros: a.zeros | b.zeros,
            ones: a.ones & b.ones,
            ..Domain::FULL
        }
        .normalize(),
        BinOp::Or => Domain {
            lo: a.lo.max(b.lo),
            hi: smear(a.hi | b.hi),
            zeros: a.zeros & b.zeros,
            ones: a.ones | b.ones,
            ..Domain::FULL
        }
        .normalize(),
        BinOp::Xor => Domain {
            lo: 0,
            hi: smear(a.hi | b.hi),
            zeros: (a.zeros & b.zeros) | (a.ones & b.ones),
            ones: (a.ones & b.zeros) | (a.zeros & b.ones),
            ..Domain::FULL
        }
        .normalize(),
        BinOp::Shl | BinOp::Shr => match b.as_const() {
            Some(k) if k >= 32 => Domain::exact(0),
            Some(k) => shift(op, a, k),
            None if b.lo >= 32 => Domain::exact(0),
            None => Domain::FULL,
        },
    }
}

fn shift(op: BinOp, a: Domain, k: u32) -> Domain {
    let low = (1u32 << k).wrapping_sub(1);
    if op == BinOp::Shl {
        let no_overflow = a.hi.leading_zeros() >= k;
        let (lo, hi) = if no_overflow { (a.lo << k, a.hi << k) } else { (0, u32::MAX) };
        Domain { lo, hi, zeros: (a.zeros << k) | low, ones: a.ones << k, ..Domain::FULL }
            .normalize()
    } else {
        Domain {
            lo: a.lo >> k,
            hi: a.hi >> k,
            zeros: (a.zeros >> k) | !(u32::MAX >> k),
            ones: a.ones >> k,
            ..Domain::FULL
        }
        .normalize()
    }
}

pub(crate) fn neg(a: Domain) -> Domain {
    a.as_const().map_or(Domain::FULL, |v| Domain::exact(v.wrapping_neg()))
}

/// Decides `a op b` from the operands' domains, when they allow only one answer.
pub(crate) fn compare(op: CmpOp, a: Domain, b: Domain) -> Option<bool> {
    use CmpOp::*;
    if a.is_empty() || b.is_empty() {
        return None;
    }
    match op {
        Eq => {
            if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
                return Some(x == y);
            }
            let disjoint = a.hi < b.lo
                || b.hi < a.lo
                || (a.ones & b.zeros) | (a.zeros & b.ones) != 0
                || a.as_const().is_some_and(|x| !b.contains(x))
                || b.as_const().is_some_and(|y| !a.contains(y));
            disjoint.then_some(false)
        }
        Ne => compare(Eq, a, b).map(|r| !r),
        Lt => {
            if a.hi < b.lo {
                Some(true)
            } else if a.lo >= b.hi {
                Some(false)
            } else {
                None
            }
        }
        Le => {
            if a.hi <= b.lo {
                Some(true)
            } else if a.lo > b.hi {
                Some(false)
            } else {
                None
            }
        }
        Gt => compare(Lt, b, a),
        Ge => compare(Le, b, a),
        Set => {
            let d = binary(BinOp::And, a, b);
            if d.lo > 0 || d.ones != 0 {
                Some(true)
            } else if d.hi == 0 {
                Some(false)
            } else {
                None
            }
        }
    }
}

/// What is known about an expression without any facts from the path (bounds from load
/// sizes, masks and constant arithmetic). Used where no fact environment exists.
pub(crate) fn of_expr(e: &Expr) -> Domain {
    match e {
        Expr::Const(c) => Domain::exact(*c),
        Expr::WireLen | Expr::Scratch(_) => Domain::FULL,
        Expr::Load { size, .. } => Domain::of_size(*size),
        Expr::Binary { op, lhs, rhs } => binary(*op, of_expr(lhs), of_expr(rhs)),
        Expr::Neg(x) => neg(of_expr(x)),
    }
}

/// `of_expr(e).lo`, the least value `e` can take, without building the domain of a sum at
/// `e`'s top: guard placement asks it of every load's offset, and a header-length offset
/// (`(ip[0] & 0xf) << 2 + 14`) spent a normalize on the sum only to read its low (issue 13,
/// compile-32).
pub(crate) fn low_of_expr(e: &Expr) -> u32 {
    match e {
        Expr::Const(c) => *c,
        Expr::Binary { op: BinOp::Add, lhs, rhs } => low_of_sum(of_expr(lhs), of_expr(rhs)),
        _ => of_expr(e).lo,
    }
}

/// `binary(BinOp::Add, a, b).lo`. Where `binary` builds the interval of the sum, its
/// `Domain::range` keeps the low: the bits normalizing learns are the prefix the low and
/// the high share, which the low has, and no value is excluded. Where `binary` answers
/// `FULL` (an empty operand, a high that overflows), the low is 0.
fn low_of_sum(a: Domain, b: Domain) -> u32 {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        return eval::binary(BinOp::Add, x, y).map_or(0, |v| v);
    }
    let (lo, hi) = (u64::from(a.lo) + u64::from(b.lo), u64::from(a.hi) + u64::from(b.hi));
    match (u32::try_from(lo), u32::try_from(hi)) {
        (Ok(lo), Ok(_)) => lo,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random expression over loads, constants (some near 2^32, so that sums overflow),
    /// masks, shifts and the other operators, 0 to `depth` deep.
    fn random_expr(rng: &mut weir_testkit::SplitMix64, depth: u32) -> Expr {
        let constant = |rng: &mut weir_testkit::SplitMix64| match rng.below(4) {
            0 => u32::MAX - rng.below(300) as u32,
            1 => rng.next_u64() as u32,
            _ => rng.below(70) as u32,
        };
        if depth == 0 || rng.chance(20) {
            return match rng.below(5) {
                0 | 1 => Expr::Const(constant(rng)),
                2 => Expr::WireLen,
                _ => {
                    let size = [Size::Byte, Size::Half, Size::Word][rng.below_usize(3)];
                    Expr::load(random_expr(rng, depth.saturating_sub(1)), size)
                }
            };
        }
        let ops = [
            BinOp::Add,
            BinOp::Add,
            BinOp::Add,
            BinOp::Sub,
            BinOp::Mul,
            BinOp::Div,
            BinOp::Mod,
            BinOp::And,
            BinOp::Or,
            BinOp::Xor,
            BinOp::Shl,
            BinOp::Shr,
        ];
        let op = ops[rng.below_usize(ops.len())];
        if rng.chance(10) {
            return Expr::Neg(Box::new(random_expr(rng, depth - 1)));
        }
        let rhs =
            if rng.chance(50) { Expr::Const(constant(rng)) } else { random_expr(rng, depth - 1) };
        Expr::binary(op, random_expr(rng, depth - 1), rhs)
    }

    /// The low of an expression read without building a sum's domain is the low of its
    /// domain: random expressions, sums at the top of most.
    #[test]
    fn the_low_of_a_sum_is_the_low_of_its_domain() {
        let mut rng = weir_testkit::SplitMix64::new(0x32c0);
        let (mut sums, mut overflows, mut raised) = (0, 0, 0);
        for i in 0..50_000 {
            let e = if rng.chance(80) {
                let lhs = random_expr(&mut rng, 1 + i % 4);
                let rhs = random_expr(&mut rng, i % 3);
                Expr::Binary { op: BinOp::Add, lhs: Box::new(lhs), rhs: Box::new(rhs) }
            } else {
                random_expr(&mut rng, 1 + i % 4)
            };
            let whole = of_expr(&e);
            assert_eq!(low_of_expr(&e), whole.lo, "{e:?} {whole:?}");
            if let Expr::Binary { op: BinOp::Add, lhs, rhs } = &e {
                sums += 1;
                let (a, b) = (of_expr(lhs), of_expr(rhs));
                overflows += usize::from(u64::from(a.hi) + u64::from(b.hi) > u64::from(u32::MAX));
                raised += usize::from(whole.lo > 0 && whole.lo != whole.hi);
            }
        }
        assert!(
            sums > 30_000 && overflows > 3_000 && raised > 3_000,
            "{sums} {overflows} {raised}"
        );
    }

    /// A set test on a value with values ruled out: the bounds skip the ruled-out members
    /// (a dispatch's branch for a field's other values then decides a test of those
    /// values false), and no value the domain and the set both hold is lost (brute force
    /// over bytes: random sets, random values ruled out).
    #[test]
    fn ruled_out_members_narrow_a_set_test() {
        let types = ValueSet::from_values([0x800, 0x86dd]);
        let others = Domain::of_size(Size::Half).refine_in(&types, false);
        assert!(others.refine_in(&types, true).is_empty());
        let not_ip = Domain::of_size(Size::Half).exclude(0x800);
        assert_eq!(not_ip.refine_in(&types, true).as_const(), Some(0x86dd));
        let mut rng = weir_testkit::SplitMix64::new(0x13);
        for _ in 0..3000 {
            let mut d = Domain::of_size(Size::Byte)
                .refine(CmpOp::Ge, rng.below(64) as u32, true)
                .refine(CmpOp::Le, 192 + rng.below(64) as u32, true);
            for _ in 0..rng.below(NE_CAP as u64 + 1) {
                d = d.exclude(rng.below(256) as u32);
            }
            let ranges: Vec<(u32, u32)> = (0..1 + rng.below(4))
                .map(|_| {
                    let lo = rng.below(256) as u32;
                    (lo, (lo + rng.below(8) as u32).min(255))
                })
                .collect();
            let set = ValueSet::from_ranges(ranges);
            let r = d.refine_in(&set, true);
            for v in 0..=255 {
                if d.contains(v) && set.contains(v) {
                    assert!(r.contains(v), "{v} lost: {d:?} in {set:?} gave {r:?}");
                }
            }
        }
    }

    /// [`Domain::exclude`] as it was, normalizing the domain with the value added: the
    /// oracle of its shortcut.
    fn exclude_normalizing(mut d: Domain, v: u32) -> Domain {
        if !d.contains(v) {
            return d;
        }
        d.push_excluded(v);
        if v == d.lo || v == d.hi {
            if v == d.lo && d.lo < d.hi {
                d.lo += 1;
            } else if v == d.hi && d.lo < d.hi {
                d.hi -= 1;
            } else {
                return Domain::EMPTY;
            }
        }
        d.normalize()
    }

    /// Excluding a value without normalizing (when normalizing would give the domain back
    /// with it) gives what normalizing gives: random domains, normalized and not (known bits
    /// that disagree with the bounds, bounds that share bits not known, values excluded that
    /// the rest implies, full lists, stray values in unused slots), and values in them, at
    /// their bounds and outside; and each domain whose list is empty normalizes to one whose
    /// unused slots are zero.
    #[test]
    fn excluding_without_normalizing_gives_what_normalizing_gives() {
        let mut rng = weir_testkit::SplitMix64::new(0x33e1);
        let (mut shortcut, mut normalized_fine, mut inside) = (0, 0, 0);
        for round in 0..200_000 {
            let base = if rng.chance(30) { rng.next_u64() as u32 } else { 0 };
            let lo = base.saturating_add(rng.below(64) as u32);
            let span = if rng.chance(20) { 1 << 20 } else { 64 };
            let hi = lo.saturating_add(rng.below(span) as u32);
            let mut d = Domain {
                lo,
                hi,
                zeros: if rng.chance(50) { (rng.below(256) as u32) << rng.below(8) } else { 0 },
                ones: if rng.chance(50) { (rng.below(4) as u32) << rng.below(8) } else { 0 },
                ..Domain::FULL
            };
            for _ in 0..rng.below(NE_CAP as u64 + 1) {
                d.push_excluded(lo.wrapping_add(rng.below(70) as u32));
            }
            if round % 3 != 0 {
                d = d.normalize();
            }
            if round % 5 == 1 {
                // a normalized domain with a value excluded that its bounds already rule out
                let stale = [d.lo, d.hi, d.hi.wrapping_add(1)][rng.below_usize(3)];
                d.push_excluded(stale);
            }
            if round % 7 == 0 {
                if let Some(slot) = d.ne.get_mut(NE_CAP - 1) {
                    *slot = 5;
                }
            }
            let v = match rng.below(4) {
                0 => d.lo,
                1 => d.hi,
                _ => d.lo.wrapping_add(rng.below(70) as u32),
            };
            let normal = d.lo < v && v < d.hi && d.contains(v) && d.is_normal_with_room();
            shortcut += usize::from(normal);
            inside += usize::from(d.lo < v && v < d.hi && d.contains(v) && !normal);
            assert_eq!(d.exclude(v), exclude_normalizing(d, v), "{d:?} exclude {v}");
            if d.ne_len == 0 {
                let n = d.normalize();
                assert!(n.ne.iter().all(|&e| e == 0), "{d:?} -> {n:?}");
                normalized_fine += 1;
            }
        }
        // (the shortcut taken often, and often not taken for a value inside: a list with a
        // value ruled out otherwise among them)
        assert!(
            shortcut > 10_000 && inside > 5_000 && normalized_fine > 20_000,
            "{shortcut} {inside} {normalized_fine}"
        );
    }

    /// The shortcuts of `meet` (one side a single value) give what intersecting and
    /// normalizing gives: random domains, normalized and not (known bits that disagree,
    /// bounds outside them, values excluded), met with single values in and out of them,
    /// both ways round.
    #[test]
    fn meeting_a_single_value_gives_what_intersecting_gives() {
        let mut rng = weir_testkit::SplitMix64::new(0x28);
        let mut small = |n: u64| rng.below(n) as u32;
        let (mut inside, mut outside) = (0, 0);
        for round in 0..20_000 {
            let (lo, span) = (small(64), small(64));
            let mut d = Domain {
                lo,
                hi: lo + span,
                zeros: small(256) << 2,
                ones: small(4) | (small(2) << small(8)),
                ..Domain::FULL
            };
            for _ in 0..small(NE_CAP as u64 + 1) {
                d.push_excluded(small(128));
            }
            if round % 2 == 0 {
                d = d.normalize();
            }
            let v = if round % 3 == 0 && !d.is_empty() { d.lo } else { small(128) };
            let single = Domain::exact(v);
            assert_eq!(d.meet(single), d.meet_intersecting(single), "{d:?} meet {v}");
            assert_eq!(single.meet(d), single.meet_intersecting(d), "{v} meet {d:?}");
            if d.meet(single).is_empty() {
                outside += 1;
            } else {
                inside += 1;
            }
        }
        // (both answers met often)
        assert!(inside > 1000 && outside > 1000, "{inside} {outside}");
    }

    #[test]
    fn refine_and_decide() {
        let d = Domain::of_size(Size::Half).refine(CmpOp::Gt, 10, true);
        assert_eq!(compare(CmpOp::Gt, d, Domain::exact(5)), Some(true));
        assert_eq!(compare(CmpOp::Lt, d, Domain::exact(11)), Some(false));
        let d = Domain::FULL.refine(CmpOp::Eq, 0x800, false);
        assert_eq!(compare(CmpOp::Eq, d, Domain::exact(0x800)), Some(false));
        assert_eq!(compare(CmpOp::Eq, d, Domain::exact(0x806)), None);
        let masked = binary(BinOp::And, Domain::exact(0x45), Domain::exact(0xf0));
        assert_eq!(masked.as_const(), Some(0x40));
        let bits = Domain { ones: 0x40, zeros: 0xb0, ..Domain::FULL }.normalize();
        let hi_nibble = binary(BinOp::And, bits, Domain::exact(0xf0));
        assert_eq!(hi_nibble.as_const(), Some(0x40));
        assert!(Domain::exact(3).refine(CmpOp::Ne, 3, true).is_empty());
        let set = ValueSet::from_values([1, 2, 3]);
        assert_eq!(Domain::range(1, 3).decide_in(&set), Some(true));
        assert_eq!(Domain::range(4, 9).decide_in(&set), Some(false));
        assert_eq!(Domain::range(0, 9).refine_in(&set, true), Domain::range(1, 3));
        assert_eq!(Domain::range(1, 9).refine_in(&set, false), Domain::range(4, 9));
    }

    /// A dispatch's branch for a header field's other values: whether the fact is
    /// `k not in {1, 6, 17}` or the complement set the optimizer merges `k != ..` into, the
    /// left-out values are excluded (and only they: the domain stays sound).
    #[test]
    fn sets_leaving_out_a_few_values_exclude_them() {
        let byte = Domain::of_size(Size::Byte);
        let few = ValueSet::from_values([1, 6, 17]);
        let complement = ValueSet::from_ranges([(0, 0), (2, 5), (7, 16), (18, u32::MAX)]);
        for d in [byte.refine_in(&few, false), byte.refine_in(&complement, true)] {
            for v in 0..=255u32 {
                assert_eq!(d.contains(v), ![1, 6, 17].contains(&v), "{v}");
            }
            assert_eq!(compare(CmpOp::Eq, d, Domain::exact(6)), Some(false));
            assert_eq!(compare(CmpOp::Eq, d, Domain::exact(7)), None);
        }
        // More left-out values than the domain remembers: only the bounds narrow.
        let many = ValueSet::from_values([3, 5, 7, 9, 11, 13, 15]);
        let d = byte.refine_in(&many, false);
        assert!(d.contains(5) && d.contains(4) && !d.is_empty());
    }

    #[test]
    fn join_keeps_common_knowledge() {
        let a = Domain::exact(0x800);
        let b = Domain::exact(0x806);
        let j = a.join(b);
        assert!(j.contains(0x800) && j.contains(0x806) && !j.contains(0x900));
        let a = Domain::FULL.exclude(7).exclude(9);
        let b = Domain::FULL.exclude(7);
        assert!(!a.join(b).contains(7) && a.join(b).contains(9));
    }
}
