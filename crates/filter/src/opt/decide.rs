//! The path-sensitive pass: walks the filter in evaluation order carrying the facts that hold
//! at each point ([`Env`]), and
//!
//! - replaces tests decided by those facts (`ether[12:2] == 0x800 and ... and
//!   ether[12:2] == 0x800`: the second is true; `... == 0x86dd` would be false), and
//!   expressions whose value is known (constant propagation through scratch slots too);
//! - merges runs of range tests on the same value into one set test ([`super::sets`]);
//! - removes guards already implied by the captured length known on the path.
//!
//! # When may a test be removed or moved?
//!
//! A predicate has three outcomes: true, false and abort. Where a node sits decides which of
//! them must be kept apart ([`Mode`]): at the top of a filter false and abort both reject;
//! under `not` false and abort differ (`not false` accepts). A test decided to be `v` by the
//! facts becomes the constant `v` when it cannot abort (its loads are known in bounds), or
//! when the mode makes its possible abort equivalent to `v`.
//!
//! Tests inside an `and` (dually `or`) may be reordered when none of them can abort or write
//! scratch: then the junction is plain logic, and order does not matter. The first test of
//! such a run may abort; it stays first, and later tests on the same value merge into it
//! (the merged test aborts exactly when the first one did).

use super::analysis::has_store;
use super::domain::Domain;
use super::env::{Atoms, Changes, Env, Facts, Learned};
use super::fold;
use super::sets::{merge_runs, set_key};
use crate::ir::{CmpOp, Expr, Pred, ValueSet};

/// Which outcomes of a node lead to the same final verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// True, false and abort must all be kept.
    Exact,
    /// False and abort are interchangeable (both end in a reject): the top of a filter.
    FalseIsAbort,
    /// True and abort are interchangeable (under a `not` at the top).
    TrueIsAbort,
}

impl Mode {
    pub fn negated(self) -> Mode {
        match self {
            Mode::Exact => Mode::Exact,
            Mode::FalseIsAbort => Mode::TrueIsAbort,
            Mode::TrueIsAbort => Mode::FalseIsAbort,
        }
    }

    /// The mode of a part of a junction that is not its last: the part's "stop" outcome
    /// (false in an `and`) is the junction's, its "go on" outcome is not.
    pub fn inner(self, conjunction: bool) -> Mode {
        match (self, conjunction) {
            (Mode::FalseIsAbort, true) => Mode::FalseIsAbort,
            (Mode::TrueIsAbort, false) => Mode::TrueIsAbort,
            _ => Mode::Exact,
        }
    }

    /// Whether an outcome `v` may stand in for "`v` or abort".
    fn absorbs(self, v: bool) -> bool {
        matches!((self, v), (Mode::FalseIsAbort, false) | (Mode::TrueIsAbort, true))
    }
}

/// Which exits' facts the caller will use (computing facts costs; long `or` chains at the
/// top of a filter never need the facts on their true exit, for instance).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Want {
    pub on_true: bool,
    pub on_false: bool,
}

impl Want {
    const NONE: Want = Want { on_true: false, on_false: false };

    fn negated(self) -> Want {
        Want { on_true: self.on_false, on_false: self.on_true }
    }
}

/// A rewritten predicate with the facts on its exits (`None`: not asked for), and whether
/// each exit can be taken at all.
struct Walked {
    pred: Pred,
    on_true: Option<Env>,
    on_false: Option<Env>,
    can_be_true: bool,
    can_be_false: bool,
    /// Whether `pred` may abort at the walk's entry ([`Facts::pred_can_abort`] there), when
    /// the walk found it out on its way (a leaf test asks it of its operands); `None`: not
    /// known. The junction's [`Parts::push`] then does not ask again (issue 13,
    /// compile-33: `port 22`'s IPv4 port tests, loads at the header length, were each asked
    /// twice at one environment, ~1,500 instructions a time).
    pred_aborts: Option<bool>,
}

impl Walked {
    fn negated(self) -> Walked {
        Walked {
            pred: match self.pred {
                Pred::Const(b) => Pred::Const(!b),
                other => fold::negate(other),
            },
            on_true: self.on_false,
            on_false: self.on_true,
            can_be_true: self.can_be_false,
            can_be_false: self.can_be_true,
            pred_aborts: None,
        }
    }
}

/// Runs the pass on a whole filter; `reads` are the scratch slots some expression reads
/// (a store to any other slot is dead).
pub(crate) fn decide(p: Pred, reads: u32) -> Pred {
    decide_certifying(p, reads, &mut Atoms::default()).0
}

/// [`decide`] with the atoms of the compile's earlier walks (see [`Facts::with_atoms`]; the
/// ones this walk interns are added), and whether the walk made no choice that a guard could turn: no
/// choice went the way it did because a load (or a guard) might fail where a longer
/// captured length known on the path would have made it safe, in a place where the other
/// way would have changed the output. The choices are: a decided test kept for its possible
/// abort ([`test`]); a guard kept because the length known is shorter; a dead store kept for
/// its value's possible abort; a known value not substituted because evaluating it may
/// abort ([`Facts::substitute`]); an absorbed junction kept because an earlier part may
/// abort; and a run of a junction ended by a part that may abort, in a junction where two
/// parts test one value (only then could a longer run merge more).
///
/// What it is for: when the walk also left its input as it was (`decide(p) == p`), and
/// `insert_guards` then adds guards, a second walk over the guarded tree differs from this
/// one only where the guards' longer known length turns an abort answer, and none of those
/// answers changed anything here: the second walk would give the guarded tree back (the
/// optimizer skips it; crates/filter/tests/opt.rs and crates/pflang/tests/opt_shortcuts.rs
/// compare with every walk run). A clear answer alone says nothing about a walk that
/// changed its input (a second walk over the output could merge or drop more).
///
/// It also says whether the walk's only changes were parts dropped as decided without a
/// possible abort ([`Report::drops_only`]: `host A and udp`, whose `ip6` branch the facts of
/// `host A` rule out, bench/records/2026-11-30-compile-14.txt). Such a walk, clear too,
/// certifies its output as a walk that changed nothing would: a walk of the output sees at
/// every part left the facts this one saw (each drop is checked to leave the facts after it
/// as they were before it), and what differs for a part left is its mode (a drop can leave it
/// last or alone in its junction, or splice it into the outer one) and the facts asked of
/// its exits (fewer, never more). Every choice the mode turns is a change or an abort choice
/// here (a decided test that may abort, an always aborting node, a guard, an absorbed
/// junction that kept parts before its constant), and so is a merge or a run that splicing
/// (with its weaker bases) could have turned: none of them was made.
pub(crate) fn decide_certifying(p: Pred, reads: u32, atoms: &mut Atoms) -> (Pred, Report) {
    walk_whole(p, reads, atoms, Shortcuts::ALL)
}

