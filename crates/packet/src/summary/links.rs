//! The link types beyond Ethernet, Linux cooked and BSD loopback, as tcpdump 4.99's quiet
//! mode prints them: without `-e` most link layers print nothing of their own header and
//! the line is the payload's (PPP, Cisco HDLC, SLIP, FDDI, Token Ring, ATM, IP over Fibre
//! Channel); a few print a word or a prefix (USB, Bluetooth). A link type tcpdump has no
//! printer for is `UNSUPPORTED` and a hex and ASCII dump of the captured bytes.

use std::fmt::Write as _;

use super::{Bytes, Printer, Step};
use crate::link::{LinkType, OpaqueLink};
use crate::{ethertype, pflog};

impl Printer {
    /// A capture of `link` that [`Printer::link`] does not frame itself.
    pub(super) fn other_link(&mut self, link: LinkType, data: &[u8], wire_len: u32) -> Step {
        match link {
            LinkType::Ipv4 | LinkType::Ipv6 => self.raw_ip(Bytes::new(data, "ipn"), wire_len),
            LinkType::Ppp => self.ppp_link(Bytes::new(data, "ppp"), wire_len),
            LinkType::PppSerial => self.ppp_hdlc(Bytes::new(data, "ppp_hdlc"), wire_len),
            LinkType::CHdlc => self.chdlc(Bytes::new(data, "chdlc"), wire_len),
            LinkType::Slip => self.slip(Bytes::new(data, "slip"), wire_len, 16),
            LinkType::Opaque(OpaqueLink::UsbLinux) if data.len() < 48 => Err("usb_linux_48_byte"),
            LinkType::Opaque(OpaqueLink::UsbLinuxMmapped) if data.len() < 64 => {
                Err("usb_linux_64_byte")
            }
            LinkType::Opaque(OpaqueLink::UsbLinux | OpaqueLink::UsbLinuxMmapped) => {
                self.push("USB");
                Ok(())
            }
            LinkType::Opaque(OpaqueLink::BluetoothHciH4WithPhdr) => {
                self.push("bluetooth");
                if data.len() < 4 {
                    return Err("bluetooth");
                }
                Ok(())
            }
            LinkType::PppPppd => self.ppp_link(Bytes::new(data, "ppp"), wire_len),
            LinkType::PppEther => self.pppoe(Bytes::new(data, "pppoe"), wire_len),
            // tcpdump skips 16 bytes of BSD/OS's 24-byte header.
            LinkType::SlipBsdos => {
                let frame = Bytes::new(data, "slip_bsdos");
                if frame.len() < 16 {
                    return Err("slip_bsdos");
                }
                self.ipv4(frame.from(16, "ip"), wire_len.saturating_sub(16))
            }
            LinkType::NetAnalyzer | LinkType::NetAnalyzerTransparent => {
                let (header, name) = if link == LinkType::NetAnalyzer {
                    (4, "netanalyzer")
                } else {
                    (12, "netanalyzer_transparent")
                };
                if data.len() < header || wire_len < header as u32 {
                    return Err(name);
                }
                self.ethernet(&data[header..], wire_len - header as u32)
            }
            LinkType::Opaque(OpaqueLink::Vsock) => self.vsock(Bytes::new(data, "vsock"), wire_len),
            LinkType::Opaque(OpaqueLink::Pktap) => self.pktap(Bytes::new(data, "pktap"), wire_len),
            // tcpdump's quiet mode prints nothing of these.
            LinkType::PppBsdos => Ok(()),
            LinkType::Mfr => {
                let frame = Bytes::new(data, "mfr");
                frame.slice(0, 2)?;
                self.mfr(frame, wire_len)
            }
            LinkType::Ieee802154 | LinkType::Ieee802154Nofcs => {
                self.ieee802154(Bytes::new(data, "802.15.4"))
            }
            LinkType::Ieee802154Tap => {
                let frame = Bytes::new(data, "802.15.4_tap");
                let len = usize::from(u16::from_le_bytes([frame.u8(2)?, frame.u8(3)?]));
                frame.slice(0, len.max(4))?;
                self.ieee802154(frame.from(len, "802.15.4"))
            }
            LinkType::Ltalk => self.llap(Bytes::new(data, "llap"), wire_len),
            LinkType::SunAtm => self.sunatm(Bytes::new(data, "sunatm"), wire_len),
            LinkType::FrameRelay => self.frame_relay(Bytes::new(data, "fr"), wire_len),
            LinkType::Ieee80211 => self.ieee80211(Bytes::new(data, "802.11"), wire_len, false),
            LinkType::Radiotap => self.radiotap(Bytes::new(data, "802.11_radio"), wire_len),
            LinkType::Avs => self.avs(Bytes::new(data, "802.11_radio_avs"), wire_len),
            LinkType::Prism => {
                let frame = Bytes::new(data, "prism");
                if frame.be32(0)? & 0xffff_f000 == 0x8021_1000 {
                    return self.avs(frame.from(0, "802.11_radio_avs"), wire_len);
                }
                if frame.len() < 144 || wire_len < 144 {
                    return Err("prism");
                }
                self.ieee80211(frame.from(144, "802.11"), wire_len - 144, false)
            }
            LinkType::Ppi => self.ppi(Bytes::new(data, "ppi"), wire_len),
            LinkType::ArcnetBsd => self.arcnet(Bytes::new(data, "arcnet"), wire_len, 2),
            LinkType::ArcnetLinux => self.arcnet(Bytes::new(data, "arcnet_linux"), wire_len, 4),
            LinkType::IpOverIb => {
                let frame = Bytes::new(data, "ipoib");
                // tcpdump reads a 44-byte header (the type at 40).
                if frame.len() < 44 || wire_len < 44 {
                    return Err("ipoib");
                }
                let kind = frame.be16(40)?;
                match self.ether_payload(kind, frame.from(44, "ipoib"), wire_len - 44) {
                    Some(step) => step,
                    None => {
                        let name = super::llc::ethertype_label(kind).unwrap_or("Unknown");
                        let _ = write!(self.out, ", ethertype {name}, length {wire_len}: ");
                        Ok(())
                    }
                }
            }
            LinkType::Pflog => self.pflog(Bytes::new(data, "pflog"), wire_len),
            LinkType::DsaTagBrcmPrepend => {
                if data.len() < 4 || wire_len < 4 {
                    return Err("brcm-tag-prepend");
                }
                self.ethernet(&data[4..], wire_len - 4)
            }
            LinkType::DsaTagBrcm => self.switch_tag(data, wire_len, 4, "brcm-tag"),
            LinkType::DsaTagDsa => self.switch_tag(data, wire_len, 4, "dsa"),
            LinkType::DsaTagEdsa => self.switch_tag(data, wire_len, 8, "edsa"),
            LinkType::SymantecFirewall => self.symantec(Bytes::new(data, "symantec"), wire_len),
            LinkType::AppleIpOverIeee1394 => self.ap1394(Bytes::new(data, "ap1394"), wire_len),
            LinkType::Nflog => self.nflog(Bytes::new(data, "nflog"), wire_len),
            LinkType::Ipnet => self.ipnet(Bytes::new(data, "ipnet"), wire_len),
            LinkType::Enc => self.enc(Bytes::new(data, "enc"), wire_len),
            LinkType::Fddi => {
                let frame = Bytes::new(data, "fddi");
                if frame.len() < 13 || wire_len < 13 {
                    return Err("fddi");
                }
                let (dst, src) = (frame.mac(1, 6)?, frame.mac(7, 6)?);
                self.llc(frame.from(13, "llc"), wire_len - 13, (&src, &dst))
            }
            LinkType::TokenRing => {
                let frame = Bytes::new(data, "token-ring");
                if frame.len() < 14 || wire_len < 14 {
                    return Err("token-ring");
                }
                let dst = frame.mac(2, 6)?;
                let mut src = frame.mac(8, 6)?;
                let mut header = 14usize;
                // Source routed: the routing control field and the route's segments, then
                // the largest frame the route carries; the source without the RII bit.
                if frame.u8(8)? & 0x80 != 0 {
                    let mut bytes = frame.slice(8, 6)?.to_vec();
                    bytes[0] &= 0x7f;
                    src = Bytes::new(&bytes, "token-ring").mac(0, 6)?;
                    let rcf = frame.be16(14)?;
                    let rif = usize::from((rcf & 0x1f00) >> 8);
                    header += rif;
                    frame.slice(0, header)?;
                    let _ = write!(self.out, "rt = {rcf:x}");
                    for seg in 0..rif.saturating_sub(2) / 2 {
                        let _ = write!(self.out, ":{:x}", frame.be16(16 + 2 * seg)?);
                    }
                    const LARGEST: [&str; 8] =
                        ["516", "1500", "2052", "4472", "8144", "11407", "17800", "??"];
                    let _ = write!(self.out, " ({}) ", LARGEST[usize::from((rcf & 0x70) >> 4)]);
                }
                let length = wire_len.wrapping_sub(header as u32);
                self.llc(frame.from(header, "llc"), length, (&src, &dst))
            }
            // Linux CLIP: 802.2 when the frame starts with SNAP's header for an
            // EtherType (as far as it was captured), else IP.
            LinkType::AtmClip => {
                let n = data.len().min(6).min(wire_len as usize);
                if n == 0 {
                    return Err("cip");
                }
                if data[..n] == [0xaa, 0xaa, 0x03, 0, 0, 0][..n] {
                    self.llc_cooked(Bytes::new(data, "llc"), wire_len)
                } else {
                    self.ipv4(Bytes::new(data, "ip"), wire_len)
                }
            }
            // RFC 1483: Cisco's NLPID form, 802.2 for SNAP, ISO and IP, and anything else
            // after the 20-byte 802.6 header Fore's driver put first.
            LinkType::AtmRfc1483 => {
                let frame = Bytes::new(data, "atm");
                if frame.u8(0)? == 0x03 {
                    return self.iso(frame.from(1, "isoclns"), wire_len.wrapping_sub(1));
                }
                let header = frame.slice(0, 3)?;
                if matches!(header, [0xaa, 0xaa, 0x03] | [0xfe, 0xfe, 0x03] | [0x06, 0x06, 0x03]) {
                    return self.llc_cooked(frame.from(0, "llc"), wire_len);
                }
                if frame.len() < 20 {
                    return Err("atm");
                }
                self.llc_cooked(frame.from(20, "llc"), wire_len.wrapping_sub(20))
            }
            LinkType::IpOverFc => {
                let frame = Bytes::new(data, "ipfc");
                if frame.len() < 16 || wire_len < 16 {
                    return Err("ipfc");
                }
                let (dst, src) = (frame.mac(2, 6)?, frame.mac(10, 6)?);
                self.llc(frame.from(16, "llc"), wire_len - 16, (&src, &dst))
            }
            _ if link.is_juniper() && decoded_by_tcpdump(link) => {
                self.juniper(link, data, wire_len)
            }
            _ if !decoded_by_tcpdump(link) => {
                self.push("UNSUPPORTED");
                self.hex_ascii_lines(data);
                Ok(())
            }
            // Not yet printed as tcpdump does: a line that says what it is.
            _ => {
                let _ = write!(self.out, "link type {}, length {wire_len}", link.linktype());
                Ok(())
            }
        }
    }

