//! The capture writer: a selection comes back out in the input's exact format, and a
//! destination is never left half-written.

use super::super::*;
use pcap_file::pcap::{PcapHeader, PcapPacket};
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::interface_statistics::InterfaceStatisticsBlock;
use pcap_file::{DataLink, Endianness, TsResolution};
use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

fn scratch_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("weir-runtime-writer-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn records(capture: &Capture) -> Vec<Record<'_>> {
    capture.records().collect::<Result<Vec<_>, _>>().unwrap()
}

/// Writes the records whose index `keep` accepts and returns the file's bytes.
fn select(input: &Capture, dest: &Path, keep: impl Fn(usize) -> bool) -> Vec<u8> {
    let mut writer = CaptureWriter::create(dest, input).unwrap();
    for record in records(input) {
        if keep(record.index) {
            writer.write(&record).unwrap();
        }
    }
    writer.finish().unwrap();
    std::fs::read(dest).unwrap()
}

fn big_endian_nanosecond_pcap() -> Vec<u8> {
    let header = PcapHeader {
        snaplen: 96,
        datalink: DataLink::RAW,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Big,
        ..Default::default()
    };
    let mut writer = pcap_file::pcap::PcapWriter::with_header(Vec::new(), header).unwrap();
    for i in 0..6u32 {
        let data = vec![0x45 ^ i as u8; 20 + i as usize];
        let ts = Duration::new(1_700_000_000 + u64::from(i), 123_456_789 + i);
        writer.write_packet(&PcapPacket::new(ts, 1000 + i, &data)).unwrap();
    }
    writer.into_writer()
}

#[test]
fn pcap_selection_keeps_header_and_records_bit_for_bit() {
    let input = big_endian_nanosecond_pcap();
    let capture = Capture::from_bytes(input.clone()).unwrap();
    let dir = scratch_dir("pcap");
    let out = select(&capture, &dir.join("odd.pcap"), |i| i % 2 == 1);
    // Same 24-byte header: magic (byte order, nanoseconds), snap length, link type.
    assert_eq!(out[..24], input[..24]);
    let all = records(&capture);
    let mut expected = input[..24].to_vec();
    for r in all.iter().filter(|r| r.index % 2 == 1) {
        expected.extend_from_slice(&input[r.span.clone()]);
    }
    assert_eq!(out, expected);
    let back = Capture::from_bytes(out).unwrap();
    let kept = records(&back);
    assert_eq!(kept.len(), 3);
    assert_eq!(kept[0].ts_nsec, 123_456_790);
    assert_eq!(kept[0].wire_len, 1001);
    assert_eq!(back.linktype(), capture.linktype());
}

fn pcapng_with_two_interfaces() -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut writer =
            pcap_file::pcapng::PcapNgWriter::with_endianness(&mut out, Endianness::Big).unwrap();
        let eth = InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 0,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        };
        writer.write_pcapng_block(eth).unwrap();
        let raw =
            InterfaceDescriptionBlock { linktype: DataLink::RAW, snaplen: 0, options: vec![] };
        writer.write_pcapng_block(raw).unwrap();
        for i in 0..6u32 {
            let epb = EnhancedPacketBlock {
                interface_id: i % 2,
                timestamp: Duration::from_nanos(1_700_000_000_000_000_000 + u64::from(i)),
                original_len: 64,
                data: Cow::Owned(vec![i as u8; 40 + i as usize]),
                options: vec![EnhancedPacketOption::Comment(Cow::Owned(format!("packet {i}")))],
            };
            writer.write_pcapng_block(epb).unwrap();
            if i == 2 {
                let isb =
                    InterfaceStatisticsBlock { interface_id: 0, timestamp: 0, options: vec![] };
                writer.write_pcapng_block(isb).unwrap();
            }
        }
    }
    out
}

