//! Reading classic programs in every form people pass them around in, the inverse of
//! `weir-isa`'s printers: tcpdump's `-d` listing (which makes it an assembler: the `(NNN)`
//! prefix is optional, and jump targets are absolute indexes as tcpdump prints them), the
//! `-dd` C initializers, the `-ddd` decimal form with its count line, and raw little-endian
//! `struct sock_filter` bytes. Errors give the 1-based line (0 for raw bytes, where the
//! record index is in the error).

use thiserror::Error;
use weir_isa::cbpf::ancillary::{ANCILLARY_FIELDS, SKF_AD_OFF};
use weir_isa::cbpf::{
    decode, decode_bytes, CbpfDecodeError, CbpfInsn, CbpfOperand, SockFilter, CBPF_OPCODES,
};

/// Which form the input is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `tcpdump -d`: `(000) ldh      [12]`.
    Listing,
    /// `tcpdump -dd`: `{ 0x28, 0, 0, 0x0000000c },`.
    CArray,
    /// `tcpdump -ddd`: a count line, then `40 0 0 12`.
    Decimal,
    /// Little-endian 8-byte `struct sock_filter` records.
    Raw,
    /// Decide from the input: not text means raw; otherwise the first non-blank line says.
    Auto,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct CbpfParseError {
    /// 1-based line of the text input; 0 for raw bytes.
    pub line: usize,
    pub kind: CbpfParseErrorKind,
}

impl std::fmt::Display for CbpfParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Raw bytes have no lines: their errors name the instruction themselves.
        match self.line {
            0 => write!(f, "{}", self.kind),
            line => write!(f, "line {line}: {}", self.kind),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CbpfParseErrorKind {
    #[error("text input is not UTF-8")]
    NotText,
    #[error("no instructions")]
    Empty,
    #[error("expected {expected}, found {found:?}")]
    Syntax { expected: &'static str, found: String },
    #[error("unknown mnemonic {0:?}")]
    UnknownMnemonic(String),
    #[error("{mnemonic} does not take the operand {operand:?}")]
    BadOperand { mnemonic: String, operand: String },
    #[error("{0:?} is not a number that fits in 32 bits")]
    BadNumber(String),
    #[error("{field} target {target} is not after instruction {index}, or more than 255 ahead")]
    BadJumpTarget { field: &'static str, target: u64, index: usize },
    #[error("line is numbered ({found}), expected ({expected})")]
    IndexMismatch { expected: usize, found: usize },
    #[error("count line says {declared} instructions, {found} follow")]
    CountMismatch { declared: usize, found: usize },
    #[error("{0}")]
    Decode(CbpfDecodeError),
}

fn err(line: usize, kind: CbpfParseErrorKind) -> CbpfParseError {
    CbpfParseError { line, kind }
}

fn syntax(line: usize, expected: &'static str, found: &str) -> CbpfParseError {
    err(line, CbpfParseErrorKind::Syntax { expected, found: found.to_owned() })
}

/// Reads a classic program from `input` in `format`.
pub fn parse(input: &[u8], format: Format) -> Result<Vec<CbpfInsn>, CbpfParseError> {
    let format = match format {
        Format::Auto => detect(input),
        f => f,
    };
    if format == Format::Raw {
        return decode_bytes(input).map_err(|e| err(0, CbpfParseErrorKind::Decode(e)));
    }
    let text = std::str::from_utf8(input).map_err(|_| err(0, CbpfParseErrorKind::NotText))?;
    match format {
        Format::CArray => parse_records(text, false),
        Format::Decimal => parse_records(text, true),
        _ => parse_listing(text),
    }
}

fn detect(input: &[u8]) -> Format {
    let Ok(text) = std::str::from_utf8(input) else {
        return Format::Raw;
    };
    if text.chars().any(|c| c.is_control() && !c.is_whitespace()) {
        return Format::Raw;
    }
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if first.starts_with('{') {
        Format::CArray
    } else if !first.is_empty() && first.chars().all(|c| c.is_ascii_digit()) {
        Format::Decimal
    } else {
        Format::Listing
    }
}

/// A 32-bit field: decimal or `0x` hex, optionally negative (stored as two's complement).
fn number(text: &str) -> Option<u32> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    };
    if negative {
        (value <= 0x8000_0000).then(|| (value as u32).wrapping_neg())
    } else {
        u32::try_from(value).ok()
    }
}

fn parse_number(line: usize, text: &str) -> Result<u32, CbpfParseError> {
    number(text.trim()).ok_or_else(|| err(line, CbpfParseErrorKind::BadNumber(text.trim().into())))
}

/// `-dd` (`{ code, jt, jf, k },`) or `-ddd` (count line, then `code jt jf k`) records.
fn parse_records(text: &str, decimal: bool) -> Result<Vec<CbpfInsn>, CbpfParseError> {
    let mut raw = Vec::new();
    let mut lines_of = Vec::new();
    let mut declared: Option<(usize, usize)> = None;
    for (number_zero_based, full) in text.lines().enumerate() {
        let line = number_zero_based.wrapping_add(1);
        let trimmed = full.trim();
        if trimmed.is_empty() {
            continue;
        }
        let fields: Vec<&str> = if decimal {
            if declared.is_none() {
                let count = parse_number(line, trimmed)?;
                declared = Some((line, count as usize));
                continue;
            }
            trimmed.split_whitespace().collect()
        } else {
            let body = trimmed.strip_suffix(',').unwrap_or(trimmed).trim();
            let inner = body
                .strip_prefix('{')
                .and_then(|b| b.strip_suffix('}'))
                .ok_or_else(|| syntax(line, "`{ code, jt, jf, k },`", trimmed))?;
            inner.split(',').collect()
        };
        let [code, jt, jf, k] = fields[..] else {
            return Err(syntax(line, "four fields: code, jt, jf, k", trimmed));
        };
        let code = parse_number(line, code)?;
        let jt = parse_number(line, jt)?;
        let jf = parse_number(line, jf)?;
        let k = parse_number(line, k)?;
        let (Ok(code), Ok(jt), Ok(jf)) = (u16::try_from(code), u8::try_from(jt), u8::try_from(jf))
        else {
            return Err(syntax(line, "code below 0x10000 and jt, jf below 256", trimmed));
        };
        raw.push(SockFilter { code, jt, jf, k });
        lines_of.push(line);
    }
    if let Some((line, declared)) = declared {
        if declared != raw.len() {
            return Err(err(
                line,
                CbpfParseErrorKind::CountMismatch { declared, found: raw.len() },
            ));
        }
    }
    if raw.is_empty() {
        return Err(err(0, CbpfParseErrorKind::Empty));
    }
    decode(&raw).map_err(|e| {
        let line = lines_of.get(e.index).copied().unwrap_or(0);
        err(line, CbpfParseErrorKind::Decode(e))
    })
}

/// The operand shapes of the listing, matched against the table's operand forms.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Imm,
    Abs,
    Ind,
    Mem,
    PktLen,
    Msh,
    X,
    Bare,
    None,
    /// `ret a`: tcpdump prints `ret` alone, but people write the register out.
    A,
}

