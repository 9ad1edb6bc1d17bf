//! `weir-runtime`: everything a program run needs from the outside world. Today that is
//! packet input from capture files and the output files commands write ([`output`]:
//! standard output, devices and FIFOs written through, regular files replaced atomically);
//! maps, helpers and live interfaces come later. The OS calls (signals, who runs the
//! process) and the outside oracles (the `bpf()` syscall, libpcap) are `weir-sys`'s.
//! Engines never see this crate: they get plain data (`weir_program::abi::Bindings`) from
//! the facade.
//!
//! ```no_run
//! use weir_runtime::capture::Capture;
//! let capture = Capture::open("testdata/captures/sample.pcap".as_ref()).unwrap();
//! for record in capture.records() {
//!     let record = record.unwrap();
//!     println!("{} bytes of {}", record.data.len(), record.wire_len);
//! }
//! ```

pub mod capture;
pub mod live;
pub mod output;
pub mod source;
