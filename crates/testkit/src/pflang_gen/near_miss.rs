//! Near-miss expressions: one step away from valid (a number out of range, a name nobody
//! defines, a qualifier that does not apply), alone or inside a valid expression. The
//! reject tests check that weir refuses exactly those libpcap refuses, so some of these are
//! in fact valid (`ether proto 70000`, `portrange 443-80`): that is the point.
//!
//! Host names are never invented: an unknown host name would make libpcap ask DNS.

use super::values::{self, pick};
use super::{BoolOp, Generator, Leaf, Node, Spelling};

/// A near-miss expression from `g`'s stream, as a tree (so that a disagreement found with
/// it can be shrunk): the near miss itself is a leaf of kind `near miss`.
pub fn near_miss(g: &mut Generator) -> Node {
    let text = core(g);
    let miss = Node::Leaf(Leaf { kind: "near miss", text, shorter: None });
    let both = |op, lhs: Node, rhs: Node| Node::Bool {
        op,
        spelling: Spelling::Word,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    };
    match g.rng.weighted(&[50, 15, 15, 10, 10]) {
        0 => miss,
        1 => both(BoolOp::And, g.leaf(), miss),
        2 => both(BoolOp::Or, g.expr(), miss),
        3 => both(BoolOp::And, miss, g.leaf()),
        _ => Node::Not { spelling: Spelling::Word, inner: Box::new(Node::Group(Box::new(miss))) },
    }
}

