//! Live capture through a Linux packet socket (`AF_PACKET`) and its `TPACKET_V3` receive
//! ring, the way libpcap captures on Linux (read from its `pcap-linux.c` and
//! packet(7), `Documentation/networking/packet_mmap.rst`; the code is weir's own).
//!
//! - [`PacketSocket::open`] makes the socket (`SOCK_RAW` for Ethernet-like devices,
//!   `SOCK_DGRAM` "cooked" for the `any` device and for point-to-point and tunnel devices, as
//!   libpcap falls back), sets up the ring with libpcap's geometry for the requested buffer
//!   size ([`RingGeometry`]), joins promiscuous mode unless told not to, and binds it to the
//!   interface with protocol 0: nothing is received yet.
//! - [`PacketSocket::attach_classic`] / [`PacketSocket::attach_ebpf`] put a filter in the
//!   kernel. Before [`PacketSocket::start`] no packet has been queued, so no packet can
//!   have escaped the filter. After it, libpcap's trick is used: a reject-all filter goes on
//!   first, the packets already in the ring are dropped, then the real filter goes on.
//! - [`PacketSocket::start`] binds the socket to every protocol (`ETH_P_ALL`);
//!   [`PacketSocket::next`] calls it when it has not been called.
//! - [`PacketSocket::next`] walks the ring's blocks (`tpacket_block_desc`, then each
//!   `tpacket3_hdr`), waits in `poll` (in slices of at most 100 ms, so that a stop flag is
//!   seen promptly), and returns each packet as a [`Frame`] borrowing the ring: no copy. A
//!   block goes back to the kernel when the packet after its last one is asked for.
//!   VLAN tags the kernel took out of the frame are put back (as libpcap does), and for a
//!   cooked socket the `LINUX_SLL` header is written in front of the packet, inside the ring.
//! - [`PacketSocket::stats`]: `PACKET_STATISTICS`, summed over calls (the kernel resets its
//!   counters when read), for tcpdump's "received by filter" and "dropped by kernel".
//! - [`interfaces`]: what `tcpdump -D` lists, in libpcap's order.
//!
//! Opening needs root or CAP_NET_RAW; errors are one line each ([`Error`]).

use std::ffi::{c_int, c_void, CString};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// tcpdump's default snapshot length (and libpcap's largest).
pub const DEFAULT_SNAPLEN: u32 = 262_144;
/// libpcap's largest snapshot length; larger requests are clamped to it.
pub const MAXIMUM_SNAPLEN: u32 = 262_144;
/// libpcap's default buffer size on Linux (tcpdump's `-B` changes it, in KiB).
pub const DEFAULT_BUFFER_SIZE: usize = 2 << 20;
/// tcpdump's packet buffer timeout: how long a partly filled block may wait in the kernel.
pub const DEFAULT_TIMEOUT_MS: u32 = 1000;

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// `LINKTYPE_RAW`: the packet starts with its IPv4 or IPv6 header.
pub const LINKTYPE_RAW: u32 = 101;
/// `LINKTYPE_LINUX_SLL`: the 16-byte Linux cooked header.
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// `LINKTYPE_IEEE802_11_RADIOTAP`.
pub const LINKTYPE_IEEE802_11_RADIOTAP: u32 = 127;

/// The length of the `LINUX_SLL` header.
pub const SLL_HDR_LEN: usize = 16;
const VLAN_TAG_LEN: usize = 4;

/// How long one `poll` waits at most, so that a stop flag is seen within this time.
const POLL_SLICE_MS: u64 = 100;

// ---------------------------------------------------------------------------------------
// Errors

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The interface does not exist.
    NoSuchInterface,
    /// Not root and no CAP_NET_RAW.
    Permission,
    /// The interface's hardware type, or the request, is not something weir captures.
    Unsupported,
    /// Any other failure of a system call.
    Os,
}

/// A live-capture failure, as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl Error {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }

    /// `what` failed with `err`; EPERM and EACCES say what is missing.
    fn os(what: &str, err: &io::Error) -> Error {
        match err.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => Error::new(
                ErrorKind::Permission,
                format!("{what}: {err}: you need root or CAP_NET_RAW to capture"),
            ),
            Some(libc::ENODEV | libc::ENXIO) => {
                Error::new(ErrorKind::NoSuchInterface, format!("{what}: no such interface"))
            }
            _ => Error::new(ErrorKind::Os, format!("{what}: {err}")),
        }
    }
}

fn last_error(what: &str) -> Error {
    Error::os(what, &io::Error::last_os_error())
}

// ---------------------------------------------------------------------------------------
// Configuration

/// Which packets of the interface to see (tcpdump's `-Q`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Received packets only.
    In,
    /// Sent packets only.
    Out,
    /// Both (the default).
    #[default]
    InOut,
}

impl std::str::FromStr for Direction {
    type Err = String;
    fn from_str(s: &str) -> Result<Direction, String> {
        match s {
            "in" => Ok(Direction::In),
            "out" => Ok(Direction::Out),
            "inout" => Ok(Direction::InOut),
            _ => Err(format!("-Q takes in, out or inout, not `{s}`")),
        }
    }
}

/// How to open a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The interface name; `any` captures on all of them (cooked, `LINUX_SLL`).
    pub interface: String,
    /// Bytes kept of each packet (`-s`); 0 means [`DEFAULT_SNAPLEN`].
    pub snaplen: u32,
    /// Put the interface in promiscuous mode (not with `-p`).
    pub promisc: bool,
    pub direction: Direction,
    /// The ring's size in bytes (`-B` is in KiB); 0 means [`DEFAULT_BUFFER_SIZE`].
    pub buffer_size: usize,
    /// How long a partly filled block waits before the kernel hands it over, in ms.
    pub timeout_ms: u32,
}

impl Config {
    /// tcpdump's defaults for `interface`.
    pub fn new(interface: &str) -> Config {
        Config {
            interface: interface.to_string(),
            snaplen: DEFAULT_SNAPLEN,
            promisc: true,
            direction: Direction::InOut,
            buffer_size: DEFAULT_BUFFER_SIZE,
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }
}

/// The receive ring's shape, chosen as libpcap chooses it for `TPACKET_V3`: "frames" of
/// [`MAXIMUM_SNAPLEN`] bytes, as many as the buffer size needs (rounded up), blocks of the
/// smallest power-of-two number of pages that holds one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingGeometry {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    pub frame_nr: u32,
}

