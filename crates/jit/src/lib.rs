//! `weir-jit`: eBPF compiled to native code through Cranelift, with exactly the reference
//! interpreter's meaning: the same results, the same traps (code, pc, address, size), the
//! same memory and stack afterwards, and the same count of executed instructions.
//!
//! The shape is the interpreter's: a [`Config`], an immutable [`JitProgram`] compiled once
//! ([`Jit::compile`]) and shareable between threads, a per-thread [`Cache`] (stack and saved
//! frames), and runs taking an [`Input`] (context, packet, memory).
//!
//! How the generated code keeps the interpreter's semantics (module [`codegen`] has the
//! details):
//! - **Registers** are Cranelift variables, so they live in host registers as SSA values.
//! - **Memory** is the interpreter's virtual address space ([`guest`]): every load and store
//!   looks its window up in a small region table and does one unsigned compare; a failed
//!   check leaves the generated code with an `OutOfBounds` trap before touching anything.
//!   When a register's pointers most likely point into one region (copies and sums of `r1`,
//!   `r10`, packet pointers loaded from the context), its accesses first check that region
//!   alone against bounds held in registers, and take the table only when that fails.
//!   Accesses through `r10` inside the running frame need no check at all. Stores to the
//!   context take a slow path that applies the layout's writable fields (`ReadOnly`).
//! - **The instruction budget** is charged once per basic block; a block that would overrun
//!   it runs a cold copy of itself that stops at exactly the instruction where the
//!   interpreter stops, so budget traps, their pc and the executed count all match.
//! - **Local calls** (direct, and `call %reg` to any instruction) keep the interpreter's
//!   frames: r6-r10 saved in the cache, a fresh stack frame below the caller's, the depth
//!   limit, and the stack floor that hides frames not (or no longer) in use.
//! - **Helpers** are called through one trampoline with the C ABI; `Stop` and `Fail`
//!   end the run as in the interpreter, and a panicking helper's panic is resumed in Rust.
//!
//! Code memory ([`code_memory`]) is never writable and executable at once: `cranelift-jit` writes it, then
//! makes it read-execute before anything runs. With [`Config::blinding`], immediates are
//! XORed with a random key so that a program's constants never appear in the machine code.
//!
//! ```
//! use weir_isa::ebpf::{Insn, Op};
//! use weir_jit::{Config, Jit};
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
//! let jit = Jit::compile(&program, Bindings::conformance(), Config::default()).unwrap();
//! let mut cache = jit.cache();
//! let mut mem = [0, 0, 0, 0, 41, 0, 0, 0];
//! assert_eq!(jit.run_mem(&mut cache, &mut mem), Ok(42));
//!
//! let trap = jit.run_mem(&mut cache, &mut mem[..6]).unwrap_err();
//! assert_eq!(trap.code, weir_program::TrapCode::OutOfBounds);
//! assert_eq!((trap.pc, trap.addr, trap.size), (0, weir_jit::guest::MEM_BASE + 4, 4));
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

mod cfg;
mod code_memory;
mod codegen;
pub mod filter;
mod run;
mod stack_reach;
mod state;

use weir_program::abi::Bindings;
use weir_program::exec::{Engine, Limits, PrepareError};
use weir_program::Verified;

pub use codegen::facts::Checks;
pub use filter::NativeFilter;
pub use run::{Cache, JitProgram};
pub use weir_program::exec::guest;
pub use weir_program::exec::{Input, RunOutcome};

/// The longest program (in slots) compiled with Cranelift's optimizations; longer ones are
/// compiled without (`opt_level = none`), which keeps compile time about linear in the
/// program. Measured here on `testdata/bpf/big.c` and its variants (3,500, 1,500 and 500
/// unrolled checked packet loads in one basic block): 10,505 slots 8 s and 1 GB optimized,
/// 0.56 s and 160 MB not; 4,505 slots 1.2 s and 240 MB against 0.17 s and 75 MB; 1,505
/// slots 0.10 s either way. Up to this size the optimized code's speed is worth its
/// compile time.
pub const OPTIMIZE_MAX_SLOTS: usize = 2_048;

/// The most slots the JIT compiles by default ([`Config::max_slots`]). Cranelift's time and
/// memory grow faster than the program beyond a few thousand blocks (measured here, one
/// function of alternating branches and additions, compiled optimized, before
/// [`OPTIMIZE_MAX_SLOTS`] existed: 10,000 slots 0.35 s and 118 MB, 20,000 0.88 s and 229
/// MB, 40,000 2.5 s and 426 MB), while the interpreter starts any program at
/// once; so larger programs are refused with the reason, and the facade runs them on the
/// interpreter.
pub const DEFAULT_MAX_SLOTS: usize = 16_384;

