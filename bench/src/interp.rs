//! `weir-bench interp`: weir's eBPF interpreter and JIT against rbpf's, on four small
//! programs (bench/programs/*.s) over one 1,500-byte buffer. All four engines' results must
//! agree before any is timed; each ratio is rbpf's time over weir's for the same kind of
//! engine (interpreter against interpreter, JIT against JIT). rbpf's JIT exists only on
//! x86-64 Unix hosts; elsewhere its column says so.
//!
//! A second table compares weir's JIT with the checks kept (a structurally valid program)
//! and with the checks the verifier's facts drop ("proven": the program verified for the
//! 1,508-byte buffer, `weir_jit::Checks` says what was dropped) against rbpf's JIT, which
//! checks nothing, and against the same algorithm written in Rust and compiled by rustc
//! (`native`: what an ahead-of-time compiler makes of it, bounds checks elided by
//! iterators; the loop over the buffer may be vectorized), and against the same programs
//! in C (bench/programs/compute.c) built by clang with and without unrolling and
//! vectorising (`C_FLAGS`), run in their own process on the same buffer, their results
//! checked too; the proven row and the C rows are timed in turn, sample by sample
//! (`time_paired`), and prov/C is the median of the per-round ratios. The `rolled`
//! column is the proven program compiled with `weir_jit::Config::unroll` off: what
//! unrolling counted loops gains, in the same run; `narrow` with
//! `weir_jit::Config::wide_copy` off: what moving copy loops 16 bytes at a time and adding
//! sum loops two words a lane gain (stack-copy).
//!
//! Issue 12's goal lines are read from rows that take turns on one thread
//! (`timing::time_interleaved`, as `weir-bench match` reads issue 15's): per program,
//! jit-proven, C -O2 (compute.c built as a shared object and loaded into this process,
//! `CInProcess`), rbpf's JIT and weir's interpreter run turns of the same number of runs
//! (about 20 µs of the fastest row), every run's result checked, each turn timed by the
//! thread's CPU time; the goals (jit-proven / C-O2 <= 1.2, rbpf-jit / jit-proven >= 1) are
//! medians of the per-round ratios, with quartiles. The table's own prov/C, with C in
//! another process and wall-clock samples, moved with the C row's moments
//! (bench/records/2026-11-30-idle-22.txt).
//!
//! Each interpreter row also gives the instructions one run executes (the interpreter's own
//! counter, `Cache::executed`) and weir's nanoseconds per executed instruction. A second
//! table does the same for the filter programs: weir's emitted eBPF (socket-filter target)
//! for every filter of bench/filters.txt, run by weir's interpreter over the hot workload's
//! 256 generated frames, set up as `weir-bench filters` sets up its `interp` engine.
//!
//! A third table (issue 13; `--cbpf-only` runs it alone) puts weir's classic interpreter
//! against libpcap's `bpf_filter` on libpcap's own program for every bench filter: both,
//! and a second copy of libpcap's (the A/A floor), take turns over the same packets, hot
//! and streaming, and each row's verdict is [`Verdict::of`] its per-round ratios.

use crate::record::say;
use crate::timing::{geomean, per_round, time_interleaved, ChunkRow, Samples, Verdict};
use std::time::{Duration, Instant};

use weir_interp::{Config, Interpreter};
use weir_jit::Jit;
use weir_pflang::names::NameDb;
use weir_pflang::LinkType;
use weir_program::abi::Bindings;
use weir_program::exec::Input;
use weir_program::{ProgType, Program, Verified};
use weir_sys::libpcap;

use crate::engines::pcap_insns;
use crate::filterlist;
use crate::filters::compile_weir;
use crate::record::{self, Log};
use crate::workload::{Source, Workload};
use crate::{traffic, workload};

const PROGRAMS: &[(&str, &str)] = &[
    ("byte-sum", include_str!("../programs/byte-sum.s")),
    ("inet-checksum", include_str!("../programs/inet-checksum.s")),
    ("fnv1a-hash", include_str!("../programs/fnv1a-hash.s")),
    ("stack-copy", include_str!("../programs/stack-copy.s")),
];

const PACKET_LEN: usize = 1500;

/// The four programs in Rust, as a C programmer would write them (`native` column).
fn native(name: &str, p: &[u8]) -> u64 {
    let data = p.get(..PACKET_LEN).unwrap_or(p);
    match name {
        "byte-sum" => data.iter().map(|&b| u64::from(b)).sum(),
        "inet-checksum" => {
            let mut sum: u64 =
                data.chunks_exact(2).map(|w| u64::from(u16::from_be_bytes([w[0], w[1]]))).sum();
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            sum ^ 0xffff
        }
        "fnv1a-hash" => data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }),
        _ => {
            // stack-copy: the first 256 bytes copied to a stack buffer in 8-byte words,
            // six times, then the words summed.
            let mut buf = [0u64; 32];
            for _ in 0..6 {
                for (word, bytes) in buf.iter_mut().zip(p.chunks_exact(8)) {
                    *word = u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]));
                }
            }
            buf.iter().fold(0u64, |a, &w| a.wrapping_add(w))
        }
    }
}

/// A deterministic packet: the benchmark must see the same bytes every run.
fn packet() -> Vec<u8> {
    let mut state: u32 = 0x1234_5678;
    (0..PACKET_LEN + 8)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// Median nanoseconds per call over `rounds` rounds; each round runs `inner` calls.
fn time_median(rounds: usize, inner: usize, mut call: impl FnMut() -> u64) -> f64 {
    let mut sink = 0u64;
    for _ in 0..inner {
        sink = sink.wrapping_add(call());
    }
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..inner {
                sink = sink.wrapping_add(call());
            }
            start.elapsed().as_nanos() as f64 / inner as f64
        })
        .collect();
    std::hint::black_box(sink);
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The C anchor's two builds: clang's `-O2`, and `-O2` without unrolling or vectorising
/// (the loop as written, which is what weir's JIT emits without unrolling).
const C_FLAGS: [&[&str]; 2] =
    [&["-O2"], &["-O2", "-fno-unroll-loops", "-fno-vectorize", "-fno-slp-vectorize"]];

/// One C build in its own process (`compute BUFFER serve`): its results per program, and
/// its pipes, through which the bench asks it for one timed sample at a time.
struct CServer {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
    results: std::collections::HashMap<String, u64>,
}

impl CServer {
    /// One sample of `name`: the C process runs it 200 times untimed, then 200 times timed,
    /// and answers ns per call.
    fn sample(&mut self, name: &str) -> Result<f64, String> {
        use std::io::{BufRead, Write};
        writeln!(self.input, "{name}")
            .and_then(|()| self.input.flush())
            .map_err(|e| format!("the C anchor: {e}"))?;
        let mut line = String::new();
        self.output.read_line(&mut line).map_err(|e| format!("the C anchor: {e}"))?;
        line.trim().parse().map_err(|e| format!("the C anchor answered {line:?}: {e}"))
    }
}

