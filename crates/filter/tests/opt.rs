//! The optimizer keeps the meaning of every filter, and each pass does its job.
//!
//! The main property: for random IR filters (every variant: stores and scratch reads,
//! guards, set tests, deep nesting, `not` around tests that can abort, loads at the edges
//! of short packets and at offsets near 2^32) and random packets of 0..80 captured bytes
//! with various wire lengths, `optimize(f).run(p) == f.run(p)`, and so does each pass on its
//! own. Failures print the seed, both filters and the packet. `WEIR_OPT_CASES` sets the
//! number of random filters (default 25,000 in release builds, 3,000 in debug builds).
//!
//! The targeted tests check that each pass actually rewrites what it is for: decided tests
//! disappear, a long `or` of equalities becomes one set test, a guard goes in front of
//! `ether[12:2] = 0x800 and ip[9] = 6`, and a 10,000-host filter becomes a handful of nodes.

use weir_filter::opt::{self, node_count};
use weir_filter::{BinOp, CmpOp, Expr, Filter, Pred, Size, ValueSet};
use weir_testkit::SplitMix64;

// ---------------------------------------------------------------------------------------
// The test kit's deterministic generator (SplitMix64), so a failing seed reproduces exactly,
// with the draws this generator names its own way.

struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    fn percent(&mut self, p: u64) -> bool {
        self.0.chance(p)
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.0.below_usize(items.len())].clone()
    }
}

const ALPHABET: [u8; 10] = [0, 1, 2, 6, 8, 0x45, 0x86, 0xdd, 0xff, 0x11];

