//! Soundness: for every program the verifier accepts, every concrete run (the reference
//! interpreter, random memory) stays inside what the verifier proved. At each executed
//! instruction, one of the abstract states the verifier kept there must contain the
//! concrete value of every register whose value can still matter (`Proof::precise`); and no accepted program traps on a memory access.

use proptest::prelude::*;
use weir_interp::{guest, Config, Input, Interpreter};
use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::Bindings;
use weir_program::{Program, TrapCode, Verified};
use weir_testkit::ebpf_gen::EbpfGen;
use weir_verifier::state::{Frame, Kind, Reg};
use weir_verifier::{verify, Options};

/// Whether the abstract register covers the concrete value (pointers: relative to the base
/// the interpreter gives their region; kinds without a known base are not checked).
fn covers(reg: &Reg, value: u64, mem_base: u64, stack_top: u64) -> bool {
    let relative =
        |base: u64| reg.var.contains(value.wrapping_sub(base).wrapping_sub(reg.off as u64));
    match reg.kind {
        Kind::NotInit => true,
        Kind::Scalar => reg.var.contains(value),
        Kind::Mem if reg.ref_id == 0 => relative(mem_base),
        Kind::Stack if reg.aux == 0 => relative(stack_top),
        _ => true,
    }
}

/// Every register pruning compares covered (a dead one, or a scalar whose value can no
/// longer matter for safety, cannot change what the verifier proves).
fn state_covers(frame: &Frame, regs: &[u64; 16], live: u16, mem_base: u64, stack_top: u64) -> bool {
    (0..11).all(|r| live & (1 << r) == 0 || covers(&frame.regs[r], regs[r], mem_base, stack_top))
}

/// Runs `program` on `mem` if the verifier accepts it; `Err` describes a violation.
/// `Ok(true)` when it was accepted (and checked).
fn check(program: &Program, mem: &[u8]) -> Result<bool, String> {
    let options = Options {
        memory_len: Some(mem.len() as u64),
        helpers: Some(vec![5]),
        record_states: true,
        budget: 200_000,
        ..Options::default()
    };
    let Ok(proof) = verify(program, &options) else { return Ok(false) };
    let verified = Verified::structural(program.clone()).map_err(|e| e.to_string())?;
    let interp = Interpreter::new(&verified, Bindings::conformance(), Config::default());
    let mut cache = interp.cache();
    let mut mem = mem.to_vec();
    let mem_base = if mem.is_empty() { 0 } else { guest::MEM_BASE };
    let stack_top = interp.stack_top();
    let mut violation: Option<String> = None;
    let outcome = interp.run_observed(&mut cache, Input::new().mem(&mut mem), |pc, regs| {
        if violation.is_some() {
            return;
        }
        let states = proof.states.get(pc).map_or(&[][..], Vec::as_slice);
        let live = proof.precise.get(pc).copied().unwrap_or(u16::MAX);
        if !states.iter().any(|f| state_covers(f, regs, live, mem_base, stack_top)) {
            let shown: Vec<String> = states
                .iter()
                .take(3)
                .map(|f| format!("{:?}", f.regs.map(|r| r.to_string())))
                .collect();
            violation = Some(format!(
                "at {pc}: concrete {:x?} is in none of the {} states kept there: {}",
                &regs[..11],
                states.len(),
                shown.join(" / ")
            ));
        }
    });
    if let Some(v) = violation {
        return Err(v);
    }
    match outcome {
        Ok(_) => Ok(true),
        Err(trap) if trap.code == TrapCode::HelperFailed => Ok(true),
        Err(trap) => Err(format!("accepted, but the run trapped: {trap}")),
    }
}

/// Registers and stack written first, so that random bodies are often accepted.
fn preamble() -> Vec<Insn> {
    let mut v = Vec::new();
    for r in 0..10u8 {
        if r != 1 && r != 2 {
            v.push(Insn::new(Op::Mov64Imm, r, 0, 0, i64::from(r) * 3 - 7));
        }
    }
    for k in 1..=8i16 {
        v.push(Insn::new(Op::StDw, 10, 0, -8 * k, i64::from(k)));
    }
    v
}

/// Makes a random body likelier to pass: no early exits or unconditional jumps (the code
/// after them would be unreachable), forward conditional jumps, no division by a constant
/// 0, memory accesses through r10 (into the written slots) or r1 (inside 64 bytes).
fn tame(body: Vec<Insn>) -> Vec<Insn> {
    let n = body.len();
    body.into_iter()
        .enumerate()
        .map(|(pc, mut insn)| {
            let spec = insn.op.spec();
            let operands = spec.map(|s| s.operands);
            use weir_isa::ebpf::Operands as O;
            match operands {
                Some(O::JmpOff | O::JmpImm | O::CallLocal | O::CallReg | O::Nothing) if pc + 1 < n => {
                    return Insn::new(Op::Mov64Imm, 0, 0, 0, insn.imm);
                }
                Some(O::DstImmOff | O::DstSrcOff) => {
                    let room = (n - pc - 1).max(1) as i16;
                    insn.off = insn.off.rem_euclid(room);
                }
                Some(O::DstImm)
                    if insn.imm == 0
                        && matches!(spec.map(|s| s.mnemonic), Some(m) if m.starts_with("div") || m.starts_with("mod") || m.starts_with("sdiv") || m.starts_with("smod")) =>
                {
                    insn.imm = 3;
                }
                Some(O::Load | O::StoreImm | O::StoreReg) => {
                    let size = insn.op.mem_size().map_or(8, |s| s.bytes() as i16);
                    let base = if insn.off % 2 == 0 { 10 } else { 1 };
                    let off = if base == 10 { -8 * (1 + insn.off.rem_euclid(8)) } else { insn.off.rem_euclid(64 - size + 1) };
                    if operands == Some(O::Load) {
                        insn.src = base;
                    } else {
                        insn.dst = base;
                    }
                    insn.off = off;
                }
                _ => {}
            }
            insn
        })
        .collect()
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

#[test]
fn random_programs_stay_inside_their_proof() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 3000,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let accepted = std::cell::Cell::new(0u32);
    let strategy = (body_gen(), prop::collection::vec(any::<u8>(), 64));
    runner
        .run(&strategy, |(body, mem)| {
            let mut insns = preamble();
            insns.extend(tame(body));
            let program = Program::from_insns(insns);
            match check(&program, &mem) {
                Ok(true) => accepted.set(accepted.get() + 1),
                Ok(false) => {}
                Err(e) => {
                    return Err(TestCaseError::fail(format!(
                        "{e}\n{}",
                        weir_isa::asm::listing(program.insns())
                    )))
                }
            }
            Ok(())
        })
        .unwrap();
    // The property means something only if many programs get through.
    assert!(accepted.get() >= 300, "only {} of 3000 random programs accepted", accepted.get());
}

#[test]
fn the_conformance_corpus_stays_inside_its_proofs() {
    let cases = weir_testkit::conformance_programs();
    assert!(cases.len() > 400, "{} cases", cases.len());
    let mut rng = weir_testkit::SplitMix64::new(7);
    let mut accepted = 0;
    for (name, program, mem) in &cases {
        let mut inputs = vec![mem.clone()];
        for _ in 0..4 {
            inputs.push(mem.iter().map(|_| rng.next_u64() as u8).collect());
        }
        for input in &inputs {
            match check(program, input) {
                Ok(true) => accepted += 1,
                Ok(false) => {}
                Err(e) => panic!("{name}: {e}"),
            }
        }
    }
    assert!(accepted > 1500, "{accepted} accepted runs");
}
