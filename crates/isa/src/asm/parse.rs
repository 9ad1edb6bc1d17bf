//! The assembler: text to slot-indexed [`Insn`]s, driven by the opcode table.
//!
//! Each line is parsed into a mnemonic and operands as written (register, number, label,
//! memory operand, `lddw` pseudo source). The table rows of the mnemonic then say which
//! operand shapes exist; the first row whose shape the operands fit is chosen, so `add %r0, 1`
//! and `add %r0, %r1` pick different rows without any per-instruction code. Labels are
//! resolved in a second pass, once every label's slot is known.
//!
//! The output has exactly the form [`crate::ebpf::decode`] produces (discriminator fields set,
//! unused fields zero, `lddw` followed by an [`Op::LddwHigh`] filler), so assembling the
//! disassembly of a decoded program gives that program back.

use std::collections::HashMap;
use std::fmt;

use super::lexer::{lex_line, numbered_lines, Line, Tok, Token};
use super::AsmError;
use crate::ebpf::{specs_for_mnemonic, Disc, Insn, Op, OpSpec, Operands, PseudoKind, OPCODES};

/// An operand as written, before a table row gives it meaning.
#[derive(Clone, Debug)]
enum Operand<'a> {
    Reg(u8),
    Num(i128),
    Label(&'a str),
    /// `[%rN+off]`; the offset keeps its column for range errors.
    Mem {
        base: u8,
        off: i128,
        off_column: usize,
    },
    /// `map_fd(3)`, `func(label)`; `close_column` is where a missing argument is reported.
    Pseudo {
        kind: PseudoKind,
        args: Vec<Spanned<'a>>,
        close_column: usize,
    },
}

#[derive(Clone, Debug)]
struct Spanned<'a> {
    operand: Operand<'a>,
    column: usize,
}

/// What an operand position of a row accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Reg,
    Imm32,
    Imm64,
    /// A jump target whose offset goes into the 16-bit `off` field.
    Target16,
    /// A jump or call target whose offset goes into the 32-bit `imm` field.
    Target32,
    Mem,
    Pseudo(PseudoKind),
}

/// The operands each shape is written with, in order.
fn wants(shape: Operands) -> &'static [Want] {
    use Want::*;
    match shape {
        Operands::DstImm => &[Reg, Imm32],
        Operands::DstSrc => &[Reg, Reg],
        Operands::Dst | Operands::CallReg => &[Reg],
        Operands::JmpOff => &[Target16],
        Operands::JmpImm | Operands::CallLocal => &[Target32],
        Operands::DstImmOff => &[Reg, Imm32, Target16],
        Operands::DstSrcOff => &[Reg, Reg, Target16],
        Operands::CallImm | Operands::Abs => &[Imm32],
        Operands::Nothing => &[],
        Operands::Load => &[Reg, Mem],
        Operands::StoreImm => &[Mem, Imm32],
        Operands::StoreReg => &[Mem, Reg],
        Operands::DstImm64 => &[Reg, Imm64],
        Operands::Pseudo(PseudoKind::MapFd) => &[Reg, Pseudo(PseudoKind::MapFd)],
        Operands::Pseudo(PseudoKind::MapValue) => &[Reg, Pseudo(PseudoKind::MapValue)],
        Operands::Pseudo(PseudoKind::BtfId) => &[Reg, Pseudo(PseudoKind::BtfId)],
        Operands::Pseudo(PseudoKind::Func) => &[Reg, Pseudo(PseudoKind::Func)],
        Operands::Pseudo(PseudoKind::MapIdx) => &[Reg, Pseudo(PseudoKind::MapIdx)],
        Operands::Pseudo(PseudoKind::MapIdxValue) => &[Reg, Pseudo(PseudoKind::MapIdxValue)],
        Operands::Ind => &[Reg, Imm32],
    }
}

fn fits(want: Want, operand: &Operand<'_>) -> bool {
    match (want, operand) {
        (Want::Reg, Operand::Reg(_)) => true,
        (Want::Imm32 | Want::Imm64, Operand::Num(_)) => true,
        (Want::Target16 | Want::Target32, Operand::Num(_) | Operand::Label(_)) => true,
        (Want::Mem, Operand::Mem { .. }) => true,
        (Want::Pseudo(k), Operand::Pseudo { kind, .. }) => k == *kind,
        _ => false,
    }
}

fn pseudo_form(kind: PseudoKind) -> String {
    match kind {
        PseudoKind::Func => "func(label or +offset)".to_string(),
        k if k.has_offset() => format!("{}(N, OFF)", k.name()),
        k => format!("{}(N)", k.name()),
    }
}

