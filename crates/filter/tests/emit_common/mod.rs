//! What the emitter tests share: the seeded generator of random filters
//! ([`weir_testkit::filter_gen`], which reaches every IR variant and the boundary constants each
//! emitter special-cases), and packets for them: random ones plus the testkit's corpus and
//! edge cases. Used by `tests/emit.rs` (weir's interpreters and libpcap) and
//! `tests/emit_kernel.rs` (the Linux kernel).

// Each test binary uses part of this module.
#![allow(dead_code)]

pub use weir_testkit::filter_gen::{ipv4_header_length, FilterGen};
use weir_testkit::Packet;

/// Random packets (short, of the generator's byte alphabet, some cut short of their wire
/// length) and the testkit's corpus and edge cases, which carry real headers.
pub fn packets(seed: u64, random: usize, corpus: usize) -> Vec<Packet> {
    let mut out: Vec<Packet> = weir_testkit::filter_gen::packets(seed, random)
        .into_iter()
        .enumerate()
        .map(|(i, p)| Packet {
            data: p.data,
            wire_len: p.wire_len,
            ts_sec: 0,
            ts_usec: 0,
            description: format!("random {i}"),
        })
        .collect();
    out.extend(weir_testkit::edge_cases());
    out.extend(weir_testkit::corpus(seed ^ 0x5eed, corpus));
    out
}

/// A packet as hex, for failure messages.
pub fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}
