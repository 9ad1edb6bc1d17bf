//! The run loop: one `match` over [`Step`]s, in a `loop`, with everything decidable ahead of
//! time already decided by [`crate::step`].
//!
//! Per step the loop does a slice lookup, a budget check and the dispatch; nothing allocates
//! (the frame stack's capacity is reserved when the [`crate::Cache`] is made). Registers live
//! in a 16-entry array indexed by `reg & 15`, so register access cannot go out of bounds
//! whatever the compiler can prove; translation guarantees every register is below 11.
//!
//! The budget counts dispatched steps, including the one that traps; when it is spent, the
//! next step traps with [`TrapCode::InstructionBudget`] instead of running.

use std::ops::ControlFlow;

use weir_program::abi::{bpf_loop, HelperCtx, HelperFn, HelperOutcome, RunEnv};
use weir_program::{Trap, TrapCode};

use crate::guest;
use crate::memory::Memory;
use crate::step::{AtomicOp, Step};
use crate::Interpreter;
use weir_program::exec::alu::{
    arsh32, arsh64, div32, div64, lsh32, lsh64, mod32, mod64, rsh32, rsh64, sdiv32, sdiv64, smod32,
    smod64,
};

/// What a call step does next: go on at a slot, or end the run.
type Flow = ControlFlow<Result<u64, Trap>, usize>;

/// A caller's state saved by a local call: where to return, and r6-r9 and r10.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    return_pc: usize,
    saved: [u64; 5],
    /// Set when this frame runs a `bpf_loop` callback: its exit calls it again or returns
    /// from the helper.
    looping: Option<Looping>,
}

/// A `bpf_loop` in progress (`abi::bpf_loop`): the callback's slot, the index of the call
/// running, the iteration count and the context argument.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Looping {
    callback: usize,
    index: u64,
    count: u64,
    ctx: u64,
}

/// Index of register `r` in the 16-entry register array; the mask lets the compiler drop
/// the bounds check.
#[inline(always)]
fn slot_of(r: u8) -> usize {
    usize::from(r & 0x0f)
}

/// The registers a local call saves for its caller: r6-r9 and r10.
#[inline(always)]
fn callee_saved(regs: &[u64; 16]) -> [u64; 5] {
    [regs[6], regs[7], regs[8], regs[9], regs[10]]
}

/// The offset of an indirect legacy load: the kernel adds in 64 bits and passes the sum as
/// a C `int`.
#[inline(always)]
fn ind_offset(src: u64, imm: i32) -> i32 {
    lo(src.wrapping_add(i64::from(imm) as u64)) as i32
}

/// The low 32 bits, as the 32-bit operations see a register.
#[inline(always)]
fn lo(value: u64) -> u32 {
    value as u32
}

impl Interpreter {
    /// `r10` of frame `frame`. Frame 0 sits at the top of the stack region and each call
    /// goes one frame lower, as a real stack grows down: then "everything from the running
    /// frame's bottom up to the region's top" is exactly the running frame plus its callers'
    /// frames (reachable through pointers they pass down), and nothing else.
    pub(crate) fn frame_top(&self, frame: usize) -> u64 {
        self.shape.frame_top(frame as u64)
    }

    /// Offset in the stack region of the lowest byte frame `frame` may touch.
    pub(crate) fn frame_floor(&self, frame: usize) -> usize {
        // Fits: the shape was fitted into the stack window.
        self.shape.frame_floor(frame as u64) as usize
    }

    /// Whether `slot` starts an instruction a call may enter.
    fn is_call_target(&self, slot: usize) -> bool {
        slot < self.slots && !matches!(self.code.get(slot), Some(Step::Filler) | None)
    }

