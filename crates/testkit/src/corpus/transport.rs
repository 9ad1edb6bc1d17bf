//! Transport-layer choices for the corpus: TCP, UDP (DNS, DHCP, NTP, multicast, VXLAN,
//! Geneve), ICMP, ICMPv6 (echo and neighbor discovery), SCTP, IGMP, GRE, ESP, AH, PIM and a
//! few protocols no filter primitive names.
//!
//! Tunnels (VXLAN, Geneve, GRE) recurse into a whole inner frame or packet, but only from
//! the outer frame, so every frame has at most one level of nesting.

use super::network;
use super::pools;
use super::Depth;
use crate::rng::SplitMix64;
use crate::wire::{self, ethertype, ipproto, tcp_flags};

/// Where a transport protocol wants its packet sent, when it cares.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dst {
    /// Any unicast host.
    Any,
    /// The (IPv4) broadcast address, or all-nodes for IPv6.
    Broadcast,
    /// This IPv4 multicast group.
    V4([u8; 4]),
    /// This IPv6 multicast group.
    V6([u8; 16]),
}

/// A transport-layer payload and what it asks of the IP header.
pub(crate) struct L4 {
    /// The IP protocol number announcing it.
    pub protocol: u8,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Descriptions of its headers (and of an inner frame, for tunnels).
    pub layers: Vec<String>,
    /// The destination it implies.
    pub dst: Dst,
    /// A TTL / hop limit the protocol requires (1 for link-local multicast, 255 for ND).
    pub ttl: Option<u8>,
    /// Whether senders put a router-alert option in front of it (IGMP).
    pub router_alert: bool,
}

impl L4 {
    fn new(protocol: u8, bytes: Vec<u8>, text: String) -> Self {
        Self { protocol, bytes, layers: vec![text], dst: Dst::Any, ttl: None, router_alert: false }
    }

    fn to(mut self, dst: Dst, ttl: Option<u8>) -> Self {
        self.dst = dst;
        self.ttl = ttl;
        self
    }
}

/// Which IP version carries the payload; a few protocols differ between the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ip {
    V4,
    V6,
}

/// A transport payload for IPv4.
pub(crate) fn over_ipv4(rng: &mut SplitMix64, depth: Depth) -> L4 {
    let gre_weight = if depth == Depth::Outer { 4 } else { 0 };
    match rng.weighted(&[34, 30, 10, 3, 4, gre_weight, 3, 3, 3, 3]) {
        0 => tcp(rng),
        1 => udp(rng, depth, Ip::V4),
        2 => icmp(rng),
        3 => sctp(rng),
        4 => igmp(rng),
        5 => gre(rng),
        6 => esp(rng),
        7 => ah(rng, Ip::V4),
        8 => pim(rng, Ip::V4),
        _ => unnamed_protocol(rng, Ip::V4),
    }
}

/// A transport payload for IPv6.
pub(crate) fn over_ipv6(rng: &mut SplitMix64, depth: Depth) -> L4 {
    let gre_weight = if depth == Depth::Outer { 3 } else { 0 };
    match rng.weighted(&[34, 28, 18, 3, gre_weight, 3, 3, 2, 2, 2]) {
        0 => tcp(rng),
        1 => udp(rng, depth, Ip::V6),
        2 => icmpv6(rng),
        3 => sctp(rng),
        4 => gre(rng),
        5 => esp(rng),
        6 => ah(rng, Ip::V6),
        7 => pim(rng, Ip::V6),
        8 => L4::new(ipproto::NONE, Vec::new(), "no-next-header".to_string()),
        _ => unnamed_protocol(rng, Ip::V6),
    }
}

/// Client and server ports in either direction; returns (source, destination).
fn port_pair(rng: &mut SplitMix64, server: u16) -> (u16, u16) {
    let client = if rng.chance(30) { pools::port(rng) } else { pools::ephemeral_port(rng) };
    if rng.chance(55) {
        (client, server)
    } else {
        (server, client)
    }
}

