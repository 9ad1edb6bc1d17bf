//! Capture files: pcap (either byte order; micro- and nanosecond magic; the modified
//! "Kuznetsov" magic with its 24-byte record headers) and pcapng (any number of sections and
//! interfaces; enhanced, simple and obsolete packet blocks), read as a stream.
//!
//! [`CaptureReader`] is a [`PacketSource`] over any [`Read`]: a file or standard input. It
//! reads in large chunks (`read(2)` of [`DEFAULT_CHUNK`] bytes) into one buffer and hands
//! out packets borrowed from it; a record that straddles two chunks is completed by moving
//! the partial tail to the start of the buffer, which grows only for a record larger than
//! itself (and never past the record-size limit libpcap applies). Memory is constant
//! whatever the file's size, no packet's bytes are copied after the read, and a record is
//! yielded as soon as its bytes have arrived: a pipe is a true stream.
//!
//! The formats are read as libpcap 1.10 reads them (`sf-pcap.c`, `sf-pcapng.c`): the
//! link-type field masked with `LT_LINKTYPE` (the FCS bits above it are kept apart,
//! [`CaptureReader::linktype_ext`]), version checks, snapshot lengths of 0 or above INT_MAX
//! replaced by the link type's maximum (one between that maximum and INT_MAX is kept, as
//! libpcap 1.10.3 keeps it), a pcap captured length above the snapshot length cut to it, a
//! pcap captured length above the link type's maximum refused at that record, a pcapng
//! captured length above the snapshot length refused (whatever the link type's maximum),
//! versions 2.0-2.3 whose length fields are swapped, pcapng block-length checks, interface
//! description options checked and packet-block options not, unknown blocks skipped. Where
//! weir reads further than libpcap it says so in [`CaptureReader`]'s documentation.
//!
//! A file damaged midway yields every packet before the damage; the error then says where
//! (record number and byte offset). [`CaptureWriter`] writes packets back out: copied through
//! in the input's own format, or as a fresh pcap file.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Stdin};
use std::path::Path;

use crate::source::{Packet, PacketSource, Stored};
pub use relay::Turn;

/// The two capture formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
}

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = weir_packet::LinkType::Ethernet.linktype();

/// How many bytes one `read` asks for. Measured reading a 403 MB, 1,000,000-packet pcap
/// from the page cache (three rounds): 64 KiB 0.16-0.18 s, 256 KiB 0.15 s, 1 MiB
/// 0.14-0.16 s, 4 MiB 0.18-0.20 s (the chunk no longer stays in the cache).
pub const DEFAULT_CHUNK: usize = 1 << 20;

/// libpcap's `LT_LINKTYPE`: the link type proper; the bits above hold the FCS length.
pub const LT_LINKTYPE_MASK: u32 = 0x03FF_FFFF;

/// libpcap's `MAXIMUM_SNAPLEN`.
const MAXIMUM_SNAPLEN: u32 = 262_144;

/// pcapng: the first section header's largest accepted length (libpcap's
/// `BT_SHB_INSANE_MAX`).
const SHB_INSANE_MAX: u32 = 1 << 20;

/// pcapng: the largest block before the first interface raises it (libpcap's
/// `INITIAL_MAX_BLOCKSIZE`).
const INITIAL_MAX_BLOCK: u32 = 16 << 20;

/// weir's own bounds on what a pcapng file can make it hold: interfaces per section and the
/// bytes of descriptive blocks kept between two packets for a copy-through writer.
const MAX_INTERFACES: usize = 1 << 20;
const MAX_PENDING: usize = 64 << 20;

const BT_SHB: u32 = 0x0A0D_0D0A;
const BT_IDB: u32 = 1;
const BT_PB: u32 = 2;
const BT_SPB: u32 = 3;
const BT_ISB: u32 = 5;
const BT_EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

const MAGIC_MICRO: u32 = 0xA1B2_C3D4;
const MAGIC_NANO: u32 = 0xA1B2_3C4D;
const MAGIC_KUZNETSOV: u32 = 0xA1B2_CD34;

/// The largest captured length libpcap accepts for a link type (`max_snaplen_for_dlt`:
/// D-Bus 128 MiB, EBHSCR 8 MiB, USBPcap 1 MiB, everything else 256 KiB).
pub fn max_snaplen(linktype: u32) -> u32 {
    match linktype {
        231 => 128 << 20,
        279 => 8 << 20,
        249 => 1 << 20,
        _ => MAXIMUM_SNAPLEN,
    }
}

/// libpcap's largest snapshot length (`INT_MAX`: `pcap_t`'s `snapshot` is an `int`).
const INT_MAX: u32 = i32::MAX as u32;

/// libpcap 1.10's `pcap_adjust_snapshot`: 0 or more than `INT_MAX` means the link type's
/// maximum; anything else is kept, even above that maximum (libpcap 1.10.3 keeps a pcap
/// header's or first interface's 300,000, and `pcap_compile` accepts with it: `ret #300000`).
fn adjust_snapshot(linktype: u32, snaplen: u32) -> u32 {
    if snaplen == 0 || snaplen > INT_MAX {
        max_snaplen(linktype)
    } else {
        snaplen
    }
}

/// libpcap's refusal of a captured length: pcap's when it is above the link type's maximum
/// (naming the snapshot length when it is above that too), pcapng's when it is above the
/// snapshot length.
fn invalid_caplen(caplen: u32, snapshot: u32, max: u32) -> String {
    if caplen > snapshot {
        format!("invalid packet capture length {caplen}, bigger than snaplen of {snapshot}")
    } else {
        format!("invalid packet capture length {caplen}, bigger than maximum of {max}")
    }
}

/// A problem with a capture file, with the place it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", place(*record, *offset))]
pub struct CaptureError {
    /// The 0-based index of the packet being read, when the problem is past the header.
    pub record: Option<u64>,
    /// Byte offset in the file; `None` when the file could not be opened at all.
    pub offset: Option<u64>,
    pub message: String,
}

fn place(record: Option<u64>, offset: Option<u64>) -> String {
    match (record, offset) {
        (Some(r), Some(o)) => format!("record {} at byte {o}: ", r.saturating_add(1)),
        (None, Some(o)) => format!("at byte {o}: "),
        (Some(r), None) => format!("record {}: ", r.saturating_add(1)),
        (None, None) => String::new(),
    }
}

/// Byte order of a file's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Little,
    Big,
}

impl Order {
    #[inline]
    fn u16(self, bytes: &[u8], at: usize) -> u16 {
        let b: [u8; 2] =
            bytes.get(at..at.saturating_add(2)).and_then(|s| s.try_into().ok()).unwrap_or_default();
        match self {
            Order::Little => u16::from_le_bytes(b),
            Order::Big => u16::from_be_bytes(b),
        }
    }

    #[inline]
    fn u32(self, bytes: &[u8], at: usize) -> u32 {
        let b: [u8; 4] =
            bytes.get(at..at.saturating_add(4)).and_then(|s| s.try_into().ok()).unwrap_or_default();
        match self {
            Order::Little => u32::from_le_bytes(b),
            Order::Big => u32::from_be_bytes(b),
        }
    }

    #[inline]
    fn u64(self, bytes: &[u8], at: usize) -> u64 {
        let b: [u8; 8] =
            bytes.get(at..at.saturating_add(8)).and_then(|s| s.try_into().ok()).unwrap_or_default();
        match self {
            Order::Little => u64::from_le_bytes(b),
            Order::Big => u64::from_be_bytes(b),
        }
    }
}