/// Shortcuts of a `decide` walk that change no result, each off only in the tests that
/// compare the walk with it and without (crates/filter/tests/opt.rs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shortcuts {
    /// See [`walk_whole`].
    pub summarize_stores: bool,
    /// A junction takes a leaf's abort answer from its walk ([`Walked::pred_aborts`]) rather
    /// than asking [`Facts::pred_can_abort`] again at the same environment.
    pub reuse_walked_aborts: bool,
}

impl Shortcuts {
    pub const ALL: Shortcuts = Shortcuts { summarize_stores: true, reuse_walked_aborts: true };
}

/// [`decide_certifying`]; `summarize_stores`: a tree without a store is told so to the walk
/// ([`Facts::set_store_free`]), which then does not ask each part it keeps whether it
/// stores. No pass writes a store where there was none, so no part of such a tree has one
/// (issue 13, compile-29: `has_store` walked each part's subtree at every level, about 1,000
/// instructions per walk of `host A and udp`). Without it every part is asked (the tests
/// compare the two: crates/filter/tests/opt.rs).
fn walk_whole(p: Pred, reads: u32, atoms: &mut Atoms, shortcuts: Shortcuts) -> (Pred, Report) {
    // A Try's stores are results read after the run (pfmatch's handler and arguments):
    // never dead, though nothing in the filter reads them.
    let (try_slots, any_store) = stores_of(&p);
    let mut facts = Facts::with_atoms(reads | try_slots, std::mem::take(atoms));
    facts.set_store_free(shortcuts.summarize_stores && !any_store);
    facts.set_reuses_walked_aborts(shortcuts.reuse_walked_aborts);
    let p = walk(&mut facts, p, &Env::start(), Mode::FalseIsAbort, Want::NONE).pred;
    let changes = facts.changes();
    let report =
        Report { clear: !facts.made_abort_choice(), drops_only: changes.dropped && !changes.other };
    *atoms = facts.into_atoms();
    (p, report)
}

/// [`decide`] without some of its [`Shortcuts`]. For the tests that compare the two.
pub(crate) fn decide_with(p: Pred, reads: u32, shortcuts: Shortcuts) -> Pred {
    walk_whole(p, reads, &mut Atoms::default(), shortcuts).0
}

/// What [`decide_certifying`] certifies about its walk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report {
    /// No choice a guard could turn was made.
    pub clear: bool,
    /// The walk changed its input, and only by dropping parts decided without a possible
    /// abort (see [`decide_certifying`]).
    pub drops_only: bool,
}

impl Report {
    /// Whether a second walk over the output, with guards added, would give it back, for a
    /// walk whose output is `unchanged` from its input or not.
    pub fn certifies(self, unchanged: bool) -> bool {
        self.clear && (unchanged || self.drops_only)
    }
}

/// Whether the walk is all but sure to change `p`, told without walking it: an `and` in
/// which an `or` whose branches all lead with an equality (or set) test on one value comes
/// after a part that pins that value the same way (`ip and ((ip and tcp) or (ip6 and ...))`,
/// as pflang lowers `tcp[...]`; `host A and udp`): the earlier part's facts decide a
/// branch's leading test, and the branch goes or shrinks. The optimizer then does not
/// record `p` to find out whether the walk left it unchanged (issue 13: recording cost the
/// filters whose walk changes them about 2,000 instructions). Only the top few levels are
/// looked at, and a junction of more than [`LEAD_PARTS`] parts answers yes (such a tree is
/// not small, and is not recorded anyway). A wrong yes loses the skip of a round's second
/// walk; it changes no result (bench/records/2026-11-30-compile-12.txt: on the bench's
/// real filters none is lost).
pub(crate) fn likely_changes(p: &Pred) -> bool {
    likely_changes_within(p, 4)
}

/// Junctions longer than this are taken to change (see [`likely_changes`]).
const LEAD_PARTS: usize = 32;

fn likely_changes_within(p: &Pred, depth: u32) -> bool {
    let Some(depth) = depth.checked_sub(1) else { return false };
    match p {
        Pred::And(ps) | Pred::Or(ps) if ps.len() > LEAD_PARTS => true,
        Pred::And(ps) => {
            ps.iter().enumerate().any(|(i, q)| pinned_before(q, &ps[..i]))
                || ps.iter().any(|q| likely_changes_within(q, depth))
        }
        Pred::Or(ps) => ps.iter().any(|q| likely_changes_within(q, depth)),
        Pred::Not(q) | Pred::Try(q) => likely_changes_within(q, depth),
        _ => false,
    }
}

/// Whether `q` is an `or` whose branches all lead with an equality (or set) test on one
/// value that a part of `before` pins (see [`pinned_key`]). The first branch's value is
/// compared with `before`'s before the other branches' with it: most `or`s (`port 22`'s
/// `src port or dst port`) lead with a value no earlier part pins, and their other
/// branches are then not looked at.
fn pinned_before(q: &Pred, before: &[Pred]) -> bool {
    let Pred::Or(branches) = q else { return false };
    let Some(k) = branches.first().and_then(pinned_key) else { return false };
    before.iter().any(|e| pinned_key(e) == Some(k))
        && branches[1..].iter().all(|b| pinned_key(b) == Some(k))
}

/// The value that `p` being true pins to a few values by the first test it evaluates (an
/// equality or set test; in an `or`, every branch's, on one value).
fn pinned_key(p: &Pred) -> Option<&Expr> {
    match p {
        Pred::Cmp { op: CmpOp::Eq, .. } | Pred::In { .. } => set_key(p),
        Pred::And(ps) => ps.first().and_then(pinned_key),
        Pred::Or(ps) => {
            let k = ps.first().and_then(pinned_key)?;
            ps.iter().skip(1).all(|q| pinned_key(q) == Some(k)).then_some(k)
        }
        _ => None,
    }
}

/// The slots stores inside any [`Pred::Try`] of `p` write, and whether `p` has a store
/// anywhere (one walk for both).
fn stores_of(p: &Pred) -> (u32, bool) {
    match p {
        Pred::Try(q) => (stores_mask(q), has_store(q)),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().fold((0, false), |(slots, any), q| {
            let (s, a) = stores_of(q);
            (slots | s, any || a)
        }),
        Pred::Not(q) => stores_of(q),
        Pred::Store { .. } => (0, true),
        Pred::Const(_)
        | Pred::Cmp { .. }
        | Pred::In { .. }
        | Pred::Guard(_)
        | Pred::Chain(_)
        | Pred::Pairs(_) => (0, false),
    }
}

fn walk(facts: &mut Facts, p: Pred, env: &Env, mode: Mode, want: Want) -> Walked {
    let mut w = walk_node(facts, p, env, mode, want);
    // Neither exit possible: the node always aborts (say, a load beyond 2^32 bytes), and
    // where abort is interchangeable with an outcome, that outcome is simpler.
    if !w.can_be_true && !w.can_be_false && !matches!(w.pred, Pred::Const(_)) {
        // (kept or not, it depends on the mode, which a part's may change when a drop
        // leaves it last or alone in its junction: see `decide_certifying`)
        facts.note_change();
        if mode.absorbs(false) {
            w.pred = Pred::Const(false);
            w.pred_aborts = None;
        } else if mode.absorbs(true) {
            w.pred = Pred::Const(true);
            w.pred_aborts = None;
        }
    }
    w
}

