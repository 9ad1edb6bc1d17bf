//! An eBPF program bound to the engine chosen for it (JIT or interpreter).

use weir_program::abi::Bindings;
pub use weir_program::exec::Limits;
use weir_program::exec::{Input, Session};
use weir_program::{Trap, Verified};

use crate::engine::{choose, Choice, ChoiceError, Engine, Subject};

/// A program ready to run, on one engine.
pub struct PreparedProgram {
    session: Box<dyn Session>,
    choice: Choice,
}

impl PreparedProgram {
    /// Prepares `program` with `bindings` on the forced engine, or the JIT falling back to
    /// the interpreter (with the reason) when the JIT cannot compile it.
    pub fn new(
        program: &Verified,
        bindings: &Bindings,
        limits: Limits,
        forced: Option<Engine>,
    ) -> Result<PreparedProgram, ChoiceError> {
        let (session, choice) = choose(Subject::Program, forced, |engine| {
            let Some(runner) = engine.program_engine() else {
                return Err(format!("`{engine}` runs filters only"));
            };
            runner.load(program, bindings.clone(), limits).map_err(|e| e.to_string())
        })?;
        Ok(PreparedProgram { session, choice })
    }

    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// Runs with `mem` in r1 and its length in r2 (the conformance convention).
    pub fn run_mem(&mut self, mem: &mut [u8]) -> Result<u64, Trap> {
        self.session.run(Input::new().mem(mem)).map(|outcome| outcome.r0)
    }
}