    /// DLT_PPP: the address and control bytes, then the protocol (tcpdump's ppp_print).
    fn ppp_link(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 2 {
            return Err("ppp");
        }
        self.ppp(frame, wire_len)
    }

    /// PPP in HDLC framing: the address byte says PPP (0xff) or Cisco HDLC (0x0f, 0x8f).
    fn ppp_hdlc(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 2 {
            return Err("ppp_hdlc");
        }
        match frame.u8(0)? {
            0x0f | 0x8f => self.chdlc(frame.from(0, "chdlc"), wire_len),
            // tcpdump names the protocol, then prints the frame as PPP.
            0xff if frame.len() < 4 => Err("ppp_hdlc"),
            0xff => {
                let proto = frame.be16(2)?;
                let _ = match super::tunnel::ppp_name(proto) {
                    Some(name) => write!(self.out, "{name}: "),
                    None => write!(self.out, "unknown PPP protocol (0x{proto:04x}): "),
                };
                self.ppp_protocol(proto, frame.from(4, "ppp"), wire_len.saturating_sub(4))
            }
            _ => self.ppp(frame.from(0, "ppp"), wire_len),
        }
    }

    /// Cisco HDLC: address, control, then an EtherType.
    pub(super) fn chdlc(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 4 || wire_len < 4 {
            return Err("chdlc");
        }
        let kind = frame.be16(2)?;
        let payload = frame.from(4, "chdlc");
        let length = wire_len - 4;
        match kind {
            ethertype::IP => self.ipv4(payload.from(0, "ip"), length),
            ethertype::IPV6 => self.ipv6(payload.from(0, "ip6"), length),
            ethertype::MPLS | ethertype::MPLS_MULTI => self.mpls(payload.from(0, "mpls"), length),
            // Cisco's serial line address resolution.
            0x8035 => {
                let _ = write!(self.out, "SLARP (length: {length}), ");
                let slarp = payload.from(0, "slarp");
                slarp.slice(0, 14)?;
                let _ = match slarp.be32(0)? {
                    0 => write!(self.out, "request"),
                    1 => write!(self.out, "reply {}/{}", slarp.ipv4(4)?, slarp.ipv4(8)?),
                    2 => write!(
                        self.out,
                        "keepalive: mineseen=0x{:08x}, yourseen=0x{:08x}, reliability=0x{:04x}",
                        slarp.be32(4)?,
                        slarp.be32(8)?,
                        slarp.be16(12)?
                    ),
                    code => {
                        let _ = write!(self.out, "0x{code:02x} unknown");
                        self.hex_lines(slarp.from(4, "slarp"), length.saturating_sub(4));
                        Ok(())
                    }
                };
                Ok(())
            }
            _ => {
                let _ = write!(self.out, "unknown CHDLC protocol (0x{kind:04x})");
                Ok(())
            }
        }
    }

