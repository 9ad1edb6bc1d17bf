//! The capture writer: a selection comes back out in the input's exact format (byte for byte
//! what the pcap-file based writer before it wrote), fresh pcap files read back as written,
//! and a destination is never left half-written.

use super::super::tests::build::{pcap_file, Ng, Rec};
use super::super::tests::read_bytes;
use super::super::*;
use super::*;
use std::io::Cursor;
use std::path::PathBuf;

fn scratch_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("weir-runtime-writer-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Copies the packets whose index `keep` accepts through a small chunk; returns the bytes.
fn select(input: &[u8], dest: &Path, keep: impl Fn(u64) -> bool) -> Vec<u8> {
    let mut reader = CaptureReader::with_chunk_size(Cursor::new(input.to_vec()), 50).unwrap();
    copy_selected(&mut reader, dest, |p| keep(p.index)).unwrap();
    std::fs::read(dest).unwrap()
}

#[test]
fn copies_match_the_goldens_of_the_previous_writer() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let dir = scratch_dir("golden");
    let selections: [(&str, &dyn Fn(u64) -> bool); 4] = [
        ("all", &|_| true),
        ("none", &|_| false),
        ("odd", &|i| i % 2 == 1),
        ("1-4-10", &|i| i == 1 || i == 4 || i == 10),
    ];
    let mut compared = 0;
    for name in ["le-micro.pcap", "be-nano.pcap", "two-interfaces.pcapng", "two-sections.pcapng"] {
        let input = std::fs::read(golden.join(name)).unwrap();
        for (sel, keep) in selections {
            let out = select(&input, &dir.join("o"), keep);
            let expected = std::fs::read(golden.join(format!("{name}.{sel}"))).unwrap();
            assert!(out == expected, "{name}, selection {sel}: differs from the golden");
            // Every copy reads back, an empty selection included (for pcapng it keeps the
            // first interface description: the one place it differs from the old writer,
            // whose empty pcapng copies were a bare section header libpcap refuses).
            let (back, err) = read_bytes(&out, 1 << 20);
            assert_eq!(err, None, "{name}, selection {sel}");
            assert_eq!(back.is_empty(), sel == "none");
            compared += 1;
        }
    }
    assert_eq!(compared, 16);
}

#[test]
fn pcapng_copy_keeps_descriptive_blocks_and_drops_statistics() {
    let mut ng = Ng::new(false);
    ng.shb().idb(1, 0, &[]).nrb();
    ng.epb(0, &Rec::new(vec![1; 20]), &[]);
    ng.isb(0).custom(0x4000_0BAD);
    ng.epb(0, &Rec::new(vec![2; 20]), &[(1, b"kept".to_vec())]);
    ng.idb(101, 0, &[]);
    ng.epb(1, &Rec::new(vec![3; 20]), &[]);
    let dir = scratch_dir("ng");
    let out = select(&ng.bytes, &dir.join("o"), |i| i == 2);
    assert_eq!(
        super::super::tests::build::block_types(&out, false),
        [BT_SHB, 1, 4, 0x4000_0BAD, 1, 6]
    );
    // The section length is "unknown".
    assert_eq!(out[16..24], [0xff; 8]);
    let (back, err) = read_bytes(&out, 1 << 20);
    assert_eq!(err, None);
    assert_eq!((back.len(), back[0].linktype, back[0].data[0]), (1, 101, 3));
}

#[test]
fn held_blocks_are_bounded() {
    // 3 MiB of name resolution blocks before the only kept packet: written as they come
    // (in order) once past HELD_MAX, and the output still reads.
    let mut ng = Ng::new(false);
    ng.shb().idb(1, 0, &[]);
    for i in 0..3000u32 {
        ng.block(4, &vec![0; 1020]);
        ng.epb(0, &Rec::new(vec![i as u8; 10]), &[]);
    }
    let dir = scratch_dir("held");
    let out = select(&ng.bytes, &dir.join("o"), |i| i == 2999);
    let (back, err) = read_bytes(&out, 1 << 20);
    assert_eq!(err, None);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].data, vec![(2999 % 256) as u8; 10]);
}

