//! The verifier against the Linux verifier on random programs (root only; `SKIPPED:`
//! elsewhere): typed programs drawn from the opcode table, made likelier to pass (registers
//! and stack written first, forward jumps, memory through the stack and the context), each
//! loaded into the kernel with the same type. weir must accept nothing the kernel refuses,
//! except where its proof shows the instruction the kernel objects to as dead code (weir's
//! bounds are sharper than the kernel's in places, so it explores fewer paths); where weir
//! is stricter the cases are counted and, with `WEIR_VERIFY_SHOW=1`, printed.

use weir::isa::ebpf::{Insn, Op, Operands, OPCODES};
use weir::{ProgType, Program};
use weir_program::{MapSpec, MapType, RelocTarget, Relocation};
use weir_testkit::SplitMix64;

const PROGRAMS: usize = 10000;

fn small(rng: &mut SplitMix64) -> i64 {
    match rng.below(4) {
        0 => rng.below(8) as i64,
        1 => -(rng.below(8) as i64),
        2 => i64::from(rng.u32() as i32),
        _ => [0, 1, 7, 8, 31, 32, 63, 64, 255, -1][rng.below_usize(10)],
    }
}

/// A random instruction shaped to have a chance: forward jumps inside `room`, memory
/// through r10 (written slots) or the context in r6.
fn insn(rng: &mut SplitMix64, room: usize) -> Insn {
    loop {
        let spec = &OPCODES[rng.below_usize(OPCODES.len())];
        let reg = |rng: &mut SplitMix64| rng.below(10) as u8;
        let (dst, src) = (reg(rng), reg(rng));
        let op = spec.op;
        let insn = match spec.operands {
            Operands::DstImm => Insn::new(op, dst, 0, 0, small(rng)),
            Operands::DstSrc | Operands::Dst if dst == 6 => continue,
            Operands::DstSrc => Insn::new(op, dst, src, 0, 0),
            Operands::Dst => Insn::new(op, dst, 0, 0, 0),
            Operands::DstImmOff if room > 0 => {
                Insn::new(op, dst, 0, rng.below(room as u64) as i16, small(rng))
            }
            Operands::DstSrcOff if room > 0 => {
                Insn::new(op, dst, src, rng.below(room as u64) as i16, 0)
            }
            Operands::Load | Operands::StoreImm | Operands::StoreReg => {
                let size = op.mem_size().map_or(8, |s| s.bytes() as i16);
                let (base, off) = if rng.chance(70) {
                    (10, -8 * (1 + rng.below(4) as i16))
                } else {
                    (6, 4 * rng.below(6) as i16)
                };
                let off = off - off.rem_euclid(size);
                match spec.operands {
                    Operands::Load => Insn::new(op, dst, base, off, 0),
                    Operands::StoreImm => Insn::new(op, base, 0, off, small(rng)),
                    _ => Insn::new(op, base, src, off, 0),
                }
            }
            Operands::CallImm if op == Op::Call => {
                Insn::new(op, 0, 0, 0, [5, 7, 8][rng.below_usize(3)])
            }
            _ => continue,
        };
        if insn.dst == 10 && spec.operands != Operands::StoreImm {
            continue;
        }
        return insn;
    }
}

/// The maps every program may use: a hash and an array, 4-byte keys, 8-byte values.
fn maps() -> Vec<MapSpec> {
    let spec = |name: &str, map_type| MapSpec {
        name: name.into(),
        map_type,
        key_size: 4,
        value_size: 8,
        max_entries: 4,
        flags: 0,
    };
    let ringbuf = MapSpec {
        name: "rb".into(),
        map_type: MapType::RingBuf,
        key_size: 0,
        value_size: 0,
        max_entries: 4096,
        flags: 0,
    };
    vec![spec("h", MapType::Hash), spec("a", MapType::Array), ringbuf]
}

/// A ring buffer reservation, its null check or its release sometimes missing, a write
/// into it sometimes past its size.
fn ringbuf_snippet(rng: &mut SplitMix64, p: &mut Vec<Insn>, relocs: &mut Vec<Relocation>) {
    let size = [8i64, 16][rng.below_usize(2)];
    relocs.push(Relocation { slot: p.len(), target: RelocTarget::Map { map: 2 } });
    p.push(Insn::new(Op::LddwMapIdx, 1, 0, 0, 2));
    p.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
    p.extend([
        Insn::new(Op::Mov64Imm, 2, 0, 0, size),
        Insn::new(Op::Mov64Imm, 3, 0, 0, 0),
        Insn::new(Op::Call, 0, 0, 0, 131),
        Insn::new(Op::Mov64Reg, 9, 0, 0, 0),
    ]);
    let checked = rng.chance(85);
    let released = rng.chance(85);
    let off = [0i16, 8, 16][rng.below_usize(3)];
    let tail = 1 + i16::from(released) * 3;
    if checked {
        p.push(Insn::new(Op::Jeq64Imm, 9, 0, tail, 0));
    }
    p.push(Insn::new(Op::StDw, 9, 0, off, 7));
    if released {
        let helper = [132, 133][rng.below_usize(2)];
        p.extend([
            Insn::new(Op::Mov64Reg, 1, 9, 0, 0),
            Insn::new(Op::Mov64Imm, 2, 0, 0, 0),
            Insn::new(Op::Call, 0, 0, 0, helper),
        ]);
    }
}

