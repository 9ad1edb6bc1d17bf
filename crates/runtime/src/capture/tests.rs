//! Capture reading: both formats, and every kind of damage a file can have.

use super::*;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use std::time::Duration;
use weir_testkit::{corpus, write_pcap, Packet};

fn pcap_bytes(packets: &[Packet]) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("weir-runtime-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.pcap", packets.len()));
    write_pcap(&path, LINKTYPE_ETHERNET, packets).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    bytes
}

fn read_all(capture: &Capture) -> (Vec<Record<'_>>, Option<CaptureError>) {
    let mut records = Vec::new();
    for r in capture.records() {
        match r {
            Ok(r) => records.push(r),
            Err(e) => return (records, Some(e)),
        }
    }
    (records, None)
}

#[test]
fn pcap_records_come_back_as_written() {
    let packets = corpus(7, 120);
    let capture = Capture::from_bytes(pcap_bytes(&packets)).unwrap();
    assert_eq!(capture.format(), Format::Pcap);
    assert_eq!(capture.linktype(), LINKTYPE_ETHERNET);
    let (records, error) = read_all(&capture);
    assert_eq!(error, None);
    assert_eq!(records.len(), packets.len());
    for (r, p) in records.iter().zip(&packets) {
        assert_eq!(&r.data[..], &p.data[..]);
        assert_eq!(r.wire_len, p.wire_len);
        assert_eq!(r.ts_sec, u64::from(p.ts_sec));
        assert_eq!(r.ts_nsec, p.ts_usec * 1000);
    }
}

#[test]
fn a_file_cut_midway_keeps_the_records_before_the_cut() {
    let packets = corpus(3, 50);
    let bytes = pcap_bytes(&packets);
    // Cut inside the 11th record: header 24 bytes, each record 16 + data.
    let mut offset = 24;
    for p in &packets[..10] {
        offset += 16 + p.data.len();
    }
    let cut = bytes[..offset + 20].to_vec();
    let capture = Capture::from_bytes(cut).unwrap();
    let (records, error) = read_all(&capture);
    assert_eq!(records.len(), 10);
    let error = error.expect("the cut must be reported");
    assert_eq!(error.record, Some(10));
    assert_eq!(error.offset, offset);
    assert!(error.to_string().starts_with(&format!("record 11 at byte {offset}: ")), "{error}");
}

#[test]
fn absurd_record_lengths_are_an_error_not_an_allocation() {
    let packets = corpus(3, 2);
    let mut bytes = pcap_bytes(&packets);
    // incl_len of the first record (offset 24 + 8) set to 4 GiB - 1.
    bytes[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
    let capture = Capture::from_bytes(bytes).unwrap();
    let (records, error) = read_all(&capture);
    assert!(records.is_empty());
    assert_eq!(error.unwrap().record, Some(0));
}

#[test]
fn bad_headers_are_refused_with_a_reason() {
    assert!(Capture::from_bytes(vec![]).err().unwrap().message.contains("too short"));
    assert!(Capture::from_bytes(vec![0xde, 0xad, 0xbe, 0xef, 0, 0]).is_err());
    let mut bytes = pcap_bytes(&corpus(1, 1));
    bytes.truncate(20);
    assert!(Capture::from_bytes(bytes).is_err());
}

#[test]
fn pcapng_records_and_timestamp_resolution() {
    let mut out = Vec::new();
    {
        let mut writer = PcapNgWriter::new(&mut out).unwrap();
        let idb =
            InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![] };
        writer.write_pcapng_block(idb).unwrap();
        for (i, len) in [60usize, 14, 1514].into_iter().enumerate() {
            let data = vec![i as u8; len];
            let epb = EnhancedPacketBlock {
                interface_id: 0,
                // Default resolution: microseconds; the raw count is stored as "nanos".
                timestamp: Duration::from_nanos(1_700_000_000_123_456 + i as u64),
                original_len: len as u32 + 4,
                data: Cow::Owned(data),
                options: vec![],
            };
            writer.write_pcapng_block(epb).unwrap();
        }
    }
    let capture = Capture::from_bytes(out.clone()).unwrap();
    assert_eq!(capture.format(), Format::PcapNg);
    assert_eq!(capture.linktype(), LINKTYPE_ETHERNET);
    let (records, error) = read_all(&capture);
    assert_eq!(error, None);
    assert_eq!(records.len(), 3);
    assert_eq!(records[2].data.len(), 1514);
    assert_eq!(records[2].wire_len, 1518);
    assert_eq!(records[0].ts_sec, 1_700_000_000);
    assert_eq!(records[0].ts_nsec, 123_456_000);
    // Cut the last block in half: two records, then the error.
    let cut = out[..out.len() - 700].to_vec();
    let damaged = Capture::from_bytes(cut).unwrap();
    let (records, error) = read_all(&damaged);
    assert_eq!(records.len(), 2);
    assert_eq!(error.unwrap().record, Some(2));
}

#[test]
fn the_committed_sample_reads_whole() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/captures/sample.pcap");
    let capture = Capture::open(&path).unwrap();
    let (records, error) = read_all(&capture);
    assert_eq!(error, None);
    assert_eq!(records.len(), weir_testkit::SAMPLE_COUNT);
}
