//! The copy idiom: an unrolled counted loop whose body moves `W` bytes from `p + i` to
//! `q + i` and steps `i` by `W`, its group of `factor` copies lowered to wide moves.
//!
//! `weir-bench interp`'s stack-copy (`ldxdw r5, [r1 + i]; stxdw [r10 - 256 + i], r5;
//! i += 8`) ran 8 bytes per load/store pair where a C compiler calls memcpy, which moves
//! 32 bytes per instruction (bench/records/2026-11-29-jit-2.txt). Here a group of the
//! unrolled loop (`counted`, "Unrolling") moves its `factor * W` bytes in 16-byte vector
//! loads and stores instead (8-byte and smaller moves for what is left).
//!
//! **Recognition** ([`find`]) is structural. The body has exactly one memory load and one
//! memory store, both plain (`ldx` zero-extending, `stx`, no atomics) and of the same width
//! `W`; the store writes the register the load wrote (`v`), which nothing else in the body
//! reads or writes. Every other instruction only changes registers. Each address is an
//! affine form of the iteration's registers: `inv + c * r + k`, where `inv` is a register
//! the body never writes (so every iteration sees the same value; r10 too), `r` the
//! counted register (its value at the iteration's start) and `c`, `k` constants, tracked
//! through `mov`, `add` and `sub` (64-bit, immediate or register). Iteration `j` of a group
//! then reaches `a_0 + j * c * step`; with `c * step = W` the group's accesses are the
//! contiguous `[a_0, a_0 + factor * W)`. Both accesses must be ones the facts let through
//! unchecked into one host slice (`Plan::direct`): each iteration's access is in bounds,
//! so the whole range is, and `host = guest + bias` holds over it.
//!
//! **Overlap.** The loop's own order is load 0, store 0, load 1, store 1, ... The wide
//! group does every load first. The two agree exactly when no store reaches a later
//! iteration's load: with `d = store - load` (host addresses), store `j` meets load `m > j`
//! only when `|d - (m - j) * W| < W`, that is when `0 < d < factor * W`. The group tests
//! that at run time (one compare: `d - 1 >= factor * W - 1`, unsigned) and runs the plain
//! copies when it fails, so a copy into itself shifted up (which smears, and must) keeps
//! the eBPF byte order; a copy down, onto itself or disjoint takes the wide moves. Between
//! the stack and any other window the test is decided at compile time ([`apart_always`]):
//! the stack is the cache's own buffer, which no run's input can point into, so the group
//! is the wide moves alone (no test, no plain copies beside them). A body
//! short enough to be unrolled by 8 is unrolled by [`COPY_FACTOR`] (or [`COPY_FACTOR_LONG`])
//! instead (`widened`). The last iteration's `v` (left in the register after the loop) is
//! read before any store.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Endianness, InstBuilder, MemFlags, Type, Value};
use weir_isa::ebpf::{Insn, Op, REG_COUNT};

use super::counted::{Bound, Unroll};
use super::facts::Plan;
use super::Translator;
use crate::guest::STACK;
use crate::CompileError;

/// A recognised copy body (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Copy {
    /// Slots of the load and the store.
    pub(crate) load: usize,
    pub(crate) store: usize,
    /// Bytes per iteration.
    pub(crate) width: u8,
    /// The register the load writes and the store reads.
    pub(crate) value: u8,
    /// The load's and the store's address at an iteration's start.
    pub(crate) from: Affine,
    pub(crate) to: Affine,
    /// Host windows of the load and the store (`Plan::direct`).
    pub(crate) windows: (usize, usize),
}

/// `inv + counter * r + k` (see the module docs); `inv` a register the body keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Affine {
    pub(crate) inv: Option<u8>,
    pub(crate) counter: i64,
    pub(crate) k: i64,
}

impl Affine {
    fn constant(k: i64) -> Self {
        Affine { inv: None, counter: 0, k }
    }

    fn plus(self, other: Affine) -> Option<Affine> {
        let inv = match (self.inv, other.inv) {
            (Some(_), Some(_)) => return None,
            (a, b) => a.or(b),
        };
        Some(Affine {
            inv,
            counter: self.counter.checked_add(other.counter)?,
            k: self.k.wrapping_add(other.k),
        })
    }
}

