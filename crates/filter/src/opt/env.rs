//! Facts along a path: what holds at a point of the filter because of the tests that ran
//! before it (and came out the way that leads here).
//!
//! An [`Env`] maps *atoms* (interned pure expressions: loads, masked loads, `len`, scratch
//! slots) to [`Domain`]s, and knows a lower bound on the captured length. Two properties make
//! it useful beyond deciding repeated tests:
//!
//! - an atom present in the map was evaluated on this path without aborting, so evaluating it
//!   again cannot abort either (this is how a load at a variable offset is known in bounds);
//! - `caplen_min` makes every load that ends within it safe, which is what lets the optimizer
//!   reorder tests (only tests that cannot abort may be moved past each other).
//!
//! Scratch slots change only through `Pred::Store`, which forgets every fact that reads the
//! slot. Environments are small (capped), so copying one per branch keeps the pass linear.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::analysis::{expr_matches, record_expr, FastMap};

use super::domain::{self, Domain};
use crate::ir::{BinOp, CmpOp, Expr, Pred, ValueSet, SCRATCH_SLOTS};

pub(crate) type AtomId = u32;

/// More facts than this on one path are dropped (they only ever make the result better).
const FACT_CAP: usize = 48;

/// Numbers per atom [`Atoms::with_room`] makes room for in [`Atoms::codes`] (the IPv4
/// header length `(pkt[14:1] & 15) << 2` takes 12, a load at it plus a constant 18).
const CODE_ROOM: usize = 8;

struct AtomInfo {
    /// Scratch slots the expression reads (bit per slot).
    scratch: u32,
    /// `[start, end)` when the atom is a load at a constant offset.
    const_load: Option<(u64, u64)>,
    /// The atom interned before it with the same [`shallow_key`] (the chain of candidates
    /// for a key, newest first).
    same_key: Option<AtomId>,
    /// Where the atom's expression lies in [`Atoms::codes`] (`start..end`); `None` for a
    /// load at a constant offset, which its bytes (`const_load`) name.
    code: Option<(usize, usize)>,
}

/// Interned atoms, shared by every environment of one compile.
///
/// Found by their [`shallow_key`] and then compared whole (`==`) with the few atoms of that
/// key: most expressions the pass asks about are not atoms, and a key built from the top of
/// the tree says so without walking it; for those that are, comparing with the one or two
/// candidates costs less than hashing the whole tree (as a map keyed by the expression did:
/// hashing was ~4% of a small filter's optimizing, issue 13).
#[derive(Default)]
pub(crate) struct Atoms {
    /// The expressions of the atoms that are not loads at constant offsets (which their
    /// bytes name, [`load_span`] kept in their [`AtomInfo`]), to compare with: each as the
    /// numbers [`record_expr`] writes, one after another. A copy of each tree cost an
    /// allocation per node to make and a free per node at the end of the compile (issue 13:
    /// `port 22`'s header length and the port loads at it, ~1,500 instructions of its
    /// optimizing).
    codes: Vec<u32>,
    info: Vec<AtomInfo>,
    /// The newest atom of each shallow key.
    by_key: FastMap<u64, AtomId>,
    /// One bit per shallow key interned ([`key_bit`]): a key whose bit is clear has no atom,
    /// told without probing `by_key`. Most expressions the pass asks about are not atoms (the
    /// parts of a load's variable offset, each asked at every test of the load: issue 13,
    /// compile-31).
    key_bits: u64,
}

/// The bit of `key` in [`Atoms::key_bits`]: the top six bits of a multiplicative hash (the
/// shallow keys differ mostly in their low bits).
fn key_bit(key: u64) -> u64 {
    1u64 << (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

/// A key from the top two levels of `e` (kind, operator, width, constant operands): equal
/// expressions have equal keys.
fn shallow_key(e: &Expr) -> u64 {
    fn tag(e: &Expr) -> u64 {
        match e {
            Expr::Const(c) => 1 | u64::from(*c) << 8,
            Expr::WireLen => 2,
            Expr::Scratch(k) => 3 | u64::from(*k) << 8,
            Expr::Load { size, .. } => 4 | u64::from(size.bytes()) << 8,
            Expr::Binary { op, .. } => 5 | (*op as u64) << 8,
            Expr::Neg(_) => 6,
        }
    }
    let child = |x: &Expr| tag(x).rotate_left(13);
    match e {
        Expr::Load { offset, .. } => tag(e) ^ child(offset),
        Expr::Binary { lhs, rhs, .. } => tag(e) ^ child(lhs) ^ child(rhs).rotate_left(29),
        Expr::Neg(x) => tag(e) ^ child(x),
        _ => tag(e),
    }
}

impl Atoms {
    /// Atoms with room for `n` before a table grows: a compile's walks intern a few each
    /// (`host A and udp`: more than four, each list grew twice), and growing the two lists and the map from empty cost four
    /// reallocations per compile (issue 13).
    pub fn with_room(n: usize) -> Atoms {
        Atoms {
            codes: Vec::with_capacity(n * CODE_ROOM),
            info: Vec::with_capacity(n),
            by_key: FastMap::with_capacity_and_hasher(n, Default::default()),
            key_bits: 0,
        }
    }

    fn lookup(&self, e: &Expr) -> Option<AtomId> {
        if self.key_bits == 0 {
            return None; // (no atom yet)
        }
        let key = shallow_key(e);
        if self.key_bits & key_bit(key) == 0 {
            return None;
        }
        let span = load_span(e);
        let mut next = self.by_key.get(&key).copied();
        while let Some(id) = next {
            let info = self.info(id)?;
            let same = match info.code {
                Some((start, end)) => {
                    self.codes.get(start..end).is_some_and(|code| expr_matches(e, code))
                }
                None => span.is_some() && info.const_load == span,
            };
            if same {
                return Some(id);
            }
            next = info.same_key;
        }
        None
    }

    fn intern(&mut self, e: &Expr) -> AtomId {
        self.lookup(e).unwrap_or_else(|| self.add(e))
    }

    /// Interns `e`, which [`Atoms::lookup`] did not find.
    fn add(&mut self, e: &Expr) -> AtomId {
        let id = AtomId::try_from(self.info.len()).unwrap_or(AtomId::MAX);
        let const_load = load_span(e);
        let key = shallow_key(e);
        self.key_bits |= key_bit(key);
        let same_key = self.by_key.insert(key, id);
        let code = const_load.is_none().then(|| {
            let start = self.codes.len();
            record_expr(e, &mut self.codes);
            (start, self.codes.len())
        });
        self.info.push(AtomInfo { scratch: scratch_mask(e), const_load, same_key, code });
        id
    }

    fn info(&self, id: AtomId) -> Option<&AtomInfo> {
        self.info.get(id as usize)
    }
}

/// The bytes `[start, end)` a load at a constant offset reads (they name it: the offset and
/// the width), `None` for any other expression.
fn load_span(e: &Expr) -> Option<(u64, u64)> {
    match e {
        Expr::Load { offset, size } => match **offset {
            Expr::Const(k) => Some((u64::from(k), u64::from(k) + u64::from(size.bytes()))),
            _ => None,
        },
        _ => None,
    }
}

/// Which scratch slots an expression reads (slots beyond the mask's width fold onto bit 31,
/// which is never cleared wrongly: such slots abort anyway).
pub(crate) fn scratch_mask(e: &Expr) -> u32 {
    match e {
        Expr::Scratch(k) => scratch_bit(*k),
        Expr::Const(_) | Expr::WireLen => 0,
        Expr::Load { offset, .. } => scratch_mask(offset),
        Expr::Binary { lhs, rhs, .. } => scratch_mask(lhs) | scratch_mask(rhs),
        Expr::Neg(x) => scratch_mask(x),
    }
}

/// The bit of slot `k` in a [`scratch_mask`].
pub(crate) fn scratch_bit(k: u8) -> u32 {
    1u32.checked_shl(u32::from(k)).unwrap_or(1 << 31)
}

#[derive(Debug, Clone)]
pub(crate) struct Env {
    /// No packet reaches this point (the facts contradict each other).
    pub unreachable: bool,
    /// Every packet reaching this point has at least this many captured bytes.
    pub caplen_min: u64,
    /// Every packet reaching this point has fewer captured bytes than this (`u64::MAX`: no
    /// bound): learned where `try(guard(n))` failed (pfmatch's split on a header field
    /// sends the packets too short for it down a branch of their own), so a guard for as
    /// many bytes or more there always aborts.
    pub caplen_below: u64,
    /// Slots still holding their initial 0 (no Store has run on this path).
    scratch_zero: u32,
    /// Sorted by atom id.
    facts: FactList,
}

/// The facts of an [`Env`], shared by its copies until one of them changes them (copy on
/// write). Most copies are only read: the facts on entry to each part of a junction, the
/// base of a run, a compare's exits before the one fact it learns; copying the list for
/// each was, with the allocation and free it costs, about a tenth of a small filter's
/// `decide` (issue 13).
#[derive(Debug, Clone, Default)]
struct FactList(Option<SharedFacts>);

/// A [`FactList`]'s list, shared by its copies.
type SharedFacts = Rc<Vec<(AtomId, Domain)>>;

/// How many emptied lists of dropped [`FactList`]s (the `Rc` box and the buffer) a thread
/// keeps for its next copies ([`spare_list`]).
const SPARE_LISTS: usize = 32;

thread_local! {
    /// This thread's emptied lists. A walk copies a list (two allocations: the box and the
    /// buffer) at about every test and frees as many at the ends of junctions: the
    /// allocator's share of it was ~4% of a small filter's compile (issue 13). Only memory
    /// is kept here, never facts: no answer depends on it.
    static SPARE: RefCell<Vec<SharedFacts>> = const { RefCell::new(Vec::new()) };
}

/// An empty list no other environment holds: a spare one when the thread has one.
fn spare_list() -> SharedFacts {
    SPARE
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

impl Drop for FactList {
    fn drop(&mut self) {
        let Some(mut rc) = self.0.take() else { return };
        // Kept only when this was its last holder (a list shared with another environment
        // is theirs still), and not grown past what a copy reserves under the cap.
        let Some(list) = Rc::get_mut(&mut rc) else { return };
        if list.capacity() > FACT_CAP + 2 {
            return;
        }
        list.clear();
        // (while the thread is torn down the list is freed, as it would be without this)
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < SPARE_LISTS {
                    s.push(rc);
                }
            }
        });
    }
}

