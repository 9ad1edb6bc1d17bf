//! The compiled dispatch: the whole match lowered to one filter IR predicate, clause
//! boundaries marked by [`Pred::Try`] (an abort inside a clause is that clause's false,
//! as it is for the clause's own filter), results in scratch slots.
//!
//! Why `Try` and no more: a clause's test must fail alone, and the optimizer's guard
//! hoisting (`opt::insert_guards`) would otherwise lift a length check out of one clause to
//! where its failure ends the whole dispatch, losing the packets a later clause takes. The
//! optimizer carries the facts from before a `Try` into it, so header tests are shared
//! across clauses by dispatching on the header fields the clauses test (`split`): under
//! `ether[12:2] == 0x800` the IPv6 and ARP clauses' tests are decided false and go.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;

use weir_filter::{opt, CmpOp, Evaluator, Expr, Filter, Pred, Size, ValueSet, SCRATCH_SLOTS};

use crate::{Body, Clause, Program, Test};

/// What dispatch chose for one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Index into [`Program::handlers`]; `None`: no clause matched.
    pub handler: Option<usize>,
    /// The handler's argument values (empty when no clause matched).
    pub args: Vec<u32>,
}

/// A compiled match program: one filter IR predicate for the whole match. Each clause is
/// a [`Pred::Try`] (its test and its arguments' checks optimized together, then its
/// arguments and the handler stored to result slots), so an abort fails that clause only;
/// a nested match is `try(test) and (inner clauses or true)`, which ends dispatch there
/// whether or not an inner clause matched. The handler slot holds the handler's index
/// plus one (0: none).
#[derive(Debug, Clone)]
pub struct Dispatch {
    filter: Filter,
    pub(crate) handler_slot: u8,
    arg_slots: Vec<u8>,
    handlers: Vec<String>,
    arities: Vec<usize>,
}

impl Dispatch {
    /// Lowers the program, with header tests shared across clauses ([`SHARE_DEPTH`]).
    /// Fails only when the clauses leave too few of the [`SCRATCH_SLOTS`] scratch slots
    /// free for the handler index and the arguments.
    pub fn compile(program: &Program) -> Result<Dispatch, String> {
        Dispatch::compile_with(program, SHARE_DEPTH)
    }

    /// [`Dispatch::compile`] with `share` levels of dispatch on header fields (0: the
    /// clauses one after another, each optimized alone; benchmarks compare the two).
    pub fn compile_with(program: &Program, share: u32) -> Result<Dispatch, String> {
        let (free, need, arities) = free_slots(program, 1);
        let Some((&handler_slot, arg_slots)) = free.split_first().filter(|_| free.len() == need)
        else {
            return Err(format!(
                "the match needs {need} free scratch slots (the handler and {} arguments), and \
                 its tests and arguments leave {}",
                need - 1,
                free.len()
            ));
        };
        let slots =
            Slots { handler: handler_slot, args: arg_slots, tag: None, clauses: Cell::new(0) };
        let pred = lower_list(&program.clauses, &slots);
        let pred = if share == 0 {
            opt::optimize_owned(Filter::new(pred)).pred
        } else {
            let shared = opt::optimize_owned(Filter::new(split(
                &mut Vec::new(),
                &pred,
                share,
                SPLIT_CLAUSES,
            )));
            factor(shared.pred)
        };
        Ok(Dispatch {
            filter: Filter::new(pred),
            handler_slot,
            arg_slots: arg_slots.to_vec(),
            handlers: program.handlers.clone(),
            arities,
        })
    }

