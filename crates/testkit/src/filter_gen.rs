//! Random filters for differential tests and fuzzing (moved here from `weir_filter::random`,
//! so that test data has one pseudo-random source, [`SplitMix64`]).
//!
//! Every way of running a [`Filter`] (the classic BPF and eBPF emitters, native code) is
//! checked against the reference evaluator on filters from here: they reach every IR variant
//! (loads at constant and computed offsets, every operator, scratch slots, guards, sets from
//! empty to hundreds of ranges, nested `and`/`or`/`not`) and the constants backends treat
//! specially (shift widths, byte/half/word limits, signed-offset limits, wrap-around).
//!
//! Everything is deterministic given a seed, on every machine and release.
//!
//! ```
//! use weir_testkit::filter_gen::{self, FilterGen};
//! let mut gen = FilterGen::new(7);
//! let filter = gen.filter();
//! assert_eq!(filter, FilterGen::new(7).filter()); // same seed, same filter
//! for packet in filter_gen::packets(7, 20) {
//!     let _ = filter.run(&packet.data, packet.wire_len);
//! }
//! ```

use weir_filter::{BinOp, CmpOp, Expr, Filter, Pred, Size, ValueSet};

use crate::SplitMix64;

/// Bytes random packets are made of: few enough that comparisons with the same constants
/// succeed often, with the values masks and header-length nibbles care about.
pub const BYTES: [u8; 10] = [0, 1, 2, 4, 0x0f, 0x20, 0x45, 0x80, 0xfe, 0xff];

/// Constants at the edges backends treat specially: shift widths, byte/half/word limits,
/// the signed-offset limit, the XDP offset limit, wrap-around.
pub const BOUNDARIES: [u32; 18] = [
    0,
    1,
    2,
    31,
    32,
    33,
    63,
    64,
    0xff,
    0x100,
    0x7fff,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_f000,
    0xffff_fffe,
    0xffff_ffff,
];

const OPS: [BinOp; 10] = BinOp::ALL;

const CMPS: [CmpOp; 7] =
    [CmpOp::Eq, CmpOp::Ne, CmpOp::Gt, CmpOp::Ge, CmpOp::Lt, CmpOp::Le, CmpOp::Set];

const SIZES: [Size; 3] = [Size::Byte, Size::Half, Size::Word];

/// `4*(byte at k & 0xf)`, the IPv4 header length as lowering writes it.
pub fn ipv4_header_length(k: u32) -> Expr {
    Expr::binary(BinOp::Shl, Expr::load_at(k, Size::Byte).and_mask(0xf), Expr::Const(2))
}

/// The filter generator: one seeded stream, many filters.
#[derive(Debug, Clone)]
pub struct FilterGen {
    rng: SplitMix64,
    /// Scratch slots the generated filters use (pflang's lowering uses the low ones).
    slots: u8,
}

impl FilterGen {
    pub fn new(seed: u64) -> FilterGen {
        FilterGen { rng: SplitMix64::new(seed), slots: 8 }
    }

    /// The stream the generator draws from, for callers that want more from the same seed.
    pub fn rng(&mut self) -> &mut SplitMix64 {
        &mut self.rng
    }

    /// A constant: mostly small, often one of [`BOUNDARIES`] or made of [`BYTES`].
    pub fn constant(&mut self) -> u32 {
        match self.rng.below(10) {
            0..=3 => self.rng.below(72) as u32,
            4 | 5 => self.rng.one_of(&BOUNDARIES),
            6 | 7 => u32::from(self.rng.one_of(&BYTES)),
            8 => u32::from(self.rng.one_of(&BYTES)) << 8 | u32::from(self.rng.one_of(&BYTES)),
            _ => self.rng.u32(),
        }
    }

    fn slot(&mut self) -> u8 {
        self.rng.below(u64::from(self.slots)) as u8
    }

