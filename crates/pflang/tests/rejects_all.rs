//! "expression rejects all packets": weir's verdict (`weir_pflang::rejects_all`, which the
//! facade's optimized compile turns into an error) against libpcap's `pcap_compile` with
//! its optimizer on, over generated expressions on every link type weir compiles for, over
//! generated conjunctions of two primitives (where contradictions are frequent) and over a
//! hand list of awkward cases.
//!
//! Counted both ways: libpcap refuses and weir keeps the filter ("weir misses"), weir
//! refuses and libpcap compiles ("weir over-detects"). Expressions libpcap refuses for
//! another reason, or compiles only without its optimizer failing otherwise, are not
//! compared. The documented differences (ARCHITECTURE.md, "Documented differences") are the
//! cases listed in [`DOCUMENTED`]; every other disagreement fails.

use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_sys::libpcap;
use weir_testkit::pflang_gen::Generator;

const SEED: u64 = 0x0e1e_c7a1_1000;
const GENERATED: usize = 10_000;
const PAIRS: usize = 10_000;
const SHOW_LIMIT: usize = 15;

const LINKS: [LinkType; 6] = [
    LinkType::Ethernet,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Raw,
    LinkType::Null,
    LinkType::Loop,
];

/// `(expression, libpcap rejects all)` on Ethernet, checked against libpcap too, so the list
/// cannot drift; weir must agree except on the [`DOCUMENTED`] ones.
const HAND: &[(&str, bool)] = &[
    ("ip6 and icmp", true),
    ("1 = 0", true),
    ("4 - 6 < 0", true),
    ("ip and 1 = 0", true),
    ("ip and 4 - 6 < 0", false),
    ("4 - 6 < 0 and ip", true),
    ("2 * 3 = 7 and ip", true),
    ("ip and 2 * 3 = 7", false),
    ("len < 0", false),
    ("ip and not ip", true),
    ("arp and ip protochain 17", false),
    ("ip6 and icmp and ip6 protochain 17", false),
    ("not ip and ip", true),
    ("tcp and udp", true),
    ("ip[0] = 1 and ip[0] = 2", true),
    ("ip[0] = 1 and ip[0] != 1", true),
    ("ip[0] > 1 and not ip[0] > 1", true),
    ("ip[0] > 1 and ip[0] < 1", false),
    ("ether proto 1 and ether proto 2", true),
    ("ip and ip6", true),
    ("arp and rarp", true),
    ("(ip[0]=1 or ip[0]=2) and not ip[0]=1 and ip[0]=3", true),
    ("(ip[0]=1 or ip[0]=2) and ip[1]=5 and ip[0]=3", true),
    ("0/1=1", true),
    ("8/2=4", false),
    ("8/2=3", true),
    ("8/2=3 and ip", true),
    ("ip and 8/2=3", false),
    ("not (1=1)", true),
    ("not 1=1 or not 2=2", true),
    ("vlan and not vlan", false),
    ("vlan and ip and ip6", true),
    ("vlan 1 and vlan 1", false),
    ("ip and len < 0", false),
    ("tcp port 80 and udp port 80", true),
    ("ip host 1.2.3.4 and ip6", true),
    ("icmp and icmp6", true),
    ("ip proto 6 and ip proto 17", true),
    ("ip[9] = 6 and ip proto 17", false),
    ("ether[12:2] = 0x800 and ether[12:2] = 0x86dd", true),
    ("ether[12:2] & 0xffff = 0x800 and ip6", false),
    ("ip and ip", false),
    ("not ip or ip", false),
    ("0 & len = 1", true),
    ("len * 0 = 1", true),
    ("0 << len > 0 and ip", true),
    ("ip and 0 & len = 1", false),
    ("tcp-ece >> 24 & udp[21] < 0120 >> 30 and less 256", true),
];

/// Disagreements over the fixed seed's run, `(weir misses, weir over-detects)`, for the
/// generated expressions and for the pairs: the documented difference (ARCHITECTURE.md)
/// that weir's walk is path-sensitive where libpcap's threading loses facts at merges
/// (`(A or B) and not A and not B`, `port 80 and port 443`), plus the accessor/primitive
/// class below. The test fails when a run exceeds them; lower them when weir gets closer.
/// Of these over-detections, 5 generated and 62 pairs are on BSD loopback (NULL, LOOP):
/// compiling for a capture file, libpcap tests `ip6` there as three address families, and
/// its optimizer loses the contradiction at that merge (`ip6 proto 112 and port 8080 ...`
/// with an IPv4 test) where, compiling for Linux's single family, it found it.
const CEILING_GENERATED: (usize, usize) = (1, 20);
const CEILING_PAIRS: (usize, usize) = (0, 333);