    /// Runs from slot 0 with `r1`, `r2` and frame 0's `r10` set, until `exit` from frame 0,
    /// a helper's stop, a failed legacy packet load (r0 = 0), or a trap. `executed` receives
    /// the number of dispatched steps whatever the outcome.
    ///
    /// `observe` sees the slot and the registers before every instruction runs (a no-op
    /// closure compiles away: the plain runs pay nothing for it).
    ///
    /// `LEAN` (the lean entry's runs, a filter's) takes two shortcuts: a program whose steps
    /// can each run at most once a run ([`Interpreter`]'s `budget_free`) takes the loop
    /// without the budget test (it cannot run out), and a `SetThenExit` that ends the run
    /// runs its `exit` in the same dispatch. The general path keeps the plain loop: in its
    /// copy the shortcuts' extra live values cost the compiler a spill in the load steps
    /// (a byte loop over memory, the compute programs' shape, 23.3 -> 24.7 machine
    /// instructions an instruction with them, 23.3 without; bench/records/2026-12-02-interp-11.txt).
    #[inline(always)]
    pub(crate) fn execute<F: FnMut(usize, &[u64; 16]), const LEAN: bool>(
        &self,
        memory: &mut Memory<'_>,
        frames: &mut Vec<Frame>,
        r1: u64,
        r2: u64,
        executed: &mut u64,
        observe: &mut F,
    ) -> Result<u64, Trap> {
        if LEAN && self.budget_free {
            self.run_steps::<F, LEAN, false>(memory, frames, r1, r2, executed, observe)
        } else {
            self.run_steps::<F, LEAN, true>(memory, frames, r1, r2, executed, observe)
        }
    }

