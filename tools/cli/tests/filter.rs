//! `weir filter` and `weir compile` end to end, with tcpdump (and libpcap under it) as the
//! oracle: what matches, what gets written, how each packet is printed, and what happens
//! to bad expressions and damaged captures.
//!
//! The printed lines are compared with `tcpdump -q -n` only for the packet kinds weir's
//! printer claims to print as tcpdump does (see tools/cli/src/summary.rs). tcpdump itself
//! picks those packets out ([`HANDLED`]), so the selection does not depend on weir.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use weir_runtime::capture::CaptureReader;
use weir_runtime::source::PacketSource;
use weir_testkit::{Packet, Scratch};

use crate::common::{have_tcpdump, path, sample, text, weir, weir_stdin};

/// The packets whose tcpdump line weir reproduces exactly: IPv4 carrying TCP, UDP or ICMP;
/// IPv6 whose first header is TCP, UDP or an ICMPv6 message weir decodes; ARP and RARP on
/// Ethernet-like hardware with the operations that have a one-line form. (pflang's `and`
/// and `or` have equal precedence, hence the parentheses.)
const HANDLED: &str = "(ip and (tcp or udp or icmp)) \
    or (ip6 and (ip6[6] = 6 or ip6[6] = 17)) \
    or (ip6 and ip6[6] = 58 and ((ip6[40] = 1 and ip6[41] <= 4) \
        or (ip6[40] >= 2 and ip6[40] <= 4) \
        or (ip6[40] >= 128 and ip6[40] <= 147 and not (ip6[40] = 130 or ip6[40] = 138 \
            or ip6[40] = 139 or ip6[40] = 140 or ip6[40] = 143)))) \
    or ((arp or rarp) and not (arp[0:2] = 15 or arp[0:2] = 19) \
        and (arp[6:2] = 1 or arp[6:2] = 2 or arp[6:2] = 3 or arp[6:2] = 4 \
            or arp[6:2] = 8 or arp[6:2] = 9))";

/// A fresh directory for one test (testkit's [`Scratch`], named after this file and the test).
fn scratch(test: &str) -> Scratch {
    Scratch::new(&format!("filter-test-{test}"))
}

fn tcpdump(args: &[&str]) -> Output {
    let out = Command::new("tcpdump").env("TZ", "UTC").args(args).output().expect("tcpdump runs");
    assert!(out.status.success(), "tcpdump {args:?}: {}", text(&out.stderr));
    out
}

/// The packets tcpdump keeps for `expr`, written to `dest`.
fn tcpdump_keep(capture: &str, expr: &str, dest: &Path) {
    tcpdump(&["-r", capture, "-w", path(dest), expr]);
}

/// (data, wire length, seconds, nanoseconds) of every record of a capture file.
fn records(file: &Path) -> Vec<(Vec<u8>, u32, u64, u32)> {
    let mut capture = CaptureReader::open(file).unwrap();
    let mut records = Vec::new();
    while let Some(r) = capture.next_packet() {
        let r = r.unwrap();
        records.push((r.data.to_vec(), r.wire_len, r.ts_sec, r.ts_nsec));
    }
    records
}

/// Where each packet record of a capture file starts and ends.
fn spans(file: &Path) -> Vec<std::ops::Range<usize>> {
    let mut capture = CaptureReader::open(file).unwrap();
    let mut spans = Vec::new();
    while let Some(r) = capture.next_packet() {
        let r = r.unwrap();
        let start = r.offset as usize;
        spans.push(start..start + r.stored.unwrap().record.len());
    }
    spans
}

/// Expressions the lowering handles, each with packets in the sample that match and
/// packets that do not.
const EXPRESSIONS: &[&str] = &[
    "",
    "ip",
    "ip6",
    "arp or rarp",
    "tcp",
    "udp and not port 53",
    "icmp or icmp6",
    "host 10.0.0.1",
    "net 192.168.1.0/24",
    "portrange 1-1024",
    "less 100",
    "len > 100",
    "vlan",
    "ether broadcast",
    "ip[9] = 6",
    "tcp[13] & 2 != 0",
    "not ip",
];

