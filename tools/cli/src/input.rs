//! Reading program files in every form weir accepts, and telling the forms apart.

use std::io::Read;
use std::path::Path;
use weir::isa::asm;
use weir::isa::ebpf::decode;
use weir::Program;

/// What a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The sectioned conformance format (`-- asm`, `-- raw`, `-- mem`, `-- result`).
    DataFile,
    /// Raw little-endian bytecode.
    Bytecode,
    /// One 64-bit hex word per slot.
    Words,
    /// eBPF assembly text.
    Assembly,
}

pub fn read(path: &Path) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| format!("standard input: {e}"))?;
        return Ok(buf);
    }
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn detect(bytes: &[u8]) -> Format {
    let Ok(text) = std::str::from_utf8(bytes) else { return Format::Bytecode };
    if text.contains('\0') {
        return Format::Bytecode;
    }
    if text.lines().any(|l| l.starts_with("-- ")) {
        return Format::DataFile;
    }
    let mut tokens = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .peekable();
    if tokens.peek().is_some()
        && tokens.all(|t| t.starts_with("0x") && t.len() <= 18 && t.len() > 2)
    {
        return Format::Words;
    }
    Format::Assembly
}

/// An assembly error shown as a compiler would: place, reason, the line and a caret.
pub fn asm_error(path: &Path, source: &str, err: &asm::AsmError) -> String {
    format!(
        "{}:{}:{}: {}\n{}",
        path.display(),
        err.line,
        err.column,
        err.message,
        err.render(source)
    )
}

/// Turns any non-`.data` program file into a Program (decoded, not yet validated).
pub fn program_from(path: &Path, bytes: &[u8], format: Format) -> Result<Program, String> {
    let text = || std::str::from_utf8(bytes).map_err(|e| format!("{}: {e}", path.display()));
    let insns = match format {
        Format::Bytecode => {
            weir::isa::ebpf::decode_bytes(bytes).map_err(|e| format!("{}: {e}", path.display()))?
        }
        Format::Words => {
            let source = text()?;
            let raw = asm::parse_raw_words(source).map_err(|e| asm_error(path, source, &e))?;
            decode(&raw).map_err(|e| format!("{}: {e}", path.display()))?
        }
        Format::Assembly => {
            let source = text()?;
            asm::assemble(source).map_err(|e| asm_error(path, source, &e))?
        }
        Format::DataFile => {
            return Err(format!(
                "{}: a .data file holds a test case, not a bare program",
                path.display()
            ))
        }
    };
    Ok(Program::from_insns(insns))
}
