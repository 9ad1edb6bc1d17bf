//! A batch over frames lent in place (`Batch::lend`): the packet region is the source's
//! own frame, read-only. A program that only reads its packet gives what the interpreter
//! gives over a copy; a store into a lent frame, by the program (a checked store) or by a
//! helper, is refused and leaves the frame as it was; code with an unchecked packet store
//! is never lent (its batch copies).

use weir_isa::asm::assemble;
use weir_jit::Jit;
use weir_program::abi::{Bindings, DirectLookup, Helper, HelperOutcome, RunEnv};
use weir_program::exec::{Batch, Input, LentRun, PacketSpan, Prepared, RunOutcome};
use weir_program::{ProgType, Program, Trap, TrapCode, Verified};

use crate::helpers::fill;

fn bindings() -> Bindings {
    let mut b = Bindings::for_prog_type(ProgType::Xdp);
    b.add_helper(Helper { id: 201, name: "fill", func: fill });
    b
}

/// XDP_DROP under 14 bytes, else bytes 12 + 13.
const READER: &str = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 14
jgt %r4, %r3, +4\nldxb %r0, [%r2+12]\nldxb %r5, [%r2+13]\nadd %r0, %r5\nexit
mov %r0, 1\nexit";
/// 0xff over the first byte and XDP_TX; XDP_PASS for an empty frame.
const WRITER: &str = "mov %r0, 2\nldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2
add %r4, 1\njgt %r4, %r3, +2\nstb [%r2+0], 0xff\nmov %r0, 3\nexit";
/// `fill(data, 1, 0xee)`'s answer; XDP_PASS for an empty frame.
const HELPER_WRITER: &str = "mov %r0, 2\nldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2
add %r4, 1\njgt %r4, %r3, +4\nmov %r1, %r2\nmov %r2, 1\nmov %r3, 0xee\ncall 201\nexit";

fn frames() -> Vec<Vec<u8>> {
    [0usize, 1, 13, 14, 60, 1500]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (i * 29 + j * 5) as u8).collect())
        .collect()
}

type Seen = Vec<(Result<u64, Trap>, Vec<u8>)>;

/// Frames from a list, lent when the engine asks (`lent` counts them), else copied into the
/// batch's packet buffer (whole: the span is the frame).
struct Frames {
    frames: Vec<Vec<u8>>,
    at: usize,
    len: usize,
    lent: usize,
    seen: Seen,
}

impl Frames {
    fn new() -> Self {
        Frames { frames: frames(), at: 0, len: 0, lent: 0, seen: Vec::new() }
    }
}

impl Batch for Frames {
    fn next(&mut self, _ctx: &mut [u8], packet: &mut [u8]) -> Option<PacketSpan> {
        let frame = self.frames.get(self.at)?;
        self.at += 1;
        self.len = frame.len();
        packet.get_mut(..frame.len())?.copy_from_slice(frame);
        Some(PacketSpan { meta: 0, data: 0, end: frame.len() })
    }

    fn env(&mut self) -> Option<&mut dyn weir_program::abi::RunEnv> {
        None
    }

    fn done(&mut self, outcome: Result<RunOutcome, Trap>, _: &mut [u8], packet: &mut [u8]) -> bool {
        self.seen.push((outcome.map(|o| o.r0), packet[..self.len].to_vec()));
        true
    }

    fn lends(&self) -> bool {
        true
    }

    fn lend(&mut self, run: &mut LentRun<'_>) -> bool {
        let Some(frame) = self.frames.get(self.at) else { return false };
        self.at += 1;
        self.lent += 1;
        let outcome = run(frame, None);
        self.seen.push((outcome.map(|o| o.r0), frame.clone()));
        true
    }
}

fn program(text: &str) -> Program {
    Program::from_insns(assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}")))
        .with_prog_type(ProgType::Xdp)
}

