//! Static facts about the control-flow graph, computed once before the walk: which slots
//! no path reaches (refused, as the kernel's `check_cfg` refuses them), where states are
//! stored for pruning, and which registers are live where (pruning compares only those).

use weir_isa::ebpf::{Insn, Op, Operands};
use weir_program::{function_target, jump_target};

use crate::{Rejection, Rule};

/// Successors of the instruction at `pc` within its function.
fn successors(pc: usize, insn: &Insn, out: &mut Vec<usize>) {
    out.clear();
    match insn.op {
        Op::Exit | Op::LddwHigh => {}
        Op::Ja | Op::Ja32 => out.extend(target(pc, insn)),
        op if op.is_conditional_jump() => {
            out.push(pc + 1);
            out.extend(target(pc, insn));
        }
        op if op.is_lddw() => out.push(pc + 2),
        _ => out.push(pc + 1),
    }
}

fn target(pc: usize, insn: &Insn) -> Option<usize> {
    jump_target(pc, insn).and_then(|t| usize::try_from(t).ok())
}

fn func(pc: usize, insn: &Insn) -> Option<usize> {
    function_target(pc, insn).and_then(|t| usize::try_from(t).ok())
}

/// Refuses the first slot (other than an `lddw`'s second) no path from slot 0 reaches.
pub fn check_reachable(insns: &[Insn]) -> Result<(), Rejection> {
    let mut seen = vec![false; insns.len()];
    let mut stack = vec![0usize];
    let mut next = Vec::new();
    while let Some(pc) = stack.pop() {
        if pc >= insns.len() || seen[pc] {
            continue;
        }
        seen[pc] = true;
        let insn = &insns[pc];
        if let Some(f) = func(pc, insn) {
            stack.push(f);
        }
        successors(pc, insn, &mut next);
        stack.extend(next.iter().copied());
    }
    for (pc, insn) in insns.iter().enumerate() {
        if !seen[pc] && insn.op != Op::LddwHigh {
            return Err(Rejection::new(pc, Rule::Unreachable, format!("unreachable insn {pc}")));
        }
    }
    Ok(())
}

/// Slots where states are stored and compared: jump targets, the slot after a conditional
/// jump, function entries and the slot after a call.
pub fn prune_points(insns: &[Insn]) -> Vec<bool> {
    let mut points = vec![false; insns.len() + 2];
    for (pc, insn) in insns.iter().enumerate() {
        if let Some(t) = target(pc, insn) {
            if let Some(p) = points.get_mut(t) {
                *p = true;
            }
            if insn.op.is_conditional_jump() {
                points[pc + 1] = true;
            }
        }
        if let Some(f) = func(pc, insn) {
            if let Some(p) = points.get_mut(f) {
                *p = true;
            }
        }
        if matches!(insn.op, Op::CallLocal | Op::Call) {
            points[pc + 1] = true;
        }
        // A callback returns to its `bpf_loop` call: the loop's head.
        if insn.op == Op::Call && insn.imm == crate::analyze::CALLBACK_HELPER {
            points[pc] = true;
        }
    }
    points.truncate(insns.len());
    points
}

const fn bit(r: u8) -> u16 {
    1 << r
}

const ARGS: u16 = 0b11_1110; // r1-r5
const CLOBBERED: u16 = 0b11_1111; // r0-r5

/// Registers an instruction reads and writes (as masks). `helper_args` gives a helper's
/// argument count.
fn uses_defs(insn: &Insn, helper_args: &dyn Fn(i64) -> usize) -> (u16, u16) {
    let (d, s) = (insn.dst, insn.src);
    let Some(spec) = insn.op.spec() else { return (0, 0) };
    match spec.operands {
        Operands::DstImm => match insn.op {
            Op::Mov64Imm | Op::Mov32Imm => (0, bit(d)),
            _ => (bit(d), bit(d)),
        },
        Operands::DstSrc => match insn.op {
            Op::Mov64Reg
            | Op::Mov32Reg
            | Op::MovSx8To64
            | Op::MovSx16To64
            | Op::MovSx32To64
            | Op::MovSx8To32
            | Op::MovSx16To32 => (bit(s), bit(d)),
            _ => (bit(d) | bit(s), bit(d)),
        },
        Operands::Dst => (bit(d), bit(d)),
        Operands::JmpOff | Operands::JmpImm => (0, 0),
        Operands::DstImmOff => (bit(d), 0),
        Operands::DstSrcOff => (bit(d) | bit(s), 0),
        Operands::CallImm => {
            let n = helper_args(insn.imm).min(5);
            let uses = (1u16 << (n + 1)) - 2;
            (uses, CLOBBERED)
        }
        Operands::CallLocal => (ARGS, CLOBBERED),
        Operands::CallReg => (bit(d) | ARGS, CLOBBERED),
        Operands::Nothing => (bit(0), 0),
        Operands::Load => (bit(s), bit(d)),
        Operands::StoreImm => (bit(d), 0),
        Operands::StoreReg => {
            let name = spec.mnemonic;
            if name.starts_with("lock") {
                let fetch = name.contains("fetch") || name.contains("xchg");
                let cmp = name.contains("cmpxchg");
                let uses = bit(d) | bit(s) | if cmp { bit(0) } else { 0 };
                let defs = if cmp {
                    bit(0)
                } else if fetch {
                    bit(s)
                } else {
                    0
                };
                (uses, defs)
            } else {
                (bit(d) | bit(s), 0)
            }
        }
        Operands::DstImm64 | Operands::Pseudo(_) => (0, bit(d)),
        Operands::Abs => (bit(6), CLOBBERED),
        Operands::Ind => (bit(6) | bit(s), CLOBBERED),
    }
}

