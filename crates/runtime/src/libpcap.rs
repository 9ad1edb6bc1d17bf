//! The system libpcap, loaded at run time: `pcap_compile` and `bpf_filter`, the baseline
//! weir's filter engines are measured against (`weir-bench filters`, `weir bench`).
//!
//! DESIGN.md: no system library is a build requirement of weir, so libpcap is never linked.
//! It is opened with `dlopen` the first time it is asked for (`libpcap.so.0.8`, Debian's
//! name, then `libpcap.so.1` and `libpcap.so`), and a machine without it gets a plain
//! `Err("libpcap not found: ...")` instead of a binary that does not start.
//!
//! `bpf_filter` trusts its program completely, so it only ever runs a [`ValidProgram`]: a
//! program that libpcap's own `bpf_validate` accepted. Tests link libpcap through
//! `weir-testkit` instead; this module is for binaries.
//!
//! ```no_run
//! use weir_runtime::libpcap;
//! let insns = libpcap::compile("tcp port 22", 1, true, libpcap::NETMASK_UNKNOWN)?;
//! let prog = libpcap::validate(&insns)?;
//! let frame = [0u8; 60];
//! assert_eq!(libpcap::filter(&prog, &frame, 60), 0);
//! # Ok::<(), String>(())
//! ```

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

use libloading::Library;

/// One classic BPF instruction, laid out as libpcap's `struct bpf_insn`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BpfInsn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// libpcap's `struct bpf_program`.
#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut BpfInsn,
}

/// The snapshot length compiled filters are built for, which is also what they return when
/// they accept (libpcap's default).
pub const SNAPLEN: u32 = 262_144;

/// `PCAP_NETMASK_UNKNOWN`: no netmask (`ip broadcast` then fails to compile).
pub const NETMASK_UNKNOWN: u32 = 0xffff_ffff;

/// The names tried, in order: Debian and Ubuntu ship `libpcap.so.0.8`, most other
/// distributions `libpcap.so.1`, and `libpcap.so` exists where the development files are.
const LIBRARY_NAMES: [&str; 3] = ["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"];

type PcapOpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type PcapCompile =
    unsafe extern "C" fn(*mut c_void, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
type PcapGeterr = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type PcapFreecode = unsafe extern "C" fn(*mut BpfProgram);
type PcapClose = unsafe extern "C" fn(*mut c_void);
type BpfFilter = unsafe extern "C" fn(*const BpfInsn, *const u8, c_uint, c_uint) -> c_uint;
type BpfValidate = unsafe extern "C" fn(*const BpfInsn, c_int) -> c_int;
type PcapLibVersion = unsafe extern "C" fn() -> *const c_char;

/// The opened library and the entry points weir uses. It lives in a static and is never
/// closed, so the function pointers copied out of it stay valid for the whole process.
struct Libpcap {
    _library: Library,
    /// Which of [`LIBRARY_NAMES`] opened.
    name: &'static str,
    open_dead: PcapOpenDead,
    compile: PcapCompile,
    geterr: PcapGeterr,
    freecode: PcapFreecode,
    close: PcapClose,
    filter: BpfFilter,
    validate: BpfValidate,
    lib_version: PcapLibVersion,
}

static LIBPCAP: OnceLock<Result<Libpcap, String>> = OnceLock::new();

/// libpcap releases before 1.8 keep the parser's state in globals: one compile at a time.
static COMPILE_LOCK: Mutex<()> = Mutex::new(());

fn library() -> Result<&'static Libpcap, String> {
    LIBPCAP.get_or_init(open).as_ref().map_err(Clone::clone)
}

