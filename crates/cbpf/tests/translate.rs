//! Differential tests of the classic-to-eBPF translation (`weir_cbpf::translate`). The
//! classic programs come from the system libpcap (`pcap_compile`, optimized and not) for
//! hundreds of tcpdump expressions, and from a proptest generator of random valid programs;
//! each is translated for both targets and run on weir's eBPF interpreter, and every verdict
//! must equal the reference interpreter's (`CbpfFilter`), itself checked against libpcap's
//! `bpf_filter` on the same packets.
//!
//! libpcap is loaded at run time through weir-sys, in the test only.

use proptest::prelude::*;
use weir_cbpf::translate::{bindings, sk_buff_context, translate, xdp_context, TranslateErrorKind};
use weir_cbpf::{CbpfFilter, CbpfValidateErrorKind, PacketMeta};
use weir_interp::{Config, Input, Interpreter};
use weir_isa::cbpf::ancillary::*;
use weir_isa::cbpf::{decode, CbpfInsn, CbpfOp, SockFilter, CBPF_OPCODES};
use weir_program::{ProgType, Program, Verified};
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::Packet;

use crate::EVERYDAY;

// ---------------------------------------------------------------------------------------
// libpcap

/// `pcap_compile` for Ethernet (DLT_EN10MB), snap length 262144, netmask unknown.
fn pcap_compile_expr(expr: &str, optimize: bool) -> Result<Vec<SockFilter>, String> {
    let insns = libpcap::required().compile(expr, 1, optimize)?;
    Ok(insns.iter().map(|i| SockFilter::new(i.code, i.jt, i.jf, i.k)).collect())
}

/// libpcap's own verdict (`raw` is a program libpcap compiled).
fn pcap_verdict(raw: &[BpfInsn], packet: &Packet) -> u32 {
    libpcap::required()
        .run(raw, &packet.data, packet.wire_len)
        .expect("libpcap validates its own program")
}

// ---------------------------------------------------------------------------------------
// Running translations

/// Both translations of one classic program, ready to run.
struct Translated {
    socket: Interpreter,
    xdp: Interpreter,
}

impl Translated {
    fn new(insns: &[CbpfInsn]) -> Result<Self, String> {
        let make = |target| -> Result<Interpreter, String> {
            let program = translate(insns, target).map_err(|e| format!("{target}: {e}"))?;
            Verified::check(&program)
                .map(|p| Interpreter::new(&p, bindings(target), Config::default()))
                .map_err(|e| format!("{target}: translation does not validate: {e}"))
        };
        Ok(Translated { socket: make(ProgType::SocketFilter)?, xdp: make(ProgType::Xdp)? })
    }
}

/// r0 of the socket-filter translation: `__sk_buff.len` is the wire length, the packet the
/// captured bytes.
fn run_socket(interp: &Interpreter, data: &[u8], wire_len: u32, meta: &PacketMeta) -> u64 {
    let mut ctx = sk_buff_context(wire_len, meta);
    let mut packet = data.to_vec();
    let mut cache = interp.cache();
    interp
        .run(&mut cache, Input::new().ctx(&mut ctx).packet(&mut packet))
        .unwrap_or_else(|trap| panic!("socket-filter translation trapped: {trap:?}"))
}

/// r0 of the XDP translation on a whole frame.
fn run_xdp(interp: &Interpreter, data: &[u8]) -> u64 {
    let mut ctx = xdp_context();
    let mut packet = data.to_vec();
    let mut cache = interp.cache();
    interp
        .run(&mut cache, Input::new().ctx(&mut ctx).packet(&mut packet))
        .unwrap_or_else(|trap| panic!("XDP translation trapped: {trap:?}"))
}

/// Whether XDP can see this packet as libpcap does: it has no separate wire length, and
/// the target's frames end at offset 65535.
fn xdp_comparable(packet: &Packet) -> bool {
    u32::try_from(packet.data.len()).is_ok_and(|len| len == packet.wire_len && len <= 0xffff)
}

// ---------------------------------------------------------------------------------------
// Expressions

