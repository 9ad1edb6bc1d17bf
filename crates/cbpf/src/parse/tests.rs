//! Tests of the readers: hand-written inputs for every error, round trips through
//! `weir-isa`'s printers for random programs, and real `tcpdump` output when it is installed.

use super::*;
use proptest::prelude::*;
use weir_isa::cbpf::{encode, encode_bytes, format_dd, format_ddd, format_listing, CbpfOp};

const LISTING: &str = "\
(000) ldh      [12]
(001) jeq      #0x800           jt 2\tjf 5
(002) ldb      [23]
(003) jeq      #0x6             jt 4\tjf 5
(004) ret      #262144
(005) ret      #0
";

#[test]
fn listing_reads_what_tcpdump_prints() {
    let prog = parse(LISTING.as_bytes(), Format::Listing).unwrap();
    assert_eq!(prog.len(), 6);
    assert_eq!(prog[1], CbpfInsn::jump(CbpfOp::JeqK, 0x800, 0, 3));
    assert_eq!(format_listing(&prog), LISTING);
    assert_eq!(parse(LISTING.as_bytes(), Format::Auto).unwrap(), prog);
}

#[test]
fn listing_as_an_assembler() {
    let text = "ldh [12] ; EtherType\n\njeq #2048 jt 2 jf 3\nret #-1\nret #0\nld [x + 4]\nldxb 4*([14]&0xf)\nld [ifidx]\nret\n";
    let prog = parse(text.as_bytes(), Format::Auto).unwrap();
    assert_eq!(prog[2], CbpfInsn::stmt(CbpfOp::RetK, u32::MAX));
    assert_eq!(prog[4], CbpfInsn::stmt(CbpfOp::LdIndW, 4));
    assert_eq!(prog[5], CbpfInsn::stmt(CbpfOp::LdxMsh, 14));
    assert_eq!(prog[6], CbpfInsn::stmt(CbpfOp::LdAbsW, SKF_AD_OFF + 8));
    assert_eq!(prog[7], CbpfInsn::stmt(CbpfOp::RetA, 0));
}

#[test]
fn listing_errors_name_the_line() {
    let cases: &[(&str, usize, &str)] = &[
        ("ret #0\nfrob #1\n", 2, "unknown mnemonic \"frob\""),
        ("ld x\n", 1, "ld does not take the operand \"x\""),
        ("ret #0\n(005) ret #0\n", 2, "line is numbered (5), expected (1)"),
        ("jeq #1 jt 0 jf 1\nret #0\n", 1, "jt target 0 is not after instruction 0"),
        ("jeq #1 jt 1 jf 300\n", 1, "jf target 300"),
        ("jeq #1\n", 1, "expected `jt N jf M`"),
        ("ret #0 jt 1 jf 1\n", 1, "no jump targets"),
        ("ld #0x100000000\n", 1, "\"0x100000000\" is not a number that fits in 32 bits"),
        ("ret #4294967296\n", 1, "\"4294967296\" is not a number that fits in 32 bits"),
        ("ldb [0x1ffffffff]\n", 1, "not a number that fits in 32 bits"),
        ("   \n", 0, "no instructions"),
    ];
    for &(text, line, want) in cases {
        let e = parse(text.as_bytes(), Format::Listing).unwrap_err();
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.to_string().contains(want), "{text:?}: {e}");
    }
}

#[test]
fn record_formats_and_their_errors() {
    let dd = "{ 0x28, 0, 0, 0x0000000c },\n{ 0x6, 0, 0, 0x00040000 },\n";
    let ddd = "2\n40 0 0 12\n6 0 0 262144\n";
    let a = parse(dd.as_bytes(), Format::Auto).unwrap();
    assert_eq!(parse(ddd.as_bytes(), Format::Auto).unwrap(), a);
    assert_eq!(parse(&encode_bytes(&a), Format::Auto).unwrap(), a);
    let e = parse(b"3\n40 0 0 12\n6 0 0 0\n", Format::Decimal).unwrap_err();
    assert_eq!((e.line, e.kind), (1, CbpfParseErrorKind::CountMismatch { declared: 3, found: 2 }));
    let e = parse(b"{ 0x28, 0, 0, 12 },\n{ 0x0e, 0, 0, 0 },\n", Format::CArray).unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.to_string().contains("unknown classic BPF opcode 0x0e"), "{e}");
    let e = parse(b"{ 0x28, 0, 0 },\n", Format::CArray).unwrap_err();
    assert!(e.to_string().starts_with("line 1: expected four fields"), "{e}");
    let e = parse(b"1\n40 0 256 12\n", Format::Decimal).unwrap_err();
    assert_eq!(e.line, 2);
    let e = parse(&[6, 0, 0, 0, 0, 0, 0, 0, 1], Format::Raw).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.to_string().contains("trailing bytes"), "{e}");
    let e = parse(&[0xff, 0xfe, 0, 0, 0, 0, 0, 0], Format::Listing).unwrap_err();
    assert_eq!(e.kind, CbpfParseErrorKind::NotText);
}

