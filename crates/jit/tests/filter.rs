//! Native filters (`weir_jit::filter`) against the reference evaluator: thousands of random
//! filters from `weir_testkit::filter_gen` (every IR variant, boundary constants, nested
//! and/or/not, scratch slots, guards, sets up to hundreds of ranges), each run on about a
//! hundred packets (random ones and one packet cut at every boundary length, 0 included),
//! must give `Filter::run`'s result on every packet. Hand-written cases pin what the native
//! code adds its own code for: guards and covered loads, large sets, deep nesting,
//! division by zero (under `not` too), shifts by 32 and more, scratch slots, offsets near
//! the top of u32.

use weir_filter::{BinOp, CmpOp, Expr, Filter, Pred, Size, ValueSet};
use weir_jit::filter::{compile, CompileError, NativeFilter};
use weir_testkit::filter_gen::{self as random, FilterGen};
use weir_testkit::SplitMix64;

const FILTERS: usize = 3_200;

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Random packets, plus one 120-byte packet cut at each length a filter's loads are likely
/// to straddle (0 through 8, the Ethernet, IPv4 and transport header edges, and more).
fn packets(seed: u64) -> Vec<random::Packet> {
    let mut out = random::packets(seed, 64);
    let mut rng = SplitMix64::new(seed ^ 0xb0da);
    let full: Vec<u8> = (0..120).map(|_| rng.one_of(&random::BYTES)).collect();
    let lengths = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 22, 23, 24, 26, 30, 33, 34, 35, 36, 37,
        38, 40, 41, 54, 60, 64, 79, 80, 81, 120,
    ];
    for len in lengths {
        let data = full[..len].to_vec();
        out.push(random::Packet { data, wire_len: 120 });
    }
    out
}

/// Native verdicts must be the evaluator's on every packet.
fn check(filter: &Filter, native: &NativeFilter, packets: &[random::Packet]) -> Result<(), String> {
    for p in packets {
        let want = filter.run(&p.data, p.wire_len);
        let got = native.run(&p.data, p.wire_len);
        if got != want || native.matches(&p.data, p.wire_len) != filter.matches(&p.data, p.wire_len)
        {
            return Err(format!(
                "native {got}, evaluator {want} on packet {} (wire {}) for\n{filter}",
                hex(&p.data),
                p.wire_len
            ));
        }
    }
    Ok(())
}

fn native(filter: &Filter) -> NativeFilter {
    compile(filter).unwrap_or_else(|e| panic!("{e} for\n{filter}"))
}

#[test]
fn random_filters_agree_with_the_evaluator() {
    let seed = 0x4e47_1001;
    let packets = packets(seed);
    assert!(packets.len() >= 95 && packets.iter().any(|p| p.data.is_empty()));
    let mut gen = FilterGen::new(seed);
    let (mut runs, mut matched) = (0usize, 0usize);
    let mut failures = Vec::new();
    for i in 0..FILTERS {
        let filter = gen.filter();
        let native = native(&filter);
        if let Err(e) = check(&filter, &native, &packets) {
            failures.push(format!("filter {i}: {e}"));
        }
        runs += packets.len();
        matched += packets.iter().filter(|p| filter.matches(&p.data, p.wire_len)).count();
    }
    println!("{FILTERS} filters, {runs} runs, {matched} matches");
    // Both outcomes must be common, or the comparison says little.
    assert!(matched > runs / 10 && matched < runs * 9 / 10, "{matched} of {runs} match");
    assert!(failures.is_empty(), "{} failures, first:\n{}", failures.len(), failures.join("\n"));
}

fn byte(k: u32) -> Expr {
    Expr::load_at(k, Size::Byte)
}

fn run_on(filter: &Filter, data: &[u8], wire_len: u32) -> (u32, u32) {
    (native(filter).run(data, wire_len), filter.run(data, wire_len))
}

#[test]
fn guards_reject_short_packets_and_cover_later_loads() {
    // Guard(20), then loads inside it; under `not` a failed guard still rejects.
    let inner = Pred::and([
        Pred::Guard(20),
        Pred::eq(byte(19), 7),
        Pred::cmp(CmpOp::Eq, Expr::load_at(16, Size::Word), Expr::Const(0x0102_0307)),
    ]);
    for pred in [inner.clone(), Pred::not(inner)] {
        let filter = Filter::new(pred);
        let compiled = native(&filter);
        for len in 0..=24usize {
            let mut data = vec![0u8; len];
            if len >= 20 {
                data[16..20].copy_from_slice(&[1, 2, 3, 7]);
            }
            let want = filter.run(&data, 60);
            assert_eq!(compiled.run(&data, 60), want, "length {len}\n{filter}");
            if len < 20 {
                assert_eq!(want, 0, "a failed guard rejects, even under not");
            }
        }
    }
    // A guard past any packet, and Guard(0), which always holds.
    let far = Filter::new(Pred::not(Pred::Guard(u32::MAX)));
    assert_eq!(run_on(&far, &[0; 64], 64), (0, 0));
    let zero = Filter::new(Pred::Guard(0));
    assert_eq!(run_on(&zero, &[], 0), (zero.accept, zero.accept));
}

