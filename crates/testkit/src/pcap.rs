//! pcap file writing and reading for corpora, through the `pcap-file` crate.
//!
//! Writes go to a temporary file in the target's directory and are renamed into place, so a
//! reader (or a test run that is interrupted) never sees half a capture. Reading goes
//! through pcap-file's raw record parser rather than its checked one, because that one
//! rejects records whose wire length exceeds the file's snap length, which is exactly what
//! captures taken with `-s 96` contain; this module checks what matters itself and names
//! the record when something is wrong.

use std::borrow::{Borrow, Cow};
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use pcap_file::pcap::{PcapHeader, PcapParser, PcapWriter, RawPcapPacket};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

use crate::Packet;

/// LINKTYPE_ETHERNET (DLT_EN10MB), the link type of [`crate::corpus`] and
/// [`crate::edge_cases`].
pub const LINKTYPE_ETHERNET: u32 = weir_packet::LinkType::Ethernet.linktype();

/// The snap length written into headers when every packet fits: libpcap's default and
/// largest (MAXIMUM_SNAPLEN), so tools treat the file as an unclipped capture.
const DEFAULT_SNAPLEN: u32 = 262_144;

/// A capture file's link type and packets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The file header's link type (1 = Ethernet).
    pub linktype: u32,
    /// The file header's snap length.
    pub snaplen: u32,
    /// The records, in file order; descriptions are empty (pcap has nowhere to keep them).
    pub packets: Vec<Packet>,
}

/// Writes `packets` as a microsecond pcap file with the given link type.
///
/// The snap length is 262144, or the largest wire length if a packet is longer. Fails
/// (with `InvalidInput`) if a packet holds more bytes than its wire length.
pub fn write_pcap(path: impl AsRef<Path>, linktype: u32, packets: &[Packet]) -> io::Result<()> {
    let path = path.as_ref();
    let snaplen = packets.iter().map(|packet| packet.wire_len).fold(DEFAULT_SNAPLEN, u32::max);
    for (index, packet) in packets.iter().enumerate() {
        packet.check(index)?;
    }
    write_pcap_stream(path, linktype, snaplen, packets).map(|_| ())
}

/// Writes the packets an iterator yields as a microsecond pcap file with the given link
/// type and snap length, one at a time, so that memory stays bounded whatever the count
/// (the benchmark's multi-gigabyte captures). As with [`write_pcap`], the file appears under
/// its name only when complete, and a packet holding more bytes than its wire length (or a
/// bad timestamp) is an `InvalidInput` error. Returns how many packets were written.
pub fn write_pcap_stream<P: Borrow<Packet>>(
    path: impl AsRef<Path>,
    linktype: u32,
    snaplen: u32,
    packets: impl IntoIterator<Item = P>,
) -> io::Result<u64> {
    let path = path.as_ref();
    let temporary = temporary_path(path);
    let result = write_to(&temporary, linktype, snaplen, packets)
        .and_then(|n| fs::rename(&temporary, path).map(|()| n));
    if result.is_err() {
        // Best effort: the error that matters is the one being returned.
        let _ = fs::remove_file(&temporary);
    }
    result
}

impl Packet {
    /// A packet a pcap record can hold: no more bytes than its wire length, a timestamp in
    /// range.
    fn check(&self, index: usize) -> io::Result<()> {
        if u32::try_from(self.data.len()).map_or(true, |len| len > self.wire_len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "packet {index}: {} captured bytes exceed its wire length {}",
                    self.data.len(),
                    self.wire_len
                ),
            ));
        }
        if self.ts_usec >= 1_000_000 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("packet {index}: ts_usec {} is not below 1000000", self.ts_usec),
            ));
        }
        Ok(())
    }
}

fn temporary_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "capture".to_string());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

