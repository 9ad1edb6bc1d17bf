//! The optimizer: rewrites a filter into a faster one with the same meaning on every packet.
//!
//! "Same meaning" is exact: for every packet (captured bytes and wire length),
//! `optimize(f).run(p, len) == f.run(p, len)`. At the top of a filter only accept and reject
//! are observable, so there a false test and an aborting one are interchangeable; under a
//! `not` they are not (`not false` accepts, `not abort` rejects). Every pass tracks which of
//! the three outcomes (true, false, abort) must be kept apart where it rewrites.
//!
//! Passes, each a `Filter -> Filter` function (exposed for tests and `--explain`):
//!
//! - [`simplify()`] — constant folding (`x / 0` stays: it aborts; shifts by 32 or more give 0),
//!   algebraic identities, canonical comparisons, `not` pushed down to the tests, flattened
//!   `and`/`or`, absorption of constants when what is dropped cannot abort;
//! - [`factor()`] — common prefixes (`(ip and X) or (ip and Y)` -> `ip and (X or Y)`), after
//!   grouping the parts of an `or` by the value their first test asks for, and common tails
//!   (`(tcp and X) or (udp and X)` -> `proto in {tcp, udp} and X`: pflang's `port` and
//!   `host` repeat one test per protocol);
//! - [`decide()`] — facts along each path (values, ranges, known bits of loads; the captured
//!   length known to be present): decided tests disappear, known values propagate, runs of
//!   tests on one value merge into range tests or `Pred::In` set lookups; stores to slots
//!   nothing reads go;
//! - [`insert_guards`] — one `Pred::Guard(n)` up front where every path that matters loads
//!   `n` bytes anyway.
//!
//! [`optimize`] runs them to a fixed point (a few rounds at most; the round that confirms
//! it stops after its first `simplify` when that returns the tree every other pass was
//! already seen to leave unchanged, or before it when a read-only check vouches that both
//! `simplify`s give back a tree a certified `decide` walk produced). Every pass is linear in
//! the size of the filter, up to a sort for set building and small constant factors
//! (environments of facts are capped; long runs of tests on values already seen skip the
//! fact machinery). A 10,000-host `host a or host b ...` filter (420,000 IR nodes) becomes
//! about 50 nodes in about 2 * 10^8 instructions, most of them spent rebuilding and freeing
//! the input tree.

mod analysis;
mod decide;
mod domain;
mod env;
mod factor;
mod fold;
mod guard;
mod rule_out;
mod sets;

pub use analysis::{expr_can_abort, has_store, node_count, pred_can_abort, FastHasher};

use crate::ir::{Filter, Pred};

/// Rounds of all passes; in practice two or three reach the fixed point.
const MAX_ROUNDS: usize = 6;

/// Trees whose [`analysis::Shape`] takes up to this many numbers (a few hundred nodes) are
/// recorded before the first `decide` walk, to find out whether it leaves them unchanged
/// (see [`optimize_pred`]); a larger one (a long host list) nearly always changes there.
const SMALL_SHAPE: usize = 2048;

/// Atoms a compile's tables have room for from the start (see [`env::Atoms::with_room`]).
const ATOM_ROOM: usize = 16;

/// Optimizes a filter (all passes, to a fixed point). The result accepts exactly the packets
/// `f` accepts.
pub fn optimize(f: &Filter) -> Filter {
    optimize_owned(f.clone())
}

/// [`optimize`] for a filter the caller no longer needs (saves copying a large one).
pub fn optimize_owned(f: Filter) -> Filter {
    Filter { pred: optimize_pred(f.pred), accept: f.accept }
}

