//! Loads, stores, atomics and legacy packet loads, each checked against the run's region
//! table before it touches anything (see `crate::state` for the table's meaning).
//!
//! The fast path of an access at `reg + off` is: entry = (addr >> 28) mod 8; `rel = addr -
//! lo_addr`; `rel < bound[size]` or leave with `OutOfBounds`; host = `base_lo + rel`. A
//! shift, a mask, three loads from the table (which stays in the L1 cache), a subtraction
//! and one well-predicted branch; no call. One case skips even that: `r10 + off` with the
//! whole access inside the running frame (`-stack_size <= off` and `off + size <= 0`). r10
//! is always the running frame's top and programs cannot write it, so such an access is in
//! bounds by construction and its host address is `r10 + bias`. Every other base register
//! is checked on every access.
//!
//! Most accesses skip the table: when the base register's pointers most likely point into
//! one region (`provenance`), the access is first checked against that region alone, with
//! its lowest address, bound and host offset held in values computed once per run (pure
//! loads, which Cranelift hoists out of loops) or known when compiling (the stack of a
//! program without calls, the packet's base): `addr - lo < bound`, then host = `addr +
//! bias`. An address inside the guessed region is a valid access to it whatever the guess
//! was based on; anything else goes to the table path in a cold block, which finds the
//! right region or traps exactly as before. Accesses through `r1` use `r1` on entry as the
//! region's lowest address: `crate::run` takes `r1` from that very table entry.
//!
//! An access the verifier proved in bounds in a region of one host slice (`facts`) skips
//! all of this: host = `addr + bias`, the region's bias loaded once per run.
//!
//! Stores whose fast check fails (and all stores to the context, whose table entry admits
//! no fast store) call `state::check_store`, which applies the context layout's writable
//! fields and names the trap (`OutOfBounds` or `ReadOnly`) exactly as the interpreter does.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AliasRegion, AtomicRmwOp, Endianness, InstBuilder, MemFlags, Type, Value,
};
use weir_isa::ebpf::{Insn, Op, Operands};

use super::provenance::Guess;
use super::{arg, constant_flags, state_flags, Translator};
use crate::guest::{PACKET, PACKET_BASE, STACK, STACK_BASE, WINDOWS, WINDOW_SHIFT};
use crate::state::{self, offsets, size_index, ENTRY_SHIFT};
use crate::CompileError;

/// Guest memory: checked before every access (so no trap), little-endian, maybe unaligned,
/// and never the run state.
fn guest_flags() -> MemFlags {
    MemFlags::new()
        .with_notrap()
        .with_endianness(Endianness::Little)
        .with_alias_region(Some(AliasRegion::Heap))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    Load,
    Store,
}

/// The base register, offset, size and kind of check of the guest access `insn` makes
/// through [`Translator::host_address`]: loads, stores and atomics (checked as stores);
/// `None` for anything else (legacy loads have their own check).
pub(super) fn checked_access(insn: &Insn) -> Option<(u8, i16, u8, Access)> {
    let size = u8::try_from(insn.op.mem_size()?.bytes()).ok()?;
    match insn.op.spec()?.operands {
        Operands::Load => Some((insn.src, insn.off, size, Access::Load)),
        Operands::StoreImm | Operands::StoreReg => Some((insn.dst, insn.off, size, Access::Store)),
        _ => None,
    }
}