const TCP_FLAG_CHOICES: [(u8, &str); 14] = [
    (tcp_flags::SYN, "S"),
    (tcp_flags::SYN, "S"),
    (tcp_flags::SYN | tcp_flags::ACK, "S."),
    (tcp_flags::ACK, "."),
    (tcp_flags::ACK, "."),
    (tcp_flags::PSH | tcp_flags::ACK, "P."),
    (tcp_flags::PSH | tcp_flags::ACK, "P."),
    (tcp_flags::FIN | tcp_flags::ACK, "F."),
    (tcp_flags::RST, "R"),
    (tcp_flags::RST | tcp_flags::ACK, "R."),
    (tcp_flags::URG | tcp_flags::PSH | tcp_flags::ACK, "UP."),
    (tcp_flags::FIN | tcp_flags::PSH | tcp_flags::URG, "FPU"),
    (0xff, "all"),
    (0, "none"),
];

fn tcp(rng: &mut SplitMix64) -> L4 {
    let server = pools::port(rng);
    let (src_port, dst_port) = port_pair(rng, server);
    let (flags, flag_text) = rng.pick(&TCP_FLAG_CHOICES).unwrap_or((tcp_flags::ACK, "."));
    let syn = flags & tcp_flags::SYN != 0;
    let options = if syn && rng.chance(80) {
        // MSS 1460, SACK permitted, timestamps, NOP, window scale 7.
        let mut options = vec![2, 4, 0x05, 0xb4, 4, 2, 8, 10];
        options.extend_from_slice(&rng.u32().to_be_bytes());
        options.extend_from_slice(&[0, 0, 0, 0, 1, 3, 3, 7]);
        options
    } else if rng.chance(30) {
        match rng.below(3) {
            0 => {
                let mut options = vec![1, 1, 8, 10];
                options.extend(rng.bytes(8));
                options
            }
            1 => {
                let mut options = vec![1, 1, 5, 10];
                options.extend(rng.bytes(8));
                options
            }
            _ => {
                // Up to the largest data offset: 40 bytes of no-ops around one option.
                let words = rng.range_usize(1, 10);
                let mut options = vec![1; words.saturating_mul(4)];
                if let Some(slot) = options.get_mut(..4) {
                    slot.copy_from_slice(&[2, 4, 0x02, 0x18]);
                }
                options
            }
        }
    } else {
        Vec::new()
    };
    let payload = if flags & (tcp_flags::SYN | tcp_flags::RST) != 0 && rng.chance(85) {
        Vec::new()
    } else if (dst_port == 80 || dst_port == 8080) && flags & tcp_flags::PSH != 0 {
        b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n".to_vec()
    } else {
        let len = rng.range_usize(0, 48);
        rng.bytes(len)
    };
    let header = wire::TcpHeader {
        src_port,
        dst_port,
        seq: rng.u32(),
        ack: if flags & tcp_flags::ACK != 0 { rng.u32() } else { 0 },
        flags,
        window: rng.pick(&[0u16, 512, 29200, 65535]).unwrap_or(65535),
        options,
    };
    let segment = wire::tcp(&header, &payload);
    let data_offset = segment.get(12).map_or(5, |byte| byte >> 4);
    let text =
        format!("tcp {src_port}>{dst_port} [{flag_text}] doff {data_offset} len {}", payload.len());
    L4::new(ipproto::TCP, segment, text)
}

