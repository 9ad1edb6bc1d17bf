//! Which run-time checks the verifier's facts let the generated code drop.
//!
//! A [`Verified`] program with [`Assurance::Proven`] carries, per slot, whether an access
//! is in bounds on every path and which region it reaches, and whether a divisor is never
//! 0. An access proven in bounds in a region whose guest window maps to one host slice for
//! the whole run (stack, context, packet, untyped memory) becomes a plain host access at
//! `addr + bias`, the bias being the region's host base minus its guest base, a per-run
//! constant: no compare, no trap block. A division proven by a non-zero divisor loses its
//! zero test (a signed one keeps its -1 test, which is arithmetic, not safety).
//!
//! The instruction budget's test at each basic block goes too when the verifier's bound on
//! any run's length (`Facts::max_executed`) is within the budget: blocks still count what
//! they execute, so the executed count stays exact, but no cold budget copies are needed.
//!
//! What stays checked, and why:
//! - map values (and ring buffer samples): their window is the environment's, which maps
//!   each value where the map keeps it, so an access needs `RunEnv::host` to translate it
//!   whatever is known of its bounds;
//! - the legacy packet loads (`ldabs`/`ldind`): their failure is a defined way out (r0 = 0),
//!   not an error the verifier rules out;
//! - everything, when the bindings are not the program type the proof was for (another
//!   context layout would make its context facts meaningless), and stack facts when the
//!   engine's frames are smaller than the proof's (the kernel's 512 bytes).
//!
//! The facts hold for runs like the ones the proof assumed: a typed program's context at
//! least as long as its layout (the packet fields filled from the run's packet), an
//! untyped program's memory at least as long as the proof's. [`Needs`] is that condition;
//! a run that does not meet it runs the checked code instead (`crate::run`), so no input
//! can make the unchecked code reach outside its slices.

use weir_isa::ebpf::{Insn, Operands};
use weir_program::abi::Bindings;
use weir_program::exec::StackShape;
use weir_program::exec::{guest, Input};
use weir_program::{Assurance, Facts, Region, Verified};

/// How many checks a compiled program kept and dropped (what `--explain` reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checks {
    /// Memory accesses compiled to plain host accesses because the verifier proved them
    /// in bounds.
    pub accesses_dropped: usize,
    /// Memory accesses checked at run time (the legacy packet loads included).
    pub accesses_kept: usize,
    /// Accesses at a constant offset from `r10` inside the running frame: in bounds by
    /// construction, never checked, with or without facts.
    pub frame_accesses: usize,
    /// Divisions and remainders by a register whose zero test was dropped.
    pub divisions_dropped: usize,
    /// Divisions and remainders by a register that keep their zero test.
    pub divisions_kept: usize,
    /// The instruction budget's tests were dropped: the verifier bounds every run's length
    /// below the budget (instructions are still counted).
    pub budget_dropped: bool,
}

impl Checks {
    /// One line for `--explain`.
    pub fn summary(&self) -> String {
        format!(
            "{} memory checks kept, {} dropped as proven in bounds ({} stack accesses at fixed \
             frame offsets need none); {} division zero tests kept, {} dropped as proven \
             non-zero; instruction budget tests {}",
            self.accesses_kept,
            self.accesses_dropped,
            self.frame_accesses,
            self.divisions_kept,
            self.divisions_dropped,
            if self.budget_dropped { "dropped (every run proven shorter)" } else { "kept" }
        )
    }
}

/// What a run must offer for the facts the code relies on to hold (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Needs {
    /// A context of at least this many bytes (the layout's size).
    Context(u64),
    /// No context, and memory of at least this many bytes.
    Memory(u64),
}

impl Needs {
    pub(crate) fn met_by(self, input: &Input<'_>) -> bool {
        match self {
            Needs::Context(len) => input.ctx.as_deref().is_some_and(|c| c.len() as u64 >= len),
            Needs::Memory(len) => {
                input.ctx.is_none() && input.mem.as_deref().is_some_and(|m| m.len() as u64 >= len)
            }
        }
    }
}

/// Per slot, how the generated code treats its check.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    /// No run can exhaust the instruction budget (the facts bound every run's length by
    /// less): blocks still count their instructions, but never test the budget.
    pub(crate) budget_free: bool,
    /// With `budget_free`: the verifier's bound on any run's length
    /// (`Facts::max_executed`), which `counted` relies on.
    pub(crate) max_executed: u64,
    /// Counted loops may be unrolled (`Config::unroll`).
    pub(crate) unroll: bool,
    /// Unrolled copy and sum loops run wide (`Config::wide_copy`, `codegen::copy`,
    /// `codegen::reduce`).
    pub(crate) wide_copy: bool,
    /// The code reads nothing of the run state but its entry registers, the
    /// stack bias and the `base_lo` of the regions it accesses unchecked, and writes only
    /// the outcome: budget-free, every access unchecked (proven, or a fixed frame offset),
    /// no call of any kind and no legacy packet load. A run then sets only those words
    /// (`JitProgram::run_lean`): no region table, no environment.
    pub(crate) self_contained: bool,
    /// The guest window an access is translated with, unchecked; `None`: checked.
    direct: Vec<Option<usize>>,
    /// A division by a register whose zero test is dropped.
    nonzero: Vec<bool>,
    pub(crate) checks: Checks,
    /// `None` when nothing was dropped (the code is then the checked code).
    pub(crate) needs: Option<Needs>,
}

impl Plan {
    /// The window of the unchecked access at `pc`, if it is one.
    pub(crate) fn direct(&self, pc: usize) -> Option<usize> {
        self.direct.get(pc).copied().flatten()
    }

