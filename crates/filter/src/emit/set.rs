//! [`crate::Pred::In`] as a balanced binary search over the set's ranges: each test halves
//! the ranges left, so a set of n ranges costs about log2(n) + 2 comparisons on any path,
//! not n. Sets of single values end in chains of up to [`LINEAR_MAX`] equality tests: n
//! values cost n + ceil(n / 16) - 1 instructions (a 500-host set: 531 per search, against
//! libpcap's linear chain of 500) and at most log2(n / 16) + 16 tests on a path (21 for 500;
//! the chain's average is 250). What earlier tests proved (the value's known minimum and
//! maximum, starting from the expression's own bound) drops the tests a leaf would
//! otherwise repeat.

use super::flow::Label;

/// The most single values tested one by one rather than searched. Chains of 4 made a
/// 500-host set's classic program 78 instructions longer than libpcap's linear chain (each
/// pivot test is one instruction more than the chain): 16 makes it shorter (issue 13), at
/// up to 12 more tests on a path.
const LINEAR_MAX: usize = 16;

/// One comparison of the value with a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Test {
    Eq(u32),
    /// value >= k
    Ge(u32),
    /// value > k
    Gt(u32),
}

/// What the search needs from an emitter: labels and a two-way test on the value.
pub(crate) trait Searcher {
    fn new_label(&mut self) -> Label;
    fn bind_label(&mut self, label: Label);
    fn goto_label(&mut self, label: Label);
    fn test(&mut self, test: Test, t: Label, f: Label);
}

/// Emits the search for a value known to lie in `min..=max`: to `t` when it lies in one of
/// `ranges` (sorted, disjoint), to `f` otherwise.
pub(crate) fn search(
    s: &mut impl Searcher,
    ranges: &[(u32, u32)],
    min: u32,
    max: u32,
    t: Label,
    f: Label,
) {
    // The ranges that meet min..=max, cut to it (no copy when all lie inside it already).
    let cut: Vec<(u32, u32)>;
    let clipped = if ranges.iter().all(|&(lo, hi)| lo >= min && hi <= max) {
        ranges
    } else {
        cut = ranges
            .iter()
            .filter(|&&(lo, hi)| hi >= min && lo <= max)
            .map(|&(lo, hi)| (lo.max(min), hi.min(max)))
            .collect();
        &cut
    };
    // A set that is everything but a few values (what `not` of a small set becomes: `not
    // port 22` holds for every transport protocol but SCTP, TCP and UDP) is searched as its
    // complement with the exits swapped: a chain of equality tests rather than a search
    // over the ranges between the values. (A set that is such a chain itself is not.)
    if !clipped.is_empty() && !chain(clipped) {
        let complement = gaps(clipped, min, max);
        if chain(&complement) {
            return node(s, &complement, min, max, f, t);
        }
    }
    node(s, clipped, min, max, t, f);
}

/// Whether [`node`] tests `ranges` one value at a time: at most [`LINEAR_MAX`] single values.
fn chain(ranges: &[(u32, u32)]) -> bool {
    (1..=LINEAR_MAX).contains(&ranges.len()) && ranges.iter().all(|&(lo, hi)| lo == hi)
}

/// The values of `min..=max` outside `ranges` (sorted, disjoint, inside `min..=max`), as
/// ranges; stops early once there are more than [`LINEAR_MAX`] of them.
fn gaps(ranges: &[(u32, u32)], min: u32, max: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut next = Some(min);
    for &(lo, hi) in ranges {
        if let Some(from) = next {
            if lo > from {
                out.push((from, lo - 1));
                if out.len() > LINEAR_MAX {
                    return out;
                }
            }
        }
        next = hi.checked_add(1).filter(|&n| n <= max);
    }
    if let Some(from) = next {
        if from <= max {
            out.push((from, max));
        }
    }
    out
}