impl RingGeometry {
    /// The geometry for `buffer_size` bytes with pages of `page_size` bytes.
    pub fn for_buffer(buffer_size: usize, page_size: usize) -> RingGeometry {
        let frame_size = MAXIMUM_SNAPLEN;
        let buffer = u64::try_from(buffer_size.max(1)).unwrap_or(u64::MAX);
        let frames = buffer.div_ceil(u64::from(frame_size));
        let frame_nr = u32::try_from(frames).unwrap_or(u32::MAX);
        let mut block_size = u32::try_from(page_size.max(1)).unwrap_or(4096);
        while block_size < frame_size {
            block_size = block_size.saturating_mul(2);
        }
        let per_block = (block_size / frame_size).max(1);
        let block_nr = (frame_nr / per_block).max(1);
        RingGeometry { block_size, block_nr, frame_size, frame_nr: block_nr * per_block }
    }

    /// The next smaller ring libpcap tries when the kernel has no memory for this one:
    /// one frame less below 20 frames, 5 % less from there on. `None` at one block.
    pub fn smaller(self) -> Option<RingGeometry> {
        if self.block_nr <= 1 {
            return None;
        }
        let per_block = (self.block_size / self.frame_size).max(1);
        let frame_nr =
            if self.frame_nr < 20 { self.frame_nr - 1 } else { self.frame_nr - self.frame_nr / 20 };
        let block_nr = (frame_nr / per_block).max(1);
        Some(RingGeometry { block_nr, frame_nr: block_nr * per_block, ..self })
    }

    /// The ring's size in bytes.
    pub fn bytes(self) -> usize {
        (self.block_size as usize).saturating_mul(self.block_nr as usize)
    }
}

// ---------------------------------------------------------------------------------------
// Link types

/// How packets of an interface are captured: whole frames, or cooked (`SOCK_DGRAM` with a
/// `LINUX_SLL` header made from the socket address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    Raw { linktype: u32 },
    Cooked,
}

impl Capture {
    pub fn linktype(self) -> u32 {
        match self {
            Capture::Raw { linktype } => linktype,
            Capture::Cooked => LINKTYPE_LINUX_SLL,
        }
    }
}

/// How an interface of hardware type `arphrd` (an `ARPHRD_` value) is captured, as libpcap
/// maps the common types: Ethernet and loopback as Ethernet, SLIP and devices without a
/// link header (tun, WireGuard) as raw IP, radiotap as itself; point-to-point and tunnel
/// devices cooked. Others are refused with their number.
pub fn capture_for_arphrd(arphrd: u16) -> Result<Capture, String> {
    const ARPHRD_IP6GRE: u16 = 823;
    match arphrd {
        libc::ARPHRD_ETHER | libc::ARPHRD_EETHER | libc::ARPHRD_LOOPBACK => {
            Ok(Capture::Raw { linktype: LINKTYPE_ETHERNET })
        }
        libc::ARPHRD_NONE
        | libc::ARPHRD_SLIP
        | libc::ARPHRD_CSLIP
        | libc::ARPHRD_SLIP6
        | libc::ARPHRD_CSLIP6 => Ok(Capture::Raw { linktype: LINKTYPE_RAW }),
        libc::ARPHRD_IEEE80211_RADIOTAP => {
            Ok(Capture::Raw { linktype: LINKTYPE_IEEE802_11_RADIOTAP })
        }
        libc::ARPHRD_PPP
        | libc::ARPHRD_TUNNEL
        | libc::ARPHRD_TUNNEL6
        | libc::ARPHRD_SIT
        | libc::ARPHRD_IPGRE
        | ARPHRD_IP6GRE => Ok(Capture::Cooked),
        other => Err(format!(
            "hardware type {other} (ARPHRD_ value) is not one weir captures on; the `any` \
             device captures every interface with a cooked header"
        )),
    }
}

// ---------------------------------------------------------------------------------------
// ioctl helpers

/// `struct ifreq`: the name, then a union of 24 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> Result<IfReq, Error> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(Error::new(
                ErrorKind::NoSuchInterface,
                format!("{name}: no such interface (names are 1 to 15 bytes)"),
            ));
        }
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: [0; 24] };
        if let Some(dst) = req.name.get_mut(..bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        Ok(req)
    }

    fn u16_at0(&self) -> u16 {
        u16::from_ne_bytes([self.data[0], self.data[1]])
    }
}

/// `ioctl(fd, request, &mut req)`.
fn ifreq_ioctl(fd: BorrowedFd<'_>, request: libc::c_ulong, req: &mut IfReq) -> io::Result<()> {
    // SAFETY: `req` is a writable `struct ifreq` (40 bytes, the name NUL-terminated) for
    // the requests used here (SIOCGIFFLAGS, SIOCGIFHWADDR), which read the name and write
    // within the union.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, req as *mut IfReq) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn setsockopt<T>(fd: BorrowedFd<'_>, level: c_int, name: c_int, value: &T) -> io::Result<()> {
    let len = libc::socklen_t::try_from(std::mem::size_of::<T>())
        .map_err(|_| io::Error::other("option too large"))?;
    // SAFETY: `value` is a live, initialised `T` of `len` bytes that the kernel only reads.
    let rc = unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast::<c_void>(), len)
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn if_index(name: &str) -> Result<u32, Error> {
    let c_name = CString::new(name).map_err(|_| {
        Error::new(ErrorKind::NoSuchInterface, format!("{name}: no such interface"))
    })?;
    // SAFETY: `c_name` is a NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if index == 0 {
        return Err(Error::new(ErrorKind::NoSuchInterface, format!("{name}: no such interface")));
    }
    Ok(index)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

// ---------------------------------------------------------------------------------------
// The ring

/// The mapped ring; unmapped on drop.
struct Ring {
    base: NonNull<u8>,
    geometry: RingGeometry,
}

// SAFETY: the mapping is plain memory owned by this value; the kernel's concurrent writes
// are confined to blocks it owns, which this code only touches through the status word.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base` and the size are exactly the mapping made in `map`, unmapped once.
        unsafe {
            libc::munmap(self.base.as_ptr().cast::<c_void>(), self.geometry.bytes());
        }
    }
}

/// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then `tpacket_hdr_v1`).
mod block {
    pub const STATUS: usize = 8;
    pub const NUM_PKTS: usize = 12;
    pub const OFFSET_TO_FIRST_PKT: usize = 16;
}

/// Offsets in `struct tpacket3_hdr`, and the `struct sockaddr_ll` behind it.
mod frame {
    pub const NEXT_OFFSET: usize = 0;
    pub const SEC: usize = 4;
    pub const NSEC: usize = 8;
    pub const SNAPLEN: usize = 12;
    pub const LEN: usize = 16;
    pub const STATUS: usize = 20;
    pub const MAC: usize = 24;
    pub const VLAN_TCI: usize = 32;
    pub const VLAN_TPID: usize = 36;
    /// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where the socket address starts.
    pub const SLL: usize = 48;
    pub const SLL_PROTOCOL: usize = SLL + 2;
    pub const SLL_IFINDEX: usize = SLL + 4;
    pub const SLL_HATYPE: usize = SLL + 8;
    pub const SLL_PKTTYPE: usize = SLL + 10;
    pub const SLL_HALEN: usize = SLL + 11;
    pub const SLL_ADDR: usize = SLL + 12;
    /// The end of the socket address: the packet's bytes start after it.
    pub const END: usize = SLL + 20;
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes([b[0], b[1]]))
}

