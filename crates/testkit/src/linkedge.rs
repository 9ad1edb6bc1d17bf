//! Hand-written Ethernet frames for the link-level and encapsulation filters: every 802.2
//! control-byte format and command, each LLC/SNAP encoding of the protocols filters name by
//! SAP, VLAN tag types and stacks, MPLS stacks, PPPoE sessions carrying each PPP protocol
//! filters map to, and Geneve and VXLAN tunnels over IPv4 and IPv6.
//!
//! The seeded corpus carries these encapsulations too, but only their common forms; a filter
//! such as `llc sabme`, `pppoes and iso` or `geneve and ip` (Geneve carrying bare IP) needs
//! the rare forms to be tested at all. Kept apart from [`crate::edge_cases`] so that list,
//! and every capture made from it, stays as it is.

use crate::wire::{self, ethertype, ipproto, Ipv4Header, Mac, TcpHeader, VlanTag, BROADCAST_MAC};
use crate::Packet;

const HOST_A: Mac = [0x00, 0x11, 0x22, 0x33, 0x44, 0x01];
const HOST_B: Mac = [0x00, 0x11, 0x22, 0x33, 0x44, 0x02];
const INNER_A: Mac = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
const INNER_B: Mac = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];
const IP_A: [u8; 4] = [10, 0, 0, 1];
const IP_B: [u8; 4] = [10, 0, 0, 2];
const IP6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const IP6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

const GENEVE_PORT: u16 = 6081;
const VXLAN_PORT: u16 = 4789;

/// The frames, in a fixed order with increasing timestamps.
pub fn link_edge_cases() -> Vec<Packet> {
    let mut list = List::default();
    llc_frames(&mut list);
    ethernet_ii_types(&mut list);
    vlan_frames(&mut list);
    mpls_frames(&mut list);
    pppoe_frames(&mut list);
    geneve_frames(&mut list);
    vxlan_frames(&mut list);
    transport_frames(&mut list);
    list.packets
}