fn proven(program: &Program) -> Verified {
    let options = weir_verifier::Options {
        prog_type: Some(ProgType::Xdp),
        helpers: Some(Vec::new()),
        ..weir_verifier::Options::default()
    };
    let proof = weir_verifier::verify(program, &options).expect("the verifier accepts it");
    proof.into_verified(program.clone()).expect("the proof's own program")
}

/// The JIT's batch (twice on one cache) and how many frames it ran in place.
fn jit_batch(verified: &Verified) -> (Seen, usize) {
    let jit = Jit::compile(verified, bindings(), weir_jit::Config::default()).expect("compiles");
    let mut cache = jit.cache();
    let (mut seen, mut lent) = (Vec::new(), 0);
    for round in 0..2 {
        let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
        let mut packet = vec![0u8; 4096];
        let mut batch = Frames::new();
        let input = Input::new().ctx(&mut ctx).packet(&mut packet);
        // Through the inherent `run_batch`, then behind `dyn Batch` as sessions reach it
        // (`Prepared::run_batch`): both lend alike.
        if round == 0 {
            jit.run_batch(&mut cache, input, &mut batch);
        } else {
            let dyn_batch: &mut dyn Batch = &mut batch;
            <weir_jit::JitProgram as Prepared>::run_batch(&jit, &mut cache, input, dyn_batch);
        }
        seen.extend(batch.seen);
        lent += batch.lent;
    }
    (seen, lent)
}

/// The interpreter over a copy of each frame (twice, as `jit_batch`).
fn interp(verified: &Verified) -> Seen {
    let engine =
        weir_interp::Interpreter::new(verified, bindings(), weir_interp::Config::default());
    let mut cache = engine.cache();
    let mut seen = Vec::new();
    for _ in 0..2 {
        for frame in frames() {
            let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
            let mut packet = frame.clone();
            let r0 = engine.run(&mut cache, Input::new().ctx(&mut ctx).packet(&mut packet));
            seen.push((r0, packet));
        }
    }
    seen
}

#[test]
fn a_reading_program_runs_in_place_with_the_copys_results() {
    let reader = program(READER);
    for verified in [Verified::structural(reader.clone()).unwrap(), proven(&reader)] {
        let (seen, lent) = jit_batch(&verified);
        assert_eq!(lent, 2 * frames().len(), "{:?}: not lent", verified.assurance());
        assert_eq!(seen, interp(&verified), "{:?}", verified.assurance());
        // Both ways out taken: short frames and read bytes.
        assert!(
            seen.iter().any(|s| s.0 == Ok(1))
                && seen.iter().any(|s| s.0.as_ref().is_ok_and(|&r| r > 3))
        );
    }
}

#[test]
fn a_store_into_a_lent_frame_is_refused() {
    // Unproven: the store is checked, so the code may be lent, and the check refuses it.
    let writer = Verified::structural(program(WRITER)).unwrap();
    let (seen, lent) = jit_batch(&writer);
    assert_eq!(lent, 2 * frames().len());
    for ((outcome, packet), frame) in seen.iter().zip(frames().iter().cycle()) {
        assert_eq!(packet, frame, "the lent frame changed");
        match frame.len() {
            0 => assert_eq!(*outcome, Ok(2)),
            _ => assert_eq!(outcome.as_ref().map_err(|t| t.code), Err(TrapCode::ReadOnly)),
        }
    }
    // A helper's write is refused the same way (it sees the trap code as its answer).
    let helper = Verified::structural(program(HELPER_WRITER)).unwrap();
    let (seen, lent) = jit_batch(&helper);
    assert_eq!(lent, 2 * frames().len());
    for ((outcome, packet), frame) in seen.iter().zip(frames().iter().cycle()) {
        assert_eq!(packet, frame, "the lent frame changed");
        let want = if frame.is_empty() { 2 } else { u64::from(TrapCode::ReadOnly.code()) };
        assert_eq!(*outcome, Ok(want));
    }
}

