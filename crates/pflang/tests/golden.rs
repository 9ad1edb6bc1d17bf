//! Golden listings: what weir compiles everyday filters to, checked in as text so that a
//! change to the lowering or the emitters shows up in review as a diff of the programs.
//!
//! For each filter in [`CASES`] (link type and expression) the file
//! testdata/pflang/golden/<link type>/<slug>.txt holds three listings of the UNOPTIMIZED
//! filter (the IR optimizer is still changing; unoptimized goldens only move when the
//! lowering or an emitter does): the classic program as `tcpdump -d` prints it, and the
//! eBPF socket-filter and XDP programs as `weir compile --ebpf` prints them. The test fails
//! with a line diff when a listing changes; `WEIR_BLESS=1` rewrites the files (and removes
//! those no case names any more).
//!
//! A golden must also mean the right thing, so a blessed file cannot be nonsense: the
//! classic listing is parsed back (weir_cbpf, tcpdump's `-d` form) and run over the packet
//! corpus, and the eBPF listings are assembled back, must be the emitted programs, and run
//! on weir's interpreter; every verdict must be libpcap's (its unoptimized program, the
//! semantics of record).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use weir_program::{PacketAccess, ProgType};

use weir_cbpf::translate::sk_buff_context;
use weir_cbpf::{CbpfFilter, Format, PacketMeta};
use weir_filter::emit::{cbpf, ebpf};
use weir_filter::Filter;
use weir_interp::{Config, Input, Interpreter};
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_program::abi::{xdp_action, Bindings};
use weir_program::Program;
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::Packet;

/// The filters with golden listings: everyday ones first, then a few on other link types.
const CASES: &[(LinkType, &str)] = &[
    (LinkType::Ethernet, "ip"),
    (LinkType::Ethernet, "ip6"),
    (LinkType::Ethernet, "arp"),
    (LinkType::Ethernet, "tcp"),
    (LinkType::Ethernet, "udp"),
    (LinkType::Ethernet, "icmp"),
    (LinkType::Ethernet, "tcp port 80"),
    (LinkType::Ethernet, "port 22"),
    (LinkType::Ethernet, "not port 22"),
    (LinkType::Ethernet, "udp port 53"),
    (LinkType::Ethernet, "port 80 or port 443 or port 8080"),
    (LinkType::Ethernet, "portrange 1000-2000"),
    (LinkType::Ethernet, "tcp dst portrange 8000-9000"),
    (LinkType::Ethernet, "host 10.0.0.1"),
    (LinkType::Ethernet, "src 10.0.0.1 and dst 192.168.1.1"),
    (LinkType::Ethernet, "host 10.0.0.1 or host 10.0.0.2 or host 10.0.0.3"),
    (LinkType::Ethernet, "net 192.168.0.0/16"),
    (LinkType::Ethernet, "ip and not net 10.0.0.0/8"),
    (LinkType::Ethernet, "ip6 host 2001:db8::1"),
    (LinkType::Ethernet, "ip6 net 2001:db8::/32"),
    (LinkType::Ethernet, "ip6 and udp"),
    (LinkType::Ethernet, "ip6 protochain 6"),
    (LinkType::Ethernet, "ip proto 47"),
    (LinkType::Ethernet, "ip multicast"),
    (LinkType::Ethernet, "ip6 multicast"),
    (LinkType::Ethernet, "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"),
    (
        LinkType::Ethernet,
        "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0 and not src and dst net 10.0.0.0/8",
    ),
    (LinkType::Ethernet, "icmp[icmptype] == icmp-echo"),
    (LinkType::Ethernet, "icmp6 and icmp6[icmp6type] == icmp6-echo"),
    (
        LinkType::Ethernet,
        "tcp port 22 and (((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)",
    ),
    (LinkType::Ethernet, "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420"),
    (LinkType::Ethernet, "ip[6:2] & 0x1fff != 0"),
    (LinkType::Ethernet, "ether[0] & 1 != 0 and ip[16] >= 224"),
    (LinkType::Ethernet, "len > 1000"),
    (LinkType::Ethernet, "less 64"),
    (LinkType::Ethernet, "ether broadcast"),
    (LinkType::Ethernet, "ether multicast"),
    (LinkType::Ethernet, "ether host 00:11:22:33:44:01"),
    (LinkType::Ethernet, "ether proto 0x88cc"),
    (LinkType::Ethernet, "vlan 100 and tcp"),
    (LinkType::Ethernet, "vlan 10 and vlan 100"),
    (LinkType::Ethernet, "mpls 5"),
    (LinkType::Ethernet, "mpls and ip"),
    (LinkType::Ethernet, "pppoes 0x1234 and ip"),
    (LinkType::Ethernet, "geneve and ip"),
    (LinkType::Ethernet, "llc"),
    (LinkType::Ethernet, "stp"),
    (LinkType::Ethernet, "tcp and (port 80 or port 443) and not host 10.0.0.1"),
    (LinkType::Ethernet, "icmp or arp or (udp port 53)"),
    (LinkType::LinuxSll, "ip"),
    (LinkType::LinuxSll, "tcp port 80"),
    (LinkType::LinuxSll, "host 10.0.0.1"),
    (LinkType::LinuxSll, "arp"),
    (LinkType::LinuxSll2, "ip6 and udp"),
    (LinkType::Raw, "ip"),
    (LinkType::Raw, "tcp port 80"),
    (LinkType::Raw, "ip6 and udp"),
    (LinkType::Raw, "host 10.0.0.1"),
];

