//! Frame Relay (RFC 2427 over a Q.922 address) and FRF.16 multilink fragments, as
//! tcpdump 4.99's quiet mode prints them (`fr_print`, `mfr_print`).

use std::fmt::Write as _;

use super::{Bytes, Printer, Step};

/// FRF.16's begin, end and control bits, as tcpdump names them.
const FRF_FLAGS: [(u8, &str); 3] = [(0x80, "Begin"), (0x40, "End"), (0x20, "Control")];

impl Printer {
    /// The Frame Relay link type: at least 4 bytes, then [`Printer::fr`].
    pub(super) fn frame_relay(&mut self, frame: Bytes<'_>, wire_len: u32) -> Step {
        frame.slice(0, 4)?;
        self.fr(frame, wire_len)
    }

    /// A Frame Relay frame: the Q.922 address, the UI control byte (or, on a DLCI other
    /// than 0, Cisco's EtherType in its place), a pad byte, the NLPID and what it names.
    pub(super) fn fr(&mut self, frame: Bytes<'_>, length: u32) -> Step {
        let Some((dlci, addr_len)) = q922(frame, length)? else {
            self.push("Q.922, invalid address");
            return Ok(());
        };
        let control = frame.u8(addr_len)?;
        if length < addr_len as u32 + 1 {
            return Err("fr");
        }
        if control != 0x03 && dlci != 0 {
            if frame.has(addr_len + 2) && length >= addr_len as u32 + 2 {
                let kind = frame.be16(addr_len)?;
                let payload = frame.from(addr_len + 2, "fr");
                let rest = length - addr_len as u32 - 2;
                if let Some(step) = self.ether_payload(kind, payload, rest) {
                    return step;
                }
            }
            let _ = write!(self.out, "UI {control:02x}! ");
        }
        let pad = frame.u8(addr_len + 1)?;
        if length < addr_len as u32 + 2 {
            return Err("fr");
        }
        let header = if pad == 0 {
            if addr_len != 3 {
                self.push("Pad! ");
            }
            addr_len + 3
        } else {
            if addr_len == 3 {
                self.push("No pad! ");
            }
            addr_len + 2
        };
        let nlpid = frame.u8(header - 1)?;
        if length < header as u32 {
            return Err("fr");
        }
        let payload = frame.from(header, "fr");
        let rest = length - header as u32;
        match nlpid {
            0xcc => self.ipv4(frame.from(header, "ip"), rest),
            0x8e => self.ipv6(frame.from(header, "ip6"), rest),
            // The OSI printers read the NLPID themselves.
            0x81..=0x83 => self.iso(frame.from(header - 1, "isoclns"), rest + 1),
            0x80 => {
                let snap = frame.from(header, "snap");
                snap.slice(0, 5)?;
                if rest < 5 {
                    return Err("snap");
                }
                let (oui, kind) = (snap.slice(0, 3)?, snap.be16(3)?);
                if oui == [0, 0, 0] {
                    if let Some(step) = self.ether_payload(kind, snap.from(5, "snap"), rest - 5) {
                        return step;
                    }
                    let name = super::llc::ethertype_label(kind).unwrap_or("Unknown");
                    let _ = write!(
                        self.out,
                        "SNAP, ethertype {name} (0x{kind:04x}), length {}: ",
                        rest - 5
                    );
                } else {
                    let oui = u32::from_be_bytes([0, oui[0], oui[1], oui[2]]);
                    let _ = write!(
                        self.out,
                        "SNAP, oui Unknown (0x{oui:06x}), pid Unknown (0x{kind:04x}), length {}: ",
                        rest - 5
                    );
                }
                // tcpdump's quiet mode leaves out the frame's bytes here.
                let _ = write!(self.out, "Q.922, DLCI {dlci}, length {length}: ");
                Ok(())
            }
            0xb1 => {
                if rest < 2 {
                    return Err("fr");
                }
                let first = payload.u8(0)?;
                let seq = (u16::from(first & 0x1e) << 7) | u16::from(payload.u8(1)?);
                let kind = if first & 0x01 != 0 { "Interface" } else { "End-to-End" };
                let _ = write!(
                    self.out,
                    "FRF.15, seq 0x{seq:03x}, Flags [{}],{kind} Fragmentation, length {rest}",
                    frf_flags(first)
                );
                Ok(())
            }
            0xcf => self.ppp(frame.from(header, "ppp"), rest),
            0x08 => self.q933(frame.from(header, "q.933"), rest),
            _ => {
                let _ = write!(self.out, "Q.922, DLCI {dlci}, length {length}: ");
                self.hex_ascii_lines(&payload.data[..payload.len().min(rest as usize)]);
                // The dump ends early where the capture does.
                if payload.len() < rest as usize {
                    return Err("fr");
                }
                Ok(())
            }
        }
    }

