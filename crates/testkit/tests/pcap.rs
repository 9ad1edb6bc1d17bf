//! pcap writing and reading: round trips, the formats the reader accepts, refusals, and the
//! committed sample capture staying in step with the generator.

use weir_testkit::{
    corpus, edge_cases, read_capture, read_pcap, sample_capture_path, write_pcap,
    write_pcap_stream, Packet, Scratch, LINKTYPE_ETHERNET, SAMPLE_COUNT, SAMPLE_SEED,
};

/// A fresh directory for one test (the test kit's own [`Scratch`]).
fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("testkit-{name}"))
}

/// What a pcap file keeps of a packet (descriptions are not stored).
fn stored(packets: &[Packet]) -> Vec<(Vec<u8>, u32, u32, u32)> {
    packets
        .iter()
        .map(|packet| (packet.data.clone(), packet.wire_len, packet.ts_sec, packet.ts_usec))
        .collect()
}

#[test]
fn corpus_and_edge_cases_survive_a_round_trip() {
    let scratch = scratch("round-trip");
    let mut packets = corpus(11, 1500);
    packets.extend(edge_cases());
    let path = scratch.join("all.pcap");
    write_pcap(&path, LINKTYPE_ETHERNET, &packets).unwrap_or_else(|error| panic!("write: {error}"));
    let capture = read_capture(&path).unwrap_or_else(|error| panic!("read: {error}"));
    assert_eq!(capture.linktype, LINKTYPE_ETHERNET);
    assert_eq!(capture.snaplen, 262_144);
    assert_eq!(stored(&capture.packets), stored(&packets));
    assert!(capture.packets.iter().all(|packet| packet.description.is_empty()));
    assert_eq!(
        scratch.names(),
        vec!["all.pcap".to_string()],
        "the temporary file must be renamed away"
    );
    // Header (24) + per record 16 bytes of header and the captured bytes, nothing else.
    let expected_size: usize =
        24 + packets.iter().map(|packet| 16 + packet.data.len()).sum::<usize>();
    let actual_size = std::fs::metadata(&path).map(|meta| meta.len()).unwrap_or(0);
    assert_eq!(actual_size, expected_size as u64);
}

#[test]
fn a_stream_writes_what_a_slice_writes_and_stops_at_a_bad_packet() {
    let scratch = scratch("stream");
    let packets = corpus(5, 300);
    let (slice, stream) = (scratch.join("slice.pcap"), scratch.join("stream.pcap"));
    write_pcap(&slice, LINKTYPE_ETHERNET, &packets).unwrap_or_else(|error| panic!("{error}"));
    let written = write_pcap_stream(&stream, LINKTYPE_ETHERNET, 262_144, packets.iter().cloned())
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(written, 300);
    assert_eq!(std::fs::read(&slice).ok(), std::fs::read(&stream).ok());
    let bad =
        Packet { data: vec![0; 10], wire_len: 9, ts_sec: 0, ts_usec: 0, description: "".into() };
    let path = scratch.join("bad.pcap");
    let result = write_pcap_stream(&path, LINKTYPE_ETHERNET, 262_144, [&packets[0], &bad]);
    assert!(result.is_err_and(|error| error.to_string().contains("packet 1")));
    assert!(!path.exists(), "a failed stream leaves no file");
    assert_eq!(scratch.names().len(), 2, "nor a temporary one: {:?}", scratch.names());
}

#[test]
fn other_link_types_and_empty_files_round_trip() {
    let scratch = scratch("link-types");
    let path = scratch.join("raw.pcap");
    let raw_ip: Vec<Packet> = corpus(2, 5)
        .into_iter()
        .map(|mut packet| {
            packet.data.drain(..packet.data.len().min(14));
            packet.wire_len = packet.wire_len.saturating_sub(14).max(packet.data.len() as u32);
            packet
        })
        .collect();
    write_pcap(&path, 101, &raw_ip).unwrap_or_else(|error| panic!("{error}"));
    let capture = read_capture(&path).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(capture.linktype, 101);
    assert_eq!(stored(&capture.packets), stored(&raw_ip));
    let empty = scratch.join("empty.pcap");
    write_pcap(&empty, LINKTYPE_ETHERNET, &[]).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(read_pcap(&empty), Ok(Vec::new()));
}

#[test]
fn snap_length_grows_to_the_largest_wire_length() {
    let scratch = scratch("snaplen");
    let path = scratch.join("big.pcap");
    let packet = Packet {
        data: vec![1, 2, 3],
        wire_len: 1_000_000,
        ts_sec: 1,
        ts_usec: 2,
        description: String::new(),
    };
    write_pcap(&path, LINKTYPE_ETHERNET, std::slice::from_ref(&packet))
        .unwrap_or_else(|error| panic!("{error}"));
    let capture = read_capture(&path).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(capture.snaplen, 1_000_000);
    assert_eq!(capture.packets.first().map(|packet| packet.wire_len), Some(1_000_000));
}