/// Generated packets per link type (the hand-written edge cases come on top).
const CORPUS_PACKETS: usize = 400;
const CORPUS_SEED: u64 = 0x901d;

const SECTION_CLASSIC: &str = "== classic BPF (tcpdump -d) ==";
const SECTION_SOCKET: &str = "== eBPF socket filter ==";
const SECTION_XDP: &str = "== eBPF XDP ==";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pflang/golden")
}

fn blessing() -> bool {
    std::env::var_os("WEIR_BLESS").is_some_and(|value| value == "1")
}

/// A file name from an expression: lower-case letters, digits and dots, other runs of
/// characters as one `-`, at most 60 characters (cut at a `-`).
fn slug(expr: &str) -> String {
    let mut out = String::new();
    for c in expr.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.len() > 60 {
        match out.rfind('-') {
            Some(cut) => out.truncate(cut),
            None => out.truncate(60),
        }
    }
    out.trim_end_matches('-').to_string()
}

fn relative_path(link: LinkType, expr: &str) -> PathBuf {
    Path::new(&link.name().to_ascii_lowercase()).join(format!("{}.txt", slug(expr)))
}

fn compile(link: LinkType, expr: &str) -> Filter {
    weir_pflang::compile(expr, &Options::new(link), &NameDb::builtin())
        .unwrap_or_else(|e| panic!("{} `{expr}`: {}", link.name(), e.render(expr)))
}

/// The golden file's text for one case.
fn render(link: LinkType, expr: &str, filter: &Filter) -> String {
    let classic = cbpf::emit(filter).unwrap_or_else(|e| panic!("`{expr}`: classic BPF: {e}"));
    let ebpf_text = |target| {
        let program =
            ebpf::emit(filter, target).unwrap_or_else(|e| panic!("`{expr}`: eBPF {target}: {e}"));
        weir_isa::asm::disassemble(program.insns())
    };
    let y = link.name();
    let quoted = expr.replace('\'', r"'\''");
    let mut out = String::new();
    let _ = writeln!(out, "# {expr}");
    let _ = writeln!(out, "# Link type {y}, IR optimizer off. The same output comes from");
    let _ = writeln!(out, "#   weir compile -O0 -y {y} -d '{quoted}'");
    let _ = writeln!(out, "#   weir compile -O0 -y {y} --ebpf --target socket|xdp '{quoted}'");
    let _ = writeln!(
        out,
        "# Checked by crates/pflang/tests/golden.rs; rewrite with WEIR_BLESS=1 cargo test \
         -p weir-pflang --test golden"
    );
    let _ = writeln!(out, "\n{SECTION_CLASSIC}");
    out.push_str(&weir_isa::cbpf::format_listing(&classic));
    let _ = writeln!(out, "\n{SECTION_SOCKET}");
    out.push_str(&ebpf_text(ProgType::SocketFilter));
    let _ = writeln!(out, "\n{SECTION_XDP}");
    out.push_str(&ebpf_text(ProgType::Xdp));
    out
}

