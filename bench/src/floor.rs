//! The floor of the end-to-end benchmark (`weir-bench e2e`): the least a program can do to
//! answer `--count EXPR` or `-w OUT EXPR` over a pcap file. It reads the file with read(2)
//! in 1 MiB chunks, walks the records (a record may straddle two chunks), and tests each
//! packet with a filter written by hand in Rust for the one expression, following libpcap's
//! meaning of it on Ethernet (IPv4, IPv6, ARP): no parser, no compiler, no engine, no
//! allocation per packet. weir's reader is measured against it; `weir-bench-floor`
//! (bench/src/bin/floor.rs) is this module behind a command line.
//!
//! Each filter returns `None` where libpcap's program would load past the captured bytes,
//! which aborts the whole filter (the packet is rejected), and tests in libpcap's order so
//! that such aborts happen where libpcap's would. What every filter leaves out is as
//! deliberate as what it tests: no VLAN tag is skipped (a tagged frame's EtherType is
//! 0x8100), IPv6 extension headers are not walked (except the one fragment header that
//! libpcap's `ip6 proto` looks behind), `tcp[]`, `ip[]` and port tests want the first
//! IPv4 fragment.

use std::io::{self, Read, Write};

/// The size of each read(2).
pub const CHUNK: usize = 1 << 20;
/// Records claiming more captured bytes than this are refused as damage (libpcap refuses
/// records past its own largest snap length, 262,144, in much the same way).
pub const MAX_RECORD: usize = 16 << 20;

/// The expressions the floor knows, in the order the benchmark runs them: the four of the
/// end-to-end issue (`--count`), and the one it writes with `-w`.
pub const COUNT_EXPRESSIONS: [&str; 4] = [PORT_22, SSH_PAYLOAD, DNS_FROM_OUTSIDE, FIVE_HOSTS];
pub const WRITE_EXPRESSION: &str = TCP_OR_UDP;

const PORT_22: &str = "port 22";
const SSH_PAYLOAD: &str =
    "tcp port 22 and (((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)";
const DNS_FROM_OUTSIDE: &str = "udp dst port 53 and not src net 10.0.0.0/8";
/// Three servers and two clients of the generated traffic (bench/src/traffic.rs), frequent
/// and rare ones.
const FIVE_HOSTS: &str =
    "host 10.0.0.1 or host 10.0.0.53 or host 192.168.1.20 or host 10.1.0.7 or host 10.1.3.200";
const TCP_OR_UDP: &str = "tcp or udp";

/// A hand-written filter: the packet's captured bytes, `Some(verdict)`, or `None` for
/// libpcap's abort (rejected).
pub type Filter = fn(&[u8]) -> Option<bool>;

/// The filter written for `expression` (spaces between words do not matter), or `None`
/// when the floor has none. The empty expression keeps every packet, as in tcpdump.
pub fn find(expression: &str) -> Option<Filter> {
    let words = expression.split_whitespace().collect::<Vec<_>>().join(" ");
    let table: [(&str, Filter); 6] = [
        ("", |_| Some(true)),
        (PORT_22, port_22),
        (SSH_PAYLOAD, ssh_payload),
        (DNS_FROM_OUTSIDE, dns_from_outside),
        (FIVE_HOSTS, five_hosts),
        (TCP_OR_UDP, tcp_or_udp),
    ];
    table.iter().find(|(e, _)| *e == words).map(|(_, f)| *f)
}

const ETHERTYPE_IP: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_RARP: u16 = 0x8035;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;
const IPV6_FRAGMENT: u8 = 44;
/// Where the link layer's payload starts (Ethernet, no VLAN skipping).
const NET: usize = 14;

fn byte(p: &[u8], at: usize) -> Option<u8> {
    p.get(at).copied()
}

fn half(p: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(p.get(at..at + 2)?.try_into().ok()?))
}

fn word(p: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(p.get(at..at + 4)?.try_into().ok()?))
}

fn ethertype(p: &[u8]) -> Option<u16> {
    half(p, 12)
}