fn walk_node(facts: &mut Facts, p: Pred, env: &Env, mode: Mode, want: Want) -> Walked {
    match p {
        Pred::Const(b) => constant(b, env, want),
        // A test that loads past the bytes this path has (see `Env::caplen_below`): it
        // aborts.
        p @ (Pred::Cmp { .. } | Pred::In { .. })
            if env.caplen_below != u64::MAX && test_reads_past(&p, env.caplen_below) =>
        {
            aborts(p, want)
        }
        Pred::Cmp { op, lhs, rhs } => {
            let before = facts.changes();
            // (pflang tests a load at a constant offset on the left, as a rule)
            let (lhs, known, lhs_aborts) = facts.substitute_known(env, lhs);
            let (rhs, rhs_aborts) = facts.substitute_answering(env, rhs);
            // Substitution only replaces what cannot abort, so folding stays exact.
            let (op, lhs, rhs) = match fold::cmp(op, lhs, rhs) {
                Pred::Cmp { op, lhs, rhs } => (op, lhs, rhs),
                Pred::Const(b) => return decided_leaf(facts, before, b, env, want),
                other => return refolded(facts, other, env, mode, want),
            };
            let learned = facts.learn_cmp(env, op, &lhs, &rhs, known, want.on_true, want.on_false);
            // Operands the substitution gave back as they were (and so `fold::cmp` too, at
            // most swapping them): their walks answered already, at this `env` (atoms
            // `learn_cmp` interned since have no facts in it).
            let aborts = match (lhs_aborts, rhs_aborts) {
                (Some(l), Some(r)) => l || r,
                _ => facts.expr_can_abort(env, &lhs) || facts.expr_can_abort(env, &rhs),
            };
            test(facts, Pred::Cmp { op, lhs, rhs }, learned, aborts, mode)
        }
        Pred::In { value, set } => {
            let before = facts.changes();
            let (value, known, value_aborts) = facts.substitute_known(env, value);
            let (value, set) = match fold::member(value, set) {
                Pred::In { value, set } => (value, set),
                Pred::Const(b) => return decided_leaf(facts, before, b, env, want),
                // a constant, or a simple set read back as a comparison
                other => return refolded(facts, other, env, mode, want),
            };
            let d = known
                .and_then(|k| k.domain_of(&value))
                .unwrap_or_else(|| facts.domain(env, &value));
            // Within the values possible here, the set may be a one-sided range:
            // `ip[9] in {10-0xff}` is `ip[9] >= 10`.
            if let Some(cmp) = one_sided(&set, d) {
                facts.note_change();
                let (op, c) = cmp;
                return walk(facts, Pred::cmp(op, value, Expr::Const(c)), env, mode, want);
            }
            let learned = facts.learn_in(env, &value, d, &set, want.on_true, want.on_false);
            // (as for `Cmp`: `fold::member` gives a kept value back as it is)
            let aborts = value_aborts.unwrap_or_else(|| facts.expr_can_abort(env, &value));
            test(facts, Pred::In { value, set }, learned, aborts, mode)
        }
        Pred::Not(q) => walk(facts, *q, env, mode.negated(), want.negated()).negated(),
        // Fewer bytes than that on this path: it aborts.
        Pred::Guard(n) if u64::from(n) >= env.caplen_below => aborts(Pred::Guard(n), want),
        Pred::Guard(n) => {
            let on_true = want.on_true.then(|| {
                let mut e = env.clone();
                e.note_guard(n);
                e
            });
            let pred = if u64::from(n) <= env.caplen_min || mode.absorbs(true) {
                facts.note_change();
                Pred::Const(true)
            } else {
                // (a longer length known here, from a guard placed above, would drop it)
                facts.note_abort_choice();
                Pred::Guard(n)
            };
            let on_false = want.on_false.then(Env::unreachable);
            Walked {
                pred,
                on_true,
                on_false,
                can_be_true: true,
                can_be_false: false,
                pred_aborts: None,
            }
        }
        Pred::Store { slot, value } => {
            let value = facts.substitute(env, value);
            if facts.is_dead_store(slot) {
                if !facts.expr_can_abort(env, &value) {
                    facts.note_change();
                    return constant(true, env, want);
                }
                facts.note_abort_choice();
            }
            // Later tests read the slot: its facts are needed whoever asks.
            let mut on_true = env.clone();
            facts.learn_store(&mut on_true, slot, &value);
            Walked {
                pred: Pred::Store { slot, value },
                on_true: Some(on_true),
                on_false: want.on_false.then(Env::unreachable),
                can_be_true: true,
                can_be_false: false,
                pred_aborts: None,
            }
        }
        Pred::Try(q) => {
            // The facts before it hold inside (pfmatch: what an earlier clause's test or a
            // dispatch on a header field established decides this clause's tests), and
            // inside, an abort is the Try's false: the inner part is walked as the top of a
            // filter is (a test decided false may stand for "false or abort"; its stores
            // are live, see `stores_of`). When it ends true nothing aborted, so what it
            // learned holds after it; when false, it may have stopped anywhere: only the
            // facts from before it hold, less the slots it may have written.
            let written = stores_mask(&q);
            // `try(guard(n))` false: fewer than n bytes.
            let short = match *q {
                Pred::Guard(n) => Some(n),
                _ => None,
            };
            let inner =
                walk(facts, *q, env, Mode::FalseIsAbort, Want { on_true: true, on_false: false });
            let after = || {
                let mut e = env.clone();
                facts.forget_slots(&mut e, written);
                if let Some(n) = short {
                    e.note_short(n);
                }
                e
            };
            let on_false = want.on_false.then(after);
            if let Pred::Const(b) = inner.pred {
                facts.note_change();
                let on_true = if b { inner.on_true.filter(|_| want.on_true) } else { None };
                return Walked {
                    pred: Pred::Const(b),
                    on_true: on_true.or_else(|| (want.on_true && b).then(|| env.clone())),
                    on_false: (!b && want.on_false).then(|| env.clone()),
                    can_be_true: b,
                    can_be_false: !b,
                    pred_aborts: None,
                };
            }
            Walked {
                on_true: if want.on_true {
                    inner.on_true.or_else(|| Some(Env::unreachable()))
                } else {
                    None
                },
                on_false,
                pred: Pred::Try(Box::new(inner.pred)),
                can_be_true: inner.can_be_true,
                can_be_false: true,
                pred_aborts: None,
            }
        }
        Pred::And(parts) => junction(facts, parts, env, mode, want, true),
        Pred::Or(parts) => junction(facts, parts, env, mode, want, false),
        // Opaque, as a walk: either answer or an abort, nothing learned (its tests are
        // lowering's, over packet loads only, written once: nothing to substitute).
        p @ Pred::Pairs(_) => Walked {
            pred: p,
            on_true: want.on_true.then(|| env.clone()),
            on_false: want.on_false.then(|| env.clone()),
            can_be_true: true,
            can_be_false: true,
            pred_aborts: None,
        },
        Pred::Chain(mut c) => {
            // Its operands are ordinary values; the walk itself is opaque: either answer
            // or an abort, nothing learned (it writes no slot, so nothing is forgotten).
            c.next = facts.substitute(env, c.next);
            c.offset = facts.substitute(env, c.offset);
            Walked {
                pred: Pred::Chain(c),
                on_true: want.on_true.then(|| env.clone()),
                on_false: want.on_false.then(|| env.clone()),
                can_be_true: true,
                can_be_false: true,
                pred_aborts: None,
            }
        }
    }
}