    /// An FRF.16 frame: a link integrity control frame, or a fragment (a first or whole
    /// one goes on into its Frame Relay header, a later one is shown in hex).
    pub(super) fn mfr(&mut self, frame: Bytes<'_>, length: u32) -> Step {
        if length < 4 {
            let _ = write!(self.out, "[length {length} < 4] (invalid)");
            return Ok(());
        }
        frame.slice(0, 4)?;
        let first = frame.u8(0)?;
        if first & 0xe0 == 0xe0 && frame.u8(1)? == 0 {
            let message = match frame.u8(2)? {
                1 => "Add Link".to_string(),
                2 => "Add Link ACK".to_string(),
                3 => "Add Link Reject".to_string(),
                4 => "Hello".to_string(),
                5 => "Hello ACK".to_string(),
                6 => "Remove Link".to_string(),
                7 => "Remove Link ACK".to_string(),
                other => format!("Unknown Message (0x{other:02x})"),
            };
            let _ = write!(
                self.out,
                "FRF.16 Control, Flags [{}], {message}, length {length}",
                frf_flags(first)
            );
            return Ok(());
        }
        let seq = (u16::from(first & 0x1e) << 7) | u16::from(frame.u8(1)?);
        let _ = write!(self.out, "FRF.16 Frag, seq {seq}, Flags [{}]", frf_flags(first));
        if matches!(first & 0xe0, 0xc0 | 0x80) {
            self.push(", ");
            return self.fr(frame.from(2, "fr"), length - 2);
        }
        self.hex_lines(frame, length);
        Ok(())
    }
}

impl Printer {
    /// A Q.933 message (LMI among others): the call reference, the message type, and of
    /// the information elements the link verification and PVC status ones.
    pub(super) fn q933(&mut self, msg: Bytes<'_>, length: u32) -> Step {
        self.push("Q.933");
        let total = length;
        let mut length = length;
        let mut at = 0usize;
        // Running out before the message is complete: the length, then the marker.
        let short = |printer: &mut Printer, comma: bool| {
            let _ = write!(printer.out, "{}length {total}", if comma { ", " } else { "" });
            Err("q.933")
        };
        if length == 0 || !msg.has(1) {
            return short(self, true);
        }
        let call_ref_len = usize::from(msg.u8(0)? & 0x0f);
        at += 1;
        length -= 1;
        let mut call_ref = Vec::with_capacity(call_ref_len);
        for _ in 0..call_ref_len {
            if length == 0 || !msg.has(at + 1) {
                return short(self, true);
            }
            call_ref.push(msg.u8(at)?);
            at += 1;
            length -= 1;
        }
        if length == 0 || !msg.has(at + 1) {
            return short(self, true);
        }
        let kind = msg.u8(at)?;
        at += 1;
        length -= 1;
        let (mut codeset, mut unshift, mut non_locking, mut ansi) = (0u8, 0u8, 0u8, false);
        if length != 0 {
            if !msg.has(at + 1) {
                return short(self, true);
            }
            let ie = msg.u8(at)?;
            if ie & 0xf0 == 0x90 {
                at += 1;
                length -= 1;
                codeset = ie & 0x07;
                if ie & 0x08 == 0 {
                    ansi = codeset == 5;
                } else {
                    non_locking = 1;
                    unshift = 0;
                }
            }
        }
        let _ = write!(self.out, ", {}, codeset {codeset}", if ansi { "ANSI" } else { "CCITT" });
        // tcpdump looks at the byte after the message type to tell a dummy reference.
        if call_ref_len != 0 && (call_ref_len > 1 || msg.u8(at)? != 0) {
            self.push(", Call Ref: 0x");
            for b in &call_ref {
                let _ = write!(self.out, "{b:02x}");
            }
        }
        let _ = match q933_message(kind) {
            Some(name) => write!(self.out, ", {name}"),
            None => write!(self.out, ", unknown message 0x{kind:02x}"),
        };
        while length != 0 {
            if non_locking == 1 {
                non_locking = 2;
            } else if non_locking == 2 {
                codeset = unshift;
                non_locking = 0;
            }
            if !msg.has(at + 1) {
                return short(self, true);
            }
            let ie = msg.u8(at)?;
            at += 1;
            length -= 1;
            if ie & 0x80 != 0 {
                if ie & 0xf0 == 0x90 {
                    if ie & 0x08 == 0 {
                        non_locking = 0;
                    } else {
                        non_locking = 1;
                        unshift = codeset;
                    }
                    codeset = ie & 0x07;
                }
                continue;
            }
            if length == 0 || !msg.has(at + 1) {
                return short(self, true);
            }
            let ie_len = usize::from(msg.u8(at)?);
            at += 1;
            length -= 1;
            if ie == 0 || ie_len == 0 {
                return Ok(());
            }
            if (length as usize) < ie_len || !msg.has(at + ie_len) {
                return short(self, true);
            }
            if codeset == 0 || codeset == 5 {
                let v = msg.slice(at, ie_len)?;
                match ie {
                    0x03 | 0x53 | 0x19 if ie_len < 2 => self.push(", Invalid LINK VERIFY IE"),
                    0x03 | 0x53 | 0x19 => {
                        let _ = write!(self.out, ", TX Seq: {:3}, RX Seq: {:3}", v[0], v[1]);
                    }
                    0x07 | 0x57 => self.pvc_status(v),
                    _ => {}
                }
            }
            length -= ie_len as u32;
            at += ie_len;
        }
        let _ = write!(self.out, ", length {total}");
        Ok(())
    }

