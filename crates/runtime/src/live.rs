//! Live capture: a [`PacketSource`] over an interface's `TPACKET_V3` ring
//! (`weir_sys::packet_socket`), zero copy: a [`Packet`]'s `data` borrows the ring frame,
//! and the ring block goes back to the kernel when a packet of the next block is asked for.
//!
//! ```no_run
//! use weir_runtime::live::{LiveOptions, LiveSource};
//! use weir_runtime::source::PacketSource;
//! let mut source = LiveSource::open(&LiveOptions::new("eth0"))?;
//! let _signals = source.stop_on_signals()?; // Ctrl-C ends the loop below
//! // ldh [12]; jeq #0x800 jt 0 jf 1; ret #262144; ret #0: IPv4 only, in the kernel.
//! source.attach_classic(&[(0x28, 0, 0, 12), (0x15, 0, 1, 0x800), (0x06, 0, 0, 262_144), (0x06, 0, 0, 0)])?;
//! while let Some(packet) = source.next_packet() {
//!     let packet = packet?;
//!     println!("{} bytes of {}", packet.data.len(), packet.wire_len);
//! }
//! let stats = source.stats()?;
//! eprintln!("{} received by filter, {} dropped by kernel", stats.received, stats.dropped);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Packets: `stored: None`, `offset: 0`, `interface` the interface index the packet went
//! through, `linktype` Ethernet (1) for Ethernet-like devices and loopback, `LINUX_SLL`
//! (113) for the `any` device and for point-to-point and tunnel devices (cooked).
//!
//! Kernel filters see the packet as the socket does: on a cooked socket it starts at the
//! network header, so a program compiled for `LINUX_SLL` would read the wrong bytes there;
//! [`LiveSource::attach_classic`] and [`LiveSource::attach_ebpf`] refuse cooked captures
//! (filter those in user space).

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir_sys::kernel::{self, LoadedProgram, ProgType};
use weir_sys::packet_socket::{self, Capture, PacketSocket};

pub use weir_sys::cleanup::StopGuard;
pub use weir_sys::packet_socket::{
    Connection, Direction, Error as LiveError, ErrorKind as LiveErrorKind, Interface, RingGeometry,
    Stats, DEFAULT_BUFFER_SIZE, DEFAULT_SNAPLEN, DEFAULT_TIMEOUT_MS, MAXIMUM_SNAPLEN,
};

use crate::capture::CaptureError;
use crate::source::{Packet, PacketSource};

/// What to capture and how (`-i`, `-s`, `-p`, `-Q`, `-B`, the block timeout): the packet
/// socket's own configuration, with tcpdump's defaults from `LiveOptions::new`.
pub use weir_sys::packet_socket::Config as LiveOptions;

/// Packets from an interface, as they arrive.
#[derive(Debug)]
pub struct LiveSource {
    socket: PacketSocket,
    stop: Arc<AtomicBool>,
    index: u64,
    idle: Option<Duration>,
    failed: bool,
    /// The eBPF program loaded by [`LiveSource::attach_ebpf_code`] (the socket holds its
    /// own reference once attached; kept for symmetry and diagnostics).
    program: Option<LoadedProgram>,
}

impl LiveSource {
    /// Opens `options.interface`. Nothing is received until the first packet is asked for,
    /// so a filter attached before that sees every packet.
    pub fn open(options: &LiveOptions) -> Result<LiveSource, LiveError> {
        let socket = PacketSocket::open(options)?;
        Ok(LiveSource {
            socket,
            stop: Arc::new(AtomicBool::new(false)),
            index: 0,
            idle: None,
            failed: false,
            program: None,
        })
    }

    /// Starts receiving now (the first [`PacketSource::next_packet`] does it otherwise).
    pub fn start(&mut self) -> Result<(), LiveError> {
        self.socket.start()
    }

    /// The flag that ends the stream: once set, [`PacketSource::next_packet`] returns
    /// `None` within 100 ms.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Replaces the stop flag (to share one with other code).
    pub fn set_stop_flag(&mut self, flag: Arc<AtomicBool>) {
        self.stop = flag;
    }

    /// Makes SIGINT, SIGTERM and SIGHUP set the stop flag (a second signal ends the
    /// process as usual) until the guard is dropped.
    pub fn stop_on_signals(&self) -> io::Result<StopGuard> {
        weir_sys::cleanup::stop_on_signal(Arc::clone(&self.stop))
    }

    /// Ends the stream after `idle` without a packet (`None`, the default: wait until
    /// stopped).
    pub fn set_idle_timeout(&mut self, idle: Option<Duration>) {
        self.idle = idle;
    }

