//! Common prefixes: `(A and X1) or (A and X2)` becomes `A and (X1 or X2)`, so that `A`
//! (often a link-level protocol test) runs once, and the `X`s end up next to each other where
//! [`super::decide()`] can merge them into set tests.
//!
//! pflang repeats such prefixes everywhere: `host a or host b` is
//! `(ip and (src a or dst a)) or (arp and ...) or (rarp and ...) or (ip and (src b ...)) ...`.
//! To bring the repeated `ip and ...` parts together, the parts of an `or` whose first test
//! is `L == k` on the same `L` are stably grouped by `k` first. That is exact when no part
//! writes scratch: if a part with `L == k1` is true, then `L` was evaluated without aborting
//! and equals `k1`, so a part with `L == k2` (`k2 != k1`) is false without aborting, and
//! moving two parts past each other changes nothing. (The only outcomes that tell two orders
//! apart are "one part true, the other aborts".) The dual holds for `and` over parts starting
//! with `L != k`.

use super::analysis::FastMap;

use super::analysis::has_store;
use super::fold;
use crate::ir::{CmpOp, Expr, Pred, ValueSet};

/// Factors common prefixes bottom-up (on its own; the optimizer does this while simplifying).
pub(crate) fn factor(p: Pred) -> Pred {
    match p {
        Pred::And(parts) => junction(parts.into_iter().map(factor).collect(), true),
        Pred::Or(parts) => junction(parts.into_iter().map(factor).collect(), false),
        Pred::Not(q) => Pred::Not(Box::new(factor(*q))),
        other => other,
    }
}

/// The first test of a part of an `or` (`conjunction == false`; the part is an `and` or a
/// single test), or of an `and` (the part is an `or`).
fn head(part: &Pred, conjunction: bool) -> &Pred {
    match (part, conjunction) {
        (Pred::And(inner), false) | (Pred::Or(inner), true) => inner.first().unwrap_or(part),
        _ => part,
    }
}

/// `L` and `k` when the part's first test is `L == k` (for `or`) or `L != k` (for `and`).
fn discriminator(part: &Pred, conjunction: bool) -> Option<(&Expr, u32)> {
    let wanted = if conjunction { CmpOp::Ne } else { CmpOp::Eq };
    match head(part, conjunction) {
        Pred::Cmp { op, lhs, rhs: Expr::Const(k) } if *op == wanted => Some((lhs, *k)),
        _ => None,
    }
}

/// The part without its first test (`None`: nothing is left, i.e. the neutral constant).
fn rest(part: Pred, conjunction: bool) -> Vec<Pred> {
    match (part, conjunction) {
        (Pred::And(mut inner), false) | (Pred::Or(mut inner), true) => {
            if inner.is_empty() {
                return inner;
            }
            inner.remove(0);
            inner
        }
        _ => Vec::new(),
    }
}

/// Factors one junction whose parts are already simplified (and factored).
pub(crate) fn junction(parts: Vec<Pred>, conjunction: bool) -> Pred {
    // Two parts cannot be regrouped, only merged (most junctions are this small).
    let mergeable_pair = |a: &Pred, b: &Pred| {
        head(a, conjunction) == head(b, conjunction) && !has_store(a) && !has_store(b)
    };
    match parts.as_slice() {
        [] | [_] => return fold::junction(parts, conjunction),
        [a, b] if !mergeable_pair(a, b) => {
            let parts = if conjunction { parts } else { merge_tails(parts) };
            return fold::junction(parts, conjunction);
        }
        _ => {}
    }
    // pflang's `port 22`: one copy of the port test per transport protocol. Tried before
    // [`keeps`], which declines every `or` it merges (its first two parts are keyed on one
    // value with equal rests): asking it first cost `port 22` ~2,700 instructions a compile
    // for that no (issue 13). Declined, the parts come back as they were.
    let parts = if conjunction {
        parts
    } else {
        match merge_equal_tails(parts) {
            Ok(merged) => return merged,
            Err(parts) => parts,
        }
    };
    // Nothing to regroup or merge (most `and`s of three or more parts, which have no
    // discriminators): the grouping's six lists and `merge_tails`' one are not built
    // (issue 13: about 300 instructions each with the free, several per small filter).
    // [`keeps`] answers for [`junction`] itself, `fold::junction` aside, which it ends
    // with anyway.
    if keeps(&parts, conjunction) {
        return fold::junction(parts, conjunction);
    }
    regroup(parts, conjunction)
}

