//! The kernel as an oracle (root; `SKIPPED` otherwise). This kernel has no flower
//! (`CONFIG_NET_CLS_FLOWER` is off), so each random rule set is translated into an
//! nftables `netdev` ingress chain on a veth in a network namespace: one nft rule per
//! flower rule, in priority order, each with a `counter`, its matches and its verdict
//! (`drop`, `accept` for pass, `continue`, `goto` a chain per flower chain). The packets
//! are sent into the veth's peer with a packet socket (python3); nft's per-rule counters
//! must equal the classifier's (what `weir flow run --stats` prints), bytes less the 14
//! of the Ethernet header nft does not count.
//!
//! What the translation covers: `protocol` ip/ipv6/arp/all, `dst_mac`/`src_mac` with
//! masks, `ip_proto`, `src_ip`/`dst_ip`, `ip_tos`, `ip_ttl`, `ip_flags` (IPv4),
//! `src_port`/`dst_port` (exact, masked, ranges), `tcp_flags`, ICMP `type`/`code`,
//! `arp_op`/`arp_sip`/`arp_tip`/`arp_sha`/`arp_tha`; actions drop, pass, continue and
//! forward `goto chain`. Not covered (such rules get another action, or are left out):
//! VLAN and MPLS matches, `indev`, mirred, vlan, pedit, csum and skbedit actions. Packets
//! left out: VLAN-tagged and MPLS frames (the kernel takes the outer tag off before the
//! ingress hook, and nft then sees another packet than flower would), IP fragments (nft
//! finds the transport header of a first fragment, flower's dissector does not), IP
//! headers nft's validation refuses, malformed ARP, and frames under 14 bytes (a packet
//! socket does not send them).

use crate::gen::{keys_of, Gen};
use std::fmt::Write as _;
use std::net::IpAddr;
use weir_flow::rule::{Action, ActionKind, Control, Match, PortMatch};
use weir_flow::{Classifier, Rule, RuleSet, Work, BATCH};
use weir_testkit::{corpus, SplitMix64, VethLab};

const SENDER: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("va", 0))
for i, line in enumerate(open(sys.argv[1])):
    s.send(bytes.fromhex(line.strip()))
    if i % 50 == 49:
        time.sleep(0.01)
"#;

