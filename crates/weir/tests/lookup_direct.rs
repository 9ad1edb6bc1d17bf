//! `bpf_map_lookup_elem` with its key in different places (the stack, the packet, 8-byte
//! keys, keys the helper cannot read): the JIT gives what the interpreter gives, verdicts,
//! traps and the maps left behind, run by run and in batches. A JIT batch answers hash
//! lookups through each map's `DirectLookup` (issue 11, bench/records/2026-11-30-runtime-15.txt);
//! single runs through the environment's `map_lookup`, and keys the direct path cannot
//! read through the helper, whose failures it keeps.

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
    frame_in_r6(&mut b, 16, short);
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

/// r6 = the frame's start (`xdp_md.data`), jumping to `short` unless it holds `len` bytes.
pub(crate) fn frame_in_r6(b: &mut ProgramBuilder, len: i32, short: weir_program::Label) {
    b.load(Op::LdxW, 2, 1, 0);
    b.load(Op::LdxW, 3, 1, 4);
    b.alu_reg(Op::Mov64Reg, 4, 2);
    b.alu_imm(Op::Add64Imm, 4, len);
    b.jump_reg(Op::Jgt64Reg, 4, 3, short);
    b.alu_reg(Op::Mov64Reg, 6, 2);
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
    let verdicts = one_by_one(&mut loaded, frames);
    (verdicts, object.maps_json())
}

pub(crate) fn verdict(outcome: Result<u64, String>) -> String {
    match outcome {
        Ok(ret) => format!("{ret}"),
        Err(t) => format!("trap {t}"),
    }
}

fn one_by_one(loaded: &mut weir::Loaded, frames: &[Vec<u8>]) -> Vec<String> {
    frames
        .iter()
        .map(|f| verdict(loaded.run(f).map(|v| v.ret).map_err(|t| t.to_string())))
        .collect()
}

/// The frames as one batch (`Loaded::run_batch`, as `weir run` runs them).
fn batched(loaded: &mut weir::Loaded, frames: &[Vec<u8>]) -> Vec<String> {
    let mut out = Vec::new();
    crate::batch::run_batch(loaded, frames, |v| {
        out.push(verdict(v.map(|v| v.ret).map_err(|t| t.to_string())))
    });
    out
}

#[test]
fn batched_lookups_give_the_interpreters_results() {
    let frames = frames();
    for proven in [false, true] {
        let frames: Vec<Vec<u8>> = frames
            .iter()
            .filter(|f| !proven || matches!(f.first(), Some(0 | 1 | 3)))
            .cloned()
            .collect();
        let (interp, interp_maps) = outcomes(Engine::Interp, proven, &frames);
        let object = Object::open(&object(!proven)).expect("opens");
        let mut loaded = object.load_with(0, Some(Engine::Jit), 0, proven).expect("loads");
        // Two batches: the second finds what the first added.
        let half = frames.len() / 2;
        let mut jit = batched(&mut loaded, &frames[..half]);
        jit.extend(batched(&mut loaded, &frames[half..]));
        assert_eq!(jit, interp, "proven {proven}");
        assert_eq!(object.maps_json(), interp_maps, "proven {proven}");
    }
}

/// Hash maps of every key size the direct path takes (1 to 16 bytes as words, 20 in
/// place), per-CPU and LRU: map `i` for frames whose byte 0 is `i`; the key is the frame's
/// bytes 8.. (copied to the stack whole, so the bytes past the key differ from frame to
/// frame: a lookup reading past its key finds nothing). A value found is incremented and
/// its 8 bytes at the frame's byte 1 read back (r0; `reach`: any offset, so past the
/// value's end it traps), plus the value's address when `leak` (both engines must give
/// the same); a missing key is added with the value 1 (r0 = 7).
const SIZES: [(u32, MapType, u32); 9] = [
    (1, MapType::Hash, 8),
    (2, MapType::Hash, 8),
    (4, MapType::Hash, 8),
    (8, MapType::Hash, 8),
    (12, MapType::Hash, 12),
    (16, MapType::Hash, 16),
    (20, MapType::Hash, 8),
    (4, MapType::PercpuHash, 8),
    (4, MapType::LruHash, 8),
];