impl FactList {
    fn as_slice(&self) -> &[(AtomId, Domain)] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// The list, to change it: copied first when another environment shares it. A copy
    /// keeps room for two more facts: a copied list usually gets one (a compare's outcome)
    /// at once, and a copy sized to the facts it held grew (a `realloc`) on that insert.
    fn make_mut(&mut self) -> &mut Vec<(AtomId, Domain)> {
        let rc = self.0.get_or_insert_with(spare_list);
        if Rc::get_mut(rc).is_none() {
            let mut copy = spare_list();
            let list = Rc::make_mut(&mut copy);
            list.reserve(rc.len().saturating_add(2).min(FACT_CAP));
            list.extend_from_slice(rc);
            *rc = copy;
        }
        // Not shared any more: no copy here.
        Rc::make_mut(rc)
    }

    /// Whether both are the same list, shared (false when unsure).
    fn is_shared_with(&self, other: &FactList) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Drops the facts `drop` says to (copying a shared list only when one goes).
    fn remove_if(&mut self, drop: impl Fn(AtomId) -> bool) {
        if self.as_slice().iter().any(|&(id, _)| drop(id)) {
            self.make_mut().retain(|&(id, _)| !drop(id));
        }
    }
}

impl Env {
    /// The facts at the start of a filter: nothing but zeroed scratch memory.
    pub fn start() -> Env {
        Env {
            unreachable: false,
            caplen_min: 0,
            caplen_below: u64::MAX,
            scratch_zero: u32::MAX,
            facts: FactList::default(),
        }
    }

    pub fn unreachable() -> Env {
        Env { unreachable: true, ..Env::start() }
    }

    fn get(&self, id: AtomId) -> Option<Domain> {
        let facts = self.facts.as_slice();
        facts
            .binary_search_by_key(&id, |&(a, _)| a)
            .ok()
            .and_then(|i| facts.get(i))
            .map(|&(_, d)| d)
    }

    fn set(&mut self, id: AtomId, d: Domain) {
        if d.is_empty() {
            self.unreachable = true;
            return;
        }
        match self.facts.as_slice().binary_search_by_key(&id, |&(a, _)| a) {
            Ok(i) => {
                if let Some(slot) = self.facts.make_mut().get_mut(i) {
                    slot.1 = d;
                }
            }
            Err(i) if self.facts.as_slice().len() < FACT_CAP => {
                self.facts.make_mut().insert(i, (id, d));
            }
            Err(_) => {}
        }
    }

    /// Keeps only what also holds on `other`'s path (the facts after either of two paths).
    pub fn join_with(&mut self, other: &Env) {
        if other.unreachable {
            return;
        }
        if self.unreachable {
            self.clone_from(other);
            return;
        }
        let mut j = 0;
        let theirs = other.facts.as_slice();
        if !self.facts.is_empty() {
            self.facts.make_mut().retain_mut(|(a, da)| {
                while theirs.get(j).is_some_and(|&(b, _)| b < *a) {
                    j += 1;
                }
                match theirs.get(j) {
                    Some(&(b, db)) if b == *a => {
                        *da = da.join(db);
                        true
                    }
                    _ => false,
                }
            });
        }
        self.caplen_min = self.caplen_min.min(other.caplen_min);
        self.caplen_below = self.caplen_below.max(other.caplen_below);
        self.scratch_zero &= other.scratch_zero;
    }

    /// Whether `other` is a copy of this environment, facts shared (every query then gives
    /// the same answer on both; false when unsure).
    pub fn is_copy_of(&self, other: &Env) -> bool {
        self.unreachable == other.unreachable
            && self.caplen_min == other.caplen_min
            && self.caplen_below == other.caplen_below
            && self.scratch_zero == other.scratch_zero
            && self.facts.is_shared_with(&other.facts)
    }

    /// Whether both hold the same facts, entry for entry (every query then gives the same
    /// answer on both).
    pub fn same_as(&self, other: &Env) -> bool {
        self.is_copy_of(other) || {
            self.unreachable == other.unreachable
                && self.caplen_min == other.caplen_min
                && self.caplen_below == other.caplen_below
                && self.scratch_zero == other.scratch_zero
                && self.facts.as_slice() == other.facts.as_slice()
        }
    }

    pub fn note_guard(&mut self, n: u32) {
        self.caplen_min = self.caplen_min.max(u64::from(n));
        self.unreachable |= self.caplen_min >= self.caplen_below;
    }

    /// Fewer than `n` bytes were captured (a `try(guard(n))` failed).
    pub fn note_short(&mut self, n: u32) {
        self.caplen_below = self.caplen_below.min(u64::from(n));
        self.unreachable |= self.caplen_min >= self.caplen_below;
    }
}

/// What a load at a constant offset can be at one point ([`Facts::substitute_known`]): the
/// answer [`Facts::domain`] gives there, for the load only (a load at a constant offset is
/// the whole expression, so its offset and width name it; substituting leaves it as it is,
/// or replaces it by its value).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KnownLoad {
    /// The load's bytes ([`load_span`]).
    span: (u64, u64),
    domain: Domain,
}

impl KnownLoad {
    /// What `e` can be at the point this was found, when `e` is this load.
    pub fn domain_of(&self, e: &Expr) -> Option<Domain> {
        (load_span(e) == Some(self.span)).then_some(self.domain)
    }
}

/// What a test can come out as, and the facts on the exits that were asked for.
pub(crate) struct Learned {
    pub on_true: Option<Env>,
    pub on_false: Option<Env>,
    pub can_be_true: bool,
    pub can_be_false: bool,
}

/// The atoms of one pass plus the queries and updates on environments that need them.
pub(crate) struct Facts {
    atoms: Atoms,
    /// Scratch slots some expression of the filter reads.
    live_slots: u32,
    /// A choice of the walk went the way it did because something may abort (the captured
    /// length known there was too short), and would have gone the other way had it been
    /// known safe: a guard placed later could change this walk's answer (see
    /// [`super::decide::decide_certifying`]). A `Cell`: set from the `&self` queries.
    abort_choice: Cell<bool>,
    /// What the walk changed in its input, for the certificate of a changed walk (see
    /// [`super::decide::decide_certifying`]).
    changes: Cell<Changes>,
    /// The walk's tree has no store, so no part of it has one ([`Facts::set_store_free`]).
    store_free: bool,
    /// A junction takes a leaf's abort answer from the leaf's walk
    /// ([`Facts::set_reuses_walked_aborts`]).
    reuse_walked_aborts: bool,
}