fn mac(a: &[u8; 6]) -> String {
    a.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The nft form of a flower rule's matches, or `None` when the translation does not cover
/// one of them.
fn translate_matches(r: &Rule) -> Option<String> {
    let mut s = String::new();
    let v6 = r.protocol == 0x86dd;
    match r.protocol {
        0x0800 => s += " meta protocol ip",
        0x86dd => s += " meta protocol ip6",
        0x0806 => s += " meta protocol arp",
        0x0003 => {}
        _ => return None,
    }
    let l4 = r.matches.iter().find_map(|m| if let Match::IpProto(p) = m { Some(*p) } else { None });
    let masked = |expr: &str, v: u64, m: u64, full: u64| {
        if m == full {
            format!(" {expr} {v}")
        } else {
            format!(" {expr} & {m:#x} == {:#x}", v & m)
        }
    };
    for m in &r.matches {
        match m {
            Match::DstMac(a) | Match::SrcMac(a) => {
                let e = if matches!(m, Match::DstMac(_)) { "ether daddr" } else { "ether saddr" };
                if a.mask == [0xff; 6] {
                    let _ = write!(s, " {e} {}", mac(&a.addr));
                } else {
                    let v: Vec<u8> = a.addr.iter().zip(a.mask).map(|(x, y)| x & y).collect();
                    let mut vv = [0u8; 6];
                    vv.copy_from_slice(&v);
                    let _ = write!(s, " {e} & {} == {}", mac(&a.mask), mac(&vv));
                }
            }
            Match::IpProto(p) => {
                let _ = write!(s, " meta l4proto {p}");
            }
            Match::SrcIp(p) | Match::DstIp(p) => {
                let dir = if matches!(m, Match::SrcIp(_)) { "saddr" } else { "daddr" };
                let net = match p.addr {
                    IpAddr::V4(a) => {
                        let bits =
                            u32::from(a) & u32::MAX.checked_shl(32 - u32::from(p.len)).unwrap_or(0);
                        format!("ip {dir} {}/{}", std::net::Ipv4Addr::from(bits), p.len)
                    }
                    IpAddr::V6(a) => {
                        let bits = u128::from(a)
                            & u128::MAX.checked_shl(128 - u32::from(p.len)).unwrap_or(0);
                        format!("ip6 {dir} {}/{}", std::net::Ipv6Addr::from(bits), p.len)
                    }
                };
                s += " ";
                s += &net;
            }
            Match::IpTos(v, mk) => {
                let e = if v6 { "@nh,4,8" } else { "@nh,8,8" };
                s += &masked(e, u64::from(*v), u64::from(*mk), 0x1ff);
            }
            Match::IpTtl(v, mk) => {
                let e = if v6 { "@nh,56,8" } else { "@nh,64,8" };
                s += &masked(e, u64::from(*v), u64::from(*mk), 0x1ff);
            }
            Match::IpFlags(v, mk) if !v6 => {
                if mk & 1 != 0 {
                    s += if v & 1 != 0 {
                        " ip frag-off & 0x3fff != 0"
                    } else {
                        " ip frag-off & 0x3fff == 0"
                    };
                }
                if mk & 2 != 0 {
                    // firstfrag: a fragment at offset 0, that is MF set and offset 0 (the
                    // kernel sets the flag for fragments only).
                    s += if v & 2 != 0 {
                        " ip frag-off & 0x3fff == 0x2000"
                    } else {
                        " ip frag-off & 0x3fff != 0x2000"
                    };
                }
            }
            Match::SrcPort(p) | Match::DstPort(p) => {
                let proto = match l4? {
                    6 => "tcp",
                    17 => "udp",
                    132 => "sctp",
                    _ => return None,
                };
                let dir = if matches!(m, Match::SrcPort(_)) { "sport" } else { "dport" };
                match *p {
                    PortMatch::Exact(v) => {
                        let _ = write!(s, " {proto} {dir} {v}");
                    }
                    PortMatch::Masked(v, mk) => {
                        s += &masked(
                            &format!("{proto} {dir}"),
                            u64::from(v),
                            u64::from(mk),
                            0x1_ffff,
                        )
                    }
                    PortMatch::Range(a, b) => {
                        let _ = write!(s, " {proto} {dir} {a}-{b}");
                    }
                }
            }
            Match::TcpFlags(v, mk) => {
                if l4 != Some(6) {
                    return None;
                }
                s += &masked("@th,100,12", u64::from(*v), u64::from(*mk), 0x1_ffff);
            }
            Match::IcmpType(v, mk) => s += &masked("@th,0,8", u64::from(*v), u64::from(*mk), 0x1ff),
            Match::IcmpCode(v, mk) => s += &masked("@th,8,8", u64::from(*v), u64::from(*mk), 0x1ff),
            Match::ArpOp(v, mk) => s += &masked("@nh,56,8", u64::from(*v), u64::from(*mk), 0x1ff),
            Match::ArpSip(p) | Match::ArpTip(p) => {
                let dir = if matches!(m, Match::ArpSip(_)) { "saddr" } else { "daddr" };
                let IpAddr::V4(a) = p.addr else { return None };
                let bits = u32::from(a) & u32::MAX.checked_shl(32 - u32::from(p.len)).unwrap_or(0);
                let _ = write!(s, " arp {dir} ip {}/{}", std::net::Ipv4Addr::from(bits), p.len);
            }
            Match::ArpSha(a) | Match::ArpTha(a) => {
                let dir = if matches!(m, Match::ArpSha(_)) { "saddr" } else { "daddr" };
                if a.mask != [0xff; 6] {
                    return None;
                }
                let _ = write!(s, " arp {dir} ether {}", mac(&a.addr));
            }
            _ => return None,
        }
    }
    Some(s)
}

/// The packets nft and flower see alike (see the module comment).
fn comparable(f: &[u8]) -> bool {
    if f.len() < 14 {
        return false;
    }
    let et = u16::from_be_bytes([f[12], f[13]]);
    let ip = &f[14..];
    match et {
        0x0800 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 || ip[0] & 0xf < 5 {
                return false;
            }
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let tot = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
            tot >= ihl && tot <= ip.len() && frag == 0 && tot == ip.len()
        }
        0x86dd => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return false;
            }
            let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            // No extension headers at all: nft and the dissector walk them differently.
            40 + plen == ip.len() && matches!(ip[6], 6 | 17 | 58 | 132)
        }
        0x0806 => {
            ip.len() >= 28
                && ip[0..2] == [0, 1]
                && ip[2..4] == [8, 0]
                && ip[4] == 6
                && ip[5] == 4
                && ip[6] == 0
                && matches!(ip[7], 1 | 2)
        }
        0x8100 | 0x88a8 | 0x8847 | 0x8848 | 0x9100 => false,
        _ => et >= 0x0600,
    }
}

fn gact(rng: &mut SplitMix64, chain: u32, chains: u32) -> Action {
    match rng.below(4) {
        0 => Action::drop(),
        1 => Action::pass(),
        2 => Action { kind: ActionKind::Gact, control: Some(Control::Continue) },
        _ if chain < chains => {
            Action::goto_chain(chain + 1 + rng.below(u64::from(chains - chain)) as u32)
        }
        _ => Action::drop(),
    }
}

