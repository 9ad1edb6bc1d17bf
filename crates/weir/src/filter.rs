//! A compiled filter bound to the engine chosen for it.

use std::sync::mpsc::{Receiver, TryRecvError};

use weir_cbpf::CbpfFilter;
use weir_filter::emit::{cbpf, ebpf};
use weir_filter::Filter;
use weir_jit::filter::NativeFilter;
use weir_program::abi::Bindings;
use weir_program::exec::{Engine as ExecEngine, Input, Limits, Prepared};
use weir_program::{ProgType, Program, Verified};

use crate::engine::{choose, Choice, ChoiceError, Engine, Subject};

/// A filter ready to run on packets, on one engine.
pub struct PreparedFilter {
    runner: Runner,
    choice: Choice,
}

/// Filters larger than this many IR nodes ([`weir_filter::opt::node_count`]), when no engine
/// is forced, start at once on the reference evaluator while their native code compiles on
/// a background thread, and switch to it when it is ready. Native code generation grows
/// with the filter (about 3-4 µs a node here: 10,000 nodes take tens of milliseconds, the
/// 10,000-pair firewall list of issue 13 seconds), the evaluator needs no compiling, and
/// both give the same verdict on every packet, so switching between packets changes
/// nothing but speed. A forced `--engine native` still compiles before the first packet.
pub const BACKGROUND_NATIVE_NODES: usize = 10_000;

enum Runner {
    Native(Box<NativeFilter>),
    /// A large filter: the reference evaluator until its native code arrives.
    Tiered(Box<Tiered>),
    Jit(Box<SocketFilterRun<weir_jit::JitProgram>>),
    Interp(Box<SocketFilterRun<weir_interp::Interpreter>>),
    Cbpf(CbpfFilter),
    Reference(Filter),
}

/// An eBPF socket-filter program on one engine, with its context and a packet buffer: eBPF
/// engines take the packet as writable memory, so each packet is copied into `packet`
/// first. The context is all zeros but `len` (no ancillary data: capture files carry none).
/// Or an XDP program ([`SocketFilterRun::prepare_xdp`]): the engine fills `data` and
/// `data_end`, and `XDP_PASS` is the accept.
pub(crate) struct SocketFilterRun<P: Prepared> {
    program: P,
    cache: P::Cache,
    ctx: Vec<u8>,
    /// Where `__sk_buff.len` goes (none for XDP).
    len_field: Option<usize>,
    xdp: bool,
    packet: Vec<u8>,
}

impl<P: Prepared> SocketFilterRun<P> {
    /// Prepares a socket-filter `program` on `engine` (`what` names the program in errors).
    pub(crate) fn prepare<E: ExecEngine<Prepared = P>>(
        engine: &E,
        program: Program,
        bindings: Bindings,
        what: &str,
    ) -> Result<Self, String> {
        Self::prepare_as(engine, program, bindings, what, ProgType::SocketFilter)
    }

    /// An XDP program (the eBPF emitter's XDP form) run as a filter: r0 is 1 for
    /// `XDP_PASS`, else 0.
    pub(crate) fn prepare_xdp<E: ExecEngine<Prepared = P>>(
        engine: &E,
        program: Program,
        what: &str,
    ) -> Result<Self, String> {
        let bindings = Bindings::for_prog_type(ProgType::Xdp);
        Self::prepare_as(engine, program, bindings, what, ProgType::Xdp)
    }

    fn prepare_as<E: ExecEngine<Prepared = P>>(
        engine: &E,
        program: Program,
        bindings: Bindings,
        what: &str,
        prog_type: ProgType,
    ) -> Result<Self, String> {
        let layout = prog_type.context_layout();
        let xdp = prog_type == ProgType::Xdp;
        let program = Verified::structural(program)
            .map_err(|e| format!("the {what} is not a valid program: {e}"))?;
        let program = engine
            .prepare(&program, bindings, Limits::default())
            .map_err(|e| format!("the {} engine cannot take the {what}: {e}", engine.name()))?;
        let cache = program.cache();
        let len_field = if xdp { None } else { layout.field("len").map(|f| f.offset as usize) };
        Ok(SocketFilterRun {
            program,
            cache,
            ctx: vec![0; layout.size as usize],
            len_field,
            xdp,
            packet: Vec::new(),
        })
    }

    /// r0 for one packet; a trap rejects (0), as an aborted filter does.
    pub(crate) fn run(&mut self, packet: &[u8], wire_len: u32) -> u64 {
        if let Some(field) = self.len_field.and_then(|at| self.ctx.get_mut(at..at + 4)) {
            field.copy_from_slice(&wire_len.to_le_bytes());
        }
        self.packet.clear();
        self.packet.extend_from_slice(packet);
        let input = Input::new().ctx(&mut self.ctx).packet(&mut self.packet);
        let r0 = self.program.run(&mut self.cache, input).map_or(0, |outcome| outcome.r0);
        if self.xdp {
            u64::from(r0 == u64::from(weir_program::abi::xdp_action::PASS))
        } else {
            r0
        }
    }
}

