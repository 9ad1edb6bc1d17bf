//! Unit tests of the interpreter's semantics, one behaviour each; the differential tests in
//! `tests/libpcap_diff.rs` then compare it with libpcap itself on many programs.

use super::*;
use weir_isa::cbpf::ancillary::*;
use CbpfOp::*;

fn s(op: CbpfOp, k: u32) -> CbpfInsn {
    CbpfInsn::stmt(op, k)
}

fn j(op: CbpfOp, k: u32, jt: u8, jf: u8) -> CbpfInsn {
    CbpfInsn::jump(op, k, jt, jf)
}

/// Runs `prog` (which must pass kernel rules) on `packet`, with wire length = captured.
fn go(prog: &[CbpfInsn], packet: &[u8]) -> u32 {
    let filter = CbpfFilter::new(prog).unwrap_or_else(|e| panic!("{e}"));
    let wire = packet.len() as u32;
    let result = filter.run(packet, wire);
    assert_eq!(run(prog, packet, wire, &PacketMeta::default()), result);
    result
}

#[test]
fn loads_are_big_endian_and_bounded_by_the_captured_length() {
    let pkt = [0x12, 0x34, 0x56, 0x78, 0x9a];
    assert_eq!(go(&[s(LdAbsW, 1), s(RetA, 0)], &pkt), 0x3456_789a);
    assert_eq!(go(&[s(LdAbsH, 3), s(RetA, 0)], &pkt), 0x789a);
    assert_eq!(go(&[s(LdAbsB, 4), s(RetA, 0)], &pkt), 0x9a);
    // One byte short: the whole filter returns 0, even though `ret #7` follows.
    assert_eq!(go(&[s(LdAbsW, 2), s(RetK, 7)], &pkt), 0);
    assert_eq!(go(&[s(LdAbsB, 5), s(RetK, 7)], &pkt), 0);
    assert_eq!(go(&[s(LdxImm, 2), s(LdIndH, 1), s(RetA, 0)], &pkt), 0x789a);
    assert_eq!(go(&[s(LdxImm, 2), s(LdIndH, 2), s(RetK, 7)], &pkt), 0);
    // X + k overflowing 32 bits is out of bounds, not a wrapped small offset.
    assert_eq!(go(&[s(LdxImm, u32::MAX), s(LdIndB, 2), s(RetK, 7)], &pkt), 0);
    // The captured length bounds loads even when the wire length is larger.
    let f = CbpfFilter::new(&[s(LdAbsB, 4), s(RetA, 0)]).unwrap();
    assert_eq!(f.run(&pkt[..4], 1500), 0);
}

#[test]
fn len_is_the_wire_length_and_msh_reads_the_ihl() {
    let f = CbpfFilter::new(&[s(LdLen, 0), s(LdxLen, 0), s(AddX, 0), s(RetA, 0)]).unwrap();
    assert_eq!(f.run(&[0; 10], 1514), 3028);
    assert_eq!(go(&[s(LdxMsh, 1), s(Txa, 0), s(RetA, 0)], &[0, 0x46]), 24);
    assert_eq!(go(&[s(LdxMsh, 2), s(RetK, 1)], &[0, 0x46]), 0);
}

#[test]
fn division_by_zero_x_rejects() {
    let div = [s(LdImm, 10), s(LdxImm, 0), s(DivX, 0), s(RetK, 9)];
    assert_eq!(go(&div, &[]), 0);
    let m = [s(LdImm, 10), s(LdxImm, 0), s(ModX, 0), s(RetK, 9)];
    assert_eq!(go(&m, &[]), 0);
    let ok = [s(LdImm, 10), s(LdxImm, 3), s(ModX, 0), s(RetA, 0)];
    assert_eq!(go(&ok, &[]), 1);
    // Unvalidated constant zero divisors behave like libpcap's current interpreter.
    assert_eq!(run(&[s(DivK, 0), s(RetK, 9)], &[], 0, &PacketMeta::default()), 0);
}

