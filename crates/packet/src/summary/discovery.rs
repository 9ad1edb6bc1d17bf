//! Link-layer control protocols tcpdump's quiet mode decodes on Ethernet: LLDP (its
//! length and the system name), Cisco's CDP behind SNAP (version, TTL, the device ID and
//! its TLV length checks) and the Ethernet configuration testing protocol (`Loopback`,
//! EtherType 0x9000).

use std::fmt::Write as _;

use super::{Bytes, Printer, Step};

impl Printer {
    /// LLDP: the length, then of the TLVs only the system name (a string up to a NUL).
    pub(super) fn lldp(&mut self, lldp: Bytes<'_>, length: u32) -> Step {
        let _ = write!(self.out, "LLDP, length {length}");
        let (mut at, mut rest) = (0usize, length as usize);
        while rest >= 2 {
            let tlv = lldp.be16(at)?;
            let (kind, len) = (tlv >> 9, usize::from(tlv & 0x01ff));
            at += 2;
            rest -= 2;
            if kind == 0 || len == 0 {
                break;
            }
            lldp.slice(at, len)?;
            if rest < len {
                return Err("lldp");
            }
            if kind == 5 {
                self.push(": ");
                for &c in lldp.slice(at, len)? {
                    if c == 0 {
                        break;
                    }
                    print_char(&mut self.out, c);
                }
            }
            at += len;
            rest -= len;
        }
        Ok(())
    }

    /// CDP: version and TTL, then the TLVs' lengths checked and the device ID shown.
    pub(super) fn cdp(&mut self, cdp: Bytes<'_>, length: u32) -> Step {
        let (mut at, mut rest) = (0usize, length as usize);
        if rest < 4 {
            let _ = write!(self.out, " (packet length {rest} < 4)");
            return self.cdp_invalid(cdp, at, rest);
        }
        let _ = write!(self.out, "CDPv{}, ttl: {}s", cdp.u8(0)?, cdp.u8(1)?);
        cdp.be16(2)?;
        at += 4;
        rest -= 4;
        while rest != 0 {
            if rest < 4 {
                let _ = write!(self.out, " (remaining packet length {rest} < 4)");
                return self.cdp_invalid(cdp, at, rest);
            }
            let kind = cdp.be16(at)?;
            let len = usize::from(cdp.be16(at + 2)?);
            if len < 4 {
                let name = cdp_tlv_name(kind).unwrap_or("unknown field type");
                let _ = write!(self.out, ", {name} TLV length {len} too short");
                return self.cdp_invalid(cdp, at, rest);
            }
            if len > rest {
                let _ = write!(self.out, " (TLV length {len} > {rest})");
                return self.cdp_invalid(cdp, at, rest);
            }
            at += 4;
            rest -= 4;
            let len = len - 4;
            if kind == 1 {
                self.push(", Device-ID '");
                for i in 0..len {
                    print_char(&mut self.out, cdp.u8(at + i)?);
                }
                self.push("'");
            } else if let Some((min, max)) = cdp_tlv_bounds(kind) {
                if len < min || max.is_some_and(|max| len > max) {
                    self.push(" (malformed TLV)");
                }
            }
            at += len;
            rest -= len;
        }
        let _ = write!(self.out, ", length {length}");
        Ok(())
    }

    /// tcpdump's end of a damaged CDP packet: ` (invalid)`, and the marker when the rest
    /// was not captured.
    fn cdp_invalid(&mut self, cdp: Bytes<'_>, at: usize, rest: usize) -> Step {
        self.push(" (invalid)");
        cdp.slice(at, rest)?;
        Ok(())
    }

