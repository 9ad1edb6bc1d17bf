//! eBPF -> Cranelift IR: the whole program becomes one Cranelift function.
//!
//! One function, not one per eBPF function, because the interpreter's calls are not host
//! calls: `call %reg` may enter any instruction, frames are bounded by the configured depth
//! (not the host stack), and a trap deep inside a call must leave the whole run at once.
//! So a local call saves r6-r10 and a return-site number in the cache's frame area, lowers
//! r10 by one frame and jumps; `exit` in a nested frame restores them and jumps to the
//! return site through one shared dispatch block. Registers stay Cranelift variables all
//! the while, so straight-line code keeps them in host registers.
//!
//! **The budget.** `remaining` is a variable. Each basic block of `n` instructions starts
//! with `if remaining < n` and otherwise subtracts `n` once. When the check fails the run
//! will stop inside this block, at instruction number `remaining` unless something earlier
//! ends it: control goes to a cold copy of the block that runs it instruction by instruction
//! up to its last effect (memory access, helper call, legacy load), checking before each
//! effect that the budget still covers it, and then leaves with a budget trap. Instructions
//! that only change registers need no check: a trap after them makes the change invisible.
//! Every exit from the function passes the number of instructions of its block that were
//! charged but did not run, so `remaining`, and thus the executed count, is exact.
//!
//! **Exits.** A plain `exit` from frame 0 returns `r0` and the budget left (adjusted as
//! above) in the two return registers (`code_memory::Exit`). Every other way out (trap,
//! helper stop, failed legacy load, budget) stores its code, pc, the budget left and for
//! traps the address and size in the run state, and returns its value and `Exit::OTHER`;
//! `crate::run` turns that into the result.
//!
//! **Blinding.** With a key, every immediate `c` is emitted as `(c ^ key) ^ k`, where `k`
//! is the key *loaded from the run state* at function entry. Cranelift's constant folding
//! would undo `(c ^ key) ^ key` with both operands constant and put `c` back in the code;
//! a loaded value is opaque to it, so only `c ^ key` reaches the machine code.

mod alu;
mod copy;
mod counted;
pub(crate) mod facts;
mod lookup;
mod memory;
mod provenance;
mod reduce;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AliasRegion, Block, BlockArg, Function, InstBuilder, MemFlags, SigRef, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch, Variable};
use weir_isa::ebpf::{Insn, Op, REG_COUNT};
use weir_program::abi::Bindings;
use weir_program::TrapCode;

use crate::cfg::{kind, target_of, Cfg, Kind};
use crate::code_memory::{Abi, Exit};
use crate::guest::{func_addr, REGION_WINDOW, STACK, WINDOWS, WINDOW_SHIFT};
use crate::state::{offsets, ENTRY_SHIFT, EXIT_BUDGET, EXIT_HELPER, FRAME_WORDS, SAVED_WORDS};
use crate::{CompileError, CompileErrorKind};
pub(crate) use weir_program::exec::StackShape;

/// An unrolled counted loop's body that runs wide: a copy (`copy`) or a sum (`reduce`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Idiom {
    Copy(copy::Copy),
    Sum(reduce::Sum),
}

/// Where the instruction being translated stands in its block. `Hot`: the block's whole
/// charge was already taken from the budget; `Cold`: nothing was taken (see module docs).
#[derive(Clone, Copy, Debug)]
enum Mode {
    Hot { n: usize, k: usize },
    Cold { k: usize },
}

impl Mode {
    /// What to add to `remaining` when the run ends at this instruction, so that it is
    /// charged for exactly the instructions that ran, this one included.
    fn adjustment(self) -> i64 {
        match self {
            Mode::Hot { n, k } => n.saturating_sub(k).saturating_sub(1) as i64,
            Mode::Cold { k } => (k as i64).wrapping_add(1).wrapping_neg(),
        }
    }
}

/// Distinct block lengths whose budget charge is an opaque value (see
/// `Translator::basic_block`); more would only tie up registers.
const MAX_CHARGES: usize = 8;

/// Basic blocks sharing one exit block (see `Translator::close_exit_group`).
const EXIT_GROUP: usize = 32;

/// The exit code, access size and pc of a way out, in one word for one store: code in bits
/// 0-6, size in bits 7-10, pc from bit 11 (programs have at most 2^20 slots, so the word
/// is a positive 32-bit immediate).
pub(crate) fn exit_word(code: u64, size: u32, pc: usize) -> u64 {
    (code & 0x7f) | (u64::from(size & 0xf) << 7) | ((pc as u64) << 11)
}

/// Variables after the eleven registers.
const REMAINING: u32 = 11;
const DEPTH: u32 = 12;
const MAX_DEPTH: u32 = 13;
/// The counted register on entry to the counted loop being run (`counted`).
const LOOP_BASE: u32 = 14;
/// The lane-wise partial sums of a wide sum loop's groups (`reduce`): an `I64X2` carried
/// from group to group, added into the accumulator once the groups are done.
const SUM_LANES: u32 = 15;

/// Run-state fields: always in bounds and aligned, never aliased by guest memory.
fn state_flags() -> MemFlags {
    MemFlags::trusted().with_alias_region(Some(AliasRegion::Vmctx))
}

/// Run-state fields no one writes during a run: pure loads, which Cranelift may merge and
/// hoist out of loops like arithmetic. (Loads it must treat as memory operations go through
/// its redundant-load analysis, whose dominance walks are quadratic in the length of a
/// straight-line program.)
fn constant_flags() -> MemFlags {
    state_flags().with_readonly().with_can_move()
}

fn var(index: u32) -> Variable {
    Variable::from_u32(index)
}

fn arg(value: Value) -> BlockArg {
    BlockArg::Value(value)
}

/// Translates `insns` (validated) into `func`, dropping the checks `plan` drops.
#[allow(clippy::too_many_arguments)] // the translation's inputs, each used as is
pub(crate) fn translate(
    func: &mut Function,
    abi: &Abi,
    insns: &[Insn],
    bindings: &Bindings,
    cfg: &Cfg,
    shape: StackShape,
    key: Option<u64>,
    budget: u64,
    plan: &facts::Plan,
) -> Result<(), CompileError> {
    let mut context = FunctionBuilderContext::new();
    let builder = FunctionBuilder::new(func, &mut context);
    Translator::new(builder, abi, insns, bindings, cfg, shape, key, budget, plan).translate()
}