fn shape_of(form: CbpfOperand) -> Shape {
    match form {
        CbpfOperand::ImmHex | CbpfOperand::ImmDec => Shape::Imm,
        CbpfOperand::Abs => Shape::Abs,
        CbpfOperand::Ind => Shape::Ind,
        CbpfOperand::Mem => Shape::Mem,
        CbpfOperand::PktLen => Shape::PktLen,
        CbpfOperand::Msh => Shape::Msh,
        CbpfOperand::X => Shape::X,
        CbpfOperand::JumpTarget => Shape::Bare,
        CbpfOperand::A | CbpfOperand::Nothing => Shape::None,
    }
}

/// The shape and `k` of an operand as `tcpdump -d` writes it (spaces already removed).
/// The number an operand is written around (`#N`, `M[N]`, `[N]`, ...), if it has one: for
/// saying that a number is out of range rather than that the operand is wrong.
fn operand_number(text: &str) -> Option<&str> {
    let inner = text
        .strip_prefix('#')
        .or_else(|| text.strip_prefix("M[").and_then(|t| t.strip_suffix(']')))
        .or_else(|| text.strip_prefix("4*([").and_then(|t| t.strip_suffix("]&0xf)")))
        .or_else(|| text.strip_prefix("[x+").and_then(|t| t.strip_suffix(']')))
        .or_else(|| text.strip_prefix('[').and_then(|t| t.strip_suffix(']')))?;
    let digits = inner.strip_prefix('-').unwrap_or(inner);
    let digits = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")).unwrap_or(digits);
    let numeric = !digits.is_empty() && digits.chars().all(|c| c.is_ascii_hexdigit());
    numeric.then_some(inner)
}

