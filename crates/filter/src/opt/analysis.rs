//! Structural questions about IR trees that every pass asks: does it write scratch, can it
//! abort (without any facts from the path), which slots does it read, how big is it.

use super::env::scratch_mask;
use crate::ir::{BinOp, Expr, Pred, SCRATCH_SLOTS};

/// Does `p` contain a `Store` (a side effect later tests can observe)? A `Chain` walk
/// has none: its state is its own.
/// Does `p` write a scratch slot anywhere?
pub fn has_store(p: &Pred) -> bool {
    match p {
        Pred::Store { .. } => true,
        Pred::Chain(_) | Pred::Pairs(_) => false,
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(has_store),
        Pred::Not(q) | Pred::Try(q) => has_store(q),
        Pred::Const(_) | Pred::Cmp { .. } | Pred::In { .. } | Pred::Guard(_) => false,
    }
}

/// Can evaluating `e` abort on some packet? (Any load can; so can a division whose divisor
/// is not a nonzero constant, and a scratch slot that does not exist.)
pub fn expr_can_abort(e: &Expr) -> bool {
    match e {
        Expr::Const(_) | Expr::WireLen => false,
        Expr::Scratch(k) => *k >= SCRATCH_SLOTS,
        Expr::Load { .. } => true,
        Expr::Binary { op, lhs, rhs } => {
            expr_can_abort(lhs)
                || expr_can_abort(rhs)
                || (matches!(op, BinOp::Div | BinOp::Mod)
                    && !matches!(**rhs, Expr::Const(c) if c != 0))
        }
        Expr::Neg(x) => expr_can_abort(x),
    }
}

/// Can evaluating `p` abort on some packet?
pub fn pred_can_abort(p: &Pred) -> bool {
    match p {
        Pred::Const(_) => false,
        Pred::Cmp { lhs, rhs, .. } => expr_can_abort(lhs) || expr_can_abort(rhs),
        Pred::In { value, .. } => expr_can_abort(value),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(pred_can_abort),
        Pred::Not(q) => pred_can_abort(q),
        Pred::Store { slot, value } => *slot >= SCRATCH_SLOTS || expr_can_abort(value),
        Pred::Guard(n) => *n > 0,
        Pred::Chain(_) | Pred::Pairs(_) => true,
        // An abort inside is its false.
        Pred::Try(_) => false,
    }
}

/// Free of side effects and aborts on every packet: can be dropped or moved at will.
pub(crate) fn is_pure_total(p: &Pred) -> bool {
    !has_store(p) && !pred_can_abort(p)
}

/// The scratch slots read anywhere in `p` (bit per slot).
pub(crate) fn slots_read(p: &Pred) -> u32 {
    match p {
        Pred::Const(_) | Pred::Guard(_) => 0,
        Pred::Cmp { lhs, rhs, .. } => scratch_mask(lhs) | scratch_mask(rhs),
        Pred::In { value, .. } | Pred::Store { value, .. } => scratch_mask(value),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().fold(0, |m, q| m | slots_read(q)),
        Pred::Not(q) | Pred::Try(q) => slots_read(q),
        Pred::Chain(c) => scratch_mask(&c.next) | scratch_mask(&c.offset),
        Pred::Pairs(p) => p.parts().fold(0, |m, (guards, fields)| {
            guards.iter().fold(m, |m, g| m | slots_read(g))
                | fields.iter().fold(0, |m, f| m | scratch_mask(f))
        }),
    }
}

/// Number of nodes (predicates and expressions) in `p`: the optimizer's notion of size.
pub fn node_count(p: &Pred) -> usize {
    match p {
        Pred::Const(_) | Pred::Guard(_) => 1,
        Pred::Cmp { lhs, rhs, .. } => 1 + expr_nodes(lhs) + expr_nodes(rhs),
        Pred::In { value, .. } | Pred::Store { value, .. } => 1 + expr_nodes(value),
        Pred::And(ps) | Pred::Or(ps) => 1 + ps.iter().map(node_count).sum::<usize>(),
        Pred::Not(q) | Pred::Try(q) => 1 + node_count(q),
        Pred::Chain(c) => 1 + expr_nodes(&c.next) + expr_nodes(&c.offset),
        // The tests once (their code is emitted once), not the table.
        Pred::Pairs(p) => {
            1 + p
                .parts()
                .map(|(guards, fields)| {
                    guards.iter().map(node_count).sum::<usize>()
                        + fields.iter().map(expr_nodes).sum::<usize>()
                })
                .sum::<usize>()
        }
    }
}

