//! `weir flow run --control`: rules added and deleted through the socket while packets
//! flow take effect from the next packet, refusals leave the table as it was, and the
//! counters `weir flow stats --control` prints are the packets sent.
//!
//! Deterministic: the capture comes through a pipe in parts, and each part is known to be
//! classified (the stats say so) before the table changes. Then the same live, on a veth
//! pair in a network namespace (root; SKIPPED otherwise).

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use weir_testkit::Scratch;

use crate::common::weir;

/// An IPv4/UDP frame of 46 bytes to `port`.
fn frame(i: u16, port: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    let udp_len = 12u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&(20 + udp_len).to_be_bytes());
    ip.extend_from_slice(&i.to_be_bytes());
    ip.extend_from_slice(&[0, 0, 64, 17, 0, 0, 10, 9, 0, 1, 10, 9, 0, 2]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&(1000 + i).to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(b"abcd");
    f
}

fn record(i: u32, data: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    for v in [1_000 + i, i, data.len() as u32, data.len() as u32] {
        r.extend_from_slice(&v.to_le_bytes());
    }
    r.extend_from_slice(data);
    r
}

/// `weir flow stats --control`: (line, packets, bytes, the whole row) per rule.
fn stats(sock: &Path) -> Vec<(usize, u64, u64, String)> {
    let o = weir(&["flow", "stats", "--control", sock.to_str().unwrap()]);
    assert!(o.status.success(), "stats: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!((f[0], f[2], f[4], f[6]), ("line", "packets", "bytes", "used"), "{l}");
            (f[1].parse().unwrap(), f[3].parse().unwrap(), f[5].parse().unwrap(), l.to_string())
        })
        .collect()
}

