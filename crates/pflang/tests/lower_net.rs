//! Differential tests of the network-level lowering (hosts, networks, ports, port ranges,
//! protocols, protochain, broadcast/multicast, gateway) against the system libpcap, plus the
//! name tables those primitives resolve through.
//!
//! Every expression of testdata/pflang/lower-net.txt is compiled by libpcap (unoptimized and
//! optimized) and by weir. Either both refuse it, with the same message, or both accept it
//! and give the same verdict on every test packet. Names resolve from the machine's files on
//! both sides (libpcap asks the C library, which reads the same /etc files), so that `host
//! localhost` or `port http` mean the same thing to both.

use std::collections::BTreeMap;

use weir_filter::{Evaluator, Filter};
use weir_pflang::names::{self, NameDb, Transport};
use weir_pflang::{CompileError, LinkType, Options};
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::Packet;

use crate::compile;

/// The netmask both compilers get, so that `ip broadcast` compiles (192.168.1.255 and
/// 255.255.255.255 are broadcast destinations in the corpus).
const NETMASK: u32 = 0xffff_ff00;

/// How many hops weir's protochain walk makes before it gives up (the IR's
/// `CHAIN_HOP_BUDGET`).
const PROTOCHAIN_HOPS: usize = weir_filter::CHAIN_HOP_BUDGET as usize;

/// Exactly the machine's name files, nothing built in: what libpcap's resolver sees.
fn system_names() -> NameDb {
    NameDb::system_files_only()
}