fn describe_want(want: Want) -> String {
    match want {
        Want::Reg => "a register".to_string(),
        Want::Imm32 => "a 32-bit immediate".to_string(),
        Want::Imm64 => "a 64-bit immediate".to_string(),
        Want::Target16 | Want::Target32 => "a jump target (label or +offset)".to_string(),
        Want::Mem => "a memory operand like [%r1+4]".to_string(),
        Want::Pseudo(kind) => pseudo_form(kind),
    }
}

fn describe_operand(operand: &Operand<'_>) -> String {
    match operand {
        Operand::Reg(n) => format!("register %r{n}"),
        Operand::Num(v) => format!("the number {v}"),
        Operand::Label(name) => format!("label `{name}`"),
        Operand::Mem { .. } => "a memory operand".to_string(),
        Operand::Pseudo { kind, .. } => format!("{}(...)", kind.name()),
    }
}

/// Walks the tokens of one line.
struct Cursor<'t, 'a> {
    tokens: &'t [Token<'a>],
    pos: usize,
    line: usize,
    end_column: usize,
}

impl<'a> Cursor<'_, 'a> {
    fn peek(&self) -> Option<Token<'a>> {
        self.tokens.get(self.pos).copied()
    }

    fn peek_second(&self) -> Option<Token<'a>> {
        self.tokens.get(self.pos.wrapping_add(1)).copied()
    }

    fn bump(&mut self) -> Option<Token<'a>> {
        let t = self.peek();
        if t.is_some() {
            self.pos = self.pos.wrapping_add(1);
        }
        t
    }

    /// Column of the next token, or just past the line when there is none.
    fn column(&self) -> usize {
        self.peek().map_or(self.end_column, |t| t.column)
    }

    fn error(&self, column: usize, message: impl Into<String>) -> AsmError {
        AsmError::new(self.line, column, message)
    }

    /// An error at the next token (or the end of the line), naming what was found.
    fn expected(&self, what: &str) -> AsmError {
        match self.peek() {
            Some(t) => self.error(t.column, format!("expected {what}, found `{}`", t.text)),
            None => self.error(self.end_column, format!("expected {what} before end of line")),
        }
    }
}

/// `r0`..`r10` -> `Some(Some(n))`; other `r<digits>` -> `Some(None)` (register-shaped but
/// not a register); anything else -> `None`.
fn register_number(name: &str) -> Option<Option<u8>> {
    let digits = name.strip_prefix('r')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let canonical = digits == "0" || !digits.starts_with('0');
    Some(digits.parse::<u8>().ok().filter(|&n| canonical && n <= 10))
}

fn bad_register(line: usize, column: usize, written: &str) -> AsmError {
    AsmError::new(line, column, format!("bad register `{written}`: registers are %r0 to %r10"))
}

fn parse_register(cur: &mut Cursor<'_, '_>) -> Result<u8, AsmError> {
    let Some(t) = cur.peek() else {
        return Err(cur.expected("a register"));
    };
    let number = match t.tok {
        Tok::Reg(name) => match register_number(name) {
            Some(Some(n)) => n,
            _ => return Err(bad_register(cur.line, t.column, t.text)),
        },
        Tok::Ident(name) => match register_number(name) {
            Some(Some(n)) => n,
            Some(None) => return Err(bad_register(cur.line, t.column, t.text)),
            None => return Err(cur.expected("a register")),
        },
        _ => return Err(cur.expected("a register")),
    };
    cur.bump();
    Ok(number)
}

/// An optionally signed number: `5`, `-0x10`, `+3`.
fn parse_signed(cur: &mut Cursor<'_, '_>) -> Result<(i128, usize), AsmError> {
    let Some(first) = cur.peek() else {
        return Err(cur.expected("a number"));
    };
    let negative = match first.tok {
        Tok::Plus => false,
        Tok::Minus => true,
        Tok::Num(v) => {
            cur.bump();
            return Ok((i128::from(v), first.column));
        }
        _ => return Err(cur.expected("a number")),
    };
    cur.bump();
    match cur.peek() {
        Some(Token { tok: Tok::Num(v), .. }) => {
            cur.bump();
            let magnitude = i128::from(v);
            Ok((if negative { magnitude.wrapping_neg() } else { magnitude }, first.column))
        }
        _ => Err(cur.expected(&format!("a number after `{}`", first.text))),
    }
}

