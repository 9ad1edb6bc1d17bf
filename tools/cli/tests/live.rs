//! `weir filter -i` end to end, as root, in a network namespace made for each test with a
//! veth pair (va <-> vb); each test prints `SKIPPED: <name>: <reason>` where it cannot run.
//! A python3 packet socket sends UDP frames on `va` (even-numbered to port 53, odd to port
//! 80); weir, and tcpdump on the same traffic, capture on `vb`.

use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weir_testkit::VethLab;

/// One namespace test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const SENDER: &str = r#"
import socket, struct, sys, time
n = int(sys.argv[1])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("va", 0))
for i in range(n):
    port = 53 if i % 2 == 0 else 80
    udp = struct.pack('!HHHH', 1000 + i, port, 12, 0) + b'abcd'
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), i, 0, 64, 17, 0,
                     bytes([10, 9, 0, 1]), bytes([10, 9, 0, 2]))
    eth = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0])
    s.send(eth + ip + udp)
    time.sleep(0.002)
"#;

/// What the live tests do in their lab.
trait Live {
    fn send(&self, n: usize);
    fn capture(&self, program: &str, args: &[&str]) -> Child;
}

impl Live for VethLab {
    fn send(&self, n: usize) {
        let out = self.command("python3").args(["-c", SENDER, &n.to_string()]).output().unwrap();
        assert!(out.status.success(), "sender: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Starts a capture and waits until it says it is listening (its first stderr line).
    fn capture(&self, program: &str, args: &[&str]) -> Child {
        let mut child = self
            .command(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::BufRead;
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        // tcpdump may say first that verbose output is suppressed.
        let mut seen = String::new();
        while !seen.contains("listening on") {
            let before = seen.len();
            stderr.read_line(&mut seen).unwrap();
            assert!(seen.len() > before, "{program} ended before listening: {seen}");
        }
        std::thread::spawn(move || {
            let mut rest = String::new();
            while stderr.read_line(&mut rest).unwrap_or(0) > 0 {}
        });
        child
    }
}

/// Waits for a capture to end by itself (-c), at most 10 s (then kills it: a failure).
fn wait(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("{what} did not stop after its -c count");
}

fn lines(out: &Output) -> usize {
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn live_capture_counts_as_tcpdump_does_in_the_kernel_and_in_user_space() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lab) = VethLab::new("live-counts", &["python3"]) else { return };
    if Command::new("tcpdump").arg("--version").output().is_err() {
        println!("SKIPPED: live-counts: tcpdump is not installed");
        return;
    }
    let weir = env!("CARGO_BIN_EXE_weir");
    for (expression, engine) in
        [("udp port 53", None), ("udp port 80", Some("native")), ("udp", Some("interp"))]
    {
        let want = if expression == "udp" { 30 } else { 15 };
        let count = want.to_string();
        let mut weir_args = vec!["filter", "-i", "vb", "-c", &count];
        if let Some(engine) = engine {
            weir_args.extend(["--engine", engine]);
        }
        weir_args.push(expression);
        let weir_child = lab.capture(weir, &weir_args);
        let tcpdump_child =
            lab.capture("tcpdump", &["-i", "vb", "-nn", "-q", "-c", &count, expression]);
        lab.send(30);
        let weir_out = wait(weir_child, "weir");
        let tcpdump_out = wait(tcpdump_child, "tcpdump");
        assert!(weir_out.status.success(), "{expression}");
        assert_eq!(lines(&weir_out), want, "weir, {expression}");
        assert_eq!(lines(&tcpdump_out), want, "tcpdump, {expression}");
        // The same packets: tcpdump's lines and weir's agree (both print -q -n lines).
        assert_eq!(
            String::from_utf8_lossy(&weir_out.stdout)
                .lines()
                .map(|l| l.split_once(' ').map_or("", |(_, rest)| rest).to_string())
                .collect::<Vec<_>>(),
            String::from_utf8_lossy(&tcpdump_out.stdout)
                .lines()
                .map(|l| l.split_once(' ').map_or("", |(_, rest)| rest).to_string())
                .collect::<Vec<_>>(),
            "{expression}"
        );
    }
}

#[test]
fn live_capture_writes_a_capture_tcpdump_reads() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lab) = VethLab::new("live-write", &["python3"]) else { return };
    let dir = std::env::temp_dir().join(format!("weir-live-write-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("live.pcap");
    let weir = env!("CARGO_BIN_EXE_weir");
    let child = lab.capture(
        weir,
        &["filter", "-i", "vb", "-c", "10", "-w", out.to_str().unwrap(), "udp port 80"],
    );
    lab.send(30);
    let done = wait(child, "weir -w");
    assert!(done.status.success());
    let check = Command::new(weir)
        .args(["filter", "--count", "-r", out.to_str().unwrap(), "udp port 80"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "10");
    if let Ok(tcpdump) = Command::new("tcpdump").args(["-r", out.to_str().unwrap(), "-nn"]).output()
    {
        assert!(tcpdump.status.success(), "{}", String::from_utf8_lossy(&tcpdump.stderr));
        assert_eq!(String::from_utf8_lossy(&tcpdump.stdout).lines().count(), 10);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_interface_is_one_line_and_status_1() {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["filter", "-i", "weir-no-such-if0", "udp"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("no such interface") || stderr.contains("root or CAP_NET_RAW"),
        "{stderr}"
    );
}

/// `weir run OBJ -i IFACE`: the program runs on every frame the interface receives, until
/// SIGTERM; then the verdict lines, the summary and `--maps-out` are written as for a file.
#[test]
fn run_on_an_interface_until_stopped() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lab) = VethLab::new("run-live", &["python3"]) else { return };
    let dir = weir_testkit::Scratch::new("run-live");
    let maps = dir.join("maps.json");
    let object = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/bpf/xdp_counter.o")
        .display()
        .to_string();
    let weir = env!("CARGO_BIN_EXE_weir");
    let args = ["run", &object, "-i", "vb", "--verdicts", "--maps-out", maps.to_str().unwrap()];
    let child = lab.capture(weir, &args);
    lab.send(20);
    // The ring hands a block over when it fills or its timeout (1 s) passes.
    std::thread::sleep(Duration::from_millis(1500));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with our own child's pid and a signal number; no memory involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let out = wait(child, "weir run -i");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let verdicts = String::from_utf8_lossy(&out.stdout).into_owned();
    let want: String = (0..20).map(|i| format!("{i} 2\n")).collect();
    assert_eq!(verdicts, want, "one XDP_PASS line per frame, in order");
    // xdp_counter counted the 20 UDP frames under IP protocol 17.
    let o = weir::Object::open(&std::fs::read(&object).unwrap()).unwrap();
    o.load_maps_json(&std::fs::read_to_string(&maps).unwrap()).unwrap();
    let count = o.maps()[0].lookup_all(&17u32.to_ne_bytes()).unwrap();
    assert_eq!(u64::from_ne_bytes(count[..8].try_into().unwrap()), 20);
}
