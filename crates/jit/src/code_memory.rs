//! Code memory: the host ISA (built once per process), compiling one Cranelift function with
//! `cranelift-jit`, and owning the executable memory it lands in. Both code generators (the
//! eBPF JIT here and the filter compiler in [`crate::filter`]) go through [`CodeMemory`], so
//! the crate's `unsafe` about code memory lives here and where each turns the finalized
//! address into its typed entry point.
//!
//! `cranelift-jit` writes the code into read-write pages and, in `finalize_definitions`,
//! flushes the instruction cache where the CPU needs it and remaps the pages read-execute
//! before any pointer to them is handed out: the memory is never writable and executable
//! at once. Generated functions reference no symbol (helpers and tables are reached through
//! addresses in the run state or baked in as constants), so there is nothing to relocate.

use std::sync::OnceLock;

use cranelift_codegen::ir::{types, AbiParam, Function, Signature};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Module};

use crate::state::RunState;
use crate::{CompileError, CompileErrorKind};

/// The host's ISA, tuned for speed, built once: detecting the CPU's features and building
/// the flags takes longer than compiling a small program. The error is the reason the host
/// is not one weir can generate code for.
pub(crate) fn host_isa() -> Result<OwnedTargetIsa, String> {
    static ISA: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(|| build_isa("speed")).clone()
}

/// The host's ISA without Cranelift's optimizations (`opt_level = none`), built once: for
/// programs longer than [`crate::OPTIMIZE_MAX_SLOTS`]. Cranelift's e-graph pass merges
/// equal pure values across the whole function (the run-state and region-table loads of
/// every checked access, which are pure); in a long straight-line program that leaves a
/// few values live across thousands of accesses and their cold paths, and register
/// allocation then grows much faster than the program.
pub(crate) fn host_isa_unoptimized() -> Result<OwnedTargetIsa, String> {
    static ISA: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(|| build_isa("none")).clone()
}

fn build_isa(opt_level: &str) -> Result<OwnedTargetIsa, String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let mut flags = settings::builder();
    flags.set("opt_level", opt_level).map_err(|e| text(&e))?;
    // The IR verifier catches translator bugs; tests and debug builds run it, release builds
    // trust the tests instead and save the time.
    let verify = if cfg!(debug_assertions) { "true" } else { "false" };
    flags.set("enable_verifier", verify).map_err(|e| text(&e))?;
    // cranelift-jit maps code at any address and patches nothing: no PIC needed.
    flags.set("is_pic", "false").map_err(|e| text(&e))?;
    let isa = cranelift_native::builder()
        .map_err(|e| text(&e))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| text(&e))?;
    if isa.pointer_type() != types::I64 {
        return Err("only 64-bit hosts are supported".into());
    }
    Ok(isa)
}

/// Executable memory holding one compiled function, freed when dropped.
pub(crate) struct CodeMemory {
    /// Kept only to free the code memory on drop; never used otherwise.
    module: Option<JITModule>,
    start: *const u8,
    len: usize,
}

// SAFETY: after `compile` returns, the module is never touched through a shared reference
// (no method of `CodeMemory` reaches it), and it is only used again by `drop`, which has
// exclusive access. What it holds (page mappings owned by this module alone, symbol tables)
// is not tied to the thread that made it. The code itself is immutable (read-execute) and
// may be executed by any number of threads at once.
unsafe impl Send for CodeMemory {}
// SAFETY: see `Send` above; `&CodeMemory` only allows reading the immutable code.
unsafe impl Sync for CodeMemory {}

impl CodeMemory {
    /// Compiles the function `build` fills in (its signature already set to `signature`);
    /// backend failures are reported through `backend`.
    pub(crate) fn compile<E>(
        isa: OwnedTargetIsa,
        signature: Signature,
        build: impl FnOnce(&mut Function) -> Result<(), E>,
        backend: impl Fn(String) -> E,
    ) -> Result<CodeMemory, E> {
        let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        let id =
            module.declare_anonymous_function(&signature).map_err(|e| backend(e.to_string()))?;
        let mut ctx = module.make_context();
        ctx.func.signature = signature;
        build(&mut ctx.func)?;
        module.define_function(id, &mut ctx).map_err(|e| match e {
            cranelift_module::ModuleError::Compilation(err) => backend(format!("{err:?}")),
            other => backend(other.to_string()),
        })?;
        let len = ctx.compiled_code().map_or(0, |code| code.code_buffer().len());
        module.clear_context(&mut ctx);
        module.finalize_definitions().map_err(|e| backend(e.to_string()))?;
        let start = module.get_finalized_function(id);
        Ok(CodeMemory { module: Some(module), start, len })
    }

    /// The function's first instruction: mapped read-execute while `self` lives.
    pub(crate) fn start(&self) -> *const u8 {
        self.start
    }

    /// The machine code, as mapped for execution.
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `start..start + len` is the finalized function: mapped readable (and
        // executable, never writable) by the module this value owns, until `drop`; the
        // borrow of `self` keeps it alive for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.start, self.len) }
    }
}

impl Drop for CodeMemory {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: nothing can be running the code: calls borrow the value that owns this
            // memory, and it is being dropped. The only pointers into the memory are derived
            // from `start`, owned by that value, and die with it.
            unsafe { module.free_memory() };
        }
    }
}