/// The parts of an `or` (at least three, at most [`KEEPS_PARTS`]) as one part, when each is
/// `L == k_i and X` with one `L`, distinct `k_i` and one store-free `X` (the same rest, part
/// for part): `L in {k_1, ...} and X`, the first part with its first test made the set test.
/// That is what [`regroup`] gives them (and [`keeps`] declines them: the first two are keyed
/// on `L` with equal rests), built without its lists and its second comparison of the first
/// two rests (issue 13: pflang's `port 22` is three copies of one port test, one per
/// transport protocol, twice). Step by step through `regroup`: no part stores (its first test
/// is a comparison, its rest is `X`); every part's discriminator is `(L, k_i)`, one stretch,
/// each `k_i` new, so [`group_by_discriminator`] keeps the order and gives each part its own
/// group; [`merge_adjacent`] then merges no neighbours (different groups); [`merge_tails`]
/// finds the first two merging (keyed on `L`, equal store-free rests), and then each next part
/// merging into the first (still keyed on `L` with rest `X`), one run of all the parts, whose
/// set takes the values `k_1, k_2, ...` in order (as here) and goes into the first part;
/// `fold::junction` of that one part gives it back. Anything else: `parts` back, unchanged.
fn merge_equal_tails(mut parts: Vec<Pred>) -> Result<Pred, Vec<Pred>> {
    let mut keys = [(0u32, 0u32); KEEPS_PARTS];
    let n = parts.len();
    let Some(first) = parts.first().and_then(keyed_eq) else { return Err(parts) };
    if !(3..=KEEPS_PARTS).contains(&n) {
        return Err(parts);
    }
    // The values first (a different `L` or a repeated `k` is found without comparing rests).
    for (i, part) in parts.iter().enumerate() {
        let distinct = match keyed_eq(part) {
            Some((l, k, _)) if i == 0 || l == first.0 => {
                let seen = keys.get(..i).unwrap_or(&[]);
                let fresh = seen.iter().all(|&(s, _)| s != k);
                if let Some(slot) = keys.get_mut(i) {
                    *slot = (k, k);
                }
                fresh
            }
            _ => false,
        };
        if !distinct {
            return Err(parts);
        }
    }
    let same_rests =
        parts.iter().skip(1).all(|p| keyed_eq(p).is_some_and(|(_, _, r)| r == first.2));
    if !same_rests || first.2.iter().any(has_store) {
        return Err(parts);
    }
    parts.truncate(1);
    let set = ValueSet::from_ranges(keys.get(..n).unwrap_or(&[]).iter().copied());
    let Some(Pred::And(mut inner)) = parts.pop() else { return Err(parts) };
    if let Some(head @ Pred::Cmp { .. }) = inner.first_mut() {
        if let Pred::Cmp { lhs, .. } = std::mem::replace(head, Pred::Const(false)) {
            *head = Pred::In { value: lhs, set };
        }
    }
    Ok(Pred::And(inner))
}

/// `L`, `k` and the rest of an `or` part `L == k and ...` (an `and` of two or more parts
/// whose first is an equality with a constant on the right).
fn keyed_eq(part: &Pred) -> Option<(&Expr, u32, &[Pred])> {
    match part {
        Pred::And(inner) if inner.len() >= 2 => match inner.first() {
            Some(Pred::Cmp { op: CmpOp::Eq, lhs, rhs: Expr::Const(k) }) => {
                Some((lhs, *k, inner.get(1..).unwrap_or(&[])))
            }
            _ => None,
        },
        _ => None,
    }
}

/// [`junction`] without its shortcuts: groups, merges neighbours and tails, and folds.
fn regroup(parts: Vec<Pred>, conjunction: bool) -> Pred {
    let stores: Vec<bool> = parts.iter().map(has_store).collect();
    let (parts, stores, groups) = group_by_discriminator(parts, stores, conjunction);
    let parts = merge_adjacent(parts, &stores, &groups, conjunction);
    let parts = if conjunction { parts } else { merge_tails(parts) };
    fold::junction(parts, conjunction)
}

/// Junctions longer than this are not checked by [`keeps`] (it compares parts pairwise).
const KEEPS_PARTS: usize = 16;

/// Whether [`junction`] surely gives `parts` (plain: nothing for `fold::junction` to flatten
/// or drop, at least two) back as they are: no two parts lead with the same discriminator
/// (nothing to regroup, nothing grouped to merge), no two neighbours lead with the same test
/// (nothing for [`merge_adjacent`]), and in an `or` no two neighbours differ only in their
/// first test's values (nothing for [`merge_tails`]). Stores are ignored: they only stop
/// merges, so counting a part that stores makes the answer more cautious, never wrong.
pub(crate) fn keeps(parts: &[Pred], conjunction: bool) -> bool {
    if parts.len() > KEEPS_PARTS {
        return false;
    }
    // (pairwise without a buffer: most junctions have two to four parts)
    let distinct_keys = parts.iter().enumerate().all(|(i, p)| {
        discriminator(p, conjunction)
            .is_none_or(|k| parts.iter().take(i).all(|q| discriminator(q, conjunction) != Some(k)))
    });
    let neighbours_differ = parts.windows(2).all(|w| match w {
        [a, b] => {
            head(a, conjunction) != head(b, conjunction)
                && (conjunction
                    || !matches!((keyed_head(a), keyed_head(b)),
                        (Some((l1, r1)), Some((l2, r2))) if l1 == l2 && r1 == r2))
        }
        _ => true,
    });
    distinct_keys && neighbours_differ
}

