//! [`weir_filter::Pred::In`] in native code.
//!
//! A few ranges (up to [`CHAIN_MAX`]) become a chain of compares, each one branch. More
//! become a table of `[lo, hi]` pairs owned by the [`super::NativeFilter`] and a branchless
//! binary search over it: the code has about log2(n) steps of load, compare and conditional
//! move whatever the set's size, so a set of 10,000 hosts compiles as fast as one of ten,
//! and the table's address is a constant in the code (the table lives as long as the code,
//! in the same `NativeFilter`, and never moves: it is a boxed slice).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlags, Value};

use super::lower::Lowering;
use super::CompileError;

/// Sets of at most this many ranges compile to compare chains.
pub(super) const CHAIN_MAX: usize = 8;

/// The tables one filter's code holds the addresses of: its large sets' range tables,
/// each `[lo, hi]` sorted by `lo`, and its pair lists' tables (`super::pairs`).
#[derive(Default)]
pub(super) struct SetTables {
    pub(super) ranges: Vec<Box<[[u32; 2]]>>,
    pub(super) pairs: Vec<std::sync::Arc<weir_filter::PairTable>>,
}

impl SetTables {
    pub(super) fn new() -> SetTables {
        SetTables::default()
    }

    pub(super) fn len(&self) -> usize {
        self.ranges.len() + self.pairs.len()
    }
}

/// Table loads: always in bounds and aligned (the search never leaves its table, whose
/// pairs are 4-byte aligned), and the table never changes, so they may move freely.
fn table_flags() -> MemFlags {
    MemFlags::trusted().with_readonly().with_can_move()
}

impl Lowering<'_, '_> {
    /// Branches to `t` when `v` lies in one of `ranges` (sorted, disjoint), else to `f`.
    pub(super) fn set_test(
        &mut self,
        v: Value,
        ranges: &[(u32, u32)],
        t: Block,
        f: Block,
    ) -> Result<(), CompileError> {
        if ranges.len() <= CHAIN_MAX {
            self.chain(v, ranges, t, f);
            return Ok(());
        }
        self.search(v, ranges, t, f)
    }

    fn chain(&mut self, v: Value, ranges: &[(u32, u32)], t: Block, f: Block) {
        let Some((last, init)) = ranges.split_last() else {
            return self.jump(f);
        };
        for &range in init {
            let next = self.new_block();
            let hit = self.in_range(v, range);
            self.branch(hit, t, next);
            self.switch_to(next);
        }
        let hit = self.in_range(v, *last);
        self.branch(hit, t, f);
    }

    /// `lo <= v <= hi` as one compare where it can be.
    fn in_range(&mut self, v: Value, (lo, hi): (u32, u32)) -> Value {
        let ins = self.b.ins();
        match (lo, hi) {
            _ if lo == hi => ins.icmp_imm(IntCC::Equal, v, i64::from(lo)),
            (0, _) => ins.icmp_imm(IntCC::UnsignedLessThanOrEqual, v, i64::from(hi)),
            (_, u32::MAX) => ins.icmp_imm(IntCC::UnsignedGreaterThanOrEqual, v, i64::from(lo)),
            _ => {
                // v - lo wraps below lo, so one unsigned compare covers both ends.
                let shifted = ins.iadd_imm(v, -i64::from(lo));
                let width = hi.wrapping_sub(lo);
                self.b.ins().icmp_imm(IntCC::UnsignedLessThanOrEqual, shifted, i64::from(width))
            }
        }
    }

    /// The last pair whose `lo <= v` (or the first pair, if none), then one range test.
    fn search(
        &mut self,
        v: Value,
        ranges: &[(u32, u32)],
        t: Block,
        f: Block,
    ) -> Result<(), CompileError> {
        const PAIR: i64 = 8;
        let too_large = || CompileError::SetTooLarge { ranges: ranges.len() };
        // Byte offsets into the table must fit a load's 32-bit displacement.
        let bytes = i64::try_from(ranges.len()).map_err(|_| too_large())?.saturating_mul(PAIR);
        if bytes > i64::from(i32::MAX) {
            return Err(too_large());
        }
        let table: Box<[[u32; 2]]> = ranges.iter().map(|&(lo, hi)| [lo, hi]).collect();
        let base = self.b.ins().iconst(types::I64, table.as_ptr() as i64);
        self.tables.ranges.push(table);

        // Invariant: the answer's index lies in `offset/8 .. offset/8 + len`; each step
        // halves `len` and moves `offset` past the probed pair when its `lo <= v`.
        let mut offset = self.b.ins().iconst(types::I64, 0);
        let mut len = ranges.len();
        while len > 1 {
            let half = len / 2;
            let step = (half as i64).wrapping_mul(PAIR);
            let at = self.b.ins().iadd(base, offset);
            let lo = self.b.ins().load(types::I32, table_flags(), at, step as i32);
            let below = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, lo, v);
            let moved = self.b.ins().iadd_imm(offset, step);
            offset = self.b.ins().select(below, moved, offset);
            len = len.wrapping_sub(half);
        }
        let at = self.b.ins().iadd(base, offset);
        let lo = self.b.ins().load(types::I32, table_flags(), at, 0);
        let hi = self.b.ins().load(types::I32, table_flags(), at, 4);
        let above_lo = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, lo, v);
        let below_hi = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, v, hi);
        let hit = self.b.ins().band(above_lo, below_hi);
        self.branch(hit, t, f);
        Ok(())
    }
}
