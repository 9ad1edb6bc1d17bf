//! `weir-sys`: the OS and the outside oracles, in one audited place.
//!
//! Weir's pipeline (front ends -> `Program` -> verify -> engine) is pure Rust and needs
//! nothing from the machine it runs on. Two things outside it are measured against and
//! diffed with, and both are reached through this crate only:
//!
//! - [`kernel`]: the Linux kernel through the `bpf()` syscall. `BPF_PROG_LOAD` puts an
//!   eBPF program through the kernel's verifier (with its log when it refuses),
//!   `BPF_PROG_TEST_RUN` runs it on a packet with the kernel's own timing. The syscall sits
//!   behind a small trait ([`kernel::BpfSys`]) so that the attribute encoding and the error
//!   paths are tested without root through [`kernel::FakeBpf`].
//! - [`libpcap`]: the system libpcap, opened with `dlopen` at run time (`pcap_compile`
//!   optimized or not, `bpf_validate`, `bpf_filter`), the semantic oracle for pflang and
//!   classic BPF and the baseline the benchmarks measure.
//!
//! - [`cleanup`]: temporary files registered for removal when SIGINT, SIGTERM or SIGHUP
//!   ends the process (the one signal handler in weir; a live capture gives it a stop flag
//!   instead), and [`user`]: who the process runs as. The runtime's output files use both.
//! - [`clock`]: the thread's CPU time, for timings on a loaded machine.
//! - [`packet_socket`]: live capture (`AF_PACKET`, a `TPACKET_V3` ring, kernel filters,
//!   statistics, the interface list).
//!
//! Neither oracle is a build requirement: nothing is linked, and a machine without libpcap or
//! without the right to call `bpf()` gets an `Err` that says why (tests turn it into a
//! `SKIPPED: <name>: <reason>` line). Tests, `weir-bench` and the runtime use this crate;
//! engines and front ends never do.
//!
//! ```no_run
//! use weir_sys::{kernel, libpcap};
//!
//! // libpcap's verdict for `tcp port 22` on a frame.
//! let pcap = libpcap::load()?;
//! let insns = pcap.compile("tcp port 22", 1, true)?;
//! let prog = pcap.validate(&insns)?;
//! let verdict = prog.filter(&[0u8; 60], 60);
//!
//! // The kernel's, for `mov32 r0, 1; exit`, when it can be asked.
//! if let Err(reason) = kernel::available() {
//!     println!("SKIPPED: example: {reason}");
//!     return Ok(());
//! }
//! let code = [0xb4, 0, 0, 0, 1, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
//! let loaded = kernel::load(kernel::ProgType::SchedCls, &code).map_err(|e| e.to_string())?;
//! let run = loaded.test_run(&[0u8; 60], 1).map_err(|e| e.to_string())?;
//! assert_eq!(run.retval, 1);
//! # let _ = verdict;
//! # Ok::<(), String>(())
//! ```

pub mod cleanup;
pub mod clock;
pub mod kernel;
pub mod libpcap;
pub mod netns;
pub mod packet_socket;
pub mod user;
