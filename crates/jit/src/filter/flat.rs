//! A hot half's two-level header split as one decision (issue 15): pfmatch's dispatch
//! splits on the EtherType, and under IPv4 and IPv6 on the protocol byte
//! (`weir_pfmatch`'s `split`), which lowered in turn is a chain of compares, a branch each:
//! traffic spread over the protocols mispredicts at both levels. Here the leaf a packet
//! takes is looked up instead, in a table of bytes indexed by the outer key's row (a
//! compare and a conditional move per outer value) and the inner key (the protocol byte of
//! that row's header, chosen by the same conditional moves), and reached by one indirect
//! jump (`br_table`), which mispredicts at most once a packet.
//!
//! Exact: the alternatives of each level test one key against disjoint values (checked
//! here, or the `or` is lowered as it is), so at most one alternative's key test holds on
//! a packet, and when that alternative's rest fails every later one fails at its key test:
//! the `or`'s answer is the chosen leaf's, or false when no key test holds. A
//! `try(guard(n))` before a key test holds (and a `not try(guard(n))` fails) where `n`
//! bytes are proven, which the lowering checks after the keys' loads; every key is loaded
//! up front, so a packet too short for one of them leaves the hot half (`lower::BAIL`) and
//! the whole function, which tests in turn, answers.

use cranelift_codegen::ir::{types, Block, InstBuilder, JumpTableData, MemFlags};
use weir_filter::{CmpOp, Expr, Pred, Size, ValueSet};

use super::lower::Lowering;
use super::CompileError;

/// The most outer values with a row of their own (the table is one row of 256 leaves more,
/// for a packet no outer value takes).
const MAX_ROWS: usize = 6;

/// The values of a key that choose one alternative.
enum Values<'p> {
    One(u32),
    Set(&'p ValueSet),
}

impl Values<'_> {
    fn contains(&self, v: u32) -> bool {
        match self {
            Values::One(k) => *k == v,
            Values::Set(set) => set.contains(v),
        }
    }
}

/// One alternative of a split: `[try(guard(n)) and] key in values and rest...`.
struct Case<'p> {
    values: Values<'p>,
    rest: &'p [Pred],
}

/// An `or` whose alternatives each test one key (a load at a constant offset) first; the
/// largest guard its alternatives assume.
struct Split<'p> {
    key: &'p Expr,
    cases: Vec<Case<'p>>,
    guard: u64,
}

/// `parts` as a [`Split`], or `None` when some part is another shape. A part
/// `not try(guard(n)) and ...` never holds where `n` bytes are proven: it is left out (the
/// guard counted).
fn split_of(parts: &[Pred]) -> Option<Split<'_>> {
    let mut key: Option<&Expr> = None;
    let mut cases = Vec::new();
    let mut guard = 0u64;
    let guard_of = |p: &Pred| match p {
        Pred::Try(inner) => match inner.as_ref() {
            Pred::Guard(n) => Some(u64::from(*n)),
            _ => None,
        },
        _ => None,
    };
    for part in parts {
        let Pred::And(ps) = part else { return None };
        let mut i = 0;
        while let Some(n) = ps.get(i).and_then(guard_of) {
            guard = guard.max(n);
            i += 1;
        }
        if let Some(Pred::Not(inner)) = ps.get(i) {
            guard = guard.max(guard_of(inner)?);
            continue;
        }
        let (k, values) = match ps.get(i)? {
            Pred::Cmp { op: CmpOp::Eq, lhs, rhs: Expr::Const(v) } => (lhs, Values::One(*v)),
            Pred::In { value, set } => (value, Values::Set(set)),
            _ => return None,
        };
        let Expr::Load { offset, .. } = k else { return None };
        if !matches!(offset.as_ref(), Expr::Const(_)) || *key.get_or_insert(k) != k {
            return None;
        }
        cases.push(Case { values, rest: ps.get(i + 1..)? });
    }
    Some(Split { key: key?, cases, guard })
}

/// One value of the outer key, and the inner key its leaves are chosen by (if any).
struct Row<'p> {
    value: u32,
    inner: Option<&'p Expr>,
}

/// The decision: the outer key's rows, the leaves (what must hold after the keys' tests;
/// leaf 0 is "no alternative", numbered from 1 here) and the table, 256 leaf numbers per
/// row (indexed by the inner key's byte; a row without an inner key repeats its one leaf),
/// then a row of zeros for a packet no outer value takes.
struct Plan<'p> {
    outer: &'p Expr,
    rows: Vec<Row<'p>>,
    leaves: Vec<&'p [Pred]>,
    table: Vec<u8>,
    guard: u64,
}

