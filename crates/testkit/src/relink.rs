//! Re-framing Ethernet test packets for the other link types filters compile for: Linux
//! cooked captures (v1 and v2), raw IP, and BSD loopback (DLT_NULL and DLT_LOOP).
//!
//! The corpora are Ethernet; a filter test for another link type needs the same traffic
//! under that link type's header. [`relink`] replaces the 14-byte Ethernet header by the
//! other header, filled in the way the capturing system would (the protocol field from the
//! EtherType, 802.2 and raw 802.3 frames marked as Linux marks them, the address family of
//! IP packets), and keeps the rest: a record cut short stays cut short by the same number of
//! bytes. Fields a real capture varies (packet direction, interface, the IPv6 address family
//! a BSD system uses) vary here too, derived from the packet's bytes so the result is the
//! same on every run.

use weir_packet::{af, ethertype, sll, LinkType};

use crate::Packet;

/// The link types [`relink`] frames itself (the rest it hands to [`reframe`](crate::reframe)).
pub const LINK_TYPES: [LinkType; 8] = [
    LinkType::Ethernet,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Raw,
    LinkType::Null,
    LinkType::Loop,
    LinkType::Ipv4,
    LinkType::Ipv6,
];

/// Length of the Ethernet header being replaced.
const ETHERNET_HEADER: usize = LinkType::Ethernet.header_len() as usize;

/// Address families as BSD loopback headers carry them: IPv6 as Linux, NetBSD/OpenBSD,
/// FreeBSD and Darwin number it, and a few that are neither.
const AF_INET6_VALUES: [u32; 4] =
    [af::INET6_LINUX, af::INET6_NETBSD, af::INET6_FREEBSD, af::INET6_DARWIN];
const AF_OTHER_VALUES: [u32; 3] = [0, 7, 17];

/// `packet` (an Ethernet frame) re-framed for `link`, or `None` when `link` is not one of
/// [`LINK_TYPES`].
pub fn relink(packet: &Packet, link: LinkType) -> Option<Packet> {
    let data = &packet.data;
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let ether_type = u16::from_be_bytes([byte(12), byte(13)]);
    let hash = fnv1a(data, packet.wire_len);
    let header: Vec<u8> = match link {
        LinkType::Ethernet => return Some(packet.clone()),
        LinkType::LinuxSll => {
            let mut h = Vec::with_capacity(16);
            h.extend_from_slice(&u16::from(packet_type(data, hash)).to_be_bytes());
            h.extend_from_slice(&sll::ARPHRD_ETHER.to_be_bytes());
            h.extend_from_slice(&6u16.to_be_bytes());
            h.extend_from_slice(&source_address(data));
            h.extend_from_slice(&sll_protocol(data, ether_type).to_be_bytes());
            h
        }
        LinkType::LinuxSll2 => {
            let mut h = Vec::with_capacity(20);
            h.extend_from_slice(&sll_protocol(data, ether_type).to_be_bytes());
            h.extend_from_slice(&[0, 0]);
            let ifindex = 1 + (hash >> 8) % 4;
            h.extend_from_slice(&u32::try_from(ifindex).unwrap_or(1).to_be_bytes());
            h.extend_from_slice(&sll::ARPHRD_ETHER.to_be_bytes());
            h.push(packet_type(data, hash));
            h.push(6);
            h.extend_from_slice(&source_address(data));
            h
        }
        LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => Vec::new(),
        LinkType::Null | LinkType::Loop => {
            let family = address_family(ether_type, hash);
            // DLT_NULL is in the capturing host's order: mostly little-endian hosts, a
            // few big-endian ones.
            let little = link == LinkType::Null && !(hash >> 20).is_multiple_of(8);
            if little {
                family.to_le_bytes().to_vec()
            } else {
                family.to_be_bytes().to_vec()
            }
        }
        // Serial and wireless framings: their own module.
        _ => return crate::reframe::reframe(packet, link),
    };
    let mut out = header.clone();
    if data.len() >= ETHERNET_HEADER {
        out.extend_from_slice(data.get(ETHERNET_HEADER..).unwrap_or(&[]));
    } else {
        // Cut inside the Ethernet header: cut inside the new header as well.
        out.truncate(data.len());
    }
    let wire = usize::try_from(packet.wire_len)
        .unwrap_or(usize::MAX)
        .saturating_sub(ETHERNET_HEADER)
        .saturating_add(header.len())
        .max(out.len());
    Some(Packet {
        wire_len: u32::try_from(wire).unwrap_or(u32::MAX),
        data: out,
        ts_sec: packet.ts_sec,
        ts_usec: packet.ts_usec,
        description: format!("[dlt {}] {}", link.dlt(), packet.description),
    })
}