#[test]
fn arithmetic_wraps_in_32_bits() {
    assert_eq!(go(&[s(LdImm, u32::MAX), s(AddK, 2), s(RetA, 0)], &[]), 1);
    assert_eq!(go(&[s(SubK, 1), s(RetA, 0)], &[]), u32::MAX);
    assert_eq!(go(&[s(LdImm, 0x8000_0001), s(MulK, 2), s(RetA, 0)], &[]), 2);
    assert_eq!(go(&[s(LdImm, 1), s(Neg, 0), s(RetA, 0)], &[]), u32::MAX);
    assert_eq!(go(&[s(LdImm, 0x8000_0000), s(Neg, 0), s(RetA, 0)], &[]), 0x8000_0000);
}

#[test]
fn shifts_of_32_or_more_give_zero() {
    for amount in [32, 33, 63, 64, u32::MAX] {
        let l = [s(LdImm, 0xdefc0), s(LdxImm, amount), s(LshX, 0), s(RetA, 0)];
        let r = [s(LdImm, 0xdefc0), s(LdxImm, amount), s(RshX, 0), s(RetA, 0)];
        assert_eq!(go(&l, &[]), 0, "lsh {amount}");
        assert_eq!(go(&r, &[]), 0, "rsh {amount}");
        assert_eq!(
            run(&[s(LdImm, 1), s(LshK, amount), s(RetA, 0)], &[], 0, &PacketMeta::default()),
            0
        );
    }
    assert_eq!(go(&[s(LdImm, 0xdefc0), s(LdxImm, 9), s(LshX, 0), s(RetA, 0)], &[]), 0x1bdf_8000);
    assert_eq!(go(&[s(LdImm, 0x8000_0000), s(RshK, 31), s(RetA, 0)], &[]), 1);
}

#[test]
fn jumps_compare_unsigned() {
    let prog = |op| [s(LdImm, 0x8000_0000), j(op, 1, 0, 1), s(RetK, 1), s(RetK, 2)];
    assert_eq!(go(&prog(JgtK), &[]), 1);
    assert_eq!(go(&prog(JgeK), &[]), 1);
    assert_eq!(go(&prog(JeqK), &[]), 2);
    assert_eq!(go(&prog(JsetK), &[]), 2);
    let x = [s(LdImm, 6), s(LdxImm, 2), j(JsetX, 0, 1, 0), s(RetK, 1), s(RetK, 2)];
    assert_eq!(go(&x, &[]), 2);
    assert_eq!(go(&[s(Ja, 1), s(RetK, 1), s(RetK, 2)], &[]), 2);
}

#[test]
fn scratch_memory_is_zero_at_the_start_of_every_run() {
    let prog = [s(LdxMem, 4), s(Txa, 0), s(AddK, 1), s(St, 4), s(RetA, 0)];
    // Kernel rules refuse the read before the store; libpcap's allow it.
    assert!(CbpfFilter::new(&prog).is_err());
    let f = CbpfFilter::new_libpcap(&prog).unwrap();
    assert_eq!(f.run(&[], 0), 1);
    assert_eq!(f.run(&[], 0), 1);
}

#[test]
fn backward_ja_loops_at_most_the_libpcap_limit() {
    // M[0] counts iterations; the loop jumps back until a load fails or the limit hits.
    let prog = [
        s(LdImm, 0),
        s(St, 0),
        s(LdMem, 0), // 2: loop head
        s(AddK, 1),
        s(St, 0),
        j(JgeK, 1000, 1, 0),
        s(Ja, (2u32).wrapping_sub(7)), // 6: back to 2
        s(RetA, 0),
    ];
    let f = CbpfFilter::new_libpcap(&prog).unwrap();
    assert!(CbpfFilter::new(&prog).is_err());
    assert_eq!(f.run(&[], 0), 0, "runs out of backward jumps");
    let mut short = prog;
    short[5] = j(JgeK, 10, 1, 0);
    assert_eq!(CbpfFilter::new_libpcap(&short).unwrap().run(&[], 0), 10);
    let mut exact = prog;
    exact[5] = j(JgeK, MAX_BACKWARD_JUMPS + 1, 1, 0);
    assert_eq!(CbpfFilter::new_libpcap(&exact).unwrap().run(&[], 0), MAX_BACKWARD_JUMPS + 1);
    exact[5] = j(JgeK, MAX_BACKWARD_JUMPS + 2, 1, 0);
    assert_eq!(CbpfFilter::new_libpcap(&exact).unwrap().run(&[], 0), 0);
}

