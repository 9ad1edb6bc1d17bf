//! Shrinking: from a failing expression to a small one that still fails.
//!
//! Greedy descent over one-step variants (a subtree replaced by one of its children or by a
//! tiny primitive, a stack of `not`s and parentheses removed, an operand dropped, a
//! qualifier dropped, a constant made smaller or decimal), taking the first that still
//! fails. Every accepted step lowers [`Node::cost`], so the search ends; it also stops
//! after a budget of attempts, since each attempt compiles and runs the expression.

use super::{Arith, Leaf, Node, NumStyle, Prim};

/// The result of [`shrink`].
#[derive(Debug, Clone)]
pub struct Shrunk {
    pub node: Node,
    pub text: String,
    /// Steps taken (each one a smaller failing expression).
    pub steps: usize,
    /// Candidates tried.
    pub tries: usize,
}

/// Shrinks `start` while `fails(text)` holds, trying at most `budget` candidates. `fails`
/// must hold for `start` itself; the result is `start` when no smaller variant fails.
pub fn shrink(start: &Node, budget: usize, mut fails: impl FnMut(&str) -> bool) -> Shrunk {
    let mut best = start.clone();
    let mut best_cost = best.cost();
    let (mut steps, mut tries) = (0, 0);
    'descend: loop {
        // Generation order is top-down (whole operands before their parts), which removes
        // the most per attempt; a tiny primitive for the whole expression comes last.
        let mut all = candidates(&best);
        if !matches!(best, Node::Leaf(_)) {
            all.push(tiny("ip"));
            all.push(tiny("tcp"));
        }
        let candidates =
            all.into_iter().map(|c| (c.cost(), c)).filter(|(cost, _)| *cost < best_cost);
        let mut seen = std::collections::HashSet::new();
        for (cost, candidate) in candidates {
            let text = candidate.render();
            if !seen.insert(text.clone()) {
                continue;
            }
            if tries >= budget {
                break 'descend;
            }
            tries += 1;
            if fails(&text) {
                best = candidate;
                best_cost = cost;
                steps += 1;
                continue 'descend;
            }
        }
        break;
    }
    Shrunk { text: best.render(), node: best, steps, tries }
}

/// The result of [`shrink_cut`]: the smallest expression found and the shortest cut of the
/// packet on which it still fails.
#[derive(Debug, Clone)]
pub struct ShrunkCut {
    pub shrunk: Shrunk,
    /// Captured bytes kept (the packet's first `cut` bytes).
    pub cut: usize,
}

/// Shrinks a failure that depends on how many bytes of a packet were captured (the
/// truncation class): `shortest_failing_cut(text)` is the smallest captured length, among
/// those the caller tries, on which `text` still fails (`None`: it fails on none). The
/// expression shrinks while some cut still fails; the cut is then the shortest one for the
/// smallest expression (`start_cut` if, against the contract, none fails any more).
/// `shortest_failing_cut` must give `Some` for `start` itself.
pub fn shrink_cut(
    start: &Node,
    start_cut: usize,
    budget: usize,
    mut shortest_failing_cut: impl FnMut(&str) -> Option<usize>,
) -> ShrunkCut {
    let mut last = None;
    let shrunk = shrink(start, budget, |text| match shortest_failing_cut(text) {
        Some(cut) => {
            last = Some((text.to_string(), cut));
            true
        }
        None => false,
    });
    let cut = match last {
        Some((text, cut)) if text == shrunk.text => cut,
        _ => shortest_failing_cut(&shrunk.text).unwrap_or(start_cut),
    };
    ShrunkCut { shrunk, cut }
}

fn tiny(text: &str) -> Node {
    Node::Leaf(Leaf { kind: "shrunk", text: text.to_string(), shorter: None })
}

