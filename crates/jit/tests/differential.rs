//! The JIT against the reference interpreter on generated programs and inputs: for every
//! program, both engines must agree on everything observable — the result or the trap (code,
//! pc, address, size), the executed-instruction count, the context, packet and memory bytes,
//! and the stack — on a first run and on a second run that reuses each engine's cache.
//!
//! Two generators:
//! - `structured`: programs valid by construction, built from pieces that matter to a JIT:
//!   every ALU/jump/memory/atomic opcode, pointers into each region with offsets around
//!   their edges, loops (any backward jump; the small budgets make many of them trap),
//!   local calls and calls through registers (also with random values), helpers that
//!   return, stop, fail or are not bound, legacy packet loads, odd stack shapes.
//! - `raw`: instructions drawn from the whole opcode table with any fields; the programs
//!   that pass `validate` must compile (the compile-everything-valid property) and agree.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use weir_isa::ebpf::{Insn, Op, Operands, OPCODES};
use weir_jit::Jit;
use weir_program::abi::{self, Bindings, Helper, HelperCtx, HelperOutcome};
use weir_program::{validate, validate_calls, Program, Trap, Verified};
use weir_testkit::ebpf_gen::EbpfGen;

fn sum(_: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Return(args.iter().fold(0u64, |a, &b| a.wrapping_add(b)))
}

fn fail(_: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Fail
}

/// Stops the program on an odd r1, returns `3 * r1` otherwise.
fn stop_on_odd(_: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    if args[0] & 1 == 1 {
        HelperOutcome::Stop(args[0])
    } else {
        HelperOutcome::Return(args[0].wrapping_mul(3))
    }
}

fn bindings(layout: Option<&'static abi::ContextLayout>) -> Bindings {
    let mut b = Bindings::conformance();
    b.add_helper(Helper { id: 100, name: "sum", func: sum });
    b.add_helper(Helper { id: 101, name: "fail", func: fail });
    b.add_helper(Helper { id: 102, name: "stop_on_odd", func: stop_on_odd });
    b.context = layout;
    b
}

/// Helper ids programs call: bound ones, and 99, which is not.
const HELPER_IDS: [i64; 5] = [5, 100, 101, 102, 99];

#[derive(Clone, Debug)]
struct World {
    ctx: Option<Vec<u8>>,
    packet: Option<Vec<u8>>,
    mem: Option<Vec<u8>>,
    layout: Option<&'static abi::ContextLayout>,
    stack_size: usize,
    max_call_depth: usize,
    budget: u64,
    blinding: bool,
}

fn world() -> impl Strategy<Value = World> {
    let bytes = |n| prop::option::weighted(0.85, prop::collection::vec(any::<u8>(), 0..n));
    let layout = prop_oneof![Just(None), Just(Some(&abi::XDP)), Just(Some(&abi::SOCKET_FILTER))];
    let stack_size =
        prop_oneof![6 => Just(512usize), 1 => Just(64), 1 => Just(16), 1 => Just(4), 1 => Just(0)];
    let depth = prop_oneof![4 => Just(8usize), 1 => 0usize..4];
    let budget = prop_oneof![1 => 0u64..4, 3 => 4u64..120, 3 => Just(2_000u64)];
    (bytes(200), bytes(80), bytes(80), layout, stack_size, depth, budget, any::<bool>()).prop_map(
        |(ctx, packet, mem, layout, stack_size, max_call_depth, budget, blinding)| {
            // A layout needs a context long enough for its packet fields.
            let ctx = match (ctx, layout) {
                (Some(mut c), Some(l)) => {
                    c.resize(c.len().max(l.size as usize), 0);
                    Some(c)
                }
                (c, _) => c,
            };
            World { ctx, packet, mem, layout, stack_size, max_call_depth, budget, blinding }
        },
    )
}

/// Everything a run can change: its outcome (r0 and executed count), the buffers, the stack.
type Observed =
    (Result<(u64, u64), Trap>, Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>, Vec<u8>);

fn interp_runs(program: &Program, world: &World) -> Result<[Observed; 2], String> {
    let config = weir_interp::Config {
        stack_size: world.stack_size,
        max_call_depth: world.max_call_depth,
        instruction_budget: world.budget,
    };
    let program = Verified::check(program).map_err(|e| e.to_string())?;
    let engine = weir_interp::Interpreter::new(&program, bindings(world.layout), config);
    let mut cache = engine.cache();
    let mut run = || {
        let mut w = world.clone();
        let input = weir_interp::Input {
            ctx: w.ctx.as_deref_mut(),
            packet: w.packet.as_deref_mut(),
            mem: w.mem.as_deref_mut(),
            ..Default::default()
        };
        let outcome = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
        (outcome, w.ctx, w.packet, w.mem, cache.stack().to_vec())
    };
    Ok([run(), run()])
}

