//! How deep the filter built from a syntax tree can be, and the one limit on it.
//!
//! Every later stage (lowering, the optimizer, the emitters, the native compiler, the
//! evaluator) walks the filter tree recursively, so its depth is what must stay bounded; the
//! length of a flat list never is. The parser checks, after parsing, an upper bound of the
//! depth lowering gives the tree ([`bound`]), predicates and the arithmetic inside them
//! together, and refuses a tree over [`crate::MAX_DEPTH`] with a caret at the innermost node
//! that crosses it. What does not count:
//!
//! - the length of `and`/`or` chains (lists; a chain that switches between `and` and `or`
//!   more than [`LINEAR_RUNS`] times is lowered to a list too, see `lower`), of arithmetic
//!   chains (`len + 1 + 1 ...`: lowering balances long runs of `+ - * & | ^`), of runs of
//!   `not` or of unary `-` (only their parity makes a node);
//! - parentheses that only wrap other parentheses (`((x))`).
//!
//! What does: parentheses that hold something more than their inner pair, `not (`, packet
//! accesses inside packet accesses, the operand after `%` and `^` (which takes the rest of
//! the expression, as in libpcap's grammar), and `/`, `<<`, `>>`, which do not reassociate.

use crate::ast::{Arith, ArithKind, BinOp, BoolOp, Expr, ExprKind};
use crate::error::ParseError;
use crate::parser::MAX_DEPTH;

/// A bound of the depth of what lowering makes of any one primitive (`tcp port 80`, `vlan`,
/// `ip6 protochain 6`...), the comparison and its protocol checks included. Checked over the
/// valid corpus by the tests.
pub(crate) const PRIMITIVE: usize = 14;

/// Levels a packet access adds over its index (its checks, the displaced offset).
pub(crate) const LOAD: usize = 8;

/// A chain of `and`/`or` with more runs than this (a run: consecutive terms joined by the
/// same operator) is lowered to a flat list that keeps its state in a scratch slot; up to
/// this, as nested junctions, one level per run.
pub(crate) const LINEAR_RUNS: usize = 8;

/// Levels of a chain lowered to a list (see `lower::Lowerer::linear_chain`).
pub(crate) const LINEAR_LEVELS: usize = 4;

/// A run of one reassociable arithmetic operator longer than this is balanced by lowering;
/// up to this, it stays the left-leaning tree libpcap's order gives.
pub(crate) const BALANCE_OVER: usize = 16;

/// The family of operators that may be regrouped with each other: wrapping `+` and `-`
/// (one family: `a - b - c` is `a - (b + c)`), `*`, `&`, `|`, `^`. `/`, `%`, `<<` and `>>`
/// have none.
pub(crate) fn family(op: BinOp) -> Option<u8> {
    match op {
        BinOp::Add | BinOp::Sub => Some(0),
        BinOp::Mul => Some(1),
        BinOp::And => Some(2),
        BinOp::Or => Some(3),
        BinOp::Xor => Some(4),
        BinOp::Div | BinOp::Mod | BinOp::Shl | BinOp::Shr => None,
    }
}

/// Levels of one run of `m` operators of one family, as lowering builds it.
pub(crate) fn run_levels(m: usize) -> usize {
    if m <= BALANCE_OVER {
        m
    } else {
        // A balanced tree over m + 1 terms, and one subtraction of two balanced sums.
        (usize::BITS - m.leading_zeros()) as usize + 1
    }
}

/// Levels the operators of one arithmetic chain add above its deepest operand.
pub(crate) fn spine_levels(ops: impl IntoIterator<Item = BinOp>) -> usize {
    let mut levels = 0;
    let mut run: Option<(u8, usize)> = None;
    for op in ops {
        match (family(op), run) {
            (Some(f), Some((g, m))) if f == g => run = Some((g, m + 1)),
            (fam, _) => {
                levels += run.map_or(0, |(_, m)| run_levels(m));
                run = fam.map(|f| (f, 1));
                if fam.is_none() {
                    levels += 1;
                }
            }
        }
    }
    levels + run.map_or(0, |(_, m)| run_levels(m))
}

/// Number of runs of equal operators in an `and`/`or` chain.
pub(crate) fn runs(rest: &[(BoolOp, Expr)]) -> usize {
    let mut runs = 0;
    let mut last = None;
    for (op, _) in rest {
        if last != Some(*op) {
            runs += 1;
            last = Some(*op);
        }
    }
    runs
}

/// Levels an `and`/`or` chain adds above its deepest term.
pub(crate) fn chain_levels(rest: &[(BoolOp, Expr)]) -> usize {
    match runs(rest) {
        r if r > LINEAR_RUNS => LINEAR_LEVELS,
        r => r,
    }
}

/// Refuses a tree whose filter could be deeper than [`MAX_DEPTH`].
pub(crate) fn check(e: &Expr) -> Result<(), ParseError> {
    bound(e).map(|_| ())
}

fn too_deep(span: crate::ast::Span) -> ParseError {
    ParseError::new(span, format!("expression nested too deeply (more than {MAX_DEPTH} levels)"))
}

/// The bound of the depth of `e`'s filter. Recursion here follows the tree, whose depth
/// the parser's own limit already bounds.
pub(crate) fn bound(e: &Expr) -> Result<usize, ParseError> {
    let d = match &e.kind {
        ExprKind::Chain { first, rest } => {
            let mut deepest = bound(first)?;
            for (_, t) in rest {
                deepest = deepest.max(bound(t)?);
            }
            deepest + chain_levels(rest)
        }
        ExprKind::Not(inner) => bound(inner)? + 1,
        ExprKind::Relation(r) => {
            let a = arith_bound(&r.lhs)?.max(arith_bound(&r.rhs)?);
            PRIMITIVE.max(a + 2)
        }
        _ => PRIMITIVE,
    };
    if d > MAX_DEPTH {
        return Err(too_deep(e.span));
    }
    Ok(d)
}

fn arith_bound(a: &Arith) -> Result<usize, ParseError> {
    let d = match &a.kind {
        ArithKind::Num(_) | ArithKind::Len => 1,
        ArithKind::Load { offset, .. } => arith_bound(offset)? + LOAD,
        ArithKind::Neg(inner) => arith_bound(inner)? + 1,
        ArithKind::Chain { first, rest } => {
            let mut deepest = arith_bound(first)?;
            for (_, x) in rest {
                deepest = deepest.max(arith_bound(x)?);
            }
            deepest + spine_levels(rest.iter().map(|(op, _)| *op))
        }
    };
    if d > MAX_DEPTH {
        return Err(too_deep(a.span));
    }
    Ok(d)
}
