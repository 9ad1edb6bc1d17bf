//! Hoisted length checks: `Pred::Guard(n)` in front of a part of the filter that, on every
//! path that matters, loads at least `n` bytes anyway. After the guard the loads within `n`
//! bytes cannot fail, which emitters use to drop their per-load checks, and which lets
//! [`super::decide()`] reorder and merge the tests that make them.
//!
//! Which paths matter depends on the [`Mode`] of the place: at the top of a filter
//! (false == abort) a guard needs only be implied by the paths to *true*: `ether[12:2] ==
//! 0x800 and ip[9] == 6` accepts only packets of 24 bytes or more, so `guard(24)` goes first.
//! Where false and abort differ, every path must load that far.

use super::decide::Mode;
use super::domain;
use crate::ir::{Expr, Pred};

/// "Never": a bound for an outcome that cannot happen.
const NEVER: u64 = u64::MAX;

/// Lower bounds on the captured length for a predicate to come out true and false.
#[derive(Clone, Copy)]
struct Need {
    on_true: u64,
    on_false: u64,
}

impl Need {
    fn for_mode(self, mode: Mode) -> u64 {
        match mode {
            Mode::FalseIsAbort => self.on_true,
            Mode::TrueIsAbort => self.on_false,
            Mode::Exact => self.on_true.min(self.on_false),
        }
    }
}

/// Captured bytes a successful evaluation of `e` needs.
fn expr_need(e: &Expr) -> u64 {
    match e {
        Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => 0,
        Expr::Load { offset, size } => {
            let lo = u64::from(domain::low_of_expr(offset));
            expr_need(offset).max(lo + u64::from(size.bytes()))
        }
        Expr::Binary { lhs, rhs, .. } => expr_need(lhs).max(expr_need(rhs)),
        Expr::Neg(x) => expr_need(x),
    }
}

/// The [`Need`] of a predicate and of each node under it, computed once bottom-up: placing
/// guards asks for the needs of every junction's parts at every level, which recomputed
/// there would cost the size of the filter times its depth. One list for the whole tree,
/// in pre-order, each node with the size of its subtree (a node's first part follows it,
/// each next part follows the subtree of the one before): a tree of lists cost an
/// allocation and a free per junction (issue 13, compile-31).
struct Needs {
    nodes: Vec<NeedNode>,
}

#[derive(Clone, Copy)]
struct NeedNode {
    need: Need,
    /// Nodes in its subtree, itself included.
    size: usize,
}

/// What a node missing from [`Needs`] stands for (none is: the list is built from the
/// predicate placed): needing nothing, it makes no guard.
const NO_NODE: NeedNode = NeedNode { need: Need { on_true: 0, on_false: 0 }, size: 1 };

impl Needs {
    fn of(p: &Pred) -> Needs {
        // (room for a small filter's tree: growing from empty cost a few reallocations)
        let mut needs = Needs { nodes: Vec::with_capacity(32) };
        needs.push(p);
        needs
    }

    fn node(&self, at: usize) -> NeedNode {
        self.nodes.get(at).copied().unwrap_or(NO_NODE)
    }

