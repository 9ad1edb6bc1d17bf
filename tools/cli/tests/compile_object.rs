//! `weir compile --ebpf -o FILTER.o`: the object it writes is what the kernel's tools load.
//! Root-less: the object reads back through weir-elf with the program `compile --ebpf`
//! prints. As root: `bpftool prog load` takes every target's object (when bpftool is
//! installed); the object, parsed back by weir-elf, loads through `weir_sys::kernel` (no
//! libbpf) and `BPF_PROG_TEST_RUN` over the packet corpus gives the verdicts of weir's own
//! engines (interpreter and JIT through `weir::Object`, what `weir run` runs) and, for the
//! whole-frame targets, of the filter IR; and `tc filter add ... bpf obj` loads the tc
//! object on a veth pair in a network namespace of its own.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use weir::elf::ObjectSpec;
use weir::{Engine, Object, ProgType};
use weir_sys::kernel;
use weir_testkit::Scratch;

use crate::common::weir;

/// Writes `expr`'s object for `target` and returns its bytes.
fn compile_object(dir: &Scratch, expr: &str, target: &str, tag: usize) -> Vec<u8> {
    let path = dir.path().join(format!("f{tag}_{target}.o"));
    let path_s = path.to_str().unwrap();
    let out = weir(&["compile", "--ebpf", "-o", path_s, "--target", target, expr]);
    assert!(out.status.success(), "{expr} ({target}): {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "-o writes nothing to standard output");
    std::fs::read(&path).unwrap()
}

const EXPRESSIONS: [&str; 12] = [
    "",
    "tcp port 80",
    "udp",
    "ip6",
    "arp",
    "icmp or icmp6",
    "ip src net 10.0.0.0/8",
    "tcp[tcpflags] & tcp-syn != 0",
    "vlan and udp",
    "ip[2:2] > 100",
    "not ip and not ip6",
    "ip6 protochain 17",
];

const TARGETS: [(&str, ProgType, &str); 3] = [
    ("socket", ProgType::SocketFilter, "socket"),
    ("xdp", ProgType::Xdp, "xdp"),
    ("tc", ProgType::SchedCls, "tc"),
];

#[test]
fn compile_o_writes_an_object_weir_elf_reads_back() {
    let dir = Scratch::new("compile-object");
    for (tag, expr) in EXPRESSIONS.iter().enumerate() {
        for (target, prog_type, section) in TARGETS {
            let bytes = compile_object(&dir, expr, target, tag);
            let spec = ObjectSpec::parse(&bytes).unwrap_or_else(|e| panic!("{expr}: {e}"));
            assert_eq!(spec.license.as_deref(), Some("Dual MIT/GPL"));
            assert!(spec.maps.is_empty() && spec.refused.is_empty());
            let prog = spec.program("weir_filter").unwrap();
            assert_eq!(prog.section, section);
            assert_eq!(prog.program.prog_type(), Some(prog_type));
            // The same instructions `compile --ebpf` prints.
            let listing = weir(&["compile", "--ebpf", "--target", target, expr]);
            assert!(listing.status.success());
            let printed = String::from_utf8(listing.stdout).unwrap();
            assert_eq!(weir::isa::asm::disassemble(prog.program.insns()), printed, "{expr}");
        }
    }
    // The function name is the caller's; a bad one is refused with the reason.
    let path = dir.path().join("named.o");
    let p = path.to_str().unwrap();
    let out = weir(&["compile", "--ebpf", "-o", p, "--name", "my_prog", "udp"]);
    assert!(out.status.success());
    let spec = ObjectSpec::parse(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(spec.programs[0].name, "my_prog");
    let out = weir(&["compile", "--ebpf", "-o", p, "--name", "9 bad", "udp"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("function name `9 bad`"));
    // -o needs --ebpf.
    assert!(!weir(&["compile", "-o", p, "udp"]).status.success());
}

/// Frames the skb test run takes: an Ethernet header at least, no IPv4/IPv6 EtherType
/// without its fixed header, at most an MTU (XDP's test run keeps them linear).
fn frames() -> Vec<Vec<u8>> {
    weir_testkit::corpus(0x11e, 400)
        .into_iter()
        .chain(weir_testkit::edge_cases())
        .map(|p| p.data)
        .filter(|d| d.len() >= 14 && d.len() <= 1514)
        .filter(|d| match d.get(12..14) {
            Some([0x08, 0x00]) => d.len() >= 34,
            Some([0x86, 0xdd]) => d.len() >= 54,
            _ => true,
        })
        .collect()
}

#[test]
fn kernel_loads_written_objects_and_agrees_with_weir() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_loads_written_objects_and_agrees_with_weir: {reason}");
        return;
    }
    let bpftool = Command::new("bpftool").arg("version").output().is_ok_and(|o| o.status.success())
        && Path::new("/sys/fs/bpf").is_dir();
    if !bpftool {
        println!("SKIPPED: kernel_loads_written_objects_and_agrees_with_weir (bpftool part): no bpftool or bpffs");
    }
    let dir = Scratch::new("compile-object-kernel");
    let frames = frames();
    assert!(frames.len() >= 300, "{} frames", frames.len());
    let (mut runs, mut accepted, mut bpftool_loads) = (0usize, 0usize, 0usize);
    for (tag, expr) in EXPRESSIONS.iter().enumerate() {
        let filter = weir::compile_filter(expr, weir::LinkType::Ethernet).unwrap();
        for (target, prog_type, _) in TARGETS {
            let bytes = compile_object(&dir, expr, target, tag);
            if bpftool {
                let pin =
                    format!("/sys/fs/bpf/weir_test_compile_{}_{tag}_{target}", std::process::id());
                let obj = dir.path().join(format!("f{tag}_{target}.o"));
                let out = Command::new("bpftool")
                    .args(["prog", "load", obj.to_str().unwrap(), &pin])
                    .output()
                    .unwrap();
                let _ = std::fs::remove_file(&pin);
                assert!(
                    out.status.success(),
                    "bpftool prog load {expr} ({target}): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                bpftool_loads += 1;
            }
            let spec = ObjectSpec::parse(&bytes).unwrap();
            let code = spec.program("weir_filter").unwrap().program.to_bytes();
            let loaded = kernel::load(prog_type, &code)
                .unwrap_or_else(|e| panic!("{expr} ({target}): {}", e.reason()));
            let object = Object::open(&bytes).unwrap();
            let mut engines: Vec<_> = [Engine::Interp, Engine::Jit]
                .into_iter()
                .map(|e| (e, object.load(0, Some(e), 0).unwrap()))
                .collect();
            for (i, frame) in frames.iter().enumerate() {
                let kernel_ret = loaded
                    .test_run(frame, 1)
                    .unwrap_or_else(|e| panic!("{expr} ({target}) frame {i}: {e}"))
                    .retval;
                for (engine, weir_run) in &mut engines {
                    let v = weir_run.run(frame).unwrap_or_else(|t| panic!("{expr}: trap {t}"));
                    assert_eq!(
                        v.ret as u32, kernel_ret,
                        "{expr} ({target}) frame {i} on {engine}: weir {}, kernel {kernel_ret}",
                        v.ret
                    );
                }
                // The socket filter's test run strips the Ethernet header; the others see
                // the whole frame, as the IR does.
                let len = frame.len() as u32;
                let want = match prog_type {
                    ProgType::SocketFilter => None,
                    ProgType::Xdp => Some(if filter.matches(frame, len) { 2 } else { 1 }),
                    _ => Some(filter.run(frame, len)),
                };
                if let Some(want) = want {
                    assert_eq!(kernel_ret, want, "{expr} ({target}) frame {i}: the IR says {want}");
                }
                accepted += usize::from(filter.matches(frame, len));
                runs += 1;
            }
        }
    }
    println!(
        "{} expressions x {} targets x {} frames: {runs} kernel runs equal to the \
         interpreter's and the JIT's ({accepted} accepted by the IR); {bpftool_loads} bpftool loads",
        EXPRESSIONS.len(),
        TARGETS.len(),
        frames.len()
    );
    assert!(accepted > runs / 20 && accepted < runs, "{accepted} of {runs}");
}

/// Runs a command with a time bound; its output when it succeeded.
fn run_bounded(args: &[&str]) -> Result<String, String> {
    let out = Command::new("timeout")
        .arg("10")
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
    }
}

/// Deletes the namespace (and the veth pair in it) however the test ends.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run_bounded(&["ip", "netns", "del", &self.0]);
    }
}