impl Ring {
    fn map(fd: BorrowedFd<'_>, geometry: RingGeometry) -> Result<Ring, Error> {
        // SAFETY: a fresh shared mapping of the socket's ring, of the size the ring was
        // set up with; the kernel checks the size and the descriptor.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                geometry.bytes(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last_error("mmap of the packet ring"));
        }
        let base = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| Error::new(ErrorKind::Os, "mmap returned a null ring"))?;
        Ok(Ring { base, geometry })
    }

    fn block_ptr(&self, index: u32) -> Option<*mut u8> {
        if index >= self.geometry.block_nr {
            return None;
        }
        let offset = (index as usize).checked_mul(self.geometry.block_size as usize)?;
        // SAFETY: `offset` is below the mapping's size (index < block_nr), so the result
        // stays inside the mapping.
        Some(unsafe { self.base.as_ptr().add(offset) })
    }

    /// The block's status word, shared with the kernel.
    fn status(&self, index: u32) -> Option<&AtomicU32> {
        let ptr = self.block_ptr(index)?;
        // SAFETY: the status word is a 4-byte aligned u32 inside the mapping (blocks are
        // page aligned); the kernel and this code both access it atomically, and it lives
        // as long as `self`.
        Some(unsafe { &*ptr.add(block::STATUS).cast::<AtomicU32>() })
    }

    fn user_owned(&self, index: u32) -> bool {
        self.status(index).is_some_and(|s| s.load(Ordering::Acquire) & libc::TP_STATUS_USER != 0)
    }

    /// The packets the kernel has put in block `index` so far (read while it fills it).
    fn num_pkts_now(&self, index: u32) -> u32 {
        let Some(ptr) = self.block_ptr(index) else { return 0 };
        // SAFETY: a 4-byte aligned u32 inside the mapping; read atomically because the
        // kernel may be writing it.
        let word = unsafe { &*ptr.add(block::NUM_PKTS).cast::<AtomicU32>() };
        word.load(Ordering::Acquire)
    }

    /// The bytes of a block the user owns.
    fn block_mut(&mut self, index: u32) -> Option<&mut [u8]> {
        if !self.user_owned(index) {
            return None;
        }
        let ptr = self.block_ptr(index)?;
        // SAFETY: the block lies inside the mapping; its status says the user owns it, so
        // the kernel does not touch it until `release`, and `&mut self` makes this the
        // only view of it.
        Some(unsafe { std::slice::from_raw_parts_mut(ptr, self.geometry.block_size as usize) })
    }

    fn release(&self, index: u32) {
        if let Some(status) = self.status(index) {
            status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The socket

/// Counters for tcpdump's closing lines, summed since the socket was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets the kernel's filter accepted (including those dropped): "received by filter".
    pub received: u64,
    /// Packets the ring had no room for: "dropped by kernel".
    pub dropped: u64,
}

/// One packet in the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The captured bytes, starting with the link header (for a cooked socket, the
    /// `LINUX_SLL` header weir wrote in front of the packet).
    pub data: &'a [u8],
    /// The packet's length on the wire (plus the link header made for it).
    pub wire_len: u32,
    pub ts_sec: u32,
    pub ts_nsec: u32,
    /// The index of the interface it went through.
    pub ifindex: u32,
    /// `PACKET_HOST`, `PACKET_OUTGOING` …
    pub pkttype: u8,
}

/// Where the reader is in the ring.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    block: u32,
    /// The reader owns `block` and is walking it.
    held: bool,
    left: u32,
    offset: usize,
}

/// Where the next packet is, once found.
struct Found {
    start: usize,
    len: usize,
    wire_len: u32,
    ts_sec: u32,
    ts_nsec: u32,
    ifindex: u32,
    pkttype: u8,
}

/// An `AF_PACKET` socket with its `TPACKET_V3` receive ring.
pub struct PacketSocket {
    ring: Ring,
    fd: OwnedFd,
    ifindex: u32,
    capture: Capture,
    snaplen: u32,
    direction: Direction,
    /// The loopback interface's index: its outgoing copies are skipped (each packet is
    /// seen again as incoming), as libpcap does.
    lo_ifindex: u32,
    started: bool,
    cursor: Cursor,
    /// Packets of a block put in the ring before a filter change, to skip: (block, count).
    skip: Option<(u32, u32)>,
    stats: Stats,
    has_filter: bool,
}

impl fmt::Debug for PacketSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketSocket")
            .field("fd", &self.fd)
            .field("ifindex", &self.ifindex)
            .field("capture", &self.capture)
            .field("geometry", &self.ring.geometry)
            .finish_non_exhaustive()
    }
}

fn sockaddr_ll(ifindex: u32, protocol: u16) -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol.to_be(),
        sll_ifindex: i32::try_from(ifindex).unwrap_or(0),
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}

