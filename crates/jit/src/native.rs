//! Native code: the host ISA, compiling one Cranelift function with `cranelift-jit`, and
//! owning the executable memory it lands in. All of the crate's `unsafe` about code memory
//! lives here: turning the finalized address into a callable function, reading the code
//! bytes back, and freeing the memory.
//!
//! `cranelift-jit` writes the code into read-write pages and, in `finalize_definitions`,
//! flushes the instruction cache where the CPU needs it and remaps the pages read-execute
//! before any pointer to them is handed out: the memory is never writable and executable
//! at once. The generated function references no symbol (helpers are reached through
//! addresses in the run state), so there is nothing to relocate or look up.

use cranelift_codegen::ir::{types, AbiParam, Function, Signature};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Module};

use crate::state::RunState;
use crate::{CompileError, CompileErrorKind};

/// The signature of a compiled program: the run state in, `r0` (or a helper's stop value)
/// out; everything else is left in the run state.
pub(crate) type EntryFn = unsafe extern "C" fn(*mut RunState) -> u64;

fn backend(e: impl std::fmt::Display) -> CompileError {
    CompileError::new(0, CompileErrorKind::Backend(e.to_string()))
}

fn host(e: impl std::fmt::Display) -> CompileError {
    CompileError::new(0, CompileErrorKind::Host(e.to_string()))
}

/// The host's ISA, tuned for speed.
pub(crate) fn host_isa() -> Result<OwnedTargetIsa, CompileError> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(host)?;
    // The IR verifier catches translator bugs; release builds trust the tests instead.
    flags
        .set("enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" })
        .map_err(host)?;
    // cranelift-jit maps code at any address and patches nothing: no PIC needed.
    flags.set("is_pic", "false").map_err(host)?;
    let isa = cranelift_native::builder()
        .map_err(host)?
        .finish(settings::Flags::new(flags))
        .map_err(host)?;
    if isa.pointer_type() != types::I64 {
        return Err(host("only 64-bit hosts are supported"));
    }
    Ok(isa)
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

    /// The compiled program: `fn(state) -> u64`.
    pub(crate) fn entry(&self) -> Signature {
        self.signature(1)
    }

    /// `state::call_helper`: `fn(state, id, r1, r2, r3, r4, r5) -> u64`.
    pub(crate) fn helper(&self) -> Signature {
        self.signature(7)
    }

    /// `state::check_store`: `fn(state, addr, size) -> u64`.
    pub(crate) fn store_check(&self) -> Signature {
        self.signature(3)
    }
}

/// Executable code for one program, freed when dropped.
pub(crate) struct NativeCode {
    /// Kept only to free the code memory on drop; never used otherwise.
    module: Option<JITModule>,
    entry: EntryFn,
    code: *const u8,
    len: usize,
}

// SAFETY: after `compile` returns, the module is never touched through a shared reference
// (no method of `NativeCode` reaches it), and it is only used again by `drop`, which has
// exclusive access. What it holds (page mappings owned by this module alone, symbol tables,
// boxed closures) is not tied to the thread that made it. The code itself is immutable
// (read-execute) and may be executed by any number of threads at once: it keeps no state
// of its own, every run brings its own `RunState`.
unsafe impl Send for NativeCode {}
// SAFETY: see `Send` above; `&NativeCode` only allows calling and reading the immutable code.
unsafe impl Sync for NativeCode {}

impl NativeCode {
    /// Compiles `build`'s function. `build` receives the function to fill in (signature
    /// already set) and the ABI to call trampolines with.
    pub(crate) fn compile(
        isa: OwnedTargetIsa,
        build: impl FnOnce(&mut Function, &Abi) -> Result<(), CompileError>,
    ) -> Result<NativeCode, CompileError> {
        let abi = Abi { call_conv: isa.default_call_conv() };
        let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        let signature = abi.entry();
        let id = module.declare_anonymous_function(&signature).map_err(backend)?;
        let mut ctx = module.make_context();
        ctx.func.signature = signature;
        build(&mut ctx.func, &abi)?;
        module.define_function(id, &mut ctx).map_err(|e| match e {
            cranelift_module::ModuleError::Compilation(err) => backend(format!("{err:?}")),
            other => backend(other),
        })?;
        let len = ctx.compiled_code().map_or(0, |code| code.code_buffer().len());
        module.clear_context(&mut ctx);
        module.finalize_definitions().map_err(backend)?;
        let code = module.get_finalized_function(id);
        // SAFETY: `code` is the start of the function just finalized, compiled with the
        // signature `Abi::entry` in the host's default (C) calling convention: one pointer
        // parameter, one 64-bit result, exactly `EntryFn`. The memory stays mapped
        // read-execute until `drop` frees it, and `NativeCode` owns both.
        let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(code) };
        Ok(NativeCode { module: Some(module), entry, code, len })
    }

    pub(crate) fn entry(&self) -> EntryFn {
        self.entry
    }

    /// The machine code, as mapped for execution.
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `code..code + len` is the finalized function: mapped readable (and
        // executable, never writable) by the module this value owns, until `drop`; the
        // borrow of `self` keeps it alive for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.code, self.len) }
    }
}

impl Drop for NativeCode {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: nothing can be running the code: runs borrow the owning `JitProgram`,
            // and it is being dropped. The only pointers into the memory (`entry`, `code`)
            // are fields of this value and die with it.
            unsafe { module.free_memory() };
        }
    }
}
