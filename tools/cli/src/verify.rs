//! `weir verify`: prove a program safe as the kernel's verifier would, without running it.
//! Also the check `weir run` and `weir exec` make before running (unless `--no-verify`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::input::{self, Format};
use weir::verifier::{Options, Proof, Rejection};
use weir::{ProgType, Program};

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Program file: eBPF assembly (a listing's `#! type` and `#! map` lines give the
    /// program type and maps), raw bytecode, a `.data` case, or a clang-built ELF object
    /// (pick the program with --prog).
    pub file: PathBuf,
    /// Verify as this program type (xdp, tc, socket; default: the object's section, else
    /// untyped: r1 = memory, r2 = its length, as the conformance suites run programs).
    #[arg(long = "type", value_name = "TYPE")]
    pub prog_type: Option<ProgType>,
    /// Print the abstract state at every instruction (accepted), or along the path to the
    /// refused instruction (rejected).
    #[arg(long)]
    pub log: bool,
    /// An ELF object's program, by function name.
    #[arg(long)]
    pub prog: Option<String>,
    /// Untyped programs: the size of the memory r1 points to (a `.data` case: its memory).
    #[arg(long, value_name = "BYTES")]
    pub mem_len: Option<u64>,
}

/// Exit status for input that cannot be read or parsed.
const UNREADABLE: u8 = 2;

pub fn run(args: VerifyArgs) -> Result<ExitCode, String> {
    let (program, options) = match load(&args) {
        Ok(loaded) => loaded,
        Err(message) => {
            eprintln!("weir: verify: {message}");
            return Ok(ExitCode::from(UNREADABLE));
        }
    };
    match weir::verify(&program, &options) {
        Ok(proof) => {
            if args.log {
                for line in &proof.log {
                    crate::out::line(line)?;
                }
            }
            crate::out::line(&format!("{}: {}", args.file.display(), proof.summary()))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(rejection) => {
            eprintln!("weir: verify: {}", describe(&rejection));
            if args.log {
                for line in &rejection.trace {
                    eprintln!("  {line}");
                }
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `<pc>: <message> [<rule>]`, as every command prints a rejection.
pub fn describe(rejection: &Rejection) -> String {
    rejection.to_string()
}

fn load(args: &VerifyArgs) -> Result<(Program, Options), String> {
    let path = args.file.as_path();
    let bytes = input::read(path)?;
    let mut options = Options { log: args.log, prog_type: args.prog_type, ..Options::default() };
    if bytes.starts_with(b"\x7fELF") {
        let spec =
            weir::elf::ObjectSpec::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let found: Vec<_> = spec
            .programs
            .iter()
            .filter(|p| args.prog.as_deref().is_none_or(|n| p.name == n))
            .collect();
        let program = match found.as_slice() {
            [one] => {
                // Functions described in BTF (`.BTF.ext` func_info): callbacks allowed, as
                // the kernel allows them with the func_info libbpf sends.
                options.func_info = !one.functions.is_empty();
                one.program.clone()
            }
            _ => {
                let names: Vec<_> = spec.programs.iter().map(|p| p.name.as_str()).collect();
                return Err(format!(
                    "{}: {} (the object has: {})",
                    path.display(),
                    if found.is_empty() {
                        "no such program"
                    } else {
                        "several programs, pick one with --prog"
                    },
                    names.join(", ")
                ));
            }
        };
        let prog_type = options.prog_type.or(program.prog_type());
        if let Some(t) = prog_type {
            options.helpers = Some(weir::runtime_helpers(t));
        }
        return Ok((program, options));
    }
    if args.prog.is_some() {
        return Err(format!("{}: --prog names a program of an ELF object", path.display()));
    }
    let format = input::detect(&bytes);
    let program = if format == Format::DataFile {
        let text = input::text(path, &bytes)?;
        let name = path.display().to_string();
        let case = weir::data::parse_case(&name, text).map_err(|e| format!("{name}: {e}"))?;
        // Not `load_program`: a structurally invalid program is the verifier's rejection
        // (exit 1), not unreadable input.
        let insns = match &case.source {
            weir::data::Source::Asm(text) => {
                weir::isa::asm::assemble_suite(text)
                    .map_err(|e| format!("{name}: assembly: {e}"))?
                    .0
            }
            weir::data::Source::Raw(words) => {
                let slots: Vec<_> =
                    words.iter().map(|w| weir::isa::ebpf::RawInsn::from_u64(*w)).collect();
                weir::isa::ebpf::decode(&slots).map_err(|e| format!("{name}: decode: {e}"))?
            }
        };
        options.memory_len = Some(case.mem.len() as u64);
        options.helpers = Some(conformance_helpers());
        Program::from_insns(insns)
    } else if format == Format::Assembly
        && input::text(path, &bytes)?.lines().any(|l| l.trim_start().starts_with("#!"))
    {
        // A listing: `#! type`, `#! map` directives give the program type and maps.
        let text = input::text(path, &bytes)?;
        let listing = weir::listing::parse(text).map_err(|e| format!("{}: {e}", path.display()))?;
        let program = listing.program;
        if options.prog_type.is_none() {
            options.prog_type = program.prog_type();
        }
        program
    } else {
        input::program_from(path, &bytes, format)?
    };
    if args.mem_len.is_some() {
        options.memory_len = args.mem_len;
    }
    if options.prog_type.is_none() && options.helpers.is_none() {
        options.helpers = Some(conformance_helpers());
    }
    Ok((program, options))
}

/// The helpers an untyped program runs with (`weir exec`: the conformance bindings).
fn conformance_helpers() -> Vec<u32> {
    weir::Bindings::conformance().helpers().iter().map(|h| h.id).collect()
}

/// `weir exec`'s check before running: the program proven for memory of `memory_len`
/// bytes, or the rejection as an error message.
pub fn before_exec(program: &Program, memory_len: usize) -> Result<Proof, String> {
    let options = Options {
        memory_len: Some(memory_len as u64),
        helpers: Some(conformance_helpers()),
        ..Options::default()
    };
    weir::verify(program, &options)
        .map_err(|r| format!("verify: {} (run with --no-verify to run it anyway)", describe(&r)))
}

/// What `--explain` says after a program was verified.
pub fn explain(proof: &Proof) -> String {
    format!("weir: verified: {}\n", proof.summary())
}
