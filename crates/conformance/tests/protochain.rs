//! `protochain` walks on every engine of the facade's table against libpcap's `bpf_filter`
//! (the unoptimized program of libpcap 1.10, whose walk has no bound).
//!
//! Packets: IPv6 with `n` extension headers (a hop-by-hop header first, then destination
//! options, 8 and 16 bytes alternately) ending in TCP, UDP or ICMPv6. For `n` up to
//! [`CHAIN_HOP_BUDGET`] every engine must give libpcap's verdict, on the whole packet and
//! on the packet cut at every length (a walk that reads past the captured bytes rejects).
//! Past the budget weir's walk aborts (rejects) where libpcap walks on: that documented
//! difference is asserted exactly at `n = CHAIN_HOP_BUDGET + 1`, on every engine.
//!
//! Without libpcap the test says `SKIPPED: protochain: <reason>` and returns.

use weir::{Engine, FilterOptions, LinkType, NameDb, PreparedFilter};
use weir_filter::CHAIN_HOP_BUDGET;
use weir_sys::libpcap;

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMPV6: u8 = 58;
const HOP_BY_HOP: u8 = 0;
const DEST_OPTS: u8 = 60;

/// Ethernet, IPv6, `n` extension headers, then `last` (a 20-byte TCP header, or 8 bytes of
/// UDP or ICMPv6).
fn chain(n: usize, last: u8) -> Vec<u8> {
    let mut payload = vec![0u8; if last == TCP { 20 } else { 8 }];
    if last == TCP {
        payload[12] = 0x50; // data offset 5
    }
    let mut next = last;
    for i in 0..n {
        // 8 bytes (length 0) or 16 bytes (length 1), padded with PadN.
        let units = (i % 2) as u8;
        let mut header = vec![next, units, 1, 4 + 8 * units];
        header.resize(8 + 8 * usize::from(units), 0);
        header.extend_from_slice(&payload);
        payload = header;
        next = if i + 1 == n { HOP_BY_HOP } else { DEST_OPTS };
    }
    let mut frame = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x86, 0xdd];
    frame.extend_from_slice(&[0x60, 0, 0, 0]);
    frame.extend_from_slice(&u16::try_from(payload.len()).unwrap_or(u16::MAX).to_be_bytes());
    frame.extend_from_slice(&[next, 64]);
    frame.extend_from_slice(&[0x20; 16]);
    frame.extend_from_slice(&[0x21; 16]);
    frame.extend_from_slice(&payload);
    frame
}

struct Compiled {
    expr: &'static str,
    libpcap: Vec<libpcap::BpfInsn>,
    /// (engine, optimized) and the filter prepared on it.
    engines: Vec<(Engine, bool, PreparedFilter)>,
}

fn compile(expr: &'static str) -> Compiled {
    let names = NameDb::system_files_only();
    let libpcap = libpcap::required().compile(expr, 1, false).expect("libpcap compiles");
    let mut engines = Vec::new();
    for optimize in [false, true] {
        let options = FilterOptions { optimize, ..FilterOptions::new(LinkType::Ethernet) };
        let filter = weir::compile_filter_with(expr, &options, &names)
            .unwrap_or_else(|e| panic!("{}", e.render(expr)));
        for engine in Engine::ALL {
            let prepared = PreparedFilter::new(&filter, Some(engine))
                .unwrap_or_else(|e| panic!("{expr} on {engine}: {e}"));
            engines.push((engine, optimize, prepared));
        }
    }
    Compiled { expr, libpcap, engines }
}

const EXPRESSIONS: [&str; 5] =
    ["ip6 protochain 6", "ip6 protochain 17", "ip6 protochain 58", "protochain 6", "protochain 60"];

