//! "expression rejects all packets": `weir filter` and `weir compile` refuse, with the
//! optimizer on, the expressions libpcap's optimizer reduces to "reject everything", with
//! tcpdump's message and exit status 1; with `-O` they accept them (and match nothing), as
//! `tcpdump -O` does. tcpdump itself is asked too when it is installed.

use std::process::Command;

use crate::common::{sample, text, weir};

const MESSAGE: &str = "expression rejects all packets";

/// tcpdump's message, one line, with weir's prefix instead of tcpdump's.
fn says_it(stderr: &str, _expr: &str) -> bool {
    stderr == format!("weir: {MESSAGE}\n")
}
const REFUSED: [&str; 4] = ["ip6 and icmp", "1 = 0", "4 - 6 < 0", "tcp and udp"];

#[test]
fn filter_refuses_with_tcpdumps_message() {
    let sample = sample();
    for expr in REFUSED {
        let out = weir(&["filter", "-r", &sample, expr]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{expr}: {stderr}");
        assert!(out.stdout.is_empty(), "{expr}");
        assert!(says_it(&stderr, expr), "{expr}: {stderr}");
        // Without the optimizer the expression is accepted and matches nothing.
        let out = weir(&["filter", "-O", "-r", &sample, expr]);
        assert!(out.status.success(), "-O {expr}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "-O {expr}: {}", text(&out.stdout));
    }
    // libpcap's optimizer does not fold arithmetic after the first test: kept.
    let out = weir(&["filter", "-r", &sample, "ip and 4 - 6 < 0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn compile_refuses_with_tcpdumps_message() {
    for expr in REFUSED {
        for flags in [&[][..], &["-d"], &["--ebpf"]] {
            let mut args = vec!["compile"];
            args.extend_from_slice(flags);
            args.push(expr);
            let out = weir(&args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{flags:?} {expr}: {stderr}");
            assert!(out.stdout.is_empty(), "{flags:?} {expr}");
            assert!(says_it(&stderr, expr), "{expr}: {stderr}");
        }
        let out = weir(&["compile", "-O", expr]);
        assert!(out.status.success(), "-O {expr}: {}", text(&out.stderr));
        assert!(!out.stdout.is_empty(), "-O {expr}");
    }
}

/// tcpdump says the same about the same expressions (and accepts the kept one).
#[test]
fn tcpdump_agrees() {
    let sample = sample();
    let run = |args: &[&str]| Command::new("tcpdump").args(args).output();
    let Ok(probe) = run(&["--version"]) else {
        println!("SKIPPED: tcpdump_agrees: tcpdump is not installed");
        return;
    };
    if !probe.status.success() {
        println!("SKIPPED: tcpdump_agrees: tcpdump --version failed");
        return;
    }
    for expr in REFUSED {
        let out = run(&["-r", &sample, expr]).expect("tcpdump runs");
        assert_eq!(out.status.code(), Some(1), "{expr}");
        assert!(text(&out.stderr).contains(&format!("tcpdump: {MESSAGE}")), "{expr}");
    }
    let out = run(&["-r", &sample, "ip and 4 - 6 < 0"]).expect("tcpdump runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
}