/// Generated combinations: direction and protocol qualifiers on addresses and ports,
/// encapsulations around atoms, and boolean nests of atoms.
fn generated() -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["src ", "dst ", "src or dst ", "src and dst "] {
        for (proto, prim) in [
            ("ip ", "host 10.0.0.2"),
            ("", "net 192.168.0.0/16"),
            ("ip6 ", "host 2001:db8::2"),
            ("tcp ", "port 443"),
            ("udp ", "port 53"),
            ("", "portrange 1000-2000"),
        ] {
            let (kind, rest) = prim.split_once(' ').unwrap_or((prim, ""));
            out.push(format!("{proto}{dir}{kind} {rest}"));
        }
    }
    let atoms = [
        "tcp",
        "udp",
        "icmp",
        "ip6",
        "arp",
        "port 53",
        "host 10.0.0.1",
        "len > 200",
        "tcp[tcpflags] & tcp-fin != 0",
        "ip[8] < 64",
        "udp dst port 123",
        "icmp6",
        "net 10.0.0.0/24",
        "tcp portrange 1-1024",
        "ip[6:2] & 0x1fff != 0",
    ];
    for wrap in ["vlan and ", "vlan 100 and ", "mpls and ", "pppoes and ", "not "] {
        for atom in atoms {
            if wrap.starts_with("mpls") && atom == "arp" {
                continue; // libpcap refuses ARP inside MPLS
            }
            out.push(format!("{wrap}{atom}"));
        }
    }
    let n = atoms.len();
    for i in 0..n {
        for step in [1, 4] {
            let a = atoms[i];
            let b = atoms[(i + step) % n];
            let c = atoms[(i + 2 * step + 1) % n];
            out.push(format!("{a} and {b}"));
            out.push(format!("{a} or not {b}"));
            out.push(format!("({a} or {b}) and not ({c})"));
        }
    }
    for (i, field) in ["ip[0]", "ip[2:2]", "tcp[2:2]", "udp[4:2]", "len"].iter().enumerate() {
        for op in ["+ 7", "- 3", "* 3", "/ 5", "% 7", "& 0xf0", "| 2", "^ 0xaa", "<< 1", ">> 2"] {
            out.push(format!("{field} {op} >= {}", 23 * (i + 1)));
        }
    }
    out
}

fn corpus_packets() -> Vec<Packet> {
    let mut packets = weir_testkit::corpus(0x7a5_1a7e, 1000);
    packets.extend(weir_testkit::edge_cases());
    packets
}

// ---------------------------------------------------------------------------------------
// The libpcap corpus test

#[derive(Default, Debug)]
struct Tally {
    expressions: usize,
    programs: usize,
    untranslatable: Vec<String>,
    socket_runs: usize,
    xdp_runs: usize,
    accepted: usize,
}

/// Checks one compiled program on every packet; panics at the first disagreement.
fn check_program(
    expr: &str,
    optimize: bool,
    raw: &[SockFilter],
    packets: &[Packet],
    tally: &mut Tally,
) {
    let place = format!("{expr:?} (optimize {optimize})");
    let insns = decode(raw).unwrap_or_else(|e| panic!("{place}: {e}"));
    tally.programs += 1;
    let reference = match CbpfFilter::new(&insns) {
        Ok(filter) => filter,
        Err(invalid) => {
            // Only libpcap's own loops (protochain) break the kernel rules; the translation
            // must refuse them at the same instruction.
            for target in [ProgType::SocketFilter, ProgType::Xdp] {
                let err = translate(&insns, target).expect_err(&place);
                assert_eq!(err.index, invalid.index, "{place}");
                assert_eq!(err.kind, TranslateErrorKind::Invalid(invalid.kind.clone()), "{place}");
            }
            tally.untranslatable.push(format!("{place}: {invalid}"));
            return;
        }
    };
    let translated = Translated::new(&insns).unwrap_or_else(|e| panic!("{place}: {e}"));
    let raw: Vec<BpfInsn> =
        raw.iter().map(|r| BpfInsn { code: r.code, jt: r.jt, jf: r.jf, k: r.k }).collect();
    let meta = PacketMeta::default();
    for (index, packet) in packets.iter().enumerate() {
        let what = format!("{place}, packet {index} ({})", packet.description);
        let want = reference.run(&packet.data, packet.wire_len);
        assert_eq!(want, pcap_verdict(&raw, packet), "{what}: reference vs libpcap");
        let socket = run_socket(&translated.socket, &packet.data, packet.wire_len, &meta);
        assert_eq!(socket, u64::from(want), "{what}: socket-filter translation");
        tally.socket_runs += 1;
        if xdp_comparable(packet) {
            assert_eq!(run_xdp(&translated.xdp, &packet.data), u64::from(want), "{what}: XDP");
            tally.xdp_runs += 1;
        }
        tally.accepted += usize::from(want != 0);
    }
}

