//! The domain's tests: soundness properties against the engines' concrete semantics (every
//! operation at both widths, jump refinement, branch decisions, join/meet/subsumes), and
//! hand-written precision cases.
//!
//! Abstract operands are built from a random set of concrete values ("seeds"): a random
//! choice of constraints is set to the hull of the seeds (so the seeds are members by
//! construction), then normalized. The values an operand is checked at are the seeds, its
//! bounds, random tnum members, and when the operand is small enough every member.
//! `DOMAIN_CASES` overrides the number of cases per property.

use proptest::prelude::*;
use proptest::test_runner::Config;
use weir_program::exec::alu;

use super::scalar::by_rules;
use super::{AluOp, JmpCond, Scalar, Tnum, Width};

fn cases(default: u32) -> Config {
    let n = std::env::var("DOMAIN_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    Config { cases: n, failure_persistence: None, ..Config::default() }
}

/// What the interpreter computes for `dst op src` (its `Step` arms, written out again here
/// so that `AluOp::eval` is checked too); division, remainder and shifts are
/// `weir_program::exec::alu`'s.
fn engine(op: AluOp, width: Width, a: u64, b: u64) -> u64 {
    match op {
        AluOp::ToLe(16) => return a & 0xffff,
        AluOp::ToLe(32) => return a & 0xffff_ffff,
        AluOp::ToLe(_) => return a,
        AluOp::ToBe(16) | AluOp::Bswap(16) => return u64::from((a as u16).swap_bytes()),
        AluOp::ToBe(32) | AluOp::Bswap(32) => return u64::from((a as u32).swap_bytes()),
        AluOp::ToBe(_) | AluOp::Bswap(_) => return a.swap_bytes(),
        _ => {}
    }
    if width == Width::W64 {
        return match op {
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
            _ => unreachable!("swaps handled above"),
        };
    }
    let (x, y) = (a as u32, b as u32);
    u64::from(match op {
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
        AluOp::Mov => y,
        AluOp::MovSx8 => b as i8 as i32 as u32,
        AluOp::MovSx16 => b as i16 as i32 as u32,
        // A 32-bit move from a 32-bit sign extension is a plain 32-bit move.
        AluOp::MovSx32 => y,
        AluOp::Neg => x.wrapping_neg(),
        _ => unreachable!("swaps handled above"),
    })
}

/// Whether `dst cond src` holds at `width`, as the engines compare.
fn holds(cond: JmpCond, width: Width, a: u64, b: u64) -> bool {
    let (a, b) = match width {
        Width::W64 => (a, b),
        Width::W32 => (u64::from(a as u32), u64::from(b as u32)),
    };
    let (sa, sb) = match width {
        Width::W64 => (a as i64, b as i64),
        Width::W32 => (i64::from(a as u32 as i32), i64::from(b as u32 as i32)),
    };
    match cond {
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

const OPS: [AluOp; 27] = [
    AluOp::Add,
    AluOp::Sub,
    AluOp::Mul,
    AluOp::Div,
    AluOp::SDiv,
    AluOp::Mod,
    AluOp::SMod,
    AluOp::Or,
    AluOp::And,
    AluOp::Lsh,
    AluOp::Rsh,
    AluOp::Arsh,
    AluOp::Xor,
    AluOp::Mov,
    AluOp::MovSx8,
    AluOp::MovSx16,
    AluOp::MovSx32,
    AluOp::Neg,
    AluOp::ToLe(16),
    AluOp::ToLe(32),
    AluOp::ToLe(64),
    AluOp::ToBe(16),
    AluOp::ToBe(32),
    AluOp::ToBe(64),
    AluOp::Bswap(16),
    AluOp::Bswap(32),
    AluOp::Bswap(64),
];

const CONDS: [JmpCond; 11] = [
    JmpCond::Eq,
    JmpCond::Ne,
    JmpCond::Gt,
    JmpCond::Ge,
    JmpCond::Lt,
    JmpCond::Le,
    JmpCond::Sgt,
    JmpCond::Sge,
    JmpCond::Slt,
    JmpCond::Sle,
    JmpCond::Set,
];

/// Values with the edges that matter: small, small negative, around every power of two
/// (the 32-bit and sign boundaries among them), 32-bit, and anything.
fn value() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..20,
        (0u64..20).prop_map(|v| v.wrapping_neg()),
        (0u32..64, -3i64..=3).prop_map(|(k, d)| (1u64 << k).wrapping_add(d as u64)),
        any::<u32>().prop_map(u64::from),
        any::<i32>().prop_map(|v| v as i64 as u64),
        (any::<u32>(), 0u64..4).prop_map(|(lo, hi)| (hi << 32) | u64::from(lo)),
        any::<u64>(),
    ]
}

/// A set of seeds: a few values, sometimes a run of neighbours (a narrow range).
fn seeds() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        prop::collection::vec(value(), 1..5),
        (value(), 0u64..40).prop_map(|(v, n)| (0..=n).map(|i| v.wrapping_add(i)).collect()),
        (value(), value()).prop_map(|(a, b)| vec![a, b]),
    ]
}

/// An abstraction of `seeds`: `choice` picks which constraints are the seeds' hull (bit 0
/// tnum, 1 unsigned, 2 signed, 3 unsigned 32, 4 signed 32); bit 5 asks for the join of the
/// constants instead.
fn abstract_of(seeds: &[u64], choice: u8) -> Scalar {
    if choice & 0x20 != 0 {
        return seeds.iter().fold(Scalar::empty(), |acc, &v| acc.join(&Scalar::constant(v)));
    }
    let mut s = Scalar::unknown();
    let hull = |f: &dyn Fn(u64) -> i128| {
        let lo = seeds.iter().map(|&v| f(v)).min().unwrap();
        let hi = seeds.iter().map(|&v| f(v)).max().unwrap();
        (lo, hi)
    };
    if choice & 1 != 0 {
        s.var = seeds.iter().fold(Tnum::constant(seeds[0]), |t, &v| t.union(Tnum::constant(v)));
    }
    if choice & 2 != 0 {
        let (lo, hi) = hull(&|v| i128::from(v));
        (s.umin, s.umax) = (lo as u64, hi as u64);
    }
    if choice & 4 != 0 {
        let (lo, hi) = hull(&|v| i128::from(v as i64));
        (s.smin, s.smax) = (lo as i64, hi as i64);
    }
    if choice & 8 != 0 {
        let (lo, hi) = hull(&|v| i128::from(v as u32));
        (s.u32min, s.u32max) = (lo as u32, hi as u32);
    }
    if choice & 16 != 0 {
        let (lo, hi) = hull(&|v| i128::from(v as u32 as i32));
        (s.s32min, s.s32max) = (lo as i32, hi as i32);
    }
    let n = s.normalized().expect("the seeds satisfy every constraint");
    for &v in seeds {
        assert!(n.contains(v), "normalizing {s:?} lost seed {v:#x}: {n:?}");
    }
    n
}

/// Every member of `s`, when there are at most `limit` and they are easy to list.
fn all_members(s: &Scalar, limit: u64) -> Option<Vec<u64>> {
    if s.umax - s.umin < limit {
        return Some((s.umin..=s.umax).filter(|&v| s.contains(v)).collect());
    }
    let span = (s.smax as i128 - s.smin as i128) as u128;
    if span < u128::from(limit) {
        return Some((s.smin..=s.smax).map(|v| v as u64).filter(|&v| s.contains(v)).collect());
    }
    if u64::from(s.var.mask.count_ones()) <= limit.ilog2() as u64 {
        let mut out = Vec::new();
        let mut sub = 0u64;
        // Every subset of the unknown bits (the standard subset walk).
        loop {
            let v = s.var.value | sub;
            if s.contains(v) {
                out.push(v);
            }
            if sub == s.var.mask {
                break;
            }
            sub = (sub.wrapping_sub(s.var.mask)) & s.var.mask;
        }
        return Some(out);
    }
    None
}