/// What a `decide` walk changed in its input, sorted as its certificate asks: parts the
/// facts decided without a possible abort (a test that cannot fail, decided, so its
/// junction drops it as the neutral constant, or collapses when it is the first part left
/// and the absorbing one), against every other change.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Changes {
    /// A part decided so was dropped (the facts after it are the facts before it).
    pub dropped: bool,
    /// Anything else was changed, or a drop did not meet those conditions.
    pub other: bool,
}

/// Whether `env` holds a fact of `atom` (an expression evaluated on every path here).
fn has_fact(env: &Env, atom: Option<AtomId>) -> bool {
    !env.facts.is_empty() && atom.is_some_and(|id| env.get(id).is_some())
}

impl Facts {
    #[cfg(test)]
    pub fn new(live_slots: u32) -> Facts {
        Facts::with_atoms(live_slots, Atoms::default())
    }

    /// Facts over atoms interned by an earlier walk of the same compile (an atom's id and
    /// what is known of it are its expression's alone, and which id an atom gets decides
    /// nothing: facts are looked up, joined and capped by atom, whatever the order). The
    /// second `decide` of a compile then finds its atoms interned (issue 13: interning,
    /// a hash and a copy of the expression into the table, was ~5% of a small filter's
    /// optimizing).
    pub fn with_atoms(live_slots: u32, atoms: Atoms) -> Facts {
        Facts {
            atoms,
            live_slots,
            abort_choice: Cell::new(false),
            changes: Cell::new(Changes::default()),
            store_free: false,
            reuse_walked_aborts: true,
        }
    }

    /// Tells the walk that its tree has no store (`true`) or may have one: no pass writes a
    /// store where there was none, so every part of a store-free tree, rewritten or not, is
    /// store-free, and [`Facts::store_free`] answers for it without a walk of the part.
    pub fn set_store_free(&mut self, store_free: bool) {
        self.store_free = store_free;
    }

    /// Whether the walk's tree is known to have no store (see [`Facts::set_store_free`]).
    pub fn store_free(&self) -> bool {
        self.store_free
    }

    /// Tells the walk whether a junction may take a leaf's abort answer from the leaf's
    /// walk at the same environment (`true`, the default) or asks again (the tests compare
    /// the two: see `decide::Shortcuts`).
    pub fn set_reuses_walked_aborts(&mut self, reuse: bool) {
        self.reuse_walked_aborts = reuse;
    }

    /// Whether a junction may take a leaf's abort answer from the leaf's walk.
    pub fn reuses_walked_aborts(&self) -> bool {
        self.reuse_walked_aborts
    }

    /// Records a choice made on a "may abort" answer that a longer known captured length
    /// would have turned ([`Facts::abort_choice`]).
    pub fn note_abort_choice(&self) {
        self.abort_choice.set(true);
    }

    /// Whether the walk made such a choice.
    pub fn made_abort_choice(&self) -> bool {
        self.abort_choice.get()
    }

    /// Records a change of the walk's input other than a certified drop ([`Changes`]).
    pub fn note_change(&self) {
        self.changes.set(Changes { other: true, ..self.changes.get() });
    }

    /// Records a dropped part decided without a possible abort ([`Changes`]).
    pub fn note_drop(&self) {
        self.changes.set(Changes { dropped: true, ..self.changes.get() });
    }

    /// What the walk changed so far.
    pub fn changes(&self) -> Changes {
        self.changes.get()
    }

    /// Takes back the changes noted since `before` (see `decide::decided_leaf`).
    pub fn set_changes(&self, before: Changes) {
        self.changes.set(before);
    }

    /// The atoms, for the next walk of the same compile ([`Facts::with_atoms`]).
    pub fn into_atoms(self) -> Atoms {
        self.atoms
    }

    /// A store to this slot has no effect anyone can see (beyond evaluating its value).
    pub fn is_dead_store(&self, slot: u8) -> bool {
        slot < SCRATCH_SLOTS && self.live_slots & (1u32 << slot) == 0
    }

    /// What `e` can evaluate to at a point with facts `env`.
    pub fn domain(&self, env: &Env, e: &Expr) -> Domain {
        self.domain_of_atom(env, e, || self.atoms.lookup(e))
    }

    /// [`Facts::domain`] of `e` and its atom, interned when new: one lookup of `e` for both,
    /// where asking one after the other looked it up twice (issue 13: `refine` and
    /// `refine_masked`; `learn_evaluated` likewise asks once; a lookup that compares with the
    /// IPv4 header length's atoms cost ~280 instructions, bench/records/2026-12-02-compile-44.txt).
    fn domain_and_atom(&mut self, env: &Env, e: &Expr) -> (Domain, AtomId) {
        let found = self.atoms.lookup(e);
        let d = self.domain_of_atom(env, e, || found);
        (d, found.unwrap_or_else(|| self.atoms.add(e)))
    }

    /// [`Facts::domain`], with `e`'s atom (if any) from `atom`, asked only when a fact could
    /// narrow the answer.
    fn domain_of_atom(&self, env: &Env, e: &Expr, atom: impl FnOnce() -> Option<AtomId>) -> Domain {
        let structural = match e {
            Expr::Const(c) => return Domain::exact(*c),
            Expr::WireLen => Domain::FULL,
            Expr::Scratch(k) => {
                let initial =
                    u32::from(*k) < u32::from(SCRATCH_SLOTS) && env.scratch_zero & (1u32 << k) != 0;
                if initial {
                    return Domain::exact(0);
                }
                Domain::FULL
            }
            Expr::Load { offset, size } => {
                let mut d = Domain::of_size(*size);
                if let Expr::Const(k) = **offset {
                    d = d.meet(self.overlapping_bits(env, k, size.bytes()));
                }
                d
            }
            Expr::Binary { op, lhs, rhs } => {
                domain::binary(*op, self.domain(env, lhs), self.domain(env, rhs))
            }
            Expr::Neg(x) => domain::neg(self.domain(env, x)),
        };
        if env.facts.is_empty() {
            return structural;
        }
        match atom().and_then(|id| env.get(id)) {
            Some(d) => structural.meet(d),
            None => structural,
        }
    }

    /// Known bits of the bytes `[k, k + n)` taken from facts about other loads at constant
    /// offsets that overlap them (`ether[12:2] == 0x800` tells `ether[12] == 8`).
    fn overlapping_bits(&self, env: &Env, k: u32, n: u32) -> Domain {
        let (start, end) = (u64::from(k), u64::from(k) + u64::from(n));
        let (mut zeros, mut ones) = (0u32, 0u32);
        for &(id, d) in env.facts.as_slice() {
            let Some((s2, e2)) = self.atoms.info(id).and_then(|i| i.const_load) else { continue };
            if e2 <= start || end <= s2 || (d.zeros | d.ones) == 0 {
                continue;
            }
            for byte in start.max(s2)..end.min(e2) {
                // Big-endian: the last byte of a load is its least significant.
                let src_shift = 8 * (e2 - 1 - byte);
                let dst_shift = 8 * (end - 1 - byte);
                let z = (u64::from(d.zeros) >> src_shift) & 0xff;
                let o = (u64::from(d.ones) >> src_shift) & 0xff;
                zeros |= u32::try_from(z << dst_shift).unwrap_or(0);
                ones |= u32::try_from(o << dst_shift).unwrap_or(0);
            }
        }
        if zeros | ones == 0 {
            return Domain::FULL;
        }
        Domain::FULL.with_bits(zeros, ones)
    }

    fn evaluated(&self, env: &Env, e: &Expr) -> bool {
        has_fact(env, self.atoms.lookup(e))
    }

