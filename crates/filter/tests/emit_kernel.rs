//! The Linux kernel as the oracle for the eBPF emitter: random filters (the generator of
//! `tests/emit.rs`) are emitted for both targets, must pass the kernel's verifier, and
//! under `BPF_PROG_TEST_RUN` must give the IR's verdicts on whole frames. The socket-filter
//! program loads as `BPF_PROG_TYPE_SCHED_CLS` (the same context and legacy loads as a
//! socket filter, but its test run keeps the Ethernet header) and, to show the verifier
//! takes it as what it is, also as `BPF_PROG_TYPE_SOCKET_FILTER`; the XDP program as
//! `BPF_PROG_TYPE_XDP`.
//!
//! Needs root and `bpf()`; otherwise it prints `SKIPPED` with the reason.

use crate::emit_common::{hex, packets, FilterGen};
use weir_filter::emit::ebpf;
use weir_filter::{BinOp, Expr, Filter, Pred, Size};
use weir_program::abi::xdp_action;
use weir_program::PacketAccess;
use weir_sys::kernel::{self, ProgType};
use weir_testkit::Packet;

/// Frames both test runs take: at least an Ethernet header, at most a standard MTU (so
/// that XDP's test run keeps them linear), whole, and not IPv4/IPv6 with a cut IP header,
/// which the skb test run refuses.
fn kernel_frames(seed: u64) -> Vec<Packet> {
    packets(seed, 120, 80)
        .into_iter()
        .filter(|p| p.data.len() >= 14 && p.data.len() <= 1514 && !p.is_truncated())
        .filter(|p| match p.data.get(12..14) {
            Some([0x08, 0x00]) => p.data.len() >= 14 + 20,
            Some([0x86, 0xdd]) => p.data.len() >= 14 + 40,
            _ => true,
        })
        .collect()
}

/// Loads `filter`'s program for `target` and compares every frame's verdict; returns the
/// number of accepting runs.
fn check(filter: &Filter, target: weir_program::ProgType, frames: &[Packet]) -> usize {
    let program = ebpf::emit(filter, target).unwrap_or_else(|e| panic!("{filter:?}: {e}"));
    let code = program.to_bytes();
    let listing = || weir_isa::asm::listing(program.insns());
    let prog_type = match target.packet_access() {
        PacketAccess::SkBuff => {
            kernel::load(ProgType::SocketFilter, &code).unwrap_or_else(|e| {
                panic!("{filter:?}: the verifier refuses the socket filter: {e}\n{}", listing())
            });
            ProgType::SchedCls
        }
        PacketAccess::Xdp => ProgType::Xdp,
    };
    let loaded = kernel::load(prog_type, &code).unwrap_or_else(|e| {
        panic!("{filter:?} ({target}): the verifier refuses the program: {e}\n{}", listing())
    });
    // The socket form `weir::emit_ebpf` may give instead: the classic program translated,
    // its repeated loads taken from registers the verifier must see filled on every path.
    let reused = (target.packet_access() == PacketAccess::SkBuff)
        .then(|| weir_filter::emit::cbpf::emit(filter).ok())
        .flatten()
        .map(|classic| {
            let translated = weir_cbpf::translate::translate(&classic, target).unwrap();
            let reused = ebpf::reuse_legacy_loads(translated);
            kernel::load(ProgType::SchedCls, &reused.to_bytes()).unwrap_or_else(|e| {
                panic!(
                    "{filter:?}: the verifier refuses the reused translation: {e}\n{}",
                    weir_isa::asm::listing(reused.insns())
                )
            })
        });
    let mut accepted = 0;
    for frame in frames {
        let len = frame.data.len() as u32;
        if let Some(reused) = &reused {
            let got = reused.test_run(&frame.data, 1).map(|run| run.retval).unwrap();
            assert_eq!(
                got,
                filter.run(&frame.data, len),
                "{filter:?}: reused translation, frame {}",
                frame.description
            );
        }
        let matches = filter.matches(&frame.data, len);
        let want = match target.packet_access() {
            PacketAccess::SkBuff => filter.run(&frame.data, len),
            PacketAccess::Xdp if matches => xdp_action::PASS,
            PacketAccess::Xdp => xdp_action::DROP,
        };
        let got = loaded
            .test_run(&frame.data, 1)
            .map(|run| run.retval)
            .unwrap_or_else(|e| panic!("{filter:?} ({target}): {}: {e}", frame.description));
        assert_eq!(
            got,
            want,
            "{filter:?} ({target}): frame {} {}: kernel {got}, IR {want}\n{}",
            frame.description,
            hex(&frame.data),
            listing()
        );
        accepted += usize::from(matches);
    }
    accepted
}

