//! Live capture on a veth pair in a network namespace made for each test (root only; each
//! test prints `SKIPPED: <name>: <reason>` where it cannot run). A python3 packet socket
//! sends numbered frames on `va`; weir captures on `vb` (or on `any`).
//!
//! Frames: Ethernet to 02:00:00:00:00:02 from 02:00:00:00:00:01, EtherType 0x88b5 (local
//! experimental: no stack answers it), then a class byte (frame number mod 2), the number
//! (4 bytes, big-endian) and 41 filler bytes: 60 bytes. IPv6 is off in the namespace so
//! that nothing else is sent.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weir_runtime::live::{Direction, LiveOptions, LiveSource};
use weir_runtime::source::PacketSource;
use weir_sys::netns;

/// One namespace test at a time: they share two cores with everything else.
static SERIAL: Mutex<()> = Mutex::new(());

/// `ether[12:2] = 0x88b5 and ether[14] = 1`, accepting 262144 bytes.
const CLASS_ONE: [(u16, u8, u8, u32); 6] = [
    (0x28, 0, 0, 12),      // ldh [12]
    (0x15, 0, 3, 0x88b5),  // jeq #0x88b5 jt 0 jf 3
    (0x30, 0, 0, 14),      // ldb [14]
    (0x15, 0, 1, 1),       // jeq #1 jt 0 jf 1
    (0x06, 0, 0, 262_144), // ret #262144
    (0x06, 0, 0, 0),       // ret #0
];

/// The same filter as an eBPF socket filter, by hand: r6 = ctx; r0 = ldabsh 12;
/// if r0 != 0x88b5 goto reject; r0 = ldabsb 14; if r0 != 1 goto reject; return 0xffff;
/// reject: return 0.
fn class_one_ebpf() -> Vec<u8> {
    let insn = |op: u8, regs: u8, off: i16, imm: i32| {
        let mut b = vec![op, regs];
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&imm.to_le_bytes());
        b
    };
    [
        insn(0xbf, 0x16, 0, 0),   // mov r6, r1
        insn(0x28, 0, 0, 12),     // ldabsh [12]
        insn(0x55, 0, 4, 0x88b5), // jne r0, 0x88b5, +4
        insn(0x30, 0, 0, 14),     // ldabsb [14]
        insn(0x55, 0, 2, 1),      // jne r0, 1, +2
        insn(0xb7, 0, 0, 0xffff), // mov r0, 0xffff
        insn(0x95, 0, 0, 0),      // exit
        insn(0xb7, 0, 0, 0),      // mov r0, 0
        insn(0x95, 0, 0, 0),      // exit
    ]
    .concat()
}

fn frame(i: u32) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5, (i % 2) as u8];
    f.extend_from_slice(&i.to_be_bytes());
    f.extend(0..41u8);
    f
}

const SENDER: &str = r#"
import socket, struct, sys
iface, first, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
head = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5])
tail = bytes(range(41))
for i in range(first, first + n):
    s.send(head + bytes([i % 2]) + struct.pack('>I', i) + tail)
"#;

/// A network namespace with a veth pair va <-> vb, both up; deleted on drop.
struct Lab {
    ns: String,
}

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Lab {
    /// The lab, or `None` after printing why the test is skipped.
    /// `test` names the test in SKIPPED lines, `tag` the namespace.
    fn new(test: &str, tag: &str) -> Option<Lab> {
        if !weir_sys::user::is_root() {
            println!("SKIPPED: {test}: not running as root");
            return None;
        }
        let ns = format!("weir-live-{}-{tag}", std::process::id());
        let ns: String = ns.chars().take(40).collect();
        let _ = run(&["ip", "netns", "del", &ns]);
        if let Err(e) = run(&["ip", "netns", "add", &ns]) {
            println!("SKIPPED: {test}: cannot make a network namespace: {e}");
            return None;
        }
        let lab = Lab { ns };
        let setup: [&[&str]; 5] = [
            &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
            &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            &["ip", "link", "add", "va", "type", "veth", "peer", "name", "vb"],
            &["ip", "link", "set", "va", "up"],
            &["ip", "link", "set", "vb", "up"],
        ];
        for step in setup {
            let mut args = vec!["ip", "netns", "exec", lab.ns.as_str()];
            args.extend_from_slice(step);
            if let Err(e) = run(&args) {
                println!("SKIPPED: {test}: no veth pair: {e}");
                return None;
            }
        }
        Some(lab)
    }

    fn open(&self, options: &LiveOptions) -> LiveSource {
        let _inside = netns::enter(&self.ns).expect("enter the namespace");
        let mut source = LiveSource::open(options).expect("open the capture");
        source.set_idle_timeout(Some(Duration::from_millis(1500)));
        source
    }

    /// Sends frames `first..first + n` on va (a child process).
    fn send(&self, first: u32, n: u32) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.ns, "python3", "-c", SENDER, "va"])
            .args([first.to_string(), n.to_string()])
            .stdin(Stdio::null())
            .spawn()
            .expect("start the python3 sender")
    }

    fn send_all(&self, first: u32, n: u32) {
        let status = self.send(first, n).wait().expect("the sender");
        assert!(status.success(), "the sender failed: {status}");
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.ns]);
    }
}