fn optimize_pred(p: Pred) -> Pred {
    // Before the passes that would otherwise carry them (`host A and udp`'s ARP and RARP
    // tests: about half of its optimizing, issue 13).
    let mut p = rule_out::drop_ruled_out(p);
    // No fingerprint of the input: hashing a huge unoptimized filter costs more than the
    // extra round on its (small) optimized form.
    let mut seen = None;
    let mut stable = Stable { atoms: env::Atoms::with_room(ATOM_ROOM), ..Stable::default() };
    // The round starts from the stable tree (the last round ended on it, unchanged).
    let mut from_stable = false;
    for round in 0..MAX_ROUNDS {
        // A round that starts from a tree held since a certified walk (see
        // [`Stable::remember_decided`]) ends at once when the factoring `simplify` surely
        // gives it back, for the slots the walk was certified for: the fixed point, known
        // without simplifying it or comparing.
        if from_stable && stable.ends_at_held(&p) {
            break;
        }
        let (q, reads) = fold::simplify(p, true);
        // The round before ended on a tree every later pass of a round is known to leave
        // as it is: `decide` (seen, for these slots read), `insert_guards` (it added none
        // there, or the tree is its own output, and a second placement finds every guard
        // already in place: `insert_guards` is idempotent) and `simplify` (seen). If the
        // factoring `simplify` that opens this round gives it back too, the rest of the
        // round would return it unchanged: it is the fixed point, and the round ends
        // here rather than walking the tree three more times to find that out.
        if from_stable && stable.is_decided(&q, reads) {
            p = q;
            break;
        }
        // The first walk's input is the largest tree and is rarely already stable: it is
        // not copied to be remembered, only recorded when small, to find out whether the
        // walk left it unchanged (most small filters people write come out so).
        let (q, is_tree, certified) =
            if round > 0 { stable.decide(q, reads) } else { stable.decide_first(q, reads) };
        // Guards make loads safe, which lets `decide` merge and drop more, so a new guard
        // gets a second `decide` at once (without one, whatever a second `decide` would
        // find waits for the next round: a small filter reaches its fixed point with three
        // `decide` walks rather than four). A round that changes nothing is the fixed
        // point: optimizing the result again gives it back.
        let (q, added) = guard::insert_guards_reporting(q);
        // (Without a new guard the tree is `decide`'s output, unchanged.) The second walk
        // is skipped when the first certified that it left its input unchanged and made
        // no choice a guard could turn: it would give the guarded tree back (issue 13:
        // for `port 22` a walk is about a third of optimizing).
        let (q, is_tree) = match (added, certified) {
            (true, true) => (stable.remember_decided(q, reads), true),
            (true, false) => {
                let (q, is_tree, _) = stable.decide(q, reads);
                (q, is_tree)
            }
            (false, _) => (q, is_tree),
        };
        let (q, simplified_unchanged) = stable.simplify(q, is_tree);
        p = q;
        from_stable = simplified_unchanged;
        // A round that starts from the stable tree ends at its first `simplify` when that
        // changes nothing (above), and otherwise changes the tree: the fingerprint would
        // not be compared with anything equal, and hashing a large tree costs a walk.
        if from_stable {
            seen = None;
            continue;
        }
        let now = Some(analysis::fingerprint(&p));
        if now == seen {
            break;
        }
        seen = now;
    }
    p
}

/// A tree the passes were seen to leave unchanged, so that the confirming round of
/// [`optimize_pred`] skips the walks whose result is already known (the passes are pure
/// functions: the same input gives the same output). In practice `decide` after new guards
/// and every pass of the last round change nothing, and the repeated `decide` walk is
/// about a third of a small filter's optimizing time. Trees are compared whole, never by
/// hash: by their [`analysis::Shape`] when small (see [`Memo`]). A skip never changes the result, with one assumption, tested
/// (crates/filter/tests/opt.rs, `inserting_guards_twice_changes_nothing`): `insert_guards`
/// is idempotent, so the tree it returned is one it leaves as it is.
#[derive(Default)]
struct Stable {
    /// `decide(tree, reads) == tree` was seen.
    decided: Option<(Memo, u32)>,
    /// `fold::simplify(tree, false) == tree` was seen too (for the same tree).
    simplified: bool,
    /// The atoms the compile's `decide` walks interned, shared by all of them.
    atoms: env::Atoms,
}

impl Stable {
    /// Whether `decide(q, reads) == q` was seen.
    fn is_decided(&self, q: &Pred, reads: u32) -> bool {
        self.decided.as_ref().is_some_and(|(tree, r)| *r == reads && tree.matches(q))
    }

    /// Whether the remembered tree is [`Memo::Held`].
    fn holds(&self) -> bool {
        matches!(self.decided, Some((Memo::Held(_), _)))
    }

    /// Records `p`, the tree held (see [`Memo::Held`]), before a pass may change it.
    fn record_held(&mut self, p: &Pred) {
        if let Some((memo @ Memo::Held(_), _)) = &mut self.decided {
            *memo = Memo::of(p);
        }
    }

    /// At the start of a round from the stable tree `p`, the tree held: whether the factoring
    /// `simplify` was found to give it back with the slots it was decided for (the round
    /// would give it back: it is the fixed point). Otherwise `p` is recorded (the round's
    /// passes will run on it).
    fn ends_at_held(&mut self, p: &Pred) -> bool {
        match self.decided {
            Some((Memo::Held(Some(factoring_reads)), reads)) if factoring_reads == reads => true,
            _ => {
                self.record_held(p);
                false
            }
        }
    }

