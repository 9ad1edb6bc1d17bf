//! The system libpcap, loaded at run time: `pcap_compile` (optimized or not, any link type,
//! any netmask; as `tcpdump -r` compiles for a capture file, or as for a live Linux
//! capture), `bpf_validate` and `bpf_filter`. It is the semantic oracle of pflang and
//! classic BPF in weir's differential tests and the baseline `weir-bench` measures.
//!
//! DESIGN.md: no system library is a build requirement of weir, so libpcap is never linked.
//! It is opened with `dlopen` the first time it is asked for ([`LIBRARY_NAMES`], in order)
//! and stays open for the life of the process. A machine without it gets a plain
//! `Err("libpcap not found: ...")` from [`load`]; tests that cannot do without it call
//! [`required`], which fails the test with that message (CI installs libpcap-dev), and tests
//! that can print `SKIPPED: <name>: <reason>` from [`available`].
//!
//! `bpf_filter` trusts its program completely, so it only ever runs a program libpcap's own
//! `bpf_validate` accepted: [`Libpcap::validate`] makes a [`ValidProgram`], and
//! [`Libpcap::run`] validates before it filters.
//!
//! ```no_run
//! use weir_sys::libpcap;
//! let pcap = libpcap::load()?;
//! let insns = pcap.compile("tcp port 22", 1, true)?;
//! let prog = pcap.validate(&insns)?;
//! assert_eq!(prog.filter(&[0u8; 60], 60), 0);
//! assert_eq!(pcap.run(&insns, &[0u8; 60], 60), Some(0));
//! # Ok::<(), String>(())
//! ```

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

use libloading::Library;

/// One classic BPF instruction, laid out as libpcap's `struct bpf_insn` (the kernel's
/// `struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
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
pub const LIBRARY_NAMES: [&str; 3] = ["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"];

type PcapOpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type PcapFopenOffline = unsafe extern "C" fn(*mut libc::FILE, *mut c_char) -> *mut c_void;
type PcapDatalink = unsafe extern "C" fn(*mut c_void) -> c_int;
type PcapCompile =
    unsafe extern "C" fn(*mut c_void, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
type PcapGeterr = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type PcapFreecode = unsafe extern "C" fn(*mut BpfProgram);
type PcapClose = unsafe extern "C" fn(*mut c_void);
type BpfFilter = unsafe extern "C" fn(*const BpfInsn, *const u8, c_uint, c_uint) -> c_uint;
type BpfValidate = unsafe extern "C" fn(*const BpfInsn, c_int) -> c_int;
type PcapLibVersion = unsafe extern "C" fn() -> *const c_char;

/// The opened library and the entry points weir uses. The one instance lives in a static
/// and is never closed, so the function pointers copied out of it stay valid for the whole
/// process.
pub struct Libpcap {
    _library: Library,
    /// Which of [`LIBRARY_NAMES`] opened.
    name: &'static str,
    open_dead: PcapOpenDead,
    fopen_offline: PcapFopenOffline,
    datalink: PcapDatalink,
    compile: PcapCompile,
    geterr: PcapGeterr,
    freecode: PcapFreecode,
    close: PcapClose,
    filter: BpfFilter,
    validate: BpfValidate,
    lib_version: PcapLibVersion,
}

impl std::fmt::Debug for Libpcap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Libpcap").field("name", &self.name).finish_non_exhaustive()
    }
}

static LIBPCAP: OnceLock<Result<Libpcap, String>> = OnceLock::new();

/// libpcap releases before 1.8 keep the parser's state in globals: one compile at a time.
static COMPILE_LOCK: Mutex<()> = Mutex::new(());

/// The system libpcap, opened on first use; the error says why it could not be.
pub fn load() -> Result<&'static Libpcap, String> {
    LIBPCAP.get_or_init(open).as_ref().map_err(Clone::clone)
}

/// Whether libpcap can be loaded; the error says why not (for a `SKIPPED:` line).
pub fn available() -> Result<(), String> {
    load().map(|_| ())
}

/// For tests that need the oracle: libpcap, or a panic that says it is missing and how to
/// install it (CI installs libpcap-dev, so there this never fails).
pub fn required() -> &'static Libpcap {
    match load() {
        Ok(lib) => lib,
        Err(reason) => panic!("this test needs the system libpcap as its oracle: {reason}"),
    }
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
        fopen_offline: symbol(&library, name, "pcap_fopen_offline")?,
        datalink: symbol(&library, name, "pcap_datalink")?,
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