fn llc_frames(list: &mut List) {
    // I frames have a 2-byte control field with the low bit clear.
    for (name, control) in [
        ("I frame N(S)=0", vec![0x00, 0x02]),
        ("I frame N(S)=7", vec![0x0e, 0x10]),
        ("S frame RR", vec![0x01, 0x00]),
        ("S frame RR with P/F", vec![0x01, 0x01]),
        ("S frame RNR", vec![0x05, 0x02]),
        ("S frame REJ", vec![0x09, 0x04]),
        ("U frame UI", vec![0x03]),
        ("U frame UA", vec![0x63]),
        ("U frame UA with F", vec![0x73]),
        ("U frame DISC", vec![0x43]),
        ("U frame DISC with P", vec![0x53]),
        ("U frame DM", vec![0x0f]),
        ("U frame DM with F", vec![0x1f]),
        ("U frame SABME", vec![0x6f]),
        ("U frame SABME with P", vec![0x7f]),
        ("U frame TEST", vec![0xe3]),
        ("U frame TEST with P", vec![0xf3]),
        ("U frame XID", vec![0xaf]),
        ("U frame XID with P", vec![0xbf]),
        ("U frame FRMR", vec![0x87]),
        ("U frame FRMR with F", vec![0x97]),
    ] {
        let mut llc = vec![0xf0, 0xf1];
        llc.extend_from_slice(&control);
        llc.extend_from_slice(b"netbios-ish payload");
        list.add(&format!("802.2 {name}"), wire::ieee8023(HOST_B, HOST_A, &llc));
    }

    let ip_over_llc = {
        let mut llc = vec![0x06, 0x06, 0x03];
        llc.extend_from_slice(&ipv4_tcp_packet(80));
        llc
    };
    list.add("802.2 DSAP/SSAP 0x06 (IP over 802.2)", wire::ieee8023(HOST_B, HOST_A, &ip_over_llc));
    for (name, nlpid, pdu) in
        [("CLNP", 0x81u8, 0x1cu8), ("ES-IS", 0x82, 0x02), ("IS-IS L1 LSP", 0x83, 0x12)]
    {
        let mut llc = vec![0xfe, 0xfe, 0x03, nlpid, 0x1b, 0x01, 0x00, pdu, 0x01, 0x00, 0x00];
        llc.extend_from_slice(&[0; 16]);
        list.add(&format!("802.2 ISO {name}"), wire::ieee8023(HOST_B, HOST_A, &llc));
    }
    list.add(
        "802.2 DSAP 0xfe, SSAP 0xfd",
        wire::ieee8023(HOST_B, HOST_A, &[0xfe, 0xfd, 0x03, 0x81, 0, 0, 0, 0]),
    );
    list.add(
        "802.2 NetBEUI 0xf0/0xf0 UI",
        wire::ieee8023(HOST_B, HOST_A, &[0xf0, 0xf0, 0x03, 0x2c, 0x00, 0xff, 0xef]),
    );
    list.add(
        "802.2 IPX 0xe0/0xe0",
        wire::ieee8023(BROADCAST_MAC, HOST_A, &[0xe0, 0xe0, 0x03, 0xff, 0xff, 0x00, 0x1e]),
    );
    list.add(
        "raw 802.3 Novell IPX (0xffff checksum)",
        wire::ieee8023(BROADCAST_MAC, HOST_A, &[0xff, 0xff, 0x00, 0x1e, 0x00, 0x04, 0, 0]),
    );
    list.add(
        "802.3 starting 0xff 0xfe (not raw IPX)",
        wire::ieee8023(HOST_B, HOST_A, &[0xff, 0xfe, 0x03, 0, 0, 0]),
    );
    list.add(
        "802.2 STP BPDU",
        wire::ieee8023([0x01, 0x80, 0xc2, 0, 0, 0], HOST_A, &[0x42, 0x42, 0x03, 0, 0, 0, 0, 0]),
    );
    for (name, org, ptype) in [
        ("AppleTalk (Apple OUI)", [0x08, 0x00, 0x07], 0x809bu16),
        ("AppleTalk with a zero OUI", [0, 0, 0], 0x809b),
        ("AARP", [0, 0, 0], 0x80f3),
        ("AARP with the Apple OUI", [0x08, 0x00, 0x07], 0x80f3),
        ("IPX", [0, 0, 0], 0x8137),
        ("IPv4", [0, 0, 0], 0x0800),
        ("ARP", [0, 0, 0], 0x0806),
    ] {
        let mut snap = vec![0xaa, 0xaa, 0x03];
        snap.extend_from_slice(&org);
        snap.extend_from_slice(&ptype.to_be_bytes());
        if ptype == 0x0800 {
            snap.extend_from_slice(&ipv4_tcp_packet(22));
        } else {
            snap.extend_from_slice(&[0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07]);
        }
        list.add(&format!("802.2 SNAP {name}"), wire::ieee8023(HOST_B, HOST_A, &snap));
    }
    let mut at_length = vec![0xe0, 0xe0, 0x03];
    at_length.resize(1500, 0x11);
    list.add(
        "802.3 length exactly 1500 with an IPX header",
        wire::ieee8023(HOST_B, HOST_A, &at_length),
    );
    list.add("type 1501 (neither length nor type)", eth(0x05dd, &[0xe0, 0xe0, 0x03, 0, 0]));
    list.add("802.3 cut right after the length", wire::ieee8023(HOST_B, HOST_A, &[]));
    list.add("802.3 with only a DSAP", {
        let mut f = wire::ieee8023(HOST_B, HOST_A, &[0x42]);
        f.truncate(15);
        f
    });
}

fn ethernet_ii_types(list: &mut List) {
    for (name, ty) in [
        ("AppleTalk", 0x809bu16),
        ("AARP", 0x80f3),
        ("IPX", 0x8137),
        ("DECnet", 0x6003),
        ("LAT", 0x6004),
        ("SCA", 0x6007),
        ("MOP dump/load", 0x6001),
        ("MOP remote console", 0x6002),
        ("RARP", 0x8035),
        ("Xerox NS", 0x0600),
        ("PPPoE discovery", 0x8863),
    ] {
        list.add(
            &format!("Ethernet II {name}"),
            eth(ty, &[0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]),
        );
    }
    list.add(
        "Ethernet II RARP request",
        eth(ethertype::REVARP, &wire::arp(3, HOST_A, [0; 4], HOST_A, [0; 4])),
    );
}

