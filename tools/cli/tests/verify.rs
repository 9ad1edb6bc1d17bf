//! `weir verify`, and the check `weir exec` and `weir run` make before running.

use std::path::PathBuf;

use crate::common::{repo, text, weir};

fn scratch(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-verify-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[test]
fn accepted_programs_exit_0_with_a_summary() {
    let out = weir(&["verify", &repo("testdata/bpf/xdp_counter.o")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("accepted as xdp"), "{}", text(&out.stdout));
    let out = weir(&["verify", "--prog", "tc_calls", &repo("testdata/bpf/calls.o")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = weir(&["verify", &repo("testdata/samples/ipv4-header-checksum.data")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn rejected_programs_exit_1_with_the_place_and_the_reason() {
    let path = scratch("oob.s", "ldxw %r2, [%r1+0]\nldxb %r0, [%r2+0]\nexit\n");
    let out = weir(&["verify", "--type", "xdp", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.starts_with("weir: verify: 1: invalid access to packet"), "{err}");
    assert!(!err.contains("state at"), "{err}");
    // --log adds the path and the state.
    let out = weir(&["verify", "--log", "--type", "xdp", path.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(err.contains("state at 1: R1=ctx() R2=pkt(r=0)"), "{err}");
    // A structurally invalid program is a rejection too.
    let out = weir(&["verify", &repo("testdata/conformance/err-write-r10-mov.data")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn unreadable_input_exits_2() {
    let out = weir(&["verify", "/nonexistent/prog.o"]);
    assert_eq!(out.status.code(), Some(2));
    let path = scratch("bad.s", "frobnicate %r0\n");
    assert_eq!(weir(&["verify", path.to_str().unwrap()]).status.code(), Some(2));
    let out = weir(&["verify", "--prog", "nope", &repo("testdata/bpf/calls.o")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("xdp_calls"), "{}", text(&out.stderr));
}

#[test]
fn exec_verifies_first_unless_told_not_to() {
    let path = scratch("div.s", "mov %r0, 1\ndiv %r0, 0\nexit\n");
    let out = weir(&["exec", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("verify: 1: div by zero"), "{}", text(&out.stderr));
    let out = weir(&["exec", "--no-verify", path.to_str().unwrap()]);
    assert_eq!(text(&out.stdout), "0x0\n", "{}", text(&out.stderr));
    let out = weir(&["exec", "--explain", &repo("testdata/samples/ipv4-header-checksum.data")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("weir: verified: accepted"), "{}", text(&out.stderr));
    // The JIT says what the proof let it drop; without one it keeps everything.
    assert!(text(&out.stderr).contains("weir: jit: 0 memory checks kept"), "{}", text(&out.stderr));
    let out = weir(&[
        "exec",
        "--no-verify",
        "--explain",
        &repo("testdata/samples/ipv4-header-checksum.data"),
    ]);
    assert!(text(&out.stderr).contains(" 0 dropped as proven in bounds"), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("(no proof: --no-verify)"), "{}", text(&out.stderr));
    // A .data case that expects an error may expect the verifier's.
    let case = scratch("div.data", "-- asm\nmov %r0, 1\ndiv %r0, 0\nexit\n-- error\ndiv by zero\n");
    let out = weir(&["exec", "--check", case.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn run_verifies_the_object_first() {
    let sample = repo("testdata/captures/sample.pcap");
    let object = repo("testdata/bpf/xdp_counter.o");
    let out = weir(&["run", "--explain", "--verdicts", "-r", &sample, &object]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("weir: verified: accepted as xdp"), "{}", text(&out.stderr));
    // The map value's access stays checked (the environment translates it), the rest goes.
    assert!(
        text(&out.stderr).contains("jit: 1 memory checks kept, 3 dropped as proven in bounds"),
        "{}",
        text(&out.stderr)
    );
    let out = weir(&["run", "--explain", "--no-verify", "--verdicts", "-r", &sample, &object]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("verified"), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("jit: 4 memory checks kept, 0 dropped"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn listings_bring_their_type_and_maps() {
    let out = weir(&["verify", &repo("testdata/verifier/atomic-02-ok.s")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("accepted as xdp"), "{}", text(&out.stdout));
    let out = weir(&["verify", &repo("testdata/verifier/stack-align-01-bad.s")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("misaligned stack access"), "{}", text(&out.stderr));
}

/// A clang-built object whose program passes a callback to `bpf_loop`: the object's
/// `.BTF.ext` func_info tells the verifier the program may take the function's address, as
/// the kernel's func_info does (without it the kernel refuses: "missing btf func_info").
#[test]
fn a_clang_built_bpf_loop_object_is_accepted_with_its_func_info() {
    let test = "a_clang_built_bpf_loop_object_is_accepted_with_its_func_info";
    if !crate::common::have("clang", test) {
        return;
    }
    let c = scratch(
        "loop.c",
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         static long cb(__u32 i, void *data) { *(__u64 *)data += i; return i == 5; }\n\
         SEC(\"xdp\") int looping(struct xdp_md *ctx) {\n\
           __u64 sum = 0; long n = bpf_loop(9, cb, &sum, 0); return (int)(sum * 10 + n); }\n\
         char LICENSE[] SEC(\"license\") = \"GPL\";\n",
    );
    let o = c.with_extension("o");
    let mut clang = std::process::Command::new("clang");
    clang.args(["-target", "bpf", "-g", "-O2", "-c"]);
    for triplet in ["x86_64-linux-gnu", "aarch64-linux-gnu"] {
        let include = PathBuf::from("/usr/include").join(triplet);
        if include.is_dir() {
            clang.arg(format!("-I{}", include.display()));
        }
    }
    let built = clang.arg(&c).arg("-o").arg(&o).output().unwrap();
    if !built.status.success() {
        println!("SKIPPED: {test}: clang cannot build BPF: {}", text(&built.stderr));
        return;
    }
    let out = weir(&["verify", o.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("accepted as xdp"), "{}", text(&out.stdout));
}
