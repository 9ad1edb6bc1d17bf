//! Relations between arithmetic expressions, `proto[expr:size]`, `len`, `less`, `greater`
//! and `byte`.
//!
//! STUB (being completed).

use weir_filter::{CmpOp, Expr, Pred};

use super::{unsupported, CompileError, Lowerer};
use crate::ast::{ByteOp, Relation, Span};

impl Lowerer<'_> {
    pub(crate) fn relation(&mut self, _r: &Relation, span: Span) -> Result<Pred, CompileError> {
        Err(unsupported(span, "relations (lowering in progress)"))
    }

    /// `less N`: the wire length is at most N.
    pub(crate) fn less(&mut self, n: u32) -> Pred {
        Pred::cmp(CmpOp::Le, Expr::WireLen, Expr::Const(n))
    }

    /// `greater N`: the wire length is at least N.
    pub(crate) fn greater(&mut self, n: u32) -> Pred {
        Pred::cmp(CmpOp::Ge, Expr::WireLen, Expr::Const(n))
    }

    pub(crate) fn byte(&mut self, _offset: u32, _op: ByteOp, _value: u32) -> Pred {
        Pred::Const(false)
    }
}
