//! Writing a selection of a capture's records back out, in the input's own format.
//!
//! The output keeps everything about the input but the records left out: the format (pcap or
//! pcapng), the byte order, the link type, the snap length and the timestamp resolution. Each
//! kept record is copied as stored (through pcap-file's raw record and block types), so
//! timestamps, lengths and pcapng options come out bit for bit. For pcapng the blocks that
//! describe the capture (section headers, interface descriptions, name resolution, custom
//! blocks) are copied in their places; the packets left out and the interface statistics
//! (which counted the packets of the input, not of the selection) are not.
//!
//! The bytes go to a [`OutputFile`]: standard output for `-`, a device or FIFO written
//! through, a regular file replaced atomically (a temporary file renamed by
//! [`CaptureWriter::finish`]; a writer dropped before that, an error, a panic or SIGINT,
//! SIGTERM, SIGHUP remove it), a hard-linked file written in place. See
//! [`crate::output`] for the whole table.

use std::io::{self, BufWriter};
use std::path::Path;

use pcap_file::pcap::{PcapParser, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgParser, PcapNgWriter};
use pcap_file::PcapError;

use super::{Capture, Format, Record};
use crate::output::OutputFile;

/// Where the bytes go.
type Sink = BufWriter<OutputFile>;

enum Encoder<'c> {
    Pcap {
        writer: PcapWriter<Sink>,
        parser: PcapParser,
    },
    PcapNg {
        writer: PcapNgWriter<Sink>,
        /// Walks the input's blocks between kept records, to copy the descriptive ones.
        parser: PcapNgParser,
        /// The input offset up to which blocks have been walked.
        walked: usize,
        input: &'c [u8],
    },
}

/// Writes records of one [`Capture`] to a new capture file (or standard output) of the same
/// format. Records must come in file order, each at most once.
pub struct CaptureWriter<'c> {
    encoder: Option<Encoder<'c>>,
    input: &'c [u8],
    /// Input offset just past the last record written (records must move forward).
    after_last: usize,
    written: u64,
}

fn pcap_error(e: PcapError) -> io::Error {
    match e {
        PcapError::IoError(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl<'c> CaptureWriter<'c> {
    /// Starts writing a capture like `like` to `dest` (`-` for standard output; see
    /// [`OutputFile::create`] for what each kind of destination gets). A regular file's
    /// name holds the new capture only after [`finish`](Self::finish).
    pub fn create(dest: &Path, like: &'c Capture) -> io::Result<CaptureWriter<'c>> {
        let sink = BufWriter::new(OutputFile::create(dest)?);
        // On an error the sink is dropped, and with it any temporary file.
        Ok(Self::with_encoder(Self::start(sink, like)?, like))
    }

    fn with_encoder(encoder: Encoder<'c>, like: &'c Capture) -> CaptureWriter<'c> {
        CaptureWriter { encoder: Some(encoder), input: like.bytes(), after_last: 0, written: 0 }
    }

    fn start(sink: Sink, like: &'c Capture) -> io::Result<Encoder<'c>> {
        let input = like.bytes();
        match like.format() {
            Format::Pcap => {
                let (_, parser) = PcapParser::new(input).map_err(pcap_error)?;
                let writer = PcapWriter::with_header(sink, parser.header()).map_err(pcap_error)?;
                Ok(Encoder::Pcap { writer, parser })
            }
            Format::PcapNg => {
                let (rest, parser) = PcapNgParser::new(input).map_err(pcap_error)?;
                let mut section = parser.section().clone();
                // The selection is shorter than the input's section: say "unknown length".
                section.section_length = -1;
                let writer =
                    PcapNgWriter::with_section_header(sink, section).map_err(pcap_error)?;
                let walked = input.len().saturating_sub(rest.len());
                Ok(Encoder::PcapNg { writer, parser, walked, input })
            }
        }
    }

    /// Appends one record of the capture this writer was created from.
    pub fn write(&mut self, record: &Record<'_>) -> io::Result<()> {
        let span = record.span.clone();
        if span.start < self.after_last || span.end < span.start {
            return Err(invalid(format!(
                "record {} written out of order (records must follow the file order)",
                record.index.saturating_add(1)
            )));
        }
        let Some(bytes) = self.input.get(span.clone()) else {
            return Err(invalid(format!(
                "record {} lies outside the capture it is said to come from",
                record.index.saturating_add(1)
            )));
        };
        match self.encoder.as_mut() {
            None => return Err(invalid("the writer is already finished".into())),
            Some(Encoder::Pcap { writer, parser }) => {
                let (_, raw) = parser.next_raw_packet(bytes).map_err(pcap_error)?;
                writer.write_raw_packet(&raw).map_err(pcap_error)?;
            }
            Some(Encoder::PcapNg { writer, parser, walked, input }) => {
                // Copy the descriptive blocks between the last walked position and this record.
                while *walked < span.start {
                    let rest = input.get(*walked..span.start).unwrap_or_default();
                    let (next, block) = parser.next_block(rest).map_err(pcap_error)?;
                    let used = rest.len().saturating_sub(next.len());
                    if used == 0 {
                        return Err(invalid(format!("no progress at byte {walked}")));
                    }
                    *walked = walked.saturating_add(used);
                    match block {
                        Block::EnhancedPacket(_)
                        | Block::SimplePacket(_)
                        | Block::Packet(_)
                        | Block::InterfaceStatistics(_) => {}
                        Block::SectionHeader(mut section) => {
                            section.section_length = -1;
                            writer
                                .write_block(&Block::SectionHeader(section))
                                .map_err(pcap_error)?;
                        }
                        other => {
                            writer.write_block(&other).map_err(pcap_error)?;
                        }
                    }
                }
                let (_, raw) = parser.next_raw_block(bytes).map_err(pcap_error)?;
                *walked = span.end;
                writer.write_raw_block(&raw).map_err(pcap_error)?;
            }
        }
        self.after_last = span.end;
        self.written = self.written.saturating_add(1);
        Ok(())
    }

    /// How many records have been written.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flushes the capture and completes the output ([`OutputFile::finish`]: a regular
    /// file is synced and renamed into place). Returns the number of records written.
    pub fn finish(mut self) -> io::Result<u64> {
        let sink = match self.encoder.take() {
            None => return Err(invalid("the writer is already finished".into())),
            Some(Encoder::Pcap { writer, .. }) => writer.into_writer(),
            Some(Encoder::PcapNg { writer, .. }) => writer.into_inner(),
        };
        sink.into_inner().map_err(|e| e.into_error())?.finish()?;
        Ok(self.written)
    }
}

#[cfg(test)]
mod tests;