fn core(g: &mut Generator) -> String {
    let rng = &mut g.rng;
    let proto_word = |rng: &mut crate::rng::SplitMix64| {
        pick(rng, &["tcp", "udp", "icmp", "sctp", "igmp", "pim", "vrrp", "esp", "ah"], "tcp")
    };
    let dir = |rng: &mut crate::rng::SplitMix64| {
        pick(rng, &["", "src ", "dst ", "src or dst ", "src and dst "], "")
    };
    match rng.below(34) {
        0 => {
            let p = pick(rng, &["", "tcp ", "udp ", "sctp "], "");
            let d = dir(rng);
            let n = pick(rng, &[65536u64, 70000, 100_000, 0xffff_ffff], 65536);
            format!("{p}{d}port {n}")
        }
        1 => {
            let lo = values::port(rng);
            // Past 65535 in every way a C resolver reads a number differently: a range
            // `NAME-N` resolves N as a service (libpcap keeps its low 16 bits unless the
            // value is negative as a C int), `N-M` reads both as numbers (refused).
            let hi = pick(
                rng,
                &["70000", "65536", "4294967297", "2147483648", "99999999999999999999"],
                "70000",
            );
            if rng.chance(70) {
                format!("portrange {lo}-{hi}")
            } else {
                format!("portrange {hi}-{lo}")
            }
        }
        2 => format!("vlan {}", pick(rng, &[4096u32, 4097, 65535, 0xffff_ffff], 4096)),
        3 => {
            format!("mpls {}", pick(rng, &[0x0010_0000u32, 0x00ff_ffff, 0xffff_ffff], 0x0010_0000))
        }
        4 => format!("pppoes {}", pick(rng, &[0x10000u32, 0xffff_ffff], 0x10000)),
        5 => format!("geneve {}", pick(rng, &[0x0100_0000u32, 0xffff_ffff], 0x0100_0000)),
        6 => {
            let p = proto_word(rng);
            let w = pick(rng, &["host", "net"], "host");
            let id = if w == "host" { values::ipv4_host(rng) } else { values::ipv4_net(rng) };
            format!("{p} {}{w} {id}", dir(rng))
        }
        7 => match rng.below(5) {
            0 => format!("ip6 net {}", values::ipv4_net(rng)),
            1 => format!("ip6 host {}", values::ipv4_host(rng)),
            2 => format!("ip host {}", values::ipv6_host(rng)),
            3 => format!("ip net {}", values::ipv6_net(rng)),
            _ => format!("arp host {}", values::ipv6_host(rng)),
        },
        8 => {
            let bad = ["10.0.0.0/33", "10.0.0.1/8", "::/129", "2001:db8::1/64", "1.2.3/40"];
            format!("{}net {}", dir(rng), pick(rng, &bad, "10.0.0.0/33"))
        }
        9 => {
            let q = pick(rng, &["ip ", "ip6 ", "", "iso "], "");
            format!("{q}proto {}", pick(rng, &[256u32, 300, 1000, 0xffff_ffff], 256))
        }
        10 => format!(
            "{}protochain {}",
            pick(rng, &["", "ip ", "ip6 "], ""),
            pick(rng, &[256u32, 65536], 256)
        ),
        11 => format!("ether proto {}", pick(rng, &[70000u32, 0x10000, 0xffff_ffff], 70000)),
        12 => {
            let q = pick(rng, &["ip ", "ip6 ", "", "ether "], "");
            format!(
                "{q}proto {}",
                pick(rng, &["nosuchproto", "\\tcpx", "bogus-proto"], "nosuchproto")
            )
        }
        13 => {
            let p = pick(rng, &["", "tcp ", "udp "], "");
            format!("{p}port {}", pick(rng, &["nosuchservice", "http-x", "sshh"], "nosuchservice"))
        }
        14 => format!(
            "portrange {}",
            pick(rng, &["nosuch-80", "80-nosuch", "80", "1-2-3"], "nosuch-80")
        ),
        15 => format!(
            "ether {}host {}",
            dir(rng),
            pick(rng, &["nosuchether", "ff:ff:ff:ff:ff", "00:11:22:33:44:55:66"], "nosuchether")
        ),
        16 => format!("llc {}", pick(rng, &["nosuch", "iframe", "uu", "\\ui"], "nosuch")),
        17 => {
            let p = pick(rng, &["tcp", "ip", "ether", "udp", "ip6"], "tcp");
            let size = pick(rng, &[0u32, 3, 5, 8], 3);
            format!("{p}[0:{size}] = 1")
        }
        18 => {
            let lhs = pick(rng, &["len", "ip[0]", "tcp[13]", "ether[0:4]"], "len");
            let tail =
                pick(rng, &["/ 0", "% 0", "<< 32", ">> 32", ">> 33", "<< 0xffffffff"], "/ 0");
            format!("{lhs} {tail} = 0")
        }
        19 => {
            let p = pick(rng, &["tcp", "udp", "arp", "icmp", "ip6", "rarp", "sctp"], "tcp");
            format!("{p} {}", pick(rng, &["broadcast", "multicast"], "broadcast"))
        }
        20 => pick(
            rng,
            &["ip broadcast", "gateway localhost", "gateway 10.0.0.1", "ip gateway localhost"],
            "ip broadcast",
        )
        .to_string(),
        21 => {
            let d = pick(rng, &["addr1", "addr2", "addr3", "addr4", "ra", "ta"], "ra");
            let w = pick(rng, &["host", "net"], "host");
            let id = if w == "host" { values::ipv4_host(rng) } else { values::ipv4_net(rng) };
            format!("{d} {w} {id}")
        }
        22 => format!(
            "ether {}{}",
            dir(rng),
            pick(rng, &["host 10.0.0.1", "net 10.0.0.0/8", "port 80", "10.0.0.1"], "host 10.0.0.1")
        ),
        23 => {
            let p = pick(rng, &["arp", "icmp", "ether", "ip", "rarp", "igmp"], "arp");
            format!(
                "{p} {}{} {}",
                dir(rng),
                pick(rng, &["port", "portrange"], "port"),
                values::port(rng)
            )
        }
        24 => {
            let p = proto_word(rng);
            format!("{p} {}", pick(rng, &["proto 6", "protochain 6", "proto \\udp"], "proto 6"))
        }
        25 => format!(
            "{}[0] = 1",
            pick(rng, &["radio", "esp", "ah", "iso", "isis", "stp", "clnp", "l1"], "radio")
        ),
        26 => {
            let first =
                pick(rng, &["mpls", "mpls 100", "pppoes", "pppoes 1", "vlan", "geneve"], "mpls");
            let then = pick(
                rng,
                &[
                    "l1",
                    "isis",
                    "iso",
                    "vlan",
                    "ether host 00:11:22:33:44:01",
                    "stp",
                    "netbeui",
                    "llc",
                    "ipx",
                    "mpls",
                ],
                "l1",
            );
            format!("{first} and {then}")
        }
        27 => format!("host {}/24", values::ipv4_host(rng)),
        28 => format!(
            "{} and {}",
            pick(rng, &["port 80", "src port 53", "portrange 1-1024"], "port 80"),
            values::ipv4_host(rng)
        ),
        29 => format!(
            "{} and 80",
            pick(
                rng,
                &["host 10.0.0.1", "net 10.0.0.0/8", "ether host 00:11:22:33:44:01"],
                "host 10.0.0.1"
            )
        ),
        30 => format!(
            "{} {}",
            pick(rng, &["less", "greater"], "less"),
            pick(rng, &["70000", "4294967295", "4294967296", "-1", "len"], "70000")
        ),
        31 => format!("decnet host {}", pick(rng, &["64.1", "1.1024", "10.0.0.1", "1"], "64.1")),
        32 => pick(rng, &["inbound", "outbound", "ifindex 1", "ifindex 4294967296"], "inbound")
            .to_string(),
        _ => format!(
            "{} {}",
            pick(rng, &["vlan", "mpls", "pppoes", "geneve"], "vlan"),
            pick(rng, &["-1", "(1", "x", "1.5"], "-1")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_are_deterministic() {
        let mut a = Generator::new(5);
        let mut b = Generator::new(5);
        for _ in 0..500 {
            assert_eq!(near_miss(&mut a).render(), near_miss(&mut b).render());
        }
    }
}