/// The value an `or` part's first test asks about and the rest of the part, when the part
/// is an `and` whose first test is `L == k` or `L in S`.
fn keyed_head(part: &Pred) -> Option<(&Expr, &[Pred])> {
    match part {
        Pred::And(inner) if inner.len() >= 2 => match inner.first() {
            Some(Pred::Cmp { op: CmpOp::Eq, lhs, rhs: Expr::Const(_) }) => {
                Some((lhs, inner.get(1..).unwrap_or(&[])))
            }
            Some(Pred::In { value, .. }) => Some((value, inner.get(1..).unwrap_or(&[]))),
            _ => None,
        },
        _ => None,
    }
}

/// Merges neighbours of an `or` that differ only in the values their first test accepts:
/// `(L == a and X) or (L == b and X)` -> `L in {a, b} and X` (pflang's `port 22` is three
/// copies of one port test, one per transport protocol, and each `host` or `port` of a
/// long list repeats them). Exact when `X` writes no scratch: `L` (an expression: no
/// stores) gives the same outcome both times it is evaluated; if it aborts, both forms
/// abort; if `L` is `a`, both are `X`, and when that is false the original's `L == b` is
/// false; if `L` is `b`, the original's first part is false and both are `X`; otherwise
/// both are false. Only neighbours with the same `L` have their tails compared, and each
/// comparison stops at the first difference.
///
/// One pass, in place: a run of neighbours that merge becomes its first part with one set
/// test of all the run's values, built when the run ends. Each neighbour pair is compared
/// once (the part a run grows from stands for the merged part: both are keyed on the same
/// `L` with the same rest), and a run's rest is checked for stores once. The pairwise form
/// (`tests::merge_tails_pairwise`, kept as the oracle) compared each merging pair twice,
/// built a set per merge and a new list when anything merged (issue 13, compile-29).
fn merge_tails(mut parts: Vec<Pred>) -> Vec<Pred> {
    // No neighbours merge (the usual case): the list is given back as it is, after one
    // comparison per pair (about 120 instructions for a two-part `or`).
    let merging = |w: &[Pred]| matches!(w, [prev, part] if tails_merge_checked(prev, part, false));
    let Some(first) = parts.windows(2).position(merging) else {
        return parts;
    };
    // `parts[..kept]` is the output so far (the parts before the first merge stay where they
    // are); `run` holds the values the last of them accepts while neighbours are merging
    // into it (empty: no run).
    let second = first + 1;
    let mut kept = second;
    let mut run: Vec<(u32, u32)> = Vec::new();
    for read in second..parts.len() {
        let merges = read == second
            || match (kept.checked_sub(1).and_then(|i| parts.get(i)), parts.get(read)) {
                (Some(prev), Some(part)) => tails_merge_checked(prev, part, !run.is_empty()),
                _ => false,
            };
        if merges {
            if run.is_empty() {
                if let Some(prev) = kept.checked_sub(1).and_then(|i| parts.get(i)) {
                    extend_first_ranges(prev, &mut run);
                }
            }
            if let Some(part) = parts.get_mut(read) {
                extend_first_ranges(part, &mut run);
                // (dropped: its values join the run's set, its rest is the run's first's)
                *part = Pred::Const(false);
            }
            continue;
        }
        end_run(&mut parts, kept, &mut run);
        if kept != read {
            parts.swap(kept, read);
        }
        kept += 1;
    }
    end_run(&mut parts, kept, &mut run);
    parts.truncate(kept);
    parts
}

/// Gives `parts[kept - 1]`, the part a run of merges grew from, the set test of the run's
/// values (`run`, emptied) as its first test.
fn end_run(parts: &mut [Pred], kept: usize, run: &mut Vec<(u32, u32)>) {
    if run.is_empty() {
        return;
    }
    let set = ValueSet::from_ranges(run.drain(..));
    if let Some(Pred::And(inner)) = kept.checked_sub(1).and_then(|i| parts.get_mut(i)) {
        if let Some(first) = inner.first_mut() {
            let value = match first {
                Pred::Cmp { lhs, .. } => std::mem::replace(lhs, Expr::Const(0)),
                Pred::In { value, .. } => std::mem::replace(value, Expr::Const(0)),
                _ => return,
            };
            *first = Pred::In { value, set };
        }
    }
}

