//! The properties the fuzz targets check, as plain functions, so that `cargo test` replays
//! every saved crasher (`fuzz/regressions/<target>/*`) with exactly the fuzzer's checks.
//! Each function panics when the property fails: that is how libFuzzer sees a finding.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use weir::cbpf::translate::{bindings, sk_buff_context, translate, xdp_context};
use weir::cbpf::{CbpfFilter, PacketMeta, Rules};
use weir::{FilterOptions, LinkType, NameDb, ProgType};
use weir_interp::{Config, Input, Interpreter};
use weir_isa::asm::{assemble as assemble_text, disassemble};
use weir_isa::ebpf::{decode_bytes, encode_bytes};
use weir_program::abi::Bindings;
use weir_program::{Program, Verified};
use weir_runtime::capture::{CaptureReader, CaptureWriter};
use weir_runtime::source::{Packet, PacketSource};

/// Any byte string either fails to decode, or decodes to instructions that encode back to
/// the same bytes and whose disassembly assembles to the same instructions.
pub fn decode(data: &[u8]) {
    if let Ok(insns) = decode_bytes(data) {
        assert_eq!(encode_bytes(&insns), data, "encode(decode(x)) != x");
        let text = disassemble(&insns);
        let again = assemble_text(&text).expect("a disassembly must assemble");
        assert_eq!(again, insns, "assemble(disassemble(p)) != p");
    }
}

/// Any text either fails with a positioned error, or assembles to a program whose
/// disassembly assembles to the same program.
pub fn assemble(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match assemble_text(text) {
        Ok(insns) => {
            let printed = disassemble(&insns);
            let again = assemble_text(&printed).expect("a disassembly must assemble");
            assert_eq!(again, insns, "assemble(disassemble(p)) != p");
        }
        Err(e) => {
            assert!(e.line >= 1 && e.column >= 1, "error without a position: {e}");
            let _ = e.render(text);
        }
    }
}

/// The first byte is a memory length, the next that many bytes the memory, the rest a
/// program. Whatever a valid program does, a run ends in a value or a trap, and running it
/// twice with the same cache gives the same outcome and memory.
pub fn interp(data: &[u8]) {
    let Some((&mem_len, rest)) = data.split_first() else { return };
    let mem_len = usize::from(mem_len).min(rest.len());
    let (mem, code) = rest.split_at(mem_len);
    let Ok(program) = Program::from_bytes(code) else { return };
    let Ok(program) = Verified::structural(program) else { return };
    let config = Config { instruction_budget: 10_000, ..Config::default() };
    let engine = Interpreter::new(&program, Bindings::conformance(), config);
    let mut cache = engine.cache();
    let mut first_mem = mem.to_vec();
    let first = engine.run_mem(&mut cache, &mut first_mem);
    let mut second_mem = mem.to_vec();
    let second = engine.run_mem(&mut cache, &mut second_mem);
    assert_eq!(first, second, "a reused cache changed the outcome");
    assert_eq!(first_mem, second_mem, "a reused cache changed the memory");
}