impl PacketSocket {
    /// Opens a capture on `config.interface` (see the module documentation). Nothing is
    /// received until [`PacketSocket::start`] (or the first [`PacketSocket::next`]).
    pub fn open(config: &Config) -> Result<PacketSocket, Error> {
        let name = config.interface.as_str();
        let any = name == "any";
        let ifindex = if any { 0 } else { if_index(name)? };
        // A raw socket first: it can tell the hardware type; reopened cooked if needed.
        let mut fd = new_socket(libc::SOCK_RAW, name)?;
        let capture = if any {
            Capture::Cooked
        } else {
            let mut req = IfReq::new(name)?;
            ifreq_ioctl(fd.as_fd_borrowed(), libc::SIOCGIFHWADDR, &mut req)
                .map_err(|e| Error::os(&format!("{name}: SIOCGIFHWADDR"), &e))?;
            capture_for_arphrd(req.u16_at0())
                .map_err(|e| Error::new(ErrorKind::Unsupported, format!("{name}: {e}")))?
        };
        if capture == Capture::Cooked {
            fd = new_socket(libc::SOCK_DGRAM, name)?;
        }
        let sock = fd.as_fd_borrowed();
        bind(sock, ifindex, 0, name)?;
        let version: c_int = libc::tpacket_versions::TPACKET_V3 as c_int;
        setsockopt(sock, libc::SOL_PACKET, libc::PACKET_VERSION, &version)
            .map_err(|e| Error::os(&format!("{name}: TPACKET_V3 (needs Linux 3.2)"), &e))?;
        // Room in front of each packet for a VLAN tag put back (the cooked header fits in
        // the gap the kernel leaves anyway).
        let reserve: u32 = VLAN_TAG_LEN as u32;
        setsockopt(sock, libc::SOL_PACKET, libc::PACKET_RESERVE, &reserve)
            .map_err(|e| Error::os(&format!("{name}: PACKET_RESERVE"), &e))?;
        if config.direction == Direction::In {
            // Linux 4.20 and later; older kernels: the direction check below does it.
            let one: c_int = 1;
            let _ = setsockopt(sock, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one);
        }
        let buffer = if config.buffer_size == 0 { DEFAULT_BUFFER_SIZE } else { config.buffer_size };
        let mut geometry = RingGeometry::for_buffer(buffer, page_size());
        loop {
            let req = libc::tpacket_req3 {
                tp_block_size: geometry.block_size,
                tp_block_nr: geometry.block_nr,
                tp_frame_size: geometry.frame_size,
                tp_frame_nr: geometry.frame_nr,
                tp_retire_blk_tov: config.timeout_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            match setsockopt(sock, libc::SOL_PACKET, libc::PACKET_RX_RING, &req) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => match geometry.smaller() {
                    Some(smaller) => geometry = smaller,
                    None => return Err(Error::os(&format!("{name}: PACKET_RX_RING"), &e)),
                },
                Err(e) => return Err(Error::os(&format!("{name}: PACKET_RX_RING"), &e)),
            }
        }
        let ring = Ring::map(sock, geometry)?;
        if config.promisc && !any {
            let mreq = libc::packet_mreq {
                mr_ifindex: i32::try_from(ifindex).unwrap_or(0),
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setsockopt(sock, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|e| Error::os(&format!("{name}: promiscuous mode"), &e))?;
        }
        let lo_ifindex = if_index("lo").unwrap_or(0);
        let snaplen = match config.snaplen {
            0 => DEFAULT_SNAPLEN,
            s => s.min(MAXIMUM_SNAPLEN),
        };
        Ok(PacketSocket {
            ring,
            fd,
            ifindex,
            capture,
            snaplen,
            direction: config.direction,
            lo_ifindex,
            started: false,
            cursor: Cursor::default(),
            skip: None,
            stats: Stats::default(),
            has_filter: false,
        })
    }

    /// The interface's index (0 for `any`).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Raw frames or cooked packets.
    pub fn capture(&self) -> Capture {
        self.capture
    }

    /// The `LINKTYPE_` of the packets returned.
    pub fn linktype(&self) -> u32 {
        self.capture.linktype()
    }

    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The ring's shape.
    pub fn geometry(&self) -> RingGeometry {
        self.ring.geometry
    }

    /// Starts receiving: binds to every protocol. Idempotent.
    pub fn start(&mut self) -> Result<(), Error> {
        if !self.started {
            bind(self.fd.as_fd_borrowed(), self.ifindex, libc::ETH_P_ALL as u16, "start")?;
            self.started = true;
        }
        Ok(())
    }

    /// Puts a classic BPF program (`(code, jt, jf, k)` records, as `sock_filter`) in the
    /// kernel. Offsets are those of the packet as the socket sees it: for a cooked socket
    /// the packet starts at its network header, not at the `LINUX_SLL` header.
    pub fn attach_classic(&mut self, program: &[(u16, u8, u8, u32)]) -> Result<(), Error> {
        let mut filters: Vec<libc::sock_filter> = program
            .iter()
            .map(|&(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k })
            .collect();
        let len = u16::try_from(filters.len()).ok().filter(|&l| l > 0).ok_or_else(|| {
            Error::new(ErrorKind::Unsupported, "classic program of 0 or 65536+ instructions")
        })?;
        let fprog = libc::sock_fprog { len, filter: filters.as_mut_ptr() };
        self.change_filter(|fd| setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog))
            .map_err(|e| Error::os("the kernel refused the classic filter (SO_ATTACH_FILTER)", &e))
    }

