//! libpcap's "expression rejects all packets": the verdict `pcap_compile` gives, with its
//! optimizer on, when the optimized program is a bare `ret #0`.
//!
//! weir's own optimizer proves more filters empty than libpcap's, so "weir can prove it" is
//! not the criterion; this module reproduces the facts libpcap's optimizer (optimize.c)
//! uses, over the *unoptimized* filter IR (whose control flow is gencode's: `and`/`or`
//! short-circuit left to right, `not` swaps the exits):
//!
//! 1. **Jump threading along a path** (libpcap's `opt_j`/`fold_edge`): a test of a value
//!    already tested on the way is decided when it is the same comparison against the same
//!    operand (same outcome), or an equality with a constant after the same value was found
//!    equal to a different constant (false). Values are compared by what they compute
//!    (libpcap's value numbering): the same load at the same offset and size, the same
//!    arithmetic on the same values, scratch slots read as what the path stored in them.
//!    Only equalities give new facts; `>`/`>=`/`&` are decided only by the very same test.
//! 2. **Comparisons of two plain numbers** (`1 = 0`): libpcap's first optimizer pass knows
//!    the value of an immediate load and decides the jump, so such a test is threaded like
//!    the others.
//! 3. **Folded arithmetic** (`4 - 6 < 0`, `2 * 3 = 7`) is only folded by libpcap's second
//!    pass, which no longer moves jumps: it decides a test only on the chain of tests at the
//!    start of the program (libpcap's `opt_root`). So `2 * 3 = 7 and ip` rejects all
//!    packets, `ip and 2 * 3 = 7` does not.
//!
//! The tests are canonicalised as libpcap's code generator and peephole optimizer shape
//! them: `!=`, `<`, `<=` are `jeq`, `jge`, `jgt` with the exits swapped; `(x & m) = 0` is
//! `jset #m` negated; `(x - a) = b` is `x = a + b`; `jset #0` never holds and
//! `jset #0xffffffff` always does (for a non-constant value).
//!
//! Differences that remain (libpcap's `or_pullup`/`and_pullup` and its block merging are
//! not modelled, nor the few places where weir's lowering shapes a primitive differently from
//! gencode) are counted by the differential test `rejects_all` in tests/differential.rs.
//! The walk is exhaustive over paths with a budget; past the budget the answer is "does not
//! reject all" (the filter is kept: it means the same either way).

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash};

use weir_filter::opt::FastHasher;
use weir_filter::{BinOp, CmpOp, Expr, Filter, Pred};

use crate::Lowered;

/// Whether libpcap's `pcap_compile`, optimizer on, refuses the expression `lowered` came from
/// with "expression rejects all packets": never for expressions libpcap does not optimize
/// (`protochain`), else [`rejects_all`].
pub fn libpcap_rejects_all(lowered: &Lowered) -> bool {
    lowered.libpcap_optimizes && rejects_all(&lowered.filter)
}

/// Path steps explored before giving up (and keeping the filter).
const BUDGET: usize = 50_000;

/// The nodes a graph has room for from the start ([`rejects_all`]).
const GRAPH_ROOM: usize = 32;

