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

use cranelift_codegen::ir::{types, AbiParam, Function, Signature};
use cranelift_codegen::isa::OwnedTargetIsa;

use weir_filter::SCRATCH_SLOTS;

use super::CompileError;
use crate::code_memory::CodeMemory;

/// The generated function: `(packet, captured length, wire length) -> match?`. It reads
/// the packet only inside `packet..packet + captured length`, and nothing else but the set
/// tables its filter owns. It returns a byte that is exactly 0 or 1, so it is declared as
/// returning `bool`: then [`Code::call`] is a bare tail call, no test of the result.
type EntryFn = unsafe extern "C" fn(*const u8, usize, u32) -> bool;

/// The host's ISA (built once per process, see [`crate::code_memory::host_isa`]).
pub(super) fn host_isa() -> Result<OwnedTargetIsa, CompileError> {
    crate::code_memory::host_isa().map_err(CompileError::Host)
}

/// The host's ISA without Cranelift's optimizations, for large functions (see
/// [`super::OPTIMIZE_MAX_NODES`]).
pub(super) fn host_isa_unoptimized() -> Result<OwnedTargetIsa, CompileError> {
    crate::code_memory::host_isa_unoptimized().map_err(CompileError::Host)
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

/// A piece of a filter split over several functions: `(packet, captured length, wire
/// length) -> 0 | 1 | 2` (false, true, aborted), read as a byte.
type PieceFn = unsafe extern "C" fn(*const u8, usize, u32) -> u8;

/// Executable code for one piece of a split filter (see `super::split`).
pub(super) struct Piece {
    memory: CodeMemory,
    entry: PieceFn,
}

impl Piece {
    /// Compiles the function `build` fills in (its signature already set to
    /// [`entry_signature`]).
    pub(super) fn compile(
        isa: OwnedTargetIsa,
        build: impl FnOnce(&mut Function) -> Result<(), CompileError>,
    ) -> Result<Piece, CompileError> {
        let signature = entry_signature(&isa);
        let memory = CodeMemory::compile(isa, signature, build, CompileError::Backend)?;
        // SAFETY: `start` is the function just finalized, compiled with `entry_signature`
        // in the host's default (C) calling convention: two 64-bit parameters, one 32-bit
        // parameter and an 8-bit result, exactly `PieceFn` (any byte is a valid `u8`).
        // `memory` keeps it mapped read-execute for as long as this value, which owns both,
        // lives.
        let entry = unsafe { std::mem::transmute::<*const u8, PieceFn>(memory.start()) };
        Ok(Piece { memory, entry })
    }

    /// Runs the piece on one packet: 0 false, 1 true, 2 aborted.
    #[inline]
    pub(super) fn call(&self, packet: &[u8], wire_len: u32) -> u8 {
        // SAFETY: as for `Code::call`: the piece reads only checked bytes of `packet` (its
        // lowering starts knowing nothing about the captured length) and the tables the
        // owning `NativeFilter` keeps alive, writes only its own stack frame, and returns.
        unsafe { (self.entry)(packet.as_ptr(), packet.len(), wire_len) }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        self.memory.bytes()
    }
}

/// A filter that reports scratch slots: `(packet, captured length, wire length, results)
/// -> 0 | 1 | 2` (no match, match, or for a hot half: left to the whole function, see
/// `super::lower::BAIL`), writing on a match (1 only) as many 32-bit words at `results` as
/// it reports slots (at most [`SCRATCH_SLOTS`]), and on no match (0) a 0 to the first.
type ResultsFn = unsafe extern "C" fn(*const u8, usize, u32, *mut u32) -> u8;

/// Executable code for a filter that reports scratch slots (see `super::compile_results`).
pub(super) struct ResultsCode {
    memory: CodeMemory,
    entry: ResultsFn,
}

impl ResultsCode {
    /// Compiles the function `build` fills in (its signature already set to
    /// [`entry_signature`] plus a pointer parameter).
    pub(super) fn compile(
        isa: OwnedTargetIsa,
        build: impl FnOnce(&mut Function) -> Result<(), CompileError>,
    ) -> Result<ResultsCode, CompileError> {
        let mut signature = entry_signature(&isa);
        signature.params.push(AbiParam::new(types::I64)); // results
        let memory = CodeMemory::compile(isa, signature, build, CompileError::Backend)?;
        // SAFETY: `start` is the function just finalized, compiled with `entry_signature`
        // plus a 64-bit pointer parameter in the host's default (C) calling convention,
        // exactly `ResultsFn` (any byte is a valid `u8`; the lowering returns only the
        // constants 0, 1 and `BAIL` when it reports results, never a compare's result).
        // `memory` keeps it mapped read-execute for as long as this value lives.
        let entry = unsafe { std::mem::transmute::<*const u8, ResultsFn>(memory.start()) };
        Ok(ResultsCode { memory, entry })
    }

    /// Runs the code on one packet: 1 when it matches (and then `results` holds the
    /// reported slots), 0 when not (`results[0]` then 0), `BAIL` when a hot half leaves it
    /// to the whole function (`results` untouched).
    #[inline]
    pub(super) fn call(
        &self,
        packet: &[u8],
        wire_len: u32,
        results: &mut [u32; SCRATCH_SLOTS as usize],
    ) -> u8 {
        // SAFETY: as for `Code::call` for the packet and tables; besides its stack frame,
        // the code writes only `results[..n]` for the n <= SCRATCH_SLOTS slots it reports
        // (`super::compile_results` refuses more), inside the exclusively borrowed array.
        unsafe { (self.entry)(packet.as_ptr(), packet.len(), wire_len, results.as_mut_ptr()) }
    }

    /// The machine code, as mapped for execution.
    pub(super) fn bytes(&self) -> &[u8] {
        self.memory.bytes()
    }
}

/// Executable code for one filter.
pub(super) struct Code {
    memory: CodeMemory,
    entry: EntryFn,
}

impl Code {
    /// Compiles the function `build` fills in (its signature already set to
    /// [`entry_signature`]).
    pub(super) fn compile(
        isa: OwnedTargetIsa,
        build: impl FnOnce(&mut Function) -> Result<(), CompileError>,
    ) -> Result<Code, CompileError> {
        let signature = entry_signature(&isa);
        let memory = CodeMemory::compile(isa, signature, build, CompileError::Backend)?;
        // SAFETY: `start` is the function just finalized, compiled with `entry_signature`
        // in the host's default (C) calling convention: two 64-bit parameters and one
        // 32-bit parameter, an 8-bit result that is always 0 or 1 (the lowering returns
        // only those two constants and results of `icmp`, their `band`, or an `icmp`
        // result XOR 1), exactly `EntryFn` with its `bool`. `memory` keeps it mapped
        // read-execute for as long as this value, which owns both, lives.
        let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(memory.start()) };
        Ok(Code { memory, entry })
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
        self.memory.bytes()
    }
}

