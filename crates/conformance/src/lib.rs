//! `weir-conformance`: the engine-independent conformance corpus and its runner. Every engine
//! weir has runs every case of `testdata/conformance/*.data` and must give the result the
//! case states, worked out by hand from RFC 9669 (and, where the kernel can run it, checked
//! against the kernel by `tests/kernel_oracle.rs`). This crate is test-only.
//!
//! A case file is a sequence of sections, each opened by a line `-- name`; `#` starts a
//! comment anywhere outside `-- description`:
//!
//! ```text
//! -- description
//! INT64_MAX + 1 wraps to INT64_MIN.
//! -- asm
//! lddw %r0, 0x7fffffffffffffff
//! add %r0, 1
//! exit
//! -- result
//! 0x8000000000000000
//! ```
//!
//! - `-- asm` (assembly text) or `-- raw` (64-bit words, each the little-endian `u64` of one
//!   8-byte slot, e.g. `0x0000000000000095` for `exit`): the program.
//! - `-- mem` (optional): hex bytes; at run time `r1` = its address, `r2` = its length.
//! - `-- result` (`r0` as a hex `u64`) or `-- error` (a case-insensitive substring of the
//!   error weir reports: assembly, decoding, validation or trap).
//! - `-- description` (optional): free text.

pub mod fuzz_checks;
pub mod kernel_prep;
mod parse;

use std::fmt;
use std::path::{Path, PathBuf};

use weir_interp::{Config, Interpreter};
use weir_isa::ebpf::{decode, RawInsn};
use weir_program::abi::Bindings;
use weir_program::{validate, Program};

pub use parse::{parse_case, ParseError};

/// One conformance case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The file name without `.data`.
    pub name: String,
    pub source: Source,
    /// The input memory; empty when the case has none (`r1` is then 0).
    pub mem: Vec<u8>,
    pub expect: Expect,
    /// The `-- description` text, empty if absent.
    pub description: String,
}

/// How a case writes its program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Assembly text, exactly as in the file (so assembler line numbers count from the
    /// section's first line).
    Asm(String),
    /// One little-endian `u64` per slot.
    Raw(Vec<u64>),
}

/// What a case must produce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The program runs and returns this `r0`.
    Result(u64),
    /// Assembling, decoding, validating or running fails with a message containing this
    /// text (compared case-insensitively).
    Error(String),
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Result(v) => write!(f, "result {v:#x}"),
            Expect::Error(e) => write!(f, "error containing {e:?}"),
        }
    }
}

/// Assembles or decodes a case's program, then validates it.
pub fn load_program(case: &Case) -> Result<Program, String> {
    let insns = match &case.source {
        Source::Asm(text) => weir_isa::asm::assemble(text).map_err(|e| format!("assembly: {e}"))?,
        Source::Raw(words) => {
            let slots: Vec<RawInsn> = words.iter().map(|w| RawInsn::from_u64(*w)).collect();
            decode(&slots).map_err(|e| format!("decode: {e}"))?
        }
    };
    let program = Program::from_insns(insns);
    validate(&program).map_err(|e| format!("validation: {e}"))?;
    Ok(program)
}

/// An engine that can run a validated program on a case's memory.
pub trait Engine {
    fn name(&self) -> &str;
    /// Runs `program` once with the conformance bindings (helper 5 is "unwind"); returns
    /// `r0`, or the error message (a trap, or a program the engine refuses).
    fn run(&self, program: &Program, mem: &mut [u8]) -> Result<u64, String>;
}

/// The reference interpreter with its default configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct InterpreterEngine;

impl Engine for InterpreterEngine {
    fn name(&self) -> &str {
        "interpreter"
    }

    fn run(&self, program: &Program, mem: &mut [u8]) -> Result<u64, String> {
        let interp = Interpreter::new(program, Bindings::conformance(), Config::default())
            .map_err(|e| format!("validation: {e}"))?;
        let mut cache = interp.cache();
        interp.run_mem(&mut cache, mem).map_err(|trap| format!("trap: {trap}"))
    }
}

/// The Cranelift JIT with its default configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct JitEngine;

impl Engine for JitEngine {
    fn name(&self) -> &str {
        "jit"
    }

    fn run(&self, program: &Program, mem: &mut [u8]) -> Result<u64, String> {
        let jit =
            weir_jit::Jit::compile(program, Bindings::conformance(), weir_jit::Config::default())
                .map_err(|e| format!("compile: {e}"))?;
        let mut cache = jit.cache();
        jit.run_mem(&mut cache, mem).map_err(|trap| format!("trap: {trap}"))
    }
}

/// Every engine the corpus runs on.
pub fn engines() -> Vec<Box<dyn Engine>> {
    vec![Box::new(InterpreterEngine), Box::new(JitEngine)]
}

/// What happened when one engine ran one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Result(u64),
    Error(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Result(v) => write!(f, "result {v:#x}"),
            Outcome::Error(e) => write!(f, "error {e:?}"),
        }
    }
}

/// A case whose outcome on an engine is not the expected one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub case: String,
    pub engine: String,
    pub expected: Expect,
    pub got: Outcome,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]: expected {}, got {}", self.case, self.engine, self.expected, self.got)
    }
}

/// Loads and runs a case on one engine (on a copy of its memory).
pub fn run_case(engine: &dyn Engine, case: &Case) -> Outcome {
    let program = match load_program(case) {
        Ok(p) => p,
        Err(e) => return Outcome::Error(e),
    };
    let mut mem = case.mem.clone();
    match engine.run(&program, &mut mem) {
        Ok(v) => Outcome::Result(v),
        Err(e) => Outcome::Error(e),
    }
}

/// Whether an outcome satisfies an expectation.
pub fn matches(expect: &Expect, got: &Outcome) -> bool {
    match (expect, got) {
        (Expect::Result(want), Outcome::Result(v)) => want == v,
        (Expect::Error(want), Outcome::Error(msg)) => {
            msg.to_lowercase().contains(&want.to_lowercase())
        }
        _ => false,
    }
}

/// Runs a case on an engine and reports a mismatch.
pub fn check_case(engine: &dyn Engine, case: &Case) -> Result<(), Failure> {
    let got = run_case(engine, case);
    if matches(&case.expect, &got) {
        Ok(())
    } else {
        Err(Failure {
            case: case.name.clone(),
            engine: engine.name().to_string(),
            expected: case.expect.clone(),
            got,
        })
    }
}

/// `testdata/conformance` of this workspace.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance")
}

/// Reads and parses every `*.data` file of `dir`, sorted by name. Any unreadable or
/// malformed file is an error naming it.
pub fn load_corpus(dir: &Path) -> Result<Vec<Case>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().is_some_and(|x| x == "data") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut cases = Vec::with_capacity(paths.len());
    for path in paths {
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let case = parse_case(&name, &text).map_err(|e| format!("{}: {e}", path.display()))?;
        cases.push(case);
    }
    Ok(cases)
}