fn expr_nodes(e: &Expr) -> usize {
    match e {
        Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => 1,
        Expr::Load { offset, .. } => 1 + expr_nodes(offset),
        Expr::Binary { lhs, rhs, .. } => 1 + expr_nodes(lhs) + expr_nodes(rhs),
        Expr::Neg(x) => 1 + expr_nodes(x),
    }
}

/// A fast hasher for tables keyed by IR nodes and constants (the optimizer's, and the
/// rejects-all check's value numbers in weir-pflang). Not resistant to crafted collisions;
/// the keys come from the filter being compiled, so the worst a crafted filter can do is
/// slow down its own compilation.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl FastHasher {
    fn mix(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            if let Some(dst) = word.get_mut(..chunk.len()) {
                dst.copy_from_slice(chunk);
            }
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, v: u8) {
        self.mix(u64::from(v));
    }

    fn write_u32(&mut self, v: u32) {
        self.mix(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.mix(v);
    }

    fn write_usize(&mut self, v: usize) {
        self.mix(v as u64);
    }
}

pub(crate) type FastMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// A fingerprint of a predicate, for noticing that a round changed nothing without keeping
/// a copy of a possibly huge tree.
pub(crate) fn fingerprint(p: &Pred) -> (u64, usize) {
    use std::hash::{Hash, Hasher};
    let mut h = FastHasher::default();
    p.hash(&mut h);
    (h.finish(), node_count(p))
}

/// A tree's exact content as a flat list of numbers: every node's kind, then its fields,
/// a junction's or a set's length before its members, so that the list is a prefix code
/// (two trees give the same list exactly when they are equal). A copy to compare with later
/// at the cost of one buffer, not an allocation per node as `clone` costs, and a walk that
/// stops at the first difference (issue 13: the copy was a tenth of a small filter's walk).
/// `Chain` and `Pairs` are not recorded (never met in the small filters it is for).
pub(crate) struct Shape(Vec<u32>);

impl Shape {
    /// The list of `p`, or `None` when it runs over `cap` numbers (a large tree) or holds
    /// a node not recorded.
    pub(crate) fn of(p: &Pred, cap: usize) -> Option<Shape> {
        let mut out = Vec::with_capacity(cap.min(256));
        shape_pred(p, &mut Recorder { out: &mut out, cap }).then_some(Shape(out))
    }

    /// Whether `p` is the tree recorded.
    ///
    /// Read directly against [`shape_pred`]'s numbers, as [`expr_matches`] reads an
    /// expression's, rather than through a sink that strips a slice per number put (issue 13:
    /// 469 instructions fewer a `port 22` compile, bench/records/2026-12-02-compile-47.txt).
    pub(crate) fn matches(&self, p: &Pred) -> bool {
        pred_matches_prefix(p, &self.0).is_some_and(<[u32]>::is_empty)
    }
}

