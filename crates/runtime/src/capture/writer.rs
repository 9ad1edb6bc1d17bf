//! Writing packets out as a capture, streaming: one record at a time through a buffered
//! [`OutputFile`], nothing held but the (rare) descriptive pcapng blocks of packets left
//! out, and those only up to [`HELD_MAX`] bytes.
//!
//! Two kinds of output:
//!
//! - **Copy-through** ([`CaptureWriter::like`]): the input's own format, byte order, link type
//!   (extension bits included) and timestamp resolution. Each kept packet's record is copied
//!   as stored ([`Packet::stored`]), so timestamps, lengths and pcapng options come out bit
//!   for bit. Where libpcap reads a pcap file otherwise than stored, the copy is what
//!   `tcpdump -r IN -w OUT` writes: the header's snapshot length as libpcap adjusts it (0
//!   and above INT_MAX the link type's maximum, the modified format's +14), a record whose
//!   captured length is above the snapshot length cut to it (its stored header with the cut
//!   length, the wire length kept), and the modified ("Kuznetsov") format and versions
//!   before 2.4 written as 2.4 with 16-byte record headers and microsecond magic (their
//!   timestamps as stored). Kept where tcpdump differs: the byte order (tcpdump writes its
//!   host's), nanosecond timestamps (tcpdump writes microseconds unless `--nano`), the time
//!   zone and accuracy fields (tcpdump writes 0). For pcapng the descriptive blocks
//!   (section headers, interface descriptions, name resolution, custom and unknown blocks)
//!   are copied in their places, each section header with its section length set to -1
//!   ("unknown": the selection is shorter); interface statistics (which counted the input's
//!   packets) are not. Packets left out are passed to [`skip`](CaptureWriter::skip), which
//!   keeps their descriptive blocks for the next kept packet; blocks after the last kept
//!   packet are not written.
//! - **Fresh pcap** ([`CaptureWriter::pcap`]): written from the packets' fields as `tcpdump -w`
//!   writes: microsecond magic in host byte order, version 2.4, the given link type and
//!   snapshot length. Live capture writes through it.
//!
//! The bytes go to an [`OutputFile`]: standard output for `-`, a device or FIFO written
//! through, a regular file replaced atomically (a temporary file renamed by
//! [`CaptureWriter::finish`]; a writer dropped before that, an error, a panic or SIGINT,
//! SIGTERM, SIGHUP remove it), a hard-linked file written in place. See
//! [`crate::output`] for the whole table. [`flush_each_packet`](CaptureWriter::flush_each_packet)
//! pushes every record out at once (tcpdump's `-U`).

use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use super::{CaptureReader, Format, BT_SHB};
use crate::output::OutputFile;
use crate::source::{Packet, PacketSource};

/// Descriptive blocks of skipped packets held back for the next kept one, at most; past it
/// they are written at once (the output then has them before packets it does not hold,
/// which is still a valid capture).
pub const HELD_MAX: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `big`: the file's byte order. `rewrite`: every record's header is written from the
    /// packet (the modified format's 24-byte headers and the swapped length fields of
    /// versions before 2.4 become 2.4's 16 bytes, as libpcap writes them); otherwise only a
    /// record cut to the snapshot length is (its stored header with the cut length).
    CopyPcap {
        big: bool,
        rewrite: bool,
    },
    /// `big`: the section's byte order.
    CopyPcapNg {
        big: bool,
    },
    FreshPcap,
}

