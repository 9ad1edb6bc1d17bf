//! `bpf_loop` (helper 181) against the kernel: hand-written XDP programs whose callback
//! counts into the caller's stack and stops at a chosen index, loaded into the kernel with
//! the least BTF its verifier wants for a callback (`weir_elf::func_btf`, `func_info`
//! through `bpf()`), run with `BPF_PROG_TEST_RUN`, and run on weir's interpreter and JIT,
//! checked structurally and as proven by weir's verifier (which must accept what the
//! kernel accepts): the return values must agree (the kernel's is 32 bits). Covers the count, a stop,
//! `flags` (-EINVAL), too many iterations (-E2BIG) and a callback that loops.
//!
//! As root only; elsewhere the test prints `SKIPPED:` and returns.

use weir_isa::ebpf::Op;
use weir_program::abi::Bindings;
use weir_program::exec::{DynEngine, Input, Limits};
use weir_program::{ProgType, Program, Verified};
use weir_sys::kernel::{self, FuncInfo, Kernel};

/// The program: r0 = bpf_loop's result * 10^6 + the counter, or the error; the callback
/// adds `index + 1` (and, `nested`, 100 per call of an inner 3-iteration loop).
fn source(count: i64, stop: i64, flags: i64, nested: bool) -> String {
    let inner = if nested {
        "mov %r8, %r2\nmov %r1, 3\nlddw %r2, func(inner)\nmov %r3, %r8\nmov %r4, 0\ncall 181\n\
         ldxdw %r7, [%r8]\nadd %r7, %r6\nstxdw [%r8], %r7\n"
    } else {
        "ldxdw %r7, [%r2]\nadd %r7, %r6\nstxdw [%r2], %r7\n"
    };
    let tail = if nested {
        "inner:\nldxdw %r3, [%r2]\nadd %r3, 100\nstxdw [%r2], %r3\nmov %r0, 0\nexit\n"
    } else {
        ""
    };
    format!(
        "stdw [%r10-8], 0\nmov %r6, 77\nlddw %r1, {count}\nlddw %r2, func(cb)\nmov %r3, %r10\n\
         add %r3, -8\nmov %r4, {flags}\ncall 181\njsgt32 %r0, -1, ok\nexit\nok:\n\
         jne %r6, 77, bad\nmul %r0, 1000000\nldxdw %r1, [%r10-8]\nadd %r0, %r1\nexit\n\
         bad:\nmov %r0, -1\nexit\n\
         cb:\nmov %r9, %r1\nmov %r6, %r1\nadd %r6, 1\n{inner}\
         mov %r0, 0\njne %r9, {stop}, go\nmov %r0, 1\ngo:\nexit\n{tail}"
    )
}

/// Each function's first slot: 0 and every `lddw func` target, in order.
fn function_starts(program: &Program) -> Vec<u32> {
    let mut starts = vec![0u32];
    for (pc, insn) in program.insns().iter().enumerate() {
        if insn.op == Op::LddwFunc {
            starts.push((pc as i64 + 1 + insn.imm) as u32);
        }
    }
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// r0 on the interpreter and the JIT, for the program checked structurally and as proven by
/// weir's verifier (told of the functions' BTF, as the kernel was).
fn weir_runs(program: &Program, packet: &[u8]) -> Vec<(String, u64)> {
    let structural = Verified::structural(program.clone()).expect("valid");
    let options = weir::VerifyOptions {
        prog_type: Some(ProgType::Xdp),
        func_info: true,
        ..weir::VerifyOptions::default()
    };
    let proven = weir::verify(program, &options)
        .unwrap_or_else(|e| panic!("weir's verifier refuses it: {e}"))
        .into_verified(program.clone())
        .expect("the proof's own program");
    xdp_runs(&structural, &proven, packet)
}

/// r0 of an XDP program over `packet` on the interpreter and the JIT, checked structurally
/// and as proven (shared with the clang-built objects' test, `bpf_loop_object`).
pub(crate) fn xdp_runs(
    structural: &Verified,
    proven: &Verified,
    packet: &[u8],
) -> Vec<(String, u64)> {
    static INTERP: weir_interp::Interp = weir_interp::Interp;
    static JIT: weir_jit::Jit = weir_jit::Jit;
    let mut results = Vec::new();
    for (how, verified, engine) in [
        ("structural", structural, &INTERP as &dyn DynEngine),
        ("structural", structural, &JIT),
        ("proven", proven, &INTERP),
        ("proven", proven, &JIT),
    ] {
        let bindings = Bindings::for_prog_type(ProgType::Xdp);
        let mut session = engine.load(verified, bindings, Limits::default()).expect("loads");
        let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
        let mut packet = packet.to_vec();
        let input = Input::new().ctx(&mut ctx).packet(&mut packet);
        let outcome = session.run(input).unwrap_or_else(|t| panic!("{}: {t:?}", engine.name()));
        results.push((format!("{} {how}", engine.name()), outcome.r0));
    }
    results
}

#[test]
fn bpf_loop_agrees_with_the_kernel_test_run() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: bpf_loop_agrees_with_the_kernel_test_run: {reason}");
        return;
    }
    let packet = [0u8; 64];
    // Not here: a count of 2^32 or more. The helper takes 32 bits of it (weir too), but
    // the kernel inlines a `bpf_loop` whose flags are 0 and callback known, and the
    // inlined code compares all 64 bits with BPF_MAX_LOOPS (-E2BIG, from a 32-bit move).
    // Errors are tested on their low 32 bits (`jsgt32`) for the same reason.
    let cases: [(i64, i64, i64, bool); 8] = [
        (0, 99, 0, false),
        (1, 99, 0, false),
        (10, 99, 0, false),
        (10, 3, 0, false),
        (10, 99, 1, false),
        (8 * 1024 * 1024 + 1, 99, 0, false),
        (6, 99, 0, true),
        (6, 2, 0, true),
    ];
    let kernel = Kernel::new();
    for (count, stop, flags, nested) in cases {
        let text = source(count, stop, flags, nested);
        let insns = weir_isa::asm::assemble(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let program = Program::from_insns(insns);
        let starts = function_starts(&program);
        let names: Vec<String> = (0..starts.len()).map(|k| format!("f{k}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let btf = weir_elf::func_btf(&names);
        let funcs: Vec<(u32, u32)> =
            starts.iter().enumerate().map(|(k, &at)| (at, weir_elf::func_btf_id(k))).collect();
        let loaded = kernel
            .load_with_funcs(
                ProgType::Xdp,
                &program.to_bytes(),
                FuncInfo { btf: &btf, funcs: &funcs },
            )
            .unwrap_or_else(|e| panic!("the kernel refuses it: {e:?}\n{text}"));
        let run = loaded.test_run(&packet, 1).expect("test run");
        for (engine, r0) in weir_runs(&program, &packet) {
            assert_eq!(
                r0 as u32, run.retval,
                "{engine}: bpf_loop({count}, stop {stop}, flags {flags}, nested {nested})"
            );
        }
    }
}