/// Whether libpcap's optimizer would reduce `filter` (weir's unoptimized lowering of an
/// expression) to "reject every packet", so that `pcap_compile` refuses it with
/// "expression rejects all packets".
pub fn rejects_all(filter: &Filter) -> bool {
    // Room for an everyday filter's graph (`host 10.0.0.1 and udp` is 20 nodes, `port 22` 25):
    // growing the node table from empty, a copy at each doubling, was a share of the check.
    let mut graph =
        Graph { nodes: Vec::with_capacity(GRAPH_ROOM), distance: Vec::with_capacity(GRAPH_ROOM) };
    let accept = graph.push(Node::Accept);
    let reject = graph.push(Node::Reject);
    let Some(root) = graph.build(&filter.pred, accept, reject, 0) else {
        return false;
    };
    // Tunnels (`geneve`, `vxlan`) keep offsets in scratch memory: libpcap's blocks for them
    // carry register values from block to block, which stops its jump threading (its
    // `use_conflict`); it is not modelled, and such expressions are never refused. A store
    // at the root is a prologue (pflog's payload offset), statements of libpcap's first
    // block that do not stop it: the walk below takes it as a store on every path.
    let prologue = matches!(graph.nodes.get(root), Some(Node::Store { .. })).then_some(root);
    if graph
        .nodes
        .iter()
        .enumerate()
        .any(|(i, n)| matches!(n, Node::Store { .. }) && Some(i) != prologue)
    {
        return false;
    }
    let mut walk = Walk {
        graph: &graph,
        steps: 0,
        // Room for a small filter's walk from the start: growing these tables step by
        // step was a share of the check's time (issue 13).
        seen: Interner::with_capacity(graph.nodes.len()),
        paths: Paths::with_capacity(graph.nodes.len()),
        stack: Vec::with_capacity(graph.nodes.len()),
        values: Values::with_capacity(graph.nodes.len()),
        tests: vec![None; graph.nodes.len()],
    };
    // libpcap's second pass folds constant arithmetic and decides the tests at the root.
    let mut node = root;
    let mut state = State::default();
    loop {
        match graph.nodes.get(node) {
            Some(Node::Store { slot, value, next }) => {
                let v = walk.values.resolve(&state, value);
                state.store(*slot, walk.values.number(v));
                node = *next;
            }
            Some(Node::Test { lhs, op, rhs, t, f }) => {
                let (l, r) = (walk.values.resolve(&state, lhs), walk.values.resolve(&state, rhs));
                match walk.can_accept(node, &state) {
                    Some(false) => return true,
                    None => return false,
                    Some(true) => {}
                }
                match fold(&l).zip(fold(&r)) {
                    Some((a, b)) => node = if compare(*op, a, b) { *t } else { *f },
                    None => return false,
                }
            }
            Some(Node::Accept) | None => return false,
            Some(Node::Reject) => return true,
        }
    }
}

type NodeId = usize;

/// The filter's expressions are borrowed, not copied: a large filter's graph is built to
/// the budget before the walk gives up on it.
enum Node<'a> {
    Accept,
    Reject,
    Test { lhs: Cow<'a, Expr>, op: CmpOp, rhs: Cow<'a, Expr>, t: NodeId, f: NodeId },
    Store { slot: u8, value: &'a Expr, next: NodeId },
}

struct Graph<'a> {
    nodes: Vec<Node<'a>>,
    /// Per node, its fewest steps to the accepting exit over the graph's edges, whatever
    /// the tests give ([`UNREACHABLE`] when no edge path leads there; see [`Graph::push`]).
    distance: Vec<u32>,
}

/// The distance of a node nothing connects to the accepting exit.
const UNREACHABLE: u32 = u32::MAX;

impl<'a> Graph<'a> {
    /// Adds `node`, with its distance to the accepting exit. The graph is built from its
    /// exits backwards: every edge leads to a node pushed before (a test's exits, a
    /// store's next, are built first), so the fewest steps from `node` are one more than
    /// its nearer target's, known already: the same distances as a breadth-first walk
    /// back from the exit, without the walk (its predecessor lists and queue were a
    /// fifth of a small filter's check, issue 13). A target not pushed yet (none is, by
    /// construction) is taken as reaching the exit: that only explores more.
    fn push(&mut self, node: Node<'a>) -> NodeId {
        let target = |to: NodeId| match self.distance.get(to) {
            Some(d) => d.saturating_add(1),
            None => 1,
        };
        let distance = match &node {
            Node::Accept => 0,
            Node::Reject => UNREACHABLE,
            Node::Test { t, f, .. } => target(*t).min(target(*f)),
            Node::Store { next, .. } => target(*next),
        };
        self.nodes.push(node);
        self.distance.push(distance);
        self.nodes.len() - 1
    }