/// The numbers after the ones [`shape_pred`] writes for `p`, when `code` starts with them
/// (`None` too for the nodes it does not record).
fn pred_matches_prefix<'a>(p: &Pred, code: &'a [u32]) -> Option<&'a [u32]> {
    match (p, code) {
        (Pred::Const(b), [TAG_PRED_CONST, v, rest @ ..]) if *v == u32::from(*b) => Some(rest),
        (Pred::Cmp { op, lhs, rhs }, [TAG_CMP, o, rest @ ..]) if *o == *op as u32 => {
            expr_matches_prefix(rhs, expr_matches_prefix(lhs, rest)?)
        }
        (Pred::In { value, set }, [TAG_IN, n, rest @ ..]) => {
            let ranges = set.ranges();
            if *n != shape_len(ranges.len()) {
                return None;
            }
            let rest = ranges.iter().try_fold(rest, |rest, &(lo, hi)| match rest {
                [l, h, rest @ ..] if *l == lo && *h == hi => Some(rest),
                _ => None,
            })?;
            expr_matches_prefix(value, rest)
        }
        (Pred::Not(q), [TAG_NOT, rest @ ..]) | (Pred::Try(q), [TAG_TRY, rest @ ..]) => {
            pred_matches_prefix(q, rest)
        }
        (Pred::And(ps), [TAG_AND, n, rest @ ..]) | (Pred::Or(ps), [TAG_OR, n, rest @ ..])
            if *n == shape_len(ps.len()) =>
        {
            ps.iter().try_fold(rest, |rest, q| pred_matches_prefix(q, rest))
        }
        (Pred::Guard(g), [TAG_GUARD, v, rest @ ..]) if v == g => Some(rest),
        (Pred::Store { slot, value }, [TAG_STORE, s, rest @ ..]) if *s == u32::from(*slot) => {
            expr_matches_prefix(value, rest)
        }
        _ => None,
    }
}

/// Appends the numbers of expression `e` (as [`Shape`] lists them inside a tree: a prefix
/// code) to `out`, to be compared with by [`expr_matches`]: a copy of an expression in a
/// buffer shared with others, not an allocation per node.
pub(crate) fn record_expr(e: &Expr, out: &mut Vec<u32>) {
    // (an expression holds no node a shape leaves out, and there is no cap: always whole)
    shape_expr(e, &mut Recorder { out, cap: usize::MAX });
}

/// Whether `code` is the numbers [`record_expr`] writes for `e`: `e` is the expression
/// recorded.
///
/// Read directly against [`shape_expr`]'s numbers rather than through a checker (a slice
/// stripped per number put): the atoms of a compile are compared so at every lookup (issue 13:
/// about half the instructions of [`super::env::Atoms`]' lookups on `udp and (port 67 or port 68)`,
/// bench/records/2026-12-02-compile-44.txt). Tested against `==` of the expressions recorded.
pub(crate) fn expr_matches(e: &Expr, code: &[u32]) -> bool {
    expr_matches_prefix(e, code).is_some_and(<[u32]>::is_empty)
}

/// The numbers after the ones [`shape_expr`] writes for `e`, when `code` starts with them.
fn expr_matches_prefix<'a>(e: &Expr, code: &'a [u32]) -> Option<&'a [u32]> {
    match (e, code) {
        (Expr::Const(c), [TAG_CONST, k, rest @ ..]) if k == c => Some(rest),
        (Expr::WireLen, [TAG_WIRE_LEN, rest @ ..]) => Some(rest),
        (Expr::Scratch(k), [TAG_SCRATCH, slot, rest @ ..]) if *slot == u32::from(*k) => Some(rest),
        (Expr::Load { offset, size }, [TAG_LOAD, n, rest @ ..]) if *n == size.bytes() => {
            expr_matches_prefix(offset, rest)
        }
        (Expr::Binary { op, lhs, rhs }, [TAG_BINARY, o, rest @ ..]) if *o == *op as u32 => {
            expr_matches_prefix(rhs, expr_matches_prefix(lhs, rest)?)
        }
        (Expr::Neg(x), [TAG_NEG, rest @ ..]) => expr_matches_prefix(x, rest),
        _ => None,
    }
}

/// Where [`shape_pred`] puts its numbers (a node's own at once): records, up to `cap`
/// numbers in all (those `out` held before included).
struct Recorder<'a> {
    out: &'a mut Vec<u32>,
    cap: usize,
}

impl Recorder<'_> {
    /// Appends `ns`; `false` (past the cap) stops the walk.
    fn put(&mut self, ns: &[u32]) -> bool {
        self.out.extend_from_slice(ns);
        self.out.len() <= self.cap
    }
}

