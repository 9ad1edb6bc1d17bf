//! A clang-built object that uses `bpf_loop`, as libbpf loads it: the test writes C, builds
//! it with `clang -target bpf -g -O2` (SKIPPED without clang), parses the object with
//! weir-elf (callbacks linked as `lddw func`, `.BTF.ext` func_info read into
//! `ProgramSpec::functions`), verifies each program through `weir::Object` (which tells the
//! verifier of the func_info, as the kernel needs it before a program takes a function's
//! address), runs it on the interpreter and the JIT, checked structurally and as proven,
//! over packets of several lengths, and, as root, loads it into the kernel with the
//! object's own BTF and func_info (`BPF_BTF_LOAD`, then `BPF_PROG_LOAD`, as libbpf does)
//! and runs it with `BPF_PROG_TEST_RUN`: every engine's r0 must be the kernel's.

use std::path::PathBuf;
use std::process::Command;

use weir_program::Verified;
use weir_sys::kernel::{self, Kernel};

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct sum { __u64 total; __u32 stop; __u32 calls; __u64 cells[8]; };

/* Adds 3i + 1, stops after index `stop`. */
static long add_up(__u32 i, void *data) {
    struct sum *s = data;
    s->total += i * 3 + 1;
    s->calls++;
    return i == s->stop;
}

/* Spreads the index over eight cells (a variable offset into the caller's stack). */
static long spread(__u32 i, void *data) {
    struct sum *s = data;
    s->cells[i & 7] += i + 1;
    s->calls++;
    return 0;
}

SEC("xdp")
int stops_early(struct xdp_md *ctx) {
    struct sum s = { .stop = 7 };
    long n = bpf_loop(20, add_up, &s, 0);
    return (int)(s.total * 1000 + s.calls * 10 + n);
}

SEC("xdp")
int by_packet_length(struct xdp_md *ctx) {
    struct sum s = { .stop = 1000 };
    __u32 len = (__u32)(ctx->data_end - ctx->data);
    long n = bpf_loop(len & 63, spread, &s, 0);
    __u64 mix = 0;
    for (int k = 0; k < 8; k++) mix = mix * 31 + s.cells[k];
    return (int)(mix + s.calls * 7 + n);
}

SEC("xdp")
int two_callbacks(struct xdp_md *ctx) {
    struct sum s = { .stop = 3 };
    long a = bpf_loop(10, add_up, &s, 0);
    long b = bpf_loop(5, spread, &s, 0);
    long bad = bpf_loop(5, spread, &s, 1); /* flags must be 0: -EINVAL */
    return (int)(s.total * 100 + s.cells[2] * 10 + a + b + (bad == -22 ? 5000 : 0));
}

char LICENSE[] SEC("license") = "GPL";
"#;

/// Builds `SOURCE`; `None` (with the reason) when clang cannot.
fn build() -> Result<Vec<u8>, String> {
    let dir = std::env::temp_dir().join(format!("weir-bpf-loop-object-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (c, o) = (dir.join("loop.c"), dir.join("loop.o"));
    std::fs::write(&c, SOURCE).map_err(|e| e.to_string())?;
    // <linux/bpf.h> reaches <asm/types.h>, which Debian keeps under the host's triplet.
    let mut args: Vec<String> = ["-target", "bpf", "-g", "-O2", "-c"].map(String::from).to_vec();
    for triplet in ["x86_64-linux-gnu", "aarch64-linux-gnu"] {
        let include = PathBuf::from("/usr/include").join(triplet);
        if include.is_dir() {
            args.push(format!("-I{}", include.display()));
        }
    }
    let out = Command::new("clang")
        .args(&args)
        .arg(&c)
        .arg("-o")
        .arg(&o)
        .output()
        .map_err(|e| format!("clang: {e}"))?;
    let bytes = std::fs::read(&o);
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        return Err(format!("clang failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    bytes.map_err(|e| e.to_string())
}

/// r0 of program `entry` on each engine, checked structurally and as proven.
fn weir_runs(object: &weir::Object, entry: usize, packet: &[u8]) -> Vec<(String, u64)> {
    let program = object.programs()[entry].program().clone();
    let structural = Verified::structural(program.clone()).expect("valid");
    let proven = object
        .verify(entry, false)
        .unwrap_or_else(|e| panic!("weir's verifier refuses it: {e}"))
        .into_verified(program)
        .expect("the proof's own program");
    crate::bpf_loop_kernel::xdp_runs(&structural, &proven, packet)
}

#[test]
fn a_clang_built_bpf_loop_object_runs_as_the_kernel_runs_it() {
    let bytes = match build() {
        Ok(b) => b,
        Err(reason) => {
            println!("SKIPPED: a_clang_built_bpf_loop_object_runs_as_the_kernel_runs_it: {reason}");
            return;
        }
    };
    let spec = weir_elf::ObjectSpec::parse(&bytes).expect("parses");
    assert!(spec.refused.is_empty(), "{:?}", spec.refused);
    let names: Vec<&str> = spec.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["stops_early", "by_packet_length", "two_callbacks"]);
    for p in &spec.programs {
        // The main function first, then each callback, each with its BTF FUNC.
        let callbacks = if p.name == "two_callbacks" { 2 } else { 1 };
        assert_eq!(p.functions.len(), 1 + callbacks, "{}: {:?}", p.name, p.functions);
        assert_eq!(p.functions[0].slot, 0);
        assert_eq!(p.functions[0].name, p.name);
        // Every `lddw func` lands on a function the func_info names.
        for (pc, insn) in p.program.insns().iter().enumerate() {
            if insn.op == weir_isa::ebpf::Op::LddwFunc {
                let target = (pc as i64 + 1 + insn.imm) as u32;
                assert!(p.functions.iter().any(|f| f.slot == target), "{}: {target}", p.name);
            }
        }
    }
    let object = weir::Object::open(&bytes).expect("opens");
    let kernel = match kernel::available() {
        Ok(()) => Some(Kernel::new()),
        Err(reason) => {
            println!("SKIPPED: the kernel's side of the bpf_loop object test: {reason}");
            None
        }
    };
    let btf = spec.btf.as_deref().expect("the object's BTF");
    let mut compared = 0;
    for (entry, p) in spec.programs.iter().enumerate() {
        let funcs: Vec<(u32, u32)> = p.functions.iter().map(|f| (f.slot, f.type_id)).collect();
        // Through the kernel-oracle path for objects (maps bound, none here), with the
        // object's BTF and func_info.
        let loaded = kernel.as_ref().map(|_| {
            weir_testkit::kernel_object::load_with_funcs(&p.program, &[], btf, &funcs)
                .unwrap_or_else(|e| panic!("{}: {e}", p.name))
        });
        for len in [14usize, 40, 64, 100] {
            let packet: Vec<u8> = (0..len).map(|k| k as u8).collect();
            let ours = weir_runs(&object, entry, &packet);
            let (first, r0) = &ours[0];
            for (engine, other) in &ours {
                assert_eq!(other, r0, "{}: {engine} against {first}, {len} bytes", p.name);
            }
            if let Some(loaded) = &loaded {
                let run = loaded.test_run(&packet, 1).expect("test run");
                assert_eq!(*r0 as u32, run.retval, "{}: weir against the kernel", p.name);
                compared += 1;
            }
        }
    }
    if kernel.is_some() {
        assert_eq!(compared, 12);
    }
}
