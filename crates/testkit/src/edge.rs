//! Hand-written boundary packets: the records a filter engine is most likely to get wrong.
//!
//! Each one sits at a bound that some load or guard must respect: a header cut one byte
//! short, a length field that claims more (or less) than is there, a field at the edge of
//! its range, a record shorter than the packet it stands for. Generated corpora hit these
//! only by luck, so they are listed once, by hand, with a description saying which bound
//! each one probes.

use crate::wire::{
    self, ethertype, ipproto, tcp_flags, Ipv4Header, Mac, TcpHeader, VlanTag, BROADCAST_MAC,
};
use crate::Packet;

const HOST_A: Mac = [0x00, 0x11, 0x22, 0x33, 0x44, 0x01];
const HOST_B: Mac = [0x00, 0x11, 0x22, 0x33, 0x44, 0x02];
const IP_A: [u8; 4] = [10, 0, 0, 1];
const IP_B: [u8; 4] = [10, 0, 0, 2];
const IP6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const IP6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// Offset of the IPv4 header in an untagged Ethernet frame.
const IP: usize = 14;
/// Offset of the transport header after an option-less IPv4 header.
const L4: usize = 34;

/// The boundary packets, in a fixed order with increasing timestamps.
pub fn edge_cases() -> Vec<Packet> {
    let mut list = EdgeList::default();

    list.add("empty record of an empty packet", Vec::new(), 0);
    list.add("empty record of a 60-byte packet", Vec::new(), 60);
    list.add("1 byte", vec![0xff], 1);
    list.whole("12 bytes: the two MACs only", macs());
    let mut half_type = macs();
    half_type.push(0x08);
    list.whole("13 bytes: half an EtherType", half_type);
    list.whole("exactly 14 bytes: Ethernet header, IPv4 type, no IP", eth(ethertype::IP, &[]));
    list.whole(
        "exactly 14 bytes: Ethernet header, 802.1Q type, no tag",
        eth(ethertype::VLAN_8021Q, &[]),
    );
    list.whole("exactly 14 bytes: Ethernet header, IPv6 type, no IP", eth(ethertype::IPV6, &[]));
    list.whole("15 bytes: IPv4 type and the first IP byte", eth(ethertype::IP, &[0x45]));

    for ihl in [0u8, 1, 4] {
        let mut frame = ipv4_tcp(&[]);
        set(&mut frame, IP, 0x40 | ihl);
        refresh_ipv4_checksum(&mut frame);
        list.whole(&format!("IPv4 IHL {ihl} (< 5)"), frame);
    }
    let mut long_ihl = eth(ethertype::IP, &ipv4_header_only(ipproto::TCP, 60));
    set(&mut long_ihl, IP, 0x4f);
    refresh_ipv4_checksum(&mut long_ihl);
    list.add("IPv4 IHL 15 with only 20 header bytes captured", long_ihl, 14 + 60 + 20);
    let mut long_total = ipv4_tcp(&[]);
    set16(&mut long_total, IP + 2, 1500);
    refresh_ipv4_checksum(&mut long_total);
    list.whole("IPv4 total length 1500 > the 54 bytes on the wire", long_total);
    let mut short_total = ipv4_tcp(&[]);
    set16(&mut short_total, IP + 2, 10);
    refresh_ipv4_checksum(&mut short_total);
    list.whole("IPv4 total length 10 < its own header", short_total);
    let mut wrong_version = ipv4_tcp(&[]);
    set(&mut wrong_version, IP, 0x65);
    list.whole("IPv4 EtherType but IP version 6", wrong_version);
    let mut one_short = ipv4_tcp(&[]);
    one_short.truncate(IP + 19);
    list.add("IPv4 header one byte short (19 of 20 captured)", one_short, 54);

    for offset in [0u8, 1, 4] {
        let mut frame = ipv4_tcp(b"payload");
        set(&mut frame, L4 + 12, offset << 4);
        list.whole(&format!("TCP data offset {offset} (< 5)"), frame);
    }
    let mut big_offset = ipv4_tcp(&[]);
    set(&mut big_offset, L4 + 12, 0xf0);
    list.whole("TCP data offset 15 with only 20 TCP bytes", big_offset);
    let mut ports_only = ipv4_tcp(&[]);
    ports_only.truncate(L4 + 4);
    list.add("TCP cut after the ports", ports_only, 54);
    let mut one_tcp_byte = ipv4_tcp(&[]);
    one_tcp_byte.truncate(L4 + 1);
    list.add("TCP cut after one byte of the source port", one_tcp_byte, 54);
    let mut short_udp = ipv4_udp(53, 53, &[]);
    short_udp.truncate(L4 + 7);
    list.add("UDP header one byte short (7 of 8)", short_udp, 42);
    list.whole("UDP port 0 to port 65535", ipv4_udp(0, 65535, b"x"));
    list.whole("UDP 65535 to 0, empty payload", ipv4_udp(65535, 0, &[]));

    list.whole(
        "IPv4 fragment at the largest offset (0x1fff) with MF",
        eth(
            ethertype::IP,
            &wire::ipv4(
                &Ipv4Header {
                    more_fragments: true,
                    fragment_offset: 0x1fff,
                    ..ipv4_header(ipproto::TCP)
                },
                &[0; 8],
            ),
        ),
    );
    // Bytes that read as ports 80 -> 22 if a filter forgets the fragment-offset guard.
    list.whole(
        "IPv4 later fragment (offset 1) of TCP whose data looks like ports 80>22",
        eth(
            ethertype::IP,
            &wire::ipv4(
                &Ipv4Header { fragment_offset: 1, ..ipv4_header(ipproto::TCP) },
                &[0, 80, 0, 22, 0, 0, 0, 0],
            ),
        ),
    );
    list.whole(
        "IPv4 first fragment (MF, offset 0) carrying a whole TCP header",
        eth(
            ethertype::IP,
            &wire::ipv4(
                &Ipv4Header { more_fragments: true, ..ipv4_header(ipproto::TCP) },
                &tcp_segment(&[]),
            ),
        ),
    );
    list.whole(
        "IPv4 DF, TTL 0, protocol 0",
        eth(
            ethertype::IP,
            &wire::ipv4(&Ipv4Header { dont_fragment: true, ttl: 0, ..ipv4_header(0) }, &[0; 8]),
        ),
    );
    list.whole("IPv4 protocol 255", eth(ethertype::IP, &wire::ipv4(&ipv4_header(255), &[0; 8])));
    let mut zero_len_option = ipv4_header(ipproto::UDP);
    zero_len_option.options = vec![0x07, 0x00, 0x04, 0x00];
    list.whole(
        "IPv4 record-route option with length 0",
        eth(ethertype::IP, &wire::ipv4(&zero_len_option, &wire::udp(53, 53, &[]))),
    );
    let mut nop_options = ipv4_header(ipproto::TCP);
    nop_options.options = vec![1; 4];
    let tcp_all_nops = wire::tcp(&TcpHeader { options: vec![1; 40], ..tcp_header() }, &[]);
    list.whole(
        "IPv4 IHL 6 then TCP data offset 15 of no-ops",
        eth(ethertype::IP, &wire::ipv4(&nop_options, &tcp_all_nops)),
    );
    list.whole(
        "IPv4 limited broadcast from a broadcast MAC",
        wire::ethernet(
            BROADCAST_MAC,
            HOST_A,
            &[],
            ethertype::IP,
            &wire::ipv4(
                &Ipv4Header { dst: [255; 4], ..ipv4_header(ipproto::UDP) },
                &wire::udp(68, 67, &[]),
            ),
        ),
    );

    let mut short_v6 = eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, ipproto::NONE, 64, 0, &[]));
    short_v6.truncate(IP + 39);
    list.add("IPv6 header one byte short (39 of 40)", short_v6, 54);
    let hop_by_hop = wire::ipv6_extension(ipproto::TCP, &[1, 4, 0, 0, 0, 0]);
    let mut zero_payload_len =
        eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, ipproto::HOPOPTS, 64, 0, &hop_by_hop));
    set16(&mut zero_payload_len, IP + 4, 0);
    list.whole("IPv6 payload length 0 though a hop-by-hop header follows", zero_payload_len);
    let mut long_ext = hop_by_hop.clone();
    set(&mut long_ext, 1, 200);
    list.whole(
        "IPv6 hop-by-hop header claiming 1608 bytes, 8 present",
        eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, ipproto::HOPOPTS, 64, 0, &long_ext)),
    );
    let mut v4_in_v6 = eth(
        ethertype::IPV6,
        &wire::ipv6(IP6_A, IP6_B, ipproto::UDP, 64, 0, &wire::udp(53, 53, &[])),
    );
    set(&mut v4_in_v6, IP, 0x45);
    list.whole("IPv6 EtherType but IP version 4", v4_in_v6);
    let mut fragmented = wire::ipv6_fragment(ipproto::TCP, 0, true, 7);
    fragmented.extend_from_slice(&tcp_segment(&[]));
    list.whole(
        "IPv6 fragment header (first, M) then TCP",
        eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, ipproto::FRAGMENT, 64, 0, &fragmented)),
    );
    let mut later = wire::ipv6_fragment(ipproto::UDP, 3, false, 7);
    later.extend_from_slice(&[0, 53, 0, 53, 0, 8, 0, 0]);
    list.whole(
        "IPv6 later fragment (offset 3) whose data looks like UDP 53>53",
        eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, ipproto::FRAGMENT, 64, 0, &later)),
    );
    let mut routing = wire::ipv6_extension(ipproto::UDP, &[2, 0, 0, 0, 0, 0]);
    routing.extend_from_slice(&wire::udp(5000, 53, &[]));
    list.whole(
        "IPv6 routing header with segments left 0, then UDP",
        eth(ethertype::IPV6, &wire::ipv6(IP6_A, IP6_B, ipproto::ROUTING, 64, 0, &routing)),
    );

    list.whole("802.1Q tag with nothing after the TCI", {
        let mut frame = eth(ethertype::VLAN_8021Q, &[]);
        frame.extend_from_slice(&[0x00, 0x64]);
        frame
    });
    list.whole(
        "three VLAN tags (0x88a8, 0x8100, 0x8100) then IPv4/UDP",
        wire::ethernet(
            HOST_B,
            HOST_A,
            &[
                tag(ethertype::VLAN_8021AD, 100),
                tag(ethertype::VLAN_8021Q, 200),
                tag(ethertype::VLAN_8021Q, 300),
            ],
            ethertype::IP,
            &ipv4_udp_packet(1000, 53),
        ),
    );
    list.whole(
        "802.1Q priority tag (VLAN id 0) then IPv4/TCP",
        wire::ethernet(
            HOST_B,
            HOST_A,
            &[VlanTag { tpid: ethertype::VLAN_8021Q, tci: 0xa000 }],
            ethertype::IP,
            &ipv4_tcp_packet(),
        ),
    );
    list.whole(
        "802.1Q VLAN id 4095 (reserved) then IPv6",
        wire::ethernet(
            HOST_B,
            HOST_A,
            &[tag(ethertype::VLAN_8021Q, 4095)],
            ethertype::IPV6,
            &wire::ipv6(IP6_A, IP6_B, ipproto::NONE, 64, 0, &[]),
        ),
    );
    list.whole(
        "0x9100 outer tag (pre-standard QinQ) then 0x8100",
        wire::ethernet(
            HOST_B,
            HOST_A,
            &[tag(0x9100, 10), tag(ethertype::VLAN_8021Q, 20)],
            ethertype::IP,
            &ipv4_tcp_packet(),
        ),
    );

    let mut llc = vec![0x42, 0x42, 0x03];
    llc.extend_from_slice(&[0; 35]);
    let mut largest_length = wire::ieee8023([0x01, 0x80, 0xc2, 0, 0, 0], HOST_A, &llc);
    set16(&mut largest_length, 12, 1500);
    list.whole(
        "802.3 length field 1500 (the largest length) over a 38-byte STP BPDU",
        largest_length,
    );
    list.whole(
        "type field 1535 (0x05ff): neither a length nor an EtherType",
        eth(0x05ff, &[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]),
    );
    list.whole("type field 1536 (0x0600): the smallest EtherType (XNS)", eth(0x0600, &[0; 30]));
    list.whole("802.3 length field 0 with no LLC", eth(0x0000, &[]));
    let mut snap = vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
    snap.extend_from_slice(&ipv4_tcp_packet());
    let mut snap_frame = wire::ieee8023(HOST_B, HOST_A, &snap);
    let snap_len = snap_frame.len();
    snap_frame.truncate(snap_len.saturating_sub(10));
    list.add(
        "LLC/SNAP IPv4/TCP cut 10 bytes short",
        snap_frame,
        u32::try_from(snap_len).unwrap_or(0),
    );

    let label = |bottom: bool| -> [u8; 4] { [0x00, 0x01, if bottom { 0x01 } else { 0x00 }, 64] };
    let mut unterminated = Vec::new();
    for _ in 0..3 {
        unterminated.extend_from_slice(&label(false));
    }
    list.whole(
        "MPLS stack with no bottom-of-stack bit before the capture ends",
        eth(ethertype::MPLS, &unterminated),
    );
    let mut three = Vec::new();
    three.extend_from_slice(&label(false));
    three.extend_from_slice(&label(false));
    three.extend_from_slice(&label(true));
    three.extend_from_slice(&ipv4_tcp_packet());
    list.whole("MPLS three labels then IPv4/TCP", eth(ethertype::MPLS, &three));

    list.whole(
        "PPPoE session with length 0 and no PPP protocol",
        eth(ethertype::PPPOES, &wire::pppoe(0, 1, &[])),
    );
    let mut ppp_v6 = vec![0x00, 0x57];
    ppp_v6.extend_from_slice(&wire::ipv6(
        IP6_A,
        IP6_B,
        ipproto::UDP,
        64,
        0,
        &wire::udp(546, 547, &[]),
    ));
    list.whole("PPPoE session IPv6/UDP", eth(ethertype::PPPOES, &wire::pppoe(0, 0x1234, &ppp_v6)));
    list.whole(
        "PPPoE discovery PADI with no tags",
        wire::ethernet(BROADCAST_MAC, HOST_A, &[], ethertype::PPPOED, &wire::pppoe(0x09, 0, &[])),
    );

    let mut zero_hlen = wire::arp(1, HOST_A, IP_A, [0; 6], IP_B);
    set(&mut zero_hlen, 4, 0);
    list.whole(
        "ARP with hardware length 0",
        wire::ethernet(BROADCAST_MAC, HOST_A, &[], ethertype::ARP, &zero_hlen),
    );
    let mut arp_cut = wire::ethernet(
        BROADCAST_MAC,
        HOST_A,
        &[],
        ethertype::ARP,
        &wire::arp(1, HOST_A, IP_A, [0; 6], IP_B),
    );
    arp_cut.truncate(14 + 8);
    list.add("ARP cut after the operation", arp_cut, 42);
    list.whole("ICMP one byte", eth(ethertype::IP, &wire::ipv4(&ipv4_header(ipproto::ICMP), &[8])));

    let mut vxlan = vec![0x08, 0, 0, 0, 0, 0, 0x64, 0];
    vxlan.extend_from_slice(&[0xff; 10]);
    list.whole("VXLAN whose inner Ethernet frame is 10 bytes", ipv4_udp(40000, 4789, &vxlan));
    let geneve = [0x3f, 0, 0x65, 0x58, 0, 0, 1, 0, 0x01, 0x02, 0x80, 0x01];
    list.whole("Geneve option length 63 words, 4 present", ipv4_udp(40000, 6081, &geneve));
    list.whole(
        "GRE transparent Ethernet with an empty inner frame",
        eth(ethertype::IP, &wire::ipv4(&ipv4_header(ipproto::GRE), &[0, 0, 0x65, 0x58])),
    );

    list.whole("64 zero bytes", vec![0; 64]);
    list.whole("64 0xff bytes", vec![0xff; 64]);
    let mut jumbo_claim = ipv4_tcp(&[]);
    jumbo_claim.resize(64, 0);
    list.add("64 bytes captured of a 65535-byte packet", jumbo_claim, 65535);
    list.add(
        "14 bytes captured of a 262144-byte packet (libpcap's largest snap length)",
        eth(ethertype::IP, &[]),
        262_144,
    );
    let full_size = ipv4_udp(1000, 2000, &[0x5a; 1472]);
    list.whole("full-size 1514-byte IPv4/UDP frame", full_size);

    list.packets
}