#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Src,
    Dst,
    Either,
}

/// libpcap's `gen_portop` over `protos`: IPv4, the protocol, the first fragment (offset
/// zero, MF ignored), then the source port, the destination port after the IPv4 header.
fn ip4_port(p: &[u8], protos: &[u8], dir: Dir, port: u16) -> Option<bool> {
    if ethertype(p)? != ETHERTYPE_IP || !protos.contains(&byte(p, NET + 9)?) {
        return Some(false);
    }
    if half(p, NET + 6)? & 0x1fff != 0 {
        return Some(false);
    }
    let th = NET + 4 * usize::from(byte(p, NET)? & 0xf);
    ports(p, th, dir, port)
}

/// libpcap's `gen_portop6`: IPv6 whose next header is the protocol (no extension header
/// walked), ports right after the 40-byte header.
fn ip6_port(p: &[u8], protos: &[u8], dir: Dir, port: u16) -> Option<bool> {
    if ethertype(p)? != ETHERTYPE_IPV6 || !protos.contains(&byte(p, NET + 6)?) {
        return Some(false);
    }
    ports(p, NET + 40, dir, port)
}

fn ports(p: &[u8], th: usize, dir: Dir, port: u16) -> Option<bool> {
    Some(match dir {
        Dir::Src => half(p, th)? == port,
        Dir::Dst => half(p, th + 2)? == port,
        Dir::Either => half(p, th)? == port || half(p, th + 2)? == port,
    })
}

/// `ip proto V`: IPv4 with that protocol field (any fragment).
fn ip4_proto(p: &[u8], proto: u8) -> Option<bool> {
    Some(ethertype(p)? == ETHERTYPE_IP && byte(p, NET + 9)? == proto)
}

/// `ip6 proto V` as libpcap 1.10 writes it: the next header, or a fragment header whose
/// next header is V.
fn ip6_proto(p: &[u8], proto: u8) -> Option<bool> {
    if ethertype(p)? != ETHERTYPE_IPV6 {
        return Some(false);
    }
    let next = byte(p, NET + 6)?;
    Some(next == proto || (next == IPV6_FRAGMENT && byte(p, NET + 40)? == proto))
}

