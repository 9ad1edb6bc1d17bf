//! Odd capture files, each read by weir and (when it is installed) by tcpdump: the same
//! packets (bytes and wire lengths as libpcap reports them) and the same verdict, damage or
//! none. tcpdump's view is taken from `tcpdump -r F -w OUT`: OUT's records hold the captured
//! bytes and the `len` libpcap handed to tcpdump.

use super::build::{pcap_file, Ng, Rec};
use super::{read_bytes, Owned};
use crate::capture::*;
use std::process::Command;

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// weir's packets (data length, wire length) and whether it ends in an error.
    packets: Vec<(usize, u32)>,
    error: Option<&'static str>,
}

fn eth(len: usize) -> Vec<u8> {
    let mut d = vec![0u8; len];
    d.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    d
}

fn cases() -> Vec<Case> {
    let two = [Rec::new(eth(60)), Rec::new(eth(70)).wire(1500)];
    let std = |big, records: &[Rec]| pcap_file(big, MAGIC_MICRO, 2, 4, 65535, 1, 16, records);
    let mut cases = vec![
        Case {
            name: "link type 0x30000001 (FCS bits) reads as Ethernet",
            bytes: pcap_file(false, MAGIC_MICRO, 2, 4, 65535, 0x3000_0001, 16, &two),
            packets: vec![(60, 60), (70, 1500)],
            error: None,
        },
        Case {
            name: "caplen > wire length: len is the wire length",
            bytes: std(false, &[Rec::new(eth(60)).wire(50)]),
            packets: vec![(60, 50)],
            error: None,
        },
        Case {
            name: "snaplen 0",
            bytes: pcap_file(false, MAGIC_MICRO, 2, 4, 0, 1, 16, &two),
            packets: vec![(60, 60), (70, 1500)],
            error: None,
        },
        Case {
            name: "caplen > snaplen is cut to the snaplen",
            bytes: pcap_file(false, MAGIC_MICRO, 2, 4, 40, 1, 16, &two),
            packets: vec![(40, 60), (40, 1500)],
            error: None,
        },
        Case {
            name: "modified (Kuznetsov) magic, 24-byte record headers",
            bytes: pcap_file(false, MAGIC_KUZNETSOV, 2, 4, 65535, 1, 24, &two),
            packets: vec![(60, 60), (70, 1500)],
            error: None,
        },
        Case {
            name: "nanosecond magic, big-endian",
            bytes: pcap_file(true, MAGIC_NANO, 2, 4, 65535, 1, 16, &two),
            packets: vec![(60, 60), (70, 1500)],
            error: None,
        },
        Case {
            name: "big-endian pcap",
            bytes: std(true, &two),
            packets: vec![(60, 60), (70, 1500)],
            error: None,
        },
        Case {
            name: "version 2.2: length fields swapped",
            bytes: pcap_file(false, MAGIC_MICRO, 2, 2, 65535, 1, 16, &[Rec::new(eth(60))]),
            // Stored (caplen 60, len 60): the same either way; a swapped pair is below.
            packets: vec![(60, 60)],
            error: None,
        },
        Case {
            name: "300,000-byte record",
            bytes: std(false, &[Rec::new(eth(60)), Rec::new(eth(300_000))]),
            packets: vec![(60, 60)],
            error: Some("invalid packet capture length 300000, bigger than snaplen of 65535"),
        },
        Case {
            name: "version 2.5",
            bytes: pcap_file(false, MAGIC_MICRO, 2, 5, 65535, 1, 16, &two),
            packets: vec![],
            error: Some("unsupported pcap version 2.5"),
        },
        Case {
            name: "version 1.0",
            bytes: pcap_file(false, MAGIC_MICRO, 1, 0, 65535, 1, 16, &two),
            packets: vec![],
            error: Some("archaic pcap version 1.0"),
        },
        Case {
            name: "truncated header",
            bytes: std(false, &two)[..10].to_vec(),
            packets: vec![],
            error: Some("the file ends inside the pcap header"),
        },
        Case {
            name: "truncated record",
            bytes: std(false, &two)[..24 + 76 + 40].to_vec(),
            packets: vec![(60, 60)],
            error: Some("record 2 at byte 100: the file ends inside the record (40 of 86 bytes)"),
        },
        Case {
            name: "truncated record header",
            bytes: std(false, &two)[..24 + 76 + 10].to_vec(),
            packets: vec![(60, 60)],
            error: Some("the file ends inside the record header (10 of 16 bytes)"),
        },
    ];
    // Version 2.3 with the lengths the wrong way round (caplen > len): swapped back.
    let mut v23 = pcap_file(false, MAGIC_MICRO, 2, 3, 65535, 1, 16, &[Rec::new(eth(60))]);
    v23[24 + 8..24 + 12].copy_from_slice(&1500u32.to_le_bytes());
    v23[24 + 12..24 + 16].copy_from_slice(&60u32.to_le_bytes());
    cases.push(Case {
        name: "version 2.3, caplen > len: swapped",
        bytes: v23,
        packets: vec![(60, 1500)],
        error: None,
    });

    let ng = |f: &dyn Fn(&mut Ng)| {
        let mut ng = Ng::new(false);
        f(&mut ng);
        ng.bytes
    };
    let p = |len| Rec::new(eth(len)).ts_raw(1_000_000);
    cases.extend([
        Case {
            name: "pcapng without an interface description",
            bytes: ng(&|n| {
                n.shb();
            }),
            packets: vec![],
            error: Some("no interface description block"),
        },
        Case {
            name: "pcapng packet before any interface description",
            bytes: ng(&|n| {
                n.shb().epb(0, &p(60), &[]);
            }),
            packets: vec![],
            error: Some("before any interface description"),
        },
        Case {
            name: "pcapng obsolete packet block",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]).pb(0, &p(60)).epb(0, &p(61), &[]);
            }),
            packets: vec![(60, 60), (61, 61)],
            error: None,
        },
        Case {
            name: "pcapng simple packet block cut to the snaplen",
            bytes: ng(&|n| {
                n.shb().idb(1, 50, &[]).spb(&p(60)).spb(&p(30));
            }),
            // The SPB holds 60 bytes; libpcap takes the first 50.
            packets: vec![(50, 60), (30, 30)],
            error: None,
        },
        Case {
            name: "pcapng damaged option in a packet block",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]);
                n.epb(0, &p(60), &[(1, b"abc".to_vec())]);
                // An option whose length runs past the block.
                let mut bad = Ng::new(false);
                bad.epb(0, &p(60), &[(1, b"abcd".to_vec())]);
                let opt_len_at = 8 + 20 + 60 + 2;
                bad.bytes[opt_len_at..opt_len_at + 2].copy_from_slice(&200u16.to_le_bytes());
                n.bytes.extend(bad.bytes);
                n.epb(0, &p(62), &[]);
            }),
            packets: vec![(60, 60), (60, 60), (62, 62)],
            error: None,
        },
        Case {
            name: "pcapng damaged option in an interface description",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[(9, vec![6, 0, 0, 0, 0])]).epb(0, &p(60), &[]);
            }),
            packets: vec![],
            error: Some("if_tsresol of length 5"),
        },
        Case {
            name: "pcapng unknown and custom block types",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]).custom(0x1234_5678).epb(0, &p(60), &[]).custom(0xBAD);
                n.epb(0, &p(61), &[]);
            }),
            packets: vec![(60, 60), (61, 61)],
            error: None,
        },
        Case {
            name: "pcapng packet of an undescribed interface",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]).epb(0, &p(60), &[]).epb(1, &p(61), &[]);
            }),
            packets: vec![(60, 60)],
            error: Some("interface 1, which no interface description block describes"),
        },
        Case {
            name: "pcapng second section without interfaces",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]).epb(0, &p(60), &[]).shb().epb(0, &p(61), &[]);
            }),
            packets: vec![(60, 60)],
            error: Some("interface 0, which no interface"),
        },
        Case {
            name: "pcapng two sections",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]).epb(0, &p(60), &[]).shb().idb(1, 0, &[]);
                n.epb(0, &p(61), &[]);
            }),
            packets: vec![(60, 60), (61, 61)],
            error: None,
        },
        Case {
            name: "pcapng block length not a multiple of 4",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]).epb(0, &p(60), &[]);
                n.bytes.extend(0x99u32.to_le_bytes());
                n.bytes.extend(17u32.to_le_bytes());
                n.bytes.extend(b"abcde");
                n.bytes.extend(17u32.to_le_bytes());
            }),
            packets: vec![(60, 60)],
            error: Some("block length 17 is not a multiple of 4"),
        },
        Case {
            name: "pcapng trailing length differs",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]).epb(0, &p(60), &[]).epb(0, &p(60), &[]);
                let last = n.bytes.len() - 4;
                n.bytes[last] ^= 4;
            }),
            packets: vec![(60, 60)],
            error: Some("at its start and"),
        },
        Case {
            name: "pcapng captured length above the snaplen",
            bytes: ng(&|n| {
                n.shb().idb(1, 50, &[]).epb(0, &p(40), &[]).epb(0, &p(60), &[]);
            }),
            packets: vec![(40, 40)],
            error: Some("invalid packet capture length 60, bigger than snaplen of 50"),
        },
        Case {
            name: "pcapng section header of more than 1 MiB",
            bytes: {
                let mut n = Ng::new(false);
                let mut body = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
                body.extend([1, 0, 0, 0]);
                body.extend([0xff; 8]);
                body.extend(vec![0; 1 << 20]);
                n.block(BT_SHB, &body).idb(1, 0, &[]).epb(0, &p(60), &[]);
                n.bytes
            },
            packets: vec![],
            error: Some("outside libpcap's 28 to 1048576 bytes"),
        },
        Case {
            name: "pcapng block of more than 16 MiB",
            bytes: ng(&|n| {
                n.shb().idb(1, 0, &[]).epb(0, &p(60), &[]);
                n.bytes.extend(0x99u32.to_le_bytes());
                n.bytes.extend((32u32 << 20).to_le_bytes());
            }),
            packets: vec![(60, 60)],
            error: Some("pcapng block size 33554432 > maximum 16777216"),
        },
    ]);
    let mut big = Ng::new(true);
    big.shb().idb(1, 0, &[]).epb(0, &p(60), &[]).spb(&p(61));
    cases.push(Case {
        name: "big-endian pcapng",
        bytes: big.bytes,
        packets: vec![(60, 60), (61, 61)],
        error: None,
    });
    let mut flip = Ng::new(false);
    flip.shb().idb(1, 0, &[]).epb(0, &p(60), &[]);
    let mut other = Ng::new(true);
    other.shb().idb(1, 0, &[]).epb(0, &p(61), &[]);
    flip.bytes.extend(other.bytes);
    cases.push(Case {
        name: "pcapng sections of different byte orders",
        bytes: flip.bytes,
        packets: vec![(60, 60)],
        // The section header's length, read in the first section's order, is absurd (as
        // libpcap reads it too).
        error: Some("pcapng block size 469762048 > maximum"),
    });
    cases
}

