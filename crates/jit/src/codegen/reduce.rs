//! The sum idiom: an unrolled counted loop whose body adds consecutive 8-byte words of
//! memory into one register, each group of `factor` adds lowered to 16-byte vector loads
//! and lane-wise 64-bit adds into a vector of two partial sums carried across the groups;
//! one horizontal add after the last group puts them into the register.
//!
//! `weir-bench interp`'s stack-copy ends summing its 32 stack words
//! (`ldxdw r5, [r10 - 256 + i]; add r0, r5; i += 8`): unrolled, that is 8 scalar loads
//! and 8 adds a group, where a C compiler loads 16 bytes at a time and adds with `paddq`
//! (bench/records/2026-11-29-jit-4.txt). Wrapping 64-bit addition is associative and commutative, so
//! adding the words in pairs, lane by lane, then the two lanes, gives the loop's sum in
//! every bit: the lanes may be summed in any order.
//!
//! **Recognition** ([`find`]) is structural. The body has exactly one memory access, a
//! plain 8-byte load (`ldxdw`) into `v`, and exactly one `add acc, v` (64-bit, register)
//! after it; nothing else in the body reads or writes `v` or `acc`, and `acc` is neither
//! `v`, the counted register nor `r10`. The load's address is affine in the counted
//! register with stride 8 (`copy::address`), so a group's loads are the contiguous
//! `[a_0, a_0 + 8 * factor)`, and the facts must let the load through unchecked into one
//! host slice (`Plan::direct`). The body's other instructions (address arithmetic, the
//! counter's step) run as written, `factor` times; `v` is left holding the group's last
//! word, as the loop leaves it.

use cranelift_codegen::ir::{types, InstBuilder, Value};
use weir_isa::ebpf::{Insn, Op, Operands};

use super::copy::{address, Affine};
use super::facts::Plan;
use super::{var, Translator, SUM_LANES};
use crate::CompileError;

/// A recognised sum body (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sum {
    /// Slots of the load and of the add.
    pub(crate) load: usize,
    pub(crate) add: usize,
    /// The register the load writes, and the accumulator.
    pub(crate) value: u8,
    pub(crate) acc: u8,
    /// The load's address at an iteration's start.
    pub(crate) from: Affine,
    /// Host window of the load (`Plan::direct`).
    pub(crate) window: usize,
}

/// Whether `insn` reads register `r`: every operand form but the immediates' `dst` of a
/// `mov` and the `lddw` pair.
fn reads(insn: &Insn, r: u8) -> bool {
    match insn.op.spec().map(|s| s.operands) {
        Some(Operands::DstSrc) => {
            insn.src == r || (insn.dst == r && !matches!(insn.op, Op::Mov64Reg | Op::Mov32Reg))
        }
        Some(Operands::DstImm) => insn.dst == r && !matches!(insn.op, Op::Mov64Imm | Op::Mov32Imm),
        Some(Operands::DstImm64) => false,
        Some(Operands::Load) => insn.src == r,
        _ => insn.src == r || insn.dst == r,
    }
}

/// The sum idiom in the counted loop `body` (slots, the closing jump excluded) stepping
/// `reg` by `step`, if it is one and the facts let the load through unchecked.
pub(crate) fn find(insns: &[Insn], body: &[usize], reg: u8, step: i64, plan: &Plan) -> Option<Sum> {
    let sum = shape(insns, body, reg, step)?;
    Some(Sum { window: plan.direct(sum.load)?, ..sum })
}