impl Libpcap {
    /// Which file opened (one of [`LIBRARY_NAMES`]).
    pub fn file_name(&self) -> &'static str {
        self.name
    }

    /// libpcap's own description of itself (`pcap_lib_version`), with the file that opened.
    pub fn version(&self) -> String {
        // SAFETY: pcap_lib_version takes nothing and returns a static NUL-terminated string.
        let text = unsafe { CStr::from_ptr((self.lib_version)()) };
        format!("{} ({})", text.to_string_lossy(), self.name)
    }

    /// Compiles `expr` for link type `dlt` (a `DLT_` value) with `pcap_compile`, optimized
    /// or not, netmask unknown, as `tcpdump -r FILE` compiles it (for a capture file, as weir
    /// filters them): the oracle of weir's differential tests. `Err` holds libpcap's message
    /// (`pcap_geterr`).
    pub fn compile(&self, expr: &str, dlt: i32, optimize: bool) -> Result<Vec<BpfInsn>, String> {
        self.compile_with_netmask(expr, dlt, optimize, NETMASK_UNKNOWN)
    }

    /// [`Libpcap::compile`] with an IPv4 netmask in host order (for `ip broadcast`), or
    /// [`NETMASK_UNKNOWN`].
    pub fn compile_with_netmask(
        &self,
        expr: &str,
        dlt: i32,
        optimize: bool,
        netmask: u32,
    ) -> Result<Vec<BpfInsn>, String> {
        let text =
            CString::new(expr).map_err(|_| "the expression contains a NUL byte".to_string())?;
        let _guard = COMPILE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // The header stays alive until compile_on closes the stream over it (pcap_close).
        let mut header = savefile_header(dlt)?;
        let handle = self.open_savefile(&mut header, dlt)?;
        // SAFETY: `handle` is live, owned here, and the compile lock is held.
        unsafe { self.compile_on(handle, &text, optimize, netmask) }
    }

    /// Compiles `expr` for link type `dlt` as libpcap compiles for a live capture on Linux
    /// (a `pcap_open_dead` handle, no capture file): `inbound`, `outbound` and `ifindex`
    /// become loads of Linux ancillary data (`SKF_AD_*`, what a kernel socket filter reads)
    /// on every link type, and `ip6` on BSD loopback tests Linux's `AF_INET6`. Not the pflang
    /// oracle ([`Libpcap::compile`] is): weir-cbpf's tests take their kernel-metadata
    /// programs from here. Netmask unknown.
    pub fn compile_live(
        &self,
        expr: &str,
        dlt: i32,
        optimize: bool,
    ) -> Result<Vec<BpfInsn>, String> {
        let text =
            CString::new(expr).map_err(|_| "the expression contains a NUL byte".to_string())?;
        let _guard = COMPILE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: pcap_open_dead takes two integers and allocates a handle; null is checked.
        let handle = unsafe { (self.open_dead)(dlt, SNAPLEN as c_int) };
        if handle.is_null() {
            return Err(format!("pcap_open_dead({dlt}) failed"));
        }
        // SAFETY: `handle` is live, owned here, and the compile lock is held.
        unsafe { self.compile_on(handle, &text, optimize, NETMASK_UNKNOWN) }
    }

    /// `pcap_compile` on `handle`, which it then closes.
    ///
    /// # Safety
    /// `handle` is a live handle the caller owns and does not use afterwards, and the
    /// caller holds `COMPILE_LOCK`.
    unsafe fn compile_on(
        &self,
        handle: *mut c_void,
        text: &CStr,
        optimize: bool,
        netmask: u32,
    ) -> Result<Vec<BpfInsn>, String> {
        let mut prog = BpfProgram { bf_len: 0, bf_insns: std::ptr::null_mut() };
        // SAFETY: `handle` is live, `prog` is a valid out-parameter, and `text` is a
        // NUL-terminated string that outlives the call; the compile lock is held.
        let rc = unsafe {
            (self.compile)(handle, &mut prog, text.as_ptr(), c_int::from(optimize), netmask)
        };
        let result = if rc != 0 {
            // SAFETY: after a failed compile, pcap_geterr returns the handle's
            // NUL-terminated message buffer, which stays valid until pcap_close below; it
            // is copied first.
            let message = unsafe { CStr::from_ptr((self.geterr)(handle)) };
            Err(message.to_string_lossy().into_owned())
        } else {
            let insns = if prog.bf_insns.is_null() || prog.bf_len == 0 {
                Vec::new()
            } else {
                // SAFETY: a successful compile leaves `bf_len` initialised instructions at
                // `bf_insns`, valid until pcap_freecode, which runs after this copy.
                unsafe { std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize) }.to_vec()
            };
            // SAFETY: `prog` came from a successful pcap_compile and is freed exactly once.
            unsafe { (self.freecode)(&mut prog) };
            Ok(insns)
        };
        // SAFETY: `handle` is live and closed exactly once, after its last use.
        unsafe { (self.close)(handle) };
        result
    }

    /// A handle that compiles as `tcpdump -r FILE` does: libpcap reading an empty capture
    /// file (`header`, from [`savefile_header`]) of link type `dlt`. libpcap's code
    /// generator differs between capture files and live or dead handles (`rfile`): on a
    /// capture file `ip6` on BSD loopback tests the three BSD `AF_INET6` values, and
    /// `inbound`/`ifindex` are refused where Linux's special loads would stand in. weir
    /// compiles for capture files, so the oracle does too. The file lives in memory
    /// (`fmemopen`); `header` must outlive the handle, whose `pcap_close` closes the stream.
    fn open_savefile(&self, header: &mut [u8], dlt: i32) -> Result<*mut c_void, String> {
        // SAFETY: `header` is a live buffer of the given length that the caller keeps until
        // the handle is closed; fmemopen returns a stream over it or null, which is checked.
        let stream =
            unsafe { libc::fmemopen(header.as_mut_ptr().cast(), header.len(), c"rb".as_ptr()) };
        if stream.is_null() {
            return Err("fmemopen failed".to_string());
        }
        let mut errbuf = [0 as c_char; 256];
        // SAFETY: `stream` is an open stream that pcap_fopen_offline takes over on success
        // (pcap_close closes it); errbuf has PCAP_ERRBUF_SIZE (256) bytes.
        let handle = unsafe { (self.fopen_offline)(stream, errbuf.as_mut_ptr()) };
        if handle.is_null() {
            // SAFETY: on failure the stream was not taken over and is closed once here;
            // libpcap NUL-terminates errbuf.
            let message = unsafe {
                libc::fclose(stream);
                CStr::from_ptr(errbuf.as_ptr())
            };
            return Err(format!("pcap_fopen_offline(DLT {dlt}): {}", message.to_string_lossy()));
        }
        // SAFETY: `handle` is a live capture handle.
        let opened = unsafe { (self.datalink)(handle) };
        if opened != dlt {
            // SAFETY: `handle` is live and closed exactly once.
            unsafe { (self.close)(handle) };
            return Err(format!("libpcap reads link-type field {dlt} as DLT {opened}"));
        }
        Ok(handle)
    }

    /// Checks `insns` with libpcap's `bpf_validate` (jumps inside the program, scratch
    /// indices in range, a final return, no division by a constant 0).
    pub fn validate(&self, insns: &[BpfInsn]) -> Result<ValidProgram, String> {
        if insns.is_empty() {
            return Err("bpf_validate: the program is empty".into());
        }
        let len = c_int::try_from(insns.len())
            .map_err(|_| format!("bpf_validate: {} instructions is too many", insns.len()))?;
        // SAFETY: `insns` holds `len` initialised instructions; bpf_validate only reads them.
        if unsafe { (self.validate)(insns.as_ptr(), len) } == 0 {
            return Err("bpf_validate refuses the program".into());
        }
        Ok(ValidProgram { insns: insns.into(), filter: self.filter })
    }

    /// libpcap's verdict for `insns` on one packet, or `None` when `bpf_validate` refuses
    /// the program (which is then never run). Validates on every call: for many packets,
    /// [`Libpcap::validate`] once and [`ValidProgram::filter`] each.
    pub fn run(&self, insns: &[BpfInsn], data: &[u8], wire_len: u32) -> Option<u32> {
        Some(self.validate(insns).ok()?.filter(data, wire_len))
    }
}

