//! Capture reading: both formats, streaming across chunk boundaries and short reads, and
//! every kind of damage a file can have.

use super::*;
use proptest::prelude::*;
use std::io::Cursor;
use weir_testkit::SplitMix64;

pub(crate) mod build;
mod odd;
mod snaplen;
mod snaplen_cases;

use build::{pcap_file, Ng, Rec};

/// An owned copy of a packet, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owned {
    pub index: u64,
    pub data: Vec<u8>,
    pub wire_len: u32,
    pub ts: (u64, u32),
    pub linktype: u32,
    pub interface: u32,
    pub offset: u64,
    pub record: Vec<u8>,
    pub blocks_before: Vec<u8>,
}

pub(crate) fn read_all<R: Read>(
    reader: &mut CaptureReader<R>,
) -> (Vec<Owned>, Option<CaptureError>) {
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        match p {
            Ok(p) => out.push(Owned::of(&p)),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

impl Owned {
    pub(crate) fn of(p: &Packet<'_>) -> Owned {
        let stored = p.stored.unwrap();
        Owned {
            index: p.index,
            data: p.data.to_vec(),
            wire_len: p.wire_len,
            ts: (p.ts_sec, p.ts_nsec),
            linktype: p.linktype,
            interface: p.interface,
            offset: p.offset,
            record: stored.record.to_vec(),
            blocks_before: stored.blocks_before.to_vec(),
        }
    }
}

pub(crate) fn read_bytes(bytes: &[u8], chunk: usize) -> (Vec<Owned>, Option<CaptureError>) {
    match CaptureReader::with_chunk_size(Cursor::new(bytes.to_vec()), chunk) {
        Ok(mut r) => read_all(&mut r),
        Err(e) => (Vec::new(), Some(e)),
    }
}

/// A `Read` that returns at most a random number of bytes per call (sometimes 0 bytes is
/// never returned before the end: that would mean end of file).
struct ShortReads {
    bytes: Vec<u8>,
    at: usize,
    rng: SplitMix64,
    max: usize,
}

impl Read for ShortReads {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.bytes.len() - self.at;
        if left == 0 {
            return Ok(0);
        }
        if self.rng.chance(5) {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        let n = self.rng.range_usize(1, self.max).min(left).min(buf.len());
        buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The reference: a whole-slice walk of a well-formed pcap (no streaming, no limits).
fn reference_pcap(bytes: &[u8]) -> Vec<(usize, Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let wire = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap());
        out.push((at, bytes[at + 16..at + 16 + caplen].to_vec(), wire));
        at += 16 + caplen;
    }
    out
}

fn random_records(rng: &mut SplitMix64, count: usize, max_len: usize) -> Vec<Rec> {
    (0..count)
        .map(|i| {
            let len = rng.range_usize(0, max_len);
            let data: Vec<u8> = (0..len).map(|j| (i * 7 + j) as u8).collect();
            Rec::new(data)
                .wire(len as u32 + rng.below(3) as u32)
                .ts(1_700_000_000 + i as u32, i as u32)
        })
        .collect()
}

/// A file opened with a read size of its own reads in that size (a record larger than it
/// grows the buffer) and gives what `open` gives.
#[test]
fn open_with_chunk_size_reads_in_that_size() {
    let dir = weir_testkit::Scratch::new("runtime-chunk");
    let mut rng = SplitMix64::new(5);
    let mut records = random_records(&mut rng, 300, 600);
    records.insert(200, Rec::new(vec![7; 5000]));
    let path = dir.join("chunked.pcap");
    std::fs::write(&path, pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &records)).unwrap();
    let (expected, err) = read_all(&mut CaptureReader::open(&path).unwrap());
    assert_eq!((expected.len(), err), (301, None));
    let mut reader = CaptureReader::open_with_chunk_size(&path, 1000).unwrap();
    assert_eq!(reader.window.buf.len(), 1000);
    assert_eq!(read_all(&mut reader), (expected, None));
    assert_eq!(reader.window.buf.len(), 5016, "grown for the 5,000-byte record");
}

#[test]
fn pcap_streams_across_every_chunk_boundary() {
    let mut rng = SplitMix64::new(9);
    let records = random_records(&mut rng, 300, 200);
    let bytes = pcap_file(false, MAGIC_MICRO, 2, 4, 65535, 1, 16, &records);
    let reference = reference_pcap(&bytes);
    assert_eq!(reference.len(), 300);
    // Files larger than the chunk, so records straddle every position of a boundary.
    for chunk in (1..=40).chain([63, 64, 100, 257, 1000, 4096]) {
        let (got, err) = read_bytes(&bytes, chunk);
        assert_eq!(err, None, "chunk {chunk}");
        assert_eq!(got.len(), reference.len(), "chunk {chunk}");
        for (g, (at, data, wire)) in got.iter().zip(&reference) {
            assert_eq!((g.offset, &g.data, g.wire_len), (*at as u64, data, *wire), "chunk {chunk}");
            assert_eq!(&g.record[..], &bytes[*at..*at + 16 + data.len()]);
        }
    }
}

#[test]
fn pcap_agrees_with_pcap_file() {
    let mut rng = SplitMix64::new(3);
    for order_big in [false, true] {
        for magic in [MAGIC_MICRO, MAGIC_NANO] {
            let records = random_records(&mut rng, 50, 300);
            let bytes = pcap_file(order_big, magic, 2, 4, 65535, 1, 16, &records);
            let (got, err) = read_bytes(&bytes, 97);
            assert_eq!(err, None);
            let (mut rest, parser) = pcap_file::pcap::PcapParser::new(&bytes).unwrap();
            let mut n = 0;
            while !rest.is_empty() {
                let (next, packet) = parser.next_packet(rest).unwrap();
                let g = &got[n];
                assert_eq!(&g.data[..], &packet.data[..]);
                assert_eq!(g.wire_len, packet.orig_len);
                assert_eq!(g.ts, (packet.timestamp.as_secs(), packet.timestamp.subsec_nanos()));
                n += 1;
                rest = next;
            }
            assert_eq!(n, got.len());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_lengths_any_chunks_any_short_reads(
        lens in prop::collection::vec(0usize..700, 0..60),
        chunk in 1usize..300,
        max_read in 1usize..500,
        seed in any::<u64>(),
        ng in any::<bool>(),
    ) {
        let records: Vec<Rec> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| Rec::new(vec![i as u8; len]).ts(i as u32, 5))
            .collect();
        let bytes = if ng {
            let mut ng = Ng::new(false);
            ng.shb().idb(1, 0, &[]);
            for r in &records {
                ng.epb(0, r, &[]);
            }
            ng.bytes
        } else {
            pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &records)
        };
        let (whole, err) = read_bytes(&bytes, DEFAULT_CHUNK);
        prop_assert_eq!(err, None);
        prop_assert_eq!(whole.len(), lens.len());
        let input = ShortReads { bytes: bytes.clone(), at: 0, rng: SplitMix64::new(seed), max: max_read };
        let mut reader = CaptureReader::with_chunk_size(input, chunk).unwrap();
        let (streamed, err) = read_all(&mut reader);
        prop_assert_eq!(err, None);
        prop_assert_eq!(&streamed, &whole);
        // Cut anywhere: the records wholly before the cut, then an error (or a clean end
        // exactly between records).
        let cut = (seed as usize) % (bytes.len() + 1);
        let (prefix, err) = read_bytes(&bytes[..cut], chunk);
        let complete = whole.iter().filter(|p| p.offset as usize + p.record.len() <= cut).count();
        if cut >= 24 || (ng && cut >= 60) {
            prop_assert_eq!(prefix.len(), complete);
            let at_boundary = cut == bytes.len() || whole.iter().any(|p| p.offset as usize == cut);
            prop_assert_eq!(err.is_none(), at_boundary, "cut {} {:?}", cut, err);
        } else {
            prop_assert!(err.is_some());
        }
    }
}

#[test]
fn memory_stays_at_one_chunk_for_a_long_file() {
    // 20,000 records through a 4 KiB chunk: the buffer never grows.
    let records: Vec<Rec> = (0..20_000).map(|i| Rec::new(vec![i as u8; 100 + i % 900])).collect();
    let bytes = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &records);
    let mut reader = CaptureReader::with_chunk_size(Cursor::new(bytes), 4096).unwrap();
    let mut n = 0;
    while let Some(p) = reader.next_packet() {
        p.unwrap();
        n += 1;
    }
    assert_eq!(n, 20_000);
    assert_eq!(reader.window.buf.len(), 4096);
    // A record larger than the chunk grows the buffer to it, no more.
    let big = [Rec::new(vec![1; 10_000]), Rec::new(vec![2; 10])];
    let bytes = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &big);
    let mut reader = CaptureReader::with_chunk_size(Cursor::new(bytes), 4096).unwrap();
    while let Some(p) = reader.next_packet() {
        p.unwrap();
    }
    assert_eq!(reader.window.buf.len(), 10_016);
}

