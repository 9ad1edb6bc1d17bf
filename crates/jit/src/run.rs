//! Compiled programs and their runs: [`JitProgram`] (code plus what a run needs to know),
//! [`Cache`] (one thread's stack and frame area), [`Input`], and the translation of the
//! run state the generated code leaves behind into `Result<RunOutcome, Trap>`.
//!
//! Before a run, the region table is filled from the input's slices and the cache; the
//! generated code then owns those bytes until it returns. Afterwards, only the part of the
//! stack the run could have written (the frames down to the deepest one reached) is zeroed
//! before the next run, so that every run starts from a zeroed stack as in the interpreter.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::{Bindings, RunEnv};
use weir_program::exec::guest::{MEM_BASE, PACKET_BASE, REGION_WINDOW};
use weir_program::exec::{run_each, Batch, DataEndWord, Input, PacketFields, Prepared, RunOutcome};
use weir_program::{Assurance, Program, Region, Trap, TrapCode, Verified};

use crate::cfg::Cfg;
use crate::code_memory::{Exit, NativeCode};
use crate::codegen::facts::{Checks, Needs, Plan};
use crate::codegen::{self, StackShape};
use crate::guest::{CTX, MEM, PACKET, STACK, STACK_BASE};
use crate::state::{
    DirectSlot, RunState, EXIT_BUDGET, EXIT_HELPER, FRAME_WORDS, HELPER_FAILED, HELPER_PANICKED,
    HELPER_STOPPED, HELPER_UNBOUND,
};
use crate::{CompileError, CompileErrorKind, Config};

/// A compiled program: immutable, shareable between threads; each thread runs it with its
/// own [`Cache`].
pub struct JitProgram {
    code: NativeCode,
    /// The checks the verifier's facts dropped, and what a run must offer for them to hold
    /// (`None`: nothing dropped).
    checks: Checks,
    needs: Option<Needs>,
    /// The same program with every check, compiled on the first run that does not meet
    /// `needs` (a context or memory smaller than the proof assumed).
    checked: OnceLock<Result<Box<JitProgram>, CompileError>>,
    /// The program, to locate budget traps (see `RunState::remaining`).
    insns: Vec<Insn>,
    /// One byte per slot: 1 where `call %reg` may enter (every instruction, no `lddw` filler).
    call_targets: Vec<u8>,
    bindings: Bindings,
    config: Config,
    shape: StackShape,
    /// The blinding key (0 without blinding; generated code then never reads it).
    key: u64,
    /// The context layout's packet fields, listed at compile time (a run writes them
    /// without walking the layout).
    packet_fields: PacketFields,
    /// How many bytes below frame 0's top any run can write (`stack_reach`; proven
    /// programs without local calls): only those are zeroed after a run. `None`: the
    /// frames down to the deepest one a run reached, whole.
    stack_low: Option<u64>,
    /// For lean code under a proof that says which of frame 0's bytes a run may observe
    /// before writing them (`Facts::stack_observed`): how many bytes below frame 0's top
    /// reach down to the deepest such byte (0: none). `run_lean` then zeroes only those
    /// (and what an earlier run left outside `stack_low`), not all a run wrote.
    observed_depth: Option<usize>,
    /// Code that is not lean, budget-free, under a proof that no run observes a byte of
    /// the stack it starts with (`Facts::stack_observed` empty; xdp_counter): a run may
    /// start from what this program's earlier runs left, all else zero, and give the
    /// zeroed-stack results (its bytes, at any end, are its own writes over zeros). A lent
    /// batch's steady frames then skip the stack's zeroing (`run_lent_full_steady`).
    starts_on_own_stack: bool,
    /// Whether a run may write the stack at all (a store, an atomic, a helper or a local
    /// call); when not, the stack stays zero and needs no clearing between runs.
    writes_stack: bool,
    /// The code makes local calls or runs callbacks (`Cfg::has_calls`): only such code
    /// goes below frame 0 and writes `RunState::max_depth` (`codegen`'s `store_max_depth`).
    has_calls: bool,
    /// The code touches no run state but a few words (`Plan::self_contained`): runs take
    /// [`JitProgram::run_lean`].
    lean: bool,
    /// This compiled program's identity among all compiled in the process (never 0, never
    /// reused): what a [`Cache`] names as the program whose runs wrote its stack
    /// (`Cache::owner`).
    id: u64,
    /// The code cannot write the packet region without a check: no store or atomic into
    /// it is unchecked (`Plan::direct`), and no legacy load reads through a view of it.
    /// Its batches may run over frames lent read-only ([`Batch::lend`]): every checked
    /// store, and every helper's write, into a read-only region is refused.
    lendable: bool,
    /// What [`JitProgram::lean_fire`] would otherwise work out on every run, from fields
    /// that stay fixed once compiled (see [`LeanSizes`]).
    sizes: LeanSizes,
    /// The shortest memory `run_mem` runs straight through `lean_fire`: the proof's
    /// memory length when the code is lean, needs memory alone and has no context
    /// (`lean_mem_from`); `u64::MAX` otherwise, so one compare decides.
    lean_mem_from: u64,
}

/// The sizes a lean run tests and sets, computed once at compile time: a lean run of a
/// short program (bench/records/2026-11-29-jit-8.txt, stack-copy) spent a fifth of its
/// time outside the generated code, partly on these overflow-checked multiplications.
#[derive(Clone, Copy, Debug, Default)]
struct LeanSizes {
    /// `stack_bytes()` and `frame_words()`: the cache's sizes for this program.
    stack_bytes: usize,
    frame_words: usize,
    /// `lean_written_from(stack_bytes)`: where in a sized stack a lean run may write from.
    written_from: usize,
    /// `stack_bytes - observed_depth` (saturating): the lowest observed byte.
    observed_from: Option<usize>,
    /// `budget()`.
    budget: u64,
    /// The deepest frame whose stack a full run may have written (`fire_bound` caps the
    /// reported `max_depth` with it): `shape.frames - 1`, or 0 for code that never writes
    /// the stack, whose runs leave it clean at any depth, and for code without calls,
    /// which never leaves frame 0 (then `max_depth` is not read: xdp_counter's lent frame,
    /// bench/records/2026-11-30-runtime-26.txt).
    deepest: u64,
    /// What a lean run zeroes when the stack is clean below `written_from`: the observed
    /// slots' lowest byte, or without that list all a run may write (`written_from`;
    /// the stack's length for code that never writes it: nothing).
    steady_from: usize,
}

impl std::fmt::Debug for JitProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitProgram")
            .field("slots", &self.insns.len())
            .field("code_bytes", &self.code.bytes().len())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What a lent batch set up once ([`JitProgram::lean_steady`], [`JitProgram::full_steady`])
/// over the batch's one context (`Batch::lend` hands frames only): whether its words
/// still stand.
struct LentSteady {
    armed: bool,
    /// Code that is not lean: the environment (`env_address`; 0: none) the run state's
    /// direct-lookup words stand for (`JitProgram::bind_direct`). Bound, not a sentinel,
    /// at the batch's start (`full_steady` binds none, 0), so a frame compares one word
    /// (issue 11: an `Option` compare was 4 instructions a lent frame, 2 this way,
    /// bench/records/2026-12-01-runtime-32.txt).
    env: usize,
}

impl LentSteady {
    /// Whether a frame takes the steady path: still armed, no longer than the packet
    /// window. Any other frame disarms it: the rest of the batch takes `run_lent`, which
    /// rewrites the words the steady path relies on. The context needs no test: it is the
    /// batch's own, held by the engine's closure for the whole batch.
    #[inline(always)]
    fn admits(&mut self, frame: &[u8]) -> bool {
        if self.armed && frame.len() as u64 <= REGION_WINDOW {
            return true;
        }
        self.armed = false;
        false
    }
}

/// Scratch space for runs: the stack of every frame, the saved call frames and the run
/// state generated code works on.
#[derive(Clone, Debug, Default)]
pub struct Cache {
    stack: Vec<u8>,
    frames: Vec<u64>,
    /// Offset from which the stack may hold bytes a run wrote; all below is zero.
    dirty_from: usize,
    /// The program (`JitProgram::id`; 0: none) whose runs alone wrote what the stack holds
    /// since it was last zeroed from `dirty_from`. A lean run zeroes only the bytes its
    /// program's runs may observe (`lean_fire`'s steady case) when it is that program:
    /// another's bytes may lie in slots this one never writes though they sit between
    /// ones it does (below `dirty_from`'s answer for it is not enough).
    owner: u64,
    executed: u64,
    state: KeptState,
}

