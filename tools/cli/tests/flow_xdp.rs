//! `weir flow compile`: the object runs in weir (`weir run`) with the verdicts of `weir
//! flow run`, refuses what XDP cannot do, and, as root in a network namespace (SKIPPED
//! otherwise), loads with `bpftool prog load` and `ip link set dev D xdp obj … sec xdp`,
//! takes its tables from `weir flow update` and counts what arrives as `weir flow run
//! --stats` counts the same frames.

use std::process::Output;
use weir_testkit::{write_pcap, Scratch, LINKTYPE_ETHERNET};

use crate::common::weir;

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const RULES: &str = "prio 1 protocol ip flower ip_proto udp dst_port 53 action drop\n\
prio 2 protocol ip flower ip_proto tcp action goto chain 1\n\
prio 3 protocol ipv6 flower action mirred egress redirect dev va\n\
prio 9 protocol all flower action pass\n\
chain 1 prio 1 protocol ip flower ip_proto tcp dst_port 80 action drop\n\
chain 1 prio 2 protocol all flower action mirred egress redirect dev va\n";

#[test]
fn weir_run_of_the_object_gives_flow_runs_verdicts() {
    let dir = Scratch::new("flow-xdp-run");
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, RULES).unwrap();
    let cap = dir.join("in.pcap");
    write_pcap(&cap, LINKTYPE_ETHERNET, &weir_testkit::corpus(5, 500)).unwrap();
    let obj = dir.join("flow.o");
    let (rules, cap, obj) = (rules.to_str().unwrap(), cap.to_str().unwrap(), obj.to_str().unwrap());
    ok(&weir(&["flow", "compile", rules, "-o", obj]));
    let flow = ok(&weir(&["flow", "run", rules, "-r", cap, "--verdicts"]));
    let run = ok(&weir(&["run", obj, "-r", cap, "--verdicts"]));
    let want: Vec<String> = flow
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let ret = match f[2] {
                "pass" => 2,
                "drop" => 1,
                r if r.starts_with("redirect:") => 4,
                other => panic!("{other}"),
            };
            format!("{} {ret}", f[0])
        })
        .collect();
    let got: Vec<&str> =
        run.lines().filter(|l| l.split(' ').count() == 2).take(want.len()).collect();
    assert_eq!(got.len(), 500, "{run}");
    assert_eq!(got, want);
    for kind in [" 1", " 2", " 4"] {
        assert!(want.iter().any(|w| w.ends_with(kind)), "no verdict{kind}");
    }
}

#[test]
fn compile_refuses_by_line_and_keyword() {
    let dir = Scratch::new("flow-xdp-refuse");
    let rules = dir.join("rules.txt");
    std::fs::write(
        &rules,
        "prio 1 protocol all flower action pass\nprio 2 protocol ip flower action skbedit mark 1\n",
    )
    .unwrap();
    let obj = dir.join("flow.o");
    let o = weir(&["flow", "compile", rules.to_str().unwrap(), "-o", obj.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 2") && err.contains("\"skbedit\""), "{err}");
    assert!(!obj.exists());
    // An indev this machine does not have: tc's words when it adds the rule.
    std::fs::write(
        &rules,
        "prio 1 protocol all flower action pass\nprio 2 protocol ip flower indev wfxnosuchdev action drop\n",
    )
    .unwrap();
    let o = weir(&["flow", "compile", rules.to_str().unwrap(), "-o", obj.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 2") && err.contains("Cannot find device \"wfxnosuchdev\""), "{err}");
    assert!(!obj.exists());
}

/// UDP frames from `va` to `vb`: `n53` to port 53, `n80` to port 80.
const SENDER: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("va", 0))
n53, n80 = int(sys.argv[1]), int(sys.argv[2])
for i in range(n53 + n80):
    port = 53 if i < n53 else 80
    udp = struct.pack('!HHHH', 1000 + i, port, 12, 0) + b'abcd'
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), i, 0, 64, 17, 0, bytes([10, 9, 0, 1]), bytes([10, 9, 0, 2]))
    s.send(bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + ip + udp)
"#;

#[test]
fn kernel_loaders_take_the_object_and_update_fills_it() {
    let Some(lab) = weir_testkit::VethLab::new("flow-xdp", &["bpftool", "python3"]) else {
        return;
    };
    let dir = Scratch::new("flow-xdp-kernel");
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, RULES).unwrap();
    let obj = dir.join("flow.o");
    let sender = dir.join("send.py");
    std::fs::write(&sender, SENDER).unwrap();
    let sender = sender.to_str().unwrap();
    let (rules, obj) = (rules.to_str().unwrap(), obj.to_str().unwrap());
    ok(&weir(&["flow", "compile", rules, "-o", obj]));
    let weir_bin = env!("CARGO_BIN_EXE_weir");
    // One shell: `ip netns exec` gives each command a mount namespace of its own, and the
    // BPF file system is mounted in it.
    let script = format!(
        "set -e\n\
         mount -t bpf bpf /sys/fs/bpf\n\
         bpftool prog load {obj} /sys/fs/bpf/flow\n\
         {weir_bin} flow update {obj} {rules} --pin-dir /sys/fs/bpf\n\
         rm /sys/fs/bpf/flow /sys/fs/bpf/wf_*\n\
         ip link set dev vb xdp obj {obj} sec xdp\n\
         ip link show dev vb\n\
         {weir_bin} flow update {obj} {rules} --pin-dir /sys/fs/bpf/tc/globals\n\
         {weir_bin} flow update {obj} {rules} --pin-dir /sys/fs/bpf/tc/globals\n\
         python3 {sender} 3 5\n\
         sleep 0.5\n\
         {weir_bin} flow stats {obj} {rules} --pin-dir /sys/fs/bpf/tc/globals\n\
         ip link set dev vb xdp off\n"
    );
    let out = lab.run("sh", &["-c", &script]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("prog/xdp") && text.contains("weir_flow"), "{text}");
    // Three updates: generations 1 (bpftool's maps), 1, 0 (ip's maps: new pins).
    let gens: Vec<&str> = text.lines().filter(|l| l.starts_with("generation ")).collect();
    assert_eq!(gens.len(), 3, "{text}");
    assert!(gens[1].starts_with("generation 1") && gens[2].starts_with("generation 0"), "{text}");
    // 3 frames to port 53 dropped by line 1; 5 to port 80 passed by line 4 (UDP: not
    // tcp); frames of 46 bytes. Nothing else is sent in the lab (IPv6 is off), but count
    // line 4 at least 5 in case the kernel sends something.
    let stats: Vec<&str> = text.lines().filter(|l| l.starts_with("line ")).collect();
    assert_eq!(stats.len(), 6, "{text}");
    // The XDP counters keep no time (`used ?`); line 1's handle is the first of prio 1.
    assert_eq!(stats[0], "line 1 packets 3 bytes 138 used ? prio 1 chain 0 handle 0x1", "{text}");
    let line4: Vec<&str> = stats[3].split(' ').collect();
    assert!(line4[3].parse::<u64>().unwrap() >= 5, "{text}");
}