/// The read buffer: `buf[start..end]` holds the unconsumed bytes, `base` is the file offset
/// of `buf[0]`.
struct Window<R> {
    input: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    base: u64,
    eof: bool,
    /// Relayed (a pcap file read by two threads taking turns, [`relay`]): every byte comes
    /// from `staged` chunks and `input` is not read again.
    relay: bool,
    /// Chunks read ahead, in file order, not yet joined to the window.
    staged: VecDeque<Chunk>,
    /// Their bytes.
    staged_len: usize,
    /// The last chunk is among them (or was).
    last_staged: bool,
    /// `buf` is a chunk's buffer (with [`HEADROOM`]), to be reused when the window moves on.
    held: bool,
    /// Chunk buffers the window has moved past, for their threads' next reads (owner,
    /// buffer).
    spare: Vec<(usize, Vec<u8>)>,
    /// The owner of `buf` when `held`.
    owner: usize,
}

/// Relay: bytes before each chunk's data, room for the partial record at the end of the
/// previous chunk. Every pcap record of a link type whose maximum is libpcap's usual 256 KiB
/// fits, with its 24-byte header at most; a longer partial record is joined in a buffer of
/// its own.
const HEADROOM: usize = (256 << 10) + 64;

/// Relay: one chunk of the file, `buf[HEADROOM..HEADROOM + len]` holding the bytes at
/// `offset`; `error` is the read error that ended it short.
struct Chunk {
    buf: Vec<u8>,
    /// The thread that read it: its buffers go back to it, so that no thread writes lines
    /// another core's cache holds.
    owner: usize,
    len: usize,
    offset: u64,
    error: Option<io::Error>,
}

impl<R: Read> Window<R> {
    fn new(input: R, chunk: usize) -> Window<R> {
        Window {
            input,
            buf: vec![0; chunk.max(1)],
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            relay: false,
            staged: VecDeque::new(),
            staged_len: 0,
            last_staged: false,
            held: false,
            spare: Vec::new(),
            owner: 0,
        }
    }

    /// Relay: a chunk read ahead, the next in file order.
    fn stage(&mut self, chunk: Chunk, last: bool) {
        self.staged_len = self.staged_len.saturating_add(chunk.len);
        self.last_staged |= last;
        self.staged.push_back(chunk);
    }

    /// Relay: keeps a buffer the window has moved past for its thread's next read (a few
    /// at most).
    fn recycle(&mut self, owner: usize, buf: Vec<u8>) {
        if self.spare.len() < 4 {
            self.spare.push((owner, buf));
        }
    }

    /// Relay: a buffer `owner` read into before, if one is free.
    fn spare_of(&mut self, owner: usize) -> Option<Vec<u8>> {
        let at = self.spare.iter().position(|(o, _)| *o == owner)?;
        Some(self.spare.swap_remove(at).1)
    }

    /// Bytes taken from the input so far (the offset a read-ahead starts from).
    fn read_so_far(&self) -> u64 {
        self.base.saturating_add(self.end as u64)
    }

    /// File offset of the first unconsumed byte.
    #[inline]
    fn offset(&self) -> u64 {
        self.base.saturating_add(self.start as u64)
    }

    #[inline]
    fn available(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// The unconsumed bytes.
    #[inline]
    fn bytes(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or_default()
    }

    /// Whether the next record needs a `read` (nothing complete is buffered beyond `need`).
    #[inline]
    fn would_read(&self, need: usize) -> bool {
        if self.relay {
            return !self.eof
                && !self.last_staged
                && self.available().saturating_add(self.staged_len) < need;
        }
        !self.eof && self.available() < need
    }

    /// Makes `need` unconsumed bytes available, reading as little as the input gives at a
    /// time. `Ok(false)`: the input ended first.
    #[inline]
    fn fill(&mut self, need: usize) -> io::Result<bool> {
        if self.available() >= need {
            return Ok(true);
        }
        self.fill_from_input(need)
    }

    /// [`fill`](Self::fill)'s slow path: reads until `need` bytes are there or input ends.
    #[inline(never)]
    fn fill_from_input(&mut self, need: usize) -> io::Result<bool> {
        if self.relay {
            return self.fill_from_staged(need);
        }
        while self.available() < need {
            if self.eof {
                return Ok(false);
            }
            // Before a read, move the partial tail to the front (a record's worth at most),
            // so every read can ask for a whole chunk; grow only for a bigger record.
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.base = self.base.saturating_add(self.start as u64);
                self.end = self.available();
                self.start = 0;
            }
            if self.buf.len() < need {
                self.buf.resize(need, 0);
            }
            let Some(space) = self.buf.get_mut(self.end..) else {
                return Err(io::Error::other("internal: read buffer"));
            };
            match self.input.read(space) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end = self.end.saturating_add(n).min(self.buf.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// [`fill_from_input`](Self::fill_from_input) when relayed: the next staged chunk's
    /// buffer becomes the window, the partial record before it copied into its headroom.
    fn fill_from_staged(&mut self, need: usize) -> io::Result<bool> {
        while self.available() < need {
            if self.eof {
                return Ok(false);
            }
            let Some(mut chunk) = self.staged.pop_front() else {
                if self.last_staged {
                    self.eof = true;
                    continue;
                }
                // The relay stages chunks before it asks for packets (`would_read`).
                return Err(io::Error::other("internal: the relay ran out of chunks"));
            };
            self.staged_len = self.staged_len.saturating_sub(chunk.len);
            if let Some(e) = chunk.error.take() {
                self.eof = true;
                self.recycle(chunk.owner, chunk.buf);
                return Err(e);
            }
            let data_end = HEADROOM.saturating_add(chunk.len);
            let tail = self.available();
            if chunk.len == 0 {
                self.recycle(chunk.owner, chunk.buf);
                continue;
            }
            if tail <= HEADROOM {
                // The usual case: the partial record goes into the headroom.
                let at = HEADROOM - tail;
                let (Some(dest), Some(src)) =
                    (chunk.buf.get_mut(at..HEADROOM), self.buf.get(self.start..self.end))
                else {
                    return Err(io::Error::other("internal: relay headroom"));
                };
                dest.copy_from_slice(src);
                let old = std::mem::replace(&mut self.buf, chunk.buf);
                let old_owner = std::mem::replace(&mut self.owner, chunk.owner);
                if std::mem::replace(&mut self.held, true) {
                    self.recycle(old_owner, old);
                }
                self.base = chunk.offset.saturating_sub(HEADROOM as u64);
                self.start = at;
                self.end = data_end;
            } else {
                // A record longer than the headroom: joined in the window's own buffer,
                // which grows as the record needs.
                let data = chunk.buf.get(HEADROOM..data_end).unwrap_or_default();
                let mut joined = if self.held {
                    let mut joined = Vec::with_capacity(tail.saturating_add(chunk.len));
                    joined
                        .extend_from_slice(self.buf.get(self.start..self.end).unwrap_or_default());
                    joined
                } else {
                    let mut own = std::mem::take(&mut self.buf);
                    own.copy_within(self.start..self.end, 0);
                    own.truncate(tail);
                    own
                };
                joined.extend_from_slice(data);
                let old = std::mem::replace(&mut self.buf, joined);
                if std::mem::replace(&mut self.held, false) {
                    self.recycle(self.owner, old);
                }
                self.recycle(chunk.owner, chunk.buf);
                self.base = chunk.offset.saturating_sub(tail as u64);
                self.start = 0;
                self.end = self.buf.len();
            }
        }
        Ok(true)
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.end);
    }
}

/// What standard input or a file gives a [`CaptureReader`] made by [`CaptureReader::open`].
pub enum Input {
    File(File),
    Stdin(Stdin),
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::File(f) => f.read(buf),
            // Stdin's own buffer is bypassed for reads larger than it when it is empty.
            Input::Stdin(s) => s.read(buf),
        }
    }
}

/// How a pcap file's captured and wire lengths are stored (libpcap's `lengths_swapped`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lengths {
    Normal,
    Swapped,
    MaybeSwapped,
}

