//! [`Pred::Pairs`]: a long list of same-shaped conjunctions `(host A and port P) or ...` as
//! one table, with the meaning of its ordered expansion, aborts included.
//!
//! A pair list is `t1 or t2 or ... or tn`, `ti = H(ai) and Q(bi)`, where `H(c)` and `Q(c)`
//! are *tests with a hole* ([`PairTest`]): `or` over branches, each `and(g1 .. gm, or(F1 ==
//! c, ..., Fk == c, B1, ..., Bj))` with nested branches `B` of the same form (`port P`:
//! per network protocol, per transport protocol, the two ports), the guards `g` and fields
//! `F` the same in every term, nothing writing scratch or confining aborts.
//! [`Pairs::expand`] gives exactly that tree.
//!
//! **Why a table is exact.** Loads are pure, so evaluating `H(c)` walks a sequence that does
//! not depend on `c`: each branch's guards (false: the next branch; abort: the walk aborts),
//! then its fields' values, stopping at the first equal to `c`. So `H(c)` is true when `c`
//! is one of the values `V` the whole walk would load, and otherwise false or an abort
//! according to how the walk *ends* (the end of the branches, or an abort). Likewise `Q`,
//! values `W`. The list, evaluated in order, stops at the first term that is not false:
//!
//! - `ai` not in `V`: false when `H`'s walk ends, an abort when it aborts;
//! - `ai` in `V`: true when `bi` is in `W`; else false when `Q`'s walk ends, an abort when
//!   it aborts (a packet cut between the source and destination port: whether the first
//!   pair whose host matches has the source port decides).
//!
//! Hence [`PairTable::decide`]: neither walk aborted, any `(v, w)` in `V x W` among the
//! pairs (a few hash probes); only `Q`'s aborted, the first pair in list order whose `a` is
//! in `V` decides (a map from each `a` to its first pair); `H`'s aborted, the pairs are
//! scanned in order (such a packet is cut inside the host fields, and the scan stops at the
//! first pair whose `a` is not one of the few loaded).
//!
//! The reference evaluator, and native code through a call to [`PairTable::decide`],
//! evaluate the node this way; the classic BPF and eBPF emitters emit [`Pairs::expand`]
//! (classic BPF has no tables; an eBPF hash map would change the program's form, left for
//! later). The optimizer treats the node as one opaque test that may abort.
//!
//! **Optimized emission.** Emitted as it stands, an optimized filter's node becomes its
//! expansion unoptimized: every term reloads its fields (1.4 million eBPF instructions for
//! 10,000 firewall pairs, over the engines' million, where the optimized expansion is a
//! third of that). Optimizing the expansion alone is not exact under a `not` (the
//! optimizer's top level treats false and abort alike), so the optimized emitters take
//! [`expanded_optimized`]: the whole filter with every node expanded, optimized again.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::eval::{Abort, Evaluator};
use crate::ir::{Expr, Filter, Pred};

/// One branch of a [`PairTest`]: `and(guards..., or(fields[0] == c, ..., inner[0], ...))`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PairBranch {
    pub guards: Vec<Pred>,
    pub fields: Vec<Expr>,
    /// Nested branches, tried after the fields.
    pub inner: Vec<PairBranch>,
}

impl PairBranch {
    fn with(&self, c: u32) -> Pred {
        let fields = self.fields.iter().map(|f| Pred::eq(f.clone(), c));
        let any = Pred::or(fields.chain(self.inner.iter().map(|b| b.with(c))));
        Pred::and(self.guards.iter().cloned().chain([any]))
    }

    /// [`PairTest::walk`] over these branches; true when the walk aborted.
    fn walk(branches: &[PairBranch], e: &mut Evaluator<'_>, values: &mut Vec<u32>) -> bool {
        for b in branches {
            let mut held = true;
            for g in &b.guards {
                match e.pred(g) {
                    Ok(true) => {}
                    Ok(false) => {
                        held = false;
                        break;
                    }
                    Err(Abort) => return true,
                }
            }
            if !held {
                continue;
            }
            for f in &b.fields {
                match e.expr(f) {
                    Ok(v) => values.push(v),
                    Err(Abort) => return true,
                }
            }
            if PairBranch::walk(&b.inner, e, values) {
                return true;
            }
        }
        false
    }

    fn parts<'a>(branches: &'a [PairBranch], out: &mut Vec<(&'a [Pred], &'a [Expr])>) {
        for b in branches {
            out.push((&b.guards, &b.fields));
            PairBranch::parts(&b.inner, out);
        }
    }

    /// Fields in this branch and the ones nested in it.
    pub fn field_count(&self) -> usize {
        self.fields.len() + self.inner.iter().map(PairBranch::field_count).sum::<usize>()
    }
}

/// A test with a hole `c`: `or` of its branches (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PairTest {
    pub branches: Vec<PairBranch>,
}

impl PairTest {
    /// The test with its hole filled by `c`, as lowering writes it.
    pub fn with(&self, c: u32) -> Pred {
        Pred::or(self.branches.iter().map(|b| b.with(c)))
    }

    /// Walks the test once for every hole: pushes the values of the fields it would load
    /// into `values` and says whether the walk aborted (see the module documentation).
    pub fn walk(&self, e: &mut Evaluator<'_>, values: &mut Vec<u32>) -> bool {
        PairBranch::walk(&self.branches, e, values)
    }

    /// Every predicate and expression in it, for the passes that look inside.
    pub fn parts(&self) -> impl Iterator<Item = (&[Pred], &[Expr])> {
        let mut out = Vec::new();
        PairBranch::parts(&self.branches, &mut out);
        out.into_iter()
    }