fn jit_runs(program: &Program, world: &World) -> Result<[Observed; 2], String> {
    let limits = weir_interp::Config {
        stack_size: world.stack_size,
        max_call_depth: world.max_call_depth,
        instruction_budget: world.budget,
    };
    let config =
        weir_jit::Config { limits, blinding: world.blinding, ..weir_jit::Config::default() };
    let program = Verified::check(program).map_err(|e| e.to_string())?;
    let engine =
        Jit::compile(&program, bindings(world.layout), config).map_err(|e| e.to_string())?;
    let mut cache = engine.cache();
    let mut run = || {
        let mut w = world.clone();
        let input = weir_jit::Input {
            ctx: w.ctx.as_deref_mut(),
            packet: w.packet.as_deref_mut(),
            mem: w.mem.as_deref_mut(),
            ..Default::default()
        };
        let outcome = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
        let executed = cache.executed();
        (outcome, executed, w.ctx, w.packet, w.mem, cache.stack().to_vec())
    };
    let first = run();
    let second = run();
    // The cache's count agrees with the outcome's.
    for (outcome, executed, ..) in [&first, &second] {
        if let Ok((_, n)) = outcome {
            assert_eq!(n, executed);
        }
    }
    let strip = |(o, _, c, p, m, s): (Result<(u64, u64), Trap>, u64, _, _, _, _)| (o, c, p, m, s);
    Ok([strip(first), strip(second)])
}

/// Both engines on one program and world; they must agree on everything.
fn agree(program: &Program, world: &World) -> Result<(), TestCaseError> {
    let expected = interp_runs(program, world);
    let got = jit_runs(program, world);
    let (expected, got) = match (expected, got) {
        (Ok(e), Ok(g)) => (e, g),
        (Err(e), Err(_)) => {
            // Both refuse: fine only for programs validation refuses.
            prop_assert!(validate(program).is_err(), "both refused a valid program: {e}");
            return Ok(());
        }
        (e, g) => {
            return Err(TestCaseError::fail(format!("interpreter {e:?}\njit {g:?}")));
        }
    };
    for (run, (e, g)) in expected.iter().zip(got.iter()).enumerate() {
        prop_assert_eq!(&e.0, &g.0, "run {}: outcome", run);
        prop_assert_eq!(&e.1, &g.1, "run {}: ctx", run);
        prop_assert_eq!(&e.2, &g.2, "run {}: packet", run);
        prop_assert_eq!(&e.3, &g.3, "run {}: mem", run);
        prop_assert!(e.4 == g.4, "run {}: stacks differ", run);
    }
    Ok(())
}

// ---- structured programs ----

/// One piece of a generated function.
#[derive(Clone, Debug)]
enum Piece {
    /// Any instruction that needs no target (an `lddw` takes two slots).
    Plain(Insn),
    /// A jump to the start of piece `target` (mod the function's pieces) of its function.
    Jump { op: Op, dst: u8, src: u8, imm: i64, target: usize },
    /// `call local` to function `func` (mod the function count).
    Call { func: usize },
    /// `lddw %reg, func(f)` then `call %reg`.
    CallByAddress { reg: u8, func: usize },
}

fn ops_where(keep: impl Fn(&weir_isa::ebpf::OpSpec) -> bool) -> Vec<Op> {
    OPCODES.iter().filter(|s| keep(s)).map(|s| s.op).collect()
}

fn pick(ops: Vec<Op>) -> impl Strategy<Value = Op> {
    (0..ops.len()).prop_map(move |i| ops[i])
}

/// Registers a piece may write: r0-r9, with r6-r8 (which hold pointers) rarer.
fn written() -> impl Strategy<Value = u8> {
    prop_oneof![6 => 0u8..6, 1 => 6u8..9, 2 => Just(9u8)]
}

/// The base register and offset of a memory access: mostly inside what the pointer
/// registers point at, sometimes around the edges, sometimes anything.
fn address() -> impl Strategy<Value = (u8, i16)> {
    let edges = prop::sample::select(vec![
        -520i16, -513, -512, -511, -72, -68, -64, -60, -20, -17, -16, -8, -1, 60, 64, 76, 80, 190,
        196, 200,
    ]);
    prop_oneof![
        4 => (Just(10u8), -64i16..0),
        3 => (Just(7u8), -32i16..32),
        4 => (prop_oneof![Just(6u8), Just(8u8)], 0i16..64),
        2 => (prop_oneof![Just(6u8), Just(7u8), Just(8u8), Just(10u8)], edges),
        1 => (0u8..=10, any::<i16>()),
    ]
}

