//! Juniper PIC captures (the `DLT_JUNIPER_*` link types) as tcpdump 4.99's quiet mode
//! prints them: the capture header (the `MGC` magic, flags, extension TLVs), the PIC's
//! cookie (its length from the PIC type, longer for a link-services cookie, 8 bytes for an
//! adaptive-services one), then what each PIC carries: PPP, Frame Relay, FRF.16, LLC, IP
//! guessed from its first byte, IPsec with its ES header, an EtherType before PPPoE.

use std::fmt::Write as _;

use super::{Bytes, Printer, Step};
use crate::link::LinkType;

/// The first cookie byte of a link-services PIC (2 more cookie bytes).
const LS_COOKIE: u8 = 0x54;
/// The first cookie byte of an adaptive-services PIC (an 8-byte cookie).
const AS_COOKIE: u8 = 0x47;

/// What the capture header says, up to the PIC's payload.
struct Pic {
    /// Where the payload starts.
    header: usize,
    /// The wire length after the header (tcpdump's unsigned arithmetic: it may wrap).
    length: u32,
    cookie: [u8; 8],
    cookie_len: usize,
    /// The cookie's first byte when it names the cookie's kind ([`LS_COOKIE`], [`AS_COOKIE`]).
    cookie_type: u8,
    /// The protocol word after the cookie (the PIC may take it from the cookie instead).
    proto: u16,
    /// The direction flag says the packet came in.
    inbound: bool,
}

impl Pic {
    /// The protocol an adaptive-services cookie names (0 IPv4, 0x10 IPv6, 0x20 MPLS,
    /// 0x30 ISO).
    fn lsq_proto(&self) -> u16 {
        u16::from(self.cookie[5] & 0x70)
    }
}

impl Printer {
    /// A Juniper capture of `link`.
    pub(super) fn juniper(&mut self, link: LinkType, data: &[u8], wire_len: u32) -> Step {
        let name = juniper_protocol(link);
        let frame = Bytes::new(data, name);
        let Some(pic) = self.juniper_header(link, frame, wire_len)? else {
            return Ok(());
        };
        let (at, length) = (pic.header, pic.length);
        let body = frame.from(at, name);
        match link {
            LinkType::JuniperEther | LinkType::JuniperPppoe => self.ethernet(body.data, length),
            LinkType::JuniperPpp => self.ppp(frame.from(at, "ppp"), length),
            LinkType::JuniperChdlc => self.chdlc(frame.from(at, "chdlc"), length),
            LinkType::JuniperFrelay => self.fr(frame.from(at, "fr"), length),
            LinkType::JuniperMonitor | LinkType::JuniperServices => {
                // The PIC's own 8-byte header must be there; then IP by its first byte.
                body.slice(0, 8)?;
                self.ip_guess(body, length).map(|_| ())
            }
            LinkType::JuniperGgsn => match pic.cookie[2] {
                2 => self.ipv4(frame.from(at, "ip"), length),
                6 => self.ipv6(frame.from(at, "ip6"), length),
                proto => {
                    let _ = write!(self.out, "unknown GGSN proto ({proto})");
                    Ok(())
                }
            },
            LinkType::JuniperEs => {
                // The IPsec header: SA index, TTL, type, SPI and the tunnel's addresses,
                // which some types leave before the packet (16 bytes rewritten).
                body.slice(0, 16)?;
                let kind = body.u8(3)?;
                let rewrite = match kind {
                    1 | 2 => 0,
                    3..=5 => 16,
                    _ => {
                        let _ = write!(self.out, "ES Invalid type {kind}, length {length}");
                        return Ok(());
                    }
                };
                self.ipv4(frame.from(at + rewrite, "ip"), length.wrapping_sub(rewrite as u32))
            }
            LinkType::JuniperPppoeAtm => {
                let kind = body.be16(0)?;
                let payload = frame.from(at + 2, name);
                match self.ether_payload(kind, payload, length.wrapping_sub(2)) {
                    Some(step) => step,
                    None => {
                        let _ = write!(self.out, "unknown ethertype 0x{kind:04x}");
                        Ok(())
                    }
                }
            }
            LinkType::JuniperMlppp => {
                match pic.proto {
                    // IPv4, unless the cookie says it goes to the routing engine (IS-IS).
                    0 if pic.cookie[4] == 0x0c => return self.ppp(frame.from(at, "ppp"), length),
                    0 => return self.ipv4(frame.from(at, "ip"), length),
                    0x10 => return self.ipv6(frame.from(at, "ip6"), length),
                    0x20 => return self.mpls(frame.from(at, "mpls"), length),
                    0x30 => return self.iso(frame.from(at, "isoclns"), length),
                    _ => {}
                }
                // A cookie that is PPP's OSI protocol is the frame's own first word.
                if u16::from_be_bytes([pic.cookie[0], pic.cookie[1]]) == 0x0023 {
                    self.ppp(frame.from(at - 2, "ppp"), length.wrapping_add(2))
                } else {
                    self.ppp(frame.from(at, "ppp"), length)
                }
            }
            LinkType::JuniperMfr if pic.cookie_len == 0 => self.mfr(body, length),
            LinkType::JuniperMfr if pic.cookie_len == 8 => match pic.proto {
                0 => self.ipv4(frame.from(at, "ip"), length),
                0x10 => self.ipv6(frame.from(at, "ip6"), length),
                0x20 => self.mpls(frame.from(at, "mpls"), length),
                0x30 => self.iso(frame.from(at, "isoclns"), length),
                _ => Ok(()),
            },
            LinkType::JuniperMfr | LinkType::JuniperMlfr => match pic.proto {
                0xfefe if link == LinkType::JuniperMfr => {
                    body.u8(0)?;
                    self.iso(frame.from(at + 1, "isoclns"), length.wrapping_sub(1))
                }
                0x0003 | 0x0300 if link == LinkType::JuniperMlfr => {
                    self.iso(frame.from(at, "isoclns"), length)
                }
                // Q.933, IP, IPv6 after UI: the OSI printer from the NLPID on.
                0x0308 | 0x03cc | 0x038e => {
                    self.iso(frame.from(at - 1, "isoclns"), length.wrapping_add(1))
                }
                proto => {
                    let _ = write!(self.out, "unknown protocol 0x{proto:04x}, length {length}");
                    Ok(())
                }
            },
            LinkType::JuniperAtm1 | LinkType::JuniperAtm2 => self.juniper_atm(link, &pic, frame),
            _ => {
                let _ = write!(self.out, "link type {}, length {wire_len}", link.linktype());
                Ok(())
            }
        }
    }

