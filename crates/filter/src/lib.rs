//! weir-filter: the guarded filter IR, the second currency of the pipeline.
//!
//! pflang lowers to a [`Filter`] (and classic BPF can be lifted into one); the optimizer
//! rewrites it; emitters turn it into classic BPF or eBPF, and the JIT compiles it straight to
//! native code. Its meaning is defined by [`eval`], which the tests check against libpcap.
//!
//! ```
//! use weir_filter::{Expr, Filter, Pred, Size};
//! // "ether proto 0x0800": the Ethernet type field is the 2 bytes at offset 12.
//! let ipv4 = Filter::new(Pred::eq(Expr::load_at(12, Size::Half), 0x0800));
//! let mut pkt = vec![0u8; 14];
//! pkt[12] = 0x08;
//! assert!(ipv4.matches(&pkt, 14));
//! assert!(!ipv4.matches(&pkt[..13], 14)); // too short: the load aborts, the packet is rejected
//! ```

pub mod emit;
pub mod eval;
pub mod ir;
pub mod opt;
pub mod pairs;

mod display;

pub use eval::{Abort, Evaluator};
pub use ir::{
    BinOp, Chain, ChainOutcome, ChainStep, CmpOp, Expr, Filter, Pred, Size, ValueSet,
    CHAIN_HOP_BUDGET, DEFAULT_ACCEPT, SCRATCH_SLOTS,
};
pub use pairs::{PairBranch, PairTable, PairTest, Pairs};

#[cfg(test)]
mod deep_tests;