    /// Puts a loaded eBPF socket-filter program (its descriptor) in the kernel.
    pub fn attach_ebpf(&mut self, program: BorrowedFd<'_>) -> Result<(), Error> {
        let raw: c_int = program.as_raw_fd();
        self.change_filter(|fd| setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_BPF, &raw))
            .map_err(|e| Error::os("the kernel refused the eBPF filter (SO_ATTACH_BPF)", &e))
    }

    /// Whether a filter was attached.
    pub fn has_filter(&self) -> bool {
        self.has_filter
    }

    /// Attaches a filter with `attach`; once packets flow, first puts on a reject-all filter
    /// and drops the packets already in the ring (they went through the old filter), as
    /// libpcap does for its socket queue. A packet being copied on another CPU at that
    /// moment can still slip through (the kernel does not wait for it).
    fn change_filter(
        &mut self,
        attach: impl Fn(BorrowedFd<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        if !self.started {
            attach(self.fd.as_fd_borrowed())?;
            self.has_filter = true;
            return Ok(());
        }
        let reject_all = [libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0 }];
        let fprog = libc::sock_fprog { len: 1, filter: reject_all.as_ptr().cast_mut() };
        let total =
            setsockopt(self.fd.as_fd_borrowed(), libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog);
        if total.is_ok() {
            // Drop what the reader holds and every block the kernel has handed over.
            if self.cursor.held {
                self.ring.release(self.cursor.block);
                self.cursor.held = false;
                self.cursor.block = (self.cursor.block + 1) % self.ring.geometry.block_nr;
            }
            let mut guard = 0;
            while self.ring.user_owned(self.cursor.block) && guard < self.ring.geometry.block_nr {
                self.ring.release(self.cursor.block);
                self.cursor.block = (self.cursor.block + 1) % self.ring.geometry.block_nr;
                guard += 1;
            }
            // The block the kernel is filling: skip what it holds now.
            let stale = self.ring.num_pkts_now(self.cursor.block);
            self.skip = (stale > 0).then_some((self.cursor.block, stale));
        }
        let result = attach(self.fd.as_fd_borrowed());
        if result.is_err() && total.is_ok() {
            // Take the reject-all filter off again: the caller filters in user space.
            let zero: c_int = 0;
            let _ = setsockopt(
                self.fd.as_fd_borrowed(),
                libc::SOL_SOCKET,
                libc::SO_DETACH_FILTER,
                &zero,
            );
        }
        if result.is_ok() {
            self.has_filter = true;
        }
        result
    }

    /// The counters so far (`PACKET_STATISTICS`, summed: the kernel resets on reading).
    pub fn stats(&mut self) -> Result<Stats, Error> {
        let mut st = libc::tpacket_stats_v3 { tp_packets: 0, tp_drops: 0, tp_freeze_q_cnt: 0 };
        let mut len =
            libc::socklen_t::try_from(std::mem::size_of::<libc::tpacket_stats_v3>()).unwrap_or(12);
        // SAFETY: `st` is a writable tpacket_stats_v3 and `len` its size; the kernel writes
        // at most `len` bytes and updates `len`.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast::<c_void>(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(last_error("PACKET_STATISTICS"));
        }
        self.stats.received = self.stats.received.saturating_add(u64::from(st.tp_packets));
        self.stats.dropped = self.stats.dropped.saturating_add(u64::from(st.tp_drops));
        Ok(self.stats)
    }

    /// Whether [`next`](Self::next) would have to wait for the kernel: no packet is left in
    /// the block being walked and the kernel has not handed over the next one.
    pub fn would_wait(&self) -> bool {
        if self.cursor.held && self.cursor.left > 0 {
            return false;
        }
        let next = if self.cursor.held {
            (self.cursor.block + 1) % self.ring.geometry.block_nr.max(1)
        } else {
            self.cursor.block
        };
        !self.ring.user_owned(next)
    }

    /// The next packet: `Ok(None)` when `stop` is set or `timeout` (when given) has passed
    /// without one. Starts the capture if needed.
    pub fn next(
        &mut self,
        stop: &AtomicBool,
        timeout: Option<Duration>,
    ) -> Result<Option<Frame<'_>>, Error> {
        self.start()?;
        let deadline = timeout.map(|t| Instant::now() + t);
        let found = loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if self.cursor.held {
                if self.cursor.left == 0 {
                    self.ring.release(self.cursor.block);
                    self.cursor.held = false;
                    self.cursor.block = (self.cursor.block + 1) % self.ring.geometry.block_nr;
                    continue;
                }
                if let Some(found) = self.take_packet() {
                    break found;
                }
                continue;
            }
            if self.ring.user_owned(self.cursor.block) {
                self.enter_block();
                continue;
            }
            let wait = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left.min(Duration::from_millis(POLL_SLICE_MS))
                }
                None => Duration::from_millis(POLL_SLICE_MS),
            };
            self.wait(wait)?;
        };
        let block = self.cursor.block;
        let bytes = self
            .ring
            .block_mut(block)
            .ok_or_else(|| Error::new(ErrorKind::Os, "internal: the ring block went away"))?;
        let data = bytes
            .get(found.start..found.start.saturating_add(found.len))
            .ok_or_else(|| Error::new(ErrorKind::Os, "internal: a frame outside its block"))?;
        Ok(Some(Frame {
            data,
            wire_len: found.wire_len,
            ts_sec: found.ts_sec,
            ts_nsec: found.ts_nsec,
            ifindex: found.ifindex,
            pkttype: found.pkttype,
        }))
    }

    /// Starts walking a block the kernel handed over.
    fn enter_block(&mut self) {
        let index = self.cursor.block;
        let (num, first) = match self.ring.block_mut(index) {
            Some(bytes) => (
                read_u32(bytes, block::NUM_PKTS).unwrap_or(0),
                read_u32(bytes, block::OFFSET_TO_FIRST_PKT).unwrap_or(0),
            ),
            None => return,
        };
        self.cursor.held = true;
        self.cursor.left = num;
        self.cursor.offset = first as usize;
        if let Some((skip_block, count)) = self.skip {
            if skip_block == index {
                self.skip = None;
                for _ in 0..count.min(num) {
                    if !self.advance() {
                        break;
                    }
                }
            }
        }
    }

    /// Moves past the packet at the cursor; false when the block is done or malformed.
    fn advance(&mut self) -> bool {
        let index = self.cursor.block;
        let next = self
            .ring
            .block_mut(index)
            .and_then(|b| read_u32(b, self.cursor.offset.saturating_add(frame::NEXT_OFFSET)));
        self.cursor.left = self.cursor.left.saturating_sub(1);
        match next {
            Some(next) if next > 0 || self.cursor.left == 0 => {
                self.cursor.offset = self.cursor.offset.saturating_add(next as usize);
                true
            }
            _ => {
                // A zero link before the last packet: give the block up.
                self.cursor.left = 0;
                false
            }
        }
    }

    /// Reads the packet at the cursor, moves past it, and returns it unless the direction
    /// or the loopback rule drops it.
    fn take_packet(&mut self) -> Option<Found> {
        let index = self.cursor.block;
        let h = self.cursor.offset;
        let capture = self.capture;
        let (snaplen, direction, lo) = (self.snaplen, self.direction, self.lo_ifindex);
        let found = self
            .ring
            .block_mut(index)
            .and_then(|bytes| read_frame(bytes, h, capture, snaplen, direction, lo));
        let ok = self.advance();
        if !ok && found.is_none() {
            self.cursor.left = 0;
        }
        found.flatten()
    }

    /// Waits in `poll` for the ring (at most `wait`); EINTR is a normal return.
    fn wait(&mut self, wait: Duration) -> Result<(), Error> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        };
        let ms = c_int::try_from(wait.as_millis().max(1)).unwrap_or(c_int::MAX);
        // SAFETY: one valid pollfd, and the count says one.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                return Ok(());
            }
            return Err(Error::os("poll", &err));
        }
        if pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            let mut err: c_int = 0;
            let mut len = libc::socklen_t::try_from(std::mem::size_of::<c_int>()).unwrap_or(4);
            // SAFETY: `err` is a writable int and `len` its size.
            let rc = unsafe {
                libc::getsockopt(
                    self.fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_ERROR,
                    (&mut err as *mut c_int).cast::<c_void>(),
                    &mut len,
                )
            };
            if rc == 0 && err == libc::ENETDOWN {
                return Err(Error::new(ErrorKind::Os, "the interface went down"));
            }
            if rc == 0 && err != 0 {
                return Err(Error::os("capture", &io::Error::from_raw_os_error(err)));
            }
            if pfd.revents & libc::POLLNVAL != 0 {
                return Err(Error::new(ErrorKind::Os, "poll: the capture socket is not open"));
            }
        }
        Ok(())
    }
}

