//! The Linux kernel as an engine: `bpf(BPF_PROG_LOAD)` to put an eBPF program through the
//! kernel's verifier (and its JIT, when enabled), `bpf(BPF_PROG_TEST_RUN)` to run it on a
//! packet, `repeat` times, with the kernel's own timing. `weir-bench` measures weir against
//! this; kernel-interop checks use it to see that weir's eBPF loads and gives the same
//! verdicts.
//!
//! Only the parts of `union bpf_attr` these two commands read are declared, and the size
//! passed to the kernel is the size of that prefix (the kernel zero-extends it). Needs root
//! (or CAP_BPF with CAP_NET_ADMIN/CAP_PERFMON); [`available`] says why not when it cannot
//! work.
//!
//! ```no_run
//! use weir_runtime::kernel::{self, ProgType};
//! // mov32 r0, 1; exit
//! let code = [0xb4, 0, 0, 0, 1, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
//! kernel::available()?;
//! let prog = kernel::load(&code, ProgType::SchedCls).map_err(|e| e.to_string())?;
//! let run = prog.test_run(&[0u8; 60], 1000).map_err(|e| e.to_string())?;
//! assert_eq!(run.retval, 1);
//! println!("{} ns per run", run.duration_ns);
//! # Ok::<(), String>(())
//! ```

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// The program types weir loads; the number is the kernel's `enum bpf_prog_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProgType {
    /// `BPF_PROG_TYPE_SOCKET_FILTER`. Its test run strips the Ethernet header before the
    /// program sees the packet, as a socket does; load a socket filter as
    /// [`ProgType::SchedCls`] to test it on whole frames.
    SocketFilter,
    /// `BPF_PROG_TYPE_SCHED_CLS`: `struct __sk_buff` context, the legacy packet loads, and a
    /// test run on the whole frame.
    SchedCls,
    /// `BPF_PROG_TYPE_XDP`: `struct xdp_md` context, direct packet access.
    Xdp,
}

impl ProgType {
    fn number(self) -> u32 {
        match self {
            ProgType::SocketFilter => 1,
            ProgType::SchedCls => 3,
            ProgType::Xdp => 6,
        }
    }
}

impl fmt::Display for ProgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProgType::SocketFilter => "BPF_PROG_TYPE_SOCKET_FILTER",
            ProgType::SchedCls => "BPF_PROG_TYPE_SCHED_CLS",
            ProgType::Xdp => "BPF_PROG_TYPE_XDP",
        })
    }
}

/// `union bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`.
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

/// `union bpf_attr` for `BPF_PROG_TEST_RUN` (the `test` member), up to `batch_size`.
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
    _pad: u32,
}

