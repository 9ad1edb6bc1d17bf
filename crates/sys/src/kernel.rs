//! The Linux kernel as an engine and an oracle: `bpf(BPF_PROG_LOAD)` puts an eBPF program
//! through the kernel's verifier (and its JIT, when enabled), `bpf(BPF_PROG_TEST_RUN)` runs
//! it on a packet, `repeat` times, with the kernel's own timing. Tests use it to check that
//! weir's eBPF loads and gives the same verdicts; `weir-bench` measures weir against it.
//!
//! Only the parts of `union bpf_attr` these two commands read are encoded, and the size
//! passed to the kernel is the size of that prefix (the kernel takes the rest as zero).
//! The encoding is plain bytes ([`BpfSys`] receives them), so that [`FakeBpf`] can check
//! it, and answer like the kernel would, in tests that run without root.
//!
//! Needs root (or CAP_BPF with CAP_NET_ADMIN/CAP_PERFMON); [`available`] says why not, for
//! a test's `SKIPPED: <name>: <reason>` line.
//!
//! ```no_run
//! use weir_sys::kernel::{self, ProgType};
//! if let Err(reason) = kernel::available() {
//!     println!("SKIPPED: example: {reason}");
//!     return;
//! }
//! // mov32 r0, 2; exit: XDP_PASS for every packet.
//! let code = [0xb4, 0, 0, 0, 2, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
//! let prog = kernel::load(ProgType::Xdp, &code).unwrap();
//! let run = prog.test_run(&[0u8; 64], 1000).unwrap();
//! assert_eq!(run.retval, 2);
//! println!("{} ns per run", run.duration_ns);
//! ```

