//! The Linux kernel as the oracle for what weir emits from pflang: the everyday tcpdump
//! expressions (testdata/pflang/everyday.txt) and a deterministic sample of the lowering
//! tests' lists (lower-net.txt, lower-link.txt: the encapsulations and odd corners) are
//! compiled for Ethernet, unoptimized and optimized, emitted as eBPF for both targets and
//! loaded into the kernel. Every program must pass the verifier
//! (a refusal fails the test with the verifier's log tail), and under `BPF_PROG_TEST_RUN`
//! must give libpcap's verdict (its unoptimized `bpf_filter`, the semantics of record) on
//! corpus frames.
//!
//! The socket-filter program loads as `BPF_PROG_TYPE_SOCKET_FILTER` (the verifier takes it
//! as what it is) and, for the verdicts, as `BPF_PROG_TYPE_SCHED_CLS`: the same context and
//! legacy loads, but its test run keeps the Ethernet header, which the socket filter's
//! strips. The XDP program loads as `BPF_PROG_TYPE_XDP`.
//!
//! The kernel sees whole frames, so every frame is taken as captured in full (wire length =
//! captured length), and libpcap runs on the same bytes. Frames the kernel's test runs do
//! not take are left out and counted: under 14 bytes, over a standard MTU (XDP's test run
//! would split them into fragments), IPv4/IPv6 with a cut IP header (the skb test run
//! refuses them). Packets where weir's own IR (`Filter::matches`) differs from libpcap are
//! libpcap differences that tests/differential.rs deals with; they are skipped here, counted
//! and shown.
//!
//! Needs root and `bpf()`; otherwise it prints `SKIPPED` with the reason.

use std::fmt::Write as _;
use std::time::Instant;

use weir_filter::emit::ebpf;
use weir_filter::Filter;
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_program::abi::xdp_action;
use weir_program::PacketAccess;
use weir_sys::kernel::{self, LoadError, ProgType};
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::Packet;

const CORPUS_SEED: u64 = 0x6e41;
const CORPUS_PACKETS: usize = 400;
/// The netmask everyday expressions are compiled with (as tests/differential.rs does), so
/// that `ip broadcast` compiles.
const NETMASK: u32 = 0xffff_ff00;
/// Expressions taken from the lowering tests' lists.
const SAMPLE_COUNT: usize = 300;
/// Verifier log lines shown with a refusal.
const LOG_TAIL: usize = 15;
/// Failures shown in full.
const SHOW_LIMIT: usize = 25;

fn testdata(name: &str) -> String {
    format!("{}/../../testdata/pflang/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn expression_lines(path: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect(),
    )
}

/// A deterministic sample of the lowering tests' lists: every line both libpcap and weir
/// accept for Ethernet (the lists hold refusals and other link types' primitives too), then
/// every k-th of those.
fn lowering_sample(names: &NameDb) -> Vec<String> {
    let mut all = Vec::new();
    for name in ["lower-net.txt", "lower-link.txt"] {
        let lines = expression_lines(&testdata(name));
        all.extend(lines.unwrap_or_else(|| panic!("testdata/pflang/{name} is missing")));
    }
    let mut options = Options::new(LinkType::Ethernet);
    options.netmask = Some(NETMASK);
    all.retain(|e| {
        libpcap::required().compile_with_netmask(e, 1, false, NETMASK).is_ok()
            && weir_pflang::compile(e, &options, names).is_ok()
    });
    let step = all.len().div_ceil(SAMPLE_COUNT).max(1);
    all.into_iter().step_by(step).collect()
}

/// Frames left out, by reason.
#[derive(Default, Debug)]
struct FrameSkips {
    short: usize,
    long: usize,
    cut_ip: usize,
}

/// The corpus and edge cases as whole frames the kernel's test runs take.
fn kernel_frames() -> (Vec<Packet>, FrameSkips) {
    let mut all = weir_testkit::corpus(CORPUS_SEED, CORPUS_PACKETS);
    all.extend(weir_testkit::edge_cases());
    all.extend(weir_testkit::link_edge_cases());
    all.extend(weir_testkit::net_edge_cases());
    let mut skips = FrameSkips::default();
    let mut frames = Vec::new();
    for mut p in all {
        let len = p.data.len();
        let ip_header = match p.data.get(12..14) {
            Some([0x08, 0x00]) => 20,
            Some([0x86, 0xdd]) => 40,
            _ => 0,
        };
        if len < 14 {
            skips.short += 1;
        } else if len > 1514 {
            skips.long += 1;
        } else if len < 14 + ip_header {
            skips.cut_ip += 1;
        } else {
            p.wire_len = len as u32;
            frames.push(p);
        }
    }
    (frames, skips)
}