fn imm() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -8i64..8,
        2 => prop::sample::select(vec![31i64, 32, 63, 64, 0xff, 0xffff, 0x7fff_ffff, -0x8000_0000, 1500, 0x1badc0de]),
        2 => any::<i32>().prop_map(i64::from),
    ]
}

fn piece() -> impl Strategy<Value = Piece> {
    let alu =
        ops_where(|s| matches!(s.operands, Operands::DstImm | Operands::DstSrc | Operands::Dst));
    let cond = ops_where(|s| matches!(s.operands, Operands::DstImmOff | Operands::DstSrcOff));
    let loads = ops_where(|s| s.operands == Operands::Load);
    let stores = ops_where(|s| matches!(s.operands, Operands::StoreImm | Operands::StoreReg));
    let legacy = ops_where(|s| matches!(s.operands, Operands::Abs | Operands::Ind));
    prop_oneof![
        10 => (pick(alu), written(), 0u8..=10, imm()).prop_map(|(op, dst, src, imm)| {
            let used = op.spec().map(|s| s.operands.used_fields());
            let src = if used.is_some_and(|u| u.src) { src } else { 0 };
            let imm = if used.is_some_and(|u| u.imm) { imm } else { 0 };
            Piece::Plain(Insn::new(op, dst, src, 0, imm))
        }),
        4 => (pick(loads), written(), address())
            .prop_map(|(op, dst, (src, off))| Piece::Plain(Insn::new(op, dst, src, off, 0))),
        4 => (pick(stores), address(), 0u8..=9, imm()).prop_map(|(op, (dst, off), src, imm)| {
            match op.spec().map(|s| s.operands) {
                Some(Operands::StoreImm) => Piece::Plain(Insn::new(op, dst, 0, off, imm)),
                _ => Piece::Plain(Insn::new(op, dst, src, off, 0)),
            }
        }),
        1 => (pick(legacy), 0u8..=10, imm()).prop_map(|(op, src, imm)| {
            let src = if op.spec().is_some_and(|s| s.operands == Operands::Ind) { src } else { 0 };
            Piece::Plain(Insn::new(op, 0, src, 0, imm))
        }),
        1 => (written(), any::<i64>()).prop_map(|(dst, imm)| Piece::Plain(Insn::new(Op::Lddw, dst, 0, 0, imm))),
        2 => prop::sample::select(HELPER_IDS.to_vec())
            .prop_map(|id| Piece::Plain(Insn::new(Op::Call, 0, 0, 0, id))),
        4 => (pick(cond), written(), 0u8..=10, imm(), any::<usize>())
            .prop_map(|(op, dst, src, imm, target)| Piece::Jump { op, dst, src, imm, target }),
        1 => any::<usize>().prop_map(|target| Piece::Jump { op: Op::Ja, dst: 0, src: 0, imm: 0, target }),
        1 => any::<usize>().prop_map(|target| Piece::Jump { op: Op::Ja32, dst: 0, src: 0, imm: 0, target }),
        2 => any::<usize>().prop_map(|func| Piece::Call { func }),
        1 => (written(), any::<usize>()).prop_map(|(reg, func)| Piece::CallByAddress { reg, func }),
        1 => (0u8..=10).prop_map(|dst| Piece::Plain(Insn::new(Op::CallReg, dst, 0, 0, 0))),
        1 => Just(Piece::Plain(Insn::new(Op::Exit, 0, 0, 0, 0))),
        1 => prop_oneof![
            Just(Insn::new(Op::CallKfunc, 0, 0, 0, 7)),
            Just(Insn::new(Op::LddwMapFd, 1, 0, 0, 3)),
        ]
        .prop_map(Piece::Plain),
    ]
}

fn slots_of(piece: &Piece) -> usize {
    match piece {
        Piece::Plain(insn) => insn.slots(),
        Piece::CallByAddress { .. } => 3,
        _ => 1,
    }
}

/// The prologue of the main function: pointer registers into each region.
fn prologue() -> Vec<Piece> {
    vec![
        Piece::Plain(Insn::new(Op::Mov64Reg, 6, 1, 0, 0)),
        Piece::Plain(Insn::new(Op::Mov64Reg, 7, 10, 0, 0)),
        Piece::Plain(Insn::new(Op::Add64Imm, 7, 0, 0, -32)),
        // With an XDP context this is the packet's address; otherwise some word of r1.
        Piece::Plain(Insn::new(Op::LdxW, 8, 1, 0, 0)),
    ]
}