/// The reference evaluator, then native code compiled on another thread.
struct Tiered {
    filter: Filter,
    pending: Option<Receiver<Result<NativeFilter, weir_jit::filter::CompileError>>>,
    native: Option<NativeFilter>,
}

impl Tiered {
    fn start(filter: &Filter) -> Result<Tiered, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let owned = filter.clone();
        std::thread::Builder::new()
            .name("weir-native".into())
            // The lowering recurses as deep as the filter nests (1,100 levels at most).
            .stack_size(8 << 20)
            .spawn(move || {
                // Nobody may be listening any more (the run ended first): nothing to do.
                let _ = tx.send(weir_jit::filter::compile(&owned));
            })
            .map_err(|e| format!("cannot start the compiling thread: {e}"))?;
        Ok(Tiered { filter: filter.clone(), pending: Some(rx), native: None })
    }

    fn matches(&mut self, packet: &[u8], wire_len: u32) -> bool {
        if let Some(native) = &self.native {
            return native.matches(packet, wire_len);
        }
        if let Some(rx) = &self.pending {
            match rx.try_recv() {
                Ok(Ok(native)) => {
                    self.pending = None;
                    return self.native.insert(native).matches(packet, wire_len);
                }
                // A filter native code cannot take stays on the evaluator, which takes all.
                Ok(Err(_)) | Err(TryRecvError::Disconnected) => self.pending = None,
                Err(TryRecvError::Empty) => {}
            }
        }
        self.filter.matches(packet, wire_len)
    }

    /// Waits for the native code (tests and benchmarks: the verdicts do not depend on it).
    fn wait(&mut self) -> bool {
        if let Some(rx) = self.pending.take() {
            if let Ok(Ok(native)) = rx.recv() {
                self.native = Some(native);
            }
        }
        self.native.is_some()
    }
}

impl PreparedFilter {
    /// Prepares `filter` on the forced engine, or on the best one that can take it.
    pub fn new(filter: &Filter, forced: Option<Engine>) -> Result<PreparedFilter, ChoiceError> {
        let nodes = weir_filter::opt::node_count(&filter.pred);
        let background = forced.is_none() && nodes > BACKGROUND_NATIVE_NODES;
        let (runner, mut choice) = choose(Subject::Filter, forced, |engine| {
            if background && engine == Engine::Native {
                return Ok(Runner::Tiered(Box::new(Tiered::start(filter)?)));
            }
            prepare(filter, engine)
        })?;
        if matches!(runner, Runner::Tiered(_)) {
            // Replaces the generic line `choose` wrote for the native engine.
            choice.reasons.pop();
            choice.reasons.push(format!(
                "native: the filter has {nodes} IR nodes (more than {BACKGROUND_NATIVE_NODES}): \
                 its native code compiles on a background thread, and the reference evaluator \
                 filters until it is ready (same verdicts)"
            ));
        }
        Ok(PreparedFilter { runner, choice })
    }

    /// Blocks until a filter whose native code compiles in the background has it (see
    /// [`BACKGROUND_NATIVE_NODES`]); true when the filter now runs as native code.
    pub fn wait_for_native(&mut self) -> bool {
        match &mut self.runner {
            Runner::Native(_) => true,
            Runner::Tiered(tiered) => tiered.wait(),
            _ => false,
        }
    }

    /// Which engine runs the filter and why.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    pub fn engine(&self) -> Engine {
        self.choice.engine
    }

    /// Whether the filter accepts the packet (`wire_len` is its length on the wire).
    pub fn matches(&mut self, packet: &[u8], wire_len: u32) -> bool {
        match &mut self.runner {
            Runner::Native(native) => native.matches(packet, wire_len),
            Runner::Tiered(tiered) => tiered.matches(packet, wire_len),
            Runner::Jit(run) => run.run(packet, wire_len) != 0,
            Runner::Interp(run) => run.run(packet, wire_len) != 0,
            Runner::Cbpf(program) => program.run(packet, wire_len) != 0,
            Runner::Reference(filter) => filter.matches(packet, wire_len),
        }
    }
}

