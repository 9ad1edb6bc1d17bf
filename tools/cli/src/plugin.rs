//! The plugin protocol of the common eBPF conformance runner (Alan-Jowett/bpf_conformance,
//! `bpf_conformance.cc`), exactly as that runner speaks it:
//!
//! - it starts `PLUGIN [MEM-HEX] [OPTIONS...] [--elf]`: the input memory first (one argument,
//!   each byte as two hex digits followed by two spaces; left out when the case has no
//!   memory), then `--plugin_options` split on single spaces (so two spaces in a row give an
//!   empty argument, which weir skips), then `--elf` when the runner runs with `--elf 1`;
//! - it writes the program to standard input as hex bytes (`b7  00  ...`) and a newline, and
//!   closes it;
//! - it reads standard output to the end and parses it as hex (`strtoull(..., 16)`): weir
//!   prints r0 in hex without `0x`, then a newline;
//! - on a non-zero exit status it takes standard output, or when that is empty standard error
//!   with its lines joined, and compares it whole with the case's `-- error` line: weir
//!   prints nothing on standard output then, and the error alone (no `weir:` prefix) on one
//!   line of standard error, with status 1.
//!
//! The runner takes one executable as `--plugin_path`, so weir answers as the plugin when it
//! is started under the name `weir-conformance-plugin` (a symbolic link to `weir`: argv[0]
//! dispatch), and as `weir conformance-plugin` otherwise. Both read the same arguments.

use crate::hex;
use crate::input;
use crate::run::{run_on, EngineRequest};
use clap::{Args, Parser};
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use weir::{Program, Verified};

/// The name under which `weir` is the conformance plugin (argv[0] dispatch).
pub const PLUGIN_NAME: &str = "weir-conformance-plugin";

/// The plugin's arguments, in the runner's order: `[MEM-HEX] [OPTIONS...] [--elf]`.
#[derive(Args, Debug)]
pub struct PluginArgs {
    /// Memory as hex bytes (spaces optional), passed to the program in r1 (length in r2).
    pub memory: Option<String>,
    /// Run on this engine (jit, interp) instead of the one weir picks (pass it with the
    /// runner's `--plugin_options "--engine jit"`).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<weir::Engine>,
    /// The program on standard input is an ELF object, as hex bytes (the runner's `--elf 1`):
    /// its function `main` (in `.text`, or `xdp` with the runner's XDP prolog), or its only
    /// program.
    #[arg(long)]
    pub elf: bool,
}

/// `weir-conformance-plugin` as its own command line (argv[0] dispatch).
#[derive(Parser)]
#[command(
    name = PLUGIN_NAME,
    version,
    about = "weir as a plugin of the eBPF conformance runner: the program as hex on standard \
             input, the memory as hex in the first argument; prints r0 in hex"
)]
struct PluginCli {
    #[command(flatten)]
    args: PluginArgs,
}

/// Whether this process was started as `weir-conformance-plugin`.
pub fn invoked_as_plugin() -> bool {
    std::env::args_os()
        .next()
        .is_some_and(|argv0| Path::new(&argv0).file_stem().is_some_and(|s| s == PLUGIN_NAME))
}

/// Runs the plugin with this process's arguments.
pub fn main_as_plugin() -> ExitCode {
    let cli = PluginCli::parse_from(skip_empty_arguments(std::env::args_os().collect(), 1));
    finish(run(&cli.args))
}

/// The process arguments for `weir`'s own parser: when they run `weir conformance-plugin`,
/// the empty arguments after it are dropped, as under the plugin's name.
pub fn weir_arguments() -> Vec<OsString> {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "conformance-plugin") {
        skip_empty_arguments(args, 2)
    } else {
        args
    }
}

/// Drops the empty arguments from `from` on: the runner splits `--plugin_options` on single
/// spaces, so two spaces in a row give an empty argument that means nothing.
fn skip_empty_arguments(args: Vec<OsString>, from: usize) -> Vec<OsString> {
    args.into_iter()
        .enumerate()
        .filter(|(i, a)| *i < from || !a.is_empty())
        .map(|(_, a)| a)
        .collect()
}

/// Reports the outcome as the runner reads it: the error alone on one line of standard
/// error, with status 1.
pub fn finish(result: Result<ExitCode, String>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(message) => {
            let line: Vec<&str> =
                message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            eprintln!("{}", line.join(" "));
            ExitCode::FAILURE
        }
    }
}

/// Reads the program (hex bytes) from standard input, runs it on `args.memory`, and prints
/// r0 in hex.
pub fn run(args: &PluginArgs) -> Result<ExitCode, String> {
    let stdin = Path::new("-");
    // Read the whole input first, even when refusing it, so that the runner's write to the
    // pipe never fails.
    let bytes = input::read(stdin)?;
    let text = input::text(stdin, &bytes)?;
    let code = hex::parse_bytes(text).map_err(|e| format!("program: {e}"))?;
    let mut mem = match &args.memory {
        Some(m) => hex::parse_bytes(m).map_err(|e| format!("memory: {e}"))?,
        None => Vec::new(),
    };
    let program = if args.elf {
        elf_program(&code)?
    } else {
        Program::from_bytes(&code).map_err(|e| e.to_string())?
    };
    let program = Verified::structural(program).map_err(|e| format!("validation: {e}"))?;
    let engine = EngineRequest { engine: args.engine, explain: false };
    let r0 = run_on(engine, &program, &mut mem, None)?;
    crate::out::line(&format!("{r0:x}"))?;
    Ok(ExitCode::SUCCESS)
}

/// The program of an ELF object as the runner writes one (`--elf`): the function `main`, or
/// the object's only program. Its instructions run as bytecode would: maps (which the
/// runner never writes into these objects) are refused.
fn elf_program(bytes: &[u8]) -> Result<Program, String> {
    let object = weir::elf::ObjectSpec::parse(bytes).map_err(|e| format!("ELF: {e}"))?;
    let spec = match object.program("main") {
        Ok(spec) => spec,
        Err(_) if object.programs.len() == 1 => &object.programs[0],
        Err(e) => return Err(format!("ELF: {e}")),
    };
    if !spec.program.relocations().is_empty() {
        return Err(format!(
            "ELF: program `{}` uses maps, which the plugin does not run",
            spec.name
        ));
    }
    Ok(Program::from_insns(spec.program.insns().to_vec()))
}