fn write_to<P: Borrow<Packet>>(
    path: &Path,
    linktype: u32,
    snaplen: u32,
    packets: impl IntoIterator<Item = P>,
) -> io::Result<u64> {
    let out = BufWriter::new(fs::File::create(path)?);
    let header = PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen,
        datalink: DataLink::from(linktype),
        ts_resolution: TsResolution::MicroSecond,
        endianness: Endianness::Little,
    };
    let mut writer = PcapWriter::with_header(out, header).map_err(into_io)?;
    let mut written = 0u64;
    for (index, packet) in packets.into_iter().enumerate() {
        let packet = packet.borrow();
        packet.check(index)?;
        let record = RawPcapPacket {
            ts_sec: packet.ts_sec,
            ts_frac: packet.ts_usec,
            incl_len: u32::try_from(packet.data.len()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "packet larger than 4 GiB")
            })?,
            orig_len: packet.wire_len,
            data: Cow::Borrowed(&packet.data),
        };
        writer.write_raw_packet(&record).map_err(into_io)?;
        written += 1;
    }
    let mut out = writer.into_writer();
    out.flush()?;
    let file = out.into_inner().map_err(|error| error.into_error())?;
    file.sync_all()?;
    Ok(written)
}

fn into_io(error: PcapError) -> io::Error {
    match error {
        PcapError::IoError(error) => error,
        other => io::Error::other(other.to_string()),
    }
}

/// Reads the packets of a pcap file (either byte order, micro- or nanosecond timestamps).
pub fn read_pcap(path: impl AsRef<Path>) -> Result<Vec<Packet>, String> {
    read_capture(path).map(|capture| capture.packets)
}

/// Reads a pcap file with its link type and snap length.
///
/// Errors name the file and, for a bad record, its index and byte offset. pcapng files are
/// recognised and refused by name.
pub fn read_capture(path: impl AsRef<Path>) -> Result<Capture, String> {
    let path = path.as_ref();
    let bytes = fs::read(path).map_err(|error| format!("{}: {error}", path.display()))?;
    parse_capture(&bytes).map_err(|error| format!("{}: {error}", path.display()))
}

fn parse_capture(bytes: &[u8]) -> Result<Capture, String> {
    if bytes.get(..4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        return Err("pcapng files are not supported; convert with `editcap -F pcap`".to_string());
    }
    let (mut rest, parser) =
        PcapParser::new(bytes).map_err(|error| format!("file header: {error}"))?;
    let header = parser.header();
    let mut packets = Vec::new();
    while !rest.is_empty() {
        let offset = bytes.len().saturating_sub(rest.len());
        let index = packets.len();
        let (after, record) = parser.next_raw_packet(rest).map_err(|error| match error {
            PcapError::IncompleteBuffer => {
                format!("record {index} at byte {offset}: file ends inside the record")
            }
            other => format!("record {index} at byte {offset}: {other}"),
        })?;
        if record.incl_len > record.orig_len {
            return Err(format!(
                "record {index} at byte {offset}: captured length {} exceeds wire length {}",
                record.incl_len, record.orig_len
            ));
        }
        let ts_usec = match header.ts_resolution {
            TsResolution::MicroSecond => record.ts_frac,
            TsResolution::NanoSecond => record.ts_frac / 1000,
        };
        if ts_usec >= 1_000_000 {
            return Err(format!(
                "record {index} at byte {offset}: sub-second timestamp {} out of range",
                record.ts_frac
            ));
        }
        packets.push(Packet {
            data: record.data.into_owned(),
            wire_len: record.orig_len,
            ts_sec: record.ts_sec,
            ts_usec,
            description: String::new(),
        });
        rest = after;
    }
    Ok(Capture { linktype: u32::from(header.datalink), snaplen: header.snaplen, packets })
}

#[cfg(test)]
mod tests {
    use super::parse_capture;

    #[test]
    fn pcapng_magic_is_refused_by_name() {
        let error = parse_capture(&[0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0]).err().unwrap_or_default();
        assert!(error.contains("pcapng"), "{error}");
    }

    #[test]
    fn a_record_cut_short_names_its_index_and_offset() {
        let mut file = vec![
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0,
            0,
        ];
        file.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0, 0, 1, 2, 3]);
        let error = parse_capture(&file).err().unwrap_or_default();
        assert!(error.contains("record 0 at byte 24"), "{error}");
    }

    #[test]
    fn a_record_larger_than_its_wire_length_is_refused() {
        let mut file = vec![
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0,
            0,
        ];
        file.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 7, 7]);
        let error = parse_capture(&file).err().unwrap_or_default();
        assert!(error.contains("exceeds wire length"), "{error}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for len in 0..64 {
            let bytes: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(37)).collect();
            let _ = parse_capture(&bytes);
        }
        assert!(parse_capture(&[]).is_err());
    }
}