    /// The entry of `p`'s code, which continues at `t` when it holds and `f` when not
    /// (`None` when the filter is too deep or too big to analyse).
    fn build(&mut self, p: &'a Pred, t: NodeId, f: NodeId, depth: usize) -> Option<NodeId> {
        if depth > 2_000 || self.nodes.len() > BUDGET {
            return None;
        }
        Some(match p {
            Pred::Const(true) => t,
            Pred::Const(false) => f,
            Pred::Cmp { op, lhs, rhs } => {
                let (lhs, rhs) = (Cow::Borrowed(lhs), Cow::Borrowed(rhs));
                self.push(Node::Test { lhs, op: *op, rhs, t, f })
            }
            Pred::In { value, set } => {
                // gencode's chain of tests, one per value (a range is `>= lo and <= hi`).
                let mut entry = f;
                for &(lo, hi) in set.ranges().iter().rev() {
                    entry = if lo == hi {
                        let (lhs, rhs) = (Cow::Borrowed(value), Cow::Owned(Expr::Const(lo)));
                        self.push(Node::Test { lhs, op: CmpOp::Eq, rhs, t, f: entry })
                    } else {
                        let (lhs, rhs) = (Cow::Borrowed(value), Cow::Owned(Expr::Const(hi)));
                        let upper = self.push(Node::Test { lhs, op: CmpOp::Le, rhs, t, f: entry });
                        let (lhs, rhs) = (Cow::Borrowed(value), Cow::Owned(Expr::Const(lo)));
                        self.push(Node::Test { lhs, op: CmpOp::Ge, rhs, t: upper, f: entry })
                    };
                }
                entry
            }
            Pred::And(parts) => {
                let mut entry = t;
                for part in parts.iter().rev() {
                    entry = self.build(part, entry, f, depth + 1)?;
                }
                entry
            }
            Pred::Or(parts) => {
                let mut entry = f;
                for part in parts.iter().rev() {
                    entry = self.build(part, t, entry, depth + 1)?;
                }
                entry
            }
            Pred::Not(inner) => self.build(inner, f, t, depth + 1)?,
            Pred::Store { slot, value } => self.push(Node::Store { slot: *slot, value, next: t }),
            // Never in lowered code; a guard is a length check, not a packet test.
            Pred::Guard(_) => t,
            // libpcap never optimizes a protochain (see `Lowered::libpcap_optimizes`).
            Pred::Chain(_) => return None,
            // Never in lowered code (pfmatch's clauses); not libpcap's to judge.
            Pred::Try(_) => return None,
            // A long pair list (`fuse`): the table stands for thousands of terms; not
            // analysed, as a list too big for the budget would not be.
            Pred::Pairs(_) => return None,
        })
    }
}

/// Keys an [`Interner`] searches one by one before it builds a hash index of them.
const LINEAR_KEYS: usize = 16;

/// Distinct keys numbered in the order they were first met (key `i` is number `i`): the
/// check's value numbers, fact lists and visited pairs. Up to [`LINEAR_KEYS`] keys a key is
/// looked for by comparing it with each; past them a hash index is built and kept. An
/// everyday filter's check meets a few keys per table, fewer than that: comparing them
/// costs less than hashing the key, and the three hash tables a check allocated (then
/// freed) were a share of its time (issue 13).
struct Interner<K> {
    keys: Vec<K>,
    /// Each key's number, once there are more than [`LINEAR_KEYS`] keys.
    index: Option<HashMap<K, usize, BuildHasherDefault<FastHasher>>>,
}

impl<K: Clone + Eq + Hash> Interner<K> {
    fn with_capacity(n: usize) -> Interner<K> {
        Interner { keys: Vec::with_capacity(n), index: None }
    }

