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

/// The `ret` of a `-d` listing is the capture's snapshot length as libpcap 1.10.3 adjusts it
/// (`pcap_compile` accepts with `pcap_snapshot`): the header's (a pcap header's, a pcapng
/// first interface's) when it is 1..=INT_MAX, even above the link type's maximum; the link
/// type's maximum (262144 for Ethernet) when it is 0 or above INT_MAX; the modified pcap
/// format adds 14 on Ethernet, up to INT_MAX. tcpdump's lines when it runs.
#[test]
fn dump_accepts_with_the_captures_snapshot_length() {
    let bytes = std::fs::read(sample()).unwrap();
    let dir = std::env::temp_dir().join(format!("weir-dump-snaplen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tcpdump = have_tcpdump("dump_accepts_with_the_captures_snapshot_length (tcpdump's side)");
    let int_max = i32::MAX as u32;
    let mut files: Vec<(String, Vec<u8>, u32)> = Vec::new();
    for (snaplen, want) in [
        (65_535u32, 65_535u32),
        (96, 96),
        (0, 262_144),
        (262_144, 262_144),
        (262_145, 262_145),
        (300_000, 300_000),
        (int_max, int_max),
        (1 << 31, 262_144),
        (u32::MAX, 262_144),
    ] {
        let mut capture = bytes.clone();
        capture[16..20].copy_from_slice(&snaplen.to_le_bytes());
        files.push((format!("snaplen-{snaplen}.pcap"), capture, want));
        files.push((format!("snaplen-{snaplen}.pcapng"), pcapng_with_snaplen(snaplen), want));
    }
    for (snaplen, want) in [(0, 262_158), (int_max - 14, int_max), (int_max - 13, int_max)] {
        let mut capture = bytes[..24].to_vec();
        capture[..4].copy_from_slice(&0xA1B2_CD34u32.to_le_bytes());
        capture[16..20].copy_from_slice(&snaplen.to_le_bytes());
        files.push((format!("modified-{snaplen}.pcap"), capture, want));
    }
    for (name, capture, want) in files {
        let file = dir.join(&name);
        std::fs::write(&file, &capture).unwrap();
        let file = file.display().to_string();
        for dump in ["-d", "-dd", "-ddd"] {
            let out = weir(&["filter", dump, "-r", &file, "tcp port 80"]);
            assert!(out.status.success(), "{name} {dump}: {}", text(&out.stderr));
            let listing = text(&out.stdout);
            let accept = match dump {
                "-d" => format!("ret      #{want}"),
                "-dd" => format!("{{ 0x6, 0, 0, 0x{want:08x} }},"),
                _ => format!("6 0 0 {want}"),
            };
            assert!(listing.contains(&accept), "{name} {dump}: no `{accept}` in\n{listing}");
            if tcpdump {
                let theirs =
                    Command::new("tcpdump").args(["-r", &file, dump, "tcp port 80"]).output();
                let theirs = text(&theirs.unwrap().stdout);
                assert_eq!(listing, theirs, "{name} {dump}: weir's listing against tcpdump's");
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A pcapng file: a section header, an Ethernet interface of this snapshot length, no packets.
fn pcapng_with_snaplen(snaplen: u32) -> Vec<u8> {
    let block = |kind: u32, body: &[u8]| {
        let len = (12 + body.len() as u32).to_le_bytes();
        [&kind.to_le_bytes()[..], &len, body, &len].concat()
    };
    let shb = [&0x1A2B_3C4Du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xff; 8]].concat();
    let idb = [&[1u8, 0, 0, 0][..], &snaplen.to_le_bytes()].concat();
    [block(0x0A0D_0D0A, &shb), block(1, &idb)].concat()
}

/// A record libpcap refuses ends the reading where tcpdump's does, with libpcap's words
/// after weir's place (record and byte); one above 262,144 bytes that the snapshot length
/// allows is read from pcapng (not from pcap).
#[test]
fn long_records_end_the_reading_with_libpcaps_words() {
    let dir = std::env::temp_dir().join(format!("weir-long-records-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tcpdump = have_tcpdump("long_records_end_the_reading_with_libpcaps_words (tcpdump's side)");
    let packet = |len: usize| -> Vec<u8> { (0..len).map(|i| (i % 251) as u8).collect() };
    let pcap = |snaplen: u32, caplen: u32| {
        let mut out = [&0xA1B2_C3D4u32.to_le_bytes()[..], &[2, 0, 4, 0], &[0; 8]].concat();
        out.extend(snaplen.to_le_bytes());
        out.extend(1u32.to_le_bytes());
        for len in [100, caplen, 100] {
            out.extend([&[0; 8][..], &len.to_le_bytes(), &len.to_le_bytes()].concat());
            out.extend(packet(len as usize));
        }
        out
    };
    let pcapng = |snaplen: u32, caplen: u32| {
        let mut out = pcapng_with_snaplen(snaplen);
        for len in [100, caplen, 100] {
            let mut body = [&[0; 12][..], &len.to_le_bytes(), &len.to_le_bytes()].concat();
            body.extend(packet(len as usize));
            body.resize(body.len().next_multiple_of(4), 0);
            let total = (12 + body.len() as u32).to_le_bytes();
            out.extend([&6u32.to_le_bytes()[..], &total, &body, &total].concat());
        }
        out
    };
    // (file, bytes, packets read, the refusal's place and words)
    let cases = [
        ("a.pcap", pcap(300_000, 280_000), 1, Some("record 2 at byte 140: invalid packet capture length 280000, bigger than maximum of 262144")),
        ("b.pcap", pcap(65_535, 280_000), 1, Some("record 2 at byte 140: invalid packet capture length 280000, bigger than snaplen of 65535")),
        ("c.pcap", pcap(1000, 2000), 3, None),
        ("a.pcapng", pcapng(300_000, 280_000), 3, None),
        ("b.pcapng", pcapng(1000, 2000), 1, Some("record 2 at byte 180: invalid packet capture length 2000, bigger than snaplen of 1000")),
    ];
    for (name, bytes, read, refused) in cases {
        let file = dir.join(name);
        std::fs::write(&file, &bytes).unwrap();
        let file = file.display().to_string();
        let out = weir(&["filter", "--count", "-r", &file, ""]);
        let stderr = text(&out.stderr);
        assert_eq!(text(&out.stdout).trim(), read.to_string(), "{name}: packets read: {stderr}");
        match refused {
            Some(words) => {
                assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
                let first = stderr.lines().next().unwrap_or_default();
                assert_eq!(first, format!("weir: {file}: {words}"), "{name}");
            }
            None => assert!(out.status.success() && stderr.is_empty(), "{name}: {stderr}"),
        }
        if tcpdump {
            let theirs = Command::new("tcpdump").args(["-n", "-r", &file]).output().unwrap();
            let (lines, stderr) = (
                text(&theirs.stdout)
                    .lines()
                    .filter(|l| !l.starts_with(char::is_whitespace))
                    .count(),
                text(&theirs.stderr),
            );
            assert_eq!(lines, read, "{name}: the packets tcpdump prints");
            let words =
                refused.map(|w| format!("tcpdump: pcap_loop: {}", w.split_once(": ").unwrap().1));
            assert_eq!(
                stderr.lines().find(|l| l.starts_with("tcpdump: ")).map(str::to_string),
                words,
                "{name}: tcpdump's words"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