    /// A load offset: mostly small constants, sometimes edges, the IPv4-header-length
    /// shape, or any expression (masked or not).
    fn offset(&mut self, depth: u32) -> Expr {
        match self.rng.below(12) {
            0..=5 => Expr::Const(self.rng.below(80) as u32),
            6 if self.rng.chance(30) => {
                Expr::Const(self.rng.one_of(&BOUNDARIES).wrapping_sub(self.rng.below(4) as u32))
            }
            6 => Expr::Const(self.rng.below(80) as u32),
            7 | 8 => {
                let k = self.rng.below(40) as u32;
                ipv4_header_length(k).plus(self.rng.below(40) as u32)
            }
            9 => self.expr(depth).and_mask(0x3f),
            10 => Expr::binary(BinOp::Add, self.expr(depth), Expr::Const(self.constant())),
            _ => self.expr(depth),
        }
    }

    /// An expression nested at most `depth` deep.
    pub fn expr(&mut self, depth: u32) -> Expr {
        let leaf = depth == 0 || self.rng.chance(30);
        let choice = if leaf { self.rng.below(5) } else { self.rng.below(11) };
        let below = depth.saturating_sub(1);
        match choice {
            0 | 1 => Expr::Const(self.constant()),
            2 => Expr::WireLen,
            3 => Expr::Scratch(self.slot()),
            4 => Expr::load_at(self.rng.below(80) as u32, self.rng.one_of(&SIZES)),
            5 | 6 => Expr::load(self.offset(below), self.rng.one_of(&SIZES)),
            7 => Expr::Neg(Box::new(self.expr(below))),
            8 => ipv4_header_length(self.rng.below(40) as u32),
            _ => {
                let op = self.rng.one_of(&OPS);
                let lhs = self.expr(below);
                let rhs = if self.rng.chance(50) {
                    // Constant operands, with the divisors and shift amounts that matter.
                    match op {
                        BinOp::Div | BinOp::Mod if self.rng.chance(8) => Expr::Const(0),
                        BinOp::Shl | BinOp::Shr => {
                            Expr::Const(self.rng.one_of(&[0, 1, 2, 31, 32, 33, 64, u32::MAX]))
                        }
                        _ => Expr::Const(self.constant()),
                    }
                } else {
                    self.expr(below)
                };
                if self.rng.chance(15) {
                    Expr::binary(op, rhs, lhs)
                } else {
                    Expr::binary(op, lhs, rhs)
                }
            }
        }
    }

    /// A set: empty, a few ranges, dozens, or hundreds; narrow or spread over all of u32.
    pub fn value_set(&mut self) -> ValueSet {
        let n = match self.rng.below(6) {
            0 => 0,
            1..=3 => self.rng.range_usize(1, 6),
            4 => self.rng.range_usize(6, 40),
            _ => self.rng.range_usize(40, 400),
        };
        let wide = self.rng.chance(30);
        ValueSet::from_ranges((0..n).map(|_| {
            let lo = if wide { self.constant() } else { self.rng.below(300) as u32 };
            let width = match self.rng.below(4) {
                0 | 1 => 0,
                2 => self.rng.below(4) as u32,
                _ => self.rng.below(100) as u32,
            };
            (lo, lo.saturating_add(width))
        }))
    }

    /// A predicate nested at most `depth` deep.
    pub fn pred(&mut self, depth: u32) -> Pred {
        let leaf = depth == 0 || self.rng.chance(25);
        let choice = if leaf { self.rng.below(10) } else { self.rng.range(10, 16) };
        let below = depth.saturating_sub(1);
        let edepth = self.rng.below(4) as u32;
        match choice {
            0 if self.rng.chance(30) => Pred::Const(self.rng.chance(50)),
            0..=4 => {
                let op = self.rng.one_of(&CMPS);
                let lhs = self.expr(edepth);
                let rhs = if self.rng.chance(60) {
                    Expr::Const(self.constant())
                } else {
                    self.expr(edepth)
                };
                Pred::cmp(op, lhs, rhs)
            }
            5 | 6 => Pred::In { value: self.expr(edepth), set: self.value_set() },
            7 => Pred::Store { slot: self.slot(), value: self.expr(edepth) },
            8 => Pred::Guard(match self.rng.below(8) {
                0 => 0,
                1..=6 => self.rng.below(90) as u32,
                _ => self.rng.one_of(&BOUNDARIES),
            }),
            9 => Pred::eq(
                Expr::load_at(self.rng.below(60) as u32, Size::Byte),
                u32::from(self.rng.one_of(&BYTES)),
            ),
            10 | 11 => Pred::And((0..self.parts()).map(|_| self.pred(below)).collect()),
            12 | 13 => Pred::Or((0..self.parts()).map(|_| self.pred(below)).collect()),
            _ => Pred::not(self.pred(below)),
        }
    }

