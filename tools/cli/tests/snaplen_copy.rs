//! `weir filter -w` on the snapshot-length cases of weir-runtime's reader tests (the same
//! table and builders, read through `#[path]`): every pcap case's output is the bytes
//! `tcpdump -r IN -w OUT` writes (the snapshot length as libpcap adjusts it, records above
//! it cut with the wire length kept, the modified format as plain pcap), on the fast path
//! (runs of records written from the read buffer) and the per-record one (`-U`); a pcapng
//! case is copied as pcapng (the input's blocks up to the refused record, the section
//! length unknown), its packets the ones tcpdump writes. Written-down expectations always,
//! tcpdump's output byte for byte when it is installed.

use std::process::Command;

use crate::common::{have_tcpdump, path, text, weir};

#[path = "../../../crates/runtime/src/capture/tests/build.rs"]
#[allow(dead_code)]
mod build;
#[path = "../../../crates/runtime/src/capture/tests/snaplen_cases.rs"]
mod snaplen_cases;

use snaplen_cases::{cases, data, Case};

const PCAPNG_SHB: u32 = 0x0A0D_0D0A;

/// What tcpdump writes for a case: a microsecond pcap in little-endian order (the machine's),
/// version 2.4, the snapshot length libpcap reports, the link type, then each packet read
/// (timestamps 0 in these files) with its kept bytes as captured length and its wire length.
fn as_tcpdump_writes(case: &Case, linktype: u32) -> Vec<u8> {
    let mut out = [&0xA1B2_C3D4u32.to_le_bytes()[..], &[2, 0, 4, 0], &[0; 8]].concat();
    out.extend(case.snaplen.to_le_bytes());
    out.extend(linktype.to_le_bytes());
    for &(kept, wire) in &case.packets {
        out.extend([0; 8]);
        out.extend((kept as u32).to_le_bytes());
        out.extend(wire.to_le_bytes());
        out.extend(data(kept));
    }
    out
}

/// A pcapng case as weir copies it: the section header (its length -1, unknown), the
/// interface description and the first `packets` packet blocks, as stored.
fn pcapng_copy(bytes: &[u8], packets: usize) -> Vec<u8> {
    let block_len = |at: usize| u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
    let mut end = 0;
    for _ in 0..2 + packets {
        end += block_len(end) as usize;
    }
    let mut out = bytes[..end].to_vec();
    assert_eq!(u32::from_le_bytes(out[..4].try_into().unwrap()), PCAPNG_SHB);
    out[16..24].fill(0xff);
    out
}

#[test]
fn copies_write_snapshot_lengths_and_long_records_as_tcpdump_does() {
    let dir = std::env::temp_dir().join(format!("weir-snaplen-copy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tcpdump = have_tcpdump(
        "copies_write_snapshot_lengths_and_long_records_as_tcpdump_does (tcpdump's side)",
    );
    let (input, ours, ours_u, theirs) =
        (dir.join("in"), dir.join("ours.pcap"), dir.join("ours-u.pcap"), dir.join("theirs.pcap"));
    let (mut compared, all) = (0, cases());
    for case in &all {
        let name = &case.name;
        std::fs::write(&input, &case.bytes).unwrap();
        let pcapng = u32::from_le_bytes(case.bytes[..4].try_into().unwrap()) == PCAPNG_SHB;
        let linktype = if pcapng {
            u32::from(u16::from_le_bytes(case.bytes[36..38].try_into().unwrap()))
        } else {
            u32::from_le_bytes(case.bytes[20..24].try_into().unwrap())
        };
        let pcap = as_tcpdump_writes(case, linktype);
        let expected =
            if pcapng { pcapng_copy(&case.bytes, case.packets.len()) } else { pcap.clone() };
        for (out, flags) in [(&ours, &[][..]), (&ours_u, &["-U"][..])] {
            let mut args = vec!["filter", "-r", path(&input), "-w", path(out)];
            args.extend(flags);
            args.push("");
            let run = weir(&args);
            let stderr = text(&run.stderr);
            let code = if case.refused.is_some() { 1 } else { 0 };
            assert_eq!(run.status.code(), Some(code), "{name} {flags:?}: {stderr}");
            let got = std::fs::read(out).unwrap();
            assert!(
                got == expected,
                "{name} {flags:?}: weir wrote {} bytes, {} expected (header {:02x?})",
                got.len(),
                expected.len(),
                &got[..got.len().min(24)]
            );
        }
        if tcpdump {
            let _ = std::fs::remove_file(&theirs);
            let run = Command::new("tcpdump")
                .arg("-r")
                .arg(&input)
                .arg("-w")
                .arg(&theirs)
                .output()
                .unwrap();
            assert_eq!(run.status.success(), case.refused.is_none(), "{name}: tcpdump's status");
            let written = std::fs::read(&theirs).unwrap();
            // tcpdump writes pcap from pcapng too: the packets weir's pcapng copy holds.
            assert!(
                written == pcap,
                "{name}: tcpdump wrote {} bytes, {} expected",
                written.len(),
                pcap.len()
            );
            if !pcapng {
                assert!(
                    std::fs::read(&ours).unwrap() == written,
                    "{name}: weir's bytes against tcpdump's"
                );
            }
            compared += 1;
        }
    }
    if tcpdump {
        assert_eq!(compared, all.len(), "cases compared with tcpdump");
    }
    std::fs::remove_dir_all(&dir).ok();
}