fn options(interface: &str) -> LiveOptions {
    let mut options = LiveOptions::new(interface);
    options.timeout_ms = 10;
    options
}

/// Reads packets until `max` or the source goes idle.
fn collect(source: &mut LiveSource, max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut first = None;
    while out.len() < max {
        match source.next_packet() {
            Some(packet) => {
                let packet = packet.expect("a packet");
                if let Some(first) = first {
                    assert_eq!(packet.index, first + out.len() as u64, "consecutive indexes");
                }
                first = first.or(Some(packet.index));
                assert_eq!(packet.stored, None);
                assert_eq!(packet.offset, 0);
                out.push(packet.data.to_vec());
            }
            None => break,
        }
    }
    out
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn every_frame_sent_arrives_once_with_its_bytes() {
    let _serial = serial();
    let Some(lab) = Lab::new("every_frame_sent_arrives_once_with_its_bytes", "every_frame") else {
        return;
    };
    let mut source = lab.open(&options("vb"));
    assert_eq!(source.linktype(), 1);
    assert_eq!(source.snaplen(), 262_144);
    assert_eq!(source.geometry().bytes(), 2 << 20);
    source.start().unwrap();
    let n = 2000;
    let sender = lab.send(0, n);
    let got = collect(&mut source, n as usize + 10);
    assert!(sender.wait_with_output().unwrap().status.success());
    assert_eq!(got.len(), n as usize, "packets captured");
    for (i, data) in got.iter().enumerate() {
        assert_eq!(data, &frame(i as u32), "packet {i}");
    }
    let stats = source.stats().unwrap();
    assert_eq!((stats.received, stats.dropped), (u64::from(n), 0));

    // User-space filtering over the same kind of traffic: what the CLI does when no
    // kernel filter fits.
    let sender = lab.send(0, 100);
    let ones = collect(&mut source, 200).into_iter().filter(|d| d[14] == 1).count();
    assert!(sender.wait_with_output().unwrap().status.success());
    assert_eq!(ones, 50);
}

#[test]
fn a_classic_filter_in_the_kernel_lets_only_matching_frames_through() {
    let _serial = serial();
    let Some(lab) =
        Lab::new("a_classic_filter_in_the_kernel_lets_only_matching_frames_through", "classic")
    else {
        return;
    };
    let mut source = lab.open(&options("vb"));
    source.attach_classic(&CLASS_ONE).unwrap();
    assert!(source.has_kernel_filter());
    source.start().unwrap();
    lab.send_all(0, 1000);
    let got = collect(&mut source, 2000);
    assert_eq!(got.len(), 500);
    for (k, data) in got.iter().enumerate() {
        assert_eq!(data, &frame(2 * k as u32 + 1));
    }
    // The kernel counts what its filter accepted.
    assert_eq!(source.stats().unwrap().received, 500);
}

#[test]
fn an_ebpf_socket_filter_in_the_kernel_lets_only_matching_frames_through() {
    let _serial = serial();
    if let Err(reason) = weir_sys::kernel::available() {
        println!("SKIPPED: an_ebpf_socket_filter_in_the_kernel_lets_only_matching_frames_through: {reason}");
        return;
    }
    let Some(lab) =
        Lab::new("an_ebpf_socket_filter_in_the_kernel_lets_only_matching_frames_through", "ebpf")
    else {
        return;
    };
    let mut source = lab.open(&options("vb"));
    source.attach_ebpf_code(&class_one_ebpf()).unwrap();
    source.start().unwrap();
    lab.send_all(0, 1000);
    let got = collect(&mut source, 2000);
    assert_eq!(got.len(), 500);
    assert!(got.iter().all(|d| d[14] == 1 && d.len() == 60));
    // A program the verifier refuses is an error with its reason, not a panic.
    let bad = [0xbf, 0x16, 0, 0, 0, 0, 0, 0]; // no exit
    let err = source.attach_ebpf_code(&bad).unwrap_err();
    assert!(err.to_string().starts_with("the kernel refused the eBPF socket filter"), "{err}");
}

#[test]
fn a_filter_attached_while_capturing_drops_what_the_old_one_let_in() {
    let _serial = serial();
    let Some(lab) =
        Lab::new("a_filter_attached_while_capturing_drops_what_the_old_one_let_in", "reattach")
    else {
        return;
    };
    let mut source = lab.open(&options("vb"));
    source.start().unwrap();
    lab.send_all(0, 40);
    std::thread::sleep(Duration::from_millis(100));
    source.attach_classic(&CLASS_ONE).unwrap();
    lab.send_all(100, 20);
    let got = collect(&mut source, 200);
    let numbers: Vec<u32> =
        got.iter().map(|d| u32::from_be_bytes([d[15], d[16], d[17], d[18]])).collect();
    assert_eq!(numbers, (100..120).filter(|i| i % 2 == 1).collect::<Vec<_>>());
}

#[test]
fn tcpdump_counts_the_same_packets() {
    let _serial = serial();
    let Some(lab) = Lab::new("tcpdump_counts_the_same_packets", "tcpdump") else { return };
    if Command::new("tcpdump").arg("--version").output().is_err() {
        println!("SKIPPED: tcpdump_counts_the_same_packets: no tcpdump");
        return;
    }
    let n = 600u32;
    let mut tcpdump = Command::new("ip")
        .args(["netns", "exec", &lab.ns, "tcpdump", "-i", "vb", "-c"])
        .arg((n / 2).to_string())
        // Not --immediate-mode: libpcap then uses TPACKET_V2 with one 256 KiB frame per
        // packet (7 in the default buffer) and drops most of a burst.
        .args(["-w", "/dev/null", "ether[14] = 1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tcpdump");
    let mut lines = BufReader::new(tcpdump.stderr.take().unwrap()).lines();
    let listening = lines.by_ref().map_while(Result::ok).any(|l| l.contains("listening on"));
    assert!(listening, "tcpdump did not start");
    let mut source = lab.open(&options("vb"));
    source.attach_classic(&CLASS_ONE).unwrap();
    source.start().unwrap();
    lab.send_all(0, n);
    let weir = collect(&mut source, n as usize).len();
    let deadline = Instant::now() + Duration::from_secs(5);
    while tcpdump.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = tcpdump.try_wait().unwrap();
    // SIGINT, so that a tcpdump still waiting prints its counts.
    let _ = Command::new("kill").args(["-INT", &tcpdump.id().to_string()]).status();
    let _ = tcpdump.wait();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let captured = rest
        .iter()
        .find_map(|l| l.strip_suffix(" packets captured"))
        .and_then(|c| c.parse::<usize>().ok());
    assert_eq!(captured, Some(n as usize / 2), "tcpdump ({ended:?}) said: {rest:?}");
    assert_eq!(weir, n as usize / 2);
}

#[test]
fn the_stop_flag_ends_a_quiet_capture_promptly() {
    let _serial = serial();
    let Some(lab) = Lab::new("the_stop_flag_ends_a_quiet_capture_promptly", "stop") else { return };
    let mut source = lab.open(&options("vb"));
    source.set_idle_timeout(None);
    let stop = source.stop_flag();
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::SeqCst);
    });
    let started = Instant::now();
    assert!(source.next_packet().is_none());
    let took = started.elapsed();
    setter.join().unwrap();
    assert!(took >= Duration::from_millis(150) && took < Duration::from_secs(3), "{took:?}");
    assert!(source.next_packet().is_none(), "stays ended");
}

