//! "Never panics" (issue 18 item 6): a few hundred random command lines over every
//! subcommand, mixing valid and invalid options, expressions and input files (random bytes,
//! truncated captures, damaged programs), each run on the real binary with a deadline.
//! Whatever the input, weir must end by itself, not by a signal, with status 0, 1, 2 (a
//! usage error) or 77 (a skipped `.data` case), and never print a panic message.
//!
//! The generator is deterministic (`SplitMix64` with a fixed seed): a failure names the case
//! number and the whole command line, and reruns the same way. `WEIR_SHOW_RUNS=1` prints
//! every command line with its status and first line of standard error.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weir_testkit::{Scratch, SplitMix64};

/// Command lines per run.
const CASES: usize = 300;
/// A command that runs longer than this has hung.
const DEADLINE: Duration = Duration::from_secs(10);
const SEED: u64 = 0x5eed_1806;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// The input files the command lines pick from, made once in the scratch directory.
struct Inputs {
    captures: Vec<String>,
    programs: Vec<String>,
    cbpf: Vec<String>,
    exprs: Vec<String>,
    /// Anything at all: every kind above plus random bytes and paths that do not exist.
    any: Vec<String>,
}

fn write(dir: &Scratch, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.display().to_string()
}

/// Damages `bytes`: truncates, flips bytes, or splices in random ones.
fn damage(rng: &mut SplitMix64, bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    match rng.below(3) {
        0 => out.truncate(rng.below_usize(out.len() + 1)),
        1 => {
            for _ in 0..rng.range_usize(1, 8) {
                if !out.is_empty() {
                    let at = rng.below_usize(out.len());
                    out[at] = rng.u8();
                }
            }
        }
        _ => {
            let at = rng.below_usize(out.len() + 1);
            let len = rng.range_usize(1, 16);
            let junk = rng.bytes(len);
            out.splice(at..at, junk);
        }
    }
    out
}

/// Classic programs in each text form `weir cbpf` reads, and raw.
const CBPF_TEXTS: &[&str] = &[
    "4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n",
    "{ 0x28, 0, 0, 0x0000000c },\n{ 0x15, 0, 1, 0x00000800 },\n{ 0x6, 0, 0, 0x00040000 },\n{ 0x6, 0, 0, 0x00000000 },\n",
    "(000) ldh      [12]\n(001) jeq      #0x800           jt 2\tjf 3\n(002) ret      #262144\n(003) ret      #0\n",
    "(000) ja 0\n(001) ret #4294967296\n",
    "1\n6 0 0 65535\n",
    "3\n32 0 0 4294963200\n20 0 0 0\n22 0 0 0\n",
    "2\n5 0 0 4294967295\n6 0 0 1\n",
];

const ASM_TEXTS: &[&str] = &[
    "mov32 %r0, 42\nexit\n",
    "mov %r0, 0\nldxb %r2, [%r1+0]\nadd %r0, %r2\nexit\n",
    "lddw %r0, 0x123456789\nexit\n",
    "ja -1\n",
    "call 5\nexit\n",
    "mov %r11, 1\nexit\n",
];

