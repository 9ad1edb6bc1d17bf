//! Properties of the generated corpus and the edge cases: determinism, variety (checked by
//! walking the bytes, not by trusting descriptions), length and checksum consistency, and
//! the truncation invariant the pcap format and filter engines rely on.

mod dissect;

use std::collections::{BTreeMap, BTreeSet};

use weir_testkit::wire::internet_checksum;
use weir_testkit::{corpus, edge_cases, Packet};

#[test]
fn same_seed_gives_identical_packets() {
    let first = corpus(7, 500);
    let second = corpus(7, 500);
    assert_eq!(first, second);
    assert_eq!(first.len(), 500);
}

#[test]
fn different_seeds_give_different_packets() {
    let seven = corpus(7, 50);
    let eight = corpus(8, 50);
    let differing = seven.iter().zip(&eight).filter(|(a, b)| a.data != b.data).count();
    assert!(differing > 40, "only {differing} of 50 packets differ between seeds 7 and 8");
}

#[test]
fn a_shorter_corpus_is_a_prefix_of_a_longer_one() {
    let long = corpus(3, 300);
    let short = corpus(3, 120);
    assert_eq!(short.as_slice(), long.get(..120).unwrap_or_default());
    assert!(corpus(3, 0).is_empty());
}

/// Every category the corpus promises, as named by the test dissector.
const REQUIRED: &[&str] = &[
    "eth-no-vlan",
    "vlan-1",
    "qinq-88a8-8100",
    "ipv4",
    "ipv4-options",
    "ipv4-ihl-6",
    "ipv4-ihl-15",
    "ipv4-first-fragment",
    "ipv4-later-fragment",
    "ipv6",
    "ipv6-hop-by-hop",
    "ipv6-routing",
    "ipv6-fragment",
    "ipv6-later-fragment",
    "ipv6-destination-options",
    "ipv6-extension-chain",
    "tcp",
    "tcp-options",
    "tcp-flag-syn",
    "tcp-syn-ack",
    "tcp-flag-fin",
    "tcp-flag-rst",
    "tcp-flag-psh",
    "tcp-flag-urg",
    "tcp-port-22",
    "tcp-port-80",
    "tcp-port-443",
    "tcp-port-53",
    "tcp-port-0",
    "tcp-port-65535",
    "udp",
    "udp-port-53",
    "udp-port-67",
    "udp-port-68",
    "udp-port-4789",
    "udp-port-6081",
    "vxlan-inner-ethernet",
    "geneve-inner-ethernet",
    "icmp-echo",
    "icmp-unreachable",
    "icmpv6-echo",
    "icmpv6-neighbor-solicitation",
    "sctp",
    "igmp",
    "gre",
    "esp",
    "ah",
    "pim",
    "arp-request",
    "arp-reply",
    "rarp",
    "llc-8023",
    "llc-stp",
    "llc-snap",
    "pppoe-discovery",
    "pppoe-session",
    "mpls-1",
    "mpls-2",
    "broadcast-mac",
    "multicast-mac",
    "other-ethertype",
];

fn tag_counts(packets: &[Packet]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for packet in packets {
        for tag in dissect::dissect(&packet.data).tags {
            *counts.entry(tag).or_insert(0) += 1;
        }
    }
    counts
}

#[test]
fn every_category_appears_in_two_thousand_packets() {
    for seed in [1, 2, 3] {
        let packets = corpus(seed, 2000);
        let counts = tag_counts(&packets);
        let missing: Vec<&str> =
            REQUIRED.iter().copied().filter(|tag| !counts.contains_key(*tag)).collect();
        assert!(
            missing.is_empty(),
            "seed {seed}: categories never seen: {missing:?}\nseen: {counts:?}"
        );
        // No single shape drowns the rest: plain Ethernet is the most common, not the only.
        let plain = counts.get("eth-no-vlan").copied().unwrap_or(0);
        assert!(plain < 1800, "seed {seed}: {plain} of 2000 frames are untagged Ethernet");
    }
}

#[test]
fn truncated_and_garbage_records_are_mixed_in() {
    let packets = corpus(1, 2000);
    let truncated: Vec<&Packet> = packets.iter().filter(|packet| packet.is_truncated()).collect();
    assert!(
        (100..=300).contains(&truncated.len()),
        "{} truncated records of 2000",
        truncated.len()
    );
    assert!(truncated.iter().any(|packet| packet.data.is_empty()), "no record cut to zero bytes");
    assert!(
        truncated.iter().any(|packet| (1..14).contains(&packet.data.len())),
        "no record cut inside the Ethernet header"
    );
    assert!(
        truncated.iter().any(|packet| (15..34).contains(&packet.data.len())),
        "no record cut inside the network header"
    );
    assert!(
        truncated.iter().any(|packet| packet.data.len() >= 64),
        "no record cut past the headers"
    );
    let garbage: Vec<&Packet> =
        packets.iter().filter(|packet| packet.description.starts_with("garbage")).collect();
    assert!((40..=130).contains(&garbage.len()), "{} garbage records of 2000", garbage.len());
    assert!(garbage.iter().all(|packet| packet.data.len() < 128 && !packet.is_truncated()));
    let lengths: BTreeSet<usize> = garbage.iter().map(|packet| packet.data.len()).collect();
    assert!(lengths.len() > 20, "garbage lengths barely vary: {lengths:?}");
}

