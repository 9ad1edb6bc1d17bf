//! Hand-written Ethernet frames for the network-level filters that the seeded corpus leaves
//! untested: DECnet routing headers in their four forms, every IS-IS PDU type, IPv6
//! extension-header chains long enough to reach and pass any bound a `protochain` walk has,
//! AH in the places where libpcap's walk misreads it, and packets to and from the loopback
//! addresses that host-name filters resolve to.
//!
//! Kept apart from [`crate::edge_cases`] and the seeded corpus so that those lists, and every
//! capture made from them, stay as they are.

use crate::wire::{self, ethertype, ipproto, Ipv4Header, Mac};
use crate::Packet;

const HOST_A: Mac = [0x00, 0x11, 0x22, 0x33, 0x44, 0x01];
const HOST_B: Mac = [0x00, 0x11, 0x22, 0x33, 0x44, 0x02];
const IP6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const IP6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const ETHERTYPE_DECNET: u16 = 0x6003;

/// The network-level boundary frames, in a fixed order with increasing timestamps.
pub fn net_edge_cases() -> Vec<Packet> {
    let mut list = List::default();
    decnet_frames(&mut list);
    isis_frames(&mut list);
    extension_chains(&mut list);
    ah_frames(&mut list);
    loopback_frames(&mut list);
    list.packets
}

/// DECnet addresses as the routing header stores them: little-endian, area in the top six
/// bits, node in the low ten.
fn decnet_address(area: u16, node: u16) -> [u8; 2] {
    (((area & 0x3f) << 10) | (node & 0x3ff)).to_le_bytes()
}

fn decnet_frames(list: &mut List) {
    // (area, node) pairs: 10.23, 1.1 and an address with every area bit set.
    let addresses = [(10u16, 23u16), (1, 1), (63, 1023)];
    for (i, &(src_area, src_node)) in addresses.iter().enumerate() {
        let (dst_area, dst_node) = addresses[(i + 1) % addresses.len()];
        let src = decnet_address(src_area, src_node);
        let dst = decnet_address(dst_area, dst_node);
        let name = format!("{src_area}.{src_node} > {dst_area}.{dst_node}");
        // Short data header: flags 0x02, destination, source, forwarding byte.
        let short = [0x02, dst[0], dst[1], src[0], src[1], 0x00];
        // Long data header: flags 0x06, destination area, subarea, 6-byte id (HIORD
        // AA-00-04-00 then the address), the same for the source, then visits, class, protocol.
        let mut long = vec![0x06, 0x00, 0x00, 0xaa, 0x00, 0x04, 0x00, dst[0], dst[1]];
        long.extend_from_slice(&[0x00, 0x00, 0xaa, 0x00, 0x04, 0x00, src[0], src[1]]);
        long.extend_from_slice(&[0x00, 0x00, 0x00]);
        for (form, header) in [("short", short.to_vec()), ("long", long)] {
            for padded in [false, true] {
                let mut body = Vec::new();
                if padded {
                    // One pad byte: the high bit set, the low bits the pad length.
                    body.push(0x81);
                }
                body.extend_from_slice(&header);
                body.extend_from_slice(&[0x5a; 8]);
                let mut routed = wire::len16(body.len()).to_le_bytes().to_vec();
                routed.extend_from_slice(&body);
                let pad = if padded { " padded" } else { "" };
                list.add(&format!("DECnet {form}{pad} {name}"), eth(ETHERTYPE_DECNET, &routed));
            }
        }
    }
    list.add("DECnet header cut after the flags", eth(ETHERTYPE_DECNET, &[0x08, 0x00, 0x06]));
}

