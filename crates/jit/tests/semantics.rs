//! Hand-written programs for the JIT's hard cases, each with its expected outcome written
//! out and the interpreter's outcome compared too: call frames and the stack floor, calls
//! through registers into the middle of a function, exact budget traps, context writes,
//! helpers that stop, fail or panic; plus the JIT's own promises: constant blinding, W^X
//! code memory, and sharing a compiled program between threads.

use weir_isa::asm::assemble;
use weir_jit::{Config, Jit, JitProgram};
use weir_program::abi::{self, Bindings, Helper, HelperCtx, HelperOutcome};
use weir_program::{Program, Trap, TrapCode, Verified};

fn program(text: &str) -> Verified {
    let program = Program::from_insns(assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}")));
    Verified::structural(program).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn panics(_: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    panic!("helper 103 panicked on purpose")
}

fn bindings() -> Bindings {
    let mut b = Bindings::conformance();
    b.add_helper(Helper { id: 103, name: "panics", func: panics });
    b
}

/// Runs `text` on `mem` with both engines; asserts they agree on the outcome, the executed
/// count, the memory and the stack; returns the JIT's outcome.
fn both(text: &str, mem: &[u8], budget: u64) -> Result<u64, Trap> {
    let program = program(text);
    let interp = weir_interp::Interpreter::new(
        &program,
        bindings(),
        weir_interp::Config { instruction_budget: budget, ..weir_interp::Config::default() },
    );
    let jit = Jit::compile(
        &program,
        bindings(),
        Config::with_limits(weir_interp::Config {
            instruction_budget: budget,
            ..weir_interp::Config::default()
        }),
    )
    .expect("compiles");
    let mut interp_cache = interp.cache();
    let mut jit_cache = jit.cache();
    let mut interp_mem = mem.to_vec();
    let mut jit_mem = mem.to_vec();
    let expected = interp.run_mem(&mut interp_cache, &mut interp_mem);
    let got = jit.run_mem(&mut jit_cache, &mut jit_mem);
    assert_eq!(got, expected, "outcome\n{text}");
    assert_eq!(jit_cache.executed(), interp_cache.executed(), "executed\n{text}");
    assert_eq!(jit_mem, interp_mem, "memory\n{text}");
    assert!(jit_cache.stack() == interp_cache.stack(), "stack\n{text}");
    got
}

const TOP: u64 = weir_jit::guest::STACK_BASE + 8 * 512;

#[test]
fn a_return_hides_the_callees_frame_again() {
    let text = "
        call local f
        ldxdw %r0, [%r10-520]
        exit
    f:
        stdw [%r10-8], 7
        exit";
    let trap = both(text, &[], 100).unwrap_err();
    assert_eq!(
        (trap.code, trap.pc, trap.addr, trap.size),
        (TrapCode::OutOfBounds, 1, TOP - 520, 8)
    );
}

#[test]
fn a_callee_reaches_its_callers_frame_through_a_pointer() {
    let text = "
        stdw [%r10-8], 42
        mov %r1, %r10
        add %r1, -8
        call local f
        exit
    f:
        ldxdw %r0, [%r1]
        ldxdw %r2, [%r10+504]   # the same bytes, through the callee's own r10
        add %r0, %r2
        exit";
    assert_eq!(both(text, &[], 100), Ok(84));
}

#[test]
fn frames_below_the_running_one_are_out_of_reach() {
    let trap = both("ldxb %r0, [%r10-513]\nexit", &[], 100).unwrap_err();
    assert_eq!(
        (trap.code, trap.pc, trap.addr, trap.size),
        (TrapCode::OutOfBounds, 0, TOP - 513, 1)
    );
    let trap = both("mov %r1, %r10\nstb [%r1-513], 1\nexit", &[], 100).unwrap_err();
    assert_eq!((trap.code, trap.pc, trap.addr), (TrapCode::OutOfBounds, 1, TOP - 513));
}

#[test]
fn recursion_stops_at_the_depth_limit() {
    let text = "
        mov %r6, 0
        call local f
        exit
    f:
        add %r6, 1
        stxdw [%r10-8], %r6
        call local f
        exit";
    let trap = both(text, &[], 1000).unwrap_err();
    // Frames 1..7 are callees; the call from frame 7 would be the ninth frame.
    assert_eq!((trap.code, trap.pc), (TrapCode::CallDepth, 5));
}

#[test]
fn callee_saved_registers_survive_calls() {
    let text = "
        mov %r6, 6
        mov %r9, 9
        call local f
        add %r6, %r9
        mov %r0, %r6
        exit
    f:
        mov %r6, 100
        mov %r9, 100
        mov %r0, 1
        exit";
    assert_eq!(both(text, &[], 100), Ok(15));
}

#[test]
fn call_by_register_enters_any_instruction() {
    // func(g) + 8 is the address of g's second instruction.
    let text = "
        lddw %r1, func(g)
        add %r1, 8
        call %r1
        exit
    g:
        mov %r0, 1
        add %r0, 10
        exit";
    assert_eq!(both(text, &[], 100), Ok(10));
    // A value that is neither a function nor a helper.
    let trap = both("mov %r1, 77\ncall %r1\nexit", &[], 100).unwrap_err();
    assert_eq!((trap.code, trap.pc, trap.addr), (TrapCode::BadCallTarget, 1, 77));
    // The second slot of an lddw is no instruction.
    let trap =
        both("lddw %r1, func(g)\nadd %r1, 8\ncall %r1\nexit\ng:\nlddw %r0, 1\nexit", &[], 100)
            .unwrap_err();
    assert_eq!(trap.code, TrapCode::BadCallTarget);
    // A helper id works too.
    assert_eq!(both("mov %r1, 5\nmov %r6, 5\ncall %r6\nexit", &[], 100), Ok(5));
}

#[test]
fn the_budget_stops_at_the_same_instruction() {
    let text = "
        mov %r0, 0
    loop:
        add %r0, 1
        stxdw [%r10-8], %r0
        ldxdw %r2, [%r10-8]
        ja loop";
    for budget in 0..40 {
        let trap = both(text, &[], budget).unwrap_err();
        assert_eq!(trap.code, TrapCode::InstructionBudget);
        let expected_pc = if budget == 0 { 0 } else { 1 + (budget as usize - 1) % 4 };
        assert_eq!(trap.pc, expected_pc, "budget {budget}");
    }
}

#[test]
fn the_budget_counts_a_trap_and_an_exit_exactly() {
    // Out of bounds at the third instruction of a block: with budget 3 it is reached.
    let text = "mov %r0, 1\nadd %r0, 1\nldxb %r0, [%r1+100]\nadd %r0, 1\nexit";
    let trap = both(text, &[0; 4], 3).unwrap_err();
    assert_eq!((trap.code, trap.pc), (TrapCode::OutOfBounds, 2));
    let trap = both(text, &[0; 4], 2).unwrap_err();
    assert_eq!((trap.code, trap.pc), (TrapCode::InstructionBudget, 2));
    assert_eq!(both("mov %r0, 3\nexit", &[], 2), Ok(3));
    assert_eq!(both("mov %r0, 3\nexit", &[], 1).unwrap_err().pc, 1);
}

/// A plain exit gives `r0` and the budget left in registers and stores no outcome words
/// (`code_memory::Exit`); a trap, a helper's stop and the budget still leave theirs in the
/// run state. One cache takes each kind of ending in turn, so every plain run follows
/// outcome words an earlier run left behind: each run's outcome and executed count must
/// still be the interpreter's.
#[test]
fn plain_exits_after_traps_stops_and_budgets_on_one_cache_are_plain() {
    // mem[0] picks the ending (0 plain, 1 out of bounds, 2 a helper's stop), mem[1] the
    // number of turns of a loop before it (the budget of 100 stops it past ~24).
    let text = "
        ldxb %r3, [%r1+0]
        ldxb %r4, [%r1+1]
        mov %r0, 0
    turn:
        jeq %r4, 0, done
        add %r0, 3
        sub %r4, 1
        ja turn
    done:
        jeq %r3, 1, oob
        jeq %r3, 2, stop
        exit
    oob:
        ldxb %r0, [%r1+100]
        exit
    stop:
        mov %r1, %r0
        add %r1, 1
        call 5
        mov %r0, 9
        exit";
    let program = program(text);
    let limits = weir_interp::Config { instruction_budget: 100, ..weir_interp::Config::default() };
    let interp = weir_interp::Interpreter::new(&program, bindings(), limits);
    let jit = Jit::compile(&program, bindings(), Config::with_limits(limits)).expect("compiles");
    let (mut interp_cache, mut jit_cache) = (interp.cache(), jit.cache());
    let inputs: [[u8; 2]; 10] =
        [[0, 2], [1, 1], [0, 0], [2, 3], [0, 5], [0, 200], [0, 1], [1, 0], [2, 0], [0, 7]];
    let mut plain = 0;
    for input in inputs {
        let (mut a, mut b) = (input.to_vec(), input.to_vec());
        let expected = interp.run_mem(&mut interp_cache, &mut a);
        let got = jit.run_mem(&mut jit_cache, &mut b);
        assert_eq!(got, expected, "outcome of {input:?}");
        assert_eq!(jit_cache.executed(), interp_cache.executed(), "executed of {input:?}");
        if input[0] == 0 && input[1] < 20 {
            assert_eq!(got, Ok(3 * u64::from(input[1])), "{input:?}");
            plain += 1;
        }
    }
    assert_eq!(plain, 5);
}

#[test]
fn helpers_stop_fail_and_go_unbound() {
    assert_eq!(both("mov %r1, 0\ncall 5\nmov %r0, 9\nexit", &[], 100), Ok(0));
    assert_eq!(both("mov %r1, 3\ncall 5\nexit", &[], 100), Ok(3));
    let trap = both("call 77\nexit", &[], 100).unwrap_err();
    assert_eq!((trap.code, trap.pc, trap.addr), (TrapCode::UnknownHelper, 0, 77));
    let trap = both("call kfunc 3\nexit", &[], 100).unwrap_err();
    assert_eq!((trap.code, trap.pc), (TrapCode::Unsupported, 0));
}

#[test]
fn a_panicking_helper_panics_through_run_and_leaves_the_program_usable() {
    let text = "jeq %r2, 0, +1\ncall 103\nmov %r0, 7\nexit";
    let jit = Jit::compile(&program(text), bindings(), Config::default()).expect("compiles");
    let mut cache = jit.cache();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        jit.run_mem(&mut cache, &mut [1, 2, 3])
    }));
    let payload = caught.expect_err("the helper's panic must reach the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"helper 103 panicked on purpose"));
    assert_eq!(jit.run_mem(&mut cache, &mut []), Ok(7));
}