/// The run state kept between runs, so that a run writes the few words of it that change
/// (the input's region entries, the entry registers, the outcome) instead of building the
/// kilobyte-long region table afresh. Entries of windows that hold no input (0, 5, 6, 7)
/// stay empty from its creation on.
#[derive(Default)]
struct KeptState(Option<Box<RunState<'static>>>);

impl Clone for KeptState {
    /// A fresh one: the kept state points into its own cache's stack.
    fn clone(&self) -> Self {
        KeptState(None)
    }
}

impl std::fmt::Debug for KeptState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "KeptState(..)" } else { "KeptState(None)" })
    }
}

// SAFETY: between runs the kept state's pointers (bindings, the environment: `None`
// then) are never dereferenced; every run sets all of them, on the thread running it,
// before generated code or a helper reads them, and clears the environment afterwards.
unsafe impl Send for KeptState {}

impl KeptState {
    #[inline]
    fn get(&mut self) -> &mut RunState<'static> {
        match self.0 {
            Some(ref mut run) => run,
            None => self.make(),
        }
    }

    /// The first run's state, built out of line: built inline, its kilobyte of table
    /// took a frame that size in every caller (`run_mem`, which is inlined into loops).
    #[cold]
    #[inline(never)]
    fn make(&mut self) -> &mut RunState<'static> {
        self.0.insert(Box::new(RunState::empty()))
    }
}

impl Cache {
    /// The stack after the last run, all frames, lowest address first: frame 0 (the entry
    /// function) is the last `stack_size` bytes, as in the interpreter.
    pub fn stack(&self) -> &[u8] {
        &self.stack
    }

    /// Instructions the last run executed, the one that trapped included (after a budget
    /// trap: exactly the budget).
    pub fn executed(&self) -> u64 {
        self.executed
    }
}

/// A key no one can predict: std's hasher keys come from the OS's random source.
fn random_key() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0x5745_4952); // any input: the randomness is in the hasher's keys
    hasher.finish()
}

impl JitProgram {
    /// Compiles a verified program (see [`crate::Jit::compile`]), dropping the checks its
    /// facts make redundant (`codegen::facts`).
    pub(crate) fn compile(
        program: &Verified,
        bindings: Bindings,
        config: Config,
    ) -> Result<JitProgram, CompileError> {
        let shape = StackShape::fit(&config.limits);
        let mut plan = Plan::new(program, &bindings, shape, config.limits.instruction_budget);
        plan.unroll = config.unroll;
        plan.wide_copy = config.wide_copy;
        // Only a proof rules out stack pointers made from scalars (see `stack_reach`).
        let stack_low = match program.assurance() {
            Assurance::Proven => {
                crate::stack_reach::lowest_write(program.insns(), shape.stack_size)
            }
            _ => None,
        };
        let observed = program.facts().and_then(|facts| facts.stack_observed.as_deref());
        // How deep the deepest byte a run may observe lies (bit i: the byte at fp-(i+1)).
        let observed_depth = observed.map(|bits| {
            let deepest = bits.iter().enumerate().rev().find(|(_, &word)| word != 0);
            deepest.map_or(0, |(i, &word)| i * 64 + 64 - word.leading_zeros() as usize)
        });
        let lean = plan.self_contained;
        let budget_free = plan.budget_free;
        // Every store into a region the proof names, not the packet (xdp_counter's: the
        // stack, a map value): none is refused over a frame lent read-only (a refused store
        // traps where the fact does not count a run's end; `Batch::lends` rules them out
        // too, as `weir`'s `leaves_packet` does).
        let stores_off_packet = program.facts().is_some_and(|facts| {
            program.insns().iter().enumerate().all(|(pc, insn)| {
                use weir_isa::ebpf::Operands;
                let fact = facts.get(pc);
                let store = matches!(
                    insn.op.spec().map(|s| s.operands),
                    Some(Operands::StoreImm | Operands::StoreReg)
                );
                !store || !fact.reached || fact.region.is_some_and(|r| r != Region::Packet)
            })
        });
        let mut jit = JitProgram::compile_with(program, bindings, config, plan)?;
        jit.stack_low = stack_low.map(i64::unsigned_abs);
        // Lean code traps never (it is budget-free and checks nothing), so every run ends
        // at an exit, where the fact speaks of the stack it leaves. Code that never writes
        // the stack keeps it clean without the fact.
        if lean && jit.writes_stack {
            jit.observed_depth = observed_depth;
        }
        // Full code may end elsewhere than at an exit too: a helper call, a map value
        // access (the fact counts both as ends); not at a budget trap (budget-free), nor at
        // a refused store (none into the packet).
        jit.starts_on_own_stack =
            !lean && budget_free && stores_off_packet && observed_depth == Some(0);
        jit.sizes = jit.lean_sizes();
        Ok(jit)
    }

    /// Compiles `program` with every check kept.
    fn compile_checked(
        program: &Program,
        bindings: Bindings,
        config: Config,
    ) -> Result<JitProgram, CompileError> {
        let plan = Plan::checked(program.insns(), StackShape::fit(&config.limits));
        JitProgram::compile_with(program, bindings, config, plan)
    }

    fn compile_with(
        program: &Program,
        bindings: Bindings,
        config: Config,
        plan: Plan,
    ) -> Result<JitProgram, CompileError> {
        if program.len() > config.max_slots {
            let kind =
                CompileErrorKind::TooManySlots { slots: program.len(), limit: config.max_slots };
            return Err(CompileError::new(0, kind));
        }
        let insns = program.insns().to_vec();
        let cfg = Cfg::build(&insns, &bindings)?;
        let shape = StackShape::fit(&config.limits);
        let key = if config.blinding { random_key() } else { 0 };
        let optimize = insns.len() <= crate::OPTIMIZE_MAX_SLOTS;
        let code = NativeCode::compile(optimize, |func, abi| {
            let key = config.blinding.then_some(key);
            let budget = JitProgram::budget_of(&config);
            codegen::translate(func, abi, &insns, &bindings, &cfg, shape, key, budget, &plan)
        })?;
        let call_targets = insns.iter().map(|i| u8::from(i.op != Op::LddwHigh)).collect();
        let writes_stack = insns.iter().any(|i| {
            use weir_isa::ebpf::Operands;
            matches!(
                i.op.spec().map(|s| s.operands),
                Some(
                    Operands::StoreImm
                        | Operands::StoreReg
                        | Operands::CallImm
                        | Operands::CallLocal
                        | Operands::CallReg
                )
            )
        });
        let lendable = insns.iter().enumerate().all(|(pc, insn)| {
            use weir_isa::ebpf::Operands;
            match insn.op.spec().map(|s| s.operands) {
                Some(Operands::StoreImm | Operands::StoreReg) => plan.direct(pc) != Some(PACKET),
                Some(Operands::Abs | Operands::Ind) => false,
                _ => true,
            }
        });
        // Any distinct numbers do: a counter, from 1 (0 is a cache's "no program").
        static COMPILED: AtomicU64 = AtomicU64::new(1);
        let mut jit = JitProgram {
            id: COMPILED.fetch_add(1, Ordering::Relaxed),
            sizes: LeanSizes::default(),
            lean_mem_from: u64::MAX,
            lendable,
            stack_low: None,
            observed_depth: None,
            starts_on_own_stack: false,
            packet_fields: PacketFields::of(bindings.context),
            writes_stack,
            has_calls: cfg.has_calls,
            lean: plan.self_contained,
            code,
            checks: plan.checks,
            needs: plan.needs,
            checked: OnceLock::new(),
            insns,
            call_targets,
            bindings,
            config,
            shape,
            key,
        };
        jit.sizes = jit.lean_sizes();
        jit.lean_mem_from = jit.lean_mem_from();
        Ok(jit)
    }

