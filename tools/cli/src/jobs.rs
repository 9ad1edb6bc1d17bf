//! Several captures in one command (`weir filter` and `weir run` with several `-r`, or a
//! directory): the files are processed on `--jobs` threads, one file per thread at a
//! time, and their results combined.
//!
//! - **Counts** are summed: nothing is kept per file but the numbers.
//! - **Packets** (printed lines or a `-w` capture) come out in timestamp order across the
//!   files, as `mergecap` merges: each thread writes its file's selected packets to a
//!   temporary capture (in the input's format, so timestamps keep their resolution), then
//!   one k-way merge streams from those parts to the output. Memory is bounded by the
//!   number of parts, not their size: one buffered packet and a [`PART_CHUNK`]-byte read
//!   buffer per part. Ties keep the order of the inputs (the earlier file first, then
//!   record order); mergecap 4.0 orders ties by its queue and may put a later file's
//!   packet first. The parts take disk space up to the size of the selection; they live
//!   in a scratch directory beside the `-w` file (same filesystem as the result) or in the
//!   system's temporary directory, removed on the way out: by `Drop` on errors and panics,
//!   by the signal handler (`weir_runtime::output::remove_on_signal`) when SIGINT, SIGTERM or SIGHUP ends the
//!   process (the directory and every part are registered with it, up to its `CAPACITY`).
//!
//! A directory given to `-r` stands for its regular files, sorted by name (not recursive).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use weir_runtime::capture::CaptureReader;
use weir_runtime::source::{Packet, PacketSource};

/// Read buffer of each part during the merge: k parts cost k times this.
pub const PART_CHUNK: usize = 64 << 10;

/// Threads when `--jobs` is not given: every core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Checks a `--jobs` value.
pub fn check_jobs(jobs: usize) -> Result<usize, String> {
    if jobs == 0 || jobs > 1024 {
        return Err(format!("--jobs {jobs}: 1 to 1024 threads"));
    }
    Ok(jobs)
}

/// The capture files several `-r` name: each file as given, a directory's regular files
/// sorted by name. Standard input (`-`) reads one stream and cannot be one of several.
pub fn inputs(reads: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for read in reads {
        if read.as_os_str() == "-" {
            if reads.len() > 1 {
                return Err("-r -: standard input cannot be one of several inputs".into());
            }
            files.push(read.clone());
            continue;
        }
        if read.is_dir() {
            let entries =
                std::fs::read_dir(read).map_err(|e| format!("{}: {e}", read.display()))?;
            let mut found = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| format!("{}: {e}", read.display()))?;
                if entry.path().is_file() {
                    found.push(entry.path());
                }
            }
            if found.is_empty() {
                return Err(format!("{}: the directory holds no file", read.display()));
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(read.clone());
        }
    }
    Ok(files)
}

/// Runs `work(state, i, file)` for every file on `jobs` threads (each takes the next file
/// when it is done with one; thread `t` makes its `state` once with `init(t)`); the
/// results in file order.
pub fn each_file<S, T: Send>(
    files: &[PathBuf],
    jobs: usize,
    init: impl Fn(usize) -> S + Sync,
    work: impl Fn(&mut S, usize, &Path) -> T + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let threads = jobs.clamp(1, files.len().max(1));
    let mut results: Vec<(usize, T)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (init, work, next) = (&init, &work, &next);
                scope.spawn(move || {
                    let mut state = init(thread);
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(file) = files.get(i) else { break };
                        done.push((i, work(&mut state, i, file)));
                    }
                    done
                })
            })
            .collect();
        // A worker that panicked has already printed why; its files have no result and
        // the caller sees fewer results than files.
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, t)| t).collect()
}

/// A directory for the per-file parts, removed (with what is in it) when dropped, or by
/// the signal handler when a signal ends the process.
pub struct Scratch {
    dir: PathBuf,
    /// The directory's and the parts' registrations with the signal handler (dropped
    /// after `Drop::drop` has removed them).
    _signals: Vec<weir_runtime::output::SignalGuard>,
}