/// One-step variants of `n`, larger steps first (not all smaller; [`shrink`] filters by
/// cost).
pub fn candidates(n: &Node) -> Vec<Node> {
    let mut out = Vec::new();
    match n {
        Node::Bool { op, spelling, lhs, rhs } => {
            out.push((**lhs).clone());
            out.push((**rhs).clone());
            for l in candidates(lhs).into_iter().chain([tiny("ip")]) {
                out.push(Node::Bool {
                    op: *op,
                    spelling: *spelling,
                    lhs: Box::new(l),
                    rhs: rhs.clone(),
                });
            }
            for r in candidates(rhs).into_iter().chain([tiny("ip")]) {
                out.push(Node::Bool {
                    op: *op,
                    spelling: *spelling,
                    lhs: lhs.clone(),
                    rhs: Box::new(r),
                });
            }
        }
        Node::Not { spelling, inner } => {
            out.extend(unwrapped(inner));
            out.push((**inner).clone());
            out.extend(
                candidates(inner)
                    .into_iter()
                    .map(|c| Node::Not { spelling: *spelling, inner: Box::new(c) }),
            );
        }
        Node::Group(inner) => {
            out.extend(unwrapped(inner));
            out.push((**inner).clone());
            out.extend(candidates(inner).into_iter().map(|c| Node::Group(Box::new(c))));
        }
        Node::Prim(p) => out.extend(prim_candidates(p).into_iter().map(Node::Prim)),
        Node::Inherit { head, rest, grouped } => {
            out.push(Node::Prim(head.clone()));
            for i in 0..rest.len() {
                let mut fewer = rest.clone();
                fewer.remove(i);
                out.push(Node::Inherit { head: head.clone(), rest: fewer, grouped: *grouped });
            }
            if *grouped {
                out.push(Node::Inherit { head: head.clone(), rest: rest.clone(), grouped: false });
            }
            for (i, r) in rest.iter().enumerate() {
                if r.negated {
                    let mut plain = rest.clone();
                    if let Some(x) = plain.get_mut(i) {
                        x.negated = false;
                    }
                    out.push(Node::Inherit { head: head.clone(), rest: plain, grouped: *grouped });
                }
            }
            for h in prim_candidates(head) {
                out.push(Node::Inherit { head: h, rest: rest.clone(), grouped: *grouped });
            }
        }
        Node::Leaf(l) => {
            if let Some(s) = &l.shorter {
                out.push(Node::Leaf(Leaf { kind: l.kind, text: s.clone(), shorter: None }));
            }
        }
        Node::Relation { op, lhs, rhs } => {
            for l in arith_candidates(lhs) {
                out.push(Node::Relation { op: *op, lhs: l, rhs: rhs.clone() });
            }
            for r in arith_candidates(rhs) {
                out.push(Node::Relation { op: *op, lhs: lhs.clone(), rhs: r });
            }
        }
    }
    out
}

/// The first node under `n` that is not a `not` or a parenthesis, when that is deeper
/// than `n` itself: one step through a whole stack of wrappers.
fn unwrapped(n: &Node) -> Option<Node> {
    let mut cur = n;
    while let Node::Not { inner, .. } | Node::Group(inner) = cur {
        cur = inner;
    }
    (!std::ptr::eq(cur, n)).then(|| cur.clone())
}

/// Qualifiers dropped one at a time, keeping the primitive well formed (a `dir` or an
/// `addr` must stay in front of the id).
fn prim_candidates(p: &Prim) -> Vec<Prim> {
    let mut out = Vec::new();
    if p.proto.is_some() && (p.dir.is_some() || p.addr.is_some()) {
        out.push(Prim { proto: None, ..p.clone() });
    }
    if p.dir.is_some() && p.addr.is_some() {
        out.push(Prim { dir: None, ..p.clone() });
    }
    out
}