fn shape_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// The first number [`shape_pred`] writes for each kind of predicate, read back by
/// [`pred_matches_prefix`].
const TAG_PRED_CONST: u32 = 0;
const TAG_CMP: u32 = 1;
const TAG_IN: u32 = 2;
const TAG_NOT: u32 = 3;
const TAG_AND: u32 = 4;
const TAG_OR: u32 = 5;
const TAG_GUARD: u32 = 6;
const TAG_STORE: u32 = 7;
const TAG_TRY: u32 = 8;

fn shape_pred(p: &Pred, sink: &mut Recorder) -> bool {
    match p {
        Pred::Const(b) => sink.put(&[TAG_PRED_CONST, u32::from(*b)]),
        Pred::Cmp { op, lhs, rhs } => {
            sink.put(&[TAG_CMP, *op as u32]) && shape_expr(lhs, sink) && shape_expr(rhs, sink)
        }
        Pred::In { value, set } => {
            let ranges = set.ranges();
            sink.put(&[TAG_IN, shape_len(ranges.len())])
                && ranges.iter().all(|&(lo, hi)| sink.put(&[lo, hi]))
                && shape_expr(value, sink)
        }
        Pred::Not(q) => sink.put(&[TAG_NOT]) && shape_pred(q, sink),
        Pred::And(ps) | Pred::Or(ps) => {
            let kind = if matches!(p, Pred::And(_)) { TAG_AND } else { TAG_OR };
            sink.put(&[kind, shape_len(ps.len())]) && ps.iter().all(|q| shape_pred(q, sink))
        }
        Pred::Guard(n) => sink.put(&[TAG_GUARD, *n]),
        Pred::Store { slot, value } => {
            sink.put(&[TAG_STORE, u32::from(*slot)]) && shape_expr(value, sink)
        }
        Pred::Try(q) => sink.put(&[TAG_TRY]) && shape_pred(q, sink),
        Pred::Chain(_) | Pred::Pairs(_) => false,
    }
}

/// The first number [`shape_expr`] writes for each kind of expression (after the
/// predicates' own tags, so that the two never meet), read back by [`expr_matches_prefix`].
const TAG_CONST: u32 = 16;
const TAG_WIRE_LEN: u32 = 17;
const TAG_SCRATCH: u32 = 18;
const TAG_LOAD: u32 = 19;
const TAG_BINARY: u32 = 20;
const TAG_NEG: u32 = 21;

fn shape_expr(e: &Expr, sink: &mut Recorder) -> bool {
    match e {
        Expr::Const(c) => sink.put(&[TAG_CONST, *c]),
        Expr::WireLen => sink.put(&[TAG_WIRE_LEN]),
        Expr::Scratch(k) => sink.put(&[TAG_SCRATCH, u32::from(*k)]),
        Expr::Load { offset, size } => {
            // (the most common node: its constant offset in the same put)
            if let Expr::Const(k) = **offset {
                return sink.put(&[TAG_LOAD, size.bytes(), TAG_CONST, k]);
            }
            sink.put(&[TAG_LOAD, size.bytes()]) && shape_expr(offset, sink)
        }
        Expr::Binary { op, lhs, rhs } => {
            sink.put(&[TAG_BINARY, *op as u32]) && shape_expr(lhs, sink) && shape_expr(rhs, sink)
        }
        Expr::Neg(x) => sink.put(&[TAG_NEG]) && shape_expr(x, sink),
    }
}

#[cfg(test)]
mod tests {
    use super::Shape;
    use crate::ir::{CmpOp, Expr, Pred, Size, ValueSet};
    use crate::opt::env::tests::{one_field_changed, random_expr};
    use weir_testkit::SplitMix64;