    /// SLIP and BSD/OS SLIP: a pseudo-header of `header` bytes, then IPv4 or IPv6 by the
    /// version nibble.
    fn slip(&mut self, frame: Bytes<'_>, wire_len: u32, header: usize) -> Step {
        let ip = frame.from(header, "ip");
        let length = wire_len.saturating_sub(header as u32);
        match frame.u8(header)? >> 4 {
            4 => self.ipv4(ip, length),
            6 => self.ipv6(ip.from(0, "ip6"), length),
            version => {
                let _ = write!(self.out, "ip v{version}");
                Ok(())
            }
        }
    }

    /// An 802.11 frame: data frames print what their LLC header carries (the line of the
    /// packet inside), control frames their kind and address. `pad`: the header is padded
    /// to 4 bytes (radiotap's flag).
    fn ieee80211(&mut self, frame: Bytes<'_>, wire_len: u32, pad: bool) -> Step {
        if frame.len() < 2 || wire_len < 2 {
            return Err("802.11");
        }
        let (fc0, fc1) = (frame.u8(0)?, frame.u8(1)?);
        match (fc0 >> 2) & 3 {
            0 => {
                let name = match fc0 >> 4 {
                    0 => "Assoc Request",
                    1 => "Assoc Response",
                    2 => "ReAssoc Request",
                    3 => "ReAssoc Response",
                    4 => "Probe Request",
                    5 => "Probe Response",
                    8 => "Beacon",
                    9 => "ATIM",
                    10 => "Disassociation",
                    11 => "Authentication",
                    12 => "DeAuthentication",
                    13 => "Action",
                    _ => "",
                };
                frame.slice(0, 24)?;
                if wire_len < 24 {
                    return Err("802.11");
                }
                if name.is_empty() {
                    let _ = write!(self.out, "Unhandled Management subtype({:x})", fc0 >> 4);
                } else {
                    self.push(name);
                }
                let src = frame.mac(10, 6)?;
                let body = frame.from(24, "802.11");
                self.wlan_mgmt(fc0 >> 4, fc1 & 0x40 != 0, &src, body, wire_len - 24)
            }
            1 => {
                let mac = |at: usize| frame.mac(at, 6);
                let _ = match fc0 >> 4 {
                    0xa => {
                        frame.slice(0, 16)?;
                        let aid = u16::from_le_bytes([frame.u8(2)?, frame.u8(3)?]);
                        write!(self.out, "Power Save-Poll AID({aid:x})")
                    }
                    0xb => {
                        frame.slice(0, 16)?;
                        write!(self.out, "Request-To-Send TA:{} ", mac(10)?)
                    }
                    0xc => {
                        frame.slice(0, 10)?;
                        write!(self.out, "Clear-To-Send RA:{} ", mac(4)?)
                    }
                    0xd => {
                        frame.slice(0, 10)?;
                        write!(self.out, "Acknowledgment RA:{} ", mac(4)?)
                    }
                    0xe => {
                        frame.slice(0, 16)?;
                        write!(self.out, "CF-End RA:{} ", mac(4)?)
                    }
                    _ => write!(self.out, "Unknown Ctrl Subtype"),
                };
                Ok(())
            }
            2 => {
                let ds = fc1 & 0x03;
                let mut header: usize = 24 + if ds == 3 { 6 } else { 0 };
                if fc0 & 0x80 != 0 {
                    header += 2;
                }
                if pad {
                    header = header.next_multiple_of(4);
                }
                if frame.len() < header || wire_len < header as u32 {
                    return Err("802.11");
                }
                // Null data and the other subtypes without a body.
                if fc0 & 0x40 != 0 {
                    return Ok(());
                }
                let (da, sa) = match ds {
                    0 => (frame.mac(4, 6)?, frame.mac(10, 6)?),
                    // To the DS: from addr2 to addr3; from the DS: from addr3 to addr1.
                    1 => (frame.mac(16, 6)?, frame.mac(10, 6)?),
                    2 => (frame.mac(4, 6)?, frame.mac(16, 6)?),
                    _ => (frame.mac(16, 6)?, frame.mac(24, 6)?),
                };
                self.llc(frame.from(header, "llc"), wire_len - header as u32, (&sa, &dst_of(&da)))
            }
            kind => {
                let _ = write!(self.out, "unknown 802.11 frame type ({kind})");
                Ok(())
            }
        }
    }

