//! Regenerates testdata/captures/sample.pcap: `corpus(1, 200)` as an Ethernet pcap file.
//!
//! Run `cargo run -p weir-testkit --example write-sample` after a change to the generator;
//! the `committed_sample_matches_the_generator` test fails until the file is regenerated.
//! An optional argument writes somewhere else instead.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let path = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(weir_testkit::sample_capture_path);
    let packets = weir_testkit::corpus(weir_testkit::SAMPLE_SEED, weir_testkit::SAMPLE_COUNT);
    match weir_testkit::write_pcap(&path, weir_testkit::LINKTYPE_ETHERNET, &packets) {
        Ok(()) => {
            println!("wrote {} packets to {}", packets.len(), path.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("write-sample: {}: {error}", path.display());
            ExitCode::FAILURE
        }
    }
}