#[test]
fn the_any_device_gives_cooked_packets_both_ways() {
    let _serial = serial();
    let Some(lab) = Lab::new("the_any_device_gives_cooked_packets_both_ways", "any") else {
        return;
    };
    let mut source = lab.open(&options("any"));
    assert_eq!(source.linktype(), 113);
    assert!(source.attach_classic(&CLASS_ONE).is_err(), "no kernel filter on cooked");
    source.start().unwrap();
    lab.send_all(0, 50);
    let got = collect(&mut source, 200);
    // Each frame leaves va (outgoing) and arrives at vb (to another host).
    assert_eq!(got.len(), 100);
    let outgoing = got.iter().filter(|d| d[0..2] == [0, 4]).count();
    assert_eq!(outgoing, 50);
    for data in &got {
        assert_eq!(&data[2..4], &[0, 1], "ARPHRD_ETHER");
        assert_eq!(&data[4..6], &[0, 6], "address length");
        assert_eq!(&data[14..16], &[0x88, 0xb5], "protocol");
        let i = u32::from_be_bytes([data[17], data[18], data[19], data[20]]);
        assert_eq!(&data[16..], &frame(i)[14..]);
    }

    // -Q in keeps the received copies only.
    let mut inbound = options("any");
    inbound.direction = Direction::In;
    let mut source = lab.open(&inbound);
    source.start().unwrap();
    lab.send_all(0, 50);
    let got = collect(&mut source, 200);
    assert_eq!(got.len(), 50);
    assert!(got.iter().all(|d| d[0..2] != [0, 4]));
}

#[test]
fn an_unknown_interface_is_a_clear_error() {
    let _serial = serial();
    let Some(lab) = Lab::new("an_unknown_interface_is_a_clear_error", "unknown") else { return };
    let _inside = netns::enter(&lab.ns).unwrap();
    let err = LiveSource::open(&LiveOptions::new("eth0")).unwrap_err();
    assert_eq!(err.to_string(), "eth0: no such interface");
    let mut names: Vec<String> =
        weir_runtime::live::interfaces().unwrap().into_iter().map(|i| i.name).collect();
    // The veths, any and lo (down here). The order depends on whether each veth's carrier
    // is up yet (running sorts first), which races with the pair's creation: compare sets.
    names.sort();
    assert_eq!(names, ["any", "lo", "va", "vb"]);
}