/// The first byte is a memory length, the second picks the run's options (bit 0: constant
/// blinding; bits 1-2: an instruction budget of 10,000, 1,000, 100 or 10), then come the
/// memory and the program. A program either fails validation (before any engine), or is
/// longer than the JIT takes, or the JIT compiles it (every other valid program must) and then the JIT and the interpreter agree on
/// everything: the result or the trap, the executed count, the memory and the stack, also
/// on a second run with reused caches.
pub fn jit_diff(data: &[u8]) {
    let Some((&mem_len, rest)) = data.split_first() else { return };
    let Some((&options, rest)) = rest.split_first() else { return };
    let mem_len = usize::from(mem_len).min(rest.len());
    let (mem, code) = rest.split_at(mem_len);
    let Ok(program) = Program::from_bytes(code) else { return };
    let Ok(program) = Verified::structural(program) else { return };
    let budget = [10_000, 1_000, 100, 10][usize::from((options >> 1) & 3)];
    let blinding = options & 1 == 1;
    let limits = Config { instruction_budget: budget, ..Config::default() };
    let jit_config = weir_jit::Config { limits, blinding, ..weir_jit::Config::default() };
    let interp = Interpreter::new(&program, Bindings::conformance(), limits);
    let jit = match weir_jit::Jit::compile(&program, Bindings::conformance(), jit_config) {
        Ok(jit) => jit,
        // Too long for the JIT by design (the facade runs such programs on the interpreter).
        Err(weir_jit::CompileError {
            kind: weir_jit::CompileErrorKind::TooManySlots { .. },
            ..
        }) => return,
        Err(e) => panic!("the JIT refused a valid program: {e}"),
    };
    let mut interp_cache = interp.cache();
    let mut jit_cache = jit.cache();
    for run in 0..2 {
        let mut interp_mem = mem.to_vec();
        let mut jit_mem = mem.to_vec();
        let expected = interp.run_mem(&mut interp_cache, &mut interp_mem);
        let got = jit.run_mem(&mut jit_cache, &mut jit_mem);
        assert_eq!(got, expected, "run {run}: outcome");
        assert_eq!(jit_cache.executed(), interp_cache.executed(), "run {run}: executed");
        assert_eq!(jit_mem, interp_mem, "run {run}: memory");
        assert!(jit_cache.stack() == interp_cache.stack(), "run {run}: stack");
    }
}

/// Fuzz target `verify`: the verifier on any program, and what its proof promises.
///
/// The first byte picks the program type (bits 0-1: XDP, tc, socket filter, untyped) and
/// whether the body runs behind a packet prologue (bit 2, XDP and tc: r6 = the context,
/// r2 = data, r3 = data_end, and the body is skipped unless 32 bytes lie between them, so
/// that packet accesses can be proven); the second byte is the length of the bytes that
/// follow and fill the packet (typed) or the memory (untyped), the context being those
/// bytes cycled; the rest is the body, raw eBPF.
///
/// The verifier must end (accept or refuse) without panicking, within its budget of
/// processed instructions. A program it accepts must, on the interpreter, never trap on
/// memory (soundness: `OutOfBounds`, `ReadOnly`) and run no longer than the proof's bound
/// (`Facts::max_executed`); and the JIT given the proof (the checks its facts cover
/// dropped) must agree with the interpreter on everything: result or trap, executed
/// count, context, packet, memory and stack, twice on one cache.
pub fn verify(data: &[u8]) {
    let _accepted = verify_runs(data);
}