#[test]
fn writing_refuses_records_longer_than_their_packet_and_leaves_nothing_behind() {
    let scratch = scratch("refuse");
    let path = scratch.join("bad.pcap");
    let mut packets = corpus(1, 3);
    packets.push(Packet {
        data: vec![0; 10],
        wire_len: 9,
        ts_sec: 0,
        ts_usec: 0,
        description: String::new(),
    });
    let error = write_pcap(&path, LINKTYPE_ETHERNET, &packets)
        .err()
        .map(|error| (error.kind(), error.to_string()));
    let (kind, message) = error.unwrap_or_else(|| panic!("writing an over-full record succeeded"));
    assert_eq!(kind, std::io::ErrorKind::InvalidInput);
    assert!(message.contains("packet 3"), "{message}");
    let bad_time = Packet {
        data: vec![],
        wire_len: 0,
        ts_sec: 0,
        ts_usec: 1_000_000,
        description: String::new(),
    };
    assert!(write_pcap(&path, LINKTYPE_ETHERNET, &[bad_time]).is_err());
    assert!(scratch.names().is_empty(), "left behind: {:?}", scratch.names());
}

#[test]
fn reading_accepts_big_endian_and_nanosecond_files() {
    let scratch = scratch("formats");
    // Big-endian, nanosecond magic, snap length 96 (smaller than the packet's wire length,
    // as in captures taken with `-s 96`), link type 1, one record.
    let mut file =
        vec![0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 96, 0, 0, 0, 1];
    file.extend_from_slice(&[
        0, 0, 0, 7, 0x3b, 0x9a, 0xc9, 0xff, 0, 0, 0, 3, 0, 0, 5, 0xdc, 0xaa, 0xbb, 0xcc,
    ]);
    let path = scratch.join("be-ns.pcap");
    std::fs::write(&path, &file).unwrap_or_else(|error| panic!("{error}"));
    let capture = read_capture(&path).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(capture.snaplen, 96);
    let packet = capture.packets.first().cloned().unwrap_or_else(|| panic!("no packet read"));
    assert_eq!(packet.data, vec![0xaa, 0xbb, 0xcc]);
    assert_eq!(packet.wire_len, 1500);
    assert_eq!((packet.ts_sec, packet.ts_usec), (7, 999_999));
}

#[test]
fn reading_reports_missing_and_malformed_files_by_name() {
    let scratch = scratch("errors");
    let missing = scratch.join("missing.pcap");
    let error = read_pcap(&missing).err().unwrap_or_default();
    assert!(error.contains("missing.pcap"), "{error}");
    let bad = scratch.join("bad.pcap");
    std::fs::write(&bad, b"not a capture file at all").unwrap_or_else(|error| panic!("{error}"));
    let error = read_pcap(&bad).err().unwrap_or_default();
    assert!(error.contains("bad.pcap") && error.contains("file header"), "{error}");
    // A valid file cut inside its last record.
    let cut = scratch.join("cut.pcap");
    write_pcap(&cut, LINKTYPE_ETHERNET, &corpus(1, 3)).unwrap_or_else(|error| panic!("{error}"));
    let mut bytes = std::fs::read(&cut).unwrap_or_default();
    bytes.truncate(bytes.len() - 1);
    std::fs::write(&cut, &bytes).unwrap_or_else(|error| panic!("{error}"));
    let error = read_pcap(&cut).err().unwrap_or_default();
    assert!(error.contains("record 2"), "{error}");
}

#[test]
fn committed_sample_matches_the_generator() {
    let path = sample_capture_path();
    let expected = corpus(SAMPLE_SEED, SAMPLE_COUNT);
    if std::env::var_os("WEIR_BLESS").is_some_and(|value| value == "1") {
        write_pcap(&path, LINKTYPE_ETHERNET, &expected)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        println!("blessed {}", path.display());
    }
    let capture = read_capture(&path).unwrap_or_else(|error| {
        panic!("{error}\nregenerate with `cargo run -p weir-testkit --example write-sample` (or WEIR_BLESS=1)")
    });
    assert_eq!(capture.linktype, LINKTYPE_ETHERNET);
    assert_eq!(capture.packets.len(), SAMPLE_COUNT);
    let first_difference =
        stored(&capture.packets).iter().zip(stored(&expected).iter()).position(|(a, b)| a != b);
    assert_eq!(
        first_difference,
        None,
        "{} is stale; regenerate with `cargo run -p weir-testkit --example write-sample` (or WEIR_BLESS=1)",
        path.display()
    );
}