/// Writes packets to a new capture file (or standard output).
pub struct CaptureWriter {
    sink: BufWriter<OutputFile>,
    mode: Mode,
    held: Vec<u8>,
    flush_each: bool,
    written: u64,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

impl CaptureWriter {
    /// Starts a copy-through capture like the one `reader` reads, to `dest` (`-` for
    /// standard output; see [`OutputFile::create`]). A regular file's name holds the new
    /// capture only after [`finish`](Self::finish).
    pub fn like<R: Read>(dest: &Path, reader: &CaptureReader<R>) -> io::Result<CaptureWriter> {
        let header = reader.header();
        match reader.format() {
            Format::Pcap => {
                let (pcap_header, big, rewrite) = pcap_header_as_written(header, reader.snaplen());
                let mut writer = CaptureWriter::start(dest, Mode::CopyPcap { big, rewrite })?;
                writer.sink.write_all(&pcap_header)?;
                Ok(writer)
            }
            Format::PcapNg => {
                let mode = Mode::CopyPcapNg { big: header.get(8) == Some(&0x1A) };
                let mut writer = CaptureWriter::start(dest, mode)?;
                writer.copy_blocks(header)?;
                Ok(writer)
            }
        }
    }

    /// Starts a fresh pcap file as `tcpdump -w` writes one: microsecond timestamps, host
    /// byte order, version 2.4.
    pub fn pcap(dest: &Path, linktype: u32, snaplen: u32) -> io::Result<CaptureWriter> {
        let mut writer = CaptureWriter::start(dest, Mode::FreshPcap)?;
        let mut header = [0u8; 24];
        let fields: [&[u8]; 6] = [
            &super::MAGIC_MICRO.to_ne_bytes(),
            &2u16.to_ne_bytes(),
            &4u16.to_ne_bytes(),
            &[0; 8],
            &snaplen.to_ne_bytes(),
            &linktype.to_ne_bytes(),
        ];
        let mut at = 0;
        for field in fields {
            if let Some(slot) = header.get_mut(at..at + field.len()) {
                slot.copy_from_slice(field);
            }
            at += field.len();
        }
        writer.sink.write_all(&header)?;
        Ok(writer)
    }

    fn start(dest: &Path, mode: Mode) -> io::Result<CaptureWriter> {
        // On an error the sink is dropped, and with it any temporary file.
        // 1 MiB: a large capture goes out in few write(2) calls.
        let sink = BufWriter::with_capacity(1 << 20, OutputFile::create(dest)?);
        Ok(CaptureWriter { sink, mode, held: Vec::new(), flush_each: false, written: 0 })
    }

    /// Flush after every packet (tcpdump's `-U`): a reader of the output sees each packet
    /// as soon as it is written.
    pub fn flush_each_packet(&mut self, on: bool) {
        self.flush_each = on;
    }

    /// Appends one packet: its stored record for a copy-through writer (after the
    /// descriptive blocks before it), a record made from its fields for a fresh pcap.
    pub fn write(&mut self, packet: &Packet<'_>) -> io::Result<()> {
        match self.mode {
            Mode::FreshPcap => {
                let caplen = u32::try_from(packet.data.len()).unwrap_or(u32::MAX);
                let ts_sec = u32::try_from(packet.ts_sec).unwrap_or(u32::MAX);
                let mut header = [0u8; 16];
                let fields = [ts_sec, packet.ts_nsec / 1000, caplen, packet.wire_len];
                for (slot, field) in header.chunks_exact_mut(4).zip(fields) {
                    slot.copy_from_slice(&field.to_ne_bytes());
                }
                self.sink.write_all(&header)?;
                self.sink.write_all(packet.data)?;
            }
            Mode::CopyPcap { .. } | Mode::CopyPcapNg { .. } => {
                let Some(stored) = packet.stored else {
                    return Err(invalid(format!(
                        "packet {} has no stored record to copy (a live packet needs \
                         CaptureWriter::pcap)",
                        packet.index.saturating_add(1)
                    )));
                };
                if !self.held.is_empty() {
                    let held = std::mem::take(&mut self.held);
                    self.sink.write_all(&held)?;
                    self.held = held;
                    self.held.clear();
                }
                self.copy_blocks(stored.blocks_before)?;
                match self.mode {
                    Mode::CopyPcap { big, rewrite }
                        if rewrite
                            || stored.record.len().saturating_sub(16) != packet.data.len() =>
                    {
                        let caplen = u32::try_from(packet.data.len()).unwrap_or(u32::MAX);
                        let header =
                            pcap_record_header(stored.record, caplen, packet.wire_len, big);
                        self.sink.write_all(&header)?;
                        self.sink.write_all(packet.data)?;
                    }
                    _ => self.sink.write_all(stored.record)?,
                }
            }
        }
        self.written = self.written.saturating_add(1);
        if self.flush_each {
            self.sink.flush()?;
        }
        Ok(())
    }