#[test]
fn translations_agree_with_the_reference_on_libpcap_programs() {
    let packets = corpus_packets();
    let whole = packets.iter().filter(|p| xdp_comparable(p)).count();
    let mut exprs: Vec<String> = EVERYDAY.iter().map(|s| (*s).to_owned()).collect();
    exprs.extend(generated());
    exprs.sort();
    exprs.dedup();
    let mut tally = Tally::default();
    let mut compile_failures = Vec::new();
    for expr in &exprs {
        let mut compiled = false;
        for optimize in [false, true] {
            match pcap_compile_expr(expr, optimize) {
                Ok(raw) => {
                    check_program(expr, optimize, &raw, &packets, &mut tally);
                    compiled = true;
                }
                // The optimizer refuses to emit programs it proves reject everything.
                Err(e) if optimize && e.contains("rejects all packets") => {}
                Err(e) => compile_failures.push(format!("{expr:?} (optimize {optimize}): {e}")),
            }
        }
        tally.expressions += usize::from(compiled);
    }
    assert!(compile_failures.is_empty(), "libpcap failed:\n{}", compile_failures.join("\n"));
    println!(
        "translation agreement: {} expressions, {} programs ({} refused as not kernel-valid), \
         {} packets ({} whole frames for XDP); socket filter {} runs, XDP {} runs, all equal \
         to the reference and to libpcap; {} accepting verdicts",
        tally.expressions,
        tally.programs,
        tally.untranslatable.len(),
        packets.len(),
        whole,
        tally.socket_runs,
        tally.xdp_runs,
        tally.accepted,
    );
    for refused in &tally.untranslatable {
        println!("  refused: {refused}");
    }
    assert!(tally.expressions >= 300, "only {} expressions", tally.expressions);
    // Exactly the protochain programs (their loops jump backward) are refused.
    let protochain = exprs.iter().filter(|e| e.contains("protochain")).count();
    assert!(tally.untranslatable.iter().all(|r| r.contains("protochain")));
    assert!(tally.untranslatable.len() <= 2 * protochain && !tally.untranslatable.is_empty());
    // The corpus exercises both verdicts and both kinds of frame.
    assert!(tally.accepted > 0 && tally.accepted < tally.socket_runs);
    assert!(whole > 500 && whole < packets.len(), "{whole} whole frames");
}

// ---------------------------------------------------------------------------------------
// Hand-picked semantics

/// Runs `prog` through the reference and both translations on `packets` (whole frames).
fn assert_agrees(prog: &[CbpfInsn], packets: &[&[u8]]) {
    let reference = CbpfFilter::new(prog).expect("valid program");
    let translated = Translated::new(prog).expect("translatable");
    for data in packets {
        let len = u32::try_from(data.len()).unwrap();
        let want = u64::from(reference.run(data, len));
        let meta = PacketMeta::default();
        assert_eq!(run_socket(&translated.socket, data, len, &meta), want, "socket, {prog:?}");
        assert_eq!(run_xdp(&translated.xdp, data), want, "XDP, {prog:?}");
    }
}

#[test]
fn shifts_and_divisions_by_x_follow_libpcap() {
    use CbpfOp::*;
    let frame = [0x45u8, 0, 0, 0];
    for x in [0u32, 1, 5, 31, 32, 33, 63, 64, 255, 0x8000_0000, u32::MAX] {
        for op in [LshX, RshX, DivX, ModX] {
            // X from a constant: the translation knows its bound.
            let known = [
                CbpfInsn::stmt(LdImm, 0xdefc0),
                CbpfInsn::stmt(LdxImm, x),
                CbpfInsn::stmt(op, 0),
                CbpfInsn::stmt(RetA, 0),
            ];
            // X from A: unknown to the translation, so the guards must be there.
            let unknown = [
                CbpfInsn::stmt(LdImm, x),
                CbpfInsn::stmt(Tax, 0),
                CbpfInsn::stmt(LdImm, 0xdefc0),
                CbpfInsn::stmt(op, 0),
                CbpfInsn::stmt(RetA, 0),
            ];
            assert_agrees(&known, &[&frame]);
            assert_agrees(&unknown, &[&frame]);
        }
    }
    // The values that matter: a shift by 33 gives 0 (eBPF would shift by 1), and
    // division by zero returns 0 from the whole program.
    let prog = [
        CbpfInsn::stmt(LdImm, 33),
        CbpfInsn::stmt(Tax, 0),
        CbpfInsn::stmt(LdImm, 7),
        CbpfInsn::stmt(LshX, 0),
        CbpfInsn::stmt(AddK, 1),
        CbpfInsn::stmt(RetA, 0),
    ];
    assert_eq!(CbpfFilter::new(&prog).unwrap().run(&frame, 4), 1);
    assert_agrees(&prog, &[&frame]);
}