    /// The shortest memory [`JitProgram::run_mem`] sends straight to `lean_fire`
    /// (`u64::MAX`: none).
    fn lean_mem_from(&self) -> u64 {
        match (self.lean, self.needs, &self.bindings.context) {
            (true, Some(Needs::Memory(len)), None) => len,
            _ => u64::MAX,
        }
    }

    /// [`LeanSizes`] from the fields as they stand (to be set again when one changes).
    fn lean_sizes(&self) -> LeanSizes {
        let stack_bytes = self.stack_bytes();
        let written_from = self.lean_written_from(stack_bytes);
        let observed_from = self.observed_depth.map(|depth| stack_bytes.saturating_sub(depth));
        LeanSizes {
            stack_bytes,
            frame_words: self.frame_words(),
            written_from,
            observed_from,
            budget: self.budget(),
            deepest: if self.writes_stack && self.has_calls {
                self.shape.frames.saturating_sub(1)
            } else {
                0
            },
            steady_from: observed_from.map_or(written_from, |from| from.max(written_from)),
        }
    }

    /// How many checks the compiled code kept and dropped.
    pub fn checks(&self) -> Checks {
        self.checks
    }

    /// The checked twin of this program, compiled once on first need.
    fn checked_twin(&self) -> Result<&JitProgram, Trap> {
        let twin = self.checked.get_or_init(|| {
            let program = Program::from_insns(self.insns.clone());
            JitProgram::compile_checked(&program, self.bindings.clone(), self.config).map(Box::new)
        });
        // It compiled once with more code elided; failing now would be Cranelift's own
        // limit, reported as the run's failure at its start.
        twin.as_deref().map_err(|_| Trap::new(TrapCode::Unsupported, 0))
    }

