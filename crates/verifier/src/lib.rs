//! `weir-verifier`: proves an eBPF program safe before any engine runs it, the way the
//! Linux verifier does, so that a program weir accepts is one the kernel accepts too, and so
//! that the JIT can drop the run-time checks it proves unnecessary (`weir_program::Facts`:
//! per access, in bounds and in which region; per division, a non-zero divisor; a bound on
//! any run's length).
//!
//! Its place in the pipeline: a front end makes a [`weir_program::Program`];
//! [`weir_program::validate`] checks its structure; [`verify`] proves it safe for a program
//! type and makes a [`weir_program::Verified`] with [`weir_program::Assurance::Proven`] and
//! the per-instruction [`weir_program::Facts`] ([`Proof::into_verified`]); engines run it.
//!
//! ```
//! use weir_isa::asm::assemble;
//! use weir_program::{Program, ProgType};
//! use weir_verifier::{verify, Options, Rule};
//!
//! // XDP: read the first byte only after proving the packet holds it.
//! let ok = assemble(
//!     "ldxw %r2, [%r1+0]\n ldxw %r3, [%r1+4]\n mov %r0, 1\n mov %r4, %r2\n add %r4, 1\n\
//!      jgt %r4, %r3, +1\n ldxb %r0, [%r2+0]\n exit",
//! )
//! .unwrap();
//! let program = Program::from_insns(ok).with_prog_type(ProgType::Xdp);
//! let proof = verify(&program, &Options::default()).unwrap();
//! assert_eq!(proof.facts().get(6).access_in_bounds, Some(true));
//! assert_eq!(proof.facts().get(6).region, Some(weir_program::Region::Packet));
//!
//! // The same load without the comparison is refused, as the kernel refuses it.
//! let bad = assemble("ldxw %r2, [%r1+0]\n ldxb %r0, [%r2+0]\n exit").unwrap();
//! let rejection = verify(&Program::from_insns(bad).with_prog_type(ProgType::Xdp), &Options::default())
//!     .unwrap_err();
//! assert_eq!((rejection.pc, rejection.rule), (1, Rule::OutOfBounds));
//! ```
//!
//! # How: path exploration with state pruning, not widening
//!
//! The analysis follows the kernel: a depth-first walk over the program's paths, one
//! abstract [`state::State`] per path, with a stack of pending branches. At jump targets
//! (and after conditional jumps and calls) a state is compared with the states already
//! explored there: when one of them covers it ([`state::state_subsumes`], on the registers
//! live at that point, comparing the values of scalars only where they can still matter
//! for safety: the kernel's precise scalars, found by a static pass), the path is pruned. Loops are therefore unrolled until their states
//! repeat or are covered; a state equal to one still being explored on the same path is an
//! infinite loop, and a budget of 1,000,000 processed instructions ends everything else
//! ("program too complex").
//!
//! Widening (an abstract-interpretation fixpoint, as PREVAIL does) would prove loops in
//! fewer steps, but it accepts and rejects different programs than the kernel: a loop the
//! kernel unrolls exactly (a constant trip count bounding an index) loses its bound when
//! widened, and a loop widening accepts may exceed the kernel's budget. weir's goal is to
//! agree with the kernel, so it explores paths as the kernel does, with the kernel's
//! budget, and behaves as the kernel's *privileged* verifier (we load as root: pointer
//! leaks and pointer comparisons are allowed).
//!
//! Modules: [`domain`] (what is known of one value), [`state`] (registers, stack, frames,
//! subsumption), `cfg` (unreachable code, prune points, liveness and the static precision
//! pass), `analyze` (the walk and the rules of each instruction), `helpers` (calls checked
//! against `weir_program::abi::KERNEL_HELPERS`).
//!
//! Tests: `tests/rules.rs` (an accepted and a refused program per rule),
//! `tests/soundness.rs` (random and conformance programs against the interpreter),
//! `tests/robustness.rs` (random and mutated bytes never panic); in the facade,
//! `verify.rs` (the object corpus and the Linux verdicts of `testdata/verifier`),
//! `verify_kernel.rs` (random typed programs against the Linux verifier, root only) and
//! `verify_soundness.rs` (typed programs against the interpreter).