fn open() -> Result<Libpcap, String> {
    let mut failures = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: opening libpcap runs its ELF initialisers, which only set up the
        // library's own state; nothing of this process is touched before it is loaded.
        match unsafe { Library::new(name) } {
            Ok(library) => return resolve(library, name),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    Err(format!(
        "libpcap not found: {} (install libpcap, e.g. `apt-get install libpcap0.8`)",
        failures.join("; ")
    ))
}

/// Looks up every entry point; a library missing one is reported as such.
fn resolve(library: Library, name: &'static str) -> Result<Libpcap, String> {
    fn symbol<T: Copy>(library: &Library, lib: &str, symbol: &str) -> Result<T, String> {
        let c_name = format!("{symbol}\0");
        // SAFETY: each call site names the C prototype of `symbol` as libpcap's pcap.h
        // declares it (the type aliases above), so the pointer is used at its real type.
        unsafe { library.get::<T>(c_name.as_bytes()) }
            .map(|s| *s)
            .map_err(|e| format!("libpcap ({lib}) lacks {symbol}: {e}"))
    }
    Ok(Libpcap {
        open_dead: symbol(&library, name, "pcap_open_dead")?,
        compile: symbol(&library, name, "pcap_compile")?,
        geterr: symbol(&library, name, "pcap_geterr")?,
        freecode: symbol(&library, name, "pcap_freecode")?,
        close: symbol(&library, name, "pcap_close")?,
        filter: symbol(&library, name, "bpf_filter")?,
        validate: symbol(&library, name, "bpf_validate")?,
        lib_version: symbol(&library, name, "pcap_lib_version")?,
        name,
        _library: library,
    })
}

/// Whether libpcap can be loaded; the error says why not.
pub fn available() -> Result<(), String> {
    library().map(|_| ())
}

/// libpcap's own description of itself (`pcap_lib_version`), with the file that opened.
pub fn version() -> Result<String, String> {
    let lib = library()?;
    // SAFETY: pcap_lib_version takes nothing and returns a static NUL-terminated string.
    let text = unsafe { CStr::from_ptr((lib.lib_version)()) }.to_string_lossy().into_owned();
    Ok(format!("{text} ({})", lib.name))
}

/// Compiles `expr` for link type `dlt` (a `DLT_` value) with `pcap_compile`, optimized or
/// not; `netmask` is the IPv4 netmask in host order, or [`NETMASK_UNKNOWN`]. `Err` holds
/// libpcap's message, or why libpcap could not be loaded.
pub fn compile(expr: &str, dlt: i32, optimize: bool, netmask: u32) -> Result<Vec<BpfInsn>, String> {
    let lib = library()?;
    let text = CString::new(expr).map_err(|_| "the expression contains a NUL byte".to_string())?;
    let _guard = COMPILE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: pcap_open_dead takes two integers and allocates a handle; null is checked.
    let handle = unsafe { (lib.open_dead)(dlt, SNAPLEN as c_int) };
    if handle.is_null() {
        return Err(format!("pcap_open_dead({dlt}) failed"));
    }
    let mut prog = BpfProgram { bf_len: 0, bf_insns: std::ptr::null_mut() };
    // SAFETY: `handle` is live, `prog` is a valid out-parameter, and `text` is a
    // NUL-terminated string that outlives the call; the compile lock is held.
    let rc =
        unsafe { (lib.compile)(handle, &mut prog, text.as_ptr(), c_int::from(optimize), netmask) };
    let result = if rc != 0 {
        // SAFETY: after a failed compile, pcap_geterr returns the handle's NUL-terminated
        // message buffer, which stays valid until pcap_close below; it is copied first.
        let message = unsafe { CStr::from_ptr((lib.geterr)(handle)) };
        Err(message.to_string_lossy().into_owned())
    } else {
        let insns = if prog.bf_insns.is_null() {
            Vec::new()
        } else {
            // SAFETY: a successful compile leaves `bf_len` initialised instructions at
            // `bf_insns`, valid until pcap_freecode, which runs after this copy.
            unsafe { std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize) }.to_vec()
        };
        // SAFETY: `prog` came from a successful pcap_compile and is freed exactly once.
        unsafe { (lib.freecode)(&mut prog) };
        Ok(insns)
    };
    // SAFETY: `handle` is live and closed exactly once, after its last use.
    unsafe { (lib.close)(handle) };
    result
}