fn arith_candidates(a: &Arith) -> Vec<Arith> {
    let mut out = Vec::new();
    match a {
        Arith::Num(v, style) => {
            if *style != NumStyle::Decimal {
                out.push(Arith::Num(*v, NumStyle::Decimal));
            }
            if *v > 0 {
                out.push(Arith::Num(0, NumStyle::Decimal));
            }
            if *v > 1 {
                out.push(Arith::Num(1, NumStyle::Decimal));
                out.push(Arith::Num(v / 2, *style));
            }
        }
        Arith::Named(_, v) => out.push(Arith::Num(*v, NumStyle::Decimal)),
        Arith::Len(true) => out.push(Arith::Len(false)),
        Arith::Len(false) => {}
        Arith::Load { proto, offset, size } => {
            out.push(Arith::Num(0, NumStyle::Decimal));
            if size.is_some() {
                out.push(Arith::Load { proto, offset: offset.clone(), size: None });
            }
            for o in arith_candidates(offset) {
                out.push(Arith::Load { proto, offset: Box::new(o), size: *size });
            }
        }
        Arith::Neg(inner) => {
            out.push((**inner).clone());
            out.extend(arith_candidates(inner).into_iter().map(|c| Arith::Neg(Box::new(c))));
        }
        Arith::Group(inner) => {
            out.push((**inner).clone());
            out.extend(arith_candidates(inner).into_iter().map(|c| Arith::Group(Box::new(c))));
        }
        Arith::Bin { op, lhs, rhs } => {
            out.push((**lhs).clone());
            out.push((**rhs).clone());
            for l in arith_candidates(lhs) {
                out.push(Arith::Bin { op: *op, lhs: Box::new(l), rhs: rhs.clone() });
            }
            for r in arith_candidates(rhs) {
                out.push(Arith::Bin { op: *op, lhs: lhs.clone(), rhs: Box::new(r) });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Generator;
    use super::*;

    #[test]
    fn shrinks_to_the_part_that_fails() {
        // "Fails" whenever the text mentions port 443: the minimum is that one primitive
        // with as few qualifiers as the grammar allows.
        let mut g = Generator::new(3);
        let mut found = 0;
        for _ in 0..3000 {
            let e = g.expr();
            let text = e.render();
            if !text.contains("port 443") || text.len() < 40 {
                continue;
            }
            let s = shrink(&e, 10_000, |t| t.contains("port 443"));
            assert!(s.text.contains("port 443"), "{}", s.text);
            assert!(s.text.len() <= "src or dst port 443".len(), "{text} -> {}", s.text);
            found += 1;
        }
        assert!(found > 5, "too few samples: {found}");
    }

    #[test]
    fn shrinking_respects_the_budget_and_never_grows() {
        let mut g = Generator::new(11);
        for _ in 0..200 {
            let e = g.expr();
            let s = shrink(&e, 7, |_| true);
            assert!(s.tries <= 7);
            assert!(s.node.cost() <= e.cost());
        }
    }

    #[test]
    fn deep_stacks_of_wrappers_go_in_one_step() {
        let mut n = Node::Leaf(Leaf { kind: "x", text: "broadcast".into(), shorter: None });
        for i in 0..150 {
            n = if i % 3 == 0 {
                Node::Group(Box::new(n))
            } else {
                Node::Not { spelling: super::super::Spelling::Word, inner: Box::new(n) }
            };
        }
        let s = shrink(&n, 50, |t| t.contains("broadcast"));
        assert_eq!(s.text, "broadcast");
        assert!(s.tries <= 3, "{} tries", s.tries);
    }

    #[test]
    fn truncation_failures_shrink_to_the_expression_and_the_shortest_cut() {
        // "Fails" when the text mentions port 443 and the cut ends inside bytes 30..40:
        // the minimum is the one primitive and a cut of 30.
        let mut g = Generator::new(5);
        let mut found = 0;
        for _ in 0..3000 {
            let e = g.expr();
            let text = e.render();
            if !text.contains("port 443") || text.len() < 40 {
                continue;
            }
            let fails = |t: &str| t.contains("port 443").then_some(30);
            let s = shrink_cut(&e, 39, 10_000, fails);
            assert!(s.shrunk.text.contains("port 443"), "{}", s.shrunk.text);
            assert!(s.shrunk.text.len() <= "src or dst port 443".len(), "{}", s.shrunk.text);
            assert_eq!(s.cut, 30);
            found += 1;
        }
        assert!(found > 5, "too few samples: {found}");
        // Nothing smaller fails: the start and its own shortest cut come back.
        let e = g.expr();
        let s = shrink_cut(&e, 50, 100, |t| (t == e.render()).then_some(12));
        assert_eq!((s.shrunk.text, s.cut), (e.render(), 12));
    }
}
