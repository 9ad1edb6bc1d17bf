//! Filters straight to native code: [`weir_filter`]'s IR compiled by Cranelift into one
//! function, without going through eBPF.
//!
//! A filter is a tree of tests over packet bytes; its meaning is the reference evaluator's
//! ([`weir_filter::Filter::run`]), which this code must give on every packet: loads are
//! big-endian, any load past the captured bytes or division by zero rejects the packet,
//! shifts by 32 or more give 0, scratch slots start at 0. The native code reads nothing
//! outside the packet (every load is checked, once per path, unless a guard or an earlier
//! check on the same path covers it; see [`lower`]) and the tables of its own large sets,
//! so [`NativeFilter`] is a safe API over any packet.
//!
//! Compiling costs a few hundred microseconds for everyday filters (one Cranelift function,
//! optimized for speed; the host ISA is built once per process); sets become a binary
//! search over a table ([`set`]), so large host lists compile as fast as small ones.
//!
//! ```
//! use weir_filter::{Expr, Filter, Pred, Size};
//! // "ether proto 0x0800": the Ethernet type field is the 2 bytes at offset 12.
//! let ipv4 = Filter::new(Pred::eq(Expr::load_at(12, Size::Half), 0x0800));
//! let native = weir_jit::filter::compile(&ipv4).unwrap();
//! let mut pkt = vec![0u8; 14];
//! pkt[12] = 0x08;
//! assert!(native.matches(&pkt, 14));
//! assert_eq!(native.run(&pkt, 14), ipv4.accept);
//! assert!(!native.matches(&pkt[..13], 14)); // too short: the load aborts, the packet is rejected
//! ```

mod code;
mod lower;
mod set;

use weir_filter::Filter;

use self::code::Code;
use self::set::SetTables;

/// Why a filter did not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// Predicates and expressions nest deeper than the compiler follows.
    #[error("the filter nests deeper than {limit} levels")]
    TooDeep { limit: u32 },
    /// A set with more ranges than a table's 32-bit offsets reach.
    #[error("a set of {ranges} ranges is too large to compile")]
    SetTooLarge { ranges: usize },
    /// The host is not one Cranelift can generate code for (or not 64-bit).
    #[error("unsupported host: {0}")]
    Host(String),
    /// Cranelift refused the generated function or could not map the code.
    #[error("code generation failed: {0}")]
    Backend(String),
    /// A bug in the compiler (an assumption it relies on did not hold).
    #[error("internal filter compiler error: {0}")]
    Internal(&'static str),
}

/// A filter compiled to native code: immutable, shareable between threads, and each run
/// allocates nothing and touches nothing but the packet and the stack.
pub struct NativeFilter {
    code: Code,
    /// The range tables the code searches; the code holds their addresses.
    tables: SetTables,
    accept: u32,
}

impl std::fmt::Debug for NativeFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeFilter")
            .field("code_bytes", &self.code.bytes().len())
            .field("set_tables", &self.tables.len())
            .field("accept", &self.accept)
            .finish()
    }
}

/// The largest filter (in IR nodes, [`weir_filter::opt::node_count`]) compiled with
/// Cranelift's optimizations; larger ones are compiled with `opt_level = none`, as the eBPF
/// JIT does above [`crate::OPTIMIZE_MAX_SLOTS`]. A filter's code is compares and branches
/// whose loads the lowering already shares along each path, so the optimizations gain
/// little on it, while on a large function (a long list of distinct host and port pairs)
/// the e-graph pass and the register allocator grow faster than the code: measured here
/// (bench/records/2026-11-25-compile.txt), optimized and not, a 10,000-pair firewall list
/// took 14.8 s and 6.0 s; up to a few thousand nodes the two take about the same time.
pub const OPTIMIZE_MAX_NODES: usize = 20_000;

/// Compiles `filter` to native code for this host (with Cranelift's optimizations up to
/// [`OPTIMIZE_MAX_NODES`]).
pub fn compile(filter: &Filter) -> Result<NativeFilter, CompileError> {
    let optimize = weir_filter::opt::node_count(&filter.pred) <= OPTIMIZE_MAX_NODES;
    compile_with(filter, optimize)
}

/// [`compile`] with Cranelift's optimizations chosen by the caller rather than by size
/// (benchmarks and tests compare the two; the code means the same either way).
pub fn compile_with(filter: &Filter, optimize: bool) -> Result<NativeFilter, CompileError> {
    let isa = if optimize { code::host_isa()? } else { code::host_isa_unoptimized()? };
    let mut tables = SetTables::new();
    let code = Code::compile(isa, |func| lower::lower(func, filter, &mut tables))?;
    Ok(NativeFilter { code, tables, accept: filter.accept })
}

impl NativeFilter {
    /// What the filter returns for one packet (captured bytes, length on the wire): its
    /// accept value when it matches, else 0; [`Filter::run`]'s result.
    #[inline]
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        if self.matches(packet, wire_len) {
            self.accept
        } else {
            0
        }
    }

    /// True when the filter matches the packet; [`Filter::matches`]'s result.
    #[inline]
    pub fn matches(&self, packet: &[u8], wire_len: u32) -> bool {
        self.code.call(packet, wire_len)
    }

    /// What [`NativeFilter::run`] returns on a match.
    pub fn accept(&self) -> u32 {
        self.accept
    }

    /// The generated machine code, as mapped for execution (read-only, executable).
    pub fn machine_code(&self) -> &[u8] {
        self.code.bytes()
    }
}

#[cfg(test)]
mod deep_tests {
    use super::{compile, CompileError};
    use weir_filter::{Expr, Filter, Pred, Size};

    /// `depth` levels (the comparison and its load included) of mixed junctions and `not`s.
    fn nested(depth: u32) -> Filter {
        let mut p = Pred::eq(Expr::load_at(3, Size::Byte), 1);
        for i in 2..depth {
            p = match i % 3 {
                0 => Pred::Not(Box::new(p)),
                1 => Pred::And(vec![Pred::eq(Expr::load_at(i % 40, Size::Byte), 1), p]),
                _ => Pred::Or(vec![p, Pred::eq(Expr::load_at(i % 30, Size::Byte), 9)]),
            };
        }
        Filter::new(p)
    }

    /// The limit compiles and one more level is refused, on a 2 MiB thread stack (a spawned
    /// thread's default), whatever the build.
    #[test]
    fn the_depth_limit_on_a_small_stack() {
        let limit = super::lower::MAX_DEPTH;
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let at = nested(limit);
                let native = compile(&at).expect("at the limit");
                for len in [0usize, 4, 40] {
                    let packet = vec![1u8; len];
                    assert_eq!(native.run(&packet, 64), at.run(&packet, 64));
                }
                match compile(&nested(limit + 1)) {
                    Err(CompileError::TooDeep { limit: l }) => assert_eq!(l, limit),
                    other => panic!("expected TooDeep, got {other:?}"),
                }
            })
            .expect("spawn")
            .join()
            .expect("the compiler panicked");
    }
}