    /// The handler and arguments for one packet; the same as [`Program::reference`].
    pub fn run(&self, packet: &[u8], wire_len: u32) -> Outcome {
        let none = Outcome { handler: None, args: Vec::new() };
        let mut e = Evaluator::new(packet, wire_len);
        if e.pred(&self.filter.pred) != Ok(true) {
            return none;
        }
        let Ok(h) = e.expr(&Expr::Scratch(self.handler_slot)) else { return none };
        let Some(h) = h.checked_sub(1).map(|h| h as usize) else { return none };
        let arity = self.arities.get(h).copied().unwrap_or(0);
        let args = self
            .arg_slots
            .iter()
            .take(arity)
            .map(|&s| e.expr(&Expr::Scratch(s)).unwrap_or(0))
            .collect();
        Outcome { handler: Some(h), args }
    }

    /// The scratch slots an engine must report after a run that matched, in the order
    /// [`Dispatch::outcome`] reads them: the handler slot, then the argument slots.
    pub fn result_slots(&self) -> Vec<u8> {
        std::iter::once(self.handler_slot).chain(self.arg_slots.iter().copied()).collect()
    }

    /// How many argument slots [`Dispatch::outcome`] reads after the handler slot, by the
    /// handler slot's value (index + 1; 0, no handler: none): the `reads` of
    /// `weir_jit::filter::compile_results_read`, so native code writes only the chosen
    /// handler's own arguments.
    pub fn result_reads(&self) -> Vec<u8> {
        std::iter::once(0)
            .chain(self.arities.iter().map(|&a| u8::try_from(a).unwrap_or(u8::MAX)))
            .collect()
    }

    /// The outcome from an engine's run of [`Dispatch::filter`]: whether the predicate
    /// held, and the values of [`Dispatch::result_slots`] then (in that order; missing
    /// values read as 0). How native code reports a dispatch.
    pub fn outcome(&self, matched: bool, results: &[u32]) -> Outcome {
        let none = Outcome { handler: None, args: Vec::new() };
        let Some(h) = results.first().filter(|_| matched).and_then(|h| h.checked_sub(1)) else {
            return none;
        };
        let h = h as usize;
        let Some(&arity) = self.arities.get(h) else { return none };
        let args = (0..arity).map(|i| results.get(i + 1).copied().unwrap_or(0)).collect();
        Outcome { handler: Some(h), args }
    }

    /// The handler names, as in [`Program::handlers`].
    pub fn handlers(&self) -> &[String] {
        &self.handlers
    }

    /// The one predicate (`weir match --explain`).
    pub fn filter(&self) -> &Filter {
        &self.filter
    }
}

/// Levels of header-field dispatch [`Dispatch::compile`] builds (the EtherType, then the
/// IP protocol, on the usual programs).
pub const SHARE_DEPTH: u32 = 2;

/// At most this many values of one field get a branch of their own.
const SPLIT_VALUES: usize = 4;

/// A field is dispatched on only when at least this many clauses test it: each level
/// optimizes the clauses once per branch, which a field two clauses share does not repay.
const SPLIT_CLAUSES: usize = 3;

