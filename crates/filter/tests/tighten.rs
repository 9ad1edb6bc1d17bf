//! `cbpf::tighten` on random classic programs: every program, run by weir-cbpf's
//! libpcap-exact interpreter, returns the same value as its tightened form on every packet
//! (random bytes from a small alphabet, so tests hit; every length from 0 up, so loads
//! abort), the tightened form is never longer, and it passes the rules the original passed.

use weir_cbpf::CbpfFilter;
use weir_filter::emit::cbpf::tighten;
use weir_isa::cbpf::{format_listing, CbpfInsn, CbpfOp};
use weir_testkit::SplitMix64;

/// The test kit's PRNG, with the picks this test makes.
struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n.max(1))
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// Constants tests and ALU operations use: the packet alphabet and a few words built of it.
const VALUES: [u32; 8] = [0, 1, 2, 3, 0xff, 0x0101, 0x0102, 0x01010101];

fn program(r: &mut Rng) -> Vec<CbpfInsn> {
    use CbpfOp::*;
    let n = 3 + r.below(40) as usize;
    let mut p = Vec::with_capacity(n);
    for i in 0..n - 1 {
        let left = (n - 1 - i - 1) as u64; // instructions after the next one
        let target = |r: &mut Rng| r.below(left.min(255) + 1) as u8;
        let insn = match r.below(20) {
            0..=3 => CbpfInsn::new(r.pick(&[LdAbsB, LdAbsH, LdAbsW]), 0, 0, r.below(24) as u32),
            4 => CbpfInsn::new(r.pick(&[LdIndB, LdIndH, LdIndW]), 0, 0, r.below(12) as u32),
            5 => CbpfInsn::new(r.pick(&[LdxMsh, LdxImm]), 0, 0, r.below(16) as u32),
            6 => CbpfInsn::new(r.pick(&[LdImm, LdLen, Tax, Txa, Neg]), 0, 0, r.pick(&VALUES)),
            7 => CbpfInsn::new(r.pick(&[St, Stx, LdMem, LdxMem]), 0, 0, r.below(3) as u32),
            8 | 9 => {
                let op = r.pick(&[AddK, SubK, AndK, OrK, LshK, RshK, DivK, ModK, AddX, AndX, DivX]);
                let k = match op {
                    DivK | ModK => 1 + r.below(3) as u32,
                    LshK | RshK => r.below(9) as u32,
                    _ => r.pick(&VALUES),
                };
                CbpfInsn::new(op, 0, 0, k)
            }
            10..=16 => {
                let op = r.pick(&[JeqK, JeqK, JgtK, JgeK, JsetK, JeqX, JgtX]);
                CbpfInsn::new(op, target(r), target(r), r.pick(&VALUES))
            }
            17 => CbpfInsn::new(Ja, 0, 0, u32::from(target(r))),
            18 => CbpfInsn::new(RetK, 0, 0, r.pick(&[0, 0, 1, 0x40000])),
            _ => CbpfInsn::new(RetA, 0, 0, 0),
        };
        p.push(insn);
    }
    p.push(CbpfInsn::new(CbpfOp::RetK, 0, 0, r.pick(&[0, 0x40000])));
    p
}

#[test]
fn tightened_programs_return_what_the_originals_return() {
    let mut r = Rng(SplitMix64::new(0x7161_6874_656e_2121));
    let mut packets = Vec::new();
    for len in 0..30usize {
        for _ in 0..6 {
            packets.push((0..len).map(|_| r.pick(&[0u8, 1, 2, 3, 0xff])).collect::<Vec<u8>>());
        }
    }
    let (mut checked, mut shorter) = (0, 0);
    for _ in 0..20_000 {
        let p = program(&mut r);
        let Ok(original) = CbpfFilter::new_libpcap(&p) else { continue };
        let q = tighten(&p);
        let listing =
            || format!("original:\n{}tightened:\n{}", format_listing(&p), format_listing(&q));
        assert!(q.len() <= p.len(), "{}", listing());
        let tightened = CbpfFilter::new_libpcap(&q)
            .unwrap_or_else(|e| panic!("tightened program refused: {e}\n{}", listing()));
        if CbpfFilter::new(&p).is_ok() {
            assert!(CbpfFilter::new(&q).is_ok(), "kernel rules:\n{}", listing());
        }
        for pkt in &packets {
            let wire = pkt.len() as u32 + 4;
            let (want, got) = (original.run(pkt, wire), tightened.run(pkt, wire));
            assert_eq!(got, want, "packet {pkt:02x?}\n{}", listing());
        }
        checked += 1;
        shorter += usize::from(q.len() < p.len());
    }
    println!("{checked} programs checked, {shorter} tightened");
    assert!(checked > 10_000 && shorter > 1000, "{checked} checked, {shorter} tightened");
}

/// Filters from the test kit's generator, optimized and as written, laid out by the classic
/// emitter: tightening them with the settled stop gives what running the confirming round
/// gives (the emitter's shapes: guard loads at the head, repeated header-length loads).
#[test]
fn laid_out_filters_tighten_as_with_the_confirming_round() {
    let cases: usize =
        std::env::var("WEIR_SETTLE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12_000);
    let mut gen = weir_testkit::filter_gen::FilterGen::new(0x5e77_1ed0);
    let (mut compared, mut differ) = (0, 0);
    for case in 0..cases {
        let written = gen.filter();
        let filter =
            if case % 2 == 0 { weir_filter::opt::optimize(&written) } else { written.clone() };
        let Ok(laid_out) = weir_filter::emit::cbpf::emit_unoptimized(&filter) else { continue };
        let q = tighten(&laid_out);
        let r = weir_filter::emit::tighten_with_confirming_round(&laid_out);
        assert_eq!(q, r, "{written:?}\n{}", format_listing(&laid_out));
        compared += 1;
        differ += usize::from(q != laid_out);
    }
    println!("{compared} laid-out programs compared, {differ} tightened");
    if cases >= 12_000 {
        assert!(compared > cases / 2 && differ > cases / 4, "{compared} {differ}");
    }
}
