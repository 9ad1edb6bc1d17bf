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
/// trap code's number when the program may not write there. (Also `lent.rs`'s helper.)
pub(crate) fn fill(ctx: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
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

/// An environment with one 16-byte map value at `VALUE`, reachable only while open
/// (`open`: helper 203, writable; 205, read-only; `close`: 204), as a ring buffer sample is
/// until it is submitted. The JIT keeps the last value a helper returned at hand
/// (`RunEnv::value_span`): closing it must end that as it ends the environment's answers.
struct OneValue {
    words: Box<[u64; 2]>,
    open: bool,
    writable: bool,
}

const VALUE: u64 = weir_program::exec::guest::MAPS_BASE + 64;

impl OneValue {
    fn offset(&self, addr: u64, len: usize) -> Option<usize> {
        let offset = usize::try_from(addr.checked_sub(VALUE)?).ok()?;
        (self.open && offset.checked_add(len)? <= 16).then_some(offset)
    }
}

// SAFETY: `host` and `value_span` give addresses inside `words`, a boxed (8-byte aligned)
// allocation that lives as long as the environment, only while the value is open; tests
// touch it only between runs.
unsafe impl weir_program::abi::RunEnv for OneValue {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), TrapCode> {
        let offset = self.offset(addr, buf.len()).ok_or(TrapCode::OutOfBounds)?;
        let bytes: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        buf.copy_from_slice(&bytes[offset..offset + buf.len()]);
        Ok(())
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), TrapCode> {
        let offset = self.offset(addr, bytes.len()).ok_or(TrapCode::OutOfBounds)?;
        if !self.writable {
            return Err(TrapCode::ReadOnly);
        }
        let mut all: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        all[offset..offset + bytes.len()].copy_from_slice(bytes);
        for (word, chunk) in self.words.iter_mut().zip(all.chunks(8)) {
            *word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        }
        Ok(())
    }

    fn host(&mut self, addr: u64, len: u64, write: bool) -> Option<std::ptr::NonNull<u8>> {
        let offset = self.offset(addr, usize::try_from(len).ok()?)?;
        if write && !self.writable {
            return None;
        }
        std::ptr::NonNull::new(self.words.as_mut_ptr().cast::<u8>().wrapping_add(offset))
    }

    fn value_span(&mut self, addr: u64) -> Option<weir_program::abi::ValueSpan> {
        self.offset(addr, 1)?;
        let host = std::ptr::NonNull::new(self.words.as_mut_ptr().cast::<u8>())?;
        Some(weir_program::abi::ValueSpan { addr: VALUE, host, len: 16, writable: self.writable })
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

fn one_value<'a>(ctx: &'a mut HelperCtx<'_>) -> Option<&'a mut OneValue> {
    ctx.env()?.as_any().downcast_mut::<OneValue>()
}

fn open_value(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    let Some(env) = one_value(ctx) else { return HelperOutcome::Fail };
    (env.open, env.writable) = (true, true);
    HelperOutcome::Return(VALUE)
}

fn open_read_only(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    let Some(env) = one_value(ctx) else { return HelperOutcome::Fail };
    (env.open, env.writable) = (true, false);
    HelperOutcome::Return(VALUE)
}

fn close_value(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    let Some(env) = one_value(ctx) else { return HelperOutcome::Fail };
    env.open = false;
    HelperOutcome::Return(0)
}

/// Runs `text` on both engines with a fresh `OneValue`; asserts they agree on the outcome
/// and the value's words; returns both.
fn run_with_value(text: &str) -> (Result<u64, Trap>, [u64; 2]) {
    let insns = assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let program = Verified::structural(Program::from_insns(insns)).unwrap();
    let mut b = Bindings::new();
    b.add_helper(Helper { id: 203, name: "open", func: open_value });
    b.add_helper(Helper { id: 204, name: "close", func: close_value });
    b.add_helper(Helper { id: 205, name: "open_read_only", func: open_read_only });
    let mut seen = Vec::new();
    for engine in [&INTERP as &dyn DynEngine, &JIT] {
        let mut session = engine.load(&program, b.clone(), Limits::default()).unwrap();
        let mut env = OneValue { words: Box::new([0; 2]), open: false, writable: true };
        // Twice: the second run starts with whatever the first left at hand.
        let mut outcome = session.run(Input::new().env(&mut env)).map(|o| o.r0);
        env.open = false;
        if outcome.is_ok() {
            outcome = session.run(Input::new().env(&mut env)).map(|o| o.r0);
        }
        seen.push((outcome, *env.words));
    }
    assert_eq!(seen[1], seen[0], "jit, then interpreter: {text}");
    seen[0]
}

#[test]
fn a_map_value_kept_at_hand_ends_when_the_environment_ends_it() {
    // Stores and loads after the helper returned it: both engines, same words.
    let open = "call 203\nmov %r6, %r0\nstdw [%r6+8], 5\nldxdw %r0, [%r6+8]\nexit";
    assert_eq!(run_with_value(open), (Ok(5), [0, 5]));
    // An atomic add on it, twice (two runs).
    let add = "call 203\nmov %r6, %r0\nmov %r1, 3\nlock add [%r6+0], %r1\nldxdw %r0, [%r6+0]\nexit";
    assert_eq!(run_with_value(add), (Ok(6), [6, 0]));
    // Closed by the next helper call: the access after it traps, nothing written.
    let closed = "call 203\nmov %r6, %r0\nstdw [%r6+0], 1\ncall 204\nstdw [%r6+8], 7\nexit";
    let (outcome, words) = run_with_value(closed);
    assert_eq!(outcome.map_err(|t| (t.code, t.pc)), Err((TrapCode::OutOfBounds, 4)));
    assert_eq!(words, [1, 0]);
    let load = "call 203\nmov %r6, %r0\nldxdw %r0, [%r6+0]\ncall 204\nldxdw %r0, [%r6+8]\nexit";
    assert_eq!(run_with_value(load).0.map_err(|t| t.code), Err(TrapCode::OutOfBounds));
    // Past the value's end: out of bounds even while it is at hand.
    let past = "call 203\nmov %r6, %r0\nldxdw %r0, [%r6+9]\nexit";
    assert_eq!(run_with_value(past).0.map_err(|t| t.code), Err(TrapCode::OutOfBounds));
    // Read-only: loads at hand, stores refused.
    let ro = "call 205\nmov %r6, %r0\nldxdw %r0, [%r6+8]\nstdw [%r6+0], 1\nexit";
    let (outcome, words) = run_with_value(ro);
    assert_eq!(outcome.map_err(|t| t.code), Err(TrapCode::ReadOnly));
    assert_eq!(words, [0, 0]);
}

/// `bpf_loop(count, cb, &counter, flags)`, helper 181, which each engine runs itself: the
/// callback adds `index + 1` to a counter in the caller's frame, clobbers r6-r9 (the caller's
/// come back) and stops at index `stop`; with `nested`, each call also runs an inner
/// `bpf_loop(3, inner, &counter)` adding 100 per call. r0 = result * 10^6 + counter, or the
/// error. Both engines, twice each on one session: same result, executed count and memory.
fn bpf_loop_run(count: i64, stop: i64, flags: i64, nested: bool) -> Result<u64, Trap> {
    let inner = if nested {
        "mov %r8, %r2\nmov %r1, 3\nlddw %r2, func(inner)\nmov %r3, %r8\nmov %r4, 0\ncall 181\n\
         ldxdw %r7, [%r8]\nadd %r7, %r6\nstxdw [%r8], %r7\n"
    } else {
        "ldxdw %r7, [%r2]\nadd %r7, %r6\nstxdw [%r2], %r7\n"
    };
    let text = format!(
        "stdw [%r10-8], 0\nmov %r6, 77\nlddw %r1, {count}\nlddw %r2, func(cb)\nmov %r3, %r10\n\
         add %r3, -8\nmov %r4, {flags}\ncall 181\njsgt %r0, -1, ok\nexit\nok:\n\
         jne %r6, 77, bad\nmul %r0, 1000000\nldxdw %r1, [%r10-8]\nadd %r0, %r1\nexit\n\
         bad:\nmov %r0, -1\nexit\n\
         cb:\nmov %r9, %r1\nmov %r6, %r1\nadd %r6, 1\n{inner}\
         mov %r0, 0\njne %r9, {stop}, go\nmov %r0, 1\ngo:\nexit\n\
         inner:\nldxdw %r3, [%r2]\nadd %r3, 100\nstxdw [%r2], %r3\nmov %r0, 0\nexit"
    );
    let insns = assemble(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let program = Verified::structural(Program::from_insns(insns)).unwrap();
    let mut seen = Vec::new();
    for engine in [&INTERP as &dyn DynEngine, &JIT] {
        let mut session = engine.load(&program, Bindings::new(), Limits::default()).unwrap();
        for _ in 0..2 {
            let outcome = session.run(Input::new()).map(|o| (o.r0, o.executed));
            seen.push((engine.name(), outcome));
        }
    }
    for (name, outcome) in &seen[1..] {
        assert_eq!(outcome, &seen[0].1, "{name}:\n{text}");
    }
    seen[0].1.map(|(r0, _)| r0)
}

#[test]
fn bpf_loop_runs_its_callback_alike_on_every_engine() {
    let einval = (-22i64) as u64;
    let e2big = (-7i64) as u64;
    let counted =
        |calls: u64, per_call: u64| calls * 1_000_000 + (1..=calls).sum::<u64>() + calls * per_call;
    assert_eq!(bpf_loop_run(0, 99, 0, false), Ok(0));
    assert_eq!(bpf_loop_run(1, 99, 0, false), Ok(counted(1, 0)));
    assert_eq!(bpf_loop_run(10, 99, 0, false), Ok(counted(10, 0)));
    assert_eq!(bpf_loop_run(10, 3, 0, false), Ok(counted(4, 0)));
    assert_eq!(bpf_loop_run(10, 0, 0, false), Ok(counted(1, 0)));
    assert_eq!(bpf_loop_run(0x1_0000_0005, 99, 0, false), Ok(counted(5, 0)));
    assert_eq!(bpf_loop_run(10, 99, 2, false), Ok(einval));
    assert_eq!(bpf_loop_run(8 * 1024 * 1024 + 1, 99, 0, false), Ok(e2big));
    // A callback that loops itself: 3 inner calls of 100 each per outer call.
    assert_eq!(bpf_loop_run(6, 99, 0, true), Ok(counted(6, 300)));
    assert_eq!(bpf_loop_run(6, 2, 0, true), Ok(counted(3, 300)));
}
