//! [`Scalar`]: a tnum and four intervals (signed and unsigned, 64-bit and low 32-bit) that
//! all describe one 64-bit value, kept in step by [`Scalar::normalized`].
//!
//! How the pieces fit:
//! - Every field is a constraint; the value set is the intersection of all five
//!   ([`Scalar::contains`]). A result is sound when each constraint computed for it holds
//!   every concrete result, so each operation computes the constraints it can (the tnum rule,
//!   an interval rule per signedness) and [`Scalar::normalized`] then tightens each from the
//!   others.
//! - Interval rules work on the exact integer range of a result (in `i128`, no overflow) and
//!   then fold it into the register's width: a range shorter than 2^n wraps onto at most two
//!   pieces of the n-bit ring (`Pieces::ring`), and whichever of the unsigned and signed
//!   views sees it contiguous keeps it. This is the kernel's overflow detection on each
//!   interval, generalised: a sum whose bounds both overflow is still exact.
//! - Normalizing intersects the pieces given by every constraint: the low 32 bits of a 64-bit
//!   range, the sign halves, the tnum (each piece's ends moved to the nearest tnum member,
//!   [`Tnum::min_ge`]), and the 32-bit range inside each 2^32 block of the 64-bit range.
//!   What remains gives all four hulls and narrows the tnum ([`Tnum::range`]). An
//!   empty intersection means no value: the operands were contradictory ([`Scalar::is_empty`]).
//! - Small operands (at most 16 members, 64 pairs, quick to list) are computed member by
//!   member: exact hulls and the tightest tnum, where the rules would over-approximate.
//! - 32-bit operations work on a `View` of the low 32 bits and zero-extend their result,
//!   as the engines do; jump refinement at 32 bits narrows the low half and lets normalizing
//!   carry it to the 64-bit bounds.

use std::fmt;

use weir_program::exec::alu;

use super::Tnum;

/// The width an ALU operation or a comparison works at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    /// The low 32 bits (results zero-extended into the 64-bit register).
    W32,
    /// The whole 64-bit register.
    W64,
}

impl Width {
    fn bits(self) -> u32 {
        match self {
            Width::W32 => 32,
            Width::W64 => 64,
        }
    }
}

/// An ALU operation, with the engines' semantics (`weir_program::exec::alu`: division by zero
/// gives 0, remainder by zero leaves the dividend, shift amounts are masked by the width).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    SDiv,
    Mod,
    SMod,
    Or,
    And,
    Lsh,
    Rsh,
    Arsh,
    Xor,
    /// `dst = src`.
    Mov,
    /// sign-extending moves (RFC 9669 MOVSX, offset 8/16/32): `dst = (sN) src`.
    MovSx8,
    MovSx16,
    MovSx32,
    /// `dst = -dst`.
    Neg,
    /// byte swaps: to-little-endian (on a little-endian host: truncation), to-big, and BSWAP (RFC 9669), by width in bits
    ToLe(u32),
    ToBe(u32),
    Bswap(u32),
}

impl AluOp {
    /// The concrete result of `dst op src` at `width`, as the engines compute it (the
    /// interpreter's wrapping arithmetic and `weir_program::exec::alu`); 32-bit results
    /// zero-extended, byte swaps on the whole register. A swap width no engine runs
    /// (not 16, 32 or 64) leaves `dst`.
    pub fn eval(self, width: Width, dst: u64, src: u64) -> u64 {
        let (a, b) = (dst, src);
        if let Some(r) = swap(self, a) {
            return r;
        }
        match width {
            Width::W64 => match self {
                AluOp::Add => a.wrapping_add(b),
                AluOp::Sub => a.wrapping_sub(b),
                AluOp::Mul => a.wrapping_mul(b),
                AluOp::Div => alu::div64(a, b),
                AluOp::SDiv => alu::sdiv64(a, b),
                AluOp::Mod => alu::mod64(a, b),
                AluOp::SMod => alu::smod64(a, b),
                AluOp::Or => a | b,
                AluOp::And => a & b,
                AluOp::Xor => a ^ b,
                AluOp::Lsh => alu::lsh64(a, b),
                AluOp::Rsh => alu::rsh64(a, b),
                AluOp::Arsh => alu::arsh64(a, b),
                AluOp::Mov => b,
                AluOp::MovSx8 => b as i8 as i64 as u64,
                AluOp::MovSx16 => b as i16 as i64 as u64,
                AluOp::MovSx32 => b as i32 as i64 as u64,
                AluOp::Neg => a.wrapping_neg(),
                AluOp::ToLe(_) | AluOp::ToBe(_) | AluOp::Bswap(_) => a,
            },
            Width::W32 => {
                let (x, y) = (a as u32, b as u32);
                u64::from(match self {
                    AluOp::Add => x.wrapping_add(y),
                    AluOp::Sub => x.wrapping_sub(y),
                    AluOp::Mul => x.wrapping_mul(y),
                    AluOp::Div => alu::div32(x, y),
                    AluOp::SDiv => alu::sdiv32(x, y),
                    AluOp::Mod => alu::mod32(x, y),
                    AluOp::SMod => alu::smod32(x, y),
                    AluOp::Or => x | y,
                    AluOp::And => x & y,
                    AluOp::Xor => x ^ y,
                    AluOp::Lsh => alu::lsh32(x, y),
                    AluOp::Rsh => alu::rsh32(x, y),
                    AluOp::Arsh => alu::arsh32(x, y),
                    AluOp::Mov | AluOp::MovSx32 => y,
                    AluOp::MovSx8 => b as i8 as i32 as u32,
                    AluOp::MovSx16 => b as i16 as i32 as u32,
                    AluOp::Neg => x.wrapping_neg(),
                    AluOp::ToLe(_) | AluOp::ToBe(_) | AluOp::Bswap(_) => return a,
                })
            }
        }
    }
}

/// A byte swap's result on the whole register (`None`: not a swap, or a width no engine runs).
fn swap(op: AluOp, a: u64) -> Option<u64> {
    Some(match op {
        AluOp::ToLe(16) => a & 0xffff,
        AluOp::ToLe(32) => a & 0xffff_ffff,
        AluOp::ToLe(64) => a,
        AluOp::ToBe(16) | AluOp::Bswap(16) => u64::from((a as u16).swap_bytes()),
        AluOp::ToBe(32) | AluOp::Bswap(32) => u64::from((a as u32).swap_bytes()),
        AluOp::ToBe(64) | AluOp::Bswap(64) => a.swap_bytes(),
        _ => return None,
    })
}

/// A conditional jump's comparison `dst cond src` (unsigned unless `S`; `Set` is
/// `dst & src != 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JmpCond {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Sgt,
    Sge,
    Slt,
    Sle,
    Set,
}

/// What is known of one 64-bit value: it is a member of `var` and lies in each of the four
/// intervals (`smin..=smax` as `i64`, `umin..=umax` as `u64`, and the same for its low 32
/// bits as `i32` and `u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scalar {
    pub var: Tnum,
    pub smin: i64,
    pub smax: i64,
    pub umin: u64,
    pub umax: u64,
    pub s32min: i32,
    pub s32max: i32,
    pub u32min: u32,
    pub u32max: u32,
}

/// No value: every interval inverted. What operations on contradictory operands give.
const EMPTY: Scalar = Scalar {
    var: Tnum { value: 0, mask: 0 },
    smin: 1,
    smax: 0,
    umin: 1,
    umax: 0,
    s32min: 1,
    s32max: 0,
    u32min: 1,
    u32max: 0,
};

const FULL: Scalar = Scalar {
    var: Tnum::UNKNOWN,
    smin: i64::MIN,
    smax: i64::MAX,
    umin: 0,
    umax: u64::MAX,
    s32min: i32::MIN,
    s32max: i32::MAX,
    u32min: 0,
    u32max: u32::MAX,
};

// ---- n-bit arithmetic helpers (n in 1..=64) -------------------------------------------

/// All ones in the low `bits` bits.
fn umask(bits: u32) -> u64 {
    u64::MAX >> (64 - bits)
}

/// The smallest signed `bits`-bit number.
fn smin_of(bits: u32) -> i64 {
    i64::MIN >> (64 - bits)
}

/// The largest signed `bits`-bit number.
fn smax_of(bits: u32) -> i64 {
    i64::MAX >> (64 - bits)
}