/// How a [`JitProgram`] is compiled and run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The limits every engine shares (stack per frame, call depth, instruction budget),
    /// with the same defaults and meaning as in the interpreter.
    pub limits: Limits,
    /// XOR every immediate with a key chosen at random per compilation, undone at run time
    /// with the key loaded from memory, so that no immediate of the program appears in the
    /// machine code (a defence against JIT spraying). Costs one XOR per immediate, and
    /// division by an immediate loses its constant-divisor fast path.
    pub blinding: bool,
    /// Programs longer than this many slots are refused ([`CompileErrorKind::TooManySlots`]).
    pub max_slots: usize,
    /// Unroll the counted loops of proven programs (`codegen::counted`); on by default, off
    /// to measure what it gains.
    pub unroll: bool,
    /// Run the idioms of unrolled loops wide: a copy loop's groups moved with 16-byte
    /// loads and stores (`codegen::copy`), a sum loop's added two words a lane
    /// (`codegen::reduce`); on by default, off to measure what they gain.
    pub wide_copy: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config::with_limits(Limits::default())
    }
}

impl Config {
    /// The configuration with these limits and no blinding.
    pub fn with_limits(limits: Limits) -> Config {
        Config {
            limits,
            blinding: false,
            max_slots: DEFAULT_MAX_SLOTS,
            unroll: true,
            wide_copy: true,
        }
    }
}

/// The compiler. Problems the program's check did not rule out (an unbound helper, a
/// kfunc, a map reference) become traps raised when, and only if, a run reaches them, as in
/// the interpreter.
#[derive(Clone, Copy, Debug, Default)]
pub struct Jit;

impl Jit {
    pub fn compile(
        program: &Verified,
        bindings: Bindings,
        config: Config,
    ) -> Result<JitProgram, CompileError> {
        JitProgram::compile(program, bindings, config)
    }
}

/// The checks [`Jit::compile`] keeps and drops for `program` with `bindings` and
/// `limits` (the same decision, without compiling): what `--explain` reports.
pub fn checks(program: &Verified, bindings: &Bindings, limits: &Limits) -> Checks {
    let shape = weir_program::exec::StackShape::fit(limits);
    codegen::facts::Plan::new(program, bindings, shape, limits.instruction_budget).checks
}

/// The JIT as an [`Engine`] (without blinding): what tables of engines hold.
impl Engine for Jit {
    type Prepared = JitProgram;

    fn name(&self) -> &'static str {
        "jit"
    }

    fn prepare(
        &self,
        program: &Verified,
        bindings: Bindings,
        limits: Limits,
    ) -> Result<JitProgram, PrepareError> {
        Jit::compile(program, bindings, Config::with_limits(limits))
            .map_err(|e| PrepareError::new(e.to_string()))
    }
}

/// Why a program did not compile, and the instruction slot it is about (slot 0 for
/// failures of the program as a whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instruction {index}: {kind}")]
pub struct CompileError {
    pub index: usize,
    pub kind: CompileErrorKind,
}

impl CompileError {
    pub(crate) fn new(index: usize, kind: CompileErrorKind) -> Self {
        CompileError { index, kind }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileErrorKind {
    /// A jump or call target that names no instruction (validation rules this out).
    #[error("jump or call target is not an instruction")]
    BadTarget,
    /// An instruction names a register beyond r10 (validation rules this out).
    #[error("register r{0} does not exist")]
    BadRegister(u8),
    /// An instruction writes r10 (validation rules this out; the JIT relies on it).
    #[error("writes r10, the read-only frame pointer")]
    WritesFramePointer,
    /// The program is longer than [`Config::max_slots`].
    #[error(
        "the program has {slots} slots; the JIT compiles at most {limit} (its compile time \
         grows faster than the program beyond that)"
    )]
    TooManySlots { slots: usize, limit: usize },
    /// More blocks than the code generator can number.
    #[error("the program is too large to compile")]
    TooLarge,
    /// The host is not one Cranelift can generate code for (or not 64-bit).
    #[error("unsupported host: {0}")]
    Host(String),
    /// Cranelift refused the generated function or could not map the code.
    #[error("code generation failed: {0}")]
    Backend(String),
}
