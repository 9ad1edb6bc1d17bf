//! Local rewriting that needs no facts from the path: constant folding and algebraic
//! identities in expressions, canonical comparisons (constant on the right), negation pushed
//! down to the tests (`not` disappears except around `Set` tests, stores and guards),
//! flattened `and`/`or`, and absorption of constants.
//!
//! Every rule keeps the exact outcome (true, false or abort) of the node it rewrites, so it
//! is valid anywhere in a filter: a part is only dropped when it can neither abort nor write
//! scratch (division by a constant 0 stays; `x * 0` is 0 only if `x` cannot abort).

use super::analysis::{expr_can_abort, is_pure_total};
use super::domain;
use super::env::{scratch_bit, scratch_mask};
use super::sets::{as_comparison, complement, set_test};
use crate::eval;
use crate::ir::{BinOp, CmpOp, Expr, Pred, Size, ValueSet};

/// Folds an expression bottom-up.
pub(crate) fn expr(e: Expr) -> Expr {
    match e {
        Expr::Binary { op, mut lhs, mut rhs } => {
            // Folded in their boxes: an unchanged node keeps them (see `binary_boxed`).
            *lhs = expr(std::mem::replace(&mut *lhs, Expr::Const(0)));
            *rhs = expr(std::mem::replace(&mut *rhs, Expr::Const(0)));
            binary_boxed(op, lhs, rhs)
        }
        Expr::Neg(mut x) => match expr(std::mem::replace(&mut *x, Expr::Const(0))) {
            Expr::Const(c) => Expr::Const(c.wrapping_neg()),
            Expr::Neg(y) => *y,
            y => {
                *x = y;
                Expr::Neg(x)
            }
        },
        Expr::Load { mut offset, size } => {
            // Constant offsets (nearly all of them) need no rebuilding.
            if !matches!(*offset, Expr::Const(_)) {
                let folded = expr(std::mem::replace(&mut *offset, Expr::Const(0)));
                *offset = folded;
            }
            Expr::Load { offset, size }
        }
        other => other,
    }
}

fn is_commutative(op: BinOp) -> bool {
    matches!(op, BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor)
}

/// `x + k` in canonical form: `x - (-k)` when that reads smaller, `x` when `k == 0`.
fn offset_by(x: Expr, k: u32) -> Expr {
    if k == 0 {
        x
    } else if k > 0x8000_0000 {
        Expr::binary(BinOp::Sub, x, Expr::Const(k.wrapping_neg()))
    } else {
        Expr::binary(BinOp::Add, x, Expr::Const(k))
    }
}

/// `x` as `base + k` (for reassociating constant offsets).
fn split_offset(x: Expr) -> (Expr, u32) {
    match x {
        Expr::Binary { op: BinOp::Add, lhs, rhs } => match *rhs {
            Expr::Const(k) => (*lhs, k),
            rhs => (Expr::Binary { op: BinOp::Add, lhs, rhs: Box::new(rhs) }, 0),
        },
        Expr::Binary { op: BinOp::Sub, lhs, rhs } => match *rhs {
            Expr::Const(k) => (*lhs, k.wrapping_neg()),
            rhs => (Expr::Binary { op: BinOp::Sub, lhs, rhs: Box::new(rhs) }, 0),
        },
        other => (other, 0),
    }
}

/// [`binary`] for operands already folded in their boxes. When folding gives the node back
/// as it is (the common case: every pass walks trees that `simplify` already folded), the
/// boxes are reused rather than freed and allocated again (issue 13: malloc and free were
/// 15-20% of a small filter's optimizing).
pub(crate) fn binary_boxed(op: BinOp, lhs: Box<Expr>, rhs: Box<Expr>) -> Expr {
    if keeps_shape(op, &lhs, &rhs) {
        Expr::Binary { op, lhs, rhs }
    } else {
        binary(op, *lhs, *rhs)
    }
}