/// Fields per test of a [`weir_filter::Pred::Pairs`] whose loaded values the native code
/// records (one mask bit each); its values area holds twice as many words, the first
/// test's then the second's. A test with more fields is compiled as its expansion.
pub(super) const PAIR_FIELDS: usize = 16;

/// What the code of a [`weir_filter::Pred::Pairs`] calls once it has walked both tests
/// (`super::pairs`): the values it loaded are at `values` (word `i` for bit `i` of
/// `first_mask`, word `PAIR_FIELDS + i` for bit `i` of `second_mask`), `aborted` has bit 0
/// set when the first test's walk aborted and bit 1 when the second's did. Returns 0
/// (false), 1 (true) or 2 (the list aborts): [`weir_filter::PairTable::decide`]. It never
/// panics (a panic could not unwind out of an `extern "C"` function: it would abort).
pub(super) extern "C" fn decide_pairs(
    table: *const weir_filter::PairTable,
    values: *const u32,
    first_mask: u32,
    second_mask: u32,
    aborted: u32,
) -> u32 {
    // SAFETY: the generated code passes the address of a `PairTable` whose `Arc` the
    // `NativeFilter` (or `NativeResults`) running it keeps in its tables, so it is alive
    // and, being shared, never written.
    let table = unsafe { &*table };
    // The recorded values, packed in field order.
    let read = |mask: u32, base: usize, out: &mut [u32; PAIR_FIELDS]| -> usize {
        let mut n = 0;
        for i in (0..PAIR_FIELDS).filter(|i| mask & (1 << i) != 0) {
            if let Some(slot) = out.get_mut(n) {
                // SAFETY: `values` is the code's own stack area of `2 * PAIR_FIELDS`
                // words, live for the call; the code sets bit `i` of a mask only after
                // storing word `base + i`, so this reads an initialized word in bounds.
                *slot = unsafe { values.add(base + i).read() };
                n += 1;
            }
        }
        n
    };
    let (mut first, mut second) = ([0u32; PAIR_FIELDS], [0u32; PAIR_FIELDS]);
    let nf = read(first_mask, 0, &mut first);
    let ns = read(second_mask, PAIR_FIELDS, &mut second);
    let verdict = table.decide(
        first.get(..nf).unwrap_or(&[]),
        aborted & 1 != 0,
        second.get(..ns).unwrap_or(&[]),
        aborted & 2 != 0,
    );
    match verdict {
        Ok(false) => 0,
        Ok(true) => 1,
        Err(_) => 2,
    }
}
