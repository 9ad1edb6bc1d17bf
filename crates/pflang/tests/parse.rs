//! Parser unit and property tests: precedence, inheritance, keywords, errors with carets,
//! print/parse round trip, and no panic or stack overflow on any input.

use proptest::prelude::*;
use weir_pflang::ast::*;
use weir_pflang::parse;

fn p(e: &str) -> Expr {
    match parse(e) {
        Ok(Some(x)) => x,
        Ok(None) => panic!("{e:?} parsed as empty"),
        Err(err) => panic!("{}", err.render(e)),
    }
}

fn prim(e: &Expr) -> &Primitive {
    match &e.kind {
        ExprKind::Primitive(p) => p,
        k => panic!("not a primitive: {k:?}"),
    }
}

#[test]
fn and_or_equal_precedence_left_to_right() {
    let e = p("tcp or udp and icmp");
    let ExprKind::Chain { first, rest } = &e.kind else { panic!("{e:?}") };
    assert_eq!(first.kind, ExprKind::Proto(Proto::Tcp));
    assert_eq!(rest.len(), 2);
    assert_eq!(rest[0].0, BoolOp::Or);
    assert_eq!(rest[1].0, BoolOp::And);
    assert_eq!(e.to_string(), "(tcp or udp and icmp)");
    // Explicit grouping on the right is a different tree.
    assert_ne!(p("tcp or (udp and icmp)").normalized(), e.normalized());
    assert_eq!(p("(tcp or udp) and icmp").to_string(), "((tcp or udp) and icmp)");
}

#[test]
fn not_binds_tighter_than_and() {
    let e = p("not tcp and udp");
    let ExprKind::Chain { first, .. } = &e.kind else { panic!() };
    assert!(matches!(first.kind, ExprKind::Not(_)));
    assert_eq!(p("! tcp && udp").normalized(), e.normalized());
}

