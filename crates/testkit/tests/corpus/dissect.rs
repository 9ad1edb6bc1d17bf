//! A small, independent header walker for the corpus tests.
//!
//! It reads frames the way a receiver would (from the bytes, never from the generator's
//! descriptions) and names what it finds, so the variety test checks what was actually
//! built. It also records where each IPv4/IPv6/UDP header sits so that length and checksum
//! consistency can be asserted. Every read is bounds-checked: truncated records and garbage
//! simply stop the walk.

use std::collections::BTreeSet;

/// What a walk over one frame found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Category names, e.g. "vlan-1", "ipv4-options", "tcp-port-443".
    pub tags: BTreeSet<String>,
    /// (offset, header length, bytes from the header to the end of the frame) of each
    /// complete IPv4 header.
    pub ipv4_headers: Vec<(usize, usize, usize)>,
    /// Length problems: a length field claiming more than the frame holds.
    pub length_errors: Vec<String>,
}

impl Findings {
    fn tag(&mut self, name: impl Into<String>) {
        self.tags.insert(name.into());
    }
}

fn u8_at(data: &[u8], at: usize) -> Option<u8> {
    data.get(at).copied()
}

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    let bytes = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([bytes[0], bytes[1]]))
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Walks an Ethernet frame.
pub fn dissect(frame: &[u8]) -> Findings {
    let mut findings = Findings::default();
    ethernet(frame, &mut findings);
    findings
}

fn ethernet(frame: &[u8], out: &mut Findings) -> Option<()> {
    let dst = frame.get(..6)?;
    if dst.iter().all(|&byte| byte == 0xff) {
        out.tag("broadcast-mac");
    } else if dst[0] & 1 == 1 {
        out.tag("multicast-mac");
    }
    let mut at = 12;
    let mut tpids = Vec::new();
    let mut kind = u16_at(frame, at)?;
    while matches!(kind, 0x8100 | 0x88a8 | 0x9100) {
        tpids.push(kind);
        u16_at(frame, at + 2)?;
        at += 4;
        kind = u16_at(frame, at)?;
    }
    match tpids.as_slice() {
        [] => out.tag("eth-no-vlan"),
        [0x8100] => out.tag("vlan-1"),
        [0x88a8, 0x8100] => out.tag("qinq-88a8-8100"),
        _ => out.tag("vlan-other-stack"),
    }
    at += 2;
    if kind < 1536 {
        out.tag("llc-8023");
        return llc(frame, at, usize::from(kind), out);
    }
    network(frame, at, kind, out)
}

fn llc(frame: &[u8], at: usize, length: usize, out: &mut Findings) -> Option<()> {
    if frame.len() < at + length {
        out.length_errors.push(format!("802.3 length {length} exceeds frame"));
    }
    let dsap = u8_at(frame, at)?;
    let ssap = u8_at(frame, at + 1)?;
    match (dsap, ssap) {
        (0x42, 0x42) => {
            if u16_at(frame, at + 3)? == 0 {
                out.tag("llc-stp");
            }
            Some(())
        }
        (0xaa, 0xaa) => {
            out.tag("llc-snap");
            let oui = frame.get(at + 3..at + 6)?;
            let kind = u16_at(frame, at + 6)?;
            if oui == [0, 0, 0] {
                network(frame, at + 8, kind, out)
            } else {
                Some(())
            }
        }
        _ => {
            out.tag("llc-other");
            Some(())
        }
    }
}

fn network(frame: &[u8], at: usize, kind: u16, out: &mut Findings) -> Option<()> {
    match kind {
        0x0800 => ipv4(frame, at, out),
        0x86dd => ipv6(frame, at, out),
        0x0806 | 0x8035 => arp(frame, at, kind, out),
        0x8847 => mpls(frame, at, out),
        0x8863 => {
            if u8_at(frame, at)? == 0x11 {
                out.tag("pppoe-discovery");
            }
            Some(())
        }
        0x8864 => {
            if u8_at(frame, at)? != 0x11 || u8_at(frame, at + 1)? != 0 {
                return Some(());
            }
            out.tag("pppoe-session");
            let length = usize::from(u16_at(frame, at + 4)?);
            if frame.len() < at + 6 + length {
                out.length_errors.push(format!("PPPoE length {length} exceeds frame"));
            }
            match u16_at(frame, at + 6)? {
                0x0021 => ipv4(frame, at + 8, out),
                0x0057 => ipv6(frame, at + 8, out),
                _ => Some(()),
            }
        }
        _ => {
            out.tag("other-ethertype");
            Some(())
        }
    }
}

