//! `weir-runtime`: everything a program run needs from the outside world. Today that is
//! packet input through one [`source::PacketSource`] (capture files and standard input read
//! as a stream by [`capture::CaptureReader`]: pcap and pcapng as libpcap reads them, in
//! constant memory), capture output ([`capture::CaptureWriter`]: copy-through in the input's
//! format, or fresh pcap) and the output files commands write ([`output`]: standard output,
//! devices and FIFOs written through, regular files replaced atomically); maps, helpers and
//! live interfaces come later. The OS calls (signals, who runs the process) and the outside
//! oracles (the `bpf()` syscall, libpcap) are `weir-sys`'s. Engines never see this crate:
//! they get plain data (`weir_program::abi::Bindings`) from the facade.
//!
//! ```no_run
//! use weir_runtime::capture::CaptureReader;
//! use weir_runtime::source::PacketSource;
//! # fn main() -> Result<(), weir_runtime::capture::CaptureError> {
//! let mut capture = CaptureReader::open("testdata/captures/sample.pcap".as_ref())?;
//! while let Some(packet) = capture.next_packet() {
//!     let packet = packet?; // damage: "record N at byte B: reason"
//!     println!("{} bytes of {}", packet.data.len(), packet.wire_len);
//! }
//! # Ok(())
//! # }
//! ```

pub mod capture;
pub mod live;
pub mod output;
pub mod source;
