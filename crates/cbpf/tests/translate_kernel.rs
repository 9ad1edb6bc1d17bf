//! The Linux kernel as the oracle for weir's classic-to-eBPF translations: each translation
//! must pass the kernel's verifier and, under `BPF_PROG_TEST_RUN`, give libpcap's verdicts.
//! The socket-filter translation loads as `BPF_PROG_TYPE_SCHED_CLS` (it allows the legacy
//! packet loads like a socket filter, but its test run keeps the Ethernet header, which a
//! socket filter's strips), the XDP translation as `BPF_PROG_TYPE_XDP`.
//!
//! Needs root and a working `bpf()` syscall; otherwise the test prints `SKIPPED` with the
//! reason. The kernel sees whole frames only, so the packets are complete records.

use weir_cbpf::translate::translate;
use weir_cbpf::CbpfFilter;
use weir_isa::cbpf::ancillary::{SKF_AD_ALU_XOR_X, SKF_AD_OFF};
use weir_isa::cbpf::{decode, CbpfInsn, CbpfOp, SockFilter, CBPF_OPCODES};
use weir_program::Program;
use weir_sys::kernel::{self, LoadedProgram, ProgType};
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::{Packet, SplitMix64};

// ---------------------------------------------------------------------------------------
// libpcap: compiling expressions and its own verdicts

/// `pcap_compile` for Ethernet, netmask unknown.
fn pcap_compile_expr(expr: &str, optimize: bool) -> Result<Vec<BpfInsn>, String> {
    libpcap::required().compile(expr, 1, optimize)
}

/// libpcap's verdict on a whole frame (`raw` is pcap_compile's output).
fn pcap_verdict(raw: &[BpfInsn], packet: &[u8]) -> u32 {
    let len = u32::try_from(packet.len()).expect("small packet");
    libpcap::required().run(raw, packet, len).expect("libpcap validates its own program")
}

// ---------------------------------------------------------------------------------------
// The kernel (weir_sys::kernel wraps bpf())