fn arp(frame: &[u8], at: usize, kind: u16, out: &mut Findings) -> Option<()> {
    let operation = u16_at(frame, at + 6)?;
    frame.get(at..at + 28)?;
    match (kind, operation) {
        (0x0806, 1) => out.tag("arp-request"),
        (0x0806, 2) => out.tag("arp-reply"),
        (0x8035, 3 | 4) => out.tag("rarp"),
        _ => out.tag("arp-other"),
    }
    Some(())
}

fn mpls(frame: &[u8], mut at: usize, out: &mut Findings) -> Option<()> {
    let mut labels = 0;
    loop {
        let entry = u32_at(frame, at)?;
        labels += 1;
        at += 4;
        if entry & 0x100 != 0 {
            break;
        }
    }
    out.tag(format!("mpls-{labels}"));
    match u8_at(frame, at)? >> 4 {
        4 => ipv4(frame, at, out),
        6 => ipv6(frame, at, out),
        _ => Some(()),
    }
}

fn ipv4(frame: &[u8], at: usize, out: &mut Findings) -> Option<()> {
    let first = u8_at(frame, at)?;
    let header_len = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || header_len < 20 {
        return Some(());
    }
    frame.get(at..at + header_len)?;
    out.tag("ipv4");
    out.ipv4_headers.push((at, header_len, frame.len() - at));
    if header_len > 20 {
        out.tag("ipv4-options");
        out.tag(format!("ipv4-ihl-{}", header_len / 4));
    }
    let total = usize::from(u16_at(frame, at + 2)?);
    if total < header_len || frame.len() < at + total {
        out.length_errors.push(format!("IPv4 total length {total} vs {} bytes", frame.len() - at));
    }
    let flags_offset = u16_at(frame, at + 6)?;
    let offset = flags_offset & 0x1fff;
    let more = flags_offset & 0x2000 != 0;
    if offset > 0 {
        out.tag("ipv4-later-fragment");
        return Some(());
    }
    if more {
        out.tag("ipv4-first-fragment");
    }
    let end = (at + total).min(frame.len());
    transport(frame.get(..end)?, at + header_len, u8_at(frame, at + 9)?, 4, out)
}

fn ipv6(frame: &[u8], at: usize, out: &mut Findings) -> Option<()> {
    if u8_at(frame, at)? >> 4 != 6 {
        return Some(());
    }
    frame.get(at..at + 40)?;
    out.tag("ipv6");
    let payload_len = usize::from(u16_at(frame, at + 4)?);
    if frame.len() < at + 40 + payload_len {
        out.length_errors
            .push(format!("IPv6 payload length {payload_len} vs {} bytes", frame.len() - at - 40));
    }
    let mut next = u8_at(frame, at + 6)?;
    let mut cursor = at + 40;
    let mut extensions = 0;
    loop {
        match next {
            0 | 43 | 60 => {
                out.tag(match next {
                    0 => "ipv6-hop-by-hop",
                    43 => "ipv6-routing",
                    _ => "ipv6-destination-options",
                });
                extensions += 1;
                let len = (usize::from(u8_at(frame, cursor + 1)?) + 1) * 8;
                next = u8_at(frame, cursor)?;
                cursor += len;
            }
            44 => {
                out.tag("ipv6-fragment");
                extensions += 1;
                let field = u16_at(frame, cursor + 2)?;
                next = u8_at(frame, cursor)?;
                cursor += 8;
                if field >> 3 != 0 {
                    out.tag("ipv6-later-fragment");
                    return Some(());
                }
            }
            _ => break,
        }
    }
    if extensions >= 2 {
        out.tag("ipv6-extension-chain");
    }
    let end = (at + 40 + payload_len).min(frame.len());
    transport(frame.get(..end)?, cursor, next, 6, out)
}

fn port_tags(out: &mut Findings, protocol: &str, src: u16, dst: u16) {
    for port in [src, dst] {
        if matches!(port, 0 | 22 | 53 | 67 | 68 | 80 | 443 | 4789 | 6081 | 65535) {
            out.tag(format!("{protocol}-port-{port}"));
        }
    }
}