    /// `key`'s number, and whether it is new (numbered now).
    fn intern(&mut self, key: K) -> (usize, bool) {
        let next = self.keys.len();
        if let Some(index) = &mut self.index {
            // One hash and probe per key, found or new.
            return match index.entry(key) {
                Entry::Occupied(known) => (*known.get(), false),
                Entry::Vacant(new) => {
                    self.keys.push(new.key().clone());
                    new.insert(next);
                    (next, true)
                }
            };
        }
        if let Some(known) = self.keys.iter().position(|k| *k == key) {
            return (known, false);
        }
        self.keys.push(key);
        if self.keys.len() > LINEAR_KEYS {
            let mut index = HashMap::with_capacity_and_hasher(
                2 * self.keys.len(),
                BuildHasherDefault::default(),
            );
            index.extend(self.keys.iter().cloned().zip(0..));
            self.index = Some(index);
        }
        (next, true)
    }

    fn get(&self, id: usize) -> Option<&K> {
        self.keys.get(id)
    }

    /// Forgets every key (keeping the tables' room).
    fn clear(&mut self) {
        self.keys.clear();
        if let Some(index) = &mut self.index {
            index.clear();
        }
    }
}

/// A value number: expressions equal as trees get the same number ([`Values`]).
type ValueId = usize;

/// Value numbering (libpcap's optimizer numbers values too): each distinct expression the
/// check meets gets one number, so that the facts of a path are a few numbers, copied,
/// compared and hashed without walking (or allocating) expression trees. Copying and
/// hashing the trees of every path state was most of the check's time (issue 13).
struct Values<'g> {
    exprs: Interner<Cow<'g, Expr>>,
}

impl<'g> Values<'g> {
    /// Room for about `n` values (a test node's two operands are often a value met
    /// before and a constant): growing the tables was a share of a small filter's check.
    fn with_capacity(n: usize) -> Values<'g> {
        Values { exprs: Interner::with_capacity(n) }
    }

    fn number(&mut self, e: Cow<'g, Expr>) -> ValueId {
        self.exprs.intern(e).0
    }

    /// The constant value `id` numbers, if it is one (read from the expression: a table of
    /// them beside it was one more allocation per check, issue 13).
    fn constant(&self, id: ValueId) -> Option<u32> {
        match self.exprs.get(id).map(AsRef::as_ref) {
            Some(Expr::Const(c)) => Some(*c),
            _ => None,
        }
    }

    /// `e` with every scratch slot read replaced by what `state`'s path stored there
    /// (`e` itself, borrowed, when the path stored nothing).
    fn resolve<'e>(&self, state: &State, e: &'e Expr) -> Cow<'e, Expr> {
        if state.scratch.is_empty() {
            return Cow::Borrowed(e);
        }
        Cow::Owned(self.substituted(state, e))
    }

    fn substituted(&self, state: &State, e: &Expr) -> Expr {
        match e {
            Expr::Scratch(slot) => state
                .scratch
                .iter()
                .find(|(s, _)| s == slot)
                .and_then(|&(_, id)| self.exprs.get(id))
                .map_or_else(|| e.clone(), |v| v.as_ref().clone()),
            Expr::Const(_) | Expr::WireLen => e.clone(),
            Expr::Load { offset, size } => Expr::load(self.substituted(state, offset), *size),
            Expr::Binary { op, lhs, rhs } => {
                Expr::binary(*op, self.substituted(state, lhs), self.substituted(state, rhs))
            }
            Expr::Neg(inner) => Expr::Neg(Box::new(self.substituted(state, inner))),
        }
    }

    /// The canonical jump for `lhs op rhs` (already resolved) and whether its exits are
    /// swapped.
    fn canonical(&mut self, lhs: Cow<'g, Expr>, op: CmpOp, rhs: Cow<'g, Expr>) -> (Test, bool) {
        let (code, negated) = match op {
            CmpOp::Eq => (Code::Jeq, false),
            CmpOp::Ne => (Code::Jeq, true),
            CmpOp::Gt => (Code::Jgt, false),
            CmpOp::Le => (Code::Jgt, true),
            CmpOp::Ge => (Code::Jge, false),
            CmpOp::Lt => (Code::Jge, true),
            CmpOp::Set => (Code::Jset, false),
        };
        if code == Code::Jeq {
            if let (Expr::Binary { op, rhs: b, .. }, Expr::Const(k)) = (&*lhs, &*rhs) {
                let k = *k;
                match (op, &**b) {
                    // sub #x; jeq #y  ->  jeq #(x + y)
                    (BinOp::Sub, Expr::Const(x)) => {
                        let operand = self.number(Cow::Owned(Expr::Const(x.wrapping_add(k))));
                        let value = self.number(binary_lhs(lhs));
                        return (Test { value, code, operand }, negated);
                    }
                    // and #m; jeq #0  ->  jset #m, exits swapped
                    (BinOp::And, Expr::Const(m)) if k == 0 => {
                        let operand = self.number(Cow::Owned(Expr::Const(*m)));
                        let value = self.number(binary_lhs(lhs));
                        return (Test { value, code: Code::Jset, operand }, !negated);
                    }
                    _ => {}
                }
            }
        }
        let (value, operand) = (self.number(lhs), self.number(rhs));
        (Test { value, code, operand }, negated)
    }
}

