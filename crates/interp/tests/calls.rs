//! Calls and the end of a run: helpers (return, stop, fail, unknown), local calls with
//! their frames, the call depth limit, calls through a register, the instruction budget,
//! and instructions that only trap when reached.

use crate::common::*;
use weir_interp::guest::{self, STACK_BASE};
use weir_interp::{Config, Input};
use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::{Bindings, Helper, HelperCtx, HelperOutcome};
use weir_program::{Trap, TrapCode};

fn sum_args(_: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Return(args.iter().fold(0u64, |a, &b| a.wrapping_add(b)))
}

fn always_fails(_: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Fail
}

fn stop_with_r2(_: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Stop(args[1])
}

fn test_bindings() -> Bindings {
    let mut b = Bindings::conformance();
    b.add_helper(Helper { id: 100, name: "sum", func: sum_args });
    b.add_helper(Helper { id: 101, name: "fail", func: always_fails });
    b.add_helper(Helper { id: 102, name: "stop", func: stop_with_r2 });
    b
}

fn run_b(insns: &[Insn]) -> Result<u64, Trap> {
    run_input(insns, test_bindings(), Input::new())
}

fn set_args() -> [Insn; 5] {
    [mov(1, 1), mov(2, 20), mov(3, 300), mov(4, 4000), mov(5, 50000)]
}

#[test]
fn helper_return_goes_to_r0_and_arguments_stay() {
    let mut insns = set_args().to_vec();
    insns.extend([call(100), jmp_imm(Op::Jne64Imm, 5, 50000, 2), reg(Op::Add64Reg, 0, 1), exit()]);
    insns.extend([mov(0, -1), exit()]);
    // r1-r5 are not clobbered by the interpreter: 54321 + r1.
    assert_eq!(run_b(&insns), Ok(54322));
}

#[test]
fn helper_stop_ends_the_whole_program() {
    // From inside a local call: nothing after the stop runs, in callee or caller.
    let insns = [mov(2, 77), call_local(2), mov(0, 1), exit(), call(102), mov(0, 2), exit()];
    assert_eq!(run_b(&insns), Ok(77));
}

#[test]
fn conformance_unwind_helper() {
    let insns = |r1| [mov(1, r1), call(5), imm(Op::Add64Imm, 0, 100), exit()];
    assert_eq!(run_b(&insns(3)), Ok(103));
    assert_eq!(run_b(&insns(0)), Ok(0));
}

#[test]
fn helper_failure_and_unknown_helpers_trap_with_the_id() {
    assert_eq!(
        run_b(&[mov(0, 0), call(101), exit()]),
        Err(Trap::memory(TrapCode::HelperFailed, 1, 101, 0))
    );
    assert_eq!(
        run_b(&[mov(0, 0), call(4242), exit()]),
        Err(Trap::memory(TrapCode::UnknownHelper, 1, 4242, 0))
    );
    // Only when reached (the call is on a path this run does not take).
    let skipped = [mov(0, 5), jmp_imm(Op::Jeq64Imm, 0, 5, 1), call(4242), exit()];
    assert_eq!(run_b(&skipped), Ok(5));
}

