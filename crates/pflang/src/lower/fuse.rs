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

use weir_filter::{CmpOp, Expr, PairBranch, PairTest, Pairs, Pred, ValueSet};

use crate::ast::Qualifiers;

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

/// A branch of a pair test as parsed from a term (borrowed; [`PairBranch`] owned):
/// `and(guards..., or(F == c ..., nested branches ...))`.
struct TestBranch<'a> {
    guards: &'a [Pred],
    fields: Vec<&'a Expr>,
    inner: Vec<TestBranch<'a>>,
}

/// Agrees the hole `c` with the one seen so far.
fn same_hole(seen: &mut Option<u32>, c: u32) -> Option<()> {
    match *seen {
        Some(h) if h != c => None,
        _ => {
            *seen = Some(c);
            Some(())
        }
    }
}

/// How deeply branches of a pair test may nest (`port P`: network protocol, transport
/// protocol, the ports): deeper terms are not pairs, and the parse, which recurses, never
/// follows a deep generated tree (it runs inside the lowering's own recursion).
const MAX_NESTING: u32 = 6;

/// `or(items)` (or one item): each `F == c` or a nested branch.
fn test_tail<'a>(
    p: &'a Pred,
    hole: &mut Option<u32>,
    depth: u32,
) -> Option<(Vec<&'a Expr>, Vec<TestBranch<'a>>)> {
    if depth > MAX_NESTING {
        return None;
    }
    let items = match p {
        Pred::Or(items) if !items.is_empty() => items.as_slice(),
        p => std::slice::from_ref(p),
    };
    let (mut fields, mut inner) = (Vec::new(), Vec::new());
    for item in items {
        if let Some((field, c)) = hole_test(item) {
            same_hole(hole, c)?;
            fields.push(field);
        } else {
            inner.push(test_branch(item, hole, depth + 1)?);
        }
    }
    Some((fields, inner))
}

fn test_branch<'a>(p: &'a Pred, hole: &mut Option<u32>, depth: u32) -> Option<TestBranch<'a>> {
    match p {
        Pred::And(parts) if parts.len() >= 2 => {
            let (last, guards) = parts.split_last()?;
            if guards.iter().any(stateful) {
                return None;
            }
            let (fields, inner) = test_tail(last, hole, depth)?;
            Some(TestBranch { guards, fields, inner })
        }
        p => {
            let (fields, inner) = test_tail(p, hole, depth)?;
            Some(TestBranch { guards: &[], fields, inner })
        }
    }
}

/// `and(parts...)` as a pair test with a hole: its branches and the hole's value.
fn slice_test(parts: &[Pred]) -> Option<(Vec<TestBranch<'_>>, u32)> {
    let mut hole = None;
    let branches = match parts {
        [Pred::Or(items)] => {
            items.iter().map(|item| test_branch(item, &mut hole, 0)).collect::<Option<Vec<_>>>()?
        }
        [one] => vec![test_branch(one, &mut hole, 0)?],
        [guards @ .., last] => {
            if guards.iter().any(stateful) {
                return None;
            }
            let (fields, inner) = test_tail(last, &mut hole, 0)?;
            vec![TestBranch { guards, fields, inner }]
        }
        [] => return None,
    };
    Some((branches, hole?))
}