/// The low `bits` bits of `u`, sign-extended.
fn sext(bits: u32, u: u64) -> i64 {
    ((u << (64 - bits)) as i64) >> (64 - bits)
}

// ---- Pieces: a few disjoint intervals of the n-bit ring, in increasing order ------------

/// A set of at most 6 disjoint intervals, sorted. Intersections of the few constraint sets
/// normalizing uses stay well below that; if one ever did not, [`Pieces::push`] merges into
/// the last interval, which only over-approximates.
#[derive(Clone, Copy, Debug)]
struct Pieces {
    n: usize,
    p: [(u64, u64); 6],
}

impl Pieces {
    const EMPTY: Pieces = Pieces { n: 0, p: [(0, 0); 6] };

    #[inline]
    fn one(a: u64, b: u64) -> Pieces {
        let mut r = Pieces::EMPTY;
        r.push(a, b);
        r
    }

    #[inline]
    fn push(&mut self, a: u64, b: u64) {
        if a > b {
            return;
        }
        if self.n == self.p.len() {
            let last = &mut self.p[self.n - 1];
            last.1 = last.1.max(b);
        } else {
            self.p[self.n] = (a, b);
            self.n += 1;
        }
    }

    #[inline]
    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.p[..self.n].iter().copied()
    }

    /// The `bits`-bit ring split at the sign boundary, so that no piece straddles it (the
    /// signed hull then reads off piece ends).
    #[inline]
    fn halves(bits: u32) -> Pieces {
        let half = 1u64 << (bits - 1);
        let mut r = Pieces::one(0, half - 1);
        r.push(half, umask(bits));
        r
    }

    /// `{ x mod 2^bits : lo <= x <= hi }`: the whole ring if the range is that long, else one
    /// piece or two (when it wraps). Empty when `lo > hi`.
    #[inline]
    fn ring(bits: u32, lo: i128, hi: i128) -> Pieces {
        if lo > hi {
            return Pieces::EMPTY;
        }
        let m = 1i128 << bits;
        let max = umask(bits);
        if hi - lo >= m - 1 {
            return Pieces::one(0, max);
        }
        // lo mod 2^bits: the low bits of its two's complement (no i128 division).
        let a = (lo as u128 & (m as u128 - 1)) as i128;
        let end = a + (hi - lo);
        if end < m {
            Pieces::one(a as u64, end as u64)
        } else {
            let mut r = Pieces::one(0, (end - m) as u64);
            r.push(a as u64, max);
            r
        }
    }

    #[inline]
    fn intersect(&self, o: &Pieces) -> Pieces {
        // The common case of a constraint that says nothing (one piece, the whole ring, at
        // either width here) costs nothing.
        if o.n == 1 && o.p[0].0 == 0 && o.p[0].1 >= self.p[self.n.max(1) - 1].1 {
            return *self;
        }
        let mut r = Pieces::EMPTY;
        let (mut i, mut j) = (0, 0);
        while i < self.n && j < o.n {
            let (a, b) = (self.p[i], o.p[j]);
            r.push(a.0.max(b.0), a.1.min(b.1));
            if a.1 < b.1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        r
    }

    /// Each piece replaced by `f` of it (`None`: dropped).
    #[inline]
    fn map(&self, f: impl Fn(u64, u64) -> Option<(u64, u64)>) -> Pieces {
        let mut r = Pieces::EMPTY;
        for (a, b) in self.iter() {
            if let Some((a, b)) = f(a, b) {
                r.push(a, b);
            }
        }
        r
    }

    #[inline]
    fn u_hull(&self) -> Option<(u64, u64)> {
        (self.n > 0).then(|| (self.p[0].0, self.p[self.n - 1].1))
    }

    /// The signed hull, for pieces that do not straddle the sign boundary ([`Pieces::halves`]):
    /// the negative pieces are the last in unsigned order.
    #[inline]
    fn s_hull(&self, bits: u32) -> Option<(i64, i64)> {
        if self.n == 0 {
            return None;
        }
        let half = 1u64 << (bits - 1);
        let pieces = &self.p[..self.n];
        let lo = pieces.iter().find(|p| p.0 >= half).unwrap_or(&pieces[0]).0;
        let hi = pieces.iter().rev().find(|p| p.1 < half).unwrap_or(&pieces[self.n - 1]).1;
        Some((sext(bits, lo), sext(bits, hi)))
    }
}

// ---- View: one width of a scalar ---------------------------------------------------------

/// A scalar seen at `bits` bits (32 or 64): its tnum cut to that width and its unsigned and
/// signed bounds there. ALU rules and jump refinement are written once over views.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct View {
    bits: u32,
    t: Tnum,
    umin: u64,
    umax: u64,
    smin: i64,
    smax: i64,
}

impl View {
    fn full(bits: u32) -> View {
        View {
            bits,
            t: Tnum { value: 0, mask: umask(bits) },
            umin: 0,
            umax: umask(bits),
            smin: smin_of(bits),
            smax: smax_of(bits),
        }
    }

    /// Nothing known but the tnum.
    fn of_tnum(bits: u32, t: Tnum) -> View {
        let m = umask(bits);
        View { t: Tnum { value: t.value & m, mask: t.mask & m }, ..View::full(bits) }
    }

    fn constant(bits: u32, v: u64) -> View {
        let v = v & umask(bits);
        let s = sext(bits, v);
        View { bits, t: Tnum::constant(v), umin: v, umax: v, smin: s, smax: s }
    }

    fn as_const(&self) -> Option<u64> {
        if self.t.is_const() {
            Some(self.t.value)
        } else {
            (self.umin == self.umax).then_some(self.umin)
        }
    }

    fn with_u(mut self, lo: u64, hi: u64) -> View {
        self.umin = self.umin.max(lo);
        self.umax = self.umax.min(hi);
        self
    }

    fn with_s(mut self, lo: i64, hi: i64) -> View {
        self.smin = self.smin.max(lo);
        self.smax = self.smax.min(hi);
        self
    }

    /// Narrowed by "the result is `x mod 2^bits` for some integer `x` in `[lo, hi]`": both
    /// hulls of that set.
    fn with_ring(self, lo: i128, hi: i128) -> View {
        let p = Pieces::ring(self.bits, lo, hi).intersect(&Pieces::halves(self.bits));
        match (p.u_hull(), p.s_hull(self.bits)) {
            (Some((u0, u1)), Some((s0, s1))) => self.with_u(u0, u1).with_s(s0, s1),
            // An empty range comes only from empty operands: nothing to narrow by.
            _ => self,
        }
    }

    /// Whether no constraint is contradictory on its own (a quick emptiness check).
    fn is_plausible(&self) -> bool {
        self.umin <= self.umax && self.smin <= self.smax && self.t.value & self.t.mask == 0
    }
}

impl Scalar {
    /// Every 64-bit value.
    pub fn unknown() -> Scalar {
        FULL
    }

    /// No value (what contradictory constraints denote); [`Scalar::is_empty`] is true.
    pub fn empty() -> Scalar {
        EMPTY
    }

    /// Exactly `v`.
    pub fn constant(v: u64) -> Scalar {
        Scalar {
            var: Tnum::constant(v),
            smin: v as i64,
            smax: v as i64,
            umin: v,
            umax: v,
            s32min: v as u32 as i32,
            s32max: v as u32 as i32,
            u32min: v as u32,
            u32max: v as u32,
        }
    }

    /// The members of `t`, with the bounds it implies.
    pub fn from_tnum(t: Tnum) -> Scalar {
        Scalar { var: t, ..FULL }.normalized().unwrap_or(EMPTY)
    }

    /// Every value in `[min, max]` (unsigned); empty if `min > max`.
    pub fn range_u64(min: u64, max: u64) -> Scalar {
        Scalar { umin: min, umax: max, ..FULL }.normalized().unwrap_or(EMPTY)
    }

    /// Every value in `[min, max]` taken as signed; empty if `min > max`.
    pub fn range_i64(min: i64, max: i64) -> Scalar {
        Scalar { smin: min, smax: max, ..FULL }.normalized().unwrap_or(EMPTY)
    }

    /// The one value held, if there is exactly one.
    pub fn as_const(&self) -> Option<u64> {
        if self.var.is_const() {
            Some(self.var.value)
        } else {
            (self.umin == self.umax).then_some(self.umin)
        }
    }