#[test]
fn a_load_on_one_path_proves_nothing_on_another() {
    // `or`: the second alternative's load at 40 runs on packets the first never checked
    // that far; then a load at 30 after the `or` is covered on neither path by the load at 40
    // alone (the first alternative may succeed without it).
    let filter = Filter::new(Pred::and([
        Pred::or([Pred::eq(byte(0), 1), Pred::eq(byte(40), 1)]),
        Pred::eq(byte(30), 0),
    ]));
    let compiled = native(&filter);
    for len in 0..=48usize {
        for first in [0u8, 1] {
            let mut data = vec![0u8; len];
            if let Some(b) = data.first_mut() {
                *b = first;
            }
            if let Some(b) = data.get_mut(40) {
                *b = 1;
            }
            assert_eq!(compiled.run(&data, 99), filter.run(&data, 99), "{len} {first}");
        }
    }
}

#[test]
fn large_sets_are_tables_that_compile_fast_and_search_right() {
    let mut rng = SplitMix64::new(0x5e7);
    let values: Vec<u32> = (0..10_000).map(|_| rng.u32()).collect();
    let set = ValueSet::from_values(values.iter().copied());
    assert!(set.ranges().len() > 9_900);
    let filter = Filter::new(Pred::In { value: Expr::load_at(0, Size::Word), set: set.clone() });
    let started = std::time::Instant::now();
    let compiled = native(&filter);
    println!(
        "10,000-element set: compiled in {:?}, {} bytes of code",
        started.elapsed(),
        compiled.machine_code().len()
    );
    // The code does not grow with the set (a table, not a comparison per element).
    assert!(compiled.machine_code().len() < 2_000, "{}", compiled.machine_code().len());
    let probes = values
        .iter()
        .flat_map(|&v| [v, v.wrapping_add(1), v.wrapping_sub(1)])
        .chain([0, 1, u32::MAX, u32::MAX - 1])
        .chain((0..20_000).map(|_| rng.u32()));
    let mut hits = 0;
    for v in probes {
        let data = v.to_be_bytes();
        let want = set.contains(v);
        assert_eq!(compiled.matches(&data, 4), want, "{v:#x}");
        hits += usize::from(want);
    }
    assert!(hits >= 10_000);
    // The value's load still aborts on a short packet.
    assert!(!compiled.matches(&[0, 0, 0], 4));
}

#[test]
fn sets_of_every_size_agree_with_contains() {
    let mut rng = SplitMix64::new(0x5e8);
    for n in (0..=20).chain([31, 32, 33, 100, 257]) {
        for wide in [false, true] {
            let ranges: Vec<(u32, u32)> = (0..n)
                .map(|i| {
                    let lo = if wide { rng.u32() } else { i * 10 + rng.below(5) as u32 };
                    (lo, lo.saturating_add(rng.below(3) as u32))
                })
                .chain(if n % 3 == 1 { vec![(0, 2), (u32::MAX - 1, u32::MAX)] } else { vec![] })
                .collect();
            let set = ValueSet::from_ranges(ranges);
            let value = Expr::load_at(0, Size::Word);
            let filter = Filter::new(Pred::In { value, set: set.clone() });
            let compiled = native(&filter);
            let probes = set
                .ranges()
                .iter()
                .flat_map(|&(lo, hi)| {
                    [lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1), lo / 2 + hi / 2]
                })
                .chain([0, 1, 2, 3, u32::MAX, u32::MAX - 2, 250]);
            for v in probes {
                assert_eq!(compiled.matches(&v.to_be_bytes(), 4), set.contains(v), "{n} {v:#x}");
            }
        }
    }
}

