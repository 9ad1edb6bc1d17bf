//! weir: the facade over the pipeline. It compiles what users write (tcpdump expressions,
//! eBPF programs) and runs it on the engine [`engine::choose`] picks — native filter code,
//! the eBPF JIT or the interpreter — and says why (`--explain`). Only this crate knows every
//! other crate; the CLI talks to it.
//!
//! ```
//! use weir::{compile_filter, Engine, LinkType, PreparedFilter};
//! let filter = compile_filter("ip6 or arp", LinkType::Ethernet).unwrap();
//! let mut prepared = PreparedFilter::new(&filter, Some(Engine::Interp)).unwrap();
//! let mut frame = [0u8; 60];
//! frame[12..14].copy_from_slice(&[0x08, 0x06]); // ARP
//! assert!(prepared.matches(&frame, 60));
//! assert_eq!(prepared.choice().engine, Engine::Interp);
//! ```

mod classic;
pub mod data;
pub mod engine;
mod filter;
pub mod program;

pub use classic::PreparedClassic;
pub use engine::{choose, Choice, ChoiceError, Engine, Subject};
pub use filter::PreparedFilter;
pub use program::PreparedProgram;
pub use weir_filter::Filter;
pub use weir_pflang::{CompileError, LinkType, Options};

/// Compiles a tcpdump expression for a link type with the system's name files (and weir's
/// built-in tables where they are missing), optimized.
pub fn compile_filter(expr: &str, linktype: LinkType) -> Result<Filter, CompileError> {
    weir_pflang::compile(expr, &Options::new(linktype), &weir_pflang::names::NameDb::system())
}
