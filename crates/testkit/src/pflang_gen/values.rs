//! The words and values generated expressions are made of: qualifiers, protocol names,
//! services, named constants, boundary numbers, and the addresses, ports, VLAN ids, labels
//! and VNIs the packet corpus uses (taken from its pools so the two never drift apart).

use super::ArithOp;
use crate::corpus::pools;
use crate::rng::SplitMix64;

/// Numbers where unsigned 32-bit arithmetic, field widths and range checks change
/// behaviour.
pub const BOUNDARY: &[u32] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    12,
    13,
    14,
    15,
    16,
    20,
    23,
    24,
    31,
    32,
    33,
    40,
    54,
    60,
    63,
    64,
    127,
    128,
    255,
    256,
    1023,
    1024,
    1500,
    1514,
    4095,
    4096,
    32767,
    32768,
    65535,
    65536,
    0x00ff_ffff,
    0x0100_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];

/// Offsets into a header: small ones (inside the headers), and ones at or past the end of
/// typical packets (60-byte minimum frames, 1514-byte full frames) and of the address
/// space, where bounds checks and wrap-around matter.
pub const OFFSETS_FAR: &[u32] = &[
    40,
    46,
    50,
    53,
    54,
    56,
    58,
    59,
    60,
    61,
    62,
    63,
    64,
    100,
    128,
    255,
    256,
    1499,
    1513,
    1514,
    65535,
    0x7fff_ffff,
    0xffff_fff0,
    0xffff_fffc,
    0xffff_fffe,
    0xffff_ffff,
];

/// The scanner's named constants and their values (weir-packet's table, which the lexer
/// reads).
pub use weir_packet::filter_names::NAMED_CONSTANTS as NAMED;

/// Protocol keywords that stand alone as primitives. `radio`, `link` and `ether` alone are
/// rejected on the link types tested here, which is worth checking too.
pub const PROTO_KEYWORDS: &[&str] = &[
    "ip", "ip6", "arp", "rarp", "tcp", "udp", "icmp", "icmp6", "igmp", "igrp", "pim", "vrrp",
    "carp", "sctp", "ah", "esp", "atalk", "aarp", "decnet", "lat", "sca", "moprc", "mopdl", "iso",
    "esis", "es-is", "isis", "is-is", "clnp", "stp", "ipx", "netbeui", "l1", "l2", "iih", "lsp",
    "snp", "csnp", "psnp", "radio", "link", "ether",
];

/// Weights for [`PROTO_KEYWORDS`]: the everyday ones far more often.
pub const PROTO_KEYWORD_WEIGHTS: &[u32] = &[
    20, 14, 6, 3, 20, 16, 8, 6, 3, 1, 2, 2, 2, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 2,
    2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
];

/// Protocols that may index packet data (`proto[...]`), weighted; the last few are
/// rejected by libpcap ("unsupported index operation" or no such header).
pub const LOAD_PROTOS: &[(&str, u32)] = &[
    ("ether", 14),
    ("link", 2),
    ("ip", 16),
    ("ip6", 8),
    ("tcp", 16),
    ("udp", 10),
    ("icmp", 6),
    ("icmp6", 4),
    ("arp", 3),
    ("rarp", 1),
    ("igmp", 2),
    ("igrp", 1),
    ("pim", 1),
    ("vrrp", 1),
    ("carp", 1),
    ("sctp", 2),
    ("atalk", 1),
    ("decnet", 1),
    ("lat", 1),
    ("sca", 1),
    ("moprc", 1),
    ("mopdl", 1),
    ("ppp", 1),
    ("radio", 1),
    ("esp", 1),
    ("ah", 1),
    ("iso", 1),
];

/// The coverage class of a `proto[...]` access.
pub fn load_kind(proto: &str) -> &'static str {
    match proto {
        "ether" => "ether[]",
        "link" | "ppp" => "link[]",
        "ip" => "ip[]",
        "ip6" => "ip6[]",
        "tcp" => "tcp[]",
        "udp" => "udp[]",
        "sctp" => "sctp[]",
        "icmp" => "icmp[]",
        "icmp6" => "icmp6[]",
        "arp" | "rarp" => "arp[]",
        _ => "other proto[]",
    }
}

/// The coverage class of an arithmetic operator.
pub fn arith_kind(op: ArithOp) -> &'static str {
    match op {
        ArithOp::Add => "arith +",
        ArithOp::Sub => "arith -",
        ArithOp::Mul => "arith *",
        ArithOp::Div => "arith /",
        ArithOp::Mod => "arith %",
        ArithOp::And => "arith &",
        ArithOp::Or => "arith |",
        ArithOp::Xor => "arith ^",
        ArithOp::Shl => "arith <<",
        ArithOp::Shr => "arith >>",
    }
}