/// Whether [`binary`] surely gives `lhs op rhs` back unchanged (false when unsure: the
/// caller then folds). Each case follows a path of `binary` to its plain `Expr::binary`.
pub(crate) fn keeps_shape(op: BinOp, lhs: &Expr, rhs: &Expr) -> bool {
    let c = match (lhs, rhs) {
        (Expr::Const(_), _) => return false,
        (_, Expr::Const(c)) => *c,
        // Neither operand constant: nothing to fold or reorder.
        _ => return true,
    };
    // `lhs` is `x op2 k` with a constant `k` (a candidate for reassociating).
    let offset_like = |ops: &[BinOp]| {
        matches!(lhs, Expr::Binary { op: o, rhs: k, .. }
            if ops.contains(o) && matches!(**k, Expr::Const(_)))
    };
    match op {
        // `offset_by` writes `x + k` for 0 < k <= 2^31 and `x - k` for 0 < k < 2^31.
        BinOp::Add => c != 0 && c <= 0x8000_0000 && !offset_like(&[BinOp::Add, BinOp::Sub]),
        BinOp::Sub => c != 0 && c < 0x8000_0000 && !offset_like(&[BinOp::Add, BinOp::Sub]),
        BinOp::And => {
            let width = match lhs {
                Expr::Load { size, .. } => size_mask(*size),
                _ => u32::MAX,
            };
            c != 0 && c & width == c && c != width && !offset_like(&[BinOp::And])
        }
        BinOp::Shl | BinOp::Shr => (1..32).contains(&c) && !offset_like(&[op]),
        _ => false,
    }
}

/// `lhs op rhs` with both operands already folded.
pub(crate) fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    if let (Expr::Const(a), Expr::Const(b)) = (&lhs, &rhs) {
        if let Ok(v) = eval::binary(op, *a, *b) {
            return Expr::Const(v);
        }
        return Expr::binary(op, lhs, rhs); // x / 0: the abort stays
    }
    let (mut lhs, rhs) =
        if is_commutative(op) && matches!(lhs, Expr::Const(_)) { (rhs, lhs) } else { (lhs, rhs) };
    let Expr::Const(c) = rhs else {
        if lhs == Expr::Const(0) && matches!(op, BinOp::Shl | BinOp::Shr) && !expr_can_abort(&rhs) {
            return Expr::Const(0);
        }
        return Expr::binary(op, lhs, rhs);
    };
    // A constant result is only allowed when dropping `lhs` drops no abort.
    let constant = |x: &Expr, v: u32| (!expr_can_abort(x)).then_some(Expr::Const(v));
    let combine: Option<fn(u32, u32) -> Option<u32>> = match op {
        BinOp::Add | BinOp::Sub => {
            let k = if op == BinOp::Add { c } else { c.wrapping_neg() };
            let (base, k0) = split_offset(lhs);
            return offset_by(base, k0.wrapping_add(k));
        }
        BinOp::Mul => match c {
            0 => return constant(&lhs, 0).unwrap_or_else(|| Expr::binary(op, lhs, rhs)),
            1 => return lhs,
            _ => Some(|a, b| Some(a.wrapping_mul(b))),
        },
        // floor(floor(x / a) / c) == floor(x / (a * c)) while a * c fits.
        BinOp::Div => match c {
            1 => return lhs,
            0 => None,
            _ => Some(|a, b| if a == 0 { None } else { a.checked_mul(b) }),
        },
        BinOp::Mod if c == 1 => {
            return constant(&lhs, 0).unwrap_or_else(|| Expr::binary(op, lhs, rhs))
        }
        BinOp::Mod => None,
        BinOp::And => {
            let width = match &lhs {
                Expr::Load { size, .. } => size_mask(*size),
                _ => u32::MAX,
            };
            let c2 = c & width;
            if c2 == 0 {
                return constant(&lhs, 0).unwrap_or_else(|| Expr::binary(op, lhs, rhs));
            }
            if c2 == width {
                return lhs;
            }
            if c2 != c {
                return binary(op, lhs, Expr::Const(c2));
            }
            Some(|a, b| Some(a & b))
        }
        BinOp::Or | BinOp::Xor => match c {
            0 => return lhs,
            u32::MAX if op == BinOp::Or => {
                return constant(&lhs, u32::MAX).unwrap_or_else(|| Expr::binary(op, lhs, rhs))
            }
            _ if op == BinOp::Or => Some(|a, b| Some(a | b)),
            _ => Some(|a, b| Some(a ^ b)),
        },
        BinOp::Shl | BinOp::Shr => match c {
            0 => return lhs,
            32.. => return constant(&lhs, 0).unwrap_or_else(|| Expr::binary(op, lhs, rhs)),
            // (x << a) << c is x << (a + c), and 0 once that reaches 32.
            _ => Some(|a, b| Some(a.saturating_add(b).min(32))),
        },
    };
    if let Some(combine) = combine {
        match reassociate(op, lhs, c, combine) {
            Ok(e) => return e,
            Err(l) => lhs = l,
        }
    }
    Expr::binary(op, lhs, rhs)
}