    /// Appends the nodes of `p`'s subtree; gives `p`'s need.
    fn push(&mut self, p: &Pred) -> Need {
        let at = self.nodes.len();
        self.nodes.push(NO_NODE); // (`p`'s own, written when its parts are in)
        let need = match p {
            Pred::Const(true) => Need { on_true: 0, on_false: NEVER },
            Pred::Const(false) => Need { on_true: NEVER, on_false: 0 },
            Pred::Cmp { lhs, rhs, .. } => {
                let n = expr_need(lhs).max(expr_need(rhs));
                Need { on_true: n, on_false: n }
            }
            Pred::In { value, .. } => {
                let n = expr_need(value);
                Need { on_true: n, on_false: n }
            }
            Pred::Store { value, .. } => Need { on_true: expr_need(value), on_false: NEVER },
            Pred::Guard(n) => Need { on_true: u64::from(*n), on_false: NEVER },
            // Ends true or false on any packet, however short (an abort inside is its
            // false): it needs nothing, so no guard is hoisted on its account, and what it
            // loads is not taken as known after it.
            // A pair list may answer having loaded only its first test's first guard's
            // field: taken as needing nothing, as a Try.
            Pred::Try(_) | Pred::Pairs(_) => Need { on_true: 0, on_false: 0 },
            // The walk's first value and offset are loaded whatever it answers; what it
            // loads after them depends on the packet.
            Pred::Chain(c) => {
                let n = expr_need(&c.next).max(expr_need(&c.offset));
                Need { on_true: n, on_false: n }
            }
            Pred::Not(q) => {
                let n = self.push(q);
                Need { on_true: n.on_false, on_false: n.on_true }
            }
            Pred::And(ps) | Pred::Or(ps) => {
                junction_need(ps.iter().map(|q| self.push(q)), matches!(p, Pred::And(_)))
            }
        };
        let size = self.nodes.len() - at;
        if let Some(slot) = self.nodes.get_mut(at) {
            *slot = NeedNode { need, size };
        }
        need
    }
}

/// For `and`: true needs every part true; false needs some part false after the ones
/// before it were true. `or` is the dual.
fn junction_need(parts: impl Iterator<Item = Need>, conjunction: bool) -> Need {
    let mut go_on = 0u64; // needed to get past all parts so far
    let mut stop = NEVER; // needed to stop at some part so far
    for n in parts {
        let (pass, halt) =
            if conjunction { (n.on_true, n.on_false) } else { (n.on_false, n.on_true) };
        stop = stop.min(go_on.max(halt));
        go_on = go_on.max(pass);
    }
    if conjunction {
        Need { on_true: go_on, on_false: stop }
    } else {
        Need { on_true: stop, on_false: go_on }
    }
}

/// How many nodes [`pays_off`] looks at before giving up: keeps guard placement linear on
/// long junctions.
const SCAN_BUDGET: usize = 64;

/// Whether a guard raising the known length from `known` to `n` replaces at least two
/// per-load checks in `parts` (loads at constant offsets ending in `(known, n]`).
fn pays_off(parts: &[Pred], known: u64, n: u64) -> bool {
    struct Scan {
        known: u64,
        n: u64,
        found: usize,
        budget: usize,
    }
    impl Scan {
        fn expr(&mut self, e: &Expr) {
            if self.found >= 2 || self.budget == 0 {
                return;
            }
            self.budget -= 1;
            match e {
                Expr::Load { offset, size } => {
                    if let Expr::Const(k) = **offset {
                        let end = u64::from(k) + u64::from(size.bytes());
                        if self.known < end && end <= self.n {
                            self.found += 1;
                        }
                    }
                    self.expr(offset);
                }
                Expr::Binary { lhs, rhs, .. } => {
                    self.expr(lhs);
                    self.expr(rhs);
                }
                Expr::Neg(x) => self.expr(x),
                Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => {}
            }
        }
        fn pred(&mut self, p: &Pred) {
            if self.found >= 2 || self.budget == 0 {
                return;
            }
            self.budget -= 1;
            match p {
                Pred::Cmp { lhs, rhs, .. } => {
                    self.expr(lhs);
                    self.expr(rhs);
                }
                Pred::In { value, .. } | Pred::Store { value, .. } => self.expr(value),
                Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| self.pred(q)),
                Pred::Not(q) => self.pred(q),
                Pred::Chain(c) => {
                    self.expr(&c.next);
                    self.expr(&c.offset);
                }
                // Its loads keep their own checks: a guard outside does not replace them.
                Pred::Const(_) | Pred::Guard(_) | Pred::Try(_) | Pred::Pairs(_) => {}
            }
        }
    }
    let mut scan = Scan { known, n, found: 0, budget: SCAN_BUDGET };
    parts.iter().for_each(|p| scan.pred(p));
    scan.found >= 2
}

