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
//! # Speed (issue 13: at most 3 ns per executed instruction)
//!
//! Measured with `weir-bench interp` (ns per instruction counted by [`Cache::executed`];
//! bench/records/2026-11-25-interp.txt) and `perf record`, before choosing:
//! - The dispatch loop was already a `match` over pre-decoded, fused compare-and-jump
//!   steps with validated targets; its profile is the fetch of one 16-byte step and the
//!   jump table. What cost more was around it: per run, walking every field of the context
//!   layout to find the three packet-address fields (a socket filter's `__sk_buff` has
//!   dozens), which dominated filters of 5-10 instructions; and per load, a chain of
//!   branches (window, stack or not, stack floor, region, range).
//! - So: the packet fields are picked out of the layout once, at [`Interpreter::new`]
//!   (weir-program's `PacketFields`, the JIT's too) and written at fixed widths; a run that wrote no stack zeroes none (no `memset` call); a load is
//!   one compare for the host-backed windows, the stack floor compare on the stack only,
//!   and the slice's own bounds check; legacy packet loads (most of a filter) are one step
//!   variant per size, reading a fixed-size array from a window chosen once per run.
//! - Tried and dropped: the loop as an out-of-line function (filters 6% slower), a
//!   per-window floor array in place of the stack test (no difference measured), the code
//!   padded to a power of two and fetched at `pc & mask` (pc then stays in a register:
//!   short filters about 1 ns faster, but two long compare chains 25-38% slower and the
//!   filters overall 3% slower; bench/records/2026-11-29-interp-3.txt).
//! - Result (one machine, two helpers' builds beside it): filters from 3.8 to 2.8 ns per
//!   instruction over all of them; the shortest (5-6 instructions) stay near 3.5-4 ns, the
//!   run's fixed cost (about 12 ns: the input checks, the packet fields, the register file)
//!   spread over few instructions; compute programs 1.7-1.9 ns (about 8% above the old loop,
//!   not explained yet: the step match's code layout moved).
//! - Every check stays: no `unsafe`, every access checked against its region, traps and
//!   the instruction budget exact (counted per dispatched step, as before).
//! - The per-run cost (bench/records/2026-11-29-interp-2.txt; `examples/per_run.rs` times
//!   short programs alone, for `perf`): a two-instruction run is about 280 machine
//!   instructions, ~35 per dispatched step and the rest set-up spread thinly (stack reset
//!   check, input sizes, packet fields, region slices, register file, result); no stack
//!   zeroing, no allocation. One compare for the input sizes, precomputed packet-field
//!   writes and frame 0's stack values kept here took it from 321 to 278 and a two-
//!   instruction run from 17.8 to 15.9 ns (about 1 ns on the shortest filters).
//! - Then (bench/records/2026-11-29-interp-5.txt; machine instructions counted by single-
//!   stepping one run in gdb, the VM has no hardware counters): the input taken apart once
//!   (one compare for its sizes, `r1`/`r2` and the legacy loads' source from the same
//!   fields) and the three 4-byte packet fields every layout has written straight-line, the
//!   span checked only when there is one: a two-instruction run 288 -> 275, `ip` 445 -> 425.
//! - The dispatch (same record): the loop copied each step out of the code (`Some(&step)`),
//!   and the compiler split the copy into a dozen loads and shifts ahead of the jump, with
//!   `pc` and the code's base and length spilled to the stack: about 37 machine
//!   instructions a step. Matching on the borrowed step lets each arm load only its own
//!   fields; the loop head is 14 instructions with `pc`, the code's base and length and the
//!   budget in registers: a two-instruction run 275 -> 246, `ip` 425 -> 342, `port 22`
//!   (examples/per_run.rs) 41 -> 27 ns. (A `repr(u8)` step layout, each field at one
//!   offset, had not changed the copy's split: tried and dropped.)
//! - The lean entry (bench/records/2026-11-29-interp-8.txt): a run over a context and a
//!   packet alone, a socket filter's, is chosen inside the inline [`Interpreter::run_stats`]
//!   (a caller building its `Input` beside the call has it chosen at compile time) and
//!   set up with only what depends on the packet: one compare for the sizes and the
//!   context's room, the packet fields from the packet's length by a mask per field
//!   (`PacketFields::fill_whole`), the stack reset only if the last run wrote some of it,
//!   no environment, memory or span to take apart. Same checks, same loop: a proptest diffs
//!   it with the general path. `greater 1000` 17.7 -> 14.5 ns, `ip` 18.5 -> 14.8, a
//!   two-instruction run 13.6 -> 10.9 (examples/per_run.rs).
//! - The fixed cost again (bench/records/2026-12-02-interp-11.txt; instructions a run
//!   counted by callgrind over `examples/per_run.rs`): the compiler had hoisted what only
//!   calls read (the helper table, the frame shape, the program type) into stack slots
//!   loaded before every run's first step, so calls, callx, `bpf_loop` and a called frame's
//!   `exit` now run out of the loop; on the lean entry, `mov r, K; exit`, the end of nearly
//!   every filter, is one step (`Step::SetThenExit`) when it ends the run, and a program
//!   whose jumps all go forward and which calls nothing runs each step at most once, so with
//!   no more steps than the budget its loop skips the budget test (the count is kept; the
//!   general path keeps the plain loop, which the compute programs take); the packet fields' offsets
//!   are `u32`s (one compare each). `less 128` 251 -> 217 machine instructions a run, `arp`
//!   263 -> 231, `port 22` 397 -> 357; about 5-10% off a short filter's time.
//!
//! ```
//! use weir_isa::ebpf::{Insn, Op};
//! use weir_interp::{Config, Interpreter};
//! use weir_program::{abi::Bindings, ProgramBuilder, Verified};
//!
//! // r0 = the 32-bit word at mem[4] + 1
//! let mut b = ProgramBuilder::new();
//! b.push(Insn::new(Op::LdxW, 0, 1, 4, 0));
//! b.alu_imm(Op::Add64Imm, 0, 1);
//! b.exit();
//! let program = b.link().unwrap();
//!
//! let program = Verified::structural(program).unwrap();
//! let interp = Interpreter::new(&program, Bindings::conformance(), Config::default());
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

