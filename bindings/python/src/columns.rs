//! `weir.read`: a capture as columns, decoded in Rust, only the columns asked for.
//!
//! Each column comes back as Arrow's buffers (values, validity bitmap, string offsets),
//! each a [`Buffer`] that owns the Rust vector it was built in: the Python wrapper makes
//! `pyarrow.foreign_buffer(address, size, base=buffer)` of it, so the values are never
//! copied (copying them into `bytes` cost a tenth of the time, and growing vectors by
//! doubling another fifth: see [`Column::reserve`]). The C data interface through the
//! `arrow` crate (or pyo3-arrow) would carry the same buffers, at the price of building
//! arrow-rs (about a hundred thousand lines) for five array layouts.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{damage_message, open_capture, Failure, Matchers};
use weir_runtime::source::{Packet, PacketSource};

/// The columns `weir.read` can compute, in the order a table has them.
pub const NAMES: [&str; 17] = [
    "ts",
    "caplen",
    "len",
    "linktype",
    "eth_src",
    "eth_dst",
    "ethertype",
    "vlan",
    "ip_version",
    "ip_src",
    "ip_dst",
    "ip_proto",
    "ttl",
    "src_port",
    "dst_port",
    "tcp_flags",
    "payload_offset",
];

const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_RAW: u32 = 101;
const DLT_RAW: u32 = 12;
const LINKTYPE_IPV4: u32 = 228;
const LINKTYPE_IPV6: u32 = 229;

/// An Ethernet address, shown as tcpdump shows it (`00:1a:2b:3c:4d:5e`).
struct Mac([u8; 6]);

/// What one packet's headers say; `None` where the packet has no such field.
#[derive(Default)]
struct Decoded {
    eth_src: Option<Mac>,
    eth_dst: Option<Mac>,
    ethertype: Option<u16>,
    vlan: Option<u16>,
    ip_version: Option<u8>,
    ip_src: Option<std::net::IpAddr>,
    ip_dst: Option<std::net::IpAddr>,
    ip_proto: Option<u8>,
    ttl: Option<u8>,
    src_port: Option<u16>,
    dst_port: Option<u16>,
    tcp_flags: Option<u8>,
    payload_offset: Option<u32>,
}

fn be16(data: &[u8], at: usize) -> Option<u16> {
    data.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

fn decode(linktype: u32, data: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    let ip_at = match linktype {
        LINKTYPE_ETHERNET => {
            let (Some(dst), Some(src)) = (data.get(0..6), data.get(6..12)) else { return d };
            d.eth_dst = dst.try_into().ok().map(Mac);
            d.eth_src = src.try_into().ok().map(Mac);
            let Some(mut ethertype) = be16(data, 12) else { return d };
            let mut at = 14;
            // 802.1Q and 802.1ad tags: the first tag's VLAN id, the innermost EtherType.
            while matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
                let (Some(tci), Some(inner)) = (be16(data, at), be16(data, at + 2)) else {
                    return d;
                };
                d.vlan.get_or_insert(tci & 0x0fff);
                ethertype = inner;
                at += 4;
            }
            // Below 0x0600 the field is an 802.3 length, not an EtherType.
            if ethertype < 0x0600 {
                return d;
            }
            d.ethertype = Some(ethertype);
            if !matches!(ethertype, 0x0800 | 0x86dd) {
                return d;
            }
            at
        }
        LINKTYPE_RAW | DLT_RAW | LINKTYPE_IPV4 | LINKTYPE_IPV6 => 0,
        _ => return d,
    };
    decode_ip(data, ip_at, &mut d);
    d
}