/// The width of a plain (not sign-extending) register load or a register store, and
/// whether it is the load; the width is the instruction table's (`Op::mem_size`).
fn width(op: Op) -> Option<(u8, bool)> {
    let is_load = match op {
        Op::LdxB | Op::LdxH | Op::LdxW | Op::LdxDw => true,
        Op::StxB | Op::StxH | Op::StxW | Op::StxDw => false,
        _ => return None,
    };
    // Fits: an access is at most 8 bytes.
    Some((op.mem_size()?.bytes() as u8, is_load))
}

/// Whether `insn` reads register `r` (ALU forms and the two accesses this module admits).
fn reads(insn: &Insn, r: u8) -> bool {
    use weir_isa::ebpf::Operands;
    match insn.op.spec().map(|s| s.operands) {
        Some(Operands::DstSrc) => {
            insn.src == r || (insn.dst == r && !matches!(insn.op, Op::Mov64Reg | Op::Mov32Reg))
        }
        Some(Operands::DstImm) => insn.dst == r && !matches!(insn.op, Op::Mov64Imm | Op::Mov32Imm),
        Some(Operands::Dst) => insn.dst == r,
        Some(Operands::DstImm64) => false,
        Some(Operands::Load) => insn.src == r,
        _ => insn.src == r || insn.dst == r,
    }
}

/// The copy idiom in the counted loop `body` (slots, the closing jump excluded) stepping
/// `reg` by `step`, if it is one and the facts let both accesses through unchecked (see the
/// module docs).
pub(crate) fn find(
    insns: &[Insn],
    body: &[usize],
    reg: u8,
    step: i64,
    plan: &Plan,
) -> Option<Copy> {
    let copy = shape(insns, body, reg, step)?;
    let windows = (plan.direct(copy.load)?, plan.direct(copy.store)?);
    Some(Copy { windows, ..copy })
}

/// The copy idiom's shape, whatever the facts (`windows` left at 0).
fn shape(insns: &[Insn], body: &[usize], reg: u8, step: i64) -> Option<Copy> {
    let at = |pc: usize| insns.get(pc);
    let mut load = None;
    let mut store = None;
    for &pc in body {
        let insn = at(pc)?;
        match insn.op.spec().map(|s| s.operands)? {
            weir_isa::ebpf::Operands::Load | weir_isa::ebpf::Operands::StoreReg => {
                let (w, is_load) = width(insn.op)?;
                let slot = if is_load { &mut load } else { &mut store };
                if slot.replace((pc, w)).is_some() {
                    return None;
                }
            }
            weir_isa::ebpf::Operands::StoreImm => return None,
            _ => {}
        }
    }
    let ((load, w), (store, sw)) = (load?, store?);
    let (load_insn, store_insn) = (at(load)?, at(store)?);
    let value = load_insn.dst;
    if w != sw || store_insn.src != value || load >= store || value == reg || value >= 10 {
        return None;
    }
    // `v` only carries the loaded bytes to the store.
    for &pc in body {
        let insn = at(pc)?;
        if pc != load && pc != store && (reads(insn, value) || super::counted::writes(insn, value))
        {
            return None;
        }
    }
    let from = address(insns, body, reg, load)?;
    let to = address(insns, body, reg, store)?;
    let stride = i64::from(w);
    let contiguous = |a: Affine| a.counter.checked_mul(step) == Some(stride);
    if !contiguous(from) || !contiguous(to) {
        return None;
    }
    Some(Copy { load, store, width: w, value, from, to, windows: (0, 0) })
}

