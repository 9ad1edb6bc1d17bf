//! The `.data` case format (see the module docs): sections, comments, and the strict reading
//! of `-- raw`, `-- mem`, `-- result` and `-- error`. A malformed file is a [`ParseError`]
//! naming its 1-based line, never a panic and never a silently ignored line.

use std::fmt;

use super::{Case, Expect, Source};

/// A malformed case file: the 1-based line and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { line, message: message.into() })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Asm,
    Raw,
    Mem,
    Result,
    Error,
    Description,
}

impl Kind {
    fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "asm" => Kind::Asm,
            "raw" => Kind::Raw,
            "mem" => Kind::Mem,
            "result" => Kind::Result,
            "error" => Kind::Error,
            "description" => Kind::Description,
            _ => return None,
        })
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
        if let Some(rest) = line.strip_prefix("--") {
            let name = strip_comment(rest).trim();
            let Some(kind) = Kind::from_name(name) else {
                return err(
                    number,
                    format!(
                        "unknown section `-- {name}` (expected asm, raw, mem, result, error or description)"
                    ),
                );
            };
            if let Some(first) = sections.iter().find(|s| s.kind == kind) {
                return err(
                    number,
                    format!(
                        "section `-- {name}` appears twice (first on line {})",
                        first.header_line
                    ),
                );
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
        [] => err(section.header_line, "`-- result` needs a value, e.g. 0x2a"),
        [(line, token)] => {
            match token.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()) {
                Some(v) if !token.contains('+') => Ok(v),
                _ => err(*line, format!("`{token}` is not a 64-bit hex value like 0x2a")),
            }
        }
        [_, (line, token), ..] => {
            err(*line, format!("unexpected `{token}`: `-- result` holds one value"))
        }
    }
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

    let source = match (find(Kind::Asm), find(Kind::Raw)) {
        (Some(a), Some(r)) => {
            return err(
                a.header_line.max(r.header_line),
                "a case has `-- asm` or `-- raw`, not both",
            )
        }
        (Some(asm), None) => {
            let body: Vec<&str> = asm.body.iter().map(|(_, l)| *l).collect();
            let mut text = body.join("\n");
            text.push('\n');
            Source::Asm(text)
        }
        (None, Some(raw)) => Source::Raw(parse_raw(raw)?),
        (None, None) => return err(end_line, "the case has no program (`-- asm` or `-- raw`)"),
    };
    let expect = match (find(Kind::Result), find(Kind::Error)) {
        (Some(r), Some(e)) => {
            return err(
                r.header_line.max(e.header_line),
                "a case has `-- result` or `-- error`, not both",
            )
        }
        (Some(r), None) => Expect::Result(parse_result(r)?),
        (None, Some(e)) => Expect::Error(parse_error_text(e)?),
        (None, None) => {
            return err(end_line, "the case states no expectation (`-- result` or `-- error`)")
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
}
