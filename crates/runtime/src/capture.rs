//! Capture files: pcap (either byte order, micro- or nanosecond timestamps) and pcapng.
//!
//! A file is read whole into memory and records are parsed lazily, so a file that is
//! corrupt midway still yields every record before the damage, and the error says where it
//! stopped (record number and byte offset). [`CaptureWriter`] writes a selection of a
//! capture's records back out in the same format.

use std::borrow::Cow;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{PcapError, TsResolution};

/// The two capture formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
}

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = weir_packet::LinkType::Ethernet.linktype();

/// A problem with a capture file, with the place it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", place(*record, *offset))]
pub struct CaptureError {
    /// The 0-based record index, when the problem is in a record.
    pub record: Option<usize>,
    /// Byte offset in the file.
    pub offset: usize,
    pub message: String,
}

fn place(record: Option<usize>, offset: usize) -> String {
    match record {
        Some(r) => format!("record {} at byte {offset}: ", r.saturating_add(1)),
        None => format!("at byte {offset}: "),
    }
}

/// One packet record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// 0-based position among the file's packet records.
    pub index: usize,
    /// The captured bytes (possibly fewer than `wire_len`).
    pub data: Cow<'a, [u8]>,
    /// The length of the packet on the wire.
    pub wire_len: u32,
    pub ts_sec: u64,
    pub ts_nsec: u32,
    /// The link type of the interface this record came from.
    pub linktype: u32,
    /// Where the record is stored in the file: the pcap record (header and data) or the
    /// pcapng block, as a byte range. [`CaptureWriter`] copies records through it.
    pub span: Range<usize>,
}

/// A capture file held in memory.
pub struct Capture {
    bytes: Vec<u8>,
    format: Format,
    linktype: u32,
    snaplen: u32,
}

impl Capture {
    /// Reads a capture from a file, or from standard input when the path is `-`.
    pub fn open(path: &Path) -> Result<Capture, CaptureError> {
        let bytes = if path.as_os_str() == "-" {
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf).map(|_| buf)
        } else {
            std::fs::read(path)
        }
        .map_err(|e| CaptureError { record: None, offset: 0, message: e.to_string() })?;
        Capture::from_bytes(bytes)
    }

    /// Parses the file header (and, for pcapng, finds the first interface's link type).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Capture, CaptureError> {
        let header_error = |e: PcapError| CaptureError {
            record: None,
            offset: 0,
            message: format!("not a readable capture file header: {}", describe(&e)),
        };
        if bytes.len() < 4 {
            return Err(CaptureError {
                record: None,
                offset: 0,
                message: format!("file too short for a capture header ({} bytes)", bytes.len()),
            });
        }
        if bytes.get(..4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a]) {
            let (rest, mut parser) = PcapNgParser::new(&bytes).map_err(header_error)?;
            // The link type is the first interface's; find it without consuming records.
            let mut linktype = LINKTYPE_ETHERNET;
            let mut snaplen = 0;
            let mut cursor = rest;
            while !cursor.is_empty() {
                match parser.next_block(cursor) {
                    Ok((next, Block::InterfaceDescription(idb))) => {
                        linktype = u32::from(idb.linktype);
                        snaplen = idb.snaplen;
                        let _ = next;
                        break;
                    }
                    Ok((next, _)) => cursor = next,
                    Err(_) => break,
                }
            }
            return Ok(Capture { bytes, format: Format::PcapNg, linktype, snaplen });
        }
        let (_, parser) = PcapParser::new(&bytes).map_err(header_error)?;
        let header = parser.header();
        let (linktype, snaplen) = (u32::from(header.datalink), header.snaplen);
        Ok(Capture { bytes, format: Format::Pcap, linktype, snaplen })
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// The link type (for pcapng: of the first interface).
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The whole file as read.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The packet records in file order. After the first error the iterator ends.
    pub fn records(&self) -> Records<'_> {
        let state = match self.format {
            Format::Pcap => match PcapParser::new(&self.bytes) {
                Ok((rest, parser)) => State::Pcap { parser, rest },
                Err(_) => State::Done,
            },
            Format::PcapNg => match PcapNgParser::new(&self.bytes) {
                Ok((rest, parser)) => State::PcapNg { parser, rest, resolutions: Vec::new() },
                Err(_) => State::Done,
            },
        };
        Records { total: self.bytes.len(), index: 0, state }
    }
}

enum State<'a> {
    Pcap { parser: PcapParser, rest: &'a [u8] },
    PcapNg { parser: PcapNgParser, rest: &'a [u8], resolutions: Vec<(u32, u64)> },
    Done,
}

/// Iterator over a capture's records.
pub struct Records<'a> {
    total: usize,
    index: usize,
    state: State<'a>,
}

fn describe(e: &PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => "the file ends inside it".to_string(),
        other => other.to_string(),
    }
}