/// `[dir] host A` / `[dir] net A/M` without a protocol: IPv4 addresses, or ARP and RARP
/// sender and target protocol addresses.
fn host_or_net(p: &[u8], dir: Dir, addr: u32, mask: u32) -> Option<bool> {
    let hit = |src: usize, dst: usize| -> Option<bool> {
        Some(match dir {
            Dir::Src => word(p, src)? & mask == addr,
            Dir::Dst => word(p, dst)? & mask == addr,
            Dir::Either => word(p, src)? & mask == addr || word(p, dst)? & mask == addr,
        })
    };
    match ethertype(p)? {
        ETHERTYPE_IP => hit(NET + 12, NET + 16),
        ETHERTYPE_ARP | ETHERTYPE_RARP => hit(NET + 14, NET + 24),
        _ => Some(false),
    }
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

/// `port 22`: TCP, UDP or SCTP over IPv4 (first fragment) or IPv6, either port.
fn port_22(p: &[u8]) -> Option<bool> {
    let any = [TCP, UDP, SCTP];
    Some(ip6_port(p, &any, Dir::Either, 22)? || ip4_port(p, &any, Dir::Either, 22)?)
}

/// `tcp port 22 and (((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)`: SSH
/// segments carrying data. `ip[]` wants IPv4, `tcp[]` IPv4 TCP, first fragment; the
/// arithmetic is 32-bit and wraps.
fn ssh_payload(p: &[u8]) -> Option<bool> {
    if !(ip6_port(p, &[TCP], Dir::Either, 22)? || ip4_port(p, &[TCP], Dir::Either, 22)?) {
        return Some(false);
    }
    if ethertype(p)? != ETHERTYPE_IP || byte(p, NET + 9)? != TCP || half(p, NET + 6)? & 0x1fff != 0
    {
        return Some(false);
    }
    let ihl = u32::from(byte(p, NET)? & 0xf) << 2;
    let total = u32::from(half(p, NET + 2)?);
    let th = NET + 4 * usize::from(byte(p, NET)? & 0xf);
    let data_offset = u32::from(byte(p, th + 12)? & 0xf0) >> 2;
    Some(total.wrapping_sub(ihl).wrapping_sub(data_offset) != 0)
}

/// `udp dst port 53 and not src net 10.0.0.0/8`: DNS queries (IPv4 or IPv6) from outside
/// 10/8; an IPv6 query is never in an IPv4 net, so `not` keeps it.
fn dns_from_outside(p: &[u8]) -> Option<bool> {
    if !(ip6_port(p, &[UDP], Dir::Dst, 53)? || ip4_port(p, &[UDP], Dir::Dst, 53)?) {
        return Some(false);
    }
    Some(!host_or_net(p, Dir::Src, v4(10, 0, 0, 0), 0xff00_0000)?)
}

/// `host 10.0.0.1 or host 10.0.0.53 or host 192.168.1.20 or host 10.1.0.7 or host
/// 10.1.3.200`, left to right.
fn five_hosts(p: &[u8]) -> Option<bool> {
    let hosts = [
        v4(10, 0, 0, 1),
        v4(10, 0, 0, 53),
        v4(192, 168, 1, 20),
        v4(10, 1, 0, 7),
        v4(10, 1, 3, 200),
    ];
    for host in hosts {
        if host_or_net(p, Dir::Either, host, u32::MAX)? {
            return Some(true);
        }
    }
    Some(false)
}

/// `tcp or udp`: over IPv4 (any fragment) or IPv6 (behind a fragment header too).
fn tcp_or_udp(p: &[u8]) -> Option<bool> {
    Some(ip4_proto(p, TCP)? || ip6_proto(p, TCP)? || ip4_proto(p, UDP)? || ip6_proto(p, UDP)?)
}

/// A pcap file's byte order, from its magic number.
#[derive(Clone, Copy)]
enum Order {
    Little,
    Big,
}

impl Order {
    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let bytes: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(match self {
            Order::Little => u32::from_le_bytes(bytes),
            Order::Big => u32::from_be_bytes(bytes),
        })
    }
}

const FILE_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;