fn prepare(filter: &Filter, engine: Engine) -> Result<Runner, String> {
    Ok(match engine {
        Engine::Native => {
            Runner::Native(Box::new(weir_jit::filter::compile(filter).map_err(|e| e.to_string())?))
        }
        Engine::Jit if xdp_form(filter) => Runner::Jit(Box::new(SocketFilterRun::prepare_xdp(
            &weir_jit::Jit,
            emit_engine_xdp(filter)?,
            "emitted program",
        )?)),
        Engine::Interp if xdp_form(filter) => {
            Runner::Interp(Box::new(SocketFilterRun::prepare_xdp(
                &weir_interp::Interp,
                emit_engine_xdp(filter)?,
                "emitted program",
            )?))
        }
        Engine::Jit => Runner::Jit(Box::new(SocketFilterRun::prepare(
            &weir_jit::Jit,
            emit_socket_filter(filter)?,
            Bindings::for_prog_type(ProgType::SocketFilter),
            "emitted program",
        )?)),
        Engine::Interp => Runner::Interp(Box::new(SocketFilterRun::prepare(
            &weir_interp::Interp,
            emit_socket_filter(filter)?,
            Bindings::for_prog_type(ProgType::SocketFilter),
            "emitted program",
        )?)),
        Engine::Cbpf => {
            let insns = cbpf::emit(filter).map_err(|e| format!("classic BPF: {e}"))?;
            // A `protochain` walk loops with a backward `ja`, as libpcap's does: libpcap's
            // rules admit it (and weir-cbpf ends a packet's run at its 65th backward jump).
            let backward =
                insns.iter().any(|i| i.op == weir_isa::cbpf::CbpfOp::Ja && i.k >= 1 << 31);
            let filter =
                if backward { CbpfFilter::new_libpcap(&insns) } else { CbpfFilter::new(&insns) };
            Runner::Cbpf(filter.map_err(|e| format!("classic BPF: {e}"))?)
        }
        Engine::Reference => Runner::Reference(filter.clone()),
    })
}

/// Whether the eBPF engines run `filter` in the XDP form: a filter with pair-table nodes,
/// which that form emits with their loads shared (a few instructions a pair; the socket
/// form emits their expansion, a 10,000-pair list 459,468 instructions), when it does not
/// read `len` (XDP's `len` is the captured length, not the wire's). The verdicts are the
/// same: both forms abort where the filter does, and XDP reads the captured bytes.
fn xdp_form(filter: &Filter) -> bool {
    weir_filter::pairs::contains_pairs(&filter.pred) && !filter.pred.reads_wire_len()
}

fn emit_socket_filter(filter: &Filter) -> Result<Program, String> {
    emit_ebpf(filter, ProgType::SocketFilter)
}

/// The eBPF program weir gives for a filter: the shorter of the eBPF emitter's program and
/// the classic program (`cbpf::emit`, tightened as libpcap's optimizer would) translated by
/// weir-cbpf's classic-to-eBPF translation; the translation with its reloads of a packet
/// word taken from a register (`ebpf::reuse_legacy_loads`: a move each instead of a helper
/// call in the kernel, `host A or host B` 4 calls to 3 on IPv4: 2026-12-02-kernel-ebpf-1).
///
/// Why both: the classic emitter's flow-graph passes (jump threading, shared tails, dead
/// loads) have no counterpart in the eBPF emitter yet, and the translation turns each
/// classic load into one legacy packet load the kernel's JIT handles in a few
/// instructions, so for everyday filters the translated program is a third of the direct
/// one (`port 22`: 35 instructions against 99, 2026-11-25-emit record). The direct
/// emitter stays for what classic BPF cannot say (more temporaries than 16 cells, more than
/// 4096 instructions) and wherever it is shorter.
///
/// A filter with pair-table nodes (`host A and port P` lists): the eBPF emitter's program
/// alone, which emits each node's two walks once and then a few compares a pair or search
/// trees (`emit/ebpf/pairs.rs`; the socket form, whose legacy loads end the program on a
/// miss, first emits the few pairs that make the first walk safe as their terms). Over
/// `SHARED_PAIRS_COMPARED` slots that program is taken as it is (neither the classic
/// program nor the whole-filter optimizer over the expansion is needed); up to it, the
/// shorter of it and the expansion's forms. Where a node cannot share its loads (`ebpf::pair_lists_share_loads`), the
/// socket form takes the expansion optimized in place
/// (`weir_filter::pairs::expanded_optimized`; the expansion unoptimized is three times
/// longer).
pub fn emit_ebpf(filter: &Filter, prog_type: ProgType) -> Result<Program, String> {
    emit_ebpf_for(filter, prog_type, true)
}

/// The XDP form for weir's own eBPF engines ([`emit_ebpf`], but a long pair list keeps
/// its in-line scan: `ebpf::emit_for_weir`).
fn emit_engine_xdp(filter: &Filter) -> Result<Program, String> {
    emit_ebpf_for(filter, ProgType::Xdp, false)
}

