//! The match language: the issue's example, the pfmatch inconsistency weir fixes, `&`,
//! and every bad-input message with its caret.

use weir_pflang::names::NameDb;
use weir_pflang::LinkType;
use weir_pfmatch::{parse, Dispatch, Outcome, Program};

const ISSUE_EXAMPLE: &str = "\
# The issue's example.
match {
   not ip => forward
   ip src 1.2.3.4 => {
      tcp => incoming_tcp(&ip[0], &tcp[0])
      udp => incoming_udp(&ip[0], &udp[0])   # comments anywhere
      otherwise => incoming_ip(&ip[0])
   }
   ip dst 5.6.7.8 => outgoing(ip[2:2] - ((ip[0] & 0xf) << 2))
   otherwise => drop
}
";

fn program(src: &str) -> Program {
    parse(src, LinkType::Ethernet, &NameDb::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

fn error(src: &str) -> String {
    match parse(src, LinkType::Ethernet, &NameDb::builtin()) {
        Ok(_) => panic!("accepted: {src}"),
        Err(e) => e.render(),
    }
}

/// An Ethernet + IPv4 (IHL 5, or 6 with options) + TCP/UDP frame.
fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, ihl: u8, total: usize) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12] = 0x08;
    let mut ip = vec![0u8; usize::from(ihl) * 4];
    ip[0] = 0x40 | ihl;
    ip[2..4].copy_from_slice(&u16::try_from(total).unwrap().to_be_bytes());
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    p.extend(ip);
    p.resize(14 + total, 0);
    p
}

fn run(p: &Program, pkt: &[u8]) -> (Option<String>, Vec<u32>) {
    let wire = u32::try_from(pkt.len()).unwrap();
    let reference = p.reference(pkt, wire);
    let compiled = Dispatch::compile(p).unwrap().run(pkt, wire);
    assert_eq!(compiled, reference);
    let Outcome { handler, args } = reference;
    (handler.map(|h| p.handlers[h].clone()), args)
}

#[test]
fn issue_example_dispatches() {
    let p = program(ISSUE_EXAMPLE);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let tcp = ipv4([1, 2, 3, 4], [9, 9, 9, 9], 6, 6, 60);
    assert_eq!(run(&p, &tcp), (Some("incoming_tcp".into()), vec![14, 14 + 24]));
    let udp = ipv4([1, 2, 3, 4], [9, 9, 9, 9], 17, 5, 40);
    assert_eq!(run(&p, &udp), (Some("incoming_udp".into()), vec![14, 34]));
    let icmp = ipv4([1, 2, 3, 4], [9, 9, 9, 9], 1, 5, 40);
    assert_eq!(run(&p, &icmp), (Some("incoming_ip".into()), vec![14]));
    // ip dst 5.6.7.8: the payload length, 100 - 24.
    let out = ipv4([7, 7, 7, 7], [5, 6, 7, 8], 6, 6, 100);
    assert_eq!(run(&p, &out), (Some("outgoing".into()), vec![76]));
    let other = ipv4([7, 7, 7, 7], [8, 8, 8, 8], 6, 5, 40);
    assert_eq!(run(&p, &other), (Some("drop".into()), vec![]));
    let arp = {
        let mut a = vec![0u8; 42];
        a[12] = 0x08;
        a[13] = 0x06;
        a
    };
    assert_eq!(run(&p, &arp), (Some("forward".into()), vec![]));
    // `&tcp[0]` of a truncated packet: the address needs the IP header (for its length)
    // only, not the TCP byte.
    let cut = &tcp[..14 + 24];
    assert_eq!(run(&p, cut), (Some("incoming_tcp".into()), vec![14, 38]));
}

/// pfmatch's own inconsistency: `ip[100000] = 0 or 1 = 1` aborts as a filter, so it
/// matches nothing here either, and dispatch moves on.
#[test]
fn an_abort_fails_the_clause_as_pflang_would() {
    let p = program("match {\n ip[100000] = 0 or 1 = 1 => far\n ip => near\n}");
    let pkt = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 6, 5, 40);
    assert_eq!(run(&p, &pkt), (Some("near".into()), vec![]));
    // The nested match has no fall-through: no clause inside means no handler.
    let p = program("match { ip => { udp => u } \n otherwise => o }");
    assert_eq!(run(&p, &pkt), (None, vec![]));
    // An argument out of bounds fails the clause; the next one gets the packet.
    let p = program("match { ip => h(ip[100000]) \n ip => h(ip[9]) }");
    assert_eq!(run(&p, &pkt), (Some("h".into()), vec![6]));
    // An argument whose protocol check fails: likewise.
    let p = program("match { ip => h(udp[0]) \n otherwise => h(len) }");
    assert_eq!(run(&p, &pkt), (Some("h".into()), vec![54]));
}