    /// A packet left out: for a pcapng copy its descriptive blocks are kept for the next
    /// packet written (at most [`HELD_MAX`] bytes; past that they are written now).
    pub fn skip(&mut self, packet: &Packet<'_>) -> io::Result<()> {
        let Mode::CopyPcapNg { big } = self.mode else {
            return Ok(());
        };
        let Some(stored) = packet.stored else {
            return Ok(());
        };
        if stored.blocks_before.is_empty() {
            return Ok(());
        }
        let mut held = std::mem::take(&mut self.held);
        for_each_block(stored.blocks_before, big, |part| {
            held.extend_from_slice(part);
            Ok(())
        })?;
        if held.len() > HELD_MAX {
            self.sink.write_all(&held)?;
            held.clear();
        }
        self.held = held;
        Ok(())
    }

    /// Writes pcapng blocks (or a pcap header) as stored, section headers with an unknown
    /// section length.
    fn copy_blocks(&mut self, blocks: &[u8]) -> io::Result<()> {
        match self.mode {
            Mode::CopyPcapNg { big } => {
                let sink = &mut self.sink;
                for_each_block(blocks, big, |part| sink.write_all(part))
            }
            _ => self.sink.write_all(blocks),
        }
    }

    /// Whether [`write_pcap_runs`](Self::write_pcap_runs) applies: a pcap copied
    /// through, not flushed after each packet (`-U` wants each packet on its own).
    pub fn takes_pcap_runs(&self) -> bool {
        matches!(self.mode, Mode::CopyPcap { rewrite: false, .. }) && !self.flush_each
    }

