//! A run of first-match clauses keyed on the same fields, decided by one lookup per field.
//!
//! pfmatch's port clauses (`tcp port 22 => ssh`, `tcp port 80 => http`, ...) come out of
//! the optimizer as consecutive alternatives of an `or`, each
//! `try((A == c_i or B == c_i) and rest_i)` with the same fields `A`, `B` (source and
//! destination port) and its own constant. Lowered one after another, a packet of the
//! last clause pays two compares and two data-dependent branches per clause. Here each
//! field is loaded once and turned into the index of the first clause whose constant it
//! equals, by compares and selects (no branch); the smaller of the fields' indexes is the
//! first clause whose head holds, and one branch per clause goes to that clause's rest.
//!
//! Exact, in a hot half only (where a failed bounds check leaves the packet to the whole
//! function, so both fields are loaded without changing any answer): the heads before
//! that clause all fail (neither field equals their constant) and have no effects, so the
//! clause's rest runs in the state the sequential evaluation gives it; when the rest fails
//! (or aborts: it is in a `try`), the clauses after it run as written, one after another.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder};
use weir_filter::{BinOp, CmpOp, Expr, Pred};

use super::lower::Lowering;
use super::CompileError;

/// A run needs at least this many clauses to be worth a lookup.
const MIN_CLAUSES: usize = 2;

/// At most this many clauses go in one lookup (the selects grow with it).
const MAX_CLAUSES: usize = 16;

/// At most this many fields per head (source and destination: two).
const MAX_FIELDS: usize = 4;

/// One clause of a run: its constant and what follows its head.
struct Keyed<'p> {
    constant: u32,
    rest: &'p [Pred],
}

/// `try(head and rest...)` where `head` compares each of some fields with one constant
/// (`F == c` or `F1 == c or F2 == c ...`): the fields, the constant and the rest.
fn keyed(p: &Pred) -> Option<(Vec<&Expr>, Keyed<'_>)> {
    let Pred::Try(inner) = p else { return None };
    let (head, rest) = match inner.as_ref() {
        Pred::And(parts) => parts.split_first()?,
        other => (other, &[][..]),
    };
    fn one(q: &Pred) -> Option<(&Expr, u32)> {
        match q {
            Pred::Cmp { op: CmpOp::Eq, lhs, rhs: Expr::Const(c) } if plain_load(lhs) => {
                Some((lhs, *c))
            }
            _ => None,
        }
    }
    let compares: Vec<(&Expr, u32)> = match head {
        Pred::Or(qs) => qs.iter().map(one).collect::<Option<_>>()?,
        q => vec![one(q)?],
    };
    let constant = compares.first()?.1;
    if compares.len() > MAX_FIELDS || compares.iter().any(|&(_, c)| c != constant) {
        return None;
    }
    Some((compares.into_iter().map(|(f, _)| f).collect(), Keyed { constant, rest }))
}

/// A packet load whose only possible abort is its bounds (no division, no scratch slot):
/// in a hot half that leaves the packet to the whole function, so loading it early
/// changes no answer.
fn plain_load(e: &Expr) -> bool {
    fn plain(e: &Expr) -> bool {
        match e {
            Expr::Const(_) | Expr::WireLen => true,
            Expr::Scratch(_) | Expr::Neg(_) => false,
            Expr::Load { offset, .. } => plain(offset),
            Expr::Binary { op, lhs, rhs } => {
                !matches!(op, BinOp::Div | BinOp::Mod) && plain(lhs) && plain(rhs)
            }
        }
    }
    matches!(e, Expr::Load { .. }) && plain(e)
}

/// How many of `parts` (from the first) form a run keyed on the same fields.
pub(super) fn run_length(parts: &[Pred]) -> usize {
    let Some((fields, _)) = parts.first().and_then(keyed) else { return 0 };
    let n = parts
        .iter()
        .take(MAX_CLAUSES)
        .take_while(|p| keyed(p).is_some_and(|(f, _)| f == fields))
        .count();
    if n >= MIN_CLAUSES {
        n
    } else {
        0
    }
}

impl Lowering<'_, '_> {
    /// Lowers the first `n` of `parts` (a run, [`run_length`]) as alternatives of an `or`:
    /// to `t` when one holds, to `next` when none does.
    pub(super) fn keyed_run(
        &mut self,
        parts: &[Pred],
        t: Block,
        next: Block,
        depth: u32,
    ) -> Result<(), CompileError> {
        let run: Vec<(Vec<&Expr>, Keyed<'_>)> = parts.iter().filter_map(keyed).collect();
        let Some((fields, _)) = run.first() else { return self.jump_to(next) };
        let n = run.len();
        let none = i64::try_from(n).unwrap_or(i64::MAX);
        // Per field: the first clause whose constant it equals (n: none), then the least.
        let mut first = None;
        for field in fields {
            self.need_loads(&[field]);
            let mut index = self.b.ins().iconst(types::I32, none);
            for (i, (_, k)) in run.iter().enumerate().rev() {
                let hit = self.compare(CmpOp::Eq, field, &Expr::Const(k.constant), depth)?;
                let at = self.b.ins().iconst(types::I32, i as i64);
                index = self.b.ins().select(hit, at, index);
            }
            first = Some(match first {
                None => index,
                Some(before) => self.b.ins().umin(before, index),
            });
        }
        let Some(first) = first else { return self.jump_to(next) };
        // One branch per clause to its rest; the rests' failures fall back to the clauses
        // after them, lowered as written (entered only after every edge into them).
        let rests: Vec<Block> = (0..n).map(|_| self.new_block()).collect();
        // `after[i - 1]`: clause i as written (i >= 1).
        let after: Vec<Block> = (1..n).map(|_| self.new_block()).collect();
        let from = |i: usize| after.get(i.wrapping_sub(1)).copied().unwrap_or(next);
        for (i, &rest) in rests.iter().enumerate() {
            let other = if i + 1 == n { next } else { self.new_block() };
            let is = self.b.ins().icmp_imm(IntCC::Equal, first, i as i64);
            self.branch(is, rest, other);
            if other != next {
                self.switch_to(other);
            }
        }
        for (i, (&rest, (_, k))) in rests.iter().zip(&run).enumerate() {
            self.switch_to(rest);
            let fallback = from(i + 1);
            let body = Pred::Try(Box::new(Pred::and(k.rest.iter().cloned())));
            self.pred(&body, t, fallback, depth)?;
        }
        // The clauses as written, from the second: where a rest that failed goes on.
        for (i, part) in parts.iter().enumerate().take(n).skip(1) {
            self.switch_to(from(i));
            let fallback = from(i + 1);
            self.pred(part, t, fallback, depth)?;
        }
        Ok(())
    }

    fn jump_to(&mut self, block: Block) -> Result<(), CompileError> {
        self.jump(block);
        Ok(())
    }
}