#[test]
fn bad_input_is_reported_with_a_caret() {
    let e = error("match {\n  tcp => a\n  otherwise => b\n  otherwise => c\n}");
    assert!(
        e.starts_with("line 4: error at column 3: a second `otherwise`; the first is on line 3"),
        "{e}"
    );
    assert!(e.contains("\n    otherwise => c\n    ^^^^^^^^^"), "{e}");

    let e = error("match {\n  tcp and hostt 1.2.3.4 => a\n}");
    assert!(e.starts_with("line 2: error at column"), "{e}");
    assert!(e.contains("  tcp and hostt 1.2.3.4 => a\n"), "{e}");

    let e = error("match {\n  tcp => a(tcp[0] +)\n}");
    assert!(e.starts_with("line 2: "), "{e}");
    let e = error("match {\n  tcp => a(&len)\n}");
    assert!(e.contains("`&` takes a packet accessor"), "{e}");
    let e = error("match {\n  tcp => a(tcp[0]\n}");
    assert!(e.contains("never closed"), "{e}");
    let e = error("match {\n  tcp => a\n  udp => a(len)\n}");
    assert!(e.contains("takes 0 argument(s) elsewhere, 1 here"), "{e}");
    let e = error("match {\n  tcp a\n}");
    assert!(e.contains("expected `=>` after the test"), "{e}");
    let e = error("match {\n  tcp => a\n");
    assert!(e.contains("expected `}`"), "{e}");
    let e = error("tcp => a");
    assert!(e.contains("expected `match {`"), "{e}");
    let e = error("match { => a }");
    assert!(e.contains("expected a test before `=>`"), "{e}");
    let e = error("match { tcp => }");
    assert!(e.contains("expected a handler name"), "{e}");
    let e = error("match { tcp => a } trailing");
    assert!(e.contains("unexpected text after"), "{e}");
    let e = error("match { tcp => a(len / 0) }");
    assert!(e.contains("division by zero"), "{e}");
    // Bytes that are not ASCII must not break the caret or panic.
    let e = error("match {\n  tcp => ä\n}");
    assert!(e.contains("expected a handler name"), "{e}");
}

#[test]
fn unreachable_clauses_are_warned_about() {
    let p = program("match {\n  otherwise => a\n  tcp => b\n}");
    assert_eq!(p.warnings.len(), 1);
    let w = p.warnings[0].to_string();
    assert!(w.starts_with("line 3: warning at column 3: unreachable clause"), "{w}");
    let p = program("match {\n  tcp => a\n  tcp => b\n  udp => c(udp[0])\n  udp => d\n}");
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(p.warnings[0].to_string().contains("same test on line 2"));
}

/// The warnings' texts, one per warned clause.
fn warnings(src: &str) -> Vec<String> {
    program(src).warnings.iter().map(ToString::to_string).collect()
}

