//! Tests that need the crate's insides: programs `validate` would refuse, run anyway
//! through the unvalidated constructor to show that the run-time checks alone keep them
//! harmless, and random programs (most of which are malformed) for the same reason.
#![allow(clippy::arithmetic_side_effects)]

mod malformed;
mod random;

use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::Bindings;
use weir_program::{Program, Trap};

use crate::{Config, Interpreter};

fn unvalidated(insns: Vec<Insn>) -> Interpreter {
    Interpreter::new_unvalidated(
        &Program::from_insns(insns),
        Bindings::conformance(),
        Config::default(),
    )
}

/// Runs exactly these slots (no filler slots are added).
fn run_slots(insns: Vec<Insn>) -> Result<u64, Trap> {
    let interp = unvalidated(insns);
    let mut cache = interp.cache();
    interp.run_mem(&mut cache, &mut [])
}

fn i(op: Op, dst: u8, src: u8, off: i16, imm: i64) -> Insn {
    Insn::new(op, dst, src, off, imm)
}

fn filler() -> Insn {
    i(Op::LddwHigh, 0, 0, 0, 0)
}

fn exit() -> Insn {
    i(Op::Exit, 0, 0, 0, 0)
}

/// A socket filter over a context and a packet alone takes the lean entry: its packet
/// fields hold the packet's bounds, `r1`/`r2` the context, and a run that wrote the stack
/// leaves nothing for the next one to read.
#[test]
fn the_lean_entry_fills_the_packet_fields_and_resets_the_stack() {
    use weir_program::{exec::Input, ProgType};
    let layout = ProgType::SocketFilter.context_layout();
    let data = layout.field("data").unwrap().offset as i16;
    let end = layout.field("data_end").unwrap().offset as i16;
    // r0 = old stack word + (data_end - data) + r2; then the stack word is set to 1000.
    let program = vec![
        i(Op::LdxDw, 0, 10, -8, 0),
        i(Op::LdxW, 3, 1, end, 0),
        i(Op::LdxW, 4, 1, data, 0),
        i(Op::Sub64Reg, 3, 4, 0, 0),
        i(Op::Add64Reg, 0, 3, 0, 0),
        i(Op::Add64Reg, 0, 2, 0, 0),
        i(Op::StDw, 10, 0, -8, 1000),
        exit(),
    ];
    let bindings = Bindings::for_prog_type(ProgType::SocketFilter);
    let interp =
        Interpreter::new_unvalidated(&Program::from_insns(program), bindings, Config::default());
    let mut cache = interp.cache();
    let mut ctx = vec![0u8; layout.size as usize];
    for len in [60usize, 1514, 0, 60] {
        let mut packet = vec![0u8; len];
        let outcome = interp.run_stats(&mut cache, Input::new().ctx(&mut ctx).packet(&mut packet));
        assert_eq!(outcome.map(|o| (o.r0, o.executed)), Ok((len as u64 + ctx.len() as u64, 8)));
        let at = |offset: i16| u32::from_le_bytes(ctx[offset as usize..][..4].try_into().unwrap());
        assert_eq!(at(data), crate::guest::PACKET_BASE as u32);
        assert_eq!(at(end), (crate::guest::PACKET_BASE + len as u64) as u32);
    }
    // A context too short for the packet fields: the general path's trap, naming the field.
    let mut short = vec![0u8; end as usize];
    let trap = interp.run_stats(&mut cache, Input::new().ctx(&mut short).packet(&mut [0; 60]));
    assert_eq!(trap.map_err(|t| t.addr), Err(crate::guest::CTX_BASE + end as u64));
}

fn with_budget(insns: Vec<Insn>, budget: u64) -> Interpreter {
    let config = Config { instruction_budget: budget, ..Config::default() };
    Interpreter::new_unvalidated(&Program::from_insns(insns), Bindings::conformance(), config)
}

