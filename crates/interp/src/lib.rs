//! `weir-interp`: the reference eBPF interpreter, the oracle every other weir engine is
//! diffed with. It implements RFC 9669 exactly as `notes/common.md` pins it down, checks
//! every memory access at run time, and turns every failure into a [`Trap`], never a panic.
//!
//! The shape follows the usual engine quartet: a [`Config`], an immutable [`Interpreter`]
//! built once per program (it translates the program into a compact private form, so runs
//! do no decoding), a [`Cache`] holding the scratch space of runs (stack and call frames),
//! and run entry points taking an [`Input`].
//!
//! Programs see a virtual address space ([`guest`]): stack, context, packet and memory at
//! fixed bases below 4 GiB. No host pointer ever reaches a program.
//!
//! ```
//! use weir_isa::ebpf::{Insn, Op};
//! use weir_interp::{Config, Interpreter};
//! use weir_program::{abi::Bindings, ProgramBuilder};
//!
//! // r0 = the 32-bit word at mem[4] + 1
//! let mut b = ProgramBuilder::new();
//! b.push(Insn::new(Op::LdxW, 0, 1, 4, 0));
//! b.alu_imm(Op::Add64Imm, 0, 1);
//! b.exit();
//! let program = b.link().unwrap();
//!
//! let interp = Interpreter::new(&program, Bindings::conformance(), Config::default()).unwrap();
//! let mut cache = interp.cache();
//! let mut mem = [0, 0, 0, 0, 41, 0, 0, 0];
//! assert_eq!(interp.run_mem(&mut cache, &mut mem), Ok(42));
//!
//! // Reading past the end of `mem` is a trap that names the instruction and the address.
//! let trap = interp.run_mem(&mut cache, &mut mem[..6]).unwrap_err();
//! assert_eq!(trap.code, weir_program::TrapCode::OutOfBounds);
//! assert_eq!((trap.pc, trap.addr, trap.size), (0, weir_interp::guest::MEM_BASE + 4, 4));
//! ```
#![deny(clippy::arithmetic_side_effects)]
#![forbid(unsafe_code)]

mod alu;
mod exec;
pub mod guest;
mod memory;
mod step;
#[cfg(test)]
mod tests;

use std::ops::Range;

use weir_program::abi::{Bindings, FieldKind};
use weir_program::{validate, Program, Trap, TrapCode, ValidateError};

use crate::exec::Frame;
use crate::memory::Memory;
use crate::step::Step;

/// How an [`Interpreter`] runs programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Bytes of stack per frame (512, as in the kernel). The whole stack, `stack_size *
    /// max_call_depth`, is fitted into the stack's window ([`guest::REGION_WINDOW`]) by
    /// lowering the frame size, then the frame count, if it does not fit.
    pub stack_size: usize,
    /// Most frames alive at once, the entry frame included (8, as in the kernel). A local
    /// call that would exceed it traps with [`TrapCode::CallDepth`]; 0 is taken as 1.
    pub max_call_depth: usize,
    /// Most instructions one run may execute before it traps with
    /// [`TrapCode::InstructionBudget`].
    pub instruction_budget: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config { stack_size: 512, max_call_depth: 8, instruction_budget: 1 << 26 }
    }
}

/// The interpreter for one program: immutable, shareable between threads; each thread runs
/// it with its own [`Cache`].
#[derive(Clone, Debug)]
pub struct Interpreter {
    /// One step per slot, then the run-off-the-end sentinel and jump detours.
    code: Vec<Step>,
    /// Number of program slots (the steps that are instructions).
    slots: usize,
    bindings: Bindings,
    config: Config,
    /// Stack bytes per frame and frames, after fitting them into the stack window.
    stack_size: usize,
    frames: usize,
}

/// Scratch space for runs: the stack of every frame and the saved call frames. Make one
/// with [`Interpreter::cache`]; a cache made by another interpreter also works (it is
/// resized on first use).
#[derive(Clone, Debug)]
pub struct Cache {
    stack: Vec<u8>,
    /// The part of `stack` the last run wrote: all of the rest is still zero.
    stack_written: Range<usize>,
    frames: Vec<Frame>,
    executed: u64,
}