fn decode_ip(data: &[u8], at: usize, d: &mut Decoded) {
    let Some(&first) = data.get(at) else { return };
    let (proto, transport, first_fragment) = match first >> 4 {
        4 => {
            let Some(h) = data.get(at..at + 20) else { return };
            d.ip_version = Some(4);
            d.ttl = Some(h[8]);
            d.ip_proto = Some(h[9]);
            d.ip_src = Some(std::net::Ipv4Addr::new(h[12], h[13], h[14], h[15]).into());
            d.ip_dst = Some(std::net::Ipv4Addr::new(h[16], h[17], h[18], h[19]).into());
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let frag_offset = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
            (h[9], at + ihl, frag_offset == 0 && ihl >= 20)
        }
        6 => {
            let Some(h) = data.get(at..at + 40) else { return };
            d.ip_version = Some(6);
            d.ttl = Some(h[7]);
            let addr = |s: &[u8]| -> std::net::IpAddr {
                let mut a = [0u8; 16];
                a.copy_from_slice(s);
                std::net::Ipv6Addr::from(a).into()
            };
            d.ip_src = Some(addr(&h[8..24]));
            d.ip_dst = Some(addr(&h[24..40]));
            // Past the extension headers weir's filters also walk (hop-by-hop, routing,
            // fragment, destination options) to the upper-layer protocol.
            let (mut next, mut off, mut first_fragment) = (h[6], at + 40, true);
            loop {
                match next {
                    0 | 43 | 60 => {
                        let (Some(&n), Some(&len)) = (data.get(off), data.get(off + 1)) else {
                            break;
                        };
                        next = n;
                        off += (usize::from(len) + 1) * 8;
                    }
                    44 => {
                        let (Some(&n), Some(fo)) = (data.get(off), be16(data, off + 2)) else {
                            break;
                        };
                        next = n;
                        first_fragment = fo >> 3 == 0;
                        off += 8;
                    }
                    _ => break,
                }
            }
            d.ip_proto = Some(next);
            (next, off, first_fragment)
        }
        _ => return,
    };
    if !first_fragment {
        return;
    }
    match proto {
        // TCP, UDP, SCTP: the ports; TCP's flags and header length too.
        6 | 17 | 132 => {
            let (Some(src), Some(dst)) = (be16(data, transport), be16(data, transport + 2)) else {
                return;
            };
            d.src_port = Some(src);
            d.dst_port = Some(dst);
            match proto {
                6 => {
                    let (Some(&off), Some(&flags)) =
                        (data.get(transport + 12), data.get(transport + 13))
                    else {
                        return;
                    };
                    d.tcp_flags = Some(flags);
                    d.payload_offset = u32::try_from(transport + usize::from(off >> 4) * 4).ok();
                }
                17 => d.payload_offset = u32::try_from(transport + 8).ok(),
                _ => d.payload_offset = u32::try_from(transport + 12).ok(),
            }
        }
        _ => {}
    }
}

/// One column being built: fixed-width little-endian values or UTF-8 strings, with a
/// validity bit per row.
struct Column {
    name: &'static str,
    /// The column's place in `NAMES`, matched per packet (cheaper than the name).
    id: usize,
    width: usize,
    values: Vec<u8>,
    offsets: Vec<i32>,
    valid: Vec<u8>,
    /// Validity bits of the rows since the last whole 64, kept in a register and
    /// appended 8 bytes at a time (a byte pushed and or-ed per row cost more).
    bits: u64,
    nulls: usize,
    rows: usize,
}

impl Column {
    fn new(name: &'static str) -> Column {
        let width = match name {
            "ts" => 8,
            "caplen" | "len" | "linktype" | "payload_offset" => 4,
            "ethertype" | "vlan" | "src_port" | "dst_port" => 2,
            "ip_version" | "ip_proto" | "ttl" | "tcp_flags" => 1,
            _ => 0, // strings
        };
        Column {
            name,
            id: NAMES.iter().position(|n| *n == name).unwrap_or(usize::MAX),
            width,
            values: Vec::new(),
            offsets: vec![0],
            valid: Vec::new(),
            bits: 0,
            nulls: 0,
            rows: 0,
        }
    }

    /// Room for `rows` more rows: made once, after the first packets tell how many the
    /// file holds, so the vectors are not regrown (each regrowth copies the column and
    /// faults in fresh pages). Strings reserve their widest common form (a MAC's 17
    /// bytes, an IPv4 address's 15; IPv6 addresses may still grow the vector).
    fn reserve(&mut self, rows: usize) {
        let text = match self.name {
            "eth_src" | "eth_dst" => 17,
            _ => 15,
        };
        let width = if self.width == 0 { text } else { self.width };
        self.values.reserve(rows.saturating_mul(width));
        self.valid.reserve(rows / 8 + 1);
        if self.width == 0 {
            self.offsets.reserve(rows);
        }
    }

    fn mark(&mut self, valid: bool) {
        self.bits |= u64::from(valid) << (self.rows % 64);
        self.nulls += usize::from(!valid);
        self.rows += 1;
        if self.rows % 64 == 0 {
            self.valid.extend_from_slice(&self.bits.to_le_bytes());
            self.bits = 0;
        }
    }

    /// The validity bits of the last rows (fewer than 64) out to the bitmap.
    fn finish(&mut self) {
        let rest = (self.rows % 64).div_ceil(8);
        self.valid.extend_from_slice(&self.bits.to_le_bytes()[..rest]);
        self.bits = 0;
    }

    /// A `W`-byte little-endian value: a fixed-size store, the width known where called.
    fn int<const W: usize>(&mut self, value: Option<u64>) {
        self.mark(value.is_some());
        let bytes = value.unwrap_or(0).to_le_bytes();
        self.values.extend_from_slice(&bytes[..W]);
    }