/// The lines between `header` and the next section header (or the end).
fn section<'a>(text: &'a str, header: &str) -> Option<String> {
    let start = text.find(header)? + header.len();
    let rest: &'a str = text.get(start..)?;
    let end = rest.find("\n== ").map_or(rest.len(), |i| i + 1);
    Some(rest.get(..end)?.trim_start_matches('\n').to_string())
}

/// The first differing lines of two texts, as a short unified-style excerpt.
fn line_diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let first = w.iter().zip(&g).position(|(a, b)| a != b).unwrap_or(w.len().min(g.len()));
    let (mut w_end, mut g_end) = (w.len(), g.len());
    while w_end > first && g_end > first && w.get(w_end - 1) == g.get(g_end - 1) {
        w_end -= 1;
        g_end -= 1;
    }
    let mut out = format!("@@ line {} @@\n", first + 1);
    for line in w.get(first.saturating_sub(2)..first).unwrap_or_default() {
        let _ = writeln!(out, "  {line}");
    }
    let mut shown = 0;
    for line in w.get(first..w_end).unwrap_or_default() {
        if shown < 40 {
            let _ = writeln!(out, "- {line}");
        }
        shown += 1;
    }
    for line in g.get(first..g_end).unwrap_or_default() {
        if shown < 80 {
            let _ = writeln!(out, "+ {line}");
        }
        shown += 1;
    }
    if shown > 80 {
        let _ = writeln!(out, "  ... {} more changed lines", shown - 80);
    }
    out
}

/// The Ethernet corpus (seeded traffic and every hand-written edge case), re-framed for
/// `link`.
fn packets(link: LinkType) -> Vec<Packet> {
    let mut eth = weir_testkit::corpus(CORPUS_SEED, CORPUS_PACKETS);
    eth.extend(weir_testkit::edge_cases());
    eth.extend(weir_testkit::link_edge_cases());
    eth.extend(weir_testkit::net_edge_cases());
    eth.iter().map(|p| weir_testkit::relink(p, link).expect("relink knows the link type")).collect()
}

/// libpcap's unoptimized program for `expr`, behind a prologue that zeroes scratch memory
/// (libpcap leaves it uninitialised, and a failed `geneve` leaves later tests reading a
/// cell nothing wrote; weir's cells start at 0).
fn libpcap_program(link: LinkType, expr: &str) -> Vec<BpfInsn> {
    const LD_IMM: u16 = 0x00;
    const ST: u16 = 0x02;
    let body = libpcap::required()
        .compile(expr, link.dlt() as i32, false)
        .unwrap_or_else(|e| panic!("libpcap refuses `{expr}`: {e}"));
    let mut prog = vec![BpfInsn { code: LD_IMM, jt: 0, jf: 0, k: 0 }];
    prog.extend((0..16).map(|cell| BpfInsn { code: ST, jt: 0, jf: 0, k: cell }));
    prog.extend(body);
    prog
}

fn interpreter(program: &Program, target: ProgType) -> Result<Interpreter, String> {
    weir_program::validate(program).map_err(|e| format!("invalid program: {e}"))?;
    let mut bindings = Bindings::new();
    bindings.context = Some(target.context_layout());
    let program = weir_program::Verified::structural(program.clone()).map_err(|e| e.to_string())?;
    Ok(Interpreter::new(&program, bindings, Config::default()))
}

/// The eBPF program a golden section holds: assembled back, it must be exactly what the
/// emitter produces now.
fn assembled(text: &str, emitted: &Program, what: &str) -> Result<Program, String> {
    let insns = weir_isa::asm::assemble(text).map_err(|e| format!("{what}: {}", e.render(text)))?;
    if insns != emitted.insns() {
        return Err(format!("{what}: the listing does not assemble to the emitted program"));
    }
    Ok(Program::from_insns(insns))
}