/// Service names (ports) that /etc/services and weir's built-in table both know.
pub const SERVICES: &[&str] = &[
    "ssh", "http", "https", "domain", "ntp", "bootps", "bootpc", "telnet", "smtp", "www", "snmp",
    "bgp", "syslog", "isakmp", "ftp", "ftp-data", "tftp", "sunrpc", "imap", "pop3", "ldap",
];

/// IP protocol ids after `ip proto` / `ip6 proto` / `proto`: numbers of protocols in the
/// corpus, boundaries, and names (keywords need a backslash).
pub const IP_PROTO_IDS: &[&str] = &[
    "6",
    "17",
    "1",
    "58",
    "47",
    "50",
    "51",
    "132",
    "2",
    "103",
    "112",
    "0",
    "41",
    "59",
    "43",
    "44",
    "60",
    "255",
    "256",
    "0x11",
    "\\tcp",
    "\\udp",
    "\\icmp",
    "\\igmp",
    "\\pim",
    "\\sctp",
    "\\esp",
    "\\ah",
    "\\icmp6",
    "\\vrrp",
    "\\igrp",
    "gre",
    "ospf",
    "egp",
    "rsvp",
    "ipencap",
    "l2tp",
    "ipv6-icmp",
    "udplite",
];

/// Ethernet types after `ether proto`: corpus types, names, and values beyond 16 bits.
pub const ETHER_PROTO_IDS: &[&str] = &[
    "0x800",
    "0x0800",
    "0x86dd",
    "0x806",
    "0x8035",
    "0x8100",
    "0x88a8",
    "0x8847",
    "0x8863",
    "0x8864",
    "0x88cc",
    "0x9000",
    "0x842",
    "0x22f0",
    "0x6558",
    "2048",
    "0",
    "1500",
    "1501",
    "1536",
    "0xffff",
    "70000",
    "\\ip",
    "\\ip6",
    "\\arp",
    "\\rarp",
    "\\atalk",
    "\\aarp",
    "\\decnet",
    "\\sca",
    "\\lat",
    "\\mopdl",
    "\\moprc",
    "\\iso",
    "\\stp",
    "\\ipx",
    "\\netbeui",
    "loopback",
    "\\vlan",
    "\\mpls",
];

/// OSI protocol ids after `iso proto`.
pub const ISO_PROTO_IDS: &[&str] = &["0x81", "0x82", "0x83", "\\clnp", "\\esis", "\\isis", "0"];

/// Next-header values after `protochain`.
pub const PROTOCHAIN_IDS: &[&str] = &[
    "6", "17", "58", "1", "2", "0", "43", "44", "47", "50", "51", "59", "60", "103", "132", "255",
    "\\tcp", "\\udp", "\\icmp6", "gre",
];

/// `llc` subtypes.
pub const LLC_KINDS: &[&str] =
    &["i", "s", "u", "rr", "rnr", "rej", "ui", "ua", "disc", "dm", "sabme", "test", "xid", "frmr"];

/// Spellings of the link-layer qualifier.
pub const LINK_WORDS: &[(&str, u32)] =
    &[("ether", 20), ("link", 3), ("fddi", 1), ("tr", 1), ("wlan", 1), ("ppp", 1), ("slip", 1)];

/// Direction qualifiers; the 802.11 ones are rejected on the link types tested here.
pub const DIRS: &[(&str, u32)] = &[
    ("src", 10),
    ("dst", 10),
    ("src or dst", 4),
    ("src and dst", 3),
    ("dst or src", 1),
    ("dst and src", 1),
    ("addr1", 1),
    ("addr2", 1),
    ("addr3", 1),
    ("addr4", 1),
    ("ra", 1),
    ("ta", 1),
];

/// VNIs the corpus's VXLAN and Geneve tunnels use (besides random ones).
pub const VNIS: &[u32] = &[1, 100, 5000];

/// PPPoE session ids the corpus uses (besides random ones).
pub const PPPOE_SESSIONS: &[u32] = &[0x0001, 0x1234, 0xbeef];

/// One of `items`, or `fallback` when empty.
pub fn pick<T: Copy>(rng: &mut SplitMix64, items: &[T], fallback: T) -> T {
    rng.pick(items).unwrap_or(fallback)
}

/// One of `items` by weight.
pub fn weighted<T: Copy>(rng: &mut SplitMix64, items: &[(T, u32)], fallback: T) -> T {
    let weights: Vec<u32> = items.iter().map(|(_, w)| *w).collect();
    items.get(rng.weighted(&weights)).map_or(fallback, |(t, _)| *t)
}

fn dotted(a: [u8; 4]) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

