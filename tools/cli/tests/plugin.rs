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
    // In ELF mode the runner wraps the bytecode in an object of its own making.
    let sent = if elf { runner_elf(".text", "main", program) } else { program.to_vec() };
    let _ = writeln!(stdin, "{}", base16(&sent));
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

/// An ELF object laid out as the runner's writer lays it out (its `bpf_writer_classic`, read
/// for its format): a relocatable EM_BPF file with `.shstrtab` (also the symbol names'
/// string table), `.symtab` (a null symbol and one global function) and the code section.
fn runner_elf(section: &str, function: &str, code: &[u8]) -> Vec<u8> {
    let mut strtab = vec![0u8];
    let mut name = |s: &str| {
        let at = strtab.len() as u32;
        strtab.extend_from_slice(s.as_bytes());
        strtab.push(0);
        at
    };
    let (shstrtab_name, symtab_name, code_name, function_name) =
        (name(".shstrtab"), name(".symtab"), name(section), name(function));
    let mut symtab = vec![0u8; 24];
    symtab.extend_from_slice(&function_name.to_le_bytes());
    symtab.push(0x12); // STB_GLOBAL << 4 | STT_FUNC
    symtab.push(0);
    symtab.extend_from_slice(&3u16.to_le_bytes()); // the code section
    symtab.extend_from_slice(&0u64.to_le_bytes());
    symtab.extend_from_slice(&(code.len() as u64).to_le_bytes());
    let mut file = vec![0u8; 64];
    let place = |file: &mut Vec<u8>, data: &[u8]| {
        while !file.len().is_multiple_of(8) {
            file.push(0);
        }
        let at = file.len() as u64;
        file.extend_from_slice(data);
        at
    };
    let strtab_at = place(&mut file, &strtab);
    let symtab_at = place(&mut file, &symtab);
    let code_at = place(&mut file, code);
    while !file.len().is_multiple_of(8) {
        file.push(0);
    }
    let shoff = file.len() as u64;
    // (name, type, flags, offset, size, link, info, align, entsize)
    type SectionHeader = (u32, u32, u64, u64, u64, u32, u32, u64, u64);
    let headers: [SectionHeader; 4] = [
        (0, 0, 0, 0, 0, 0, 0, 0, 0),
        (shstrtab_name, 3, 0, strtab_at, strtab.len() as u64, 0, 0, 1, 0),
        (symtab_name, 2, 0, symtab_at, symtab.len() as u64, 1, 1, 8, 24),
        (code_name, 1, 6, code_at, code.len() as u64, 0, 0, 8, 0),
    ];
    for (name, kind, flags, offset, size, link, info, align, entsize) in headers {
        file.extend_from_slice(&name.to_le_bytes());
        file.extend_from_slice(&kind.to_le_bytes());
        file.extend_from_slice(&flags.to_le_bytes());
        file.extend_from_slice(&0u64.to_le_bytes());
        file.extend_from_slice(&offset.to_le_bytes());
        file.extend_from_slice(&size.to_le_bytes());
        file.extend_from_slice(&link.to_le_bytes());
        file.extend_from_slice(&info.to_le_bytes());
        file.extend_from_slice(&align.to_le_bytes());
        file.extend_from_slice(&entsize.to_le_bytes());
    }
    let mut header = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    header.extend_from_slice(&1u16.to_le_bytes()); // ET_REL
    header.extend_from_slice(&247u16.to_le_bytes()); // EM_BPF
    header.extend_from_slice(&1u32.to_le_bytes());
    header.extend_from_slice(&0u64.to_le_bytes()); // entry
    header.extend_from_slice(&0u64.to_le_bytes()); // phoff
    header.extend_from_slice(&shoff.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes()); // flags
    header.extend_from_slice(&64u16.to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    header.extend_from_slice(&64u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes()); // sections
    header.extend_from_slice(&1u16.to_le_bytes()); // .shstrtab
    file[..64].copy_from_slice(&header);
    file
}

#[test]
fn elf_mode_runs_the_runners_objects() {
    // r0 = the memory length + the first byte.
    let program = bytes_of("ldxb %r0, [%r1]\nadd %r0, %r2\nexit");
    for via in [Via::Link, Via::Subcommand] {
        for engine in ["jit", "interp"] {
            let seen = run_as_runner(via, &program, &[5, 9], &format!("--engine {engine}"), true);
            assert_eq!(seen, Seen::Value(7), "{via:?} {engine}");
        }
    }
    // The XDP prolog's section name.
    let elf = runner_elf("xdp", "main", &program);
    let object = weir::elf::ObjectSpec::parse(&elf).unwrap();
    assert_eq!(object.programs.len(), 1);
    // Not an ELF object: one line naming the problem.
    let seen = run_as_runner(Via::Subcommand, &[], &[1], "", false);
    assert!(matches!(seen, Seen::Error(_)), "{seen:?}");
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
        for (engine, elf) in [("jit", false), ("interp", false), ("interp", true)] {
            let seen =
                run_as_runner(Via::Link, &bytes, &case.mem, &format!("--engine {engine}"), elf);
            ran += 1;
            if seen != Seen::Value(*want) {
                let mode = if elf { ", --elf" } else { "" };
                failures.push(format!("{name} [{engine}{mode}]: expected {want:#x}, saw {seen:?}"));
            }
        }
    }
    assert!(ran >= 400, "only {ran} plugin runs");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
