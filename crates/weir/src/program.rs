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

#[cfg(test)]
mod tests {
    use weir_isa::ebpf::Op;
    use weir_program::ProgramBuilder;

    use super::*;

    /// `r0 += 1`, `count` times, then exit.
    fn long_program(count: usize) -> Verified {
        let mut b = ProgramBuilder::new();
        b.alu_imm(Op::Mov64Imm, 0, 0);
        for _ in 0..count {
            b.alu_imm(Op::Add64Imm, 0, 1);
        }
        b.exit();
        Verified::structural(b.link().unwrap()).unwrap()
    }

    #[test]
    fn programs_too_long_for_the_jit_run_on_the_interpreter_and_say_why() {
        let count = weir_jit::DEFAULT_MAX_SLOTS;
        let program = long_program(count);
        let bindings = Bindings::new();
        let mut prepared =
            PreparedProgram::new(&program, &bindings, Limits::default(), None).unwrap();
        assert_eq!(prepared.choice().engine, Engine::Interp);
        let why = prepared.choice().to_string();
        assert!(why.contains("the JIT compiles at most 16384"), "{why}");
        assert_eq!(prepared.run_mem(&mut []), Ok(count as u64));
        // Forced, the JIT refuses rather than falling back.
        let forced =
            PreparedProgram::new(&program, &bindings, Limits::default(), Some(Engine::Jit));
        assert!(forced.is_err());
        // One slot shorter, the JIT takes it.
        let program = long_program(count - 3);
        let prepared = PreparedProgram::new(&program, &bindings, Limits::default(), None).unwrap();
        assert_eq!(prepared.choice().engine, Engine::Jit);
    }
}