/// What running a golden file's programs over the corpus found.
#[derive(Default)]
struct Meaning {
    /// Packets libpcap accepts.
    accepted: usize,
    /// Packets on which weir's IR and libpcap disagree (documented differences, such as
    /// `protochain`'s bounded walk, which tests/differential.rs accounts for): there the
    /// programs must give the IR's verdict instead.
    ir_differs: Vec<String>,
}

/// Runs a golden file's three programs over `packets`: each verdict must be libpcap's (or
/// the IR's, where the IR differs from libpcap).
fn check_meaning(
    link: LinkType,
    expr: &str,
    filter: &Filter,
    text: &str,
    packets: &[Packet],
) -> Result<Meaning, String> {
    let classic_text = section(text, SECTION_CLASSIC).ok_or("no classic section")?;
    let classic = weir_cbpf::parse(classic_text.as_bytes(), Format::Listing)
        .map_err(|e| format!("the classic listing does not parse: {e}"))?;
    // A protochain loop jumps backward, as libpcap's does: only libpcap's rules admit it.
    let classic = if expr.contains("protochain") {
        CbpfFilter::new_libpcap(&classic)
    } else {
        CbpfFilter::new(&classic)
    };
    let classic = classic.map_err(|e| format!("the classic listing is invalid: {e}"))?;
    let mut engines = Vec::new();
    for (header, target) in [(SECTION_SOCKET, ProgType::SocketFilter), (SECTION_XDP, ProgType::Xdp)]
    {
        let listing = section(text, header).ok_or_else(|| format!("no {target} section"))?;
        let emitted = ebpf::emit(filter, target).map_err(|e| format!("{target}: {e}"))?;
        let program = assembled(&listing, &emitted, &target.to_string())?;
        engines.push((target, interpreter(&program, target)?));
    }
    let lp = libpcap_program(link, expr);
    let mut meaning = Meaning::default();
    for p in packets {
        let (data, wire_len) = (&p.data[..], p.wire_len);
        let libpcap = libpcap::required()
            .run(&lp, data, wire_len)
            .ok_or_else(|| format!("libpcap's validator refuses its program for `{expr}`"))?;
        let ir = filter.run(data, wire_len);
        if ir != libpcap {
            meaning.ir_differs.push(p.description.clone());
        }
        let want = if ir == libpcap { libpcap } else { ir };
        meaning.accepted += usize::from(libpcap != 0);
        let mut got = vec![("classic", u64::from(classic.run(data, wire_len)), u64::from(want))];
        for (target, engine) in &engines {
            let mut packet = data.to_vec();
            let result = match target.packet_access() {
                PacketAccess::SkBuff => {
                    let mut ctx = sk_buff_context(wire_len, &PacketMeta::default());
                    let input = Input::new().ctx(&mut ctx).packet(&mut packet);
                    engine.run(&mut engine.cache(), input)
                }
                // XDP sees whole frames only.
                PacketAccess::Xdp if p.is_truncated() || data.len() > 0xffff => continue,
                PacketAccess::Xdp => {
                    let mut ctx = vec![0u8; target.context_layout().size as usize];
                    let input = Input::new().ctx(&mut ctx).packet(&mut packet);
                    engine.run(&mut engine.cache(), input)
                }
            };
            let expect = match target.packet_access() {
                PacketAccess::SkBuff => u64::from(want),
                PacketAccess::Xdp if want != 0 => u64::from(xdp_action::PASS),
                PacketAccess::Xdp => u64::from(xdp_action::DROP),
            };
            let name = if *target == ProgType::Xdp { "eBPF XDP" } else { "eBPF socket" };
            got.push((name, result.map_err(|t| format!("{name}: trap {t:?}"))?, expect));
        }
        for (name, value, expect) in got {
            if value != expect {
                let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
                return Err(format!(
                    "packet `{}` ({} of {wire_len} bytes) {hex}: {name} returns {value}, \
                     libpcap {libpcap}, IR {ir}",
                    p.description,
                    data.len()
                ));
            }
        }
    }
    Ok(meaning)
}

