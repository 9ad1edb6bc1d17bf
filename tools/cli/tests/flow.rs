//! `weir flow`: checks, runs, output files, workers, bad input.

use std::process::Output;
use weir_testkit::{read_pcap, write_pcap, Scratch, LINKTYPE_ETHERNET};

use crate::common::{weir, weir_stdin};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const RULES: &str = "# dns dropped, tcp to a device, tagged frames popped and mirrored\n\
prio 1 protocol ip flower ip_proto udp dst_port 53 action drop\n\
prio 2 protocol ip flower ip_proto tcp action mirred egress redirect dev tcp0\n\
prio 3 protocol 802.1Q flower action vlan pop pipe action mirred egress mirror dev vl action pass\n\
prio 9 protocol all flower action pass\n";

fn setup(name: &str) -> (Scratch, String, String) {
    let dir = Scratch::new(name);
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, RULES).unwrap();
    let cap = dir.join("in.pcap");
    write_pcap(&cap, LINKTYPE_ETHERNET, &weir_testkit::corpus(21, 600)).unwrap();
    (dir, rules.display().to_string(), cap.display().to_string())
}

#[test]
fn verdicts_stats_and_files_agree() {
    let (dir, rules, cap) = setup("flow-run");
    let out_dir = dir.join("out");
    let o = weir(&[
        "flow",
        "run",
        &rules,
        "-r",
        &cap,
        "--out-dir",
        out_dir.to_str().unwrap(),
        "--verdicts",
        "--stats",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = stdout(&o);
    let verdicts: Vec<Vec<&str>> =
        text.lines().filter(|l| !l.starts_with("line ")).map(|l| l.split(' ').collect()).collect();
    assert_eq!(verdicts.len(), 600);
    let count =
        |line: &str, fin: &str| verdicts.iter().filter(|v| v[1] == line && v[2] == fin).count();
    let stats: Vec<(usize, u64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("line "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    assert_eq!(stats.iter().map(|s| s.0).collect::<Vec<_>>(), vec![2, 3, 4, 5]);
    // Every rule here ends its packets: the counters are the verdict lines.
    assert_eq!(stats[0].1 as usize, count("2", "drop"));
    assert_eq!(stats[1].1 as usize, count("3", "redirect:tcp0"));
    assert_eq!(stats[2].1 as usize, count("4", "pass"));
    assert!(stats.iter().all(|s| s.1 > 0), "{stats:?}");
    let pass = read_pcap(out_dir.join("pass.pcap")).unwrap();
    let tcp0 = read_pcap(out_dir.join("tcp0.pcap")).unwrap();
    let vl = read_pcap(out_dir.join("vl.pcap")).unwrap();
    assert_eq!(pass.len(), verdicts.iter().filter(|v| v[2] == "pass").count());
    assert_eq!(tcp0.len(), count("3", "redirect:tcp0"));
    assert_eq!(vl.len(), count("4", "pass"));
    // Popped before the mirror: each copy is its passed original, 4 bytes shorter.
    let passed_tagged: Vec<&Vec<&str>> = verdicts.iter().filter(|v| v[1] == "4").collect();
    assert_eq!(passed_tagged.len(), vl.len());
    // Two workers: the same verdicts and counters.
    let o2 = weir(&["flow", "run", &rules, "-r", &cap, "--verdicts", "--stats", "--workers", "2"]);
    assert_eq!(stdout(&o2), text);
}

#[test]
fn check_prints_and_refuses() {
    let (dir, rules, _) = setup("flow-check");
    let o = weir(&["flow", "check", &rules]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("4 rules, 1 chains, 4 subtables"), "{}", stdout(&o));
    let bad = dir.join("bad.txt");
    std::fs::write(
        &bad,
        "prio 1 protocol ip flower action drop\nprotocol arp flower ip_proto tcp action drop\n",
    )
    .unwrap();
    let o = weir(&["flow", "check", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.txt: line 2, column 21: Illegal \"eth_type\" for ip proto"), "{err}");
    let o = weir(&["flow", "check", dir.join("missing").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    // Not text, not rules, a directory: errors, never a panic.
    std::fs::write(&bad, [0xff, 0xfe, 0]).unwrap();
    let o = weir(&["flow", "check", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let o = weir(&["flow", "run", &rules, "-r", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

/// `weir flow run -i`: in a network namespace with a veth pair (root; SKIPPED otherwise),
/// frames sent into `va` are classified on `vb`, `indev vb` matching them; SIGINT ends it.
#[test]
fn live_interface_with_indev() {
    let Some(lab) = weir_testkit::VethLab::new("flow-live", &["python3"]) else { return };
    let dir = Scratch::new("flow-live");
    let rules = dir.join("rules.txt");
    std::fs::write(
        &rules,
        "prio 1 protocol ip flower ip_proto udp dst_port 53 indev vb action drop\nprio 2 protocol all flower action pass\n",
    )
    .unwrap();
    let child = lab
        .command(env!("CARGO_BIN_EXE_weir"))
        .args(["flow", "run"])
        .arg(&rules)
        .args(["-i", "vb", "--verdicts", "--stats"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("weir starts");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let sender = r#"
import socket, struct
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("va", 0))
for i in range(6):
    port = 53 if i % 2 == 0 else 80
    udp = struct.pack('!HHHH', 1000 + i, port, 12, 0) + b'abcd'
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), i, 0, 64, 17, 0, bytes([10, 9, 0, 1]), bytes([10, 9, 0, 2]))
    s.send(bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + ip + udp)
"#;
    let out = lab.command("python3").args(["-c", sender]).output().unwrap();
    assert!(out.status.success(), "sender: {}", String::from_utf8_lossy(&out.stderr));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = i32::try_from(child.id()).expect("a pid fits in pid_t");
    // SAFETY: kill(2) sends a signal to our own child; it touches no memory of ours.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("line 1 packets 3 bytes 138"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("line 2 packets 3 bytes 138"), "{text}");
    assert_eq!(text.lines().filter(|l| l.ends_with(" 1 drop")).count(), 3, "{text}");
}

/// Several chunks (8,192 packets each) in flight at once among persistent workers: the
/// verdict lines come out in read order and the counters match, for any --workers.
#[test]
fn workers_keep_read_order_across_chunks() {
    let dir = Scratch::new("flow-workers");
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, RULES).unwrap();
    let cap = dir.join("in.pcap");
    write_pcap(&cap, LINKTYPE_ETHERNET, &weir_testkit::corpus(23, 30_000)).unwrap();
    let (rules, cap) = (rules.to_str().unwrap(), cap.to_str().unwrap());
    let one = weir(&["flow", "run", rules, "-r", cap, "--verdicts", "--stats"]);
    assert!(one.status.success(), "{}", String::from_utf8_lossy(&one.stderr));
    let text = stdout(&one);
    let indices: Vec<u64> = text
        .lines()
        .filter(|l| !l.starts_with("line "))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(indices, (0..30_000).collect::<Vec<u64>>());
    for workers in ["2", "3"] {
        let o =
            weir(&["flow", "run", rules, "-r", cap, "--verdicts", "--stats", "--workers", workers]);
        assert_eq!(stdout(&o), text, "--workers {workers}");
    }
}

/// Without `--verdicts` the reading thread skips its pass over a piece's packets when
/// nothing is written: `--stats` alone counts every piece (a short last one included) as
/// `--verdicts --stats` does, and `--out-dir` without `--verdicts` still writes every
/// packet, for any --workers. (The counts are the classifier's, so the first half holds
/// whether or not the pass is skipped; the second catches a pass skipped when files are
/// written.)
#[test]
fn stats_or_files_without_verdicts_match_the_full_run() {
    let (dir, rules) = rules_in("flow-stats-alone");
    let cap = spaced_capture(&dir, "in.pcap", 5 * 1024 + 7);
    let (rules, cap) = (rules.as_str(), cap.to_str().unwrap());
    let files = |out_dir: &std::path::Path| -> Vec<Vec<u8>> {
        ["pass", "tcp0", "vl"]
            .iter()
            .map(|f| std::fs::read(out_dir.join(format!("{f}.pcap"))).unwrap())
            .collect()
    };
    let full_dir = dir.join("full");
    let full = weir(&[
        "flow",
        "run",
        rules,
        "-r",
        cap,
        "--verdicts",
        "--stats",
        "--out-dir",
        full_dir.to_str().unwrap(),
    ]);
    assert!(full.status.success(), "{}", String::from_utf8_lossy(&full.stderr));
    let rows: String = stdout(&full)
        .lines()
        .filter(|l| l.starts_with("line "))
        .map(|l| format!("{l}\n"))
        .collect();
    let counted: u64 =
        rows.lines().map(|l| l.split(' ').nth(3).unwrap().parse::<u64>().unwrap()).sum();
    assert!(counted > 1024, "the rules should match packets of several pieces:\n{rows}");
    let full_files = files(&full_dir);
    assert!(full_files.iter().all(|f| f.len() > 24), "every output should hold packets");
    for workers in ["1", "2", "3"] {
        let o = weir(&["flow", "run", rules, "-r", cap, "--stats", "--workers", workers]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(stdout(&o), rows, "--stats alone, --workers {workers}");
        let out_dir = dir.join(&format!("files-{workers}"));
        let o = weir(&[
            "flow",
            "run",
            rules,
            "-r",
            cap,
            "--workers",
            workers,
            "--out-dir",
            out_dir.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(stdout(&o).is_empty(), "--out-dir alone prints nothing");
        assert!(
            files(&out_dir) == full_files,
            "--out-dir alone, --workers {workers}: files differ"
        );
    }
}

/// A scratch directory with [`RULES`] in it, and the rule file's path.
fn rules_in(name: &str) -> (Scratch, String) {
    let dir = Scratch::new(name);
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, RULES).unwrap();
    let rules = rules.display().to_string();
    (dir, rules)
}

/// `packets` of the corpus, 3 µs apart from 10.0004 s on (so that a rule's last packet
/// and its first packet past a millisecond are apart), as a capture in `dir`.
fn spaced_capture(dir: &Scratch, name: &str, packets: usize) -> std::path::PathBuf {
    let mut pk = weir_testkit::corpus(29, packets);
    for (i, p) in pk.iter_mut().enumerate() {
        let us = 400 + 3 * i as u32;
        p.ts_sec = 10 + us / 1_000_000;
        p.ts_usec = us % 1_000_000;
    }
    let cap = dir.join(name);
    write_pcap(&cap, LINKTYPE_ETHERNET, &pk).unwrap();
    cap
}

/// `--workers N` is N threads taking pieces of 1,024 packets: with fewer packets than
/// threads, one packet, a piece and one more, the verdicts, counters (`used` included)
/// and output files are byte for byte those of one thread; `used` is each rule's last
/// packet's time to the millisecond below, whichever thread counted it.
#[test]
fn workers_agree_with_one_at_any_size() {
    let (dir, rules) = rules_in("flow-workers-sizes");
    let rules = rules.as_str();
    for packets in [1usize, 3, 1025, 6000] {
        let cap = spaced_capture(&dir, &format!("in-{packets}.pcap"), packets);
        let cap = cap.to_str().unwrap();
        let run = |workers: &str| {
            let out_dir = dir.join(&format!("out-{packets}-{workers}"));
            let o = weir(&[
                "flow",
                "run",
                rules,
                "-r",
                cap,
                "--verdicts",
                "--stats",
                "--workers",
                workers,
                "--out-dir",
                out_dir.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let files: Vec<Vec<u8>> = ["pass", "tcp0", "vl"]
                .iter()
                .map(|f| std::fs::read(out_dir.join(format!("{f}.pcap"))).unwrap())
                .collect();
            (stdout(&o), files)
        };
        let (text, files) = run("1");
        let verdicts: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| !l.starts_with("line "))
            .map(|l| l.split(' ').collect())
            .collect();
        assert_eq!(verdicts.len(), packets);
        // Every rule here ends its packets, so a rule's last packet is its last verdict
        // line's; 3 µs apart from 10.000400 s: packet i at 10.000400 + 3i µs.
        for row in text.lines().filter_map(|l| l.strip_prefix("line ")) {
            let f: Vec<&str> = row.split(' ').collect();
            let last = verdicts.iter().rposition(|v| v[1] == f[0]);
            let want = last.map_or("-".to_string(), |i| {
                let us = 400 + 3 * i as u64;
                format!("{}.{:03}", 10 + us / 1_000_000, us % 1_000_000 / 1000)
            });
            assert_eq!(f[6], want, "used of line {} with {packets} packets: {row}", f[0]);
        }
        for workers in ["2", "3", "8"] {
            let (t, fs) = run(workers);
            assert_eq!(t, text, "{packets} packets, --workers {workers}");
            assert!(fs == files, "{packets} packets, --workers {workers}: output files differ");
        }
    }
}

/// A capture cut short inside a record: with any --workers, the packets before the cut
/// are classified and printed in order, then the same error and exit code as with one
/// thread, and no counters (the run is not presented as complete). From a pipe (whose
/// reader may wait, so each piece is written before the next read) the same.
#[test]
fn workers_stop_at_a_cut_capture_as_one_does() {
    let (dir, rules) = rules_in("flow-workers-cut");
    let rules = rules.as_str();
    let whole = spaced_capture(&dir, "whole.pcap", 5000);
    let bytes = std::fs::read(&whole).unwrap();
    // Inside a record: the last one's header is 16 bytes, its frame at least 14.
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
    let cut = cut.to_str().unwrap();
    let run = |workers: &str, input: &str, stdin: Option<&[u8]>| {
        let args =
            ["flow", "run", rules, "-r", input, "--verdicts", "--stats", "--workers", workers];
        let Some(bytes) = stdin else { return weir(&args) };
        weir_stdin(&args, bytes)
    };
    let one = run("1", cut, None);
    assert_eq!(one.status.code(), Some(1));
    let err = String::from_utf8_lossy(&one.stderr).into_owned();
    assert!(
        err.contains("record 5000 at byte") && err.contains("the file ends inside the record"),
        "{err}"
    );
    let text = stdout(&one);
    assert!(!text.lines().any(|l| l.starts_with("line ")), "counters printed: {text}");
    let indices: Vec<u64> =
        text.lines().map(|l| l.split(' ').next().unwrap().parse().unwrap()).collect();
    assert_eq!(indices, (0..4999).collect::<Vec<u64>>());
    let short = &bytes[..bytes.len() - 5];
    for workers in ["2", "3", "5"] {
        for (o, how) in
            [(run(workers, cut, None), "file"), (run(workers, "-", Some(short)), "pipe")]
        {
            assert_eq!(o.status.code(), Some(1), "{how}, --workers {workers}");
            // The same words, the input named as given (`-` for the pipe).
            let e =
                String::from_utf8_lossy(&o.stderr).replace("weir: -: ", &format!("weir: {cut}: "));
            assert_eq!(e, err, "{how}, --workers {workers}");
            assert_eq!(stdout(&o), text, "{how}, --workers {workers}");
        }
    }
}