/// [`verify`], saying whether the verifier accepted the program (and the runs were made).
pub fn verify_runs(data: &[u8]) -> bool {
    use weir_isa::ebpf::{Insn, Op};
    use weir_program::TrapCode;
    let [kind, len, rest @ ..] = data else { return false };
    let prog_type =
        [Some(ProgType::Xdp), Some(ProgType::SchedCls), Some(ProgType::SocketFilter), None]
            [usize::from(kind & 3)];
    let bytes_len = usize::from(*len).min(rest.len());
    let (bytes, code) = rest.split_at(bytes_len);
    let Ok(body) = Program::from_bytes(code) else { return false };
    let body = body.insns().to_vec();
    let fields = match prog_type {
        Some(ProgType::Xdp) => Some((0, 4)),
        Some(ProgType::SchedCls) => Some((76, 80)),
        _ => None,
    };
    let insns = match fields {
        Some((data_off, end_off)) if kind & 4 != 0 => {
            // Past the body: `mov r0, 0; exit`, where the prologue's test jumps.
            let Ok(skip) = i16::try_from(body.len()) else { return false };
            let mut v = vec![
                Insn::new(Op::Mov64Reg, 6, 1, 0, 0),
                Insn::new(Op::LdxW, 2, 1, data_off, 0),
                Insn::new(Op::LdxW, 3, 1, end_off, 0),
                Insn::new(Op::Mov64Reg, 4, 2, 0, 0),
                Insn::new(Op::Add64Imm, 4, 0, 0, 32),
                Insn::new(Op::Jgt64Reg, 4, 3, skip, 0),
            ];
            v.extend(body);
            v.extend([Insn::new(Op::Mov64Imm, 0, 0, 0, 0), Insn::new(Op::Exit, 0, 0, 0, 0)]);
            v
        }
        _ => body,
    };
    let mut program = Program::from_insns(insns);
    if let Some(t) = prog_type {
        program = program.with_prog_type(t);
    }
    let options = weir::VerifyOptions {
        prog_type,
        memory_len: Some(bytes.len() as u64),
        // No helpers: the ones a typed program may call are the runtime's, with maps and
        // clocks the two engines would not see alike.
        helpers: Some(Vec::new()),
        budget: 100_000,
        ..weir::VerifyOptions::default()
    };
    let Ok(proof) = weir::verify(&program, &options) else { return false };
    let bound = proof.facts().max_executed;
    let Ok(proven) = proof.into_verified(program.clone()) else {
        panic!("a proof does not fit its own program")
    };
    let Ok(checked) = Verified::structural(program) else {
        panic!("the verifier accepted a structurally invalid program")
    };
    let bindings = prog_type.map_or_else(Bindings::conformance, Bindings::for_prog_type);
    let ctx_len = prog_type.map_or(0, |t| t.context_layout().size as usize);
    let ctx: Vec<u8> = bytes.iter().copied().cycle().take(ctx_len).collect();
    let ctx = if ctx.len() < ctx_len { vec![0; ctx_len] } else { ctx };
    // One run's buffers: (context, packet, memory).
    type Buffers = (Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>);
    let buffers = || -> Buffers {
        match prog_type {
            Some(_) => (Some(ctx.clone()), Some(bytes.to_vec()), None),
            None => (None, None, Some(bytes.to_vec())),
        }
    };
    let interp = Interpreter::new(&checked, bindings.clone(), Config::default());
    let jit = match weir_jit::Jit::compile(&proven, bindings, weir_jit::Config::default()) {
        Ok(jit) => jit,
        Err(weir_jit::CompileError {
            kind: weir_jit::CompileErrorKind::TooManySlots { .. },
            ..
        }) => return true,
        Err(e) => panic!("the JIT refused a proven program: {e}"),
    };
    let mut interp_cache = interp.cache();
    let mut jit_cache = jit.cache();
    for run in 0..2 {
        let (mut ictx, mut ipacket, mut imem) = buffers();
        let input = Input {
            ctx: ictx.as_deref_mut(),
            packet: ipacket.as_deref_mut(),
            mem: imem.as_deref_mut(),
            ..Input::default()
        };
        let expected = interp.run_stats(&mut interp_cache, input);
        match &expected {
            Err(trap) => assert!(
                !matches!(trap.code, TrapCode::OutOfBounds | TrapCode::ReadOnly),
                "run {run}: the verifier accepted a program that traps on memory: {trap}"
            ),
            Ok(outcome) => assert!(
                outcome.executed <= bound,
                "run {run}: {} instructions executed, the proof bounds runs by {bound}",
                outcome.executed
            ),
        }
        let (mut jctx, mut jpacket, mut jmem) = buffers();
        let input = Input {
            ctx: jctx.as_deref_mut(),
            packet: jpacket.as_deref_mut(),
            mem: jmem.as_deref_mut(),
            ..Input::default()
        };
        let got = jit.run_stats(&mut jit_cache, input);
        assert_eq!(got, expected, "run {run}: outcome");
        assert_eq!(jit_cache.executed(), interp_cache.executed(), "run {run}: executed");
        assert_eq!((jctx, jpacket, jmem), (ictx, ipacket, imem), "run {run}: buffers");
        assert!(jit_cache.stack() == interp_cache.stack(), "run {run}: stack");
    }
    true
}

