//! The `.data` case format (see the module docs): sections, comments, and the strict reading
//! of `-- raw`, `-- mem`, `-- result` and `-- error`. A malformed file is a [`ParseError`]
//! naming its 1-based line, never a panic and never a silently ignored line; a file the
//! conformance suite's runner would skip is a [`ParseError`] of kind
//! [`ParseErrorKind::Skipped`], so that nobody mistakes it for a pass.
//!
//! Section headers are recognised as the suite's parser (`bpf_test_parser.cc` of
//! Alan-Jowett/bpf_conformance) recognises them: any line containing `--` is a header, and its
//! kind is the first of these words the line contains: `asm`, `result`, `mem`, `raw`,
//! `no register offset` (ignored), ` c` (the C source, ignored), `error`. weir adds
//! `-- description` (checked first). Any other header makes the suite skip the whole file.

use std::fmt;

use super::{Case, Expect, Source};

/// Why a file is not a runnable case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// The file is malformed.
    Malformed,
    /// The conformance suite's runner skips such a file (an unknown `-- section`, or no
    /// `-- result` / `-- error`); weir says so instead of checking nothing.
    Skipped,
}

/// A malformed (or skipped) case file: the 1-based line and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
    pub kind: ParseErrorKind,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { line, message: message.into(), kind: ParseErrorKind::Malformed })
}

fn skipped<T>(line: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { line, message: message.into(), kind: ParseErrorKind::Skipped })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Asm,
    Raw,
    Mem,
    Result,
    Error,
    Description,
    /// `-- c` (the C source a case was written from) and `-- no register offset`: the suite's
    /// parser skips their bodies, and so does weir.
    Ignored,
}

impl Kind {
    /// The kind of a header line, by the suite's rules (substrings of the whole line, in the
    /// suite's order), after weir's own `-- description`. `None`: a header the suite does not
    /// know.
    fn of_header(line: &str) -> Option<Kind> {
        let name = line.split_once("--").map_or("", |(_, rest)| strip_comment(rest).trim());
        if name == "description" {
            return Some(Kind::Description);
        }
        let rules = [
            ("asm", Kind::Asm),
            ("result", Kind::Result),
            ("mem", Kind::Mem),
            ("raw", Kind::Raw),
            ("no register offset", Kind::Ignored),
            (" c", Kind::Ignored),
            ("error", Kind::Error),
        ];
        rules.iter().find(|(word, _)| line.contains(word)).map(|(_, kind)| *kind)
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Asm => "asm",
            Kind::Raw => "raw",
            Kind::Mem => "mem",
            Kind::Result => "result",
            Kind::Error => "error",
            Kind::Description => "description",
            Kind::Ignored => "(ignored)",
        }
    }
}

/// One section: its kind, the line of its `-- name` header, and its body lines with their
/// 1-based line numbers.
struct Section<'a> {
    kind: Kind,
    header_line: usize,
    body: Vec<(usize, &'a str)>,
}

fn strip_comment(line: &str) -> &str {
    line.split_once('#').map_or(line, |(code, _)| code)
}

fn split_sections(text: &str) -> Result<Vec<Section<'_>>, ParseError> {
    let mut sections: Vec<Section<'_>> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index.saturating_add(1);
        if line.contains("--") {
            let Some(kind) = Kind::of_header(line) else {
                return skipped(
                    number,
                    format!(
                        "unknown section `{}`: the conformance suite's runner skips a file with a \
                         section it does not know (it knows asm, raw, mem, result, error, c and \
                         no register offset; weir adds description)",
                        line.trim()
                    ),
                );
            };
            if kind != Kind::Ignored {
                if let Some(first) = sections.iter().find(|s| s.kind == kind) {
                    return err(
                        number,
                        format!(
                            "section `-- {}` appears twice (first on line {})",
                            kind.name(),
                            first.header_line
                        ),
                    );
                }
            }
            sections.push(Section { kind, header_line: number, body: Vec::new() });
            continue;
        }
        match sections.last_mut() {
            Some(section) => section.body.push((number, line)),
            None if strip_comment(line).trim().is_empty() => {}
            None => return err(number, "text before the first `-- section` line"),
        }
    }
    Ok(sections)
}

/// The whitespace-separated tokens of a section body, comments removed, with line numbers.
fn tokens<'a>(section: &Section<'a>) -> Vec<(usize, &'a str)> {
    section
        .body
        .iter()
        .flat_map(|(number, line)| {
            strip_comment(line).split_whitespace().map(move |t| (*number, t))
        })
        .collect()
}

