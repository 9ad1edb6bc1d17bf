//! Output files, treated as tcpdump `-w` and coreutils treat them: no output may destroy a
//! file that is not a regular file, a link, an owner or a mode.
//!
//! [`OutputFile::create`] looks at what the destination is and writes to it accordingly:
//!
//! | destination | what happens |
//! | --- | --- |
//! | `-` | standard output |
//! | a symbolic link (also a dangling one) | followed, link by link, to its target, which is then treated by this table (a dangling link's target is created); the link stays |
//! | a character or block device, a FIFO, a socket | opened for writing and written through, never replaced (`/dev/null` stays a device) |
//! | a regular file with one link | replaced atomically: a temporary file in the target's own directory, given the file's mode and (as root) its owner and group before any data, written, fsynced and renamed over the target by [`finish`](OutputFile::finish) |
//! | a regular file with several hard links | written in place (opened for writing, truncated): the other names keep pointing at it and see the new content. Replacing would break the links, which is worse than the cost of writing in place: an error midway leaves that file half-written, as `cp` and tcpdump would |
//! | nothing (or a dangling link's target) | created as `File::create` creates (mode 0666 minus the umask), through a temporary file renamed into place |
//! | a directory | an error |
//!
//! A regular file the process may not write (a read-only file, as File::create would find)
//! is refused rather than replaced; a file it may write in a directory where it may not
//! create the temporary file is written in place, as tcpdump would. A name that only the kernel can follow (`/dev/stdout`
//! when standard output is a regular file: `/proc/self/fd/1`) is written in place through
//! that name.
//!
//! A temporary file never outlives the writer: [`finish`](OutputFile::finish) renames it,
//! dropping an unfinished writer (an error, a panic) removes it, and SIGINT, SIGTERM or
//! SIGHUP remove it through `weir_sys::cleanup` before ending the process by the signal.
//!
//! [`same_file`] is the check a command makes first, before it creates an output: an output
//! that is one of its inputs (after following links) would be destroyed before it is read.
//!
//! ```no_run
//! use std::io::Write;
//! use weir_runtime::output::{same_file, OutputFile};
//! # fn main() -> std::io::Result<()> {
//! let (input, dest) = ("in.pcap".as_ref(), "out.pcap".as_ref());
//! assert!(!same_file(dest, input), "refuse before anything is written");
//! let mut out = OutputFile::create(dest)?;
//! out.write_all(b"...")?;
//! out.finish()?; // now, and only now, out.pcap holds the new bytes
//! # Ok(())
//! # }
//! ```

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Stdout, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use weir_sys::cleanup;

/// Keeps a path registered with [`remove_on_signal`].
pub use weir_sys::cleanup::Guard as SignalGuard;

/// Registers `path` (a file; or a directory, removed once the registered files in it are)
/// for removal if SIGINT, SIGTERM or SIGHUP ends the process before the guard is dropped:
/// the temporary files' mechanism, for a caller's own scratch files (`weir filter --jobs`'
/// parts). The guard never removes anything itself.
pub fn remove_on_signal(path: &Path) -> io::Result<SignalGuard> {
    cleanup::register(path)
}

/// How many symbolic links are followed before giving up (Linux's MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// What an [`OutputFile`] writes to, decided when it is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// `-`.
    Stdout,
    /// A character or block device, written through.
    Device,
    /// A FIFO, written through.
    Fifo,
    /// A socket, written through (Linux refuses to open one: the error says so).
    Socket,
    /// A regular file with several hard links, reachable only through a `/proc` link, or
    /// in a directory where no temporary file can be made: truncated and written in place.
    InPlace,
    /// An existing regular file, replaced by a renamed temporary file.
    Replace,
    /// A new file, created by renaming a temporary file.
    New,
}

enum Target {
    Stdout(Stdout),
    Direct(File),
    Temporary {
        file: File,
        temp: PathBuf,
        target: PathBuf,
        /// Declared last: dropped after the temporary file is renamed or removed.
        _guard: cleanup::Guard,
    },
}

/// A destination being written; see the [module documentation](self) for what each kind of
/// destination gets. Unbuffered: wrap it in a `BufWriter` for small writes.
pub struct OutputFile {
    target: Option<Target>,
    kind: OutputKind,
}

