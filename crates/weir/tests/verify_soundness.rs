//! Soundness on typed programs: the random XDP, tc and socket-filter programs of
//! `verify_kernel` (those without map lookups) that the verifier accepts run on the
//! interpreter with random packets and contexts; at every executed instruction one of the
//! states the verifier kept there covers every register whose value can still matter
//! (context, packet and stack pointers included, at their guest addresses), and no run
//! traps on memory.

use weir::isa::ebpf::Op;
use weir::verifier::state::{Frame, Kind, Reg};
use weir_interp::{guest, Config, Input, Interpreter};
use weir_program::{TrapCode, Verified};
use weir_testkit::SplitMix64;

/// The concrete addresses the verifier's pointer kinds stand for in one run.
struct Bases {
    stack_top: u64,
    packet_end: u64,
}

fn covers(reg: &Reg, value: u64, bases: &Bases) -> bool {
    let at = |base: u64| reg.var.contains(value.wrapping_sub(base).wrapping_sub(reg.off as u64));
    match reg.kind {
        Kind::NotInit => true,
        Kind::Scalar => reg.var.contains(value),
        Kind::Ctx => at(guest::CTX_BASE),
        // With no span the packet's data (and metadata) start at its first byte.
        Kind::Packet | Kind::PacketMeta => at(guest::PACKET_BASE),
        Kind::PacketEnd => value == bases.packet_end,
        Kind::Stack if reg.aux == 0 => at(bases.stack_top),
        _ => true,
    }
}

fn covered(frame: &Frame, regs: &[u64; 16], precise: u16, bases: &Bases) -> bool {
    (0..11).all(|r| precise & (1 << r) == 0 || covers(&frame.regs[r], regs[r], bases))
}

#[test]
fn typed_programs_stay_inside_their_proofs() {
    let mut rng = SplitMix64::new(0x50d0_0e55);
    let (mut accepted, mut runs) = (0, 0);
    for case in 0..8000 {
        let p = crate::verify_kernel::program(&mut rng);
        if !p.relocations().is_empty() || p.insns().iter().any(|i| i.op == Op::Call && i.imm == 1) {
            continue;
        }
        let options = weir::VerifyOptions { record_states: true, ..Default::default() };
        let Ok(proof) = weir::verify(&p, &options) else { continue };
        accepted += 1;
        let prog_type = p.prog_type().expect("typed");
        let verified = Verified::structural(p.clone()).unwrap();
        let interp =
            Interpreter::new(&verified, weir_helpers::bindings(prog_type), Config::default());
        let mut cache = interp.cache();
        for _ in 0..3 {
            let mut packet: Vec<u8> = (0..rng.below_usize(64)).map(|_| rng.u8()).collect();
            let layout = prog_type.context_layout();
            let mut ctx: Vec<u8> = (0..layout.size).map(|_| rng.u8()).collect();
            let bases = Bases {
                stack_top: interp.stack_top(),
                packet_end: guest::PACKET_BASE + packet.len() as u64,
            };
            let mut env = weir_helpers::Env::new(Vec::new(), 0);
            let mut violation = None;
            let input = Input::new().ctx(&mut ctx).packet(&mut packet).env(&mut env);
            let outcome = interp.run_observed(&mut cache, input, |pc, regs| {
                if violation.is_some() {
                    return;
                }
                let precise = proof.precise.get(pc).copied().unwrap_or(u16::MAX);
                let states = proof.states.get(pc).map_or(&[][..], Vec::as_slice);
                if !states.iter().any(|f| covered(f, regs, precise, &bases)) {
                    violation = Some(format!(
                        "at {pc}: {:x?} in none of {} states",
                        &regs[..11],
                        states.len()
                    ));
                }
            });
            runs += 1;
            let listing = || weir::isa::asm::listing(p.insns());
            if let Some(v) = violation {
                panic!("case {case} ({prog_type}): {v}\n{}", listing());
            }
            if let Err(trap) = outcome {
                assert!(
                    matches!(trap.code, TrapCode::HelperFailed),
                    "case {case} ({prog_type}): accepted, but trapped: {trap}\n{}",
                    listing()
                );
            }
        }
    }
    assert!(accepted >= 1000, "{accepted} accepted");
    println!("typed soundness: {accepted} programs accepted, {runs} runs checked");
}
