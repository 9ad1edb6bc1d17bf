//! 802.3 frames (802.2 LLC, SNAP, spanning tree, IPX) and the line tcpdump prints for an
//! EtherType it does not decode.

use std::fmt::Write as _;

use super::{Bytes, Printer, Step};
use crate::llcsap;

/// EtherTypes tcpdump names but does not decode.
pub(super) fn ethertype_name(kind: u16) -> Option<&'static str> {
    Some(match kind {
        0x0600 => "NS",
        0x1000 => "Trail",
        0x6001 => "MOP DL",
        0x6002 => "MOP RC",
        0x6004 => "LAT",
        0x6007 => "SCA",
        0x6558 => "TEB",
        0x8038 => "Lanbridge",
        0x803c => "DEC DNS",
        0x803e => "DEC DTS",
        0x805b => "VEXP",
        0x805c => "VPROD",
        0x88e5 => "802.1AE MACsec",
        0x893a => "IEEE1905.1",
        _ => return None,
    })
}

/// The names tcpdump gives EtherTypes where it shows one it did not decode: the VLAN tags
/// (which only Ethernet and cooked captures decode) and [`ethertype_name`]'s.
pub(super) fn ethertype_label(kind: u16) -> Option<&'static str> {
    Some(match kind {
        0x8100 => "802.1Q",
        0x88a8 => "802.1Q-QinQ",
        0x9100 => "802.1Q-9100",
        0x9200 => "802.1Q-9200",
        _ => return ethertype_name(kind),
    })
}

impl Printer {
    /// `SRC > DST, TYPE, length N: ` for a frame tcpdump leaves undecoded.
    pub(super) fn ether_unknown(&mut self, frame: Bytes<'_>, kind: u16, wire_len: u32) -> Step {
        let (dst, src) = (frame.mac(0, 6)?, frame.mac(6, 6)?);
        let _ = match ethertype_name(kind) {
            Some(name) => write!(self.out, "{src} > {dst}, {name}, length {wire_len}: "),
            None => write!(
                self.out,
                "{src} > {dst}, Unknown Ethertype (0x{kind:04x}), length {wire_len}: "
            ),
        };
        Ok(())
    }

    /// 802.2 in a cooked capture: no addresses to show.
    pub(super) fn llc_cooked(&mut self, llc: Bytes<'_>, length: u32) -> Step {
        self.llc_with(llc, length, None)
    }

    /// An 802.2 LLC header and what follows; `macs` are the frame's (source, destination).
    pub(super) fn llc(&mut self, llc: Bytes<'_>, length: u32, macs: (&str, &str)) -> Step {
        self.llc_with(llc, length, Some(macs))
    }