    /// Whether `v` satisfies the tnum and all four intervals.
    pub fn contains(&self, v: u64) -> bool {
        self.var.contains(v)
            && (self.umin..=self.umax).contains(&v)
            && (self.smin..=self.smax).contains(&(v as i64))
            && (self.u32min..=self.u32max).contains(&(v as u32))
            && (self.s32min..=self.s32max).contains(&(v as u32 as i32))
    }

    /// Whether every value of `other` is a value of `self` (for state pruning). Sound, not
    /// complete: it compares constraint by constraint, so `other` should be normalized (every
    /// constructor and operation here returns normalized scalars).
    pub fn subsumes(&self, other: &Scalar) -> bool {
        if other.is_plainly_empty() {
            return true;
        }
        self.var.subsumes(other.var)
            && self.umin <= other.umin
            && other.umax <= self.umax
            && self.smin <= other.smin
            && other.smax <= self.smax
            && self.u32min <= other.u32min
            && other.u32max <= self.u32max
            && self.s32min <= other.s32min
            && other.s32max <= self.s32max
    }

    /// A scalar holding every value of both (each constraint joined, then normalized).
    pub fn join(&self, other: &Scalar) -> Scalar {
        if self.is_plainly_empty() {
            return *other;
        }
        if other.is_plainly_empty() {
            return *self;
        }
        Scalar {
            var: self.var.union(other.var),
            smin: self.smin.min(other.smin),
            smax: self.smax.max(other.smax),
            umin: self.umin.min(other.umin),
            umax: self.umax.max(other.umax),
            s32min: self.s32min.min(other.s32min),
            s32max: self.s32max.max(other.s32max),
            u32min: self.u32min.min(other.u32min),
            u32max: self.u32max.max(other.u32max),
        }
        .normalized()
        .unwrap_or(EMPTY)
    }

    /// The values of both, or `None` when there is none.
    pub fn meet(&self, other: &Scalar) -> Option<Scalar> {
        Scalar {
            var: self.var.try_intersect(other.var)?,
            smin: self.smin.max(other.smin),
            smax: self.smax.min(other.smax),
            umin: self.umin.max(other.umin),
            umax: self.umax.min(other.umax),
            s32min: self.s32min.max(other.s32min),
            s32max: self.s32max.min(other.s32max),
            u32min: self.u32min.max(other.u32min),
            u32max: self.u32max.min(other.u32max),
        }
        .normalized()
    }

    /// Whether no value satisfies all the constraints.
    pub fn is_empty(&self) -> bool {
        self.normalized().is_none()
    }

    /// An inverted interval or a broken tnum: empty without further thought.
    fn is_plainly_empty(&self) -> bool {
        self.umin > self.umax
            || self.smin > self.smax
            || self.u32min > self.u32max
            || self.s32min > self.s32max
            || self.var.value & self.var.mask != 0
    }

    /// The low `bytes` bytes (1, 2 or 4; 8 or more: all), zero-extended: what a narrower
    /// load or spill of the value gives back.
    pub fn truncated(&self, bytes: u32) -> Scalar {
        match bytes {
            0 => Scalar::constant(0),
            1 | 2 | 4 => Scalar::from_view(low_bits(self, bytes * 8)),
            3 => Scalar::from_tnum(self.var.cast(3)),
            5..=7 => Scalar::from_tnum(self.var.cast(bytes)),
            _ => *self,
        }
    }

    /// The low 32 bits, zero-extended.
    pub fn zext32(&self) -> Scalar {
        Scalar {
            var: self.var.subreg(),
            umin: u64::from(self.u32min),
            umax: u64::from(self.u32max),
            ..FULL
        }
        .with_view32_bounds(self)
        .normalized()
        .unwrap_or(EMPTY)
    }

    /// `self` with the 32-bit bounds of `from` (a helper of [`Scalar::zext32`]).
    fn with_view32_bounds(mut self, from: &Scalar) -> Scalar {
        self.u32min = from.u32min;
        self.u32max = from.u32max;
        self.s32min = from.s32min;
        self.s32max = from.s32max;
        self
    }

    /// Every constraint narrowed by the others, or `None` when together they hold no value.
    ///
    /// Rounds until nothing changes (at most four): the low-32-bit set is the intersection of
    /// the two 32-bit intervals, the low halves of both 64-bit intervals and the tnum's low
    /// half; the 64-bit set is the intersection of both 64-bit intervals, with each piece's
    /// ends moved to the nearest value that is a tnum member and whose low half is in the
    /// 32-bit interval; then the tnum is narrowed by both unsigned intervals.
    pub fn normalized(&self) -> Option<Scalar> {
        let mut s = *self;
        if s.var.value & s.var.mask != 0 {
            return None;
        }
        if s == FULL {
            return Some(s);
        }
        if s.var.is_const() {
            // One candidate: it is the value or there is none.
            return s.contains(s.var.value).then(|| Scalar::constant(s.var.value));
        }
        for _ in 0..4 {
            let prev = s;
            // The low 32 bits.
            let sub = s.var.subreg();
            let p32 = Pieces::one(u64::from(s.u32min), u64::from(s.u32max))
                .intersect(&Pieces::ring(32, i128::from(s.s32min), i128::from(s.s32max)))
                .intersect(&Pieces::ring(32, i128::from(s.umin), i128::from(s.umax)))
                .intersect(&Pieces::ring(32, i128::from(s.smin), i128::from(s.smax)))
                .intersect(&Pieces::halves(32))
                .map(|a, b| {
                    let (a, b) = (sub.min_ge(a)?, sub.max_le(b)?);
                    (a <= b).then_some((a, b))
                });
            let (u0, u1) = p32.u_hull()?;
            let (s0, s1) = p32.s_hull(32)?;
            (s.u32min, s.u32max) = (u0 as u32, u1 as u32);
            (s.s32min, s.s32max) = (s0 as i32, s1 as i32);
            // The whole value.
            let var = s.var;
            let p64 = Pieces::one(s.umin, s.umax)
                .intersect(&Pieces::ring(64, i128::from(s.smin), i128::from(s.smax)))
                .intersect(&Pieces::halves(64))
                .map(|a, b| {
                    let (a, b) = (up_to_member(var, &p32, a)?, down_to_member(var, &p32, b)?);
                    (a <= b).then_some((a, b))
                });
            (s.umin, s.umax) = p64.u_hull()?;
            (s.smin, s.smax) = p64.s_hull(64)?;
            // The tnum, from the unsigned intervals.
            let var = s.var.try_intersect(Tnum::range(s.umin, s.umax))?;
            let sub = var
                .subreg()
                .try_intersect(Tnum::range(u64::from(s.u32min), u64::from(s.u32max)))?;
            s.var = var.with_subreg(sub);
            if s == prev {
                break;
            }
        }
        Some(s)
    }

    /// The scalar seen at `width`.
    fn view(&self, width: Width) -> View {
        match width {
            Width::W64 => View {
                bits: 64,
                t: self.var,
                umin: self.umin,
                umax: self.umax,
                smin: self.smin,
                smax: self.smax,
            },
            Width::W32 => View {
                bits: 32,
                t: self.var.subreg(),
                umin: u64::from(self.u32min),
                umax: u64::from(self.u32max),
                smin: i64::from(self.s32min),
                smax: i64::from(self.s32max),
            },
        }
    }

    /// The result of an operation computed as a view at `v.bits`: the whole register at 64
    /// bits, or the low half zero-extended at 32.
    fn from_view(v: View) -> Scalar {
        let s = if v.bits == 64 {
            Scalar { var: v.t, umin: v.umin, umax: v.umax, smin: v.smin, smax: v.smax, ..FULL }
        } else {
            Scalar {
                var: v.t.subreg(),
                umin: v.umin,
                umax: v.umax,
                u32min: v.umin as u32,
                u32max: v.umax as u32,
                s32min: v.smin as i32,
                s32max: v.smax as i32,
                ..FULL
            }
        };
        s.normalized().unwrap_or(EMPTY)
    }