/// Sharing header tests across clauses: the dispatch `d` (clause Trys in an `or`),
/// specialized under `prefix` (facts as tests that never abort), split `depth` more levels
/// on the header field the most clauses test against constants. For field `k` of `n`
/// bytes' end and values `v1..vm`:
///
/// ```text
/// (try(guard(n)) and k == v1 and d) or ... or (try(guard(n)) and k == vm and d)
///   or (try(guard(n)) and k not in {v1..vm} and d) or (not try(guard(n)) and d)
/// ```
///
/// each leaf optimized on its own (and then put in a Try), so that the optimizer,
/// which carries the facts before a Try into it, decides every clause's test of `k` in
/// each copy (the copies for other values lose those clauses). Exact: `try(guard(n))` and
/// the tests of `k` after it never abort, exactly one alternative's prefix holds, and `d`
/// is evaluated at most once; when it ends false, the remaining prefixes are false too.
fn split(prefix: &mut Vec<Pred>, d: &Pred, depth: u32, min_clauses: usize) -> Pred {
    let specialized = || {
        let parts = prefix.iter().cloned().chain(std::iter::once(d.clone()));
        opt::optimize_owned(Filter::new(Pred::and(parts))).pred
    };
    // A leaf is optimized alone, as a whole filter, where an abort rejects: the optimizer
    // may have turned `try(guard(n))` into `guard(n)` or hoisted a guard. Inside the
    // `or`, an abort would end the whole dispatch, so the leaf goes in a Try, where it is
    // the leaf's false, as it was (nothing outside the clauses' Trys aborts in the
    // unoptimized leaf, so the Try changes nothing else).
    let leaf = |p: Pred| Pred::Try(Box::new(p));
    if depth == 0 {
        return leaf(specialized());
    }
    let base = specialized();
    let Some(((offset, size), values)) = choose_key(&base, prefix, min_clauses) else {
        return leaf(base);
    };
    let k = Expr::load_at(offset, size);
    let fits = Pred::Try(Box::new(Pred::Guard(offset.saturating_add(size.bytes()))));
    let mut alternatives = Vec::new();
    // The tests that choose a branch stay outside its Try: when the whole is optimized,
    // the facts they establish flow into the branch (the leaf's own copies of them, from
    // optimizing it under the prefix, are then decided and go).
    let branch = |prefix: &mut Vec<Pred>, extra: Vec<Pred>, depth: u32| {
        let before = prefix.len();
        prefix.extend(extra.iter().cloned());
        let inner = split(prefix, d, depth, min_clauses);
        prefix.truncate(before);
        Pred::and(extra.into_iter().chain(std::iter::once(inner)))
    };
    for &v in &values {
        let test = vec![fits.clone(), Pred::eq(k.clone(), v)];
        alternatives.push(branch(prefix, test, depth - 1));
    }
    let others = Pred::not(Pred::In { value: k, set: ValueSet::from_values(values) });
    alternatives.push(branch(prefix, vec![fits.clone(), others], depth - 1));
    alternatives.push(branch(prefix, vec![Pred::not(fits)], 0));
    Pred::Or(alternatives)
}

/// Consecutive clauses that begin with the same test share one evaluation of it:
/// `try(a and b) or try(a and c)` becomes `try(a) and (try(b) or try(c))`, in every `or`
/// of `p` (and again inside the new `or`, for a second shared test). What the header
/// split leaves repeated in a branch's copy of the clauses is mostly such a prefix: the
/// IPv4 clauses of one protocol that test ports all begin with the fragment test, which
/// then runs once instead of once per clause (and the port loads after it sit on one path,
/// where the native code's value numbering shares them).
///
/// Exact when `a` neither reads nor writes scratch slots: then `a` gives the same answer
/// (true, false or abort) each time it is evaluated on one packet, so when it does not
/// hold every clause of the group fails at it, as the `and` does once, and dispatch goes
/// on after the group; when it holds, the clauses' remainders run in their order, the
/// first that holds ending the dispatch as that clause would have.
fn factor(p: Pred) -> Pred {
    match p {
        Pred::Or(parts) => {
            let mut out: Vec<Pred> = Vec::with_capacity(parts.len());
            let mut parts = parts.into_iter().map(factor).peekable();
            while let Some(first) = parts.next() {
                let Some(head) = shared_head(&first).cloned() else {
                    out.push(first);
                    continue;
                };
                let mut group = vec![first];
                while let Some(next) = parts.next_if(|q| shared_head(q) == Some(&head)) {
                    group.push(next);
                }
                if group.len() < 2 {
                    out.extend(group);
                    continue;
                }
                let rests = group.into_iter().map(|q| match q {
                    Pred::Try(inner) => match *inner {
                        Pred::And(mut ps) => {
                            ps.remove(0);
                            Pred::Try(Box::new(Pred::and(ps)))
                        }
                        other => Pred::Try(Box::new(other)),
                    },
                    other => other,
                });
                let rest = factor(Pred::Or(rests.collect()));
                out.push(Pred::And(vec![Pred::Try(Box::new(head)), rest]));
            }
            Pred::Or(out)
        }
        Pred::And(parts) => Pred::And(parts.into_iter().map(factor).collect()),
        Pred::Not(q) => Pred::Not(Box::new(factor(*q))),
        Pred::Try(q) => Pred::Try(Box::new(factor(*q))),
        other => other,
    }
}