/// The left operand of a binary expression (the expression itself otherwise).
fn binary_lhs(e: Cow<'_, Expr>) -> Cow<'_, Expr> {
    match e {
        Cow::Borrowed(Expr::Binary { lhs, .. }) => Cow::Borrowed(lhs),
        Cow::Owned(Expr::Binary { lhs, .. }) => Cow::Owned(*lhs),
        other => other,
    }
}

/// A jump as libpcap's optimizer sees it: the value in A, the jump code and its operand
/// (value numbers).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Test {
    value: ValueId,
    code: Code,
    operand: ValueId,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Code {
    Jeq,
    Jgt,
    Jge,
    Jset,
}

/// The value each scratch slot holds on the path to a node of the root's chain (the
/// prologue's stores: no other store is walked, see [`rejects_all`]).
#[derive(Clone, Default)]
struct State {
    scratch: Vec<(u8, ValueId)>,
}

impl State {
    fn store(&mut self, slot: u8, value: ValueId) {
        self.scratch.retain(|(s, _)| *s != slot);
        self.scratch.push((slot, value));
    }
}

/// The outcomes of canonical tests a path learnt, in the order it learnt them, named by
/// one number: [`Paths::EMPTY`] or an entry of [`Paths`].
type FactsId = u32;

/// Every fact list the walks meet, interned: a list is the list it extends plus one
/// outcome, and the same extension of the same list is given the same number, so two
/// paths know the same facts in the same order exactly when their numbers are equal. The
/// visited set then holds (node, number) pairs, compared exactly, and a path's facts are
/// neither copied per branch nor hashed whole per step (a `Vec` per state, cloned at each
/// undecided test and SipHashed at each step, was most of the walk's time: issue 13).
struct Paths {
    /// Per number: the list it extends and the outcome it adds.
    entries: Interner<(FactsId, Test, bool)>,
}

impl Paths {
    /// The list of no facts.
    const EMPTY: FactsId = FactsId::MAX;

    fn with_capacity(n: usize) -> Paths {
        Paths { entries: Interner::with_capacity(n) }
    }

    /// The number of `facts` extended by `test`'s `outcome` (`None` past `u32` entries).
    fn extend(&mut self, facts: FactsId, test: Test, outcome: bool) -> Option<FactsId> {
        let (id, _) = self.entries.intern((facts, test, outcome));
        FactsId::try_from(id).ok().filter(|&id| id != Self::EMPTY)
    }

    /// The outcome of `test` libpcap's first pass knows on a path that learnt `facts`, if
    /// any. The facts are visited newest first; the order does not matter, as no two facts
    /// of one path answer a test differently: a fact is only learnt by a test nothing on
    /// its path decided, and every way two facts could disagree on a later test would
    /// have decided the later fact's own test.
    fn decide(&self, facts: FactsId, test: &Test, values: &Values<'_>) -> Option<bool> {
        let operand = values.constant(test.operand);
        if let (Some(a), Some(b)) = (values.constant(test.value), operand) {
            return Some(match test.code {
                Code::Jeq => a == b,
                Code::Jgt => a > b,
                Code::Jge => a >= b,
                Code::Jset => a & b != 0,
            });
        }
        if test.code == Code::Jset {
            match operand {
                Some(0) => return Some(false),
                Some(u32::MAX) => return Some(true),
                _ => {}
            }
        }
        let mut at = facts;
        while let Some(&(before, known, outcome)) = self.entries.get(at as usize) {
            at = before;
            if known.value != test.value || known.code != test.code {
                continue;
            }
            if known.operand == test.operand {
                return Some(outcome);
            }
            if outcome
                && test.code == Code::Jeq
                && values.constant(known.operand).is_some()
                && operand.is_some()
            {
                return Some(false);
            }
        }
        None
    }
}

/// The walk reads the graph's distances to the accepting exit ([`Graph::distance`]):
/// successors that cannot reach it are not explored (whatever the facts, they cannot
/// accept), and of two successors the nearer is explored first, so an accepting path, when
/// there is one, is usually the first path tried (a long list of alternatives, each of which
/// can accept, is otherwise explored to its end along every branch before the first
/// alternative's other outcome).
struct Walk<'g, 'a> {
    graph: &'g Graph<'a>,
    steps: usize,
    /// The (node, facts) pairs explored in this walk.
    seen: Interner<(NodeId, FactsId)>,
    paths: Paths,
    /// The walk's pending (node, facts) pairs (kept from walk to walk for its room).
    stack: Vec<(NodeId, FactsId)>,
    values: Values<'g>,
    /// Per test node, its canonical jump on a path that stored nothing (then it is the
    /// same on every such path), once computed.
    tests: Vec<Option<(Test, bool)>>,
}

impl<'g> Walk<'g, '_> {
    /// Whether some path from `node` with `state` reaches the accepting exit (`None` past
    /// the budget).
    fn can_accept(&mut self, node: NodeId, state: &State) -> Option<bool> {
        self.seen.clear();
        if !self.reaches(node) {
            return Some(false);
        }
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        stack.push((node, Paths::EMPTY));
        let found = self.search(&mut stack, state);
        self.stack = stack;
        found
    }

    /// [`Walk::can_accept`]'s depth-first search from the pairs on `stack`, every path
    /// holding `state`'s scratch values.
    fn search(&mut self, stack: &mut Vec<(NodeId, FactsId)>, state: &State) -> Option<bool> {
        while let Some((node, facts)) = stack.pop() {
            self.steps += 1;
            if self.steps > BUDGET {
                return None;
            }
            if !self.seen.intern((node, facts)).1 {
                continue;
            }
            let graph = self.graph;
            match graph.nodes.get(node) {
                Some(Node::Accept) => return Some(true),
                Some(Node::Reject) | None => {}
                // Only the root can be a store that is walked (the prologue), and no edge
                // leads back to the root.
                Some(Node::Store { .. }) => return None,
                Some(Node::Test { lhs, op, rhs, t, f }) => {
                    let (test, negated) = self.test(node, lhs, *op, rhs, state);
                    let (on_true, on_false) = if negated { (*f, *t) } else { (*t, *f) };
                    let next = match self.paths.decide(facts, &test, &self.values) {
                        Some(true) => [Some((on_true, facts)), None],
                        Some(false) => [Some((on_false, facts)), None],
                        None => {
                            let taken = (on_true, self.paths.extend(facts, test, true)?);
                            let not_taken = (on_false, self.paths.extend(facts, test, false)?);
                            // Popped last-in first: the nearer successor goes on top.
                            if self.distance_of(on_true) <= self.distance_of(on_false) {
                                [Some(not_taken), Some(taken)]
                            } else {
                                [Some(taken), Some(not_taken)]
                            }
                        }
                    };
                    for (to, facts) in next.into_iter().flatten() {
                        if self.reaches(to) {
                            stack.push((to, facts));
                        }
                    }
                }
            }
        }
        Some(false)
    }
}