/// A packet's bytes and wire length.
type Seen = (Vec<u8>, u32);

/// What tcpdump reads of `bytes`: its packets and whether it reported an error; `None`
/// without tcpdump.
fn tcpdump(dir: &std::path::Path, bytes: &[u8]) -> Option<(Vec<Seen>, bool)> {
    let input = dir.join("in");
    let output = dir.join("out.pcap");
    std::fs::write(&input, bytes).unwrap();
    let _ = std::fs::remove_file(&output);
    let out = Command::new("tcpdump").arg("-r").arg(&input).arg("-w").arg(&output).output().ok()?;
    let failed = !out.status.success();
    let packets = match std::fs::read(&output) {
        Ok(written) => {
            let (packets, err) = read_bytes(&written, 1 << 20);
            assert_eq!(err, None, "tcpdump's output reads back");
            packets.into_iter().map(|p: Owned| (p.data, p.wire_len)).collect()
        }
        Err(_) => Vec::new(),
    };
    Some((packets, failed))
}

#[test]
fn odd_files_read_as_libpcap_reads_them() {
    let dir = std::env::temp_dir().join(format!("weir-runtime-odd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let have_tcpdump = Command::new("tcpdump").arg("--version").output().is_ok();
    if !have_tcpdump {
        println!("SKIPPED: odd_files_read_as_libpcap_reads_them (tcpdump part): no tcpdump");
    }
    let mut compared = 0;
    for case in cases() {
        let (got, err) = read_bytes(&case.bytes, 64);
        let lens: Vec<(usize, u32)> = got.iter().map(|p| (p.data.len(), p.wire_len)).collect();
        assert_eq!(lens, case.packets, "{}: weir's packets", case.name);
        match (&err, case.error) {
            (None, None) => {}
            (Some(e), Some(want)) => {
                assert!(e.to_string().contains(want), "{}: {e} (want {want})", case.name)
            }
            _ => panic!("{}: error {err:?}, expected {:?}", case.name, case.error),
        }
        if !have_tcpdump {
            continue;
        }
        let (theirs, failed) = tcpdump(&dir, &case.bytes).unwrap();
        let ours: Vec<Seen> = got.iter().map(|p| (p.data.clone(), p.wire_len)).collect();
        assert_eq!(ours, theirs, "{}: the packets tcpdump reads", case.name);
        assert_eq!(err.is_some(), failed, "{}: tcpdump's verdict", case.name);
        compared += 1;
    }
    if have_tcpdump {
        assert!(compared >= 30, "{compared} cases compared with tcpdump");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_fcs_bits_are_kept_apart() {
    let bytes = pcap_file(false, MAGIC_MICRO, 2, 4, 0, 0x3000_0001, 16, &[]);
    let reader = CaptureReader::new(&bytes[..]).unwrap();
    assert_eq!((reader.linktype(), reader.linktype_ext()), (1, 0x3000_0000));
    assert_eq!(reader.snaplen(), 262_144, "snaplen 0 reads as the maximum");
}