struct Translator<'a, 'f> {
    b: FunctionBuilder<'f>,
    insns: &'a [Insn],
    bindings: &'a Bindings,
    cfg: &'a Cfg,
    shape: StackShape,
    key: Option<u64>,
    /// The checks the verifier's facts drop (`facts`).
    plan: &'a facts::Plan,
    /// Per guest window, host address minus guest address, for the windows the plan
    /// accesses unchecked: per-run constants, loaded in the entry block.
    biases: [Option<Value>; WINDOWS],
    /// With a budget-free plan: `n * one` for the first few block lengths `n`, defined in
    /// the entry block (see `Self::basic_block`).
    charges: Vec<(usize, Value)>,
    /// The run state pointer, the loaded blinding key and the stack bias: defined in the
    /// entry block, which dominates every other, so usable anywhere.
    state: Value,
    key_value: Option<Value>,
    stack_bias: Value,
    /// The region-table entry of the region `r1` points at on entry, and `r1` on entry
    /// (see `memory`).
    input: (Value, Value),
    /// Per register, the two values it is the sum of when the current basic block made
    /// it with `add dst, src` and nothing wrote it since (then `pending_sum`, between the
    /// operands and the `set`). A direct access through it adds the region's bias to the
    /// first, so that `ptr + bias` is loop-invariant and hoisted when `ptr` is, and the
    /// host's addressing mode takes the index: `[ptr_bias + index]`, not `lea` then load.
    sums: [Option<(Value, Value)>; REG_COUNT as usize],
    pending_sum: Option<(Value, Value)>,
    /// The region each register's pointers most likely point into.
    guesses: [provenance::Guess; REG_COUNT as usize],
    /// Which of the value entry's bound words (`memory::value_word`) this program's code
    /// may read: those of its checked accesses, worked out before translating. A direct
    /// lookup fills only these (`lookup`); the others are never read, so they may hold
    /// anything. `value_reads` records what was read, checked against it at the end.
    value_words: u8,
    value_reads: u8,
    /// One Cranelift block per basic block, same index. For a counted loop, the block
    /// every jump into the loop goes to: it keeps the counted register, then enters.
    blocks: Vec<Block>,
    /// Per basic block, whether it is a counted loop (`counted`).
    counted: Vec<Option<counted::CountedLoop>>,
    /// Per basic block that is a counted loop, its iterations when every run makes the
    /// same number (`counted::trips`).
    trips: Vec<Option<u64>>,
    /// Per basic block, the idiom its unrolled groups run wide (`copy`, `reduce`).
    idioms: Vec<Option<Idiom>>,
    /// While translating a counted loop: the block its back edge goes to (the loop's own
    /// head), the block it is left through (which charges its iterations), and the
    /// block every other jump into it goes to.
    counting: Option<(Block, Block, Block)>,
    /// Return-site dispatch (param: site number), when the program has calls.
    dispatch: Block,
    /// Continuation block of each return site.
    return_sites: Vec<Block>,
    /// The exit block of the current group of basic blocks, once one of them needs it, and
    /// how many jumps to it were emitted.
    leave: Option<(Block, usize)>,
    /// Full exit blocks of the current group, not yet emitted (see `Self::leave_jump`).
    full_leaves: Vec<Block>,
    helper_sig: SigRef,
    store_sig: SigRef,
    /// A map's `DirectLookup::find`, where the host returns its two words in registers
    /// (`direct_lookup`).
    find_sig: Option<SigRef>,
    /// The first slot of the basic block being translated.
    block_start: usize,
    /// The instruction being translated, and where it stands in its block.
    pc: usize,
    mode: Mode,
}

impl<'a, 'f> Translator<'a, 'f> {
    #[allow(clippy::too_many_arguments)] // `translate`'s inputs
    fn new(
        mut b: FunctionBuilder<'f>,
        abi: &Abi,
        insns: &'a [Insn],
        bindings: &'a Bindings,
        cfg: &'a Cfg,
        shape: StackShape,
        key: Option<u64>,
        budget: u64,
        plan: &'a facts::Plan,
    ) -> Self {
        let helper_sig = b.import_signature(abi.helper());
        let store_sig = b.import_signature(abi.store_check());
        let find_sig = abi.direct_find().map(|sig| b.import_signature(sig));
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let state = b.block_params(entry)[0];
        for index in 0..=LOOP_BASE {
            b.declare_var(var(index), types::I64);
        }
        b.declare_var(var(SUM_LANES), types::I64X2);
        let load = |b: &mut FunctionBuilder<'f>, offset: i32| {
            b.ins().load(types::I64, constant_flags(), state, offset)
        };
        let key_value = key.map(|_| load(&mut b, offsets::KEY));
        let stack_bias = load(&mut b, offsets::STACK_BIAS);
        let zero = b.ins().iconst(types::I64, 0);
        for r in 0..u32::from(REG_COUNT) {
            b.def_var(var(r), zero);
        }
        let r1 = b.block_params(entry)[1];
        b.def_var(var(1), r1);
        // Entry (r1 >> 28) mod WINDOWS of the table, as `memory` finds any address's entry.
        let shifted = b.ins().ushr_imm(r1, i64::from(WINDOW_SHIFT) - ENTRY_SHIFT);
        let entry_offset = b.ins().band_imm(shifted, ((WINDOWS as i64) - 1) << ENTRY_SHIFT);
        let input_entry = b.ins().iadd(state, entry_offset);
        let r2 = b.block_params(entry)[2];
        b.def_var(var(2), r2);
        let r10 = b.ins().iconst(types::I64, shape.frame_top(0) as i64);
        b.def_var(var(10), r10);
        // A constant of the compile (`JitProgram::budget`): no run writes it, no run reads it.
        let budget = b.ins().iconst(types::I64, budget as i64);
        b.def_var(var(REMAINING), budget);
        b.def_var(var(DEPTH), zero);
        b.def_var(var(MAX_DEPTH), zero);
        let mut charges: Vec<(usize, Value)> = Vec::new();
        // Code in which no block runs twice (no back jump, no call) charges constants,
        // which Cranelift folds along each path into one per path (issue 11: xdp_counter's
        // `n * one` charges were 20 instructions a run); `n * one` keeps loops' counts
        // from being folded across their exits (see `Self::basic_block`).
        if plan.budget_free && (cfg.has_back_jumps || cfg.has_calls) {
            let one = load(&mut b, offsets::ONE);
            for block in &cfg.blocks {
                let n = block.slots.len();
                if charges.len() < MAX_CHARGES && charges.iter().all(|&(m, _)| m != n) {
                    charges.push((n, b.ins().imul_imm(one, n as i64)));
                }
            }
        }
        let mut biases = [None; WINDOWS];
        for pc in 0..insns.len() {
            let Some(window) = plan.direct(pc) else { continue };
            if let Some(slot @ None) = biases.get_mut(window) {
                *slot = Some(if window == STACK {
                    stack_bias
                } else {
                    // The region's host base minus its guest base (no floor outside the
                    // stack: `lo_addr` is the window's first address).
                    let base_lo = load(&mut b, offsets::region(window) + offsets::BASE_LO);
                    let guest = (window as u64).wrapping_mul(REGION_WINDOW) as i64;
                    b.ins().iadd_imm(base_lo, guest.wrapping_neg())
                });
            }
        }