fn check_record_invariants(packets: &[Packet], what: &str) {
    for (index, packet) in packets.iter().enumerate() {
        assert!(
            packet.data.len() as u64 <= u64::from(packet.wire_len),
            "{what} {index}: {} captured bytes > wire length {} ({})",
            packet.data.len(),
            packet.wire_len,
            packet.description
        );
        assert!(packet.ts_usec < 1_000_000, "{what} {index}: ts_usec {}", packet.ts_usec);
        assert!(!packet.description.is_empty(), "{what} {index} has no description");
    }
    for (index, pair) in packets.windows(2).enumerate() {
        if let [earlier, later] = pair {
            assert!(
                (earlier.ts_sec, earlier.ts_usec) <= (later.ts_sec, later.ts_usec),
                "{what} {}: timestamp goes backwards",
                index + 1
            );
        }
    }
}

#[test]
fn captured_bytes_never_exceed_the_wire_length_and_time_moves_forward() {
    for seed in [1, 2, 99, u64::MAX] {
        check_record_invariants(&corpus(seed, 2000), &format!("corpus({seed}) packet"));
    }
    check_record_invariants(&edge_cases(), "edge case");
}

#[test]
fn complete_frames_have_consistent_lengths_and_ipv4_checksums() {
    let packets = corpus(5, 3000);
    let mut headers_checked = 0;
    for (index, packet) in packets.iter().enumerate() {
        if packet.is_truncated() || packet.description.starts_with("garbage") {
            continue;
        }
        let findings = dissect::dissect(&packet.data);
        assert!(
            findings.length_errors.is_empty(),
            "packet {index} ({}): {:?}",
            packet.description,
            findings.length_errors
        );
        for &(offset, header_len, _) in &findings.ipv4_headers {
            let header = packet.data.get(offset..offset + header_len).unwrap_or_default();
            assert_eq!(
                internet_checksum(header),
                0,
                "packet {index} ({}): bad IPv4 checksum at {offset}",
                packet.description
            );
            headers_checked += 1;
        }
    }
    assert!(headers_checked > 1000, "only {headers_checked} IPv4 headers checked");
}

#[test]
fn addresses_and_ports_repeat_so_filters_both_match_and_miss() {
    let packets = corpus(1, 2000);
    let counts = tag_counts(&packets);
    let ipv4 = counts.get("ipv4").copied().unwrap_or(0);
    // `host 10.0.0.1` must match some IPv4 packets but far from all.
    let with_host = packets
        .iter()
        .filter(|packet| packet.data.windows(4).any(|window| window == [10, 0, 0, 1]))
        .count();
    assert!(
        with_host > 20 && with_host < ipv4,
        "10.0.0.1 appears in {with_host} of {ipv4} IPv4 packets"
    );
    let tcp = counts.get("tcp").copied().unwrap_or(0);
    let port_443 = counts.get("tcp-port-443").copied().unwrap_or(0);
    assert!(port_443 > 10 && port_443 < tcp / 2, "port 443 in {port_443} of {tcp} TCP packets");
}

#[test]
fn edge_cases_cover_the_listed_bounds() {
    let cases = edge_cases();
    assert!(cases.len() >= 50, "only {} edge cases", cases.len());
    let descriptions: BTreeSet<&str> =
        cases.iter().map(|packet| packet.description.as_str()).collect();
    assert_eq!(descriptions.len(), cases.len(), "edge-case descriptions must be unique");
    for len in [0usize, 1, 12, 13, 14, 15] {
        assert!(cases.iter().any(|packet| packet.data.len() == len), "no {len}-byte edge case");
    }
    assert!(cases.iter().any(|packet| packet.data.is_empty() && packet.wire_len > 0));
    let ipv4_frames: Vec<&Packet> = cases
        .iter()
        .filter(|packet| {
            packet.data.get(12..14) == Some(&[0x08, 0x00][..]) && packet.data.len() > 14
        })
        .collect();
    let ihl = |packet: &Packet| packet.data.get(14).map(|byte| byte & 0x0f);
    assert!(
        ipv4_frames.iter().any(|packet| ihl(packet).is_some_and(|ihl| ihl < 5)),
        "no IPv4 IHL < 5"
    );
    assert!(
        ipv4_frames.iter().any(|packet| {
            let total = packet
                .data
                .get(16..18)
                .map_or(0, |bytes| usize::from(u16::from_be_bytes([bytes[0], bytes[1]])));
            total > packet.data.len() - 14
        }),
        "no IPv4 total length beyond the captured bytes"
    );
    assert!(
        ipv4_frames.iter().any(|packet| {
            ihl(packet) == Some(5)
                && packet.data.get(23) == Some(&6)
                && packet.data.get(46).is_some_and(|byte| byte >> 4 < 5)
        }),
        "no TCP data offset < 5"
    );
    assert!(cases.iter().any(|packet| packet.is_truncated()), "no truncated edge case");
    assert_eq!(edge_cases(), cases, "edge cases must be deterministic");
}
