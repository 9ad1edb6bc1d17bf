//! Differential tests of the lowering of link-level tests, packet accessors and arithmetic,
//! encapsulations (`vlan`, `mpls`, `pppoe*`, `geneve`, `vxlan`), `llc` and the link-specific
//! tests, on every link type weir compiles for, against libpcap (the semantics of record).
//!
//! Each expression of testdata/pflang/lower-link.txt is compiled by weir and by libpcap for
//! each link type and run over the same packets: the seeded corpus, the boundary packets and
//! the link-level boundary frames, re-framed for the link type. weir's verdict
//! (`Filter::matches`) must equal libpcap's unoptimized program's on every packet, and its
//! optimized program's too. Where libpcap refuses an expression weir must refuse it, with
//! libpcap's words for the errors of this part of the lowering.
//!
//! libpcap compiles here as for a capture file (as `tcpdump -r` does), as weir does: both
//! refuse `inbound`, `outbound` and `ifindex` on link types without those fields ("... not
//! supported on Ethernet when reading savefiles", also checked against `tcpdump -r` itself),
//! with the same words.
//!
//! Documented differences, each checked below rather than skipped:
//! - `byte N & V` / `byte N | V`: libpcap forgets to load the byte; weir tests it.
//! - `vxlan`: absent from libpcap 1.10; checked against the equivalent accessor expression.
//! - More than two `geneve`s in one expression: each takes three of the eight scratch slots
//!   lowering may use (libpcap has sixteen registers for everything); weir refuses.
//! - After a `geneve` that did not match, later tests read offsets that were never stored:
//!   libpcap reads whatever the cell holds (another test's temporary, or uninitialized
//!   memory), weir reads 0. Such packets are recognized by evaluating weir's unoptimized
//!   filter with `Evaluator::reads_unset_scratch`, and are not compared.
//! - libpcap's optimizer does not keep the unoptimized program's meaning everywhere: it
//!   drops loads whose value it does not need, so some packets cut short are accepted
//!   optimized and rejected unoptimized (recognized by padding the packet: the programs
//!   then agree), and it folds `index + header offset` with wrapping where the unoptimized
//!   code does not (`ip[-1]`, listed in [`LIBPCAP_OPTIMIZER_WRAPS`]). weir follows the
//!   unoptimized program; these optimizer differences are counted, not failed.

use weir_filter::{Evaluator, Expr, Filter, Pred};
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::{corpus, edge_cases, link_edge_cases, relink, Packet};

use crate::{compile, testdata_list as list};

/// Seed and size of the generated part of the packets (not the committed sample).
const SEED: u64 = 0x11_4c_1a_4b;
const GENERATED: usize = 1500;

/// libpcap messages this part of the lowering owns: weir must give exactly these.
const OWN_MESSAGES: &[&str] = &[
    "no VLAN",
    "VLAN tag",
    "MPLS",
    "unsupported protocol over mpls",
    "PPPoE session number",
    "Geneve VNI",
    "'llc' not supported",
    "unknown LLC type name",
    "division by zero",
    "modulus by zero",
    "shift by more than 31 bits",
    "unsupported index operation",
    "radio information not present",
    "supported only on",
    "unknown PF",
    "802.11",
    // `inbound`/`outbound`/`ifindex` where the capture file has no such field.
    "when reading savefiles",
];

/// libpcap optimizer bug: a constant index whose sum with the header offset passes 2^32 is
/// folded into a wrapped offset, so the optimized program reads a byte the unoptimized one
/// does not (it rejects the packet).
const LIBPCAP_OPTIMIZER_WRAPS: &[&str] = &["ip[-1] = 0", "tcp[-1] = 0"];

/// Whether a filter reads scratch memory at all (only then can a read find a slot unset).
fn reads_scratch(p: &Pred) -> bool {
    fn expr(e: &Expr) -> bool {
        match e {
            Expr::Scratch(_) => true,
            Expr::Const(_) | Expr::WireLen => false,
            Expr::Load { offset, .. } => expr(offset),
            Expr::Binary { lhs, rhs, .. } => expr(lhs) || expr(rhs),
            Expr::Neg(inner) => expr(inner),
        }
    }
    match p {
        Pred::Const(_) | Pred::Guard(_) => false,
        Pred::Cmp { lhs, rhs, .. } => expr(lhs) || expr(rhs),
        Pred::In { value, .. } | Pred::Store { value, .. } => expr(value),
        Pred::And(parts) | Pred::Or(parts) => parts.iter().any(reads_scratch),
        Pred::Not(inner) | Pred::Try(inner) => reads_scratch(inner),
        Pred::Chain(c) => expr(&c.next) || expr(&c.offset),
        Pred::Pairs(pairs) => pairs
            .parts()
            .any(|(guards, fields)| guards.iter().any(reads_scratch) || fields.iter().any(expr)),
    }
}