/// A packet access, sometimes past what its check proves: `r4 = data + k; if r4 > end
/// skip; load at data + off`.
fn packet_snippet(rng: &mut SplitMix64, out: &mut Vec<Insn>) {
    let k = rng.below(24) as i64;
    let size = [1i16, 2, 4, 8][rng.below_usize(4)];
    let off = rng.below(24) as i16;
    let load = [Op::LdxB, Op::LdxH, Op::LdxW, Op::LdxDw][size.trailing_zeros() as usize];
    let cmp = [Op::Jgt64Reg, Op::Jge64Reg][rng.below_usize(2)];
    out.extend([
        Insn::new(Op::Mov64Reg, 4, 7, 0, 0),
        Insn::new(Op::Add64Imm, 4, 0, 0, k),
        Insn::new(cmp, 4, 8, 1, 0),
        Insn::new(load, 5, 7, off, 0),
    ]);
}

/// A map lookup, its null check sometimes missing, the value read at some offset.
fn map_snippet(rng: &mut SplitMix64, p: &mut Vec<Insn>, relocs: &mut Vec<Relocation>) {
    let map = rng.below_usize(2);
    p.push(Insn::new(Op::StW, 10, 0, -4, rng.below(6) as i64));
    relocs.push(Relocation { slot: p.len(), target: RelocTarget::Map { map } });
    p.push(Insn::new(Op::LddwMapIdx, 1, 0, 0, map as i64));
    p.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
    p.extend([
        Insn::new(Op::Mov64Reg, 2, 10, 0, 0),
        Insn::new(Op::Add64Imm, 2, 0, 0, -4),
        Insn::new(Op::Call, 0, 0, 0, 1),
    ]);
    let off = [0i16, 4, 8][rng.below_usize(3)];
    if rng.chance(80) {
        p.push(Insn::new(Op::Jeq64Imm, 0, 0, 1, 0));
    }
    p.push(Insn::new(Op::LdxW, 5, 0, off, 0));
}

pub(crate) fn program(rng: &mut SplitMix64) -> Program {
    let prog_type = [ProgType::Xdp, ProgType::SchedCls, ProgType::SocketFilter][rng.below_usize(3)];
    let mut insns = vec![Insn::new(Op::Mov64Reg, 6, 1, 0, 0)];
    for r in [0u8, 1, 2, 3, 4, 5, 7, 8, 9] {
        insns.push(Insn::new(Op::Mov64Imm, r, 0, 0, small(rng)));
    }
    for k in 1..=4i16 {
        insns.push(Insn::new(Op::StDw, 10, 0, -8 * k, small(rng)));
    }
    // Direct packet access: data in r7, data_end in r8 (not for socket filters).
    let packet = prog_type != ProgType::SocketFilter && rng.chance(50);
    if packet {
        let (data, end) = if prog_type == ProgType::Xdp { (0, 4) } else { (76, 80) };
        insns.push(Insn::new(Op::LdxW, 7, 6, data, 0));
        insns.push(Insn::new(Op::LdxW, 8, 6, end, 0));
    }
    let mut relocs = Vec::new();
    let len = 1 + rng.below_usize(16);
    for i in 0..len {
        let room = len - i - 1;
        if packet && rng.chance(15) {
            packet_snippet(rng, &mut insns);
            continue;
        }
        if rng.chance(8) {
            map_snippet(rng, &mut insns, &mut relocs);
            continue;
        }
        if prog_type != ProgType::SocketFilter && rng.chance(4) {
            ringbuf_snippet(rng, &mut insns, &mut relocs);
            continue;
        }
        if rng.chance(4) {
            // A call to the function after the main one (patched below).
            insns.push(Insn::new(Op::Mov64Reg, 1, 10, 0, 0));
            insns.push(Insn::new(Op::Add64Imm, 1, 0, 0, -8 * (1 + rng.below(4) as i64)));
            insns.push(Insn::new(Op::CallLocal, 0, 0, 0, -1));
            continue;
        }
        let insn = insn(rng, room);
        insns.push(insn);
        if insn.op.is_lddw() {
            insns.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
        }
    }
    insns.push(Insn::new(Op::Mov64Imm, 0, 0, 0, 0));
    insns.push(Insn::new(Op::Exit, 0, 0, 0, 0));
    // The called function: reads the caller's stack through r1, uses a frame of its own.
    let func = insns.len();
    if insns.iter().any(|i| i.op == Op::CallLocal) {
        let off = [0i16, 4, 8, -8][rng.below_usize(4)];
        insns.extend([
            Insn::new(Op::LdxDw, 0, 1, off, 0),
            Insn::new(Op::StDw, 10, 0, -8 * (1 + rng.below(8) as i16), 1),
            Insn::new(Op::Exit, 0, 0, 0, 0),
        ]);
    }
    for (pc, insn) in insns.iter_mut().enumerate().take(func) {
        if insn.op == Op::CallLocal {
            insn.imm = func as i64 - pc as i64 - 1;
        }
    }
    let mut p = Program::from_insns(insns).with_prog_type(prog_type);
    for m in maps() {
        p.add_map(m);
    }
    for r in relocs {
        p.add_relocation(r);
    }
    p
}

