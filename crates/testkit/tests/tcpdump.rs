//! tcpdump (libpcap) reads what this crate writes, and filters over the committed sample
//! capture split it: each of a few basic filters keeps some packets and drops others.
//!
//! For the filters that are a single EtherType test on Ethernet (`ip`, `ip6`, `arp`,
//! `vlan`), the count tcpdump keeps is also predicted exactly from the bytes. When tcpdump
//! is not installed, each test prints `SKIPPED: <name>: tcpdump not installed`.

use std::path::{Path, PathBuf};
use std::process::Command;

use weir_testkit::{
    corpus, edge_cases, read_pcap, sample_capture_path, write_pcap, Packet, LINKTYPE_ETHERNET,
};

fn tcpdump_available() -> bool {
    Command::new("tcpdump").arg("--version").output().is_ok_and(|output| output.status.success())
}

fn scratch_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("weir-testkit-tcpdump-{}-{name}", std::process::id()))
}

/// Runs `tcpdump -nn -r input -w output [filter]` and reads back what it kept.
fn tcpdump_keep(input: &Path, filter: &str, name: &str) -> Vec<Packet> {
    let output = scratch_file(name);
    let mut command = Command::new("tcpdump");
    command.arg("-nn").arg("-r").arg(input).arg("-w").arg(&output);
    if !filter.is_empty() {
        command.arg(filter);
    }
    let result = command.output().unwrap_or_else(|error| panic!("running tcpdump: {error}"));
    assert!(
        result.status.success(),
        "tcpdump -r {} '{filter}' failed: {}",
        input.display(),
        String::from_utf8_lossy(&result.stderr)
    );
    let kept =
        read_pcap(&output).unwrap_or_else(|error| panic!("reading tcpdump's output: {error}"));
    let _ = std::fs::remove_file(&output);
    kept
}

/// Whether this tcpdump's libpcap knows the filter (`-d` only compiles and prints it).
fn filter_compiles(input: &Path, filter: &str) -> bool {
    Command::new("tcpdump")
        .arg("-r")
        .arg(input)
        .arg("-d")
        .arg(filter)
        .output()
        .is_ok_and(|output| output.status.success())
}

fn ethertype_at_12(packet: &Packet) -> Option<u16> {
    packet.data.get(12..14).map(|bytes| u16::from_be_bytes([bytes[0], bytes[1]]))
}

#[test]
fn tcpdump_reads_every_record_unchanged() {
    if !tcpdump_available() {
        println!("SKIPPED: tcpdump_reads_every_record_unchanged: tcpdump not installed");
        return;
    }
    let sample = sample_capture_path();
    let ours = read_pcap(&sample).unwrap_or_else(|error| panic!("{error}"));
    let printed = Command::new("tcpdump").arg("-nn").arg("-r").arg(&sample).output();
    let printed = printed.unwrap_or_else(|error| panic!("running tcpdump: {error}"));
    assert!(
        printed.status.success(),
        "tcpdump -nn -r failed: {}",
        String::from_utf8_lossy(&printed.stderr)
    );
    assert!(!printed.stdout.is_empty());
    assert_eq!(tcpdump_keep(&sample, "", "all.pcap"), ours);

    // The edge cases include empty records and a 262144-byte wire length.
    let edges_path = scratch_file("edges.pcap");
    let edges = edge_cases();
    write_pcap(&edges_path, LINKTYPE_ETHERNET, &edges).unwrap_or_else(|error| panic!("{error}"));
    let copied = tcpdump_keep(&edges_path, "", "edges-copy.pcap");
    let _ = std::fs::remove_file(&edges_path);
    let strip = |packets: &[Packet]| -> Vec<(Vec<u8>, u32)> {
        packets.iter().map(|packet| (packet.data.clone(), packet.wire_len)).collect()
    };
    assert_eq!(strip(&copied), strip(&edges));
}

#[test]
fn basic_filters_split_the_sample_capture() {
    if !tcpdump_available() {
        println!("SKIPPED: basic_filters_split_the_sample_capture: tcpdump not installed");
        return;
    }
    let sample = sample_capture_path();
    let packets = read_pcap(&sample).unwrap_or_else(|error| panic!("{error}"));
    let total = packets.len();
    let count_type = |types: &[u16]| {
        packets
            .iter()
            .filter(|packet| ethertype_at_12(packet).is_some_and(|kind| types.contains(&kind)))
            .count()
    };
    let filters: [(&str, Option<usize>); 6] = [
        ("ip", Some(count_type(&[0x0800]))),
        ("ip6", Some(count_type(&[0x86dd]))),
        ("tcp", None),
        ("udp", None),
        ("vlan", Some(count_type(&[0x8100, 0x88a8, 0x9100]))),
        ("arp", Some(count_type(&[0x0806]))),
    ];
    for (filter, predicted) in filters {
        let kept = tcpdump_keep(&sample, filter, &format!("{filter}.pcap"));
        println!("tcpdump '{filter}': {} of {total}", kept.len());
        assert!(!kept.is_empty(), "'{filter}' matched nothing in the sample");
        assert!(kept.len() < total, "'{filter}' matched every packet in the sample");
        if let Some(predicted) = predicted {
            assert_eq!(
                kept.len(),
                predicted,
                "'{filter}': tcpdump kept {} packets, the EtherType at offset 12 says {predicted}",
                kept.len()
            );
        }
    }
}

#[test]
fn a_larger_corpus_splits_under_encapsulation_filters() {
    if !tcpdump_available() {
        println!(
            "SKIPPED: a_larger_corpus_splits_under_encapsulation_filters: tcpdump not installed"
        );
        return;
    }
    let path = scratch_file("larger.pcap");
    write_pcap(&path, LINKTYPE_ETHERNET, &corpus(4, 1000))
        .unwrap_or_else(|error| panic!("{error}"));
    for filter in [
        "mpls",
        "pppoes",
        "pppoed",
        "stp",
        "vxlan",
        "geneve",
        "ip proto 47",
        "icmp6",
        "sctp",
        "igmp",
        "ip[6:2] & 0x1fff != 0",
    ] {
        if !filter_compiles(&path, filter) {
            // `vxlan` arrived in libpcap 1.11; older ones reject it as a syntax error.
            println!("SKIPPED: a_larger_corpus_splits_under_encapsulation_filters: '{filter}': this libpcap cannot compile it");
            continue;
        }
        let kept = tcpdump_keep(&path, filter, "larger-kept.pcap");
        println!("tcpdump '{filter}': {} of 1000", kept.len());
        assert!(!kept.is_empty() && kept.len() < 1000, "'{filter}' kept {} of 1000", kept.len());
    }
    let _ = std::fs::remove_file(&path);
}