#[test]
fn fresh_pcap_is_what_tcpdump_writes() {
    let dir = scratch_dir("fresh");
    let dest = dir.join("fresh.pcap");
    let mut writer = CaptureWriter::pcap(&dest, 1, 262_144).unwrap();
    writer.flush_each_packet(true);
    let data = [0x45u8; 30];
    let packet = Packet {
        index: 0,
        data: &data,
        wire_len: 90,
        ts_sec: 1_700_000_000,
        ts_nsec: 123_456_789,
        linktype: 1,
        interface: 3,
        offset: 0,
        stored: None,
    };
    writer.write(&packet).unwrap();
    assert_eq!(writer.finish().unwrap(), 1);
    let bytes = std::fs::read(&dest).unwrap();
    let mut expected = 0xa1b2c3d4u32.to_ne_bytes().to_vec();
    expected.extend(2u16.to_ne_bytes());
    expected.extend(4u16.to_ne_bytes());
    expected.extend([0; 8]);
    expected.extend(262_144u32.to_ne_bytes());
    expected.extend(1u32.to_ne_bytes());
    for v in [1_700_000_000u32, 123_456, 30, 90] {
        expected.extend(v.to_ne_bytes());
    }
    expected.extend(data);
    assert_eq!(bytes, expected);
    let (back, err) = read_bytes(&bytes, 7);
    assert_eq!(err, None);
    assert_eq!((back[0].wire_len, back[0].ts), (90, (1_700_000_000, 123_456_000)));
    // A copy-through writer refuses a packet without a stored record.
    let source = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &[]);
    let reader = CaptureReader::new(Cursor::new(source)).unwrap();
    let mut copy = CaptureWriter::like(&dir.join("copy.pcap"), &reader).unwrap();
    assert!(copy.write(&packet).is_err());
}