/// libpcap's unoptimized program, behind a prologue that zeroes scratch memory: libpcap
/// leaves it uninitialised and a failed `geneve` leaves later tests reading a cell nothing
/// wrote; weir's cells (and the kernel's stack, which the verifier makes programs write
/// first) start at 0.
fn libpcap_program(expr: &str) -> Result<Vec<BpfInsn>, String> {
    const LD_IMM: u16 = 0x00;
    const ST: u16 = 0x02;
    let body = libpcap::required().compile_with_netmask(
        expr,
        LinkType::Ethernet.dlt() as i32,
        false,
        NETMASK,
    )?;
    let mut prog = vec![BpfInsn { code: LD_IMM, jt: 0, jf: 0, k: 0 }];
    prog.extend((0..16).map(|cell| BpfInsn { code: ST, jt: 0, jf: 0, k: cell }));
    prog.extend(body);
    Ok(prog)
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn refusal(e: &LoadError) -> String {
    let lines: Vec<&str> = e.log.lines().collect();
    let tail = lines.get(lines.len().saturating_sub(LOG_TAIL)..).unwrap_or_default();
    if tail.is_empty() {
        format!("{} (no verifier log)", e.error)
    } else {
        format!("{}; verifier log tail:\n    {}", e.error, tail.join("\n    "))
    }
}

/// What one expression's check found.
#[derive(Default)]
struct Outcome {
    failures: Vec<String>,
    /// Programs the kernel loaded.
    loaded: usize,
    /// Test runs compared.
    runs: usize,
    accepted: usize,
    /// (variant, packet) pairs where weir's IR and libpcap disagree.
    ir_differs: Vec<String>,
    libpcap_refuses: Option<String>,
    unrunnable: bool,
}

/// Compiles, emits, loads and runs one expression.
fn check(expr: &str, frames: &[Packet], names: &NameDb) -> Outcome {
    let mut out = Outcome::default();
    let lp = match libpcap_program(expr) {
        Ok(p) => p,
        Err(m) => {
            out.libpcap_refuses = Some(m);
            return out;
        }
    };
    let mut want = Vec::with_capacity(frames.len());
    for f in frames {
        match libpcap::required().run(&lp, &f.data, f.wire_len) {
            Some(v) => want.push(v),
            None => {
                out.unrunnable = true;
                return out;
            }
        }
    }
    for optimize in [false, true] {
        let variant = if optimize { "optimized" } else { "unoptimized" };
        let mut options = Options::new(LinkType::Ethernet);
        options.netmask = Some(NETMASK);
        let compiled = weir_pflang::compile(expr, &options, names);
        let filter = match compiled.map(|f| {
            if optimize {
                weir_filter::opt::optimize_owned(f)
            } else {
                f
            }
        }) {
            Ok(f) => f,
            Err(e) => {
                out.failures
                    .push(format!("`{expr}` ({variant}): weir refuses: {}", e.render(expr)));
                continue;
            }
        };
        // The verdict comparison counts IR differences once per variant, not per target.
        let agree: Vec<bool> = frames
            .iter()
            .zip(&want)
            .map(|(f, &lp)| {
                let same = filter.matches(&f.data, f.wire_len) == (lp != 0);
                if !same {
                    out.ir_differs.push(format!("`{expr}` ({variant}): {}", f.description));
                }
                same
            })
            .collect();
        for target in [weir_program::ProgType::SocketFilter, weir_program::ProgType::Xdp] {
            if let Err(e) = run_target(&filter, target, frames, &want, &agree, &mut out) {
                out.failures.push(format!("`{expr}` ({variant}, {target}): {e}"));
            }
        }
    }
    out
}

fn run_target(
    filter: &Filter,
    target: weir_program::ProgType,
    frames: &[Packet],
    want: &[u32],
    agree: &[bool],
    out: &mut Outcome,
) -> Result<(), String> {
    let program = ebpf::emit(filter, target).map_err(|e| format!("the emitter fails: {e}"))?;
    let code = program.to_bytes();
    let prog_type = match target.packet_access() {
        PacketAccess::SkBuff => {
            kernel::load(ProgType::SocketFilter, &code).map_err(|e| {
                format!("the verifier refuses it as SOCKET_FILTER: {}", refusal(&e))
            })?;
            out.loaded += 1;
            ProgType::SchedCls
        }
        PacketAccess::Xdp => ProgType::Xdp,
    };
    let loaded = kernel::load(prog_type, &code)
        .map_err(|e| format!("the verifier refuses it as {prog_type:?}: {}", refusal(&e)))?;
    out.loaded += 1;
    for ((frame, &lp), &same) in frames.iter().zip(want).zip(agree) {
        if !same {
            continue;
        }
        let expect = match target.packet_access() {
            PacketAccess::SkBuff => lp,
            PacketAccess::Xdp if lp != 0 => xdp_action::PASS,
            PacketAccess::Xdp => xdp_action::DROP,
        };
        let got = loaded
            .test_run(&frame.data, 1)
            .map(|run| run.retval)
            .map_err(|e| format!("{}: {e}", frame.description))?;
        out.runs += 1;
        out.accepted += usize::from(lp != 0);
        if got != expect {
            return Err(format!(
                "frame `{}` ({} bytes) {}: kernel returns {got}, libpcap {expect}",
                frame.description,
                frame.data.len(),
                hex(&frame.data)
            ));
        }
    }
    Ok(())
}

/// Loads and runs every expression of `exprs` (from `source`) over the kernel frames, and
/// fails with the first failures in full.
fn run_suite(source: &str, exprs: &[String], names: &NameDb) {
    let start = Instant::now();
    assert!(exprs.len() >= 100, "only {} expressions from {source}", exprs.len());
    let (frames, skips) = kernel_frames();
    assert!(frames.len() >= 200, "only {} usable frames ({skips:?})", frames.len());
    // Two workers: loading and test runs are system calls, and the machine has two cores.
    let workers = 2;
    let mut outcomes: Vec<(usize, Outcome)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let frames = &frames;
                s.spawn(move || {
                    exprs
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| i % workers == w)
                        .map(|(i, e)| (i, check(e, frames, names)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("worker panicked")).collect()
    });
    outcomes.sort_by_key(|(i, _)| *i);

    let mut failures = Vec::new();
    let mut ir_differs = Vec::new();
    let (mut loaded, mut runs, mut accepted, mut checked) = (0, 0, 0, 0);
    let mut not_compiled = Vec::new();
    for (i, o) in &outcomes {
        let expr = &exprs[*i];
        if let Some(m) = &o.libpcap_refuses {
            not_compiled.push(format!("`{expr}`: libpcap refuses: {m}"));
            continue;
        }
        if o.unrunnable {
            not_compiled.push(format!("`{expr}`: libpcap's validator refuses its own program"));
            continue;
        }
        checked += 1;
        loaded += o.loaded;
        runs += o.runs;
        accepted += o.accepted;
        failures.extend(o.failures.iter().cloned());
        ir_differs.extend(o.ir_differs.iter().cloned());
    }
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "kernel: {checked} expressions from {source} x (unoptimized, optimized): {loaded} \
         programs loaded (SOCKET_FILTER, SCHED_CLS, XDP), {runs} test runs on {} frames, \
         {accepted} accepting; {:.1} s",
        frames.len(),
        start.elapsed().as_secs_f64()
    );
    let _ = writeln!(
        summary,
        "frames left out: {} under 14 bytes, {} over 1514 bytes, {} with a cut IP header",
        skips.short, skips.long, skips.cut_ip
    );
    let _ = writeln!(
        summary,
        "(variant, frame) pairs where weir's IR differs from libpcap (skipped): {}",
        ir_differs.len()
    );
    for d in ir_differs.iter().take(SHOW_LIMIT) {
        let _ = writeln!(summary, "  {d}");
    }
    for n in &not_compiled {
        let _ = writeln!(summary, "not checked: {n}");
    }
    print!("{summary}");
    let shown: Vec<&String> = failures.iter().take(SHOW_LIMIT).collect();
    assert!(
        failures.is_empty(),
        "{} kernel failures (first {}):\n{}",
        failures.len(),
        shown.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
    // The comparison means something only if most expressions were checked and the frames
    // split them.
    assert!(not_compiled.len() * 20 <= exprs.len(), "{} not checked", not_compiled.len());
    assert!(accepted * 50 > runs && accepted * 2 < runs, "{accepted} accepting of {runs}");
}

#[test]
fn kernel_runs_everyday_filters_with_libpcaps_verdicts() {
    let name = "kernel_runs_everyday_filters_with_libpcaps_verdicts";
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: {name}: {reason}");
        return;
    }
    let Some(exprs) = expression_lines(&testdata("everyday.txt")) else {
        println!("SKIPPED: {name}: testdata/pflang/everyday.txt is missing");
        return;
    };
    run_suite("testdata/pflang/everyday.txt", &exprs, &NameDb::system());
}

#[test]
fn kernel_runs_lowering_list_filters_with_libpcaps_verdicts() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: kernel_runs_lowering_list_filters_with_libpcaps_verdicts: {reason}");
        return;
    }
    let names = NameDb::system();
    let exprs = lowering_sample(&names);
    run_suite("a sample of lower-net.txt and lower-link.txt", &exprs, &names);
}