#[derive(Default)]
struct EdgeList {
    packets: Vec<Packet>,
}

impl EdgeList {
    fn add(&mut self, description: &str, data: Vec<u8>, wire_len: u32) {
        let index = u32::try_from(self.packets.len()).unwrap_or(u32::MAX);
        let data_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.packets.push(Packet {
            data,
            wire_len: wire_len.max(data_len),
            ts_sec: 1_600_000_000u32.saturating_add(index),
            ts_usec: 0,
            description: description.to_string(),
        });
    }

    fn whole(&mut self, description: &str, data: Vec<u8>) {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.add(description, data, len);
    }
}

fn macs() -> Vec<u8> {
    let mut bytes = HOST_B.to_vec();
    bytes.extend_from_slice(&HOST_A);
    bytes
}

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    wire::ethernet(HOST_B, HOST_A, &[], ethertype, payload)
}

fn tag(tpid: u16, vid: u16) -> VlanTag {
    VlanTag { tpid, tci: vid & 0x0fff }
}

fn ipv4_header(protocol: u8) -> Ipv4Header {
    Ipv4Header {
        src: IP_A,
        dst: IP_B,
        protocol,
        ttl: 64,
        tos: 0,
        id: 1,
        dont_fragment: false,
        more_fragments: false,
        fragment_offset: 0,
        options: Vec::new(),
    }
}

