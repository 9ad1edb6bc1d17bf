//! The system libpcap as an oracle: `pcap_compile` (optimized or not, any link type) and
//! `bpf_filter`. Linked here so that every differential test calls one audited FFI layer.
//!
//! libpcap is a test-time dependency only (CI installs libpcap-dev); no library crate of
//! weir links it.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::sync::Mutex;

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

#[link(name = "pcap")]
extern "C" {
    fn pcap_open_dead(linktype: c_int, snaplen: c_int) -> *mut c_void;
    fn pcap_compile(
        p: *mut c_void,
        fp: *mut BpfProgram,
        text: *const c_char,
        optimize: c_int,
        netmask: u32,
    ) -> c_int;
    fn pcap_geterr(p: *mut c_void) -> *const c_char;
    fn pcap_freecode(fp: *mut BpfProgram);
    fn pcap_close(p: *mut c_void);
    fn bpf_filter(pc: *const BpfInsn, pkt: *const u8, wirelen: c_uint, buflen: c_uint) -> c_uint;
    fn bpf_validate(f: *const BpfInsn, len: c_int) -> c_int;
}

/// libpcap's default snapshot length, which is also what its filters return on accept.
pub const SNAPLEN: u32 = 262_144;
/// `PCAP_NETMASK_UNKNOWN`.
pub const NETMASK_UNKNOWN: u32 = 0xffff_ffff;

/// Older libpcap releases keep parser state in globals; one compile at a time.
static PCAP_LOCK: Mutex<()> = Mutex::new(());

/// Compiles `expr` for `linktype` (a DLT_ value) with libpcap. `Err` holds libpcap's message.
pub fn compile(expr: &str, linktype: i32, optimize: bool) -> Result<Vec<BpfInsn>, String> {
    compile_with_netmask(expr, linktype, optimize, NETMASK_UNKNOWN)
}

/// [`compile`] with an explicit IPv4 netmask (host byte order), for `ip broadcast`.
pub fn compile_with_netmask(
    expr: &str,
    linktype: i32,
    optimize: bool,
    netmask: u32,
) -> Result<Vec<BpfInsn>, String> {
    let text = CString::new(expr).map_err(|e| e.to_string())?;
    let _guard = PCAP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: pcap_open_dead has no preconditions; a null result is checked below.
    let handle = unsafe { pcap_open_dead(linktype, SNAPLEN as c_int) };
    if handle.is_null() {
        return Err("pcap_open_dead failed".into());
    }
    let mut prog = BpfProgram { bf_len: 0, bf_insns: std::ptr::null_mut() };
    // SAFETY: `handle` is a live pcap handle, `prog` a valid out-parameter and `text` a
    // NUL-terminated string that outlives the call.
    let rc =
        unsafe { pcap_compile(handle, &mut prog, text.as_ptr(), c_int::from(optimize), netmask) };
    let result = if rc != 0 {
        // SAFETY: after a failed compile, pcap_geterr returns the handle's NUL-terminated
        // message buffer, valid until the handle is closed (below, after the copy).
        Err(unsafe { CStr::from_ptr(pcap_geterr(handle)) }.to_string_lossy().into_owned())
    } else {
        let insns = if prog.bf_insns.is_null() || prog.bf_len == 0 {
            Vec::new()
        } else {
            // SAFETY: on success libpcap filled `bf_insns` with `bf_len` instructions, which
            // stay valid until pcap_freecode.
            unsafe { std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize) }.to_vec()
        };
        // SAFETY: `prog` came from a successful pcap_compile and is freed once.
        unsafe { pcap_freecode(&mut prog) };
        Ok(insns)
    };
    // SAFETY: `handle` is live and closed exactly once.
    unsafe { pcap_close(handle) };
    result
}

/// libpcap's own validator (`bpf_validate`).
pub fn validate(prog: &[BpfInsn]) -> bool {
    let Ok(len) = c_int::try_from(prog.len()) else {
        return false;
    };
    // SAFETY: `prog` holds `len` initialised instructions; bpf_validate only reads them.
    unsafe { bpf_validate(prog.as_ptr(), len) != 0 }
}

/// libpcap's verdict for `prog` on a packet. Returns `None` when libpcap's validator refuses
/// the program (bpf_filter trusts its input, so it is never run on such a program).
pub fn run(prog: &[BpfInsn], data: &[u8], wire_len: u32) -> Option<u32> {
    if prog.is_empty() || !validate(prog) {
        return None;
    }
    let caplen = c_uint::try_from(data.len()).ok()?;
    // SAFETY: `prog` passed bpf_validate, so bpf_filter stays inside it and its scratch
    // memory; `data` holds `caplen` readable bytes.
    Some(unsafe { bpf_filter(prog.as_ptr(), data.as_ptr(), wire_len, caplen) })
}
