//! One line per packet, as `tcpdump -q -n` prints it (`weir filter` prints with it).
//!
//! People compare weir's output with tcpdump's line by line, so for the packets most
//! captures are made of the line is tcpdump's, byte for byte: Ethernet (with any 802.1Q /
//! QinQ tags, which tcpdump does not show without `-e`), Linux cooked v1, raw IP and BSD
//! loopback framing around IPv4 and IPv6 (no extension headers) carrying TCP, UDP, ICMP and
//! ICMPv6, and ARP/RARP. That includes tcpdump's own way of reporting damage: ` [|tcp]`
//! when the capture ends inside a header, `truncated-ip - N bytes missing!`, bad header
//! lengths. Beyond those, the files of this directory print tcpdump's quiet lines for
//! PPPoE and PPP, MPLS, IPv6 extension headers, ESP, AH, GRE, PIM, IGMP, VRRP, OSPF, SCTP,
//! 802.3 LLC/SNAP, spanning tree, IPX, LLDP, CDP, the loopback protocol, MACsec and the
//! EtherTypes tcpdump only names
//! (tools/cli/tests/lines.rs counts what still differs). Protocols not decoded get a plain
//! line of their own that names what they are (`ip-proto-N LEN`).
//!
//! The other link types weir filters are printed as tcpdump 4.99 prints them (`links`):
//! most show only their payload's line (PPP and its HDLC, pppd, PPPoE and BSD/OS forms,
//! Cisco HDLC, SLIP, Frame Relay, FDDI, Token Ring, RFC 1483 and CLIP ATM, IP over Fibre
//! Channel and InfiniBand, ARCnet, LocalTalk, netANALYZER, NFLOG, ipnet, 802.11 data frames behind
//! radiotap, AVS, Prism and PPI headers), some a prefix of their own (switch tags, enc,
//! radiotap fields, SunATM's LANE ID, pflog for packets it cannot decode, Juniper's
//! header checks), and the link types tcpdump has no printer for `UNSUPPORTED` and a hex
//! and ASCII dump. What tcpdump decodes there and this printer does not (ISO
//! protocols, SNMP, AppleTalk above DDP) still differs, counted per link type by the lines
//! test.
//!
//! Two deliberate differences: timestamps are UTC (tcpdump uses the local time zone; the
//! two agree under `TZ=UTC`), and Linux cooked v2 shows the interface index, not a name
//! looked up on the machine that happens to read the file.
//!
//! The printer never trusts the packet: every read is bounds-checked against the captured
//! bytes (cut further to the length the IP header claims, as tcpdump does), and running out
//! is an `Err(protocol)` that becomes the ` [|protocol]` marker.

use std::fmt::Write as _;

/// A printer ran out of captured bytes inside `protocol`'s header.
type Step = Result<(), &'static str>;

use crate::link::LinkType;
use crate::{af, ethertype, ipproto, sll};

mod discovery;
mod fr;
mod ip6ext;
mod ipmore;
mod juniper;
mod links;
mod llc;
mod tunnel;
mod wlan_mgmt;

/// The line for one packet (no trailing newline). `linktype` is the record's link type as
/// the capture stores it (a LINKTYPE_ or DLT_ number, see [`LinkType::from_number`]).
pub fn line(linktype: u32, ts_sec: u64, ts_nsec: u32, data: &[u8], wire_len: u32) -> String {
    if data.is_empty() {
        // tcpdump reports an empty record without a timestamp.
        let wire = if wire_len == 0 { ", len==0" } else { "" };
        return format!("[Invalid header: caplen==0{wire}]");
    }
    let mut out = String::with_capacity(96);
    let day = ts_sec % 86_400;
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}.{:06} ",
        day / 3600,
        day / 60 % 60,
        day % 60,
        ts_nsec / 1000
    );
    let mut printer = Printer { out };
    if let Err(protocol) = printer.link(linktype, data, wire_len) {
        let _ = write!(printer.out, " [|{protocol}]");
    }
    printer.out
}

/// Bounds-checked big-endian reads; a miss is "truncated in `proto`".
#[derive(Clone, Copy)]
struct Bytes<'a> {
    data: &'a [u8],
    proto: &'static str,
}

impl<'a> Bytes<'a> {
    fn new(data: &'a [u8], proto: &'static str) -> Bytes<'a> {
        Bytes { data, proto }
    }

    fn len(&self) -> usize {
        self.data.len()
    }

    fn has(&self, end: usize) -> bool {
        end <= self.data.len()
    }

    fn u8(&self, at: usize) -> Result<u8, &'static str> {
        self.data.get(at).copied().ok_or(self.proto)
    }

    fn be16(&self, at: usize) -> Result<u16, &'static str> {
        let b = self.slice(at, 2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn be32(&self, at: usize) -> Result<u32, &'static str> {
        let b = self.slice(at, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn slice(&self, at: usize, len: usize) -> Result<&'a [u8], &'static str> {
        at.checked_add(len).and_then(|end| self.data.get(at..end)).ok_or(self.proto)
    }

    /// The bytes from `at` on (empty past the end), reporting misses as `proto`.
    fn from(&self, at: usize, proto: &'static str) -> Bytes<'a> {
        Bytes { data: self.data.get(at..).unwrap_or(&[]), proto }
    }

    /// At most the first `len` bytes (the snapshot cut at a header's length field).
    fn cut(&self, len: usize) -> Bytes<'a> {
        Bytes { data: self.data.get(..len).unwrap_or(self.data), proto: self.proto }
    }

    fn ipv4(&self, at: usize) -> Result<String, &'static str> {
        let b = self.slice(at, 4)?;
        Ok(format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]))
    }

    fn ipv6(&self, at: usize) -> Result<String, &'static str> {
        let b = self.slice(at, 16)?;
        let mut words = [0u16; 8];
        for (i, word) in words.iter_mut().enumerate() {
            *word = u16::from_be_bytes([b[2 * i], b[2 * i + 1]]);
        }
        Ok(ipv6_text(&words, b))
    }

    fn mac(&self, at: usize, len: usize) -> Result<String, &'static str> {
        let b = self.slice(at, len)?;
        Ok(b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":"))
    }
}

