//! Differential tests of weir's classic interpreter against the system libpcap, the oracle
//! for classic BPF semantics. libpcap compiles hundreds of tcpdump expressions (optimized and
//! not); each program then runs through weir's [`CbpfFilter`] and through libpcap's own
//! `bpf_filter` over the deterministic packet corpus, and every returned value must agree.
//! A proptest does the same for random valid programs built from the opcode table.
//!
//! libpcap is loaded at run time through weir-sys, in the test only.

use proptest::prelude::*;
use weir_cbpf::{validate, CbpfFilter, PacketMeta, Rules};
use weir_isa::cbpf::ancillary::{SKF_AD_OFF, SKF_AD_PKTTYPE};
use weir_isa::cbpf::{decode, encode, CbpfInsn, CbpfOp, SockFilter, CBPF_OPCODES};
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::Packet;

use crate::EVERYDAY;

/// Compiles `expr` for Ethernet with libpcap, as for a live Linux capture (so `inbound` is
/// the kernel's packet-type load, an ancillary load these tests exercise; compiling for a
/// capture file, libpcap refuses it on Ethernet), and returns the program's records.
fn pcap_compile_expr(expr: &str, optimize: bool) -> Result<Vec<SockFilter>, String> {
    let insns = libpcap::required().compile_live(expr, 1, optimize)?;
    Ok(insns.iter().map(|i| SockFilter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect())
}

/// libpcap's verdict for `prog` (which must pass libpcap's validation: the callers check it
/// with weir's equivalent first) on `packet`.
fn pcap_run(prog: &[SockFilter], packet: &Packet) -> u32 {
    let insns: Vec<BpfInsn> =
        prog.iter().map(|r| BpfInsn { code: r.code, jt: r.jt, jf: r.jf, k: r.k }).collect();
    libpcap::required()
        .run(&insns, &packet.data, packet.wire_len)
        .expect("libpcap's bpf_validate refuses a program weir's validation accepts")
}

fn packets() -> Vec<Packet> {
    let mut all = weir_testkit::corpus(0x5eed_cb9f, 1500);
    all.extend(weir_testkit::edge_cases());
    all
}

/// Generated combinations: qualifiers x primitives, wrapped in encapsulations, and boolean
/// nests of atoms.
fn generated() -> Vec<String> {
    let mut out = Vec::new();
    let addr_prims = [
        "host 10.0.0.1",
        "net 10.0.0.0/8",
        "net 192.168.1.0/24",
        "host 2001:db8::1",
        "net 2001:db8::/48",
    ];
    for dir in ["", "src ", "dst ", "src or dst ", "src and dst "] {
        for prim in addr_prims {
            let (kind, rest) = prim.split_once(' ').unwrap_or((prim, ""));
            let v6 = rest.contains(':');
            for proto in ["", if v6 { "ip6 " } else { "ip " }] {
                out.push(format!("{proto}{dir}{kind} {rest}"));
            }
        }
        for port in ["port 80", "port 53", "portrange 1-1024", "portrange 5000-6000"] {
            for proto in ["", "tcp ", "udp ", "sctp "] {
                out.push(format!("{proto}{dir}{port}"));
            }
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
        "src net 172.16.0.0/12",
        "udp dst port 123",
        "ip6 host fe80::1",
        "ether src 02:00:00:00:00:01",
        "icmp6",
        "igmp",
        "ip[1] & 0xfc = 0xb8",
        "tcp dst portrange 8000-8100",
        "ip proto 47",
        "len < 100",
    ];
    // libpcap refuses these pairings (no ARP over MPLS, no MAC addresses inside PPPoE).
    let refused = |wrap: &str, atom: &str| {
        (wrap.starts_with("mpls") && atom == "arp")
            || (wrap.starts_with("pppoes") && atom.starts_with("ether"))
    };
    for wrap in
        ["vlan and ", "vlan 100 and ", "mpls and ", "pppoes and ", "not ", "vlan and vlan and "]
    {
        for atom in atoms.iter().filter(|a| !refused(wrap, a)) {
            out.push(format!("{wrap}{atom}"));
        }
    }
    let n = atoms.len();
    for i in 0..n {
        for step in [1, 3, 7] {
            let a = atoms[i];
            let b = atoms[(i + step) % n];
            let c = atoms[(i + step * 2 + 1) % n];
            out.push(format!("{a} and {b}"));
            out.push(format!("{a} or not {b}"));
            out.push(format!("({a} or {b}) and not ({c})"));
            out.push(format!("not ({a} and ({b} or {c}))"));
        }
    }
    for (i, field) in
        ["ip[0]", "ip[2:2]", "tcp[0:2]", "udp[2:2]", "ether[12:2]", "len"].iter().enumerate()
    {
        for op in ["+ 3", "- 1", "* 5", "/ 3", "% 10", "& 0xf0", "| 1", "^ 0x55", "<< 2", ">> 1"] {
            out.push(format!("{field} {op} > {}", 17 * (i + 1)));
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    expressions: usize,
    programs: usize,
    kernel_valid: usize,
    comparisons: usize,
    rejects_all: usize,
}

/// Compares weir and libpcap on every packet; returns how many packets libpcap accepted.
fn check_program(
    expr: &str,
    optimize: bool,
    raw: &[SockFilter],
    pkts: &[Packet],
    t: &mut Tally,
) -> usize {
    let mut accepted = 0;
    let insns = decode(raw).unwrap_or_else(|e| panic!("{expr:?} (opt {optimize}): {e}"));
    assert_eq!(encode(&insns), raw, "{expr:?}: records do not round-trip");
    let filter = CbpfFilter::new_libpcap(&insns)
        .unwrap_or_else(|e| panic!("{expr:?} (opt {optimize}): libpcap's program rejected: {e}"));
    // Ancillary loads mean packet metadata to the kernel but are out of bounds to libpcap's
    // userspace interpreter, so kernel-rule runs are compared only without them.
    let uses_ancillary = insns.iter().any(|i| {
        matches!(i.op, CbpfOp::LdAbsW | CbpfOp::LdAbsH | CbpfOp::LdAbsB) && i.k >= SKF_AD_OFF
    });
    let kernel = CbpfFilter::with_rules(&insns, Rules::Kernel).ok().filter(|_| !uses_ancillary);
    t.programs += 1;
    t.kernel_valid += usize::from(kernel.is_some());
    for (index, pkt) in pkts.iter().enumerate() {
        let want = pcap_run(raw, pkt);
        let got = filter.run(&pkt.data, pkt.wire_len);
        assert_eq!(
            got, want,
            "{expr:?} (optimize {optimize}): packet {index} ({}): weir {got}, libpcap {want}",
            pkt.description
        );
        if let Some(k) = &kernel {
            assert_eq!(
                k.run(&pkt.data, pkt.wire_len),
                want,
                "{expr:?} kernel rules, packet {index}"
            );
        }
        t.comparisons += 1;
        accepted += usize::from(want != 0);
    }
    accepted
}

#[test]
fn weir_agrees_with_libpcap_on_compiled_expressions() {
    let pkts = packets();
    let mut exprs: Vec<String> = EVERYDAY.iter().map(|s| (*s).to_owned()).collect();
    // Compiled as for a live capture, `inbound` is an ancillary load of the packet type.
    exprs.push("inbound".to_owned());
    exprs.extend(generated());
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    for expr in &exprs {
        let mut ok = true;
        let mut accepted_unoptimized = None;
        for optimize in [false, true] {
            match pcap_compile_expr(expr, optimize) {
                Ok(raw) => {
                    let accepted = check_program(expr, optimize, &raw, &pkts, &mut tally);
                    if !optimize {
                        accepted_unoptimized = Some(accepted);
                    }
                }
                // The optimizer proves some contradictions (`tcp and udp`) and refuses to
                // emit a program; the unoptimized one must then reject every packet.
                Err(e) if optimize && e.contains("rejects all packets") => {
                    assert_eq!(accepted_unoptimized, Some(0), "{expr:?}: {e}");
                    tally.rejects_all += 1;
                }
                Err(e) => {
                    failures.push(format!("{expr:?} (optimize {optimize}): {e}"));
                    ok = false;
                }
            }
        }
        tally.expressions += usize::from(ok);
    }
    assert!(failures.is_empty(), "libpcap could not compile:\n{}", failures.join("\n"));
    println!(
        "libpcap agreement: {} expressions, {} programs ({} also pass kernel rules; {} \
         optimized away as rejecting everything), {} packets, {} comparisons, all equal",
        tally.expressions,
        tally.programs,
        tally.kernel_valid,
        tally.rejects_all,
        pkts.len(),
        tally.comparisons
    );
    assert!(tally.expressions >= 500, "only {} expressions", tally.expressions);
    // Most tcpdump programs are also fine for the kernel; protochain's loops are not.
    assert!(tally.kernel_valid < tally.programs && tally.kernel_valid * 10 > tally.programs * 9);
}

#[test]
fn inbound_reads_the_packet_type_under_kernel_rules() {
    // libpcap compiles `inbound` to an ancillary load of the packet type, which its own
    // interpreter cannot answer (0 for every packet) and the kernel answers from the skb.
    let raw = pcap_compile_expr("inbound", true).unwrap();
    let insns = decode(&raw).unwrap();
    assert!(insns.iter().any(|i| i.k == SKF_AD_OFF + SKF_AD_PKTTYPE), "{insns:?}");
    let kernel = CbpfFilter::new(&insns).unwrap();
    let frame = [0u8; 60];
    let outgoing = PacketMeta { pkttype: 4, ..PacketMeta::default() };
    let host = PacketMeta { pkttype: 0, ..PacketMeta::default() };
    assert_eq!(kernel.run_with_meta(&frame, 60, &outgoing), 0);
    assert_ne!(kernel.run_with_meta(&frame, 60, &host), 0);
    let pkt = Packet {
        data: frame.to_vec(),
        wire_len: 60,
        ts_sec: 0,
        ts_usec: 0,
        description: String::new(),
    };
    assert_eq!(pcap_run(&raw, &pkt), 0);
    assert_eq!(CbpfFilter::new_libpcap(&insns).unwrap().run_with_meta(&frame, 60, &host), 0);
}

#[test]
fn shift_and_division_edge_semantics_match_libpcap() {
    use CbpfOp::*;
    let pkts = [Packet {
        data: vec![0x45, 0, 0, 0],
        wire_len: 4,
        ts_sec: 0,
        ts_usec: 0,
        description: String::new(),
    }];
    for x in [0u32, 1, 31, 32, 33, 40, 63, 64, 255, u32::MAX] {
        for op in [LshX, RshX, DivX, ModX] {
            let prog = [
                CbpfInsn::stmt(LdImm, 0xdefc0),
                CbpfInsn::stmt(LdxImm, x),
                CbpfInsn::stmt(op, 0),
                CbpfInsn::stmt(RetA, 0),
            ];
            let raw = encode(&prog);
            let want = pcap_run(&raw, &pkts[0]);
            let got = CbpfFilter::new(&prog).unwrap().run(&pkts[0].data, 4);
            assert_eq!(got, want, "{op:?} with X = {x}");
        }
    }
}

/// A random program that passes weir's kernel rules (and so libpcap's): every scratch cell is
/// written first, jumps go forward inside the program, and it ends in a return.
fn valid_program() -> impl Strategy<Value = Vec<CbpfInsn>> {
    let body_len = 1usize..40;
    body_len
        .prop_flat_map(|n| {
            let rows = proptest::collection::vec(0..CBPF_OPCODES.len(), n);
            let ks = proptest::collection::vec(
                prop_oneof![0u32..80, any::<u32>(), Just(0u32), 0u32..16, 0u32..32],
                n,
            );
            let offs = proptest::collection::vec((any::<u8>(), any::<u8>()), n);
            let seeds = proptest::collection::vec(any::<u32>(), 16);
            (rows, ks, offs, seeds, any::<u32>())
        })
        .prop_map(|(rows, ks, offs, seeds, ret_k)| {
            let mut prog = Vec::new();
            for (cell, seed) in seeds.iter().enumerate() {
                prog.push(CbpfInsn::stmt(CbpfOp::LdImm, *seed));
                prog.push(CbpfInsn::stmt(CbpfOp::St, cell as u32));
            }
            let body = rows.len();
            for (i, ((row, k), (jt, jf))) in rows.iter().zip(&ks).zip(&offs).enumerate() {
                let op = CBPF_OPCODES[*row].op;
                // Instructions after this one in the body, plus the final return.
                let room = body - i;
                let k = match op {
                    CbpfOp::LdMem | CbpfOp::LdxMem | CbpfOp::St | CbpfOp::Stx => k % 16,
                    CbpfOp::DivK | CbpfOp::ModK => (*k).max(1),
                    CbpfOp::LshK | CbpfOp::RshK => k % 32,
                    CbpfOp::Ja => k % room as u32,
                    // Keep absolute loads out of the ancillary area, whose meaning is the
                    // kernel's, not libpcap's.
                    CbpfOp::LdAbsW | CbpfOp::LdAbsH | CbpfOp::LdAbsB | CbpfOp::LdxMsh => {
                        k % 0x1_0000
                    }
                    _ => *k,
                };
                let (jt, jf) = if op.is_conditional_jump() {
                    ((*jt as usize % room) as u8, (*jf as usize % room) as u8)
                } else {
                    (0, 0)
                };
                prog.push(CbpfInsn::new(op, jt, jf, k));
            }
            prog.push(CbpfInsn::stmt(CbpfOp::RetK, ret_k));
            prog
        })
}

fn random_packet() -> impl Strategy<Value = Packet> {
    (proptest::collection::vec(any::<u8>(), 0..120), 0u32..200).prop_map(|(data, extra)| {
        let wire_len = data.len() as u32 + extra;
        Packet { data, wire_len, ts_sec: 0, ts_usec: 0, description: "random".into() }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_valid_programs_agree_with_libpcap(
        prog in valid_program(),
        pkts in proptest::collection::vec(random_packet(), 1..6),
    ) {
        prop_assert_eq!(validate(&prog), Ok(()));
        let filter = CbpfFilter::new(&prog).unwrap();
        let raw = encode(&prog);
        for (index, pkt) in pkts.iter().enumerate() {
            let want = pcap_run(&raw, pkt);
            let got = filter.run(&pkt.data, pkt.wire_len);
            prop_assert_eq!(got, want, "packet {}", index);
        }
    }
}
