//! Engines, and the one function that chooses among them.
//!
//! Every path that runs something (a filter over packets, an eBPF program over memory) asks
//! [`choose`] which engine to use. The answer comes with its reasons, which `--explain`
//! prints, so a user never has to guess why a filter ran slower than expected.

use std::fmt;
use std::str::FromStr;

use weir_program::exec::DynEngine;

/// The eBPF engines, as values the table below hands out.
static INTERP: weir_interp::Interp = weir_interp::Interp;
static JIT: weir_jit::Jit = weir_jit::Jit;

/// A way to run a filter or a program: the one table of engines. The conformance runner,
/// the benchmarks and the command line all take their engines (and engine names) from it.
/// Adding an engine is a variant here, its place in [`preference`], and, if it runs eBPF
/// programs, an implementation of `weir_program::exec::Engine` returned by
/// [`Engine::program_engine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// Filter IR compiled straight to native code (filters only).
    Native,
    /// eBPF compiled to native code by weir's Cranelift JIT.
    Jit,
    /// weir's reference eBPF interpreter.
    Interp,
    /// weir's classic BPF interpreter on the emitted classic BPF (filters only).
    Cbpf,
    /// The filter IR's reference evaluator (filters only; the oracle, slowest).
    Reference,
}

impl Engine {
    pub const ALL: [Engine; 5] =
        [Engine::Native, Engine::Jit, Engine::Interp, Engine::Cbpf, Engine::Reference];

    pub fn name(self) -> &'static str {
        match self {
            Engine::Native => "native",
            Engine::Jit => "jit",
            Engine::Interp => "interp",
            Engine::Cbpf => "cbpf",
            Engine::Reference => "reference",
        }
    }

    /// Whether the engine can run an eBPF program (rather than only filters).
    pub fn runs_programs(self) -> bool {
        self.program_engine().is_some()
    }

    /// The engine as an eBPF program runner (the JIT and the interpreter).
    pub fn program_engine(self) -> Option<&'static dyn DynEngine> {
        match self {
            Engine::Jit => Some(&JIT),
            Engine::Interp => Some(&INTERP),
            Engine::Native | Engine::Cbpf | Engine::Reference => None,
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Engine {
    type Err = String;

    fn from_str(s: &str) -> Result<Engine, String> {
        Engine::ALL.into_iter().find(|e| e.name() == s).ok_or_else(|| {
            let names: Vec<_> = Engine::ALL.iter().map(|e| e.name()).collect();
            format!("unknown engine `{s}` (one of: {})", names.join(", "))
        })
    }
}

/// What is to be run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// A packet filter (pflang or lifted classic BPF): every engine applies.
    Filter,
    /// An eBPF program: the JIT or the interpreter.
    Program,
    /// A classic BPF program: its eBPF translation (JIT, interpreter) or the classic
    /// interpreter.
    Classic,
    /// A pfmatch dispatch (one filter IR predicate whose scratch slots are results): native
    /// code or the IR's evaluator.
    Dispatch,
}

/// The engine picked for a run and why; `--explain` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub engine: Engine,
    /// One line per decision, in order: what was tried, what failed and why, what was kept.
    pub reasons: Vec<String>,
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "engine: {}", self.engine)?;
        for r in &self.reasons {
            writeln!(f, "  {r}")?;
        }
        Ok(())
    }
}

/// Why no engine could run the subject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ChoiceError {
    pub message: String,
    pub reasons: Vec<String>,
}

/// The order engines are tried in when the user forces none: fastest first, and the
/// interpreter last because it runs everything the validator accepts.
pub fn preference(subject: Subject) -> &'static [Engine] {
    match subject {
        Subject::Filter => &[Engine::Native, Engine::Jit, Engine::Interp],
        Subject::Program => &[Engine::Jit, Engine::Interp],
        Subject::Classic => &[Engine::Jit, Engine::Cbpf],
        Subject::Dispatch => &[Engine::Native, Engine::Reference],
    }
}

/// Chooses the engine: the forced one, or the first of [`preference`] that `prepare`
/// manages to build. `prepare` does the engine-specific work (compiling) and reports why it
/// failed; a forced engine that fails is an error, never a silent fallback.
pub fn choose<T>(
    subject: Subject,
    forced: Option<Engine>,
    mut prepare: impl FnMut(Engine) -> Result<T, String>,
) -> Result<(T, Choice), ChoiceError> {
    let mut reasons = Vec::new();
    if let Some(engine) = forced {
        let applies = match subject {
            Subject::Filter => true,
            Subject::Program => engine.runs_programs(),
            Subject::Classic => engine.runs_programs() || engine == Engine::Cbpf,
            Subject::Dispatch => preference(subject).contains(&engine),
        };
        if !applies {
            let message = if subject == Subject::Dispatch {
                format!("engine `{engine}` does not run pfmatch dispatch (native or reference do)")
            } else {
                format!("engine `{engine}` runs filters only, not programs")
            };
            return Err(ChoiceError { message, reasons });
        }
        return match prepare(engine) {
            Ok(t) => {
                reasons.push(format!("{engine}: forced with --engine"));
                Ok((t, Choice { engine, reasons }))
            }
            Err(e) => Err(ChoiceError {
                message: format!("engine `{engine}` (forced with --engine) cannot run this: {e}"),
                reasons,
            }),
        };
    }
    for &engine in preference(subject) {
        match prepare(engine) {
            Ok(t) => {
                reasons.push(format!("{engine}: {}", why(subject, engine)));
                return Ok((t, Choice { engine, reasons }));
            }
            Err(e) => reasons.push(format!("{engine}: not used: {e}")),
        }
    }
    Err(ChoiceError { message: "no engine can run this".into(), reasons })
}

fn why(subject: Subject, engine: Engine) -> &'static str {
    match (subject, engine) {
        (Subject::Filter, Engine::Native) => {
            "the filter compiled straight to native code (the fastest engine)"
        }
        (Subject::Dispatch, Engine::Native) => {
            "the dispatch compiled straight to native code (handler and arguments returned)"
        }
        (Subject::Dispatch, Engine::Reference) => "the IR's evaluator runs every dispatch",
        (Subject::Classic, Engine::Jit) => "the program's eBPF translation compiled to native code",
        (_, Engine::Jit) => "the eBPF compiled to native code",
        (Subject::Classic, Engine::Cbpf) => "the classic interpreter runs every valid program",
        (_, Engine::Interp) => "the reference interpreter runs every valid program",
        _ => "chosen",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_the_first_engine_that_prepares_and_says_why_others_did_not() {
        let (got, choice) = choose(Subject::Filter, None, |e| match e {
            Engine::Native => Err("too big".to_string()),
            other => Ok(other),
        })
        .unwrap();
        assert_eq!(got, Engine::Jit);
        assert_eq!(choice.engine, Engine::Jit);
        assert_eq!(choice.reasons[0], "native: not used: too big");
        assert!(choice.reasons[1].starts_with("jit: "));
    }

    #[test]
    fn a_forced_engine_never_falls_back() {
        let err = choose(Subject::Program, Some(Engine::Jit), |_| Err::<(), _>("nope".into()))
            .unwrap_err();
        assert!(err.message.contains("forced"), "{}", err.message);
        let err = choose(Subject::Program, Some(Engine::Native), |_| Ok(())).unwrap_err();
        assert!(err.message.contains("filters only"), "{}", err.message);
    }

    #[test]
    fn engine_names_round_trip() {
        for e in Engine::ALL {
            assert_eq!(e.name().parse::<Engine>().unwrap(), e);
        }
        assert!("fast".parse::<Engine>().is_err());
    }
}