fn transport(
    packet: &[u8],
    at: usize,
    protocol: u8,
    ip_version: u8,
    out: &mut Findings,
) -> Option<()> {
    match (protocol, ip_version) {
        (6, _) => {
            let flags = u8_at(packet, at + 13)?;
            let data_offset = usize::from(u8_at(packet, at + 12)? >> 4);
            packet.get(at..at + 20)?;
            out.tag("tcp");
            port_tags(out, "tcp", u16_at(packet, at)?, u16_at(packet, at + 2)?);
            if data_offset > 5 && packet.len() >= at + data_offset * 4 {
                out.tag("tcp-options");
            }
            for (bit, name) in [
                (0x02, "syn"),
                (0x10, "ack"),
                (0x01, "fin"),
                (0x04, "rst"),
                (0x08, "psh"),
                (0x20, "urg"),
            ] {
                if flags & bit != 0 {
                    out.tag(format!("tcp-flag-{name}"));
                }
            }
            if flags == 0x12 {
                out.tag("tcp-syn-ack");
            }
            Some(())
        }
        (17, _) => {
            let src = u16_at(packet, at)?;
            let dst = u16_at(packet, at + 2)?;
            let length = usize::from(u16_at(packet, at + 4)?);
            out.tag("udp");
            port_tags(out, "udp", src, dst);
            if length < 8 || packet.len() < at + length {
                out.length_errors
                    .push(format!("UDP length {length} vs {} bytes", packet.len() - at));
            }
            let payload = at + 8;
            if dst == 4789 && u8_at(packet, payload)? == 0x08 {
                tunnelled_ethernet(packet.get(payload + 8..)?, "vxlan", out);
            }
            if dst == 6081 {
                let option_len = usize::from(u8_at(packet, payload)? & 0x3f) * 4;
                if u16_at(packet, payload + 2)? == 0x6558 {
                    tunnelled_ethernet(packet.get(payload + 8 + option_len..)?, "geneve", out);
                }
            }
            Some(())
        }
        (1, 4) => {
            match (u8_at(packet, at)?, u8_at(packet, at + 1)?) {
                (8 | 0, 0) => out.tag("icmp-echo"),
                (3, _) => out.tag("icmp-unreachable"),
                _ => out.tag("icmp-other"),
            }
            Some(())
        }
        (58, 6) => {
            match u8_at(packet, at)? {
                128 | 129 => out.tag("icmpv6-echo"),
                135 => {
                    packet.get(at + 8..at + 24)?;
                    out.tag("icmpv6-neighbor-solicitation");
                }
                _ => out.tag("icmpv6-other"),
            }
            Some(())
        }
        (132, _) => {
            packet.get(at..at + 16)?;
            out.tag("sctp");
            Some(())
        }
        (2, 4) => {
            if matches!(u8_at(packet, at)?, 0x11 | 0x16 | 0x17 | 0x22) {
                out.tag("igmp");
            }
            Some(())
        }
        (47, _) => {
            let protocol_type = u16_at(packet, at + 2)?;
            out.tag("gre");
            let flags = u16_at(packet, at)?;
            let mut inner = at + 4;
            if flags & 0x8000 != 0 {
                inner += 4;
            }
            if flags & 0x2000 != 0 {
                inner += 4;
            }
            match protocol_type {
                0x0800 => ipv4(packet, inner, out),
                0x86dd => ipv6(packet, inner, out),
                0x6558 => {
                    tunnelled_ethernet(packet.get(inner..)?, "gre", out);
                    Some(())
                }
                _ => Some(()),
            }
        }
        (50, _) => {
            u32_at(packet, at + 4)?;
            out.tag("esp");
            Some(())
        }
        (51, _) => {
            let next = u8_at(packet, at)?;
            let len = (usize::from(u8_at(packet, at + 1)?) + 2) * 4;
            out.tag("ah");
            transport(packet, at + len, next, ip_version, out)
        }
        (103, _) => {
            if u8_at(packet, at)? >> 4 == 2 {
                out.tag("pim");
            }
            Some(())
        }
        _ => Some(()),
    }
}

/// Walks a frame carried in a tunnel, noting that the tunnel held a real Ethernet frame.
fn tunnelled_ethernet(inner: &[u8], tunnel: &str, out: &mut Findings) {
    let inside = dissect(inner);
    let parsed = ["ipv4", "ipv6", "arp-request", "arp-reply", "rarp", "other-ethertype"]
        .iter()
        .any(|tag| inside.tags.contains(*tag));
    if parsed {
        out.tag(format!("{tunnel}-inner-ethernet"));
    }
    out.length_errors.extend(inside.length_errors);
}