#[test]
fn local_calls_save_registers_and_get_a_fresh_frame() {
    let insns = [
        mov(6, 6),
        mov(7, 7),
        mov(8, 8),
        mov(9, 9),
        st(Op::StDw, 10, -8, 0x1122),
        mov(1, 10),
        mov(2, 20),
        call_local(12), // slot 7 -> callee at 20
        // r0 = callee's result; r6-r9 and our stack slot must be intact.
        jmp_imm(Op::Jne64Imm, 6, 6, 9), // -> failed (slot 18)
        jmp_imm(Op::Jne64Imm, 7, 7, 8),
        jmp_imm(Op::Jne64Imm, 8, 8, 7),
        jmp_imm(Op::Jne64Imm, 9, 9, 6),
        mem(Op::LdxDw, 3, 10, -8),
        jmp_imm(Op::Jne64Imm, 3, 0x1122, 4),
        lddw(3, STACK_BASE + 8 * 512), // frame 0 is the top of the 8-frame region
        jmp_reg(Op::Jne64Reg, 10, 3, 1),
        exit(),
        // failed:
        mov(0, -1),
        exit(),
        // callee (slot 20: the lddw takes two slots): r0 = r1 + r2 + its r10, clobber r6-r9 and
        // its own [r10-8].
        reg(Op::Mov64Reg, 0, 1),
        reg(Op::Add64Reg, 0, 2),
        reg(Op::Add64Reg, 0, 10),
        mov(6, 0),
        mov(7, 0),
        mov(8, 0),
        mov(9, 0),
        st(Op::StDw, 10, -8, -1),
        exit(),
    ];
    assert_eq!(program(&insns).insns()[20].op, Op::Mov64Reg);
    assert_eq!(program(&insns).insns()[18].op, Op::Mov64Imm);
    let i = interp(&insns);
    let mut cache = i.cache();
    assert_eq!(i.run_mem(&mut cache, &mut []), Ok(30 + STACK_BASE + 7 * 512));
    // Each frame wrote its own slot.
    assert_eq!(cache.stack()[4088..4096], 0x1122u64.to_le_bytes());
    assert_eq!(cache.stack()[3576..3584], [0xff; 8]);
}

/// `main: r1 = depth; call f; r0 = 1; exit` with `f` recursing until r1 reaches 0: the
/// deepest point has `1 + depth` frames.
fn recursion(depth: i64) -> Vec<Insn> {
    vec![
        mov(1, depth),
        call_local(2),
        mov(0, 1),
        exit(),
        imm(Op::Sub64Imm, 1, 1),
        jmp_imm(Op::Jeq64Imm, 1, 0, 1),
        call_local(-3),
        exit(),
    ]
}

#[test]
fn call_depth_limit() {
    assert_eq!(run(&recursion(7)), Ok(1)); // 8 frames: the limit
    assert_eq!(run(&recursion(8)), Err(Trap::new(TrapCode::CallDepth, 6)));
    let config = Config { max_call_depth: 2, ..Config::default() };
    let go = |depth| {
        let i = interp_with(&recursion(depth), Bindings::new(), config);
        let mut cache = i.cache();
        i.run_mem(&mut cache, &mut [])
    };
    assert_eq!(go(1), Ok(1));
    assert_eq!(go(2), Err(Trap::new(TrapCode::CallDepth, 6)));
    // After a depth trap the cache is fine for the next run.
    let i = interp(&recursion(8));
    let mut cache = i.cache();
    assert!(i.run_mem(&mut cache, &mut []).is_err());
    let ok = interp(&recursion(3));
    assert_eq!(ok.run_mem(&mut cache, &mut []), Ok(1));
}

#[test]
fn callx_to_a_function_address() {
    let insns = [
        insn(Op::LddwFunc, 2, 4, 0, 4), // target: slot 0 + 1 + 4 = 5
        mov(1, 41),
        insn(Op::CallReg, 2, 0, 0, 0),
        exit(),
        // slot 5
        reg(Op::Mov64Reg, 0, 1),
        imm(Op::Add64Imm, 0, 1),
        exit(),
    ];
    assert_eq!(program(&insns).insns()[5].op, Op::Mov64Reg);
    assert_eq!(run(&insns), Ok(42));
    // The address itself is an ordinary value.
    let insns = [insn(Op::LddwFunc, 0, 4, 0, 2), exit(), exit()];
    assert_eq!(run(&insns), Ok(guest::func_addr(3).unwrap()));
}

#[test]
fn callx_to_a_helper_id() {
    // The conformance suite's callx test: helper 5 called through a register.
    let insns = [mov(1, -1), mov(2, 5), insn(Op::CallReg, 2, 0, 0, 0), mov(0, 2), exit()];
    assert_eq!(run(&insns), Ok(2));
    let insns = [mov(1, 9), mov(2, 5), insn(Op::CallReg, 2, 0, 0, 0), exit()];
    assert_eq!(run(&insns), Ok(9));
}