    /// A fresh cache sized for this program.
    pub fn cache(&self) -> Cache {
        let stack = vec![0; self.stack_bytes()];
        let dirty_from = stack.len();
        let frames = vec![0; self.frame_words()];
        let state = KeptState::default();
        Cache { stack, frames, dirty_from, owner: self.id, executed: 0, state }
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

    /// The generated machine code, as mapped for execution (read-only, executable).
    pub fn machine_code(&self) -> &[u8] {
        self.code.bytes()
    }

    #[inline]
    fn stack_bytes(&self) -> usize {
        usize::try_from(self.shape.bytes()).unwrap_or(usize::MAX)
    }

    #[inline]
    fn frame_words(&self) -> usize {
        usize::try_from(self.shape.frames).unwrap_or(usize::MAX).saturating_mul(FRAME_WORDS)
    }

    /// The conformance convention: `r1` = address of `mem` (0 if empty), `r2` = its length.
    #[inline(always)]
    pub fn run_mem(&self, cache: &mut Cache, mem: &mut [u8]) -> Result<u64, Trap> {
        // Self-contained code on memory the proof covers: straight to the lean run, inlined
        // here, so that the input is never built in memory and copied (a measurable share
        // of a short run: store forwarding fails on its copy).
        // Without a context there are no packet fields to write, and a memory no longer
        // than its window passes `Input::check_sizes`: what is left of `run_lean` is its
        // entry registers (`Input::entry_args` for memory alone) and `lean_fire`.
        // This path is inlined into the caller (its loop over runs; `#[inline]` alone was
        // declined), the rest out of line: a call level, its six saved registers and the
        // result written through memory were a share of a short run's time outside the
        // generated code (bench/records/2026-11-30-jit-10.txt).
        let n = mem.len() as u64;
        if n >= self.lean_mem_from && n <= REGION_WINDOW {
            let (r1, r2) = if n == 0 { (0, 0) } else { (MEM_BASE, n) };
            // An absent context and packet: the empty slices `run_lean` would take.
            let none = std::ptr::NonNull::<u8>::dangling().as_ptr() as u64;
            let mem = mem.as_mut_ptr() as u64;
            return self.lean_fire(cache, none, none, mem, r1, r2).map(|outcome| outcome.r0);
        }
        self.run_mem_full(cache, mem)
    }

    /// [`JitProgram::run_mem`] for code that is not lean or memory the proof does not
    /// cover: kept out of line, so that the lean path's frame stays small.
    #[cold]
    #[inline(never)]
    fn run_mem_full(&self, cache: &mut Cache, mem: &mut [u8]) -> Result<u64, Trap> {
        if let (true, Some(Needs::Memory(len))) = (self.lean, self.needs) {
            if mem.len() as u64 >= len {
                return self.run_lean(cache, Input::new().mem(mem)).map(|outcome| outcome.r0);
            }
        }
        self.run(cache, Input::new().mem(mem))
    }

    /// Runs the program once; returns `r0`. With a context and a context layout in the
    /// bindings, the layout's packet fields are written into the context first, as the
    /// interpreter does.
    pub fn run(&self, cache: &mut Cache, input: Input<'_>) -> Result<u64, Trap> {
        self.run_stats(cache, input).map(|outcome| outcome.r0)
    }

    /// [`JitProgram::run`], also reporting the instructions executed.
    pub fn run_stats(&self, cache: &mut Cache, input: Input<'_>) -> Result<RunOutcome, Trap> {
        if let Some(needs) = self.needs {
            if !needs.met_by(&input) {
                // A run unlike the ones the proof assumed: the facts say nothing about it.
                return self.checked_twin()?.run_stats(cache, input);
            }
            if self.lean {
                return self.run_lean(cache, input);
            }
        }
        self.prepare(cache);
        cache.executed = 0;
        input.check_sizes()?;
        let (r1_addr, r2) = input.entry_args();
        let Input { ctx, packet, mem, span, env } = input;
        let ctx = ctx.unwrap_or_default();
        let packet_len = packet.as_deref().map_or(0, <[u8]>::len);
        self.packet_fields.fill(ctx, packet_len, span)?;
        let legacy_reads_packet = packet.is_some();
        let packet = packet.unwrap_or_default();
        let mem = mem.unwrap_or_default();
        self.set_up(cache, ctx, packet, mem, legacy_reads_packet, r1_addr, r2);
        self.fire(cache, env)
    }

    /// A batch ([`Batch`]): the run state set up once (as [`JitProgram::run_stats`] does
    /// per run), then per packet only the packet fields, the stack's zeroing, the
    /// environment's binding and the outcome words. Lean code and runs unlike the ones the
    /// proof assumed take the separate runs. Generic over the batch: a caller that names
    /// its batch's type (`weir`'s XDP batch) gets the batch's per-frame loop and this
    /// engine's per-frame run compiled as one, no call between them through `dyn` (issue
    /// 11: ~30 of a lent xdp_counter frame's ~268 instructions, the lent closure's call,
    /// entry and exit, bench/records/2026-12-01-runtime-33.txt); `Prepared::run_batch`
    /// passes `dyn Batch`.
    pub fn run_batch<B: Batch>(&self, cache: &mut Cache, input: Input<'_>, batch: &mut B) {
        let unmet = self.needs.is_some_and(|needs| !needs.met_by(&input));
        if unmet || input.check_sizes().is_err() {
            return run_each(|input| self.run_stats(cache, input), input, batch);
        }
        if self.lendable && batch.lends() && input.ctx.is_some() {
            return self.run_batch_lent(cache, input, batch);
        }
        if self.lean {
            // Its needs are about the context's and memory's sizes, which a batch does not
            // change: `run_lean` per packet, straight.
            return run_each(|input| self.run_lean(cache, input), input, batch);
        }
        let (r1_addr, r2) = input.entry_args();
        let Input { ctx, packet, mem, .. } = input;
        let ctx = ctx.unwrap_or_default();
        let legacy_reads_packet = packet.is_some();
        let packet = packet.unwrap_or_default();
        let mem = mem.unwrap_or_default();
        self.prepare(cache);
        self.set_up(cache, ctx, packet, mem, legacy_reads_packet, r1_addr, r2);
        self.take_direct(cache, batch);
        let host = |bytes: &mut [u8]| bytes.as_mut_ptr() as u64;
        loop {
            let Some(span) = batch.next(ctx, packet) else {
                return self.drop_direct(cache);
            };
            let outcome = match self.packet_fields.fill(ctx, packet.len(), Some(span)) {
                Ok(()) => {
                    self.prepare(cache);
                    cache.executed = 0;
                    let stack_host = cache.stack.as_mut_ptr() as u64;
                    let stack_len = cache.stack.len() as u64;
                    let run = cache.state.get();
                    // The same slices as at the batch's start (a run that trapped inside a
                    // call left the stack's entry moved): compared, not rewritten.
                    let floor = self.shape.frame_floor(0);
                    run.regions[STACK].set_stack_unless_same(STACK, stack_host, stack_len, floor);
                    run.regions[CTX].set_unless_same(CTX, host(ctx), ctx.len() as u64, false);
                    let packet_len = packet.len() as u64;
                    run.regions[PACKET].set_unless_same(PACKET, host(packet), packet_len, true);
                    self.fire(cache, batch.env())
                }
                Err(trap) => Err(trap),
            };
            if !batch.done(outcome, ctx, packet) {
                return self.drop_direct(cache);
            }
        }
    }

    /// The batch environment's direct lookups (`RunEnv::direct_lookups`), taken once for
    /// the batch when the code calls `bpf_map_lookup_elem` through `map_lookup_fast`; after
    /// `set_up`, which forgets the last batch's.
    fn take_direct<B: Batch + ?Sized>(&self, cache: &mut Cache, batch: &mut B) {
        if !self.bindings.env_map_lookup() {
            return;
        }
        let run = cache.state.get();
        if let Some(env) = batch.env() {
            env.direct_lookups(&mut run.direct);
            run.slot_table.clear();
            run.slot_table.extend(run.direct.iter().map(|d| DirectSlot::of(d.as_ref())));
            // Once per batch: the table stays put until `drop_direct` (`fire` gates it by
            // `slot_count`, 0 unless `direct_on`, which needs `direct_env`).
            run.slots = run.slot_table.as_ptr() as u64;
            if run.direct.iter().any(Option::is_some) {
                run.direct_env = env_address(env);
            }
        }
    }

    /// Lets go of the batch's direct lookups (and the maps they hold).
    fn drop_direct(&self, cache: &mut Cache) {
        let run = cache.state.get();
        run.direct.clear();
        run.slot_table.clear();
        run.direct_env = 0;
    }

    /// A batch over frames lent in place ([`Batch::lend`]; the code is `lendable`): the
    /// run state set up once over the input (as [`JitProgram::run_batch`] does), then per
    /// packet the packet region's entry made the frame, read-only, the context's packet
    /// fields written for it, and the run: no copy of the frame. Self-contained code
    /// takes [`JitProgram::run_lean`]'s few words instead.
    fn run_batch_lent<B: Batch>(&self, cache: &mut Cache, input: Input<'_>, batch: &mut B) {
        let (r1_addr, r2) = input.entry_args();
        let Input { ctx, packet, mem, .. } = input;
        let ctx = ctx.unwrap_or_default();
        let packet = packet.unwrap_or_default();
        let mem = mem.unwrap_or_default();
        self.prepare(cache);
        self.set_up(cache, ctx, packet, mem, false, r1_addr, r2);
        // The packet entry's words that are the same for every lent frame (its window,
        // no store admitted, read-only), written once: per frame `run_lent` writes only
        // the frame's address, length and load bounds (`RegionEntry::lend_frame`).
        cache.state.get().regions[PACKET].set_read_only(PACKET, 0, 0);
        self.take_direct(cache, batch);
        if let Some((mut steady, data_end)) = self.lean_steady(cache, ctx) {
            // Self-contained code that never writes the stack: the words of the run state
            // that stay the same from frame to frame written once here, per frame only the
            // frame's base and the context's `data_end` (`run_lent_steady`). The closure
            // holds the word and the context's slice themselves, not pointers to them.
            let (cache, ctx) = (&mut *cache, &mut *ctx);
            let mut run = move |frame: &[u8], _: Option<&mut dyn RunEnv>| {
                self.run_lent_steady(cache, &mut steady, data_end, ctx, frame)
            };
            while batch.lend_with(&mut run) {}
        } else if let Some((steady, data_end)) = self.full_steady(cache, ctx) {
            // Code that is not lean: the entries of the stack and the context (and the
            // cache's size) that `set_up` and `prepare` left, checked once here instead of
            // per frame (`run_lent_full_steady`; issue 11: xdp_counter's per-frame set-up).
            // Moved in: the closure holds the word and the context's slice themselves, not
            // pointers to them (a load a frame fewer for each).
            // Code whose runs never leave frame 0 or never write the stack (`deepest` 0,
            // xdp_counter's) gets a closure that does not test the depth per frame.
            let (cache, ctx) = (&mut *cache, &mut *ctx);
            // Code whose runs start on the stack its own runs left (`starts_on_own_stack`)
            // gets one that does not zero it: since `prepare` above, only this program's
            // runs of this batch wrote it, each ending plainly (any other end disarms
            // `steady`, and `run_lent` zeroes from `dirty_from` again).
            if self.sizes.deepest == 0 && self.starts_on_own_stack {
                self.lend_full_steady::<false, false, B>(cache, steady, data_end, ctx, batch);
            } else if self.sizes.deepest == 0 {
                self.lend_full_steady::<false, true, B>(cache, steady, data_end, ctx, batch);
            } else {
                self.lend_full_steady::<true, true, B>(cache, steady, data_end, ctx, batch);
            }
        } else {
            let mut run =
                |frame: &[u8], env: Option<&mut dyn RunEnv>| self.run_lent(cache, ctx, frame, env);
            while batch.lend_with(&mut run) {}
        }
        self.drop_direct(cache);
        // The entry no longer describes borrowed memory: emptied, so that the next run
        // over any packet sets it afresh.
        cache.state.get().regions[PACKET].set(PACKET, 0, 0, 0, false);
    }

    /// The full steady path's frame loop, with its per-frame choices (`DEEP`: test the
    /// depth; `CLEAR`: zero the stack) fixed by `run_batch_lent` once a batch. Inlined, so
    /// the closure still holds the steady word and the context's slice themselves.
    #[inline(always)]
    fn lend_full_steady<const DEEP: bool, const CLEAR: bool, B: Batch>(
        &self,
        cache: &mut Cache,
        mut steady: LentSteady,
        data_end: DataEndWord,
        ctx: &mut [u8],
        batch: &mut B,
    ) {
        let mut run = move |frame: &[u8], env: Option<&mut dyn RunEnv>| {
            self.run_lent_full_steady::<DEEP, CLEAR>(cache, &mut steady, data_end, ctx, frame, env)
        };
        while batch.lend_with(&mut run) {}
    }

    /// [`JitProgram::run_lent`] out of line, for the lean steady path's way out: so that
    /// `run_lent` stays inlined into the general lent closure, its one other caller (a call
    /// level there cost xdp_counter's batch ~8 %, bench/records/2026-11-30-runtime-16.txt).
    #[cold]
    #[inline(never)]
    fn run_lent_cold(
        &self,
        cache: &mut Cache,
        ctx: &mut [u8],
        frame: &[u8],
        env: Option<&mut dyn RunEnv>,
    ) -> Result<RunOutcome, Trap> {
        self.run_lent(cache, ctx, frame, env)
    }

    /// One run of [`JitProgram::run_batch_lent`]: `frame` is the whole packet region,
    /// read-only.
    #[inline(always)]
    fn run_lent(
        &self,
        cache: &mut Cache,
        ctx: &mut [u8],
        frame: &[u8],
        env: Option<&mut dyn RunEnv>,
    ) -> Result<RunOutcome, Trap> {
        let len = frame.len() as u64;
        if len > REGION_WINDOW {
            return Err(frame_too_long(len));
        }
        // The whole frame, no span: the straight-line writes of `fill_whole` when the
        // context takes every field (issue 11: `fill`'s general path per packet), the
        // general path out of line (so that the per-packet closure stays small).
        if ctx.len() < self.packet_fields.context_end()
            || !self.packet_fields.fill_whole(ctx, frame.len())
        {
            self.fill_general(ctx, frame.len())?;
        }
        let host = frame.as_ptr() as u64;
        if self.lean {
            let (ctx_host, r2) = (ctx.as_mut_ptr() as u64, ctx.len() as u64);
            // The memory's entry as `set_up` left it: the lean code reads its `base_lo`.
            let mem_host = cache.state.get().regions[MEM].base_lo;
            let r1 = weir_program::exec::guest::CTX_BASE;
            return self.lean_fire(cache, ctx_host, host, mem_host, r1, r2);
        }
        self.prepare(cache);
        cache.executed = 0;
        let stack_host = cache.stack.as_mut_ptr() as u64;
        let stack_len = cache.stack.len() as u64;
        let run = cache.state.get();
        let floor = self.shape.frame_floor(0);
        run.regions[STACK].set_stack_unless_same(STACK, stack_host, stack_len, floor);
        let ctx_host = ctx.as_mut_ptr() as u64;
        run.regions[CTX].set_unless_same(CTX, ctx_host, ctx.len() as u64, false);
        run.regions[PACKET].lend_frame(PACKET, host, len);
        self.fire(cache, env)
    }

    /// The lean lent batch's once-per-batch part ([`LentSteady`]), or `None` when the
    /// code is not lean, may write the stack, or the cache is not (yet) sized for it, or
    /// the context is shorter than the layout or of another shape than `fill_whole` takes,
    /// or the layout has no single `data_end` word: then every frame takes `run_lent`.
    /// Writes the run-state words that `lean_fire` writes per run and that stay the same
    /// over `ctx` (all but the packet's base), the entry registers `r1`/`r2`, which
    /// `lean_fire` passes straight to the code and `run_lent_steady` reads back from here,
    /// and, as `full_steady` does, the context's packet fields every whole frame shares,
    /// returning the `data_end` word a frame writes.
    fn lean_steady(&self, cache: &mut Cache, ctx: &mut [u8]) -> Option<(LentSteady, DataEndWord)> {
        let sizes = &self.sizes;
        let len = cache.stack.len();
        let sized = len == sizes.stack_bytes && cache.frames.len() == sizes.frame_words;
        // Code that never writes the stack leaves a clean stack clean (`lean_fire`'s
        // `dirty == len` arm): no zeroing, and `dirty_from` stays as it is, run after run.
        if !self.lean || self.writes_stack || !sized || cache.dirty_from != len {
            return None;
        }
        if ctx.len() < self.packet_fields.context_end() {
            return None;
        }
        let data_end = self.packet_fields.data_end_word()?;
        if !self.packet_fields.fill_whole(ctx, 0) {
            return None;
        }
        let (ctx_host, ctx_len) = (ctx.as_mut_ptr() as u64, ctx.len());
        let stack_host = cache.stack.as_mut_ptr() as u64;
        let run = cache.state.get();
        run.regions[CTX].base_lo = ctx_host;
        // `regions[MEM].base_lo` stays as `set_up` left it (`run_lent` reads it back).
        run.stack_bias = stack_host.wrapping_sub(STACK_BASE);
        run.key = self.key;
        run.r1 = weir_program::exec::guest::CTX_BASE;
        run.r2 = ctx_len as u64;
        Some((LentSteady { armed: true, env: 0 }, data_end))
    }

    /// One frame of a lean lent batch ([`JitProgram::lean_steady`]): the context's
    /// `data_end`, the packet's base, the code, the outcome (a frame `LentSteady::admits`
    /// not takes `run_lent`). The context's other packet fields stand as `lean_steady`
    /// wrote them (as in `run_lent_full_steady`: nothing but the engine writes them; issue
    /// 11: all three per frame, each range-checked, were 38 of the empty program's 74
    /// instructions a frame, the one word is 6, bench/records/2026-12-01-runtime-31.txt).
    /// Always inlined: compiled also in the batch's crate (`run_batch` is generic over the
    /// batch), where `#[inline]` alone left it a call a frame (issue 11,
    /// bench/records/2026-12-01-runtime-34.txt).
    #[inline(always)]
    fn run_lent_steady(
        &self,
        cache: &mut Cache,
        steady: &mut LentSteady,
        data_end: DataEndWord,
        ctx: &mut [u8],
        frame: &[u8],
    ) -> Result<RunOutcome, Trap> {
        if !steady.admits(frame) {
            return self.run_lent_cold(cache, ctx, frame, None);
        }
        // `lean_steady` checked the context's length against the layout's end (so the
        // word is inside it) and wrote the fields every whole frame shares.
        data_end.write(ctx, frame.len());
        let run = cache.state.get();
        run.regions[PACKET].base_lo = frame.as_ptr() as u64;
        let entry = self.code.entry();
        // SAFETY: as in `lean_fire`, whose words `lean_steady` wrote for this context (the
        // same slice: `run_batch_lent`'s closure, this function's one caller, passes the
        // one it holds borrowed for the whole batch, which `lean_steady` was given) and
        // this cache (sized, its stack clean: the code never writes it, `writes_stack` is
        // false); the packet's base is the frame, lent read-only for this call: the code
        // is `lendable`, no store of it reaches the packet window. The context's packet
        // fields, which the code's unchecked packet accesses start from, are this frame's:
        // `data_end` written above, `data` and `data_meta` by `lean_steady` (the same for
        // every whole frame) and never since (lean code is proven, and the verifier
        // refuses a store into a packet field, which is no writable plain field; it calls
        // no helper). The code writes only the outcome fields of `run` and the context,
        // and returns normally.
        let (r1, r2) = (run.r1, run.r2);
        let exit = unsafe { entry(&mut *run, r1, r2) };
        self.settle(cache, exit)
    }

    /// The once-per-batch part of a lent batch of code that is not lean, or `None` (lean
    /// code, a cache not sized for the program, a context shorter than the layout or of
    /// another shape than `fill_whole` takes, a layout without a single `data_end` word):
    /// then every frame takes `run_lent`. `prepare` sized the cache and `set_up` wrote the
    /// entries of the stack and of `ctx` just before; nothing in a batch resizes the cache.
    /// Writes the context's packet fields that are the same for every lent frame (data,
    /// data_meta), so that a frame writes only its `data_end`, the word returned beside
    /// (`run_lent_full_steady`): inside the context, checked here against `context_end`.
    fn full_steady(&self, cache: &mut Cache, ctx: &mut [u8]) -> Option<(LentSteady, DataEndWord)> {
        let sizes = &self.sizes;
        let sized =
            cache.stack.len() == sizes.stack_bytes && cache.frames.len() == sizes.frame_words;
        if self.lean || !sized || ctx.len() < self.packet_fields.context_end() {
            return None;
        }
        let data_end = self.packet_fields.data_end_word()?;
        if !self.packet_fields.fill_whole(ctx, 0) {
            return None;
        }
        // The direct lookups bound for no environment (after `take_direct`, which set the
        // batch's table): what `steady.env` 0 says until a frame brings another.
        Self::bind_direct(cache.state.get(), 0);
        Some((LentSteady { armed: true, env: 0 }, data_end))
    }

    /// One frame of a lent batch of code that is not lean ([`JitProgram::full_steady`]):
    /// `run_lent`'s full run without its checks of the cache's size and of the stack's and
    /// context's entries, which stand from frame to frame while every run returns plainly.
    /// A run that exits otherwise (a trap, perhaps inside a call: the stack's entry left
    /// moved) or a frame longer than the packet window disarms it: the rest of the batch takes
    /// `run_lent`, which checks them all again. Of the context's packet fields only
    /// `data_end` is written (the others stand as `full_steady` wrote them: nothing but the
    /// engine writes them, and a lent batch's program moves no packet bound, `Batch::lends`),
    /// and the direct-lookup words only when the frame's environment is not the last one's
    /// (issue 11: both per frame were ~30 of xdp_counter's ~500 instructions a frame,
    /// bench/records/2026-11-30-runtime-23.txt).
    /// Always inlined, as `run_lent_steady` is. `CLEAR` false: the stack is not zeroed
    /// (`starts_on_own_stack`, a closure chosen once a batch: no test per frame).
    #[inline(always)]
    fn run_lent_full_steady<const DEEP: bool, const CLEAR: bool>(
        &self,
        cache: &mut Cache,
        steady: &mut LentSteady,
        data_end: DataEndWord,
        ctx: &mut [u8],
        frame: &[u8],
        env: Option<&mut dyn RunEnv>,
    ) -> Result<RunOutcome, Trap> {
        if !steady.admits(frame) {
            return self.run_lent_cold(cache, ctx, frame, env);
        }
        // `full_steady` checked the context's length against the layout's end (so the
        // word is inside it: the write's one compare always passes) and wrote the fields
        // every whole frame shares.
        data_end.write(ctx, frame.len());
        // `prepare` without its size check (sized at the batch's start), and its owner
        // (this program since the batch's `prepare`).
        if CLEAR {
            Self::zero_written(cache);
        }
        cache.executed = 0;
        let run = cache.state.get();
        // The entry is a read-only one of the packet window (`run_batch_lent` made it so
        // before `full_steady`, and only plain runs, which write no packet entry, came
        // since): the frame's words alone, untested.
        run.regions[PACKET].relend_frame(PACKET, frame.as_ptr() as u64, frame.len() as u64);
        let env_addr = env.as_deref().map_or(0, env_address);
        if steady.env != env_addr {
            Self::bind_direct(run, env_addr);
            steady.env = env_addr;
        }
        let exit = self.fire_exit::<DEEP>(run, &mut cache.dirty_from, env);
        if exit.plain_remaining().is_none() {
            steady.armed = false;
        }
        self.settle(cache, exit)
    }

    /// [`PacketFields::fill`] of a lent frame whose context `fill_whole` did not take.
    #[cold]
    #[inline(never)]
    fn fill_general(&self, ctx: &mut [u8], len: usize) -> Result<(), Trap> {
        self.packet_fields.fill(ctx, len, None)
    }

    /// The run state's words that stay the same from run to run over the same slices: the
    /// region entries of the stack, context, packet and memory, the legacy loads' view,
    /// the stack bias, frames, call targets, blinding key, budget and entry registers.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn set_up(
        &self,
        cache: &mut Cache,
        ctx: &mut [u8],
        packet: &mut [u8],
        mem: &mut [u8],
        legacy_reads_packet: bool,
        r1_addr: u64,
        r2: u64,
    ) {
        // The window of the region `r1` points at (0, which holds nothing, without one).
        let input_window = crate::guest::window(r1_addr) as usize;
        let floor = self.shape.frame_floor(0);
        let stack_host = cache.stack.as_mut_ptr() as u64;
        let stack_len = cache.stack.len() as u64;
        let frames = cache.frames.as_mut_ptr() as u64;
        let run = cache.state.get();
        let host = |bytes: &mut [u8]| bytes.as_mut_ptr() as u64;
        let packet_view = (host(packet), packet.len() as u64);
        let mem_view = (host(mem), mem.len() as u64);
        run.regions[STACK].set_stack_unless_same(STACK, stack_host, stack_len, floor);
        // The same slices run after run (a runner's reused buffers): their entries stand.
        run.regions[CTX].set_unless_same(CTX, host(ctx), ctx.len() as u64, false);
        run.regions[PACKET].set_unless_same(PACKET, packet_view.0, packet_view.1, true);
        run.regions[MEM].set_unless_same(MEM, mem_view.0, mem_view.1, true);
        // `run.value` admits nothing here: it starts so and every run ends emptying it.
        // From the values, not read back from the entries just written (a wide load of
        // two narrower stores stalls store forwarding: a tenth of a run's set-up here).
        (run.legacy_host, run.legacy_len) =
            if legacy_reads_packet { packet_view } else { mem_view };
        run.stack_bias = stack_host.wrapping_sub(STACK_BASE);
        run.frames = frames;
        run.call_targets = self.call_targets.as_ptr() as u64;
        run.key = self.key;
        run.r2 = r2;
        run.bindings = &self.bindings;
        run.ctx_layout = self.bindings.context;
        // Only a batch takes the environment's direct lookups (`take_direct`), after this.
        run.direct_env = 0;
        // Code without calls never writes it (`fire`), and another program's run may have.
        run.max_depth = 0;
        // `r1` is its region's lowest address, taken from the entry itself: generated code
        // relies on that equality to check accesses through `r1` without a table lookup.
        run.r1 = run.regions.get(input_window).map_or(0, |entry| entry.lo_addr);
    }