use std::ffi::CStr;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// The `bpf()` commands weir issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmd {
    /// `BPF_PROG_LOAD`: returns a new program descriptor.
    ProgLoad,
    /// `BPF_PROG_TEST_RUN`: writes the return value and the duration into the attributes.
    ProgTestRun,
    /// `BPF_MAP_CREATE`: returns a new map descriptor.
    MapCreate,
    /// `BPF_MAP_LOOKUP_ELEM`: copies the value out.
    MapLookupElem,
    /// `BPF_MAP_UPDATE_ELEM`.
    MapUpdateElem,
    /// `BPF_MAP_DELETE_ELEM`.
    MapDeleteElem,
    /// `BPF_MAP_GET_NEXT_KEY`: copies the next key out.
    MapGetNextKey,
    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM`: pop, for queues and stacks.
    MapLookupAndDeleteElem,
    /// `BPF_OBJ_PIN`: a map or program descriptor to a path in a BPF file system.
    ObjPin,
    /// `BPF_OBJ_GET`: a new descriptor for a pinned object.
    ObjGet,
    /// `BPF_BTF_LOAD`: returns a new BTF descriptor.
    BtfLoad,
}

impl Cmd {
    /// The kernel's `enum bpf_cmd` value.
    pub fn raw(self) -> u32 {
        match self {
            Cmd::MapCreate => 0,
            Cmd::MapLookupElem => 1,
            Cmd::MapUpdateElem => 2,
            Cmd::MapDeleteElem => 3,
            Cmd::MapGetNextKey => 4,
            Cmd::ProgLoad => 5,
            Cmd::ProgTestRun => 10,
            Cmd::MapLookupAndDeleteElem => 21,
            Cmd::ObjPin => 6,
            Cmd::ObjGet => 7,
            Cmd::BtfLoad => 18,
        }
    }
}

/// The program types weir loads are weir's one [`ProgType`]. A socket filter's test run
/// strips the Ethernet header before the program sees the packet, as a socket does; load a
/// socket filter as [`ProgType::SchedCls`] to test it on whole frames.
pub use weir_program::ProgType;

/// The map types weir creates in the kernel are weir's one [`MapType`].
pub use weir_program::MapType;

// ---------------------------------------------------------------------------------------
// The syscall, behind a trait

/// One `bpf()` call. [`Syscall`] is the kernel; [`FakeBpf`] answers from a script.
pub trait BpfSys: Send + Sync {
    /// Issues `cmd` with `attr`, a prefix of `union bpf_attr` (its length is the size
    /// passed); the callee may write results back into `attr`. Returns the syscall's
    /// non-negative result, or the errno as an `io::Error`.
    ///
    /// # Safety
    ///
    /// Every address inside `attr` that `cmd` reads or writes (instructions, license,
    /// verifier log, packet) must point to memory valid for the size the attributes state
    /// (readable for inputs, writable for outputs) for the whole call.
    unsafe fn bpf(&self, cmd: Cmd, attr: &mut [u8]) -> io::Result<i64>;
}

/// The real `bpf(2)` system call.
#[derive(Debug, Clone, Copy, Default)]
pub struct Syscall;

impl BpfSys for Syscall {
    unsafe fn bpf(&self, cmd: Cmd, attr: &mut [u8]) -> io::Result<i64> {
        // SAFETY: `attr` is a live, exclusively borrowed buffer of exactly `attr.len()`
        // bytes, which is the size passed; the caller guarantees that every address inside
        // it is valid for what `cmd` does with it. The kernel writes nothing else.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                libc::c_long::from(cmd.raw()),
                attr.as_mut_ptr(),
                attr.len(),
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Attribute encoding

/// The bytes of `union bpf_attr` sent for `BPF_PROG_LOAD`: up to `expected_attach_type`.
pub const PROG_LOAD_ATTR_SIZE: usize = 72;
/// The bytes of `union bpf_attr` sent for `BPF_PROG_TEST_RUN`: up to `batch_size` and its
/// padding (the kernel refuses non-zero bytes past the fields it knows).
pub const TEST_RUN_ATTR_SIZE: usize = 80;

fn put_u32(attr: &mut [u8], at: usize, value: u32) {
    if let Some(field) = attr.get_mut(at..at + 4) {
        field.copy_from_slice(&value.to_ne_bytes());
    }
}

fn put_u64(attr: &mut [u8], at: usize, value: u64) {
    if let Some(field) = attr.get_mut(at..at + 8) {
        field.copy_from_slice(&value.to_ne_bytes());
    }
}

fn get_u32(attr: &[u8], at: usize) -> u32 {
    attr.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_ne_bytes)
}

fn get_u64(attr: &[u8], at: usize) -> u64 {
    attr.get(at..at + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes)
}

/// The bytes of `union bpf_attr` sent for `BPF_PROG_LOAD` with functions' BTF: up to
/// `func_info_cnt` and the (zero) `line_info_rec_size` after it.
pub const PROG_LOAD_FUNCS_ATTR_SIZE: usize = 96;
/// The bytes of `union bpf_attr` sent for `BPF_BTF_LOAD`: up to `btf_log_level` and its
/// padding.
pub const BTF_LOAD_ATTR_SIZE: usize = 32;

/// A program's functions as the kernel's verifier wants them for local calls and
/// `bpf_loop` callbacks: a BTF blob (`weir_elf::func_btf` writes the least one) and per
/// function its first instruction and its `FUNC` type id (`struct bpf_func_info`).
#[derive(Clone, Copy, Debug)]
pub struct FuncInfo<'a> {
    pub btf: &'a [u8],
    pub funcs: &'a [(u32, u32)],
}

/// Field offsets of `union bpf_attr` for `BPF_PROG_LOAD`.
mod load_field {
    pub const PROG_TYPE: usize = 0;
    pub const INSN_CNT: usize = 4;
    pub const INSNS: usize = 8;
    pub const LICENSE: usize = 16;
    pub const LOG_LEVEL: usize = 24;
    pub const LOG_SIZE: usize = 28;
    pub const LOG_BUF: usize = 32;
    pub const PROG_BTF_FD: usize = 72;
    pub const FUNC_INFO_REC_SIZE: usize = 76;
    pub const FUNC_INFO: usize = 80;
    pub const FUNC_INFO_CNT: usize = 88;
}

/// Field offsets of `union bpf_attr` for `BPF_PROG_TEST_RUN` (the `test` member).
mod run_field {
    pub const PROG_FD: usize = 0;
    pub const RETVAL: usize = 4;
    pub const DATA_SIZE_IN: usize = 8;
    pub const DATA_SIZE_OUT: usize = 12;
    pub const DATA_IN: usize = 16;
    pub const DATA_OUT: usize = 24;
    pub const REPEAT: usize = 32;
    pub const DURATION: usize = 36;
}

/// The verifier's statistics for a program it accepted, read from its log (`LOG_STATS`);
/// `None` for a line the log lacks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// `N` of `processed N insns`: what its limit of a million bounds.
    pub processed: Option<u64>,
    /// `N` of `verification time N usec`: the kernel verifier's own time, in microseconds.
    pub verification_us: Option<u64>,
}

impl LoadStats {
    fn from_log(log: &str) -> LoadStats {
        // The first word after `prefix` on the first line that starts with it, as a number.
        let after = |prefix: &str| {
            log.lines()
                .find_map(|l| l.trim().strip_prefix(prefix))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        };
        LoadStats { processed: after("processed "), verification_us: after("verification time ") }
    }
}

/// The verifier's log levels: the instructions explored (on a refusal, where it stopped),
/// or only the statistics (`processed N insns ...`).
const LOG_VERBOSE: u32 = 1;
const LOG_STATS: u32 = 4;

/// `BPF_PROG_LOAD` attributes: `insn_cnt` instructions at `insns`, a GPL license, and the
/// verifier log buffer when `log` is given (at that level).
fn prog_load_attr(
    prog_type: ProgType,
    code: &[u8],
    insn_cnt: u32,
    log: Option<(&mut [u8], u32)>,
) -> [u8; PROG_LOAD_ATTR_SIZE] {
    let mut attr = [0u8; PROG_LOAD_ATTR_SIZE];
    put_u32(&mut attr, load_field::PROG_TYPE, prog_type.kernel_id());
    put_u32(&mut attr, load_field::INSN_CNT, insn_cnt);
    put_u64(&mut attr, load_field::INSNS, code.as_ptr() as u64);
    put_u64(&mut attr, load_field::LICENSE, LICENSE.as_ptr() as u64);
    if let Some((buf, level)) = log {
        put_u32(&mut attr, load_field::LOG_LEVEL, level);
        put_u32(&mut attr, load_field::LOG_SIZE, u32::try_from(buf.len()).unwrap_or(u32::MAX));
        put_u64(&mut attr, load_field::LOG_BUF, buf.as_mut_ptr() as u64);
    }
    attr
}

const LICENSE: &CStr = c"GPL";

// ---------------------------------------------------------------------------------------
// Loading and running

/// The kernel refused a program: the error, and the verifier's log when it wrote one.
#[derive(Debug)]
pub struct LoadError {
    /// What `bpf()` returned for the first attempt.
    pub error: io::Error,
    /// The verifier's log (empty when it wrote none).
    pub log: String,
}

impl LoadError {
    fn plain(message: &str) -> LoadError {
        LoadError {
            error: io::Error::new(io::ErrorKind::InvalidInput, message.to_string()),
            log: String::new(),
        }
    }

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
        write!(f, "bpf(BPF_PROG_LOAD): {}", self.error)?;
        if !self.log.trim().is_empty() {
            write!(f, "\nverifier log:\n{}", self.log.trim_end())?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// One `BPF_PROG_TEST_RUN`: the program's return value (of the last repetition) and the
/// mean time of one repetition as the kernel measured it, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestRun {
    pub retval: u32,
    pub duration_ns: u32,
}

/// The verifier log asked for first when a load fails, and the largest (the kernel's limit
/// is 16 MiB - 1), used when the first was too small.
const FIRST_LOG: usize = 1 << 20;
const MAX_LOG: usize = (16 << 20) - 1;

/// `mov32 r0, 0; exit`: the smallest program every type accepts.
const RETURN_ZERO: [u8; 16] = [0xb4, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];

/// A way to the kernel: the real syscall ([`Kernel::new`]) or a stand-in
/// ([`Kernel::with_sys`], e.g. a [`FakeBpf`]).
/// The bytes of `union bpf_attr` sent for `BPF_MAP_CREATE`: up to `map_flags`.
pub const MAP_CREATE_ATTR_SIZE: usize = 20;
/// The bytes of `union bpf_attr` sent for the element commands (`map_fd`, `key`,
/// `value`/`next_key`, `flags`).
pub const MAP_ELEM_ATTR_SIZE: usize = 32;

/// Field offsets of `union bpf_attr` for `BPF_MAP_CREATE`.
pub mod map_create_field {
    pub const MAP_TYPE: usize = 0;
    pub const KEY_SIZE: usize = 4;
    pub const VALUE_SIZE: usize = 8;
    pub const MAX_ENTRIES: usize = 12;
    pub const MAP_FLAGS: usize = 16;
}

/// Field offsets of `union bpf_attr` for the map element commands.
pub mod map_elem_field {
    pub const MAP_FD: usize = 0;
    pub const KEY: usize = 8;
    /// `value`, or `next_key` for `BPF_MAP_GET_NEXT_KEY`.
    pub const VALUE: usize = 16;
    pub const FLAGS: usize = 24;
}

/// The kernel's possible CPUs (`/sys/devices/system/cpu/possible`, e.g. `0-7`): how many
/// values a per-CPU map's syscall lookup returns.
pub fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut n = 0usize;
    for part in text.trim().split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let parse = |t: &str| t.trim().parse::<usize>().map_err(io::Error::other);
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        n += hi.checked_sub(lo).ok_or_else(|| io::Error::other("bad CPU range"))? + 1;
    }
    Ok(n)
}

#[derive(Clone)]
pub struct Kernel {
    sys: Arc<dyn BpfSys>,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Kernel")
    }
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel::new()
    }
}

impl Kernel {
    /// The real `bpf()` syscall.
    pub fn new() -> Kernel {
        Kernel { sys: Arc::new(Syscall) }
    }

    /// Calls go to `sys` instead of the kernel.
    pub fn with_sys(sys: Arc<dyn BpfSys>) -> Kernel {
        Kernel { sys }
    }

    /// Loads `code` (eBPF instructions, 8 bytes each, as `weir_program::Program::to_bytes`
    /// writes them) as a GPL program of `prog_type`. Loads without a log first, which is
    /// faster; when the kernel refuses, loads again with the verifier's log (1 MiB, then
    /// the maximum if that was too small) so that the error carries the reason.
    pub fn load(&self, prog_type: ProgType, code: &[u8]) -> Result<LoadedProgram, LoadError> {
        self.load_funcs(prog_type, code, None)
    }

    /// [`Kernel::load`] with the program's functions described in BTF (`BPF_BTF_LOAD`
    /// first), as the verifier requires of a program with `bpf_loop` callbacks.
    pub fn load_with_funcs(
        &self,
        prog_type: ProgType,
        code: &[u8],
        funcs: FuncInfo<'_>,
    ) -> Result<LoadedProgram, LoadError> {
        let btf_size =
            u32::try_from(funcs.btf.len()).map_err(|_| LoadError::plain("BTF too large"))?;
        let mut attr = [0u8; BTF_LOAD_ATTR_SIZE];
        put_u64(&mut attr, 0, funcs.btf.as_ptr() as u64);
        put_u32(&mut attr, 16, btf_size);
        // SAFETY: the attributes point at `btf_size` readable bytes of `funcs.btf`, which
        // outlive the call; no log buffer.
        let rc = unsafe { self.sys.bpf(Cmd::BtfLoad, &mut attr) }
            .map_err(|e| LoadError { error: e, log: "BPF_BTF_LOAD refused the BTF".into() })?;
        let fd = i32::try_from(rc).map_err(|_| LoadError::plain("descriptor out of range"))?;
        // SAFETY: a successful BPF_BTF_LOAD returns a new descriptor that nothing else owns.
        let btf = unsafe { OwnedFd::from_raw_fd(fd) };
        let btf_fd = u32::try_from(btf.as_raw_fd()).unwrap_or(0);
        self.load_funcs(prog_type, code, Some((btf_fd, funcs.funcs)))
    }

    fn load_funcs(
        &self,
        prog_type: ProgType,
        code: &[u8],
        funcs: Option<(u32, &[(u32, u32)])>,
    ) -> Result<LoadedProgram, LoadError> {
        if code.is_empty() || !code.chunks_exact(8).remainder().is_empty() {
            return Err(LoadError::plain("the code is not a whole number of 8-byte instructions"));
        }
        let insn_cnt =
            u32::try_from(code.len() / 8).map_err(|_| LoadError::plain("too many instructions"))?;
        let first = match self.load_once(prog_type, code, insn_cnt, None, funcs) {
            Ok(fd) => return Ok(self.loaded(fd, prog_type)),
            Err(first) => first,
        };
        let mut size = FIRST_LOG;
        loop {
            let mut log = vec![0u8; size];
            match self.load_once(prog_type, code, insn_cnt, Some((&mut log, LOG_VERBOSE)), funcs) {
                // Accepted the second time (a transient failure): keep it.
                Ok(fd) => return Ok(self.loaded(fd, prog_type)),
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

    /// [`Kernel::load`], and the verifier's count of instructions processed (what its
    /// limit of a million bounds), from its statistics log; `None` when the log has no
    /// such line.
    pub fn load_counted(
        &self,
        prog_type: ProgType,
        code: &[u8],
    ) -> Result<(LoadedProgram, Option<u64>), LoadError> {
        self.load_with_stats(prog_type, code).map(|(p, stats)| (p, stats.processed))
    }

    /// [`Kernel::load`], and the verifier's statistics ([`LoadStats`]: processed count and
    /// its own time) from its log; a refusal is loaded again for its reason.
    pub fn load_with_stats(
        &self,
        prog_type: ProgType,
        code: &[u8],
    ) -> Result<(LoadedProgram, LoadStats), LoadError> {
        let insn_cnt = u32::try_from(code.len() / 8).unwrap_or(u32::MAX);
        let mut log = vec![0u8; 4096];
        match self.load_once(prog_type, code, insn_cnt, Some((&mut log, LOG_STATS)), None) {
            Ok(fd) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(log.get(..end).unwrap_or_default());
                Ok((self.loaded(fd, prog_type), LoadStats::from_log(&text)))
            }
            // The refusal again, with its reason.
            Err(_) => self.load(prog_type, code).map(|p| (p, LoadStats::default())),
        }
    }

    /// Creates a map (`BPF_MAP_CREATE`). Per-CPU maps read and write
    /// `round_up(value_size, 8) * possible_cpus()` bytes per value.
    pub fn map_create(
        &self,
        map_type: MapType,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        map_flags: u32,
    ) -> io::Result<KernelMap> {
        let mut attr = [0u8; MAP_CREATE_ATTR_SIZE];
        put_u32(&mut attr, map_create_field::MAP_TYPE, map_type.kernel_id());
        put_u32(&mut attr, map_create_field::KEY_SIZE, key_size);
        put_u32(&mut attr, map_create_field::VALUE_SIZE, value_size);
        put_u32(&mut attr, map_create_field::MAX_ENTRIES, max_entries);
        put_u32(&mut attr, map_create_field::MAP_FLAGS, map_flags);
        // SAFETY: the attributes hold no addresses.
        let rc = unsafe { self.sys.bpf(Cmd::MapCreate, &mut attr) }?;
        let fd = i32::try_from(rc).map_err(|_| io::Error::other("descriptor out of range"))?;
        // SAFETY: a successful BPF_MAP_CREATE returns a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        self.kernel_map(fd, map_type, key_size, value_size)
    }

    /// A map descriptor with the buffer sizes its calls need (a per-CPU map's value is one
    /// 8-byte-aligned copy per possible CPU, as the kernel copies it out).
    fn kernel_map(
        &self,
        fd: OwnedFd,
        map_type: MapType,
        key_size: u32,
        value_size: u32,
    ) -> io::Result<KernelMap> {
        let percpu =
            matches!(map_type, MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash);
        let value_len = if percpu {
            (value_size as usize).next_multiple_of(8) * possible_cpus()?
        } else {
            value_size as usize
        };
        Ok(KernelMap { fd, sys: Arc::clone(&self.sys), key_size: key_size as usize, value_len })
    }

    /// Opens a pinned map (`BPF_OBJ_GET`); the caller says what the map is (its type,
    /// key and value sizes), as the buffers of later calls are sized by it.
    pub fn map_open_pinned(
        &self,
        path: &std::path::Path,
        map_type: MapType,
        key_size: u32,
        value_size: u32,
    ) -> io::Result<KernelMap> {
        use std::os::unix::ffi::OsStrExt;
        let cpath = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| einval())?;
        let mut attr = [0u8; OBJ_ATTR_SIZE];
        put_u64(&mut attr, 0, cpath.as_ptr() as u64);
        // SAFETY: the attributes point at the NUL-terminated path, which outlives the call.
        let rc = unsafe { self.sys.bpf(Cmd::ObjGet, &mut attr) }?;
        let fd = i32::try_from(rc).map_err(|_| io::Error::other("descriptor out of range"))?;
        // SAFETY: a successful BPF_OBJ_GET returns a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        self.kernel_map(fd, map_type, key_size, value_size)
    }

    fn loaded(&self, fd: OwnedFd, prog_type: ProgType) -> LoadedProgram {
        LoadedProgram { fd, prog_type, sys: Arc::clone(&self.sys) }
    }

    fn load_once(
        &self,
        prog_type: ProgType,
        code: &[u8],
        insn_cnt: u32,
        log: Option<(&mut [u8], u32)>,
        funcs: Option<(u32, &[(u32, u32)])>,
    ) -> io::Result<OwnedFd> {
        let base = prog_load_attr(prog_type, code, insn_cnt, log);
        let records: Vec<u8> = funcs
            .map(|(_, f)| f.iter().flat_map(|&(at, id)| [at, id]).flat_map(u32::to_ne_bytes))
            .into_iter()
            .flatten()
            .collect();
        let mut attr = base.to_vec();
        if let Some((btf_fd, f)) = funcs {
            attr.resize(PROG_LOAD_FUNCS_ATTR_SIZE, 0);
            let count = u32::try_from(f.len()).map_err(|_| einval())?;
            put_u32(&mut attr, load_field::PROG_BTF_FD, btf_fd);
            put_u32(&mut attr, load_field::FUNC_INFO_REC_SIZE, 8);
            put_u64(&mut attr, load_field::FUNC_INFO, records.as_ptr() as u64);
            put_u32(&mut attr, load_field::FUNC_INFO_CNT, count);
        }
        // The verifier gives up with EAGAIN, and no message, when a signal is pending for
        // the loading thread (a busy test process gets them); libbpf tries again up to 5
        // times, and so does this.
        let mut attempts = 5;
        let rc = loop {
            // SAFETY: the attributes point at `insn_cnt * 8` readable bytes of `code`, at
            // the static NUL-terminated license, when logging at the caller's writable log
            // buffer of `log_size` bytes, and with functions at `records` (8 bytes per
            // record counted); all of them outlive the call.
            match unsafe { self.sys.bpf(Cmd::ProgLoad, &mut attr) } {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && attempts > 1 => attempts -= 1,
                other => break other?,
            }
        };
        let fd = i32::try_from(rc).map_err(|_| io::Error::other("descriptor out of range"))?;
        // SAFETY: a successful BPF_PROG_LOAD returns a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Whether programs can be loaded and test-run here; the error says why not (not root,
    /// the syscall refused, seccomp, an old kernel ...). Probes with a program that returns
    /// 0, loaded as a socket filter, as XDP and as a classifier, and test-runs the last.
    pub fn available(&self) -> Result<(), String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        let who =
            if euid == 0 { String::new() } else { format!("not running as root (euid {euid}); ") };
        let mut last = None;
        for prog_type in [ProgType::SocketFilter, ProgType::Xdp, ProgType::SchedCls] {
            let prog = self.load(prog_type, &RETURN_ZERO).map_err(|e| {
                format!(
                    "{who}bpf(BPF_PROG_LOAD) refused a trivial {} program: {}",
                    prog_type.kernel_name(),
                    e.reason()
                )
            })?;
            last = Some(prog);
        }
        let prog = last.ok_or("no probe program")?;
        match prog.test_run(&[0u8; 64], 1) {
            Ok(run) if run.retval == 0 => Ok(()),
            Ok(run) => {
                Err(format!("bpf(BPF_PROG_TEST_RUN) returned {} for `return 0`", run.retval))
            }
            Err(e) => Err(format!("{who}bpf(BPF_PROG_TEST_RUN) refused: {e}")),
        }
    }
}

/// A program the kernel accepted; the descriptor is closed on drop.
pub struct LoadedProgram {
    fd: OwnedFd,
    prog_type: ProgType,
    sys: Arc<dyn BpfSys>,
}

impl fmt::Debug for LoadedProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedProgram")
            .field("fd", &self.fd)
            .field("prog_type", &self.prog_type)
            .finish_non_exhaustive()
    }
}

impl LoadedProgram {
    pub fn prog_type(&self) -> ProgType {
        self.prog_type
    }

    /// The program's descriptor (to attach it, e.g. to a socket with `SO_ATTACH_BPF`).
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.fd)
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
    pub fn test_run(&self, data: &[u8], repeat: u32) -> io::Result<TestRun> {
        let fd = u32::try_from(self.fd.as_raw_fd())
            .map_err(|_| io::Error::other("descriptor out of range"))?;
        let data_size_in = u32::try_from(data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "packet too large"))?;
        let mut attr = [0u8; TEST_RUN_ATTR_SIZE];
        put_u32(&mut attr, run_field::PROG_FD, fd);
        put_u32(&mut attr, run_field::DATA_SIZE_IN, data_size_in);
        put_u64(&mut attr, run_field::DATA_IN, data.as_ptr() as u64);
        put_u32(&mut attr, run_field::REPEAT, repeat);
        // SAFETY: `data_in` points at `data_size_in` readable bytes of `data`, which
        // outlives the call; no output buffers are given, so only `attr` is written.
        unsafe { self.sys.bpf(Cmd::ProgTestRun, &mut attr) }?;
        Ok(TestRun {
            retval: get_u32(&attr, run_field::RETVAL),
            duration_ns: get_u32(&attr, run_field::DURATION),
        })
    }

    /// Runs the program once on `data` (as [`test_run`](Self::test_run)) and returns the
    /// packet as the program left it (`data_out`: for XDP `[data, data_end)` after
    /// `bpf_xdp_adjust_head`/`_tail`; for the skb types the whole buffer, for a socket
    /// filter the frame without its Ethernet header as the program saw it). `out_capacity`
    /// bytes are offered; a longer packet fails with `ENOSPC` as the kernel says.
    pub fn test_run_out(&self, data: &[u8], out_capacity: usize) -> io::Result<(TestRun, Vec<u8>)> {
        let fd = u32::try_from(self.fd.as_raw_fd())
            .map_err(|_| io::Error::other("descriptor out of range"))?;
        let too_large = || io::Error::new(io::ErrorKind::InvalidInput, "packet too large");
        let data_size_in = u32::try_from(data.len()).map_err(|_| too_large())?;
        let size_out = u32::try_from(out_capacity).map_err(|_| too_large())?;
        let mut out = vec![0u8; out_capacity];
        let mut attr = [0u8; TEST_RUN_ATTR_SIZE];
        put_u32(&mut attr, run_field::PROG_FD, fd);
        put_u32(&mut attr, run_field::DATA_SIZE_IN, data_size_in);
        put_u64(&mut attr, run_field::DATA_IN, data.as_ptr() as u64);
        put_u32(&mut attr, run_field::DATA_SIZE_OUT, size_out);
        put_u64(&mut attr, run_field::DATA_OUT, out.as_mut_ptr() as u64);
        put_u32(&mut attr, run_field::REPEAT, 1);
        // SAFETY: `data_in` points at `data_size_in` readable bytes of `data`, `data_out`
        // at `data_size_out` writable bytes of `out`; both outlive the call.
        unsafe { self.sys.bpf(Cmd::ProgTestRun, &mut attr) }?;
        let written = get_u32(&attr, run_field::DATA_SIZE_OUT) as usize;
        out.truncate(written.min(out_capacity));
        let run = TestRun {
            retval: get_u32(&attr, run_field::RETVAL),
            duration_ns: get_u32(&attr, run_field::DURATION),
        };
        Ok((run, out))
    }
}

/// A map the kernel made; the descriptor is closed on drop. Every call checks that the
/// buffers hold what the kernel reads or writes (`key_size` bytes of key, [`value_len`]
/// bytes of value), and fails with `EINVAL` before the syscall when they do not.
///
/// [`value_len`]: KernelMap::value_len
pub struct KernelMap {
    fd: OwnedFd,
    sys: Arc<dyn BpfSys>,
    key_size: usize,
    value_len: usize,
}

impl fmt::Debug for KernelMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelMap").field("fd", &self.fd).finish_non_exhaustive()
    }
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

impl std::os::fd::AsRawFd for KernelMap {
    /// The map's descriptor, for an `lddw map_fd` that names it in a program to load.
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

/// The bytes of `union bpf_attr` sent for `BPF_OBJ_PIN`/`BPF_OBJ_GET`: pathname, bpf_fd,
/// file_flags, path_fd.
pub const OBJ_ATTR_SIZE: usize = 24;

impl KernelMap {
    /// Pins the map at `path` (`BPF_OBJ_PIN`; the path must be in a BPF file system).
    pub fn pin(&self, path: &std::path::Path) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let cpath = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| einval())?;
        let fd = u32::try_from(self.fd.as_raw_fd()).map_err(|_| einval())?;
        let mut attr = [0u8; OBJ_ATTR_SIZE];
        put_u64(&mut attr, 0, cpath.as_ptr() as u64);
        put_u32(&mut attr, 8, fd);
        // SAFETY: the attributes point at the NUL-terminated path, which outlives the call.
        unsafe { self.sys.bpf(Cmd::ObjPin, &mut attr) }.map(|_| ())
    }

    /// The bytes a value takes in the syscall (per-CPU maps: every possible CPU's).
    pub fn value_len(&self) -> usize {
        self.value_len
    }

    /// One element command: `key` (null when `None`), `value` (null when `None`), `flags`.
    fn elem(
        &self,
        cmd: Cmd,
        key: Option<&[u8]>,
        value: Option<&mut [u8]>,
        value_len: usize,
        flags: u64,
    ) -> io::Result<()> {
        if key.is_some_and(|k| k.len() < self.key_size)
            || value.as_ref().is_some_and(|v| v.len() < value_len)
        {
            return Err(einval());
        }
        let fd = u32::try_from(self.fd.as_raw_fd()).map_err(|_| einval())?;
        let mut attr = [0u8; MAP_ELEM_ATTR_SIZE];
        put_u32(&mut attr, map_elem_field::MAP_FD, fd);
        put_u64(&mut attr, map_elem_field::KEY, key.map_or(0, |k| k.as_ptr() as u64));
        put_u64(&mut attr, map_elem_field::VALUE, value.map_or(0, |v| v.as_mut_ptr() as u64));
        put_u64(&mut attr, map_elem_field::FLAGS, flags);
        // SAFETY: `key` is null or `key_size` readable bytes; `value` is null or
        // `value_len` bytes (readable for an update, writable otherwise: it is borrowed
        // mutably), enough for what `cmd` reads or writes (a next key is `key_size`
        // bytes, checked by the caller); both outlive the call.
        unsafe { self.sys.bpf(cmd, &mut attr) }.map(|_| ())
    }

    /// `BPF_MAP_LOOKUP_ELEM` into `value` (a queue's or stack's peek with `key` `None`).
    pub fn lookup(&self, key: Option<&[u8]>, value: &mut [u8]) -> io::Result<()> {
        self.elem(Cmd::MapLookupElem, key, Some(value), self.value_len, 0)
    }

    /// `BPF_MAP_UPDATE_ELEM` (a push with `key` `None`). The value is only read.
    pub fn update(&self, key: Option<&[u8]>, value: &[u8], flags: u64) -> io::Result<()> {
        let mut copy = value.to_vec();
        self.elem(Cmd::MapUpdateElem, key, Some(&mut copy), self.value_len, flags)
    }

    /// `BPF_MAP_DELETE_ELEM`.
    pub fn delete(&self, key: &[u8]) -> io::Result<()> {
        self.elem(Cmd::MapDeleteElem, Some(key), None, 0, 0)
    }

    /// `BPF_MAP_GET_NEXT_KEY`: the key after `key` (the first for `None`).
    pub fn get_next_key(&self, key: Option<&[u8]>) -> io::Result<Vec<u8>> {
        let mut next = vec![0u8; self.key_size];
        self.elem(Cmd::MapGetNextKey, key, Some(&mut next), self.key_size, 0)?;
        Ok(next)
    }

    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM` into `value` (a queue's or stack's pop with `key`
    /// `None`).
    pub fn lookup_and_delete(&self, key: Option<&[u8]>, value: &mut [u8]) -> io::Result<()> {
        self.elem(Cmd::MapLookupAndDeleteElem, key, Some(value), self.value_len, 0)
    }
}

