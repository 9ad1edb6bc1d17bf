//! Tests as sets: `x == 5`, `x > 10`, `x in {...}` all say "x is in some set of values",
//! so runs of such tests on the same `x` merge into one `Pred::In` (union along an `or`,
//! intersection along an `and`). This is how `host a or host b or ...` with thousands of
//! terms becomes a set lookup, and how `x > 10 and x > 5` becomes `x > 10`.
//!
//! Which tests may be merged (moved next to each other) is decided by the caller
//! ([`super::decide()`]); this file only does the set arithmetic, in time linear in the number
//! of terms (plus one sort), so that long chains stay cheap.

use super::analysis::FastMap;

use super::domain;
use crate::ir::{CmpOp, Expr, Pred, ValueSet};

/// Appends the ranges of values `x` may have for `x op c` to hold; false for `Set`, which
/// is not a range test on `x`.
pub(crate) fn push_cmp_ranges(op: CmpOp, c: u32, out: &mut Vec<(u32, u32)>) -> bool {
    match op {
        CmpOp::Eq => out.push((c, c)),
        CmpOp::Ne => {
            if let Some(h) = c.checked_sub(1) {
                out.push((0, h));
            }
            if let Some(l) = c.checked_add(1) {
                out.push((l, u32::MAX));
            }
        }
        CmpOp::Lt => {
            if let Some(h) = c.checked_sub(1) {
                out.push((0, h));
            }
        }
        CmpOp::Le => out.push((0, c)),
        CmpOp::Gt => {
            if let Some(l) = c.checked_add(1) {
                out.push((l, u32::MAX));
            }
        }
        CmpOp::Ge => out.push((c, u32::MAX)),
        CmpOp::Set => return false,
    }
    true
}

/// The complement of sorted, disjoint, non-adjacent ranges.
pub(crate) fn complement(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    let mut next: Option<u32> = Some(0); // first value not yet covered; None past u32::MAX
    for &(lo, hi) in ranges {
        if let Some(n) = next {
            if lo > n {
                out.push((n, lo - 1));
            }
        }
        next = hi.checked_add(1);
    }
    if let Some(n) = next {
        out.push((n, u32::MAX));
    }
    out
}

/// If `p` is a range test on one expression: that expression.
pub(crate) fn set_key(p: &Pred) -> Option<&Expr> {
    match p {
        Pred::Cmp { op, lhs, rhs: Expr::Const(_) }
            if *op != CmpOp::Set && !matches!(lhs, Expr::Const(_)) =>
        {
            Some(lhs)
        }
        Pred::In { value, .. } if !matches!(value, Expr::Const(_)) => Some(value),
        _ => None,
    }
}

/// Appends the ranges of the set a range test (see [`set_key`]) checks, or of its
/// complement.
fn push_set_ranges(p: &Pred, complemented: bool, out: &mut Vec<(u32, u32)>) {
    match p {
        Pred::Cmp { op, rhs: Expr::Const(c), .. } => {
            let op = if complemented { domain::negate(*op) } else { Some(*op) };
            if let Some(op) = op {
                push_cmp_ranges(op, *c, out);
            }
        }
        Pred::In { set, .. } if complemented => out.extend(complement(set.ranges())),
        Pred::In { set, .. } => out.extend_from_slice(set.ranges()),
        _ => {}
    }
}

/// The simplest predicate for `value in set`: a comparison when the set is one value, all
/// but one value, or a range open at one end; `Pred::In` otherwise. Empty and full sets are
/// kept as `In` (the caller folds them when `value` cannot abort).
pub(crate) fn set_test(value: Expr, set: ValueSet) -> Pred {
    match as_comparison(&set) {
        Some((op, c)) => Pred::cmp(op, value, Expr::Const(c)),
        None => Pred::In { value, set },
    }
}

/// The comparison `value op c` that [`set_test`] writes for `value in set`, if any.
pub(crate) fn as_comparison(set: &ValueSet) -> Option<(CmpOp, u32)> {
    match *set.ranges() {
        [(a, b)] if a == b => Some((CmpOp::Eq, a)),
        [(0, a), (b, u32::MAX)] if a.checked_add(2) == Some(b) => Some((CmpOp::Ne, a + 1)),
        [(a, u32::MAX)] if a > 0 => Some((CmpOp::Ge, a)),
        [(0, b)] if b < u32::MAX => Some((CmpOp::Le, b)),
        _ => None,
    }
}

/// Group numbers of the expressions seen in a run: runs usually test one to three values,
/// which a short list finds faster than hashing; long lists move to a map.
#[derive(Default)]
struct KeyIndex<'a> {
    few: Vec<(&'a Expr, usize)>,
    many: FastMap<&'a Expr, usize>,
}

impl<'a> KeyIndex<'a> {
    const FEW: usize = 8;

    fn clear(&mut self) {
        self.few.clear();
        if !self.many.is_empty() {
            self.many.clear();
        }
    }

    fn get_or_insert(&mut self, key: &'a Expr, new: impl FnOnce() -> usize) -> usize {
        if let Some(&(_, g)) = self.few.iter().find(|(k, _)| *k == key) {
            return g;
        }
        if self.few.len() < Self::FEW {
            let g = new();
            self.few.push((key, g));
            return g;
        }
        *self.many.entry(key).or_insert_with(new)
    }
}

/// Junctions up to this long are first checked pairwise for anything to merge.
const SHORT_JUNCTION: usize = 16;