#[test]
fn a_pipe_yields_each_record_as_it_arrives() {
    let (rx, mut tx) = std::io::pipe().unwrap();
    let records = [Rec::new(vec![0xaa; 60]), Rec::new(vec![0xbb; 70])];
    let bytes = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &records);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut reader = CaptureReader::new(rx).unwrap();
        let first = reader.next_packet().unwrap().unwrap().data.len();
        done_tx.send(first).unwrap();
        let second = reader.next_packet().unwrap().unwrap().data.len();
        done_tx.send(second).unwrap();
        assert!(reader.next_packet().is_none());
    });
    // Header and first record only; the pipe stays open.
    tx.write_all(&bytes[..24 + 16 + 60]).unwrap();
    let first = done_rx.recv_timeout(std::time::Duration::from_secs(10));
    assert_eq!(first, Ok(60), "the first record is yielded while the writer still writes");
    tx.write_all(&bytes[24 + 16 + 60..]).unwrap();
    assert_eq!(done_rx.recv_timeout(std::time::Duration::from_secs(10)), Ok(70));
    drop(tx);
    reader.join().unwrap();
}

use std::io::Write;

#[test]
fn pcapng_sections_interfaces_resolutions_and_blocks() {
    let mut ng = Ng::new(true);
    ng.shb().idb(1, 0, &[(9, vec![9])]).idb(101, 0, &[]);
    ng.nrb();
    ng.epb(0, &Rec::new(vec![1; 40]).ts_raw(1_700_000_000_123_456_789).wire(64), &[]);
    ng.isb(0);
    ng.epb(1, &Rec::new(vec![2; 41]).ts_raw(1_700_000_000_123_456), &[(1, b"hello".to_vec())]);
    ng.spb(&Rec::new(vec![3; 30]));
    ng.pb(1, &Rec::new(vec![4; 20]).ts_raw(5_000_001));
    ng.custom(0xBAD);
    ng.shb().idb(228, 0, &[(9, vec![0x80 | 20]), (14, 100u64.to_be_bytes().to_vec())]);
    ng.epb(0, &Rec::new(vec![5; 20]).ts_raw(3 << 20 | 1 << 19), &[]);
    let (got, err) = read_bytes(&ng.bytes, 64);
    assert_eq!(err, None);
    let summary: Vec<_> =
        got.iter().map(|p| (p.linktype, p.interface, p.data.len(), p.wire_len, p.ts)).collect();
    assert_eq!(
        summary,
        [
            (1, 0, 40, 64, (1_700_000_000, 123_456_789)),
            (101, 1, 41, 41, (1_700_000_000, 123_456_000)),
            (1, 0, 30, 30, (0, 0)),
            (101, 1, 20, 20, (5, 1_000)),
            // 2^-20 seconds, offset by 100 seconds.
            (228, 0, 20, 20, (103, 500_000_000)),
        ]
    );
    // The descriptive blocks come with the packet after them; statistics do not.
    let kinds = |b: &[u8]| build::block_types(b, true);
    // (The first interface description went with the header.)
    assert_eq!(kinds(&got[0].blocks_before), [1, 4]);
    assert_eq!(kinds(&got[1].blocks_before), [] as [u32; 0]);
    assert_eq!(kinds(&got[4].blocks_before), [0xBAD, BT_SHB, 1]);
}

