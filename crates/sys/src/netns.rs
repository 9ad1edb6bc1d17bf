//! Network namespaces for tests: [`enter`] moves the calling thread into a namespace made
//! by `ip netns add NAME` and moves it back when the guard is dropped. Live-capture tests
//! make their veth pairs there, away from the machine's own interfaces.

use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;

/// The calling thread is in another network namespace until this is dropped (it is not
/// `Send`: the namespace belongs to the thread).
#[derive(Debug)]
pub struct Entered {
    original: File,
    _thread_bound: PhantomData<*const ()>,
}

fn setns(file: &File) -> io::Result<()> {
    // SAFETY: setns reads only the descriptor, which `file` keeps open for the call.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Moves the calling thread into `/run/netns/NAME` (needs CAP_SYS_ADMIN).
pub fn enter(name: &str) -> io::Result<Entered> {
    let original = File::open("/proc/thread-self/ns/net")?;
    let target = File::open(format!("/run/netns/{name}"))?;
    setns(&target)?;
    Ok(Entered { original, _thread_bound: PhantomData })
}

impl Drop for Entered {
    fn drop(&mut self) {
        // Back to where the thread was; nothing better to do if that fails.
        let _ = setns(&self.original);
    }
}
