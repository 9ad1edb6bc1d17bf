//! The snapshot-length cases of `snaplen.rs` (every header snapshot length from 0 to
//! 0xffffffff, records above the snapshot length, above 262,144 and above 2^24, in pcap,
//! pcapng and the modified pcap format) with what libpcap 1.10.3 reads from each: one
//! table, also read by weir-cli's tests/snaplen_copy.rs (through `#[path]`, with
//! `build.rs`) for `weir filter -w`.

use super::build::{pcap_file, Ng, Rec};

const MAGIC_MICRO: u32 = 0xA1B2_C3D4;
const MAGIC_KUZNETSOV: u32 = 0xA1B2_CD34;
const INT_MAX: u32 = i32::MAX as u32;
/// Where the second record starts after a first one of 100 bytes: pcap (24-byte header,
/// 16-byte record header), the modified format (24-byte record headers), and pcapng (a
/// 28-byte section header, a 20-byte interface description, a 132-byte packet block).
const PCAP_SECOND: u64 = 24 + 16 + 100;
const KUZ_SECOND: u64 = 24 + 24 + 100;
const NG_SECOND: u64 = 28 + 20 + 132;
/// A captured length above 2^24.
const HUGE: u32 = (1 << 24) + 8;

pub struct Case {
    pub name: String,
    pub bytes: Vec<u8>,
    /// The snapshot length the reader reports (libpcap's `pcap_snapshot`).
    pub snaplen: u32,
    /// The packets read: (captured bytes kept, wire length).
    pub packets: Vec<(usize, u32)>,
    /// The refusal, if any.
    pub refused: Refusal,
}

/// (record, counted from 1; byte offset; libpcap's words), or none.
pub type Refusal = Option<(u64, u64, String)>;

/// A record case: (snapshot length, captured length of the second record, packets, refusal).
type Row = (u32, u32, Vec<(usize, u32)>, Refusal);

pub fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A pcap file of `magic` whose records have these captured lengths (wire = captured); a
/// record above 2^24 is its header alone (libpcap refuses it before reading its bytes).
fn pcap(magic: u32, snaplen: u32, linktype: u32, caplens: &[u32]) -> Vec<u8> {
    let header = if magic == MAGIC_KUZNETSOV { 24 } else { 16 };
    let mut bytes = pcap_file(false, magic, 2, 4, snaplen, linktype, header, &[]);
    for &caplen in caplens {
        if caplen >= HUGE {
            bytes.extend([0; 8]);
            bytes.extend(caplen.to_le_bytes());
            bytes.extend(caplen.to_le_bytes());
            bytes.extend(vec![0; header - 16]);
        } else {
            let record =
                pcap_file(false, magic, 2, 4, 0, 1, header, &[Rec::new(data(caplen as usize))]);
            bytes.extend(&record[24..]);
        }
    }
    bytes
}

/// A pcapng file: one interface with this snapshot length, enhanced packet blocks with these
/// captured lengths; one above 2^24 is its block's type and length alone.
fn pcapng(snaplen: u32, linktype: u16, caplens: &[u32]) -> Vec<u8> {
    let mut n = Ng::new(false);
    n.shb().idb(linktype, snaplen, &[]);
    for &caplen in caplens {
        if caplen >= HUGE {
            n.bytes.extend(6u32.to_le_bytes());
            n.bytes.extend((32 + caplen).to_le_bytes());
        } else {
            n.epb(0, &Rec::new(data(caplen as usize)), &[]);
        }
    }
    n.bytes
}

