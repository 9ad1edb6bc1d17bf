//! A [`Pairs`] node in the XDP form with its loads shared: each of the two walks
//! ([`crate::pairs::PairTest::walk`]) emitted once, its values left in registers and its
//! abort recorded in a flag, then the pairs scanned in list order with a few compares on
//! those registers each (no reload, no protocol test repeated per pair).
//!
//! **The scan is [`crate::pairs::PairTable::decide`] in one pass.** For each pair in list
//! order: its first value not among the first walk's values: an abort when that walk
//! aborted, else the next pair; among them: true when its second value is among the
//! second walk's values, else an abort when that walk aborted, else the next pair; after the
//! last pair, false. With neither walk aborted that is "any pair matches"; with only the
//! second aborted, the first pair whose first value was loaded decides; with the first
//! aborted, the ordered scan of `decide` itself.
//!
//! **Registers.** A walk's fields get value registers by where they sit in the walk's
//! branches: sibling branches that exclude each other (guards `e == c` on the same `e` with
//! different constants: the EtherTypes of `host`, the IP protocols of `port`) share
//! registers, since at most one of them loads. A register no branch wrote holds a constant
//! none of the pairs has in that place (so an unloaded field never matches). When the
//! registers do not suffice, or in the socket form (where a legacy load that misses ends the
//! whole program, so a walk's abort cannot be recorded and the scan could not go on), the
//! node is emitted as its ordered expansion.

use weir_isa::ebpf::Op;

use super::expr::need;
use super::{Emitter, Jump, Label, Operand, PacketAccess, Rel};
use crate::emit::EmitError;
use crate::ir::{CmpOp, Expr, Pred};
use crate::pairs::{PairBranch, Pairs};

/// The flag bits of the walks' aborts.
const FIRST_ABORTED: i32 = 1;
const SECOND_ABORTED: i32 = 2;
/// The scan's outcomes, in the same register at the node's end.
const MATCHED: i32 = 4;
const ABORTED: i32 = 8;

/// Pairs per chunk of the scan: at most 8 slots a pair, so that every test reaches its
/// chunk's exits with a 16-bit offset.
const CHUNK: usize = 2_048;

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
            return Ok(false);
        }
        let (mut first_regs, mut second_regs) = (Vec::new(), Vec::new());
        let n1 = assign(&pairs.first.branches, 0, &mut first_regs);
        let n2 = assign(&pairs.second.branches, 0, &mut second_regs);
        let work = pairs
            .parts()
            .flat_map(|(g, e)| g.iter().map(pred_need).chain(e.iter().map(need)))
            .max()
            .unwrap_or(1);
        // One register for the flags.
        if n1 == 0 || n2 == 0 || n1 + n2 + 1 + work > self.free.len() {
            return Ok(false);
        }
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
        self.walk(&pairs.first.branches, &regs1, flags, FIRST_ABORTED, entry)?;
        self.walk(&pairs.second.branches, &regs2, flags, SECOND_ABORTED, entry)?;
        self.checked = entry;
        // A conditional jump reaches 32,767 slots: the pairs' tests jump to an exit of
        // their chunk, which records the verdict and goes on to the node's end (threading
        // leaves them alone: they are not bare `goto`s).
        let verdict = self.flow.label();
        for chunk in table.pairs().chunks(CHUNK) {
            let (hit_exit, abort_exit) = (self.flow.label(), self.flow.label());
            for &(a, b) in chunk {
                let (hit, next) = (self.flow.label(), self.flow.label());
                for &r in &held1 {
                    let go_on = self.flow.label();
                    self.flow.cond(Jump::value(Rel::Eq, r, Operand::Imm(a as i32)), hit, go_on);
                    self.flow.bind(go_on);
                }
                let bit = Operand::Imm(FIRST_ABORTED);
                self.flow.cond(Jump::value(Rel::Set, flags, bit), abort_exit, next);
                self.flow.bind(hit);
                for &r in &held2 {
                    let go_on = self.flow.label();
                    self.flow.cond(
                        Jump::value(Rel::Eq, r, Operand::Imm(b as i32)),
                        hit_exit,
                        go_on,
                    );
                    self.flow.bind(go_on);
                }
                let bit = Operand::Imm(SECOND_ABORTED);
                self.flow.cond(Jump::value(Rel::Set, flags, bit), abort_exit, next);
                self.flow.bind(next);
            }
            let after = self.flow.label();
            self.flow.goto(after);
            self.flow.bind(hit_exit);
            self.alu_imm(Op::Mov32Imm, flags, MATCHED);
            self.flow.goto(verdict);
            self.flow.bind(abort_exit);
            self.alu_imm(Op::Mov32Imm, flags, ABORTED);
            self.flow.goto(verdict);
            self.flow.bind(after);
        }
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

    /// One walk: each branch's guards (false: the next branch), its fields into their
    /// registers, its nested branches; an abort anywhere sets `bit` in `flags` and ends
    /// the walk.
    fn walk(
        &mut self,
        branches: &[PairBranch],
        regs: &[u8],
        flags: u8,
        bit: i32,
        entry: u32,
    ) -> Result<(), EmitError> {
        let (aborted, done) = (self.flow.label(), self.flow.label());
        let outer = std::mem::replace(&mut self.reject, aborted);
        let mut at = 0;
        let result = self.walk_branches(branches, regs, &mut at, entry);
        self.reject = outer;
        result?;
        self.flow.goto(done);
        self.flow.bind(aborted);
        self.alu_imm(Op::Or32Imm, flags, bit);
        self.flow.goto(done);
        self.flow.bind(done);
        Ok(())
    }

    fn walk_branches(
        &mut self,
        branches: &[PairBranch],
        regs: &[u8],
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
                let dst = regs.get(*at).copied().ok_or(EmitError::Internal("pair walk"))?;
                *at += 1;
                self.alu_reg(Op::Mov32Reg, dst, v);
                self.release(v);
            }
            self.walk_branches(&b.inner, regs, at, self.checked)?;
            self.flow.goto(next);
            self.flow.bind(next);
        }
        Ok(())
    }
}
