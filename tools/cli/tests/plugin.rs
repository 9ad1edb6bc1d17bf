//! `weir` as the plugin of the eBPF conformance runner (Alan-Jowett/bpf_conformance), driven
//! exactly as that runner drives a plugin (`bpf_conformance.cc`):
//!
//! - argv: `PLUGIN [MEM-HEX] [OPTIONS...] [--elf]`, the memory as one argument of `%02x`
//!   bytes each followed by two spaces (left out when the case has no memory), then
//!   `--plugin_options` split on single spaces, then `--elf` in ELF mode;
//! - standard input: the program bytes in the same hex form and a newline, then closed;
//! - standard output read to the end, its lines joined, parsed as hex (`strtoull(s, 0, 16)`);
//! - on a non-zero status: standard output, or if empty standard error with its lines joined,
//!   cut at a `\r`, compared whole with the case's `-- error` line.
//!
//! The plugin is `weir` started as `weir-conformance-plugin` (a symbolic link, argv[0]
//! dispatch), and `weir conformance-plugin` for the same protocol under the subcommand.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use weir::data::{load_program, parse_case, Expect};

/// What the runner makes of one plugin run.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Status 0 and a value parsed from standard output.
    Value(u64),
    /// Status 0 but standard output is not a number (the runner's ERROR).
    Unparsable(String),
    /// A non-zero status and the text the runner compares with `-- error`.
    Error(String),
}

/// The runner's `_base_16_encode`: every byte as two hex digits and two spaces.
fn base16(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}  ")).collect()
}

/// `weir` under the plugin's name, in a directory of this test process.
fn plugin_link() -> PathBuf {
    static LINK: OnceLock<PathBuf> = OnceLock::new();
    LINK.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("weir-plugin-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("weir-conformance-plugin");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_weir"), &link).unwrap();
        link
    })
    .clone()
}

/// How the plugin is started: the link (argv[0]) or `weir conformance-plugin`.
#[derive(Clone, Copy, Debug)]
enum Via {
    Link,
    Subcommand,
}

/// Runs one case as the runner would: `options` is the runner's `--plugin_options` string.
fn run_as_runner(via: Via, program: &[u8], mem: &[u8], options: &str, elf: bool) -> Seen {
    let mut args: Vec<String> = Vec::new();
    if !mem.is_empty() {
        args.push(base16(mem));
    }
    if !options.is_empty() {
        // std::getline(stream, option, ' '): one argument per space, empty ones included.
        args.extend(options.split(' ').map(str::to_string));
    }
    if elf {
        args.push("--elf".to_string());
    }
    let mut command = match via {
        Via::Link => Command::new(plugin_link()),
        Via::Subcommand => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
            c.arg("conformance-plugin");
            c
        }
    };
    let mut child = command
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the plugin starts");
    let mut stdin = child.stdin.take().unwrap();
    // The runner ignores SIGPIPE and a failed write: a plugin may refuse its arguments
    // before it reads the program.
    let _ = writeln!(stdin, "{}", base16(program));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let joined = |bytes: &[u8]| String::from_utf8_lossy(bytes).lines().collect::<String>();
    let stdout = joined(&out.stdout);
    if !out.status.success() {
        let mut text = if stdout.is_empty() { joined(&out.stderr) } else { stdout };
        if let Some(cr) = text.find('\r') {
            text.truncate(cr);
        }
        return Seen::Error(text);
    }
    match strtoull16(&stdout) {
        Some(v) => Seen::Value(v),
        None => Seen::Unparsable(stdout),
    }
}

/// `std::stoull(s, nullptr, 16)`: leading white space, an optional `0x`, then hex digits up
/// to the first other character; at least one digit.
fn strtoull16(s: &str) -> Option<u64> {
    let s = s.trim_start();
    let s = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    let digits: String = s.chars().take_while(char::is_ascii_hexdigit).collect();
    u64::from_str_radix(&digits, 16).ok()
}