fn udp(rng: &mut SplitMix64, depth: Depth, ip: Ip) -> L4 {
    let tunnel_weight = if depth == Depth::Outer { 8 } else { 0 };
    match rng.weighted(&[25, 10, tunnel_weight, tunnel_weight, 5, 6, 25]) {
        0 => dns(rng, ip),
        1 => dhcp(rng, ip),
        2 => vxlan(rng),
        3 => geneve(rng),
        4 => {
            // NTP v4 client (mode 3) or server (mode 4).
            let mut ntp = vec![if rng.chance(50) { 0x23 } else { 0x24 }];
            ntp.extend(rng.bytes(47));
            L4::new(ipproto::UDP, wire::udp(123, 123, &ntp), "udp 123>123 ntp".to_string())
        }
        5 => {
            let (port, dst, name) = match (ip, rng.chance(50)) {
                (Ip::V4, true) => (5353, Dst::V4([224, 0, 0, 251]), "mdns"),
                (Ip::V4, false) => (1900, Dst::V4([239, 255, 255, 250]), "ssdp"),
                (Ip::V6, _) => (5353, Dst::V6(pools::v6([0xff02, 0, 0, 0, 0, 0, 0, 0xfb])), "mdns"),
            };
            let len = rng.range_usize(12, 40);
            let payload = rng.bytes(len);
            L4::new(
                ipproto::UDP,
                wire::udp(port, port, &payload),
                format!("udp {port}>{port} {name}"),
            )
            .to(dst, Some(1))
        }
        _ => {
            let (src_port, dst_port) = (pools::port(rng), pools::port(rng));
            let len = rng.range_usize(0, 64);
            let payload = rng.bytes(len);
            let dst = match rng.below(12) {
                0 => Dst::Broadcast,
                1 if ip == Ip::V4 => {
                    Dst::V4(rng.pick(&pools::IPV4_GROUPS).unwrap_or([239, 1, 2, 3]))
                }
                1 => Dst::V6(rng.pick(&pools::IPV6_GROUPS).unwrap_or(pools::IPV6_GROUPS[0])),
                _ => Dst::Any,
            };
            L4::new(
                ipproto::UDP,
                wire::udp(src_port, dst_port, &payload),
                format!("udp {src_port}>{dst_port} len {len}"),
            )
            .to(dst, None)
        }
    }
}

fn dns(rng: &mut SplitMix64, ip: Ip) -> L4 {
    let response = rng.chance(45);
    let (qtype, type_name) = rng.pick(&[(1u16, "A"), (28, "AAAA"), (15, "MX")]).unwrap_or((1, "A"));
    let name: &[&str] = match rng.below(3) {
        0 => &["example", "com"],
        1 => &["weir", "test"],
        _ => &["a", "root-servers", "net"],
    };
    let mut message = rng.u16().to_be_bytes().to_vec();
    message.extend_from_slice(if response { &[0x81, 0x80] } else { &[0x01, 0x00] });
    message.extend_from_slice(&[0, 1, 0, u8::from(response), 0, 0, 0, 0]);
    for label in name {
        message.push(u8::try_from(label.len()).unwrap_or(0));
        message.extend_from_slice(label.as_bytes());
    }
    message.push(0);
    message.extend_from_slice(&qtype.to_be_bytes());
    message.extend_from_slice(&[0, 1]);
    if response {
        // Name pointer to the question, type, class IN, TTL 300.
        message.extend_from_slice(&[0xc0, 0x0c]);
        message.extend_from_slice(&qtype.to_be_bytes());
        message.extend_from_slice(&[0, 1, 0, 0, 0x01, 0x2c]);
        let rdata: Vec<u8> = match (qtype, ip) {
            (28, _) => pools::ipv6_host(rng).to_vec(),
            (15, _) => vec![0, 10, 0xc0, 0x0c],
            _ => pools::ipv4_host(rng).to_vec(),
        };
        message.extend_from_slice(&wire::len16(rdata.len()).to_be_bytes());
        message.extend_from_slice(&rdata);
    }
    let (src_port, dst_port) =
        if response { (53, pools::ephemeral_port(rng)) } else { (pools::ephemeral_port(rng), 53) };
    let text = format!(
        "udp {src_port}>{dst_port} dns {} {type_name} {}",
        if response { "response" } else { "query" },
        name.join(".")
    );
    L4::new(ipproto::UDP, wire::udp(src_port, dst_port, &message), text)
}

