//! Byte-level builders for the headers the corpus generator stacks into frames.
//!
//! Each builder lays out one header (and whatever follows it) exactly as it appears on the
//! wire, big-endian, so that the generator itself can stay a readable list of choices.
//! Lengths are computed here, not by callers, so that well-formed frames are consistent
//! by construction; deliberately broken frames live in `edge` and are written by hand.

/// An Ethernet MAC address.
pub type Mac = [u8; 6];

/// The all-ones broadcast MAC.
pub const BROADCAST_MAC: Mac = [0xff; 6];

/// Ethernet types and IP protocol numbers: weir-packet's.
pub use weir_packet::{ethertype, ipproto};

/// A length as a 16-bit field; the generator never builds anything that large, and a
/// saturated value would only make a frame look oversized, never cause a panic.
pub fn len16(len: usize) -> u16 {
    u16::try_from(len).unwrap_or(u16::MAX)
}

/// The Internet checksum (RFC 1071) of `bytes`.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = bytes.chunks_exact(2);
    for pair in &mut chunks {
        if let [hi, lo] = *pair {
            sum = sum.wrapping_add(u32::from(u16::from_be_bytes([hi, lo])));
        }
    }
    if let [last] = *chunks.remainder() {
        sum = sum.wrapping_add(u32::from(last) << 8);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff).wrapping_add(sum >> 16);
    }
    !(sum as u16)
}

/// One 802.1Q/802.1ad tag: the tag protocol identifier and the tag control information.
#[derive(Debug, Clone, Copy)]
pub struct VlanTag {
    /// 0x8100 or 0x88a8.
    pub tpid: u16,
    /// Priority (3 bits), drop-eligible (1 bit), VLAN id (12 bits).
    pub tci: u16,
}

