//! Emitters: filter IR -> classic BPF ([`cbpf`]) and eBPF ([`ebpf`]).
//!
//! Both turn a [`crate::Filter`] into straight-line code with short-circuit control flow:
//! every predicate is compiled against a "true" and a "false" target, so `and`/`or`/`not`
//! cost no instructions of their own, and an abort (an out-of-bounds load, a division by
//! zero) goes straight to the shared "reject" exit, whatever `not`s surround it. The
//! control-flow skeleton (labels, jumps, dead-code removal, jump threading) is shared
//! ([`flow`]); so are the facts about expressions the emitters rely on ([`bounds`]) and the
//! balanced range search that [`crate::Pred::In`] compiles to ([`set`]). The laid-out
//! classic program then goes through [`cbpf::tighten`] (`tighten.rs`): libpcap's
//! flow-graph passes, which need the whole program rather than the tree.
//!
//! One property of the IR makes the expression code simple: evaluating an [`crate::Expr`]
//! has no effect but its value or an abort, and an abort rejects the packet whatever happens
//! around it. So the operands of an expression may be evaluated in any order (the emitters
//! pick the order that needs the fewest registers), and every packet load in an expression
//! may be checked up front. Order matters only between predicates (short-circuiting and
//! [`crate::Pred::Store`]), and the emitters keep it.
//!
//! ```
//! use weir_filter::emit::{cbpf, ebpf};
//! use weir_filter::{Expr, Filter, Pred, Size};
//! use weir_program::ProgType;
//! let ipv4 = Filter::new(Pred::eq(Expr::load_at(12, Size::Half), 0x0800));
//! let listing = weir_isa::cbpf::format_listing(&cbpf::emit(&ipv4).unwrap());
//! assert_eq!(
//!     listing,
//!     "(000) ldh      [12]\n\
//!      (001) jeq      #0x800           jt 2\tjf 3\n\
//!      (002) ret      #262144\n\
//!      (003) ret      #0\n"
//! );
//! let program = ebpf::emit(&ipv4, ProgType::Xdp).unwrap();
//! weir_program::validate(&program).unwrap();
//! ```

use std::fmt;

use weir_program::LinkError;

pub mod cbpf;
pub mod ebpf;

pub mod bounds;
mod flow;
mod set;
mod tighten;

#[doc(hidden)]
pub use tighten::tighten_with_confirming_round;

/// Why a filter cannot be emitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmitError {
    /// An [`crate::Expr::Scratch`] or [`crate::Pred::Store`] names a slot at or past
    /// [`crate::SCRATCH_SLOTS`].
    ScratchSlot(u8),
    /// Classic BPF: an expression needs more temporaries at once (`needed`) than the
    /// scratch cells the filter leaves free.
    OutOfScratch { used_by_filter: u32, needed: u32 },
    /// Classic BPF: the program would have at least `len` instructions, more than the
    /// `max` classic BPF allows (a large address set, for instance: classic BPF searches it
    /// with a chain of tests; eBPF and native code have no such limit).
    TooLong { len: usize, max: usize },
    /// eBPF: the expression needs more spill slots than the 512-byte stack holds.
    StackFull,
    /// eBPF: a jump too long for its encoding.
    Link(LinkError),
    /// A bug in the emitter (an assumption it relies on did not hold).
    Internal(&'static str),
    /// A construct this emitter does not support yet (names it).
    Unsupported(&'static str),
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmitError::ScratchSlot(slot) => write!(
                f,
                "scratch slot {slot} does not exist (the filter IR has slots 0..{})",
                crate::SCRATCH_SLOTS
            ),
            EmitError::OutOfScratch { used_by_filter, needed } => write!(
                f,
                "the filter uses {used_by_filter} of the 16 scratch cells, and an expression \
                 needs {needed} temporaries at once"
            ),
            EmitError::TooLong { len, max } => write!(
                f,
                "the filter is too large for classic BPF: it needs at least {len} instructions, \
                 more than classic BPF's limit of {max} (large address sets are the usual \
                 cause); use the eBPF or native engine, which have no such limit"
            ),
            EmitError::StackFull => {
                f.write_str("the expression needs more spill slots than the eBPF stack holds")
            }
            EmitError::Link(e) => write!(f, "the eBPF program does not link: {e}"),
            EmitError::Internal(what) => write!(f, "internal emitter error: {what}"),
            EmitError::Unsupported(what) => write!(f, "not supported by this emitter yet: {what}"),
        }
    }
}

impl std::error::Error for EmitError {}

/// The comparison that holds for `(b, a)` exactly when `op` holds for `(a, b)`: how a
/// constant left operand moves to the right, where the instructions take it.
pub(crate) fn mirror(op: crate::CmpOp) -> crate::CmpOp {
    use crate::CmpOp::*;
    match op {
        Gt => Lt,
        Lt => Gt,
        Ge => Le,
        Le => Ge,
        Eq | Ne | Set => op,
    }
}

/// Checks that every scratch slot the filter names exists, and returns the set of slots it
/// reads (bit `s` set when [`crate::Expr::Scratch`]`(s)` occurs) and the set it uses at all.
pub(crate) fn scratch_usage(root: &crate::Pred) -> Result<(u16, u16), EmitError> {
    use crate::{Expr, Pred};
    fn slot_bit(slot: u8) -> Result<u16, EmitError> {
        if slot >= crate::SCRATCH_SLOTS {
            return Err(EmitError::ScratchSlot(slot));
        }
        Ok(1u16.checked_shl(u32::from(slot)).unwrap_or(0))
    }
    fn expr(e: &Expr, read: &mut u16) -> Result<(), EmitError> {
        match e {
            Expr::Const(_) | Expr::WireLen => Ok(()),
            Expr::Scratch(slot) => {
                *read |= slot_bit(*slot)?;
                Ok(())
            }
            Expr::Load { offset, .. } => expr(offset, read),
            Expr::Binary { lhs, rhs, .. } => {
                expr(lhs, read)?;
                expr(rhs, read)
            }
            Expr::Neg(inner) => expr(inner, read),
        }
    }
    fn pred(p: &Pred, read: &mut u16, written: &mut u16) -> Result<(), EmitError> {
        match p {
            Pred::Const(_) | Pred::Guard(_) => Ok(()),
            Pred::Cmp { lhs, rhs, .. } => {
                expr(lhs, read)?;
                expr(rhs, read)
            }
            Pred::In { value, .. } => expr(value, read),
            Pred::And(parts) | Pred::Or(parts) => {
                parts.iter().try_for_each(|part| pred(part, read, written))
            }
            Pred::Not(inner) | Pred::Try(inner) => pred(inner, read, written),
            Pred::Store { slot, value } => {
                *written |= slot_bit(*slot)?;
                expr(value, read)
            }
            Pred::Chain(c) => {
                expr(&c.next, read)?;
                expr(&c.offset, read)
            }
            Pred::Pairs(p) => p.parts().try_for_each(|(guards, fields)| {
                guards.iter().try_for_each(|g| pred(g, read, written))?;
                fields.iter().try_for_each(|f| expr(f, read))
            }),
        }
    }
    let (mut read, mut written) = (0u16, 0u16);
    pred(root, &mut read, &mut written)?;
    Ok((read, read | written))
}