/// Lays out functions (each gets a final `exit`) and resolves targets.
fn assemble(functions: &[Vec<Piece>]) -> Program {
    let mut starts = Vec::new();
    let mut piece_slots: Vec<Vec<usize>> = Vec::new();
    let mut slot = 0usize;
    for pieces in functions {
        starts.push(slot);
        let mut at = Vec::new();
        for piece in pieces {
            at.push(slot);
            slot += slots_of(piece);
        }
        at.push(slot); // the final exit
        slot += 1;
        piece_slots.push(at);
    }
    let mut insns = Vec::new();
    for (f, pieces) in functions.iter().enumerate() {
        for piece in pieces {
            let pc = insns.len();
            let rel = |target: usize, from: usize| target as i64 - from as i64 - 1;
            match *piece {
                Piece::Plain(insn) => {
                    insns.push(insn);
                    if insn.op.is_lddw() {
                        insns.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
                    }
                }
                Piece::Jump { op, dst, src, imm, target } => {
                    let targets = &piece_slots[f];
                    let delta = rel(targets[target % targets.len()], pc);
                    let insn = match op {
                        Op::Ja => Insn::new(op, 0, 0, delta as i16, 0),
                        Op::Ja32 => Insn::new(op, 0, 0, 0, delta),
                        _ if op.spec().is_some_and(|s| s.operands == Operands::DstImmOff) => {
                            Insn::new(op, dst, 0, delta as i16, imm)
                        }
                        _ => Insn::new(op, dst, src, delta as i16, 0),
                    };
                    insns.push(insn);
                }
                Piece::Call { func } => {
                    let delta = rel(starts[func % starts.len()], pc);
                    insns.push(Insn::new(Op::CallLocal, 0, 0, 0, delta));
                }
                Piece::CallByAddress { reg, func } => {
                    let delta = rel(starts[func % starts.len()], pc);
                    insns.push(Insn::new(Op::LddwFunc, reg, 0, 0, delta));
                    insns.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
                    insns.push(Insn::new(Op::CallReg, reg, 0, 0, 0));
                }
            }
        }
        insns.push(Insn::new(Op::Exit, 0, 0, 0, 0));
    }
    Program::from_insns(insns)
}

fn structured() -> impl Strategy<Value = Program> {
    let function = prop::collection::vec(piece(), 0..24);
    prop::collection::vec(function, 1..4).prop_map(|mut functions| {
        if let Some(main) = functions.first_mut() {
            let mut with_prologue = prologue();
            with_prologue.append(main);
            *main = with_prologue;
        }
        assemble(&functions)
    })
}

// ---- raw programs ----

/// Random programs from the test kit's eBPF generator: table operations only, the fields an
/// operation does not use zeroed (so that more programs validate), immediates sometimes
/// naming a bound helper, every `lddw` whole, and a final `exit`.
fn raw() -> impl Strategy<Value = Program> {
    let gen = EbpfGen {
        stray_lddw_high: false,
        helper_ids: HELPER_IDS.to_vec(),
        helper_weight: 1,
        zero_unused: true,
        len: 1..24,
        lddw_filler: 1.0,
        end_with_exit: true,
    };
    gen.slots().prop_map(Program::from_insns)
}

/// Cases per property: fewer in debug builds, where Cranelift itself runs unoptimized (and
/// checks every function with its IR verifier); CI runs the tests in release.
const CASES: u32 = if cfg!(debug_assertions) { 200 } else { 1500 };

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn structured_programs_agree_with_the_interpreter(program in structured(), world in world()) {
        let valid = validate(&program);
        prop_assert!(valid.is_ok(), "the generator made an invalid program: {:?}", valid);
        agree(&program, &world)?;
    }

    #[test]
    fn every_valid_raw_program_compiles_and_agrees(program in raw(), world in world()) {
        // Refused programs never reach an engine (`Verified` is the only way in).
        if let Ok(verified) = Verified::check(&program) {
            let compiled = Jit::compile(&verified, bindings(world.layout), weir_jit::Config::default());
            prop_assert!(compiled.is_ok(), "a valid program failed to compile: {:?}", compiled.err());
            agree(&program, &world)?;
        }
    }
}

