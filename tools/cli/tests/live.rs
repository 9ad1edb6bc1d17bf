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
        use std::io::BufRead;
        let (child, mut stderr, _) = start_listening(self, program, args, Stdio::piped());
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

/// Sends `n` frames on `va` as fast as python can (no pause), all to UDP port 53.
const BURST: &str = r#"
import socket, struct, sys
n = int(sys.argv[1])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("va", 0))
for i in range(n):
    udp = struct.pack('!HHHH', 1000 + i % 50000, 53, 12, 0) + b'abcd'
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), i % 65536, 0, 64, 17, 0,
                     bytes([10, 9, 0, 1]), bytes([10, 9, 0, 2]))
    s.send(bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + ip + udp)
"#;

/// A capture started in the lab with its standard error kept: returns the child and the
/// lines before and including "listening on".
fn start_keeping_stderr(
    lab: &VethLab,
    program: &str,
    args: &[&str],
) -> (Child, std::io::BufReader<std::process::ChildStderr>, String) {
    // The counts come from the statistics lines; a full pipe would stall the capture.
    start_listening(lab, program, args, Stdio::null())
}

/// Starts `program args` in the lab and waits until it says it is listening: returns the
/// child, its standard error, and the lines read so far (tcpdump may say first that verbose
/// output is suppressed).
fn start_listening(
    lab: &VethLab,
    program: &str,
    args: &[&str],
    stdout: Stdio,
) -> (Child, std::io::BufReader<std::process::ChildStderr>, String) {
    use std::io::BufRead;
    let mut child =
        lab.command(program).args(args).stdout(stdout).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("listening on") {
        let before = seen.len();
        stderr.read_line(&mut seen).unwrap();
        assert!(seen.len() > before, "{program} ended before listening: {seen}");
    }
    (child, stderr, seen)
}

/// Ends a capture as a user does (SIGINT) unless it ended by itself within `secs`, and
/// returns everything it wrote to standard error.
fn interrupt_and_collect(
    mut child: Child,
    mut stderr: std::io::BufReader<std::process::ChildStderr>,
    secs: u64,
) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        // `ip netns exec` passes the signal on to the capture it runs.
        let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    }
    let status = wait_within(&mut child, 10);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    (status, rest)
}

fn wait_within(child: &mut Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the capture did not end within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// "N packets captured" and its two companions, as numbers.
fn statistics(stderr: &str) -> Option<(u64, u64, u64)> {
    let find = |what: &str| {
        stderr.lines().find_map(|line| {
            let (n, rest) = line.split_once(' ')?;
            (rest == format!("packets {what}") || rest == format!("packet {what}"))
                .then(|| n.parse().ok())
                .flatten()
        })
    };
    Some((find("captured")?, find("received by filter")?, find("dropped by kernel")?))
}

/// Issue 9's live goal: a burst tcpdump takes without loss, weir takes without loss too,
/// with the filter in the kernel (classic BPF) and in user space (`--engine`); both end with
/// tcpdump's three statistics lines, whose counts agree with what was printed.
#[test]
fn a_burst_tcpdump_loses_nothing_of_weir_loses_nothing_of() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lab) = VethLab::new("live-burst", &["python3", "tcpdump"]) else { return };
    let weir = env!("CARGO_BIN_EXE_weir");
    const N: usize = 3000;
    let count = N.to_string();
    for engine in [None, Some("native")] {
        let mut args = vec!["filter", "-i", "vb", "-c", &count, "--explain"];
        if let Some(engine) = engine {
            args.extend(["--engine", engine]);
        }
        args.push("udp port 53");
        let (weir_child, weir_err, weir_head) = start_keeping_stderr(&lab, weir, &args);
        let (tcpdump_child, tcpdump_err, _) = start_keeping_stderr(
            &lab,
            "tcpdump",
            &["-i", "vb", "-nn", "-q", "-c", &count, "udp port 53"],
        );
        let sent = lab.command("python3").args(["-c", BURST, &count]).output().unwrap();
        assert!(sent.status.success(), "sender: {}", String::from_utf8_lossy(&sent.stderr));
        let (tcpdump_status, tcpdump_rest) = interrupt_and_collect(tcpdump_child, tcpdump_err, 5);
        let (weir_status, weir_rest) = interrupt_and_collect(weir_child, weir_err, 5);
        assert!(weir_status.success(), "weir: {weir_head}{weir_rest}");
        let label = engine.unwrap_or("kernel");
        let want_place = if engine.is_some() { "in user space" } else { "kernel" };
        assert!(weir_head.contains(want_place), "{label}: --explain said: {weir_head}");
        let (w_captured, w_received, w_dropped) =
            statistics(&weir_rest).unwrap_or_else(|| panic!("{label}: weir's lines: {weir_rest}"));
        assert!(tcpdump_status.success() || tcpdump_status.code().is_none(), "{tcpdump_rest}");
        let Some((t_captured, _, t_dropped)) = statistics(&tcpdump_rest) else {
            panic!("{label}: tcpdump's lines: {tcpdump_rest}");
        };
        if t_captured as usize == N && t_dropped == 0 {
            assert_eq!((w_captured, w_dropped), (N as u64, 0), "{label}: {weir_rest}");
        } else {
            println!(
                "note: live-burst {label}: tcpdump captured {t_captured} of {N} (dropped \
                 {t_dropped}); weir {w_captured}"
            );
            assert!(w_captured >= t_captured.min(N as u64) / 2, "{label}: {weir_rest}");
        }
        assert!(w_received >= w_captured, "{label}: {weir_rest}");
    }
}