/// Only a program whose steps each run at most once a run skips the budget test: forward
/// jumps and no calls, and no more steps than the budget.
#[test]
fn only_forward_programs_within_the_budget_skip_its_test() {
    let filter = || {
        vec![
            i(Op::Jeq64Imm, 1, 0, 1, 0),
            i(Op::Ja, 0, 0, 0, 0),
            i(Op::Mov32Imm, 0, 0, 0, 1),
            exit(),
        ]
    };
    assert!(unvalidated(filter()).budget_free);
    // Four slots and the sentinel: a budget of five still covers every run, four does not.
    assert!(with_budget(filter(), 5).budget_free);
    assert!(!with_budget(filter(), 4).budget_free);
    let not_forward = [
        vec![i(Op::Mov32Imm, 0, 0, 0, 1), i(Op::Jne64Imm, 0, 0, -2, 0), exit()],
        vec![i(Op::Ja, 0, 0, -1, 0), exit()],
        vec![i(Op::Ja32, 0, 0, 0, -1), exit()],
        vec![i(Op::Jgt64Reg, 0, 1, -1, 0), exit()],
        vec![i(Op::CallLocal, 0, 1, 0, 0), exit(), exit()],
        vec![i(Op::CallReg, 1, 0, 0, 0), exit()],
        // `bpf_loop`, which the interpreter runs itself: its callback runs again and again.
        vec![i(Op::Call, 0, 0, 0, 181), exit()],
    ];
    for insns in not_forward {
        assert!(!unvalidated(insns.clone()).budget_free, "{insns:?}");
    }
    // A helper call returns to the next slot: still forward.
    assert!(unvalidated(vec![i(Op::Call, 0, 0, 0, 5), exit()]).budget_free);
}

/// A socket filter's interpreter with `budget`, and one run of it on the lean entry (a
/// context and a packet alone, where the loop's shortcuts apply): r0 or the trap, and the
/// count.
fn lean_run(insns: Vec<Insn>, budget: u64) -> (Result<u64, Trap>, u64) {
    use weir_program::{exec::Input, ProgType};
    let config = Config { instruction_budget: budget, ..Config::default() };
    let bindings = Bindings::for_prog_type(ProgType::SocketFilter);
    let interp = Interpreter::new_unvalidated(&Program::from_insns(insns), bindings, config);
    let mut ctx = vec![0u8; ProgType::SocketFilter.context_layout().size as usize];
    let mut packet = vec![0u8; 64];
    let mut cache = interp.cache();
    let input = Input::new().ctx(&mut ctx).packet(&mut packet);
    let r0 = interp.run_stats(&mut cache, input).map(|outcome| outcome.r0);
    (r0, cache.executed())
}

/// `mov32 r0, K; exit` is one step that runs both on the lean entry: the count, a budget
/// that ends between the two, a jump to the `exit` alone and an `exit` from a called frame
/// all stay as the two steps give them.
#[test]
fn a_set_then_exit_runs_as_its_two_instructions() {
    use crate::step::Step;
    use weir_program::TrapCode;
    let program = || vec![i(Op::Mov32Imm, 0, 0, 0, 7), exit()];
    let interp = unvalidated(program());
    assert!(matches!(interp.code[0], Step::SetThenExit { dst: 0, imm: 7 }));
    assert!(matches!(interp.code[1], Step::Exit));
    assert_eq!(lean_run(program(), 1 << 20), (Ok(7), 2));
    // The budget ends after the `mov`: the `exit` traps, as it would on its own.
    assert_eq!(lean_run(program(), 1), (Err(Trap::new(TrapCode::InstructionBudget, 1)), 1));
    // A jump straight to the `exit` returns r0 as it is.
    let jumps = vec![
        i(Op::Mov32Imm, 0, 0, 0, 3),
        i(Op::Ja, 0, 0, 1, 0),
        i(Op::Mov32Imm, 0, 0, 0, 7),
        exit(),
    ];
    assert_eq!(lean_run(jumps, 1 << 20), (Ok(3), 3));
    // In a called frame the `exit` returns to the caller, which goes on.
    let calls = vec![
        i(Op::CallLocal, 0, 1, 0, 2),
        i(Op::Add64Imm, 0, 0, 0, 1),
        exit(),
        i(Op::Mov32Imm, 0, 0, 0, 5),
        exit(),
    ];
    assert_eq!(lean_run(calls, 1 << 20), (Ok(6), 5));
    // A filter's shape, budget-free: the same count and result as each step alone.
    let filter = vec![
        i(Op::Mov64Reg, 6, 1, 0, 0),
        i(Op::LdxW, 7, 6, 0, 0),
        i(Op::Jgt32Imm, 7, 0, 2, 128),
        i(Op::Mov32Imm, 0, 0, 0, 0x40000),
        exit(),
        i(Op::Mov32Imm, 0, 0, 0, 0),
        exit(),
    ];
    assert!(unvalidated(filter.clone()).budget_free);
    assert_eq!(lean_run(filter.clone(), 1 << 20), (Ok(0x40000), 5));
    // Four steps of budget: the fused `exit` must not run past it.
    assert_eq!(lean_run(filter, 4), (Err(Trap::new(TrapCode::InstructionBudget, 4)), 4));
}