    /// One run over the state [`JitProgram::set_up`] left (the stack zeroed by `prepare`):
    /// the outcome words reset, the environment bound for the call, the code entered, and
    /// what it left read back.
    #[inline(always)]
    fn fire(&self, cache: &mut Cache, env: Option<&mut dyn RunEnv>) -> Result<RunOutcome, Trap> {
        Self::bind_direct(cache.state.get(), env.as_deref().map_or(0, env_address));
        self.fire_bound(cache, env)
    }

    /// The batch's direct lookups only for the environment they came from (its address
    /// `env_addr`; 0: none). Generated code's view of the same table (`slots`, written
    /// with the table in `take_direct`): none unless `direct_on`.
    #[inline(always)]
    fn bind_direct(run: &mut RunState<'static>, env_addr: usize) {
        run.direct_on = run.direct_env != 0 && env_addr == run.direct_env;
        run.slot_count = if run.direct_on { run.slot_table.len() as u64 } else { 0 };
    }

    /// [`JitProgram::fire`] once `bind_direct` has run for `env`.
    #[inline(always)]
    fn fire_bound(
        &self,
        cache: &mut Cache,
        env: Option<&mut dyn RunEnv>,
    ) -> Result<RunOutcome, Trap> {
        let exit = self.fire_exit::<true>(cache.state.get(), &mut cache.dirty_from, env);
        self.settle(cache, exit)
    }