    pub(crate) fn nonzero(&self, pc: usize) -> bool {
        self.nonzero.get(pc).copied().unwrap_or(false)
    }

    /// Every check kept (no facts, or facts that do not apply).
    pub(crate) fn checked(insns: &[Insn], shape: StackShape) -> Plan {
        Plan::build(insns, None, shape)
    }

    /// The plan for `program` run with `bindings` on frames of `shape` with an
    /// instruction budget of `budget`.
    pub(crate) fn new(
        program: &Verified,
        bindings: &Bindings,
        shape: StackShape,
        budget: u64,
    ) -> Plan {
        let facts = match (program.assurance(), program.facts()) {
            (Assurance::Proven, Some(facts)) if applies(facts, bindings) => Some(facts),
            _ => None,
        };
        let mut plan = Plan::build(program.insns(), facts, shape);
        if let Some(facts) = facts {
            plan.budget_free = facts.max_executed > 0 && facts.max_executed <= budget;
            plan.checks.budget_dropped = plan.budget_free;
            plan.max_executed = facts.max_executed;
            plan.self_contained = plan.budget_free && self_contained(program.insns(), &plan, shape);
            if plan.budget_free && plan.needs.is_none() {
                plan.needs = Some(needs_of(facts));
            }
        }
        plan
    }

    fn build(insns: &[Insn], facts: Option<&Facts>, shape: StackShape) -> Plan {
        let mut plan = Plan {
            direct: vec![None; insns.len()],
            nonzero: vec![false; insns.len()],
            ..Plan::default()
        };
        let stack_ok = facts.is_some_and(|f| shape.stack_size >= f.stack_size);
        for (pc, insn) in insns.iter().enumerate() {
            let fact = facts.map(|f| f.get(pc)).unwrap_or_default();
            let operands = insn.op.spec().map(|s| s.operands);
            match operands {
                Some(Operands::Load | Operands::StoreImm | Operands::StoreReg) => {
                    let (base, size) = access_base(insn);
                    if base == 10 && in_own_frame(insn.off, size, shape) {
                        plan.checks.frame_accesses += 1;
                        continue;
                    }
                    let window = match (fact.access_in_bounds, fact.region) {
                        (Some(true), Some(Region::Stack)) if stack_ok => Some(guest::STACK),
                        (
                            Some(true),
                            Some(region @ (Region::Context | Region::Packet | Region::Memory)),
                        ) => Some(region.window()),
                        _ => None,
                    };
                    match window {
                        Some(window) => {
                            plan.checks.accesses_dropped += 1;
                            if let Some(slot) = plan.direct.get_mut(pc) {
                                *slot = Some(window);
                            }
                        }
                        None => plan.checks.accesses_kept += 1,
                    }
                }
                Some(Operands::Abs | Operands::Ind) => plan.checks.accesses_kept += 1,
                Some(Operands::DstSrc) if super::alu::divides_by_register(insn.op) => {
                    if fact.divisor_nonzero == Some(true) {
                        plan.checks.divisions_dropped += 1;
                        if let Some(slot) = plan.nonzero.get_mut(pc) {
                            *slot = true;
                        }
                    } else {
                        plan.checks.divisions_kept += 1;
                    }
                }
                _ => {}
            }
        }
        let dropped = plan.checks.accesses_dropped > 0;
        plan.needs = match facts {
            Some(facts) if dropped => Some(needs_of(facts)),
            _ => None,
        };
        plan
    }
}

/// Whether every instruction of `insns` leaves the run state alone under `plan` (see
/// [`Plan::self_contained`]).
fn self_contained(insns: &[Insn], plan: &Plan, shape: StackShape) -> bool {
    insns.iter().enumerate().all(|(pc, insn)| match insn.op.spec().map(|s| s.operands) {
        Some(Operands::Load | Operands::StoreImm | Operands::StoreReg) => {
            let (base, size) = access_base(insn);
            (base == 10 && in_own_frame(insn.off, size, shape)) || plan.direct(pc).is_some()
        }
        Some(
            Operands::Abs
            | Operands::Ind
            | Operands::CallImm
            | Operands::CallLocal
            | Operands::CallReg,
        ) => false,
        _ => true,
    })
}

/// What a run must offer for `facts` to describe it.
fn needs_of(facts: &Facts) -> Needs {
    match (facts.prog_type, facts.memory_len) {
        (Some(t), _) => Needs::Context(u64::from(t.context_layout().size)),
        (None, len) => Needs::Memory(len.unwrap_or(0)),
    }
}

/// Whether facts proven for `facts.prog_type` hold under `bindings`: the same program type
/// and the same context layout (for an untyped proof: no context).
fn applies(facts: &Facts, bindings: &Bindings) -> bool {
    let layout = facts.prog_type.map(|t| t.context_layout());
    bindings.prog_type == facts.prog_type && bindings.context == layout
}

/// The base register and size of a load or store.
pub(crate) fn access_base(insn: &Insn) -> (u8, u8) {
    let size = insn.op.mem_size().map_or(8, |s| s.bytes() as u8);
    match insn.op.spec().map(|s| s.operands) {
        Some(Operands::Load) => (insn.src, size),
        _ => (insn.dst, size),
    }
}

/// Whether `r10 + off` of `size` bytes lies inside the running frame (see
/// `memory::Translator::in_own_frame`, the code generator's own test).
pub(crate) fn in_own_frame(off: i16, size: u8, shape: StackShape) -> bool {
    let off = i64::from(off);
    let stack_size = i64::try_from(shape.stack_size).unwrap_or(i64::MAX);
    off >= stack_size.wrapping_neg() && off.saturating_add(i64::from(size)) <= 0
}
