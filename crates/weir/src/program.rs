//! An eBPF program bound to the engine chosen for it (JIT or interpreter).

use weir_program::abi::Bindings;
use weir_program::{Program, Trap};

use crate::engine::{choose, Choice, ChoiceError, Engine, Subject};

/// Limits that apply on every engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub instruction_budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { instruction_budget: weir_interp::Config::default().instruction_budget }
    }
}

/// A program ready to run, on one engine.
pub struct PreparedProgram {
    runner: Runner,
    choice: Choice,
}

enum Runner {
    Jit(Box<(weir_jit::JitProgram, weir_jit::Cache)>),
    Interp(weir_interp::Interpreter, weir_interp::Cache),
}

impl PreparedProgram {
    /// Prepares `program` with `bindings` on the forced engine, or the JIT falling back to
    /// the interpreter (with the reason) when the JIT cannot compile it.
    pub fn new(
        program: &Program,
        bindings: &Bindings,
        limits: Limits,
        forced: Option<Engine>,
    ) -> Result<PreparedProgram, ChoiceError> {
        let (runner, choice) = choose(Subject::Program, forced, |engine| match engine {
            Engine::Jit => {
                let config = weir_jit::Config {
                    instruction_budget: limits.instruction_budget,
                    ..weir_jit::Config::default()
                };
                let jit = weir_jit::Jit::compile(program, bindings.clone(), config)
                    .map_err(|e| e.to_string())?;
                let cache = jit.cache();
                Ok(Runner::Jit(Box::new((jit, cache))))
            }
            Engine::Interp => {
                let config = weir_interp::Config {
                    instruction_budget: limits.instruction_budget,
                    ..weir_interp::Config::default()
                };
                let interp = weir_interp::Interpreter::new(program, bindings.clone(), config)
                    .map_err(|e| e.to_string())?;
                let cache = interp.cache();
                Ok(Runner::Interp(interp, cache))
            }
            other => Err(format!("`{other}` runs filters only")),
        })?;
        Ok(PreparedProgram { runner, choice })
    }

    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// Runs with `mem` in r1 and its length in r2 (the conformance convention).
    pub fn run_mem(&mut self, mem: &mut [u8]) -> Result<u64, Trap> {
        match &mut self.runner {
            Runner::Jit(jit) => {
                let (p, cache) = &mut **jit;
                p.run_mem(cache, mem)
            }
            Runner::Interp(p, cache) => p.run_mem(cache, mem),
        }
    }
}