/// The first test of a clause `try(a and ...)` (at least two parts) when it can be shared
/// with the next clauses ([`factor`]): it touches no scratch slot.
fn shared_head(p: &Pred) -> Option<&Pred> {
    let Pred::Try(inner) = p else { return None };
    let Pred::And(parts) = inner.as_ref() else { return None };
    parts.first().filter(|a| parts.len() >= 2 && pred_slots(a) == 0)
}

/// The packet field (constant offset, size) that the most clauses (Trys) of `p` compare
/// with constants, at least [`SPLIT_CLAUSES`], and the values they compare it with (the most frequent
/// [`SPLIT_VALUES`]); fields the prefix already tests are left out.
fn choose_key(p: &Pred, prefix: &[Pred], min_clauses: usize) -> Option<((u32, Size), Vec<u32>)> {
    let mut used = BTreeMap::new();
    for q in prefix {
        constants(q, &mut used);
    }
    let mut clauses: BTreeMap<(u32, Size), usize> = BTreeMap::new();
    let mut values: BTreeMap<(u32, Size), BTreeMap<u32, usize>> = BTreeMap::new();
    let mut visit = |q: &Pred| {
        let mut found = BTreeMap::new();
        constants(q, &mut found);
        for (key, vs) in found {
            *clauses.entry(key).or_default() += 1;
            let counts = values.entry(key).or_default();
            for v in vs {
                *counts.entry(v).or_default() += 1;
            }
        }
    };
    for_each_try(p, &mut visit);
    let (&key, _) = clauses
        .iter()
        .filter(|(key, &n)| n >= min_clauses && !used.contains_key(*key))
        .max_by_key(|(&(offset, _), &n)| (n, std::cmp::Reverse(offset)))?;
    let mut vs: Vec<(u32, usize)> = values.remove(&key)?.into_iter().collect();
    vs.sort_by_key(|&(v, n)| (std::cmp::Reverse(n), v));
    let chosen: Vec<u32> = vs.into_iter().take(SPLIT_VALUES).map(|(v, _)| v).collect();
    Some((key, chosen))
}

fn for_each_try(p: &Pred, f: &mut impl FnMut(&Pred)) {
    match p {
        Pred::Try(q) => f(q),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| for_each_try(q, f)),
        Pred::Not(q) => for_each_try(q, f),
        _ => {}
    }
}

/// Fields at constant offsets compared for equality with constants (or members of small
/// sets) anywhere in `p`, with those constants.
fn constants(p: &Pred, out: &mut BTreeMap<(u32, Size), Vec<u32>>) {
    match p {
        Pred::Cmp { op: CmpOp::Eq | CmpOp::Ne, lhs, rhs: Expr::Const(v) } => {
            if let Expr::Load { offset, size } = lhs {
                if let Expr::Const(at) = offset.as_ref() {
                    out.entry((*at, *size)).or_default().push(*v);
                }
            }
        }
        Pred::In { value: Expr::Load { offset, size }, set } => {
            if let Expr::Const(at) = offset.as_ref() {
                let n: u64 = set.ranges().iter().map(|&(lo, hi)| u64::from(hi - lo) + 1).sum();
                if n <= SPLIT_VALUES as u64 {
                    let e = out.entry((*at, *size)).or_default();
                    for &(lo, hi) in set.ranges() {
                        e.extend(lo..=hi);
                    }
                }
            }
        }
        Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| constants(q, out)),
        Pred::Not(q) | Pred::Try(q) => constants(q, out),
        _ => {}
    }
}

