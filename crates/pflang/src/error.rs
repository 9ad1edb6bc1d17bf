//! Parse errors that point into the expression: a message, a byte span, and a rendering
//! with the expression and a caret line under the offending text.

use crate::ast::Span;

/// A lexing or parsing error at `span` (byte offsets into the expression).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at byte {})", span.start)]
pub struct ParseError {
    pub span: Span,
    pub message: String,
}

impl ParseError {
    pub fn new(span: Span, message: impl Into<String>) -> ParseError {
        ParseError { span, message: message.into() }
    }

    /// 1-based column (in characters) where the error starts.
    pub fn column(&self, expr: &str) -> usize {
        let start = self.span.start.min(expr.len());
        expr.char_indices().take_while(|(i, _)| *i < start).count() + 1
    }

    /// The message, the expression, and carets under the span:
    ///
    /// ```text
    /// error at column 6: expected a host, network, port or name after `host`, found end of expression
    ///   host
    ///       ^
    /// ```
    pub fn render(&self, expr: &str) -> String {
        self.render_as("error", expr)
    }

    /// [`ParseError::render`] with another word than `error` in front (`warning`: the same
    /// position and caret for a message that does not refuse the input).
    pub fn render_as(&self, kind: &str, expr: &str) -> String {
        let start = self.span.start.min(expr.len());
        let end = self.span.end.clamp(start, expr.len());
        // Control characters would shift the caret; show them as spaces.
        let shown: String = expr.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let col = expr.char_indices().take_while(|(i, _)| *i < start).count();
        let width = expr.char_indices().filter(|(i, _)| *i >= start && *i < end).count().max(1);
        format!(
            "{kind} at column {}: {}\n  {}\n  {}{}",
            col + 1,
            self.message,
            shown,
            " ".repeat(col),
            "^".repeat(width)
        )
    }
}