#[test]
fn context_stores_obey_the_layout() {
    let mut b = Bindings::conformance();
    b.context = Some(&abi::SOCKET_FILTER);
    let run = |text: &str| {
        let program = program(text);
        let jit = Jit::compile(&program, b.clone(), Config::default()).expect("compiles");
        let interp =
            weir_interp::Interpreter::new(&program, b.clone(), weir_interp::Config::default());
        let mut ctx_jit = vec![0u8; 192];
        let mut ctx_interp = vec![0u8; 192];
        let mut packet = vec![0xab; 20];
        let mut packet2 = packet.clone();
        let got =
            jit.run(&mut jit.cache(), weir_jit::Input::new().ctx(&mut ctx_jit).packet(&mut packet));
        let expected = interp.run(
            &mut interp.cache(),
            weir_interp::Input::new().ctx(&mut ctx_interp).packet(&mut packet2),
        );
        assert_eq!(got, expected, "{text}");
        assert_eq!(ctx_jit, ctx_interp, "{text}");
        (got, ctx_jit)
    };
    // `cb` (offset 48, 20 bytes) is writable, also by atomics.
    let (got, ctx) =
        run("stw [%r1+48], 5\nmov %r2, 2\nlock add32 [%r1+48], %r2\nldxw %r0, [%r1+48]\nexit");
    assert_eq!(got, Ok(7));
    assert_eq!(ctx[48], 7);
    // `mark` is not; a store straddling cb's end is not either.
    let trap = run("stw [%r1+8], 5\nexit").0.unwrap_err();
    assert_eq!(
        (trap.code, trap.addr, trap.size),
        (TrapCode::ReadOnly, weir_jit::guest::CTX_BASE + 8, 4)
    );
    assert_eq!(run("stxdw [%r1+64], %r1\nexit").0.unwrap_err().code, TrapCode::ReadOnly);
    assert_eq!(run("stb [%r1+192], 1\nexit").0.unwrap_err().code, TrapCode::OutOfBounds);
    // The packet pointers the layout's fields hold reach the packet.
    assert_eq!(run("ldxw %r2, [%r1+76]\nldxb %r0, [%r2+19]\nexit").0, Ok(0xab));
    assert_eq!(
        run("ldxw %r2, [%r1+76]\nldxb %r0, [%r2+20]\nexit").0.unwrap_err().code,
        TrapCode::OutOfBounds
    );
}