/// Generates one filter around a "base" packet, so that its tests often hold.
struct Gen {
    rng: Rng,
    base: Vec<u8>,
    /// Expressions reused across the filter, so that tests interact (repeated, decided,
    /// contradictory, mergeable).
    atoms: Vec<Expr>,
    budget: usize,
    /// [`Gen::dispatch`] adds the edge shapes of [`Gen::edge_part`] and long fact prefixes.
    edges: bool,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut rng = Rng(SplitMix64::new(seed));
        let base = (0..96)
            .map(|_| if rng.percent(80) { rng.pick(&ALPHABET) } else { rng.next() as u8 })
            .collect();
        let mut g = Gen { rng, base, atoms: Vec::new(), budget: 0, edges: false };
        let n = 1 + g.rng.below(4);
        for _ in 0..n {
            let e = g.value_expr(2);
            g.atoms.push(e);
        }
        g
    }

    fn offset_const(&mut self) -> u32 {
        match self.rng.below(10) {
            0..=5 => self.rng.below(82) as u32,
            6 => self.rng.pick(&[12, 13, 14, 22, 23, 26, 30, 34, 38, 54, 78, 79, 80]),
            7 => u32::MAX - self.rng.below(4) as u32,
            8 => 0x7fff_fffe + self.rng.below(4) as u32,
            _ => self.rng.below(20) as u32,
        }
    }

    fn offset(&mut self, depth: u32) -> Expr {
        if depth == 0 || self.rng.percent(75) {
            return Expr::Const(self.offset_const());
        }
        let k = self.rng.below(40) as u32;
        match self.rng.below(4) {
            0 => Expr::Scratch(self.rng.below(4) as u8).plus(k),
            1 => {
                // the IPv4 header length idiom: 4 * (byte & 0xf) + k
                let ihl = Expr::binary(
                    BinOp::Shl,
                    Expr::load_at(self.rng.below(30) as u32, Size::Byte).and_mask(0xf),
                    Expr::Const(2),
                );
                Expr::binary(BinOp::Add, ihl, Expr::Const(k))
            }
            2 => Expr::binary(BinOp::And, Expr::WireLen, Expr::Const(0x3f)),
            _ => {
                let inner = self.value_expr(depth - 1);
                Expr::binary(BinOp::Sub, inner, Expr::Const(k))
            }
        }
    }

    fn size(&mut self) -> Size {
        self.rng.pick(&[Size::Byte, Size::Byte, Size::Half, Size::Half, Size::Word])
    }

    fn value_expr(&mut self, depth: u32) -> Expr {
        let roll = self.rng.below(100);
        if depth == 0 || roll < 45 {
            let size = self.size();
            return Expr::load(self.offset(depth.saturating_sub(1)), size);
        }
        match roll {
            45..=54 => {
                let size = self.size();
                let mask = self.rng.pick(&[0xf, 0xf0, 0x1fff, 0xff00, 1, 0x80, 0xffff]);
                Expr::load(self.offset(0), size).and_mask(mask)
            }
            55..=60 => Expr::WireLen,
            61..=67 => {
                let slot = if self.rng.percent(95) { self.rng.below(4) as u8 } else { 16 };
                Expr::Scratch(slot)
            }
            68..=71 => Expr::Const(self.constant(Size::Half)),
            72..=95 => {
                let op = self.rng.pick(&BinOp::ALL);
                let lhs = self.value_expr(depth - 1);
                let rhs = if self.rng.percent(60) {
                    let c = match op {
                        BinOp::Shl | BinOp::Shr => self.rng.below(40) as u32,
                        BinOp::Div | BinOp::Mod => self.rng.below(5) as u32,
                        _ => self.constant(Size::Byte),
                    };
                    Expr::Const(c)
                } else {
                    self.value_expr(depth - 1)
                };
                if self.rng.percent(10) {
                    Expr::binary(op, rhs, lhs)
                } else {
                    Expr::binary(op, lhs, rhs)
                }
            }
            _ => Expr::Neg(Box::new(self.value_expr(depth - 1))),
        }
    }

    /// A constant that a load of `size` bytes from the base packet might equal.
    fn constant(&mut self, size: Size) -> u32 {
        if self.rng.percent(15) {
            return self.rng.next() as u32;
        }
        let mut v = 0u32;
        for _ in 0..size.bytes() {
            v = (v << 8) | u32::from(self.rng.pick(&ALPHABET));
        }
        v
    }

    /// A constant for comparing with `e`: often its value on the base packet.
    fn constant_for(&mut self, e: &Expr) -> u32 {
        if self.rng.percent(55) {
            if let Ok(v) = weir_filter::Evaluator::new(&self.base, self.base.len() as u32).expr(e) {
                return v.wrapping_add(self.rng.pick(&[0, 0, 0, 1, u32::MAX]));
            }
        }
        let size = match e {
            Expr::Load { size, .. } => *size,
            _ => Size::Half,
        };
        self.constant(size)
    }

    fn atom(&mut self) -> Expr {
        if self.rng.percent(70) {
            self.rng.pick(&self.atoms.clone())
        } else {
            self.value_expr(2)
        }
    }

    fn cmp_op(&mut self) -> CmpOp {
        self.rng.pick(&[
            CmpOp::Eq,
            CmpOp::Eq,
            CmpOp::Eq,
            CmpOp::Ne,
            CmpOp::Gt,
            CmpOp::Ge,
            CmpOp::Lt,
            CmpOp::Le,
            CmpOp::Set,
        ])
    }

    fn set(&mut self, around: &Expr) -> ValueSet {
        let n = 1 + self.rng.below(6);
        let mut ranges = Vec::new();
        for _ in 0..n {
            let lo = self.constant_for(around);
            let hi = if self.rng.percent(70) {
                lo
            } else {
                lo.saturating_add(self.rng.below(300) as u32)
            };
            ranges.push((lo, hi));
        }
        ValueSet::from_ranges(ranges)
    }

    fn leaf(&mut self) -> Pred {
        match self.rng.below(100) {
            0..=59 => {
                let a = self.atom();
                let c = self.constant_for(&a);
                let op = self.cmp_op();
                if self.rng.percent(10) {
                    Pred::cmp(op, Expr::Const(c), a)
                } else {
                    Pred::cmp(op, a, Expr::Const(c))
                }
            }
            60..=66 => {
                let (a, b) = (self.atom(), self.atom());
                let op = self.cmp_op();
                Pred::cmp(op, a, b)
            }
            67..=77 => {
                let value = self.atom();
                let set = self.set(&value);
                Pred::In { value, set }
            }
            78..=82 => Pred::Const(self.rng.percent(50)),
            83..=88 => Pred::Guard(self.rng.pick(&[0, 1, 14, 20, 24, 34, 40, 60, 79, 80, 81, 90])),
            _ => {
                let slot = if self.rng.percent(95) { self.rng.below(4) as u8 } else { 17 };
                let value = if self.rng.percent(40) {
                    Expr::Const(self.rng.below(40) as u32)
                } else {
                    self.value_expr(1)
                };
                Pred::Store { slot, value }
            }
        }
    }

    fn pred(&mut self, depth: u32) -> Pred {
        if self.budget == 0 || depth == 0 {
            return self.leaf();
        }
        self.budget -= 1;
        match self.rng.below(100) {
            0..=39 => self.leaf(),
            40..=49 => Pred::Not(Box::new(self.pred(depth - 1))),
            50..=74 => {
                let n = 2 + self.rng.below(4);
                Pred::And((0..n).map(|_| self.pred(depth - 1)).collect())
            }
            75..=94 => {
                let n = 2 + self.rng.below(4);
                Pred::Or((0..n).map(|_| self.pred(depth - 1)).collect())
            }
            _ => self.chain(),
        }
    }

    /// Long junctions of tests on a few values: the shapes set merging and factoring target
    /// (`host a or host b ...`, port lists, `not port a and not port b ...`).
    fn chain(&mut self) -> Pred {
        let keys: Vec<Expr> = (0..1 + self.rng.below(3)).map(|_| self.atom()).collect();
        let n = 3 + self.rng.below(20) as usize;
        let conj = self.rng.percent(40);
        let mut parts = Vec::new();
        for _ in 0..n {
            let part = if self.rng.percent(30) {
                // a discriminated part: `key0 == k and (key1 == v or ...)`
                let d = self.rng.pick(&keys);
                let k = self.constant_for(&d);
                let x = self.rng.pick(&keys);
                let v = self.constant_for(&x);
                let head = Pred::cmp(if conj { CmpOp::Ne } else { CmpOp::Eq }, d, Expr::Const(k));
                let tail = Pred::cmp(if conj { CmpOp::Ne } else { CmpOp::Eq }, x, Expr::Const(v));
                if conj {
                    Pred::Or(vec![head, tail])
                } else {
                    Pred::And(vec![head, tail])
                }
            } else if self.rng.percent(10) {
                self.leaf()
            } else {
                let key = self.rng.pick(&keys);
                let c = self.constant_for(&key);
                let op = if self.rng.percent(70) {
                    if conj {
                        CmpOp::Ne
                    } else {
                        CmpOp::Eq
                    }
                } else {
                    self.cmp_op()
                };
                Pred::cmp(op, key, Expr::Const(c))
            };
            parts.push(part);
        }
        if conj {
            Pred::And(parts)
        } else {
            Pred::Or(parts)
        }
    }

    /// `pin and (key == a and X or key == b and Y ...)`: an `or` whose branches lead with a
    /// test on a value an earlier part pins (pflang's `host A and udp`, `tcp[...]`): the facts
    /// decide some branches' first tests and the walk drops those branches, the shape the
    /// certificate of a walk that only drops decided parts is for
    /// (bench/records/2026-11-30-compile-14.txt).
    fn dispatch(&mut self) -> Filter {
        self.budget = 2 + self.rng.below(8) as usize;
        let key = self.atom();
        let n = 2 + self.rng.below(3);
        let values: Vec<u32> = (0..n).map(|_| self.constant_for(&key)).collect();
        let pin = if self.rng.percent(50) {
            let v = self.rng.pick(&values);
            self.key_test(&key, v)
        } else {
            let branches = (0..2).map(|_| self.branch(&key, &values)).collect();
            Pred::Or(branches)
        };
        let mut parts = Vec::new();
        if self.edges && self.rng.percent(30) {
            // More facts than a path keeps (48): which are kept depends on what came before.
            let n = 40 + self.rng.below(16) as u32;
            for i in 0..n {
                let size = self.size();
                let at = Expr::load_at(i, size);
                let v = self.constant_for(&at);
                parts.push(Pred::eq(at, v));
            }
        }
        if self.rng.percent(30) {
            parts.push(self.pred(2));
        }
        parts.push(pin);
        if self.rng.percent(30) {
            parts.push(self.pred(2));
        }
        let branches = (0..2 + self.rng.below(3)).map(|_| self.branch(&key, &values)).collect();
        parts.push(Pred::Or(branches));
        if self.rng.percent(40) {
            parts.push(self.pred(2));
        }
        let pred = match self.rng.below(10) {
            0 => Pred::Not(Box::new(Pred::And(parts))),
            1 => Pred::Or(vec![self.pred(2), Pred::And(parts)]),
            _ => Pred::And(parts),
        };
        Filter { pred, accept: weir_filter::DEFAULT_ACCEPT }
    }

    /// A test on `key`, mostly an equality with `v` ([`Gen::dispatch`]).
    fn key_test(&mut self, key: &Expr, v: u32) -> Pred {
        if self.rng.percent(15) {
            let set = self.set(key);
            return Pred::In { value: key.clone(), set };
        }
        let op = self.rng.pick(&[CmpOp::Eq, CmpOp::Eq, CmpOp::Eq, CmpOp::Ne, CmpOp::Ge, CmpOp::Le]);
        Pred::cmp(op, key.clone(), Expr::Const(v))
    }

    /// A branch led by a test on `key`, then a few random parts ([`Gen::dispatch`]).
    fn branch(&mut self, key: &Expr, values: &[u32]) -> Pred {
        let v = self.rng.pick(values);
        let mut parts = vec![self.key_test(key, v)];
        for _ in 0..self.rng.below(3) {
            let part = if self.edges && self.rng.percent(50) {
                self.edge_part(key, values)
            } else {
                self.pred(1)
            };
            parts.push(part);
        }
        Pred::And(parts)
    }

    /// A part of the kinds whose changes a drop could make a second walk see otherwise
    /// (bench/records/2026-11-30-compile-15.txt): a load that always aborts (left last or
    /// alone when the parts around it drop), a nested junction testing `key` twice (spliced
    /// into the branch), a junction with parts before its absorbing constant, a store in an
    /// `or` (the rest unreachable), a test of a value derived from `key`.
    fn edge_part(&mut self, key: &Expr, values: &[u32]) -> Pred {
        let v = self.rng.pick(values);
        match self.rng.below(7) {
            0 => {
                let far = Expr::load_at(u32::MAX - self.rng.below(3) as u32, Size::Half);
                let c = self.constant(Size::Half);
                let test = Pred::cmp(self.cmp_op(), far, Expr::Const(c));
                if self.rng.percent(30) {
                    Pred::Not(Box::new(test))
                } else {
                    test
                }
            }
            1 => {
                let w = self.rng.pick(values);
                let inner = vec![self.key_test(key, v), self.leaf(), self.key_test(key, w)];
                if self.rng.percent(50) {
                    Pred::And(inner)
                } else {
                    Pred::Or(inner)
                }
            }
            2 => {
                let c = self.rng.percent(50);
                let mut inner = vec![self.leaf(), self.key_test(key, v)];
                inner.insert(self.rng.below(3) as usize, Pred::Const(c));
                if c {
                    Pred::Or(inner)
                } else {
                    Pred::And(inner)
                }
            }
            3 => {
                let slot = self.rng.below(4) as u8;
                let store = Pred::Store { slot, value: Expr::Const(self.rng.below(40) as u32) };
                Pred::Or(vec![store, self.key_test(key, v)])
            }
            4 => {
                let k = self.rng.below(4) as u32;
                let derived = key.clone().plus(k);
                let op = self.cmp_op();
                Pred::cmp(op, derived, Expr::Const(v.wrapping_add(k)))
            }
            5 => Pred::Const(self.rng.percent(50)),
            _ => Pred::Guard(self.rng.pick(&[14, 24, 34, 60, 81])),
        }
    }

    fn filter(&mut self) -> Filter {
        self.budget = 3 + self.rng.below(14) as usize;
        let depth = 2 + self.rng.below(4) as u32;
        let pred = if self.rng.percent(10) { self.chain() } else { self.pred(depth) };
        Filter { pred, accept: if self.rng.percent(95) { weir_filter::DEFAULT_ACCEPT } else { 1 } }
    }

    /// Packets around the base: truncated at every interesting length, some bytes changed.
    fn packets(&mut self, n: usize) -> Vec<(Vec<u8>, u32)> {
        (0..n)
            .map(|_| {
                let len = match self.rng.below(10) {
                    0..=5 => self.rng.below(81) as usize,
                    6 => self.rng.pick(&[0, 1, 13, 14, 23, 24, 29, 30, 33, 34, 38, 41, 54, 80]),
                    _ => 60 + self.rng.below(21) as usize,
                };
                let mut p: Vec<u8> = self.base[..len].to_vec();
                let flips = self.rng.below(4);
                for _ in 0..flips {
                    if len > 0 {
                        let i = self.rng.below(len as u64) as usize;
                        p[i] = if self.rng.percent(60) {
                            self.rng.pick(&ALPHABET)
                        } else {
                            self.rng.next() as u8
                        };
                    }
                }
                let wire = match self.rng.below(6) {
                    0..=2 => len as u32,
                    3 => len as u32 + self.rng.below(1500) as u32,
                    4 => self.rng.below(100) as u32,
                    _ => u32::MAX - self.rng.below(2) as u32,
                };
                (p, wire)
            })
            .collect()
    }
}