mod exec;
mod memory;
mod step;
#[cfg(test)]
mod tests;

use std::ops::Range;

use weir_program::abi::Bindings;
pub use weir_program::exec::guest;
use weir_program::exec::{Engine, PacketFields, PrepareError, Prepared, StackShape};
pub use weir_program::exec::{Input, RunOutcome};
use weir_program::{Program, Trap, Verified};

use crate::exec::Frame;
use crate::memory::Memory;
use crate::step::Step;

/// How an [`Interpreter`] runs programs: the limits every engine shares (stack per frame,
/// call depth, instruction budget), with the kernel's defaults.
pub type Config = weir_program::exec::Limits;

/// The interpreter as an [`Engine`]: what tables of engines hold.
#[derive(Clone, Copy, Debug, Default)]
pub struct Interp;

impl Engine for Interp {
    type Prepared = Interpreter;

    fn name(&self) -> &'static str {
        "interp"
    }

    fn prepare(
        &self,
        program: &Verified,
        bindings: Bindings,
        limits: Config,
    ) -> Result<Interpreter, PrepareError> {
        Ok(Interpreter::new(program, bindings, limits))
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
    shape: StackShape,
    /// The context layout's packet fields (its other fields are skipped per run): a
    /// socket filter's `__sk_buff` has dozens of fields and three that hold packet
    /// addresses, and walking all of them was a measurable share of a short filter's run.
    packet_fields: PacketFields,
    /// The stack's size in bytes and frame 0's `r10` and floor, worked out once (every run
    /// starts with them; issue 13 counts a short filter's set-up by the instruction).
    stack_bytes: usize,
    entry_top: u64,
    entry_floor: usize,
    /// Whether no run can reach the instruction budget: each step runs at most once
    /// (`step::forward_only`) and there are no more steps than the budget. Filters are all
    /// such programs; the lean entry's loop then skips the budget test of every step
    /// (issue 13).
    budget_free: bool,
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

    /// Zeroes the stack the last run wrote, or makes it `bytes` long and all zero: every run
    /// starts from a zeroed stack.
    #[inline]
    fn reset_stack(&mut self, bytes: usize) {
        let written = std::mem::replace(&mut self.stack_written, 0..0);
        if self.stack.len() != bytes {
            self.stack = vec![0; bytes];
        } else if let Some(dirty) = self.stack.get_mut(written) {
            // Most filters never write the stack: skip the `memset` call for nothing.
            if !dirty.is_empty() {
                dirty.fill(0);
            }
        } else {
            self.stack.fill(0);
        }
    }

    /// [`Cache::reset_stack`] out of line, for the lean entry, which tests first whether
    /// there is anything to do (most filters never write the stack).
    #[cold]
    #[inline(never)]
    fn reset_stack_cold(&mut self, bytes: usize) {
        self.reset_stack(bytes);
    }

    /// Instructions the last run executed, the one that trapped included (after a budget
    /// trap: exactly the budget).
    pub fn executed(&self) -> u64 {
        self.executed
    }
}

