//! Disjuncts of a top-level `and` that another part of it rules out, dropped before the
//! other passes run (issue 13).
//!
//! pflang lowers `host 10.0.0.1 and udp` as libpcap's gencode does: the host test is an
//! `or` over IPv4, ARP and RARP, each guarded by its link-layer type test, and `udp` holds
//! only for IPv4 and IPv6. An ARP or RARP disjunct can never be part of an accept, yet
//! `decide` (which carries facts forward, from earlier tests to later ones) keeps it: the
//! link type is only pinned down by the `udp` that comes after it. Factoring, the `decide`
//! walk, guard placement and the unchanged-checks then spend about half of the optimizer's
//! time on those disjuncts, and the emitters drop them again (their jump threading finds
//! that both exits end in a reject). Dropping them first gives those passes the tree they
//! would have had for `ip host 10.0.0.1 and udp`.
//!
//! The rule, for `P_1 and ... and P_k` at the top of a filter (where an abort and a false
//! both end in a reject) with no store anywhere in it, and a key `L`, a load at a constant
//! offset: a part's *necessary set* is a set of values `L` holds whenever the part is true
//! (an equality or set test on `L`; the intersection over an `and`'s parts that have one,
//! the union over an `or`'s parts when each has one; none otherwise). A disjunct `d` of a
//! part `P_i = d_1 or ... or d_m` whose FIRST test is an equality or set test `T` on `L`
//! with values `S` is dropped when `S` misses `N`, the intersection of the
//! necessary sets of some of the other parts (here: the `or`s after `P_i`; the parts
//! before it are `decide`'s, which carries their facts forward). Exact, verdict for verdict:
//!
//! - `L` loads and is outside `S`: `d` stops at `T`, false, having done nothing (a test on
//!   a load has no effect): the same as `d` absent.
//! - `L` loads and is in `S`: then `L` is outside `N`, so some other part `P_j` is not true
//!   (its necessary set misses `L`; the sets hold whatever the scratch slots hold), and no
//!   accept is possible with or without `d`: both reject (false and abort alike).
//! - `L` does not load (a short packet): `T` aborts, a reject; without `d`, an accept would
//!   need every part true, among them those `N` was taken from (there is one: no set is
//!   no `N`), and a part with a necessary set is true only with `L` loaded: a reject too.
//!
//! With no store in the tree, nothing but the verdict is observable (pfmatch reads the
//! slots a clause stored; such trees are left alone). Dropping only removes disjuncts, so
//! each part's necessary set computed before any drop still holds after: the drops are
//! made one after another, each with the sets of the tree as it is then.

use super::analysis::has_store;
use crate::ir::{CmpOp, Expr, Pred, Size, ValueSet};

/// Ranges a necessary set holds at most (link-layer type tests need a few); a larger one
/// counts as no set at all.
const RANGES_CAP: usize = 4;

/// A set of values as inclusive ranges (not merged; they may overlap), at most
/// [`RANGES_CAP`] of them.
#[derive(Clone, Copy)]
struct Values {
    ranges: [(u32, u32); RANGES_CAP],
    len: usize,
}

impl Values {
    const EMPTY: Values = Values { ranges: [(0, 0); RANGES_CAP], len: 0 };

    fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges[..self.len]
    }

    fn push(&mut self, range: (u32, u32)) -> Option<()> {
        *self.ranges.get_mut(self.len)? = range;
        self.len += 1;
        Some(())
    }

    fn of_set(set: &ValueSet) -> Option<Values> {
        let mut v = Values::EMPTY;
        for &range in set.ranges() {
            v.push(range)?;
        }
        Some(v)
    }

    fn union(mut self, other: &Values) -> Option<Values> {
        for &range in other.ranges() {
            self.push(range)?;
        }
        Some(self)
    }

    /// The values in both; `None` when that takes more than [`RANGES_CAP`] ranges.
    fn intersection(&self, other: &Values) -> Option<Values> {
        let mut v = Values::EMPTY;
        for &(a, b) in self.ranges() {
            for &(c, d) in other.ranges() {
                let (lo, hi) = (a.max(c), b.min(d));
                if lo <= hi {
                    v.push((lo, hi))?;
                }
            }
        }
        Some(v)
    }

    fn meets(&self, other: &Values) -> bool {
        self.ranges()
            .iter()
            .any(|&(a, b)| other.ranges().iter().any(|&(c, d)| a.max(c) <= b.min(d)))
    }
}

/// `p` with the disjuncts its other parts rule out dropped (see the module's doc), when `p`
/// is the top of a filter.
pub(crate) fn drop_ruled_out(p: Pred) -> Pred {
    let Pred::And(mut parts) = p else { return p };
    // Only the parts from the first `or` on take part: a part's set serves the parts
    // before it.
    let Some(first_or) = parts.iter().position(|q| matches!(q, Pred::Or(_))) else {
        return Pred::And(parts);
    };
    let Some(key) = first_key(&parts[0]) else { return Pred::And(parts) };
    // Asked first, without changing anything, so that a filter with nothing to drop
    // (most) is not walked for stores.
    if !rule_out(&mut parts[first_or..], key, false) || parts.iter().any(has_store) {
        return Pred::And(parts);
    }
    rule_out(&mut parts[first_or..], key, true);
    Pred::And(parts)
}