    /// A random predicate of every kind a shape records (and now and then a `Chain`, which
    /// it does not), from few leaves, so that trees repeat and many are alike at the top.
    fn random_pred(rng: &mut SplitMix64, depth: u32) -> Pred {
        let ops = [CmpOp::Eq, CmpOp::Ne, CmpOp::Gt, CmpOp::Set];
        if depth == 0 || rng.chance(30) {
            return match rng.below(6) {
                0 => Pred::Const(rng.chance(50)),
                1 => Pred::Guard(14 + rng.below(3) as u32),
                2 => Pred::In {
                    value: random_expr(rng, 2),
                    set: ValueSet::from_values((0..1 + rng.below(3)).map(|i| 6 + 11 * i as u32)),
                },
                3 => Pred::Store { slot: rng.below(2) as u8, value: random_expr(rng, 2) },
                _ => Pred::cmp(ops[rng.below_usize(4)], random_expr(rng, 2), random_expr(rng, 1)),
            };
        }
        let parts = |rng: &mut SplitMix64| -> Vec<Pred> {
            (0..1 + rng.below(3)).map(|_| random_pred(rng, depth - 1)).collect()
        };
        match rng.below(5) {
            0 => Pred::Not(Box::new(random_pred(rng, depth - 1))),
            1 => Pred::Try(Box::new(random_pred(rng, depth - 1))),
            2 => Pred::And(parts(rng)),
            3 => Pred::Or(parts(rng)),
            _ => Pred::Chain(Box::new(crate::ir::Chain {
                target: 6,
                ipv6: true,
                base: 14,
                next: random_expr(rng, 1),
                offset: random_expr(rng, 1),
            })),
        }
    }

    /// `p` with one field of one node changed (chosen at random), the rest the same.
    fn one_pred_field_changed(p: &Pred, rng: &mut SplitMix64) -> Pred {
        let one_part_changed = |ps: &[Pred], rng: &mut SplitMix64| {
            let mut ps = ps.to_vec();
            let i = rng.below_usize(ps.len());
            ps[i] = one_pred_field_changed(&ps[i], rng);
            ps
        };
        match p {
            Pred::Const(b) => Pred::Const(!b),
            Pred::Guard(n) => Pred::Guard(n ^ 1),
            Pred::Cmp { op, lhs, rhs } => match rng.below(3) {
                0 => Pred::cmp(
                    if *op == CmpOp::Eq { CmpOp::Ne } else { CmpOp::Eq },
                    lhs.clone(),
                    rhs.clone(),
                ),
                1 => Pred::cmp(*op, one_field_changed(lhs, rng), rhs.clone()),
                _ => Pred::cmp(*op, lhs.clone(), one_field_changed(rhs, rng)),
            },
            Pred::In { value, set } => match rng.below(3) {
                0 => Pred::In { value: one_field_changed(value, rng), set: set.clone() },
                1 => {
                    let mut ranges = set.ranges().to_vec();
                    let last = ranges.len() - 1;
                    ranges[last].1 += 1;
                    Pred::In { value: value.clone(), set: ValueSet::from_ranges(ranges) }
                }
                _ => {
                    let ranges = set.ranges().iter().map(|&(lo, hi)| (lo + 1, hi + 1));
                    Pred::In { value: value.clone(), set: ValueSet::from_ranges(ranges) }
                }
            },
            Pred::Store { slot, value } => match rng.below(2) {
                0 => Pred::Store { slot: slot ^ 1, value: value.clone() },
                _ => Pred::Store { slot: *slot, value: one_field_changed(value, rng) },
            },
            Pred::Not(q) if rng.chance(20) => Pred::Try(q.clone()),
            Pred::Not(q) => Pred::Not(Box::new(one_pred_field_changed(q, rng))),
            Pred::Try(q) if rng.chance(20) => Pred::Not(q.clone()),
            Pred::Try(q) => Pred::Try(Box::new(one_pred_field_changed(q, rng))),
            Pred::And(ps) if rng.chance(20) => Pred::Or(ps.clone()),
            Pred::Or(ps) if rng.chance(20) => Pred::And(ps.clone()),
            Pred::And(ps) => Pred::And(one_part_changed(ps, rng)),
            Pred::Or(ps) => Pred::Or(one_part_changed(ps, rng)),
            Pred::Chain(_) | Pred::Pairs(_) => unreachable!("not recorded, so never changed"),
        }
    }