mod analyze;
mod cfg;
pub mod domain;
mod helpers;
pub mod state;

use std::fmt;
use std::time::Duration;

use weir_isa::ebpf::{Insn, Op, Operands};
use weir_program::{Facts, ProgType, Program, ValidateError, Verified};

/// How to verify.
#[derive(Clone, Debug)]
pub struct Options {
    /// The program type (`None`: the program's own; an untyped program follows the
    /// conformance convention: r1 = memory of [`Options::memory_len`] bytes, r2 = its length).
    pub prog_type: Option<ProgType>,
    /// The helper ids the runtime binds (`None`: all): a program may call those of
    /// `weir_program::abi::KERNEL_HELPERS` its type is offered that are also in this list.
    pub helpers: Option<Vec<u32>>,
    /// Record the state at every processed instruction ([`Proof::log`]) and in traces.
    pub log: bool,
    /// Processed-instruction budget (the kernel's 1,000,000).
    pub budget: u64,
    /// Untyped programs: the size of the memory r1 points to (`None`: unknown, so no
    /// access through r1 can be proven).
    pub memory_len: Option<u64>,
    /// Keep every state seen at every instruction ([`Proof::states`]), for soundness tests.
    pub record_states: bool,
    /// The kernel's rules for unprivileged loaders where they differ and are cheap to
    /// keep: reading stack never written and variable stack offsets are refused. Default:
    /// privileged (weir loads as root, and tests against the kernel as root).
    pub unprivileged: bool,
    /// The program comes with BTF `func_info` (a clang-built object's `.BTF.ext`): the
    /// kernel lets a program take a function's address (`lddw func`, a callback for
    /// `bpf_loop`) only then ("missing btf func_info"). A bare listing has none.
    pub func_info: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prog_type: None,
            helpers: None,
            log: false,
            budget: 1_000_000,
            memory_len: None,
            record_states: false,
            unprivileged: false,
            func_info: false,
        }
    }
}