    /// How many parts an `and`/`or` has: now and then none or one.
    fn parts(&mut self) -> usize {
        match self.rng.below(20) {
            0 => 0,
            1 => 1,
            _ => self.rng.range_usize(2, 5),
        }
    }

    /// A whole filter, 2 to 6 predicates deep; now and then with an unusual accept value.
    pub fn filter(&mut self) -> Filter {
        let depth = self.rng.range(2, 6) as u32;
        let mut filter = Filter::new(self.pred(depth));
        if self.rng.chance(10) {
            filter.accept = self.rng.one_of(&[1, 0xffff, 0xffff_ffff, 0]);
        }
        filter
    }
}

/// The filter generator's first filter for `seed`.
pub fn filter(seed: u64) -> Filter {
    FilterGen::new(seed).filter()
}

/// A random packet: captured bytes and the length on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub data: Vec<u8>,
    /// At least `data.len()`; larger when the packet was cut short by the capture.
    pub wire_len: u32,
}

/// One random packet: short (0 to 200 bytes, an eighth of them under 8), made of [`BYTES`],
/// a fifth of them cut short of their wire length.
pub fn packet(rng: &mut SplitMix64) -> Packet {
    let len = match rng.below(8) {
        0 => rng.below(8) as usize,
        1..=5 => rng.range_usize(8, 80),
        _ => rng.range_usize(80, 200),
    };
    let data: Vec<u8> = (0..len).map(|_| rng.one_of(&BYTES)).collect();
    let wire_len = if rng.chance(20) { len as u32 + rng.below(100) as u32 } else { len as u32 };
    Packet { data, wire_len }
}

/// `n` random packets from `seed` (see [`packet`]).
pub fn packets(seed: u64, n: usize) -> Vec<Packet> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| packet(&mut rng)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_splitmix64_and_deterministic() {
        // The published SplitMix64 stream for state 0 starts with this value.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
        let a: Vec<Filter> = (0..20).map(filter).collect();
        let b: Vec<Filter> = (0..20).map(filter).collect();
        assert_eq!(a, b);
        assert_ne!(a[0], a[1]);
        assert_eq!(packets(3, 50), packets(3, 50));
    }

    #[test]
    fn generated_filters_reach_every_variant() {
        fn walk(p: &Pred, seen: &mut [bool; 8]) {
            let i = match p {
                Pred::Const(_) => 0,
                Pred::Cmp { .. } => 1,
                Pred::In { .. } => 2,
                Pred::And(parts) | Pred::Or(parts) => {
                    parts.iter().for_each(|q| walk(q, seen));
                    if matches!(p, Pred::And(_)) {
                        3
                    } else {
                        4
                    }
                }
                Pred::Not(inner) => {
                    walk(inner, seen);
                    5
                }
                Pred::Store { .. } => 6,
                Pred::Guard(_) => 7,
                // Not generated: lowering writes it (see the pflang differential tests).
                Pred::Chain(_) => return,
                // Not generated: lowering writes it (pflang's pair tests).
                Pred::Pairs(_) => return,
                // Not generated: pfmatch writes it (its consistency property test), and the
                // emitters the generated filters also go through refuse it.
                Pred::Try(_) => return,
            };
            seen[i] = true;
        }
        let mut gen = FilterGen::new(1);
        let mut seen = [false; 8];
        for _ in 0..500 {
            walk(&gen.filter().pred, &mut seen);
        }
        assert_eq!(seen, [true; 8]);
        let lens: Vec<usize> = packets(1, 500).iter().map(|p| p.data.len()).collect();
        assert!(lens.contains(&0) && lens.iter().all(|&l| l <= 200));
    }
}
