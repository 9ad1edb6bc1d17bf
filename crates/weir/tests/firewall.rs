//! The firewall-style list of issue 13 at full size: `not (not (host A1 and port P1) and not
//! (host A2 and port P2) and ...)` with 10,000 distinct pairs compiles through the facade
//! (parse, lower, optimize, the engine `engine::choose` picks) and filters as the filter IR's
//! reference evaluator does on the unoptimized lowering, the meaning itself.

use weir::{compile_filter_with, FilterOptions, LinkType, NameDb, PreparedFilter};
use weir_testkit::SplitMix64;

const PAIRS: u32 = 10_000;

fn address(i: u32) -> u32 {
    0x0a00_0000 + i + 1
}

fn port(i: u32) -> u16 {
    (1 + i % 65_000) as u16
}

fn dotted(a: u32) -> String {
    let [w, x, y, z] = a.to_be_bytes();
    format!("{w}.{x}.{y}.{z}")
}

fn firewall(pairs: u32) -> String {
    let parts: Vec<String> = (0..pairs)
        .map(|i| format!("not (host {} and port {})", dotted(address(i)), port(i)))
        .collect();
    format!("not ({})", parts.join(" and "))
}

/// Ethernet, IPv4 (20-byte header) and the first 8 bytes of a transport header: the ports.
fn ipv4(src: u32, dst: u32, proto: u8, fragment: u16, ports: (u16, u16)) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 1]);
    p.extend_from_slice(&fragment.to_be_bytes());
    p.extend_from_slice(&[64, proto, 0, 0]);
    p.extend_from_slice(&src.to_be_bytes());
    p.extend_from_slice(&dst.to_be_bytes());
    p.extend_from_slice(&ports.0.to_be_bytes());
    p.extend_from_slice(&ports.1.to_be_bytes());
    p.extend_from_slice(&[0, 8, 0, 0]);
    p
}

/// An ARP request between two addresses (28 bytes after the Ethernet header).
fn arp(sender: u32, target: u32) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    p.extend_from_slice(&[0; 6]);
    p.extend_from_slice(&sender.to_be_bytes());
    p.extend_from_slice(&[0; 6]);
    p.extend_from_slice(&target.to_be_bytes());
    p
}

fn packets(seed: u64) -> Vec<Vec<u8>> {
    let mut rng = SplitMix64::new(seed);
    let mut out = Vec::new();
    let other = 0xc0a8_0001; // in no pair
    for _ in 0..40 {
        let i = rng.below(u64::from(PAIRS)) as u32;
        let j = rng.below(u64::from(PAIRS)) as u32;
        let (a, p) = (address(i), port(i));
        let proto = [6u8, 17, 132, 1][rng.below_usize(4)];
        // The pair on either side, the host with another pair's port, either alone.
        out.push(ipv4(a, other, proto, 0, (p, 40_000)));
        out.push(ipv4(other, a, proto, 0, (40_000, p)));
        out.push(ipv4(a, other, proto, 0, (40_000, p)));
        out.push(ipv4(a, address(j), proto, 0, (port(j).wrapping_add(1), 9)));
        out.push(ipv4(other, other, proto, 0, (p, p)));
        // A later fragment (no ports to read), and the pair cut short.
        out.push(ipv4(a, other, proto, 0x0010, (p, p)));
        let mut cut = ipv4(other, a, proto, 0, (p, p));
        cut.truncate(rng.below_usize(cut.len()));
        out.push(cut);
        let mut request = arp(a, other);
        if rng.below(2) == 0 {
            request.truncate(rng.below_usize(request.len()));
        }
        out.push(request);
    }
    out.extend(weir_testkit::edge_cases().into_iter().map(|p| p.data));
    out
}

#[test]
fn ten_thousand_pairs_compile_and_filter_as_the_reference() {
    let expr = firewall(PAIRS);
    let names = NameDb::system();
    let reference = compile_filter_with(
        &expr,
        &FilterOptions { optimize: false, ..FilterOptions::new(LinkType::Ethernet) },
        &names,
    )
    .expect("unoptimized lowering");
    let filter = compile_filter_with(&expr, &FilterOptions::new(LinkType::Ethernet), &names)
        .expect("compile");
    // Too large to wait for: it starts on the evaluator, its native code compiling aside.
    let mut prepared = PreparedFilter::new(&filter, None).expect("an engine takes it");
    let packets = packets(13);
    let (mut matched, mut refused) = (0, 0);
    for (n, packet) in packets.iter().enumerate() {
        let wire = packet.len() as u32;
        let want = reference.matches(packet, wire);
        assert_eq!(filter.matches(packet, wire), want, "optimized IR, packet {n}: {packet:02x?}");
        assert_eq!(prepared.matches(packet, wire), want, "packet {n}: {packet:02x?}");
        if want {
            matched += 1;
        } else {
            refused += 1;
        }
    }
    // Then the native code itself.
    assert!(prepared.wait_for_native(), "{}", prepared.choice());
    for (n, packet) in packets.iter().enumerate() {
        let wire = packet.len() as u32;
        let want = reference.matches(packet, wire);
        assert_eq!(prepared.matches(packet, wire), want, "native, packet {n}: {packet:02x?}");
    }
    // Both answers occur: the packets tell a wrong filter from a right one.
    assert!(matched > 40 && refused > 40, "{matched} matched, {refused} refused");
}
