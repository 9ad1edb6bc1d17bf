//! The one error type of the eBPF assembler. Text errors name their place as 1-based line
//! and column (columns count characters, so a caret lines up under the token even after
//! non-ASCII text), and can show the offending source line with a caret under it.

use thiserror::Error;

/// An assembly error: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}, column {column}: {message}")]
pub struct AsmError {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column (in characters) of the offending token, or just past the end of the
    /// line when something is missing.
    pub column: usize,
    pub message: String,
}

impl AsmError {
    pub fn new(line: usize, column: usize, message: impl Into<String>) -> Self {
        AsmError { line, column, message: message.into() }
    }

    /// The source line of the error with a caret under the column, for people:
    ///
    /// ```text
    ///  3 | add %r11, 1
    ///    |     ^
    /// ```
    ///
    /// Tabs before the column are repeated in the caret line so that the caret stays under
    /// the token whatever the tab width. No trailing newline.
    pub fn render(&self, source: &str) -> String {
        let text = source.lines().nth(self.line.saturating_sub(1)).unwrap_or("");
        let number = self.line.to_string();
        let gutter = " ".repeat(number.len());
        let mut pad: String = text
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        // A column past the end of the line (a missing operand) still gets its caret there.
        let shown = pad.chars().count();
        pad.push_str(&" ".repeat(self.column.saturating_sub(1).saturating_sub(shown)));
        format!(" {number} | {text}\n {gutter} | {pad}^")
    }
}