fn dhcp(rng: &mut SplitMix64, ip: Ip) -> L4 {
    let from_client = rng.chance(55);
    if ip == Ip::V6 {
        // DHCPv6 solicit to all DHCP agents, or an advertise back.
        let mut message = vec![if from_client { 1 } else { 2 }];
        message.extend(rng.bytes(3));
        message.extend_from_slice(&[0, 1, 0, 10, 0, 3, 0, 1]);
        message.extend_from_slice(&pools::unicast_mac(rng));
        let (src, dst, target) = if from_client {
            (546, 547, Dst::V6(pools::v6([0xff02, 0, 0, 0, 0, 0, 1, 2])))
        } else {
            (547, 546, Dst::Any)
        };
        return L4::new(
            ipproto::UDP,
            wire::udp(src, dst, &message),
            format!("udp {src}>{dst} dhcpv6"),
        )
        .to(target, None);
    }
    // BOOTP: op, htype, hlen, hops, xid, secs, flags, four addresses, client MAC, padding,
    // server name and file (zero), magic cookie, message type, end.
    let mut message = vec![if from_client { 1 } else { 2 }, 1, 6, 0];
    message.extend_from_slice(&rng.u32().to_be_bytes());
    message.extend_from_slice(&[0, 0, 0x80, 0]);
    message.extend_from_slice(&[0; 4]);
    message.extend_from_slice(&if from_client { [0; 4] } else { pools::ipv4_host(rng) });
    message.extend_from_slice(&[0; 8]);
    message.extend_from_slice(&pools::unicast_mac(rng));
    message.extend_from_slice(&[0; 10]);
    message.extend_from_slice(&[0; 192]);
    message.extend_from_slice(&[0x63, 0x82, 0x53, 0x63]);
    let (kind, name) = if from_client {
        rng.pick(&[(1u8, "discover"), (3, "request")]).unwrap_or((1, "discover"))
    } else {
        rng.pick(&[(2u8, "offer"), (5, "ack")]).unwrap_or((2, "offer"))
    };
    message.extend_from_slice(&[53, 1, kind, 255]);
    let (src, dst) = if from_client { (68, 67) } else { (67, 68) };
    let target = if from_client || rng.chance(50) { Dst::Broadcast } else { Dst::Any };
    L4::new(ipproto::UDP, wire::udp(src, dst, &message), format!("udp {src}>{dst} dhcp {name}"))
        .to(target, None)
}

/// A VNI from a small pool, so `vxlan 100`-style filters match some tunnels.
fn vni(rng: &mut SplitMix64) -> u32 {
    if rng.chance(30) {
        rng.u32() & 0x00ff_ffff
    } else {
        rng.pick(&[1u32, 100, 5000]).unwrap_or(1)
    }
}

fn vxlan(rng: &mut SplitMix64) -> L4 {
    let vni = vni(rng);
    let mut payload = vec![0x08, 0, 0, 0];
    payload.extend_from_slice(&(vni << 8).to_be_bytes());
    let mut layers = Vec::new();
    payload.extend_from_slice(&super::frame(rng, Depth::Inner, &mut layers));
    let src_port = pools::ephemeral_port(rng);
    let mut l4 = L4::new(
        ipproto::UDP,
        wire::udp(src_port, 4789, &payload),
        format!("udp {src_port}>4789 vxlan vni {vni}"),
    );
    l4.layers.extend(layers);
    l4
}

fn geneve(rng: &mut SplitMix64) -> L4 {
    let vni = vni(rng);
    let with_option = rng.chance(50);
    let option_words: u8 = if with_option { 2 } else { 0 };
    let mut payload = vec![option_words, 0];
    payload.extend_from_slice(&ethertype::TEB.to_be_bytes());
    payload.extend_from_slice(&(vni << 8).to_be_bytes());
    if with_option {
        // Option class 0x0102, type 0x80, 1 word of data.
        payload.extend_from_slice(&[0x01, 0x02, 0x80, 0x01]);
        payload.extend_from_slice(&rng.u32().to_be_bytes());
    }
    let mut layers = Vec::new();
    payload.extend_from_slice(&super::frame(rng, Depth::Inner, &mut layers));
    let src_port = pools::ephemeral_port(rng);
    let text = format!("udp {src_port}>6081 geneve vni {vni} optlen {option_words}");
    let mut l4 = L4::new(ipproto::UDP, wire::udp(src_port, 6081, &payload), text);
    l4.layers.extend(layers);
    l4
}

/// The first 28 bytes of an IPv4/UDP datagram, as ICMP errors quote it.
fn quoted_ipv4_datagram(rng: &mut SplitMix64) -> Vec<u8> {
    let header = wire::Ipv4Header {
        src: pools::ipv4_host(rng),
        dst: pools::ipv4_host(rng),
        protocol: ipproto::UDP,
        ttl: 1,
        tos: 0,
        id: rng.u16(),
        dont_fragment: false,
        more_fragments: false,
        fragment_offset: 0,
        options: Vec::new(),
    };
    let mut datagram =
        wire::ipv4(&header, &wire::udp(pools::ephemeral_port(rng), pools::port(rng), &[0; 12]));
    datagram.truncate(28);
    datagram
}

