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
/// The `.data` case format (weir-program's `data`, where the engines' tests reach it too).
pub use weir_program::data;
pub mod dispatch;
pub mod engine;
mod filter;
pub mod flow_xdp;
pub mod listing;
pub mod object;
pub mod program;
mod tiered;

pub use classic::PreparedClassic;
pub use dispatch::{Dispatch, DispatchError, Handlers, Router};
pub use engine::{choose, Choice, ChoiceError, Engine, Subject};
pub use filter::{emit_ebpf, PreparedFilter};
pub use object::{FrameSource, Loaded, Object, Verdict, VerdictView};
pub use program::PreparedProgram;
pub use tiered::BACKGROUND_JIT_SLOTS;
pub use weir_filter::{emit, Filter};
pub use weir_helpers::flow_hash;
pub use weir_maps as maps;
pub use weir_pflang::names::NameDb;
pub use weir_pflang::{CompileError, LinkType};
pub use weir_program::{abi::Bindings, ProgType, Program, Verified};
pub use weir_verifier::{Options as VerifyOptions, Proof, Rejection};

/// The crates under the facade, for callers that read or print their data (the command
/// line prints classic BPF and eBPF listings, parses classic programs, prints packets).
/// What runs something goes through the facade's own functions and types.
pub use weir_cbpf as cbpf;
pub use weir_elf as elf;
/// The flow datapath (`weir flow`): rules, classifier and actions run as they are.
pub use weir_flow as flow;
pub use weir_isa as isa;
/// The JIT's own report of the checks a proven program's facts let it drop (`--explain`).
pub use weir_jit as jit;
pub use weir_packet as packet;
pub use weir_pflang as pflang;
/// Multi-way packet dispatch with pflang clauses (`weir match`).
pub use weir_pfmatch as pfmatch;
pub use weir_verifier as verifier;

/// libpcap's message for an expression its optimizer reduces to "reject every packet".
pub const REJECTS_ALL: &str = "expression rejects all packets";

/// How a tcpdump expression is compiled.
#[derive(Debug, Clone)]
pub struct FilterOptions {
    pub linktype: LinkType,
    /// The capture's IPv4 netmask, for `ip broadcast` (libpcap refuses it without one).
    pub netmask: Option<u32>,
    /// Run the filter IR's optimizer (tcpdump's default; `-O` turns it off). The meaning is
    /// the same either way, but, as with libpcap, an optimized compile refuses an expression
    /// libpcap's optimizer reduces to "reject everything"
    /// ([`weir_pflang::libpcap_rejects_all`]).
    pub optimize: bool,
}

impl FilterOptions {
    pub fn new(linktype: LinkType) -> FilterOptions {
        FilterOptions { linktype, netmask: None, optimize: true }
    }
}

/// Compiles a tcpdump expression for a link type with the system's name files (and weir's
/// built-in tables where they are missing), optimized.
pub fn compile_filter(expr: &str, linktype: LinkType) -> Result<Filter, CompileError> {
    compile_filter_with(expr, &FilterOptions::new(linktype), &NameDb::system())
}

/// The compile path, in one place: parse, lower to the filter IR, optimize (unless
/// `options.optimize` is off). An empty expression accepts every packet, as in tcpdump.
///
/// With the optimizer on, an expression libpcap's `pcap_compile` refuses as "expression
/// rejects all packets" (its optimizer proves the program false) is refused with that
/// message, the span covering the whole expression; `optimize: false` accepts it (it then
/// matches nothing), as `tcpdump -O` does.
pub fn compile_filter_with(
    expr: &str,
    options: &FilterOptions,
    names: &NameDb,
) -> Result<Filter, CompileError> {
    let ast = weir_pflang::parse(expr)?;
    let mut lower_options = weir_pflang::Options::new(options.linktype);
    lower_options.netmask = options.netmask;
    let lowered = weir_pflang::lower_with_facts(ast.as_ref(), &lower_options, names)?;
    if !options.optimize {
        return Ok(lowered.filter);
    }
    if weir_pflang::libpcap_rejects_all(&lowered) {
        // The whole expression, without the blanks around it.
        let start = expr.len() - expr.trim_start().len();
        let span = weir_pflang::Span::new(start, expr.trim_end().len().max(start));
        return Err(CompileError::new(span, REJECTS_ALL));
    }
    Ok(weir_filter::opt::optimize_owned(lowered.filter))
}

/// Proves `program` safe as the kernel's verifier would (see `weir_verifier`): the one
/// entry point the command line uses before it runs a program (`weir verify`, `weir run`,
/// `weir exec`). The conformance plugin does not verify: the suite tests semantics.
pub fn verify(program: &Program, options: &VerifyOptions) -> Result<Proof, Rejection> {
    weir_verifier::verify(program, options)
}

/// The helper ids a program of `prog_type` runs with in `weir run` (every helper weir
/// runs, for the verifier's `Options::helpers`): the bound ones, and `bpf_loop`, which both
/// engines run themselves.
pub fn runtime_helpers(prog_type: ProgType) -> Vec<u32> {
    let mut ids: Vec<u32> =
        weir_helpers::bindings(prog_type).helpers().iter().map(|h| h.id).collect();
    if !ids.contains(&weir_program::abi::helper_id::LOOP) {
        ids.push(weir_program::abi::helper_id::LOOP);
    }
    ids
}