fn testdata(name: &str) -> String {
    let path = format!("{}/../../testdata/pflang/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn expressions() -> Vec<String> {
    testdata("lower-net.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// The seeded corpus, the generic boundary frames, and the frames written for link-level
/// and network-level filters.
fn packets() -> Vec<Packet> {
    let mut all = weir_testkit::corpus(7, 1000);
    all.extend(weir_testkit::edge_cases());
    all.extend(weir_testkit::link_edge_cases());
    all.extend(weir_testkit::net_edge_cases());
    all
}

/// libpcap's verdict; its validator accepts everything its compiler produces.
fn libpcap_accepts(prog: &[BpfInsn], p: &Packet) -> bool {
    libpcap::required().run(prog, &p.data, p.wire_len).expect("libpcap refused its own program")
        != 0
}

/// The number of IPv6 extension headers before the upper layer, for the frames of
/// `net_edge_cases` that carry long chains.
fn chain_length(p: &Packet) -> Option<usize> {
    // Re-framed packets keep the description behind a "[dlt N] " tag.
    let description = match p.description.strip_prefix("[dlt ") {
        Some(tagged) => tagged.split_once("] ")?.1,
        None => p.description.as_str(),
    };
    let rest = description.strip_prefix("IPv6 ")?;
    let (n, tail) = rest.split_once(' ')?;
    if !tail.starts_with("destination-options headers") {
        return None;
    }
    n.parse().ok()
}

/// The disagreement with libpcap weir documents: libpcap 1.10's protochain walk has no
/// bound but the packet's end; weir's gives up on its hop after `PROTOCHAIN_HOPS` and
/// rejects the packet.
fn known_disagreement(expr: &str, p: &Packet) -> bool {
    expr.contains("protochain") && chain_length(p).is_some_and(|n| n > PROTOCHAIN_HOPS)
}

/// libpcap's optimizer does not keep the meaning of its unoptimized code on records too
/// short for a load that code makes: it drops loads whose value it has decided (`net
/// 0.0.0.0/0` loads an address only to mask it to 0) and merges repeated loads of one field
/// across alternatives (`host a or b or c`), so a record on which the unoptimized code
/// aborts may be accepted by the optimized code. The IR means the unoptimized code; where it
/// aborts (weir's evaluator says so) only the unoptimized verdict binds.
fn optimizer_drops_an_abort(filter: &Filter, p: &Packet, weir: bool, unoptimized: bool) -> bool {
    weir == unoptimized && Evaluator::new(&p.data, p.wire_len).pred(&filter.pred).is_err()
}

/// A weir error must point inside the expression, at something.
fn span_ok(err: &CompileError, expr: &str) -> bool {
    err.span.start < err.span.end && err.span.end <= expr.len()
}

struct Outcome {
    accepted: usize,
    rejected: usize,
    /// Packet verdicts on which weir, unoptimized libpcap and optimized libpcap agree.
    verdicts: u64,
    /// Verdicts where weir and unoptimized libpcap agree and the optimizer differs on a
    /// record too short for the unoptimized code ([`optimizer_drops_an_abort`]).
    optimizer: u64,
    /// Documented protochain disagreements ([`known_disagreement`]).
    known: u64,
    failures: Vec<String>,
}

/// Compiles every expression for `dlt` with both compilers and compares; `frame` turns an
/// Ethernet test packet into one of that link type.
fn differential(
    dlt: u32,
    linktype: LinkType,
    exprs: &[String],
    packets: &[Packet],
    names: &NameDb,
) -> Outcome {
    let mut out = Outcome {
        accepted: 0,
        rejected: 0,
        verdicts: 0,
        optimizer: 0,
        known: 0,
        failures: Vec::new(),
    };
    let options = Options { linktype, netmask: Some(NETMASK) };
    let dlt_i32 = i32::try_from(dlt).expect("DLT fits");
    for e in exprs {
        let weir = weir_pflang::compile(e, &options, names);
        // Masked-out address words are not read (differential/documented.rs).
        let unoptimized =
            libpcap::required().compile_with_netmask(e, dlt_i32, false, NETMASK).map(|mut p| {
                crate::differential::documented::skip_masked_out_compares(&mut p);
                p
            });
        match (unoptimized, weir) {
            (Err(message), Err(err)) => {
                out.rejected += 1;
                if err.message != message.trim_end() {
                    out.failures.push(format!(
                        "{e:?}: libpcap says {message:?}, weir says {:?}",
                        err.message
                    ));
                } else if !span_ok(&err, e) {
                    out.failures.push(format!("{e:?}: bad span {:?}", err.span));
                }
            }
            (Err(message), Ok(_)) => {
                out.failures.push(format!("{e:?}: libpcap refuses ({message}), weir accepts"))
            }
            (Ok(_), Err(err)) => out
                .failures
                .push(format!("{e:?}: libpcap accepts, weir refuses:\n{}", err.render(e))),
            (Ok(unopt), Ok(filter)) => {
                out.accepted += 1;
                // The optimizer may prove that nothing matches; libpcap then refuses to
                // compile, which means "rejects every packet".
                let opt = libpcap::required().compile_with_netmask(e, dlt_i32, true, NETMASK).ok();
                let mut shown = 0;
                for p in packets {
                    let w = filter.matches(&p.data, p.wire_len);
                    let u = libpcap_accepts(&unopt, p);
                    let o = opt.as_ref().is_some_and(|prog| libpcap_accepts(prog, p));
                    if w == u && u == o {
                        out.verdicts += 1;
                    } else if optimizer_drops_an_abort(&filter, p, w, u) {
                        out.optimizer += 1;
                    } else if known_disagreement(e, p) && u == o {
                        out.known += 1;
                    } else if shown < 3 {
                        shown += 1;
                        out.failures.push(format!(
                            "{e:?} on {:?} ({} of {} bytes): weir {w}, libpcap {u}, optimized {o}",
                            p.description,
                            p.data.len(),
                            p.wire_len
                        ));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn network_primitives_agree_with_libpcap_on_ethernet() {
    let exprs = expressions();
    assert!(exprs.len() >= 500, "only {} expressions", exprs.len());
    let packets = packets();
    let out = differential(1, LinkType::Ethernet, &exprs, &packets, &system_names());
    println!(
        "EN10MB: {} expressions accepted by both, {} refused by both with the same message; \
         {} accepted x {} packets: {} verdicts agree with unoptimized and optimized libpcap, \
         {} with unoptimized libpcap only (optimizer on records too short), {} documented \
         protochain disagreements",
        out.accepted,
        out.rejected,
        out.accepted,
        packets.len(),
        out.verdicts,
        out.optimizer,
        out.known
    );
    assert!(
        out.failures.is_empty(),
        "{} failures:\n{}",
        out.failures.len(),
        out.failures.join("\n")
    );
    assert!(out.accepted >= 400 && out.rejected >= 150, "{} / {}", out.accepted, out.rejected);
    assert!(out.known > 0, "the long-chain packets no longer reach the protochain bound");
}

/// The same expressions and packets, re-framed for every other link type weir compiles for:
/// the network-level tests must reach the network header through the link type's own
/// offsets and protocol test, never through Ethernet's.
#[test]
fn network_primitives_agree_with_libpcap_on_other_link_types() {
    let exprs = expressions();
    let names = system_names();
    let ethernet = packets();
    let mut failures = Vec::new();
    let others = weir_testkit::relink::LINK_TYPES.into_iter().filter(|&l| l != LinkType::Ethernet);
    for linktype in others {
        let code = linktype.dlt();
        let packets: Vec<Packet> =
            ethernet.iter().filter_map(|p| weir_testkit::relink(p, linktype)).collect();
        let out = differential(code, linktype, &exprs, &packets, &names);
        println!(
            "{}: {} accepted, {} refused by both; over {} packets {} verdicts agree, {} with \
             unoptimized libpcap only, {} documented protochain disagreements",
            linktype.name(),
            out.accepted,
            out.rejected,
            packets.len(),
            out.verdicts,
            out.optimizer,
            out.known
        );
        failures.extend(out.failures.into_iter().map(|f| format!("{}: {f}", linktype.name())));
    }
    failures.truncate(60);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The protochain bound is where weir says it is: a chain of exactly `PROTOCHAIN_HOPS`
/// extension headers is walked to its end, one more is rejected (where libpcap walks on),
/// even under `not`: giving up aborts the whole filter.
#[test]
fn protochain_walks_exactly_its_documented_depth() {
    let names = system_names();
    let options = Options::new(LinkType::Ethernet);
    let filter = compile("ip6 protochain 6", &options, &names).expect("compiles");
    let unopt =
        libpcap::required().compile("ip6 protochain 6", 1, false).expect("libpcap compiles");
    let chains: BTreeMap<usize, Packet> = weir_testkit::net_edge_cases()
        .into_iter()
        .filter(|p| p.description.ends_with("then TCP"))
        .filter_map(|p| chain_length(&p).map(|n| (n, p)))
        .collect();
    let at_bound = chains.get(&PROTOCHAIN_HOPS).expect("a chain at the bound");
    let past_bound = chains.get(&(PROTOCHAIN_HOPS + 1)).expect("a chain past the bound");
    assert!(filter.matches(&at_bound.data, at_bound.wire_len));
    assert!(libpcap_accepts(&unopt, at_bound));
    assert!(!filter.matches(&past_bound.data, past_bound.wire_len));
    assert!(libpcap_accepts(&unopt, past_bound), "libpcap walks past weir's bound");
    let negated = compile("not ip6 protochain 6", &options, &names).expect("compiles");
    assert!(!negated.matches(&past_bound.data, past_bound.wire_len));
    assert!(!negated.matches(&at_bound.data, at_bound.wire_len));
    for (n, p) in &chains {
        assert_eq!(filter.matches(&p.data, p.wire_len), *n <= PROTOCHAIN_HOPS, "chain of {n}");
    }
}

/// Protochain state lives in the walk (the IR's `Chain` node), not in scratch slots: an
/// expression may hold more walks than there are slots.
#[test]
fn many_protochains_fit_in_scratch_memory() {
    let e = (0..12).map(|i| format!("protochain {i}")).collect::<Vec<_>>().join(" or ");
    let filter = compile(&e, &Options::new(LinkType::Ethernet), &system_names());
    assert!(filter.is_ok(), "{:?}", filter.err());
}

/// Messages libpcap gives for the network-level primitives; semantic-rejects.txt lines with
/// these messages are this lowering's to refuse.
const NETWORK_MESSAGES: &[&str] = &[
    "'gateway' not supported in this configuration",
    "netmask not known, so 'ip broadcast' not supported",
    "ethernet addresses supported only on",
    "not a broadcast link",
    "link-layer multicast filters supported only on",
    "unknown host '",
];

/// Each line of semantic-rejects.txt whose libpcap message is about a network primitive is
/// refused by weir, with that message. Two kinds of line are refused for another reason
/// first, and are counted apart: weir parses the whole expression before lowering it, so a
/// syntax error after an unknown name is reported as such (libpcap resolves names while it
/// parses); and weir refuses some primitives libpcap accepts (the check: libpcap compiles
/// the text weir points at) before it reaches the network primitive.
#[test]
fn libpcap_semantic_rejects_of_network_primitives_are_refused_alike() {
    let names = system_names();
    let options = Options::new(LinkType::Ethernet);
    let (mut same, mut syntax_first, mut refused_earlier) = (0, 0, 0);
    let mut failures = Vec::new();
    for line in testdata("semantic-rejects.txt").lines().filter(|l| !l.starts_with('#')) {
        let Some((expr, message)) = line.split_once("\t# ") else { continue };
        if !NETWORK_MESSAGES.iter().any(|m| message.starts_with(m)) {
            continue;
        }
        let err = match compile(expr, &options, &names) {
            Ok(_) => {
                failures.push(format!("{expr:?}: accepted, libpcap says {message:?}"));
                continue;
            }
            Err(err) => err,
        };
        if !span_ok(&err, expr) {
            failures.push(format!("{expr:?}: bad span {:?}", err.span));
        } else if err.message == message {
            same += 1;
        } else if weir_pflang::parse(expr).is_err() {
            syntax_first += 1;
        } else if libpcap::required().compile(&expr[err.span.start..err.span.end], 1, false).is_ok()
        {
            refused_earlier += 1;
            println!("refused earlier by another primitive: {}", err.render(expr));
        } else {
            failures.push(format!(
                "{expr:?}: libpcap says {message:?}, weir says:\n{}",
                err.render(expr)
            ));
        }
    }
    println!(
        "semantic rejects of network primitives: {same} with libpcap's message, \
         {syntax_first} syntax errors first, {refused_earlier} refused earlier"
    );
    assert!(same >= 100, "only {same} semantic rejects checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn errors_point_at_the_offending_id_or_primitive() {
    let names = system_names();
    let options = Options::new(LinkType::Ethernet);
    let span_of = |e: &str| {
        let err = compile(e, &options, &names).expect_err(e);
        e[err.span.start..err.span.end].to_string()
    };
    assert_eq!(span_of("tcp port 80 or host nosuchhost.invalid"), "nosuchhost.invalid");
    assert_eq!(span_of("net 10.0.0.1/8 and tcp"), "10.0.0.1/8");
    assert_eq!(span_of("udp and tcp port ntp"), "ntp");
    assert_eq!(span_of("ip and tcp host 10.0.0.1"), "tcp host 10.0.0.1");
    assert_eq!(span_of("port 80 or 70000"), "70000");
    assert_eq!(span_of("ip or ip broadcast"), "ip broadcast");
    assert_eq!(span_of("ip6 protochain \\nosuch"), "\\nosuch");
}

// ---- name tables -------------------------------------------------------------------

#[test]
fn builtin_names_resolve_without_the_machine() {
    let db = NameDb::builtin();
    assert_eq!(db.service("http"), &[(80, Transport::Tcp)]);
    assert_eq!(db.port("domain", Transport::Udp), Some(53));
    assert_eq!(db.port("domain", Transport::Tcp), Some(53));
    assert_eq!(db.port("ntp", Transport::Tcp), None);
    assert_eq!(db.port("ntp", Transport::Udp), Some(123));
    assert_eq!(db.protocol("tcp"), Some(6));
    assert_eq!(db.protocol("ipv6-icmp"), Some(58));
    assert_eq!(db.protocol("nosuch"), None);
    assert_eq!(db.host("localhost"), &["127.0.0.1".parse::<std::net::IpAddr>().unwrap()]);
    assert!(db.host("nosuchhost").is_empty());
    assert_eq!(db.network("loopback"), None);
    assert_eq!(names::ether_type("ip6"), Some(0x86dd));
    assert_eq!(names::ether_type("loopback"), Some(0x9000));
    assert_eq!(names::ether_type("vlan"), None, "libpcap has no `ether proto \\vlan`");
    assert_eq!(names::llc_sap("stp"), Some(0x42));
    assert_eq!(names::llc_sap("ip"), None);
}

/// `system` is the built-in tables plus the machine's files; `system_files_only` is the
/// files alone, read by the same parsers.
#[test]
fn system_tables_are_the_files_with_or_without_the_builtin_names() {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mut by_hand = NameDb::default();
    by_hand.load_protocols(&read("/etc/protocols"));
    by_hand.load_services(&read("/etc/services"));
    let files = NameDb::system_files_only();
    let system = NameDb::system();
    for name in ["tcp", "udp", "igrp", "icmp6", "ipv6-icmp", "gre"] {
        assert_eq!(files.protocol(name), by_hand.protocol(name), "{name}");
        let expected = by_hand.protocol(name).or(NameDb::builtin().protocol(name));
        assert_eq!(system.protocol(name), expected, "{name}");
    }
    assert_eq!(system.protocol("igrp"), Some(9), "built-in names stay in `system`");
    for name in ["http", "domain", "ntp", "amqp"] {
        assert_eq!(files.service(name), by_hand.service(name), "{name}");
    }
}

#[test]
fn name_files_are_parsed_like_the_c_library_reads_them() {
    let mut db = NameDb::default();
    db.load_services(
        "# comment\nfoo\t1234/tcp\tbar baz # trailing\nfoo 1234/udp\nsig 99/sctp\n\
         big 70000/tcp\nnoproto 5\nodd 7/ddp\n",
    );
    assert_eq!(db.service("foo"), &[(1234, Transport::Tcp), (1234, Transport::Udp)]);
    assert_eq!(db.service("baz"), &[(1234, Transport::Tcp)]);
    assert_eq!(db.port("sig", Transport::Sctp), Some(99));
    assert!(db.service("big").is_empty() && db.service("noproto").is_empty());
    assert!(db.service("odd").is_empty());

    db.load_protocols("xyz 250 XYZ\t# c\nxyz 251\nbad 300\n");
    assert_eq!(db.protocol("xyz"), Some(250), "the first entry wins");
    assert_eq!(db.protocol("XYZ"), Some(250));
    assert_eq!(db.protocol("bad"), None);

    db.load_hosts("10.1.2.3 a b\n::1 a\n# 10.9.9.9 c\nnot-an-address x\n");
    let a: Vec<String> = db.host("a").iter().map(ToString::to_string).collect();
    assert_eq!(a, ["10.1.2.3", "::1"]);
    assert_eq!(db.host("b").len(), 1);
    assert!(db.host("c").is_empty() && db.host("x").is_empty());

    db.load_ethers("00:11:22:33:44:55 box\n0:1:2:3:4:5 small\nzz:11:22:33:44:55 bad\n");
    assert_eq!(db.ether_host("box"), Some([0, 0x11, 0x22, 0x33, 0x44, 0x55]));
    assert_eq!(db.ether_host("small"), Some([0, 1, 2, 3, 4, 5]));
    assert_eq!(db.ether_host("bad"), None);

    db.load_networks("loopback 127 lo\nlink-local 169.254.0.0\nten 10.1\nbad 300.1\n");
    assert_eq!(db.network("loopback"), Some(127));
    assert_eq!(db.network("lo"), Some(127));
    assert_eq!(db.network("link-local"), Some(0xa9fe_0000));
    assert_eq!(db.network("ten"), Some(0x0a01));
    assert_eq!(db.network("bad"), None);
}

/// What a name resolves to decides what the filter tests.
#[test]
fn names_lower_to_what_they_stand_for() {
    let options = Options::new(LinkType::Ethernet);
    let mut db = NameDb::default();
    db.load_networks("short 127\nfull 127.0.0.0\n");
    db.load_hosts("10.1.2.3 both\n2001:db8::7 both\n");
    db.load_services("web 80/tcp\nboth 53/tcp\nboth 53/udp\nsplit 70/tcp\nsplit 71/udp\n");
    let same = |a: &str, b: &str| {
        let x = compile(a, &options, &db).unwrap_or_else(|e| panic!("{}", e.render(a)));
        let y = compile(b, &options, &db).unwrap_or_else(|e| panic!("{}", e.render(b)));
        assert_eq!(x, y, "{a:?} should mean {b:?}");
    };
    // A right-justified network number is a short network; a full one is one address.
    same("net short", "net 127");
    same("net full", "net 127.0.0.0");
    same("host both", "host 10.1.2.3 or host 2001:db8::7");
    same("ip6 host both", "ip6 host 2001:db8::7");
    same("port web", "tcp port 80");
    same("port both", "port 53");
    same("port split", "tcp port 70");
    same("udp port both", "udp port 53");
    same("portrange web-split", "tcp portrange 70-80");
    same("portrange both-web", "portrange 53-80");
    let builtin = NameDb::builtin();
    let http = compile("port http", &options, &builtin).expect("builtin http");
    let tcp80 = compile("tcp port 80", &options, &builtin).expect("tcp port 80");
    assert_eq!(http, tcp80, "builtin http is TCP only");
}