fn bytes_of(asm: &str) -> Vec<u8> {
    let insns = weir_isa::asm::assemble(asm).unwrap();
    weir_isa::ebpf::encode(&insns).iter().flat_map(|r| r.to_bytes()).collect()
}

#[test]
fn answers_the_runner_in_its_argument_order() {
    // r0 = the memory length + the first byte.
    let program = bytes_of("ldxb %r0, [%r1]\nadd %r0, %r2\nexit");
    for via in [Via::Link, Via::Subcommand] {
        for options in ["", "--engine jit", "--engine interp", "--engine  jit"] {
            let seen = run_as_runner(via, &program, &[0x10, 2, 3], options, false);
            assert_eq!(seen, Seen::Value(0x13), "{via:?} {options:?}");
        }
        // No memory: the options come first, and r1 = 0, r2 = 0.
        let seen = run_as_runner(via, &bytes_of("mov %r0, %r2\nexit"), &[], "--engine jit", false);
        assert_eq!(seen, Seen::Value(0), "{via:?}");
        // All 64 bits of r0, in hex.
        let seen = run_as_runner(via, &bytes_of("lddw %r0, -2\nexit"), &[], "", false);
        assert_eq!(seen, Seen::Value(u64::MAX - 1), "{via:?}");
    }
}

#[test]
fn errors_are_one_line_on_stderr_as_the_runner_compares_them() {
    let bad_opcode = [0xff, 0, 0, 0, 0, 0, 0, 0];
    for via in [Via::Link, Via::Subcommand] {
        let seen = run_as_runner(via, &bad_opcode, &[], "", false);
        assert_eq!(seen, Seen::Error("instruction 0: unknown opcode 0xff".into()), "{via:?}");
        // A trap: the whole message, one line, no `weir:` prefix.
        let program = bytes_of("ldxw %r0, [%r1+8]\nexit");
        let Seen::Error(text) = run_as_runner(via, &program, &[1, 2], "--engine jit", false) else {
            panic!("an out-of-bounds load must fail");
        };
        assert!(text.contains("out of bounds") && !text.starts_with("weir"), "{text}");
        // An option weir does not know is an error, not silently ignored.
        let seen = run_as_runner(via, &program, &[], "--unknown", false);
        assert!(matches!(seen, Seen::Error(ref t) if t.contains("--unknown")), "{seen:?}");
    }
}

#[test]
fn elf_mode_is_refused_until_weir_reads_elf() {
    let program = bytes_of("mov %r0, 1\nexit");
    for via in [Via::Link, Via::Subcommand] {
        let seen = run_as_runner(via, &program, &[1], "--engine interp", true);
        let Seen::Error(text) = seen else { panic!("{via:?}: --elf was not refused: {seen:?}") };
        assert!(text.contains("--elf") && text.contains("ELF"), "{text}");
    }
}

/// Every case of weir's corpus that expects a result gives that result through the plugin, on
/// both engines, as the runner would see it.
#[test]
fn the_corpus_through_the_plugin() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    paths.sort();
    let mut ran = 0usize;
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let case = parse_case(&name, &std::fs::read_to_string(path).unwrap()).unwrap();
        let (Expect::Result(want), Ok(program)) = (&case.expect, load_program(&case)) else {
            continue;
        };
        let bytes: Vec<u8> =
            weir_isa::ebpf::encode(program.insns()).iter().flat_map(|r| r.to_bytes()).collect();
        for engine in ["jit", "interp"] {
            let seen =
                run_as_runner(Via::Link, &bytes, &case.mem, &format!("--engine {engine}"), false);
            ran += 1;
            if seen != Seen::Value(*want) {
                failures.push(format!("{name} [{engine}]: expected {want:#x}, saw {seen:?}"));
            }
        }
    }
    assert!(ran >= 400, "only {ran} plugin runs");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