    /// A 64-bit result `v` whose low half is also known as the 32-bit view `low`.
    fn from_views(v: View, low: View) -> Scalar {
        // `low.t` knows only the low half (its high half reads as zero).
        let var = v.t.subreg().try_intersect(low.t).map_or(v.t, |sub| v.t.with_subreg(sub));
        Scalar {
            var,
            umin: v.umin,
            umax: v.umax,
            smin: v.smin,
            smax: v.smax,
            u32min: low.umin as u32,
            u32max: low.umax as u32,
            s32min: low.smin as i32,
            s32max: low.smax as i32,
        }
        .normalized()
        .unwrap_or(EMPTY)
    }

    /// `self` with the part seen at `v.bits` narrowed to `v` (jump refinement), or `None`
    /// when nothing is left.
    fn with_view(&self, v: View) -> Option<Scalar> {
        let s = if v.bits == 64 {
            Scalar { var: v.t, umin: v.umin, umax: v.umax, smin: v.smin, smax: v.smax, ..*self }
        } else {
            Scalar {
                var: self.var.with_subreg(v.t),
                u32min: v.umin as u32,
                u32max: v.umax as u32,
                s32min: v.smin as i32,
                s32max: v.smax as i32,
                ..*self
            }
        };
        s.normalized()
    }

    /// dst = dst op src at `width` (32-bit results zero-extended into 64, as the engines do).
    /// `Mov` and the `MovSx` moves read `src` only; for Neg/ToLe/ToBe/Bswap the src is
    /// ignored, and byte swaps act on the whole register whatever the width (as the engines
    /// do: the width of a swap is in the operation). Sound for the concrete semantics in
    /// `weir_program::exec::alu` for every pair of contained values.
    pub fn alu(op: AluOp, width: Width, dst: &Scalar, src: &Scalar) -> Scalar {
        let reads_dst = !matches!(op, AluOp::Mov | AluOp::MovSx8 | AluOp::MovSx16 | AluOp::MovSx32);
        let reads_src =
            !matches!(op, AluOp::Neg | AluOp::ToLe(_) | AluOp::ToBe(_) | AluOp::Bswap(_));
        if (reads_dst && dst.is_plainly_empty()) || (reads_src && src.is_plainly_empty()) {
            return EMPTY;
        }
        let bits = width.bits();
        let d_const = if reads_dst { dst.as_const() } else { Some(0) };
        let s_const = if reads_src { src.as_const() } else { Some(0) };
        if !rules_only() {
            if let (Some(a), Some(b)) = (d_const, s_const) {
                return Scalar::constant(op.eval(width, a, b));
            }
            let (d, s) = (reads_dst.then_some(dst), reads_src.then_some(src));
            if let Some(r) = enumerated(op, width, d, s) {
                return r;
            }
        }
        match op {
            AluOp::Mov => match width {
                Width::W64 => *src,
                Width::W32 => src.zext32(),
            },
            AluOp::MovSx8 => Scalar::from_view(sign_extend(src, 8, bits)),
            AluOp::MovSx16 => Scalar::from_view(sign_extend(src, 16, bits)),
            AluOp::MovSx32 if bits == 32 => src.zext32(),
            AluOp::MovSx32 => Scalar::from_view(sign_extend(src, 32, bits)),
            AluOp::ToLe(64) => *dst,
            AluOp::ToLe(n @ (16 | 32)) => Scalar::from_view(low_bits(dst, n)),
            AluOp::ToBe(n @ (16 | 32 | 64)) | AluOp::Bswap(n @ (16 | 32 | 64)) => {
                Scalar::from_tnum(dst.var.swap_bytes(n / 8))
            }
            // No engine runs another swap width; nothing is known of what it would give.
            AluOp::ToLe(_) | AluOp::ToBe(_) | AluOp::Bswap(_) => FULL,
            _ => {
                let rule = |d: &View, s: &View| match op {
                    AluOp::Add => add(d, s),
                    AluOp::Sub => sub(d, s),
                    AluOp::Neg => sub(&View::constant(d.bits, 0), d),
                    AluOp::Mul => mul(d, s),
                    AluOp::Div => div(d, s),
                    AluOp::Mod => rem(d, s),
                    AluOp::SDiv => sdiv(d, s),
                    AluOp::SMod => srem(d, s),
                    AluOp::And => and(d, s),
                    AluOp::Or => or(d, s),
                    AluOp::Xor => xor(d, s),
                    AluOp::Lsh => lsh(d, s),
                    AluOp::Rsh => rsh(d, s),
                    _ => arsh(d, s),
                };
                let r = rule(&dst.view(width), &src.view(width));
                // The low half of a 64-bit sum, difference, product or bitwise operation is
                // the 32-bit operation on the low halves: the 32-bit bounds follow from the
                // operands' 32-bit bounds too, as in the kernel (which runs both).
                let low_half_agrees = matches!(
                    op,
                    AluOp::Add
                        | AluOp::Sub
                        | AluOp::Neg
                        | AluOp::Mul
                        | AluOp::And
                        | AluOp::Or
                        | AluOp::Xor
                );
                if width == Width::W64 && low_half_agrees {
                    let r32 = rule(&dst.view(Width::W32), &src.view(Width::W32));
                    Scalar::from_views(r, r32)
                } else {
                    Scalar::from_view(r)
                }
            }
        }
    }

    /// What a conditional jump `if dst cond src` tells on the taken (taken=true) or
    /// fall-through edge: refined (dst, src), or None when that edge is impossible.
    pub fn refine(
        cond: JmpCond,
        width: Width,
        dst: &Scalar,
        src: &Scalar,
        taken: bool,
    ) -> Option<(Scalar, Scalar)> {
        if dst.is_plainly_empty() || src.is_plainly_empty() {
            return None;
        }
        if !rules_only() {
            if let Some(exact) = refined_by_members(cond, width, dst, src, taken) {
                return exact;
            }
        }
        let rel = Rel::of(cond, taken);
        let (d0, s0) = (dst.view(width), src.view(width));
        let (mut d, mut s) = (d0, s0);
        refine_views(rel, &mut d, &mut s)?;
        // A side the relation did not narrow stays as it was (no normalizing to redo).
        let d = if d == d0 { *dst } else { dst.with_view(d)? };
        let s = if s == s0 { *src } else { src.with_view(s)? };
        Some((d, s))
    }

    /// Some(true/false) when the branch is decided for every contained pair: decided when
    /// refinement finds the other edge impossible.
    pub fn branch_taken(cond: JmpCond, width: Width, dst: &Scalar, src: &Scalar) -> Option<bool> {
        let taken = Scalar::refine(cond, width, dst, src, true).is_some();
        let fall = Scalar::refine(cond, width, dst, src, false).is_some();
        match (taken, fall) {
            (true, false) => Some(true),
            (false, true) => Some(false),
            _ => None,
        }
    }
}

