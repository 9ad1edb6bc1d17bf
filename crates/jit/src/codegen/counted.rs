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
//!
//! **Unrolling.** A counted loop whose closing jump compares `r` itself with a bound `L`
//! that the body does not change (an immediate, or a register the body never writes), in
//! the direction `r` moves (`<`, `<=` with a positive step; `>`, `>=` with a negative one;
//! signed or unsigned, 64-bit), runs [`Unroll::factor`] iterations at a time: `k` copies of
//! the body with no test between them, then one test. Before a group the code tests the
//! *guard* `r cc L - (k - 1) * step`, computed without wrapping (for a register `L`, the
//! subtraction's overflow is tested at run time and fails the guard). The guard implies
//! that the jump would be taken after each of the group's first `k - 1` iterations (`r +
//! j * step` for `j < k` lies between `r` and `L - step`, with no wrap), so the `k` bodies
//! run exactly as the loop would run them; it also implies the loop's own condition, so a
//! group may follow a group. When the guard fails, the loop goes on one iteration at a time
//! (the remainder, at most `k - 1` iterations then, or all of them if the loop was short),
//! each with its own test. Nothing in the body can leave the run (see above), and its
//! accesses are the ones the facts proved in bounds at the same slots, so the copies need
//! no check either; the executed count is still charged on the way out from `r`.
//!
//! **Known trip counts.** When the only way into the loop (its back edge aside) is falling
//! out of the block just before it, and that block sets `r` by `mov r, imm` with nothing
//! after it that may write `r` (no call: a helper clobbers r1-r5), the loop starts from
//! that constant `r0`. Counting up (`step > 0`) to a constant `<` bound `L` with `0 <= r0 <
//! L` (so no value reaches 2^31 + 2^31: no wrap, signed or unsigned), it runs [`trips`]
//! `k = ceil((L - r0) / step)` iterations, every run: the entry's guard is decided (`k >=
//! factor`), one group that is the whole loop goes straight to the exit, and the exit
//! charges the constant `n * k`. (Cranelift folds none of this: `r0` reaches the loop's
//! entry as a block parameter, and a branch on a constant stays a branch.)

use cranelift_codegen::ir::condcodes::IntCC;
use weir_isa::ebpf::{Insn, Op, Operands};
use weir_program::exec::StackShape;

use super::alu::comparison;

use super::facts::{access_base, in_own_frame, Plan};
use crate::cfg::{target_of, BasicBlock, Cfg};

/// The register a counted loop's iterations are read from, and what each adds to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CountedLoop {
    pub(crate) reg: u8,
    pub(crate) step: i64,
    /// How the loop is unrolled, when it is (see the module docs).
    pub(crate) unroll: Option<Unroll>,
}

/// A counted loop run `factor` iterations at a time while `r cc bound - (factor - 1) *
/// step` holds without wrapping (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unroll {
    pub(crate) factor: usize,
    /// The closing jump's condition (64-bit, in the direction the register moves).
    pub(crate) cc: IntCC,
    pub(crate) bound: Bound,
    /// `(factor - 1) * step`, which fits in an `i64`.
    pub(crate) span: i64,
}

/// The closing jump's second operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// An immediate: the guard's limit `imm - span` is known and does not wrap.
    Const(i64),
    /// A register the body never writes: the guard tests the wrap at run time.
    Reg(u8),
}

/// Body lengths (instructions, the closing jump excluded) unrolled by 8, then by 4; a
/// longer body is not unrolled (its loop overhead is a small share already, and the copies
/// would only grow the code).
const UNROLL_8: usize = 8;
const UNROLL_4: usize = 24;

/// Whether `limit - span` wraps in the comparison's domain (signed or unsigned).
pub(crate) fn limit_wraps(cc: IntCC, limit: i64, span: i64) -> bool {
    if is_signed(cc) {
        limit.checked_sub(span).is_none()
    } else if span >= 0 {
        (limit as u64) < span as u64
    } else {
        (limit as u64).checked_add(span.unsigned_abs()).is_none()
    }
}

