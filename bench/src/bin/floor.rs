//! `weir-bench-floor`: the floor reader of `weir-bench e2e` (see `weir_bench::floor`): the
//! least a program can do to count or copy the packets of a pcap file that one of a few
//! known expressions keeps. Its command line is the part of `weir filter`'s that the
//! benchmark uses:
//!
//! ```text
//! weir-bench-floor -r FILE --count EXPRESSION...     # prints the number
//! weir-bench-floor -r FILE -w OUT EXPRESSION...      # copies the kept records to OUT
//! ```
//!
//! Exit status 0, 1 for a damaged file or a failed write, 2 for a usage error (an
//! expression the floor has no hand-written filter for among them).

use std::fs::File;
use std::process::ExitCode;

use weir_bench::floor;

const USAGE: &str = "usage: weir-bench-floor -r FILE (--count | -w OUT) [EXPRESSION...]";

fn main() -> ExitCode {
    let (mut read, mut write, mut count, mut words) = (None, None, false, Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-r" => read = args.next(),
            "-w" => write = args.next(),
            "--count" => count = true,
            "-h" | "--help" => {
                println!("{USAGE}\nexpressions: {:?}", floor::COUNT_EXPRESSIONS);
                return ExitCode::SUCCESS;
            }
            _ => words.push(arg),
        }
    }
    let (Some(read), true) = (read, count != write.is_some()) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let expression = words.join(" ");
    let Some(filter) = floor::find(&expression) else {
        eprintln!("weir-bench-floor: no hand-written filter for `{expression}`");
        return ExitCode::from(2);
    };
    match run(&read, write.as_deref(), filter) {
        Ok(kept) => {
            if count {
                println!("{kept}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("weir-bench-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(read: &str, write: Option<&str>, filter: floor::Filter) -> Result<u64, String> {
    let mut input = File::open(read).map_err(|e| format!("{read}: {e}"))?;
    let mut output = match write {
        Some(path) => Some(File::create(path).map_err(|e| format!("{path}: {e}"))?),
        None => None,
    };
    let out = output.as_mut().map(|f| f as &mut dyn std::io::Write);
    floor::walk(&mut input, floor::CHUNK, filter, out).map_err(|e| format!("{read}: {e}"))
}