#[test]
fn pcapng_selection_keeps_interfaces_resolution_and_options() {
    let input = pcapng_with_two_interfaces();
    let capture = Capture::from_bytes(input.clone()).unwrap();
    let dir = scratch_dir("pcapng");
    let out = select(&capture, &dir.join("sel.pcapng"), |i| i == 1 || i == 4);
    let back = Capture::from_bytes(out.clone()).unwrap();
    assert_eq!(back.format(), Format::PcapNg);
    let all = records(&capture);
    let kept = records(&back);
    assert_eq!(kept.len(), 2);
    for (k, original) in kept.iter().zip([&all[1], &all[4]]) {
        assert_eq!(k.data, original.data);
        assert_eq!((k.ts_sec, k.ts_nsec), (original.ts_sec, original.ts_nsec));
        assert_eq!(k.linktype, original.linktype);
        // The packet block, options included, is copied as stored.
        assert_eq!(&out[k.span.clone()], &input[original.span.clone()]);
    }
    assert_eq!(kept[0].linktype, u32::from(DataLink::RAW));
    // Each interface keeps its resolution: nanoseconds on the first (a microsecond reading
    // would be 1000x off), the microsecond default on the second.
    assert_eq!(kept[1].ts_sec, 1_700_000_000);
    assert_eq!(kept[0].ts_sec, 1_700_000_000_000);
    // The statistics block of the input is gone; the section length is "unknown".
    let mut cursor = &out[..];
    let (rest, mut parser) = pcap_file::pcapng::PcapNgParser::new(cursor).unwrap();
    assert_eq!(parser.section().section_length, -1);
    cursor = rest;
    let mut kinds = Vec::new();
    while !cursor.is_empty() {
        let (rest, block) = parser.next_block(cursor).unwrap();
        kinds.push(match block {
            pcap_file::pcapng::Block::InterfaceDescription(_) => "idb",
            pcap_file::pcapng::Block::EnhancedPacket(_) => "epb",
            _ => "other",
        });
        cursor = rest;
    }
    assert_eq!(kinds, ["idb", "idb", "epb", "epb"]);
}

#[test]
fn an_unfinished_writer_leaves_nothing_behind() {
    let input = big_endian_nanosecond_pcap();
    let capture = Capture::from_bytes(input).unwrap();
    let dir = scratch_dir("unfinished");
    let dest = dir.join("out.pcap");
    std::fs::write(&dest, b"previous contents").unwrap();
    {
        let mut writer = CaptureWriter::create(&dest, &capture).unwrap();
        for record in records(&capture) {
            writer.write(&record).unwrap();
        }
        // The destination is untouched while the writer works.
        assert_eq!(std::fs::read(&dest).unwrap(), b"previous contents");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "a temporary file beside it");
    }
    assert_eq!(std::fs::read(&dest).unwrap(), b"previous contents");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("out.pcap")], "the temporary file is removed");
}

#[test]
fn records_must_come_in_file_order() {
    let input = big_endian_nanosecond_pcap();
    let capture = Capture::from_bytes(input).unwrap();
    let dir = scratch_dir("order");
    let all = records(&capture);
    let mut writer = CaptureWriter::create(&dir.join("o.pcap"), &capture).unwrap();
    writer.write(&all[3]).unwrap();
    let err = writer.write(&all[1]).unwrap_err();
    assert!(err.to_string().contains("record 2 written out of order"), "{err}");
    assert_eq!(writer.written(), 1);
}

#[test]
fn a_missing_directory_is_an_error_not_a_panic() {
    let capture = Capture::from_bytes(big_endian_nanosecond_pcap()).unwrap();
    let dest = scratch_dir("missing").join("no/such/dir/out.pcap");
    assert!(CaptureWriter::create(&dest, &capture).is_err());
}

/// Generated inputs and the old (pcap-file based) writer's outputs, kept as goldens for
/// the streaming writer: `WEIR_GOLDEN=1 cargo test -p weir-runtime make_goldens`.
#[test]
fn make_goldens() {
    if std::env::var_os("WEIR_GOLDEN").is_none() {
        return;
    }
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut le_pcap = pcap_file::pcap::PcapWriter::new(Vec::new()).unwrap();
    for i in 0..9u32 {
        let data = vec![i as u8; 60 + 7 * i as usize];
        let ts = Duration::new(1_600_000_000 + u64::from(i), 1000 * (17 + i));
        le_pcap.write_packet(&PcapPacket::new(ts, 60 + 7 * i + 3 * (i % 2), &data)).unwrap();
    }
    let mut two_sections = pcapng_with_two_interfaces();
    two_sections.extend_from_slice(&pcapng_with_two_interfaces());
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("le-micro.pcap", le_pcap.into_writer()),
        ("be-nano.pcap", big_endian_nanosecond_pcap()),
        ("two-interfaces.pcapng", pcapng_with_two_interfaces()),
        ("two-sections.pcapng", two_sections),
    ];
    let dir = scratch_dir("golden");
    for (name, bytes) in inputs {
        std::fs::write(golden.join(name), &bytes).unwrap();
        let capture = Capture::from_bytes(bytes).unwrap();
        let selections: [(&str, &dyn Fn(usize) -> bool); 4] = [
            ("all", &|_| true),
            ("none", &|_| false),
            ("odd", &|i| i % 2 == 1),
            ("1-4-10", &|i| i == 1 || i == 4 || i == 10),
        ];
        for (sel, keep) in selections {
            let out = select(&capture, &dir.join("o"), keep);
            std::fs::write(golden.join(format!("{name}.{sel}")), out).unwrap();
        }
    }
}
