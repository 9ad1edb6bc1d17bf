//! The filter IR: boolean predicates over 32-bit packet arithmetic.
//!
//! The IR is what a pflang expression *means*, independent of link type (offsets are already
//! absolute) and of any instruction set. Its semantics are libpcap's unoptimized semantics:
//!
//! - [`Pred::And`] / [`Pred::Or`] evaluate their operands left to right and short-circuit.
//! - Every [`Expr::Load`] is guarded: reading past the captured bytes *aborts* the whole filter
//!   (the packet is rejected, even under a `not`). Division or modulo by zero aborts too.
//!   A failed protocol test is not an abort: it is simply a false [`Pred::Cmp`].
//! - Arithmetic is unsigned 32-bit and wraps; shifts by 32 or more give 0.
//! - [`Expr::Scratch`] slots start at 0 and are written by [`Pred::Store`], which is how
//!   variable offsets (after `geneve`, say) flow from the test that finds them to later
//!   primitives, exactly as scratch memory does in classic BPF.

/// Number of scratch slots the IR may use (classic BPF's scratch memory size).
pub const SCRATCH_SLOTS: u8 = 16;

/// What the filter returns when it accepts a packet (libpcap's default snapshot length).
pub const DEFAULT_ACCEPT: u32 = 262_144;

/// Width of a packet load, in bytes; loads are big-endian (network order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Size {
    Byte = 1,
    Half = 2,
    Word = 4,
}

impl Size {
    pub const fn bytes(self) -> u32 {
        self as u32
    }

    pub fn from_bytes(n: u32) -> Option<Size> {
        match n {
            1 => Some(Size::Byte),
            2 => Some(Size::Half),
            4 => Some(Size::Word),
            _ => None,
        }
    }
}

/// Binary arithmetic on u32 values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Aborts when the divisor is 0.
    Div,
    /// Aborts when the divisor is 0.
    Mod,
    And,
    Or,
    Xor,
    /// `a << b`; 0 when `b >= 32`.
    Shl,
    /// `a >> b`; 0 when `b >= 32`.
    Shr,
}

impl BinOp {
    /// Every operator, in declaration order.
    pub const ALL: [BinOp; 10] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Mod,
        BinOp::And,
        BinOp::Or,
        BinOp::Xor,
        BinOp::Shl,
        BinOp::Shr,
    ];
}

/// A 32-bit value computed from the packet.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Expr {
    Const(u32),
    /// The packet's length on the wire (pflang `len`), not the captured length.
    WireLen,
    /// Big-endian load of `size` bytes at `offset` into the captured bytes; aborts when
    /// `offset + size` (computed without wrapping) exceeds the captured length.
    Load {
        offset: Box<Expr>,
        size: Size,
    },
    /// A scratch slot (< [`SCRATCH_SLOTS`]); 0 until a [`Pred::Store`] writes it.
    Scratch(u8),
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// Two's-complement negation.
    Neg(Box<Expr>),
}

/// Unsigned comparisons; `Set` is `lhs & rhs != 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CmpOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Set,
}

/// A set of u32 values, stored as sorted, disjoint, non-adjacent inclusive ranges, so that
/// `host a or host b or ...` with thousands of terms is one lookup rather than a chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ValueSet {
    ranges: Vec<(u32, u32)>,
}