impl Drop for CServer {
    fn drop(&mut self) {
        // Its stdin closes with `self`; kill in case it is stuck, then reap it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// bench/programs/compute.c (the four programs in C, see its header) built with each of
/// [`C_FLAGS`] and started on `pkt`, one [`CServer`] per flag set.
/// `Err` says why there is no anchor (no clang, a failed build or start).
fn c_anchor(pkt: &[u8]) -> Result<Vec<CServer>, String> {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("weir-bench-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let source = dir.join("compute.c");
    let buffer = dir.join("buffer.bin");
    std::fs::write(&source, include_str!("../programs/compute.c"))
        .and_then(|()| std::fs::write(&buffer, pkt))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut servers = Vec::new();
    for (k, flags) in C_FLAGS.iter().enumerate() {
        let exe = dir.join(format!("compute-{k}"));
        let built = std::process::Command::new("clang")
            .args(*flags)
            .arg("-o")
            .arg(&exe)
            .arg(&source)
            .status()
            .map_err(|e| format!("clang: {e}"))?;
        if !built.success() {
            return Err(format!("clang {} failed: {built}", flags.join(" ")));
        }
        let mut child = std::process::Command::new(&exe)
            .arg(&buffer)
            .arg("serve")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(format!("{}: no pipes", exe.display()));
        };
        let mut server = CServer {
            child,
            input,
            output: std::io::BufReader::new(output),
            results: std::collections::HashMap::new(),
        };
        // Its first lines: each program's result, before any time is asked for.
        for _ in PROGRAMS {
            let mut line = String::new();
            server.output.read_line(&mut line).map_err(|e| format!("{}: {e}", exe.display()))?;
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, result] = fields[..] else {
                return Err(format!("the C anchor printed {line:?}"));
            };
            let result = result.parse().map_err(|e| format!("{line:?}: {e}"))?;
            server.results.insert(name.to_string(), result);
        }
        servers.push(server);
    }
    // The executables stay open in their processes; their directory can go.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(servers)
}

/// bench/programs/compute.c built by clang at `C_FLAGS[0]` (-O2) as a shared object and
/// loaded into this process: the C -O2 row of the interleaved goal rows, which must run on
/// the thread whose CPU time [`time_interleaved`] reads, as weir's rows do. Its functions'
/// code is the executable's (same flags; `-fPIC` changes nothing in them: they touch no
/// global).
struct CInProcess {
    /// Kept open while `calls` may be called: the code lives in it.
    _library: libloading::Library,
    /// compute.c's `weir_compute_calls(program, buffer, calls, expect)`.
    calls: unsafe extern "C" fn(u32, *const u8, u64, u64) -> u64,
}

impl CInProcess {
    /// Builds and loads it; `Err` says why there is none (no clang, a failed build or load).
    fn load() -> Result<CInProcess, String> {
        let dir = std::env::temp_dir().join(format!("weir-bench-c-so-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let source = dir.join("compute.c");
        let object = dir.join("compute.so");
        std::fs::write(&source, include_str!("../programs/compute.c"))
            .map_err(|e| format!("{}: {e}", source.display()))?;
        let built = std::process::Command::new("clang")
            .args(C_FLAGS[0])
            .args(["-shared", "-fPIC", "-o"])
            .arg(&object)
            .arg(&source)
            .status()
            .map_err(|e| format!("clang: {e}"))?;
        if !built.success() {
            return Err(format!("clang {} -shared -fPIC failed: {built}", C_FLAGS[0].join(" ")));
        }
        // SAFETY: the library is compute.c, just built from the bench's own source: it has
        // no initialisers or destructors, so loading it runs no code.
        let library = unsafe { libloading::Library::new(&object) }
            .map_err(|e| format!("{}: {e}", object.display()))?;
        // SAFETY: the type is compute.c's prototype of `weir_compute_calls`
        // (uint32_t, const uint8_t *, uint64_t, uint64_t) -> uint64_t, in the C ABI.
        let calls = unsafe {
            library.get::<unsafe extern "C" fn(u32, *const u8, u64, u64) -> u64>(
                b"weir_compute_calls\0",
            )
        }
        .map(|symbol| *symbol)
        .map_err(|e| format!("{}: {e}", object.display()))?;
        // The mapping stays in the process; the file can go.
        let _ = std::fs::remove_dir_all(&dir);
        Ok(CInProcess { _library: library, calls })
    }

    /// `calls` runs of program `k` (index in [`PROGRAMS`]) on `buffer`; how many gave
    /// `expect`. 0 for a buffer shorter than the programs read, which the caller's count
    /// check turns into an error.
    fn run(&self, k: usize, buffer: &[u8], calls: usize, expect: u64) -> usize {
        let (Ok(k), Ok(n)) = (u32::try_from(k), u64::try_from(calls)) else { return 0 };
        if buffer.len() < PACKET_LEN {
            return 0;
        }
        // SAFETY: `calls` points into `_library`, which lives as long as `self`; the
        // programs read at most PACKET_LEN (compute.c's LEN) bytes from the pointer, which
        // `buffer` has, and write only their own stack; a `k` past the table returns 0.
        let hits = unsafe { (self.calls)(k, buffer.as_ptr(), n, expect) };
        usize::try_from(hits).unwrap_or(0)
    }
}

/// Each turn of an interleaved goal row lasts about this long on the fastest row, long
/// against the clock pair's own cost (which is taken off each turn) and short against a
/// round, so every row meets each moment of the machine.
const GOAL_TURN_NS: f64 = 20_000.0;

/// Turns per cover of the interleaved goal rows (each row's turns start at its own one).
const GOAL_TURNS: usize = 8;

/// The interleaved goal rows of one program: `rows` (`rows[0]` weir's proven JIT) take turns (`time_interleaved`) of `calls` runs each, every run's result checked,
/// for `rounds` rounds of ~10 ms of CPU each; per-round ns of each row, in `rows`' order.
fn interleaved_rows<'a>(
    rounds: usize,
    buffer: &'a [u8],
    calls: usize,
    rows: &mut [ChunkRow<'a>],
) -> Result<Vec<Vec<f64>>, String> {
    let packets = vec![buffer; calls * GOAL_TURNS];
    let expected = vec![packets.len(); rows.len()];
    time_interleaved(rounds, Duration::from_millis(10), &packets, calls, &expected, rows)
}

/// The goal line of one program from [`interleaved_rows`]' rounds: jit-proven / C-O2 and
/// rbpf-jit / jit-proven as medians of per-round ratios with quartiles, against issue 12's
/// goals (<= 1.2, >= 1), the interpreter's ratio for reference, and each row's median ns.
fn goal_line(name: &str, calls: usize, labels: &[&str], per: &[Vec<f64>]) -> String {
    let at = |label: &str| labels.iter().position(|l| *l == label);
    let ratio = |num: usize, den: usize, goal: &str, met: &dyn Fn(f64) -> bool| {
        let s = per_round(per, |r| r[num] / r[den]);
        let (q1, q3) = s.quartiles();
        let verdict = if met(s.median()) { "met" } else { "NOT met" };
        format!("{:.2}x [{q1:.2}-{q3:.2}] ({goal}: {verdict})", s.median())
    };
    let prov = 0;
    let c = at("C-O2")
        .map_or("n/a (no C anchor)".to_string(), |k| ratio(prov, k, "goal <= 1.2", &|r| r <= 1.2));
    let rbpf = at("rbpf-jit").map_or("n/a (rbpf has no JIT here)".to_string(), |k| {
        ratio(k, prov, "goal >= 1", &|r| r >= 1.0)
    });
    let interp = at("weir-interp").map_or("n/a".to_string(), |k| {
        format!("{:.0}x", per_round(per, |r| r[k] / r[prov]).median())
    });
    let ns: Vec<String> = labels
        .iter()
        .enumerate()
        .map(|(k, l)| format!("{l} {:.1}", per_round(per, |r| r[k]).median()))
        .collect();
    format!(
        "{name}, rows interleaved by {calls}-run turns (thread CPU time), median of {} per-round \
         ratios [quartiles]: jit-proven / C-O2 = {c}; rbpf-jit / jit-proven = {rbpf}; \
         weir-interp / jit-proven = {interp}; ns/run medians: {}",
        per.len(),
        ns.join(", ")
    )
}

/// One sample of a row: 200 untimed calls, then nanoseconds per call over 200 timed.
#[inline(always)]
fn sample(mut call: impl FnMut() -> u64) -> f64 {
    const INNER: usize = 200;
    let mut sink = 0u64;
    for _ in 0..INNER {
        sink = sink.wrapping_add(call());
    }
    let start = Instant::now();
    for _ in 0..INNER {
        sink = sink.wrapping_add(call());
    }
    let ns = start.elapsed().as_nanos() as f64 / INNER as f64;
    std::hint::black_box(sink);
    ns
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median over rounds of `a`'s sample over `b`'s sample of the same round.
fn median_ratio(a: &[f64], b: &[f64]) -> f64 {
    median(a.iter().zip(b).map(|(a, b)| a / b).collect())
}

/// What [`time_paired`] measured: each row's samples by round, each C build's median, and
/// per C build the median over rounds of row 0's sample over that build's of the round.
struct Paired {
    rows: Vec<Vec<f64>>,
    c_ns: Vec<f64>,
    c_ratios: Vec<f64>,
}

/// `rounds` samples of each of weir's `rows` (`sample_row(k)`: one [`sample`] of row k,
/// row 0 the proven JIT's) and of each C build's (`c`), taken in turn: per round, each C
/// build's sample then each row's, all of one shape, so that every row meets the same
/// moments of a shared machine as the others and the ratios between rows compare samples
/// of one round (a row timed as one burst of its own lands in whatever mode the machine is
/// in then: bench/records/2026-11-30-jit-12.txt).
fn time_paired(
    rounds: usize,
    name: &str,
    c: &mut [CServer],
    rows: usize,
    mut sample_row: impl FnMut(usize) -> f64,
) -> Result<Paired, String> {
    let mut weir = vec![Vec::with_capacity(rounds); rows];
    let mut theirs = vec![Vec::with_capacity(rounds); c.len()];
    for _ in 0..rounds {
        for (server, samples) in c.iter_mut().zip(&mut theirs) {
            samples.push(server.sample(name)?);
        }
        for (k, samples) in weir.iter_mut().enumerate() {
            samples.push(sample_row(k));
        }
    }
    let c_ratios = theirs.iter().map(|c_ns| median_ratio(&weir[0], c_ns)).collect();
    Ok(Paired { rows: weir, c_ns: theirs.into_iter().map(median).collect(), c_ratios })
}

/// Runs the suite; `Ok(false)` when the two interpreters disagree on a program.
pub fn run(rounds: usize, record: bool, cbpf_only: bool, command: &str) -> Result<bool, String> {
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    if cbpf_only {
        let mut log = Log::default();
        let agreed = cbpf_rows(rounds, &mut log)?;
        if agreed && record {
            let path = record::write("interp", command, &cbpf_notes(), &log.lines)?;
            say!("recorded {}", path.display());
        }
        return Ok(agreed);
    }
    let pkt = packet();
    let mut log = Log::default();
    log.line(format!(
        "{:<15} {:>11} {:>11} {:>6}  {:>9} {:>9} {:>6}  {:>7} {:>8}   (ns per run, median of \
         {rounds} rounds; insns: executed per run, interpreter's counter)",
        "program",
        "weir-interp",
        "rbpf-interp",
        "ratio",
        "weir-jit",
        "rbpf-jit",
        "ratio",
        "insns",
        "ns/insn"
    ));
    let mut agreed = true;
    let mut jit_rows = Vec::new();
    // The C anchor runs first, on the same buffer, in its own process.
    let mut c_builds = c_anchor(&pkt).unwrap_or_else(|e| {
        eprintln!("no C anchor: {e}");
        Vec::new()
    });
    // The C -O2 build again, in this process, for the interleaved goal rows.
    let c_in_process = CInProcess::load()
        .inspect_err(|e| eprintln!("no in-process C anchor (goal rows without C): {e}"))
        .ok();
    let mut goal_lines = Vec::new();
    for (k, (name, source)) in PROGRAMS.iter().enumerate() {
        let insns = weir_isa::asm::assemble(source).map_err(|e| format!("{name}: {e}"))?;
        let program = Program::from_insns(insns);
        let bytes = program.to_bytes();
        let verified = weir_program::Verified::structural(program.clone())
            .map_err(|e| format!("{name}: {e}"))?;
        let interp = Interpreter::new(&verified, Bindings::new(), Config::default());
        let jit = Jit::compile(&verified, Bindings::new(), weir_jit::Config::default())
            .map_err(|e| format!("{name}: {e}"))?;
        let mut cache = interp.cache();
        let mut jit_cache = jit.cache();
        let mut weir_mem = pkt.clone();
        let mut rbpf_mem = pkt.clone();
        let mut vm = rbpf::EbpfVmRaw::new(Some(&bytes))
            .map_err(|e| format!("{name}: rbpf refuses the program: {e}"))?;
        let rbpf_jit = rbpf_jit_compile(&mut vm);
        let weir_r0 = interp.run_mem(&mut cache, &mut weir_mem);
        let jit_r0 = jit.run_mem(&mut jit_cache, &mut weir_mem);
        let rbpf_r0 = vm.execute_program(&mut rbpf_mem);
        let rbpf_jit_r0 = rbpf_jit.then(|| rbpf_jit_run(&vm, &mut rbpf_mem));
        let all_agree = match (&weir_r0, &jit_r0, &rbpf_r0) {
            (Ok(a), Ok(b), Ok(c)) => {
                a == b && b == c && rbpf_jit_r0.as_ref().is_none_or(|r| r.as_ref().ok() == Some(c))
            }
            _ => false,
        };
        if !all_agree {
            eprintln!(
                "{name}: results differ: weir-interp {weir_r0:?}, weir-jit {jit_r0:?}, \
                 rbpf-interp {rbpf_r0:?}, rbpf-jit {rbpf_jit_r0:?}"
            );
            agreed = false;
            continue;
        }
        // The program proven for this buffer: the JIT drops the checks its facts cover.
        let options = weir::VerifyOptions {
            memory_len: Some(pkt.len() as u64),
            helpers: Some(Vec::new()),
            ..weir::VerifyOptions::default()
        };
        let proven = weir::verify(&program, &options)
            .map_err(|e| format!("{name}: the verifier refuses it: {e}"))?
            .into_verified(program.clone())
            .map_err(|e| format!("{name}: {e}"))?;
        let proven_jit = Jit::compile(&proven, Bindings::new(), weir_jit::Config::default())
            .map_err(|e| format!("{name}: {e}"))?;
        // The same proof, counted loops not unrolled: what unrolling gains, in this run.
        let rolled_config = weir_jit::Config { unroll: false, ..weir_jit::Config::default() };
        let rolled_jit = Jit::compile(&proven, Bindings::new(), rolled_config)
            .map_err(|e| format!("{name}: {e}"))?;
        let mut rolled_cache = rolled_jit.cache();
        // The same proof, unrolled but copy loops moved as written (8 bytes a pair): what
        // the wide moves of `codegen::copy` gain, in this run.
        let narrow_config = weir_jit::Config { wide_copy: false, ..weir_jit::Config::default() };
        let narrow_jit = Jit::compile(&proven, Bindings::new(), narrow_config)
            .map_err(|e| format!("{name}: {e}"))?;
        let mut narrow_cache = narrow_jit.cache();
        // WEIR_BENCH_DUMP=DIR writes the proven program's machine code to DIR/NAME.bin
        // (`objdump -D -b binary -mi386:x86-64`), to read beside a C compiler's.
        if let Some(dir) = std::env::var_os("WEIR_BENCH_DUMP") {
            let path = std::path::Path::new(&dir).join(format!("{name}.bin"));
            std::fs::write(&path, proven_jit.machine_code())
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let mut proven_cache = proven_jit.cache();
        let proven_r0 = proven_jit.run_mem(&mut proven_cache, &mut weir_mem);
        let rolled_r0 = rolled_jit.run_mem(&mut rolled_cache, &mut weir_mem);
        let narrow_r0 = narrow_jit.run_mem(&mut narrow_cache, &mut weir_mem);
        let native_r0 = native(name, &pkt);
        let c_results: Vec<u64> =
            c_builds.iter().filter_map(|b| b.results.get(*name).copied()).collect();
        if c_results.iter().any(|&r| Ok(r) != weir_r0) {
            eprintln!("{name}: the C anchor's results {c_results:?} differ from {weir_r0:?}");
            agreed = false;
            continue;
        }
        if proven_r0 != weir_r0
            || rolled_r0 != weir_r0
            || narrow_r0 != weir_r0
            || Ok(native_r0) != weir_r0
        {
            eprintln!(
                "{name}: results differ: weir-interp {weir_r0:?}, jit (proven) {proven_r0:?}, \
                 native {native_r0:#x}"
            );
            agreed = false;
            continue;
        }
        let executed = cache.executed();
        let inner = 200;
        let weir_ns =
            time_median(rounds, inner, || interp.run_mem(&mut cache, &mut weir_mem).unwrap_or(0));
        let rbpf_ns = time_median(rounds, inner, || vm.execute_program(&mut rbpf_mem).unwrap_or(0));
        // The goal's row and the rows compared with it, sampled in turn with the C builds'
        // (see `time_paired`): proven, checked (old), rolled, narrow, native.
        let c_named = c_builds.iter().all(|b| b.results.contains_key(*name));
        let c_servers: &mut [CServer] = if c_named { &mut c_builds } else { &mut [] };
        let paired = time_paired(rounds, name, c_servers, 5, |row| match row {
            0 => sample(|| proven_jit.run_mem(&mut proven_cache, &mut weir_mem).unwrap_or(0)),
            1 => sample(|| jit.run_mem(&mut jit_cache, &mut weir_mem).unwrap_or(0)),
            2 => sample(|| rolled_jit.run_mem(&mut rolled_cache, &mut weir_mem).unwrap_or(0)),
            3 => sample(|| narrow_jit.run_mem(&mut narrow_cache, &mut weir_mem).unwrap_or(0)),
            _ => sample(|| native(name, std::hint::black_box(&weir_mem))),
        })?;
        let Paired { rows, c_ns, c_ratios } = paired;
        let Ok([proven, old, rolled, narrow, native_samples]) = <[Vec<f64>; 5]>::try_from(rows)
        else {
            return Err(format!("{name}: time_paired gave other than five rows"));
        };
        let [proven_ns, jit_ns, rolled_ns, narrow_ns, native_ns] =
            [&proven, &old, &rolled, &narrow, &native_samples].map(|v| median(v.clone()));
        let c_col = |k: usize| c_ns.get(k).map_or("n/a".to_string(), |ns| format!("{ns:.0}"));
        let c_ratio = |k: usize| c_ratios.get(k).map_or("-".to_string(), |r| format!("{r:.2}x"));
        let (rbpf_jit_ns, jit_ratio, proven_ratio) = if rbpf_jit {
            let ns = time_median(rounds, inner, || rbpf_jit_run(&vm, &mut rbpf_mem).unwrap_or(0));
            (format!("{ns:.0}"), format!("{:.2}x", ns / jit_ns), format!("{:.2}x", ns / proven_ns))
        } else {
            ("n/a".to_string(), "-".to_string(), "-".to_string())
        };
        // Issue 12's goals again, from rows that take turns on this thread (the rows above
        // are each timed by the wall clock, the C ones in another process, and on a shared
        // machine prov/C moved with the C row's own moments: 2026-11-30-idle-22.txt).
        let Ok(want) = weir_r0 else {
            return Err(format!("{name}: no result to check the goal rows against"));
        };
        let fastest = c_ns.first().map_or(proven_ns, |&c| c.min(proven_ns)).max(1.0);
        let calls = (GOAL_TURN_NS / fastest).clamp(8.0, 4096.0) as usize;
        let mut interp_mem = pkt.clone();
        let mut proven_row = |c: &[&[u8]]| {
            c.iter()
                .filter(|_| proven_jit.run_mem(&mut proven_cache, &mut weir_mem) == Ok(want))
                .count()
        };
        let mut c_row = |c: &[&[u8]]| match (&c_in_process, c.first()) {
            (Some(lib), Some(buffer)) => lib.run(k, buffer, c.len(), want),
            _ => 0,
        };
        let mut rbpf_row = |c: &[&[u8]]| {
            c.iter().filter(|_| rbpf_jit_run(&vm, &mut rbpf_mem).ok() == Some(want)).count()
        };
        let mut interp_row = |c: &[&[u8]]| {
            c.iter().filter(|_| interp.run_mem(&mut cache, &mut interp_mem) == Ok(want)).count()
        };
        let (mut labels, mut rows): (Vec<&str>, Vec<ChunkRow<'_>>) =
            (vec!["jit-proven"], vec![&mut proven_row]);
        if c_in_process.is_some() && c_named {
            labels.push("C-O2");
            rows.push(&mut c_row);
        }
        if rbpf_jit {
            labels.push("rbpf-jit");
            rows.push(&mut rbpf_row);
        }
        labels.push("weir-interp");
        rows.push(&mut interp_row);
        let per = interleaved_rows(rounds, &pkt, calls, &mut rows)
            .map_err(|e| format!("{name}: interleaved goal rows: {e}"))?;
        goal_lines.push(goal_line(name, calls, &labels, &per));
        let checks = proven_jit.checks();
        jit_rows.push(format!(
            "{name:<15} {jit_ns:>9.0} {rolled_ns:>9.0} {narrow_ns:>9.0} {proven_ns:>10.0} \
             {rbpf_jit_ns:>9} {native_ns:>8.0} {:>6} {:>8}  {proven_ratio:>10} {:>10.2}x {:>7} \
             {:>9} {:>8.2}x {:>8.2}x {:>9.2}x   {}/{} kept, {} dropped",
            c_col(0),
            c_col(1),
            median_ratio(&proven, &native_samples),
            c_ratio(0),
            c_ratio(1),
            median_ratio(&rolled, &proven),
            median_ratio(&narrow, &proven),
            median_ratio(&old, &proven),
            checks.accesses_kept,
            checks.accesses_kept + checks.accesses_dropped + checks.frame_accesses,
            checks.accesses_dropped,
        ));
        log.line(format!(
            "{name:<15} {weir_ns:>11.0} {rbpf_ns:>11.0} {:>5.2}x  {jit_ns:>9.0} {rbpf_jit_ns:>9} \
             {jit_ratio:>6}  {executed:>7} {:>8.2}",
            rbpf_ns / weir_ns,
            weir_ns / executed.max(1) as f64
        ));
    }
    log.line(String::new());
    log.line(format!(
        "{:<15} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>6} {:>8}  {:>10} {:>11} {:>7} {:>9} \
         {:>9} {:>9} {:>10}   {}   (ns per run, median of {rounds} rounds)",
        "program",
        "weir-jit",
        "rolled",
        "narrow",
        "jit-proven",
        "rbpf-jit",
        "native",
        "C-O2",
        "C-rolled",
        "rbpf/proven",
        "proven/native",
        "prov/C",
        "prov/C-rol",
        "rolled/prov",
        "narrow/prov",
        "old/new",
        "memory checks (proven)"
    ));
    for row in jit_rows {
        log.line(row);
    }
    log.line(String::new());
    for line in goal_lines {
        log.line(line);
    }
    filter_rows(rounds, &mut log)?;
    agreed &= cbpf_rows(rounds, &mut log)?;
    compile_rows(&mut log)?;
    if agreed && record {
        let notes = [
            "ratio = rbpf time / weir time (interpreters, then JITs)".to_string(),
            "second table: weir-jit keeps every check (old), jit-proven drops what the verifier's \
             facts cover (new); rbpf/proven >= 1 and proven/native <= 1.2 are issue 12's goals"
                .to_string(),
            "rolled: jit-proven with counted loops not unrolled (weir_jit::Config::unroll off); \
             narrow: unrolled, copy and sum loops not run wide (weir_jit::Config::wide_copy off); \
             native: the programs in Rust (rustc); C-O2 and C-rolled: bench/programs/compute.c \
             (stack-copy's stores kept, see its header) built by clang -O2, and -O2 \
             -fno-unroll-loops -fno-vectorize -fno-slp-vectorize; prov/C is issue 12's goal: \
             jit-proven and C are sampled in turn (a C sample, then weir's, each 200 calls \
             after 200 untimed), prov/C the median of the rounds' own ratios; weir-jit (in both \
             tables), rolled, narrow and native are sampled in the same rounds, after \
             jit-proven, and proven/native, rolled/prov, narrow/prov and old/new are medians \
             of the rounds' own ratios too (rbpf's rows are timed on their own)"
                .to_string(),
            "goal lines (after the table, issue 12's reading): jit-proven, C-O2 (compute.c \
             built -O2 -shared -fPIC and loaded into this process), rbpf-jit and weir-interp \
             take turns of N runs (about 20 us of the fastest row) on one thread, order \
             reversed every other turn, each turn timed by the thread's CPU time less the \
             clock pair's cost (timing::time_interleaved), ~10 ms of CPU a round; every run's \
             result checked; ratios are medians of the per-round ratios [quartiles]"
                .to_string(),
        ];
        let notes: Vec<String> = notes.into_iter().chain(cbpf_notes()).collect();
        let path = record::write("interp", command, &notes, &log.lines)?;
        say!("recorded {}", path.display());
    }
    Ok(agreed)
}

/// The filter table: per filter, weir's interpreter on weir's emitted eBPF over the hot
/// workload, with the instructions the 256 runs executed and the time per instruction.
fn filter_rows(rounds: usize, log: &mut Log) -> Result<(), String> {
    let names = NameDb::system();
    let mut frames = traffic::frames(traffic::SEED, workload::HOT_PACKETS);
    let layout = ProgType::SocketFilter.context_layout();
    let len_at = layout.field("len").map_or(0, |f| f.offset as usize);
    let mut ctx = vec![0u8; layout.size as usize];
    log.line(String::new());
    log.line(format!(
        "{:<48} {:>8} {:>9} {:>8}   (weir's eBPF on weir-interp over {} hot frames; ns/pkt \
         median of {rounds} rounds)",
        "filter",
        "ns/pkt",
        "insns/pkt",
        "ns/insn",
        frames.len()
    ));
    let (mut all_ns, mut all_insns) = (0f64, 0u64);
    for bench in filterlist::filters(&[], false)? {
        let label: String = bench.label.chars().take(48).collect();
        let (_, optimized) = match compile_weir(&bench.expr, LinkType::Ethernet, &names) {
            Ok(compiled) => compiled,
            Err(e) => {
                log.line(format!("{label:<48} skipped: weir cannot compile it: {e}"));
                continue;
            }
        };
        let program = weir_filter::emit::ebpf::emit(&optimized, ProgType::SocketFilter)
            .map_err(|e| format!("{}: eBPF emitter: {e}", bench.label))?;
        let verified =
            Verified::structural(program).map_err(|e| format!("{}: {e}", bench.label))?;
        let bindings = Bindings::for_prog_type(ProgType::SocketFilter);
        let interp = Interpreter::new(&verified, bindings, Config::default());
        let mut cache = interp.cache();
        // One pass: every frame once; returns the instructions executed, so the closure's
        // result feeds the timing's sink and the count comes from the same runs.
        let mut pass = || -> Result<u64, String> {
            let mut executed = 0u64;
            for frame in frames.iter_mut() {
                let wire = frame.len() as u32;
                if let Some(field) = ctx.get_mut(len_at..len_at + 4) {
                    field.copy_from_slice(&wire.to_le_bytes());
                }
                let outcome = interp
                    .run_stats(&mut cache, Input::new().ctx(&mut ctx).packet(frame))
                    .map_err(|trap| format!("{}: the interpreter trapped: {trap}", bench.label))?;
                executed += outcome.executed;
            }
            Ok(executed)
        };
        let executed = pass()?;
        let ns = time_median(rounds, 20, || pass().unwrap_or(0));
        let packets = frames.len() as f64;
        all_ns += ns;
        all_insns += executed;
        log.line(format!(
            "{label:<48} {:>8.1} {:>9.1} {:>8.2}",
            ns / packets,
            executed as f64 / packets,
            ns / executed.max(1) as f64
        ));
    }
    log.line(format!(
        "{:<48} {:>8} {:>9} {:>8.2}",
        "all filters (total time / total instructions)",
        "",
        "",
        all_ns / all_insns.max(1) as f64
    ));
    Ok(())
}

/// Packets a turn of the classic rows runs: long against the clock pair taken off each
/// turn.
const CBPF_CHUNK: usize = 1024;

/// Copies of the 256 hot packets (the same memory) in one cover of the hot classic rows:
/// six chunks, so that each row starts its cover at its own chunk.
const CBPF_HOT_COPIES: usize = 24;

/// What the classic rows' columns mean, for the record.
fn cbpf_notes() -> Vec<String> {
    vec![format!(
        "classic rows (issue 13): libpcap's optimized program on weir's classic interpreter \
         (CbpfFilter::new_libpcap) and on libpcap's bpf_filter, twice (A/A: a second validated \
         copy); every packet's result compared first; the three take turns of {CBPF_CHUNK} \
         packets on one thread (thread CPU time, order reversed every other turn), hot: the 256 \
         hot packets x {CBPF_HOT_COPIES} a cover, ~10 ms a round; stream: one cover of the \
         stream a round; cbpf/pcap and A/A are medians of per-round ratios [quartiles]; \
         verdict: slower when cbpf/pcap's first quartile is above both 1.0 and A/A's third, \
         faster when its third is below both 1.0 and A/A's first, else ~"
    )]
}

/// One classic row's figures on one workload: per round weir's time over libpcap's and
/// libpcap's second copy over its first (the A/A floor).
struct CbpfRow {
    ratio: Samples,
    aa: Samples,
}

impl CbpfRow {
    fn verdict(&self) -> Verdict {
        Verdict::of(&self.ratio, &self.aa)
    }
}

/// Issue 13's classic-interpreter rows: for every filter of the bench list, libpcap's
/// optimized program on weir's classic interpreter (`CbpfFilter::new_libpcap`, the
/// cbpf/pcap engine of `weir-bench filters`) and on libpcap's `bpf_filter`, twice (two
/// validated copies: the A/A row), over the hot packets and the stream. Every packet's
/// result must be the same on both first. The three rows take turns of [`CBPF_CHUNK`]
/// packets within each round (`time_interleaved`: thread CPU time, order reversed every
/// other turn, each row starting its cover at its own chunk); the ratios are medians of the
/// per-round ratios with quartiles, each judged against the A/A row ([`Verdict`]).
/// `Ok(false)` when a filter's results differ.
fn cbpf_rows(rounds: usize, log: &mut Log) -> Result<bool, String> {
    if let Err(e) = libpcap::available() {
        log.line(format!("SKIPPED: classic interpreter rows: {e}"));
        return Ok(true);
    }
    let pcap = libpcap::load()?;
    let list = filterlist::filters(&[], false)?;
    let hot = Source::Generated.load(workload::HOT_PACKETS)?;
    let stream = Source::Generated.load(workload::STREAM_PACKETS)?;
    let workloads = [
        Workload::new("hot", &hot, workload::HOT_PACKETS),
        Workload::new("stream", &stream, workload::STREAM_PACKETS),
    ];
    let compiled: Vec<_> = list
        .iter()
        .map(|bench| (bench, pcap.compile(&bench.expr, LinkType::Ethernet.dlt() as i32, true)))
        .collect();
    let mut agreed = true;
    for w in &workloads {
        let records: Vec<(&[u8], u32)> = w.packets().collect();
        let (copies, round_target) = if w.kind == "hot" {
            (CBPF_HOT_COPIES, Duration::from_millis(10))
        } else {
            // One cover a round: every packet comes from memory once per row.
            (1, Duration::ZERO)
        };
        let packets: Vec<(&[u8], u32)> =
            records.iter().copied().cycle().take(records.len() * copies).collect();
        log.line(String::new());
        log.line(format!(
            "{:<48} {:>7} {:>7} {:>20} {:>20} {:>7}   (classic: libpcap's program, weir's \
             interpreter (cbpf/pcap) against libpcap's bpf_filter; {}; ns/pkt medians of \
             {rounds} rounds; ratios: medians of per-round ratios [q1-q3])",
            "filter",
            "pcap ns",
            "weir ns",
            "cbpf/pcap [q1-q3]",
            "A/A [q1-q3]",
            "verdict",
            w.describe()
        ));
        let mut judged: Vec<(String, CbpfRow)> = Vec::new();
        for (bench, insns) in &compiled {
            let label: String = bench.label.chars().take(48).collect();
            let insns = match insns {
                Ok(insns) => insns,
                Err(e) => {
                    log.line(format!("{label:<48} skipped: libpcap cannot compile it: {e}"));
                    continue;
                }
            };
            let weir = weir_cbpf::CbpfFilter::new_libpcap(&pcap_insns(insns)?)
                .map_err(|e| format!("{}: libpcap's program is refused: {e}", bench.label))?;
            let (first, again) = (pcap.validate(insns)?, pcap.validate(insns)?);
            if let Some((i, (p, wire))) = records
                .iter()
                .enumerate()
                .find(|(_, (p, w))| weir.run(p, *w) != first.filter(p, *w))
            {
                log.line(format!(
                    "{label:<48} MISMATCH on packet {i}: weir {} libpcap {}",
                    weir.run(p, *wire),
                    first.filter(p, *wire)
                ));
                agreed = false;
                continue;
            }
            let matches = packets.iter().filter(|(p, w)| first.filter(p, *w) != 0).count();
            let mut weir_row =
                |c: &[(&[u8], u32)]| c.iter().filter(|(p, w)| weir.run(p, *w) != 0).count();
            let mut pcap_row =
                |c: &[(&[u8], u32)]| c.iter().filter(|(p, w)| first.filter(p, *w) != 0).count();
            let mut again_row =
                |c: &[(&[u8], u32)]| c.iter().filter(|(p, w)| again.filter(p, *w) != 0).count();
            let mut rows: [ChunkRow<'_, (&[u8], u32)>; 3] =
                [&mut weir_row, &mut pcap_row, &mut again_row];
            let per = time_interleaved(
                rounds,
                round_target,
                &packets,
                CBPF_CHUNK,
                &[matches; 3],
                &mut rows,
            )
            .map_err(|e| format!("{}: {e}", bench.label))?;
            let row = CbpfRow {
                ratio: per_round(&per, |r| r[0] / r[1]),
                aa: per_round(&per, |r| r[2] / r[1]),
            };
            let quartiles = |s: &Samples| {
                let (q1, q3) = s.quartiles();
                format!("{:.2}x [{q1:.2}-{q3:.2}]", s.median())
            };
            log.line(format!(
                "{label:<48} {:>7.1} {:>7.1} {:>20} {:>20} {:>7}",
                per_round(&per, |r| r[1]).median(),
                per_round(&per, |r| r[0]).median(),
                quartiles(&row.ratio),
                quartiles(&row.aa),
                row.verdict().word()
            ));
            judged.push((label, row));
        }
        log.line(cbpf_summary(w.kind, &judged));
    }
    Ok(agreed)
}

/// The summary of one workload's classic rows: medians over 1.0x, the geometric mean of
/// the medians, the verdicts, the widest A/A interquartile range, the slower rows by name.
fn cbpf_summary(kind: &str, judged: &[(String, CbpfRow)]) -> String {
    let medians: Vec<f64> = judged.iter().map(|(_, r)| r.ratio.median()).collect();
    let count = |v: Verdict| judged.iter().filter(|(_, r)| r.verdict() == v).count();
    let widest = judged.iter().map(|(_, r)| r.aa.quartiles()).map(|(q1, q3)| q3 - q1);
    let slower: Vec<String> = judged
        .iter()
        .filter(|(_, r)| r.verdict() == Verdict::Slower)
        .map(|(label, r)| format!("{} {:.2}x", label.trim_end(), r.ratio.median()))
        .collect();
    format!(
        "classic {kind}: {} of {} rows have a median cbpf/pcap over 1.0x; geomean {:.2}x; slower \
         beyond the A/A floor: {}, faster: {}, not told apart: {}; the widest A/A interquartile \
         range {:.2}{}",
        medians.iter().filter(|&&m| m > 1.0).count(),
        judged.len(),
        geomean(&medians),
        count(Verdict::Slower),
        count(Verdict::Faster),
        count(Verdict::Unresolved),
        widest.fold(0.0, f64::max),
        if slower.is_empty() { String::new() } else { format!("; slower: {}", slower.join(", ")) }
    )
}

/// The JIT's compile-time scaling on the shape of testdata/bpf/big.c: `n` unrolled steps
/// `h = h * 31 + byte`, each byte a checked load through a register that held a context
/// field before (so the region table checks it), in one basic block. Programs over
/// `weir_jit::OPTIMIZE_MAX_SLOTS` compile without Cranelift's optimizations; the rows show
/// compile time staying about linear in the program across that line.
fn compile_rows(log: &mut Log) -> Result<(), String> {
    use weir_isa::ebpf::{Insn, Op};
    log.line(String::new());
    log.line(format!(
        "{:<15} {:>7} {:>10} {:>9}   (one compile each; optimized up to {} slots)",
        "jit compile",
        "slots",
        "ms",
        "us/slot",
        weir_jit::OPTIMIZE_MAX_SLOTS
    ));
    for steps in [100usize, 500, 1_000, 1_500, 2_500, 3_500] {
        let mut b = weir_program::ProgramBuilder::new();
        b.push(Insn::new(Op::LdxW, 2, 1, 4, 0));
        b.push(Insn::new(Op::LdxW, 1, 1, 0, 0));
        for _ in 0..steps {
            b.push(Insn::new(Op::LdxB, 3, 1, 0, 0));
            b.alu_imm(Op::Mul64Imm, 2, 31);
            b.alu_reg(Op::Add64Reg, 2, 3);
        }
        b.alu_reg(Op::Mov64Reg, 0, 2);
        b.exit();
        let program = b.link().map_err(|e| format!("jit compile {steps}: {e}"))?;
        let slots = program.len();
        let verified =
            Verified::structural(program).map_err(|e| format!("jit compile {steps}: {e}"))?;
        let start = Instant::now();
        Jit::compile(&verified, Bindings::new(), weir_jit::Config::default())
            .map_err(|e| format!("jit compile {steps}: {e}"))?;
        let secs = start.elapsed().as_secs_f64();
        log.line(format!(
            "{:<15} {slots:>7} {:>10.1} {:>9.1}",
            format!("{steps} loads"),
            secs * 1e3,
            secs * 1e6 / slots as f64
        ));
    }
    Ok(())
}

/// Compiles `vm` with rbpf's JIT where it has one; `false` when it does not or refuses.
#[cfg(all(target_arch = "x86_64", unix))]
fn rbpf_jit_compile(vm: &mut rbpf::EbpfVmRaw<'_>) -> bool {
    vm.jit_compile().is_ok()
}

#[cfg(not(all(target_arch = "x86_64", unix)))]
fn rbpf_jit_compile(_: &mut rbpf::EbpfVmRaw<'_>) -> bool {
    false
}

/// One run of rbpf's JIT code; only called after [`rbpf_jit_compile`] succeeded.
#[cfg(all(target_arch = "x86_64", unix))]
fn rbpf_jit_run(vm: &rbpf::EbpfVmRaw<'_>, mem: &mut [u8]) -> Result<u64, std::io::Error> {
    // SAFETY: the program was compiled by `rbpf_jit_compile` and checked, on this same
    // buffer, to give the interpreters' result before it is timed; the bench programs only
    // read and write inside the 1,508-byte buffer and their own stack, which is what rbpf's
    // JIT (unlike its interpreter, it checks no access) requires of them.
    unsafe { vm.execute_program_jit(mem) }
}

#[cfg(not(all(target_arch = "x86_64", unix)))]
fn rbpf_jit_run(_: &rbpf::EbpfVmRaw<'_>, _: &mut [u8]) -> Result<u64, std::io::Error> {
    Err(std::io::Error::other("rbpf has no JIT on this host"))
}

#[cfg(test)]
mod tests {
    use super::{
        goal_line, interleaved_rows, median_ratio, native, packet, CInProcess, ChunkRow, PROGRAMS,
    };

    /// The C row of the goal rows runs compute.c's programs in this process: each gives
    /// the result weir's Rust `native` gives on the bench's buffer, every call counted.
    #[test]
    fn the_in_process_c_build_gives_each_programs_result() {
        let lib = match CInProcess::load() {
            Ok(lib) => lib,
            Err(e) => {
                println!("SKIPPED: the_in_process_c_build_gives_each_programs_result: {e}");
                return;
            }
        };
        let pkt = packet();
        for (k, (name, _)) in PROGRAMS.iter().enumerate() {
            let want = native(name, &pkt);
            assert_eq!(lib.run(k, &pkt, 7, want), 7, "{name}");
            assert_eq!(lib.run(k, &pkt, 7, want ^ 1), 0, "{name}: a wrong expectation");
            assert_eq!(lib.run(k, &pkt[..100], 7, want), 0, "{name}: a short buffer");
        }
        assert_eq!(lib.run(PROGRAMS.len(), &pkt, 7, 0), 0, "no such program");
    }

    /// Every run of every turn is checked: a row that gives another result once fails the
    /// measurement instead of being timed.
    #[test]
    fn goal_rows_check_every_run() {
        let pkt = packet();
        let (mut runs, mut good) = (0usize, |c: &[&[u8]]| c.len());
        let mut flaky = |c: &[&[u8]]| {
            runs += c.len();
            if runs > 20 {
                c.len() - 1
            } else {
                c.len()
            }
        };
        let mut rows: [ChunkRow<'_>; 2] = [&mut good, &mut flaky];
        let err = interleaved_rows(2, &pkt, 4, &mut rows).unwrap_err();
        assert!(err.contains("unstable"), "{err}");
        let mut a = |c: &[&[u8]]| c.len();
        let mut b = |c: &[&[u8]]| c.len();
        let mut rows: [ChunkRow<'_>; 2] = [&mut a, &mut b];
        let per = interleaved_rows(3, &pkt, 4, &mut rows).unwrap();
        assert_eq!(per.len(), 3);
        assert!(per.iter().all(|r| r.len() == 2));
    }

    /// The goal line reads the rounds' own ratios against issue 12's goals: jit-proven
    /// twice C (NOT met) while both move 4x between rounds, rbpf 3x jit-proven (met).
    #[test]
    fn goal_lines_read_per_round_ratios_against_the_goals() {
        let per = vec![
            vec![20.0, 10.0, 60.0, 900.0],
            vec![80.0, 40.0, 240.0, 900.0],
            vec![22.0, 11.0, 66.0, 900.0],
        ];
        let line = goal_line("p", 8, &["jit-proven", "C-O2", "rbpf-jit", "weir-interp"], &per);
        assert!(
            line.contains("jit-proven / C-O2 = 2.00x [2.00-2.00] (goal <= 1.2: NOT met)"),
            "{line}"
        );
        assert!(
            line.contains("rbpf-jit / jit-proven = 3.00x [3.00-3.00] (goal >= 1: met)"),
            "{line}"
        );
        assert!(line.contains("weir-interp / jit-proven = 41x"), "{line}");
        assert!(line.contains("jit-proven 22.0, C-O2 11.0"), "{line}");
        let fast: Vec<Vec<f64>> = per.iter().map(|r| vec![r[1] * 1.1, r[1], r[3]]).collect();
        let line = goal_line("p", 8, &["jit-proven", "C-O2", "weir-interp"], &fast);
        assert!(line.contains("C-O2 = 1.10x [1.10-1.10] (goal <= 1.2: met)"), "{line}");
        assert!(line.contains("rbpf-jit / jit-proven = n/a"), "{line}");
        let alone: Vec<Vec<f64>> = per.iter().map(|r| vec![r[0]]).collect();
        assert!(goal_line("p", 8, &["jit-proven"], &alone).contains("C-O2 = n/a"));
    }

    /// The classic summary counts each verdict once, names the slower rows and takes the
    /// geomean of the rows' medians.
    #[test]
    fn the_classic_summary_counts_verdicts_and_names_the_slower_rows() {
        use super::{cbpf_summary, CbpfRow, Samples};
        let row = |ratio: &[f64], aa: &[f64]| CbpfRow {
            ratio: Samples(ratio.to_vec()),
            aa: Samples(aa.to_vec()),
        };
        let floor = [0.97, 0.99, 1.0, 1.01, 1.03];
        let rows = vec![
            ("slow one".to_string(), row(&[1.1, 1.15, 1.2, 1.25, 1.3], &floor)),
            ("fast one".to_string(), row(&[0.3, 0.31, 0.32, 0.33, 0.34], &floor)),
            ("even".to_string(), row(&[0.9, 0.95, 1.02, 1.05, 1.1], &[0.9, 0.95, 1.0, 1.05, 1.1])),
        ];
        let line = cbpf_summary("hot", &rows);
        assert!(line.starts_with("classic hot: 2 of 3 rows have a median"), "{line}");
        let geo = (1.2f64 * 0.32 * 1.02).powf(1.0 / 3.0);
        assert!(line.contains(&format!("geomean {geo:.2}x")), "{line}");
        assert!(line.contains("slower beyond the A/A floor: 1, faster: 1, not told apart: 1"));
        assert!(line.contains("the widest A/A interquartile range 0.10"), "{line}");
        assert!(line.ends_with("; slower: slow one 1.20x"), "{line}");
    }

    /// The rounds' own ratios, not the ratio of the medians: rows that move together
    /// (slow with slow) give their steady ratio whatever mode each round met.
    #[test]
    fn ratios_between_rows_are_taken_round_by_round() {
        // Round 3 met a slow a and a fast b; a's median is a slow sample, b's a fast one.
        let a = [20.0, 22.0, 60.0, 62.0, 64.0];
        let b = [10.0, 10.0, 10.0, 31.0, 32.0];
        assert_eq!(median_ratio(&a, &b), 2.0);
        assert_eq!(super::median(a.to_vec()) / super::median(b.to_vec()), 6.0);
    }
}
