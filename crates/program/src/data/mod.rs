//! The `.data` case format of the common eBPF conformance suites, which weir's own corpus
//! (`testdata/conformance`) uses too, and which `weir exec` runs: a program, its input
//! memory and the expected result.
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
//!   8-byte slot, e.g. `0x0000000000000095` for `exit`): the program. When a file has both,
//!   `-- raw` is the program (as in the conformance suite, whose `-- asm` then documents it).
//! - `-- mem` (optional): hex bytes; at run time `r1` = its address, `r2` = its length.
//! - `-- result` (`r0`: hex `0x2a`, decimal `42`, or a negative decimal `-1` for its two's
//!   complement) or `-- error` (a case-insensitive substring of the error weir reports:
//!   assembly, decoding, validation or trap).
//! - `-- description` (optional, weir's own): free text.
//! - `-- c` (the C source of a case) and `-- no register offset`: read and ignored, as the
//!   suite's parser ignores them.
//!
//! Headers are matched as the suite of Alan-Jowett/bpf_conformance matches them (any line
//! holding `--`; its kind is the first of `asm`, `result`, `mem`, `raw`, `no register
//! offset`, ` c`, `error` that the line contains), so `weir exec` reads that suite's files as
//! its own runner does. A file the suite's runner skips (an unknown section such as `-- map`,
//! or no expectation) is a [`ParseError`] of kind [`ParseErrorKind::Skipped`].

mod parse;

use std::fmt;
use std::path::Path;

use crate::{Program, Verified};
use weir_isa::ebpf::{decode, RawInsn};

pub use parse::{parse_case, ParseError, ParseErrorKind};

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

/// Assembles or decodes a case's program, then checks it.
pub fn load_program(case: &Case) -> Result<Verified, String> {
    load_program_noting(case).map(|(program, _)| program)
}

/// [`load_program`], also returning what the assembler changed to read the file as the
/// suite does: each 32-bit immediate wider than 32 bits keeps its low 32 bits
/// ([`weir_isa::asm::assemble_suite`]), one note per immediate, for the user to see.
pub fn load_program_noting(case: &Case) -> Result<(Verified, Vec<String>), String> {
    let (insns, notes) = match &case.source {
        Source::Asm(text) => {
            let (insns, cuts) =
                weir_isa::asm::assemble_suite(text).map_err(|e| format!("assembly: {e}"))?;
            (insns, cuts.iter().map(|c| format!("assembly: {c}")).collect())
        }
        Source::Raw(words) => {
            let slots: Vec<RawInsn> = words.iter().map(|w| RawInsn::from_u64(*w)).collect();
            (decode(&slots).map_err(|e| format!("decode: {e}"))?, Vec::new())
        }
    };
    let program =
        Verified::structural(Program::from_insns(insns)).map_err(|e| format!("validation: {e}"))?;
    Ok((program, notes))
}

/// Every `.data` case of a directory, in file name order (a case is named by its file
/// name without `.data`); the first file that cannot be read or parsed is the error, with
/// its path.
pub fn read_dir(dir: &Path) -> Result<Vec<Case>, String> {
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