/// Expressions where weir does not give libpcap's verdict (see the module doc of
/// `weir_pflang::rejects_all`): a packet accessor with a constant index and a primitive that
/// read the same bytes are one value to weir's IR, two to libpcap's first optimizer pass (an
/// indexed load against an absolute one).
const DOCUMENTED: &[&str] = &["ip[9] = 6 and ip proto 17"];

/// libpcap's verdict: `Some(true)` when it refuses with "expression rejects all packets",
/// `Some(false)` when it compiles with the optimizer on, `None` when it refuses otherwise.
fn libpcap_rejects_all(expr: &str, dlt: i32) -> Option<bool> {
    let lp = libpcap::required();
    lp.compile(expr, dlt, false).ok()?;
    match lp.compile(expr, dlt, true) {
        Ok(_) => Some(false),
        Err(m) if m.contains("rejects all packets") => Some(true),
        Err(_) => None,
    }
}

fn weir_rejects_all(expr: &str, link: LinkType, names: &NameDb) -> Option<bool> {
    let ast = weir_pflang::parse(expr).ok()?;
    let lowered = weir_pflang::lower_with_facts(ast.as_ref(), &Options::new(link), names).ok()?;
    Some(weir_pflang::libpcap_rejects_all(&lowered))
}

#[derive(Default)]
struct Tally {
    compared: usize,
    both: usize,
    misses: Vec<(LinkType, String)>,
    over: Vec<(LinkType, String)>,
    documented: usize,
}

impl Tally {
    fn check(&mut self, expr: &str, link: LinkType, names: &NameDb) {
        let Some(lp) = libpcap_rejects_all(expr, link.dlt() as i32) else { return };
        let Some(weir) = weir_rejects_all(expr, link, names) else { return };
        self.compared += 1;
        self.both += usize::from(lp && weir);
        if lp == weir {
            return;
        }
        if DOCUMENTED.contains(&expr) {
            self.documented += 1;
        } else if lp {
            self.misses.push((link, expr.to_string()));
        } else {
            self.over.push((link, expr.to_string()));
        }
    }

    fn report(&self, title: &str) -> String {
        println!(
            "{title}: {} compared, libpcap and weir both reject all {}; weir misses {}, \
             weir over-detects {}, documented {}",
            self.compared,
            self.both,
            self.misses.len(),
            self.over.len(),
            self.documented
        );
        let mut out = String::new();
        for (what, list) in [
            ("libpcap rejects all, weir does not", &self.misses),
            ("weir rejects all, libpcap does not", &self.over),
        ] {
            for (link, e) in list.iter().take(SHOW_LIMIT) {
                out.push_str(&format!("  {what}: [{}] {e}\n", link.name()));
            }
        }
        out
    }
}

fn skip() -> bool {
    if let Err(why) = libpcap::available() {
        println!("SKIPPED: rejects_all: {why}");
        return true;
    }
    false
}

