//! `bpf_map_lookup_elem` with its key in different places (the stack, the packet, 8-byte
//! keys, keys the helper cannot read): the JIT gives what the interpreter gives, verdicts,
//! traps and the maps left behind. Written for a direct lookup path on the JIT (issue 11,
//! bench/records/2026-11-29-runtime-13.txt: measured, no gain, not kept); it covers the
//! environment's lookup and the helper's failures alike.

use weir::isa::ebpf::Op;
use weir::{Engine, Object};
use weir_program::{MapSpec, MapType, ProgType, ProgramBuilder, RelocTarget, Relocation};

/// The frame's first byte picks where the key lies: 0 on the stack (4-byte key, map
/// `h`), 1 in the packet (bytes 4..8, map `h`), 2 past the stack's top (the helper
/// cannot read it: a helper failure), 3 on the stack for map `w` (8-byte key), 4 a
/// 4-byte key at `r10 - 2` (half of it above the frame). The key's value is the frame's
/// second byte. A value found is incremented (XDP_PASS); a missing one is added with the
/// value 1 (XDP_TX). Frames under 16 bytes: XDP_DROP, and without `unreadable` (for the
/// verifier) cases 2 and 4 too.
fn object(unreadable: bool) -> Vec<u8> {
    let mut b = ProgramBuilder::new();
    let (short, stack, packet, above, wide, half, found) = (
        b.new_label(),
        b.new_label(),
        b.new_label(),
        b.new_label(),
        b.new_label(),
        b.new_label(),
        b.new_label(),
    );
    let mut relocs = Vec::new();
    b.load(Op::LdxW, 2, 1, 0);
    b.load(Op::LdxW, 3, 1, 4);
    b.alu_reg(Op::Mov64Reg, 4, 2);
    b.alu_imm(Op::Add64Imm, 4, 16);
    b.jump_reg(Op::Jgt64Reg, 4, 3, short);
    b.alu_reg(Op::Mov64Reg, 6, 2);
    b.load(Op::LdxB, 7, 6, 0);
    b.load(Op::LdxB, 8, 6, 1);
    b.store_reg(Op::StxW, 10, -4, 8);
    b.store_reg(Op::StxDw, 10, -16, 8);
    b.store_imm(Op::StDw, 10, -24, 1);
    b.jump_imm(Op::Jeq64Imm, 7, 0, stack);
    b.jump_imm(Op::Jeq64Imm, 7, 1, packet);
    b.jump_imm(Op::Jeq64Imm, 7, 2, if unreadable { above } else { short });
    b.jump_imm(Op::Jeq64Imm, 7, 3, wide);
    b.jump(if unreadable { half } else { short });
    // Each case: r9 = the key's address, r1 = its map (a constant of the call's block).
    let mut case =
        |b: &mut ProgramBuilder, label, map: usize, key: &dyn Fn(&mut ProgramBuilder)| {
            b.bind(label);
            key(b);
            b.alu_reg(Op::Mov64Reg, 2, 9);
            relocs.push(Relocation { slot: b.position(), target: RelocTarget::Map { map } });
            b.lddw_map_idx(1, map as i32);
            b.call_helper(1);
            b.jump_imm(Op::Jne64Imm, 0, 0, found);
            relocs.push(Relocation { slot: b.position(), target: RelocTarget::Map { map } });
            b.lddw_map_idx(1, map as i32);
            b.alu_reg(Op::Mov64Reg, 2, 9);
            b.alu_reg(Op::Mov64Reg, 3, 10);
            b.alu_imm(Op::Add64Imm, 3, -24);
            b.alu_imm(Op::Mov64Imm, 4, 0);
            b.call_helper(2);
            b.alu_imm(Op::Mov64Imm, 0, 3);
            b.exit();
        };
    let stack_key = |off: i32| {
        move |b: &mut ProgramBuilder| {
            b.alu_reg(Op::Mov64Reg, 9, 10);
            b.alu_imm(Op::Add64Imm, 9, off);
        }
    };
    case(&mut b, stack, 0, &stack_key(-4));
    case(&mut b, packet, 0, &|b| {
        b.alu_reg(Op::Mov64Reg, 9, 6);
        b.alu_imm(Op::Add64Imm, 9, 4);
    });
    case(&mut b, wide, 1, &stack_key(-16));
    if unreadable {
        case(&mut b, above, 0, &stack_key(8));
        case(&mut b, half, 0, &stack_key(-2));
    }
    b.bind(found);
    b.alu_imm(Op::Mov64Imm, 1, 1);
    b.atomic(Op::AtomicAdd64, 0, 0, 1);
    b.alu_imm(Op::Mov64Imm, 0, 2);
    b.exit();
    b.bind(short);
    b.alu_imm(Op::Mov64Imm, 0, 1);
    b.exit();
    let mut program = b.link().expect("links").with_prog_type(ProgType::Xdp);
    let map = |name: &str, key_size| MapSpec {
        name: name.into(),
        map_type: MapType::Hash,
        key_size,
        value_size: 8,
        max_entries: 16,
        flags: 0,
    };
    program.add_map(map("h", 4));
    program.add_map(map("w", 8));
    for r in relocs {
        program.add_relocation(r);
    }
    weir::elf::write::write_program(&program, &weir::elf::write::ObjectOptions::new("lookups"))
        .expect("writes")
}