/// `parts` (an `or`) as a two-level decision, or `None` when it is not one: every part
/// tests one outer key against its own value (at most [`MAX_ROWS`] of them), and at least
/// one part's rest is an `or` that splits on a byte (the inner key) with disjoint values.
fn plan(parts: &[Pred]) -> Option<Plan<'_>> {
    let outer = split_of(parts)?;
    if outer.cases.len() > MAX_ROWS {
        return None;
    }
    let mut guard = outer.guard;
    let mut rows = Vec::new();
    let mut leaves: Vec<&[Pred]> = Vec::new();
    let mut table = Vec::new();
    for case in &outer.cases {
        let Values::One(value) = case.values else { return None };
        if rows.iter().any(|r: &Row<'_>| r.value == value) {
            return None;
        }
        let inner = match case.rest {
            [Pred::Or(inner)] => split_of(inner).filter(|s| {
                matches!(s.key, Expr::Load { size: Size::Byte, .. }) && s.key != outer.key
            }),
            _ => None,
        };
        let Some(inner) = inner else {
            leaves.push(case.rest);
            table.extend([u8::try_from(leaves.len()).ok()?; 256]);
            rows.push(Row { value, inner: None });
            continue;
        };
        guard = guard.max(inner.guard);
        let first = leaves.len() + 1;
        leaves.extend(inner.cases.iter().map(|c| c.rest));
        for byte in 0..256u32 {
            let mut holding =
                inner.cases.iter().enumerate().filter(|(_, c)| c.values.contains(byte));
            let leaf = match (holding.next(), holding.next()) {
                (None, _) => 0,
                (Some((i, _)), None) => first + i,
                // Two alternatives for one value: the first's failure would go on to the
                // second, which one decision cannot do.
                (Some(_), Some(_)) => return None,
            };
            table.push(u8::try_from(leaf).ok()?);
        }
        rows.push(Row { value, inner: Some(inner.key) });
    }
    if rows.iter().all(|r| r.inner.is_none()) {
        return None;
    }
    table.extend([0u8; 256]);
    Some(Plan { outer: outer.key, rows, leaves, table, guard })
}

impl Lowering<'_, '_> {
    /// Lowers the `or` of `parts` as one decision when it is a two-level split (see the
    /// module's documentation); false, having emitted at most bounds checks (sound on any
    /// path), when it is not one.
    pub(super) fn flat_split(
        &mut self,
        parts: &[Pred],
        t: Block,
        f: Block,
        depth: u32,
    ) -> Result<bool, CompileError> {
        let Some(plan) = plan(parts) else { return Ok(false) };
        let keys: Vec<&Expr> =
            std::iter::once(plan.outer).chain(plan.rows.iter().filter_map(|r| r.inner)).collect();
        self.need_loads(&keys);
        if plan.guard > self.proven() {
            return Ok(false);
        }
        // The table index: row r's `256 r + inner key` (or `256 r`) where the outer key
        // equals row r's value, else the last row's (a compare and a conditional move a
        // row; the values are distinct, so their order does not matter).
        let none = (plan.rows.len() as i64) << 8;
        let mut at = self.b.ins().iconst(types::I32, none);
        for (r, each) in plan.rows.iter().enumerate() {
            let is = self.compare(CmpOp::Eq, plan.outer, &Expr::Const(each.value), depth)?;
            let start = (r as i64) << 8;
            let here = match each.inner {
                Some(key) => {
                    let v = self.expr(key, depth)?;
                    self.b.ins().iadd_imm(v, start)
                }
                None => self.b.ins().iconst(types::I32, start),
            };
            at = self.b.ins().select(is, here, at);
        }
        let at = self.b.ins().uextend(types::I64, at);
        let table: Box<[u8]> = plan.table.into_boxed_slice();
        let base = self.b.ins().iconst(types::I64, table.as_ptr() as i64);
        self.tables.leaves.push(table);
        let address = self.b.ins().iadd(base, at);
        let flags = MemFlags::trusted().with_readonly().with_can_move();
        let leaf = self.b.ins().uload8(types::I32, flags, address, 0);

        let blocks: Vec<Block> = (0..=plan.leaves.len()).map(|_| self.new_block()).collect();
        for &block in &blocks {
            self.record(block);
        }
        let calls: Vec<_> = blocks.iter().map(|&b| self.b.func.dfg.block_call(b, &[])).collect();
        let jt = self.b.create_jump_table(JumpTableData::new(calls[0], &calls));
        self.b.ins().br_table(leaf, jt);
        self.switch_to(blocks[0]);
        self.jump(f);
        for (&block, rest) in blocks[1..].iter().zip(&plan.leaves) {
            self.switch_to(block);
            self.sequence(rest, t, f, depth, true)?;
        }
        Ok(true)
    }
}