#[test]
fn validated_and_bound_programs_compile_whatever_their_calls() {
    // validate + validate_calls accept it: it compiles and runs like the interpreter.
    let program = assemble(&[
        vec![
            Piece::Plain(Insn::new(Op::Mov64Imm, 1, 0, 0, 4)),
            Piece::Call { func: 1 },
            Piece::Plain(Insn::new(Op::Call, 0, 0, 0, 100)),
        ],
        vec![Piece::Plain(Insn::new(Op::Mov64Imm, 0, 0, 0, 6))],
    ]);
    validate(&program).expect("valid");
    validate_calls(&program, &bindings(None)).expect("bound");
    let world = World {
        ctx: None,
        packet: None,
        mem: Some(vec![1, 2, 3]),
        layout: None,
        stack_size: 512,
        max_call_depth: 8,
        budget: 1000,
        blinding: false,
    };
    agree(&program, &world).expect("agree");
    let verified = Verified::check(&program).expect("valid");
    let jit =
        Jit::compile(&verified, bindings(None), weir_jit::Config::default()).expect("compiles");
    // r1 = 4 (kept across the call), r2 = 3 (mem length), r3-r5 = 0: the sum helper gives 7.
    assert_eq!(jit.run_mem(&mut jit.cache(), &mut [1, 2, 3]), Ok(7));
}

#[test]
fn the_generators_reach_every_kind_of_ending() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..1500 {
        let program = structured().new_tree(&mut runner).expect("tree").current();
        let world = world().new_tree(&mut runner).expect("tree").current();
        if let Ok([first, _]) = interp_runs(&program, &world) {
            seen.insert(match first.0 {
                Ok(_) => 0,
                Err(trap) => trap.code.code(),
            });
        }
    }
    // Values, out of bounds, read-only, budget, call depth, unknown helper, helper failure,
    // bad call target, unsupported.
    for code in [0, 1, 2, 3, 4, 5, 6, 7, 8] {
        assert!(seen.contains(&code), "no run ended with code {code}: {seen:?}");
    }
}

#[test]
fn guest_layout_matches_the_interpreter() {
    use weir_interp::guest as interp;
    use weir_jit::guest as jit;
    assert_eq!(jit::STACK_BASE, interp::STACK_BASE);
    assert_eq!(jit::CTX_BASE, interp::CTX_BASE);
    assert_eq!(jit::PACKET_BASE, interp::PACKET_BASE);
    assert_eq!(jit::MEM_BASE, interp::MEM_BASE);
    assert_eq!(jit::FUNC_BASE, interp::FUNC_BASE);
    assert_eq!(jit::REGION_WINDOW, interp::REGION_WINDOW);
    for slot in [0, 1, 77, 4096] {
        assert_eq!(jit::func_addr(slot), interp::func_addr(slot));
    }
}

#[test]
fn programs_compiled_without_optimizations_agree() {
    // Longer than OPTIMIZE_MAX_SLOTS, so compiled with `opt_level = none`: a straight-line
    // hash of checked byte loads (the shape of testdata/bpf/big.c), run to its end, to an
    // out-of-bounds trap at an exact pc, and to a budget trap.
    let steps = weir_jit::OPTIMIZE_MAX_SLOTS / 3 + 100;
    let mut b = weir_program::ProgramBuilder::new();
    b.alu_imm(Op::Mov64Imm, 2, 0);
    for step in 0..steps {
        let off = if step == steps - 7 { 200 } else { (step % 64) as i16 };
        b.push(Insn::new(Op::LdxB, 3, 1, off, 0));
        b.alu_imm(Op::Mul64Imm, 2, 31);
        b.alu_reg(Op::Add64Reg, 2, 3);
    }
    b.alu_reg(Op::Mov64Reg, 0, 2);
    b.exit();
    let program = b.link().expect("links");
    assert!(program.len() > weir_jit::OPTIMIZE_MAX_SLOTS);
    let world = |mem_len: usize, budget: u64| World {
        ctx: None,
        packet: None,
        mem: Some((0..mem_len).map(|i| (i * 7 + 3) as u8).collect()),
        layout: None,
        stack_size: 512,
        max_call_depth: 8,
        budget,
        blinding: false,
    };
    for (mem_len, budget) in [(256, 1_000_000), (64, 1_000_000), (256, 1_000), (256, 2_001)] {
        agree(&program, &world(mem_len, budget)).expect("agree");
    }
    let [(trapped, ..), _] = interp_runs(&program, &world(64, 1_000_000)).expect("runs");
    let trap = trapped.expect_err("a load past the end");
    assert_eq!((trap.code, trap.pc), (weir_program::TrapCode::OutOfBounds, 1 + 3 * (steps - 7)));
}