    /// A radiotap header: the fields tcpdump shows (TSFT, flags, rate, channel; an unknown
    /// bit ends the parse), then the 802.11 frame (without its FCS when the flags say it
    /// has one).
    fn radiotap(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 8 {
            return Err("802.11_radio");
        }
        let len = usize::from(u16::from_le_bytes([frame.u8(2)?, frame.u8(3)?]));
        if frame.len() < len || len < 8 {
            return Err("802.11_radio");
        }
        let mut words = Vec::new();
        let mut at = 4;
        loop {
            let w = frame.slice(at, 4)?;
            let word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            words.push(word);
            at += 4;
            if word & 0x8000_0000 == 0 {
                break;
            }
        }
        let mut flags = 0u8;
        'fields: for (i, &word) in words.iter().enumerate() {
            for bit in 0..31u32 {
                if word & (1 << bit) == 0 {
                    continue;
                }
                let field = i as u32 * 32 + bit;
                let (align, size) = match field {
                    0 => (8, 8),
                    1 | 2 => (1, 1),
                    3 => (2, 4),
                    _ => {
                        let _ = write!(self.out, "[bit {field}] ");
                        break 'fields;
                    }
                };
                at = at.next_multiple_of(align);
                let b = frame.slice(at, size)?;
                match field {
                    0 => {
                        let tsft =
                            u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                        let _ = write!(self.out, "{tsft}us tsft ");
                    }
                    1 => {
                        flags = b[0];
                        for (bit, name) in [
                            (0x01, "cfp "),
                            (0x02, "short preamble "),
                            (0x04, "wep "),
                            (0x08, "fragmented "),
                            (0x40, "bad-fcs "),
                        ] {
                            if flags & bit != 0 {
                                self.push(name);
                            }
                        }
                    }
                    2 => {
                        let rate = u32::from(b[0]);
                        let _ = write!(
                            self.out,
                            "{}.{} Mb/s ",
                            rate / 2,
                            if rate % 2 == 1 { 5 } else { 0 }
                        );
                    }
                    _ => {
                        let freq = u16::from_le_bytes([b[0], b[1]]);
                        let chan = u16::from_le_bytes([b[2], b[3]]);
                        let _ = write!(self.out, "{freq} MHz");
                        // CCK or OFDM on 2 GHz, OFDM on 5 GHz.
                        if chan & 0x0100 != 0 && chan & 0x0040 != 0 {
                            self.push(" 11a");
                        } else if chan & 0x0080 != 0 && (chan & 0x0400 != 0 || chan & 0x0040 != 0) {
                            self.push(" 11g");
                        } else if chan & 0x00a0 == 0x00a0 {
                            self.push(" 11b");
                        }
                        self.push(" ");
                    }
                }
                at += size;
            }
        }
        let mut body = frame.from(len, "802.11");
        let mut length = wire_len.saturating_sub(len as u32);
        if flags & 0x10 != 0 {
            // The frame ends in its FCS, which is not the frame's: the length loses it,
            // the captured bytes only where they reach into it.
            length = length.saturating_sub(4);
            body = body.cut(length as usize);
        }
        self.ieee80211(body, length, flags & 0x20 != 0)
    }

    /// An AVS radio header: its big-endian length at 4.
    fn avs(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 8 {
            return Err(frame.proto);
        }
        let len = frame.be32(4)? as usize;
        if frame.len() < len || wire_len < len as u32 {
            return Err(frame.proto);
        }
        self.ieee80211(frame.from(len, "802.11"), wire_len - len as u32, false)
    }

    /// PPI: its little-endian length at 2 and the DLT of what follows at 4.
    fn ppi(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 8 {
            return Err("ppi");
        }
        let len = usize::from(u16::from_le_bytes([frame.u8(2)?, frame.u8(3)?]));
        if frame.len() < len || wire_len < len as u32 {
            return Err("ppi");
        }
        let b = frame.slice(4, 4)?;
        let dlt = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let rest = frame.from(len, "ppi");
        match dlt {
            105 => self.ieee80211(rest.from(0, "802.11"), wire_len - len as u32, false),
            1 => self.ethernet(rest.data, wire_len - len as u32),
            _ => Ok(()),
        }
    }

    /// ARCnet: the protocol ID at `at` (after the addresses, and Linux's offset field);
    /// the old IP and ARP IDs end the header there, the others have a split flag and a
    /// sequence number after it.
    fn arcnet(&mut self, frame: Bytes<'_>, wire_len: u32, at: usize) -> Step {
        let proto = frame.u8(at)?;
        let old = matches!(proto, 0xf0 | 0xf1 | 0x80);
        let header = if old { at + 1 } else { at + 4 };
        if frame.len() < header || wire_len < header as u32 {
            if !old && at == 2 {
                // tcpdump shows BSD's addresses and length before giving up.
                let (src, dst) = (frame.u8(0)?, frame.u8(1)?);
                let _ = write!(self.out, "{src:02x} {dst:02x} {wire_len}:  phds");
            }
            return Err(frame.proto);
        }
        let payload = frame.from(header, frame.proto);
        let length = wire_len - header as u32;
        match proto {
            0xd4 | 0xf0 => self.ipv4(payload.from(0, "ip"), length),
            0xc4 => self.ipv6(payload.from(0, "ip6"), length),
            0xd5 | 0xf1 | 0xd6 => self.arp(payload.from(0, "arp"), length),
            0xfa => self.ipx(payload.from(0, "ipx"), length),
            _ => {
                self.hex_ascii_lines(payload.data);
                Ok(())
            }
        }
    }

    /// OpenBSD pflog: rule, reason, action, direction and interface, then the packet.
    fn pflog(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        let header = usize::from(frame.u8(pflog::LENGTH)?).next_multiple_of(4);
        if frame.len() < header.max(pflog::DIR + 1) || wire_len < header as u32 {
            return Err("pflog");
        }
        let text = |at: usize| -> Result<String, &'static str> {
            let b = frame.slice(at, pflog::NAME_LEN)?;
            let end = b.iter().position(|&c| c == 0).unwrap_or(pflog::NAME_LEN);
            Ok(String::from_utf8_lossy(&b[..end]).into_owned())
        };
        let (payload, length) = (frame.from(header, "pflog"), wire_len - header as u32);
        // The header is shown (without -e) only before a packet tcpdump cannot decode.
        match u32::from(frame.u8(pflog::AF)?) {
            2 => return self.ipv4(payload.from(0, "ip"), length),
            f if crate::af::INET6_BSD.contains(&f) => {
                return self.ipv6(payload.from(0, "ip6"), length)
            }
            _ => {}
        }
        let (rule, subrule) = (frame.be32(pflog::RULENR)?, frame.be32(pflog::SUBRULENR)?);
        let ruleset = text(pflog::RULESET)?;
        let _ = if subrule == u32::MAX {
            write!(self.out, "rule {rule}/")
        } else {
            write!(self.out, "rule {rule}.{ruleset}.{subrule}/")
        };
        // tcpdump 4.99's tables, as they are (its output, not pf's names: those are
        // `pflog::REASONS` and `pflog::ACTIONS`): no name for reason 3, "3(short)" for 4,
        // "block" for action 1, and no action 3.
        let reason = frame.u8(pflog::REASON)?;
        let reason_name = match reason {
            0 => Some("0(match)"),
            1 => Some("1(bad-offset)"),
            2 => Some("2(fragment)"),
            4 => Some("3(short)"),
            5 => Some("5(memory)"),
            6 => Some("6(bad-timestamp)"),
            7 => Some("7(congestion)"),
            8 => Some("8(ip-option)"),
            9 => Some("9(proto-cksum)"),
            10 => Some("10(state-mismatch)"),
            11 => Some("11(state-insert)"),
            12 => Some("12(state-limit)"),
            13 => Some("13(src-limit)"),
            14 => Some("14(synproxy)"),
            _ => None,
        };
        let _ = match reason_name {
            Some(name) => write!(self.out, "{name}: "),
            None => write!(self.out, "unkn({reason}): "),
        };
        const ACTIONS: [&str; 11] = [
            "pass",
            "block",
            "scrub",
            "",
            "nat",
            "nonat",
            "binat",
            "nobinat",
            "rdr",
            "nordr",
            "synproxy-drop",
        ];
        let action = frame.u8(pflog::ACTION)?;
        let _ = match ACTIONS.get(usize::from(action)).filter(|name| !name.is_empty()) {
            Some(name) => write!(self.out, "{name} "),
            None => write!(self.out, "unkn({action}) "),
        };
        let dir = frame.u8(pflog::DIR)?;
        let _ = match dir {
            pflog::DIR_INOUT => write!(self.out, "in/out"),
            pflog::DIR_IN => write!(self.out, "in"),
            pflog::DIR_OUT => write!(self.out, "out"),
            other => write!(self.out, "unkn({other})"),
        };
        let _ = write!(self.out, " on {}: ", text(pflog::IFNAME)?);
        Ok(())
    }

    /// SunATM: the pseudo-header (traffic type, VPI, VCI), then by the well-known VCIs on
    /// VPI 0 (signalling, ILMI, meta-signalling), else LANE (an LE header, then Ethernet,
    /// or an LE control frame) or 802.2 LLC.
    fn sunatm(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        frame.slice(0, 4)?;
        let (kind, vpi, vci) = (frame.u8(0)? & 0x0f, frame.u8(1)?, frame.be16(2)?);
        let pdu = frame.from(4, "atm");
        let length = wire_len.saturating_sub(4);
        if vpi == 0 {
            match vci {
                1 => {
                    self.push("meta: ");
                    return Ok(());
                }
                2 => {
                    self.push("broadcast sig: ");
                    return Ok(());
                }
                3 | 4 => return self.oam(pdu, length, 1),
                // Signalling: SSCOP unless it is Q.2931 (protocol 9, not decoded here).
                5 if pdu.u8(0)? != 9 => {
                    let _ = write!(self.out, "SSCOP, proto {} ", pdu.u8(0)?);
                    return Ok(());
                }
                _ => {}
            }
        }
        if kind == 1 {
            let lane = pdu.from(0, "lane");
            if lane.be16(0)? == 0xff00 {
                let _ = write!(
                    self.out,
                    "lec: proto {:x} vers {:x} opcode-#{}",
                    lane.u8(2)?,
                    lane.u8(3)?,
                    lane.be16(4)?
                );
                return Ok(());
            }
            let _ = write!(self.out, "lecid:{} ", lane.be16(0)?);
            return self.ethernet(lane.from(2, "lane").data, length.saturating_sub(2));
        }
        pdu.u8(0)?;
        self.llc_cooked(pdu.from(0, "llc"), length)
    }

    /// IEEE 802.15.4: a data frame with short addresses and PAN ID compression shows its
    /// destination PAN and address and its source address.
    fn ieee802154(&mut self, frame: Bytes<'_>) -> Step {
        frame.slice(0, 3)?;
        let fc = u16::from_le_bytes([frame.u8(0)?, frame.u8(1)?]);
        let short_both = (fc >> 10) & 3 == 2 && (fc >> 14) & 3 == 2;
        if fc & 7 != 1 || fc & 0x40 == 0 || !short_both {
            let _ = write!(self.out, "IEEE 802.15.4 frame control 0x{fc:04x}");
            return Ok(());
        }
        let _ = write!(self.out, "IEEE 802.15.4 Data packet v{} ", (fc >> 12) & 3);
        // tcpdump names the field it ran out in (the source address too is "dst_addr").
        let mut field = |at: usize, what: &str, after: &str| -> bool {
            match (frame.u8(at), frame.u8(at + 1)) {
                (Ok(lo), Ok(hi)) => {
                    let _ = write!(self.out, "{:04x}{after}", u16::from_le_bytes([lo, hi]));
                    true
                }
                _ => {
                    let _ = write!(self.out, "[ERROR: Truncated before {what}]");
                    false
                }
            }
        };
        let _ =
            field(3, "dst_pan", ":") && field(5, "dst_addr", " < -:") && field(7, "dst_addr", " ");
        Ok(())
    }

    /// An OSI PDU by its NLPID: IP and IPv6 inside, the null network layer's length, and
    /// (not decoded here: CLNP, ES-IS, IS-IS keep tcpdump's line unmatched) an unknown
    /// NLPID named, with its bytes.
    pub(super) fn iso(&mut self, pdu: Bytes<'_>, length: u32) -> Step {
        match pdu.u8(0)? {
            0xcc => self.ipv4(pdu.from(1, "ip"), length.saturating_sub(1)),
            0x8e => self.ipv6(pdu.from(1, "ip6"), length.saturating_sub(1)),
            0x00 => {
                let _ = write!(self.out, ", length: {length}");
                Ok(())
            }
            0xcf => self.ppp(pdu.from(1, "ppp"), length.saturating_sub(1)),
            0x08 => self.q933(pdu.from(1, "q.933"), length.saturating_sub(1)),
            nlpid @ 0x81..=0x83 => {
                let _ = write!(self.out, "OSI NLPID 0x{nlpid:02x}, length: {length}");
                Ok(())
            }
            nlpid => {
                let _ = write!(self.out, "OSI NLPID 0x{nlpid:02x} unknown, length: {length}");
                self.hex_lines(pdu, length);
                Ok(())
            }
        }
    }

    /// Linux vsock monitoring: source and destination CIDs (little-endian 64-bit) and
    /// ports, the operation and the transport.
    fn vsock(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        let h = frame.slice(0, 32)?;
        let u64le = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let u32le = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
        let u16le = |at: usize| u16::from_le_bytes([h[at], h[at + 1]]);
        let (op, transport) = (u16le(24), u16le(26));
        let _ = match transport {
            0 => write!(self.out, "UNKNOWN"),
            1 => write!(self.out, "NO_INFO"),
            2 => write!(self.out, "VIRTIO"),
            other => write!(self.out, "Invalid transport ({other})"),
        };
        let _ = write!(self.out, " {}.{} > {}.{} ", u64le(0), u32le(16), u64le(8), u32le(20));
        let _ = match op {
            0 => write!(self.out, "UNKNOWN"),
            1 => write!(self.out, "CONNECT"),
            2 => write!(self.out, "DISCONNECT"),
            3 => write!(self.out, "CONTROL"),
            4 => write!(self.out, "PAYLOAD"),
            other => write!(self.out, " invalid op ({other})"),
        };
        // tcpdump shows the captured length here.
        let _ = write!(self.out, ", length {}", frame.len().min(wire_len as usize));
        Ok(())
    }

    /// LocalTalk: the LLAP header (destination, source, type), then a long DDP header
    /// (networks, nodes and sockets) and the DDP type.
    fn llap(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        frame.slice(0, 3)?;
        let kind = frame.u8(2)?;
        if kind != 2 {
            let _ = write!(
                self.out,
                "{} > {} at-lap#{kind} {}",
                frame.u8(1)?,
                frame.u8(0)?,
                wire_len.saturating_sub(3)
            );
            return Ok(());
        }
        let ddp = frame.from(3, "ddp");
        // Too short on the wire for the header, or only in the capture.
        if wire_len.saturating_sub(3) < 13 {
            let _ = write!(self.out, " [|ddp {}]", wire_len.saturating_sub(3));
            return Ok(());
        }
        ddp.slice(0, 13)?;
        // Node 255 is the network's broadcast: tcpdump shows the network alone.
        let addr = |net: u16, node: u8| {
            if node == 255 {
                net.to_string()
            } else {
                format!("{net}.{node}")
            }
        };
        let (dnet, snet) = (ddp.be16(4)?, ddp.be16(6)?);
        let (dnode, snode, dskt, sskt) = (ddp.u8(8)?, ddp.u8(9)?, ddp.u8(10)?, ddp.u8(11)?);
        let length = wire_len.saturating_sub(3 + 13);
        let _ = write!(self.out, "{}.{sskt} > {}.{dskt}: ", addr(snet, snode), addr(dnet, dnode));
        let _ = match ddp.u8(12)? {
            1 => write!(self.out, "at-rtmp {length}"),
            other => write!(self.out, "at-#{other} {length}"),
        };
        Ok(())
    }

    /// Apple's pktap: a header of its own little-endian length (at least 108 bytes) with
    /// the DLT of what follows at 4; tcpdump's checks of that length, then the packet.
    fn pktap(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        let b = frame.slice(0, 4)?;
        let header = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let _ = if wire_len < 108 {
            write!(self.out, " (packet too short, {wire_len} < 108) (invalid)")
        } else if header < 108 {
            write!(self.out, " (pkt_len too small, {header} < 108) (invalid)")
        } else if header > wire_len {
            write!(self.out, " (pkt_len too big, {header} > {wire_len}) (invalid)")
        } else {
            let rest = frame.from(header as usize, "pktap");
            frame.slice(0, header as usize)?;
            let d = frame.slice(4, 4)?;
            return match u32::from_le_bytes([d[0], d[1], d[2], d[3]]) {
                1 => self.ethernet(rest.data, wire_len - header),
                _ => Ok(()),
            };
        };
        Ok(())
    }

    /// An OAM cell: its header's VPI, VCI, payload type and CLP; `hec` is 1 when a HEC
    /// byte comes first.
    pub(super) fn oam(&mut self, cell: Bytes<'_>, length: u32, hec: usize) -> Step {
        let header = cell.be32(hec)?;
        // tcpdump reads the cell type after the header.
        cell.u8(4 + hec)?;
        let (vpi, vci) = ((header >> 20) & 0xff, (header >> 4) & 0xffff);
        let flow = match vci {
            3 => "OAM F4 (segment)",
            4 => "OAM F4 (end)",
            _ => "OAM F5",
        };
        let payload = match (header >> 1) & 0x7 {
            0 => "user data, uncongested, SDU 0",
            1 => "user data, uncongested, SDU 1",
            2 => "user data, congested, SDU 0",
            3 => "user data, congested, SDU 1",
            4 => "VCC OAM F5 flow segment",
            5 => "VCC OAM F5 flow end-to-end",
            6 => "Traffic Control and resource Mgmt",
            _ => "Unknown",
        };
        let _ = write!(
            self.out,
            "{flow}, vpi {vpi}, vci {vci}, payload [ {payload} ], clp {}, length {length}",
            header & 1
        );
        Ok(())
    }

    /// tcpdump's guess at a packet without a link header: IPv4 by a first byte of 0x45 to
    /// 0x4f, IPv6 by 0x60 to 0x6f; anything else prints nothing (and is `false`).
    pub(super) fn ip_guess(
        &mut self,
        packet: Bytes<'_>,
        length: u32,
    ) -> Result<bool, &'static str> {
        match packet.u8(0)? {
            0x45..=0x4f => self.ipv4(packet.from(0, "ip"), length).map(|()| true),
            0x60..=0x6f => self.ipv6(packet.from(0, "ip6"), length).map(|()| true),
            _ => Ok(false),
        }
    }

    /// A switch tag of `len` bytes after the source MAC (Broadcom's, Marvell's DSA and
    /// EDSA): the tag's summary, then the frame as Ethernet without it.
    fn switch_tag(&mut self, data: &[u8], wire_len: u32, len: usize, name: &'static str) -> Step {
        let frame = Bytes::new(data, name);
        if frame.len() < 14 + len || wire_len < 14 + len as u32 {
            return Err(name);
        }
        let tag = frame.slice(12, len)?;
        match len {
            8 => {
                let _ = write!(self.out, "EDSA 0x{:04x}, ", u16::from_be_bytes([tag[0], tag[1]]));
                self.dsa_tag(&tag[4..]);
            }
            _ if name == "dsa" => {
                self.push("DSA ");
                self.dsa_tag(tag);
            }
            _ => brcm_tag(&mut self.out, tag),
        }
        let mut untagged = data[..12].to_vec();
        untagged.extend_from_slice(&data[12 + len..]);
        self.ethernet_shown(&untagged, wire_len - len as u32, wire_len)
    }

    /// A Marvell DSA tag without `-e`: who sent it where, and its VLAN.
    fn dsa_tag(&mut self, tag: &[u8]) {
        let (dev, port) = (tag[0] & 0x1f, tag[1] >> 3);
        let _ = match tag[0] >> 6 {
            0 => write!(self.out, "port {dev}.{port} > CPU, "),
            1 => write!(self.out, "CPU > port {dev}.{port}, "),
            2 => {
                let way = if tag[1] & 0x04 != 0 { "Rx" } else { "Tx" };
                write!(self.out, "port {dev}.{port} > {way} Sniffer, ")
            }
            _ => {
                let what = if tag[1] & 0x04 != 0 { "trunk" } else { "port" };
                write!(self.out, "Forward {what} {dev}.{port}, ")
            }
        };
        let vid = (u16::from(tag[2] & 0x0f) << 8) | u16::from(tag[3]);
        let tagged = if tag[0] & 0x20 != 0 { 't' } else { 'u' };
        let _ = write!(self.out, "VLAN {vid}{tagged}, ");
    }

    /// Symantec's firewall header (44 bytes, the EtherType at 6).
    fn symantec(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 44 || wire_len < 44 {
            return Err("symantec");
        }
        let kind = frame.be16(6)?;
        let length = wire_len - 44;
        if kind <= ethertype::ETHERMTU {
            let _ = write!(self.out, "invalid ethertype {kind}, length {wire_len}: ");
            return Ok(());
        }
        match self.ether_payload(kind, frame.from(44, "symantec"), length) {
            Some(step) => step,
            None => {
                let _ = match super::llc::ethertype_label(kind) {
                    Some(name) => write!(self.out, "{name}, length {wire_len}: "),
                    None => {
                        write!(self.out, "Unknown Ethertype (0x{kind:04x}), length {wire_len}: ")
                    }
                };
                Ok(())
            }
        }
    }

    /// Apple IP over FireWire: 8-byte destination and source, then an EtherType.
    fn ap1394(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 18 || wire_len < 18 {
            return Err("ap1394");
        }
        let kind = frame.be16(16)?;
        match self.ether_payload(kind, frame.from(18, "ap1394"), wire_len - 18) {
            Some(step) => step,
            None => {
                let (dst, src) = (frame.mac(0, 8)?, frame.mac(8, 8)?);
                let _ = match super::llc::ethertype_label(kind) {
                    Some(name) => write!(self.out, "{src} > {dst}, {name}, length {wire_len}: "),
                    None => write!(
                        self.out,
                        "{src} > {dst}, Unknown Ethertype (0x{kind:04x}), length {wire_len}: "
                    ),
                };
                Ok(())
            }
        }
    }

    /// NFLOG: family, version, resource ID, then little-endian TLVs (padded to 4 bytes);
    /// the payload TLV (type 9) holds the packet.
    fn nflog(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 4 || wire_len < 4 {
            return Err("nflog");
        }
        let family = frame.u8(0)?;
        let mut at = 4usize;
        let mut length = wire_len - 4;
        loop {
            if length < 4 {
                return Ok(());
            }
            // The record says there is more than was captured.
            if !frame.has(at + 4) {
                return Err("nflog");
            }
            let b = frame.slice(at, 4)?;
            let size = u16::from_le_bytes([b[0], b[1]]);
            let kind = u16::from_le_bytes([b[2], b[3]]);
            if size < 4 {
                return Ok(());
            }
            if kind == 9 {
                // The payload runs to the end of the record (the TLV's own length is not
                // what tcpdump goes by).
                let payload = frame.from(at + 4, "nflog");
                let length = length - 4;
                return match family {
                    2 => self.ipv4(payload.from(0, "ip"), length),
                    10 => self.ipv6(payload.from(0, "ip6"), length),
                    _ => Ok(()),
                };
            }
            let size = u32::from(size).next_multiple_of(4);
            if length < size {
                return Ok(());
            }
            if !frame.has(at + size as usize) {
                return Err("nflog");
            }
            at += size as usize;
            length -= size;
        }
    }

    /// Solaris ipnet: the address family at 1, zones at 16 and 20, the packet after 24.
    fn ipnet(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 24 || wire_len < 24 {
            return Err("ipnet");
        }
        let payload = frame.from(24, "ipnet");
        let length = wire_len - 24;
        match frame.u8(1)? {
            2 => self.ipv4(payload.from(0, "ip"), length),
            26 => self.ipv6(payload.from(0, "ip6"), length),
            family => {
                let (src, dst) = (frame.be32(16)?, frame.be32(20)?);
                let _ = write!(
                    self.out,
                    "{src} > {dst}, Unknown Ethertype (0x{family:04x}), length {wire_len}: "
                );
                Ok(())
            }
        }
    }

    /// OpenBSD enc: the address family and flags in the capturing host's order (read as
    /// this one's, little-endian), the SPI, then the packet.
    fn enc(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        if frame.len() < 12 || wire_len < 12 {
            return Err("enc");
        }
        let le = |at: usize| -> Result<u32, &'static str> {
            let b = frame.slice(at, 4)?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (family, flags) = (le(0)?, le(8)?);
        // OpenBSD's mbuf flags for authenticated and confidential.
        const AUTH: u32 = 0x0800;
        const CONF: u32 = 0x0400;
        if flags == 0 {
            self.push("(unprotected): ");
        } else {
            self.push("(");
            let mut rest = flags;
            for (bit, name) in [(AUTH, "authentic"), (CONF, "confidential")] {
                if rest & bit != 0 {
                    rest &= !bit;
                    self.push(name);
                    self.push(if rest != 0 { ", " } else { "): " });
                }
            }
        }
        let _ = write!(self.out, "SPI 0x{:08x}: ", frame.be32(4)?);
        let payload = frame.from(12, "enc");
        let length = wire_len - 12;
        match family {
            2 => self.ipv4(payload.from(0, "ip"), length),
            f if crate::af::INET6_BSD.contains(&f) => self.ipv6(payload.from(0, "ip6"), length),
            _ => Ok(()),
        }
    }

    /// tcpdump's hex and ASCII dump (`hex_and_ascii_print`): lines of 16 bytes after
    /// `\n\t0xOFFSET: `, the hex as 2-byte groups padded to 40 columns, then the bytes as
    /// characters (`.` for anything but printable ASCII other than space).
    pub(super) fn hex_ascii_lines(&mut self, bytes: &[u8]) {
        for (line, chunk) in bytes.chunks(16).enumerate() {
            let mut hex = String::with_capacity(40);
            for pair in chunk.chunks(2) {
                hex.push(' ');
                for b in pair {
                    let _ = write!(hex, "{b:02x}");
                }
            }
            let ascii: String = chunk
                .iter()
                .map(|&b| if b.is_ascii_graphic() { char::from(b) } else { '.' })
                .collect();
            let _ = write!(self.out, "\n\t0x{:04x}: {hex:<40}  {ascii}", line * 16);
        }
    }
}