/// `(x op k) op c` as `x op combine(k, c)`; gives `lhs` back when it has another shape.
fn reassociate(
    op: BinOp,
    lhs: Expr,
    c: u32,
    combine: fn(u32, u32) -> Option<u32>,
) -> Result<Expr, Expr> {
    match lhs {
        Expr::Binary { op: o, lhs: inner, rhs } if o == op => match *rhs {
            Expr::Const(k) => match combine(k, c) {
                Some(kc) => Ok(binary(op, *inner, Expr::Const(kc))),
                None => Err(Expr::Binary { op, lhs: inner, rhs: Box::new(Expr::Const(k)) }),
            },
            r => Err(Expr::Binary { op, lhs: inner, rhs: Box::new(r) }),
        },
        other => Err(other),
    }
}

fn size_mask(size: Size) -> u32 {
    match size {
        Size::Byte => 0xff,
        Size::Half => 0xffff,
        Size::Word => u32::MAX,
    }
}

/// A canonical comparison: folded operands, a constant only on the right, constant
/// comparisons decided, and tests that are always or never true for their operand's
/// possible values decided (when the operand cannot abort).
pub(crate) fn cmp(op: CmpOp, lhs: Expr, rhs: Expr) -> Pred {
    let (lhs, rhs) = (expr(lhs), expr(rhs));
    let (op, lhs, rhs) = match (&lhs, &rhs) {
        (Expr::Const(a), Expr::Const(b)) => return Pred::Const(eval::compare(op, *a, *b)),
        (Expr::Const(_), _) => (domain::flip(op), rhs, lhs),
        _ => (op, lhs, rhs),
    };
    if !expr_can_abort(&lhs) && !expr_can_abort(&rhs) {
        if let Some(v) = domain::compare(op, domain::of_expr(&lhs), domain::of_expr(&rhs)) {
            return Pred::Const(v);
        }
    }
    Pred::Cmp { op, lhs, rhs }
}

/// A canonical set test (comparisons for simple sets, constants when decided).
pub(crate) fn member(value: Expr, set: ValueSet) -> Pred {
    let value = expr(value);
    if let Expr::Const(c) = value {
        return Pred::Const(set.contains(c));
    }
    if !expr_can_abort(&value) {
        if let Some(v) = domain::of_expr(&value).decide_in(&set) {
            return Pred::Const(v);
        }
    }
    match set_test(value, set) {
        Pred::Cmp { op, lhs, rhs } => cmp(op, lhs, rhs),
        other => other,
    }
}

/// `not p`, pushed down to the tests (exact: `not` of an abort is an abort either way).
pub(crate) fn negate(p: Pred) -> Pred {
    match p {
        Pred::Const(b) => Pred::Const(!b),
        Pred::Cmp { op, lhs, rhs } => match domain::negate(op) {
            Some(nop) => Pred::Cmp { op: nop, lhs, rhs },
            None => Pred::Not(Box::new(Pred::Cmp { op, lhs, rhs })),
        },
        Pred::In { value, set } => member(value, ValueSet::from_ranges(complement(set.ranges()))),
        Pred::And(ps) => junction(ps.into_iter().map(negate).collect(), false),
        Pred::Or(ps) => junction(ps.into_iter().map(negate).collect(), true),
        Pred::Not(q) => *q,
        p @ (Pred::Store { .. }
        | Pred::Guard(_)
        | Pred::Chain(_)
        | Pred::Try(_)
        | Pred::Pairs(_)) => Pred::Not(Box::new(p)),
    }
}

