//! [`Scalar`]: a tnum with signed and unsigned 32- and 64-bit bounds (STAND-IN: sound and
//! simple; the real domain is more precise).

use std::fmt;

use super::Tnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    W32,
    W64,
}

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
    Mov,
    MovSx8,
    MovSx16,
    MovSx32,
    Neg,
    ToLe(u32),
    ToBe(u32),
    Bswap(u32),
}

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

/// What is known of a 64-bit value: every field is a constraint it satisfies.
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

impl Scalar {
    pub fn unknown() -> Scalar {
        FULL
    }

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

    pub fn from_tnum(t: Tnum) -> Scalar {
        Scalar { var: t, ..FULL }.norm()
    }

    pub fn range_u64(min: u64, max: u64) -> Scalar {
        Scalar { umin: min, umax: max, var: Tnum::range(min, max), ..FULL }.norm()
    }

    fn range_s64(min: i64, max: i64) -> Scalar {
        Scalar { smin: min, smax: max, ..FULL }.norm()
    }

    pub fn as_const(&self) -> Option<u64> {
        self.var.is_const().then_some(self.var.value)
    }

    pub fn contains(&self, v: u64) -> bool {
        self.var.contains(v)
            && (self.umin..=self.umax).contains(&v)
            && (self.smin..=self.smax).contains(&(v as i64))
            && (self.u32min..=self.u32max).contains(&(v as u32))
            && (self.s32min..=self.s32max).contains(&(v as u32 as i32))
    }

    /// Whether every value of `other` is in `self`.
    pub fn subsumes(&self, o: &Scalar) -> bool {
        self.var.subsumes(o.var)
            && self.umin <= o.umin
            && self.umax >= o.umax
            && self.smin <= o.smin
            && self.smax >= o.smax
            && self.u32min <= o.u32min
            && self.u32max >= o.u32max
            && self.s32min <= o.s32min
            && self.s32max >= o.s32max
    }

