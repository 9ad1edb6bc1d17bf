//! Snapshot lengths and long records as libpcap 1.10.3 reads them: every header snapshot
//! length from 0 to 0xffffffff (a pcap header's, a pcapng first interface's, the modified
//! format's +14), and records whose captured length is above the snapshot length, above
//! 262,144 or above 2^24, in both formats. Each case's expectations are written down (in
//! snaplen_cases.rs: what tcpdump 4.99.3 with libpcap 1.10.3 did with the same bytes) and
//! checked always; when tcpdump is installed, its reading of the same bytes is compared too:
//! the snapshot length it reports, the packets `-w` copies and the words it refuses with.
//! (What weir's `-w` writes for each: weir-cli's tests/snaplen_copy.rs.)

use super::read_bytes;
use super::snaplen_cases::cases;
use crate::capture::*;
use std::process::Command;

/// What the fast path ([`CaptureReader::visit_buffered`], then `next_packet` for what it
/// leaves) reads: (data length, wire length) and the error.
fn read_fast(bytes: &[u8]) -> (Vec<(usize, u32)>, Option<CaptureError>) {
    let mut reader = match CaptureReader::new(bytes) {
        Ok(reader) => reader,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut seen = Vec::new();
    loop {
        reader.visit_buffered(|data, wire| {
            seen.push((data.len(), wire));
            true
        });
        match reader.next_packet() {
            None => return (seen, None),
            Some(Err(e)) => return (seen, Some(e)),
            Some(Ok(p)) => seen.push((p.data.len(), p.wire_len)),
        }
    }
}

/// tcpdump's reading of `bytes` (`tcpdump -r IN -w OUT`): the snapshot length it reports,
/// the packets it copied (bytes, wire length) and the words after `pcap_loop: `, if any.
struct Theirs {
    snaplen: Option<u32>,
    packets: Vec<(Vec<u8>, u32)>,
    refused: Option<String>,
}

fn tcpdump(dir: &std::path::Path, bytes: &[u8]) -> Theirs {
    let (input, output) = (dir.join("in"), dir.join("out.pcap"));
    std::fs::write(&input, bytes).unwrap();
    let _ = std::fs::remove_file(&output);
    let out =
        Command::new("tcpdump").arg("-r").arg(&input).arg("-w").arg(&output).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let snaplen = stderr
        .lines()
        .find_map(|l| l.split("snapshot length ").nth(1))
        .and_then(|n| n.trim().parse().ok());
    let refused =
        stderr.lines().find_map(|l| l.strip_prefix("tcpdump: pcap_loop: ")).map(String::from);
    assert_eq!(out.status.success(), refused.is_none(), "tcpdump's status and words: {stderr}");
    let written = std::fs::read(&output).unwrap_or_default();
    Theirs { snaplen, packets: records(&written), refused }
}

/// The records of the pcap tcpdump wrote, parsed by hand: a record above 262,144 bytes that
/// tcpdump copied from a pcapng file is one libpcap (and so weir) refuses to read back.
fn records(pcap: &[u8]) -> Vec<(Vec<u8>, u32)> {
    let field = |at: usize| u32::from_ne_bytes(pcap.get(at..at + 4).unwrap().try_into().unwrap());
    assert_eq!(field(0), MAGIC_MICRO, "tcpdump writes pcap");
    let (mut at, mut out) = (24, Vec::new());
    while at < pcap.len() {
        let (caplen, wire) = (field(at + 8) as usize, field(at + 12));
        out.push((pcap.get(at + 16..at + 16 + caplen).unwrap().to_vec(), wire));
        at += 16 + caplen;
    }
    out
}

#[test]
fn snapshot_lengths_and_long_records_read_as_libpcap_reads_them() {
    let dir = std::env::temp_dir().join(format!("weir-runtime-snaplen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let have_tcpdump = Command::new("tcpdump").arg("--version").output().is_ok();
    if !have_tcpdump {
        println!("SKIPPED: snapshot_lengths_and_long_records_read_as_libpcap_reads_them (tcpdump part): no tcpdump");
    }
    let mut compared = 0;
    for case in cases() {
        let name = &case.name;
        let reader = CaptureReader::new(&case.bytes[..]).unwrap();
        assert_eq!(reader.snaplen(), case.snaplen, "{name}: the snapshot length");
        let want_error = case
            .refused
            .as_ref()
            .map(|(record, at, words)| format!("record {record} at byte {at}: {words}"));
        for chunk in [64, DEFAULT_CHUNK] {
            let (got, err) = read_bytes(&case.bytes, chunk);
            let lens: Vec<(usize, u32)> = got.iter().map(|p| (p.data.len(), p.wire_len)).collect();
            assert_eq!(lens, case.packets, "{name} (chunk {chunk}): the packets");
            assert_eq!(
                err.map(|e| e.to_string()),
                want_error,
                "{name} (chunk {chunk}): the refusal"
            );
        }
        let (fast, err) = read_fast(&case.bytes);
        assert_eq!(fast, case.packets, "{name}: the fast path's packets");
        assert_eq!(err.map(|e| e.to_string()), want_error, "{name}: the fast path's refusal");
        if !have_tcpdump {
            continue;
        }
        let theirs = tcpdump(&dir, &case.bytes);
        assert_eq!(theirs.snaplen, Some(case.snaplen), "{name}: tcpdump's snapshot length");
        let (ours, _) = read_bytes(&case.bytes, DEFAULT_CHUNK);
        let ours: Vec<(Vec<u8>, u32)> = ours.into_iter().map(|p| (p.data, p.wire_len)).collect();
        assert!(
            ours == theirs.packets,
            "{name}: the packets tcpdump copies ({} of them)",
            theirs.packets.len()
        );
        let words = case.refused.as_ref().map(|(_, _, words)| words.clone());
        assert_eq!(theirs.refused, words, "{name}: tcpdump's words");
        compared += 1;
    }
    if have_tcpdump {
        assert_eq!(compared, cases().len(), "cases compared with tcpdump");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
