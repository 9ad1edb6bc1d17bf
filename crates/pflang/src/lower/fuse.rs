//! Long lists as sets, at lowering: `host a or host b or ...` (likewise `port`, `net` with
//! one prefix length, `ether host`, and `not host a and not host b and ...`) lowered to
//! the first term followed by one set lookup per field, rather than to thousands of copies
//! of the same protocol tests. Without this every later pass (the rejects-all check, the
//! optimizer's rounds) walks a tree of ~40 nodes per term before `decide` merges the
//! comparisons into the same sets; with it the tree is the first term's size plus one
//! `Pred::In` per field, whatever the length of the list.
//!
//! Which terms fuse: consecutive terms of one `or` whose lowered trees have the same
//! *shape*, differing only in one constant `c` (the "hole"). A shape is
//!
//! ```text
//! branch                                    (a single branch)
//! or(branch, branch, ...)                   (one per protocol: ip, arp, rarp)
//! branch = and(g1, ..., gm, H)  or  H       (guards g: any tests, the same in every term)
//! H      = L1 == c  or  or(L1 == c, ..., Lk == c)   (the fields, the same in every term)
//! ```
//!
//! with no `Store` or `Try` anywhere. The run `t1 or t2 or ... or tn` becomes
//!
//! ```text
//! or(t1, or_branch(and(g1, ..., gm, or(L1 in S, ..., Lk in S))))     S = {c2, ..., cn}
//! ```
//!
//! Exact (same verdict and same aborts on every packet, cut or not): `t1` is evaluated
//! first in both. When it is true or aborts, so does the list. When it is false, every
//! branch whose guards held had all its fields loaded and compared (an `or` of field
//! tests stops only on a match), and nothing in the terms writes state, so `t2 .. tn`
//! evaluate the same guards and load the same fields again: none of them can abort, and
//! the list is true exactly when some field of a branch whose guards hold is one of
//! `c2 .. cn`, which is what the set lookups say (evaluating the same guards and fields,
//! which cannot abort either). The tests (crates/pflang/tests/fuse.rs) compare the fused
//! and the term-by-term lowering on random lists and random, cut packets.

use weir_filter::{CmpOp, Expr, Pred, ValueSet};

/// Fewer terms than this are lowered term by term: everyday filters (`port 80 or port
/// 443`) keep the tree the optimizer and the emitters are tuned on, and a short list
/// gains nothing from a set.
pub const MIN_TERMS: usize = 8;

/// One branch of a shape: its guards and the fields compared with the hole.
struct Branch<'a> {
    guards: &'a [Pred],
    fields: Vec<&'a Expr>,
}

/// A term's shape and its hole's value.
struct Shape<'a> {
    branches: Vec<Branch<'a>>,
    hole: u32,
}

impl Shape<'_> {
    /// Same guards and fields (the hole may differ).
    fn same_as(&self, other: &Shape<'_>) -> bool {
        self.branches.len() == other.branches.len()
            && self.branches.iter().zip(&other.branches).all(|(a, b)| {
                a.guards == b.guards
                    && a.fields.len() == b.fields.len()
                    && a.fields.iter().zip(&b.fields).all(|(x, y)| x == y)
            })
    }
}

/// `L == c` with a non-constant `L`: the field and `c`.
fn hole_test(p: &Pred) -> Option<(&Expr, u32)> {
    match p {
        Pred::Cmp { op: CmpOp::Eq, lhs, rhs: Expr::Const(c) } if !matches!(lhs, Expr::Const(_)) => {
            Some((lhs, *c))
        }
        _ => None,
    }
}

/// `H`: the fields and the one constant they are compared with.
fn hole_or(p: &Pred) -> Option<(Vec<&Expr>, u32)> {
    match p {
        Pred::Or(items) if !items.is_empty() => {
            let mut fields = Vec::with_capacity(items.len());
            let mut hole = None;
            for item in items {
                let (field, c) = hole_test(item)?;
                if hole.is_some_and(|h| h != c) {
                    return None;
                }
                hole = Some(c);
                fields.push(field);
            }
            Some((fields, hole?))
        }
        p => hole_test(p).map(|(field, c)| (vec![field], c)),
    }
}

/// Whether `p` writes state or confines aborts (the argument above needs neither).
fn stateful(p: &Pred) -> bool {
    match p {
        Pred::Store { .. } | Pred::Try(_) => true,
        Pred::And(parts) | Pred::Or(parts) => parts.iter().any(stateful),
        Pred::Not(inner) => stateful(inner),
        _ => false,
    }
}