/// An instruction the listing can carry exactly: fields the operation does not read are 0.
fn printable_insn() -> impl Strategy<Value = CbpfInsn> {
    (0..CBPF_OPCODES.len(), any::<u8>(), any::<u8>(), any::<u32>()).prop_map(|(row, jt, jf, k)| {
        let spec = &CBPF_OPCODES[row];
        let k = if spec.operand.uses_k() { k } else { 0 };
        if spec.op.is_conditional_jump() {
            CbpfInsn::jump(spec.op, k, jt, jf)
        } else {
            CbpfInsn::stmt(spec.op, k)
        }
    })
}

proptest! {
    #[test]
    fn every_format_round_trips_through_the_printers(
        prog in proptest::collection::vec(printable_insn(), 1..30)
    ) {
        let raw = encode(&prog);
        prop_assert_eq!(parse(format_listing(&prog).as_bytes(), Format::Listing).unwrap(), prog.clone());
        prop_assert_eq!(parse(format_listing(&prog).as_bytes(), Format::Auto).unwrap(), prog.clone());
        prop_assert_eq!(parse(format_dd(&raw).as_bytes(), Format::Auto).unwrap(), prog.clone());
        prop_assert_eq!(parse(format_ddd(&raw).as_bytes(), Format::Auto).unwrap(), prog.clone());
        prop_assert_eq!(parse(&encode_bytes(&prog), Format::Raw).unwrap(), prog.clone());
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), f in 0..5usize) {
        let format = [Format::Listing, Format::CArray, Format::Decimal, Format::Raw, Format::Auto][f];
        let _ = parse(&bytes, format);
    }

    #[test]
    fn parse_never_panics_on_text(text in "[ -~\n\t]{0,200}") {
        for format in [Format::Listing, Format::CArray, Format::Decimal, Format::Auto] {
            let _ = parse(text.as_bytes(), format);
        }
    }
}

#[test]
fn reads_real_tcpdump_output() {
    let filters = [
        "ip and tcp port 80",
        "ip6 protochain 17",
        "vlan 100 and udp",
        "inbound",
        "len % (ip[1] & 3) = 1",
    ];
    for filter in filters {
        let mut outputs = Vec::new();
        for flag in ["-d", "-dd", "-ddd"] {
            let out = match std::process::Command::new("tcpdump")
                .args(["-y", "EN10MB", flag, filter])
                .output()
            {
                Ok(out) if out.status.success() => out.stdout,
                Ok(out) => {
                    panic!("tcpdump {flag} {filter:?}: {}", String::from_utf8_lossy(&out.stderr))
                }
                Err(e) => {
                    println!("SKIPPED: reads_real_tcpdump_output: tcpdump not runnable: {e}");
                    return;
                }
            };
            outputs.push(out);
        }
        let listing =
            parse(&outputs[0], Format::Auto).unwrap_or_else(|e| panic!("{filter:?} -d: {e}"));
        let dd = parse(&outputs[1], Format::Auto).unwrap_or_else(|e| panic!("{filter:?} -dd: {e}"));
        let ddd =
            parse(&outputs[2], Format::Auto).unwrap_or_else(|e| panic!("{filter:?} -ddd: {e}"));
        assert_eq!(dd, ddd, "{filter:?}");
        // The listing cannot carry what an operation does not read (libpcap leaves a stale
        // k in `tax`), so compare with those fields cleared.
        let readable: Vec<CbpfInsn> = dd
            .iter()
            .map(|i| CbpfInsn { k: if i.op.operand().uses_k() { i.k } else { 0 }, ..*i })
            .collect();
        assert_eq!(listing, readable, "{filter:?}");
        assert_eq!(format_listing(&listing).as_bytes(), &outputs[0][..], "{filter:?}");
    }
}