    /// `decide::decide(q, reads)`, skipped when `q` is the remembered tree; whether the
    /// result is the remembered tree; and whether the walk certified that guards added to
    /// it would not change a second walk's answer (it left `q` unchanged, or only dropped
    /// parts decided without a possible abort, and made no choice a guard could turn:
    /// [`decide::decide_certifying`]). `q` is remembered (see
    /// [`Memo`]) to find out whether `decide` leaves it unchanged.
    fn decide(&mut self, q: Pred, reads: u32) -> (Pred, bool, bool) {
        if self.is_decided(&q, reads) {
            return (q, true, false);
        }
        let before = Memo::of(&q);
        let (p, report) = decide::decide_certifying(q, reads, &mut self.atoms);
        if before.matches(&p) {
            self.decided = Some((before, reads));
            self.simplified = false;
            return (p, true, report.clear);
        }
        (p, false, report.certifies(false))
    }

    /// `decide::decide(q, reads)` for the first walk of a compile (nothing remembered yet),
    /// whether the result was seen to be `q` (then remembered), and whether the walk
    /// certified that guards added to its result would not change a second walk's answer
    /// (as [`Stable::decide`] says; `q` recorded, not copied, when small and not of a kind
    /// the walk nearly always changes: [`decide::likely_changes`]).
    fn decide_first(&mut self, q: Pred, reads: u32) -> (Pred, bool, bool) {
        let shape =
            if decide::likely_changes(&q) { None } else { analysis::Shape::of(&q, SMALL_SHAPE) };
        let (p, report) = decide::decide_certifying(q, reads, &mut self.atoms);
        // (a walk that only dropped parts certifies without the comparison)
        if report.clear && !report.drops_only {
            if let Some(shape) = shape.filter(|s| s.matches(&p)) {
                // Seen unchanged: remembered as [`Stable::decide`] remembers such a tree, so
                // that when no guard is added, the round's `simplify` may find the fixed
                // point ([`Stable::simplify`]) rather than a second round walking it again
                // (issue 13: `arp`, `ip6`, `greater 100`).
                self.decided = Some((Memo::Shape(shape), reads));
                self.simplified = false;
                return (p, true, true);
            }
        }
        (p, false, report.clear && report.drops_only)
    }

    /// Remembers `q` as a tree `decide` leaves unchanged (known without walking it: the
    /// certificate of [`Stable::decide`]), and gives it back. Held, not recorded: the loop
    /// passes it straight to [`Stable::simplify`], and when that and the next round's
    /// factoring `simplify` surely give it back ([`fold::unchanged`]) it is the fixed point,
    /// with no recording compared (issue 13: the three walks were a tenth of `host A and
    /// udp`'s optimizing).
    fn remember_decided(&mut self, q: Pred, reads: u32) -> Pred {
        self.decided = Some((Memo::Held(None), reads));
        self.simplified = false;
        q
    }

    /// `fold::simplify(p, false)`, and whether the result is the stable tree, unchanged
    /// from `p` (skipped when `simplify` was already seen to leave that tree as it is).
    /// `is_tree`: `p` is the remembered tree (as [`Stable::decide`] said).
    fn simplify(&mut self, p: Pred, is_tree: bool) -> (Pred, bool) {
        if is_tree && self.simplified {
            return (p, true);
        }
        if is_tree {
            // One walk answers for this `simplify` and for the factoring one that opens the
            // next round (factoring only adds conditions), else one for this alone. Asked of
            // a recorded tree too (a walk seen to leave it unchanged, not certified: issue
            // 13, `udp and (port 67 or port 68)`, `vlan and tcp`): `p` is that tree, so it
            // may be held in place of its recording when the factoring `simplify` surely
            // gives it back, and the next round ends at [`Stable::ends_at_held`] without
            // simplifying and comparing it; otherwise the recording stays, for that round.
            let factoring = fold::unchanged(&p, true);
            if factoring.is_some() || fold::unchanged(&p, false).is_some() {
                let hold = factoring.is_some() || self.holds();
                if let Some((memo, _)) = self.decided.as_mut().filter(|_| hold) {
                    *memo = Memo::Held(factoring);
                }
                self.simplified = true;
                return (p, true);
            }
            self.record_held(&p);
        }
        let q = fold::simplify(p, false).0;
        if is_tree {
            self.simplified = self.decided.as_ref().is_some_and(|(tree, _)| tree.matches(&q));
        }
        (q, is_tree && self.simplified)
    }
}

