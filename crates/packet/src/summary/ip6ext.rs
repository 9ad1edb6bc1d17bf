//! IPv6 extension headers as tcpdump's quiet mode shows them: `HBH `, `DSTOPT `,
//! `frag (OFFSET|LENGTH) ` and `RT6 (...) ` before the upper-layer protocol.

use std::fmt::Write as _;

use super::{Bytes, Net, Printer, Step};
use crate::ipproto;

impl Printer {
    /// The headers after the fixed IPv6 header. `ip` is the datagram (cut at its payload
    /// length), `next` the fixed header's next-header field, `length` the payload length.
    pub(super) fn ipv6_chain(
        &mut self,
        net: &mut Net,
        ip: Bytes<'_>,
        next: u8,
        length: u32,
    ) -> Step {
        let mut next = next;
        let mut at = 40usize;
        let mut left = length;
        let mut found_hbh = false;
        loop {
            let advance = match next {
                ipproto::HOPOPTS if found_hbh => {
                    self.push("[The Hop-by-Hop Options header was already found] (invalid)");
                    return Ok(());
                }
                ipproto::HOPOPTS | ipproto::DSTOPTS => {
                    let hbh = next == ipproto::HOPOPTS;
                    found_hbh |= hbh;
                    let proto = if hbh { "hbhopt" } else { "dstopt" };
                    let header = ip.from(at, proto);
                    let len = (usize::from(header.u8(1)?) + 1) * 8;
                    header.slice(0, len)?;
                    self.push(if hbh { "HBH " } else { "DSTOPT " });
                    // tcpdump walks the options even when it does not show them.
                    if !options_fit(header.slice(2, len - 2)?) {
                        return Err(proto);
                    }
                    next = header.u8(0)?;
                    len
                }
                ipproto::FRAGMENT => {
                    let header = ip.from(at, "frag6");
                    let offset = header.be16(2)? & 0xfff8;
                    let plen = u32::from(ip.be16(4)?);
                    let rest = (40 + plen).wrapping_sub(at as u32).wrapping_sub(8);
                    let _ = write!(self.out, "frag ({offset}|{rest})");
                    if offset != 0 {
                        return Ok(());
                    }
                    self.push(" ");
                    if at + 8 >= ip.len() {
                        return Ok(());
                    }
                    next = header.u8(0)?;
                    net.fragmented = true;
                    8
                }
                ipproto::ROUTING => match self.rt6(ip.from(at, "rt6"))? {
                    Some((len, nh)) => {
                        next = nh;
                        len
                    }
                    None => return Ok(()),
                },
                ipproto::NONE => {
                    self.push("no next header");
                    return Ok(());
                }
                _ => return self.transport(net, next, ip.from(at, "ip6"), left),
            };
            if (left as usize) < advance {
                return Err("ip6");
            }
            left -= advance as u32;
            at += advance;
        }
    }

    /// A routing header: its length and next header, or `None` when tcpdump stops at it.
    fn rt6(&mut self, rt: Bytes<'_>) -> Result<Option<(usize, u8)>, &'static str> {
        // tcpdump reads the next header before it names the header (and runs out still in
        // IPv6's).
        rt.u8(0).map_err(|_| "ip6")?;
        self.push("RT6");
        let len = rt.u8(1)?;
        let _ = write!(self.out, " (len={len}");
        let kind = rt.u8(2)?;
        let _ = write!(self.out, ", type={kind}");
        if kind == 0 {
            self.push(" [Deprecated]");
        }
        let _ = write!(self.out, ", segleft={}", rt.u8(3)?);
        match kind {
            0 | 2 => {
                let reserved = rt.be32(4)?;
                if reserved != 0 {
                    let _ = write!(self.out, ", rsv=0x{reserved:x}");
                }
                if len % 2 == 1 {
                    let _ = write!(self.out, " [invalid length {len}] (invalid)");
                    return Ok(None);
                }
                for i in 0..usize::from(len / 2) {
                    let _ = write!(self.out, ", [{i}]{}", rt.ipv6(8 + 16 * i)?);
                }
            }
            4 => {
                let last = rt.u8(4)?;
                let _ = write!(self.out, ", last-entry={last}");
                let flags = rt.u8(5)?;
                if flags != 0 {
                    let _ = write!(self.out, ", flags=0x{flags:x}");
                }
                let _ = write!(self.out, ", tag={:x}", rt.be16(6)?);
                for i in 0..=usize::from(last) {
                    let _ = write!(self.out, ", [{i}]{}", rt.ipv6(8 + 16 * i)?);
                }
            }
            _ => {
                self.push(" (unknown type) (invalid)");
                return Ok(None);
            }
        }
        self.push(") ");
        Ok(Some(((usize::from(len) + 1) * 8, rt.u8(0)?)))
    }
}

/// Whether the options of a hop-by-hop or destination options header each fit in it (as
/// tcpdump checks them: Pad1 alone, the others a type, a length and that many bytes).
fn options_fit(options: &[u8]) -> bool {
    let mut i = 0;
    while i < options.len() {
        let len = if options[i] == 0 {
            1
        } else {
            match options.get(i + 1) {
                Some(&n) => usize::from(n) + 2,
                None => return false,
            }
        };
        if i + len > options.len() {
            return false;
        }
        i += len;
    }
    true
}