/// Inserts guards, starting at the top of a filter.
pub(crate) fn insert_guards(p: Pred) -> Pred {
    insert_guards_reporting(p).0
}

/// [`insert_guards`], and whether it inserted any (nothing else changes: without one the
/// result equals `p`).
pub(crate) fn insert_guards_reporting(p: Pred) -> (Pred, bool) {
    let mut added = false;
    let needs = Needs::of(&p);
    let p = place(p, &needs, 0, Mode::FalseIsAbort, 0, &mut added);
    (p, added)
}

/// The guard to insert before `parts`, which need `n` bytes where `known` are known.
/// Needs beyond 2^32 - 1 clamp: no packet is that long, so the guard rejects all the same.
fn guard_for(parts: &[Pred], n: u64, known: u64) -> Option<u32> {
    let n = n.min(u64::from(u32::MAX));
    (n > known && pays_off(parts, known, n)).then(|| u32::try_from(n).ok()).flatten()
}

/// `p` with guards where they pay off, given that `known` bytes are already known to be
/// captured where `p` starts; `at`: `p`'s node in `needs`.
fn place(p: Pred, needs: &Needs, at: usize, mode: Mode, known: u64, added: &mut bool) -> Pred {
    match p {
        Pred::And(parts) => place_and(parts, needs, at + 1, mode, known, added),
        Pred::Or(parts) => {
            let whole = needs.node(at).need.for_mode(mode);
            let guard = guard_for(&parts, whole, known);
            let known = guard.map_or(known, u64::from);
            let or = place_or(parts, needs, at + 1, mode, known, added);
            match guard {
                Some(n) => {
                    *added = true;
                    Pred::And(vec![Pred::Guard(n), or])
                }
                None => or,
            }
        }
        Pred::Not(q) => Pred::Not(Box::new(place(*q, needs, at + 1, mode.negated(), known, added))),
        other => other,
    }
}

/// The nodes of a junction's parts in `needs`, the first at `first`: each next part's
/// follows the subtree of the one before.
fn part_nodes(needs: &Needs, first: usize, count: usize) -> impl Iterator<Item = usize> + '_ {
    let mut at = first;
    (0..count).map(move |_| {
        let this = at;
        at += needs.node(this).size;
        this
    })
}

/// An `or`'s parts placed; `first`: its first part's node in `needs`.
fn place_or(
    parts: Vec<Pred>,
    needs: &Needs,
    first: usize,
    mode: Mode,
    mut known: u64,
    added: &mut bool,
) -> Pred {
    let last = parts.len().saturating_sub(1);
    // Each part replaced where it stands: the `or` keeps its list (a new one cost an
    // allocation and a free per junction, issue 13).
    let mut parts = parts;
    let nodes = part_nodes(needs, first, parts.len());
    for (i, (slot, at)) in parts.iter_mut().zip(nodes).enumerate() {
        let part_mode = if i == last { mode } else { mode.inner(false) };
        let n = needs.node(at).need;
        let part = std::mem::replace(slot, Pred::Const(true));
        *slot = place(part, needs, at, part_mode, known, added);
        // Later parts run only after this one was false.
        known = known.max(n.on_false.min(NEVER - 1));
    }
    Pred::Or(parts)
}