/// Appends the ranges the first test of a keyed part ([`keyed_head`]) accepts to `out`.
fn extend_first_ranges(part: &Pred, out: &mut Vec<(u32, u32)>) {
    if let Pred::And(inner) = part {
        match inner.first() {
            Some(Pred::Cmp { rhs: Expr::Const(k), .. }) => out.push((*k, *k)),
            Some(Pred::In { set, .. }) => out.extend_from_slice(set.ranges()),
            _ => {}
        }
    }
}

/// Whether [`merge_tails`] merges `part` into `prev`, the part before it: both keyed on one
/// value ([`keyed_head`]), with equal rests that write no scratch. `store_free`: `prev`'s
/// rest is already known to write none (it merged with the part before it), so it is not
/// walked again.
fn tails_merge_checked(prev: &Pred, part: &Pred, store_free: bool) -> bool {
    match (keyed_head(prev), keyed_head(part)) {
        (Some((l1, rest1)), Some((l2, rest2))) => {
            l1 == l2 && rest1 == rest2 && (store_free || !rest1.iter().any(has_store))
        }
        _ => false,
    }
}

/// The order in which discriminator values first appeared in a stretch (usually a handful:
/// ethertypes, protocol numbers), with a map for long stretches of distinct values.
#[derive(Default)]
struct SmallKeys {
    few: Vec<u32>,
    many: FastMap<u32, usize>,
}

impl SmallKeys {
    const FEW: usize = 16;

    fn len(&self) -> usize {
        self.few.len() + self.many.len()
    }

    fn clear(&mut self) {
        self.few.clear();
        if !self.many.is_empty() {
            self.many.clear();
        }
    }

    /// The rank of `k` (new keys get the next one).
    fn rank(&mut self, k: u32) -> usize {
        if let Some(r) = self.few.iter().position(|&x| x == k) {
            return r;
        }
        let n = self.len();
        if self.few.len() < Self::FEW {
            self.few.push(k);
            return n;
        }
        *self.many.entry(k).or_insert(n)
    }
}

/// A part's discriminator group: its stretch and the rank of its `k` in the stretch. Two
/// parts of one group have the same first test (`L == k`, the same `L` and `k`); parts of
/// different groups side by side do not (a new stretch without a part in between means a
/// new `L`).
type Group = Option<(usize, usize)>;

/// Stably groups, within each stretch of store-free parts discriminating on the same `L`,
/// the parts by their `k`. `stores[i]` says part `i` writes scratch; the flags come back in
/// the new order, with each part's [`Group`] (which spares [`merge_adjacent`] comparing
/// first tests: on long `or`s, each comparison is a walk through memory).
fn group_by_discriminator(
    parts: Vec<Pred>,
    stores: Vec<bool>,
    conjunction: bool,
) -> (Vec<Pred>, Vec<bool>, Vec<Group>) {
    // Stretch boundaries and, per part, its key's group number within the stretch.
    let mut stretch_of: Vec<usize> = Vec::with_capacity(parts.len());
    let mut rank: Vec<usize> = Vec::with_capacity(parts.len());
    let mut discriminated: Vec<bool> = Vec::with_capacity(parts.len());
    let mut reorder = false;
    {
        let mut stretch = 0usize;
        let mut current: Option<&Expr> = None;
        let mut keys = SmallKeys::default();
        let mut last_key: Option<u32> = None;
        for (part, &store) in parts.iter().zip(&stores) {
            match discriminator(part, conjunction).filter(|_| !store) {
                Some((l, k)) => {
                    if current != Some(l) {
                        stretch += 1;
                        current = Some(l);
                        keys.clear();
                        last_key = None;
                    }
                    let n = keys.len();
                    let r = keys.rank(k);
                    // A key seen before but not just now: parts must move.
                    reorder |= r != n && last_key != Some(k);
                    last_key = Some(k);
                    rank.push(r);
                    discriminated.push(true);
                }
                None => {
                    stretch += 1;
                    current = None;
                    keys.clear();
                    last_key = None;
                    rank.push(0);
                    discriminated.push(false);
                }
            }
            stretch_of.push(stretch);
        }
    }
    let group_of = |i: usize| match (discriminated.get(i), stretch_of.get(i), rank.get(i)) {
        (Some(true), Some(&s), Some(&r)) => Some((s, r)),
        _ => None,
    };
    if !reorder {
        let groups = (0..parts.len()).map(group_of).collect();
        return (parts, stores, groups);
    }
    let mut order: Vec<usize> = (0..parts.len()).collect();
    // Stable: equal (stretch, rank) keep their order.
    order.sort_by_key(|&i| (stretch_of.get(i).copied(), rank.get(i).copied()));
    let stores = order.iter().map(|&i| stores.get(i).copied().unwrap_or(true)).collect();
    let groups = order.iter().map(|&i| group_of(i)).collect();
    let mut slots: Vec<Option<Pred>> = parts.into_iter().map(Some).collect();
    let parts = order.into_iter().filter_map(|i| slots.get_mut(i).and_then(Option::take)).collect();
    (parts, stores, groups)
}

