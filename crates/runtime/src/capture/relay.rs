//! Two threads taking turns over one capture file: each copies its own chunks out of the page
//! cache (`pread(2)`, [`FileExt::read_at`]) and then, in file order, walks and filters them.
//!
//! Why: on a page-cached capture the `read(2)` copy is most of a single-threaded reader's
//! time (about 41 of 55 ms for the benchmark's 386 MiB file). Here thread A copies chunk
//! `i + 1` while thread B walks chunk `i`, so the copies of the two threads overlap each
//! other's walking; and the thread that walks a chunk is the one that copied it, so its bytes
//! are still in that core's cache. Measured first: reader threads handing chunks to one
//! consumer (the consumer's cache then misses on every record) cost 1.7x the CPU for a 15%
//! shorter wall time. mmap would avoid the copy, but a file truncated while mapped kills the
//! process with SIGBUS, and weir-runtime has no `unsafe`.
//!
//! The consumer's state (the [`CaptureReader`] and the caller's) sits behind one mutex; the
//! thread whose chunk is next stages it in the reader's window and runs the caller's `turn`,
//! which reads packets while [`PacketSource::would_wait`] is false: the chunks' partial
//! records are joined exactly as with `read(2)`, so every packet, error and offset is the
//! same. Only pcap files are relayed (a pcapng block boundary can need more than the next
//! chunk to skip a block; those files are read by the calling thread, as standard input is).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Condvar, Mutex, PoisonError};

use super::{CaptureReader, Chunk, Input, HEADROOM};
use crate::source::PacketSource;

/// What `turn` says after the packets it could read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Give me the next chunk.
    More,
    /// Done (the capture ended, damage, a packet limit, a closed output, an error).
    Stop,
}

struct Baton<'r, T> {
    reader: &'r mut CaptureReader<Input>,
    state: &'r mut T,
    /// The chunk whose turn it is.
    next: u64,
    stop: bool,
}

/// The threads' shared part.
struct Shared<'r, T> {
    baton: Mutex<Baton<'r, T>>,
    turned: Condvar,
}

/// See [`CaptureReader::relay`].
pub(crate) fn run<T: Send>(
    reader: &mut CaptureReader<Input>,
    file: &File,
    start: u64,
    chunk: usize,
    state: &mut T,
    turn: &(dyn Fn(&mut CaptureReader<Input>, &mut T) -> Turn + Sync),
) {
    let shared = Shared {
        baton: Mutex::new(Baton { reader, state, next: 0, stop: false }),
        turned: Condvar::new(),
    };
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("weir-relay".into())
            .spawn_scoped(scope, || take_turns(&shared, file, start, chunk, 1, 2, turn));
        match spawned {
            Ok(_) => take_turns(&shared, file, start, chunk, 0, 2, turn),
            // No second thread: this one reads every chunk.
            Err(_) => take_turns(&shared, file, start, chunk, 0, 1, turn),
        }
    });
}

/// One thread: reads chunks `first`, `first + step`, …, each then handed to `turn` when the
/// chunks before it have been.
fn take_turns<T: Send>(
    shared: &Shared<'_, T>,
    file: &File,
    start: u64,
    chunk: usize,
    first: u64,
    step: u64,
    turn: &(dyn Fn(&mut CaptureReader<Input>, &mut T) -> Turn + Sync),
) {
    let size = HEADROOM.saturating_add(chunk);
    let mut spare: Option<Vec<u8>> = None;
    let mut index = first;
    loop {
        let mut buf = spare.take().unwrap_or_default();
        if buf.len() < size {
            buf.resize(size, 0);
        }
        let offset = start.saturating_add(index.saturating_mul(chunk as u64));
        let (len, error) = read_chunk(file, &mut buf, offset, chunk);
        let last = len < chunk || error.is_some();

        let mut baton = shared.baton.lock().unwrap_or_else(PoisonError::into_inner);
        while !baton.stop && baton.next != index {
            baton = shared.turned.wait(baton).unwrap_or_else(PoisonError::into_inner);
        }
        if baton.stop {
            shared.turned.notify_all();
            return;
        }
        let Baton { reader, state, .. } = &mut *baton;
        reader.window.stage(Chunk { buf, owner: first as usize, len, offset, error }, last);
        // A record longer than what is staged waits for the next chunk.
        let go_on = reader.would_wait() || turn(reader, state) == Turn::More;
        spare = reader.window.spare_of(first as usize);
        baton.next = baton.next.saturating_add(1);
        baton.stop = !go_on || last || baton.reader.done;
        drop(baton);
        shared.turned.notify_all();
        index = index.saturating_add(step);
    }
}

/// Fills `buf[HEADROOM..]` with up to `chunk` bytes at `offset`: the bytes read and the error
/// that stopped it short.
fn read_chunk(
    file: &File,
    buf: &mut [u8],
    offset: u64,
    chunk: usize,
) -> (usize, Option<io::Error>) {
    let mut len = 0;
    while len < chunk {
        let Some(space) = buf.get_mut(HEADROOM.saturating_add(len)..HEADROOM.saturating_add(chunk))
        else {
            break;
        };
        match file.read_at(space, offset.saturating_add(len as u64)) {
            Ok(0) => break,
            Ok(n) => len = len.saturating_add(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (len, Some(e)),
        }
    }
    (len, None)
}