/// Loads `code` into the kernel through the real syscall; see [`Kernel::load`].
pub fn load(prog_type: ProgType, code: &[u8]) -> Result<LoadedProgram, LoadError> {
    Kernel::new().load(prog_type, code)
}

/// Whether the real kernel can be asked here; see [`Kernel::available`].
pub fn available() -> Result<(), String> {
    Kernel::new().available()
}

/// The kernel's JIT setting (`/proc/sys/net/core/bpf_jit_enable`: 0 interpreter, 1 JIT,
/// 2 JIT with debug output), for describing a measurement.
pub fn jit_setting() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/bpf_jit_enable").ok()?.trim().parse().ok()
}

// ---------------------------------------------------------------------------------------
// The fake

/// What a [`FakeBpf`] answers to its next call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeReply {
    /// Success: a new descriptor for `BPF_PROG_LOAD`, `BPF_MAP_CREATE` and `BPF_BTF_LOAD`
    /// (an open `/dev/null`, so that closing it closes nothing else), 0 for other commands.
    Ok,
    /// Success of `BPF_PROG_TEST_RUN`: the return value and duration written back.
    Run { retval: u32, duration_ns: u32 },
    /// Failure with `errno`; `log` goes into the verifier log buffer, when there is one.
    Fail { errno: i32, log: String },
}