/// Whether weir's unoptimized filter, on `p`, reads a scratch slot nothing wrote: its
/// verdict then rests on the IR's "unset slots are 0", libpcap's on a stale cell.
fn reads_unset_scratch(plain: &Filter, p: &Packet) -> bool {
    let mut evaluator = Evaluator::new(&p.data, p.wire_len);
    let _ = evaluator.pred(&plain.pred);
    evaluator.reads_unset_scratch()
}

/// Every link type under test, with its packets.
fn link_types() -> Vec<(LinkType, Vec<Packet>)> {
    let mut ethernet = corpus(SEED, GENERATED);
    ethernet.extend(edge_cases());
    ethernet.extend(link_edge_cases());
    weir_testkit::relink::LINK_TYPES
        .iter()
        .map(|&link| {
            assert!(weir_pflang::compiles_for(link), "weir lacks {link}");
            let packets = ethernet.iter().filter_map(|p| relink(p, link)).collect();
            (link, packets)
        })
        .collect()
}

/// Whether libpcap's two programs agree once `p` is padded with zeros far past every load:
/// their disagreement was only about which out-of-bounds load rejects the packet.
fn bounds_only(unoptimized: &[BpfInsn], optimized: &[BpfInsn], p: &Packet) -> bool {
    let mut data = p.data.clone();
    data.resize(data.len().max(p.wire_len as usize) + 4096, 0);
    libpcap::required().run(unoptimized, &data, p.wire_len)
        == libpcap::required().run(optimized, &data, p.wire_len)
}

fn libpcap_verdict(prog: &[BpfInsn], p: &Packet) -> Option<bool> {
    libpcap::required().run(prog, &p.data, p.wire_len).map(|r| r != 0)
}

/// Tallies of one run, for the report and for assertions that the test did something.
#[derive(Default)]
struct Tally {
    compiled: usize,
    verdicts: usize,
    accepted: usize,
    agreed_errors: usize,
    documented: usize,
    uninitialized: usize,
    optimizer: usize,
    skipped: Vec<String>,
    failures: Vec<String>,
}

fn check_expression(expr: &str, link: LinkType, packets: &[Packet], names: &NameDb, t: &mut Tally) {
    let dlt = i32::try_from(link.dlt()).unwrap_or(-1);
    let ours = compile(expr, &Options::new(link), names);
    let theirs = libpcap::required().compile(expr, dlt, false);
    match (ours, theirs) {
        (Err(e), Err(msg)) => {
            t.agreed_errors += 1;
            if e.span.end > expr.len() || e.span.start > e.span.end {
                t.failures.push(format!("{expr:?} on {}: span {:?} outside", link.name(), e.span));
            }
            if e.message != msg && std::env::var_os("WEIR_SHOW_MESSAGES").is_some() {
                println!(
                    "MESSAGE {expr:?} on {}: libpcap {msg:?} weir {:?}",
                    link.name(),
                    e.message
                );
            }
            if e.message != msg && OWN_MESSAGES.iter().any(|m| msg.contains(m)) {
                t.failures.push(format!(
                    "{expr:?} on {}: libpcap says {msg:?}, weir says {:?}",
                    link.name(),
                    e.message
                ));
            }
        }
        (Err(e), Ok(_)) if e.message.contains("too many variable-length headers") => {
            t.documented += 1
        }
        (Err(e), Ok(_)) if e.message.contains("lowering in progress") => {
            t.skipped.push(format!("{expr:?} on {}: {}", link.name(), e.message));
        }
        (Err(e), Ok(_)) => t.failures.push(format!(
            "{expr:?} on {}: libpcap compiles, weir: {}",
            link.name(),
            e.render(expr)
        )),
        (Ok(_), Err(msg)) => {
            t.failures.push(format!("{expr:?} on {}: weir compiles, libpcap: {msg}", link.name()))
        }
        (Ok(filter), Ok(prog)) => {
            t.compiled += 1;
            let optimized = libpcap::required().compile(expr, dlt, true);
            // The unoptimized filter is the one whose scratch reads mirror libpcap's (the
            // optimizer may fold a read of a slot it knows is still 0).
            let options = Options::new(link);
            let plain =
                weir_pflang::compile(expr, &options, names).ok().filter(|f| reads_scratch(&f.pred));
            let mut shown = 0;
            let accepted_before = t.accepted;
            for p in packets {
                let got = filter.matches(&p.data, p.wire_len);
                if plain.as_ref().is_some_and(|plain| reads_unset_scratch(plain, p)) {
                    t.uninitialized += 1;
                    continue;
                }
                let want = libpcap_verdict(&prog, p);
                let want_opt = match &optimized {
                    Ok(o) => libpcap_verdict(o, p),
                    Err(m) if m.contains("expression rejects all packets") => Some(false),
                    Err(m) => {
                        t.failures.push(format!("{expr:?}: optimized compile fails: {m}"));
                        return;
                    }
                };
                t.verdicts += 1;
                t.accepted += usize::from(got);
                let optimizer_only = want == Some(got)
                    && want_opt != want
                    && (LIBPCAP_OPTIMIZER_WRAPS.contains(&expr)
                        || optimized.as_ref().is_ok_and(|o| bounds_only(&prog, o, p)));
                if optimizer_only {
                    t.optimizer += 1;
                } else if want != Some(got) || want_opt != Some(got) {
                    if shown < 3 {
                        t.failures.push(format!(
                            "{expr:?} on {}: weir {got}, libpcap {want:?} (optimized {want_opt:?}) \
                             for {} ({} of {} bytes) {:02x?}",
                            link.name(),
                            p.description,
                            p.data.len(),
                            p.wire_len,
                            &p.data[..p.data.len().min(80)]
                        ));
                    }
                    shown += 1;
                }
            }
            if std::env::var_os("WEIR_SHOW_ACCEPTS").is_some() {
                println!("ACCEPTS {} {expr:?} {}", link.name(), t.accepted - accepted_before);
            }
        }
    }
}

