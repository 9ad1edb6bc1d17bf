//! A [`Pairs`] node in the XDP form with its loads shared: each of the two walks
//! ([`crate::pairs::PairTest::walk`]) emitted once, its values left in registers and its
//! abort recorded in a flag, then the pairs scanned in list order with a few compares on
//! those registers each (no reload, no protocol test repeated per pair).
//!
//! **The scan is [`crate::pairs::PairTable::decide`], by search trees.** With the first
//! walk complete, a binary search per first-walk register (on a copy of it) over the list's
//! distinct first values finds the value's leaf, which notes whether any of its pairs has
//! its second value among the second walk's registers (neither walk aborted: any such pair
//! matches) and ranks the value by its first pair in list order (the second walk aborted:
//! the first pair whose first value was loaded decides, so the smallest rank's pair). With
//! the first walk aborted, `decide`'s ordered scan, in line: it reaches only the pairs before
//! the first value the registers cannot all hold, a few. So a packet costs a few compares
//! per register and level, and the kernel's verifier, which walks every branch, follows a
//! path of log depth with all the leaves' paths joining in one state (a linear scan left a
//! pending branch per pair, and the verifier gives up past 8,192).
//!
//! **Registers.** A walk's fields get value registers by where they sit in the walk's
//! branches: sibling branches that exclude each other (guards `e == c` on the same `e` with
//! different constants: the EtherTypes of `host`, the IP protocols of `port`) share
//! registers, since at most one of them loads. A register no branch wrote holds a constant
//! none of the pairs has in that place (so an unloaded field never matches). When the
//! registers do not suffice, the node is emitted as its ordered expansion.
//!
//! **The socket form.** There a legacy load that misses ends the whole program (the IR's
//! abort), so a walk's abort cannot be recorded and the scan could not go on after one.
//! It is exact in this order instead: (1) the pairs up to and including the first whose
//! first value is the list's (n1 + 1)-th distinct one (n1: the first walk's registers, the
//! most values one walk loads) as their terms, in order; if all are false, the first test
//! was evaluated without an abort for n1 + 1 distinct values, each either not loaded by a
//! complete walk or loaded before the walk's first abort, which loads at most n1 values:
//! so the first walk does not abort, and (2) it is walked once, its values in stack words
//! (the legacy loads take r0 to r5). (3) Search trees find the rest's first pair in list
//! order whose first value was loaded (none: false), and (4) the second walk runs as that
//! pair's term evaluates it, each field compared with its second value as it is loaded
//! (equal: true; an abort here is the term's). (5) That walk complete, neither walk
//! aborts, and any pair of the rest with both values loaded matches (the trees of the
//! XDP form). Long heads (over [`SOCKET_HEAD_PAIRS`]) or too few registers take the
//! expansion.

use std::collections::HashMap;

use weir_isa::ebpf::Op;

use weir_program::ProgType;

use super::expr::need;
use super::{
    spill_offset, value_registers, Emitter, Jump, Label, Operand, PacketAccess, Rel, FRAME,
    MAX_SPILLS,
};
use crate::emit::EmitError;
use crate::ir::{CmpOp, Expr, Filter, Pred};
use crate::pairs::{PairBranch, Pairs};

/// What a scan works on: the pairs, the walks' value registers and flags, and the exits
/// (true, abort, false).
#[derive(Clone, Copy)]
struct Scan<'a> {
    pairs: &'a [(u32, u32)],
    held1: &'a [u8],
    held2: &'a [u8],
    flags: u8,
    exits: [Label; 3],
}