/// A node that aborts on every packet reaching it: neither exit is taken (`walk` makes it
/// the outcome an abort may stand for, where there is one).
fn aborts(pred: Pred, want: Want) -> Walked {
    Walked {
        pred,
        on_true: want.on_true.then(Env::unreachable),
        on_false: want.on_false.then(Env::unreachable),
        can_be_true: false,
        can_be_false: false,
        pred_aborts: None,
    }
}

/// Whether test `p` loads at a constant offset at or past `below` bytes (its caller asks
/// only where a bound is known: `below` is not `u64::MAX`), on a path where fewer than
/// `below` bytes were captured: every operand is evaluated (no operator skips
/// one), so that load runs, and aborts.
fn test_reads_past(p: &Pred, below: u64) -> bool {
    fn past(e: &Expr, below: u64) -> bool {
        match e {
            Expr::Load { offset, size } => {
                matches!(**offset, Expr::Const(k) if u64::from(k) + u64::from(size.bytes()) >= below)
                    || past(offset, below)
            }
            Expr::Binary { lhs, rhs, .. } => past(lhs, below) || past(rhs, below),
            Expr::Neg(x) => past(x, below),
            Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => false,
        }
    }
    match p {
        Pred::Cmp { lhs, rhs, .. } => past(lhs, below) || past(rhs, below),
        Pred::In { value, .. } => past(value, below),
        _ => false,
    }
}

/// A test whose known values (substituted: they cannot abort) fold it to the constant `b`:
/// decided by the facts as [`test`] decides one, without a possible abort, so whatever the
/// substitution changed inside it goes with it (its junction's drop is the change the
/// certificate of [`decide_certifying`] looks at). `before`: the changes before it.
fn decided_leaf(facts: &Facts, before: Changes, b: bool, env: &Env, want: Want) -> Walked {
    facts.set_changes(before);
    constant(b, env, want)
}

/// A leaf that folding turned into a constant or another node: walked as that node, a
/// change of the walk's input (see [`decide_certifying`]).
fn refolded(facts: &mut Facts, p: Pred, env: &Env, mode: Mode, want: Want) -> Walked {
    facts.note_change();
    walk(facts, p, env, mode, want)
}

/// `value >= a` or `value <= b` when that is what `value in set` means for the values in
/// `d` (the set clipped to `d`'s interval is one range touching one of its ends).
fn one_sided(set: &ValueSet, d: Domain) -> Option<(CmpOp, u32)> {
    let ranges = set.ranges();
    let i = ranges.partition_point(|&(_, h)| h < d.lo);
    let &(a, b) = ranges.get(i)?;
    let (a, b) = (a.max(d.lo), b.min(d.hi));
    if a > b || ranges.get(i + 1).is_some_and(|&(l, _)| l <= d.hi) {
        return None; // empty or several ranges within d
    }
    match (a == d.lo, b == d.hi) {
        (false, true) => Some((CmpOp::Ge, a)),
        (true, false) => Some((CmpOp::Le, b)),
        _ => None,
    }
}

fn constant(b: bool, env: &Env, want: Want) -> Walked {
    let exit = |taken: bool, wanted: bool| {
        wanted.then(|| if taken { env.clone() } else { Env::unreachable() })
    };
    Walked {
        pred: Pred::Const(b),
        on_true: exit(b, want.on_true),
        on_false: exit(!b, want.on_false),
        can_be_true: b,
        can_be_false: !b,
        pred_aborts: None,
    }
}

/// A leaf test: a constant when only one exit is possible and dropping the test loses no
/// abort that matters in `mode`.
fn test(facts: &Facts, pred: Pred, learned: Learned, aborts: bool, mode: Mode) -> Walked {
    let decided = match (learned.can_be_true, learned.can_be_false) {
        (false, true) => Some(false),
        (true, false) => Some(true),
        _ => None,
    };
    let pred = match decided {
        // (decided without a possible abort: a drop the certificate of a changed walk
        // allows, see `decide_certifying`; the mode's leave is another change)
        Some(v) if !aborts => Pred::Const(v),
        Some(v) if mode.absorbs(v) => {
            facts.note_change();
            Pred::Const(v)
        }
        Some(_) => {
            facts.note_abort_choice();
            pred
        }
        None => pred,
    };
    // (`aborts` is what the test may do; a constant put in its place does nothing)
    let kept = !matches!(pred, Pred::Const(_));
    Walked {
        pred,
        on_true: learned.on_true,
        on_false: learned.on_false,
        can_be_true: learned.can_be_true,
        can_be_false: learned.can_be_false,
        pred_aborts: kept.then_some(aborts),
    }
}