/// The address of the access at slot `access` (a load, a store or an atomic of `body`)
/// as an affine form of the iteration's registers (see the module docs), if the body's
/// `mov`/`add`/`sub` make it one; `reg` the counted register.
pub(crate) fn address(insns: &[Insn], body: &[usize], reg: u8, access: usize) -> Option<Affine> {
    use weir_isa::ebpf::Operands;
    let at = |pc: usize| insns.get(pc);
    let written =
        |r: u8| body.iter().any(|&pc| at(pc).is_some_and(|i| super::counted::writes(i, r)));
    let mut regs: [Option<Affine>; REG_COUNT as usize] = [None; REG_COUNT as usize];
    for (r, slot) in regs.iter_mut().enumerate() {
        let r = r as u8;
        *slot = if r == reg {
            Some(Affine { inv: None, counter: 1, k: 0 })
        } else if r == 10 || !written(r) {
            Some(Affine { inv: Some(r), counter: 0, k: 0 })
        } else {
            None
        };
    }
    for &pc in body {
        let insn = at(pc)?;
        let src = regs.get(usize::from(insn.src)).copied().flatten();
        let dst = regs.get(usize::from(insn.dst)).copied().flatten();
        let imm = i64::from(insn.imm as i32);
        let operands = insn.op.spec().map(|s| s.operands)?;
        let base = match operands {
            Operands::Load => Some(src),
            Operands::StoreImm | Operands::StoreReg => Some(dst),
            _ => None,
        };
        if pc == access {
            let off = i64::from(insn.off);
            return base?.map(|a| Affine { k: a.k.wrapping_add(off), ..a });
        }
        let next = match insn.op {
            _ if base.is_some() => None,
            Op::Mov64Imm => Some(Affine::constant(imm)),
            Op::Mov64Reg => src,
            Op::Add64Imm => dst.map(|a| Affine { k: a.k.wrapping_add(imm), ..a }),
            Op::Sub64Imm => dst.map(|a| Affine { k: a.k.wrapping_sub(imm), ..a }),
            Op::Add64Reg => dst.zip(src).and_then(|(a, b)| a.plus(b)),
            _ => None,
        };
        // Whatever the instruction writes loses its form unless tracked just above
        // (a load's destination, an atomic's fetched register).
        for (r, slot) in regs.iter_mut().enumerate() {
            if super::counted::writes(insn, r as u8) {
                *slot = None;
            }
        }
        if base.is_none() {
            if let Some(slot) = regs.get_mut(usize::from(insn.dst)) {
                *slot = next;
            }
        }
    }
    None
}

/// Whether a copy between host windows `windows` (load, store) can never overlap, so that
/// its groups need no overlap test: exactly one of them is the stack. The stack window is
/// the cache's own buffer (`Cache::stack`), and every run borrows the cache mutably while
/// its context, packet, memory or lent frame are the caller's slices, so no other window's
/// host range meets it. Two accesses in one window, or in two caller windows (which a
/// caller may lay out anywhere), keep the test.
pub(crate) fn apart_always(windows: (usize, usize)) -> bool {
    (windows.0 == STACK) != (windows.1 == STACK)
}

/// Iterations per group of a copy loop: its groups move 16 bytes an instruction with no
/// per-iteration work left but the counter, so longer groups spread the guard further.
pub(crate) const COPY_FACTOR: usize = 16;

/// Iterations per group of a copy loop whose trip count from 0 is a multiple of it
/// (`for (i = 0; i < 32 * m; i++)`, as the bench's stack-copy): the groups then leave no
/// remainder from 0, and each moves up to 256 bytes, sixteen 16-byte loads before the
/// stores (all of x64's vector registers). Measured on stack-copy (32 words a round):
/// 3.3-3.7 ns a round against 4.6-5.0 with two groups of 16, in two sessions
/// (bench/records/2026-11-29-jit-9.txt).
const COPY_FACTOR_LONG: usize = 32;