    /// [`JitProgram::fire_bound`] up to the code's [`Exit`], before it is settled: on the
    /// cache's kept state `run` and its `dirty_from`, which the caller passes apart so that
    /// one that has fetched the kept state already does not fetch it again (issue 11: a
    /// load and a test per lent frame, bench/records/2026-11-30-runtime-26.txt). `DEEP`
    /// false: the caller knows `sizes.deepest` is 0 (a lent batch's closure chosen once for
    /// the batch), so the depth is not tested per run (issue 11: 3 instructions a lent
    /// frame, bench/records/2026-12-01-runtime-32.txt).
    #[inline(always)]
    fn fire_exit<const DEEP: bool>(
        &self,
        run: &mut RunState<'static>,
        dirty_from: &mut usize,
        env: Option<&mut dyn RunEnv>,
    ) -> Exit {
        // Not reset per run (in a batch, per frame): the exit word, exit value and budget
        // left, which every way out of the code but a plain return stores (`codegen`, the
        // exit blocks) and only after such a way out are read (`Exit`), the deepest frame
        // when the code has calls, which every way out stores (code without calls never writes
        // `max_depth`, which `set_up` zeroes once), and `store_code`, which the slow load
        // and store paths write before they answer 0, the only answer after which
        // generated code reads it. The helper's id and status are reset: the trampolines'
        // status is read after every helper call.
        run.helper_status = 0;
        run.helper_id = 0;
        // SAFETY: only the lifetime changes. The environment is borrowed for this whole
        // call, and the kept state lets go of it (`env = None` below) before this function
        // returns or resumes a helper's panic; nothing reads it between runs.
        run.env = env.map(|env| unsafe {
            std::mem::transmute::<&mut dyn RunEnv, &'static mut dyn RunEnv>(env)
        });
        // Until the run reports how deep it went, assume it may have written everything.
        *dirty_from = 0;
        let entry = self.code.entry();
        // SAFETY: `entry` is this program's code (`NativeCode` keeps it mapped while `self`
        // is borrowed) with the signature it was compiled for. Every host address in `run`
        // points into memory borrowed for this whole call and not otherwise used during it:
        // the stack and frame area of `cache` (sized by `cache()`/`prepare` for this
        // program's stack shape and frame count), the input slices `set_up` (or a batch's
        // per-packet comparison) entered, borrowed by the caller across this call (each
        // region entry admits only accesses inside its slice, the context's stores go
        // through `check_store`), or a frame lent read-only for this call (`run_lent`: its
        // entry admits loads only, the slow path refuses stores into it, and the code is
        // `lendable`: no unchecked store reaches the packet window), `call_targets` (one
        // byte per slot, read only below
        // `insns.len()`) and `bindings`; addresses in the map values window come from the
        // environment's `RunEnv::host` and `RunEnv::value_span`, or a `DirectLookup`'s
        // `find` (`map_lookup_fast`, whose map the batch's table holds, or generated code
        // through `slots`: `slot_table`, built with that table and cleared with it, and
        // `slot_count` 0 unless `direct_on`, so no slot outlives its map), whose contracts
        // keep them valid while generated code may use them (the value entry is emptied at
        // each helper call and run). The entries of windows without an input are empty (never
        // set). Generated code checks every guest access against those entries before
        // making it, writes only through them and to `run`, and returns normally: it never
        // unwinds (helpers' panics are caught in `call_helper`).
        let (r1, r2) = (run.r1, run.r2);
        let exit = unsafe { entry(&mut *run, r1, r2) };
        run.env = None;
        run.value.clear();

        // The outcome's words from what was worked out at compile time (`LeanSizes`), not
        // recomputed per run (issue 11: per lent frame, bench/records/2026-11-30-runtime-24.txt).
        // `deepest` 0 (code without calls, or that never writes the stack): the depth is
        // 0 whatever `max_depth` holds, so it is not read.
        let deepest = if DEEP { self.sizes.deepest } else { 0 };
        debug_assert!(DEEP || self.sizes.deepest == 0);
        let max_depth = if deepest == 0 { 0 } else { run.max_depth.min(deepest) };
        // Every caller `prepare`d the cache for this program, so a depth-0 run's answer is
        // the one worked out at compile time for this stack's length (`lean_written_from`);
        // so is that of code that never writes the stack (`deepest` 0).
        *dirty_from = if max_depth == 0 {
            self.sizes.written_from
        } else {
            usize::try_from(self.shape.frame_floor(max_depth)).unwrap_or(0)
        };
        // Tested before taken: a run whose helpers did not panic writes nothing here.
        if run.panic.is_some() {
            if let Some(payload) = run.panic.take() {
                std::panic::resume_unwind(payload);
            }
        }
        exit
    }