#[test]
fn slugs_are_file_names() {
    assert_eq!(slug("tcp port 80"), "tcp-port-80");
    assert_eq!(
        slug("tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"),
        "tcp-tcpflags-tcp-syn-tcp-ack-tcp-syn"
    );
    assert_eq!(slug("net 192.168.0.0/16"), "net-192.168.0.0-16");
    let long = slug("tcp port 22 and (((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)");
    assert!(long.len() <= 60 && !long.ends_with('-'), "{long}");
    let paths: BTreeSet<PathBuf> = CASES.iter().map(|&(l, e)| relative_path(l, e)).collect();
    assert_eq!(paths.len(), CASES.len(), "two cases share a golden file name");
}

#[test]
fn golden_listings_are_current_and_mean_what_libpcap_means() {
    let dir = golden_dir();
    let bless = blessing();
    let mut failures = Vec::new();
    let mut expected_files = BTreeSet::new();
    let mut corpora: Vec<(LinkType, Vec<Packet>)> = Vec::new();
    let mut never = Vec::new();
    let mut ir_differs = Vec::new();
    for &(link, expr) in CASES {
        let relative = relative_path(link, expr);
        let path = dir.join(&relative);
        expected_files.insert(relative.clone());
        let filter = compile(link, expr);
        let want = render(link, expr, &filter);
        if bless {
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&path, &want));
            if let Err(e) = written {
                panic!("{}: {e}", path.display());
            }
        }
        let on_disk = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                failures.push(format!("{}: {e} (create it with WEIR_BLESS=1)", path.display()));
                continue;
            }
        };
        if on_disk != want {
            failures.push(format!(
                "{} is stale (rewrite with WEIR_BLESS=1 after checking the change):\n{}",
                relative.display(),
                line_diff(&on_disk, &want)
            ));
            continue;
        }
        if !corpora.iter().any(|(l, _)| *l == link) {
            corpora.push((link, packets(link)));
        }
        let corpus = corpora.iter().find(|(l, _)| *l == link).map(|(_, p)| p.as_slice());
        let corpus = corpus.unwrap_or_default();
        match check_meaning(link, expr, &filter, &on_disk, corpus) {
            Ok(m) => {
                if m.accepted == 0 || m.accepted == corpus.len() {
                    never.push(format!("{} `{expr}`", link.name()));
                }
                if !m.ir_differs.is_empty() {
                    ir_differs.push(format!(
                        "{} `{expr}`: {} packets ({})",
                        link.name(),
                        m.ir_differs.len(),
                        m.ir_differs.join("; ")
                    ));
                }
            }
            Err(e) => failures.push(format!("{} `{expr}`: {e}", relative.display())),
        }
    }
    // Files no case names any more.
    let mut on_disk = BTreeSet::new();
    for sub in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(sub.path()).into_iter().flatten().flatten() {
            let path = file.path();
            if let Ok(relative) = path.strip_prefix(&dir) {
                on_disk.insert(relative.to_path_buf());
            }
        }
    }
    for stale in on_disk.difference(&expected_files) {
        if bless {
            let path = dir.join(stale);
            std::fs::remove_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else {
            failures
                .push(format!("{}: no case names it (WEIR_BLESS=1 removes it)", stale.display()));
        }
    }
    println!(
        "{} golden files, {} link types; every listing runs with libpcap's verdicts",
        CASES.len(),
        corpora.len()
    );
    for line in &ir_differs {
        println!("IR differs from libpcap (documented; the programs follow the IR): {line}");
    }
    if !never.is_empty() {
        println!(
            "filters the corpus does not split (no accept or no reject): {}",
            never.join(", ")
        );
    }
    assert!(failures.is_empty(), "{} golden failures:\n{}", failures.len(), failures.join("\n"));
    // The check above means something only if the corpus exercises the filters.
    assert!(never.len() * 10 <= CASES.len(), "too many filters the corpus does not split");
    // Documented differences are rare: only `protochain`'s bounded walk should show here.
    assert!(ir_differs.len() <= 2, "IR differs from libpcap on {} filters", ir_differs.len());
}
