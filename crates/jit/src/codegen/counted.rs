//! Loops that keep no instruction count of their own.
//!
//! With a budget-free plan (`facts`), the generated code never tests the budget but still
//! counts executed instructions, so that a run's count stays exact: each basic block
//! subtracts its length from `remaining`. In a tight loop that subtraction is one more
//! loop-carried value and one more instruction per iteration (measured on `weir-bench
//! interp`'s byte-sum loop written out in assembly, 2 CPUs shared: 1.3-1.5x the time of the
//! same loop without it).
//!
//! A *counted loop* needs none of that. It is one basic block that ends in a conditional
//! jump back to its own first instruction, in which one register `r` is written by a single
//! `add r, imm` (64-bit, `imm != 0`) and by nothing else, and in which nothing can leave
//! the run early (every instruction changes registers only, or is a memory access the
//! facts let through unchecked or a fixed-offset frame access). Every iteration then runs
//! every instruction once and adds `imm` to `r` once, so after `k` iterations `r = r0 +
//! k * imm` (mod 2^64), `r0` being `r` on entry. The code keeps `r0` (once, on entry),
//! charges nothing inside the loop, and on the way out charges `n * k` with `k = (r - r0)
//! / imm`. That division is exact, not just modulo 2^64, when `k * |imm| < 2^64`: `k` is at
//! most the verifier's bound on a run's length (`Facts::max_executed`, the bound that made
//! the plan budget-free), so [`find`] asks for `max_executed * |imm|` to fit in 64 bits.

use weir_isa::ebpf::{Insn, Op, Operands};
use weir_program::exec::StackShape;

use super::facts::{access_base, in_own_frame, Plan};
use crate::cfg::{target_of, BasicBlock};

/// The register a counted loop's iterations are read from, and what each adds to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CountedLoop {
    pub(crate) reg: u8,
    pub(crate) step: i64,
}

/// Whether `block` is a counted loop (see the module docs) under `plan`.
pub(crate) fn find(
    insns: &[Insn],
    block: &BasicBlock,
    plan: &Plan,
    shape: StackShape,
) -> Option<CountedLoop> {
    if !plan.budget_free {
        return None;
    }
    let (&last, body) = block.slots.split_last()?;
    let jump = insns.get(last)?;
    let conditional = matches!(
        jump.op.spec().map(|s| s.operands),
        Some(Operands::DstImmOff | Operands::DstSrcOff)
    );
    if !conditional || target_of(insns, last)?.ok()? != block.start() {
        return None;
    }
    // Nothing in the body may leave the run.
    for &pc in body {
        let insn = insns.get(pc)?;
        match insn.op.spec().map(|s| s.operands)? {
            Operands::DstImm | Operands::DstSrc | Operands::Dst | Operands::DstImm64 => {}
            Operands::Load | Operands::StoreImm | Operands::StoreReg => {
                let (base, size) = access_base(insn);
                let frame = base == 10 && in_own_frame(insn.off, size, shape);
                if !frame && plan.direct(pc).is_none() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    let writes = |insn: &Insn, r: u8| match insn.op.spec().map(|s| s.operands) {
        Some(Operands::StoreImm | Operands::StoreReg) => {
            // Atomics: the fetch forms write `src`, compare-exchange writes r0.
            super::memory::is_atomic(insn.op) && (insn.src == r || r == 0)
        }
        _ => insn.dst == r,
    };
    body.iter().filter_map(|&pc| insns.get(pc)).find_map(|insn| {
        let r = insn.dst;
        let step = insn.imm;
        let candidate = insn.op == Op::Add64Imm && step != 0 && r < 10;
        let alone =
            body.iter().filter_map(|&pc| insns.get(pc)).filter(|other| writes(other, r)).count()
                == 1;
        let exact = plan.max_executed.checked_mul(step.unsigned_abs()).is_some();
        (candidate && alone && exact).then_some(CountedLoop { reg: r, step })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::Cfg;
    use weir_program::abi::Bindings;

    fn plan(insns: &[Insn], max_executed: u64) -> Plan {
        let mut plan = Plan::checked(insns, StackShape::fit(&Default::default()));
        plan.budget_free = true;
        plan.max_executed = max_executed;
        plan
    }

    fn first_loop(insns: &[Insn], max_executed: u64) -> Option<CountedLoop> {
        let cfg = Cfg::build(insns, &Bindings::new()).unwrap();
        let shape = StackShape::fit(&Default::default());
        let plan = plan(insns, max_executed);
        cfg.blocks.iter().find_map(|b| find(insns, b, &plan, shape))
    }

    /// r0 += r3; r3 += step; loop while r3 < 100; `extra` inserted in the body.
    fn looping(step: i64, extra: Option<Insn>) -> Vec<Insn> {
        let mut v = vec![Insn::new(Op::Mov64Imm, 0, 0, 0, 0), Insn::new(Op::Mov64Imm, 3, 0, 0, 0)];
        let body_start = v.len();
        v.push(Insn::new(Op::Add64Reg, 0, 3, 0, 0));
        v.extend(extra);
        v.push(Insn::new(Op::Add64Imm, 3, 0, 0, step));
        let back = -((v.len() - body_start + 1) as i16);
        v.push(Insn::new(Op::Jlt64Imm, 3, 0, back, 100));
        v.push(Insn::new(Op::Exit, 0, 0, 0, 0));
        v
    }

    #[test]
    fn a_simple_loop_counts_by_its_induction_register() {
        assert_eq!(first_loop(&looping(1, None), 10_000), Some(CountedLoop { reg: 3, step: 1 }));
        assert_eq!(first_loop(&looping(-8, None), 10_000), Some(CountedLoop { reg: 3, step: -8 }));
    }

    #[test]
    fn loops_that_could_miscount_are_not_counted() {
        // A second write to the register.
        let twice = looping(1, Some(Insn::new(Op::Mov64Reg, 3, 3, 0, 0)));
        assert_eq!(first_loop(&twice, 10_000), None);
        // A checked load (no fact): it may leave the run mid-iteration.
        let checked = looping(1, Some(Insn::new(Op::LdxB, 5, 1, 0, 0)));
        assert_eq!(first_loop(&checked, 10_000), None);
        // A frame access needs no check.
        let frame = looping(1, Some(Insn::new(Op::LdxDw, 5, 10, -8, 0)));
        assert_eq!(first_loop(&frame, 10_000), Some(CountedLoop { reg: 3, step: 1 }));
        // k * |step| might wrap.
        assert_eq!(first_loop(&looping(1 << 20, None), u64::MAX >> 10), None);
        // A 32-bit add wraps at 2^32.
        let mut narrow = looping(1, None);
        for insn in &mut narrow {
            if insn.op == Op::Add64Imm {
                insn.op = Op::Add32Imm;
            }
        }
        assert_eq!(first_loop(&narrow, 10_000), None);
    }
}