/// True when `output` and `input` name the same file (the same device and inode, after
/// following symbolic links). `-` (standard input or output) never clashes, nor does a path
/// that does not exist or cannot be looked at (opening it reports that).
pub fn same_file(output: &Path, input: &Path) -> bool {
    if output.as_os_str() == "-" || input.as_os_str() == "-" {
        return false;
    }
    match (std::fs::metadata(output), std::fs::metadata(input)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Follows `dest` link by link to the name that is not a link (which may not exist: a
/// dangling link's target). Relative targets are relative to the link's directory.
fn resolve(dest: &Path) -> io::Result<PathBuf> {
    let mut path = dest.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(path),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!("more than {MAX_LINKS} levels of symbolic links")))
}

/// Temporary names differ per process and per file, so parallel runs never collide.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// `.NAME.weir-PID-N.tmp` in `target`'s directory.
fn temp_path(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let serial = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
    let temp = format!(".{name}.weir-{}-{serial}.tmp", std::process::id());
    match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(temp),
        _ => PathBuf::from(temp),
    }
}

/// Whether `path` names a file that the kernel follows to `meta`'s file.
fn names(path: &Path, meta: &Metadata) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
}

impl OutputFile {
    /// Opens `dest` for writing as the [module documentation](self) describes. Nothing
    /// under a regular file's name changes until [`finish`](Self::finish).
    pub fn create(dest: &Path) -> io::Result<OutputFile> {
        if dest.as_os_str() == "-" {
            return Ok(OutputFile {
                target: Some(Target::Stdout(io::stdout())),
                kind: OutputKind::Stdout,
            });
        }
        let followed = match std::fs::metadata(dest) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let Some(meta) = followed else {
            // Nothing there, or a dangling link: create its target.
            return Self::temporary(&resolve(dest)?, None);
        };
        let file_type = meta.file_type();
        let through = if file_type.is_char_device() || file_type.is_block_device() {
            Some(OutputKind::Device)
        } else if file_type.is_fifo() {
            Some(OutputKind::Fifo)
        } else if file_type.is_socket() {
            Some(OutputKind::Socket)
        } else {
            None
        };
        if let Some(kind) = through {
            // Opened, never created or truncated: a device or FIFO stays what it is.
            let file = OpenOptions::new().write(true).open(dest).map_err(|e| {
                if kind == OutputKind::Socket {
                    io::Error::new(e.kind(), format!("is a socket, which cannot be opened: {e}"))
                } else {
                    e
                }
            })?;
            return Ok(OutputFile { target: Some(Target::Direct(file)), kind });
        }
        if file_type.is_dir() {
            return Err(io::Error::other("is a directory"));
        }
        let target = resolve(dest)?;
        if meta.nlink() > 1 || !names(&target, &meta) {
            // Hard links keep pointing at the file; a /proc link has no name to rename to.
            let named = if names(&target, &meta) { target.as_path() } else { dest };
            let file = OpenOptions::new().write(true).truncate(true).open(named)?;
            return Ok(OutputFile {
                target: Some(Target::Direct(file)),
                kind: OutputKind::InPlace,
            });
        }
        // Refuse what File::create would refuse (a file we may not write), rather than
        // replace it. Opening without truncation changes nothing.
        drop(OpenOptions::new().write(true).open(&target)?);
        match Self::temporary(&target, Some(&meta)) {
            // A file we may write in a directory we may not: tcpdump would write it, so it
            // is written in place (not atomically) rather than refused.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                let file = OpenOptions::new().write(true).truncate(true).open(&target)?;
                Ok(OutputFile { target: Some(Target::Direct(file)), kind: OutputKind::InPlace })
            }
            other => other,
        }
    }

    /// A temporary file beside `target`, registered for removal on a signal. For an
    /// existing file (`like`), it gets that file's owner (as root), group (when allowed)
    /// and mode before any data is written.
    fn temporary(target: &Path, like: Option<&Metadata>) -> io::Result<OutputFile> {
        let temp = temp_path(target);
        // Registered before it exists: a signal between the two unlinks nothing.
        let guard = cleanup::register(&temp)?;
        // A new file gets File::create's mode (0666 minus the umask); a replacement starts
        // private and gets the old file's mode below.
        let mode = if like.is_some() { 0o600 } else { 0o666 };
        let file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp)?;
        let out = OutputFile {
            target: Some(Target::Temporary {
                file,
                temp,
                target: target.to_path_buf(),
                _guard: guard,
            }),
            kind: if like.is_some() { OutputKind::Replace } else { OutputKind::New },
        };
        if let (Some(like), Some(Target::Temporary { file, .. })) = (like, &out.target) {
            // Owner first: chown clears the set-user-ID and set-group-ID bits, chmod then
            // puts them back.
            if weir_sys::user::is_root() {
                std::os::unix::fs::fchown(file, Some(like.uid()), Some(like.gid()))?;
            } else if file.metadata()?.gid() != like.gid() {
                // A user may give a file to a group they belong to; otherwise the new file
                // keeps the user's group, as any file the user writes would.
                let _ = std::os::unix::fs::fchown(file, None, Some(like.gid()));
            }
            file.set_permissions(std::fs::Permissions::from_mode(like.mode() & 0o7777))?;
        }
        // On an error above, dropping `out` removes the temporary file.
        Ok(out)
    }

    /// What this output writes to.
    pub fn kind(&self) -> OutputKind {
        self.kind
    }

    /// Completes the output: flushes it and renames a temporary file over its target. A file
    /// that replaces an existing one (or is written in place) is synced to disk first, so a
    /// crash never trades the old contents for an unwritten new file; a new file is renamed
    /// without a sync, as `tcpdump -w` writes without one (the sync of a large capture
    /// costs more than the whole filter run). On an error the temporary file is removed and
    /// the target is as it was.
    pub fn finish(mut self) -> io::Result<()> {
        match self.target.take() {
            None => Ok(()),
            Some(Target::Stdout(mut out)) => out.flush(),
            Some(Target::Direct(mut file)) => {
                file.flush()?;
                if self.kind == OutputKind::InPlace {
                    file.sync_all()?;
                }
                Ok(())
            }
            Some(Target::Temporary { file, temp, target, _guard }) => {
                let replaces = self.kind == OutputKind::Replace;
                let synced = if replaces { file.sync_all() } else { Ok(()) };
                let done = synced.and_then(|()| std::fs::rename(&temp, &target));
                drop(file);
                if let Err(e) = done {
                    let _ = std::fs::remove_file(&temp);
                    return Err(e);
                }
                // Renamed: nothing is left for a signal to remove.
                drop(_guard);
                // The rename is durable once the directory is synced; a directory that
                // cannot be opened or synced does not make the output wrong.
                let dir = match target.parent() {
                    Some(dir) if !dir.as_os_str().is_empty() => dir,
                    _ => Path::new("."),
                };
                if replaces {
                    if let Ok(dir) = File::open(dir) {
                        let _ = dir.sync_all();
                    }
                }
                Ok(())
            }
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.target {
            Some(Target::Stdout(out)) => out.write(buf),
            Some(Target::Direct(file)) | Some(Target::Temporary { file, .. }) => file.write(buf),
            None => Err(io::Error::other("the output is already finished")),
        }
    }

    /// One `writev(2)` for a writer's runs of records ([`crate::capture::CaptureWriter`]).
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match &mut self.target {
            Some(Target::Stdout(out)) => out.write_vectored(bufs),
            Some(Target::Direct(file)) | Some(Target::Temporary { file, .. }) => {
                file.write_vectored(bufs)
            }
            None => Err(io::Error::other("the output is already finished")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.target {
            Some(Target::Stdout(out)) => out.flush(),
            Some(Target::Direct(file)) | Some(Target::Temporary { file, .. }) => file.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // Not finished: the temporary file must not outlive the writer.
        if let Some(Target::Temporary { file, temp, _guard, .. }) = self.target.take() {
            drop(file);
            let _ = std::fs::remove_file(&temp);
            drop(_guard);
        }
    }
}

#[cfg(test)]
mod tests;