/// A number or a label (jump targets and `lddw` pseudo arguments).
fn parse_scalar<'a>(cur: &mut Cursor<'_, 'a>) -> Result<Spanned<'a>, AsmError> {
    let column = cur.column();
    if let Some(Token { tok: Tok::Ident(name), .. }) = cur.peek() {
        if register_number(name).is_some() {
            return Err(cur.expected("a number or a label"));
        }
        cur.bump();
        return Ok(Spanned { operand: Operand::Label(name), column });
    }
    if !matches!(cur.peek().map(|t| t.tok), Some(Tok::Plus | Tok::Minus | Tok::Num(_))) {
        return Err(cur.expected("a number or a label"));
    }
    let (value, column) = parse_signed(cur)?;
    Ok(Spanned { operand: Operand::Num(value), column })
}

fn parse_memory<'a>(cur: &mut Cursor<'_, 'a>) -> Result<Operand<'a>, AsmError> {
    cur.bump(); // `[`
    if !matches!(cur.peek().map(|t| t.tok), Some(Tok::Reg(_) | Tok::Ident(_))) {
        return Err(cur.expected("a base register after `[`"));
    }
    let base = parse_register(cur)?;
    let (off, off_column, closing) = match cur.peek().map(|t| t.tok) {
        Some(Tok::Plus | Tok::Minus) => {
            let (off, column) = parse_signed(cur)?;
            (off, column, "`]`")
        }
        _ => (0, cur.column(), "`]` or an offset like +4"),
    };
    match cur.peek().map(|t| t.tok) {
        Some(Tok::RBracket) => {
            cur.bump();
            Ok(Operand::Mem { base, off, off_column })
        }
        _ => Err(cur.expected(closing)),
    }
}

/// The pseudo source kinds `lddw` rows of the table name.
fn pseudo_kind_named(name: &str) -> Option<PseudoKind> {
    OPCODES.iter().filter_map(|s| s.op.pseudo_kind()).find(|k| k.name() == name)
}

fn parse_pseudo<'a>(
    cur: &mut Cursor<'_, 'a>,
    name_token: Token<'a>,
) -> Result<Operand<'a>, AsmError> {
    let name = name_token.text;
    let Some(kind) = pseudo_kind_named(name) else {
        let known: Vec<&str> =
            OPCODES.iter().filter_map(|s| s.op.pseudo_kind()).map(PseudoKind::name).collect();
        return Err(cur.error(
            name_token.column,
            format!("unknown lddw source `{name}(...)`: expected one of {}", known.join(", ")),
        ));
    };
    cur.bump(); // name
    cur.bump(); // `(`
    let mut args = Vec::new();
    if !matches!(cur.peek().map(|t| t.tok), Some(Tok::RParen)) {
        loop {
            args.push(parse_scalar(cur)?);
            match cur.peek().map(|t| t.tok) {
                Some(Tok::Comma) => {
                    cur.bump();
                }
                Some(Tok::RParen) => break,
                _ => return Err(cur.expected("`,` or `)`")),
            }
        }
    }
    let close_column = cur.column();
    cur.bump(); // `)`
    Ok(Operand::Pseudo { kind, args, close_column })
}

fn parse_operand<'a>(cur: &mut Cursor<'_, 'a>) -> Result<Spanned<'a>, AsmError> {
    let Some(t) = cur.peek() else {
        return Err(cur.expected("an operand"));
    };
    let operand = match t.tok {
        Tok::Reg(_) => Operand::Reg(parse_register(cur)?),
        Tok::Ident(name) => {
            if matches!(cur.peek_second().map(|t| t.tok), Some(Tok::LParen)) {
                parse_pseudo(cur, t)?
            } else if register_number(name).is_some() {
                Operand::Reg(parse_register(cur)?)
            } else {
                cur.bump();
                Operand::Label(name)
            }
        }
        Tok::Plus | Tok::Minus | Tok::Num(_) => Operand::Num(parse_signed(cur)?.0),
        Tok::LBracket => parse_memory(cur)?,
        _ => return Err(cur.expected("an operand")),
    };
    Ok(Spanned { operand, column: t.column })
}

fn parse_operands<'a>(cur: &mut Cursor<'_, 'a>) -> Result<Vec<Spanned<'a>>, AsmError> {
    let mut operands = Vec::new();
    if cur.peek().is_none() {
        return Ok(operands);
    }
    loop {
        operands.push(parse_operand(cur)?);
        match cur.peek().map(|t| t.tok) {
            None => return Ok(operands),
            Some(Tok::Comma) => {
                cur.bump();
                if cur.peek().is_none() {
                    return Err(cur.expected("an operand after `,`"));
                }
            }
            Some(_) => return Err(cur.expected("`,` between operands")),
        }
    }
}