/// A program libpcap's `bpf_validate` accepted: the only kind [`filter`] runs.
#[derive(Debug, Clone)]
pub struct ValidProgram {
    insns: Box<[BpfInsn]>,
    filter: BpfFilter,
}

impl ValidProgram {
    pub fn insns(&self) -> &[BpfInsn] {
        &self.insns
    }
}

/// Checks `insns` with libpcap's `bpf_validate` (jumps inside the program, scratch indices
/// in range, a final return, no division by a constant 0).
pub fn validate(insns: &[BpfInsn]) -> Result<ValidProgram, String> {
    let lib = library()?;
    if insns.is_empty() {
        return Err("bpf_validate: the program is empty".into());
    }
    let len = c_int::try_from(insns.len())
        .map_err(|_| format!("bpf_validate: {} instructions is too many", insns.len()))?;
    // SAFETY: `insns` holds `len` initialised instructions; bpf_validate only reads them.
    if unsafe { (lib.validate)(insns.as_ptr(), len) } == 0 {
        return Err("bpf_validate refuses the program".into());
    }
    Ok(ValidProgram { insns: insns.into(), filter: lib.filter })
}

/// libpcap's verdict (`bpf_filter`) for one packet: `data` is the captured bytes, `wire_len`
/// the packet's length on the wire. 0 rejects; anything else is the snapshot length to keep.
pub fn filter(prog: &ValidProgram, data: &[u8], wire_len: u32) -> u32 {
    // A record longer than 4 GiB cannot exist; offering fewer bytes than there are is safe.
    let caplen = c_uint::try_from(data.len()).unwrap_or(c_uint::MAX);
    // SAFETY: `prog` passed bpf_validate, so bpf_filter stays inside the program and its
    // scratch memory, and checks every packet load against `caplen`, which never exceeds
    // the bytes `data` holds. `prog.filter` points into the never-closed static library.
    unsafe { (prog.filter)(prog.insns.as_ptr(), data.as_ptr(), wire_len, caplen) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/TCP frame from port 40000 to `dst_port`, no payload.
    fn tcp_frame(dst_port: u16) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[12] = 0x08; // IPv4
        f[14] = 0x45;
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[23] = 6; // TCP
        f[34..36].copy_from_slice(&40000u16.to_be_bytes());
        f[36..38].copy_from_slice(&dst_port.to_be_bytes());
        f[46] = 0x50;
        f
    }

    #[test]
    fn compiles_validates_and_filters_when_present() {
        if let Err(reason) = available() {
            println!("SKIPPED: compiles_validates_and_filters_when_present: {reason}");
            return;
        }
        let insns = compile("tcp port 22", 1, true, NETMASK_UNKNOWN).unwrap();
        let prog = validate(&insns).unwrap();
        assert_eq!(filter(&prog, &tcp_frame(22), 54), SNAPLEN);
        assert_eq!(filter(&prog, &tcp_frame(23), 54), 0);
        // Cut inside the TCP header: the port load is out of bounds and rejects.
        assert_eq!(filter(&prog, &tcp_frame(22)[..36], 54), 0);
        assert!(version().unwrap().contains("libpcap"));
    }

    #[test]
    fn compile_errors_and_invalid_programs_are_errors() {
        if let Err(reason) = available() {
            println!("SKIPPED: compile_errors_and_invalid_programs_are_errors: {reason}");
            return;
        }
        let err = compile("tcp port", 1, true, NETMASK_UNKNOWN).unwrap_err();
        assert!(err.contains("syntax error"), "{err}");
        assert!(compile("a\0b", 1, true, NETMASK_UNKNOWN).is_err());
        assert!(validate(&[]).is_err());
        // `ja` past the end, then a return.
        let bad = [
            BpfInsn { code: 0x05, jt: 0, jf: 0, k: 5 },
            BpfInsn { code: 0x06, jt: 0, jf: 0, k: 0 },
        ];
        assert!(validate(&bad).is_err());
    }
}
