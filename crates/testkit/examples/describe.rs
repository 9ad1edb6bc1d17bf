//! Prints what the corpus generator builds for a seed, one line per packet, so a failing
//! differential test's packet index can be read as a protocol stack.
//!
//! `cargo run -p weir-testkit --example describe -- SEED COUNT` (defaults: 1 200);
//! `... -- edge` lists the edge cases instead.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let packets = if args.first().map(String::as_str) == Some("edge") {
        weir_testkit::edge_cases()
    } else {
        let seed = args.first().map_or(Ok(1), |text| text.parse::<u64>());
        let count = args.get(1).map_or(Ok(200), |text| text.parse::<usize>());
        match (seed, count) {
            (Ok(seed), Ok(count)) => weir_testkit::corpus(seed, count),
            _ => {
                eprintln!("usage: describe [SEED [COUNT]] | describe edge");
                return ExitCode::FAILURE;
            }
        }
    };
    for (index, packet) in packets.iter().enumerate() {
        println!("{index:5} {:5}/{:<5} {}", packet.data.len(), packet.wire_len, packet.description);
    }
    ExitCode::SUCCESS
}