#[test]
fn unvalidated_programs_never_panic() {
    let meta = PacketMeta::default();
    assert_eq!(run(&[], &[], 0, &meta), 0);
    assert_eq!(run(&[s(LdImm, 3)], &[], 0, &meta), 0, "falls off the end");
    assert_eq!(run(&[s(St, 16), s(RetK, 1)], &[], 0, &meta), 0);
    assert_eq!(run(&[s(Ja, u32::MAX), s(RetK, 1)], &[], 0, &meta), 0);
    assert_eq!(run(&[j(JeqK, 0, 200, 200), s(RetK, 1)], &[], 0, &meta), 0);
}

#[test]
fn ancillary_loads_read_the_packet_meta() {
    let meta = PacketMeta {
        protocol: 0x0800,
        vlan_tci: 100,
        vlan_present: true,
        ifindex: 3,
        ..Default::default()
    };
    let prog = [
        s(LdAbsW, SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT),
        j(JeqK, 1, 0, 3),
        s(LdAbsH, SKF_AD_OFF + SKF_AD_VLAN_TAG),
        s(AndK, 0xfff),
        s(RetA, 0),
        s(RetK, 0),
    ];
    let f = CbpfFilter::new(&prog).unwrap();
    assert_eq!(f.run_with_meta(&[], 0, &meta), 100);
    assert_eq!(f.run(&[], 0), 0);
    assert_eq!(run(&prog, &[], 0, &meta), 100);
    // The size of the load does not cut the value, as in the kernel.
    let ifidx = [s(LdAbsB, SKF_AD_OFF + SKF_AD_IFINDEX), s(RetA, 0)];
    let big = PacketMeta { ifindex: 0x1234, ..meta };
    assert_eq!(CbpfFilter::new(&ifidx).unwrap().run_with_meta(&[], 0, &big), 0x1234);
    // Under libpcap's rules the same load is just out of bounds.
    assert_eq!(CbpfFilter::new_libpcap(&ifidx).unwrap().run_with_meta(&[], 0, &big), 0);
    let xor =
        [s(LdImm, 0xf0), s(LdxImm, 0x0f), s(LdAbsW, SKF_AD_OFF + SKF_AD_ALU_XOR_X), s(RetA, 0)];
    assert_eq!(go(&xor, &[]), 0xff);
}

#[test]
fn from_raw_names_unknown_opcodes() {
    let raw = [SockFilter::stmt(0x06, 0), SockFilter::stmt(0x0e, 0)];
    let e = CbpfFilter::from_raw(&raw, Rules::Kernel).unwrap_err();
    assert_eq!((e.index, e.kind), (1, CbpfValidateErrorKind::UnknownOpcode(0x0e)));
    let ok = CbpfFilter::from_raw(&raw[..1], Rules::Kernel).unwrap();
    assert_eq!(ok.insns().len(), 1);
    assert_eq!(ok.rules(), Rules::Kernel);
}

#[test]
fn a_fused_load_and_jump_pair_still_runs_its_jump_alone_when_entered_there() {
    let pkt = [0x08, 0x00, 0x45, 0x06];
    // ldh [0]; jeq #0x800: fused, and A keeps the loaded value for `ret a`.
    let fused = [s(LdAbsH, 0), j(JeqK, 0x800, 0, 1), s(RetA, 0), s(RetK, 9)];
    assert_eq!(go(&fused, &pkt), 0x800);
    assert_eq!(go(&fused, &[0x08]), 0);
    // 2 and 3 fuse, but 1 jumps straight to the `jeq` at 3 with A = 6 from the first load.
    let entered =
        [s(LdAbsB, 3), j(JeqK, 6, 1, 0), s(LdAbsB, 2), j(JeqK, 6, 0, 1), s(RetK, 1), s(RetK, 2)];
    assert_eq!(go(&entered, &pkt), 1);
    assert_eq!(go(&entered, &[0, 0, 0x06, 0x07]), 1);
    assert_eq!(go(&entered, &[0, 0, 0x45, 0x07]), 2);
    // Indirect loads fuse too; X + k past the packet still rejects.
    let ind = [s(LdxImm, 1), s(LdIndH, 1), j(JsetK, 0x4000, 0, 1), s(RetA, 0), s(RetK, 5)];
    assert_eq!(go(&ind, &pkt), 0x4506);
    assert_eq!(go(&ind, &pkt[..3]), 0);
    // `and #mask; jeq` fuses; A keeps the masked value.
    let net =
        [s(LdAbsW, 0), s(AndK, 0xffff_ff00), j(JeqK, 0x0800_4500, 0, 1), s(RetA, 0), s(RetK, 3)];
    assert_eq!(go(&net, &pkt), 0x0800_4500);
    assert_eq!(go(&net, &[0x08, 0x00, 0x46, 0x06]), 3);
}