impl FakeReply {
    /// A failure without a log.
    pub fn errno(errno: i32) -> FakeReply {
        FakeReply::Fail { errno, log: String::new() }
    }
}

/// One call a [`FakeBpf`] received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeCall {
    pub cmd: Cmd,
    /// The attribute bytes as sent.
    pub attr: Vec<u8>,
    /// What the attributes point at: the instructions (`BPF_PROG_LOAD`) or the packet
    /// (`BPF_PROG_TEST_RUN`).
    pub data: Vec<u8>,
    /// The license (`BPF_PROG_LOAD`).
    pub license: Option<String>,
}

impl FakeCall {
    /// A 32-bit attribute field at byte offset `at`.
    pub fn u32_at(&self, at: usize) -> u32 {
        get_u32(&self.attr, at)
    }

    /// A 64-bit attribute field at byte offset `at`.
    pub fn u64_at(&self, at: usize) -> u64 {
        get_u64(&self.attr, at)
    }
}

/// A scripted stand-in for the kernel, for tests without root (as aya tests its syscalls):
/// it records every call and answers with the next of its replies, `ENOSYS` when none is
/// left.
#[derive(Debug, Default)]
pub struct FakeBpf {
    replies: Mutex<std::collections::VecDeque<FakeReply>>,
    calls: Mutex<Vec<FakeCall>>,
}

