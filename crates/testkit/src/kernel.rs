//! The Linux kernel as an oracle for eBPF: load a program with `bpf(BPF_PROG_LOAD)`, which
//! runs the kernel's verifier, and run it once on a packet with `bpf(BPF_PROG_TEST_RUN)`.
//! One audited wrapper of the syscall for every test that asks the kernel (the cBPF
//! translation, the filter emitters, the conformance corpus).
//!
//! This needs root (or CAP_BPF with CAP_PERFMON and CAP_NET_ADMIN) and a kernel with
//! `bpf()`; [`available`] says why not, for the test's `SKIPPED:` line.
//!
//! ```no_run
//! use weir_testkit::kernel::{self, ProgType};
//! if let Err(reason) = kernel::available() {
//!     println!("SKIPPED: example: {reason}");
//!     return;
//! }
//! // mov32 r0, 2; exit: XDP_PASS for every packet.
//! let code = [0xb4, 0, 0, 0, 2, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
//! let prog = kernel::load(ProgType::Xdp, &code).unwrap();
//! assert_eq!(prog.test_run(&[0u8; 64]).unwrap(), 2);
//! ```

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// The program types weir's tests load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProgType {
    /// `BPF_PROG_TYPE_SOCKET_FILTER`: `struct __sk_buff` context, legacy packet loads; its
    /// test run strips the Ethernet header.
    SocketFilter,
    /// `BPF_PROG_TYPE_SCHED_CLS`: the same context and loads, and the test run keeps the
    /// whole frame, so it stands in for a socket filter where verdicts are compared.
    SchedCls,
    /// `BPF_PROG_TYPE_XDP`: `struct xdp_md` context, direct packet access.
    Xdp,
}

impl ProgType {
    /// The kernel's `enum bpf_prog_type` value.
    pub fn raw(self) -> u32 {
        match self {
            ProgType::SocketFilter => 1,
            ProgType::SchedCls => 3,
            ProgType::Xdp => 6,
        }
    }
}

/// `union bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`; the kernel takes the
/// fields after it as zero.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for `BPF_PROG_TEST_RUN`, up to `batch_size`.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    /// Explicit so the padding is zero: the kernel refuses non-zero bytes past its fields.
    _pad: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    let size = std::mem::size_of::<T>();
    // SAFETY: `attr` is a live, exclusively borrowed #[repr(C)] prefix of `union bpf_attr`
    // of exactly `size` bytes; every pointer inside it (instructions, license, log, packet)
    // points to memory the caller keeps alive and as large as the sizes it states.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, size) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Why the kernel did not load a program.
#[derive(Debug)]
pub struct LoadError {
    /// What `bpf()` returned.
    pub error: io::Error,
    /// The verifier's log (empty when it wrote none).
    pub log: String,
}