/// The bit of the value entry's bound word for `access` of `size` bytes in a
/// [`Translator::value_words`] mask.
pub(super) fn value_word(access: Access, size: u8) -> u8 {
    let store = if access == Access::Store { 4 } else { 0 };
    1 << (size_index(size) + store)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rmw {
    Add,
    Or,
    And,
    Xor,
    Xchg,
    CmpXchg,
}

/// An atomic instruction as (operation, returns the old value in src?, 64-bit?).
fn atomic(op: Op) -> Option<(Rmw, bool, bool)> {
    use Op::*;
    use Rmw::*;
    Some(match op {
        AtomicAdd64 => (Add, false, true),
        AtomicFetchAdd64 => (Add, true, true),
        AtomicOr64 => (Or, false, true),
        AtomicFetchOr64 => (Or, true, true),
        AtomicAnd64 => (And, false, true),
        AtomicFetchAnd64 => (And, true, true),
        AtomicXor64 => (Xor, false, true),
        AtomicFetchXor64 => (Xor, true, true),
        AtomicXchg64 => (Xchg, true, true),
        AtomicCmpXchg64 => (CmpXchg, false, true),
        AtomicAdd32 => (Add, false, false),
        AtomicFetchAdd32 => (Add, true, false),
        AtomicOr32 => (Or, false, false),
        AtomicFetchOr32 => (Or, true, false),
        AtomicAnd32 => (And, false, false),
        AtomicFetchAnd32 => (And, true, false),
        AtomicXor32 => (Xor, false, false),
        AtomicFetchXor32 => (Xor, true, false),
        AtomicXchg32 => (Xchg, true, false),
        AtomicCmpXchg32 => (CmpXchg, false, false),
        _ => return None,
    })
}

/// Whether `op` is an atomic read-modify-write (which may write `src` or r0).
pub(super) fn is_atomic(op: Op) -> bool {
    atomic(op).is_some()
}

/// The lowest address of a guessed region, or its access bound: known when compiling, or
/// loaded from the run state once.
#[derive(Clone, Copy, Debug)]
enum Lo {
    Known(i64),
    Loaded(Value),
}

#[derive(Clone, Copy, Debug)]
enum Bound {
    Known(u64),
    Loaded(Value),
}

/// A region to check an access against directly: inside when `addr - lo < bound`, and then
/// at host address `addr + bias`.
#[derive(Clone, Copy, Debug)]
struct View {
    lo: Lo,
    bound: Bound,
    bias: Value,
}

impl Translator<'_, '_> {
    /// Whether the access at `pc` through `base + off` of `size` bytes goes through a check
    /// ([`Self::host_address`]): neither inside the running frame nor proven direct. Only
    /// such accesses read the value entry's bounds.
    pub(super) fn is_checked(&self, pc: usize, base: u8, off: i16, size: u8) -> bool {
        let own_frame = base == 10 && self.in_own_frame(off, size);
        let direct =
            self.plan.direct(pc).and_then(|w| self.biases.get(w).copied().flatten()).is_some();
        !own_frame && !direct
    }

    /// Whether `r10 + off` of `size` bytes lies inside the running frame, whatever the depth.
    fn in_own_frame(&self, off: i16, size: u8) -> bool {
        let off = i64::from(off);
        let stack_size = i64::try_from(self.shape.stack_size).unwrap_or(i64::MAX);
        off >= stack_size.wrapping_neg() && off.saturating_add(i64::from(size)) <= 0
    }

    /// The host address of `size` bytes at `base + off`, as (address, displacement), after
    /// the checks of the module docs; leaves with a trap when they fail.
    fn host_address(&mut self, base: u8, off: i16, size: u8, access: Access) -> (Value, i32) {
        if self.is_checked(self.pc, base, off, size) {
            // Both the value entry's view and the table path read this bound word.
            self.value_reads |= value_word(access, size);
        }
        if base == 10 && self.in_own_frame(off, size) {
            let r10 = self.get(10);
            let host = self.b.ins().iadd(r10, self.stack_bias);
            return (host, i32::from(off));
        }
        // Proven in bounds in a region of one host slice: its bias alone (`facts`).
        if let Some(bias) =
            self.plan.direct(self.pc).and_then(|w| self.biases.get(w).copied().flatten())
        {
            let sum = self.sums.get(usize::from(base)).copied().flatten();
            let host = match sum {
                Some((ptr, index)) => {
                    let ptr = self.b.ins().iadd(ptr, bias);
                    self.b.ins().iadd(ptr, index)
                }
                None => {
                    let reg = self.get(base);
                    self.b.ins().iadd(reg, bias)
                }
            };
            return (host, i32::from(off));
        }
        let Some(view) = self.guessed_view(base, size, access) else {
            return self.table_address(base, off, size, access);
        };
        let reg = self.get(base);
        let addr = self.b.ins().iadd_imm(reg, i64::from(off));
        let rel = match view.lo {
            Lo::Known(lo) => self.b.ins().iadd_imm(addr, lo.wrapping_neg()),
            Lo::Loaded(lo) => self.b.ins().isub(addr, lo),
        };
        let inside = match view.bound {
            Bound::Known(bound) => {
                self.b.ins().icmp_imm(IntCC::UnsignedLessThan, rel, bound as i64)
            }
            Bound::Loaded(bound) => self.b.ins().icmp(IntCC::UnsignedLessThan, rel, bound),
        };
        let fast_host = self.b.ins().iadd(reg, view.bias);
        let join = self.b.create_block();
        let host = self.b.append_block_param(join, types::I64);
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        self.b.ins().brif(inside, join, &[arg(fast_host)], slow, &[]);
        self.b.seal_block(slow);

        // Outside the guessed region: the table finds the right one, or traps.
        self.b.switch_to_block(slow);
        let (checked, displacement) = self.table_address(base, off, size, access);
        // The table path may have split the slow block; all of it stays out of the way.
        if let Some(tail) = self.b.current_block() {
            self.b.set_cold_block(tail);
        }
        let shift = i64::from(displacement).wrapping_sub(i64::from(off));
        let rebased = self.b.ins().iadd_imm(checked, shift);
        self.b.ins().jump(join, &[arg(rebased)]);
        self.b.seal_block(join);
        self.b.switch_to_block(join);
        (host, i32::from(off))
    }

    /// How to check an access through `base` against the region its pointers most likely
    /// point into, with no table lookup: `None` when there is no useful guess (then the
    /// table decides).
    fn guessed_view(&mut self, base: u8, size: u8, access: Access) -> Option<View> {
        let guess = self.guesses.get(usize::from(base)).copied()?;
        let bounds = match access {
            Access::Load => offsets::LOAD_BOUND,
            Access::Store => offsets::STORE_BOUND,
        };
        let bound_at = bounds.wrapping_add(8 * size_index(size) as i32);
        match guess {
            Guess::Input => {
                // The context or memory: its entry never changes during a run, so these
                // loads are pure and leave loops.
                // Its lowest address is `r1` on entry (its base; 0 without one, whose entry
                // admits nothing), a value the program usually keeps live anyway.
                let (entry, lo) = self.input;
                let flags = constant_flags();
                let at = |field: i32| offsets::region(0).wrapping_add(field);
                let base_lo = self.b.ins().load(types::I64, flags, entry, at(offsets::BASE_LO));
                let bound = self.b.ins().load(types::I64, flags, entry, at(bound_at));
                let bias = self.b.ins().isub(base_lo, lo);
                Some(View { lo: Lo::Loaded(lo), bound: Bound::Loaded(bound), bias })
            }
            Guess::Packet => {
                let entry = offsets::region(PACKET);
                let base_lo = self.load_state(entry.wrapping_add(offsets::BASE_LO));
                let bound = self.load_state(entry.wrapping_add(bound_at));
                let lo = PACKET_BASE as i64;
                let bias = self.b.ins().iadd_imm(base_lo, lo.wrapping_neg());
                Some(View { lo: Lo::Known(lo), bound: Bound::Loaded(bound), bias })
            }
            // Without calls the stack's entry is fixed: frame 0, all known but its host.
            Guess::Stack if !self.cfg.has_calls => {
                let floor = self.shape.frame_floor(0);
                let lo = STACK_BASE.wrapping_add(floor) as i64;
                let span = self.shape.bytes().saturating_sub(floor);
                let bound = state::bound(span, u64::from(size));
                Some(View { lo: Lo::Known(lo), bound: Bound::Known(bound), bias: self.stack_bias })
            }
            // The map value reached last (`RunState::value`): an address of the map values
            // window, whose table entry admits nothing, so the table path would come to
            // this entry anyway. Its fields change at helper calls: loads kept in order.
            Guess::Value => {
                let at = |field: i32| offsets::VALUE.wrapping_add(field);
                let lo = self.load_status(at(offsets::LO_ADDR));
                let bound = self.load_status(at(bound_at));
                let base_lo = self.load_status(at(offsets::BASE_LO));
                let bias = self.b.ins().isub(base_lo, lo);
                Some(View { lo: Lo::Loaded(lo), bound: Bound::Loaded(bound), bias })
            }
            Guess::Stack | Guess::Scalar | Guess::Mixed => None,
        }
    }

    /// The host address of `size` bytes at `base + off` found through the region table.
    fn table_address(&mut self, base: u8, off: i16, size: u8, access: Access) -> (Value, i32) {
        let reg = self.get(base);
        let addr = self.b.ins().iadd_imm(reg, i64::from(off));
        // (addr >> 28) mod WINDOWS, scaled to an entry offset, in two instructions. Windows
        // past the table alias an entry, harmlessly: `addr - lo_addr` then differs from a
        // real offset by a nonzero multiple of WINDOWS * 2^28, which no bound admits.
        let shifted = self.b.ins().ushr_imm(addr, i64::from(WINDOW_SHIFT) - ENTRY_SHIFT);
        let entry_offset = self.b.ins().band_imm(shifted, ((WINDOWS as i64) - 1) << ENTRY_SHIFT);
        let entry = self.b.ins().iadd(self.state, entry_offset);
        let at = |field: i32| offsets::region(0).wrapping_add(field);
        let flags = self.table_flags();
        let lo_addr = self.b.ins().load(types::I64, flags, entry, at(offsets::LO_ADDR));
        let bounds = match access {
            Access::Load => offsets::LOAD_BOUND,
            Access::Store => offsets::STORE_BOUND,
        };
        let bound_at = at(bounds).wrapping_add(8 * size_index(size) as i32);
        let bound = self.b.ins().load(types::I64, flags, entry, bound_at);
        let base_lo = self.b.ins().load(types::I64, flags, entry, at(offsets::BASE_LO));
        let rel = self.b.ins().isub(addr, lo_addr);
        let host = self.b.ins().iadd(base_lo, rel);
        // Outside the entry: the slow path (`check_load`/`check_store`) finds the map
        // values the environment owns, applies the context's writable fields, or names
        // the trap.
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, rel, bound);
        let access_block = self.b.create_block();
        let checked = self.b.append_block_param(access_block, types::I64);
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        self.b.ins().brif(inside, access_block, &[arg(host)], slow, &[]);
        self.b.seal_block(slow);

        self.b.switch_to_block(slow);
        // The map value the run reached last (`RunState::value`), checked as a table entry;
        // its fields change at helper calls, so these are loads Cranelift keeps in order.
        let value_at = |field: i32| offsets::VALUE.wrapping_add(field);
        let flags = state_flags();
        let state = self.state;
        let v_lo = self.b.ins().load(types::I64, flags, state, value_at(offsets::LO_ADDR));
        let v_bound_at = value_at(bounds).wrapping_add(8 * size_index(size) as i32);
        let v_bound = self.b.ins().load(types::I64, flags, state, v_bound_at);
        let v_rel = self.b.ins().isub(addr, v_lo);
        let v_inside = self.b.ins().icmp(IntCC::UnsignedLessThan, v_rel, v_bound);
        let v_hit = self.b.create_block();
        let call_block = self.b.create_block();
        self.b.set_cold_block(v_hit);
        self.b.set_cold_block(call_block);
        self.b.ins().brif(v_inside, v_hit, &[], call_block, &[]);
        self.b.seal_block(v_hit);
        self.b.seal_block(call_block);
        self.b.switch_to_block(v_hit);
        let v_base = self.b.ins().load(types::I64, flags, state, value_at(offsets::BASE_LO));
        let v_host = self.b.ins().iadd(v_base, v_rel);
        self.b.ins().jump(access_block, &[arg(v_host)]);

        self.b.switch_to_block(call_block);
        let callee = self.load_state(match access {
            Access::Load => offsets::LOAD_FN,
            Access::Store => offsets::STORE_FN,
        });
        let size_value = self.iconst(i64::from(size));
        let call =
            self.b.ins().call_indirect(self.store_sig, callee, &[self.state, addr, size_value]);
        let granted = self.b.inst_results(call).first().copied().unwrap_or(addr);
        let refused = self.b.create_block();
        self.b.set_cold_block(refused);
        self.b.ins().brif(granted, access_block, &[arg(granted)], refused, &[]);
        self.b.seal_block(refused);
        self.b.seal_block(access_block);
        self.b.switch_to_block(refused);
        let code = self.load_status(offsets::STORE_CODE);
        self.leave_value(code, addr, u32::from(size));

        self.b.switch_to_block(access_block);
        (checked, 0)
    }

    pub(super) fn load(&mut self, insn: &Insn) -> Result<(), CompileError> {
        let (size, signed) = match insn.op {
            Op::LdxB => (1, false),
            Op::LdxH => (2, false),
            Op::LdxW => (4, false),
            Op::LdxBSx => (1, true),
            Op::LdxHSx => (2, true),
            Op::LdxWSx => (4, true),
            _ => (8, false),
        };
        let (host, off) = self.host_address(insn.src, insn.off, size, Access::Load);
        let flags = guest_flags();
        let ins = self.b.ins();
        let value = match (size, signed) {
            (1, false) => ins.uload8(types::I64, flags, host, off),
            (2, false) => ins.uload16(types::I64, flags, host, off),
            (4, false) => ins.uload32(flags, host, off),
            (1, true) => ins.sload8(types::I64, flags, host, off),
            (2, true) => ins.sload16(types::I64, flags, host, off),
            (4, true) => ins.sload32(flags, host, off),
            _ => ins.load(types::I64, flags, host, off),
        };
        self.set(insn.dst, value)
    }

    pub(super) fn store(&mut self, insn: &Insn) -> Result<(), CompileError> {
        if let Some((rmw, fetch, wide)) = atomic(insn.op) {
            return self.atomic(insn, rmw, fetch, wide);
        }
        let size = match insn.op {
            Op::StB | Op::StxB => 1,
            Op::StH | Op::StxH => 2,
            Op::StW | Op::StxW => 4,
            _ => 8,
        };
        let value = match insn.op {
            Op::StB | Op::StH | Op::StW | Op::StDw => self.imm(i64::from(insn.imm as i32)),
            _ => self.get(insn.src),
        };
        let (host, off) = self.host_address(insn.dst, insn.off, size, Access::Store);
        let flags = guest_flags();
        let ins = self.b.ins();
        match size {
            1 => ins.istore8(flags, value, host, off),
            2 => ins.istore16(flags, value, host, off),
            4 => ins.istore32(flags, value, host, off),
            _ => ins.store(flags, value, host, off),
        };
        Ok(())
    }

    /// Atomics as the kernel's JIT emits them: one locked host instruction (or the
    /// target's compare-exchange loop) on the translated address, so that map values shared
    /// with other workers' runs are updated atomically. The old value goes to `src` (fetch
    /// forms, xchg) or r0 (cmpxchg).
    fn atomic(
        &mut self,
        insn: &Insn,
        rmw: Rmw,
        fetch: bool,
        wide: bool,
    ) -> Result<(), CompileError> {
        let (size, ty): (u8, Type) = if wide { (8, types::I64) } else { (4, types::I32) };
        let (host, off) = self.host_address(insn.dst, insn.off, size, Access::Store);
        let at = self.b.ins().iadd_imm(host, i64::from(off));
        let src = self.get(insn.src);
        let value = self.narrow(src, ty);
        let op = match rmw {
            Rmw::Add => Some(AtomicRmwOp::Add),
            Rmw::Or => Some(AtomicRmwOp::Or),
            Rmw::And => Some(AtomicRmwOp::And),
            Rmw::Xor => Some(AtomicRmwOp::Xor),
            Rmw::Xchg => Some(AtomicRmwOp::Xchg),
            Rmw::CmpXchg => None,
        };
        let old = match op {
            Some(op) => self.b.ins().atomic_rmw(ty, guest_flags(), op, at, value),
            None => {
                let r0 = self.get(0);
                let expected = self.narrow(r0, ty);
                self.b.ins().atomic_cas(guest_flags(), at, expected, value)
            }
        };
        let old = self.widen(old, ty);
        if rmw == Rmw::CmpXchg {
            self.set(0, old)
        } else if fetch {
            self.set(insn.src, old)
        } else {
            Ok(())
        }
    }

    /// `ldabs`/`ldind`: big-endian from the packet (or `mem` without one) at a 32-bit signed
    /// offset; outside it the program ends with r0 = 0, as in the kernel.
    pub(super) fn legacy_load(&mut self, insn: &Insn) -> Result<(), CompileError> {
        let size: u8 = match insn.op {
            Op::LdAbsB | Op::LdIndB => 1,
            Op::LdAbsH | Op::LdIndH => 2,
            _ => 4,
        };
        let imm = self.imm(i64::from(insn.imm as i32));
        let offset = if matches!(insn.op, Op::LdIndB | Op::LdIndH | Op::LdIndW) {
            // The kernel adds in 64 bits and passes the sum as a C `int`.
            let src = self.get(insn.src);
            let sum = self.b.ins().iadd(src, imm);
            let low = self.b.ins().ireduce(types::I32, sum);
            self.b.ins().sextend(types::I64, low)
        } else {
            imm
        };
        let len = self.load_state(offsets::LEGACY_LEN);
        let end = self.b.ins().iadd_imm(offset, i64::from(size));
        let negative = self.b.ins().icmp_imm(IntCC::SignedLessThan, offset, 0);
        let past_end = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, len);
        let outside = self.b.ins().bor(negative, past_end);
        let zero = self.iconst(0);
        self.trap_if(outside, 0, zero, 0);
        let base = self.load_state(offsets::LEGACY_HOST);
        let host = self.b.ins().iadd(base, offset);
        let flags = guest_flags();
        let value = match size {
            1 => self.b.ins().uload8(types::I64, flags, host, 0),
            2 => {
                let raw = self.b.ins().load(types::I16, flags, host, 0);
                let swapped = self.b.ins().bswap(raw);
                self.b.ins().uextend(types::I64, swapped)
            }
            _ => {
                let raw = self.b.ins().load(types::I32, flags, host, 0);
                let swapped = self.b.ins().bswap(raw);
                self.b.ins().uextend(types::I64, swapped)
            }
        };
        self.set(0, value)
    }

    /// Points the stack's region entry at the frame whose top is `r10`: that frame and its
    /// callers' are reachable, the frames below are not.
    pub(super) fn set_stack_floor(&mut self, r10: Value) {
        let stack_size = i64::try_from(self.shape.stack_size).unwrap_or(i64::MAX);
        let lo_addr = self.b.ins().iadd_imm(r10, stack_size.wrapping_neg());
        let base_lo = self.b.ins().iadd(self.stack_bias, lo_addr);
        let top = self.iconst(STACK_BASE.wrapping_add(self.shape.bytes()) as i64);
        let span = self.b.ins().isub(top, lo_addr);
        let entry = offsets::region(STACK);
        self.b.ins().store(state_flags(), lo_addr, self.state, entry + offsets::LO_ADDR);
        self.b.ins().store(state_flags(), base_lo, self.state, entry + offsets::BASE_LO);
        for (index, size) in [1i64, 2, 4, 8].into_iter().enumerate() {
            let mut bound = self.b.ins().iadd_imm(span, 1 - size);
            if stack_size < size {
                // A frame smaller than the access: the span may be too short for it.
                let fits = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, span, size);
                let zero = self.iconst(0);
                bound = self.b.ins().select(fits, bound, zero);
            }
            let word = 8 * index as i32;
            for field in [offsets::LOAD_BOUND, offsets::STORE_BOUND] {
                self.b.ins().store(state_flags(), bound, self.state, entry + field + word);
            }
        }
    }
}