/// Merges neighbours with the same first test: `(A and X1) or (A and X2)` ->
/// `A and (X1 or X2)`. Exact when neither writes scratch: `A` is evaluated again after
/// `A and X1` was false with the same scratch memory, so it gives the same outcome.
fn merge_adjacent(
    parts: Vec<Pred>,
    stores: &[bool],
    groups: &[Group],
    conjunction: bool,
) -> Vec<Pred> {
    let mut out: Vec<Pred> = Vec::with_capacity(parts.len());
    let mut group: Vec<Pred> = Vec::new();
    for (i, part) in parts.into_iter().enumerate() {
        let free = |j: usize| !stores.get(j).copied().unwrap_or(true);
        let same = group.last().is_some_and(|prev| {
            let same_head = match (groups.get(i.wrapping_sub(1)), groups.get(i)) {
                (Some(Some(a)), Some(Some(b))) => a == b,
                _ => head(prev, conjunction) == head(&part, conjunction),
            };
            free(i) && i > 0 && free(i - 1) && same_head
        });
        if !same {
            flush(&mut group, &mut out, conjunction);
        }
        group.push(part);
    }
    flush(&mut group, &mut out, conjunction);
    out
}

fn flush(group: &mut Vec<Pred>, out: &mut Vec<Pred>, conjunction: bool) {
    if group.len() < 2 {
        out.append(group);
        return;
    }
    // Each part is replaced by its rest in the group's own list (taken anyway), not a new one.
    let mut rests = std::mem::take(group);
    let Some((first, others)) = rests.split_first_mut() else { return };
    let (mut node, first_rest) =
        split_head(std::mem::replace(first, Pred::Const(false)), conjunction);
    *first = first_rest;
    for p in others {
        let part = std::mem::replace(p, Pred::Const(false));
        *p = fold::finish(rest(part, conjunction), !conjunction);
    }
    // The rests may share prefixes of their own (each rest is smaller than its part, and
    // empty rests fold to constants first, so this recursion ends).
    let inner = match fold::junction(rests, conjunction) {
        Pred::And(parts) if conjunction => junction(parts, conjunction),
        Pred::Or(parts) if !conjunction => junction(parts, conjunction),
        other => other,
    };
    node.push(inner);
    out.push(fold::junction(node, !conjunction));
}

