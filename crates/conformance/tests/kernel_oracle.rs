//! The Linux kernel as an independent oracle for the corpus's expected values: every case
//! with a `-- result`, no `-- mem`, and no helper calls is loaded with `BPF_PROG_LOAD` as a
//! socket filter and run once with `BPF_PROG_TEST_RUN` on a 64-byte zero packet. The kernel
//! returns the low 32 bits of `r0`; for programs without local calls a second variant
//! returns the high 32 bits (see `weir_conformance::kernel_prep`). Any disagreement fails.
//!
//! Cases the verifier refuses (constant division by zero, shifts by the width, unbounded
//! loops, recursion, stacks over 512 bytes in all, misaligned stack access) are listed as
//! `SKIPPED: kernel_oracle/<case>: <reason>`. Without root or without `bpf()` the whole test
//! says `SKIPPED: kernel_oracle: <reason>` and returns.
//!
//! This is the only file of the crate with `unsafe`: the syscall itself.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use weir_conformance::kernel_prep::{high_half_program, low_half_program, needs_corpus_runtime};
use weir_conformance::{corpus_dir, load_corpus, load_program, Expect};
use weir_isa::ebpf::RawInsn;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
/// The kernel must compare at least this many cases, or the oracle checked too little.
const MIN_COMPARED: usize = 100;

/// The `BPF_PROG_LOAD` part of `union bpf_attr`, up to `expected_attach_type`; the kernel
/// treats the fields after it as zero.
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

/// The `BPF_PROG_TEST_RUN` part of `union bpf_attr`.
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
    // points to memory the caller keeps alive and large enough for the sizes it states.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, size) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Why the kernel did not load a program: the errno and the verifier's reason.
struct Refusal {
    error: io::Error,
    reason: String,
}

fn load(insns: &[RawInsn]) -> Result<OwnedFd, Refusal> {
    match load_with_log(insns, None) {
        Ok(fd) => Ok(fd),
        // Load again with a log only to learn why.
        Err(first) => match load_with_log(insns, Some(vec![0u8; 1 << 20])) {
            Ok(fd) => Ok(fd),
            Err(with_log) if with_log.reason.is_empty() => Err(first),
            Err(with_log) => Err(with_log),
        },
    }
}

fn load_with_log(insns: &[RawInsn], log: Option<Vec<u8>>) -> Result<OwnedFd, Refusal> {
    let bytes: Vec<u8> = insns.iter().flat_map(|i| i.to_bytes()).collect();
    let license = CString::new("GPL").unwrap_or_default();
    let mut log = log.unwrap_or_default();
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_SOCKET_FILTER,
        insn_cnt: u32::try_from(insns.len()).unwrap_or(u32::MAX),
        insns: bytes.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..ProgLoadAttr::default()
    };
    if !log.is_empty() {
        attr.log_level = 1;
        attr.log_size = u32::try_from(log.len()).unwrap_or(u32::MAX);
        attr.log_buf = log.as_mut_ptr() as u64;
    }
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => {
            let fd = i32::try_from(fd).map_err(|_| Refusal {
                error: io::Error::other("fd out of range"),
                reason: String::new(),
            })?;
            // SAFETY: BPF_PROG_LOAD returned a new file descriptor that nothing else owns.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
        Err(error) => Err(Refusal { error, reason: verifier_reason(&log) }),
    }
}

/// The verifier's complaint: the last line of its log that is not a statistic.
fn verifier_reason(log: &[u8]) -> String {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(log.get(..end).unwrap_or_default());
    text.lines()
        .map(str::trim)
        .rfind(|l| {
            !l.is_empty()
                && !l.starts_with("processed ")
                && !l.starts_with("verification time")
                && !l.starts_with("stack depth")
        })
        .unwrap_or("")
        .to_string()
}

/// Runs a loaded program once on a 64-byte zero packet; returns the kernel's 32-bit `r0`.
fn run(fd: &OwnedFd) -> io::Result<u32> {
    let packet = [0u8; 64];
    let mut attr = TestRunAttr {
        prog_fd: u32::try_from(fd.as_raw_fd()).unwrap_or(u32::MAX),
        data_size_in: 64,
        data_in: packet.as_ptr() as u64,
        repeat: 1,
        ..TestRunAttr::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok(attr.retval)
}

fn describe(refusal: &Refusal) -> String {
    if refusal.reason.is_empty() {
        refusal.error.to_string()
    } else {
        refusal.reason.clone()
    }
}

/// Loads and runs `insns`; `Ok(None)` when the verifier refuses them.
fn kernel_value(insns: &[RawInsn]) -> Result<Result<u32, String>, String> {
    match load(insns) {
        Ok(fd) => run(&fd).map(Ok).map_err(|e| format!("BPF_PROG_TEST_RUN failed: {e}")),
        Err(refusal) => Ok(Err(describe(&refusal))),
    }
}

/// Whether `bpf()` is usable here; `Err` says why not.
fn bpf_available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(format!("not root (euid {euid})"));
    }
    // mov r0, 0; exit
    let probe = [RawInsn::from_u64(0xb7), RawInsn::from_u64(0x95)];
    match load(&probe) {
        Ok(_) => Ok(()),
        Err(refusal) => match refusal.error.raw_os_error() {
            Some(libc::EPERM) | Some(libc::ENOSYS) | Some(libc::EACCES) => {
                Err(format!("bpf() unavailable: {}", refusal.error))
            }
            _ => Err(format!("bpf() refused a trivial program: {}", describe(&refusal))),
        },
    }
}