#[test]
fn an_unfinished_writer_leaves_nothing_behind() {
    let input = pcap_file(true, MAGIC_NANO, 2, 4, 96, 101, 16, &[Rec::new(vec![1; 40])]);
    let dir = scratch_dir("unfinished");
    let dest = dir.join("out.pcap");
    std::fs::write(&dest, b"previous contents").unwrap();
    {
        let mut reader = CaptureReader::new(Cursor::new(input)).unwrap();
        let mut writer = CaptureWriter::like(&dest, &reader).unwrap();
        while let Some(p) = reader.next_packet() {
            writer.write(&p.unwrap()).unwrap();
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
fn a_damaged_input_still_gives_a_complete_copy_of_what_came_before() {
    let records: Vec<Rec> = (0..5).map(|i| Rec::new(vec![i; 30])).collect();
    let input = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &records);
    let dir = scratch_dir("damaged");
    let dest = dir.join("o.pcap");
    let cut = input[..24 + 46 * 3 + 10].to_vec();
    let mut reader = CaptureReader::new(Cursor::new(cut)).unwrap();
    let err = copy_selected(&mut reader, &dest, |_| true).unwrap_err();
    assert!(err.to_string().contains("record 4 at byte 162"), "{err}");
    // The header as tcpdump writes it: the snapshot length of 0 as libpcap adjusts it.
    let mut expected = input[..24 + 46 * 3].to_vec();
    expected[16..20].copy_from_slice(&262_144u32.to_le_bytes());
    assert_eq!(std::fs::read(&dest).unwrap(), expected);
}

#[test]
fn a_missing_directory_is_an_error_not_a_panic() {
    let dest = scratch_dir("missing").join("no/such/dir/out.pcap");
    assert!(CaptureWriter::pcap(&dest, 1, 0).is_err());
}

/// Where a copy differs from the stored file, as `tcpdump -w` writes it, in files of the
/// other byte order, nanosecond resolution, old versions and the modified format: the
/// snapshot length adjusted, long records cut, the modified format and version 2.2 as 2.4
/// with 16-byte record headers; byte order, resolution and timestamps kept. Through the
/// per-record path and the fast path's runs alike; and the copy reads back as the packets
/// and snapshot length of the input.
#[test]
fn copies_write_the_adjusted_snapshot_and_cut_records_in_the_files_order() {
    let be = |v: u32| v.to_be_bytes();
    let le = |v: u32| v.to_le_bytes();
    let records = [Rec::new(vec![7; 30]).ts(5, 6), Rec::new(vec![8; 50]).ts(9, 10)];
    // (name, input, header as written, first record as written)
    type Case = (&'static str, Vec<u8>, Vec<u8>, Vec<u8>);
    let cases: Vec<Case> = vec![
        (
            "big-endian nanosecond, snaplen 0",
            pcap_file(true, MAGIC_NANO, 2, 4, 0, 1, 16, &records),
            [&be(MAGIC_NANO)[..], &[0, 2, 0, 4], &[0; 8], &be(262_144), &be(1)].concat(),
            [&be(5)[..], &be(6), &be(30), &be(30), &[7; 30]].concat(),
        ),
        (
            "big-endian, snaplen 40",
            pcap_file(true, MAGIC_MICRO, 2, 4, 40, 1, 16, &records),
            [&be(MAGIC_MICRO)[..], &[0, 2, 0, 4], &[0; 8], &be(40), &be(1)].concat(),
            [&be(5)[..], &be(6), &be(30), &be(30), &[7; 30]].concat(),
        ),
        (
            "modified, snaplen 26",
            pcap_file(false, MAGIC_KUZNETSOV, 2, 4, 26, 1, 24, &records),
            [&le(MAGIC_MICRO)[..], &[2, 0, 4, 0], &[0; 8], &le(40), &le(1)].concat(),
            [&le(5)[..], &le(6), &le(30), &le(30), &[7; 30]].concat(),
        ),
        (
            "version 2.2 (lengths swapped), snaplen 40",
            pcap_file(false, MAGIC_MICRO, 2, 2, 40, 1, 16, &records),
            [&le(MAGIC_MICRO)[..], &[2, 0, 4, 0], &[0; 8], &le(40), &le(1)].concat(),
            // Swapped: the stored "caplen" 30 is the wire length, the stored "wire" 30 the
            // captured length.
            [&le(5)[..], &le(6), &le(30), &le(30), &[7; 30]].concat(),
        ),
    ];
    let dir = scratch_dir("adjusted");
    for (name, input, header, first) in cases {
        // The second record (50 bytes) cut to 40 where the snapshot length is 40.
        let (back, err) = read_bytes(&input, 1 << 20);
        assert_eq!(err, None, "{name}");
        let second = &back[1];
        let big = input[0] == 0xA1;
        let cut = second.data.len() as u32;
        let mut expected = [header, first].concat();
        expected.extend(pcap_record_header(&second.record, cut, second.wire_len, big));
        expected.extend(&second.data);
        assert_eq!(second.wire_len, 50, "{name}");
        let slow = select(&input, &dir.join("slow"), |_| true);
        assert!(slow == expected, "{name}: {:02x?}\nnot {:02x?}", slow, expected);
        // The fast path, where the writer takes runs (not for the modified format and old
        // versions, whose every record header is rewritten).
        let mut reader = CaptureReader::new(Cursor::new(input.clone())).unwrap();
        let dest = dir.join("fast");
        let mut writer = CaptureWriter::like(&dest, &reader).unwrap();
        let runs = writer.takes_pcap_runs();
        assert_eq!(runs, !name.starts_with("modified") && !name.starts_with("version"), "{name}");
        if runs {
            let (visited, kept) = reader
                .copy_buffered(|_, _| true, u64::MAX, |s, n| writer.write_pcap_runs(s, n))
                .unwrap();
            assert_eq!((visited, kept), (2, 2), "{name}");
        }
        while let Some(p) = reader.next_packet() {
            writer.write(&p.unwrap()).unwrap();
        }
        writer.finish().unwrap();
        assert!(std::fs::read(&dest).unwrap() == expected, "{name}: the fast path");
        let copy = CaptureReader::new(Cursor::new(slow.clone())).unwrap();
        let original = CaptureReader::new(Cursor::new(input.clone())).unwrap();
        assert_eq!(copy.snaplen(), original.snaplen(), "{name}: the snapshot length");
        let (again, err) = read_bytes(&slow, 1 << 20);
        assert_eq!(err, None, "{name}");
        let fields = |p: &super::super::tests::Owned| (p.data.clone(), p.wire_len, p.ts);
        let (a, b): (Vec<_>, Vec<_>) =
            (back.iter().map(fields).collect(), again.iter().map(fields).collect());
        assert_eq!(a, b, "{name}: the packets read back");
    }
}
