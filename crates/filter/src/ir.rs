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
//! - [`Pred::Try`] confines aborts: inside it, an abort makes it false instead.
//! - [`Pred::Chain`] is the one loop: libpcap's `protochain` walk over IPv6 extension and
//!   AH headers ([`Chain`]). A walk makes at most [`CHAIN_HOP_BUDGET`] hops; the hop past
//!   them aborts.

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
    /// A header-chain walk (pflang's `protochain`): true when the walk meets
    /// [`Chain::target`]; see [`Chain`].
    Chain(Box<Chain>),
    /// The inner predicate, with an abort inside it turned into false (the stores it made
    /// before the abort stay): never aborts itself. pfmatch's clause boundary (a clause's
    /// test fails alone, as its own filter would). The optimizer keeps it a boundary: no
    /// guard is hoisted out of it (that would turn the clause's failure into the whole
    /// filter's abort), facts from before it are used inside, what is learned inside
    /// holds after it only when it ends true, and its stores are never removed as dead
    /// (they are results the caller reads after the run). The native compiler routes an
    /// abort inside it to its false exit; the classic BPF and eBPF emitters refuse it for
    /// now.
    Try(Box<Pred>),
    /// A long list of same-shaped conjunctions (`host A and port P`, ...) as one table
    /// probe, meaning exactly its ordered expansion ([`crate::pairs`]); written by pflang's
    /// lowering (`fuse`), opaque to the optimizer (it may abort, writes no slot).
    Pairs(Box<crate::pairs::Pairs>),
}

/// How many hops one [`Pred::Chain`] walk may make; the hop past them aborts the filter.
/// The number is libpcap's, from its interpreter: each hop of its `protochain` loop is one
/// backward jump, and `bpf_filter` (libpcap's git head) gives up with 0 on a packet's 65th
/// backward jump. libpcap 1.10 has no bound and loops forever on an AH header that leads
/// back to itself. weir counts per walk rather than per packet, so that walks stay
/// independent tests for the optimizer and the Linux verifier's exploration of one walk
/// does not multiply with every walk before it. 64 covers any chain a real stack sends
/// (RFC 8200 allows each extension header once, destination options twice) many times
/// over.
pub const CHAIN_HOP_BUDGET: u32 = 64;

/// IP protocol numbers the walk knows.
pub mod chain_proto {
    pub const HOPOPTS: u32 = 0;
    pub const ROUTING: u32 = 43;
    pub const FRAGMENT: u32 = 44;
    pub const AH: u32 = 51;
    /// "No next header": the walk ends there.
    pub const NONE: u32 = 59;
    pub const DSTOPTS: u32 = 60;
}

/// libpcap's `protochain` walk (gencode.c's gen_protochain), as a loop. The state is the
/// current next-header value `a` (initially [`Chain::next`]) and the offset `x` of the
/// header it names, measured from [`Chain::base`] (initially [`Chain::offset`]). Each
/// round, in this order:
///
/// 1. `a == target`: the walk is true;
/// 2. `a == 59` (no next header): false;
/// 3. `ipv6` and `a` is hop-by-hop (0), destination options (60), routing (43) or
///    fragment (44): step over it, `a = pkt[base + x]`,
///    `x = x + (pkt[base + x + 1] + 1) * 8`;
/// 4. `a == 51` (AH): `a = pkt[base + x]`, `x = (pkt[base + x + 1] + 2) * 4` (libpcap
///    sets the offset to AH's length rather than adding it: weir follows);
/// 5. anything else: false.
///
/// Every step (3, 4) is a hop; the walk's hop after [`CHAIN_HOP_BUDGET`] of them aborts. Loads past the captured bytes
/// abort, as every load does; offsets never wrap (`x` grows by at most 2,048 a hop).
///
/// Why a dedicated node rather than a general loop: the walk's state lives in the node
/// (emitters keep it in registers, or in classic BPF in A and X as libpcap does), so it
/// writes no scratch slot, and the optimizer can treat it as one opaque test that loads
/// packet bytes at offsets it cannot know and may abort; its operands [`Chain::next`]
/// and [`Chain::offset`] are ordinary expressions it optimizes as usual.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Chain {
    /// The protocol sought.
    pub target: u32,
    /// Whether IPv6 extension headers are stepped over (AH always is, unless sought).
    pub ipv6: bool,
    /// The absolute packet offset header offsets are measured from (the network header).
    pub base: u32,
    /// The first next-header value.
    pub next: Expr,
    /// The offset of the first header after the network header, from `base`.
    pub offset: Expr,
}