fn whole(caplens: &[u32]) -> Vec<(usize, u32)> {
    caplens.iter().map(|&c| (c as usize, c)).collect()
}

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // The header's snapshot length: kept from 1 to INT_MAX, the link type's maximum otherwise.
    for (snaplen, kept) in [
        (0, 262_144),
        (65_535, 65_535),
        (262_144, 262_144),
        (262_145, 262_145),
        (300_000, 300_000),
        (INT_MAX, INT_MAX),
        (1 << 31, 262_144),
        (u32::MAX, 262_144),
    ] {
        for (format, bytes) in [
            ("pcap", pcap(MAGIC_MICRO, snaplen, 1, &[100])),
            ("pcapng", pcapng(snaplen, 1, &[100])),
        ] {
            cases.push(Case {
                name: format!("{format} header snaplen {snaplen}"),
                bytes,
                snaplen: kept,
                packets: whole(&[100]),
                refused: None,
            });
        }
    }
    let snaplen_of =
        |c: u32, s: u32| format!("invalid packet capture length {c}, bigger than snaplen of {s}");
    let maximum_of =
        |c: u32| format!("invalid packet capture length {c}, bigger than maximum of 262144");
    // pcap: a captured length above the snapshot length is cut to it up to the link type's
    // maximum; above that maximum the record is refused, naming the snapshot length when the
    // captured length is above it too.
    let p = |c: u32, s: u32| Some((2, PCAP_SECOND, snaplen_of(c, s)));
    let pm = |c: u32| Some((2, PCAP_SECOND, maximum_of(c)));
    let pcap_records: Vec<Row> = vec![
        (1000, 1000, whole(&[100, 1000, 100]), None),
        (1000, 2000, vec![(100, 100), (1000, 2000), (100, 100)], None),
        (262_144, 262_144, whole(&[100, 262_144, 100]), None),
        (262_145, 262_145, whole(&[100]), pm(262_145)),
        (300_000, 280_000, whole(&[100]), pm(280_000)),
        (65_535, 280_000, whole(&[100]), p(280_000, 65_535)),
        (0, 280_000, whole(&[100]), p(280_000, 262_144)),
        (300_000, HUGE, whole(&[100]), p(HUGE, 300_000)),
        (INT_MAX, HUGE, whole(&[100]), pm(HUGE)),
        (u32::MAX, HUGE, whole(&[100]), p(HUGE, 262_144)),
    ];
    for (snaplen, caplen, packets, refused) in pcap_records {
        cases.push(Case {
            name: format!("pcap snaplen {snaplen}, record of {caplen}"),
            bytes: pcap(MAGIC_MICRO, snaplen, 1, &[100, caplen, 100]),
            snaplen: if snaplen == 0 || snaplen > INT_MAX { 262_144 } else { snaplen },
            packets,
            refused,
        });
    }
    // pcapng: a captured length above the snapshot length is refused, and one above the link
    // type's maximum is read when the snapshot length allows it; a block above 16 MiB is
    // refused at its length.
    let n = |c: u32, s: u32| Some((2, NG_SECOND, snaplen_of(c, s)));
    let block = Some((2, NG_SECOND, "pcapng block size 16777256 > maximum 16777216".to_string()));
    let ng_records: Vec<Row> = vec![
        (1000, 1000, whole(&[100, 1000, 100]), None),
        (1000, 2000, whole(&[100]), n(2000, 1000)),
        (262_144, 262_144, whole(&[100, 262_144, 100]), None),
        (262_145, 262_145, whole(&[100, 262_145, 100]), None),
        (300_000, 280_000, whole(&[100, 280_000, 100]), None),
        (65_535, 280_000, whole(&[100]), n(280_000, 65_535)),
        (0, 280_000, whole(&[100]), n(280_000, 262_144)),
        (300_000, HUGE, whole(&[100]), block.clone()),
        (INT_MAX, HUGE, whole(&[100]), block),
    ];
    for (snaplen, caplen, packets, refused) in ng_records {
        cases.push(Case {
            name: format!("pcapng snaplen {snaplen}, record of {caplen}"),
            bytes: pcapng(snaplen, 1, &[100, caplen, 100]),
            snaplen: if snaplen == 0 { 262_144 } else { snaplen },
            packets,
            refused,
        });
    }
    // The modified format on Ethernet: 14 more, up to INT_MAX; its records are still refused
    // above the link type's maximum.
    for (snaplen, kept) in [
        (0, 262_158),
        (262_144, 262_158),
        (INT_MAX - 14, INT_MAX),
        (INT_MAX - 13, INT_MAX),
        (INT_MAX, INT_MAX),
        (u32::MAX, 262_158),
    ] {
        cases.push(Case {
            name: format!("modified pcap snaplen {snaplen}, record of 262150"),
            bytes: pcap(MAGIC_KUZNETSOV, snaplen, 1, &[100, 262_150, 100]),
            snaplen: kept,
            packets: whole(&[100]),
            refused: Some((2, KUZ_SECOND, maximum_of(262_150))),
        });
    }
    // USBPcap (249): its maximum is 1 MiB, so a pcap record between the snapshot length and
    // 1 MiB is cut, and 0 or above INT_MAX reads as 1 MiB in both formats.
    cases.push(Case {
        name: "USBPcap pcap snaplen 300000, record of 500000".into(),
        bytes: pcap(MAGIC_MICRO, 300_000, 249, &[100, 500_000, 100]),
        snaplen: 300_000,
        packets: vec![(100, 100), (300_000, 500_000), (100, 100)],
        refused: None,
    });
    for snaplen in [0, 1 << 31] {
        cases.push(Case {
            name: format!("USBPcap pcap snaplen {snaplen}"),
            bytes: pcap(MAGIC_MICRO, snaplen, 249, &[100]),
            snaplen: 1 << 20,
            packets: whole(&[100]),
            refused: None,
        });
        cases.push(Case {
            name: format!("USBPcap pcapng snaplen {snaplen}"),
            bytes: pcapng(snaplen, 249, &[100]),
            snaplen: 1 << 20,
            packets: whole(&[100]),
            refused: None,
        });
    }
    cases
}