/// Other names for rows of the table, as the common eBPF conformance suite
/// (Alan-Jowett/bpf_conformance) and other assemblers write them: the name as written, the
/// table's mnemonic, and the one operand shape the alias may take (`callx` is only the
/// register call). The disassembler always prints the table's name.
const ALIASES: &[(&str, &str, Option<Operands>)] = &[
    ("gotol", "ja32", None),
    ("swap16", "bswap16", None),
    ("swap32", "bswap32", None),
    ("swap64", "bswap64", None),
    // RFC 9669's sign-extending loads, in the suite's spelling.
    ("ldxsb", "ldxbsx", None),
    ("ldxsh", "ldxhsx", None),
    ("ldxsw", "ldxwsx", None),
    ("callx", "call", Some(Operands::CallReg)),
    // The suite's call modes: `call helper N` (or `call helper %rN`), `call local label`,
    // `call runtime N` (a kfunc, src 2).
    ("call helper", "call", None),
    ("call runtime", "call kfunc", None),
    // Exchanges always fetch; the suite accepts the redundant `fetch`.
    ("lock fetch xchg", "lock xchg", None),
    ("lock fetch xchg32", "lock xchg32", None),
    ("lock fetch cmpxchg", "lock cmpxchg", None),
    ("lock fetch cmpxchg32", "lock cmpxchg32", None),
];

fn is_prefix_of(words: &str, name: &str) -> bool {
    name == words || name.strip_prefix(words).is_some_and(|rest| rest.starts_with(' '))
}

/// Whether `words` is a mnemonic, an alias, or the first words of one.
fn is_mnemonic_prefix(words: &str) -> bool {
    OPCODES.iter().any(|s| is_prefix_of(words, s.mnemonic))
        || ALIASES.iter().any(|(alias, _, _)| is_prefix_of(words, alias))
}

/// The first word of a mnemonic as the loop in [`parse_mnemonic`] continues it: a table or
/// alias word as written, or `<op>64` -> `<op>` (`add64` is `add`).
fn resolve_first_word(word: &str) -> Option<&str> {
    if is_mnemonic_prefix(word) {
        return Some(word);
    }
    // `<op>64` names the 64-bit ALU form when `<op>` is an ALU64-class mnemonic that does
    // not already end in a width (`bswap1664` is not an alias of anything).
    let base = word.strip_suffix("64").filter(|b| !b.ends_with(|c: char| c.is_ascii_digit()))?;
    let mut rows = specs_for_mnemonic(base).peekable();
    rows.peek()?;
    rows.all(|s| s.opcode & 0x07 == 0x07).then_some(base)
}

/// Reads a mnemonic of one or more words (`exit`, `call local`, `lock fetch add32`, or an
/// alias such as `swap16` or `call helper`) and returns its table rows, its name as written
/// (for messages) and its column.
fn parse_mnemonic(
    cur: &mut Cursor<'_, '_>,
) -> Result<(Vec<&'static OpSpec>, String, usize), AsmError> {
    let Some(first) = cur.peek() else {
        return Err(cur.expected("an instruction"));
    };
    let Tok::Ident(word) = first.tok else {
        return Err(cur.expected("an instruction or a label"));
    };
    let Some(canonical) = resolve_first_word(word) else {
        return Err(cur.error(first.column, format!("unknown mnemonic `{word}`")));
    };
    cur.bump();
    let mut name = canonical.to_string();
    while let Some(Token { tok: Tok::Ident(next), .. }) = cur.peek() {
        let longer = format!("{name} {next}");
        if !is_mnemonic_prefix(&longer) {
            break;
        }
        name = longer;
        cur.bump();
    }
    let (table_name, only) = match ALIASES.iter().find(|(alias, _, _)| *alias == name) {
        Some((_, table_name, only)) => (*table_name, *only),
        None => (name.as_str(), None),
    };
    let rows: Vec<&'static OpSpec> = specs_for_mnemonic(table_name)
        .filter(|s| only.is_none_or(|shape| s.operands == shape))
        .collect();
    if rows.is_empty() {
        let mut unique: Vec<&str> = Vec::new();
        let continuations = OPCODES
            .iter()
            .map(|s| s.mnemonic)
            .chain(ALIASES.iter().map(|(alias, _, _)| *alias))
            .filter_map(|m| m.strip_prefix(name.as_str())?.strip_prefix(' '))
            .filter_map(|rest| rest.split(' ').next());
        for word in continuations {
            if !unique.contains(&word) {
                unique.push(word);
            }
        }
        return Err(cur.error(
            first.column,
            format!("incomplete mnemonic `{name}`: continue with one of {}", unique.join(", ")),
        ));
    }
    let written =
        if word == canonical { name } else { format!("{word}{}", &name[canonical.len()..]) };
    Ok((rows, written, first.column))
}