#[test]
fn link_expressions_agree_with_libpcap_on_every_link_type() {
    let exprs = list("lower-link.txt");
    assert!(exprs.len() >= 300, "only {} expressions", exprs.len());
    let names = NameDb::builtin();
    let links = link_types();
    let mut t = Tally::default();
    for (link, packets) in &links {
        assert!(packets.len() > GENERATED, "{}: {} packets", link.name(), packets.len());
        for e in &exprs {
            check_expression(e, *link, packets, &names, &mut t);
        }
    }
    println!(
        "{} expressions x {} link types: {} compiled, {} verdicts ({} accepts), {} errors agreed, \
         {} documented differences, {} packets reading unset scratch, {} libpcap optimizer \
         differences, {} skipped",
        exprs.len(),
        links.len(),
        t.compiled,
        t.verdicts,
        t.accepted,
        t.agreed_errors,
        t.documented,
        t.uninitialized,
        t.optimizer,
        t.skipped.len()
    );
    if !t.skipped.is_empty() {
        println!(
            "SKIPPED: link_expressions_agree_with_libpcap_on_every_link_type: {} cases need \
             primitives still being lowered elsewhere, e.g. {}",
            t.skipped.len(),
            t.skipped.first().map_or("", String::as_str)
        );
    }
    assert!(t.verdicts > 1_000_000 && t.accepted > 10_000, "too little exercised");
    let total = t.failures.len();
    t.failures.truncate(40);
    assert!(total == 0, "{total} failures:\n{}", t.failures.join("\n"));
}

/// Every encapsulation prefix combined with every accessor or protocol test after it, so that
/// each offset change is seen by each kind of load.
#[test]
fn encapsulation_prefixes_shift_every_later_test_like_libpcap() {
    let prefixes = [
        "vlan",
        "vlan 100 and vlan",
        "mpls",
        "mpls 100 and mpls",
        "pppoes",
        "pppoes and pppoes",
        "geneve",
        "geneve 7 and vlan",
        "vlan and pppoes",
        "pppoes and mpls",
        "geneve and mpls",
        "not vlan",
        "ip or vlan",
    ];
    let tests = [
        "ip",
        "ip6",
        "arp",
        "ip[9] = 6",
        "ip6[6] = 17",
        "tcp[2:2] = 80",
        "udp[2:2] = 53",
        "icmp6[0] = 128",
        "ether[0] & 1 = 0",
        "byte 12 = 8",
        "llc",
        "ip[ip[0] & 0xf] = 0",
        "vlan",
        "mpls",
        "pppoed",
        "len > 60",
        // After `geneve`, the inner-MAC check comes first (libpcap's gen_prevlinkhdr_check).
        "ether host 00:11:22:33:44:55",
        "ether broadcast",
        "ether multicast",
    ];
    let names = NameDb::builtin();
    let links = link_types();
    let mut t = Tally::default();
    for (link, packets) in &links {
        // Ethernet carries every encapsulation; the others need only a glance.
        let step = if *link == LinkType::Ethernet { 1 } else { 7 };
        for (i, prefix) in prefixes.iter().enumerate() {
            for (j, test) in tests.iter().enumerate() {
                if (i + j) % step != 0 {
                    continue;
                }
                for op in ["and", "or"] {
                    let e = format!("{prefix} {op} {test}");
                    check_expression(&e, *link, packets, &names, &mut t);
                }
            }
        }
    }
    println!("{} compiled, {} verdicts, {} errors agreed", t.compiled, t.verdicts, t.agreed_errors);
    assert!(t.compiled > 300);
    let total = t.failures.len();
    t.failures.truncate(40);
    assert!(total == 0, "{total} failures:\n{}", t.failures.join("\n"));
}