    /// Can evaluating `e` abort at a point with facts `env`?
    pub fn expr_can_abort(&self, env: &Env, e: &Expr) -> bool {
        match e {
            Expr::Const(_) | Expr::WireLen => false,
            Expr::Scratch(k) => *k >= SCRATCH_SLOTS,
            Expr::Load { offset, size } => {
                if let Expr::Const(k) = **offset {
                    // (a load evaluated before on this path raised caplen_min to its end)
                    return u64::from(k) + u64::from(size.bytes()) > env.caplen_min;
                }
                if self.evaluated(env, e) {
                    return false;
                }
                // One walk of the offset for both of its questions: asked one after the other,
                // each walked it and looked its nodes up (issue 13: a tenth of `decide` on
                // `port 22`, whose IPv4 ports load at the header length).
                let (d_offset, offset_aborts) = self.domain_and_abort(env, offset);
                offset_aborts || u64::from(d_offset.hi) + u64::from(size.bytes()) > env.caplen_min
            }
            Expr::Binary { op, lhs, rhs } => {
                if self.evaluated(env, e) {
                    return false;
                }
                self.expr_can_abort(env, lhs)
                    || self.expr_can_abort(env, rhs)
                    || (matches!(op, BinOp::Div | BinOp::Mod)
                        && self.domain(env, rhs).may_be_zero())
            }
            Expr::Neg(x) => self.expr_can_abort(env, x),
        }
    }

    /// [`Facts::domain`] and [`Facts::expr_can_abort`] of `e` in one walk, the fact about
    /// each node looked up once: the answers [`Facts::substituted`] gives without rewriting
    /// (tested against all three).
    fn domain_and_abort(&self, env: &Env, e: &Expr) -> (Domain, bool) {
        let fact = if env.facts.is_empty() || matches!(e, Expr::Const(_)) {
            None
        } else {
            self.atoms.lookup(e).and_then(|id| env.get(id))
        };
        let with_fact = |structural: Domain| fact.map_or(structural, |d| structural.meet(d));
        match e {
            Expr::Const(c) => (Domain::exact(*c), false),
            Expr::WireLen => (with_fact(Domain::FULL), false),
            Expr::Scratch(k) => {
                let initial =
                    u32::from(*k) < u32::from(SCRATCH_SLOTS) && env.scratch_zero & (1u32 << k) != 0;
                let d = if initial { Domain::exact(0) } else { with_fact(Domain::FULL) };
                (d, *k >= SCRATCH_SLOTS)
            }
            Expr::Load { offset, size } => {
                let structural = Domain::of_size(*size);
                if let Expr::Const(k) = **offset {
                    let d = structural.meet(self.overlapping_bits(env, k, size.bytes()));
                    return (with_fact(d), u64::from(k) + u64::from(size.bytes()) > env.caplen_min);
                }
                let (d_offset, offset_aborts) = self.domain_and_abort(env, offset);
                // (evaluated before on this path: it cannot abort now)
                let aborts = fact.is_none()
                    && (offset_aborts
                        || u64::from(d_offset.hi) + u64::from(size.bytes()) > env.caplen_min);
                (with_fact(structural), aborts)
            }
            Expr::Binary { op, lhs, rhs } => {
                let (d_lhs, lhs_aborts) = self.domain_and_abort(env, lhs);
                let (d_rhs, rhs_aborts) = self.domain_and_abort(env, rhs);
                let aborts = fact.is_none()
                    && (lhs_aborts
                        || rhs_aborts
                        || (matches!(op, BinOp::Div | BinOp::Mod) && d_rhs.may_be_zero()));
                (with_fact(domain::binary(*op, d_lhs, d_rhs)), aborts)
            }
            Expr::Neg(x) => {
                let (d_x, aborts) = self.domain_and_abort(env, x);
                (with_fact(domain::neg(d_x)), aborts)
            }
        }
    }

    /// Can evaluating `p` abort at a point with facts `env`? Conservative: facts learned
    /// inside `p` are not used.
    pub fn pred_can_abort(&self, env: &Env, p: &Pred) -> bool {
        match p {
            Pred::Const(_) => false,
            Pred::Cmp { lhs, rhs, .. } => {
                self.expr_can_abort(env, lhs) || self.expr_can_abort(env, rhs)
            }
            Pred::In { value, .. } => self.expr_can_abort(env, value),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().any(|q| self.pred_can_abort(env, q)),
            Pred::Not(q) => self.pred_can_abort(env, q),
            Pred::Store { slot, value } => {
                *slot >= SCRATCH_SLOTS || self.expr_can_abort(env, value)
            }
            Pred::Guard(n) => u64::from(*n) > env.caplen_min,
            // Its loads are at offsets only the packet knows, and its hops may run out.
            Pred::Chain(_) | Pred::Pairs(_) => true,
            Pred::Try(_) => false,
        }
    }

    /// Neither aborts nor writes scratch: may be moved among its kind, or dropped.
    pub fn is_free(&self, env: &Env, p: &Pred) -> bool {
        (self.store_free || !super::analysis::has_store(p)) && !self.pred_can_abort(env, p)
    }

    /// Records that `e` was evaluated without aborting.
    pub fn learn_evaluated(&mut self, env: &mut Env, e: &Expr) {
        match e {
            Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => {}
            Expr::Load { offset, size } => {
                if let Expr::Const(k) = **offset {
                    // Evaluated, it says only that the packet holds its bytes (the captured
                    // length covers it: no atom); no query of the constant offset's domain
                    // for that (issue 13).
                    let end = u64::from(k) + u64::from(size.bytes());
                    env.caplen_min = env.caplen_min.max(end);
                    return;
                }
                self.learn_evaluated(env, offset);
                let end = u64::from(self.domain(env, offset).lo) + u64::from(size.bytes());
                env.caplen_min = env.caplen_min.max(end);
                // (the offset is not a constant: that case returned above) One lookup of
                // the load for the three questions: evaluated, its domain, its atom.
                let found = self.atoms.lookup(e);
                if !has_fact(env, found) {
                    // No fact of its atom to narrow the domain with.
                    let d = self.domain_of_atom(env, e, || None);
                    env.set(found.unwrap_or_else(|| self.atoms.add(e)), d);
                }
            }
            Expr::Binary { op, lhs, rhs } => {
                self.learn_evaluated(env, lhs);
                self.learn_evaluated(env, rhs);
                if matches!(op, BinOp::Div | BinOp::Mod) {
                    self.refine(env, rhs, CmpOp::Ne, 0, true);
                }
            }
            Expr::Neg(x) => self.learn_evaluated(env, x),
        }
    }

    /// Narrows the atom `e` by `(e op c) == truth`, and what that says about the parts of a
    /// masked atom.
    fn refine(&mut self, env: &mut Env, e: &Expr, op: CmpOp, c: u32, truth: bool) {
        if matches!(e, Expr::Const(_)) {
            return;
        }
        let (d, id) = self.domain_and_atom(env, e);
        env.set(id, d.refine(op, c, truth));
        if let Expr::Binary { op: BinOp::And, lhs, rhs } = e {
            if let Expr::Const(m) = **rhs {
                self.refine_masked(env, lhs, m, op, c, truth);
            }
        }
    }

    /// `(x & m) op c` is `truth`: the bits of `x` it pins down.
    fn refine_masked(&mut self, env: &mut Env, x: &Expr, m: u32, op: CmpOp, c: u32, truth: bool) {
        let positive = match (op, truth) {
            (CmpOp::Eq, t) | (CmpOp::Ne, t) => (op == CmpOp::Eq) == t,
            (CmpOp::Set, t) => {
                self.refine(env, x, CmpOp::Set, m & c, t);
                return;
            }
            _ => return,
        };
        if c & !m != 0 {
            return; // `(x & m) == c` cannot hold; the atom itself is already contradictory
        }
        if !positive && !m.is_power_of_two() {
            return; // (nothing pinned down: `x` is not made an atom for it)
        }
        let (d, id) = self.domain_and_atom(env, x);
        let d = if positive {
            d.with_bits(m & !c, c)
        } else if c == 0 {
            // A one-bit field that is not c is the other value.
            d.with_bits(0, m)
        } else {
            d.with_bits(m, 0)
        };
        env.set(id, d);
    }