/// `and` (`conjunction`) or `or`, part by part.
fn junction(
    facts: &mut Facts,
    parts: Vec<Pred>,
    env: &Env,
    mode: Mode,
    want: Want,
    conjunction: bool,
) -> Walked {
    // "Go on" is the outcome that moves to the next part (true in an `and`), "stop" the
    // one that ends the junction with that outcome.
    let (want_go_on, want_stop) =
        if conjunction { (want.on_true, want.on_false) } else { (want.on_false, want.on_true) };
    let count = parts.len();
    let last = count.saturating_sub(1);
    let mut go_on = Some(env.clone()); // facts when evaluation reaches the next part
    let mut stop = want_stop.then(Env::unreachable); // facts on the stopping exit, joined
    let mut can_stop = false;
    let mut can_go_on = true;
    let mut acc = Parts::new(conjunction, parts);
    let mut absorbed = false;
    for i in 0..count {
        let Some(part) = acc.next_part() else { break };
        let Some(entry) = go_on.take() else { break };
        if entry.unreachable || !can_go_on {
            facts.note_change();
            break; // no packet gets here: the rest never runs
        }
        let part = match acc.try_merge_later(facts, part) {
            Ok(()) => {
                facts.note_change();
                // Its exits are not known separately: the facts before it stand in.
                can_stop = true;
                if let Some(stop) = stop.as_mut() {
                    stop.join_with(&entry);
                }
                go_on = Some(entry);
                continue;
            }
            Err(part) => part,
        };
        let is_last = i == last;
        let part_mode = if is_last { mode } else { mode.inner(conjunction) };
        let part_want = if conjunction {
            Want { on_true: !is_last || want_go_on, on_false: want_stop }
        } else {
            Want { on_true: want_stop, on_false: !is_last || want_go_on }
        };
        let w = walk(facts, part, &entry, part_mode, part_want);
        let walked_aborts = w.pred_aborts.filter(|_| facts.reuses_walked_aborts());
        let (next, exit, part_can_go_on, part_can_stop) = if conjunction {
            (w.on_true, w.on_false, w.can_be_true, w.can_be_false)
        } else {
            (w.on_false, w.on_true, w.can_be_false, w.can_be_true)
        };
        can_stop |= part_can_stop;
        can_go_on = part_can_go_on;
        if let (Some(stop), Some(exit)) = (stop.as_mut(), exit.as_ref()) {
            stop.join_with(exit);
        }
        match w.pred {
            Pred::Const(b) if b == conjunction => {
                // Dropped. The certificate of a changed walk takes this for a part that was
                // never there when a walk without it would go on as this one does: the
                // part cannot stop the junction, and the facts after it are the facts
                // before it.
                let stays = exit.as_ref().is_none_or(|e| e.unreachable)
                    && next.as_ref().is_none_or(|e| e.same_as(&entry));
                if stays && !part_can_stop {
                    facts.note_drop();
                } else {
                    facts.note_change();
                }
            }
            Pred::Const(b) => {
                acc.push(facts, Pred::Const(b), &entry, next.as_ref(), None);
                absorbed = true;
                go_on = next;
                break;
            }
            Pred::And(inner) if conjunction => acc.splice(facts, inner, &entry, next.as_ref()),
            Pred::Or(inner) if !conjunction => acc.splice(facts, inner, &entry, next.as_ref()),
            q => acc.push(facts, q, &entry, next.as_ref(), walked_aborts),
        }
        go_on = next;
    }
    let pred = acc.finish(facts, absorbed, mode);
    let go_on = if want_go_on { go_on.or_else(|| Some(Env::unreachable())) } else { None };
    let (on_true, on_false) = if conjunction { (go_on, stop) } else { (stop, go_on) };
    let (can_be_true, can_be_false) =
        if conjunction { (can_go_on, can_stop) } else { (can_stop, can_go_on) };
    Walked { pred, on_true, on_false, can_be_true, can_be_false, pred_aborts: None }
}

/// The rewritten parts of a junction, with what merging them into set tests needs to know.
struct Parts {
    conjunction: bool,
    /// The junction's parts, read front to back, with the rewritten parts written over the
    /// ones read: the first `len` entries are the output, `list[next..]` the parts not read
    /// yet, and between them placeholders of parts read. An output list of its own cost an
    /// allocation and a free per junction walked (about 10 per walk of `host A and udp`,
    /// issue 13). Only a splice makes the output outgrow what was read; its parts are then
    /// inserted before the unread ones.
    list: Vec<Pred>,
    len: usize,
    next: usize,
    /// Per part: does it begin a new run of parts that may be reordered?
    run_start: RunStarts,
    /// Facts after the current run's first part let evaluation go on.
    run_base: Env,
    /// No part so far can abort or write scratch (each checked at its own entry).
    prefix_free: bool,
    /// The set tests of the current run, as indexes into `out` (a few, each a distinct
    /// tested value, compared directly): indexes rather than copies of the values, which
    /// cost an allocation per test (issue 13). `out` only loses its last part, and only a
    /// guard, which is no set test, so the indexes stay valid. In place, the first
    /// `run_key_count`: a `Vec` cost an allocation and a free per junction that had a set
    /// test (about 8 per walk of `host A and udp`, issue 13).
    run_keys: [usize; RUN_KEYS],
    run_key_count: usize,
    /// A run ended at a part only because that part may abort there.
    abort_break: bool,
    /// `prefix_free` went false only because a part may abort.
    abort_prefix: bool,
    /// Parts of a nested junction were spliced in (with the weaker bases `splice` says).
    spliced: bool,
}

/// How many distinct tested values a run remembers for [`Parts::try_merge_later`].
const RUN_KEYS: usize = 8;

impl Parts {
    fn new(conjunction: bool, parts: Vec<Pred>) -> Parts {
        Parts {
            conjunction,
            list: parts,
            len: 0,
            next: 0,
            run_start: RunStarts::default(),
            run_base: Env::unreachable(),
            prefix_free: true,
            run_keys: [0; RUN_KEYS],
            run_key_count: 0,
            abort_break: false,
            abort_prefix: false,
            spliced: false,
        }
    }

    /// The next part given, not read before (a placeholder is left in its place).
    fn next_part(&mut self) -> Option<Pred> {
        let slot = self.list.get_mut(self.next)?;
        self.next += 1;
        Some(std::mem::replace(slot, Pred::Const(true)))
    }

    /// The rewritten parts so far.
    fn out(&self) -> &[Pred] {
        self.list.get(..self.len).unwrap_or(&[])
    }

    /// Appends `q` to the output: over a placeholder, or before the unread parts.
    fn put(&mut self, q: Pred) {
        if self.len < self.next {
            if let Some(slot) = self.list.get_mut(self.len) {
                *slot = q;
            }
        } else {
            self.list.insert(self.len, q);
            self.next += 1;
        }
        self.len += 1;
    }

