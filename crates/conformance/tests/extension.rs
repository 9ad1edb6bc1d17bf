//! Two of the extension points ARCHITECTURE.md names ("Where a new kind of thing goes"),
//! each used once from outside the crates that define them:
//!
//! - an engine is an implementation of `weir_program::exec::{Engine, Prepared}`: the toy
//!   engine here (the interpreter behind a wrapper that counts runs) runs the whole
//!   conformance corpus through the runner, which was not changed for it;
//! - a helper is a `Helper` added to the `Bindings` a program runs with: every engine of
//!   the facade's table calls the one defined here, nothing in the engines changed for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use weir_conformance::{check_case, corpus_dir, engines, load_corpus};
use weir_program::abi::{Bindings, Helper, HelperCtx, HelperOutcome};
use weir_program::exec::{Engine, Input, Limits, PrepareError, Prepared, RunOutcome};
use weir_program::{Program, Trap, Verified};

/// A new engine: the interpreter's work, its own type and name, and a count of its runs.
struct Counting {
    runs: Arc<AtomicUsize>,
}

struct CountingProgram {
    inner: weir_interp::Interpreter,
    runs: Arc<AtomicUsize>,
}

impl Engine for Counting {
    type Prepared = CountingProgram;

    fn name(&self) -> &'static str {
        "counting"
    }

    fn prepare(
        &self,
        program: &Verified,
        bindings: Bindings,
        limits: Limits,
    ) -> Result<CountingProgram, PrepareError> {
        let inner = weir_interp::Interp.prepare(program, bindings, limits)?;
        Ok(CountingProgram { inner, runs: Arc::clone(&self.runs) })
    }
}

impl Prepared for CountingProgram {
    type Cache = <weir_interp::Interpreter as Prepared>::Cache;

    fn cache(&self) -> Self::Cache {
        Prepared::cache(&self.inner)
    }

    fn run(&self, cache: &mut Self::Cache, input: Input<'_>) -> Result<RunOutcome, Trap> {
        self.runs.fetch_add(1, Ordering::Relaxed);
        Prepared::run(&self.inner, cache, input)
    }

    fn stack<'c>(&self, cache: &'c Self::Cache) -> &'c [u8] {
        Prepared::stack(&self.inner, cache)
    }

    fn stack_top(&self) -> u64 {
        Prepared::stack_top(&self.inner)
    }
}

#[test]
fn a_new_engine_runs_the_corpus_through_the_unchanged_runner() {
    let cases = load_corpus(&corpus_dir()).expect("the corpus loads");
    let runs = Arc::new(AtomicUsize::new(0));
    let engine = Counting { runs: Arc::clone(&runs) };
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| check_case(&engine, case).err())
        .map(|f| f.to_string())
        .collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    // Cases that fail to assemble or validate never reach a run; the rest all did.
    let ran = runs.load(Ordering::Relaxed);
    assert!(ran > 300 && ran <= cases.len(), "{ran} runs for {} cases", cases.len());
}

/// The new helper's id: far from the kernel's numbers.
const MIX: u32 = 0x7000;

/// Reads the 8 bytes at r1 through the helper context (guest memory as the program sees
/// it) and returns them xor r2.
fn mix(ctx: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    let mut word = [0u8; 8];
    match ctx.read(args[0], &mut word) {
        Ok(()) => HelperOutcome::Return(u64::from_le_bytes(word) ^ args[1]),
        Err(_) => HelperOutcome::Fail,
    }
}

#[test]
fn a_new_helper_runs_on_every_engine_unchanged() {
    let insns =
        weir_isa::asm::assemble(&format!("mov %r2, 0xff\ncall {MIX}\nexit")).expect("assembles");
    let program = Verified::structural(Program::from_insns(insns)).expect("valid");
    let mut bindings = Bindings::conformance();
    bindings.add_helper(Helper { id: MIX, name: "mix", func: mix });
    let table = engines();
    assert!(table.len() >= 2, "{} engines in the facade's table", table.len());
    for engine in table {
        let mut session =
            engine.load(&program, bindings.clone(), Limits::default()).expect("loads");
        let mut mem = 0x1122_3344_5566_7788u64.to_le_bytes();
        let got = session.run(Input::new().mem(&mut mem)).map(|o| o.r0);
        assert_eq!(got, Ok(0x1122_3344_5566_7777), "{}", engine.name());
        // Out of the program's memory: the helper's failure, as a trap.
        let mut short = [0u8; 4];
        assert!(session.run(Input::new().mem(&mut short)).is_err(), "{}", engine.name());
    }
}