    fn text(&mut self, value: Option<&std::net::IpAddr>) {
        use std::io::Write;
        self.mark(value.is_some());
        if let Some(value) = value {
            let _ = write!(self.values, "{value}");
        }
        self.end_text();
    }

    /// Widths as [`Column::new`] gives them.
    fn push(&mut self, packet: &Packet<'_>, d: &Decoded) {
        match self.id {
            0 => self.int::<8>(Some(
                packet.ts_sec.wrapping_mul(1_000_000_000).wrapping_add(u64::from(packet.ts_nsec)),
            )),
            1 => self.int::<4>(Some(packet.data.len() as u64)),
            2 => self.int::<4>(Some(u64::from(packet.wire_len))),
            3 => self.int::<4>(Some(u64::from(packet.linktype))),
            4 => self.mac(d.eth_src.as_ref()),
            5 => self.mac(d.eth_dst.as_ref()),
            6 => self.int::<2>(d.ethertype.map(u64::from)),
            7 => self.int::<2>(d.vlan.map(u64::from)),
            8 => self.int::<1>(d.ip_version.map(u64::from)),
            9 => self.ip(d.ip_src.as_ref()),
            10 => self.ip(d.ip_dst.as_ref()),
            11 => self.int::<1>(d.ip_proto.map(u64::from)),
            12 => self.int::<1>(d.ttl.map(u64::from)),
            13 => self.int::<2>(d.src_port.map(u64::from)),
            14 => self.int::<2>(d.dst_port.map(u64::from)),
            15 => self.int::<1>(d.tcp_flags.map(u64::from)),
            16 => self.int::<4>(d.payload_offset.map(u64::from)),
            _ => self.int::<1>(None),
        }
    }

    fn end_text(&mut self) {
        self.offsets.push(i32::try_from(self.values.len()).unwrap_or(i32::MAX));
    }

    /// Hex digits by table: the formatter costs more than all the decoding.
    fn mac(&mut self, mac: Option<&Mac>) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.mark(mac.is_some());
        if let Some(Mac(m)) = mac {
            // Written in place, then appended in one copy (a push per byte checks the
            // capacity each time).
            let mut text = [b':'; 17];
            for (slot, b) in text.chunks_mut(3).zip(m) {
                slot[0] = HEX[usize::from(b >> 4)];
                slot[1] = HEX[usize::from(b & 15)];
            }
            self.values.extend_from_slice(&text);
        }
        self.end_text();
    }

    /// IPv4 by hand (the common case), IPv6 through `Display` (its `::` rules).
    fn ip(&mut self, ip: Option<&std::net::IpAddr>) {
        match ip {
            Some(std::net::IpAddr::V4(v4)) => {
                self.mark(true);
                // Written into a 16-byte block byte by byte, appended whole (a fixed-size
                // copy is one store; a variable-size one a call to memcpy), then cut back.
                let mut text = [0u8; 16];
                let mut at = 0;
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        text[at & 15] = b'.';
                        at += 1;
                    }
                    if octet >= 100 {
                        text[at & 15] = b'0' + octet / 100;
                        at += 1;
                    }
                    if octet >= 10 {
                        text[at & 15] = b'0' + octet / 10 % 10;
                        at += 1;
                    }
                    text[at & 15] = b'0' + octet % 10;
                    at += 1;
                }
                let start = self.values.len();
                self.values.extend_from_slice(&text);
                self.values.truncate(start + at);
                self.end_text();
            }
            Some(std::net::IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
                self.mark(true);
                let mut text = Text::default();
                write_ipv6(&mut text, &v6.segments());
                let start = self.values.len();
                self.values.extend_from_slice(&text.bytes);
                self.values.truncate(start + text.len);
                self.end_text();
            }
            Some(other) => self.text(Some(other)),
            None => self.text(None),
        }
    }
}

/// An address's text built on the stack: the longest (an IPv6 address of eight
/// four-digit groups) is 39 bytes.
struct Text {
    bytes: [u8; 40],
    len: usize,
}

impl Default for Text {
    fn default() -> Text {
        Text { bytes: [0; 40], len: 0 }
    }
}

impl Text {
    fn push(&mut self, byte: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = byte;
            self.len += 1;
        }
    }

    fn extend_from_slice(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }
}

