//! Runs one of bench/programs/*.s, proven for a 1,508-byte buffer and compiled by weir's
//! JIT, in a loop: a process to put under `perf stat` / `perf record` (instructions and
//! cycles per run of the generated code, without the benchmark's other engines).
//!
//! usage: jit_loop PROGRAM RUNS [narrow|rolled]   (PROGRAM: a file name under bench/programs)
//! (JIT_LOOP_DUMP=FILE also writes the generated machine code to FILE.)

use weir_program::abi::Bindings;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(name), Some(runs)) = (args.get(1), args.get(2)) else {
        return Err("usage: jit_loop PROGRAM RUNS [narrow|rolled]".to_string());
    };
    let runs: u64 = runs.parse().map_err(|e| format!("RUNS: {e}"))?;
    let path = format!("{}/programs/{name}.s", env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let insns = weir_isa::asm::assemble(&source).map_err(|e| format!("{path}: {e}"))?;
    let program = weir_program::Program::from_insns(insns);
    // The benchmark's buffer length (bench/src/interp.rs): 1,500 bytes and 8 spare.
    let mem: Vec<u8> = (0..1508u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let options = weir::VerifyOptions {
        memory_len: Some(mem.len() as u64),
        helpers: Some(Vec::new()),
        ..weir::VerifyOptions::default()
    };
    let proven = weir::verify(&program, &options)
        .map_err(|e| format!("{name}: {e}"))?
        .into_verified(program)
        .map_err(|e| format!("{name}: {e}"))?;
    let mut config = weir_jit::Config::default();
    match args.get(3).map(String::as_str) {
        Some("narrow") => config.wide_copy = false,
        Some("rolled") => config.unroll = false,
        _ => {}
    }
    let jit =
        weir_jit::Jit::compile(&proven, Bindings::new(), config).map_err(|e| e.to_string())?;
    // JIT_LOOP_DUMP=FILE: the generated machine code written to FILE, to read with
    // `objdump -D -b binary -m i386:x86-64 FILE` beside the profile.
    if let Some(file) = std::env::var_os("JIT_LOOP_DUMP") {
        std::fs::write(&file, jit.machine_code()).map_err(|e| format!("JIT_LOOP_DUMP: {e}"))?;
    }
    let mut cache = jit.cache();
    // JIT_LOOP_SHIFT=N: the buffer N bytes further into a larger allocation (the distance
    // between the buffer and the stack modulo 4 KiB, for aliasing effects).
    let shift: usize =
        std::env::var("JIT_LOOP_SHIFT").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut backing = vec![0u8; shift + mem.len()];
    backing[shift..].copy_from_slice(&mem);
    let mem = &mut backing[shift..];
    let stack_at = jit.run_mem(&mut cache, mem).map(|_| ()).map_err(|e| e.to_string());
    eprintln!(
        "buffer at {:#x}, stack at {:#x} {stack_at:?}",
        mem.as_ptr() as usize,
        cache.stack().as_ptr() as usize
    );
    let mut sink = 0u64;
    for _ in 0..runs {
        sink = sink.wrapping_add(jit.run_mem(&mut cache, mem).map_err(|e| e.to_string())?);
    }
    println!("{name}: {runs} runs, sum of r0 {sink:#x}");
    Ok(())
}