fn owned(branches: &[TestBranch<'_>]) -> Vec<PairBranch> {
    branches
        .iter()
        .map(|b| PairBranch {
            guards: b.guards.to_vec(),
            fields: b.fields.iter().map(|&f| f.clone()).collect(),
            inner: owned(&b.inner),
        })
        .collect()
}

/// Whether `branches` are `test`'s (the hole may differ).
fn same_test(branches: &[TestBranch<'_>], test: &[PairBranch]) -> bool {
    branches.len() == test.len()
        && branches.iter().zip(test).all(|(a, b)| {
            a.guards == b.guards.as_slice()
                && a.fields.len() == b.fields.len()
                && a.fields.iter().zip(&b.fields).all(|(&x, y)| x == y)
                && same_test(&a.inner, &b.inner)
        })
}

/// A run of pair terms `H(a) and Q(b)` (`host A and port P`: two holes, so not a set):
/// fused into one [`Pred::Pairs`] once at least [`MIN_TERMS`] long. A term is `and(parts)`
/// split at `split` into the two tests; any split whose halves are shapes is exact (the
/// node means the ordered expansion of the very terms), so the first that parses is used,
/// and later terms must split the same way into the same tests.
struct PairRun {
    first: PairTest,
    second: PairTest,
    split: usize,
    /// The terms, while the run is shorter than [`MIN_TERMS`].
    held: Vec<Pred>,
    pairs: Vec<(u32, u32)>,
    /// What the run's terms read from their syntax say about the run (see [`PairHint`]).
    known: Option<Known>,
}

impl PairRun {
    /// The run started by `term`, `hint` being what its syntax said, if anything.
    fn start(term: Pred, hint: Option<PairHint>) -> Result<PairRun, Pred> {
        let Pred::And(parts) = &term else { return Err(term) };
        let found = (1..parts.len()).find_map(|k| {
            let (h, a) = slice_test(parts.get(..k)?)?;
            let (q, b) = slice_test(parts.get(k..)?)?;
            let test = |branches: &[TestBranch<'_>]| PairTest { branches: owned(branches) };
            Some((k, test(&h), test(&q), (a, b)))
        });
        let Some((split, first, second, pair)) = found else { return Err(term) };
        let known = hint.filter(|h| h.pair == pair).map(|h| Known {
            syntax: h.syntax,
            first: h.pair,
            confirmed: false,
        });
        Ok(PairRun { first, second, split, held: vec![term], pairs: vec![pair], known })
    }

    /// The term's pair, when it is one of this run's.
    fn pair(&self, term: &Pred) -> Option<(u32, u32)> {
        let Pred::And(parts) = term else { return None };
        let (h, a) = slice_test(parts.get(..self.split)?)?;
        let (q, b) = slice_test(parts.get(self.split..)?)?;
        let same = same_test(&h, &self.first.branches) && same_test(&q, &self.second.branches);
        same.then_some((a, b))
    }

    /// Adds a lowered term of the run, its pair `pair`, `hint` being what its syntax said.
    fn push(&mut self, term: Pred, pair: (u32, u32), hint: Option<PairHint>) {
        self.known = match (self.known.take(), hint) {
            (Some(mut known), Some(hint)) if known.syntax == hint.syntax && hint.pair == pair => {
                known.confirmed |=
                    pair.0 != known.first.0 && pair.1 != known.first.1 && pair.0 != pair.1;
                Some(known)
            }
            _ => None,
        };
        self.add(pair, Some(term));
    }

    /// Adds a term known by its syntax alone, unlowered, when the run has vouched for that
    /// syntax (see [`PairHint`]) and is long enough to keep no terms; false (nothing done)
    /// otherwise.
    fn push_known(&mut self, hint: &PairHint) -> bool {
        let Some(known) = &self.known else { return false };
        if !known.confirmed || known.syntax != hint.syntax || self.pairs.len() < MIN_TERMS {
            return false;
        }
        self.add(hint.pair, None);
        true
    }

    /// The one way a pair joins the run: its term is kept while the run is short (a term
    /// taken by its syntax comes only once the run keeps none).
    fn add(&mut self, pair: (u32, u32), term: Option<Pred>) {
        self.pairs.push(pair);
        if self.pairs.len() >= MIN_TERMS {
            self.held.clear();
        } else {
            self.held.extend(term);
        }
    }

    /// Appends the run to `out`; true when it was fused.
    fn finish(self, out: &mut Vec<Pred>) -> bool {
        if self.pairs.len() >= MIN_TERMS {
            out.push(Pred::Pairs(Box::new(Pairs::new(self.first, self.second, self.pairs))));
            true
        } else {
            out.extend(self.held);
            false
        }
    }
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

/// Fuses the terms of an `or` as they are lowered, left to right: a term of the same shape
/// as the run's first leaves only its hole behind once the run is long enough, so a long
/// list never holds its lowered terms all at once (100,000 hosts: 4 million nodes).
#[derive(Default)]
pub struct Fuser {
    out: Vec<Pred>,
    /// The current run's first term.
    head: Option<Pred>,
    /// The run's later terms, kept while the run is shorter than [`MIN_TERMS`].
    held: Vec<Pred>,
    /// The holes of the run's later terms.
    holes: Vec<u32>,
    /// The current run of pair terms, if any (never at once with `head`).
    pairs: Option<PairRun>,
    fused: bool,
}

/// Which two primitives a pair term is: `host A` (an IPv4 address, all four parts) or
/// `port N` (a number), each with its qualifiers, first and second.
pub(crate) type PairSyntax = [(PairSide, Qualifiers); 2];

/// One side of a [`PairSyntax`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PairSide {
    Host,
    Port,
}

/// A term `host A and port P` (any qualifiers, either order, under `not` in an `and` list)
/// read from its syntax before it is lowered: which term it is and its two values.
///
/// The lowering of such a term is one tree for any values, the values written only as the
/// constants of its `==` tests (`host`: `hostop_v4` under a full mask; `port`: the ports'
/// `Pred::eq`), and writes no lowering state. So once two terms of one syntax, lowered,
/// joined the current pair run with the pairs their syntax names, differing in both values,
/// and the second's two values differing from each other, every later term of that syntax
/// joins it with the pair its syntax names: the two agree on every guard and field (both
/// matched the run's tests), so the values sit only in the holes, and the holes of any
/// third pair parse the same way (each hole's tests carried a different constant in the two
/// terms, so none is a fixed constant, nor the other value's). Such a term is
/// then added to the run without being lowered ([`Fuser::push_known`]), as the run would
/// have kept nothing of its tree but the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PairHint {
    pub syntax: PairSyntax,
    pub pair: (u32, u32),
}

/// The current pair run's witness of one syntax (see [`PairHint`]).
struct Known {
    syntax: PairSyntax,
    /// The pair of the first term of that syntax the run took.
    first: (u32, u32),
    /// A second term of the syntax, differing in both values, joined the run too.
    confirmed: bool,
}

impl Fuser {
    /// The next term of the `or`.
    pub fn push(&mut self, term: Pred) {
        self.push_hinted(term, None);
    }

    /// Adds a term known by its syntax alone, unlowered, when the current pair run has
    /// vouched for that syntax (see [`PairHint`]) and is long enough to keep no terms;
    /// false (nothing done) otherwise: the term must then be lowered and pushed.
    pub(crate) fn push_known(&mut self, hint: &PairHint) -> bool {
        self.pairs.as_mut().is_some_and(|run| run.push_known(hint))
    }

    /// [`Fuser::push`], with what the term's syntax said it is, if anything.
    pub(crate) fn push_hinted(&mut self, term: Pred, hint: Option<PairHint>) {
        if let Some(run) = &mut self.pairs {
            if let Some(pair) = run.pair(&term) {
                run.push(term, pair, hint);
                return;
            }
            self.flush_pairs();
        }
        let hole = match (&self.head, shape(&term)) {
            (Some(head), Some(s)) => shape(head).filter(|h| h.same_as(&s)).map(|_| s.hole),
            _ => None,
        };
        if let Some(hole) = hole {
            self.holes.push(hole);
            if self.holes.len() + 1 >= MIN_TERMS {
                self.held.clear();
            } else {
                self.held.push(term);
            }
            return;
        }
        self.flush();
        if shape(&term).is_some() {
            self.head = Some(term);
        } else {
            match PairRun::start(term, hint) {
                Ok(run) => self.pairs = Some(run),
                Err(term) => self.out.push(term),
            }
        }
    }

    fn flush_pairs(&mut self) {
        if let Some(run) = self.pairs.take() {
            self.fused |= run.finish(&mut self.out);
        }
    }

    fn flush(&mut self) {
        let Some(head) = self.head.take() else { return };
        let holes = std::mem::take(&mut self.holes);
        if holes.len() + 1 >= MIN_TERMS {
            let tail = shape(&head).map(|s| lookups(&s, &holes));
            self.out.push(head);
            self.out.extend(tail);
            self.fused = true;
        } else {
            self.out.push(head);
            self.out.append(&mut self.held);
        }
    }

    /// The terms, runs fused, in order; and whether any run was.
    pub fn finish(mut self) -> (Vec<Pred>, bool) {
        self.flush();
        self.flush_pairs();
        (self.out, self.fused)
    }
}

/// Fuses the terms of an `and` as they are lowered: every run of at least [`MIN_TERMS`]
/// consecutive `not t` terms whose `t`s fuse becomes `not (t1 or ...)` (the same thing:
/// an `and` stops at the first `not t` that is false, an `or` at the first `t` that is
/// true, and an abort under `not` is an abort), fused as [`Fuser`] does.
#[derive(Default)]
pub struct AndFuser {
    out: Vec<Pred>,
    run: Fuser,
}

impl AndFuser {
    pub fn push(&mut self, term: Pred) {
        self.push_hinted(term, None);
    }

    /// [`Fuser::push_known`] for a term `not t`, `hint` being `t`'s.
    pub(crate) fn push_known(&mut self, hint: &PairHint) -> bool {
        self.run.push_known(hint)
    }

    /// [`AndFuser::push`], with what the syntax under the term's `not` said, if anything.
    pub(crate) fn push_hinted(&mut self, term: Pred, hint: Option<PairHint>) {
        match term {
            Pred::Not(inner) => self.run.push_hinted(*inner, hint),
            term => {
                self.flush();
                self.out.push(term);
            }
        }
    }

    fn flush(&mut self) {
        let (inner, fused) = std::mem::take(&mut self.run).finish();
        if fused {
            self.out.push(Pred::not(super::junction(inner, false)));
        } else {
            self.out.extend(inner.into_iter().map(Pred::not));
        }
    }

    /// The conjunction.
    pub fn finish(mut self) -> Pred {
        self.flush();
        super::junction(self.out, true)
    }
}

/// A long list's fuser, for its one lowering loop (`Lowerer::expr`): [`Fuser`] for an `or`
/// list, [`AndFuser`] for an `and` list.
pub(crate) trait ListFuser: Default {
    /// Whether the list's pair terms are under `not` (an `and` list's: `not (H and Q)`).
    const NEGATED: bool;
    fn push_known(&mut self, hint: &PairHint) -> bool;
    fn push_hinted(&mut self, term: Pred, hint: Option<PairHint>);
    /// The list, its runs fused.
    fn finish_list(self) -> Pred;
}

impl ListFuser for Fuser {
    const NEGATED: bool = false;
    fn push_known(&mut self, hint: &PairHint) -> bool {
        Fuser::push_known(self, hint)
    }
    fn push_hinted(&mut self, term: Pred, hint: Option<PairHint>) {
        Fuser::push_hinted(self, term, hint);
    }
    fn finish_list(self) -> Pred {
        super::junction(self.finish().0, false)
    }
}

impl ListFuser for AndFuser {
    const NEGATED: bool = true;
    fn push_known(&mut self, hint: &PairHint) -> bool {
        AndFuser::push_known(self, hint)
    }
    fn push_hinted(&mut self, term: Pred, hint: Option<PairHint>) {
        AndFuser::push_hinted(self, term, hint);
    }
    fn finish_list(self) -> Pred {
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile, names::NameDb, LinkType, Options};

    fn lowered(host: u32, port: u32) -> Pred {
        let [a, b, c, d] = host.to_be_bytes();
        let expr = format!("host {a}.{b}.{c}.{d} and port {port}");
        let options = Options::new(LinkType::Ethernet);
        compile(&expr, &options, &NameDb::builtin()).unwrap().pred
    }

    /// A run of one syntax takes later terms of it unlowered once it holds [`MIN_TERMS`]
    /// terms and a second term confirmed the syntax; not before, and not another syntax.
    #[test]
    fn a_vouched_run_takes_later_terms_by_their_syntax_alone() {
        let q = Qualifiers::default();
        let syntax = [(PairSide::Host, q), (PairSide::Port, q)];
        let hint = |pair| PairHint { syntax, pair };
        let mut fuser = Fuser::default();
        for i in 0..MIN_TERMS as u32 {
            let pair = (0x0a00_0001 + i, 1000 + i);
            assert!(!fuser.push_known(&hint(pair)), "taken with {i} terms in the run");
            fuser.push_hinted(lowered(pair.0, pair.1), Some(hint(pair)));
        }
        assert!(fuser.push_known(&hint((0x0b00_0001, 2000))));
        let other = PairHint { syntax: [(PairSide::Port, q), (PairSide::Host, q)], pair: (7, 8) };
        assert!(!fuser.push_known(&other));
    }
}