fn operand(text: &str) -> Option<(Shape, u32)> {
    if text.is_empty() {
        return Some((Shape::None, 0));
    }
    if text == "x" {
        return Some((Shape::X, 0));
    }
    if text == "a" {
        return Some((Shape::A, 0));
    }
    if text == "#pktlen" {
        return Some((Shape::PktLen, 0));
    }
    if let Some(n) = text.strip_prefix('#') {
        return Some((Shape::Imm, number(n)?));
    }
    if let Some(inner) = text.strip_prefix("M[").and_then(|t| t.strip_suffix(']')) {
        return Some((Shape::Mem, number(inner)?));
    }
    if let Some(inner) = text.strip_prefix("4*([").and_then(|t| t.strip_suffix("]&0xf)")) {
        return Some((Shape::Msh, number(inner)?));
    }
    if let Some(inner) = text.strip_prefix("[x+").and_then(|t| t.strip_suffix(']')) {
        return Some((Shape::Ind, number(inner)?));
    }
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        if let Some(f) = ANCILLARY_FIELDS.iter().find(|f| f.tcpdump_name == inner) {
            return Some((Shape::Abs, SKF_AD_OFF.wrapping_add(f.offset)));
        }
        return Some((Shape::Abs, number(inner)?));
    }
    Some((Shape::Bare, number(text)?))
}

fn parse_listing(text: &str) -> Result<Vec<CbpfInsn>, CbpfParseError> {
    let mut insns = Vec::new();
    for (number_zero_based, full) in text.lines().enumerate() {
        let line = number_zero_based.wrapping_add(1);
        let mut rest = full.split(';').next().unwrap_or("").trim();
        if rest.is_empty() {
            continue;
        }
        let index = insns.len();
        if let Some(after) = rest.strip_prefix('(') {
            let (num, tail) = after
                .split_once(')')
                .ok_or_else(|| syntax(line, "`(NNN)` instruction number", rest))?;
            let found = parse_number(line, num)? as usize;
            if found != index {
                return Err(err(
                    line,
                    CbpfParseErrorKind::IndexMismatch { expected: index, found },
                ));
            }
            rest = tail.trim();
        }
        let (mnemonic, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        // Jump targets follow the operand as `jt N jf M`.
        let (operand_text, targets) = match args.find("jt") {
            Some(at) => (args.get(..at).unwrap_or(""), Some(args.get(at..).unwrap_or(""))),
            None => (args, None),
        };
        let compact: String = operand_text.chars().filter(|c| !c.is_whitespace()).collect();
        let bad_operand = || {
            err(
                line,
                CbpfParseErrorKind::BadOperand {
                    mnemonic: mnemonic.to_owned(),
                    operand: operand_text.trim().to_owned(),
                },
            )
        };
        let rows: Vec<_> = CBPF_OPCODES.iter().filter(|s| s.mnemonic == mnemonic).collect();
        if rows.is_empty() {
            return Err(err(line, CbpfParseErrorKind::UnknownMnemonic(mnemonic.to_owned())));
        }
        let (shape, k) = match operand(&compact) {
            Some(found) => found,
            None => {
                return Err(match operand_number(&compact) {
                    Some(n) if number(n).is_none() => {
                        err(line, CbpfParseErrorKind::BadNumber(n.to_owned()))
                    }
                    _ => bad_operand(),
                })
            }
        };
        let spec = rows
            .iter()
            .find(|s| {
                shape_of(s.operand) == shape || (shape == Shape::A && s.operand == CbpfOperand::A)
            })
            .ok_or_else(bad_operand)?;
        let next = (index as u64).wrapping_add(1);
        let mut insn = CbpfInsn::stmt(spec.op, k);
        if spec.op.is_conditional_jump() {
            let words: Vec<&str> = targets.unwrap_or("").split_whitespace().collect();
            let ["jt", t, "jf", f] = words[..] else {
                return Err(syntax(line, "`jt N jf M` after a conditional jump", rest));
            };
            let offset = |field: &'static str, text: &str| -> Result<u8, CbpfParseError> {
                let target = u64::from(parse_number(line, text)?);
                target.checked_sub(next).and_then(|d| u8::try_from(d).ok()).ok_or_else(|| {
                    err(line, CbpfParseErrorKind::BadJumpTarget { field, target, index })
                })
            };
            insn.jt = offset("jt", t)?;
            insn.jf = offset("jf", f)?;
            if spec.operand == CbpfOperand::X {
                insn.k = 0;
            }
        } else if targets.is_some() {
            return Err(syntax(line, "no jump targets on this instruction", rest));
        } else if spec.operand == CbpfOperand::JumpTarget {
            // `ja T` prints the absolute target; k is relative to the next instruction and
            // wraps as tcpdump computes it.
            insn.k = k.wrapping_sub(next as u32);
        }
        insns.push(insn);
    }
    if insns.is_empty() {
        return Err(err(0, CbpfParseErrorKind::Empty));
    }
    Ok(insns)
}

#[cfg(test)]
mod tests;