pub(crate) fn is_signed(cc: IntCC) -> bool {
    matches!(
        cc,
        IntCC::SignedLessThan
            | IntCC::SignedLessThanOrEqual
            | IntCC::SignedGreaterThan
            | IntCC::SignedGreaterThanOrEqual
    )
}

/// How the counted loop `body` (its closing jump `jump` excluded), counting `reg` by
/// `step`, is unrolled, if it can be (see the module docs).
fn unroll(body: &[&Insn], jump: &Insn, reg: u8, step: i64) -> Option<Unroll> {
    let factor = match body.len() {
        0 => return None,
        n if n <= UNROLL_8 => 8,
        n if n <= UNROLL_4 => 4,
        _ => return None,
    };
    let (Some(cc), true, imm) = comparison(jump.op)? else {
        return None;
    };
    let towards = match cc {
        IntCC::UnsignedLessThan
        | IntCC::UnsignedLessThanOrEqual
        | IntCC::SignedLessThan
        | IntCC::SignedLessThanOrEqual => step > 0,
        IntCC::UnsignedGreaterThan
        | IntCC::UnsignedGreaterThanOrEqual
        | IntCC::SignedGreaterThan
        | IntCC::SignedGreaterThanOrEqual => step < 0,
        _ => false,
    };
    if !towards || jump.dst != reg {
        return None;
    }
    let span = step.checked_mul(factor as i64 - 1)?;
    let bound = if imm {
        let limit = i64::from(jump.imm as i32);
        if limit_wraps(cc, limit, span) {
            return None;
        }
        Bound::Const(limit)
    } else {
        let src = jump.src;
        let written = body.iter().any(|insn| writes(insn, src));
        if src == reg || written {
            return None;
        }
        Bound::Reg(src)
    };
    Some(Unroll { factor, cc, bound, span })
}

/// Whether `insn` may write register `r`.
pub(crate) fn writes(insn: &Insn, r: u8) -> bool {
    match insn.op.spec().map(|s| s.operands) {
        Some(Operands::StoreImm | Operands::StoreReg) => {
            // Atomics: the fetch forms write `src`, compare-exchange writes r0.
            super::memory::is_atomic(insn.op) && (insn.src == r || r == 0)
        }
        _ => insn.dst == r,
    }
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
    let body: Vec<&Insn> = body.iter().filter_map(|&pc| insns.get(pc)).collect();
    body.iter().find_map(|insn| {
        let r = insn.dst;
        let step = insn.imm;
        let candidate = insn.op == Op::Add64Imm && step != 0 && r < 10;
        let alone = body.iter().filter(|other| writes(other, r)).count() == 1;
        let exact = plan.max_executed.checked_mul(step.unsigned_abs()).is_some();
        (candidate && alone && exact).then(|| CountedLoop {
            reg: r,
            step,
            unroll: plan.unroll.then(|| unroll(&body, jump, r, step)).flatten(),
        })
    })
}

/// How many iterations the counted loop `counted` (block `index` of `cfg`) runs, when
/// every run enters it with the same constant and it counts up to a constant `<` bound
/// (see the module docs).
pub(crate) fn trips(insns: &[Insn], cfg: &Cfg, index: usize, counted: CountedLoop) -> Option<u64> {
    let unroll = counted.unroll?;
    let Bound::Const(limit) = unroll.bound else { return None };
    let below = matches!(unroll.cc, IntCC::UnsignedLessThan | IntCC::SignedLessThan);
    let r0 = entry_value(insns, cfg, index, counted.reg)?;
    if !below || counted.step <= 0 || r0 < 0 || r0 >= limit {
        return None;
    }
    // `limit` and `step` are sign-extended 32-bit immediates: no overflow here.
    let k = (limit - r0 + counted.step - 1) / counted.step;
    u64::try_from(k).ok()
}