/// IPv6 text the way tcpdump's address printer writes it: the longest run of two or more
/// zero groups (the first, on a tie) becomes `::`, and an address whose first 96 bits are
/// zero (or `::ffff:0:0/96`) ends in dotted IPv4.
fn ipv6_text(words: &[u16; 8], bytes: &[u8]) -> String {
    let (mut best, mut best_len) = (None, 0usize);
    let mut i = 0;
    while i < 8 {
        if words[i] == 0 {
            let start = i;
            while i < 8 && words[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                best = Some(start);
                best_len = i - start;
            }
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best = None;
    }
    let in_run = |i: usize| best.is_some_and(|b| i >= b && i < b + best_len);
    let mut out = String::new();
    for i in 0..8 {
        if in_run(i) {
            if best == Some(i) {
                out.push(':');
            }
            continue;
        }
        if i != 0 {
            out.push(':');
        }
        let embeds_ipv4 = i == 6
            && best == Some(0)
            && (best_len == 6
                || (best_len == 7 && words[7] != 0x0001)
                || (best_len == 5 && words[5] == 0xffff));
        if embeds_ipv4 {
            let _ = write!(out, "{}.{}.{}.{}", bytes[12], bytes[13], bytes[14], bytes[15]);
            return out;
        }
        let _ = write!(out, "{:x}", words[i]);
    }
    if best.is_some_and(|b| b + best_len == 8) {
        out.push(':');
    }
    out
}

/// A framed link type's header length and the offset of its type field.
fn geometry(link: LinkType) -> (u32, usize) {
    (link.header_len(), link.type_offset().unwrap_or(0) as usize)
}

struct Printer {
    out: String,
}

impl Printer {
    fn push(&mut self, text: &str) {
        self.out.push_str(text);
    }

    fn link(&mut self, linktype: u32, data: &[u8], wire_len: u32) -> Step {
        match LinkType::from_number(linktype) {
            Some(LinkType::Ethernet) => self.ethernet(data, wire_len),
            Some(LinkType::Raw) => self.raw_ip(Bytes::new(data, "ipn"), wire_len),
            Some(link @ (LinkType::Null | LinkType::Loop)) => self.loopback(link, data, wire_len),
            Some(LinkType::LinuxSll) => self.linux_sll(data, wire_len),
            Some(LinkType::LinuxSll2) => self.linux_sll2(data, wire_len),
            Some(link) => self.other_link(link, data, wire_len),
            // A number weir does not know.
            None => {
                let _ = write!(self.out, "link type {linktype}, length {wire_len}");
                Ok(())
            }
        }
    }

    fn ethernet(&mut self, data: &[u8], wire_len: u32) -> Step {
        self.ethernet_shown(data, wire_len, wire_len)
    }

    /// Ethernet, where a frame of a type not decoded is shown as `shown` bytes long (the
    /// frame's length with a switch tag tcpdump took out).
    fn ethernet_shown(&mut self, data: &[u8], wire_len: u32, shown: u32) -> Step {
        let frame = Bytes::new(data, "ether");
        let (header, type_at) = geometry(LinkType::Ethernet);
        if frame.len() < header as usize || wire_len < header {
            return Err("ether");
        }
        let mut ether_type = frame.be16(type_at)?;
        let mut at = header as usize;
        let mut length = wire_len - header;
        let mut frame = frame;
        loop {
            // 802.1Q, 802.1ad and the older QinQ tags: tcpdump shows them only with -e.
            while ethertype::VLAN_TAGS.contains(&ether_type) {
                if !frame.has(at + 4) || length < 4 {
                    return Err("vlan");
                }
                ether_type = frame.be16(at + 2)?;
                at += 4;
                length -= 4;
            }
            // tcpdump decodes MACsec only as the frame's first type, not behind a tag.
            if ether_type != 0x88e5 || at != header as usize {
                break;
            }
            // MACsec: its SecTAG, then (not encrypted) the frame's own type, its data
            // ending before the 16-byte ICV or at the short length.
            let tag = frame.from(at, "macsec");
            let tci = tag.u8(0).map_err(|_| "macsec")?;
            let tag_len = if tci & 0x20 != 0 { 14 } else { 6 };
            if tag.len() < 6 || length < 6 || tag.len() < tag_len || length < tag_len as u32 {
                return Err("macsec");
            }
            let short = tag.u8(1)?;
            if short & 0xc0 != 0 || tci & 0x80 != 0 {
                self.push(" (invalid)");
                return Ok(());
            }
            let short = u32::from(short & 0x3f);
            at += tag_len;
            length -= tag_len as u32;
            if tci & 0x0c != 0 {
                let (dst, src) = (frame.mac(0, 6)?, frame.mac(6, 6)?);
                let _ = write!(
                    self.out,
                    "{src} > {dst} 802.1AE MACsec, an {}, pn {}, flags ",
                    tci & 0x03,
                    tag.be32(2)?
                );
                for (bit, name) in [(0x08, 'E'), (0x04, 'C'), (0x40, 'S'), (0x10, 'B'), (0x20, 'I')]
                {
                    if tci & bit != 0 {
                        self.out.push(name);
                    }
                }
                if short != 0 {
                    let _ = write!(self.out, ", sl {short}");
                }
                if tci & 0x20 != 0 {
                    let sci = tag.slice(6, 8)?;
                    self.push(", sci ");
                    for b in sci {
                        let _ = write!(self.out, "{b:02x}");
                    }
                }
                self.push(", ");
                return Ok(());
            }
            let captured = frame.len().saturating_sub(at);
            if length < 16 || captured < 16 {
                return Err("macsec");
            }
            length -= 16;
            frame = frame.cut(frame.len() - 16);
            if short != 0 {
                if short > length || short as usize > captured - 16 {
                    return Err("macsec");
                }
                length = short;
                frame = frame.cut(at + short as usize);
            }
            if !frame.has(at + 2) || length < 2 {
                return Err("ether");
            }
            ether_type = frame.be16(at)?;
            at += 2;
            length -= 2;
        }
        let payload = frame.from(at, "ether");
        if ether_type <= ethertype::ETHERMTU {
            let (dst, src) = (frame.mac(0, 6)?, frame.mac(6, 6)?);
            // The field is the frame's length (unless the frame is shorter): what lies past
            // it is padding.
            let length = u32::from(ether_type).min(length);
            let llc = payload.from(0, "llc").cut(length as usize);
            return self.llc(llc, length, (&src, &dst));
        }
        match self.ether_payload(ether_type, payload, length) {
            Some(step) => step,
            None => self.ether_unknown(frame, ether_type, shown),
        }
    }

    fn raw_ip(&mut self, packet: Bytes<'_>, wire_len: u32) -> Step {
        if wire_len < 1 {
            let _ = write!(self.out, "truncated-ip {wire_len}");
            return Ok(());
        }
        match packet.u8(0)? & 0xf0 {
            0x40 => self.ipv4(packet.from(0, "ip"), wire_len),
            0x60 => self.ipv6(packet.from(0, "ip6"), wire_len),
            other => {
                let _ = write!(self.out, "unknown ip {}", other >> 4);
                Ok(())
            }
        }
    }

    /// BSD loopback: a 4-byte address family, host byte order (NULL) or network (LOOP).
    fn loopback(&mut self, link: LinkType, data: &[u8], wire_len: u32) -> Step {
        let null = link == LinkType::Null;
        // tcpdump's marker says `null` for both.
        let frame = Bytes::new(data, "null");
        let raw = frame.slice(0, 4)?;
        let mut family = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
        if null && family & 0xffff_0000 != 0 {
            // Written on a little-endian host.
            family = family.swap_bytes();
        }
        let length = wire_len.saturating_sub(4);
        match family {
            af::INET => self.ipv4(frame.from(4, "ip"), length),
            family if af::INET6_BSD.contains(&family) => self.ipv6(frame.from(4, "ip6"), length),
            // BSD's AF_ISO.
            7 => self.iso(frame.from(4, "isoclns"), length),
            other => {
                let _ = write!(self.out, "Unknown AF {other}, length {wire_len}: ");
                Ok(())
            }
        }
    }

    fn linux_sll(&mut self, data: &[u8], wire_len: u32) -> Step {
        let frame = Bytes::new(data, "sll");
        let (header, type_at) = geometry(LinkType::LinuxSll);
        if frame.len() < header as usize || wire_len < header {
            return Err("sll");
        }
        let protocol = frame.be16(type_at)?;
        // What tcpdump shows for a protocol it does not decode: direction and address.
        let direction = match frame.be16(0)? {
            0 => "In",
            1 => "B",
            2 => "M",
            3 => "P",
            4 => "Out",
            _ => "?",
        };
        let mut unknown = format!("{direction:>3} ");
        if frame.be16(4)? == 6 {
            let _ = write!(unknown, "{} ", frame.mac(6, 6)?);
        }
        self.sll_payload(protocol, frame.from(header as usize, "sll"), wire_len - header, &unknown)
    }

    fn linux_sll2(&mut self, data: &[u8], wire_len: u32) -> Step {
        let frame = Bytes::new(data, "sll2");
        let (header, type_at) = geometry(LinkType::LinuxSll2);
        if frame.len() < header as usize || wire_len < header {
            return Err("sll2");
        }
        let protocol = frame.be16(type_at)?;
        let ifindex = frame.be32(sll::V2_IFINDEX as usize)?;
        let direction = match frame.u8(sll::V2_PACKET_TYPE as usize)? {
            sll::HOST => "In",
            sll::BROADCAST => "B",
            sll::MULTICAST => "M",
            sll::OTHERHOST => "P",
            sll::OUTGOING => "Out",
            _ => "?",
        };
        let _ = write!(self.out, "ifindex {ifindex} {direction}  ");
        self.sll_payload(protocol, frame.from(header as usize, "sll2"), wire_len - header, "")
    }

    /// A cooked capture's payload; `unknown` is what is shown for a protocol not decoded.
    fn sll_payload(
        &mut self,
        protocol: u16,
        payload: Bytes<'_>,
        length: u32,
        unknown: &str,
    ) -> Step {
        let (mut protocol, mut payload, mut length) = (protocol, payload, length);
        while protocol == ethertype::VLAN_8021Q {
            if !payload.has(4) || length < 4 {
                return Err("vlan");
            }
            protocol = payload.be16(2)?;
            if protocol <= ethertype::ETHERMTU {
                protocol = 0x0004;
            }
            payload = payload.from(4, "sll");
            length -= 4;
        }
        match protocol {
            0x0001 => self.ipx(payload.from(0, "ipx"), length),
            0x0004 => self.llc_cooked(payload.from(0, "llc"), length),
            _ => match self.ether_payload(protocol, payload, length) {
                Some(step) => step,
                None => {
                    self.push(unknown);
                    Ok(())
                }
            },
        }
    }

    /// IPv4. `length` is what the link layer says is left of the packet on the wire.
    fn ipv4(&mut self, ip: Bytes<'_>, length: u32) -> Step {
        let version = ip.u8(0)? >> 4;
        if version != 4 {
            if version == 6 {
                self.push("IP6, wrong link-layer encapsulation (invalid)");
            } else {
                let _ = write!(self.out, "IP{version} (invalid)");
            }
            return Ok(());
        }
        self.push("IP ");
        if !ip.has(20) {
            return Err("ip");
        }
        if length < 20 {
            let _ = write!(self.out, "truncated-ip {length}");
            return Ok(());
        }
        let hlen = u32::from(ip.u8(0)? & 0x0f) * 4;
        if hlen < 20 {
            let _ = write!(self.out, "bad-hlen {hlen}");
            return Ok(());
        }
        let total = u32::from(ip.be16(2)?);
        if length < total {
            let _ = write!(self.out, "truncated-ip - {} bytes missing! ", total - length);
        }
        if total < hlen {
            let _ = write!(self.out, "bad-len {total}");
            return Ok(());
        }
        // Bytes past the datagram (Ethernet padding) belong to nobody.
        let ip = ip.cut(total as usize);
        let payload_len = total - hlen;
        let fragment = ip.be16(6)?;
        let proto = ip.u8(9)?;
        let (src, dst) = (ip.ipv4(12)?, ip.ipv4(16)?);
        if fragment & 0x1fff != 0 {
            let _ = write!(self.out, "{src} > {dst}: ip-proto-{proto}");
            return Ok(());
        }
        if !matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP | ipproto::DCCP) {
            let _ = write!(self.out, "{src} > {dst}: ");
        }
        if !ip.has(hlen as usize) {
            let _ = write!(self.out, " [remaining caplen({}) < header length({hlen})]", ip.len());
            return Err("ip");
        }
        let fragmented = fragment & 0x2000 != 0;
        let ttl = ip.u8(8)?;
        let net = Net { src, dst, first_proto: proto, v4: true, fragmented, ttl };
        self.transport(&net, proto, ip.from(hlen as usize, "ip"), payload_len)
    }

    fn ipv6(&mut self, ip: Bytes<'_>, length: u32) -> Step {
        if !ip.has(40) {
            return Err("ip6");
        }
        if length < 40 {
            let _ = write!(self.out, "truncated-ip6 {length}");
            return Ok(());
        }
        self.push("IP6 ");
        let version = ip.u8(0)? >> 4;
        if version != 6 {
            let _ = write!(self.out, "version error: {version} != 6");
            return Ok(());
        }
        let payload_len = u32::from(ip.be16(4)?);
        // A zero payload length (a jumbogram without its option) means "header only".
        let total = if payload_len == 0 { 40 } else { payload_len + 40 };
        if payload_len != 0 && length < total {
            let _ = write!(self.out, "truncated-ip6 - {} bytes missing!", total - length);
        }
        let ip = ip.cut(total as usize);
        let next = ip.u8(6)?;
        let (src, dst) = (ip.ipv6(8)?, ip.ipv6(24)?);
        if !matches!(next, ipproto::TCP | ipproto::UDP | ipproto::SCTP | ipproto::DCCP) {
            let _ = write!(self.out, "{src} > {dst}: ");
        }
        let ttl = ip.u8(7)?;
        let mut net = Net { src, dst, first_proto: next, v4: false, fragmented: false, ttl };
        self.ipv6_chain(&mut net, ip, next, total - 40)
    }

    /// The protocol after an IP header. `length` is the payload length the IP header gives.
    fn transport(&mut self, net: &Net, proto: u8, payload: Bytes<'_>, length: u32) -> Step {
        if let Some(step) = self.more_protocols(net, proto, payload, length) {
            return step;
        }
        match proto {
            ipproto::TCP => self.tcp(net, payload.from(0, "tcp"), length),
            ipproto::UDP => self.udp(net, payload.from(0, "udp"), length),
            ipproto::ICMP if net.v4 => self.icmp(payload.from(0, "icmp"), length),
            ipproto::ICMPV6 if !net.v4 => self.icmp6(payload.from(0, "icmp6"), length),
            ipproto::ICMP => {
                self.push("[ICMP requires IPv4] (invalid)");
                Ok(())
            }
            ipproto::ICMPV6 => {
                self.push("[ICMPv6 requires IPv6] (invalid)");
                Ok(())
            }
            other => {
                // Not decoded here: what tcpdump prints for a protocol it has no printer for
                // (with the addresses the IP printer leaves to SCTP and DCCP).
                if matches!(net.first_proto, ipproto::SCTP | ipproto::DCCP) {
                    let _ = write!(self.out, "{} > {}: ", net.src, net.dst);
                }
                let _ = write!(self.out, " ip-proto-{other} {length}");
                Ok(())
            }
        }
    }

    fn tcp(&mut self, net: &Net, tcp: Bytes<'_>, length: u32) -> Step {
        if !tcp.has(4) {
            let _ = write!(self.out, "{} > {}:", net.src, net.dst);
            return Err("tcp");
        }
        let (sport, dport) = (tcp.be16(0)?, tcp.be16(2)?);
        if net.first_proto == ipproto::TCP {
            let _ = write!(self.out, "{}.{sport} > {}.{dport}: ", net.src, net.dst);
        } else {
            let _ = write!(self.out, "{sport} > {dport}: ");
        }
        if !tcp.has(20) {
            return Err("tcp");
        }
        let hlen = u32::from(tcp.u8(12)? >> 4) * 4;
        if hlen < 20 {
            let _ = write!(
                self.out,
                " tcp {} [bad hdr length {hlen} - too short, < 20]",
                length.wrapping_sub(hlen)
            );
            return Ok(());
        }
        let _ = write!(self.out, "tcp {}", length.wrapping_sub(hlen));
        if hlen > length {
            let _ = write!(self.out, " [bad hdr length {hlen} - too long, > {length}]");
        }
        Ok(())
    }

    fn udp(&mut self, net: &Net, udp: Bytes<'_>, length: u32) -> Step {
        if !udp.has(4) {
            if net.first_proto == ipproto::UDP {
                let _ = write!(self.out, "{} > {}: ", net.src, net.dst);
            }
            return Err("udp");
        }
        let (sport, dport) = (udp.be16(0)?, udp.be16(2)?);
        let ports = |out: &mut String| {
            if net.first_proto == ipproto::UDP {
                let _ = write!(out, "{}.{sport} > {}.{dport}: ", net.src, net.dst);
            } else {
                let _ = write!(out, "{sport} > {dport}: ");
            }
        };
        if length < 8 {
            ports(&mut self.out);
            let _ = write!(self.out, "truncated-udp {length}");
            return Ok(());
        }
        if !udp.has(6) {
            ports(&mut self.out);
            return Err("udp");
        }
        let mut ulen = u32::from(udp.be16(4)?);
        if ulen == 0 && length > 65_535 {
            ulen = length;
        }
        if ulen < 8 {
            ports(&mut self.out);
            let _ = write!(self.out, "truncated-udplength {ulen}");
            return Ok(());
        }
        let ulen = ulen - 8;
        let length = (length - 8).min(ulen);
        if !udp.has(8) {
            ports(&mut self.out);
            return Err("udp");
        }
        ports(&mut self.out);
        if ulen > length && !net.fragmented {
            let _ = write!(self.out, "UDP, bad length {ulen} > {length}");
        } else {
            let _ = write!(self.out, "UDP, length {ulen}");
        }
        Ok(())
    }

    fn icmp(&mut self, icmp: Bytes<'_>, length: u32) -> Step {
        let (kind, code) = (icmp.u8(0)?, icmp.u8(1)?);
        // The header of the datagram an error message quotes starts at byte 8.
        let quoted_dst = || icmp.ipv4(8 + 16);
        let text = match kind {
            0 | 8 => format!(
                "echo {}, id {}, seq {}",
                if kind == 8 { "request" } else { "reply" },
                icmp.be16(4)?,
                icmp.be16(6)?
            ),
            3 => match code {
                0 => format!("net {} unreachable", quoted_dst()?),
                1 => format!("host {} unreachable", quoted_dst()?),
                2 => format!("{} protocol {} unreachable", quoted_dst()?, icmp.u8(8 + 9)?),
                3 => {
                    let hlen = usize::from(icmp.u8(8)? & 0x0f) * 4;
                    let dport = icmp.be16(8 + hlen + 2)?;
                    let dst = quoted_dst()?;
                    match icmp.u8(8 + 9)? {
                        ipproto::TCP => format!("{dst} tcp port {dport} unreachable"),
                        ipproto::UDP => format!("{dst} udp port {dport} unreachable"),
                        other => format!("{dst} protocol {other} port {dport} unreachable"),
                    }
                }
                4 => match icmp.be16(6)? {
                    0 => format!("{} unreachable - need to frag", quoted_dst()?),
                    mtu => format!("{} unreachable - need to frag (mtu {mtu})", quoted_dst()?),
                },
                5 => format!("{} unreachable - source route failed", quoted_dst()?),
                6 => format!("net {} unreachable - unknown", quoted_dst()?),
                7 => format!("host {} unreachable - unknown", quoted_dst()?),
                8 => format!("{} unreachable - source host isolated", quoted_dst()?),
                9 => format!("net {} unreachable - admin prohibited", quoted_dst()?),
                10 => format!("host {} unreachable - admin prohibited", quoted_dst()?),
                11 => format!("net {} unreachable - tos prohibited", quoted_dst()?),
                12 => format!("host {} unreachable - tos prohibited", quoted_dst()?),
                13 => format!("host {} unreachable - admin prohibited filter", quoted_dst()?),
                14 => format!("host {} unreachable - host precedence violation", quoted_dst()?),
                15 => format!("host {} unreachable - precedence cutoff", quoted_dst()?),
                other => format!("{} unreachable - #{other}", quoted_dst()?),
            },
            5 => {
                let (dst, gateway) = (quoted_dst()?, icmp.ipv4(4)?);
                match code {
                    0 => format!("redirect {dst} to net {gateway}"),
                    1 => format!("redirect {dst} to host {gateway}"),
                    2 => format!("redirect-tos {dst} to net {gateway}"),
                    3 => format!("redirect-tos {dst} to host {gateway}"),
                    other => format!("redirect-#{other} {dst} to {gateway}"),
                }
            }
            9 => router_advertisement(&icmp)?,
            11 => {
                quoted_dst()?;
                match code {
                    0 => "time exceeded in-transit".to_string(),
                    1 => "ip reassembly time exceeded".to_string(),
                    other => format!("time exceeded-#{other}"),
                }
            }
            12 => match code {
                0 => format!("parameter problem - octet {}", icmp.u8(4)?),
                other => format!("parameter problem - code {other}"),
            },
            13 => format!("time stamp query id {} seq {}", icmp.be16(4)?, icmp.be16(6)?),
            14 => format!(
                "time stamp reply id {} seq {}: org {}, recv {}, xmit {}",
                icmp.be16(4)?,
                icmp.be16(6)?,
                ms_since_midnight(icmp.be32(8)?),
                ms_since_midnight(icmp.be32(12)?),
                ms_since_midnight(icmp.be32(16)?)
            ),
            18 => format!("address mask is 0x{:08x}", icmp.be32(8)?),
            4 => "source quench".to_string(),
            10 => "router solicitation".to_string(),
            15 => "information request".to_string(),
            16 => "information reply".to_string(),
            17 => "address mask request".to_string(),
            other => format!("type-#{other}"),
        };
        let _ = write!(self.out, "ICMP {text}, length {length}");
        Ok(())
    }

    fn icmp6(&mut self, icmp: Bytes<'_>, length: u32) -> Step {
        if length == 0 {
            self.push("ICMP6, length 0 (invalid)");
            return Ok(());
        }
        let kind = icmp.u8(0)?;
        let _ = write!(self.out, "ICMP6, {}", icmp6_name(kind));
        let code = icmp.u8(1)?;
        // The quoted IPv6 header of an error message starts at byte 8.
        match kind {
            1 => {
                match icmp6_unreachable_name(code) {
                    Some(name) => {
                        let _ = write!(self.out, ", {name}");
                    }
                    None => {
                        let _ =
                            write!(self.out, ", unknown unreach code ({code}), length {length}");
                        return Ok(());
                    }
                }
                match code {
                    0 | 1 | 3 => {
                        let _ = write!(self.out, " {}", icmp.ipv6(8 + 24)?);
                    }
                    2 => {
                        let (dst, src) = (icmp.ipv6(8 + 24)?, icmp.ipv6(8 + 8)?);
                        let _ = write!(self.out, " {dst}, source address {src}");
                    }
                    _ => {
                        let Some((at, proto)) = upper_layer(&icmp.from(8, "icmp6")) else {
                            return Err("icmp6");
                        };
                        let dport = icmp.be16(8 + at + 2)?;
                        let dst = icmp.ipv6(8 + 24)?;
                        let _ = match proto {
                            ipproto::TCP => write!(self.out, ", {dst} tcp port {dport}"),
                            ipproto::UDP => write!(self.out, ", {dst} udp port {dport}"),
                            other => write!(
                                self.out,
                                ", {dst} protocol {other} port {dport} unreachable"
                            ),
                        };
                    }
                }
            }
            2 => {
                let _ = write!(self.out, ", mtu {}", icmp.be32(4)?);
            }
            3 => {
                let _ = match code {
                    0 => write!(self.out, " for {}", icmp.ipv6(8 + 24)?),
                    1 => write!(self.out, " (reassembly)"),
                    other => write!(self.out, ", unknown code ({other})"),
                };
            }
            4 => {
                icmp.slice(8, 40)?;
                let pointer = icmp.be32(4)?;
                let _ = match code {
                    0 => write!(self.out, ", erroneous - octet {pointer}"),
                    1 => write!(self.out, ", next header - octet {pointer}"),
                    2 => write!(self.out, ", option - octet {pointer}"),
                    3 => write!(self.out, ", incomplete header chain - octet {pointer}"),
                    other => write!(self.out, ", code-#{other}"),
                };
            }
            128 | 129 => {
                let _ = write!(self.out, ", id {}, seq {}", icmp.be16(4)?, icmp.be16(6)?);
            }
            // Listener report / done: printed only when the whole message is there.
            131 | 132 if icmp.has(24) => {
                let _ =
                    write!(self.out, "max resp delay: {} addr: {}", icmp.be16(4)?, icmp.ipv6(8)?);
            }
            131..=134 | 141 | 142 | 145 | 147 => {}
            135 => {
                let _ = write!(self.out, ", who has {}", icmp.ipv6(8)?);
            }
            136 => {
                let _ = write!(self.out, ", tgt is {}", icmp.ipv6(8)?);
            }
            137 => {
                let (dst, target) = (icmp.ipv6(24)?, icmp.ipv6(8)?);
                let _ = write!(self.out, ", {dst} to {target}");
            }
            144 | 146 => {
                let _ = write!(self.out, ", id 0x{:04x}", icmp.be16(4)?);
            }
            // Not decoded here (queries, renumbering, node information, MLDv2, RPL, unknown).
            _ => {}
        }
        let _ = write!(self.out, ", length {length}");
        Ok(())
    }

    pub(super) fn arp(&mut self, arp: Bytes<'_>, length: u32) -> Step {
        let hardware = arp.be16(0)?;
        let protocol = arp.be16(2)?;
        let (hlen, plen) = (usize::from(arp.u8(4)?), usize::from(arp.u8(5)?));
        let op = arp.be16(6)?;
        if !arp.has(8) {
            return Err("arp");
        }
        let sha = 8;
        let spa = sha + hlen;
        let tha = spa + plen;
        let tpa = tha + hlen;
        if !arp.has(tpa + plen) {
            return Err("arp");
        }
        self.push("ARP, ");
        // 0x1000: the IPv4 protocol type some old ARP implementations used.
        let ipv4_protocol = protocol == ethertype::IP || protocol == 0x1000;
        // ATM (19) and Frame Relay (15) addresses are not Ethernet-like: not decoded here.
        if !ipv4_protocol || plen != 4 || hlen == 0 || hardware == 19 || hardware == 15 {
            let hardware_name = match hardware {
                1 => "Ethernet".to_string(),
                other => format!("Unknown Hardware ({other})"),
            };
            let protocol_name = match protocol {
                ethertype::IP => "IPv4".to_string(),
                ethertype::IPV6 => "IPv6".to_string(),
                other => format!("Unknown Protocol (0x{other:04x})"),
            };
            let _ = write!(
                self.out,
                "{hardware_name} (len {hlen}), {protocol_name} (len {plen}), length {length}"
            );
            return Ok(());
        }
        let op_name = match op {
            1 => "Request".to_string(),
            2 => "Reply".to_string(),
            3 => "Reverse Request".to_string(),
            4 => "Reverse Reply".to_string(),
            8 => "Inverse Request".to_string(),
            9 => "Inverse Reply".to_string(),
            10 => "NACK Reply".to_string(),
            other => format!("Unknown ({other})"),
        };
        let _ = write!(self.out, "{op_name}");
        if !matches!(op, 1 | 2 | 3 | 4 | 8 | 9) {
            // tcpdump follows these with a hex dump; one line is enough here.
            let _ = write!(self.out, ", length {length}");
            return Ok(());
        }
        self.push(" ");
        let _ = match op {
            1 => {
                let _ = write!(self.out, "who-has {}", arp.ipv4(tpa)?);
                if arp.slice(tha, hlen)?.iter().any(|&b| b != 0) {
                    let _ = write!(self.out, " ({})", arp.mac(tha, hlen)?);
                }
                write!(self.out, " tell {}", arp.ipv4(spa)?)
            }
            2 => write!(self.out, "{} is-at {}", arp.ipv4(spa)?, arp.mac(sha, hlen)?),
            3 | 8 => {
                write!(self.out, "who-is {} tell {}", arp.mac(tha, hlen)?, arp.mac(sha, hlen)?)
            }
            4 => write!(self.out, "{} at {}", arp.mac(tha, hlen)?, arp.ipv4(tpa)?),
            _ => write!(self.out, "{} at {}", arp.mac(sha, hlen)?, arp.ipv4(spa)?),
        };
        let _ = write!(self.out, ", length {length}");
        Ok(())
    }
}