#[test]
fn indexed_loads_fail_where_x_plus_k_overflows() {
    use CbpfOp::*;
    let frame: Vec<u8> = (0u8..64).collect();
    // (X, k, fails): the kernel's int arithmetic would wrap the first three to offsets 19,
    // 0 and 0; the last reads the frame's last byte(s) or just past them.
    for (x, k, fails) in [
        (u32::MAX, 20, true),
        (0x8000_0000, 0x8000_0000, true),
        (0xffff_fff0, 0x10, true),
        (3, 60, false),
    ] {
        for op in [LdIndB, LdIndH, LdIndW] {
            let prog = [
                CbpfInsn::stmt(LdImm, x),
                CbpfInsn::stmt(Tax, 0),
                CbpfInsn::stmt(op, k),
                CbpfInsn::stmt(AddK, 1),
                CbpfInsn::stmt(RetA, 0),
            ];
            let verdict = CbpfFilter::new(&prog).unwrap().run(&frame, 64);
            assert_eq!(verdict == 0, fails || op != LdIndB, "{x:#x} {k:#x} {op:?}");
            assert_agrees(&prog, &[&frame]);
        }
    }
}

#[test]
fn large_constants_compare_as_unsigned_32_bit() {
    use CbpfOp::*;
    for (a, k) in [(u32::MAX, u32::MAX), (0x8000_0000, 0x8000_0000), (0x7fff_ffff, 0x8000_0000)] {
        for op in [JeqK, JgtK, JgeK, JsetK] {
            let prog = [
                CbpfInsn::stmt(LdImm, a),
                CbpfInsn::jump(op, k, 0, 1),
                CbpfInsn::stmt(RetK, 1),
                CbpfInsn::stmt(RetK, 2),
            ];
            assert_agrees(&prog, &[&[0u8; 4]]);
        }
    }
}

#[test]
fn absolute_loads_at_offsets_no_packet_reaches_return_zero() {
    use CbpfOp::*;
    let frame = [0xaau8; 80];
    for k in
        [60, 76, 77, 79, 80, 0x7fff, 0x8000, 0xfffe, 0xffff, 0x1_0000, 0x7fff_ffff, 0x8000_0000]
    {
        for op in [LdAbsB, LdAbsH, LdAbsW, LdxMsh] {
            let prog = [CbpfInsn::stmt(op, k), CbpfInsn::stmt(RetK, 9)];
            assert_agrees(&prog, &[&frame, &frame[..1], &[]]);
        }
    }
}

#[test]
fn ancillary_loads_read_the_sk_buff_fields() {
    let meta = PacketMeta {
        protocol: 0x86dd,
        pkttype: 3,
        ifindex: 7,
        mark: 0xdead_beef,
        queue: 5,
        hatype: 1,
        rxhash: 0x1234_5678,
        cpu: 2,
        vlan_tci: 0xe064,
        vlan_present: true,
        vlan_tpid: 0x88a8,
        random: 4,
    };
    let frame = [0u8; 20];
    for offset in [
        SKF_AD_PROTOCOL,
        SKF_AD_PKTTYPE,
        SKF_AD_IFINDEX,
        SKF_AD_MARK,
        SKF_AD_QUEUE,
        SKF_AD_RXHASH,
        SKF_AD_VLAN_TAG,
        SKF_AD_VLAN_TAG_PRESENT,
        SKF_AD_VLAN_TPID,
        SKF_AD_ALU_XOR_X,
    ] {
        for op in [CbpfOp::LdAbsB, CbpfOp::LdAbsH, CbpfOp::LdAbsW] {
            let prog = [
                CbpfInsn::stmt(CbpfOp::LdxImm, 0x0f0f),
                CbpfInsn::stmt(CbpfOp::LdImm, 0x3c3c),
                CbpfInsn::stmt(op, SKF_AD_OFF + offset),
                CbpfInsn::stmt(CbpfOp::RetA, 0),
            ];
            let want = CbpfFilter::new(&prog).unwrap().run_with_meta(&frame, 20, &meta);
            let program = translate(&prog, ProgType::SocketFilter).unwrap();
            let interp = Interpreter::new(
                &Verified::check(&program).unwrap(),
                bindings(ProgType::SocketFilter),
                Config::default(),
            );
            assert_eq!(run_socket(&interp, &frame, 20, &meta), u64::from(want), "{offset}");
        }
    }
}