/// `unroll` with `short` iterations a group ([`COPY_FACTOR_LONG`] when a `<` bound
/// counted up to from 0 takes a multiple of that many), for a body short enough to be
/// unrolled by 8 (the plain copies, kept for overlaps, stay under 32 * 8 instructions) and
/// a guard whose limit does not wrap; else as it was. Copies take [`COPY_FACTOR`]; sums
/// (`reduce`) 8, so only a loop of a multiple of 32 words gets longer groups: a loop whose
/// trip count is known (`counted::trips`, as stack-copy's sum of its 32 stack words) is
/// then one group, sixteen 16-byte loads added in one tree, with no loop left around it.
pub(crate) fn widened(unroll: Unroll, step: i64, short: usize) -> Unroll {
    if unroll.factor != 8 {
        return unroll;
    }
    let long = match unroll.bound {
        Bound::Const(limit) => {
            let below = matches!(unroll.cc, IntCC::UnsignedLessThan | IntCC::SignedLessThan);
            let trips = (step > 0 && limit > 0 && limit % step == 0).then(|| limit / step);
            below && trips.is_some_and(|t| t % COPY_FACTOR_LONG as i64 == 0)
        }
        Bound::Reg(_) => false,
    };
    let factor = if long { COPY_FACTOR_LONG } else { short };
    let Some(span) = step.checked_mul(factor as i64 - 1) else { return unroll };
    if let Bound::Const(limit) = unroll.bound {
        if super::counted::limit_wraps(unroll.cc, limit, span) {
            return unroll;
        }
    }
    Unroll { factor, span, ..unroll }
}

/// Guest memory as `memory` accesses it: proven in bounds, little-endian, maybe unaligned.
pub(super) fn flags() -> MemFlags {
    MemFlags::new()
        .with_notrap()
        .with_endianness(Endianness::Little)
        .with_alias_region(Some(cranelift_codegen::ir::AliasRegion::Heap))
}

/// The widest moves the host's vectors allow, then 8, 4, 2, 1 bytes.
fn chunks(total: u32) -> Vec<(Type, u32)> {
    let wide: &[(Type, u32)] = if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        &[(types::I64X2, 16), (types::I64, 8), (types::I32, 4), (types::I16, 2), (types::I8, 1)]
    } else {
        &[(types::I64, 8), (types::I32, 4), (types::I16, 2), (types::I8, 1)]
    };
    let mut out = Vec::new();
    let mut left = total;
    for &(ty, size) in wide {
        while left >= size {
            out.push((ty, total - left));
            left -= size;
        }
    }
    out
}

impl Translator<'_, '_> {
    /// The host address of `a` at the current iteration's start, in `window`, as the
    /// part the loop keeps (bias, `inv`, `k`) and the counted part.
    pub(super) fn affine_host(
        &mut self,
        a: Affine,
        reg: u8,
        window: usize,
    ) -> Option<(Value, Value)> {
        let bias = self.biases.get(window).copied().flatten()?;
        let mut fixed = self.b.ins().iadd_imm(bias, a.k);
        if let Some(inv) = a.inv {
            let r = self.get(inv);
            fixed = self.b.ins().iadd(fixed, r);
        }
        let r = self.get(reg);
        let counted = self.b.ins().imul_imm(r, a.counter);
        Some((fixed, counted))
    }

    /// One group of an unrolled copy loop: when the ranges allow it (see the module docs),
    /// the wide moves and the body's register work, else `plain` (the copies as written).
    /// Returns false, emitting nothing, when the biases are not at hand.
    pub(super) fn wide_copy_group(
        &mut self,
        copy: Copy,
        reg: u8,
        factor: usize,
        body: &[usize],
        mut plain: impl FnMut(&mut Self) -> Result<(), CompileError>,
    ) -> Result<bool, CompileError> {
        let Some((from_fixed, from_counted)) = self.affine_host(copy.from, reg, copy.windows.0)
        else {
            return Ok(false);
        };
        let Some((to_fixed, to_counted)) = self.affine_host(copy.to, reg, copy.windows.1) else {
            return Ok(false);
        };
        let from = self.b.ins().iadd(from_fixed, from_counted);
        let to = self.b.ins().iadd(to_fixed, to_counted);
        let total = u32::from(copy.width) * factor as u32;
        let wide = self.b.create_block();
        let join = self.b.create_block();
        let narrow = if apart_always(copy.windows) {
            self.b.ins().jump(wide, &[]);
            None
        } else {
            // Both step by `W` an iteration (`c * step = W` for each), so `c` is the same
            // and `d` is the kept parts' difference: loop-invariant.
            let d = self.b.ins().isub(to_fixed, from_fixed);
            let d1 = self.b.ins().iadd_imm(d, -1);
            let apart =
                self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, d1, i64::from(total) - 1);
            let narrow = self.b.create_block();
            self.b.set_cold_block(narrow);
            self.b.ins().brif(apart, wide, &[], narrow, &[]);
            Some(narrow)
        };