    /// [`Shape::matches`] (read directly against the numbers) says that a recording is of a
    /// tree exactly when the two trees are equal (`==`), never matches a tree holding a node
    /// not recorded, and refuses a recording cut short or run on: random pairs, many of them
    /// equal, and each tree against a copy with one field changed anywhere.
    #[test]
    fn a_shape_matches_its_equals_only() {
        let mut rng = SplitMix64::new(0xc047);
        let (mut equal, mut unequal, mut unrecorded) = (0, 0, 0);
        for _ in 0..20_000 {
            let p = random_pred(&mut rng, 3);
            let q = if rng.chance(25) { p.clone() } else { random_pred(&mut rng, 3) };
            let Some(shape) = Shape::of(&q, usize::MAX) else {
                unrecorded += 1;
                assert!(Shape::of(&p, usize::MAX).is_none() || p != q);
                continue;
            };
            assert_eq!(shape.matches(&p), p == q, "{p:?} {q:?}");
            if p == q {
                equal += 1;
                let changed = one_pred_field_changed(&p, &mut rng);
                assert_ne!(changed, p);
                let other = Shape::of(&changed, usize::MAX).expect("a recorded tree's kinds");
                assert!(!other.matches(&p), "{p:?} {changed:?}");
                assert!(!shape.matches(&changed), "{p:?} {changed:?}");
                let mut code = shape.0.clone();
                code.pop();
                assert!(!Shape(code).matches(&p), "{p:?} cut short");
                let mut code = shape.0.clone();
                code.push(0);
                assert!(!Shape(code).matches(&p), "{p:?} run on");
            } else {
                unequal += 1;
            }
        }
        assert!(
            equal > 2_000 && unequal > 5_000 && unrecorded > 1_000,
            "{equal} {unequal} {unrecorded}"
        );
    }

    fn test(offset: u32, k: u32) -> Pred {
        Pred::eq(Expr::load_at(offset, Size::Half), k)
    }

    #[test]
    fn a_shape_matches_its_tree_and_no_other() {
        let set = |vs: &[u32]| Pred::In {
            value: Expr::load_at(23, Size::Byte),
            set: ValueSet::from_values(vs.iter().copied()),
        };
        let p = Pred::And(vec![test(12, 0x800), set(&[6, 17]), Pred::Or(vec![test(34, 22)])]);
        let shape = Shape::of(&p, 1 << 16).expect("small");
        assert!(shape.matches(&p.clone()));
        let others = [
            Pred::And(vec![test(12, 0x800), set(&[6, 17]), test(34, 22)]),
            Pred::Or(vec![test(12, 0x800), set(&[6, 17]), Pred::Or(vec![test(34, 22)])]),
            Pred::And(vec![test(12, 0x800), set(&[6, 18]), Pred::Or(vec![test(34, 22)])]),
            Pred::And(vec![test(12, 0x800), set(&[6, 17])]),
            Pred::And(vec![
                test(12, 0x800),
                set(&[6, 17]),
                Pred::Or(vec![test(34, 22)]),
                Pred::Const(true),
            ]),
            Pred::And(vec![
                Pred::cmp(CmpOp::Ne, Expr::load_at(12, Size::Half), Expr::Const(0x800)),
                set(&[6, 17]),
                Pred::Or(vec![test(34, 22)]),
            ]),
            Pred::And(vec![
                Pred::eq(Expr::load_at(12, Size::Word), 0x800),
                set(&[6, 17]),
                Pred::Or(vec![test(34, 22)]),
            ]),
            // The same nodes in the same order, nested otherwise: only the junctions'
            // lengths tell the two apart.
            Pred::And(vec![test(12, 0x800), set(&[6, 17]), Pred::Or(vec![]), test(34, 22)]),
        ];
        for q in others {
            assert!(!shape.matches(&q), "{q}");
        }
        // Past its cap a tree is not recorded.
        assert!(Shape::of(&p, 8).is_none());
        assert!(Shape::of(&p, 64).is_some());
    }
}