#[test]
fn errors_name_record_and_byte() {
    let records = [Rec::new(vec![1; 50]), Rec::new(vec![2; 50]), Rec::new(vec![3; 50])];
    let bytes = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &records);
    let (got, err) = read_bytes(&bytes[..24 + 66 + 30], 16);
    assert_eq!(got.len(), 1);
    let err = err.unwrap();
    assert_eq!((err.record, err.offset), (Some(1), Some(90)));
    assert!(err.to_string().starts_with("record 2 at byte 90: the file ends inside"), "{err}");
    // Absurd lengths: an error at that record, never an allocation.
    let mut absurd = bytes.clone();
    absurd[24 + 66 + 8..24 + 66 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let (got, err) = read_bytes(&absurd, 1 << 20);
    assert_eq!(got.len(), 1);
    let err = err.unwrap().to_string();
    assert!(err.ends_with("bigger than snaplen of 262144"), "{err}");
    // Header problems: no record, byte 0.
    let e = CaptureReader::new(Cursor::new(vec![1, 2])).err().unwrap();
    assert_eq!(e.to_string(), "at byte 0: file too short for a capture header (2 bytes)");
    let e = CaptureReader::new(Cursor::new(b"WEIR and more".to_vec())).err().unwrap();
    assert!(e.to_string().starts_with("at byte 0: unknown file format"), "{e}");
    let e = CaptureReader::open(Path::new("/nonexistent/x.pcap")).err().unwrap();
    assert!(e.to_string().starts_with("No such file or directory"), "{e}");
}