/// The signature of a compiled program: the run state and the entry registers `r1` and
/// `r2` in (in registers: a lean run stored them in the state just before the code loaded
/// them back, a store-forwarding wait at the head of every run), the [`Exit`] out in the
/// two return registers.
pub(crate) type EntryFn = unsafe extern "C" fn(*mut RunState, u64, u64) -> Exit;

/// How generated code leaves, in the two return registers. A plain `exit` gives `r0` and
/// the budget left (at most `i64::MAX`, so bit 63 clear) and stores nothing: the caller
/// read both back from the run state just after the code stored them, a store-forwarding
/// wait at the end of every run (bench/records/2026-11-30-jit-14.txt). Every other way
/// out (a trap, a helper's stop, the budget) stores its exit word, value and budget left
/// in the run state as before and gives its value and [`Exit::OTHER`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exit {
    pub value: u64,
    pub word: u64,
}

impl Exit {
    /// `word` of an exit that is not a plain return: the run state says what it was.
    pub(crate) const OTHER: u64 = 1 << 63;

    /// The budget left after a plain return, `None` for any other exit.
    #[inline(always)]
    pub(crate) fn plain_remaining(self) -> Option<u64> {
        (self.word & Exit::OTHER == 0).then_some(self.word)
    }
}

fn backend(message: String) -> CompileError {
    CompileError::new(0, CompileErrorKind::Backend(message))
}

/// The signatures generated code uses, in the host's C calling convention.
pub(crate) struct Abi {
    pub call_conv: CallConv,
}

impl Abi {
    fn signature(&self, params: usize) -> Signature {
        let mut sig = Signature::new(self.call_conv);
        sig.params.extend((0..params).map(|_| AbiParam::new(types::I64)));
        sig.returns.push(AbiParam::new(types::I64));
        sig
    }

    /// `params` words in, a two-word `#[repr(C)]` struct out in the two return registers,
    /// as Cranelift returns two values; `None` where the C calling convention returns such
    /// a struct otherwise (through memory: Windows, s390x).
    fn two_words_out(&self, params: usize) -> Option<Signature> {
        let two_registers = cfg!(all(unix, any(target_arch = "x86_64", target_arch = "aarch64")))
            && matches!(self.call_conv, CallConv::SystemV | CallConv::AppleAarch64);
        if !two_registers {
            return None;
        }
        let mut sig = self.signature(params);
        sig.returns.push(AbiParam::new(types::I64));
        Some(sig)
    }

    /// The compiled program: `fn(state, r1, r2) -> Exit`, or `None` on a host that returns
    /// [`Exit`] through memory.
    pub(crate) fn entry(&self) -> Option<Signature> {
        self.two_words_out(3)
    }

    /// `state::call_helper`: `fn(state, id, r1, r2, r3, r4, r5) -> u64`.
    pub(crate) fn helper(&self) -> Signature {
        self.signature(7)
    }

    /// A map's `DirectLookup::find`: `fn(map, cpu, w0, w1) -> FoundElem`, the element and
    /// the value's host address in the two return registers (`None`: see `two_words_out`).
    pub(crate) fn direct_find(&self) -> Option<Signature> {
        self.two_words_out(4)
    }

    /// `state::check_store`: `fn(state, addr, size) -> u64`.
    pub(crate) fn store_check(&self) -> Signature {
        self.signature(3)
    }
}

/// Executable code for one eBPF program.
pub(crate) struct NativeCode {
    memory: CodeMemory,
    entry: EntryFn,
}

impl NativeCode {
    /// Compiles `build`'s function, with Cranelift's optimizations when `optimize`.
    /// `build` receives the function to fill in (signature already set) and the ABI to call
    /// trampolines with.
    pub(crate) fn compile(
        optimize: bool,
        build: impl FnOnce(&mut Function, &Abi) -> Result<(), CompileError>,
    ) -> Result<NativeCode, CompileError> {
        let isa = if optimize { host_isa() } else { host_isa_unoptimized() };
        let isa = isa.map_err(|reason| CompileError::new(0, CompileErrorKind::Host(reason)))?;
        let abi = Abi { call_conv: isa.default_call_conv() };
        let signature = abi.entry().ok_or_else(|| {
            let reason = "the host's C calling convention returns two words through memory";
            CompileError::new(0, CompileErrorKind::Host(reason.into()))
        })?;
        let memory = CodeMemory::compile(isa, signature, |f| build(f, &abi), backend)?;
        // SAFETY: `start` is the function just finalized, compiled with the signature
        // `Abi::entry` in the host's default (C) calling convention: a pointer and two
        // 64-bit parameters, two 64-bit results in the two return registers, which is how
        // that convention returns `Exit` (`#[repr(C)]`, two `u64`: `Abi::two_words_out`),
        // exactly `EntryFn`. `memory` keeps it mapped read-execute for as long as this
        // value, which owns both, lives.
        let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(memory.start()) };
        Ok(NativeCode { memory, entry })
    }

    pub(crate) fn entry(&self) -> EntryFn {
        self.entry
    }

    /// The machine code, as mapped for execution.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.memory.bytes()
    }
}