struct Slots<'a> {
    handler: u8,
    args: &'a [u8],
    /// For [`unreachable_clauses`] only: a slot each clause stores its number to once its
    /// test has passed (read only where the dispatch then matches, as every result is).
    tag: Option<u8>,
    /// Clauses lowered so far (the next one's number), a clause before those nested in it.
    clauses: Cell<u32>,
}

/// The clauses (numbered in source order, a clause before the clauses nested in it) that
/// the optimizer proves dispatch never chooses: the dispatch lowered as [`Dispatch::compile`]
/// lowers it, each clause also storing its number to a slot of its own once its test has
/// passed, split on header fields and optimized; a clause whose store is gone from every
/// path that ends in a match is one dispatch never ends at (the clauses before it take
/// its packets, the tests around it exclude them, its test cannot pass, or its arguments
/// cannot be computed where it does). Sound as far as the optimizer is (it removes a
/// path only when it proves it dead or failing), not complete: a clause it cannot decide
/// is not reported. Empty when no scratch slot is free for the numbers.
pub fn unreachable_clauses(program: &Program) -> Vec<usize> {
    let (free, need, _) = free_slots(program, 2);
    let [tag, handler, args @ ..] = free.as_slice() else { return Vec::new() };
    if free.len() < need {
        return Vec::new();
    }
    let slots = Slots { handler: *handler, args, tag: Some(*tag), clauses: Cell::new(0) };
    let pred = lower_list(&program.clauses, &slots);
    let total = slots.clauses.get() as usize;
    // Split on any field one clause tests: a proof here may need the EtherType and the
    // protocol known even when only two clauses test them.
    let optimized = opt::optimize_owned(Filter::new(split(&mut Vec::new(), &pred, SHARE_DEPTH, 1)));
    let mut reached = vec![false; total];
    mark_stored(&cut_after_sure(optimized.pred), *tag, &mut reached);
    (0..total).filter(|&k| !reached[k]).collect()
}

/// `p` without the parts of an `or` after a part that surely ends true: dispatch never
/// runs them (a clause without arguments whose test a header split decided true is
/// `try(store and store)`; a nested match is `try(test) and (... or true)`). The optimizer
/// keeps such dead parts (it removes parts after a constant, not after a store); for
/// [`unreachable_clauses`] they would be paths that choose a clause, which they are not.
fn cut_after_sure(p: Pred) -> Pred {
    match p {
        Pred::Or(ps) => {
            let mut kept = Vec::with_capacity(ps.len());
            for q in ps {
                let q = cut_after_sure(q);
                let sure = surely_true(&q);
                kept.push(q);
                if sure {
                    break;
                }
            }
            Pred::Or(kept)
        }
        Pred::And(ps) => Pred::And(ps.into_iter().map(cut_after_sure).collect()),
        Pred::Try(q) => Pred::Try(Box::new(cut_after_sure(*q))),
        Pred::Not(q) => Pred::Not(Box::new(cut_after_sure(*q))),
        p => p,
    }
}

/// Whether `p` ends true on every packet without aborting: `true`, stores of values that
/// cannot abort, `and`s and Trys of those, and `or`s that reach one after parts that
/// cannot abort.
fn surely_true(p: &Pred) -> bool {
    match p {
        Pred::Const(b) => *b,
        Pred::Guard(n) => *n == 0,
        Pred::Store { .. } => !opt::pred_can_abort(p),
        Pred::Try(q) => surely_true(q),
        Pred::And(ps) => ps.iter().all(surely_true),
        Pred::Or(ps) => ps
            .iter()
            .position(surely_true)
            .is_some_and(|i| ps.iter().take(i).all(|q| !opt::pred_can_abort(q))),
        _ => false,
    }
}

/// Marks the constants stored to `slot` anywhere in `p`.
fn mark_stored(p: &Pred, slot: u8, seen: &mut [bool]) {
    match p {
        Pred::Store { slot: s, value: Expr::Const(k) } if *s == slot => {
            if let Some(b) = seen.get_mut(*k as usize) {
                *b = true;
            }
        }
        Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| mark_stored(q, slot, seen)),
        Pred::Not(q) | Pred::Try(q) => mark_stored(q, slot, seen),
        _ => {}
    }
}