impl Inputs {
    fn make(dir: &Scratch, rng: &mut SplitMix64) -> Inputs {
        let sample = std::fs::read(repo("testdata/captures/sample.pcap")).expect("sample.pcap");
        let mut captures = vec![repo("testdata/captures/sample.pcap").display().to_string()];
        for i in 0..8 {
            let cut = rng.below_usize(sample.len().min(2_000));
            captures.push(write(dir, &format!("cut-{i}.pcap"), &sample[..cut]));
        }
        for i in 0..4 {
            captures.push(write(dir, &format!("damaged-{i}.pcap"), &damage(rng, &sample)));
        }
        // The pcapng magic, a header and then nothing sensible.
        let mut ng = vec![0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0];
        ng.extend(rng.bytes(40));
        captures.push(write(dir, "junk.pcapng", &ng));

        let mut programs = Vec::new();
        for entry in std::fs::read_dir(repo("testdata/samples")).expect("testdata/samples") {
            let path = entry.expect("entry").path();
            programs.push(path.display().to_string());
            let bytes = std::fs::read(&path).expect("a sample");
            for i in 0..3 {
                let name = format!("sample-{i}-{}", path.file_name().unwrap().to_string_lossy());
                programs.push(write(dir, &name, &damage(rng, &bytes)));
            }
        }
        for (i, text) in ASM_TEXTS.iter().enumerate() {
            programs.push(write(dir, &format!("prog-{i}.asm"), text.as_bytes()));
            let junk = format!("{text}{}\n", junk_line(rng));
            programs.push(write(dir, &format!("junk-{i}.asm"), junk.as_bytes()));
        }
        let bytecode = [0xb4, 0, 0, 0, 42, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
        programs.push(write(dir, "prog.bin", &bytecode));
        programs.push(write(dir, "prog-cut.bin", &bytecode[..11]));
        programs.push(write(dir, "prog-damaged.bin", &damage(rng, &bytecode)));

        let mut cbpf = Vec::new();
        for (i, text) in CBPF_TEXTS.iter().enumerate() {
            cbpf.push(write(dir, &format!("cbpf-{i}.txt"), text.as_bytes()));
            cbpf.push(write(dir, &format!("cbpf-damaged-{i}.txt"), &damage(rng, text.as_bytes())));
        }
        let raw = [0x06, 0, 0, 0, 0xff, 0xff, 0, 0];
        cbpf.push(write(dir, "cbpf.raw", &raw));
        cbpf.push(write(dir, "cbpf-damaged.raw", &damage(rng, &raw)));

        let mut exprs = Vec::new();
        for i in 0..6 {
            let text = format!("# a comment\n{}\n", expression(rng));
            exprs.push(write(dir, &format!("expr-{i}.txt"), text.as_bytes()));
        }

        let mut any = Vec::new();
        for i in 0..6 {
            let len = rng.below_usize(300);
            any.push(write(dir, &format!("random-{i}.bin"), &rng.bytes(len)));
        }
        any.push(write(dir, "empty", b""));
        any.push(dir.join("does-not-exist").display().to_string());
        any.push(dir.path().display().to_string()); // a directory
        for list in [&captures, &programs, &cbpf, &exprs] {
            any.extend(list.iter().cloned());
        }
        Inputs { captures, programs, cbpf, exprs, any }
    }
}

fn pick<'a>(rng: &mut SplitMix64, items: &'a [String]) -> &'a str {
    &items[rng.below_usize(items.len())]
}