/// Reads a pcap file of Ethernet frames from `input` in `chunk`-byte reads, tests every
/// record with `filter` and returns how many it kept; with `out`, the file header and the
/// kept records (headers and bytes, unchanged) are copied to it, in writes of about
/// `chunk` bytes. Damage (a bad header, a record cut short or claiming more than
/// [`MAX_RECORD`] bytes) is an error naming the record and its byte offset.
pub fn walk(
    input: &mut dyn Read,
    chunk: usize,
    filter: Filter,
    mut out: Option<&mut dyn Write>,
) -> Result<u64, String> {
    let chunk = chunk.max(FILE_HEADER);
    let mut buf = vec![0u8; chunk];
    // buf[start..end] holds bytes read but not yet walked; `offset` is the file offset of
    // buf[start].
    let (mut start, mut end, mut offset) = (0usize, 0usize, 0u64);
    let mut kept_bytes: Vec<u8> = Vec::with_capacity(if out.is_some() { chunk } else { 0 });
    let mut order = None;
    let (mut index, mut kept) = (0u64, 0u64);
    loop {
        // Walk what is complete in the buffer; `need` is the size of the next item.
        let need = loop {
            let avail = &buf[start..end];
            let Some(order) = order else {
                if avail.len() < FILE_HEADER {
                    break FILE_HEADER;
                }
                let header = &avail[..FILE_HEADER];
                let found = match header.get(..4) {
                    Some([0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1]) => Order::Little,
                    Some([0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d]) => Order::Big,
                    Some([0x0a, 0x0d, 0x0d, 0x0a]) => {
                        return Err("a pcapng file (the floor reads pcap only)".into())
                    }
                    _ => return Err("not a pcap file (bad magic number)".into()),
                };
                let linktype = found.u32(header, 20).unwrap_or(0) & 0x03ff_ffff;
                if linktype != 1 {
                    return Err(format!(
                        "link type {linktype}: the floor's filters are written for Ethernet (1)"
                    ));
                }
                kept_bytes.extend_from_slice(header);
                order = Some(found);
                start += FILE_HEADER;
                offset += FILE_HEADER as u64;
                continue;
            };
            if avail.len() < RECORD_HEADER {
                break RECORD_HEADER;
            }
            let caplen = order.u32(avail, 8).unwrap_or(u32::MAX) as usize;
            if caplen > MAX_RECORD {
                return Err(format!(
                    "record {} at byte {offset}: captured length {caplen} is more than {} bytes",
                    index + 1,
                    MAX_RECORD
                ));
            }
            let size = RECORD_HEADER + caplen;
            if avail.len() < size {
                break size;
            }
            let record = &avail[..size];
            // Some(true) keeps; false and an abort (None) reject.
            if filter(&record[RECORD_HEADER..]) == Some(true) {
                kept += 1;
                if out.is_some() {
                    kept_bytes.extend_from_slice(record);
                }
            }
            index += 1;
            start += size;
            offset += size as u64;
        };
        if let Some(out) = out.as_deref_mut() {
            if kept_bytes.len() >= chunk {
                out.write_all(&kept_bytes).map_err(|e| format!("writing: {e}"))?;
                kept_bytes.clear();
            }
        }
        // Keep the unwalked tail at the front, make room for what the next item needs,
        // and read.
        buf.copy_within(start..end, 0);
        end -= start;
        start = 0;
        if buf.len() < need {
            buf.resize(need, 0);
        }
        let n = read_some(input, &mut buf[end..]).map_err(|e| format!("reading: {e}"))?;
        if n == 0 {
            if end == 0 && order.is_some() {
                break;
            }
            return Err(match order {
                None => format!("file too short for a pcap header ({end} bytes)"),
                Some(_) => format!(
                    "record {} at byte {offset}: the file ends inside the record",
                    index + 1
                ),
            });
        }
        end += n;
    }
    if let Some(out) = out {
        out.write_all(&kept_bytes)
            .and_then(|()| out.flush())
            .map_err(|e| format!("writing: {e}"))?;
    }
    Ok(kept)
}