impl Cache {
    /// The stack region after the last run, all frames, lowest address first. Frame 0 (the
    /// entry function) is the last `stack_size` bytes, its `r10` at the end; each nested call
    /// takes the `stack_size` bytes below its caller's.
    /// Every run starts with it zeroed (only the span the previous run wrote needs it),
    /// so nothing one run leaves changes the next.
    pub fn stack(&self) -> &[u8] {
        &self.stack
    }

    /// Instructions the last run executed, the one that trapped included (after a budget
    /// trap: exactly the budget).
    pub fn executed(&self) -> u64 {
        self.executed
    }
}

/// What a run sees. `r1` at entry is the context's address if there is a context, else
/// the memory's (0 when that is absent or empty); `r2` is the length of what `r1` points at.
#[derive(Debug, Default)]
pub struct Input<'a> {
    /// The context (`struct __sk_buff`, `struct xdp_md`, ...). If the bindings carry a
    /// context layout, its packet fields are filled in before the run (see
    /// [`Interpreter::run`]).
    pub ctx: Option<&'a mut [u8]>,
    /// The packet, reachable through the context's packet fields and by the legacy
    /// `ldabs`/`ldind` loads.
    pub packet: Option<&'a mut [u8]>,
    /// Plain memory, the conformance suites' one buffer. When there is no packet, the
    /// legacy packet loads read it.
    pub mem: Option<&'a mut [u8]>,
}

impl<'a> Input<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn ctx(mut self, ctx: &'a mut [u8]) -> Self {
        self.ctx = Some(ctx);
        self
    }

    pub fn packet(mut self, packet: &'a mut [u8]) -> Self {
        self.packet = Some(packet);
        self
    }

    pub fn mem(mut self, mem: &'a mut [u8]) -> Self {
        self.mem = Some(mem);
        self
    }
}

/// A finished run: `r0` and how many instructions it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunOutcome {
    pub r0: u64,
    pub executed: u64,
}

impl Interpreter {
    /// Checks `program` with [`weir_program::validate`] and translates it once. Problems
    /// validation does not catch (a bad jump target, an unknown helper, a kfunc) become
    /// traps raised when, and only if, the run reaches them.
    pub fn new(
        program: &Program,
        bindings: Bindings,
        config: Config,
    ) -> Result<Interpreter, ValidateError> {
        validate(program)?;
        Ok(Self::new_unvalidated(program, bindings, config))
    }

    /// [`Interpreter::new`] without validation: the run-time checks alone keep a malformed
    /// program from doing harm. Tests use it to reach those checks.
    pub(crate) fn new_unvalidated(
        program: &Program,
        bindings: Bindings,
        config: Config,
    ) -> Interpreter {
        let code = step::translate(program, &bindings);
        // Fit the whole stack in its window; the defaults use a tiny part of it.
        let window = usize::try_from(guest::REGION_WINDOW).unwrap_or(usize::MAX);
        let stack_size = config.stack_size.min(window);
        let frames =
            config.max_call_depth.clamp(1, window.checked_div(stack_size).unwrap_or(window));
        Interpreter { code, slots: program.len(), bindings, config, stack_size, frames }
    }

