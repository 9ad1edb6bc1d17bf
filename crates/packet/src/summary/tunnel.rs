//! What an EtherType leads to beyond IP and ARP: PPPoE (discovery and session), PPP and
//! MPLS label stacks, as tcpdump's quiet mode prints them.

use std::fmt::Write as _;

use super::{Bytes, Printer, Step};
use crate::{ethertype, ppp};

impl Printer {
    /// The payload of an EtherType this printer decodes, or `None` for the others.
    pub(super) fn ether_payload(
        &mut self,
        kind: u16,
        payload: Bytes<'_>,
        length: u32,
    ) -> Option<Step> {
        Some(match kind {
            ethertype::IP => self.ipv4(payload.from(0, "ip"), length),
            ethertype::IPV6 => self.ipv6(payload.from(0, "ip6"), length),
            ethertype::ARP | ethertype::REVARP => self.arp(payload.from(0, "arp"), length),
            ethertype::MPLS | ethertype::MPLS_MULTI => self.mpls(payload.from(0, "mpls"), length),
            ethertype::PPPOED | ethertype::PPPOES => self.pppoe(payload.from(0, "pppoe"), length),
            0x88cc => self.lldp(payload.from(0, "lldp"), length),
            0x9000 => self.loopback_ctp(payload.from(0, "loopback"), length),
            _ => return None,
        })
    }

    pub(super) fn pppoe(&mut self, pppoe: Bytes<'_>, length: u32) -> Step {
        if length < 6 {
            let _ = write!(self.out, " (length {length} < 6) (invalid)");
            return Ok(());
        }
        let length = length - 6;
        pppoe.slice(0, 6)?;
        let first = pppoe.u8(0)?;
        let (version, kind) = (first >> 4, first & 0x0f);
        let code = pppoe.u8(1)?;
        let session = pppoe.be16(2)?;
        let mut declared = u32::from(pppoe.be16(4)?);
        if version != 1 {
            let _ = write!(self.out, " [ver {version}]");
        }
        if kind != 1 {
            let _ = write!(self.out, " [type {kind}]");
        }
        let _ = match pppoe_code(code) {
            Some(name) => write!(self.out, "PPPoE {name}"),
            None => write!(self.out, "PPPoE PAD-{code:x}"),
        };
        if code == 0x09 && declared > 1484 - 6 {
            let _ = write!(self.out, " [len {declared}!]");
        }
        if declared > length {
            let _ = write!(self.out, " [len {declared} > {length}!]");
            declared = length;
        }
        if session != 0 {
            let _ = write!(self.out, " [ses 0x{session:x}]");
        }
        if code == 0 {
            self.push(" ");
            return self.ppp(pppoe.from(6, "ppp"), declared);
        }
        // Discovery: the tags, up to the end-of-list tag or the declared length.
        let end = 6 + declared as usize;
        let mut at = 6usize;
        let mut tag = 0xffffu16;
        while tag != 0 && at < end {
            tag = pppoe.be16(at)?;
            let len = usize::from(pppoe.be16(at + 2)?);
            at += 4;
            let name = pppoe_tag(tag);
            if len == 0 {
                let _ = write!(self.out, " [{name}]");
            } else {
                let value = pppoe.slice(at, len)?;
                let shown = &value[..value.len().min(79)];
                let printable = shown.iter().filter(|&&b| (0x20..0x7f).contains(&b)).count();
                if printable > shown.len() - printable {
                    let text: String = shown
                        .iter()
                        .map(|&b| if (0x20..0x7f).contains(&b) { b as char } else { '.' })
                        .collect();
                    let _ = write!(self.out, " [{name} \"{text}\"]");
                } else {
                    let _ = write!(self.out, " [{name} 0x");
                    for b in value {
                        let _ = write!(self.out, "{b:02X}");
                    }
                    self.push("]");
                }
            }
            at += len;
        }
        Ok(())
    }

    /// PPP: an optional address and control field, then the protocol (one byte when odd).
    pub(super) fn ppp(&mut self, frame: Bytes<'_>, length: u32) -> Step {
        if length < 2 {
            return Err("ppp");
        }
        let mut at = 0usize;
        let mut length = length;
        let header = frame.be16(0)?;
        if matches!(header, 0x0003 | 0x0103 | 0xff03) {
            at = 2;
            length -= 2;
        }
        if length < 2 {
            return Err("ppp");
        }
        let first = frame.u8(at)?;
        let proto = if first % 2 == 1 {
            at += 1;
            length -= 1;
            u16::from(first)
        } else {
            let proto = frame.be16(at)?;
            at += 2;
            length -= 2;
            proto
        };
        self.ppp_protocol(proto, frame.from(at, "ppp"), length)
    }

    /// What follows a PPP header of protocol `proto`.
    pub(super) fn ppp_protocol(&mut self, proto: u16, payload: Bytes<'_>, length: u32) -> Step {
        match proto {
            0xc021 | 0x8021 | 0x8023 | 0x8281 | 0x8057 | 0x80fd | 0xc02b => {
                let name = ppp_name(proto).unwrap_or("");
                let _ = write!(self.out, "{name}, ");
                if length < 4 || payload.len() < 2 {
                    let _ = write!(self.out, "[|{name}]");
                    return Ok(());
                }
                let code = payload.u8(0)?;
                let id = payload.u8(1)?;
                let _ = write!(
                    self.out,
                    "{} (0x{code:02x}), id {id}, length {}",
                    control_code(code),
                    length + 2
                );
                Ok(())
            }
            ethertype::IP | ppp::IP | 0x002d => self.ipv4(payload.from(0, "ip"), length),
            ethertype::IPV6 | ppp::IPV6 => self.ipv6(payload.from(0, "ip6"), length),
            ppp::MPLS_UCAST | 0x0283 => self.mpls(payload.from(0, "mpls"), length),
            0x00fd => {
                self.push("compressed PPP data");
                Ok(())
            }
            // OSI: the NLPID first.
            0x0023 => self.iso(payload.from(0, "isoclns"), length),
            _ => {
                match ppp_name(proto) {
                    Some(name) => {
                        let _ = write!(self.out, "{name} ");
                    }
                    None => {
                        let _ = write!(self.out, "unknown PPP protocol (0x{proto:04x}) ");
                    }
                }
                self.hex_lines(payload, length);
                Ok(())
            }
        }
    }

