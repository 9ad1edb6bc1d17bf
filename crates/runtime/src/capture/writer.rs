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
//! A file is written under a temporary name in the destination directory and renamed over
//! the destination only by [`CaptureWriter::finish`]: a writer dropped before that (an
//! error, a panic elsewhere, an interrupted run) removes its temporary file, so the
//! destination never holds a half-written capture.

use std::fs::File;
use std::io::{self, BufWriter, Stdout, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use pcap_file::pcap::{PcapParser, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgParser, PcapNgWriter};
use pcap_file::PcapError;

use super::{Capture, Format, Record};

/// Where the bytes go.
enum Sink {
    /// A temporary file beside the destination, renamed over it on success.
    File {
        out: BufWriter<File>,
        temp: PathBuf,
        dest: PathBuf,
    },
    Stdout(BufWriter<Stdout>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File { out, .. } => out.write(buf),
            Sink::Stdout(out) => out.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File { out, .. } => out.flush(),
            Sink::Stdout(out) => out.flush(),
        }
    }
}

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

/// Temporary names differ per process and per writer, so parallel runs never collide.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

fn temp_path(dest: &Path) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let serial = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
    let temp = format!(".{name}.weir-{}-{serial}.tmp", std::process::id());
    match dest.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(temp),
        _ => PathBuf::from(temp),
    }
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
    /// Starts writing a capture like `like` to `dest` (`-` for standard output). For a file,
    /// nothing appears under `dest` until [`finish`](Self::finish).
    pub fn create(dest: &Path, like: &'c Capture) -> io::Result<CaptureWriter<'c>> {
        if dest.as_os_str() == "-" {
            let sink = Sink::Stdout(BufWriter::new(io::stdout()));
            return Ok(Self::with_encoder(Self::start(sink, like)?, like));
        }
        let temp = temp_path(dest);
        let file = File::options().write(true).create_new(true).open(&temp)?;
        let sink =
            Sink::File { out: BufWriter::new(file), temp: temp.clone(), dest: dest.to_path_buf() };
        match Self::start(sink, like) {
            Ok(encoder) => Ok(Self::with_encoder(encoder, like)),
            Err(e) => {
                let _ = std::fs::remove_file(&temp);
                Err(e)
            }
        }
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

    /// Flushes the capture and, for a file, syncs it and renames it into place. Returns the
    /// number of records written.
    pub fn finish(mut self) -> io::Result<u64> {
        let sink = match self.encoder.take() {
            None => return Err(invalid("the writer is already finished".into())),
            Some(Encoder::Pcap { writer, .. }) => writer.into_writer(),
            Some(Encoder::PcapNg { writer, .. }) => writer.into_inner(),
        };
        match sink {
            Sink::Stdout(mut out) => out.flush()?,
            Sink::File { out, temp, dest } => {
                let done = out
                    .into_inner()
                    .map_err(|e| e.into_error())
                    .and_then(|file| file.sync_all())
                    .and_then(|()| std::fs::rename(&temp, &dest));
                if let Err(e) = done {
                    let _ = std::fs::remove_file(&temp);
                    return Err(e);
                }
            }
        }
        Ok(self.written)
    }
}

impl Drop for CaptureWriter<'_> {
    fn drop(&mut self) {
        // Not finished: the temporary file must not outlive the writer.
        if let Some(encoder) = self.encoder.take() {
            let sink = match encoder {
                Encoder::Pcap { writer, .. } => writer.into_writer(),
                Encoder::PcapNg { writer, .. } => writer.into_inner(),
            };
            if let Sink::File { out, temp, .. } = sink {
                drop(out);
                let _ = std::fs::remove_file(&temp);
            }
        }
    }
}

#[cfg(test)]
mod tests;
