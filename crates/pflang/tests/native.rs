//! pflang all the way to native code: every expression of testdata/pflang/everyday.txt and
//! testdata/pflang/lower-net.txt that libpcap accepts is compiled by weir (lowered and
//! optimized, Ethernet, netmask 255.255.255.0) and by `weir_jit::filter`, and run over the
//! testkit's corpus and edge cases. On every packet the native verdict must equal the IR's
//! (`Filter::matches`), and, where the IR agrees with libpcap's unoptimized program, libpcap's
//! too. Packets where the IR itself disagrees with libpcap are counted and shown, not failed:
//! the lowering's differential tests own those.
//!
//! It also prints how long native compilation takes per expression (meaningful in release
//! builds only: `cargo test --release -p weir-pflang --test integration native:: --
//! --nocapture`).

use std::time::{Duration, Instant};

use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_sys::libpcap;
use weir_testkit::Packet;

use crate::compile;

const NETMASK: u32 = 0xffff_ff00;
const DLT_EN10MB: i32 = 1;

fn expressions(file: &str) -> Vec<String> {
    let path = format!("{}/../../testdata/pflang/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn packets() -> Vec<Packet> {
    let mut all = weir_testkit::corpus(0x4a17, 1500);
    all.extend(weir_testkit::edge_cases());
    all.extend(weir_testkit::link_edge_cases());
    all.extend(weir_testkit::net_edge_cases());
    all
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Default)]
struct Tally {
    checked: usize,
    libpcap_refuses: usize,
    weir_refuses: Vec<String>,
    verdicts: u64,
    /// Packets where the IR disagrees with libpcap's unoptimized program.
    ir_disagrees: Vec<String>,
    failures: Vec<String>,
    compile_times: Vec<(Duration, String)>,
}

fn check_file(file: &str, names: &NameDb, packets: &[Packet], tally: &mut Tally) {
    let options = Options { linktype: LinkType::Ethernet, netmask: Some(NETMASK) };
    for expr in expressions(file) {
        let Ok(pcap) = libpcap::required().compile_with_netmask(&expr, DLT_EN10MB, false, NETMASK)
        else {
            tally.libpcap_refuses += 1;
            continue;
        };
        let filter = match compile(&expr, &options, names) {
            Ok(filter) => filter,
            Err(e) => {
                tally.weir_refuses.push(format!("{file}: `{expr}`: {}", e.message));
                continue;
            }
        };
        let started = Instant::now();
        let native = match weir_jit::filter::compile(&filter) {
            Ok(native) => native,
            Err(e) => {
                tally.failures.push(format!("`{expr}`: native compilation failed: {e}"));
                continue;
            }
        };
        tally.compile_times.push((started.elapsed(), expr.clone()));
        tally.checked += 1;
        for p in packets {
            let ir = filter.matches(&p.data, p.wire_len);
            let got = native.matches(&p.data, p.wire_len);
            let oracle = libpcap::required().run(&pcap, &p.data, p.wire_len).map(|v| v != 0);
            tally.verdicts += 1;
            if got != ir {
                tally.failures.push(format!(
                    "`{expr}`: native {got}, IR {ir}, libpcap {oracle:?} on {} ({}, wire {})",
                    p.description,
                    hex(&p.data),
                    p.wire_len
                ));
            }
            match oracle {
                Some(pcap) if pcap == ir => {}
                Some(pcap) => tally
                    .ir_disagrees
                    .push(format!("`{expr}`: IR {ir}, libpcap {pcap} on {}", p.description)),
                None => tally.failures.push(format!("`{expr}`: libpcap refused its own program")),
            }
        }
    }
}

#[test]
fn native_verdicts_equal_the_ir_and_libpcap() {
    let names = NameDb::system_files_only();
    let packets = packets();
    let mut tally = Tally::default();
    let everyday = expressions("everyday.txt").len();
    let net = expressions("lower-net.txt").len();
    check_file("everyday.txt", &names, &packets, &mut tally);
    check_file("lower-net.txt", &names, &packets, &mut tally);

    println!(
        "{} of {} expressions compiled natively and checked on {} packets ({} verdicts); \
         libpcap refuses {}, weir refuses {} that libpcap accepts; the IR disagrees with \
         libpcap on {} packet verdicts",
        tally.checked,
        everyday + net,
        packets.len(),
        tally.verdicts,
        tally.libpcap_refuses,
        tally.weir_refuses.len(),
        tally.ir_disagrees.len()
    );
    for line in tally.weir_refuses.iter().chain(&tally.ir_disagrees).take(20) {
        println!("  (not this test's business) {line}");
    }
    let mut times = tally.compile_times.clone();
    times.sort();
    if let (Some(median), Some(slowest)) = (times.get(times.len() / 2), times.last()) {
        let profile = if cfg!(debug_assertions) { "debug build" } else { "release build" };
        println!(
            "native compile time ({profile}): median {:?}, slowest {:?} (`{}`)",
            median.0, slowest.0, slowest.1
        );
    }
    if let Some((t, _)) = tally.compile_times.iter().find(|(_, e)| e == "port 22") {
        println!("native compile time of `port 22`: {t:?}");
    }

    assert!(everyday >= 200 && net >= 100, "{everyday} everyday, {net} lower-net expressions");
    // Most expressions libpcap accepts must reach the comparison, or it says little.
    let accepted = everyday + net - tally.libpcap_refuses;
    assert!(tally.checked * 20 >= accepted * 19, "only {} of {accepted} checked", tally.checked);
    assert!(
        tally.failures.is_empty(),
        "{} failures, first:\n{}",
        tally.failures.len(),
        tally.failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// `port 22` compiled once per sample, the figure the compile-latency goal is about.
#[test]
fn port_22_compiles_natively() {
    let options = Options { linktype: LinkType::Ethernet, netmask: None };
    let filter = compile("port 22", &options, &NameDb::builtin()).expect("port 22 lowers");
    let mut samples: Vec<Duration> = (0..21)
        .map(|_| {
            let started = Instant::now();
            let native = weir_jit::filter::compile(&filter).expect("port 22 compiles");
            let elapsed = started.elapsed();
            assert!(native.machine_code().len() > 16);
            elapsed
        })
        .collect();
    samples.sort();
    let profile = if cfg!(debug_assertions) { "debug build" } else { "release build" };
    println!("`port 22` native compile ({profile}): median of 21 {:?}", samples[10]);
    // A TCP packet to port 22 over IPv4 matches; the same cut before the port does not.
    let ssh = weir_testkit::corpus(1, 3000)
        .into_iter()
        .find(|p| filter.matches(&p.data, p.wire_len))
        .expect("the corpus has port-22 traffic");
    let native = weir_jit::filter::compile(&filter).expect("port 22 compiles");
    assert!(native.matches(&ssh.data, ssh.wire_len));
    assert!(!native.matches(&ssh.data[..14], ssh.wire_len));
}