#[test]
fn chains_within_the_budget_agree_with_libpcap_on_every_engine() {
    if let Err(reason) = libpcap::available() {
        println!("SKIPPED: protochain: {reason}");
        return;
    }
    let lp = libpcap::required();
    let mut compiled: Vec<Compiled> = EXPRESSIONS.into_iter().map(compile).collect();
    let (mut runs, mut accepted, mut failures) = (0u64, 0u64, Vec::new());
    let lengths = (0..=4).chain(9..=40).chain([CHAIN_HOP_BUDGET as usize]);
    for n in lengths {
        for last in [TCP, UDP, ICMPV6] {
            let packet = chain(n, last);
            let wire_len = u32::try_from(packet.len()).expect("small");
            for cut in 0..=packet.len() {
                let data = &packet[..cut];
                for c in &mut compiled {
                    let expected = lp.run(&c.libpcap, data, wire_len).expect("libpcap runs") != 0;
                    accepted += u64::from(expected && cut == packet.len());
                    for (engine, optimize, prepared) in &mut c.engines {
                        runs += 1;
                        if prepared.matches(data, wire_len) != expected && failures.len() < 20 {
                            failures.push(format!(
                                "`{}` on {engine} (optimized: {optimize}), {n} headers then \
                                 protocol {last}, cut to {cut} of {wire_len} bytes: libpcap \
                                 says {expected}",
                                c.expr
                            ));
                        }
                    }
                }
            }
        }
    }
    println!("protochain: {runs} runs on {} engines agree with libpcap", Engine::ALL.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Each whole chain ending in TCP, UDP or ICMPv6 is found by the walk seeking it (and by
    // `protochain 60` when it has a destination-options header): far more than none.
    assert!(accepted > 3 * 37 * 2, "only {accepted} whole packets accepted");
}

/// The one documented difference: a walk past [`CHAIN_HOP_BUDGET`] hops rejects on every
/// engine, where libpcap's walks on and accepts.
#[test]
fn the_hop_budget_is_where_weir_says_it_is() {
    if let Err(reason) = libpcap::available() {
        println!("SKIPPED: protochain: {reason}");
        return;
    }
    let lp = libpcap::required();
    let mut c = compile("ip6 protochain 6");
    let budget = CHAIN_HOP_BUDGET as usize;
    for (n, within) in [(budget - 1, true), (budget, true), (budget + 1, false), (200, false)] {
        let packet = chain(n, TCP);
        let wire_len = u32::try_from(packet.len()).expect("small");
        let libpcap = lp.run(&c.libpcap, &packet, wire_len).expect("libpcap runs");
        assert_ne!(libpcap, 0, "libpcap walks {n} headers");
        for (engine, optimize, prepared) in &mut c.engines {
            assert_eq!(
                prepared.matches(&packet, wire_len),
                within,
                "{engine} (optimized: {optimize}), {n} headers"
            );
        }
    }
}

/// The budget is per walk on every engine but `cbpf`: classic BPF's loop is a backward
/// `ja`, and weir-cbpf (as libpcap's git head) ends a packet's run at its 65th backward
/// jump, however many walks made them. Two walks of 40 hops each on one packet: the first
/// seeks UDP in vain, the second finds TCP.
#[test]
fn classic_bpf_counts_hops_per_packet() {
    if let Err(reason) = libpcap::available() {
        println!("SKIPPED: protochain: {reason}");
        return;
    }
    let lp = libpcap::required();
    let mut c = compile("ip6 protochain 17 or ip6 protochain 6");
    let packet = chain(40, TCP);
    let wire_len = u32::try_from(packet.len()).expect("small");
    assert_ne!(lp.run(&c.libpcap, &packet, wire_len).expect("libpcap runs"), 0);
    for (engine, optimize, prepared) in &mut c.engines {
        let expected = *engine != Engine::Cbpf;
        assert_eq!(prepared.matches(&packet, wire_len), expected, "{engine} ({optimize})");
    }
    // Within 64 hops in all (two walks of 30), classic BPF agrees too.
    let packet = chain(30, TCP);
    let wire_len = u32::try_from(packet.len()).expect("small");
    for (engine, optimize, prepared) in &mut c.engines {
        assert!(prepared.matches(&packet, wire_len), "{engine} ({optimize}), 2 x 30 hops");
    }
}