#[test]
fn deep_nesting_compiles_and_too_deep_is_an_error() {
    // 400 nested `not`s around alternating and/or, and an expression 400 additions deep.
    let mut pred = Pred::eq(byte(3), 3);
    for i in 0..400 {
        pred = match i % 3 {
            0 => Pred::Not(Box::new(pred)),
            1 => Pred::And(vec![Pred::eq(byte(i % 7), 0).clone(), pred]),
            _ => Pred::Or(vec![pred, Pred::eq(byte(i % 5), 9)]),
        };
    }
    let mut sum = byte(1);
    for i in 0..400 {
        sum = Expr::binary(BinOp::Add, sum, byte(i % 9));
    }
    let filter = Filter::new(Pred::and([pred, Pred::cmp(CmpOp::Ne, sum, Expr::Const(5))]));
    let compiled = native(&filter);
    let mut rng = SplitMix64::new(0xdee9);
    for len in 0..12 {
        for _ in 0..20 {
            let data: Vec<u8> = (0..len).map(|_| rng.one_of(&[0u8, 1, 3, 9])).collect();
            assert_eq!(compiled.run(&data, 12), filter.run(&data, 12), "{}", hex(&data));
        }
    }

    // Just inside the compiler's limit (1,000 levels, the comparison and its load
    // included), on the test thread's stack in a debug build.
    let mut deepest = Pred::eq(byte(0), 1);
    for _ in 0..990 {
        deepest = Pred::Not(Box::new(deepest));
    }
    let filter = Filter::new(deepest);
    assert_eq!(run_on(&filter, &[1], 1), (filter.accept, filter.accept));
    assert_eq!(run_on(&filter, &[2], 1), (0, 0));

    let mut too_deep = Pred::Const(true);
    for _ in 0..5_000 {
        too_deep = Pred::Not(Box::new(too_deep));
    }
    match compile(&Filter::new(too_deep)) {
        Err(e @ CompileError::TooDeep { .. }) => assert!(e.to_string().contains("deeper")),
        other => panic!("expected TooDeep, got {other:?}"),
    }
}

#[test]
fn division_by_zero_aborts_even_under_not() {
    let div = |d: Expr| Expr::binary(BinOp::Div, Expr::WireLen, d);
    let rem = |d: Expr| Expr::binary(BinOp::Mod, Expr::WireLen, d);
    for make in [div, rem] {
        for divisor in [Expr::Const(0), byte(0), Expr::Scratch(3)] {
            // not (len / d == 12345): true for every nonzero d here, an abort for d == 0.
            let test = Pred::cmp(CmpOp::Eq, make(divisor.clone()), Expr::Const(12_345));
            let filter = Filter::new(Pred::not(test));
            let compiled = native(&filter);
            for first in [0u8, 1, 3, 200] {
                let data = [first, 0, 0, 0];
                let want = filter.run(&data, 100);
                assert_eq!(compiled.run(&data, 100), want, "{first}\n{filter}");
                let zero_divisor = matches!(divisor, Expr::Const(0) | Expr::Scratch(_))
                    || (first == 0 && matches!(divisor, Expr::Load { .. }));
                assert_eq!(want == 0, zero_divisor, "{first}\n{filter}");
            }
        }
    }
    // Nonzero divisors: quotient and remainder of 32-bit values.
    for (a, b) in [(100u32, 7u32), (u32::MAX, 3), (5, u32::MAX), (0, 9)] {
        for op in [BinOp::Div, BinOp::Mod] {
            let e = Expr::binary(op, Expr::load_at(0, Size::Word), Expr::load_at(4, Size::Word));
            let want = if op == BinOp::Div { a / b } else { a % b };
            let filter = Filter::new(Pred::eq(e, want));
            let mut data = a.to_be_bytes().to_vec();
            data.extend(b.to_be_bytes());
            assert_eq!(run_on(&filter, &data, 8), (filter.accept, filter.accept));
        }
    }
}

#[test]
fn shifts_by_32_or_more_give_zero() {
    let amounts = [0u32, 1, 7, 31, 32, 33, 63, 64, 255, 0x1_0000, u32::MAX];
    for op in [BinOp::Shl, BinOp::Shr] {
        for amount in amounts {
            for value in [1u32, 0x8000_0001, u32::MAX] {
                let want = weir_filter::eval::binary(op, value, amount).unwrap();
                // Constant and loaded amounts take different code.
                let constant = Expr::binary(op, Expr::load_at(0, Size::Word), Expr::Const(amount));
                let loaded =
                    Expr::binary(op, Expr::load_at(0, Size::Word), Expr::load_at(4, Size::Word));
                let mut data = value.to_be_bytes().to_vec();
                data.extend(amount.to_be_bytes());
                for e in [constant, loaded] {
                    let filter = Filter::new(Pred::eq(e, want));
                    assert_eq!(
                        run_on(&filter, &data, 8),
                        (filter.accept, filter.accept),
                        "{value:#x} {op:?} {amount}"
                    );
                }
            }
        }
    }
}