#[test]
fn callx_to_anything_else_traps() {
    let at = |value: u64| [lddw(3, value), insn(Op::CallReg, 3, 0, 0, 0), exit()];
    let bad = |value| Err(Trap::memory(TrapCode::BadCallTarget, 2, value, 0));
    assert_eq!(run(&at(6)), bad(6)); // no helper 6 in the conformance bindings
    assert_eq!(run(&at(guest::FUNC_BASE + 4)), bad(guest::FUNC_BASE + 4)); // misaligned
    assert_eq!(run(&at(guest::FUNC_BASE + 8 * 4)), bad(guest::FUNC_BASE + 32)); // past the end
    assert_eq!(run(&at(guest::FUNC_BASE + 8)), bad(guest::FUNC_BASE + 8)); // lddw's filler
    assert_eq!(run(&at(u64::MAX)), bad(u64::MAX));
}

#[test]
fn infinite_loop_ends_on_the_budget() {
    let config = Config { instruction_budget: 1000, ..Config::default() };
    let i = interp_with(&[mov(0, 0), imm(Op::Add64Imm, 0, 1), ja(-2)], Bindings::new(), config);
    let mut cache = i.cache();
    let trap = i.run_mem(&mut cache, &mut []).unwrap_err();
    assert_eq!(trap.code, TrapCode::InstructionBudget);
    // 1000 instructions ran: mov, then 499 (add, ja) pairs and one more add; next is ja.
    assert_eq!(trap.pc, 2);
    assert_eq!(cache.executed(), 1000);
    // The default budget ends it too.
    assert_eq!(run(&[ja(-1)]).unwrap_err().code, TrapCode::InstructionBudget);
}

#[test]
fn executed_counts_instructions_not_slots() {
    let i = interp(&[lddw(0, 5), mov(1, 1), jmp_imm(Op::Jeq64Imm, 1, 1, 1), mov(0, 0), exit()]);
    let mut cache = i.cache();
    let outcome = i.run_stats(&mut cache, Input::new()).unwrap();
    assert_eq!(outcome.r0, 5);
    assert_eq!(outcome.executed, 4); // lddw, mov, jeq (taken), exit
    assert_eq!(cache.executed(), 4);
    // A budget exactly as large as the run is enough.
    let config = Config { instruction_budget: 4, ..Config::default() };
    let i = interp_with(
        &[lddw(0, 5), mov(1, 1), jmp_imm(Op::Jeq64Imm, 1, 1, 1), mov(0, 0), exit()],
        Bindings::new(),
        config,
    );
    assert_eq!(i.run_mem(&mut i.cache(), &mut []), Ok(5));
    let config = Config { instruction_budget: 3, ..Config::default() };
    let i = interp_with(
        &[lddw(0, 5), mov(1, 1), jmp_imm(Op::Jeq64Imm, 1, 1, 1), mov(0, 0), exit()],
        Bindings::new(),
        config,
    );
    assert_eq!(i.run_mem(&mut i.cache(), &mut []), Err(Trap::new(TrapCode::InstructionBudget, 5)));
}

#[test]
fn kfuncs_and_map_references_are_unsupported_when_reached() {
    let unsupported = |pc| Err(Trap::new(TrapCode::Unsupported, pc));
    assert_eq!(run(&[mov(0, 0), insn(Op::CallKfunc, 0, 2, 0, 7), exit()]), unsupported(1));
    for op in [Op::LddwMapFd, Op::LddwMapValue, Op::LddwBtfId, Op::LddwMapIdx, Op::LddwMapIdxValue]
    {
        let src = op.spec().map(|s| match s.disc {
            weir_isa::ebpf::Disc::Src(v) => v,
            _ => 0,
        });
        let src = src.unwrap_or(0);
        assert_eq!(run(&[mov(0, 0), insn(op, 1, src, 0, 1), exit()]), unsupported(1), "{op:?}");
        let skipped = [mov(0, 3), jmp_imm(Op::Jeq64Imm, 0, 3, 2), insn(op, 1, src, 0, 1), exit()];
        assert_eq!(run(&skipped), Ok(3), "{op:?}");
    }
}