fn icmp(rng: &mut SplitMix64) -> L4 {
    match rng.weighted(&[35, 30, 25, 10]) {
        kind @ (0 | 1) => {
            let (icmp_type, name) = if kind == 0 { (8, "echo-request") } else { (0, "echo-reply") };
            let id = rng.u16().to_be_bytes();
            let seq = rng.u16().to_be_bytes();
            let len = rng.range_usize(0, 56);
            let body = rng.bytes(len);
            let message = wire::icmp(icmp_type, 0, [id[0], id[1], seq[0], seq[1]], &body);
            L4::new(ipproto::ICMP, message, format!("icmp {name}"))
        }
        2 => {
            let code = rng.pick(&[0u8, 1, 2, 3, 3, 4, 9, 10, 13]).unwrap_or(3);
            let rest = if code == 4 { [0, 0, 0x05, 0xdc] } else { [0; 4] };
            let message = wire::icmp(3, code, rest, &quoted_ipv4_datagram(rng));
            L4::new(ipproto::ICMP, message, format!("icmp unreachable code {code}"))
        }
        _ => {
            let message = wire::icmp(11, 0, [0; 4], &quoted_ipv4_datagram(rng));
            L4::new(ipproto::ICMP, message, "icmp time-exceeded".to_string())
        }
    }
}

fn icmpv6(rng: &mut SplitMix64) -> L4 {
    let all_nodes = pools::v6([0xff02, 0, 0, 0, 0, 0, 0, 1]);
    let all_routers = pools::v6([0xff02, 0, 0, 0, 0, 0, 0, 2]);
    match rng.weighted(&[25, 20, 25, 12, 6, 6, 6]) {
        kind @ (0 | 1) => {
            let (icmp_type, name) =
                if kind == 0 { (128, "echo-request") } else { (129, "echo-reply") };
            let len = rng.range_usize(4, 60);
            L4::new(
                ipproto::ICMPV6,
                wire::icmpv6(icmp_type, 0, &rng.bytes(len)),
                format!("icmp6 {name}"),
            )
        }
        2 => {
            let target = pools::ipv6_host(rng);
            let mut body = vec![0; 4];
            body.extend_from_slice(&target);
            body.extend_from_slice(&[1, 1]);
            body.extend_from_slice(&pools::unicast_mac(rng));
            let text =
                format!("icmp6 neighbor-solicitation who-has {}", pools::format_ipv6(target));
            L4::new(ipproto::ICMPV6, wire::icmpv6(135, 0, &body), text)
                .to(Dst::V6(pools::solicited_node(target)), Some(255))
        }
        3 => {
            let target = pools::ipv6_host(rng);
            let mut body = vec![0x60, 0, 0, 0];
            body.extend_from_slice(&target);
            body.extend_from_slice(&[2, 1]);
            body.extend_from_slice(&pools::unicast_mac(rng));
            let dst = if rng.chance(30) { Dst::V6(all_nodes) } else { Dst::Any };
            L4::new(
                ipproto::ICMPV6,
                wire::icmpv6(136, 0, &body),
                "icmp6 neighbor-advertisement".to_string(),
            )
            .to(dst, Some(255))
        }
        4 => {
            let mut body = vec![0; 4];
            body.extend_from_slice(&[1, 1]);
            body.extend_from_slice(&pools::unicast_mac(rng));
            L4::new(
                ipproto::ICMPV6,
                wire::icmpv6(133, 0, &body),
                "icmp6 router-solicitation".to_string(),
            )
            .to(Dst::V6(all_routers), Some(255))
        }
        5 => {
            // Hop limit 64, lifetime 1800 s, then one prefix-information option for 2001:db8::/64.
            let mut body = vec![64, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0];
            body.extend_from_slice(&[
                3, 4, 64, 0xc0, 0, 0x27, 0x8d, 0, 0, 0x09, 0x3a, 0x80, 0, 0, 0, 0,
            ]);
            body.extend_from_slice(&pools::v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]));
            L4::new(
                ipproto::ICMPV6,
                wire::icmpv6(134, 0, &body),
                "icmp6 router-advertisement".to_string(),
            )
            .to(Dst::V6(all_nodes), Some(255))
        }
        _ => {
            let code = u8::try_from(rng.below(5)).unwrap_or(0);
            let mut body = vec![0; 4];
            let quoted = wire::ipv6(
                pools::ipv6_host(rng),
                pools::ipv6_host(rng),
                ipproto::UDP,
                1,
                0,
                &wire::udp(40000, 33434, &[]),
            );
            body.extend_from_slice(&quoted);
            L4::new(
                ipproto::ICMPV6,
                wire::icmpv6(1, code, &body),
                format!("icmp6 unreachable code {code}"),
            )
        }
    }
}