    /// A fresh cache sized for this interpreter.
    pub fn cache(&self) -> Cache {
        Cache {
            stack: vec![0; self.stack_bytes()],
            stack_written: 0..0,
            frames: Vec::with_capacity(self.frames.min(64)),
            executed: 0,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }

    /// `r10` at entry: the top of frame 0.
    pub fn stack_top(&self) -> u64 {
        self.frame_top(0)
    }

    fn stack_bytes(&self) -> usize {
        // Cannot overflow: `frames * stack_size` was fitted into the stack window.
        self.stack_size.saturating_mul(self.frames)
    }

    /// The conformance convention: `r1` = address of `mem` (0 if it is empty), `r2` =
    /// `mem.len()`, `r10` = top of frame 0; returns `r0`. Legacy packet loads read `mem`.
    pub fn run_mem(&self, cache: &mut Cache, mem: &mut [u8]) -> Result<u64, Trap> {
        self.run(cache, Input::new().mem(mem))
    }

    /// Runs the program once; returns `r0`. See [`Input`] for what `r1` and `r2` hold.
    ///
    /// With a context and a context layout in the bindings, the layout's packet fields
    /// (`PacketStart`, `MetaStart`: the packet's guest address; `PacketEnd`: one past its
    /// end) are written into the caller's context bytes, little-endian, before the run.
    pub fn run(&self, cache: &mut Cache, input: Input<'_>) -> Result<u64, Trap> {
        self.run_stats(cache, input).map(|outcome| outcome.r0)
    }

    /// [`Interpreter::run`], also reporting the instructions executed.
    pub fn run_stats(&self, cache: &mut Cache, input: Input<'_>) -> Result<RunOutcome, Trap> {
        let Input { ctx, packet, mem } = input;
        let stack_bytes = self.stack_bytes();
        let written = std::mem::replace(&mut cache.stack_written, 0..0);
        if cache.stack.len() != stack_bytes {
            cache.stack = vec![0; stack_bytes];
        } else if let Some(dirty) = cache.stack.get_mut(written) {
            dirty.fill(0);
        } else {
            cache.stack.fill(0);
        }
        cache.frames.clear();
        cache.executed = 0;

        refuse_oversized(ctx.as_deref(), guest::CTX_BASE, guest::REGION_WINDOW)?;
        refuse_oversized(packet.as_deref(), guest::PACKET_BASE, guest::REGION_WINDOW)?;
        refuse_oversized(mem.as_deref(), guest::MEM_BASE, guest::REGION_WINDOW)?;

        let (r1, r2) = match (&ctx, &mem) {
            (Some(ctx), _) => (guest::CTX_BASE, ctx.len() as u64),
            (None, Some(mem)) if !mem.is_empty() => (guest::MEM_BASE, mem.len() as u64),
            _ => (0, 0),
        };
        let ctx = ctx.unwrap_or_default();
        let packet_len = packet.as_deref().map_or(0, <[u8]>::len);
        self.fill_packet_fields(ctx, packet_len)?;

        let Cache { stack, stack_written, frames, executed } = cache;
        let mut memory =
            Memory::new(stack, ctx, packet, mem.unwrap_or_default(), self.bindings.context);
        let result = self.execute(&mut memory, frames, r1, r2, executed);
        *stack_written = memory.stack_written();
        Ok(RunOutcome { r0: result?, executed: *executed })
    }

    /// Writes the packet's guest addresses into the context fields that hold them.
    fn fill_packet_fields(&self, ctx: &mut [u8], packet_len: usize) -> Result<(), Trap> {
        let Some(layout) = self.bindings.context else {
            return Ok(());
        };
        // Fits: the packet was checked against its window.
        let packet_end = guest::PACKET_BASE.saturating_add(packet_len as u64);
        for field in layout.fields {
            let value = match field.kind {
                FieldKind::PacketStart | FieldKind::MetaStart => guest::PACKET_BASE,
                FieldKind::PacketEnd => packet_end,
                FieldKind::Plain => continue,
            };
            let size = usize::try_from(field.size).unwrap_or(usize::MAX).min(8);
            let bytes = usize::try_from(field.offset)
                .ok()
                .and_then(|start| ctx.get_mut(start..start.checked_add(size)?));
            let Some(bytes) = bytes else {
                let addr = guest::CTX_BASE.saturating_add(u64::from(field.offset));
                return Err(Trap::memory(TrapCode::OutOfBounds, 0, addr, field.size));
            };
            bytes.copy_from_slice(value.to_le_bytes().get(..size).unwrap_or_default());
        }
        Ok(())
    }
}

/// A region longer than its window cannot be addressed whole: refuse it before running.
fn refuse_oversized(bytes: Option<&[u8]>, base: u64, window: u64) -> Result<(), Trap> {
    match bytes {
        Some(bytes) if bytes.len() as u64 > window => {
            let size = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            Err(Trap::memory(TrapCode::OutOfBounds, 0, base, size))
        }
        _ => Ok(()),
    }
}