    /// The interface's index (0 for `any`).
    pub fn ifindex(&self) -> u32 {
        self.socket.ifindex()
    }

    /// Whether packets are cooked (`LINUX_SLL` headers made by weir).
    pub fn cooked(&self) -> bool {
        self.socket.capture() == Capture::Cooked
    }

    /// The ring's shape.
    pub fn geometry(&self) -> RingGeometry {
        self.socket.geometry()
    }

    fn refuse_cooked(&self) -> Result<(), LiveError> {
        if self.cooked() {
            return Err(LiveError {
                kind: LiveErrorKind::Unsupported,
                message: "kernel filters are not used on a cooked capture (the any device): \
                          the kernel sees packets without the LINUX_SLL header"
                    .to_string(),
            });
        }
        Ok(())
    }

    /// Puts a classic BPF program, `(code, jt, jf, k)` per instruction, in the kernel:
    /// only packets it accepts reach the ring (truncated to its return value).
    pub fn attach_classic(&mut self, program: &[(u16, u8, u8, u32)]) -> Result<(), LiveError> {
        self.refuse_cooked()?;
        self.socket.attach_classic(program)
    }

    /// Attaches an eBPF socket-filter program already loaded (its descriptor).
    pub fn attach_ebpf(&mut self, program: BorrowedFd<'_>) -> Result<(), LiveError> {
        self.refuse_cooked()?;
        self.socket.attach_ebpf(program)
    }

    /// Loads `code` (eBPF instructions, 8 bytes each) as a socket filter through the
    /// kernel's verifier and attaches it. The error carries the verifier's reason.
    pub fn attach_ebpf_code(&mut self, code: &[u8]) -> Result<(), LiveError> {
        self.refuse_cooked()?;
        let program = kernel::load(ProgType::SocketFilter, code).map_err(|e| LiveError {
            kind: if e.error.kind() == io::ErrorKind::PermissionDenied {
                LiveErrorKind::Permission
            } else {
                LiveErrorKind::Os
            },
            message: format!("the kernel refused the eBPF socket filter: {}", e.reason()),
        })?;
        self.socket.attach_ebpf(program.as_fd())?;
        self.program = Some(program);
        Ok(())
    }

    /// Whether a kernel filter is attached.
    pub fn has_kernel_filter(&self) -> bool {
        self.socket.has_filter()
    }

    /// The kernel's counters so far (for tcpdump's "received by filter" and "dropped by
    /// kernel" lines).
    pub fn stats(&mut self) -> Result<Stats, LiveError> {
        self.socket.stats()
    }
}

impl PacketSource for LiveSource {
    fn next_packet(&mut self) -> Option<Result<Packet<'_>, CaptureError>> {
        if self.failed || self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let linktype = self.socket.linktype();
        let index = self.index;
        match self.socket.next(&self.stop, self.idle) {
            Ok(Some(frame)) => {
                self.index = self.index.saturating_add(1);
                Some(Ok(Packet {
                    index,
                    data: frame.data,
                    wire_len: frame.wire_len,
                    ts_sec: u64::from(frame.ts_sec),
                    ts_nsec: frame.ts_nsec,
                    linktype,
                    interface: frame.ifindex,
                    offset: 0,
                    stored: None,
                }))
            }
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(live_error(e.message)))
            }
        }
    }

    fn linktype(&self) -> u32 {
        self.socket.linktype()
    }

    fn snaplen(&self) -> u32 {
        self.socket.snaplen()
    }

    fn would_wait(&self) -> bool {
        self.socket.would_wait()
    }
}

/// A live-capture failure in the source contract's error type (no record, no offset).
fn live_error(message: String) -> CaptureError {
    CaptureError { record: None, offset: None, message }
}

/// The interfaces `tcpdump -D` lists (the network devices and `any`), in its order.
pub fn interfaces() -> Result<Vec<Interface>, LiveError> {
    packet_socket::interfaces()
}

/// The `tcpdump -D` lines for [`interfaces`].
pub fn interface_lines() -> Result<Vec<String>, LiveError> {
    Ok(interfaces()?.iter().enumerate().map(|(i, f)| f.tcpdump_line(i + 1)).collect())
}

/// The interface tcpdump captures on when none is named: the first of [`interfaces`]
/// (libpcap's order puts interfaces that are up and running, and not loopbacks, first).
pub fn default_interface() -> Result<String, LiveError> {
    interfaces()?.into_iter().next().map(|interface| interface.name).ok_or_else(|| LiveError {
        kind: LiveErrorKind::NoSuchInterface,
        message: "no suitable device found (name one with -i)".to_string(),
    })
}