/// Whether tcpdump 4.99 has a printer for captures of `link` (else it prints
/// `UNSUPPORTED` and the bytes).
fn decoded_by_tcpdump(link: LinkType) -> bool {
    match link {
        LinkType::Opaque(opaque) => matches!(
            opaque,
            OpaqueLink::UsbLinux
                | OpaqueLink::UsbLinuxMmapped
                | OpaqueLink::BluetoothHciH4WithPhdr
                | OpaqueLink::Vsock
                | OpaqueLink::Pktap
        ),
        LinkType::DsaTagBrcm
        | LinkType::DsaTagBrcmPrepend
        | LinkType::DsaTagDsa
        | LinkType::DsaTagEdsa
        | LinkType::Ieee802154
        | LinkType::Ieee802154Nofcs
        | LinkType::Ieee802154Tap
        | LinkType::Mfr => true,
        LinkType::Ieee802154Linux
        | LinkType::Ieee802154NonaskPhy
        | LinkType::LinuxLapd
        | LinkType::Docsis
        | LinkType::LinuxIrda
        | LinkType::Pfsync
        | LinkType::Mtp2
        | LinkType::Mtp2WithPhdr
        | LinkType::Mtp3
        | LinkType::Erf
        | LinkType::Ax25Kiss
        | LinkType::BacnetMsTp
        | LinkType::JuniperPicPeer
        | LinkType::JuniperVp
        | LinkType::JuniperVs
        | LinkType::JuniperIsm
        | LinkType::JuniperSt
        | LinkType::JuniperSrxE2e
        | LinkType::JuniperFibreChannel
        | LinkType::JuniperAtmCemic => false,
        _ => true,
    }
}