#[cfg(test)]
thread_local! {
    static RULES_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether constant folding and member-by-member computation are off, so that tests reach
/// the rules with small operands too (whose every member they can list). Always false
/// outside tests.
fn rules_only() -> bool {
    #[cfg(test)]
    {
        RULES_ONLY.with(|r| r.get())
    }
    #[cfg(not(test))]
    {
        false
    }
}

/// Runs `f` with [`rules_only`] on (tests only).
#[cfg(test)]
pub(crate) fn by_rules<T>(f: impl FnOnce() -> T) -> T {
    RULES_ONLY.with(|r| r.set(true));
    let v = f();
    RULES_ONLY.with(|r| r.set(false));
    v
}

/// At most how many members an operand may have, and how many pairs, for [`Scalar::alu`]
/// to compute the operation on each of them instead of by rule.
const SMALL: usize = 16;
const SMALL_PAIRS: usize = 64;

/// The members of `s` when it has at most [`SMALL`] and they are quick to list: a short
/// unsigned or signed range, or a tnum with at most four unknown bits, filtered by
/// [`Scalar::contains`]. The list is complete, which is what makes computing on it sound.
fn small_members(s: &Scalar) -> Option<([u64; SMALL], usize)> {
    let mut out = [0u64; SMALL];
    let mut n = 0;
    let mut keep = |v: u64| {
        if s.contains(v) && n < SMALL {
            out[n] = v;
            n += 1;
        }
    };
    if s.umin <= s.umax && s.umax - s.umin < SMALL as u64 {
        (s.umin..=s.umax).for_each(&mut keep);
    } else if s.smin <= s.smax && (i128::from(s.smax) - i128::from(s.smin)) < SMALL as i128 {
        (s.smin..=s.smax).for_each(|v| keep(v as u64));
    } else if s.var.mask.count_ones() <= 4 && s.var.value & s.var.mask == 0 {
        // Every subset of the unknown bits.
        let mut sub = 0u64;
        loop {
            keep(s.var.value | sub);
            if sub == s.var.mask {
                break;
            }
            sub = sub.wrapping_sub(s.var.mask) & s.var.mask;
        }
    } else {
        return None;
    }
    Some((out, n))
}

/// `dst op src` computed on every pair of members, when both operands (those the operation
/// reads: `None` for one it ignores) are small sets: the exact hulls and the tightest tnum
/// of the results. `None` when an operand is too large to list.
fn enumerated(
    op: AluOp,
    width: Width,
    dst: Option<&Scalar>,
    src: Option<&Scalar>,
) -> Option<Scalar> {
    let list = |s: Option<&Scalar>| match s {
        Some(s) => small_members(s),
        None => Some(([0; SMALL], 1)),
    };
    let (dm, dn) = list(dst)?;
    let (sm, sn) = list(src)?;
    if dn * sn > SMALL_PAIRS {
        return None;
    }
    let results =
        dm[..dn].iter().flat_map(|&a| sm[..sn].iter().map(move |&b| op.eval(width, a, b)));
    // No member at all: the operands were contradictory.
    Some(of_values(results).unwrap_or(EMPTY))
}

/// The tightest scalar holding `values` (hulls of all four views, union of constants), or
/// `None` when there are none.
fn of_values(values: impl Iterator<Item = u64>) -> Option<Scalar> {
    let mut r: Option<Scalar> = None;
    for v in values {
        r = Some(match r {
            None => Scalar::constant(v),
            Some(r) => Scalar {
                var: r.var.union(Tnum::constant(v)),
                umin: r.umin.min(v),
                umax: r.umax.max(v),
                smin: r.smin.min(v as i64),
                smax: r.smax.max(v as i64),
                u32min: r.u32min.min(v as u32),
                u32max: r.u32max.max(v as u32),
                s32min: r.s32min.min(v as u32 as i32),
                s32max: r.s32max.max(v as u32 as i32),
            },
        });
    }
    r.map(|r| r.normalized().unwrap_or(EMPTY))
}

/// Jump refinement on every pair of members, when both operands are small sets: each side
/// keeps exactly the members that have a partner taking the edge. `Some(None)`: no pair
/// takes it; `None`: an operand is too large to list.
#[allow(clippy::type_complexity)]
fn refined_by_members(
    cond: JmpCond,
    width: Width,
    dst: &Scalar,
    src: &Scalar,
    taken: bool,
) -> Option<Option<(Scalar, Scalar)>> {
    let (dm, dn) = small_members(dst)?;
    let (sm, sn) = small_members(src)?;
    if dn * sn > SMALL_PAIRS {
        return None;
    }
    let (dm, sm) = (&dm[..dn], &sm[..sn]);
    let pairs = || {
        dm.iter()
            .flat_map(move |&a| sm.iter().map(move |&b| (a, b)))
            .filter(move |&(a, b)| cond.holds(width, a, b) == taken)
    };
    let d = of_values(pairs().map(|p| p.0));
    let s = of_values(pairs().map(|p| p.1));
    Some(d.zip(s))
}

/// Moves `a` up to the smallest value `>= a` that is a member of `t` and whose low 32 bits
/// are in `low` (the low-half set), or `None` when there is none. Each step skips only
/// values that fail one of the two, so stopping after a few rounds is still sound.
fn up_to_member(t: Tnum, low: &Pieces, mut a: u64) -> Option<u64> {
    for _ in 0..4 {
        let b = block_up(t.min_ge(a)?, low)?;
        if b == a {
            break;
        }
        a = b;
    }
    Some(a)
}

/// The mirror of [`up_to_member`]: the largest such value `<= b`.
fn down_to_member(t: Tnum, low: &Pieces, mut b: u64) -> Option<u64> {
    for _ in 0..4 {
        let a = block_down(t.max_le(b)?, low)?;
        if a == b {
            break;
        }
        b = a;
    }
    Some(b)
}

/// The smallest value `>= a` whose low 32 bits are in `low` (non-empty): in `a`'s block of
/// 2^32, or at the first low value of the next block.
fn block_up(a: u64, low: &Pieces) -> Option<u64> {
    let (l, high) = (a & 0xffff_ffff, a & !0xffff_ffff);
    match low.iter().find(|p| p.1 >= l) {
        Some((start, _)) if start <= l => Some(a),
        Some((start, _)) => Some(high | start),
        None => high.checked_add(1 << 32).map(|h| h | low.u_hull().map_or(0, |p| p.0)),
    }
}

/// The largest value `<= b` whose low 32 bits are in `low` (non-empty).
fn block_down(b: u64, low: &Pieces) -> Option<u64> {
    let (l, high) = (b & 0xffff_ffff, b & !0xffff_ffff);
    match low.iter().filter(|p| p.0 <= l).last() {
        Some((_, end)) if end >= l => Some(b),
        Some((_, end)) => Some(high | end),
        None => high.checked_sub(1 << 32).map(|h| h | low.u_hull().map_or(0xffff_ffff, |p| p.1)),
    }
}

// ---- ALU rules on views ------------------------------------------------------------------

fn add(a: &View, b: &View) -> View {
    let bits = a.bits;
    View::of_tnum(bits, a.t.add(b.t))
        .with_ring(i128::from(a.umin) + i128::from(b.umin), i128::from(a.umax) + i128::from(b.umax))
        .with_ring(i128::from(a.smin) + i128::from(b.smin), i128::from(a.smax) + i128::from(b.smax))
}

fn sub(a: &View, b: &View) -> View {
    let bits = a.bits;
    View::of_tnum(bits, a.t.sub(b.t))
        .with_ring(i128::from(a.umin) - i128::from(b.umax), i128::from(a.umax) - i128::from(b.umin))
        .with_ring(i128::from(a.smin) - i128::from(b.smax), i128::from(a.smax) - i128::from(b.smin))
}

fn mul(a: &View, b: &View) -> View {
    let bits = a.bits;
    let mut r = View::of_tnum(bits, a.t.mul(b.t));
    // Unsigned: the product is monotone in both, so its range is the corners'. Products of
    // two u64 fit in u128; past i128 the range is too long to tell anything anyway.
    let lo = u128::from(a.umin) * u128::from(b.umin);
    let hi = u128::from(a.umax) * u128::from(b.umax);
    if let (Ok(lo), Ok(hi)) = (i128::try_from(lo), i128::try_from(hi)) {
        r = r.with_ring(lo, hi);
    }
    // Signed: the extremes of a product over a box are at its corners (|x| <= 2^63, so the
    // products fit in i128).
    let corners = [
        i128::from(a.smin) * i128::from(b.smin),
        i128::from(a.smin) * i128::from(b.smax),
        i128::from(a.smax) * i128::from(b.smin),
        i128::from(a.smax) * i128::from(b.smax),
    ];
    r.with_ring(min4(corners), max4(corners))
}

fn min4(c: [i128; 4]) -> i128 {
    c[0].min(c[1]).min(c[2].min(c[3]))
}

fn max4(c: [i128; 4]) -> i128 {
    c[0].max(c[1]).max(c[2].max(c[3]))
}

/// Unsigned division; by zero gives 0.
fn div(a: &View, b: &View) -> View {
    let bits = a.bits;
    if b.umax == 0 {
        return View::constant(bits, 0);
    }
    // The non-zero divisors are [max(umin, 1), umax]; the quotient falls as they grow.
    let bmin = b.umin.max(1);
    let lo = if b.umin == 0 { 0 } else { a.umin / b.umax };
    let hi = a.umax / bmin;
    View::full(bits).with_u(lo, hi)
}

/// Unsigned remainder; by zero leaves the dividend.
fn rem(a: &View, b: &View) -> View {
    let bits = a.bits;
    if b.umax == 0 {
        return *a;
    }
    let bmin = b.umin.max(1);
    if a.umax < bmin {
        // Every non-zero divisor exceeds the dividend (which is the result), and a zero
        // divisor leaves it too.
        return *a;
    }
    // x % d <= min(x, d - 1), and a zero divisor gives x itself.
    let hi = if b.umin == 0 { a.umax } else { a.umax.min(b.umax - 1) };
    let mut r = View::full(bits).with_u(0, hi);
    if let Some(d) = b.as_const().filter(|&d| d != 0) {
        if d.is_power_of_two() {
            // x % 2^k keeps the low k bits.
            r.t = a.t.and(Tnum::constant(d - 1));
        }
    }
    if b.umin >= 1 && a.umin / b.umax == a.umax / b.umin {
        // The quotient q is the same for every pair (it falls as the divisor grows and rises
        // with the dividend), so the remainder is x - q*d, smallest at the smallest x and
        // largest d (within one period of a constant divisor: it follows the dividend).
        let q = a.umin / b.umax;
        r = r.with_u(a.umin - q * b.umax, a.umax - q * b.umin);
    }
    r
}

/// The non-zero part of a signed divisor range: its negative and positive sub-ranges.
fn nonzero_parts(b: &View) -> [Option<(i128, i128)>; 2] {
    let (lo, hi) = (i128::from(b.smin), i128::from(b.smax));
    [(lo <= -1).then(|| (lo, hi.min(-1))), (hi >= 1).then(|| (lo.max(1), hi))]
}

/// Signed division, truncating; by zero gives 0, `MIN / -1` gives `MIN`.
fn sdiv(a: &View, b: &View) -> View {
    let bits = a.bits;
    let parts = nonzero_parts(b);
    let may_be_zero = b.smin <= 0 && b.smax >= 0;
    // Truncated division is monotone in the dividend for a divisor of fixed sign, and in
    // the divisor for a dividend of fixed sign: the extremes are at corners of the box.
    let (mut lo, mut hi) = (i128::MAX, i128::MIN);
    for (blo, bhi) in parts.into_iter().flatten() {
        for x in [i128::from(a.smin), i128::from(a.smax)] {
            for d in [blo, bhi] {
                let q = x / d;
                lo = lo.min(q);
                hi = hi.max(q);
            }
        }
    }
    if may_be_zero {
        lo = lo.min(0);
        hi = hi.max(0);
    }
    if lo > hi {
        return View::constant(bits, 0);
    }
    if hi > i128::from(smax_of(bits)) {
        // MIN / -1 wraps to MIN; any quotient may be the largest.
        lo = i128::from(smin_of(bits));
        hi = i128::from(smax_of(bits));
    }
    View::full(bits).with_ring(lo, hi)
}

/// Signed remainder, truncating (the sign of the dividend); by zero leaves the dividend,
/// `MIN % -1` is 0.
fn srem(a: &View, b: &View) -> View {
    let bits = a.bits;
    let parts = nonzero_parts(b);
    let may_be_zero = b.smin <= 0 && b.smax >= 0;
    let (amin, amax) = (i128::from(a.smin), i128::from(a.smax));
    // The largest and smallest divisor magnitudes.
    let mut big = 0i128;
    let mut small = i128::MAX;
    for (blo, bhi) in parts.into_iter().flatten() {
        big = big.max(blo.abs()).max(bhi.abs());
        small = small.min(if bhi < 0 { -bhi } else { blo });
    }
    if big == 0 {
        return *a;
    }
    if amin.abs().max(amax.abs()) < small {
        // |x| below every |d|: x % d = x (and by zero too).
        return *a;
    }
    if let ([Some((blo, bhi)), None] | [None, Some((blo, bhi))], false) = (parts, may_be_zero) {
        if amin >= 0 || amax <= 0 {
            // A divisor of one sign and a dividend of one sign: the truncated quotient is
            // monotone in each, so if the corners agree it is one q for every pair, and the
            // remainder x - q*d is linear: its extremes are at the corners too. (MIN / -1
            // gives q = 2^63 here, and x - q*d = 0, the engines' MIN % -1.)
            let q = amin / blo;
            if [amin / bhi, amax / blo, amax / bhi].iter().all(|&o| o == q) {
                let r = [amin - q * blo, amin - q * bhi, amax - q * blo, amax - q * bhi];
                return View::full(bits).with_ring(min4(r), max4(r));
            }
        }
    }
    // |r| < |d| and |r| <= |x|, with the sign of x.
    let lim = big - 1;
    let mut lo = if amin < 0 { amin.max(-lim) } else { 0 };
    let mut hi = if amax > 0 { amax.min(lim) } else { 0 };
    if may_be_zero {
        lo = lo.min(amin);
        hi = hi.max(amax);
    }
    View::full(bits).with_ring(lo, hi)
}

fn and(a: &View, b: &View) -> View {
    let bits = a.bits;
    // x & y <= x and <= y as unsigned numbers; negative only if both are.
    let r = View::of_tnum(bits, a.t.and(b.t)).with_u(0, a.umax.min(b.umax));
    by_halves(
        r,
        a,
        b,
        |x, y| x && y,
        |p, q| (min_and(p.0, p.1, q.0, q.1), max_and(p.0, p.1, q.0, q.1)),
    )
}

/// Narrows `r`, the result of a bitwise operation on `a` and `b`, by the operation's
/// unsigned bounds (`bounds`) on each pair of pieces of the operands, split at the sign
/// boundary: all results of one pair have the sign `negative` gives (bitwise operations act
/// on the sign bit like on any other), so each pair's bounds, kept in its half, read as
/// signed bounds too.
fn by_halves(
    r: View,
    a: &View,
    b: &View,
    negative: impl Fn(bool, bool) -> bool,
    bounds: impl Fn((u64, u64), (u64, u64)) -> (u64, u64),
) -> View {
    let bits = a.bits;
    let half = 1u64 << (bits - 1);
    let pieces = |v: &View| {
        Pieces::one(v.umin, v.umax)
            .intersect(&Pieces::ring(bits, i128::from(v.smin), i128::from(v.smax)))
            .intersect(&Pieces::halves(bits))
    };
    let (pa, pb) = (pieces(a), pieces(b));
    let (mut ulo, mut uhi, mut slo, mut shi) = (u64::MAX, 0u64, i64::MAX, i64::MIN);
    for p in pa.iter() {
        for q in pb.iter() {
            let (mut lo, mut hi) = bounds(p, q);
            if negative(p.0 >= half, q.0 >= half) {
                lo = lo.max(half);
            } else {
                hi = hi.min(half - 1);
            }
            if lo > hi {
                continue;
            }
            (ulo, uhi) = (ulo.min(lo), uhi.max(hi));
            (slo, shi) = (slo.min(sext(bits, lo)), shi.max(sext(bits, hi)));
        }
    }
    if ulo > uhi {
        // No pair: the operands were empty.
        return r;
    }
    r.with_u(ulo, uhi).with_s(slo, shi)
}

// Exact unsigned bounds of x | y and x & y for x in [a, b], y in [c, d] (the bit-scanning
// method of Warren's "Hacker's Delight", 4-3, written from its argument). Each scans from
// the top bit for the first position where moving one operand within its range (dropping
// or gaining that bit and filling or clearing every lower bit) improves the result; past
// that bit nothing can improve further.

/// The smallest `x | y`: where exactly one side has the bit, the other may take it instead
/// of its lower bits, if its range allows.
fn min_or(mut a: u64, b: u64, mut c: u64, d: u64) -> u64 {
    let mut m = 1u64 << 63;
    while m != 0 {
        if !a & c & m != 0 {
            let t = (a | m) & m.wrapping_neg();
            if t <= b {
                a = t;
                break;
            }
        } else if a & !c & m != 0 {
            let t = (c | m) & m.wrapping_neg();
            if t <= d {
                c = t;
                break;
            }
        }
        m >>= 1;
    }
    a | c
}

/// The largest `x | y`: where both sides have the bit, one may give it up for every lower
/// bit, if its range allows.
fn max_or(a: u64, mut b: u64, c: u64, mut d: u64) -> u64 {
    let mut m = 1u64 << 63;
    while m != 0 {
        if b & d & m != 0 {
            let t = (b - m) | (m - 1);
            if t >= a {
                b = t;
                break;
            }
            let t = (d - m) | (m - 1);
            if t >= c {
                d = t;
                break;
            }
        }
        m >>= 1;
    }
    b | d
}

/// The smallest `x & y`: where neither side has the bit, one may take it and clear every
/// lower bit, if its range allows.
fn min_and(mut a: u64, b: u64, mut c: u64, d: u64) -> u64 {
    let mut m = 1u64 << 63;
    while m != 0 {
        if !a & !c & m != 0 {
            let t = (a | m) & m.wrapping_neg();
            if t <= b {
                a = t;
                break;
            }
            let t = (c | m) & m.wrapping_neg();
            if t <= d {
                c = t;
                break;
            }
        }
        m >>= 1;
    }
    a & c
}

/// The largest `x & y`: where exactly one side has the bit, it may give it up for every
/// lower bit, if its range allows.
fn max_and(a: u64, mut b: u64, c: u64, mut d: u64) -> u64 {
    let mut m = 1u64 << 63;
    while m != 0 {
        if b & !d & m != 0 {
            let t = (b & !m) | (m - 1);
            if t >= a {
                b = t;
                break;
            }
        } else if !b & d & m != 0 {
            let t = (d & !m) | (m - 1);
            if t >= c {
                d = t;
                break;
            }
        }
        m >>= 1;
    }
    b & d
}

fn or(a: &View, b: &View) -> View {
    let bits = a.bits;
    // x | y >= x and >= y as unsigned numbers, and <= x + y; negative if either is.
    let sum = a.umax.saturating_add(b.umax).min(umask(bits));
    let r = View::of_tnum(bits, a.t.or(b.t)).with_u(a.umin.max(b.umin), sum);
    by_halves(
        r,
        a,
        b,
        |x, y| x || y,
        |p, q| (min_or(p.0, p.1, q.0, q.1), max_or(p.0, p.1, q.0, q.1)),
    )
}

fn xor(a: &View, b: &View) -> View {
    let bits = a.bits;
    // x ^ y <= x | y <= x + y; negative if exactly one is. And x ^ y = (x | y) - (x & y): at
    // least the least `|` less the largest `&`, at most the largest `|`.
    let sum = a.umax.saturating_add(b.umax).min(umask(bits));
    let r = View::of_tnum(bits, a.t.xor(b.t)).with_u(0, sum);
    by_halves(
        r,
        a,
        b,
        |x, y| x != y,
        |p, q| {
            let lo = min_or(p.0, p.1, q.0, q.1).saturating_sub(max_and(p.0, p.1, q.0, q.1));
            (lo, max_or(p.0, p.1, q.0, q.1))
        },
    )
}

/// The shift amounts the engines use for a shift by `b` at `bits` (masked by `bits - 1`):
/// `b`'s range if it is below `bits`, else what the tnum of its low bits allows.
fn shift_amounts(b: &View, bits: u32) -> (u32, u32) {
    let limit = u64::from(bits - 1);
    if b.umax <= limit {
        (b.umin as u32, b.umax as u32)
    } else {
        // The masked amount: the tnum of the low bits, and the low bits of each range
        // (contiguous when the range is short: the ring pieces).
        let m = b.t.and(Tnum::constant(limit));
        let (mut lo, mut hi) = (m.min(), m.max());
        let log = bits.trailing_zeros();
        let p = Pieces::ring(log, i128::from(b.umin), i128::from(b.umax)).intersect(&Pieces::ring(
            log,
            i128::from(b.smin),
            i128::from(b.smax),
        ));
        if let Some((plo, phi)) = p.u_hull() {
            if plo.max(lo) <= phi.min(hi) {
                (lo, hi) = (plo.max(lo), phi.min(hi));
            }
        }
        (lo as u32, hi as u32)
    }
}

/// The join of `f(k)` for every shift amount `k` in `[lo, hi]` (at most 64 of them).
fn tnum_over(lo: u32, hi: u32, f: impl Fn(u32) -> Tnum) -> Tnum {
    let mut t = f(lo);
    for k in lo + 1..=hi {
        t = t.union(f(k));
    }
    t
}

fn lsh(a: &View, b: &View) -> View {
    let bits = a.bits;
    let (lo, hi) = shift_amounts(b, bits);
    let t = tnum_over(lo, hi, |k| a.t.lshift(k).cast(bits / 8));
    // a << k is a * 2^k, reduced: monotone in a, and in k for a fixed sign of a.
    let (plo, phi) = (1i128 << lo, 1i128 << hi);
    let u = (i128::from(a.umin) * plo, i128::from(a.umax) * phi);
    let s = [
        i128::from(a.smin) * plo,
        i128::from(a.smin) * phi,
        i128::from(a.smax) * plo,
        i128::from(a.smax) * phi,
    ];
    View::of_tnum(bits, t).with_ring(u.0, u.1).with_ring(min4(s), max4(s))
}

fn rsh(a: &View, b: &View) -> View {
    let bits = a.bits;
    let (lo, hi) = shift_amounts(b, bits);
    let t = tnum_over(lo, hi, |k| a.t.rshift(k));
    View::of_tnum(bits, t).with_u(a.umin >> hi, a.umax >> lo)
}

fn arsh(a: &View, b: &View) -> View {
    let bits = a.bits;
    let (lo, hi) = shift_amounts(b, bits);
    let t = tnum_over(lo, hi, |k| a.t.arshift(k, bits));
    // Arithmetic shifts are monotone in the value, and move it towards 0 or -1 as k grows.
    let s = [
        i128::from(a.smin >> lo),
        i128::from(a.smin >> hi),
        i128::from(a.smax >> lo),
        i128::from(a.smax >> hi),
    ];
    View::of_tnum(bits, t).with_ring(min4(s), max4(s))
}

/// The set of the low `n` bits of `x` (n = 8, 16 or 32) as pieces of the n-bit ring, from
/// every constraint of `x`, split at the n-bit sign boundary.
fn low_pieces(x: &Scalar, n: u32) -> Pieces {
    let low = x.var.cast(n / 8);
    let mut p = Pieces::ring(n, i128::from(x.umin), i128::from(x.umax))
        .intersect(&Pieces::ring(n, i128::from(x.smin), i128::from(x.smax)))
        .intersect(&Pieces::ring(n, i128::from(x.u32min), i128::from(x.u32max)))
        .intersect(&Pieces::ring(n, i128::from(x.s32min), i128::from(x.s32max)))
        .intersect(&Pieces::halves(n));
    p = p.map(|a, b| {
        let (a, b) = (low.min_ge(a)?, low.max_le(b)?);
        (a <= b).then_some((a, b))
    });
    p
}

/// The low `n` bits of `x` (8, 16 or 32), zero-extended: a 64-bit view.
fn low_bits(x: &Scalar, n: u32) -> View {
    let r = View::of_tnum(64, x.var.cast(n / 8)).with_u(0, umask(n));
    match low_pieces(x, n).u_hull() {
        Some((lo, hi)) => r.with_u(lo, hi),
        None => r,
    }
}

/// The low `n` bits of `x` (8, 16 or 32) sign-extended to `bits` (a view at `bits`).
fn sign_extend(x: &Scalar, n: u32, bits: u32) -> View {
    // Sign extension of a tnum: move the n-bit sign to bit 63 and shift it back
    // arithmetically (an unknown sign spreads as unknown).
    let shift = 64 - n;
    let t = x.var.lshift(shift).arshift(shift, 64);
    let r = View::of_tnum(bits, t);
    match low_pieces(x, n).s_hull(n) {
        Some((lo, hi)) => r.with_ring(i128::from(lo), i128::from(hi)),
        None => r,
    }
}

// ---- Jump refinement ---------------------------------------------------------------------

impl JmpCond {
    /// Whether `dst cond src` holds at `width`, as the engines compare (a 32-bit comparison
    /// reads the low halves).
    pub fn holds(self, width: Width, dst: u64, src: u64) -> bool {
        let (a, b, sa, sb) = match width {
            Width::W64 => (dst, src, dst as i64, src as i64),
            Width::W32 => (
                u64::from(dst as u32),
                u64::from(src as u32),
                i64::from(dst as u32 as i32),
                i64::from(src as u32 as i32),
            ),
        };
        match self {
            JmpCond::Eq => a == b,
            JmpCond::Ne => a != b,
            JmpCond::Gt => a > b,
            JmpCond::Ge => a >= b,
            JmpCond::Lt => a < b,
            JmpCond::Le => a <= b,
            JmpCond::Sgt => sa > sb,
            JmpCond::Sge => sa >= sb,
            JmpCond::Slt => sa < sb,
            JmpCond::Sle => sa <= sb,
            JmpCond::Set => a & b != 0,
        }
    }
}

/// A relation that holds on an edge: the condition on the taken edge, its negation on the
/// fall-through one (`NotSet`: `dst & src == 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rel {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Sgt,
    Sge,
    Slt,
    Sle,
    Set,
    NotSet,
}