impl Interpreter {
    /// Translates a verified program once. Problems the check did not rule out (an unknown
    /// helper, a kfunc, a map reference) become traps raised when, and only if, the run
    /// reaches them.
    pub fn new(program: &Verified, bindings: Bindings, config: Config) -> Interpreter {
        Self::new_unvalidated(program, bindings, config)
    }

    /// [`Interpreter::new`] without validation: the run-time checks alone keep a malformed
    /// program from doing harm. Tests use it to reach those checks.
    pub(crate) fn new_unvalidated(
        program: &Program,
        bindings: Bindings,
        config: Config,
    ) -> Interpreter {
        let code = step::translate(program, &bindings);
        let shape = StackShape::fit(&config);
        let packet_fields = PacketFields::of(bindings.context);
        let budget_free = step::forward_only(program.insns(), &code)
            && u64::try_from(code.len()).is_ok_and(|steps| steps <= config.instruction_budget);
        // Fits: the shape was fitted into the stack window.
        let (stack_bytes, entry_floor) = (shape.bytes() as usize, shape.frame_floor(0) as usize);
        Interpreter {
            code,
            slots: program.len(),
            bindings,
            config,
            shape,
            packet_fields,
            stack_bytes,
            entry_top: shape.frame_top(0),
            entry_floor,
            budget_free,
        }
    }