fn vlan_frames(list: &mut List) {
    let tagged = |tags: &[VlanTag], ty: u16, payload: &[u8]| {
        wire::ethernet(HOST_B, HOST_A, tags, ty, payload)
    };
    list.add(
        "802.1Q VLAN 100, IPv4/UDP",
        tagged(&[tag(0x8100, 100)], 0x0800, &ipv4_udp_packet(1000, 53, &[])),
    );
    list.add(
        "802.1ad VLAN 200 alone, IPv4/TCP",
        tagged(&[tag(0x88a8, 200)], 0x0800, &ipv4_tcp_packet(80)),
    );
    list.add(
        "0x9100 VLAN 300 alone, IPv6",
        tagged(&[tag(0x9100, 300)], 0x86dd, &ipv6_udp_packet(53)),
    );
    list.add(
        "QinQ 100 (0x88a8) over 200 (0x8100), ARP",
        tagged(
            &[tag(0x88a8, 100), tag(0x8100, 200)],
            0x0806,
            &wire::arp(1, HOST_A, IP_A, [0; 6], IP_B),
        ),
    );
    list.add(
        "QinQ 200 over 100, IPv4/TCP",
        tagged(&[tag(0x8100, 200), tag(0x8100, 100)], 0x0800, &ipv4_tcp_packet(443)),
    );
    list.add(
        "VLAN 100 then MPLS label 16, IPv4",
        tagged(&[tag(0x8100, 100)], 0x8847, &mpls(&[16], &ipv4_tcp_packet(80))),
    );
    list.add(
        "VLAN 100 then PPPoE session IPv4",
        tagged(
            &[tag(0x8100, 100)],
            0x8864,
            &wire::pppoe(0, 0x1234, &ppp(0x0021, &ipv4_tcp_packet(80))),
        ),
    );
    let mut llc = vec![0x42, 0x42, 0x03, 0, 0, 0];
    llc.resize(38, 0);
    let mut vlan_8023 = tagged(&[tag(0x8100, 100)], 38, &llc);
    vlan_8023.truncate(18 + 38);
    list.add("VLAN 100 then an 802.3 STP frame", vlan_8023);
    list.add(
        "VLAN id 4095 with priority 7",
        tagged(&[VlanTag { tpid: 0x8100, tci: 0xefff }], 0x0800, &ipv4_tcp_packet(80)),
    );
}

fn mpls_frames(list: &mut List) {
    list.add(
        "MPLS 100 (bottom), IPv4/TCP",
        eth(ethertype::MPLS, &mpls(&[100], &ipv4_tcp_packet(80))),
    );
    list.add(
        "MPLS 100, 200 (bottom), IPv6/UDP",
        eth(ethertype::MPLS, &mpls(&[100, 200], &ipv6_udp_packet(53))),
    );
    list.add(
        "MPLS 5 (bottom), non-IP payload",
        eth(ethertype::MPLS, &mpls(&[5], &[0x11, 0x22, 0x33, 0x44])),
    );
    let mut clear = mpls(&[100], &ipv4_tcp_packet(80));
    if let Some(b) = clear.get_mut(2) {
        *b &= 0xfe;
    }
    list.add("MPLS 100 without bottom-of-stack, then IPv4", eth(ethertype::MPLS, &clear));
    list.add(
        "MPLS 1048575 (largest label), IPv4",
        eth(ethertype::MPLS, &mpls(&[0xf_ffff], &ipv4_tcp_packet(80))),
    );
    list.add("MPLS multicast type 0x8848, IPv4", eth(0x8848, &mpls(&[100], &ipv4_tcp_packet(80))));
}