/// Picks the first row whose operand shape the operands fit; if none does, explains the
/// mismatch at the position where the rows that got furthest failed.
fn select_row(
    rows: &[&'static OpSpec],
    operands: &[Spanned<'_>],
    mnemonic: &str,
    line: &Line<'_>,
) -> Result<&'static OpSpec, AsmError> {
    let mut failures: Vec<(usize, Option<Want>)> = Vec::new();
    for row in rows {
        let wanted = wants(row.operands);
        let mut pos = 0usize;
        loop {
            match (wanted.get(pos), operands.get(pos)) {
                (None, None) => return Ok(row),
                (Some(&want), Some(op)) if fits(want, &op.operand) => pos = pos.wrapping_add(1),
                (want, _) => {
                    failures.push((pos, want.copied()));
                    break;
                }
            }
        }
    }
    let furthest = failures.iter().map(|f| f.0).max().unwrap_or(0);
    let mut expected: Vec<String> = Vec::new();
    let mut end_allowed = false;
    for (_, want) in failures.iter().filter(|f| f.0 == furthest) {
        match want {
            Some(w) => {
                let text = describe_want(*w);
                if !expected.contains(&text) {
                    expected.push(text);
                }
            }
            None => end_allowed = true,
        }
    }
    let err = |column, message: String| AsmError::new(line.number, column, message);
    match operands.get(furthest) {
        None => Err(err(
            line.end_column,
            format!("`{mnemonic}` is missing an operand: expected {}", expected.join(" or ")),
        )),
        Some(op) if expected.is_empty() => Err(err(
            op.column,
            if furthest == 0 {
                format!("`{mnemonic}` takes no operands")
            } else {
                format!("too many operands: `{mnemonic}` takes {furthest}")
            },
        )),
        Some(op) => {
            if end_allowed {
                expected.push("end of line".to_string());
            }
            Err(err(
                op.column,
                format!(
                    "`{mnemonic}` expects {} here, found {}",
                    expected.join(" or "),
                    describe_operand(&op.operand)
                ),
            ))
        }
    }
}

/// A label use waiting for the second pass.
struct Fixup<'a> {
    /// Slot of the instruction, which is also its index in the slot-indexed output
    /// (offsets are relative to the slot after it).
    pc: usize,
    field: FixField,
    label: &'a str,
    line: usize,
    column: usize,
}

#[derive(Clone, Copy)]
enum FixField {
    /// 16-bit `off` of a jump.
    Off,
    /// 32-bit `imm` of `ja32` / `call local`.
    Imm,
    /// Low half of the `lddw func(...)` immediate.
    FuncImm,
}

/// Where a jump or call goes, as written.
enum Target<'a> {
    Offset(i64),
    Label(&'a str, usize),
}

/// Operand values converted to field ranges for the chosen row.
enum Value<'a> {
    Reg(u8),
    Imm(i64),
    Target(Target<'a>),
    Mem(u8, i16),
}

/// 32-bit immediates accept -2^31..2^32-1; values above i32::MAX keep their bit pattern.
fn imm32_bits(value: i128) -> Option<i32> {
    if let Ok(v) = i32::try_from(value) {
        return Some(v);
    }
    u32::try_from(value).ok().map(|v| v as i32)
}

/// An instruction's 32-bit immediate: what [`imm32_bits`] accepts, and also the 64-bit
/// values that are the sign extension of a 32-bit one (0xffffffff80000000 to
/// 0xffffffffffffffff, as the conformance suite writes -1 in `jne %r1,
/// 0xffffffffffffffff, +1`): the instruction sees exactly that value, nothing is cut off.
/// Anything else wider than 32 bits is refused (the suite's assembler silently truncates it).
fn imm32_operand_bits(value: i128) -> Option<i32> {
    imm32_bits(value).or_else(|| {
        let bits = u64::try_from(value).ok()? as i64;
        i32::try_from(bits).ok()
    })
}

/// 64-bit immediates accept any i64 or u64 value, kept as a bit pattern.
fn imm64_bits(value: i128) -> Option<i64> {
    if let Ok(v) = i64::try_from(value) {
        return Some(v);
    }
    u64::try_from(value).ok().map(|v| v as i64)
}

/// The argument of a one-argument pseudo source: a 32-bit value goes into the low half with
/// a zero high half (the normal case); anything wider is the whole 64-bit immediate.
fn pseudo_imm(value: i128) -> Option<i64> {
    match imm32_bits(value) {
        Some(low) => Some(i64::from(low as u32)),
        None => imm64_bits(value),
    }
}

