//! What every command-line test does the same way: run the binary, read its output as text,
//! find the repository's files, and skip (saying so) where an outside tool is missing.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs the `weir` binary under test with `args`.
pub fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir")).args(args).output().expect("weir runs")
}

/// Runs the `weir` binary with `args`, `stdin` written to its standard input.
pub fn weir_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir runs");
    // Fed from a thread: a command that writes while it reads (verdicts, packets) fills
    // its output pipe long before a large input is in, and writing all of stdin first
    // would wait on it for ever.
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let feed = std::thread::spawn(move || match input.write_all(&bytes) {
        // A command may stop reading early (an error, a count reached): what it did
        // with the input is in its output, which the test reads.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        done => done,
    });
    let out = child.wait_with_output().unwrap();
    feed.join().expect("the feeding thread ends").expect("stdin is written");
    out
}

/// Output bytes as text (lossy: a test compares it, never trusts it).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A scratch path as a command-line argument (scratch paths are UTF-8).
pub fn path(p: &Path) -> &str {
    p.to_str().expect("scratch paths are UTF-8")
}

/// A file of the repository, by its path from the root.
pub fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path).display().to_string()
}

/// The committed sample capture, testdata/captures/sample.pcap.
pub fn sample() -> String {
    weir_testkit::sample_capture_path().display().to_string()
}

/// Whether `tool` runs (`tool --version`); if not, prints the `SKIPPED` line for `test`.
pub fn have(tool: &str, test: &str) -> bool {
    match Command::new(tool).arg("--version").output() {
        Ok(out) if out.status.success() => true,
        _ => {
            println!("SKIPPED: {test}: {tool} is not installed");
            false
        }
    }
}

/// [`have`] for tcpdump, the oracle of the capture tests.
pub fn have_tcpdump(test: &str) -> bool {
    have("tcpdump", test)
}