fn frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for round in 0..3u8 {
        for mode in 0..5u8 {
            for key in 0..4u8 {
                let mut f = vec![0u8; 20];
                f[0] = mode;
                f[1] = key.wrapping_add(round);
                f[4..8].copy_from_slice(&[key, round, 0, 0]);
                out.push(f);
            }
        }
    }
    out.push(vec![0u8; 8]);
    out
}

/// Each frame's verdict (or trap) on `engine`, with the proof when `proven`, and the maps
/// after all of them.
fn outcomes(engine: Engine, proven: bool, frames: &[Vec<u8>]) -> (Vec<String>, String) {
    let object = Object::open(&object(!proven)).expect("opens");
    let mut loaded = object.load_with(0, Some(engine), 0, proven).expect("loads");
    let verdicts = frames
        .iter()
        .map(|f| match loaded.run(f) {
            Ok(v) => format!("{}", v.ret),
            Err(t) => format!("trap {t}"),
        })
        .collect();
    (verdicts, object.maps_json())
}

#[test]
fn direct_lookups_give_the_interpreters_results() {
    let frames = frames();
    let (interp, interp_maps) = outcomes(Engine::Interp, false, &frames);
    let (jit, jit_maps) = outcomes(Engine::Jit, false, &frames);
    // The cases do what they say on the interpreter: found, added, and the helper's
    // failure for the unreadable keys.
    assert!(interp.iter().any(|v| v == "2") && interp.iter().any(|v| v == "3"), "{interp:?}");
    let traps = interp.iter().filter(|v| v.starts_with("trap")).count();
    assert_eq!(traps, 2 * 3 * 4, "{interp:?}");
    assert_eq!(jit, interp);
    assert_eq!(jit_maps, interp_maps);
    assert!(interp_maps.contains("\"w\""), "{interp_maps}");
}

#[test]
fn direct_lookups_in_a_proven_program_give_the_interpreters_results() {
    // Only the keys the verifier accepts: on the stack and in the packet (the object
    // without the other cases, on both engines).
    let frames: Vec<Vec<u8>> =
        frames().into_iter().filter(|f| matches!(f.first(), Some(0 | 1 | 3))).collect();
    let (interp, interp_maps) = outcomes(Engine::Interp, true, &frames);
    let (jit, jit_maps) = outcomes(Engine::Jit, true, &frames);
    assert_eq!(jit, interp);
    assert_eq!(jit_maps, interp_maps);
}