struct Builder<'a> {
    line: usize,
    fixups: Vec<Fixup<'a>>,
    /// Keep the low 32 bits of a wider 32-bit immediate, as the conformance suite's
    /// assembler does ([`assemble_suite`]), instead of refusing it.
    truncate: bool,
    truncations: Vec<Truncation>,
}

/// A 32-bit immediate [`assemble_suite`] cut to its low 32 bits, as the conformance suite's
/// assembler does (`static_cast<uint32_t>(std::stoull(text))`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// 1-based line and column of the immediate.
    pub line: usize,
    pub column: usize,
    /// The value as written.
    pub written: i128,
    /// The immediate the instruction got.
    pub kept: i32,
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: immediate {:#x} does not fit in 32 bits; kept its low 32 bits \
             {:#x}, as the conformance suite's assembler does",
            self.line, self.column, self.written, self.kept as u32
        )
    }
}

impl<'a> Builder<'a> {
    fn range_error(&self, column: usize, what: &str, value: i128, range: &str) -> AsmError {
        AsmError::new(self.line, column, format!("{what} {value} is out of range ({range})"))
    }

    fn value(&mut self, want: Want, op: &Spanned<'a>) -> Result<Value<'a>, AsmError> {
        let column = op.column;
        let value = match (want, &op.operand) {
            (Want::Reg, Operand::Reg(n)) => Value::Reg(*n),
            (Want::Imm32, Operand::Num(v)) if self.truncate && imm32_operand_bits(*v).is_none() => {
                // The suite reads the number as a 64-bit unsigned value (a minus sign
                // negates it modulo 2^64) and keeps the low 32 bits; past 64 bits it fails.
                let wide = imm64_bits(*v).ok_or_else(|| {
                    self.range_error(column, "immediate", *v, "any i64 or u64 value")
                })?;
                let kept = wide as i32;
                self.truncations.push(Truncation { line: self.line, column, written: *v, kept });
                Value::Imm(i64::from(kept))
            }
            (Want::Imm32, Operand::Num(v)) => {
                let bits = imm32_operand_bits(*v).ok_or_else(|| {
                    self.range_error(
                        column,
                        "immediate",
                        *v,
                        "-2147483648 to 4294967295, or the 64-bit sign extension of such a value",
                    )
                })?;
                Value::Imm(i64::from(bits))
            }
            (Want::Imm64, Operand::Num(v)) => {
                let bits = imm64_bits(*v).ok_or_else(|| {
                    self.range_error(column, "immediate", *v, "any i64 or u64 value")
                })?;
                Value::Imm(bits)
            }
            (Want::Target16, Operand::Num(v)) => {
                let off = i16::try_from(*v).map_err(|_| {
                    self.range_error(
                        column,
                        "jump offset",
                        *v,
                        "-32768 to 32767; use ja32 for a longer unconditional jump",
                    )
                })?;
                Value::Target(Target::Offset(i64::from(off)))
            }
            (Want::Target32, Operand::Num(v)) => {
                let off = i32::try_from(*v).map_err(|_| {
                    self.range_error(column, "offset", *v, "-2147483648 to 2147483647")
                })?;
                Value::Target(Target::Offset(i64::from(off)))
            }
            (Want::Target16 | Want::Target32, Operand::Label(name)) => {
                Value::Target(Target::Label(name, column))
            }
            (Want::Mem, Operand::Mem { base, off, off_column }) => {
                let off = i16::try_from(*off).map_err(|_| {
                    self.range_error(*off_column, "memory offset", *off, "-32768 to 32767")
                })?;
                Value::Mem(*base, off)
            }
            (Want::Pseudo(kind), Operand::Pseudo { args, close_column, .. }) => {
                self.pseudo_value(kind, args, *close_column)?
            }
            _ => {
                return Err(AsmError::new(
                    self.line,
                    column,
                    format!(
                        "expected {}, found {}",
                        describe_want(want),
                        describe_operand(&op.operand)
                    ),
                ))
            }
        };
        Ok(value)
    }

    fn pseudo_value(
        &self,
        kind: PseudoKind,
        args: &[Spanned<'a>],
        close_column: usize,
    ) -> Result<Value<'a>, AsmError> {
        let count = if kind.has_offset() { 2 } else { 1 };
        if let Some(extra) = args.get(count) {
            return Err(AsmError::new(
                self.line,
                extra.column,
                format!("too many arguments: {} takes {count}", pseudo_form(kind)),
            ));
        }
        if args.len() < count {
            return Err(AsmError::new(
                self.line,
                close_column,
                format!("missing argument: write {}", pseudo_form(kind)),
            ));
        }
        let number = |arg: &Spanned<'a>| match arg.operand {
            Operand::Num(v) => Ok((v, arg.column)),
            _ => Err(AsmError::new(
                self.line,
                arg.column,
                format!("{} takes numbers, found {}", kind.name(), describe_operand(&arg.operand)),
            )),
        };
        match (kind, args) {
            (PseudoKind::Func, [Spanned { operand: Operand::Label(name), column }]) => {
                Ok(Value::Target(Target::Label(name, *column)))
            }
            (_, [first]) => {
                let (v, column) = number(first)?;
                let imm = pseudo_imm(v).ok_or_else(|| {
                    self.range_error(column, "argument", v, "any i64 or u64 value")
                })?;
                Ok(Value::Imm(imm))
            }
            (_, [first, second]) => {
                let range = "-2147483648 to 4294967295";
                let (n, n_column) = number(first)?;
                let (off, off_column) = number(second)?;
                let low = imm32_bits(n)
                    .ok_or_else(|| self.range_error(n_column, "argument", n, range))?;
                let high = imm32_bits(off)
                    .ok_or_else(|| self.range_error(off_column, "offset", off, range))?;
                Ok(Value::Imm(i64::from(low as u32) | i64::from(high).wrapping_shl(32)))
            }
            _ => {
                Err(AsmError::new(self.line, close_column, format!("write {}", pseudo_form(kind))))
            }
        }
    }