/// The sum idiom's shape, whatever the facts (`window` left at 0).
fn shape(insns: &[Insn], body: &[usize], reg: u8, step: i64) -> Option<Sum> {
    let at = |pc: usize| insns.get(pc);
    let mut accesses = Vec::new();
    for &pc in body {
        let operands = at(pc)?.op.spec()?.operands;
        if matches!(operands, Operands::Load | Operands::StoreImm | Operands::StoreReg) {
            accesses.push(pc);
        }
    }
    let [load] = accesses[..] else { return None };
    let load_insn = at(load)?;
    let value = load_insn.dst;
    if load_insn.op != Op::LdxDw || value == reg || value >= 10 {
        return None;
    }
    let mut add = None;
    for &pc in body {
        let insn = at(pc)?;
        if insn.op == Op::Add64Reg && insn.src == value && pc > load && add.replace(pc).is_some() {
            return None;
        }
    }
    let add = add?;
    let acc = at(add)?.dst;
    if acc == value || acc == reg || acc >= 10 {
        return None;
    }
    for &pc in body {
        let insn = at(pc)?;
        if pc == load || pc == add {
            continue;
        }
        let touches = |r: u8| reads(insn, r) || super::counted::writes(insn, r);
        if touches(value) || touches(acc) {
            return None;
        }
    }
    let from = address(insns, body, reg, load)?;
    if from.counter.checked_mul(step) != Some(8) {
        return None;
    }
    Some(Sum { load, add, value, acc, from, window: 0 })
}

impl Translator<'_, '_> {
    /// One group of an unrolled sum loop: `factor` words loaded 16 bytes at a time, added
    /// lane-wise, the two lanes added into the accumulator, and the body's other
    /// instructions as written. Returns false, emitting nothing, when the bias is not at
    /// hand or `factor` is odd. A group that is the whole loop (`alone`) starts the lane
    /// sums itself, with no zero vector added in (Cranelift keeps `x + splat(0)`).
    pub(super) fn wide_sum_group(
        &mut self,
        sum: Sum,
        reg: u8,
        factor: usize,
        body: &[usize],
        alone: bool,
    ) -> Result<bool, CompileError> {
        if factor < 2 || factor % 2 != 0 {
            return Ok(false);
        }
        let Some((fixed, counted)) = self.affine_host(sum.from, reg, sum.window) else {
            return Ok(false);
        };
        let from = self.b.ins().iadd(fixed, counted);
        let flags = super::copy::flags();
        // A balanced tree: independent adds, as a compiler's reduction does, each made as
        // soon as its two halves are (a binary counter of partial sums by height), so at
        // most log2(factor / 2) + 1 vectors are live, not every pair of a long group:
        // Cranelift does not reorder the loads among the adds.
        let mut partial: Vec<(u32, Value)> = Vec::new();
        let mut last_pair = None;
        for k in 0..factor / 2 {
            let pair = self.b.ins().load(types::I64X2, flags, from, (k * 16) as i32);
            last_pair = Some(pair);
            let mut top = (0, pair);
            while let Some(&(height, below)) = partial.last() {
                if height != top.0 {
                    break;
                }
                partial.pop();
                top = (height + 1, self.b.ins().iadd(below, top.1));
            }
            partial.push(top);
        }
        // The last word (`v` after the group): the last pair's upper lane, pure, so gone
        // when nothing reads `v`.
        let Some(last_pair) = last_pair else { return Ok(false) };
        let last = self.b.ins().extractlane(last_pair, 1);
        let Some((_, mut group)) = partial.pop() else { return Ok(false) };
        while let Some((_, below)) = partial.pop() {
            group = self.b.ins().iadd(below, group);
        }
        let lanes = if alone {
            group
        } else {
            let lanes = self.b.use_var(var(SUM_LANES));
            self.b.ins().iadd(lanes, group)
        };
        self.b.def_var(var(SUM_LANES), lanes);
        self.sums = [None; weir_isa::ebpf::REG_COUNT as usize];
        let mode = self.mode;
        for _ in 0..factor {
            for (k, &slot) in body.iter().enumerate() {
                if slot == sum.load || slot == sum.add {
                    continue;
                }
                self.pc = slot;
                self.mode = super::Mode::Hot { n: body.len() + 1, k };
                self.instruction(slot)?;
            }
        }
        self.mode = mode;
        self.set(sum.value, last)?;
        self.sums = [None; weir_isa::ebpf::REG_COUNT as usize];
        Ok(true)
    }