    /// Drops the last part of the output (leaving a placeholder).
    fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
        if let Some(slot) = self.list.get_mut(self.len) {
            *slot = Pred::Const(true);
        }
    }

    /// Takes a set test that will merge into an earlier test of its run anyway, without
    /// walking it: long `or` chains of equalities (10,000 hosts) then cost little per term.
    /// Its own facts are not learned, which only leaves the path knowing less.
    fn try_merge_later(&mut self, facts: &Facts, part: Pred) -> Result<(), Pred> {
        let mergeable =
            !self.run_base.unreachable && set_key(&part).is_some_and(|key| self.run_has_key(key));
        if !mergeable {
            return Err(part);
        }
        if !facts.is_free(&self.run_base, &part) {
            // (It may abort, and a guard could let it merge here. Not a choice for the
            // certificate of `decide_certifying`: walked and pushed, it merges into the
            // run anyway, changing the tree, or ends the run, which is reported there.)
            return Err(part);
        }
        self.run_start.push(false);
        self.put(part);
        Ok(())
    }

    /// Appends a rewritten part; `entry` holds where it starts, `after` where it lets
    /// evaluation go on (when known; the weaker `entry` stands in otherwise). `walked_aborts`:
    /// whether `q` may abort at `entry`, when the walk of `q` found it out
    /// ([`Walked::pred_aborts`]).
    fn push(
        &mut self,
        facts: &Facts,
        q: Pred,
        entry: &Env,
        after: Option<&Env>,
        walked_aborts: Option<bool>,
    ) {
        // `guard(n) and guard(m)` with n <= m: the second check implies the first.
        if let (Pred::Guard(m), Some(Pred::Guard(n))) = (&q, self.out().last()) {
            if self.conjunction && n <= m {
                facts.note_change();
                self.pop();
                self.run_start.pop();
            }
        }
        // `is_free` at the entry and at the run's base: one walk of the part when the two
        // are copies of one environment (a run's second part starts where its base was
        // taken), as they often are.
        let store = !facts.store_free() && has_store(&q);
        let mut aborts_at_entry = walked_aborts;
        if self.prefix_free {
            let aborts = aborts_at_entry.unwrap_or_else(|| facts.pred_can_abort(entry, &q));
            aborts_at_entry = Some(aborts);
            self.prefix_free = !store && !aborts;
            self.abort_prefix |= !store && aborts;
        }
        let joins_run = !self.run_base.unreachable
            && !store
            && !match aborts_at_entry {
                Some(aborts) if self.run_base.is_copy_of(entry) => aborts,
                _ => facts.pred_can_abort(&self.run_base, &q),
            };
        // (the run's base reachable and no store: the part's possible abort ended it)
        self.abort_break |= !joins_run && !self.run_base.unreachable && !store;
        if !joins_run {
            self.run_base = after.unwrap_or(entry).clone();
            self.run_key_count = 0;
        }
        if let Some(key) = set_key(&q) {
            if self.run_key_count < RUN_KEYS && !self.run_has_key(key) {
                if let Some(slot) = self.run_keys.get_mut(self.run_key_count) {
                    *slot = self.len;
                    self.run_key_count += 1;
                }
            }
        }
        self.run_start.push(!joins_run);
        self.put(q);
    }

    /// Appends the parts of a nested junction of the same kind. The facts after each of
    /// them are not known separately: a part that starts a run uses the facts before the
    /// whole block, which hold there too (only the last part's exit is known exactly).
    fn splice(&mut self, facts: &Facts, inner: Vec<Pred>, entry: &Env, after: Option<&Env>) {
        self.spliced = true;
        let n = inner.len();
        for (j, q) in inner.into_iter().enumerate() {
            let base = if j + 1 == n { after } else { None };
            self.push(facts, q, entry, base, None);
        }
    }

    /// Whether the current run remembers a set test on `key`.
    fn run_has_key(&self, key: &Expr) -> bool {
        let keys = self.run_keys.get(..self.run_key_count).unwrap_or(&[]);
        keys.iter().any(|&i| self.out().get(i).and_then(set_key) == Some(key))
    }

    fn finish(self, facts: &Facts, absorbed: bool, mode: Mode) -> Pred {
        let conjunction = self.conjunction;
        if absorbed && (self.len == 1 || self.prefix_free || mode.absorbs(!conjunction)) {
            // Alone (every part before it dropped), the absorbing part decides the junction
            // in any mode; otherwise the answer rests on the parts before it, and on the mode.
            if self.len != 1 {
                facts.note_change();
            }
            return Pred::Const(!conjunction);
        }
        if absorbed {
            facts.note_change(); // (kept, for the parts before it: the mode decided that)
        }
        // A walk of the output would push the spliced parts with their own, stronger bases:
        // longer runs could merge what this walk's did not, unless no value repeats.
        if self.spliced && repeats_a_key(self.out()) {
            facts.note_change();
        }
        // Kept because of an abort that a guard could rule out, or runs ended by one where
        // a longer run could merge tests on one value.
        // (Once one is noted the answer is known: the pairs are not looked at.)
        if !facts.made_abort_choice()
            && ((absorbed && self.abort_prefix) || (self.abort_break && repeats_a_key(self.out())))
        {
            facts.note_abort_choice();
        }
        let count = self.len;
        // (the parts not read, when the walk stopped early, go with the placeholders)
        let mut out = self.list;
        out.truncate(count);
        let merged = merge_runs(out, self.run_start.as_slice(), conjunction);
        if merged.len() < count {
            facts.note_change();
            // merging can produce constants or nested junctions: tidy locally
            fold::junction(merged, conjunction)
        } else {
            fold::finish(merged, conjunction)
        }
    }
}

/// Which parts of a junction begin a run ([`Parts::run_start`]): in place for the first
/// [`RunStarts::FEW`] parts, in a list past that. A list per junction cost an allocation
/// and a free for each junction walked (about 9 per walk of `host A and udp`, issue 13).
#[derive(Default)]
struct RunStarts {
    few: [bool; RunStarts::FEW],
    /// How many of `few` are in use (`many` empty), or `FEW` (`many` holds them all).
    len: usize,
    many: Vec<bool>,
}

impl RunStarts {
    const FEW: usize = 32;

    fn push(&mut self, start: bool) {
        if self.many.is_empty() {
            if let Some(slot) = self.few.get_mut(self.len) {
                *slot = start;
                self.len += 1;
                return;
            }
            self.many.extend_from_slice(&self.few);
        }
        self.many.push(start);
    }

    fn pop(&mut self) {
        if self.many.is_empty() {
            self.len = self.len.saturating_sub(1);
        } else {
            self.many.pop();
        }
    }

    fn as_slice(&self) -> &[bool] {
        if self.many.is_empty() {
            self.few.get(..self.len).unwrap_or(&[])
        } else {
            &self.many
        }
    }
}

/// Whether two of `parts` are set tests on one value (pairwise, so only for short
/// junctions; a long one is taken to repeat).
fn repeats_a_key(parts: &[Pred]) -> bool {
    if parts.len() > 32 {
        return true; // (not worth the pairs: such a filter is not small)
    }
    parts.iter().enumerate().any(|(i, p)| {
        set_key(p).is_some_and(|k| parts.iter().skip(i + 1).any(|q| set_key(q) == Some(k)))
    })
}

