//! The `weir` binary end to end: exit codes, output and error messages as a user sees them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{repo, text, weir, weir_stdin};

fn scratch(name: &str, contents: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[test]
fn quick_start_sample_runs_and_checks() {
    let out = weir(&["exec", &repo("testdata/samples/ipv4-header-checksum.data")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "0x1\n");
    let out = weir(&["exec", "--check", &repo("testdata/samples/ipv4-header-checksum.data")]);
    assert!(out.status.success());
    // The same program with a corrupted checksum byte gives 0.
    let bad_mem = "00 11 22 33 44 55 66 77 88 99 aa bb 08 00 45 00 00 3c 1c 46 40 00 40 06 00 00 c0 a8 00 01 c0 a8 00 c7";
    let out =
        weir(&["exec", "--mem", bad_mem, &repo("testdata/samples/ipv4-header-checksum.data")]);
    assert_eq!(text(&out.stdout), "0x0\n");
}

#[test]
fn assembly_errors_point_at_the_column() {
    let path = scratch("bad.s", b"mov %r0, 1\nadd %r11, 2\nexit\n");
    let out = weir(&["exec", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains(":2:5: "), "{err}");
    assert!(err.lines().any(|l| l.trim_end().ends_with('^')), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn traps_and_budgets_are_errors_not_hangs() {
    let path = scratch("loop.s", b"mov %r0, 0\nloop:\nadd %r0, 1\nja loop\n");
    // Runtime traps: the verifier would refuse both programs first.
    let out = weir(&["exec", "--no-verify", "--budget", "1000", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("instruction budget exhausted"));
    let path = scratch("oob.s", b"ldxw %r0, [%r1+4]\nexit\n");
    let out = weir(&["exec", "--no-verify", "--mem", "01 02 03 04", path.to_str().unwrap()]);
    assert!(text(&out.stderr).contains("out of bounds at instruction 0"), "{}", text(&out.stderr));
}

#[test]
fn asm_and_disasm_round_trip_through_files() {
    let src = scratch("prog.s", b"mov32 %r0, 7\nlddw %r1, 0x1122334455667788\nexit\n");
    let bin = src.with_extension("bin");
    let out = weir(&["asm", src.to_str().unwrap(), "-o", bin.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::metadata(&bin).unwrap().len(), 32);
    let out = weir(&["disasm", bin.to_str().unwrap()]);
    assert_eq!(text(&out.stdout), "mov32 %r0, 7\nlddw %r1, 0x1122334455667788\nexit\n");
    let out = weir(&["disasm", "--listing", bin.to_str().unwrap()]);
    assert!(text(&out.stdout).contains("b4 00 00 00 07 00 00 00"), "{}", text(&out.stdout));
    let out = weir(&["exec", bin.to_str().unwrap()]);
    assert_eq!(text(&out.stdout), "0x7\n");
}

#[test]
fn conformance_plugin_protocol() {
    // mov %r0, r2 (memory length); exit
    let out = weir_stdin(
        &["conformance-plugin", "aa bb cc"],
        b"bf 20 00 00 00 00 00 00\n95 00 00 00 00 00 00 00\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "3\n");
    let out = weir_stdin(&["conformance-plugin"], b"ff00000000000000");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("unknown opcode"));
}

#[test]
fn cbpf_run_counts_what_tcpdump_keeps() {
    let Ok(tcpdump) = Command::new("tcpdump").arg("--version").output() else {
        println!("SKIPPED: cbpf_run_counts_what_tcpdump_keeps: tcpdump not installed");
        return;
    };
    assert!(tcpdump.status.success());
    let sample = repo("testdata/captures/sample.pcap");
    for filter in ["tcp port 80 or udp", "vlan", "ip6 and not tcp", "arp or icmp"] {
        let program =
            Command::new("tcpdump").args(["-r", &sample, "-dd", filter]).output().unwrap();
        assert!(program.status.success());
        let prog = scratch("f.dd", &program.stdout);
        let kept = scratch("kept.pcap", b"");
        let out = Command::new("tcpdump")
            .args(["-r", &sample, "-w", kept.to_str().unwrap(), filter])
            .output()
            .unwrap();
        assert!(out.status.success());
        let mut capture = weir_runtime::capture::CaptureReader::open(&kept).unwrap();
        let mut expected = 0;
        while let Some(r) = weir_runtime::source::PacketSource::next_packet(&mut capture) {
            r.unwrap();
            expected += 1;
        }
        let out = weir(&["cbpf", "run", prog.to_str().unwrap(), "-r", &sample, "--count"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), expected.to_string(), "{filter}");
    }
}

#[test]
fn cbpf_bad_input_names_the_instruction_or_line() {
    let prog = scratch("bad.d", b"(000) ldh [12]\n(001) jeq #0x800 jt 5 jf 3\n");
    let out = weir(&["cbpf", "validate", prog.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("instruction 1"), "{}", text(&out.stderr));
    let prog = scratch("garbage.d", b"(000) frobnicate #1\n");
    let out = weir(&["cbpf", "validate", prog.to_str().unwrap()]);
    assert!(text(&out.stderr).contains("line 1"), "{}", text(&out.stderr));
    let ok = scratch("ok.d", b"ret #1\n");
    let cut =
        scratch("cut.pcap", &std::fs::read(repo("testdata/captures/sample.pcap")).unwrap()[..3000]);
    let out = weir(&["cbpf", "run", ok.to_str().unwrap(), "-r", cut.to_str().unwrap(), "--count"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout).trim(), "30", "the packets before the damage are processed");
    assert!(text(&out.stderr).contains("record 31 at byte"), "{}", text(&out.stderr));
}

#[test]
fn cbpf_negative_corpus_is_rejected_with_place_and_reason() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/cbpf");
    let expect = std::fs::read_to_string(dir.join("invalid.expect")).unwrap();
    let mut checked = 0;
    for line in expect.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (file, want) = line.split_once(": ").expect("`file: text` lines");
        let path = dir.join("invalid").join(file);
        assert!(path.exists(), "{file} is listed but missing");
        let out = weir(&["cbpf", "validate", "--rules", "kernel", path.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{file}: {err}");
        assert!(err.contains(want), "{file}: expected `{want}` in `{err}`");
        assert!(!err.contains("panicked"), "{file}: {err}");
        checked += 1;
    }
    let files = std::fs::read_dir(dir.join("invalid")).unwrap().count();
    assert_eq!(checked, files, "every file in testdata/cbpf/invalid has an expectation");
    assert!(checked >= 20);
}

#[test]
fn cbpf_translate_prints_an_ebpf_listing_that_runs() {
    let prog = scratch(
        "ip.d",
        b"(000) ldh [12]\n(001) jeq #0x800 jt 2 jf 3\n(002) ret #1\n(003) ret #0\n",
    );
    for target in ["socket", "xdp"] {
        let out = weir(&["cbpf", "translate", "--target", target, prog.to_str().unwrap()]);
        assert!(out.status.success(), "{target}: {}", text(&out.stderr));
        let listing = text(&out.stdout);
        assert!(listing.trim_end().ends_with("exit"), "{listing}");
        assert!(weir_isa::asm::assemble(&listing).is_ok(), "{listing}");
    }
    let bad = scratch("bad-t.d", b"ld #1\ndiv #0\nret a\n");
    let out = weir(&["cbpf", "translate", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("instruction 1"), "{}", text(&out.stderr));
}
