//! `weir filter` takes the flags a tcpdump user types from habit: the ones that describe what
//! weir always does (`-n`, `-nn`, `-q`), the ones it implements (`-d`, `-O`, `-l`), and the
//! rest refused by name rather than with clap's tip about `--`.

use std::process::{Command, Output};

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir")).args(args).output().expect("weir runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sample() -> String {
    weir_testkit::sample_capture_path().display().to_string()
}

#[test]
fn numeric_and_quiet_flags_change_nothing() {
    let sample = sample();
    let plain = weir(&["filter", "-r", &sample, "tcp"]);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    assert!(!plain.stdout.is_empty());
    for flags in [&["-n"][..], &["-nn"], &["-q"], &["-nn", "-q", "-l"], &["-nnq"]] {
        let mut args = vec!["filter"];
        args.extend_from_slice(flags);
        args.extend(["-r", &sample, "tcp"]);
        let out = weir(&args);
        assert!(out.status.success(), "{flags:?}: {}", text(&out.stderr));
        assert_eq!(out.stdout, plain.stdout, "{flags:?}");
    }
}

#[test]
fn tcpdump_flags_weir_lacks_are_refused_by_name() {
    let sample = sample();
    for (flags, named) in [
        (&["-v"][..], "-v"),
        (&["-vvv"], "-v"),
        (&["-e"], "-e"),
        (&["-X"], "-X"),
        (&["-xx"], "-x"),
        (&["-tttt"], "-t"),
        (&["-A"], "-A"),
        (&["-T", "rtp"], "-T"),
        (&["-nne"], "-e"),
    ] {
        let mut args = vec!["filter"];
        args.extend_from_slice(flags);
        args.extend(["-r", &sample, "tcp"]);
        let out = weir(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{flags:?}");
        assert!(stderr.starts_with(&format!("weir: {named} (in tcpdump: ")), "{flags:?}: {stderr}");
        assert!(!stderr.contains("to pass"), "{flags:?}: clap's tip leaked: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{flags:?}: {stderr}");
    }
}

#[test]
fn dump_flags_print_what_compile_prints() {
    let sample = sample();
    for (dump, optimize) in [("-d", None), ("-dd", None), ("-ddd", None), ("-d", Some("-O"))] {
        let mut filter_args = vec!["filter", dump, "-r", &sample];
        let mut compile_args = vec!["compile", dump];
        if let Some(o) = optimize {
            filter_args.push(o);
            compile_args.push(o);
        }
        filter_args.push("tcp port 22");
        compile_args.push("tcp port 22");
        let filter = weir(&filter_args);
        let compile = weir(&compile_args);
        assert!(filter.status.success(), "{filter_args:?}: {}", text(&filter.stderr));
        assert!(!filter.stdout.is_empty());
        assert_eq!(text(&filter.stdout), text(&compile.stdout), "{filter_args:?}");
    }
    // -O changes the program (the unoptimized one repeats the EtherType test).
    let optimized = weir(&["filter", "-d", "-r", &sample, "ip and ip"]);
    let unoptimized = weir(&["filter", "-d", "-O", "-r", &sample, "ip and ip"]);
    assert_ne!(optimized.stdout, unoptimized.stdout);
}

#[test]
fn no_optimize_flag_keeps_the_same_matches() {
    let sample = sample();
    for expression in ["tcp port 22", "udp or icmp", "ip and ip", "1 = 0"] {
        let optimized = weir(&["filter", "--count", "-r", &sample, expression]);
        let unoptimized = weir(&["filter", "--count", "-O", "-r", &sample, expression]);
        assert!(unoptimized.status.success(), "{expression}: {}", text(&unoptimized.stderr));
        assert_eq!(optimized.stdout, unoptimized.stdout, "{expression}");
    }
}