fn pppoe_frames(list: &mut List) {
    let session = |protocol: u16, payload: &[u8]| {
        eth(ethertype::PPPOES, &wire::pppoe(0, 0x1234, &ppp(protocol, payload)))
    };
    list.add("PPPoE 0x1234 IPv4/TCP 80", session(0x0021, &ipv4_tcp_packet(80)));
    list.add("PPPoE 0x1234 IPv6/UDP 53", session(0x0057, &ipv6_udp_packet(53)));
    list.add("PPPoE OSI (CLNP)", session(0x0023, &[0x81, 0x1b, 0x01, 0x00, 0x1c, 0, 0, 0]));
    list.add("PPPoE IPX", session(0x002b, &[0xff, 0xff, 0x00, 0x1e, 0, 0, 0, 0]));
    list.add("PPPoE bridging PDU", session(0x0031, &[0, 0, 0, 0, 0, 0, 0, 0]));
    list.add("PPPoE AppleTalk", session(0x0029, &[0, 0, 0, 0, 0, 0, 0, 0]));
    list.add("PPPoE DECnet", session(0x0027, &[0, 0, 0, 0, 0, 0, 0, 0]));
    list.add("PPPoE MPLS 3, IPv4", session(0x0281, &mpls(&[3], &ipv4_tcp_packet(80))));
    list.add("PPPoE LCP", session(0xc021, &[0x09, 0x01, 0x00, 0x08, 1, 2, 3, 4]));
    list.add(
        "PPPoE inside PPPoE, IPv4",
        session(0x8864, &wire::pppoe(0, 0x0042, &ppp(0x0021, &ipv4_udp_packet(1000, 53, &[])))),
    );
    list.add("PPPoE carrying PPPoE discovery", session(0x8863, &wire::pppoe(0x09, 0, &[])));
    list.add(
        "PPPoE session 0xffff, IPv4",
        eth(ethertype::PPPOES, &wire::pppoe(0, 0xffff, &ppp(0x0021, &ipv4_tcp_packet(22)))),
    );
    list.add(
        "PPPoE session with an IPv4 header with options",
        session(0x0021, &ipv4_with_options(ipproto::TCP, &tcp_segment(8080))),
    );
}

fn geneve_frames(list: &mut List) {
    let inner_v4 = inner_frame(0x0800, &ipv4_tcp_packet(80));
    list.add(
        "Geneve VNI 7 over IPv4, inner Ethernet IPv4/TCP",
        ipv4_udp(GENEVE_PORT, &geneve(0, 0x6558, 7, &[], &inner_v4)),
    );
    list.add(
        "Geneve VNI 100 with an 8-byte option, inner Ethernet IPv4/TCP",
        ipv4_udp(
            GENEVE_PORT,
            &geneve(0, 0x6558, 100, &[0x01, 0x02, 0x80, 0x01, 1, 2, 3, 4], &inner_v4),
        ),
    );
    list.add(
        "Geneve VNI 7 over IPv6, inner Ethernet IPv6/UDP",
        ipv6_udp(
            GENEVE_PORT,
            &geneve(0, 0x6558, 7, &[], &inner_frame(0x86dd, &ipv6_udp_packet(53))),
        ),
    );
    list.add(
        "Geneve VNI 7 carrying bare IPv4",
        ipv4_udp(GENEVE_PORT, &geneve(0, 0x0800, 7, &[], &ipv4_tcp_packet(80))),
    );
    list.add(
        "Geneve VNI 9 carrying bare IPv6",
        ipv6_udp(GENEVE_PORT, &geneve(0, 0x86dd, 9, &[], &ipv6_udp_packet(53))),
    );
    list.add("Geneve version 1", ipv4_udp(GENEVE_PORT, &geneve(1, 0x6558, 7, &[], &inner_v4)));
    list.add(
        "Geneve, inner VLAN 100 then IPv4",
        ipv4_udp(
            GENEVE_PORT,
            &geneve(
                0,
                0x6558,
                7,
                &[],
                &wire::ethernet(
                    INNER_B,
                    INNER_A,
                    &[tag(0x8100, 100)],
                    0x0800,
                    &ipv4_tcp_packet(80),
                ),
            ),
        ),
    );
    let innermost = geneve(0, 0x6558, 8, &[], &inner_v4);
    let middle = inner_frame(0x0800, &ipv4_udp_packet(40000, GENEVE_PORT, &innermost));
    list.add(
        "Geneve 7 carrying Geneve 8",
        ipv4_udp(GENEVE_PORT, &geneve(0, 0x6558, 7, &[], &middle)),
    );
    list.add(
        "Geneve, inner broadcast ARP",
        ipv4_udp(
            GENEVE_PORT,
            &geneve(
                0,
                0x6558,
                7,
                &[],
                &wire::ethernet(
                    BROADCAST_MAC,
                    INNER_A,
                    &[],
                    0x0806,
                    &wire::arp(1, INNER_A, IP_A, [0; 6], IP_B),
                ),
            ),
        ),
    );
    let mut cut = ipv4_udp(GENEVE_PORT, &geneve(0, 0x6558, 7, &[], &inner_v4));
    cut.truncate(14 + 20 + 8 + 8 + 10);
    list.add("Geneve cut inside the inner Ethernet header", cut);
    list.add(
        "Geneve over IPv4 with options",
        eth(
            0x0800,
            &wire::ipv4(
                &options_header(ipproto::UDP),
                &wire::udp(40000, GENEVE_PORT, &geneve(0, 0x6558, 7, &[], &inner_v4)),
            ),
        ),
    );
    list.add(
        "UDP from port 6081 (not to it)",
        ipv4_udp_from(GENEVE_PORT, 40000, &geneve(0, 0x6558, 7, &[], &inner_v4)),
    );
}