    /// The Ethernet configuration testing protocol: the skip count, then the function of
    /// the first message (a reply's receipt number, a forward's address) and its data.
    pub(super) fn loopback_ctp(&mut self, ctp: Bytes<'_>, length: u32) -> Step {
        self.push("Loopback");
        let mut rest = length as usize;
        let mut at = 0usize;
        let invalid = |printer: &mut Printer, at: usize, rest: usize| -> Step {
            printer.push(" (invalid)");
            ctp.slice(at, rest)?;
            Ok(())
        };
        if rest < 2 {
            return invalid(self, at, rest);
        }
        let le16 = |at: usize| -> Result<u16, &'static str> {
            Ok(u16::from_le_bytes([ctp.u8(at)?, ctp.u8(at + 1)?]))
        };
        let skip = usize::from(le16(at)?);
        at += 2;
        rest -= 2;
        let _ = write!(self.out, ", skipCount {skip}");
        if skip % 8 != 0 {
            self.push(" (bogus)");
        }
        if skip > rest {
            return invalid(self, at, rest);
        }
        ctp.slice(at, skip)?;
        at += skip;
        rest -= skip;
        if rest < 2 {
            return invalid(self, at, rest);
        }
        let function = le16(at)?;
        at += 2;
        rest -= 2;
        let _ = match function {
            1 => write!(self.out, ", Reply"),
            2 => write!(self.out, ", Forward Data"),
            other => write!(self.out, ",  invalid ({other})"),
        };
        match function {
            1 => {
                if rest < 2 {
                    return invalid(self, at, rest);
                }
                let _ = write!(self.out, ", receipt number {}", le16(at)?);
                at += 2;
                rest -= 2;
                let _ = write!(self.out, ", data ({rest} octets)");
            }
            2 => {
                if rest < 6 {
                    return invalid(self, at, rest);
                }
                let _ = write!(self.out, ", forwarding address {}", ctp.mac(at, 6)?);
                at += 6;
                rest -= 6;
                let _ = write!(self.out, ", data ({rest} octets)");
            }
            _ => {}
        }
        ctp.slice(at, rest)?;
        Ok(())
    }
}

/// A byte as tcpdump shows one in a string: `M-` for the high bit, `^` and the control
/// character's letter for the unprintable ones.
pub(super) fn print_char(out: &mut String, c: u8) {
    let mut c = c;
    if !c.is_ascii() {
        c &= 0x7f;
        out.push_str("M-");
    }
    if !(0x20..0x7f).contains(&c) {
        c ^= 0x40;
        out.push('^');
    }
    out.push(char::from(c));
}

/// CDP's TLV names, where tcpdump names a TLV in its quiet line.
fn cdp_tlv_name(kind: u16) -> Option<&'static str> {
    Some(match kind {
        0x01 => "Device-ID",
        0x02 => "Address",
        0x03 => "Port-ID",
        0x04 => "Capability",
        0x05 => "Version String",
        0x06 => "Platform",
        0x07 => "Prefixes",
        0x08 => "Protocol-Hello option",
        0x09 => "VTP Management Domain",
        0x0a => "Native VLAN ID",
        0x0b => "Duplex",
        0x0e => "ATA-186 VoIP VLAN assignment",
        0x0f => "ATA-186 VoIP VLAN request",
        0x10 => "power consumption",
        0x11 => "MTU",
        0x12 => "AVVID trust bitmap",
        0x13 => "AVVID untrusted ports CoS",
        0x14 => "System Name",
        0x15 => "System Object ID (not decoded)",
        0x16 => "Management Addresses",
        0x17 => "Physical Location",
        _ => return None,
    })
}

/// The value lengths tcpdump accepts for a CDP TLV (minimum, maximum), for the TLVs it
/// bounds.
fn cdp_tlv_bounds(kind: u16) -> Option<(usize, Option<usize>)> {
    Some(match kind {
        0x04 | 0x11 => (4, Some(4)),
        0x0a => (2, Some(2)),
        0x0b | 0x12 | 0x13 => (1, Some(1)),
        0x0e => (3, Some(3)),
        0x0f => (2, Some(3)),
        0x10 => (1, Some(3)),
        0x16 => (4, None),
        0x17 => (1, None),
        _ => return None,
    })
}