fn node(s: &mut impl Searcher, ranges: &[(u32, u32)], min: u32, max: u32, t: Label, f: Label) {
    // A few single values: a chain of equality tests is shorter than the search below (n
    // tests rather than about 2n - 1) and at this size no slower (`vlan`: 0x8100, 0x88a8,
    // 0x9100, as libpcap writes it). Large sets end in such chains too, which keeps a
    // 500-host set shorter than libpcap's chain at the cost of a few more tests on a path.
    if (2..=LINEAR_MAX).contains(&ranges.len()) && ranges.iter().all(|&(lo, hi)| lo == hi) {
        for (i, &(v, _)) in ranges.iter().enumerate() {
            if i + 1 == ranges.len() {
                s.test(Test::Eq(v), t, f);
            } else {
                let next = s.new_label();
                s.test(Test::Eq(v), t, next);
                s.bind_label(next);
            }
        }
        return;
    }
    match ranges {
        [] => s.goto_label(f),
        [(lo, hi)] => leaf(s, *lo, *hi, min, max, t, f),
        _ => {
            // Split at a multiple of LINEAR_MAX where the halves can end in full chains.
            let chunks = ranges.len().div_ceil(LINEAR_MAX);
            let points = ranges.iter().all(|&(lo, hi)| lo == hi);
            let mid = if points && chunks > 1 { chunks / 2 * LINEAR_MAX } else { ranges.len() / 2 };
            let (left, right) = ranges.split_at(mid);
            // Ranges are disjoint and sorted, so the pivot is above every left range and
            // therefore above 0.
            let pivot = right.first().map_or(max, |&(lo, _)| lo);
            let go_right = s.new_label();
            let go_left = s.new_label();
            s.test(Test::Ge(pivot), go_right, go_left);
            s.bind_label(go_left);
            node(s, left, min, pivot.saturating_sub(1), t, f);
            s.bind_label(go_right);
            node(s, right, pivot, max, t, f);
        }
    }
}