#[test]
fn kernel_runs_emitted_filters_with_the_irs_verdicts() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_runs_emitted_filters_with_the_irs_verdicts: {reason}");
        return;
    }
    let frames = kernel_frames(0x4e71);
    assert!(frames.len() >= 150, "only {} usable frames", frames.len());
    let mut gen = FilterGen::new(0x4e71_0001);
    let count = 300;
    let (mut runs, mut accepted) = (0, 0);
    for _ in 0..count {
        let filter = gen.filter();
        for target in [weir_program::ProgType::SocketFilter, weir_program::ProgType::Xdp] {
            accepted += check(&filter, target, &frames);
            runs += frames.len();
        }
    }
    println!(
        "kernel agreement: {count} random filters x 2 targets x {} frames: {runs} runs, \
         {accepted} accepting, all equal to the IR",
        frames.len()
    );
    assert!(accepted * 10 > runs && accepted * 10 < runs * 9, "{accepted} of {runs}");
}

/// The shapes the verifier has to follow through the XDP target's checks: loads behind an
/// IPv4 header of variable length, guards that cover later loads, offsets whose bound the
/// verifier cannot see, and the far end of the 65535-byte window.
#[test]
fn kernel_accepts_variable_offsets_and_guards() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_accepts_variable_offsets_and_guards: {reason}");
        return;
    }
    let hlen = crate::emit_common::ipv4_header_length(14);
    let port = |k: u32| Expr::load(hlen.clone().plus(14 + k), Size::Half);
    let filters = [
        Pred::and([
            Pred::Guard(34),
            Pred::eq(Expr::load_at(12, Size::Half), 0x800),
            Pred::eq(port(2), 53),
        ]),
        Pred::or([Pred::eq(port(0), 80), Pred::eq(port(2), 80)]),
        Pred::eq(Expr::load(Expr::load_at(14, Size::Half), Size::Byte), 1),
        Pred::eq(Expr::load(Expr::load_at(14, Size::Word), Size::Word), 1),
        Pred::eq(Expr::load(Expr::load_at(14, Size::Byte).plus(0x7fff), Size::Byte), 0),
        Pred::not(Pred::eq(Expr::load_at(0xfffb, Size::Word), 0)),
        Pred::eq(
            Expr::load(Expr::binary(BinOp::Shr, Expr::WireLen, Expr::Const(1)), Size::Byte),
            0,
        ),
        Pred::and([
            Pred::Store { slot: 3, value: hlen.clone() },
            Pred::eq(Expr::load(Expr::Scratch(3).plus(14), Size::Byte), 0x45),
        ]),
    ];
    let frames = kernel_frames(0x4e72);
    for pred in filters {
        let filter = Filter::new(pred);
        for target in [weir_program::ProgType::SocketFilter, weir_program::ProgType::Xdp] {
            check(&filter, target, &frames);
        }
    }
}