/// A tree [`Stable`] remembers, to be compared with later ones: its [`analysis::Shape`]
/// when small (one buffer of numbers: copying the nodes cost an allocation each, about a
/// microsecond for a small filter's tree, issue 13), a copy otherwise. Either compares
/// exactly: the shape is a prefix code of every field.
enum Memo {
    /// Not recorded: the tree the loop holds now, from [`Stable::remember_decided`] (or
    /// [`Stable::simplify`], given the recorded tree back) until a pass may change it
    /// ([`Stable::record_held`] records it before). Matches nothing: only
    /// [`Stable::simplify`] and [`Stable::ends_at_held`], given the tree held, answer for it.
    /// With the slots the factoring `simplify` reads when it was found to give the tree back
    /// ([`fold::unchanged`]).
    Held(Option<u32>),
    Shape(analysis::Shape),
    Tree(Pred),
}

impl Memo {
    fn of(p: &Pred) -> Memo {
        match analysis::Shape::of(p, SMALL_SHAPE) {
            Some(shape) => Memo::Shape(shape),
            None => Memo::Tree(p.clone()),
        }
    }

    /// Whether `p` is the tree remembered.
    fn matches(&self, p: &Pred) -> bool {
        match self {
            Memo::Held(_) => false,
            Memo::Shape(shape) => shape.matches(p),
            Memo::Tree(tree) => tree == p,
        }
    }
}

/// [`optimize`] without the shortcuts of its fixed-point loop: every round runs every pass
/// (no [`Stable`] skips), and the loop ends when a round gives back the tree it started from
/// (compared whole). The same passes in the same order, so the result must be [`optimize`]'s:
/// the tests compare the two to check that the skips never change a result. Not for use.
#[doc(hidden)]
pub fn optimize_without_shortcuts(f: &Filter) -> Filter {
    let mut p = rule_out::drop_ruled_out(f.pred.clone());
    for _ in 0..MAX_ROUNDS {
        let before = p.clone();
        let (q, reads) = fold::simplify(p, true);
        let q = decide::decide(q, reads);
        let (q, added) = guard::insert_guards_reporting(q);
        let q = if added { decide::decide(q, reads) } else { q };
        p = fold::simplify(q, false).0;
        if p == before {
            break;
        }
    }
    Filter { pred: p, accept: f.accept }
}

/// [`decide`] with every part the walk keeps asked whether it stores (the walk is otherwise
/// told when the tree has no store, and skips asking): the tests compare the two
/// (crates/filter/tests/opt.rs). Not for use.
#[doc(hidden)]
pub fn decide_asking_every_part_for_stores(f: &Filter) -> Filter {
    let shortcuts = decide::Shortcuts { summarize_stores: false, ..decide::Shortcuts::ALL };
    let reads = analysis::slots_read(&f.pred);
    Filter { pred: decide::decide_with(f.pred.clone(), reads, shortcuts), accept: f.accept }
}

/// [`decide`] with every part a junction keeps asked whether it may abort (the walk of a
/// leaf test otherwise hands up its own answer, and the junction skips asking): the tests
/// compare the two (crates/filter/tests/opt.rs). Not for use.
#[doc(hidden)]
pub fn decide_asking_every_part_for_aborts(f: &Filter) -> Filter {
    let shortcuts = decide::Shortcuts { reuse_walked_aborts: false, ..decide::Shortcuts::ALL };
    let reads = analysis::slots_read(&f.pred);
    Filter { pred: decide::decide_with(f.pred.clone(), reads, shortcuts), accept: f.accept }
}

/// Checks [`fold::unchanged`] on `f`, without factoring and with: whether it vouched that
/// `simplify` gives `f` back, and an error where it vouched wrongly (`simplify` changes the
/// tree, or reads other slots). For the tests (crates/filter/tests/opt.rs). Not for use.
#[doc(hidden)]
pub fn check_unchanged(f: &Filter) -> Result<[bool; 2], String> {
    let mut vouched = [false; 2];
    for (factoring, v) in [false, true].into_iter().zip(&mut vouched) {
        let Some(reads) = fold::unchanged(&f.pred, factoring) else { continue };
        *v = true;
        let (q, r) = fold::simplify(f.pred.clone(), factoring);
        if q != f.pred || r != reads {
            return Err(format!(
                "vouched for (factoring {factoring}, reads {reads:#x}) {}\n  simplified \
                 (reads {r:#x}) {q}",
                f.pred
            ));
        }
    }
    Ok(vouched)
}