/// Values of `s` to check at: all of them when few, else the seeds, the bounds and the
/// tnum members drawn from `noise` that satisfy the intervals.
fn members(s: &Scalar, seeds: &[u64], noise: &[u64]) -> (Vec<u64>, bool) {
    if let Some(all) = all_members(s, 64) {
        return (all, true);
    }
    let mut out: Vec<u64> = seeds.to_vec();
    let candidates = [
        s.umin,
        s.umax,
        s.smin as u64,
        s.smax as u64,
        s.var.min(),
        s.var.max(),
        (s.umin & !0xffff_ffff) | u64::from(s.u32min),
        (s.umax & !0xffff_ffff) | u64::from(s.u32max),
    ];
    out.extend(candidates.iter().copied().filter(|&v| s.contains(v)));
    for &r in noise {
        let v = s.var.value | (r & s.var.mask);
        if s.contains(v) {
            out.push(v);
        }
        // A tnum member near the lower bound, the upper bound, and the low bounds.
        for base in [s.umin.wrapping_add(r & 0xff), s.umax.wrapping_sub(r & 0xff)] {
            if let Some(v) = s.var.min_ge(base) {
                if s.contains(v) {
                    out.push(v);
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    (out, false)
}

/// A scalar with arbitrary fields, mostly built around an anchor value so that it often
/// has members, each field sometimes replaced by garbage (inverted, contradictory, a tnum
/// with a bit both known and unknown).
fn raw_scalar() -> impl Strategy<Value = (Scalar, u64)> {
    let delta = || prop_oneof![0u64..4, 0u64..1000, any::<u64>()];
    (
        value(),
        prop::collection::vec(delta(), 9),
        prop::collection::vec(any::<u64>(), 9),
        prop_oneof![3 => Just(0u16), 2 => (0u32..10).prop_map(|i| 1u16 << i), 1 => any::<u16>()],
    )
        .prop_map(|(v, d, junk, garbage)| {
            let pick = |i: usize, sane: u64| if garbage & (1 << i) != 0 { junk[i] } else { sane };
            let mask = pick(8, d[8]);
            let sd = |i: usize| (d[i] >> 1) as i64;
            let wd = |i: usize| (d[i] >> 33) as i32;
            let s = Scalar {
                var: Tnum { value: pick(7, v & !mask), mask },
                umin: pick(0, v.saturating_sub(d[0])),
                umax: pick(1, v.saturating_add(d[1])),
                smin: pick(2, (v as i64).saturating_sub(sd(2)) as u64) as i64,
                smax: pick(3, (v as i64).saturating_add(sd(3)) as u64) as i64,
                u32min: pick(4, u64::from((v as u32).saturating_sub(d[4] as u32))) as u32,
                u32max: pick(5, u64::from((v as u32).saturating_add(d[5] as u32))) as u32,
                s32min: pick(6, ((v as i32).saturating_sub(wd(6))) as u64) as i32,
                s32max: if garbage & (1 << 9) != 0 {
                    junk[6] as i32
                } else {
                    (v as i32).saturating_add(wd(7))
                },
            };
            (s, v)
        })
}

/// One random abstract operand: its seeds, the constraint choice, and noise for sampling.
fn operand() -> impl Strategy<Value = (Vec<u64>, u8, Vec<u64>)> {
    (seeds(), any::<u8>(), prop::collection::vec(any::<u64>(), 8))
}

fn check_alu(op: AluOp, a: &(Vec<u64>, u8, Vec<u64>), b: &(Vec<u64>, u8, Vec<u64>)) {
    let (da, sa) = (abstract_of(&a.0, a.1), abstract_of(&b.0, b.1));
    let (dm, _) = members(&da, &a.0, &a.2);
    let (sm, _) = members(&sa, &b.0, &b.2);
    for (width, rules) in
        [(Width::W64, false), (Width::W32, false), (Width::W64, true), (Width::W32, true)]
    {
        // With `rules`, small operands go through the rules too (no member-by-member
        // shortcut), where every member is listed.
        let r = if rules {
            by_rules(|| Scalar::alu(op, width, &da, &sa))
        } else {
            Scalar::alu(op, width, &da, &sa)
        };
        assert_eq!(r.normalized(), Some(r), "{op:?} {width:?} result not normalized");
        for &x in &dm {
            for &y in &sm {
                let v = engine(op, width, x, y);
                assert_eq!(op.eval(width, x, y), v, "AluOp::eval {op:?} {width:?} {x:#x} {y:#x}");
                assert!(
                    r.contains(v),
                    "{op:?} {width:?} (rules only: {rules}): {x:#x} op {y:#x} = {v:#x} not in {r}\n dst {da:?}\n src {sa:?}\n got {r:?}"
                );
            }
        }
    }
}

macro_rules! alu_soundness {
    ($($name:ident: $op:expr;)*) => {
        proptest! {
            #![proptest_config(cases(8000))]
            $(
                #[test]
                fn $name(a in operand(), b in operand()) {
                    check_alu($op, &a, &b);
                }
            )*
        }
    };
}

alu_soundness! {
    sound_add: AluOp::Add;
    sound_sub: AluOp::Sub;
    sound_mul: AluOp::Mul;
    sound_div: AluOp::Div;
    sound_sdiv: AluOp::SDiv;
    sound_mod: AluOp::Mod;
    sound_smod: AluOp::SMod;
    sound_or: AluOp::Or;
    sound_and: AluOp::And;
    sound_lsh: AluOp::Lsh;
    sound_rsh: AluOp::Rsh;
    sound_arsh: AluOp::Arsh;
    sound_xor: AluOp::Xor;
    sound_mov: AluOp::Mov;
    sound_movsx8: AluOp::MovSx8;
    sound_movsx16: AluOp::MovSx16;
    sound_movsx32: AluOp::MovSx32;
    sound_neg: AluOp::Neg;
}

proptest! {
    #![proptest_config(cases(8000))]

    #[test]
    fn sound_byte_swaps(a in operand(), b in operand(), which in 0usize..9) {
        check_alu(OPS[18 + which], &a, &b);
    }

    /// Constants in, the engines' constant out: exact on constants for every operation.
    #[test]
    fn exact_on_constants(x in value(), y in value(), i in 0usize..OPS.len()) {
        let op = OPS[i];
        for width in [Width::W64, Width::W32] {
            let r = Scalar::alu(op, width, &Scalar::constant(x), &Scalar::constant(y));
            prop_assert_eq!(r, Scalar::constant(engine(op, width, x, y)), "{:?} {:?}", op, width);
        }
    }

    /// The pairs that take an edge stay in the refined operands; an edge is called
    /// impossible only when no pair takes it; a decided branch goes the same way for every
    /// pair.
    #[test]
    fn sound_refine_and_branch_taken(a in operand(), b in operand(), c in 0usize..CONDS.len()) {
        let cond = CONDS[c];
        let (da, sa) = (abstract_of(&a.0, a.1), abstract_of(&b.0, b.1));
        let (dm, dall) = members(&da, &a.0, &a.2);
        let (sm, sall) = members(&sa, &b.0, &b.2);
        for (width, rules) in [(Width::W64, false), (Width::W32, false), (Width::W64, true), (Width::W32, true)] {
            let run = |f: &dyn Fn() -> Option<(Scalar, Scalar)>| if rules { by_rules(f) } else { f() };
            let decided = if rules { by_rules(|| Scalar::branch_taken(cond, width, &da, &sa)) } else { Scalar::branch_taken(cond, width, &da, &sa) };
            for taken in [true, false] {
                let refined = run(&|| Scalar::refine(cond, width, &da, &sa, taken));
                let mut any = false;
                for &x in &dm {
                    for &y in &sm {
                        prop_assert_eq!(cond.holds(width, x, y), holds(cond, width, x, y));
                        if holds(cond, width, x, y) != taken {
                            continue;
                        }
                        any = true;
                        let Some((d2, s2)) = refined else {
                            panic!("{cond:?} {width:?} taken={taken}: ({x:#x}, {y:#x}) takes the edge called impossible\n dst {da:?}\n src {sa:?}");
                        };
                        prop_assert!(d2.contains(x) && s2.contains(y),
                            "{:?} {:?} taken={}: ({:#x}, {:#x}) lost\n dst {:?}\n src {:?}\n -> {:?}\n -> {:?}",
                            cond, width, taken, x, y, da, sa, d2, s2);
                        prop_assert!(decided != Some(!taken), "{:?} {:?} decided {:?} but ({:#x}, {:#x}) goes {}", cond, width, decided, x, y, taken);
                    }
                }
                if let Some((d2, s2)) = refined {
                    // Refinement narrows: the refined operands are within the originals.
                    prop_assert!(da.subsumes(&d2) && sa.subsumes(&s2), "{:?} widened", cond);
                }
                // With every member listed, an edge no pair takes should be found impossible
                // at least when one side is a constant (the common case in programs).
                if dall && sall && !any && (da.as_const().is_some() || sa.as_const().is_some()) && cond != JmpCond::Set {
                    prop_assert!(refined.is_none(), "{:?} {:?} taken={}: no pair takes the edge, yet refined\n dst {:?}\n src {:?}", cond, width, taken, da, sa);
                }
            }
        }
    }

    /// join holds both; subsumes is sound (and holds for the parts of a join); meet holds
    /// the common members; normalizing is idempotent.
    #[test]
    fn lattice_laws(a in operand(), b in operand()) {
        let (x, y) = (abstract_of(&a.0, a.1), abstract_of(&b.0, b.1));
        let (xm, _) = members(&x, &a.0, &a.2);
        let (ym, _) = members(&y, &b.0, &b.2);
        let j = x.join(&y);
        prop_assert_eq!(j, y.join(&x));
        prop_assert_eq!(x.join(&x), x);
        prop_assert!(j.subsumes(&x) && j.subsumes(&y) && x.subsumes(&x));
        prop_assert_eq!(x.normalized(), Some(x));
        for &v in xm.iter().chain(&ym) {
            prop_assert!(j.contains(v), "{:#x} not in the join {:?}", v, j);
        }
        if x.subsumes(&y) {
            for &v in &ym {
                prop_assert!(x.contains(v), "{:?} subsumes {:?} but lacks {:#x}", x, y, v);
            }
        }
        let m = x.meet(&y);
        for &v in xm.iter().filter(|&&v| y.contains(v)) {
            prop_assert!(m.is_some_and(|m| m.contains(v)), "{:#x} in both, not in the meet {:?}", v, m);
        }
    }

    /// Chains of operations and jump refinements, as a program applies them: the concrete
    /// values carried along (every result of every pair, pairs kept only on the edge they
    /// take) stay inside the abstract values.
    #[test]
    fn sound_chains(
        a in operand(),
        b in operand(),
        steps in prop::collection::vec((0usize..OPS.len(), any::<bool>(), 0usize..CONDS.len(), any::<u8>()), 1..8),
    ) {
        let mut x = abstract_of(&a.0, a.1);
        let mut y = abstract_of(&b.0, b.1);
        let mut xs = members(&x, &a.0, &a.2).0;
        let mut ys = members(&y, &b.0, &b.2).0;
        xs.truncate(24);
        ys.truncate(24);
        for (i, wide, c, how) in steps {
            let width = if wide { Width::W64 } else { Width::W32 };
            if how & 1 == 0 {
                let op = OPS[i];
                let r = Scalar::alu(op, width, &x, &y);
                let mut rs: Vec<u64> = xs.iter().flat_map(|&p| ys.iter().map(move |&q| engine(op, width, p, q))).collect();
                for &v in &rs {
                    prop_assert!(r.contains(v), "{:?} {:?} gave {:#x} outside {:?}\n dst {:?}\n src {:?}", op, width, v, r, x, y);
                }
                rs.sort_unstable();
                rs.dedup();
                rs.truncate(24);
                // The result replaces dst, or src (to vary which side is derived).
                if how & 2 == 0 { (x, xs) = (r, rs) } else { (y, ys) = (r, rs) }
            } else {
                let cond = CONDS[c];
                let taken = how & 2 == 0;
                let pairs: Vec<(u64, u64)> = xs.iter().flat_map(|&p| ys.iter().map(move |&q| (p, q)))
                    .filter(|&(p, q)| holds(cond, width, p, q) == taken).collect();
                let refined = Scalar::refine(cond, width, &x, &y, taken);
                if pairs.is_empty() {
                    break;
                }
                let Some((x2, y2)) = refined else {
                    panic!("{cond:?} {width:?} taken={taken}: {pairs:x?} take the edge called impossible\n dst {x:?}\n src {y:?}");
                };
                for &(p, q) in &pairs {
                    prop_assert!(x2.contains(p) && y2.contains(q), "{:?} {:?} taken={} lost ({:#x}, {:#x})\n dst {:?}\n src {:?}\n -> {:?}\n -> {:?}", cond, width, taken, p, q, x, y, x2, y2);
                }
                (x, y) = (x2, y2);
                xs = pairs.iter().map(|p| p.0).collect();
                ys = pairs.iter().map(|p| p.1).collect();
                for v in [&mut xs, &mut ys] {
                    v.sort_unstable();
                    v.dedup();
                }
            }
            if how & 4 != 0 {
                std::mem::swap(&mut x, &mut y);
                std::mem::swap(&mut xs, &mut ys);
            }
        }
    }

    /// Precision: on plain ranges, sums and differences get exactly the hull of their
    /// concrete results when those do not wrap, and comparisons against a constant refine
    /// to exactly the values that take the edge.
    #[test]
    fn exact_on_ranges(lo in value(), n in 0u64..64, lo2 in value(), n2 in 0u64..64, c in 0usize..CONDS.len()) {
        let (a, b) = (Scalar::range_u64(lo, lo.saturating_add(n)), Scalar::range_u64(lo2, lo2.saturating_add(n2)));
        let (am, bm) = (all_members(&a, 65).unwrap(), all_members(&b, 65).unwrap());
        for op in [AluOp::Add, AluOp::Sub] {
            let r = Scalar::alu(op, Width::W64, &a, &b);
            let wide: Vec<i128> = am.iter().flat_map(|&x| bm.iter().map(move |&y| match op {
                AluOp::Add => i128::from(x) + i128::from(y),
                _ => i128::from(x) - i128::from(y),
            })).collect();
            let (min, max) = (*wide.iter().min().unwrap(), *wide.iter().max().unwrap());
            if min >= 0 && max <= i128::from(u64::MAX) {
                prop_assert_eq!((i128::from(r.umin), i128::from(r.umax)), (min, max), "{:?} {:?} {:?}", op, a, b);
            }
        }
        let k = bm[0];
        let cond = CONDS[c];
        for taken in [true, false] {
            let want: Vec<u64> = am.iter().copied().filter(|&x| holds(cond, Width::W64, x, k) == taken).collect();
            let got = Scalar::refine(cond, Width::W64, &a, &Scalar::constant(k), taken);
            match got {
                None => prop_assert!(want.is_empty(), "{:?} {} on {:?} vs {:#x}: called impossible", cond, taken, a, k),
                Some((d, _)) if cond != JmpCond::Set && cond != JmpCond::Ne && cond != JmpCond::Eq => {
                    // Order comparisons cut a range into a range: the hull is exact.
                    prop_assert!(!want.is_empty());
                    prop_assert_eq!((d.umin, d.umax), (want[0], *want.last().unwrap()), "{:?} {} on {:?} vs {:#x}", cond, taken, a, k);
                }
                Some(_) => {}
            }
        }
    }

    /// Any field values at all (not normalized, contradictory, tnum broken): no function
    /// panics, and results still hold the concrete results of whatever members the raw
    /// operands have (the operations never rely on their inputs being normalized).
    #[test]
    fn raw_scalars_never_panic((a, av) in raw_scalar(), (b, bv) in raw_scalar(), noise in prop::collection::vec(value(), 12)) {
        let am: Vec<u64> = noise.iter().copied().chain([av, a.umin, a.umax, a.smin as u64, a.var.value]).filter(|&v| a.contains(v)).collect();
        let bm: Vec<u64> = noise.iter().copied().chain([bv, b.umin, b.umax, b.smax as u64, b.var.value]).filter(|&v| b.contains(v)).collect();
        for op in OPS {
            for width in [Width::W64, Width::W32] {
                let r = Scalar::alu(op, width, &a, &b);
                for &x in &am {
                    for &y in &bm {
                        prop_assert!(r.contains(engine(op, width, x, y)), "{:?} {:?} {:#x} {:#x}\n {:?}\n {:?}\n -> {:?}", op, width, x, y, a, b, r);
                    }
                }
            }
        }
        for cond in CONDS {
            for width in [Width::W64, Width::W32] {
                let _ = Scalar::branch_taken(cond, width, &a, &b);
                for taken in [true, false] {
                    let r = Scalar::refine(cond, width, &a, &b, taken);
                    for &x in &am {
                        for &y in &bm {
                            if holds(cond, width, x, y) == taken {
                                prop_assert!(r.is_some_and(|(d, s)| d.contains(x) && s.contains(y)), "{:?} {:?} {}", cond, width, taken);
                            }
                        }
                    }
                }
            }
        }
        let (j, m) = (a.join(&b), a.meet(&b));
        for &x in am.iter().chain(&bm) {
            prop_assert!(j.contains(x));
            if a.contains(x) && b.contains(x) {
                prop_assert!(m.is_some_and(|m| m.contains(x)));
            }
        }
        let _ = (a.subsumes(&b), a.is_empty(), a.zext32(), a.to_string(), a.normalized());
    }

    /// Truncation to 1..=8 bytes holds the low bytes of every member.
    #[test]
    fn sound_truncation(a in operand(), bytes in 0u32..9) {
        let x = abstract_of(&a.0, a.1);
        let r = x.truncated(bytes);
        for v in members(&x, &a.0, &a.2).0 {
            let low = if bytes >= 8 { v } else { v & ((1u64 << (bytes * 8)) - 1) };
            prop_assert!(r.contains(low), "{:#x} truncated to {} bytes = {:#x} not in {:?} (from {:?})", v, bytes, low, r, x);
        }
    }

    /// Tnum operations hold the concrete results of their members.
    #[test]
    fn tnum_sound(a in operand(), b in operand(), n in 0u32..70) {
        let (x, y) = (abstract_of(&a.0, a.1).var, abstract_of(&b.0, b.1).var);
        let xs: Vec<u64> = a.0.iter().copied().chain(a.2.iter().map(|r| x.value | (r & x.mask))).collect();
        let ys: Vec<u64> = b.0.iter().copied().chain(b.2.iter().map(|r| y.value | (r & y.mask))).collect();
        for &p in &xs {
            prop_assert!(x.contains(p));
            prop_assert!(x.lshift(n).contains(p.checked_shl(n).unwrap_or(0)));
            prop_assert!(x.rshift(n).contains(p.checked_shr(n).unwrap_or(0)));
            prop_assert!(x.arshift(n, 64).contains(((p as i64) >> n.min(63)) as u64));
            prop_assert!(x.arshift(n, 32).contains(u64::from(((p as u32 as i32) >> n.min(31)) as u32)));
            prop_assert!(x.cast(2).contains(p & 0xffff) && x.subreg().contains(p & 0xffff_ffff));
            prop_assert!(x.not().contains(!p));
            // min_ge / max_le are the nearest members.
            let q = p.wrapping_add(n.into());
            if let Some(m) = x.min_ge(q) {
                prop_assert!(m >= q && x.contains(m));
            }
            if q <= p {
                prop_assert!(x.min_ge(q).is_some_and(|m| m <= p));
            } else {
                prop_assert!(x.max_le(q).is_some_and(|m| m >= p && m <= q && x.contains(m)));
            }
            for &r in &ys {
                prop_assert!(x.add(y).contains(p.wrapping_add(r)));
                prop_assert!(x.sub(y).contains(p.wrapping_sub(r)));
                prop_assert!(x.mul(y).contains(p.wrapping_mul(r)));
                prop_assert!(x.and(y).contains(p & r));
                prop_assert!(x.or(y).contains(p | r));
                prop_assert!(x.xor(y).contains(p ^ r));
                prop_assert!(x.union(y).contains(p) && x.union(y).contains(r));
                prop_assert!(x.with_subreg(y).contains((p & !0xffff_ffff) | (r & 0xffff_ffff)));
                if y.contains(p) {
                    prop_assert!(x.try_intersect(y).is_some_and(|t| t.contains(p)));
                }
            }
        }
        let (lo, hi) = (a.0[0].min(b.0[0]), a.0[0].max(b.0[0]));
        let r = Tnum::range(lo, hi);
        prop_assert!(r.contains(lo) && r.contains(hi) && r.contains(lo + (hi - lo) / 2));
        prop_assert!(x.union(y).subsumes(x) && x.subsumes(x));
    }
}

// ---- Precision -------------------------------------------------------------------------

fn c(v: u64) -> Scalar {
    Scalar::constant(v)
}

#[test]
fn and_with_a_mask_bounds_the_value() {
    let r = Scalar::alu(AluOp::And, Width::W64, &Scalar::unknown(), &c(0xff));
    assert_eq!((r.umin, r.umax, r.smin, r.smax), (0, 255, 0, 255));
    assert_eq!(r.var, Tnum { value: 0, mask: 0xff });
    assert_eq!(r.to_string(), "scalar(umin=0,umax=255,var_off=(0x0; 0xff))");
}

#[test]
fn less_than_taken_bounds_the_value() {
    let (x, k) = Scalar::refine(JmpCond::Lt, Width::W64, &Scalar::unknown(), &c(10), true).unwrap();
    assert_eq!((x.umin, x.umax), (0, 9));
    assert_eq!(k, c(10));
    // The fall-through edge: x >= 10.
    let (x, _) =
        Scalar::refine(JmpCond::Lt, Width::W64, &Scalar::unknown(), &c(10), false).unwrap();
    assert_eq!(x.umin, 10);
    // Signed: x s< 10 leaves the unsigned range open but bounds the signed one.
    let (x, _) =
        Scalar::refine(JmpCond::Slt, Width::W64, &Scalar::unknown(), &c(10), true).unwrap();
    assert_eq!((x.smin, x.smax), (i64::MIN, 9));
}

#[test]
fn add_overflow_is_tracked_on_each_interval() {
    // 32-bit: [0, 2^32-1] + 1 wraps to every 32-bit value, zero-extended.
    let all32 = Scalar::range_u64(0, 0xffff_ffff);
    let r = Scalar::alu(AluOp::Add, Width::W32, &all32, &c(1));
    assert_eq!((r.umin, r.umax), (0, 0xffff_ffff));
    assert!(r.contains(0) && r.contains(0xffff_ffff) && !r.contains(1 << 32));
    // Both ends overflow: the result is exact.
    let top = Scalar::range_u64(0xffff_fff0, 0xffff_ffff);
    let r = Scalar::alu(AluOp::Add, Width::W32, &top, &c(0x20));
    assert_eq!((r.umin, r.umax), (0x10, 0x1f));
    let top = Scalar::range_u64(u64::MAX - 15, u64::MAX);
    let r = Scalar::alu(AluOp::Add, Width::W64, &top, &c(0x20));
    assert_eq!((r.umin, r.umax), (0x10, 0x1f));
    // One end overflows: unsigned gives up, signed sees a contiguous range.
    let r = Scalar::alu(AluOp::Add, Width::W64, &Scalar::range_u64(u64::MAX - 1, u64::MAX), &c(1));
    assert_eq!((r.smin, r.smax), (-1, 0));
    assert_eq!((r.umin, r.umax), (0, u64::MAX));
    // No overflow: plain sums.
    let r =
        Scalar::alu(AluOp::Add, Width::W64, &Scalar::range_u64(3, 10), &Scalar::range_u64(1, 2));
    assert_eq!((r.umin, r.umax), (4, 12));
    let r =
        Scalar::alu(AluOp::Sub, Width::W64, &Scalar::range_u64(10, 20), &Scalar::range_u64(1, 2));
    assert_eq!((r.umin, r.umax), (8, 19));
}

#[test]
fn signed_and_unsigned_bounds_deduce_each_other() {
    let r = Scalar::range_i64(0, 100);
    assert_eq!((r.umin, r.umax, r.u32min, r.u32max), (0, 100, 0, 100));
    let r = Scalar::range_i64(-8, -1);
    assert_eq!((r.umin, r.umax), (u64::MAX - 7, u64::MAX));
    assert_eq!((r.s32min, r.s32max), (-8, -1));
    // Crossing zero in signed: the unsigned view is two pieces, its hull all of it, but
    // the tnum and the low-32 intervals keep what is known.
    let r = Scalar::range_i64(-1, 1);
    assert_eq!((r.umin, r.umax), (0, u64::MAX));
    assert_eq!((r.s32min, r.s32max), (-1, 1));
    // The 64-bit range fixes the high half, so the low half is a range too.
    let r = Scalar::range_u64(0x1_0000_0005, 0x1_0000_0010);
    assert_eq!((r.u32min, r.u32max), (5, 0x10));
    assert_eq!(r.var, Tnum { value: 0x1_0000_0000, mask: 0x1f });
    // And the tnum moves interval ends to members: 0..=100 with the low two bits clear.
    let r =
        Scalar::range_u64(1, 100).meet(&Scalar::from_tnum(Tnum { value: 0, mask: !3 })).unwrap();
    assert_eq!((r.umin, r.umax), (4, 100));
}

#[test]
fn sub_register_refinement_reaches_the_64_bit_bounds() {
    // if w1 < 10 on an unknown register: the low half is below 10, the high half unknown.
    let (x, _) = Scalar::refine(JmpCond::Lt, Width::W32, &Scalar::unknown(), &c(10), true).unwrap();
    assert_eq!((x.u32min, x.u32max), (0, 9));
    assert_eq!(x.umax, u64::MAX - (0xffff_ffff - 9));
    assert_eq!(x.zext32().umax, 9);
    // On a register known to be 32-bit, the 64-bit bounds follow.
    let w = Scalar::range_u64(0, 0xffff_ffff);
    let (x, _) = Scalar::refine(JmpCond::Gt, Width::W32, &w, &c(100), true).unwrap();
    assert_eq!((x.umin, x.umax), (101, 0xffff_ffff));
    // A signed 32-bit comparison bounds the signed low half.
    let (x, _) = Scalar::refine(JmpCond::Sgt, Width::W32, &w, &c(-5i64 as u64), false).unwrap();
    assert_eq!((x.s32min, x.s32max), (i32::MIN, -5));
}

#[test]
fn refine_all_conditions_on_constants() {
    let (a, b) = (c(5), c(7));
    for (cond, expect) in [
        (JmpCond::Eq, false),
        (JmpCond::Ne, true),
        (JmpCond::Gt, false),
        (JmpCond::Ge, false),
        (JmpCond::Lt, true),
        (JmpCond::Le, true),
        (JmpCond::Sgt, false),
        (JmpCond::Sge, false),
        (JmpCond::Slt, true),
        (JmpCond::Sle, true),
        (JmpCond::Set, true),
    ] {
        for width in [Width::W64, Width::W32] {
            assert_eq!(Scalar::branch_taken(cond, width, &a, &b), Some(expect), "{cond:?}");
            assert!(Scalar::refine(cond, width, &a, &b, !expect).is_none());
            assert_eq!(Scalar::refine(cond, width, &a, &b, expect), Some((a, b)));
        }
    }
}

#[test]
fn branch_taken_from_ranges() {
    let byte = Scalar::range_u64(0, 255);
    assert_eq!(Scalar::branch_taken(JmpCond::Lt, Width::W64, &byte, &c(256)), Some(true));
    assert_eq!(Scalar::branch_taken(JmpCond::Gt, Width::W64, &byte, &c(255)), Some(false));
    assert_eq!(Scalar::branch_taken(JmpCond::Gt, Width::W64, &byte, &c(254)), None);
    assert_eq!(Scalar::branch_taken(JmpCond::Eq, Width::W64, &byte, &c(300)), Some(false));
    // Signed: a byte is never negative.
    assert_eq!(Scalar::branch_taken(JmpCond::Slt, Width::W64, &byte, &c(0)), Some(false));
    // Set: bits that cannot be set.
    assert_eq!(Scalar::branch_taken(JmpCond::Set, Width::W64, &byte, &c(0x100)), Some(false));
    let odd = Scalar::from_tnum(Tnum { value: 1, mask: 0xfe });
    assert_eq!(Scalar::branch_taken(JmpCond::Set, Width::W64, &odd, &c(1)), Some(true));
    // 32-bit: the high half does not matter.
    let hi = Scalar::range_u64(0x5_0000_0000, 0x5_0000_0003);
    assert_eq!(Scalar::branch_taken(JmpCond::Lt, Width::W32, &hi, &c(4)), Some(true));
    assert_eq!(Scalar::branch_taken(JmpCond::Lt, Width::W64, &hi, &c(4)), Some(false));
}

#[test]
fn set_and_not_set_refine_bits() {
    let x = Scalar::alu(AluOp::And, Width::W64, &Scalar::unknown(), &c(4));
    let (t, _) = Scalar::refine(JmpCond::Set, Width::W64, &x, &c(4), true).unwrap();
    assert_eq!(t.as_const(), Some(4));
    let (f, _) = Scalar::refine(JmpCond::Set, Width::W64, &x, &c(4), false).unwrap();
    assert_eq!(f.as_const(), Some(0));
    // The fall-through edge of `x & 0xf0` clears those bits of an unknown x.
    let (f, _) =
        Scalar::refine(JmpCond::Set, Width::W64, &Scalar::unknown(), &c(0xf0), false).unwrap();
    assert_eq!(f.var.mask, !0xf0);
}

#[test]
fn ne_trims_an_interval_end() {
    let (x, _) =
        Scalar::refine(JmpCond::Ne, Width::W64, &Scalar::range_u64(0, 10), &c(0), true).unwrap();
    assert_eq!((x.umin, x.umax), (1, 10));
    let (x, _) =
        Scalar::refine(JmpCond::Eq, Width::W64, &Scalar::range_u64(0, 10), &c(10), false).unwrap();
    assert_eq!((x.umin, x.umax), (0, 9));
}

#[test]
fn multiplication_of_small_ranges() {
    let r =
        Scalar::alu(AluOp::Mul, Width::W64, &Scalar::range_u64(0, 10), &Scalar::range_u64(2, 10));
    assert_eq!((r.umin, r.umax), (0, 100));
    let r =
        Scalar::alu(AluOp::Mul, Width::W64, &Scalar::range_i64(-3, 2), &Scalar::range_i64(-5, 4));
    assert_eq!((r.smin, r.smax), (-12, 15));
    let r = Scalar::alu(AluOp::Mul, Width::W32, &Scalar::range_u64(0, 0xffff), &c(0x10000));
    assert_eq!((r.umin, r.umax), (0, 0xffff_0000));
}

#[test]
fn shifts_by_constants_and_ranges() {
    let byte = Scalar::range_u64(0, 255);
    let r = Scalar::alu(AluOp::Lsh, Width::W64, &byte, &c(8));
    assert_eq!((r.umin, r.umax, r.var), (0, 0xff00, Tnum { value: 0, mask: 0xff00 }));
    let r = Scalar::alu(AluOp::Rsh, Width::W64, &Scalar::unknown(), &c(56));
    assert_eq!((r.umin, r.umax), (0, 255));
    let r = Scalar::alu(AluOp::Arsh, Width::W64, &Scalar::unknown(), &c(56));
    assert_eq!((r.smin, r.smax), (-128, 127));
    let r = Scalar::alu(AluOp::Arsh, Width::W32, &Scalar::unknown(), &c(24));
    assert_eq!((r.s32min, r.s32max, r.umax), (-128, 127, 0xffff_ffff));
    // By a range of amounts: 1 << [0, 3] is one of 1, 2, 4, 8.
    let r = Scalar::alu(AluOp::Lsh, Width::W64, &c(1), &Scalar::range_u64(0, 3));
    assert_eq!((r.umin, r.umax), (1, 8));
    assert!([1, 2, 4, 8].iter().all(|&v| r.contains(v)) && !r.contains(9));
    // The amount is masked: a shift by 64 + 4 is a shift by 4.
    let r = Scalar::alu(AluOp::Rsh, Width::W64, &c(0x100), &Scalar::range_u64(68, 68));
    assert_eq!(r.as_const(), Some(0x10));
}

#[test]
fn division_and_remainder() {
    let r =
        Scalar::alu(AluOp::Div, Width::W64, &Scalar::range_u64(100, 200), &Scalar::range_u64(2, 4));
    assert_eq!((r.umin, r.umax), (25, 100));
    // A divisor that may be zero adds 0 (division) or the dividend (remainder).
    let r =
        Scalar::alu(AluOp::Div, Width::W64, &Scalar::range_u64(100, 200), &Scalar::range_u64(0, 4));
    assert_eq!((r.umin, r.umax), (0, 200));
    let r = Scalar::alu(AluOp::Mod, Width::W64, &Scalar::unknown(), &c(8));
    assert_eq!((r.umin, r.umax, r.var), (0, 7, Tnum { value: 0, mask: 7 }));
    let r = Scalar::alu(AluOp::Mod, Width::W64, &Scalar::range_u64(3, 5), &Scalar::range_u64(6, 9));
    assert_eq!((r.umin, r.umax), (3, 5));
    let r = Scalar::alu(AluOp::SMod, Width::W64, &Scalar::range_i64(-100, 100), &c(7));
    assert_eq!((r.smin, r.smax), (-6, 6));
    let r = Scalar::alu(AluOp::SDiv, Width::W64, &Scalar::range_i64(-100, 100), &c(-10i64 as u64));
    assert_eq!((r.smin, r.smax), (-10, 10));
    let r = Scalar::alu(AluOp::SDiv, Width::W32, &Scalar::range_i64(-100, 100), &c(-10i64 as u64));
    assert_eq!((r.s32min, r.s32max, r.umax), (-10, 10, 0xffff_ffff));
}

#[test]
fn sign_extension_and_swaps() {
    let byte = Scalar::range_u64(0, 255);
    let r = Scalar::alu(AluOp::MovSx8, Width::W64, &Scalar::unknown(), &byte);
    assert_eq!((r.smin, r.smax), (-128, 127));
    let r = Scalar::alu(AluOp::MovSx8, Width::W32, &Scalar::unknown(), &byte);
    assert_eq!((r.s32min, r.s32max, r.umax), (-128, 127, 0xffff_ffff));
    let small = Scalar::range_u64(0, 100);
    let r = Scalar::alu(AluOp::MovSx16, Width::W64, &Scalar::unknown(), &small);
    assert_eq!((r.umin, r.umax), (0, 100));
    let r = Scalar::alu(AluOp::MovSx32, Width::W64, &Scalar::unknown(), &Scalar::range_i64(-3, 3));
    assert_eq!((r.smin, r.smax), (-3, 3));
    let r = Scalar::alu(AluOp::ToLe(16), Width::W64, &Scalar::unknown(), &Scalar::unknown());
    assert_eq!((r.umin, r.umax), (0, 0xffff));
    let r = Scalar::alu(AluOp::ToBe(16), Width::W64, &byte, &Scalar::unknown());
    assert_eq!(r.var, Tnum { value: 0, mask: 0xff00 });
    assert_eq!((r.umin, r.umax), (0, 0xff00));
    let r = Scalar::alu(AluOp::Bswap(64), Width::W32, &c(1), &Scalar::unknown());
    assert_eq!(r.as_const(), Some(1 << 56));
}

#[test]
fn or_xor_neg_bounds() {
    let r = Scalar::alu(AluOp::Or, Width::W64, &Scalar::range_u64(0, 15), &c(0x100));
    assert_eq!((r.umin, r.umax), (0x100, 0x10f));
    let r = Scalar::alu(AluOp::Xor, Width::W64, &Scalar::range_u64(0, 15), &c(0xf));
    assert_eq!((r.umin, r.umax), (0, 15));
    let r = Scalar::alu(AluOp::Neg, Width::W64, &Scalar::range_i64(1, 5), &Scalar::unknown());
    assert_eq!((r.smin, r.smax), (-5, -1));
    let r = Scalar::alu(AluOp::Neg, Width::W32, &Scalar::range_u64(1, 5), &Scalar::unknown());
    assert_eq!((r.s32min, r.s32max, r.umin), (-5, -1, 0xffff_fffb));
}

#[test]
fn join_subsumes_and_display() {
    let j = c(1).join(&c(3));
    assert_eq!((j.umin, j.umax, j.var), (1, 3, Tnum { value: 1, mask: 2 }));
    assert!(!j.contains(2) && j.contains(1) && j.contains(3));
    assert!(j.subsumes(&c(3)) && !c(3).subsumes(&j));
    assert!(Scalar::unknown().subsumes(&j));
    assert!(Scalar::empty().is_empty() && !j.is_empty());
    assert!(Scalar { umin: 5, umax: 9, var: Tnum { value: 0x10, mask: 0 }, ..Scalar::unknown() }
        .is_empty());
    assert_eq!(c(42).to_string(), "42");
    assert_eq!(c(-1i64 as u64).to_string(), "-1");
    assert_eq!(Scalar::range_i64(-1, 1).to_string(), "scalar(smin=-1,smax=1,umin=0,umax=18446744073709551615,smin32=-1,smax32=1,var_off=(0x0; 0xffffffffffffffff))");
    let w = Scalar::unknown().zext32();
    assert_eq!(w.to_string(), "scalar(umin=0,umax=4294967295,var_off=(0x0; 0xffffffff))");
    let (hi, _) =
        Scalar::refine(JmpCond::Lt, Width::W32, &Scalar::unknown(), &c(10), true).unwrap();
    assert_eq!(hi.to_string(), "scalar(smin=-9223372036854775808,smax=9223372032559808521,umin=0,umax=18446744069414584329,umin32=0,umax32=9,var_off=(0x0; 0xffffffff0000000f))");
}

/// Costs of the operations the analysis calls per instruction (not a test of behaviour:
/// run with `--ignored --nocapture` to print them).
#[test]
#[ignore]
fn timing() {
    use std::hint::black_box;
    use std::time::Instant;
    let operands = [
        Scalar::unknown(),
        Scalar::range_u64(0, 255),
        Scalar::range_i64(-100, 100),
        Scalar::constant(7),
        Scalar::range_u64(0x1_0000_0000, 0x1_0000_ffff),
        Scalar::from_tnum(Tnum { value: 0x10, mask: 0xf0f }),
    ];
    let rounds = 20_000u32;
    let time = |name: &str, f: &dyn Fn(&Scalar, &Scalar)| {
        let start = Instant::now();
        for _ in 0..rounds {
            for a in &operands {
                for b in &operands {
                    f(black_box(a), black_box(b));
                }
            }
        }
        let n = f64::from(rounds) * (operands.len() * operands.len()) as f64;
        println!("{name}: {:.0} ns", start.elapsed().as_nanos() as f64 / n);
    };
    time("normalized", &|a, _| {
        black_box(black_box(*a).normalized());
    });
    for op in [AluOp::Add, AluOp::Mul, AluOp::And, AluOp::Lsh, AluOp::SDiv] {
        for width in [Width::W64, Width::W32] {
            time(&format!("alu {op:?} {width:?}"), &|a, b| {
                black_box(Scalar::alu(op, width, a, b));
            });
        }
    }
    time("refine Lt W64", &|a, b| {
        black_box(Scalar::refine(JmpCond::Lt, Width::W64, a, b, true));
    });
    time("branch_taken Sgt W32", &|a, b| {
        black_box(Scalar::branch_taken(JmpCond::Sgt, Width::W32, a, b));
    });
    time("join", &|a, b| {
        black_box(a.join(b));
    });
    time("subsumes", &|a, b| {
        black_box(a.subsumes(b));
    });
}

/// Patterns from the kernel's bounds selftests and from packet programs.
#[test]
fn program_patterns() {
    // A 64-bit range whose low half wraps around 2^32: truncating it (w = w) gives a range
    // that is contiguous only as signed 32-bit, and sign-extending that gives it back.
    let x = Scalar::range_u64(0xffff_ff80, 0x1_0000_007f);
    let w = Scalar::alu(AluOp::Mov, Width::W32, &Scalar::unknown(), &x);
    assert_eq!((w.s32min, w.s32max, w.umax), (-128, 127, 0xffff_ffff));
    let s = Scalar::alu(AluOp::MovSx32, Width::W64, &Scalar::unknown(), &w);
    assert_eq!((s.smin, s.smax), (-128, 127));
    // A 32-bit move zero-extends: the result is non-negative as a 64-bit number.
    let z = Scalar::alu(AluOp::Mov, Width::W32, &Scalar::unknown(), &Scalar::unknown());
    assert_eq!((z.umin, z.umax, z.smin, z.smax), (0, 0xffff_ffff, 0, 0xffff_ffff));
    // A loop counter: i in [0, 9], i += 1, then `if i < 10` on the taken edge.
    let i = Scalar::range_u64(0, 9);
    let i = Scalar::alu(AluOp::Add, Width::W64, &i, &Scalar::constant(1));
    assert_eq!((i.umin, i.umax), (1, 10));
    let (i, _) = Scalar::refine(JmpCond::Lt, Width::W64, &i, &Scalar::constant(10), true).unwrap();
    assert_eq!((i.umin, i.umax), (1, 9));
    // A length checked against 1500, masked, scaled to an offset: every step bounded.
    let len = Scalar::alu(AluOp::Mov, Width::W32, &Scalar::unknown(), &Scalar::unknown());
    let (len, _) =
        Scalar::refine(JmpCond::Gt, Width::W64, &len, &Scalar::constant(1500), false).unwrap();
    let off = Scalar::alu(AluOp::And, Width::W64, &len, &Scalar::constant(0xffc));
    let off = Scalar::alu(AluOp::Lsh, Width::W64, &off, &Scalar::constant(1));
    assert_eq!((off.umin, off.umax), (0, 2 * (1500 & 0xffc)));
    assert_eq!(off.var.value & 7, 0);
    // Unsigned then signed: x <= 2^63 + 5 and x s>= 0 leaves x in [0, 2^63 - 1].
    let x = Scalar::range_u64(0, (1 << 63) + 5);
    let (x, _) = Scalar::refine(JmpCond::Slt, Width::W64, &x, &Scalar::constant(0), false).unwrap();
    assert_eq!((x.umin, x.umax, x.smin), (0, i64::MAX as u64, 0));
    // A 32-bit comparison on a value whose high half is fixed narrows the 64-bit range.
    let p = Scalar::range_u64(0x7_0000_0000, 0x7_ffff_ffff);
    let (p, _) = Scalar::refine(JmpCond::Le, Width::W32, &p, &Scalar::constant(64), true).unwrap();
    assert_eq!((p.umin, p.umax), (0x7_0000_0000, 0x7_0000_0040));
    // Jset on a one-bit candidate: the fall-through edge clears it, the taken edge sets it.
    let flags = Scalar::alu(AluOp::And, Width::W64, &Scalar::unknown(), &Scalar::constant(0x12));
    let (t, _) =
        Scalar::refine(JmpCond::Set, Width::W64, &flags, &Scalar::range_u64(0, 3), true).unwrap();
    assert_eq!(t.var, Tnum { value: 0x2, mask: 0x10 });
}

#[test]
fn low_half_pieces_bound_the_64_bit_range() {
    // Low half in s32 [-1, 1] is {0, 1, 0xffffffff}: two pieces of the 32-bit ring, which
    // move each end of the 64-bit range to a value with such a low half.
    let x = Scalar {
        umin: 0x5_0000_0000,
        umax: 0x6_0000_0005,
        s32min: -1,
        s32max: 1,
        ..Scalar::unknown()
    };
    let n = x.normalized().unwrap();
    assert_eq!((n.umin, n.umax), (0x5_0000_0000, 0x6_0000_0001));
    let x = Scalar {
        umin: 0x5_0000_0002,
        umax: 0x5_ffff_fffe,
        s32min: -1,
        s32max: 1,
        ..Scalar::unknown()
    };
    assert!(x.is_empty());
}

/// Every operation at both widths on small ranges around the points where the semantics
/// turn (0, ±1, the 32- and 64-bit sign and carry boundaries, shift widths), every member
/// pair checked: the corners random sampling may miss (`MIN / -1`, `x % 0`, shifts by 31,
/// 32, 63, 64).
#[test]
fn sound_at_the_boundaries() {
    let points: [u64; 12] = [
        0,
        1,
        u64::MAX,
        31,
        32,
        63,
        64,
        0x7fff_ffff,
        0xffff_ffff,
        0x8000_0000_0000_0000,
        0x7fff_ffff_ffff_ffff,
        0xffff_ffff_8000_0000,
    ];
    let mut operands = Vec::new();
    for &p in &points {
        operands.push(Scalar::range_u64(p.saturating_sub(2), p.saturating_add(2)));
        operands
            .push(Scalar::range_i64((p as i64).saturating_sub(2), (p as i64).saturating_add(2)));
        operands.push(Scalar::constant(p));
    }
    let members: Vec<Vec<u64>> =
        operands.iter().map(|s| all_members(s, 16).expect("small")).collect();
    let mut checked = 0u64;
    for rules in [false, true] {
        for op in OPS {
            for width in [Width::W64, Width::W32] {
                for (a, am) in operands.iter().zip(&members) {
                    for (b, bm) in operands.iter().zip(&members) {
                        let r = if rules {
                            by_rules(|| Scalar::alu(op, width, a, b))
                        } else {
                            Scalar::alu(op, width, a, b)
                        };
                        for &x in am {
                            for &y in bm {
                                let v = engine(op, width, x, y);
                                assert!(r.contains(v), "{op:?} {width:?} {x:#x} {y:#x} = {v:#x} not in {r:?}\n {a:?}\n {b:?}");
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        for cond in CONDS {
            for width in [Width::W64, Width::W32] {
                for (a, am) in operands.iter().zip(&members) {
                    for (b, bm) in operands.iter().zip(&members) {
                        for taken in [true, false] {
                            let r = if rules {
                                by_rules(|| Scalar::refine(cond, width, a, b, taken))
                            } else {
                                Scalar::refine(cond, width, a, b, taken)
                            };
                            let mut any = false;
                            for &x in am {
                                for &y in bm {
                                    if holds(cond, width, x, y) == taken {
                                        any = true;
                                        assert!(
                                        r.is_some_and(|(d, s)| d.contains(x) && s.contains(y)),
                                        "{cond:?} {width:?} {taken} {x:#x} {y:#x}\n {a:?}\n {b:?}"
                                    );
                                    }
                                }
                            }
                            if !any
                                && (a.as_const().is_some() || b.as_const().is_some())
                                && cond != JmpCond::Set
                            {
                                assert!(
                                r.is_none(),
                                "{cond:?} {width:?} {taken}: impossible edge kept\n {a:?}\n {b:?}"
                            );
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 1_600_000, "{checked} pairs");
}

#[test]
fn truncation_and_alignment() {
    let x = Scalar::range_u64(0x1_0000_0010, 0x1_0000_0020);
    let b = x.truncated(1);
    assert_eq!((b.umin, b.umax), (0x10, 0x20));
    assert_eq!(x.truncated(4).umax, 0x20);
    assert_eq!(Scalar::unknown().truncated(2).umax, 0xffff);
    let off = Scalar::alu(AluOp::Lsh, Width::W64, &Scalar::range_u64(0, 7), &Scalar::constant(3));
    assert!(off.var.is_aligned(8) && !off.var.is_aligned(16));
    assert!(Tnum::constant(12).is_aligned(4) && !Tnum::constant(12).is_aligned(8));
}

/// Precision figures (not a test of behaviour: run with `--ignored --nocapture`): for
/// random small operands whose members can all be listed, how often each operation's
/// unsigned and signed bounds are exactly the hull of the concrete results, and how much
/// wider they are on average (log2 of the width ratio).
#[test]
#[ignore]
fn precision_figures() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = (operand(), operand());
    for op in OPS {
        for width in [Width::W64, Width::W32] {
            let (mut n, mut exact_u, mut exact_s, mut widen) = (0u32, 0u32, 0u32, 0f64);
            while n < 2000 {
                let (a, b) = strategy.new_tree(&mut runner).unwrap().current();
                let (x, y) = (abstract_of(&a.0, a.1), abstract_of(&b.0, b.1));
                let (Some(xm), Some(ym)) = (all_members(&x, 64), all_members(&y, 64)) else {
                    continue;
                };
                let r = Scalar::alu(op, width, &x, &y);
                let vals: Vec<u64> = xm
                    .iter()
                    .flat_map(|&p| ym.iter().map(move |&q| engine(op, width, p, q)))
                    .collect();
                let (umin, umax) = (*vals.iter().min().unwrap(), *vals.iter().max().unwrap());
                let smin = vals.iter().map(|&v| v as i64).min().unwrap();
                let smax = vals.iter().map(|&v| v as i64).max().unwrap();
                n += 1;
                exact_u += u32::from((r.umin, r.umax) == (umin, umax));
                exact_s += u32::from((r.smin, r.smax) == (smin, smax));
                let ratio = ((r.umax - r.umin) as f64 + 1.0) / ((umax - umin) as f64 + 1.0);
                widen += ratio.log2();
            }
            println!(
                "{:<10} {:?}: exact unsigned {:5.1}%  signed {:5.1}%  mean log2 widening {:5.2}",
                format!("{op:?}"),
                width,
                100.0 * f64::from(exact_u) / f64::from(n),
                100.0 * f64::from(exact_s) / f64::from(n),
                widen / f64::from(n)
            );
        }
    }
}

#[test]
fn small_sets_are_computed_member_by_member() {
    let x = c(4).join(&c(8));
    let r = Scalar::alu(AluOp::Mod, Width::W64, &x, &c(3));
    assert_eq!((r.umin, r.umax), (1, 2));
    let r = Scalar::alu(AluOp::ToBe(16), Width::W64, &c(1).join(&c(2)), &Scalar::unknown());
    assert_eq!((r.umin, r.umax), (0x100, 0x200));
    // {1, 2, 3} ^ {2, 4} = {0, 1, 3, 5, 6, 7}.
    let r = Scalar::alu(AluOp::Xor, Width::W32, &Scalar::range_u64(1, 3), &c(2).join(&c(4)));
    assert_eq!((r.umin, r.umax, r.var), (0, 7, Tnum { value: 0, mask: 7 }));
    // {4, 8} * {3, 5} = {12, 20, 24, 40}: the tnum of the results, not of the rule.
    let r = Scalar::alu(AluOp::Mul, Width::W64, &c(4).join(&c(8)), &c(3).join(&c(5)));
    assert_eq!((r.umin, r.umax), (12, 40));
    assert!(!r.contains(13) && r.contains(24));
    // A remainder within one period of a constant divisor follows the dividend.
    let r = Scalar::alu(AluOp::Mod, Width::W64, &Scalar::range_u64(1011, 1013), &c(5));
    assert_eq!((r.umin, r.umax), (1, 3));
    let r = Scalar::alu(AluOp::SMod, Width::W64, &Scalar::range_i64(-1013, -1011), &c(5));
    assert_eq!((r.smin, r.smax), (-3, -1));
}

#[test]
fn small_sets_refine_member_by_member() {
    let (x, y) = (c(1).join(&c(3)), c(3).join(&c(4)));
    let (d, s) = Scalar::refine(JmpCond::Eq, Width::W64, &x, &y, true).unwrap();
    assert_eq!((d.as_const(), s.as_const()), (Some(3), Some(3)));
    // x != y leaves every member that has an unequal partner: all of them.
    let (d, s) = Scalar::refine(JmpCond::Ne, Width::W64, &x, &y, true).unwrap();
    assert_eq!((d, s), (x, y));
    // {1, 2} & {4, 6} != 0 only for 2 & 6.
    let (d, s) =
        Scalar::refine(JmpCond::Set, Width::W64, &c(1).join(&c(2)), &c(4).join(&c(6)), true)
            .unwrap();
    assert_eq!((d.as_const(), s.as_const()), (Some(2), Some(6)));
    assert_eq!(
        Scalar::branch_taken(JmpCond::Set, Width::W64, &c(1).join(&c(8)), &c(2).join(&c(4))),
        Some(false)
    );
}

#[test]
fn remainders_masked_shift_amounts_and_or_sums() {
    // One quotient (3) for every pair: the remainder is x - 3d.
    let r = Scalar::alu(
        AluOp::Mod,
        Width::W64,
        &Scalar::range_u64(1000, 1010),
        &Scalar::range_u64(300, 310),
    );
    assert_eq!((r.umin, r.umax), (70, 110));
    let r = Scalar::alu(
        AluOp::SMod,
        Width::W64,
        &Scalar::range_i64(-1010, -1000),
        &Scalar::range_i64(300, 310),
    );
    assert_eq!((r.smin, r.smax), (-110, -70));
    // A shift amount of 66..=68 is masked to 2..=4.
    let r = Scalar::alu(AluOp::Lsh, Width::W64, &c(1), &Scalar::range_u64(66, 68));
    assert_eq!((r.umin, r.umax), (4, 16));
    let r = Scalar::alu(
        AluOp::Rsh,
        Width::W32,
        &c(0x100),
        &Scalar::range_u64(0x1_0000_0022, 0x1_0000_0023),
    );
    // 0x22 & 31 = 2 and 0x23 & 31 = 3: 0x100 >> 2 and >> 3.
    assert_eq!((r.umin, r.umax), (0x20, 0x40));
    // x | y <= x + y where the tnum alone allows more.
    let r = Scalar::alu(
        AluOp::Or,
        Width::W64,
        &Scalar::range_u64(0xff, 0x100),
        &Scalar::range_u64(1, 2),
    );
    assert_eq!((r.umin, r.umax), (0xff, 0x102));
}

#[test]
fn bitwise_bounds_across_the_sign() {
    // [-4, 3] & 0x1f0 (a range crossing zero): the negative part gives 0x1f0, the rest 0.
    let x = Scalar::range_i64(-4, 3);
    let m = Scalar::range_u64(0x1f0, 0x1f0);
    let r = by_rules(|| Scalar::alu(AluOp::And, Width::W64, &x, &m));
    assert_eq!((r.umin, r.umax), (0, 0x1f0));
    // [-4, 3] | [8, 9]: negative results from the negative part, small positive ones else.
    let r = by_rules(|| Scalar::alu(AluOp::Or, Width::W64, &x, &Scalar::range_u64(8, 9)));
    assert_eq!((r.smin, r.smax), (-4, 11));
}