fn isis_frames(list: &mut List) {
    // Every IS-IS PDU type a filter names (IIH 15-17, LSP 18 and 20, CSNP 24-25, PSNP
    // 26-27) and two it does not.
    for pdu in [15u8, 16, 17, 18, 20, 24, 25, 26, 27, 19, 28] {
        let mut llc = vec![0xfe, 0xfe, 0x03, 0x83, 0x1b, 0x01, 0x06, pdu, 0x01, 0x00, 0x00];
        llc.extend_from_slice(&[0; 24]);
        list.add(&format!("802.2 IS-IS PDU type {pdu}"), wire::ieee8023(HOST_B, HOST_A, &llc));
    }
    let cut = [0xfe, 0xfe, 0x03, 0x83, 0x1b, 0x01];
    list.add("802.2 IS-IS cut before the PDU type", wire::ieee8023(HOST_B, HOST_A, &cut));
}

/// IPv6 with `count` destination-options headers, then `last` carrying a short payload.
fn ipv6_chain(count: usize, last: u8) -> Vec<u8> {
    let mut payload = match last {
        ipproto::TCP => wire::tcp(
            &wire::TcpHeader {
                src_port: 40000,
                dst_port: 80,
                seq: 1,
                ack: 0,
                flags: wire::tcp_flags::SYN,
                window: 1024,
                options: Vec::new(),
            },
            &[],
        ),
        _ => wire::udp(5000, 53, &[]),
    };
    let mut next = last;
    for i in 0..count {
        // Alternate sizes so that both length units are exercised: 8 and 16 bytes.
        let body = if i % 2 == 0 {
            vec![1, 4, 0, 0, 0, 0]
        } else {
            vec![1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        };
        let mut header = wire::ipv6_extension(next, &body);
        header.extend_from_slice(&payload);
        payload = header;
        next = ipproto::DSTOPTS;
    }
    eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, next, 64, 0, &payload))
}

fn extension_chains(list: &mut List) {
    // 64 and 65: the last chain weir's walk finishes within its hop budget
    // (`weir_filter::CHAIN_HOP_BUDGET`) and the first it gives up on.
    for count in [1usize, 2, 7, 8, 9, 16, 17, 20, 40, 64, 65] {
        list.add(
            &format!("IPv6 {count} destination-options headers then TCP"),
            ipv6_chain(count, ipproto::TCP),
        );
    }
    list.add("IPv6 17 destination-options headers then UDP", ipv6_chain(17, ipproto::UDP));
    let mut cut = ipv6_chain(8, ipproto::TCP);
    cut.truncate(14 + 40 + 20);
    let wire_len = u32::try_from(ipv6_chain(8, ipproto::TCP).len()).unwrap_or(0);
    list.add_cut("IPv6 8 destination-options headers, record cut inside the third", cut, wire_len);
    // Every extension kind once, in RFC 8200 order, then no next header.
    let mut payload = Vec::new();
    let mut next = ipproto::NONE;
    for kind in [ipproto::FRAGMENT, ipproto::ROUTING, ipproto::DSTOPTS, ipproto::HOPOPTS] {
        let mut header = if kind == ipproto::FRAGMENT {
            wire::ipv6_fragment(next, 0, true, 5)
        } else {
            wire::ipv6_extension(next, &[1, 4, 0, 0, 0, 0])
        };
        header.extend_from_slice(&payload);
        payload = header;
        next = kind;
    }
    list.add(
        "IPv6 hop-by-hop, destination options, routing, fragment, then no next header",
        eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, next, 64, 0, &payload)),
    );
}

/// An AH header (next header, length 4 = 24 bytes) followed by `rest`.
fn ah(next: u8, rest: &[u8]) -> Vec<u8> {
    let mut header = vec![next, 4, 0, 0, 0, 0, 0x10, 0x00, 0, 0, 0, 1];
    header.extend_from_slice(&[0x77; 12]);
    header.extend_from_slice(rest);
    header
}