/// The network-layer facts the transport printers show.
struct Net {
    src: String,
    dst: String,
    /// The protocol field of the IP header itself (for IPv6: the first next-header): ports
    /// are shown with addresses only when the transport header directly follows it.
    first_proto: u8,
    v4: bool,
    /// More fragments follow (IPv4 MF): a short datagram is not a bad UDP length then.
    fragmented: bool,
    /// The time to live (IPv4) or hop limit (IPv6).
    ttl: u8,
}

/// `HH:MM:SS.mmm` for an ICMP timestamp (milliseconds since midnight UTC).
fn ms_since_midnight(ms: u32) -> String {
    let (secs, ms) = (ms / 1000, ms % 1000);
    format!("{:02}:{:02}:{:02}.{ms:03}", secs / 3600, secs / 60 % 60, secs % 60)
}

fn router_advertisement(icmp: &Bytes<'_>) -> Result<String, &'static str> {
    let mut text = String::from("router advertisement");
    icmp.slice(4, 4)?;
    let lifetime = icmp.be16(6)?;
    text.push_str(" lifetime ");
    let _ = if lifetime < 60 {
        write!(text, "{lifetime}")
    } else if lifetime < 3600 {
        write!(text, "{}:{:02}", lifetime / 60, lifetime % 60)
    } else {
        write!(text, "{}:{:02}:{:02}", lifetime / 3600, lifetime % 3600 / 60, lifetime % 60)
    };
    let count = icmp.u8(4)?;
    let _ = write!(text, " {count}:");
    let size = icmp.u8(5)?;
    if size != 2 {
        let _ = write!(text, " [size {size}]");
        return Ok(text);
    }
    for i in 0..usize::from(count) {
        let at = 8 + 8 * i;
        icmp.slice(at, 8)?;
        let _ = write!(text, " {{{} {}}}", icmp.ipv4(at)?, icmp.be32(at + 4)?);
    }
    Ok(text)
}

fn icmp6_name(kind: u8) -> String {
    let name = match kind {
        1 => "destination unreachable",
        2 => "packet too big",
        3 => "time exceeded in-transit",
        4 => "parameter problem",
        128 => "echo request",
        129 => "echo reply",
        130 => "multicast listener query",
        131 => "multicast listener report",
        132 => "multicast listener done",
        133 => "router solicitation",
        134 => "router advertisement",
        135 => "neighbor solicitation",
        136 => "neighbor advertisement",
        137 => "redirect",
        138 => "router renumbering",
        139 => "who-are-you request",
        140 => "who-are-you reply",
        141 => "inverse neighbor solicitation",
        142 => "inverse neighbor advertisement",
        143 => "multicast listener report v2",
        144 => "ha discovery request",
        145 => "ha discovery reply",
        146 => "mobile router solicitation",
        147 => "mobile router advertisement",
        155 => "RPL",
        200 => "mtrace response",
        201 => "mtrace message",
        other => return format!("unknown icmp6 type ({other})"),
    };
    name.to_string()
}

fn icmp6_unreachable_name(code: u8) -> Option<&'static str> {
    Some(match code {
        0 => "unreachable route",
        // The leading space is tcpdump's.
        1 => " unreachable prohibited",
        2 => "beyond scope",
        3 => "unreachable address",
        4 => "unreachable port",
        _ => return None,
    })
}