/// Every conditional jump on a constant as a head, over the loads a head takes, at the edges of
/// each comparison: the same results as the checked interpreter. Only a test whose ways both
/// return is a head; the others run on the loop as before.
#[test]
fn the_head_in_line_gives_the_interpreters_results() {
    let ks = [0, 1, 0x7f, 0x80, 0x800, 0xffff, 0x1_0000, 0x8000_0000, u32::MAX - 1, u32::MAX];
    // Packets whose loads at 0 give A at and around each k, for each width; and short ones.
    let mut packets: Vec<Vec<u8>> = vec![vec![], vec![0x80], vec![0x08, 0x00], vec![0; 3]];
    for k in ks {
        for a in [k.wrapping_sub(1), k, k.wrapping_add(1)] {
            packets.push(a.to_be_bytes().to_vec());
            packets.push(a.to_be_bytes()[2..].to_vec());
            packets.push(a.to_be_bytes()[3..].to_vec());
        }
    }
    let loads = [(LdAbsW, 0), (LdAbsH, 0), (LdAbsB, 0), (LdAbsH, 1), (LdLen, 0)];
    let mut heads = 0;
    for (load, offset) in loads {
        for jump in [JeqK, JgtK, JgeK, JsetK] {
            for k in ks {
                // Ways: ret/ret, ret/on, on/ret, on/on; what goes on returns A + 1.
                for (jt, jf) in [(0, 1), (0, 2), (2, 0), (2, 3)] {
                    let prog = [
                        s(load, offset),
                        j(jump, k, jt, jf),
                        s(RetK, 7),
                        s(RetK, 9),
                        s(AddK, 1),
                        s(RetA, 0),
                    ];
                    let filter = CbpfFilter::new(&prog).unwrap();
                    // `jgt #max` never holds: then only `jf` counts.
                    let never = jump == JgtK && k == u32::MAX;
                    let returns_both_ways = (jt, jf) == (0, 1) || (never && jf == 0);
                    assert_eq!(filter.head.is_some(), returns_both_ways, "{prog:?}");
                    heads += usize::from(filter.head.is_some());
                    for packet in &packets {
                        for wire in [packet.len() as u32, k, k.wrapping_add(1), u32::MAX] {
                            let want = run(&prog, packet, wire, &PacketMeta::default());
                            assert_eq!(filter.run(packet, wire), want, "{prog:?} on {packet:?}");
                        }
                    }
                }
            }
        }
    }
    assert_eq!(heads, 5 * 4 * 10 + 5);
}