fn vxlan_frames(list: &mut List) {
    let inner_v4 = inner_frame(0x0800, &ipv4_tcp_packet(80));
    list.add(
        "VXLAN VNI 100 over IPv4, inner IPv4/TCP",
        ipv4_udp(VXLAN_PORT, &vxlan(0x08, 100, &inner_v4)),
    );
    list.add(
        "VXLAN VNI 5000 over IPv6, inner ARP",
        ipv6_udp(
            VXLAN_PORT,
            &vxlan(0x08, 5000, &inner_frame(0x0806, &wire::arp(1, INNER_A, IP_A, [0; 6], IP_B))),
        ),
    );
    list.add("VXLAN flags 0x0c, VNI 100", ipv4_udp(VXLAN_PORT, &vxlan(0x0c, 100, &inner_v4)));
    list.add(
        "VXLAN flags 0 (no VNI), VNI field 100",
        ipv4_udp(VXLAN_PORT, &vxlan(0x00, 100, &inner_v4)),
    );
    list.add("VXLAN-GPE port 4790", ipv4_udp(4790, &vxlan(0x0c, 100, &inner_v4)));
    list.add(
        "VXLAN, inner VLAN 200 then IPv6",
        ipv4_udp(
            VXLAN_PORT,
            &vxlan(
                0x08,
                1,
                &wire::ethernet(
                    INNER_B,
                    INNER_A,
                    &[tag(0x8100, 200)],
                    0x86dd,
                    &ipv6_udp_packet(53),
                ),
            ),
        ),
    );
    let innermost = vxlan(0x08, 2, &inner_v4);
    let middle = inner_frame(0x0800, &ipv4_udp_packet(40001, VXLAN_PORT, &innermost));
    list.add("VXLAN 1 carrying VXLAN 2", ipv4_udp(VXLAN_PORT, &vxlan(0x08, 1, &middle)));
}

fn transport_frames(list: &mut List) {
    for (name, protocol) in [
        ("ICMP", ipproto::ICMP),
        ("IGMP", ipproto::IGMP),
        ("IGRP", 9),
        ("PIM", ipproto::PIM),
        ("VRRP/CARP", 112),
        ("SCTP", ipproto::SCTP),
        ("UDP", ipproto::UDP),
    ] {
        let payload = [0x11, 0x00, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];
        list.add(
            &format!("IPv4 {name}"),
            eth(0x0800, &wire::ipv4(&ipv4_header(protocol), &payload)),
        );
        list.add(
            &format!("IPv4 {name} with options"),
            eth(0x0800, &wire::ipv4(&options_header(protocol), &payload)),
        );
    }
    list.add(
        "IPv6 ICMPv6 echo request",
        eth(
            0x86dd,
            &wire::ipv6(IP6_A, IP6_B, ipproto::ICMPV6, 64, 0, &wire::icmpv6(128, 0, &[0, 1, 0, 1])),
        ),
    );
    let mut fragment = wire::ipv6_fragment(ipproto::TCP, 0, false, 9);
    fragment.extend_from_slice(&tcp_segment(80));
    list.add(
        "IPv6 fragment header then TCP",
        eth(0x86dd, &wire::ipv6(IP6_A, IP6_B, ipproto::FRAGMENT, 64, 0, &fragment)),
    );
    list.add(
        "IPv6 TCP",
        eth(0x86dd, &wire::ipv6(IP6_A, IP6_B, ipproto::TCP, 64, 0, &tcp_segment(443))),
    );
    list.add(
        "IPv4 later fragment of TCP",
        eth(
            0x0800,
            &wire::ipv4(&Ipv4Header { fragment_offset: 3, ..ipv4_header(ipproto::TCP) }, &[0; 16]),
        ),
    );
}