impl ValueSet {
    /// Builds a set from arbitrary inclusive ranges (empty ranges where lo > hi are ignored).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u32, u32)>) -> ValueSet {
        let mut v: Vec<(u32, u32)> = ranges.into_iter().filter(|(lo, hi)| lo <= hi).collect();
        v.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(v.len());
        for (lo, hi) in v {
            match merged.last_mut() {
                Some(last) if u64::from(lo) <= u64::from(last.1) + 1 => {
                    last.1 = last.1.max(hi);
                }
                _ => merged.push((lo, hi)),
            }
        }
        ValueSet { ranges: merged }
    }

    pub fn from_values(values: impl IntoIterator<Item = u32>) -> ValueSet {
        ValueSet::from_ranges(values.into_iter().map(|v| (v, v)))
    }

    pub fn contains(&self, value: u32) -> bool {
        match self.ranges.binary_search_by(|&(lo, _)| lo.cmp(&value)) {
            Ok(_) => true,
            Err(0) => false,
            Err(i) => self.ranges.get(i - 1).is_some_and(|&(_, hi)| value <= hi),
        }
    }

    /// The sorted, disjoint inclusive ranges.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// A boolean filter expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pred {
    Const(bool),
    Cmp {
        op: CmpOp,
        lhs: Expr,
        rhs: Expr,
    },
    /// `value` is a member of `set`.
    In {
        value: Expr,
        set: ValueSet,
    },
    /// All, left to right, stopping at the first false. `And(vec![])` is true.
    And(Vec<Pred>),
    /// Any, left to right, stopping at the first true. `Or(vec![])` is false.
    Or(Vec<Pred>),
    Not(Box<Pred>),
    /// Evaluates `value`, writes it to scratch slot `slot`, and is true.
    Store {
        slot: u8,
        value: Expr,
    },
    /// Aborts unless at least `n` bytes were captured; otherwise true. Lowering never writes
    /// this: the optimizer inserts it where every path would load that far anyway, so that
    /// one check up front stands for the per-load checks after it.
    Guard(u32),
}

/// A complete filter: accept (returning `accept`) when `pred` holds, reject (0) when it does
/// not or when evaluation aborts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Filter {
    pub pred: Pred,
    pub accept: u32,
}

impl Filter {
    pub fn new(pred: Pred) -> Filter {
        Filter { pred, accept: DEFAULT_ACCEPT }
    }
}

// Small constructors: lowering code reads like the packet tests it builds.
impl Expr {
    pub fn load(offset: Expr, size: Size) -> Expr {
        Expr::Load { offset: Box::new(offset), size }
    }

    /// A load at a constant offset.
    pub fn load_at(offset: u32, size: Size) -> Expr {
        Expr::load(Expr::Const(offset), size)
    }

    pub fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }
    }

    /// `self + k`, folding when `self` is a constant (offset arithmetic is everywhere).
    pub fn plus(self, k: u32) -> Expr {
        match self {
            Expr::Const(c) => Expr::Const(c.wrapping_add(k)),
            _ if k == 0 => self,
            other => Expr::binary(BinOp::Add, other, Expr::Const(k)),
        }
    }

    pub fn and_mask(self, mask: u32) -> Expr {
        Expr::binary(BinOp::And, self, Expr::Const(mask))
    }
}

impl Pred {
    pub fn cmp(op: CmpOp, lhs: Expr, rhs: Expr) -> Pred {
        Pred::Cmp { op, lhs, rhs }
    }

    /// `lhs == k`.
    pub fn eq(lhs: Expr, k: u32) -> Pred {
        Pred::cmp(CmpOp::Eq, lhs, Expr::Const(k))
    }

    /// `(lhs & mask) == k`, or `lhs == k` when the mask is all ones.
    pub fn eq_masked(lhs: Expr, mask: u32, k: u32) -> Pred {
        if mask == u32::MAX {
            Pred::eq(lhs, k)
        } else {
            Pred::eq(lhs.and_mask(mask), k)
        }
    }

    #[allow(clippy::should_implement_trait)]
    pub fn not(p: Pred) -> Pred {
        Pred::Not(Box::new(p))
    }

    /// Conjunction that flattens nested `And`s (evaluation order is kept).
    pub fn and(parts: impl IntoIterator<Item = Pred>) -> Pred {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Pred::And(inner) => out.extend(inner),
                p => out.push(p),
            }
        }
        if out.len() == 1 {
            out.pop().unwrap_or(Pred::Const(true))
        } else {
            Pred::And(out)
        }
    }

    /// Disjunction that flattens nested `Or`s (evaluation order is kept).
    pub fn or(parts: impl IntoIterator<Item = Pred>) -> Pred {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Pred::Or(inner) => out.extend(inner),
                p => out.push(p),
            }
        }
        if out.len() == 1 {
            out.pop().unwrap_or(Pred::Const(false))
        } else {
            Pred::Or(out)
        }
    }
}