    /// What `lhs op rhs` can come out as here, and the facts on the exits asked for.
    /// `known`: what substituting an operand found ([`Facts::substitute_known`]), used when
    /// the tested value is that load.
    #[allow(clippy::too_many_arguments)] // the test, what is known of it, the exits wanted
    pub fn learn_cmp(
        &mut self,
        env: &Env,
        op: CmpOp,
        lhs: &Expr,
        rhs: &Expr,
        known: Option<KnownLoad>,
        want_true: bool,
        want_false: bool,
    ) -> Learned {
        let (atom, op, c) = match (lhs, rhs) {
            (_, Expr::Const(c)) => (lhs, op, *c),
            (Expr::Const(c), _) => (rhs, domain::flip(op), *c),
            _ => {
                let r = domain::compare(op, self.domain(env, lhs), self.domain(env, rhs));
                let (can_be_true, can_be_false) = (r != Some(false), r != Some(true));
                let mut exit = |wanted: bool, possible: bool| {
                    wanted.then(|| {
                        let mut e = env.clone();
                        self.learn_evaluated(&mut e, lhs);
                        self.learn_evaluated(&mut e, rhs);
                        e.unreachable |= !possible;
                        e
                    })
                };
                let on_true = exit(want_true, can_be_true);
                let on_false = exit(want_false, can_be_false);
                return Learned { on_true, on_false, can_be_true, can_be_false };
            }
        };
        // One domain for both exits; the atom's lookup for it (when made) kept for the exits
        // (`Some(None)`: not an atom then, though `learn_evaluated` below may make it one).
        let mut found = None;
        let d = match known.and_then(|k| k.domain_of(atom)) {
            Some(d) => d,
            None => self.domain_of_atom(env, atom, || *found.insert(self.atoms.lookup(atom))),
        };
        let (d_true, d_false) = (d.refine(op, c, true), d.refine(op, c, false));
        let mut learned = Learned {
            on_true: None,
            on_false: None,
            can_be_true: !d_true.is_empty(),
            can_be_false: !d_false.is_empty(),
        };
        if !want_true && !want_false {
            return learned;
        }
        let mut base = env.clone();
        self.learn_evaluated(&mut base, lhs);
        self.learn_evaluated(&mut base, rhs);
        // (atoms are never removed: one found before is the same atom now)
        let id = match found {
            Some(Some(id)) => id,
            _ => self.atoms.intern(atom),
        };
        let mask = match atom {
            Expr::Binary { op: BinOp::And, lhs: x, rhs: m } => match **m {
                Expr::Const(m) => Some((&**x, m)),
                _ => None,
            },
            _ => None,
        };
        let mut exit = |mut e: Env, d: Domain, truth: bool| {
            e.set(id, d);
            if let Some((x, m)) = mask {
                self.refine_masked(&mut e, x, m, op, c, truth);
            }
            e
        };
        match (want_true, want_false) {
            (true, true) => {
                learned.on_true = Some(exit(base.clone(), d_true, true));
                learned.on_false = Some(exit(base, d_false, false));
            }
            (true, false) => learned.on_true = Some(exit(base, d_true, true)),
            _ => learned.on_false = Some(exit(base, d_false, false)),
        }
        learned.can_be_true &= learned.on_true.as_ref().is_none_or(|e| !e.unreachable);
        learned.can_be_false &= learned.on_false.as_ref().is_none_or(|e| !e.unreachable);
        learned
    }

    /// What `value in set` can come out as here, and the facts on the exits asked for; `d`
    /// is what `value` can be here ([`Facts::domain`]: the caller asked it already).
    pub fn learn_in(
        &mut self,
        env: &Env,
        value: &Expr,
        d: Domain,
        set: &ValueSet,
        want_true: bool,
        want_false: bool,
    ) -> Learned {
        let (d_true, d_false) = (d.refine_in(set, true), d.refine_in(set, false));
        let mut learned = Learned {
            on_true: None,
            on_false: None,
            can_be_true: !d_true.is_empty(),
            can_be_false: !d_false.is_empty(),
        };
        if !want_true && !want_false {
            return learned;
        }
        let mut base = env.clone();
        self.learn_evaluated(&mut base, value);
        let id = (!matches!(value, Expr::Const(_))).then(|| self.atoms.intern(value));
        let exit = |mut e: Env, d: Domain, possible: bool| {
            match id {
                Some(id) => e.set(id, d),
                None => e.unreachable |= !possible,
            }
            e
        };
        let (t, f) = (learned.can_be_true, learned.can_be_false);
        match (want_true, want_false) {
            (true, true) => {
                learned.on_true = Some(exit(base.clone(), d_true, t));
                learned.on_false = Some(exit(base, d_false, f));
            }
            (true, false) => learned.on_true = Some(exit(base, d_true, t)),
            _ => learned.on_false = Some(exit(base, d_false, f)),
        }
        learned
    }

    /// Facts after something that may have written the slots in `mask` (bit per slot):
    /// nothing is known of them, or of any expression reading them.
    pub fn forget_slots(&self, env: &mut Env, mask: u32) {
        let atoms = &self.atoms;
        env.facts.remove_if(|id| atoms.info(id).is_some_and(|i| i.scratch & mask != 0));
        env.scratch_zero &= !mask;
    }

    /// Facts after `Store { slot, value }`: the slot now holds what `value` was.
    pub fn learn_store(&mut self, env: &mut Env, slot: u8, value: &Expr) {
        self.learn_evaluated(env, value);
        let d = self.domain(env, value);
        let Some(bit) = 1u32.checked_shl(u32::from(slot)) else { return };
        let atoms = &self.atoms;
        env.facts.remove_if(|id| atoms.info(id).is_some_and(|i| i.scratch & bit != 0));
        env.scratch_zero &= !bit;
        if slot < SCRATCH_SLOTS {
            let id = self.atoms.intern(&Expr::Scratch(slot));
            env.set(id, d);
        }
    }

    /// `e` with every sub-expression whose value is known (and whose evaluation cannot
    /// abort) replaced by that value, then folded.
    pub fn substitute(&self, env: &Env, e: Expr) -> Expr {
        self.substituted(env, e).0
    }

    /// [`Facts::substitute`], and when `e` is a load at a constant offset, what it can be
    /// here: the test of it asks the same question next ([`Facts::learn_cmp`], `In`'s
    /// range check), and answering it again (the facts scanned for overlapping loads, the
    /// atom looked up, two meets) was about a tenth of `decide` on `host A and udp` (issue
    /// 13, bench/records/2026-11-30-compile-20.txt).
    ///
    /// The third answer is whether the result may abort here, when the walk could tell
    /// ([`Facts::substitute_answering`]).
    pub fn substitute_known(&self, env: &Env, e: Expr) -> (Expr, Option<KnownLoad>, Option<bool>) {
        let span = load_span(&e);
        let (e, domain, aborts, kept) = self.substituted(env, e);
        (e, span.map(|span| KnownLoad { span, domain }), kept.then_some(aborts))
    }

    /// [`Facts::substitute`], and [`Facts::expr_can_abort`] of the result when the walk
    /// gave `e` back as it was and folding ([`super::fold::expr`]) would too: its answer is then
    /// of the result, and asking again walks the expression once more at the same facts
    /// (issue 13: twice per IPv4 port test on `port 22`, ~1,400 instructions each; a leaf
    /// asks it of its operands for the junction above, bench/records/2026-12-01-compile-34.txt).
    /// `None` when something was rewritten: a rewritten expression can lose an atom's fact.
    pub fn substitute_answering(&self, env: &Env, e: Expr) -> (Expr, Option<bool>) {
        let (e, _, aborts, kept) = self.substituted(env, e);
        (e, kept.then_some(aborts))
    }