/// Only a first test of a loaded value whose ways both land on `ret #k` is a head.
#[test]
fn the_head_is_a_first_test_returning_either_way() {
    let head = |prog: &[CbpfInsn]| CbpfFilter::new(prog).unwrap().head;
    let ip = [s(LdAbsH, 12), j(JeqK, 0x800, 0, 1), s(RetK, 96), s(RetK, 0)];
    assert_eq!(
        head(&ip),
        Some(Head {
            load: HeadLoad::Half(12),
            mask: u32::MAX,
            low: 0x800,
            span: 0,
            returns: [0, 96],
        })
    );
    let jset = [s(LdAbsB, 20), j(JsetK, 0x40, 0, 1), s(RetK, 1), s(RetK, 2)];
    assert_eq!(
        head(&jset),
        Some(Head { load: HeadLoad::Byte(20), mask: 0x40, low: 0, span: 0, returns: [1, 2] })
    );
    let greater = [s(LdLen, 0), j(JgeK, 100, 0, 1), s(RetK, 1), s(RetK, 0)];
    assert_eq!(
        head(&greater).map(|h| (h.load, h.low, h.span, h.returns)),
        Some((HeadLoad::Len, 100, u32::MAX - 100, [0, 1]))
    );
    // Not a head: a way that goes on, no jump after the load, a load from X, a jump first.
    assert_eq!(head(&[s(LdAbsB, 20), j(JsetK, 0x40, 1, 0), s(RetK, 1), s(RetA, 0)]), None);
    assert_eq!(head(&[s(LdAbsH, 12), s(RetA, 0)]), None);
    assert_eq!(head(&[s(LdLen, 0), s(AddK, 1), s(RetA, 0)]), None);
    assert_eq!(head(&[s(LdIndB, 0), j(JeqK, 1, 0, 1), s(RetK, 1), s(RetK, 0)]), None);
    assert_eq!(head(&[j(JeqK, 0, 0, 1), s(RetK, 1), s(RetK, 0)]), None);
}

/// Chains of `jeq` on one A to one place (libpcap's `vlan`, host sets) run two links a
/// dispatch: every
/// way out of every link, and entries in the middle of a chain, give the checked
/// interpreter's results.
#[test]
fn chained_jeqs_give_the_interpreters_results() {
    // ldb [1]; jeq #9 (true: ldb [0] and the whole chain on byte 0; false: into the chain's
    // second link, on byte 1); the chain jeq #1, #2, #3, #4, each true way to `ret #100`,
    // the last false way to `ret a`.
    let mut prog = vec![s(LdAbsB, 1), j(JeqK, 9, 0, 2), s(LdAbsB, 0)];
    prog.extend((1..=4).map(|k| j(JeqK, k, 5 - k as u8, 0)));
    prog.extend([s(RetA, 0), s(RetK, 100)]);
    let filter = CbpfFilter::new(&prog).unwrap();
    let chained = filter.code.iter().filter(|op| matches!(op, Op::JeqOr(..))).count();
    // Links #1-#3 (the last one's false way returns; jeq #9's ways differ from #2's).
    assert_eq!(chained, 3, "{:?}", filter.code);
    // Each link's false way skips the next link, which it tested already.
    assert_eq!(filter.code[3], Op::JeqOr(1, 2, 8, 5));
    for a in 0..=6u8 {
        for b in [0u8, 1, 2, 3, 4, 5, 6, 9] {
            let pkt = [a, b];
            let want = run(&prog, &pkt, 2, &PacketMeta::default());
            assert_eq!(filter.run(&pkt, 2), want, "{pkt:?}");
            let chain = if b == 9 { 1..=4 } else { 2..=4 };
            let tested = if b == 9 { a } else { b };
            let expect = if chain.contains(&tested) { 100 } else { u32::from(tested) };
            assert_eq!(want, expect, "{pkt:?}");
        }
    }
    // A jeq whose false way lands on a return, on another kind of test, or on a jeq with
    // another true way stays alone.
    let alone = [s(LdAbsB, 0), j(JeqK, 1, 1, 0), j(JgtK, 2, 0, 1), s(RetK, 1), s(RetK, 0)];
    let filter = CbpfFilter::new(&alone).unwrap();
    assert!(!filter.code.iter().any(|op| matches!(op, Op::JeqOr(..))), "{:?}", filter.code);
    let apart =
        [s(LdAbsB, 0), j(JeqK, 1, 2, 0), j(JeqK, 2, 2, 0), s(RetA, 0), s(RetK, 11), s(RetK, 12)];
    let filter = CbpfFilter::new(&apart).unwrap();
    assert!(!filter.code.iter().any(|op| matches!(op, Op::JeqOr(..))), "{:?}", filter.code);
    for a in 0..4u8 {
        assert_eq!(go(&apart, &[a]), [0, 11, 12, 3][usize::from(a)], "{a}");
    }
}

/// The decoded form stays 16 bytes an instruction: the chained test fits beside the fused
/// pairs.
#[test]
fn a_decoded_instruction_is_16_bytes() {
    assert_eq!(std::mem::size_of::<Op>(), 16);
}