    /// A run of self-contained code (`Plan::self_contained`, so `needs` is met): the same
    /// preparation of the cache and the context as [`JitProgram::run_stats`], then only the
    /// run-state words the code reads: the entry registers, the stack bias, the
    /// host base of the context, packet and memory (the code adds its own guest offset);
    /// of the outcome fields none (see `lean_fire`). The region table keeps whatever the
    /// last full run left: this code never reads it, and a full run sets it whole.
    #[inline(always)]
    fn run_lean(&self, cache: &mut Cache, input: Input<'_>) -> Result<RunOutcome, Trap> {
        cache.executed = 0;
        input.check_sizes()?;
        let (r1, r2) = input.entry_args();
        let Input { ctx, packet, mem, span, .. } = input;
        let ctx = ctx.unwrap_or_default();
        if self.bindings.context.is_some() {
            let packet_len = packet.as_deref().map_or(0, <[u8]>::len);
            self.packet_fields.fill(ctx, packet_len, span)?;
        }
        let packet = packet.unwrap_or_default();
        let mem = mem.unwrap_or_default();
        let (ctx, packet) = (ctx.as_mut_ptr() as u64, packet.as_mut_ptr() as u64);
        self.lean_fire(cache, ctx, packet, mem.as_mut_ptr() as u64, r1, r2)
    }

    /// [`JitProgram::run_lean`] once its input is taken apart: the host bases of the
    /// context, packet and memory (each a slice borrowed by the caller for the call, or
    /// lent read-only when the code is `lendable`), the entry registers.
    #[inline(always)]
    fn lean_fire(
        &self,
        cache: &mut Cache,
        ctx: u64,
        packet: u64,
        mem: u64,
        r1: u64,
        r2: u64,
    ) -> Result<RunOutcome, Trap> {
        let sizes = &self.sizes;
        let len = cache.stack.len();
        let sized = len == sizes.stack_bytes && cache.frames.len() == sizes.frame_words;
        let dirty = cache.dirty_from;
        if sized && cache.owner == self.id && dirty >= sizes.written_from {
            // The steady case (only this program's runs wrote the stack since it was
            // last zeroed, and none of them deeper than a lean run writes): all below `written_from` is zero before the run and stays so (the
            // run writes nothing there), and what `lean_fire_unsteady` would zero is then
            // `steady_from..`, one slice worked out when compiling, after which it would
            // leave `dirty_from` at `written_from`: the same, without its tests.
            if let Some(observed) = cache.stack.get_mut(sizes.steady_from..) {
                if !observed.is_empty() {
                    zero(observed);
                }
            }
            cache.dirty_from = sizes.written_from;
        } else {
            self.lean_fire_unsteady(cache);
        }
        let stack_host = cache.stack.as_mut_ptr() as u64;
        let run = cache.state.get();
        run.regions[CTX].base_lo = ctx;
        run.regions[PACKET].base_lo = packet;
        run.regions[MEM].base_lo = mem;
        run.stack_bias = stack_host.wrapping_sub(STACK_BASE);
        run.key = self.key;
        // Not reset: the exit word, exit value and budget left, which every way out of the
        // code but a plain return stores (`codegen`, the exit blocks) and only after such a
        // way out are read (`Exit`), and the deepest frame and helper
        // status, which self-contained code (no calls) never sets and `outcome_other` reads only
        // for a helper's exit, which it never takes; a full run (`fire`) resets them all.
        // Nor `cache.executed` and `cache.dirty_from` for the call's time (as `fire`
        // does): this code calls nothing, so it returns normally (an `extern "C"` function
        // does not unwind) and reaches nothing of `cache` but `run` and the stack; both are
        // final before the call, `executed` set after it.
        let entry = self.code.entry();
        // SAFETY: `entry` is this program's code (kept mapped by `self.code`) with the
        // signature it was compiled for. It is self-contained (`Plan::self_contained`):
        // it calls nothing, reads of `run` only the words set just above (and `one`, set
        // when the state was made; `r1` and `r2` are its arguments), and accesses guest memory only at fixed offsets inside
        // the running frame (the stack of `cache`, sized by `prepare` for this shape) or
        // where the verifier proved an access in bounds of the context, packet or memory
        // borrowed for this call, whose sizes meet the proof's assumptions (`needs`,
        // checked by the caller); it writes only those and the outcome fields, and
        // returns normally. A packet lent read-only (`run_lent`) is only ever read: the
        // code is then `lendable`, no store of it reaches the packet window.
        let exit = unsafe { entry(&mut *run, r1, r2) };
        self.settle(cache, exit)
    }

    /// [`JitProgram::lean_fire`]'s zeroing before a run on a cache not sized for this
    /// program, or dirty below where its runs write (another program's run, or a full run
    /// that went deeper): out of line, so that the steady case stays short in the callers'
    /// loops. Leaves `dirty_from` as it stands after the run.
    #[cold]
    #[inline(never)]
    fn lean_fire_unsteady(&self, cache: &mut Cache) {
        let sizes = &self.sizes;
        let len = cache.stack.len();
        let sized = len == sizes.stack_bytes && cache.frames.len() == sizes.frame_words;
        let dirty = cache.dirty_from;
        // Where bytes an earlier run wrote may still lie after this run's zeroing.
        let mut left_from = len;
        let own = cache.owner == self.id;
        match (sized, sizes.observed_from) {
            // Only this program's runs wrote the stack since it was zeroed: the bytes they
            // left are in bytes its runs write before observing, or in the observed ones.
            (true, Some(observed_from)) if own => {
                // The bytes every run writes before reading them and before its exit may
                // keep the last run's: zeroed are only those from the deepest a run may observe
                // and, when an earlier run wrote deeper than this program ever does,
                // everything from there (the stack after the run shows it).
                let reach_from = sizes.written_from;
                let from = if dirty < reach_from { dirty } else { dirty.max(observed_from) };
                if from < len {
                    zero(&mut cache.stack[from..]);
                }
                if from > dirty {
                    left_from = dirty;
                }
            }
            // A program that never writes the stack leaves a clean cache clean.
            _ if sized && dirty == len => {}
            _ => self.prepare(cache),
        }
        cache.owner = self.id;
        // Bytes this run may write, and any an earlier one left that were kept. Sized by
        // now (`prepare` sizes what was not): `written_from` is for its length.
        cache.dirty_from = sizes.written_from.min(left_from);
    }