    /// Builds the instruction of `spec` from its operands; `pc` is its slot, for fixups.
    fn build(
        &mut self,
        spec: &'static OpSpec,
        operands: &[Spanned<'a>],
        mnemonic_column: usize,
        pc: usize,
    ) -> Result<Insn, AsmError> {
        let mut values = Vec::with_capacity(operands.len());
        for (want, op) in wants(spec.operands).iter().zip(operands) {
            values.push(self.value(*want, op)?);
        }
        let mut insn = Insn::new(spec.op, 0, 0, 0, 0);
        let mut target = None;
        use Operands::*;
        match (spec.operands, values.as_slice()) {
            (DstImm | DstImm64, [Value::Reg(d), Value::Imm(i)]) => (insn.dst, insn.imm) = (*d, *i),
            (DstSrc, [Value::Reg(d), Value::Reg(s)]) => (insn.dst, insn.src) = (*d, *s),
            (Dst | CallReg, [Value::Reg(d)]) => insn.dst = *d,
            (JmpOff, [Value::Target(t)]) => target = Some((t, FixField::Off)),
            (JmpImm | CallLocal, [Value::Target(t)]) => target = Some((t, FixField::Imm)),
            (DstImmOff, [Value::Reg(d), Value::Imm(i), Value::Target(t)]) => {
                (insn.dst, insn.imm) = (*d, *i);
                target = Some((t, FixField::Off));
            }
            (DstSrcOff, [Value::Reg(d), Value::Reg(s), Value::Target(t)]) => {
                (insn.dst, insn.src) = (*d, *s);
                target = Some((t, FixField::Off));
            }
            (CallImm | Abs, [Value::Imm(i)]) => insn.imm = *i,
            (Nothing, []) => {}
            (Load, [Value::Reg(d), Value::Mem(s, o)]) => {
                (insn.dst, insn.src, insn.off) = (*d, *s, *o)
            }
            (StoreImm, [Value::Mem(d, o), Value::Imm(i)]) => {
                (insn.dst, insn.off, insn.imm) = (*d, *o, *i)
            }
            (StoreReg, [Value::Mem(d, o), Value::Reg(s)]) => {
                (insn.dst, insn.off, insn.src) = (*d, *o, *s)
            }
            (Pseudo(_), [Value::Reg(d), Value::Imm(i)]) => (insn.dst, insn.imm) = (*d, *i),
            (Pseudo(_), [Value::Reg(d), Value::Target(t)]) => {
                insn.dst = *d;
                target = Some((t, FixField::FuncImm));
            }
            (Ind, [Value::Reg(s), Value::Imm(i)]) => (insn.src, insn.imm) = (*s, *i),
            _ => {
                return Err(AsmError::new(
                    self.line,
                    mnemonic_column,
                    format!("operands do not fit `{}`", spec.mnemonic),
                ))
            }
        }
        match target {
            Some((Target::Offset(v), field)) => set_target(&mut insn, field, *v),
            Some((Target::Label(label, column), field)) => {
                self.fixups.push(Fixup { pc, field, label, line: self.line, column: *column })
            }
            None => {}
        }
        match spec.disc {
            Disc::None => {}
            Disc::Off(v) => insn.off = v,
            Disc::Imm(v) => insn.imm = i64::from(v),
            Disc::Src(v) => insn.src = v,
        }
        Ok(insn)
    }
}

/// Stores an offset already checked to fit its field.
fn set_target(insn: &mut Insn, field: FixField, offset: i64) {
    match field {
        FixField::Off => insn.off = i16::try_from(offset).unwrap_or(0),
        FixField::Imm => insn.imm = offset,
        FixField::FuncImm => insn.imm = i64::from(offset as u32),
    }
}

/// Assembles eBPF text into slot-indexed instructions (see the module docs).
pub fn assemble(text: &str) -> Result<Vec<Insn>, AsmError> {
    assemble_with(text, false).map(|(insns, _)| insns)
}

/// [`assemble`] as the conformance suite's assembler reads its `.data` files: a 32-bit
/// immediate wider than 32 bits (up to 64) keeps its low 32 bits instead of being refused,
/// and each such cut is returned so the caller can say so. Everything else is as strict
/// as [`assemble`].
pub fn assemble_suite(text: &str) -> Result<(Vec<Insn>, Vec<Truncation>), AsmError> {
    assemble_with(text, true)
}

fn assemble_with(text: &str, truncate: bool) -> Result<(Vec<Insn>, Vec<Truncation>), AsmError> {
    let mut insns: Vec<Insn> = Vec::new();
    let mut labels: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut builder = Builder { line: 0, fixups: Vec::new(), truncate, truncations: Vec::new() };
    // The slot of the first `exit` instruction: what `exit` names when no `exit:` label is
    // written (the conformance suite's convention, `jne %r0, 0, exit`).
    let mut first_exit: Option<(usize, usize)> = None;
    for (number, source) in numbered_lines(text) {
        let line = lex_line(source, number)?;
        let mut cur =
            Cursor { tokens: &line.tokens, pos: 0, line: number, end_column: line.end_column };
        let pc = insns.len();
        while let (
            Some(Token { tok: Tok::Ident(name), column, .. }),
            Some(Token { tok: Tok::Colon, .. }),
        ) = (cur.peek(), cur.peek_second())
        {
            if register_number(name).is_some() {
                return Err(cur.error(
                    column,
                    format!("`{name}` looks like a register and cannot be a label"),
                ));
            }
            if let Some((first_line, _)) = labels.get(name) {
                return Err(cur.error(
                    column,
                    format!("label `{name}` is already defined on line {first_line}"),
                ));
            }
            labels.insert(name, (number, pc));
            cur.bump();
            cur.bump();
        }
        if cur.peek().is_none() {
            continue;
        }
        let (rows, mnemonic, mnemonic_column) = parse_mnemonic(&mut cur)?;
        let operands = parse_operands(&mut cur)?;
        let spec = select_row(&rows, &operands, &mnemonic, &line)?;
        builder.line = number;
        let insn = builder.build(spec, &operands, mnemonic_column, pc)?;
        if spec.op == Op::Exit && first_exit.is_none() {
            first_exit = Some((number, pc));
        }
        insns.push(insn);
        if spec.op.is_lddw() {
            insns.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
        }
    }
    if let Some(exit) = first_exit {
        labels.entry("exit").or_insert(exit);
    }
    for fix in &builder.fixups {
        let Some(&(_, target)) = labels.get(fix.label) else {
            let hint = if fix.label == "exit" {
                " (`exit` names the first `exit` instruction, and the program has none)"
            } else {
                ""
            };
            return Err(AsmError::new(
                fix.line,
                fix.column,
                format!("undefined label `{}`{hint}", fix.label),
            ));
        };
        let offset = i64::try_from(target)
            .ok()
            .zip(i64::try_from(fix.pc).ok())
            .and_then(|(t, pc)| t.checked_sub(pc)?.checked_sub(1));
        let fits = match fix.field {
            FixField::Off => offset.and_then(|o| i16::try_from(o).ok()).is_some(),
            FixField::Imm | FixField::FuncImm => {
                offset.and_then(|o| i32::try_from(o).ok()).is_some()
            }
        };
        let (true, Some(offset), Some(insn)) = (fits, offset, insns.get_mut(fix.pc)) else {
            let shown = offset.map_or_else(|| "too many".to_string(), |o| o.to_string());
            let hint = match fix.field {
                FixField::Off => {
                    "beyond a 16-bit jump offset (-32768 to 32767); \
                     use ja32 for a long unconditional jump"
                }
                _ => "beyond a 32-bit offset",
            };
            return Err(AsmError::new(
                fix.line,
                fix.column,
                format!("label `{}` is {shown} slots away, {hint}", fix.label),
            ));
        };
        set_target(insn, fix.field, offset);
    }
    Ok((insns, builder.truncations))
}
