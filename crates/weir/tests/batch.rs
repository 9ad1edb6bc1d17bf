//! `Loaded::run_batch` on XDP gives exactly what `Loaded::run_view` gives packet by packet:
//! the verdicts and the packets as left, on both engines, with and without the proof (the
//! JIT's batch has a loop of its own for self-contained code and one for the rest; the
//! context's fixed fields are written once per batch, the packet fields per packet).

use weir::isa::ebpf::Op;
use weir::{Engine, Object};
use weir_program::{ProgType, ProgramBuilder};

/// XDP_ABORTED unless `ingress_ifindex` is 1 and `rx_queue_index` 0; XDP_DROP for a frame
/// under 14 bytes; else XDP_PASS or XDP_TX by the low bit of bytes 12 and 13's sum (the
/// frame read where the span says it starts).
fn reader_object() -> Vec<u8> {
    let mut b = ProgramBuilder::new();
    let (abort, drop) = (b.new_label(), b.new_label());
    b.load(Op::LdxW, 5, 1, 12);
    b.jump_imm(Op::Jne64Imm, 5, 1, abort);
    b.load(Op::LdxW, 5, 1, 16);
    b.jump_imm(Op::Jne64Imm, 5, 0, abort);
    b.load(Op::LdxW, 2, 1, 0);
    b.load(Op::LdxW, 3, 1, 4);
    b.alu_reg(Op::Mov64Reg, 4, 2);
    b.alu_imm(Op::Add64Imm, 4, 14);
    b.jump_reg(Op::Jgt64Reg, 4, 3, drop);
    b.load(Op::LdxB, 0, 2, 12);
    b.load(Op::LdxB, 4, 2, 13);
    b.alu_reg(Op::Add64Reg, 0, 4);
    b.alu_imm(Op::And64Imm, 0, 1);
    b.alu_imm(Op::Add64Imm, 0, 2);
    b.exit();
    b.bind(abort);
    b.alu_imm(Op::Mov64Imm, 0, 0);
    b.exit();
    b.bind(drop);
    b.alu_imm(Op::Mov64Imm, 0, 1);
    b.exit();
    let program = b.link().expect("links").with_prog_type(ProgType::Xdp);
    weir::elf::write::write_program(&program, &weir::elf::write::ObjectOptions::new("reader"))
        .expect("writes")
}

fn frames() -> Vec<Vec<u8>> {
    // Lengths from none to past a page's usable part, contents varied.
    [0usize, 1, 13, 14, 15, 60, 64, 1500, 9, 3000, 14, 200, 4000, 17, 0, 61]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (i * 31 + j * 7 + i * j) as u8).collect())
        .collect()
}

/// Per packet: the verdict (or the trap's text) and the packet left.
type Outcomes = Vec<(Result<u64, String>, Vec<u8>)>;

fn one_by_one(loaded: &mut weir::Loaded, frames: &[Vec<u8>]) -> Outcomes {
    frames
        .iter()
        .map(|f| match loaded.run_view(f) {
            Ok(v) => (Ok(v.ret), v.packet.to_vec()),
            Err(t) => (Err(t.to_string()), Vec::new()),
        })
        .collect()
}

fn batched(loaded: &mut weir::Loaded, frames: &[Vec<u8>]) -> Outcomes {
    let (mut out, mut fed) = (Vec::new(), 0);
    loaded
        .run_batch::<String>(
            |put| {
                let Some(f) = frames.get(fed) else { return Ok(false) };
                fed += 1;
                put(f);
                Ok(true)
            },
            |v| {
                out.push(match v {
                    Ok(v) => (Ok(v.ret), v.packet.to_vec()),
                    Err(t) => (Err(t.to_string()), Vec::new()),
                });
                Ok(())
            },
        )
        .expect("no error from next or each");
    out
}

#[test]
fn batch_matches_packet_by_packet() {
    let frames = frames();
    let reader = reader_object();
    let counter =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/bpf/xdp_counter.o"))
            .expect("testdata/bpf/xdp_counter.o");
    for (name, bytes) in [("reader", &reader), ("xdp_counter", &counter)] {
        let object = Object::open(bytes).expect("opens");
        for engine in [Engine::Jit, Engine::Interp] {
            for proven in [false, true] {
                let mut single = object.load_with(0, Some(engine), 0, proven).expect("loads");
                let mut batch = object.load_with(0, Some(engine), 0, proven).expect("loads");
                let want = one_by_one(&mut single, &frames);
                // Twice: the second batch starts from what the first left.
                for round in 0..2 {
                    let got = batched(&mut batch, &frames);
                    assert_eq!(got, want, "{name} {engine:?} proven {proven} round {round}");
                }
                // And a single run after a batch sees a fresh context as well.
                assert_eq!(one_by_one(&mut batch, &frames[..3]), want[..3], "{name} {engine:?}");
                if name == "reader" {
                    let verdicts: Vec<_> = want.iter().map(|w| w.0.clone()).collect();
                    assert!(verdicts.contains(&Ok(1)) && verdicts.contains(&Ok(2)));
                    assert!(verdicts.contains(&Ok(3)) && !verdicts.contains(&Ok(0)));
                }
            }
        }
    }
}
