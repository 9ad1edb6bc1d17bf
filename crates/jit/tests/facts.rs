//! The JIT with the checks the verifier's facts drop, against the reference interpreter
//! (which keeps every check): on programs the verifier accepts, both must agree on
//! everything observable (result or trap, executed count, context, packet, memory, stack),
//! over random untyped programs, random XDP programs with packet, context and stack
//! accesses, loops with variable offsets, and the conformance corpus. Then the counts:
//! a proven program keeps no check where the facts cover every access, a program whose
//! proof is withheld keeps them all, and runs unlike the proof's assumptions take the
//! checked code.

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use weir_isa::asm::assemble;
use weir_isa::ebpf::{Insn, Op, Operands};
use weir_jit::{Checks, Jit};
use weir_program::abi::{self, Bindings};
use weir_program::exec::Input;
use weir_program::{Assurance, ProgType, Program, Trap, Verified};
use weir_testkit::ebpf_gen::EbpfGen;
use weir_verifier::{verify, Options};

/// One input: the buffers a run gets.
#[derive(Clone, Debug, Default)]
struct World {
    ctx: Option<Vec<u8>>,
    packet: Option<Vec<u8>>,
    mem: Option<Vec<u8>>,
}

type Observed =
    (Result<(u64, u64), Trap>, Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>, Vec<u8>);

fn bindings(prog_type: Option<ProgType>) -> Bindings {
    match prog_type {
        Some(t) => Bindings::for_prog_type(t),
        None => Bindings::conformance(),
    }
}

/// The program proven as the verifier proves it for `world` (untyped: its memory's size),
/// or `None` when refused.
fn prove(program: &Program, prog_type: Option<ProgType>, world: &World) -> Option<Verified> {
    let options = Options {
        prog_type,
        memory_len: world.mem.as_ref().map(|m| m.len() as u64),
        helpers: Some(if prog_type.is_none() { vec![5] } else { Vec::new() }),
        budget: 200_000,
        ..Options::default()
    };
    let proof = verify(program, &options).ok()?;
    Some(proof.into_verified(program.clone()).expect("the proof's own program"))
}

fn interp_run(program: &Program, prog_type: Option<ProgType>, world: &World) -> Observed {
    let verified = Verified::check(program).expect("valid");
    let engine = weir_interp::Interpreter::new(
        &verified,
        bindings(prog_type),
        weir_interp::Config::default(),
    );
    let mut cache = engine.cache();
    let mut w = world.clone();
    let input = Input {
        ctx: w.ctx.as_deref_mut(),
        packet: w.packet.as_deref_mut(),
        mem: w.mem.as_deref_mut(),
        ..Default::default()
    };
    let outcome = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
    (outcome, w.ctx, w.packet, w.mem, cache.stack().to_vec())
}

/// Two runs on one cache (the second after the first's clean-up).
fn jit_runs(
    verified: &Verified,
    prog_type: Option<ProgType>,
    world: &World,
) -> (Checks, [Observed; 2]) {
    let engine =
        Jit::compile(verified, bindings(prog_type), weir_jit::Config::default()).expect("compiles");
    let mut cache = engine.cache();
    let mut run = || {
        let mut w = world.clone();
        let input = Input {
            ctx: w.ctx.as_deref_mut(),
            packet: w.packet.as_deref_mut(),
            mem: w.mem.as_deref_mut(),
            ..Default::default()
        };
        let outcome = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
        (outcome, w.ctx, w.packet, w.mem, cache.stack().to_vec())
    };
    let first = run();
    let second = run();
    (engine.checks(), [first, second])
}

/// Proves `program` for `world` and compares the engines; `Ok(None)` when the verifier
/// refuses it, else the checks the JIT dropped.
fn agree(
    program: &Program,
    prog_type: Option<ProgType>,
    world: &World,
) -> Result<Option<Checks>, String> {
    let Some(verified) = prove(program, prog_type, world) else { return Ok(None) };
    let expected = interp_run(program, prog_type, world);
    // The verifier's bound on a run's length, which lets the JIT drop its budget tests.
    let bound = verified.facts().map_or(0, |f| f.max_executed);
    if let Ok((_, executed)) = expected.0 {
        if executed > bound {
            return Err(format!(
                "{executed} instructions executed, the proof bounds runs by {bound}"
            ));
        }
    }
    let (checks, got) = jit_runs(&verified, prog_type, world);
    for (run, g) in got.iter().enumerate() {
        let what = ["outcome", "ctx", "packet", "mem", "stack"];
        let same = [
            expected.0 == g.0,
            expected.1 == g.1,
            expected.2 == g.2,
            expected.3 == g.3,
            expected.4 == g.4,
        ];
        if let Some(k) = same.iter().position(|s| !s) {
            return Err(format!(
                "run {run}: {} differs (interpreter {:?}, jit {:?}; {checks:?})\n{}",
                what[k],
                expected.0,
                g.0,
                weir_isa::asm::listing(program.insns())
            ));
        }
    }
    Ok(Some(checks))
}

// ---- untyped random programs (the verifier's soundness shape) ----

/// Registers and eight stack words written first, so that random bodies are often accepted.
fn preamble() -> Vec<Insn> {
    let mut v = Vec::new();
    for r in [0u8, 3, 4, 5, 6, 7, 8, 9] {
        v.push(Insn::new(Op::Mov64Imm, r, 0, 0, i64::from(r) * 5 - 11));
    }
    for k in 1..=8i16 {
        v.push(Insn::new(Op::StDw, 10, 0, -8 * k, i64::from(k)));
    }
    v
}

/// Steers a random body towards acceptance: forward jumps only, no early exit, accesses
/// through r1 (inside the memory), r10 or a register holding `r10 - 64` (r9, set first, so
/// that the access is not one at a fixed frame offset), divisions by `r | 1` now and then.
fn tame(body: Vec<Insn>, mem_len: i16) -> Vec<Insn> {
    let n = body.len();
    let mut out = vec![Insn::new(Op::Mov64Reg, 9, 10, 0, 0), Insn::new(Op::Add64Imm, 9, 0, 0, -64)];
    for (pc, mut insn) in body.into_iter().enumerate() {
        let operands = insn.op.spec().map(|s| s.operands);
        match operands {
            Some(
                Operands::JmpOff
                | Operands::JmpImm
                | Operands::CallLocal
                | Operands::CallReg
                | Operands::Nothing,
            ) if pc + 1 < n => {
                insn = Insn::new(Op::Mov64Imm, 0, 0, 0, insn.imm);
            }
            Some(Operands::DstImmOff | Operands::DstSrcOff) => {
                insn.off = insn.off.rem_euclid((n - pc - 1).max(1) as i16);
            }
            Some(Operands::Load | Operands::StoreImm | Operands::StoreReg) => {
                let size = insn.op.mem_size().map_or(8, |s| s.bytes() as i16);
                let (base, off) = match insn.off.rem_euclid(3) {
                    0 if mem_len >= size => (1, insn.off.rem_euclid(mem_len - size + 1)),
                    1 => (9, size * insn.off.rem_euclid(64 / size)),
                    _ => (10, -8 * (1 + insn.off.rem_euclid(8))),
                };
                if operands == Some(Operands::Load) {
                    insn.src = base;
                } else {
                    insn.dst = base;
                }
                insn.off = off;
                if insn.dst == 9 && operands == Some(Operands::Load) {
                    insn.dst = 0;
                }
            }
            Some(Operands::DstSrc) if insn.dst == 9 || insn.dst == 10 => insn.dst = 0,
            Some(Operands::DstImm | Operands::Dst | Operands::DstImm64 | Operands::Pseudo(_))
                if insn.dst == 9 =>
            {
                insn.dst = 0
            }
            _ => {}
        }
        if operands == Some(Operands::DstSrc)
            && matches!(insn.op, Op::Div64Reg | Op::Mod64Reg | Op::Div32Reg | Op::Mod32Reg)
            && insn.off == 0
            && insn.src % 2 == 0
            && insn.src < 9
        {
            // Make the divisor provably non-zero half of the time.
            out.push(Insn::new(Op::Or64Imm, insn.src, 0, 0, 1));
        }
        out.push(insn);
    }
    out
}

