//! Temporary files that must not outlive the process, even when it is killed by SIGINT
//! (Ctrl-C), SIGTERM (`kill`) or SIGHUP (the terminal went away).
//!
//! Errors and panics remove a temporary file through its owner's `Drop`; a signal whose
//! default action ends the process runs no destructor. [`register`] records a path for the
//! signal handler and returns a [`Guard`]; while at least one guard is alive, this module's
//! handler is installed for the three signals. The handler unlinks every registered path
//! (`unlink` is async-signal-safe, and the paths are NUL-terminated C strings made before
//! the handler can see them), puts the default action back and raises the signal again, so
//! the process ends with the signal's status exactly as it would have without weir's
//! handler (as tcpdump's does). When the last guard goes, the previous dispositions come
//! back.
//!
//! A registered directory is removed too, after the files: the handler unlinks every
//! registered path, then `rmdir`s each (which removes only an empty directory, so register
//! the files in it as well; it then does both once more, for a file a thread renamed into
//! place meanwhile).
//!
//! A signal whose disposition is not the default (ignored, as `nohup` leaves SIGHUP and
//! a non-interactive shell leaves SIGINT for background jobs, or handled by someone else) is
//! left alone: it did not end the process before, and it does not now. The one exception is
//! a stop flag's SIGINT and SIGTERM (below): tcpdump sets its own handler for those two
//! whatever the process inherited (and keeps an ignored SIGHUP ignored, for `nohup`), so a
//! capture started in the background by a script still ends on `kill -INT`.
//!
//! A live capture is ended by Ctrl-C on purpose and must then finish cleanly (close its
//! output, print its statistics), as tcpdump does. [`stop_on_signal`] hands the handler a
//! flag: while its [`StopGuard`] is alive, the first SIGINT, SIGTERM or SIGHUP only sets
//! the flag, and the capture loop sees it and ends; a second signal, while the flag is
//! still set, does what the handler does without a flag (removes the registered files and
//! ends the process), so a capture that does not stop can still be interrupted.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! let temp = std::path::Path::new(".out.pcap.weir-1-0.tmp");
//! std::fs::write(temp, b"...")?;
//! let guard = weir_sys::cleanup::register(temp)?;
//! // ... a SIGTERM here removes the file and ends the process ...
//! std::fs::rename(temp, "out.pcap")?;
//! drop(guard); // forgets the path; it never removes or renames anything itself
//! # Ok(())
//! # }
//! ```