    fn llc_with(&mut self, llc: Bytes<'_>, length: u32, macs: Option<(&str, &str)>) -> Step {
        if llc.len() < 3 || length < 3 {
            return self.llc_short(llc);
        }
        let (dsap_field, ssap_field) = (llc.u8(0)?, llc.u8(1)?);
        let mut control = u16::from(llc.u8(2)?);
        let unnumbered = control & 3 == 3;
        let header = if unnumbered {
            3
        } else {
            if llc.len() < 4 || length < 4 {
                return self.llc_short(llc);
            }
            control = u16::from_le_bytes([llc.u8(2)?, llc.u8(3)?]);
            4
        };
        if dsap_field == 0xff && ssap_field == 0xff {
            return self.ipx(llc.from(0, "ipx"), length);
        }
        let (dsap, ssap) = (dsap_field & !1, ssap_field & !1);
        if dsap == ssap && control == 3 {
            match dsap {
                llcsap::STP => return self.stp(llc.from(3, "stp"), length - 3),
                llcsap::IP => return self.ipv4(llc.from(header, "ip"), length - header as u32),
                llcsap::IPX => return self.ipx(llc.from(header, "ipx"), length - header as u32),
                llcsap::SNAP => {
                    if llc.len() < 8 || length < 8 {
                        return Err("snap");
                    }
                    if let Some(step) = self.snap(llc.from(3, "snap"), length - 3) {
                        return step;
                    }
                    // Encapsulated Ethernet of a type not decoded: tcpdump names the type.
                    let snap = llc.from(3, "snap");
                    if length >= 8 && snap.slice(0, 3)? == [0, 0, 0] {
                        let kind = snap.be16(3)?;
                        if let Some((src, dst)) = macs {
                            let _ = write!(self.out, "{src} > {dst} ");
                        }
                        let name = ethertype_label(kind).unwrap_or("Unknown");
                        let _ = write!(
                            self.out,
                            "SNAP, ethertype {name} (0x{kind:04x}), length {}: ",
                            length - 8
                        );
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        let (ssap_name, dsap_name) = (sap_name(ssap, "SSAP"), sap_name(dsap, "DSAP"));
        let _ = match (macs, ssap == dsap) {
            (Some((src, dst)), true) => write!(self.out, "{src} > {dst} {dsap_name} "),
            (Some((src, dst)), false) => {
                write!(self.out, "{src} {ssap_name} > {dst} {dsap_name} ")
            }
            (None, true) => write!(self.out, "{} ", sap_name(dsap, "DSAP")),
            (None, false) => write!(self.out, "{ssap_name} > {dsap_name} "),
        };
        let response = u16::from(ssap_field & 1);
        if unnumbered {
            let command = match control & 0xef {
                0x03 => "ui".to_string(),
                0x63 => "ua".to_string(),
                0x43 => "disc".to_string(),
                0x0f => "dm".to_string(),
                0x6f => "sabme".to_string(),
                0xe3 => "test".to_string(),
                0xaf => "xid".to_string(),
                0x87 => "frmr".to_string(),
                other => format!("{other:02x}"),
            };
            let flags = flag_name(response | (control & 0x10), 0x10);
            let _ = write!(self.out, "Unnumbered, {command}, Flags [{flags}], length {length}");
            if control & !0x10 == 0xaf && length > 3 {
                let xid = llc.from(3, "llc");
                if xid.u8(0)? == 0x81 {
                    if xid.len() < 3 || length - 3 < 3 {
                        return Err("llc");
                    }
                    let _ = write!(self.out, ": {:02x} {:02x}", xid.u8(1)?, xid.u8(2)?);
                }
            }
        } else if control & 3 == 1 {
            let kind = match (control >> 2) & 3 {
                0 => "Receiver Ready",
                1 => "Receiver not Ready",
                2 => "Reject",
                _ => "?",
            };
            let _ = write!(
                self.out,
                "Supervisory, {kind}, rcv seq {}, Flags [{}], length {length}",
                (control >> 9) & 0x7f,
                flag_name(response | (control & 0x100), 0x100)
            );
        } else {
            let _ = write!(
                self.out,
                "Information, send seq {}, rcv seq {}, Flags [{}], length {length}",
                (control >> 1) & 0x7f,
                (control >> 9) & 0x7f,
                flag_name(response | (control & 0x100), 0x100)
            );
        }
        Ok(())
    }

    /// An LLC header cut short: the marker, then the bytes there are.
    fn llc_short(&mut self, llc: Bytes<'_>) -> Step {
        self.push(" [|llc]");
        self.hex_ascii_lines(llc.data);
        Ok(())
    }

    /// A SNAP header: `None` when tcpdump would not decode what it carries.
    fn snap(&mut self, snap: Bytes<'_>, length: u32) -> Option<Step> {
        let oui = snap.slice(0, 3).ok()?;
        let kind = snap.be16(3).ok()?;
        if oui == [0, 0, 0x0c] && kind == 0x2000 && length >= 5 {
            return Some(self.cdp(snap.from(5, "cdp"), length - 5));
        }
        if oui != [0, 0, 0] || length < 5 {
            return None;
        }
        self.ether_payload(kind, snap.from(5, "snap"), length - 5)
    }

    fn stp(&mut self, stp: Bytes<'_>, length: u32) -> Step {
        if length < 4 {
            self.push(" (invalid)");
            return Ok(());
        }
        // tcpdump reads the protocol ID and version before it prints anything.
        stp.slice(0, 3)?;
        self.push("STP");
        if stp.be16(0)? != 0 {
            let _ = write!(self.out, "unknown STP version, length {length}");
            return Ok(());
        }
        let version = stp.u8(2)?;
        let version_name = match version {
            0 => "802.1d",
            2 => "802.1w",
            3 => "802.1s",
            4 => "802.1aq",
            _ => {
                let _ = write!(self.out, "unknown STP version, length {length}");
                return Ok(());
            }
        };
        let _ = write!(self.out, " {version_name}");
        let kind = stp.u8(3)?;
        self.push(", ");
        match kind {
            0x00 => self.push("Config"),
            0x02 => self.push("Rapid STP"),
            0x80 => self.push("Topology Change"),
            other => {
                let _ = write!(self.out, "Unknown BPDU Type (0x{other:02x})");
            }
        }
        let config = match kind {
            0x00 => Some(35),
            0x02 if version == 2 => Some(36),
            _ => None,
        };
        if let Some(min) = config {
            if length < min {
                self.push(" (invalid)");
                return Ok(());
            }
            let flags = stp.u8(4)?;
            let names = [
                (0x01, "Topology change"),
                (0x02, "Proposal"),
                (0x10, "Learn"),
                (0x20, "Forward"),
                (0x40, "Agreement"),
                (0x80, "Topology change ACK"),
            ];
            let set: Vec<_> =
                names.iter().filter(|(bit, _)| flags & bit != 0).map(|(_, name)| *name).collect();
            let set = if set.is_empty() { "none".to_string() } else { set.join(", ") };
            let _ = write!(self.out, ", Flags [{set}]");
            let id = stp.slice(17, 8)?;
            let _ = write!(
                self.out,
                ", bridge-id {:02x}{:02x}.{}.{:04x}, length {length}",
                id[0],
                id[1],
                stp.mac(19, 6)?,
                stp.be16(25)?
            );
        }
        Ok(())
    }

    pub(super) fn ipx(&mut self, ipx: Bytes<'_>, _length: u32) -> Step {
        self.push("IPX ");
        let src = format!("{:08x}.{}", ipx.be32(18)?, ipx.mac(22, 6)?);
        let _ = write!(self.out, "{src}.{:04x} > ", ipx.be16(28)?);
        let dst = format!("{:08x}.{}", ipx.be32(6)?, ipx.mac(10, 6)?);
        let socket = ipx.be16(16)?;
        let _ = write!(self.out, "{dst}.{socket:04x}: ");
        let length = u32::from(ipx.be16(2)?);
        if length < 30 {
            let _ = write!(self.out, "[length {length} < 30] (invalid)");
            return Ok(());
        }
        let _ = write!(self.out, "ipx-#{socket:x} {}", length - 30);
        Ok(())
    }
}

fn sap_name(sap: u8, which: &str) -> String {
    let name = match sap {
        0x00 => "Null",
        0xfe => "OSI",
        0x02 => "802.1B I",
        0x03 => "802.1B G",
        0x06 => "IP",
        0x04 => "SNA",
        0x0e => "ProWay NM",
        0x42 => "STP",
        0x4e => "RS511",
        0x7e => "ISO8208",
        0x8e => "ProWay",
        0xaa => "SNAP",
        0xe0 => "IPX",
        0xf0 => "NetBeui",
        0xff => "Global",
        other => return format!("Unknown {which} 0x{other:02x}"),
    };
    name.to_string()
}

/// Command/response and poll/final: `bits` is the response bit and the poll bit `poll`.
fn flag_name(bits: u16, poll: u16) -> &'static str {
    match (bits & 1 != 0, bits & poll != 0) {
        (false, false) => "Command",
        (true, false) => "Response",
        (false, true) => "Poll",
        (true, true) => "Final",
    }
}