impl Scratch {
    /// A new directory for `parts` parts in `near`'s directory (for `-w FILE`; a bare
    /// relative name such as `-w out.pcap` is in the current directory), else in the
    /// system's temporary directory.
    pub fn new(near: Option<&Path>, parts: usize) -> Result<Scratch, String> {
        let base = near
            .filter(|p| p.as_os_str() != "-")
            .and_then(|p| p.parent())
            // `Path::new("out.pcap").parent()` is `Some("")`: the current directory, where
            // the output goes, not a reason to fall back to /tmp (another filesystem,
            // perhaps a small tmpfs, and a copy instead of a rename's neighbourhood).
            .map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })
            .filter(|p| p.is_dir())
            .map_or_else(std::env::temp_dir, Path::to_path_buf);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = base.join(format!(".weir-parts-{}-{stamp}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // Registered before any part exists; past the handler's capacity (thousands of
        // inputs) the remaining parts go unregistered: a signal then leaves them behind.
        let mut signals = Vec::with_capacity(parts + 1);
        for path in std::iter::once(dir.clone()).chain((0..parts).map(|i| part_in(&dir, i))) {
            match weir_runtime::output::remove_on_signal(&path) {
                Ok(guard) => signals.push(guard),
                Err(_) => break,
            }
        }
        Ok(Scratch { dir, _signals: signals })
    }

    /// Where file `i`'s selected packets go.
    pub fn part(&self, i: usize) -> PathBuf {
        part_in(&self.dir, i)
    }
}

fn part_in(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("{i}.part"))
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A part's next packet, copied out of its reader (a packet view borrows its reader, and
/// the merge must hold one from every part at once).
#[derive(Default)]
struct Head {
    data: Vec<u8>,
    wire_len: u32,
    ts_sec: u64,
    ts_nsec: u32,
    linktype: u32,
    interface: u32,
    index: u64,
}

impl Head {
    fn packet(&self) -> Packet<'_> {
        Packet {
            index: self.index,
            data: &self.data,
            wire_len: self.wire_len,
            ts_sec: self.ts_sec,
            ts_nsec: self.ts_nsec,
            linktype: self.linktype,
            interface: self.interface,
            offset: 0,
            stored: None,
        }
    }
}

/// Reads part `part`'s next packet into `head`; false at its end.
fn advance(
    reader: &mut CaptureReader<std::fs::File>,
    head: &mut Head,
    name: &Path,
) -> Result<bool, String> {
    match reader.next_packet() {
        None => Ok(false),
        Some(Err(e)) => Err(format!("{} (a part being merged): {e}", name.display())),
        Some(Ok(p)) => {
            head.data.clear();
            head.data.extend_from_slice(p.data);
            head.wire_len = p.wire_len;
            head.ts_sec = p.ts_sec;
            head.ts_nsec = p.ts_nsec;
            head.linktype = p.linktype;
            head.interface = p.interface;
            head.index = p.index;
            Ok(true)
        }
    }
}

/// Streams the packets of `parts` to `emit` in timestamp order (ties: the earlier part,
/// then record order) until they end or `emit` returns false.
pub fn merge(
    parts: &[PathBuf],
    mut emit: impl FnMut(&Packet<'_>) -> Result<bool, String>,
) -> Result<(), String> {
    let mut readers = Vec::with_capacity(parts.len());
    for part in parts {
        let file = std::fs::File::open(part).map_err(|e| format!("{}: {e}", part.display()))?;
        let reader = CaptureReader::with_chunk_size(file, PART_CHUNK)
            .map_err(|e| format!("{}: {e}", part.display()))?;
        readers.push(reader.without_blocks());
    }
    let mut heads: Vec<Head> = parts.iter().map(|_| Head::default()).collect();
    let mut queue = BinaryHeap::with_capacity(parts.len());
    for (i, (reader, head)) in readers.iter_mut().zip(heads.iter_mut()).enumerate() {
        if advance(reader, head, &parts[i])? {
            queue.push(Reverse((head.ts_sec, head.ts_nsec, i)));
        }
    }
    while let Some(Reverse((_, _, i))) = queue.pop() {
        let (Some(reader), Some(head)) = (readers.get_mut(i), heads.get_mut(i)) else {
            return Err("internal: merge queue".into());
        };
        if !emit(&head.packet())? {
            return Ok(());
        }
        if advance(reader, head, &parts[i])? {
            queue.push(Reverse((head.ts_sec, head.ts_nsec, i)));
        }
    }
    Ok(())
}