        self.b.switch_to_block(wide);
        let moves = chunks(total);
        let loaded: Vec<Value> = moves
            .iter()
            .map(|&(ty, off)| self.b.ins().load(ty, flags(), from, off as i32))
            .collect();
        // The last iteration's `v`: for 8-byte words ending the group with a 16-byte move,
        // its upper lane (pure, so gone when nothing reads `v`, as in the bench, where the
        // next loop overwrites it), else a load of its own.
        let last_off = (total - u32::from(copy.width)) as i32;
        let last = match (copy.width, moves.last(), loaded.last()) {
            (8, Some(&(types::I64X2, off)), Some(&v)) if off + 16 == total => {
                self.b.ins().extractlane(v, 1)
            }
            (1, ..) => self.b.ins().uload8(types::I64, flags(), from, last_off),
            (2, ..) => self.b.ins().uload16(types::I64, flags(), from, last_off),
            (4, ..) => self.b.ins().uload32(flags(), from, last_off),
            _ => self.b.ins().load(types::I64, flags(), from, last_off),
        };
        for (&(_, off), &v) in moves.iter().zip(&loaded) {
            self.b.ins().store(flags(), v, to, off as i32);
        }
        self.sums = [None; REG_COUNT as usize];
        let mode = self.mode;
        for _ in 0..factor {
            for (k, &slot) in body.iter().enumerate() {
                if slot == copy.load || slot == copy.store {
                    continue;
                }
                self.pc = slot;
                self.mode = super::Mode::Hot { n: body.len() + 1, k };
                self.instruction(slot)?;
            }
        }
        self.mode = mode;
        self.set(copy.value, last)?;
        self.b.ins().jump(join, &[]);

        if let Some(narrow) = narrow {
            self.b.switch_to_block(narrow);
            self.sums = [None; REG_COUNT as usize];
            plain(self)?;
            self.b.ins().jump(join, &[]);
        }
        self.b.switch_to_block(join);
        self.sums = [None; REG_COUNT as usize];
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_isa::asm::assemble;

