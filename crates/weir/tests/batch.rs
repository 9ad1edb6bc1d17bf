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

/// XDP_TX after writing 0xff over the frame's first byte and its byte 13 plus one over
/// its second; XDP_PASS for a frame under 14 bytes.
fn writer_object() -> Vec<u8> {
    let mut b = ProgramBuilder::new();
    let short = b.new_label();
    b.alu_imm(Op::Mov64Imm, 0, 2);
    b.load(Op::LdxW, 2, 1, 0);
    b.load(Op::LdxW, 3, 1, 4);
    b.alu_reg(Op::Mov64Reg, 4, 2);
    b.alu_imm(Op::Add64Imm, 4, 14);
    b.jump_reg(Op::Jgt64Reg, 4, 3, short);
    b.store_imm(Op::StB, 2, 0, 0xff);
    b.load(Op::LdxB, 5, 2, 13);
    b.alu_imm(Op::Add64Imm, 5, 1);
    b.store_reg(Op::StxB, 2, 1, 5);
    b.alu_imm(Op::Mov64Imm, 0, 3);
    b.bind(short);
    b.exit();
    let program = b.link().expect("links").with_prog_type(ProgType::Xdp);
    weir::elf::write::write_program(&program, &weir::elf::write::ObjectOptions::new("writer"))
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
    let mut out = Vec::new();
    run_batch(loaded, frames, |v| {
        out.push(match v {
            Ok(v) => (Ok(v.ret), v.packet.to_vec()),
            Err(t) => (Err(t.to_string()), Vec::new()),
        })
    });
    out
}