/// A Broadcom switch tag: ingress (opcode 1: traffic class, tag enforcement, time stamp,
/// destination port map) or egress (classification ID, reason, class, source port).
fn brcm_tag(out: &mut String, tag: &[u8]) {
    let _ = write!(out, "BRCM tag OP: {}", if tag[0] != 0 { "IG" } else { "EG" });
    if tag[0] & 0x20 != 0 {
        let enforcement = ["None", "Untag", "Header", "Reserved"][usize::from(tag[1] & 0x03)];
        let map = (u16::from(tag[2]) << 8 | u16::from(tag[3])) & 0x1ff;
        let _ = write!(
            out,
            ", TC: {}, TE: {enforcement}, TS: {}, DST map: 0x{map:04x}",
            (tag[1] >> 2) & 0x07,
            tag[1] >> 7
        );
    } else {
        let reason = match tag[2] {
            1 => "mirror",
            2 => "MAC learning",
            4 => "switching",
            8 => "prot term",
            16 => "prot snoop",
            32 => "exception",
            _ => "reserved",
        };
        let _ = write!(
            out,
            ", CID: {}, RC: {reason}, TC: {}, port: {}",
            tag[1],
            (tag[3] >> 5) & 0x07,
            tag[3] & 0x1f
        );
    }
    out.push_str(", ");
}

/// An 802.11 destination as the LLC line shows it.
fn dst_of(da: &str) -> String {
    da.to_string()
}