fn ah_frames(list: &mut List) {
    let udp = wire::udp(5000, 53, &[0; 4]);
    list.add(
        "IPv4 AH then UDP",
        eth(ethertype::IP, &wire::ipv4(&ipv4_header(ipproto::AH), &ah(ipproto::UDP, &udp))),
    );
    list.add(
        "IPv4 AH, AH, then UDP",
        eth(
            ethertype::IP,
            &wire::ipv4(&ipv4_header(ipproto::AH), &ah(ipproto::AH, &ah(ipproto::UDP, &udp))),
        ),
    );
    list.add(
        "IPv6 AH then UDP",
        eth(
            ethertype::IPV6,
            &wire::ipv6(IP6_A, IP6_B, ipproto::AH, 64, 0, &ah(ipproto::UDP, &udp)),
        ),
    );
    let mut behind = wire::ipv6_extension(ipproto::AH, &[1, 4, 0, 0, 0, 0]);
    behind.extend_from_slice(&ah(ipproto::UDP, &udp));
    list.add(
        "IPv6 destination options, AH, then UDP",
        eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, ipproto::DSTOPTS, 64, 0, &behind)),
    );
    let mut then_options =
        ah(ipproto::DSTOPTS, &wire::ipv6_extension(ipproto::UDP, &[1, 4, 0, 0, 0, 0]));
    then_options.extend_from_slice(&udp);
    list.add(
        "IPv6 AH, destination options, then UDP",
        eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, ipproto::AH, 64, 0, &then_options)),
    );
}

fn loopback_frames(list: &mut List) {
    let udp = wire::udp(5000, 53, &[]);
    for (name, src, dst) in [
        ("127.0.0.1 > 10.0.0.2", [127, 0, 0, 1], [10, 0, 0, 2]),
        ("10.0.0.1 > 127.0.0.1", [10, 0, 0, 1], [127, 0, 0, 1]),
        ("10.0.0.1 > 127.0.0.0", [10, 0, 0, 1], [127, 0, 0, 0]),
        ("169.254.0.0 > 169.254.1.1", [169, 254, 0, 0], [169, 254, 1, 1]),
    ] {
        let header = Ipv4Header { src, dst, ..ipv4_header(ipproto::UDP) };
        list.add(&format!("IPv4 UDP {name}"), eth(ethertype::IP, &wire::ipv4(&header, &udp)));
    }
    list.add(
        "ARP request from 127.0.0.1",
        wire::ethernet(
            wire::BROADCAST_MAC,
            HOST_A,
            &[],
            ethertype::ARP,
            &wire::arp(1, HOST_A, [127, 0, 0, 1], [0; 6], [10, 0, 0, 2]),
        ),
    );
    let v6_loopback = {
        let mut a = [0u8; 16];
        a[15] = 1;
        a
    };
    list.add(
        "IPv6 UDP ::1 > ::1",
        eth(ethertype::IPV6, &wire::ipv6(v6_loopback, v6_loopback, ipproto::UDP, 64, 0, &udp)),
    );
}

fn ipv4_header(protocol: u8) -> Ipv4Header {
    Ipv4Header {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        protocol,
        ttl: 64,
        tos: 0,
        id: 7,
        dont_fragment: false,
        more_fragments: false,
        fragment_offset: 0,
        options: Vec::new(),
    }
}

fn eth(ty: u16, payload: &[u8]) -> Vec<u8> {
    wire::ethernet(HOST_B, HOST_A, &[], ty, payload)
}

#[derive(Default)]
struct List {
    packets: Vec<Packet>,
}

impl List {
    fn add(&mut self, description: &str, data: Vec<u8>) {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.add_cut(description, data, len);
    }

    fn add_cut(&mut self, description: &str, data: Vec<u8>, wire_len: u32) {
        let index = u32::try_from(self.packets.len()).unwrap_or(u32::MAX);
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.packets.push(Packet {
            data,
            wire_len: wire_len.max(len),
            ts_sec: 1_650_000_000u32.saturating_add(index),
            ts_usec: 0,
            description: description.to_string(),
        });
    }
}