/// A part of a group [`flush`] merges, split into a list holding its first test ([`head`])
/// and its [`rest`] finished. The head is moved, not cloned, and the list is the part's own
/// (the merged node's list, with room for the merged rests after the head). On `host
/// 10.0.0.1 and udp` (three groups) that is six allocations fewer per optimize, a clone of
/// a load's box and a new list per group (issue 13, bench record compile-19).
fn split_head(part: Pred, conjunction: bool) -> (Vec<Pred>, Pred) {
    match (part, conjunction) {
        (Pred::And(mut inner), false) | (Pred::Or(mut inner), true) if !inner.is_empty() => {
            // Two tests (the usual `L == k and X`): the rest is the second, no list needed.
            let second = if inner.len() == 2 { inner.pop() } else { None };
            let rest = second.unwrap_or_else(|| fold::finish(inner.split_off(1), !conjunction));
            (inner, rest)
        }
        (part, _) => (vec![part], Pred::Const(!conjunction)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinOp, Size};

    /// The ranges the first test of a keyed part ([`keyed_head`]) accepts.
    fn first_ranges(part: &Pred) -> Vec<(u32, u32)> {
        match part {
            Pred::And(inner) => match inner.first() {
                Some(Pred::Cmp { rhs: Expr::Const(k), .. }) => vec![(*k, *k)],
                Some(Pred::In { set, .. }) => set.ranges().to_vec(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Whether [`merge_tails_pairwise`] merges `part` into `prev`, the part before it (as
    /// merged so far).
    fn tails_merge(prev: &Pred, part: &Pred) -> bool {
        tails_merge_checked(prev, part, false)
    }

    /// The oracle for [`merge_tails`]: the pairwise form it replaced (issue 13, compile-29),
    /// kept as it was (why merging is exact: [`merge_tails`]).
    fn merge_tails_pairwise(parts: Vec<Pred>) -> Vec<Pred> {
        // No neighbours merge (the usual case): the list is given back, not copied (a new list
        // and the free of the old one, about 300 instructions, per `or` factored, issue 13).
        if !parts.windows(2).any(|w| matches!(w, [prev, part] if tails_merge(prev, part))) {
            return parts;
        }
        merge_all_tails(parts)
    }

    /// [`merge_tails_pairwise`] without its shortcut: the parts are taken into a new list one
    /// by one.
    fn merge_all_tails(parts: Vec<Pred>) -> Vec<Pred> {
        let mut out: Vec<Pred> = Vec::with_capacity(parts.len());
        for part in parts {
            let merged_head = match (out.last(), keyed_head(&part)) {
                (Some(prev), Some((l2, _))) if tails_merge(prev, &part) => {
                    let mut ranges = first_ranges(prev);
                    ranges.extend(first_ranges(&part));
                    Some(Pred::In { value: l2.clone(), set: ValueSet::from_ranges(ranges) })
                }
                _ => None,
            };
            match (merged_head, out.last_mut()) {
                (Some(head), Some(Pred::And(prev))) => {
                    if let Some(first) = prev.first_mut() {
                        *first = head;
                    }
                }
                _ => out.push(part),
            }
        }
        out
    }

    #[test]
    fn groups_and_merges() {
        let l = Expr::load_at(12, Size::Half);
        let x = |k| Pred::eq(Expr::load_at(30, Size::Word), k);
        let part = |t, k| Pred::and([Pred::eq(l.clone(), t), x(k)]);
        let p = Pred::or([part(0x800, 1), part(0x806, 2), part(0x800, 3), part(0x806, 4)]);
        let f = factor(p);
        let expect = Pred::or([
            Pred::and([Pred::eq(l.clone(), 0x800), Pred::or([x(1), x(3)])]),
            Pred::and([Pred::eq(l.clone(), 0x806), Pred::or([x(2), x(4)])]),
        ]);
        assert_eq!(f, expect);
    }

    #[test]
    fn equal_tails_share_one_set_test() {
        let proto = Expr::load_at(23, Size::Byte);
        let port = || Pred::eq(Expr::load_at(36, Size::Half), 22);
        let part = |k| Pred::and([Pred::eq(proto.clone(), k), port()]);
        let f = factor(Pred::or([part(6), part(17), part(132)]));
        let set = Pred::In { value: proto.clone(), set: ValueSet::from_values([6, 17, 132]) };
        assert_eq!(f, Pred::and([set, port()]));
        // A different tail, or a different value tested, keeps the parts apart.
        let other = Pred::and([Pred::eq(proto.clone(), 17), Pred::eq(Expr::WireLen, 1)]);
        let p = Pred::or([part(6), other]);
        assert_eq!(factor(p.clone()), p);
        let p = Pred::or([part(6), Pred::and([Pred::eq(Expr::WireLen, 17), port()])]);
        assert_eq!(factor(p.clone()), p);
        // A tail that stores is evaluated once per part: not merged.
        let store = || Pred::Store { slot: 0, value: Expr::Const(1) };
        let p = Pred::or([
            Pred::and([Pred::eq(proto.clone(), 6), store()]),
            Pred::and([Pred::eq(proto.clone(), 17), store()]),
        ]);
        assert_eq!(factor(p.clone()), p);
    }

    #[test]
    fn split_head_gives_the_head_and_the_finished_rest() {
        let l = Expr::load_at(12, Size::Half);
        let t = |k| Pred::eq(Expr::load_at(30, Size::Word), k);
        for conjunction in [false, true] {
            let wrap = |v: Vec<Pred>| if conjunction { Pred::Or(v) } else { Pred::And(v) };
            let parts = [
                wrap(vec![Pred::eq(l.clone(), 1), t(2)]),
                wrap(vec![Pred::eq(l.clone(), 1), t(2), t(3)]),
                wrap(vec![Pred::eq(l.clone(), 1)]),
                wrap(Vec::new()),
                Pred::eq(l.clone(), 1),
            ];
            for part in parts {
                // What flush took before: a clone of the head, the rest finished.
                let want_head = head(&part, conjunction).clone();
                let want_rest = fold::finish(rest(part.clone(), conjunction), !conjunction);
                let (node, got_rest) = split_head(part, conjunction);
                assert_eq!(node, vec![want_head], "conjunction {conjunction}");
                assert_eq!(got_rest, want_rest, "conjunction {conjunction}");
            }
        }
    }

    /// The shortcuts ([`keeps`] in [`junction`]; [`merge_tails`], and its pairwise oracle
    /// giving its list back when no neighbours merge) give what the whole regrouping gives,
    /// on every junction of two to four parts drawn from tests that share heads,
    /// discriminators, keyed tails and stores in every mix, as `and` and as `or`.
    #[test]
    fn shortcuts_give_what_regrouping_gives() {
        let l = Expr::load_at(12, Size::Half);
        let m = Expr::load_at(23, Size::Byte);
        let x = |k| Pred::eq(Expr::load_at(30, Size::Word), k);
        let ne = |e: &Expr, k| Pred::cmp(CmpOp::Ne, e.clone(), Expr::Const(k));
        let store = Pred::Store { slot: 0, value: Expr::Const(1) };
        let pool = [
            Pred::And(vec![Pred::eq(l.clone(), 0x800), x(1)]),
            Pred::And(vec![Pred::eq(l.clone(), 0x800), x(2)]),
            Pred::And(vec![Pred::eq(l.clone(), 0x806), x(1)]),
            Pred::And(vec![Pred::eq(m.clone(), 6), x(1)]),
            Pred::And(vec![Pred::eq(m.clone(), 17), x(1)]),
            Pred::And(vec![Pred::eq(l.clone(), 0x86dd), store.clone()]),
            Pred::Or(vec![ne(&l, 0x800), x(3)]),
            Pred::Or(vec![ne(&l, 0x806), x(3)]),
            ne(&m, 6),
            x(4),
            store,
        ];
        let n = pool.len();
        let (mut kept, mut regrouped, mut tails_kept) = (0, 0, 0);
        for len in 2..=4u32 {
            for code in 0..n.pow(len) {
                let parts: Vec<Pred> =
                    (0..len).filter_map(|j| pool.get(code / n.pow(j) % n).cloned()).collect();
                for conjunction in [false, true] {
                    let shortcut = keeps(&parts, conjunction);
                    kept += usize::from(shortcut);
                    regrouped += usize::from(!shortcut);
                    assert_eq!(
                        junction(parts.clone(), conjunction),
                        regroup(parts.clone(), conjunction),
                        "{parts:?} conjunction {conjunction}"
                    );
                }
                let merges = merge_all_tails(parts.clone());
                tails_kept += usize::from(merges == parts);
                assert_eq!(merge_tails_pairwise(parts.clone()), merges, "{parts:?}");
                assert_eq!(merge_tails(parts.clone()), merges, "{parts:?}");
            }
        }
        // both ways are taken (the comparison is not vacuous)
        assert!(kept > 1000 && regrouped > 1000, "kept {kept}, regrouped {regrouped}");
        assert!(tails_kept > 1000, "{tails_kept}");
    }

    /// [`merge_tails`] (one pass, in place, a set per run) gives what the pairwise form gave,
    /// on 20,000 random `or`s of up to eight parts: keyed on one of two values (mostly one)
    /// by `==` or by a set (ranges that overlap and touch), with rests drawn from a few
    /// (equal rests are common, some store, some are empty), and parts not keyed at all.
    #[test]
    fn merging_in_one_pass_gives_what_merging_pairwise_gives() {
        let mut rng = weir_testkit::SplitMix64::new(0x29);
        // (drawn unevenly, so that neighbours often share a value and a rest)
        let byte = Expr::load_at(23, Size::Byte);
        let values = [byte.clone(), byte.clone(), byte, Expr::load_at(20, Size::Half)];
        let port = vec![Pred::eq(Expr::load_at(36, Size::Half), 22)];
        let rests = [
            port.clone(),
            port.clone(),
            port,
            vec![Pred::or([
                Pred::eq(Expr::load_at(34, Size::Half), 22),
                Pred::eq(Expr::load_at(36, Size::Half), 22),
            ])],
            vec![Pred::eq(Expr::load_at(36, Size::Half), 22), Pred::eq(Expr::WireLen, 60)],
            vec![Pred::Store { slot: 1, value: Expr::Const(1) }],
            vec![Pred::eq(Expr::Scratch(1), 1), Pred::Store { slot: 2, value: Expr::WireLen }],
            Vec::new(),
        ];
        let (mut changed, mut long_runs) = (0, 0);
        for _ in 0..20_000 {
            let len = rng.below(9) as usize;
            let mut parts = Vec::with_capacity(len);
            for _ in 0..len {
                let pick =
                    |rng: &mut weir_testkit::SplitMix64, n: usize| rng.below(n as u64) as usize;
                let value =
                    values.get(pick(&mut rng, values.len())).cloned().unwrap_or(Expr::WireLen);
                let k = rng.below(8) as u32;
                let head = match pick(&mut rng, 8) {
                    0..=3 => Pred::eq(value, k),
                    4 | 5 => Pred::In {
                        value,
                        set: ValueSet::from_ranges([(k, k + rng.below(3) as u32), (k + 5, k + 6)]),
                    },
                    6 => Pred::cmp(CmpOp::Ne, value, Expr::Const(k)),
                    _ => Pred::eq(Expr::WireLen, k),
                };
                let rest = rests.get(pick(&mut rng, rests.len())).cloned().unwrap_or_default();
                let part = match pick(&mut rng, 10) {
                    0 => head,
                    _ => {
                        let mut inner = vec![head];
                        inner.extend(rest);
                        Pred::And(inner)
                    }
                };
                parts.push(part);
            }
            let want = merge_tails_pairwise(parts.clone());
            changed += usize::from(want != parts);
            long_runs += usize::from(want.len() + 2 <= parts.len());
            assert_eq!(merge_tails(parts.clone()), want, "{parts:?}");
        }
        // (merges, and runs of three or more or several runs, are frequent)
        assert!(changed > 2000 && long_runs > 200, "changed {changed}, long runs {long_runs}");
    }

    /// [`merge_equal_tails`] gives what [`regroup`] gives (and [`junction`] with it, and
    /// [`keeps`] declines what it merges), on 30,000
    /// random `or`s shaped like pflang's `port 22` and near it: three to eight parts (and two,
    /// and more than [`KEEPS_PARTS`]), mostly `L == k and X` on one `L` with one `X`, with
    /// repeated values, another `L`, a set test or an inequality first, a rest that differs
    /// or stores, parts that are a lone test. Counts both ways (the comparison is not vacuous).
    #[test]
    fn merging_equal_tails_gives_what_regrouping_gives() {
        let mut rng = weir_testkit::SplitMix64::new(0x38);
        let l = Expr::load_at(23, Size::Byte);
        let other = Expr::load_at(20, Size::Byte);
        let hl = Expr::binary(
            BinOp::Shl,
            Expr::binary(BinOp::And, Expr::load_at(14, Size::Byte), Expr::Const(15)),
            Expr::Const(2),
        );
        let port = |k: u32| {
            Pred::eq(
                Expr::load(Expr::binary(BinOp::Add, hl.clone(), Expr::Const(k)), Size::Half),
                22,
            )
        };
        let x = vec![
            Pred::Not(Box::new(Pred::cmp(
                CmpOp::Set,
                Expr::load_at(20, Size::Half),
                Expr::Const(0x1fff),
            ))),
            Pred::or([port(14), port(16)]),
        ];
        let rests = [
            x.clone(),
            x.clone(),
            x.clone(),
            vec![Pred::or([port(14), port(18)])],
            vec![x[1].clone(), x[0].clone()],
            vec![Pred::Store { slot: 1, value: Expr::Const(1) }],
            vec![Pred::eq(Expr::Scratch(1), 1), Pred::Store { slot: 2, value: Expr::WireLen }],
        ];
        let (mut merged, mut declined) = (0, 0);
        for case in 0..30_000u32 {
            let len = match rng.below(10) {
                0 => 2,
                1 => KEEPS_PARTS + 1 + rng.below(3) as usize,
                _ => 3 + rng.below(6) as usize,
            };
            // Most cases keep to the shape; a few parts of the others leave it.
            let near = rng.below(3) == 0;
            let rest = rests
                .get(rng.below(if near { rests.len() as u64 } else { 3 }) as usize)
                .cloned()
                .unwrap_or_default();
            let mut parts = Vec::with_capacity(len);
            for i in 0..len {
                let k = if near { rng.below(8) as u32 } else { i as u32 * 5 + rng.below(5) as u32 };
                let odd = near && rng.below(4) == 0;
                let head = match (odd, rng.below(6)) {
                    (false, _) => Pred::eq(l.clone(), k),
                    (true, 0) => Pred::eq(other.clone(), k),
                    (true, 1) => {
                        Pred::In { value: l.clone(), set: ValueSet::from_values([k, k + 9]) }
                    }
                    (true, 2) => Pred::cmp(CmpOp::Ne, l.clone(), Expr::Const(k)),
                    (true, 3) => Pred::cmp(CmpOp::Eq, l.clone(), Expr::WireLen),
                    (true, _) => Pred::eq(l.clone(), k),
                };
                let own_rest = if odd && rng.below(2) == 0 {
                    rests.get(rng.below(rests.len() as u64) as usize).cloned().unwrap_or_default()
                } else {
                    rest.clone()
                };
                let part = if odd && rng.below(5) == 0 {
                    head
                } else {
                    let mut inner = vec![head];
                    inner.extend(own_rest);
                    Pred::And(inner)
                };
                parts.push(part);
            }
            let want = regroup(parts.clone(), false);
            match merge_equal_tails(parts.clone()) {
                Ok(got) => {
                    merged += 1;
                    assert_eq!(got, want, "case {case}: {parts:?}");
                    // (`junction` tries the merge before `keeps`, on this ground)
                    assert!(!keeps(&parts, false), "case {case}: merged, but keeps: {parts:?}");
                }
                Err(back) => {
                    declined += 1;
                    assert_eq!(back, parts, "case {case}: declined, changed");
                }
            }
            assert_eq!(junction(parts.clone(), false), want, "case {case}: {parts:?}");
        }
        println!("merged {merged}, declined {declined}");
        assert!(merged > 5_000 && declined > 5_000, "merged {merged}, declined {declined}");
    }

    #[test]
    fn stores_block_factoring() {
        let l = Expr::load_at(12, Size::Half);
        let store = Pred::Store { slot: 0, value: Expr::Const(1) };
        let p = Pred::or([
            Pred::and([Pred::eq(l.clone(), 1), store]),
            Pred::and([Pred::eq(l.clone(), 1), Pred::eq(Expr::Scratch(0), 1)]),
        ]);
        assert_eq!(factor(p.clone()), p);
    }
}