fn parse_u64(token: &str) -> Option<u64> {
    match token.strip_prefix("0x").or_else(|| token.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() => u64::from_str_radix(hex, 16).ok(),
        Some(_) => None,
        None => token.parse::<u64>().ok(),
    }
}

fn parse_raw(section: &Section<'_>) -> Result<Vec<u64>, ParseError> {
    tokens(section)
        .into_iter()
        .map(|(line, token)| match parse_u64(token) {
            Some(word) => Ok(word),
            None => {
                err(line, format!("`{token}` is not a 64-bit word (write e.g. 0x0000000000000095)"))
            }
        })
        .collect()
}

fn parse_mem(section: &Section<'_>) -> Result<Vec<u8>, ParseError> {
    tokens(section)
        .into_iter()
        .map(|(line, token)| {
            let valid = token.len() == 2 && token.bytes().all(|b| b.is_ascii_hexdigit());
            match u8::from_str_radix(token, 16) {
                Ok(byte) if valid => Ok(byte),
                _ => {
                    err(line, format!("`{token}` is not a byte (write two hex digits, e.g. `0a`)"))
                }
            }
        })
        .collect()
}

fn parse_result(section: &Section<'_>) -> Result<u64, ParseError> {
    let toks = tokens(section);
    match toks.as_slice() {
        [] => err(section.header_line, "`-- result` needs a value, e.g. 0x2a or 42"),
        [(line, token)] => match parse_value(token) {
            Some(v) => Ok(v),
            None => err(
                *line,
                format!(
                    "`{token}` is not a 64-bit value (write hex like 0x2a, decimal like 42, or a \
                     negative decimal like -1 for its two's complement)"
                ),
            ),
        },
        [_, (line, token), ..] => {
            err(*line, format!("unexpected `{token}`: `-- result` holds one value"))
        }
    }
}

/// A `-- result` value as the suite reads it (`strtoull`): `0x` hex, decimal, or a negative
/// decimal taken modulo 2^64 (`-1` is `0xffffffffffffffff`). Out-of-range values are refused
/// rather than clamped.
fn parse_value(token: &str) -> Option<u64> {
    if let Some(hex) = token.strip_prefix("0x").or_else(|| token.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return u64::from_str_radix(hex, 16).ok();
    }
    let (negative, digits) = match token.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, token),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude = digits.parse::<u64>().ok()?;
    Some(if negative { magnitude.wrapping_neg() } else { magnitude })
}

fn parse_error_text(section: &Section<'_>) -> Result<String, ParseError> {
    let words: Vec<&str> = tokens(section).into_iter().map(|(_, t)| t).collect();
    if words.is_empty() {
        return err(
            section.header_line,
            "`-- error` needs the text the error message must contain",
        );
    }
    Ok(words.join(" "))
}