/// The frames as one batch (`Loaded::run_batch`, as `weir run` runs them), each verdict
/// handed to `each` in order.
pub(crate) fn run_batch(
    loaded: &mut weir::Loaded,
    frames: &[Vec<u8>],
    mut each: impl FnMut(Result<weir::VerdictView<'_>, weir_program::Trap>),
) {
    let mut fed = 0;
    loaded
        .run_batch::<String>(frame_source(frames, &mut fed), |v| {
            each(v);
            Ok(())
        })
        .expect("no error from next or each");
}

/// Each frame's return value and packet as `Loaded::run_batch` leaves them (no trap).
fn batch_results(loaded: &mut weir::Loaded, frames: &[Vec<u8>]) -> Vec<(u64, Vec<u8>)> {
    let mut results = Vec::new();
    run_batch(loaded, frames, |v| {
        let v = v.expect("no trap");
        results.push((v.ret, v.packet.to_vec()));
    });
    results
}

/// What `Loaded::run_batch`'s source hands each frame to.
type Put<'p> = dyn FnMut(&[u8]) + 'p;

/// `Loaded::run_batch`'s source over `frames`: each call puts the next frame and counts it
/// in `fed`; `Ok(false)` once they are all out.
fn frame_source<'a, E>(
    frames: &'a [Vec<u8>],
    fed: &'a mut usize,
) -> impl FnMut(&mut Put<'_>) -> Result<bool, E> + 'a {
    move |put| {
        let Some(f) = frames.get(*fed) else { return Ok(false) };
        *fed += 1;
        put(f);
        Ok(true)
    }
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
                // Proven, both read the packet only: their batches run over the frames in
                // place (on the JIT), and must still give what the copies give.
                assert_eq!(batch.lends(), proven, "{name} {engine:?}");
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

/// A program that writes the packet never runs in place: its batch copies each frame, and
/// gives the interpreter's verdicts and written packets, packet by packet and batched.
#[test]
fn a_program_that_writes_the_packet_takes_the_copy() {
    let frames = frames();
    let object = Object::open(&writer_object()).expect("opens");
    let mut reference = object.load_with(0, Some(Engine::Interp), 0, false).expect("loads");
    let want = one_by_one(&mut reference, &frames);
    // It did write: the long frames come back changed, with XDP_TX.
    let written = want.iter().zip(&frames).filter(|(w, f)| w.0 == Ok(3) && w.1 != **f).count();
    assert_eq!(written, frames.iter().filter(|f| f.len() >= 14).count());
    for engine in [Engine::Jit, Engine::Interp] {
        for proven in [false, true] {
            let mut batch = object.load_with(0, Some(engine), 0, proven).expect("loads");
            assert!(!batch.lends(), "{engine:?} proven {proven}: a writer must not be lent");
            for round in 0..2 {
                let got = batched(&mut batch, &frames);
                assert_eq!(got, want, "{engine:?} proven {proven} round {round}");
            }
        }
    }
    // The frames handed in are the caller's, untouched.
    assert_eq!(frames, self::frames());
}

/// `bpf_redirect(byte 12, 0)` (XDP_REDIRECT) for a frame of at least 14 bytes, XDP_PASS
/// (asking for no redirect) for a shorter one: a program that leaves the packet, so its
/// proven batches on the JIT run over the frames in place.
fn redirect_object() -> Vec<u8> {
    let mut b = ProgramBuilder::new();
    let short = b.new_label();
    b.load(Op::LdxW, 2, 1, 0);
    b.load(Op::LdxW, 3, 1, 4);
    b.alu_reg(Op::Mov64Reg, 4, 2);
    b.alu_imm(Op::Add64Imm, 4, 14);
    b.jump_reg(Op::Jgt64Reg, 4, 3, short);
    b.load(Op::LdxB, 1, 2, 12);
    b.alu_imm(Op::Mov64Imm, 2, 0);
    b.call_helper(23);
    b.exit();
    b.bind(short);
    b.alu_imm(Op::Mov64Imm, 0, 2);
    b.exit();
    let program = b.link().expect("links").with_prog_type(ProgType::Xdp);
    weir::elf::write::write_program(&program, &weir::elf::write::ObjectOptions::new("redirect"))
        .expect("writes")
}

/// A lent frame's run starts as a packet's does in all a program that leaves the packet
/// can change (`Env::begin_lent_frame` per frame, `begin_packet` once a batch): after a
/// batch whose frames redirect, then not, the environment holds the last frame's redirect
/// (none), as packet by packet; and the batch's verdicts are the packet-by-packet ones.
#[test]
fn a_lent_batch_leaves_the_last_frames_redirect() {
    let object = Object::open(&redirect_object()).expect("opens");
    let long = |b: u8| vec![b; 20];
    let batches: [Vec<Vec<u8>>; 3] = [
        vec![long(5), long(6), vec![1; 13]],
        vec![vec![2; 9], long(7), long(4)],
        vec![long(8), vec![], long(3), vec![0; 13]],
    ];
    for engine in [Engine::Jit, Engine::Interp] {
        let mut single = object.load_with(0, Some(engine), 0, true).expect("loads");
        let mut batch = object.load_with(0, Some(engine), 0, true).expect("loads");
        assert!(batch.lends(), "{engine:?}");
        for frames in &batches {
            let want = one_by_one(&mut single, frames);
            let got = batched(&mut batch, frames);
            assert_eq!(got, want, "{engine:?}");
            let left = single.env_mut().redirect();
            let last_redirects = frames.last().is_some_and(|f| f.len() >= 14);
            assert_eq!(left.is_some(), last_redirects, "{engine:?} {frames:?}");
            assert_eq!(batch.env_mut().redirect(), left, "{engine:?} {frames:?}");
        }
    }
}

/// A program that reserves ring buffer records (testdata/bpf/ringbuf.o) is never lent, proven
/// or not: a lent batch does not end each run's reservations (`XdpBatch::lend` leaves out
/// `Env::end_run`), and its batch still gives the packet-by-packet verdicts.
#[test]
fn a_ring_buffer_program_is_not_lent() {
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/bpf/ringbuf.o"))
        .expect("testdata/bpf/ringbuf.o");
    let object = Object::open(&bytes).expect("opens");
    let frames = frames();
    for engine in [Engine::Jit, Engine::Interp] {
        for proven in [false, true] {
            let mut single = object.load_with(0, Some(engine), 0, proven).expect("loads");
            let mut batch = object.load_with(0, Some(engine), 0, proven).expect("loads");
            assert!(!batch.lends(), "{engine:?} proven {proven}: a ring buffer user lent");
            let want = one_by_one(&mut single, &frames);
            assert_eq!(batched(&mut batch, &frames), want, "{engine:?} proven {proven}");
        }
    }
}

/// On the JIT, the batch of a proven program that leaves the packet runs over the source's
/// own frames: each verdict's packet is the frame itself, at its address (`Batch::lend`:
/// no copy); on the interpreter, over a copy. Either way an error of `each` ends the batch at its frame:
/// the source is asked for no frame after it.
#[test]
fn a_jit_batch_runs_over_the_sources_frames_and_stops_at_an_error() {
    let frames = frames();
    assert!(frames.len() > 4);
    let object = Object::open(&reader_object()).expect("opens");
    for engine in [Engine::Jit, Engine::Interp] {
        let mut loaded = object.load_with(0, Some(engine), 0, true).expect("loads");
        assert!(loaded.lends(), "{engine:?}");
        let stop_at = 4;
        let (mut fed, mut seen, mut in_place) = (0, 0, 0);
        let result = loaded.run_batch::<usize>(frame_source(&frames, &mut fed), |v| {
            let v = v.expect("no trap");
            let frame = &frames[seen];
            in_place += usize::from(std::ptr::eq(v.packet.as_ptr(), frame.as_ptr()));
            assert_eq!(v.packet, &frame[..], "{engine:?}");
            seen += 1;
            if seen == stop_at {
                return Err(seen);
            }
            Ok(())
        });
        assert_eq!(result, Err(stop_at), "{engine:?}");
        assert_eq!((fed, seen), (stop_at, stop_at), "{engine:?}");
        let lent = if engine == Engine::Jit { stop_at } else { 0 };
        assert_eq!(in_place, lent, "{engine:?}");
    }
}

/// `Loaded::run_batch_frames` (an iterator of frames, `weir run`'s capture path) gives what
/// `Loaded::run_batch` gives over the same frames, on both engines, for a program that
/// leaves the packet (lent on the JIT: each packet the frame itself) and one that writes
/// it (copied); an error of `each` ends it at its frame, no later frame taken from the
/// iterator.
#[test]
fn a_batch_over_an_iterator_of_frames_gives_the_callbacks_results() {
    let frames = frames();
    assert!(frames.len() > 4);
    for object in [reader_object(), writer_object()] {
        let object = Object::open(&object).expect("opens");
        for engine in [Engine::Jit, Engine::Interp] {
            let mut loaded = object.load_with(0, Some(engine), 0, true).expect("loads");
            let want = batch_results(&mut loaded, &frames);
            assert_eq!(want.len(), frames.len(), "{engine:?}");
            let mut got = Vec::new();
            let mut in_place = 0;
            let mut iter = frames.iter().map(|f| &f[..]);
            let result = loaded.run_batch_frames::<usize>(iter.by_ref(), |v| {
                let v = v.expect("no trap");
                let frame = &frames[got.len()];
                in_place += usize::from(std::ptr::eq(v.packet.as_ptr(), frame.as_ptr()));
                got.push((v.ret, v.packet.to_vec()));
                if got.len() == 4 {
                    return Err(4);
                }
                Ok(())
            });
            assert_eq!(result, Err(4), "{engine:?}");
            assert_eq!(iter.len(), frames.len() - 4, "{engine:?}: frames taken after the error");
            assert_eq!(got[..], want[..4], "{engine:?}");
            let lent = loaded.lends() && engine == Engine::Jit;
            assert_eq!(in_place, if lent { 4 } else { 0 }, "{engine:?}");
            got.clear();
            let result = loaded.run_batch_frames::<()>(frames.iter().map(|f| &f[..]), |v| {
                let v = v.expect("no trap");
                got.push((v.ret, v.packet.to_vec()));
                Ok(())
            });
            assert_eq!(result, Ok(()));
            assert_eq!(got, want, "{engine:?}");
        }
    }
}

/// A source of frames that lends each from a buffer of its own, until its next frame (as
/// a capture reader's `next_packet` does): what no iterator of frames can be.
struct Lending<'a> {
    frames: &'a [Vec<u8>],
    taken: usize,
    buffer: Vec<u8>,
}

impl weir::FrameSource<usize> for &mut Lending<'_> {
    fn next_frame(&mut self, mut put: impl FnMut(&[u8])) -> Result<bool, usize> {
        let Some(frame) = self.frames.get(self.taken) else { return Ok(false) };
        self.taken += 1;
        self.buffer.clear();
        self.buffer.extend_from_slice(frame);
        put(&self.buffer);
        Ok(true)
    }
}