#[test]
fn untranslatable_programs_name_the_instruction() {
    use CbpfOp::*;
    let ret = CbpfInsn::stmt(RetA, 0);
    for (offset, name) in [
        (SKF_AD_HATYPE, "SKF_AD_HATYPE"),
        (SKF_AD_CPU, "SKF_AD_CPU"),
        (SKF_AD_RANDOM, "SKF_AD_RANDOM"),
    ] {
        let prog = [CbpfInsn::stmt(LdImm, 1), CbpfInsn::stmt(LdAbsW, SKF_AD_OFF + offset), ret];
        let err = translate(&prog, ProgType::SocketFilter).unwrap_err();
        assert_eq!(err.index, 1);
        assert_eq!(err.kind, TranslateErrorKind::NoSkBuffField(name));
        assert_eq!(
            err.to_string(),
            format!("instruction 1: ancillary load {name} has no __sk_buff field to translate to")
        );
    }
    let prog = [CbpfInsn::stmt(LdAbsH, SKF_AD_OFF + SKF_AD_PROTOCOL), ret];
    let err = translate(&prog, ProgType::Xdp).unwrap_err();
    assert_eq!(
        (err.index, err.kind),
        (0, TranslateErrorKind::AncillaryWithoutSkb("SKF_AD_PROTOCOL"))
    );
    // Invalid programs are refused with the validator's reason and place.
    let prog = [CbpfInsn::stmt(LdImm, 1), CbpfInsn::stmt(DivK, 0), ret];
    let err = translate(&prog, ProgType::Xdp).unwrap_err();
    assert_eq!(
        (err.index, err.kind),
        (1, TranslateErrorKind::Invalid(CbpfValidateErrorKind::DivisionByZero("div")))
    );
    let err = translate(&[], ProgType::SocketFilter).unwrap_err();
    assert_eq!(err.kind, TranslateErrorKind::Invalid(CbpfValidateErrorKind::Empty));
}

// ---------------------------------------------------------------------------------------
// Random programs

/// The ancillary fields the socket-filter target translates.
const SOCKET_ANCILLARY: &[u32] = &[
    SKF_AD_PROTOCOL,
    SKF_AD_PKTTYPE,
    SKF_AD_IFINDEX,
    SKF_AD_MARK,
    SKF_AD_QUEUE,
    SKF_AD_RXHASH,
    SKF_AD_ALU_XOR_X,
    SKF_AD_VLAN_TAG,
    SKF_AD_VLAN_TAG_PRESENT,
    SKF_AD_VLAN_TPID,
];

/// Makes a raw choice of `k` fit the operation, so that the program passes validation.
fn fit_k(op: CbpfOp, k: u32, room: usize, ancillary: Option<u32>) -> u32 {
    use CbpfOp::*;
    match op {
        LdMem | LdxMem | St | Stx => k % 16,
        DivK | ModK => k.max(1),
        LshK | RshK => k % 32,
        Ja => k % room as u32,
        LdAbsW | LdAbsH | LdAbsB => match ancillary {
            Some(offset) => SKF_AD_OFF + offset,
            None => k % 0x1_0000,
        },
        LdxMsh => k % 0x1_0000,
        _ => k,
    }
}