#[test]
fn count_equals_what_tcpdump_keeps() {
    if !have_tcpdump("count_equals_what_tcpdump_keeps") {
        return;
    }
    let dir = scratch("count");
    for (i, expr) in EXPRESSIONS.iter().enumerate() {
        let kept = dir.join(&format!("kept{i}.pcap"));
        tcpdump_keep(&sample(), expr, &kept);
        let expected = records(&kept).len();
        let out = weir(&["filter", "-r", &sample(), "--count", expr]);
        assert!(out.status.success(), "{expr}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), format!("{expected}\n"), "`{expr}`");
    }
    // Several words are one expression, as in tcpdump.
    let joined = weir(&["filter", "-r", &sample(), "--count", "udp", "and", "not", "port", "53"]);
    let quoted = weir(&["filter", "-r", &sample(), "--count", "udp and not port 53"]);
    assert_eq!(joined.stdout, quoted.stdout);
}

#[test]
fn written_packets_equal_what_tcpdump_keeps() {
    if !have_tcpdump("written_packets_equal_what_tcpdump_keeps") {
        return;
    }
    let dir = scratch("write");
    let original = std::fs::read(sample()).unwrap();
    for (i, expr) in EXPRESSIONS.iter().enumerate() {
        let kept = dir.join(&format!("kept{i}.pcap"));
        let ours = dir.join(&format!("ours{i}.pcap"));
        tcpdump_keep(&sample(), expr, &kept);
        let out = weir(&["filter", "-r", &sample(), "-w", path(&ours), expr]);
        assert!(out.status.success(), "{expr}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "-w prints nothing, as tcpdump");
        assert_eq!(records(&ours), records(&kept), "`{expr}`: bytes, lengths and timestamps");
        // Same header as the input: byte order, version, snap length, link type.
        assert_eq!(std::fs::read(&ours).unwrap()[..24], original[..24], "`{expr}`");
    }
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(
        names.iter().all(|n| !n.to_string_lossy().contains(".tmp")),
        "no temporary file is left behind: {names:?}"
    );
}

#[test]
fn pcapng_input_gives_pcapng_output() {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    let dir = scratch("pcapng");
    let input = dir.join("in.pcapng");
    let packets = weir_testkit::corpus(21, 300);
    {
        let file = std::fs::File::create(&input).unwrap();
        let mut writer = pcap_file::pcapng::PcapNgWriter::new(file).unwrap();
        let idb = InterfaceDescriptionBlock {
            linktype: pcap_file::DataLink::ETHERNET,
            snaplen: 0,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        };
        writer.write_pcapng_block(idb).unwrap();
        for p in &packets {
            let nanos = u64::from(p.ts_sec) * 1_000_000_000 + u64::from(p.ts_usec) * 1000 + 7;
            let epb = EnhancedPacketBlock {
                interface_id: 0,
                timestamp: std::time::Duration::from_nanos(nanos),
                original_len: p.wire_len,
                data: std::borrow::Cow::Borrowed(&p.data),
                options: vec![],
            };
            writer.write_pcapng_block(epb).unwrap();
        }
    }
    let out_file = dir.join("out.pcapng");
    let out = weir(&["filter", "-r", path(&input), "-w", path(&out_file), "udp"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read(&out_file).unwrap();
    assert_eq!(written[..4], [0x0a, 0x0d, 0x0d, 0x0a], "a pcapng section header first");
    let input_records = records(&input);
    let kept = records(&out_file);
    // The same packets as filtering the input with `--count`, in order, nanoseconds intact.
    let count = weir(&["filter", "-r", path(&input), "--count", "udp"]);
    assert_eq!(text(&count.stdout), format!("{}\n", kept.len()));
    assert!(kept.len() > 10);
    let mut from = input_records.iter();
    for record in &kept {
        assert!(from.any(|r| r == record), "a kept record is one of the input's, in order");
        assert_eq!(record.3 % 1000, 7, "nanosecond timestamps survive");
    }
    if have_tcpdump("pcapng_input_gives_pcapng_output (tcpdump cross-check)") {
        let theirs = tcpdump(&["-r", path(&out_file), "-n", "-q"]);
        assert_eq!(text(&theirs.stdout).lines().count(), kept.len(), "tcpdump reads it");
    }
}

#[test]
fn pcapng_interfaces_of_different_link_types_each_get_their_filter() {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    let dir = scratch("pcapng-two-links");
    let ethernet = weir_testkit::corpus(5, 400);
    let raw = reframe(&ethernet, 101);
    let input = dir.join("two.pcapng");
    {
        let file = std::fs::File::create(&input).unwrap();
        let mut writer = pcap_file::pcapng::PcapNgWriter::new(file).unwrap();
        for linktype in [pcap_file::DataLink::ETHERNET, pcap_file::DataLink::RAW] {
            let idb = InterfaceDescriptionBlock { linktype, snaplen: 0, options: vec![] };
            writer.write_pcapng_block(idb).unwrap();
        }
        // All the Ethernet frames on interface 0, then the same packets raw on interface 1.
        for (interface, packets) in [(0, &ethernet), (1, &raw)] {
            for p in packets.iter() {
                let micros = u64::from(p.ts_sec) * 1_000_000 + u64::from(p.ts_usec);
                let epb = EnhancedPacketBlock {
                    interface_id: interface,
                    timestamp: std::time::Duration::from_nanos(micros),
                    original_len: p.wire_len,
                    data: std::borrow::Cow::Borrowed(&p.data),
                    options: vec![],
                };
                writer.write_pcapng_block(epb).unwrap();
            }
        }
    }
    let eth_file = dir.join("eth.pcap");
    weir_testkit::write_pcap(&eth_file, 1, &ethernet).unwrap();
    let raw_file = dir.join("raw.pcap");
    weir_testkit::write_pcap(&raw_file, 101, &raw).unwrap();
    let count = |file: &Path| {
        let out = weir(&["filter", "-r", path(file), "--count", "udp"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).trim().parse::<usize>().unwrap()
    };
    let (on_ethernet, on_raw) = (count(&eth_file), count(&raw_file));
    assert!(on_raw > 10 && on_ethernet >= on_raw);
    assert_eq!(
        count(&input),
        on_ethernet + on_raw,
        "`udp` means the right thing on each interface"
    );
    // Printed per interface, too: the raw half prints as the raw capture does.
    let lines = text(&weir(&["filter", "-r", path(&input), "udp"]).stdout);
    let raw_lines = text(&weir(&["filter", "-r", path(&raw_file), "udp"]).stdout);
    let tail: Vec<_> = lines.lines().skip(on_ethernet).collect();
    assert_eq!(tail, raw_lines.lines().collect::<Vec<_>>());
}

fn assert_same_lines(capture: &Path, min_lines: usize, what: &str) {
    let ours = weir(&["filter", "-r", path(capture)]);
    assert!(ours.status.success(), "{what}: {}", text(&ours.stderr));
    let theirs = tcpdump(&["-q", "-n", "-r", path(capture)]);
    let (ours, theirs) = (text(&ours.stdout), text(&theirs.stdout));
    let mut mismatches = Vec::new();
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        if a != b {
            mismatches.push(format!("packet {}:\n  weir:    {a}\n  tcpdump: {b}", i + 1));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{what}: {} lines differ:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(10)].join("\n")
    );
    assert_eq!(ours.lines().count(), theirs.lines().count(), "{what}");
    assert!(
        ours.lines().count() >= min_lines,
        "{what}: only {} lines compared",
        ours.lines().count()
    );
}

/// The kinds weir prints as tcpdump does, picked out of `capture` by tcpdump, compared
/// line by line.
fn compare_handled(capture: &Path, dir: &Path, min_lines: usize, what: &str) {
    let handled = dir.join(format!("{what}-handled.pcap"));
    tcpdump_keep(path(capture), HANDLED, &handled);
    assert_same_lines(&handled, min_lines, what);
}

#[test]
fn lines_match_tcpdump_on_the_sample() {
    if !have_tcpdump("lines_match_tcpdump_on_the_sample") {
        return;
    }
    let dir = scratch("lines-sample");
    compare_handled(Path::new(&sample()), &dir, 60, "sample.pcap");
    // With an expression, the lines are those of the matching packets.
    let ours = weir(&["filter", "-r", &sample(), "udp and not port 53"]);
    let theirs = tcpdump(&["-q", "-n", "-r", &sample(), "udp and not port 53"]);
    let handled_udp: Vec<_> = text(&theirs.stdout)
        .lines()
        .filter(|l| {
            // `TIME IP[6] SRC.PORT > DST.PORT: UDP, length N`: plain UDP, no extension headers.
            let words: Vec<_> = l.split(' ').collect();
            words.len() == 8 && words[1].starts_with("IP") && words[5] == "UDP,"
        })
        .map(String::from)
        .collect();
    let ours: Vec<_> = text(&ours.stdout).lines().map(String::from).collect();
    assert_eq!(ours.len(), text(&theirs.stdout).lines().count());
    assert!(handled_udp.len() > 5);
    for line in &handled_udp {
        assert!(ours.contains(line), "{line}");
    }
}

/// Re-frames the corpus's untagged IPv4, IPv6 and ARP frames for another link type.
fn reframe(packets: &[Packet], linktype: u32) -> Vec<Packet> {
    let mut out = Vec::new();
    for p in packets.iter().filter(|p| p.data.len() >= 14) {
        let ethertype = u16::from_be_bytes([p.data[12], p.data[13]]);
        let v4 = ethertype == 0x0800;
        let header: Vec<u8> = match (linktype, ethertype) {
            (113, 0x0800 | 0x86dd | 0x0806) => {
                let mut h = vec![0, 0, 0, 1, 0, 6];
                h.extend_from_slice(&p.data[6..12]);
                h.extend_from_slice(&[0, 0]);
                h.extend_from_slice(&ethertype.to_be_bytes());
                h
            }
            (0, 0x0800 | 0x86dd) => (if v4 { 2u32 } else { 24 }).to_le_bytes().to_vec(),
            (108, 0x0800 | 0x86dd) => (if v4 { 2u32 } else { 24 }).to_be_bytes().to_vec(),
            (101, 0x0800 | 0x86dd) | (228, 0x0800) | (229, 0x86dd) => vec![],
            _ => continue,
        };
        let mut data = header.clone();
        data.extend_from_slice(&p.data[14..]);
        out.push(Packet {
            data,
            wire_len: p.wire_len - 14 + header.len() as u32,
            ts_sec: p.ts_sec,
            ts_usec: p.ts_usec,
            description: String::new(),
        });
    }
    out
}

#[test]
fn lines_match_tcpdump_on_a_generated_corpus_and_other_link_types() {
    if !have_tcpdump("lines_match_tcpdump_on_a_generated_corpus_and_other_link_types") {
        return;
    }
    let dir = scratch("lines-corpus");
    let packets = weir_testkit::corpus(11, 4000);
    let ethernet = dir.join("corpus.pcap");
    weir_testkit::write_pcap(&ethernet, 1, &packets).unwrap();
    compare_handled(&ethernet, &dir, 1000, "corpus-ethernet");
    for (linktype, min_lines) in
        [(113, 500), (101, 400), (0, 400), (108, 400), (228, 200), (229, 100)]
    {
        let file = dir.join(&format!("corpus-{linktype}.pcap"));
        weir_testkit::write_pcap(&file, linktype, &reframe(&packets, linktype)).unwrap();
        compare_handled(&file, &dir, min_lines, &format!("corpus-linktype-{linktype}"));
    }
}

/// An Ethernet frame (with `payload` after an EtherType).
fn ether(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 0x11, 0x22, 0x33, 0x44, 0x55, 2, 0x42, 0xac, 0x11, 0, 2];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(proto: u8, payload: &[u8], total: Option<u16>, frag: u16) -> Vec<u8> {
    let total = total.unwrap_or(20 + payload.len() as u16);
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 1]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1, 192, 168, 1, 2]);
    h.extend_from_slice(payload);
    h
}

fn ipv6(next: u8, payload: &[u8], src: [u8; 16]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    h.extend_from_slice(payload);
    h
}

fn one() -> [u8; 16] {
    let mut a = [0; 16];
    a[15] = 1;
    a
}

/// Hand-made packets for every branch of the printer: all ICMP types and codes (with the
/// quoted datagram whole and cut), ICMPv6 messages, ARP operations and hardware, odd UDP
/// and TCP lengths, IPv4 headers that lie, captures cut at every byte of a header, and
/// IPv6 addresses of every shape.
fn crafted() -> Vec<(Vec<u8>, u32)> {
    let mut frames: Vec<(Vec<u8>, u32)> = Vec::new();
    let mut add = |frame: Vec<u8>, cap: Option<usize>| {
        let wire = frame.len() as u32;
        let data = match cap {
            Some(cap) => frame[..cap.min(frame.len())].to_vec(),
            None => frame,
        };
        frames.push((data, wire));
    };
    let udp_header = |sport: u16, dport: u16, len: u16| {
        let mut u = sport.to_be_bytes().to_vec();
        u.extend_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(&len.to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u
    };
    let mut quoted_udp = udp_header(1234, 53, 20);
    quoted_udp.extend_from_slice(&[b'x'; 12]);
    let quoted = [
        ipv4(17, &quoted_udp, None, 0),
        ipv4(6, &[0x04, 0xd2, 0, 80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], None, 0),
        ipv4(47, &[0x04, 0xd2, 0, 99, 0, 0, 0, 0], None, 0),
    ];
    for kind in 0u8..=20 {
        let codes: &[u8] = if matches!(kind, 3 | 5 | 11 | 12) {
            &[0, 1, 2, 3, 4, 5, 6, 9, 13, 15, 16]
        } else {
            &[0]
        };
        for &code in codes {
            let mut icmp = vec![kind, code, 0, 0, 0, 7, 0, 9];
            if matches!(kind, 3 | 5 | 11 | 12) {
                for q in &quoted {
                    let mut m = icmp.clone();
                    m.extend_from_slice(q);
                    add(ether(0x0800, &ipv4(1, &m, None, 0)), None);
                    add(ether(0x0800, &ipv4(1, &m, None, 0)), Some(14 + 20 + 8 + 20));
                }
                continue;
            }
            if kind == 9 {
                icmp = vec![
                    9, 0, 0, 0, 2, 2, 0x07, 0x08, 10, 0, 0, 1, 0, 0, 0, 5, 10, 0, 0, 2, 0, 0, 0, 6,
                ];
            } else {
                icmp.extend_from_slice(&[0, 0x36, 0xee, 0x80, 0, 0, 0, 1, 5, 0x26, 0x5b, 0xff]);
            }
            add(ether(0x0800, &ipv4(1, &icmp, None, 0)), None);
            add(ether(0x0800, &ipv4(1, &icmp[..2], None, 0)), None);
            add(ether(0x0800, &ipv4(1, &icmp[..6], None, 0)), None);
        }
    }
    let mut quoted6 = ipv6(17, &udp_header(1, 5353, 8), one());
    quoted6.truncate(48);
    for kind in
        [1u8, 2, 3, 4, 128, 129, 131, 132, 133, 134, 135, 136, 137, 141, 142, 144, 145, 146, 147]
    {
        let codes: &[u8] = if matches!(kind, 1 | 3 | 4) { &[0, 1, 2, 3, 4] } else { &[0] };
        for &code in codes {
            let mut m = vec![kind, code, 0, 0, 0, 7, 0, 9];
            if matches!(kind, 1..=4) {
                m.extend_from_slice(&quoted6);
            } else {
                m.extend_from_slice(&[0; 15]);
                m.push(5);
                m.extend_from_slice(&[0; 16]);
            }
            add(ether(0x86dd, &ipv6(58, &m, one())), None);
            add(ether(0x86dd, &ipv6(58, &m, one())), Some(14 + 40 + 6));
            add(ether(0x86dd, &ipv6(58, &m, one())), Some(14 + 40 + 20));
        }
    }
    for op in [1u16, 2, 3, 4, 8, 9] {
        for (hardware, protocol, hlen, plen) in [
            (1u16, 0x0800u16, 6u8, 4u8),
            (6, 0x0800, 6, 4),
            (1, 0x0800, 8, 4),
            (1, 0x86dd, 6, 16),
            (1, 0x0800, 0, 4),
        ] {
            let mut a = hardware.to_be_bytes().to_vec();
            a.extend_from_slice(&protocol.to_be_bytes());
            a.extend_from_slice(&[hlen, plen]);
            a.extend_from_slice(&op.to_be_bytes());
            for side in [1u8, 0] {
                a.extend((0..hlen).map(|b| b.wrapping_add(side)));
                a.extend((0..plen).map(|b| if b == 0 { 10 } else { b + side }));
            }
            add(ether(0x0806, &a), None);
            add(ether(0x8035, &a), None);
            add(ether(0x0806, &a), Some(14 + 20));
        }
    }
    for ulen in [0u16, 4, 8, 9, 20, 100, 65535] {
        let mut u = udp_header(10, 20, ulen);
        u.extend_from_slice(&[b'y'; 12]);
        add(ether(0x0800, &ipv4(17, &u, None, 0)), None);
        add(ether(0x0800, &ipv4(17, &u, None, 0x2000)), None);
        add(ether(0x86dd, &ipv6(17, &u, one())), None);
    }
    for offset in 0u8..16 {
        let mut t = vec![0, 10, 0, 20, 0, 0, 0, 1, 0, 0, 0, 2, offset << 4, 2, 0, 0, 0, 0, 0, 0];
        t.extend_from_slice(&[b'z'; 10]);
        add(ether(0x0800, &ipv4(6, &t, None, 0)), None);
        add(ether(0x86dd, &ipv6(6, &t, one())), None);
    }
    let mut tcp = vec![0, 10, 0, 20, 0, 0, 0, 1, 0, 0, 0, 2, 0x50, 2, 0, 0, 0, 0, 0, 0];
    tcp.extend_from_slice(b"zzz");
    let mut udp = udp_header(10, 20, 11);
    udp.extend_from_slice(b"zzz");
    for cap in 1..14 + 20 + 23 {
        add(ether(0x0800, &ipv4(6, &tcp, None, 0)), Some(cap));
        add(ether(0x0800, &ipv4(17, &udp, None, 0)), Some(cap));
    }
    for cap in (14..14 + 40 + 23).step_by(3) {
        add(ether(0x86dd, &ipv6(6, &tcp, one())), Some(cap));
    }
    for total in [0u16, 10, 19, 20, 30, 60, 2000] {
        add(ether(0x0800, &ipv4(17, &udp, Some(total), 0)), None);
    }
    add(ether(0x0800, &ipv4(1, &[8, 0, 0, 0, 0, 7, 0, 9], None, 0x2000)), None);
    add(ether(0x0800, &ipv4(1, &[8, 0, 0, 0, 0, 7, 0, 9], None, 0x0010)), None);
    for text in [
        "::1",
        "::ffff:10.0.0.1",
        "::10.0.0.1",
        "::0.0.0.1",
        "1:0:0:2:0:0:0:3",
        "0:0:1::",
        "1::",
        "fe80::1:2:3:4:5",
        "1:2:3:4:5:6:7:8",
        "0:0:0:0:0:fffe:1:1",
    ] {
        let src: std::net::Ipv6Addr = text.parse().unwrap();
        add(ether(0x86dd, &ipv6(17, &udp, src.octets())), None);
    }
    frames
}

#[test]
fn lines_match_tcpdump_on_crafted_edge_cases() {
    if !have_tcpdump("lines_match_tcpdump_on_crafted_edge_cases") {
        return;
    }
    let dir = scratch("lines-crafted");
    let packets: Vec<Packet> = crafted()
        .into_iter()
        .enumerate()
        .map(|(i, (data, wire_len))| Packet {
            data,
            wire_len,
            ts_sec: 1_700_000_000 + i as u32,
            ts_usec: (i as u32 * 7919) % 1_000_000,
            description: String::new(),
        })
        .collect();
    let file = dir.join("crafted.pcap");
    weir_testkit::write_pcap(&file, 1, &packets).unwrap();
    // Every crafted packet is of a handled kind, so all of them are compared.
    assert_same_lines(&file, packets.len(), "crafted");
}

#[test]
fn standard_input_reads_like_a_file() {
    let bytes = std::fs::read(sample()).unwrap();
    let from_file = weir(&["filter", "-r", &sample(), "tcp or arp"]);
    let from_stdin = weir_stdin(&["filter", "-r", "-", "tcp or arp"], &bytes);
    assert!(from_stdin.status.success(), "{}", text(&from_stdin.stderr));
    assert_eq!(from_stdin.stdout, from_file.stdout);
    assert!(text(&from_file.stdout).lines().count() > 20);
    // And into a capture on standard output.
    let written = weir_stdin(&["filter", "-r", "-", "-w", "-", "tcp or arp"], &bytes);
    assert!(written.status.success(), "{}", text(&written.stderr));
    let mut capture = CaptureReader::new(&written.stdout[..]).unwrap();
    let mut count = 0;
    while let Some(r) = capture.next_packet() {
        r.unwrap();
        count += 1;
    }
    assert_eq!(count, text(&from_file.stdout).lines().count());
}

#[test]
fn count_limit_stops_after_n_matches() {
    let all = text(&weir(&["filter", "-r", &sample(), "ip"]).stdout);
    let five = weir(&["filter", "-r", &sample(), "-c", "5", "ip"]);
    assert!(five.status.success());
    let first: Vec<_> = all.lines().take(5).collect();
    assert_eq!(text(&five.stdout).lines().collect::<Vec<_>>(), first);
    assert_eq!(text(&weir(&["filter", "-r", &sample(), "-c", "5", "--count", "ip"]).stdout), "5\n");
    let many = weir(&["filter", "-r", &sample(), "-c", "100000", "--count", "ip"]);
    assert_eq!(text(&many.stdout), format!("{}\n", all.lines().count()));
    let dir = scratch("limit");
    let out = dir.join("five.pcap");
    assert!(weir(&["filter", "-r", &sample(), "-c", "5", "-w", path(&out), "ip"]).status.success());
    assert_eq!(records(&out).len(), 5);
    let zero = weir(&["filter", "-r", &sample(), "-c", "0", "ip"]);
    assert_eq!(zero.status.code(), Some(2), "clap rejects a zero count");
    if have_tcpdump("count_limit_stops_after_n_matches (tcpdump cross-check)") {
        let theirs = tcpdump(&["-q", "-n", "-r", &sample(), "-c", "5", "ip"]);
        assert_eq!(text(&theirs.stdout).lines().count(), 5);
    }
}

#[test]
fn expression_file_with_comments() {
    let dir = scratch("exprfile");
    let file = dir.join("web.filter");
    std::fs::write(&file, "# traffic of interest\nudp # datagrams\n  and not port 53\n").unwrap();
    let from_file = weir(&["filter", "-r", &sample(), "--count", "-F", path(&file)]);
    assert!(from_file.status.success(), "{}", text(&from_file.stderr));
    let from_args = weir(&["filter", "-r", &sample(), "--count", "udp and not port 53"]);
    assert_eq!(from_file.stdout, from_args.stdout);
    // Arguments are ignored with -F, as tcpdump ignores them, with a warning.
    let both = weir(&["filter", "-r", &sample(), "--count", "-F", path(&file), "tcp"]);
    assert_eq!(both.stdout, from_args.stdout);
    assert!(text(&both.stderr).contains("ignored"), "{}", text(&both.stderr));
    if have_tcpdump("expression_file_with_comments (tcpdump cross-check)") {
        let theirs = tcpdump(&["-r", &sample(), "-F", path(&file), "-q", "-n"]);
        assert_eq!(text(&from_file.stdout), format!("{}\n", text(&theirs.stdout).lines().count()));
    }
    // An error in the file names its line and column.
    std::fs::write(&file, "udp # fine\nand hots 10.0.0.1\n").unwrap();
    let bad = weir(&["filter", "-r", &sample(), "-F", path(&file)]);
    assert_eq!(bad.status.code(), Some(1));
    let err = text(&bad.stderr);
    assert!(err.contains(&format!("{}:2:", file.display())), "{err}");
    assert!(err.contains("and hots 10.0.0.1"), "{err}");
    assert!(err.lines().any(|l| l.trim_end().ends_with('^')), "{err}");
}

#[test]
fn bad_expressions_exit_1_with_a_caret() {
    let dir = scratch("bad-expr");
    let out_file = dir.join("never.pcap");
    for (expr, column) in
        [("tcp and", 8), ("ip and hst 1", 8), ("port 99999", 6), ("tcp[1:3] = 1", 7)]
    {
        let out = weir(&["filter", "-r", &sample(), "-w", path(&out_file), expr]);
        assert_eq!(out.status.code(), Some(1), "`{expr}`");
        let err = text(&out.stderr);
        assert!(err.contains(&format!("column {column}")), "`{expr}`: {err}");
        let caret = err.lines().last().unwrap();
        assert_eq!(caret.find('^'), Some(2 + column - 1), "`{expr}`: {err}");
        assert!(out.stdout.is_empty());
        assert!(!out_file.exists(), "a bad expression writes nothing");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no temporary file either");
}

/// The sample cut at `len` bytes, as a file.
fn cut_sample(dir: &Path, len: usize) -> PathBuf {
    let bytes = std::fs::read(sample()).unwrap();
    let file = dir.join(format!("cut{len}.pcap"));
    std::fs::write(&file, &bytes[..len]).unwrap();
    file
}

#[test]
fn damaged_captures_report_the_place_and_keep_what_came_before() {
    let dir = scratch("damaged");
    let spans = spans(Path::new(&sample()));
    for cut in [30usize, 41, 500, 3000, 9000, 15_000, 20_000] {
        let file = cut_sample(&dir, cut);
        let complete = spans.iter().filter(|s| s.end <= cut).count();
        let out = weir(&["filter", "-r", path(&file), "--count"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "cut at {cut}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(
            text(&out.stdout),
            format!("{complete}\n"),
            "cut at {cut}: the packets before count"
        );
        let at = spans[complete].start;
        assert!(
            err.contains(&format!("record {} at byte {at}", complete + 1)),
            "cut at {cut}: {err}"
        );
        // Printing stops at the same place.
        let lines = weir(&["filter", "-r", path(&file)]);
        assert_eq!(text(&lines.stdout).lines().count(), complete);
        // -w keeps the good prefix as a complete capture and says so.
        let kept = dir.join(&format!("kept{cut}.pcap"));
        let written = weir(&["filter", "-r", path(&file), "-w", path(&kept), "ip"]);
        assert_eq!(written.status.code(), Some(1));
        let err = text(&written.stderr);
        assert!(
            err.contains("holds only the")
                && err.contains(&format!("before record {}", complete + 1)),
            "{err}"
        );
        let prefix = records(&kept);
        let expected = weir(&["filter", "-r", path(&file), "--count", "ip"]);
        assert_eq!(text(&expected.stdout), format!("{}\n", prefix.len()));
        if have_tcpdump("damaged captures (tcpdump cross-check)") {
            let theirs = dir.join(&format!("theirs{cut}.pcap"));
            let _ = Command::new("tcpdump")
                .args(["-r", path(&file), "-w", path(&theirs), "ip"])
                .output();
            assert_eq!(prefix, records(&theirs), "cut at {cut}: the same packets tcpdump keeps");
        }
    }
    // Cut inside the file header: nothing to process.
    let file = cut_sample(&dir, 10);
    let out = weir(&["filter", "-r", path(&file), "--count"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("at byte 0"), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    // Only the header: no packets, no error.
    let out = weir(&["filter", "-r", path(&cut_sample(&dir, 24)), "--count"]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), "0\n");
}

#[test]
fn wrong_magic_and_absurd_lengths_are_errors_with_a_place() {
    let dir = scratch("corrupt");
    let bytes = std::fs::read(sample()).unwrap();
    let mut magic = bytes.clone();
    magic[..4].copy_from_slice(b"WEIR");
    let file = dir.join("magic.pcap");
    std::fs::write(&file, &magic).unwrap();
    let out = weir(&["filter", "-r", path(&file), "ip"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("at byte 0") && err.contains("magic"), "{err}");
    assert!(out.stdout.is_empty());

    let sixth = spans(Path::new(&sample()))[5].start;
    for absurd in [u32::MAX, 0x7fff_ffff, 300_000] {
        let mut damaged = bytes.clone();
        // The captured length of record 6.
        damaged[sixth + 8..sixth + 12].copy_from_slice(&absurd.to_le_bytes());
        let file = dir.join(&format!("absurd{absurd}.pcap"));
        std::fs::write(&file, &damaged).unwrap();
        let out = weir(&["filter", "-r", path(&file), "--count"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(text(&out.stdout), "5\n", "{err}");
        assert!(err.contains(&format!("record 6 at byte {sixth}")), "{err}");
    }
}

#[test]
fn output_is_never_left_half_written() {
    let dir = scratch("atomic");
    let dest = dir.join("out.pcap");
    std::fs::write(&dest, b"old contents").unwrap();
    // A failure before any packet (bad expression, unreadable input) leaves it alone.
    let out = weir(&["filter", "-r", &sample(), "-w", path(&dest), "tcp and"]);
    assert_eq!(out.status.code(), Some(1));
    let out = weir(&["filter", "-r", path(&dir.join("missing.pcap")), "-w", path(&dest), "tcp"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&dest).unwrap(), b"old contents");
    // Success replaces it whole.
    assert!(weir(&["filter", "-r", &sample(), "-w", path(&dest), "tcp"]).status.success());
    assert!(!records(&dest).is_empty());
    // A destination in a directory that does not exist is an error, and creates nothing.
    let nowhere = dir.join("no/such/dir/out.pcap");
    let out = weir(&["filter", "-r", &sample(), "-w", path(&nowhere), "tcp"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no/such/dir"), "{}", text(&out.stderr));
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, [std::ffi::OsString::from("out.pcap")], "no temporary files: {names:?}");
}

#[test]
fn link_types_come_from_the_capture_and_y_overrides() {
    let dir = scratch("linktype");
    let packets = weir_testkit::read_pcap(sample()).unwrap();
    let user0 = dir.join("user0.pcap");
    weir_testkit::write_pcap(&user0, 147, &packets).unwrap();
    let out = weir(&["filter", "-r", path(&user0), "ip"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("link type 147") && err.contains("-y"), "{err}");
    let forced = weir(&["filter", "-r", path(&user0), "-y", "EN10MB", "--count", "ip"]);
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    let plain = weir(&["filter", "-r", &sample(), "--count", "ip"]);
    assert_eq!(forced.stdout, plain.stdout);
    // Printed as the forced link type, too.
    let lines = weir(&["filter", "-r", path(&user0), "-y", "1", "arp"]);
    let expected = weir(&["filter", "-r", &sample(), "arp"]);
    assert_eq!(lines.stdout, expected.stdout);
    let unknown = weir(&["filter", "-r", &sample(), "-y", "NOSUCH", "ip"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(text(&unknown.stderr).contains("NOSUCH"));
    // Raw IP: `ip` means the version nibble there.
    let raw = dir.join("raw.pcap");
    weir_testkit::write_pcap(&raw, 101, &reframe(&packets, 101)).unwrap();
    let out = weir(&["filter", "-r", path(&raw), "--count", "ip"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v4 =
        reframe(&packets, 101).iter().filter(|p| p.data.first().map(|b| b >> 4) == Some(4)).count();
    assert_eq!(text(&out.stdout), format!("{v4}\n"));
}

/// Runs a classic program over the sample: how many packets it accepts.
fn cbpf_count(program: &str) -> usize {
    let insns = weir_cbpf::parse(program.as_bytes(), weir_cbpf::Format::Auto).unwrap();
    let filter = weir_cbpf::CbpfFilter::with_rules(&insns, weir_cbpf::Rules::Libpcap).unwrap();
    let mut capture = CaptureReader::open(Path::new(&sample())).unwrap();
    let mut count = 0;
    while let Some(r) = capture.next_packet() {
        let r = r.unwrap();
        count += usize::from(filter.run(r.data, r.wire_len) != 0);
    }
    count
}

#[test]
fn compile_prints_programs_that_select_the_same_packets() {
    for expr in ["ip", "tcp", "udp and not port 53", "arp or rarp", "less 100", "vlan"] {
        let expected = text(&weir(&["filter", "-r", &sample(), "--count", expr]).stdout);
        for form in [&["-d"][..], &["-dd"], &["-ddd"], &[], &["-O0", "-d"]] {
            let mut args = vec!["compile"];
            args.extend_from_slice(form);
            args.push(expr);
            let out = weir(&args);
            assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
            let count = cbpf_count(&text(&out.stdout));
            assert_eq!(format!("{count}\n"), expected, "{args:?}");
        }
        for target in ["socket", "xdp"] {
            let out = weir(&["compile", "--ebpf", "--target", target, expr]);
            assert!(out.status.success(), "{expr} {target}: {}", text(&out.stderr));
            let listing = text(&out.stdout);
            let insns = weir_isa::asm::assemble(&listing).unwrap();
            assert!(!insns.is_empty() && listing.trim_end().ends_with("exit"), "{listing}");
        }
    }
    let listing = text(&weir(&["compile", "-d", "ip"]).stdout);
    assert!(listing.starts_with("(000) ldh      [12]\n"), "{listing}");
    let sll = text(&weir(&["compile", "-d", "-y", "LINUX_SLL", "ip"]).stdout);
    assert!(sll.starts_with("(000) ldh      [14]\n"), "{sll}");
    let bad = weir(&["compile", "-d", "udp or"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(text(&bad.stderr).contains("column 7"), "{}", text(&bad.stderr));
    assert!(bad.stdout.is_empty());
}

/// Every engine selects the same packets, and `--explain` names the engine that ran.
#[test]
fn every_engine_selects_the_same_packets_and_explain_says_which_ran() {
    let capture = sample();
    let exprs = [
        "tcp or udp port 53",
        "ip6 and not icmp6",
        "tcp[tcpflags] & tcp-syn != 0",
        "vlan and ip",
        "ip[2:2] > 500 or arp",
    ];
    for expr in exprs {
        let mut counts = Vec::new();
        for engine in ["native", "jit", "interp", "cbpf", "reference"] {
            let out =
                weir(&["filter", "--engine", engine, "--explain", "--count", "-r", &capture, expr]);
            assert!(out.status.success(), "{engine} {expr}: {}", text(&out.stderr));
            let err = text(&out.stderr);
            assert!(err.contains(&format!("engine: {engine}")), "{engine}: {err}");
            counts.push(text(&out.stdout).trim().to_string());
        }
        assert!(counts.windows(2).all(|w| w[0] == w[1]), "{expr}: {counts:?}");
    }
    // Left to itself, weir picks native code for filters and says why.
    let out = weir(&["filter", "--explain", "--count", "-r", &capture, "ip"]);
    assert!(text(&out.stderr).contains("engine: native"), "{}", text(&out.stderr));
    // An engine that cannot run a kind of subject is an error, not a silent fallback.
    let data =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/samples/ipv4-header-checksum.data");
    let out = weir(&["exec", "--engine", "native", data]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("filters only"), "{}", text(&out.stderr));
}

/// A classic program runs on its eBPF translation (JIT, interpreter) or the classic
/// interpreter with the same verdicts; weir picks the JIT and says so.
#[test]
fn classic_programs_run_on_every_engine_with_the_same_verdicts() {
    let capture = sample();
    let dir = scratch("classic_engines");
    let prog = dir.join("prog.txt");
    for expr in ["tcp port 22 or udp", "ip and tcp[13] & 2 != 0", "arp or vlan"] {
        let out = weir(&["compile", "-d", expr]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        std::fs::write(&prog, &out.stdout).expect("write program");
        let expected = text(&weir(&["filter", "--count", "-r", &capture, expr]).stdout);
        for engine in ["jit", "interp", "cbpf"] {
            let out =
                weir(&["cbpf", "run", "--engine", engine, "--count", path(&prog), "-r", &capture]);
            assert!(out.status.success(), "{engine}: {}", text(&out.stderr));
            assert_eq!(text(&out.stdout).trim(), expected.trim(), "{engine} {expr}");
        }
    }
    let out = weir(&["cbpf", "run", "--explain", "--count", path(&prog), "-r", &capture]);
    assert!(text(&out.stderr).contains("engine: jit"), "{}", text(&out.stderr));
}

/// Waits for `child` at most `secs` seconds; kills it and fails the test when it is late.
fn wait_within(child: &mut std::process::Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The sample's header and first `n` records.
fn sample_prefix(n: usize) -> Vec<u8> {
    let bytes = std::fs::read(sample()).unwrap();
    let end = spans(Path::new(&sample()))[n - 1].end;
    bytes[..end].to_vec()
}

#[test]
fn a_pipe_is_read_as_a_stream() {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["filter", "-r", "-", ""])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let lines = std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 {
            tx.send(std::mem::take(&mut line)).unwrap();
        }
    });
    // The header and one record; the pipe stays open.
    stdin.write_all(&sample_prefix(1)).unwrap();
    stdin.flush().unwrap();
    let first = rx.recv_timeout(std::time::Duration::from_secs(20));
    assert!(first.is_ok(), "no line while the writer still writes");
    let expected = text(&weir(&["filter", "-r", &sample(), "-c", "1"]).stdout);
    assert_eq!(first.unwrap(), expected);
    drop(stdin);
    let status = wait_within(&mut child, 20, "weir filter -r -");
    assert!(status.success());
    lines.join().unwrap();
}

#[test]
fn a_count_limit_stops_reading_a_fifo_at_once() {
    let dir = scratch("fifo");
    let fifo = dir.join("capture.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        println!("SKIPPED: a_count_limit_stops_reading_a_fifo_at_once: mkfifo failed");
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["filter", "-r", path(&fifo), "-c", "2", ""])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Opening blocks until weir opens the other end.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    writer.write_all(&sample_prefix(3)).unwrap();
    // The writer keeps the FIFO open: weir must not wait for its end.
    let status = wait_within(&mut child, 20, "weir filter -c 2 on a FIFO");
    assert!(status.success());
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(out.lines().count(), 2);
    drop(writer);
}

#[test]
fn a_file_that_is_no_capture_fails_at_once() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["filter", "-r", "/dev/zero", "--count"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_within(&mut child, 20, "weir filter -r /dev/zero");
    assert_eq!(status.code(), Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("at byte 0: unknown file format"), "{err}");
    let missing = weir(&["filter", "-r", "/nonexistent/capture.pcap", "--count"]);
    let err = text(&missing.stderr);
    assert!(err.contains("No such file or directory") && !err.contains("at byte"), "{err}");
}

/// A pcap file big enough to be relayed (two threads taking turns, weir-runtime's
/// `capture/relay.rs`) gives what one thread gives: the lines, `-c`, `--count`, the `-w`
/// file, and on a cut file the damage message, the kept output and the exit status.
#[test]
fn two_threads_and_one_give_the_same_results() {
    let dir = scratch("relay");
    let mut packets = Vec::new();
    let mut size = 24;
    // About 5 MiB: more than the first 1 MiB read and two 1 MiB chunks.
    for (i, p) in weir_testkit::filter_gen::packets(0x5e1a, 90_000).into_iter().enumerate() {
        size += 16 + p.data.len();
        let i = i as u32;
        packets.push(Packet {
            data: p.data,
            wire_len: p.wire_len,
            ts_sec: 1_700_000_000 + i,
            ts_usec: i % 1_000_000,
            description: String::new(),
        });
        if size > 5 << 20 {
            break;
        }
    }
    assert!(size > 5 << 20, "the generated file is too small: {size} bytes");
    let whole = dir.join("whole.pcap");
    weir_testkit::write_pcap(&whole, 1, &packets).unwrap();
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 1_000_003]).unwrap();
    let expr = "ether[0] & 1 = 0";
    let run = |threads: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .env("WEIR_READ_THREADS", threads)
            .args(args)
            .output()
            .unwrap()
    };
    for input in [&whole, &cut] {
        let input = input.to_str().unwrap();
        for args in [
            vec!["filter", "-r", input, expr],
            vec!["filter", "-r", input, "-c", "7", expr],
            vec!["filter", "-r", input, "--count", expr],
        ] {
            let (one, two) = (run("1", &args), run("2", &args));
            assert_eq!(one.status.code(), two.status.code(), "{args:?}");
            assert_eq!(one.stdout, two.stdout, "{args:?}");
            assert_eq!(one.stderr, two.stderr, "{args:?}");
            assert!(!one.stdout.is_empty(), "{args:?}");
        }
        // `--count` (records straight from the read buffer to the filter) counts the lines
        // printed through packet views, and stops at -c's number.
        let lines = run("1", &["filter", "-r", input, expr]).stdout;
        // (A packet tcpdump cannot decode gets hex-dump lines, which start with a tab.)
        let lines =
            String::from_utf8_lossy(&lines).lines().filter(|l| !l.starts_with('\t')).count();
        assert!(lines > 1000, "{input}: {lines} lines");
        for threads in ["1", "2"] {
            let count = run(threads, &["filter", "-r", input, "--count", expr]);
            assert_eq!(String::from_utf8_lossy(&count.stdout), format!("{lines}\n"), "{input}");
            let limited = run(threads, &["filter", "-r", input, "-c", "1001", "--count", expr]);
            assert_eq!(String::from_utf8_lossy(&limited.stdout), "1001\n", "{input}");
        }
        let outs: Vec<(Output, Vec<u8>)> = ["1", "2"]
            .iter()
            .map(|threads| {
                let out = dir.join(&format!("out-{threads}.pcap"));
                let done =
                    run(threads, &["filter", "-r", input, "-w", out.to_str().unwrap(), expr]);
                (done, std::fs::read(&out).unwrap())
            })
            .collect();
        assert_eq!(outs[0].0.status.code(), outs[1].0.status.code(), "{input}");
        assert!(outs[0].1 == outs[1].1, "{input}: the -w files differ");
        // -U (a flush after each packet) writes each packet through its view; without it
        // the kept records go out in runs straight from the read buffer: the same file, and
        // -c N keeps N there too.
        for threads in ["1", "2"] {
            for limit in [None, Some("2345")] {
                let files: Vec<Vec<u8>> = [true, false]
                    .iter()
                    .map(|&each| {
                        let out = dir.join(&format!("out-{threads}-{each}.pcap"));
                        let mut args = vec!["filter", "-r", input, "-w", out.to_str().unwrap()];
                        if each {
                            args.push("-U");
                        }
                        if let Some(limit) = limit {
                            args.extend(["-c", limit]);
                        }
                        args.push(expr);
                        run(threads, &args);
                        std::fs::read(&out).unwrap()
                    })
                    .collect();
                assert!(files[0] == files[1], "{input} {threads} {limit:?}: -U and runs differ");
                assert!(files[0].len() > 24, "{input}");
                if limit.is_none() {
                    assert!(files[0] == outs[0].1, "{input}: the runs differ from before");
                }
            }
            // A failed write of the runs is the output's error, named by the output alone.
            if Path::new("/dev/full").exists() {
                let full = run(threads, &["filter", "-r", input, "-w", "/dev/full", expr]);
                assert_eq!(full.status.code(), Some(1), "{input}");
                let err = String::from_utf8_lossy(&full.stderr);
                assert!(err.starts_with("weir: /dev/full: No space left on device"), "{err}");
            } else {
                println!("SKIPPED: /dev/full write error: no /dev/full here");
            }
        }
        assert!(outs[0].1.len() > 1 << 20, "{input}");
        if input.ends_with("cut.pcap") {
            let err = String::from_utf8_lossy(&outs[1].0.stderr);
            assert!(err.contains("the file ends inside the record"), "{err}");
        }
    }
}