/// `Loaded::run_batch_from` (a source of the caller's type, `weir run`'s stream path) gives
/// what `Loaded::run_batch` gives over the same frames, on both engines, for a program that
/// leaves the packet (lent on the JIT: each packet the source's own buffer) and one that
/// writes it (copied); an error of `each` ends it at its frame, no later frame taken.
#[test]
fn a_batch_from_a_lending_source_gives_the_callbacks_results() {
    let frames = frames();
    assert!(frames.len() > 4);
    for object in [reader_object(), writer_object()] {
        let object = Object::open(&object).expect("opens");
        for engine in [Engine::Jit, Engine::Interp] {
            let mut loaded = object.load_with(0, Some(engine), 0, true).expect("loads");
            let want = batch_results(&mut loaded, &frames);
            assert_eq!(want.len(), frames.len(), "{engine:?}");
            let lent = loaded.lends() && engine == Engine::Jit;
            let mut source =
                Lending { frames: &frames, taken: 0, buffer: Vec::with_capacity(1 << 13) };
            let buffer_at = source.buffer.as_ptr();
            let (mut got, mut in_place) = (Vec::new(), 0);
            let result = loaded.run_batch_from(&mut source, |v| {
                let v = v.expect("no trap");
                in_place += usize::from(std::ptr::eq(v.packet.as_ptr(), buffer_at));
                got.push((v.ret, v.packet.to_vec()));
                if got.len() == 4 {
                    return Err(4);
                }
                Ok(())
            });
            assert_eq!(result, Err(4), "{engine:?}");
            assert_eq!(source.taken, 4, "{engine:?}: frames taken after the error");
            assert_eq!(got[..], want[..4], "{engine:?}");
            assert_eq!(in_place, if lent { 4 } else { 0 }, "{engine:?}");
            let mut source = Lending { frames: &frames, taken: 0, buffer: Vec::new() };
            got.clear();
            let result = loaded.run_batch_from(&mut source, |v| {
                let v = v.expect("no trap");
                got.push((v.ret, v.packet.to_vec()));
                Ok(())
            });
            assert_eq!(result, Ok(()));
            assert_eq!(got, want, "{engine:?}");
        }
    }
}