/// The scratch slots the clauses leave free for `results` single values and the longest
/// argument list (the highest first, as many as that needs, fewer when the clauses leave
/// fewer), how many that is, and each handler's arity.
fn free_slots(program: &Program, results: usize) -> (Vec<u8>, usize, Vec<usize>) {
    let mut used = 0u32;
    let mut arities = vec![0usize; program.handlers.len()];
    survey(&program.clauses, &mut used, &mut arities);
    let need = results + arities.iter().copied().max().unwrap_or(0);
    let free = (0..SCRATCH_SLOTS).rev().filter(|s| used & (1u32 << s) == 0).take(need).collect();
    (free, need, arities)
}

/// The scratch slots the clauses use, and each handler's arity.
fn survey(clauses: &[Clause], used: &mut u32, arities: &mut [usize]) {
    for c in clauses {
        if let Test::Filter { filter, .. } = &c.test {
            *used |= pred_slots(&filter.pred);
        }
        match &c.body {
            Body::Nested(inner) => survey(inner, used, arities),
            Body::Handler { handler, args } => {
                for a in args {
                    *used |= a.checks.iter().fold(expr_slots(&a.value), |m, p| m | pred_slots(p));
                }
                if let Some(n) = arities.get_mut(*handler) {
                    *n = args.len();
                }
            }
        }
    }
}

fn lower_list(clauses: &[Clause], slots: &Slots<'_>) -> Pred {
    Pred::Or(clauses.iter().map(|c| lower_clause(c, slots)).collect())
}

fn lower_clause(clause: &Clause, slots: &Slots<'_>) -> Pred {
    let test = match &clause.test {
        Test::Otherwise => Pred::Const(true),
        Test::Filter { filter, .. } => filter.pred.clone(),
    };
    let number = slots.clauses.get();
    slots.clauses.set(number.saturating_add(1));
    let tagged = slots.tag.map(|slot| Pred::Store { slot, value: Expr::Const(number) });
    match &clause.body {
        Body::Nested(inner) => {
            let test = opt::optimize_owned(Filter::new(test)).pred;
            Pred::And(vec![
                Pred::Try(Box::new(Pred::and(std::iter::once(test).chain(tagged)))),
                Pred::Or(vec![lower_list(inner, slots), Pred::Const(true)]),
            ])
        }
        Body::Handler { args, .. } if tagged.is_some() => {
            // The test alone, then its number, then the arguments' checks and the stores as
            // [`Dispatch::compile`] has them: a clause whose arguments cannot be computed is
            // still reached (its number stored) when its test can pass.
            let mut body = vec![opt::optimize_owned(Filter::new(test)).pred];
            body.extend(tagged);
            for (a, &slot) in args.iter().zip(slots.args) {
                body.extend(a.checks.iter().cloned());
                body.push(Pred::Store { slot, value: a.value.clone() });
            }
            body.push(Pred::Store { slot: slots.handler, value: Expr::Const(1) });
            Pred::Try(Box::new(Pred::And(body)))
        }
        Body::Handler { handler, args } => {
            // The test and every argument's checks first, optimized together (they share
            // header tests); then the values, then the handler: a store happens only when
            // everything before it held.
            // An argument that uses scratch slots keeps its checks beside its value: the
            // optimizer would take the stores its value reads for dead.
            let private = |a: &&crate::Arg| {
                expr_slots(&a.value) != 0 || a.checks.iter().any(|c| pred_slots(c) != 0)
            };
            let mut parts = vec![test];
            parts
                .extend(args.iter().filter(|a| !private(a)).flat_map(|a| a.checks.iter().cloned()));
            let mut body = vec![opt::optimize_owned(Filter::new(Pred::and(parts))).pred];
            for (a, &slot) in args.iter().zip(slots.args) {
                if private(&a) {
                    body.extend(a.checks.iter().cloned());
                }
                body.push(Pred::Store { slot, value: a.value.clone() });
            }
            let index = u32::try_from(*handler).unwrap_or(u32::MAX).saturating_add(1);
            body.push(Pred::Store { slot: slots.handler, value: Expr::Const(index) });
            Pred::Try(Box::new(Pred::And(body)))
        }
    }
}

