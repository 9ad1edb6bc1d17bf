//! weir-testkit: deterministic packet corpora and pcap helpers for weir's differential tests.
//!
//! The classic BPF and pflang test suites compare weir with libpcap and tcpdump over many
//! packets; they need packets that exercise every header a filter can look at, the same ones
//! on every run, and a way to hand them to tcpdump. This crate provides [`corpus`] (seeded,
//! varied traffic), [`edge_cases`] (hand-written boundary frames) and pcap reading/writing,
//! plus [`pflang_gen`] (random filter expressions and a shrinker) for the pflang oracle tests,
//! [`filter_gen`] (random filter IR and packets) for the emitter and native-code tests,
//! [`ebpf_gen`] (random eBPF programs) for the engines' property tests, and
//! [`SplitMix64`], the one pseudo-random source of all of them.
//! The oracles themselves (libpcap, the kernel's `bpf()`) are `weir-sys`'s.
//! It is test support only and is never published.

mod corpus;
pub mod ebpf_gen;
mod edge;
pub mod filter_gen;
pub mod kernel_object;
mod linkedge;
mod netedge;
mod pcap;
pub mod pflang_gen;
pub mod reframe;
pub mod relink;
mod rng;
mod scratch;
mod veth;
pub mod wire;

pub use corpus::corpus;
pub use edge::edge_cases;
pub use linkedge::link_edge_cases;
pub use netedge::net_edge_cases;
pub use pcap::{
    read_capture, read_pcap, write_pcap, write_pcap_stream, Capture, LINKTYPE_ETHERNET,
};
pub use relink::relink;
pub use rng::SplitMix64;
pub use scratch::Scratch;
pub use veth::VethLab;

/// One captured packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The captured bytes, starting with the link-layer header.
    pub data: Vec<u8>,
    /// The packet's length on the wire; never less than `data.len()`, larger when the
    /// record was cut short by the capture.
    pub wire_len: u32,
    /// Capture time, seconds since the Unix epoch.
    pub ts_sec: u32,
    /// Capture time, microseconds within the second.
    pub ts_usec: u32,
    /// What the generator built (or why the edge case exists); not stored in pcap files.
    pub description: String,
}

impl Packet {
    /// Whether the record holds fewer bytes than the packet had on the wire.
    pub fn is_truncated(&self) -> bool {
        u32::try_from(self.data.len()).map_or(true, |len| len < self.wire_len)
    }
}

/// The seed of the committed sample capture, testdata/captures/sample.pcap.
pub const SAMPLE_SEED: u64 = 1;

/// The number of packets in the committed sample capture.
pub const SAMPLE_COUNT: usize = 200;

/// Where the committed sample capture lives: testdata/captures/sample.pcap at the root of
/// the workspace.
pub fn sample_capture_path() -> std::path::PathBuf {
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/testkit -> the workspace root.
    let root = crate_dir.ancestors().nth(2).unwrap_or(crate_dir);
    root.join("testdata/captures/sample.pcap")
}

/// weir's conformance corpus (testdata/conformance) as programs, for engine tests that
/// judge the programs themselves (the verifier's soundness test, the JIT's facts test):
/// every `.data` case (read by the one parser, `weir_program::data`) whose program
/// assembles or decodes, by name, with its input memory. Programs are not validated:
/// the callers prove or refuse them.
pub fn conformance_programs() -> Vec<(String, weir_program::Program, Vec<u8>)> {
    use weir_program::data::{read_dir, Source};
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = crate_dir.ancestors().nth(2).unwrap_or(crate_dir).join("testdata/conformance");
    let cases = read_dir(&dir).unwrap_or_else(|e| panic!("the conformance corpus: {e}"));
    let mut out = Vec::new();
    for case in cases {
        let insns = match &case.source {
            Source::Asm(asm) => {
                weir_isa::asm::assemble_suite(asm.as_str()).ok().map(|(insns, _)| insns)
            }
            Source::Raw(words) => {
                let slots: Vec<_> =
                    words.iter().map(|w| weir_isa::ebpf::RawInsn::from_u64(*w)).collect();
                weir_isa::ebpf::decode(&slots).ok()
            }
        };
        if let Some(insns) = insns {
            out.push((case.name, weir_program::Program::from_insns(insns), case.mem));
        }
    }
    out
}