/// The constant register `reg` holds on every entry into block `index` but through its
/// own closing jump, if the block before sets it by `mov reg, imm` and falls into it, and
/// nothing else jumps into it (see the module docs).
fn entry_value(insns: &[Insn], cfg: &Cfg, index: usize, reg: u8) -> Option<i64> {
    let block = cfg.blocks.get(index)?;
    let (start, &last) = (block.start(), block.slots.last()?);
    let jumped_into = (0..insns.len()).any(|pc| {
        pc != last
            && insns.get(pc).is_some_and(|i| i.op != Op::LddwHigh)
            && matches!(target_of(insns, pc), Some(Ok(target)) if target == start)
    });
    let before = cfg.blocks.get(index.checked_sub(1)?)?;
    let &before_last = before.slots.last()?;
    let falls_in = insns.get(before_last).is_some_and(|i| i.slots() + before_last == start);
    if jumped_into || !falls_in {
        return None;
    }
    for &pc in before.slots.iter().rev() {
        let insn = insns.get(pc)?;
        let operands = insn.op.spec().map(|s| s.operands)?;
        let goes_on = match operands {
            // Only the last instruction may jump, and only conditionally (a taken jump
            // elsewhere leaves the loop unentered; not taken, it falls in).
            Operands::DstImmOff | Operands::DstSrcOff => pc == before_last,
            Operands::DstImm
            | Operands::DstSrc
            | Operands::Dst
            | Operands::DstImm64
            | Operands::Load
            | Operands::StoreImm
            | Operands::StoreReg => true,
            _ => false,
        };
        if insn.op == Op::Mov64Imm && insn.dst == reg && goes_on {
            return Some(i64::from(insn.imm as i32));
        }
        if !goes_on || writes(insn, reg) {
            return None;
        }
    }
    None
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
        plan.unroll = true;
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

    fn counted(reg: u8, step: i64, unroll: Option<Unroll>) -> Option<CountedLoop> {
        Some(CountedLoop { reg, step, unroll })
    }

    #[test]
    fn a_simple_loop_counts_by_its_induction_register() {
        let by_8 =
            Unroll { factor: 8, cc: IntCC::UnsignedLessThan, bound: Bound::Const(100), span: 7 };
        assert_eq!(first_loop(&looping(1, None), 10_000), counted(3, 1, Some(by_8)));
        // Counted, but stepping away from its bound: not unrolled.
        assert_eq!(first_loop(&looping(-8, None), 10_000), counted(3, -8, None));
    }

    /// The loop of `looping(step, None)` closed by `jump` instead.
    fn closed_by(step: i64, jump: Insn) -> Option<Unroll> {
        let mut insns = looping(step, None);
        let at = insns.len() - 2;
        insns[at] = Insn { off: insns[at].off, ..jump };
        first_loop(&insns, 10_000).and_then(|c| c.unroll)
    }

    #[test]
    fn loops_unroll_only_towards_a_bound_the_body_keeps() {
        let unroll = |cc, bound, span| Some(Unroll { factor: 8, cc, bound, span });
        use IntCC::*;
        // Down by 2 to a signed bound: the guard is r > -10 + 14.
        assert_eq!(
            closed_by(-2, Insn::new(Op::Jsgt64Imm, 3, 0, 0, -10)),
            unroll(SignedGreaterThan, Bound::Const(-10), -14)
        );
        // Up to a register bound the body does not write.
        assert_eq!(
            closed_by(4, Insn::new(Op::Jle64Reg, 3, 2, 0, 0)),
            unroll(UnsignedLessThanOrEqual, Bound::Reg(2), 28)
        );
        // A bound the body writes (r0, the sum), a bound of another register, `!=`, a
        // 32-bit compare: not unrolled.
        assert_eq!(closed_by(1, Insn::new(Op::Jlt64Reg, 3, 0, 0, 0)), None);
        assert_eq!(closed_by(1, Insn::new(Op::Jlt64Imm, 4, 0, 0, 100)), None);
        assert_eq!(closed_by(1, Insn::new(Op::Jne64Imm, 3, 0, 0, 100)), None);
        assert_eq!(closed_by(1, Insn::new(Op::Jlt32Imm, 3, 0, 0, 100)), None);
        // `r < 5` stepping by 1: the guard's limit 5 - 7 would wrap below 0.
        assert_eq!(closed_by(1, Insn::new(Op::Jlt64Imm, 3, 0, 0, 5)), None);
        // Unsigned and stepping down to a bound near the top: -3 + 7 * 1 wraps.
        assert_eq!(closed_by(-1, Insn::new(Op::Jgt64Imm, 3, 0, 0, -3)), None);
    }

    #[test]
    fn the_guards_limit_wraps_as_the_comparison_sees_it() {
        use IntCC::*;
        assert!(!limit_wraps(UnsignedLessThan, 7, 7));
        assert!(limit_wraps(UnsignedLessThan, 6, 7));
        assert!(!limit_wraps(SignedLessThan, 6, 7));
        assert!(limit_wraps(SignedLessThan, i64::MIN + 6, 7));
        assert!(!limit_wraps(UnsignedGreaterThan, -8, -7));
        assert!(limit_wraps(UnsignedGreaterThan, -7, -7));
        assert!(!limit_wraps(SignedGreaterThan, -1, -7));
        assert!(limit_wraps(SignedGreaterThan, i64::MAX - 6, -7));
    }

    /// `trips` of the first counted loop of `src`.
    fn trips_of(src: &str) -> Option<u64> {
        let insns = weir_isa::asm::assemble(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let cfg = Cfg::build(&insns, &Bindings::new()).unwrap();
        let shape = StackShape::fit(&Default::default());
        let plan = plan(&insns, 10_000);
        let (index, found) = cfg
            .blocks
            .iter()
            .enumerate()
            .find_map(|(i, b)| Some((i, find(&insns, b, &plan, shape)?)))?;
        trips(&insns, &cfg, index, found)
    }

    #[test]
    fn a_loop_entered_at_one_constant_runs_a_known_number_of_times() {
        let looping = |start: &str, step: i64, close: &str| {
            format!("mov %r0, 0\n{start}\nloop:\nadd %r0, %r3\nadd %r3, {step}\n{close}\nexit")
        };
        let known = |start, step, close| trips_of(&looping(start, step, close));
        // From 0, 5 and 99 up to 100: ceil((100 - r0) / step), signed or unsigned.
        assert_eq!(known("mov %r3, 0", 1, "jlt %r3, 100, loop"), Some(100));
        assert_eq!(known("mov %r3, 0", 8, "jlt %r3, 100, loop"), Some(13));
        assert_eq!(known("mov %r3, 5", 8, "jslt %r3, 100, loop"), Some(12));
        assert_eq!(known("mov %r3, 99", 3, "jlt %r3, 100, loop"), Some(1));
        // The mov before a store and a conditional jump that falls into the loop.
        let before = "mov %r3, 0\nstxdw [%r10-8], %r0\njeq %r0, 1, +3";
        assert_eq!(known(before, 4, "jlt %r3, 100, loop"), Some(25));
        // At or past the bound (one iteration, then out: not the formula's), below 0, a
        // `<=` bound, a register bound: unknown.
        assert_eq!(known("mov %r3, 100", 1, "jlt %r3, 100, loop"), None);
        assert_eq!(known("mov %r3, -1", 1, "jslt %r3, 100, loop"), None);
        assert_eq!(known("mov %r3, 0", 1, "jle %r3, 100, loop"), None);
        assert_eq!(known("mov %r3, 0\nmov %r2, 100", 1, "jlt %r3, %r2, loop"), None);
        // Written again after the mov, set by a 32-bit mov, or clobbered by a helper call.
        assert_eq!(known("mov %r3, 0\nadd %r3, 4", 1, "jlt %r3, 100, loop"), None);
        assert_eq!(known("mov32 %r3, 0", 1, "jlt %r3, 100, loop"), None);
        assert_eq!(known("mov %r3, 0\ncall 1", 1, "jlt %r3, 100, loop"), None);
        // Another way in, with another value (r3 = 50 when the jump is taken).
        let two_ways = "mov %r3, 50\njgt %r2, 10, loop\nmov %r3, 0";
        assert_eq!(known(two_ways, 1, "jlt %r3, 100, loop"), None);
        // Reached only by a jump over the block before (which does not fall in).
        let jumped = "mov %r3, 0\nja loop\nmov %r3, 50";
        assert_eq!(known(jumped, 1, "jlt %r3, 100, loop"), None);
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
        assert_eq!(first_loop(&frame, 10_000).map(|c| (c.reg, c.step)), Some((3, 1)));
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
