//! The IP protocols tcpdump's quiet mode decodes besides TCP, UDP and ICMP: IPsec (ESP,
//! AH), GRE, PIM, IGMP, VRRP, and IPv6's "no next header".

use std::fmt::Write as _;

use super::{Bytes, Net, Printer, Step};
use crate::{ethertype, ipproto};

/// PPP inside (enhanced) GRE.
const ETHERTYPE_PPP: u16 = 0x880b;

/// GRE header flags.
const GRE_CHECKSUM: u16 = 0x8000;
const GRE_ROUTING: u16 = 0x4000;
const GRE_KEY: u16 = 0x2000;
const GRE_SEQUENCE: u16 = 0x1000;
const GRE_ACK: u16 = 0x0080;

impl Printer {
    /// The protocols of this file: `None` for the others.
    pub(super) fn more_protocols(
        &mut self,
        net: &Net,
        proto: u8,
        payload: Bytes<'_>,
        length: u32,
    ) -> Option<Step> {
        Some(match proto {
            ipproto::ESP => self.esp(payload.from(0, "esp"), length),
            ipproto::AH => self.ah(net, payload.from(0, "ah"), length),
            ipproto::GRE => self.gre(payload.from(0, "gre"), length),
            ipproto::PIM => self.pim(payload.from(0, "pim"), length),
            ipproto::IGMP if net.v4 => {
                self.push("igmp");
                Ok(())
            }
            ipproto::IGMP => {
                self.push("[IGMP requires IPv4] (invalid)");
                Ok(())
            }
            ipproto::SCTP => self.sctp(net, payload.from(0, "sctp"), length),
            ipproto::OSPF => self.ospf(net, payload, length),
            ipproto::VRRP => self.vrrp(net, payload.from(0, "vrrp"), length),
            ipproto::NONE => {
                self.push("no next header");
                Ok(())
            }
            // EGP: the version, AS and sequence once the whole 16-byte header is there.
            8 => {
                if length < 16 || payload.len() < 16 {
                    return Some(Err("egp"));
                }
                let _ = write!(
                    self.out,
                    "EGPv{}, AS {}, seq {}, length {length}",
                    payload.u8(0).ok()?,
                    payload.be16(6).ok()?,
                    payload.be16(8).ok()?
                );
                Ok(())
            }
            // IPComp: the compression parameter index (the payload is not decoded).
            108 => match payload.from(0, "ipcomp").be16(2) {
                Ok(cpi) => {
                    let _ = write!(self.out, "IPComp(cpi=0x{cpi:04x})");
                    Ok(())
                }
                Err(e) => Err(e),
            },
            _ => return None,
        })
    }

    fn esp(&mut self, esp: Bytes<'_>, length: u32) -> Step {
        // tcpdump wants more than the 8-byte header before it prints anything.
        if esp.len() <= 8 {
            return Err("esp");
        }
        let _ = write!(
            self.out,
            "ESP(spi=0x{:08x},seq=0x{:x}), length {length}",
            esp.be32(0)?,
            esp.be32(4)?
        );
        Ok(())
    }

    fn ah(&mut self, net: &Net, ah: Bytes<'_>, length: u32) -> Step {
        // tcpdump prints each field as it reads it.
        let next = ah.u8(0)?;
        self.push("AH");
        let words = usize::from(ah.u8(1)?);
        self.push("(");
        let _ = write!(self.out, "spi=0x{:08x},", ah.be32(4)?);
        let _ = write!(self.out, "seq=0x{:x},icv=0x", ah.be32(8)?);
        let total = 8 + words * 4;
        for at in 12..total {
            let _ = write!(self.out, "{:02x}", ah.u8(at)?);
        }
        self.push("): ");
        let length = length.wrapping_sub(total as u32);
        self.transport(net, next, ah.from(total, "ip"), length)
    }