    /// Copies `count` pcap records, as [`write`](Self::write) writes them, given as runs of
    /// consecutive records: what [`write`](Self::write) of each would write, for a reader's
    /// kept records ([`CaptureReader::copy_buffered`]). Only when
    /// [`takes_pcap_runs`](Self::takes_pcap_runs). What is buffered goes out first, then the
    /// runs in `writev(2)` calls straight from the reader's buffer: no copy into this
    /// writer's buffer on the way (measured: see bench/records/2026-11-29-e2e-7.txt).
    pub fn write_pcap_runs(&mut self, runs: &mut [io::IoSlice<'_>], count: u64) -> io::Result<()> {
        if !self.takes_pcap_runs() {
            return Err(invalid("internal: pcap runs written to a writer that takes none".into()));
        }
        self.sink.flush()?;
        let mut runs = runs;
        let out = self.sink.get_mut();
        while !runs.is_empty() {
            match out.write_vectored(runs) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => io::IoSlice::advance_slices(&mut runs, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.written = self.written.saturating_add(count);
        Ok(())
    }

    /// How many packets have been written.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flushes the capture and completes the output ([`OutputFile::finish`]: a regular
    /// file is synced and renamed into place). Returns the number of packets written.
    pub fn finish(self) -> io::Result<u64> {
        self.sink.into_inner().map_err(|e| e.into_error())?.finish()?;
        Ok(self.written)
    }
}

/// The pcap file header a copy-through writes for a stored one (`stored`, 24 bytes) whose
/// snapshot length the reader adjusted to `snapshot`, and the file's byte order (`big`) and
/// whether every record header must be rewritten. As `tcpdump -w` writes it: the adjusted
/// snapshot length (libpcap's `pcap_snapshot`: 0 and above INT_MAX read as the link type's
/// maximum, the modified format's +14), version 2.4 and, for the modified ("Kuznetsov")
/// magic, the microsecond one with 16-byte record headers. Kept as stored: the byte order,
/// the timestamp resolution (nanoseconds stay), the time zone and accuracy fields and the
/// link type with its extension bits. A header that needs none of this is the stored one.
fn pcap_header_as_written(stored: &[u8], snapshot: u32) -> (Vec<u8>, bool, bool) {
    let word = |at: usize| -> [u8; 4] {
        stored.get(at..at + 4).and_then(|s| s.try_into().ok()).unwrap_or_default()
    };
    let magics = [super::MAGIC_MICRO, super::MAGIC_NANO, super::MAGIC_KUZNETSOV];
    let big = !magics.contains(&u32::from_le_bytes(word(0)));
    let put = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
    let magic = if big { u32::from_be_bytes(word(0)) } else { u32::from_le_bytes(word(0)) };
    let version = word(4);
    let version_2_4 = if big { [0, 2, 0, 4] } else { [2, 0, 4, 0] };
    let rewrite = magic == super::MAGIC_KUZNETSOV || version != version_2_4;
    let mut out = stored.get(..24).unwrap_or_default().to_vec();
    out.resize(24, 0);
    if magic == super::MAGIC_KUZNETSOV {
        out[..4].copy_from_slice(&put(super::MAGIC_MICRO));
    }
    out[4..8].copy_from_slice(&version_2_4);
    out[16..20].copy_from_slice(&put(snapshot));
    (out, big, rewrite)
}

/// A 16-byte pcap record header as libpcap writes it: the stored record's timestamp words
/// (`stored`'s first 8 bytes, in the file's byte order), then `caplen` and `wire` (in the
/// byte order `big` says). For a record cut to the snapshot length and for the record
/// headers of the modified format and of old versions.
pub(super) fn pcap_record_header(stored: &[u8], caplen: u32, wire: u32, big: bool) -> [u8; 16] {
    let mut header = [0u8; 16];
    if let (Some(ts), Some(slot)) = (stored.get(..8), header.get_mut(..8)) {
        slot.copy_from_slice(ts);
    }
    let (caplen, wire) = if big {
        (caplen.to_be_bytes(), wire.to_be_bytes())
    } else {
        (caplen.to_le_bytes(), wire.to_le_bytes())
    };
    header[8..12].copy_from_slice(&caplen);
    header[12..16].copy_from_slice(&wire);
    header
}

/// Passes pcapng blocks on in pieces, each section header's section length replaced by -1.
fn for_each_block(
    mut blocks: &[u8],
    big: bool,
    mut out: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    const UNKNOWN_LENGTH: [u8; 8] = [0xff; 8];
    while !blocks.is_empty() {
        let word = |at: usize| -> u32 {
            let b: [u8; 4] =
                blocks.get(at..at + 4).and_then(|s| s.try_into().ok()).unwrap_or_default();
            if big {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let length = (word(4) as usize).clamp(12, blocks.len().max(12));
        let Some(block) = blocks.get(..length) else {
            // Not whole blocks (never from a CaptureReader): copied as they are.
            return out(blocks);
        };
        match (word(0) == BT_SHB, block.get(..16), block.get(24..)) {
            (true, Some(head), Some(tail)) => {
                out(head)?;
                out(&UNKNOWN_LENGTH)?;
                out(tail)?;
            }
            _ => out(block)?,
        }
        blocks = blocks.get(length..).unwrap_or_default();
    }
    Ok(())
}

/// Copies every packet of `reader` to `dest` for which `keep` says so, in the input's
/// format; returns the number written (the first damage ends the copy as an error, after
/// the packets before it are written and the output completed).
pub fn copy_selected<R: Read>(
    reader: &mut CaptureReader<R>,
    dest: &Path,
    mut keep: impl FnMut(&Packet<'_>) -> bool,
) -> io::Result<u64> {
    let mut writer = CaptureWriter::like(dest, reader)?;
    let mut damage = None;
    while let Some(packet) = reader.next_packet() {
        match packet {
            Err(e) => {
                damage = Some(e);
                break;
            }
            Ok(packet) if keep(&packet) => writer.write(&packet)?,
            Ok(packet) => writer.skip(&packet)?,
        }
    }
    let written = writer.finish()?;
    match damage {
        Some(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        None => Ok(written),
    }
}

#[cfg(test)]
mod tests;