/// The scratch slots `p` may write (bit per slot).
fn stores_mask(p: &Pred) -> u32 {
    match p {
        Pred::Store { slot, .. } => 1u32.checked_shl(u32::from(*slot)).unwrap_or(0),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().fold(0, |m, q| m | stores_mask(q)),
        Pred::Not(q) | Pred::Try(q) => stores_mask(q),
        Pred::Const(_)
        | Pred::Cmp { .. }
        | Pred::In { .. }
        | Pred::Guard(_)
        | Pred::Chain(_)
        | Pred::Pairs(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::{likely_changes, walk, Env, Facts, Mode, Want};
    use crate::ir::{BinOp, CmpOp, Expr, Pred, Size, ValueSet};
    use crate::opt::guard::tests::random_pred;

    /// A random leaf test: an equality, an order or a set test of a load at a constant
    /// offset or at the IPv4 header length (values small, so that facts decide some).
    fn random_leaf(rng: &mut weir_testkit::SplitMix64) -> Pred {
        let size = [Size::Byte, Size::Half, Size::Word][rng.below_usize(3)];
        let load = if rng.chance(40) {
            let ihl = Expr::load_at(14, Size::Byte).and_mask(0xf);
            let ihl = Expr::binary(BinOp::Shl, ihl, Expr::Const(2));
            Expr::load(ihl.plus(14 + rng.below(8) as u32), size)
        } else {
            Expr::load_at(rng.below(80) as u32, size)
        };
        let k = rng.below(4) as u32;
        match rng.below(4) {
            0 => Pred::In { value: load, set: ValueSet::from_values([k, k + 2, 9]) },
            1 => {
                let op = [CmpOp::Gt, CmpOp::Le, CmpOp::Ne][rng.below_usize(3)];
                Pred::cmp(op, load, Expr::Const(k))
            }
            _ => Pred::eq(load, k),
        }
    }

    /// The start, or the environment on one side of a random predicate of `depth` walked
    /// from the start into `facts` (facts and known lengths learnt before a test).
    fn env_after_a_random_pred(
        rng: &mut weir_testkit::SplitMix64,
        facts: &mut Facts,
        depth: u32,
    ) -> Env {
        let both = Want { on_true: true, on_false: true };
        let before = walk(facts, random_pred(rng, depth), &Env::start(), Mode::Exact, both);
        match rng.below(3) {
            0 => Env::start(),
            1 => before.on_true.unwrap_or_else(Env::start),
            _ => before.on_false.unwrap_or_else(Env::start),
        }
    }

    /// The abort answer a walk hands up ([`super::Walked::pred_aborts`], which a junction
    /// takes instead of asking) is what asking its output at the walk's entry answers:
    /// random leaves (and some negated, and junctions of them) walked in every mode, at the
    /// start and after random predicates walked before them (facts, known lengths).
    #[test]
    fn a_walked_abort_answer_is_what_asking_answers() {
        let mut rng = weir_testkit::SplitMix64::new(0x33ab);
        let both = Want { on_true: true, on_false: true };
        let (mut known, mut aborting, mut kept) = (0, 0, 0);
        for i in 0..30_000 {
            let mut facts = Facts::new(u32::MAX);
            let env = env_after_a_random_pred(&mut rng, &mut facts, 1 + i % 3);
            let p = match rng.below(6) {
                0 => Pred::not(random_leaf(&mut rng)),
                1 => Pred::and([random_leaf(&mut rng), random_leaf(&mut rng)]),
                _ => random_leaf(&mut rng),
            };
            let mode = [Mode::Exact, Mode::FalseIsAbort, Mode::TrueIsAbort][rng.below_usize(3)];
            let w = walk(&mut facts, p, &env, mode, both);
            if let Some(aborts) = w.pred_aborts {
                assert_eq!(aborts, facts.pred_can_abort(&env, &w.pred), "{:?} at {env:?}", w.pred);
                known += 1;
                aborting += usize::from(aborts);
                kept += usize::from(!matches!(w.pred, Pred::Const(_)));
            }
        }
        // (both answers, on tests kept)
        assert!(
            known > 10_000 && aborting > 3_000 && known - aborting > 2_000,
            "{known} {aborting}"
        );
        assert_eq!(kept, known);
    }

    /// A random expression: loads at constant offsets and at the IPv4 header length,
    /// constants, scratch slots (some past the last), the wire length, every binary
    /// operator (constant operands often, on either side), negations.
    fn random_expr(rng: &mut weir_testkit::SplitMix64, depth: u32) -> Expr {
        if depth == 0 || rng.chance(30) {
            return match rng.below(8) {
                0 => Expr::Const(rng.below(5) as u32),
                1 => Expr::WireLen,
                2 => Expr::Scratch(rng.below(18) as u8),
                3 | 4 => {
                    let ihl = Expr::load_at(14, Size::Byte).and_mask(0xf);
                    let ihl = Expr::binary(BinOp::Shl, ihl, Expr::Const(2));
                    Expr::load(ihl.plus(14 + rng.below(8) as u32), Size::Half)
                }
                _ => Expr::load_at(rng.below(80) as u32, Size::Byte),
            };
        }
        if rng.chance(10) {
            return Expr::Neg(Box::new(random_expr(rng, depth - 1)));
        }
        if rng.chance(10) {
            return Expr::load(random_expr(rng, depth - 1), Size::Byte);
        }
        let op = BinOp::ALL[rng.below_usize(BinOp::ALL.len())];
        let lhs = random_expr(rng, depth - 1);
        let rhs = if rng.chance(60) {
            Expr::Const([0, 1, 2, 3, 14, 0xf, 0xff, 0x8000_0001][rng.below_usize(8)])
        } else {
            random_expr(rng, depth - 1)
        };
        Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }
    }

    /// When substituting hands up an abort answer (an expression it gives back as it was,
    /// which folding keeps too), it is what asking the result answers at the same facts:
    /// random expressions at the start and after random predicates walked before them.
    #[test]
    fn a_substitution_answer_is_what_asking_answers() {
        let mut rng = weir_testkit::SplitMix64::new(0x34ab);
        let (mut answered, mut aborting, mut rewritten) = (0, 0, 0);
        for i in 0..40_000 {
            let mut facts = Facts::new(u32::MAX);
            let env = env_after_a_random_pred(&mut rng, &mut facts, 1 + i % 3);
            let e = random_expr(&mut rng, 1 + i % 4);
            let (out, answer) = facts.substitute_answering(&env, e.clone());
            let (known_out, _, known_answer) = facts.substitute_known(&env, e.clone());
            assert_eq!((&known_out, known_answer), (&out, answer));
            match answer {
                Some(aborts) => {
                    assert_eq!(out, e, "a rewritten expression handed an answer");
                    assert_eq!(super::fold::expr(e.clone()), e, "folding would rewrite {e:?}");
                    assert_eq!(aborts, facts.expr_can_abort(&env, &out), "{e:?} at {env:?}");
                    answered += 1;
                    aborting += usize::from(aborts);
                }
                None => rewritten += usize::from(out != e),
            }
        }
        assert!(
            answered > 10_000
                && aborting > 3_000
                && answered - aborting > 3_000
                && rewritten > 3_000,
            "{answered} {aborting} {rewritten}"
        );
    }

    fn test(offset: u32, size: Size, k: u32) -> Pred {
        Pred::eq(Expr::load_at(offset, size), k)
    }

    /// Where `try(guard(n))` failed, fewer than n bytes were captured: a guard for n or more
    /// and a test loading at or past byte n abort there (inside a Try, its false), a guard
    /// or a load within the first n - 1 bytes does not (pfmatch's branch for the packets
    /// too short for a header field).
    #[test]
    fn a_failed_guard_bounds_the_captured_length_after_it() {
        let short = Pred::not(Pred::Try(Box::new(Pred::Guard(20))));
        let store = Pred::Store { slot: 3, value: Expr::Const(1) };
        let clause = |p: Pred| Pred::Try(Box::new(Pred::And(vec![p, store.clone()])));
        let after_short = |p: Pred| super::decide(Pred::And(vec![short.clone(), clause(p)]), 0);
        assert_eq!(after_short(Pred::Guard(20)), Pred::Const(false));
        assert_eq!(after_short(Pred::Guard(64)), Pred::Const(false));
        assert_eq!(after_short(test(18, Size::Half, 7)), Pred::Const(false));
        assert_eq!(after_short(test(19, Size::Byte, 7)), Pred::Const(false));
        // Within 19 bytes: still possible.
        for p in [Pred::Guard(19), test(17, Size::Half, 7), test(18, Size::Byte, 7)] {
            assert_ne!(after_short(p.clone()), Pred::Const(false), "{p:?}");
        }
        // After the guard held, nothing of the kind.
        let long = Pred::Try(Box::new(Pred::Guard(20)));
        let p = super::decide(Pred::And(vec![long, clause(Pred::Guard(64))]), 0);
        assert_ne!(p, Pred::Const(false));
    }

    #[test]
    fn a_part_after_a_run_ends_is_walked_not_taken_for_a_merge() {
        // `x == 0x800 or y == 5 or x == 0x800`: `y` may abort where `x` is known to be
        // loaded, so it ends the run `x` began, and the run's set tests are forgotten
        // (`Parts::run_keys`): the third part, on `x` again, is walked rather than taken
        // unwalked to merge into that run, and on its path `x != 0x800` is known: it is
        // decided false and goes.
        let x = test(12, Size::Half, 0x800);
        let y = test(100, Size::Byte, 5);
        let p = Pred::or([x.clone(), y.clone(), x.clone()]);
        assert_eq!(super::decide(p, 0), Pred::or([x, y]));
    }

    #[test]
    fn a_junction_writes_its_output_over_its_parts() {
        // `Parts` writes the rewritten parts over the list it reads: a splice that outgrows
        // what was read goes before the unread parts, a guard implied by the next one is
        // taken back, and the parts after an absorbing one go (issue 13, compile-26).
        let t = |i: u32| test(14 + i, Size::Byte, i);
        let and = |ps: Vec<Pred>| Pred::And(ps);
        let or = |ps: Vec<Pred>| Pred::Or(ps);
        let spliced_first = and(vec![and(vec![t(0), t(1), t(2)]), t(3), t(4)]);
        assert_eq!(super::decide(spliced_first, 0), and(vec![t(0), t(1), t(2), t(3), t(4)]));
        let spliced_inside = and(vec![t(0), and(vec![t(1), t(2), t(3)]), t(4), t(5)]);
        assert_eq!(super::decide(spliced_inside, 0), and((0..6).map(t).collect()));
        let twice = or(vec![or(vec![t(0), t(1)]), t(2), or(vec![t(3), t(4), t(5)]), t(6)]);
        assert_eq!(super::decide(twice, 0), or((0..7).map(t).collect()));
        // guard(10) and guard(20): the second implies the first
        let guards = and(vec![Pred::Guard(10), Pred::Guard(20), t(0), t(1)]);
        assert_eq!(super::decide(guards, 0), and(vec![Pred::Guard(20), t(0), t(1)]));
        // `x == 1 and y == 5 and x == 2 and ...`: the third is decided false, and the
        // junction with it (the parts after it never read)
        let x = |k: u32| test(20, Size::Half, k);
        let absorbed = and(vec![x(1), t(5), x(2), t(6), t(7)]);
        assert_eq!(super::decide(absorbed, 0), Pred::Const(false));
        // a part after a nested `or` of the outer `and`'s kind is not: kept whole
        let kept = and(vec![or(vec![t(0), t(1)]), and(vec![t(2), t(3)]), or(vec![t(4), t(5)])]);
        assert_eq!(
            super::decide(kept, 0),
            and(vec![or(vec![t(0), t(1)]), t(2), t(3), or(vec![t(4), t(5)])])
        );
    }

    #[test]
    fn the_pre_test_tells_an_or_led_by_a_value_an_earlier_part_pinned() {
        let ip = || test(12, Size::Half, 0x800);
        let ip6 = || test(12, Size::Half, 0x86dd);
        // `tcp[13] & 2 != 0` as lowered: ip and ((ip and tcp) or (ip6 and ...)) and ...
        let tcp = Pred::Or(vec![
            Pred::And(vec![ip(), test(23, Size::Byte, 6)]),
            Pred::And(vec![ip6(), test(20, Size::Byte, 6)]),
        ]);
        assert!(likely_changes(&Pred::And(vec![ip(), tcp.clone(), test(20, Size::Half, 0)])));
        // under an `or` and a `not` too
        let nested = Pred::Not(Box::new(Pred::And(vec![ip(), tcp.clone()])));
        assert!(likely_changes(&Pred::Or(vec![test(30, Size::Word, 1), nested])));
        // `port 22`'s shape: an `or` whose branches lead with one value (an `or` learns
        // nothing for its next branch that decides it), each an `and` of distinct values
        let branch = |proto: Pred| {
            Pred::And(vec![
                proto,
                test(23, Size::Byte, 6),
                Pred::Or(vec![test(34, Size::Half, 22), test(36, Size::Half, 22)]),
            ])
        };
        assert!(!likely_changes(&Pred::Or(vec![branch(ip6()), branch(ip())])));
        assert!(!likely_changes(&tcp));
        // a later plain test on the value, or an `or` not led by equalities on it: the
        // facts of `ip or ip6` decide neither (`tcp port 22 and ip[...]`, `tcp and not
        // port 22`)
        let ip_or_ip6 = Pred::Or(vec![branch(ip6()), branch(ip())]);
        assert!(!likely_changes(&Pred::And(vec![ip_or_ip6.clone(), ip()])));
        let not_ip6 = Pred::cmp(CmpOp::Ne, Expr::load_at(12, Size::Half), Expr::Const(0x86dd));
        let later = Pred::Or(vec![not_ip6, test(20, Size::Byte, 6)]);
        assert!(!likely_changes(&Pred::And(vec![ip_or_ip6, later])));
        // an `or` whose first branch leads with the pinned value but whose next does not:
        // the earlier part decides one branch only, and the `or` stays
        let mixed =
            Pred::Or(vec![Pred::And(vec![ip(), test(23, Size::Byte, 6)]), test(20, Size::Byte, 6)]);
        assert!(!likely_changes(&Pred::And(vec![ip(), mixed])));
        // an `or` pinned on one value after a part that pins another
        assert!(!likely_changes(&Pred::And(vec![test(30, Size::Word, 1), tcp.clone()])));
        // a long junction is taken to change
        let long = Pred::Or((0..40).map(|i| test(26, Size::Word, i)).collect());
        assert!(likely_changes(&long));
    }
}