#[test]
fn legacy_loads_end_the_program_with_zero_outside_the_packet() {
    let mem = [0x12, 0x34, 0x56, 0x78, 0x9a];
    assert_eq!(both("ldabsw 1\nexit", &mem, 100), Ok(0x3456789a));
    assert_eq!(both("ldabsw 2\nmov %r0, 5\nexit", &mem, 100), Ok(0));
    assert_eq!(both("mov %r1, -1\nldindh %r1, 2\nexit", &mem, 100), Ok(0x3456));
    assert_eq!(both("mov %r1, -3\nldindb %r1, 2\nmov %r0, 5\nexit", &mem, 100), Ok(0));
}

/// A program whose immediates are distinctive 32-bit values, none of which Cranelift can
/// fold into another constant: each meets the run-time `r2`.
const DISTINCTIVE: &str = "
    mov %r0, %r2
    add %r0, 0x1badc0de
    xor %r0, 0x2badbeef
    mul %r0, 0x3cafe123
    jeq %r0, 0x4deadbe1, +1
    or %r0, 0x5eed1234
    stw [%r10-8], 0x6a5b4c3d
    ldxw %r3, [%r10-8]
    add %r0, %r3
    exit";

const IMMEDIATES: [u32; 6] =
    [0x1badc0de, 0x2badbeef, 0x3cafe123, 0x4deadbe1, 0x5eed1234, 0x6a5b4c3d];

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn blinding_keeps_immediates_out_of_the_machine_code() {
    let program = program(DISTINCTIVE);
    let plain =
        Jit::compile(&program, Bindings::conformance(), Config::default()).expect("compiles");
    let blinded = Jit::compile(
        &program,
        Bindings::conformance(),
        Config { blinding: true, ..Config::default() },
    )
    .expect("compiles");
    assert!(!plain.machine_code().is_empty());
    for imm in IMMEDIATES {
        let bytes = imm.to_le_bytes();
        assert!(contains(plain.machine_code(), &bytes), "{imm:#x} missing without blinding");
        assert!(!contains(blinded.machine_code(), &bytes), "{imm:#x} present with blinding");
    }
    let mut mem = [7u8; 9];
    assert_eq!(
        plain.run_mem(&mut plain.cache(), &mut mem.clone()),
        blinded.run_mem(&mut blinded.cache(), &mut mem)
    );
}