fn sized_object(reach: bool, leak: bool) -> Vec<u8> {
    let mut b = ProgramBuilder::new();
    let short = b.new_label();
    let mut relocs = Vec::new();
    frame_in_r6(&mut b, 40, short);
    b.load(Op::LdxB, 7, 6, 0);
    b.load(Op::LdxB, 8, 6, 1);
    // The key area, r10-32..r10, from the frame's bytes 8..40; the value to add at r10-48.
    for (k, off) in [-32i16, -24, -16, -8].into_iter().enumerate() {
        b.load(Op::LdxDw, 4, 6, 8 + 8 * k as i16);
        b.store_reg(Op::StxDw, 10, off, 4);
    }
    b.store_imm(Op::StDw, 10, -48, 1);
    b.store_imm(Op::StDw, 10, -40, 0);
    let cases: Vec<_> = SIZES.iter().map(|_| b.new_label()).collect();
    for (map, &label) in cases.iter().enumerate() {
        b.jump_imm(Op::Jeq64Imm, 7, map as i32, label);
    }
    b.jump(short);
    for (map, &label) in cases.iter().enumerate() {
        let missing = b.new_label();
        b.bind(label);
        relocs.push(Relocation { slot: b.position(), target: RelocTarget::Map { map } });
        b.lddw_map_idx(1, map as i32);
        b.alu_reg(Op::Mov64Reg, 2, 10);
        b.alu_imm(Op::Add64Imm, 2, -32);
        b.call_helper(1);
        b.jump_imm(Op::Jeq64Imm, 0, 0, missing);
        b.alu_reg(Op::Mov64Reg, 9, 0);
        b.alu_imm(Op::Mov64Imm, 1, 1);
        b.atomic(Op::AtomicAdd64, 0, 0, 1);
        if reach {
            b.alu_reg(Op::Add64Reg, 0, 8);
        }
        b.load(Op::LdxDw, 0, 0, 0);
        if leak {
            b.alu_reg(Op::Add64Reg, 0, 9);
        }
        b.exit();
        b.bind(missing);
        relocs.push(Relocation { slot: b.position(), target: RelocTarget::Map { map } });
        b.lddw_map_idx(1, map as i32);
        b.alu_reg(Op::Mov64Reg, 2, 10);
        b.alu_imm(Op::Add64Imm, 2, -32);
        b.alu_reg(Op::Mov64Reg, 3, 10);
        b.alu_imm(Op::Add64Imm, 3, -48);
        b.alu_imm(Op::Mov64Imm, 4, 0);
        b.call_helper(2);
        b.alu_imm(Op::Mov64Imm, 0, 7);
        b.exit();
    }
    b.bind(short);
    b.alu_imm(Op::Mov64Imm, 0, 1);
    b.exit();
    let mut program = b.link().expect("links").with_prog_type(ProgType::Xdp);
    for (i, &(key_size, map_type, value_size)) in SIZES.iter().enumerate() {
        let name = format!("m{i}");
        program.add_map(MapSpec {
            name,
            map_type,
            key_size,
            value_size,
            max_entries: 16,
            flags: 0,
        });
    }
    for r in relocs {
        program.add_relocation(r);
    }
    weir::elf::write::write_program(&program, &weir::elf::write::ObjectOptions::new("sizes"))
        .expect("writes")
}

/// Per map, per round, four keys (told apart by their last byte, so in the second word
/// of 12- and 16-byte keys), the bytes after the key varying; `reach` offsets past 0 for
/// some (the value's last word, half past its end, past it and its gap).
fn sized_frames(round: u8, reach: bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (map, &(key_size, _, value_size)) in SIZES.iter().enumerate() {
        for key in 0..4u8 {
            let mut f = vec![0u8; 48];
            f[0] = map as u8;
            if reach {
                let offsets = [0, value_size as u8 - 8, value_size as u8 - 4, 200];
                f[1] = offsets[usize::from(key + round) % 4];
            }
            for (i, byte) in f[8..].iter_mut().enumerate() {
                *byte = (i as u8).wrapping_mul(29) ^ 0xa5 ^ round.wrapping_mul(7);
            }
            let k = key_size as usize;
            f[8..8 + k].iter_mut().enumerate().for_each(|(i, b)| *b = (i as u8).wrapping_mul(11));
            f[8 + k - 1] = key;
            out.push(f);
        }
    }
    out
}

/// Three rounds over the sized object on `engine` (JIT: in batches), cpu 1 of 2, with
/// the maps changed from outside between rounds (a key deleted, one added with the value
/// 100): the verdicts and the maps.
fn sized_outcomes(engine: Engine, proven: bool, reach: bool) -> (Vec<String>, String) {
    let object = Object::open_with_cpus(&sized_object(reach, !proven), 2).expect("opens");
    let mut loaded = object.load_with(0, Some(engine), 1, proven).expect("loads");
    let mut verdicts = Vec::new();
    for round in 0..3u8 {
        let frames = sized_frames(round, reach);
        verdicts.extend(match engine {
            Engine::Jit => batched(&mut loaded, &frames),
            _ => one_by_one(&mut loaded, &frames),
        });
        for (map, &(key_size, map_type, value_size)) in object.maps().iter().zip(&SIZES) {
            let key = |last: u8| {
                let mut key: Vec<u8> = (0..key_size as u8).map(|i| i.wrapping_mul(11)).collect();
                key[key_size as usize - 1] = last;
                key
            };
            let mut value = vec![0u8; value_size as usize];
            value[0] = 100;
            if map_type == MapType::PercpuHash {
                value = value.repeat(2);
            }
            let _ = map.delete(&key(round));
            map.update_all(&key(round + 1), &value, 0).expect("updates");
        }
    }
    (verdicts, object.maps_json())
}

#[test]
fn lookups_of_every_key_size_give_the_interpreters_results() {
    for (proven, reach) in [(false, false), (true, false), (false, true)] {
        let (interp, interp_maps) = sized_outcomes(Engine::Interp, proven, reach);
        let (jit, jit_maps) = sized_outcomes(Engine::Jit, proven, reach);
        assert_eq!(jit, interp, "proven {proven} reach {reach}");
        assert_eq!(jit_maps, interp_maps, "proven {proven} reach {reach}");
        // Found, added, the outside update seen (100 + 1), and with `reach`, reads past
        // the value trapped.
        let mut wants = vec!["7"];
        if proven {
            wants.extend(["2", "101"]);
        }
        for want in wants {
            assert!(interp.iter().any(|v| v == want), "{want}: {interp:?}");
        }
        let traps = interp.iter().filter(|v| v.starts_with("trap")).count();
        assert_eq!(traps > 0, reach, "{interp:?}");
    }
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