#[test]
fn unchecked_packet_stores_take_the_copy() {
    // Proven, the store is unchecked: the batch copies each frame, and the program's writes
    // are the interpreter's.
    let writer = proven(&program(WRITER));
    let (seen, lent) = jit_batch(&writer);
    assert_eq!(lent, 0, "a program with an unchecked packet store was lent");
    assert_eq!(seen, interp(&writer));
    assert!(seen.iter().any(|(r0, p)| *r0 == Ok(3) && p.first() == Some(&0xff)));
}

/// The lean lent batch (self-contained code that never writes the stack: its run-state
/// words written once per batch) gives the copy's results, and so does lean code that
/// writes the stack (every frame its own set-up).
#[test]
fn lean_lent_runs_give_the_copys_results() {
    // Reads of the context's packet fields through a stack slot: lean, writes the stack.
    let stacked = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nstxdw [%r10-8], %r3\nldxdw %r3, [%r10-8]
mov %r4, %r2\nadd %r4, 14\njgt %r4, %r3, +4\nldxb %r0, [%r2+12]\nldxb %r5, [%r2+13]
add %r0, %r5\nexit\nmov %r0, 1\nexit";
    for text in [READER, stacked] {
        let verified = proven(&program(text));
        let want = interp(&verified);
        let (seen, lent) = jit_batch(&verified);
        assert_eq!(lent, 2 * frames().len(), "{text}: not lent");
        assert_eq!(seen, want, "{text}");
    }
}

/// A run's outcome words (exit word, value, budget left) are not reset before each run of
/// a batch: every way out of the code writes them. A trap's words must not outlive its
/// frame: trapping and plain frames alternate in one non-lean lent batch.
#[test]
fn a_traps_outcome_does_not_outlive_its_frame_in_a_batch() {
    let writer = Verified::structural(program(WRITER)).unwrap();
    let jit = Jit::compile(&writer, bindings(), weir_jit::Config::default()).expect("compiles");
    let mut cache = jit.cache();
    let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
    let mut packet = vec![0u8; 64];
    let lens = [0usize, 1, 0, 3, 0, 0, 2];
    let frames = lens.iter().map(|&n| vec![7u8; n]).collect();
    let mut batch = Frames { frames, ..Frames::new() };
    jit.run_batch(&mut cache, Input::new().ctx(&mut ctx).packet(&mut packet), &mut batch);
    assert_eq!(batch.lent, lens.len());
    let got: Vec<_> = batch.seen.iter().map(|(r, _)| r.as_ref().map_err(|t| t.code)).collect();
    let want: Vec<_> =
        lens.iter().map(|&n| if n == 0 { Ok(&2) } else { Err(TrapCode::ReadOnly) }).collect();
    assert_eq!(got, want);
}

/// The lent batch of code that is not lean (here: a local call) checks the cache's size and
/// the stack's and context's entries once per batch, not per frame: each frame still finds
/// a clean stack, and a trap inside a call (the stack's entry left moved to the callee's
/// frame) does not let the next frame reach below its own frame.
#[test]
fn full_lent_runs_keep_a_clean_stack_and_its_bounds_after_a_trap_in_a_call() {
    // r0 = the frame's length + 1 (written to [r10-8]) plus what that slot held before
    // this frame wrote it (0 on a clean stack; never 0 after a frame that got there). A 13-byte frame stores into the lent frame inside the call (refused);
    // a 14-byte frame reads below its own frame (out of bounds).
    let text = "
        ldxw %r2, [%r1+0]
        ldxw %r3, [%r1+4]
        mov %r6, %r3
        sub %r6, %r2
        jne %r6, 14, +1
        ldxdw %r0, [%r10-520]
        ldxdw %r7, [%r10-8]
        mov %r8, %r6
        add %r8, 1
        stxdw [%r10-8], %r8
        mov %r1, %r2
        mov %r2, %r6
        call local f
        ldxdw %r0, [%r10-8]
        add %r0, %r7
        exit
    f:
        stdw [%r10-8], 5
        jne %r2, 13, +1
        stb [%r1+0], 0xff
        mov %r0, 0
        exit";
    let verified = Verified::structural(program(text)).unwrap();
    let want: Vec<_> = frames()
        .iter()
        .map(|f| match f.len() {
            13 => Err(TrapCode::ReadOnly),
            14 => Err(TrapCode::OutOfBounds),
            n => Ok(n as u64 + 1),
        })
        .collect();
    assert_full_lent(&verified, &want);
}