/// Reads the frame whose `tpacket3_hdr` is at `h` in a block the reader owns: applies the
/// direction rules, puts back a VLAN tag the kernel took out, writes the cooked header,
/// and truncates to `snaplen`. `None`: malformed; `Some(None)`: skipped by direction.
fn read_frame(
    bytes: &mut [u8],
    h: usize,
    capture: Capture,
    snaplen: u32,
    direction: Direction,
    lo_ifindex: u32,
) -> Option<Option<Found>> {
    let at = |off: usize| h.checked_add(off);
    let ts_sec = read_u32(bytes, at(frame::SEC)?)?;
    let ts_nsec = read_u32(bytes, at(frame::NSEC)?)?;
    let mut caplen = read_u32(bytes, at(frame::SNAPLEN)?)? as usize;
    let mut wire_len = read_u32(bytes, at(frame::LEN)?)?;
    let status = read_u32(bytes, at(frame::STATUS)?)?;
    let mac = usize::from(read_u16(bytes, at(frame::MAC)?)?);
    let tci = read_u32(bytes, at(frame::VLAN_TCI)?)?;
    let tpid = read_u16(bytes, at(frame::VLAN_TPID)?)?;
    let ifindex = read_u32(bytes, at(frame::SLL_IFINDEX)?)?;
    let hatype = read_u16(bytes, at(frame::SLL_HATYPE)?)?;
    let pkttype = *bytes.get(at(frame::SLL_PKTTYPE)?)?;
    let halen = *bytes.get(at(frame::SLL_HALEN)?)?;
    let protocol: [u8; 2] =
        bytes.get(at(frame::SLL_PROTOCOL)?..at(frame::SLL_PROTOCOL + 2)?)?.try_into().ok()?;
    let mut addr = [0u8; 8];
    addr.copy_from_slice(bytes.get(at(frame::SLL_ADDR)?..at(frame::SLL_ADDR + 8)?)?);

    let outgoing = pkttype == libc::PACKET_OUTGOING;
    let keep = match direction {
        Direction::In => !outgoing,
        Direction::Out => outgoing,
        Direction::InOut => true,
    } && !(outgoing && ifindex == lo_ifindex && lo_ifindex != 0);
    if !keep {
        return Some(None);
    }
    let mut start = h.checked_add(mac)?;
    // The packet must lie in the block.
    bytes.get(start..start.checked_add(caplen)?)?;
    let room = |start: usize, need: usize| start >= h + frame::END + need;

    let vlan_offset = match capture {
        Capture::Raw { linktype: LINKTYPE_ETHERNET } => Some(12),
        Capture::Raw { .. } => None,
        Capture::Cooked => {
            if !room(start, SLL_HDR_LEN) {
                return None;
            }
            start -= SLL_HDR_LEN;
            let header = bytes.get_mut(start..start + SLL_HDR_LEN)?;
            header[0..2].copy_from_slice(&u16::from(pkttype).to_be_bytes());
            header[2..4].copy_from_slice(&hatype.to_be_bytes());
            header[4..6].copy_from_slice(&u16::from(halen).to_be_bytes());
            header[6..14].copy_from_slice(&addr);
            header[14..16].copy_from_slice(&protocol);
            caplen += SLL_HDR_LEN;
            wire_len = wire_len.saturating_add(SLL_HDR_LEN as u32);
            Some(14)
        }
    };
    let vlan_valid = status & libc::TP_STATUS_VLAN_VALID != 0 || tci != 0;
    if let Some(offset) =
        vlan_offset.filter(|&o| vlan_valid && caplen >= o && room(start, VLAN_TAG_LEN))
    {
        let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { tpid } else { 0x8100 };
        let new_start = start - VLAN_TAG_LEN;
        bytes.copy_within(start..start + offset, new_start);
        let tag = bytes.get_mut(new_start + offset..new_start + offset + VLAN_TAG_LEN)?;
        tag[0..2].copy_from_slice(&tpid.to_be_bytes());
        tag[2..4].copy_from_slice(&(tci as u16).to_be_bytes());
        start = new_start;
        caplen += VLAN_TAG_LEN;
        wire_len = wire_len.saturating_add(VLAN_TAG_LEN as u32);
    }
    let len = caplen.min(snaplen as usize);
    Some(Some(Found { start, len, wire_len, ts_sec, ts_nsec, ifindex, pkttype }))
}

trait AsFdBorrowed {
    fn as_fd_borrowed(&self) -> BorrowedFd<'_>;
}

impl AsFdBorrowed for OwnedFd {
    fn as_fd_borrowed(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

fn new_socket(kind: c_int, name: &str) -> Result<OwnedFd, Error> {
    // Protocol 0: the socket receives nothing until it is bound to a protocol.
    // SAFETY: socket has no memory preconditions.
    let fd = unsafe { libc::socket(libc::AF_PACKET, kind | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last_error(&format!("{name}: socket(AF_PACKET)")));
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16, name: &str) -> Result<(), Error> {
    let addr = sockaddr_ll(ifindex, protocol);
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_ll>()).unwrap_or(20);
    // SAFETY: `addr` is a valid sockaddr_ll of `len` bytes that the kernel only reads.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
            len,
        )
    };
    if rc < 0 {
        return Err(last_error(&format!("{name}: bind")));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Interfaces

/// Whether an interface has a link, as libpcap reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    Unknown,
    Connected,
    Disconnected,
    /// Loopback interfaces have none.
    NotApplicable,
}

/// One interface, as `tcpdump -D` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    /// 0 for `any`.
    pub index: u32,
    pub description: Option<String>,
    pub up: bool,
    pub running: bool,
    pub loopback: bool,
    pub connection: Connection,
}

impl Interface {
    /// libpcap's figure of merit: lower sorts first.
    fn merit(&self) -> u32 {
        let mut n = 0;
        if !self.running {
            n |= 0x8000_0000;
        }
        if !self.up {
            n |= 0x4000_0000;
        }
        if self.connection == Connection::Disconnected {
            n |= 0x2000_0000;
        }
        if self.loopback {
            n |= 0x1000_0000;
        }
        if self.name == "any" {
            n |= 0x0800_0000;
        }
        n
    }

    /// The flags part of a `tcpdump -D` line: `[Up, Running, Connected]` or `[none]`.
    pub fn flags_text(&self) -> String {
        let mut flags = Vec::new();
        if self.up {
            flags.push("Up");
        }
        if self.running {
            flags.push("Running");
        }
        if self.loopback {
            flags.push("Loopback");
        }
        match self.connection {
            Connection::Connected => flags.push("Connected"),
            Connection::Disconnected => flags.push("Disconnected"),
            Connection::Unknown | Connection::NotApplicable => {}
        }
        if flags.is_empty() {
            "[none]".to_string()
        } else {
            format!("[{}]", flags.join(", "))
        }
    }

    /// The `tcpdump -D` line for position `number` (1-based).
    pub fn tcpdump_line(&self, number: usize) -> String {
        match &self.description {
            Some(d) => format!("{number}.{} ({d}) {}", self.name, self.flags_text()),
            None => format!("{number}.{} {}", self.name, self.flags_text()),
        }
    }
}