/// An `and`'s parts placed, with guards before them; `first`: its first part's node in
/// `needs`.
fn place_and(
    parts: Vec<Pred>,
    needs: &Needs,
    first: usize,
    mode: Mode,
    mut known: u64,
    added: &mut bool,
) -> Pred {
    // Per part: its node in `needs`, and what the suffix `parts[i..]` needs (one list for
    // both: a list of the nodes too cost an allocation per `and`).
    let count = parts.len();
    let none_after = Need { on_true: 0, on_false: NEVER };
    let mut per_part: Vec<(usize, Need)> = Vec::with_capacity(count + 1);
    per_part.extend(part_nodes(needs, first, count).map(|at| (at, none_after)));
    per_part.push((0, none_after));
    for i in (0..count).rev() {
        let (Some(&(at, _)), Some(&(_, after))) = (per_part.get(i), per_part.get(i + 1)) else {
            continue;
        };
        let n = needs.node(at).need;
        let combined = Need {
            on_true: n.on_true.max(after.on_true),
            on_false: n.on_false.min(n.on_true.max(after.on_false)),
        };
        if let Some(s) = per_part.get_mut(i) {
            s.1 = combined;
        }
    }
    let last = count.saturating_sub(1);
    // Each part replaced where it stands, a guard inserted before it: the `and` keeps its
    // list (a new one cost an allocation and a free per junction, issue 13). `at` is where
    // part `i` stands now (after the guards inserted before it); the parts from there on
    // are the ones not placed yet.
    let mut parts = parts;
    let mut at = 0;
    for i in 0..count {
        // A suffix of an `and` ends the way the whole `and` does: it has the same mode.
        let Some(&(node, suffix_need)) = per_part.get(i) else { break };
        let suffix = suffix_need.for_mode(mode);
        let rest = parts.get(at..).unwrap_or(&[]);
        let existing = matches!(rest.first(), Some(Pred::Guard(g)) if u64::from(*g) >= suffix.min(u64::from(u32::MAX)));
        if !existing {
            if let Some(g) = guard_for(rest, suffix, known) {
                *added = true;
                parts.insert(at, Pred::Guard(g));
                at += 1;
                known = u64::from(g);
            }
        }
        let Some(slot) = parts.get_mut(at) else { break };
        let part = std::mem::replace(slot, Pred::Const(true));
        let part_mode = if i == last { mode } else { mode.inner(true) };
        let pass = needs.node(node).need.on_true;
        *slot = place(part, needs, node, part_mode, known, added);
        at += 1;
        // Later parts run only after this one was true.
        if pass != NEVER {
            known = known.max(pass);
        }
    }
    Pred::And(parts)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ir::{BinOp, Size};

    /// The needs as a tree of lists, one per junction, as [`Needs`] was before compile-31:
    /// the oracle.
    struct NeedTree {
        need: Need,
        parts: Vec<NeedTree>,
    }

    fn need_tree(p: &Pred) -> NeedTree {
        let leaf = |need| NeedTree { need, parts: Vec::new() };
        match p {
            Pred::Const(true) => leaf(Need { on_true: 0, on_false: NEVER }),
            Pred::Const(false) => leaf(Need { on_true: NEVER, on_false: 0 }),
            Pred::Cmp { lhs, rhs, .. } => {
                let n = expr_need(lhs).max(expr_need(rhs));
                leaf(Need { on_true: n, on_false: n })
            }
            Pred::In { value, .. } => {
                let n = expr_need(value);
                leaf(Need { on_true: n, on_false: n })
            }
            Pred::Store { value, .. } => leaf(Need { on_true: expr_need(value), on_false: NEVER }),
            Pred::Guard(n) => leaf(Need { on_true: u64::from(*n), on_false: NEVER }),
            Pred::Try(_) | Pred::Pairs(_) => leaf(Need { on_true: 0, on_false: 0 }),
            Pred::Chain(c) => {
                let n = expr_need(&c.next).max(expr_need(&c.offset));
                leaf(Need { on_true: n, on_false: n })
            }
            Pred::Not(q) => {
                let inner = need_tree(q);
                let n = inner.need;
                NeedTree {
                    need: Need { on_true: n.on_false, on_false: n.on_true },
                    parts: vec![inner],
                }
            }
            Pred::And(ps) | Pred::Or(ps) => {
                let parts: Vec<NeedTree> = ps.iter().map(need_tree).collect();
                let need = junction_need(parts.iter().map(|t| t.need), matches!(p, Pred::And(_)));
                NeedTree { need, parts }
            }
        }
    }

    /// Checks node `at` of `needs`, and the nodes [`part_nodes`] finds for `p`'s parts (as
    /// placing walks them), against the oracle's tree; gives the subtree's node count.
    fn check(p: &Pred, tree: &NeedTree, needs: &Needs, at: usize) -> usize {
        let node = needs.node(at);
        let pair = |n: Need| (n.on_true, n.on_false);
        assert_eq!(pair(node.need), pair(tree.need), "{p:?}");
        let size = match p {
            Pred::And(ps) | Pred::Or(ps) => {
                assert_eq!(ps.len(), tree.parts.len());
                let nodes = part_nodes(needs, at + 1, ps.len());
                let parts = ps.iter().zip(&tree.parts).zip(nodes);
                1 + parts.map(|((q, t), n)| check(q, t, needs, n)).sum::<usize>()
            }
            Pred::Not(q) => 1 + check(q, &tree.parts[0], needs, at + 1),
            _ => 1,
        };
        assert_eq!(node.size, size, "{p:?}");
        size
    }

    /// A random predicate: tests loading at constant offsets and at the IPv4 header length,
    /// guards, stores, constants, Trys, under `and`s, `or`s and `not`s of 0 to 4 parts.
    pub(in crate::opt) fn random_pred(rng: &mut weir_testkit::SplitMix64, depth: u32) -> Pred {
        let load = |rng: &mut weir_testkit::SplitMix64| {
            let size = [Size::Byte, Size::Half, Size::Word][rng.below_usize(3)];
            if rng.chance(30) {
                let ihl = Expr::load_at(14, Size::Byte).and_mask(0xf);
                let ihl = Expr::binary(BinOp::Shl, ihl, Expr::Const(2));
                Expr::load(ihl.plus(14 + rng.below(8) as u32), size)
            } else {
                Expr::load_at(rng.below(80) as u32, size)
            }
        };
        if depth == 0 || rng.chance(25) {
            return match rng.below(6) {
                0 => Pred::Const(rng.chance(50)),
                1 => Pred::Guard(rng.below(100) as u32),
                2 => Pred::Store { slot: rng.below(4) as u8, value: load(rng) },
                _ => Pred::eq(load(rng), rng.below(4) as u32),
            };
        }
        let parts = |rng: &mut weir_testkit::SplitMix64| {
            (0..rng.below(5)).map(|_| random_pred(rng, depth - 1)).collect::<Vec<_>>()
        };
        match rng.below(7) {
            0 | 1 => Pred::And(parts(rng)),
            2 | 3 => Pred::Or(parts(rng)),
            4 => Pred::Try(Box::new(random_pred(rng, depth - 1))),
            _ => Pred::Not(Box::new(random_pred(rng, depth - 1))),
        }
    }

    /// The one list holds, node for node, the needs the tree of lists held, and a
    /// junction's parts are found where the tree had them: random predicates, each checked
    /// whole.
    #[test]
    fn one_list_of_needs_holds_what_the_tree_of_lists_held() {
        let mut rng = weir_testkit::SplitMix64::new(0x9a4d);
        let (mut junctions, mut negations, mut deep) = (0, 0, 0);
        for i in 0..20_000 {
            let p = random_pred(&mut rng, 1 + i % 5);
            let needs = Needs::of(&p);
            let size = check(&p, &need_tree(&p), &needs, 0);
            assert_eq!(size, needs.nodes.len(), "{p:?}");
            junctions += needs.nodes.iter().filter(|n| n.size > 1).count();
            negations += usize::from(matches!(p, Pred::Not(_)));
            deep += usize::from(size > 10);
        }
        assert!(
            junctions > 20_000 && negations > 500 && deep > 2_000,
            "{junctions} {negations} {deep}"
        );
    }
}