/// Loads `program` as `prog_type`; on failure, the errno and the verifier's log.
fn load(program: &Program, prog_type: ProgType) -> Result<LoadedProgram, String> {
    kernel::load(prog_type, &program.to_bytes()).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------
// The test

const EXPRESSIONS: &[&str] = &[
    "ip",
    "ip6",
    "arp",
    "tcp",
    "udp",
    "icmp",
    "icmp6",
    "not ip",
    "host 10.0.0.1",
    "src host 10.0.0.1",
    "dst net 10.0.0.0/24",
    "net 192.168.0.0/16",
    "host 2001:db8::1",
    "ip6 net 2001:db8::/32",
    "port 53",
    "tcp port 80",
    "udp dst port 53",
    "portrange 1-1023",
    "tcp src portrange 1024-65535",
    "tcp port 80 or tcp port 443",
    "ether broadcast",
    "ether multicast",
    "ether src 00:11:22:33:44:01",
    "ether proto 0x88cc",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn",
    "tcp[((tcp[12] & 0xf0) >> 2):4] = 0x47455420",
    "icmp[icmptype] = icmp-echo",
    "ip[6:2] & 0x1fff != 0",
    "ip[0] & 0xf > 5",
    "ip[8] < 64",
    "ip[2:2] - ((ip[0] & 0xf) << 2) > 100",
    "ip[2:2] % (ip[1] & 3) = 1",
    "len / (ip[1] & 1) = 0",
    "ip[0] << (ip[1] & 63) != 0",
    "len >> ip[1] = 0",
    "len <= 64",
    "len >= 200",
    "len % 4 = 0",
    "ip[10000] = 1",
    "vlan",
    "vlan 100 and ip",
    "vlan and vlan and udp",
    "mpls and ip",
    "mpls 17",
    "pppoes and udp port 53",
    "pppoes and ip6",
    "(tcp or udp) and not port 22",
    "host 10.0.0.1 and (port 80 or port 443)",
    "not (icmp or arp) and len > 100",
    "stp or llc",
];

/// Up to 300 complete frames the test runs accept (at least an Ethernet header, at most a
/// standard MTU, so that XDP's test run takes them linear).
fn kernel_packets() -> Vec<Packet> {
    let mut all = weir_testkit::edge_cases();
    all.extend(weir_testkit::corpus(0x6b_e7e1, 600));
    all.into_iter()
        .filter(|p| p.data.len() >= 14 && p.data.len() <= 1514 && !p.is_truncated())
        .take(300)
        .collect()
}

/// Whether the kernel's skb test run takes the frame: it refuses an IPv4 or IPv6 EtherType
/// without the whole fixed IP header behind it (`EINVAL`), which XDP's test run does not.
fn skb_test_run_takes(packet: &[u8]) -> bool {
    match packet.get(12..14) {
        Some([0x08, 0x00]) => packet.len() >= 14 + 20,
        Some([0x86, 0xdd]) => packet.len() >= 14 + 40,
        _ => true,
    }
}

#[test]
fn kernel_runs_translations_with_libpcap_verdicts() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_runs_translations_with_libpcap_verdicts: {reason}");
        return;
    }
    let packets = kernel_packets();
    assert!(packets.len() >= 250, "only {} usable packets", packets.len());
    let mut programs = 0;
    let mut runs = [0usize; 2];
    let mut accepted = 0;
    for expr in EXPRESSIONS {
        for optimize in [false, true] {
            let raw = pcap_compile_expr(expr, optimize)
                .unwrap_or_else(|e| panic!("libpcap cannot compile {expr:?}: {e}"));
            let records: Vec<SockFilter> =
                raw.iter().map(|i| SockFilter::new(i.code, i.jt, i.jf, i.k)).collect();
            let insns = decode(&records).expect("libpcap's output decodes");
            programs += 1;
            for (slot, (target, prog_type)) in
                [(ProgType::SocketFilter, ProgType::SchedCls), (ProgType::Xdp, ProgType::Xdp)]
                    .into_iter()
                    .enumerate()
            {
                let place = format!("{expr:?} (optimize {optimize}), {target}");
                let program = translate(&insns, target).unwrap_or_else(|e| panic!("{place}: {e}"));
                let loaded = load(&program, prog_type).unwrap_or_else(|log| {
                    panic!("{place}: the kernel refuses the translation: {log}")
                });
                for (index, packet) in packets.iter().enumerate() {
                    if target == ProgType::SocketFilter && !skb_test_run_takes(&packet.data) {
                        continue;
                    }
                    let want = pcap_verdict(&raw, &packet.data);
                    let got = loaded
                        .test_run(&packet.data, 1)
                        .map(|run| run.retval)
                        .unwrap_or_else(|e| panic!("{place}: test run of packet {index}: {e}"));
                    assert_eq!(
                        got, want,
                        "{place}: packet {index} ({}): kernel {got}, libpcap {want}",
                        packet.description
                    );
                    runs[slot] += 1;
                    accepted += usize::from(want != 0);
                }
            }
        }
    }
    let short_ip = packets.iter().filter(|p| !skb_test_run_takes(&p.data)).count();
    println!(
        "kernel agreement: {} expressions, {programs} programs, {} packets ({short_ip} with a \
         cut IP header run on XDP only, which the skb test run refuses); SCHED_CLS {} runs, \
         XDP {} runs, all equal to libpcap; {accepted} accepting verdicts",
        EXPRESSIONS.len(),
        packets.len(),
        runs[0],
        runs[1],
    );
    assert!(accepted > 0 && accepted < runs[0] + runs[1]);
}