/// `jit_batch`'s lent batches lend every frame, leave it unchanged and give `want` per
/// frame.
fn assert_full_lent(verified: &Verified, want: &[Result<u64, TrapCode>]) {
    let (seen, lent) = jit_batch(verified);
    assert_eq!(lent, 2 * frames().len());
    let got: Vec<_> = seen.iter().map(|(r, _)| r.map_err(|t| t.code)).collect();
    let want: Vec<_> = want.iter().chain(want).copied().collect();
    assert_eq!(got, want);
    for ((_, packet), frame) in seen.iter().zip(frames().iter().cycle()) {
        assert_eq!(packet, frame, "the lent frame changed");
    }
}

/// A run that went into a call leaves the callee's frame to be zeroed before the next run
/// (`fire_bound` reports the depth, capped by the program's deepest frame): a callee that
/// reads its slot before writing it finds 0 on every lent frame of the batch, never the
/// last frame's value.
#[test]
fn full_lent_runs_zero_the_frame_a_call_wrote() {
    // r0 = the callee's [r10-8] as found (0 on a clean stack) plus the frame's data_end,
    // which the callee then leaves in that slot.
    let text = "
        ldxw %r1, [%r1+4]
        call local f
        exit
    f:
        ldxdw %r0, [%r10-8]
        stxdw [%r10-8], %r1
        add %r0, %r1
        exit";
    let verified = Verified::structural(program(text)).unwrap();
    let data_end = |f: &Vec<u8>| weir_program::exec::guest::PACKET_BASE + f.len() as u64;
    let want: Vec<_> = frames().iter().map(|f| Ok(data_end(f))).collect();
    assert_full_lent(&verified, &want);
}

/// The same through a `bpf_loop` callback, the other way below frame 0 (code with no local
/// call, whose depth `fire_bound` must still read): the callback finds its slot zeroed on
/// every lent frame, never the last frame's data_end.
#[test]
fn full_lent_runs_zero_the_frame_a_callback_wrote() {
    // The caller passes data_end in its slot [r10-16]; the callback adds to it what it finds
    // in its own [r10-8] (0 on a clean stack), then leaves data_end there; r0 = the sum.
    let text = "
        ldxw %r6, [%r1+4]
        stxdw [%r10-16], %r6
        mov %r1, 1
        lddw %r2, func(cb)
        mov %r3, %r10
        add %r3, -16
        mov %r4, 0
        call 181
        ldxdw %r0, [%r10-16]
        exit
    cb:
        ldxdw %r3, [%r2]
        ldxdw %r4, [%r10-8]
        stxdw [%r10-8], %r3
        add %r4, %r3
        stxdw [%r2], %r4
        mov %r0, 0
        exit";
    let verified = Verified::structural(program(text)).unwrap();
    let data_end = |f: &Vec<u8>| weir_program::exec::guest::PACKET_BASE + f.len() as u64;
    let want: Vec<_> = frames().iter().map(|f| Ok(data_end(f))).collect();
    assert_full_lent(&verified, &want);
}

/// An environment whose map 0 a `DirectLookup` answers (`direct`: every key found) or
/// that answers no lookup itself (the bound helper then: never found).
struct Lookups {
    direct: bool,
    value: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Whether the direct lookup's value admits stores.
    writable: bool,
}

/// The `DirectLookup`'s probe: element 0, its value the environment's word.
extern "C" fn found(map: *const (), _: u64, _: u64, _: u64) -> weir_program::abi::FoundElem {
    weir_program::abi::FoundElem { elem: 0, host: map.cast_mut().cast() }
}