/// One range left and the value in `min..=max`, with `min <= lo <= hi <= max`.
fn leaf(s: &mut impl Searcher, lo: u32, hi: u32, min: u32, max: u32, t: Label, f: Label) {
    let above_min = lo > min;
    let below_max = hi < max;
    match (above_min, below_max) {
        (false, false) => s.goto_label(t),
        (false, true) => s.test(Test::Gt(hi), f, t),
        (true, false) => s.test(Test::Ge(lo), t, f),
        (true, true) if lo == hi => s.test(Test::Eq(lo), t, f),
        (true, true) => {
            let in_low_end = s.new_label();
            s.test(Test::Ge(lo), in_low_end, f);
            s.bind_label(in_low_end);
            s.test(Test::Gt(hi), f, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::flow::{Flow, Item};

    /// Runs the emitted search on a value, by walking the flow.
    struct Recorder(Flow<(), Test>);

    impl Searcher for Recorder {
        fn new_label(&mut self) -> Label {
            self.0.label()
        }
        fn bind_label(&mut self, label: Label) {
            self.0.bind(label)
        }
        fn goto_label(&mut self, label: Label) {
            self.0.goto(label)
        }
        fn test(&mut self, test: Test, t: Label, f: Label) {
            self.0.cond(test, t, f)
        }
    }

    fn run(flow: &Flow<(), Test>, value: u32, t: Label, f: Label) -> (bool, usize) {
        let items = flow.items();
        let find = |l: Label| items.iter().position(|i| *i == Item::Label(l));
        let mut pc = 0;
        let mut tests = 0;
        loop {
            match items.get(pc) {
                Some(Item::Cond { cond, t: jt, f: jf }) => {
                    tests += 1;
                    let holds = match *cond {
                        Test::Eq(k) => value == k,
                        Test::Ge(k) => value >= k,
                        Test::Gt(k) => value > k,
                    };
                    let next = if holds { *jt } else { *jf };
                    if next == t || next == f {
                        return (next == t, tests);
                    }
                    pc = find(next).expect("bound");
                }
                Some(Item::Goto(next)) if *next == t || *next == f => return (*next == t, tests),
                Some(Item::Goto(next)) => pc = find(*next).expect("bound"),
                Some(_) => pc += 1,
                None => panic!("fell off the end"),
            }
        }
    }

    /// The search of a set that reaches past the value's bounds is the search of the set
    /// cut to them (a byte searched for 250..=300 or 0..=3: its ranges clipped first).
    #[test]
    fn a_set_past_the_values_bounds_is_searched_as_cut_to_them() {
        let searched = |ranges: &[(u32, u32)], min, max| {
            let mut r = Recorder(Flow::new());
            let (t, f) = (r.new_label(), r.new_label());
            search(&mut r, ranges, min, max, t, f);
            r.0.items().to_vec()
        };
        let wide = [(0, 3), (9, 9), (100, 120), (250, 300), (400, 500)];
        let cut = [(100, 120), (250, 255)];
        assert_eq!(searched(&wide, 10, 255), searched(&cut, 10, 255));
        assert_eq!(searched(&wide, 2, 255), searched(&[(2, 3), (9, 9), cut[0], cut[1]], 2, 255));
    }

    #[test]
    fn search_agrees_with_contains_and_is_logarithmic() {
        let set = crate::ValueSet::from_ranges(
            (0..200u32)
                .map(|i| (i * 1000 + 3, i * 1000 + 3 + (i % 3)))
                .chain([(u32::MAX, u32::MAX)]),
        );
        let mut rec = Recorder(Flow::new());
        let (t, f) = (rec.0.label(), rec.0.label());
        search(&mut rec, set.ranges(), 0, u32::MAX, t, f);
        let mut worst = 0;
        for v in
            (0..205_000u32).step_by(7).chain([0, 3, 4, 5, 6, 2003, 2004, u32::MAX - 1, u32::MAX])
        {
            let (got, tests) = run(&rec.0, v, t, f);
            assert_eq!(got, set.contains(v), "{v}");
            worst = worst.max(tests);
        }
        assert!(worst <= 11, "{worst} tests for 201 ranges");
    }

    #[test]
    fn all_but_a_few_values_is_a_chain_of_their_tests() {
        // `not` of {6, 17, 132} on a byte: three tests, each to the false exit.
        let set = crate::ValueSet::from_ranges([(0, 5), (7, 16), (18, 131), (133, u32::MAX)]);
        for max in [255, u32::MAX] {
            let mut rec = Recorder(Flow::new());
            let (t, f) = (rec.0.label(), rec.0.label());
            search(&mut rec, set.ranges(), 0, max, t, f);
            let tests = rec.0.items().iter().filter(|i| matches!(i, Item::Cond { .. })).count();
            assert_eq!(tests, 3, "{:?}", rec.0.items());
            for v in (0..=300).chain([max - 1, max]) {
                assert_eq!(run(&rec.0, v, t, f).0, set.contains(v), "{v}");
            }
        }
        assert_eq!(gaps(&[(0, 5), (7, 9)], 0, 9), [(6, 6)]);
        assert_eq!(gaps(&[(3, 5)], 0, 9), [(0, 2), (6, 9)]);
        assert_eq!(gaps(&[(0, u32::MAX)], 0, u32::MAX), []);
    }

    /// A set of single values costs at most n + ceil(n / 16) - 1 tests in all (libpcap's
    /// chain costs n) and stays logarithmic-ish on a path.
    #[test]
    fn point_sets_are_nearly_as_short_as_a_chain() {
        for n in [1u32, 2, 5, 16, 17, 100, 500, 1000] {
            let set = crate::ValueSet::from_values((0..n).map(|i| 0x0a01_0000 + 3 * i));
            let mut rec = Recorder(Flow::new());
            let (t, f) = (rec.0.label(), rec.0.label());
            search(&mut rec, set.ranges(), 0, u32::MAX, t, f);
            let tests = rec.0.items().iter().filter(|i| matches!(i, Item::Cond { .. })).count();
            let chunks = (n as usize).div_ceil(LINEAR_MAX);
            assert_eq!(tests, n as usize + chunks - 1, "{n} values");
            let mut worst = 0;
            for v in (0x0a00_fff0..0x0a01_0000 + 3 * n + 4).chain([0, u32::MAX]) {
                let (got, on_path) = run(&rec.0, v, t, f);
                assert_eq!(got, set.contains(v), "{n} values, {v:#x}");
                worst = worst.max(on_path);
            }
            let depth = usize::BITS - chunks.leading_zeros(); // >= log2(chunks)
            assert!(worst <= depth as usize + LINEAR_MAX, "{n} values: {worst} tests on a path");
        }
    }

    #[test]
    fn known_bounds_drop_tests() {
        let mut rec = Recorder(Flow::new());
        let (t, f) = (rec.0.label(), rec.0.label());
        // A byte value against 0..=255 and more: always in the set.
        search(&mut rec, &[(0, 1000)], 0, 255, t, f);
        assert_eq!(rec.0.items(), &[Item::Goto(t)]);
    }
}