fn pick_str(rng: &mut SplitMix64, items: &[&'static str]) -> &'static str {
    items[rng.below_usize(items.len())]
}

/// A line of assembly-shaped junk.
fn junk_line(rng: &mut SplitMix64) -> String {
    let words = ["mov", "%r0", "%r99", ",", "[", "]", "0x", "-1", "exit", "lddw", "call", "+", ":"];
    (0..rng.range_usize(1, 6)).map(|_| pick_str(rng, &words)).collect::<Vec<_>>().join(" ")
}

const PRIMITIVES: &[&str] = &[
    "tcp",
    "udp port 53",
    "ip",
    "ip6",
    "arp",
    "host 10.0.0.1",
    "net 10.0.0.0/8",
    "port 80",
    "portrange 1-1023",
    "len > 100",
    "ether[12:2] = 0x800",
    "tcp[tcpflags] & tcp-syn != 0",
    "vlan 10",
    "icmp[icmptype] = icmp-echo",
    "ip proto 6",
    "ether host 00:11:22:33:44:55",
    "ip6 protochain 6",
    "mpls",
    "greater 64",
];

const JUNK: &[&str] = &[
    "(",
    ")",
    "and",
    "or",
    "not",
    "port 99999",
    "host 300.1.1.1",
    "ip[1:3] = 1",
    "tcp[100000] = 1",
    "ether[0] / 0 = 1",
    "4294967296",
    "len = 1 +",
    "nosuchhost.invalid",
    "[",
    "\u{e9}\u{301}",
    "&&",
    "proto \\tcp",
];

/// A filter expression: mostly well formed, sometimes broken.
fn expression(rng: &mut SplitMix64) -> String {
    let mut parts = Vec::new();
    for i in 0..rng.range_usize(1, 6) {
        if i > 0 {
            parts.push(pick_str(rng, &["and", "or", "&&", "||"]).to_string());
        }
        if rng.chance(20) {
            parts.push("not".into());
        }
        let term = if rng.chance(20) { pick_str(rng, JUNK) } else { pick_str(rng, PRIMITIVES) };
        parts.push(if rng.chance(15) { format!("({term})") } else { term.to_string() });
    }
    if rng.chance(5) {
        let len = rng.below_usize(20);
        // Any bytes but NUL, which no argument can hold.
        return String::from_utf8_lossy(&rng.bytes(len)).replace('\0', " ");
    }
    parts.join(" ")
}

const LINKTYPES: &[&str] = &["EN10MB", "LINUX_SLL", "LINUX_SLL2", "RAW", "NULL", "105", "0", "x"];

/// One command line (output files go to `out_dir`, named after the case).
fn command_line(
    rng: &mut SplitMix64,
    inputs: &Inputs,
    out_dir: &Scratch,
    case: usize,
) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let push = |args: &mut Vec<String>, items: &[&str]| {
        args.extend(items.iter().map(|s| s.to_string()));
    };
    let output = out_dir.join(&format!("out-{case}")).display().to_string();
    match rng.below(12) {
        0 | 1 => {
            push(&mut args, &["filter"]);
            let read = if rng.chance(10) {
                "-".to_string()
            } else if rng.chance(85) {
                pick(rng, &inputs.captures).to_string()
            } else {
                pick(rng, &inputs.any).to_string()
            };
            args.extend(["-r".into(), read]);
            if rng.chance(25) {
                args.extend(["-w".into(), if rng.chance(20) { "-".into() } else { output }]);
            }
            if rng.chance(20) {
                push(&mut args, &["-c", pick_str(rng, &["1", "0", "5", "-1", "x"])]);
            }
            if rng.chance(20) {
                push(&mut args, &["--count"]);
            }
            if rng.chance(15) {
                push(&mut args, &["-y", pick_str(rng, LINKTYPES)]);
            }
            if rng.chance(20) {
                let engine = pick_str(rng, &["native", "jit", "interp", "cbpf", "reference", "x"]);
                push(&mut args, &["--engine", engine]);
            }
            if rng.chance(15) {
                push(&mut args, &["--explain"]);
            }
            if rng.chance(10) {
                args.extend(["-F".into(), pick(rng, &inputs.exprs).to_string()]);
            }
            if rng.chance(85) {
                args.push(expression(rng));
            }
        }
        2 | 3 => {
            push(&mut args, &["compile"]);
            if rng.chance(40) {
                push(&mut args, &[pick_str(rng, &["-d", "-dd", "-ddd", "-dddd"])]);
            }
            if rng.chance(35) {
                push(&mut args, &["--ebpf"]);
                if rng.chance(60) {
                    push(&mut args, &["--target", pick_str(rng, &["socket", "xdp", "tc"])]);
                }
            }
            if rng.chance(25) {
                push(&mut args, &[pick_str(rng, &["-O", "-O0", "-O1", "-Ox"])]);
            }
            if rng.chance(20) {
                push(&mut args, &["-y", pick_str(rng, LINKTYPES)]);
            }
            if rng.chance(10) {
                args.extend(["-F".into(), pick(rng, &inputs.exprs).to_string()]);
            }
            if rng.chance(90) {
                args.push(expression(rng));
            }
        }
        4 | 5 => {
            push(&mut args, &["exec"]);
            if rng.chance(30) {
                let mem = pick_str(rng, &["00 11 22", "deadbeef", "0", "zz", ""]);
                push(&mut args, &["--mem", mem]);
            }
            if rng.chance(25) {
                push(&mut args, &["--engine", pick_str(rng, &["jit", "interp", "native", "x"])]);
            }
            if rng.chance(20) {
                push(&mut args, &["--budget", pick_str(rng, &["0", "10", "1000000", "-5", "x"])]);
            }
            if rng.chance(20) {
                push(&mut args, &["--check"]);
            }
            if rng.chance(15) {
                push(&mut args, &["--explain"]);
            }
            let file =
                if rng.chance(80) { pick(rng, &inputs.programs) } else { pick(rng, &inputs.any) };
            args.push(file.to_string());
        }
        6 => {
            push(&mut args, &["asm"]);
            if rng.chance(30) {
                args.extend(["-o".into(), if rng.chance(20) { "-".into() } else { output }]);
            }
            if rng.chance(25) {
                push(&mut args, &["--words"]);
            }
            let file = if rng.chance(10) {
                "-"
            } else if rng.chance(80) {
                pick(rng, &inputs.programs)
            } else {
                pick(rng, &inputs.any)
            };
            args.push(file.to_string());
        }
        7 => {
            push(&mut args, &["disasm"]);
            if rng.chance(40) {
                push(&mut args, &["--listing"]);
            }
            let file = if rng.chance(10) { "-" } else { pick(rng, &inputs.any) };
            args.push(file.to_string());
        }
        8 | 9 => {
            let sub = pick_str(rng, &["validate", "run", "translate", "print", "bogus"]);
            push(&mut args, &["cbpf", sub]);
            if rng.chance(35) {
                let format = pick_str(rng, &["auto", "listing", "dd", "ddd", "raw", "x"]);
                push(&mut args, &["--format", format]);
            }
            match sub {
                "validate" | "run" if rng.chance(40) => {
                    push(&mut args, &["--rules", pick_str(rng, &["kernel", "libpcap", "x"])]);
                }
                _ => {}
            }
            match sub {
                "run" => {
                    args.extend(["-r".into(), pick(rng, &inputs.captures).to_string()]);
                    if rng.chance(30) {
                        push(&mut args, &["--count"]);
                    }
                    if rng.chance(30) {
                        let engine = pick_str(rng, &["jit", "interp", "cbpf", "native", "x"]);
                        push(&mut args, &["--engine", engine]);
                    }
                    if rng.chance(15) {
                        push(&mut args, &["--explain"]);
                    }
                }
                "translate" if rng.chance(50) => {
                    push(&mut args, &["--target", pick_str(rng, &["socket", "xdp", "x"])]);
                }
                "print" if rng.chance(50) => {
                    let form = pick_str(rng, &["auto", "listing", "dd", "ddd", "raw", "x"]);
                    push(&mut args, &["--as", form]);
                }
                _ => {}
            }
            let file = if rng.chance(10) {
                "-"
            } else if rng.chance(75) {
                pick(rng, &inputs.cbpf)
            } else {
                pick(rng, &inputs.any)
            };
            args.push(file.to_string());
        }
        10 => {
            push(&mut args, &["verify"]);
            if rng.chance(40) {
                push(&mut args, &["--type", pick_str(rng, &["xdp", "tc", "socket", "x"])]);
            }
            if rng.chance(30) {
                push(&mut args, &["--log"]);
            }
            if rng.chance(20) {
                push(&mut args, &["--mem-len", pick_str(rng, &["0", "16", "-1", "x"])]);
            }
            // Objects (whole, damaged) and every program file kind.
            let objects = ["xdp_counter.o", "calls.o", "ringbuf.o", "tc_fields.o"];
            let object = repo(&format!("testdata/bpf/{}", pick_str(rng, &objects)));
            let file = match rng.below(3) {
                0 => object.display().to_string(),
                1 => {
                    let bytes = std::fs::read(&object).unwrap_or_default();
                    write(out_dir, &format!("damaged-{case}.o"), &damage(rng, &bytes))
                }
                _ => pick(rng, &inputs.programs).to_string(),
            };
            if file.ends_with(".o") && rng.chance(50) {
                push(&mut args, &["--prog", pick_str(rng, &["xdp_calls", "tc_calls", "nope"])]);
            }
            args.push(file);
        }
        _ => {
            push(&mut args, &["conformance-plugin"]);
            if rng.chance(25) {
                push(&mut args, &["--engine", pick_str(rng, &["jit", "interp", "x"])]);
            }
            if rng.chance(10) {
                push(&mut args, &["--elf"]);
            }
            if rng.chance(70) {
                let mem = pick_str(rng, &["00 11 22 33", "ff", "", "xyz", "0"]);
                args.push(mem.to_string());
            }
        }
    }
    // Now and then an option weir does not know, or a stray extra argument.
    if rng.chance(5) {
        let at = rng.range_usize(1, args.len() + 1).min(args.len());
        args.insert(at, pick_str(rng, &["--bogus", "-Z", "--", "-"]).to_string());
    }
    args
}

/// How one run ended.
enum Ending {
    Exited { code: Option<i32>, stderr: String },
    TimedOut,
}

fn run(args: &[String], stdin: &str, dir: &Scratch, case: usize) -> Ending {
    let stdout_path = dir.join(&format!("stdout-{case}"));
    let stderr_path = dir.join(&format!("stderr-{case}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .stdin(File::open(stdin).map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
        .stdout(File::create(&stdout_path).expect("stdout file"))
        .stderr(File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("weir starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Ending::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stderr =
        String::from_utf8_lossy(&std::fs::read(&stderr_path).unwrap_or_default()).into_owned();
    let _ = std::fs::remove_file(&stdout_path);
    let _ = std::fs::remove_file(&stderr_path);
    Ending::Exited { code: status.code(), stderr }
}

#[test]
fn random_command_lines_never_panic() {
    let dir = Scratch::new("never-panics");
    let mut rng = SplitMix64::new(SEED);
    let inputs = Inputs::make(&dir, &mut rng);
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut by_status = std::collections::BTreeMap::<String, usize>::new();
    for case in 0..CASES {
        let args = command_line(&mut rng, &inputs, &dir, case);
        let stdin = pick(&mut rng, &inputs.any).to_string();
        let shown = format!("case {case}: weir {} < {stdin}", shell_words(&args));
        match run(&args, &stdin, &dir, case) {
            Ending::TimedOut => {
                failures.push(format!("{shown}\n  still running after {DEADLINE:?}"))
            }
            Ending::Exited { code, stderr } => {
                let label = code.map_or("signal".to_string(), |c| c.to_string());
                *by_status.entry(label).or_default() += 1;
                if std::env::var_os("WEIR_SHOW_RUNS").is_some() {
                    eprintln!("{shown}\n  -> {code:?} {}", stderr.lines().next().unwrap_or(""));
                }
                let bad_status = !matches!(code, Some(0 | 1 | 2 | 77));
                let panicked = stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE");
                if bad_status || panicked {
                    failures.push(format!("{shown}\n  status {code:?}, stderr:\n{stderr}"));
                }
            }
        }
    }
    println!(
        "never panics: {CASES} command lines in {:?}; exit statuses {by_status:?}",
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {CASES} command lines failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The arguments as a shell would need them, for the failure message.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