impl Rel {
    fn of(cond: JmpCond, taken: bool) -> Rel {
        use JmpCond as J;
        match (cond, taken) {
            (J::Eq, true) | (J::Ne, false) => Rel::Eq,
            (J::Ne, true) | (J::Eq, false) => Rel::Ne,
            (J::Gt, true) | (J::Le, false) => Rel::Gt,
            (J::Ge, true) | (J::Lt, false) => Rel::Ge,
            (J::Lt, true) | (J::Ge, false) => Rel::Lt,
            (J::Le, true) | (J::Gt, false) => Rel::Le,
            (J::Sgt, true) | (J::Sle, false) => Rel::Sgt,
            (J::Sge, true) | (J::Slt, false) => Rel::Sge,
            (J::Slt, true) | (J::Sge, false) => Rel::Slt,
            (J::Sle, true) | (J::Sgt, false) => Rel::Sle,
            (J::Set, true) => Rel::Set,
            (J::Set, false) => Rel::NotSet,
        }
    }
}

/// Narrows `d` and `s` to the pairs where `d rel s` can hold; `None` when no pair can. Each
/// side is narrowed on its own (the domain is not relational): every narrowing keeps any
/// value that has a partner making the relation true.
fn refine_views(rel: Rel, d: &mut View, s: &mut View) -> Option<()> {
    let bits = d.bits;
    match rel {
        Rel::Eq => {
            let t = d.t.try_intersect(s.t)?;
            let both = View {
                bits,
                t,
                umin: d.umin.max(s.umin),
                umax: d.umax.min(s.umax),
                smin: d.smin.max(s.smin),
                smax: d.smax.min(s.smax),
            };
            *d = both;
            *s = both;
        }
        Rel::Ne => {
            if let Some(c) = s.as_const() {
                exclude(d, c)?;
            }
            if let Some(c) = d.as_const() {
                exclude(s, c)?;
            }
        }
        Rel::Gt => unsigned_less(s, d, 1)?,
        Rel::Ge => unsigned_less(s, d, 0)?,
        Rel::Lt => unsigned_less(d, s, 1)?,
        Rel::Le => unsigned_less(d, s, 0)?,
        Rel::Sgt => signed_less(s, d, 1)?,
        Rel::Sge => signed_less(s, d, 0)?,
        Rel::Slt => signed_less(d, s, 1)?,
        Rel::Sle => signed_less(d, s, 0)?,
        Rel::Set => {
            // The bits that may be set in both; when none is known set in both and only
            // one may be, it is set in both.
            let common = d.t.max() & s.t.max();
            if common == 0 {
                return None;
            }
            if d.t.value & s.t.value == 0 && common.is_power_of_two() {
                d.t = d.t.try_intersect(Tnum { value: common, mask: !common })?;
                s.t = s.t.try_intersect(Tnum { value: common, mask: !common })?;
            }
        }
        Rel::NotSet => {
            if d.t.value & s.t.value != 0 {
                return None;
            }
            // A bit known set in one is clear in the other.
            let m = umask(bits);
            d.t = d.t.try_intersect(Tnum { value: 0, mask: !s.t.value & m })?;
            s.t = s.t.try_intersect(Tnum { value: 0, mask: !d.t.value & m })?;
        }
    }
    (d.is_plausible() && s.is_plausible()).then_some(())
}