/// Live-in register masks per slot (r10 always live).
pub fn liveness(insns: &[Insn], helper_args: &dyn Fn(i64) -> usize) -> Vec<u16> {
    let n = insns.len();
    let ud: Vec<(u16, u16)> = insns.iter().map(|i| uses_defs(i, helper_args)).collect();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut next = Vec::new();
    for (pc, insn) in insns.iter().enumerate() {
        successors(pc, insn, &mut next);
        for &t in &next {
            if t < n {
                preds[t].push(pc);
            }
        }
    }
    let mut live = vec![0u16; n];
    let mut work: Vec<usize> = (0..n).collect();
    let mut queued = vec![true; n];
    while let Some(pc) = work.pop() {
        queued[pc] = false;
        successors(pc, &insns[pc], &mut next);
        let out = next.iter().filter(|&&t| t < n).fold(0u16, |m, &t| m | live[t]);
        let (uses, defs) = ud[pc];
        let inn = uses | (out & !defs) | bit(10);
        if inn != live[pc] {
            live[pc] = inn;
            for &p in &preds[pc] {
                if !queued[p] {
                    queued[p] = true;
                    work.push(p);
                }
            }
        }
    }
    live
}

/// Registers whose exact value may matter for safety from each slot on (bit `r`): the
/// kernel's "precise" scalars, found statically. A register is precise where its value
/// may reach a memory address, a jump condition, a helper argument, a divisor, memory (a
/// store), or a function's return to its caller; and wherever it flows into one that is.
/// Pruning compares only these scalars by value: any other scalar cannot change what the
/// rest of the path proves (a main function's `r0` at exit, an accumulator, ...).
pub fn precision(insns: &[Insn], helper_args: &dyn Fn(i64) -> usize, live: &[u16]) -> Vec<u16> {
    let n = insns.len();
    // Slots of functions other than the main one: their exit returns r0 to a caller.
    let mut in_subprog = vec![false; n];
    let mut starts: Vec<usize> = insns
        .iter()
        .enumerate()
        .filter_map(|(pc, i)| func(pc, i))
        .filter(|&t| t < n && t > 0)
        .collect();
    starts.sort_unstable();
    if let Some(&first) = starts.first() {
        for flag in &mut in_subprog[first..] {
            *flag = true;
        }
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut next = Vec::new();
    for (pc, insn) in insns.iter().enumerate() {
        successors(pc, insn, &mut next);
        for &t in &next {
            if t < n {
                preds[t].push(pc);
            }
        }
    }
    let transfer = |pc: usize, out: u16| -> u16 {
        let insn = &insns[pc];
        let (uses, defs) = uses_defs(insn, helper_args);
        let (d, s) = (insn.dst, insn.src);
        let Some(spec) = insn.op.spec() else { return out };
        let mut need = 0u16;
        let mut flows = 0u16;
        match spec.operands {
            Operands::DstImm | Operands::DstSrc | Operands::Dst => {
                let name = spec.mnemonic;
                let division = ["div", "mod", "sdiv", "smod"].iter().any(|m| name.starts_with(m));
                if division {
                    need |= uses & !bit(d);
                }
                if out & bit(d) != 0 {
                    flows |= uses;
                }
            }
            Operands::DstImmOff | Operands::DstSrcOff => need |= uses,
            Operands::CallImm | Operands::CallLocal | Operands::CallReg => need |= uses,
            Operands::Nothing => {
                if in_subprog[pc] {
                    need |= bit(0);
                }
            }
            Operands::Load => need |= bit(s),
            Operands::StoreImm | Operands::StoreReg => need |= uses,
            Operands::Abs | Operands::Ind => need |= uses,
            Operands::JmpOff | Operands::JmpImm | Operands::DstImm64 | Operands::Pseudo(_) => {}
        }
        need | flows | (out & !defs)
    };
    let mut precise = vec![0u16; n];
    let mut work: Vec<usize> = (0..n).collect();
    let mut queued = vec![true; n];
    while let Some(pc) = work.pop() {
        queued[pc] = false;
        successors(pc, &insns[pc], &mut next);
        let out = next.iter().filter(|&&t| t < n).fold(0u16, |m, &t| m | precise[t]);
        let inn = transfer(pc, out) & live.get(pc).copied().unwrap_or(u16::MAX);
        if inn != precise[pc] {
            precise[pc] = inn;
            for &p in &preds[pc] {
                if !queued[p] {
                    queued[p] = true;
                    work.push(p);
                }
            }
        }
    }
    precise
}