fn emit_ebpf_for(
    filter: &Filter,
    prog_type: ProgType,
    for_kernel: bool,
) -> Result<Program, String> {
    let pairs = weir_filter::pairs::contains_pairs(&filter.pred);
    if pairs && prog_type.packet_access() == weir_program::PacketAccess::Xdp {
        let program = if for_kernel {
            ebpf::emit(filter, prog_type)
        } else {
            ebpf::emit_for_weir(filter, prog_type)
        };
        return program.map_err(|e| format!("eBPF emission: {e}"));
    }
    let shared = if pairs && ebpf::pair_lists_share_loads(filter, prog_type) {
        match ebpf::emit(filter, prog_type) {
            Ok(program) if program.insns().len() > SHARED_PAIRS_COMPARED => return Ok(program),
            program => program.ok(),
        }
    } else {
        None
    };
    let expanded = shortest_expanded(filter, prog_type);
    match (shared, expanded) {
        (Some(s), Ok(e)) if s.insns().len() < e.insns().len() => Ok(s),
        (Some(s), Err(_)) => Ok(s),
        (_, expanded) => expanded,
    }
}

/// Up to this many slots, a pair list's shared socket form is compared with the expansion
/// optimized, which is shorter for short lists (a firewall list's under about 60 pairs:
/// 8 pairs 241 slots against 678) and costs the optimizer a few milliseconds there, where
/// 10,000 pairs cost it 2.6 billion instructions (bench/records/2026-12-02-firewall-1.txt).
const SHARED_PAIRS_COMPARED: usize = 4_096;

