//! `weir filter -r FILE -w OUT EXPR` against `tcpdump -r FILE -w OUT EXPR` on captures of
//! every link type weir compiles filters for: the bundled sample and a generated corpus
//! re-framed for the link type (weir_testkit::relink), a handful of expressions each
//! (everyday ones and the link type's own keywords). The packets each writes must be the
//! same, byte for byte; where tcpdump refuses the expression, weir must refuse it too
//! (exit status 1, nothing written) with libpcap's words in its message. (On BSD loopback
//! and enc this checks that `ip6` tests the three BSD `AF_INET6` values, as libpcap does
//! for capture files.)

use std::path::Path;
use std::process::Command;

use weir::packet::LinkType;
use weir_testkit::{Packet, Scratch};

use crate::common::{have_tcpdump, path};

/// Everyday expressions, for every link type.
const EVERYDAY: [&str; 10] = [
    "",
    "ip",
    "ip6",
    "tcp",
    "udp port 53",
    "host 10.0.0.1",
    "not ip and not ip6",
    "link[0] & 1 = 1",
    "len > 100",
    "arp",
];

/// The keywords of particular link types.
fn own_keywords(link: LinkType) -> &'static [&'static str] {
    match link {
        LinkType::SunAtm => &["lane", "lane and ip", "vpi 0", "vci > 16", "oam", "sc", "llc"],
        LinkType::Fddi | LinkType::TokenRing | LinkType::IpOverFc => {
            &["ether host 0:11:22:33:44:1", "broadcast", "multicast", "llc", "iso"]
        }
        LinkType::Pflog => &["ifname em0", "rnr 3", "reason match", "action block", "inbound"],
        LinkType::Ipnet | LinkType::PppPppd => &["inbound", "outbound"],
        LinkType::Mtp2 | LinkType::Mtp2WithPhdr | LinkType::Erf => {
            &["fisu", "msu", "sio 3", "dpc > 100", "hsls 1"]
        }
        LinkType::NetAnalyzer | LinkType::NetAnalyzerTransparent => {
            &["vlan", "ether src 0:11:22:33:44:1", "multicast"]
        }
        l if l.is_juniper() => &["inbound", "outbound"],
        // libpcap compiles only `link[]`-style tests on these, and refuses the rest.
        LinkType::Opaque(_) => &[
            "link[0:2] > 100",
            "greater 64 and less 200",
            "link[1] & 0xf = link[2] & 0xf",
            "link[len - 1] = 0 or len % 3 = 1",
            "ether host 1:2:3:4:5:6",
            "vlan",
            "inbound",
        ],
        _ => &[],
    }
}

/// The packets of a capture file (none when it is missing).
fn packets_of(file: &Path) -> Vec<Vec<u8>> {
    if !file.exists() {
        return Vec::new();
    }
    weir_testkit::read_pcap(file).expect("readable output").into_iter().map(|p| p.data).collect()
}

/// One expression on one capture: both tools' verdicts, or the difference.
fn compare(dir: &Scratch, capture: &Path, name: &str, expr: &str) -> Result<usize, String> {
    let ours = dir.join(&format!("{name}.weir.pcap"));
    let theirs = dir.join(&format!("{name}.tcpdump.pcap"));
    let _ = std::fs::remove_file(&ours);
    let _ = std::fs::remove_file(&theirs);
    let mut weir = Command::new(env!("CARGO_BIN_EXE_weir"));
    weir.args(["filter", "-r", path(capture), "-w", path(&ours)]);
    let mut tcpdump = Command::new("tcpdump");
    tcpdump.args(["-r", path(capture), "-w", path(&theirs)]);
    if !expr.is_empty() {
        weir.arg(expr);
        tcpdump.arg(expr);
    }
    let w = weir.output().map_err(|e| format!("weir: {e}"))?;
    let t = tcpdump.output().map_err(|e| format!("tcpdump: {e}"))?;
    if !t.status.success() {
        // tcpdump's message: "tcpdump: <libpcap's words>".
        let message = String::from_utf8_lossy(&t.stderr);
        let words = message.lines().find_map(|l| l.strip_prefix("tcpdump: ")).unwrap_or("");
        let ours_said = String::from_utf8_lossy(&w.stderr);
        if w.status.code() != Some(1) || !ours_said.contains(words.trim()) || ours.exists() {
            return Err(format!(
                "{name} `{expr}`: tcpdump refuses ({}), weir exits {:?} saying {}",
                words.trim(),
                w.status.code(),
                ours_said.trim()
            ));
        }
        return Ok(0);
    }
    if !w.status.success() {
        return Err(format!(
            "{name} `{expr}`: tcpdump accepts, weir refuses: {}",
            String::from_utf8_lossy(&w.stderr).trim()
        ));
    }
    let (a, b) = (packets_of(&ours), packets_of(&theirs));
    if a != b {
        return Err(format!(
            "{name} `{expr}`: weir writes {} packets, tcpdump {}",
            a.len(),
            b.len()
        ));
    }
    Ok(a.len())
}