/// The disjuncts of a top-level `and` that its other parts rule out, dropped: the step
/// [`optimize`] starts with (see crates/filter/src/opt/rule_out.rs). For the tests.
#[doc(hidden)]
pub fn drop_ruled_out(f: &Filter) -> Filter {
    Filter { pred: rule_out::drop_ruled_out(f.pred.clone()), accept: f.accept }
}

/// Constant folding and local simplification (see the module documentation).
pub fn simplify(f: &Filter) -> Filter {
    Filter { pred: fold::simplify(f.pred.clone(), false).0, accept: f.accept }
}

/// [`simplify`] with factoring in the same walk, as the first pass of each of [`optimize`]'s
/// rounds runs it (for timing the rounds pass by pass: crates/weir/examples/compile_loop.rs).
#[doc(hidden)]
pub fn simplify_factoring(f: &Filter) -> Filter {
    Filter { pred: fold::simplify(f.pred.clone(), true).0, accept: f.accept }
}

/// Common-prefix factoring of `or`s (and, dually, `and`s).
pub fn factor(f: &Filter) -> Filter {
    Filter { pred: factor::factor(f.pred.clone()), accept: f.accept }
}

/// Path facts: decided tests, known values, merged set tests.
pub fn decide(f: &Filter) -> Filter {
    let reads = analysis::slots_read(&f.pred);
    Filter { pred: decide::decide(f.pred.clone(), reads), accept: f.accept }
}

/// How often [`optimize`] can skip a round's second `decide` walk on a set of filters, as
/// the round's first walk sees each (after the factoring `simplify`), and a check that where
/// it can, walking the guarded tree again gives it back. For the tests that check and count
/// it (crates/filter/tests/opt.rs, crates/pflang/tests/opt_shortcuts.rs). Not for use.
#[doc(hidden)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SkipTally {
    /// The first walk left its input unchanged.
    pub unchanged: u64,
    /// Its report was clear: no choice a guard could turn.
    pub clear: u64,
    /// Both, or the report clear and the walk's only changes parts dropped as decided
    /// without a possible abort ([`decide::Report::drops_only`]).
    pub certified: u64,
    /// Of those, the walks that dropped parts.
    pub dropped: u64,
    /// Both, and guards were added: the second walk is skipped.
    pub skipped: u64,
    /// Certified by drops, no guard added, and the output walked again to check it.
    pub walked_again: u64,
    /// Unchanged, though the optimizer took the tree for one the walk changes and did not
    /// record it ([`decide::likely_changes`]): a skip lost (counted with `skipped` too).
    pub missed: u64,
}

impl SkipTally {
    /// Counts `f`; an error (the trees) when the walk skipped would change the guarded tree.
    pub fn add(&mut self, f: &Filter) -> Result<(), String> {
        let (s, reads) = fold::simplify(f.pred.clone(), true);
        let predicted_change = decide::likely_changes(&s);
        let (t, report) = decide::decide_certifying(s.clone(), reads, &mut env::Atoms::default());
        let unchanged = t == s;
        self.unchanged += u64::from(unchanged);
        self.clear += u64::from(report.clear);
        if !report.certifies(unchanged) {
            return Ok(());
        }
        self.certified += 1;
        self.dropped += u64::from(!unchanged);
        let (g, added) = guard::insert_guards_reporting(t);
        if !added {
            // No guard: the certificate still says a walk of the output gives it back (the
            // guards' part of the argument aside), and a walk that dropped parts makes that
            // a check of its own (a walk that changed nothing gives its input back anyway).
            if !unchanged {
                self.walked_again += 1;
                let again = decide::decide(g.clone(), reads);
                if again != g {
                    return Err(format!("certified {g}\n  walked again {again}"));
                }
            }
            return Ok(());
        }
        self.skipped += 1;
        self.missed += u64::from(predicted_change && unchanged);
        let again = decide::decide(g.clone(), reads);
        if again != g {
            return Err(format!("guarded {g}\n  walked again {again}"));
        }
        Ok(())
    }
}