    pub fn join(&self, o: &Scalar) -> Scalar {
        Scalar {
            var: self.var.union(o.var),
            smin: self.smin.min(o.smin),
            smax: self.smax.max(o.smax),
            umin: self.umin.min(o.umin),
            umax: self.umax.max(o.umax),
            s32min: self.s32min.min(o.s32min),
            s32max: self.s32max.max(o.s32max),
            u32min: self.u32min.min(o.u32min),
            u32max: self.u32max.max(o.u32max),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.umin > self.umax
            || self.smin > self.smax
            || self.u32min > self.u32max
            || self.s32min > self.s32max
            || self.var.value & self.var.mask != 0
            || self.umin > (self.var.value | self.var.mask)
            || self.umax < self.var.value
    }

    /// Tightens every field from the others (each step intersects sound constraints).
    fn norm(mut self) -> Scalar {
        for _ in 0..2 {
            if self.is_empty() {
                return self;
            }
            // tnum and unsigned bounds.
            self.var = self.var.intersect(Tnum::range(self.umin, self.umax));
            self.umin = self.umin.max(self.var.value);
            self.umax = self.umax.min(self.var.value | self.var.mask);
            // unsigned <-> signed when the range does not cross the sign boundary.
            if (self.umin as i64) <= (self.umax as i64) {
                self.smin = self.smin.max(self.umin as i64);
                self.smax = self.smax.min(self.umax as i64);
            }
            if self.smin >= 0 || self.smax < 0 {
                self.umin = self.umin.max(self.smin as u64);
                self.umax = self.umax.min(self.smax as u64);
            }
            // 32-bit views.
            let sub = self.var.subreg();
            self.u32min = self.u32min.max(sub.value as u32);
            self.u32max = self.u32max.min((sub.value | sub.mask) as u32);
            if self.umin >> 32 == self.umax >> 32 {
                self.u32min = self.u32min.max(self.umin as u32);
                self.u32max = self.u32max.min(self.umax as u32);
            }
            if (self.u32min as i32) <= (self.u32max as i32) {
                self.s32min = self.s32min.max(self.u32min as i32);
                self.s32max = self.s32max.min(self.u32max as i32);
            }
            if self.s32min >= 0 || self.s32max < 0 {
                self.u32min = self.u32min.max(self.s32min as u32);
                self.u32max = self.u32max.min(self.s32max as u32);
            }
            if self.is_empty() {
                return self;
            }
            self.var = self.var.with_subreg(
                self.var.subreg().intersect(Tnum::range(self.u32min.into(), self.u32max.into())),
            );
        }
        self
    }

    /// The low 32 bits, zero-extended.
    pub fn zext32(&self) -> Scalar {
        Scalar { var: self.var.cast(4), umin: self.u32min.into(), umax: self.u32max.into(), ..FULL }
            .norm()
    }

    /// `dst op src` as the engines compute it (32-bit results zero-extended).
    pub fn alu(op: AluOp, width: Width, dst: &Scalar, src: &Scalar) -> Scalar {
        match width {
            Width::W64 => alu64(op, dst, src),
            Width::W32 => {
                let (d, s) = (dst.zext32(), src.zext32());
                let r = match op {
                    AluOp::Lsh | AluOp::Rsh | AluOp::Arsh => {
                        let Some(k) = s.as_const() else { return FULL.zext32() };
                        let k = (k & 31) as u32;
                        match op {
                            AluOp::Lsh => alu64(AluOp::Lsh, &d, &Scalar::constant(k.into())),
                            AluOp::Rsh => alu64(AluOp::Rsh, &d, &Scalar::constant(k.into())),
                            _ => Scalar::from_tnum(d.var.arshift(k, 32)),
                        }
                    }
                    AluOp::SDiv | AluOp::SMod | AluOp::Neg | AluOp::MovSx8 | AluOp::MovSx16 => {
                        match (d.as_const(), s.as_const()) {
                            (Some(a), Some(b)) => {
                                Scalar::constant(concrete32(op, a as u32, b as u32).into())
                            }
                            _ => FULL,
                        }
                    }
                    AluOp::MovSx32 => s,
                    _ => alu64(op, &d, &s),
                };
                if r.umax <= u64::from(u32::MAX) {
                    r
                } else {
                    Scalar::from_tnum(r.var.cast(4))
                }
            }
        }
    }

    /// The values of `dst` and `src` on the edge where `dst cond src` is `taken` (or not);
    /// `None` when that edge cannot happen.
    pub fn refine(
        cond: JmpCond,
        width: Width,
        dst: &Scalar,
        src: &Scalar,
        taken: bool,
    ) -> Option<(Scalar, Scalar)> {
        if Scalar::branch_taken(cond, width, dst, src) == Some(!taken) {
            return None;
        }
        match width {
            Width::W64 => refine64(cond, taken, *dst, *src),
            Width::W32 => {
                let signed =
                    matches!(cond, JmpCond::Sgt | JmpCond::Sge | JmpCond::Slt | JmpCond::Sle);
                let (d, s) = (dst.zext32(), src.zext32());
                if signed {
                    return Some((*dst, *src));
                }
                let (d2, s2) = refine64(cond, taken, d, s)?;
                let dst2 = if dst.umax <= u64::from(u32::MAX) { d2 } else { *dst };
                let src2 = if src.umax <= u64::from(u32::MAX) { s2 } else { *src };
                Some((dst2, src2))
            }
        }
    }

    /// Whether `dst cond src` is always true (`Some(true)`), always false, or either.
    pub fn branch_taken(cond: JmpCond, width: Width, dst: &Scalar, src: &Scalar) -> Option<bool> {
        let (d, s) = match width {
            Width::W64 => (*dst, *src),
            Width::W32 => (dst.zext32(), src.zext32()),
        };
        let (dsmin, dsmax, ssmin, ssmax) = match width {
            Width::W64 => (d.smin, d.smax, s.smin, s.smax),
            Width::W32 => (
                i64::from(dst.s32min),
                i64::from(dst.s32max),
                i64::from(src.s32min),
                i64::from(src.s32max),
            ),
        };
        let known = |t: bool, f: bool| {
            if t {
                Some(true)
            } else if f {
                Some(false)
            } else {
                None
            }
        };
        match cond {
            JmpCond::Eq | JmpCond::Ne => {
                let eq = match (d.as_const(), s.as_const()) {
                    (Some(a), Some(b)) => Some(a == b),
                    _ => {
                        let differ = (d.var.value ^ s.var.value) & !(d.var.mask | s.var.mask) != 0;
                        let disjoint = d.umax < s.umin || s.umax < d.umin;
                        (differ || disjoint).then_some(false)
                    }
                };
                if cond == JmpCond::Eq {
                    eq
                } else {
                    eq.map(|e| !e)
                }
            }
            JmpCond::Gt => known(d.umin > s.umax, d.umax <= s.umin),
            JmpCond::Ge => known(d.umin >= s.umax, d.umax < s.umin),
            JmpCond::Lt => known(d.umax < s.umin, d.umin >= s.umax),
            JmpCond::Le => known(d.umax <= s.umin, d.umin > s.umax),
            JmpCond::Sgt => known(dsmin > ssmax, dsmax <= ssmin),
            JmpCond::Sge => known(dsmin >= ssmax, dsmax < ssmin),
            JmpCond::Slt => known(dsmax < ssmin, dsmin >= ssmax),
            JmpCond::Sle => known(dsmax <= ssmin, dsmin > ssmax),
            JmpCond::Set => known(
                d.var.value & s.var.value != 0,
                (d.var.value | d.var.mask) & (s.var.value | s.var.mask) == 0,
            ),
        }
    }
}

fn concrete32(op: AluOp, a: u32, b: u32) -> u32 {
    match op {
        AluOp::SDiv if b == 0 => 0,
        AluOp::SDiv => (a as i32).checked_div(b as i32).map_or(a, |q| q as u32),
        AluOp::SMod if b == 0 => a,
        AluOp::SMod => (a as i32).checked_rem(b as i32).map_or(0, |r| r as u32),
        AluOp::Neg => a.wrapping_neg(),
        AluOp::MovSx8 => b as u8 as i8 as i32 as u32,
        AluOp::MovSx16 => b as u16 as i16 as i32 as u32,
        _ => 0,
    }
}

fn concrete64(op: AluOp, a: u64, b: u64) -> Option<u64> {
    Some(match op {
        AluOp::Add => a.wrapping_add(b),
        AluOp::Sub => a.wrapping_sub(b),
        AluOp::Mul => a.wrapping_mul(b),
        AluOp::Div => a.checked_div(b).unwrap_or(0),
        AluOp::Mod => a.checked_rem(b).unwrap_or(a),
        AluOp::SDiv if b == 0 => 0,
        AluOp::SDiv => (a as i64).checked_div(b as i64).map_or(a, |q| q as u64),
        AluOp::SMod if b == 0 => a,
        AluOp::SMod => (a as i64).checked_rem(b as i64).map_or(0, |r| r as u64),
        AluOp::Or => a | b,
        AluOp::And => a & b,
        AluOp::Xor => a ^ b,
        AluOp::Lsh => a << (b & 63),
        AluOp::Rsh => a >> (b & 63),
        AluOp::Arsh => ((a as i64) >> (b & 63)) as u64,
        AluOp::Mov => b,
        AluOp::MovSx8 => b as u8 as i8 as i64 as u64,
        AluOp::MovSx16 => b as u16 as i16 as i64 as u64,
        AluOp::MovSx32 => b as u32 as i32 as i64 as u64,
        AluOp::Neg => a.wrapping_neg(),
        AluOp::ToLe(16) => a as u16 as u64,
        AluOp::ToLe(32) => a as u32 as u64,
        AluOp::ToLe(_) => a,
        AluOp::ToBe(16) | AluOp::Bswap(16) => (a as u16).swap_bytes() as u64,
        AluOp::ToBe(32) | AluOp::Bswap(32) => (a as u32).swap_bytes() as u64,
        AluOp::ToBe(_) | AluOp::Bswap(_) => a.swap_bytes(),
    })
}

fn alu64(op: AluOp, d: &Scalar, s: &Scalar) -> Scalar {
    if let (Some(a), Some(b)) = (d.as_const(), s.as_const()) {
        if let Some(v) = concrete64(op, a, b) {
            return Scalar::constant(v);
        }
    }
    if let (AluOp::Neg | AluOp::ToLe(_) | AluOp::ToBe(_) | AluOp::Bswap(_), Some(a)) =
        (op, d.as_const())
    {
        if let Some(v) = concrete64(op, a, 0) {
            return Scalar::constant(v);
        }
    }
    let r = match op {
        AluOp::Add => {
            let mut r = Scalar::from_tnum(d.var.add(s.var));
            if let (Some(lo), Some(hi)) = (d.umin.checked_add(s.umin), d.umax.checked_add(s.umax)) {
                r = r.meet_u(lo, hi);
            }
            if let (Some(lo), Some(hi)) = (d.smin.checked_add(s.smin), d.smax.checked_add(s.smax)) {
                r = r.meet_s(lo, hi);
            }
            r
        }
        AluOp::Sub => {
            let mut r = Scalar::from_tnum(d.var.sub(s.var));
            if d.umin >= s.umax {
                r = r.meet_u(d.umin - s.umax, d.umax - s.umin);
            }
            if let (Some(lo), Some(hi)) = (d.smin.checked_sub(s.smax), d.smax.checked_sub(s.smin)) {
                r = r.meet_s(lo, hi);
            }
            r
        }
        AluOp::Mul => {
            let mut r = Scalar::from_tnum(d.var.mul(s.var));
            if let Some(hi) = d.umax.checked_mul(s.umax) {
                r = r.meet_u(d.umin * s.umin, hi);
            }
            r
        }
        AluOp::Div => match d.umax.checked_div(s.umin) {
            Some(hi) => Scalar::range_u64(d.umin / s.umax, hi),
            None => Scalar::range_u64(0, d.umax),
        },
        AluOp::Mod => {
            if s.umin > 0 {
                Scalar::range_u64(0, d.umax.min(s.umax - 1))
            } else {
                Scalar::range_u64(0, d.umax)
            }
        }
        AluOp::And => Scalar::from_tnum(d.var.and(s.var)).meet_u(0, d.umax.min(s.umax)),
        AluOp::Or => Scalar::from_tnum(d.var.or(s.var)).meet_u(d.umin.max(s.umin), u64::MAX),
        AluOp::Xor => Scalar::from_tnum(d.var.xor(s.var)),
        AluOp::Lsh => match s.as_const() {
            Some(k) => {
                let k = (k & 63) as u32;
                let mut r = Scalar::from_tnum(d.var.lshift(k));
                if d.umax.leading_zeros() >= k {
                    r = r.meet_u(d.umin << k, d.umax << k);
                }
                r
            }
            None => FULL,
        },
        AluOp::Rsh => match s.as_const() {
            Some(k) => {
                let k = (k & 63) as u32;
                Scalar::from_tnum(d.var.rshift(k)).meet_u(d.umin >> k, d.umax >> k)
            }
            None => Scalar::range_u64(0, d.umax),
        },
        AluOp::Arsh => match s.as_const() {
            Some(k) => {
                let k = (k & 63) as u32;
                Scalar::from_tnum(d.var.arshift(k, 64)).meet_s(d.smin >> k, d.smax >> k)
            }
            None => FULL,
        },
        AluOp::Mov => *s,
        AluOp::MovSx8 => Scalar::range_s64(-128, 127),
        AluOp::MovSx16 => Scalar::range_s64(-32768, 32767),
        AluOp::MovSx32 => Scalar::range_s64(i32::MIN.into(), i32::MAX.into()),
        AluOp::ToLe(16) => Scalar::from_tnum(d.var.cast(2)),
        AluOp::ToLe(32) => Scalar::from_tnum(d.var.cast(4)),
        AluOp::ToLe(_) => *d,
        AluOp::ToBe(16) | AluOp::Bswap(16) => Scalar::range_u64(0, 0xffff),
        AluOp::ToBe(32) | AluOp::Bswap(32) => Scalar::range_u64(0, 0xffff_ffff),
        AluOp::SDiv | AluOp::SMod | AluOp::Neg | AluOp::ToBe(_) | AluOp::Bswap(_) => FULL,
    };
    if r.is_empty() {
        // Cannot happen for sound inputs; never return an empty set from arithmetic.
        FULL
    } else {
        r
    }
}

impl Scalar {
    fn meet_u(mut self, lo: u64, hi: u64) -> Scalar {
        self.umin = self.umin.max(lo);
        self.umax = self.umax.min(hi);
        self.norm()
    }

