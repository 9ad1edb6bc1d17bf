//! Differential syntax tests against the system libpcap (the oracle of record): every
//! expression libpcap accepts must parse here, every one it rejects with "syntax error"
//! must be rejected here. Each list is re-checked against libpcap on every run, so a
//! list that drifts from the oracle fails loudly.

use weir_pflang::LinkType;
use weir_sys::libpcap;
use weir_testkit::SplitMix64;

use crate::{testdata_list as list, SOUP};

/// libpcap's verdict (unoptimized): `Ok(())` or its error text. The oracle compiles for a
/// capture file, as `tcpdump -r` does, and so refuses `inbound`, `outbound` and `ifindex` on
/// Ethernet, which records neither, as soon as it parses them; as a parse oracle it gets the
/// expressions that mention them on Linux cooked v2 captures, which record both. Others
/// compile for Ethernet.
fn libpcap_compile(expr: &str) -> Result<(), String> {
    let dlt = if mentions_direction(expr) { LinkType::LinuxSll2.dlt() } else { 1 };
    libpcap::required().compile(expr, dlt as i32, false).map(drop)
}

/// Whether `expr` has a word `inbound`, `outbound` or `ifindex`.
fn mentions_direction(expr: &str) -> bool {
    expr.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| matches!(w, "inbound" | "outbound" | "ifindex"))
}

#[test]
fn libpcap_valid_expressions_parse() {
    let exprs = list("valid.txt");
    assert!(exprs.len() >= 500, "only {} valid expressions", exprs.len());
    let mut failures = Vec::new();
    // Lines that also have Ethernet-only primitives (`ether src`, `vlan`, `llc` ...): no
    // link type a capture file can have takes both those and a direction test, so libpcap
    // confirms no more than that they are no syntax error: it refuses them on Linux cooked
    // v2 for a link-type reason, and on Ethernet at the direction test.
    let mut no_single_link = 0;
    for e in &exprs {
        if let Err(msg) = libpcap_compile(e) {
            // On Ethernet libpcap must then get as far as the direction test.
            let ethernet = libpcap::required().compile(e, 1, false).err().unwrap_or_default();
            if !mentions_direction(e)
                || msg.contains("syntax error")
                || !ethernet.ends_with(" when reading savefiles")
            {
                failures.push(format!("libpcap now rejects {e:?}: {msg} (Ethernet: {ethernet})"));
                continue;
            }
            no_single_link += 1;
        }
        if let Err(err) = weir_pflang::parse(e) {
            failures.push(err.render(e));
        }
    }
    println!(
        "valid.txt: {} expressions; {no_single_link} with a direction test and Ethernet-only \
         primitives, which libpcap refuses on Linux cooked v2 for a link-type reason",
        exprs.len()
    );
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn libpcap_syntax_errors_are_rejected() {
    let exprs = list("syntax-rejects.txt");
    assert!(exprs.len() >= 150, "only {} invalid expressions", exprs.len());
    let mut failures = Vec::new();
    for e in &exprs {
        match libpcap_compile(e) {
            Err(msg) if msg.contains("syntax error") => {}
            other => failures.push(format!("libpcap gives {other:?} for {e:?}")),
        }
        if let Ok(ast) = weir_pflang::parse(e) {
            failures.push(format!("weir accepts {e:?} as {ast:?}"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn semantic_rejects_are_not_libpcap_syntax_errors() {
    let exprs = list("semantic-rejects.txt");
    assert!(!exprs.is_empty());
    for line in &exprs {
        let e = line.split("\t#").next().unwrap_or(line);
        match libpcap_compile(e) {
            Err(msg) => assert!(!msg.contains("syntax error"), "{e:?}: {msg}"),
            Ok(()) => panic!("libpcap now accepts {e:?}"),
        }
    }
}

#[test]
fn random_token_soups_agree_with_libpcap_on_syntax() {
    let mut rng = SplitMix64::new(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.next_u64();
    let (mut accepted, mut syntax, mut other) = (0, 0, 0);
    let mut failures = Vec::new();
    for _ in 0..20_000 {
        let n = 1 + (next() % 7) as usize;
        let words: Vec<&str> =
            (0..n).map(|_| SOUP[(next() % SOUP.len() as u64) as usize]).collect();
        let e = words.join(" ");
        let weir = weir_pflang::parse(&e);
        match libpcap_compile(&e) {
            Ok(()) => {
                accepted += 1;
                if let Err(err) = weir {
                    failures.push(format!("libpcap accepts, weir rejects:\n{}", err.render(&e)));
                }
            }
            Err(msg) if msg.contains("syntax error") => {
                syntax += 1;
                if weir.is_ok() {
                    failures.push(format!("libpcap: {msg}; weir accepts {e:?}"));
                }
            }
            Err(_) => other += 1,
        }
    }
    println!("libpcap accepted {accepted}, syntax errors {syntax}, other errors {other}");
    assert!(accepted > 100 && syntax > 1000, "soup too one-sided: {accepted} / {syntax}");
    failures.truncate(30);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
