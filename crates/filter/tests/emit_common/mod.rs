//! What the emitter tests share: a seeded generator of random filters that reaches every
//! IR variant and the boundary constants each emitter special-cases, and packets for them.
//! Used by `tests/emit.rs` (weir's interpreters and libpcap) and `tests/emit_kernel.rs`
//! (the Linux kernel).

// Each test binary uses part of this module.
#![allow(dead_code)]

use weir_filter::{BinOp, CmpOp, Expr, Filter, Pred, Size, ValueSet};
use weir_testkit::{Packet, SplitMix64};

/// Bytes random packets are made of: few enough that comparisons with the same constants
/// succeed often, with the values masks and header-length nibbles care about.
const BYTES: [u8; 10] = [0, 1, 2, 4, 0x0f, 0x20, 0x45, 0x80, 0xfe, 0xff];

/// Constants at the edges the emitters treat specially: shift widths, byte/half/word
/// limits, the signed-offset limit, the XDP offset limit, wrap-around.
const BOUNDARIES: [u32; 18] = [
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

const OPS: [BinOp; 10] = [
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

const CMPS: [CmpOp; 7] =
    [CmpOp::Eq, CmpOp::Ne, CmpOp::Gt, CmpOp::Ge, CmpOp::Lt, CmpOp::Le, CmpOp::Set];

const SIZES: [Size; 3] = [Size::Byte, Size::Half, Size::Word];

/// `4*(byte at k & 0xf)`, the IPv4 header length as lowering writes it.
pub fn ipv4_header_length(k: u32) -> Expr {
    Expr::binary(BinOp::Shl, Expr::load_at(k, Size::Byte).and_mask(0xf), Expr::Const(2))
}

pub struct FilterGen {
    rng: SplitMix64,
    /// Scratch slots the generated filters use (the IR's own slots are below 8).
    slots: u8,
}

impl FilterGen {
    pub fn new(seed: u64) -> Self {
        FilterGen { rng: SplitMix64::new(seed), slots: 8 }
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.below_usize(items.len())]
    }

    pub fn constant(&mut self) -> u32 {
        match self.rng.below(10) {
            0..=3 => self.rng.below(72) as u32,
            4 | 5 => self.pick(&BOUNDARIES),
            6 | 7 => u32::from(self.pick(&BYTES)),
            8 => u32::from(self.pick(&BYTES)) << 8 | u32::from(self.pick(&BYTES)),
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
                Expr::Const(self.pick(&BOUNDARIES).wrapping_sub(self.rng.below(4) as u32))
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

    pub fn expr(&mut self, depth: u32) -> Expr {
        let leaf = depth == 0 || self.rng.chance(30);
        let choice = if leaf { self.rng.below(5) } else { self.rng.below(11) };
        let below = depth.saturating_sub(1);
        match choice {
            0 | 1 => Expr::Const(self.constant()),
            2 => Expr::WireLen,
            3 => Expr::Scratch(self.slot()),
            4 => Expr::load_at(self.rng.below(80) as u32, self.pick(&SIZES)),
            5 | 6 => Expr::load(self.offset(below), self.pick(&SIZES)),
            7 => Expr::Neg(Box::new(self.expr(below))),
            8 => ipv4_header_length(self.rng.below(40) as u32),
            _ => {
                let op = self.pick(&OPS);
                let lhs = self.expr(below);
                let rhs = if self.rng.chance(50) {
                    // Constant operands, with the divisors and shift amounts that matter.
                    match op {
                        BinOp::Div | BinOp::Mod if self.rng.chance(8) => Expr::Const(0),
                        BinOp::Shl | BinOp::Shr => {
                            Expr::Const(self.pick(&[0, 1, 2, 31, 32, 33, 64, u32::MAX]))
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

    fn value_set(&mut self) -> ValueSet {
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

    pub fn pred(&mut self, depth: u32) -> Pred {
        let leaf = depth == 0 || self.rng.chance(25);
        let choice = if leaf { self.rng.below(10) } else { self.rng.range(10, 16) };
        let below = depth.saturating_sub(1);
        let edepth = self.rng.below(4) as u32;
        match choice {
            0 if self.rng.chance(30) => Pred::Const(self.rng.chance(50)),
            0..=4 => {
                let op = self.pick(&CMPS);
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
                _ => self.pick(&BOUNDARIES),
            }),
            9 => Pred::eq(
                Expr::load_at(self.rng.below(60) as u32, Size::Byte),
                u32::from(self.pick(&BYTES)),
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

    pub fn filter(&mut self) -> Filter {
        let depth = self.rng.range(2, 6) as u32;
        let mut filter = Filter::new(self.pred(depth));
        if self.rng.chance(10) {
            filter.accept = self.pick(&[1, 0xffff, 0xffff_ffff, 0]);
        }
        filter
    }
}

/// Random packets (short, of the byte alphabet, some cut short of their wire length) and
/// the testkit's corpus and edge cases, which carry real headers.
pub fn packets(seed: u64, random: usize, corpus: usize) -> Vec<Packet> {
    let mut rng = SplitMix64::new(seed);
    let mut out: Vec<Packet> = (0..random)
        .map(|i| {
            let len = match rng.below(8) {
                0 => rng.below(8) as usize,
                1..=5 => rng.range_usize(8, 80),
                _ => rng.range_usize(80, 200),
            };
            let data: Vec<u8> = (0..len).map(|_| BYTES[rng.below_usize(BYTES.len())]).collect();
            let wire_len =
                if rng.chance(20) { len as u32 + rng.below(100) as u32 } else { len as u32 };
            Packet { data, wire_len, ts_sec: 0, ts_usec: 0, description: format!("random {i}") }
        })
        .collect();
    out.extend(weir_testkit::edge_cases());
    out.extend(weir_testkit::corpus(seed ^ 0x5eed, corpus));
    out
}

/// A packet as hex, for failure messages.
pub fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}
