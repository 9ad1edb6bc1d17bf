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

//!
//! The case format lives in the facade (`weir::data`); this crate holds the runner.

pub mod fuzz_checks;
pub mod kernel_prep;

use std::fmt;
use std::path::{Path, PathBuf};

use weir_program::abi::Bindings;
use weir_program::exec::{DynEngine, Input, Limits};

pub use weir::data::{load_program, parse_case, Case, Expect, ParseError, Source};

/// Every engine the corpus runs on: every engine of the facade's table that runs programs.
pub fn engines() -> Vec<&'static dyn DynEngine> {
    weir::Engine::ALL.iter().filter_map(|e| e.program_engine()).collect()
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

/// Loads and runs a case on one engine (on a copy of its memory), with the conformance
/// bindings (helper 5 is "unwind") and the default limits.
pub fn run_case(engine: &dyn DynEngine, case: &Case) -> Outcome {
    let program = match load_program(case) {
        Ok(p) => p,
        Err(e) => return Outcome::Error(e),
    };
    let mut session = match engine.load(&program, Bindings::conformance(), Limits::default()) {
        Ok(session) => session,
        Err(e) => return Outcome::Error(format!("compile: {e}")),
    };
    let mut mem = case.mem.clone();
    match session.run(Input::new().mem(&mut mem)) {
        Ok(outcome) => Outcome::Result(outcome.r0),
        Err(trap) => Outcome::Error(format!("trap: {trap}")),
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
pub fn check_case(engine: &dyn DynEngine, case: &Case) -> Result<(), Failure> {
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

/// Every case of a corpus directory, in file name order (weir-program's `data::read_dir`).
pub use weir_program::data::read_dir as load_corpus;