/// Parses one case file. `name` is the case's name (its file name without `.data`).
pub fn parse_case(name: &str, text: &str) -> Result<Case, ParseError> {
    let sections = split_sections(text)?;
    let end_line = text.lines().count().max(1);
    let find = |kind| sections.iter().find(|s: &&Section<'_>| s.kind == kind);

    // The suite uses `-- raw` when it holds any word, and `-- asm` otherwise.
    let raw = match find(Kind::Raw) {
        Some(r) => parse_raw(r)?,
        None => Vec::new(),
    };
    let source = match find(Kind::Asm) {
        _ if !raw.is_empty() => Source::Raw(raw),
        Some(asm) => {
            let body: Vec<&str> = asm.body.iter().map(|(_, l)| *l).collect();
            let mut text = body.join("\n");
            text.push('\n');
            Source::Asm(text)
        }
        None => {
            let line = find(Kind::Raw).map_or(end_line, |r| r.header_line);
            return err(line, "the case has no program (`-- asm`, or words in `-- raw`)");
        }
    };
    // An empty `-- error` states nothing: the suite reads it as no expected error.
    let error = find(Kind::Error).filter(|e| !tokens(e).is_empty());
    let expect = match (find(Kind::Result), error) {
        (Some(r), Some(e)) => {
            return err(
                r.header_line.max(e.header_line),
                "a case has `-- result` or `-- error`, not both",
            )
        }
        (Some(r), None) => Expect::Result(parse_result(r)?),
        (None, Some(e)) => Expect::Error(parse_error_text(e)?),
        (None, None) => {
            let line = find(Kind::Error).map_or(end_line, |e| e.header_line);
            return skipped(
                line,
                "the case states no expectation (`-- result`, or text in `-- error`); the \
                 conformance suite's runner skips such a file",
            );
        }
    };
    let mem = match find(Kind::Mem) {
        Some(m) => parse_mem(m)?,
        None => Vec::new(),
    };
    let description = find(Kind::Description)
        .map(|d| {
            d.body.iter().map(|(_, l)| l.trim()).collect::<Vec<_>>().join("\n").trim().to_string()
        })
        .unwrap_or_default();
    Ok(Case { name: name.to_string(), source, mem, expect, description })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_section() {
        let text = "# leading comment\n-- description\nAdds # not a comment here? it is\n-- asm\nmov %r0, 1 # one\nexit\n-- mem\naa bb\n  cc # three\n-- result\n0x1\n";
        let case = parse_case("t", text).unwrap();
        assert_eq!(case.source, Source::Asm("mov %r0, 1 # one\nexit\n".into()));
        assert_eq!(case.mem, vec![0xaa, 0xbb, 0xcc]);
        assert_eq!(case.expect, Expect::Result(1));
        assert!(case.description.starts_with("Adds"));
    }

    #[test]
    fn parses_raw_and_error() {
        let case =
            parse_case("t", "-- raw\n0x95 # exit\n18 0x0\n-- error\nunknown   opcode\n").unwrap();
        assert_eq!(case.source, Source::Raw(vec![0x95, 18, 0]));
        assert_eq!(case.expect, Expect::Error("unknown opcode".into()));
        assert!(case.mem.is_empty());
    }

    #[test]
    fn sections_match_as_the_suite_matches_them() {
        let text = "# Copyright line\n-- asm\nmov %r0, 1\nexit\n-- c\nint f() { return 1; }\n\
                    -- result\n1\n-- no register offset\ncall instruction\n";
        let case = parse_case("t", text).unwrap();
        assert_eq!(case.source, Source::Asm("mov %r0, 1\nexit\n".into()));
        assert_eq!(case.expect, Expect::Result(1));
        // The suite reads a header by the words it contains.
        let case = parse_case("t", "--asm\nexit\n-- results\n0x2\n").unwrap();
        assert_eq!(case.expect, Expect::Result(2));
        // Any line holding `--` is a header, even in C source (`i--`), as in the suite.
        let e = parse_case("t", "-- c\ni--;\n-- asm\nexit\n-- result\n0\n").unwrap_err();
        assert_eq!((e.line, e.kind), (2, ParseErrorKind::Skipped));
    }

    #[test]
    fn results_in_hex_decimal_or_negative_decimal() {
        for (text, want) in [
            ("0x2a", 42),
            ("0X2A", 42),
            ("42", 42),
            ("0", 0),
            ("-1", u64::MAX),
            ("18446744073709551615", u64::MAX),
            ("0x2a # r0", 42),
        ] {
            let case = parse_case("t", &format!("-- asm\nexit\n-- result\n{text}\n")).unwrap();
            assert_eq!(case.expect, Expect::Result(want), "{text}");
        }
        for bad in ["18446744073709551616", "0x", "4a", "-", "+1", "1-"] {
            let e = parse_case("t", &format!("-- asm\nexit\n-- result\n{bad}\n")).unwrap_err();
            assert_eq!((e.line, e.kind), (4, ParseErrorKind::Malformed), "{bad}: {e}");
        }
    }

    #[test]
    fn raw_is_preferred_over_asm() {
        let case = parse_case("t", "-- asm\nmov %r0, 1\nexit\n-- raw\n0x95\n-- result\n0x0\n");
        assert_eq!(case.unwrap().source, Source::Raw(vec![0x95]));
        // An empty `-- raw` leaves the program to `-- asm`.
        let case = parse_case("t", "-- raw\n# none\n-- asm\nexit\n-- result\n0x0\n");
        assert_eq!(case.unwrap().source, Source::Asm("exit\n".into()));
    }

    #[test]
    fn files_the_suite_skips_are_skipped_by_name() {
        let e =
            parse_case("t", "-- map\narray 2 4 4 10\n-- asm\nexit\n-- result\n1\n").unwrap_err();
        assert_eq!((e.line, e.kind), (1, ParseErrorKind::Skipped));
        assert!(e.message.contains("unknown section `-- map`"), "{e}");
        let e = parse_case("t", "-- asm\nexit\n").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::Skipped);
        assert!(e.message.contains("expectation"), "{e}");
    }
}
