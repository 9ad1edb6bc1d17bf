//! Random programs: any instruction of the table with any fields, lddw fillers usually
//! present, random memory, context and packet. Whatever they do, a run ends in `Ok` or a
//! `Trap` that names a slot of the program, and reusing a `Cache` changes nothing.

use proptest::prelude::*;
use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::{self, Bindings, Helper, HelperCtx, HelperOutcome};
use weir_program::{Program, Trap, TrapCode};
use weir_testkit::ebpf_gen::EbpfGen;

use crate::{Cache, Config, Input, Interpreter, RunOutcome};

fn sum(_: &mut HelperCtx<'_>, args: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Return(args.iter().fold(0u64, |a, &b| a.wrapping_add(b)))
}

fn fail(_: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    HelperOutcome::Fail
}

/// Slots from the test kit's eBPF generator, in its default mix: any instruction of the
/// table with any fields, a stray `lddw` second half now and then, a filler after most
/// `lddw`s (a missing one is a fault worth running too), immediates naming the bound helpers
/// (5 the conformance helper, 100 and 101 below).
fn slots() -> impl Strategy<Value = Vec<Insn>> {
    EbpfGen::default().slots()
}

#[derive(Clone, Debug)]
struct World {
    ctx: Option<Vec<u8>>,
    packet: Option<Vec<u8>>,
    mem: Option<Vec<u8>>,
    layout: Option<&'static abi::ContextLayout>,
}

fn world() -> impl Strategy<Value = World> {
    let bytes = |n| prop::option::of(prop::collection::vec(any::<u8>(), 0..n));
    let layout = prop_oneof![Just(None), Just(Some(&abi::XDP)), Just(Some(&abi::SOCKET_FILTER))];
    (bytes(200), bytes(64), bytes(64), layout).prop_map(|(ctx, packet, mem, layout)| {
        // A layout needs a context long enough for its packet fields.
        let ctx = match (ctx, layout) {
            (Some(mut c), Some(l)) => {
                c.resize(c.len().max(l.size as usize), 0);
                Some(c)
            }
            (c, _) => c,
        };
        World { ctx, packet, mem, layout }
    })
}

fn interpreter(slots: &[Insn], layout: Option<&'static abi::ContextLayout>) -> Interpreter {
    let mut bindings = Bindings::conformance();
    bindings.add_helper(Helper { id: 100, name: "sum", func: sum });
    bindings.add_helper(Helper { id: 101, name: "fail", func: fail });
    bindings.context = layout;
    let config = Config { instruction_budget: 2_000, ..Config::default() };
    Interpreter::new_unvalidated(&Program::from_insns(slots.to_vec()), bindings, config)
}

/// Everything a run can change: its outcome, the buffers and the stack.
type Observed = (Result<RunOutcome, Trap>, World, Vec<u8>);

fn observe(interp: &Interpreter, cache: &mut Cache, world: &World) -> Observed {
    let mut w = world.clone();
    let input = Input {
        ctx: w.ctx.as_deref_mut(),
        packet: w.packet.as_deref_mut(),
        mem: w.mem.as_deref_mut(),
        ..Default::default()
    };
    let outcome = interp.run_stats(cache, input);
    (outcome, w, cache.stack().to_vec())
}