/// Any byte string either is refused as a capture file, or reads (through small chunks and
/// the default one alike, never panicking) as one whose packets (up to the first damaged
/// one) copy through [`CaptureWriter`] to a file that reads back as the same packets and
/// nothing else.
pub fn capture(data: &[u8]) {
    // 64 KiB reads rather than the default 1 MiB: a fuzz input is a few KiB, and zeroing a
    // 1 MiB window for each reader was most of an execution (860 inputs/s against 500 on a
    // busy machine). Records longer than the window still cross reads, and the 7-byte
    // reader below crosses them everywhere.
    let Ok(mut original) = CaptureReader::with_chunk_size(data, FUZZ_CHUNK) else {
        // Refused at once, whatever the chunk size.
        assert!(CaptureReader::with_chunk_size(data, 7).is_err(), "refused at one chunk size only");
        return;
    };
    let _ = (original.format(), original.linktype(), original.snaplen(), original.would_wait());
    let path = ScratchFile::new("capture");
    let mut writer = CaptureWriter::like(&path.0, &original)
        .unwrap_or_else(|e| panic!("cannot start a copy of a readable capture: {e}"));
    let mut packets = Vec::new();
    let mut damage = None;
    while let Some(packet) = original.next_packet() {
        match packet {
            Ok(p) => {
                writer.write(&p).unwrap_or_else(|e| panic!("packet {}: {e}", p.index));
                packets.push(Owned::of(&p));
            }
            Err(e) => {
                damage = Some(e);
                break;
            }
        }
    }
    // The same packets and the same damage through 7-byte chunks.
    let mut small = CaptureReader::with_chunk_size(data, 7).expect("readable at any chunk size");
    let mut again = Vec::new();
    let mut small_damage = None;
    while let Some(packet) = small.next_packet() {
        match packet {
            Ok(p) => again.push(Owned::of(&p)),
            Err(e) => {
                small_damage = Some(e);
                break;
            }
        }
    }
    assert_eq!(again, packets, "chunk size changes the packets");
    assert_eq!(small_damage, damage, "chunk size changes the damage");
    let written = writer.finish().unwrap_or_else(|e| panic!("finishing the copy: {e}"));
    assert_eq!(written, packets.len() as u64, "packets written");
    let bytes = std::fs::read(&path.0).expect("the copy is readable");
    let mut copy = CaptureReader::with_chunk_size(&bytes[..], FUZZ_CHUNK)
        .unwrap_or_else(|e| panic!("the copy: {e}"));
    assert_eq!(copy.format(), original.format(), "format");
    assert_eq!(copy.linktype(), original.linktype(), "link type");
    let mut copied = Vec::new();
    while let Some(p) = copy.next_packet() {
        let p = p.unwrap_or_else(|e| panic!("the copy is damaged: {e}"));
        copied.push(Owned::of(&p));
    }
    assert_eq!(copied.len(), packets.len(), "packet count");
    for (a, b) in packets.iter().zip(&copied) {
        assert!(a == b, "packet {} differs in the copy:\n{a:?}\n{b:?}", a.0);
    }
}

/// The read size of [`capture`]'s readers.
const FUZZ_CHUNK: usize = 1 << 16;

/// What a copy must keep of a packet: index, bytes, lengths, time, link type.
#[derive(Debug, PartialEq, Eq)]
struct Owned(u64, Vec<u8>, u32, u64, u32, u32);

impl Owned {
    fn of(p: &Packet<'_>) -> Owned {
        Owned(p.index, p.data.to_vec(), p.wire_len, p.ts_sec, p.ts_nsec, p.linktype)
    }
}

/// A file under the temporary directory, unique to the process and the call (pid and a
/// counter, no `tempfile` dependency), removed when dropped (also when a check panics).
struct ScratchFile(PathBuf);