/// One pcapng interface.
#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: u32,
    /// Adjusted as libpcap adjusts it.
    snaplen: u32,
    /// Timestamp units per second (`if_tsresol`).
    per_second: u64,
    /// Seconds added to every timestamp (`if_tsoffset`).
    offset: i64,
}

enum Kind {
    Pcap { order: Order, nano: bool, record_header: usize, lengths: Lengths },
    PcapNg { order: Order, interfaces: Vec<Interface>, max_block: u32 },
}

/// What the parse of one record found (ranges into the window), built before the packet
/// borrows the buffer.
struct Found {
    record_len: usize,
    data: (usize, usize),
    wire_len: u32,
    ts_sec: u64,
    ts_nsec: u32,
    linktype: u32,
    interface: u32,
    offset: u64,
}

/// A piece of [`CaptureReader::copy_buffered`]'s output: a run of stored records, or a cut
/// record (its new header at (start, length) in the cut headers, its data in the buffer).
enum Piece {
    Stored((usize, usize)),
    Cut(usize, usize, (usize, usize)),
}

/// The fast paths' walk over complete pcap records ([`CaptureReader::visit_buffered`]).
#[derive(Clone, Copy)]
struct PcapWalk {
    big: bool,
    record_header: usize,
    /// libpcap's refusal above the link type's maximum is `next_packet`'s to report.
    max: usize,
    snap: usize,
}

impl PcapWalk {
    /// Calls `each` on the complete records at the start of `bytes` (see
    /// [`CaptureReader::walk_buffered`]); returns the bytes and records walked.
    #[inline]
    fn walk<'b>(
        self,
        bytes: &'b [u8],
        mut each: impl FnMut((usize, usize), &'b [u8], u32) -> bool,
    ) -> (usize, u64) {
        let (mut at, mut visited) = (0usize, 0u64);
        while let Some((record, data, wire_len)) = self.record(bytes, at) {
            at = record.1;
            visited += 1;
            if !each(record, data, wire_len) {
                break;
            }
        }
        (at, visited)
    }

    /// The complete record at `at` in `bytes`: its (start, end) there, its data and its
    /// wire length; `None` where the walk stops (the record is cut by the end of `bytes`, or
    /// its captured length is one libpcap refuses).
    #[inline]
    fn record(self, bytes: &[u8], at: usize) -> Option<((usize, usize), &[u8], u32)> {
        let header = bytes.get(at..at.wrapping_add(self.record_header))?;
        let (caplen, wire_len) = (self.field(header, 8) as usize, self.field(header, 12));
        let data_at = at + self.record_header;
        let end = data_at.saturating_add(caplen);
        if caplen > self.max || end > bytes.len() {
            return None;
        }
        // A captured length above the snapshot length is cut to it, as libpcap does.
        let data = bytes.get(data_at..data_at + caplen.min(self.snap)).unwrap_or_default();
        Some(((at, end), data, wire_len))
    }

    /// The record header's 32-bit field at `i`, in the file's byte order.
    #[inline]
    fn field(self, header: &[u8], i: usize) -> u32 {
        let v = header.get(i..i + 4).and_then(|b| <[u8; 4]>::try_from(b).ok());
        let v = u32::from_le_bytes(v.unwrap_or_default());
        if self.big {
            v.swap_bytes()
        } else {
            v
        }
    }
}

/// The complete pcap records already buffered, as whole packet views in order
/// ([`CaptureReader::buffered`]): each record's header is read when the next packet is asked
/// for, with no read of the input and no `Packet` built ahead. The packets yielded count as
/// read when this is dropped: [`next_packet`](PacketSource::next_packet) goes on after the
/// last one.
pub struct Buffered<'r> {
    walk: PcapWalk,
    nano: bool,
    linktype: u32,
    bytes: &'r [u8],
    /// The file offset of `bytes[0]`.
    base: u64,
    /// Where the next record starts in `bytes`.
    at: usize,
    index: u64,
    /// The window's start and the reader's record count, moved on at the drop.
    start: &'r mut usize,
    read: &'r mut u64,
}

impl<'r> Buffered<'r> {
    /// The next record's data (cut to the snapshot length) and where it lies ([`Record`]),
    /// with no other field decoded: what `next` gives of it comes from
    /// [`Records::packet`], asked only when wanted. For a consumer that needs the rest of
    /// a packet's metadata for few packets (`weir run` without `-w` or `--verdicts`: the
    /// timestamps, offset and stored record of every packet were ~25 instructions a packet
    /// decoded, kept and read back for nothing, issue 11,
    /// bench/records/2026-12-01-runtime-38.txt). Counts as `next` counts.
    #[inline]
    pub fn next_record(&mut self) -> Option<(&'r [u8], Record)> {
        let (record, (_, data, _)) = self.walk_next()?;
        Some((data, record))
    }

    /// The next record walked (`PcapWalk::record`'s answer) and counted: the one walk
    /// `next_record` and `next` share.
    #[inline]
    fn walk_next(&mut self) -> Option<(Record, Walked<'r>)> {
        let walked = self.walk.record(self.bytes, self.at)?;
        let ((at, end), _, _) = walked;
        let index = self.index;
        self.at = end;
        self.index = index.saturating_add(1);
        Some((Record { index, at }, walked))
    }

    /// What [`Records::packet`] reads a record's metadata from: these buffered bytes and
    /// the file's format, which stay as they are while `self` lives (and after: the
    /// bytes are borrowed for `'r`).
    pub fn records(&self) -> Records<'r> {
        let (walk, nano, linktype, bytes, base) =
            (self.walk, self.nano, self.linktype, self.bytes, self.base);
        Records { walk, nano, linktype, bytes, base }
    }
}

/// What `PcapWalk::record` finds at a record: the header's span, the data (cut to the
/// snapshot length) and the wire length.
type Walked<'r> = ((usize, usize), &'r [u8], u32);

/// A record [`Buffered::next_record`] walked: its index among the reader's packets and
/// where it starts in the buffered bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    index: u64,
    at: usize,
}

impl Record {
    /// The record's 0-based position among the source's packets (`Packet::index`).
    pub fn index(self) -> u64 {
        self.index
    }
}

/// The buffered records' bytes and format ([`Buffered::records`]), from which a walked
/// [`Record`]'s packet is decoded.
#[derive(Clone, Copy)]
pub struct Records<'r> {
    walk: PcapWalk,
    nano: bool,
    linktype: u32,
    bytes: &'r [u8],
    /// The file offset of `bytes[0]`.
    base: u64,
}

impl<'r> Records<'r> {
    /// The packet of `record`: the one `Buffered::next` gives for it, field for field,
    /// decoded by the walk that found it (`PcapWalk::record`); `None` for a record that is
    /// not one the [`Buffered`] these came from walked (no complete record there).
    #[inline]
    pub fn packet(&self, record: Record) -> Option<Packet<'r>> {
        let walked = self.walk.record(self.bytes, record.at)?;
        Some(self.decode(record, walked))
    }

    /// The packet of `record` from what the walk found there (`PcapWalk::record`'s
    /// answer at `record.at`): `Buffered::next` hands in its own walk's answer rather than
    /// walking the record twice.
    #[inline]
    fn decode(&self, record: Record, walked: Walked<'r>) -> Packet<'r> {
        let ((at, end), data, wire_len) = walked;
        let header = self.bytes.get(at..end).unwrap_or_default();
        let (ts_sec, ts_frac) = (self.walk.field(header, 0), self.walk.field(header, 4));
        Packet {
            index: record.index,
            data,
            wire_len,
            ts_sec: u64::from(ts_sec),
            ts_nsec: if self.nano { ts_frac } else { ts_frac.saturating_mul(1000) },
            linktype: self.linktype,
            interface: 0,
            offset: self.base.saturating_add(at as u64),
            // A pcap file has no descriptive blocks between records.
            stored: Some(Stored { record: header, blocks_before: &[] }),
        }
    }
}