    /// [`Facts::substitute`], with what [`Facts::domain`] and [`Facts::expr_can_abort`] say
    /// of the expression as given. One walk bottom-up: asking both at every level of the
    /// expression (as a top-down rewrite must) costs its size times its depth, and each
    /// domain a `normalize` (issue 13: about a sixth of `decide` on a small filter). The
    /// answers are the same: both queries are structural, from the parts' answers and the
    /// fact (if any) about the node itself, looked up once. The last answer, `kept`: the
    /// result is `e` as given, and [`super::fold::expr`] gives it back unchanged (every binary node
    /// passes `fold::keeps_shape`, no negation of a constant or of a negation), so the
    /// other answers are of the result too.
    fn substituted(&self, env: &Env, e: Expr) -> (Expr, Domain, bool, bool) {
        // The fact about the node as given (before its parts are rewritten).
        let fact = if env.facts.is_empty() || matches!(e, Expr::Const(_)) {
            None
        } else {
            self.atoms.lookup(&e).and_then(|id| env.get(id))
        };
        let with_fact = |structural: Domain| match fact {
            Some(d) => structural.meet(d),
            None => structural,
        };
        let (e, d, aborts, kept) = match e {
            Expr::Const(c) => return (e, Domain::exact(c), false, true),
            Expr::WireLen => (e, with_fact(Domain::FULL), false, true),
            Expr::Scratch(k) => {
                let initial =
                    u32::from(k) < u32::from(SCRATCH_SLOTS) && env.scratch_zero & (1u32 << k) != 0;
                let d = if initial { Domain::exact(0) } else { with_fact(Domain::FULL) };
                (e, d, k >= SCRATCH_SLOTS, true)
            }
            Expr::Load { mut offset, size } => {
                let mut structural = Domain::of_size(size);
                let (aborts, kept) = if let Expr::Const(k) = *offset {
                    structural = structural.meet(self.overlapping_bits(env, k, size.bytes()));
                    (u64::from(k) + u64::from(size.bytes()) > env.caplen_min, true)
                } else {
                    let inner = std::mem::replace(&mut *offset, Expr::Const(0));
                    let (inner, d_offset, offset_aborts, kept) = self.substituted(env, inner);
                    *offset = inner;
                    // (evaluated before on this path: it cannot abort now)
                    let aborts = fact.is_none()
                        && (offset_aborts
                            || u64::from(d_offset.hi) + u64::from(size.bytes()) > env.caplen_min);
                    (aborts, kept)
                };
                (Expr::Load { offset, size }, with_fact(structural), aborts, kept)
            }
            Expr::Binary { op, mut lhs, mut rhs } => {
                // Rewritten in their boxes (`fold::binary_boxed` keeps them when it can).
                let (l, d_lhs, lhs_aborts, lhs_kept) =
                    self.substituted(env, std::mem::replace(&mut *lhs, Expr::Const(0)));
                let (r, d_rhs, rhs_aborts, rhs_kept) =
                    self.substituted(env, std::mem::replace(&mut *rhs, Expr::Const(0)));
                (*lhs, *rhs) = (l, r);
                let d = with_fact(domain::binary(op, d_lhs, d_rhs));
                let aborts = fact.is_none()
                    && (lhs_aborts
                        || rhs_aborts
                        || (matches!(op, BinOp::Div | BinOp::Mod) && d_rhs.may_be_zero()));
                if let Some(v) = d.as_const().filter(|_| !aborts) {
                    self.note_change();
                    return (Expr::Const(v), d, aborts, false);
                }
                if lhs_kept && rhs_kept && super::fold::keeps_shape(op, &lhs, &rhs) {
                    (Expr::Binary { op, lhs, rhs }, d, aborts, true)
                } else {
                    (super::fold::binary_boxed(op, lhs, rhs), d, aborts, false)
                }
            }
            Expr::Neg(mut x) => {
                let (y, d_x, aborts, x_kept) =
                    self.substituted(env, std::mem::replace(&mut *x, Expr::Const(0)));
                let d = with_fact(domain::neg(d_x));
                if let Some(v) = d.as_const().filter(|_| !aborts) {
                    self.note_change();
                    return (Expr::Const(v), d, aborts, false);
                }
                // (`fold::expr` rewrites only a negated constant or negation)
                let kept = x_kept && !matches!(y, Expr::Const(_) | Expr::Neg(_));
                *x = y;
                if kept {
                    (Expr::Neg(x), d, aborts, true)
                } else {
                    (super::fold::expr(Expr::Neg(x)), d, aborts, false)
                }
            }
        };
        match d.as_const() {
            Some(v) if !aborts => {
                self.note_change();
                (Expr::Const(v), d, aborts, false)
            }
            Some(_) => {
                // Known, but kept for its possible abort: a guard would let it go.
                self.note_abort_choice();
                (e, d, aborts, kept)
            }
            None => (e, d, aborts, kept),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ir::Size;

    /// Dropped lists are kept for the next copies emptied, only when no other environment
    /// holds them, and no more than [`SPARE_LISTS`] of them; a copy made from a kept list
    /// holds exactly the facts copied.
    #[test]
    fn spare_lists_come_back_empty_and_only_from_their_last_holder() {
        let spares = || SPARE.with(|s| s.borrow().len());
        SPARE.with(|s| s.borrow_mut().clear());
        let mut a = Env::start();
        for id in 0..5 {
            a.set(id, Domain::exact(id + 100));
        }
        // Shared with a copy: dropping one holder keeps nothing, the other reads its facts.
        let b = a.clone();
        drop(a);
        assert_eq!(spares(), 0, "a list another environment holds was taken");
        assert_eq!(b.get(3), Some(Domain::exact(103)));
        drop(b);
        assert_eq!(spares(), 1, "the last holder's list was not kept");
        // A copy draws the kept list, emptied: it holds what it copied and the new fact.
        let mut c = Env::start();
        c.set(7, Domain::exact(1));
        assert_eq!(spares(), 0, "a new list did not take the kept one");
        let mut d = c.clone();
        d.set(9, Domain::exact(2));
        assert_eq!(d.facts.as_slice(), &[(7, Domain::exact(1)), (9, Domain::exact(2))]);
        assert_eq!(c.facts.as_slice(), &[(7, Domain::exact(1))]);
        // At most SPARE_LISTS are kept.
        let many: Vec<Env> = (0..SPARE_LISTS as u32 + 10)
            .map(|i| {
                let mut e = Env::start();
                e.set(i, Domain::exact(i));
                e
            })
            .collect();
        drop(many);
        assert_eq!(spares(), SPARE_LISTS);
        let mut e = Env::start();
        e.set(1, Domain::exact(1));
        assert_eq!(e.facts.as_slice(), &[(1, Domain::exact(1))], "a kept list was not emptied");
    }

    /// The fact lists' copy on write: setting, adding, joining and dropping facts give what a
    /// plain sorted map gives, on lists shared with other environments (which keep theirs)
    /// and on lists of their own, up to the cap.
    #[test]
    fn fact_lists_change_as_a_map_does() {
        use std::collections::BTreeMap;
        type Model = BTreeMap<AtomId, Domain>;
        let listed = |env: &Env| env.facts.as_slice().to_vec();
        let modelled = |m: &Model| m.iter().map(|(&a, &d)| (a, d)).collect::<Vec<_>>();
        let mut seed = 0x2545_f491_u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let mut envs = vec![(Env::start(), Model::new())];
        for _ in 0..20_000 {
            let k = usize::try_from(next(envs.len() as u64)).unwrap_or(0);
            // Half the steps change a copy (its list shared), half the environment itself
            // (its list its own unless a copy made before shares it).
            let own = next(2) == 0;
            let (mut env, mut model) = if own {
                std::mem::replace(&mut envs[k], (Env::start(), Model::new()))
            } else {
                envs[k].clone()
            };
            let id = u32::try_from(next(64)).unwrap_or(0);
            let lo = u32::try_from(next(8)).unwrap_or(0);
            let d = Domain::range(lo, lo + u32::try_from(next(4)).unwrap_or(0));
            // Mostly sets, so that lists reach the cap.
            match next(16) {
                0..=12 => {
                    env.set(id, d);
                    if model.contains_key(&id) || model.len() < FACT_CAP {
                        model.insert(id, d);
                    }
                }
                13 | 14 => {
                    let j = usize::try_from(next(envs.len() as u64)).unwrap_or(0);
                    let (other, theirs) = &envs[j];
                    env.join_with(other);
                    model = model
                        .iter()
                        .filter_map(|(a, &da)| theirs.get(a).map(|&db| (*a, da.join(db))))
                        .collect();
                }
                _ => {
                    let m = u32::try_from(next(7)).unwrap_or(0) + 2;
                    env.facts.remove_if(|a| a % m == 0);
                    model.retain(|a, _| a % m != 0);
                }
            }
            assert_eq!(listed(&env), modelled(&model));
            for (other, theirs) in &envs {
                assert_eq!(listed(other), modelled(theirs), "a shared list changed");
            }
            if own || next(2) == 0 {
                envs[k] = (env, model);
            } else if envs.len() < 64 {
                envs.push((env, model));
            } else {
                envs[k] = (env, model);
            }
        }
        // At the cap: a new atom is dropped, a known one still changes (on a shared list).
        let mut full = Env::start();
        let cap = u32::try_from(FACT_CAP).unwrap_or(0);
        for id in 0..cap + 3 {
            full.set(id, Domain::exact(id));
        }
        let copy = full.clone();
        full.set(cap + 4, Domain::exact(1));
        full.set(5, Domain::exact(9));
        let want: Vec<_> =
            (0..cap).map(|id| (id, Domain::exact(if id == 5 { 9 } else { id }))).collect();
        assert_eq!(listed(&full), want);
        assert_eq!(copy.get(5), Some(Domain::exact(5)));
    }

    /// The bottom-up walk of [`Facts::substituted`] answers what the queries it stands in for
    /// answer, on expressions with facts about themselves and their parts, and gives the
    /// value of an expression it knows.
    #[test]
    fn substituting_answers_as_the_queries_do() {
        let mut facts = Facts::new(u32::MAX);
        let ihl = Expr::load_at(14, Size::Byte).and_mask(0xf);
        let offset = Expr::binary(BinOp::Shl, ihl.clone(), Expr::Const(2)).plus(14);
        let port = Expr::load(offset.clone(), Size::Half);
        let mut env = Env::start();
        env.note_guard(20);
        // Learned on the path: the header length is 5 words, the slot holds 7, the
        // variable-offset load was evaluated.
        let learned = facts.learn_cmp(&env, CmpOp::Eq, &ihl, &Expr::Const(5), None, true, false);
        let mut known = learned.on_true.unwrap_or_else(Env::unreachable);
        facts.learn_store(&mut known, 3, &Expr::Const(7));
        let mut evaluated = env.clone();
        facts.learn_evaluated(&mut evaluated, &port);
        // The variable-offset load tested: its value is known.
        let port_is_22 =
            facts.learn_cmp(&env, CmpOp::Eq, &port, &Expr::Const(22), None, true, false);
        let port_known = port_is_22.on_true.unwrap_or_else(Env::unreachable);
        let exprs = [
            Expr::Const(9),
            Expr::WireLen,
            Expr::Scratch(3),
            Expr::Scratch(4),
            Expr::Scratch(SCRATCH_SLOTS),
            ihl.clone(),
            offset.clone(),
            port.clone(),
            Expr::load(Expr::Scratch(3), Size::Word),
            Expr::binary(BinOp::Div, Expr::Const(100), Expr::Scratch(3)),
            Expr::binary(BinOp::Mod, port.clone(), ihl.clone()),
            Expr::Neg(Box::new(offset.clone())),
            Expr::Neg(Box::new(Expr::Scratch(3))),
            Expr::load_at(30, Size::Word),
            // variable offsets within variable offsets, a division that may fail in one
            Expr::load(port.clone(), Size::Byte),
            Expr::load(Expr::binary(BinOp::Div, offset.clone(), Expr::Scratch(4)), Size::Byte),
            Expr::load(Expr::Scratch(3).plus(10), Size::Half),
            Expr::Neg(Box::new(port.clone())),
        ];
        let mut constants = 0;
        for env in [&Env::start(), &env, &known, &evaluated, &port_known] {
            for e in &exprs {
                let (got, d, aborts, _) = facts.substituted(env, e.clone());
                assert_eq!(d, facts.domain(env, e), "{e:?}");
                assert_eq!(aborts, facts.expr_can_abort(env, e), "{e:?}");
                assert_eq!(facts.domain_and_abort(env, e), (d, aborts), "{e:?}");
                if let (Some(v), false) = (d.as_const(), aborts) {
                    assert_eq!(got, Expr::Const(v), "{e:?}");
                    constants += usize::from(!matches!(e, Expr::Const(_)));
                }
            }
        }
        // The facts decided some (the header length, the slot, the offset from them).
        assert!(constants >= 4, "{constants}");
    }

    /// Atoms are found again by equal expressions, loads at constant offsets by their bytes
    /// (offset and width), and no expression finds another's atom.
    #[test]
    fn atoms_are_found_by_equal_expressions_only() {
        let ihl = Expr::load_at(14, Size::Byte).and_mask(0xf);
        let exprs = [
            Expr::load_at(12, Size::Half),
            Expr::load_at(12, Size::Byte),
            Expr::load_at(13, Size::Byte),
            Expr::load_at(12, Size::Word),
            Expr::load_at(14, Size::Byte),
            Expr::load(Expr::Scratch(3).plus(12), Size::Half),
            Expr::load(ihl.clone(), Size::Half),
            ihl,
            Expr::Scratch(3),
            Expr::WireLen,
        ];
        let mut atoms = Atoms::with_room(2);
        let ids: Vec<AtomId> = exprs.iter().map(|e| atoms.intern(e)).collect();
        for (i, e) in exprs.iter().enumerate() {
            assert_eq!(atoms.lookup(&e.clone()), ids.get(i).copied(), "{e:?}");
            assert_eq!(atoms.intern(e), ids[i], "{e:?}");
            for (j, other) in exprs.iter().enumerate() {
                assert_eq!(ids[i] == ids[j], i == j, "{e:?} {other:?}");
            }
        }
        assert_eq!(atoms.lookup(&Expr::load_at(16, Size::Half)), None);
        assert_eq!(atoms.lookup(&Expr::Const(12)), None);
    }

    /// [`Atoms::lookup`] before compile-31: the map probed for every expression (no
    /// [`Atoms::key_bits`]). The oracle for the one that consults the bits first.
    fn lookup_probing(atoms: &Atoms, e: &Expr) -> Option<AtomId> {
        if atoms.by_key.is_empty() {
            return None;
        }
        let span = load_span(e);
        let mut next = atoms.by_key.get(&shallow_key(e)).copied();
        while let Some(id) = next {
            let info = atoms.info(id)?;
            let same = match info.code {
                Some((start, end)) => {
                    atoms.codes.get(start..end).is_some_and(|c| expr_matches(e, c))
                }
                None => span.is_some() && info.const_load == span,
            };
            if same {
                return Some(id);
            }
            next = info.same_key;
        }
        None
    }

    /// A random expression of the shapes the pass asks about, from a few leaves, so that
    /// expressions repeat and many share a shallow key (equal top two levels) but differ
    /// below.
    pub(in crate::opt) fn random_expr(rng: &mut weir_testkit::SplitMix64, depth: u32) -> Expr {
        let leaf = |rng: &mut weir_testkit::SplitMix64| match rng.below(4) {
            0 => Expr::Const([0, 2, 14, 15, 0x1fff][rng.below_usize(5)]),
            1 => Expr::load_at(
                12 + rng.below(4) as u32,
                [Size::Byte, Size::Half][rng.below_usize(2)],
            ),
            2 => Expr::Scratch(rng.below(3) as u8),
            _ => Expr::WireLen,
        };
        if depth == 0 || rng.chance(30) {
            return leaf(rng);
        }
        match rng.below(3) {
            0 => Expr::load(
                random_expr(rng, depth - 1),
                [Size::Byte, Size::Half][rng.below_usize(2)],
            ),
            1 => Expr::Neg(Box::new(random_expr(rng, depth - 1))),
            _ => Expr::Binary {
                op: [BinOp::Add, BinOp::And, BinOp::Shl][rng.below_usize(3)],
                lhs: Box::new(random_expr(rng, depth - 1)),
                rhs: Box::new(random_expr(rng, depth - 1)),
            },
        }
    }

    /// [`expr_matches`] (read directly against the numbers) says that a recording is of an
    /// expression exactly when the two expressions are equal (`==`), and refuses a recording
    /// cut short or run on: random pairs, many of them equal or alike at the top.
    #[test]
    fn a_recorded_expression_matches_its_equals_only() {
        let mut rng = weir_testkit::SplitMix64::new(0xc044);
        let (mut equal, mut unequal) = (0, 0);
        for _ in 0..20_000 {
            let e = random_expr(&mut rng, 3);
            let f = if rng.chance(25) { e.clone() } else { random_expr(&mut rng, 3) };
            let mut code = Vec::new();
            record_expr(&f, &mut code);
            assert_eq!(expr_matches(&e, &code), e == f, "{e:?} {f:?}");
            // One field changed anywhere in the tree (an operator, a width, a constant, a
            // slot, a kind): the rest equal, so only that field can tell them apart.
            let g = one_field_changed(&e, &mut rng);
            let mut other = Vec::new();
            record_expr(&g, &mut other);
            assert_ne!(e, g);
            assert!(!expr_matches(&e, &other), "{e:?} {g:?}");
            if e == f {
                equal += 1;
            } else {
                unequal += 1;
            }
            assert!(!expr_matches(&e, &code[..code.len() - 1]), "{e:?} cut short");
            code.push(16);
            assert!(!expr_matches(&e, &code), "{e:?} run on");
        }
        assert!(equal > 4_000 && unequal > 10_000, "{equal} {unequal}");
    }

    /// `e` with one field of one node changed (chosen at random), the rest the same.
    pub(in crate::opt) fn one_field_changed(e: &Expr, rng: &mut weir_testkit::SplitMix64) -> Expr {
        let other_size = |s: &Size| if *s == Size::Byte { Size::Half } else { Size::Byte };
        match e {
            Expr::Const(c) => Expr::Const(c ^ 1),
            Expr::WireLen => Expr::Const(0),
            Expr::Scratch(k) => Expr::Scratch(k ^ 1),
            Expr::Load { offset, size } => {
                if rng.chance(50) {
                    Expr::Load { offset: offset.clone(), size: other_size(size) }
                } else {
                    Expr::load(one_field_changed(offset, rng), *size)
                }
            }
            Expr::Neg(x) => Expr::Neg(Box::new(one_field_changed(x, rng))),
            Expr::Binary { op, lhs, rhs } => match rng.below(3) {
                0 => Expr::Binary {
                    op: if *op == BinOp::Add { BinOp::Shl } else { BinOp::Add },
                    lhs: lhs.clone(),
                    rhs: rhs.clone(),
                },
                1 => Expr::Binary {
                    op: *op,
                    lhs: Box::new(one_field_changed(lhs, rng)),
                    rhs: rhs.clone(),
                },
                _ => Expr::Binary {
                    op: *op,
                    lhs: lhs.clone(),
                    rhs: Box::new(one_field_changed(rhs, rng)),
                },
            },
        }
    }

    /// Looking the key's bit up first finds what probing the map found, for every
    /// expression asked, and that is the atom of the first expression interned equal to it
    /// (compared whole, `==`: the atoms keep their expressions as numbers, see
    /// [`Atoms::codes`]): random atoms interned (with room for few, and many), each
    /// followed by lookups of random expressions, of the atoms interned and of copies of
    /// them.
    #[test]
    fn the_key_bits_find_what_probing_the_map_found() {
        let mut rng = weir_testkit::SplitMix64::new(0xa70b);
        let (mut found, mut missed_by_bit, mut missed_in_map) = (0, 0, 0);
        for round in 0..300 {
            let mut atoms = Atoms::with_room(if round % 2 == 0 { 2 } else { 64 });
            let mut interned: Vec<Expr> = Vec::new();
            let mut ids: Vec<AtomId> = Vec::new();
            for _ in 0..rng.below(40) {
                // before anything is interned too
                for _ in 0..8 {
                    let e = if rng.chance(30) && !interned.is_empty() {
                        interned[rng.below_usize(interned.len())].clone()
                    } else {
                        random_expr(&mut rng, 3)
                    };
                    let got = atoms.lookup(&e);
                    assert_eq!(got, lookup_probing(&atoms, &e), "{e:?}");
                    let first_equal = interned.iter().position(|x| *x == e);
                    assert_eq!(got, first_equal.map(|i| ids[i]), "{e:?}");
                    match got {
                        Some(_) => found += 1,
                        None if atoms.key_bits & key_bit(shallow_key(&e)) == 0 => {
                            missed_by_bit += 1
                        }
                        None => missed_in_map += 1,
                    }
                }
                let e = random_expr(&mut rng, 3);
                let id = atoms.intern(&e);
                assert_eq!(atoms.lookup(&e), Some(id), "{e:?}");
                interned.push(e);
                ids.push(id);
            }
        }
        // Each way of answering was taken, often.
        assert!(
            found > 5_000 && missed_by_bit > 5_000 && missed_in_map > 1_000,
            "{found} {missed_by_bit} {missed_in_map}"
        );
    }

    /// Evaluating a load at a constant offset tells that the packet holds its bytes, and
    /// nothing else; a load at a variable offset is remembered as evaluated (its offset's
    /// least value gives the length).
    #[test]
    fn an_evaluated_load_tells_the_captured_length() {
        let mut facts = Facts::new(u32::MAX);
        let mut env = Env::start();
        env.note_guard(14);
        for (e, len) in [
            (Expr::load_at(12, Size::Half), 14),
            (Expr::load_at(23, Size::Byte), 24),
            (Expr::load_at(26, Size::Word), 30),
            (Expr::load_at(2, Size::Word), 30),
        ] {
            let before = env.clone();
            facts.learn_evaluated(&mut env, &e);
            assert_eq!(env.caplen_min, len, "{e:?}");
            assert!(env.facts.is_shared_with(&before.facts), "{e:?}: no fact learned");
        }
        let port = Expr::load(Expr::load_at(14, Size::Byte).and_mask(0xf).plus(14), Size::Half);
        facts.learn_evaluated(&mut env, &port);
        assert_eq!(env.caplen_min, 30);
        assert!(facts.evaluated(&env, &port));
        assert!(!facts.expr_can_abort(&env, &port));
    }

    /// What substituting a load at a constant offset keeps is what `domain` answers for that
    /// load and no other, and a test given it learns what a test that asks again learns:
    /// the same outcomes, the same facts on both exits.
    #[test]
    fn a_known_load_answers_as_asking_again() {
        let mut facts = Facts::new(u32::MAX);
        let ethertype = Expr::load_at(12, Size::Half);
        let loads = [
            ethertype.clone(),
            Expr::load_at(12, Size::Byte),
            Expr::load_at(13, Size::Byte),
            Expr::load_at(12, Size::Word),
            Expr::load_at(23, Size::Byte),
            Expr::load_at(26, Size::Word),
        ];
        // Paths that know the ethertype (equal, not equal), its first byte, a guard.
        let mut guarded = Env::start();
        guarded.note_guard(34);
        let mut envs = vec![Env::start(), guarded.clone()];
        for (atom, c) in [(&ethertype, 0x800), (&loads[1], 0x86)] {
            let learned =
                facts.learn_cmp(&guarded, CmpOp::Eq, atom, &Expr::Const(c), None, true, true);
            envs.extend(learned.on_true);
            envs.extend(learned.on_false);
        }
        let mut decided = 0;
        for env in &envs {
            for (i, e) in loads.iter().enumerate() {
                let (_, known, _) = facts.substitute_known(env, e.clone());
                let known = known.expect("a load at a constant offset");
                assert_eq!(known.domain_of(e), Some(facts.domain(env, e)), "{e:?}");
                for (j, other) in loads.iter().enumerate() {
                    if j != i {
                        assert_eq!(known.domain_of(other), None, "{e:?} {other:?}");
                    }
                }
                assert!(known.domain_of(&Expr::Const(0x800)).is_none());
                for (op, c) in [(CmpOp::Eq, 0x800), (CmpOp::Ne, 0x86dd), (CmpOp::Gt, 0x85)] {
                    let c = Expr::Const(c);
                    let asked = facts.learn_cmp(env, op, e, &c, None, true, true);
                    let given = facts.learn_cmp(env, op, e, &c, Some(known), true, true);
                    assert_eq!(asked.can_be_true, given.can_be_true, "{e:?} {op:?}");
                    assert_eq!(asked.can_be_false, given.can_be_false, "{e:?} {op:?}");
                    decided += usize::from(asked.can_be_true != asked.can_be_false);
                    for (a, g) in
                        [(&asked.on_true, &given.on_true), (&asked.on_false, &given.on_false)]
                    {
                        let (Some(a), Some(g)) = (a, g) else { panic!("both exits asked") };
                        assert!(a.same_as(g), "{e:?} {op:?}: {a:?} vs {g:?}");
                    }
                }
            }
        }
        // The paths' facts decided some of the tests (the known ethertype, its bytes).
        assert!(decided >= 6, "{decided}");
    }
}