impl ScratchFile {
    fn new(what: &str) -> ScratchFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("weir-fuzz-{what}-{}-{n}.pcap", std::process::id());
        ScratchFile(std::env::temp_dir().join(name))
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Packets made from a fuzz input, so that the fuzzer steers what filters see: the bytes
/// themselves, the bytes behind an Ethernet + IPv4 + TCP header (so protocol tests pass
/// and field tests read fuzzed values), a truncated capture of that (wire length larger
/// than the captured bytes), and an empty packet.
fn packets_from(data: &[u8]) -> Vec<(Vec<u8>, u32)> {
    const HEADERS: [u8; 54] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, // Ethernet, IPv4
        0x45, 0, 0, 40, 0, 1, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4, TCP
        0, 80, 0x1f, 0x90, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0, // TCP
    ];
    let len = |p: &[u8]| u32::try_from(p.len()).unwrap_or(u32::MAX);
    let raw = data.to_vec();
    let mut framed = HEADERS.to_vec();
    framed.extend_from_slice(data);
    let truncated = framed.get(..framed.len() / 2).unwrap_or_default().to_vec();
    let framed_len = len(&framed);
    vec![
        (raw.clone(), len(&raw)),
        (framed.clone(), framed_len),
        (truncated, framed_len),
        (Vec::new(), 0),
    ]
}

/// Any text either fails to compile, or compiles (optimized and not, for Ethernet and one
/// other link type picked by the input's length) to filters that both emitters take or
/// refuse without a panic, and the optimized and unoptimized filters agree on packets made
/// from the input; an expression refused as rejecting all packets (optimizer on only)
/// matches none of them unoptimized.
pub fn pflang(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let others: Vec<LinkType> =
        weir::pflang::LINK_TYPES.iter().copied().filter(|l| *l != LinkType::Ethernet).collect();
    let other = others[data.len() % others.len()];
    let names = NameDb::builtin();
    let packets = packets_from(data);
    for linktype in [LinkType::Ethernet, other] {
        let mut compiled = [None, None];
        let mut rejects_all = false;
        for (slot, optimize) in compiled.iter_mut().zip([true, false]) {
            let options = FilterOptions { optimize, ..FilterOptions::new(linktype) };
            let filter = match weir::compile_filter_with(text, &options, &names) {
                Ok(filter) => filter,
                Err(e) => {
                    rejects_all |= optimize && e.message == weir::REJECTS_ALL;
                    continue;
                }
            };
            let _ = weir::emit::cbpf::emit(&filter);
            for prog_type in [ProgType::SocketFilter, ProgType::Xdp] {
                let _ = weir::emit::ebpf::emit(&filter, prog_type);
            }
            *slot = Some(filter);
        }
        match compiled {
            [Some(optimized), Some(plain)] => {
                for (index, (packet, wire_len)) in packets.iter().enumerate() {
                    assert_eq!(
                        optimized.matches(packet, *wire_len),
                        plain.matches(packet, *wire_len),
                        "{linktype:?}, packet {index}: optimized and unoptimized disagree"
                    );
                }
            }
            [None, None] => {}
            // Refused as libpcap refuses an expression its optimizer reduces to `ret #0`:
            // the unoptimized filter matches nothing either.
            [None, Some(plain)] if rejects_all => {
                for (index, (packet, wire_len)) in packets.iter().enumerate() {
                    assert!(
                        !plain.matches(packet, *wire_len),
                        "{linktype:?}, packet {index}: {text:?} \"rejects all packets\" but \
                         the unoptimized filter accepts it"
                    );
                }
            }
            _ => panic!("{linktype:?}: {text:?} compiles with only one of optimize on and off"),
        }
    }
}