/// Helper 1 as bound beside the environment: no element.
fn not_found(_: &mut weir_program::abi::HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Return(0)
}

// SAFETY: the only host address handed out is the direct lookup's, the environment's
// 8-byte atomic word, kept alive by the lookup's `keep`; no access to the values window
// is answered (the program below makes none).
unsafe impl RunEnv for Lookups {
    fn read(&self, _: u64, _: &mut [u8]) -> Result<(), TrapCode> {
        Err(TrapCode::OutOfBounds)
    }

    fn write(&mut self, _: u64, _: &[u8]) -> Result<(), TrapCode> {
        Err(TrapCode::OutOfBounds)
    }

    fn host(&mut self, _: u64, _: u64, _: bool) -> Option<std::ptr::NonNull<u8>> {
        None
    }

    fn direct_lookups(&self, out: &mut Vec<Option<DirectLookup>>) {
        out.clear();
        if self.direct {
            out.push(Some(DirectLookup {
                find: found,
                map: std::sync::Arc::as_ptr(&self.value).cast(),
                cpu: 0,
                keep: self.value.clone(),
                key_size: 4,
                base: weir_program::exec::guest::MAPS_BASE,
                shift: 4,
                value_len: 8,
                writable: self.writable,
            }));
        }
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// Lent frames, each run in the environment its pattern names: `a` (the batch's, whose
/// direct lookups the engine takes at the batch's start), `b` (another, with none) or no
/// environment.
struct Envs {
    a: Lookups,
    b: Lookups,
    pattern: Vec<Option<bool>>,
    at: usize,
    seen: Vec<Result<u64, Trap>>,
}

impl Batch for Envs {
    fn next(&mut self, _: &mut [u8], _: &mut [u8]) -> Option<PacketSpan> {
        None
    }

    fn env(&mut self) -> Option<&mut dyn RunEnv> {
        Some(&mut self.a)
    }

    fn done(&mut self, _: Result<RunOutcome, Trap>, _: &mut [u8], _: &mut [u8]) -> bool {
        false
    }

    fn lends(&self) -> bool {
        true
    }

    fn lend(&mut self, run: &mut LentRun<'_>) -> bool {
        while let Some(&which) = self.pattern.get(self.at) {
            self.at += 1;
            let env: Option<&mut dyn RunEnv> = match which {
                Some(true) => Some(&mut self.a),
                Some(false) => Some(&mut self.b),
                None => None,
            };
            self.seen.push(run(&[1, 2, 3], env).map(|o| o.r0));
        }
        false
    }
}

/// The lent batch of code that is not lean binds the batch's direct lookups (taken from
/// its environment at the start) only to frames run in that environment, also when the
/// environment changes from frame to frame: a frame in another environment, or none, must
/// not find its lookup through the batch's table (XDP_TX where the direct lookup answers,
/// XDP_PASS where the helper does). Batches run one after another in one cache: one that
/// starts with a frame in no environment after one whose last frame used the direct
/// lookups must not find them either (the batch binds none at its start).
#[test]
fn a_lent_frame_in_another_environment_does_not_use_the_batchs_direct_lookups() {
    let text = "stw [%r10-4], 7\nlddw %r1, 0x70000000\nmov %r2, %r10\nadd %r2, -4\ncall 1
jeq %r0, 0, +2\nmov %r0, 3\nexit\nmov %r0, 2\nexit";
    let jit = looking_up_through_env(text);
    let mut cache = jit.cache();
    let (a, b, none) = (Some(true), Some(false), None);
    let patterns = [
        vec![a, b, b, a, none, a, a, b],
        vec![b, a, a, none, b, a],
        vec![none, a, none],
        vec![a, a],
        vec![none, none, b, a],
        vec![a],
        vec![none],
    ];
    for pattern in patterns {
        let value = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut batch = Envs {
            a: Lookups { direct: true, value: value.clone(), writable: false },
            b: Lookups { direct: false, value, writable: false },
            pattern: pattern.clone(),
            at: 0,
            seen: Vec::new(),
        };
        let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
        let mut packet = vec![0u8; 64];
        jit.run_batch(&mut cache, Input::new().ctx(&mut ctx).packet(&mut packet), &mut batch);
        let want: Vec<_> = pattern.iter().map(|&w| Ok(if w == a { 3 } else { 2 })).collect();
        assert_eq!(batch.seen, want, "{pattern:?}");
    }
}

/// `text` compiled with map_lookup_elem answered through the environment (its own helper
/// finds nothing), as the lent-batch tests run it.
fn looking_up_through_env(text: &str) -> weir_jit::JitProgram {
    let mut b = bindings();
    b.add_helper(Helper { id: 1, name: "map_lookup_elem", func: not_found });
    b.lookup_through_env();
    let verified = Verified::structural(program(text)).unwrap();
    Jit::compile(&verified, b, weir_jit::Config::default()).expect("compiles")
}

/// Lent frames of one environment, whose direct lookup finds `value`: each frame's r0 or
/// trap.
fn direct_runs(
    text: &str,
    value: &std::sync::Arc<std::sync::atomic::AtomicU64>,
    writable: bool,
) -> Vec<Result<u64, Trap>> {
    let jit = looking_up_through_env(text);
    let mut cache = jit.cache();
    let mut batch = Envs {
        a: Lookups { direct: true, value: value.clone(), writable },
        b: Lookups { direct: false, value: value.clone(), writable },
        pattern: vec![Some(true); 3],
        at: 0,
        seen: Vec::new(),
    };
    let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
    let mut packet = vec![0u8; 64];
    jit.run_batch(&mut cache, Input::new().ctx(&mut ctx).packet(&mut packet), &mut batch);
    batch.seen
}

/// A value the direct lookup found, reached through the value entry that generated code
/// fills itself with only the bound words the program's checked accesses read (issue 11):
/// loads of 1, 2 and 4 bytes and an 8-byte atomic add; an access reaching one byte past
/// the value or before it, and a store into a value that admits none (after a load of
/// the same size it admits) trap as the environment's slow path says (it answers no host address here).
#[test]
fn a_direct_lookups_value_admits_exactly_its_bytes_for_each_access_size() {
    use std::sync::atomic::Ordering;
    let lookup = "stw [%r10-4], 7\nlddw %r1, 0x70000000\nmov %r2, %r10\nadd %r2, -4\ncall 1
jne %r0, 0, +2\nmov %r0, 9\nexit\n";
    let value = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0x0102_0304_0506_07fe));
    // Three frames: the add makes the low byte 0xff, then 0x00 with a carry, then 0x01.
    let sum = "mov %r1, 1\nlock add [%r0+0], %r1\nldxb %r1, [%r0+0]\nldxb %r2, [%r0+7]
ldxh %r3, [%r0+6]\nldxw %r4, [%r0+4]\nmov %r0, %r1\nlsh %r2, 8\nadd %r0, %r2\nlsh %r3, 16
add %r0, %r3\nlsh %r4, 32\nadd %r0, %r4\nexit";
    let seen = direct_runs(&format!("{lookup}{sum}"), &value, true);
    // byte 0, then byte 7 << 8, bytes 6-7 << 16 and bytes 4-7 << 32.
    let want = [0x0102_0304_0102_01ff, 0x0102_0304_0102_0100, 0x0102_0304_0102_0101];
    assert_eq!(seen, want.map(Ok));
    assert_eq!(value.load(Ordering::Relaxed), 0x0102_0304_0506_0801);