    /// Where in a stack of `len` bytes a run of lean code may write from: frame 0 only, and
    /// of it only what `stack_reach` found any run can write (the whole frame without an
    /// answer), as `run_stats` zeroes after a depth-0 run.
    #[inline]
    fn lean_written_from(&self, len: usize) -> usize {
        match self.stack_low {
            _ if !self.writes_stack => len,
            Some(low) => len.saturating_sub(usize::try_from(low).unwrap_or(usize::MAX)),
            None => usize::try_from(self.shape.frame_floor(0)).unwrap_or(0),
        }
    }

    /// The instruction budget as generated code counts it: at most `i64::MAX`, so that
    /// its signed test `remaining - n < 0` is `remaining < n` (no run gets that far).
    /// Compiled into the code as a constant (`codegen::translate`), so no run writes it.
    #[inline]
    fn budget(&self) -> u64 {
        Self::budget_of(&self.config)
    }

    /// [`JitProgram::budget`] of a program compiled with `config`.
    #[inline]
    fn budget_of(config: &Config) -> u64 {
        config.limits.instruction_budget.min(i64::MAX as u64)
    }

    /// Resizes `cache` for this program if needed and zeroes what the last run wrote.
    /// Inlined into the per-packet loops (issue 11: a call per packet in the lent batch's
    /// profile); the resizing, once per cache, out of line.
    #[inline]
    fn prepare(&self, cache: &mut Cache) {
        cache.owner = self.id;
        if cache.stack.len() != self.stack_bytes() || cache.frames.len() != self.frame_words() {
            return self.resize(cache);
        }
        Self::zero_written(cache);
    }

    /// Zeroes what the last run wrote of a sized cache's stack (from `dirty_from`): all
    /// of it clean again.
    #[inline(always)]
    fn zero_written(cache: &mut Cache) {
        if let Some(dirty) = cache.stack.get_mut(cache.dirty_from..) {
            zero(dirty);
        }
        cache.dirty_from = cache.stack.len();
    }

    /// [`JitProgram::prepare`] for a cache not sized for this program.
    #[cold]
    #[inline(never)]
    fn resize(&self, cache: &mut Cache) {
        let bytes = self.stack_bytes();
        if cache.stack.len() != bytes {
            cache.stack = vec![0; bytes];
        } else if let Some(dirty) = cache.stack.get_mut(cache.dirty_from..) {
            dirty.fill(0);
        }
        cache.dirty_from = cache.stack.len();
        let words = self.frame_words();
        if cache.frames.len() != words {
            cache.frames = vec![0; words];
        }
    }

    /// The run's result from the code's [`Exit`] (and, for any but a plain return, the run
    /// state's outcome words); sets `cache.executed`.
    #[inline(always)]
    fn settle(&self, cache: &mut Cache, exit: Exit) -> Result<RunOutcome, Trap> {
        // A plain return, the lean run's only one, from the two return registers, tested
        // inline; the traps' and helpers' decoding stays out of the callers' loops.
        // Only `r0` is merged with the other exits' (a register): merging whole outcomes
        // put the plain one through a stack slot, stored and loaded back every run.
        let r0 = match exit.plain_remaining() {
            Some(remaining) => {
                cache.executed = self.sizes.budget.wrapping_sub(remaining);
                exit.value
            }
            None => self.settle_other(cache, exit.value)?,
        };
        Ok(RunOutcome { r0, executed: cache.executed })
    }

    /// [`JitProgram::settle`] of an exit that is not a plain return: what it was, and the
    /// budget left, are in the run state. Sets `cache.executed`.
    #[cold]
    #[inline(never)]
    fn settle_other(&self, cache: &mut Cache, value: u64) -> Result<u64, Trap> {
        let run = cache.state.get();
        let outcome = self.outcome_other(run, value);
        let budget = self.sizes.budget;
        cache.executed = match outcome {
            Err(Trap { code: TrapCode::InstructionBudget, .. }) => budget,
            _ => budget.wrapping_sub(run.remaining),
        };
        outcome
    }

    /// The result of an exit that is not a plain return, from the run state's words.
    fn outcome_other(&self, run: &RunState, value: u64) -> Result<u64, Trap> {
        let (code, size, pc) =
            (run.exit_word & 0x7f, (run.exit_word >> 7) & 0xf, run.exit_word >> 11);
        let pc = usize::try_from(pc).unwrap_or(usize::MAX);
        match code {
            0 => Ok(value),
            EXIT_BUDGET => {
                Err(Trap::new(TrapCode::InstructionBudget, self.nth_from(pc, run.remaining)))
            }
            EXIT_HELPER => {
                let id = run.helper_id;
                match run.helper_status {
                    HELPER_STOPPED => Ok(value),
                    HELPER_FAILED => Err(Trap::memory(TrapCode::HelperFailed, pc, id, 0)),
                    HELPER_UNBOUND => Err(Trap::memory(TrapCode::BadCallTarget, pc, id, 0)),
                    HELPER_PANICKED => Err(Trap::new(TrapCode::HelperFailed, pc)),
                    _ => Ok(value),
                }
            }
            code => {
                let code = u32::try_from(code).ok().and_then(TrapCode::from_code);
                let size = size as u32;
                Ok(code.map_or(Err(Trap::new(TrapCode::Unsupported, pc)), |code| {
                    Err(Trap::memory(code, pc, run.exit_value, size))
                })?)
            }
        }
    }

    /// The slot `count` instructions after `start` in straight-line order (the budget trap's
    /// pc: `count` instructions of the block at `start` still fitted in the budget).
    fn nth_from(&self, start: usize, count: u64) -> usize {
        let mut pc = start;
        for _ in 0..count {
            pc = pc.saturating_add(self.insns.get(pc).map_or(1, Insn::slots));
        }
        pc
    }
}

/// An environment's address, which tells a batch's environment from another while both
/// live (`RunState::direct_env`).
#[inline]
fn env_address(env: &dyn RunEnv) -> usize {
    (env as *const dyn RunEnv).cast::<()>() as usize
}

/// The trap of a lent frame longer than the packet window.
#[cold]
#[inline(never)]
fn frame_too_long(len: u64) -> Trap {
    let size = u32::try_from(len).unwrap_or(u32::MAX);
    Trap::memory(TrapCode::OutOfBounds, 0, PACKET_BASE, size)
}

/// Zeroes `bytes`. What a run leaves dirty is mostly a few stack slots (xdp_counter: 16
/// bytes), which `fill` zeroes through a `memset` call per packet (issue 11: 2% of the lent
/// batch's profile): up to 32 bytes as two fixed-size stores that may overlap, no call.
#[inline]
fn zero(bytes: &mut [u8]) {
    fn ends<const N: usize>(bytes: &mut [u8]) {
        if let Some(head) = bytes.first_chunk_mut::<N>() {
            *head = [0; N];
        }
        if let Some(tail) = bytes.last_chunk_mut::<N>() {
            *tail = [0; N];
        }
    }
    match bytes.len() {
        16..=32 => ends::<16>(bytes),
        8..=15 => ends::<8>(bytes),
        _ => bytes.fill(0),
    }
}

impl Prepared for JitProgram {
    type Cache = Cache;

    fn cache(&self) -> Cache {
        JitProgram::cache(self)
    }

    fn run(&self, cache: &mut Cache, input: Input<'_>) -> Result<RunOutcome, Trap> {
        self.run_stats(cache, input)
    }

    fn run_batch(&self, cache: &mut Cache, input: Input<'_>, mut batch: &mut dyn Batch) {
        JitProgram::run_batch(self, cache, input, &mut batch)
    }

    fn stack<'c>(&self, cache: &'c Cache) -> &'c [u8] {
        cache.stack()
    }

    fn stack_top(&self) -> u64 {
        JitProgram::stack_top(self)
    }
}

#[cfg(test)]
mod tests {
    use super::zero;

    /// Every length up to past the fixed-size cases: the slice's bytes zeroed, none
    /// around it touched.
    #[test]
    fn zero_clears_exactly_its_slice() {
        for len in 0..48 {
            let mut buf = [0xffu8; 64];
            zero(&mut buf[3..3 + len]);
            for (i, &b) in buf.iter().enumerate() {
                let inside = (3..3 + len).contains(&i);
                assert_eq!(b, if inside { 0 } else { 0xff }, "len {len}, byte {i}");
            }
        }
    }
}