/// The shorter of the eBPF emitter's program and the translated classic program, for
/// `filter` with its pair nodes expanded and optimized in place ([`emit_ebpf`]).
fn shortest_expanded(filter: &Filter, prog_type: ProgType) -> Result<Program, String> {
    let expanded = weir_filter::pairs::expanded_optimized(filter);
    let filter = expanded.as_ref().unwrap_or(filter);
    let direct = ebpf::emit(filter, prog_type);
    let translated = cbpf::emit(filter)
        .ok()
        .and_then(|insns| weir_cbpf::translate::translate(&insns, prog_type).ok());
    match (direct, translated) {
        (Ok(d), Some(t)) if t.insns().len() <= d.insns().len() => Ok(ebpf::reuse_legacy_loads(t)),
        (Ok(d), _) => Ok(d),
        (Err(_), Some(t)) => Ok(ebpf::reuse_legacy_loads(t)),
        (Err(e), None) => Err(format!("eBPF emission: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile_filter, LinkType};
    use weir_filter::{Expr, Pred, Size};

    #[test]
    fn a_large_filter_starts_on_the_evaluator_and_switches_to_native_code() {
        // 6,000 byte tests: 24,001 nodes, over BACKGROUND_NATIVE_NODES.
        let tests = (0..6_000u32).map(|i| Pred::eq(Expr::load_at(i % 60, Size::Byte), i % 251));
        let filter = Filter::new(Pred::And(vec![
            Pred::eq(Expr::load_at(0, Size::Byte), 7),
            Pred::Or(tests.collect()),
        ]));
        assert!(weir_filter::opt::node_count(&filter.pred) > BACKGROUND_NATIVE_NODES);
        let packets = weir_testkit::edge_cases();
        let mut tiered = PreparedFilter::new(&filter, None).unwrap();
        assert_eq!(tiered.engine(), Engine::Native);
        let explained = tiered.choice().to_string();
        assert!(explained.contains("background thread"), "{explained}");
        let check = |run: &mut PreparedFilter| {
            let mut matched = 0;
            for p in &packets {
                let mut data = p.data.clone();
                if let Some(first) = data.first_mut() {
                    *first = 7;
                }
                let want = filter.matches(&data, p.wire_len);
                assert_eq!(run.matches(&data, p.wire_len), want, "{:02x?}", data);
                matched += usize::from(want);
            }
            assert!(matched > 0);
        };
        check(&mut tiered);
        assert!(tiered.wait_for_native());
        check(&mut tiered);
        // Forced, it compiles before the first packet.
        let mut forced = PreparedFilter::new(&filter, Some(Engine::Native)).unwrap();
        assert!(!forced.choice().to_string().contains("background"));
        check(&mut forced);
    }

    #[test]
    fn emit_ebpf_is_the_shorter_program_and_filters_as_the_ir_does() {
        let hosts: Vec<String> =
            (1..=300).map(|i| format!("host 10.1.{}.{}", i / 200, i % 200)).collect();
        let set = hosts.join(" or ");
        let exprs = ["port 22", "host 10.0.0.1 and udp", "vlan", "ip6 host 2001:db8::1", &set];
        let packets = weir_testkit::edge_cases();
        for expr in exprs {
            let filter = compile_filter(expr, LinkType::Ethernet).unwrap();
            let chosen = emit_ebpf(&filter, ProgType::SocketFilter).unwrap().insns().len();
            let direct = ebpf::emit(&filter, ProgType::SocketFilter).unwrap().insns().len();
            let translated = cbpf::emit(&filter)
                .ok()
                .and_then(|c| weir_cbpf::translate::translate(&c, ProgType::SocketFilter).ok());
            // The choice is by length before the translation's reloads are reused.
            let want = match translated {
                Some(t) if t.insns().len() <= direct => ebpf::reuse_legacy_loads(t).insns().len(),
                _ => direct,
            };
            assert_eq!(chosen, want, "{expr}");
            // The eBPF engines run emit_ebpf's program: it must agree with the IR.
            let mut run = PreparedFilter::new(&filter, Some(Engine::Interp)).unwrap();
            for p in &packets {
                let want = filter.matches(&p.data, p.wire_len);
                assert_eq!(run.matches(&p.data, p.wire_len), want, "{expr}: {:02x?}", p.data);
            }
        }
    }
    #[test]
    fn pair_lists_are_emitted_shorter_than_their_expansion() {
        // 40 `host A and port P` terms: fused into one pair-table node by the lowering.
        let terms: Vec<String> =
            (0..40).map(|i| format!("not (host 10.0.{i}.1 and port {})", 1000 + i)).collect();
        let expr = format!("not ({})", terms.join(" and "));
        let filter = compile_filter(&expr, LinkType::Ethernet).unwrap();
        assert!(weir_filter::pairs::contains_pairs(&filter.pred), "the list was not fused");
        let expanded = Filter {
            pred: weir_filter::pairs::expand_pairs(filter.pred.clone()),
            accept: filter.accept,
        };
        let as_is = ebpf::emit(&expanded, ProgType::SocketFilter).unwrap().insns().len();
        let chosen = emit_ebpf(&filter, ProgType::SocketFilter).unwrap().insns().len();
        // The socket form shares the node's loads (`emit/ebpf/pairs.rs`), as the expansion
        // optimized in place did; emitted as it stands, every term reloads them.
        assert!(chosen * 2 < as_is, "{chosen} instructions against {as_is} unoptimized");
        let mut run = PreparedFilter::new(&filter, Some(Engine::Interp)).unwrap();
        for p in &weir_testkit::edge_cases() {
            let want = filter.matches(&p.data, p.wire_len);
            assert_eq!(run.matches(&p.data, p.wire_len), want, "{:02x?}", p.data);
        }
    }

    /// A 60-byte TCP/IPv4 Ethernet frame from `src`:`sport` to 10.9.9.9:80.
    fn tcp4_frame_to_port_80(src: [u8; 4], sport: u16) -> [u8; 60] {
        let mut frame = [0u8; 60];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[23] = 6;
        frame[26..30].copy_from_slice(&src);
        frame[30..34].copy_from_slice(&[10, 9, 9, 9]);
        frame[34..36].copy_from_slice(&sport.to_be_bytes());
        frame[36..38].copy_from_slice(&80u16.to_be_bytes());
        frame
    }

    #[test]
    fn pair_lists_run_in_the_xdp_form_on_the_ebpf_engines() {
        // From 10.0.3.1:1003, term 3's pair.
        let frame = tcp4_frame_to_port_80([10, 0, 3, 1], 1003);
        let terms: Vec<String> =
            (0..40).map(|i| format!("not (host 10.0.{i}.1 and port {})", 1000 + i)).collect();
        let list = format!("not ({})", terms.join(" and "));
        for (expr, xdp) in [(list.clone(), true), (format!("({list}) and len > 40"), false)] {
            let filter = compile_filter(&expr, LinkType::Ethernet).unwrap();
            assert_eq!(xdp_form(&filter), xdp, "{expr}");
            let mut accepted = 0;
            for engine in [Engine::Interp, Engine::Jit] {
                let mut run = PreparedFilter::new(&filter, Some(engine)).unwrap();
                // Cut at every length (the wire length stays the frame's).
                for cut in 0..=frame.len() {
                    let (data, wire) = (&frame[..cut], frame.len() as u32);
                    let want = filter.matches(data, wire);
                    assert_eq!(run.matches(data, wire), want, "{engine:?} cut at {cut}");
                    accepted += usize::from(want);
                }
                for p in &weir_testkit::edge_cases() {
                    let want = filter.matches(&p.data, p.wire_len);
                    assert_eq!(run.matches(&p.data, p.wire_len), want, "{:02x?}", p.data);
                }
            }
            assert!(accepted > 0, "{expr}: no cut accepted");
        }
    }

    /// Frames for the pair-list tests: TCP and UDP over IPv4 between hosts of `hosts` and
    /// ports of `ports` (the first two from `listed`'s host and port, one each way), an
    /// ARP frame between two of the hosts, a TCP/IPv6 frame.
    fn pair_test_frames(
        rng: &mut weir_testkit::SplitMix64,
        hosts: &[[u8; 4]],
        ports: &[u16],
        listed: ([u8; 4], u16),
    ) -> Vec<Vec<u8>> {
        let pick_host = |rng: &mut weir_testkit::SplitMix64| hosts[rng.below_usize(hosts.len())];
        let mut frames = Vec::new();
        for proto in [6u8, 17, 6, 17] {
            let (src, dst) = (pick_host(rng), pick_host(rng));
            let sport = ports[rng.below_usize(ports.len())];
            let dport = ports[rng.below_usize(ports.len())];
            let mut frame = tcp4_frame_to_port_80(src, sport).to_vec();
            frame[23] = proto;
            frame[30..34].copy_from_slice(&dst);
            frame[36..38].copy_from_slice(&dport.to_be_bytes());
            frames.push(frame);
        }
        let (host, port) = listed;
        frames[0][26..30].copy_from_slice(&host);
        frames[0][34..36].copy_from_slice(&port.to_be_bytes());
        frames[1][30..34].copy_from_slice(&host);
        frames[1][36..38].copy_from_slice(&port.to_be_bytes());
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        arp[28..32].copy_from_slice(&pick_host(rng));
        arp[38..42].copy_from_slice(&pick_host(rng));
        frames.push(arp);
        let mut ip6 = vec![0u8; 74];
        ip6[12..14].copy_from_slice(&[0x86, 0xdd]);
        ip6[14] = 0x60;
        ip6[20] = 6;
        ip6[54..56].copy_from_slice(&ports[0].to_be_bytes());
        ip6[56..58].copy_from_slice(&ports[ports.len() - 1].to_be_bytes());
        frames.push(ip6);
        frames
    }

    /// The socket form of a pair list (`weir compile --ebpf`'s default target) shares the
    /// walks' loads: random lists over small pools of hosts and ports (repeated hosts and
    /// ports, several term shapes; or-joined, the firewall's form and as a block list), on
    /// frames cut at every length, give the IR's verdicts on weir's interpreter and, as
    /// root, in the kernel (BPF_PROG_TEST_RUN).
    #[test]
    fn pair_lists_in_the_socket_form_share_their_loads() {
        let kernel = weir_sys::kernel::Kernel::new();
        let in_kernel = match kernel.available() {
            Ok(()) => true,
            Err(reason) => {
                println!("SKIPPED: pair_lists_in_the_socket_form_share_their_loads: kernel part: {reason}");
                false
            }
        };
        let shapes: [fn(String, u16) -> String; 5] = [
            |h, p| format!("host {h} and port {p}"),
            |h, p| format!("src host {h} and tcp port {p}"),
            |h, p| format!("dst host {h} and udp dst port {p}"),
            |h, p| format!("ip host {h} and port {p}"),
            |h, p| format!("host {h} and src port {p}"),
        ];
        let mut rng = weir_testkit::SplitMix64::new(13);
        let (mut shared, mut cuts, mut accepted, mut kernel_cuts) = (0, 0, 0, 0);
        for round in 0..36 {
            let hosts: Vec<[u8; 4]> =
                (0..2 + rng.below_usize(6)).map(|i| [10, 0, round as u8, i as u8 + 1]).collect();
            let ports: Vec<u16> = (0..2 + rng.below_usize(6)).map(|i| 1000 + i as u16).collect();
            let shape = shapes[round % shapes.len()];
            // A few pairs of hosts no frame has first (the socket form emits the pairs up to
            // a third distinct host as their terms), then pairs from the pools.
            let decoys = rng.below_usize(5);
            let mut pairs: Vec<([u8; 4], u16)> = Vec::new();
            for i in 0..decoys {
                pairs.push(([10, 99, round as u8, i as u8], ports[rng.below_usize(ports.len())]));
            }
            for _ in 0..8 + rng.below_usize(40) {
                let host = hosts[rng.below_usize(hosts.len())];
                pairs.push((host, ports[rng.below_usize(ports.len())]));
            }
            let terms: Vec<String> = pairs
                .iter()
                .map(|&([a, b, c, d], port)| shape(format!("{a}.{b}.{c}.{d}"), port))
                .collect();
            let expr = match round % 3 {
                0 => terms.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(" or "),
                1 => format!(
                    "not ({})",
                    terms.iter().map(|t| format!("not ({t})")).collect::<Vec<_>>().join(" and ")
                ),
                _ => format!(
                    "not ({})",
                    terms.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(" or ")
                ),
            };
            let filter = compile_filter(&expr, LinkType::Ethernet).unwrap();
            if !weir_filter::pairs::contains_pairs(&filter.pred) {
                continue;
            }
            // The emitter's shared form itself: for lists this short, emit_ebpf keeps the
            // expansion optimized when that is shorter.
            let program = ebpf::emit(&filter, ProgType::SocketFilter).unwrap();
            let chosen = emit_ebpf(&filter, ProgType::SocketFilter).unwrap().insns().len();
            assert!(chosen <= program.insns().len(), "{expr}");
            if ebpf::pair_lists_share_loads(&filter, ProgType::SocketFilter) {
                shared += 1;
            }
            let loaded = in_kernel.then(|| {
                let code = weir_isa::ebpf::encode_bytes(program.insns());
                kernel.load(ProgType::SocketFilter, &code).unwrap_or_else(|e| panic!("{expr}: {e}"))
            });
            let mut run = SocketFilterRun::prepare(
                &weir_interp::Interp,
                program,
                Bindings::for_prog_type(ProgType::SocketFilter),
                "socket form",
            )
            .unwrap();
            let listed = pairs[decoys + rng.below_usize(pairs.len() - decoys)];
            for frame in pair_test_frames(&mut rng, &hosts, &ports, listed) {
                for cut in 0..=frame.len() {
                    let (data, wire) = (&frame[..cut], frame.len() as u32);
                    let want = filter.matches(data, wire);
                    let got = run.run(data, wire) != 0;
                    assert_eq!(got, want, "{expr}: {frame:02x?} cut at {cut}");
                    cuts += 1;
                    accepted += usize::from(want);
                    // The kernel's test run gives a socket filter the frame past an Ethernet
                    // header: the program sees `data` behind 14 bytes of its own.
                    if let Some(loaded) = &loaded {
                        let mut framed = vec![0u8; 14];
                        framed.extend_from_slice(data);
                        let kernel_says = loaded.test_run(&framed, 1).unwrap().retval != 0;
                        assert_eq!(kernel_says, want, "kernel: {expr}: {frame:02x?} cut at {cut}");
                        kernel_cuts += 1;
                    }
                }
            }
        }
        println!(
            "{shared} lists shared, {cuts} cuts ({accepted} accepted), {kernel_cuts} in the kernel"
        );
        assert!(
            shared >= 20 && accepted > 0 && accepted < cuts,
            "{shared} shared, {accepted} of {cuts}"
        );
    }

    /// The search trees of the XDP form (a list past the kernel's in-line limit) and of the
    /// socket form, with hosts of one port and hosts of several (a tree's leaf ends in the
    /// tree's shared tail, or tests its own second values): on frames cut at every length,
    /// the IR's verdicts on weir's interpreter and, as root, in the kernel
    /// (BPF_PROG_TEST_RUN), as an allow list and as a block list.
    #[test]
    fn long_pair_lists_with_repeated_hosts_in_both_forms() {
        let kernel = weir_sys::kernel::Kernel::new();
        let in_kernel = match kernel.available() {
            Ok(()) => true,
            Err(reason) => {
                println!("SKIPPED: long_pair_lists_with_repeated_hosts_in_both_forms: kernel part: {reason}");
                false
            }
        };
        let host = |h: usize| [10, (h / 256) as u8, (h % 256) as u8, 1];
        // Hosts 0-1,199 with port 1 + i; hosts 0-299 again with a second port, host 7 with
        // its first port again (a repeat, not a second value): 1,501 pairs, past the
        // in-line scan's limit.
        let mut pairs: Vec<(usize, u16)> = (0..1_200).map(|i| (i, 1 + i as u16)).collect();
        pairs.extend((1_200..1_500).map(|i| (i % 300, 1 + i as u16)));
        pairs.push((7, 8));
        let terms: Vec<String> = pairs
            .iter()
            .map(|&(h, port)| {
                let [a, b, c, d] = host(h);
                format!("not (host {a}.{b}.{c}.{d} and port {port})")
            })
            .collect();
        let list = format!("not ({})", terms.join(" and "));
        let from = |h: usize, sport: u16| tcp4_frame_to_port_80(host(h), sport).to_vec();
        let mut udp_to = from(2_000, 53);
        udp_to[23] = 17;
        udp_to[30..34].copy_from_slice(&host(1_250 % 300));
        udp_to[36..38].copy_from_slice(&1_251u16.to_be_bytes());
        // Both hosts listed, of one port each: the source's pair comes first and fails,
        // the destination's matches on the destination port (the second walk's second word).
        let mut both = from(600, 40_000);
        both[30..34].copy_from_slice(&host(900));
        both[36..38].copy_from_slice(&901u16.to_be_bytes());
        let frames = [
            from(527, 528),   // a host of one port, its port
            from(527, 529),   // the same host, another pair's port
            from(120, 1_321), // a host of two ports, its second
            from(120, 121),   // the same host, its first
            from(7, 8),       // the repeated pair
            from(2_000, 528), // a host in no pair
            udp_to,           // a second port, the host as destination
            both,
        ];
        let (mut accepted, mut rejected, mut kernel_runs) = (0, 0, 0);
        for expr in [list.clone(), format!("not ({list})")] {
            let filter = compile_filter(&expr, LinkType::Ethernet).unwrap();
            let program = emit_ebpf(&filter, ProgType::Xdp).unwrap();
            let in_line = emit_engine_xdp(&filter).unwrap().insns().len();
            assert_ne!(program.insns().len(), in_line, "not the search trees");
            // The socket form's trees too: the shared form itself, which this list can take.
            assert!(ebpf::pair_lists_share_loads(&filter, ProgType::SocketFilter));
            let socket = ebpf::emit(&filter, ProgType::SocketFilter).unwrap();
            for (prog_type, program) in [(ProgType::Xdp, program), (ProgType::SocketFilter, socket)]
            {
                let xdp = prog_type == ProgType::Xdp;
                let loaded = in_kernel.then(|| {
                    let code = weir_isa::ebpf::encode_bytes(program.insns());
                    kernel.load(prog_type, &code).unwrap_or_else(|e| panic!("{e}"))
                });
                let interp = &weir_interp::Interp;
                let mut run = if xdp {
                    SocketFilterRun::prepare_xdp(interp, program, "XDP form").unwrap()
                } else {
                    let bindings = Bindings::for_prog_type(prog_type);
                    SocketFilterRun::prepare(interp, program, bindings, "socket form").unwrap()
                };
                let frames_cut = frames.iter().flat_map(|f| (0..=f.len()).map(move |cut| (f, cut)));
                for (frame, cut) in frames_cut {
                    let (data, wire) = (&frame[..cut], frame.len() as u32);
                    let want = filter.matches(data, wire);
                    let at = || format!("{prog_type:?} {:?} cut at {cut}", &frame[26..38]);
                    assert_eq!(run.run(data, wire) != 0, want, "interpreter, {}", at());
                    accepted += usize::from(want);
                    rejected += usize::from(!want);
                    // XDP's test run takes no frame shorter than an Ethernet header; a socket
                    // filter's gives the program the frame past one of its own.
                    let Some(loaded) = &loaded else { continue };
                    let got = if xdp {
                        if cut < 14 {
                            continue;
                        }
                        let pass = weir_program::abi::xdp_action::PASS;
                        loaded.test_run(data, 1).unwrap().retval == pass
                    } else {
                        let mut framed = vec![0u8; 14];
                        framed.extend_from_slice(data);
                        loaded.test_run(&framed, 1).unwrap().retval != 0
                    };
                    assert_eq!(got, want, "kernel, {}", at());
                    kernel_runs += 1;
                }
            }
        }
        println!("{accepted} accepted, {rejected} rejected, {kernel_runs} in the kernel");
        assert!(accepted > 0 && rejected > 0, "{accepted} accepted, {rejected} rejected");
    }

    /// A pair list past the kernel's in-line limit: `weir compile --ebpf` takes the search
    /// trees (the kernel's verifier refuses the in-line scan), weir's own engines keep the
    /// in-line scan, fewer slots, and both forms give the IR's verdicts on a frame cut at
    /// every length, as an allow list and as a block list (`not (list)`: there a pair whose
    /// port is cut off aborts and rejects, where a pair that is not there accepts).
    #[test]
    fn long_pair_lists_keep_the_in_line_scan_on_weirs_engines() {
        let terms: Vec<String> = (0..1_500)
            .map(|i| format!("not (host 10.{}.{}.1 and port {})", i / 256, i % 256, 1 + i))
            .collect();
        let list = format!("not ({})", terms.join(" and "));
        // From 10.2.15.1:528 (pair 527), and from a host not in the list.
        let frames = [
            tcp4_frame_to_port_80([10, 2, 15, 1], 528),
            tcp4_frame_to_port_80([10, 200, 0, 1], 528),
        ];
        for expr in [list.clone(), format!("not ({list})")] {
            let filter = compile_filter(&expr, LinkType::Ethernet).unwrap();
            let kernel = emit_ebpf(&filter, ProgType::Xdp).unwrap();
            let engines = emit_engine_xdp(&filter).unwrap();
            let (k, e) = (kernel.insns().len(), engines.insns().len());
            assert!(e * 2 < k, "engines {e} slots, kernel {k}");
            let mut kernel_form =
                SocketFilterRun::prepare_xdp(&weir_interp::Interp, kernel, "kernel form").unwrap();
            let mut run = PreparedFilter::new(&filter, Some(Engine::Interp)).unwrap();
            let (mut accepted, mut rejected) = (0, 0);
            for (frame, cut) in frames.iter().flat_map(|f| (0..=f.len()).map(move |cut| (f, cut))) {
                let (data, wire) = (&frame[..cut], frame.len() as u32);
                let want = filter.matches(data, wire);
                let at = || format!("{:?} cut at {cut}", &frame[26..30]);
                assert_eq!(run.matches(data, wire), want, "engines' form, {}", at());
                let got = kernel_form.run(data, wire) != 0;
                assert_eq!(got, want, "kernel's form, {}", at());
                accepted += usize::from(want);
                rejected += usize::from(!want);
            }
            assert!(accepted > 0 && rejected > 0, "{accepted} accepted, {rejected} rejected");
        }
    }
}