fn body_gen() -> BoxedStrategy<Vec<Insn>> {
    EbpfGen {
        stray_lddw_high: false,
        helper_ids: vec![5],
        helper_weight: 1,
        zero_unused: true,
        len: 1..24,
        lddw_filler: 1.0,
        end_with_exit: true,
    }
    .slots()
}

/// Totals over a property's cases: how many were proven and what they dropped.
#[derive(Default)]
struct Tally {
    proven: u32,
    dropped_accesses: usize,
    dropped_divisions: usize,
}

impl Tally {
    fn add(&mut self, checks: Option<Checks>) {
        if let Some(c) = checks {
            self.proven += 1;
            self.dropped_accesses += c.accesses_dropped;
            self.dropped_divisions += c.divisions_dropped;
        }
    }
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    })
}

#[test]
fn random_untyped_programs_agree_with_the_interpreter() {
    let tally = std::cell::RefCell::new(Tally::default());
    let strategy = (body_gen(), prop::collection::vec(any::<u8>(), 0..72));
    runner(1500)
        .run(&strategy, |(body, mem)| {
            let mut insns = preamble();
            insns.extend(tame(body, mem.len() as i16));
            let program = Program::from_insns(insns);
            let world = World { mem: Some(mem), ..World::default() };
            let checks = agree(&program, None, &world).map_err(TestCaseError::fail)?;
            tally.borrow_mut().add(checks);
            Ok(())
        })
        .unwrap();
    let t = tally.into_inner();
    eprintln!(
        "untyped: {} proven, {} accesses and {} divisions dropped",
        t.proven, t.dropped_accesses, t.dropped_divisions
    );
    assert!(t.proven >= 120, "only {} programs proven", t.proven);
    assert!(t.dropped_accesses >= 60, "{} accesses dropped", t.dropped_accesses);
    assert!(t.dropped_divisions >= 10, "{} divisions dropped", t.dropped_divisions);
}

// ---- loops with variable offsets (untyped and stack) ----

/// `for i in 0..n step s: r0 += load(base + i)`, over the memory or a stack buffer.
fn loop_program(n: i64, step: i64, size_op: Op, on_stack: bool, store: bool) -> Program {
    let base = if on_stack { "mov %r6, %r10\nadd %r6, -128" } else { "mov %r6, %r1" };
    let size = match size_op {
        Op::LdxB => "b",
        Op::LdxH => "h",
        Op::LdxW => "w",
        _ => "dw",
    };
    let touch = if store {
        format!("stx{size} [%r4], %r3\nldx{size} %r5, [%r4]")
    } else {
        format!("ldx{size} %r5, [%r4]")
    };
    let src = format!(
        "{base}\nmov %r0, 0\nmov %r3, 0\nloop:\nmov %r4, %r6\nadd %r4, %r3\n{touch}\n\
         add %r0, %r5\nadd %r3, {step}\njlt %r3, {n}, loop\nexit"
    );
    Program::from_insns(assemble(&src).unwrap_or_else(|e| panic!("{e}\n{src}")))
}