fn hex(p: &[u8]) -> String {
    p.iter().map(|b| format!("{b:02x}")).collect()
}

/// Panics with everything needed to reproduce when `opt` and `f` disagree on a packet.
fn assert_same(what: &str, seed: u64, f: &Filter, opt: &Filter, packets: &[(Vec<u8>, u32)]) {
    for (p, wire) in packets {
        let want = f.run(p, *wire);
        let got = opt.run(p, *wire);
        assert_eq!(
            got,
            want,
            "{what} changed the verdict (seed {seed:#x})\n  filter:    {f}\n  optimized: {opt}\n  \
             packet ({} bytes, wire {wire}): {}",
            p.len(),
            hex(p)
        );
    }
}

fn case_count() -> u64 {
    std::env::var("WEIR_OPT_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 3_000 } else { 25_000 })
}

#[test]
fn random_filters_keep_their_meaning() {
    let cases = case_count();
    let mut shrunk = 0u64;
    let mut not_idempotent = 0u64;
    let mut verdicts = [0u64; 2];
    for i in 0..cases {
        let seed = 0x5eed_0000_0000 + i;
        let mut g = Gen::new(seed);
        let f = g.filter();
        let packets = g.packets(24);
        for (p, w) in &packets {
            verdicts[usize::from(f.matches(p, *w))] += 1;
        }
        let o = opt::optimize(&f);
        assert_same("optimize", seed, &f, &o, &packets);
        for (name, pass) in [
            ("simplify", opt::simplify as fn(&Filter) -> Filter),
            ("factor", opt::factor),
            ("decide", opt::decide),
            ("insert_guards", opt::insert_guards),
        ] {
            assert_same(name, seed, &f, &pass(&f), &packets);
        }
        let oo = opt::optimize(&o);
        assert_same("optimize twice", seed, &f, &oo, &packets);
        assert!(
            node_count(&oo.pred) <= node_count(&o.pred),
            "optimizing again grew the filter (seed {seed:#x})\n  once:  {o}\n  twice: {oo}"
        );
        not_idempotent += u64::from(oo != o);
        shrunk += u64::from(node_count(&o.pred) < node_count(&f.pred));
    }
    println!(
        "{cases} random filters x 24 packets: {shrunk} shrunk, {not_idempotent} changed by a \
         second run, verdicts reject/accept {verdicts:?}"
    );
    // The generator must exercise both verdicts, or the property says little.
    assert!(verdicts[0] > cases && verdicts[1] > cases, "{verdicts:?}");
    assert!(shrunk > cases / 4, "the optimizer shrank only {shrunk} of {cases} filters");
}

// ---------------------------------------------------------------------------------------
// Targeted tests, on IR shaped like what pflang lowers to (Ethernet offsets).

fn ether_type(t: u32) -> Pred {
    Pred::eq(Expr::load_at(12, Size::Half), t)
}

fn ip_proto(p: u32) -> Pred {
    Pred::eq(Expr::load_at(23, Size::Byte), p)
}

fn ip_src(a: u32) -> Pred {
    Pred::eq(Expr::load_at(26, Size::Word), a)
}

fn ip_dst(a: u32) -> Pred {
    Pred::eq(Expr::load_at(30, Size::Word), a)
}

/// libpcap's `host a` on Ethernet: IPv4, ARP and RARP addresses.
fn host(a: u32) -> Pred {
    let arp = |t| {
        Pred::and([
            ether_type(t),
            Pred::or([
                Pred::eq(Expr::load_at(28, Size::Word), a),
                Pred::eq(Expr::load_at(38, Size::Word), a),
            ]),
        ])
    };
    Pred::or([
        Pred::and([ether_type(0x800), Pred::or([ip_src(a), ip_dst(a)])]),
        arp(0x806),
        arp(0x8035),
    ])
}

fn ipv4_packet(len: usize, proto: u8, src: u32, dst: u32) -> Vec<u8> {
    let mut p = vec![0u8; len.max(34)];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = proto;
    p[26..30].copy_from_slice(&src.to_be_bytes());
    p[30..34].copy_from_slice(&dst.to_be_bytes());
    p.truncate(len);
    p
}

fn count(p: &Pred, what: &dyn Fn(&Pred) -> bool) -> usize {
    let here = usize::from(what(p));
    here + match p {
        Pred::And(ps) | Pred::Or(ps) => ps.iter().map(|q| count(q, what)).sum(),
        Pred::Not(q) => count(q, what),
        _ => 0,
    }
}

fn mentions(p: &Pred, test: &Pred) -> usize {
    count(p, &|q| q == test)
}

/// Every packet shape the targeted tests care about, at every captured length.
fn sample_packets(seed: u64) -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    for len in 0..=60 {
        out.push((ipv4_packet(len, 6, 0x0a00_0001, 0x0a00_0002), 60));
        out.push((ipv4_packet(len, 17, 0x0a00_0003, 0x0a00_0001), len as u32));
        let mut arp = ipv4_packet(len, 0, 0, 0);
        if len > 13 {
            arp[13] = 0x06;
        }
        out.push((arp, 60));
    }
    let mut g = Gen::new(seed);
    out.extend(g.packets(200));
    out
}

