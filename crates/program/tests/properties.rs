//! Properties: builder programs with random forward jumps and local functions always link,
//! validate and round-trip through bytes; `validate`, `validate_calls` and `functions`
//! never panic on arbitrary instructions, and what `validate` accepts has the structure it
//! promises (checked here independently of its implementation).

use proptest::prelude::*;
use weir_isa::ebpf::{Insn, Op, OPCODES};
use weir_program::abi::Bindings;
use weir_program::{
    function_target, functions, jump_target, validate, validate_calls, Label, Program,
    ProgramBuilder,
};

/// One step of a generated function body.
#[derive(Clone, Debug)]
enum Step {
    Alu {
        op_pick: usize,
        dst: u8,
        src: u8,
        imm: i32,
    },
    Load {
        dst: u8,
        src: u8,
        off: i16,
    },
    Store {
        dst: u8,
        off: i16,
        imm: i32,
    },
    Lddw {
        dst: u8,
        imm: i64,
    },
    /// A conditional jump to one of the labels bound later in the function.
    Branch {
        op_pick: usize,
        dst: u8,
        imm: i32,
        label_pick: usize,
    },
    /// `ja` to a later label.
    Skip {
        label_pick: usize,
    },
    /// Binds the next unbound label here.
    Bind,
    Call {
        callee_pick: usize,
    },
    FuncAddress {
        dst: u8,
        callee_pick: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let reg = 0u8..10; // r10 is never a destination
    prop_oneof![
        (any::<usize>(), reg.clone(), 0u8..=10, any::<i32>())
            .prop_map(|(op_pick, dst, src, imm)| Step::Alu { op_pick, dst, src, imm }),
        (reg.clone(), 0u8..=10, any::<i16>()).prop_map(|(dst, src, off)| Step::Load {
            dst,
            src,
            off
        }),
        (0u8..=10, any::<i16>(), any::<i32>()).prop_map(|(dst, off, imm)| Step::Store {
            dst,
            off,
            imm
        }),
        (reg.clone(), any::<i64>()).prop_map(|(dst, imm)| Step::Lddw { dst, imm }),
        (any::<usize>(), reg.clone(), any::<i32>(), any::<usize>()).prop_map(
            |(op_pick, dst, imm, label_pick)| Step::Branch { op_pick, dst, imm, label_pick }
        ),
        any::<usize>().prop_map(|label_pick| Step::Skip { label_pick }),
        Just(Step::Bind),
        any::<usize>().prop_map(|callee_pick| Step::Call { callee_pick }),
        (reg, any::<usize>()).prop_map(|(dst, callee_pick)| Step::FuncAddress { dst, callee_pick }),
    ]
}

fn pick<T: Copy>(items: &[T], n: usize) -> Option<T> {
    items.get(n.checked_rem(items.len())?).copied()
}

/// Emits one function: its steps, then binds its leftover labels and exits, so every jump
/// is forward and inside the function.
fn emit_function(b: &mut ProgramBuilder, steps: &[Step], entries: &[Label], labels: usize) {
    let alu: Vec<Op> = OPCODES
        .iter()
        .filter(|s| s.op.writes_dst() && !s.op.is_lddw() && s.op.mem_size().is_none())
        .map(|s| s.op)
        .collect();
    let branches: Vec<Op> =
        OPCODES.iter().filter(|s| s.op.is_conditional_jump()).map(|s| s.op).collect();
    let pending: Vec<Label> = (0..labels).map(|_| b.new_label()).collect();
    let mut next_unbound = 0;
    for s in steps {
        let later = pending.get(next_unbound..).unwrap_or_default();
        match *s {
            Step::Alu { op_pick, dst, src, imm } => {
                let op = pick(&alu, op_pick).unwrap();
                // Fill only the operand the shape uses: validate rejects a set unused field.
                let spec = op.spec().unwrap();
                use weir_isa::ebpf::Operands::*;
                match spec.operands {
                    DstImm => b.alu_imm(op, dst, imm),
                    DstSrc => b.alu_reg(op, dst, src),
                    _ => b.push(Insn::new(op, dst, 0, 0, 0)),
                };
            }
            Step::Load { dst, src, off } => {
                b.load(Op::LdxW, dst, src, off);
            }
            Step::Store { dst, off, imm } => {
                b.store_imm(Op::StDw, dst, off, imm);
            }
            Step::Lddw { dst, imm } => {
                b.lddw(dst, imm);
            }
            Step::Branch { op_pick, dst, imm, label_pick } => {
                if let Some(target) = pick(later, label_pick) {
                    let op = pick(&branches, op_pick).unwrap();
                    if op.spec().unwrap().operands == weir_isa::ebpf::Operands::DstImmOff {
                        b.jump_imm(op, dst, imm, target);
                    } else {
                        b.jump_reg(op, dst, 10, target);
                    }
                }
            }
            Step::Skip { label_pick } => {
                if let Some(target) = pick(later, label_pick) {
                    b.jump(target);
                }
            }
            Step::Bind => {
                if let Some(label) = pending.get(next_unbound) {
                    b.bind(*label);
                    next_unbound += 1;
                }
            }
            Step::Call { callee_pick } => {
                if let Some(callee) = pick(entries, callee_pick) {
                    b.call_local(callee);
                }
            }
            Step::FuncAddress { dst, callee_pick } => {
                if let Some(callee) = pick(entries, callee_pick) {
                    b.lddw_func(dst, callee);
                }
            }
        }
    }
    for label in pending.get(next_unbound..).unwrap_or_default() {
        b.bind(*label);
    }
    b.exit();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn builder_programs_link_and_validate(bodies in bodies()) {
        let prog = build(&bodies);
        prop_assert_eq!(validate(&prog), Ok(()));
        prop_assert_eq!(&Program::from_bytes(&prog.to_bytes()).unwrap(), &prog);
        check_promises(&prog, &functions(&prog))?;
    }

    #[test]
    fn validate_never_panics_and_keeps_its_promises(insns in prop::collection::vec(insn(), 0..24)) {
        let prog = Program::from_insns(insns);
        let result = validate(&prog);
        let _ = validate_calls(&prog, &Bindings::conformance());
        let funcs = functions(&prog);
        if let Err(e) = &result {
            prop_assert!(e.index <= prog.len(), "{} past the end of {} slots", e, prog.len());
            let prefix = format!("instruction {}: ", e.index);
            prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
        } else {
            check_promises(&prog, &funcs)?;
        }
    }
}

/// Builds a program from generated function bodies (see `emit_function`).
fn build(bodies: &[(Vec<Step>, usize)]) -> Program {
    let mut b = ProgramBuilder::new();
    let entries: Vec<Label> = bodies.iter().map(|_| b.new_label()).collect();
    for (entry, (steps, labels)) in entries.iter().zip(bodies) {
        b.bind(*entry);
        emit_function(&mut b, steps, &entries, *labels);
    }
    b.link().unwrap()
}

fn bodies() -> impl Strategy<Value = Vec<(Vec<Step>, usize)>> {
    prop::collection::vec((prop::collection::vec(step(), 0..40), 0usize..6), 1..5)
}

/// One field of one slot set to a new value, or a slot's op replaced.
#[derive(Clone, Debug)]
struct Mutation {
    slot_pick: usize,
    field: u8,
    value: i64,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let value =
        prop_oneof![4 => -4i64..12, 1 => any::<i16>().prop_map(i64::from), 1 => any::<i64>()];
    (any::<usize>(), 0u8..5, value).prop_map(|(slot_pick, field, value)| Mutation {
        slot_pick,
        field,
        value,
    })
}

fn mutate(insns: &mut [Insn], m: &Mutation) {
    let Some(slot) = m.slot_pick.checked_rem(insns.len()) else { return };
    let insn = &mut insns[slot];
    match m.field {
        0 => insn.dst = m.value as u8,
        1 => insn.src = m.value as u8,
        2 => insn.off = m.value as i16,
        3 => insn.imm = m.value,
        _ => {
            let n = OPCODES.len() + 1;
            let i = usize::try_from(m.value.rem_euclid(n as i64)).unwrap();
            insn.op = OPCODES.get(i).map_or(Op::LddwHigh, |s| s.op);
        }
    }
}

/// Valid programs with a few random changes land on both sides of every rule: those that
/// still validate must keep the promises, and the run must see both outcomes.
#[test]
fn mutated_programs_keep_the_promises() {
    use proptest::test_runner::{Config, TestRunner};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (valid, invalid) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut runner = TestRunner::new(Config::with_cases(1024));
    let strategy = (bodies(), prop::collection::vec(mutation(), 1..3));
    runner
        .run(&strategy, |(bodies, mutations)| {
            let mut insns = build(&bodies).into_insns();
            for m in &mutations {
                mutate(&mut insns, m);
            }
            let prog = Program::from_insns(insns);
            let funcs = functions(&prog);
            match validate(&prog) {
                Ok(()) => {
                    valid.fetch_add(1, Ordering::Relaxed);
                    check_promises(&prog, &funcs)
                }
                Err(e) => {
                    invalid.fetch_add(1, Ordering::Relaxed);
                    prop_assert!(e.index < prog.len(), "{} past the end", e);
                    Ok(())
                }
            }
        })
        .unwrap();
    let (valid, invalid) = (valid.into_inner(), invalid.into_inner());
    println!("mutated programs: {valid} valid, {invalid} invalid");
    assert!(valid > 50 && invalid > 50, "{valid} valid, {invalid} invalid");
}

/// What a valid program guarantees, restated from scratch.
fn check_promises(prog: &Program, funcs: &[std::ops::Range<usize>]) -> Result<(), TestCaseError> {
    let insns = prog.insns();
    // Functions tile the program.
    prop_assert_eq!(funcs.first().map(|f| f.start), Some(0));
    prop_assert_eq!(funcs.last().map(|f| f.end), Some(insns.len()));
    for pair in funcs.windows(2) {
        prop_assert_eq!(pair[0].end, pair[1].start);
    }
    for (pc, insn) in insns.iter().enumerate() {
        // Used register fields name r0-r10, unused ones are 0, and the only discriminator
        // in `src` (call kind, lddw pseudo kind) is at most 6.
        prop_assert!(insn.dst <= 10 && insn.src <= 10, "slot {}: {:?}", pc, insn);
        if insn.op.is_lddw() {
            prop_assert_eq!(insns.get(pc + 1).map(|i| i.op), Some(Op::LddwHigh));
        }
        if insn.op == Op::LddwHigh {
            prop_assert!(pc > 0 && insns[pc - 1].op.is_lddw());
        }
        if insn.op.writes_dst() {
            prop_assert_ne!(insn.dst, 10);
        }
        if let Some(target) = jump_target(pc, insn) {
            let func = funcs.iter().find(|f| f.contains(&pc)).unwrap();
            let target = usize::try_from(target).unwrap();
            prop_assert!(func.contains(&target));
            prop_assert_ne!(insns[target].op, Op::LddwHigh);
        }
        if let Some(target) = function_target(pc, insn) {
            let target = usize::try_from(target).unwrap();
            prop_assert!(funcs.iter().any(|f| f.start == target));
        }
    }
    for f in funcs {
        let last = if insns[f.end - 1].op == Op::LddwHigh { f.end - 2 } else { f.end - 1 };
        prop_assert!(matches!(insns[last].op, Op::Exit | Op::Ja | Op::Ja32), "{:?}", f);
    }
    Ok(())
}

/// Arbitrary instructions, biased towards small fields so that some of them validate.
fn insn() -> impl Strategy<Value = Insn> {
    let op = prop_oneof![
        8 => (0..OPCODES.len()).prop_map(|i| OPCODES[i].op),
        1 => Just(Op::LddwHigh),
        2 => Just(Op::Exit),
    ];
    let reg = prop_oneof![4 => 0u8..=10, 1 => any::<u8>()];
    let off = prop_oneof![4 => -3i16..4, 1 => any::<i16>()];
    let imm = prop_oneof![4 => -3i64..4, 1 => any::<i32>().prop_map(i64::from), 1 => any::<i64>()];
    let small = prop_oneof![3 => Just(0u8), 1 => 0u8..=10];
    (op, reg, small, off, imm)
        .prop_map(|(op, dst, src, off, imm)| Insn::new(op, dst, src, off, imm))
}
