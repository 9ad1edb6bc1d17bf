//! The subcommands. Each returns an exit code or a message for standard error.

use crate::hex;
use crate::input::{self, Format};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use weir::data::{Case, Expect, ParseErrorKind};
use weir::isa::asm;
use weir::Bindings;
use weir::{Program, Verified};
use weir_runtime::output::{same_file, OutputFile};

pub fn asm(path: &Path, output: Option<&Path>, words: bool) -> Result<ExitCode, String> {
    if let Some(output) = output {
        refuse_input_as_output(output, path, "")?;
    }
    let bytes = input::read(path)?;
    let source = input::text(path, &bytes)?;
    let insns = asm::assemble(source).map_err(|e| input::asm_error(path, source, &e))?;
    let raw = weir::isa::ebpf::encode(&insns);
    if words {
        let mut text = String::new();
        for slot in &raw {
            text.push_str(&format!("{:#018x}\n", slot.to_u64()));
        }
        return write_output(output, text.as_bytes());
    }
    let code: Vec<u8> = raw.iter().flat_map(|r| r.to_bytes()).collect();
    if output.is_none_or(|o| o.as_os_str() == "-") {
        refuse_binary_to_terminal("bytecode", "-o FILE or --words")?;
    }
    write_output(output, &code)
}

/// Binary output on a terminal is unreadable and can leave the terminal in a strange state:
/// refuse it (as `tcpdump -w -` does), and say what to do instead.
pub fn refuse_binary_to_terminal(what: &str, instead: &str) -> Result<(), String> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        return Err(format!(
            "refusing to write binary {what} to a terminal: use {instead}, or redirect standard output"
        ));
    }
    Ok(())
}