/// Every rule a program can break, one variant each, with a stable short name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Structural errors (`weir_program::validate`).
    Structure,
    /// An instruction no path reaches.
    Unreachable,
    /// More than the budget of processed instructions.
    TooComplex,
    /// A loop whose state repeats.
    InfiniteLoop,
    /// Reading a register never written.
    UninitRegister,
    /// Memory access through something that is not a pointer to memory.
    InvalidMemAccess,
    /// An access outside its object (packet range, map value, stack, memory).
    OutOfBounds,
    /// Reading stack bytes never written ([`Options::unprivileged`] only).
    UninitStack,
    /// A stack access not aligned to its size (the kernel aligns the stack strictly).
    Misaligned,
    /// A stack or context access at a variable offset.
    VariableOffset,
    /// A context access the program type's layout does not allow.
    ContextAccess,
    /// A write to read-only memory.
    ReadOnly,
    /// Pointer arithmetic the kernel prohibits.
    PointerArithmetic,
    /// Division or remainder by the constant 0.
    DivisionByZero,
    /// A shift by an immediate outside the operation's width.
    InvalidShift,
    /// A call to a helper that is unknown or not offered to the program type.
    UnknownHelper,
    /// A helper argument of the wrong type, size or bounds.
    HelperArgument,
    /// A map of a type the helper does not take.
    MapHelperMismatch,
    /// A map reference that names no map.
    InvalidMap,
    /// A reference (ring buffer sample) still held at exit.
    UnreleasedReference,
    /// Releasing what is not a reference.
    InvalidRelease,
    /// More than 8 call frames, or recursion.
    CallDepth,
    /// Frames together using more than 512 bytes of stack.
    StackDepth,
    /// `ldabs`/`ldind` outside socket filters and tc, or without the context in r6.
    LegacyPacketAccess,
    /// An instruction the verifier (or weir) does not support (kfunc, callx, BTF ids).
    Unsupported,
    /// A callback (`bpf_loop`): its address needs BTF func_info, it returns 0 or 1.
    Callback,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Structure => "structure",
            Rule::Unreachable => "unreachable",
            Rule::TooComplex => "too-complex",
            Rule::InfiniteLoop => "infinite-loop",
            Rule::UninitRegister => "uninit-register",
            Rule::InvalidMemAccess => "invalid-mem-access",
            Rule::OutOfBounds => "out-of-bounds",
            Rule::UninitStack => "uninit-stack",
            Rule::Misaligned => "misaligned",
            Rule::VariableOffset => "variable-offset",
            Rule::ContextAccess => "ctx-access",
            Rule::ReadOnly => "read-only",
            Rule::PointerArithmetic => "pointer-arithmetic",
            Rule::DivisionByZero => "division-by-zero",
            Rule::InvalidShift => "invalid-shift",
            Rule::UnknownHelper => "unknown-helper",
            Rule::HelperArgument => "helper-argument",
            Rule::MapHelperMismatch => "map-helper-mismatch",
            Rule::InvalidMap => "invalid-map",
            Rule::UnreleasedReference => "unreleased-reference",
            Rule::InvalidRelease => "invalid-release",
            Rule::CallDepth => "call-depth",
            Rule::StackDepth => "stack-depth",
            Rule::LegacyPacketAccess => "legacy-packet-access",
            Rule::Unsupported => "unsupported",
            Rule::Callback => "callback",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a program was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The slot of the offending instruction.
    pub pc: usize,
    pub rule: Rule,
    /// The kernel's wording where it has one, e.g. "R1 invalid mem access 'scalar'".
    pub message: String,
    /// The path that led there: the last instructions with the state before each, then the
    /// state at the refused instruction.
    pub trace: Vec<String>,
}

impl Rejection {
    pub(crate) fn new(pc: usize, rule: Rule, message: impl Into<String>) -> Rejection {
        Rejection { pc, rule, message: message.into(), trace: Vec::new() }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} [{}]", self.pc, self.message, self.rule)
    }
}

impl std::error::Error for Rejection {}

impl From<ValidateError> for Rejection {
    fn from(e: ValidateError) -> Rejection {
        Rejection::new(e.index, Rule::Structure, e.kind.to_string())
    }
}

/// Counts about one verification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Instructions processed over all paths (what the budget counts).
    pub insns_processed: u64,
    /// States stored for pruning.
    pub states: u64,
    /// Most states stored at once.
    pub peak_states: u64,
    /// Paths cut by pruning.
    pub pruned: u64,
    /// Longest chain of pending branches.
    pub max_pending: u64,
    pub time: Duration,
}

/// What the verifier keeps about one register at one instruction ([`Options::record_states`]).
pub type RecordedState = state::Frame;

/// An accepted program's certificate: statistics and facts. The facts are read-only
/// ([`Proof::facts`]) and stay bound to the program they are about: engines drop checks on
/// their strength, so [`Proof::into_verified`] takes only that program.
#[derive(Clone, Debug)]
pub struct Proof {
    pub stats: Stats,
    facts: Facts,
    /// The instructions proven (what [`Proof::into_verified`] compares with).
    program: Vec<Insn>,
    /// The program type it was verified for (`None`: untyped, conformance convention).
    pub prog_type: Option<ProgType>,
    /// With [`Options::log`]: one line per processed instruction.
    pub log: Vec<String>,
    /// With [`Options::record_states`]: per slot, the top frame of every state the walk
    /// had there, pruned visits included (pruning compares live registers only, so the
    /// state pruned against need not cover a dead register).
    pub states: Vec<Vec<RecordedState>>,
    /// With [`Options::record_states`]: per slot, the registers whose values pruning
    /// compares there (bit `r` for `r<r>`: live, and able to matter for safety); after a
    /// pruned path only these are covered by [`Proof::states`].
    pub precise: Vec<u16>,
}