    /// tcpdump's hex dump of undecoded bytes: lines of 16 bytes after `\n\t0xOFFSET:  `.
    pub(super) fn hex_lines(&mut self, bytes: Bytes<'_>, length: u32) {
        let shown = &bytes.data[..bytes.data.len().min(length as usize)];
        for (line, chunk) in shown.chunks(16).enumerate() {
            let _ = write!(self.out, "\n\t0x{:04x}:  ", line * 16);
            for (i, pair) in chunk.chunks(2).enumerate() {
                if i > 0 {
                    self.push(" ");
                }
                for b in pair {
                    let _ = write!(self.out, "{b:02x}");
                }
            }
        }
    }

    pub(super) fn mpls(&mut self, mpls: Bytes<'_>, length: u32) -> Step {
        self.push("MPLS");
        let mut at = 0usize;
        let mut length = length;
        let mut entry;
        loop {
            if length < 4 {
                self.push(" (invalid)");
                mpls.slice(at, length as usize)?;
                return Ok(());
            }
            entry = mpls.be32(at)?;
            let _ = write!(self.out, " (label {}, tc {}", entry >> 12, (entry >> 9) & 7);
            if entry & 0x100 != 0 {
                self.push(", [S]");
            }
            let _ = write!(self.out, ", ttl {})", entry & 0xff);
            at += 4;
            length -= 4;
            if entry & 0x100 != 0 {
                break;
            }
        }
        let payload = mpls.from(at, "mpls");
        let ipv4 = match entry >> 12 {
            0 | 3 => Some(true),
            2 => Some(false),
            _ => {
                if length < 1 {
                    return Ok(());
                }
                match payload.u8(0)? {
                    0x45..=0x4f => Some(true),
                    0x60..=0x6f => Some(false),
                    _ => None,
                }
            }
        };
        match ipv4 {
            Some(true) => {
                self.push(" ");
                self.ipv4(payload.from(0, "ip"), length)
            }
            Some(false) => {
                self.push(" ");
                self.ipv6(payload.from(0, "ip6"), length)
            }
            // tcpdump's quiet mode shows nothing of a payload it cannot tell.
            None => Ok(()),
        }
    }
}

fn pppoe_code(code: u8) -> Option<&'static str> {
    Some(match code {
        0x00 => "",
        0x09 => "PADI",
        0x07 => "PADO",
        0x19 => "PADR",
        0x65 => "PADS",
        0xa7 => "PADT",
        0xd3 => "PADM",
        0xd4 => "PADN",
        _ => return None,
    })
}

fn pppoe_tag(tag: u16) -> String {
    let name = match tag {
        0x0000 => "EOL",
        0x0101 => "Service-Name",
        0x0102 => "AC-Name",
        0x0103 => "Host-Uniq",
        0x0104 => "AC-Cookie",
        0x0105 => "Vendor-Specific",
        0x0110 => "Relay-Session-ID",
        0x0120 => "PPP-Max-Payload",
        0x0201 => "Service-Name-Error",
        0x0202 => "AC-System-Error",
        0x0203 => "Generic-Error",
        other => return format!("TAG-0x{other:x}"),
    };
    name.to_string()
}

/// tcpdump's names of PPP protocols (its `ppptype2str`).
pub(super) fn ppp_name(proto: u16) -> Option<&'static str> {
    Some(match proto {
        0x0021 => "IP",
        0x0023 => "OSI",
        0x0025 => "NS",
        0x0027 => "DECNET",
        0x0029 => "APPLE",
        0x002b => "IPX",
        0x002d => "VJC IP",
        0x002f => "VJNC IP",
        0x0031 => "BRPDU",
        0x0033 => "STII",
        0x0035 => "VINES",
        0x003d => "ML",
        0x0057 => "IP6",
        0x00fd => "COMP",
        0x0201 => "HELLO",
        0x0231 => "LUXCOM",
        0x0233 => "SNS",
        0x0281 | 0x0283 => "MPLS",
        0x8021 => "IPCP",
        0x8023 => "OSICP",
        0x8025 => "NSCP",
        0x8027 => "DECNETCP",
        0x8029 => "APPLECP",
        0x802b => "IPXCP",
        0x8033 => "STIICP",
        0x8035 => "VINESCP",
        0x8057 => "IP6CP",
        0x8281 => "MPLSCP",
        0x80fd => "CCP",
        0xc021 => "LCP",
        0xc023 => "PAP",
        0xc025 => "LQM",
        0xc223 => "CHAP",
        0xc02b => "BACP",
        0xc02d => "BAP",
        _ => return None,
    })
}

fn control_code(code: u8) -> &'static str {
    match code {
        1 => "Conf-Request",
        2 => "Conf-Ack",
        3 => "Conf-Nack",
        4 => "Conf-Reject",
        5 => "Term-Request",
        6 => "Term-Ack",
        7 => "Code-Reject",
        8 => "Prot-Reject",
        9 => "Echo-Request",
        10 => "Echo-Reply",
        11 => "Disc-Req",
        12 => "Ident",
        13 => "Time-Rem",
        14 => "Reset-Req",
        15 => "Reset-Ack",
        _ => "Unknown Opcode",
    }
}
