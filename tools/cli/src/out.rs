//! Standard output for every command: the one place that writes to it, so no output can
//! panic (`println!` panics when the reader has gone away or the disk is full).
//!
//! A closed pipe (`weir ... | head -1`) means the reader has what it wanted: the command
//! ends quietly with status 0, as tcpdump does. Any other write error (a full disk,
//! `> /dev/full`) is an error naming standard output, with status 1, so that nothing lost is
//! presented as complete.

use std::io::{ErrorKind, Write};

/// Writes `text` to standard output and flushes it.
pub fn text(text: &str) -> Result<(), String> {
    bytes(text.as_bytes())
}

/// Writes `text` and a newline.
pub fn line(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(error)
}

/// Writes raw bytes to standard output and flushes them.
pub fn bytes(bytes: &[u8]) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush()).map_err(error)
}

/// What a failed write to standard output means: a closed pipe ends the process with status
/// 0 here (nothing is pending that could be lost: commands that write files never write them
/// through standard output); any other error becomes the command's error.
pub fn error(e: std::io::Error) -> String {
    if e.kind() == ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    format!("standard output: {e}")
}