#[test]
fn kernel_agrees_with_expected_results() {
    if let Err(reason) = bpf_available() {
        println!("SKIPPED: kernel_oracle: {reason}");
        return;
    }
    let cases =
        load_corpus(&corpus_dir()).unwrap_or_else(|e| panic!("cannot load the corpus: {e}"));
    assert!(!cases.is_empty(), "the corpus is empty");

    let mut compared = 0usize;
    let mut high_compared = 0usize;
    let mut skipped = 0usize;
    let mut disagreements = Vec::new();
    for case in &cases {
        let Expect::Result(expected) = case.expect else { continue };
        if !case.mem.is_empty() {
            continue;
        }
        let Ok(program) = load_program(case) else { continue };
        if needs_corpus_runtime(&program) {
            continue;
        }
        let low = match kernel_value(&low_half_program(&program)) {
            Ok(Ok(v)) => v,
            Ok(Err(reason)) => {
                println!("SKIPPED: kernel_oracle/{}: {reason}", case.name);
                skipped += 1;
                continue;
            }
            Err(e) => panic!("{}: {e}", case.name),
        };
        compared += 1;
        let want_low = expected as u32;
        if low != want_low {
            disagreements
                .push(format!("{}: low 32 bits: kernel {low:#x}, corpus {want_low:#x}", case.name));
        }
        let Some(high_program) = high_half_program(&program) else { continue };
        match kernel_value(&high_program) {
            Ok(Ok(high)) => {
                high_compared += 1;
                let want_high = (expected >> 32) as u32;
                if high != want_high {
                    disagreements.push(format!(
                        "{}: high 32 bits: kernel {high:#x}, corpus {want_high:#x}",
                        case.name
                    ));
                }
            }
            Ok(Err(reason)) => {
                println!("SKIPPED: kernel_oracle/{} (high half): {reason}", case.name)
            }
            Err(e) => panic!("{}: {e}", case.name),
        }
    }
    println!(
        "kernel_oracle: {compared} cases compared by the kernel ({high_compared} on all 64 bits), {skipped} refused by the verifier"
    );
    assert!(
        disagreements.is_empty(),
        "the kernel disagrees with {} expected values:\n  {}",
        disagreements.len(),
        disagreements.join("\n  ")
    );
    assert!(
        compared >= MIN_COMPARED,
        "the kernel compared only {compared} cases (want {MIN_COMPARED})"
    );
}

/// Cases that load in weir but must trap at run time (out of bounds, call depth, endless
/// loops) are programs the kernel's verifier must refuse: it proves statically what weir
/// checks at run time. A program the kernel accepts here means the corpus calls something an
/// error that the kernel considers safe.
#[test]
fn kernel_refuses_programs_that_trap() {
    if let Err(reason) = bpf_available() {
        println!("SKIPPED: kernel_oracle: {reason}");
        return;
    }
    let cases =
        load_corpus(&corpus_dir()).unwrap_or_else(|e| panic!("cannot load the corpus: {e}"));
    let mut refused = 0usize;
    let mut accepted = Vec::new();
    for case in &cases {
        if !matches!(case.expect, Expect::Error(_)) || !case.mem.is_empty() {
            continue;
        }
        let Ok(program) = load_program(case) else { continue };
        if needs_corpus_runtime(&program) {
            continue;
        }
        match load(&low_half_program(&program)) {
            Ok(_) => accepted.push(case.name.clone()),
            Err(refusal) => {
                println!(
                    "kernel_oracle/{}: refused as expected: {}",
                    case.name,
                    describe(&refusal)
                );
                refused += 1;
            }
        }
    }
    println!("kernel_oracle: the verifier refused all {refused} trapping programs it was given");
    assert!(
        accepted.is_empty(),
        "the kernel accepts programs the corpus expects to trap: {}",
        accepted.join(", ")
    );
    assert!(refused >= 10, "only {refused} trapping programs reached the kernel");
}