/// How libpcap ends its refusal of `inbound`/`outbound`/`ifindex` when it reads a capture
/// file, as weir always does.
const SAVEFILES: &str = "when reading savefiles";

/// `inbound`/`outbound`/`ifindex`: refused where the link has no such field, with the
/// message libpcap gives when reading a savefile (the main test checks the same against the
/// oracle on every link type); where the field exists, the main test checks the verdicts.
#[test]
fn direction_and_interface_are_refused_where_the_link_has_no_such_field() {
    let names = NameDb::builtin();
    for link in [LinkType::Ethernet, LinkType::Raw, LinkType::Null, LinkType::Ipv6] {
        for (e, message) in [
            (
                "inbound",
                format!("inbound/outbound not supported on {} {SAVEFILES}", link.description()),
            ),
            (
                "outbound",
                format!("inbound/outbound not supported on {} {SAVEFILES}", link.description()),
            ),
            ("ifindex 2", format!("ifindex not supported on {} {SAVEFILES}", link.description())),
        ] {
            let err = compile(e, &Options::new(link), &names).err();
            assert_eq!(err.map(|e| e.message), Some(message), "{e} on {}", link.name());
        }
    }
    let sll = compile("inbound", &Options::new(LinkType::LinuxSll2), &names);
    assert!(sll.is_ok());
    let after_pppoes = compile("pppoes and inbound", &Options::new(LinkType::LinuxSll), &names);
    assert_eq!(
        after_pppoes.err().map(|e| e.message),
        Some(format!("inbound/outbound not supported on PPP {SAVEFILES}")),
        "the direction is a property of the current link header"
    );
}