/// Whether the proof leaves an instruction unreached.
fn has_dead_code(p: &Program, proof: &weir::Proof) -> bool {
    p.insns()
        .iter()
        .enumerate()
        .any(|(pc, i)| i.op != Op::LddwHigh && !proof.facts().get(pc).reached)
}

#[test]
fn random_programs_get_the_kernels_verdict_or_a_stricter_one() {
    if let Err(reason) = weir_sys::kernel::available() {
        println!("SKIPPED: random_programs_get_the_kernels_verdict_or_a_stricter_one: {reason}");
        return;
    }
    let show = std::env::var_os("WEIR_VERIFY_SHOW").is_some();
    let mut rng = SplitMix64::new(0x7e51f1e5);
    let specs = maps();
    let kernel_maps = weir_testkit::kernel_object::create_maps(specs.iter().map(|m| (m, None)))
        .expect("maps in the kernel");
    let (mut both, mut kernel_only, mut neither, mut dead_code) = (0, 0, 0, 0);
    let (mut lookups, mut packets, mut calls, mut rings) = (0usize, 0usize, 0usize, 0usize);
    let mut unsafe_accepted = Vec::new();
    for case in 0..PROGRAMS {
        let p = program(&mut rng);
        let ours = weir::verify(&p, &weir::VerifyOptions::default());
        let theirs = weir_testkit::kernel_object::load(&p, &kernel_maps);
        let listing = || weir::isa::asm::listing(p.insns());
        match (&ours, &theirs) {
            (Ok(_), Ok(_)) => {
                both += 1;
                let uses = |op: Op, imm: i64| p.insns().iter().any(|i| i.op == op && i.imm == imm);
                lookups += usize::from(uses(Op::Call, 1));
                packets += usize::from(
                    p.insns().iter().any(|i| i.op == Op::Mov64Reg && i.src == 7 && i.dst == 4),
                );
                calls += usize::from(p.insns().iter().any(|i| i.op == Op::CallLocal));
                rings += usize::from(uses(Op::Call, 131));
            }
            (Err(e), Ok(_)) => {
                kernel_only += 1;
                if show {
                    println!(
                        "case {case} ({}): weir stricter: {e}\n{}",
                        p.prog_type().unwrap(),
                        listing()
                    );
                }
            }
            // The kernel explores a path weir's domain proves infeasible (weir's bounds
            // are sharper in places) and refuses an instruction on it: weir's proof shows
            // that code as never reached. Anything else is a real disagreement.
            (Ok(proof), Err(_)) if has_dead_code(&p, proof) => dead_code += 1,
            (Ok(_), Err(k)) => unsafe_accepted.push(format!(
                "case {case} ({}): kernel: {k}\n{}",
                p.prog_type().unwrap(),
                listing()
            )),
            (Err(_), Err(_)) => neither += 1,
        }
    }
    println!(
        "random programs: {both} accepted by both ({lookups} with map lookups, {packets} with packet \
         checks, {calls} with calls, {rings} with ring buffer reservations), {kernel_only} by the kernel only, {neither} by neither, {dead_code} by weir only \
         with code it proved dead, {} by weir only otherwise",
        unsafe_accepted.len()
    );
    assert!(lookups >= 50 && packets >= 50, "{lookups} lookups, {packets} packet checks accepted");
    assert!(calls >= 50 && rings >= 20, "{calls} calls, {rings} ring buffer reservations accepted");
    assert!(
        unsafe_accepted.is_empty(),
        "weir accepts what the kernel refuses:\n{}",
        unsafe_accepted.join("\n")
    );
    assert!(both >= 200, "only {both} programs accepted by both: the generator needs work");
}