/// Clauses whose tests differ in text but that the clauses before them leave no packet:
/// found by the optimizer, as the whole dispatch is, and named with the clause that
/// catches their packets.
#[test]
fn clauses_that_earlier_ones_cover_are_warned_about() {
    let w = warnings("match {\n  tcp => a\n  tcp port 80 => b\n}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("line 3: warning at column 3: unreachable clause: the clause on line 2 catches every packet it matches first"), "{w:?}");
    // Two clauses together, neither alone.
    let w = warnings("match {\n  ip => a\n  ip6 => b\n  ip or ip6 => c\n}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("the clauses before it catch every packet"), "{w:?}");
    // A nested list entered only by TCP packets.
    let w = warnings("match {\n  tcp => {\n    udp => a\n    otherwise => b\n  }\n}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("line 3: warning")
            && w[0].contains("the tests around it leave it no packet"),
        "{w:?}"
    );
    // A clause before the nested one passes over what it would have matched.
    let w = warnings("match {\n  tcp => a\n  ip => {\n    tcp => b\n    otherwise => c\n  }\n}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("line 4: warning"), "{w:?}");
    // A nested match ends dispatch whether or not a clause inside it matched.
    let w = warnings("match {\n  tcp => {\n    port 80 => a\n  }\n  tcp port 80 => b\n}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("the clause on line 2"), "{w:?}");
}

/// No warning where a packet can reach the clause: an earlier test that aborts on a short
/// packet fails alone (dispatch moves on), an earlier clause whose arguments can fail does
/// not catch its packets, and `otherwise` after a test and its negation still gets the
/// packets too short for both.
#[test]
fn reachable_clauses_are_not_warned_about() {
    for src in [
        "match {\n  ip[100] = 1 or ip[100] != 1 => a\n  ip => b\n}",
        "match {\n  tcp port 80 => a\n  tcp => b\n}",
        "match {\n  tcp => a(tcp[100])\n  tcp port 80 => b\n}",
        "match {\n  ip => a\n  not ip => b\n  otherwise => c\n}",
        ISSUE_EXAMPLE,
    ] {
        assert_eq!(warnings(src), Vec::<String>::new(), "{src}");
    }
}

#[test]
fn nothing_in_a_comment_is_read() {
    let p = program("match { # { => x(\n  tcp => a # } otherwise => b\n}");
    assert_eq!(p.handlers, vec!["a".to_string()]);
}

/// Mutated programs (characters deleted, inserted and replaced, multi-byte ones among
/// them) are parsed or refused, never a panic, and every error renders with its line.
#[test]
fn mutated_programs_never_panic() {
    let alphabet: Vec<char> =
        "{}()[]=>#&,:\n \tmatchotherwiseiptcp0123456789+-*/<>!äé€".chars().collect();
    let mut rng = weir_testkit::SplitMix64::new(0x15);
    let names = NameDb::builtin();
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..4000 {
        let mut chars: Vec<char> = ISSUE_EXAMPLE.chars().collect();
        for _ in 0..1 + rng.below_usize(4) {
            let at = rng.below_usize(chars.len() + 1);
            let c = alphabet[rng.below_usize(alphabet.len())];
            match rng.below(3) {
                0 if at < chars.len() => {
                    chars.remove(at);
                }
                1 if at < chars.len() => chars[at] = c,
                _ => chars.insert(at, c),
            }
        }
        let src: String = chars.into_iter().collect();
        match parse(&src, LinkType::Ethernet, &names) {
            Ok(p) => {
                ok += 1;
                let d = Dispatch::compile(&p).unwrap();
                let pkt = ipv4([1, 2, 3, 4], [5, 6, 7, 8], 6, 5, 40);
                assert_eq!(d.run(&pkt, 54), p.reference(&pkt, 54), "{src}");
            }
            Err(e) => {
                refused += 1;
                let r = e.render();
                assert!(r.starts_with(&format!("line {}: error at column ", e.line)), "{r}");
                assert!(src.lines().any(|l| l == e.line_text) || e.line_text.is_empty(), "{r}");
            }
        }
    }
    assert!(ok > 100 && refused > 100, "{ok} parsed, {refused} refused");
}

/// Header tests shared across clauses (a dispatch on the EtherType, then the IP protocol)
/// keep the clause-by-clause meaning on packets cut at every length: a packet too short
/// for the second field (a 20-byte ARP frame) still reaches the clause whose test fits in
/// it. (Optimized alone, a branch of that dispatch once turned `try(guard(24))` into an
/// aborting `guard(24)` that rejected such packets.)
#[test]
fn shared_header_tests_keep_short_packets() {
    let src = "match {\n ip and tcp => a(tcp[13])\n ip and udp => b\n arp => c\n \
               ip6 and udp port 53 => d\n icmp => e\n}\n";
    let p = program(src);
    let shared = Dispatch::compile(&p).unwrap();
    let unshared = Dispatch::compile_with(&p, 0).unwrap();
    assert_ne!(shared.filter(), unshared.filter(), "nothing was shared");
    let mut frames: Vec<Vec<u8>> = Vec::new();
    for (ethertype, proto_at, proto) in
        [(0x0806u16, 23, 0u8), (0x0800, 23, 6), (0x0800, 23, 17), (0x0800, 23, 1), (0x86dd, 20, 17)]
    {
        let mut f = vec![0u8; 80];
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f[14] = if ethertype == 0x86dd { 0x60 } else { 0x45 };
        f[proto_at] = proto;
        f[54..56].copy_from_slice(&53u16.to_be_bytes());
        frames.push(f);
    }
    let mut seen = std::collections::BTreeSet::new();
    for f in &frames {
        for len in 0..=f.len() {
            let pkt = &f[..len];
            let want = p.reference(pkt, 80);
            assert_eq!(shared.run(pkt, 80), want, "shared, {len} bytes of {f:02x?}");
            assert_eq!(unshared.run(pkt, 80), want, "unshared, {len} bytes of {f:02x?}");
            seen.insert(want.handler);
        }
    }
    // Every handler and no handler were reached: the test covers each branch.
    assert_eq!(seen.len(), 6, "{seen:?}");
    let arp20 = &frames[0][..20];
    assert_eq!(shared.run(arp20, 20).handler.map(|h| p.handlers[h].as_str()), Some("c"));
}