#[test]
fn nftables_counts_as_the_classifier() {
    let Some(lab) = VethLab::new("flow-nft", &["python3", "nft"]) else { return };
    let mut frames: Vec<Vec<u8>> =
        corpus(41, 3000).into_iter().map(|p| p.data).filter(|f| comparable(f)).collect();
    frames.truncate(400);
    let keys = keys_of(&frames);
    let mut gen = Gen::new(0x6e66, &keys);
    let dir = std::env::temp_dir().join(format!("weir-flow-nft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hex = dir.join("frames.hex");
    let text: String = frames
        .iter()
        .map(|f| f.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n")
        .collect();
    std::fs::write(&hex, text).unwrap();
    let (mut compared, mut hits, mut rules) = (0, 0u64, 0usize);
    for round in 0..8u64 {
        let chains = (round % 3) as u32;
        let text = gen.rule_set(40 + 30 * round as usize, 2 + round as usize * 3, chains);
        let parsed = RuleSet::parse(&text).unwrap();
        // Keep what nft can say; give every rule a gact action.
        let mut set = RuleSet::new();
        let mut rng = SplitMix64::new(round);
        for (r, &prio) in parsed.rules.iter().zip(&parsed.prios) {
            if translate_matches(r).is_none() {
                continue;
            }
            let mut r = Rule {
                prio: Some(prio),
                actions: vec![gact(&mut rng, r.chain, chains)],
                ..r.clone()
            };
            r.line = set.rules.len() + 1;
            set.push(r).unwrap();
        }
        // The classifier's counters over the same frames (wire length = what is sent).
        let classifier = Classifier::new(&set);
        let v = classifier.snapshot();
        for chunk in frames.chunks(BATCH) {
            let mut datas: Vec<Vec<u8>> = chunk.to_vec();
            let mut mirrors: Vec<Vec<(u16, Vec<u8>)>> = vec![Vec::new(); chunk.len()];
            let mut works: Vec<Work<'_>> = datas
                .iter_mut()
                .zip(mirrors.iter_mut())
                .map(|(d, m)| {
                    let len = d.len() as u32;
                    Work::new(d, len, 0, 0, m)
                })
                .collect();
            let mut out = Vec::new();
            classifier.process_batch(&v, &mut works, &mut out);
        }
        // The nft ruleset: chains in order, rules by (prio, order).
        let mut order: Vec<usize> = (0..set.rules.len()).collect();
        order.sort_by_key(|&i| (set.rules[i].chain, set.prios[i], i));
        let mut nft = String::from("table netdev weir {\n");
        for c in 0..=chains {
            nft += &format!("  chain c{c} {{\n");
            if c == 0 {
                nft += "    type filter hook ingress device vb priority 0; policy accept;\n";
            }
            for &i in order.iter().filter(|&&i| set.rules[i].chain == c) {
                let r = &set.rules[i];
                let verdict = match r.actions[0].control {
                    Some(Control::Drop) => "drop".to_string(),
                    Some(Control::Ok) => "accept".to_string(),
                    Some(Control::Continue) => "continue".to_string(),
                    Some(Control::Goto(n)) => format!("goto c{n}"),
                    other => panic!("{other:?}"),
                };
                let m = translate_matches(r).unwrap_or_default();
                nft += &format!("    {m} counter {verdict} comment \"line {}\"\n", r.line);
            }
            nft += "  }\n";
        }
        nft += "}\n";
        let path = dir.join("rules.nft");
        std::fs::write(&path, &nft).unwrap();
        let _ = lab.run("nft", &["flush", "ruleset"]);
        let out = lab.run("nft", &["-f", path.to_str().unwrap()]);
        assert!(out.status.success(), "nft -f: {}\n{nft}", String::from_utf8_lossy(&out.stderr));
        let out = lab.run("python3", &["-c", SENDER, hex.to_str().unwrap()]);
        assert!(out.status.success(), "sender: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let out = lab.run("nft", &["list", "ruleset"]);
        let listing = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut kernel: Vec<(usize, u64, u64)> = listing
            .lines()
            .filter_map(|l| {
                let at = l.find("counter packets ")?;
                let mut w = l[at..].split_whitespace().skip(2);
                let packets: u64 = w.next()?.parse().ok()?;
                let bytes: u64 = w.nth(1)?.parse().ok()?;
                let c = l.find("comment \"line ")?;
                let line: usize = l[c + 14..].trim_end_matches('"').parse().ok()?;
                Some((line, packets, bytes))
            })
            .collect();
        kernel.sort_unstable();
        let ours: Vec<(usize, u64, u64)> =
            classifier.counters().into_iter().map(|(l, p, b, _)| (l, p, b - 14 * p)).collect();
        assert_eq!(kernel.len(), set.rules.len(), "{listing}");
        assert_eq!(ours, kernel, "round {round}\nrules:\n{set}\nnft:\n{nft}");
        hits += ours.iter().map(|c| c.1).sum::<u64>();
        rules += ours.len();
        compared += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(hits > frames.len() as u64, "too few matches to say anything: {hits}");
    println!(
        "{compared} rule sets ({rules} rules) x {} packets: nftables and the classifier count alike ({hits} rule hits)",
        frames.len()
    );
}