/// An IPv6 address as RFC 5952 (and Rust's `Display`) writes it: lowercase hex without
/// leading zeros, the longest run of two or more zero groups (the first of equals) as `::`.
fn write_ipv6(out: &mut Text, groups: &[u16; 8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let (mut best, mut best_len, mut run, mut run_len) = (0, 0, 0, 0);
    for (i, g) in groups.iter().enumerate() {
        if *g == 0 {
            if run_len == 0 {
                run = i;
            }
            run_len += 1;
            if run_len > best_len {
                (best, best_len) = (run, run_len);
            }
        } else {
            run_len = 0;
        }
    }
    let hex = |out: &mut Text, g: u16| {
        let mut started = false;
        for shift in [12, 8, 4, 0] {
            let digit = (g >> shift) & 15;
            if digit != 0 || started || shift == 0 {
                out.push(HEX[usize::from(digit)]);
                started = true;
            }
        }
    };
    if best_len < 2 {
        for (i, g) in groups.iter().enumerate() {
            if i > 0 {
                out.push(b':');
            }
            hex(out, *g);
        }
        return;
    }
    for (i, g) in groups[..best].iter().enumerate() {
        if i > 0 {
            out.push(b':');
        }
        hex(out, *g);
    }
    out.extend_from_slice(b"::");
    for (i, g) in groups[best + best_len..].iter().enumerate() {
        if i > 0 {
            out.push(b':');
        }
        hex(out, *g);
    }
}

/// The Rust half of `weir.read`: `{name: (rows, nulls, validity, values, offsets or None)}`
/// for each column asked for, in the order asked.
#[pyfunction]
#[pyo3(signature = (path, columns, filter = None, optimize = true))]
pub fn read_columns<'py>(
    py: Python<'py>,
    path: PathBuf,
    columns: Vec<String>,
    filter: Option<String>,
    optimize: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let mut wanted = Vec::with_capacity(columns.len());
    for name in &columns {
        let Some(known) = NAMES.iter().find(|n| **n == name.as_str()) else {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown column {name:?} (known: {})",
                NAMES.join(", ")
            )));
        };
        wanted.push(Column::new(known));
    }
    let decodes =
        wanted.iter().any(|c| c.width != 8 && !matches!(c.name, "caplen" | "len" | "linktype"));
    let built = py.detach(|| -> Result<Vec<Column>, Failure> {
        let mut capture = open_capture(&path)?.without_blocks();
        let source = path.display().to_string();
        let mut matchers = filter.as_deref().map(|expr| Matchers::new(expr, optimize));
        let (mut seen, mut matched) = (0u64, 0u64);
        let file_size = std::fs::metadata(&path).map_or(0, |m| m.len());
        while let Some(packet) = capture.next_packet() {
            let packet =
                packet.map_err(|e| Failure::Capture(damage_message(&source, &e, seen, matched)))?;
            seen += 1;
            if seen == RESERVE_AFTER && packet.offset > 0 {
                // The rows to come, from the bytes per packet so far (a filter keeps a
                // share of them: as many rows as the same share of the rest).
                let per_packet = packet.offset / seen;
                let rest = file_size.saturating_sub(packet.offset) / per_packet.max(1);
                let rows = rest.saturating_mul(matched + 1) / seen + 16;
                for column in &mut wanted {
                    column.reserve(usize::try_from(rows).unwrap_or(0));
                }
            }
            if let Some(m) = matchers.as_mut() {
                if !m.matches(&packet)? {
                    continue;
                }
            }
            matched += 1;
            let decoded =
                if decodes { decode(packet.linktype, packet.data) } else { Decoded::default() };
            for column in &mut wanted {
                column.push(&packet, &decoded);
            }
        }
        for column in &mut wanted {
            column.finish();
        }
        Ok(wanted)
    })?;
    let out = PyDict::new(py);
    for c in built {
        let offsets = (c.width == 0).then_some(Buffer::Offsets(c.offsets));
        out.set_item(
            c.name,
            (c.rows, c.nulls, Buffer::Bytes(c.valid), Buffer::Bytes(c.values), offsets),
        )?;
    }
    Ok(out)
}

/// Packets read before the columns reserve room for the rest of the file.
const RESERVE_AFTER: u64 = 1024;

/// One Arrow buffer built in Rust, handed to Python without a copy: the wrapper wraps
/// `address` and `size` with `pyarrow.foreign_buffer`, passing this object as the base
/// that keeps the memory alive. Frozen: nothing changes the vector once it is here.
#[pyclass(module = "weir._weir", frozen)]
pub enum Buffer {
    Bytes(Vec<u8>),
    /// String offsets (Arrow's i32, little-endian as on every target weir builds for).
    Offsets(Vec<i32>),
}

#[pymethods]
impl Buffer {
    /// Where the bytes start, as an integer for `pyarrow.foreign_buffer`.
    #[getter]
    fn address(&self) -> usize {
        match self {
            Buffer::Bytes(v) => v.as_ptr() as usize,
            Buffer::Offsets(v) => v.as_ptr() as usize,
        }
    }

    /// How many bytes.
    #[getter]
    fn size(&self) -> usize {
        match self {
            Buffer::Bytes(v) => v.len(),
            Buffer::Offsets(v) => std::mem::size_of_val(v.as_slice()),
        }
    }
}
