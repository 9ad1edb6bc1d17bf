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

/// The largest flow rule file `weir flow` reads (1 GiB): a million tc-flower rules take
/// about 120 MB as text (issue 14's largest rule set; bench/records/2026-12-02-flow-
/// start-1.txt), and a bound still stops `/dev/zero`.
pub const RULES_READ_LIMIT: u64 = 1 << 30;

/// Reads a whole input file (`-`: standard input), at most [`READ_LIMIT`] bytes.
pub fn read(path: &Path) -> Result<Vec<u8>, String> {
    read_at_most(path, READ_LIMIT, "a program, expression or memory")
}

/// Reads a whole input file (`-`: standard input) of at most `limit` bytes; a larger one
/// is an error naming the limit and `what` the command reads.
pub fn read_at_most(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    let name = || {
        if path.as_os_str() == "-" {
            "standard input".to_string()
        } else {
            path.display().to_string()
        }
    };
    let mut buf = Vec::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().lock().take(limit + 1).read_to_end(&mut buf)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit + 1).read_to_end(&mut buf))
    };
    read.map_err(|e| format!("{}: {e}", name()))?;
    if buf.len() as u64 > limit {
        return Err(format!(
            "{}: larger than {} MiB, the most weir reads as {what}",
            name(),
            limit >> 20
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of exactly the limit is read whole; one byte more is refused with the limit
    /// and what was being read named, never cut short.
    #[test]
    fn read_at_most_takes_the_limit_and_refuses_a_byte_more() {
        let dir = std::env::temp_dir().join(format!("weir-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rules.txt");
        std::fs::write(&path, vec![b'x'; 3 << 20]).unwrap();
        assert_eq!(read_at_most(&path, 3 << 20, "a flow rule file").unwrap().len(), 3 << 20);
        let e = read_at_most(&path, (3 << 20) - 1, "a flow rule file").unwrap_err();
        assert!(e.ends_with("larger than 2 MiB, the most weir reads as a flow rule file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