/// FNV-1a over the bytes and the wire length: a stable per-packet choice.
fn fnv1a(data: &[u8], wire_len: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data.iter().chain(wire_len.to_be_bytes().iter()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The SLL packet type: from the destination MAC for broadcast and multicast, otherwise
/// to this host, sent by it, or seen in promiscuous mode.
fn packet_type(data: &[u8], hash: u64) -> u8 {
    let dst = data.get(..6).unwrap_or(&[]);
    if dst.len() == 6 && dst.iter().all(|&b| b == 0xff) {
        sll::BROADCAST
    } else if dst.first().is_some_and(|b| b & 1 == 1) {
        sll::MULTICAST
    } else {
        match hash % 20 {
            0..=9 => sll::HOST,
            10..=16 => sll::OUTGOING,
            _ => sll::OTHERHOST,
        }
    }
}

/// The source MAC padded to the 8-byte address field.
fn source_address(data: &[u8]) -> [u8; 8] {
    let mut addr = [0u8; 8];
    for (i, slot) in addr.iter_mut().take(6).enumerate() {
        *slot = data.get(6 + i).copied().unwrap_or(0);
    }
    addr
}

/// The SLL protocol field: the EtherType, or for an 802.3 frame whether an 802.2 header
/// follows (Novell's raw 802.3 starts with 0xffff instead).
fn sll_protocol(data: &[u8], ether_type: u16) -> u16 {
    if ether_type > ethertype::ETHERMTU {
        return ether_type;
    }
    let raw = data.get(ETHERNET_HEADER..ETHERNET_HEADER + 2) == Some(&[0xff, 0xff][..]);
    if raw {
        sll::P_802_3
    } else {
        sll::P_802_2
    }
}

fn address_family(ether_type: u16, hash: u64) -> u32 {
    let pick = |values: &[u32]| {
        let i = usize::try_from((hash >> 12) % values.len() as u64).unwrap_or(0);
        values.get(i).copied().unwrap_or(0)
    };
    match ether_type {
        ethertype::IP => af::INET,
        ethertype::IPV6 => pick(&AF_INET6_VALUES),
        _ => pick(&AF_OTHER_VALUES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(data: Vec<u8>, wire_len: u32) -> Packet {
        Packet { data, wire_len, ts_sec: 0, ts_usec: 0, description: String::new() }
    }

    fn ipv4_frame() -> Vec<u8> {
        let mut f = vec![0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0x00]);
        f
    }

    #[test]
    fn sll_carries_type_source_and_payload() {
        let p = relink(&frame(ipv4_frame(), 16), LinkType::LinuxSll)
            .unwrap_or_else(|| frame(vec![], 0));
        assert_eq!(p.data.len(), 18);
        assert_eq!(p.data.get(14..16), Some(&[0x08, 0x00][..]));
        assert_eq!(p.data.get(6..12), Some(&[0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb][..]));
        assert_eq!(p.data.get(16..), Some(&[0x45, 0x00][..]));
        assert_eq!(p.wire_len, 18);
    }

    #[test]
    fn sll2_puts_the_protocol_first() {
        let p = relink(&frame(ipv4_frame(), 100), LinkType::LinuxSll2)
            .unwrap_or_else(|| frame(vec![], 0));
        assert_eq!(p.data.get(..2), Some(&[0x08, 0x00][..]));
        assert_eq!(p.data.get(20..), Some(&[0x45, 0x00][..]));
        assert_eq!(p.wire_len, 106, "the uncaptured tail is kept");
    }

    #[test]
    fn raw_strips_and_loop_is_big_endian() {
        let raw =
            relink(&frame(ipv4_frame(), 16), LinkType::Raw).unwrap_or_else(|| frame(vec![1], 0));
        assert_eq!(raw.data, vec![0x45, 0x00]);
        let lo =
            relink(&frame(ipv4_frame(), 16), LinkType::Loop).unwrap_or_else(|| frame(vec![], 0));
        assert_eq!(lo.data.get(..4), Some(&[0, 0, 0, 2][..]));
    }

    #[test]
    fn llc_and_raw_8023_frames_get_linux_protocols() {
        let mut llc = ipv4_frame();
        llc.truncate(12);
        llc.extend_from_slice(&[0x00, 0x10, 0x42, 0x42, 0x03]);
        let p =
            relink(&frame(llc.clone(), 17), LinkType::LinuxSll).unwrap_or_else(|| frame(vec![], 0));
        assert_eq!(p.data.get(14..16), Some(&[0x00, 0x04][..]));
        llc.truncate(14);
        llc.extend_from_slice(&[0xff, 0xff]);
        let p = relink(&frame(llc, 16), LinkType::LinuxSll).unwrap_or_else(|| frame(vec![], 0));
        assert_eq!(p.data.get(14..16), Some(&[0x00, 0x01][..]));
    }

    #[test]
    fn records_cut_inside_the_ethernet_header_stay_cut() {
        let p = relink(&frame(vec![0xff; 5], 60), LinkType::LinuxSll)
            .unwrap_or_else(|| frame(vec![], 0));
        assert_eq!(p.data.len(), 5);
        assert_eq!(p.wire_len, 62);
        // PPP's 4-byte header, cut in proportion: 5 of 14 bytes keep 1 of 4.
        let ppp = relink(&frame(vec![0xff; 5], 60), LinkType::Ppp).map(|p| (p.data, p.wire_len));
        assert_eq!(ppp, Some((vec![0xff], 50)));
        assert!(relink(&frame(vec![0xff; 5], 60), LinkType::LinuxSll2).is_some());
    }
}
