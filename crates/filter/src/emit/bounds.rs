//! What the emitters know about an expression without running it: an upper bound of its
//! value, whether it can abort, and how a load offset splits into a variable base and a
//! constant displacement (the `[x + k]` addressing both instruction sets have). The JIT's filter
//! lowering (weir-jit) uses the same split and load ends.
//!
//! The bounds decide when a check can be left out: a shift amount known to be below 32
//! needs no ">= 32 gives 0" test, and a load offset known to be small needs no test that it
//! fits the instruction's signed offset.

use crate::ir::{BinOp, Expr, Size};

/// An upper bound of `e`'s value on every packet (`u32::MAX` when nothing better is known).
pub fn max_value(e: &Expr) -> u32 {
    match e {
        Expr::Const(k) => *k,
        Expr::WireLen | Expr::Scratch(_) | Expr::Neg(_) => u32::MAX,
        Expr::Load { size, .. } => match size {
            Size::Byte => 0xff,
            Size::Half => 0xffff,
            Size::Word => u32::MAX,
        },
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (max_value(lhs), max_value(rhs));
            match op {
                BinOp::Add => a.saturating_add(b),
                BinOp::Mul => a.saturating_mul(b),
                // The quotient is at most the dividend; the remainder below the divisor.
                BinOp::Div => a,
                BinOp::Mod => a.min(b.saturating_sub(1)),
                BinOp::And => a.min(b),
                BinOp::Or | BinOp::Xor => all_ones_up_to(a.max(b)),
                BinOp::Shl => match rhs.as_ref() {
                    Expr::Const(k) if *k < 32 => {
                        let wide = u64::from(a).checked_shl(*k).unwrap_or(u64::MAX);
                        u32::try_from(wide).unwrap_or(u32::MAX)
                    }
                    _ => u32::MAX,
                },
                BinOp::Shr => match rhs.as_ref() {
                    Expr::Const(k) => a.checked_shr(*k).unwrap_or(0),
                    _ => a,
                },
                BinOp::Sub => u32::MAX,
            }
        }
    }
}

/// The smallest `2^n - 1` at least `v`: a bound of `x | y` and `x ^ y` when both are <= v.
fn all_ones_up_to(v: u32) -> u32 {
    u32::MAX.checked_shr(v.leading_zeros()).unwrap_or(0)
}

/// Whether evaluating `e` can abort (a load, or a division whose divisor may be 0).
pub(crate) fn can_abort(e: &Expr) -> bool {
    match e {
        Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => false,
        Expr::Load { .. } => true,
        Expr::Neg(inner) => can_abort(inner),
        Expr::Binary { op, lhs, rhs } => {
            let divisor_may_be_zero = matches!(op, BinOp::Div | BinOp::Mod)
                && !matches!(rhs.as_ref(), Expr::Const(k) if *k != 0);
            divisor_may_be_zero || can_abort(lhs) || can_abort(rhs)
        }
    }
}

/// Splits a load offset into `base + displacement` such that the sum never wraps (the
/// IR's offset arithmetic wraps, indexed addressing does not), folding nested `+ k`s:
/// `(b + 14) + 2` is `(b, 16)` when `b` cannot reach `u32::MAX - 15`. An offset with no
/// constant part is `(offset, 0)`.
pub fn split_offset(offset: &Expr) -> (&Expr, u32) {
    let mut base = offset;
    let mut displacement = 0u32;
    while let Expr::Binary { op: BinOp::Add, lhs, rhs } = base {
        let (inner, k) = match (lhs.as_ref(), rhs.as_ref()) {
            (inner, Expr::Const(k)) | (Expr::Const(k), inner) => (inner, *k),
            _ => break,
        };
        let Some(total) = displacement.checked_add(k) else { break };
        if max_value(inner).checked_add(total).is_none() {
            break;
        }
        base = inner;
        displacement = total;
    }
    (base, displacement)
}

/// The largest end (offset + size) of the loads at a constant offset in `e`, if it has any.
/// Every load of an expression is evaluated (or the expression aborts first), so a packet
/// shorter than this makes `e` abort.
pub fn constant_load_end(e: &Expr) -> Option<u64> {
    match e {
        Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => None,
        Expr::Load { offset, size } => {
            let own = match offset.as_ref() {
                Expr::Const(k) => Some(u64::from(*k).wrapping_add(u64::from(size.bytes()))),
                _ => None,
            };
            own.max(constant_load_end(offset))
        }
        Expr::Neg(inner) => constant_load_end(inner),
        Expr::Binary { lhs, rhs, .. } => constant_load_end(lhs).max(constant_load_end(rhs)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msh(k: u32) -> Expr {
        Expr::binary(BinOp::Shl, Expr::load_at(k, Size::Byte).and_mask(0xf), Expr::Const(2))
    }

    #[test]
    fn bounds_follow_masks_shifts_and_sums() {
        assert_eq!(max_value(&msh(14)), 60);
        assert_eq!(max_value(&msh(14).plus(14)), 74);
        assert_eq!(max_value(&Expr::load_at(0, Size::Half)), 0xffff);
        let or = Expr::binary(BinOp::Or, Expr::Const(5), Expr::load_at(0, Size::Byte));
        assert_eq!(max_value(&or), 0xff);
        let m = Expr::binary(BinOp::Mod, Expr::WireLen, Expr::Const(10));
        assert_eq!(max_value(&m), 9);
        let shr = Expr::binary(BinOp::Shr, Expr::WireLen, Expr::Const(40));
        assert_eq!(max_value(&shr), 0);
        assert_eq!(all_ones_up_to(0), 0);
        assert_eq!(all_ones_up_to(0x100), 0x1ff);
    }

    #[test]
    fn offsets_split_only_where_the_sum_cannot_wrap() {
        let nested = Expr::binary(BinOp::Add, msh(14).plus(14), Expr::Const(2));
        assert_eq!(split_offset(&nested), (&msh(14), 16));
        let wide = Expr::load_at(0, Size::Word).plus(4);
        assert_eq!(split_offset(&wide), (&wide, 0));
        let byte = Expr::load_at(0, Size::Byte);
        assert_eq!(split_offset(&byte.clone().plus(u32::MAX - 255)), (&byte, u32::MAX - 255));
    }

    #[test]
    fn aborts_and_load_ends() {
        let div = |d| Expr::binary(BinOp::Div, Expr::WireLen, d);
        assert!(!can_abort(&div(Expr::Const(3))));
        assert!(can_abort(&div(Expr::Const(0))));
        assert!(can_abort(&div(Expr::Scratch(0))));
        let e = Expr::load(msh(14).plus(20), Size::Half);
        assert_eq!(constant_load_end(&e), Some(15));
        assert_eq!(constant_load_end(&Expr::WireLen), None);
        assert_eq!(constant_load_end(&Expr::load_at(u32::MAX, Size::Word)), Some(1 << 32 | 3));
    }
}