/// `and` (`conjunction`) or `or` of already simplified parts: flattened, neutral constants
/// dropped, nothing kept after an absorbing constant, and the whole replaced by that constant
/// when nothing before it can abort or write scratch.
pub(crate) fn junction(parts: Vec<Pred>, conjunction: bool) -> Pred {
    // Nothing to flatten or drop (the common case): keep the vector as it is.
    if is_plain(&parts, conjunction) {
        return finish(parts, conjunction);
    }
    // Room for every part once nested junctions of the same kind are flattened: room for
    // the parts as given grew the list (a reallocation and a copy) whenever one was
    // (issue 13, compile-31: twice per optimize of `port 22`, ~470 instructions each).
    let flattened = parts.iter().map(|p| match p {
        Pred::And(inner) if conjunction => inner.len(),
        Pred::Or(inner) if !conjunction => inner.len(),
        _ => 1,
    });
    let mut out: Vec<Pred> = Vec::with_capacity(flattened.sum());
    let mut absorbed = false;
    for p in parts {
        let p = match p {
            Pred::And(inner) if conjunction => {
                for q in inner {
                    if push_part(&mut out, q, conjunction) {
                        absorbed = true;
                        break;
                    }
                }
                if absorbed {
                    break;
                }
                continue;
            }
            Pred::Or(inner) if !conjunction => {
                for q in inner {
                    if push_part(&mut out, q, conjunction) {
                        absorbed = true;
                        break;
                    }
                }
                if absorbed {
                    break;
                }
                continue;
            }
            p => p,
        };
        if push_part(&mut out, p, conjunction) {
            absorbed = true;
            break;
        }
    }
    if absorbed {
        let before = out.len().saturating_sub(1);
        if out.iter().take(before).all(is_pure_total) {
            return Pred::Const(!conjunction);
        }
    }
    finish(out, conjunction)
}

/// Whether [`junction`] has nothing to flatten or drop in `parts` (no constant, no part of
/// the same kind).
fn is_plain(parts: &[Pred], conjunction: bool) -> bool {
    parts.iter().all(|p| match p {
        Pred::Const(_) => false,
        Pred::And(_) => !conjunction,
        Pred::Or(_) => conjunction,
        _ => true,
    })
}

/// Appends one part; true when it is the absorbing constant (nothing after it runs).
fn push_part(out: &mut Vec<Pred>, p: Pred, conjunction: bool) -> bool {
    match p {
        Pred::Const(b) if b == conjunction => false,
        Pred::Const(b) => {
            out.push(Pred::Const(b));
            true
        }
        p => {
            out.push(p);
            false
        }
    }
}

/// The junction node for parts already flattened.
pub(crate) fn finish(mut out: Vec<Pred>, conjunction: bool) -> Pred {
    match out.len() {
        0 => Pred::Const(conjunction),
        1 => out.pop().unwrap_or(Pred::Const(conjunction)),
        _ if conjunction => Pred::And(out),
        _ => Pred::Or(out),
    }
}