        let blocks: Vec<Block> = cfg.blocks.iter().map(|_| b.create_block()).collect();
        // Blinding hides immediates; a loop's step would show in its exit's division.
        let counted = cfg
            .blocks
            .iter()
            .map(|block| {
                let eligible = key.is_none() && !cfg.has_calls;
                eligible.then(|| counted::find(insns, block, plan, shape)).flatten()
            })
            .collect::<Vec<_>>();
        let idioms = cfg
            .blocks
            .iter()
            .zip(&counted)
            .map(|(block, found)| {
                let found: counted::CountedLoop = (*found)?;
                found.unroll.filter(|_| plan.wide_copy)?;
                let (_, body) = block.slots.split_last()?;
                copy::find(insns, body, found.reg, found.step, plan).map(Idiom::Copy).or_else(
                    || reduce::find(insns, body, found.reg, found.step, plan).map(Idiom::Sum),
                )
            })
            .collect::<Vec<_>>();
        let counted = counted
            .into_iter()
            .zip(&idioms)
            .map(|(found, idiom)| match (found, idiom) {
                (Some(c), Some(Idiom::Copy(_))) => Some(counted::CountedLoop {
                    unroll: c.unroll.map(|u| copy::widened(u, c.step, copy::COPY_FACTOR)),
                    ..c
                }),
                (Some(c), Some(Idiom::Sum(_))) => Some(counted::CountedLoop {
                    unroll: c.unroll.map(|u| copy::widened(u, c.step, 8)),
                    ..c
                }),
                (found, _) => found,
            })
            .collect::<Vec<_>>();
        let trips = counted
            .iter()
            .enumerate()
            .map(|(index, found)| counted::trips(insns, cfg, index, (*found)?))
            .collect();
        if let Some(&first) = blocks.first() {
            b.ins().jump(first, &[]);
        }
        let dispatch = b.create_block();
        let mut translator = Translator {
            b,
            insns,
            bindings,
            cfg,
            shape,
            key,
            plan,
            biases,
            charges,
            state,
            key_value,
            stack_bias,
            input: (input_entry, r1),
            sums: [None; REG_COUNT as usize],
            pending_sum: None,
            guesses: provenance::guess(insns, bindings),
            value_words: 0,
            value_reads: 0,
            blocks,
            counted,
            trips,
            idioms,
            counting: None,
            dispatch,
            return_sites: Vec::new(),
            leave: None,
            full_leaves: Vec::new(),
            helper_sig,
            store_sig,
            find_sig,
            block_start: 0,
            pc: 0,
            mode: Mode::Hot { n: 1, k: 0 },
        };
        translator.value_words = translator.checked_value_words();
        translator
    }

    /// The value entry's bound words the checked accesses of the program read (see
    /// `value_words`).
    fn checked_value_words(&self) -> u8 {
        let mut words = 0;
        for (pc, insn) in self.insns.iter().enumerate() {
            if let Some((base, off, size, access)) = memory::checked_access(insn) {
                if self.is_checked(pc, base, off, size) {
                    words |= memory::value_word(access, size);
                }
            }
        }
        words
    }

    fn translate(mut self) -> Result<(), CompileError> {
        let cfg = self.cfg;
        for index in 0..cfg.blocks.len() {
            self.basic_block(index)?;
            if index % EXIT_GROUP == EXIT_GROUP - 1 {
                self.close_exit_group();
            }
        }
        self.emit_dispatch();
        self.close_exit_group();
        // A direct lookup filled only `value_words`: code reading any other word would
        // read another value's bound.
        if self.value_reads & !self.value_words != 0 {
            let (read, filled) = (self.value_reads, self.value_words);
            let what = format!("value entry words read {read:#010b}, filled {filled:#010b}");
            return Err(self.error(CompileErrorKind::Backend(what)));
        }
        self.b.seal_all_blocks();
        self.b.finalize();
        Ok(())
    }

    fn error(&self, kind: CompileErrorKind) -> CompileError {
        CompileError::new(self.pc, kind)
    }

    // ---- registers and constants ----

    fn get(&mut self, r: u8) -> Value {
        self.b.use_var(var(u32::from(r)))
    }

    fn set(&mut self, r: u8, value: Value) -> Result<(), CompileError> {
        if r >= REG_COUNT - 1 {
            return Err(self.error(CompileErrorKind::WritesFramePointer));
        }
        self.b.def_var(var(u32::from(r)), value);
        if let Some(slot) = self.sums.get_mut(usize::from(r)) {
            *slot = None;
        }
        Ok(())
    }

    fn iconst(&mut self, value: i64) -> Value {
        self.b.ins().iconst(types::I64, value)
    }

    /// A 64-bit immediate of the program, blinded when a key is set (see module docs).
    fn imm(&mut self, value: i64) -> Value {
        match (self.key, self.key_value) {
            (Some(key), Some(loaded)) => {
                let masked = self.iconst(value ^ key as i64);
                self.b.ins().bxor(masked, loaded)
            }
            _ => self.iconst(value),
        }
    }

    /// The immediate as a compile-time constant, when blinding does not hide it.
    fn known(&self, value: i64) -> Option<i64> {
        match self.key {
            Some(_) => None,
            None => Some(value),
        }
    }

    /// A run-state field that stays the same for the whole run.
    fn load_state(&mut self, offset: i32) -> Value {
        self.b.ins().load(types::I64, constant_flags(), self.state, offset)
    }

    /// A run-state field the trampolines write.
    fn load_status(&mut self, offset: i32) -> Value {
        self.b.ins().load(types::I64, state_flags(), self.state, offset)
    }

    /// Flags for region-table loads: the table only changes when calls move the stack
    /// floor, so without calls it is constant.
    fn table_flags(&self) -> MemFlags {
        if self.cfg.has_calls {
            state_flags()
        } else {
            constant_flags()
        }
    }

    // ---- blocks and the budget ----

    fn block_for(&self, slot: usize) -> Result<Block, CompileError> {
        self.cfg
            .block_at(slot)
            .and_then(|index| self.blocks.get(index).copied())
            .ok_or_else(|| self.error(CompileErrorKind::BadTarget))
    }

    /// The slot after the instruction at `slot`.
    fn next_slot(&self, slot: usize) -> usize {
        let width = self.insns.get(slot).map_or(1, Insn::slots);
        slot.saturating_add(width)
    }

    fn basic_block(&mut self, index: usize) -> Result<(), CompileError> {
        let cfg = self.cfg;
        let Some(block) = cfg.blocks.get(index) else {
            return Ok(());
        };
        let (Some(&head), Some(&last)) = (self.blocks.get(index), block.slots.last()) else {
            return Ok(());
        };
        let start = block.start();
        let n = block.slots.len();
        self.pc = start;
        self.block_start = start;
        self.b.switch_to_block(head);
        if let Some(counted) = self.counted.get(index).copied().flatten() {
            return self.counted_loop(index, block, head, counted);
        }
        // `remaining < n` as `remaining - n < 0`, signed (the budget is at most i64::MAX,
        // `crate::run`): a signed test of the charged value, which Cranelift cannot rewrite
        // into a test of the uncharged one (as it rewrites `(r - 6) <u 1` into `r == 6`),
        // so the uncharged value dies here and a loop's back edge needs no register move.
        let remaining = self.b.use_var(var(REMAINING));
        if self.plan.budget_free {
            // Counted, never tested: the facts bound the run below the budget. The charge
            // is `n * one` in code with loops (a run-state word that is always 1, opaque to Cranelift; a
            // multiplication, which Cranelift keeps where it is computed, once, in the
            // entry block, where an `or` would be recomputed at each use): with a constant, Cranelift folds a loop's charge
            // into the next block's (`(r - 6) - 1` into `r - 7`), which keeps the loop's
            // incoming count alive past the loop and costs every iteration a register
            // move and a jump.
            let charged = match self.charges.iter().find(|&&(m, _)| m == n) {
                Some(&(_, charge)) => self.b.ins().isub(remaining, charge),
                None => self.b.ins().iadd_imm(remaining, (n as i64).wrapping_neg()),
            };
            self.b.def_var(var(REMAINING), charged);
            return self.block_body(block, n, last);
        }
        let charged = self.b.ins().iadd_imm(remaining, (n as i64).wrapping_neg());
        let short = self.b.ins().icmp_imm(IntCC::SignedLessThan, charged, 0);
        let hot = self.b.create_block();
        let cold = self.b.create_block();
        self.b.set_cold_block(cold);
        self.b.ins().brif(short, cold, &[], hot, &[]);
        self.b.seal_block(hot);
        self.b.seal_block(cold);

        self.b.switch_to_block(hot);
        self.b.def_var(var(REMAINING), charged);
        self.block_body(block, n, last)?;

        // The cold copy: up to the last effect, each effect behind a budget check.
        self.b.switch_to_block(cold);
        let last_effect = block.slots.iter().rposition(|&slot| self.kind_at(slot) == Kind::Effect);
        self.sums = [None; REG_COUNT as usize];
        if let Some(last_effect) = last_effect {
            for (k, &slot) in block.slots.iter().enumerate().take(last_effect.saturating_add(1)) {
                self.pc = slot;
                self.mode = Mode::Cold { k };
                if self.kind_at(slot) == Kind::Effect {
                    self.budget_guard(k, start);
                }
                self.instruction(slot)?;
            }
        }
        self.leave_budget(start);
        Ok(())
    }

    /// A counted loop (`counted`): `entry` keeps the counted register and enters the
    /// loop's head, which charges nothing; the exit charges every iteration at once.
    fn counted_loop(
        &mut self,
        index: usize,
        block: &crate::cfg::BasicBlock,
        entry: Block,
        counted: counted::CountedLoop,
    ) -> Result<(), CompileError> {
        let n = block.slots.len();
        let Some(&last) = block.slots.last() else {
            return Ok(());
        };
        let base = self.get(counted.reg);
        self.b.def_var(var(LOOP_BASE), base);
        let head = self.b.create_block();
        let exit = self.b.create_block();
        let idiom = self.idioms.get(index).copied().flatten();
        let trips = self.trips.get(index).copied().flatten();
        match counted.unroll {
            Some(unroll) => {
                self.unrolled_groups(block, counted.reg, unroll, idiom, trips, head, exit)?
            }
            None => {
                self.b.ins().jump(head, &[]);
            }
        }
        self.b.switch_to_block(head);
        self.counting = Some((head, exit, entry));
        let body = self.block_body(block, n, last);
        self.counting = None;
        body?;
        self.b.switch_to_block(exit);
        let remaining = self.b.use_var(var(REMAINING));
        let known = trips.and_then(|k| k.checked_mul(n as u64)).and_then(|c| i64::try_from(c).ok());
        let remaining = match known {
            // Every run makes `k` iterations: the charge is a constant.
            Some(charge) => self.b.ins().iadd_imm(remaining, charge.wrapping_neg()),
            None => {
                let now = self.get(counted.reg);
                let base = self.b.use_var(var(LOOP_BASE));
                let moved = if counted.step > 0 {
                    self.b.ins().isub(now, base)
                } else {
                    self.b.ins().isub(base, now)
                };
                let step = counted.step.unsigned_abs();
                let iterations = if step.is_power_of_two() {
                    self.b.ins().ushr_imm(moved, i64::from(step.trailing_zeros()))
                } else {
                    self.b.ins().udiv_imm(moved, step as i64)
                };
                let charge = self.b.ins().imul_imm(iterations, n as i64);
                self.b.ins().isub(remaining, charge)
            }
        };
        self.b.def_var(var(REMAINING), remaining);
        let next = self.block_for(self.next_slot(last))?;
        self.b.ins().jump(next, &[]);
        Ok(())
    }

    /// The groups of an unrolled counted loop (`counted`, "Unrolling"), from the loop's
    /// entry: while the guard holds, `factor` copies of the body and no test between them;
    /// then `head`, the loop one iteration at a time, for what is left. After the last group
    /// the loop's own test decides between `head` and `exit` (on entry the first iteration
    /// runs whatever the test would say, as the loop's own body does).
    #[allow(clippy::too_many_arguments)] // the loop's parts, as `counted_loop` found them
    fn unrolled_groups(
        &mut self,
        block: &crate::cfg::BasicBlock,
        reg: u8,
        unroll: counted::Unroll,
        idiom: Option<Idiom>,
        trips: Option<u64>,
        head: Block,
        exit: Block,
    ) -> Result<(), CompileError> {
        let n = block.slots.len();
        let Some((&last, body)) = block.slots.split_last() else {
            return Ok(());
        };
        let group = self.b.create_block();
        let rest = self.b.create_block();
        let factor = unroll.factor as u64;
        // One group that is the whole loop: neither the guard nor the loop's test can hold.
        let whole = trips == Some(factor);
        if let (Some(Idiom::Sum(_)), false) = (idiom, whole) {
            self.start_sum_lanes();
        }
        match trips {
            // The guard decided: it holds on entry exactly when a whole group is left.
            Some(k) if k >= factor => self.b.ins().jump(group, &[]),
            Some(_) => self.b.ins().jump(head, &[]),
            None => {
                let guard = self.unroll_guard(reg, unroll);
                self.b.ins().brif(guard, group, &[], head, &[])
            }
        };
        self.b.switch_to_block(group);
        self.sums = [None; REG_COUNT as usize];
        let plain = |t: &mut Self| -> Result<(), CompileError> {
            for _ in 0..unroll.factor {
                for (k, &slot) in body.iter().enumerate() {
                    t.pc = slot;
                    t.mode = Mode::Hot { n, k };
                    t.instruction(slot)?;
                }
            }
            Ok(())
        };
        let wide = match idiom {
            Some(Idiom::Copy(copy)) => {
                self.wide_copy_group(copy, reg, unroll.factor, body, plain)?
            }
            Some(Idiom::Sum(sum)) => self.wide_sum_group(sum, reg, unroll.factor, body, whole)?,
            None => false,
        };
        if !wide {
            plain(self)?;
        }
        if whole {
            self.b.ins().jump(rest, &[]);
        } else {
            let guard = self.unroll_guard(reg, unroll);
            self.b.ins().brif(guard, group, &[], rest, &[]);
        }
        self.b.switch_to_block(rest);
        if let (true, Some(Idiom::Sum(sum))) = (wide, idiom) {
            self.finish_sum_lanes(sum)?;
        }
        if whole {
            self.b.ins().jump(exit, &[]);
            return Ok(());
        }
        self.pc = last;
        let Some(&jump) = self.insns.get(last) else {
            return Err(self.error(CompileErrorKind::BadTarget));
        };
        let taken = self.condition(&jump);
        self.b.ins().brif(taken, head, &[], exit, &[]);
        Ok(())
    }

    /// Whether `factor` more iterations of an unrolled loop run with no test between them:
    /// `r cc bound - span`, false if that subtraction wraps.
    fn unroll_guard(&mut self, reg: u8, unroll: counted::Unroll) -> Value {
        let r = self.get(reg);
        match unroll.bound {
            counted::Bound::Const(limit) => {
                // `counted` refused the loop if this wraps.
                self.b.ins().icmp_imm(unroll.cc, r, limit.wrapping_sub(unroll.span))
            }
            counted::Bound::Reg(src) => {
                let limit = self.get(src);
                let lowered = self.b.ins().iadd_imm(limit, unroll.span.wrapping_neg());
                let holds = self.b.ins().icmp(unroll.cc, r, lowered);
                // No wrap: the lowered limit moved by `span` in the comparison's domain.
                let (cc, edge) = match (counted::is_signed(unroll.cc), unroll.span >= 0) {
                    (false, true) => (IntCC::UnsignedGreaterThanOrEqual, unroll.span),
                    (false, false) => (IntCC::UnsignedLessThanOrEqual, unroll.span.wrapping_sub(1)),
                    (true, true) => {
                        (IntCC::SignedGreaterThanOrEqual, i64::MIN.wrapping_add(unroll.span))
                    }
                    (true, false) => {
                        (IntCC::SignedLessThanOrEqual, i64::MAX.wrapping_add(unroll.span))
                    }
                };
                let fits = self.b.ins().icmp_imm(cc, limit, edge);
                self.b.ins().band(holds, fits)
            }
        }
    }

    /// The block's instructions, charged already, then the jump to the next block.
    fn block_body(
        &mut self,
        block: &crate::cfg::BasicBlock,
        n: usize,
        last: usize,
    ) -> Result<(), CompileError> {
        self.sums = [None; REG_COUNT as usize];
        for (k, &slot) in block.slots.iter().enumerate() {
            self.pc = slot;
            self.mode = Mode::Hot { n, k };
            self.instruction(slot)?;
        }
        if self.kind_at(last) != Kind::End {
            self.pc = last;
            let next = self.block_for(self.next_slot(last))?;
            self.b.ins().jump(next, &[]);
        }
        Ok(())
    }

    fn kind_at(&self, slot: usize) -> Kind {
        self.insns.get(slot).map_or(Kind::End, |insn| kind(insn, self.bindings))
    }

    /// In a cold copy: leave with a budget trap unless the budget covers instruction `k`.
    fn budget_guard(&mut self, k: usize, start: usize) {
        let remaining = self.b.use_var(var(REMAINING));
        let spent = self.b.ins().icmp_imm(IntCC::UnsignedLessThanOrEqual, remaining, k as i64);
        let out = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.set_cold_block(out);
        self.b.ins().brif(spent, out, &[], go_on, &[]);
        self.b.seal_block(out);
        self.b.seal_block(go_on);
        self.b.switch_to_block(out);
        self.leave_budget(start);
        self.b.switch_to_block(go_on);
    }

    // ---- leaving ----

    /// Leaves the run from the current instruction with `code` and `value` (the result, or
    /// for traps the address, with the access size).
    fn leave_with(&mut self, code: u64, value: Value, size: u32) {
        let word = self.iconst(exit_word(code, size, self.pc) as i64);
        self.leave_jump(word, value, self.mode.adjustment());
    }

    /// [`Self::leave_with`] with a trap code known only at run time.
    fn leave_value(&mut self, code: Value, value: Value, size: u32) {
        let word = self.b.ins().bor_imm(code, exit_word(0, size, self.pc) as i64);
        self.leave_jump(word, value, self.mode.adjustment());
    }

    /// Leaves with a budget trap inside the block starting at `start`; `remaining` (not
    /// charged for the block) says how many of its instructions still fitted.
    fn leave_budget(&mut self, start: usize) {
        let word = self.iconst(exit_word(EXIT_BUDGET, 0, start) as i64);
        let zero = self.iconst(0);
        self.leave_jump(word, zero, 0);
    }

    /// Jumps to the current group's exit block (see [`Self::close_exit_group`]). An exit
    /// block takes at most [`EXIT_GROUP`] jumps, then the next jump starts a new one: a long
    /// basic block (thousands of checked accesses) must not funnel all its exits into one
    /// block either.
    fn leave_jump(&mut self, word: Value, value: Value, adjustment: i64) {
        let leave = match self.leave {
            Some((block, jumps)) if jumps < EXIT_GROUP => {
                self.leave = Some((block, jumps.saturating_add(1)));
                block
            }
            full => {
                if let Some((block, _)) = full {
                    self.full_leaves.push(block);
                }
                let block = self.b.create_block();
                self.b.set_cold_block(block);
                self.leave = Some((block, 1));
                block
            }
        };
        let adjustment = self.iconst(adjustment);
        self.b.ins().jump(leave, &[arg(word), arg(value), arg(adjustment)]);
    }

    /// Emits the exit block shared by the last few basic blocks: it stores the exit word,
    /// the value, the budget left and the deepest frame in the run state, and returns the
    /// value and [`Exit::OTHER`] (a plain exit returns without one: `leave_plain`). Exit blocks are shared by a bounded group of basic blocks only: one exit block
    /// for the whole function would merge thousands of predecessors spread along one long
    /// dominator chain, which makes Cranelift's dominator and register allocation passes
    /// quadratic in the program's length; one per exit site would bloat the code.
    fn close_exit_group(&mut self) {
        let mut leaves = std::mem::take(&mut self.full_leaves);
        leaves.extend(self.leave.take().map(|(block, _)| block));
        for leave in leaves {
            self.emit_exit_block(leave);
        }
    }

    fn emit_exit_block(&mut self, leave: Block) {
        // Every jump to it is emitted (the group is full or closed).
        self.b.seal_block(leave);
        self.b.switch_to_block(leave);
        let word = self.b.append_block_param(leave, types::I64);
        let value = self.b.append_block_param(leave, types::I64);
        let adjustment = self.b.append_block_param(leave, types::I64);
        let remaining = self.b.use_var(var(REMAINING));
        let remaining = self.b.ins().iadd(remaining, adjustment);
        for (offset, field) in [
            (offsets::EXIT_WORD, word),
            (offsets::EXIT_VALUE, value),
            (offsets::REMAINING, remaining),
        ] {
            self.b.ins().store(state_flags(), field, self.state, offset);
        }
        self.store_max_depth();
        let other = self.iconst(Exit::OTHER as i64);
        self.b.ins().return_(&[value, other]);
    }

    /// Leaves with a plain return of `r0` from frame 0: `r0` and the budget left in the two
    /// return registers ([`Exit`]), stored nowhere (the caller would read them straight
    /// back), and no exit block: a return here is shorter than the jump to one.
    fn leave_plain(&mut self, r0: Value) {
        let remaining = self.b.use_var(var(REMAINING));
        let remaining = self.b.ins().iadd_imm(remaining, self.mode.adjustment());
        self.store_max_depth();
        self.b.ins().return_(&[r0, remaining]);
    }

    /// The deepest frame reached, which every way out of code with calls stores.
    fn store_max_depth(&mut self) {
        if self.cfg.has_calls {
            let max_depth = self.b.use_var(var(MAX_DEPTH));
            self.b.ins().store(state_flags(), max_depth, self.state, offsets::MAX_DEPTH);
        }
    }

    /// Leaves with a trap that has no address.
    fn leave_trap(&mut self, code: TrapCode) {
        let zero = self.iconst(0);
        self.leave_with(u64::from(code.code()), zero, 0);
    }

    /// Branches to a cold block that leaves with `code` when `failed` is true; continues in
    /// a fresh block otherwise.
    fn trap_if(&mut self, failed: Value, code: u64, value: Value, size: u32) {
        let fail = self.b.create_block();
        let go_on = self.b.create_block();
        self.b.set_cold_block(fail);
        self.b.ins().brif(failed, fail, &[], go_on, &[]);
        self.b.seal_block(fail);
        self.b.seal_block(go_on);
        self.b.switch_to_block(fail);
        self.leave_with(code, value, size);
        self.b.switch_to_block(go_on);
    }

    /// Return-site dispatch: `exit` from a nested frame jumps here with the site number.
    fn emit_dispatch(&mut self) {
        let block = self.dispatch;
        self.b.switch_to_block(block);
        let site = self.b.append_block_param(block, types::I64);
        let nowhere = self.b.create_block();
        let mut switch = Switch::new();
        for (index, &target) in self.return_sites.iter().enumerate() {
            switch.set_entry(index as u128, target);
        }
        switch.emit(&mut self.b, site, nowhere);
        // Every pushed site number is in the table; keep the impossible case a clean trap.
        self.b.switch_to_block(nowhere);
        self.b.set_cold_block(nowhere);
        self.pc = 0;
        self.mode = Mode::Hot { n: 1, k: 0 };
        self.leave_trap(TrapCode::BadJump);
    }

    // ---- instructions ----

    fn instruction(&mut self, slot: usize) -> Result<(), CompileError> {
        let Some(&insn) = self.insns.get(slot) else {
            return Err(self.error(CompileErrorKind::BadTarget));
        };
        if insn.dst >= REG_COUNT || insn.src >= REG_COUNT {
            return Err(self.error(CompileErrorKind::BadRegister(insn.dst.max(insn.src))));
        }
        let Some(spec) = insn.op.spec() else {
            return Err(self.error(CompileErrorKind::BadTarget));
        };
        use weir_isa::ebpf::Operands;
        match spec.operands {
            Operands::DstImm | Operands::DstSrc | Operands::Dst => self.alu(&insn),
            Operands::JmpOff | Operands::JmpImm | Operands::DstImmOff | Operands::DstSrcOff => {
                self.jump(&insn)
            }
            Operands::Load => self.load(&insn),
            Operands::StoreImm | Operands::StoreReg => self.store(&insn),
            Operands::Abs | Operands::Ind => self.legacy_load(&insn),
            Operands::CallImm => self.call(&insn),
            Operands::CallLocal => self.call_local(),
            Operands::CallReg => self.call_reg(&insn),
            Operands::Nothing => self.exit(),
            Operands::DstImm64 => {
                let value = self.imm(insn.imm);
                self.set(insn.dst, value)
            }
            Operands::Pseudo(_) => self.pseudo_lddw(&insn),
        }
    }

    fn jump(&mut self, insn: &Insn) -> Result<(), CompileError> {
        let target = match target_of(self.insns, self.pc) {
            Some(target) => self.block_for(target?)?,
            None => return Err(self.error(CompileErrorKind::BadTarget)),
        };
        if matches!(insn.op, Op::Ja | Op::Ja32) {
            self.b.ins().jump(target, &[]);
            return Ok(());
        }
        let next = self.block_for(self.next_slot(self.pc))?;
        let (target, next) = match self.counting {
            // A counted loop's back edge, and its way out.
            Some((head, exit, entry)) if target == entry => (head, exit),
            _ => (target, next),
        };
        let taken = self.condition(insn);
        if target == next {
            self.b.ins().jump(next, &[]);
        } else {
            self.b.ins().brif(taken, target, &[], next, &[]);
        }
        Ok(())
    }

    fn pseudo_lddw(&mut self, insn: &Insn) -> Result<(), CompileError> {
        if insn.op != Op::LddwFunc {
            // Maps and kernel variables come with the runtime; until then they trap.
            self.leave_trap(TrapCode::Unsupported);
            return Ok(());
        }
        let target = crate::cfg::resolve(self.insns, self.pc, i64::from(insn.imm as i32))
            .and_then(func_addr)
            .ok_or_else(|| self.error(CompileErrorKind::BadTarget))?;
        let value = self.imm(target as i64);
        self.set(insn.dst, value)
    }

    fn exit(&mut self) -> Result<(), CompileError> {
        let r0 = self.get(0);
        if !self.cfg.has_calls {
            self.leave_plain(r0);
            return Ok(());
        }
        let depth = self.b.use_var(var(DEPTH));
        let top = self.b.create_block();
        let pop = self.b.create_block();
        self.b.ins().brif(depth, pop, &[], top, &[]);
        self.b.seal_block(top);
        self.b.seal_block(pop);
        self.b.switch_to_block(top);
        self.leave_plain(r0);

        self.b.switch_to_block(pop);
        let depth = self.b.ins().iadd_imm(depth, -1);
        self.b.def_var(var(DEPTH), depth);
        let frame = self.frame_address(depth);
        let mut saved = [frame; SAVED_WORDS];
        for (word, value) in saved.iter_mut().enumerate() {
            *value = self.b.ins().load(types::I64, state_flags(), frame, (word * 8) as i32);
        }
        let [r6, r7, r8, r9, r10, site] = saved;
        for (r, value) in [(6, r6), (7, r7), (8, r8), (9, r9), (10, r10)] {
            self.b.def_var(var(r), value);
        }
        self.set_stack_floor(r10);
        self.b.ins().jump(self.dispatch, &[arg(site)]);
        Ok(())
    }

    /// Host address of the saved registers of the frame at `depth`.
    fn frame_address(&mut self, depth: Value) -> Value {
        let frames = self.load_state(offsets::FRAMES);
        let offset = self.b.ins().imul_imm(depth, (FRAME_WORDS * 8) as i64);
        self.b.ins().iadd(frames, offset)
    }

    /// A new return site continuing at the instruction after the call being translated.
    fn return_site(&mut self) -> Result<i64, CompileError> {
        let continuation = self.block_for(self.next_slot(self.pc))?;
        Ok(self.return_site_to(continuation))
    }

    /// A new return site continuing at `continuation`.
    fn return_site_to(&mut self, continuation: Block) -> i64 {
        let site = self.return_sites.len() as i64;
        self.return_sites.push(continuation);
        site
    }

    /// The call half of a local call: depth check, save r6-r10 and the site, new frame.
    fn push_frame(&mut self, site: i64) {
        let depth = self.b.use_var(var(DEPTH));
        let limit = self.shape.frames.saturating_sub(1);
        let full = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, depth, limit as i64);
        let zero = self.iconst(0);
        self.trap_if(full, u64::from(TrapCode::CallDepth.code()), zero, 0);
        let frame = self.frame_address(depth);
        let site = self.iconst(site);
        let regs = [6, 7, 8, 9, 10].map(|r| self.get(r));
        for (word, value) in regs.into_iter().chain([site]).enumerate() {
            self.b.ins().store(state_flags(), value, frame, (word * 8) as i32);
        }
        let depth = self.b.ins().iadd_imm(depth, 1);
        self.b.def_var(var(DEPTH), depth);
        let max_depth = self.b.use_var(var(MAX_DEPTH));
        let max_depth = self.b.ins().umax(max_depth, depth);
        self.b.def_var(var(MAX_DEPTH), max_depth);
        let r10 = self.get(10);
        let r10 = self.b.ins().iadd_imm(r10, (self.shape.stack_size as i64).wrapping_neg());
        self.b.def_var(var(10), r10);
        self.set_stack_floor(r10);
    }

    fn call_local(&mut self) -> Result<(), CompileError> {
        let target = match target_of(self.insns, self.pc) {
            Some(target) => self.block_for(target?)?,
            None => return Err(self.error(CompileErrorKind::BadTarget)),
        };
        let site = self.return_site()?;
        self.push_frame(site);
        self.b.ins().jump(target, &[]);
        Ok(())
    }

    /// `call %reg`: a function address that names an instruction is a local call into it;
    /// any other value is tried as a helper id; anything else is a bad call target.
    fn call_reg(&mut self, insn: &Insn) -> Result<(), CompileError> {
        let value = self.get(insn.dst);
        let (ok, slot) = self.function_slot(value);
        let lookup = self.b.create_block();
        let helper = self.b.create_block();
        self.b.ins().brif(ok, lookup, &[], helper, &[]);

        self.b.switch_to_block(lookup);
        let targets = self.load_state(offsets::CALL_TARGETS);
        let entry = self.b.ins().iadd(targets, slot);
        let enterable = self.b.ins().uload8(types::I64, state_flags().with_readonly(), entry, 0);
        let enter = self.b.create_block();
        self.b.ins().brif(enterable, enter, &[], helper, &[]);

        self.b.switch_to_block(enter);
        let site = self.return_site()?;
        self.push_frame(site);
        self.enter_slot(slot, value)?;

        self.b.switch_to_block(helper);
        self.call_helper(value)?;
        let next = self.block_for(self.next_slot(self.pc))?;
        self.b.ins().jump(next, &[]);
        Ok(())
    }

    /// Decodes a function address (`FUNC_BASE + 8 * slot`, as `ld_imm64 src=BPF_PSEUDO_FUNC`
    /// gives it): whether it names an instruction slot of this program (at or above the
    /// base, 8-byte aligned, inside), and that slot. `call %reg` and `bpf_loop` both take one.
    fn function_slot(&mut self, value: Value) -> (Value, Value) {
        let func_base = crate::guest::FUNC_BASE as i64;
        let offset = self.b.ins().iadd_imm(value, func_base.wrapping_neg());
        let above = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, value, func_base);
        let low_bits = self.b.ins().band_imm(offset, 7);
        let aligned = self.b.ins().icmp_imm(IntCC::Equal, low_bits, 0);
        let slot = self.b.ins().ushr_imm(offset, 3);
        let inside = self.b.ins().icmp_imm(IntCC::UnsignedLessThan, slot, self.insns.len() as i64);
        let ok = self.b.ins().band(above, aligned);
        (self.b.ins().band(ok, inside), slot)
    }

    /// Jumps to the instruction at `slot` (a run-time value, known to name an instruction
    /// that may be entered); `value`, the function address it came from, is the trap's
    /// address if it does not.
    fn enter_slot(&mut self, slot: Value, value: Value) -> Result<(), CompileError> {
        let nowhere = self.b.create_block();
        let mut switch = Switch::new();
        for (slot, insn) in self.insns.iter().enumerate() {
            if insn.op != Op::LddwHigh {
                switch.set_entry(slot as u128, self.block_for(slot)?);
            }
        }
        switch.emit(&mut self.b, slot, nowhere);
        self.b.switch_to_block(nowhere);
        self.b.set_cold_block(nowhere);
        self.leave_with(u64::from(TrapCode::BadCallTarget.code()), value, 0);
        Ok(())
    }

    /// `bpf_loop` (`abi::bpf_loop`), unbound helper 181: the callback runs as a local call
    /// per index, in a frame whose words after the saved registers keep the loop's state
    /// (`state::FRAME_WORDS`), so that a callback may itself loop. Its exit returns through
    /// the return-site dispatch to a block that calls it again or gives the helper's result.
    fn bpf_loop(&mut self) -> Result<(), CompileError> {
        use weir_program::abi::bpf_loop::{E2BIG, EINVAL, MAX_LOOPS};
        let next = self.block_for(self.next_slot(self.pc))?;
        let [r1, func, ctx, flags] = [1, 2, 3, 4].map(|r| self.get(r));
        let count = self.b.ins().band_imm(r1, 0xffff_ffff);
        let flagged = self.b.ins().icmp_imm(IntCC::NotEqual, flags, 0);
        let big = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThan, count, MAX_LOOPS as i64);
        let empty = self.b.ins().icmp_imm(IntCC::Equal, count, 0);
        let einval = self.iconst(EINVAL as i64);
        let e2big = self.iconst(E2BIG as i64);
        let zero = self.iconst(0);
        let refused = self.b.ins().select(big, e2big, zero);
        let refused = self.b.ins().select(flagged, einval, refused);
        let no_call = self.b.ins().bor(flagged, big);
        let no_call = self.b.ins().bor(no_call, empty);
        let done = self.b.create_block();
        let start = self.b.create_block();
        self.b.ins().brif(no_call, done, &[], start, &[]);
        self.b.switch_to_block(done);
        self.set(0, refused)?;
        self.b.ins().jump(next, &[]);

        // The callback: a function address naming an instruction that may be entered.
        self.b.switch_to_block(start);
        let (ok, slot) = self.function_slot(func);
        let lookup = self.b.create_block();
        let bad = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(ok, lookup, &[], bad, &[]);
        self.b.switch_to_block(bad);
        self.leave_with(u64::from(TrapCode::BadCallTarget.code()), func, 0);
        self.b.switch_to_block(lookup);
        let targets = self.load_state(offsets::CALL_TARGETS);
        let entry = self.b.ins().iadd(targets, slot);
        let enterable = self.b.ins().uload8(types::I64, state_flags().with_readonly(), entry, 0);
        let first = self.b.create_block();
        let bad = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(enterable, first, &[], bad, &[]);
        self.b.switch_to_block(bad);
        self.leave_with(u64::from(TrapCode::BadCallTarget.code()), func, 0);

        self.b.switch_to_block(first);
        let back = self.b.create_block();
        let site = self.return_site_to(back);
        let zero = self.iconst(0);
        self.call_back(site, [slot, zero, count, ctx], func)?;

        // Back from a call: the frame just left (at `depth`) still holds the loop's state.
        self.b.switch_to_block(back);
        let depth = self.b.use_var(var(DEPTH));
        let frame = self.frame_address(depth);
        let [slot, index, count, ctx] = [0, 1, 2, 3].map(|k| {
            let offset = ((SAVED_WORDS + k) * 8) as i32;
            self.b.ins().load(types::I64, state_flags(), frame, offset)
        });
        let calls = self.b.ins().iadd_imm(index, 1);
        let r0 = self.get(0);
        let stopped = self.b.ins().icmp_imm(IntCC::NotEqual, r0, 0);
        let all = self.b.ins().icmp(IntCC::Equal, calls, count);
        let finished = self.b.ins().bor(stopped, all);
        let finish = self.b.create_block();
        let again = self.b.create_block();
        self.b.ins().brif(finished, finish, &[], again, &[]);
        self.b.switch_to_block(finish);
        self.set(0, calls)?;
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(again);
        let func = self.b.ins().ishl_imm(slot, 3);
        let func = self.b.ins().iadd_imm(func, crate::guest::FUNC_BASE as i64);
        self.call_back(site, [slot, calls, count, ctx], func)
    }

    /// One call of a `bpf_loop` callback: a frame returning to `site` that keeps `state`
    /// (slot, index, count, context), r1 the index, r2 the context, r3-r5 zero.
    fn call_back(&mut self, site: i64, state: [Value; 4], func: Value) -> Result<(), CompileError> {
        let depth = self.b.use_var(var(DEPTH));
        self.push_frame(site);
        let frame = self.frame_address(depth);
        for (k, value) in state.into_iter().enumerate() {
            let offset = ((SAVED_WORDS + k) * 8) as i32;
            self.b.ins().store(state_flags(), value, frame, offset);
        }
        let [slot, index, _, ctx] = state;
        let zero = self.iconst(0);
        for (r, value) in [(1, index), (2, ctx), (3, zero), (4, zero), (5, zero)] {
            self.set(r, value)?;
        }
        self.enter_slot(slot, func)
    }

    fn call(&mut self, insn: &Insn) -> Result<(), CompileError> {
        let id = insn.imm as i32 as u32;
        let bound = insn.op == Op::Call && self.bindings.helper(id).is_some();
        if !bound {
            if insn.op == Op::Call && id == weir_program::abi::helper_id::LOOP {
                return self.bpf_loop();
            }
            if insn.op == Op::Call {
                let id = self.imm(i64::from(id));
                self.leave_with(u64::from(TrapCode::UnknownHelper.code()), id, 0);
            } else {
                self.leave_trap(TrapCode::Unsupported);
            }
            return Ok(());
        }
        // `bpf_map_lookup_elem` answered by the environment: its own trampoline, which
        // takes a map's direct lookup when the run has one (the kernel's `map_gen_lookup`),
        // or, for a map and key known here, the map's probe called from generated code.
        let env_lookup =
            id == weir_program::abi::helper_id::MAP_LOOKUP_ELEM && self.bindings.env_map_lookup();
        let id = self.imm(i64::from(id));
        if !env_lookup {
            return self.call_trampoline(id, offsets::HELPER_FN);
        }
        match (self.find_sig, lookup::known(self.insns, self.block_start, self.pc)) {
            (Some(find_sig), Some(known)) => self.direct_lookup(id, find_sig, known),
            _ => self.call_trampoline(id, offsets::LOOKUP_FN),
        }
    }

    /// Calls the helper `id` with r1-r5 through the trampoline; r0 gets its result unless
    /// it stopped, failed, panicked or was not bound, which leave the run.
    fn call_helper(&mut self, id: Value) -> Result<(), CompileError> {
        self.call_trampoline(id, offsets::HELPER_FN)
    }

    /// [`Self::call_helper`] through the trampoline whose address the run state keeps at
    /// `trampoline` (one of `call_helper`'s signature).
    fn call_trampoline(&mut self, id: Value, trampoline: i32) -> Result<(), CompileError> {
        let mut args = vec![self.state, id];
        args.extend([1, 2, 3, 4, 5].map(|r| self.get(r)));
        let callee = self.load_state(trampoline);
        let call = self.b.ins().call_indirect(self.helper_sig, callee, &args);
        let Some(&result) = self.b.inst_results(call).first() else {
            return Err(self.error(CompileErrorKind::Backend("helper call has no result".into())));
        };
        let status = self.load_status(offsets::HELPER_STATUS);
        self.trap_if(status, EXIT_HELPER, result, 0);
        self.set(0, result)
    }
}