impl LoadError {
    /// The verifier's complaint: the last line of its log that is not a statistic, or the
    /// errno when the log says nothing.
    pub fn reason(&self) -> String {
        let line = self.log.lines().map(str::trim).rfind(|l| {
            !l.is_empty()
                && !l.starts_with("processed ")
                && !l.starts_with("verification time")
                && !l.starts_with("stack depth")
        });
        match line {
            Some(line) => line.to_string(),
            None => self.error.to_string(),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.error)?;
        if !self.log.is_empty() {
            write!(f, "\nverifier log:\n{}", self.log)?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// A loaded program; the descriptor is closed on drop.
#[derive(Debug)]
pub struct ProgFd(OwnedFd);

impl ProgFd {
    /// One `BPF_PROG_TEST_RUN` on `data`: the program's 32-bit return value.
    pub fn test_run(&self, data: &[u8]) -> Result<u32, String> {
        let mut attr = TestRunAttr {
            prog_fd: u32::try_from(self.0.as_raw_fd()).map_err(|e| e.to_string())?,
            data_size_in: u32::try_from(data.len()).map_err(|e| e.to_string())?,
            data_in: data.as_ptr() as u64,
            repeat: 1,
            ..TestRunAttr::default()
        };
        bpf(BPF_PROG_TEST_RUN, &mut attr).map_err(|e| format!("BPF_PROG_TEST_RUN: {e}"))?;
        Ok(attr.retval)
    }
}

/// Loads `code` (eBPF slots, 8 little-endian bytes each) as a GPL program of `prog_type`.
/// Loads without a log first, which is faster; when that fails, loads again with the
/// verifier's log so that the error says why.
pub fn load(prog_type: ProgType, code: &[u8]) -> Result<ProgFd, LoadError> {
    match load_once(prog_type, code, false) {
        Ok(fd) => Ok(fd),
        Err(first) => match load_once(prog_type, code, true) {
            Ok(fd) => Ok(fd),
            Err(with_log) if with_log.log.is_empty() => Err(first),
            Err(with_log) => Err(with_log),
        },
    }
}

fn load_once(prog_type: ProgType, code: &[u8], with_log: bool) -> Result<ProgFd, LoadError> {
    let license = c"GPL";
    let mut log = if with_log { vec![0u8; 1 << 22] } else { Vec::new() };
    let mut attr = ProgLoadAttr {
        prog_type: prog_type.raw(),
        insn_cnt: u32::try_from(code.len() / 8).unwrap_or(u32::MAX),
        insns: code.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..ProgLoadAttr::default()
    };
    if with_log {
        attr.log_level = 1;
        attr.log_size = u32::try_from(log.len()).unwrap_or(u32::MAX);
        attr.log_buf = log.as_mut_ptr() as u64;
    }
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => {
            let fd = i32::try_from(fd).map_err(|_| LoadError {
                error: io::Error::other("file descriptor out of range"),
                log: String::new(),
            })?;
            // SAFETY: BPF_PROG_LOAD returned a new file descriptor that nothing else owns.
            Ok(ProgFd(unsafe { OwnedFd::from_raw_fd(fd) }))
        }
        Err(error) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let log = String::from_utf8_lossy(log.get(..end).unwrap_or_default()).into_owned();
            Err(LoadError { error, log })
        }
    }
}

/// Whether the kernel can be asked here; `Err` says why not (for `SKIPPED: <name>: ...`).
/// Probes with a program that returns 0, loaded as a socket filter and as XDP.
pub fn available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(format!("not running as root (euid {euid})"));
    }
    // mov32 r0, 0; exit
    let probe = [0xb4, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
    for prog_type in [ProgType::SocketFilter, ProgType::Xdp] {
        if let Err(e) = load(prog_type, &probe) {
            return Err(match e.error.raw_os_error() {
                Some(libc::EPERM) | Some(libc::ENOSYS) | Some(libc::EACCES) => {
                    format!("bpf() unavailable: {}", e.error)
                }
                _ => format!("bpf() refused a trivial {prog_type:?} program: {}", e.reason()),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_is_the_last_line_that_is_not_a_statistic() {
        let e = LoadError {
            error: io::Error::from_raw_os_error(libc::EACCES),
            log: "0: (b7) r0 = 0\nR0 !read_ok\nprocessed 2 insns\n".into(),
        };
        assert_eq!(e.reason(), "R0 !read_ok");
        let quiet =
            LoadError { error: io::Error::from_raw_os_error(libc::EPERM), log: String::new() };
        assert!(quiet.reason().contains("not permitted"), "{}", quiet.reason());
    }

    #[test]
    fn a_trivial_program_runs_when_the_kernel_is_there() {
        if let Err(reason) = available() {
            println!("SKIPPED: a_trivial_program_runs_when_the_kernel_is_there: {reason}");
            return;
        }
        // mov32 r0, 2; exit
        let code = [0xb4, 0, 0, 0, 2, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
        let prog = load(ProgType::Xdp, &code).unwrap();
        assert_eq!(prog.test_run(&[0u8; 64]), Ok(2));
        // An unfinished program: the verifier says why.
        let err = load(ProgType::Xdp, &code[..8]).unwrap_err();
        assert!(!err.log.is_empty(), "{err}");
    }
}