/// An IPv4 host: usually one the corpus uses, sometimes broadcast/multicast/loopback.
pub fn ipv4_host(rng: &mut SplitMix64) -> String {
    match rng.weighted(&[80, 6, 6, 4, 4]) {
        0 => dotted(pick(rng, &pools::IPV4_HOSTS, [10, 0, 0, 1])),
        1 => dotted(pick(rng, &pools::IPV4_BROADCASTS, [255; 4])),
        2 => dotted(pick(rng, &pools::IPV4_GROUPS, [224, 0, 0, 251])),
        3 => dotted(pick(rng, &[[127, 0, 0, 1], [0, 0, 0, 0]], [0; 4])),
        _ => dotted(rng.u32().to_be_bytes()),
    }
}

fn v6_text(a: [u8; 16]) -> String {
    std::net::Ipv6Addr::from(a).to_string()
}

/// An IPv6 host: usually one the corpus uses, sometimes a group, `::1` or `::`.
pub fn ipv6_host(rng: &mut SplitMix64) -> String {
    match rng.weighted(&[80, 10, 5, 5]) {
        0 => v6_text(pick(rng, &pools::IPV6_HOSTS, pools::IPV6_HOSTS[0])),
        1 => v6_text(pick(rng, &pools::IPV6_GROUPS, pools::IPV6_GROUPS[0])),
        2 => "::1".to_string(),
        _ => {
            // The uncompressed spelling, which lexes differently from the short one.
            let a = pick(rng, &pools::IPV6_HOSTS, pools::IPV6_HOSTS[0]);
            let groups: Vec<String> =
                a.chunks(2).map(|c| format!("{:x}", u16::from_be_bytes([c[0], c[1]]))).collect();
            groups.join(":")
        }
    }
}

/// An IPv4 network id: CIDR, abbreviated dotted, `mask` form; a few invalid on purpose
/// (prefix > 32, host bits set).
pub fn ipv4_net(rng: &mut SplitMix64) -> String {
    const CIDRS: &[&str] = &[
        "10.0.0.0/8",
        "10.0.0.0/24",
        "10.0.0.0/30",
        "10.0.0.0/31",
        "192.168.1.0/24",
        "192.168.0.0/16",
        "172.16.0.0/12",
        "8.8.8.8/32",
        "1.1.1.1/32",
        "0.0.0.0/0",
        "224.0.0.0/4",
        "239.0.0.0/8",
        "127.0.0.0/8",
        "10/8",
        "192.168.1/24",
        "10.0.0.1/32",
        "255.255.255.255/32",
    ];
    const ABBREVIATED: &[&str] = &["10", "10.0", "10.0.0", "192.168", "192.168.1", "172.16", "8"];
    const MASKED: &[&str] = &[
        "10.0.0.0 mask 255.0.0.0",
        "192.168.1.0 mask 255.255.255.0",
        "10.0.0.0 mask 255.255.255.252",
        "0.0.0.0 mask 0.0.0.0",
        "10.0.0.1 mask 255.255.255.255",
        "192.168.0.0 mask 255.255.0.0",
    ];
    const INVALID: &[&str] = &["10.0.0.0/33", "10.0.0.1/8", "10.0.0.1 mask 255.0.0.0", "1.2.3/40"];
    match rng.weighted(&[60, 15, 15, 3]) {
        0 => pick(rng, CIDRS, "10.0.0.0/8").to_string(),
        1 => pick(rng, ABBREVIATED, "10").to_string(),
        2 => pick(rng, MASKED, "10.0.0.0 mask 255.0.0.0").to_string(),
        _ => pick(rng, INVALID, "10.0.0.0/33").to_string(),
    }
}

/// An IPv6 network id.
pub fn ipv6_net(rng: &mut SplitMix64) -> String {
    const NETS: &[&str] = &[
        "2001:db8::/32",
        "2001:db8::/64",
        "2001:db8:1::/48",
        "2001:db8::1/128",
        "2001:db8::/127",
        "fe80::/10",
        "fe80::/64",
        "ff00::/8",
        "ff02::/16",
        "::/0",
        "::1/128",
        "2001:db8::",
        "2001:db8::1/129",
        "2001:db8::1/64",
    ];
    pick(rng, NETS, "2001:db8::/32").to_string()
}

