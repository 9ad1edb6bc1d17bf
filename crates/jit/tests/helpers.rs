//! The helper ABI end to end, on every engine through the one engine contract: a helper
//! added in one place (a `Helper` in the `Bindings`) reads and writes guest memory through
//! its `HelperCtx`, with the program's own access rules, and sees the program type; the
//! interpreter and the JIT give the same answers, traps and memory.

use weir_isa::asm::assemble;
use weir_program::abi::{Bindings, Helper, HelperCtx, HelperOutcome};
use weir_program::exec::{DynEngine, Input, Limits};
use weir_program::{ProgType, Program, Trap, TrapCode, Verified};

/// `sum(addr, len)`: the sum of `len` guest bytes at `addr`; fails if any is unreadable.
fn sum(ctx: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    let Ok(len) = usize::try_from(args[1]) else { return HelperOutcome::Fail };
    let mut bytes = vec![0u8; len.min(4096)];
    match ctx.read(args[0], &mut bytes) {
        Ok(()) => HelperOutcome::Return(bytes.iter().map(|&b| u64::from(b)).sum()),
        Err(_) => HelperOutcome::Fail,
    }
}

/// `fill(addr, len, byte)`: writes `len` copies of `byte` at `addr`; returns 0, or the
/// trap code's number when the program may not write there.
fn fill(ctx: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    let Ok(len) = usize::try_from(args[1]) else { return HelperOutcome::Fail };
    let bytes = vec![args[2] as u8; len.min(4096)];
    match ctx.write(args[0], &bytes) {
        Ok(()) => HelperOutcome::Return(0),
        Err(code) => HelperOutcome::Return(u64::from(code.code())),
    }
}

/// `prog_type()`: the kernel id of the program type the bindings name, or 0.
fn prog_type(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Return(ctx.prog_type().map_or(0, |t| u64::from(t.kernel_id())))
}

fn bindings(prog: Option<ProgType>) -> Bindings {
    let mut b = match prog {
        Some(t) => Bindings::for_prog_type(t),
        None => Bindings::new(),
    };
    b.add_helper(Helper { id: 200, name: "sum", func: sum });
    b.add_helper(Helper { id: 201, name: "fill", func: fill });
    b.add_helper(Helper { id: 202, name: "prog_type", func: prog_type });
    b
}

static INTERP: weir_interp::Interp = weir_interp::Interp;
static JIT: weir_jit::Jit = weir_jit::Jit;

/// Runs `text` with `mem` (and a context when `prog` names a type) on both engines;
/// asserts they agree on the outcome and the memory afterwards; returns both.
fn run(text: &str, mem: &[u8], prog: Option<ProgType>) -> (Result<u64, Trap>, Vec<u8>) {
    let insns = assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let program = Verified::structural(Program::from_insns(insns)).unwrap();
    let mut seen = Vec::new();
    for engine in [&INTERP as &dyn DynEngine, &JIT] {
        let mut session = engine.load(&program, bindings(prog), Limits::default()).unwrap();
        let mut mem = mem.to_vec();
        let mut ctx = prog.map(|t| vec![0u8; t.context_layout().size as usize]);
        let mut packet = vec![7u8; 16];
        let input = match ctx.as_deref_mut() {
            Some(ctx) => Input::new().ctx(ctx).packet(&mut packet),
            None => Input::new().mem(&mut mem),
        };
        let outcome = session.run(input).map(|o| o.r0);
        seen.push((engine.name(), outcome, mem));
    }
    let (_, interp, interp_mem) = &seen[0];
    let (_, jit, jit_mem) = &seen[1];
    assert_eq!(jit, interp, "{text}");
    assert_eq!(jit_mem, interp_mem, "{text}");
    (*interp, interp_mem.clone())
}

#[test]
fn a_helper_reads_guest_memory_with_the_programs_rules() {
    // r1 = mem, r2 = its length: the sum of all of it.
    assert_eq!(run("call 200\nexit", &[1, 2, 3, 4], None).0, Ok(10));
    // The stack, through r10: what the program stored.
    let stack = "stw [%r10-4], 0x01010101\nmov %r1, %r10\nsub %r1, 4\nmov %r2, 4\ncall 200\nexit";
    assert_eq!(run(stack, &[], None).0, Ok(4));
    // One byte past the memory: the helper fails, and the run ends with its trap.
    let (outcome, _) = run("add %r2, 1\ncall 200\nexit", &[1, 2, 3, 4], None);
    assert_eq!(outcome.unwrap_err().code, TrapCode::HelperFailed);
}

#[test]
fn a_helper_writes_guest_memory_where_the_program_may() {
    let (outcome, mem) = run("mov %r3, 9\ncall 201\nexit", &[0; 6], None);
    assert_eq!((outcome, mem), (Ok(0), vec![9; 6]));
    // Past the end: out of bounds, nothing written.
    let (outcome, mem) = run("add %r2, 1\nmov %r3, 9\ncall 201\nexit", &[0; 6], None);
    assert_eq!(outcome, Ok(u64::from(TrapCode::OutOfBounds.code())));
    assert_eq!(mem, vec![0; 6]);
    // A socket filter's context is read-only outside its writable fields (`cb`, at 48).
    let ctx_write = "mov %r2, 4\nmov %r3, 1\ncall 201\nexit";
    let (outcome, _) = run(ctx_write, &[], Some(ProgType::SocketFilter));
    assert_eq!(outcome, Ok(u64::from(TrapCode::ReadOnly.code())));
    let cb_write = "add %r1, 48\nmov %r2, 4\nmov %r3, 1\ncall 201\nexit";
    assert_eq!(run(cb_write, &[], Some(ProgType::SocketFilter)).0, Ok(0));
}

#[test]
fn a_helper_sees_the_program_type() {
    assert_eq!(run("call 202\nexit", &[], None).0, Ok(0));
    for t in [ProgType::SocketFilter, ProgType::Xdp] {
        assert_eq!(run("call 202\nexit", &[], Some(t)).0, Ok(u64::from(t.kernel_id())), "{t}");
    }
}