    /// A PVC status information element: the DLCI and whether it is new and active.
    fn pvc_status(&mut self, v: &[u8]) {
        let n = v.len();
        let invalid = n < 3
            || v[0] & 0x80 != 0
            || (n == 3 && v[1] & 0x80 == 0)
            || (n == 4 && (v[1] & 0x80 != 0 || v[2] & 0x80 == 0))
            || (n == 5 && (v[1] & 0x80 != 0 || v[2] & 0x80 != 0 || v[3] & 0x80 == 0))
            || n > 5
            || v[n - 1] & 0x80 == 0;
        if invalid {
            self.push(", Invalid DLCI in PVC STATUS IE");
            return;
        }
        let mut dlci = (u32::from(v[0] & 0x3f) << 4) | u32::from((v[1] & 0x78) >> 3);
        if n == 4 {
            dlci = (dlci << 6) | u32::from((v[2] & 0x7e) >> 1);
        } else if n == 5 {
            dlci = (dlci << 13) | u32::from(v[2] & 0x7f) | u32::from((v[3] & 0x7e) >> 1);
        }
        let last = v[n - 1];
        let _ = write!(
            self.out,
            ", DLCI {dlci}: status {}{}",
            if last & 0x08 != 0 { "New, " } else { "" },
            if last & 0x02 != 0 { "Active" } else { "Inactive" }
        );
    }
}

/// Q.933's message types by name.
fn q933_message(kind: u8) -> Option<&'static str> {
    Some(match kind {
        0x00 => "ESC to National",
        0x01 => "Alert",
        0x02 => "Call proceeding",
        0x07 => "Connect",
        0x0f => "Connect ACK",
        0x03 => "Progress",
        0x05 => "Setup",
        0x45 => "Disconnect",
        0x4d => "Release",
        0x5a => "Release Complete",
        0x46 => "Restart",
        0x4e => "Restart ACK",
        0x7d => "Status Reply",
        0x75 => "Status Enquiry",
        _ => return None,
    })
}

/// A Q.922 address: `Some((dlci, its length))`, `None` when it is not a valid one, a
/// miss when the capture or `length` ends inside it.
fn q922(frame: Bytes<'_>, length: u32) -> Result<Option<(u32, usize)>, &'static str> {
    let byte = |at: usize| -> Result<u8, &'static str> {
        if length as usize <= at {
            return Err("fr");
        }
        frame.u8(at).map_err(|_| "fr")
    };
    let first = byte(0)?;
    if first & 0x01 != 0 {
        return Ok(None);
    }
    let second = byte(1)?;
    let mut dlci = (u32::from(first & 0xfc) << 2) | u32::from(second >> 4);
    if second & 0x01 != 0 {
        return Ok(Some((dlci, 2)));
    }
    let mut at = 2;
    let mut last = byte(at)?;
    if last & 0x01 == 0 {
        dlci = (dlci << 7) | u32::from(last >> 1);
        at += 1;
        last = byte(at)?;
    }
    if last & 0x01 == 0 {
        return Ok(None);
    }
    dlci = (dlci << 6) | u32::from(last >> 2);
    // 3 bytes: 2 and a last; 4 bytes: 2, a middle one and a last.
    Ok(Some((dlci, at + 1)))
}

/// The set FRF.16 flag bits by name, `none` without any.
fn frf_flags(first: u8) -> String {
    let names: Vec<&str> =
        FRF_FLAGS.iter().filter(|(bit, _)| first & bit != 0).map(|(_, name)| *name).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}
