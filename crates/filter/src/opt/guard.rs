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
            let lo = u64::from(domain::of_expr(offset).lo);
            expr_need(offset).max(lo + u64::from(size.bytes()))
        }
        Expr::Binary { lhs, rhs, .. } => expr_need(lhs).max(expr_need(rhs)),
        Expr::Neg(x) => expr_need(x),
    }
}

/// The [`Need`] of a predicate and of each of its parts, computed once bottom-up: placing
/// guards asks for the needs of every junction's parts at every level, which recomputed
/// there would cost the size of the filter times its depth.
struct NeedTree {
    need: Need,
    parts: Vec<NeedTree>,
}

impl NeedTree {
    fn of(p: &Pred) -> NeedTree {
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
            // Ends true or false on any packet, however short (an abort inside is its
            // false): it needs nothing, so no guard is hoisted on its account, and what it
            // loads is not taken as known after it.
            // A pair list may answer having loaded only its first test's first guard's
            // field: taken as needing nothing, as a Try.
            Pred::Try(_) | Pred::Pairs(_) => leaf(Need { on_true: 0, on_false: 0 }),
            // The walk's first value and offset are loaded whatever it answers; what it
            // loads after them depends on the packet.
            Pred::Chain(c) => {
                let n = expr_need(&c.next).max(expr_need(&c.offset));
                leaf(Need { on_true: n, on_false: n })
            }
            Pred::Not(q) => {
                let inner = NeedTree::of(q);
                let n = inner.need;
                NeedTree {
                    need: Need { on_true: n.on_false, on_false: n.on_true },
                    parts: vec![inner],
                }
            }
            Pred::And(ps) | Pred::Or(ps) => {
                let parts: Vec<NeedTree> = ps.iter().map(NeedTree::of).collect();
                let need = junction_need(parts.iter().map(|t| t.need), matches!(p, Pred::And(_)));
                NeedTree { need, parts }
            }
        }
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
    let needs = NeedTree::of(&p);
    let p = place(p, needs, Mode::FalseIsAbort, 0, &mut added);
    (p, added)
}

/// The guard to insert before `parts`, which need `n` bytes where `known` are known.
/// Needs beyond 2^32 - 1 clamp: no packet is that long, so the guard rejects all the same.
fn guard_for(parts: &[Pred], n: u64, known: u64) -> Option<u32> {
    let n = n.min(u64::from(u32::MAX));
    (n > known && pays_off(parts, known, n)).then(|| u32::try_from(n).ok()).flatten()
}

/// `p` with guards where they pay off, given that `known` bytes are already known to be
/// captured where `p` starts.
fn place(p: Pred, needs: NeedTree, mode: Mode, known: u64, added: &mut bool) -> Pred {
    match p {
        Pred::And(parts) => place_and(parts, needs.parts, mode, known, added),
        Pred::Or(parts) => {
            let whole = needs.need.for_mode(mode);
            let guard = guard_for(&parts, whole, known);
            let known = guard.map_or(known, u64::from);
            let or = place_or(parts, needs.parts, mode, known, added);
            match guard {
                Some(n) => {
                    *added = true;
                    Pred::And(vec![Pred::Guard(n), or])
                }
                None => or,
            }
        }
        Pred::Not(q) => {
            let inner = needs.parts.into_iter().next().unwrap_or_else(|| NeedTree::of(&q));
            Pred::Not(Box::new(place(*q, inner, mode.negated(), known, added)))
        }
        other => other,
    }
}

/// The needs of `parts`, one per part (recomputed if the tree does not fit, which it
/// always does: it was built from the same predicate).
fn part_needs(parts: &[Pred], needs: Vec<NeedTree>) -> Vec<NeedTree> {
    if needs.len() == parts.len() {
        needs
    } else {
        parts.iter().map(NeedTree::of).collect()
    }
}

fn place_or(
    parts: Vec<Pred>,
    needs: Vec<NeedTree>,
    mode: Mode,
    mut known: u64,
    added: &mut bool,
) -> Pred {
    let needs = part_needs(&parts, needs);
    let last = parts.len().saturating_sub(1);
    // Each part replaced where it stands: the `or` keeps its list (a new one cost an
    // allocation and a free per junction, issue 13).
    let mut parts = parts;
    for (i, (slot, tree)) in parts.iter_mut().zip(needs).enumerate() {
        let part_mode = if i == last { mode } else { mode.inner(false) };
        let n = tree.need;
        let part = std::mem::replace(slot, Pred::Const(true));
        *slot = place(part, tree, part_mode, known, added);
        // Later parts run only after this one was false.
        known = known.max(n.on_false.min(NEVER - 1));
    }
    Pred::Or(parts)
}

fn place_and(
    parts: Vec<Pred>,
    needs: Vec<NeedTree>,
    mode: Mode,
    mut known: u64,
    added: &mut bool,
) -> Pred {
    let trees = part_needs(&parts, needs);
    // What each suffix `parts[i..]` needs.
    let count = parts.len();
    let mut suffix_need = vec![Need { on_true: 0, on_false: NEVER }; count + 1];
    for i in (0..count).rev() {
        let (Some(n), Some(&after)) = (trees.get(i).map(|t| t.need), suffix_need.get(i + 1)) else {
            continue;
        };
        let combined = Need {
            on_true: n.on_true.max(after.on_true),
            on_false: n.on_false.min(n.on_true.max(after.on_false)),
        };
        if let Some(s) = suffix_need.get_mut(i) {
            *s = combined;
        }
    }
    let last = count.saturating_sub(1);
    // Each part replaced where it stands, a guard inserted before it: the `and` keeps its
    // list (a new one cost an allocation and a free per junction, issue 13). `at` is where
    // part `i` stands now (after the guards inserted before it); the parts from there on
    // are the ones not placed yet.
    let mut parts = parts;
    let mut trees = trees.into_iter();
    let mut at = 0;
    for i in 0..count {
        // A suffix of an `and` ends the way the whole `and` does: it has the same mode.
        let suffix = suffix_need.get(i).map_or(0, |s| s.for_mode(mode));
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
        let (Some(slot), Some(tree)) = (parts.get_mut(at), trees.next()) else {
            break;
        };
        let part = std::mem::replace(slot, Pred::Const(true));
        let part_mode = if i == last { mode } else { mode.inner(true) };
        let pass = tree.need.on_true;
        *slot = place(part, tree, part_mode, known, added);
        at += 1;
        // Later parts run only after this one was true.
        if pass != NEVER {
            known = known.max(pass);
        }
    }
    Pred::And(parts)
}
