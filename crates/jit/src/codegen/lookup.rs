//! `bpf_map_lookup_elem` with its map and key known when compiling: generated code reads
//! the key and calls the map's probe itself (the kernel's `map_gen_lookup`), with no
//! trampoline in between.
//!
//! The pattern is clang's: in one basic block, `r1 = lddw map` and `r2 = r10; r2 += k`,
//! then `call 1`, nothing between them writing r1 or r2. The key (4 or 8 bytes, as the
//! batch's table says at run time) then lies at `r10 + k` inside the running frame, in
//! bounds by construction (`memory`'s own-frame rule). Generated code finds the map's
//! [`crate::state::DirectSlot`] (present only while the run may use the batch's direct
//! lookups), loads the key as the element stores it (zero-extended, native order), calls
//! the slot's `find` and, for a found element, fills the value entry as
//! `RunState::lookup_direct` does (only the bound words the program's checked accesses
//! read: `Translator::value_words`). Anything else (no slot, another key size, a key too
//! close to the frame's top for its size) takes the trampoline, which has the call's whole
//! semantics: the same answer either way (`DirectLookup`'s contract).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AliasRegion, InstBuilder, MemFlags, SigRef, Value};
use weir_isa::ebpf::{Insn, Op, Operands};

use super::memory::{is_atomic, value_word, Access};
use super::{arg, state_flags, Translator};
use crate::guest::map_index;
use crate::state::offsets::{self, slot};
use crate::state::{size_index, DirectSlot};
use crate::CompileError;

/// A lookup whose map and key address the block itself set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Known {
    /// The map's index (`lddw map`'s handle).
    map: usize,
    /// The key's offset from r10.
    key_off: i64,
}

#[derive(Clone, Copy)]
enum Reg {
    Unknown,
    Handle(u64),
    FrameOffset(i64),
}

/// The map and key offset of the `call 1` at `pc`, when the slots `start..pc` (its basic
/// block before it) load r1 with a map handle and make r2 `r10 + k`, and nothing after
/// either writes it.
pub(super) fn known(insns: &[Insn], start: usize, pc: usize) -> Option<Known> {
    let (mut r1, mut r2) = (Reg::Unknown, Reg::Unknown);
    for insn in insns.get(start..pc)? {
        let op = insn.op;
        if op == Op::LddwHigh {
            continue;
        }
        // Plain stores write no register (atomics and legacy loads do: below).
        let legacy = matches!(op.spec().map(|s| s.operands), Some(Operands::Abs | Operands::Ind));
        if op.mem_size().is_some() && !op.writes_dst() && !is_atomic(op) && !legacy {
            continue;
        }
        if !op.writes_dst() {
            // Calls, atomics (which may write src or r0), legacy loads: forget both.
            (r1, r2) = (Reg::Unknown, Reg::Unknown);
            continue;
        }
        match insn.dst {
            1 => r1 = if op == Op::Lddw { Reg::Handle(insn.imm as u64) } else { Reg::Unknown },
            2 => {
                r2 = match (op, r2) {
                    (Op::Mov64Reg, _) if insn.src == 10 => Reg::FrameOffset(0),
                    (Op::Add64Imm, Reg::FrameOffset(k)) => {
                        Reg::FrameOffset(k.wrapping_add(i64::from(insn.imm as i32)))
                    }
                    _ => Reg::Unknown,
                }
            }
            _ => {}
        }
    }
    match (r1, r2) {
        (Reg::Handle(handle), Reg::FrameOffset(key_off)) => {
            Some(Known { map: map_index(handle)?, key_off })
        }
        _ => None,
    }
}

/// The key's bytes on the stack: ordered with the program's own stack stores (guest memory
/// flags) and in bounds (checked when compiling), read in the host's order as an element
/// stores a key.
fn key_flags() -> MemFlags {
    MemFlags::new().with_notrap().with_alias_region(Some(AliasRegion::Heap))
}

/// A slot's fields: unchanged during a run, but only valid once the slot is known to
/// exist, so not hoisted above that test.
fn slot_flags() -> MemFlags {
    state_flags().with_readonly()
}

impl Translator<'_, '_> {
    /// Whether `size` bytes at `r10 + off` lie inside the running frame.
    fn key_in_frame(&self, off: i64, size: i64) -> bool {
        let stack_size = i64::try_from(self.shape.stack_size).unwrap_or(i64::MAX);
        off >= stack_size.wrapping_neg() && off.saturating_add(size) <= 0
    }

    /// `call 1` for a [`Known`] lookup (see the module docs); `id` is the helper's id for
    /// the trampoline's path.
    pub(super) fn direct_lookup(
        &mut self,
        id: Value,
        find_sig: SigRef,
        known: Known,
    ) -> Result<(), CompileError> {
        let fits4 = self.key_in_frame(known.key_off, 4);
        let fits8 = self.key_in_frame(known.key_off, 8);
        let slot_off = known
            .map
            .checked_mul(std::mem::size_of::<DirectSlot>())
            .and_then(|o| i64::try_from(o).ok());
        let (true, Some(slot_off)) = (fits4, slot_off) else {
            return self.call_trampoline(id, offsets::LOOKUP_FN);
        };
        let done = self.b.create_block();
        let r0 = self.b.append_block_param(done, types::I64);
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);