#[test]
fn empty_programs_are_refused() {
    // The check before any engine: an empty program never becomes `Verified`.
    let empty = weir_program::Program::from_insns(Vec::new());
    assert!(weir_program::Verified::structural(empty).is_err());
}

/// `bpf_loop(count, cb, &counter, flags)` (helper 181, run by the engine): the callback
/// adds `index + 1` to a counter in the caller's frame and stops (returns 1) at index
/// `stop`; clobbers r6-r9, which the caller keeps. r0 = result * 10^6 + counter, or the
/// result alone when it is an error.
fn bpf_loop_program(count: i64, stop: i64, flags: i64) -> Vec<Insn> {
    let src = format!(
        "stdw [%r10-8], 0\nmov %r6, 77\nlddw %r1, {count}\nlddw %r2, func(cb)\nmov %r3, %r10\n\
         add %r3, -8\nmov %r4, {flags}\ncall 181\njsgt %r0, -1, ok\nexit\nok:\n\
         jne %r6, 77, bad\nmul %r0, 1000000\nldxdw %r1, [%r10-8]\nadd %r0, %r1\nexit\n\
         bad:\nmov %r0, -1\nexit\n\
         cb:\nmov %r6, %r1\nadd %r6, 1\nldxdw %r7, [%r2]\nadd %r7, %r6\nstxdw [%r2], %r7\n\
         mov %r0, 0\njne %r1, {stop}, go\nmov %r0, 1\ngo:\nexit"
    );
    let slots = weir_isa::asm::assemble(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    // The helpers here add each `lddw`'s second slot themselves.
    slots.into_iter().filter(|i| i.op != Op::LddwHigh).collect()
}

/// What `bpf_loop_program` returns, from the kernel's definition (`abi::bpf_loop`).
fn bpf_loop_expected(count: u64, stop: u64, flags: u64) -> u64 {
    let count = count & 0xffff_ffff;
    if flags != 0 {
        return (-22i64) as u64;
    }
    if count > 8 * 1024 * 1024 {
        return (-7i64) as u64;
    }
    let calls = count.min(stop.saturating_add(1));
    let counter: u64 = (1..=calls).sum();
    calls * 1_000_000 + counter
}

#[test]
fn bpf_loop_calls_back_until_the_count_or_a_stop() {
    let cases: [(i64, i64, i64); 9] = [
        (0, 99, 0),
        (1, 99, 0),
        (10, 99, 0),
        (10, 3, 0),
        (10, 0, 0),
        (10, 9, 0),
        // Only r1's low 32 bits count: 2^32 + 5 is 5.
        (0x1_0000_0005, 99, 0),
        (10, 99, 1),
        (8 * 1024 * 1024 + 1, 99, 0),
    ];
    for (count, stop, flags) in cases {
        let expected = bpf_loop_expected(count as u64, stop as u64, flags as u64);
        let got = run_input(&bpf_loop_program(count, stop, flags), Bindings::new(), Input::new());
        assert_eq!(got, Ok(expected), "bpf_loop({count}, stop at {stop}, flags {flags})");
    }
}

#[test]
fn bpf_loop_callbacks_take_a_frame_and_need_a_function() {
    // The callback's frame counts against the depth: with one frame, no room for it.
    let config = Config { max_call_depth: 1, ..Config::default() };
    let program = bpf_loop_program(3, 99, 0);
    let i = interp_with(&program, Bindings::new(), config);
    let got = i.run(&mut i.cache(), Input::new());
    assert_eq!(got.map_err(|t| t.code), Err(TrapCode::CallDepth));
    let config = Config { max_call_depth: 2, ..Config::default() };
    let i = interp_with(&program, Bindings::new(), config);
    assert_eq!(i.run(&mut i.cache(), Input::new()), Ok(bpf_loop_expected(3, 99, 0)));
    // r2 not a function address: a bad call target at the call.
    let not_func = [mov(1, 2), mov(2, 0x1234), mov(3, 0), mov(4, 0), call(181), exit()];
    let got = run_input(&not_func, Bindings::new(), Input::new());
    assert_eq!(got, Err(Trap::memory(TrapCode::BadCallTarget, 4, 0x1234, 0)));
}
