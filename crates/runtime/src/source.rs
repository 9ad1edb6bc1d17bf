//! The one way packets come into weir: a [`PacketSource`] yields borrowed [`Packet`] views,
//! one at a time, from a capture file streamed in chunks, from standard input as a true
//! stream, or from a live interface's ring. No source holds a whole capture in memory, and
//! no packet's bytes are copied on their way to an engine that only reads them.
//!
//! The view borrows the source, so it lives until the next call (a lending iterator):
//!
//! ```ignore
//! while let Some(packet) = source.next_packet() {
//!     let packet = packet?;               // damage: record number and byte offset
//!     if filter.matches(packet.data, packet.wire_len) { … }
//! }
//! ```

use crate::capture::CaptureError;

/// One packet, borrowed from its source until the source's next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// 0-based position among the source's packets.
    pub index: u64,
    /// The captured bytes (possibly fewer than `wire_len`).
    pub data: &'a [u8],
    /// The packet's length on the wire, as libpcap reports it (`len` in filters).
    pub wire_len: u32,
    pub ts_sec: u64,
    pub ts_nsec: u32,
    /// The `LINKTYPE_` number of the interface the packet came from (for files, the
    /// header's field masked as libpcap's `LT_LINKTYPE` masks it).
    pub linktype: u32,
    /// The interface: a pcapng interface id, a live interface's index, 0 for pcap files.
    pub interface: u32,
    /// Where the record starts in the file (0 for live sources).
    pub offset: u64,
    /// The record as the file stores it, for a writer that copies a capture through in its
    /// own format; `None` for live sources.
    pub stored: Option<Stored<'a>>,
}

/// A file record's stored form (see [`Packet::stored`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored<'a> {
    /// The pcap record (header and data) or the pcapng block, byte for byte.
    pub record: &'a [u8],
    /// pcapng: the descriptive blocks (section headers, interface descriptions, name
    /// resolution, custom and unknown blocks; not interface statistics) read since the
    /// previous packet, byte for byte; empty for pcap. Those up to the first interface
    /// description belong to the reader's header (`CaptureReader::header`), not to the first
    /// packet. A reader made `without_blocks` keeps none.
    pub blocks_before: &'a [u8],
}

/// A stream of packets. Implementations: capture files and standard input
/// (`capture`), live interfaces (`live`).
pub trait PacketSource {
    /// The next packet, `None` at the end, or the damage that ended the stream (after an
    /// error the source yields `None`).
    fn next_packet(&mut self) -> Option<Result<Packet<'_>, CaptureError>>;

    /// The link type of the first interface (the one a filter is compiled for first).
    fn linktype(&self) -> u32;

    /// The snapshot length of the first interface.
    fn snaplen(&self) -> u32;

    /// True when the next call may block waiting for input (a pipe, a quiet interface):
    /// the moment for a consumer to flush what it has printed, so its reader sees each
    /// packet while the stream goes on. The default, for sources that never wait, is false.
    fn would_wait(&self) -> bool {
        false
    }
}