use std::ffi::{c_char, c_int, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The signals whose default action would leave a temporary file behind.
pub const SIGNALS: [c_int; 3] = [libc::SIGHUP, libc::SIGINT, libc::SIGTERM];

/// How many temporary files can be registered at once (`weir filter --jobs` registers a
/// part per input file).
pub const CAPACITY: usize = 4096;

/// The registered paths: null, or a pointer from `CString::into_raw`. The handler only
/// loads them.
static PATHS: [AtomicPtr<c_char>; CAPACITY] = [const { AtomicPtr::new(ptr::null_mut()) }; CAPACITY];

/// Handlers that have started. A path taken out of [`PATHS`] is freed only when none has:
/// a handler that started may still be reading it (it ends the process right after, so
/// the memory is then simply left alone).
static HANDLING: AtomicUsize = AtomicUsize::new(0);

/// The stop flag of [`stop_on_signal`]: null, or a pointer from `Arc::into_raw`.
static STOP: AtomicPtr<AtomicBool> = AtomicPtr::new(ptr::null_mut());

/// Handlers inside their stop-flag branch (which returns instead of ending the process).
static STOPPING: AtomicUsize = AtomicUsize::new(0);

/// Registration bookkeeping; never touched by the handler.
struct State {
    registered: usize,
    /// The signals whose handler is ours, with the action they had before.
    installed: Vec<(c_int, libc::sigaction)>,
    /// SIGINT or SIGTERM taken over from an ignored disposition while a stop flag is
    /// registered (see the module's documentation), with that action, put back when the
    /// flag's guard goes.
    forced: Vec<(c_int, libc::sigaction)>,
}

static STATE: Mutex<State> =
    Mutex::new(State { registered: 0, installed: Vec::new(), forced: Vec::new() });

/// The signals a stop flag takes over even when they are ignored, as tcpdump does.
const STOP_SIGNALS: [c_int; 2] = [libc::SIGINT, libc::SIGTERM];

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Keeps one path registered; dropping it forgets the path (and, with the last guard,
/// takes the handlers away). It never removes the file: its owner renames or removes it.
#[must_use = "the path is forgotten as soon as the guard is dropped"]
#[derive(Debug)]
pub struct Guard {
    slot: usize,
}

/// Registers `path` for removal if SIGINT, SIGTERM or SIGHUP ends the process before the
/// returned guard is dropped. A relative path is made absolute against the current
/// directory now. Fails only for a path with a NUL byte or when [`CAPACITY`] paths are
/// already registered.
pub fn register(path: &Path) -> io::Result<Guard> {
    let absolute = std::path::absolute(path)?;
    let c_path = CString::new(absolute.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    let raw = c_path.into_raw();
    let mut state = state();
    let free = PATHS.iter().position(|slot| {
        slot.compare_exchange(ptr::null_mut(), raw, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    });
    let Some(slot) = free else {
        drop(state);
        // SAFETY: `raw` came from `CString::into_raw` above and was stored nowhere.
        drop(unsafe { CString::from_raw(raw) });
        return Err(io::Error::other(format!(
            "more than {CAPACITY} temporary files at once; cannot register {}",
            absolute.display()
        )));
    };
    state.registered = state.registered.saturating_add(1);
    if state.registered == 1 {
        install(&mut state);
    }
    Ok(Guard { slot })
}

impl Drop for Guard {
    fn drop(&mut self) {
        let Some(slot) = PATHS.get(self.slot) else { return };
        let raw = slot.swap(ptr::null_mut(), Ordering::SeqCst);
        {
            let mut state = state();
            state.registered = state.registered.saturating_sub(1);
            if state.registered == 0 {
                restore(&mut state);
            }
        }
        // A handler increments HANDLING before it loads any slot. If none has by now, any
        // handler that starts later finds the slot empty (the swap came first), so nothing
        // else can be reading `raw`.
        if !raw.is_null() && HANDLING.load(Ordering::SeqCst) == 0 {
            // SAFETY: `raw` came from `CString::into_raw` in `register`, was taken out of
            // its slot by the swap above (so it is freed once), and no handler reads it (see
            // above).
            drop(unsafe { CString::from_raw(raw) });
        }
    }
}

/// Keeps a stop flag with the handler (see the module documentation); dropping it takes
/// the flag away (and, with no temporary file registered, the handlers).
#[must_use = "the flag is forgotten as soon as the guard is dropped"]
#[derive(Debug)]
pub struct StopGuard {
    _private: (),
}

/// Makes SIGINT, SIGTERM and SIGHUP set `flag` instead of ending the process, until the
/// guard is dropped. One flag at a time: fails when another guard is alive.
pub fn stop_on_signal(flag: Arc<AtomicBool>) -> io::Result<StopGuard> {
    let raw = Arc::into_raw(flag).cast_mut();
    let mut state = state();
    if STOP.compare_exchange(ptr::null_mut(), raw, Ordering::SeqCst, Ordering::SeqCst).is_err() {
        drop(state);
        // SAFETY: `raw` came from `Arc::into_raw` above and was stored nowhere.
        drop(unsafe { Arc::from_raw(raw) });
        return Err(io::Error::other("a stop flag is already registered"));
    }
    state.registered = state.registered.saturating_add(1);
    if state.registered == 1 {
        install(&mut state);
    }
    take_over_each(&STOP_SIGNALS, libc::SIG_IGN, &mut state.forced);
    Ok(StopGuard { _private: () })
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        // The signals that were ignored go back to ignored first: once the flag is gone
        // the handler would end the process on them.
        put_back(&mut state().forced);
        let raw = STOP.swap(ptr::null_mut(), Ordering::SeqCst);
        {
            let mut state = state();
            state.registered = state.registered.saturating_sub(1);
            if state.registered == 0 {
                restore(&mut state);
            }
        }
        // A handler that loaded the pointer before the swap is inside its stop branch
        // (STOPPING counts it) and leaves it soon: wait, then free. A handler interrupting
        // this thread finishes before the thread goes on, so this never waits on itself.
        while STOPPING.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        if !raw.is_null() {
            // SAFETY: `raw` came from `Arc::into_raw` in `stop_on_signal`, was taken out
            // of STOP by the swap (so it is released once), and no handler reads it now.
            drop(unsafe { Arc::from_raw(raw.cast_const()) });
        }
    }
}

/// Whether this module's handler is installed for `signal` now (for tests and
/// diagnostics).
pub fn handler_installed(signal: c_int) -> bool {
    let state = state();
    state.installed.iter().chain(&state.forced).any(|&(s, _)| s == signal)
}

/// The disposition a signal has now.
fn current(signal: c_int) -> Option<libc::sigaction> {
    // SAFETY: sigaction is plain data; all-zero is a valid value (SIG_DFL, no flags).
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only queries; `old` is a valid place for the answer.
    let rc = unsafe { libc::sigaction(signal, ptr::null(), &mut old) };
    (rc == 0).then_some(old)
}

/// Installs the handler for each signal that has the default action.
fn install(state: &mut State) {
    take_over_each(&SIGNALS, libc::SIG_DFL, &mut state.installed);
}

/// [`take_over`] each of `signals` whose action is now `disposition`, keeping in `taken`
/// each one taken with the action it had.
fn take_over_each(
    signals: &[c_int],
    disposition: libc::sighandler_t,
    taken: &mut Vec<(c_int, libc::sigaction)>,
) {
    for &signal in signals {
        match current(signal) {
            Some(old) if old.sa_sigaction == disposition => {}
            _ => continue,
        }
        if let Some(previous) = take_over(signal) {
            taken.push((signal, previous));
        }
    }
}

/// Makes [`on_signal`] the handler of `signal`; the action it had, or `None` when the
/// kernel refused.
fn take_over(signal: c_int) -> Option<libc::sigaction> {
    // SAFETY: all-zero is a valid sigaction (no flags, empty mask) before it is filled.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as extern "C" fn(c_int) as libc::sighandler_t;
    // SAFETY: `action.sa_mask` is a valid sigset_t to initialise and extend.
    unsafe {
        libc::sigemptyset(&mut action.sa_mask);
        // The three signals wait for each other: one handler runs at a time.
        for other in SIGNALS {
            libc::sigaddset(&mut action.sa_mask, other);
        }
    }
    // SAFETY: all-zero is a valid sigaction to receive the previous one.
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `action` is fully initialised and its handler is an `extern "C"
    // fn(c_int)` that only does async-signal-safe things; `previous` is writable.
    let rc = unsafe { libc::sigaction(signal, &action, &mut previous) };
    (rc == 0).then_some(previous)
}

/// Puts back the actions the signals had before [`install`].
fn restore(state: &mut State) {
    put_back(&mut state.installed);
}

/// Gives each signal of `actions` back the action kept with it, and empties the list.
fn put_back(actions: &mut Vec<(c_int, libc::sigaction)>) {
    for (signal, previous) in actions.drain(..) {
        // SAFETY: `previous` is the action the kernel reported for this signal.
        unsafe {
            libc::sigaction(signal, &previous, ptr::null_mut());
        }
    }
}

/// The handler: unlink every registered path (and rmdir the directories), then end the
/// process by the signal. Only async-signal-safe calls (atomics, unlink, rmdir, sigaction,
/// raise), no allocation, no lock.
extern "C" fn on_signal(signal: c_int) {
    STOPPING.fetch_add(1, Ordering::SeqCst);
    let stop = STOP.load(Ordering::SeqCst);
    if !stop.is_null() {
        // SAFETY: a non-null STOP is a live `Arc<AtomicBool>` pointer that is not released
        // while STOPPING counts this handler (see `StopGuard::drop`).
        let flag = unsafe { &*stop };
        if !flag.swap(true, Ordering::SeqCst) {
            STOPPING.fetch_sub(1, Ordering::SeqCst);
            return;
        }
    }
    STOPPING.fetch_sub(1, Ordering::SeqCst);
    HANDLING.fetch_add(1, Ordering::SeqCst);
    // Files first, then the directories they were in (rmdir removes only empty ones and
    // fails harmlessly on files); twice, for a file renamed into a directory meanwhile.
    for _ in 0..2 {
        for remove in [libc::unlink, libc::rmdir] {
            for slot in &PATHS {
                let path = slot.load(Ordering::SeqCst);
                if !path.is_null() {
                    // SAFETY: a non-null slot holds a NUL-terminated string from
                    // `CString::into_raw` that is not freed while a handler may read it
                    // (HANDLING).
                    unsafe {
                        remove(path);
                    }
                }
            }
        }
    }
    // SAFETY: all-zero is SIG_DFL with no flags and an empty mask.
    let default: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `default` is a valid action; sigaction and raise are async-signal-safe. The
    // raised signal stays pending (it is blocked while its handler runs) and, when this
    // handler returns, its default action ends the process with the signal's status.
    unsafe {
        libc::sigaction(signal, &default, ptr::null_mut());
        libc::raise(signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// Tests that look at the process-wide handlers run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    const CHILD_ENV: &str = "WEIR_SYS_CLEANUP_CHILD";

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("weir-sys-cleanup-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn handlers_live_exactly_as_long_as_a_guard() {
        let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        assert!(!handler_installed(libc::SIGTERM));
        let first = register(Path::new("a-relative-name")).unwrap();
        for signal in SIGNALS {
            assert!(handler_installed(signal), "signal {signal}");
        }
        let second = register(Path::new("/tmp/another")).unwrap();
        drop(first);
        assert!(handler_installed(libc::SIGINT), "still one guard");
        drop(second);
        for signal in SIGNALS {
            assert!(!handler_installed(signal), "signal {signal}");
            let now = current(signal).unwrap();
            assert_eq!(now.sa_sigaction, libc::SIG_DFL, "signal {signal} back to default");
        }
    }

    #[test]
    fn capacity_is_an_error_not_a_panic_and_a_nul_byte_is_refused() {
        let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let guards: Vec<Guard> =
            (0..CAPACITY).map(|i| register(Path::new(&format!("/tmp/t{i}"))).unwrap()).collect();
        let err = register(Path::new("/tmp/one-too-many")).unwrap_err();
        assert!(err.to_string().contains(&format!("more than {CAPACITY} ")), "{err}");
        drop(guards);
        let nul = std::ffi::OsStr::from_bytes(b"/tmp/a\0b");
        assert_eq!(register(Path::new(nul)).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert!(!handler_installed(libc::SIGHUP));
    }

    #[test]
    fn a_stop_flag_is_set_by_the_first_signal_and_the_handlers_go_with_it() {
        let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let flag = Arc::new(AtomicBool::new(false));
        let guard = stop_on_signal(Arc::clone(&flag)).unwrap();
        assert!(stop_on_signal(Arc::new(AtomicBool::new(false))).is_err(), "one at a time");
        assert!(handler_installed(libc::SIGINT));
        // SAFETY: raise has no memory preconditions; the handler only sets the flag.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        assert!(flag.load(Ordering::SeqCst), "the signal set the flag");
        drop(guard);
        assert_eq!(Arc::strong_count(&flag), 1, "the handler's reference is released");
        assert!(!handler_installed(libc::SIGINT));
    }

    #[test]
    fn a_stop_flag_takes_over_an_ignored_sigint_and_sigterm_but_not_sighup() {
        let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ignore = |signal: c_int| {
            // SAFETY: SIG_IGN needs no handler; the old action is not wanted.
            assert_ne!(unsafe { libc::signal(signal, libc::SIG_IGN) }, libc::SIG_ERR);
        };
        for signal in SIGNALS {
            ignore(signal);
        }
        let flag = Arc::new(AtomicBool::new(false));
        let guard = stop_on_signal(Arc::clone(&flag)).unwrap();
        assert!(handler_installed(libc::SIGINT) && handler_installed(libc::SIGTERM));
        assert!(!handler_installed(libc::SIGHUP), "nohup's SIGHUP stays ignored");
        // SAFETY: raise has no memory preconditions; SIGHUP is ignored.
        assert_eq!(unsafe { libc::raise(libc::SIGHUP) }, 0);
        assert!(!flag.load(Ordering::SeqCst), "an ignored SIGHUP does not stop");
        // SAFETY: as above; the handler only sets the flag.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        assert!(flag.load(Ordering::SeqCst), "an inherited-ignored SIGTERM stops");
        drop(guard);
        for signal in SIGNALS {
            assert!(!handler_installed(signal), "signal {signal}");
            let now = current(signal).unwrap();
            assert_eq!(now.sa_sigaction, libc::SIG_IGN, "signal {signal} ignored again");
            // SAFETY: back to the default the other tests expect.
            assert_ne!(unsafe { libc::signal(signal, libc::SIG_DFL) }, libc::SIG_ERR);
        }
    }

    /// Not a test on its own: the body of the child process the signal tests start (this
    /// test binary again, with CHILD_ENV set). Without CHILD_ENV it does nothing.
    #[test]
    fn child_process_body() {
        let Ok(spec) = std::env::var(CHILD_ENV) else { return };
        let (mode, path) = spec.split_once(':').unwrap();
        let path = PathBuf::from(path);
        std::fs::write(&path, b"half a capture").unwrap();
        let guard = register(&path).unwrap();
        if mode == "dropped" {
            drop(guard);
        } else {
            std::mem::forget(guard);
        }
        println!("\nWEIR-CHILD-READY");
        // The parent signals now; if it never does, end (with a status it does not expect).
        std::thread::sleep(Duration::from_secs(30));
        std::process::exit(3);
    }

    /// Runs `child_process_body` in a new process, sends it `signal` once the file is
    /// registered, and returns how the process ended (bounded: the child is killed after
    /// 20 s).
    fn signalled_child(mode: &str, file: &Path, signal: c_int) -> std::process::ExitStatus {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["cleanup::tests::child_process_body", "--exact", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD_ENV, format!("{mode}:{}", file.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut ready = false;
        for line in BufReader::new(stdout).lines() {
            if line.unwrap().contains("WEIR-CHILD-READY") {
                ready = true;
                break;
            }
        }
        assert!(ready, "the child never got ready");
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: kill has no memory preconditions; `pid` is our own child, not yet waited.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the child did not end within 20 s of signal {signal}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_signal_removes_registered_files_and_ends_the_process_by_that_signal() {
        let dir = scratch("signals");
        for signal in SIGNALS {
            let file = dir.join(format!(".out.weir-{signal}.tmp"));
            let status = signalled_child("registered", &file, signal);
            assert_eq!(status.signal(), Some(signal), "{status:?}");
            assert!(!file.exists(), "signal {signal} left {}", file.display());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_forgotten_path_is_left_alone_and_the_signal_still_ends_the_process() {
        let dir = scratch("forgotten");
        let file = dir.join("kept");
        let status = signalled_child("dropped", &file, libc::SIGTERM);
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        assert_eq!(std::fs::read(&file).unwrap(), b"half a capture");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
