//! Large eBPF programs load at once: the interpreter runs them while the JIT compiles them
//! on a background thread, and runs switch to the native code between two packets when it
//! arrives (the programs' counterpart of `filter::BACKGROUND_NATIVE_NODES`).
//!
//! Why: Cranelift's time grows with the program (testdata/bpf/big.o, 10,505 slots, takes
//! over half a second with `opt_level = none`, against 0.4 ms to load it on the
//! interpreter), and the two engines give the same results on every run (the engines'
//! agreement the conformance and jit_diff tests hold them to; each run starts from a
//! zeroed stack, and maps live in the run's environment, not in an engine), so switching
//! changes nothing but speed.

use std::sync::mpsc::{Receiver, TryRecvError};

use weir_jit::{Cache, Config, Jit, JitProgram};
use weir_program::abi::Bindings;
use weir_program::exec::{Batch, Input, Limits, RunOutcome, Session};
use weir_program::{Trap, Verified};

/// Programs longer than this many slots, when no engine is forced, start on the
/// interpreter while the JIT compiles them in the background. The JIT's compile time here
/// (weir-bench runtime, bench/records/2026-11-28-runtime.txt): about 0.1 s at 1,500 slots,
/// over half a second at 10,000; the optimized code of shorter programs is worth waiting
/// for (above [`weir_jit::OPTIMIZE_MAX_SLOTS`], the same size, it is compiled without
/// Cranelift's optimizations anyway).
pub const BACKGROUND_JIT_SLOTS: usize = weir_jit::OPTIMIZE_MAX_SLOTS;

/// A compiled program with its cache: the JIT's session, held by its type (in a [`Tiered`]
/// or `object::Runner::Jit`), not behind `dyn Session`, so that an XDP batch runs through
/// [`JitProgram::run_batch`] with its own batch type ([`JitSession::run_batch_of`]).
pub(crate) struct JitSession {
    program: JitProgram,
    cache: Cache,
}

impl JitSession {
    pub(crate) fn new(program: JitProgram) -> JitSession {
        let cache = program.cache();
        JitSession { program, cache }
    }

    /// [`Session::run_batch`] with the batch's own type: its per-frame loop and the
    /// engine's per-frame run compiled as one (issue 11,
    /// bench/records/2026-12-01-runtime-33.txt).
    pub(crate) fn run_batch_of<B: Batch>(&mut self, input: Input<'_>, batch: &mut B) {
        self.program.run_batch(&mut self.cache, input, batch)
    }
}

impl Session for JitSession {
    fn run(&mut self, input: Input<'_>) -> Result<RunOutcome, Trap> {
        self.program.run_stats(&mut self.cache, input)
    }

    fn run_batch(&mut self, input: Input<'_>, mut batch: &mut dyn Batch) {
        self.run_batch_of(input, &mut batch)
    }

    fn stack(&self) -> &[u8] {
        self.cache.stack()
    }

    fn stack_top(&self) -> u64 {
        self.program.stack_top()
    }
}

/// The interpreter's session, then the JIT's.
pub(crate) struct Tiered {
    interp: Box<dyn Session>,
    pending: Option<Receiver<Result<JitProgram, weir_jit::CompileError>>>,
    native: Option<JitSession>,
}

impl Tiered {
    /// Starts `program` on the interpreter and its compilation on a thread. The caller has
    /// checked that the JIT takes a program this long (`Config::max_slots`).
    pub(crate) fn start(
        program: &Verified,
        bindings: &Bindings,
        limits: Limits,
    ) -> Result<Tiered, String> {
        let interp = crate::Engine::Interp
            .program_engine()
            .ok_or("no interpreter")?
            .load(program, bindings.clone(), limits)
            .map_err(|e| e.to_string())?;
        let (tx, rx) = std::sync::mpsc::channel();
        let (owned, bindings) = (program.clone(), bindings.clone());
        std::thread::Builder::new()
            .name("weir-jit".into())
            .spawn(move || {
                // Nobody may be listening any more (the run ended first): nothing to do.
                let _ = tx.send(Jit::compile(&owned, bindings, Config::with_limits(limits)));
            })
            .map_err(|e| format!("cannot start the compiling thread: {e}"))?;
        Ok(Tiered { interp, pending: Some(rx), native: None })
    }

    fn arrive(&mut self, program: JitProgram) {
        self.native = Some(JitSession::new(program));
    }

    /// [`Session::run_batch`] with the batch's own type (see [`JitSession::run_batch_of`]).
    pub(crate) fn run_batch_of<B: Batch>(&mut self, input: Input<'_>, batch: &mut B) {
        self.poll();
        match &mut self.native {
            Some(jit) => jit.run_batch_of(input, batch),
            None => weir_program::exec::run_each(|input| self.run(input), input, batch),
        }
    }

    /// Blocks until the native code is there; true when runs now take it.
    pub(crate) fn wait(&mut self) -> bool {
        if let Some(rx) = self.pending.take() {
            if let Ok(Ok(program)) = rx.recv() {
                self.arrive(program);
            }
        }
        self.native.is_some()
    }

    /// Whether runs take the native code now.
    pub(crate) fn is_native(&self) -> bool {
        self.native.is_some()
    }
}

impl Tiered {
    /// Takes the native code if it has arrived (between two runs or batches).
    fn poll(&mut self) {
        if self.native.is_none() {
            if let Some(rx) = &self.pending {
                match rx.try_recv() {
                    Ok(Ok(program)) => {
                        self.pending = None;
                        self.arrive(program);
                    }
                    // A program the JIT did not take stays on the interpreter, which takes all.
                    Ok(Err(_)) | Err(TryRecvError::Disconnected) => self.pending = None,
                    Err(TryRecvError::Empty) => {}
                }
            }
        }
    }
}

impl Session for Tiered {
    fn run(&mut self, input: Input<'_>) -> Result<RunOutcome, Trap> {
        self.poll();
        match &mut self.native {
            Some(jit) => jit.program.run_stats(&mut jit.cache, input),
            None => self.interp.run(input),
        }
    }

    /// On the native code, its batch; before it arrives, a run per packet, each looking
    /// for it (a batch may be a whole capture).
    fn run_batch(&mut self, input: Input<'_>, mut batch: &mut dyn Batch) {
        self.run_batch_of(input, &mut batch)
    }

    fn stack(&self) -> &[u8] {
        match &self.native {
            Some(jit) => jit.cache.stack(),
            None => self.interp.stack(),
        }
    }

    fn stack_top(&self) -> u64 {
        match &self.native {
            Some(jit) => jit.program.stack_top(),
            None => self.interp.stack_top(),
        }
    }
}