    /// The ATM PICs: an OAM cell by the cookie, else LLC (NLPID or SNAP), Ethernet over
    /// 1483 (ATM2, outbound, by the cookie's gap count), Cisco's NLPID form, PPP by its
    /// protocol (ATM2), IP by its first byte; anything else prints nothing.
    fn juniper_atm(&mut self, link: LinkType, pic: &Pic, frame: Bytes<'_>) -> Step {
        let (at, length) = (pic.header, pic.length);
        let body = frame.from(at, "oam");
        let atm2 = link == LinkType::JuniperAtm2;
        let oam = if atm2 { pic.cookie[7] & 0x70 != 0 } else { pic.cookie[0] == 0x80 };
        if oam {
            return self.oam(body, length, 0);
        }
        let body = frame.from(at, juniper_protocol(link));
        let first3 = body.slice(0, 3)?;
        if first3 == [0xfe, 0xfe, 0x03] || first3 == [0xaa, 0xaa, 0x03] {
            return self.llc_cooked(frame.from(at, "llc"), length);
        }
        let gap = u32::from_be_bytes([pic.cookie[0], pic.cookie[1], pic.cookie[2], pic.cookie[3]]);
        if atm2 && !pic.inbound && gap & 0x3f != 0 {
            return self.ethernet(body.data, length);
        }
        if first3[0] == 0x03 {
            return self.iso(frame.from(at + 1, "isoclns"), length.wrapping_sub(1));
        }
        if atm2 {
            let proto = body.be16(0)?;
            // The PPP protocols a Juniper router carries.
            if matches!(
                proto,
                0x0021
                    | 0x0023
                    | 0x0281
                    | 0x0283
                    | 0x8021
                    | 0x8023
                    | 0x8281
                    | 0xc021
                    | 0xc023
                    | 0xc223
                    | 0x003d
                    | 0x0057
                    | 0x8057
            ) {
                return self.ppp(frame.from(at, "ppp"), length);
            }
        }
        self.ip_guess(body, length).map(|_| ())
    }