/// The savefile oracle itself: `tcpdump -r` (libpcap reading a capture file of each link
/// type) refuses or accepts the direction and interface tests exactly as weir does, with the
/// same message.
#[test]
fn direction_and_interface_follow_tcpdump_reading_a_file() {
    use std::process::Command;
    if !Command::new("tcpdump").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!(
            "SKIPPED: direction_and_interface_follow_tcpdump_reading_a_file: tcpdump not installed"
        );
        return;
    }
    let names = NameDb::builtin();
    let exprs = [
        "inbound",
        "not outbound and ip",
        "ifindex 1",
        "pppoes and inbound",
        "pppoes and ifindex 2",
        "geneve and outbound",
        "ip or ifindex 3",
    ];
    let (mut refused, mut accepted) = (0, 0);
    for &link in weir_testkit::relink::LINK_TYPES.iter() {
        let dlt = link.dlt();
        let path = std::env::temp_dir()
            .join(format!("weir-pflang-savefile-{}-{dlt}.pcap", std::process::id()));
        weir_testkit::write_pcap(&path, dlt, &[]).expect("writing an empty capture");
        for e in exprs {
            let out = Command::new("tcpdump").arg("-r").arg(&path).arg("-d").arg(e).output();
            let out = out.expect("running tcpdump");
            let ours = compile(e, &Options::new(link), &names).map(|_| ()).map_err(|e| e.message);
            if out.status.success() {
                accepted += 1;
                assert_eq!(ours, Ok(()), "{e} on {}: tcpdump -r accepts", link.name());
            } else {
                refused += 1;
                let stderr = String::from_utf8_lossy(&out.stderr);
                let message = stderr
                    .lines()
                    .find_map(|l| l.strip_prefix("tcpdump: "))
                    .unwrap_or_else(|| panic!("{e} on {}: tcpdump says {stderr}", link.name()));
                assert_eq!(ours, Err(message.to_string()), "{e} on {}", link.name());
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    println!("tcpdump -r: {refused} refusals and {accepted} acceptances matched");
    assert!(refused > 30 && accepted > 5, "{refused} refused, {accepted} accepted");
}

/// `byte N & V` and `byte N | V`: weir tests the byte; libpcap applies the operation to
/// whatever it loaded last and so disagrees on some packets. Both facts are checked.
#[test]
fn byte_and_or_test_the_byte_unlike_libpcap() {
    let names = NameDb::builtin();
    let packets: Vec<Packet> = edge_cases().into_iter().chain(link_edge_cases()).collect();
    for (e, reference) in [
        ("byte 14 & 0x40", (|b: u8| b & 0x40 != 0) as fn(u8) -> bool),
        ("byte 0 & 1", |b| b & 1 != 0),
        ("byte 14 | 0", |b| b != 0),
        ("byte 14 | 2", |_| true),
    ] {
        let filter = compile(e, &Options::new(LinkType::Ethernet), &names)
            .unwrap_or_else(|err| panic!("{}", err.render(e)));
        let offset: usize = e.split(' ').nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
        let prog = libpcap::required().compile(e, 1, false).unwrap_or_default();
        let mut differs = 0;
        for p in &packets {
            let got = filter.matches(&p.data, p.wire_len);
            let want = p.data.get(offset).is_some_and(|&b| reference(b));
            assert_eq!(got, want, "{e} on {}", p.description);
            differs += usize::from(libpcap_verdict(&prog, p) != Some(got));
        }
        if e != "byte 14 | 2" {
            assert!(differs > 0, "{e}: libpcap agrees everywhere; is the bug fixed?");
        }
    }
}

/// libpcap 1.10 has no `vxlan`: each form is checked against an accessor expression libpcap
/// compiles, which spells out the same tests at the fixed offsets of a VXLAN packet behind
/// an option-less IPv4 header (`udp[...]`) or an IPv6 header without extension headers.
#[test]
fn vxlan_matches_its_spelled_out_equivalent() {
    let names = NameDb::builtin();
    let v4 = "(ip and udp[2:2] = 4789 and udp[8] = 8";
    let v6 = "(ip6 and ip6[6] = 17 and ip6[42:2] = 4789 and ip6[48] = 8";
    let pairs = [
        ("vxlan", format!("{v4}) or {v6})")),
        ("vxlan 100", format!("{v4} and udp[12:4] & 0xffffff00 = 25600) or {v6} and ip6[52:4] & 0xffffff00 = 25600)")),
        ("vxlan and ip", format!("{v4} and udp[28:2] = 0x800) or {v6} and ip6[68:2] = 0x800)")),
        ("vxlan and ether[0] & 2 = 2", format!("{v4} and udp[16] & 2 = 2) or {v6} and ip6[56] & 2 = 2)")),
        (
            "vxlan and vlan 200 and ip6",
            format!(
                "{v4} and (udp[28:2] = 0x8100 or udp[28:2] = 0x88a8 or udp[28:2] = 0x9100) \
                 and udp[30:2] & 0xfff = 200 and udp[32:2] = 0x86dd) or \
                 {v6} and (ip6[68:2] = 0x8100 or ip6[68:2] = 0x88a8 or ip6[68:2] = 0x9100) \
                 and ip6[70:2] & 0xfff = 200 and ip6[72:2] = 0x86dd)"
            ),
        ),
        (
            "vxlan and ip[9] = 6",
            format!("{v4} and udp[28:2] = 0x800 and udp[39] = 6) or {v6} and ip6[68:2] = 0x800 and ip6[79] = 6)"),
        ),
    ];
    let mut packets: Vec<Packet> = corpus(SEED, GENERATED);
    packets.extend(edge_cases());
    packets.extend(link_edge_cases());
    let mut matched = 0;
    for (ours, spelled) in &pairs {
        let filter = compile(ours, &Options::new(LinkType::Ethernet), &names)
            .unwrap_or_else(|e| panic!("{}", e.render(ours)));
        let prog = libpcap::required()
            .compile(spelled, 1, false)
            .unwrap_or_else(|e| panic!("{spelled}: {e}"));
        for p in &packets {
            // The spelled-out form assumes option-less outer IPv4 headers.
            if p.data.len() > 14 && p.data[12..14] == [0x08, 0x00] && p.data[14] != 0x45 {
                continue;
            }
            let got = filter.matches(&p.data, p.wire_len);
            matched += usize::from(got);
            assert_eq!(
                Some(got),
                libpcap_verdict(&prog, p),
                "{ours} vs {spelled} on {}: {:02x?}",
                p.description,
                &p.data[..p.data.len().min(90)]
            );
        }
    }
    assert!(matched > 10, "VXLAN packets too rare: {matched} matches");
    let err = compile("vxlan 16777216", &Options::new(LinkType::Ethernet), &names).err();
    assert_eq!(
        err.map(|e| e.message),
        Some("VXLAN VNI 16777216 greater than maximum 16777215".into())
    );
    // A third tunnel still fits in scratch memory for VXLAN (one slot each).
    assert!(compile("vxlan and vxlan and vxlan and ip", &Options::new(LinkType::Ethernet), &names)
        .is_ok());
}

/// The semantic rejects of testdata/pflang/semantic-rejects.txt that this part of the
/// lowering decides are rejected with libpcap's message and a span inside the expression.
#[test]
fn semantic_rejects_of_encapsulations_get_libpcaps_message() {
    let names = NameDb::builtin();
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in list("semantic-rejects.txt") {
        let Some((expr, message)) = line.split_once("\t# ") else { continue };
        if !OWN_MESSAGES.iter().any(|m| message.contains(m)) {
            continue;
        }
        checked += 1;
        match compile(expr, &Options::new(LinkType::Ethernet), &names) {
            Ok(_) => failures.push(format!("{expr:?}: compiles; libpcap: {message}")),
            Err(e) if e.message.contains("lowering in progress") => {
                println!("SKIPPED: {expr:?}: {}", e.message);
            }
            Err(e) if e.message != message || e.span.end > expr.len() => {
                failures.push(format!("{expr:?}: want {message:?}, got {}", e.render(expr)))
            }
            Err(_) => {}
        }
    }
    assert!(checked >= 20, "only {checked} rejects in scope");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Random short combinations of this area's primitives, with `and`, `or`, `not` and
/// parentheses: the state an encapsulation leaves behind must reach exactly the tests
/// libpcap's does, across every way of combining them.
#[test]
fn random_combinations_agree_with_libpcap() {
    const ATOMS: &[&str] = &[
        "vlan",
        "vlan 100",
        "mpls",
        "mpls 100",
        "pppoes",
        "pppoes 0x1234",
        "pppoed",
        "geneve",
        "geneve 7",
        "llc",
        "llc u",
        "ip",
        "ip6",
        "arp",
        "iso",
        "stp",
        "ipx",
        "tcp[13] & 2 != 0",
        "udp[2:2] = 53",
        "ip[9] = 6",
        "ether[12:2] = 0x800",
        "len > 60",
        "byte 14 = 0x45",
        "icmp6[0] = 128",
        "ip6[6] = 17",
        "ether[0] & 1 = 0",
        "ip[0] & 0xf > 5",
        "inbound",
    ];
    let mut rng = weir_testkit::SplitMix64::new(0x5eed_11c4);
    let mut pick = |n: usize| usize::try_from(rng.below(n as u64)).unwrap_or(0);
    let mut exprs = Vec::new();
    for _ in 0..1000 {
        let count = 2 + pick(3);
        let mut e = String::new();
        for i in 0..count {
            if i > 0 {
                e.push_str(if pick(2) == 0 { " and " } else { " or " });
            }
            let atom = ATOMS[pick(ATOMS.len())];
            match pick(6) {
                0 => e.push_str(&format!("not {atom}")),
                1 => e.push_str(&format!("({atom} or {})", ATOMS[pick(ATOMS.len())])),
                _ => e.push_str(atom),
            }
        }
        exprs.push(e);
    }
    let names = NameDb::builtin();
    let links = link_types();
    let mut t = Tally::default();
    for (link, packets) in &links {
        if !matches!(link, LinkType::Ethernet | LinkType::LinuxSll | LinkType::Raw) {
            continue;
        }
        for e in &exprs {
            check_expression(e, *link, packets, &names, &mut t);
        }
    }
    println!(
        "{} compiled, {} verdicts ({} accepts), {} errors agreed, {} documented",
        t.compiled, t.verdicts, t.accepted, t.agreed_errors, t.documented
    );
    assert!(t.compiled > 300);
    let total = t.failures.len();
    t.failures.truncate(40);
    assert!(total == 0, "{total} failures:\n{}", t.failures.join("\n"));
}