    /// The shape of the loop body `src` (closing jump excluded) counted by r3 stepping 8.
    fn shape_of(src: &str) -> Option<Copy> {
        let insns = assemble(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let body: Vec<usize> = (0..insns.len()).collect();
        shape(&insns, &body, 3, 8)
    }

    #[test]
    fn the_benchs_copy_body_is_the_idiom() {
        let copy = shape_of(
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nmov %r6, %r10\nadd %r6, -256\n\
             add %r6, %r3\nstxdw [%r6], %r5\nadd %r3, 8",
        );
        let from = Affine { inv: Some(1), counter: 1, k: 0 };
        let to = Affine { inv: Some(10), counter: 1, k: -256 };
        let expected = Copy { load: 2, store: 6, width: 8, value: 5, from, to, windows: (0, 0) };
        assert_eq!(copy, Some(expected));
        // The step taken first, offsets in the accesses: still affine.
        let copy = shape_of(
            "add %r3, 8\nmov %r4, %r3\nadd %r4, %r1\nldxdw %r5, [%r4-8]\nmov %r6, %r3\n\
             sub %r6, 264\nadd %r6, %r10\nstxdw [%r6+4], %r5",
        )
        .expect("the idiom");
        assert_eq!((copy.from.k, copy.to.k), (0, -252));
    }

    #[test]
    fn bodies_that_are_not_a_plain_copy_are_refused() {
        let refused = [
            // The loaded value also summed: every iteration's value is needed.
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd %r0, %r5\n\
             mov %r6, %r10\nadd %r6, %r3\nstxdw [%r6-256], %r5\nadd %r3, 8",
            // Widths differ.
            "mov %r4, %r1\nadd %r4, %r3\nldxw %r5, [%r4]\n\
             mov %r6, %r10\nadd %r6, %r3\nstxdw [%r6-256], %r5\nadd %r3, 8",
            // A stride of 16 for 8-byte moves: not contiguous.
            "mov %r4, %r3\nadd %r4, %r3\nadd %r4, %r1\nldxdw %r5, [%r4]\n\
             mov %r6, %r10\nadd %r6, %r3\nstxdw [%r6-256], %r5\nadd %r3, 8",
            // The source base is a register the body writes (not the same each iteration).
            "add %r1, 8\nmov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\n\
             mov %r6, %r10\nadd %r6, %r3\nstxdw [%r6-256], %r5\nadd %r3, 8",
            // Sign-extending load, and the store before the load.
            "mov %r4, %r1\nadd %r4, %r3\nldxsw %r5, [%r4]\n\
             mov %r6, %r10\nadd %r6, %r3\nstxw [%r6-256], %r5\nadd %r3, 8",
            "mov %r6, %r10\nadd %r6, %r3\nstxdw [%r6-256], %r5\n\
             mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nadd %r3, 8",
            // A second store.
            "mov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nstxdw [%r10-8], %r3\n\
             mov %r6, %r10\nadd %r6, %r3\nstxdw [%r6-256], %r5\nadd %r3, 8",
        ];
        for src in refused {
            assert_eq!(shape_of(src), None, "{src}");
        }
    }

    #[test]
    fn groups_are_long_when_the_trip_count_from_0_is_a_multiple_of_32() {
        let by_8 = |cc, bound, step: i64| Unroll { factor: 8, cc, bound, span: 7 * step };
        let factor = |cc, bound, step| widened(by_8(cc, bound, step), step, COPY_FACTOR).factor;
        use IntCC::*;
        // The bench's stack-copy: 32 words, `r3 < 256` by 8.
        assert_eq!(factor(UnsignedLessThan, Bound::Const(256), 8), 32);
        assert_eq!(factor(SignedLessThan, Bound::Const(512), 8), 32);
        // 25 and 48 iterations, a bound not a multiple of the step, `<=`, a register bound.
        assert_eq!(factor(UnsignedLessThan, Bound::Const(200), 8), 16);
        assert_eq!(factor(UnsignedLessThan, Bound::Const(384), 8), 16);
        assert_eq!(factor(UnsignedLessThan, Bound::Const(257), 8), 16);
        assert_eq!(factor(UnsignedLessThanOrEqual, Bound::Const(256), 8), 16);
        assert_eq!(factor(UnsignedLessThan, Bound::Reg(2), 8), 16);
        // Sums (`reduce`) keep groups of 8 unless the long groups apply.
        let sum = |cc, bound| widened(by_8(cc, bound, 8), 8, 8);
        assert_eq!(sum(UnsignedLessThan, Bound::Const(256)).factor, 32);
        assert_eq!(sum(UnsignedLessThan, Bound::Const(256)).span, 31 * 8);
        assert_eq!(sum(UnsignedLessThan, Bound::Const(512)).factor, 32);
        assert_eq!(
            sum(UnsignedLessThan, Bound::Const(384)),
            by_8(UnsignedLessThan, Bound::Const(384), 8)
        );
        assert_eq!(sum(UnsignedLessThan, Bound::Const(264)).factor, 8);
    }

    #[test]
    fn only_copies_between_the_stack_and_another_window_skip_the_overlap_test() {
        use crate::guest::{CTX, MEM, PACKET};
        for other in [MEM, PACKET, CTX] {
            assert!(apart_always((other, STACK)), "{other} -> stack");
            assert!(apart_always((STACK, other)), "stack -> {other}");
        }
        // One window, or two the caller lays out: the test stays.
        for same in [STACK, MEM, PACKET, CTX] {
            assert!(!apart_always((same, same)), "{same}");
        }
        assert!(!apart_always((MEM, PACKET)));
        assert!(!apart_always((PACKET, CTX)));
    }

    #[test]
    fn chunks_cover_the_range_once_in_order() {
        for total in [1u32, 7, 16, 24, 64, 65] {
            let mut next = 0;
            for (ty, off) in chunks(total) {
                assert_eq!(off, next);
                next += ty.bytes();
            }
            assert_eq!(next, total);
        }
    }
}