#[test]
fn a_decided_test_disappears() {
    let f = Filter::new(Pred::and([ether_type(0x800), ip_proto(6), ether_type(0x800)]));
    let o = opt::optimize(&f);
    assert_eq!(mentions(&o.pred, &ether_type(0x800)), 1, "{o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(1));

    let f = Filter::new(Pred::and([ether_type(0x800), ip_proto(6), ether_type(0x86dd)]));
    let o = opt::optimize(&f);
    assert_eq!(o.pred, Pred::Const(false), "{o}");

    // Under `not` the same contradiction keeps the loads: `not (... == 0x86dd)` is true
    // only when the load succeeds.
    let f = Filter::new(Pred::and([ether_type(0x800), Pred::not(ether_type(0x86dd))]));
    let o = opt::optimize(&f);
    assert_eq!(o.pred, ether_type(0x800), "{o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(2));
}

#[test]
fn decided_tests_under_or_and_masks() {
    // `(ip[9] == 6 or ip[9] == 17) and ether[12:2] == 0x800 and ip[9] != 1`: both paths
    // out of the `or` agree that ip[9] is 6..17, so the last test is decided.
    let f = Filter::new(Pred::and([
        Pred::or([ip_proto(6), ip_proto(17)]),
        ether_type(0x800),
        Pred::cmp(CmpOp::Ne, Expr::load_at(23, Size::Byte), Expr::Const(1)),
    ]));
    let o = opt::optimize(&f);
    assert_eq!(count(&o.pred, &|q| matches!(q, Pred::Cmp { op: CmpOp::Ne, .. })), 0, "{o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(3));

    // `ip[0] == 0x45` decides `ip[0] & 0xf0 == 0x40` (known bits) and the half-word
    // ether[12:2] == 0x800 decides the byte ether[12] == 8.
    let version = Pred::eq_masked(Expr::load_at(14, Size::Byte), 0xf0, 0x40);
    let f = Filter::new(Pred::and([
        ether_type(0x800),
        Pred::eq(Expr::load_at(14, Size::Byte), 0x45),
        version.clone(),
        Pred::eq(Expr::load_at(12, Size::Byte), 8),
    ]));
    let o = opt::optimize(&f);
    assert_eq!(mentions(&o.pred, &version), 0, "{o}");
    assert_eq!(mentions(&o.pred, &Pred::eq(Expr::load_at(12, Size::Byte), 8)), 0, "{o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(4));
}

#[test]
fn range_chains_collapse() {
    let len = || Expr::WireLen;
    let f = Filter::new(Pred::and([
        Pred::cmp(CmpOp::Gt, len(), Expr::Const(100)),
        Pred::cmp(CmpOp::Gt, len(), Expr::Const(50)),
        Pred::cmp(CmpOp::Ge, len(), Expr::Const(20)),
    ]));
    let o = opt::optimize(&f);
    // One comparison is left: len > 100, which merging writes as len >= 101.
    assert_eq!(o.pred, Pred::cmp(CmpOp::Ge, len(), Expr::Const(101)), "{o}");

    // A jgt/jge chain over a load: the later, weaker bounds are implied.
    let b = || Expr::load_at(20, Size::Byte);
    let f = Filter::new(Pred::and([
        ether_type(0x800),
        Pred::cmp(CmpOp::Ge, b(), Expr::Const(10)),
        Pred::or([
            Pred::cmp(CmpOp::Gt, b(), Expr::Const(5)),
            Pred::eq(Expr::load_at(40, Size::Byte), 1),
        ]),
        Pred::cmp(CmpOp::Le, b(), Expr::Const(0xff)),
    ]));
    let o = opt::optimize(&f);
    assert_eq!(count(&o.pred, &|q| matches!(q, Pred::Cmp { .. })), 2, "{o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(5));

    // An `or` of ranges on a value that cannot abort becomes one set test.
    let f = Filter::new(Pred::or([
        Pred::cmp(CmpOp::Lt, len(), Expr::Const(5)),
        Pred::eq(len(), 7),
        Pred::cmp(CmpOp::Lt, len(), Expr::Const(10)),
        Pred::cmp(CmpOp::Gt, len(), Expr::Const(1000)),
    ]));
    let o = opt::optimize(&f);
    assert_eq!(
        o.pred,
        Pred::In { value: len(), set: ValueSet::from_ranges([(0, 9), (1001, u32::MAX)]) },
        "{o}"
    );
}

#[test]
fn constant_folding_keeps_aborts() {
    let k = |v| Expr::Const(v);
    // Folds: (3 + 4) * 2 == 14; len << 32 == 0; M[0] is 0 before any store.
    let f = Filter::new(Pred::and([
        Pred::eq(Expr::binary(BinOp::Mul, Expr::binary(BinOp::Add, k(3), k(4)), k(2)), 14),
        Pred::eq(Expr::binary(BinOp::Shl, Expr::WireLen, k(32)), 0),
        Pred::eq(Expr::Scratch(0), 0),
    ]));
    assert_eq!(opt::optimize(&f).pred, Pred::Const(true));

    // Division by a constant 0 aborts: under `not`, the filter still rejects everything.
    let div0 = Pred::eq(Expr::binary(BinOp::Div, Expr::WireLen, k(0)), 1);
    let f = Filter::new(Pred::not(div0.clone()));
    let o = opt::optimize(&f);
    assert!(!o.matches(&[], 1) && !o.matches(&[0; 40], 40), "{o}");
    assert_ne!(o.pred, Pred::Const(true));

    // `pkt[90] * 0 == 0` is not simply true: the load still aborts on short packets.
    let f = Filter::new(Pred::not(Pred::eq(
        Expr::binary(BinOp::Mul, Expr::load_at(90, Size::Byte), k(0)),
        1,
    )));
    let o = opt::optimize(&f);
    assert!(!o.matches(&[0; 40], 40) && o.matches(&[0; 100], 100), "{o}");

    // Double negation is the identity, and `not` of a test that can abort stays guarded.
    let t = ether_type(0x800);
    let f = Filter::new(Pred::not(Pred::not(t.clone())));
    assert_eq!(opt::simplify(&f).pred, t);
}

#[test]
fn a_long_or_of_equalities_becomes_one_set() {
    let x = || Expr::load_at(30, Size::Word);
    let values: Vec<u32> = (0..500).map(|i| 0x0a00_0000 + i * 7).collect();
    let f = Filter::new(Pred::and([
        ether_type(0x800),
        Pred::or(values.iter().map(|&v| Pred::eq(x(), v))),
    ]));
    let o = opt::optimize(&f);
    let sets = count(&o.pred, &|q| matches!(q, Pred::In { .. }));
    assert_eq!(sets, 1, "{o}");
    assert!(node_count(&o.pred) < 12, "{o}");
    let mut packets = sample_packets(6);
    for &v in values.iter().step_by(37) {
        packets.push((ipv4_packet(34, 6, 0, v), 34));
        packets.push((ipv4_packet(34, 6, 0, v + 1), 34));
    }
    assert_same("optimize", 0, &f, &o, &packets);
    assert!(o.matches(&ipv4_packet(34, 6, 0, values[100]), 34));

    // `not port a and not port b ...`: an `and` of inequalities is one set test too.
    let f = Filter::new(Pred::and(
        values.iter().map(|&v| Pred::cmp(CmpOp::Ne, Expr::WireLen, Expr::Const(v))),
    ));
    let o = opt::optimize(&f);
    assert!(matches!(&o.pred, Pred::In { .. }), "{o}");
    assert!(!o.matches(&[], values[3]) && o.matches(&[], values[3] + 1));
}

#[test]
fn hosts_share_one_protocol_test() {
    let f = Filter::new(Pred::or((1..=5).map(|i| host(0x0a00_0000 + i))));
    let o = opt::optimize(&f);
    // One test per ethertype remains (ARP's and RARP's address tests are the same, so
    // their two branches share one test of both), and the address tests became set lookups.
    assert_eq!(mentions(&o.pred, &ether_type(0x800)), 1, "{o}");
    let arp = |q: &Pred| match q {
        Pred::In { value, set } => {
            *value == Expr::load_at(12, Size::Half) && set.contains(0x806) && set.contains(0x8035)
        }
        _ => false,
    };
    assert_eq!(count(&o.pred, &arp), 1, "{o}");
    assert_eq!(mentions(&o.pred, &ether_type(0x806)), 0, "{o}");
    assert!(count(&o.pred, &|q| matches!(q, Pred::In { .. })) >= 2, "{o}");
    let (before, after) = (node_count(&f.pred), node_count(&o.pred));
    assert!(after * 2 < before, "{before} -> {after} nodes: {o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(7));
}

#[test]
fn a_guard_goes_in_front_of_fixed_header_tests() {
    // ether[12:2] = 0x800 and ip[9] = 6: accepting needs 24 bytes, so one check up front.
    let f = Filter::new(Pred::and([ether_type(0x800), ip_proto(6)]));
    let o = opt::optimize(&f);
    assert_eq!(o.pred, Pred::and([Pred::Guard(24), ether_type(0x800), ip_proto(6)]), "{o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(8));

    // Inside an `or` (false and abort differ before its last part) the guard goes after the
    // test that tells the protocols apart, and only as far as every path there loads (a
    // false `ip[9] == 6` must stay false on a 24-byte packet, not abort).
    let frag = Pred::eq_masked(Expr::load_at(20, Size::Half), 0x1fff, 0);
    let tcp = Pred::and([ether_type(0x800), ip_proto(6), frag, ip_dst(1)]);
    let v6 = Pred::and([ether_type(0x86dd), Pred::eq(Expr::load_at(20, Size::Byte), 6)]);
    let f = Filter::new(Pred::or([tcp, v6]));
    let o = opt::optimize(&f);
    let Pred::And(top) = &o.pred else { panic!("{o}") };
    assert_eq!(top.first(), Some(&Pred::Guard(21)), "{o}");
    let Some(Pred::Or(branches)) = top.get(1) else { panic!("{o}") };
    let Some(Pred::And(v4)) = branches.first() else { panic!("{o}") };
    assert_eq!(v4.get(..2), Some(&[ether_type(0x800), Pred::Guard(24)][..]), "{o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(9));

    // Under `not`, the paths to false are the ones that count.
    let f = Filter::new(Pred::not(Pred::and([ether_type(0x800), ip_proto(6)])));
    let o = opt::optimize(&f);
    assert_same("optimize", 0, &f, &o, &sample_packets(10));
}

#[test]
fn stores_are_respected() {
    // M[0] := ip header length; tests through M[0] must not move before the store, and a
    // test repeated after a store that changes its slot is not decided by the first one.
    let ihl = Expr::binary(BinOp::Shl, Expr::load_at(14, Size::Byte).and_mask(0xf), Expr::Const(2));
    let f = Filter::new(Pred::and([
        Pred::eq(Expr::Scratch(0), 0),
        Pred::Store { slot: 0, value: ihl },
        Pred::or([
            Pred::eq(Expr::load(Expr::Scratch(0).plus(14), Size::Half), 80),
            Pred::eq(Expr::load(Expr::Scratch(0).plus(16), Size::Half), 80),
        ]),
        Pred::cmp(CmpOp::Ne, Expr::Scratch(0), Expr::Const(0)),
    ]));
    let o = opt::optimize(&f);
    assert_eq!(count(&o.pred, &|q| matches!(q, Pred::Store { .. })), 1, "{o}");
    let mut packets = sample_packets(11);
    let mut p = ipv4_packet(60, 6, 1, 2);
    p[34..36].copy_from_slice(&80u16.to_be_bytes());
    packets.push((p.clone(), 60));
    p[14] = 0x46;
    packets.push((p, 60));
    assert_same("optimize", 0, &f, &o, &packets);

    // A store to a slot nobody reads goes away when its value cannot abort.
    let f =
        Filter::new(Pred::and([Pred::Store { slot: 3, value: Expr::WireLen }, ether_type(0x800)]));
    assert_eq!(count(&opt::optimize(&f).pred, &|q| matches!(q, Pred::Store { .. })), 0);
}

/// `optimize` ends a round early on a tree `insert_guards` produced and nothing changed
/// since, trusting that a second placement adds nothing there: checked on random filters,
/// as they are and after the passes that run before it in a round.
#[test]
fn inserting_guards_twice_changes_nothing() {
    let mut guarded = 0u64;
    for i in 0..case_count() {
        let seed = 0x6a7d_0000_0000 + i;
        let f = Gen::new(seed).filter();
        for input in [f.clone(), opt::decide(&opt::simplify(&f))] {
            let once = opt::insert_guards(&input);
            let twice = opt::insert_guards(&once);
            assert_eq!(once, twice, "seed {seed:#x}\n  input: {input}\n  once:  {once}");
            guarded += u64::from(once != input);
        }
    }
    // The property says little unless guards were placed.
    assert!(guarded > case_count() / 10, "guards placed on only {guarded} inputs");
}

/// The shortcuts of `optimize`'s fixed-point loop (a round that starts from a tree every
/// pass was seen to leave unchanged ends early) never change its result: the same filters
/// optimized with every pass run in every round give the same tree.
#[test]
fn the_fixed_point_shortcuts_change_no_result() {
    let mut changed = 0u64;
    for i in 0..case_count() / 5 {
        let seed = 0x5c1f_0000_0000 + i;
        let f = Gen::new(seed).filter();
        let fast = opt::optimize(&f);
        let full = opt::optimize_without_shortcuts(&f);
        assert_eq!(fast, full, "seed {seed:#x}\n  input: {f}");
        changed += u64::from(fast != f);
    }
    // The comparison says little unless the optimizer did something.
    assert!(changed > case_count() / 20, "only {changed} filters changed");
}

/// A `decide` walk over a tree without a store is told so and does not ask its parts whether
/// they store (compile-29); it gives what asking every part gives, on random filters with
/// stores and without, as generated and as the optimizer's first walk sees them (after the
/// factoring `simplify`).
#[test]
fn telling_the_walk_a_tree_has_no_store_changes_no_result() {
    let (mut with, mut without) = (0u64, 0u64);
    for i in 0..case_count() / 5 {
        let seed = 0x5707_0000_0000 + i;
        let f = Gen::new(seed).filter();
        let stores = opt::has_store(&f.pred);
        with += u64::from(stores);
        without += u64::from(!stores);
        for g in [opt::simplify_factoring(&f), f] {
            let told = opt::decide(&g);
            let asking = opt::decide_asking_every_part_for_stores(&g);
            assert_eq!(told, asking, "seed {seed:#x}\n  input: {g}");
        }
    }
    // (both kinds of tree are met often)
    assert!(with > case_count() / 50 && without > case_count() / 50, "{with} {without}");
}

/// A junction takes a leaf test's abort answer from the leaf's walk rather than asking
/// again at the same environment (compile-33); it gives what asking every part gives, on
/// random filters as generated and as the optimizer's first walk sees them.
#[test]
fn taking_a_leafs_abort_answer_from_its_walk_changes_no_result() {
    let mut changed = 0u64;
    for i in 0..case_count() / 5 {
        let seed = 0xab07_0000_0000 + i;
        let f = Gen::new(seed).filter();
        for g in [opt::simplify_factoring(&f), f] {
            let taken = opt::decide(&g);
            let asking = opt::decide_asking_every_part_for_aborts(&g);
            assert_eq!(taken, asking, "seed {seed:#x}\n  input: {g}");
            changed += u64::from(taken != g);
        }
    }
    // (the walks change most trees: their junctions' choices are exercised)
    assert!(changed > case_count() / 10, "{changed}");
}

#[test]
fn optimizing_twice_changes_nothing() {
    let shapes = [
        Pred::and([ether_type(0x800), ip_proto(6)]),
        Pred::or((1..=20).map(|i| host(0x0a00_0000 + i))),
        Pred::or([
            Pred::and([ether_type(0x800), ip_proto(6), ip_dst(1)]),
            Pred::and([ether_type(0x86dd), Pred::eq(Expr::load_at(20, Size::Byte), 6)]),
        ]),
        Pred::not(Pred::or([host(1), host(2)])),
    ];
    for p in shapes {
        let f = Filter::new(p);
        let once = opt::optimize(&f);
        let twice = opt::optimize(&once);
        assert_eq!(once, twice, "\n  once:  {once}\n  twice: {twice}");
    }
}

#[test]
fn ten_thousand_hosts() {
    let n = 10_000u32;
    let addr = |i: u32| 0x0a00_0000 + i * 3;
    let f = Filter::new(Pred::or((0..n).map(|i| host(addr(i)))));
    let start = std::time::Instant::now();
    let o = opt::optimize(&f);
    let took = start.elapsed();
    println!(
        "10,000 hosts: {} nodes -> {} nodes in {took:?}",
        node_count(&f.pred),
        node_count(&o.pred)
    );
    // The structure: a few tests per ethertype, the addresses in set lookups.
    assert!(node_count(&o.pred) < 80, "{} nodes", node_count(&o.pred));
    let big_sets = count(
        &o.pred,
        &|q| matches!(q, Pred::In { set, .. } if set.ranges().len() >= (n - 1) as usize),
    );
    assert!(big_sets >= 4, "{o}");
    let mut packets = sample_packets(12);
    for i in (0..n).step_by(97) {
        packets.push((ipv4_packet(34, 6, addr(i), 7), 34));
        packets.push((ipv4_packet(34, 6, 7, addr(i)), 34));
        packets.push((ipv4_packet(33, 6, 7, addr(i)), 34));
        packets.push((ipv4_packet(34, 6, addr(i) + 1, 7), 34));
        let mut arp = ipv4_packet(42, 0, 0, 0);
        arp[13] = 0x06;
        arp[38..42].copy_from_slice(&addr(i).to_be_bytes());
        packets.push((arp, 42));
    }
    assert_same("optimize", 0, &f, &o, &packets);
    assert!(o.matches(&ipv4_packet(34, 6, addr(500), 7), 34));
}

/// The certificate `optimize` skips the second `decide` of a round on: a walk that left its
/// input unchanged and reports no choice a guard could turn gives the guarded tree back
/// when walked again (as the round's second walk would). Checked on random filters as a
/// round sees them (after the factoring `simplify`); the counts say how often the skip can
/// fire (bench/records/2026-11-30-compile-11.txt).
#[test]
fn a_certified_decide_gives_the_guarded_tree_back() {
    let mut tally = opt::SkipTally::default();
    let cases = case_count();
    for i in 0..cases {
        let seed = 0x5c1f_0000_0000 + i;
        let f = Gen::new(seed).filter();
        if let Err(e) = tally.add(&f) {
            panic!("seed {seed:#x}\n  input: {f}\n  {e}");
        }
    }
    println!("{cases} random filters: {tally}");
    // The check says little unless the skip fires.
    assert!(tally.skipped > cases / 200, "the skip fired on only {} filters", tally.skipped);
}

/// The certificate of a walk whose only changes are parts dropped as decided without a
/// possible abort (`host A and udp`'s `ip6` branch): where it lets `optimize` skip the
/// second walk, walking the guarded tree again gives it back, and `optimize` gives what
/// every pass run in every round gives. Checked on random filters of the shape it is for
/// ([`Gen::dispatch`]).
#[test]
fn a_walk_that_only_drops_decided_parts_certifies_its_output() {
    let cases = case_count();
    let tally = check_dispatch_certificates(0xd20b_0000_0000, false);
    println!("{cases} random dispatch filters: {tally}");
    // The check says little unless the certificate fires.
    assert!(tally.dropped > cases / 200, "only {} walks certified by their drops", tally.dropped);
}

/// [`a_walk_that_only_drops_decided_parts_certifies_its_output`] on dispatch filters with the
/// shapes each change mark of the walk exists for ([`Gen::edge_part`]; fact prefixes longer
/// than a path keeps). Where no guard is added the output is walked again too (it must come
/// back as it is): most of those shapes place no guard.
#[test]
fn the_certificate_holds_on_the_shapes_its_marks_are_for() {
    let cases = case_count();
    let tally = check_dispatch_certificates(0xed6e_0000_0000, true);
    println!("{cases} random dispatch filters with edge shapes: {tally}");
    assert!(tally.dropped > cases / 200, "only {} walks certified by their drops", tally.dropped);
    assert!(tally.walked_again > cases / 200, "only {} walked again", tally.walked_again);
}

/// Checks the certificate on [`Gen::dispatch`] filters from seeds `first..` (with the edge
/// shapes when `edges`), and every fourth `optimize` against every pass run in every round.
fn check_dispatch_certificates(first: u64, edges: bool) -> opt::SkipTally {
    let mut tally = opt::SkipTally::default();
    for i in 0..case_count() {
        let seed = first + i;
        let mut g = Gen::new(seed);
        g.edges = edges;
        let f = g.dispatch();
        if let Err(e) = tally.add(&f) {
            panic!("seed {seed:#x}\n  input: {f}\n  {e}");
        }
        if i % 4 == 0 {
            let fast = opt::optimize(&f);
            let full = opt::optimize_without_shortcuts(&f);
            assert_eq!(fast, full, "seed {seed:#x}\n  input: {f}");
        }
    }
    tally
}

/// Hand-built filters of shapes random drawing rarely reaches, each a walk whose output a
/// second walk changes (a part left last or alone by the drops is walked in another mode):
/// the certificate must refuse it. Without the mark of the absorbed junction kept for a
/// store before it, this one would be certified, and walking the output again
/// (`SkipTally::add`) would show the change (bench/records/2026-11-30-compile-15.txt).
#[test]
fn the_certificate_refuses_walks_whose_output_a_second_walk_changes() {
    let store = || Pred::Store { slot: 0, value: Expr::Const(5) };
    let cases = [
        // a junction whose decided `false` is kept for the store before it, left last
        Pred::and([
            ether_type(0x800),
            Pred::or([
                Pred::and([store(), ether_type(0x86dd)]),
                Pred::and([ether_type(0x86dd), Pred::eq(Expr::Scratch(0), 5)]),
            ]),
        ]),
    ];
    for p in cases {
        let f = Filter::new(p);
        let mut tally = opt::SkipTally::default();
        if let Err(e) = tally.add(&f) {
            panic!("{f}\n  {e}");
        }
        assert_eq!(tally.certified, 0, "certified: {f} ({tally})");
        assert_eq!(opt::optimize(&f), opt::optimize_without_shortcuts(&f), "{f}");
    }
}

/// The check `optimize` ends its loop on without simplifying the tree it holds
/// (`fold::unchanged`, issue 13): where it says `simplify` (with factoring or without) gives a
/// tree back, simplifying it does, with the same slots read. Checked on the trees the loop
/// meets (random and dispatch filters as drawn, after each pass of a round, optimized); the
/// counts say how often it vouched (bench/records/2026-11-30-compile-16.txt).
#[test]
fn simplify_is_vouched_for_only_where_it_changes_nothing() {
    let mut trees = 0u64;
    let mut vouched = [0u64; 2];
    for i in 0..case_count() / 2 {
        let seed = 0x0c4a_0000_0000 + i;
        let mut g = Gen::new(seed);
        g.edges = i % 2 == 1;
        let f = if i % 3 == 0 { g.dispatch() } else { g.filter() };
        let s = opt::simplify_factoring(&f);
        let d = opt::decide(&s);
        let guarded = opt::insert_guards(&d);
        let o = opt::optimize(&f);
        for t in [&f, &s, &d, &guarded, &opt::simplify(&guarded), &o] {
            trees += 1;
            match opt::check_unchanged(t) {
                Ok(v) => {
                    vouched[0] += u64::from(v[0]);
                    vouched[1] += u64::from(v[1]);
                }
                Err(e) => panic!("seed {seed:#x}\n  input: {f}\n  {e}"),
            }
        }
    }
    println!(
        "{trees} trees: simplify vouched to give back {}, with factoring {}",
        vouched[0], vouched[1]
    );
    // The check says little unless it vouches for many trees (every optimized one it can).
    assert!(vouched[1] > trees / 10, "vouched for only {vouched:?} of {trees}");
}

// ---------------------------------------------------------------------------------------
// Disjuncts a later `or` of a top-level `and` rules out (opt::drop_ruled_out).

/// A top-level `and` of parts that test one key (a load at a constant offset) first, as
/// pflang's protocol alternatives do (`host`: IPv4, ARP, RARP; `udp`: IPv4, IPv6), mixed
/// with the random generator's trees (stores, aborts, `not`, keys tested later or at
/// computed offsets), and the key's values around the base packet's.
fn keyed_conjunction(g: &mut Gen) -> Filter {
    let key = g.rng.pick(&[
        Expr::load_at(12, Size::Half),
        Expr::load_at(12, Size::Half),
        Expr::load_at(13, Size::Byte),
        Expr::load_at(40, Size::Half),
        Expr::load_at(78, Size::Word),
    ]);
    let Expr::Load { offset, size } = &key else { unreachable!() };
    let Expr::Const(at) = **offset else { unreachable!() };
    let width = match size {
        Size::Byte => 1,
        Size::Half => 2,
        Size::Word => 4,
    };
    let own =
        g.base[at as usize..at as usize + width].iter().fold(0u32, |v, b| v << 8 | u32::from(*b));
    let values = [own, own ^ 1, own.wrapping_add(2), 0x800];
    let key_test = |g: &mut Gen| -> Pred {
        if g.rng.percent(75) {
            Pred::eq(key.clone(), g.rng.pick(&values))
        } else {
            let n = g.rng.below(4);
            let set = ValueSet::from_ranges((0..n).map(|_| {
                let v = g.rng.pick(&values);
                (v, v.saturating_add(g.rng.below(3) as u32))
            }));
            Pred::In { value: key.clone(), set }
        }
    };
    let rest = |g: &mut Gen| -> Pred {
        g.budget = 2 + g.rng.below(4) as usize;
        if g.rng.percent(60) {
            // store-free, so that the drop is allowed
            loop {
                let p = g.pred(2);
                if !opt::has_store(&p) {
                    return p;
                }
            }
        }
        g.pred(2)
    };
    let n = 2 + g.rng.below(3);
    let parts = (0..n)
        .map(|_| match g.rng.below(10) {
            0..=6 => Pred::Or(
                (0..1 + g.rng.below(4))
                    .map(|_| match g.rng.below(10) {
                        0..=5 => Pred::And(vec![key_test(g), rest(g)]),
                        6 | 7 => key_test(g),
                        8 => Pred::And(vec![rest(g), key_test(g)]),
                        _ => rest(g),
                    })
                    .collect(),
            ),
            7 => key_test(g),
            8 => Pred::And(vec![key_test(g), rest(g)]),
            _ => rest(g),
        })
        .collect();
    Filter { pred: Pred::And(parts), accept: weir_filter::DEFAULT_ACCEPT }
}

/// Dropping the disjuncts a later `or` rules out keeps every verdict (and so does
/// optimizing, which starts with it), on filters shaped for it to drop often.
#[test]
fn dropping_ruled_out_disjuncts_keeps_every_verdict() {
    let cases = case_count();
    let (mut dropped, mut verdicts) = (0u64, [0u64; 2]);
    for i in 0..cases {
        let seed = 0x0ae1_0000_0000 + i;
        let mut g = Gen::new(seed);
        let f = keyed_conjunction(&mut g);
        let packets = g.packets(24);
        for (p, w) in &packets {
            verdicts[usize::from(f.matches(p, *w))] += 1;
        }
        let d = opt::drop_ruled_out(&f);
        assert_same("drop_ruled_out", seed, &f, &d, &packets);
        assert_same("optimize", seed, &f, &opt::optimize(&f), &packets);
        if d != f {
            dropped += 1;
            assert!(node_count(&d.pred) < node_count(&f.pred), "{f}\n{d}");
            assert!(!opt::has_store(&f.pred), "dropped from a tree with a store: {f}\n{d}");
        }
    }
    println!("{cases} keyed conjunctions: {dropped} with disjuncts dropped, verdicts {verdicts:?}");
    assert!(dropped > cases / 10, "only {dropped} of {cases} dropped anything");
    assert!(verdicts[0] > cases && verdicts[1] > cases / 4, "{verdicts:?}");
}

/// `host a and udp`: the ARP and RARP alternatives go before the other passes run (the
/// `udp` after them holds only for IPv4 and IPv6); left when a store is in the tree, when
/// nothing after the `or` rules them out, and when their key test is not their first test.
#[test]
fn host_and_udp_loses_its_arp_alternatives() {
    let a = 0x0a00_0001;
    let udp = Pred::or([
        Pred::and([ether_type(0x800), ip_proto(17)]),
        Pred::and([ether_type(0x86dd), Pred::eq(Expr::load_at(20, Size::Byte), 17)]),
    ]);
    let f = Filter::new(Pred::and([host(a), udp.clone()]));
    let d = opt::drop_ruled_out(&f);
    // host(a) is already grouped by ethertype: one IPv4 alternative is left
    let ipv4 = Pred::and([ether_type(0x800), Pred::or([ip_src(a), ip_dst(a)])]);
    let want = Pred::And(vec![Pred::Or(vec![ipv4]), udp.clone()]);
    assert_eq!(d.pred, want, "{d}");
    let o = opt::optimize(&f);
    assert_eq!(
        mentions(&o.pred, &ether_type(0x806)) + mentions(&o.pred, &ether_type(0x8035)),
        0,
        "{o}"
    );
    assert!(!format!("{o}").contains("0x806"), "{o}");
    assert_same("optimize", 0, &f, &o, &sample_packets(11));
    // `udp` first: its IPv6 alternative goes (`host` after it holds for IPv4, ARP, RARP);
    // host's ARP and RARP alternatives stay (ruled out by a part before them: `decide`'s)
    let first = opt::drop_ruled_out(&Filter::new(Pred::and([udp.clone(), host(a)])));
    let udp4 = Pred::and([ether_type(0x800), ip_proto(17)]);
    assert_eq!(first.pred, Pred::And(vec![Pred::Or(vec![udp4]), host(a)]), "{first}");
    // a store anywhere: left
    let stored = Filter::new(Pred::and([
        host(a),
        udp.clone(),
        Pred::Store { slot: 0, value: Expr::Const(1) },
    ]));
    assert_eq!(opt::drop_ruled_out(&stored), stored);
    // the key tested second in the ARP alternative: left (its first test may abort)
    let late = Pred::and([Pred::eq(Expr::load_at(28, Size::Word), a), ether_type(0x806)]);
    let f =
        Filter::new(Pred::and([Pred::or([Pred::and([ether_type(0x800), ip_src(a)]), late]), udp]));
    assert_eq!(opt::drop_ruled_out(&f), f);
}