#[test]
fn every_link_type_filters_as_tcpdump() {
    if !have_tcpdump("every_link_type_filters_as_tcpdump") {
        return;
    }
    let dir = Scratch::new("links");
    let mut ethernet: Vec<Packet> =
        weir_testkit::read_pcap(weir_testkit::sample_capture_path()).expect("sample");
    ethernet.extend(weir_testkit::corpus(0x11a5, 300));
    let mut failures = Vec::new();
    let (mut runs, mut matched) = (0, 0);
    for link in weir::pflang::LINK_TYPES {
        let packets: Vec<Packet> =
            ethernet.iter().filter_map(|p| weir_testkit::relink(p, link)).collect();
        assert!(!packets.is_empty(), "{link}: relink gives no packets");
        let capture = dir.join(&format!("{}.pcap", link.name()));
        weir_testkit::write_pcap(&capture, link.linktype(), &packets).expect("write");
        for (i, expr) in EVERYDAY.iter().chain(own_keywords(link)).enumerate() {
            runs += 1;
            match compare(&dir, &capture, &format!("{}-{i}", link.name()), expr) {
                Ok(n) => matched += n,
                Err(e) => failures.push(e),
            }
        }
    }
    println!(
        "{} link types, {runs} runs, {matched} packets written alike",
        weir::pflang::LINK_TYPES.len()
    );
    assert!(failures.is_empty(), "weir and tcpdump differ:\n{}", failures.join("\n"));
}

/// An Ethernet IPv6 packet with `headers` destination-options headers before TCP, cut to
/// `cut` bytes; its timestamp says which (seconds: headers, microseconds: the cut).
fn ipv6_chain(headers: usize, cut: usize) -> Packet {
    let mut data = vec![0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 0x86, 0xdd];
    let payload = headers * 8 + 20;
    data.extend_from_slice(&[0x60, 0, 0, 0]);
    data.extend_from_slice(&u16::try_from(payload).unwrap_or(u16::MAX).to_be_bytes());
    data.extend_from_slice(&[60, 64]);
    data.extend_from_slice(&[0; 32]);
    for i in 0..headers {
        data.extend_from_slice(&[if i + 1 < headers { 60 } else { 6 }, 0, 0, 0, 0, 0, 0, 0]);
    }
    data.extend_from_slice(&[0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 2, 0, 0, 0, 0, 0, 0]);
    let wire_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
    data.truncate(cut);
    Packet {
        ts_sec: u32::try_from(headers).unwrap_or(0),
        ts_usec: u32::try_from(cut.min(999_999)).unwrap_or(0),
        wire_len,
        data,
        description: format!("{headers} extension headers, cut at {cut}"),
    }
}

/// The (seconds, microseconds) of the packets a filter run writes.
fn matched(dir: &Scratch, name: &str, mut command: Command) -> Vec<(u32, u32)> {
    let out = dir.join(&format!("{name}.pcap"));
    let _ = std::fs::remove_file(&out);
    let run = command.arg("-w").arg(path(&out)).output().expect("runs");
    assert!(run.status.success(), "{name}: {}", String::from_utf8_lossy(&run.stderr));
    weir_testkit::read_pcap(&out).expect("readable").iter().map(|p| (p.ts_sec, p.ts_usec)).collect()
}

/// `protochain` on long IPv6 extension-header chains, whole and cut at 538 bytes (where
/// weir-cbpf once rejected and libpcap did not), on every engine: the same packets as
/// tcpdump on chains the 64-hop walk covers; past it weir rejects (the documented hop
/// budget) where libpcap walks on.
#[test]
fn protochain_on_long_chains_agrees_with_tcpdump_up_to_the_hop_budget() {
    if !have_tcpdump("protochain_on_long_chains_agrees_with_tcpdump_up_to_the_hop_budget") {
        return;
    }
    let dir = Scratch::new("chains");
    let packets: Vec<Packet> =
        (40..=70).flat_map(|n| [ipv6_chain(n, 538), ipv6_chain(n, 100_000)]).collect();
    let capture = dir.join("chains.pcap");
    weir_testkit::write_pcap(&capture, LinkType::Ethernet.linktype(), &packets).expect("write");
    let covered = |list: &[(u32, u32)]| -> Vec<(u32, u32)> {
        list.iter().copied().filter(|(n, _)| *n <= 64).collect()
    };
    let mut compared = 0;
    for expr in ["protochain 6 or tcp", "protochain 132 or tcp", "ip6 protochain 60"] {
        let mut tcpdump = Command::new("tcpdump");
        tcpdump.args(["-r", path(&capture), expr]);
        let theirs = matched(&dir, "tcpdump", tcpdump);
        for engine in ["reference", "native", "interp", "cbpf"] {
            let mut weir = Command::new(env!("CARGO_BIN_EXE_weir"));
            weir.args(["filter", "--engine", engine, "-r", path(&capture), expr]);
            let ours = matched(&dir, engine, weir);
            assert_eq!(covered(&ours), covered(&theirs), "{engine} `{expr}`, chains up to 64");
            // TCP lies past the budget on the longer chains (60 is found at once).
            let deep = expr.starts_with("protochain 6 ");
            assert!(
                !deep || ours.iter().all(|(n, _)| *n <= 64),
                "{engine} `{expr}`: a walk past the hop budget matched"
            );
            compared += 1;
        }
        if expr == "protochain 6 or tcp" {
            // tcpdump matches the longer chains too: the documented difference.
            assert!(theirs.iter().any(|(n, _)| *n > 64), "tcpdump walks past 64 headers");
        }
    }
    println!("{compared} engine runs agree with tcpdump on chains of 40 to 64 headers");
}