/// Simplifies a predicate bottom-up. With `factoring`, junctions are also factored
/// ([`super::factor()`]) in the same walk, which saves a pass over large filters. The scratch
/// slots the result reads are added to `reads` (for dead-store elimination in
/// [`super::decide()`], which knows more about which stores can abort).
pub(crate) fn pred(p: Pred, factoring: bool, reads: &mut u32) -> Pred {
    let mut parts = |ps: Vec<Pred>| -> Vec<Pred> {
        ps.into_iter().map(|q| pred(q, factoring, reads)).collect()
    };
    match p {
        Pred::Const(_) => p,
        Pred::Guard(0) => Pred::Const(true),
        Pred::Guard(_) => p,
        // Folded inside; dropped when nothing inside can abort and nothing inside stores
        // (a Try's stores are results read after the run, by pfmatch: `decide` counts
        // them as read, so they are never taken for dead there).
        Pred::Try(q) => match pred(*q, factoring, reads) {
            c @ Pred::Const(_) => c,
            q if !super::analysis::pred_can_abort(&q) && !super::analysis::has_store(&q) => q,
            q => Pred::Try(Box::new(q)),
        },
        Pred::Cmp { op, lhs, rhs } => {
            let p = cmp(op, lhs, rhs);
            if let Pred::Cmp { lhs, rhs, .. } = &p {
                *reads |= scratch_mask(lhs) | scratch_mask(rhs);
            }
            p
        }
        Pred::In { value, set } => {
            let p = member(value, set);
            match &p {
                Pred::Cmp { lhs: value, .. } | Pred::In { value, .. } => {
                    *reads |= scratch_mask(value);
                }
                _ => {}
            }
            p
        }
        Pred::Not(q) => negate(pred(*q, factoring, reads)),
        Pred::And(ps) if factoring => super::factor::junction(parts(ps), true),
        Pred::Or(ps) if factoring => super::factor::junction(parts(ps), false),
        Pred::And(ps) => junction(parts(ps), true),
        Pred::Or(ps) => junction(parts(ps), false),
        Pred::Store { slot, value } => {
            let value = expr(value);
            *reads |= scratch_mask(&value);
            Pred::Store { slot, value }
        }
        Pred::Chain(mut c) => {
            c.next = expr(c.next);
            c.offset = expr(c.offset);
            *reads |= scratch_mask(&c.next) | scratch_mask(&c.offset);
            Pred::Chain(c)
        }
        // Opaque (see `crate::pairs`); lowering writes its tests over packet loads only.
        Pred::Pairs(p) => {
            *reads |= super::analysis::slots_read(&Pred::Pairs(p.clone()));
            Pred::Pairs(p)
        }
    }
}

/// `Some(reads)` when [`simplify`] surely gives `p` back as it is, with the scratch slots it
/// reads; `None` when it may change it (or the check is unsure: Try, Chain and Pairs nodes,
/// arithmetic [`keeps_shape`] does not vouch for, large junctions when factoring). A walk
/// that reads the tree without rebuilding it: the optimizer asks it of a tree every other
/// pass was certified to leave as it is, to learn that the tree is the fixed point without
/// simplifying it and comparing (issue 13). Each case follows the rule of [`pred`] that
/// gives its node back; anything else answers `None`.
pub(crate) fn unchanged(p: &Pred, factoring: bool) -> Option<u32> {
    let mut reads = 0;
    unchanged_pred(p, factoring, &mut reads).then_some(reads)
}

fn unchanged_pred(p: &Pred, factoring: bool, reads: &mut u32) -> bool {
    match p {
        Pred::Const(_) => true,
        Pred::Guard(n) => *n != 0,
        Pred::Cmp { op, lhs, rhs } => {
            unchanged_expr(lhs, reads)
                && unchanged_expr(rhs, reads)
                && !matches!(lhs, Expr::Const(_))
                && (expr_can_abort(lhs)
                    || expr_can_abort(rhs)
                    || domain::compare(*op, domain::of_expr(lhs), domain::of_expr(rhs)).is_none())
        }
        Pred::In { value, set } => {
            unchanged_expr(value, reads)
                && !matches!(value, Expr::Const(_))
                && (expr_can_abort(value) || domain::of_expr(value).decide_in(set).is_none())
                && as_comparison(set).is_none()
        }
        // `negate` keeps a `not` only around these.
        Pred::Not(q) => {
            let stays = match &**q {
                Pred::Cmp { op, .. } => domain::negate(*op).is_none(),
                Pred::Store { .. } | Pred::Guard(_) => true,
                _ => false,
            };
            stays && unchanged_pred(q, factoring, reads)
        }
        Pred::And(ps) | Pred::Or(ps) => {
            let conjunction = matches!(p, Pred::And(_));
            ps.len() >= 2
                && is_plain(ps, conjunction)
                && (!factoring || super::factor::keeps(ps, conjunction))
                && ps.iter().all(|q| unchanged_pred(q, factoring, reads))
        }
        Pred::Store { value, .. } => unchanged_expr(value, reads),
        Pred::Try(_) | Pred::Chain(_) | Pred::Pairs(_) => false,
    }
}