/// Any byte string either fails to parse as a classic program, or parses to one that both
/// rule sets validate or refuse and both translations take or refuse without a panic; a
/// program valid under the kernel's rules gives the same verdicts on the classic reference
/// interpreter and, translated, on weir's eBPF interpreter (for XDP, on packets it sees
/// whole), on packets made from the input.
pub fn cbpf(data: &[u8]) {
    let Ok(insns) = weir::cbpf::parse(data, weir::cbpf::Format::Auto) else { return };
    let kernel_valid = weir::cbpf::validate(&insns).is_ok();
    let _ = weir::cbpf::validate_libpcap(&insns);
    let packets = packets_from(data);
    if let Ok(filter) = CbpfFilter::with_rules(&insns, Rules::Libpcap) {
        // libpcap's rules admit backward jumps: the interpreter bounds them.
        for (packet, wire_len) in &packets {
            let _ = filter.run(packet, *wire_len);
        }
    }
    let translations = [ProgType::SocketFilter, ProgType::Xdp].map(|prog_type| {
        let program = translate(&insns, prog_type).ok()?;
        let verified = weir::Verified::check(&program)
            .unwrap_or_else(|e| panic!("{prog_type}: the translation does not validate: {e}"));
        Some(Interpreter::new(&verified, bindings(prog_type), Config::default()))
    });
    if !kernel_valid {
        assert!(translations.iter().all(Option::is_none), "an invalid program translated");
        return;
    }
    let reference = CbpfFilter::new(&insns).expect("valid under the kernel's rules");
    let meta = PacketMeta { protocol: 0x0800, ifindex: 1, ..PacketMeta::default() };
    let [socket, xdp] = translations;
    for (index, (packet, wire_len)) in packets.iter().enumerate() {
        let want = u64::from(reference.run_with_meta(packet, *wire_len, &meta));
        if let Some(interp) = &socket {
            let mut ctx = sk_buff_context(*wire_len, &meta);
            let mut bytes = packet.clone();
            let got = interp
                .run(&mut interp.cache(), Input::new().ctx(&mut ctx).packet(&mut bytes))
                .unwrap_or_else(|trap| panic!("packet {index}: socket filter trapped: {trap:?}"));
            assert_eq!(got, want, "packet {index}: socket-filter translation");
        }
        let whole = u32::try_from(packet.len()).is_ok_and(|l| l == *wire_len && l <= 0xffff);
        if let (Some(interp), true) = (&xdp, whole) {
            let mut ctx = xdp_context();
            let mut bytes = packet.clone();
            let got = interp
                .run(&mut interp.cache(), Input::new().ctx(&mut ctx).packet(&mut bytes))
                .unwrap_or_else(|trap| panic!("packet {index}: XDP trapped: {trap:?}"));
            assert_eq!(got, want, "packet {index}: XDP translation");
        }
    }
}

/// A fuzz property: panics when it fails.
pub type FuzzCheck = fn(&[u8]);

/// The fuzz targets by name, for the replay test.
pub const TARGETS: &[(&str, FuzzCheck)] = &[
    ("decode", decode),
    ("assemble", assemble),
    ("interp", interp),
    ("jit_diff", jit_diff),
    ("capture", capture),
    ("pflang", pflang),
    ("cbpf", cbpf),
    ("flow", flow),
    ("pfmatch", pfmatch),
    ("verify", verify),
];

/// Any text either fails with an error on one of its lines, or parses to flow rules that
/// the tuple-space classifier and the linear reference classify alike: on packets made
/// from the input (whole, behind Ethernet/IPv4/TCP headers, and cut), the same rule line,
/// verdict and mark, the same bytes after the actions and the same mirrored copies.
pub fn flow(data: &[u8]) {
    use weir::flow::{Classifier, Reference, RuleSet, Work};
    let Ok(text) = std::str::from_utf8(data) else { return };
    let rules = match RuleSet::parse(text) {
        Ok(rules) => rules,
        Err(e) => {
            let lines = text.split('\n').count();
            assert!(e.line >= 1 && e.line <= lines, "error off the text's lines: {e}");
            return;
        }
    };
    let (classifier, reference) = (Classifier::new(&rules), Reference::new(&rules));
    for (packet, wire_len) in packets_from(data) {
        let run = |process: &dyn Fn(&mut Work<'_>) -> weir::flow::Outcome| {
            let (mut bytes, mut mirrored) = (packet.clone(), Vec::new());
            let mut work = Work::new(&mut bytes, wire_len, 0, 0, &mut mirrored);
            let outcome = process(&mut work);
            (outcome, bytes, mirrored)
        };
        let fast = run(&|w| classifier.process(w));
        let slow = run(&|w| reference.process(w));
        assert_eq!(fast, slow, "classifier and reference differ on {packet:02x?}");
    }
}