fn sctp(rng: &mut SplitMix64) -> L4 {
    let server = if rng.chance(70) {
        rng.pick(&[2905u16, 3868, 36412, 5060, 9899]).unwrap_or(2905)
    } else {
        rng.u16()
    };
    let (src_port, dst_port) = port_pair(rng, server);
    let mut packet = src_port.to_be_bytes().to_vec();
    packet.extend_from_slice(&dst_port.to_be_bytes());
    packet.extend_from_slice(&rng.u32().to_be_bytes());
    packet.extend_from_slice(&rng.u32().to_be_bytes());
    let name = match rng.below(3) {
        0 => {
            packet.extend_from_slice(&[1, 0, 0, 20]);
            packet.extend(rng.bytes(16));
            "init"
        }
        1 => {
            let len = rng.range_usize(1, 24);
            packet.extend_from_slice(&[0, 3]);
            packet.extend_from_slice(&wire::len16(16usize.saturating_add(len)).to_be_bytes());
            packet.extend(rng.bytes(12));
            packet.extend(rng.bytes(len));
            packet.resize(packet.len().next_multiple_of(4), 0);
            "data"
        }
        _ => {
            packet.extend_from_slice(&[4, 0, 0, 16, 0, 1, 0, 12]);
            packet.extend(rng.bytes(8));
            "heartbeat"
        }
    };
    L4::new(ipproto::SCTP, packet, format!("sctp {src_port}>{dst_port} {name}"))
}

fn igmp(rng: &mut SplitMix64) -> L4 {
    let group = rng.pick(&pools::IPV4_GROUPS).unwrap_or([239, 1, 2, 3]);
    let (message, dst, name) = match rng.below(4) {
        0 => (vec![0x11, 100, 0, 0, 0, 0, 0, 0], [224, 0, 0, 1], "query"),
        1 => {
            let mut message = vec![0x16, 0, 0, 0];
            message.extend_from_slice(&group);
            (message, group, "v2-report")
        }
        2 => {
            let mut message = vec![0x17, 0, 0, 0];
            message.extend_from_slice(&group);
            (message, [224, 0, 0, 2], "leave")
        }
        _ => {
            // One "change to exclude" record with no sources.
            let mut message = vec![0x22, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0];
            message.extend_from_slice(&group);
            (message, [224, 0, 0, 22], "v3-report")
        }
    };
    let mut message = message;
    let checksum = wire::internet_checksum(&message);
    if let Some(field) = message.get_mut(2..4) {
        field.copy_from_slice(&checksum.to_be_bytes());
    }
    let mut l4 =
        L4::new(ipproto::IGMP, message, format!("igmp {name} {}", pools::format_ipv4(group)))
            .to(Dst::V4(dst), Some(1));
    l4.router_alert = true;
    l4
}

fn gre(rng: &mut SplitMix64) -> L4 {
    let (mut packet, variant) = match rng.below(3) {
        0 => (vec![0x00, 0x00, 0, 0], "plain"),
        1 => {
            let mut header = vec![0x20, 0x00];
            header.extend_from_slice(&[0, 0]);
            header.extend_from_slice(&rng.u32().to_be_bytes());
            (header, "key")
        }
        _ => (vec![0x80, 0x00, 0, 0, 0, 0, 0, 0], "checksum"),
    };
    // The protocol type sits at bytes 2..4 whatever optional fields follow.
    let mut layers = Vec::new();
    let (protocol, inner) = match rng.weighted(&[50, 20, 30]) {
        0 => {
            let l3 = network::ipv4(rng, Depth::Inner);
            layers = l3.layers;
            (ethertype::IP, l3.bytes)
        }
        1 => {
            let l3 = network::ipv6(rng, Depth::Inner);
            layers = l3.layers;
            (ethertype::IPV6, l3.bytes)
        }
        _ => (ethertype::TEB, super::frame(rng, Depth::Inner, &mut layers)),
    };
    if let Some(field) = packet.get_mut(2..4) {
        field.copy_from_slice(&protocol.to_be_bytes());
    }
    packet.extend_from_slice(&inner);
    let mut l4 = L4::new(ipproto::GRE, packet, format!("gre {variant} type 0x{protocol:04x}"));
    l4.layers.extend(layers);
    l4
}