#[test]
fn tc_loads_the_written_object_on_a_veth() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: tc_loads_the_written_object_on_a_veth: {reason}");
        return;
    }
    if run_bounded(&["tc", "-V"]).is_err() || run_bounded(&["ip", "-V"]).is_err() {
        println!("SKIPPED: tc_loads_the_written_object_on_a_veth: no tc or ip");
        return;
    }
    let dir = Scratch::new("compile-object-tc");
    let obj = dir.path().join("udp_tc.o");
    let out = weir(&["compile", "--ebpf", "-o", obj.to_str().unwrap(), "--target", "tc", "udp"]);
    assert!(out.status.success());
    let name = format!("weir_tc_{}", std::process::id());
    run_bounded(&["ip", "netns", "add", &name]).unwrap();
    let ns = Netns(name);
    let n = ns.0.as_str();
    let started = std::time::Instant::now();
    run_bounded(&["ip", "-n", n, "link", "add", "wa", "type", "veth", "peer", "name", "wb"])
        .unwrap();
    run_bounded(&["ip", "-n", n, "link", "set", "wa", "up"]).unwrap();
    run_bounded(&["tc", "-n", n, "qdisc", "add", "dev", "wa", "clsact"]).unwrap();
    // The tc target returns the filter's accept value (the snapshot length) or 0, a
    // classifier's answer (0: no match, else a class id), so it is attached as a classifier
    // on ingress; with `da` the same object loads too (its values are then tc actions: 0
    // TC_ACT_OK, the accept value an unknown action that lets the packet through), on egress.
    let o = obj.to_str().unwrap();
    run_bounded(&[
        "tc", "-n", n, "filter", "add", "dev", "wa", "ingress", "bpf", "obj", o, "sec", "tc",
    ])
    .unwrap();
    run_bounded(&[
        "tc", "-n", n, "filter", "add", "dev", "wa", "egress", "bpf", "da", "obj", o, "sec", "tc",
    ])
    .unwrap();
    let ingress = run_bounded(&["tc", "-n", n, "filter", "show", "dev", "wa", "ingress"]).unwrap();
    let egress = run_bounded(&["tc", "-n", n, "filter", "show", "dev", "wa", "egress"]).unwrap();
    assert!(ingress.contains("name weir_filter") && ingress.contains("udp_tc.o:[tc]"), "{ingress}");
    assert!(egress.contains("name weir_filter") && egress.contains("direct-action"), "{egress}");
    assert!(started.elapsed() < Duration::from_secs(30));
    println!("tc loaded the object: {}", ingress.lines().last().unwrap_or_default().trim());
}