/// Units per second of a pcapng interface's timestamps (option `if_tsresol`, default 10^-6).
fn units_per_second(options: &[InterfaceDescriptionOption<'_>]) -> u64 {
    for option in options {
        if let InterfaceDescriptionOption::IfTsResol(r) = option {
            let exponent = u32::from(r & 0x7f);
            return if r & 0x80 != 0 {
                2u64.checked_pow(exponent).unwrap_or(u64::MAX)
            } else {
                10u64.checked_pow(exponent).unwrap_or(u64::MAX)
            };
        }
    }
    1_000_000
}

fn split_units(units: u64, per_second: u64) -> (u64, u32) {
    let per_second = per_second.max(1);
    let sec = units.checked_div(per_second).unwrap_or(0);
    let frac = units.checked_rem(per_second).unwrap_or(0);
    let nsec = u128::from(frac).saturating_mul(1_000_000_000).checked_div(u128::from(per_second));
    (sec, nsec.and_then(|n| u32::try_from(n).ok()).unwrap_or(0))
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let index = self.index;
            let total = self.total;
            let fail = |offset: usize, message: String| CaptureError {
                record: Some(index),
                offset,
                message,
            };
            let result = match &mut self.state {
                State::Done => return None,
                State::Pcap { parser, rest } => {
                    if rest.is_empty() {
                        self.state = State::Done;
                        return None;
                    }
                    let offset = total.saturating_sub(rest.len());
                    match parser.next_raw_packet(rest) {
                        Err(e) => Err(fail(offset, describe(&e))),
                        Ok((next, raw))
                            if raw.incl_len > raw.orig_len.max(parser.header().snaplen) =>
                        {
                            let _ = next;
                            Err(fail(
                                offset,
                                format!(
                                    "captured length {} exceeds the wire length {}",
                                    raw.incl_len, raw.orig_len
                                ),
                            ))
                        }
                        Ok((next, raw)) => {
                            *rest = next;
                            let end = total.saturating_sub(next.len());
                            let nsec = match parser.header().ts_resolution {
                                TsResolution::MicroSecond => raw.ts_frac.saturating_mul(1000),
                                TsResolution::NanoSecond => raw.ts_frac,
                            };
                            let linktype = u32::from(parser.header().datalink);
                            Ok(Record {
                                index,
                                wire_len: raw.orig_len.max(raw.incl_len),
                                data: raw.data,
                                ts_sec: u64::from(raw.ts_sec),
                                ts_nsec: nsec,
                                linktype,
                                span: offset..end,
                            })
                        }
                    }
                }
                State::PcapNg { parser, rest, resolutions } => {
                    if rest.is_empty() {
                        self.state = State::Done;
                        return None;
                    }
                    let offset = total.saturating_sub(rest.len());
                    match parser.next_block(rest) {
                        Err(e) => Err(fail(offset, describe(&e))),
                        Ok((next, block)) => {
                            *rest = next;
                            let span = offset..total.saturating_sub(next.len());
                            match block {
                                Block::InterfaceDescription(idb) => {
                                    resolutions.push((
                                        u32::from(idb.linktype),
                                        units_per_second(&idb.options),
                                    ));
                                    continue;
                                }
                                Block::SectionHeader(_) => {
                                    resolutions.clear();
                                    continue;
                                }
                                Block::EnhancedPacket(epb) => {
                                    let interface = usize::try_from(epb.interface_id).ok();
                                    match interface.and_then(|i| resolutions.get(i)) {
                                        None => Err(fail(
                                            offset,
                                            format!("packet names interface {} which was never described", epb.interface_id),
                                        )),
                                        Some(&(linktype, per_second)) => {
                                            let units = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                                            let (ts_sec, ts_nsec) = split_units(units, per_second);
                                            Ok(Record {
                                                index,
                                                wire_len: epb.original_len.max(u32::try_from(epb.data.len()).unwrap_or(u32::MAX)),
                                                data: epb.data,
                                                ts_sec,
                                                ts_nsec,
                                                linktype,
                                                span,
                                            })
                                        }
                                    }
                                }
                                Block::SimplePacket(spb) => {
                                    let linktype =
                                        resolutions.first().map_or(LINKTYPE_ETHERNET, |r| r.0);
                                    Ok(Record {
                                        index,
                                        wire_len: spb
                                            .original_len
                                            .max(u32::try_from(spb.data.len()).unwrap_or(u32::MAX)),
                                        data: spb.data,
                                        ts_sec: 0,
                                        ts_nsec: 0,
                                        linktype,
                                        span,
                                    })
                                }
                                _ => continue,
                            }
                        }
                    }
                }
            };
            match result {
                Ok(record) => {
                    self.index = self.index.saturating_add(1);
                    return Some(Ok(record));
                }
                Err(e) => {
                    self.state = State::Done;
                    return Some(Err(e));
                }
            }
        }
    }
}

mod writer;
pub use writer::CaptureWriter;

#[cfg(test)]
mod tests;