fn branch(p: &Pred) -> Option<(Branch<'_>, u32)> {
    if let Some((fields, hole)) = hole_or(p) {
        return Some((Branch { guards: &[], fields }, hole));
    }
    match p {
        Pred::And(parts) if parts.len() >= 2 => {
            let (last, guards) = parts.split_last()?;
            let (fields, hole) = hole_or(last)?;
            if guards.iter().any(stateful) {
                return None;
            }
            Some((Branch { guards, fields }, hole))
        }
        _ => None,
    }
}

fn shape(p: &Pred) -> Option<Shape<'_>> {
    if let Some((b, hole)) = branch(p) {
        return Some(Shape { branches: vec![b], hole });
    }
    let Pred::Or(items) = p else { return None };
    let mut branches = Vec::with_capacity(items.len());
    let mut hole = None;
    for item in items {
        let (b, c) = branch(item)?;
        if hole.is_some_and(|h| h != c) {
            return None;
        }
        hole = Some(c);
        branches.push(b);
    }
    Some(Shape { branches, hole: hole? })
}

/// The set lookups standing for the terms after the first of a run of one shape (see the
/// module documentation); `rest` holds their holes.
fn lookups(shape: &Shape<'_>, rest: &[u32]) -> Pred {
    let set = ValueSet::from_values(rest.iter().copied());
    let branches = shape.branches.iter().map(|b| {
        let fields = b.fields.iter().map(|&f| Pred::In { value: f.clone(), set: set.clone() });
        let any = super::junction(fields.collect(), false);
        super::junction(b.guards.iter().cloned().chain([any]).collect(), true)
    });
    super::junction(branches.collect(), false)
}

/// The runs of at least [`MIN_TERMS`] consecutive terms of one shape: (first term, end,
/// the lookups standing for the rest).
fn runs(terms: &[Pred]) -> Vec<(usize, usize, Pred)> {
    let mut runs = Vec::new();
    if terms.len() < MIN_TERMS {
        return runs;
    }
    let mut i = 0;
    while i < terms.len() {
        let Some(head) = shape(&terms[i]) else {
            i += 1;
            continue;
        };
        let mut holes = Vec::new();
        let mut j = i + 1;
        while let Some(s) = terms.get(j).and_then(shape) {
            if !head.same_as(&s) {
                break;
            }
            holes.push(s.hole);
            j += 1;
        }
        if j - i >= MIN_TERMS {
            runs.push((i, j, lookups(&head, &holes)));
        }
        i = j;
    }
    runs
}

/// The terms with each run replaced by its first term and its lookups.
fn apply(terms: Vec<Pred>, runs: Vec<(usize, usize, Pred)>) -> Vec<Pred> {
    let mut out = Vec::with_capacity(terms.len());
    let mut runs = runs.into_iter().peekable();
    for (k, term) in terms.into_iter().enumerate() {
        match runs.peek_mut() {
            Some((start, _, tail)) if *start == k => {
                out.push(term);
                out.push(std::mem::replace(tail, Pred::Const(false)));
            }
            Some((start, end, _)) if *start < k && k < *end => {
                if k + 1 == *end {
                    runs.next();
                }
            }
            _ => out.push(term),
        }
    }
    out
}

/// The disjunction of the terms of an `or`, in order, with every run of at least
/// [`MIN_TERMS`] consecutive terms of one shape fused.
pub fn or_terms(terms: Vec<Pred>) -> Pred {
    let runs = runs(&terms);
    if runs.is_empty() {
        return super::junction(terms, false);
    }
    super::junction(apply(terms, runs), false)
}

/// The conjunction of the terms of an `and`, with every run of at least [`MIN_TERMS`]
/// consecutive `not t` terms whose `t`s fuse rewritten as `not (t1 or ...)` (the same
/// thing: an `and` stops at the first `not t` that is false, an `or` at the first `t`
/// that is true, and an abort under `not` is an abort) and fused as [`or_terms`] does.
pub fn and_terms(terms: Vec<Pred>) -> Pred {
    if terms.len() < MIN_TERMS {
        return super::junction(terms, true);
    }
    let mut out = Vec::with_capacity(terms.len());
    let mut run: Vec<Pred> = Vec::new();
    let flush = |run: &mut Vec<Pred>, out: &mut Vec<Pred>| {
        let inner = std::mem::take(run);
        let runs = runs(&inner);
        if runs.is_empty() {
            out.extend(inner.into_iter().map(Pred::not));
        } else {
            out.push(Pred::not(super::junction(apply(inner, runs), false)));
        }
    };
    for term in terms {
        match term {
            Pred::Not(inner) => run.push(*inner),
            term => {
                flush(&mut run, &mut out);
                out.push(term);
            }
        }
    }
    flush(&mut run, &mut out);
    super::junction(out, true)
}