/// `weir filter -D` lists the interfaces as tcpdump -D does: the lab's veth is there.
#[test]
fn dash_d_lists_the_labs_interfaces() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lab) = VethLab::new("live-list", &[]) else { return };
    let out = lab.command(env!("CARGO_BIN_EXE_weir")).args(["filter", "-D"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    // "1.vb [Up, Running, Connected]"-like lines, numbered from 1.
    assert!(
        text.lines().any(|l| l.split_once('.').is_some_and(|(_, rest)| rest.starts_with("vb"))),
        "{text}"
    );
    assert!(
        text.lines().all(|l| l.split_once('.').is_some_and(|(n, _)| n.parse::<u32>().is_ok())),
        "{text}"
    );
}

/// tcpdump's habit (issue 9, item 8): without `-r` or `-i`, `weir filter` captures on the
/// interface tcpdump picks by default.
#[test]
fn without_r_or_i_weir_captures_where_tcpdump_does() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lab) = VethLab::new("live-default", &["python3", "tcpdump"]) else { return };
    let weir = env!("CARGO_BIN_EXE_weir");
    let (weir_child, weir_err, weir_head) =
        start_keeping_stderr(&lab, weir, &["filter", "-c", "5", "udp port 53"]);
    let (tcpdump_child, tcpdump_err, tcpdump_head) =
        start_keeping_stderr(&lab, "tcpdump", &["-nn", "-c", "5", "udp port 53"]);
    let interface = |head: &str| {
        head.lines()
            .find_map(|l| l.split_once("listening on ").map(|(_, rest)| rest.to_string()))
            .and_then(|rest| rest.split(',').next().map(str::to_string))
    };
    let (w, t) = (interface(&weir_head), interface(&tcpdump_head));
    lab.send(30);
    let (weir_status, weir_rest) = interrupt_and_collect(weir_child, weir_err, 5);
    let _ = interrupt_and_collect(tcpdump_child, tcpdump_err, 5);
    assert!(w.is_some() && w == t, "weir: {weir_head} tcpdump: {tcpdump_head}");
    assert!(weir_status.success(), "{weir_rest}");
    assert_eq!(statistics(&weir_rest).map(|s| s.0), Some(5), "{weir_rest}");
}

/// `-Q in|out` as tcpdump: on the sending end (`va`) the frames are outgoing, so `-Q out`
/// captures them and `-Q in` nothing; weir's counts (its statistics lines) equal tcpdump's.
#[test]
fn direction_flag_keeps_what_tcpdump_keeps() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lab) = VethLab::new("live-direction", &["python3", "tcpdump"]) else { return };
    let weir = env!("CARGO_BIN_EXE_weir");
    for (direction, want) in [("out", 10u64), ("in", 0)] {
        let (weir_child, weir_err, _) = start_keeping_stderr(
            &lab,
            weir,
            &["filter", "-i", "va", "-Q", direction, "-p", "-c", "10", "udp"],
        );
        let (tcpdump_child, tcpdump_err, _) = start_keeping_stderr(
            &lab,
            "tcpdump",
            &["-i", "va", "-Q", direction, "-p", "-nn", "-c", "10", "udp"],
        );
        lab.send(20);
        let (weir_status, weir_rest) = interrupt_and_collect(weir_child, weir_err, 2);
        let (_, tcpdump_rest) = interrupt_and_collect(tcpdump_child, tcpdump_err, 2);
        assert!(weir_status.success(), "-Q {direction}: {weir_rest}");
        let weir_captured = statistics(&weir_rest).map(|s| s.0);
        let tcpdump_captured = statistics(&tcpdump_rest).map(|s| s.0);
        assert_eq!(weir_captured, Some(want), "-Q {direction}: {weir_rest}");
        assert_eq!(weir_captured, tcpdump_captured, "-Q {direction}: {tcpdump_rest}");
    }
}
