//! The Linux kernel as an independent oracle for the corpus's expected values: every case
//! with a `-- result`, no `-- mem`, and no helper calls is loaded with `BPF_PROG_LOAD` as a
//! socket filter and run once with `BPF_PROG_TEST_RUN` on a 64-byte zero packet. The kernel
//! returns the low 32 bits of `r0`; for programs without local calls a second variant
//! returns the high 32 bits (see `weir_conformance::kernel_prep`). Any disagreement fails.
//!
//! Cases the verifier refuses (constant division by zero, shifts by the width, unbounded
//! loops, recursion, stacks over 512 bytes in all, misaligned stack access) are listed as
//! `SKIPPED: kernel_oracle/<case>: <reason>`. Without root or without `bpf()` the whole test
//! says `SKIPPED: kernel_oracle: <reason>` and returns.
//!
//! The syscall itself is `weir_sys::kernel`'s.

use weir_conformance::kernel_prep::{high_half_program, low_half_program, needs_corpus_runtime};
use weir_conformance::{corpus_dir, load_corpus, load_program, Expect};
use weir_isa::ebpf::RawInsn;
use weir_sys::kernel::{self, LoadError, LoadedProgram, ProgType};

/// The kernel must compare at least this many cases, or the oracle checked too little.
const MIN_COMPARED: usize = 100;

fn load(insns: &[RawInsn]) -> Result<LoadedProgram, LoadError> {
    let bytes: Vec<u8> = insns.iter().flat_map(|i| i.to_bytes()).collect();
    kernel::load(ProgType::SocketFilter, &bytes)
}

/// Loads and runs `insns` once on a 64-byte zero packet; `Ok(Err(reason))` when the
/// verifier refuses them.
fn kernel_value(insns: &[RawInsn]) -> Result<Result<u32, String>, String> {
    match load(insns) {
        Ok(fd) => fd.test_run(&[0u8; 64], 1).map(|run| Ok(run.retval)).map_err(|e| e.to_string()),
        Err(refusal) => Ok(Err(refusal.reason())),
    }
}

#[test]
fn kernel_agrees_with_expected_results() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_oracle: {reason}");
        return;
    }
    let cases =
        load_corpus(&corpus_dir()).unwrap_or_else(|e| panic!("cannot load the corpus: {e}"));
    assert!(!cases.is_empty(), "the corpus is empty");

    let mut compared = 0usize;
    let mut high_compared = 0usize;
    let mut skipped = 0usize;
    let mut disagreements = Vec::new();
    for case in &cases {
        let Expect::Result(expected) = case.expect else { continue };
        if !case.mem.is_empty() {
            continue;
        }
        let Ok(program) = load_program(case) else { continue };
        if needs_corpus_runtime(&program) {
            continue;
        }
        let low = match kernel_value(&low_half_program(&program)) {
            Ok(Ok(v)) => v,
            Ok(Err(reason)) => {
                println!("SKIPPED: kernel_oracle/{}: {reason}", case.name);
                skipped += 1;
                continue;
            }
            Err(e) => panic!("{}: {e}", case.name),
        };
        compared += 1;
        let want_low = expected as u32;
        if low != want_low {
            disagreements
                .push(format!("{}: low 32 bits: kernel {low:#x}, corpus {want_low:#x}", case.name));
        }
        let Some(high_program) = high_half_program(&program) else { continue };
        match kernel_value(&high_program) {
            Ok(Ok(high)) => {
                high_compared += 1;
                let want_high = (expected >> 32) as u32;
                if high != want_high {
                    disagreements.push(format!(
                        "{}: high 32 bits: kernel {high:#x}, corpus {want_high:#x}",
                        case.name
                    ));
                }
            }
            Ok(Err(reason)) => {
                println!("SKIPPED: kernel_oracle/{} (high half): {reason}", case.name)
            }
            Err(e) => panic!("{}: {e}", case.name),
        }
    }
    println!(
        "kernel_oracle: {compared} cases compared by the kernel ({high_compared} on all 64 bits), {skipped} refused by the verifier"
    );
    assert!(
        disagreements.is_empty(),
        "the kernel disagrees with {} expected values:\n  {}",
        disagreements.len(),
        disagreements.join("\n  ")
    );
    assert!(
        compared >= MIN_COMPARED,
        "the kernel compared only {compared} cases (want {MIN_COMPARED})"
    );
}

/// Cases that load in weir but must trap at run time (out of bounds, call depth, endless
/// loops) are programs the kernel's verifier must refuse: it proves statically what weir
/// checks at run time. A program the kernel accepts here means the corpus calls something an
/// error that the kernel considers safe.
#[test]
fn kernel_refuses_programs_that_trap() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_oracle: {reason}");
        return;
    }
    let cases =
        load_corpus(&corpus_dir()).unwrap_or_else(|e| panic!("cannot load the corpus: {e}"));
    let mut refused = 0usize;
    let mut accepted = Vec::new();
    for case in &cases {
        if !matches!(case.expect, Expect::Error(_)) || !case.mem.is_empty() {
            continue;
        }
        let Ok(program) = load_program(case) else { continue };
        if needs_corpus_runtime(&program) {
            continue;
        }
        match load(&low_half_program(&program)) {
            Ok(_) => accepted.push(case.name.clone()),
            Err(refusal) => {
                println!("kernel_oracle/{}: refused as expected: {}", case.name, refusal.reason());
                refused += 1;
            }
        }
    }
    println!("kernel_oracle: the verifier refused all {refused} trapping programs it was given");
    assert!(
        accepted.is_empty(),
        "the kernel accepts programs the corpus expects to trap: {}",
        accepted.join(", ")
    );
    assert!(refused >= 10, "only {refused} trapping programs reached the kernel");
}