impl FakeBpf {
    pub fn new(replies: impl IntoIterator<Item = FakeReply>) -> FakeBpf {
        FakeBpf { replies: Mutex::new(replies.into_iter().collect()), calls: Mutex::default() }
    }

    /// The calls received so far.
    pub fn calls(&self) -> Vec<FakeCall> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Copies `len` bytes at `addr` (nothing for a null address).
    ///
    /// # Safety
    ///
    /// `addr` is null or valid for reading `len` bytes.
    unsafe fn read(addr: u64, len: usize) -> Vec<u8> {
        if addr == 0 || len == 0 {
            return Vec::new();
        }
        // SAFETY: the caller guarantees `len` readable bytes at the non-null `addr`.
        unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec()
    }
}

impl BpfSys for FakeBpf {
    unsafe fn bpf(&self, cmd: Cmd, attr: &mut [u8]) -> io::Result<i64> {
        let (data, license) = match cmd {
            Cmd::ProgLoad => {
                let len = (get_u32(attr, load_field::INSN_CNT) as usize).saturating_mul(8);
                let license = get_u64(attr, load_field::LICENSE);
                // SAFETY: the trait's contract: the instructions are `insn_cnt * 8`
                // readable bytes and the license a NUL-terminated string, for this call.
                let data = unsafe { Self::read(get_u64(attr, load_field::INSNS), len) };
                let license = (license != 0).then(|| {
                    // SAFETY: as above.
                    unsafe { CStr::from_ptr(license as *const libc::c_char) }
                        .to_string_lossy()
                        .into_owned()
                });
                (data, license)
            }
            Cmd::ProgTestRun => {
                let len = get_u32(attr, run_field::DATA_SIZE_IN) as usize;
                // SAFETY: the trait's contract: `data_size_in` readable bytes at `data_in`.
                (unsafe { Self::read(get_u64(attr, run_field::DATA_IN), len) }, None)
            }
            // The map commands: the attributes say it all (the fake never reads keys).
            _ => (Vec::new(), None),
        };
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push(FakeCall {
            cmd,
            attr: attr.to_vec(),
            data,
            license,
        });
        let reply = self.replies.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        match reply {
            None => Err(io::Error::from_raw_os_error(libc::ENOSYS)),
            Some(FakeReply::Ok) if matches!(cmd, Cmd::ProgLoad | Cmd::MapCreate | Cmd::BtfLoad) => {
                Ok(i64::from(File::open("/dev/null")?.into_raw_fd()))
            }
            Some(FakeReply::Ok) => Ok(0),
            Some(FakeReply::Run { retval, duration_ns }) => {
                put_u32(attr, run_field::RETVAL, retval);
                put_u32(attr, run_field::DURATION, duration_ns);
                Ok(0)
            }
            Some(FakeReply::Fail { errno, log }) => {
                let buf = get_u64(attr, load_field::LOG_BUF);
                let size = get_u32(attr, load_field::LOG_SIZE) as usize;
                if cmd == Cmd::ProgLoad && buf != 0 && size > 0 {
                    let n = log.len().min(size - 1);
                    // SAFETY: the trait's contract: `log_size` writable bytes at `log_buf`;
                    // `n + 1 <= log_size` bytes are written (the text and a NUL).
                    unsafe {
                        std::ptr::copy_nonoverlapping(log.as_ptr(), buf as *mut u8, n);
                        (buf as *mut u8).add(n).write(0);
                    }
                }
                Err(io::Error::from_raw_os_error(errno))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_processed_count_and_time_are_read_from_the_statistics_lines() {
        let log = "verification time 1303 usec\nstack depth 64+8\nprocessed 48454 insns (limit \
                   1000000) max_states_per_insn 29 total_states 1307 peak_states 1307\n";
        let stats = super::LoadStats::from_log(log);
        assert_eq!(stats.processed, Some(48454));
        assert_eq!(stats.verification_us, Some(1303));
        let none = super::LoadStats::from_log("stack depth 8\n");
        assert_eq!((none.processed, none.verification_us), (None, None));
    }

    use super::*;

    /// `r0 = __sk_buff.len` (offset 0); exit.
    const RETURN_LEN: [u8; 16] = [0x61, 0x10, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];

    fn fake(replies: impl IntoIterator<Item = FakeReply>) -> (Arc<FakeBpf>, Kernel) {
        let fake = Arc::new(FakeBpf::new(replies));
        let kernel = Kernel::with_sys(fake.clone());
        (fake, kernel)
    }

    #[test]
    fn a_load_encodes_the_prog_load_attributes() {
        let (fake, kernel) = fake([FakeReply::Ok]);
        let prog = kernel.load(ProgType::Xdp, &RETURN_ZERO).unwrap();
        assert_eq!(prog.prog_type(), ProgType::Xdp);
        let calls = fake.calls();
        assert_eq!(calls.len(), 1);
        let call = &calls[0];
        assert_eq!(call.cmd, Cmd::ProgLoad);
        assert_eq!(call.attr.len(), PROG_LOAD_ATTR_SIZE);
        assert_eq!(call.u32_at(load_field::PROG_TYPE), 6);
        assert_eq!(call.u32_at(load_field::INSN_CNT), 2);
        assert_eq!(call.data, RETURN_ZERO);
        assert_eq!(call.license.as_deref(), Some("GPL"));
        // No log on the first attempt, and nothing past the fields set.
        assert_eq!(call.u32_at(load_field::LOG_LEVEL), 0);
        assert_eq!(call.u32_at(load_field::LOG_SIZE), 0);
        assert_eq!(call.u64_at(load_field::LOG_BUF), 0);
        assert!(call.attr[40..].iter().all(|&b| b == 0));
        assert_eq!(Cmd::ProgLoad.raw(), 5);
        assert_eq!(Cmd::ProgTestRun.raw(), 10);
        assert_eq!(
            [ProgType::SocketFilter, ProgType::SchedCls, ProgType::Xdp].map(ProgType::kernel_id),
            [1, 3, 6]
        );
    }

    #[test]
    fn a_load_with_functions_sends_the_btf_then_the_func_info() {
        let (fake, kernel) = fake([FakeReply::Ok, FakeReply::Ok]);
        let btf = [1u8, 2, 3];
        let funcs = [(0, 3), (5, 4)];
        let info = FuncInfo { btf: &btf, funcs: &funcs };
        kernel.load_with_funcs(ProgType::Xdp, &RETURN_ZERO, info).unwrap();
        let calls = fake.calls();
        let cmds: Vec<Cmd> = calls.iter().map(|c| c.cmd).collect();
        assert_eq!(cmds, [Cmd::BtfLoad, Cmd::ProgLoad]);
        assert_eq!(Cmd::BtfLoad.raw(), 18);
        assert_eq!(calls[0].u32_at(16), 3);
        let load = &calls[1];
        assert_eq!(load.attr.len(), PROG_LOAD_FUNCS_ATTR_SIZE);
        assert_ne!(load.u32_at(load_field::PROG_BTF_FD), 0);
        assert_eq!(load.u32_at(load_field::FUNC_INFO_REC_SIZE), 8);
        assert_eq!(load.u32_at(load_field::FUNC_INFO_CNT), 2);
        assert_ne!(load.u64_at(load_field::FUNC_INFO), 0);
    }

    #[test]
    fn a_refusal_is_retried_with_the_verifier_log() {
        let log = "0: (95) exit\nR0 !read_ok\nprocessed 1 insns (limit 1000000)\n";
        let (fake, kernel) = fake([
            FakeReply::errno(libc::EACCES),
            FakeReply::Fail { errno: libc::EACCES, log: log.into() },
        ]);
        let err = kernel.load(ProgType::SchedCls, &RETURN_ZERO[8..]).unwrap_err();
        assert_eq!(err.error.raw_os_error(), Some(libc::EACCES));
        assert_eq!(err.log, log);
        assert_eq!(err.reason(), "R0 !read_ok");
        let text = err.to_string();
        assert!(text.starts_with("bpf(BPF_PROG_LOAD): "), "{text}");
        assert!(text.contains("\nverifier log:\n0: (95) exit"), "{text}");
        let calls = fake.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].u32_at(load_field::LOG_LEVEL), 1);
        assert_eq!(calls[1].u32_at(load_field::LOG_SIZE), FIRST_LOG as u32);
        assert_ne!(calls[1].u64_at(load_field::LOG_BUF), 0);
        assert_eq!(calls[1].u32_at(load_field::PROG_TYPE), 3);
    }

    #[test]
    fn a_log_that_does_not_fit_is_asked_for_again_at_the_maximum() {
        let (fake, kernel) = fake([
            FakeReply::errno(libc::EINVAL),
            FakeReply::errno(libc::ENOSPC),
            FakeReply::Fail { errno: libc::EINVAL, log: "long story".into() },
        ]);
        let err = kernel.load(ProgType::Xdp, &RETURN_ZERO).unwrap_err();
        // The error is the first attempt's, the log the last one's.
        assert_eq!(err.error.raw_os_error(), Some(libc::EINVAL));
        assert_eq!(err.log, "long story");
        let sizes: Vec<u32> = fake.calls().iter().map(|c| c.u32_at(load_field::LOG_SIZE)).collect();
        assert_eq!(sizes, [0, FIRST_LOG as u32, MAX_LOG as u32]);
    }

    #[test]
    fn a_program_accepted_the_second_time_is_kept_and_an_empty_log_reads_as_the_errno() {
        let (_, kernel) = fake([FakeReply::errno(libc::EAGAIN), FakeReply::Ok]);
        assert!(kernel.load(ProgType::Xdp, &RETURN_ZERO).is_ok());
        let (_, kernel) = fake([FakeReply::errno(libc::EPERM), FakeReply::errno(libc::EPERM)]);
        let err = kernel.load(ProgType::Xdp, &RETURN_ZERO).unwrap_err();
        assert!(err.log.is_empty());
        assert!(err.reason().contains("not permitted"), "{}", err.reason());
        assert!(!err.to_string().contains("verifier log"));
    }

    #[test]
    fn malformed_code_is_refused_before_the_syscall() {
        let (fake, kernel) = fake([]);
        let err = kernel.load(ProgType::SchedCls, &RETURN_ZERO[..12]).unwrap_err();
        assert_eq!(err.error.kind(), io::ErrorKind::InvalidInput);
        assert!(kernel.load(ProgType::Xdp, &[]).is_err());
        assert!(fake.calls().is_empty());
    }

    #[test]
    fn a_test_run_with_data_out_offers_the_buffer() {
        let (fake, kernel) = fake([FakeReply::Ok, FakeReply::Run { retval: 2, duration_ns: 1 }]);
        let prog = kernel.load(ProgType::Xdp, &RETURN_LEN).unwrap();
        let packet = [0x11u8; 60];
        let (run, out) = prog.test_run_out(&packet, 100).unwrap();
        assert_eq!(run.retval, 2);
        // The fake leaves data_size_out as offered: the whole (zeroed) buffer comes back.
        assert_eq!(out.len(), 100);
        let call = &fake.calls()[1];
        assert_eq!(call.u32_at(run_field::DATA_SIZE_IN), 60);
        assert_eq!(call.u32_at(run_field::DATA_SIZE_OUT), 100);
        assert_ne!(call.u64_at(run_field::DATA_OUT), 0);
        assert_eq!(call.u32_at(run_field::REPEAT), 1);
        assert_eq!(call.data, packet);
    }

    #[test]
    fn a_test_run_encodes_its_attributes_and_reads_the_results_back() {
        let (fake, kernel) = fake([FakeReply::Ok, FakeReply::Run { retval: 77, duration_ns: 12 }]);
        let prog = kernel.load(ProgType::SchedCls, &RETURN_LEN).unwrap();
        let packet = [0xabu8; 77];
        let run = prog.test_run(&packet, 1000).unwrap();
        assert_eq!(run, TestRun { retval: 77, duration_ns: 12 });
        let calls = fake.calls();
        let call = &calls[1];
        assert_eq!(call.cmd, Cmd::ProgTestRun);
        assert_eq!(call.attr.len(), TEST_RUN_ATTR_SIZE);
        assert_eq!(call.u32_at(run_field::PROG_FD), prog.fd.as_raw_fd() as u32);
        assert_eq!(call.u32_at(run_field::DATA_SIZE_IN), 77);
        assert_eq!(call.u32_at(run_field::REPEAT), 1000);
        assert_eq!(call.data, packet);
        assert_eq!(call.u32_at(run_field::RETVAL), 0);
        // Everything but the fields set stays zero (the kernel refuses stray bytes).
        let set = [0..4, 8..12, 16..24, 32..36];
        for (k, &b) in call.attr.iter().enumerate() {
            assert!(b == 0 || set.iter().any(|r| r.contains(&k)), "byte {k} is {b}");
        }
    }

    #[test]
    fn a_refused_test_run_is_an_error_with_the_errno() {
        let (_, kernel) = fake([FakeReply::Ok, FakeReply::errno(libc::EINVAL)]);
        let prog = kernel.load(ProgType::SchedCls, &RETURN_ZERO).unwrap();
        let err = prog.test_run(&[0u8; 10], 1).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        // The script ran out: ENOSYS.
        assert_eq!(prog.test_run(&[0u8; 64], 1).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
    }

    #[test]
    fn the_probe_says_why_the_kernel_cannot_be_asked() {
        let (_, kernel) = fake([FakeReply::errno(libc::EPERM), FakeReply::errno(libc::EPERM)]);
        let reason = kernel.available().unwrap_err();
        assert!(reason.contains("BPF_PROG_TYPE_SOCKET_FILTER"), "{reason}");
        assert!(reason.contains("not permitted"), "{reason}");

        let ok = [FakeReply::Ok, FakeReply::Ok, FakeReply::Ok];
        let (_, kernel) =
            fake(ok.iter().cloned().chain([FakeReply::Run { retval: 0, duration_ns: 1 }]));
        assert_eq!(kernel.available(), Ok(()));
        let (_, kernel) =
            fake(ok.iter().cloned().chain([FakeReply::Run { retval: 3, duration_ns: 1 }]));
        assert!(kernel.available().unwrap_err().contains("returned 3"));
        let (_, kernel) = fake(ok.iter().cloned().chain([FakeReply::errno(libc::EINVAL)]));
        assert!(kernel.available().unwrap_err().contains("BPF_PROG_TEST_RUN"));
    }

    #[test]
    fn loads_and_test_runs_when_available() {
        if let Err(reason) = available() {
            println!("SKIPPED: loads_and_test_runs_when_available: {reason}");
            return;
        }
        let prog = load(ProgType::SchedCls, &RETURN_LEN).unwrap();
        assert_eq!(prog.prog_type(), ProgType::SchedCls);
        let run = prog.test_run(&[0u8; 77], 10).unwrap();
        assert_eq!(run.retval, 77);
        let xdp = load(ProgType::Xdp, &RETURN_ZERO).unwrap();
        assert_eq!(xdp.test_run(&[0u8; 60], 1).unwrap().retval, 0);
        // mov32 r0, 2; exit
        let pass = [0xb4, 0, 0, 0, 2, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(load(ProgType::Xdp, &pass).unwrap().test_run(&[0u8; 64], 1).unwrap().retval, 2);
    }

    #[test]
    fn refusals_carry_the_verifier_log() {
        if let Err(reason) = available() {
            println!("SKIPPED: refusals_carry_the_verifier_log: {reason}");
            return;
        }
        // `exit` without setting r0: the verifier refuses to read an uninitialised r0.
        let err = load(ProgType::Xdp, &RETURN_ZERO[8..]).unwrap_err();
        assert_eq!(err.error.raw_os_error(), Some(libc::EACCES), "{err}");
        assert!(err.log.contains("R0"), "{err}");
        assert!(err.reason().contains("R0"), "{}", err.reason());
        assert!(err.to_string().contains("verifier log"));
    }

    #[test]
    fn map_commands_encode_their_attributes() {
        let (fake, kernel) = fake([FakeReply::Ok, FakeReply::Ok, FakeReply::errno(libc::ENOENT)]);
        let map = kernel.map_create(MapType::Hash, 4, 8, 16, 1).unwrap();
        let key = 7u32.to_ne_bytes();
        map.update(Some(&key), &[1; 8], 2).unwrap();
        let mut value = [0u8; 8];
        let err = map.lookup(Some(&key), &mut value).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        // Too short a key is refused before the syscall (no fourth call).
        assert_eq!(map.delete(&[0; 3]).unwrap_err().raw_os_error(), Some(libc::EINVAL));
        let calls = fake.calls();
        assert_eq!(
            calls.iter().map(|c| c.cmd).collect::<Vec<_>>(),
            [Cmd::MapCreate, Cmd::MapUpdateElem, Cmd::MapLookupElem]
        );
        let create = &calls[0];
        assert_eq!(create.attr.len(), MAP_CREATE_ATTR_SIZE);
        let fields = [
            map_create_field::MAP_TYPE,
            map_create_field::KEY_SIZE,
            map_create_field::VALUE_SIZE,
            map_create_field::MAX_ENTRIES,
            map_create_field::MAP_FLAGS,
        ];
        assert_eq!(fields.map(|f| create.u32_at(f)), [1, 4, 8, 16, 1]);
        let update = &calls[1];
        assert_eq!(update.attr.len(), MAP_ELEM_ATTR_SIZE);
        assert_eq!(update.u64_at(map_elem_field::KEY), key.as_ptr() as u64);
        assert_ne!(update.u64_at(map_elem_field::VALUE), 0);
        assert_eq!(update.u64_at(map_elem_field::FLAGS), 2);
        assert_eq!(calls[2].u64_at(map_elem_field::VALUE), value.as_ptr() as u64);
        assert_eq!(
            [Cmd::MapCreate, Cmd::MapGetNextKey, Cmd::MapLookupAndDeleteElem].map(Cmd::raw),
            [0, 4, 21]
        );
    }
}
