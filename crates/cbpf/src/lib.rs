//! `weir-cbpf`: classic BPF as tcpdump, libpcap and `SO_ATTACH_FILTER` speak it. This crate
//! sits on `weir-isa`'s classic encodings and adds what a front end needs before anything is
//! translated to eBPF:
//!
//! - [`validate`]: the Linux kernel's classic checker rules together with libpcap's
//!   `bpf_validate` rules, each failure naming the rule and the instruction index;
//!   [`validate_libpcap`] is libpcap's rules alone (it admits the backward `ja` that
//!   `ip6 protochain` compiles to).
//! - [`CbpfFilter`]: validate once, then run on many packets with libpcap's `bpf_filter`
//!   results, without allocating per packet; [`run`] is the same interpreter for one-off use.
//! - [`parse`]: tcpdump's `-d` listing (so it doubles as an assembler), `-dd`, `-ddd` and raw
//!   `struct sock_filter` bytes.
//!
//! ```
//! use weir_cbpf::{parse, CbpfFilter, Format};
//! let prog = parse(
//!     b"(000) ldh [12]\n(001) jeq #0x800 jt 2 jf 3\n(002) ret #262144\n(003) ret #0\n",
//!     Format::Listing,
//! )
//! .unwrap();
//! let filter = CbpfFilter::new(&prog).unwrap();
//! let mut frame = [0u8; 14];
//! frame[12] = 0x08;
//! assert_eq!(filter.run(&frame, 60), 262144);
//! frame[12] = 0x86;
//! assert_eq!(filter.run(&frame, 60), 0);
//! ```
#![deny(clippy::arithmetic_side_effects)]

mod exec;
mod meta;
mod parse;
mod validate;

pub mod translate;

pub use exec::{run, CbpfFilter, MAX_BACKWARD_JUMPS};
pub use meta::{supported_ancillary, PacketMeta};
pub use parse::{parse, CbpfParseError, CbpfParseErrorKind, Format};
pub use validate::{validate, validate_libpcap, CbpfValidateError, CbpfValidateErrorKind, Rules};
