//! Splits one line of eBPF assembly into tokens, each with the column where it starts. The
//! syntax is line-oriented (one instruction per line, `#` comments to the end of the line),
//! so the parser works line by line and errors can always name a line and a column.
//!
//! Signs are separate tokens: `+3` is `Plus, Num(3)`. That keeps one number rule for jump
//! targets (`+3`), memory offsets (`[%r1-8]`) and immediates (`-1`).

use super::AsmError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tok<'a> {
    /// A name: mnemonic word, label, bare register (`r1`) or pseudo source (`map_fd`).
    Ident(&'a str),
    /// `%name`; holds the text after `%`.
    Reg(&'a str),
    /// An unsigned decimal or `0x` hex literal.
    Num(u64),
    Plus,
    Minus,
    Comma,
    Colon,
    LBracket,
    RBracket,
    LParen,
    RParen,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Token<'a> {
    pub tok: Tok<'a>,
    /// The token as written, for error messages.
    pub text: &'a str,
    /// 1-based column of the first character.
    pub column: usize,
}

/// The tokens of one line.
#[derive(Debug)]
pub(super) struct Line<'a> {
    /// 1-based line number.
    pub number: usize,
    pub tokens: Vec<Token<'a>>,
    /// The column just past the last token: where a missing operand is reported.
    pub end_column: usize,
}

/// Iterates over the lines of a source text with their 1-based numbers. Uses the same line
/// splitting as [`str::lines`], which [`AsmError::render`] also uses.
pub(super) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i.wrapping_add(1), l))
}

/// The text before a `#` comment.
pub(super) fn strip_comment(line: &str) -> &str {
    match line.find('#') {
        Some(at) => line.get(..at).unwrap_or(line),
        None => line,
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '.'
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Why a word that starts with a digit is not a number.
pub(super) enum NumberError {
    Malformed,
    TooLarge,
}

/// Parses `123` or `0x7b` (no sign) into a u64.
pub(super) fn parse_number(text: &str) -> Result<u64, NumberError> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(NumberError::Malformed);
    }
    u64::from_str_radix(digits, radix).map_err(|_| NumberError::TooLarge)
}

pub(super) fn number_error(line: usize, column: usize, text: &str, err: NumberError) -> AsmError {
    match err {
        NumberError::Malformed => AsmError::new(
            line,
            column,
            format!("bad number `{text}`: expected decimal digits or 0x and hex digits"),
        ),
        NumberError::TooLarge => {
            AsmError::new(line, column, format!("number `{text}` does not fit in 64 bits"))
        }
    }
}

/// Tokenizes one line (without its newline).
pub(super) fn lex_line(line: &str, number: usize) -> Result<Line<'_>, AsmError> {
    let chars: Vec<(usize, char)> = strip_comment(line).char_indices().collect();
    let byte_at = |i: usize| chars.get(i).map_or(strip_comment(line).len(), |&(b, _)| b);
    let mut tokens = Vec::new();
    let mut i = 0usize;
    let mut end_column = 1usize;
    while let Some(&(start, c)) = chars.get(i) {
        let column = i.wrapping_add(1);
        if c.is_whitespace() {
            i = i.wrapping_add(1);
            continue;
        }
        let single = match c {
            '+' => Some(Tok::Plus),
            '-' => Some(Tok::Minus),
            ',' => Some(Tok::Comma),
            ':' => Some(Tok::Colon),
            '[' => Some(Tok::LBracket),
            ']' => Some(Tok::RBracket),
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            _ => None,
        };
        let next = if let Some(tok) = single {
            let text = line.get(start..byte_at(i.wrapping_add(1))).unwrap_or("");
            tokens.push(Token { tok, text, column });
            i.wrapping_add(1)
        } else if c == '%' || is_ident_start(c) || c.is_ascii_digit() {
            let body = if c == '%' { i.wrapping_add(1) } else { i };
            let mut j = body;
            while chars.get(j).is_some_and(|&(_, c)| is_word_char(c)) {
                j = j.wrapping_add(1);
            }
            let text = line.get(start..byte_at(j)).unwrap_or("");
            let body_text = line.get(byte_at(body)..byte_at(j)).unwrap_or("");
            let tok = if c == '%' {
                if body_text.is_empty() {
                    return Err(AsmError::new(
                        number,
                        column,
                        "expected a register name after `%`, like %r1",
                    ));
                }
                Tok::Reg(body_text)
            } else if c.is_ascii_digit() {
                Tok::Num(parse_number(text).map_err(|e| number_error(number, column, text, e))?)
            } else {
                Tok::Ident(text)
            };
            tokens.push(Token { tok, text, column });
            j
        } else {
            return Err(AsmError::new(number, column, format!("unexpected character `{c}`")));
        };
        i = next;
        end_column = i.wrapping_add(1);
    }
    Ok(Line { number, tokens, end_column })
}