/// A program libpcap's `bpf_validate` accepted: the only kind `bpf_filter` runs.
#[derive(Debug, Clone)]
pub struct ValidProgram {
    insns: Box<[BpfInsn]>,
    filter: BpfFilter,
}

impl ValidProgram {
    pub fn insns(&self) -> &[BpfInsn] {
        &self.insns
    }

    /// libpcap's verdict (`bpf_filter`) for one packet: `data` is the captured bytes,
    /// `wire_len` the packet's length on the wire. 0 rejects; anything else is the snapshot
    /// length to keep.
    pub fn filter(&self, data: &[u8], wire_len: u32) -> u32 {
        // A record longer than 4 GiB cannot exist; offering fewer bytes than there are is
        // safe.
        let caplen = c_uint::try_from(data.len()).unwrap_or(c_uint::MAX);
        // SAFETY: the program passed bpf_validate, so bpf_filter stays inside it and its
        // scratch memory, and checks every packet load against `caplen`, which never
        // exceeds the bytes `data` holds. `self.filter` points into the never-closed
        // static library.
        unsafe { (self.filter)(self.insns.as_ptr(), data.as_ptr(), wire_len, caplen) }
    }
}

/// The 24-byte header of an empty pcap file (little-endian, version 2.4, snapshot length
/// [`SNAPLEN`]) whose link-type field holds `dlt`: for every link type weir compiles for,
/// libpcap maps that field back to the same DLT (`pcap_datalink` checks it).
fn savefile_header(dlt: i32) -> Result<Vec<u8>, String> {
    let linktype = u32::try_from(dlt).map_err(|_| format!("DLT {dlt} is negative"))?;
    let mut header = Vec::with_capacity(24);
    header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&SNAPLEN.to_le_bytes());
    header.extend_from_slice(&linktype.to_le_bytes());
    Ok(header)
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
    fn the_instruction_layout_is_libpcaps() {
        assert_eq!(std::mem::size_of::<BpfInsn>(), 8);
        assert_eq!(std::mem::align_of::<BpfInsn>(), 4);
        assert_eq!(LIBRARY_NAMES[0], "libpcap.so.0.8");
    }

    #[test]
    fn compiles_validates_and_filters_when_present() {
        let pcap = match load() {
            Ok(pcap) => pcap,
            Err(reason) => {
                println!("SKIPPED: compiles_validates_and_filters_when_present: {reason}");
                return;
            }
        };
        for optimize in [false, true] {
            let insns = pcap.compile("tcp port 22", 1, optimize).unwrap();
            let prog = pcap.validate(&insns).unwrap();
            assert_eq!(prog.insns(), &insns[..]);
            assert_eq!(prog.filter(&tcp_frame(22), 54), SNAPLEN);
            assert_eq!(prog.filter(&tcp_frame(23), 54), 0);
            // Cut inside the TCP header: the port load is out of bounds and rejects.
            assert_eq!(prog.filter(&tcp_frame(22)[..36], 54), 0);
            assert_eq!(pcap.run(&insns, &tcp_frame(22), 54), Some(SNAPLEN));
        }
        // The unoptimized program is the longer one.
        let plain = pcap.compile("tcp port 22", 1, false).unwrap();
        let optimized = pcap.compile("tcp port 22", 1, true).unwrap();
        assert!(plain.len() > optimized.len());
        // A netmask makes `ip broadcast` compile.
        assert!(pcap.compile("ip broadcast", 1, false).is_err());
        assert!(pcap.compile_with_netmask("ip broadcast", 1, false, 0xffff_ff00).is_ok());
        assert!(pcap.version().contains("libpcap"));
        assert!(LIBRARY_NAMES.contains(&pcap.file_name()));
        assert!(std::ptr::eq(required(), pcap));
    }

    #[test]
    fn compile_is_for_a_capture_file_and_compile_live_is_not() {
        let pcap = match load() {
            Ok(pcap) => pcap,
            Err(reason) => {
                println!(
                    "SKIPPED: compile_is_for_a_capture_file_and_compile_live_is_not: {reason}"
                );
                return;
            }
        };
        // Ethernet records no direction: refused on a capture file, as tcpdump -r says.
        assert_eq!(
            pcap.compile("inbound", 1, false),
            Err("inbound/outbound not supported on Ethernet when reading savefiles".to_string())
        );
        // A live Linux capture reads the packet type from the kernel (SKF_AD_PKTTYPE, 4).
        let live = pcap.compile_live("inbound", 1, false).unwrap();
        assert!(live.iter().any(|i| i.code == 0x28 && i.k == 0xffff_f000 + 4), "{live:?}");
        // Linux cooked captures record it: both compile.
        assert!(pcap.compile("inbound", 113, false).is_ok());
        // BSD loopback (DLT_NULL, host order): the BSD AF_INET6 values for a file, Linux's
        // for a live capture.
        let families = |insns: &[BpfInsn]| -> Vec<u32> {
            insns.iter().filter(|i| i.code == 0x15).map(|i| i.k.swap_bytes()).collect()
        };
        assert_eq!(families(&pcap.compile("ip6", 0, false).unwrap()), [30, 24, 28]);
        assert_eq!(families(&pcap.compile_live("ip6", 0, false).unwrap()), [10]);
    }

    #[test]
    fn compile_errors_and_invalid_programs_are_errors() {
        let pcap = match load() {
            Ok(pcap) => pcap,
            Err(reason) => {
                println!("SKIPPED: compile_errors_and_invalid_programs_are_errors: {reason}");
                return;
            }
        };
        let err = pcap.compile("tcp port", 1, true).unwrap_err();
        assert!(err.contains("syntax error"), "{err}");
        assert!(pcap.compile("a\0b", 1, true).is_err());
        assert!(pcap.validate(&[]).is_err());
        // `ja` past the end, then a return.
        let bad = [
            BpfInsn { code: 0x05, jt: 0, jf: 0, k: 5 },
            BpfInsn { code: 0x06, jt: 0, jf: 0, k: 0 },
        ];
        assert!(pcap.validate(&bad).is_err());
        assert_eq!(pcap.run(&bad, &[0u8; 60], 60), None);
        assert_eq!(pcap.run(&[], &[0u8; 60], 60), None);
    }
}