/// Wait (at most 10 s) until the rules' packets add up to `total`.
fn wait_for(sock: &Path, total: u64) -> Vec<(usize, u64, u64, String)> {
    let start = Instant::now();
    loop {
        let s = stats(sock);
        if s.iter().map(|r| r.1).sum::<u64>() >= total {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never counted {total}: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for_socket(sock: &Path, child: &mut Child) {
    let start = Instant::now();
    while !sock.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("weir flow run ended: {status}");
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no socket at {}", sock.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `weir flow add|del`: (exit code, stdout, stderr).
fn ctl(verb: &str, sock: &Path, words: &str) -> (i32, String, String) {
    let mut args = vec!["flow", verb, "--control", sock.to_str().unwrap()];
    args.extend(words.split(' '));
    let o = weir(&args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn rules_change_while_a_capture_flows_through_a_pipe() {
    let dir = Scratch::new("flow-control");
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, "prio 5 protocol all flower action pass\n").unwrap();
    let sock = dir.join("flow.ctl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["flow", "run", rules.to_str().unwrap(), "-r", "-", "--verdicts", "--stats"])
        .args(["--workers", "2", &format!("--control={}", sock.display())])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir starts");
    wait_for_socket(&sock, &mut child);
    let mut input = child.stdin.take().unwrap();
    // pcap header: microseconds, Ethernet.
    let mut header = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&65535u32.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    input.write_all(&header).unwrap();
    let mut sent = 0u32;
    let mut send = |input: &mut std::process::ChildStdin, n: u32| {
        let mut bytes = Vec::new();
        for _ in 0..n {
            bytes.extend(record(sent, &frame(sent as u16, 53)));
            sent += 1;
        }
        input.write_all(&bytes).unwrap();
        input.flush().unwrap();
    };
    send(&mut input, 5);
    let s = wait_for(&sock, 5);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!((s[0].1, s[0].2), (5, 5 * 46), "{s:?}");
    assert!(s[0].3.ends_with(" prio 5 chain 0 handle 0x1"), "{s:?}");
    // The file's last line is 1: an added rule is line 2.
    let (code, out, err) =
        ctl("add", &sock, "prio 1 protocol ip flower ip_proto udp dst_port 53 action drop");
    assert_eq!((code, out.as_str()), (0, "added line 2 prio 1 chain 0 handle 0x1\n"), "{err}");
    // What tc refuses, with tc's words; nothing changes.
    let refused = [
        (
            "prio 5 protocol ip flower action drop",
            "Filter with specified priority/protocol not found",
        ),
        ("prio 1 handle 1 protocol ip flower action drop", "Error: Filter already exists."),
        ("protocol ip flower ip_proto udp dst_port 70000 action drop", "dst_port"),
        ("protocol arp flower ip_proto tcp action drop", "Illegal \"eth_type\" for ip proto"),
        ("prio 2 protocol ip flower action mirred egress redirect dev a/b", "not a valid ifname"),
    ];
    for (rule, words) in refused {
        let (code, out, err) = ctl("add", &sock, rule);
        assert_eq!(code, 1, "{rule}: {out}{err}");
        assert!(err.contains(words), "{rule}: {err}");
    }
    assert_eq!(stats(&sock).len(), 2);
    send(&mut input, 4);
    let s = wait_for(&sock, 9);
    assert_eq!(s.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(), vec![(1, 5), (2, 4)], "{s:?}");
    // tc's del: an unknown priority or handle refused, then the whole priority.
    let (code, _, err) = ctl("del", &sock, "prio 3");
    assert_eq!(code, 1);
    assert!(err.contains("Error: Filter with specified priority/protocol not found."), "{err}");
    let (code, _, err) = ctl("del", &sock, "prio 1 handle 2");
    assert_eq!(code, 1);
    assert!(err.contains("Error: Specified filter handle not found."), "{err}");
    let (code, _, err) = ctl("del", &sock, "protocol ip");
    assert_eq!(code, 1);
    assert!(err.contains("Cannot flush filters with protocol"), "{err}");
    assert_eq!(ctl("del", &sock, "prio 1 handle 1").1, "deleted 1\n");
    send(&mut input, 3);
    let s = wait_for(&sock, 8);
    assert_eq!(s.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(), vec![(1, 8)], "{s:?}");
    // Added again and deleted by line.
    assert_eq!(
        ctl("add", &sock, "protocol ip flower action drop").1,
        "added line 3 prio 4 chain 0 handle 0x1\n",
        "the kernel's automatic priority: one below the chain's lowest"
    );
    assert_eq!(ctl("del", &sock, "line 3").1, "deleted 1\n");
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let verdicts: Vec<&str> = text.lines().filter(|l| !l.starts_with("line ")).collect();
    let want: Vec<String> = (0..12)
        .map(|i| match i {
            5..=8 => format!("{i} 2 drop"),
            _ => format!("{i} 1 pass"),
        })
        .collect();
    assert_eq!(verdicts, want, "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("line ")).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].starts_with("line 1 packets 8 bytes 368 used 1011."), "{text}");
    assert!(!sock.exists(), "the socket file is removed at the end");
    // Nobody listens now: exit 2 and a message naming the socket.
    let o = weir(&["flow", "stats", "--control", sock.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("flow.ctl"));
}

/// The same on an interface: rules added while frames arrive on `vb` count them.
#[test]
fn rules_change_on_a_live_interface() {
    let Some(lab) = weir_testkit::VethLab::new("flow-ctl-live", &["python3"]) else { return };
    let dir = Scratch::new("flow-ctl-live");
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, "prio 9 protocol all flower action pass\n").unwrap();
    let sock = dir.join("flow.ctl");
    let mut child = lab
        .command(env!("CARGO_BIN_EXE_weir"))
        .args(["flow", "run"])
        .arg(&rules)
        .args(["-i", "vb", "--stats", &format!("--control={}", sock.display())])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir starts");
    wait_for_socket(&sock, &mut child);
    let send = |n: u32, port: u16| {
        let sender = format!(
            "import socket, struct\n\
             s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
             s.bind(('va', 0))\n\
             for i in range({n}):\n\
             \x20   udp = struct.pack('!HHHH', 1000 + i, {port}, 12, 0) + b'abcd'\n\
             \x20   ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), i, 0, 64, 17, 0, bytes([10, 9, 0, 1]), bytes([10, 9, 0, 2]))\n\
             \x20   s.send(bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + ip + udp)\n"
        );
        let out = lab.command("python3").args(["-c", &sender]).output().unwrap();
        assert!(out.status.success(), "sender: {}", String::from_utf8_lossy(&out.stderr));
    };
    send(3, 80);
    // The ring may take a moment; anything else the lab sends counts on line 1 too.
    wait_for(&sock, 3);
    let (code, out, err) = ctl(
        "add",
        &sock,
        "prio 1 protocol ip flower ip_proto udp dst_port 53 indev vb action drop",
    );
    assert_eq!(code, 0, "{out}{err}");
    send(4, 53);
    let start = Instant::now();
    let s = loop {
        let s = stats(&sock);
        if s.iter().any(|r| r.0 == 2 && r.1 >= 4) || start.elapsed() > Duration::from_secs(10) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let added = s.iter().find(|r| r.0 == 2).expect("the added rule is listed");
    assert_eq!((added.1, added.2), (4, 4 * 46), "{s:?}");
    let pid = i32::try_from(child.id()).expect("a pid fits in pid_t");
    // SAFETY: kill(2) sends a signal to our own child; it touches no memory of ours.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("line 2 packets 4 bytes 184 used "), "{text}");
    assert!(!sock.exists(), "the socket file is removed at the end");
}