/// Narrows for `lo + gap <= hi` as unsigned numbers (gap 0: `<=`, gap 1: `<`).
fn unsigned_less(lo: &mut View, hi: &mut View, gap: u64) -> Option<()> {
    hi.umin = hi.umin.max(lo.umin.checked_add(gap).filter(|&v| v <= umask(hi.bits))?);
    lo.umax = lo.umax.min(hi.umax.checked_sub(gap)?);
    Some(())
}

/// Narrows for `lo + gap <= hi` as signed numbers.
fn signed_less(lo: &mut View, hi: &mut View, gap: i64) -> Option<()> {
    hi.smin = hi.smin.max(lo.smin.checked_add(gap).filter(|&v| v <= smax_of(hi.bits))?);
    lo.smax = lo.smax.min(hi.smax.checked_sub(gap).filter(|&v| v >= smin_of(lo.bits))?);
    Some(())
}

/// Narrows `v` to exclude the value `c` (a `bits`-bit pattern), where an interval ends at it.
fn exclude(v: &mut View, c: u64) -> Option<()> {
    if v.as_const() == Some(c) {
        return None;
    }
    if v.umin == c {
        v.umin = c.checked_add(1)?;
    }
    if v.umax == c {
        v.umax = c.checked_sub(1)?;
    }
    let sc = sext(v.bits, c);
    if v.smin == sc {
        v.smin = sc.checked_add(1)?;
    }
    if v.smax == sc {
        v.smax = sc.checked_sub(1)?;
    }
    Some(())
}