fn expr_slots(e: &Expr) -> u32 {
    match e {
        Expr::Const(_) | Expr::WireLen => 0,
        Expr::Scratch(s) => 1u32.checked_shl(u32::from(*s)).unwrap_or(0),
        Expr::Load { offset, .. } => expr_slots(offset),
        Expr::Binary { lhs, rhs, .. } => expr_slots(lhs) | expr_slots(rhs),
        Expr::Neg(a) => expr_slots(a),
    }
}

/// Slots read or written anywhere in `p`.
fn pred_slots(p: &Pred) -> u32 {
    match p {
        Pred::Const(_) | Pred::Guard(_) => 0,
        Pred::Store { slot, value } => {
            1u32.checked_shl(u32::from(*slot)).unwrap_or(0) | expr_slots(value)
        }
        Pred::Cmp { lhs, rhs, .. } => expr_slots(lhs) | expr_slots(rhs),
        Pred::In { value, .. } => expr_slots(value),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().fold(0, |m, q| m | pred_slots(q)),
        Pred::Not(q) | Pred::Try(q) => pred_slots(q),
        Pred::Chain(c) => expr_slots(&c.next) | expr_slots(&c.offset),
        Pred::Pairs(p) => p.parts().fold(0, |m, (guards, fields)| {
            guards.iter().fold(m, |m, g| m | pred_slots(g))
                | fields.iter().fold(0, |m, f| m | expr_slots(f))
        }),
    }
}

impl fmt::Display for Dispatch {
    /// The decision structure (`weir match --explain`): the result slots and the one
    /// predicate, as a tree.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "handler index + 1 in M[{}] (0: no handler)", self.handler_slot)?;
        for (h, (name, arity)) in self.handlers.iter().zip(&self.arities).enumerate() {
            let slots: Vec<String> =
                self.arg_slots.iter().take(*arity).map(|s| format!("M[{s}]")).collect();
            writeln!(f, "  {} = {name}({})", h + 1, slots.join(", "))?;
        }
        writeln!(f, "{:#}", self.filter.pred)
    }
}

#[cfg(test)]
mod tests {
    use super::{cut_after_sure, surely_true};

    /// In an `or`, the parts after one that surely ends true go (that part stays, for its
    /// stores); a part that may be false or may abort before it keeps what follows.
    #[test]
    fn an_or_is_cut_after_a_part_that_surely_holds() {
        let store = |k| Pred::Store { slot: 2, value: Expr::Const(k) };
        let load = Pred::eq(Expr::load_at(40, Size::Byte), 1);
        let tried = |p: Pred| Pred::Try(Box::new(p));
        let sure = tried(Pred::And(vec![store(1), store(2)]));
        let later = tried(Pred::And(vec![load.clone(), store(3)]));
        assert_eq!(
            cut_after_sure(Pred::Or(vec![sure.clone(), later.clone()])),
            Pred::Or(vec![sure.clone()])
        );
        // A nested match's list, `or(try(test and store), true)`, surely holds.
        let nested = Pred::And(vec![store(4), Pred::Or(vec![later.clone(), Pred::Const(true)])]);
        assert!(surely_true(&nested));
        let cut = cut_after_sure(Pred::Or(vec![nested.clone(), later.clone()]));
        assert_eq!(cut, Pred::Or(vec![nested]));
        // Not sure: a store of a load, a test, a test that may abort before a sure part.
        assert!(!surely_true(&Pred::Store { slot: 2, value: Expr::load_at(40, Size::Byte) }));
        let loads = tried(Pred::Store { slot: 2, value: Expr::load_at(40, Size::Byte) });
        assert!(surely_true(&Pred::Or(vec![loads, sure.clone()])));
        assert!(!surely_true(&Pred::Or(vec![load.clone(), sure.clone()])));
        for first in [later.clone(), load.clone()] {
            let whole = Pred::Or(vec![first.clone(), later.clone(), sure.clone(), later.clone()]);
            assert_eq!(cut_after_sure(whole), Pred::Or(vec![first, later.clone(), sure.clone()]));
        }
        // Inside a Try and an and too.
        let inner =
            Pred::And(vec![load.clone(), tried(Pred::Or(vec![sure.clone(), later.clone()]))]);
        let cut = cut_after_sure(inner);
        assert_eq!(cut, Pred::And(vec![load, tried(Pred::Or(vec![sure]))]));
    }