/// A 20-byte IPv4 header whose total length claims `payload_len` more bytes than it has.
fn ipv4_header_only(protocol: u8, payload_len: usize) -> Vec<u8> {
    let mut header = wire::ipv4(&ipv4_header(protocol), &[]);
    set16(&mut header, 2, wire::len16(20usize.saturating_add(payload_len)));
    wire::set_ipv4_checksum(&mut header);
    header
}

fn tcp_header() -> TcpHeader {
    TcpHeader {
        src_port: 40000,
        dst_port: 80,
        seq: 1,
        ack: 0,
        flags: tcp_flags::SYN,
        window: 65535,
        options: Vec::new(),
    }
}

fn tcp_segment(payload: &[u8]) -> Vec<u8> {
    wire::tcp(&tcp_header(), payload)
}

fn ipv4_tcp_packet() -> Vec<u8> {
    wire::ipv4(&ipv4_header(ipproto::TCP), &tcp_segment(&[]))
}

fn ipv4_tcp(payload: &[u8]) -> Vec<u8> {
    eth(ethertype::IP, &wire::ipv4(&ipv4_header(ipproto::TCP), &tcp_segment(payload)))
}

fn ipv4_udp_packet(src_port: u16, dst_port: u16) -> Vec<u8> {
    wire::ipv4(&ipv4_header(ipproto::UDP), &wire::udp(src_port, dst_port, &[]))
}

fn ipv4_udp(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    eth(
        ethertype::IP,
        &wire::ipv4(&ipv4_header(ipproto::UDP), &wire::udp(src_port, dst_port, payload)),
    )
}

/// Recomputes the checksum of the IPv4 header of an untagged Ethernet frame after an edit.
fn refresh_ipv4_checksum(frame: &mut [u8]) {
    if let Some(packet) = frame.get_mut(IP..) {
        wire::set_ipv4_checksum(packet);
    }
}

fn set(bytes: &mut [u8], at: usize, value: u8) {
    if let Some(slot) = bytes.get_mut(at) {
        *slot = value;
    }
}

fn set16(bytes: &mut [u8], at: usize, value: u16) {
    if let Some(slot) = bytes.get_mut(at..at.saturating_add(2)) {
        slot.copy_from_slice(&value.to_be_bytes());
    }
}