/// One read(2), retried when a signal interrupts it.
fn read_some(input: &mut dyn Read, into: &mut [u8]) -> io::Result<usize> {
    loop {
        match input.read(into) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(frames: &[Vec<u8>], big_endian: bool) -> Vec<u8> {
        let w = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let h = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut file = Vec::new();
        file.extend_from_slice(&w(0xa1b2_c3d4));
        file.extend_from_slice(&h(2));
        file.extend_from_slice(&h(4));
        file.extend_from_slice(&[0; 8]);
        file.extend_from_slice(&w(262_144));
        file.extend_from_slice(&w(1));
        for (i, f) in frames.iter().enumerate() {
            file.extend_from_slice(&w(i as u32));
            file.extend_from_slice(&w(0));
            file.extend_from_slice(&w(f.len() as u32));
            file.extend_from_slice(&w(f.len() as u32));
            file.extend_from_slice(f);
        }
        file
    }

    #[test]
    fn records_straddling_every_chunk_size_are_all_seen() {
        let frames = crate::traffic::frames(crate::traffic::SEED, 300);
        let expected = frames.iter().filter(|f| port_22(f) == Some(true)).count() as u64;
        assert!(expected > 10);
        for big_endian in [false, true] {
            let file = capture(&frames, big_endian);
            for chunk in [24, 25, 64, 100, 1500, 4096, CHUNK] {
                let got = walk(&mut &file[..], chunk, port_22, None);
                assert_eq!(got, Ok(expected), "chunk {chunk}, big endian {big_endian}");
                let all = walk(&mut &file[..], chunk, |_| Some(true), None);
                assert_eq!(all, Ok(300));
            }
        }
    }

    #[test]
    fn write_mode_copies_the_header_and_kept_records() {
        let frames = crate::traffic::frames(crate::traffic::SEED, 200);
        let file = capture(&frames, false);
        let kept: Vec<Vec<u8>> =
            frames.iter().filter(|f| tcp_or_udp(f) == Some(true)).cloned().collect();
        let mut out = Vec::new();
        let n = walk(&mut &file[..], 64, tcp_or_udp, Some(&mut out));
        assert_eq!(n, Ok(kept.len() as u64));
        // Timestamps were the frame's index: rebuild the expected file from the kept frames.
        let mut expected = file[..24].to_vec();
        for (i, f) in frames.iter().enumerate() {
            if tcp_or_udp(f) == Some(true) {
                for v in [i as u32, 0, f.len() as u32, f.len() as u32] {
                    expected.extend_from_slice(&v.to_le_bytes());
                }
                expected.extend_from_slice(f);
            }
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let frames = crate::traffic::frames(crate::traffic::SEED, 20);
        let file = capture(&frames, false);
        for cut in 0..file.len() {
            // Ok when cut between records; else an error that says where.
            if let Err(e) = walk(&mut &file[..cut], 64, port_22, None) {
                assert!(e.contains("record") || e.contains("header"), "{e}");
            }
        }
        let mut huge = file[..24].to_vec();
        huge.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        let e = walk(&mut &huge[..], 64, port_22, None).unwrap_err();
        assert!(e.contains("record 1 at byte 24"), "{e}");
        let mut other_link = file.clone();
        other_link[20] = 101;
        assert!(walk(&mut &other_link[..], 64, port_22, None).unwrap_err().contains("101"));
        assert!(walk(&mut &[0x0a, 0x0d, 0x0d, 0x0a][..], 64, port_22, None).is_err());
        assert!(walk(&mut &[][..], 64, port_22, None).is_err());
    }

    #[test]
    fn the_hand_written_filters_on_crafted_frames() {
        // IPv4 TCP 10.1.0.7:40000 -> 10.0.0.1:22, 20-byte header, 4 data bytes.
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[8, 0]);
        let mut ip = vec![0x45, 0, 0, 44, 0, 0, 0x40, 0, 64, TCP, 0, 0, 10, 1, 0, 7, 10, 0, 0, 1];
        ip.extend_from_slice(&[0x9c, 0x40, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x18, 0, 0]);
        ip.extend_from_slice(&[0, 0, 0, 0, 1, 2, 3, 4]);
        f.extend_from_slice(&ip);
        assert_eq!(port_22(&f), Some(true));
        assert_eq!(ssh_payload(&f), Some(true));
        assert_eq!(five_hosts(&f), Some(true));
        assert_eq!(tcp_or_udp(&f), Some(true));
        assert_eq!(dns_from_outside(&f), Some(false));
        // A bare ACK carries no data; a later fragment has no ports.
        let mut ack = f.clone();
        ack[16..18].copy_from_slice(&40u16.to_be_bytes());
        assert_eq!(ssh_payload(&ack), Some(false));
        let mut frag = f.clone();
        frag[20..22].copy_from_slice(&0x0010u16.to_be_bytes());
        assert_eq!(port_22(&frag), Some(false));
        assert_eq!(tcp_or_udp(&frag), Some(true));
        // Cut inside the ports: libpcap's abort.
        assert_eq!(port_22(&f[..36]), None);
        // A VLAN tag hides everything.
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0, 0, 10]);
        tagged.extend_from_slice(&f[12..]);
        assert_eq!(port_22(&tagged), Some(false));
        assert_eq!(five_hosts(&tagged), Some(false));
        assert!(find("  port   22 ").is_some() && find("port 23").is_none());
        for e in COUNT_EXPRESSIONS.iter().chain([&WRITE_EXPRESSION]) {
            assert!(find(e).is_some(), "{e}");
        }
    }
}