impl<'g> Walk<'g, '_> {
    /// The canonical jump of test node `node` (`lhs op rhs`) on `state`'s path.
    fn test(
        &mut self,
        node: NodeId,
        lhs: &'g Expr,
        op: CmpOp,
        rhs: &'g Expr,
        state: &State,
    ) -> (Test, bool) {
        let fixed = state.scratch.is_empty();
        if let Some(&Some(test)) = self.tests.get(node).filter(|_| fixed) {
            return test;
        }
        let (l, r) = (self.values.resolve(state, lhs), self.values.resolve(state, rhs));
        let test = self.values.canonical(l, op, r);
        if let Some(slot) = self.tests.get_mut(node).filter(|_| fixed) {
            *slot = Some(test);
        }
        test
    }

    fn distance_of(&self, node: NodeId) -> u32 {
        self.graph.distance.get(node).copied().unwrap_or(UNREACHABLE)
    }

    fn reaches(&self, node: NodeId) -> bool {
        self.distance_of(node) != UNREACHABLE
    }
}

/// The constant `e` folds to (libpcap's second pass), if any.
fn fold(e: &Expr) -> Option<u32> {
    Some(match e {
        Expr::Const(c) => *c,
        Expr::WireLen | Expr::Load { .. } | Expr::Scratch(_) => return None,
        Expr::Neg(inner) => fold(inner)?.wrapping_neg(),
        Expr::Binary { op, lhs, rhs } => {
            // libpcap's opt_stmt: a 0 in A makes `* / % & << >>` 0 whatever X holds, and a
            // constant 0 operand makes `*` and `&` 0 (the other operand's loads dropped).
            let (l, r) = (fold(lhs), fold(rhs));
            let zeroes = match (l, r) {
                (Some(0), _) => {
                    matches!(
                        op,
                        BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::And | BinOp::Shl | BinOp::Shr
                    )
                }
                (_, Some(0)) => matches!(op, BinOp::Mul | BinOp::And),
                _ => false,
            };
            if zeroes {
                return Some(0);
            }
            let (a, b) = (l?, r?);
            match op {
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::Div => a.checked_div(b)?,
                BinOp::Mod => a.checked_rem(b)?,
                BinOp::And => a & b,
                BinOp::Or => a | b,
                BinOp::Xor => a ^ b,
                BinOp::Shl => a.checked_shl(b).unwrap_or(0),
                BinOp::Shr => a.checked_shr(b).unwrap_or(0),
            }
        }
    })
}