/// An Ethernet II frame, with VLAN tags (outermost first) between the source MAC and the
/// final EtherType.
pub fn ethernet(dst: Mac, src: Mac, tags: &[VlanTag], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(
        14usize.saturating_add(payload.len()).saturating_add(tags.len().saturating_mul(4)),
    );
    frame.extend_from_slice(&dst);
    frame.extend_from_slice(&src);
    for tag in tags {
        frame.extend_from_slice(&tag.tpid.to_be_bytes());
        frame.extend_from_slice(&tag.tci.to_be_bytes());
    }
    frame.extend_from_slice(&ethertype.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// An IEEE 802.3 frame: the type field holds the length of what follows (an LLC header and
/// its payload), which must stay below 1536 for receivers to read it as a length.
pub fn ieee8023(dst: Mac, src: Mac, llc_and_payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(14usize.saturating_add(llc_and_payload.len()));
    frame.extend_from_slice(&dst);
    frame.extend_from_slice(&src);
    frame.extend_from_slice(&len16(llc_and_payload.len()).to_be_bytes());
    frame.extend_from_slice(llc_and_payload);
    frame
}

/// The fields of an IPv4 header the generator varies.
#[derive(Debug, Clone)]
pub struct Ipv4Header {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Protocol of the payload.
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// Type of service / DSCP+ECN byte.
    pub tos: u8,
    /// Identification.
    pub id: u16,
    /// The DF flag.
    pub dont_fragment: bool,
    /// The MF flag.
    pub more_fragments: bool,
    /// Fragment offset in 8-byte units (13 bits).
    pub fragment_offset: u16,
    /// Options; padded with zeros (end of options) to a multiple of 4 and cut at 40 bytes.
    pub options: Vec<u8>,
}

/// An IPv4 packet with a correct header checksum and total length.
pub fn ipv4(header: &Ipv4Header, payload: &[u8]) -> Vec<u8> {
    let mut options = header.options.clone();
    options.truncate(40);
    options.resize(options.len().next_multiple_of(4), 0);
    let header_len = 20usize.saturating_add(options.len());
    let ihl = (header_len / 4) as u8;
    let total = len16(header_len.saturating_add(payload.len()));
    let mut flags_offset = header.fragment_offset & 0x1fff;
    if header.dont_fragment {
        flags_offset |= 0x4000;
    }
    if header.more_fragments {
        flags_offset |= 0x2000;
    }
    let mut packet = Vec::with_capacity(header_len.saturating_add(payload.len()));
    packet.push(0x40 | ihl);
    packet.push(header.tos);
    packet.extend_from_slice(&total.to_be_bytes());
    packet.extend_from_slice(&header.id.to_be_bytes());
    packet.extend_from_slice(&flags_offset.to_be_bytes());
    packet.push(header.ttl);
    packet.push(header.protocol);
    packet.extend_from_slice(&[0, 0]);
    packet.extend_from_slice(&header.src);
    packet.extend_from_slice(&header.dst);
    packet.extend_from_slice(&options);
    set_ipv4_checksum(&mut packet);
    packet.extend_from_slice(payload);
    packet
}

/// Recomputes the header checksum of the IPv4 header at the start of `packet`, over as much
/// of the header as its IHL claims and the buffer holds.
pub fn set_ipv4_checksum(packet: &mut [u8]) {
    let Some(&first) = packet.first() else { return };
    let header_len = usize::from(first & 0x0f).saturating_mul(4).min(packet.len());
    if header_len < 12 {
        return;
    }
    if let Some(field) = packet.get_mut(10..12) {
        field.copy_from_slice(&[0, 0]);
    }
    let checksum = packet.get(..header_len).map(internet_checksum).unwrap_or(0);
    if let Some(field) = packet.get_mut(10..12) {
        field.copy_from_slice(&checksum.to_be_bytes());
    }
}

/// An IPv6 packet; `payload` starts with the header named by `next_header` (possibly an
/// extension header).
pub fn ipv6(
    src: [u8; 16],
    dst: [u8; 16],
    next_header: u8,
    hop_limit: u8,
    flow_label: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut packet = Vec::with_capacity(40usize.saturating_add(payload.len()));
    let first_word = (6u32 << 28) | (flow_label & 0x000f_ffff);
    packet.extend_from_slice(&first_word.to_be_bytes());
    packet.extend_from_slice(&len16(payload.len()).to_be_bytes());
    packet.push(next_header);
    packet.push(hop_limit);
    packet.extend_from_slice(&src);
    packet.extend_from_slice(&dst);
    packet.extend_from_slice(payload);
    packet
}

/// A hop-by-hop, routing or destination-options extension header: next header, length in
/// 8-byte units beyond the first 8, then `body` padded with PadN/Pad1 to a multiple of 8.
pub fn ipv6_extension(next_header: u8, body: &[u8]) -> Vec<u8> {
    let mut header = vec![next_header, 0];
    header.extend_from_slice(body);
    let pad = header.len().next_multiple_of(8) - header.len();
    match pad {
        0 => {}
        1 => header.push(0),
        n => {
            header.push(1);
            header.push((n - 2) as u8);
            header.extend(std::iter::repeat_n(0u8, n - 2));
        }
    }
    let units_beyond_first = u8::try_from((header.len() / 8).saturating_sub(1)).unwrap_or(u8::MAX);
    if let Some(len_field) = header.get_mut(1) {
        *len_field = units_beyond_first;
    }
    header
}

/// The 8-byte IPv6 fragment header (`offset` in 8-byte units).
pub fn ipv6_fragment(next_header: u8, offset: u16, more: bool, id: u32) -> Vec<u8> {
    let mut field = (offset & 0x1fff) << 3;
    if more {
        field |= 1;
    }
    let mut header = vec![next_header, 0];
    header.extend_from_slice(&field.to_be_bytes());
    header.extend_from_slice(&id.to_be_bytes());
    header
}

/// TCP flag bits.
pub mod tcp_flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// URG.
    pub const URG: u8 = 0x20;
    /// ECE.
    pub const ECE: u8 = 0x40;
    /// CWR.
    pub const CWR: u8 = 0x80;
}

/// The fields of a TCP header the generator varies.
#[derive(Debug, Clone)]
pub struct TcpHeader {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// Flag bits (see [`tcp_flags`]).
    pub flags: u8,
    /// Receive window.
    pub window: u16,
    /// Options; padded with end-of-options to a multiple of 4 and cut at 40 bytes.
    pub options: Vec<u8>,
}

/// A TCP segment (checksum left zero: the corpus does not need valid transport checksums).
pub fn tcp(header: &TcpHeader, payload: &[u8]) -> Vec<u8> {
    let mut options = header.options.clone();
    options.truncate(40);
    options.resize(options.len().next_multiple_of(4), 0);
    let data_offset = ((20usize.saturating_add(options.len())) / 4) as u8;
    let mut segment =
        Vec::with_capacity(20usize.saturating_add(options.len()).saturating_add(payload.len()));
    segment.extend_from_slice(&header.src_port.to_be_bytes());
    segment.extend_from_slice(&header.dst_port.to_be_bytes());
    segment.extend_from_slice(&header.seq.to_be_bytes());
    segment.extend_from_slice(&header.ack.to_be_bytes());
    segment.push(data_offset << 4);
    segment.push(header.flags);
    segment.extend_from_slice(&header.window.to_be_bytes());
    segment.extend_from_slice(&[0, 0, 0, 0]);
    segment.extend_from_slice(&options);
    segment.extend_from_slice(payload);
    segment
}

/// A UDP datagram (checksum zero, which IPv4 reads as "not computed").
pub fn udp(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut datagram = Vec::with_capacity(8usize.saturating_add(payload.len()));
    datagram.extend_from_slice(&src_port.to_be_bytes());
    datagram.extend_from_slice(&dst_port.to_be_bytes());
    datagram.extend_from_slice(&len16(payload.len().saturating_add(8)).to_be_bytes());
    datagram.extend_from_slice(&[0, 0]);
    datagram.extend_from_slice(payload);
    datagram
}

/// An ICMP (v4) message with its checksum: type, code, checksum, the 4-byte rest of header,
/// then the body.
pub fn icmp(kind: u8, code: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
    let mut message = vec![kind, code, 0, 0];
    message.extend_from_slice(&rest);
    message.extend_from_slice(body);
    let checksum = internet_checksum(&message);
    if let Some(field) = message.get_mut(2..4) {
        field.copy_from_slice(&checksum.to_be_bytes());
    }
    message
}

/// An ICMPv6 message: type, code, checksum (zero: it needs the pseudo-header, and the corpus
/// does not need valid transport checksums), then the body.
pub fn icmpv6(kind: u8, code: u8, body: &[u8]) -> Vec<u8> {
    let mut message = vec![kind, code, 0, 0];
    message.extend_from_slice(body);
    message
}

/// An ARP or RARP packet for Ethernet/IPv4.
pub fn arp(
    operation: u16,
    sender_mac: Mac,
    sender_ip: [u8; 4],
    target_mac: Mac,
    target_ip: [u8; 4],
) -> Vec<u8> {
    let mut packet = Vec::with_capacity(28);
    packet.extend_from_slice(&1u16.to_be_bytes());
    packet.extend_from_slice(&ethertype::IP.to_be_bytes());
    packet.push(6);
    packet.push(4);
    packet.extend_from_slice(&operation.to_be_bytes());
    packet.extend_from_slice(&sender_mac);
    packet.extend_from_slice(&sender_ip);
    packet.extend_from_slice(&target_mac);
    packet.extend_from_slice(&target_ip);
    packet
}

/// One MPLS label stack entry before the bottom-of-stack bit is decided.
#[derive(Debug, Clone, Copy)]
pub struct MplsLabel {
    /// The 20-bit label.
    pub label: u32,
    /// Traffic class (3 bits).
    pub traffic_class: u8,
    /// Time to live.
    pub ttl: u8,
}

/// An MPLS label stack (outermost first, the last entry marked bottom of stack) and payload.
pub fn mpls(labels: &[MplsLabel], payload: &[u8]) -> Vec<u8> {
    let mut packet =
        Vec::with_capacity(labels.len().saturating_mul(4).saturating_add(payload.len()));
    let last = labels.len().saturating_sub(1);
    for (index, entry) in labels.iter().enumerate() {
        let bottom = u32::from(index == last);
        let word = ((entry.label & 0x000f_ffff) << 12)
            | (u32::from(entry.traffic_class & 7) << 9)
            | (bottom << 8)
            | u32::from(entry.ttl);
        packet.extend_from_slice(&word.to_be_bytes());
    }
    packet.extend_from_slice(payload);
    packet
}

/// A PPPoE header (version 1, type 1) with its length field, then the payload.
pub fn pppoe(code: u8, session_id: u16, payload: &[u8]) -> Vec<u8> {
    let mut packet = vec![0x11, code];
    packet.extend_from_slice(&session_id.to_be_bytes());
    packet.extend_from_slice(&len16(payload.len()).to_be_bytes());
    packet.extend_from_slice(payload);
    packet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_a_known_ipv4_header_verifies_to_zero() {
        let header = Ipv4Header {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            protocol: ipproto::UDP,
            ttl: 64,
            tos: 0,
            id: 0x1c46,
            dont_fragment: true,
            more_fragments: false,
            fragment_offset: 0,
            options: vec![1, 1, 1],
        };
        let packet = ipv4(&header, &[0xaa; 5]);
        assert_eq!(packet.first(), Some(&0x46), "3 option bytes pad to one word: IHL 6");
        assert_eq!(packet.get(2..4), Some(&[0, 29][..]));
        assert_eq!(internet_checksum(packet.get(..24).unwrap_or(&[])), 0);
        assert_ne!(packet.get(10..12), Some(&[0, 0][..]));
    }

    #[test]
    fn extension_headers_are_whole_multiples_of_eight_bytes() {
        for body_len in 0..30 {
            let header = ipv6_extension(ipproto::TCP, &vec![0x55; body_len]);
            assert_eq!(header.len().next_multiple_of(8), header.len(), "body {body_len}");
            assert_eq!(usize::from(header.get(1).copied().unwrap_or(0)) * 8 + 8, header.len());
        }
    }

    #[test]
    fn mpls_marks_only_the_last_label_bottom_of_stack() {
        let label = MplsLabel { label: 16, traffic_class: 0, ttl: 64 };
        let stack = mpls(&[label, label], &[]);
        assert_eq!(stack, vec![0, 1, 0, 64, 0, 1, 1, 64]);
    }

    #[test]
    fn udp_length_counts_its_header() {
        assert_eq!(udp(53, 1000, &[1, 2, 3]).get(4..6), Some(&[0, 11][..]));
    }
}