/// Sorts as libpcap does: by figure of merit, keeping the found order among equals.
pub fn sort_interfaces(list: &mut [Interface]) {
    list.sort_by_key(Interface::merit);
}

/// The network interfaces of this network namespace and the `any` device, in `tcpdump -D`
/// order. (libpcap also lists capture sources that are not network devices: USB,
/// Bluetooth, netfilter logs, D-Bus; weir does not capture on those.)
pub fn interfaces() -> Result<Vec<Interface>, Error> {
    // SAFETY: socket has no memory preconditions.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(last_error("socket for interface flags"));
    }
    // SAFETY: a new descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut list = Vec::new();
    for (index, name) in name_index()? {
        let mut req = IfReq::new(&name)?;
        if ifreq_ioctl(sock.as_fd_borrowed(), libc::SIOCGIFFLAGS, &mut req).is_err() {
            continue; // gone since it was listed
        }
        let flags = c_int::from(req.u16_at0());
        let up = flags & libc::IFF_UP != 0;
        let loopback = flags & libc::IFF_LOOPBACK != 0;
        let connection = if loopback {
            Connection::NotApplicable
        } else if !up {
            Connection::Unknown
        } else {
            link_state(sock.as_fd_borrowed(), &name)
        };
        list.push(Interface {
            name,
            index,
            description: None,
            up,
            running: flags & libc::IFF_RUNNING != 0,
            loopback,
            connection,
        });
    }
    list.push(Interface {
        name: "any".to_string(),
        index: 0,
        description: Some("Pseudo-device that captures on all interfaces".to_string()),
        up: true,
        running: true,
        loopback: false,
        connection: Connection::NotApplicable,
    });
    sort_interfaces(&mut list);
    Ok(list)
}

/// `ETHTOOL_GLINK` through `SIOCETHTOOL`: Connected, Disconnected, or Unknown when the
/// driver does not say.
fn link_state(fd: BorrowedFd<'_>, name: &str) -> Connection {
    const ETHTOOL_GLINK: u32 = 0x0000_000a;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let mut value = EthtoolValue { cmd: ETHTOOL_GLINK, data: 0 };
    let Ok(mut req) = IfReq::new(name) else { return Connection::Unknown };
    let ptr = (&mut value as *mut EthtoolValue) as usize;
    req.data[..8].copy_from_slice(&(ptr as u64).to_ne_bytes());
    // SAFETY: `req` names the interface and its union holds a pointer to `value`, a
    // writable `struct ethtool_value` that outlives the call; SIOCETHTOOL with
    // ETHTOOL_GLINK writes only that.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL as _, &mut req as *mut IfReq) };
    if rc < 0 {
        return Connection::Unknown;
    }
    if value.data != 0 {
        Connection::Connected
    } else {
        Connection::Disconnected
    }
}