    use super::{factor, Pred};
    use weir_filter::{Evaluator, Expr, Size};

    fn byte_is(at: u32, v: u32) -> Pred {
        Pred::eq(Expr::load_at(at, Size::Byte), v)
    }

    fn clause(parts: Vec<Pred>, handler: u32) -> Pred {
        let store = Pred::Store { slot: 15, value: Expr::Const(handler) };
        Pred::Try(Box::new(Pred::And(parts.into_iter().chain([store]).collect())))
    }

    /// The handler slot after a run, or None when the predicate did not hold.
    fn run(p: &Pred, packet: &[u8]) -> Option<u32> {
        let mut e = Evaluator::new(packet, packet.len() as u32);
        match e.pred(p) {
            Ok(true) => e.expr(&Expr::Scratch(15)).ok(),
            _ => None,
        }
    }

    #[test]
    fn clauses_with_a_common_first_test_share_it_and_choose_the_same_handler() {
        // Byte 0 == 1 opens the first two clauses (and, behind a scratch read, the fourth:
        // that one is not shared); byte 5 == 0 is shared by the second pair, inside. Byte
        // 9 reads past short packets, so some clauses abort.
        let a = byte_is(0, 1);
        let reads_scratch = Pred::eq(Expr::Scratch(3), 0);
        let d = Pred::Or(vec![
            clause(vec![a.clone(), byte_is(1, 2)], 1),
            clause(vec![a.clone(), byte_is(5, 0), byte_is(9, 3)], 2),
            clause(vec![a.clone(), byte_is(5, 0), byte_is(2, 4)], 3),
            clause(vec![reads_scratch.clone(), byte_is(3, 1)], 4),
            clause(vec![reads_scratch, byte_is(4, 1)], 5),
            clause(vec![byte_is(1, 1)], 6),
        ]);
        let f = factor(d.clone());
        let Pred::Or(parts) = &f else { panic!("{f:#}") };
        // The three clauses of `a` became one part; the scratch-reading pair stayed apart.
        assert_eq!(parts.len(), 4, "{f:#}");
        let Pred::And(first) = &parts[0] else { panic!("{f:#}") };
        assert_eq!(first[0], Pred::Try(Box::new(a)), "{f:#}");
        let Pred::Or(inner) = &first[1] else { panic!("{f:#}") };
        assert_eq!(inner.len(), 2, "byte 5 is shared inside: {f:#}");
        // Same choice on every packet of up to 10 bytes over a small alphabet.
        let mut checked = 0;
        for len in 0..=10usize {
            for seed in 0..400u32 {
                let packet: Vec<u8> =
                    (0..len).map(|i| ((seed >> (i % 8)) as u8 ^ i as u8) % 5).collect();
                assert_eq!(run(&f, &packet), run(&d, &packet), "{packet:?}");
                checked += usize::from(run(&d, &packet).is_some());
            }
        }
        assert!(checked > 100, "{checked}");
    }
}