impl Chain {
    /// Whether the walk steps over a header with next-header value `a` (a hop), rather
    /// than answering. `a != target` is checked first, so a sought header is never
    /// stepped over.
    pub fn steps_over(&self, a: u32) -> Option<ChainStep> {
        use chain_proto::*;
        if a == self.target || a == NONE {
            None
        } else if self.ipv6 && matches!(a, HOPOPTS | DSTOPTS | ROUTING | FRAGMENT) {
            Some(ChainStep::Extension)
        } else if a == AH {
            Some(ChainStep::Ah)
        } else {
            None
        }
    }

    /// The extension-header values the walk steps over (none unless `ipv6`), without the
    /// target, in libpcap's test order.
    pub fn extensions(&self) -> impl Iterator<Item = u32> + '_ {
        use chain_proto::*;
        [HOPOPTS, DSTOPTS, ROUTING, FRAGMENT]
            .into_iter()
            .filter(move |&e| self.ipv6 && e != self.target)
    }

    /// Whether AH is stepped over (it is unless it is the target).
    pub fn steps_over_ah(&self) -> bool {
        self.target != chain_proto::AH
    }

    /// The next-header values a hop tests, in libpcap's order, and where each leads: the
    /// one dispatch every emitter builds (any other value ends the walk unmatched).
    pub fn dispatch(&self) -> impl Iterator<Item = (u32, ChainOutcome)> + '_ {
        let head =
            [(self.target, ChainOutcome::Found), (chain_proto::NONE, ChainOutcome::NotFound)];
        let ah =
            self.steps_over_ah().then_some((chain_proto::AH, ChainOutcome::Step(ChainStep::Ah)));
        head.into_iter()
            .chain(self.extensions().map(|k| (k, ChainOutcome::Step(ChainStep::Extension))))
            .chain(ah)
    }
}

/// Where a next-header value leads a [`Chain`] walk ([`Chain::dispatch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainOutcome {
    /// The sought header: the walk matches.
    Found,
    /// "No next header" (59): the walk ends unmatched.
    NotFound,
    /// A header to step over.
    Step(ChainStep),
}

/// What one hop of a [`Chain`] steps over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainStep {
    /// An IPv6 extension header: length in 8-octet units, not counting the first.
    Extension,
    /// AH: length in 4-octet units, minus 2.
    Ah,
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

impl Expr {
    /// Whether evaluating this reads the wire length (`len`): an engine whose `len` is
    /// another length (XDP's is the captured one) cannot run it.
    pub fn reads_wire_len(&self) -> bool {
        match self {
            Expr::WireLen => true,
            Expr::Const(_) | Expr::Scratch(_) => false,
            Expr::Load { offset, .. } => offset.reads_wire_len(),
            Expr::Binary { lhs, rhs, .. } => lhs.reads_wire_len() || rhs.reads_wire_len(),
            Expr::Neg(x) => x.reads_wire_len(),
        }
    }
}

impl Pred {
    /// Whether any expression of this predicate reads the wire length
    /// ([`Expr::reads_wire_len`]), a pair node's tests included.
    pub fn reads_wire_len(&self) -> bool {
        match self {
            Pred::Const(_) | Pred::Guard(_) => false,
            Pred::Cmp { lhs, rhs, .. } => lhs.reads_wire_len() || rhs.reads_wire_len(),
            Pred::In { value, .. } | Pred::Store { value, .. } => value.reads_wire_len(),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().any(Pred::reads_wire_len),
            Pred::Not(q) | Pred::Try(q) => q.reads_wire_len(),
            Pred::Chain(c) => c.next.reads_wire_len() || c.offset.reads_wire_len(),
            Pred::Pairs(pairs) => pairs.parts().any(|(guards, fields)| {
                guards.iter().any(Pred::reads_wire_len) || fields.iter().any(Expr::reads_wire_len)
            }),
        }
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