#[test]
fn loads_are_big_endian_and_offsets_near_the_top_abort() {
    let data = [0x12u8, 0x34, 0x56, 0x78, 0x9a];
    for (e, want) in [
        (Expr::load_at(1, Size::Word), 0x3456_789a),
        (Expr::load_at(3, Size::Half), 0x789a),
        (Expr::load_at(4, Size::Byte), 0x9a),
        // A computed offset: (byte 0 & 3) + 1 = 3.
        (Expr::load(byte(0).and_mask(3).plus(1), Size::Half), 0x789a),
    ] {
        let filter = Filter::new(Pred::eq(e.clone(), want));
        assert_eq!(run_on(&filter, &data, 5), (filter.accept, filter.accept), "{e}");
        assert_eq!(run_on(&filter, &data[..4], 5), (0, 0), "{e} on 4 bytes");
    }
    // Offsets whose end passes 2^32 must not wrap around to the packet's start.
    for k in [u32::MAX, u32::MAX - 1, u32::MAX - 3, 0x8000_0000] {
        for size in [Size::Byte, Size::Half, Size::Word] {
            let constant = Expr::load_at(k, size);
            let computed = Expr::load(Expr::binary(BinOp::Add, byte(0), Expr::Const(k)), size);
            for e in [constant, computed] {
                let filter = Filter::new(Pred::not(Pred::eq(e, 1)));
                assert_eq!(run_on(&filter, &[0; 16], 16), (0, 0), "{k:#x} {size:?}");
            }
        }
    }
}

#[test]
fn scratch_slots_start_at_zero_and_carry_values() {
    let filter = Filter::new(Pred::and([
        Pred::eq(Expr::Scratch(5), 0),
        Pred::or([
            Pred::and([Pred::eq(byte(0), 1), Pred::Store { slot: 5, value: byte(1) }]),
            Pred::Store { slot: 5, value: byte(2) },
        ]),
        Pred::eq(Expr::load(Expr::Scratch(5), Size::Byte), 0xee),
    ]));
    let compiled = native(&filter);
    for data in [[1u8, 3, 4, 0xee, 0xee], [0, 3, 4, 0xee, 0xee], [1, 4, 3, 0xee, 0xff]] {
        assert_eq!(compiled.run(&data, 5), filter.run(&data, 5), "{}", hex(&data));
    }
    // Runs do not see each other's scratch: the store happens after the test.
    let fresh = Filter::new(Pred::and([
        Pred::eq(Expr::Scratch(0), 0),
        Pred::Store { slot: 0, value: Expr::Const(9) },
    ]));
    let compiled = native(&fresh);
    for _ in 0..3 {
        assert!(compiled.matches(&[], 0));
    }
    // Slots past the IR's 16 abort, as in the evaluator.
    for pred in [
        Pred::not(Pred::eq(Expr::Scratch(16), 1)),
        Pred::not(Pred::Store { slot: 200, value: Expr::Const(1) }),
    ] {
        let filter = Filter::new(pred);
        assert_eq!(run_on(&filter, &[0; 8], 8), (0, 0), "{filter}");
    }
}

#[test]
fn empty_packets_and_accept_values() {
    for accept in [0u32, 1, 0xffff, u32::MAX] {
        let mut filter = Filter::new(Pred::cmp(CmpOp::Le, Expr::WireLen, Expr::Const(60)));
        filter.accept = accept;
        let compiled = native(&filter);
        assert_eq!(compiled.accept(), accept);
        assert_eq!(compiled.run(&[], 60), accept);
        assert!(compiled.matches(&[], 60));
        assert_eq!(compiled.run(&[], 61), 0);
    }
    let load = Filter::new(Pred::not(Pred::eq(byte(0), 1)));
    assert_eq!(run_on(&load, &[], 0), (0, 0));
}

#[test]
fn compiled_filters_are_shared_between_threads() {
    let filter = Filter::new(Pred::In {
        value: Expr::load_at(0, Size::Half),
        set: ValueSet::from_values((0..100).map(|i| i * 3)),
    });
    let compiled = native(&filter);
    std::thread::scope(|s| {
        for t in 0..4u16 {
            let compiled = &compiled;
            let filter = &filter;
            s.spawn(move || {
                for v in (t..600).step_by(4) {
                    let data = v.to_be_bytes();
                    assert_eq!(compiled.matches(&data, 2), filter.matches(&data, 2));
                }
            });
        }
    });
}