    /// Fields in all its branches, nested ones included.
    pub fn field_count(&self) -> usize {
        self.branches.iter().map(PairBranch::field_count).sum()
    }
}

/// The pairs of a [`Pairs`] node, in list order, with the indexes its probe uses. Equality,
/// order and hashing look at the list only.
#[derive(Debug)]
pub struct PairTable {
    pairs: Vec<(u32, u32)>,
    set: HashSet<(u32, u32)>,
    /// Each first value's first pair (its index in `pairs`).
    first: HashMap<u32, u32>,
}

impl PairTable {
    pub fn new(pairs: Vec<(u32, u32)>) -> PairTable {
        let set = pairs.iter().copied().collect();
        let mut first = HashMap::with_capacity(pairs.len());
        for (i, &(a, _)) in pairs.iter().enumerate() {
            first.entry(a).or_insert(i as u32);
        }
        PairTable { pairs, set, first }
    }

    /// The pairs, in list order.
    pub fn pairs(&self) -> &[(u32, u32)] {
        &self.pairs
    }

    /// The list's verdict from the two walks: `h` the first test's loaded values and
    /// whether its walk aborted, `q` the second's (see the module documentation).
    pub fn decide(
        &self,
        h: &[u32],
        h_aborted: bool,
        q: &[u32],
        q_aborted: bool,
    ) -> Result<bool, Abort> {
        if h_aborted {
            for &(a, b) in &self.pairs {
                if !h.contains(&a) {
                    return Err(Abort);
                }
                if q.contains(&b) {
                    return Ok(true);
                }
                if q_aborted {
                    return Err(Abort);
                }
            }
            return Ok(false);
        }
        if !q_aborted {
            let hit = h.iter().any(|&a| q.iter().any(|&b| self.set.contains(&(a, b))));
            return Ok(hit);
        }
        let Some(i) = h.iter().filter_map(|a| self.first.get(a)).min() else {
            return Ok(false);
        };
        match self.pairs.get(*i as usize) {
            Some((_, b)) if q.contains(b) => Ok(true),
            _ => Err(Abort),
        }
    }
}

impl PartialEq for PairTable {
    fn eq(&self, other: &Self) -> bool {
        self.pairs == other.pairs
    }
}
impl Eq for PairTable {}
impl Hash for PairTable {
    fn hash<S: Hasher>(&self, state: &mut S) {
        self.pairs.hash(state);
    }
}
impl PartialOrd for PairTable {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PairTable {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.pairs.cmp(&other.pairs)
    }
}

/// `H(a1) and Q(b1) or H(a2) and Q(b2) or ...`, in list order (module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pairs {
    pub first: PairTest,
    pub second: PairTest,
    /// Shared: the optimizer clones predicates, and the native code keeps its address.
    pub table: Arc<PairTable>,
}

impl Pairs {
    pub fn new(first: PairTest, second: PairTest, pairs: Vec<(u32, u32)>) -> Pairs {
        Pairs { first, second, table: Arc::new(PairTable::new(pairs)) }
    }

    /// The ordered expansion: what the node means, and what the emitters without tables
    /// emit.
    pub fn expand(&self) -> Pred {
        Pred::or(
            self.table
                .pairs()
                .iter()
                .map(|&(a, b)| Pred::and([self.first.with(a), self.second.with(b)])),
        )
    }

    /// The node's verdict on the packet `e` evaluates.
    pub fn eval(&self, e: &mut Evaluator<'_>) -> Result<bool, Abort> {
        let (mut h, mut q) = (Vec::new(), Vec::new());
        let h_aborted = self.first.walk(e, &mut h);
        let q_aborted = self.second.walk(e, &mut q);
        self.table.decide(&h, h_aborted, &q, q_aborted)
    }

    /// The guards and fields of both tests.
    pub fn parts(&self) -> impl Iterator<Item = (&[Pred], &[Expr])> {
        self.first.parts().chain(self.second.parts())
    }
}

/// Whether `p` holds a [`Pred::Pairs`] node.
pub fn contains_pairs(p: &Pred) -> bool {
    match p {
        Pred::Pairs(_) => true,
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(contains_pairs),
        Pred::Not(q) | Pred::Try(q) => contains_pairs(q),
        Pred::Const(_)
        | Pred::Cmp { .. }
        | Pred::In { .. }
        | Pred::Store { .. }
        | Pred::Guard(_)
        | Pred::Chain(_) => false,
    }
}

/// `p` with every [`Pred::Pairs`] node replaced by its ordered expansion.
pub fn expand_pairs(p: Pred) -> Pred {
    match p {
        Pred::Pairs(pairs) => pairs.expand(),
        Pred::And(ps) => Pred::And(ps.into_iter().map(expand_pairs).collect()),
        Pred::Or(ps) => Pred::Or(ps.into_iter().map(expand_pairs).collect()),
        Pred::Not(q) => Pred::Not(Box::new(expand_pairs(*q))),
        Pred::Try(q) => Pred::Try(Box::new(expand_pairs(*q))),
        other => other,
    }
}

/// For the optimized emitters (classic BPF, eBPF): `filter` with its pair nodes expanded
/// and the whole filter optimized again (module documentation), or `None` when it has
/// none (then `filter` is emitted as it is).
pub fn expanded_optimized(filter: &Filter) -> Option<Filter> {
    if !contains_pairs(&filter.pred) {
        return None;
    }
    let expanded = Filter { pred: expand_pairs(filter.pred.clone()), accept: filter.accept };
    Some(crate::opt::optimize_owned(expanded))
}