    /// The capture header and the PIC's cookie: `None` when the header itself settles the
    /// line (no magic, no layer-2 header, a damaged extension or cookie).
    fn juniper_header(
        &mut self,
        link: LinkType,
        frame: Bytes<'_>,
        wire_len: u32,
    ) -> Result<Option<Pic>, &'static str> {
        let flags = frame.u8(3)?;
        if frame.slice(0, 3)? != b"MGC" {
            self.push("no magic-number found!");
            return Ok(None);
        }
        let mut header = 4usize;
        if flags & 0x80 != 0 {
            let ext = usize::from(frame.be16(4)?);
            header = 6 + ext;
            frame.slice(6, ext)?;
            let (mut at, mut rest) = (6usize, ext);
            while rest > 2 {
                let (kind, len) = (frame.u8(at)?, usize::from(frame.u8(at + 1)?));
                if kind == 0 || len == 0 {
                    break;
                }
                if len + 2 > rest {
                    let _ = write!(self.out, " [extension_length {rest} < {}] (invalid)", len + 2);
                    return Ok(None);
                }
                at += len + 2;
                rest -= len + 2;
            }
        }
        if flags & 0x02 != 0 {
            // No layer-2 header: IP guessed from its first byte.
            let at = header + 4;
            frame.u8(at)?;
            let length = wire_len.wrapping_sub(at as u32);
            if !self.ip_guess(frame.from(at, juniper_protocol(link)), length)? {
                self.push("no IP-hdr found!");
            }
            return Ok(None);
        }
        let mut pic = Pic {
            header,
            length: wire_len.wrapping_sub(header as u32),
            cookie: [0; 8],
            cookie_len: 0,
            cookie_type: 0,
            proto: 0,
            inbound: flags & 0x01 != 0,
        };
        if let Some(table_len) = cookie_len(link) {
            let first = frame.u8(header)?;
            pic.cookie_len = match first {
                LS_COOKIE => table_len + 2,
                AS_COOKIE => 8,
                _ => table_len,
            };
            if matches!(first, LS_COOKIE | AS_COOKIE) {
                pic.cookie_type = first;
            }
            // FRF.16 child links carry no cookie.
            if link == LinkType::JuniperMfr && first & 0xc0 == 0xc0 {
                pic.cookie_len = 0;
            }
            pic.header += pic.cookie_len;
            pic.length = pic.length.wrapping_sub(pic.cookie_len as u32);
            if pic.cookie_len > 8 {
                self.push(" (invalid)");
                return Ok(None);
            }
            let cookie = frame.slice(header, pic.cookie_len)?;
            pic.cookie[..cookie.len()].copy_from_slice(cookie);
            pic.proto = frame.be16(pic.header)?;
        }
        let at = pic.header;
        match link {
            LinkType::JuniperMlppp if pic.cookie_type == AS_COOKIE => pic.proto = pic.lsq_proto(),
            LinkType::JuniperMlfr | LinkType::JuniperMfr => match pic.cookie_type {
                AS_COOKIE => pic.proto = pic.lsq_proto(),
                // MLFR reads the protocol word as part of its header; MFR only after a
                // link-services cookie.
                LS_COOKIE => {
                    pic.proto = frame.be16(at)?;
                    pic.header += 2;
                    pic.length = pic.length.wrapping_sub(2);
                }
                _ if link == LinkType::JuniperMlfr => {
                    pic.header += 2;
                    pic.length = pic.length.wrapping_sub(2);
                }
                _ => {}
            },
            LinkType::JuniperAtm2 => {
                // A cell-relay control word (of the known forms) before the cell.
                let word = frame.be32(at)?;
                if pic.cookie[7] & 0x70 != 0 && matches!(word, 0 | 0x0800_0000 | 0x0838_0000) {
                    pic.header += 4;
                }
            }
            _ => {}
        }
        Ok(Some(pic))
    }
}

/// The cookie length of a PIC type (before the cookie's own first byte changes it), for
/// the PICs that have one.
fn cookie_len(link: LinkType) -> Option<usize> {
    Some(match link {
        LinkType::JuniperAtm1 | LinkType::JuniperMfr => 4,
        LinkType::JuniperAtm2
        | LinkType::JuniperGgsn
        | LinkType::JuniperMonitor
        | LinkType::JuniperServices => 8,
        LinkType::JuniperMlppp | LinkType::JuniperMlfr => 2,
        LinkType::JuniperPppoe | LinkType::JuniperPppoeAtm | LinkType::JuniperEs => 0,
        _ => return None,
    })
}

/// tcpdump's protocol name for a Juniper link type, as its truncation marker shows it.
pub(super) fn juniper_protocol(link: LinkType) -> &'static str {
    match link {
        LinkType::JuniperMlppp => "juniper_mlppp",
        LinkType::JuniperMlfr => "juniper_mlfr",
        LinkType::JuniperEs => "juniper_es",
        LinkType::JuniperGgsn => "juniper_ggsn",
        LinkType::JuniperMfr => "juniper_mfr",
        LinkType::JuniperAtm2 => "juniper_atm2",
        LinkType::JuniperServices => "juniper_services",
        LinkType::JuniperAtm1 => "juniper_atm1",
        LinkType::JuniperMonitor => "juniper_monitor",
        LinkType::JuniperPppoe => "juniper_pppoe",
        LinkType::JuniperPppoeAtm => "juniper_pppoe_atm",
        LinkType::JuniperEther => "juniper_ether",
        LinkType::JuniperPpp => "juniper_ppp",
        LinkType::JuniperFrelay => "juniper_frelay",
        LinkType::JuniperChdlc => "juniper_chdlc",
        _ => "juniper",
    }
}