    /// Before a wide sum loop's first group: no lane sums yet.
    pub(super) fn start_sum_lanes(&mut self) {
        let zero = self.iconst(0);
        let lanes = self.b.ins().splat(types::I64X2, zero);
        self.b.def_var(var(SUM_LANES), lanes);
    }

    /// After a wide sum loop's last group: its two lanes added into the accumulator, which
    /// the groups left alone. Nothing between the groups reads the accumulator (the body
    /// touches it only by its one `add`, and no way out leaves from a group), so it holds
    /// the loop's sum from here on, in every bit (wrapping addition).
    pub(super) fn finish_sum_lanes(&mut self, sum: Sum) -> Result<(), CompileError> {
        let lanes = self.b.use_var(var(SUM_LANES));
        let low = self.b.ins().extractlane(lanes, 0);
        let high = self.b.ins().extractlane(lanes, 1);
        let groups = self.b.ins().iadd(low, high);
        let acc = self.get(sum.acc);
        let acc = self.b.ins().iadd(acc, groups);
        self.set(sum.acc, acc)?;
        self.sums = [None; weir_isa::ebpf::REG_COUNT as usize];
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_isa::asm::assemble;

    /// The shape of the loop body `src` (closing jump excluded) counted by r3 stepping 8.
    fn shape_of(src: &str) -> Option<Sum> {
        let insns = assemble(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let body: Vec<usize> = (0..insns.len()).collect();
        shape(&insns, &body, 3, 8)
    }

    #[test]
    fn the_benchs_sum_body_is_the_idiom() {
        let sum = shape_of(
            "mov %r6, %r10\nadd %r6, -256\nadd %r6, %r3\nldxdw %r5, [%r6]\nadd %r0, %r5\n\
             add %r3, 8",
        );
        let from = Affine { inv: Some(10), counter: 1, k: -256 };
        assert_eq!(sum, Some(Sum { load: 3, add: 4, value: 5, acc: 0, from, window: 0 }));
        // Through memory: the base register kept, an offset in the load.
        let sum =
            shape_of("mov %r4, %r1\nadd %r4, %r3\nldxdw %r7, [%r4+16]\nadd %r3, 8\nadd %r2, %r7")
                .expect("the idiom");
        assert_eq!((sum.acc, sum.value, sum.from.k, sum.from.inv), (2, 7, 16, Some(1)));
    }

    #[test]
    fn bodies_that_are_not_a_plain_sum_are_refused() {
        let refused = [
            // A 4-byte load: its adds are of 32-bit words, not the 8-byte lanes.
            "mov %r4, %r1\nadd %r4, %r3\nldxw %r5, [%r4]\nadd %r0, %r5\nadd %r3, 8",
            // The value also used otherwise, or added twice.
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd %r0, %r5\nxor %r2, %r5\nadd %r3, 8",
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd %r0, %r5\nadd %r0, %r5\nadd %r3, 8",
            // The accumulator read or written elsewhere in the body.
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd %r0, %r5\nrsh %r0, 1\nadd %r3, 8",
            "mov %r4, %r1\nadd %r4, %r0\nldxdw %r5, [%r4]\nadd %r0, %r5\nadd %r3, 8",
            // A 32-bit add, a subtraction: not the 64-bit sum.
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd32 %r0, %r5\nadd %r3, 8",
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nsub %r0, %r5\nadd %r3, 8",
            // Stride 16 for 8-byte words, a base the body moves, a store in the body.
            "mov %r4, %r3\nadd %r4, %r3\nadd %r4, %r1\nldxdw %r5, [%r4]\nadd %r0, %r5\nadd %r3, 8",
            "add %r1, 8\nmov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd %r0, %r5\nadd %r3, 8",
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd %r0, %r5\nstxdw [%r10-8], %r3\n\
             add %r3, 8",
            // The counter as the accumulator.
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd %r3, %r5",
        ];
        for src in refused {
            assert_eq!(shape_of(src), None, "{src}");
        }
    }
}