#[derive(Default)]
struct List {
    packets: Vec<Packet>,
}

impl List {
    fn add(&mut self, description: &str, data: Vec<u8>) {
        let index = u32::try_from(self.packets.len()).unwrap_or(u32::MAX);
        let wire_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.packets.push(Packet {
            data,
            wire_len,
            ts_sec: 1_650_000_000u32.saturating_add(index),
            ts_usec: 0,
            description: description.to_string(),
        });
    }
}

fn eth(ty: u16, payload: &[u8]) -> Vec<u8> {
    wire::ethernet(HOST_B, HOST_A, &[], ty, payload)
}

fn inner_frame(ty: u16, payload: &[u8]) -> Vec<u8> {
    wire::ethernet(INNER_B, INNER_A, &[], ty, payload)
}

fn tag(tpid: u16, vid: u16) -> VlanTag {
    VlanTag { tpid, tci: vid & 0x0fff }
}

fn ppp(protocol: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = protocol.to_be_bytes().to_vec();
    p.extend_from_slice(payload);
    p
}

fn mpls(labels: &[u32], payload: &[u8]) -> Vec<u8> {
    let entries: Vec<wire::MplsLabel> =
        labels.iter().map(|&label| wire::MplsLabel { label, traffic_class: 0, ttl: 64 }).collect();
    wire::mpls(&entries, payload)
}

/// A Geneve header (version, protocol type, VNI, options) and its payload.
fn geneve(version: u8, protocol: u16, vni: u32, options: &[u8], payload: &[u8]) -> Vec<u8> {
    let words = u8::try_from(options.len() / 4).unwrap_or(0) & 0x3f;
    let mut g = vec![(version << 6) | words, 0];
    g.extend_from_slice(&protocol.to_be_bytes());
    g.extend_from_slice(&(vni << 8).to_be_bytes());
    g.extend_from_slice(options);
    g.extend_from_slice(payload);
    g
}

fn vxlan(flags: u8, vni: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![flags, 0, 0, 0];
    v.extend_from_slice(&(vni << 8).to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn ipv4_header(protocol: u8) -> Ipv4Header {
    Ipv4Header {
        src: IP_A,
        dst: IP_B,
        protocol,
        ttl: 64,
        tos: 0,
        id: 7,
        dont_fragment: true,
        more_fragments: false,
        fragment_offset: 0,
        options: Vec::new(),
    }
}

fn options_header(protocol: u8) -> Ipv4Header {
    Ipv4Header {
        options: vec![0x01, 0x01, 0x01, 0x00, 0x94, 0x04, 0x00, 0x00],
        ..ipv4_header(protocol)
    }
}

fn tcp_segment(dst_port: u16) -> Vec<u8> {
    wire::tcp(
        &TcpHeader {
            src_port: 40000,
            dst_port,
            seq: 1,
            ack: 0,
            flags: wire::tcp_flags::SYN,
            window: 1024,
            options: Vec::new(),
        },
        &[],
    )
}

fn ipv4_tcp_packet(dst_port: u16) -> Vec<u8> {
    wire::ipv4(&ipv4_header(ipproto::TCP), &tcp_segment(dst_port))
}

fn ipv4_with_options(protocol: u8, payload: &[u8]) -> Vec<u8> {
    wire::ipv4(&options_header(protocol), payload)
}

fn ipv4_udp_packet(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    wire::ipv4(&ipv4_header(ipproto::UDP), &wire::udp(src_port, dst_port, payload))
}

fn ipv6_udp_packet(dst_port: u16) -> Vec<u8> {
    wire::ipv6(IP6_A, IP6_B, ipproto::UDP, 64, 0, &wire::udp(5353, dst_port, &[1, 2, 3, 4]))
}

fn ipv4_udp(dst_port: u16, payload: &[u8]) -> Vec<u8> {
    eth(0x0800, &ipv4_udp_packet(40000, dst_port, payload))
}

fn ipv4_udp_from(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    eth(0x0800, &ipv4_udp_packet(src_port, dst_port, payload))
}

fn ipv6_udp(dst_port: u16, payload: &[u8]) -> Vec<u8> {
    eth(
        0x86dd,
        &wire::ipv6(IP6_A, IP6_B, ipproto::UDP, 64, 0, &wire::udp(40000, dst_port, payload)),
    )
}