#[test]
fn hand_list_matches_libpcap() {
    if skip() {
        return;
    }
    let names = NameDb::system_files_only();
    let mut wrong = Vec::new();
    for &(expr, expected) in HAND {
        let lp = libpcap_rejects_all(expr, 1);
        let weir = weir_rejects_all(expr, LinkType::Ethernet, &names);
        let weir_ok = weir == Some(expected) || DOCUMENTED.contains(&expr);
        if lp != Some(expected) || !weir_ok {
            wrong.push(format!("{expr}: expected {expected}, libpcap {lp:?}, weir {weir:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn generated_expressions_match_libpcap() {
    if skip() {
        return;
    }
    let names = NameDb::system_files_only();
    let count = std::env::var("WEIR_REJECTS_COUNT").ok().and_then(|v| v.parse().ok());
    let (generated_n, pairs_n) = count.map_or((GENERATED, PAIRS), |n: usize| (n, n));
    let start = std::time::Instant::now();
    let mut g = Generator::new(SEED);
    let mut pick = weir_testkit::SplitMix64::new(SEED ^ 0x5eed);
    let mut generated = Tally::default();
    for _ in 0..generated_n {
        let text = g.expr().render();
        let link = if pick.chance(70) { LinkType::Ethernet } else { LINKS[pick.below_usize(6)] };
        generated.check(&text, link, &names);
    }
    let mut pairs = Tally::default();
    for _ in 0..pairs_n {
        let (a, b) = (g.leaf().render(), g.leaf().render());
        let text = match pick.below_usize(4) {
            0 => format!("{a} and not {b}"),
            1 => format!("not {a} and {b}"),
            2 => format!("({a} or {b}) and not {a} and not {b}"),
            _ => format!("{a} and {b}"),
        };
        let link = if pick.chance(70) { LinkType::Ethernet } else { LINKS[pick.below_usize(6)] };
        pairs.check(&text, link, &names);
    }
    println!("rejects_all run took {:.1} s", start.elapsed().as_secs_f64());
    let mut report = generated.report("generated expressions");
    report.push_str(&pairs.report("generated pairs of primitives"));
    assert!(generated.compared * 2 >= generated_n, "too few comparable expressions");
    assert!(pairs.both * 100 >= pairs_n, "too few contradictions generated: {}", pairs.both);
    println!("{report}");
    let over = |t: &Tally, c: (usize, usize)| t.misses.len() > c.0 || t.over.len() > c.1;
    let exceeded =
        count.is_none() && (over(&generated, CEILING_GENERATED) || over(&pairs, CEILING_PAIRS));
    assert!(!exceeded, "more disagreements with libpcap than documented:\n{report}");
}

/// The link types added after the generated runs above were counted (their figures stay
/// comparable), each with its own run of generated expressions and of pairs of
/// primitives, ATM keywords among them on SunATM, pflog's on PFLOG (whose payload offset
/// is a prologue store libpcap's optimizer sees through).
const NEWER_LINKS: [LinkType; 17] = [
    LinkType::SunAtm,
    LinkType::Fddi,
    LinkType::TokenRing,
    LinkType::Pflog,
    LinkType::Ipnet,
    LinkType::Mtp2,
    LinkType::DsaTagBrcm,
    LinkType::AtmRfc1483,
    LinkType::IpOverFc,
    LinkType::Ltalk,
    LinkType::Enc,
    LinkType::BacnetMsTp,
    LinkType::NetAnalyzer,
    LinkType::NetAnalyzerTransparent,
    LinkType::JuniperEther,
    LinkType::JuniperVp,
    LinkType::Erf,
];
const NEWER_COUNT: usize = 2_000;
/// Disagreements allowed over all of [`NEWER_LINKS`] (weir misses, weir over-detects), as
/// measured: the over-detections are the documented class of the generated runs (weir's
/// walk keeps facts along each path); the misses are in classes not of the link types:
/// on LocalTalk, where every protocol test but `atalk` is false, `byte 14 & 8` (libpcap's
/// `byte &` bug: it tests a constant) and two mixed `and`/`or` chains of more than 8
/// switches, which weir lowers keeping the running value in a scratch slot and so never
/// refuses; on JUNIPER_VP a three-range `portrange` against `not pppoed` (the same magic
/// test) whose paths exceed the walk's budget (`rejects_all::BUDGET`), so weir keeps it.
/// 37 of the over-detections are on ENC, whose `ip6` is BSD loopback's three-family test
/// (see [`CEILING_GENERATED`]).
const CEILING_NEWER: (usize, usize) = (4, 95);

#[test]
fn newer_link_types_match_libpcap() {
    if skip() {
        return;
    }
    let names = NameDb::system_files_only();
    let mut tally = Tally::default();
    for (i, link) in NEWER_LINKS.into_iter().enumerate() {
        let seed = SEED ^ (0x2222 * (i as u64 + 1));
        let mut g = Generator::new(seed);
        g.atm_share = if link == LinkType::SunAtm { 15 } else { 0 };
        g.pf_share = if link == LinkType::Pflog { 15 } else { 0 };
        g.mtp_share = if matches!(link, LinkType::Mtp2 | LinkType::Erf) { 40 } else { 0 };
        let mut pick = weir_testkit::SplitMix64::new(seed ^ 0x5eed);
        for _ in 0..NEWER_COUNT {
            tally.check(&g.expr().render(), link, &names);
            let (a, b) = (g.leaf().render(), g.leaf().render());
            let text = match pick.below_usize(3) {
                0 => format!("{a} and not {b}"),
                1 => format!("not {a} and {b}"),
                _ => format!("{a} and {b}"),
            };
            tally.check(&text, link, &names);
        }
    }
    let report = tally.report("newer link types");
    println!("{report}");
    assert!(tally.both * 50 >= tally.compared, "too few contradictions generated: {}", tally.both);
    let exceeded = tally.misses.len() > CEILING_NEWER.0 || tally.over.len() > CEILING_NEWER.1;
    assert!(!exceeded, "more disagreements with libpcap than documented:\n{report}");
}
