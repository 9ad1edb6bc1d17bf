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

/// The largest program, expression or memory file a command reads (64 MiB): far above the
/// largest program weir runs (1,000,000 instructions, about 30 MB as text), and a clear error
/// instead of unbounded memory for `/dev/zero` or an endless pipe.
pub const READ_LIMIT: u64 = 64 << 20;

/// Reads a whole input file (`-`: standard input), at most [`READ_LIMIT`] bytes.
pub fn read(path: &Path) -> Result<Vec<u8>, String> {
    let name = || {
        if path.as_os_str() == "-" {
            "standard input".to_string()
        } else {
            path.display().to_string()
        }
    };
    let mut buf = Vec::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().lock().take(READ_LIMIT + 1).read_to_end(&mut buf)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(READ_LIMIT + 1).read_to_end(&mut buf))
    };
    read.map_err(|e| format!("{}: {e}", name()))?;
    if buf.len() as u64 > READ_LIMIT {
        return Err(format!(
            "{}: larger than {} MiB, the most weir reads as a program, expression or memory",
            name(),
            READ_LIMIT >> 20
        ));
    }
    Ok(buf)
}

/// `bytes` as text, or an error naming the first byte that is not UTF-8.
pub fn text<'b>(path: &Path, bytes: &'b [u8]) -> Result<&'b str, String> {
    std::str::from_utf8(bytes).map_err(|e| {
        format!("{}: not UTF-8 text (byte {} is not valid UTF-8)", path.display(), e.valid_up_to())
    })
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
    let text = || text(path, bytes);
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