/// Whether [`expr`] surely gives `e` back as it is; the slots it reads are added to `reads`
/// (its [`scratch_mask`], in the same walk) when it does.
fn unchanged_expr(e: &Expr, reads: &mut u32) -> bool {
    match e {
        Expr::Const(_) | Expr::WireLen => true,
        Expr::Scratch(k) => {
            *reads |= scratch_bit(*k);
            true
        }
        Expr::Load { offset, .. } => unchanged_expr(offset, reads),
        Expr::Binary { op, lhs, rhs } => {
            unchanged_expr(lhs, reads) && unchanged_expr(rhs, reads) && keeps_shape(*op, lhs, rhs)
        }
        Expr::Neg(x) => !matches!(**x, Expr::Const(_) | Expr::Neg(_)) && unchanged_expr(x, reads),
    }
}

/// The whole-filter entry point; returns the simplified predicate and the scratch slots it
/// reads.
pub(crate) fn simplify(p: Pred, factoring: bool) -> (Pred, u32) {
    let mut reads = 0;
    let p = pred(p, factoring, &mut reads);
    (p, reads)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Operands of every shape `keeps_shape` distinguishes, with constants at each of its
    /// bounds.
    fn operands() -> Vec<Expr> {
        let consts = [0, 1, 2, 15, 31, 32, 0xff, 0x100, 0xffff, 0x7fff_ffff, 0x8000_0000];
        let consts = consts.into_iter().chain([0x8000_0001, u32::MAX - 1, u32::MAX]);
        let mut v: Vec<Expr> = consts.map(Expr::Const).collect();
        let loads = [Size::Byte, Size::Half, Size::Word].map(|s| Expr::load_at(14, s));
        v.extend(loads.iter().cloned());
        v.extend([Expr::Scratch(1), Expr::WireLen]);
        for op in BinOp::ALL {
            for k in [0, 2, 0x8000_0000, u32::MAX] {
                v.push(Expr::binary(op, loads[1].clone(), Expr::Const(k)));
            }
            v.push(Expr::binary(op, loads[0].clone(), Expr::Scratch(2)));
        }
        v
    }

    #[test]
    fn reusing_the_boxes_gives_what_folding_gives() {
        let (mut kept, mut total) = (0, 0);
        for op in BinOp::ALL {
            for lhs in operands() {
                for rhs in operands() {
                    total += 1;
                    kept += usize::from(keeps_shape(op, &lhs, &rhs));
                    let want = binary(op, lhs.clone(), rhs.clone());
                    let got = binary_boxed(op, Box::new(lhs.clone()), Box::new(rhs.clone()));
                    assert_eq!(got, want, "{op:?} {lhs:?} {rhs:?}");
                }
            }
        }
        // The shortcut is taken (the test would prove nothing otherwise), and not always.
        assert!(kept > total / 20 && kept < total, "kept {kept} of {total}");
    }

    /// A junction with nested junctions of its kind flattens them in order, into a list
    /// made with room for all its parts at once (it never grows: room for the parts as
    /// given grew it, compile-31); neutral constants go, an absorbing one ends it.
    #[test]
    fn flattening_makes_room_for_every_part_at_once() {
        let t = |i: u32| Pred::eq(Expr::load_at(14 + i, Size::Byte), i);
        for conjunction in [true, false] {
            let nest = |ps: Vec<Pred>| if conjunction { Pred::And(ps) } else { Pred::Or(ps) };
            let cases = [
                (vec![t(0), nest(vec![t(1), t(2), t(3)]), t(4)], 5),
                (vec![nest(vec![t(0), t(1)]), nest(vec![t(2), t(3), t(4)])], 5),
                (vec![t(0), Pred::Const(conjunction), nest((1..7).map(t).collect()), t(7)], 8),
            ];
            for (parts, len) in cases {
                let room = parts.iter().map(|p| if matches!(p, Pred::Const(_)) { 1 } else { 0 });
                let room = room.sum::<usize>() + len;
                let (Pred::And(out) | Pred::Or(out)) = junction(parts, conjunction) else {
                    panic!("not a junction")
                };
                assert_eq!(out, (0..len as u32).map(t).collect::<Vec<_>>());
                assert!(out.capacity() <= room, "{} > {room}", out.capacity());
            }
            // an absorbing constant inside a nested part ends the junction there
            let absorbed = vec![t(0), nest(vec![t(1), Pred::Const(!conjunction), t(2)]), t(3)];
            assert_eq!(
                junction(absorbed, conjunction),
                nest(vec![t(0), t(1), Pred::Const(!conjunction)])
            );
        }
    }
}