#[test]
fn qualifier_inheritance() {
    let e = p("host 10.0.0.1 and 10.0.0.2");
    let ExprKind::Chain { rest, .. } = &e.kind else { panic!() };
    let b = prim(&rest[0].1);
    assert!(b.inherited);
    assert_eq!(b.qual.addr, Some(AddrKind::Host));
    assert_eq!(b.id, Id::Ipv4("10.0.0.2".into()));
    assert_eq!(e.to_string(), "(host 10.0.0.1 and host 10.0.0.2)");
    assert_eq!(p("tcp port 80 or 443").to_string(), "(tcp port 80 or tcp port 443)");
    assert_eq!(p("host a and not b").to_string(), "(host a and (not host b))");
    assert_eq!(p("not host a and b").to_string(), "((not host a) and host b)");
    // A parenthesised term passes on what was in effect before it.
    assert_eq!(p("host a and (port 1) and b").to_string(), "(host a and port 1 and host b)");
    assert_eq!(p("port (80 or 443)").to_string(), "(port 80 or port 443)");
    // Nothing to inherit: errors, as in libpcap.
    for bad in ["tcp or 80", "(host a) and b", "len > 1 or foo", "(tcp or foo)"] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn arithmetic_precedence() {
    let s = |e: &str| p(e).to_string();
    assert_eq!(s("len + 2 * 3 = 0"), "((len + (2 * 3)) = 0)");
    assert_eq!(s("len | 1 & 2 = 0"), "((len | (1 & 2)) = 0)");
    assert_eq!(s("len << 1 + 2 = 0"), "((len << (1 + 2)) = 0)");
    assert_eq!(s("len - 1 - 2 = 0"), "(((len - 1) - 2) = 0)");
    // `%` and `^` have no precedence in the grammar of record: always shifted.
    assert_eq!(s("len + 2 % 3 + 4 = 0"), "((len + (2 % (3 + 4))) = 0)");
    assert_eq!(s("len ^ 1 + 2 = 0"), "((len ^ (1 + 2)) = 0)");
    assert_eq!(s("-len % 3 = 0"), "((-(len % 3)) = 0)");
    assert_eq!(s("-len + 3 = 0"), "(((-len) + 3) = 0)");
    assert_eq!(s("tcp[13:1] & 2 != 0"), "((tcp[13:1] & 2) != 0)");
    assert_eq!(s("ip[2:2] > 576"), "(ip[2:2] > 576)");
}

#[test]
fn named_constants_and_numbers() {
    assert_eq!(p("tcp[tcpflags] & tcp-syn != 0").to_string(), "((tcp[13:1] & 2) != 0)");
    assert_eq!(p("icmp[icmptype] = icmp-echo").to_string(), "(icmp[0:1] = 8)");
    assert_eq!(p("icmp6[icmp6type] = icmp6-echo").to_string(), "(icmp6[0:1] = 128)");
    assert_eq!(p("0x10 = 020").to_string(), "(16 = 16)");
    assert!(parse("port 08").is_err());
    assert!(parse("port 4294967296").is_err());
}

#[test]
fn ids() {
    let id = |e: &str| prim(&p(e)).id.clone();
    assert_eq!(id("net 10.0.0.0/8"), Id::Ipv4Cidr("10.0.0.0".into(), 8));
    assert_eq!(id("net 10.1"), Id::Ipv4("10.1".into()));
    assert_eq!(
        id("net 10.0.0.0 mask 255.0.0.0"),
        Id::Ipv4Mask("10.0.0.0".into(), "255.0.0.0".into())
    );
    assert_eq!(id("host ::1"), Id::Ipv6("::1".parse().unwrap()));
    assert_eq!(id("net fe80::/10"), Id::Ipv6Cidr("fe80::".parse().unwrap(), 10));
    let mac = Id::Mac([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    assert_eq!(id("ether host aa:bb:cc:dd:ee:ff"), mac);
    assert_eq!(id("ether host aa-bb-cc-dd-ee-ff"), mac);
    assert_eq!(id("ether host aabb.ccdd.eeff"), mac);
    assert_eq!(id("portrange 1-1024"), Id::Name("1-1024".into()));
    assert_eq!(id("ip proto \\tcp"), Id::Name("tcp".into()));
    assert_eq!(id("host $1a"), Id::Arcnet("1a".into()));
    assert_eq!(id("host $5"), Id::Arcnet("5".into()));
    assert_eq!(id("port 80"), Id::Num(80));
    // The scanner's longest match makes these names, hence errors in arithmetic.
    assert!(parse("ip[1-1] > 0").is_err());
    assert!(parse("len-1 > 0").is_err());
}

#[test]
fn keywords_parse() {
    for e in [
        "less 10",
        "greater 10",
        "broadcast",
        "ether multicast",
        "ip6 multicast",
        "ip broadcast",
        "gateway foo",
        "vlan",
        "vlan 10",
        "vlan (10)",
        "mpls 3",
        "pppoed",
        "pppoes 1",
        "geneve 5",
        "vxlan",
        "vxlan 42",
        "llc",
        "llc i",
        "llc rnr",
        "ifname eth0",
        "on eth0",
        "rnr 1",
        "rulenum 1",
        "srnr 2",
        "reason match",
        "reason 3",
        "rset r",
        "action pass",
        "type mgt",
        "type data subtype 4",
        "wlan subtype beacon",
        "dir nods",
        "direction 1",
        "wlan addr1 aa:bb:cc:dd:ee:ff",
        "wlan ra host aa:bb:cc:dd:ee:ff",
        "inbound",
        "outbound",
        "ifindex 3",
        "byte 1 & 2",
        "lane",
        "oam",
        "vpi 1",
        "vci > 3",
        "vpi (1 or 2)",
        "fisu",
        "sio 3",
        "ip protochain 6",
        "src or dst host a",
        "dst and src net 10",
        "decnet src 1.2",
        "atalk",
        "iso",
        "isis",
        "es-is",
        "is-is",
        "clnp",
        "stp",
        "ipx",
        "netbeui",
        "radio[0] = 1",
        "ppp",
        "slip[0] = 1",
        "fddi host aa:bb:cc:dd:ee:ff",
        "tr",
        "link",
        "carp",
        "vrrp",
    ] {
        let ast = p(e);
        let again = p(&ast.to_string());
        assert_eq!(again.normalized(), ast.normalized(), "{e} -> {ast}");
    }
    assert!(parse("").unwrap().is_none());
    assert!(parse("  \t ").unwrap().is_none());
}

#[test]
fn spans_cover_source() {
    let src = "host 10.0.0.1 and port 80";
    let e = p(src);
    assert_eq!(e.span, Span::new(0, src.len()));
    let ExprKind::Chain { first, rest } = &e.kind else { panic!() };
    assert_eq!(&src[first.span.start..first.span.end], "host 10.0.0.1");
    assert_eq!(&src[rest[0].1.span.start..rest[0].1.span.end], "port 80");
    assert_eq!(prim(first).id_span, Span::new(5, 13));
}

#[test]
fn errors_point_with_a_caret() {
    let src = "tcp and port";
    let err = parse(src).unwrap_err();
    assert_eq!(err.span.start, src.len());
    let r = err.render(src);
    assert!(r.contains("expected"), "{r}");
    assert!(r.ends_with(&format!("  {}^", " ".repeat(src.len()))), "{r}");
    let err = parse("ip[0:3] = 1").unwrap_err();
    assert!(err.message.contains("1, 2 or 4"), "{}", err.message);
    assert_eq!(err.span, Span::new(5, 6));
    let err = parse("host a and (b or port 80)").unwrap_err();
    assert!(err.render("host a and (b or port 80)").contains('^'));
}

#[test]
fn nesting_bombs_return_errors_or_parse_flat() {
    for n in [1_000usize, 100_000] {
        // Redundant parentheses, `not` runs, unary minus runs and `+` chains cost no depth
        // (tcpdump accepts about 10,000 of each; weir any number).
        let deep = format!("{}tcp{}", "(".repeat(n), ")".repeat(n));
        assert!(parse(&deep).is_ok(), "{n} parentheses");
        let nots = format!("{}tcp", "not ".repeat(n));
        assert!(parse(&nots).is_ok(), "{n} nots");
        let arith = format!("{}len{} > 0", "(".repeat(n), ")".repeat(n));
        assert!(parse(&arith).is_ok(), "{n} arithmetic parentheses");
        let neg = format!("{}len > 0", "-".repeat(n));
        assert!(parse(&neg).is_ok(), "{n} minus signs");
        let chain = format!("len{} > 0", " + 1".repeat(n));
        assert!(parse(&chain).is_ok(), "{n} additions");
        // `%` cannot be regrouped: each operator is a level, past the limit an error.
        let modc = format!("len{} > 0", " % 1".repeat(n));
        assert!(parse(&modc).is_err(), "{n} remainders");
    }
    // Real nesting past the limit is an error, not a stack overflow.
    let n = weir_pflang::MAX_DEPTH + 10;
    let nested = format!("{}tcp{}", "not (".repeat(n), ")".repeat(n));
    assert!(parse(&nested).is_err());
    // Long flat chains are fine: they are lists, not deep trees.
    let many = vec!["port 1"; 20_000].join(" or ");
    assert!(parse(&many).is_ok());
    // Moderate nesting is accepted.
    let ok = format!("{}tcp{}", "not (".repeat(50), ")".repeat(50));
    assert!(parse(&ok).is_ok());
}

#[test]
fn print_parse_round_trip_on_the_valid_corpus() {
    let path = format!("{}/../../testdata/pflang/valid.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let ast = p(line);
        let printed = ast.to_string();
        let again = p(&printed);
        assert_eq!(again.normalized(), ast.normalized(), "{line} -> {printed}");
        assert_eq!(again.to_string(), printed);
        n += 1;
    }
    assert!(n >= 500);
}

/// Words the parser round-trips beyond the libpcap soup ([`crate::SOUP`]): names that do not
/// resolve, the C-style connectives and relations, 802.11 and direction qualifiers.
const PARSE_EXTRA: &[&str] =
    &["&&", "||", "foo", ">=", "<=", "8", "type", "subtype", "dir", "<<", ">>"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_strings_never_panic(s in "\\PC{0,64}") {
        if let Err(e) = parse(&s) {
            let _ = e.render(&s);
        }
    }

    #[test]
    fn token_soup_never_panics_and_round_trips(words in proptest::collection::vec(0..crate::SOUP.len() + PARSE_EXTRA.len(), 0..24)) {
        let soup = [crate::SOUP, PARSE_EXTRA].concat();
        let s: Vec<&str> = words.iter().map(|i| soup[*i]).collect();
        let s = s.join(" ");
        match parse(&s) {
            Ok(Some(ast)) => {
                let printed = ast.to_string();
                let again = parse(&printed);
                prop_assert!(again.is_ok(), "{} -> {} fails", s, printed);
                let again = again.unwrap().unwrap();
                prop_assert_eq!(again.normalized(), ast.normalized());
            }
            Ok(None) => {}
            Err(e) => { let _ = e.render(&s); }
        }
    }
}