impl<'r> Iterator for Buffered<'r> {
    type Item = Packet<'r>;

    /// [`Buffered::next_record`]'s record, decoded whole as [`Records::packet`] decodes it,
    /// from the one walk.
    #[inline]
    fn next(&mut self) -> Option<Packet<'r>> {
        let (record, walked) = self.walk_next()?;
        Some(self.records().decode(record, walked))
    }
}

impl Drop for Buffered<'_> {
    fn drop(&mut self) {
        *self.start = self.start.saturating_add(self.at);
        *self.read = self.index;
    }
}

/// A capture file or stream, read packet by packet (a [`PacketSource`]).
///
/// Where weir reads further than libpcap: a pcapng file whose interfaces have different
/// link types or snapshot lengths is read whole (libpcap stops at the second interface;
/// each packet carries its interface's link type); the pseudo-headers of a few link types
/// (USB, NFLOG, SocketCAN in Linux cooked captures) in a file of the other byte order are not
/// byte-swapped (packets are never copied or changed). weir's own limits: at most 2^20
/// interfaces in a section, and at most 64 MiB of descriptive pcapng blocks between two
/// packets while those blocks are kept ([`without_blocks`](Self::without_blocks) lifts it).
pub struct CaptureReader<R = Input> {
    window: Window<R>,
    kind: Kind,
    format: Format,
    /// The pcap file header, or the first section header and the blocks through the first
    /// interface description, as stored.
    header: Vec<u8>,
    linktype: u32,
    linktype_ext: u32,
    snaplen: u32,
    index: u64,
    /// pcapng: the descriptive blocks since the previous packet, for [`Stored`].
    pending: Vec<u8>,
    keep_blocks: bool,
    /// The last call yielded a packet whose view of `pending` has now ended.
    clear_pending: bool,
    done: bool,
    /// [`relay`](CaptureReader::relay)'s chunk size ([`DEFAULT_CHUNK`]; tests use small ones).
    relay_chunk: usize,
    /// Tests: relay (or not) whatever [`relay_pays`] says.
    relay_forced: Option<bool>,
}

impl CaptureReader<Input> {
    /// Opens a capture file, or standard input when the path is `-`, and reads its header
    /// (for pcapng, up to the first interface description).
    pub fn open(path: &Path) -> Result<CaptureReader<Input>, CaptureError> {
        CaptureReader::open_with_chunk_size(path, DEFAULT_CHUNK)
    }

    /// [`open`](Self::open) with `chunk`-byte reads: a consumer that does much work per
    /// packet between reads may find a smaller chunk, which stays in the CPU's cache from the
    /// read to the packet's use, cheaper than the [`DEFAULT_CHUNK`] a bare walk prefers
    /// (`weir run`, bench/records/2026-11-30-runtime-19.txt).
    pub fn open_with_chunk_size(
        path: &Path,
        chunk: usize,
    ) -> Result<CaptureReader<Input>, CaptureError> {
        let input = if path.as_os_str() == "-" {
            Input::Stdin(io::stdin())
        } else {
            Input::File(File::open(path).map_err(|e| CaptureError {
                record: None,
                offset: None,
                message: e.to_string(),
            })?)
        };
        CaptureReader::with_chunk_size(input, chunk)
    }

    /// Reads packets by calling `turn` until it says [`Turn::Stop`] (or the capture ends):
    /// `turn` reads packets with [`next_packet`](PacketSource::next_packet) while
    /// [`would_wait`](PacketSource::would_wait) is false (at least one, whatever
    /// `would_wait` says) and then returns [`Turn::More`]. A pcap file larger than a few
    /// chunks is read by two threads taking turns ([`relay`]: each copies its own chunks
    /// and runs `turn` on them in file order, so `turn` may run on either thread, never on
    /// both at once); anything else (standard input, pcapng, a small file, one CPU) by this
    /// thread alone; so is every file when the CPUs are busy ([`relay_pays`]).
    pub fn relay<T: Send>(
        &mut self,
        state: &mut T,
        turn: impl Fn(&mut CaptureReader<Input>, &mut T) -> Turn + Sync,
    ) {
        if let Some((file, from)) = self.relay_file() {
            self.window.relay = true;
            let chunk = self.relay_chunk.max(1);
            relay::run(self, &file, from, chunk, state, &turn);
            return;
        }
        while !self.done && turn(self, state) == Turn::More {}
    }

    /// The file to relay and the offset to go on from, when relaying pays.
    fn relay_file(&self) -> Option<(File, u64)> {
        let Input::File(file) = &self.window.input else { return None };
        let from = self.window.read_so_far();
        let one_thread = !self.relay_forced.unwrap_or_else(relay_pays);
        let big = file.metadata().is_ok_and(|m| {
            m.is_file() && m.len().saturating_sub(from) >= 2 * self.relay_chunk as u64
        });
        if one_thread
            || !big
            || self.format != Format::Pcap
            || self.done
            || self.window.eof
            || from < HEADROOM as u64
        {
            return None;
        }
        Some((file.try_clone().ok()?, from))
    }
}

/// Whether two threads taking turns ([`CaptureReader::relay`]) will be faster than one: at
/// least two CPUs, and a one-minute load average below their number. On a busy machine each
/// turn waits for the other thread to be scheduled: measured at load 15 on 2 CPUs, the
/// relay took 0.80-0.89 s where one thread took 0.56 s (bench/records/2026-11-29-e2e.txt).
/// The environment variable `WEIR_READ_THREADS` decides instead: 1 one thread, 2 the relay.
pub fn relay_pays() -> bool {
    match std::env::var("WEIR_READ_THREADS").ok().as_deref().map(str::trim) {
        Some("1") => return false,
        Some("2") => return true,
        _ => {}
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return false;
    }
    // Linux's /proc/loadavg: "0.52 0.58 0.59 1/189 12345"; unreadable means not busy.
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()))
        .unwrap_or(0.0);
    load < cpus as f64
}

impl<R: Read> CaptureReader<R> {
    /// Reads the header from `input` with [`DEFAULT_CHUNK`]-byte reads.
    pub fn new(input: R) -> Result<CaptureReader<R>, CaptureError> {
        CaptureReader::with_chunk_size(input, DEFAULT_CHUNK)
    }

    /// Reads with `chunk`-byte reads (tests use small ones to put records across every
    /// chunk boundary).
    pub fn with_chunk_size(input: R, chunk: usize) -> Result<CaptureReader<R>, CaptureError> {
        let mut reader = CaptureReader {
            window: Window::new(input, chunk),
            kind: Kind::Pcap {
                order: Order::Little,
                nano: false,
                record_header: 16,
                lengths: Lengths::Normal,
            },
            format: Format::Pcap,
            header: Vec::new(),
            linktype: LINKTYPE_ETHERNET,
            linktype_ext: 0,
            snaplen: 0,
            index: 0,
            pending: Vec::new(),
            keep_blocks: true,
            clear_pending: false,
            done: false,
            relay_chunk: DEFAULT_CHUNK,
            relay_forced: None,
        };
        reader.read_header()?;
        Ok(reader)
    }