fn check_trap(trap: &Trap, slots: usize) -> Result<(), TestCaseError> {
    prop_assert!(trap.pc < slots, "trap {trap:?} names no slot of {slots}");
    if matches!(trap.code, TrapCode::OutOfBounds | TrapCode::ReadOnly) {
        prop_assert!([1, 2, 4, 8].contains(&trap.size), "{trap:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_programs_end_in_a_value_or_a_trap(slots in slots(), world in world()) {
        let interp = interpreter(&slots, world.layout);
        let mut cache = interp.cache();
        let first = observe(&interp, &mut cache, &world);
        if let Err(trap) = &first.0 {
            check_trap(trap, slots.len())?;
        }
        prop_assert!(cache.executed() <= 2_000);
        // The same cache again, dirty from the first run: nothing may differ.
        let second = observe(&interp, &mut cache, &world);
        prop_assert_eq!(&first.0, &second.0);
        prop_assert_eq!(&first.1.ctx, &second.1.ctx);
        prop_assert_eq!(&first.1.packet, &second.1.packet);
        prop_assert_eq!(&first.1.mem, &second.1.mem);
        prop_assert_eq!(&first.2, &second.2);
    }

    #[test]
    fn programs_run_as_their_encoding(slots in slots(), world in world()) {
        // Registers above r10 do not decode: keep them real so most cases compare.
        let slots: Vec<Insn> = slots
            .into_iter()
            .map(|mut insn| {
                insn.dst %= 11;
                insn.src %= 11;
                insn
            })
            .collect();
        // Only well-formed lddw pairs keep slot numbers through encoding.
        let pairs_ok = slots.iter().enumerate().all(|(k, insn)| match insn.op {
            Op::LddwHigh => k > 0 && slots[k - 1].op.is_lddw(),
            op if op.is_lddw() => slots.get(k + 1).is_some_and(|n| n.op == Op::LddwHigh),
            _ => true,
        });
        prop_assume!(pairs_ok);
        let decoded = Program::from_bytes(&Program::from_insns(slots.clone()).to_bytes());
        prop_assert!(decoded.is_ok(), "{:?}", decoded);
        let decoded = decoded.unwrap_or_default();
        prop_assert_eq!(decoded.len(), slots.len());
        let direct = interpreter(&slots, world.layout);
        let encoded = interpreter(decoded.insns(), world.layout);
        let a = observe(&direct, &mut direct.cache(), &world);
        let b = observe(&encoded, &mut encoded.cache(), &world);
        prop_assert_eq!(a.0, b.0);
        prop_assert_eq!(a.1.mem, b.1.mem);
        prop_assert_eq!(a.2, b.2);
    }

    #[test]
    fn the_lean_entry_runs_as_the_general_path(
        slots in slots(),
        world in world(),
        other in world(),
        short in any::<bool>(),
    ) {
        // The lean entry's input: a context and a packet alone (a layout's context cut short
        // now and then: the lean entry hands it to the general path, which names the trap).
        let mut ctx = world.ctx.clone().unwrap_or_default();
        if short {
            ctx.truncate(ctx.len() / 3);
        }
        let world = World { ctx: Some(ctx), packet: world.packet.or(Some(vec![])), mem: None, ..world };
        let interp = interpreter(&slots, world.layout);
        let general = {
            let mut w = world.clone();
            let mut cache = interp.cache();
            let input =
                Input { ctx: w.ctx.as_deref_mut(), packet: w.packet.as_deref_mut(), ..Default::default() };
            let outcome = interp.run_observed(&mut cache, input, |_, _| {});
            (outcome, w, cache.stack().to_vec())
        };
        // A cache another world's run left dirty (stack written, frames pushed): the lean
        // entry must start from the same zeroed state the general one does.
        let mut cache = interp.cache();
        let _ = observe(&interp, &mut cache, &other);
        let mut w = world.clone();
        let (ctx, packet) = (w.ctx.as_deref_mut().unwrap_or_default(), w.packet.as_deref_mut().unwrap_or_default());
        let lean = interp.run_lean(&mut cache, ctx, packet);
        prop_assert_eq!(&lean, &general.0);
        prop_assert_eq!(&w.ctx, &general.1.ctx);
        prop_assert_eq!(&w.packet, &general.1.packet);
        prop_assert_eq!(cache.stack(), &general.2[..]);
        // And `run_stats` takes it for this input: the same again.
        let again = observe(&interp, &mut cache, &world);
        prop_assert_eq!(&again.0, &general.0);
        prop_assert_eq!(&again.1.ctx, &general.1.ctx);
        prop_assert_eq!(&again.2, &general.2);
    }

    #[test]
    fn the_loop_shortcuts_run_as_the_plain_loop(
        slots in slots(),
        world in world(),
        pairs in prop::collection::vec((any::<prop::sample::Index>(), any::<u32>()), 0..4),
        forward in any::<bool>(),
        budget in 1u64..48,
    ) {
        // Filters end in `mov32 r0, K; exit` and jump only forward: put such pairs in, and
        // now and then turn every jump forward, so both shortcuts (the fused exit and the
        // budget-free loop) are taken, with budgets around the program's length.
        let mut slots = slots;
        for (at, value) in pairs {
            let k = at.index(slots.len() + 1);
            slots.splice(k..k, [Insn::new(Op::Mov32Imm, 0, 0, 0, i64::from(value)), Insn::new(Op::Exit, 0, 0, 0, 0)]);
        }
        if forward {
            for insn in &mut slots {
                insn.off = insn.off.saturating_abs();
                if insn.op == Op::Ja32 {
                    insn.imm = insn.imm.saturating_abs();
                }
            }
        }
        let mut bindings = Bindings::conformance();
        bindings.add_helper(Helper { id: 100, name: "sum", func: sum });
        bindings.context = world.layout;
        let config = Config { instruction_budget: budget, ..Config::default() };
        let fast = Interpreter::new_unvalidated(&Program::from_insns(slots.clone()), bindings, config);
        // The reference: the same steps without either shortcut.
        let mut plain = fast.clone();
        plain.budget_free = false;
        for step in &mut plain.code {
            if let crate::step::Step::SetThenExit { dst, imm } = *step {
                *step = crate::step::Step::Set { dst, imm };
            }
        }
        // The shortcuts apply on the lean entry: a context and a packet alone.
        let run = |interp: &Interpreter| {
            let mut w = world.clone();
            let mut cache = interp.cache();
            let ctx = w.ctx.get_or_insert_with(Vec::new);
            let packet = w.packet.get_or_insert_with(Vec::new);
            let outcome = interp.run_lean(&mut cache, ctx, packet);
            (outcome, cache.executed(), w.ctx, w.packet, cache.stack().to_vec())
        };
        let (a, b) = (run(&fast), run(&plain));
        prop_assert_eq!(&a.0, &b.0);
        prop_assert_eq!(a.1, b.1);
        prop_assert_eq!((&a.2, &a.3, &a.4), (&b.2, &b.3, &b.4));
        prop_assert!(a.1 <= budget);
    }

    #[test]
    fn random_bytecode_never_panics(bytes in prop::collection::vec(any::<u8>(), 8..256), mem in prop::collection::vec(any::<u8>(), 0..32)) {
        let whole = bytes.len() / 8 * 8;
        if let Ok(program) = Program::from_bytes(&bytes[..whole]) {
            if !program.is_empty() {
                let interp = interpreter(program.insns(), None);
                let mut cache = interp.cache();
                let mut mem = mem;
                if let Err(trap) = interp.run_mem(&mut cache, &mut mem) {
                    check_trap(&trap, program.len())?;
                }
            }
        }
    }
}

#[test]
fn random_programs_reach_many_outcomes() {
    // The generator is only useful if it exercises more than one kind of ending.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..2_000 {
        let slots = slots().new_tree(&mut runner).expect("tree").current();
        let world = world().new_tree(&mut runner).expect("tree").current();
        let interp = interpreter(&slots, world.layout);
        let outcome = observe(&interp, &mut interp.cache(), &world).0;
        seen.insert(match outcome {
            Ok(_) => 0,
            Err(trap) => trap.code.code(),
        });
    }
    for code in [0, 1, 3, 5, 8, 9] {
        assert!(seen.contains(&code), "no run ended with code {code}: {seen:?}");
    }
}