    /// A fresh cache sized for this interpreter.
    pub fn cache(&self) -> Cache {
        Cache {
            stack: vec![0; self.stack_bytes()],
            stack_written: 0..0,
            frames: Vec::with_capacity(self.frames().min(64)),
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
        self.shape.frame_top(0)
    }

    fn stack_bytes(&self) -> usize {
        self.stack_bytes
    }

    /// Frames of stack (after fitting).
    fn frames(&self) -> usize {
        self.shape.frames as usize
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
    #[inline]
    pub fn run(&self, cache: &mut Cache, input: Input<'_>) -> Result<u64, Trap> {
        self.run_stats(cache, input).map(|outcome| outcome.r0)
    }

    /// [`Interpreter::run`], also reporting the instructions executed.
    ///
    /// A run over a context and a packet alone (a socket filter's, the usual one) takes
    /// [`Interpreter::run_lean`]; this is inline so that a caller building its [`Input`]
    /// beside the call has that choice made by the compiler.
    #[inline]
    pub fn run_stats(&self, cache: &mut Cache, input: Input<'_>) -> Result<RunOutcome, Trap> {
        match input {
            Input { ctx: Some(ctx), packet: Some(packet), mem: None, span: None, env: None } => {
                self.run_lean(cache, ctx, packet)
            }
            input => self.run_general(cache, input),
        }
    }

    /// [`Interpreter::run_observed`] observing nothing, out of line: one copy of the general
    /// path in this crate, however many callers inline [`Interpreter::run_stats`].
    #[inline(never)]
    fn run_general(&self, cache: &mut Cache, input: Input<'_>) -> Result<RunOutcome, Trap> {
        self.run_observed(cache, input, |_, _| {})
    }

    /// The lean entry (issue 13): a run over one packet and its context, no memory, no span,
    /// no environment. It does what [`Interpreter::run_observed`] does for that input, the
    /// same checks and the same results, with the per-run set-up cut to what depends on the
    /// packet: the sizes (one compare, with the context's room for the packet fields), the
    /// packet fields written straight from the packet's length (`PacketFields::fill_whole`),
    /// the stack reset only when the last run wrote some of it, `r1` and `r2`, and the
    /// region table. Anything outside that (a context too short, a layout of another shape)
    /// goes the general way, which names the trap.
    #[inline(never)]
    fn run_lean(
        &self,
        cache: &mut Cache,
        ctx: &mut [u8],
        packet: &mut [u8],
    ) -> Result<RunOutcome, Trap> {
        let ctx_len = ctx.len();
        if (ctx_len | packet.len()) as u64 > guest::REGION_WINDOW
            || ctx_len < self.packet_fields.context_end()
            || !self.packet_fields.fill_whole(ctx, packet.len())
        {
            return self.run_general(cache, Input::new().ctx(ctx).packet(packet));
        }
        if cache.stack.len() != self.stack_bytes || !cache.stack_written.is_empty() {
            cache.reset_stack_cold(self.stack_bytes);
        }
        let Cache { stack, stack_written, frames, executed } = cache;
        frames.clear();
        let layout = self.bindings.context;
        let mut memory = Memory::new(stack, ctx, packet, true, &mut [], layout, None);
        let r2 = ctx_len as u64;
        let result = self.execute::<_, true>(
            &mut memory,
            frames,
            guest::CTX_BASE,
            r2,
            executed,
            &mut |_, _| {},
        );
        *stack_written = memory.stack_written();
        Ok(RunOutcome { r0: result?, executed: *executed })
    }

    /// [`Interpreter::run_stats`], calling `observe` with the slot and the registers
    /// (indexed by register number; r0-r10 meaningful) before every instruction: how tests
    /// compare a concrete run with what the verifier proved at each instruction.
    pub fn run_observed(
        &self,
        cache: &mut Cache,
        mut input: Input<'_>,
        mut observe: impl FnMut(usize, &[u64; 16]),
    ) -> Result<RunOutcome, Trap> {
        cache.reset_stack(self.stack_bytes());
        cache.frames.clear();
        cache.executed = 0;

        // Read the environment's data pointer first and the whole fat pointer only if it is
        // there: callers build `Input` just before the call, and `None` is one 8-byte store
        // of its data pointer, so the 16-byte load a plain move compiles to could not be
        // forwarded from the store buffer and waited for the store to commit. perf put about
        // 40% of a two-instruction program's run on that load (examples/per_run.rs).
        let env = if input.env.is_some() { lend_env(&mut input.env) } else { None };
        // The input taken apart once: its lengths checked by one compare, `r1`/`r2` and the
        // legacy loads' source decided from the same fields (issue 13: `check_sizes`,
        // `entry_args` and the regions each unpacked the three options again).
        let Input { ctx, packet, mem, span, env: _ } = input;
        let has_ctx = ctx.is_some();
        let has_packet = packet.is_some();
        let (ctx, packet, mem) =
            (ctx.unwrap_or_default(), packet.unwrap_or_default(), mem.unwrap_or_default());
        if (ctx.len() | packet.len() | mem.len()) as u64 > guest::REGION_WINDOW {
            return Err(oversized(ctx, packet, mem));
        }
        let (r1, r2) = if has_ctx {
            (guest::CTX_BASE, ctx.len() as u64)
        } else if !mem.is_empty() {
            (guest::MEM_BASE, mem.len() as u64)
        } else {
            (0, 0)
        };
        self.packet_fields.fill(ctx, packet.len(), span)?;

        let Cache { stack, stack_written, frames, executed } = cache;
        // Shortened to the run's borrows (the object's lifetime bound with them).
        let env = env.map(|env| -> &mut dyn weir_program::abi::RunEnv { env });
        let mut memory =
            Memory::new(stack, ctx, packet, has_packet, mem, self.bindings.context, env);
        let result = self.execute::<_, false>(&mut memory, frames, r1, r2, executed, &mut observe);
        *stack_written = memory.stack_written();
        Ok(RunOutcome { r0: result?, executed: *executed })
    }
}

/// The trap for a region longer than its window (the caller checked that one is).
#[cold]
#[inline(never)]
fn oversized(ctx: &mut [u8], packet: &mut [u8], mem: &mut [u8]) -> Trap {
    let input = Input::new().ctx(ctx).packet(packet).mem(mem);
    input.check_sizes().err().unwrap_or(Trap::new(weir_program::TrapCode::OutOfBounds, 0))
}

/// Takes the run's environment out of its `Input` (see [`Interpreter::run_observed`]): kept
/// out of line so that the compiler cannot merge it with the `None` path into one 16-byte
/// load of the fat pointer.
#[inline(never)]
fn lend_env<'a>(
    env: &mut Option<&'a mut dyn weir_program::abi::RunEnv>,
) -> Option<&'a mut dyn weir_program::abi::RunEnv> {
    env.take()
}

impl Prepared for Interpreter {
    type Cache = Cache;

    fn cache(&self) -> Cache {
        Interpreter::cache(self)
    }

    #[inline]
    fn run(&self, cache: &mut Cache, input: Input<'_>) -> Result<RunOutcome, Trap> {
        self.run_stats(cache, input)
    }

    fn stack<'c>(&self, cache: &'c Cache) -> &'c [u8] {
        cache.stack()
    }

    fn stack_top(&self) -> u64 {
        Interpreter::stack_top(self)
    }
}