impl fmt::Display for Scalar {
    /// Kernel-like: `scalar(umin=0,umax=255,var_off=(0x0; 0xff))`, a constant as its number
    /// (signed when negative), bounds implied by the ones printed left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v) = self.as_const() {
            return if (v as i64) < 0 { write!(f, "{}", v as i64) } else { write!(f, "{v}") };
        }
        if self.is_plainly_empty() {
            return write!(f, "scalar(empty)");
        }
        write!(f, "scalar(")?;
        if (self.smin, self.smax) != (self.umin as i64, self.umax as i64) {
            write!(f, "smin={},smax={},", self.smin, self.smax)?;
        }
        write!(f, "umin={},umax={},", self.umin, self.umax)?;
        // The 32-bit bounds, unless they say nothing or follow from those printed: the same
        // range as the 64-bit one for a value below 2^32, or (signed) the unsigned 32-bit
        // range read as signed.
        let below32 = self.umax <= u64::from(u32::MAX);
        let u32_full = (self.u32min, self.u32max) == (0, u32::MAX);
        let u32_same = (u64::from(self.u32min), u64::from(self.u32max)) == (self.umin, self.umax);
        let u32_implied = u32_full || (below32 && u32_same);
        if !u32_implied {
            write!(f, "umin32={},umax32={},", self.u32min, self.u32max)?;
        }
        let s32_full = (self.s32min, self.s32max) == (i32::MIN, i32::MAX);
        let s32_same = (i64::from(self.s32min), i64::from(self.s32max)) == (self.smin, self.smax);
        let s32_of_u32 = (self.s32min, self.s32max) == (self.u32min as i32, self.u32max as i32);
        let s32_implied = s32_full || s32_of_u32 || (below32 && s32_same);
        if !s32_implied {
            write!(f, "smin32={},smax32={},", self.s32min, self.s32max)?;
        }
        write!(f, "var_off={})", self.var)
    }
}

#[cfg(test)]
mod bit_bounds_tests {
    use super::{max_and, max_or, min_and, min_or};

    /// The bitwise bounds are exact: every pair of ranges within 0..24 (and the same ranges
    /// moved next to 2^63, where the top bit is in play), against brute force.
    #[test]
    fn bitwise_bounds_are_exact_on_small_ranges() {
        for base in [0u64, (1 << 63) - 12] {
            for a in 0..24 {
                for b in a..24 {
                    for c in 0..24 {
                        for d in c..24 {
                            let (a, b, c, d) = (base + a, base + b, c, d);
                            let ors = (a..=b).flat_map(|x| (c..=d).map(move |y| x | y));
                            let ands = (a..=b).flat_map(|x| (c..=d).map(move |y| x & y));
                            let (lo, hi) = (ors.clone().min().unwrap(), ors.max().unwrap());
                            assert_eq!(
                                (min_or(a, b, c, d), max_or(a, b, c, d)),
                                (lo, hi),
                                "or {a} {b} {c} {d}"
                            );
                            let (lo, hi) = (ands.clone().min().unwrap(), ands.max().unwrap());
                            assert_eq!(
                                (min_and(a, b, c, d), max_and(a, b, c, d)),
                                (lo, hi),
                                "and {a} {b} {c} {d}"
                            );
                        }
                    }
                }
            }
        }
    }
}