/// Where a walk leaves each field's value, in walk order.
#[derive(Clone, Copy)]
enum Hold<'a> {
    /// A value register each.
    Regs(&'a [u8]),
    /// A stack word each; with `Some((word, hit))`, a field equal to the stack word `word`
    /// goes to `hit` at once.
    Stack(&'a [i16], Option<(i16, Label)>),
}

/// Where the any-trees find the second walk's values.
#[derive(Clone, Copy)]
enum Seconds<'a> {
    /// A value register each.
    Regs(&'a [u8]),
    /// A stack word each, loaded into the register as it is compared.
    Words(&'a [i16], u8),
}

/// A distinct first value of the list, for the search trees.
struct Key {
    value: u32,
    /// Its first pair's index, and that pair's second value.
    index: u32,
    second: u32,
    /// The second values of its later pairs, but `second`.
    others: Vec<u32>,
}

/// The flag bits of the walks' aborts.
const FIRST_ABORTED: i32 = 1;
const SECOND_ABORTED: i32 = 2;
/// The scan's outcomes, in the same register at the node's end.
const MATCHED: i32 = 4;
const ABORTED: i32 = 8;
/// Up to this many pairs times (first-walk registers + 1), the scan is in line: the kernel's
/// verifier keeps a pending branch for about each first-walk register and pair of it on a
/// path, and refuses a path with more than 8,192 (`BPF_COMPLEXITY_LIMIT_JMP_SEQ`); this
/// leaves half for the rest. Longer lists take the search trees (module documentation),
/// which cost about three times the slots.
const LINEAR_BRANCHES: usize = 4_096;
/// The socket form emits the pairs before the list's (first-walk registers + 1)-th distinct
/// first value as their expansion; past this many, the node is emitted as its expansion.
const SOCKET_HEAD_PAIRS: usize = 64;
/// The trees' smallest rank when no loaded first value is in the list (ranks are below).
const NO_RANK: i32 = -1;

/// The value register of each field of a walk, in walk order, and how many registers: a
/// branch's fields start past the registers of every earlier sibling it does not exclude.
fn assign(branches: &[PairBranch], base: usize, out: &mut Vec<usize>) -> usize {
    let mut ends: Vec<usize> = Vec::with_capacity(branches.len());
    for (j, b) in branches.iter().enumerate() {
        let start = branches[..j]
            .iter()
            .zip(&ends)
            .filter(|(a, _)| !exclusive(a, b))
            .map(|(_, &end)| end)
            .fold(base, usize::max);
        let mut next = start;
        for _ in &b.fields {
            out.push(next);
            next += 1;
        }
        ends.push(assign(&b.inner, next, out));
    }
    ends.into_iter().fold(base, usize::max)
}

/// The equality tests of a branch's guards: `e == c`.
fn eq_tests(b: &PairBranch) -> impl Iterator<Item = (&Expr, u32)> {
    b.guards.iter().filter_map(|g| match g {
        Pred::Cmp { op: CmpOp::Eq, lhs, rhs } => match (lhs, rhs) {
            (e, Expr::Const(k)) | (Expr::Const(k), e) => Some((e, *k)),
            _ => None,
        },
        _ => None,
    })
}

/// Whether no packet gets past the guards of both `a` and `b`: they test one expression
/// for equality with different constants.
fn exclusive(a: &PairBranch, b: &PairBranch) -> bool {
    eq_tests(a).any(|(e, k)| eq_tests(b).any(|(f, l)| e == f && k != l))
}

/// Registers a predicate's evaluation may need (an upper bound).
fn pred_need(p: &Pred) -> usize {
    match p {
        Pred::Cmp { lhs, rhs, .. } => need(lhs).max(need(rhs)) + 1,
        Pred::In { value, .. } | Pred::Store { value, .. } => need(value),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().map(pred_need).max().unwrap_or(0),
        Pred::Not(q) | Pred::Try(q) => pred_need(q),
        Pred::Const(_) | Pred::Guard(_) => 0,
        // Not in a pair test's guards; if ever, take the expansion.
        Pred::Chain(_) | Pred::Pairs(_) => usize::MAX / 2,
    }
}

/// A 32-bit value not among `values` (the register of a field no branch loaded).
fn absent(values: impl Iterator<Item = u32>) -> u32 {
    let mut seen: Vec<u32> = values.collect();
    seen.sort_unstable();
    seen.dedup();
    // The first gap from 0: `seen` has fewer than 2^32 values.
    seen.iter().zip(0u32..).find(|(v, i)| **v != *i).map_or(seen.len() as u32, |(_, i)| i)
}

/// The list's distinct first values sorted, for the search trees, and the same keys by
/// their first pair's index (`value` is that index), for the tree on the smallest rank.
fn keys(pairs: &[(u32, u32)]) -> (Vec<Key>, Vec<Key>) {
    let mut keys: Vec<Key> = Vec::new();
    let mut at: HashMap<u32, usize> = HashMap::new();
    for (i, &(a, b)) in pairs.iter().enumerate() {
        match at.get(&a) {
            Some(&k) => {
                let key = &mut keys[k];
                if b != key.second && !key.others.contains(&b) {
                    key.others.push(b);
                }
            }
            None => {
                at.insert(a, keys.len());
                keys.push(Key { value: a, index: i as u32, second: b, others: Vec::new() });
            }
        }
    }
    // Made in index order.
    let firsts: Vec<Key> = keys
        .iter()
        .map(|k| Key { value: k.index, index: k.index, second: k.second, others: Vec::new() })
        .collect();
    keys.sort_unstable_by_key(|k| k.value);
    (keys, firsts)
}

/// How the socket form shares a node's loads (module documentation), when it can.
struct SocketPlan {
    /// Each walk's field places (stack words) in walk order, and how many.
    first_places: Vec<usize>,
    second_places: Vec<usize>,
    n1: usize,
    n2: usize,
    /// The pairs emitted as their expansion first.
    head: usize,
}

/// The socket form's plan for `pairs` with `registers` value registers free, or `None`
/// (the node is emitted as its expansion).
fn socket_plan(pairs: &Pairs, registers: usize) -> Option<SocketPlan> {
    let (mut first_places, mut second_places) = (Vec::new(), Vec::new());
    let n1 = assign(&pairs.first.branches, 0, &mut first_places);
    let n2 = assign(&pairs.second.branches, 0, &mut second_places);
    let work = work_need(pairs);
    // The trees hold a value, its copy and the smallest rank; the last walk a field and
    // the word it is compared with; the last trees a copy, a leaf's second value and a
    // word loaded. (`n2 + 1`: each second-walk value once took a register there; kept,
    // as dropping it would change which lists take the shared form.)
    if n1 == 0 || n2 == 0 || work.max(3) > registers || n2 + 1 > registers {
        return None;
    }
    if usize::from(MAX_SPILLS) < n1 + n2 + 1 {
        return None;
    }
    // Up to the pair of the list's (n1 + 1)-th distinct first value.
    let mut seen: Vec<u32> = Vec::with_capacity(n1 + 1);
    let last = pairs.table.pairs().iter().position(|&(a, _)| {
        if !seen.contains(&a) {
            seen.push(a);
        }
        seen.len() > n1
    })?;
    let head = last + 1;
    (head <= SOCKET_HEAD_PAIRS).then_some(SocketPlan { first_places, second_places, n1, n2, head })
}

/// Registers the walks' guards and fields may need.
fn work_need(pairs: &Pairs) -> usize {
    pairs
        .parts()
        .flat_map(|(g, e)| g.iter().map(pred_need).chain(e.iter().map(need)))
        .max()
        .unwrap_or(1)
}

/// Whether every pair-table node of `filter` is emitted with its loads shared for a
/// program of type `prog_type` (else some node is emitted as its expansion, which is long
/// unoptimized: the caller may rather optimize the expanded filter).
pub fn pair_lists_share_loads(filter: &Filter, prog_type: ProgType) -> bool {
    fn all(p: &Pred, target: PacketAccess) -> bool {
        match p {
            Pred::Pairs(pairs) => {
                let registers = value_registers(target).len();
                match target {
                    PacketAccess::SkBuff => socket_plan(pairs, registers).is_some(),
                    PacketAccess::Xdp => xdp_registers(pairs).is_some_and(|n| n <= registers),
                }
            }
            Pred::And(ps) | Pred::Or(ps) => ps.iter().all(|q| all(q, target)),
            Pred::Not(q) | Pred::Try(q) => all(q, target),
            _ => true,
        }
    }
    all(&filter.pred, prog_type.packet_access())
}

/// The registers the XDP form takes for `pairs` (flags, both walks' values, work), or
/// `None` when a walk loads nothing.
fn xdp_registers(pairs: &Pairs) -> Option<usize> {
    let n1 = assign(&pairs.first.branches, 0, &mut Vec::new());
    let n2 = assign(&pairs.second.branches, 0, &mut Vec::new());
    // One register for the flags; the trees take two more once the walks are done.
    (n1 > 0 && n2 > 0).then(|| n1 + n2 + 1 + work_need(pairs).max(2))
}

impl Emitter {
    /// The node with its loads shared, or `false` (nothing emitted) when this form does
    /// not apply (module documentation): the caller emits the expansion.
    pub(super) fn pairs_shared(
        &mut self,
        pairs: &Pairs,
        t: Label,
        f: Label,
    ) -> Result<bool, EmitError> {
        if self.target != PacketAccess::Xdp {
            return self.pairs_socket(pairs, t, f);
        }
        if xdp_registers(pairs).is_none_or(|n| n > self.free.len()) {
            return Ok(false);
        }
        let (mut first_regs, mut second_regs) = (Vec::new(), Vec::new());
        let n1 = assign(&pairs.first.branches, 0, &mut first_regs);
        let n2 = assign(&pairs.second.branches, 0, &mut second_regs);
        let flags = self.allocate()?;
        let held1 = (0..n1).map(|_| self.allocate()).collect::<Result<Vec<_>, _>>()?;
        let held2 = (0..n2).map(|_| self.allocate()).collect::<Result<Vec<_>, _>>()?;
        let table = &pairs.table;
        let z1 = absent(table.pairs().iter().map(|p| p.0));
        let z2 = absent(table.pairs().iter().map(|p| p.1));
        self.alu_imm(Op::Mov32Imm, flags, 0);
        for &r in &held1 {
            self.alu_imm(Op::Mov32Imm, r, z1 as i32);
        }
        for &r in &held2 {
            self.alu_imm(Op::Mov32Imm, r, z2 as i32);
        }
        let entry = self.checked;
        let regs1: Vec<u8> = first_regs.iter().map(|&i| held1[i]).collect();
        let regs2: Vec<u8> = second_regs.iter().map(|&i| held2[i]).collect();
        self.walk(&pairs.first.branches, Hold::Regs(&regs1), flags, FIRST_ABORTED, entry)?;
        self.walk(&pairs.second.branches, Hold::Regs(&regs2), flags, SECOND_ABORTED, entry)?;
        self.checked = entry;
        let (hit_exit, abort_exit, false_exit) =
            (self.flow.label(), self.flow.label(), self.flow.label());
        let exits = [hit_exit, abort_exit, false_exit];
        let scan = Scan { pairs: table.pairs(), held1: &held1, held2: &held2, flags, exits };
        if !self.for_kernel || table.pairs().len() * (held1.len() + 1) <= LINEAR_BRANCHES {
            self.scan(scan, false);
        } else {
            let (prefix, trees) = (self.flow.label(), self.flow.label());
            let bit = Operand::Imm(FIRST_ABORTED);
            self.flow.cond(Jump::value(Rel::Set, flags, bit), prefix, trees);
            self.flow.bind(trees);
            self.search_trees(scan)?;
            self.flow.bind(prefix);
            self.scan(scan, true);
        }
        let verdict = self.flow.label();
        self.flow.bind(hit_exit);
        self.alu_imm(Op::Mov32Imm, flags, MATCHED);
        self.flow.goto(verdict);
        self.flow.bind(abort_exit);
        self.alu_imm(Op::Mov32Imm, flags, ABORTED);
        self.flow.goto(verdict);
        self.flow.bind(false_exit);
        // No pair: false.
        self.alu_imm(Op::Mov32Imm, flags, 0);
        self.flow.bind(verdict);
        let not = self.flow.label();
        self.flow.cond(Jump::value(Rel::Set, flags, Operand::Imm(MATCHED)), t, not);
        self.flow.bind(not);
        self.flow.cond(Jump::value(Rel::Set, flags, Operand::Imm(ABORTED)), self.reject, f);
        for r in held2.into_iter().rev().chain(held1.into_iter().rev()) {
            self.release(r);
        }
        self.release(flags);
        Ok(true)
    }

    /// The socket form of the node (module documentation), or `false` (nothing emitted)
    /// when it does not apply. The walks' values live in stack words: the legacy loads
    /// take every register but r6 to r9.
    fn pairs_socket(&mut self, pairs: &Pairs, t: Label, f: Label) -> Result<bool, EmitError> {
        let Some(plan) = socket_plan(pairs, self.free.len()) else {
            return Ok(false);
        };
        let words = (plan.n1 + plan.n2 + 1) as u16;
        if self.spills.saturating_add(words) > MAX_SPILLS {
            return Ok(false);
        }
        let all = pairs.table.pairs();
        let (head, rest) = all.split_at(plan.head);
        // The head as its terms, in order: past it, the first walk cannot abort.
        let go_on = self.flow.label();
        let head = Pairs::new(pairs.first.clone(), pairs.second.clone(), head.to_vec());
        self.pred(&head.expand(), t, go_on)?;
        self.flow.bind(go_on);
        let base = self.spills;
        self.spills += words;
        let word = |i: usize| spill_offset(base + i as u16);
        let firsts: Vec<i16> = (0..plan.n1).map(word).collect();
        let seconds: Vec<i16> = (plan.n1..plan.n1 + plan.n2).map(word).collect();
        let target = word(plan.n1 + plan.n2);
        // A word no branch wrote holds a value none of the pairs has in that place.
        let z1 = absent(all.iter().map(|p| p.0));
        let z2 = absent(all.iter().map(|p| p.1));
        for &w in &firsts {
            self.insn(Op::StW, FRAME, 0, w, z1 as i32);
        }
        for &w in &seconds {
            self.insn(Op::StW, FRAME, 0, w, z2 as i32);
        }
        let entry = self.checked;
        let places1: Vec<i16> = plan.first_places.iter().map(|&i| firsts[i]).collect();
        let places2: Vec<i16> = plan.second_places.iter().map(|&i| seconds[i]).collect();
        self.walk_branches(&pairs.first.branches, Hold::Stack(&places1, None), &mut 0, entry)?;
        self.checked = entry;
        let (keys, index_keys) = keys(rest);
        let (held, copy, best) = (self.allocate()?, self.allocate()?, self.allocate()?);
        // The walk's branches left loaded words in states the verifier tells apart (by
        // the load they came from): one state, so the trees are walked once for them.
        for &w in &firsts {
            self.insn(Op::LdxW, held, FRAME, w, 0);
            self.forget_range(held);
            self.insn(Op::StxW, FRAME, held, w, 0);
        }
        // The first pair of the rest whose first value was loaded: the smallest rank.
        self.alu_imm(Op::Mov32Imm, best, NO_RANK);
        for &w in &firsts {
            self.insn(Op::LdxW, held, FRAME, w, 0);
            self.rank_tree(held, copy, best, &keys);
        }
        self.release(held);
        // No pair's first value loaded: every term is false.
        let (some, found) = (self.flow.label(), self.flow.label());
        self.flow.cond(Jump::value(Rel::Eq, best, Operand::Imm(NO_RANK)), f, some);
        self.flow.bind(some);
        // That pair's second value, into the word the second walk compares with. Each tree
        // before left the smallest rank in a range of its own: made one, the rest of the
        // program is walked once, not once for each.
        self.forget_range(best);
        self.unlinked_copy(copy, best);
        let (reject, tail) = (self.reject, self.flow.label());
        self.search(copy, &index_keys, reject, &mut |e, key| {
            e.leaf_to_tail(copy, key, best, key.second, tail);
        });
        self.tail(tail, copy, found, reject);
        self.insn(Op::StxW, FRAME, best, target, 0);
        self.release(best);
        self.release(copy);
        // The second walk as that pair's term evaluates it: a field equal to its second
        // value is true, an abort rejects.
        let hold = Hold::Stack(&places2, Some((target, t)));
        self.walk_branches(&pairs.second.branches, hold, &mut 0, entry)?;
        self.checked = entry;
        // Both walks complete: any pair of the rest with both values loaded matches.
        let (copy, second, loaded) = (self.allocate()?, self.allocate()?, self.allocate()?);
        for &w in &firsts {
            let miss = self.flow.label();
            self.insn(Op::LdxW, copy, FRAME, w, 0);
            self.unlinked_copy(second, copy);
            self.any_tree(copy, &keys, second, Seconds::Words(&seconds, loaded), t, miss);
            self.flow.bind(miss);
        }
        self.flow.goto(f);
        self.release(loaded);
        self.release(second);
        self.release(copy);
        self.spills = base;
        Ok(true)
    }

    /// The scan of a packet whose first walk did not abort, by search trees (module
    /// documentation) over the list's distinct first values, one per first-walk register.
    /// Neither walk aborted: the leaf of a value with one second value hands it to the
    /// tree's shared tail, which tests it against the second walk's values (one loaded:
    /// true); a value with several tests them in its leaf. The second aborted: the leaf turns the register into the index of
    /// the value's first pair, the smallest index is kept, and a last tree on it tests that
    /// pair's second value (loaded: true, else an abort; no index: false).
    fn search_trees(&mut self, scan: Scan<'_>) -> Result<(), EmitError> {
        let Scan { pairs, held1, held2, flags, exits: [hit_exit, abort_exit, false_exit] } = scan;
        let (keys, firsts) = keys(pairs);
        let (ranked, any) = (self.flow.label(), self.flow.label());
        let bit = Operand::Imm(SECOND_ABORTED);
        self.flow.cond(Jump::value(Rel::Set, flags, bit), ranked, any);
        // Neither walk aborted: a pair with both values loaded matches. The search narrows
        // the register itself, and a leaf of one second value turns it to zero where it
        // held the key (`leaf_to_tail`): it is not read after its tree.
        self.flow.bind(any);
        let second = self.allocate()?;
        for &r in held1 {
            let miss = self.flow.label();
            self.unlinked_copy(second, r);
            self.any_tree(r, &keys, second, Seconds::Regs(held2), hit_exit, miss);
            self.flow.bind(miss);
        }
        self.release(second);
        self.flow.goto(false_exit);
        // The second walk aborted: the smallest first-pair index among the loaded first
        // values, then that pair's second value decides.
        self.flow.bind(ranked);
        let (copy, best) = (self.allocate()?, self.allocate()?);
        self.alu_imm(Op::Mov32Imm, best, NO_RANK);
        for &r in held1 {
            self.rank_tree(r, copy, best, &keys);
        }
        let some = self.flow.label();
        self.flow.cond(Jump::value(Rel::Eq, best, Operand::Imm(NO_RANK)), false_exit, some);
        self.flow.bind(some);
        self.unlinked_copy(copy, best);
        // `best`, not read again, holds the rank the copy is searched for, and takes the
        // pair's second value for the tail (the keys by index have one second value each).
        self.any_tree(copy, &firsts, best, Seconds::Regs(held2), hit_exit, abort_exit);
        self.release(best);
        self.release(copy);
        Ok(())
    }

    /// A tree of the keys on `r` for any pair with both values loaded: `hit` if one is,
    /// else `miss` (not bound here). `second` holds `r`'s value, unlinked from it
    /// ([`Emitter::unlinked_copy`]). A leaf of one second value turns `second` into it for
    /// the tree's one tail, which compares the second walk's values with it; a leaf of
    /// several tests `r` and compares them itself. The leaf adds to `second` rather than
    /// setting it ([`Emitter::leaf_to_tail`] says why), so the tail is walked once a tree.
    fn any_tree(
        &mut self,
        r: u8,
        keys: &[Key],
        second: u8,
        seconds: Seconds<'_>,
        hit: Label,
        miss: Label,
    ) {
        let (tail, found) = (self.flow.label(), self.flow.label());
        self.search(r, keys, miss, &mut |e, key| {
            if key.others.is_empty() {
                e.leaf_to_tail(r, key, second, key.second, tail);
            } else {
                e.leaf_found(r, key, miss);
                let values: Vec<Operand> = std::iter::once(key.second)
                    .chain(key.others.iter().copied())
                    .map(|b| Operand::Imm(b as i32))
                    .collect();
                e.compare_seconds(seconds, &values, hit);
                e.flow.goto(miss);
            }
        });
        self.tail(tail, r, found, miss);
        self.compare_seconds(seconds, &[Operand::Reg(second)], hit);
        self.flow.goto(miss);
    }

    /// Each of `values` against each of the second walk's values: equal, `hit`; else on.
    /// Registers are compared value by value; stack words are loaded once each.
    fn compare_seconds(&mut self, seconds: Seconds<'_>, values: &[Operand], hit: Label) {
        let equal = |e: &mut Emitter, reg: u8, value: Operand| {
            let go_on = e.flow.label();
            e.flow.cond(Jump::value(Rel::Eq, reg, value), hit, go_on);
            e.flow.bind(go_on);
        };
        match seconds {
            Seconds::Regs(regs) => {
                for &value in values {
                    for &reg in regs {
                        equal(self, reg, value);
                    }
                }
            }
            Seconds::Words(words, loaded) => {
                for &w in words {
                    self.insn(Op::LdxW, loaded, FRAME, w, 0);
                    for &value in values {
                        equal(self, loaded, value);
                    }
                }
            }
        }
    }

    /// A tree of the keys on a copy of `r` for the rank of `r`'s value (its first pair's
    /// index), kept in `best` when smaller; `r` is not read again.
    fn rank_tree(&mut self, r: u8, copy: u8, best: u8, keys: &[Key]) {
        let (miss, update) = (self.flow.label(), self.flow.label());
        let tail = self.flow.label();
        self.unlinked_copy(copy, r);
        self.search(copy, keys, miss, &mut |e, key| {
            // In the register itself, not in the copy the search narrowed to the key
            // ([`Emitter::leaf_to_tail`]). On a miss `r` is not read again.
            e.leaf_to_tail(copy, key, r, key.index, tail);
        });
        self.tail(tail, copy, update, miss);
        let lower = self.flow.label();
        self.flow.cond(Jump::value(Rel::Ge, r, Operand::Reg(best)), miss, lower);
        self.flow.bind(lower);
        self.alu_reg(Op::Mov32Reg, best, r);
        self.flow.goto(miss);
        self.flow.bind(miss);
    }

    /// `copy = r`, as a register the verifier does not narrow with `r`: a `mov` links the
    /// two, and so does an `add` of a constant (the verifier narrows linked registers
    /// together); `xor32 0` ends the link. So a search narrows the copy only, and `r`
    /// stays as the verifier knew it, the same at every leaf, where the paths join.
    fn unlinked_copy(&mut self, copy: u8, r: u8) {
        self.alu_reg(Op::Mov32Reg, copy, r);
        self.alu_imm(Op::Xor32Imm, copy, 0);
    }

    /// `r` unchanged, but known to the verifier as any 32-bit value unless it knew it as a
    /// constant: adding 2^31 twice adds nothing, and an add that may wrap leaves the
    /// verifier the whole 32-bit range (and ends `r`'s links to other registers).
    fn forget_range(&mut self, r: u8) {
        self.alu_imm(Op::Add32Imm, r, i32::MIN);
        self.alu_imm(Op::Add32Imm, r, i32::MIN);
    }

    /// A binary search of `copy` among the keys' values: the leaf of the only value `copy`
    /// may hold there (with `keys` empty, `miss`). Each leaf tests that it does, by
    /// [`Emitter::leaf_found`] or [`Emitter::leaf_to_tail`], and ends in a jump.
    fn search(
        &mut self,
        copy: u8,
        keys: &[Key],
        miss: Label,
        leaf: &mut dyn FnMut(&mut Emitter, &Key),
    ) {
        match keys {
            [] => self.flow.goto(miss),
            [key] => leaf(self, key),
            _ => {
                let mid = keys.len() / 2;
                let (low, high) = (self.flow.label(), self.flow.label());
                let value = Operand::Imm(keys[mid].value as i32);
                self.flow.cond(Jump::value(Rel::Ge, copy, value), high, low);
                self.flow.bind(low);
                self.search(copy, &keys[..mid], miss, leaf);
                self.flow.bind(high);
                self.search(copy, &keys[mid..], miss, leaf);
            }
        }
    }

    /// A leaf's own test that `copy` holds its key's value: else `miss`.
    fn leaf_found(&mut self, copy: u8, key: &Key, miss: Label) {
        let found = self.flow.label();
        let value = Operand::Imm(key.value as i32);
        self.flow.cond(Jump::value(Rel::Ne, copy, value), miss, found);
        self.flow.bind(found);
    }

    /// A leaf that leaves its test to its tree's tail ([`Emitter::tail`]): `copy` becomes
    /// zero if it holds the key's value, and `value`, which holds the searched value
    /// unnarrowed (it is not `copy`, nor linked to it), becomes `to` there by an add, so
    /// the verifier knows it the same at every leaf and the leaves' paths join at the
    /// tail; then a jump to `tail`. A few slots and no conditional jump, which takes two
    /// slots when its target is past 16-bit reach (every leaf's exits are, in a long list).
    fn leaf_to_tail(&mut self, copy: u8, key: &Key, value: u8, to: u32, tail: Label) {
        self.alu_imm(Op::Xor32Imm, copy, key.value as i32);
        self.alu_imm(Op::Add32Imm, value, to.wrapping_sub(key.value) as i32);
        self.flow.goto(tail);
    }

    /// A tree's tail at `tail`, shared by its leaves ([`Emitter::leaf_to_tail`]): `copy`
    /// zero (the leaf held the key) goes on at `found`, bound here; else `miss`.
    fn tail(&mut self, tail: Label, copy: u8, found: Label, miss: Label) {
        self.flow.bind(tail);
        self.flow.cond(Jump::value(Rel::Eq, copy, Operand::Imm(0)), found, miss);
        self.flow.bind(found);
    }

    /// [`crate::pairs::PairTable::decide`] in list order, in line. When the first walk is
    /// known to have aborted, it loaded at most one value a register, so the scan reaches
    /// only the pairs before the first value the registers cannot all hold; that pair
    /// aborts.
    fn scan(&mut self, scan: Scan<'_>, first_aborted: bool) {
        let Scan { pairs, held1, held2, flags, exits: [hit_exit, abort_exit, false_exit] } = scan;
        let mut seen: Vec<u32> = Vec::with_capacity(held1.len());
        let mut end = pairs.len();
        for (k, &(a, _)) in pairs.iter().enumerate() {
            if first_aborted && !seen.contains(&a) {
                if seen.len() == held1.len() {
                    end = k;
                    break;
                }
                seen.push(a);
            }
        }
        for &(a, b) in &pairs[..end] {
            let (found, next) = (self.flow.label(), self.flow.label());
            for &r in held1 {
                let go_on = self.flow.label();
                self.flow.cond(Jump::value(Rel::Eq, r, Operand::Imm(a as i32)), found, go_on);
                self.flow.bind(go_on);
            }
            if first_aborted {
                self.flow.goto(abort_exit);
            } else {
                let bit = Operand::Imm(FIRST_ABORTED);
                self.flow.cond(Jump::value(Rel::Set, flags, bit), abort_exit, next);
            }
            self.flow.bind(found);
            for &r in held2 {
                let go_on = self.flow.label();
                self.flow.cond(Jump::value(Rel::Eq, r, Operand::Imm(b as i32)), hit_exit, go_on);
                self.flow.bind(go_on);
            }
            let bit = Operand::Imm(SECOND_ABORTED);
            self.flow.cond(Jump::value(Rel::Set, flags, bit), abort_exit, next);
            self.flow.bind(next);
        }
        self.flow.goto(if end < pairs.len() { abort_exit } else { false_exit });
    }

    /// One walk: each branch's guards (false: the next branch), its fields into their
    /// registers, its nested branches; an abort anywhere sets `bit` in `flags` and ends
    /// the walk.
    fn walk(
        &mut self,
        branches: &[PairBranch],
        hold: Hold<'_>,
        flags: u8,
        bit: i32,
        entry: u32,
    ) -> Result<(), EmitError> {
        let (aborted, done) = (self.flow.label(), self.flow.label());
        let outer = std::mem::replace(&mut self.reject, aborted);
        let mut at = 0;
        let result = self.walk_branches(branches, hold, &mut at, entry);
        self.reject = outer;
        result?;
        self.flow.goto(done);
        self.flow.bind(aborted);
        self.alu_imm(Op::Or32Imm, flags, bit);
        self.flow.goto(done);
        self.flow.bind(done);
        Ok(())
    }

    /// The branches of a walk, each field's value held as `hold` says (`at`: the next
    /// field's place).
    fn walk_branches(
        &mut self,
        branches: &[PairBranch],
        hold: Hold<'_>,
        at: &mut usize,
        entry: u32,
    ) -> Result<(), EmitError> {
        for b in branches {
            let next = self.flow.label();
            // What the bounds checks of an earlier branch covered may not hold here.
            self.checked = entry;
            for g in &b.guards {
                let held = self.flow.label();
                let (on_true, _) = self.pred(g, held, next)?;
                self.flow.bind(held);
                self.checked = on_true;
            }
            for field in &b.fields {
                self.check_constant_loads(&[field]);
                let v = self.eval(field)?;
                match hold {
                    Hold::Regs(regs) => {
                        let dst = regs.get(*at).copied().ok_or(EmitError::Internal("pair walk"))?;
                        self.alu_reg(Op::Mov32Reg, dst, v);
                    }
                    Hold::Stack(slots, target) => {
                        let dst =
                            slots.get(*at).copied().ok_or(EmitError::Internal("pair walk"))?;
                        self.insn(Op::StxW, FRAME, v, dst, 0);
                        if let Some((x, hit)) = target {
                            let w = self.allocate()?;
                            self.insn(Op::LdxW, w, FRAME, x, 0);
                            let go_on = self.flow.label();
                            self.flow.cond(Jump::value(Rel::Eq, v, Operand::Reg(w)), hit, go_on);
                            self.flow.bind(go_on);
                            self.release(w);
                        }
                    }
                }
                *at += 1;
                self.release(v);
            }
            self.walk_branches(&b.inner, hold, at, self.checked)?;
            self.flow.goto(next);
            self.flow.bind(next);
        }
        Ok(())
    }
}
