//! Rejections: weir refuses an expression exactly when libpcap (the oracle of record) does,
//! and says where.
//!
//! Inputs: testdata/pflang/semantic-rejects.txt and syntax-rejects.txt (libpcap refuses
//! every line; re-checked here so the lists cannot drift), and generated near misses
//! (weir_testkit::pflang_gen::near_miss: numbers out of range, unknown names, qualifiers
//! that do not apply), some of which libpcap in fact accepts, so both directions are
//! tested. Every weir error must carry a non-empty message and a span inside the
//! expression, and render a caret under a column of it.
//!
//! Names resolve from the machine's files only (`NameDb::system_files_only`), as libpcap's
//! resolver does. The oracle compiles for a capture file, as `tcpdump -r` does: like weir,
//! which filters capture files, it refuses `inbound`, `outbound` and `ifindex` where the
//! link type has no such field ("... when reading savefiles"), so those refusals are plain
//! agreement, checked like every other.

use std::collections::BTreeMap;

use weir_pflang::names::NameDb;
use weir_pflang::{CompileError, LinkType, Options};
use weir_sys::libpcap;
use weir_testkit::pflang_gen::{self, near_miss, Generator, Node};

use crate::generalize;

const NEAR_MISS_SEED: u64 = 0x0a7e_1155;
const NEAR_MISSES: usize = 6_000;
const SHOW_LIMIT: usize = 25;

/// A list's expressions (semantic-rejects.txt keeps libpcap's message after a TAB and '#').
fn list(name: &str) -> Vec<String> {
    crate::testdata_list(name)
        .into_iter()
        .map(|l| l.split("\t#").next().unwrap_or(&l).to_string())
        .collect()
}

fn weir_compile(expr: &str, link: LinkType, names: &NameDb) -> Result<(), CompileError> {
    weir_pflang::compile(expr, &Options::new(link), names).map(|_| ())
}

/// The checks every weir error must pass: a message, a span inside the expression, and a
/// rendering whose caret line points into it.
fn error_is_well_placed(expr: &str, err: &CompileError) -> Result<(), String> {
    let problem = |what: &str| Err(format!("{what} for `{expr}`: {err:?}"));
    if err.message.trim().is_empty() {
        return problem("empty message");
    }
    let (start, end) = (err.span.start, err.span.end);
    if start > end || end > expr.len() {
        return problem("span outside the expression");
    }
    if !expr.is_char_boundary(start) || !expr.is_char_boundary(end) {
        return problem("span splits a character");
    }
    let chars = expr.chars().count();
    let column = err.column(expr);
    // Column `chars + 1` is the end of the expression ("found end of expression").
    if column == 0 || column > chars + 1 {
        return problem(&format!("column {column} outside 1..={}", chars + 1));
    }
    let rendered = err.render(expr);
    let lines: Vec<&str> = rendered.lines().collect();
    let [head, shown, carets] = lines[..] else {
        return problem(&format!("rendering is not three lines:\n{rendered}"));
    };
    if !head.contains(&err.message) || !head.contains(&format!("column {column}")) {
        return problem(&format!("first line does not give the column and message: {head}"));
    }
    if shown.chars().count() != chars + 2 {
        return problem(&format!("second line is not the expression: {shown:?}"));
    }
    let caret = carets.find('^').map(|byte| carets[..byte].chars().count());
    if caret != Some(column + 1) || carets.trim_start().chars().any(|c| c != '^') {
        return problem(&format!("caret not under column {column}:\n{rendered}"));
    }
    Ok(())
}