/// The kernel refused a program: the error, and the verifier's log when it wrote one.
#[derive(Debug)]
pub struct LoadError {
    pub error: io::Error,
    pub log: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bpf(BPF_PROG_LOAD): {}", self.error)?;
        if !self.log.trim().is_empty() {
            write!(f, "\nverifier log:\n{}", self.log.trim_end())?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// A program the kernel accepted; the descriptor is closed on drop.
#[derive(Debug)]
pub struct LoadedProgram {
    fd: OwnedFd,
    prog_type: ProgType,
}

/// One `BPF_PROG_TEST_RUN`: the program's return value (of the last repetition) and the
/// mean time of one repetition as the kernel measured it, in nanoseconds. That time covers
/// the program and the kernel's per-repetition loop; see [`LoadedProgram::test_run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestRun {
    pub retval: u32,
    pub duration_ns: u32,
}

/// The largest verifier log asked for when a load fails (the kernel's limit is 16 MiB - 1).
const MAX_LOG: usize = (16 << 20) - 1;

/// Loads `code` (eBPF instructions, 8 bytes each, as `weir_program::Program::to_bytes`
/// writes them) as a GPL program of `prog_type`. When the kernel refuses it, the load is
/// repeated with the verifier's log on, so the error carries the reason.
pub fn load(code: &[u8], prog_type: ProgType) -> Result<LoadedProgram, LoadError> {
    let plain = |error: &str| LoadError {
        error: io::Error::new(io::ErrorKind::InvalidInput, error.to_string()),
        log: String::new(),
    };
    if code.is_empty() || !code.chunks_exact(8).remainder().is_empty() {
        return Err(plain("the code is not a whole number of 8-byte instructions"));
    }
    let insn_cnt = u32::try_from(code.len() / 8).map_err(|_| plain("too many instructions"))?;
    match load_with_log(code, insn_cnt, prog_type, None) {
        Ok(fd) => Ok(LoadedProgram { fd, prog_type }),
        Err(first) => {
            // Again with the log: 1 MiB, then the maximum if that was too small.
            let mut size = 1 << 20;
            loop {
                let mut log = vec![0u8; size];
                match load_with_log(code, insn_cnt, prog_type, Some(&mut log)) {
                    // Accepted the second time (a transient failure): keep it.
                    Ok(fd) => return Ok(LoadedProgram { fd, prog_type }),
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && size < MAX_LOG => {
                        size = MAX_LOG;
                    }
                    Err(_) => {
                        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                        let text = log.get(..end).unwrap_or_default();
                        return Err(LoadError {
                            error: first,
                            log: String::from_utf8_lossy(text).into_owned(),
                        });
                    }
                }
            }
        }
    }
}

fn load_with_log(
    code: &[u8],
    insn_cnt: u32,
    prog_type: ProgType,
    log: Option<&mut [u8]>,
) -> Result<OwnedFd, io::Error> {
    let license = c"GPL";
    let (log_level, log_size, log_buf) = match log {
        Some(buf) => (1, u32::try_from(buf.len()).unwrap_or(u32::MAX), buf.as_mut_ptr() as u64),
        None => (0, 0, 0),
    };
    let attr = ProgLoadAttr {
        prog_type: prog_type.number(),
        insn_cnt,
        insns: code.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        ..ProgLoadAttr::default()
    };
    // SAFETY: `attr` is a valid prefix of `union bpf_attr` for BPF_PROG_LOAD and its size is
    // passed; it points at `insn_cnt * 8` readable bytes of code, a NUL-terminated license
    // and, when logging, a writable buffer of `log_size` bytes, all of which outlive the
    // call. The kernel writes nothing else.
    let rc = unsafe {
        libc::syscall(libc::SYS_bpf, BPF_PROG_LOAD, &attr, std::mem::size_of::<ProgLoadAttr>())
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(rc).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: a successful BPF_PROG_LOAD returns a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl LoadedProgram {
    pub fn prog_type(&self) -> ProgType {
        self.prog_type
    }

    /// Runs the program on `data` (a whole frame, Ethernet header first) `repeat` times
    /// (0 counts as 1) in one `BPF_PROG_TEST_RUN`.
    ///
    /// The duration is the kernel's mean per repetition. It includes the kernel's loop
    /// around the program (and, with `repeat` 1, its timer reads), so a program's own cost
    /// is best estimated as the difference with a trivial program run the same way.
    /// The kernel refuses frames it cannot take apart (shorter than an Ethernet header, and
    /// for the skb program types an IPv4 or IPv6 EtherType without the fixed IP header
    /// behind it) with `EINVAL`.
    pub fn test_run(&self, data: &[u8], repeat: u32) -> Result<TestRun, io::Error> {
        let fd = u32::try_from(self.fd.as_raw_fd())
            .map_err(|_| io::Error::other("descriptor out of range"))?;
        let data_size_in = u32::try_from(data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "packet too large"))?;
        let mut attr = TestRunAttr {
            prog_fd: fd,
            data_size_in,
            data_in: data.as_ptr() as u64,
            repeat,
            ..TestRunAttr::default()
        };
        // SAFETY: `attr` is a valid prefix of `union bpf_attr` for BPF_PROG_TEST_RUN and its
        // size is passed; `data_in` points at `data_size_in` readable bytes that outlive the
        // call; no output buffers are given, so the kernel writes only into `attr`.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                &mut attr,
                std::mem::size_of::<TestRunAttr>(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TestRun { retval: attr.retval, duration_ns: attr.duration })
    }
}

/// `mov32 r0, 0; exit`: the smallest program every type accepts.
const RETURN_ZERO: [u8; 16] = [0xb4, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];

/// Whether programs can be loaded and test-run here; the error says why not (not root,
/// the syscall refused, seccomp, an old kernel ...).
pub fn available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let who = if root { "" } else { "not running as root; " };
    let prog = load(&RETURN_ZERO, ProgType::SchedCls)
        .map_err(|e| format!("{who}bpf(BPF_PROG_LOAD) refused: {}", e.error))?;
    let frame = [0u8; 64];
    match prog.test_run(&frame, 1) {
        Ok(run) if run.retval == 0 => Ok(()),
        Ok(run) => Err(format!("bpf(BPF_PROG_TEST_RUN) returned {} for `return 0`", run.retval)),
        Err(e) => Err(format!("{who}bpf(BPF_PROG_TEST_RUN) refused: {e}")),
    }
}

/// The kernel's JIT setting (`/proc/sys/net/core/bpf_jit_enable`: 0 interpreter, 1 JIT,
/// 2 JIT with debug output), for describing a measurement.
pub fn jit_setting() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/bpf_jit_enable").ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `r0 = __sk_buff.len` (offset 0); exit.
    const RETURN_LEN: [u8; 16] = [0x61, 0x10, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn loads_and_test_runs_when_available() {
        if let Err(reason) = available() {
            println!("SKIPPED: loads_and_test_runs_when_available: {reason}");
            return;
        }
        let prog = load(&RETURN_LEN, ProgType::SchedCls).unwrap();
        assert_eq!(prog.prog_type(), ProgType::SchedCls);
        let run = prog.test_run(&[0u8; 77], 10).unwrap();
        assert_eq!(run.retval, 77);
        let xdp = load(&RETURN_ZERO, ProgType::Xdp).unwrap();
        assert_eq!(xdp.test_run(&[0u8; 60], 1).unwrap().retval, 0);
    }

    #[test]
    fn refusals_carry_the_verifier_log() {
        if let Err(reason) = available() {
            println!("SKIPPED: refusals_carry_the_verifier_log: {reason}");
            return;
        }
        // `exit` without setting r0: the verifier refuses to read an uninitialised r0.
        let err = load(&RETURN_ZERO[8..], ProgType::Xdp).unwrap_err();
        assert_eq!(err.error.raw_os_error(), Some(libc::EACCES), "{err}");
        assert!(err.log.contains("R0"), "{err}");
        assert!(err.to_string().contains("verifier log"));
    }

    #[test]
    fn malformed_code_is_refused_before_the_syscall() {
        let err = load(&RETURN_ZERO[..12], ProgType::SchedCls).unwrap_err();
        assert_eq!(err.error.kind(), io::ErrorKind::InvalidInput);
        assert!(load(&[], ProgType::Xdp).is_err());
    }
}