    let value_addr = weir_program::exec::guest::MAPS_BASE;
    for (access, addr, size, writable) in [
        ("ldxb %r0, [%r0+8]", value_addr + 8, 1, true),
        ("ldxh %r0, [%r0+7]", value_addr + 7, 2, true),
        ("ldxw %r0, [%r0+5]", value_addr + 5, 4, true),
        ("ldxdw %r0, [%r0+1]", value_addr + 1, 8, true),
        ("ldxdw %r0, [%r0-1]", value_addr - 1, 8, true),
        // Loads of the same size admitted first: the store's own bound refuses it.
        ("ldxb %r1, [%r0+0]\nstb [%r0+0], 1", value_addr, 1, false),
        ("ldxdw %r1, [%r0+0]\nlock add [%r0+0], %r1", value_addr, 8, false),
    ] {
        let text = format!("{lookup}{access}\nmov %r0, 2\nexit");
        let seen = direct_runs(&text, &value, writable);
        assert_eq!(seen.len(), 3, "{access}");
        for outcome in seen {
            let trap = outcome.expect_err(access);
            assert_eq!(
                (trap.code, trap.addr, trap.size),
                (TrapCode::OutOfBounds, addr, size),
                "{access}"
            );
        }
    }
}

/// A full lent run that ends at a helper call (here `bpf_get_prandom_u32`, which fails
/// without an environment: a trap) after plain runs of the batch's steady part shows its
/// own stack over zeros, as the interpreter's: the slot written after the call on every
/// path is not the last frame's, the one written before it is this run's. The proof lists
/// the slot the call finds unwritten as observed (`Facts::stack_observed`: a helper call
/// is a place a run may end), which an engine zeroing only observed slots relies on.
#[test]
fn a_full_lent_run_trapping_at_a_helper_call_shows_its_own_stack() {
    // [r10-8] = length + 1; frames of 14 bytes or more call the helper (and trap);
    // [r10-16] = length after it, on every path.
    let text = "
        ldxw %r2, [%r1+0]
        ldxw %r3, [%r1+4]
        mov %r6, %r3
        sub %r6, %r2
        mov %r7, %r6
        add %r7, 1
        stxdw [%r10-8], %r7
        jlt %r6, 14, +1
        call 7
        stxdw [%r10-16], %r6
        mov %r0, 2
        exit";
    // Plain runs first (the batch's steady part), then the trap, whose stack is the last.
    for lens in [vec![1usize, 13, 60], vec![13, 60], vec![60]] {
        let (observed, outcomes, stack) = lent_against_interpreter(text, 1 << 20, &lens);
        // [r10-16]'s 8 bytes only (bit i: fp-(i+1)): the bytes the call finds unwritten.
        assert_eq!(observed, Some([vec![0xff00], vec![0; 7]].concat()));
        assert!(outcomes.last().is_some_and(Result::is_err), "the last run traps");
        // This run's own write, under the slot it never reached.
        let top = &stack[stack.len() - 16..];
        assert_eq!(top[8..], 61u64.to_le_bytes());
        assert_eq!(top[..8], [0; 8]);
    }
}