/// `if_nameindex(3)`: every interface's index and name, in the kernel's order.
fn name_index() -> Result<Vec<(u32, String)>, Error> {
    // SAFETY: no preconditions; the result is freed below.
    let list = unsafe { libc::if_nameindex() };
    if list.is_null() {
        return Err(last_error("if_nameindex"));
    }
    let mut out = Vec::new();
    let mut at = list;
    loop {
        // SAFETY: `at` points into the array if_nameindex returned, which ends with an
        // entry whose index is 0 and name null; the loop stops there.
        let entry = unsafe { &*at };
        if entry.if_index == 0 || entry.if_name.is_null() {
            break;
        }
        // SAFETY: a non-null name in the array is a NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.if_name) };
        out.push((entry.if_index, name.to_string_lossy().into_owned()));
        // SAFETY: the terminating entry has not been reached, so the next one exists.
        at = unsafe { at.add(1) };
    }
    // SAFETY: `list` came from if_nameindex and is freed once.
    unsafe { libc::if_freenameindex(list) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_geometry_is_libpcaps_for_the_default_buffer() {
        let g = RingGeometry::for_buffer(DEFAULT_BUFFER_SIZE, 4096);
        assert_eq!(
            g,
            RingGeometry { block_size: 262_144, block_nr: 8, frame_size: 262_144, frame_nr: 8 }
        );
        assert_eq!(g.bytes(), 2 << 20);
        // Rounded up, never to zero blocks.
        let small = RingGeometry::for_buffer(1, 4096);
        assert_eq!((small.block_nr, small.frame_nr), (1, 1));
        let odd = RingGeometry::for_buffer(3 * 262_144 + 1, 65_536);
        assert_eq!((odd.block_size, odd.block_nr), (262_144, 4));
    }

    #[test]
    fn smaller_rings_shrink_as_libpcap_retries() {
        let g = RingGeometry::for_buffer(100 * 262_144, 4096);
        assert_eq!(g.block_nr, 100);
        assert_eq!(g.smaller().map(|s| s.block_nr), Some(95));
        let few = RingGeometry::for_buffer(3 * 262_144, 4096);
        assert_eq!(few.smaller().map(|s| s.block_nr), Some(2));
        assert_eq!(RingGeometry::for_buffer(1, 4096).smaller(), None);
    }

    #[test]
    fn hardware_types_map_as_libpcap_maps_them() {
        assert_eq!(capture_for_arphrd(libc::ARPHRD_ETHER), Ok(Capture::Raw { linktype: 1 }));
        assert_eq!(capture_for_arphrd(libc::ARPHRD_LOOPBACK), Ok(Capture::Raw { linktype: 1 }));
        assert_eq!(capture_for_arphrd(libc::ARPHRD_NONE), Ok(Capture::Raw { linktype: 101 }));
        assert_eq!(capture_for_arphrd(libc::ARPHRD_PPP), Ok(Capture::Cooked));
        assert_eq!(Capture::Cooked.linktype(), 113);
        let err = capture_for_arphrd(libc::ARPHRD_INFINIBAND).unwrap_err();
        assert!(err.contains("hardware type 32"), "{err}");
    }

    #[test]
    fn directions_parse_as_tcpdump_q_takes_them() {
        assert_eq!("in".parse::<Direction>(), Ok(Direction::In));
        assert_eq!("out".parse::<Direction>(), Ok(Direction::Out));
        assert_eq!("inout".parse::<Direction>(), Ok(Direction::InOut));
        assert!("both".parse::<Direction>().unwrap_err().contains("in, out or inout"));
    }

    #[test]
    fn permission_errors_say_what_is_needed() {
        let e = Error::os("eth0: socket(AF_PACKET)", &io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(e.kind, ErrorKind::Permission);
        assert!(e.to_string().ends_with("you need root or CAP_NET_RAW to capture"), "{e}");
        assert!(!e.to_string().contains('\n'));
        let e = Error::os("x: bind", &io::Error::from_raw_os_error(libc::ENODEV));
        assert_eq!(e.kind, ErrorKind::NoSuchInterface);
    }

    #[test]
    fn an_unknown_interface_is_one_clear_line() {
        let e = PacketSocket::open(&Config::new("weir-no-such0")).unwrap_err();
        // Not root: the interface is looked up first, so the message is the same.
        assert_eq!(e.kind, ErrorKind::NoSuchInterface);
        assert_eq!(e.to_string(), "weir-no-such0: no such interface");
        let long = PacketSocket::open(&Config::new("a-name-much-too-long-for-linux")).unwrap_err();
        assert_eq!(long.kind, ErrorKind::NoSuchInterface);
    }

    fn iface(name: &str, up: bool, running: bool, loopback: bool, c: Connection) -> Interface {
        Interface {
            name: name.into(),
            index: 1,
            description: None,
            up,
            running,
            loopback,
            connection: c,
        }
    }

    #[test]
    fn interfaces_sort_and_print_as_tcpdump_d() {
        let mut list = vec![
            iface("lo", true, true, true, Connection::NotApplicable),
            iface("eth0", true, true, false, Connection::Connected),
            iface("ifb0", false, false, false, Connection::Unknown),
            iface("veth1", true, false, false, Connection::Disconnected),
            Interface {
                name: "any".into(),
                index: 0,
                description: Some("Pseudo-device that captures on all interfaces".into()),
                up: true,
                running: true,
                loopback: false,
                connection: Connection::NotApplicable,
            },
        ];
        sort_interfaces(&mut list);
        let lines: Vec<String> =
            list.iter().enumerate().map(|(i, f)| f.tcpdump_line(i + 1)).collect();
        assert_eq!(
            lines,
            [
                "1.eth0 [Up, Running, Connected]",
                "2.any (Pseudo-device that captures on all interfaces) [Up, Running]",
                "3.lo [Up, Running, Loopback]",
                "4.veth1 [Up, Disconnected]",
                "5.ifb0 [none]",
            ]
        );
    }

    #[test]
    fn the_interface_list_has_lo_and_any() {
        let list = interfaces().unwrap();
        let lo = list.iter().find(|i| i.name == "lo").expect("lo is listed");
        assert!(lo.loopback && lo.index > 0);
        assert!(list.iter().any(|i| i.name == "any" && i.index == 0));
    }

    /// A block with one Ethernet frame whose VLAN tag the kernel took out, and one outgoing
    /// frame on loopback: the tag comes back, the loopback copy goes.
    #[test]
    fn frames_get_their_vlan_tag_back_and_directions_apply() {
        let mut block = vec![0u8; 4096];
        let h = 64;
        let mac = 82 + 4;
        let payload: Vec<u8> = (0..60u8).collect();
        let put32 =
            |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put32(&mut block, h + frame::SEC, 7);
        put32(&mut block, h + frame::NSEC, 9);
        put32(&mut block, h + frame::SNAPLEN, 60);
        put32(&mut block, h + frame::LEN, 60);
        put32(&mut block, h + frame::STATUS, libc::TP_STATUS_VLAN_VALID);
        block[h + frame::MAC..h + frame::MAC + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
        put32(&mut block, h + frame::VLAN_TCI, 0x0123);
        put32(&mut block, h + frame::SLL_IFINDEX, 5);
        block[h + mac..h + mac + 60].copy_from_slice(&payload);
        let eth = Capture::Raw { linktype: LINKTYPE_ETHERNET };
        let found = read_frame(&mut block, h, eth, 1000, Direction::InOut, 1).unwrap().unwrap();
        let data = &block[found.start..found.start + found.len];
        assert_eq!(found.len, 64);
        assert_eq!(found.wire_len, 64);
        assert_eq!(&data[..12], &payload[..12]);
        assert_eq!(&data[12..16], &[0x81, 0x00, 0x01, 0x23]);
        assert_eq!(&data[16..], &payload[12..]);
        assert_eq!((found.ts_sec, found.ts_nsec, found.ifindex), (7, 9, 5));

        // Truncated to the snapshot length.
        let mut again = block.clone();
        put32(&mut again, h + frame::STATUS, 0);
        put32(&mut again, h + frame::VLAN_TCI, 0);
        let short = read_frame(&mut again, h, eth, 20, Direction::InOut, 1).unwrap().unwrap();
        assert_eq!((short.len, short.wire_len), (20, 60));

        // Outgoing: kept for out and inout, dropped for in, dropped on loopback.
        again[h + frame::SLL_PKTTYPE] = libc::PACKET_OUTGOING;
        assert!(read_frame(&mut again, h, eth, 99, Direction::In, 1).unwrap().is_none());
        assert!(read_frame(&mut again, h, eth, 99, Direction::Out, 1).unwrap().is_some());
        assert!(read_frame(&mut again, h, eth, 99, Direction::InOut, 5).unwrap().is_none());
        again[h + frame::SLL_PKTTYPE] = 0;
        assert!(read_frame(&mut again, h, eth, 99, Direction::Out, 1).unwrap().is_none());

        // A frame claiming to run past the block is malformed, not a panic.
        put32(&mut again, h + frame::SNAPLEN, 10_000);
        assert!(read_frame(&mut again, h, eth, 99, Direction::InOut, 1).is_none());
    }

    #[test]
    fn cooked_frames_get_a_linux_sll_header() {
        let mut block = vec![0u8; 4096];
        let h = 64;
        let mac = 96 + 4;
        let put32 =
            |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put32(&mut block, h + frame::SNAPLEN, 20);
        put32(&mut block, h + frame::LEN, 20);
        block[h + frame::MAC..h + frame::MAC + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
        block[h + frame::SLL_PROTOCOL..h + frame::SLL_PROTOCOL + 2].copy_from_slice(&[0x08, 0x00]);
        block[h + frame::SLL_HATYPE..h + frame::SLL_HATYPE + 2]
            .copy_from_slice(&1u16.to_ne_bytes());
        block[h + frame::SLL_PKTTYPE] = 0;
        block[h + frame::SLL_HALEN] = 6;
        block[h + frame::SLL_ADDR..h + frame::SLL_ADDR + 6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        block[h + mac] = 0x45;
        let found =
            read_frame(&mut block, h, Capture::Cooked, 1000, Direction::InOut, 1).unwrap().unwrap();
        let data = &block[found.start..found.start + found.len];
        assert_eq!((found.len, found.wire_len), (36, 36));
        assert_eq!(&data[..16], &[0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00]);
        assert_eq!(data[16], 0x45);
    }
}