/// Long programs: a set of 1500 ranges (a search tree) and and/or chains of hundreds of
/// tests, whose paths the verifier must walk within its limits.
#[test]
fn kernel_accepts_long_programs() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_accepts_long_programs: {reason}");
        return;
    }
    let byte = |k: u32| Expr::load_at(k, Size::Byte);
    let set = weir_filter::ValueSet::from_ranges((0..1500u32).map(|i| (i * 7, i * 7 + (i % 3))));
    let all = Pred::and(
        (0..400).map(|i| Pred::cmp(weir_filter::CmpOp::Le, byte(i % 60), Expr::Const(0xfe))),
    );
    let any = Pred::or((0..400).map(|i| Pred::eq(byte(i % 70), 0x45 + i)));
    let filters = [
        Pred::In { value: Expr::load_at(12, Size::Half), set },
        all.clone(),
        any.clone(),
        Pred::or([
            Pred::and([all.clone(), Pred::eq(byte(3), 1)]),
            Pred::not(any.clone()),
            Pred::and([Pred::not(all), any]),
        ]),
    ];
    // A balanced tree of 64 loads: more registers than the socket target has, so it
    // spills to the stack.
    fn tree(lo: u32, n: u32) -> Expr {
        if n == 1 {
            return Expr::load_at(lo % 50, Size::Byte);
        }
        let op = if lo % 2 == 0 { BinOp::Add } else { BinOp::Sub };
        Expr::binary(op, tree(lo, n / 2), tree(lo + n / 2, n - n / 2))
    }
    let filters = filters.into_iter().chain([
        Pred::cmp(weir_filter::CmpOp::Gt, tree(0, 64), Expr::Const(0x8000_0000)),
        Pred::Store { slot: 0, value: tree(3, 64) },
    ]);
    let frames = kernel_frames(0x4e73);
    for pred in filters {
        let filter = Filter::new(pred);
        for target in [weir_program::ProgType::SocketFilter, weir_program::ProgType::Xdp] {
            check(&filter, target, &frames);
        }
    }
}

/// `host a or host b or ...` over `hosts` as lowering writes it for Ethernet (IPv4 source
/// and destination, ARP and RARP sender and target, each behind its ethertype test),
/// optimized into set searches.
fn host_set_filter(hosts: &[u32]) -> Filter {
    let ethertype = || Expr::load_at(12, Size::Half);
    let side = |etype: u32, at: u32, host: u32| {
        Pred::and([Pred::eq(ethertype(), etype), Pred::eq(Expr::load_at(at, Size::Word), host)])
    };
    let terms = hosts.iter().flat_map(|&h| {
        [
            side(0x0800, 26, h),
            side(0x0800, 30, h),
            side(0x0806, 28, h),
            side(0x0806, 38, h),
            side(0x8035, 28, h),
            side(0x8035, 38, h),
        ]
    });
    weir_filter::opt::optimize_owned(Filter::new(Pred::or(terms)))
}

/// A large address set, `host a or host b or ...` over 10,000 addresses: six searches of
/// 10,000 values, about 120,000 instructions, which the verifier walks leaf by leaf (every
/// path of a search is a state of its own until the exits), and which need `ja32` for the
/// jumps longer than 16 bits, counted in the kernel's rewritten program (each legacy load
/// grows into a call).
#[test]
fn kernel_accepts_a_large_address_set() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_accepts_a_large_address_set: {reason}");
        return;
    }
    // `ja32` came with Linux 6.6.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut numbers = release.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>());
    if let (Some(Ok(major)), Some(Ok(minor))) = (numbers.next(), numbers.next()) {
        if (major, minor) < (6, 6) {
            println!(
                "SKIPPED: kernel_accepts_a_large_address_set: Linux {major}.{minor} has no ja32"
            );
            return;
        }
    }
    let hosts: Vec<u32> = (0..10_000u32).map(|i| 0x0a01_0000 + 3 * i + 1).collect();
    let filter = host_set_filter(&hosts);
    let mut frames = Vec::new();
    for etype in [0x0800u16, 0x0806, 0x8035, 0x86dd] {
        for at in [26usize, 28, 30, 38] {
            for i in (0..hosts.len()).step_by(1_237).chain([hosts.len() - 1]) {
                for addr in [hosts[i], hosts[i] + 1] {
                    // An IPv4 header the skb test run takes, then the address.
                    let mut data = vec![0x11u8; 60];
                    data[12..14].copy_from_slice(&etype.to_be_bytes());
                    data[14] = if etype == 0x86dd { 0x60 } else { 0x45 };
                    data[at..at + 4].copy_from_slice(&addr.to_be_bytes());
                    let description = format!("ethertype {etype:#06x}, {addr:#010x} at {at}");
                    frames.push(Packet { data, wire_len: 60, ts_sec: 0, ts_usec: 0, description });
                }
            }
        }
    }
    let mut accepted = 0;
    for target in [weir_program::ProgType::SocketFilter, weir_program::ProgType::Xdp] {
        accepted += check(&filter, target, &frames);
    }
    // Addresses of the set where the filter looks (IPv4 26/30, ARP and RARP 28/38) match.
    assert!(accepted > frames.len() / 4 && accepted < frames.len(), "{accepted}");
}