/// What [`lent_against_interpreter`] saw: the proof's `stack_observed`, each frame's
/// outcome, the JIT's stack after the last run.
type LentRuns = (Option<Vec<u64>>, Vec<Result<u64, TrapCode>>, Vec<u8>);

/// Lent batches of `text` (a proven XDP program) over frames of `lens` bytes on one fresh
/// cache, the JIT's with an instruction budget of `budget` and the interpreter's the same:
/// per frame the outcome equals the interpreter's, and so does the stack the last run
/// left; returns the proof's `stack_observed`, the outcomes and the JIT's stack.
fn lent_against_interpreter(text: &str, budget: u64, lens: &[usize]) -> LentRuns {
    let program = program(text);
    let options = weir_verifier::Options { prog_type: Some(ProgType::Xdp), ..Default::default() };
    let proof = weir_verifier::verify(&program, &options).expect("the verifier accepts it");
    let observed = proof.facts().stack_observed.clone();
    let verified = proof.into_verified(program.clone()).expect("the proof's own program");
    let limits = weir_program::exec::Limits { instruction_budget: budget, ..Default::default() };
    let jit = Jit::compile(&verified, bindings(), weir_jit::Config::with_limits(limits))
        .expect("compiles");
    let config = weir_interp::Config { instruction_budget: budget, ..Default::default() };
    let engine = weir_interp::Interpreter::new(&verified, bindings(), config);
    let frames: Vec<Vec<u8>> = lens.iter().map(|&n| vec![7u8; n]).collect();
    let mut cache = jit.cache();
    let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
    let mut packet = vec![0u8; 4096];
    let mut batch = Frames { frames: frames.clone(), at: 0, len: 0, lent: 0, seen: Vec::new() };
    jit.run_batch(&mut cache, Input::new().ctx(&mut ctx).packet(&mut packet), &mut batch);
    assert_eq!(batch.lent, frames.len());
    let mut icache = engine.cache();
    let mut outcomes = Vec::new();
    for (frame, (got, _)) in frames.iter().zip(&batch.seen) {
        let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
        let mut packet = frame.clone();
        let want = engine.run(&mut icache, Input::new().ctx(&mut ctx).packet(&mut packet));
        let got = got.as_ref().copied().map_err(|t| t.code);
        assert_eq!(got, want.as_ref().map(|&r0| r0).map_err(|t| t.code), "{text}");
        outcomes.push(got);
    }
    let (got, want) = (cache.stack(), icache.stack());
    let n = got.len().min(want.len());
    assert_eq!(&got[got.len() - n..], &want[want.len() - n..], "frames {lens:?}:\n{text}");
    (observed, outcomes, got.to_vec())
}