/// Each listed expression: libpcap refuses it, weir refuses it, and weir's error is well
/// placed.
fn check_listed_rejects(name: &str, min: usize) {
    let names = NameDb::system_files_only();
    let exprs = list(name);
    assert!(exprs.len() >= min, "{name}: only {} expressions", exprs.len());
    let mut failures = Vec::new();
    for e in &exprs {
        if libpcap::required().compile(e, 1, false).is_ok() {
            failures.push(format!("libpcap now accepts `{e}` (listed in {name})"));
            continue;
        }
        match weir_compile(e, LinkType::Ethernet, &names) {
            Ok(()) => failures.push(format!("weir accepts `{e}`, libpcap refuses it")),
            Err(err) => {
                if let Err(m) = error_is_well_placed(e, &err) {
                    failures.push(m);
                }
            }
        }
    }
    println!("{name}: {} expressions, {} failures", exprs.len(), failures.len());
    let shown: Vec<_> = failures.iter().take(SHOW_LIMIT).collect();
    assert!(
        failures.is_empty(),
        "{name}: {} failures (first {}):\n{}",
        failures.len(),
        shown.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn semantic_rejects_are_rejected_with_a_place() {
    check_listed_rejects("semantic-rejects.txt", 100);
}

#[test]
fn syntax_rejects_are_rejected_with_a_place() {
    check_listed_rejects("syntax-rejects.txt", 150);
}

/// How weir and libpcap differ on one expression, if they do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Disagreement {
    /// libpcap refuses with this message; weir accepts.
    WeirAccepts(String),
    /// libpcap accepts; weir refuses with this message.
    WeirRejects(String),
    /// Both refuse, but weir's error is badly placed.
    BadError(String),
}

impl Disagreement {
    fn class(&self) -> String {
        match self {
            Disagreement::WeirAccepts(m) => format!("weir accepts, libpcap: {}", generalize(m)),
            Disagreement::WeirRejects(m) => format!("libpcap accepts, weir: {}", generalize(m)),
            Disagreement::BadError(_) => "badly placed error".to_string(),
        }
    }
}

/// libpcap's refusal of a direction or interface test where the capture file has no such
/// field ("inbound/outbound not supported on Ethernet when reading savefiles").
fn is_savefile_refusal(message: &str) -> bool {
    let Some(rest) = message
        .strip_prefix("inbound/outbound not supported on ")
        .or_else(|| message.strip_prefix("ifindex not supported on "))
    else {
        return false;
    };
    rest.ends_with(" when reading savefiles")
}

fn compare(expr: &str, link: LinkType, names: &NameDb) -> Option<Disagreement> {
    let lp = libpcap::required().compile(expr, link.dlt() as i32, false);
    let weir = weir_compile(expr, link, names);
    match (lp, weir) {
        (Ok(_), Ok(())) => None,
        (Err(m), Ok(())) => Some(Disagreement::WeirAccepts(m)),
        (Ok(_), Err(e)) => Some(Disagreement::WeirRejects(e.message)),
        (Err(_), Err(e)) => error_is_well_placed(expr, &e).err().map(Disagreement::BadError),
    }
}

#[test]
fn near_misses_are_rejected_exactly_when_libpcap_rejects_them() {
    let names = NameDb::system_files_only();
    // WEIR_NEAR_MISS_SEED explores another seed instead of the fixed one.
    let seed = std::env::var("WEIR_NEAR_MISS_SEED")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(NEAR_MISS_SEED);
    let mut g = Generator::new(seed);
    let mut pick = weir_testkit::SplitMix64::new(seed);
    let others = [LinkType::LinuxSll, LinkType::LinuxSll2, LinkType::Raw, LinkType::Null];
    let (mut libpcap_rejects, mut libpcap_accepts) = (0, 0);
    let mut by_class: BTreeMap<String, Vec<(Node, LinkType)>> = BTreeMap::new();
    // Near misses libpcap refuses as weir does for a capture file without a direction or
    // interface field (counted to show the generator still makes them).
    let mut savefile = 0;
    for _ in 0..NEAR_MISSES {
        let tree = near_miss(&mut g);
        let link = if pick.chance(80) {
            LinkType::Ethernet
        } else {
            pick.pick(&others).unwrap_or(LinkType::Ethernet)
        };
        let text = tree.render();
        match libpcap::required().compile(&text, link.dlt() as i32, false) {
            Ok(_) => libpcap_accepts += 1,
            Err(m) => {
                libpcap_rejects += 1;
                savefile += usize::from(is_savefile_refusal(&m));
            }
        }
        if let Some(d) = compare(&text, link, &names) {
            by_class.entry(d.class()).or_default().push((tree, link));
        }
    }
    println!(
        "near misses: {NEAR_MISSES} expressions, libpcap rejects {libpcap_rejects}, accepts \
         {libpcap_accepts}; {savefile} refused by libpcap as on a savefile \
         (inbound/outbound/ifindex); {} disagreements in {} classes",
        by_class.values().map(Vec::len).sum::<usize>(),
        by_class.len()
    );
    assert!(savefile > 0, "no savefile refusals seen: is the near-miss generator changed?");
    // The generator must mostly produce expressions libpcap refuses, and some it accepts.
    assert!(libpcap_rejects * 2 > NEAR_MISSES, "too few near misses are invalid");
    assert!(libpcap_accepts > 50, "too few near misses are valid");
    if by_class.is_empty() {
        return;
    }
    let mut report = String::new();
    for (class, cases) in &by_class {
        report.push_str(&format!("  {:>5} x {class}\n", cases.len()));
    }
    // One shrunk example per class.
    for (class, cases) in by_class.iter().take(SHOW_LIMIT) {
        let (tree, link) = &cases[0];
        let still = |t: &str| compare(t, *link, &names).is_some_and(|d| d.class() == *class);
        let minimal = pflang_gen::shrink(tree, 300, still).text;
        report.push_str(&format!("\n[{}] {class}\n  minimal: {minimal}\n", link.name()));
        if let Some(Disagreement::BadError(m)) = compare(&minimal, *link, &names) {
            report.push_str(&format!("  {m}\n"));
        }
    }
    panic!("weir and libpcap disagree on near misses:\n{report}");
}

#[test]
fn error_placement_check_catches_bad_spans() {
    let e = "tcp port 70000";
    let good = CompileError::new(weir_pflang::Span::new(9, 14), "port out of range");
    assert_eq!(error_is_well_placed(e, &good), Ok(()));
    let outside = CompileError::new(weir_pflang::Span::new(9, 40), "port out of range");
    assert!(error_is_well_placed(e, &outside).is_err());
    let empty = CompileError::new(weir_pflang::Span::new(9, 14), " ");
    assert!(error_is_well_placed(e, &empty).is_err());
    let at_end = CompileError::new(weir_pflang::Span::new(14, 14), "expected an id");
    assert_eq!(error_is_well_placed(e, &at_end), Ok(()));
}

/// On every link type weir compiles for, the primitives that only some link types take
/// (and a few everyday ones): where libpcap refuses one, weir refuses it with libpcap's
/// message word for word ("'vpi' supported only on raw ATM", "no VLAN support for FDDI",
/// "LAPD link-layer type filtering not implemented" ...); where libpcap takes it, weir
/// takes it. That includes `inbound`/`outbound`/`ifindex`, which libpcap refuses on a capture
/// file where the link type has no such field, and so does weir.
#[test]
fn link_type_refusals_are_libpcaps_words() {
    if let Err(reason) = libpcap::available() {
        println!("SKIPPED: link_type_refusals_are_libpcaps_words: {reason}");
        return;
    }
    const EXPRS: &[&str] = &[
        "ip",
        "ip6",
        "arp",
        "iso",
        "tcp port 80",
        "ether host 0:1:2:3:4:5",
        "ether src host localhost",
        "broadcast",
        "multicast",
        "ip broadcast",
        "vlan",
        "mpls",
        "pppoes",
        "llc",
        "llc i",
        "lane",
        "vpi 1",
        "vci > 3",
        "oam",
        "connectmsg",
        "ifname em0",
        "ifname abcdefghijklmnop",
        "ruleset main",
        "rnr 1",
        "reason short",
        "reason nosuch",
        "action pass",
        "fisu",
        "hlssu",
        "sio 3",
        "opc 20000",
        "hdpc 1",
        "type data",
        "wlan addr1 0:1:2:3:4:5",
        "link host $d5",
        "radio[0] = 0",
        "inbound",
        "outbound",
        "ifindex 1",
        "link[0] = 1",
    ];
    let names = NameDb::system_files_only();
    let lp = libpcap::required();
    let (mut compared, mut savefile) = (0, 0);
    let mut wrong = Vec::new();
    for link in weir_pflang::LINK_TYPES {
        for &expr in EXPRS {
            compared += 1;
            let theirs = lp.compile(expr, link.dlt() as i32, false);
            let ours = weir_compile(expr, link, &names);
            match (theirs, ours) {
                (Ok(_), Ok(())) => {}
                (Err(t), Err(o)) if t == o.message => {
                    savefile += usize::from(is_savefile_refusal(&t))
                }
                (t, o) => wrong.push(format!(
                    "[{}] `{expr}`: libpcap {:?}, weir {:?}",
                    link.name(),
                    t.map(|_| "accepts"),
                    o.map(|_| "accepts").map_err(|e| e.message)
                )),
            }
        }
    }
    println!(
        "link-type refusals: {compared} compared on {} link types, {savefile} refused by both \
         as on a savefile (no direction or interface field)",
        weir_pflang::LINK_TYPES.len()
    );
    assert!(savefile > 0, "no direction or interface refusals seen");
    assert!(wrong.is_empty(), "{} differ:\n{}", wrong.len(), wrong.join("\n"));
}

/// The oracle compiles as for a capture file of each link type weir compiles for: libpcap
/// reads the file's link-type field back as the same DLT (`pcap_datalink`, checked by
/// weir-sys) for every one, and compiles the empty expression (accept all) there.
#[test]
fn the_oracle_opens_a_capture_file_of_every_link_type() {
    if let Err(reason) = libpcap::available() {
        println!("SKIPPED: the_oracle_opens_a_capture_file_of_every_link_type: {reason}");
        return;
    }
    let failures: Vec<String> = weir_pflang::LINK_TYPES
        .iter()
        .filter_map(|link| {
            let dlt = link.dlt() as i32;
            libpcap::required()
                .compile("", dlt, false)
                .err()
                .map(|e| format!("{}: {e}", link.name()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