    /// Keep no descriptive pcapng blocks for [`Stored::blocks_before`] (a reader whose
    /// packets are not copied through).
    pub fn without_blocks(mut self) -> Self {
        self.keep_blocks = false;
        self.pending = Vec::new();
        self
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// The link type's extension bits of a pcap header (libpcap's `LT_LINKTYPE_EXT`: the
    /// FCS length), 0 for pcapng.
    pub fn linktype_ext(&self) -> u32 {
        self.linktype_ext
    }

    /// The pcap file header (24 bytes), or the first pcapng section header and the blocks
    /// after it up to and including the first interface description, as stored (the first
    /// packet's [`Stored::blocks_before`] starts after them).
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// Bytes consumed so far (the offset of the next record).
    pub fn position(&self) -> u64 {
        self.window.offset()
    }

    /// Whether the next [`next_packet`](PacketSource::next_packet) will have to read the
    /// input (no complete record is buffered): [`PacketSource::would_wait`].
    fn would_read(&self) -> bool {
        if self.done {
            return false;
        }
        let bytes = self.window.bytes();
        let need = match &self.kind {
            Kind::Pcap { order, record_header, lengths, .. } => {
                // Room for the largest record the link type allows: no need to look (the
                // usual case, asked after every packet).
                let largest = record_header.saturating_add(max_snaplen(self.linktype) as usize);
                if bytes.len() >= largest {
                    return false;
                }
                if bytes.len() < *record_header {
                    *record_header
                } else {
                    // Files with swapped length fields: the larger may be the captured one.
                    let caplen = match lengths {
                        Lengths::Normal => order.u32(bytes, 8),
                        _ => order.u32(bytes, 8).max(order.u32(bytes, 12)),
                    };
                    if caplen > max_snaplen(self.linktype) {
                        // Refused at its header: nothing more to wait for.
                        return self.window.would_read(*record_header);
                    }
                    record_header.saturating_add(caplen as usize)
                }
            }
            Kind::PcapNg { order, .. } => {
                if bytes.len() < 8 {
                    8
                } else {
                    order.u32(bytes, 4) as usize
                }
            }
        };
        self.window.would_read(need)
    }

    fn header_error(&self, offset: u64, message: impl Into<String>) -> CaptureError {
        CaptureError { record: None, offset: Some(offset), message: message.into() }
    }

    fn record_error(&self, offset: u64, message: impl Into<String>) -> CaptureError {
        CaptureError { record: Some(self.index), offset: Some(offset), message: message.into() }
    }

    fn io_error(&self, offset: u64, record: Option<u64>, e: &io::Error) -> CaptureError {
        CaptureError { record, offset: Some(offset), message: format!("read error: {e}") }
    }

    fn read_header(&mut self) -> Result<(), CaptureError> {
        let got = self.window.fill(4).map_err(|e| self.io_error(0, None, &e))?;
        if !got {
            return Err(self.header_error(
                0,
                format!("file too short for a capture header ({} bytes)", self.window.available()),
            ));
        }
        let bytes = self.window.bytes();
        let magic = Order::Little.u32(bytes, 0);
        if magic == BT_SHB {
            return self.read_pcapng_header();
        }
        let order = if [MAGIC_MICRO, MAGIC_NANO, MAGIC_KUZNETSOV].contains(&magic) {
            Order::Little
        } else if [MAGIC_MICRO, MAGIC_NANO, MAGIC_KUZNETSOV].contains(&magic.swap_bytes()) {
            Order::Big
        } else {
            let first: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
            return Err(self.header_error(
                0,
                format!(
                    "unknown file format (the first four bytes, {}, are no pcap or pcapng \
                     magic number)",
                    first.join(" ")
                ),
            ));
        };
        self.read_pcap_header(order)
    }

    fn read_pcap_header(&mut self, order: Order) -> Result<(), CaptureError> {
        let got = self.window.fill(24).map_err(|e| self.io_error(0, None, &e))?;
        if !got {
            return Err(self.header_error(
                0,
                format!(
                    "the file ends inside the pcap header ({} of 24 bytes)",
                    self.window.available()
                ),
            ));
        }
        let h = self.window.bytes();
        let magic = order.u32(h, 0);
        let (major, minor) = (order.u16(h, 4), order.u16(h, 6));
        let snaplen = order.u32(h, 16);
        let field = order.u32(h, 20);
        if major < 2 {
            return Err(self.header_error(0, format!("archaic pcap version {major}.{minor}")));
        }
        if !((major == 2 && minor <= 4) || (major == 543 && minor == 0)) {
            return Err(self.header_error(0, format!("unsupported pcap version {major}.{minor}")));
        }
        let lengths = match (major, minor) {
            (2, 0..=2) | (543, _) => Lengths::Swapped,
            (2, 3) => Lengths::MaybeSwapped,
            _ => Lengths::Normal,
        };
        let linktype = field & LT_LINKTYPE_MASK;
        let mut snapshot = adjust_snapshot(linktype, snaplen);
        let record_header = if magic == MAGIC_KUZNETSOV {
            // Captures in "cooked" mode got a fake Ethernet header on top of the snapshot
            // (libpcap 1.10.3 stops at INT_MAX).
            if linktype == LINKTYPE_ETHERNET {
                snapshot = snapshot.saturating_add(14).min(INT_MAX);
            }
            24
        } else {
            16
        };
        self.header = h.get(..24).unwrap_or_default().to_vec();
        self.kind = Kind::Pcap { order, nano: magic == MAGIC_NANO, record_header, lengths };
        self.format = Format::Pcap;
        self.linktype = linktype;
        self.linktype_ext = field & !LT_LINKTYPE_MASK;
        self.snaplen = snapshot;
        self.window.consume(24);
        Ok(())
    }

    fn read_pcapng_header(&mut self) -> Result<(), CaptureError> {
        // Block type, length, byte-order magic: without them it is no pcapng file.
        let unknown = "unknown file format (a pcapng block type without a section header)";
        let got = self.window.fill(12).map_err(|e| self.io_error(0, None, &e))?;
        if !got {
            return Err(self.header_error(0, unknown));
        }
        let h = self.window.bytes();
        let order = match Order::Little.u32(h, 8) {
            BYTE_ORDER_MAGIC => Order::Little,
            m if m.swap_bytes() == BYTE_ORDER_MAGIC => Order::Big,
            _ => return Err(self.header_error(0, unknown)),
        };
        let length = order.u32(h, 4);
        if !(28..=SHB_INSANE_MAX).contains(&length) {
            return Err(self.header_error(
                0,
                format!(
                    "the section header's length {length} is outside libpcap's 28 to \
                     {SHB_INSANE_MAX} bytes"
                ),
            ));
        }
        self.kind = Kind::PcapNg { order, interfaces: Vec::new(), max_block: INITIAL_MAX_BLOCK };
        self.check_block_length(0, length, None)?;
        let block = self.fill_block(0, length, None)?;
        let (major, minor) = (order.u16(block, 12), order.u16(block, 14));
        if !(major == 1 && (minor == 0 || minor == 2)) {
            return Err(self.header_error(0, format!("unsupported pcapng version {major}.{minor}")));
        }
        self.header = block.to_vec();
        self.format = Format::PcapNg;
        self.window.consume(length as usize);
        // Up to the first interface description: it gives the capture's link type.
        loop {
            let at = self.window.offset();
            let got = self.window.fill(8).map_err(|e| self.io_error(at, None, &e))?;
            if !got {
                if self.window.available() == 0 {
                    return Err(
                        self.header_error(at, "the capture has no interface description block")
                    );
                }
                return Err(self.truncated(at, None, 8));
            }
            let bytes = self.window.bytes();
            let (kind, length) = (order.u32(bytes, 0), order.u32(bytes, 4));
            self.check_block_length(at, length, None)?;
            self.fill_block(at, length, None)?;
            match kind {
                BT_IDB => {
                    self.add_interface(at, None)?;
                    // The blocks up to the first interface go with the header: a copy of the
                    // capture always describes its first interface, even with no packets.
                    self.header.append(&mut self.pending);
                    let first = match &self.kind {
                        Kind::PcapNg { interfaces, .. } => interfaces.first().copied(),
                        Kind::Pcap { .. } => None,
                    };
                    if let (Some(first), Kind::PcapNg { max_block, .. }) = (first, &mut self.kind) {
                        self.linktype = first.linktype;
                        self.snaplen = first.snaplen;
                        // libpcap's MAX_BLOCKSIZE_FOR_SNAPLEN: an EPB of the largest packet
                        // with 128 KiB of options.
                        let for_snaplen =
                            max_snaplen(first.linktype).saturating_add(32).saturating_add(131_072);
                        *max_block = (*max_block).max(for_snaplen);
                    }
                    return Ok(());
                }
                BT_EPB | BT_SPB | BT_PB => {
                    return Err(self.header_error(
                        at,
                        "a packet block comes before any interface description block",
                    ));
                }
                _ => {
                    self.skip_block(length as usize, kind);
                    if self.pending.len() > MAX_PENDING {
                        return Err(self.header_error(
                            at,
                            format!(
                                "more than {} MiB of blocks before the first interface \
                                 description",
                                MAX_PENDING >> 20
                            ),
                        ));
                    }
                }
            }
        }
    }

    fn truncated(&self, at: u64, record: Option<u64>, need: usize) -> CaptureError {
        CaptureError {
            record,
            offset: Some(at),
            message: format!(
                "the file ends inside the record ({} of {need} bytes)",
                self.window.available()
            ),
        }
    }

    /// libpcap's checks of a pcapng block's total length, before its bytes are read.
    fn check_block_length(
        &self,
        at: u64,
        length: u32,
        record: Option<u64>,
    ) -> Result<(), CaptureError> {
        let max_block = match &self.kind {
            Kind::PcapNg { max_block, .. } => *max_block,
            Kind::Pcap { .. } => INITIAL_MAX_BLOCK,
        };
        let message = if length < 12 {
            format!("block length {length} is shorter than a block's 12 bytes")
        } else if !length.is_multiple_of(4) {
            format!("block length {length} is not a multiple of 4")
        } else if length > max_block {
            format!("pcapng block size {length} > maximum {max_block}")
        } else {
            return Ok(());
        };
        Err(CaptureError { record, offset: Some(at), message })
    }

    /// Reads a whole block (length checked) and its trailer; returns its bytes.
    fn fill_block(
        &mut self,
        at: u64,
        length: u32,
        record: Option<u64>,
    ) -> Result<&[u8], CaptureError> {
        let need = length as usize;
        let got = self.window.fill(need).map_err(|e| self.io_error(at, record, &e))?;
        if !got {
            return Err(self.truncated(at, record, need));
        }
        let order = match &self.kind {
            Kind::PcapNg { order, .. } => *order,
            Kind::Pcap { order, .. } => *order,
        };
        let bytes = self.window.bytes();
        let trailer = order.u32(bytes, need.saturating_sub(4));
        if trailer != length {
            return Err(CaptureError {
                record,
                offset: Some(at),
                message: format!(
                    "block length {length} at its start and {trailer} at its end differ"
                ),
            });
        }
        Ok(self.window.bytes().get(..need).unwrap_or_default())
    }

    /// Consumes a block, keeping it for `blocks_before` unless it counted packets (an
    /// interface statistics block) or blocks are not kept.
    fn skip_block(&mut self, length: usize, kind: u32) {
        if self.keep_blocks && kind != BT_ISB {
            let block = self.window.bytes().get(..length).unwrap_or_default();
            self.pending.extend_from_slice(block);
        }
        self.window.consume(length);
    }

    /// Parses the interface description block at the window's start (its length checked)
    /// as libpcap does, adds the interface and consumes the block.
    fn add_interface(&mut self, at: u64, record: Option<u64>) -> Result<(), CaptureError> {
        let Kind::PcapNg { order, .. } = &self.kind else {
            return Ok(());
        };
        let order = *order;
        let bytes = self.window.bytes();
        let length = order.u32(bytes, 4) as usize;
        let block = bytes.get(..length).unwrap_or_default();
        let fail = |message: String| CaptureError { record, offset: Some(at), message };
        // Body: after type and length, before the trailer.
        let body = block.get(8..length.saturating_sub(4)).unwrap_or_default();
        if body.len() < 8 {
            return Err(fail("interface description block too short".into()));
        }
        let linktype = u32::from(order.u16(body, 0));
        let snaplen = adjust_snapshot(linktype, order.u32(body, 4));
        let mut interface = Interface { linktype, snaplen, per_second: 1_000_000, offset: 0 };
        let (mut saw_resol, mut saw_offset) = (false, false);
        let mut options = body.get(8..).unwrap_or_default();
        while !options.is_empty() {
            if options.len() < 4 {
                return Err(fail(
                    "interface description block: an option header is cut short".into(),
                ));
            }
            let (code, len) = (order.u16(options, 0), usize::from(order.u16(options, 2)));
            let padded = len.div_ceil(4).saturating_mul(4);
            let Some(value) = options.get(4..4usize.saturating_add(padded)) else {
                return Err(fail(format!(
                    "interface description block: option {code} of {len} bytes runs past the block"
                )));
            };
            match code {
                0 => {
                    if len != 0 {
                        return Err(fail(format!(
                            "interface description block: opt_endofopt has length {len}"
                        )));
                    }
                    break;
                }
                9 => {
                    if len != 1 || saw_resol {
                        return Err(fail(format!(
                            "interface description block: if_tsresol of length {len}{}",
                            if saw_resol { ", or twice" } else { "" }
                        )));
                    }
                    saw_resol = true;
                    let r = value.first().copied().unwrap_or(6);
                    let exponent = u32::from(r & 0x7f);
                    interface.per_second = if r & 0x80 != 0 {
                        if exponent > 63 {
                            return Err(fail(format!("if_tsresol 2^-{exponent} is too fine")));
                        }
                        1u64 << exponent
                    } else {
                        if exponent > 19 {
                            return Err(fail(format!("if_tsresol 10^-{exponent} is too fine")));
                        }
                        10u64.pow(exponent)
                    };
                }
                14 => {
                    if len != 8 || saw_offset {
                        return Err(fail(format!(
                            "interface description block: if_tsoffset of length {len}{}",
                            if saw_offset { ", or twice" } else { "" }
                        )));
                    }
                    saw_offset = true;
                    interface.offset = order.u64(value, 0) as i64;
                }
                _ => {}
            }
            options = options.get(4usize.saturating_add(padded)..).unwrap_or_default();
        }
        if let Kind::PcapNg { interfaces, .. } = &mut self.kind {
            if interfaces.len() >= MAX_INTERFACES {
                return Err(fail(format!("more than {MAX_INTERFACES} interfaces in a section")));
            }
            interfaces.push(interface);
        }
        self.skip_block(length, BT_IDB);
        Ok(())
    }

    fn next_pcap(&mut self) -> Result<Option<Found>, CaptureError> {
        let Kind::Pcap { order, nano, record_header, lengths } = self.kind else {
            return Ok(None);
        };
        let at = self.window.offset();
        let index = Some(self.index);
        let got = self.window.fill(record_header).map_err(|e| self.io_error(at, index, &e))?;
        if !got {
            if self.window.available() == 0 {
                return Ok(None);
            }
            return Err(self.record_error(
                at,
                format!(
                    "the file ends inside the record header ({} of {record_header} bytes)",
                    self.window.available()
                ),
            ));
        }
        let h = self.window.bytes();
        let (ts_sec, ts_frac) = (order.u32(h, 0), order.u32(h, 4));
        let (mut caplen, mut wire_len) = (order.u32(h, 8), order.u32(h, 12));
        if lengths == Lengths::Swapped || (lengths == Lengths::MaybeSwapped && caplen > wire_len) {
            std::mem::swap(&mut caplen, &mut wire_len);
        }
        let max = max_snaplen(self.linktype);
        if caplen > max {
            return Err(self.record_error(at, invalid_caplen(caplen, self.snaplen, max)));
        }
        // The record holds `caplen` bytes (libpcap reads them all, then keeps at most the
        // snapshot length).
        let record_len = record_header.saturating_add(caplen as usize);
        let got = self.window.fill(record_len).map_err(|e| self.io_error(at, index, &e))?;
        if !got {
            return Err(self.record_error(
                at,
                format!(
                    "the file ends inside the record ({} of {record_len} bytes)",
                    self.window.available()
                ),
            ));
        }
        // A captured length above the snapshot length is cut to it, as libpcap does.
        let data_len = caplen.min(self.snaplen) as usize;
        let ts_nsec = if nano { ts_frac } else { ts_frac.saturating_mul(1000) };
        Ok(Some(Found {
            record_len,
            data: (record_header, record_header.saturating_add(data_len)),
            wire_len,
            ts_sec: u64::from(ts_sec),
            ts_nsec,
            linktype: self.linktype,
            interface: 0,
            offset: at,
        }))
    }

    /// The pcap fast path for a consumer that needs only each packet's bytes and wire length
    /// (a count): calls `visit(data, wire_len)` on the complete records already buffered, in
    /// order, with no [`Packet`] built, no timestamp converted and no read; it stops after a
    /// record for which `visit` returns false. Returns how many records it visited (they
    /// count as read: [`next_packet`](PacketSource::next_packet) goes on after them).
    ///
    /// Why: a packet view carries fields a count never looks at, and building it costs more
    /// than the filter call on the benchmark's captures. What this leaves to `next_packet`
    /// (which reads, joins, checks and reports it as usual): a record cut by the end of the
    /// buffer, a record whose captured length libpcap refuses, the end of the capture, every
    /// pcapng block, and pcap files whose length fields may be swapped (versions before 2.4).
    pub fn visit_buffered(&mut self, mut visit: impl FnMut(&[u8], u32) -> bool) -> u64 {
        self.walk_buffered(|_, data, wire_len| visit(data, wire_len))
    }

    /// [`visit_buffered`](Self::visit_buffered) for a consumer that wants the complete
    /// records buffered as one slice of `(data, wire_len)`, in order (all of them: it cannot
    /// stop early), called once (with an empty slice when none is buffered). Why: a loop that
    /// knows the packets ahead can ask the CPU to fetch them before it gets to them
    /// (`weir match --count` through `weir::Dispatch::handler_each`), which a visitor of one
    /// record at a time cannot. Returns how many records it visited.
    pub fn visit_buffered_batch(&mut self, visit: impl FnOnce(&[(&[u8], u32)])) -> u64 {
        let Some(walk) = self.pcap_walk() else {
            visit(&[]);
            return 0;
        };
        let mut batch: Vec<(&[u8], u32)> = Vec::new();
        let (at, visited) = walk.walk(self.window.bytes(), |_, data, wire_len| {
            batch.push((data, wire_len));
            true
        });
        visit(&batch);
        drop(batch);
        self.window.consume(at);
        self.index = self.index.saturating_add(visited);
        visited
    }

    /// [`visit_buffered`](Self::visit_buffered) for a copy-through writer of a pcap file:
    /// `keep(data, wire_len)` chooses, at most `max_kept` records are kept (then it stops),
    /// and the kept records go to `out` once, as slices with their number: each run of
    /// consecutive kept records as stored (header and data) in one slice, and a record
    /// whose captured length is above the snapshot length as `tcpdump -w` writes it, cut:
    /// its stored header with the cut captured length (made here), then its first snapshot
    /// length bytes. Returns (records visited, records kept), or `out`'s error. Why runs:
    /// most records of a broad filter are kept, and a writer can hand the runs to one
    /// `writev(2)`, straight from this buffer; a cut record only breaks a run.
    pub fn copy_buffered(
        &mut self,
        mut keep: impl FnMut(&[u8], u32) -> bool,
        max_kept: u64,
        out: impl FnOnce(&mut [io::IoSlice<'_>], u64) -> io::Result<()>,
    ) -> io::Result<(u64, u64)> {
        if max_kept == 0 {
            return Ok((0, 0));
        }
        let Some(walked) = self.pcap_walk() else { return Ok((0, 0)) };
        let bytes = self.window.bytes();
        let mut kept = 0u64;
        // The pieces as (start, end) in `bytes`, or a cut record's header (start in `cut`)
        // then its data in `bytes`.
        let mut runs: Vec<Piece> = Vec::new();
        let mut cut: Vec<u8> = Vec::new();
        let record_header = walked.record_header;
        let (at, visited) = walked.walk(bytes, |record, data, wire_len| {
            if !keep(data, wire_len) {
                return true;
            }
            let data_at = record.0 + record_header;
            if data_at + data.len() < record.1 {
                let stored = bytes.get(record.0..data_at).unwrap_or_default();
                let caplen = u32::try_from(data.len()).unwrap_or(u32::MAX);
                let mut header = stored.to_vec();
                let field = if walked.big { caplen.to_be_bytes() } else { caplen.to_le_bytes() };
                if let Some(slot) = header.get_mut(8..12) {
                    slot.copy_from_slice(&field);
                }
                runs.push(Piece::Cut(cut.len(), header.len(), (data_at, data_at + data.len())));
                cut.extend_from_slice(&header);
            } else {
                match runs.last_mut() {
                    Some(Piece::Stored(run)) if run.1 == record.0 => run.1 = record.1,
                    _ => runs.push(Piece::Stored(record)),
                }
            }
            kept += 1;
            kept < max_kept
        });
        let slice = |(a, b): (usize, usize)| io::IoSlice::new(bytes.get(a..b).unwrap_or_default());
        let mut slices: Vec<io::IoSlice<'_>> = Vec::with_capacity(runs.len());
        for piece in &runs {
            match *piece {
                Piece::Stored(run) => slices.push(slice(run)),
                Piece::Cut(header, len, data) => {
                    slices
                        .push(io::IoSlice::new(cut.get(header..header + len).unwrap_or_default()));
                    slices.push(slice(data));
                }
            }
        }
        let written = if kept > 0 { out(&mut slices, kept) } else { Ok(()) };
        drop(slices);
        self.window.consume(at);
        self.index = self.index.saturating_add(visited);
        written.map(|()| (visited, kept))
    }

    /// The complete pcap records buffered, as whole [`Packet`] views (index, timestamps,
    /// offset, stored record: what [`next_packet`](PacketSource::next_packet) would give for
    /// each), in order, for a consumer that keeps each packet's metadata (`weir run`: `-w`,
    /// `--verdicts`) and feeds them to an engine as one batch. `None` where
    /// [`visit_buffered`](Self::visit_buffered) would visit nothing whatever is buffered
    /// (pcapng, pcap files whose length fields may be swapped, the end or damage reached):
    /// then `next_packet` alone reads. Otherwise it yields what is buffered (maybe nothing);
    /// the record after the last it yields (a read needed, damage, the end) is `next_packet`'s.
    ///
    /// Why: `next_packet` also checks for a read and builds its answer through the general
    /// path for every record; a run of complete records needs neither.
    pub fn buffered(&mut self) -> Option<Buffered<'_>> {
        let walk = self.pcap_walk()?;
        let nano = matches!(self.kind, Kind::Pcap { nano: true, .. });
        let linktype = self.linktype;
        let index = self.index;
        let Window { buf, start, end, base, .. } = &mut self.window;
        let bytes = buf.get(*start..*end).unwrap_or_default();
        let base = base.saturating_add(*start as u64);
        Some(Buffered {
            walk,
            nano,
            linktype,
            bytes,
            base,
            at: 0,
            index,
            start,
            read: &mut self.index,
        })
    }

    /// The walk both fast paths share: `each((start, end) of the record in the window's
    /// bytes, data, wire_len)`, stopping after a record for which it returns false.
    fn walk_buffered(&mut self, each: impl FnMut((usize, usize), &[u8], u32) -> bool) -> u64 {
        let Some(walk) = self.pcap_walk() else { return 0 };
        let (at, visited) = walk.walk(self.window.bytes(), each);
        self.window.consume(at);
        self.index = self.index.saturating_add(visited);
        visited
    }

    /// The fast paths' parameters, when they apply: a pcap file with lengths in their usual
    /// fields, not ended.
    fn pcap_walk(&self) -> Option<PcapWalk> {
        let Kind::Pcap { order, record_header, lengths: Lengths::Normal, .. } = self.kind else {
            return None;
        };
        if self.done {
            return None;
        }
        Some(PcapWalk {
            big: order == Order::Big,
            record_header,
            max: max_snaplen(self.linktype) as usize,
            snap: self.snaplen as usize,
        })
    }

    fn next_pcapng(&mut self) -> Result<Option<Found>, CaptureError> {
        loop {
            let Kind::PcapNg { order, .. } = &self.kind else {
                return Ok(None);
            };
            let order = *order;
            let at = self.window.offset();
            let index = Some(self.index);
            let got = self.window.fill(8).map_err(|e| self.io_error(at, index, &e))?;
            if !got {
                if self.window.available() == 0 {
                    return Ok(None);
                }
                return Err(self.truncated(at, index, 8));
            }
            let bytes = self.window.bytes();
            let (kind, length) = (order.u32(bytes, 0), order.u32(bytes, 4));
            self.check_block_length(at, length, index)?;
            let block = self.fill_block(at, length, index)?;
            let len = length as usize;
            let body = block.get(8..len.saturating_sub(4)).unwrap_or_default();
            let short = |what: &str| CaptureError {
                record: index,
                offset: Some(at),
                message: format!("{what} block too short"),
            };
            let (interface, caplen, wire_len, ts, data_at): (u32, u32, u32, u64, usize) = match kind
            {
                BT_EPB => {
                    if body.len() < 20 {
                        return Err(short("enhanced packet"));
                    }
                    let ts = (u64::from(order.u32(body, 4)) << 32) | u64::from(order.u32(body, 8));
                    (order.u32(body, 0), order.u32(body, 12), order.u32(body, 16), ts, 28)
                }
                BT_PB => {
                    if body.len() < 20 {
                        return Err(short("packet"));
                    }
                    let ts = (u64::from(order.u32(body, 4)) << 32) | u64::from(order.u32(body, 8));
                    let iface = u32::from(order.u16(body, 0));
                    (iface, order.u32(body, 12), order.u32(body, 16), ts, 28)
                }
                BT_SPB => {
                    if body.len() < 4 {
                        return Err(short("simple packet"));
                    }
                    let wire = order.u32(body, 0);
                    // The captured length: the wire length cut to the snapshot length.
                    let snap = match &self.kind {
                        Kind::PcapNg { interfaces, .. } => {
                            interfaces.first().map_or(u32::MAX, |i| i.snaplen)
                        }
                        Kind::Pcap { .. } => u32::MAX,
                    };
                    (0, wire.min(snap), wire, 0, 12)
                }
                BT_IDB => {
                    self.add_interface(at, index)?;
                    continue;
                }
                BT_SHB => {
                    if body.len() < 16 {
                        return Err(short("section header"));
                    }
                    let magic = order.u32(body, 0);
                    let message = if magic == BYTE_ORDER_MAGIC {
                        let major = order.u16(body, 4);
                        (major != 1).then(|| format!("unsupported pcapng major version {major}"))
                    } else if magic.swap_bytes() == BYTE_ORDER_MAGIC {
                        Some("a section in the other byte order (libpcap refuses it)".into())
                    } else {
                        Some("a section header without the byte-order magic number".into())
                    };
                    if let Some(message) = message {
                        return Err(CaptureError { record: index, offset: Some(at), message });
                    }
                    if let Kind::PcapNg { interfaces, .. } = &mut self.kind {
                        interfaces.clear();
                    }
                    self.skip_block(len, kind);
                    continue;
                }
                _ => {
                    self.skip_block(len, kind);
                    continue;
                }
            };
            let Kind::PcapNg { interfaces, .. } = &self.kind else {
                return Ok(None);
            };
            let Some(iface) = usize::try_from(interface).ok().and_then(|i| interfaces.get(i))
            else {
                return Err(CaptureError {
                    record: index,
                    offset: Some(at),
                    message: format!(
                        "a packet of interface {interface}, which no interface description \
                         block describes"
                    ),
                });
            };
            // libpcap checks pcapng's captured length against the snapshot length only: a
            // record above the link type's maximum is read when the snapshot allows it.
            if caplen > iface.snaplen {
                return Err(CaptureError {
                    record: index,
                    offset: Some(at),
                    message: invalid_caplen(caplen, iface.snaplen, iface.snaplen),
                });
            }
            let data_end = data_at.saturating_add(caplen as usize);
            if data_end > len.saturating_sub(4) {
                return Err(CaptureError {
                    record: index,
                    offset: Some(at),
                    message: format!(
                        "captured length {caplen} runs past the end of the block ({len} bytes)"
                    ),
                });
            }
            let per_second = iface.per_second.max(1);
            let seconds = (ts / per_second) as i64;
            let frac = u128::from(ts % per_second);
            let ts_nsec = (frac * 1_000_000_000 / u128::from(per_second)) as u32;
            return Ok(Some(Found {
                record_len: len,
                data: (data_at, data_end),
                wire_len,
                ts_sec: seconds.wrapping_add(iface.offset) as u64,
                ts_nsec,
                linktype: iface.linktype,
                interface,
                offset: at,
            }));
        }
    }
}

impl<R: Read> PacketSource for CaptureReader<R> {
    fn next_packet(&mut self) -> Option<Result<Packet<'_>, CaptureError>> {
        if self.done {
            return None;
        }
        if self.clear_pending {
            self.pending.clear();
            self.clear_pending = false;
        }
        let found = match self.format {
            Format::Pcap => self.next_pcap(),
            Format::PcapNg => self.next_pcapng(),
        };
        let found = match found {
            Ok(Some(found)) => found,
            Ok(None) => {
                self.done = true;
                return None;
            }
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        if self.pending.len() > MAX_PENDING {
            self.done = true;
            return Some(Err(self.record_error(
                found.offset,
                format!(
                    "more than {} MiB of descriptive blocks before this packet",
                    MAX_PENDING >> 20
                ),
            )));
        }
        let index = self.index;
        self.index = self.index.saturating_add(1);
        self.clear_pending = true;
        let start = self.window.start;
        self.window.consume(found.record_len);
        let buf = &self.window.buf;
        let record = buf.get(start..start.saturating_add(found.record_len)).unwrap_or_default();
        let data = record.get(found.data.0..found.data.1).unwrap_or_default();
        Some(Ok(Packet {
            index,
            data,
            wire_len: found.wire_len,
            ts_sec: found.ts_sec,
            ts_nsec: found.ts_nsec,
            linktype: found.linktype,
            interface: found.interface,
            offset: found.offset,
            stored: Some(Stored { record, blocks_before: &self.pending }),
        }))
    }

    fn linktype(&self) -> u32 {
        self.linktype
    }

    fn snaplen(&self) -> u32 {
        self.snaplen
    }

    fn would_wait(&self) -> bool {
        self.would_read()
    }
}

mod relay;
mod writer;
pub use writer::{copy_selected, CaptureWriter, HELD_MAX};

#[cfg(test)]
mod tests;