#[test]
fn loops_with_variable_offsets_agree_and_drop_their_checks() {
    let mut proven = 0;
    let mut rng = weir_testkit::SplitMix64::new(11);
    for (op, size) in [(Op::LdxB, 1i64), (Op::LdxH, 2), (Op::LdxW, 4), (Op::LdxDw, 8)] {
        for on_stack in [false, true] {
            for store in [false, true] {
                for n in [8i64, 64, 120, 128, 130] {
                    let program = loop_program(n, size, op, on_stack, store);
                    let mem: Vec<u8> = (0..128).map(|_| rng.next_u64() as u8).collect();
                    let world = World { mem: Some(mem), ..World::default() };
                    match agree(&program, None, &world) {
                        Ok(Some(checks)) => {
                            proven += 1;
                            // Every access of the loop body is proven.
                            assert_eq!(
                                checks.accesses_kept, 0,
                                "{n} {size} {on_stack}: {checks:?}"
                            );
                            assert_eq!(checks.accesses_dropped, 1 + usize::from(store));
                        }
                        // Past the 128 bytes: refused, as it would trap.
                        Ok(None) => assert!(n > 128 || (n + size - 1) > 128, "refused {n} {size}"),
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }
    }
    assert!(proven >= 40, "{proven}");
}

/// Loops the JIT counts from their induction register alone (`codegen::counted`): steps
/// up and down, powers of two and not, the register compared or another one; the executed
/// count must be the interpreter's.
#[test]
fn counted_loops_count_exactly() {
    let loops = [
        // Down by 3 to 0, loading mem[r3].
        "mov %r0, 0\nmov %r3, 120\nloop:\nmov %r4, %r1\nadd %r4, %r3\nldxb %r5, [%r4]\n\
         add %r0, %r5\nadd %r3, -3\njsgt %r3, 0, loop\nexit",
        // Up by 5, the loop ended by another register's count.
        "mov %r0, 0\nmov %r3, 7\nmov %r7, 0\nloop:\nadd %r0, %r3\nadd %r3, 5\n\
         add %r7, 1\nmov %r8, %r7\njlt %r8, 20, loop\nexit",
        // Up by 16 on the stack, stores and loads.
        "mov %r0, 0\nmov %r3, 0\nloop:\nmov %r4, %r10\nadd %r4, -128\nadd %r4, %r3\n\
         stxdw [%r4], %r3\nldxdw %r5, [%r4]\nadd %r0, %r5\nadd %r3, 16\njlt %r3, 128, loop\nexit",
    ];
    for src in loops {
        let program = Program::from_insns(assemble(src).unwrap_or_else(|e| panic!("{e}\n{src}")));
        let world = World { mem: Some((0..128).map(|i| i as u8).collect()), ..World::default() };
        match agree(&program, None, &world) {
            Ok(Some(checks)) => assert!(checks.budget_dropped, "{src}: {checks:?}"),
            Ok(None) => panic!("refused: {src}"),
            Err(e) => panic!("{src}: {e}"),
        }
    }
}

/// `src` proven for 64 bytes of memory and run there by the interpreter and by the JIT
/// with unrolling on and off: r0, the executed count and the stack must agree (`what`
/// names the case in a failure). Returns the JIT runs made.
fn agree_unrolled_on_and_off(src: &str, what: &str) -> usize {
    let program = Program::from_insns(assemble(src).unwrap_or_else(|e| panic!("{e}\n{src}")));
    let world = World { mem: Some((0..64).map(|i| (i * 7) as u8).collect()), ..World::default() };
    let Some(verified) = prove(&program, None, &world) else { panic!("refused: {src}") };
    let expected = interp_run(&program, None, &world);
    assert!(expected.0.is_ok(), "{src}: {:?}", expected.0);
    for unroll in [true, false] {
        let config = weir_jit::Config { unroll, ..weir_jit::Config::default() };
        let engine = Jit::compile(&verified, bindings(None), config).expect("compiles");
        assert!(engine.checks().budget_dropped, "{src}");
        let mut cache = engine.cache();
        let mut w = world.clone();
        let input = Input { mem: w.mem.as_deref_mut(), ..Default::default() };
        let got = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
        assert_eq!(got, expected.0, "unroll {unroll}, {what}:\n{src}");
        assert_eq!(cache.stack(), &expected.4[..], "unroll {unroll}, {what}:\n{src}");
    }
    2
}

/// Unrolled counted loops (`codegen::counted`, "Unrolling"): every closing condition the
/// JIT unrolls, steps up and down, trip counts below, at and around the unroll factor (the
/// groups, the remainder, a loop too short for a group), bounds as immediates and as a
/// register; result, memory and executed count must be the interpreter's, with unrolling on
/// and off.
#[test]
fn unrolled_loops_agree_for_every_trip_count() {
    // (start, step, condition, bound): the loop runs body-then-test from `start`.
    let shapes: [(i64, i64, &str, i64); 8] = [
        (0, 1, "jlt", 0),
        (0, 1, "jle", 0),
        (0, 2, "jslt", 0),
        (-9, 1, "jsle", 0),
        (0, -1, "jsgt", 0),
        (0, -1, "jsge", 0),
        (0, -3, "jgt", 0),
        (0, -1, "jge", 0),
    ];
    let mut runs = 0;
    for (start, step, cond, _) in shapes {
        for trips in [1i64, 2, 7, 8, 9, 15, 16, 17, 23, 40] {
            // The bound that makes the loop run `trips` times from `start`.
            let last = start + step * trips;
            let bound = match cond {
                "jlt" | "jslt" => last,
                "jle" | "jsle" => last - 1,
                "jgt" | "jsgt" => last,
                _ => last + 1,
            };
            let bound = if step < 0 && !cond.starts_with("js") {
                // Unsigned and counting down: start high so no value wraps below 0.
                bound + 1000
            } else {
                bound
            };
            let start = if step < 0 && !cond.starts_with("js") { start + 1000 } else { start };
            for in_register in [false, true] {
                let close = if in_register {
                    format!("lddw %r2, {bound}\nloop:\n{{body}}{cond} %r3, %r2, loop")
                } else {
                    format!("loop:\n{{body}}{cond} %r3, {bound}, loop")
                };
                // The body reads mem[r3 & 63] (proven in bounds) and stores to the stack.
                let body = "mov %r4, %r3\nand %r4, 63\nadd %r4, %r1\nldxb %r5, [%r4]\n\
                            add %r0, %r5\nmul %r0, 3\nstxdw [%r10-8], %r0\nadd %r3, STEP\n"
                    .replace("STEP", &step.to_string());
                let src = format!(
                    "mov %r0, 0\nlddw %r3, {start}\n{}\nldxdw %r6, [%r10-8]\nadd %r0, %r6\nexit",
                    close.replace("{body}", &body)
                );
                runs += agree_unrolled_on_and_off(&src, &format!("{trips} trips"));
            }
        }
    }
    assert_eq!(runs, 8 * 10 * 2 * 2);
}

/// Unrolled loops entered at a constant (`codegen::counted`, "Known trip counts": the
/// entry's guard decided, a whole-loop group straight to the exit, the exit's charge a
/// constant): starts below, at and past the bound, trip counts around the unroll factor,
/// bounds a whole number of steps away and not,
/// signed and unsigned, and a loop also jumped into with another start (taken at run time
/// here: mem is 64 bytes); result, stack and executed count must be the interpreter's, with
/// unrolling on and off.
#[test]
fn loops_entered_at_a_constant_agree_for_every_trip_count() {
    let mut runs = 0;
    for cond in ["jlt", "jslt"] {
        for step in [1i64, 3, 8] {
            for start in [0i64, 5, 16] {
                for (trips, slack) in [1i64, 2, 7, 8, 9, 16, 17, 32, 40]
                    .into_iter()
                    .flat_map(|t| [(t, 0), (t, step - 1)])
                {
                    // `slack` short of a whole step: the same trip count, rounded up.
                    let bound = start + step * trips - slack;
                    for (enter, what) in [
                        (format!("mov %r3, {start}"), "falls in"),
                        (format!("mov %r3, {bound}"), "at the bound"),
                        (format!("mov %r3, {}", bound + 5), "past the bound"),
                        (format!("mov %r3, 1\njgt %r2, 10, loop\nmov %r3, {start}"), "jumped in"),
                    ] {
                        let src = format!(
                            "mov %r0, 0\n{enter}\nloop:\nmov %r4, %r3\nand %r4, 63\n\
                             add %r4, %r1\nldxb %r5, [%r4]\nadd %r0, %r5\nmul %r0, 3\n\
                             stxdw [%r10-8], %r0\nadd %r3, {step}\n{cond} %r3, {bound}, loop\n\
                             ldxdw %r6, [%r10-8]\nadd %r0, %r6\nexit"
                        );
                        runs += agree_unrolled_on_and_off(&src, &format!("{what}, {trips} trips"));
                    }
                }
            }
        }
    }
    assert_eq!(runs, 2 * 3 * 3 * 9 * 2 * 4 * 2);
}

// ---- XDP programs: packet (with variable offsets), context and stack ----

/// A random piece of an XDP body. The prologue leaves r1 = the context, r2 = data,
/// r3 = data_end with `r2 + 32 <= r3` proven, r9 = r10 - 64, eight stack words written.
/// Scalars live in r4, r5 and r8; the variable-offset piece makes pointers in r6 and r7.
fn xdp_piece() -> impl Strategy<Value = String> {
    let size = prop::sample::select(vec![("b", 1i64), ("h", 2), ("w", 4), ("dw", 8)]);
    let reg = prop::sample::select(vec![4u8, 5, 8]);
    prop_oneof![
        // A load or store inside the proven 32 bytes.
        (size.clone(), 0i64..32, reg.clone(), any::<bool>()).prop_map(|((s, n), off, r, st)| {
            let off = off.min(32 - n);
            if st {
                format!("stx{s} [%r2+{off}], %r{r}")
            } else {
                format!("ldx{s} %r{r}, [%r2+{off}]")
            }
        }),
        // A variable offset: a loaded byte masked, added, checked against data_end.
        (size.clone(), 0i64..32, 0i64..64).prop_map(|((s, n), at, mask)| {
            format!(
                "ldxb %r5, [%r2+{at}]\nand %r5, {mask}\nmov %r6, %r2\nadd %r6, %r5\nmov %r7, %r6\n\
                 add %r7, {n}\njgt %r7, %r3, +1\nldx{s} %r8, [%r6+0]"
            )
        }),
        // The context's plain fields.
        prop::sample::select(vec![12i64, 16]).prop_map(|off| format!("ldxw %r4, [%r1+{off}]")),
        // The stack through r9 (not at a fixed frame offset).
        (size, 0i64..8, reg.clone(), any::<bool>()).prop_map(|((s, _), k, r, st)| {
            let off = k * 8;
            if st {
                format!("stx{s} [%r9+{off}], %r{r}")
            } else {
                format!("ldx{s} %r{r}, [%r9+{off}]")
            }
        }),
        // Divisions: by a register made odd (proven non-zero) or by a loaded byte.
        (prop::sample::select(vec![4u8, 8]), any::<bool>()).prop_map(|(r, odd)| {
            if odd {
                format!("ldxb %r5, [%r2+3]\nor %r5, 1\ndiv %r{r}, %r5")
            } else {
                format!("ldxb %r5, [%r2+5]\nmod %r{r}, %r5")
            }
        }),
        // Arithmetic.
        (reg, any::<i32>()).prop_map(|(r, k)| format!("add %r{r}, {k}\nxor %r0, %r{r}")),
    ]
}

fn xdp_program(pieces: &[String]) -> Program {
    let mut src = String::from(
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 2\nmov %r4, %r2\nadd %r4, 32\n\
         jgt %r4, %r3, out\nmov %r4, 1\nmov %r5, 2\nmov %r8, 5\nmov %r9, %r10\nadd %r9, -64\n",
    );
    for k in 1..=8 {
        src.push_str(&format!("stdw [%r10-{}], {k}\n", 8 * k));
    }
    for p in pieces {
        src.push_str(p);
        src.push('\n');
    }
    src.push_str("out:\nexit\n");
    let insns = assemble(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    Program::from_insns(insns).with_prog_type(ProgType::Xdp)
}

#[test]
fn random_xdp_programs_agree_with_the_interpreter() {
    let tally = std::cell::RefCell::new(Tally::default());
    let strategy = (
        prop::collection::vec(xdp_piece(), 1..12),
        prop::collection::vec(any::<u8>(), 0..80),
        prop::collection::vec(any::<u8>(), abi::XDP.size as usize),
    );
    runner(600)
        .run(&strategy, |(pieces, packet, ctx)| {
            let program = xdp_program(&pieces);
            let world = World { ctx: Some(ctx), packet: Some(packet), mem: None };
            let checks =
                agree(&program, Some(ProgType::Xdp), &world).map_err(TestCaseError::fail)?;
            prop_assert!(checks.is_some(), "refused:\n{}", weir_isa::asm::listing(program.insns()));
            tally.borrow_mut().add(checks);
            Ok(())
        })
        .unwrap();
    let t = tally.into_inner();
    eprintln!("xdp: {} accesses and {} divisions dropped", t.dropped_accesses, t.dropped_divisions);
    assert_eq!(t.proven, 600);
    assert!(t.dropped_accesses >= 2000, "{}", t.dropped_accesses);
    assert!(t.dropped_divisions >= 50, "{}", t.dropped_divisions);
}

// ---- the conformance corpus ----

#[test]
fn the_conformance_corpus_agrees_with_the_interpreter() {
    let cases = weir_testkit::conformance_programs();
    assert!(cases.len() > 400, "{} cases", cases.len());
    let mut rng = weir_testkit::SplitMix64::new(5);
    let mut tally = Tally::default();
    for (name, program, mem) in &cases {
        if weir_program::validate(program).is_err() {
            continue;
        }
        for round in 0..3 {
            let mem = if round == 0 {
                mem.clone()
            } else {
                mem.iter().map(|_| rng.next_u64() as u8).collect()
            };
            let world = World { mem: Some(mem), ..World::default() };
            match agree(program, None, &world) {
                Ok(checks) => tally.add(checks),
                Err(e) => panic!("{name}: {e}"),
            }
        }
    }
    eprintln!("corpus: {} runs proven, {} accesses dropped", tally.proven, tally.dropped_accesses);
    assert!(tally.proven > 600, "{} runs proven", tally.proven);
    assert!(tally.dropped_accesses > 120, "{} accesses dropped", tally.dropped_accesses);
}

// ---- what is kept, dropped and when ----

fn byte_sum() -> Program {
    loop_program(64, 1, Op::LdxB, false, false)
}

#[test]
fn a_proven_program_keeps_no_check_its_facts_cover() {
    let world = World { mem: Some(vec![1; 64]), ..World::default() };
    let verified = prove(&byte_sum(), None, &world).unwrap();
    assert_eq!(verified.assurance(), Assurance::Proven);
    let jit =
        Jit::compile(&verified, Bindings::conformance(), weir_jit::Config::default()).unwrap();
    let checks = jit.checks();
    assert_eq!((checks.accesses_kept, checks.accesses_dropped), (0, 1));
    assert!(checks.budget_dropped);
    let mut mem = vec![1; 64];
    assert_eq!(jit.run_mem(&mut jit.cache(), &mut mem), Ok(64));

    // A division by a register proven non-zero, one not, one by an immediate (no test).
    let src = "mov %r0, 100\nldxb %r3, [%r1+0]\nor %r3, 1\ndiv %r0, %r3\nldxb %r4, [%r1+1]\n\
               mod %r0, %r4\ndiv %r0, 3\nexit";
    let program = Program::from_insns(assemble(src).unwrap());
    let verified = prove(&program, None, &world).unwrap();
    let jit =
        Jit::compile(&verified, Bindings::conformance(), weir_jit::Config::default()).unwrap();
    let checks = jit.checks();
    assert_eq!((checks.divisions_dropped, checks.divisions_kept), (1, 1));
    assert_eq!((checks.accesses_dropped, checks.accesses_kept), (2, 0));
}

#[test]
fn a_program_whose_proof_is_withheld_keeps_every_check() {
    let structural = Verified::check(&byte_sum()).unwrap();
    let jit =
        Jit::compile(&structural, Bindings::conformance(), weir_jit::Config::default()).unwrap();
    assert_eq!((jit.checks().accesses_kept, jit.checks().accesses_dropped), (1, 0));

    // Proven for XDP but bound as a socket filter: another context, so no fact applies.
    let src = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r4, %r2\nadd %r4, 1\n\
               jgt %r4, %r3, +1\nldxb %r0, [%r2+0]\nexit";
    let program = Program::from_insns(assemble(src).unwrap()).with_prog_type(ProgType::Xdp);
    let world = World { ctx: Some(vec![0; 24]), packet: Some(vec![7; 4]), mem: None };
    let verified = prove(&program, Some(ProgType::Xdp), &world).unwrap();
    let as_xdp =
        Jit::compile(&verified, bindings(Some(ProgType::Xdp)), weir_jit::Config::default())
            .unwrap();
    assert_eq!((as_xdp.checks().accesses_kept, as_xdp.checks().accesses_dropped), (0, 3));
    let other = bindings(Some(ProgType::SocketFilter));
    let as_socket = Jit::compile(&verified, other, weir_jit::Config::default()).unwrap();
    assert_eq!((as_socket.checks().accesses_kept, as_socket.checks().accesses_dropped), (3, 0));

    // Frames smaller than the proof's 512 bytes: the stack facts do not hold.
    let src = "mov %r6, %r10\nadd %r6, -512\nldxb %r0, [%r6+0]\nexit";
    let program = Program::from_insns(assemble(src).unwrap());
    let verified = prove(&program, None, &World { mem: Some(vec![]), ..World::default() }).unwrap();
    let limits = weir_program::exec::Limits { stack_size: 256, ..Default::default() };
    let small =
        Jit::compile(&verified, Bindings::conformance(), weir_jit::Config::with_limits(limits))
            .unwrap();
    assert_eq!((small.checks().accesses_kept, small.checks().accesses_dropped), (1, 0));
    let full =
        Jit::compile(&verified, Bindings::conformance(), weir_jit::Config::default()).unwrap();
    assert_eq!((full.checks().accesses_kept, full.checks().accesses_dropped), (0, 1));
}

/// A run that offers less than the proof assumed (shorter memory, a context instead of
/// memory, a short context) runs the checked code and traps exactly as the interpreter.
#[test]
fn runs_unlike_the_proofs_assumptions_take_the_checked_code() {
    let program = byte_sum();
    let proven_for = World { mem: Some(vec![1; 64]), ..World::default() };
    let verified = prove(&program, None, &proven_for).unwrap();
    for (world, traps) in [
        (World { mem: Some(vec![2; 10]), ..World::default() }, true),
        (World { mem: None, ..World::default() }, true),
        // r1 is the context then (64 bytes here, so the loop reads it whole).
        (World { ctx: Some(vec![3; 64]), mem: Some(vec![1; 64]), packet: None }, false),
    ] {
        let expected = interp_run(&program, None, &world);
        let (_, got) = jit_runs(&verified, None, &world);
        assert_eq!(expected.0.is_err(), traps, "{:?}", expected.0);
        for g in got {
            assert_eq!(g.0, expected.0);
            assert_eq!(
                (g.1, g.2, g.3),
                (expected.1.clone(), expected.2.clone(), expected.3.clone())
            );
        }
    }

    // XDP with a context shorter than its layout.
    let src = "ldxw %r0, [%r1+16]\nexit";
    let program = Program::from_insns(assemble(src).unwrap()).with_prog_type(ProgType::Xdp);
    let full = World { ctx: Some(vec![9; 24]), packet: Some(Vec::new()), mem: None };
    let verified = prove(&program, Some(ProgType::Xdp), &full).unwrap();
    let short = World { ctx: Some(vec![9; 17]), packet: Some(Vec::new()), mem: None };
    let expected = interp_run(&program, Some(ProgType::Xdp), &short);
    let (checks, got) = jit_runs(&verified, Some(ProgType::Xdp), &short);
    assert_eq!(checks.accesses_dropped, 1);
    assert!(expected.0.is_err());
    assert_eq!(got[0].0, expected.0);
    let (_, got) = jit_runs(&verified, Some(ProgType::Xdp), &full);
    assert_eq!(got[0].0.as_ref().map(|o| o.0), Ok(0x0909_0909));
}

/// `run_mem`'s inlined lean path (lean code over memory alone) takes only memory at least
/// as long as the proof assumed: a shorter one and an empty one run the checked way, and
/// every run gives the interpreter's result or trap and executed count, on one cache run
/// after run.
#[test]
fn run_mem_takes_the_lean_path_only_for_memory_the_proof_covers() {
    let program = byte_sum();
    let world = World { mem: Some(vec![1; 64]), ..World::default() };
    let verified = prove(&program, None, &world).unwrap();
    let interp = weir_interp::Interpreter::new(
        &Verified::check(&program).unwrap(),
        Bindings::conformance(),
        weir_interp::Config::default(),
    );
    let jit =
        Jit::compile(&verified, Bindings::conformance(), weir_jit::Config::default()).unwrap();
    let mut cache = jit.cache();
    let mut interp_cache = interp.cache();
    let mut traps = 0;
    for len in [64usize, 10, 65, 0, 63, 64, 200, 1] {
        let mut mem: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
        let mut expected_mem = mem.clone();
        let expected = interp.run_mem(&mut interp_cache, &mut expected_mem);
        let got = jit.run_mem(&mut cache, &mut mem);
        assert_eq!(got, expected, "{len} bytes");
        assert_eq!(cache.executed(), interp_cache.executed(), "{len} bytes");
        traps += usize::from(got.is_err());
    }
    assert_eq!(traps, 4, "the runs on fewer than 64 bytes trap");
}

/// `byte_sum` proven for 64 bytes of memory, and the proof's bound on a run's length.
fn proven_byte_sum() -> (Verified, u64) {
    let world = World { mem: Some(vec![1; 64]), ..World::default() };
    let verified = prove(&byte_sum(), None, &world).unwrap();
    let bound = verified.facts().unwrap().max_executed;
    (verified, bound)
}

/// `verified` compiled with an instruction budget of `budget`, and the interpreter with it.
fn with_budget(
    verified: &Verified,
    budget: u64,
) -> (weir_jit::JitProgram, weir_interp::Interpreter) {
    let limits = weir_program::exec::Limits { instruction_budget: budget, ..Default::default() };
    let config = weir_jit::Config::with_limits(limits);
    let jit = Jit::compile(verified, Bindings::conformance(), config).unwrap();
    let program = Program::from_insns(verified.insns().to_vec());
    let interp = weir_interp::Interpreter::new(
        &Verified::check(&program).unwrap(),
        Bindings::conformance(),
        limits,
    );
    (jit, interp)
}

/// A budget smaller than the proof's bound on a run's length keeps the budget tests, and
/// the budget runs out exactly where the interpreter's does; the executed count is exact
/// either way.
#[test]
fn the_budget_tests_go_only_when_no_run_can_exhaust_the_budget() {
    let (verified, bound) = proven_byte_sum();
    for budget in [bound, bound - 1, 100, 7, 1] {
        let (jit, interp) = with_budget(&verified, budget);
        assert_eq!(jit.checks().budget_dropped, budget >= bound, "budget {budget}");
        let (mut m1, mut m2) = (vec![1u8; 64], vec![1u8; 64]);
        let expected = interp.run_stats(&mut interp.cache(), Input::new().mem(&mut m1));
        let got = jit.run_stats(&mut jit.cache(), Input::new().mem(&mut m2));
        assert_eq!(got, expected, "budget {budget}");
    }
}

/// The budget is compiled into the code (no run writes it to the run state): programs
/// compiled with different budgets, budget-free or not, taking turns on one cache, each
/// count and run out as the interpreter does with its own budget, by the lean path
/// (`run_mem`) and the full one (`run_stats`).
#[test]
fn programs_of_different_budgets_taking_turns_on_one_cache_count_by_their_own() {
    let (verified, bound) = proven_byte_sum();
    let budgets = [bound, u64::MAX, bound + 1000, bound - 1, 50];
    let engines: Vec<_> = budgets
        .iter()
        .map(|&budget| {
            let (jit, interp) = with_budget(&verified, budget);
            (budget, jit, interp)
        })
        .collect();
    let mut cache = engines[0].1.cache();
    let mut traps = 0;
    for (n, which) in [0usize, 1, 2, 3, 0, 4, 2, 1, 3, 0].into_iter().enumerate() {
        let (budget, jit, interp) = &engines[which];
        let (mut m1, mut m2, mut m3) = (vec![3u8; 64], vec![3u8; 64], vec![3u8; 64]);
        let expected = interp.run_stats(&mut interp.cache(), Input::new().mem(&mut m1));
        let got = jit.run_stats(&mut cache, Input::new().mem(&mut m2));
        assert_eq!(got, expected, "run {n}, budget {budget}: run_stats");
        let got = jit.run_mem(&mut cache, &mut m3).map(|r0| (r0, cache.executed()));
        assert_eq!(got, expected.map(|o| (o.r0, o.executed)), "run {n}, budget {budget}: run_mem");
        traps += usize::from(got.is_err());
    }
    assert_eq!(traps, 3, "the budgets below the bound run out");
}

/// Local calls: a callee writes and reads its caller's frame through a pointer argument at a
/// variable offset, and its own frame below; unchecked, both land where the interpreter puts
/// them (the stacks after the run are compared too).
#[test]
fn callees_reach_their_callers_frames_as_the_interpreter_does() {
    let src = "mov %r6, %r1\nstdw [%r10-8], 0\nstdw [%r10-16], 0\nstdw [%r10-24], 0\n\
               stdw [%r10-32], 0\nmov %r1, %r10\nadd %r1, -32\nldxb %r2, [%r6+0]\nand %r2, 24\n\
               call local fill\nldxdw %r0, [%r10-32]\nldxdw %r3, [%r10-8]\nadd %r0, %r3\nexit\n\
               fill:\nmov %r3, %r1\nadd %r3, %r2\nstdw [%r3+0], 77\nmov %r4, %r10\nadd %r4, -64\n\
               add %r4, %r2\nstdw [%r4+0], 5\nldxdw %r0, [%r4+0]\nldxdw %r5, [%r3+0]\nadd %r0, %r5\nexit";
    let program = Program::from_insns(assemble(src).unwrap());
    let mut proven = 0;
    for first in [0u8, 8, 16, 24, 255] {
        let world = World { mem: Some(vec![first; 4]), ..World::default() };
        let checks = agree(&program, None, &world).unwrap().expect("proven");
        assert_eq!(checks.accesses_kept, 0, "{checks:?}");
        assert!(checks.accesses_dropped >= 5, "{checks:?}");
        proven += 1;
    }
    assert_eq!(proven, 5);
}

// ---- copy loops moved wide (`codegen::copy`) ----

/// A copy of `n` items of `width` bytes from `from` to `to` (`"stack+S"`: r10 - 256 + S,
/// after the 256 stack bytes are filled with a pattern; `"mem+S"`: r1 + S), then r0 = the
/// last item; the loop as clang writes it (load, store, step).
fn copy_program(from: &str, to: &str, width: i64, n: i64) -> Program {
    let size = match width {
        1 => "b",
        2 => "h",
        4 => "w",
        _ => "dw",
    };
    // The source's address in two instructions from the stack (the offset in the load:
    // a body of 8, unrolled by 16), in three from memory (a body of 9, unrolled by 4).
    let address = |reg: &str, place: &str, load: bool| {
        let (base, off) = place.split_once('+').expect("PLACE+OFFSET");
        let off: i64 = off.parse().expect("offset");
        match base {
            "stack" if load => (format!("mov {reg}, %r3\nadd {reg}, %r10"), off - 256),
            "stack" => (format!("mov {reg}, %r10\nadd {reg}, {}\nadd {reg}, %r3", off - 256), 0),
            _ => (format!("mov {reg}, %r1\nadd {reg}, {off}\nadd {reg}, %r3"), 0),
        }
    };
    let (load_at, load_off) = address("%r4", from, true);
    let (store_at, _) = address("%r6", to, false);
    let src = format!(
        "mov %r3, 0\nfill:\nmov %r4, %r10\nadd %r4, -256\nadd %r4, %r3\nmov %r5, %r3\n\
         mul %r5, 0x1e3779b1\nxor %r5, 0x5a5a\nstxdw [%r4], %r5\nadd %r3, 8\njlt %r3, 256, fill\n\
         mov %r3, 0\ncopy:\n{load_at}\nldx{size} %r5, [%r4{load_off:+}]\n{store_at}\n\
         stx{size} [%r6], %r5\nadd %r3, {width}\njlt %r3, {}, copy\nmov %r0, %r5\nexit",
        n * width
    );
    Program::from_insns(assemble(&src).unwrap_or_else(|e| panic!("{e}\n{src}")))
}

/// Copy loops over every overlap the wide moves must get right (destination below,
/// on, inside and past the source, by a group of the unrolled loop or less), every width, trip counts
/// around the unroll factor, stack to stack and memory to stack: the final stack, r0 and
/// the executed count are the interpreter's, with the wide moves on and off; and the
/// idiom is recognised (the machine code differs with them off).
#[test]
fn copy_loops_moved_wide_agree_with_the_interpreter() {
    let mut rng = weir_testkit::SplitMix64::new(12);
    let mem: Vec<u8> = (0..256).map(|_| rng.next_u64() as u8).collect();
    let world = World { mem: Some(mem), ..World::default() };
    let (mut runs, mut widened) = (0, 0);
    for width in [1i64, 2, 4, 8] {
        for n in [7i64, 8, 9, 16, 17, 20, 31, 32] {
            let len = width * n;
            let mut pairs: Vec<(String, String)> = Vec::new();
            // The stack wants aligned accesses: offsets in whole items.
            for items in [-17i64, -9, -4, -3, -1, 0, 1, 2, 3, 4, 5, 8, 15, 16, n - 1, n, n + 1] {
                let delta = items * width;
                let (src, dst) = if delta >= 0 { (64, 64 + delta) } else { (64 - delta, 64) };
                if dst + len <= 256 && src + len <= 256 {
                    pairs.push((format!("stack+{src}"), format!("stack+{dst}")));
                }
            }
            if len + 16 <= 256 {
                pairs.push(("mem+5".into(), "stack+0".into()));
                pairs.push(("mem+0".into(), "stack+16".into()));
            }
            for (from, to) in pairs {
                let program = copy_program(&from, &to, width, n);
                let Some(verified) = prove(&program, None, &world) else {
                    panic!("refused: {from} -> {to}, {width} x {n}")
                };
                let expected = interp_run(&program, None, &world);
                assert!(expected.0.is_ok(), "{from} -> {to}: {:?}", expected.0);
                let mut code = Vec::new();
                for wide_copy in [true, false] {
                    let config = weir_jit::Config { wide_copy, ..weir_jit::Config::default() };
                    let engine = Jit::compile(&verified, bindings(None), config).expect("compiles");
                    let mut cache = engine.cache();
                    let mut w = world.clone();
                    let input = Input { mem: w.mem.as_deref_mut(), ..Default::default() };
                    let got = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
                    let what = format!("{from} -> {to}, {width} x {n}, wide {wide_copy}");
                    assert_eq!(got, expected.0, "{what}");
                    assert_eq!(cache.stack(), &expected.4[..], "{what}");
                    assert_eq!(w.mem, expected.3, "{what}");
                    code.push(engine.machine_code().to_vec());
                    runs += 1;
                }
                // Every copy loop here is the idiom; one that runs fewer iterations than a
                // group (4 from memory, 16 from the stack: from 0, every run) has no group
                // to widen.
                if n >= 16 {
                    assert!(code[0] != code[1], "{from} -> {to}, {width} x {n}");
                }
                widened += usize::from(code[0] != code[1]);
            }
        }
    }
    assert!(runs >= 2 * 4 * 7 * 10, "{runs}");
    assert!(widened * 2 >= runs / 2, "{widened} of {runs}");
}

/// Long copy loops (200 to 704 bytes: many groups, then the remainder) in untyped memory,
/// whose accesses need no alignment, so the destination moves by bytes, not whole items:
/// up and down by every count that matters to the groups' overlap test (1, under a word,
/// a word, a group, inside the range, the range less one, the range, past it) and onto
/// the source, every width, trip counts a multiple of the group and not: r0 (the last
/// item), the executed count, the memory and the stack are the interpreter's. (Written for
/// a whole-range host call tried and reverted, bench/records/2026-11-29-jit-9.txt; it
/// covers the groups as well.)
#[test]
fn long_copy_loops_agree_with_the_interpreter_at_every_byte_overlap() {
    let mut rng = weir_testkit::SplitMix64::new(29);
    let mem: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
    let world = World { mem: Some(mem), ..World::default() };
    let mut runs = 0;
    for width in [1i64, 2, 4, 8] {
        for bytes in [200i64, 512, 520, 704] {
            let n = bytes / width + i64::from(width == 1 && bytes == 520);
            let len = n * width;
            let mut deltas = vec![0i64];
            for up in [1, 2, 3, width - 1, width, width + 1, 15, 16, 17, 64, 100, len / 2] {
                deltas.extend([up, -up]);
            }
            for near in [len - width, len - 1, len, len + 1, len + width] {
                deltas.extend([near, -near]);
            }
            deltas.sort_unstable();
            deltas.dedup();
            for delta in deltas {
                let (from, to) = ("mem+900".to_string(), format!("mem+{}", 900 + delta));
                let program = copy_program(&from, &to, width, n);
                let what = format!("{from} -> {to}, {width} x {n}");
                let Some(verified) = prove(&program, None, &world) else {
                    panic!("refused: {what}")
                };
                let expected = interp_run(&program, None, &world);
                assert!(expected.0.is_ok(), "{what}: {:?}", expected.0);
                let engine =
                    Jit::compile(&verified, bindings(None), weir_jit::Config::default()).unwrap();
                let mut cache = engine.cache();
                let mut w = world.clone();
                let input = Input { mem: w.mem.as_deref_mut(), ..Default::default() };
                let got = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
                assert_eq!(got, expected.0, "{what}");
                assert_eq!(w.mem, expected.3, "{what}");
                assert_eq!(cache.stack(), &expected.4[..], "{what}");
                runs += 1;
            }
        }
    }
    assert!(runs >= 4 * 4 * 25, "{runs}");
}

// ---- sum loops added wide (`codegen::reduce`) ----

/// r0 = a start value plus `n` 8-byte words from `from` (`"stack+S"`: r10 - 256 + S, after
/// the 256 stack bytes are filled with a pattern of large words, so the adds wrap;
/// `"mem+S"`: r1 + S), then mixed with the last word the loop left in r5.
fn sum_program(from: &str, n: i64) -> Program {
    let (base, off) = from.split_once('+').expect("PLACE+OFFSET");
    let off: i64 = off.parse().expect("offset");
    let at = match base {
        "stack" => format!("mov %r6, %r10\nadd %r6, {}\nadd %r6, %r3", off - 256),
        _ => format!("mov %r6, %r1\nadd %r6, {off}\nadd %r6, %r3"),
    };
    let src = format!(
        "mov %r3, 0\nfill:\nmov %r4, %r10\nadd %r4, -256\nadd %r4, %r3\nmov %r5, %r3\n\
         mul %r5, 0x1e3779b1\nlsh %r5, 29\nxor %r5, 0x5a5a\nstxdw [%r4], %r5\nadd %r3, 8\n\
         jlt %r3, 256, fill\nmov %r3, 0\nlddw %r0, 0xfedcba9876543210\nmov %r5, 0\n\
         sum:\n{at}\nldxdw %r5, [%r6]\nadd %r0, %r5\nadd %r3, 8\njlt %r3, {}, sum\n\
         mov %r7, %r5\nlsh %r7, 1\nxor %r0, %r7\nexit",
        n * 8
    );
    Program::from_insns(assemble(&src).unwrap_or_else(|e| panic!("{e}\n{src}")))
}

/// Sum loops over the stack and over memory (aligned and not), trip counts around the
/// unroll factor (8) and around the long groups' 32 words (one group of 32 that is the
/// whole loop: 32 words; two: 64; a remainder after one or two: 33, 63, 65; a multiple of
/// 16 only: 48): r0 (the wrapped sum and the last word), the executed count, the final
/// stack and memory are the interpreter's with the wide adds on and off; and the idiom is
/// recognised (the machine code differs with them off).
#[test]
fn sum_loops_added_wide_agree_with_the_interpreter() {
    let mut rng = weir_testkit::SplitMix64::new(13);
    let mem: Vec<u8> = (0..1024).map(|_| rng.next_u64() as u8).collect();
    let world = World { mem: Some(mem), ..World::default() };
    let (mut runs, mut widened) = (0, 0);
    for n in [1i64, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 96] {
        for from in ["stack+0", "stack+8", "stack+64", "mem+0", "mem+3", "mem+8"] {
            let off: i64 = from.split_once('+').and_then(|(_, o)| o.parse().ok()).unwrap_or(0);
            let room = if from.starts_with("stack") { 256 } else { 1024 };
            if off + 8 * n > room {
                continue;
            }
            let program = sum_program(from, n);
            let Some(verified) = prove(&program, None, &world) else {
                panic!("refused: {from}, {n} words")
            };
            let expected = interp_run(&program, None, &world);
            assert!(expected.0.is_ok(), "{from}: {:?}", expected.0);
            let mut code = Vec::new();
            for wide in [true, false] {
                let config = weir_jit::Config { wide_copy: wide, ..weir_jit::Config::default() };
                let engine = Jit::compile(&verified, bindings(None), config).expect("compiles");
                let mut cache = engine.cache();
                let mut w = world.clone();
                let input = Input { mem: w.mem.as_deref_mut(), ..Default::default() };
                let got = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
                let what = format!("{from}, {n} words, wide {wide}");
                assert_eq!(got, expected.0, "{what}");
                assert_eq!(cache.stack(), &expected.4[..], "{what}");
                assert_eq!(w.mem, expected.3, "{what}");
                code.push(engine.machine_code().to_vec());
                runs += 1;
            }
            // Every sum loop here is the idiom once unrolled; below 7 words the unrolled
            // guard's limit `8 * n - 56` would wrap, and the loop runs as written; at 7
            // (from 0, every run) it never fills a group of 8, and has none.
            assert_eq!(code[0] != code[1], n >= 8, "{from}, {n} words");
            widened += usize::from(code[0] != code[1]);
        }
    }
    assert!(runs >= 2 * 80, "{runs}");
    assert!(widened >= 60, "{widened}");
}

// ---- runs that start from the last run's stack (`Facts::stack_observed`) ----

/// Runs `program` (proven for memories of `mems[0]`'s length) on one JIT cache over each
/// memory in turn, every run compared with a fresh interpreter run: r0, executed count,
/// memory and the whole final stack. Lean code zeroes only the stack slots the proof says
/// a run may observe, so a slot left wrong from the last run shows here. `Ok(None)`:
/// refused; else whether the proof listed the observed slots. The same runs go through
/// `run_mem` too, on a cache of their own (its lean path does not build an `Input`).
fn agree_run_after_run(program: &Program, mems: &[Vec<u8>]) -> Result<Option<bool>, String> {
    let first = World { mem: mems.first().cloned(), ..World::default() };
    let Some(verified) = prove(program, None, &first) else { return Ok(None) };
    let engine = Jit::compile(&verified, bindings(None), weir_jit::Config::default())
        .map_err(|e| e.to_string())?;
    let mut cache = engine.cache();
    let mut mem_cache = engine.cache();
    for (n, mem) in mems.iter().enumerate() {
        let world = World { mem: Some(mem.clone()), ..World::default() };
        let expected = interp_run(program, None, &world);
        let mut got_mem = mem.clone();
        let input = Input { mem: Some(&mut got_mem), ..Default::default() };
        let outcome = engine.run_stats(&mut cache, input).map(|o| (o.r0, o.executed));
        let mut mem_mem = mem.clone();
        let mem_outcome = engine.run_mem(&mut mem_cache, &mut mem_mem);
        let mem_outcome = mem_outcome.map(|r0| (r0, mem_cache.executed()));
        for (how, outcome, got_mem) in
            [("run_stats", outcome, &got_mem), ("run_mem", mem_outcome, &mem_mem)]
        {
            if outcome != expected.0 || Some(got_mem) != expected.3.as_ref() {
                return Err(format!(
                    "run {n}: jit ({how}) {outcome:?}, interpreter {:?}",
                    expected.0
                ));
            }
        }
        for (how, stack) in [("run_stats", cache.stack()), ("run_mem", mem_cache.stack())] {
            if stack != expected.4.as_slice() {
                let at = stack.iter().zip(&expected.4).position(|(a, b)| a != b);
                return Err(format!(
                    "run {n} ({how}): final stack differs at byte {at:?} of {}\n{}",
                    expected.4.len(),
                    weir_isa::asm::listing(program.insns())
                ));
            }
        }
    }
    Ok(Some(verified.facts().is_some_and(|f| f.stack_observed.is_some())))
}

#[test]
fn runs_on_one_cache_agree_whatever_the_last_run_left_on_the_stack() {
    // No helper calls (lean code, the only reader of `Facts::stack_observed`, has none).
    let body = EbpfGen {
        stray_lddw_high: false,
        helper_ids: vec![5],
        helper_weight: 0,
        zero_unused: true,
        len: 1..24,
        lddw_filler: 1.0,
        end_with_exit: true,
    }
    .slots();
    let strategy = (body, 8usize..72, prop::collection::vec(any::<u8>(), 4 * 72));
    let listed = std::cell::Cell::new(0u32);
    runner(3000)
        .run(&strategy, |(body, len, bytes)| {
            let mems: Vec<Vec<u8>> = bytes.chunks(72).map(|c| c[..len].to_vec()).collect();
            // The preamble's registers, not its stack words: the body's stores and loads,
            // some behind branches on the memory, are all the stack sees.
            let mut insns: Vec<Insn> =
                preamble().into_iter().filter(|i| i.op != Op::StDw).collect();
            insns.extend(tame(body, len as i16));
            let program = Program::from_insns(insns);
            if agree_run_after_run(&program, &mems).map_err(TestCaseError::fail)? == Some(true) {
                listed.set(listed.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    eprintln!("run after run: {} proofs listed the observed slots", listed.get());
    assert!(listed.get() >= 200, "only {} proofs listed the observed slots", listed.get());
}

/// Programs whose stack use depends on the input: a slot written on one path only, then
/// read (observed: it must read 0 when unwritten), or left as the exit finds it; a write
/// at a variable offset; and the benchmark's copy, which writes every byte it reads.
#[test]
fn stack_written_on_some_paths_only_reads_as_the_interpreter_says() {
    let programs = [
        // Slot -8 written when mem[0] is odd, then read: observed.
        "ldxb %r2, [%r1]\nand %r2, 1\njeq %r2, 0, +1\nstxdw [%r10-8], %r1\nldxdw %r0, [%r10-8]\nexit",
        // Slot -16 written when mem[0] is odd, never read: the final stack shows it.
        "mov %r0, 0\nldxb %r2, [%r1]\nand %r2, 1\njeq %r2, 0, +1\nstdw [%r10-16], 7\nstdw [%r10-8], 1\nexit",
        // A write at a variable offset (mem[0] & 8), then a read of both words.
        "ldxb %r2, [%r1]\nand %r2, 8\nmov %r3, %r10\nadd %r3, -16\nadd %r3, %r2\nstdw [%r3], 5\nldxdw %r0, [%r10-16]\nldxdw %r4, [%r10-8]\nadd %r0, %r4\nexit",
        // Every byte written before it is read: nothing observed.
        "mov %r3, 0\ncopy:\nmov %r4, %r1\nadd %r4, %r3\nldxdw %r5, [%r4]\nmov %r6, %r10\nadd %r6, -64\nadd %r6, %r3\nstxdw [%r6], %r5\nadd %r3, 8\njlt %r3, 64, copy\nldxdw %r0, [%r10-64]\nexit",
    ];
    let mems: Vec<Vec<u8>> = [1u8, 0, 9, 8, 0, 1]
        .iter()
        .map(|&b| (0..64).map(|i| b.wrapping_add(i)).collect())
        .collect();
    for source in programs {
        let program = Program::from_insns(assemble(source).expect("assembles"));
        let listed = agree_run_after_run(&program, &mems).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(listed, Some(true), "proven with the observed slots listed:\n{source}");
    }
    // The facts themselves: the first three observe their slots, the copy none.
    let observed = |source: &str| {
        let program = Program::from_insns(assemble(source).expect("assembles"));
        let world = World { mem: Some(vec![0; 64]), ..World::default() };
        let verified = prove(&program, None, &world).expect("proven");
        verified.facts().and_then(|f| f.stack_observed.clone()).expect("listed")[0]
    };
    // By byte: bit i is the byte at fp-(i+1).
    assert_eq!(observed(programs[0]), 0xff);
    assert_eq!(observed(programs[1]), 0xff00);
    assert_eq!(observed(programs[2]), 0xffff);
    assert_eq!(observed(programs[3]), 0);
}

/// Two proven programs of one stack shape taking turns on one cache, through `run_mem`'s
/// lean path: the one that writes deeper leaves bytes below where the other ever writes,
/// so the other's next run must not take the steady case (`lean_fire`: a clean stack
/// below its own reach, only its observed slots zeroed). Every run's r0, executed count
/// and final stack agree with a fresh interpreter run.
#[test]
fn lean_programs_taking_turns_on_one_cache_each_start_from_a_clean_stack() {
    let sources = [
        // Writes slots -64 and -8, observes none.
        "stdw [%r10-64], 7\nstdw [%r10-8], 9\nmov %r0, 0\nexit",
        // Slot -8 written when mem[0] is odd, then read: observed; writes nothing deeper.
        "ldxb %r2, [%r1]\nand %r2, 1\njeq %r2, 0, +1\nstxdw [%r10-8], %r1\nldxdw %r0, [%r10-8]\nexit",
    ];
    lean_turns_against_interpreter(&sources, &[0, 1, 1, 0, 0, 1, 0, 1]);
}

/// Proven lean programs (`sources`, no budget check) run through `run_mem` on one cache
/// in the order `turns` gives (indices into `sources`) over 16 zero bytes of memory: every
/// run's r0, executed count and final stack agree with a fresh interpreter run.
fn lean_turns_against_interpreter(sources: &[&str], turns: &[usize]) {
    let mem = vec![0u8; 16];
    let world = World { mem: Some(mem.clone()), ..World::default() };
    let engines: Vec<(Program, weir_jit::JitProgram)> = sources
        .iter()
        .map(|source| {
            let program = Program::from_insns(assemble(source).expect("assembles"));
            let verified = prove(&program, None, &world).expect("proven");
            let jit = Jit::compile(&verified, bindings(None), weir_jit::Config::default())
                .expect("compiles");
            assert!(jit.checks().budget_dropped, "lean code:\n{source}");
            (program, jit)
        })
        .collect();
    let mut cache = engines[0].1.cache();
    for (n, &which) in turns.iter().enumerate() {
        let (program, jit) = &engines[which];
        let expected = interp_run(program, None, &world);
        let mut got_mem = mem.clone();
        let got = jit.run_mem(&mut cache, &mut got_mem).map(|r0| (r0, cache.executed()));
        assert_eq!(got, expected.0, "run {n} (program {which})");
        assert_eq!(cache.stack(), expected.4.as_slice(), "run {n} (program {which}): stack");
    }
}

/// Lean programs taking turns on one cache where one writes a slot inside the range the
/// other writes but never that slot itself (a gap: slots -24 and -8, not -16), or the other
/// half of a slot it writes in part (4 bytes of -8): the other's bytes there are no part
/// of this program's runs, so its next run starts from a stack the last run of another
/// program left, which the steady case (`lean_fire`) must not trust. Every run's r0,
/// executed count and final stack agree with a fresh interpreter run.
#[test]
fn lean_programs_taking_turns_clear_what_the_other_wrote_between_their_own_slots() {
    let sources = [
        // Writes slots -24 and -8, observes none.
        "stdw [%r10-24], 7\nstdw [%r10-8], 9\nmov %r0, 0\nexit",
        // Writes slot -16 and all of slot -8.
        "stdw [%r10-16], 5\nstdw [%r10-8], -1\nmov %r0, 1\nexit",
        // Writes bytes -4..-1 only: of slot -8, the half -8..-5 is never written.
        "stw [%r10-4], 3\nmov %r0, 2\nexit",
    ];
    lean_turns_against_interpreter(&sources, &[0, 1, 0, 0, 2, 1, 2, 2, 0, 1, 0]);
}

/// The benchmark's stack-copy writes every stack byte it reads, on every path, before its
/// exit: its runs need no zeroing at all.
#[test]
fn the_benchmark_stack_copy_observes_no_stack_slot() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/programs/stack-copy.s");
    let source = std::fs::read_to_string(path).expect("bench/programs/stack-copy.s");
    let program = Program::from_insns(assemble(&source).expect("assembles"));
    let world = World { mem: Some(vec![0; 1508]), ..World::default() };
    let verified = prove(&program, None, &world).expect("proven");
    assert_eq!(verified.facts().and_then(|f| f.stack_observed.clone()), Some(vec![0; 8]));
    let mems: Vec<Vec<u8>> = (0..3u8).map(|k| (0..1508).map(|i| (i as u8) ^ k).collect()).collect();
    assert_eq!(agree_run_after_run(&program, &mems), Ok(Some(true)));
}