/// A MAC in one of the three spellings the scanner accepts.
pub fn mac(rng: &mut SplitMix64) -> String {
    let m = match rng.weighted(&[75, 10, 10, 5]) {
        0 => pick(rng, &pools::UNICAST_MACS, pools::UNICAST_MACS[0]),
        1 => [0xff; 6],
        2 => pools::ipv4_multicast_mac(pick(rng, &pools::IPV4_GROUPS, [224, 0, 0, 251])),
        _ => {
            let b = rng.bytes(6);
            let mut m = [0u8; 6];
            m.copy_from_slice(&b);
            m
        }
    };
    match rng.below(6) {
        0 => m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join("-"),
        1 => m.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        2 => format!("{:02x}{:02x}.{:02x}{:02x}.{:02x}{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]),
        // One-digit groups are allowed with ':' separators.
        3 => m.iter().map(|b| format!("{b:x}")).collect::<Vec<_>>().join(":"),
        _ => m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
    }
}

/// A port: from the corpus pool, a service name, a boundary, or out of range.
pub fn port(rng: &mut SplitMix64) -> String {
    match rng.weighted(&[60, 20, 8, 8, 2]) {
        // Numbers may be written in hex or octal wherever the grammar takes a number.
        0 if rng.chance(8) => format!("{:#x}", pick(rng, &pools::PORTS, 80)),
        0 => pick(rng, &pools::PORTS, 80).to_string(),
        1 => pick(rng, SERVICES, "http").to_string(),
        2 => pick(rng, &[0u32, 1, 1023, 1024, 32768, 65535, 4789, 6081, 67, 68], 0).to_string(),
        3 => rng.u16().to_string(),
        _ => pick(rng, &[65536u32, 70000, 0xffff_ffff], 65536).to_string(),
    }
}

/// A port range `a-b` (sometimes reversed or out of range, sometimes by name).
pub fn port_range(rng: &mut SplitMix64) -> String {
    let bound = |rng: &mut SplitMix64| -> u32 {
        match rng.weighted(&[50, 30, 20]) {
            0 => u32::from(pick(rng, &pools::PORTS, 80)),
            1 => pick(rng, &[0u32, 1, 1023, 1024, 49151, 49152, 65534, 65535], 1024),
            _ => u32::from(rng.u16()),
        }
    };
    match rng.weighted(&[85, 5, 5, 5]) {
        0 => {
            let (a, b) = (bound(rng), bound(rng));
            let (lo, hi) = if rng.chance(85) { (a.min(b), a.max(b)) } else { (a.max(b), a.min(b)) };
            format!("{lo}-{hi}")
        }
        1 => format!("{}-{}", pick(rng, SERVICES, "ssh"), pick(rng, &["http", "https", "ntp"], "")),
        2 => format!("{}-70000", bound(rng)),
        _ => {
            let p = bound(rng);
            format!("{p}-{p}")
        }
    }
}

/// A number from the corpus's VLAN ids, boundaries, or just past the 12-bit range.
pub fn vlan_id(rng: &mut SplitMix64) -> u32 {
    match rng.weighted(&[70, 20, 10]) {
        0 => u32::from(pick(rng, &pools::VLAN_IDS, 1)),
        1 => pick(rng, &[0u32, 1, 2, 4094, 4095], 0),
        _ => pick(rng, &[4096u32, 65535, 0xffff_ffff], 4096),
    }
}

/// An MPLS label from the corpus, boundaries, or past the 20-bit range.
pub fn mpls_label(rng: &mut SplitMix64) -> u32 {
    match rng.weighted(&[70, 20, 10]) {
        0 => pick(rng, &pools::MPLS_LABELS, 16),
        1 => pick(rng, &[0u32, 1, 2, 3, 15, 0x000f_fffe], 0),
        _ => pick(rng, &[0x0010_0000u32, 0xffff_ffff], 0x0010_0000),
    }
}

/// A PPPoE session id.
pub fn pppoe_session(rng: &mut SplitMix64) -> u32 {
    match rng.weighted(&[70, 20, 10]) {
        0 => pick(rng, PPPOE_SESSIONS, 1),
        1 => pick(rng, &[0u32, 0xffff], 0),
        _ => pick(rng, &[0x10000u32, 0xffff_ffff], 0x10000),
    }
}

/// A Geneve VNI.
pub fn vni(rng: &mut SplitMix64) -> u32 {
    match rng.weighted(&[70, 20, 10]) {
        0 => pick(rng, VNIS, 1),
        1 => pick(rng, &[0u32, 0x00ff_ffff], 0),
        _ => pick(rng, &[0x0100_0000u32, 0xffff_ffff], 0x0100_0000),
    }
}

/// A packet length for `less`/`greater`/`len`: the corpus's typical sizes and boundaries.
pub fn length(rng: &mut SplitMix64) -> u32 {
    match rng.weighted(&[60, 30, 10]) {
        0 => pick(rng, &[0u32, 1, 14, 42, 54, 59, 60, 61, 64, 66, 74, 90, 100, 128, 200], 60),
        1 => pick(rng, BOUNDARY, 0),
        _ => u32::try_from(rng.below(400)).unwrap_or(0),
    }
}