/// xdp_counter's stack use: a 4-byte word (fp-4, its slot's other half never written) and
/// a doubleword written before the helper call, on every path. By byte, the proof says
/// no run observes any of the stack it starts with (`Facts::stack_observed` empty), so a
/// lent batch's steady frames do not zero it (`JitProgram::starts_on_own_stack`); a run
/// trapping at the call after plain ones still shows its own stack over zeros. With an
/// instruction budget shorter than the longest run, a run may stop at the budget before
/// its writes: then the stack is zeroed per frame, and the budget-trapped run shows the
/// interpreter's stack (0 at fp-4), not the last frame's word.
#[test]
fn lent_runs_that_observe_no_stack_byte_start_on_their_own_stack() {
    // Frames of 14 bytes or more call the helper (and trap); fp-4 = length + 1 and
    // fp-16 = length before it.
    let call = "
        ldxw %r2, [%r1+0]
        ldxw %r3, [%r1+4]
        mov %r6, %r3
        sub %r6, %r2
        mov %r7, %r6
        add %r7, 1
        stxw [%r10-4], %r7
        stxdw [%r10-16], %r6
        jlt %r6, 14, +1
        call 7
        mov %r0, 2
        exit";
    let none = Some(vec![0u64; 8]);
    for lens in [vec![1usize, 13, 60], vec![13, 60], vec![60], vec![5, 9, 12]] {
        let (observed, outcomes, _) = lent_against_interpreter(call, 1 << 20, &lens);
        assert_eq!(observed, none, "no byte observed");
        let traps = lens.last().is_some_and(|&n| n >= 14);
        assert_eq!(outcomes.last().is_some_and(Result::is_err), traps, "{lens:?}");
    }
    // fp-16 first; frames of 14 bytes or more take 5 more instructions before fp-4 is
    // written (its store the 12th of 14), the others 9: a budget of 11 stops only the
    // long ones, before that store.
    let long = "
        ldxw %r2, [%r1+0]
        ldxw %r3, [%r1+4]
        mov %r6, %r3
        sub %r6, %r2
        stxdw [%r10-16], %r6
        jlt %r6, 14, +5
        add %r6, 1
        add %r6, 1
        add %r6, 1
        add %r6, 1
        add %r6, 1
        stxw [%r10-4], %r6
        mov %r0, 2
        exit";
    let (observed, outcomes, _) = lent_against_interpreter(long, 11, &[1, 13, 60]);
    assert_eq!(observed, none, "no byte observed");
    assert_eq!(outcomes[..2], [Ok(2), Ok(2)]);
    assert_eq!(outcomes[2], Err(TrapCode::InstructionBudget));
}
