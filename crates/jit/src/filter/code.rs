//! The executable side of a native filter: the host ISA (built once per process), compiling
//! the one Cranelift function with `cranelift-jit`, and owning the code memory. All of the
//! filter compiler's `unsafe` lives here: turning the finalized address into a callable
//! function, calling it, reading the code bytes back, and freeing the memory.
//!
//! `cranelift-jit` writes the code into read-write pages and, in `finalize_definitions`,
//! flushes the instruction cache where the CPU needs it and remaps the pages read-execute
//! before the address is handed out: the memory is never writable and executable at once.
//! The function references no symbol (set tables are reached through addresses baked in as
//! constants, see `super::set`), so there is nothing to relocate or look up.

use std::sync::OnceLock;

use cranelift_codegen::ir::{types, AbiParam, Function, Signature};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Module};

use super::CompileError;

/// The generated function: `(packet, captured length, wire length) -> match?`. It reads
/// the packet only inside `packet..packet + captured length`, and nothing else but the set
/// tables its filter owns. It returns a byte that is exactly 0 or 1, so it is declared as
/// returning `bool`: then [`Code::call`] is a bare tail call, no test of the result.
type EntryFn = unsafe extern "C" fn(*const u8, usize, u32) -> bool;

/// The host's ISA, tuned for speed, built once: detecting the CPU's features and building
/// the flags takes longer than compiling a small filter.
pub(super) fn host_isa() -> Result<OwnedTargetIsa, CompileError> {
    static ISA: OnceLock<Result<OwnedTargetIsa, String>> = OnceLock::new();
    ISA.get_or_init(build_isa).clone().map_err(CompileError::Host)
}

fn build_isa() -> Result<OwnedTargetIsa, String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(|e| text(&e))?;
    // The IR verifier catches lowering bugs; tests and debug builds run it, release builds
    // trust them and save the time.
    let verify = if cfg!(debug_assertions) { "true" } else { "false" };
    flags.set("enable_verifier", verify).map_err(|e| text(&e))?;
    // cranelift-jit maps the code at any address and patches nothing: no PIC needed.
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

/// The signature of [`EntryFn`] in the host's C calling convention.
pub(super) fn entry_signature(isa: &OwnedTargetIsa) -> Signature {
    let mut sig = Signature::new(isa.default_call_conv());
    sig.params.push(AbiParam::new(types::I64)); // packet
    sig.params.push(AbiParam::new(types::I64)); // captured length
    sig.params.push(AbiParam::new(types::I32)); // wire length
    sig.returns.push(AbiParam::new(types::I8)); // 0 or 1: a C `bool`
    sig
}

fn backend(e: impl std::fmt::Display) -> CompileError {
    CompileError::Backend(e.to_string())
}

/// Executable code for one filter, freed when dropped.
pub(super) struct Code {
    /// Kept only to free the code memory on drop.
    module: Option<JITModule>,
    entry: EntryFn,
    start: *const u8,
    len: usize,
}

// SAFETY: after `compile` returns, the module is never used through a shared reference (no
// method of `Code` reaches it); only `drop`, with exclusive access, uses it again. What it
// holds (page mappings owned by it alone, symbol tables) is not tied to the thread that
// made it. The code is immutable (read-execute) and keeps no state: any number of threads
// may run it at once, each call with its own arguments.
unsafe impl Send for Code {}
// SAFETY: see `Send`: `&Code` only allows calling and reading the immutable code.
unsafe impl Sync for Code {}

impl Code {
    /// Compiles the function `build` fills in (its signature already set to
    /// [`entry_signature`]).
    pub(super) fn compile(
        isa: OwnedTargetIsa,
        build: impl FnOnce(&mut Function) -> Result<(), CompileError>,
    ) -> Result<Code, CompileError> {
        let signature = entry_signature(&isa);
        let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        let id = module.declare_anonymous_function(&signature).map_err(backend)?;
        let mut ctx = module.make_context();
        ctx.func.signature = signature;
        build(&mut ctx.func)?;
        module.define_function(id, &mut ctx).map_err(|e| match e {
            cranelift_module::ModuleError::Compilation(err) => backend(format!("{err:?}")),
            other => backend(other),
        })?;
        let len = ctx.compiled_code().map_or(0, |code| code.code_buffer().len());
        module.clear_context(&mut ctx);
        module.finalize_definitions().map_err(backend)?;
        let start = module.get_finalized_function(id);
        // SAFETY: `start` is the function just finalized, compiled with `entry_signature`
        // in the host's default (C) calling convention: two 64-bit parameters and one
        // 32-bit parameter, an 8-bit result that is always 0 or 1 (the lowering returns
        // only those two constants and results of `icmp`, their `band`, or an `icmp`
        // result XOR 1), exactly `EntryFn` with its `bool`. The memory stays mapped
        // read-execute until `drop` frees it, and `Code` owns both.
        let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(start) };
        Ok(Code { module: Some(module), entry, start, len })
    }

    /// Runs the filter on one packet: true when it matches.
    #[inline]
    pub(super) fn call(&self, packet: &[u8], wire_len: u32) -> bool {
        // SAFETY: the generated code reads memory only at `packet.as_ptr() + k` after
        // checking `k + size <= packet.len()` on the path that reaches the load (the
        // lowering's invariant, see `super::lower`), and reads the filter's set tables,
        // which the `NativeFilter` owning this code keeps alive and never changes. It
        // writes no memory but its own stack frame, and it always returns (the IR has no
        // loops). The borrow of `self` keeps the code mapped for the call.
        unsafe { (self.entry)(packet.as_ptr(), packet.len(), wire_len) }
    }

    /// The machine code, as mapped for execution.
    pub(super) fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `start..start + len` is the finalized function, mapped readable (and
        // executable, never writable) by the module this value owns until `drop`; the
        // borrow of `self` keeps it alive for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.start, self.len) }
    }
}

impl Drop for Code {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: nothing can be running the code: calls borrow the owning
            // `NativeFilter`, which is being dropped. The only pointers into the memory
            // (`entry`, `start`) are fields of this value and die with it.
            unsafe { module.free_memory() };
        }
    }
}
