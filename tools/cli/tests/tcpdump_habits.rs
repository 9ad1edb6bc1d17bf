//! `weir filter` takes the flags a tcpdump user types from habit: the ones that describe what
//! weir always does (`-n`, `-nn`, `-q`), the ones it implements (`-d`, `-O`, `-l`), and the
//! rest refused by name rather than with clap's tip about `--`.

use std::process::Command;

use crate::common::{have_tcpdump, sample, text, weir};

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
    for expression in ["tcp port 22", "udp or icmp", "ip and ip", "ip or 1 = 0"] {
        let optimized = weir(&["filter", "--count", "-r", &sample, expression]);
        let unoptimized = weir(&["filter", "--count", "-O", "-r", &sample, expression]);
        assert!(unoptimized.status.success(), "{expression}: {}", text(&unoptimized.stderr));
        assert_eq!(optimized.stdout, unoptimized.stdout, "{expression}");
    }
}

/// The sample's file header and first record (pcap: 24-byte header, 16-byte record header).
fn header_and_first_record() -> (Vec<u8>, Vec<u8>) {
    let bytes = std::fs::read(sample()).unwrap();
    let caplen = u32::from_le_bytes(bytes[24 + 8..24 + 12].try_into().unwrap()) as usize;
    (bytes[..24].to_vec(), bytes[24..24 + 16 + caplen].to_vec())
}

/// Starts `weir filter ARGS` reading a pipe; writes `first` into it, then waits up to 10 s
/// for `want` bytes of standard output while the pipe stays open. Returns what arrived.
fn output_while_input_open(args: &[&str], first: &[u8], want: usize) -> Vec<u8> {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(first).unwrap();
    stdin.flush().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut got = vec![0u8; want];
        let mut filled = 0;
        while filled < want {
            match stdout.read(&mut got[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => filled += n,
            }
        }
        got.truncate(filled);
        let _ = tx.send(got);
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap_or_default();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    got
}

#[test]
fn packet_buffered_output_reaches_a_pipe_before_the_input_ends() {
    let (header, record) = header_and_first_record();
    let mut input = header.clone();
    input.extend_from_slice(&record);
    // -U: the header and the matching record are on the pipe while the input is still open.
    let got = output_while_input_open(&["filter", "-r", "-", "-w", "-", "-U"], &input, input.len());
    assert_eq!(got, input, "-U: the record should be written through at once");
}

#[test]
fn line_buffered_lines_reach_a_pipe_before_the_input_ends() {
    let (header, record) = header_and_first_record();
    let mut input = header;
    input.extend_from_slice(&record);
    let got = output_while_input_open(&["filter", "-l", "-r", "-"], &input, 1);
    assert_eq!(got.len(), 1, "-l: the first line should arrive while the input is open");
}

/// The `ret` of a `-d` listing is the capture's snapshot length as libpcap adjusts it
/// (`pcap_compile` accepts with `pcap_snapshot`): the header's when it is 1..=262144, the
/// link type's maximum (262144 for Ethernet) when it is 0 or above INT_MAX; tcpdump's lines
/// when it runs. (Between the two, libpcap 1.10.3 keeps the header's value where weir's reader
/// takes the link type's maximum: not compared here.)
#[test]
fn dump_accepts_with_the_captures_snapshot_length() {
    let bytes = std::fs::read(sample()).unwrap();
    let dir = std::env::temp_dir().join(format!("weir-dump-snaplen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tcpdump = have_tcpdump("dump_accepts_with_the_captures_snapshot_length (tcpdump's side)");
    for (snaplen, want) in [(65_535u32, 65_535u32), (96, 96), (0, 262_144), (1 << 31, 262_144)] {
        let mut capture = bytes.clone();
        capture[16..20].copy_from_slice(&snaplen.to_le_bytes());
        let file = dir.join(format!("snaplen-{snaplen}.pcap"));
        std::fs::write(&file, &capture).unwrap();
        let file = file.display().to_string();
        for dump in ["-d", "-dd", "-ddd"] {
            let out = weir(&["filter", dump, "-r", &file, "tcp port 80"]);
            assert!(out.status.success(), "{snaplen} {dump}: {}", text(&out.stderr));
            let listing = text(&out.stdout);
            let accept = match dump {
                "-d" => format!("ret      #{want}"),
                "-dd" => format!("{{ 0x6, 0, 0, 0x{want:08x} }},"),
                _ => format!("6 0 0 {want}"),
            };
            assert!(listing.contains(&accept), "{snaplen} {dump}: no `{accept}` in\n{listing}");
            if tcpdump && dump == "-d" {
                let theirs =
                    Command::new("tcpdump").args(["-r", &file, "-d", "tcp port 80"]).output();
                let theirs = text(&theirs.unwrap().stdout);
                assert_eq!(listing, theirs, "{snaplen}: weir's listing against tcpdump's");
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