/// Any text either fails with an error on one of its lines that renders with a caret, or
/// parses to a match program whose one compiled predicate dispatches every packet (made
/// from the input as for `flow`) exactly as the clause-by-clause reference does, on the
/// IR's evaluator and as native code; and its XDP object (`weir compile --match -o`) on
/// weir's interpreter returns, for each whole frame, the action of the reference's handler
/// and counts the packet in that handler's slot.
pub fn pfmatch(data: &[u8]) {
    use weir::pfmatch::{parse, Dispatch};
    let Ok(text) = std::str::from_utf8(data) else { return };
    let program = match parse(text, LinkType::Ethernet, &NameDb::builtin()) {
        Ok(program) => program,
        Err(e) => {
            let lines = text.split('\n').count();
            assert!(e.line >= 1 && e.line <= lines, "error off the text's lines: {e}");
            let _ = e.render();
            return;
        }
    };
    let Ok(dispatch) = Dispatch::compile(&program) else { return };
    let native = weir::Dispatch::prepare(program.clone(), Some(weir::Engine::Native))
        .unwrap_or_else(|e| panic!("the dispatch does not compile natively: {e}"));
    let xdp = dispatch.xdp();
    let object = xdp.as_ref().ok().map(|x| {
        let bytes = weir::dispatch::xdp_object(&dispatch, "m").expect("the object writes");
        let obj = weir::Object::open(&bytes).expect("the object reads back");
        if let Some(devs) = x.program.maps().get(1) {
            for i in 0..devs.max_entries {
                obj.maps()[1].update_all(&i.to_ne_bytes(), &1u32.to_ne_bytes(), 0).unwrap();
            }
        }
        let entry = obj.entry(None, None).expect("one program");
        let loaded = obj
            .load_with(entry, Some(weir::Engine::Interp), 0, false)
            .unwrap_or_else(|e| panic!("the XDP dispatch does not load: {e}"));
        (obj, loaded)
    });
    let count = |obj: &weir::Object, key: u32| -> u64 {
        let v = obj.maps()[0].lookup_all(&key.to_ne_bytes()).unwrap_or_default();
        v.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).sum()
    };
    let mut object = object;
    for (packet, wire_len) in packets_from(data) {
        let reference = program.reference(&packet, wire_len);
        if let (Some((obj, loaded)), Ok(x)) = (object.as_mut(), xdp.as_ref()) {
            if wire_len as usize == packet.len() && packet.len() <= 0xffff {
                let key = x.count_key(reference.handler);
                let before = count(obj, key);
                let got = loaded.run(&packet).unwrap_or_else(|t| panic!("XDP trap {t:?}")).ret;
                assert_eq!(
                    got,
                    u64::from(x.action_value(reference.handler)),
                    "XDP dispatch and reference differ on {packet:02x?}"
                );
                assert_eq!(count(obj, key), before + 1, "XDP count on {packet:02x?}");
            }
        }
        assert_eq!(
            dispatch.run(&packet, wire_len),
            reference,
            "dispatch and reference differ on {packet:02x?}"
        );
        assert_eq!(
            native.run(&packet, wire_len),
            reference,
            "native dispatch and reference differ on {packet:02x?}"
        );
    }
}
