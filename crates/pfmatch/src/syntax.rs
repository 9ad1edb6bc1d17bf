//! The match language's syntax: a hand-written scanner over the source with comments
//! blanked out (so every byte offset stays the source's), the tests and arguments handed
//! to the pflang compiler, their errors moved to the source's lines.

use std::fmt;

use weir_filter::{CmpOp, Expr, Pred};
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options, ParseError, Span};

use crate::{Arg, Body, Clause, Program, Test};

/// An error in a match program: the line it is on and a pflang [`ParseError`] whose span is
/// relative to that line (so it renders with the same caret as a filter's error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchError {
    /// 1-based line.
    pub line: usize,
    pub line_text: String,
    pub error: ParseError,
}

impl MatchError {
    /// `line N: error at column C: message`, the line and a caret under the offending text.
    pub fn render(&self) -> String {
        format!("line {}: {}", self.line, self.error.render(&self.line_text))
    }
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for MatchError {}

/// A warning (an unreachable clause): where it is, as an error says it, but labelled a
/// warning: `line N: warning at column C: message`, the line and a caret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning(pub MatchError);

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.0;
        write!(f, "line {}: {}", w.line, w.error.render_as("warning", &w.line_text))
    }
}

/// Parses a match program for a link type with the default options.
pub fn parse(source: &str, linktype: LinkType, names: &NameDb) -> Result<Program, MatchError> {
    parse_with(source, &Options::new(linktype), names)
}

/// Parses a match program, compiling tests and arguments with `options`.
pub fn parse_with(source: &str, options: &Options, names: &NameDb) -> Result<Program, MatchError> {
    let mut p = Parser {
        src: source,
        clean: blank_comments(source),
        pos: 0,
        options,
        names,
        handlers: Vec::new(),
        warnings: Vec::new(),
        tests: Vec::new(),
    };
    p.skip_ws();
    if !p.eat_word("match") {
        return Err(p.error(p.pos, p.pos + 1, "expected `match {` at the start of the program"));
    }
    p.skip_ws();
    if !p.eat("{") {
        return Err(p.error(p.pos, p.pos + 1, "expected `{` after `match`"));
    }
    let clauses = p.clauses()?;
    p.skip_ws();
    if p.pos < p.clean.len() {
        return Err(p.error(p.pos, p.clean.len(), "unexpected text after the closing `}`"));
    }
    let mut program = Program {
        clauses,
        handlers: std::mem::take(&mut p.handlers).into_iter().map(|(name, _)| name).collect(),
        warnings: Vec::new(),
    };
    // Clauses the optimizer proves dispatch never chooses, beyond what the text shows.
    for k in crate::dispatch::unreachable_clauses(&program) {
        if let Some(&(start, len, false)) = p.tests.get(k) {
            let why = why_unreachable(&program, k);
            p.warnings.push(Warning(p.error(
                start,
                start + len,
                format!("unreachable clause: {why}"),
            )));
        }
    }
    p.warnings.sort_by_key(|w| w.0.line);
    program.warnings = p.warnings;
    Ok(program)
}

/// Clauses in `c` and nested in it.
fn clause_count(c: &Clause) -> usize {
    match &c.body {
        Body::Nested(inner) => 1 + inner.iter().map(clause_count).sum::<usize>(),
        Body::Handler { .. } => 1,
    }
}

/// Why clause `k` (numbered as [`crate::dispatch::unreachable_clauses`] numbers them) is
/// never chosen: at the top level, that it cannot match even alone (its test, with its
/// arguments computable), or the one clause before it that alone takes all its packets
/// when there is one (each checked as a program of its own).
fn why_unreachable(program: &Program, k: usize) -> String {
    let mut number = 0;
    let mut at = None;
    for (i, c) in program.clauses.iter().enumerate() {
        if number == k {
            at = Some(i);
        }
        number += clause_count(c);
    }
    let Some(at) = at else {
        return "the clauses before it and the tests around it leave it no packet".to_string();
    };
    let never = |before: Option<usize>| {
        let clauses: Vec<Clause> =
            before.iter().chain(Some(&at)).map(|&i| program.clauses[i].clone()).collect();
        let pair = Program { clauses, handlers: program.handlers.clone(), warnings: Vec::new() };
        let last = before.map_or(0, |j| clause_count(&program.clauses[j]));
        crate::dispatch::unreachable_clauses(&pair).contains(&last)
    };
    if never(None) {
        return match &program.clauses[at].body {
            Body::Handler { args, .. } if !args.is_empty() => {
                "no packet passes its test with its arguments computable".to_string()
            }
            _ => "no packet passes its test".to_string(),
        };
    }
    match (0..at).find(|&j| never(Some(j))) {
        Some(j) => {
            format!(
                "the clause on line {} catches every packet it matches first",
                program.clauses[j].line
            )
        }
        None => "the clauses before it catch every packet it matches first".to_string(),
    }
}