/// Writes `data` to standard output (no target, or `-`) or to the target as
/// `weir_runtime::output` treats output files: a regular file is replaced only once complete
/// (mode and owner kept), a device or FIFO is written through, links are followed.
pub(crate) fn write_output(output: Option<&Path>, data: &[u8]) -> Result<ExitCode, String> {
    match output {
        None => crate::out::bytes(data)?,
        Some(path) if path.as_os_str() == "-" => crate::out::bytes(data)?,
        Some(path) => {
            let failed = |e: std::io::Error| format!("{}: {e}", path.display());
            let mut out = OutputFile::create(path).map_err(failed)?;
            out.write_all(data).map_err(failed)?;
            out.finish().map_err(failed)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The refusal of an output that is the command's input (after following links): it would
/// be destroyed before it is read.
pub fn refuse_input_as_output(output: &Path, input: &Path, flag: &str) -> Result<(), String> {
    if same_file(output, input) {
        return Err(format!(
            "{}: is the input file ({flag}{}); refusing to overwrite it",
            output.display(),
            input.display()
        ));
    }
    Ok(())
}

pub fn disasm(path: &Path, listing: bool) -> Result<ExitCode, String> {
    let bytes = input::read(path)?;
    let format = match input::detect(&bytes) {
        Format::Words => Format::Words,
        _ => Format::Bytecode,
    };
    let program = input::program_from(path, &bytes, format)?;
    let text =
        if listing { asm::listing(program.insns()) } else { asm::disassemble(program.insns()) };
    crate::out::text(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `--engine` and `--explain` as given on the command line.
#[derive(Debug, Clone, Copy)]
pub struct EngineRequest {
    pub engine: Option<weir::Engine>,
    pub explain: bool,
}

/// Runs `program` on the engine the facade picks (or the forced one), with the conformance
/// bindings and `mem` in r1.
pub fn run_on(
    request: EngineRequest,
    program: &Verified,
    mem: &mut [u8],
    budget: Option<u64>,
) -> Result<u64, String> {
    let mut limits = weir::program::Limits::default();
    if let Some(budget) = budget {
        limits.instruction_budget = budget;
    }
    let mut prepared =
        weir::PreparedProgram::new(program, &Bindings::conformance(), limits, request.engine)
            .map_err(|e| {
                let mut message = e.message;
                for reason in e.reasons {
                    message.push_str("\n  ");
                    message.push_str(&reason);
                }
                message
            })?;
    if request.explain {
        eprint!("weir: {}", prepared.choice());
        eprintln!(
            "weir: {}",
            checks_line(prepared.choice().engine, program, &Bindings::conformance(), &limits)
        );
    }
    prepared.run_mem(mem).map_err(|trap| trap.to_string())
}

/// What `--explain` says of the run-time checks on the chosen engine: the JIT's counts of
/// checks kept and dropped (from the verifier's facts), or that the interpreter keeps all.
pub fn checks_line(
    engine: weir::Engine,
    program: &Verified,
    bindings: &Bindings,
    limits: &weir::program::Limits,
) -> String {
    let proven = program.facts().is_some();
    match engine {
        weir::Engine::Jit => {
            let checks = weir::jit::checks(program, bindings, limits);
            let why = if proven { "" } else { " (no proof: --no-verify)" };
            format!("jit: {}{why}", checks.summary())
        }
        other => format!(
            "{other}: every memory access and division checked at run time (only the JIT uses \
             the verifier's facts)"
        ),
    }
}

/// The exit status of `weir exec` on a `.data` file that the conformance suite's runner
/// skips (an unknown section such as `-- map`, or no expectation): 77, the skip status of
/// automake and meson test harnesses.
pub const SKIPPED: u8 = 77;

pub fn exec(
    path: &Path,
    mem_hex: Option<&str>,
    engine: EngineRequest,
    budget: Option<u64>,
    check: bool,
    verify: bool,
) -> Result<ExitCode, String> {
    let bytes = input::read(path)?;
    let format = input::detect(&bytes);
    let (program, mut mem, expect) = if format == Format::DataFile {
        let text = input::text(path, &bytes)?;
        let name = path.display().to_string();
        let case: Case = match weir::data::parse_case(&name, text) {
            Ok(case) => case,
            Err(e) if e.kind == ParseErrorKind::Skipped => {
                // Neither a pass nor a failure: say so, with a status of its own.
                crate::out::line(&format!("skipped: {name}: {e}"))?;
                return Ok(ExitCode::from(SKIPPED));
            }
            Err(e) => return Err(format!("{name}: {e}")),
        };
        let loaded = weir::data::load_program_noting(&case).map_err(|e| format!("{name}: {e}"));
        match (loaded, check) {
            (Ok((p, notes)), _) => {
                for note in notes {
                    eprintln!("weir: note: {name}: {note}");
                }
                (p, case.mem.clone(), Some(case.expect.clone()))
            }
            (Err(e), true) => return check_outcome(&case.expect, Err(e)),
            (Err(e), false) => return Err(e),
        }
    } else {
        let program: Program = input::program_from(path, &bytes, format)?;
        let program = Verified::structural(program)
            .map_err(|e| format!("{}: validation: {e}", path.display()))?;
        (program, Vec::new(), None)
    };
    if let Some(mem_hex) = mem_hex {
        mem = hex::parse_bytes(mem_hex).map_err(|e| format!("--mem: {e}"))?;
    }
    let mut program = program;
    if verify {
        let proof = crate::verify::before_exec(program.program(), mem.len());
        match (proof, check, &expect) {
            (Ok(proof), _, _) => {
                if engine.explain {
                    eprint!("{}", crate::verify::explain(&proof));
                }
                // The engines get the proven program (its facts are their seam to drop
                // checks; they keep them all today).
                program = proof
                    .into_verified(program.into_program())
                    .map_err(|e| format!("{}: validation: {e}", path.display()))?;
            }
            // A case that expects an error may expect this one.
            (Err(e), true, Some(expect)) => return check_outcome(expect, Err(e)),
            (Err(e), _, _) => return Err(format!("{}: {e}", path.display())),
        }
    }
    let outcome = run_on(engine, &program, &mut mem, budget);
    match (check, expect) {
        (true, Some(expect)) => check_outcome(&expect, outcome),
        (true, None) => {
            Err("--check needs a .data file with a -- result or -- error section".into())
        }
        (false, _) => {
            let r0 = outcome?;
            crate::out::line(&format!("{r0:#x}"))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn check_outcome(expect: &Expect, outcome: Result<u64, String>) -> Result<ExitCode, String> {
    match (expect, &outcome) {
        (Expect::Result(want), Ok(got)) if want == got => {
            crate::out::line(&format!("ok: r0 = {got:#x}"))?;
            Ok(ExitCode::SUCCESS)
        }
        (Expect::Error(want), Err(got)) if got.to_lowercase().contains(&want.to_lowercase()) => {
            crate::out::line(&format!("ok: error: {got}"))?;
            Ok(ExitCode::SUCCESS)
        }
        (Expect::Result(want), _) => {
            Err(format!("expected r0 = {want:#x}, got {}", show(&outcome)))
        }
        (Expect::Error(want), _) => {
            Err(format!("expected an error containing `{want}`, got {}", show(&outcome)))
        }
    }
}

fn show(outcome: &Result<u64, String>) -> String {
    match outcome {
        Ok(r0) => format!("r0 = {r0:#x}"),
        Err(e) => format!("error: {e}"),
    }
}