/// Whether some disjunct of an `or` among `parts` is ruled out by the `or`s after it (last
/// part first: `later` is the intersection of their necessary sets); with `drop`, drops
/// every such disjunct. (Parts before an `or` rule out nothing `decide` would not: it
/// carries their facts forward and drops what they decide, so they are not asked.)
fn rule_out(parts: &mut [Pred], key: Key, drop: bool) -> bool {
    let mut found = false;
    let mut later: Option<Values> = None;
    for (i, part) in parts.iter_mut().enumerate().rev() {
        if let (Pred::Or(disjuncts), Some(later)) = (&mut *part, &later) {
            let ruled_out = |d: &Pred| first_test_values(d, key).is_some_and(|s| !s.meets(later));
            if !drop && disjuncts.iter().any(ruled_out) {
                return true;
            }
            if drop {
                let before = disjuncts.len();
                disjuncts.retain(|d| !ruled_out(d));
                found |= disjuncts.len() < before;
            }
        }
        if i == 0 {
            break;
        }
        // Only a later `or` (a protocol's alternatives: `udp`, `tcp`) counts. Every later
        // part would do (the proof holds for any of them), and would also drop `tcp port
        // 22`'s IPv6 alternative before an IPv4-only test such as `tcp[13] & 2 != 0`, a
        // test shorter in two of bench's programs: a change of output, left to decide
        // apart (bench/records/2026-12-01-compile-35.txt).
        if !matches!(part, Pred::Or(_)) {
            continue;
        }
        if let Some(need) = necessary(part, key) {
            // (too many ranges: the later parts' set alone still holds)
            later = Some(match later {
                None => need,
                Some(l) => l.intersection(&need).unwrap_or(l),
            });
        }
    }
    found
}

/// The key: a load at a constant offset (it aborts exactly when the packet is shorter than
/// `offset + size`, whatever the path).
#[derive(Clone, Copy, PartialEq)]
struct Key {
    offset: u32,
    size: Size,
}

impl Key {
    fn of(e: &Expr) -> Option<Key> {
        match e {
            Expr::Load { offset, size } => match **offset {
                Expr::Const(offset) => Some(Key { offset, size: *size }),
                _ => None,
            },
            _ => None,
        }
    }

    fn is(self, e: &Expr) -> bool {
        Key::of(e) == Some(self)
    }
}

/// The load the first test of `p` (first parts first) compares, when it is a load at a
/// constant offset in an equality or set test.
fn first_key(p: &Pred) -> Option<Key> {
    match p {
        Pred::And(ps) | Pred::Or(ps) => first_key(ps.first()?),
        Pred::Cmp { op: CmpOp::Eq, lhs, rhs } => match (lhs, rhs) {
            (e, Expr::Const(_)) | (Expr::Const(_), e) => Key::of(e),
            _ => None,
        },
        Pred::In { value, .. } => Key::of(value),
        _ => None,
    }
}

/// The values `key` holds when the test `p` is true, when `p` is an equality or set test
/// of `key` against constants.
fn test_values(p: &Pred, key: Key) -> Option<Values> {
    match p {
        Pred::Cmp { op: CmpOp::Eq, lhs, rhs } => match (lhs, rhs) {
            (e, Expr::Const(v)) | (Expr::Const(v), e) if key.is(e) => {
                let mut one = Values::EMPTY;
                one.push((*v, *v))?;
                Some(one)
            }
            _ => None,
        },
        Pred::In { value, set } if key.is(value) => Values::of_set(set),
        _ => None,
    }
}

/// The values of the first test `d` makes, when it is an equality or set test on `key`.
fn first_test_values(d: &Pred, key: Key) -> Option<Values> {
    match d {
        Pred::And(ps) => test_values(ps.first()?, key),
        _ => test_values(d, key),
    }
}

/// A set of values `key` holds whenever `p` ends true, if one is known.
fn necessary(p: &Pred, key: Key) -> Option<Values> {
    match p {
        Pred::Const(false) => Some(Values::EMPTY),
        Pred::Cmp { .. } | Pred::In { .. } => test_values(p, key),
        Pred::And(ps) => {
            let mut need: Option<Values> = None;
            for q in ps {
                if let Some(n) = necessary(q, key) {
                    need = Some(match need {
                        None => n,
                        // (too many ranges: the part's own set still holds)
                        Some(m) => m.intersection(&n).unwrap_or(m),
                    });
                }
            }
            need
        }
        Pred::Or(ps) => {
            let mut need = Values::EMPTY;
            for q in ps {
                need = need.union(&necessary(q, key)?)?;
            }
            Some(need)
        }
        _ => None,
    }
}