fn esp(rng: &mut SplitMix64) -> L4 {
    let spi =
        if rng.chance(70) { rng.pick(&[0x100u32, 0x200]).unwrap_or(0x100) } else { rng.u32() };
    let mut packet = spi.to_be_bytes().to_vec();
    packet.extend_from_slice(&rng.u32().to_be_bytes());
    let len = rng.range_usize(16, 64);
    packet.extend(rng.bytes(len));
    L4::new(ipproto::ESP, packet, format!("esp spi 0x{spi:x}"))
}

fn ah(rng: &mut SplitMix64, ip: Ip) -> L4 {
    let inner = if rng.chance(60) { tcp(rng) } else { udp(rng, Depth::Inner, ip) };
    // 12 fixed bytes plus a 12-byte ICV: 24 bytes, so the length field is 24/4 - 2 = 4.
    let mut packet = vec![inner.protocol, 4, 0, 0];
    let spi = rng.u32();
    packet.extend_from_slice(&spi.to_be_bytes());
    packet.extend_from_slice(&rng.u32().to_be_bytes());
    packet.extend(rng.bytes(12));
    packet.extend_from_slice(&inner.bytes);
    let mut l4 = L4::new(ipproto::AH, packet, format!("ah spi 0x{spi:x} next {}", inner.protocol))
        .to(inner.dst, inner.ttl);
    l4.layers.extend(inner.layers);
    l4
}

fn pim(rng: &mut SplitMix64, ip: Ip) -> L4 {
    let all_pim_routers = match ip {
        Ip::V4 => Dst::V4([224, 0, 0, 13]),
        Ip::V6 => Dst::V6(pools::v6([0xff02, 0, 0, 0, 0, 0, 0, 0x0d])),
    };
    let (mut message, dst, name) = match rng.below(3) {
        0 => {
            // Hello with hold time 105 s and DR priority 1.
            let message = vec![0x20, 0, 0, 0, 0, 1, 0, 2, 0, 105, 0, 19, 0, 4, 0, 0, 0, 1];
            (message, all_pim_routers, "hello")
        }
        1 => {
            let mut message = vec![0x23, 0, 0, 0];
            let len = rng.range_usize(20, 40);
            message.extend(rng.bytes(len));
            (message, all_pim_routers, "join-prune")
        }
        _ => {
            let mut message = vec![0x21, 0, 0, 0, 0, 0, 0, 0];
            let len = rng.range_usize(20, 40);
            message.extend(rng.bytes(len));
            (message, Dst::Any, "register")
        }
    };
    let checksum = wire::internet_checksum(&message);
    if let Some(field) = message.get_mut(2..4) {
        field.copy_from_slice(&checksum.to_be_bytes());
    }
    let ttl = if matches!(dst, Dst::Any) { None } else { Some(1) };
    L4::new(ipproto::PIM, message, format!("pim {name}")).to(dst, ttl)
}

/// Protocols no filter primitive names: OSPF and VRRP to their groups, and the
/// experimental protocol 253.
fn unnamed_protocol(rng: &mut SplitMix64, ip: Ip) -> L4 {
    let (protocol, dst, ttl) = match (rng.below(3), ip) {
        (0, Ip::V4) => (89u8, Dst::V4([224, 0, 0, 5]), Some(1)),
        (0, Ip::V6) => (89, Dst::V6(pools::v6([0xff02, 0, 0, 0, 0, 0, 0, 5])), Some(1)),
        (1, Ip::V4) => (112, Dst::V4([224, 0, 0, 18]), Some(255)),
        _ => (253, Dst::Any, None),
    };
    let len = rng.range_usize(8, 40);
    L4::new(protocol, rng.bytes(len), format!("ip proto {protocol} {len} bytes")).to(dst, ttl)
}