impl Proof {
    /// What was proven, per slot, and what it assumes of a run.
    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// The program as engines take it, with [`weir_program::Assurance::Proven`] and these
    /// facts. `program` must be the program verified, slot for slot, except that map
    /// references (`lddw map_idx`, `lddw map_idx_value`, ...) may have been resolved to
    /// plain `lddw`s of the same register, as loading does; anything else is refused
    /// ([`ValidateError`] at the first differing slot), since the facts say nothing about
    /// another program.
    pub fn into_verified(self, program: Program) -> Result<Verified, ValidateError> {
        if let Some(index) = first_difference(&self.program, program.insns()) {
            return Err(ValidateError { index, kind: weir_program::ValidateErrorKind::NotProven });
        }
        // SAFETY: the facts are this analysis' results for `self.program` (they cannot be
        // changed from outside: the field is private), and `program` is that program up to
        // resolved map references, which change no access, division or control flow (an
        // engine reads a resolved reference as a number, never through it).
        unsafe { Verified::proven(program, self.facts) }
    }

    /// One line: what was proven and what it cost.
    pub fn summary(&self) -> String {
        let accesses = self.facts.insns.iter().filter(|f| f.access_in_bounds == Some(true)).count();
        let runtime = self.facts.insns.iter().filter(|f| f.access_in_bounds == Some(false)).count();
        let divs = self.facts.insns.iter().filter(|f| f.divisor_nonzero == Some(true)).count();
        format!(
            "accepted{}: {} insns processed, {} states ({} peak), {} pruned, {} accesses proven in bounds{}, {} divisors proven non-zero, {:.2} ms",
            match self.prog_type {
                Some(t) => format!(" as {}", t.name()),
                None => String::new(),
            },
            self.stats.insns_processed,
            self.stats.states,
            self.stats.peak_states,
            self.stats.pruned,
            accesses,
            if runtime > 0 { format!(" ({runtime} legacy packet loads checked at run time)") } else { String::new() },
            divs,
            self.stats.time.as_secs_f64() * 1e3,
        )
    }
}

/// The first slot where `given` is not the program `proven` (map references resolved to
/// plain `lddw`s aside), or `None`.
fn first_difference(proven: &[Insn], given: &[Insn]) -> Option<usize> {
    if proven.len() != given.len() {
        return Some(proven.len().min(given.len()));
    }
    let mut resolved_high = false;
    for (index, (p, g)) in proven.iter().zip(given).enumerate() {
        let high = std::mem::take(&mut resolved_high);
        if p == g {
            continue;
        }
        let map_reference = matches!(p.op.spec().map(|s| s.operands), Some(Operands::Pseudo(_)))
            && !matches!(p.op, Op::LddwFunc);
        if map_reference && g.op == Op::Lddw && g.dst == p.dst {
            resolved_high = true;
            continue;
        }
        if high && p.op == Op::LddwHigh && g.op == Op::LddwHigh {
            continue;
        }
        return Some(index);
    }
    None
}

/// Proves `program` safe, or says where and why not.
pub fn verify(program: &Program, options: &Options) -> Result<Proof, Rejection> {
    weir_program::validate(program)?;
    match analyze::Verifier::new(program, options)?.run() {
        Ok(proof) => Ok(proof),
        // The walk is deterministic: walking again, formatting the states of the last
        // steps only, gives the same rejection with the state before each instruction of
        // its trace (formatting states on every step would slow every program down).
        Err((rejection, processed)) if !options.log && !rejection.trace.is_empty() => {
            let again =
                analyze::Verifier::new(program, options).map(|v| v.tracing_until(processed).run());
            match again {
                Ok(Err((traced, _)))
                    if traced.pc == rejection.pc && traced.rule == rejection.rule =>
                {
                    Err(Rejection { trace: traced.trace, ..rejection })
                }
                _ => Err(rejection),
            }
        }
        Err((rejection, _)) => Err(rejection),
    }
}