    /// The loop of [`Interpreter::execute`]; `BUDGETED` tests the budget before each step
    /// (the count is kept either way), `LEAN` fuses a `SetThenExit`'s `exit` when it ends
    /// the run.
    #[inline(always)]
    fn run_steps<F: FnMut(usize, &[u64; 16]), const LEAN: bool, const BUDGETED: bool>(
        &self,
        memory: &mut Memory<'_>,
        frames: &mut Vec<Frame>,
        r1: u64,
        r2: u64,
        executed: &mut u64,
        observe: &mut F,
    ) -> Result<u64, Trap> {
        let code: &[Step] = &self.code;
        let mut regs = [0u64; 16];
        regs[1] = r1;
        regs[2] = r2;
        regs[10] = self.entry_top;
        memory.set_stack_floor(self.entry_floor);
        let budget = self.config.instruction_budget;
        let mut remaining = budget;
        let mut pc: usize = 0;
        // 1 when the run ended in a `SetThenExit`'s `exit`: one step the budget did not count.
        let mut fused_exit = 0u64;

        let outcome = 'run: loop {
            // Borrowed, not copied: each arm then loads only its own fields from the step.
            // A copy (`Some(&step)`) had the compiler split the 16 bytes into a dozen
            // loads and shifts ahead of the jump for every step, with `pc` spilled to the
            // stack (issue 13; bench/records/2026-11-29-interp-5.txt: ~37 machine
            // instructions per step before, ~24 after).
            let Some(step) = code.get(pc) else {
                // Unreachable by construction (every target is a step); kept as a trap.
                break 'run Err(Trap::new(TrapCode::BadJump, pc));
            };
            if BUDGETED && remaining == 0 {
                break 'run Err(Trap::new(TrapCode::InstructionBudget, pc));
            }
            remaining = remaining.wrapping_sub(1);
            let here = pc;
            if here < self.slots {
                observe(here, &regs);
            }
            pc = pc.wrapping_add(1);
            // Defined here so that `'run` and `here` are in scope where they expand.
            macro_rules! reg {
                ($r:expr) => {
                    regs[slot_of($r)]
                };
            }
            macro_rules! addr {
                ($base:expr, $off:expr) => {
                    reg!($base).wrapping_add_signed(i64::from($off))
                };
            }
            macro_rules! load {
                ($n:literal, $addr:expr) => {{
                    let addr: u64 = $addr;
                    match memory.load::<$n>(addr) {
                        Some(bytes) => bytes,
                        None => {
                            break 'run Err(Trap::memory(TrapCode::OutOfBounds, here, addr, $n));
                        }
                    }
                }};
            }
            macro_rules! store {
                ($addr:expr, $bytes:expr) => {{
                    let addr: u64 = $addr;
                    let bytes = $bytes;
                    if let Err(code) = memory.store(addr, bytes) {
                        break 'run Err(Trap::memory(code, here, addr, bytes.len() as u32));
                    }
                }};
            }
            // A legacy packet load: `r0` = the bytes, or the run ends returning 0.
            macro_rules! legacy_load {
                ($n:literal, $offset:expr) => {
                    match memory.packet_load::<$n>($offset) {
                        Some(value) => reg!(0) = value,
                        None => break 'run Ok(0),
                    }
                };
            }
            macro_rules! jump_if {
                ($cond:expr, $target:expr) => {
                    if $cond {
                        pc = $target;
                    }
                };
            }
            // A call, or a return to a caller: the step's work is out of line (below), so
            // that the loop holds none of what only calls read (the helper table, the
            // frame shape, the program type): the compiler kept those in stack slots
            // loaded before every run's first step (issue 13: a short filter's set-up).
            macro_rules! flow {
                ($flow:expr) => {
                    match $flow {
                        ControlFlow::Continue(next) => pc = next,
                        ControlFlow::Break(end) => break 'run end,
                    }
                };
            }
            match *step {
                Step::Add64Imm { dst, imm } => reg!(dst) = reg!(dst).wrapping_add(imm),
                Step::Add64Reg { dst, src } => reg!(dst) = reg!(dst).wrapping_add(reg!(src)),
                Step::Sub64Imm { dst, imm } => reg!(dst) = reg!(dst).wrapping_sub(imm),
                Step::Sub64Reg { dst, src } => reg!(dst) = reg!(dst).wrapping_sub(reg!(src)),
                Step::Mul64Imm { dst, imm } => reg!(dst) = reg!(dst).wrapping_mul(imm),
                Step::Mul64Reg { dst, src } => reg!(dst) = reg!(dst).wrapping_mul(reg!(src)),
                Step::Div64Imm { dst, imm } => reg!(dst) = div64(reg!(dst), imm),
                Step::Div64Reg { dst, src } => reg!(dst) = div64(reg!(dst), reg!(src)),
                Step::Sdiv64Imm { dst, imm } => reg!(dst) = sdiv64(reg!(dst), imm),
                Step::Sdiv64Reg { dst, src } => reg!(dst) = sdiv64(reg!(dst), reg!(src)),
                Step::Mod64Imm { dst, imm } => reg!(dst) = mod64(reg!(dst), imm),
                Step::Mod64Reg { dst, src } => reg!(dst) = mod64(reg!(dst), reg!(src)),
                Step::Smod64Imm { dst, imm } => reg!(dst) = smod64(reg!(dst), imm),
                Step::Smod64Reg { dst, src } => reg!(dst) = smod64(reg!(dst), reg!(src)),
                Step::Or64Imm { dst, imm } => reg!(dst) |= imm,
                Step::Or64Reg { dst, src } => reg!(dst) |= reg!(src),
                Step::And64Imm { dst, imm } => reg!(dst) &= imm,
                Step::And64Reg { dst, src } => reg!(dst) &= reg!(src),
                Step::Xor64Imm { dst, imm } => reg!(dst) ^= imm,
                Step::Xor64Reg { dst, src } => reg!(dst) ^= reg!(src),
                Step::Lsh64Imm { dst, imm } => reg!(dst) = lsh64(reg!(dst), imm),
                Step::Lsh64Reg { dst, src } => reg!(dst) = lsh64(reg!(dst), reg!(src)),
                Step::Rsh64Imm { dst, imm } => reg!(dst) = rsh64(reg!(dst), imm),
                Step::Rsh64Reg { dst, src } => reg!(dst) = rsh64(reg!(dst), reg!(src)),
                Step::Arsh64Imm { dst, imm } => reg!(dst) = arsh64(reg!(dst), imm),
                Step::Arsh64Reg { dst, src } => reg!(dst) = arsh64(reg!(dst), reg!(src)),
                Step::Neg64 { dst } => reg!(dst) = reg!(dst).wrapping_neg(),
                Step::Mov64Reg { dst, src } => reg!(dst) = reg!(src),
                Step::MovSx8To64 { dst, src } => reg!(dst) = reg!(src) as i8 as i64 as u64,
                Step::MovSx16To64 { dst, src } => reg!(dst) = reg!(src) as i16 as i64 as u64,
                Step::MovSx32To64 { dst, src } => reg!(dst) = reg!(src) as i32 as i64 as u64,
                Step::Set { dst, imm } => reg!(dst) = imm,
                Step::SetThenExit { dst, imm } => {
                    reg!(dst) = imm;
                    // The `exit` of the next slot, as the loop would run it: counted,
                    // observed, ending the run from frame 0. Anything else (no budget
                    // left, a called frame) goes on to that `exit` step.
                    if LEAN && remaining != 0 && frames.is_empty() {
                        if pc < self.slots {
                            observe(pc, &regs);
                        }
                        // Counted after the loop: the budget's register is not touched
                        // here, which kept a copy of it live in every step's head.
                        fused_exit = 1;
                        break 'run Ok(regs[0]);
                    }
                }

                Step::Add32Imm { dst, imm } => {
                    reg!(dst) = u64::from(lo(reg!(dst)).wrapping_add(imm));
                }
                Step::Add32Reg { dst, src } => {
                    reg!(dst) = u64::from(lo(reg!(dst)).wrapping_add(lo(reg!(src))));
                }
                Step::Sub32Imm { dst, imm } => {
                    reg!(dst) = u64::from(lo(reg!(dst)).wrapping_sub(imm));
                }
                Step::Sub32Reg { dst, src } => {
                    reg!(dst) = u64::from(lo(reg!(dst)).wrapping_sub(lo(reg!(src))));
                }
                Step::Mul32Imm { dst, imm } => {
                    reg!(dst) = u64::from(lo(reg!(dst)).wrapping_mul(imm));
                }
                Step::Mul32Reg { dst, src } => {
                    reg!(dst) = u64::from(lo(reg!(dst)).wrapping_mul(lo(reg!(src))));
                }
                Step::Div32Imm { dst, imm } => reg!(dst) = u64::from(div32(lo(reg!(dst)), imm)),
                Step::Div32Reg { dst, src } => {
                    reg!(dst) = u64::from(div32(lo(reg!(dst)), lo(reg!(src))));
                }
                Step::Sdiv32Imm { dst, imm } => {
                    reg!(dst) = u64::from(sdiv32(lo(reg!(dst)), imm));
                }
                Step::Sdiv32Reg { dst, src } => {
                    reg!(dst) = u64::from(sdiv32(lo(reg!(dst)), lo(reg!(src))));
                }
                Step::Mod32Imm { dst, imm } => reg!(dst) = u64::from(mod32(lo(reg!(dst)), imm)),
                Step::Mod32Reg { dst, src } => {
                    reg!(dst) = u64::from(mod32(lo(reg!(dst)), lo(reg!(src))));
                }
                Step::Smod32Imm { dst, imm } => {
                    reg!(dst) = u64::from(smod32(lo(reg!(dst)), imm));
                }
                Step::Smod32Reg { dst, src } => {
                    reg!(dst) = u64::from(smod32(lo(reg!(dst)), lo(reg!(src))));
                }
                Step::Or32Imm { dst, imm } => reg!(dst) = u64::from(lo(reg!(dst)) | imm),
                Step::Or32Reg { dst, src } => {
                    reg!(dst) = u64::from(lo(reg!(dst)) | lo(reg!(src)));
                }
                Step::And32Imm { dst, imm } => reg!(dst) = u64::from(lo(reg!(dst)) & imm),
                Step::And32Reg { dst, src } => {
                    reg!(dst) = u64::from(lo(reg!(dst)) & lo(reg!(src)));
                }
                Step::Xor32Imm { dst, imm } => reg!(dst) = u64::from(lo(reg!(dst)) ^ imm),
                Step::Xor32Reg { dst, src } => {
                    reg!(dst) = u64::from(lo(reg!(dst)) ^ lo(reg!(src)));
                }
                Step::Lsh32Imm { dst, imm } => reg!(dst) = u64::from(lsh32(lo(reg!(dst)), imm)),
                Step::Lsh32Reg { dst, src } => {
                    reg!(dst) = u64::from(lsh32(lo(reg!(dst)), lo(reg!(src))));
                }
                Step::Rsh32Imm { dst, imm } => reg!(dst) = u64::from(rsh32(lo(reg!(dst)), imm)),
                Step::Rsh32Reg { dst, src } => {
                    reg!(dst) = u64::from(rsh32(lo(reg!(dst)), lo(reg!(src))));
                }
                Step::Arsh32Imm { dst, imm } => {
                    reg!(dst) = u64::from(arsh32(lo(reg!(dst)), imm));
                }
                Step::Arsh32Reg { dst, src } => {
                    reg!(dst) = u64::from(arsh32(lo(reg!(dst)), lo(reg!(src))));
                }
                Step::Neg32 { dst } => reg!(dst) = u64::from(lo(reg!(dst)).wrapping_neg()),
                Step::Mov32Reg { dst, src } => reg!(dst) = u64::from(lo(reg!(src))),
                Step::MovSx8To32 { dst, src } => {
                    reg!(dst) = u64::from(reg!(src) as i8 as i32 as u32);
                }
                Step::MovSx16To32 { dst, src } => {
                    reg!(dst) = u64::from(reg!(src) as i16 as i32 as u32);
                }

                Step::Trunc16 { dst } => reg!(dst) &= 0xffff,
                Step::Trunc32 { dst } => reg!(dst) &= 0xffff_ffff,
                Step::Swap16 { dst } => reg!(dst) = u64::from((reg!(dst) as u16).swap_bytes()),
                Step::Swap32 { dst } => reg!(dst) = u64::from(lo(reg!(dst)).swap_bytes()),
                Step::Swap64 { dst } => reg!(dst) = reg!(dst).swap_bytes(),
                Step::Nop => {}

                Step::Ja { target } => pc = target,
                Step::Jeq64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) == i64::from(imm) as u64, target);
                }
                Step::Jeq64Reg { dst, src, target } => jump_if!(reg!(dst) == reg!(src), target),
                Step::Jgt64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) > i64::from(imm) as u64, target);
                }
                Step::Jgt64Reg { dst, src, target } => jump_if!(reg!(dst) > reg!(src), target),
                Step::Jge64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) >= i64::from(imm) as u64, target);
                }
                Step::Jge64Reg { dst, src, target } => jump_if!(reg!(dst) >= reg!(src), target),
                Step::Jset64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) & i64::from(imm) as u64 != 0, target);
                }
                Step::Jset64Reg { dst, src, target } => {
                    jump_if!(reg!(dst) & reg!(src) != 0, target);
                }
                Step::Jne64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) != i64::from(imm) as u64, target);
                }
                Step::Jne64Reg { dst, src, target } => jump_if!(reg!(dst) != reg!(src), target),
                Step::Jsgt64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) as i64 > i64::from(imm), target);
                }
                Step::Jsgt64Reg { dst, src, target } => {
                    jump_if!(reg!(dst) as i64 > reg!(src) as i64, target);
                }
                Step::Jsge64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) as i64 >= i64::from(imm), target);
                }
                Step::Jsge64Reg { dst, src, target } => {
                    jump_if!(reg!(dst) as i64 >= reg!(src) as i64, target);
                }
                Step::Jlt64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) < i64::from(imm) as u64, target);
                }
                Step::Jlt64Reg { dst, src, target } => jump_if!(reg!(dst) < reg!(src), target),
                Step::Jle64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) <= i64::from(imm) as u64, target);
                }
                Step::Jle64Reg { dst, src, target } => jump_if!(reg!(dst) <= reg!(src), target),
                Step::Jslt64Imm { dst, imm, target } => {
                    jump_if!((reg!(dst) as i64) < i64::from(imm), target);
                }
                Step::Jslt64Reg { dst, src, target } => {
                    jump_if!((reg!(dst) as i64) < reg!(src) as i64, target);
                }
                Step::Jsle64Imm { dst, imm, target } => {
                    jump_if!(reg!(dst) as i64 <= i64::from(imm), target);
                }
                Step::Jsle64Reg { dst, src, target } => {
                    jump_if!(reg!(dst) as i64 <= reg!(src) as i64, target);
                }
                Step::Jeq32Imm { dst, imm, target } => jump_if!(lo(reg!(dst)) == imm, target),
                Step::Jeq32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) == lo(reg!(src)), target);
                }
                Step::Jgt32Imm { dst, imm, target } => jump_if!(lo(reg!(dst)) > imm, target),
                Step::Jgt32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) > lo(reg!(src)), target);
                }
                Step::Jge32Imm { dst, imm, target } => jump_if!(lo(reg!(dst)) >= imm, target),
                Step::Jge32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) >= lo(reg!(src)), target);
                }
                Step::Jset32Imm { dst, imm, target } => {
                    jump_if!(lo(reg!(dst)) & imm != 0, target);
                }
                Step::Jset32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) & lo(reg!(src)) != 0, target);
                }
                Step::Jne32Imm { dst, imm, target } => jump_if!(lo(reg!(dst)) != imm, target),
                Step::Jne32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) != lo(reg!(src)), target);
                }
                Step::Jsgt32Imm { dst, imm, target } => {
                    jump_if!(lo(reg!(dst)) as i32 > imm as i32, target);
                }
                Step::Jsgt32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) as i32 > lo(reg!(src)) as i32, target);
                }
                Step::Jsge32Imm { dst, imm, target } => {
                    jump_if!(lo(reg!(dst)) as i32 >= imm as i32, target);
                }
                Step::Jsge32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) as i32 >= lo(reg!(src)) as i32, target);
                }
                Step::Jlt32Imm { dst, imm, target } => jump_if!(lo(reg!(dst)) < imm, target),
                Step::Jlt32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) < lo(reg!(src)), target);
                }
                Step::Jle32Imm { dst, imm, target } => jump_if!(lo(reg!(dst)) <= imm, target),
                Step::Jle32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) <= lo(reg!(src)), target);
                }
                Step::Jslt32Imm { dst, imm, target } => {
                    jump_if!((lo(reg!(dst)) as i32) < imm as i32, target);
                }
                Step::Jslt32Reg { dst, src, target } => {
                    jump_if!((lo(reg!(dst)) as i32) < lo(reg!(src)) as i32, target);
                }
                Step::Jsle32Imm { dst, imm, target } => {
                    jump_if!(lo(reg!(dst)) as i32 <= imm as i32, target);
                }
                Step::Jsle32Reg { dst, src, target } => {
                    jump_if!(lo(reg!(dst)) as i32 <= lo(reg!(src)) as i32, target);
                }

                Step::CallHelper { id, func } => {
                    flow!(self.call_helper(id, func, &mut regs, memory, pc, here));
                }
                Step::CallLocal { target } => {
                    flow!(self.call_local(target, &mut regs, memory, frames, pc, here));
                }
                Step::Loop => flow!(self.start_loop(&mut regs, memory, frames, pc, here)),
                Step::CallReg { dst } => {
                    flow!(self.call_reg(reg!(dst), &mut regs, memory, frames, pc, here));
                }
                Step::Exit => {
                    if frames.is_empty() {
                        break 'run Ok(regs[0]);
                    }
                    flow!(self.return_to_caller(&mut regs, memory, frames, here));
                }

                Step::LdxB { dst, src, off } => {
                    reg!(dst) = u64::from(u8::from_le_bytes(load!(1, addr!(src, off))));
                }
                Step::LdxH { dst, src, off } => {
                    reg!(dst) = u64::from(u16::from_le_bytes(load!(2, addr!(src, off))));
                }
                Step::LdxW { dst, src, off } => {
                    reg!(dst) = u64::from(u32::from_le_bytes(load!(4, addr!(src, off))));
                }
                Step::LdxDw { dst, src, off } => {
                    reg!(dst) = u64::from_le_bytes(load!(8, addr!(src, off)));
                }
                Step::LdxBSx { dst, src, off } => {
                    reg!(dst) = i64::from(i8::from_le_bytes(load!(1, addr!(src, off)))) as u64;
                }
                Step::LdxHSx { dst, src, off } => {
                    reg!(dst) = i64::from(i16::from_le_bytes(load!(2, addr!(src, off)))) as u64;
                }
                Step::LdxWSx { dst, src, off } => {
                    reg!(dst) = i64::from(i32::from_le_bytes(load!(4, addr!(src, off)))) as u64;
                }
                Step::StB { dst, off, imm } => store!(addr!(dst, off), (imm as u8).to_le_bytes()),
                Step::StH { dst, off, imm } => store!(addr!(dst, off), (imm as u16).to_le_bytes()),
                Step::StW { dst, off, imm } => store!(addr!(dst, off), (imm as u32).to_le_bytes()),
                Step::StDw { dst, off, imm } => store!(addr!(dst, off), imm.to_le_bytes()),
                Step::StxB { dst, src, off } => {
                    store!(addr!(dst, off), (reg!(src) as u8).to_le_bytes());
                }
                Step::StxH { dst, src, off } => {
                    store!(addr!(dst, off), (reg!(src) as u16).to_le_bytes());
                }
                Step::StxW { dst, src, off } => {
                    store!(addr!(dst, off), lo(reg!(src)).to_le_bytes());
                }
                Step::StxDw { dst, src, off } => store!(addr!(dst, off), reg!(src).to_le_bytes()),
                Step::Atomic64 { op, fetch, dst, src, off } => {
                    let addr = addr!(dst, off);
                    let (value, expected) = (reg!(src), reg!(0));
                    let old =
                        match memory.atomic(addr, 8, &mut |old| op.apply(old, value, expected)) {
                            Ok(old) => old,
                            Err(code) => break 'run Err(Trap::memory(code, here, addr, 8)),
                        };
                    if op == AtomicOp::CmpXchg {
                        reg!(0) = old;
                    } else if fetch {
                        reg!(src) = old;
                    }
                }
                Step::Atomic32 { op, fetch, dst, src, off } => {
                    let addr = addr!(dst, off);
                    let (value, expected) = (u64::from(lo(reg!(src))), u64::from(lo(reg!(0))));
                    let old = match memory.atomic(addr, 4, &mut |old| {
                        u64::from(op.apply(old, value, expected) as u32)
                    }) {
                        Ok(old) => old,
                        Err(code) => break 'run Err(Trap::memory(code, here, addr, 4)),
                    };
                    if op == AtomicOp::CmpXchg {
                        reg!(0) = old;
                    } else if fetch {
                        reg!(src) = old;
                    }
                }
                Step::Lddw { dst, imm } => {
                    reg!(dst) = imm;
                    pc = pc.wrapping_add(1);
                }
                Step::LdAbsB { imm } => legacy_load!(1, imm),
                Step::LdAbsH { imm } => legacy_load!(2, imm),
                Step::LdAbsW { imm } => legacy_load!(4, imm),
                Step::LdIndB { src, imm } => legacy_load!(1, ind_offset(reg!(src), imm)),
                Step::LdIndH { src, imm } => legacy_load!(2, ind_offset(reg!(src), imm)),
                Step::LdIndW { src, imm } => legacy_load!(4, ind_offset(reg!(src), imm)),

                Step::Fail { code, addr } => {
                    break 'run Err(Trap::memory(code, here, u64::from(addr), 0));
                }
                Step::FailAt { code, pc: at } => break 'run Err(Trap::new(code, at)),
                Step::Filler => {
                    break 'run Err(Trap::new(TrapCode::BadJump, here.saturating_sub(1)))
                }
            }
        };
        *executed = budget.wrapping_sub(remaining).wrapping_add(fused_exit);
        outcome
    }

    /// Calls helper `id` with `r1`-`r5`; `r0` gets its result and the run goes on at
    /// `next`, unless the helper stops the run or fails.
    #[inline(never)]
    fn call_helper(
        &self,
        id: u32,
        func: HelperFn,
        regs: &mut [u64; 16],
        memory: &mut Memory<'_>,
        next: usize,
        here: usize,
    ) -> Flow {
        let args = [regs[1], regs[2], regs[3], regs[4], regs[5]];
        let mut env = memory.env.take();
        let lent: Option<&mut dyn RunEnv> = match &mut env {
            Some(env) => Some(&mut **env),
            None => None,
        };
        let outcome = {
            let mut ctx = HelperCtx::new(&mut *memory, self.bindings.prog_type).with_env(lent);
            func(&mut ctx, &args)
        };
        memory.env = env;
        match outcome {
            HelperOutcome::Return(value) => {
                regs[0] = value;
                ControlFlow::Continue(next)
            }
            HelperOutcome::Stop(value) => ControlFlow::Break(Ok(value)),
            HelperOutcome::Fail => {
                let id = u64::from(id);
                ControlFlow::Break(Err(Trap::memory(TrapCode::HelperFailed, here, id, 0)))
            }
        }
    }

    /// A local call to `target`: saves `r6`-`r10` and the return slot `next`, then runs
    /// the callee in the next frame down.
    #[inline(never)]
    fn call_local(
        &self,
        target: usize,
        regs: &mut [u64; 16],
        memory: &mut Memory<'_>,
        frames: &mut Vec<Frame>,
        next: usize,
        here: usize,
    ) -> Flow {
        self.enter(target, next, callee_saved(regs), None, regs, memory, frames, here)
    }

    /// `bpf_loop`: `r0` the kernel's error for a bad count or flags, else the callback's
    /// first call.
    #[inline(never)]
    fn start_loop(
        &self,
        regs: &mut [u64; 16],
        memory: &mut Memory<'_>,
        frames: &mut Vec<Frame>,
        next: usize,
        here: usize,
    ) -> Flow {
        match bpf_loop::count(regs[1], regs[4]) {
            Err(result) => {
                regs[0] = result;
                ControlFlow::Continue(next)
            }
            Ok(count) => {
                let func = regs[2];
                let Some(callback) = guest::func_slot(func).filter(|&s| self.is_call_target(s))
                else {
                    let trap = Trap::memory(TrapCode::BadCallTarget, here, func, 0);
                    return ControlFlow::Break(Err(trap));
                };
                let looping = Looping { callback, index: 0, count, ctx: regs[3] };
                self.call_back(looping, next, callee_saved(regs), regs, memory, frames, here)
            }
        }
    }

    /// `callx`: `value` names a local function or a bound helper.
    #[inline(never)]
    fn call_reg(
        &self,
        value: u64,
        regs: &mut [u64; 16],
        memory: &mut Memory<'_>,
        frames: &mut Vec<Frame>,
        next: usize,
        here: usize,
    ) -> Flow {
        if let Some(slot) = guest::func_slot(value).filter(|&s| self.is_call_target(s)) {
            self.call_local(slot, regs, memory, frames, next, here)
        } else if let Some(helper) =
            u32::try_from(value).ok().and_then(|id| self.bindings.helper(id))
        {
            self.call_helper(helper.id, helper.func, regs, memory, next, here)
        } else {
            ControlFlow::Break(Err(Trap::memory(TrapCode::BadCallTarget, here, value, 0)))
        }
    }

    /// `exit` from a called frame (the caller checked there is one): restores the
    /// caller's `r6`-`r10` and returns to it, or, for a `bpf_loop` callback, calls it
    /// again or returns the count of calls from the helper.
    #[inline(never)]
    fn return_to_caller(
        &self,
        regs: &mut [u64; 16],
        memory: &mut Memory<'_>,
        frames: &mut Vec<Frame>,
        here: usize,
    ) -> Flow {
        let Some(frame) = frames.pop() else {
            return ControlFlow::Break(Ok(regs[0]));
        };
        let [r6, r7, r8, r9, r10] = frame.saved;
        regs[6] = r6;
        regs[7] = r7;
        regs[8] = r8;
        regs[9] = r9;
        regs[10] = r10;
        memory.set_stack_floor(self.frame_floor(frames.len()));
        if let Some(looping) = frame.looping {
            let calls = looping.index.saturating_add(1);
            if regs[0] != 0 || calls == looping.count {
                regs[0] = calls;
            } else {
                let next = Looping { index: calls, ..looping };
                return self.call_back(
                    next,
                    frame.return_pc,
                    frame.saved,
                    regs,
                    memory,
                    frames,
                    here,
                );
            }
        }
        ControlFlow::Continue(frame.return_pc)
    }

    /// The callback's call number `index` of a `bpf_loop`: r1 the index, r2 the context,
    /// r3-r5 zero, in a frame of its own that returns to `return_pc`.
    #[allow(clippy::too_many_arguments)]
    fn call_back(
        &self,
        looping: Looping,
        return_pc: usize,
        saved: [u64; 5],
        regs: &mut [u64; 16],
        memory: &mut Memory<'_>,
        frames: &mut Vec<Frame>,
        here: usize,
    ) -> Flow {
        regs[1] = looping.index;
        regs[2] = looping.ctx;
        regs[3] = 0;
        regs[4] = 0;
        regs[5] = 0;
        self.enter(looping.callback, return_pc, saved, Some(looping), regs, memory, frames, here)
    }

    /// Enters the function at `target` in the next frame down, `return_pc` and `saved`
    /// (the caller's `r6`-`r10`) kept for its `exit`; a call deeper than the frames trap.
    #[allow(clippy::too_many_arguments)]
    fn enter(
        &self,
        target: usize,
        return_pc: usize,
        saved: [u64; 5],
        looping: Option<Looping>,
        regs: &mut [u64; 16],
        memory: &mut Memory<'_>,
        frames: &mut Vec<Frame>,
        here: usize,
    ) -> Flow {
        // `frames` holds the callers; the running frame is one more.
        if frames.len().saturating_add(1) >= self.frames() {
            return ControlFlow::Break(Err(Trap::new(TrapCode::CallDepth, here)));
        }
        frames.push(Frame { return_pc, saved, looping });
        regs[10] = self.frame_top(frames.len());
        memory.set_stack_floor(self.frame_floor(frames.len()));
        ControlFlow::Continue(target)
    }
}