    fn meet_s(mut self, lo: i64, hi: i64) -> Scalar {
        self.smin = self.smin.max(lo);
        self.smax = self.smax.min(hi);
        self.norm()
    }
}

fn refine64(cond: JmpCond, taken: bool, mut d: Scalar, mut s: Scalar) -> Option<(Scalar, Scalar)> {
    use JmpCond::*;
    // The condition that holds on this edge.
    let (cond, swap_set) = if taken {
        (cond, false)
    } else {
        match cond {
            Eq => (Ne, false),
            Ne => (Eq, false),
            Gt => (Le, false),
            Ge => (Lt, false),
            Lt => (Ge, false),
            Le => (Gt, false),
            Sgt => (Sle, false),
            Sge => (Slt, false),
            Slt => (Sge, false),
            Sle => (Sgt, false),
            Set => (Set, true),
        }
    };
    match cond {
        Eq => {
            let var = d.var.intersect(s.var);
            let mut m = d;
            m.var = var;
            m.umin = d.umin.max(s.umin);
            m.umax = d.umax.min(s.umax);
            m.smin = d.smin.max(s.smin);
            m.smax = d.smax.min(s.smax);
            m.u32min = d.u32min.max(s.u32min);
            m.u32max = d.u32max.min(s.u32max);
            m.s32min = d.s32min.max(s.s32min);
            m.s32max = d.s32max.min(s.s32max);
            if (d.var.value ^ s.var.value) & !(d.var.mask | s.var.mask) != 0 {
                return None;
            }
            let m = m.norm();
            d = m;
            s = m;
        }
        Ne => {
            if let Some(c) = s.as_const() {
                if d.umin == c {
                    d.umin = d.umin.checked_add(1)?;
                }
                if d.umax == c {
                    d.umax = d.umax.checked_sub(1)?;
                }
            }
            if let Some(c) = d.as_const() {
                if s.umin == c {
                    s.umin = s.umin.checked_add(1)?;
                }
                if s.umax == c {
                    s.umax = s.umax.checked_sub(1)?;
                }
            }
        }
        Lt => {
            d.umax = d.umax.min(s.umax.checked_sub(1)?);
            s.umin = s.umin.max(d.umin.checked_add(1)?);
        }
        Le => {
            d.umax = d.umax.min(s.umax);
            s.umin = s.umin.max(d.umin);
        }
        Gt => {
            s.umax = s.umax.min(d.umax.checked_sub(1)?);
            d.umin = d.umin.max(s.umin.checked_add(1)?);
        }
        Ge => {
            s.umax = s.umax.min(d.umax);
            d.umin = d.umin.max(s.umin);
        }
        Slt => {
            d.smax = d.smax.min(s.smax.checked_sub(1)?);
            s.smin = s.smin.max(d.smin.checked_add(1)?);
        }
        Sle => {
            d.smax = d.smax.min(s.smax);
            s.smin = s.smin.max(d.smin);
        }
        Sgt => {
            s.smax = s.smax.min(d.smax.checked_sub(1)?);
            d.smin = d.smin.max(s.smin.checked_add(1)?);
        }
        Sge => {
            s.smax = s.smax.min(d.smax);
            d.smin = d.smin.max(s.smin);
        }
        Set if swap_set => {
            // No bit in common.
            if d.var.value & s.var.value != 0 {
                return None;
            }
            if let Some(c) = s.as_const() {
                d.var = Tnum { value: d.var.value & !c, mask: d.var.mask & !c };
            }
        }
        Set => {}
    }
    let (d, s) = (d.norm(), s.norm());
    if d.is_empty() || s.is_empty() {
        return None;
    }
    Some((d, s))
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = self.as_const() {
            return write!(f, "{}", c as i64);
        }
        let mut parts = Vec::new();
        if self.smin != i64::MIN {
            parts.push(format!("smin={}", self.smin));
        }
        if self.smax != i64::MAX {
            parts.push(format!("smax={}", self.smax));
        }
        if self.umin != 0 {
            parts.push(format!("umin={}", self.umin));
        }
        if self.umax != u64::MAX {
            parts.push(format!("umax={}", self.umax));
        }
        if self.var != Tnum::UNKNOWN {
            parts.push(format!("var_off={}", self.var));
        }
        if parts.is_empty() {
            f.write_str("unknown")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}