impl std::fmt::Display for SkipTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "first walk unchanged {}, report clear {}, certified {} (of which only dropping \
             decided parts {}), of which guards added (second walk skipped) {}, of those lost \
             to the pre-test {}; certified by drops without a guard, walked again {}",
            self.unchanged,
            self.clear,
            self.certified,
            self.dropped,
            self.skipped,
            self.missed,
            self.walked_again
        )
    }
}

/// Hoisted length guards.
pub fn insert_guards(f: &Filter) -> Filter {
    Filter { pred: guard::insert_guards(f.pred.clone()), accept: f.accept }
}

#[cfg(test)]
mod tests {
    use super::{decide, fold, Memo, Stable};
    use crate::ir::{Expr, Pred, Size, ValueSet};

    fn eq(offset: u32, size: Size, k: u32) -> Pred {
        Pred::eq(Expr::load_at(offset, size), k)
    }

    /// `vlan and tcp` as the optimizer's second walk leaves it (unchanged, not certified).
    fn vlan_tcp() -> Pred {
        let vlan = Pred::In {
            value: Expr::load_at(12, Size::Half),
            set: ValueSet::from_values([0x8100, 0x88a8, 0x9100]),
        };
        let v4 = Pred::and([eq(16, Size::Half, 0x800), eq(27, Size::Byte, 6)]);
        let v6 = Pred::and([
            eq(16, Size::Half, 0x86dd),
            Pred::or([
                eq(24, Size::Byte, 6),
                Pred::and([eq(24, Size::Byte, 0x2c), eq(58, Size::Byte, 6)]),
            ]),
        ]);
        Pred::and([Pred::Guard(25), vlan, Pred::or([v4, v6])])
    }

    /// A tree `simplify` changes (it pushes the `not` into the comparison).
    fn simplify_changes() -> Pred {
        Pred::and([eq(20, Size::Byte, 1), Pred::not(eq(21, Size::Byte, 2))])
    }

    /// A tree a walk was seen (by its recording) to leave unchanged is held, not kept
    /// recorded, when `fold::unchanged` vouches that the factoring `simplify` gives it back:
    /// the next round then ends at once (`ends_at_held`), as the round would have by
    /// simplifying it and comparing it with the recording. When nothing vouches, `simplify`
    /// runs and the recording stays.
    #[test]
    fn a_recorded_tree_simplify_gives_back_is_held() {
        let p = vlan_tcp();
        let reads = fold::unchanged(&p, true).expect("vouched for");
        assert_eq!(fold::simplify(p.clone(), true), (p.clone(), reads));
        assert_eq!(decide::decide(p.clone(), reads), p);
        let mut stable = Stable { decided: Some((Memo::of(&p), reads)), ..Stable::default() };
        let (q, same) = stable.simplify(p.clone(), true);
        assert!(same && q == p && stable.simplified);
        assert!(stable.holds(), "held in place of its recording");
        assert!(stable.ends_at_held(&q));
        // Decided for other slots: not the fixed point; recorded again for the round.
        let mut other = Stable { decided: Some((Memo::of(&p), reads | 2)), ..Stable::default() };
        let _ = other.simplify(p.clone(), true);
        assert!(!other.ends_at_held(&p) && !other.holds() && other.is_decided(&p, reads | 2));

        // Simplified as it is, but factored (one `ip` test for both): the recording stays,
        // and the next round's factoring `simplify` runs.
        let p = Pred::or([
            Pred::and([eq(12, Size::Half, 0x800), eq(23, Size::Byte, 6)]),
            Pred::and([eq(12, Size::Half, 0x800), eq(23, Size::Byte, 0x11)]),
        ]);
        assert_eq!(fold::unchanged(&p, true), None);
        let reads = fold::unchanged(&p, false).expect("vouched for without factoring");
        let mut stable = Stable { decided: Some((Memo::of(&p), reads)), ..Stable::default() };
        let (q, same) = stable.simplify(p.clone(), true);
        assert!(same && q == p && stable.simplified);
        assert!(!stable.holds() && !stable.ends_at_held(&p) && stable.is_decided(&p, reads));

        let p = simplify_changes();
        assert_eq!(fold::unchanged(&p, true), None);
        assert_eq!(fold::unchanged(&p, false), None);
        let mut stable = Stable { decided: Some((Memo::of(&p), 0)), ..Stable::default() };
        let (q, same) = stable.simplify(p.clone(), true);
        assert_eq!(q, fold::simplify(p.clone(), false).0);
        assert!(!same && q != p && !stable.holds());
        assert!(stable.is_decided(&p, 0), "the recording stays");
    }
}