/// A random program valid under the kernel's rules, drawn from every row of the opcode
/// table (scratch cells written first, forward jumps, a final return), with the constants
/// that reach the translation's special cases: offsets past i16::MAX and 65535, shifts and
/// divisions by X, constants above i32::MAX, `xor_x`.
fn random_program(rng: &mut SplitMix64) -> Vec<CbpfInsn> {
    use CbpfOp::*;
    let mut prog = Vec::new();
    for cell in 0..16 {
        prog.push(CbpfInsn::stmt(LdImm, rng.u32()));
        prog.push(CbpfInsn::stmt(St, cell));
    }
    let body = rng.range_usize(1, 40);
    for i in 0..body {
        let room = body - i;
        let op = CBPF_OPCODES[rng.below_usize(CBPF_OPCODES.len())].op;
        let raw_k = match rng.below(6) {
            0 | 1 => rng.range(0, 80) as u32,
            2 => rng.u32(),
            3 => [0x7fff, 0x8000, 0xfffe, 0xffff, 0x1_0000, 0x7fff_ffff, 0x8000_0000]
                [rng.below_usize(7)],
            4 => rng.range(0, 32) as u32,
            _ => 0,
        };
        let k = match op {
            LdMem | LdxMem | St | Stx => raw_k % 16,
            DivK | ModK => raw_k.max(1),
            LshK | RshK => raw_k % 32,
            Ja => raw_k % room as u32,
            LdAbsW | LdAbsH | LdAbsB if rng.chance(5) => SKF_AD_OFF + SKF_AD_ALU_XOR_X,
            LdAbsW | LdAbsH | LdAbsB | LdxMsh => raw_k % 0x1_0001,
            _ => raw_k,
        };
        let mut offset = || {
            let off = if rng.chance(80) { rng.below_usize(4) } else { rng.below_usize(room) };
            (off % room) as u8
        };
        let (jt, jf) = if op.is_conditional_jump() { (offset(), offset()) } else { (0, 0) };
        prog.push(CbpfInsn::new(op, jt, jf, k));
    }
    prog.push(CbpfInsn::stmt(RetK, rng.u32()));
    prog
}

#[test]
fn kernel_runs_random_translations_with_reference_verdicts() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_runs_random_translations_with_reference_verdicts: {reason}");
        return;
    }
    let mut rng = SplitMix64::new(0xc1a5_51c0);
    let frames: Vec<Vec<u8>> = (0..24)
        .map(|_| {
            let len = rng.range_usize(14, 100);
            (0..len).map(|_| rng.u8()).collect()
        })
        .collect();
    let mut runs = 0usize;
    let mut accepted = 0usize;
    let count = 300;
    for n in 0..count {
        let prog = random_program(&mut rng);
        let reference = CbpfFilter::new(&prog).unwrap_or_else(|e| panic!("program {n}: {e}"));
        for (target, prog_type) in
            [(ProgType::SocketFilter, ProgType::SchedCls), (ProgType::Xdp, ProgType::Xdp)]
        {
            let place = format!("random program {n} ({target}): {prog:?}");
            let program = translate(&prog, target).unwrap_or_else(|e| panic!("{place}: {e}"));
            let loaded = load(&program, prog_type)
                .unwrap_or_else(|log| panic!("{place}: the kernel refuses the translation: {log}"));
            for (index, frame) in frames.iter().enumerate() {
                if target == ProgType::SocketFilter && !skb_test_run_takes(frame) {
                    continue;
                }
                let want = reference.run(frame, frame.len() as u32);
                let got = loaded
                    .test_run(frame, 1)
                    .map(|run| run.retval)
                    .unwrap_or_else(|e| panic!("{place}: test run of frame {index}: {e}"));
                assert_eq!(got, want, "{place}: frame {index}: kernel {got}, reference {want}");
                runs += 1;
                accepted += usize::from(want != 0);
            }
        }
    }
    println!(
        "kernel agreement on random programs: {count} programs x 2 targets, {} frames, {runs} \
         runs, all equal to the reference; {accepted} non-zero verdicts",
        frames.len()
    );
    assert!(accepted > 0 && accepted < runs);
}