fn compare(op: CmpOp, a: u32, b: u32) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Set => a & b != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::NameDb;
    use crate::{lower, parse, LinkType, Options};
    use weir_testkit::filter_gen::FilterGen;

    /// Each node's fewest steps to `accept`, by relaxing every edge until nothing changes:
    /// slow, and right whatever order the nodes were pushed in.
    fn relaxed(graph: &Graph<'_>, accept: NodeId) -> Vec<u32> {
        let mut distance = vec![UNREACHABLE; graph.nodes.len()];
        distance[accept] = 0;
        loop {
            let mut changed = false;
            for (i, node) in graph.nodes.iter().enumerate() {
                let targets = match node {
                    Node::Test { t, f, .. } => vec![*t, *f],
                    Node::Store { next, .. } => vec![*next],
                    Node::Accept | Node::Reject => vec![],
                };
                for to in targets {
                    let through = distance[to].saturating_add(1);
                    if through < distance[i] {
                        distance[i] = through;
                        changed = true;
                    }
                }
            }
            if !changed {
                return distance;
            }
        }
    }

    /// An [`Interner`] numbers keys as a map from each key to the count of distinct keys
    /// before its first occurrence would, below [`LINEAR_KEYS`] keys (compared one by one),
    /// past them (hashed) and after a clear (hashed, from 0 again); every key meets
    /// itself again in both modes.
    #[test]
    fn interner_numbers_keys_in_first_met_order_in_both_modes() {
        // Repeats among the first keys (found by comparing), then every key, then a
        // scrambled sequence of them (found by hashing).
        let scrambled = (0..400u32).map(|i| i.wrapping_mul(2_654_435_761));
        let keys: Vec<u32> = (0..8u32)
            .cycle()
            .take(24)
            .chain(0..3 * LINEAR_KEYS as u32)
            .chain(scrambled.map(|k| k % (3 * LINEAR_KEYS as u32)))
            .collect();
        let mut interner = Interner::with_capacity(4);
        for round in 0..2 {
            let mut reference: HashMap<u32, usize> = HashMap::new();
            let (mut linear, mut hashed) = (0, 0);
            for &k in &keys {
                let expected_new = !reference.contains_key(&k);
                let next = reference.len();
                let expected = *reference.entry(k).or_insert(next);
                let was_hashed = interner.index.is_some();
                assert_eq!(interner.intern(k), (expected, expected_new), "round {round} key {k}");
                assert_eq!(interner.get(expected), Some(&k));
                if !expected_new {
                    *if was_hashed { &mut hashed } else { &mut linear } += 1;
                }
            }
            assert_eq!(interner.keys.len(), 3 * LINEAR_KEYS, "round {round}");
            assert!(interner.index.is_some(), "round {round}: never hashed");
            // The first round finds keys again by comparing them, then by hashing; the
            // second is hashed throughout (the index survives the clear).
            assert!(hashed > 100 && (round == 1 || linear > 0), "{round}: {linear} {hashed}");
            interner.clear();
            assert_eq!((interner.keys.len(), interner.get(0)), (0, None));
        }
    }

    /// The distances set as nodes are pushed ([`Graph::push`]) against [`relaxed`], on
    /// random filter IR and on lowered expressions; the graphs must show nodes far from the
    /// exit and nodes cut off from it, or the check proved little.
    #[test]
    fn pushed_distances_are_the_fewest_steps_to_accept() {
        let check = |pred: &Pred, far: &mut usize, cut_off: &mut usize| -> bool {
            let mut graph = Graph { nodes: Vec::new(), distance: Vec::new() };
            let accept = graph.push(Node::Accept);
            let reject = graph.push(Node::Reject);
            if graph.build(pred, accept, reject, 0).is_none() {
                return false;
            }
            assert_eq!(graph.distance, relaxed(&graph, accept), "{pred}");
            *far += graph.distance.iter().filter(|&&d| d > 2 && d != UNREACHABLE).count();
            *cut_off += graph.distance.iter().skip(2).filter(|&&d| d == UNREACHABLE).count();
            true
        };
        let (mut far, mut cut_off, mut graphs) = (0, 0, 0);
        let mut gen = FilterGen::new(0x22_d15);
        for _ in 0..4_000 {
            graphs += usize::from(check(&gen.filter().pred, &mut far, &mut cut_off));
        }
        let names = NameDb::builtin();
        for expr in [
            "host 10.0.0.1 and udp",
            "port 22",
            "tcp[tcpflags] & tcp-syn != 0",
            "not (tcp or udp) and ip",
            "portrange 100-200 or icmp",
            "ip and not ip",
            "vlan and (host 10.0.0.1 or port 53)",
        ] {
            let ast = parse(expr).expect(expr);
            let filter =
                lower(ast.as_ref(), &Options::new(LinkType::Ethernet), &names).expect(expr);
            graphs += usize::from(check(&filter.pred, &mut far, &mut cut_off));
        }
        println!(
            "{graphs} graphs, {far} nodes more than two steps from the exit, {cut_off} cut off"
        );
        assert!(graphs > 2_000 && far > 1_000 && cut_off > 100, "{graphs} {far} {cut_off}");
    }
}