        // The map's slot, if this run has one for it.
        let count = self.load_status(offsets::SLOT_COUNT);
        let have = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThan, count, known.map as i64);
        let has_slot = self.b.create_block();
        self.b.ins().brif(have, has_slot, &[], slow, &[]);
        self.b.seal_block(has_slot);
        self.b.switch_to_block(has_slot);
        let slots = self.load_status(offsets::SLOTS);
        let slot = self.b.ins().iadd_imm(slots, slot_off);
        let key_size = self.b.ins().load(types::I64, slot_flags(), slot, slot::KEY_SIZE);
        let r10 = self.get(10);
        let key_host = self.b.ins().iadd(r10, self.stack_bias);
        let key_off = i32::try_from(known.key_off).unwrap_or(0);

        // The key as the element stores it.
        let probe = self.b.create_block();
        let w0 = self.b.append_block_param(probe, types::I64);
        if fits8 {
            let try4 = self.b.create_block();
            let key8 = self.b.create_block();
            let is8 = self.b.ins().icmp_imm(IntCC::Equal, key_size, 8);
            self.b.ins().brif(is8, key8, &[], try4, &[]);
            self.b.seal_block(key8);
            self.b.switch_to_block(key8);
            let word = self.b.ins().load(types::I64, key_flags(), key_host, key_off);
            self.b.ins().jump(probe, &[arg(word)]);
            self.b.seal_block(try4);
            self.b.switch_to_block(try4);
        }
        let is4 = self.b.ins().icmp_imm(IntCC::Equal, key_size, 4);
        let key4 = self.b.create_block();
        self.b.ins().brif(is4, key4, &[], slow, &[]);
        self.b.seal_block(key4);
        self.b.switch_to_block(key4);
        let word = self.b.ins().uload32(key_flags(), key_host, key_off);
        self.b.ins().jump(probe, &[arg(word)]);
        self.b.seal_block(probe);

        // The probe: the element and its value's host address (0: no element).
        self.b.switch_to_block(probe);
        let find = self.b.ins().load(types::I64, slot_flags(), slot, slot::FIND);
        let map = self.b.ins().load(types::I64, slot_flags(), slot, slot::MAP);
        let cpu = self.b.ins().load(types::I64, slot_flags(), slot, slot::CPU);
        let zero = self.iconst(0);
        let call = self.b.ins().call_indirect(find_sig, find, &[map, cpu, w0, zero]);
        let (elem, host) = match *self.b.inst_results(call) {
            [elem, host] => (elem, host),
            _ => return Err(self.error(crate::CompileErrorKind::Backend("find's results".into()))),
        };
        let value_at = |field: i32| offsets::VALUE.wrapping_add(field);
        let found = self.b.create_block();
        let missing = self.b.create_block();
        self.b.ins().brif(host, found, &[], missing, &[]);
        self.b.seal_block(found);
        self.b.seal_block(missing);

        // The bound words this program's code reads (`Translator::value_words`): the only
        // ones written below (issue 11: all eight were 16 instructions a found value).
        let words: Vec<(i32, i32)> = [Access::Load, Access::Store]
            .into_iter()
            .flat_map(|access| [1u8, 2, 4, 8].map(|size| (access, size)))
            .filter(|&(access, size)| self.value_words & value_word(access, size) != 0)
            .map(|(access, size)| {
                let k = 8 * size_index(size) as i32;
                match access {
                    Access::Load => (slot::LOAD_BOUND + k, offsets::LOAD_BOUND + k),
                    Access::Store => (slot::STORE_BOUND + k, offsets::STORE_BOUND + k),
                }
            })
            .collect();

        // No element: r0 = 0 and the value entry admits nothing (`RegionEntry::clear`).
        self.b.switch_to_block(missing);
        for &(_, to) in &words {
            self.b.ins().store(state_flags(), zero, self.state, value_at(to));
        }
        self.b.ins().jump(done, &[arg(zero)]);

        // Found: the value's guest address, and its entry (`RegionEntry::set_value`; `host`
        // and `len` stay 0 and `read_only` 0 in the value entry, which only these write).
        self.b.switch_to_block(found);
        let base = self.b.ins().load(types::I64, slot_flags(), slot, slot::BASE);
        let shift = self.b.ins().load(types::I64, slot_flags(), slot, slot::SHIFT);
        let offset = self.b.ins().ishl(elem, shift);
        let addr = self.b.ins().iadd(base, offset);
        self.b.ins().store(state_flags(), addr, self.state, value_at(offsets::LO_ADDR));
        self.b.ins().store(state_flags(), host, self.state, value_at(offsets::BASE_LO));
        for &(from, to) in &words {
            let bound = self.b.ins().load(types::I64, slot_flags(), slot, from);
            self.b.ins().store(state_flags(), bound, self.state, value_at(to));
        }
        self.b.ins().jump(done, &[arg(addr)]);

        // Anything else: the trampoline, as without a known map.
        self.b.seal_block(slow);
        self.b.switch_to_block(slow);
        self.call_trampoline(id, offsets::LOOKUP_FN)?;
        let result = self.get(0);
        self.b.ins().jump(done, &[arg(result)]);
        self.b.seal_block(done);
        self.b.switch_to_block(done);
        self.set(0, r0)
    }
}