/// `#` to the end of the line becomes spaces: offsets stay the source's.
fn blank_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut in_comment = false;
    for c in source.chars() {
        if c == '\n' {
            in_comment = false;
        } else if c == '#' {
            in_comment = true;
        }
        if in_comment {
            // One space per byte keeps every later offset (and the caret) in place.
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    out
}

struct Parser<'a> {
    src: &'a str,
    clean: String,
    pos: usize,
    options: &'a Options,
    names: &'a NameDb,
    /// Handler names and their argument counts.
    handlers: Vec<(String, usize)>,
    warnings: Vec<Warning>,
    /// Each clause's test text (start, length) in the source, and whether a warning was
    /// given for it already, in the order the tests are read (a clause before the clauses
    /// nested in it): the order [`crate::dispatch::unreachable_clauses`] numbers them in.
    tests: Vec<(usize, usize, bool)>,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        self.clean.get(self.pos..).unwrap_or("")
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        let trimmed = rest.trim_start();
        self.pos += rest.len() - trimmed.len();
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// `word` not followed by a name character.
    fn eat_word(&mut self, word: &str) -> bool {
        let rest = self.rest();
        if rest.starts_with(word) && !rest[word.len()..].starts_with(is_name_char) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    /// An error spanning source bytes `start..end`, moved to its line.
    fn error(&self, start: usize, end: usize, message: impl Into<String>) -> MatchError {
        located(self.src, start, end, message.into())
    }

    fn clauses(&mut self) -> Result<Vec<Clause>, MatchError> {
        let mut clauses = Vec::new();
        let mut otherwise_line: Option<usize> = None;
        // Tests (without arguments after them) already seen in this list.
        let mut seen: Vec<(String, usize)> = Vec::new();
        loop {
            self.skip_ws();
            if self.eat("}") {
                return Ok(clauses);
            }
            if self.pos >= self.clean.len() {
                return Err(self.error(self.pos, self.pos, "expected `}` to close the match"));
            }
            let start = self.pos;
            let Some(arrow) = self.rest().find("=>").map(|i| i + self.pos) else {
                let end = self.rest().find('\n').map_or(self.clean.len(), |i| i + self.pos);
                return Err(self.error(start, end, "expected `=>` after the test"));
            };
            let raw = self.clean[start..arrow].to_string();
            if let Some(brace) = raw.find(['{', '}']) {
                return Err(self.error(
                    start + brace,
                    start + brace + 1,
                    "expected `=>` before this",
                ));
            }
            let lead = raw.len() - raw.trim_start().len();
            let text = raw.trim().to_string();
            let text = text.as_str();
            let text_start = start + lead;
            let line = line_of(self.src, start);
            if text.is_empty() {
                return Err(self.error(arrow, arrow + 2, "expected a test before `=>`"));
            }
            let test = if text == "otherwise" {
                if let Some(first) = otherwise_line {
                    return Err(self.error(
                        text_start,
                        text_start + text.len(),
                        format!("a second `otherwise`; the first is on line {first}"),
                    ));
                }
                Test::Otherwise
            } else {
                let filter = weir_pflang::compile(text, self.options, self.names)
                    .map_err(|e| self.moved(e, text_start, text.len()))?;
                Test::Filter { text: text.to_string(), filter }
            };
            let warnings = self.warnings.len();
            if let Some(first) = otherwise_line {
                self.warn(text_start, text.len(), format!("unreachable clause: `otherwise` on line {first} catches every packet first"));
            } else if let Some((_, first)) = seen.iter().find(|(t, _)| t == text) {
                let first = *first;
                self.warn(text_start, text.len(), format!("unreachable clause: the same test on line {first} catches its packets first"));
            }
            self.tests.push((text_start, text.len(), self.warnings.len() > warnings));
            if matches!(test, Test::Otherwise) {
                otherwise_line = Some(line);
            }
            self.pos = arrow + 2;
            let body = self.body()?;
            // A later clause with the same test is unreachable only when this one cannot fail
            // on its arguments.
            let total = match &body {
                Body::Handler { args, .. } => args.is_empty(),
                Body::Nested(_) => true,
            };
            if total {
                seen.push((text.to_string(), line));
            }
            clauses.push(Clause { test, body, line });
        }
    }

    fn warn(&mut self, start: usize, len: usize, message: String) {
        let w = Warning(self.error(start, start + len, message));
        self.warnings.push(w);
    }

    /// A pflang error in a text that starts at source byte `at` and is `len` bytes long
    /// (spans past it, in text the parser appended, point at its end).
    fn moved(&self, e: ParseError, at: usize, len: usize) -> MatchError {
        let start = at + e.span.start.min(len);
        let end = at + e.span.end.min(len).max(e.span.start.min(len));
        self.error(start, end, e.message)
    }

    fn body(&mut self) -> Result<Body, MatchError> {
        self.skip_ws();
        if self.eat("{") {
            return Ok(Body::Nested(self.clauses()?));
        }
        let mark = self.pos;
        if self.eat_word("match") {
            self.skip_ws();
            if self.eat("{") {
                return Ok(Body::Nested(self.clauses()?));
            }
            return Err(self.error(self.pos, self.pos + 1, "expected `{` after `match`"));
        }
        self.pos = mark;
        let start = self.pos;
        let name_len = self.rest().find(|c: char| !is_name_char(c)).unwrap_or(self.rest().len());
        let name = self.rest()[..name_len].to_string();
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return Err(self.error(start, start + 1, "expected a handler name or `{` after `=>`"));
        }
        if name == "otherwise" {
            return Err(self.error(start, start + name_len, "`otherwise` is not a handler name"));
        }
        self.pos += name_len;
        let args = if self.eat("(") { self.args()? } else { Vec::new() };
        let handler = match self.handlers.iter().position(|(n, _)| *n == name) {
            Some(i) => {
                let arity = self.handlers[i].1;
                if arity != args.len() {
                    return Err(self.error(
                        start,
                        start + name_len,
                        format!(
                            "handler `{name}` takes {arity} argument(s) elsewhere, {} here",
                            args.len()
                        ),
                    ));
                }
                i
            }
            None => {
                self.handlers.push((name, args.len()));
                self.handlers.len() - 1
            }
        };
        Ok(Body::Handler { handler, args })
    }

    /// Arguments after `(`, through the matching `)`.
    fn args(&mut self) -> Result<Vec<Arg>, MatchError> {
        let open = self.pos - 1;
        let mut pieces = Vec::new();
        let mut depth = 0usize;
        let mut piece_start = self.pos;
        let bytes = self.clean.as_bytes();
        let mut i = self.pos;
        loop {
            let Some(&b) = bytes.get(i) else {
                return Err(self.error(open, open + 1, "this `(` is never closed"));
            };
            match b {
                b'(' | b'[' => depth += 1,
                b']' => depth = depth.saturating_sub(1),
                b')' if depth > 0 => depth -= 1,
                b')' => {
                    pieces.push((piece_start, i));
                    break;
                }
                b',' if depth == 0 => {
                    pieces.push((piece_start, i));
                    piece_start = i + 1;
                }
                b'\n' | b'{' | b'}' => {
                    return Err(self.error(open, open + 1, "this `(` is never closed on its line"));
                }
                _ => {}
            }
            i += 1;
        }
        self.pos = i + 1;
        if pieces.len() == 1 && self.clean[pieces[0].0..pieces[0].1].trim().is_empty() {
            return Ok(Vec::new());
        }
        pieces.into_iter().map(|(s, e)| self.arg(s, e)).collect()
    }

    fn arg(&self, start: usize, end: usize) -> Result<Arg, MatchError> {
        let raw = &self.clean[start..end];
        let lead = raw.len() - raw.trim_start().len();
        let text = raw.trim();
        let at = start + lead;
        if text.is_empty() {
            return Err(self.error(start, end.max(start + 1), "expected an argument"));
        }
        let (address, inner, inner_at) = match text.strip_prefix('&') {
            Some(rest) => {
                let l = rest.len() - rest.trim_start().len();
                (true, rest.trim_start(), at + 1 + l)
            }
            None => (false, text, at),
        };
        // The argument as the left side of a relation: pflang's own lowering gives its
        // value and the protocol checks that guard it.
        let relation = format!("{inner} = 0");
        let filter = weir_pflang::compile(&relation, self.options, self.names)
            .map_err(|e| self.moved(e, inner_at, inner.len()))?;
        let not_arith = || self.error(at, at + text.len(), "expected an arithmetic expression");
        let (checks, lhs) = split_relation(filter.pred).ok_or_else(not_arith)?;
        let value = if address {
            match lhs {
                Expr::Load { offset, .. } => *offset,
                _ => {
                    return Err(self.error(
                        at,
                        at + text.len(),
                        "`&` takes a packet accessor `proto[offset]`",
                    ))
                }
            }
        } else {
            lhs
        };
        Ok(Arg { text: text.to_string(), checks, value })
    }
}

/// `checks... and lhs = 0` (what pflang lowers a relation to) into its parts.
fn split_relation(pred: Pred) -> Option<(Vec<Pred>, Expr)> {
    let mut parts = match pred {
        Pred::And(parts) => parts,
        p => vec![p],
    };
    match parts.pop()? {
        Pred::Cmp { op: CmpOp::Eq, lhs, rhs: Expr::Const(0) } => Some((parts, lhs)),
        _ => None,
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.')
}

fn line_of(src: &str, at: usize) -> usize {
    src.get(..at.min(src.len())).map_or(1, |s| s.matches('\n').count() + 1)
}

/// A [`MatchError`] for source bytes `start..end`: the line holding `start`, the span cut
/// at that line's end.
fn located(src: &str, start: usize, end: usize, message: String) -> MatchError {
    let start = floor_char(src, start.min(src.len()));
    let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = src[start..].find('\n').map_or(src.len(), |i| i + start);
    let end = floor_char(src, end.clamp(start, line_end));
    MatchError {
        line: line_of(src, start),
        line_text: src[line_start..line_end].to_string(),
        error: ParseError::new(Span { start: start - line_start, end: end - line_start }, message),
    }
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