    fn gre(&mut self, gre: Bytes<'_>, length: u32) -> Step {
        let flags = gre.be16(0)?;
        if length < 2 {
            return Err("gre");
        }
        let version = flags & 7;
        let _ = write!(self.out, "GREv{version}");
        let mut len = length - 2;
        let mut at = 2usize;
        let need = |n: u32, len: &mut u32, at: &mut usize| -> Result<usize, &'static str> {
            if *len < n {
                return Err("gre");
            }
            let here = *at;
            *len -= n;
            *at += n as usize;
            Ok(here)
        };
        let proto = gre.be16(need(2, &mut len, &mut at)?)?;
        match version {
            0 => {
                if flags & (GRE_CHECKSUM | GRE_ROUTING) != 0 {
                    need(2, &mut len, &mut at)?;
                    let off = need(2, &mut len, &mut at)?;
                    let _ = write!(self.out, ", off 0x{:x}", gre.be16(off)?);
                }
                if flags & GRE_KEY != 0 {
                    let key = need(4, &mut len, &mut at)?;
                    let _ = write!(self.out, ", key=0x{:x}", gre.be32(key)?);
                }
                if flags & GRE_SEQUENCE != 0 {
                    let seq = need(4, &mut len, &mut at)?;
                    let _ = write!(self.out, ", seq {}", gre.be32(seq)?);
                }
                if flags & GRE_ROUTING != 0 {
                    loop {
                        let sre = need(4, &mut len, &mut at)?;
                        let (family, sre_len) = (gre.be16(sre)?, gre.u8(sre + 3)?);
                        if family == 0 && sre_len == 0 {
                            break;
                        }
                        // Source route entries are shown only with -v; skipped here.
                        gre.slice(at, usize::from(sre_len))?;
                        need(u32::from(sre_len), &mut len, &mut at)?;
                    }
                }
                let _ = write!(self.out, ", length {length}: ");
                let inner = gre.from(at, "gre");
                if proto == ethertype::TEB {
                    return self.ethernet(inner.data, len);
                }
                match self.ether_payload(proto, inner, len) {
                    Some(step) => step,
                    None => {
                        let _ = write!(self.out, "gre-proto-0x{proto:x}");
                        Ok(())
                    }
                }
            }
            1 => {
                if flags & GRE_KEY != 0 {
                    let key = need(4, &mut len, &mut at)?;
                    let _ = write!(self.out, ", call {}", gre.be32(key)? & 0xffff);
                }
                if flags & GRE_SEQUENCE != 0 {
                    let seq = need(4, &mut len, &mut at)?;
                    let _ = write!(self.out, ", seq {}", gre.be32(seq)?);
                }
                if flags & GRE_ACK != 0 {
                    let ack = need(4, &mut len, &mut at)?;
                    let _ = write!(self.out, ", ack {}", gre.be32(ack)?);
                }
                if flags & GRE_SEQUENCE == 0 {
                    self.push(", no-payload");
                }
                let _ = write!(self.out, ", length {length}");
                if flags & GRE_SEQUENCE == 0 {
                    return Ok(());
                }
                self.push(": ");
                if proto == ETHERTYPE_PPP {
                    self.ppp(gre.from(at, "ppp"), len)
                } else {
                    let _ = write!(self.out, "gre-proto-0x{proto:x}");
                    Ok(())
                }
            }
            _ => {
                self.push(" ERROR: unknown-version");
                Ok(())
            }
        }
    }

    fn pim(&mut self, pim: Bytes<'_>, length: u32) -> Step {
        let first = pim.u8(0)?;
        let (version, kind) = (first >> 4, first & 0x0f);
        if version == 2 {
            let name = match kind {
                0 => "Hello",
                1 => "Register",
                2 => "Register Stop",
                3 => "Join / Prune",
                4 => "Bootstrap",
                5 => "Assert",
                6 => "Graft",
                7 => "Graft Acknowledgement",
                8 => "Candidate RP Advertisement",
                9 => "Prune Refresh",
                10 => "DF Election",
                _ => "Unknown Type",
            };
            let _ = write!(self.out, "PIMv2, {name}, length {length}");
        } else {
            let _ = write!(self.out, "PIMv{version}, length {length}");
        }
        Ok(())
    }

    fn vrrp(&mut self, net: &Net, vrrp: Bytes<'_>, length: u32) -> Step {
        self.push("VRRP");
        let first = vrrp.u8(0)?;
        let (version, kind) = (first >> 4, first & 0x0f);
        let _ = if kind == 1 {
            write!(self.out, "v{version}, Advertisement")
        } else {
            write!(self.out, "v{version}, unknown type ({kind})")
        };
        if net.ttl != 255 {
            let _ = write!(self.out, ", (ttl {})", net.ttl);
        }
        if !(2..=3).contains(&version) || kind != 1 {
            return Ok(());
        }
        let _ = write!(self.out, ", vrid {}", vrrp.u8(1)?);
        let _ = write!(self.out, ", prio {}", vrrp.u8(2)?);
        vrrp.u8(3)?;
        if version == 2 {
            let _ = match vrrp.u8(4)? {
                0 => write!(self.out, ", authtype none"),
                1 => write!(self.out, ", authtype simple"),
                2 => write!(self.out, ", authtype ah"),
                other => write!(self.out, ", authtype #{other}"),
            };
            let _ = write!(self.out, ", intvl {}s, length {length}", vrrp.u8(5)?);
        } else {
            let interval = (u16::from(vrrp.u8(4)? & 0x0f) << 8) | u16::from(vrrp.u8(5)?);
            let _ = write!(self.out, ", intvl {interval}cs, length {length}");
        }
        Ok(())
    }

    fn sctp(&mut self, net: &Net, sctp: Bytes<'_>, length: u32) -> Step {
        if length < 12 {
            let _ = write!(self.out, "truncated-sctp - {} bytes missing!", 12 - length);
            return Ok(());
        }
        sctp.slice(0, 12)?;
        let (sport, dport) = (sctp.be16(0)?, sctp.be16(2)?);
        let _ = write!(self.out, "{}.{sport} > {}.{dport}: sctp", net.src, net.dst);
        for port in [sport, dport] {
            if let Some(name) = forces_channel(port) {
                let _ = write!(self.out, "[{name}]");
            }
        }
        let mut at = 12usize;
        let mut left = length - 12;
        let mut sep = " (";
        let mut count = 0u32;
        while left != 0 {
            count += 1;
            if left < 4 {
                let _ =
                    write!(self.out, "{sep}{count}) [chunk descriptor cut off at end of packet]");
                break;
            }
            sctp.slice(at, 4)?;
            let chunk_len = u32::from(sctp.be16(at + 2)?);
            if chunk_len < 4 {
                let _ = write!(
                    self.out,
                    "{sep}{count}) [Bad chunk length {chunk_len}, < size of chunk descriptor]"
                );
                break;
            }
            if left < chunk_len {
                let _ = write!(
                    self.out,
                    "{sep}{count}) [Bad chunk length {chunk_len}, > remaining data in packet]"
                );
                break;
            }
            let align = (4 - chunk_len % 4) % 4;
            sctp.slice(at, chunk_len as usize)?;
            let kind = sctp.u8(at)?;
            let flags = sctp.u8(at + 1)?;
            let body = sctp.from(at + 4, "sctp");
            let body_len = chunk_len - 4;
            let _ = write!(self.out, "{sep}{count}) ");
            let _ = match chunk_name(kind) {
                Some(name) => write!(self.out, "[{name}] "),
                None => write!(self.out, "[Unknown chunk type: 0x{kind:x}] "),
            };
            match kind {
                0 => {
                    for (bit, mark) in [(4, "(U)"), (2, "(B)"), (1, "(E)")] {
                        if flags & bit != 0 {
                            self.push(mark);
                        }
                    }
                    if flags & 7 != 0 {
                        self.push(" ");
                    }
                    if body_len < 12 {
                        let _ = write!(self.out, "bogus chunk length {chunk_len}]");
                        return Ok(());
                    }
                    let _ = write!(
                        self.out,
                        "[TSN: {}] [SID: {}] [SSEQ {}] [PPID 0x{:x}] ",
                        body.be32(0)?,
                        body.be16(4)?,
                        body.be16(6)?,
                        body.be32(8)?
                    );
                }
                1 | 2 => {
                    if body_len < 16 {
                        let _ = write!(self.out, "bogus chunk length {chunk_len}]");
                        return Ok(());
                    }
                    let _ = write!(
                        self.out,
                        "[init tag: {}] [rwnd: {}] [OS: {}] [MIS: {}] [init TSN: {}] ",
                        body.be32(0)?,
                        body.be32(4)?,
                        body.be16(8)?,
                        body.be16(10)?,
                        body.be32(12)?
                    );
                }
                3 => {
                    if body_len < 12 {
                        let _ = write!(self.out, "bogus chunk length {chunk_len}]");
                        return Ok(());
                    }
                    let cum = body.be32(0)?;
                    let gaps = body.be16(8)?;
                    let dups = body.be16(10)?;
                    let _ = write!(
                        self.out,
                        "[cum ack {cum}] [a_rwnd {}] [#gap acks {gaps}] [#dup tsns {dups}] ",
                        body.be32(4)?
                    );
                    let mut off = 12usize;
                    let mut rest = body_len - 12;
                    let mut i = 0;
                    while rest != 0 && i < gaps {
                        if rest < 4 {
                            let _ = write!(self.out, "bogus chunk length {chunk_len}]");
                            return Ok(());
                        }
                        let (start, end) = (body.be16(off)?, body.be16(off + 2)?);
                        i += 1;
                        let _ = write!(
                            self.out,
                            "\n\t\t[gap ack block #{i}: start = {}, end = {}] ",
                            cum.wrapping_add(u32::from(start)),
                            cum.wrapping_add(u32::from(end))
                        );
                        off += 4;
                        rest -= 4;
                    }
                    let mut i = 0;
                    while rest != 0 && i < dups {
                        if rest < 4 {
                            let _ = write!(self.out, "bogus chunk length {chunk_len}]");
                            return Ok(());
                        }
                        i += 1;
                        let _ = write!(self.out, "\n\t\t[dup TSN #{i}: {}] ", body.be32(off)?);
                        off += 4;
                        rest -= 4;
                    }
                }
                _ => {}
            }
            at += chunk_len as usize;
            left -= chunk_len;
            sep = ", (";
            if align != 0 {
                sctp.slice(at, align as usize)?;
                at += align as usize;
                left = left.saturating_sub(align);
            }
        }
        Ok(())
    }

    fn ospf(&mut self, net: &Net, ospf: Bytes<'_>, length: u32) -> Step {
        let ospf = ospf.from(0, if net.v4 { "ospf2" } else { "ospf3" });
        let names = ["Hello", "Database Description", "LS-Request", "LS-Update", "LS-Ack"];
        if net.v4 {
            ospf.slice(0, 16)?;
        } else {
            ospf.slice(0, 2)?;
        }
        let (version, kind) = (ospf.u8(0)?, ospf.u8(1)?);
        let name = match names.get(usize::from(kind).wrapping_sub(1)) {
            Some(name) => (*name).to_string(),
            None if net.v4 => format!("unknown LS-type {kind}"),
            None => format!("unknown packet type ({kind})"),
        };
        let _ = write!(self.out, "OSPFv{version}, {name}, length {length}");
        Ok(())
    }
}

fn forces_channel(port: u16) -> Option<&'static str> {
    Some(match port {
        6700 => "HP",
        6701 => "MP",
        6702 => "LP",
        _ => return None,
    })
}

fn chunk_name(kind: u8) -> Option<&'static str> {
    Some(match kind {
        0 => "DATA",
        1 => "INIT",
        2 => "INIT ACK",
        3 => "SACK",
        4 => "HB REQ",
        5 => "HB ACK",
        6 => "ABORT",
        7 => "SHUTDOWN",
        8 => "SHUTDOWN ACK",
        9 => "OP ERR",
        10 => "COOKIE ECHO",
        11 => "COOKIE ACK",
        12 => "ECN ECHO",
        13 => "ECN CWR",
        14 => "SHUTDOWN COMPLETE",
        0x80 => "ASCONF ACK",
        0xc1 => "ASCONF",
        0xc0 => "FOR CUM TSN",
        _ => return None,
    })
}