/// Whether two set tests of one run of `items` test the same expression (then
/// [`merge_runs`] merges them), compared pairwise: most junctions are short and merge
/// nothing, and finding that out with the grouping tables cost four allocations per
/// junction (a share of `decide`'s time, issue 13).
fn short_run_merges(items: &[Pred], run_start: &[bool]) -> bool {
    let mut run = 0;
    for (i, item) in items.iter().enumerate() {
        if run_start.get(i).copied().unwrap_or(true) {
            run = i;
        }
        let Some(key) = set_key(item) else { continue };
        let earlier = items.get(run..i).unwrap_or_default();
        if earlier.iter().any(|p| set_key(p) == Some(key)) {
            return true;
        }
    }
    false
}

/// Merges, inside each run of `items`, the set tests on the same expression.
///
/// `run_start[i]` says item `i` begins a new run. Within a run every item but the first may
/// be reordered freely (the caller checked they cannot abort and have no side effects); the
/// first stays first, and absorbs later tests on its own expression (its evaluation aborts
/// exactly when theirs would, and it runs first anyway). A merged group takes the place of
/// its first member. `conjunction` selects intersection (`and`) rather than union (`or`).
pub(crate) fn merge_runs(items: Vec<Pred>, run_start: &[bool], conjunction: bool) -> Vec<Pred> {
    if items.len() <= SHORT_JUNCTION && !short_run_merges(&items, run_start) {
        return items;
    }
    // group[i] = index of the group item i belongs to (if it is a set test).
    let mut group: Vec<Option<usize>> = vec![None; items.len()];
    let mut members: Vec<usize> = Vec::new(); // per group: member count
    let mut first: Vec<usize> = Vec::new(); // per group: first item
    let mut any_merge = false;
    {
        let mut keys = KeyIndex::default();
        for (i, item) in items.iter().enumerate() {
            if run_start.get(i).copied().unwrap_or(true) {
                keys.clear();
            }
            let Some(key) = set_key(item) else { continue };
            let g = keys.get_or_insert(key, || {
                members.push(0);
                first.push(i);
                members.len() - 1
            });
            if let (Some(slot), Some(m)) = (group.get_mut(i), members.get_mut(g)) {
                *slot = Some(g);
                *m += 1;
                any_merge |= *m > 1;
            }
        }
    }
    if !any_merge {
        return items;
    }
    // Collect each merged group's ranges (for `and`, the complements, so that intersection
    // is one union and one complement however many terms there are).
    let mut ranges: Vec<Vec<(u32, u32)>> = vec![Vec::new(); members.len()];
    for (i, item) in items.iter().enumerate() {
        let Some(g) = group.get(i).copied().flatten() else { continue };
        if members.get(g).copied().unwrap_or(0) < 2 {
            continue;
        }
        if let Some(acc) = ranges.get_mut(g) {
            push_set_ranges(item, conjunction, acc);
        }
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let g = match group.get(i).copied().flatten() {
            Some(g) if members.get(g).copied().unwrap_or(0) >= 2 => g,
            _ => {
                out.push(item);
                continue;
            }
        };
        if first.get(g) != Some(&i) {
            continue;
        }
        let Some(key) = set_key(&item) else { continue };
        let key = key.clone();
        let union =
            ValueSet::from_ranges(std::mem::take(ranges.get_mut(g).unwrap_or(&mut Vec::new())));
        let set =
            if conjunction { ValueSet::from_ranges(complement(union.ranges())) } else { union };
        out.push(set_test(key, set));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Size;

    #[test]
    fn complement_edges() {
        assert_eq!(complement(&[]), vec![(0, u32::MAX)]);
        assert_eq!(complement(&[(0, u32::MAX)]), vec![]);
        assert_eq!(complement(&[(0, 4), (9, 9)]), vec![(5, 8), (10, u32::MAX)]);
        assert_eq!(complement(&[(3, u32::MAX)]), vec![(0, 2)]);
    }

    #[test]
    fn set_tests_read_back_as_comparisons() {
        let x = Expr::load_at(0, Size::Byte);
        for (op, c) in [(CmpOp::Eq, 7), (CmpOp::Ne, 7), (CmpOp::Ge, 7), (CmpOp::Le, 7)] {
            let mut ranges = Vec::new();
            assert!(push_cmp_ranges(op, c, &mut ranges));
            let set = ValueSet::from_ranges(ranges);
            assert_eq!(set_test(x.clone(), set), Pred::cmp(op, x.clone(), Expr::Const(c)));
        }
    }

    #[test]
    fn merge_or_and_and() {
        let x = Expr::load_at(0, Size::Byte);
        let y = Expr::load_at(1, Size::Byte);
        let items = vec![Pred::eq(x.clone(), 1), Pred::eq(y.clone(), 2), Pred::eq(x.clone(), 3)];
        let merged = merge_runs(items.clone(), &[true, false, false], false);
        assert_eq!(
            merged,
            vec![
                Pred::In { value: x.clone(), set: ValueSet::from_values([1, 3]) },
                Pred::eq(y.clone(), 2)
            ]
        );
        // A new run in between: nothing moves across it.
        assert_eq!(merge_runs(items, &[true, false, true], false).len(), 3);
        let gt = |c| Pred::cmp(CmpOp::Gt, x.clone(), Expr::Const(c));
        let merged = merge_runs(vec![gt(10), gt(5)], &[true, false], true);
        assert_eq!(merged, vec![Pred::cmp(CmpOp::Ge, x.clone(), Expr::Const(11))]);
    }
}