/// A random program valid under the kernel's rules: the 16 scratch cells written first,
/// then a body drawn from every row of the opcode table with forward jumps, then a return.
/// With `ancillary`, some absolute loads read socket-filter ancillary fields.
fn valid_program(ancillary: bool) -> impl Strategy<Value = Vec<CbpfInsn>> {
    (1usize..48)
        .prop_flat_map(move |n| {
            let k = prop_oneof![
                4 => 0u32..80,
                1 => any::<u32>(),
                1 => Just(0u32),
                1 => 28u32..40,
                1 => prop_oneof![Just(u32::MAX), Just(0x8000_0000u32), Just(0x7fff_ffffu32)],
                1 => 0xfff0u32..0x1_0010,
            ];
            let field = if ancillary {
                prop_oneof![3 => Just(None), 1 => proptest::sample::select(SOCKET_ANCILLARY).prop_map(Some)].boxed()
            } else {
                prop_oneof![5 => Just(None), 1 => Just(Some(SKF_AD_ALU_XOR_X))].boxed()
            };
            (
                proptest::collection::vec(0..CBPF_OPCODES.len(), n),
                proptest::collection::vec(k, n),
                proptest::collection::vec((0u8..8, 0u8..8, any::<u8>(), any::<u8>()), n),
                proptest::collection::vec(field, n),
                proptest::collection::vec(any::<u32>(), 16),
                any::<u32>(),
            )
        })
        .prop_map(|(rows, ks, jumps, fields, seeds, ret_k)| {
            let mut prog = Vec::new();
            for (cell, seed) in seeds.iter().enumerate() {
                prog.push(CbpfInsn::stmt(CbpfOp::LdImm, *seed));
                prog.push(CbpfInsn::stmt(CbpfOp::St, cell as u32));
            }
            let body = rows.len();
            for (i, row) in rows.iter().enumerate() {
                let op = CBPF_OPCODES[*row].op;
                let room = body - i; // instructions after this one, the final return included
                let k = fit_k(op, ks[i], room, fields[i]);
                let (short_t, short_f, long_t, long_f) = jumps[i];
                // Mostly short jumps, which keep more of the program reachable.
                let pick = |short: u8, long: u8| {
                    let off = if long & 3 == 0 { long } else { short };
                    (off as usize % room) as u8
                };
                let (jt, jf) = if op.is_conditional_jump() {
                    (pick(short_t, long_t), pick(short_f, long_f))
                } else {
                    (0, 0)
                };
                prog.push(CbpfInsn::new(op, jt, jf, k));
            }
            prog.push(CbpfInsn::stmt(CbpfOp::RetK, ret_k));
            prog
        })
}

fn any_meta() -> impl Strategy<Value = PacketMeta> {
    (any::<(u16, u8, u32, u32, u16, u32)>(), any::<(u16, bool, u16)>()).prop_map(
        |(
            (protocol, pkttype, ifindex, mark, queue, rxhash),
            (vlan_tci, vlan_present, vlan_tpid),
        )| {
            PacketMeta {
                protocol,
                pkttype,
                ifindex,
                mark,
                queue,
                rxhash,
                vlan_tci,
                vlan_present,
                vlan_tpid,
                ..PacketMeta::default()
            }
        },
    )
}

/// Captured bytes and the wire length (at least as long).
fn any_record() -> impl Strategy<Value = (Vec<u8>, u32)> {
    (proptest::collection::vec(any::<u8>(), 0..100), prop_oneof![3 => Just(0u32), 1 => 0u32..100])
        .prop_map(|(data, extra)| {
            let wire_len = data.len() as u32 + extra;
            (data, wire_len)
        })
}

fn translate_for(prog: &[CbpfInsn], target: ProgType) -> (Program, Interpreter) {
    let program = translate(prog, target).expect("a valid program translates");
    let verified = Verified::check(&program).expect("the translation validates");
    let interp = Interpreter::new(&verified, bindings(target), Config::default());
    (program, interp)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_agree_as_socket_filters(
        prog in valid_program(true),
        records in proptest::collection::vec((any_record(), any_meta()), 1..6),
    ) {
        let reference = CbpfFilter::new(&prog).expect("generator makes valid programs");
        let (_, interp) = translate_for(&prog, ProgType::SocketFilter);
        for ((data, wire_len), meta) in &records {
            let want = reference.run_with_meta(data, *wire_len, meta);
            prop_assert_eq!(run_socket(&interp, data, *wire_len, meta), u64::from(want));
        }
    }

    #[test]
    fn random_programs_agree_as_xdp_programs(
        prog in valid_program(false),
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..100), 1..6),
    ) {
        let reference = CbpfFilter::new(&prog).expect("generator makes valid programs");
        let (_, interp) = translate_for(&prog, ProgType::Xdp);
        for data in &frames {
            let want = reference.run(data, data.len() as u32);
            prop_assert_eq!(run_xdp(&interp, data), u64::from(want));
        }
    }
}