#[test]
fn code_memory_is_never_writable_and_executable() {
    let jit = Jit::compile(&program(DISTINCTIVE), Bindings::conformance(), Config::default())
        .expect("compiles");
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        println!("SKIPPED: code_memory_is_never_writable_and_executable: no /proc/self/maps");
        return;
    };
    let code = jit.machine_code().as_ptr() as u64;
    let mapping = maps.lines().find(|line| {
        let range = line.split_whitespace().next().unwrap_or("");
        let (start, end) = range.split_once('-').unwrap_or(("0", "0"));
        let parse = |s: &str| u64::from_str_radix(s, 16).unwrap_or(0);
        (parse(start)..parse(end)).contains(&code)
    });
    let perms =
        mapping.and_then(|line| line.split_whitespace().nth(1)).expect("a mapping holds the code");
    assert!(perms.starts_with("r-x"), "code mapped {perms}");
    // And no mapping anywhere in the process is writable and executable at once.
    for line in maps.lines() {
        let perms = line.split_whitespace().nth(1).unwrap_or("");
        assert!(!(perms.contains('w') && perms.contains('x')), "W+X mapping: {line}");
    }
}

#[test]
fn compiled_programs_are_shared_between_threads() {
    fn shareable<T: Send + Sync>(_: &T) {}
    let jit: JitProgram =
        Jit::compile(&program(DISTINCTIVE), Bindings::conformance(), Config::default())
            .expect("compiles");
    shareable(&jit);
    let results: Vec<Result<u64, Trap>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4u8)
            .map(|n| {
                let jit = &jit;
                scope.spawn(move || {
                    let mut cache = jit.cache();
                    let mut mem = vec![n; usize::from(n) + 1];
                    jit.run_mem(&mut cache, &mut mem)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("no panic")).collect()
    });
    for (n, result) in results.into_iter().enumerate() {
        let mut mem = vec![n as u8; n + 1];
        assert_eq!(result, jit.run_mem(&mut jit.cache(), &mut mem));
    }
}

#[test]
fn invalid_programs_never_reach_the_jit() {
    // The check in front of every engine names the instruction.
    let program = Program::from_insns(assemble("mov %r0, 1\nja +5\nexit").expect("assembles"));
    let err = Verified::structural(program).unwrap_err();
    assert_eq!(err.index, 1);
    assert!(err.to_string().starts_with("instruction 1: jump target"), "{err}");
}