/// Finds the TCP/UDP header inside the IPv6 datagram an ICMPv6 error quotes, through
/// hop-by-hop, routing, destination-options, first-fragment and AH headers: its offset and
/// protocol, or `None` when it is not there (or not captured).
fn upper_layer(quoted: &Bytes<'_>) -> Option<(usize, u8)> {
    let mut next = quoted.u8(6).ok()?;
    let mut at = 0usize;
    let mut advance = 40usize;
    while at < quoted.len() {
        at = at.checked_add(advance)?;
        match next {
            ipproto::TCP | ipproto::UDP => {
                quoted.slice(at + 2, 2).ok()?;
                return Some((at, next));
            }
            0 | 43 | 60 => {
                let len = quoted.u8(at + 1).ok()?;
                next = quoted.u8(at).ok()?;
                advance = (usize::from(len) + 1) * 8;
            }
            44 => {
                if quoted.be16(at + 2).ok()? & 0xfff8 != 0 {
                    return None;
                }
                next = quoted.u8(at).ok()?;
                advance = 8;
            }
            51 => {
                let len = quoted.u8(at + 1).ok()?;
                next = quoted.u8(at).ok()?;
                advance = (usize::from(len) + 2) * 4;
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(text: &str) -> String {
        let addr: std::net::Ipv6Addr = text.parse().unwrap();
        let bytes = addr.octets();
        Bytes::new(&bytes, "t").ipv6(0).unwrap()
    }

    #[test]
    fn ipv6_text_compresses_the_longest_zero_run() {
        assert_eq!(v6("2001:db8::1"), "2001:db8::1");
        assert_eq!(v6("ff02::1:ff00:10"), "ff02::1:ff00:10");
        assert_eq!(v6("::"), "::");
        assert_eq!(v6("::1"), "::1");
        assert_eq!(v6("fe80::"), "fe80::");
        assert_eq!(v6("1:0:0:2:0:0:0:3"), "1:0:0:2::3");
        assert_eq!(v6("1:0:0:2:3:0:0:4"), "1::2:3:0:0:4");
        assert_eq!(v6("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
        assert_eq!(v6("::ffff:10.0.0.1"), "::ffff:10.0.0.1");
        assert_eq!(v6("::10.0.0.1"), "::10.0.0.1");
        assert_eq!(v6("1::"), "1::");
        assert_eq!(v6("0:0:1::"), "0:0:1::");
        assert_eq!(v6("::1:0:0:0:0"), "0:0:0:1::");
    }

    #[test]
    fn no_random_bytes_make_the_printer_panic() {
        // Pseudo-random records (SplitMix64-style mixing) with headers that steer into the
        // deeper paths: Juniper's magic and flags, radiotap's length, FRF.16 and ARCnet IDs.
        let mut state = 0x5eed_u64;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let prefixes: [&[u8]; 6] =
            [&[], b"MGC\x82", b"MGC\x80\x00\x04", &[0, 0, 12, 0], &[0x45], &[0xff, 0x03]];
        for link in LinkType::ALL {
            for round in 0..200 {
                let len = (next() % 120) as usize;
                let mut data: Vec<u8> = prefixes[round % prefixes.len()].to_vec();
                data.extend((0..len).map(|_| next() as u8));
                let wire = match round % 3 {
                    0 => data.len() as u32,
                    1 => (next() % 200) as u32,
                    _ => u32::MAX,
                };
                let _ = line(link.linktype(), 0, 0, &data, wire);
            }
        }
    }

    #[test]
    fn time_is_utc_time_of_day_with_microseconds() {
        let text =
            line(LinkType::Ethernet.linktype(), 86_400 * 3 + 3600 + 61, 999_999_999, &[1], 1);
        assert_eq!(text, "01:01:01.999999  [|ether]");
        assert_eq!(
            line(LinkType::Ethernet.linktype(), 5, 0, &[], 0),
            "[Invalid header: caplen==0, len==0]"
        );
        assert_eq!(
            line(LinkType::Ethernet.linktype(), 5, 0, &[], 60),
            "[Invalid header: caplen==0]"
        );
    }

    #[test]
    fn no_packet_makes_the_printer_panic() {
        // Every prefix of a few real frames, on every link type.
        let frames: [&[u8]; 2] = [
            &[
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0, 0, 64,
                6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0, 80, 1, 187, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 2,
                0, 0, 0, 0, 0, 0,
            ],
            &[
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 8, 58, 64, 0,
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 2, 1, 4, 0, 0, 0, 0, 0, 0,
            ],
        ];
        // Every link type weir knows, and numbers it does not.
        let linktypes: Vec<u32> =
            LinkType::ALL.iter().map(|l| l.linktype()).chain([0, 12, 999]).collect();
        for frame in frames {
            for cut in 0..=frame.len() {
                for &linktype in &linktypes {
                    for wire in [0, cut as u32, frame.len() as u32, u32::MAX] {
                        let _ = line(linktype, 0, 0, &frame[..cut], wire);
                        let _ = line(linktype, 0, 0, &frame[cut..], wire);
                    }
                }
            }
        }
    }
}