#[test]
fn a_non_capture_stream_fails_after_one_read() {
    /// An endless stream of zeros that counts its reads.
    struct Zeros(usize);
    impl Read for Zeros {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0 += 1;
            buf.fill(0);
            Ok(buf.len())
        }
    }
    let mut zeros = Zeros(0);
    assert!(CaptureReader::new(&mut zeros).is_err());
    assert_eq!(zeros.0, 1);
}

#[test]
fn the_committed_sample_reads_whole() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/captures/sample.pcap");
    let mut reader = CaptureReader::open(&path).unwrap();
    let (got, err) = read_all(&mut reader);
    assert_eq!(err, None);
    assert_eq!(got.len(), weir_testkit::SAMPLE_COUNT);
    assert_eq!(reader.linktype(), LINKTYPE_ETHERNET);
}

/// The relay (two threads taking turns, `relay.rs`) yields what one thread reading the
/// file yields: every packet, offset and record, and the same damage at the same place;
/// with chunks far smaller than the records, records across many chunks and a record
/// longer than the headroom (D-Bus, link type 231, allows 128 MiB).
#[test]
fn the_relay_reads_what_one_thread_reads() {
    let dir = std::env::temp_dir().join(format!("weir-relay-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = SplitMix64::new(77);
    let mut records = random_records(&mut rng, 3000, 2000);
    // Past the first 1 MiB read, so the relay has them.
    let big = |n: usize| Rec::new((0..n).map(|j| (j * 13) as u8).collect()).wire(n as u32);
    records.insert(1500, big(200_000));
    records.insert(2500, big(HEADROOM + 5000));
    records.insert(2600, big(700_000));
    let whole = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 231, 16, &records);
    assert!(whole.len() > DEFAULT_CHUNK + 2 * 4096);
    // Whole, cut inside a record header, cut inside a record's data.
    let cut_header = whole.len() - 5;
    let last_len = records.last().map_or(0, |r| r.data.len());
    let cut_data = whole.len() - last_len / 2 - 1;
    for (name, bytes) in [
        ("whole", &whole[..]),
        ("cut-header", &whole[..cut_header]),
        ("cut-data", &whole[..cut_data]),
    ] {
        let path = dir.join(format!("{name}.pcap"));
        std::fs::write(&path, bytes).unwrap();
        let (expected, expected_err) = read_all(&mut CaptureReader::open(&path).unwrap());
        assert!(expected.len() >= 3000, "{name}");
        assert_eq!(expected_err.is_some(), name != "whole", "{name}");
        for chunk in [4096, 65_536 + 13, 300_000, DEFAULT_CHUNK] {
            let mut reader = CaptureReader::open(&path).unwrap();
            reader.relay_chunk = chunk;
            reader.relay_forced = Some(true);
            assert!(reader.relay_file().is_some(), "{name} chunk {chunk}: not relayed");
            let mut got = (Vec::new(), None);
            reader.relay(
                &mut got,
                |reader, (out, err): &mut (Vec<Owned>, Option<CaptureError>)| loop {
                    match reader.next_packet() {
                        None => return Turn::Stop,
                        Some(Err(e)) => {
                            *err = Some(e);
                            return Turn::Stop;
                        }
                        Some(Ok(p)) => out.push(Owned::of(&p)),
                    }
                    if reader.would_wait() {
                        return Turn::More;
                    }
                },
            );
            assert_eq!(got.0.len(), expected.len(), "{name} chunk {chunk}");
            assert!(got.0 == expected, "{name} chunk {chunk}: packets differ");
            assert_eq!(got.1, expected_err, "{name} chunk {chunk}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Packets as (data, wire length).
type Seen = Vec<(Vec<u8>, u32)>;

/// A count's loop: [`CaptureReader::visit_buffered`] for the complete records buffered,
/// `next_packet` for the rest (joins, damage, the end). Returns each packet's (data, wire
/// length) in order, the damage, and how many `visit_buffered` saw (so a test can tell the
/// fast path ran). With `batch`, [`CaptureReader::visit_buffered_batch`] instead (which
/// cannot stop early: `stop_after` must be `None`).
fn visit_all<R: Read>(
    reader: &mut CaptureReader<R>,
    stop_after: Option<usize>,
    batch: bool,
) -> (Seen, Option<CaptureError>, usize) {
    let mut out: Seen = Vec::new();
    let mut fast = 0;
    let full = |out: &Seen| stop_after.is_some_and(|n| out.len() >= n);
    loop {
        match reader.next_packet() {
            None => return (out, None, fast),
            Some(Err(e)) => return (out, Some(e), fast),
            Some(Ok(p)) => out.push((p.data.to_vec(), p.wire_len)),
        }
        if full(&out) {
            return (out, None, fast);
        }
        let before = out.len();
        if batch {
            let visited = reader.visit_buffered_batch(|packets| {
                out.extend(packets.iter().map(|&(data, wire)| (data.to_vec(), wire)));
            });
            assert_eq!(visited as usize, out.len() - before, "visited count");
        } else {
            reader.visit_buffered(|data, wire| {
                out.push((data.to_vec(), wire));
                !full(&out)
            });
        }
        fast += out.len() - before;
        if full(&out) {
            return (out, None, fast);
        }
    }
}

/// The pcap files the fast paths are checked on, made of `records`: both byte orders,
/// nanoseconds, a snapshot length below most records, the modified format's 24-byte
/// headers, swapped length fields (2.3), and two damaged ones: cut inside record 250 and
/// with a record libpcap refuses after the last.
fn fast_path_files(records: &[Rec]) -> Vec<(&'static str, Vec<u8>)> {
    let mut damaged = records.to_vec();
    // Refused by libpcap (more than 256 KiB for Ethernet): claimed, not present.
    let mut absurd = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, records);
    absurd.extend(1u32.to_le_bytes());
    absurd.extend(0u32.to_le_bytes());
    absurd.extend(300_000u32.to_le_bytes());
    absurd.extend(300_000u32.to_le_bytes());
    absurd.extend([0u8; 64]);
    damaged.truncate(250);
    vec![
        ("little", pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, records)),
        ("big", pcap_file(true, MAGIC_NANO, 2, 4, 0, 1, 16, records)),
        ("snaplen 100", pcap_file(false, MAGIC_MICRO, 2, 4, 100, 1, 16, records)),
        ("modified", pcap_file(false, MAGIC_KUZNETSOV, 2, 4, 0, 1, 24, records)),
        ("swapped 2.3", pcap_file(false, MAGIC_MICRO, 2, 3, 0, 1, 16, records)),
        ("cut", {
            let mut f = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &damaged);
            f.truncate(f.len() - 7);
            f
        }),
        ("absurd", absurd),
    ]
}

/// The fast path sees what `next_packet` sees: the same bytes (cut to the snapshot length)
/// and wire lengths, in both byte orders and with the modified pcap's 24-byte headers,
/// across every chunk boundary; it stops where `visit` says, and leaves damage and swapped
/// length fields to `next_packet`, which reports them as before.
#[test]
fn visit_buffered_sees_what_next_packet_sees() {
    let mut rng = SplitMix64::new(31);
    let records = random_records(&mut rng, 400, 300);
    for (name, bytes) in &fast_path_files(&records) {
        let (expected, expected_err) = read_bytes(bytes, 1 << 20);
        let expected: Seen = expected.into_iter().map(|p| (p.data, p.wire_len)).collect();
        assert!(expected.len() >= 249, "{name}");
        assert_eq!(expected_err.is_some(), ["cut", "absurd"].contains(name), "{name}");
        for chunk in [1, 7, 16, 17, 100, 333, 4096, 1 << 20] {
            for batch in [false, true] {
                let mut reader = CaptureReader::with_chunk_size(Cursor::new(bytes.clone()), chunk)
                    .unwrap()
                    .without_blocks();
                let (got, err, fast) = visit_all(&mut reader, None, batch);
                let how = if batch { "batch" } else { "one by one" };
                assert!(got == expected, "{name} chunk {chunk} {how}: packets differ");
                assert_eq!(err, expected_err, "{name} chunk {chunk} {how}");
                if *name == "swapped 2.3" {
                    assert_eq!(fast, 0, "{name}: swapped lengths are next_packet's");
                } else if chunk >= 4096 {
                    assert!(fast > got.len() / 2, "{name} chunk {chunk} {how}: fast path unused");
                }
            }
            // Stopping midway: the next packet is the one after the last visited.
            let mut reader =
                CaptureReader::with_chunk_size(Cursor::new(bytes.clone()), chunk).unwrap();
            let (first, _, _) = visit_all(&mut reader, Some(123), false);
            assert!(first[..] == expected[..123], "{name} chunk {chunk}: stop");
            let next = reader.next_packet().unwrap().unwrap();
            assert_eq!(next.index, 123, "{name} chunk {chunk}");
            assert_eq!(next.data, &expected[123].0[..], "{name} chunk {chunk}");
        }
    }
}

/// `weir run`'s loop: [`CaptureReader::buffered`]'s packets, then one from `next_packet`
/// (joins, damage, the end), or `next_packet` alone where `buffered` is `None`; with
/// `stop_after`, the run is dropped after that many packets. Returns the packets, the
/// damage and how many came from `buffered`.
fn buffered_all<R: Read>(
    reader: &mut CaptureReader<R>,
    stop_after: Option<usize>,
) -> (Vec<Owned>, Option<CaptureError>, usize) {
    let (mut out, mut fast) = (Vec::new(), 0);
    loop {
        if let Some(run) = reader.buffered() {
            for p in run {
                out.push(Owned::of(&p));
                fast += 1;
                if stop_after.is_some_and(|n| out.len() >= n) {
                    return (out, None, fast);
                }
            }
        }
        match reader.next_packet() {
            None => return (out, None, fast),
            Some(Err(e)) => return (out, Some(e), fast),
            Some(Ok(p)) => out.push(Owned::of(&p)),
        }
        if stop_after.is_some_and(|n| out.len() >= n) {
            return (out, None, fast);
        }
    }
}

/// [`CaptureReader::buffered`] gives what `next_packet` gives, field for field (index,
/// bytes cut to the snapshot length, wire length, timestamps in micro- and nanoseconds,
/// offset, the stored record), in both byte orders and with the modified pcap's 24-byte
/// headers, across every chunk boundary; it leaves damage, swapped length fields and pcapng
/// to `next_packet`, which reports them as before; a run dropped midway counts only the
/// packets it yielded as read.
#[test]
fn buffered_gives_what_next_packet_gives() {
    let mut rng = SplitMix64::new(47);
    let mut records = random_records(&mut rng, 400, 300);
    // Microsecond fractions whose nanoseconds do not fit 32 bits (saturated, as next_packet
    // saturates them).
    records[3] = records[3].clone().ts(7, 4_300_000);
    let mut ng = Ng::new(false);
    ng.shb().idb(1, 0, &[]);
    for r in &records {
        ng.epb(0, r, &[]);
    }
    let mut files = fast_path_files(&records);
    files.push(("pcapng", ng.bytes));
    for (name, bytes) in &files {
        let (expected, expected_err) = read_bytes(bytes, 1 << 20);
        assert!(expected.len() >= 249, "{name}");
        assert_eq!(expected_err.is_some(), ["cut", "absurd"].contains(name), "{name}");
        for chunk in [1, 7, 16, 17, 100, 333, 4096, 1 << 20] {
            let mut reader =
                CaptureReader::with_chunk_size(Cursor::new(bytes.clone()), chunk).unwrap();
            let (got, err, fast) = buffered_all(&mut reader, None);
            assert!(got == expected, "{name} chunk {chunk}: packets differ");
            assert_eq!(err, expected_err, "{name} chunk {chunk}");
            if ["swapped 2.3", "pcapng"].contains(name) {
                assert_eq!(fast, 0, "{name}: next_packet's alone");
            } else if chunk >= 4096 {
                assert!(fast > got.len() / 2, "{name} chunk {chunk}: buffered unused");
            }
            // Dropped midway: the next packet is the one after the last yielded.
            let mut reader =
                CaptureReader::with_chunk_size(Cursor::new(bytes.clone()), chunk).unwrap();
            let (first, _, _) = buffered_all(&mut reader, Some(123));
            assert!(first[..] == expected[..123], "{name} chunk {chunk}: stop");
            let next = Owned::of(&reader.next_packet().unwrap().unwrap());
            assert_eq!(next, expected[123], "{name} chunk {chunk}");
        }
    }
}

/// `weir run`'s lazy loop: [`Buffered::next_record`]'s records, each decoded only after the
/// whole buffered run was walked ([`Records::packet`]), then one from `next_packet`. Returns
/// the packets, the damage, and how many came from `next_record`; asserts that each
/// record's data is its packet's.
fn records_all<R: Read>(
    reader: &mut CaptureReader<R>,
) -> (Vec<Owned>, Option<CaptureError>, usize) {
    let (mut out, mut fast) = (Vec::new(), 0);
    loop {
        if let Some(mut run) = reader.buffered() {
            let records = run.records();
            let mut walked = Vec::new();
            while let Some((data, record)) = run.next_record() {
                walked.push((data, record));
            }
            drop(run);
            for (data, record) in walked {
                let packet = records.packet(record).expect("a walked record decodes");
                assert_eq!(packet.data, data, "record {}", record.index());
                assert_eq!(packet.index, record.index());
                out.push(Owned::of(&packet));
                fast += 1;
            }
        }
        match reader.next_packet() {
            None => return (out, None, fast),
            Some(Err(e)) => return (out, Some(e), fast),
            Some(Ok(p)) => out.push(Owned::of(&p)),
        }
    }
}

/// [`Buffered::next_record`] and [`Records::packet`], asked after the run's records were
/// all walked and the run dropped, give what `next_packet` gives, field for field (the
/// files and chunks of `buffered_gives_what_next_packet_gives`).
#[test]
fn records_decoded_after_the_walk_give_what_next_packet_gives() {
    let mut rng = SplitMix64::new(53);
    let mut records = random_records(&mut rng, 400, 300);
    records[5] = records[5].clone().ts(9, 4_300_000);
    for (name, bytes) in &fast_path_files(&records) {
        let (expected, expected_err) = read_bytes(bytes, 1 << 20);
        assert!(expected.len() >= 249, "{name}");
        for chunk in [1, 17, 333, 4096, 1 << 20] {
            let mut reader =
                CaptureReader::with_chunk_size(Cursor::new(bytes.clone()), chunk).unwrap();
            let (got, err, fast) = records_all(&mut reader);
            assert!(got == expected, "{name} chunk {chunk}: packets differ");
            assert_eq!(err, expected_err, "{name} chunk {chunk}");
            if *name != "swapped 2.3" && chunk >= 4096 {
                assert!(fast > got.len() / 2, "{name} chunk {chunk}: next_record unused");
            }
        }
    }
}

/// A pcap record as a copy-through writes it (16-byte headers): as stored, or cut to the
/// snapshot length with its cut captured length.
fn as_written(record: &[u8], data: &[u8], wire_len: u32, big: bool) -> Vec<u8> {
    if record.len() - 16 == data.len() {
        return record.to_vec();
    }
    let mut out = writer::pcap_record_header(record, data.len() as u32, wire_len, big).to_vec();
    out.extend_from_slice(data);
    out
}

/// A copy-through's loop: [`CaptureReader::copy_buffered`] for the complete records
/// buffered, `next_packet` for the rest; the bytes a writer would get, and the damage.
fn copy_all<R: Read>(
    reader: &mut CaptureReader<R>,
    keep: impl Fn(&[u8], u32) -> bool,
    max_kept: u64,
) -> (Vec<u8>, u64, Option<CaptureError>) {
    let (mut out, mut kept) = (Vec::new(), 0u64);
    let big = reader.header().first() == Some(&0xA1);
    loop {
        match reader.next_packet() {
            None => return (out, kept, None),
            Some(Err(e)) => return (out, kept, Some(e)),
            Some(Ok(p)) => {
                if keep(p.data, p.wire_len) {
                    out.extend(as_written(p.stored.unwrap().record, p.data, p.wire_len, big));
                    kept += 1;
                }
            }
        }
        if kept >= max_kept {
            return (out, kept, None);
        }
        let mut runs = 0u64;
        let (_, got) = reader
            .copy_buffered(&keep, max_kept - kept, |slices, count| {
                assert!(count > 0 && !slices.is_empty());
                runs += count;
                for run in slices.iter() {
                    assert!(!run.is_empty());
                    out.extend_from_slice(run);
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(runs, got);
        kept += got;
        if kept >= max_kept {
            return (out, kept, None);
        }
    }
}

/// The copy fast path writes what a writer copying each kept packet's stored record writes,
/// across chunk boundaries, stopping at `max_kept`, with damage reported as before.
#[test]
fn copy_buffered_copies_what_next_packet_copies() {
    let mut rng = SplitMix64::new(41);
    let records = random_records(&mut rng, 500, 300);
    let mut cut = pcap_file(true, MAGIC_MICRO, 2, 4, 0, 1, 16, &records);
    cut.truncate(cut.len() - 11);
    let files = [
        ("little", pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &records)),
        ("snaplen 100", pcap_file(false, MAGIC_NANO, 2, 4, 100, 1, 16, &records)),
        ("cut big-endian", cut),
    ];
    // Runs of kept records of every length, and records dropped between them.
    let keep = |data: &[u8], wire: u32| data.len() % 7 != 3 && !wire.is_multiple_of(5);
    for (name, bytes) in &files {
        let (all, err) = read_bytes(bytes, 1 << 20);
        let big = bytes[0] == 0xA1;
        let written = |p: &Owned| as_written(&p.record, &p.data, p.wire_len, big);
        let expected: Vec<u8> =
            all.iter().filter(|p| keep(&p.data, p.wire_len)).flat_map(written).collect();
        // The snapshot length of 100 cuts records, each written with its cut length.
        let cut = all.iter().filter(|p| p.record.len() - 16 > p.data.len()).count();
        assert_eq!(cut > 0, *name == "snaplen 100", "{name}: {cut} records cut");
        let n = all.iter().filter(|p| keep(&p.data, p.wire_len)).count() as u64;
        assert!(n > 200 && n < all.len() as u64, "{name}: {n}");
        for chunk in [1, 13, 100, 4096, 1 << 20] {
            let mut reader =
                CaptureReader::with_chunk_size(Cursor::new(bytes.clone()), chunk).unwrap();
            let (got, kept, got_err) = copy_all(&mut reader, keep, u64::MAX);
            assert_eq!(kept, n, "{name} chunk {chunk}");
            assert!(got == expected, "{name} chunk {chunk}: bytes differ");
            assert_eq!(got_err, err, "{name} chunk {chunk}");
            // A limit: the first 150 kept, and the reader goes on after the 150th.
            let mut reader =
                CaptureReader::with_chunk_size(Cursor::new(bytes.clone()), chunk).unwrap();
            let (got, kept, _) = copy_all(&mut reader, keep, 150);
            assert_eq!(kept, 150, "{name} chunk {chunk}");
            let kept_150: Vec<&Owned> =
                all.iter().filter(|p| keep(&p.data, p.wire_len)).take(150).collect();
            let prefix: Vec<u8> = kept_150.iter().flat_map(|p| written(p)).collect();
            assert!(got == prefix, "{name} chunk {chunk}: limited bytes differ");
            let last = kept_150.last().unwrap().index;
            assert_eq!(reader.next_packet().unwrap().unwrap().index, last + 1, "{name}");
        }
    }
}
